//! `simstore-bench grow`: a store grown from empty to N pairs by
//! incremental writes only, as a long-running archive grows (created
//! without an expected size, background compaction running), with
//! queries running beside the writers all the way. Per tenth of the way it
//! reports the ingest and query rates over that tenth, the bytes the
//! process wrote to storage, the store's own figures and the memory held.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use simstore::{Durability, Options, Stats, Store};
use simstore_cli::rng::Rng;
use simstore_cli::Failure;

/// What `simstore-bench grow` measures (its command-line options).
#[derive(Debug, clap::Args)]
pub struct Config {
    /// Pairs (fingerprint, id) to insert; about 1% of them give a stored
    /// fingerprint a further id.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1000..))]
    pub size: u64,
    /// Writers: `buffered`, 64 threads inserting one pair a call with
    /// buffered durability; `sync`, 16 threads committing 16 pairs a call
    /// with sync durability.
    #[arg(long, value_enum, default_value_t = Mode::Buffered)]
    pub mode: Mode,
    /// Create the store here (absent or empty; kept after the run)
    /// instead of in a temporary directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Write the series as CSV to this file (a header, a row per tenth).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write a chart of the ingest and query rates against the store's
    /// size as SVG to this file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Threads querying while the writers write.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub query_threads: u64,
    /// Seed of the fingerprints and the queries.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Query distance (also the store's maximum distance).
    #[arg(long, default_value_t = 3)]
    pub k: u32,
}

/// How the writers write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// 64 threads, one pair a call, buffered durability.
    Buffered,
    /// 16 threads, 16 pairs a call, sync durability.
    Sync,
}

impl Mode {
    /// The store's durability.
    fn durability(self) -> Durability {
        match self {
            Self::Buffered => Durability::Buffered,
            Self::Sync => Durability::Sync,
        }
    }

    /// Writer threads.
    fn writers(self) -> u64 {
        match self {
            Self::Buffered => 64,
            Self::Sync => 16,
        }
    }

    /// Pairs a call.
    fn batch(self) -> u64 {
        match self {
            Self::Buffered => 1,
            Self::Sync => 16,
        }
    }

    /// The mode's name on the command line.
    fn name(self) -> &'static str {
        match self {
            Self::Buffered => "buffered",
            Self::Sync => "sync",
        }
    }
}

/// A column of the store's figures: its name and how to read it.
type StatsColumn = (&'static str, fn(&Stats) -> u64);

/// The store's own figures reported per tenth, read from [`Stats`]: a
/// column name and its value. A further figure is one more line here.
const STATS_COLUMNS: &[StatsColumn] = &[
    ("pending", |s| s.pending),
    ("table_bytes", |s| s.table_bytes),
    ("id_bytes", |s| s.id_bytes),
    ("bytes_on_disk", |s| s.bytes_on_disk),
    ("merge_bytes_written", |s| s.merge_bytes_written),
    ("levels", |s| {
        s.levels.iter().filter(|l| l.fingerprints > 0).count() as u64
    }),
];

/// Pairs within this distance of the newest index are never the source
/// of a re-inserted fingerprint, so a source is normally stored long
/// before it is needed (a writer waits for it otherwise).
const SOURCE_MARGIN: u64 = 4096;

/// Failed checks printed in full (all are counted).
const FAILURES_SHOWN: usize = 20;

/// The pairs: pair `i` has id `i` and, mostly, a fingerprint of its own
/// drawn from the seed; about one in a hundred (past the first
/// `2 * SOURCE_MARGIN`) repeats the fingerprint of an earlier pair, its
/// source. Every thread derives the same fingerprint from an index.
struct Data {
    seed: u64,
}

impl Data {
    /// The pair `i` takes its fingerprint from, if it repeats one.
    fn source(&self, i: u64) -> Option<u64> {
        if i < 2 * SOURCE_MARGIN || !self.hash(i, 1).is_multiple_of(100) {
            return None;
        }
        Some(self.hash(i, 2) % (i - SOURCE_MARGIN))
    }

    /// The fingerprint of pair `i`.
    fn fingerprint(&self, mut i: u64) -> u64 {
        while let Some(j) = self.source(i) {
            i = j;
        }
        self.hash(i, 0)
    }

    /// 64 random bits for index `i` and purpose `salt`.
    fn hash(&self, i: u64, salt: u64) -> u64 {
        Rng(self.seed
            ^ i.wrapping_mul(0xd6e8_feb8_6659_fd93)
            ^ salt.wrapping_mul(0xa076_1d64_78bd_642f))
        .next_u64()
    }
}

/// Which pairs have been acknowledged by the store (one bit per index):
/// a writer sets a pair's bit once its insert returned, so a query that
/// sees the bit must find the pair.
struct Acknowledged(Vec<AtomicU64>);

impl Acknowledged {
    /// No pair of `n` acknowledged.
    fn new(n: u64) -> Self {
        Self((0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect())
    }

    /// Marks pair `i` acknowledged.
    fn set(&self, i: u64) {
        self.0[(i / 64) as usize].fetch_or(1 << (i % 64), Ordering::Release);
    }

    /// Whether pair `i` is acknowledged.
    fn get(&self, i: u64) -> bool {
        self.0[(i / 64) as usize].load(Ordering::Acquire) & (1 << (i % 64)) != 0
    }
}

/// The process's figures at one point of the run.
struct Snapshot {
    /// The tenth just completed (1 to 10).
    tenth: u32,
    /// Pairs acknowledged.
    pairs: u64,
    /// Seconds since the first write.
    elapsed: f64,
    /// Queries answered so far.
    queries: u64,
    /// The longest a query took since the snapshot before, in
    /// nanoseconds (0 when none was answered).
    slowest_query: u64,
    /// Bytes the process has caused to be written to storage
    /// (`/proc/self/io` `write_bytes`), when readable.
    written: Option<u64>,
    /// Resident memory (`/proc/self/status` `VmRSS`), when readable.
    rss: Option<u64>,
    /// The store's figures.
    stats: Stats,
}

/// What the threads share.
struct Shared<'a> {
    /// The store grown.
    store: &'a Store,
    /// The pairs written.
    data: Data,
    /// Pairs to write.
    size: u64,
    /// Query distance.
    k: u32,
    /// When the writers started.
    started: Instant,
    /// The next pair index to claim.
    next: AtomicU64,
    /// Pairs acknowledged.
    done: AtomicU64,
    /// The pairs whose insert returned.
    acknowledged: Acknowledged,
    /// Cleared when the writers finish or one fails.
    writing: AtomicBool,
    /// Queries answered.
    queries: AtomicU64,
    /// The longest a query took since the last snapshot, in nanoseconds.
    slowest_query: AtomicU64,
    /// Queries whose answer lacked the stored pair they were made from.
    failures: AtomicU64,
    /// The first [`FAILURES_SHOWN`] failed checks, described.
    shown: Mutex<Vec<String>>,
    /// A snapshot per completed tenth.
    snapshots: Mutex<Vec<Snapshot>>,
}

impl Shared<'_> {
    /// One writer: claims `batch` indices at a time and stores them.
    fn write(&self, batch: u64) -> simstore::Result<()> {
        let mut pairs = Vec::with_capacity(batch as usize);
        loop {
            let start = self.next.fetch_add(batch, Ordering::Relaxed);
            if start >= self.size || !self.writing.load(Ordering::Relaxed) {
                return Ok(());
            }
            let end = (start + batch).min(self.size);
            pairs.clear();
            for i in start..end {
                if let Some(j) = self.data.source(i) {
                    // A re-insert repeats a stored fingerprint.
                    while !self.acknowledged.get(j) {
                        if !self.writing.load(Ordering::Relaxed) {
                            return Ok(());
                        }
                        std::thread::yield_now();
                    }
                }
                pairs.push((self.data.fingerprint(i), i));
            }
            let written = if let [(fingerprint, id)] = pairs[..] {
                self.store.insert(fingerprint, id)
            } else {
                self.store.insert_many(&pairs)
            };
            if let Err(e) = written {
                self.writing.store(false, Ordering::Relaxed);
                return Err(e);
            }
            for i in start..end {
                self.acknowledged.set(i);
            }
            let before = self.done.fetch_add(end - start, Ordering::AcqRel);
            self.crossed(before, before + end - start);
        }
    }

    /// Takes a snapshot for each tenth that `before..after` completes.
    fn crossed(&self, before: u64, after: u64) {
        for tenth in 1..=10u32 {
            let boundary = self.size * u64::from(tenth) / 10;
            if before < boundary && boundary <= after {
                let mut snapshots = self.snapshots.lock().unwrap_or_else(|p| p.into_inner());
                let elapsed = self.started.elapsed().as_secs_f64();
                let queries = self.queries.load(Ordering::Relaxed);
                snapshots.push(Snapshot {
                    tenth,
                    pairs: after,
                    elapsed,
                    queries,
                    slowest_query: self.slowest_query.swap(0, Ordering::Relaxed),
                    written: proc_field("/proc/self/io", "write_bytes:", 1),
                    rss: proc_field("/proc/self/status", "VmRSS:", 1024),
                    stats: self.store.stats(),
                });
            }
        }
        if after >= self.size {
            self.writing.store(false, Ordering::Relaxed);
        }
    }

    /// One query thread: until the writers stop, half the queries are a
    /// stored pair's fingerprint with 0 to 3 bits flipped (the answer must
    /// hold that fingerprint with that id), half uniform.
    fn query(&self, seed: u64) -> simstore::Result<()> {
        let mut rng = Rng(seed);
        let flips = self.k.min(3);
        while self.writing.load(Ordering::Relaxed) {
            let claimed = self.next.load(Ordering::Relaxed).min(self.size);
            let stored = (rng.next_u64() & 1 == 0)
                .then(|| {
                    // A pair being written may not be acknowledged yet:
                    // try a few.
                    (0..8)
                        .map(|_| rng.below(claimed))
                        .find(|&i| claimed > 0 && self.acknowledged.get(i))
                })
                .flatten();
            let Some(i) = stored else {
                self.timed_query(rng.next_u64())?;
                continue;
            };
            let fingerprint = self.data.fingerprint(i);
            let bits = rng.below(u64::from(flips) + 1) as u32;
            let q = rng.flip(fingerprint, bits);
            let answer = self.timed_query(q)?;
            if !answer
                .iter()
                .any(|m| m.fingerprint == fingerprint && m.ids.contains(&i))
            {
                self.failures.fetch_add(1, Ordering::Relaxed);
                let mut shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
                if shown.len() < FAILURES_SHOWN {
                    shown.push(format!(
                        "query {q:016x} ({bits} bits from pair {i}, fingerprint {fingerprint:016x}) \
                         at {} pairs: {} match(es), none with id {i}: {:?}",
                        self.done.load(Ordering::Relaxed),
                        answer.len(),
                        answer
                            .iter()
                            .take(4)
                            .map(|m| (format!("{:016x}", m.fingerprint), &m.ids))
                            .collect::<Vec<_>>()
                    ));
                }
            }
        }
        Ok(())
    }

    /// The store's answer to `q`, counted and timed.
    fn timed_query(&self, q: u64) -> simstore::Result<Vec<simstore::Match>> {
        let asked = Instant::now();
        let answer = self.store.query(q, self.k)?;
        let took = u64::try_from(asked.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.slowest_query.fetch_max(took, Ordering::Relaxed);
        self.queries.fetch_add(1, Ordering::Relaxed);
        Ok(answer)
    }
}

/// A number from a `/proc` file: the first field after the line starting
/// with `key`, times `unit`.
pub(crate) fn proc_field(path: &str, key: &str, unit: u64) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    let n: u64 = line[key.len()..].split_whitespace().next()?.parse().ok()?;
    Some(n * unit)
}

/// One reported row: a snapshot with the rates over its tenth.
struct Row<'a> {
    /// The figures at the end of the tenth.
    at: &'a Snapshot,
    /// Pairs a second over the tenth.
    ingest: f64,
    /// Queries a second over the tenth.
    query: f64,
    /// Bytes written over the tenth per pair inserted in it.
    written_per_pair: Option<f64>,
    /// Bytes written since the start per byte of the store on disk.
    written_per_stored: Option<f64>,
}

impl Row<'_> {
    /// The rows of `snapshots` (in order), each against the one before
    /// (the first against the start, `written0` bytes written then).
    fn all(snapshots: &[Snapshot], written0: Option<u64>) -> Vec<Row<'_>> {
        let mut previous = (0u64, 0.0f64, 0u64, written0);
        snapshots
            .iter()
            .map(|s| {
                let (pairs, elapsed, queries, written) = previous;
                // Two writers completing adjacent tenths at once may take
                // their snapshots in either order: differences saturate.
                let seconds = (s.elapsed - elapsed).max(1e-9);
                let added = s.pairs.saturating_sub(pairs);
                let row = Row {
                    at: s,
                    ingest: added as f64 / seconds,
                    query: s.queries.saturating_sub(queries) as f64 / seconds,
                    written_per_pair: s
                        .written
                        .zip(written)
                        .map(|(now, then)| now.saturating_sub(then) as f64 / added.max(1) as f64),
                    written_per_stored: s.written.zip(written0).map(|(now, start)| {
                        now.saturating_sub(start) as f64 / s.stats.bytes_on_disk.max(1) as f64
                    }),
                };
                previous = (s.pairs, s.elapsed, s.queries, s.written);
                row
            })
            .collect()
    }

    /// The row's cells, named as the CSV header names them.
    fn cells(&self) -> Vec<(&'static str, String)> {
        let s = self.at;
        let opt = |v: Option<f64>, digits: usize| {
            v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
        };
        let mut cells = vec![
            ("tenth", s.tenth.to_string()),
            ("pairs", s.pairs.to_string()),
            ("fingerprints", s.stats.fingerprints.to_string()),
            ("ingest_per_s", format!("{:.0}", self.ingest)),
            ("queries_per_s", format!("{:.0}", self.query)),
            (
                "slowest_query_ms",
                match s.slowest_query {
                    0 => "-".to_string(),
                    ns => format!("{:.2}", ns as f64 / 1e6),
                },
            ),
            ("written_per_pair", opt(self.written_per_pair, 1)),
            ("written_per_stored_byte", opt(self.written_per_stored, 2)),
        ];
        cells.extend(
            STATS_COLUMNS
                .iter()
                .map(|&(name, value)| (name, value(&s.stats).to_string())),
        );
        cells.push((
            "rss_bytes",
            s.rss.map_or_else(|| "-".to_string(), |r| r.to_string()),
        ));
        cells.push(("elapsed_s", format!("{:.2}", s.elapsed)));
        cells
    }
}

/// Grows the store, prints the table and the summary, writes the CSV and
/// the chart when asked; fails when a query missed a stored pair.
pub fn run(config: &Config, out: &mut impl Write) -> Result<(), Failure> {
    let temporary = match config.dir {
        Some(_) => None,
        None => Some(tempfile::tempdir()?),
    };
    let path: PathBuf = match (&config.dir, &temporary) {
        (Some(dir), _) => dir.clone(),
        (None, Some(t)) => t.path().join("s"),
        (None, None) => unreachable!("a temporary directory is made when no --dir is given"),
    };
    let mode = config.mode;
    // No expected size: the store is planned with the default, as an
    // archive that does not know how large it will grow.
    let store = Store::create(
        &path,
        &Options::new()
            .max_distance(config.k)
            .durability(mode.durability())
            .trim_allocator(true),
    )?;
    let stats = store.stats();
    writeln!(
        out,
        "grow: N = {} pairs (about 1% repeating a stored fingerprint), {} writers x {} a call, \
         {:?}, {} query thread(s), k = {}; {} tables, prefixes {:?} (planned for {}); store at {}",
        config.size,
        mode.writers(),
        mode.batch(),
        mode.durability(),
        config.query_threads,
        config.k,
        stats.tables,
        stats.prefix_bits,
        stats.expected_size,
        path.display()
    )?;
    let written0 = proc_field("/proc/self/io", "write_bytes:", 1);
    let shared = Shared {
        store: &store,
        data: Data { seed: config.seed },
        size: config.size,
        k: config.k,
        started: Instant::now(),
        next: AtomicU64::new(0),
        done: AtomicU64::new(0),
        acknowledged: Acknowledged::new(config.size),
        writing: AtomicBool::new(true),
        queries: AtomicU64::new(0),
        slowest_query: AtomicU64::new(0),
        failures: AtomicU64::new(0),
        shown: Mutex::new(Vec::new()),
        snapshots: Mutex::new(Vec::with_capacity(10)),
    };
    std::thread::scope(|scope| -> Result<(), Failure> {
        let shared = &shared;
        // Named, so that a profile tells the writers and the queries
        // from the store's own threads.
        let writers = (0..mode.writers())
            .map(|_| {
                std::thread::Builder::new()
                    .name("grow-writer".into())
                    .spawn_scoped(scope, move || shared.write(mode.batch()))
            })
            .collect::<std::io::Result<Vec<_>>>()
            .inspect_err(|_| shared.writing.store(false, Ordering::Relaxed))?;
        let queriers = (0..config.query_threads)
            .map(|t| {
                let seed = config.seed ^ 0x5eed_0000 ^ (t << 32);
                std::thread::Builder::new()
                    .name("grow-query".into())
                    .spawn_scoped(scope, move || {
                        let result = shared.query(seed);
                        if result.is_err() {
                            shared.writing.store(false, Ordering::Relaxed);
                        }
                        result
                    })
            })
            .collect::<std::io::Result<Vec<_>>>()
            .inspect_err(|_| shared.writing.store(false, Ordering::Relaxed))?;
        // (The scope joins every thread before it returns, on an error too.)
        for handle in writers.into_iter().chain(queriers) {
            handle
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        }
        Ok(())
    })?;
    let wall = shared.started.elapsed().as_secs_f64();
    let Shared {
        snapshots,
        shown,
        queries,
        failures,
        ..
    } = shared;
    let closing = Instant::now();
    store.close()?;
    let closed = closing.elapsed().as_secs_f64();

    let mut snapshots = snapshots.into_inner().unwrap_or_else(|p| p.into_inner());
    snapshots.sort_by_key(|s| s.tenth);
    let rows = Row::all(&snapshots, written0);
    print_table(&rows, out)?;
    let failures = failures.into_inner();
    for line in shown.into_inner().unwrap_or_else(|p| p.into_inner()) {
        writeln!(out, "failure: {line}")?;
    }
    let (first, last) = match (rows.first(), rows.last()) {
        (Some(f), Some(l)) => (f.ingest, l.ingest),
        _ => (0.0, 0.0),
    };
    writeln!(
        out,
        "grow {}: last tenth's ingest {last:.0}/s over the first tenth's {first:.0}/s = {:.2}; \
         {wall:.1} s wall ({closed:.2} s more to close); {} queries; {failures} failures",
        mode.name(),
        last / first.max(1e-9),
        queries.into_inner(),
    )?;
    if let Some(csv) = &config.csv {
        write_csv(csv, &rows)?;
    }
    if let Some(svg) = &config.svg {
        write_svg(svg, &rows, config)?;
    }
    if failures > 0 {
        return Err(Failure::Io(std::io::Error::other(format!(
            "{failures} queries missed a stored pair"
        ))));
    }
    Ok(())
}

/// The rows as a Markdown table.
fn print_table(rows: &[Row], out: &mut impl Write) -> Result<(), Failure> {
    let Some(first) = rows.first() else {
        return Ok(());
    };
    let names: Vec<&str> = first.cells().iter().map(|c| c.0).collect();
    writeln!(out, "| {} |", names.join(" | "))?;
    writeln!(out, "|{}", "---|".repeat(names.len()))?;
    for row in rows {
        let cells: Vec<String> = row.cells().into_iter().map(|c| c.1).collect();
        writeln!(out, "| {} |", cells.join(" | "))?;
    }
    Ok(())
}

/// The rows as CSV: a header line, then a line per tenth.
fn write_csv(path: &Path, rows: &[Row]) -> Result<(), Failure> {
    let mut text = String::new();
    for (i, row) in rows.iter().enumerate() {
        let cells = row.cells();
        if i == 0 {
            let names: Vec<&str> = cells.iter().map(|c| c.0).collect();
            text.push_str(&names.join(","));
            text.push('\n');
        }
        let values: Vec<String> = cells.into_iter().map(|c| c.1).collect();
        text.push_str(&values.join(","));
        text.push('\n');
    }
    std::fs::write(path, text)?;
    Ok(())
}

/// The ingest and query rates against the store's size, as SVG.
fn write_svg(path: &Path, rows: &[Row], config: &Config) -> Result<(), Failure> {
    let series = |name, color, rate: fn(&Row) -> f64| crate::svg::Series {
        name,
        color,
        points: rows.iter().map(|r| (r.at.pairs as f64, rate(r))).collect(),
    };
    let mode = config.mode;
    let chart = crate::svg::line_chart(
        &format!(
            "simstore grow: {} writers x {} ({}), {} query thread(s), k = {}",
            mode.writers(),
            mode.batch(),
            mode.name(),
            config.query_threads,
            config.k
        ),
        "store size (pairs inserted); rates over each tenth of the run",
        &series("ingest, pairs/s", "#1f5fa8", |r| r.ingest),
        &series("queries/s", "#c0392b", |r| r.query),
    );
    std::fs::write(path, chart)?;
    Ok(())
}
