//! Line-at-a-time processing of standard input for `add`, `delete` and
//! `query`, committing and flushing whenever no more input is waiting so
//! that interactive drivers see acknowledgements and answers promptly.

use std::io::{self, Read, Write};

use simstore::{Error, Op, Store};

use super::input::{parse_query, parse_record};
use super::json;
use super::lines::for_each_line;

/// Most lines committed in one batch, unless the batch grows (see
/// [`Batcher`]).
const MAX_BATCH: usize = 1 << 20;
/// Fewest lines an insert-only batch may hold before it is committed
/// (when more input is waiting). Such a batch is merged straight into the
/// tables in one pass over them (the bulk path), so it may be as large
/// as the store: a load of N lines then rewrites the tables about
/// log2(N / MIN_GROWN_BATCH) times instead of N / MAX_BATCH times.
const MIN_GROWN_BATCH: usize = 1 << 24;
/// Most lines of an insert-only batch (bounds the memory it holds:
/// about 40 bytes a line, 5 GB at this bound).
const MAX_GROWN_BATCH: usize = 1 << 27;
/// Most queries already read that are answered together, in one
/// `query_many_into` call (which interleaves the probes of 4 queries at a
/// time, 16 with `--first`).
const ANSWER_GROUP: usize = 16;
/// Queries answered per batch call with `--batch`.
const QUERY_BATCH: usize = 1 << 20;

/// Why a command failed.
pub enum Failure {
    /// A library error.
    Store(Error),
    /// A malformed input line.
    Input {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// Reading input or writing output failed.
    Io(io::Error),
    /// `verify` found problems (already reported).
    Verify,
    /// Some inputs were skipped with warnings (already reported); the rest
    /// was processed.
    Skipped(usize),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Self::Store(e)
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// How long `add` and `delete` without `--ack` wait for more input before
/// committing what they have read.
const UNACKED_PATIENCE: std::time::Duration = std::time::Duration::from_millis(100);

/// How long a write refused because background work failed waits for
/// the failure's cause (see [`Batcher::run`]).
const CAUSE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Commits input lines as store operations in batches.
pub struct Batcher<'a> {
    store: &'a Store,
    ack: bool,
    /// The batch while it holds only inserts (as the bulk path takes
    /// them).
    inserts: Vec<(u64, Option<u64>)>,
    /// The batch once it holds anything but inserts.
    ops: Vec<Op>,
    last_line: usize,
    /// Whether a batch took the bulk path.
    bulk: bool,
    /// Operations of mixed batches that changed nothing (a delete naming
    /// nothing stored).
    unchanged: u64,
    /// Whether the batch being collected holds anything but inserts.
    mixed: bool,
    /// Lines an insert-only batch may hold: [`MAX_GROWN_BATCH`] for the
    /// first (the input is as likely to be large as the store: a 100M-line
    /// load into an empty store then takes one pass over the tables, not
    /// four), then as many as the store held after the last bulk commit,
    /// within [`MIN_GROWN_BATCH`] and [`MAX_GROWN_BATCH`].
    grown: usize,
}

impl<'a> Batcher<'a> {
    /// A batcher printing `acked N` after each commit when `ack` is set.
    pub fn new(store: &'a Store, ack: bool) -> Self {
        Self {
            store,
            ack,
            inserts: Vec::new(),
            ops: Vec::new(),
            last_line: 0,
            bulk: false,
            unchanged: 0,
            mixed: false,
            grown: MAX_GROWN_BATCH,
        }
    }

    /// Processes every line; on a malformed line, commits the lines before
    /// it and fails naming it.
    pub fn run(
        &mut self,
        input: impl Read + Send + 'static,
        out: &mut impl Write,
        make: impl Fn(u64, Option<u64>) -> Result<Op, String>,
    ) -> Result<(), Failure> {
        // Without acknowledgements nobody waits for a commit, so a pause in
        // the input shorter than this does not end a batch: a writer that
        // cannot keep up with the parser would otherwise cut a bulk load
        // into several merges.
        let patience = if self.ack {
            std::time::Duration::ZERO
        } else {
            UNACKED_PATIENCE
        };
        let result = for_each_line(
            input,
            patience,
            |s| parse_record(s, true),
            |line, record, more| {
                if let Some((fp, id)) = record {
                    let op = make(fp, id).map_err(|message| Failure::Input { line, message })?;
                    match op {
                        Op::Insert { fingerprint, id } if !self.mixed => {
                            self.inserts.push((fingerprint, id));
                        }
                        op => {
                            if !self.mixed {
                                self.mixed = true;
                                self.ops = std::mem::take(&mut self.inserts)
                                    .into_iter()
                                    .map(|(fingerprint, id)| Op::Insert { fingerprint, id })
                                    .collect();
                            }
                            self.ops.push(op);
                        }
                    }
                }
                self.last_line = line;
                let (held, limit) = if self.mixed {
                    (self.ops.len(), MAX_BATCH)
                } else {
                    (self.inserts.len(), self.grown)
                };
                if held >= limit || (!more && held > 0) {
                    self.commit(out)?;
                }
                Ok(())
            },
        );
        let committed = self.commit(out);
        // A bulk load rewrote blocks (and filled the WAL): give the space
        // back and leave nothing to replay at the next open.
        let reclaimed = if self.bulk {
            self.store.reclaim_space().map_err(Failure::from)
        } else {
            Ok(())
        };
        let outcome = match result {
            Err(e) => Err(e),
            Ok(()) => committed.and(reclaimed),
        };
        self.with_cause(outcome)
    }

    /// A write refused because background work of the handle failed: a
    /// write racing that failure is refused as `Poisoned` while the merge
    /// that failed is still returning, and its cause is kept for the next
    /// call. The failure is reported with its cause, waited for up to
    /// [`CAUSE_PATIENCE`].
    fn with_cause(&self, outcome: Result<(), Failure>) -> Result<(), Failure> {
        let Err(Failure::Store(Error::Poisoned)) = outcome else {
            return outcome;
        };
        let deadline = std::time::Instant::now() + CAUSE_PATIENCE;
        loop {
            match self.store.sync() {
                Err(cause @ Error::Background { .. }) => return Err(Failure::Store(cause)),
                _ if std::time::Instant::now() >= deadline => {
                    return Err(Failure::Store(Error::Poisoned))
                }
                _ => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
    }

    /// Committed operations, other than inserts, that changed nothing.
    pub fn unchanged(&self) -> u64 {
        self.unchanged
    }

    fn commit(&mut self, out: &mut impl Write) -> Result<(), Failure> {
        if self.ops.is_empty() && self.inserts.is_empty() {
            return Ok(());
        }
        let ops = std::mem::take(&mut self.ops);
        let inserts = std::mem::take(&mut self.inserts);
        let mixed = std::mem::replace(&mut self.mixed, false);
        match mixed {
            // Large insert-only batches take the bulk path (whole blocks).
            false => {
                // Batches this large are merged into the tables whole
                // (`Store::insert_many`).
                let bulk = inserts.len() >= self.store.merge_threshold();
                self.store.insert_many(&inserts)?;
                self.bulk |= bulk;
                if bulk {
                    let held =
                        usize::try_from(self.store.stats().fingerprints).unwrap_or(usize::MAX);
                    self.grown = held.clamp(MIN_GROWN_BATCH, MAX_GROWN_BATCH);
                }
            }
            true => {
                let changed = self.store.apply(ops)?;
                self.unchanged += changed.iter().filter(|&&c| !c).count() as u64;
            }
        }
        if self.ack {
            // A closed stdout must not pass for success: the rest of the
            // input would silently go unapplied.
            let closed = |e: io::Error| {
                Failure::Io(io::Error::other(format!(
                    "cannot write acknowledgement: {e}"
                )))
            };
            writeln!(out, "acked {}", self.last_line).map_err(closed)?;
            out.flush().map_err(closed)?;
        }
        Ok(())
    }
}

/// Answers query lines, one JSON line each, in input order.
pub fn query(
    store: &Store,
    input: impl Read + Send + 'static,
    out: &mut impl Write,
    k: u32,
    first: bool,
    batch: bool,
    max_ids: Option<usize>,
) -> Result<(), Failure> {
    if batch {
        let mut queries = Vec::new();
        let mut names = Names::default();
        let read = for_each_line(input, std::time::Duration::ZERO, parse_query, |_, q, _| {
            if let Some((fp, name)) = q {
                names.push(queries.len(), name);
                queries.push(fp);
            }
            Ok(())
        });
        let mut printer = Printer::new(max_ids);
        for (c, chunk) in queries.chunks(QUERY_BATCH).enumerate() {
            let results = ask(store, chunk, k, first, max_ids)?;
            for (i, (q, matches)) in chunk.iter().zip(&results).enumerate() {
                let name = names.of(c * QUERY_BATCH + i);
                printer.write(out, *q, name, matches.iter().map(Into::into))?;
            }
        }
        out.flush()?;
        return read;
    }
    // Queries already read are answered a few at a time (their probes
    // interleaved); none waits for input that has not arrived, so an
    // interactive caller still gets each answer as soon as it asks.
    let mut printer = Printer::new(max_ids);
    let group = ANSWER_GROUP;
    let mut waiting = Waiting::default();
    let result = for_each_line(
        input,
        std::time::Duration::ZERO,
        parse_query,
        |_, q, more| {
            if let Some((fp, name)) = q {
                waiting.names.push(waiting.fps.len(), name);
                waiting.fps.push(fp);
            }
            if waiting.fps.len() == group || !more {
                answer(store, out, &mut printer, &mut waiting, k, first, max_ids)?;
            }
            if !more {
                out.flush()?;
            }
            Ok(())
        },
    );
    // What was read before a malformed line is answered before it is
    // reported.
    answer(store, out, &mut printer, &mut waiting, k, first, max_ids)?;
    out.flush()?;
    result
}

/// `query --probabilistic`: answers `FP [VOLATILITY]` lines
/// ([`parse_probabilistic`](crate::input::parse_probabilistic)) by
/// [`Store::query_probabilistic_many_into`], a few at a time, one JSON
/// line each, in order.
pub fn query_probabilistic(
    store: &Store,
    input: impl Read + Send + 'static,
    out: &mut impl Write,
    k: u32,
    first: bool,
    budget: simstore::Budget,
    max_ids: Option<usize>,
) -> Result<(), Failure> {
    let mut printer = Printer::new(max_ids);
    let mut waiting = Vec::with_capacity(ANSWER_GROUP);
    let mut names = Names::default();
    let mut answers = simstore::Answers::new();
    // Answers and empties `waiting` (also when it fails).
    let mut answer = |waiting: &mut Vec<(u64, simstore::simhash::Volatility)>,
                      names: &mut Names,
                      out: &mut dyn Write|
     -> Result<(), Failure> {
        let ask = |queries: &[_], answers: &mut simstore::Answers| {
            store.query_probabilistic_many_into(queries, k, budget, first, max_ids, answers)
        };
        let written = write_group(
            waiting,
            |q| q.0,
            names,
            ask,
            &mut answers,
            &mut printer,
            out,
        );
        waiting.clear();
        names.clear();
        written
    };
    let result = for_each_line(
        input,
        std::time::Duration::ZERO,
        |s| crate::input::utf8(s).and_then(crate::input::parse_probabilistic),
        |_, q, more| {
            if let Some((fp, volatility, name)) = q {
                names.push(waiting.len(), name);
                waiting.push((fp, volatility));
            }
            if waiting.len() == ANSWER_GROUP || !more {
                answer(&mut waiting, &mut names, out)?;
            }
            if !more {
                out.flush()?;
            }
            Ok(())
        },
    );
    answer(&mut waiting, &mut names, out)?;
    out.flush()?;
    result
}

/// Answers and empties `waiting` (also when it fails).
fn answer(
    store: &Store,
    out: &mut impl Write,
    printer: &mut Printer,
    waiting: &mut Waiting,
    k: u32,
    first: bool,
    max_ids: Option<usize>,
) -> Result<(), Failure> {
    if waiting.fps.is_empty() {
        return Ok(());
    }
    let Waiting {
        fps,
        names,
        answers,
    } = waiting;
    let ask = |queries: &[u64], answers: &mut simstore::Answers| {
        store.query_many_into(queries, k, first, max_ids, answers)
    };
    let written = write_group(fps, |&fp| fp, names, ask, answers, printer, out);
    fps.clear();
    names.clear();
    written
}

/// Answers `queries` (each the fingerprint `fp` gives, named by `names`)
/// through `ask` into `answers`, and writes a line each. When the group
/// fails (a corrupt block), its queries are answered one by one, so those
/// before the one that fails are written, as without grouping, before the
/// error.
fn write_group<Q>(
    queries: &[Q],
    fp: impl Fn(&Q) -> u64,
    names: &Names,
    mut ask: impl FnMut(&[Q], &mut simstore::Answers) -> simstore::Result<()>,
    answers: &mut simstore::Answers,
    printer: &mut Printer,
    out: &mut (impl Write + ?Sized),
) -> Result<(), Failure> {
    if ask(queries, answers).is_ok() {
        for (i, (q, matches)) in queries.iter().zip(answers.iter()).enumerate() {
            printer.write(out, fp(q), names.of(i), matches)?;
        }
        return Ok(());
    }
    for (i, q) in queries.iter().enumerate() {
        ask(std::slice::from_ref(q), answers)?;
        printer.write(out, fp(q), names.of(i), answers.iter().flatten())?;
    }
    Ok(())
}

/// Queries read and not answered yet.
#[derive(Default)]
struct Waiting {
    fps: Vec<u64>,
    names: Names,
    /// The answers' buffers, reused group after group.
    answers: simstore::Answers,
}

/// The names query lines gave (most give none), by the query's index.
#[derive(Default)]
struct Names(Vec<(usize, String)>);

impl Names {
    /// Records query `i`'s name, if it has one; `i` increases call by call.
    fn push(&mut self, i: usize, name: Option<String>) {
        if let Some(name) = name {
            self.0.push((i, name));
        }
    }

    /// Query `i`'s name.
    fn of(&self, i: usize) -> Option<&str> {
        self.0
            .binary_search_by_key(&i, |&(j, _)| j)
            .ok()
            .map(|at| self.0[at].1.as_str())
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// The library's answers to `fps` (with `first`, a list of at most one
/// each), at most `max_ids` ids a match when limited.
fn ask(
    store: &Store,
    fps: &[u64],
    k: u32,
    first: bool,
    max_ids: Option<usize>,
) -> simstore::Result<Vec<Vec<simstore::Match>>> {
    // Every id when not limited (one batch path either way).
    store.query_many_max_ids(fps, k, first, max_ids.unwrap_or(usize::MAX))
}

/// Writes query result lines through one reused buffer.
struct Printer {
    line: Vec<u8>,
    /// The most ids printed a match (`--max-ids`), if limited.
    max_ids: Option<usize>,
}

impl Printer {
    fn new(max_ids: Option<usize>) -> Self {
        Self {
            line: Vec::new(),
            max_ids,
        }
    }

    /// Writes one query's result line, with the name its line gave.
    fn write<'a>(
        &mut self,
        out: &mut (impl Write + ?Sized),
        query: u64,
        name: Option<&str>,
        matches: impl IntoIterator<Item = simstore::MatchRef<'a>>,
    ) -> io::Result<()> {
        self.line.clear();
        json::push_query_result(&mut self.line, query, name, matches, self.max_ids);
        self.line.push(b'\n');
        out.write_all(&self.line)
    }
}
