//! Fault injection: a file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored,
//! so writes past it fail with EFBIG like a full disk) while adding and
//! while compacting. The command fails with a storage error; after reopen
//! without the limit nothing acknowledged is lost, nothing is half-applied,
//! and the store accepts writes again.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::Rng;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_simstore")
}

/// Runs `simstore ARGS` under a file-size limit of `kib` KiB.
fn limited(kib: u64, args: &[&str]) -> Command {
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f {kib} && exec \"$0\" \"$@\""
        ))
        .arg(bin())
        .args(args);
    c
}

/// Whether `simstore ARGS` exits successfully.
fn succeeds(args: &[&str]) -> bool {
    Command::new(bin())
        .args(args)
        .output()
        .unwrap()
        .status
        .success()
}

fn query_present(dir: &str, fps: &[u64]) -> Vec<bool> {
    let mut query = Command::new(bin());
    query.args(["query", dir, "--max-distance", "0"]);
    common::present_by(query, fps)
}

#[test]
fn file_size_limit_while_adding_and_compacting() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir.to_str().unwrap();
    assert!(succeeds(&["create", d]));
    let mut rng = Rng(11);
    let fps: Vec<u64> = (0..300_000).map(|_| rng.next()).collect();

    // Adding: acknowledged lines survive the failure.
    let mut child = limited(2048, &["add", d, "--ack", "--durability", "buffered"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input: String = fps
        .iter()
        .enumerate()
        .map(|(i, f)| format!("{f:016x} {i}\n"))
        .collect();
    // Fed in pieces with pauses, like a crawler would, so that several
    // batches commit before the limit is reached (a single read-ahead
    // batch would fail whole, acknowledging nothing).
    let writer = std::thread::spawn(move || {
        for piece in input.as_bytes().chunks(3000 * 21) {
            if stdin.write_all(piece).is_err() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(3));
        }
    });
    let acked = common::last_ack(BufReader::new(child.stdout.take().unwrap()).lines(), 0);
    let status = child.wait().unwrap();
    writer.join().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "expected a storage failure, got {status:?}: {stderr}"
    );
    assert!(
        stderr.contains("storage error") || stderr.contains("I/O"),
        "{stderr}"
    );
    assert!(acked > 0 && acked < fps.len(), "acked {acked}");
    let present = query_present(d, &fps);
    assert!(
        present[..acked].iter().all(|&p| p),
        "an acknowledged line was lost"
    );
    let stats = Command::new(bin()).args(["stats", d]).output().unwrap();
    let stats = String::from_utf8(stats.stdout).unwrap();
    let count = present.iter().filter(|&&p| p).count();
    assert!(
        stats.contains(&format!("\"fingerprints\":{count},")),
        "{stats} vs {count}"
    );
    assert!(succeeds(&["verify", d]));

    // Compacting under a limit too small for the merge: nothing half-applied.
    let out = limited(64, &["compact", d]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "compaction should fail: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "acked {acked} of {} lines; compaction under the limit: {}",
        fps.len(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    assert_eq!(query_present(d, &fps), present);
    assert!(succeeds(&["verify", d]));

    // Without the limit the store takes writes again.
    let out = Command::new(bin()).args(["compact", d]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(query_present(d, &fps), present);
    let mut child = Command::new(bin())
        .args(["add", d])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{:016x} 1\n", fps[acked + 1]).as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert!(query_present(d, &fps[acked + 1..acked + 2])[0]);
}

/// A bulk load large enough to write its tables as table files (over
/// 16 MiB of blocks a table), under a file-size limit the files cross:
/// the command fails with a storage error, the failing batch is not
/// applied, and no table file is left once the store is opened again.
#[test]
fn file_size_limit_while_writing_table_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir.to_str().unwrap();
    assert!(succeeds(&["create", d]));
    let mut rng = Rng(12);
    let before: Vec<u64> = (0..1000).map(|_| rng.next()).collect();
    let lines = |fps: &[u64]| -> String { fps.iter().map(|f| format!("{f:016x}\n")).collect() };
    assert!(
        common::run_bin(env!("CARGO_BIN_EXE_simstore"), &["add", d], &lines(&before))
            .status
            .success()
    );
    let bulk: Vec<u64> = (0..3_200_000).map(|_| rng.next()).collect();
    let mut child = limited(8192, &["add", d])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = lines(&bulk);
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("table file"), "{stderr}");

    // Batches read before the failing one stay committed: what is
    // present is a prefix of the input.
    assert!(query_present(d, &before).iter().all(|&p| p));
    let present = query_present(d, &bulk);
    let kept = present.iter().take_while(|&&p| p).count();
    assert!(present[kept..].iter().all(|&p| !p), "not a prefix");
    assert!(kept < bulk.len());
    assert!(!dir.join("ingest").exists());
    let stats = Command::new(bin()).args(["stats", d]).output().unwrap();
    let stats = String::from_utf8(stats.stdout).unwrap();
    assert!(
        stats.contains(&format!("\"fingerprints\":{},", 1000 + kept)),
        "{stats} vs {kept}"
    );
    assert!(succeeds(&["verify", d]));
}
