//! `simstore-bench psm`: probabilistic simhash matching on a one-table
//! store against the exact permuted tables, on the generative model of
//! simhash weights.
//!
//! The model: a stored document's 64 weight sums are independent standard
//! normal deviates, its fingerprint their signs; a near-duplicate's sums
//! are the same plus normal noise of standard deviation `--noise`
//! (default the volatility model's [`FLIP_SCALE`]), and its volatility is
//! computed from its own sums, as a crawler computes it from the page it
//! fetched. Half the queries are near-duplicates of stored documents,
//! half new documents. Every stored document carries its index as id.
//!
//! Both stores hold the same pairs, bulk loaded (in `--chunks` ranges of
//! the fingerprint space), then closed and reopened as a server would
//! open them; one query thread. For each budget (recall target) the run
//! reports the probabilistic queries' rate and their recall relative to
//! the exact answer (matches found over true matches within `k`), for all
//! matches and first match, beside the exact queries of the default plan
//! and of the one-table store (every header flip), and both stores' bytes.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use simstore::simhash::{Volatility, FLIP_SCALE};
use simstore::{Budget, Match, Options, Store};
use simstore_cli::rng::Rng;
use simstore_cli::Failure;

use crate::svg::{line_chart, Series};

/// What to measure.
#[derive(clap::Args)]
pub struct Config {
    /// Stored documents.
    #[arg(long, default_value_t = 1_000_000)]
    pub size: u64,
    /// Queries.
    #[arg(long, default_value_t = 100_000)]
    pub queries: usize,
    /// Query distance.
    #[arg(long, default_value_t = 3)]
    pub k: u32,
    /// Standard deviation of a near-duplicate's change to each weight sum
    /// (the sums' own being 1).
    #[arg(long, default_value_t = FLIP_SCALE)]
    pub noise: f64,
    /// Recall targets to run, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "0.5,0.8,0.9,0.95,0.99")]
    pub budgets: Vec<f64>,
    /// Probe budgets to run besides (headers probed per query and level,
    /// the query's own included), comma separated.
    #[arg(long, value_delimiter = ',')]
    pub probes: Vec<usize>,
    /// Skip the exact four-table store (for sizes it does not fit).
    #[arg(long)]
    pub one_table_only: bool,
    /// Load each store in this many bulk loads (1 to 8), each holding
    /// the fingerprints of one range of the fingerprint space, so that no
    /// load holds every pair in memory at once and each merges into
    /// blocks the others did not write (for a billion fingerprints).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=8))]
    pub chunks: u64,
    /// Directory for the stores (default: a temporary one).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Open the stores an earlier run left in `--dir` (with the same
    /// `--size`, `--k` and `--chunks`) instead of building them again; the
    /// load time is then reported as 0.
    #[arg(long, requires = "dir")]
    pub reuse: bool,
    /// Write the recall and rate series as CSV here.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Draw recall and rate against the budget as an SVG chart here.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// A standard normal deviate (Box-Muller).
fn gauss(rng: &mut Rng) -> f64 {
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let v = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * (1.0 - u).ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// Stored document `i`'s fingerprint: the signs of its weight sums.
fn fingerprint(i: u64) -> u64 {
    Rng(i ^ 0x5eed_f1a9).next_u64()
}

/// Stored document `i`'s weight sums (regenerated on demand). A standard
/// normal deviate is a fair sign times an independent half-normal
/// magnitude: the signs are [`fingerprint`]'s bits, so the stored
/// fingerprints are generated without the sums, and the sums only for
/// the documents queried.
fn document(i: u64) -> [f64; 64] {
    let fp = fingerprint(i);
    let mut rng = Rng(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed);
    std::array::from_fn(|j| {
        let magnitude = gauss(&mut rng).abs();
        if fp >> j & 1 == 1 {
            magnitude
        } else {
            -magnitude
        }
    })
}

/// The pairs of `0..n` whose fingerprints fall in the `c`-th of `chunks`
/// equal ranges of the fingerprint space, each document's index its id.
fn chunk(n: u64, c: u64, chunks: u64) -> Vec<(u64, u64)> {
    (0..n)
        .filter_map(|i| {
            let fp = fingerprint(i);
            ((u128::from(fp) * u128::from(chunks)) >> 64 == u128::from(c)).then_some((fp, i))
        })
        .collect()
}

fn signs(w: &[f64; 64]) -> u64 {
    (0..64).fold(0u64, |fp, j| if w[j] > 0.0 { fp | 1 << j } else { fp })
}

/// One measured row.
struct Row {
    what: String,
    budget: f64,
    rate: f64,
    recall: f64,
    /// Headers probed per query and level (VOSH's flip sets).
    probes: f64,
}

/// A store as built and reopened.
#[derive(Default)]
struct Built {
    /// Seconds in its bulk loads.
    load: f64,
    /// Seconds to reopen it and read its blocks back.
    open: f64,
    /// Its blocks' bytes.
    bytes: u64,
    /// Its id blocks' bytes.
    id_bytes: u64,
    /// The process's resident bytes once it is open and warm.
    rss: Option<u64>,
}

/// The process's resident bytes now (`VmRSS`).
fn rss() -> Option<u64> {
    crate::grow::proc_field("/proc/self/status", "VmRSS:", 1024)
}

/// The most the process has had resident (`VmHWM`).
fn peak_rss() -> Option<u64> {
    crate::grow::proc_field("/proc/self/status", "VmHWM:", 1024)
}

fn gb(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "unknown".into(), |b| format!("{:.2} GB", b as f64 / 1e9))
}

fn found(answers: &[Vec<Match>]) -> usize {
    answers.iter().map(Vec::len).sum()
}

/// Runs the comparison; prints a Markdown table.
pub fn run(config: &Config, out: &mut impl Write) -> Result<(), Failure> {
    let tmp = tempfile::tempdir()?;
    let base = config
        .dir
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let n = config.size;
    let k = config.k;
    let mut rng = Rng(7);
    let queries: Vec<(u64, Volatility)> = (0..config.queries)
        .map(|q| {
            let w: [f64; 64] = if q % 2 == 0 {
                let d = document(rng.below(n));
                std::array::from_fn(|j| d[j] + config.noise * gauss(&mut rng))
            } else {
                std::array::from_fn(|_| gauss(&mut rng))
            };
            (signs(&w), Volatility::from_weights(&w))
        })
        .collect();
    let fps: Vec<u64> = queries.iter().map(|q| q.0).collect();
    let options = Options::new()
        .expected_size(n)
        .max_distance(k)
        .query_threads(1);
    let build = |name: &str, options: &Options| -> Result<(Store, Built), Failure> {
        let path = base.join(name);
        let mut secs = 0.0;
        if !(config.reuse && path.exists()) {
            let _ = std::fs::remove_dir_all(&path);
            let store = Store::create(&path, options)?;
            for c in 0..config.chunks {
                let pairs = chunk(n, c, config.chunks);
                let t = Instant::now();
                store.insert_many(&pairs)?;
                secs += t.elapsed().as_secs_f64();
            }
            // Served as a user serves it: reopened, its blocks read back.
            store.close()?;
        }
        let t = Instant::now();
        let store = Store::open(&path, options)?;
        store.wait_warm();
        let open = t.elapsed().as_secs_f64();
        let stats = store.stats();
        if stats.ids != n {
            return Err(Failure::Store(simstore::Error::InvalidArgument(format!(
                "{} pairs stored of {n}",
                stats.ids
            ))));
        }
        let built = Built {
            load: secs,
            open,
            bytes: stats.table_bytes,
            id_bytes: stats.id_bytes,
            rss: rss(),
        };
        Ok((store, built))
    };
    let mut rows: Vec<Row> = Vec::new();
    let rate = |secs: f64| config.queries as f64 / secs;
    let (one, one_built) = build("one", &options.clone().tables(1))?;
    let one_bytes = one_built.bytes;
    let header = one.plan().header_bits().unwrap_or(0);
    // The exact answers, from the one-table store's exhaustive search.
    let t = Instant::now();
    let exact = one.query_probabilistic_many(&queries, k, Budget::EXHAUSTIVE, false)?;
    let exhaustive_secs = t.elapsed().as_secs_f64();
    let truth = found(&exact);
    let with_match = exact.iter().filter(|a| !a.is_empty()).count();
    let mut four_built = Built::default();
    if !config.one_table_only {
        let (four, built) = build("four", &options)?;
        four_built = built;
        let t = Instant::now();
        let all = four.query_many(&fps, k)?;
        let all_secs = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let firsts = four.query_first_many(&fps, k)?;
        let first_secs = t.elapsed().as_secs_f64();
        if found(&all) != truth {
            return Err(Failure::Store(simstore::Error::InvalidArgument(format!(
                "the stores disagree: {} exact matches in four tables, {truth} in one",
                found(&all)
            ))));
        }
        let tables = four.plan().tables().len();
        rows.push(Row {
            what: format!("exact, {tables} tables, all matches"),
            budget: 1.0,
            rate: rate(all_secs),
            recall: 1.0,
            probes: tables as f64,
        });
        rows.push(Row {
            what: format!("exact, {tables} tables, first match"),
            budget: 1.0,
            rate: rate(first_secs),
            recall: firsts.iter().filter(|f| f.is_some()).count() as f64 / with_match.max(1) as f64,
            probes: tables as f64,
        });
        four.close()?;
    }
    rows.push(Row {
        what: "one table, exhaustive (exact)".into(),
        budget: 1.0,
        rate: rate(exhaustive_secs),
        recall: 1.0,
        probes: simstore::plan::vosh::exact_count(header, k.min(8) as u8) as f64,
    });
    let bits: Vec<u8> = (64 - header..64).collect();
    let budgets = config
        .budgets
        .iter()
        .map(|&r| (format!("budget {r}"), r, Budget::recall(r)))
        .chain(
            config
                .probes
                .iter()
                .map(|&n| (format!("{n} probes"), f64::NAN, Budget::probes(n.max(1)))),
        );
    for (name, target, budget) in budgets {
        let probes = queries
            .iter()
            .map(|(_, v)| {
                simstore::plan::vosh::flips(&bits, |b| v.probability(b), k.min(8) as u8, budget)
                    .len()
            })
            .sum::<usize>() as f64
            / config.queries.max(1) as f64;
        let t = Instant::now();
        let all = one.query_probabilistic_many(&queries, k, budget, false)?;
        let secs = t.elapsed().as_secs_f64();
        rows.push(Row {
            what: format!("one table, PSM all matches, {name}"),
            budget: target,
            rate: rate(secs),
            recall: found(&all) as f64 / truth.max(1) as f64,
            probes,
        });
        let t = Instant::now();
        let firsts = one.query_probabilistic_many(&queries, k, budget, true)?;
        let secs = t.elapsed().as_secs_f64();
        rows.push(Row {
            what: format!("one table, PSM first match, {name}"),
            budget: target,
            rate: rate(secs),
            recall: firsts.iter().filter(|f| !f.is_empty()).count() as f64
                / with_match.max(1) as f64,
            probes,
        });
    }
    one.close()?;
    let entropy_bits = 64.0 - (n as f64).log2() + std::f64::consts::LOG2_E;
    writeln!(
        out,
        "{n} documents of the generative model (noise {}), {} queries (half near-duplicates), k = {k}, one query thread; {truth} true matches, {with_match} queries with one",
        config.noise, config.queries
    )?;
    writeln!(
        out,
        "one table: header {header} bits, {:.2} bits per fingerprint ({:.2}x the entropy bound {entropy_bits:.2}) and {:.2} of id blocks; {} bulk load(s) {:.1} s; reopened and read back in {:.1} s; resident {} once warm",
        one_bytes as f64 * 8.0 / n as f64,
        one_bytes as f64 * 8.0 / n as f64 / entropy_bits,
        one_built.id_bytes as f64 * 8.0 / n as f64,
        config.chunks,
        one_built.load,
        one_built.open,
        gb(one_built.rss),
    )?;
    if !config.one_table_only {
        writeln!(
            out,
            "default plan: {:.2} bits per fingerprint ({:.2}x one table's bytes), bulk load(s) {:.1} s",
            four_built.bytes as f64 * 8.0 / n as f64,
            four_built.bytes as f64 / one_bytes.max(1) as f64,
            four_built.load
        )?;
    }
    writeln!(out, "peak resident {}", gb(peak_rss()))?;
    writeln!(
        out,
        "\n| query | queries/s | recall | headers probed per query |"
    )?;
    writeln!(out, "|---|---|---|---|")?;
    for r in &rows {
        writeln!(
            out,
            "| {} | {:.0} | {:.3} | {:.1} |",
            r.what, r.rate, r.recall, r.probes
        )?;
    }
    let psm: Vec<&Row> = rows
        .iter()
        .filter(|r| r.what.contains("PSM all") && !r.budget.is_nan())
        .collect();
    if let Some(path) = &config.csv {
        let mut csv = String::from("query,budget,queries_per_second,recall,probes\n");
        for r in &rows {
            csv.push_str(&format!(
                "\"{}\",{},{:.0},{:.4},{:.1}\n",
                r.what, r.budget, r.rate, r.recall, r.probes
            ));
        }
        std::fs::write(path, csv)?;
    }
    if let Some(path) = &config.svg {
        let chart = line_chart(
            &format!("PSM on one table of {n} (generative model, k = {k}, one thread)"),
            "budget: share of the flip probability covered",
            &Series {
                name: "recall (relative to exact)",
                color: "#1f77b4",
                points: psm.iter().map(|r| (r.budget, r.recall)).collect(),
            },
            &Series {
                name: "all-matches queries/s",
                color: "darkred",
                points: psm.iter().map(|r| (r.budget, r.rate)).collect(),
            },
        );
        std::fs::write(path, chart)?;
    }
    Ok(())
}
