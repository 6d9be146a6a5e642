//! A store directory made read-only under a running `simstore add`.
//!
//! Root ignores directory permissions, so the store and every `simstore`
//! process run as the unprivileged user `nobody` (through `setpriv`), while
//! the test, as root, takes write permission away from the directory in
//! the middle of an `add`. Writes into files RocksDB already holds open may
//! still succeed; creating any new file (a flushed table, a new log) fails.
//! The command must fail with a storage error; once the permission is back,
//! every acknowledged line must be there, nothing half-applied, `verify`
//! clean, and the store must take writes again.
//!
//! Needs root and `setpriv` (util-linux); without them the test says so on
//! stderr and checks nothing.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::Rng;

const NOBODY: u32 = 65534;

fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

fn has_setpriv() -> bool {
    Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `simstore ARGS` (the copy at `bin`) as `nobody`.
fn as_nobody(bin: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid",
        &NOBODY.to_string(),
        "--regid",
        &NOBODY.to_string(),
        "--clear-groups",
    ])
    .arg(bin)
    .args(args);
    c
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn present(bin: &Path, dir: &str, fps: &[u64]) -> Vec<bool> {
    common::present_by(as_nobody(bin, &["query", dir, "--max-distance", "0"]), fps)
}

#[test]
fn directory_made_read_only_under_a_running_add() {
    if effective_uid() != Some(0) || !has_setpriv() {
        eprintln!(
            "SKIPPED: needs root and setpriv (root ignores permissions, so the \
             store runs as `nobody`); nothing was checked"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(tmp.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    chmod(tmp.path(), 0o755);
    // The test binary's directory may not be readable by `nobody`.
    let bin = tmp.path().join("simstore");
    std::fs::copy(env!("CARGO_BIN_EXE_simstore"), &bin).unwrap();
    chmod(&bin, 0o755);
    let dir = tmp.path().join("s");
    let d = dir.to_str().unwrap();
    let created = as_nobody(&bin, &["create", d]).output().unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );

    let mut rng = Rng(5);
    let fps: Vec<u64> = (0..201_000).map(|_| rng.next()).collect();
    let mut child = as_nobody(&bin, &["add", d, "--ack", "--durability", "sync"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut acks = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = 0usize;
    // The first thousand lines while the directory is writable, each
    // piece acknowledged before the next is sent.
    for piece in fps[..1000].chunks(100) {
        let text: String = piece.iter().map(|f| format!("{f:016x} 7\n")).collect();
        stdin.write_all(text.as_bytes()).unwrap();
        let target = acked + piece.len();
        while acked < target {
            acked = common::ack_count(acks.next().unwrap());
        }
    }
    assert_eq!(acked, 1000);

    // Now the directory (and RocksDB's inside it) becomes read-only under
    // the running process.
    let db = dir.join("db");
    chmod(&db, 0o555);
    chmod(&dir, 0o555);
    let rest: String = fps[1000..]
        .iter()
        .map(|f| format!("{f:016x} 7\n"))
        .collect();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(rest.as_bytes());
    });
    acked = common::last_ack(acks, acked);
    let status = child.wait().unwrap();
    writer.join().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    eprintln!(
        "read-only directory: {acked} of {} lines acknowledged; {status}; {}",
        fps.len(),
        stderr.trim()
    );
    assert_eq!(
        status.code(),
        Some(1),
        "expected a storage failure, got {status:?}: {stderr}"
    );
    assert!(
        stderr.contains("storage error") && stderr.contains("ermission denied"),
        "{stderr}"
    );

    // Permission back: everything acknowledged is there, nothing else
    // half-applied, and the store takes writes again.
    chmod(&dir, 0o755);
    chmod(&db, 0o755);
    let verify = as_nobody(&bin, &["verify", d]).output().unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    let found = present(&bin, d, &fps);
    assert!(
        found[..acked].iter().all(|&p| p),
        "an acknowledged line was lost"
    );
    let count = found.iter().filter(|&&p| p).count();
    let stats = as_nobody(&bin, &["stats", d]).output().unwrap();
    let stats = String::from_utf8(stats.stdout).unwrap();
    assert!(
        stats.contains(&format!("\"fingerprints\":{count},")),
        "{stats} vs {count}"
    );
    let mut child = as_nobody(&bin, &["add", d])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"0123456789abcdef 1\n")
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert!(present(&bin, d, &[0x0123_4567_89ab_cdef])[0]);
}
