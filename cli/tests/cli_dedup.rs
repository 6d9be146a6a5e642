//! `simstore dedup`: decisions equal a brute-force replay of the `hash`
//! fingerprints (nearest, then earliest, earlier new documents only); a
//! rerun, a rerun after a partial run, and a rerun after losing the tail of
//! the decision log all print exactly the lines of a clean run.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;

fn simstore(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_simstore"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A temporary directory holding [`corpus`] in its `docs`, and that path.
fn corpus_in_tempdir() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    corpus(&docs);
    (tmp, docs)
}

/// Real texts (Debian's license files) plus lightly edited copies.
fn corpus(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let src = Path::new("/usr/share/common-licenses");
    for name in [
        "Apache-2.0",
        "GFDL-1.2",
        "GFDL-1.3",
        "GPL-2",
        "GPL-3",
        "LGPL-2",
        "LGPL-2.1",
        "MPL-2.0",
    ] {
        let text =
            std::fs::read_to_string(src.join(name)).expect("Debian base-files license texts");
        std::fs::write(dir.join(format!("{name}.txt")), &text).unwrap();
        // An edited copy: one word changed near the middle.
        let mid = text.len() / 2;
        let at = text[mid..].find(" the ").map_or(mid, |i| mid + i);
        let edited = format!("{} this {}", &text[..at], &text[at + 5..]);
        std::fs::write(dir.join(format!("{name}.edited.txt")), edited).unwrap();
    }
    std::fs::write(
        dir.join("zz-copy-of-GPL-3.txt"),
        std::fs::read(src.join("GPL-3")).unwrap(),
    )
    .unwrap();
}

fn brute_force(hashes: &str, k: u32) -> Vec<String> {
    let docs: Vec<(u64, &str)> = hashes
        .lines()
        .map(|l| {
            let (fp, name) = l.split_once('\t').unwrap();
            (u64::from_str_radix(fp, 16).unwrap(), name)
        })
        .collect();
    let mut new: Vec<(u64, &str)> = Vec::new();
    let mut lines = Vec::new();
    for &(fp, name) in &docs {
        let best = new
            .iter()
            .enumerate()
            .map(|(i, &(f, n))| ((f ^ fp).count_ones(), i, f, n))
            .filter(|&(d, ..)| d <= k)
            .min();
        let dup = match best {
            Some((d, _, f, n)) => {
                format!("{{\"id\":\"{n}\",\"fingerprint\":\"{f:016x}\",\"distance\":{d}}}")
            }
            None => {
                new.push((fp, name));
                "null".into()
            }
        };
        lines.push(format!(
            "{{\"id\":\"{name}\",\"fingerprint\":\"{fp:016x}\",\"duplicate_of\":{dup}}}"
        ));
    }
    lines
}

#[test]
fn decisions_match_brute_force_and_reruns_repeat_them() {
    let (tmp, docs) = corpus_in_tempdir();
    let d = docs.to_str().unwrap();
    let hashes = simstore(&["hash", d]);
    let expect = brute_force(&hashes, 3);
    assert!(
        expect.iter().filter(|l| !l.ends_with("null}")).count() >= 8,
        "{expect:#?}"
    );

    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    let first = simstore(&["dedup", s, d]);
    assert_eq!(first.lines().collect::<Vec<_>>(), expect);
    // A rerun prints the same lines and inserts nothing.
    let stats = simstore(&["stats", s]);
    assert_eq!(simstore(&["dedup", s, d]), first);
    assert_eq!(
        simstore(&["stats", s]).split("\"bytes_on_disk\"").next(),
        stats.split("\"bytes_on_disk\"").next()
    );

    // Losing the log's tail (a crash after the store commit, before the log
    // write), including a torn last line, changes nothing.
    let log = store.join("dedup.log");
    let text = std::fs::read_to_string(&log).unwrap();
    let keep: Vec<&str> = text.lines().take(4).collect();
    std::fs::write(&log, format!("{}\n{{\"seq\":4,\"li", keep.join("\n"))).unwrap();
    assert_eq!(simstore(&["dedup", s, d]), first);

    // A run over a prefix of the inputs, then over all of them.
    let store2 = tmp.path().join("store2");
    let s2 = store2.to_str().unwrap();
    let partial = simstore(&[
        "dedup",
        s2,
        docs.join("Apache-2.0.edited.txt").to_str().unwrap(),
        docs.join("Apache-2.0.txt").to_str().unwrap(),
    ]);
    assert_eq!(partial.lines().count(), 2);
    let mut names: Vec<String> = hashes
        .lines()
        .map(|l| l.split_once('\t').unwrap().1.to_string())
        .collect();
    names.sort();
    let args: Vec<&str> = ["dedup", s2]
        .into_iter()
        .chain(names.iter().map(String::as_str))
        .collect();
    assert_eq!(simstore(&args), first);
}

#[test]
fn killed_dedup_reruns_to_the_same_decisions() {
    killed_reruns(&[], &[40, 150, 400]);
}

/// The same with sketches: each document's pair and sketch are committed
/// together, and the store verifies with one sketch per document.
#[test]
fn killed_similarity_dedup_reruns_to_the_same_decisions() {
    let (_tmp, store) = killed_reruns(&["--similarity", "0.8"], &[20, 60, 150]);
    let verify = simstore(&["verify", store.to_str().unwrap()]);
    let stats = simstore(&["stats", store.to_str().unwrap()]);
    let ids = stats
        .split("\"ids\":")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    assert!(
        verify.contains("\"ok\":true") && verify.contains(&format!("\"sketches\":{ids},")),
        "{verify} {stats}"
    );
}

/// Runs `dedup` with `extra` arguments over the copyright files cleanly,
/// then killed after each delay and rerun: every run prints a prefix of
/// the clean run's lines, the last prints them all, and the store holds
/// what the clean one does. Returns the killed runs' store (and the
/// directory holding it).
fn killed_reruns(extra: &[&str], delays_ms: &[u64]) -> (tempfile::TempDir, std::path::PathBuf) {
    let inputs = common::copyright_files();
    assert!(inputs.len() > 100, "too few documents: {}", inputs.len());
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path();
    let clean_store = tmp.join("clean");
    let mut args = vec!["dedup".to_string(), clean_store.display().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(inputs.iter().cloned());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let clean = simstore(&refs);

    let store = tmp.join("killed");
    args[1] = store.display().to_string();
    for &delay_ms in delays_ms {
        let mut child = Command::new(env!("CARGO_BIN_EXE_simstore"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        child.kill().unwrap();
        let partial = child.wait_with_output().unwrap().stdout;
        let partial = String::from_utf8_lossy(&partial);
        let complete: Vec<&str> = partial.lines().collect();
        let complete = &complete[..complete.len().saturating_sub(1)];
        assert!(
            clean.lines().zip(complete).all(|(a, b)| a == *b),
            "killed run diverged"
        );
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(simstore(&refs), clean);
    let stats_a = simstore(&["stats", clean_store.to_str().unwrap()]);
    let stats_b = simstore(&["stats", store.to_str().unwrap()]);
    let head = |s: &str| s.split("\"bytes_on_disk\"").next().unwrap().to_string();
    assert_eq!(
        head(&stats_b),
        head(&stats_a),
        "the killed runs inserted something twice"
    );
    (dir, store)
}

/// With stderr on a terminal (util-linux `script` provides one), dedup
/// shows a progress line with counts, rate and ETA; without one it does not.
#[test]
fn progress_line_only_on_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let log = tmp.path().join("typescript");
    let command = format!(
        "{} dedup {} /usr/share/common-licenses > /dev/null",
        env!("CARGO_BIN_EXE_simstore"),
        store.display()
    );
    let status = Command::new("script")
        .args(["-qec", &command, log.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("util-linux script");
    assert!(status.success());
    let screen = String::from_utf8_lossy(&std::fs::read(&log).unwrap()).to_string();
    assert!(
        screen.contains(" files, ") && screen.contains("/s, ETA "),
        "{screen}"
    );
    assert!(screen.contains("simstore: dedup: "), "{screen}");
    let plain = Command::new(env!("CARGO_BIN_EXE_simstore"))
        .args([
            "dedup",
            tmp.path().join("t").to_str().unwrap(),
            "/usr/share/common-licenses",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8(plain.stderr).unwrap();
    assert!(
        !stderr.contains("ETA") && stderr.contains("simstore: dedup: "),
        "{stderr}"
    );
}

/// `dedup --similarity`'s decisions replayed from `hash --sketch`: for each
/// document, among every earlier one (duplicates are stored too) within
/// the distance whose sketch passes `Sketch::recheck` among them all, the
/// most similar, then nearest, then earliest.
fn brute_force_similar(hashes: &str, k: u32, j: f64) -> Vec<String> {
    use simstore::simhash::Sketch;
    let docs: Vec<(u64, Sketch, &str)> = hashes
        .lines()
        .map(|l| {
            let mut f = l.splitn(3, '\t');
            let fp = u64::from_str_radix(f.next().unwrap(), 16).unwrap();
            let hex = f.next().unwrap();
            let bytes: Vec<u8> = (0..64)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                .collect();
            let sketch = Sketch::from_bytes(bytes.try_into().unwrap());
            assert_eq!(sketch.fingerprint(), fp);
            (fp, sketch, f.next().unwrap())
        })
        .collect();
    let mut lines = Vec::new();
    for (i, &(fp, sketch, name)) in docs.iter().enumerate() {
        let within: Vec<(usize, &(u64, Sketch, &str))> = docs[..i]
            .iter()
            .enumerate()
            .filter(|(_, (f, ..))| (f ^ fp).count_ones() <= k)
            .collect();
        let best = within
            .iter()
            .filter_map(|&(e, &(f, s, n))| {
                let similarity = sketch.recheck(&s, j, within.len())?;
                Some(((f ^ fp).count_ones(), similarity, e, f, n))
            })
            .min_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)).then(a.2.cmp(&b.2)));
        let dup = match best {
            Some((d, s, _, f, n)) => format!(
                "{{\"id\":\"{n}\",\"fingerprint\":\"{f:016x}\",\"distance\":{d},\"similarity\":{s:.3}}}"
            ),
            None => "null".into(),
        };
        lines.push(format!(
            "{{\"id\":\"{name}\",\"fingerprint\":\"{fp:016x}\",\"duplicate_of\":{dup}}}"
        ));
    }
    lines
}

#[test]
fn similarity_decisions_match_brute_force_over_sketches() {
    let (tmp, docs) = corpus_in_tempdir();
    let d = docs.to_str().unwrap();
    let hashes = simstore(&["hash", "--sketch", d]);
    // 0.8 needs distance 10; a new store's maximum is 8.
    let expect = brute_force_similar(&hashes, 8, 0.8);
    let flagged: Vec<&String> = expect.iter().filter(|l| !l.ends_with("null}")).collect();
    assert!(flagged.len() >= 8, "{expect:#?}");
    // GPL-3, its edited copy and its exact copy: the copy matches GPL-3
    // itself (similarity 1) rather than the edited one.
    assert!(
        expect
            .iter()
            .any(|l| l.contains("zz-copy-of-GPL-3.txt\",\"fingerprint")
                && l.contains("GPL-3.txt\",\"fingerprint")
                && l.contains("\"similarity\":1.000")),
        "{expect:#?}"
    );

    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    let first = simstore(&["dedup", s, "--similarity", "0.8", d]);
    assert_eq!(first.lines().collect::<Vec<_>>(), expect);
    let stats = simstore(&["stats", s]);
    assert!(stats.contains("\"max_distance\":8") && stats.contains("\"sketches\":true"));
    // Every document is stored, each with its sketch.
    assert!(
        stats.contains(&format!("\"ids\":{}", expect.len())),
        "{stats}"
    );
    assert!(simstore(&["verify", s]).contains(&format!("\"sketches\":{}", expect.len())));
    assert_eq!(simstore(&["dedup", s, "--similarity", "0.8", d]), first);

    // A stricter threshold on a new store: fewer flagged, never more.
    let strict = tmp.path().join("strict");
    let strict_out = simstore(&["dedup", strict.to_str().unwrap(), "--similarity", "0.95", d]);
    assert_eq!(
        strict_out.lines().collect::<Vec<_>>(),
        brute_force_similar(&simstore(&["hash", "--sketch", d]), 3, 0.95)
    );
    assert!(strict_out.matches("\"similarity\"").count() <= flagged.len());
}

#[test]
fn copies_of_a_boilerplate_page_match_as_brute_force_decides() {
    // 60 pages: copies of one boilerplate text of 400 words, edited
    // variants of it (each a different word changed) and copies of the
    // variants. Every
    // page is stored, so each copy has many candidates with similarity 1
    // (decided by the earliest) beside variants just below it.
    let tmp = tempfile::tempdir().unwrap();
    let docs = tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    let words: Vec<String> = (0..400).map(|i| format!("word{}", i * 7 % 113)).collect();
    let page = |edit: Option<usize>| {
        let mut w = words.clone();
        if let Some(at) = edit {
            w[at] = format!("edited{at}");
        }
        w.join(" ")
    };
    for i in 0..60usize {
        let text = match i % 6 {
            1 => page(Some(i)),
            4 => page(Some(i - 3)),
            _ => page(None),
        };
        std::fs::write(docs.join(format!("page{i:03}.txt")), text).unwrap();
    }
    let d = docs.to_str().unwrap();
    let hashes = simstore(&["hash", "--sketch", d]);
    // Some variants share the copies' fingerprint: a copy of such a
    // variant finds it among the copies' ids, not first.
    let mut counts = std::collections::HashMap::new();
    for line in hashes.lines() {
        *counts.entry(line.split('\t').next().unwrap()).or_insert(0) += 1;
    }
    assert!(counts.values().any(|&n| n > 45), "{counts:?}");
    for (j, k, name) in [("0.8", 8, "loose"), ("0.95", 3, "strict")] {
        let expect = brute_force_similar(&hashes, k, j.parse().unwrap());
        assert!(
            expect
                .iter()
                .filter(|l| l.contains("\"similarity\":1.000"))
                .count()
                >= 40,
            "{expect:#?}"
        );
        let store = tmp.path().join(name);
        let got = simstore(&["dedup", store.to_str().unwrap(), "--similarity", j, d]);
        assert_eq!(got.lines().collect::<Vec<_>>(), expect, "--similarity {j}");
    }
}

#[test]
fn similarity_and_plain_stores_do_not_mix() {
    let (tmp, docs) = corpus_in_tempdir();
    let d = docs.to_str().unwrap();
    let bin = env!("CARGO_BIN_EXE_simstore");
    let code = |args: &[&str]| common::run_bin(bin, args, "").status.code();
    let (plain, sketched) = (tmp.path().join("plain"), tmp.path().join("sketched"));
    let (p, s) = (plain.to_str().unwrap(), sketched.to_str().unwrap());
    simstore(&["dedup", p, d]);
    simstore(&["dedup", s, "--similarity", "0.9", d]);
    let stats = simstore(&["stats", s]);
    assert!(stats.contains("\"max_distance\":6"), "{stats}");
    // Store errors (exit 4), and nothing changes (but RocksDB's files).
    let contents = |dir: &str| {
        let stats = simstore(&["stats", dir]);
        let (head, tail) = stats.split_once("\"bytes_on_disk\"").unwrap();
        (
            head.to_string(),
            tail.split_once(',').unwrap().1.to_string(),
        )
    };
    let before = (contents(p), contents(s));
    assert_eq!(code(&["dedup", p, "--similarity", "0.9", d]), Some(4));
    assert_eq!(code(&["dedup", s, d]), Some(4));
    assert_eq!((contents(p), contents(s)), before);
    // Not a similarity: a usage error, no store created.
    let fresh = tmp.path().join("fresh");
    for bad in ["1.5", "-0.1", "x"] {
        assert_eq!(
            code(&["dedup", fresh.to_str().unwrap(), "--similarity", bad, d]),
            Some(2)
        );
    }
    assert!(!fresh.exists());
    // --max-distance beyond the store's maximum.
    assert_eq!(
        code(&["dedup", s, "--similarity", "0.9", "--max-distance", "7", d]),
        Some(6)
    );
}

/// `dedup --idf-sample N` learns document frequencies from the first N
/// documents when it creates the store, and its decisions are plain
/// dedup's over the fingerprints those frequencies weigh; a rerun uses the
/// stored frequencies and repeats them; the option is refused beside
/// `--similarity` (exit 2) and on a store created without (exit 4).
#[test]
fn idf_sample_decisions_match_brute_force() {
    use simstore::simhash::{Fingerprinter, Idf};
    let (tmp, docs) = corpus_in_tempdir();
    let d = docs.to_str().unwrap();
    let mut paths: Vec<std::path::PathBuf> = std::fs::read_dir(&docs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let texts: Vec<String> = paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let f = Fingerprinter::new();
    let idf = Idf::learn(texts[..6].iter().map(|t| f.feature_hashes(t)));
    let hashes: String = paths
        .iter()
        .zip(&texts)
        .map(|(p, t)| {
            let fp = f.fingerprint_idf(t, &idf).unwrap().fingerprint;
            format!("{fp:016x}\t{}\n", p.display())
        })
        .collect();
    let expect = brute_force(&hashes, 3);

    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    let first = simstore(&["dedup", s, "--idf-sample", "6", d]);
    assert_eq!(first.lines().collect::<Vec<_>>(), expect);
    assert!(simstore(&["stats", s]).contains("\"idf_documents\":6"));
    assert_eq!(simstore(&["dedup", s, d]), first);

    let bin = env!("CARGO_BIN_EXE_simstore");
    let code = |args: &[&str]| common::run_bin(bin, args, "").status.code();
    let fresh = tmp.path().join("fresh");
    let f = fresh.to_str().unwrap();
    assert_eq!(
        code(&["dedup", f, "--idf-sample", "6", "--similarity", "0.8", d]),
        Some(2)
    );
    let plain = tmp.path().join("plain");
    let p = plain.to_str().unwrap();
    simstore(&["dedup", p, d]);
    assert_eq!(code(&["dedup", p, "--idf-sample", "6", d]), Some(4));
}

/// Later runs name the documents of earlier runs they duplicate: each run
/// adds copies of pages first seen in every earlier run (names that
/// need quoting among them), and every decision must name the page it
/// copies, read back from the decision log.
#[test]
fn duplicates_of_documents_of_earlier_runs_name_them() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    let page = |p: usize| -> String {
        (0..300)
            .map(|w| format!("p{p}w{}", (w * 7 + p * 13) % 1000))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let name = |p: usize, copy: usize| format!("page \"{p}\" \\ copy {copy}");
    for run in 0..4 {
        let mut lines = String::new();
        let mut want = Vec::new();
        // Copies of every earlier run's pages, then this run's new pages.
        for p in 0..run * 5 {
            lines.push_str(&format!(
                "{{\"id\":{},\"text\":{}}}\n",
                serde_json::to_string(&name(p, run)).unwrap(),
                serde_json::to_string(&page(p)).unwrap()
            ));
            want.push((name(p, run), Some(name(p, p / 5))));
        }
        for p in run * 5..run * 5 + 5 {
            lines.push_str(&format!(
                "{{\"id\":{},\"text\":{}}}\n",
                serde_json::to_string(&name(p, run)).unwrap(),
                serde_json::to_string(&page(p)).unwrap()
            ));
            want.push((name(p, run), None));
        }
        let input = tmp.path().join(format!("run{run}.jsonl"));
        std::fs::write(&input, lines).unwrap();
        let out = simstore(&["dedup", "--jsonl", s, input.to_str().unwrap()]);
        let got: Vec<(String, Option<String>)> = out
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let of = v["duplicate_of"]["id"].as_str().map(str::to_string);
                (v["id"].as_str().unwrap().to_string(), of)
            })
            .collect();
        assert_eq!(got, want, "run {run}");
    }
}

/// `--max-candidates`: a page of a template nearer to a document than the
/// document's edited copy hides the copy when one candidate is re-checked,
/// not with the default; 0 and the flag without `--similarity` are refused.
#[test]
fn max_candidates_rechecks_only_the_nearest() {
    use simstore::simhash::Fingerprinter;
    let f = Fingerprinter::new();
    let mut seed = 0x5eed_u64;
    let mut word = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        format!("w{}", (seed >> 33) % 5000)
    };
    let template: Vec<String> = (0..150).map(|_| word()).collect();
    let own: Vec<String> = (0..30).map(|_| word()).collect();
    let page = |own: &[String]| format!("{} {}", template.join(" "), own.join(" "));
    let text = page(&own);
    let x = f.sketch(&text).unwrap();
    // An edited copy (three words changed) and a page of the template
    // nearer to the document than the copy, found by trying pages.
    let (mut copy, mut other) = (None, None);
    for _ in 0..20_000 {
        if copy.is_none() {
            let mut edited = own.clone();
            for i in [3, 14, 25] {
                edited[i] = word();
            }
            let q = f.sketch(&page(&edited)).unwrap();
            let d = (q.fingerprint() ^ x.fingerprint()).count_ones();
            if (2..=8).contains(&d) && x.recheck(&q, 0.8, 2).is_some() {
                copy = Some((page(&edited), d));
            }
            continue;
        }
        let mine: Vec<String> = (0..30).map(|_| word()).collect();
        let p = f.sketch(&page(&mine)).unwrap();
        if (p.fingerprint() ^ x.fingerprint()).count_ones() < copy.as_ref().unwrap().1
            && x.recheck(&p, 0.8, 1).is_none()
        {
            other = Some(page(&mine));
            break;
        }
    }
    let (copy, other) = (
        copy.expect("an edited copy").0,
        other.expect("a nearer page"),
    );
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("docs.jsonl");
    let line = |id: &str, text: &str| format!("{{\"id\":\"{id}\",\"text\":\"{text}\"}}\n");
    std::fs::write(
        &input,
        line("copy", &copy) + &line("other", &other) + &line("doc", &text),
    )
    .unwrap();
    let i = input.to_str().unwrap();
    let decide = |store: &str, extra: &[&str]| -> Vec<String> {
        let s = tmp.path().join(store);
        let mut args = vec![
            "dedup",
            s.to_str().unwrap(),
            "--similarity",
            "0.8",
            "--jsonl",
        ];
        args.extend_from_slice(extra);
        args.push(i);
        simstore(&args).lines().map(String::from).collect()
    };
    let all = decide("all", &[]);
    assert!(
        all[0].ends_with("null}") && all[1].ends_with("null}"),
        "{all:#?}"
    );
    assert!(
        all[2].contains("\"duplicate_of\":{\"id\":\"copy\""),
        "{all:#?}"
    );
    let one = decide("one", &["--max-candidates", "1"]);
    assert_eq!(one[..2], all[..2]);
    assert!(one[2].ends_with("null}"), "{one:#?}");
    assert_eq!(decide("two", &["--max-candidates", "2"]), all);
    for bad in [
        &[
            "dedup",
            "x",
            "--similarity",
            "0.8",
            "--max-candidates",
            "0",
            i,
        ][..],
        &["dedup", "x", "--max-candidates", "5", i][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_simstore"))
            .current_dir(tmp.path())
            .args(bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
    assert!(!tmp.path().join("x").exists());
}

/// A sample of fewer than two documents would weigh every feature 0 (one
/// document) or less (none), making every fingerprint alike: `dedup
/// --idf-sample` refuses it (exit 2) and leaves no store behind; from two
/// documents on it creates one.
#[test]
fn idf_sample_of_fewer_than_two_documents_is_refused() {
    let (tmp, docs) = corpus_in_tempdir();
    let one = docs.join("GPL-3.txt");
    let bin = env!("CARGO_BIN_EXE_simstore");
    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    for (sample, input) in [("1000", one.clone()), ("1", docs.clone())] {
        let out = common::run_bin(
            bin,
            &["dedup", s, "--idf-sample", sample, input.to_str().unwrap()],
            "",
        );
        assert_eq!(out.status.code(), Some(2), "--idf-sample {sample}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("at least 2"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!store.exists(), "a store was left behind");
    }
    let out = simstore(&["dedup", s, "--idf-sample", "2", docs.to_str().unwrap()]);
    let fps: std::collections::BTreeSet<&str> = out
        .lines()
        .map(|l| {
            l.split("\"fingerprint\":\"")
                .nth(1)
                .unwrap()
                .get(..16)
                .unwrap()
        })
        .collect();
    assert!(fps.len() >= 8, "fingerprints collapsed: {out}");
}

/// `dedup --max-distance K` on a new directory creates the store with
/// maximum distance K, even above the default, and answers at K.
#[test]
fn dedup_creates_its_store_with_the_asked_distance() {
    let (tmp, docs) = corpus_in_tempdir();
    let d = docs.to_str().unwrap();
    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    let hashes = simstore(&["hash", d]);
    let out = simstore(&["dedup", s, "--max-distance", "5", d]);
    assert_eq!(out.lines().collect::<Vec<_>>(), brute_force(&hashes, 5));
    assert!(simstore(&["stats", s]).contains("\"max_distance\":5"));
}

/// The summary counts a document answered by an earlier decision on its
/// name (a rerun, or a name repeated in a run) as neither new nor a
/// near-duplicate.
#[test]
fn summary_counts_documents_answered_by_earlier_decisions_apart() {
    let (tmp, docs) = corpus_in_tempdir();
    let d = docs.to_str().unwrap();
    let s = tmp.path().join("store");
    let s = s.to_str().unwrap();
    let expect = brute_force(&simstore(&["hash", d]), 3);
    let duplicates = expect.iter().filter(|l| !l.ends_with("null}")).count();
    let bin = env!("CARGO_BIN_EXE_simstore");
    let summary = |args: &[&str]| {
        let out = common::run_bin(bin, args, "");
        assert!(out.status.success());
        String::from_utf8(out.stderr).unwrap()
    };
    let n = expect.len();
    let first = summary(&["dedup", s, d]);
    assert!(
        first.contains(&format!(
            "{n} documents, {duplicates} near-duplicates, {} new, 0 answered",
            n - duplicates
        )),
        "{first}"
    );
    let again = summary(&["dedup", s, d, d]);
    assert!(
        again.contains(&format!(
            "{} documents, 0 near-duplicates, 0 new, {} answered",
            2 * n,
            2 * n
        )),
        "{again}"
    );
}

/// `add` to a store that `dedup` keeps still adds, with a warning that
/// `dedup` reads the store's ids as its decision numbers.
#[test]
fn add_to_a_dedup_store_warns() {
    let (tmp, docs) = corpus_in_tempdir();
    let store = tmp.path().join("store");
    let s = store.to_str().unwrap();
    simstore(&["dedup", s, docs.to_str().unwrap()]);
    let out = common::run_bin(
        env!("CARGO_BIN_EXE_simstore"),
        &["add", s],
        "0123456789abcdef 7\n",
    );
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("kept by dedup"), "{stderr}");
    let query = common::run_bin(
        env!("CARGO_BIN_EXE_simstore"),
        &["query", s],
        "0123456789abcdef\n",
    );
    assert!(String::from_utf8(query.stdout)
        .unwrap()
        .contains("\"ids\":[7]"));
    // `dedup` again, on stores it keeps or not: what it says on stderr.
    let dedup_stderr = |dir: &str| {
        let out = common::run_bin(
            env!("CARGO_BIN_EXE_simstore"),
            &["dedup", dir, docs.to_str().unwrap()],
            "",
        );
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8(out.stderr).unwrap()
    };
    // On this one it warns of the pair it did not write.
    let stderr = dedup_stderr(s);
    assert!(stderr.contains("pairs it did not write"), "{stderr}");
    // A store `dedup` does not keep gets no warning.
    let plain = tmp.path().join("plain");
    let p = plain.to_str().unwrap();
    simstore(&["create", p]);
    let out = common::run_bin(
        env!("CARGO_BIN_EXE_simstore"),
        &["add", p],
        "0123456789abcdef 7\n",
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `dedup` on a store filled by `add` warns; on its own store it does not.
    let stderr = dedup_stderr(p);
    assert!(stderr.contains("pairs it did not write"), "{stderr}");
    let own = tmp.path().join("own");
    let o = own.to_str().unwrap();
    simstore(&["dedup", o, docs.to_str().unwrap()]);
    let stderr = dedup_stderr(o);
    assert!(!stderr.contains("warning"), "{stderr}");
}
