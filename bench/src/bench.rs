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
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("s");
    let mut rng = Rng(42);
    let fps: Vec<u64> = if config.clustered {
        clustered_fingerprints(config.size, &mut rng)
    } else {
        (0..config.size).map(|_| rng.next_u64()).collect()
    };
    let mut options = Options::new()
        .trim_allocator(true)
        .expected_size(config.size as u64)
        .durability(Durability::Buffered)
        .manual_compaction(true)
        .query_threads(1);
    if let Some(t) = config.tables {
        options = options.tables(t);
    }
    let store = load(config, &path, &options, &fps, out)?;
    let qs = queries_near(&fps, config.queries, &mut rng);
    let baselines = Baselines::measure(config, &store, &fps, &qs);
    let one = OneThread::measure(&store, &qs, config.k, config.rounds)?;
    drop(store);
    let every = AllCores::measure(&path, &options, &qs, config.k)?;
    one.check(&every, &baselines)?;
    report(config, &one, &every, &baselines, out)?;
    if !config.without_ids_row {
        let all = rate(qs.len(), one.all);
        without_ids(&options, &fps, &qs, config.k, config.rounds, all, out)?;
    }
    if config.queries_only {
        return Ok(());
    }
    open_and_recover(config.size, &path, &options, &qs, config.k, out)?;
    incremental_at_size(&path, out)
}

/// Creates the store at `path` and bulk-loads `fps` with their ids into
/// it, reporting the plan, the load rate, incremental ingest (unless
/// `--queries-only`) and the space taken.
fn load(
    config: &Config,
    path: &std::path::Path,
    options: &Options,
    fps: &[u64],
    out: &mut impl Write,
) -> Result<Store, Failure> {
    let store = Store::create(path, options)?;
    let plan = store.plan().clone();
    writeln!(
        out,
        "bench: N = {} {}, k = {}, {} tables, prefixes {:?}, 1 thread unless stated, warm{}",
        config.size,
        if config.clustered {
            "clustered"
        } else {
            "uniform"
        },
        config.k,
        plan.tables().len(),
        plan.tables()
            .iter()
            .map(|t| t.prefix_bits)
            .collect::<Vec<_>>(),
        if config.rounds > 1 {
            format!("; one-thread queries: fastest of {} rounds", config.rounds)
        } else {
            String::new()
        }
    )?;
    let started = Instant::now();
    let pairs = with_ids(fps);
    store.insert_many(&pairs)?;
    let loaded = started.elapsed();
    writeln!(
        out,
        "ingest: bulk load into the empty store {:.0} pairs/s ({} fingerprints with {} ids in \
         {loaded:.2?}, buffered)",
        rate(pairs.len(), loaded),
        config.size,
        pairs.len(),
    )?;
    drop(pairs);
    if !config.queries_only {
        incremental(options, out)?;
    }
    let stats = store.stats();
    let per_table =
        stats.table_bytes as f64 / (stats.fingerprints.max(1) * stats.tables as u64) as f64;
    let bound = (64.0 - (config.size.max(2) as f64).log2() + 1.44) / 8.0;
    writeln!(
        out,
        "space: {per_table:.3} bytes per fingerprint per table (entropy bound {bound:.3}, ratio {:.3}); {} bytes on disk",
        per_table / bound,
        stats.bytes_on_disk
    )?;
    Ok(store)
}

/// `n` queries: every other one within two bits of a stored fingerprint,
/// the rest uniform.
fn queries_near(fps: &[u64], n: usize, rng: &mut Rng) -> Vec<u64> {
    (0..n)
        .map(|i| {
            let r = rng.next_u64();
            if i % 2 == 0 {
                let base = fps[(r % fps.len().max(1) as u64) as usize];
                base ^ (1u64 << (r >> 58)) ^ (1u64 << ((r >> 52) & 63))
            } else {
                r
            }
        })
        .collect()
}

/// The in-run baselines: uncompressed in-memory tables (unless left out)
/// and a brute-force scan of a sample of the queries.
struct Baselines {
    /// Time of every query against the uncompressed tables, and matches.
    uncompressed: Option<(Duration, usize)>,
    /// Queries scanned, their time and matches.
    scan: (usize, Duration, usize),
}

impl Baselines {
    fn measure(config: &Config, store: &Store, fps: &[u64], qs: &[u64]) -> Self {
        let k = config.k;
        // The uncompressed baseline holds 8 bytes per fingerprint per table
        // besides the store: at 100M with 10 tables that does not fit this
        // machine, so it can be left out (its check and ratio with it).
        let uncompressed = (!config.without_uncompressed).then(|| {
            let base = Uncompressed::new(store.plan(), fps);
            let mut scratch = Vec::new();
            let started = Instant::now();
            let mut hits = 0usize;
            for &q in qs {
                base.query(q, k, &mut scratch);
                hits += scratch.len();
            }
            (started.elapsed(), hits)
        });
        let scan_n = qs.len().min((200_000_000 / fps.len().max(1)).max(10));
        let started = Instant::now();
        let mut scan_hits = 0usize;
        for &q in &qs[..scan_n] {
            scan_hits += fps.iter().filter(|&&f| (f ^ q).count_ones() <= k).count();
        }
        Self {
            uncompressed,
            scan: (scan_n, started.elapsed(), scan_hits),
        }
    }
}

/// One-thread query times (the fastest of the rounds) and match counts.
struct OneThread {
    all: Duration,
    first: Duration,
    grouped: Duration,
    grouped_first: Duration,
    batch: Duration,
    hits: usize,
    ids_found: usize,
    first_hits: usize,
    grouped_hits: usize,
    grouped_first_hits: usize,
    batch_hits: usize,
}

impl OneThread {
    /// Times every query path on one thread, after two warm-up passes.
    fn measure(store: &Store, qs: &[u64], k: u32, rounds: u32) -> Result<Self, Failure> {
        // Warm up: every block the queries touch is read twice, so the
        // caches hold what a serving process's would.
        for _ in 0..2 {
            for &q in qs {
                store.query(q, k)?;
            }
        }
        let mut t = OneThread {
            all: Duration::MAX,
            first: Duration::MAX,
            grouped: Duration::MAX,
            grouped_first: Duration::MAX,
            batch: Duration::MAX,
            hits: 0,
            ids_found: 0,
            first_hits: 0,
            grouped_hits: 0,
            grouped_first_hits: 0,
            batch_hits: 0,
        };
        for _ in 0..rounds {
            let started = Instant::now();
            (t.hits, t.ids_found) = (0, 0);
            for &q in qs {
                let found = store.query(q, k)?;
                t.hits += found.len();
                t.ids_found += found.iter().map(|m| m.ids.len()).sum::<usize>();
            }
            t.all = t.all.min(started.elapsed());
            let started = Instant::now();
            t.first_hits = 0;
            for &q in qs {
                t.first_hits += usize::from(store.query_first(q, k)?.is_some());
            }
            t.first = t.first.min(started.elapsed());
            // As `simstore query` answers: many queries a call, their
            // probes interleaved a few at a time, into answers reused
            // from call to call.
            let mut answers = simstore::Answers::new();
            let started = Instant::now();
            t.grouped_hits = 0;
            for part in qs.chunks(GROUPED) {
                store.query_many_into(part, k, false, None, &mut answers)?;
                t.grouped_hits += answers.iter().map(|m| m.len()).sum::<usize>();
            }
            t.grouped = t.grouped.min(started.elapsed());
            let started = Instant::now();
            t.grouped_first_hits = 0;
            for part in qs.chunks(GROUPED) {
                store.query_many_into(part, k, true, None, &mut answers)?;
                t.grouped_first_hits += answers.iter().map(|m| m.len()).sum::<usize>();
            }
            t.grouped_first = t.grouped_first.min(started.elapsed());
            let started = Instant::now();
            t.batch_hits = store.query_many(qs, k)?.iter().map(Vec::len).sum();
            t.batch = t.batch.min(started.elapsed());
        }
        Ok(t)
    }

    /// Fails unless every path and baseline found the same matches.
    fn check(&self, every: &AllCores, base: &Baselines) -> Result<(), Failure> {
        let base_hits = base.uncompressed.map(|(_, hits)| hits);
        let hits = self.hits;
        if [
            self.batch_hits,
            every.hits,
            every.batch_hits,
            self.grouped_hits,
            base_hits.unwrap_or(hits),
        ] != [hits; 5]
            || [every.first_hits, self.grouped_first_hits] != [self.first_hits; 2]
        {
            return Err(Failure::Io(std::io::Error::other(format!(
                "answers disagree: store {hits}, batch {}, {} threads {} and batch {}, \
                 first {} and {}, uncompressed {base_hits:?}",
                self.batch_hits,
                every.threads,
                every.hits,
                every.batch_hits,
                self.first_hits,
                every.first_hits
            ))));
        }
        Ok(())
    }
}

/// Query times with every core: queries split across threads, and the
/// batch spread over them.
struct AllCores {
    threads: usize,
    all: Duration,
    first: Duration,
    batch: Duration,
    hits: usize,
    first_hits: usize,
    batch_hits: usize,
}

impl AllCores {
    /// Opens the store at `path` with every core for its batches (the
    /// handle's query threads are set at open) and times the paths.
    fn measure(
        path: &std::path::Path,
        options: &Options,
        qs: &[u64],
        k: u32,
    ) -> Result<Self, Failure> {
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        let store = Store::open(path, &options.clone().query_threads(threads))?;
        store.wait_warm();
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
        let (hits, all) = parallel(false)?;
        let (first_hits, first) = parallel(true)?;
        let started = Instant::now();
        let batch_hits: usize = store.query_many(qs, k)?.iter().map(Vec::len).sum();
        let batch = started.elapsed();
        Ok(Self {
            threads,
            all,
            first,
            batch,
            hits,
            first_hits,
            batch_hits,
        })
    }
}

/// Prints the query figures with their ratios to the baselines.
fn report(
    config: &Config,
    one: &OneThread,
    every: &AllCores,
    base: &Baselines,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let queries = config.queries;
    let (scan_n, scan, scan_hits) = base.scan;
    let scan_rate = rate(scan_n, scan);
    writeln!(
        out,
        "matches: {} fingerprints with {} ids over {queries} queries (first-match found {}; scan sample {scan_hits})",
        one.hits, one.ids_found, one.first_hits
    )?;
    let uncompressed = base.uncompressed.map(|(time, _)| time);
    let line = |name: &str, r: f64| match uncompressed {
        Some(u) => format!(
            "{name}: {r:.0} queries/s ({:.2}x uncompressed, {:.1}x scan)",
            r / rate(queries, u),
            r / scan_rate
        ),
        None => format!("{name}: {r:.0} queries/s ({:.1}x scan)", r / scan_rate),
    };
    writeln!(out, "{}", line("all matches", rate(queries, one.all)))?;
    writeln!(out, "{}", line("first match", rate(queries, one.first)))?;
    writeln!(
        out,
        "{}",
        line(
            &format!("all matches, {GROUPED} queries a call (query_many_into, as simstore query)"),
            rate(queries, one.grouped)
        )
    )?;
    writeln!(
        out,
        "{}",
        line(
            &format!("first match, {GROUPED} queries a call (query_many_into, as simstore query)"),
            rate(queries, one.grouped_first)
        )
    )?;
    writeln!(out, "{}", line("batch", rate(queries, one.batch)))?;
    let both = |name: &str, one: Duration, many: Duration| {
        format!(
            "{name}, {} threads: {:.0} queries/s ({:.2}x one thread)",
            every.threads,
            rate(queries, many),
            one.as_secs_f64() / many.as_secs_f64().max(1e-9)
        )
    };
    writeln!(out, "{}", both("all matches", one.all, every.all))?;
    writeln!(out, "{}", both("first match", one.first, every.first))?;
    writeln!(out, "{}", both("batch", one.batch, every.batch))?;
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
    Ok(())
}

/// Opening: the store at `path`, closed cleanly (closing flushes RocksDB's
/// memtables); then a store killed while it held a million pending
/// fingerprints only in RocksDB's write-ahead log and memtables, which is
/// what a kill -9 leaves: the open replays the log and rebuilds the
/// pending sets. Cold-cache query latencies in between.
fn open_and_recover(
    size: usize,
    path: &std::path::Path,
    options: &Options,
    qs: &[u64],
    k: u32,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let reopen = Options::new().trim_allocator(true).manual_compaction(true);
    let started = Instant::now();
    let store = Store::open(path, &reopen)?;
    let clean = started.elapsed();
    store.wait_warm();
    let warmed = started.elapsed();
    drop(store);
    crate::cold::run(path, qs, k, out)?;
    let pending_dir = tempfile::tempdir()?;
    let crashed_path = pending_dir.path().join("crashed");
    drop(Store::create(&crashed_path, options)?);
    killed_with_pending(&crashed_path, 1_000_000)?;
    let started = Instant::now();
    let store = Store::open(&crashed_path, &reopen)?;
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
    Ok(())
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
