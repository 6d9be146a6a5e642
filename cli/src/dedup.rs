//! `simstore dedup`: documents in, "new" or "near-duplicate of X" out, with
//! the store as durable state.
//!
//! Every document read gets the next sequence number; a new document is
//! inserted with its sequence number as id. Decisions are logged, one
//! output line each with its sequence number, in `DIR/dedup.log`, which maps
//! sequence numbers back to names and makes a rerun over the same inputs
//! print, for every document already decided, the line it printed before.
//! A crash between inserting a chunk and logging it is harmless: on rerun
//! the same documents get the same sequence numbers, and matches with ids
//! at or past a document's own number (itself, later documents) are
//! ignored, so the decisions come out the same.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, IsTerminal, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use simstore::dedup::{Candidate, Deduper};
use simstore::simhash::{Fingerprinter, Idf, Sketch, Volatility};
use simstore::{Options, Store};

use super::docs::{files, map_parallel, Document, Source};
use super::json;
use super::stream::Failure;

/// Documents fingerprinted in parallel and committed together.
const CHUNK: usize = 256;
/// The largest distance a store supports, the most `--similarity` asks for.
const MAX_DISTANCE: u32 = 8;
/// Name of the decision log inside the store directory.
pub const LOG_NAME: &str = "dedup.log";

/// The decision log: output lines by sequence number.
struct Log {
    file: File,
    names: Vec<String>,
    lines: HashMap<String, String>,
}

impl Log {
    /// Opens the log, dropping a torn last line left by a crash.
    fn open(dir: &Path) -> Result<Self, Failure> {
        let path = dir.join(LOG_NAME);
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)?;
        let mut names = Vec::new();
        let mut lines = HashMap::new();
        let mut good = 0u64;
        for line in BufReader::new(&file).split(b'\n') {
            let line = line?;
            let Some((seq, name, out)) = parse_log_line(&line) else {
                break;
            };
            if seq != names.len() as u64 {
                break;
            }
            good += line.len() as u64 + 1;
            names.push(name.clone());
            lines.insert(name, out);
        }
        if file.metadata()?.len() != good {
            file.set_len(good)?;
            file.seek(std::io::SeekFrom::End(0))?;
        }
        Ok(Self { file, names, lines })
    }

    fn append(&mut self, entries: &[(String, String)]) -> Result<(), Failure> {
        let mut buf = String::new();
        for (name, out) in entries {
            buf.push_str(&format!(
                "{{\"seq\":{},\"line\":{}}}\n",
                self.names.len(),
                json::string(out)
            ));
            self.names.push(name.clone());
            self.lines.insert(name.clone(), out.clone());
        }
        self.file.write_all(buf.as_bytes())?;
        self.file.sync_data()?;
        Ok(())
    }
}

/// `(seq, document name, output line)` of one log line.
fn parse_log_line(line: &[u8]) -> Option<(u64, String, String)> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    let seq = v.get("seq")?.as_u64()?;
    let out = v.get("line")?.as_str()?.to_string();
    let decoded: serde_json::Value = serde_json::from_str(&out).ok()?;
    let name = decoded.get("id")?.as_str()?.to_string();
    Some((seq, name, out))
}

/// Options of one run.
pub struct Dedup<'a> {
    /// Store directory (created with default options when absent or empty).
    pub dir: &'a Path,
    /// Query distance (default: the store's maximum, or with `similarity`
    /// the distance it needs).
    pub k: Option<u32>,
    /// Re-check candidates with sketches at this Jaccard similarity.
    pub similarity: Option<f64>,
    /// Creating the store, learn document frequencies from this many
    /// first documents.
    pub idf_sample: Option<usize>,
    /// How to read documents.
    pub source: &'a Source,
    /// How to fingerprint them.
    pub fingerprinter: &'a Fingerprinter,
    /// Find candidates by probabilistic queries within this budget.
    pub probabilistic: Option<simstore::Budget>,
}

struct Counts {
    documents: u64,
    duplicates: u64,
    skipped: usize,
}

impl Dedup<'_> {
    /// Processes every input; returns how many were skipped with warnings.
    pub fn run(&self, inputs: &[PathBuf], out: &mut impl Write) -> Result<usize, Failure> {
        let store = self.open_store(inputs)?;
        let mut dedup = Deduper::new(&store, self.k, self.similarity)?;
        if let Some(budget) = self.probabilistic {
            dedup = dedup.probabilistic(budget);
        }
        let mut log = Log::open(self.dir)?;
        let started = Instant::now();
        let mut counts = Counts {
            documents: 0,
            duplicates: 0,
            skipped: 0,
        };
        let mut chunk: Vec<Document> = Vec::with_capacity(CHUNK);
        let file_list = files(inputs);
        let total_files = file_list.len();
        let progress = std::io::stderr().is_terminal();
        let mut read = 0u64;
        for (n, file) in file_list.into_iter().enumerate() {
            match file {
                Ok(f) => {
                    let mut failed = None;
                    self.source.documents(&f, &mut |doc| {
                        read += 1;
                        chunk.push(doc);
                        if chunk.len() >= CHUNK && failed.is_none() {
                            if let Err(e) =
                                self.process(&dedup, &mut log, &mut chunk, &mut counts, out)
                            {
                                failed = Some(e);
                            }
                        }
                    });
                    if let Some(e) = failed {
                        return Err(e);
                    }
                }
                Err(e) => {
                    eprintln!("simstore: warning: {e}");
                    counts.skipped += 1;
                }
            }
            if progress {
                let rate = read as f64 / started.elapsed().as_secs_f64().max(1e-9);
                let left = (total_files - n - 1) as f64
                    / ((n + 1) as f64 / started.elapsed().as_secs_f64().max(1e-9));
                eprint!(
                    "\r{}/{} files, {} documents, {rate:.0}/s, ETA {left:.0}s   ",
                    n + 1,
                    total_files,
                    read
                );
            }
        }
        self.process(&dedup, &mut log, &mut chunk, &mut counts, out)?;
        out.flush()?;
        if progress {
            eprintln!();
        }
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "simstore: dedup: {} documents, {} near-duplicates, {} new, {:.0} documents/s",
            counts.documents,
            counts.duplicates,
            counts.documents - counts.duplicates,
            counts.documents as f64 / secs.max(1e-9)
        );
        Ok(counts.skipped)
    }

    /// Opens the store, or creates it when `dir` is absent or empty: with
    /// `similarity`, with sketches and the distance the threshold needs.
    /// A store with sketches is for `--similarity` only, and the other way
    /// round (its fingerprints are of another kind).
    fn open_store(&self, inputs: &[PathBuf]) -> Result<Store, Failure> {
        if let Some(j) = self.similarity.filter(|j| !(0.0..=1.0).contains(j)) {
            return Err(simstore::Error::InvalidArgument(format!(
                "similarity {j} is not between 0 and 1"
            ))
            .into());
        }
        let options = Options::new()
            .trim_allocator(true)
            .sketches(self.similarity.is_some());
        let empty = std::fs::read_dir(self.dir).map_or(true, |mut e| e.next().is_none());
        if !empty {
            let store = Store::open(self.dir, &options)?;
            if let (Some(n), None) = (self.idf_sample, store.idf()) {
                return Err(simstore::Error::IncompatibleOptions {
                    option: "idf",
                    stored: "none".into(),
                    requested: format!("a sample of {n} documents"),
                }
                .into());
            }
            return Ok(store);
        }
        let options = match (self.similarity, self.idf_sample) {
            (Some(j), _) => options.max_distance(
                self.k
                    .unwrap_or_else(|| Sketch::distance_for(j, MAX_DISTANCE)),
            ),
            (None, Some(n)) => {
                let options = options.idf(self.learn(inputs, n));
                match self.k {
                    Some(k) => options.max_distance(k),
                    None => options,
                }
            }
            (None, None) => options,
        };
        Ok(Store::create(self.dir, &options)?)
    }

    /// Document frequencies of the first `n` readable documents of the
    /// inputs.
    fn learn(&self, inputs: &[PathBuf], n: usize) -> Idf {
        let mut sample: Vec<Document> = Vec::new();
        for file in files(inputs).into_iter().flatten() {
            if sample.len() >= n {
                break;
            }
            self.source.documents(&file, &mut |doc| {
                if sample.len() < n {
                    sample.push(doc);
                }
            });
        }
        let hashes = map_parallel(&sample, |d| {
            d.text()
                .map(|t| self.fingerprinter.feature_hashes(&t))
                .unwrap_or_default()
        });
        Idf::learn(hashes.iter().filter(|h| !h.is_empty()))
    }

    /// Decides a chunk in order: fingerprints in parallel, then the
    /// documents not yet in the log decided and the new ones committed
    /// together ([`Deduper::decide`]), one log append, then output.
    fn process(
        &self,
        dedup: &Deduper<'_>,
        log: &mut Log,
        chunk: &mut Vec<Document>,
        counts: &mut Counts,
        out: &mut impl Write,
    ) -> Result<(), Failure> {
        let docs = std::mem::take(chunk);
        let fps = self.fingerprint_all(&docs, dedup.store().idf());
        // Per document read: its logged line, or its place among the
        // documents decided now.
        enum Line {
            Logged(String),
            Decided(usize),
        }
        let mut lines: Vec<Line> = Vec::new();
        let mut names: Vec<String> = Vec::new();
        let mut candidates: Vec<Candidate> = Vec::new();
        for (doc, fp) in docs.into_iter().zip(fps) {
            let candidate = match fp {
                Ok(fp) => fp,
                Err(e) => {
                    eprintln!("simstore: warning: {e}");
                    counts.skipped += 1;
                    continue;
                }
            };
            counts.documents += 1;
            if let Some(line) = log.lines.get(&doc.name) {
                lines.push(Line::Logged(line.clone()));
            } else if let Some(i) = names.iter().position(|n| *n == doc.name) {
                lines.push(Line::Decided(i));
            } else {
                lines.push(Line::Decided(names.len()));
                names.push(doc.name);
                candidates.push(candidate);
            }
        }
        let first_seq = log.names.len() as u64;
        let decided = dedup.decide(first_seq, &candidates)?;
        let entries: Vec<(String, String)> = names
            .iter()
            .zip(&candidates)
            .zip(&decided)
            .map(|((name, doc), earlier)| {
                let duplicate_of = match earlier {
                    Some(e) => {
                        let of = log
                            .names
                            .get(e.seq as usize)
                            .or_else(|| names.get((e.seq - first_seq) as usize))
                            .cloned()
                            .unwrap_or_else(|| e.seq.to_string());
                        let similarity = e
                            .similarity
                            .map_or(String::new(), |s| format!(",\"similarity\":{s:.3}"));
                        format!(
                            "{{\"id\":{},\"fingerprint\":\"{:016x}\",\"distance\":{}{similarity}}}",
                            json::string(&of),
                            e.fingerprint,
                            e.distance
                        )
                    }
                    None => "null".to_string(),
                };
                let line = format!(
                    "{{\"id\":{},\"fingerprint\":\"{:016x}\",\"duplicate_of\":{duplicate_of}}}",
                    json::string(name),
                    doc.fingerprint
                );
                (name.clone(), line)
            })
            .collect();
        log.append(&entries)?;
        for line in lines {
            let line = match &line {
                Line::Logged(l) => l,
                Line::Decided(i) => &entries[*i].1,
            };
            counts.duplicates += u64::from(!line.ends_with("\"duplicate_of\":null}"));
            writeln!(out, "{line}")?;
        }
        Ok(())
    }

    /// Fingerprints documents on all cores, results in input order: with
    /// `similarity`, each document's sketch and the fingerprint it gives
    /// ([`Sketch::fingerprint`]); else its simhash.
    fn fingerprint_all(
        &self,
        docs: &[Document],
        idf: Option<&Idf>,
    ) -> Vec<Result<Candidate, String>> {
        map_parallel(docs, |d| {
            let empty = || format!("{}: empty document (no words)", d.name);
            if self.similarity.is_some() {
                let text = d.scanned_text()?;
                let sketch = self.fingerprinter.sketch(&text).ok_or_else(empty)?;
                Ok(Candidate {
                    fingerprint: sketch.fingerprint(),
                    sketch: Some(sketch),
                    volatility: None,
                })
            } else {
                let text = d.text()?;
                let s = match idf {
                    Some(idf) => self.fingerprinter.fingerprint_idf(&text, idf),
                    None => self.fingerprinter.fingerprint(&text),
                }
                .ok_or_else(empty)?;
                let volatility = self
                    .probabilistic
                    .map(|_| Volatility::from_weights(&s.weights));
                Ok(Candidate {
                    fingerprint: s.fingerprint,
                    sketch: None,
                    volatility,
                })
            }
        })
    }
}
