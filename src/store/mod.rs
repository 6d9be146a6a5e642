//! The store: permuted tables, pending appends, tombstones, compaction and
//! recovery beneath a small API.

mod answers;
mod batch;
mod before;
mod bulk;
mod compact;
mod compactor;
mod entry;
mod export;
mod files;
mod filters;
mod flats;
mod health;
mod id_families;
mod ids;
mod levels;
mod listing;
mod locks;
mod memory;
mod open;
mod options;
mod parallel;
mod pause;
mod pending;
mod priority;
mod query;
mod shared;
mod sketch_cache;
mod sketches;
mod sort;
mod state;
mod stats;
mod upgrade;
mod upper;
mod verify;
mod warm;
mod write;

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

pub use crate::plan::vosh::Budget;
pub use answers::{Answers, MatchRef};
pub use compact::CompactionReport;
pub use entry::Entry;
pub use options::{
    Durability, Options, BUFFERED_SYNC_INTERVAL, DEFAULT_BLOCK_SIZE, DEFAULT_EXPECTED_SIZE,
    DEFAULT_MAX_DISTANCE, DEFAULT_MIN_MERGE_THRESHOLD, DEFAULT_TABLE_FILE_BYTES, MIN_IDF_DOCUMENTS,
};
pub use pause::MergePause;
pub use query::Match;
pub use sketches::{Similar, Sketched};
pub use stats::{LevelStats, Stats};
pub use verify::VerifyReport;
pub use write::Op;

use crate::error::Result;
use crate::plan::Plan;
use crate::simhash::Sketch;
use listing::Listing;
use shared::Shared;

/// A simhash fingerprint store in one directory.
///
/// `Store` is `Send + Sync`: share it (for example in an `Arc`) between
/// threads; queries run concurrently with inserts and compaction.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("simstore-doc-store-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// use simstore::{Options, Store};
///
/// let store = Store::create(&dir, &Options::new())?;
/// store.insert(0x0123_4567_89ab_cdef, 1)?;
/// store.insert(0x0123_4567_89ab_cdef, 2)?; // a second document, same fingerprint
/// store.insert(0x0123_4567_89ab_c000, 3)?;
///
/// // Every stored fingerprint within distance 3, nearest first.
/// let near = store.query(0x0123_4567_89ab_cdee, 3)?;
/// assert_eq!(near.len(), 1);
/// assert_eq!((near[0].distance, near[0].ids.clone()), (1, vec![1, 2]));
/// // Or only whether there is one.
/// assert!(store.query_first(0x0123_4567_89ab_cdee, 3)?.is_some());
///
/// store.delete(0x0123_4567_89ab_cdef, 2)?;
/// assert_eq!(store.ids(0x0123_4567_89ab_cdef)?, vec![1]);
/// store.close()?;
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), simstore::Error>(())
/// ```
///
/// Dropping the handle closes the store cleanly: background work stops,
/// buffered writes are synced and RocksDB's memtables are flushed to its
/// table files (up to its write buffer, 64 MB; typically well under a
/// second), so the next open has no log to replay. After a crash the open
/// replays the log without flushing it (the store answers sooner) and
/// starts that flush in the background.
pub struct Store {
    shared: Arc<Shared>,
    compactor: Option<JoinHandle<()>>,
    /// The thread reading blocks into memory behind the open, until it is
    /// waited for.
    warmer: parking_lot::Mutex<Option<JoinHandle<()>>>,
    /// Whether [`close`](Self::close) ran.
    closed: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.shared.dir)
            .field("plan", &self.shared.plan)
            .finish()
    }
}

impl Store {
    /// Creates a store in `dir`, which must not exist or be empty.
    pub fn create(dir: impl AsRef<Path>, options: &Options) -> Result<Self> {
        Self::start(open::create(dir.as_ref(), options)?)
    }

    /// Opens an existing store. Creation options in `options`, when given,
    /// must match the store's.
    pub fn open(dir: impl AsRef<Path>, options: &Options) -> Result<Self> {
        Self::start(open::open(dir.as_ref(), options)?)
    }

    /// Opens the store in `dir`, creating it when `dir` is absent or empty.
    pub fn open_or_create(dir: impl AsRef<Path>, options: &Options) -> Result<Self> {
        let dir = dir.as_ref();
        let empty = std::fs::read_dir(dir)
            .map(|mut e| e.next().is_none())
            .unwrap_or(true);
        if empty {
            Self::create(dir, options)
        } else {
            Self::open(dir, options)
        }
    }

    fn start(shared: Shared) -> Result<Self> {
        let shared = Arc::new(shared);
        let io = |source| crate::Error::Io {
            path: shared.dir.clone(),
            source,
        };
        let warmer = if !shared.options.no_warm {
            let warmer = warm::spawn(&shared).map_err(io)?;
            if warmer.is_none() {
                // Every block is held already: the levels' filters and
                // the upper levels' set are built now (the warming builds
                // them otherwise).
                let _one_at_a_time = shared.locks.merging();
                filters::install(&shared);
                flats::install(&shared);
                upper::install(&shared);
            }
            warmer
        } else {
            None
        };
        let compactor = if shared.options.manual_compaction {
            None
        } else {
            Some(
                compactor::spawn(Arc::clone(&shared)).map_err(|source| crate::Error::Io {
                    path: shared.dir.clone(),
                    source,
                })?,
            )
        };
        Ok(Self {
            shared,
            compactor,
            warmer: parking_lot::Mutex::new(warmer),
            closed: false,
        })
    }

    /// Waits until every block is held in memory (when the tables fit the
    /// memory budget and [`Options::warm`] is on, the default): until then
    /// a query reads the blocks it needs that are not held yet through
    /// RocksDB, one at a time. Returns at once otherwise.
    pub fn wait_warm(&self) {
        // The lock is held while joining, so a second caller waits too.
        let mut warmer = self.warmer.lock();
        if let Some(handle) = warmer.take() {
            let _ = handle.join();
        }
    }

    /// The table plan.
    pub fn plan(&self) -> &Plan {
        &self.shared.plan
    }

    /// The largest distance queries may ask for.
    pub fn max_distance(&self) -> u32 {
        u32::from(self.shared.plan.max_distance())
    }

    /// Stores a fingerprint with a document id. Visible to queries when
    /// this returns; durable as the store's [`Durability`] says.
    pub fn insert(&self, fingerprint: u64, id: u64) -> Result<()> {
        self.apply(vec![Op::Insert {
            fingerprint,
            id: Some(id),
        }])
        .map(drop)
    }

    /// Stores a fingerprint with a document id and the similarity sketch
    /// of the document, in one atomic write (stores created with
    /// [`Options::sketches`] only: elsewhere an
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument)). A pair
    /// stored already gets this sketch in place of its own.
    ///
    /// ```
    /// use simstore::simhash::Fingerprinter;
    /// use simstore::{Options, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::create(dir.path().join("s"), &Options::new().sketches(true).max_distance(8))?;
    /// let f = Fingerprinter::new();
    /// let page: Vec<String> = (0..300).map(|i| format!("word{i}")).collect();
    /// let page = page.join(" ");
    /// let sketch = f.sketch(&page).unwrap();
    /// store.insert_sketched(sketch.fingerprint(), 1, &sketch)?;
    ///
    /// let again = f.sketch(&(page + "and one more line")).unwrap();
    /// let similar = store.query_similar(again.fingerprint(), 8, &again, 0.8)?;
    /// assert_eq!(similar[0].id, 1);
    /// assert!(similar[0].similarity > 0.9);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn insert_sketched(&self, fingerprint: u64, id: u64, sketch: &Sketch) -> Result<()> {
        self.apply(vec![Op::InsertSketched {
            fingerprint,
            id,
            sketch: *sketch,
        }])
        .map(drop)
    }

    /// The similarity sketch stored with `(fingerprint, id)`; `None` when
    /// the pair has none (or the store keeps no sketches).
    pub fn sketch(&self, fingerprint: u64, id: u64) -> Result<Option<Sketch>> {
        drop(self.shared.readable_state()?);
        sketches::sketch(&self.shared, fingerprint, id)
    }

    /// The sketches stored with `pairs` of `(fingerprint, id)`, read in one
    /// batch, into `out` in their order (`None` for a pair without one).
    pub(crate) fn sketches(
        &self,
        pairs: &[(u64, u64)],
        out: &mut Vec<Option<Sketch>>,
    ) -> Result<()> {
        drop(self.shared.readable_state()?);
        sketches::sketches(&self.shared, pairs, out)
    }

    /// The document frequencies kept with the store ([`Options::idf`]),
    /// with which its documents' fingerprints are weighed
    /// ([`Fingerprinter::fingerprint_idf`](crate::simhash::Fingerprinter::fingerprint_idf)).
    pub fn idf(&self) -> Option<&crate::simhash::Idf> {
        self.shared.idf.as_ref()
    }

    /// Whether the store keeps similarity sketches ([`Options::sketches`]).
    pub fn keeps_sketches(&self) -> bool {
        self.shared.sketches
    }

    /// The stored documents within distance `k` of `fingerprint` whose
    /// sketches pass [`Sketch::recheck`] against `sketch` at `threshold`
    /// (an estimate above the threshold by a margin that grows with the
    /// estimate's error and the number of candidates, see
    /// [`Sketch::bar`]), most similar first. Pairs stored without a sketch
    /// are not candidates: on a store without sketches the answer is
    /// always empty. `threshold` must lie in `[0, 1]`.
    pub fn query_similar(
        &self,
        fingerprint: u64,
        k: u32,
        sketch: &Sketch,
        threshold: f64,
    ) -> Result<Vec<Similar>> {
        sketches::query_similar(&self.shared, fingerprint, k, sketch, threshold)
    }

    /// Every stored pair within distance `k` of `fingerprint` that has a
    /// sketch, with it, by distance, then fingerprint, then id: the
    /// candidates [`query_similar`](Self::query_similar) re-checks, for
    /// callers that weigh candidates of their own beside them.
    pub fn query_sketched(&self, fingerprint: u64, k: u32) -> Result<Vec<Sketched>> {
        sketches::query_sketched(&self.shared, fingerprint, k)
    }

    /// Stores a fingerprint without a document id.
    pub fn insert_fingerprint(&self, fingerprint: u64) -> Result<()> {
        self.apply(vec![Op::Insert {
            fingerprint,
            id: None,
        }])
        .map(drop)
    }

    /// Stores many fingerprints, each with its id (`(fingerprint, id)`) or
    /// an optional one (`(fingerprint, Option<id>)`), in one atomic
    /// commit: visible to queries when this returns, durable as the
    /// store's [`Durability`] says.
    ///
    /// A batch at least as large as the [merge
    /// threshold](Self::merge_threshold) and an eighth of the stored
    /// fingerprints skips the pending stage: it is merged straight into
    /// the compressed tables (level 0), with everything already pending
    /// and every other level, writing whole blocks (it holds off other writers and
    /// compactions meanwhile, not queries). A table that gets at least
    /// [`Options::table_file_bytes`] of new blocks has them written as a
    /// RocksDB table file and ingested, not passed through the write-ahead
    /// log and a memtable. Smaller batches go through the group commit.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("simstore-doc-many-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// use simstore::{Options, Store};
    ///
    /// let store = Store::create(&dir, &Options::new())?;
    /// store.insert_many(&[(0x0123_4567_89ab_cdef, 1), (0xfedc_ba98_7654_3210, 2)])?;
    /// store.insert_many(&[(0x0f0f_0f0f_0f0f_0f0f, None)])?; // no document id
    /// assert_eq!(store.stats().fingerprints, 3);
    /// # drop(store);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), simstore::Error>(())
    /// ```
    pub fn insert_many<E: Entry>(&self, entries: &[E]) -> Result<()> {
        self.shared.take_background_error()?;
        if bulk::worth_it(&self.shared, entries.len()) {
            return bulk::insert_bulk(&self.shared, entries);
        }
        self.apply(
            entries
                .iter()
                .map(|e| Op::Insert {
                    fingerprint: e.fingerprint(),
                    id: e.id(),
                })
                .collect(),
        )
        .map(drop)
    }

    /// Removes one (fingerprint, id) pair; the fingerprint itself goes when
    /// that was its last id. Returns whether the pair was stored.
    pub fn delete(&self, fingerprint: u64, id: u64) -> Result<bool> {
        Ok(self
            .apply(vec![Op::Delete { fingerprint, id }])?
            .first()
            .copied()
            .unwrap_or(false))
    }

    /// Removes a fingerprint and all its ids. Returns whether it was stored.
    pub fn delete_fingerprint(&self, fingerprint: u64) -> Result<bool> {
        Ok(self
            .apply(vec![Op::DeleteFingerprint { fingerprint }])?
            .first()
            .copied()
            .unwrap_or(false))
    }

    /// Applies a mixed sequence of changes, in order, as one atomic commit.
    /// Returns, per op, whether it changed the store: a new fingerprint or
    /// pair, or something removed (an [`Op::InsertSketched`] of a pair
    /// stored already replaces its sketch and reports `false`).
    pub fn apply(&self, ops: Vec<Op>) -> Result<Vec<bool>> {
        self.shared.take_background_error()?;
        write::submit(&self.shared, ops)
    }

    /// Every stored fingerprint within Hamming distance `k` of `fingerprint`,
    /// sorted by distance then fingerprint. `k` may not exceed
    /// [`max_distance`](Self::max_distance).
    ///
    /// A thread's single queries (this one, [`query_first`](Self::query_first)
    /// and the probabilistic ones) reuse buffers it keeps, up to 1 MiB: one
    /// that needed more lets them go.
    pub fn query(&self, fingerprint: u64, k: u32) -> Result<Vec<Match>> {
        query::query(&self.shared, fingerprint, k)
    }

    /// Some stored fingerprint within distance `k`, stopping at the first
    /// found; `None` when there is none.
    pub fn query_first(&self, fingerprint: u64, k: u32) -> Result<Option<Match>> {
        query::query_first(&self.shared, fingerprint, k)
    }

    /// [`query`](Self::query) for each of `fingerprints`, answers in input
    /// order. The way is chosen by the batch's size next to the store's:
    /// a few queries are answered a few at a time with their probes
    /// interleaved, so that their memory reads overlap; a batch large
    /// next to the tables is sorted and each table's blocks visited in
    /// order once for all its queries. Batches of 4,096 or more are
    /// spread over [`Options::query_threads`] threads.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("simstore-doc-qmany-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// use simstore::{Options, Store};
    ///
    /// let store = Store::create(&dir, &Options::new())?;
    /// store.insert_many(&[(0x0123_4567_89ab_cdef, 1), (0xfedc_ba98_7654_3210, 2)])?;
    /// let answers = store.query_many(&[0x0123_4567_89ab_cdee, 0x1111_1111_1111_1111], 3)?;
    /// assert_eq!(answers[0][0].ids, vec![1]);
    /// assert!(answers[1].is_empty());
    /// # drop(store);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), simstore::Error>(())
    /// ```
    pub fn query_many(&self, fingerprints: &[u64], k: u32) -> Result<Vec<Vec<Match>>> {
        batch::query_batch(&self.shared, fingerprints, k, false, Listing::ALL)
    }

    /// [`query_many`](Self::query_many), or with `first`
    /// [`query_first_many`](Self::query_first_many) (each answer a list of
    /// at most one), listing at most `max_ids` ids of each match: its
    /// smallest. [`Match::id_count`] still counts them all. A match on a
    /// fingerprint that many documents share (an empty page, a
    /// boilerplate text) then costs the ids listed, not all of them
    /// decoded and listed. With `max_ids` of `usize::MAX` every id is
    /// listed, as `query_many` and `query_first_many` list them.
    ///
    /// ```
    /// use simstore::{Options, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::create(dir.path(), &Options::new())?;
    /// let empty_page = 0x0123_4567_89ab_cdef;
    /// let pairs: Vec<(u64, u64)> = (10..1_000).map(|id| (empty_page, id)).collect();
    /// store.insert_many(&pairs)?;
    /// let answers = store.query_many_max_ids(&[empty_page ^ 1], 3, false, 2)?;
    /// assert_eq!(answers[0][0].ids, vec![10, 11]);
    /// assert_eq!(answers[0][0].id_count, 990);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn query_many_max_ids(
        &self,
        fingerprints: &[u64],
        k: u32,
        first: bool,
        max_ids: usize,
    ) -> Result<Vec<Vec<Match>>> {
        batch::query_batch(
            &self.shared,
            fingerprints,
            k,
            first,
            Listing::at_most(max_ids),
        )
    }

    /// The answers of [`query_many`](Self::query_many) (with `first`, of
    /// [`query_first`](Self::query_first) for each; with `max_ids`, listing
    /// as [`query_many_max_ids`](Self::query_many_max_ids) does) into
    /// `answers`, which are emptied first and keep their buffers: a caller
    /// that reuses one [`Answers`] allocates no list per query or per match
    /// once they have grown. The queries are answered on the calling
    /// thread, a few at a time with their probes interleaved (as
    /// `query_many` answers a batch small next to the store; with `first`,
    /// the first match found, where a large batch of `query_first_many`
    /// gives the nearest). On an error `answers` holds the
    /// queries answered before the group that failed.
    ///
    /// ```
    /// use simstore::{Answers, Options, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::create(dir.path(), &Options::new())?;
    /// store.insert_many(&[(0x00ff, 1), (0x00fe, 2), (0xff00, 3)])?;
    /// let mut answers = Answers::new();
    /// for fps in [[0x00ff, 0x0f0f], [0xff01, 0x00fc]] {
    ///     store.query_many_into(&fps, 3, true, None, &mut answers)?;
    ///     for (fp, matches) in fps.iter().zip(answers.iter()) {
    ///         for m in matches {
    ///             println!("{fp:016x} ~ {:016x} at {}: {:?}", m.fingerprint, m.distance, m.ids);
    ///         }
    ///     }
    /// }
    /// assert_eq!(answers.get(0).unwrap().next().unwrap().ids, &[3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn query_many_into(
        &self,
        fingerprints: &[u64],
        k: u32,
        first: bool,
        max_ids: Option<usize>,
        answers: &mut Answers,
    ) -> Result<()> {
        let listing = max_ids.map_or(Listing::ALL, Listing::at_most);
        query::query_many_into(&self.shared, fingerprints, k, first, listing, answers)
    }

    /// [`query_first`](Self::query_first) for each of `fingerprints`, in
    /// order, the way chosen as [`query_many`](Self::query_many) chooses
    /// it: a few queries are answered sixteen at a time, their tables
    /// probed in passes (each pass only for the queries no earlier pass
    /// found a match for); a batch large next to the tables is answered
    /// by sorted passes, which find every match and give the nearest.
    /// Batches of 4,096 or more are spread over
    /// [`Options::query_threads`] threads.
    pub fn query_first_many(&self, fingerprints: &[u64], k: u32) -> Result<Vec<Option<Match>>> {
        Ok(
            batch::query_batch(&self.shared, fingerprints, k, true, Listing::ALL)?
                .into_iter()
                .map(|m| m.into_iter().next())
                .collect(),
        )
    }

    /// Stored fingerprints within distance `k` of `fingerprint`, found by
    /// probabilistic simhash matching (Sood & Loguinov, CIKM 2011) on a
    /// one-table store ([`Options::tables`]`(1)`): the runs of the query's
    /// header and of the headers with its likeliest bit flips, taken by
    /// [`volatility`](crate::simhash::Volatility) until `budget` (by
    /// default an expected recall of 98.5% under the flip model, see
    /// [`Budget`]). Every answer is a true match
    /// (sorted as [`query`](Self::query)'s); a match whose header differs
    /// in bits the search did not flip is missed. On a store of several
    /// tables the answer is exact. [`Budget::EXHAUSTIVE`] gives the exact
    /// answer on any store.
    ///
    /// ```
    /// use simstore::simhash::{Fingerprinter, Volatility};
    /// use simstore::{Budget, Options, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::create(dir.path(), &Options::new().tables(1))?;
    /// let f = Fingerprinter::new();
    /// let a = f.fingerprint("one two three four five six seven eight nine ten").unwrap();
    /// store.insert(a.fingerprint, 1)?;
    /// let b = f.fingerprint("one two three four five six seven eight nine ten eleven").unwrap();
    /// let volatility = Volatility::from_weights(&b.weights);
    /// let found = store.query_probabilistic(b.fingerprint, &volatility, 3, Budget::default())?;
    /// let exact = store.query(b.fingerprint, 3)?;
    /// assert!(found.iter().all(|m| exact.contains(m)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn query_probabilistic(
        &self,
        fingerprint: u64,
        volatility: &crate::simhash::Volatility,
        k: u32,
        budget: Budget,
    ) -> Result<Vec<Match>> {
        let probabilistic = Some((volatility, budget));
        query::query_one(
            &self.shared,
            fingerprint,
            probabilistic,
            k,
            false,
            Listing::ALL,
        )
    }

    /// [`query_probabilistic`](Self::query_probabilistic) stopping at the
    /// first match found.
    pub fn query_first_probabilistic(
        &self,
        fingerprint: u64,
        volatility: &crate::simhash::Volatility,
        k: u32,
        budget: Budget,
    ) -> Result<Option<Match>> {
        let probabilistic = Some((volatility, budget));
        Ok(query::query_one(
            &self.shared,
            fingerprint,
            probabilistic,
            k,
            true,
            Listing::ALL,
        )?
        .pop())
    }

    /// [`query_probabilistic`](Self::query_probabilistic) (or with
    /// `first`, [`query_first_probabilistic`](Self::query_first_probabilistic))
    /// for each of `queries`, answers in input order. Batches of 4,096 or
    /// more are spread over [`Options::query_threads`] threads. A store of
    /// several tables answers exactly, as
    /// [`query_many_max_ids`](Self::query_many_max_ids) does (with `first`,
    /// a large batch gives each query's nearest match).
    pub fn query_probabilistic_many(
        &self,
        queries: &[(u64, crate::simhash::Volatility)],
        k: u32,
        budget: Budget,
        first: bool,
    ) -> Result<Vec<Vec<Match>>> {
        query::query_probabilistic(&self.shared, queries, k, budget, first, Listing::ALL)
    }

    /// [`query`](Self::query), or with a volatility and budget
    /// [`query_probabilistic`](Self::query_probabilistic), listing and
    /// counting only the ids below `below`, at most `max_ids` of them
    /// (the smallest): the deduper's candidates before a document.
    pub(crate) fn query_ids_below(
        &self,
        fingerprint: u64,
        probabilistic: Option<(&crate::simhash::Volatility, Budget)>,
        k: u32,
        max_ids: usize,
        below: u64,
        nearest: usize,
    ) -> Result<Vec<Match>> {
        let listing = Listing {
            max: max_ids,
            below: Some(below),
            nearest,
        };
        query::query_one(&self.shared, fingerprint, probabilistic, k, false, listing)
    }

    /// The answers of
    /// [`query_probabilistic_many`](Self::query_probabilistic_many) (with
    /// `max_ids`, of
    /// [`query_probabilistic_many_max_ids`](Self::query_probabilistic_many_max_ids))
    /// into `answers`, emptied first, on the calling thread: as
    /// [`query_many_into`](Self::query_many_into) for exact queries (on a
    /// store of several tables, with `first`, the first match found).
    ///
    /// ```
    /// use simstore::simhash::Volatility;
    /// use simstore::{Answers, Budget, Options, Store};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::create(dir.path(), &Options::new().tables(1))?;
    /// store.insert_many(&[(0x0123_4567_89ab_cdef, 1)])?;
    /// let every_bit = Volatility::uniform(1.0 / 64.0);
    /// let queries = [(0x0123_4567_89ab_cdee, every_bit), (0xfedc_ba98_7654_3210, every_bit)];
    /// let mut answers = Answers::new();
    /// store.query_probabilistic_many_into(&queries, 3, Budget::default(), false, None, &mut answers)?;
    /// assert_eq!(answers.get(0).unwrap().next().unwrap().ids, &[1]);
    /// assert_eq!(answers.get(1).unwrap().len(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn query_probabilistic_many_into(
        &self,
        queries: &[(u64, crate::simhash::Volatility)],
        k: u32,
        budget: Budget,
        first: bool,
        max_ids: Option<usize>,
        answers: &mut Answers,
    ) -> Result<()> {
        let listing = max_ids.map_or(Listing::ALL, Listing::at_most);
        query::query_probabilistic_into(&self.shared, queries, k, budget, first, listing, answers)
    }

    /// [`query_probabilistic_many`](Self::query_probabilistic_many) listing
    /// at most `max_ids` ids of each match, as
    /// [`query_many_max_ids`](Self::query_many_max_ids) does.
    pub fn query_probabilistic_many_max_ids(
        &self,
        queries: &[(u64, crate::simhash::Volatility)],
        k: u32,
        budget: Budget,
        first: bool,
        max_ids: usize,
    ) -> Result<Vec<Vec<Match>>> {
        let listing = Listing::at_most(max_ids);
        query::query_probabilistic(&self.shared, queries, k, budget, first, listing)
    }

    /// Calls `visit` with every stored fingerprint and its ids (increasing;
    /// none for a fingerprint inserted without one), in increasing order
    /// of fingerprint, until `visit` returns `false`; returns how many
    /// fingerprints it was given. What `simstore dump` prints: the `add`
    /// input that rebuilds the store, for instance into a store of
    /// another plan once this one has outgrown its expected size.
    ///
    /// The view is one moment's: writes and merges of this store wait
    /// until it returns, and so do queries once a write waits (`simstore
    /// dump` of 10M pairs, tables read from disk and every line printed,
    /// takes about 4 s). Corruption found on the way is returned as an
    /// error. `visit` must not write to this store (the write would wait
    /// for `export` to return, which waits for `visit`: a deadlock), nor
    /// query it while another thread may be writing.
    ///
    /// ```
    /// # fn main() -> simstore::Result<()> {
    /// use simstore::{Options, Store};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::create(dir.path(), &Options::new().expected_size(1000))?;
    /// store.insert(0x00ff, 7)?;
    /// store.insert(0x00ff, 3)?;
    /// store.insert_fingerprint(0x0001)?;
    /// let mut all = Vec::new();
    /// let n = store.export(|fp, ids| {
    ///     all.push((fp, ids.to_vec()));
    ///     true
    /// })?;
    /// assert_eq!(n, 2);
    /// assert_eq!(all, vec![(0x0001, vec![]), (0x00ff, vec![3, 7])]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn export(&self, visit: impl FnMut(u64, &[u64]) -> bool) -> Result<u64> {
        let state = self.shared.readable_state()?;
        export::export(&self.shared.plan, &state, visit)
    }

    /// The ids stored for a fingerprint, increasing.
    pub fn ids(&self, fingerprint: u64) -> Result<Vec<u64>> {
        let mut ids = Vec::new();
        self.shared
            .readable_state()?
            .ids_of(&self.shared.plan, fingerprint, &mut ids)?;
        Ok(ids)
    }

    /// Merges every pending fingerprint and every level into level 0 of
    /// the compressed tables and drops deleted ones from them now (the
    /// background compactor merges only into the level due, see
    /// [`Options::merge_threshold`]).
    pub fn compact(&self) -> Result<CompactionReport> {
        self.shared.take_background_error()?;
        compact::compact(&self.shared)
    }

    /// Runs the merges that are due now, as the background compactor
    /// does: pending fingerprints into the top level once the
    /// [merge threshold](Self::merge_threshold) is reached, a full top
    /// level into a run, every run into level 0 once all are full (for
    /// stores opened with
    /// [`Options::manual_compaction`], whose writers then choose when
    /// merges run). Rewrites only the levels merged, unlike
    /// [`compact`](Self::compact).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("simstore-doc-due-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// use simstore::{Options, Store};
    ///
    /// let store = Store::create(&dir, &Options::new().manual_compaction(true).merge_threshold(2))?;
    /// for (fp, id) in [(1, 10), (2, 20), (3, 30)] {
    ///     store.insert(fp, id)?;
    /// }
    /// assert_eq!(store.stats().pending, 3);
    /// store.merge_due()?;
    /// assert_eq!(store.stats().pending, 0);
    /// assert_eq!(store.query(1, 0)?[0].ids, vec![10]);
    /// # drop(store);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), simstore::Error>(())
    /// ```
    pub fn merge_due(&self) -> Result<CompactionReport> {
        self.shared.take_background_error()?;
        compact::compact_due(&self.shared)
    }

    /// Counts and sizes.
    pub fn stats(&self) -> Stats {
        stats::stats(&self.shared)
    }

    /// How many pending fingerprints make the background compactor merge
    /// them into the tables' top level: as set by
    /// [`Options::merge_threshold`], or by default
    /// [`DEFAULT_MIN_MERGE_THRESHOLD`].
    pub fn merge_threshold(&self) -> usize {
        self.shared.merge_threshold()
    }

    /// Checks every block and record on disk; see [`VerifyReport`].
    pub fn verify(&self) -> Result<VerifyReport> {
        verify::verify(&self.shared)
    }

    /// Writes RocksDB's in-memory buffers to table files, so the next open
    /// has less write-ahead log to replay. Durability does not depend on it.
    pub fn flush(&self) -> Result<()> {
        self.shared.take_background_error()?;
        self.shared.db.flush()
    }

    /// Returns to the file system the space held by replaced blocks and
    /// merged pending records: flushes RocksDB's memtables, then has it
    /// rewrite its files. Takes about as long as reading the store once;
    /// `simstore compact` runs it, and `simstore add` after a bulk load.
    pub fn reclaim_space(&self) -> Result<()> {
        self.shared.take_background_error()?;
        self.shared.db.flush()?;
        self.shared.db.compact_files()
    }

    /// Makes every acknowledged write durable now (useful in buffered mode
    /// before a planned shutdown).
    pub fn sync(&self) -> Result<()> {
        self.shared.take_background_error()?;
        self.shared.db.flush_wal()
    }

    /// Closes the store: stops background work, makes buffered writes
    /// durable and flushes RocksDB's memtables to its table files, so the
    /// next open has no log to replay. Returns a failure of background
    /// work not yet returned by another call, else the first error of the
    /// sync and the flush (all are attempted). Dropping the handle does
    /// the same and ignores the errors.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("simstore-doc-close-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// use simstore::{Durability, Options, Store};
    ///
    /// let store = Store::create(&dir, &Options::new().durability(Durability::Buffered))?;
    /// store.insert(0x0123_4567_89ab_cdef, 7)?;
    /// store.close()?; // the buffered insert is on disk
    /// let store = Store::open(&dir, &Options::new())?;
    /// assert_eq!(store.ids(0x0123_4567_89ab_cdef)?, vec![7]);
    /// # drop(store);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), simstore::Error>(())
    /// ```
    pub fn close(mut self) -> Result<()> {
        self.shut_down()
    }

    /// What [`close`](Self::close) and `drop` do, once.
    fn shut_down(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.shared.health.stop();
        self.wait_warm();
        if let Some(handle) = self.compactor.take() {
            compactor::stop(&self.shared, handle);
        }
        let background = self.shared.take_background_error();
        // Buffered writes since the last sync become durable at a clean
        // close, and the memtables go to table files so the next open has
        // no log to replay (RocksDB would not flush them at close, and
        // recovery leaves them for a flush behind the open).
        let synced = if self.shared.sync_writes() {
            Ok(())
        } else {
            self.shared.db.flush_wal()
        };
        let flushed = self.shared.db.flush();
        background.and(synced).and(flushed)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // A failure here has no one to report to (`close` returns it); the
        // next open recovers whatever reached the disk.
        let _ = self.shut_down();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn store_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<super::Store>();
    }

    /// Batches far smaller than the tables (answered query by query) and
    /// far larger (one sorted pass) both equal the single-query answers.
    #[test]
    fn small_and_large_batches_agree_with_single_queries() {
        use super::{Options, Store};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(
            dir.path().join("s"),
            &Options::new().block_size(64).manual_compaction(true),
        )
        .unwrap();
        let mut rng = crate::test_rng::TestRng::new(9);
        let mut next = || rng.next_u64();
        let fps: Vec<u64> = (0..3000).map(|_| next()).collect();
        store
            .insert_many(&fps.iter().map(|&f| (f, 1)).collect::<Vec<_>>())
            .unwrap();
        store.compact().unwrap();
        let blocks = store.stats().blocks as usize / store.plan().tables().len();
        let queries: Vec<u64> = (0..4 * blocks)
            .map(|i| fps[i % fps.len()] ^ (1 << (i % 64)) ^ (next() % 2))
            .collect();
        for n in [3, blocks / 2, 4 * blocks] {
            let batch = store.query_many(&queries[..n], 3).unwrap();
            for (q, got) in queries[..n].iter().zip(batch) {
                assert_eq!(got, store.query(*q, 3).unwrap(), "batch of {n}");
            }
        }
    }
}
