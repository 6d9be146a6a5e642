//! `simstore-bench pend` (hidden): the crash child of the recovery timing.
//! It appends fingerprints to an existing store so they are pending (only
//! in RocksDB's log and memtables), prints `ready`, then waits to be
//! killed; it exits when its standard input closes.

use std::io::Write;
use std::path::Path;

use simstore::{Op, Options, Store};
use simstore_cli::rng::Rng;
use simstore_cli::Failure;

/// Appends `count` fingerprints drawn from `seed`, then waits.
pub fn run(dir: &Path, count: u64, seed: u64) -> Result<(), Failure> {
    let store = Store::open(dir, &Options::new().manual_compaction(true))?;
    let mut rng = Rng(seed);
    let mut left = count;
    while left > 0 {
        let n = left.min(50_000);
        let ops = (0..n)
            .map(|_| Op::Insert {
                fingerprint: rng.next_u64(),
                id: None,
            })
            .collect();
        store.apply(ops)?;
        left -= n;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink())?;
    Ok(())
}
