//! Kill -9 crash loop: a child process (this test binary run again, see `common::workload`) inserts,
//! deletes and compacts concurrently, announcing each operation before it
//! starts and after it is acknowledged; the parent SIGKILLs it at random
//! moments, reopens the store and checks that every acknowledged operation
//! is reflected, nothing else appeared, every table agrees, and queries
//! match a brute-force oracle. Runs in both durability modes.
//!
//! `SIMSTORE_CRASH_CYCLES=N` sets the cycles per mode (default 6);
//! a long run: `SIMSTORE_CRASH_CYCLES=500 cargo test --release --test crash`.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::time::Duration;

use common::workload::Workload;
use common::{Model, Rng};
use simstore::{Options, Store};

/// What must hold for one fingerprint after a crash.
#[derive(Default)]
struct Expect {
    /// Acknowledged state: present with these ids, or absent.
    model: Model,
    /// Fingerprints whose last operation was announced but not
    /// acknowledged (the operation and its id): the state before it or
    /// after it is allowed.
    in_doubt: HashMap<u64, (String, Option<u64>)>,
}

fn cycles() -> usize {
    std::env::var("SIMSTORE_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

fn crash_loop(durability: &str, seed: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    drop(Store::create(&dir, &Options::new().block_size(96)).unwrap());
    let mut rng = Rng(seed);
    let mut expect = Expect::default();
    let mut acked_total = 0usize;
    let mut compactions = 0usize;
    let mut most_levels = 0;
    for cycle in 0..cycles() {
        let mut child = common::workload(&dir, durability, seed * 1000 + cycle as u64, 3)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let kill_after = Duration::from_millis(100 + rng.below(700));
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<String>>()
        });
        std::thread::sleep(kill_after);
        child.kill().unwrap();
        child.wait().unwrap();
        let lines = reader.join().unwrap();
        // Replay: per thread, the announced op and whether it was acknowledged.
        let mut pending: BTreeMap<u64, (String, u64, Option<u64>)> = BTreeMap::new();
        for line in &lines {
            let f: Vec<&str> = line.split(' ').collect();
            match f.as_slice() {
                ["compacted"] => compactions += 1,
                ["try", t, op, fp, rest @ ..] => {
                    let fp = u64::from_str_radix(fp, 16).unwrap();
                    let id = rest.first().map(|i| i.parse().unwrap());
                    pending.insert(t.parse().unwrap(), (op.to_string(), fp, id));
                    expect.in_doubt.insert(fp, (op.to_string(), id));
                }
                ["ack", t, op, fp, rest @ ..] => {
                    let fp = u64::from_str_radix(fp, 16).unwrap();
                    let (p_op, p_fp, _) = pending
                        .remove(&t.parse().unwrap())
                        .expect("ack without try");
                    assert_eq!((p_op.as_str(), p_fp), (*op, fp));
                    apply(&mut expect.model, op, fp, rest);
                    expect.in_doubt.remove(&fp);
                    acked_total += 1;
                }
                _ => {} // a line torn by the kill
            }
        }
        most_levels = most_levels.max(check(&dir, &mut expect, cycle));
        // Long runs report as they go, so a run cut short still tells.
        if cycles() > 6 {
            eprintln!(
                "crash loop ({durability}): cycle {} done, {acked_total} acknowledged so far, 0 lost",
                cycle + 1
            );
        }
    }
    eprintln!(
        "crash loop ({durability}): {} cycles, {acked_total} acknowledged operations, {compactions} compactions, up to {most_levels} levels held, 0 lost",
        cycles()
    );
    assert!(acked_total > 0);
}

/// Applies one acknowledged workload operation to the model.
fn apply(model: &mut Model, op: &str, fp: u64, rest: &[&str]) {
    match op {
        "insert" => model.insert(fp, Some(rest[0].parse().unwrap())),
        "remove" => model.delete(fp, rest[0].parse().unwrap()),
        _ => model.delete_fingerprint(fp),
    }
}

/// Reopens the store and checks it against the acknowledged model, then
/// folds the in-doubt operations into the model as they turned out.
/// Returns how many levels of tables hold fingerprints.
fn check(dir: &std::path::Path, expect: &mut Expect, cycle: usize) -> usize {
    let store = Store::open(dir, &Options::new().manual_compaction(true)).unwrap();
    let report = store.verify().unwrap();
    assert!(report.ok(), "cycle {cycle}: verify: {:?}", report.problems);
    // Resolve in-doubt fingerprints by what the store holds: the state
    // before the operation, or after it.
    for (&fp, (op, id)) in &expect.in_doubt {
        let found: Option<BTreeSet<u64>> = store
            .query(fp, 0)
            .unwrap()
            .first()
            .map(|m| m.ids.iter().copied().collect());
        let before = expect.model.fps.get(&fp).cloned();
        let mut after = expect.model.clone();
        let id = id.map(|i| i.to_string());
        apply(
            &mut after,
            op,
            fp,
            id.as_slice()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .as_slice(),
        );
        let after = after.fps.get(&fp).cloned();
        assert!(
            found == before || found == after,
            "cycle {cycle}: {fp:016x} after an unacknowledged {op}: {found:?}, \
             neither {before:?} nor {after:?}"
        );
        match found {
            Some(ids) => expect.model.fps.insert(fp, ids),
            None => expect.model.fps.remove(&fp),
        };
    }
    expect.in_doubt.clear();
    let touched: Vec<u64> = expect.model.fps.keys().copied().collect();
    let mut rng = Rng(cycle as u64);
    let mut qs = common::queries(&touched, 150, &mut rng);
    qs.extend(touched.iter().take(300));
    common::check_store(&store, &expect.model, &qs);
    let levels = store.stats().levels;
    levels.iter().filter(|l| l.fingerprints > 0).count()
}

#[test]
fn kill_during_writes_and_compaction_sync() {
    crash_loop("sync", 1);
}

#[test]
fn kill_during_writes_and_compaction_buffered() {
    crash_loop("buffered", 2);
}

#[test]
fn workload_runs_to_completion_and_agrees() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    drop(Store::create(&dir, &Options::new().block_size(64)).unwrap());
    let out = Workload {
        ops: 300,
        ..Workload::new(&dir, "buffered", 2, 3)
    }
    .command()
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut model = Model::default();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if let ["ack", _, op, fp, rest @ ..] = f.as_slice() {
            let fp = u64::from_str_radix(fp, 16).unwrap();
            apply(&mut model, op, fp, rest);
        }
    }
    let store = Store::open(&dir, &Options::new()).unwrap();
    let touched: Vec<u64> = model.fps.keys().copied().collect();
    common::check_store(&store, &model, &common::queries(&touched, 200, &mut Rng(3)));
    assert!(store.verify().unwrap().ok());
}

/// The crash-test child that the tests above run in a child process of
/// this binary (`common::workload`); ignored in normal runs.
#[test]
#[ignore = "the crash tests' child process"]
fn workload_child() {
    common::workload::child();
}
