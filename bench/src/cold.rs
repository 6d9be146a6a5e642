//! Cold-cache figures for `simstore-bench run`: open a closed store with the
//! operating system's page cache dropped (when the process may: it needs
//! write access to `/proc/sys/vm/drop_caches`, i.e. root), then time single
//! queries right after the open, before anything is warm, and again once
//! warm.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use simstore::{Options, Store};

use simstore_cli::Failure;

/// Queries timed one by one in each pass.
const TIMED: usize = 20_000;

/// Flushes dirty pages and asks the kernel to drop its page cache;
/// whether it could.
fn drop_page_cache() -> bool {
    let synced = std::process::Command::new("sync")
        .status()
        .is_ok_and(|s| s.success());
    synced && std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// Median and 99th percentile of each query's time, in microseconds.
fn latencies(store: &Store, qs: &[u64], k: u32) -> Result<(f64, f64), Failure> {
    let mut times: Vec<Duration> = Vec::with_capacity(qs.len());
    for &q in qs {
        let started = Instant::now();
        std::hint::black_box(store.query(q, k)?);
        times.push(started.elapsed());
    }
    times.sort_unstable();
    let at = |f: f64| {
        times
            .get(((times.len() as f64 * f) as usize).min(times.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    Ok((at(0.5), at(0.99)))
}

/// Opens the closed store at `path` cold and prints one line of figures.
pub fn run(path: &Path, qs: &[u64], k: u32, out: &mut impl Write) -> Result<(), Failure> {
    let dropped = drop_page_cache();
    let started = Instant::now();
    // Blocks are read by the queries that need them, not behind the open,
    // so the first pass reads its blocks from disk.
    let options = Options::new()
        .trim_allocator(true)
        .manual_compaction(true)
        .warm(false);
    let store = Store::open(path, &options)?;
    let open = started.elapsed();
    let qs = &qs[..qs.len().min(TIMED)];
    let (cold_median, cold_p99) = latencies(&store, qs, k)?;
    // A second pass, so the third sees the caches warm.
    latencies(&store, qs, k)?;
    let (warm_median, warm_p99) = latencies(&store, qs, k)?;
    writeln!(
        out,
        "cold: page cache {}; open {open:.2?}; {} single queries right after the open: \
         median {cold_median:.1} µs, p99 {cold_p99:.1} µs (the same queries warm: median \
         {warm_median:.1} µs, p99 {warm_p99:.1} µs)",
        if dropped {
            "dropped first"
        } else {
            "not dropped (needs write access to /proc/sys/vm/drop_caches)"
        },
        qs.len()
    )?;
    Ok(())
}
