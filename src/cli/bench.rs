//! `simstore bench`: query and ingest rates against baselines computed in
//! the same run (a brute-force scan and an uncompressed in-memory sorted
//! table set), so figures can be quoted as ratios on a noisy machine.

use std::io::Write;
use std::time::{Duration, Instant};

use simstore::{Durability, Op, Options, Store};

use super::rng::Rng;
use super::stream::Failure;

/// The design without compression and without RocksDB: one sorted
/// `Vec<u64>` per permuted table.
struct Uncompressed {
    tables: Vec<(simstore::plan::TableSpec, Vec<u64>)>,
}

impl Uncompressed {
    fn new(plan: &simstore::plan::Plan, fps: &[u64]) -> Self {
        let tables = plan
            .tables()
            .iter()
            .map(|spec| {
                let mut v: Vec<u64> = fps.iter().map(|&f| spec.permutation.apply(f)).collect();
                v.sort_unstable();
                v.dedup();
                (spec.clone(), v)
            })
            .collect();
        Self { tables }
    }

    fn query(&self, fp: u64, k: u32, out: &mut Vec<u64>) {
        out.clear();
        for (spec, v) in &self.tables {
            let q = spec.permutation.apply(fp);
            let (lo, hi) = spec.prefix_range(q);
            let start = v.partition_point(|&x| x < lo);
            for &x in &v[start..] {
                if x > hi {
                    break;
                }
                if (x ^ q).count_ones() <= k {
                    out.push(spec.permutation.invert(x));
                }
            }
        }
        out.sort_unstable();
        out.dedup();
    }
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64().max(1e-9)
}

/// Runs the benchmark and prints one line per figure.
pub fn run(size: usize, queries: usize, k: u32, out: &mut impl Write) -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let mut rng = Rng(42);
    let fps: Vec<u64> = (0..size).map(|_| rng.next()).collect();
    let store = Store::create(
        dir.path().join("s"),
        &Options::new()
            .expected_size(size as u64)
            .durability(Durability::Buffered)
            .manual_compaction(true),
    )?;
    let plan = store.plan().clone();
    writeln!(
        out,
        "bench: N = {size} uniform, k = {k}, {} tables, prefixes {:?}, 1 thread, warm",
        plan.tables().len(),
        plan.tables()
            .iter()
            .map(|t| t.prefix_bits)
            .collect::<Vec<_>>()
    )?;

    let started = Instant::now();
    for chunk in fps.chunks(100_000) {
        store.apply(
            chunk
                .iter()
                .map(|&f| Op::Insert {
                    fingerprint: f,
                    id: None,
                })
                .collect(),
        )?;
    }
    let appended = started.elapsed();
    let started = Instant::now();
    store.compact()?;
    let compacted = started.elapsed();
    writeln!(
        out,
        "ingest: append {:.0}/s, then one compaction {:.2?} ({:.0}/s overall)",
        rate(size, appended),
        compacted,
        rate(size, appended + compacted)
    )?;
    let stats = store.stats();
    let per_table =
        stats.table_bytes as f64 / (stats.fingerprints.max(1) * stats.tables as u64) as f64;
    let bound = (64.0 - (size.max(2) as f64).log2() + 1.44) / 8.0;
    writeln!(
        out,
        "space: {per_table:.3} bytes per fingerprint per table (entropy bound {bound:.3}, ratio {:.3}); {} bytes on disk",
        per_table / bound,
        stats.bytes_on_disk
    )?;

    let qs: Vec<u64> = (0..queries)
        .map(|i| {
            let r = rng.next();
            if i % 2 == 0 {
                let base = fps[(r % size.max(1) as u64) as usize];
                base ^ (1u64 << (r >> 58)) ^ (1u64 << ((r >> 52) & 63))
            } else {
                r
            }
        })
        .collect();
    let base = Uncompressed::new(&plan, &fps);
    let mut scratch = Vec::new();
    let started = Instant::now();
    let mut base_hits = 0usize;
    for &q in &qs {
        base.query(q, k, &mut scratch);
        base_hits += scratch.len();
    }
    let uncompressed = started.elapsed();

    let started = Instant::now();
    let mut hits = 0usize;
    for &q in &qs {
        hits += store.query(q, k)?.len();
    }
    let all = started.elapsed();
    let started = Instant::now();
    let mut first_hits = 0usize;
    for &q in &qs {
        first_hits += usize::from(store.query_first(q, k)?.is_some());
    }
    let first = started.elapsed();
    let started = Instant::now();
    let batch_hits: usize = store.query_batch(&qs, k)?.iter().map(Vec::len).sum();
    let batch = started.elapsed();

    let scan_n = queries.min((200_000_000 / size.max(1)).max(10));
    let started = Instant::now();
    let mut scan_hits = 0usize;
    for &q in &qs[..scan_n] {
        scan_hits += fps.iter().filter(|&&f| (f ^ q).count_ones() <= k).count();
    }
    let scan = started.elapsed();
    let scan_rate = rate(scan_n, scan);
    if hits != base_hits || batch_hits != hits {
        return Err(Failure::Io(std::io::Error::other(format!(
            "answers disagree: store {hits}, batch {batch_hits}, uncompressed {base_hits}"
        ))));
    }
    writeln!(out, "matches: {hits} over {queries} queries (first-match found {first_hits}; scan sample {scan_hits})")?;
    let line = |name: &str, r: f64| {
        format!(
            "{name}: {r:.0} queries/s ({:.2}x uncompressed, {:.1}x scan)",
            r / rate(queries, uncompressed),
            r / scan_rate
        )
    };
    writeln!(out, "{}", line("all matches", rate(queries, all)))?;
    writeln!(out, "{}", line("first match", rate(queries, first)))?;
    writeln!(out, "{}", line("batch", rate(queries, batch)))?;
    writeln!(
        out,
        "baseline uncompressed in-memory tables: {:.0} queries/s",
        rate(queries, uncompressed)
    )?;
    writeln!(
        out,
        "baseline brute-force scan: {scan_rate:.0} queries/s ({scan_n} queries)"
    )?;
    Ok(())
}
