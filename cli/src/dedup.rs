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
use std::io::{BufRead, BufReader, IsTerminal, Read, Seek, Write};
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

/// The decision log: output lines by sequence number. In memory, only
/// where each line starts and the sequence number of each name; a line
/// is read back from the file when a rerun prints it again or a later
/// document names its document (a log of millions of decisions is read
/// once at open, each line parsed once, and not held).
struct Log {
    file: File,
    /// The same file, read from.
    reader: File,
    /// Where the line of each sequence number starts.
    offsets: Vec<u64>,
    /// Where the next line goes (the log's length).
    end: u64,
    /// The sequence number of each document name logged, by a hash of the
    /// name (a match is confirmed by reading the name back: a lookup of a
    /// new document's name reads nothing).
    seqs: HashMap<u64, u64>,
    /// Names whose hash an earlier name has, with their sequence numbers.
    clashes: HashMap<String, u64>,
    /// The hash of names.
    hash: fn(&str) -> u64,
    /// Names read back, by sequence number (up to [`NAMES_KEPT`]): the
    /// copies of one page name the same earlier document.
    names: HashMap<u64, String>,
    /// How many of the lines found at open decided a document new.
    new_at_open: u64,
}

/// Names read back from the log that [`Log`] keeps at most.
const NAMES_KEPT: usize = 1 << 16;

impl Log {
    /// Opens the log, dropping a torn last line left by a crash.
    fn open(dir: &Path) -> Result<Self, Failure> {
        Self::open_with(dir, name_hash)
    }

    /// [`open`](Self::open) with `hash` as the hash of names.
    fn open_with(dir: &Path, hash: fn(&str) -> u64) -> Result<Self, Failure> {
        let path = dir.join(LOG_NAME);
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)?;
        let mut log = Self {
            reader: File::open(&path)?,
            file,
            offsets: Vec::new(),
            end: 0,
            seqs: HashMap::new(),
            clashes: HashMap::new(),
            hash,
            names: HashMap::new(),
            new_at_open: 0,
        };
        let mut good = 0u64;
        let mut reader = BufReader::with_capacity(1 << 20, File::open(&path)?);
        let mut line = Vec::new();
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            if line.pop() != Some(b'\n') {
                // A torn last line.
                break;
            }
            let seq = log.len();
            // The layout the log is written in, read directly; any other
            // line as JSON.
            let name = match simstore::dedup::log::name_of(&line, seq) {
                Some(name) => name.to_string(),
                None => match log_line(&line) {
                    Some((logged, name, _)) if logged == seq => name,
                    _ => break,
                },
            };
            log.new_at_open += u64::from(simstore::dedup::log::decided_new(&line));
            log.offsets.push(good);
            good += line.len() as u64 + 1;
            log.end = good;
            log.remember(name, seq)?;
        }
        if log.file.metadata()?.len() != good {
            log.file.set_len(good)?;
            log.file.seek(std::io::SeekFrom::End(0))?;
        }
        Ok(log)
    }

    /// Records that `name` was logged as `seq`.
    fn remember(&mut self, name: String, seq: u64) -> Result<(), Failure> {
        let h = (self.hash)(&name);
        match self.seqs.get(&h).copied() {
            Some(other) if self.entry(other)?.0 != name => {
                self.clashes.insert(name, seq);
            }
            _ => {
                self.seqs.insert(h, seq);
            }
        }
        Ok(())
    }

    /// The name of the document logged as `seq` (below [`len`](Self::len)).
    fn name(&mut self, seq: u64) -> Result<String, Failure> {
        if let Some(name) = self.names.get(&seq) {
            return Ok(name.clone());
        }
        let name = self.entry(seq)?.0;
        if self.names.len() >= NAMES_KEPT {
            self.names.clear();
        }
        self.names.insert(seq, name.clone());
        Ok(name)
    }

    /// Decisions logged.
    fn len(&self) -> u64 {
        self.offsets.len() as u64
    }

    /// The sequence number and output line of the document named `name`,
    /// if logged: one read of its line, which also confirms the name.
    fn logged(&mut self, name: &str) -> Result<Option<(u64, String)>, Failure> {
        let seq = match self.clashes.get(name) {
            Some(&seq) => seq,
            None => match self.seqs.get(&(self.hash)(name)) {
                Some(&seq) => seq,
                None => return Ok(None),
            },
        };
        let (logged, out) = self.entry(seq)?;
        Ok((logged == name).then_some((seq, out)))
    }

    /// The document name and output line logged for `seq` (below
    /// [`len`](Self::len)), read back from the file.
    fn entry(&mut self, seq: u64) -> Result<(String, String), Failure> {
        let at = self.offsets[seq as usize];
        let next = self
            .offsets
            .get(seq as usize + 1)
            .copied()
            .unwrap_or(self.end);
        let mut line = vec![0; (next - at).saturating_sub(1) as usize];
        self.reader.seek(std::io::SeekFrom::Start(at))?;
        self.reader.read_exact(&mut line)?;
        let (_, name, out) = log_line(&line).ok_or_else(|| {
            Failure::from(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{LOG_NAME}: the line of document {seq} changed since it was read"),
            ))
        })?;
        Ok((name, out))
    }

    /// Appends the decisions of `entries` (document name, output line),
    /// durably, as the next sequence numbers.
    fn append(&mut self, entries: &[(String, String)]) -> Result<(), Failure> {
        let first = self.len();
        let mut buf = String::new();
        let mut starts = Vec::with_capacity(entries.len());
        for (i, (_, out)) in entries.iter().enumerate() {
            starts.push(self.end + buf.len() as u64);
            buf.push_str(&format!(
                "{{\"seq\":{},\"line\":{}}}\n",
                first + i as u64,
                json::string(out)
            ));
        }
        self.file.write_all(buf.as_bytes())?;
        self.file.sync_data()?;
        self.offsets.extend(starts);
        self.end += buf.len() as u64;
        for (i, (name, _)) in entries.iter().enumerate() {
            self.remember(name.clone(), first + i as u64)?;
        }
        Ok(())
    }
}

/// The hash of a document name in [`Log`] (SipHash with fixed keys).
fn name_hash(name: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    h.finish()
}

/// `(seq, document name, output line)` of one log line,
/// `{"seq":N,"line":"…"}` with the output line (`{"id":NAME,…}`) as a
/// JSON string: read without building JSON values (a log of millions of
/// lines is read at every start), else as [`parse_log_line`] reads it.
fn log_line(line: &[u8]) -> Option<(u64, String, String)> {
    let fast = || {
        let rest = line.strip_prefix(b"{\"seq\":")?;
        let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        let seq = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
        let literal = rest[digits..]
            .strip_prefix(b",\"line\":")?
            .strip_suffix(b"}")?;
        let out: String = serde_json::from_slice(literal).ok()?;
        let name = out.strip_prefix("{\"id\":")?;
        let name: String = serde_json::from_str(&name[..string_end(name.as_bytes())?]).ok()?;
        Some((seq, name, out))
    };
    fast().or_else(|| parse_log_line(line))
}

/// Where the JSON string literal that `text` starts with ends (the byte
/// after its closing quote).
fn string_end(text: &[u8]) -> Option<usize> {
    if text.first() != Some(&b'"') {
        return None;
    }
    let mut i = 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
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
    /// Store directory (created when absent or empty).
    pub dir: &'a Path,
    /// Query distance (default: the store's maximum, or with `similarity`
    /// the distance it needs).
    pub k: Option<u32>,
    /// Re-check candidates with sketches at this Jaccard similarity.
    pub similarity: Option<f64>,
    /// With `similarity`, the candidates re-checked a document at most
    /// ([`Deduper::max_candidates`]).
    pub max_candidates: usize,
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
    /// Documents answered by an earlier decision on their name (logged,
    /// or earlier in this run): neither new nor inserted.
    repeated: u64,
    skipped: usize,
}

impl Dedup<'_> {
    /// Processes every input; returns how many were skipped with warnings.
    pub fn run(&self, inputs: &[PathBuf], out: &mut impl Write) -> Result<usize, Failure> {
        let store = self.open_store(inputs)?;
        let mut dedup =
            Deduper::new(&store, self.k, self.similarity)?.max_candidates(self.max_candidates)?;
        if let Some(budget) = self.probabilistic {
            dedup = dedup.probabilistic(budget);
        }
        let mut log = Log::open(self.dir)?;
        let started = Instant::now();
        let mut counts = Counts {
            documents: 0,
            duplicates: 0,
            repeated: 0,
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
        self.warn_of_other_pairs(&store, &log, &counts);
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "simstore: dedup: {} documents, {} near-duplicates, {} new, {} answered by an earlier decision on their name, {:.0} documents/s",
            counts.documents,
            counts.duplicates,
            counts.documents - counts.duplicates - counts.repeated,
            counts.repeated,
            counts.documents as f64 / secs.max(1e-9)
        );
        Ok(counts.skipped)
    }

    /// Warns when the store holds more pairs than the logged decisions
    /// stored ([`simstore::dedup::log::other_pairs`]), once every chunk is
    /// logged.
    fn warn_of_other_pairs(&self, store: &Store, log: &Log, counts: &Counts) {
        let stats = store.stats();
        let logged_new = log.new_at_open + (counts.documents - counts.duplicates - counts.repeated);
        if let Some(warning) =
            simstore::dedup::log::other_pairs(stats.ids, stats.sketches, log.len(), logged_new)
        {
            eprintln!("simstore: warning: {} {warning}", self.dir.display());
        }
    }

    /// Opens the store, or creates it when `dir` is absent or empty: with
    /// the asked distance when one is; with `similarity`, with sketches
    /// and (unless asked) the distance the threshold needs.
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
            (None, None) => match self.k {
                Some(k) => options.max_distance(k),
                None => options,
            },
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
            if let Some((_, out)) = log.logged(&doc.name)? {
                counts.repeated += 1;
                lines.push(Line::Logged(out));
            } else if let Some(i) = names.iter().position(|n| *n == doc.name) {
                counts.repeated += 1;
                lines.push(Line::Decided(i));
            } else {
                lines.push(Line::Decided(names.len()));
                names.push(doc.name);
                candidates.push(candidate);
            }
        }
        let first_seq = log.len();
        let decided = dedup.decide(first_seq, &candidates)?;
        let mut entries: Vec<(String, String)> = Vec::with_capacity(names.len());
        for ((name, doc), earlier) in names.iter().zip(&candidates).zip(&decided) {
            let duplicate_of = match earlier {
                Some(e) => {
                    let of = if e.seq < first_seq {
                        log.name(e.seq)?
                    } else {
                        names
                            .get((e.seq - first_seq) as usize)
                            .cloned()
                            .unwrap_or_else(|| e.seq.to_string())
                    };
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
            entries.push((name.clone(), line));
        }
        log.append(&entries)?;
        counts.duplicates += decided.iter().filter(|d| d.is_some()).count() as u64;
        for line in lines {
            let line = match &line {
                Line::Logged(l) => l,
                Line::Decided(i) => &entries[*i].1,
            };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_are_read_as_json_reads_them() {
        let names = [
            "0",
            "a/b c.txt",
            "quote \" and backslash \\ and \\\"",
            "tab\tnew\nline\u{1}",
            "ünïcødé ✓ 𝄞",
            "",
            "{\"id\":\"not me\"}",
        ];
        for (seq, name) in names.iter().enumerate() {
            let out = format!(
                "{{\"id\":{},\"fingerprint\":\"00000000000000ff\",\"duplicate_of\":{{\"id\":{},\"distance\":1}}}}",
                json::string(name),
                json::string("earlier \" one")
            );
            let line = format!("{{\"seq\":{seq},\"line\":{}}}", json::string(&out));
            let want = (seq as u64, name.to_string(), out.clone());
            assert_eq!(
                parse_log_line(line.as_bytes()),
                Some(want.clone()),
                "{name:?}"
            );
            assert_eq!(log_line(line.as_bytes()), Some(want.clone()), "{name:?}");
            // Laid out otherwise (as another writer might): the slow way.
            let spaced = format!("{{ \"seq\": {seq}, \"line\": {} }}", json::string(&out));
            assert_eq!(log_line(spaced.as_bytes()), Some(want), "{name:?}");
            // Torn anywhere: not a line.
            for cut in 0..line.len() {
                assert_eq!(
                    log_line(&line.as_bytes()[..cut]),
                    None,
                    "{name:?} cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn names_are_found_whatever_their_hashes() {
        // Every name with one hash (each lookup then reads names back), and
        // with the real one; across reopening; names absent from the log.
        let out = |name: &str| format!("{{\"id\":{},\"duplicate_of\":null}}", json::string(name));
        let names = ["a", "b", "a b", "\"quoted\"", ""];
        for hash in [(|_: &str| 7) as fn(&str) -> u64, name_hash] {
            let dir = tempfile::tempdir().unwrap();
            let mut log = Log::open_with(dir.path(), hash).ok().unwrap();
            let entries: Vec<(String, String)> =
                names.iter().map(|n| (n.to_string(), out(n))).collect();
            log.append(&entries[..2]).ok().unwrap();
            log.append(&entries[2..]).ok().unwrap();
            for _ in 0..2 {
                for (seq, name) in names.iter().enumerate() {
                    assert_eq!(
                        log.logged(name).ok().unwrap(),
                        Some((seq as u64, out(name))),
                        "{name:?}"
                    );
                    assert_eq!(
                        log.entry(seq as u64).ok().unwrap(),
                        (name.to_string(), out(name))
                    );
                    assert_eq!(log.name(seq as u64).ok().unwrap(), *name);
                }
                for absent in ["c", "a ", "\"quoted"] {
                    assert_eq!(log.logged(absent).ok().unwrap(), None, "{absent:?}");
                }
                drop(log);
                log = Log::open_with(dir.path(), hash).ok().unwrap();
                assert_eq!(log.len(), names.len() as u64);
            }
        }
    }

    #[test]
    fn json_string_literals_end_where_json_says() {
        assert_eq!(string_end(b"\"a\\\"b\" rest"), Some(6));
        assert_eq!(string_end(b"\"unterminated\\\""), None);
        assert_eq!(string_end(b"no quote"), None);
    }
}
