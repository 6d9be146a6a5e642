//! The command line: commands, their flags and arguments (clap).

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use simstore::Durability;

use super::{docs, exit};

#[derive(Parser)]
#[command(name = "simstore", version, about = "A persistent store for 64-bit simhash fingerprints", after_help = exit::HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// How a command opens an existing store.
#[derive(clap::Args)]
pub struct OpenArgs {
    /// Most bytes of compressed tables to hold in memory (a number, with
    /// K, M, G or T for powers of 1024); a store whose tables take more is
    /// served from disk through RocksDB. Default: half of physical memory
    /// for commands that answer queries; 0 for add, delete and compact,
    /// which write and exit (their merges then hold no second copy).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub memory_budget: Option<u64>,
    /// Pending fingerprints merged into the top (smallest) level at a time
    /// (default 65,536): smaller merges more often.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub merge_threshold: Option<u64>,
}

/// Parses a recall between 0 and 1.
fn parse_recall(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{s:?} is not a recall between 0 and 1")),
    }
}

/// Parses a count of at least one.
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{s:?} is not a count of at least 1")),
    }
}

/// Parses `123`, `64K`, `512M`, `2G` or `1T` (powers of 1024).
fn parse_bytes(text: &str) -> Result<u64, String> {
    let (digits, shift) = match text.char_indices().last() {
        Some((at, unit)) if unit.is_ascii_alphabetic() => {
            let shift = match unit.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("unknown unit {unit:?} (use K, M, G or T)")),
            };
            (&text[..at], shift)
        }
        _ => (text, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a number of bytes"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is more bytes than fit in 64 bits"))
}

#[derive(Subcommand)]
pub enum Command {
    /// Create a store in DIR (which must be absent or empty).
    Create {
        /// Store directory.
        dir: PathBuf,
        /// Largest Hamming distance queries may ask for.
        #[arg(long, default_value_t = simstore::store::DEFAULT_MAX_DISTANCE as u8)]
        max_distance: u8,
        /// Expected number of fingerprints (chooses the table plan).
        #[arg(long, default_value_t = simstore::store::DEFAULT_EXPECTED_SIZE)]
        expected_size: u64,
        /// Exact number of tables, overriding the planner.
        #[arg(long)]
        tables: Option<u32>,
        /// Keep a similarity sketch per (fingerprint, id) pair, as `dedup
        /// --similarity` needs (68 bytes per pair before compression).
        #[arg(long)]
        sketches: bool,
        /// Block size in bytes (testing only).
        #[arg(long, hide = true)]
        block_size: Option<usize>,
    },
    /// Add fingerprints: reads lines `FP [ID]` from standard input.
    Add {
        /// Store directory.
        dir: PathBuf,
        /// sync: fsync before acknowledging; buffered: survive a killed process only.
        #[arg(long, default_value = "sync")]
        durability: Durability,
        /// Print `acked N` after each durable commit (N = lines committed so far).
        #[arg(long)]
        ack: bool,
        #[command(flatten)]
        open: OpenArgs,
    },
    /// Delete: reads lines `FP [ID]`; without ID the fingerprint goes with all its ids.
    Delete {
        /// Store directory.
        dir: PathBuf,
        /// As for `add`.
        #[arg(long, default_value = "sync")]
        durability: Durability,
        /// Print `acked N` after each durable commit.
        #[arg(long)]
        ack: bool,
        #[command(flatten)]
        open: OpenArgs,
    },
    /// Query: reads lines `FP` (or `FP<TAB>NAME` as `hash` prints them, the name echoed as "name"), prints one JSON object per line, in order.
    Query {
        /// Store directory.
        dir: PathBuf,
        /// Distance to search (default: the store's maximum).
        #[arg(long)]
        max_distance: Option<u32>,
        /// Report at most one match per query, stopping at the first found.
        #[arg(long)]
        first: bool,
        /// Read all input first and answer through the batch path (with
        /// --first: a large batch gives each query's nearest match).
        #[arg(long)]
        batch: bool,
        /// Print at most N ids a match (its smallest), and how many it has
        /// as `id_count`: a fingerprint carrying thousands of documents
        /// (an empty page) otherwise prints them all on every answer.
        #[arg(long, value_name = "N")]
        max_ids: Option<usize>,
        /// Answer from the open on, reading blocks not in memory yet through
        /// RocksDB, instead of first waiting until every block is in memory
        /// (the open reads none; they are read behind it: 0.3 s at 10M, 8 s
        /// at 100M on two cores).
        #[arg(long)]
        lazy: bool,
        /// Probabilistic queries (Sood & Loguinov's PSM): read lines `FP
        /// [VOLATILITY]` (or `FP<TAB>VOLATILITY<TAB>NAME` as `hash
        /// --weights` prints them, the name echoed) and, on a
        /// one-table store (`create --tables 1`), probe the query's header
        /// and the headers of its likeliest bit flips only. Other stores
        /// answer exactly. A line without a volatility takes every bit as
        /// equally volatile.
        #[arg(long, conflicts_with = "batch")]
        probabilistic: bool,
        /// With --probabilistic: the expected recall to reach under the
        /// flip model (0 to 1; default 0.985).
        #[arg(long, requires = "probabilistic", value_parser = parse_recall)]
        recall: Option<f64>,
        /// With --probabilistic: the most headers probed per query and
        /// level (the query's own included).
        #[arg(long, requires = "probabilistic", value_parser = clap::value_parser!(u64).range(1..))]
        max_probes: Option<u64>,
        #[command(flatten)]
        open: OpenArgs,
    },
    /// Merge pending fingerprints into the compressed tables now.
    Compact {
        /// Store directory.
        dir: PathBuf,
        #[command(flatten)]
        open: OpenArgs,
    },
    /// Print counts and sizes as JSON.
    Stats {
        /// Store directory.
        dir: PathBuf,
        #[command(flatten)]
        open: OpenArgs,
    },
    /// Check every block and record; exit 0 only when all is sound.
    Verify {
        /// Store directory.
        dir: PathBuf,
        #[command(flatten)]
        open: OpenArgs,
    },
    /// Print every stored pair as a line `FP ID` (`FP` alone for a
    /// fingerprint stored without ids), in increasing order: the input
    /// `add` rebuilds the store from, into a new store of any plan
    Dump {
        /// Store directory.
        dir: PathBuf,
        #[command(flatten)]
        open: OpenArgs,
    },
    /// Fingerprint documents: prints `FP<TAB>name` per document (per record
    /// with --jsonl). Without FILES, standard input is one document.
    Hash {
        /// Files or directories (walked recursively in sorted order).
        files: Vec<PathBuf>,
        /// Print `FP<TAB>SKETCH<TAB>name` instead: the document's
        /// similarity sketch (128 hex digits) and the fingerprint it gives,
        /// as `dedup --similarity` computes them.
        #[arg(long)]
        sketch: bool,
        /// Print `FP<TAB>VOLATILITY<TAB>name` instead: the probability of
        /// each bit to differ in a near-duplicate (128 hex digits, byte j
        /// for bit j: round(-8 log2 p)), what `query --probabilistic`
        /// reads beside the fingerprint.
        #[arg(long, conflicts_with = "sketch")]
        weights: bool,
        #[command(flatten)]
        doc: DocArgs,
    },
    /// Deduplicate documents: fingerprint each, report it as new (and
    /// insert it) or as a near-duplicate of an earlier document; one JSON
    /// line per document, in input order. Restartable and idempotent.
    Dedup {
        /// Store directory (created when absent or empty, with default
        /// options or the asked --max-distance).
        dir: PathBuf,
        /// Files or directories (walked recursively in sorted order).
        inputs: Vec<PathBuf>,
        /// Distance at which a document is a near-duplicate (default: the
        /// store's maximum; with --similarity, the distance that threshold
        /// needs, at most the store's maximum). Creating the store, also
        /// its maximum distance.
        #[arg(long)]
        max_distance: Option<u32>,
        /// Re-check candidates with similarity sketches: a document is a
        /// near-duplicate of an earlier one only when their estimated
        /// Jaccard similarity of word shingles is at least this (0 to 1;
        /// e.g. 0.8). Fingerprints are then one-bit MinHash values, and
        /// the store is created with sketches and the distance the
        /// threshold needs (8 for 0.8, 6 for 0.9, 3 for 0.95); every
        /// document is stored.
        #[arg(long, value_parser = jaccard)]
        similarity: Option<f64>,
        /// With --similarity: re-check at most this many candidates a
        /// document, the nearest (then earliest) first, so that pages
        /// sharing a template cost the same however many of them are
        /// stored; a near-duplicate farther than that many others is not
        /// read, and the re-check's bar is the one for the candidates read.
        #[arg(long, requires = "similarity", value_name = "N",
              default_value_t = simstore::dedup::MAX_CANDIDATES,
              value_parser = at_least_one)]
        max_candidates: usize,
        /// Creating the store, learn document frequencies from the first N
        /// documents and keep them with it: every fingerprint of the store
        /// then weighs a feature by term frequency times ln((N + 1) / (df +
        /// 1)), so features most documents share (templates) weigh little.
        /// The sample must hold at least 2 readable documents.
        #[arg(long, conflicts_with = "similarity", value_name = "N")]
        idf_sample: Option<usize>,
        /// Find candidates by probabilistic queries (as `query
        /// --probabilistic`, each document's volatility computed from its
        /// weights). Matters on one-table stores (`create --tables 1`),
        /// where a near-duplicate outside the search is missed; other
        /// stores answer exactly.
        #[arg(long, conflicts_with = "similarity")]
        probabilistic: bool,
        /// With --probabilistic: the expected recall to reach under the
        /// flip model (0 to 1; default 0.985).
        #[arg(long, requires = "probabilistic", value_parser = parse_recall)]
        recall: Option<f64>,
        #[command(flatten)]
        doc: DocArgs,
    },
    /// Create a store in a temporary directory, ingest a synthetic
    /// collection with near-duplicates, query it and report.
    Demo {
        /// Number of fingerprints to ingest.
        #[arg(long, default_value_t = 300_000)]
        size: usize,
        /// Number of queries.
        #[arg(long, default_value_t = 30_000)]
        queries: usize,
    },
}

/// How documents are read and fingerprinted.
#[derive(clap::Args)]
pub struct DocArgs {
    /// Inputs are HTML: fingerprint their visible text.
    #[arg(long)]
    html: bool,
    /// Word-shingle width (at least 1).
    #[arg(long, default_value_t = simstore::simhash::DEFAULT_SHINGLE,
          value_parser = at_least_one)]
    shingle: usize,
    /// Use character shingles of this width (at least 1) instead of word
    /// shingles.
    #[arg(long, value_parser = at_least_one)]
    char_shingle: Option<usize>,
    /// Remove English stop words before shingling.
    #[arg(long)]
    stop_words: bool,
    /// Inputs are JSONL: one document per record.
    #[arg(long)]
    jsonl: bool,
    /// The JSONL field holding the text.
    #[arg(long, default_value = "text", requires = "jsonl")]
    text_field: String,
    /// The JSONL field holding the document id.
    #[arg(long, default_value = "id", requires = "jsonl")]
    id_field: String,
}

impl DocArgs {
    pub fn source(&self) -> docs::Source {
        docs::Source {
            html: self.html,
            jsonl: self
                .jsonl
                .then(|| (self.text_field.clone(), self.id_field.clone())),
        }
    }

    pub fn fingerprinter(&self) -> simstore::simhash::Fingerprinter {
        simstore::simhash::Fingerprinter::new()
            .shingle(self.shingle)
            .char_shingle(self.char_shingle)
            .stop_words(self.stop_words)
    }
}

/// A Jaccard similarity: a number from 0 to 1.
fn jaccard(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(j) if (0.0..=1.0).contains(&j) => Ok(j),
        _ => Err(format!("{s:?} is not a similarity from 0 to 1")),
    }
}
