//! One-table stores and probabilistic queries through the command line:
//! `create --tables 1`, `hash --weights`, `query --probabilistic`,
//! `dedup --probabilistic`.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::HashSet;

use common::{run_bin, Rng};

fn run(args: &[&str], stdin: &str) -> std::process::Output {
    run_bin(env!("CARGO_BIN_EXE_simstore"), args, stdin)
}

fn ok(args: &[&str], stdin: &str) -> String {
    common::ok_bin(env!("CARGO_BIN_EXE_simstore"), args, stdin)
}

/// The (fingerprint, ids) pairs of each answer line.
fn answers(out: &str) -> Vec<HashSet<String>> {
    out.lines()
        .map(|l| {
            l.split("\"fingerprint\":\"")
                .skip(1)
                .map(|m| m[..16].to_string())
                .collect()
        })
        .collect()
}

#[test]
fn probabilistic_answers_are_within_the_exact_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let s = store.to_str().unwrap();
    let created = ok(
        &["create", s, "--tables", "1", "--expected-size", "5000"],
        "",
    );
    assert!(created.contains("\"tables\":1"), "{created}");
    let mut rng = Rng(9);
    let fps: Vec<u64> = (0..5000).map(|_| rng.next()).collect();
    let lines: String = fps
        .iter()
        .enumerate()
        .map(|(i, f)| format!("{f:016x} {i}\n"))
        .collect();
    ok(&["add", s], &lines);
    // Queries near stored fingerprints, with volatilities that favour the
    // bits that were flipped, and without any.
    let mut queries = String::new();
    let mut plain = String::new();
    for i in 0..300 {
        let base = fps[i * 13];
        let (a, b) = (rng.below(64) as u32, rng.below(64) as u32);
        let q = base ^ (1u64 << a) ^ (1u64 << b);
        let v: String = (0..64)
            .map(|j| {
                if j == a || j == b {
                    "08".to_string()
                } else {
                    "30".to_string()
                }
            })
            .collect();
        queries.push_str(&format!("{q:016x} {v}\n"));
        plain.push_str(&format!("{q:016x}\n"));
    }
    let exact = answers(&ok(&["query", s], &plain));
    let probabilistic = answers(&ok(&["query", s, "--probabilistic"], &queries));
    let exhaustive = answers(&ok(
        &["query", s, "--probabilistic", "--recall", "1"],
        &queries,
    ));
    let uniform = answers(&ok(&["query", s, "--probabilistic"], &plain));
    let one = answers(&ok(
        &["query", s, "--probabilistic", "--max-probes", "1"],
        &queries,
    ));
    let first = answers(&ok(&["query", s, "--probabilistic", "--first"], &queries));
    assert_eq!(exhaustive, exact);
    let mut found = 0;
    for i in 0..300 {
        assert!(probabilistic[i].is_subset(&exact[i]));
        assert!(uniform[i].is_subset(&exact[i]));
        assert!(one[i].is_subset(&exact[i]));
        assert!(first[i].len() <= 1 && first[i].is_subset(&exact[i]));
        found += probabilistic[i].len();
    }
    // The flipped bits are the volatile ones: the search finds them.
    let truth: usize = exact.iter().map(HashSet::len).sum();
    assert_eq!(found, truth);
}

#[test]
fn hash_weights_prints_a_volatility_the_query_reads() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("doc.txt");
    std::fs::write(
        &doc,
        "one two three four five six seven eight nine ten eleven twelve",
    )
    .unwrap();
    let out = ok(&["hash", "--weights", doc.to_str().unwrap()], "");
    let fields: Vec<&str> = out.trim_end().split('\t').collect();
    assert_eq!(fields.len(), 3, "{out}");
    assert_eq!(fields[0].len(), 16);
    assert_eq!(fields[1].len(), 128);
    assert!(fields[1].bytes().all(|b| b.is_ascii_hexdigit()));
    let plain = ok(&["hash", doc.to_str().unwrap()], "");
    assert_eq!(plain.split('\t').next(), Some(fields[0]));
    let store = dir.path().join("s");
    let s = store.to_str().unwrap();
    ok(&["create", s, "--tables", "1"], "");
    ok(&["add", s], &format!("{} 1\n", fields[0]));
    let answer = ok(
        &["query", s, "--probabilistic"],
        &format!("{} {}\n", fields[0], fields[1]),
    );
    assert!(answer.contains("\"ids\":[1]"), "{answer}");
}

#[test]
fn bad_probabilistic_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let s = store.to_str().unwrap();
    ok(&["create", s, "--tables", "1"], "");
    let out = run(&["query", s, "--probabilistic"], "0123456789abcdef 00ff\n");
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1: bad volatility"));
    let junk = format!("0123456789abcdef {} extra\n", "0".repeat(128));
    assert_eq!(
        run(&["query", s, "--probabilistic"], &junk).status.code(),
        Some(3)
    );
    for args in [
        vec!["query", s, "--probabilistic", "--recall", "1.5"],
        vec!["query", s, "--probabilistic", "--max-probes", "0"],
        vec!["query", s, "--recall", "0.5"],
        vec!["query", s, "--probabilistic", "--batch"],
        vec!["hash", "--weights", "--sketch"],
    ] {
        assert_eq!(run(&args, "").status.code(), Some(2), "{args:?}");
    }
    // Tables other than 1 and the pigeonhole counts are still refused.
    let other = dir.path().join("t");
    let out = run(&["create", other.to_str().unwrap(), "--tables", "7"], "");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("[1, 4, 10"));
}

#[test]
fn dedup_probabilistic_finds_near_duplicates_on_a_one_table_store() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    let base: Vec<String> = (0..400).map(|i| format!("w{}", i * 7 % 101)).collect();
    let text = base.join(" ");
    std::fs::write(docs.join("a.txt"), &text).unwrap();
    std::fs::write(docs.join("b.txt"), format!("{text} and one more")).unwrap();
    std::fs::write(
        docs.join("c.txt"),
        "an unrelated page about storage engines and their logs",
    )
    .unwrap();
    let store = dir.path().join("s");
    let s = store.to_str().unwrap();
    ok(&["create", s, "--tables", "1"], "");
    let out = ok(&["dedup", s, "--probabilistic", docs.to_str().unwrap()], "");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].ends_with("\"duplicate_of\":null}"));
    assert!(
        lines[1].contains("\"duplicate_of\":{\"id\":"),
        "{}",
        lines[1]
    );
    assert!(lines[2].ends_with("\"duplicate_of\":null}"));
}
