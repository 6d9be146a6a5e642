//! The CLI contract: commands, input lines, output shapes, exit codes.

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "../../tests/common/raw.rs"]
mod raw;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{Model, Rng};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_simstore"))
}

/// `simstore ARGS` started with its standard input and output piped.
fn piped(args: &[&str]) -> std::process::Child {
    bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

fn run(args: &[&str], stdin: &str) -> Output {
    common::run_bin(env!("CARGO_BIN_EXE_simstore"), args, stdin)
}

fn ok(args: &[&str], stdin: &str) -> String {
    common::ok_bin(env!("CARGO_BIN_EXE_simstore"), args, stdin)
}

fn expected_line(q: u64, matches: &[(u32, u64, Vec<u64>)]) -> String {
    let m: Vec<String> = matches
        .iter()
        .map(|(d, f, ids)| {
            let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
            format!(
                "{{\"fingerprint\":\"{f:016x}\",\"distance\":{d},\"ids\":[{}]}}",
                ids.join(",")
            )
        })
        .collect();
    format!("{{\"query\":\"{q:016x}\",\"matches\":[{}]}}", m.join(","))
}

fn json_field(json: &str, field: &str) -> u64 {
    let at = json
        .find(&format!("\"{field}\":"))
        .unwrap_or_else(|| panic!("{field} missing in {json}"));
    json[at + field.len() + 3..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

fn dir_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn add_query_delete_compact_stats_verify_agree_with_brute_force() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir_str(&dir);
    ok(
        &[
            "create",
            d,
            "--max-distance",
            "3",
            "--expected-size",
            "5000",
            "--block-size",
            "64",
        ],
        "",
    );
    let mut rng = Rng(42);
    let mut model = Model::default();
    let data = common::clustered(3000, &mut rng);
    let mut input = String::new();
    for (i, &fp) in data.iter().enumerate() {
        if i % 3 == 0 {
            input.push_str(&format!("0x{fp:016X}\n"));
            model.insert(fp, None);
        } else {
            input.push_str(&format!("{fp:016x} {i}\n"));
            model.insert(fp, Some(i as u64));
        }
    }
    let acks = ok(&["add", d, "--ack", "--durability", "buffered"], &input);
    assert_eq!(acks.lines().last(), Some("acked 3000"));
    let qs = common::queries(&data, 300, &mut rng);
    let qinput: String = qs.iter().map(|q| format!("{q:016x}\n")).collect();
    let check = |model: &Model| {
        for k in [0u32, 1, 2, 3] {
            let ks = k.to_string();
            let expect: Vec<String> = qs
                .iter()
                .map(|&q| expected_line(q, &model.query(q, k)))
                .collect();
            let got = ok(&["query", d, "--max-distance", &ks], &qinput);
            assert_eq!(got.lines().collect::<Vec<_>>(), expect, "k={k}");
            let got = ok(&["query", d, "--max-distance", &ks, "--batch"], &qinput);
            assert_eq!(got.lines().collect::<Vec<_>>(), expect, "batch k={k}");
            let got = ok(&["query", d, "--max-distance", &ks, "--lazy"], &qinput);
            assert_eq!(got.lines().collect::<Vec<_>>(), expect, "lazy k={k}");
            for batch in [&[][..], &["--batch"]] {
                let args = [&["query", d, "--max-distance", &ks, "--first"][..], batch].concat();
                let first = ok(&args, &qinput);
                assert_eq!(first.lines().count(), qs.len(), "first k={k} {batch:?}");
                for (line, &q) in first.lines().zip(&qs) {
                    let all = model.query(q, k);
                    if all.is_empty() {
                        assert_eq!(line, expected_line(q, &[]));
                    } else {
                        assert!(
                            all.iter()
                                .any(|m| line == expected_line(q, std::slice::from_ref(m))),
                            "{line}"
                        );
                    }
                }
            }
        }
        let stats = ok(&["stats", d], "");
        assert_eq!(json_field(&stats, "fingerprints"), model.fps.len() as u64);
        assert_eq!(json_field(&stats, "ids"), model.ids());
        assert_eq!(json_field(&stats, "tables"), 4);
        assert_eq!(json_field(&stats, "max_distance"), 3);
        for f in ["blocks", "pending", "bytes_on_disk", "table_bytes"] {
            json_field(&stats, f);
        }
        let verify = ok(&["verify", d], "");
        assert!(verify.contains("\"ok\":true"), "{verify}");
    };
    check(&model);
    let compact = ok(&["compact", d], "");
    assert!(compact.contains("\"merged\":"), "{compact}");
    assert_eq!(json_field(&ok(&["stats", d], ""), "pending"), 0);
    check(&model);

    let mut del = String::new();
    let (mut pairs, mut fps) = (0, 0);
    for (i, (&fp, ids)) in model.fps.clone().iter().enumerate() {
        if i % 4 == 0 {
            del.push_str(&format!("{fp:016x}\n"));
            model.delete_fingerprint(fp);
            (pairs, fps) = (pairs + ids.len(), fps + 1);
        } else if i % 4 == 1 {
            if let Some(&id) = ids.iter().next() {
                del.push_str(&format!("{fp:016x} {id}\n"));
                model.delete(fp, id);
                (pairs, fps) = (pairs + 1, fps + usize::from(ids.len() == 1));
            }
        }
    }
    // Two lines naming nothing stored, both counted on stderr.
    let absent = (0..).find(|f| !model.fps.contains_key(f)).unwrap();
    del.push_str(&format!("{absent:016x}\n{absent:016x} 5\n"));
    let out = run(&["delete", d], &del);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "simstore: delete: removed {pairs} pair(s) and {fps} fingerprint(s); \
             2 line(s) named nothing stored\n"
        )
    );
    check(&model);
    ok(&["compact", d], "");
    check(&model);
}

#[test]
fn malformed_line_stops_with_its_number_and_keeps_earlier_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir_str(&dir);
    ok(&["create", d], "");
    let input = "0000000000000001 1\n0000000000000002\nnot-a-fingerprint\n0000000000000003 3\n";
    let out = run(&["add", d, "--ack"], input);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 3"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().lines().last(),
        Some("acked 2")
    );
    let q = ok(
        &["query", d, "--max-distance", "0"],
        "0000000000000001\n0000000000000002\n0000000000000003\n",
    );
    let lines: Vec<&str> = q.lines().collect();
    assert!(
        lines[0].contains("\"ids\":[1]")
            && lines[1].contains("\"distance\":0")
            && lines[2].ends_with("[]}")
    );

    for (bad, line) in [
        ("0000000000000001 -5\n", 1),
        ("\n0000000000000001 1 2\n", 2),
        ("00000000000000011\n", 1),
    ] {
        let out = run(&["add", d], bad);
        assert_eq!(out.status.code(), Some(3), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("line {line}:")));
    }
    let out = run(&["query", d], "0000000000000001\nxyz\n");
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 1);
    let out = run(&["delete", d], "0000000000000001 1\n0000000000000002 x\n");
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("removed 1 pair(s) and 1 fingerprint(s); 0 line(s)"),
        "{stderr}"
    );
    // A huge malformed line is named by a short prefix, not echoed whole.
    let huge = format!("0000000000000004 {}\n", "9x".repeat(5 << 20));
    let out = run(&["add", d], &huge);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.len() < 200 && stderr.contains("line 1: id \"9x9x") && stderr.contains("bytes)"),
        "{} bytes: {}",
        stderr.len(),
        &stderr[..stderr.len().min(300)]
    );
    let q = ok(&["query", d, "--max-distance", "0"], "0000000000000001\n");
    assert!(
        q.contains("\"matches\":[]"),
        "the delete before the bad line must be applied: {q}"
    );
}

#[test]
fn store_errors_have_their_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir_str(&dir);
    ok(&["create", d, "--max-distance", "2"], "");
    assert_eq!(run(&["create", d], "").status.code(), Some(4));
    assert_eq!(
        run(&["query", d, "--max-distance", "3"], "0000000000000001\n")
            .status
            .code(),
        Some(6)
    );
    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    assert_eq!(run(&["stats", dir_str(&plain)], "").status.code(), Some(4));
    assert_eq!(std::fs::read_dir(&plain).unwrap().count(), 0);
    assert_eq!(
        run(&["create", d, "--tables", "7"], "").status.code(),
        Some(4)
    );
    // A file where the store would go: refused as existing, left as it was.
    let file = tmp.path().join("file");
    std::fs::write(&file, b"keep").unwrap();
    for args in [
        vec!["create", dir_str(&file)],
        vec!["dedup", dir_str(&file), "-"],
    ] {
        let out = run(&args, "some words");
        assert_eq!(out.status.code(), Some(4), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"keep");
    assert_eq!(run(&["frobnicate"], "").status.code(), Some(2));
    let help = ok(&["--help"], "");
    assert!(help.contains("Exit codes"));
}

/// A store whose database lost its `CURRENT` or `MANIFEST` file, or its
/// whole directory, is corrupt: `verify` prints its JSON report with the
/// problem and exits 5, and so does a query.
#[test]
fn missing_database_files_are_reported_as_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    for lost in ["CURRENT", "MANIFEST", "db"] {
        let dir = tmp.path().join(lost);
        let d = dir_str(&dir);
        ok(&["create", d], "");
        ok(&["add", d], "0123456789abcdef 7\n");
        let db = dir.join("db");
        match lost {
            "db" => std::fs::remove_dir_all(&db).unwrap(),
            _ => {
                for f in std::fs::read_dir(&db).unwrap() {
                    let f = f.unwrap().path();
                    if f.file_name().unwrap().to_str().unwrap().starts_with(lost) {
                        std::fs::remove_file(f).unwrap();
                    }
                }
            }
        }
        let out = run(&["verify", d], "");
        assert_eq!(out.status.code(), Some(5), "{lost}");
        let report = String::from_utf8(out.stdout).unwrap();
        assert!(report.starts_with("{\"ok\":false,"), "{lost}: {report}");
        assert!(report.contains("missing"), "{lost}: {report}");
        let query = run(&["query", d], "0123456789abcdef\n");
        assert_eq!(query.status.code(), Some(5), "{lost}");
    }
}

#[test]
fn second_process_gets_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir_str(&dir);
    ok(&["create", d], "");
    let mut holder = piped(&["add", d, "--ack"]);
    let mut stdin = holder.stdin.take().unwrap();
    let mut stdout = BufReader::new(holder.stdout.take().unwrap());
    stdin.write_all(b"00000000000000aa 1\n").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "acked 1");
    let out = run(&["stats", d], "");
    assert_eq!(out.status.code(), Some(4));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already open"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(stdin);
    assert!(holder.wait().unwrap().success());
    assert!(ok(&["query", d, "--max-distance", "0"], "00000000000000aa\n").contains("\"ids\":[1]"));
}

/// The store at `d`, after `add`s of the fingerprints `sent` (line `i`
/// the `i`-th) were killed: every line in `acked` is stored, the store
/// counts no fingerprint that was not sent, and it verifies.
fn check_no_loss_no_phantom(d: &str, sent: &[u64], acked: Vec<std::ops::Range<usize>>) {
    let qinput: String = sent.iter().map(|q| format!("{q:016x}\n")).collect();
    let out = ok(&["query", d, "--max-distance", "0"], &qinput);
    let found: Vec<bool> = out
        .lines()
        .map(|l| !l.ends_with("\"matches\":[]}"))
        .collect();
    assert_eq!(found.len(), sent.len());
    for i in acked.into_iter().flatten() {
        assert!(found[i], "acknowledged line {i} lost");
    }
    let stats = ok(&["stats", d], "");
    let present = found.iter().filter(|&&f| f).count() as u64;
    assert_eq!(
        json_field(&stats, "fingerprints"),
        present,
        "phantom fingerprints"
    );
    assert!(ok(&["verify", d], "").contains("\"ok\":true"));
}

#[test]
fn killed_add_loses_no_acknowledged_line_and_grows_no_phantom() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir_str(&dir);
    ok(&["create", d, "--block-size", "64"], "");
    let mut rng = Rng(7);
    let mut sent: Vec<u64> = Vec::new();
    let mut acked: Vec<std::ops::Range<usize>> = Vec::new();
    for (cycle, durability) in ["sync", "buffered", "sync", "buffered"].iter().enumerate() {
        let mut child = piped(&["add", d, "--ack", "--durability", durability]);
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let start = sent.len();
        let mut line = String::new();
        let mut run_acked = 0;
        for round in 0..(5 + cycle * 3) {
            let mut chunk = String::new();
            for _ in 0..(1 + round * 37 % 400) {
                let fp = rng.next();
                chunk.push_str(&format!("{fp:016x} {}\n", sent.len()));
                sent.push(fp);
            }
            stdin.write_all(chunk.as_bytes()).unwrap();
            stdin.flush().unwrap();
            line.clear();
            stdout.read_line(&mut line).unwrap();
            let n = common::ack_count(Ok(line.clone()));
            run_acked = run_acked.max(n);
        }
        // More input in flight, then SIGKILL without waiting for its ack.
        let mut chunk = String::new();
        for _ in 0..500 {
            let fp = rng.next();
            chunk.push_str(&format!("{fp:016x} {}\n", sent.len()));
            sent.push(fp);
        }
        let _ = stdin.write_all(chunk.as_bytes());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(run_acked > 0);
        acked.push(start..start + run_acked);
        if cycle == 1 {
            ok(&["compact", d], "");
        }
    }
    check_no_loss_no_phantom(d, &sent, acked);
}

#[test]
fn demo_runs_and_agrees_with_brute_force() {
    let out = ok(&["demo", "--size", "20000", "--queries", "2000"], "");
    assert!(
        out.contains("200 of 200 sampled queries agree exactly"),
        "{out}"
    );
    assert!(out.contains("queries at k = 3"), "{out}");
}

/// An `add` of more lines than the merge threshold (read ahead into one
/// batch, which then takes the bulk path) stores every fingerprint with
/// its id and leaves none pending.
#[test]
fn large_add_takes_the_bulk_path_and_acknowledges_everything() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let dir_s = dir.to_str().unwrap();
    assert!(run(&["create", dir_s], "").status.success());
    let mut rng = Rng(5);
    let fps: Vec<u64> = (0..70_000).map(|_| rng.next()).collect();
    let input: String = fps
        .iter()
        .enumerate()
        .map(|(i, fp)| format!("{fp:016x} {i}\n"))
        .collect();
    // From a file and without --ack, so that a batch ends only where the
    // input pauses for 100 ms: every line is read into one batch. (With
    // --ack a batch ends wherever the reader has not yet handed over the
    // next chunk, which on a loaded machine may split it.)
    let lines = tmp.path().join("lines");
    std::fs::write(&lines, &input).unwrap();
    let out = bin()
        .args(["add", dir_s])
        .stdin(std::fs::File::open(&lines).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    let stats = run(&["stats", dir_s], "");
    let stats = String::from_utf8(stats.stdout).unwrap();
    assert!(stats.contains("\"fingerprints\":70000"), "{stats}");
    assert!(stats.contains("\"pending\":0"), "{stats}");
    let probe: String = fps
        .iter()
        .step_by(7001)
        .map(|fp| format!("{fp:016x}\n"))
        .collect();
    let out = run(&["query", dir_s, "--max-distance", "0"], &probe);
    let text = String::from_utf8(out.stdout).unwrap();
    for (line, i) in text.lines().zip((0..70_000).step_by(7001)) {
        assert!(line.contains(&format!("[{i}]")), "{line}");
    }
}

/// `--memory-budget` (added to every command that opens a store): with 0
/// the tables stay on disk (`stats` says so) and queries, single and batch,
/// answer exactly as brute force; sizes take K/M/G/T; a malformed size is a
/// usage error (exit 2) that changes nothing.
#[test]
fn memory_budget_serves_from_disk_with_the_same_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir_str(&dir);
    ok(
        &["create", d, "--expected-size", "5000", "--block-size", "64"],
        "",
    );
    let mut rng = Rng(7);
    let mut model = Model::default();
    let data = common::clustered(2000, &mut rng);
    let input: String = data.iter().map(|fp| format!("{fp:016x}\n")).collect();
    for &fp in &data {
        model.insert(fp, None);
    }
    ok(&["add", d, "--memory-budget", "0"], &input);
    ok(&["compact", d, "--memory-budget", "0"], "");
    let on_disk = ok(&["stats", d, "--memory-budget", "0"], "");
    assert!(on_disk.contains("\"tables_in_memory\":false"), "{on_disk}");
    let held = ok(&["stats", d, "--memory-budget", "64M"], "");
    assert!(held.contains("\"tables_in_memory\":true"), "{held}");
    let qs = common::queries(&data, 200, &mut rng);
    let qinput: String = qs.iter().map(|q| format!("{q:016x}\n")).collect();
    let expect: String = qs
        .iter()
        .map(|&q| expected_line(q, &model.query(q, 3)) + "\n")
        .collect();
    for extra in [&[][..], &["--batch"][..]] {
        let mut args = vec!["query", d, "--memory-budget", "0"];
        args.extend_from_slice(extra);
        assert_eq!(ok(&args, &qinput), expect, "{args:?}");
    }
    for bad in ["12X", "lots", "99999999999T", ""] {
        let out = run(&["stats", d, "--memory-budget", bad], "");
        assert_eq!(out.status.code(), Some(2), "--memory-budget {bad:?}");
    }
    assert_eq!(
        json_field(&ok(&["stats", d], ""), "fingerprints"),
        model.fps.len() as u64
    );
}

/// `simstore query` answers each line as soon as it arrives (queries read
/// together are answered together, but none waits for input still to
/// come): a caller writing one query and waiting for its answer gets it.
#[test]
fn query_answers_a_line_before_the_next_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let d = dir_str(&store);
    ok(&["create", d, "--max-distance", "3"], "");
    ok(&["add", d], "00000000000000ff 1\n");
    for extra in [&[][..], &["--first"][..]] {
        let mut child = piped(&[&["query", d][..], extra].concat());
        let mut input = child.stdin.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let output = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines() {
                if tx.send(line.unwrap()).is_err() {
                    return;
                }
            }
        });
        for q in ["00000000000000fe", "0000000000000000", "00000000000000ff"] {
            writeln!(input, "{q}").unwrap();
            input.flush().unwrap();
            let answer = rx
                .recv_timeout(std::time::Duration::from_secs(30))
                .expect("no answer while the next query is still to come");
            assert!(answer.contains(&format!("\"query\":\"{q}\"")), "{answer}");
        }
        drop(input);
        assert!(child.wait().unwrap().success());
        assert!(rx.recv().is_err(), "an answer too many");
    }
}

/// `add` and `compact` killed at random moments while merges move
/// fingerprints through the levels (a small merge threshold): nothing
/// acknowledged is lost, nothing unsent appears, the store verifies, and
/// the levels were used.
#[test]
fn killed_add_and_compact_through_the_levels_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir_str(&dir);
    ok(&["create", d, "--block-size", "64"], "");
    let mut rng = Rng(11);
    let mut sent: Vec<u64> = Vec::new();
    let mut acked: Vec<std::ops::Range<usize>> = Vec::new();
    let mut most_levels = 0;
    for cycle in 0..6u64 {
        let durability = if cycle % 2 == 0 { "sync" } else { "buffered" };
        let mut child = piped(&[
            "add",
            d,
            "--ack",
            "--durability",
            durability,
            "--merge-threshold",
            "100",
        ]);
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let start = sent.len();
        let mut run_acked = 0;
        let mut line = String::new();
        for round in 0..12 {
            let mut chunk = String::new();
            for _ in 0..(40 + round * 13 % 90) {
                let fp = rng.next();
                chunk.push_str(&format!("{fp:016x} {}\n", sent.len()));
                sent.push(fp);
            }
            stdin.write_all(chunk.as_bytes()).unwrap();
            stdin.flush().unwrap();
            line.clear();
            stdout.read_line(&mut line).unwrap();
            run_acked = run_acked.max(common::ack_count(Ok(line.clone())));
        }
        // More in flight, then SIGKILL at a random moment (merges run
        // behind the acknowledgements).
        let mut chunk = String::new();
        for _ in 0..300 {
            let fp = rng.next();
            chunk.push_str(&format!("{fp:016x} {}\n", sent.len()));
            sent.push(fp);
        }
        let _ = stdin.write_all(chunk.as_bytes());
        std::thread::sleep(std::time::Duration::from_millis(rng.next() % 40));
        child.kill().unwrap();
        child.wait().unwrap();
        acked.push(start..start + run_acked);
        let stats = ok(&["stats", d], "");
        let held = stats
            .split("\"levels\":[")
            .nth(1)
            .unwrap()
            .split(']')
            .next()
            .unwrap()
            .split("\"fingerprints\":")
            .skip(1)
            .filter(|f| !f.starts_with('0'))
            .count();
        most_levels = most_levels.max(held);
        if cycle % 3 == 2 {
            // A compaction killed at a random moment, or let finish.
            let mut compact = bin()
                .args(["compact", d])
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(rng.next() % 30));
            let _ = compact.kill();
            compact.wait().unwrap();
        }
    }
    check_no_loss_no_phantom(d, &sent, acked);
    assert!(most_levels >= 2, "only {most_levels} levels held");
}

/// `line` (a query answer) as `--max-ids n` prints it: each match's first
/// `n` ids, then how many it has.
fn limited(line: &str, n: usize) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("\"ids\":[") {
        let start = at + "\"ids\":[".len();
        let end = start + rest[start..].find(']').unwrap();
        let ids: Vec<&str> = rest[start..end]
            .split(',')
            .filter(|s| !s.is_empty())
            .collect();
        out.push_str(&rest[..start]);
        out.push_str(&ids[..n.min(ids.len())].join(","));
        out.push_str(&format!("],\"id_count\":{}", ids.len()));
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

#[test]
fn max_ids_limits_the_ids_printed_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let d = dir_str(&store);
    ok(&["create", d, "--max-distance", "3"], "");
    let hot = 0x00ff_00ff_00ff_00ffu64;
    let mut lines: String = (0..5_000)
        .map(|i| format!("{hot:016x} {}\n", 7 * i))
        .collect();
    lines.push_str(&format!(
        "{:016x} 3\n{:016x} 4\n{:016x}\n",
        hot ^ 1,
        hot ^ 6,
        hot ^ 7
    ));
    ok(&["add", d], &lines);
    let queries: String = [hot, hot ^ 1, hot ^ 3, 0x1234, hot ^ 0xf0]
        .iter()
        .map(|q| format!("{q:016x}\n"))
        .collect();
    for mode in [&[][..], &["--batch"], &["--first"], &["--probabilistic"]] {
        let full = ok(&[&["query", d][..], mode].concat(), &queries);
        // Every mode but --first (which stops at any match) lists them.
        assert!(mode == ["--first"] || full.contains(",34993]"), "{full}");
        for n in [0usize, 1, 3, 10_000] {
            let ns = n.to_string();
            let got = ok(
                &[&["query", d, "--max-ids", &ns][..], mode].concat(),
                &queries,
            );
            let want: Vec<String> = full.lines().map(|l| limited(l, n)).collect();
            assert_eq!(
                got.lines().collect::<Vec<_>>(),
                want,
                "{mode:?} --max-ids {n}"
            );
        }
    }
    // Not a count: a usage error.
    assert_eq!(
        run(&["query", d, "--max-ids", "-1"], "").status.code(),
        Some(2)
    );
}

/// `dump` prints every stored pair as `add` reads it, in order; fed to
/// `add` it rebuilds the store into one of another plan (one table here)
/// that dumps and answers the same; a reader closing early ends it
/// quietly, and a directory that is no store is an error that changes
/// nothing.
#[test]
fn dump_rebuilds_the_store_into_another_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let (a, b) = (dir_str(&a), dir_str(&b));
    ok(&["create", a, "--expected-size", "20000"], "");
    let mut rng = Rng(41);
    let mut model = Model::default();
    let mut lines = String::new();
    let data = common::clustered(4000, &mut rng);
    for (i, &fp) in data.iter().enumerate() {
        if i % 13 == 0 {
            lines.push_str(&format!("{fp:016x}\n"));
            model.insert(fp, None);
        } else {
            let id = rng.below(1 << 40);
            lines.push_str(&format!("{fp:016x} {id}\n"));
            model.insert(fp, Some(id));
        }
    }
    // Several ids on one fingerprint.
    for id in [5u64, 3, 900] {
        lines.push_str(&format!("{:016x} {id}\n", data[1]));
        model.insert(data[1], Some(id));
    }
    ok(&["add", a, "--merge-threshold", "500"], &lines);
    let mut deletes = String::new();
    for &fp in data.iter().step_by(29) {
        deletes.push_str(&format!("{fp:016x}\n"));
        model.delete_fingerprint(fp);
    }
    ok(&["delete", a], &deletes);
    let mut want = String::new();
    for (fp, ids) in &model.fps {
        if ids.is_empty() {
            want.push_str(&format!("{fp:016x}\n"));
        }
        for id in ids {
            want.push_str(&format!("{fp:016x} {id}\n"));
        }
    }
    let dumped = ok(&["dump", a], "");
    assert_eq!(dumped, want);
    assert_eq!(ok(&["dump", a, "--memory-budget", "0"], ""), want);

    ok(
        &["create", b, "--tables", "1", "--expected-size", "20000"],
        "",
    );
    ok(&["add", b], &dumped);
    assert_eq!(ok(&["dump", b], ""), want);
    let queries: String = common::queries(&data, 200, &mut rng)
        .iter()
        .map(|q| format!("{q:016x}\n"))
        .collect();
    assert_eq!(ok(&["query", a], &queries), ok(&["query", b], &queries));

    // A reader that stops early: exit 0, nothing on stderr.
    let mut child = bin()
        .args(["dump", a])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, want.lines().next().unwrap().to_string() + "\n");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    assert_eq!(run(&["dump", dir_str(&plain)], "").status.code(), Some(4));
    assert_eq!(std::fs::read_dir(&plain).unwrap().count(), 0);
}

/// A query whose match's ids are in a corrupt id block, asked after
/// others read with it: the queries before it are answered once each,
/// then the corruption is reported (exit 5); none is answered twice and
/// none after it is answered.
#[test]
fn queries_before_a_corrupt_block_are_answered_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir_str(&dir);
    ok(&["create", d], "");
    let mut rng = Rng(41);
    let stored: Vec<u64> = (0..5_000).map(|_| rng.next()).collect();
    let lines: String = stored
        .iter()
        .enumerate()
        .map(|(i, fp)| format!("{fp:016x} {i}\n"))
        .collect();
    ok(&["add", d], &lines);
    ok(&["compact", d], "");
    // Table 0 is the identity: an id block's key is a stored fingerprint.
    let key = raw::flip_first_record(&dir, "id-blocks", 16, 0x08);
    let key = u64::from_be_bytes(key.try_into().unwrap());
    assert!(stored.contains(&key));
    let far: Vec<u64> = std::iter::repeat_with(|| rng.next())
        .filter(|q| stored.iter().all(|s| (s ^ q).count_ones() > 3))
        .take(3)
        .collect();
    let input = format!(
        "{:016x}\n{:016x}\n{key:016x}\n{:016x}\n",
        far[0], far[1], far[2]
    );
    // A store of several tables answers probabilistic queries exactly,
    // through their own path.
    let modes = [
        &[][..],
        &["--first"],
        &["--max-ids", "1"],
        &["--probabilistic"],
        &["--probabilistic", "--first"],
    ];
    for mode in modes {
        let args: Vec<&str> = ["query", d].iter().chain(mode).copied().collect();
        let out = run(&args, &input);
        assert_eq!(out.status.code(), Some(5), "{mode:?}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        let answered: Vec<&str> = stdout.lines().collect();
        let expect: Vec<String> = far[..2]
            .iter()
            .map(|q| format!("{{\"query\":\"{q:016x}\",\"matches\":[]}}"))
            .collect();
        assert_eq!(answered, expect, "{mode:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("corrupt"), "{mode:?}: {stderr}");
    }
}
