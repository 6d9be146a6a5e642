//! `simstore-bench batch`: the Rust library's batch query
//! ([`Store::query_many`]) timed on an existing store, over fingerprints
//! read from a file of little-endian `u64`s (what numpy's `tofile`
//! writes). The baseline the Python package's `query_many` is measured
//! against (`bench/python.py`): same store, same queries, the call alone.

use std::path::{Path, PathBuf};
use std::time::Instant;

use simstore::{Options, Store};
use simstore_cli::Failure;

/// What to time.
#[derive(clap::Args)]
pub struct Config {
    /// Store directory.
    pub dir: PathBuf,
    /// File of little-endian u64 query fingerprints.
    pub queries: PathBuf,
    /// Query distance (default: the store's maximum).
    #[arg(long)]
    pub k: Option<u32>,
    /// Timed repetitions (the best is reported beside the mean).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
}

/// Reads `path` as little-endian u64s.
fn read_u64s(path: &Path) -> Result<Vec<u64>, Failure> {
    let bytes = std::fs::read(path)?;
    if bytes.len() % 8 != 0 {
        return Err(Failure::Store(simstore::Error::InvalidArgument(format!(
            "{}: {} bytes is not a whole number of u64s",
            path.display(),
            bytes.len()
        ))));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

/// Opens the store, waits until its tables are in memory, then times
/// `query_many` `repeat` times; prints one JSON line.
pub fn run(config: &Config, out: &mut impl std::io::Write) -> Result<(), Failure> {
    let queries = read_u64s(&config.queries)?;
    let store = Store::open(&config.dir, &Options::new())?;
    store.wait_warm();
    let k = config.k.unwrap_or(store.max_distance());
    let mut times = Vec::new();
    let mut rows = 0usize;
    let mut matched = 0usize;
    for _ in 0..config.repeat.max(1) {
        let started = Instant::now();
        let answers = store.query_many(&queries, k)?;
        times.push(started.elapsed().as_secs_f64());
        rows = answers.iter().flatten().map(|m| m.ids.len().max(1)).sum();
        matched = answers.iter().filter(|a| !a.is_empty()).count();
    }
    let best = times.iter().copied().fold(f64::INFINITY, f64::min);
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    writeln!(
        out,
        "{{\"queries\":{},\"k\":{k},\"matched\":{matched},\"rows\":{rows},\"best_seconds\":{best:.6},\"mean_seconds\":{mean:.6},\"times\":{:?}}}",
        queries.len(),
        times
    )?;
    store.close()?;
    Ok(())
}
