//! The `simstore` command: create, fill, query and check simhash
//! fingerprint stores from the shell. The commands, their flags, input
//! lines, JSON output and exit codes are a stable contract: they change
//! only by adding.
//!
//! The binary is [`run`]; the modules made public here serve the
//! benchmark tools of this repository and are not a stable API.

mod dedup;
mod demo;
#[doc(hidden)]
pub mod docs;
mod exit;
mod hash;
mod input;
mod json;
#[doc(hidden)]
pub mod rng;
mod stream;

use std::io::{self, Write};
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use simstore::{Durability, Error, Op, Options, Store};

use stream::Batcher;
#[doc(hidden)]
pub use stream::Failure;

#[derive(Parser)]
#[command(name = "simstore", version, about = "A persistent store for 64-bit simhash fingerprints", after_help = exit::HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// How a command opens an existing store.
#[derive(clap::Args)]
struct OpenArgs {
    /// Most bytes of compressed tables to hold in memory (a number, with
    /// K, M, G or T for powers of 1024); a store whose tables take more is
    /// served from disk through RocksDB. Default: half of physical memory
    /// for commands that answer queries; 0 for add, delete and compact,
    /// which write and exit (their merges then hold no second copy).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    memory_budget: Option<u64>,
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
enum Command {
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
    /// Query: reads lines `FP`, prints one JSON object per line, in order.
    Query {
        /// Store directory.
        dir: PathBuf,
        /// Distance to search (default: the store's maximum).
        #[arg(long)]
        max_distance: Option<u32>,
        /// Report at most one match per query, stopping at the first found.
        #[arg(long)]
        first: bool,
        /// Read all input first and answer through the batch path.
        #[arg(long, conflicts_with = "first")]
        batch: bool,
        /// Answer from the open on, reading blocks not in memory yet through
        /// RocksDB, instead of first waiting until every block is in memory
        /// (the open reads none; they are read behind it: 0.3 s at 10M, 8 s
        /// at 100M on two cores).
        #[arg(long)]
        lazy: bool,
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
    /// Fingerprint documents: prints `FP<TAB>name` per document (per record
    /// with --jsonl). Without FILES, standard input is one document.
    Hash {
        /// Files or directories (walked recursively in sorted order).
        files: Vec<PathBuf>,
        #[command(flatten)]
        doc: DocArgs,
    },
    /// Deduplicate documents: fingerprint each, report it as new (and
    /// insert it) or as a near-duplicate of an earlier document; one JSON
    /// line per document, in input order. Restartable and idempotent.
    Dedup {
        /// Store directory (created with default options when absent or empty).
        dir: PathBuf,
        /// Files or directories (walked recursively in sorted order).
        inputs: Vec<PathBuf>,
        /// Distance at which a document is a near-duplicate (default: the store's maximum).
        #[arg(long)]
        max_distance: Option<u32>,
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
struct DocArgs {
    /// Inputs are HTML: fingerprint their visible text.
    #[arg(long)]
    html: bool,
    /// Word-shingle width.
    #[arg(long, default_value_t = simstore::simhash::DEFAULT_SHINGLE)]
    shingle: usize,
    /// Use character shingles of this width instead of word shingles.
    #[arg(long)]
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
    fn source(&self) -> docs::Source {
        docs::Source {
            html: self.html,
            jsonl: self
                .jsonl
                .then(|| (self.text_field.clone(), self.id_field.clone())),
        }
    }

    fn fingerprinter(&self) -> simstore::simhash::Fingerprinter {
        simstore::simhash::Fingerprinter::new()
            .shingle(self.shingle)
            .char_shingle(self.char_shingle)
            .stop_words(self.stop_words)
    }
}

/// Runs the CLI; returns the process exit code.
pub fn run() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
        }
    };
    match dispatch(cli.command) {
        Ok(()) => exit::OK,
        Err(failure) => report(failure),
    }
}

/// Says on stderr why a command failed (nothing for a broken pipe, which
/// ends output a reader no longer wants) and returns its exit code.
#[doc(hidden)]
pub fn report(failure: Failure) -> i32 {
    match failure {
        Failure::Store(e) => {
            eprintln!("simstore: {e}");
            exit::for_error(&e)
        }
        Failure::Input { line, message } => {
            eprintln!("simstore: line {line}: {message}");
            exit::INPUT
        }
        Failure::Io(e) => {
            if e.kind() == io::ErrorKind::BrokenPipe {
                return exit::OK;
            }
            eprintln!("simstore: {e}");
            exit::FAILURE
        }
        Failure::Verify => exit::CORRUPT,
        Failure::Skipped(n) => {
            eprintln!("simstore: {n} input(s) skipped");
            exit::INPUT
        }
    }
}

/// Opens a store for a command. Commands that only read, and `compact`,
/// leave merging to themselves (no background compactor): a query never
/// starts a merge it would then have to wait for at exit.
///
/// Commands that write and exit (`add`, `delete`, `compact`: `queries`
/// false) answer no query, so unless `--memory-budget` says otherwise
/// they keep the tables on disk: nothing is read into memory behind the
/// open, and a merge writes its new blocks without also holding them.
/// Building a 100M store with `add` peaked at 13.7 GB this way, against
/// 22.2 GB with the tables held.
fn open(
    dir: &PathBuf,
    durability: Durability,
    writes: bool,
    queries: bool,
    args: &OpenArgs,
) -> Result<Store, Failure> {
    let mut options = Options::new()
        .trim_allocator(true)
        .durability(durability)
        .manual_compaction(!writes);
    match args.memory_budget {
        Some(bytes) => options = options.memory_budget(bytes),
        None if !queries => options = options.memory_budget(0),
        None => {}
    }
    Ok(Store::open(dir, &options)?)
}

fn dispatch(command: Command) -> Result<(), Failure> {
    let stdout = io::stdout();
    match command {
        Command::Create {
            dir,
            max_distance,
            expected_size,
            tables,
            block_size,
        } => {
            let mut o = Options::new()
                .max_distance(u32::from(max_distance))
                .expected_size(expected_size);
            if let Some(t) = tables {
                o = o.tables(t);
            }
            if let Some(b) = block_size {
                o = o.block_size(b);
            }
            let store = Store::create(&dir, &o)?;
            writeln!(stdout.lock(), "{}", json::stats(&store.stats()))?;
        }
        Command::Add {
            dir,
            durability,
            ack,
            open: args,
        } => {
            let store = open(&dir, durability, true, false, &args)?;
            let mut out = stdout.lock();
            Batcher::new(&store, ack).run(io::stdin(), &mut out, |fp, id| {
                Ok(Op::Insert {
                    fingerprint: fp,
                    id,
                })
            })?;
        }
        Command::Delete {
            dir,
            durability,
            ack,
            open: args,
        } => {
            let store = open(&dir, durability, true, false, &args)?;
            let before = store.stats();
            let mut out = stdout.lock();
            let mut batcher = Batcher::new(&store, ack);
            let result = batcher.run(io::stdin(), &mut out, |fp, id| {
                Ok(match id {
                    Some(id) => Op::Delete {
                        fingerprint: fp,
                        id,
                    },
                    None => Op::DeleteFingerprint { fingerprint: fp },
                })
            });
            // What was removed, also when a malformed line ended the run
            // (the lines before it were applied).
            let after = store.stats();
            eprintln!(
                "simstore: delete: removed {} pair(s) and {} fingerprint(s); \
                 {} line(s) named nothing stored",
                before.ids.saturating_sub(after.ids),
                before.fingerprints.saturating_sub(after.fingerprints),
                batcher.unchanged()
            );
            result?;
        }
        Command::Query {
            dir,
            max_distance,
            first,
            batch,
            lazy,
            open: args,
        } => {
            let store = open(&dir, Durability::Buffered, false, true, &args)?;
            if !lazy {
                store.wait_warm();
            }
            let k = max_distance.unwrap_or(store.max_distance());
            if k > store.max_distance() {
                return Err(Error::DistanceTooLarge {
                    asked: k,
                    supported: store.max_distance(),
                }
                .into());
            }
            // Buffered: one write per run of answers, flushed whenever the
            // next input line is not already there.
            let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
            stream::query(&store, io::stdin(), &mut out, k, first, batch)?;
        }
        Command::Compact { dir, open: args } => {
            let store = open(&dir, Durability::Sync, false, false, &args)?;
            let r = store.compact()?;
            store.reclaim_space()?;
            writeln!(
                stdout.lock(),
                "{{\"merged\":{},\"removed\":{},\"blocks_replaced\":{},\"blocks_written\":{}}}",
                r.merged,
                r.removed,
                r.blocks_replaced,
                r.blocks_written
            )?;
        }
        Command::Stats { dir, open: args } => {
            let store = open(&dir, Durability::Sync, false, true, &args)?;
            writeln!(stdout.lock(), "{}", json::stats(&store.stats()))?;
        }
        Command::Verify { dir, open: args } => {
            let store = match open(&dir, Durability::Sync, false, true, &args) {
                Ok(s) => s,
                Err(Failure::Store(e)) if e.is_corruption() => {
                    let mut report = simstore::VerifyReport::default();
                    report.problems.push(e.to_string());
                    writeln!(stdout.lock(), "{}", json::verify(&report))?;
                    return Err(Failure::Verify);
                }
                Err(e) => return Err(e),
            };
            let report = store.verify()?;
            writeln!(stdout.lock(), "{}", json::verify(&report))?;
            if !report.ok() {
                for p in &report.problems {
                    eprintln!("simstore: verify: {p}");
                }
                return Err(Failure::Verify);
            }
        }
        Command::Demo { size, queries } => demo::run(size, queries, &mut stdout.lock())?,
        Command::Hash { files, doc } => {
            let skipped = hash::run(
                &files,
                &doc.source(),
                &doc.fingerprinter(),
                &mut stdout.lock(),
            )?;
            if skipped > 0 {
                return Err(Failure::Skipped(skipped));
            }
        }
        Command::Dedup {
            dir,
            inputs,
            max_distance,
            doc,
        } => {
            let (source, fingerprinter) = (doc.source(), doc.fingerprinter());
            let run = dedup::Dedup {
                dir: &dir,
                k: max_distance,
                source: &source,
                fingerprinter: &fingerprinter,
            };
            let skipped = run.run(&inputs, &mut stdout.lock())?;
            if skipped > 0 {
                return Err(Failure::Skipped(skipped));
            }
        }
    }
    Ok(())
}
