//! `simstore-bench run`: query and ingest rates against baselines computed in
//! the same run (a brute-force scan and an uncompressed in-memory sorted
//! table set), so figures can be quoted as ratios on a noisy machine.

use std::io::Write;
use std::time::{Duration, Instant};

use simstore::{Durability, Op, Options, Store};

use simstore_cli::rng::Rng;
use simstore_cli::Failure;

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

/// Queries a call in the bench's grouped rounds.
const GROUPED: usize = 1024;

/// The longest one incremental ingest run may take.
const INGEST_LIMIT: Duration = Duration::from_secs(60);

/// Incremental ingest into a fresh store with the bench's plan: batches
/// of 1,000 from one thread, of one from 4 and from 64 threads and of 16
/// from 16 threads (group commit: concurrent requests share one write
/// and, in sync mode, one fsync),
/// in both durability modes, with background compaction running, for ten
/// times the merge threshold (capped at [`INGEST_LIMIT`], which is said
/// when it cuts a run short).
fn incremental(options: &Options, out: &mut impl Write) -> Result<(), Failure> {
    for durability in [Durability::Buffered, Durability::Sync] {
        for (threads, batch) in [(1usize, 1000usize), (4, 1), (64, 1), (16, 16)] {
            let dir = tempfile::tempdir()?;
            let store = Store::create(
                dir.path().join("s"),
                &options
                    .clone()
                    .durability(durability)
                    .manual_compaction(false),
            )?;
            // The store starts empty: the threshold is its minimum.
            let threshold = store.merge_threshold();
            let target = 10 * threshold;
            let (n, elapsed) = write_random(&store, threads, batch, target, 0xbe7c4)?;
            let stats = store.stats();
            writeln!(
                out,
                "ingest: {n} in batches of {batch} from {threads} thread(s), {durability:?}: \
                 {:.0}/s with background compaction (merge threshold {threshold}; {} still pending){}",
                rate(n, elapsed),
                stats.pending,
                cut_short(n, target),
            )?;
        }
    }
    Ok(())
}

/// Incremental ingest into the bench's store of N (closed at `path`),
/// as a crawler adds to a large collection: reopened with background
/// compaction, one-operation writers in buffered mode and batched
/// writers in sync mode, for ten times the store's merge threshold
/// (1/64 of N past 4.2M; capped at [`INGEST_LIMIT`]); then the time an
/// explicit compaction takes to merge what is still pending.
fn incremental_at_size(path: &std::path::Path, out: &mut impl Write) -> Result<(), Failure> {
    for (durability, threads, batch, seed) in [
        (Durability::Buffered, 64usize, 1usize, 0x6a0),
        (Durability::Sync, 16, 16, 0x6a1),
    ] {
        let store = Store::open(
            path,
            &Options::new()
                .trim_allocator(true)
                .durability(durability)
                .manual_compaction(false),
        )?;
        store.wait_warm();
        let before = store.stats();
        let threshold = store.merge_threshold();
        let target = 10 * threshold;
        let (n, elapsed) = write_random(&store, threads, batch, target, seed)?;
        let pending = store.stats().pending;
        let started = Instant::now();
        store.compact()?;
        let compacted = started.elapsed();
        writeln!(
            out,
            "ingest into the store of {}: {n} in batches of {batch} from {threads} thread(s), \
             {durability:?}: {:.0}/s with background compaction (merge threshold {threshold}; \
             {pending} still pending, merged by compact() in {compacted:.2?}){}",
            before.fingerprints,
            rate(n, elapsed),
            cut_short(n, target),
        )?;
    }
    Ok(())
}

/// Inserts random fingerprints into `store` from `threads` threads, each
/// applying `batch` at a time, until `target` are in, [`INGEST_LIMIT`]
/// has passed or a write fails (the others then stop too); returns how
/// many went in and the time.
fn write_random(
    store: &Store,
    threads: usize,
    batch: usize,
    target: usize,
    seed: u64,
) -> Result<(usize, Duration), Failure> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
    let started = Instant::now();
    let done = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..threads)
            .map(|t| {
                let (done, failed) = (&done, &failed);
                scope.spawn(move || -> simstore::Result<()> {
                    let mut rng = Rng(seed + t as u64);
                    // Each writer's ids count up from its own base, as a
                    // crawler numbers its documents.
                    let mut id = (t as u64) << 40;
                    while started.elapsed() < INGEST_LIMIT
                        && done.load(Relaxed) < target
                        && !failed.load(Relaxed)
                    {
                        let ops = (0..batch)
                            .map(|_| {
                                id += 1;
                                Op::Insert {
                                    fingerprint: rng.next_u64(),
                                    id: Some(id),
                                }
                            })
                            .collect();
                        if let Err(e) = store.apply(ops) {
                            failed.store(true, Relaxed);
                            return Err(e);
                        }
                        done.fetch_add(batch, Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        writers
            .into_iter()
            .try_for_each(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })?;
    Ok((done.into_inner(), started.elapsed()))
}

/// What a run that stopped at [`INGEST_LIMIT`] before its target says.
fn cut_short(n: usize, target: usize) -> String {
    if n < target {
        format!("; stopped at the {INGEST_LIMIT:?} limit")
    } else {
        String::new()
    }
}

/// The pairs the bench stores: every fingerprint with its index as id
/// (ids in insertion order, as a crawler numbers pages), and every
/// hundredth with a second id (a page seen again under another id).
pub(crate) fn with_ids(fps: &[u64]) -> Vec<(u64, Option<u64>)> {
    let n = fps.len() as u64;
    let mut pairs: Vec<(u64, Option<u64>)> = Vec::with_capacity(fps.len() + fps.len() / 100 + 1);
    pairs.extend(fps.iter().zip(0..).map(|(&f, i)| (f, Some(i))));
    pairs.extend(
        fps.iter()
            .zip(0..)
            .step_by(100)
            .map(|(&f, i)| (f, Some(n + i))),
    );
    pairs
}

/// `size` distinct fingerprints, near-duplicate heavy: a tenth are
/// originals, every other one is an original with one to three bits
/// flipped (as mirrored and templated pages give a crawler).
fn clustered_fingerprints(size: usize, rng: &mut Rng) -> Vec<u64> {
    let originals = (size / 10).max(1);
    let mut seen = std::collections::HashSet::with_capacity(size);
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        let fp = if out.len() < originals {
            rng.next_u64()
        } else {
            let r = rng.next_u64();
            let base: u64 = out[(r % originals as u64) as usize];
            (0..1 + (r >> 62) % 3).fold(base, |fp, i| fp ^ (1u64 << ((r >> (8 * i + 8)) & 63)))
        };
        if seen.insert(fp) {
            out.push(fp);
        }
    }
    out
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64().max(1e-9)
}

/// What `simstore-bench run` measures (its command-line options).
#[derive(Debug, clap::Args)]
pub struct Config {
    /// Number of stored fingerprints.
    #[arg(long, default_value_t = 1_000_000)]
    pub size: usize,
    /// Number of queries (half near a stored fingerprint, half random).
    #[arg(long, default_value_t = 200_000)]
    pub queries: usize,
    /// Query distance.
    #[arg(long, default_value_t = 3)]
    pub k: u32,
    /// Exact number of tables, overriding the planner.
    #[arg(long)]
    pub tables: Option<u32>,
    /// Measure only the bulk load, space and queries (skip incremental
    /// ingest and the open/recovery timings).
    #[arg(long)]
    pub queries_only: bool,
    /// Near-duplicate heavy data (a tenth originals, the rest within
    /// three bits of one) instead of uniform.
    #[arg(long)]
    pub clustered: bool,
    /// Leave out the uncompressed in-memory baseline (8 bytes per
    /// fingerprint per table of extra memory) and its ratios.
    #[arg(long)]
    pub without_uncompressed: bool,
    /// Times the one-thread all-matches, first-match and batch queries
    /// this many times and reports the fastest round of each (a shared,
    /// noisy machine slows some rounds, never speeds one up).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// Leave out the comparison row: all matches on the same fingerprints
    /// stored without ids.
    #[arg(long)]
    pub without_ids_row: bool,
}

/// The comparison row: the same fingerprints stored without ids, queried
/// for all matches (fastest of `rounds`), against `with_ids`, the rate
/// with them.
fn without_ids(
    options: &Options,
    fps: &[u64],
    qs: &[u64],
    k: u32,
    rounds: u32,
    with_ids: f64,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let store = Store::create(dir.path().join("s"), options)?;
    let pairs: Vec<(u64, Option<u64>)> = fps.iter().map(|&f| (f, None)).collect();
    store.insert_many(&pairs)?;
    drop(pairs);
    for &q in qs {
        store.query(q, k)?;
    }
    let mut best = Duration::MAX;
    for _ in 0..rounds {
        let started = Instant::now();
        for &q in qs {
            store.query(q, k)?;
        }
        best = best.min(started.elapsed());
    }
    let without = rate(qs.len(), best);
    writeln!(
        out,
        "comparison, the same fingerprints without ids: all matches {without:.0} queries/s \
         (with ids {:.0}% of it)",
        100.0 * with_ids / without
    )?;
    Ok(())
}

/// Runs the benchmark and prints one line per figure.
pub fn run(config: &Config, out: &mut impl Write) -> Result<(), Failure> {
    let &Config {
        size,
        queries,
        k,
        tables,
        queries_only,
        clustered,
        without_uncompressed,
        rounds,
        without_ids_row,
    } = config;
    let dir = tempfile::tempdir()?;
    let mut rng = Rng(42);
    let fps: Vec<u64> = if clustered {
        clustered_fingerprints(size, &mut rng)
    } else {
        (0..size).map(|_| rng.next_u64()).collect()
    };
    let kind = if clustered { "clustered" } else { "uniform" };
    let mut options = Options::new()
        .trim_allocator(true)
        .expected_size(size as u64)
        .durability(Durability::Buffered)
        .manual_compaction(true)
        .query_threads(1);
    if let Some(t) = tables {
        options = options.tables(t);
    }
    let store = Store::create(dir.path().join("s"), &options)?;
    let plan = store.plan().clone();
    writeln!(
        out,
        "bench: N = {size} {kind}, k = {k}, {} tables, prefixes {:?}, 1 thread unless stated, warm{}",
        plan.tables().len(),
        plan.tables()
            .iter()
            .map(|t| t.prefix_bits)
            .collect::<Vec<_>>(),
        if rounds > 1 {
            format!("; one-thread queries: fastest of {rounds} rounds")
        } else {
            String::new()
        }
    )?;

    let started = Instant::now();
    let pairs = with_ids(&fps);
    store.insert_many(&pairs)?;
    let loaded = started.elapsed();
    writeln!(
        out,
        "ingest: bulk load into the empty store {:.0} pairs/s ({} fingerprints with {} ids in \
         {loaded:.2?}, buffered)",
        rate(pairs.len(), loaded),
        size,
        pairs.len(),
    )?;
    drop(pairs);
    if !queries_only {
        incremental(&options, out)?;
    }
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
            let r = rng.next_u64();
            if i % 2 == 0 {
                let base = fps[(r % size.max(1) as u64) as usize];
                base ^ (1u64 << (r >> 58)) ^ (1u64 << ((r >> 52) & 63))
            } else {
                r
            }
        })
        .collect();
    // The uncompressed baseline holds 8 bytes per fingerprint per table
    // besides the store: at 100M with 10 tables that does not fit this
    // machine, so it can be left out (its check and ratio with it).
    let (uncompressed, base_hits) = if without_uncompressed {
        (None, None)
    } else {
        let base = Uncompressed::new(&plan, &fps);
        let mut scratch = Vec::new();
        let started = Instant::now();
        let mut base_hits = 0usize;
        for &q in &qs {
            base.query(q, k, &mut scratch);
            base_hits += scratch.len();
        }
        (Some(started.elapsed()), Some(base_hits))
    };

    // Warm up: every block the queries touch is read twice, so the
    // caches hold what a serving process's would.
    for _ in 0..2 {
        for &q in &qs {
            store.query(q, k)?;
        }
    }
    let (mut all, mut first, mut batch) = (Duration::MAX, Duration::MAX, Duration::MAX);
    let (mut hits, mut first_hits, mut batch_hits) = (0usize, 0usize, 0usize);
    let mut ids_found = 0usize;
    let (mut grouped, mut grouped_first) = (Duration::MAX, Duration::MAX);
    let (mut grouped_hits, mut grouped_first_hits) = (0usize, 0usize);
    for _ in 0..rounds {
        let started = Instant::now();
        hits = 0;
        ids_found = 0;
        for &q in &qs {
            let found = store.query(q, k)?;
            hits += found.len();
            ids_found += found.iter().map(|m| m.ids.len()).sum::<usize>();
        }
        all = all.min(started.elapsed());
        let started = Instant::now();
        first_hits = 0;
        for &q in &qs {
            first_hits += usize::from(store.query_first(q, k)?.is_some());
        }
        first = first.min(started.elapsed());
        // As `simstore query` answers: a few queries a call, their
        // probes interleaved.
        let started = Instant::now();
        grouped_hits = 0;
        for part in qs.chunks(GROUPED) {
            grouped_hits += store
                .query_many(part, k)?
                .iter()
                .map(Vec::len)
                .sum::<usize>();
        }
        grouped = grouped.min(started.elapsed());
        let started = Instant::now();
        grouped_first_hits = 0;
        for part in qs.chunks(GROUPED) {
            grouped_first_hits += store.query_first_many(part, k)?.iter().flatten().count();
        }
        grouped_first = grouped_first.min(started.elapsed());
        let started = Instant::now();
        batch_hits = store.query_many(&qs, k)?.iter().map(Vec::len).sum();
        batch = batch.min(started.elapsed());
    }

    // The same with every core: queries split across threads, and the
    // batch spread over them.
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let parallel = |first: bool| -> Result<(usize, Duration), Failure> {
        let started = Instant::now();
        let per = qs.len().div_ceil(threads).max(1);
        let found = std::thread::scope(|scope| {
            let handles: Vec<_> = qs
                .chunks(per)
                .map(|part| {
                    let store = &store;
                    scope.spawn(move || -> simstore::Result<usize> {
                        let mut n = 0;
                        for &q in part {
                            n += if first {
                                usize::from(store.query_first(q, k)?.is_some())
                            } else {
                                store.query(q, k)?.len()
                            };
                        }
                        Ok(n)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .sum::<simstore::Result<usize>>()
        })?;
        Ok((found, started.elapsed()))
    };
    let (par_hits, par_all) = parallel(false)?;
    let (par_first_hits, par_first) = parallel(true)?;
    // The handle's query threads are set at open.
    let store = {
        drop(store);
        let store = Store::open(
            dir.path().join("s"),
            &options.clone().query_threads(threads),
        )?;
        store.wait_warm();
        store
    };
    let started = Instant::now();
    let par_batch_hits: usize = store.query_many(&qs, k)?.iter().map(Vec::len).sum();
    let par_batch = started.elapsed();

    let scan_n = queries.min((200_000_000 / size.max(1)).max(10));
    let started = Instant::now();
    let mut scan_hits = 0usize;
    for &q in &qs[..scan_n] {
        scan_hits += fps.iter().filter(|&&f| (f ^ q).count_ones() <= k).count();
    }
    let scan = started.elapsed();
    let scan_rate = rate(scan_n, scan);
    if [
        batch_hits,
        par_hits,
        par_batch_hits,
        grouped_hits,
        base_hits.unwrap_or(hits),
    ] != [hits; 5]
        || [par_first_hits, grouped_first_hits] != [first_hits; 2]
    {
        return Err(Failure::Io(std::io::Error::other(format!(
            "answers disagree: store {hits}, batch {batch_hits}, {threads} threads {par_hits} \
             and batch {par_batch_hits}, first {first_hits} and {par_first_hits}, \
             uncompressed {base_hits:?}"
        ))));
    }
    writeln!(out, "matches: {hits} fingerprints with {ids_found} ids over {queries} queries (first-match found {first_hits}; scan sample {scan_hits})")?;
    let line = |name: &str, r: f64| match uncompressed {
        Some(u) => format!(
            "{name}: {r:.0} queries/s ({:.2}x uncompressed, {:.1}x scan)",
            r / rate(queries, u),
            r / scan_rate
        ),
        None => format!("{name}: {r:.0} queries/s ({:.1}x scan)", r / scan_rate),
    };
    writeln!(out, "{}", line("all matches", rate(queries, all)))?;
    writeln!(out, "{}", line("first match", rate(queries, first)))?;
    writeln!(
        out,
        "{}",
        line(
            &format!("all matches, {GROUPED} queries a call (query_many, as simstore query)"),
            rate(queries, grouped)
        )
    )?;
    writeln!(
        out,
        "{}",
        line(
            &format!("first match, {GROUPED} queries a call (query_first_many)"),
            rate(queries, grouped_first)
        )
    )?;
    writeln!(out, "{}", line("batch", rate(queries, batch)))?;
    let both = |name: &str, one: Duration, many: Duration| {
        format!(
            "{name}, {threads} threads: {:.0} queries/s ({:.2}x one thread)",
            rate(queries, many),
            one.as_secs_f64() / many.as_secs_f64().max(1e-9)
        )
    };
    writeln!(out, "{}", both("all matches", all, par_all))?;
    writeln!(out, "{}", both("first match", first, par_first))?;
    writeln!(out, "{}", both("batch", batch, par_batch))?;
    if let Some(u) = uncompressed {
        writeln!(
            out,
            "baseline uncompressed in-memory tables: {:.0} queries/s",
            rate(queries, u)
        )?;
    }
    writeln!(
        out,
        "baseline brute-force scan: {scan_rate:.0} queries/s ({scan_n} queries)"
    )?;

    let path = dir.path().join("s");
    drop(store);
    if !without_ids_row {
        without_ids(&options, &fps, &qs, k, rounds, rate(queries, all), out)?;
    }
    if queries_only {
        return Ok(());
    }
    // Opening: the store just measured, closed cleanly (closing flushes
    // RocksDB's memtables); then a copy of a store taken while it held a
    // million pending fingerprints only in RocksDB's write-ahead log and
    // memtables, which is what a kill -9 leaves: the open replays the log
    // and rebuilds the pending sets.
    let started = Instant::now();
    let store = Store::open(
        &path,
        &Options::new().trim_allocator(true).manual_compaction(true),
    )?;
    let clean = started.elapsed();
    store.wait_warm();
    let warmed = started.elapsed();
    drop(store);
    crate::cold::run(&path, &qs, k, out)?;
    let pending_dir = tempfile::tempdir()?;
    let crashed_path = pending_dir.path().join("crashed");
    drop(Store::create(&crashed_path, &options)?);
    killed_with_pending(&crashed_path, 1_000_000)?;
    let started = Instant::now();
    let store = Store::open(
        &crashed_path,
        &Options::new().trim_allocator(true).manual_compaction(true),
    )?;
    let recovered = started.elapsed();
    let pending = store.stats().pending;
    let started = Instant::now();
    drop(store);
    let closed = started.elapsed();
    writeln!(
        out,
        "open at N = {size}: {clean:.2?} after a clean close (every block read into memory \
         behind it {warmed:.2?} after the start); {recovered:.2?} with {pending} pending \
         fingerprints to recover (then {closed:.2?} to close, flushing what was replayed)",
    )?;
    incremental_at_size(&path, out)
}

/// Runs `simstore-bench pend` on the store at `path` until it has appended
/// `count` fingerprints (pending: only in RocksDB's log and memtables),
/// then kills it with SIGKILL, leaving what a crash leaves.
fn killed_with_pending(path: &std::path::Path, count: u64) -> Result<(), Failure> {
    use std::io::BufRead;
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .arg("pend")
        .arg(path)
        .args(["--count", &count.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    let read = match child.stdout.take() {
        Some(out) => std::io::BufReader::new(out).read_line(&mut line),
        None => Ok(0),
    };
    child.kill()?;
    let status = child.wait()?;
    read?;
    if line.trim() != "ready" {
        return Err(Failure::Io(std::io::Error::other(format!(
            "the crash child ended before appending its fingerprints ({status})"
        ))));
    }
    Ok(())
}
