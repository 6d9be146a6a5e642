//! `simstore-bench`: the benchmarks of simstore. `run` measures ingest,
//! space, query, open and recovery figures against baselines computed in
//! the same run; `quality` measures how well fingerprint distance finds
//! near-duplicate documents; `grow` grows a store from empty by
//! incremental writes with queries beside them; `batch` times the batch
//! query on a store. `peers.py` beside this crate compares the `simstore`
//! command with FAISS and mih-rs; `python.py` the Python package with the
//! library and the command.

mod batch;
mod bench;
mod cold;
mod grow;
mod html;
mod pend;
mod psm;
mod quality;
mod svg;
mod volatility;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use simstore_cli::docs::Source;
use simstore_cli::Failure;

#[derive(Parser)]
#[command(name = "simstore-bench", about = "Benchmarks of simstore")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure ingest, space and query rates against in-run baselines.
    Run(bench::Config),
    /// Probabilistic queries on a one-table store against the exact
    /// tables, on the generative model of simhash weights: recall and rate
    /// per budget, bytes.
    Psm(psm::Config),
    /// Fit the volatility model's flip scale on documents and measure the
    /// recall of probabilistic queries on their near-duplicate pairs.
    Volatility(volatility::Config),
    /// Time the library's batch query on an existing store over
    /// fingerprints read from a file (little-endian u64s).
    Batch(batch::Config),
    /// Grow a store from empty to N pairs by incremental writes, with
    /// queries running beside them: rates, bytes written and memory per
    /// tenth of the way.
    Grow(grow::Config),
    /// Precision and recall of fingerprint distance against the Jaccard
    /// similarity of word shingles, over pairs of the given documents.
    Quality {
        /// Files or directories.
        inputs: Vec<PathBuf>,
        /// Jaccard similarities that make a pair a near-duplicate (comma
        /// separated: a table each).
        #[arg(long, value_delimiter = ',', default_value = "0.8")]
        threshold: Vec<f64>,
        /// Word-shingle width of the Jaccard ground truth.
        #[arg(long, default_value_t = 3)]
        truth_shingle: usize,
        /// Simhash shingle widths to compare (comma separated).
        #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5")]
        shingles: Vec<usize>,
        /// Largest distance reported.
        #[arg(long, default_value_t = 6)]
        max_k: u32,
        /// Inputs are HTML.
        #[arg(long)]
        html: bool,
        /// Weight features by term frequency times their inverse document
        /// frequency over the inputs.
        #[arg(long)]
        idf: bool,
    },
    /// The one-pass HTML text scanner of sketches against the parser-based
    /// extraction of `hash --html`: documents whose words differ, and speed.
    Html {
        /// Files or directories.
        inputs: Vec<PathBuf>,
    },
    /// Crash child of `run`'s recovery timing (see `pend.rs`).
    #[command(hide = true)]
    Pend {
        /// Store directory (must exist).
        dir: PathBuf,
        /// Fingerprints to append.
        #[arg(long)]
        count: u64,
        /// Seed of the fingerprints.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

fn dispatch(command: Command) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match command {
        Command::Run(config) => bench::run(&config, &mut out),
        Command::Grow(config) => grow::run(&config, &mut out),
        Command::Batch(config) => batch::run(&config, &mut out),
        Command::Volatility(config) => volatility::run(&config, &mut out),
        Command::Psm(config) => psm::run(&config, &mut out),
        Command::Quality {
            inputs,
            threshold,
            truth_shingle,
            shingles,
            max_k,
            html,
            idf,
        } => quality::Quality {
            thresholds: threshold,
            truth_shingle,
            shingles,
            max_k,
            idf,
        }
        .run(&inputs, &Source { html, jsonl: None }, &mut out),
        Command::Html { inputs } => html::run(&inputs, &mut out),
        Command::Pend { dir, count, seed } => pend::run(&dir, count, seed),
    }
}

fn main() {
    let cli = Cli::parse();
    std::process::exit(match dispatch(cli.command) {
        Ok(()) => 0,
        Err(failure) => simstore_cli::report(failure),
    });
}
