//! `simstore workload` (hidden): a crash-test child. Writer threads insert
//! and delete through the library while a compactor thread compacts; every
//! operation is announced before it starts (`try`) and reported after it
//! is acknowledged (`ack`), one line each, so a parent that kills this
//! process at any moment knows exactly what must have survived.
//!
//! Lines: `try T insert FP ID`, `ack T insert FP ID`,
//! `try T delete FP`, `ack T delete FP` (the fingerprint and all its ids),
//! `try T remove FP ID`, `ack T remove FP ID` (one id; the fingerprint
//! too when it was its last), `compacted`. Thread `T` only
//! touches fingerprints `fp` with `fp % threads == T`, so each
//! fingerprint's history is one thread's sequence.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use simstore::{Options, Store};

use super::rng::Rng;
use super::stream::Failure;

/// Runs until killed (or for `ops` operations per thread).
pub fn run(
    dir: &std::path::Path,
    options: Options,
    seed: u64,
    threads: u64,
    ops: u64,
) -> Result<(), Failure> {
    let store = Arc::new(Store::open(dir, &options.merge_threshold(200))?);
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let say = {
        let out = Arc::clone(&out);
        move |line: String| {
            let mut o = out.lock();
            let _ = writeln!(o, "{line}");
            let _ = o.flush();
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let compactor = {
        let (store, stop, say) = (Arc::clone(&store), Arc::clone(&stop), say.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(15));
                if store.compact().is_ok() {
                    say("compacted".into());
                }
            }
        })
    };
    let writers: Vec<_> = (0..threads)
        .map(|t| {
            let (store, say) = (Arc::clone(&store), say.clone());
            std::thread::spawn(move || -> simstore::Result<()> {
                let mut rng = Rng(seed ^ (t << 56) ^ 0x5eed);
                let mut mine: Vec<u64> = Vec::new();
                // The ids this thread gave each of its fingerprints.
                let mut ids: std::collections::HashMap<u64, Vec<u64>> = Default::default();
                for n in 0..ops {
                    let r = rng.next();
                    if r % 8 == 1 && !mine.is_empty() {
                        let fp = mine[(r >> 8) as usize % mine.len()];
                        let held = ids.entry(fp).or_default();
                        if held.is_empty() {
                            continue;
                        }
                        let id = held.swap_remove((r >> 20) as usize % held.len());
                        say(format!("try {t} remove {fp:016x} {id}"));
                        store.delete(fp, id)?;
                        say(format!("ack {t} remove {fp:016x} {id}"));
                        if held.is_empty() {
                            ids.remove(&fp);
                            mine.retain(|&m| m != fp);
                        }
                    } else if r.is_multiple_of(4) && !mine.is_empty() {
                        let fp = mine.swap_remove((r >> 8) as usize % mine.len());
                        ids.remove(&fp);
                        say(format!("try {t} delete {fp:016x}"));
                        store.delete_fingerprint(fp)?;
                        say(format!("ack {t} delete {fp:016x}"));
                    } else {
                        // Near other fingerprints of this thread half the time.
                        let mut fp = if r.is_multiple_of(2) && !mine.is_empty() {
                            mine[(r >> 8) as usize % mine.len()] ^ (1u64 << (r >> 58))
                        } else {
                            rng.next()
                        };
                        let base = fp / threads * threads;
                        fp = base.checked_add(t).unwrap_or(base - threads + t);
                        let id = (t << 48) | n;
                        say(format!("try {t} insert {fp:016x} {id}"));
                        store.insert(fp, id)?;
                        say(format!("ack {t} insert {fp:016x} {id}"));
                        if !mine.contains(&fp) {
                            mine.push(fp);
                        }
                        ids.entry(fp).or_default().push(id);
                    }
                }
                Ok(())
            })
        })
        .collect();
    let mut result = Ok(());
    for w in writers {
        if let Ok(Err(e)) = w.join() {
            result = Err(Failure::Store(e));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = compactor.join();
    result
}

/// `simstore pend` (hidden): the bench's crash child. Opens the store at
/// `dir`, appends `count` random fingerprints in batches of 50,000 (so
/// they are pending: in RocksDB's log and memtables, not in blocks),
/// prints `ready` and waits to be killed (it exits by itself when its
/// standard input closes, as when the bench that spawned it dies).
pub fn pend(dir: &std::path::Path, count: u64, seed: u64) -> Result<(), Failure> {
    let store = Store::open(dir, &Options::new().manual_compaction(true))?;
    let mut rng = Rng(seed);
    let mut left = count;
    while left > 0 {
        let n = left.min(50_000);
        let ops = (0..n)
            .map(|_| simstore::Op::Insert {
                fingerprint: rng.next(),
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
