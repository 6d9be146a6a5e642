//! `simstore-bench volatility`: fits the flip model of
//! [`Volatility`] on real documents and
//! measures, on them, the recall of probabilistic queries.
//!
//! Every document is fingerprinted; each ordered pair of distinct texts
//! whose fingerprints lie within distance `k` is a sample: the query
//! document's 64 weight sums and the bits in which the other's
//! fingerprint differs. The flip scale `τ` is chosen by maximum
//! likelihood over a grid (each bit flipping independently with
//! `½·erfc(z/(τ√2))`, `z = |W| / rms(W)`), and printed beside the
//! likelihood of the built-in [`FLIP_SCALE`]. Then, for recall targets
//! from 0.5 to 1, the share of samples whose header flips (for the header
//! a one-table store of this many documents would have) VOSH takes within
//! the budget, and the probes it takes: recall relative to the exact
//! answer, as the store's probabilistic queries would get it.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;

use simstore::plan::vosh::{self, Budget};
use simstore::plan::{header_width, Plan};
use simstore::simhash::{Fingerprinter, Volatility, FLIP_SCALE};
use simstore::{Options, Store};
use simstore_cli::docs::{files, Source};
use simstore_cli::Failure;

/// What to fit on.
#[derive(clap::Args)]
pub struct Config {
    /// Files or directories of documents.
    pub inputs: Vec<PathBuf>,
    /// Pairs within this distance are samples.
    #[arg(long, default_value_t = 3)]
    pub k: u32,
    /// Inputs are HTML.
    #[arg(long)]
    pub html: bool,
    /// Header width of the recall measurement (default: a one-table
    /// store's for this many documents).
    #[arg(long)]
    pub header: Option<u8>,
}

/// One sample: the query's weight sums and the bits the match differs in.
struct Sample {
    weights: [f64; 64],
    flips: u64,
}

fn log_likelihood(samples: &[&Sample], tau: f64) -> f64 {
    samples
        .iter()
        .map(|s| {
            let v = Volatility::from_weights_scaled(&s.weights, tau);
            (0..64u8)
                .map(|j| {
                    let p = v.probability(j).clamp(1e-12, 0.5);
                    if s.flips >> j & 1 == 1 {
                        p.ln()
                    } else {
                        (1.0 - p).ln()
                    }
                })
                .sum::<f64>()
        })
        .sum()
}

/// Fits and measures; prints a report.
pub fn run(config: &Config, out: &mut impl Write) -> Result<(), Failure> {
    let source = Source {
        html: config.html,
        jsonl: None,
    };
    let mut texts = Vec::new();
    let mut seen = HashSet::new();
    for file in files(&config.inputs).into_iter().flatten() {
        source.documents(&file, &mut |d| {
            if let Ok(t) = d.text() {
                if seen.insert(xxhash_rust::xxh3::xxh3_64(t.as_bytes())) {
                    texts.push(t.into_owned());
                }
            }
        });
    }
    let f = Fingerprinter::new();
    let sims: Vec<_> = texts.iter().filter_map(|t| f.fingerprint(t)).collect();
    let n = sims.len();
    let dir = tempfile::tempdir()?;
    let store = Store::create(
        dir.path().join("s"),
        &Options::new()
            .expected_size(n as u64)
            .max_distance(config.k.max(1)),
    )?;
    let pairs: Vec<(u64, u64)> = sims
        .iter()
        .enumerate()
        .map(|(i, s)| (s.fingerprint, i as u64))
        .collect();
    store.insert_many(&pairs)?;
    let mut samples = Vec::new();
    let mut by_distance = vec![0usize; config.k as usize + 1];
    for (i, s) in sims.iter().enumerate() {
        for m in store.query(s.fingerprint, config.k)? {
            for &j in &m.ids {
                if j as usize != i {
                    by_distance[m.distance as usize] += 1;
                    samples.push(Sample {
                        weights: s.weights,
                        flips: s.fingerprint ^ m.fingerprint,
                    });
                }
            }
        }
    }
    writeln!(
        out,
        "{} distinct documents with words, {} ordered pairs within distance {} (by distance: {:?})",
        n,
        samples.len(),
        config.k,
        by_distance
    )?;
    if samples.is_empty() {
        return Ok(());
    }
    let fit: Vec<&Sample> = samples
        .iter()
        .step_by((samples.len() / 20_000).max(1))
        .collect();
    let (mut best_tau, mut best_ll) = (FLIP_SCALE, f64::NEG_INFINITY);
    for i in 0..=120 {
        let tau = 0.01 * (200f64).powf(f64::from(i) / 120.0);
        let ll = log_likelihood(&fit, tau);
        if ll > best_ll {
            (best_tau, best_ll) = (tau, ll);
        }
    }
    let at_default = log_likelihood(&fit, FLIP_SCALE);
    let mean_flips =
        samples.iter().map(|s| s.flips.count_ones()).sum::<u32>() as f64 / samples.len() as f64;
    writeln!(
        out,
        "flip scale tau: maximum likelihood {best_tau:.4} (log-likelihood {best_ll:.1} over {} samples); built-in {FLIP_SCALE} gives {at_default:.1}; mean flips per pair {mean_flips:.2}",
        fit.len()
    )?;
    let header = config.header.unwrap_or_else(|| header_width(n as u64));
    // The header a one-table store of this distance would accept.
    Plan::one_table(config.k.min(8) as u8, header).map_err(simstore::Error::Plan)?;
    let bits: Vec<u8> = (64 - header..64).collect();
    writeln!(
        out,
        "\nrecall of probabilistic queries, header {header} bits (one table of {n}), k = {}:",
        config.k
    )?;
    writeln!(
        out,
        "| budget (recall target) | recall | probes per query (mean) |"
    )?;
    writeln!(out, "|---|---|---|")?;
    for target in [0.5, 0.8, 0.9, 0.95, 0.975, 0.985, 0.99, 1.0] {
        let (mut hit, mut probes) = (0usize, 0usize);
        for s in &samples {
            let v = Volatility::from_weights(&s.weights);
            let masks = vosh::flips(
                &bits,
                |b| v.probability(b),
                config.k.min(8) as u8,
                Budget::recall(target),
            );
            probes += masks.len();
            let need = s.flips & !(u64::MAX >> header);
            hit += usize::from(masks.contains(&need));
        }
        writeln!(
            out,
            "| {target} | {:.3} | {:.1} |",
            hit as f64 / samples.len() as f64,
            probes as f64 / samples.len() as f64
        )?;
    }
    Ok(())
}
