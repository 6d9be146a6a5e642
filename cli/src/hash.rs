//! `simstore hash`: prints `FP<TAB>name` for every document (with
//! `--sketch`, `FP<TAB>SKETCH<TAB>name`; with `--weights`,
//! `FP<TAB>VOLATILITY<TAB>name`).

use std::io::Write;
use std::path::PathBuf;

use simstore::simhash::{Fingerprinter, Volatility};

use super::docs::{files, map_parallel, Document, Source};
use super::stream::Failure;

/// Documents fingerprinted in parallel, then printed in order.
const CHUNK: usize = 256;

/// What `hash` prints between a document's fingerprint and its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    /// Nothing.
    None,
    /// The similarity sketch (`--sketch`).
    Sketch,
    /// The per-bit volatility (`--weights`).
    Volatility,
}

/// Fingerprints every document; documents that cannot be read, have no
/// text or a name with a line break get a warning on stderr. Returns how
/// many were skipped.
pub fn run(
    inputs: &[PathBuf],
    source: &Source,
    fp: &Fingerprinter,
    extra: Extra,
    out: &mut impl Write,
) -> Result<usize, Failure> {
    let mut skipped = 0usize;
    let mut io_error = None;
    let mut chunk: Vec<Document> = Vec::with_capacity(CHUNK);
    let mut emit = |chunk: &mut Vec<Document>, skipped: &mut usize| {
        let results = map_parallel(chunk, |doc| {
            // The line format has no escape: a name with a line break
            // would end the line inside it.
            if doc.name.contains(['\n', '\r']) {
                return Err(format!(
                    "{:?}: a name with a line break cannot be printed as a line",
                    doc.name
                ));
            }
            let line = match extra {
                Extra::Sketch => fp.sketch(&doc.scanned_text()?).map(|s| {
                    let hex: String = s.to_bytes().iter().map(|b| format!("{b:02x}")).collect();
                    format!("{:016x}\t{hex}", s.fingerprint())
                }),
                Extra::Volatility => fp.fingerprint(&doc.text()?).map(|s| {
                    let v = Volatility::from_weights(&s.weights);
                    format!("{:016x}\t{}", s.fingerprint, v.to_hex())
                }),
                Extra::None => fp
                    .fingerprint(&doc.text()?)
                    .map(|s| format!("{:016x}", s.fingerprint)),
            };
            line.ok_or_else(|| format!("{}: empty document (no words)", doc.name))
        });
        for (doc, result) in chunk.drain(..).zip(results) {
            match result {
                Ok(line) => {
                    if let Err(e) = writeln!(out, "{line}\t{}", doc.name) {
                        io_error.get_or_insert(e);
                    }
                }
                Err(e) => {
                    eprintln!("simstore: warning: {e}");
                    *skipped += 1;
                }
            }
        }
    };
    for file in files(inputs) {
        let file = match file {
            Ok(f) => f,
            Err(e) => {
                eprintln!("simstore: warning: {e}");
                skipped += 1;
                continue;
            }
        };
        source.documents(&file, &mut |doc: Document| {
            chunk.push(doc);
            if chunk.len() >= CHUNK {
                emit(&mut chunk, &mut skipped);
            }
        });
    }
    emit(&mut chunk, &mut skipped);
    out.flush()?;
    match io_error {
        Some(e) => Err(Failure::Io(e)),
        None => Ok(skipped),
    }
}
