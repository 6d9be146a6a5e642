//! The `simstore` command: create, fill, query and check simhash
//! fingerprint stores from the shell. The commands, their flags, input
//! lines, JSON output and exit codes are a stable contract: they change
//! only by adding.
//!
//! The binary is [`run`]; the modules made public here serve the
//! benchmark tools of this repository and are not a stable API.

mod args;
mod commands;
mod dedup;
mod demo;
#[doc(hidden)]
pub mod docs;
mod exit;
mod hash;
mod input;
mod json;
mod lines;
#[doc(hidden)]
pub mod rng;
mod stream;

use std::io;

use clap::Parser;
use simstore::Options;

use args::{Cli, Command};
#[doc(hidden)]
pub use stream::Failure;

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

fn dispatch(command: Command) -> Result<(), Failure> {
    match command {
        Command::Create {
            dir,
            max_distance,
            expected_size,
            tables,
            sketches,
            block_size,
        } => {
            let mut options = Options::new()
                .max_distance(u32::from(max_distance))
                .expected_size(expected_size);
            if sketches {
                options = options.sketches(true);
            }
            if let Some(t) = tables {
                options = options.tables(t);
            }
            if let Some(b) = block_size {
                options = options.block_size(b);
            }
            commands::create(&dir, &options)
        }
        Command::Add {
            dir,
            durability,
            ack,
            open,
        } => commands::add(&dir, durability, ack, &open),
        Command::Delete {
            dir,
            durability,
            ack,
            open,
        } => commands::delete(&dir, durability, ack, &open),
        Command::Query {
            dir,
            max_distance,
            first,
            batch,
            max_ids,
            lazy,
            probabilistic,
            recall,
            max_probes,
            open,
        } => {
            let mode = commands::QueryMode {
                max_distance,
                first,
                batch,
                max_ids,
                lazy,
                probabilistic: probabilistic.then(|| simstore::Budget {
                    recall: recall.unwrap_or(simstore::plan::vosh::DEFAULT_RECALL),
                    max_probes: max_probes.map_or(usize::MAX, |n| n as usize),
                }),
            };
            commands::query(&dir, &mode, &open)
        }
        Command::Compact { dir, open } => commands::compact(&dir, &open),
        Command::Stats { dir, open } => commands::stats(&dir, &open),
        Command::Verify { dir, open } => commands::verify(&dir, &open),
        Command::Dump { dir, open } => commands::dump(&dir, &open),
        Command::Demo { size, queries } => demo::run(size, queries, &mut io::stdout().lock()),
        Command::Hash {
            files,
            sketch,
            weights,
            doc,
        } => {
            let skipped = hash::run(
                &files,
                &doc.source(),
                &doc.fingerprinter(),
                match (sketch, weights) {
                    (true, _) => hash::Extra::Sketch,
                    (_, true) => hash::Extra::Volatility,
                    _ => hash::Extra::None,
                },
                &mut io::stdout().lock(),
            )?;
            match skipped {
                0 => Ok(()),
                n => Err(Failure::Skipped(n)),
            }
        }
        Command::Dedup {
            dir,
            inputs,
            max_distance,
            similarity,
            max_candidates,
            idf_sample,
            probabilistic,
            recall,
            doc,
        } => {
            let (source, fingerprinter) = (doc.source(), doc.fingerprinter());
            let run = dedup::Dedup {
                dir: &dir,
                k: max_distance,
                similarity,
                max_candidates,
                idf_sample,
                source: &source,
                fingerprinter: &fingerprinter,
                probabilistic: probabilistic.then(|| {
                    simstore::Budget::recall(recall.unwrap_or(simstore::plan::vosh::DEFAULT_RECALL))
                }),
            };
            match run.run(&inputs, &mut io::stdout().lock())? {
                0 => Ok(()),
                n => Err(Failure::Skipped(n)),
            }
        }
    }
}
