//! `simstore.Store` and `simstore.Match`.

use std::path::PathBuf;

use numpy::{IntoPyArray, PyArray1};
use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList};
use simstore::{Durability, Op, Options};

use crate::convert::{self, NO_ID};
use crate::errors::{self, invalid, OrRaise};
use crate::fork::Owner;

/// A stored fingerprint within the asked distance of a query.
#[pyclass(frozen, eq, module = "simstore", name = "Match")]
#[derive(PartialEq, Eq)]
pub struct PyMatch {
    /// The stored fingerprint.
    #[pyo3(get)]
    fingerprint: u64,
    /// Its Hamming distance from the query.
    #[pyo3(get)]
    distance: u32,
    ids: Vec<u64>,
    /// How many ids it has: `len(ids)` unless the query listed fewer
    /// (`max_ids`).
    #[pyo3(get)]
    id_count: usize,
}

#[pymethods]
impl PyMatch {
    /// The document ids stored with the fingerprint, increasing (empty
    /// when it was stored without one).
    #[getter]
    fn ids(&self) -> Vec<u64> {
        self.ids.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "Match(fingerprint=0x{:016x}, distance={}, ids={:?})",
            self.fingerprint, self.distance, self.ids
        )
    }
}

impl From<simstore::Match> for PyMatch {
    fn from(m: simstore::Match) -> Self {
        Self {
            fingerprint: m.fingerprint,
            distance: m.distance,
            ids: m.ids,
            id_count: m.id_count,
        }
    }
}

/// A simstore store: a directory of 64-bit simhash fingerprints with their
/// document ids, answering Hamming-distance queries.
#[pyclass(frozen, module = "simstore", name = "Store")]
pub struct PyStore {
    inner: RwLock<Option<simstore::Store>>,
    path: PathBuf,
    owner: Owner,
}

impl Drop for PyStore {
    fn drop(&mut self) {
        // Without a lock: in a forked child it may be held for good.
        self.owner.release(self.inner.get_mut().take());
    }
}

/// `simstore.QueryMatches`, looked up once.
static QUERY_MATCHES: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

#[allow(clippy::too_many_arguments)]
fn options(
    py: Python<'_>,
    max_distance: Option<&Bound<'_, PyAny>>,
    expected_size: Option<&Bound<'_, PyAny>>,
    tables: Option<&Bound<'_, PyAny>>,
    durability: &str,
    memory_budget: Option<&Bound<'_, PyAny>>,
    query_threads: Option<&Bound<'_, PyAny>>,
    merge_threshold: Option<&Bound<'_, PyAny>>,
) -> PyResult<Options> {
    let mut o = Options::new();
    if let Some(k) = max_distance {
        o = o.max_distance(convert::small(k, "max_distance", 64)? as u32);
    }
    if let Some(n) = expected_size {
        o = o.expected_size(convert::uint64(n, "expected_size")?);
    }
    if let Some(t) = tables {
        o = o.tables(convert::small(t, "tables", u64::from(u32::MAX))? as u32);
    }
    o = o.durability(match durability {
        "sync" => Durability::Sync,
        "buffered" => Durability::Buffered,
        other => {
            return Err(invalid(
                py,
                format!("durability must be \"sync\" or \"buffered\", not {other:?}"),
            ))
        }
    });
    if let Some(b) = memory_budget {
        o = o.memory_budget(convert::uint64(b, "memory_budget")?);
    }
    if let Some(t) = query_threads {
        let t = convert::small(t, "query_threads", 1024)? as usize;
        if t == 0 {
            return Err(invalid(py, "query_threads must be at least 1"));
        }
        o = o.query_threads(t);
    }
    if let Some(n) = merge_threshold {
        let n = convert::small(n, "merge_threshold", 1 << 40)? as usize;
        if n == 0 {
            return Err(invalid(py, "merge_threshold must be at least 1"));
        }
        o = o.merge_threshold(n);
    }
    Ok(o)
}

/// A probabilistic budget from Python arguments.
fn budget(
    py: Python<'_>,
    recall: f64,
    max_probes: Option<&Bound<'_, PyAny>>,
) -> PyResult<simstore::Budget> {
    if !(0.0..=1.0).contains(&recall) {
        return Err(invalid(
            py,
            format!("recall {recall} is not between 0 and 1"),
        ));
    }
    let max_probes = match max_probes {
        Some(n) => {
            let n = convert::uint64(n, "max_probes")?;
            if n == 0 {
                return Err(invalid(py, "max_probes must be at least 1"));
            }
            usize::try_from(n).unwrap_or(usize::MAX)
        }
        None => usize::MAX,
    };
    Ok(simstore::Budget { recall, max_probes })
}

/// `max_ids` as given (0: none listed, only counted), or every id when
/// `None`; one beyond `usize` is taken as `usize::MAX`.
fn max_ids(max_ids: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    max_ids
        .map(|n| Ok(usize::try_from(convert::uint64(n, "max_ids")?).unwrap_or(usize::MAX)))
        .transpose()
}

/// How a store is opened.
#[derive(Clone, Copy)]
enum Mode {
    Create,
    Open,
    OpenOrCreate,
}

impl PyStore {
    #[allow(clippy::too_many_arguments)]
    fn start(
        py: Python<'_>,
        mode: Mode,
        path: PathBuf,
        max_distance: Option<&Bound<'_, PyAny>>,
        expected_size: Option<&Bound<'_, PyAny>>,
        tables: Option<&Bound<'_, PyAny>>,
        durability: &str,
        memory_budget: Option<&Bound<'_, PyAny>>,
        query_threads: Option<&Bound<'_, PyAny>>,
        merge_threshold: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let o = options(
            py,
            max_distance,
            expected_size,
            tables,
            durability,
            memory_budget,
            query_threads,
            merge_threshold,
        )?;
        let store = py
            .detach(|| match mode {
                Mode::Create => simstore::Store::create(&path, &o),
                Mode::Open => simstore::Store::open(&path, &o),
                Mode::OpenOrCreate => simstore::Store::open_or_create(&path, &o),
            })
            .or_raise(py)?;
        Ok(Self {
            inner: RwLock::new(Some(store)),
            path,
            owner: Owner::here(),
        })
    }

    /// `f` on the open store, without the GIL.
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&simstore::Store) -> simstore::Result<R> + Send,
    ) -> PyResult<R> {
        self.owner.check(py, &self.path)?;
        let result = py.detach(|| self.inner.read().as_ref().map(f));
        match result {
            Some(r) => r.or_raise(py),
            None => Err(errors::closed(py)),
        }
    }

    /// The query distance: `k`, or the store's maximum.
    fn distance(&self, py: Python<'_>, k: Option<&Bound<'_, PyAny>>) -> PyResult<u32> {
        match k {
            Some(k) => Ok(convert::small(k, "k", 64)? as u32),
            None => self.with(py, |s| Ok(s.max_distance())),
        }
    }
}

#[pymethods]
impl PyStore {
    /// Creates a store in `path` (absent or empty).
    #[staticmethod]
    #[pyo3(signature = (path, max_distance=None, expected_size=None, tables=None, durability="sync", memory_budget=None, query_threads=None, merge_threshold=None))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        path: PathBuf,
        max_distance: Option<&Bound<'_, PyAny>>,
        expected_size: Option<&Bound<'_, PyAny>>,
        tables: Option<&Bound<'_, PyAny>>,
        durability: &str,
        memory_budget: Option<&Bound<'_, PyAny>>,
        query_threads: Option<&Bound<'_, PyAny>>,
        merge_threshold: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Self::start(
            py,
            Mode::Create,
            path,
            max_distance,
            expected_size,
            tables,
            durability,
            memory_budget,
            query_threads,
            merge_threshold,
        )
    }

    /// Opens the store in `path`.
    #[staticmethod]
    #[pyo3(signature = (path, max_distance=None, expected_size=None, tables=None, durability="sync", memory_budget=None, query_threads=None, merge_threshold=None))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        max_distance: Option<&Bound<'_, PyAny>>,
        expected_size: Option<&Bound<'_, PyAny>>,
        tables: Option<&Bound<'_, PyAny>>,
        durability: &str,
        memory_budget: Option<&Bound<'_, PyAny>>,
        query_threads: Option<&Bound<'_, PyAny>>,
        merge_threshold: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Self::start(
            py,
            Mode::Open,
            path,
            max_distance,
            expected_size,
            tables,
            durability,
            memory_budget,
            query_threads,
            merge_threshold,
        )
    }

    /// Opens the store in `path`, creating it when `path` is absent or
    /// empty.
    #[staticmethod]
    #[pyo3(signature = (path, max_distance=None, expected_size=None, tables=None, durability="sync", memory_budget=None, query_threads=None, merge_threshold=None))]
    #[allow(clippy::too_many_arguments)]
    fn open_or_create(
        py: Python<'_>,
        path: PathBuf,
        max_distance: Option<&Bound<'_, PyAny>>,
        expected_size: Option<&Bound<'_, PyAny>>,
        tables: Option<&Bound<'_, PyAny>>,
        durability: &str,
        memory_budget: Option<&Bound<'_, PyAny>>,
        query_threads: Option<&Bound<'_, PyAny>>,
        merge_threshold: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Self::start(
            py,
            Mode::OpenOrCreate,
            path,
            max_distance,
            expected_size,
            tables,
            durability,
            memory_budget,
            query_threads,
            merge_threshold,
        )
    }

    /// The store's directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The largest distance queries may ask for.
    #[getter]
    fn max_distance(&self, py: Python<'_>) -> PyResult<u32> {
        self.with(py, |s| Ok(s.max_distance()))
    }

    /// Whether `close()` was called, or this process was forked from the
    /// one that opened the store (where the handle cannot be used).
    #[getter]
    fn closed(&self) -> bool {
        self.owner.forked() || self.inner.read().is_none()
    }

    /// Waits until the tables are held in memory (an open loads them in
    /// the background; until then queries read what they need from disk).
    fn wait_warm(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| {
            s.wait_warm();
            Ok(())
        })
    }

    /// Stores `fingerprint` with document id `id` (or without an id).
    #[pyo3(signature = (fingerprint, id=None))]
    fn insert(
        &self,
        py: Python<'_>,
        fingerprint: &Bound<'_, PyAny>,
        id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let fp = convert::uint64(fingerprint, "fingerprint")?;
        match id {
            Some(id) => {
                let id = convert::id(id)?;
                self.with(py, |s| s.insert(fp, id))
            }
            None => self.with(py, |s| s.insert_fingerprint(fp)),
        }
    }

    /// Stores `fingerprints[i]` with `ids[i]` (or without ids), in one
    /// atomic commit.
    #[pyo3(signature = (fingerprints, ids=None))]
    fn insert_many(
        &self,
        py: Python<'_>,
        fingerprints: &Bound<'_, PyAny>,
        ids: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (fps, ids) = convert::entries(fingerprints, ids)?;
        match ids {
            Some(ids) => self.with(py, move |s| {
                let pairs: Vec<(u64, u64)> = fps.into_iter().zip(ids).collect();
                s.insert_many(&pairs)
            }),
            None => self.with(py, move |s| {
                let pairs: Vec<(u64, Option<u64>)> = fps.into_iter().map(|f| (f, None)).collect();
                s.insert_many(&pairs)
            }),
        }
    }

    /// Removes the pair (`fingerprint`, `id`), or with no id the
    /// fingerprint and all its ids. Returns whether anything was stored.
    #[pyo3(signature = (fingerprint, id=None))]
    fn delete(
        &self,
        py: Python<'_>,
        fingerprint: &Bound<'_, PyAny>,
        id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let fp = convert::uint64(fingerprint, "fingerprint")?;
        match id {
            Some(id) => {
                let id = convert::id(id)?;
                self.with(py, |s| s.delete(fp, id))
            }
            None => self.with(py, |s| s.delete_fingerprint(fp)),
        }
    }

    /// Removes many pairs (or whole fingerprints) in one atomic commit;
    /// returns, per entry, whether it was stored.
    #[pyo3(signature = (fingerprints, ids=None))]
    fn delete_many<'py>(
        &self,
        py: Python<'py>,
        fingerprints: &Bound<'py, PyAny>,
        ids: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyArray1<bool>>> {
        let (fps, ids) = convert::entries(fingerprints, ids)?;
        let ops: Vec<Op> = match ids {
            Some(ids) => fps
                .into_iter()
                .zip(ids)
                .map(|(fingerprint, id)| Op::Delete { fingerprint, id })
                .collect(),
            None => fps
                .into_iter()
                .map(|fingerprint| Op::DeleteFingerprint { fingerprint })
                .collect(),
        };
        let done = self.with(py, move |s| s.apply(ops))?;
        Ok(done.into_pyarray(py))
    }

    /// Every stored fingerprint within distance `k` (default: the store's
    /// maximum) of `fingerprint`, by distance then fingerprint; with
    /// `max_ids`, at most that many ids a match (its smallest; none with
    /// 0), `id_count` counting them all.
    #[pyo3(signature = (fingerprint, k=None, max_ids=None))]
    fn query(
        &self,
        py: Python<'_>,
        fingerprint: &Bound<'_, PyAny>,
        k: Option<&Bound<'_, PyAny>>,
        max_ids: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<PyMatch>> {
        let fp = convert::uint64(fingerprint, "fingerprint")?;
        let k = self.distance(py, k)?;
        let limit = self::max_ids(max_ids)?;
        let found = self.with(py, |s| match limit {
            Some(n) => Ok(s
                .query_many_max_ids(&[fp], k, false, n)?
                .pop()
                .unwrap_or_default()),
            None => s.query(fp, k),
        })?;
        Ok(found.into_iter().map(PyMatch::from).collect())
    }

    /// Some stored fingerprint within distance `k`, the search stopping at
    /// the first found; `None` when there is none. With `max_ids`, at
    /// most that many of its ids (the smallest).
    #[pyo3(signature = (fingerprint, k=None, max_ids=None))]
    fn query_first(
        &self,
        py: Python<'_>,
        fingerprint: &Bound<'_, PyAny>,
        k: Option<&Bound<'_, PyAny>>,
        max_ids: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<PyMatch>> {
        let fp = convert::uint64(fingerprint, "fingerprint")?;
        let k = self.distance(py, k)?;
        let limit = self::max_ids(max_ids)?;
        let found = self.with(py, |s| match limit {
            Some(n) => Ok(s
                .query_many_max_ids(&[fp], k, true, n)?
                .pop()
                .and_then(|m| m.into_iter().next())),
            None => s.query_first(fp, k),
        })?;
        Ok(found.map(PyMatch::from))
    }

    /// Queries a whole array at once; returns `QueryMatches(query,
    /// fingerprint, distance, id)`, four numpy arrays with one row per
    /// (match, id); with `return_counts`, a pair of it and a uint64 array
    /// of how many ids each row's fingerprint has (more than its rows
    /// when `max_ids` cut them).
    /// With `volatility` (a `(n, 64)` uint8 array, as
    /// `Fingerprinter.volatility` gives per document), probabilistic
    /// queries within `recall` and `max_probes`, as `query_probabilistic`.
    /// With `first`, at most one match a query (the nearest when the array
    /// is large next to the store). With `max_ids`, rows for at most that
    /// many ids a match (its smallest; with 0, one row a match, id
    /// `NO_ID`). Arrays of 4,096 fingerprints or more are answered on
    /// `query_threads` threads.
    #[pyo3(signature = (fingerprints, k=None, first=false, volatility=None, recall=0.985, max_probes=None, max_ids=None, return_counts=false))]
    #[allow(clippy::too_many_arguments)]
    fn query_many<'py>(
        &self,
        py: Python<'py>,
        fingerprints: &Bound<'py, PyAny>,
        k: Option<&Bound<'py, PyAny>>,
        first: bool,
        volatility: Option<&Bound<'py, PyAny>>,
        recall: f64,
        max_probes: Option<&Bound<'py, PyAny>>,
        max_ids: Option<&Bound<'py, PyAny>>,
        return_counts: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        if convert::is_int(fingerprints) {
            return Err(errors::invalid_type(
                py,
                "query_many takes an array of fingerprints; for one, use query()",
            ));
        }
        let fps = convert::uint64s(fingerprints, "fingerprints")?;
        let k = self.distance(py, k)?;
        // Checked with or without a volatility: a bad budget is an error
        // even where it is not used.
        let budget = budget(py, recall, max_probes)?;
        let probabilistic = match volatility {
            Some(v) => Some((convert::volatilities(v, fps.len())?, budget)),
            None => None,
        };
        let limit = self::max_ids(max_ids)?;
        let columns = self.with(py, move |s| {
            let answers: Vec<Vec<simstore::Match>> = if let Some((v, budget)) = probabilistic {
                let queries: Vec<_> = fps.iter().copied().zip(v).collect();
                match limit {
                    Some(n) => s.query_probabilistic_many_max_ids(&queries, k, budget, first, n)?,
                    None => s.query_probabilistic_many(&queries, k, budget, first)?,
                }
            } else {
                // Every id when not limited (one batch path either way).
                s.query_many_max_ids(&fps, k, first, limit.unwrap_or(usize::MAX))?
            };
            Ok(Columns::of(&answers, return_counts))
        })?;
        let class = QUERY_MATCHES.get_or_try_init(py, || {
            py.import("simstore")?
                .getattr("QueryMatches")
                .map(Bound::unbind)
        })?;
        let matches = class.bind(py).call1((
            columns.query.into_pyarray(py),
            columns.fingerprint.into_pyarray(py),
            columns.distance.into_pyarray(py),
            columns.id.into_pyarray(py),
        ))?;
        if !return_counts {
            return Ok(matches);
        }
        Ok((matches, columns.id_count.into_pyarray(py))
            .into_pyobject(py)?
            .into_any())
    }

    /// Probabilistic query (Sood & Loguinov's PSM) on a one-table store:
    /// the runs of the query's header and of its likeliest flips, until
    /// an expected `recall` under the flip model or `max_probes`; every answer is a
    /// true match. Other stores answer exactly. With `max_ids`, at most
    /// that many ids a match (its smallest).
    #[pyo3(signature = (fingerprint, volatility, k=None, recall=0.985, max_probes=None, first=false, max_ids=None))]
    #[allow(clippy::too_many_arguments)]
    fn query_probabilistic(
        &self,
        py: Python<'_>,
        fingerprint: &Bound<'_, PyAny>,
        volatility: &Bound<'_, PyAny>,
        k: Option<&Bound<'_, PyAny>>,
        recall: f64,
        max_probes: Option<&Bound<'_, PyAny>>,
        first: bool,
        max_ids: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<PyMatch>> {
        let fp = convert::uint64(fingerprint, "fingerprint")?;
        let v = convert::volatility(volatility)?;
        let k = self.distance(py, k)?;
        let budget = budget(py, recall, max_probes)?;
        let limit = self::max_ids(max_ids)?;
        let mut found = self.with(py, |s| match limit {
            Some(n) => s.query_probabilistic_many_max_ids(&[(fp, v)], k, budget, first, n),
            None => s.query_probabilistic_many(&[(fp, v)], k, budget, first),
        })?;
        Ok(found
            .pop()
            .unwrap_or_default()
            .into_iter()
            .map(PyMatch::from)
            .collect())
    }

    /// The ids stored with `fingerprint`, increasing.
    fn ids(&self, py: Python<'_>, fingerprint: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
        let fp = convert::uint64(fingerprint, "fingerprint")?;
        self.with(py, |s| s.ids(fp))
    }

    /// Every stored pair as two numpy arrays, `(fingerprints, ids)`, one
    /// row per pair, increasing by fingerprint then id; a fingerprint
    /// stored without an id has one row with id [`NO_ID`].
    fn export<'py>(&self, py: Python<'py>) -> PyResult<(Column<'py>, Column<'py>)> {
        let (fps, ids) = self.with(py, |s| {
            let (mut fps, mut ids) = (Vec::new(), Vec::new());
            s.export(|fp, stored| {
                if stored.is_empty() {
                    fps.push(fp);
                    ids.push(NO_ID);
                }
                fps.extend(std::iter::repeat_n(fp, stored.len()));
                ids.extend_from_slice(stored);
                true
            })?;
            Ok((fps, ids))
        })?;
        Ok((fps.into_pyarray(py), ids.into_pyarray(py)))
    }

    /// Merges everything pending and drops what was deleted; returns what
    /// it did as a dict.
    fn compact<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.with(py, |s| s.compact())?;
        let d = PyDict::new(py);
        d.set_item("merged", r.merged)?;
        d.set_item("removed", r.removed)?;
        d.set_item("blocks_replaced", r.blocks_replaced)?;
        d.set_item("blocks_written", r.blocks_written)?;
        Ok(d)
    }

    /// Counts and sizes, with the keys of `simstore stats`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.with(py, |s| Ok(s.stats()))?;
        let d = PyDict::new(py);
        d.set_item("fingerprints", s.fingerprints)?;
        d.set_item("ids", s.ids)?;
        d.set_item("tables", s.tables)?;
        d.set_item("max_distance", s.max_distance)?;
        d.set_item("blocks", s.blocks)?;
        d.set_item("pending", s.pending)?;
        d.set_item("tombstones", s.tombstones)?;
        d.set_item("bytes_on_disk", s.bytes_on_disk)?;
        d.set_item("table_bytes", s.table_bytes)?;
        d.set_item(
            "prefix_bits",
            s.prefix_bits
                .iter()
                .map(|&b| u32::from(b))
                .collect::<Vec<_>>(),
        )?;
        d.set_item("plan_blocks", s.plan_blocks)?;
        d.set_item("expected_size", s.expected_size)?;
        d.set_item("compaction_error", s.compaction_error.clone())?;
        d.set_item("tables_in_memory", s.tables_in_memory)?;
        d.set_item("id_bytes", s.id_bytes)?;
        d.set_item("sketches", s.sketches)?;
        d.set_item("idf_documents", s.idf_documents)?;
        let levels = PyList::empty(py);
        for l in &s.levels {
            let level = PyDict::new(py);
            level.set_item("fingerprints", l.fingerprints)?;
            level.set_item("blocks", l.blocks)?;
            level.set_item("bytes", l.bytes)?;
            levels.append(level)?;
        }
        d.set_item("levels", levels)?;
        d.set_item("merge_bytes_written", s.merge_bytes_written)?;
        d.set_item("upper_set_bytes", s.upper_set_bytes)?;
        d.set_item("flat_bytes", s.flat_bytes)?;
        Ok(d)
    }

    /// Reads everything back and checks it; returns the report of
    /// `simstore verify` as a dict (`ok`, `problems`, counts).
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.with(py, |s| s.verify())?;
        let d = PyDict::new(py);
        d.set_item("ok", r.ok())?;
        d.set_item("tables", r.tables)?;
        d.set_item("levels", r.levels)?;
        d.set_item("blocks", r.blocks)?;
        d.set_item("fingerprints", r.fingerprints)?;
        d.set_item("sketches", r.sketches)?;
        d.set_item("problems", r.problems.clone())?;
        Ok(d)
    }

    /// Makes every acknowledged write durable now (an fsync), whatever the
    /// durability.
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| s.sync())
    }

    /// Writes RocksDB's in-memory buffers to table files, so the next open
    /// has less log to replay. Durability does not depend on it.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| s.flush())
    }

    /// Waits for background work, syncs and releases the store; raises
    /// what failed. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.owner.check(py, &self.path)?;
        let store = py.detach(|| self.inner.write().take());
        match store {
            Some(s) => py.detach(|| s.close()).or_raise(py),
            None => Ok(()),
        }
    }

    /// The store itself, open (a closed store raises, as its other calls).
    fn __enter__<'py>(slf: PyRef<'py, Self>, py: Python<'py>) -> PyResult<PyRef<'py, Self>> {
        slf.with(py, |_| Ok(()))?;
        Ok(slf)
    }

    #[pyo3(signature = (kind, _value, _traceback))]
    fn __exit__(
        &self,
        py: Python<'_>,
        kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let closed = self.close(py);
        // An exception from the block wins over one from closing.
        if kind.is_none() {
            closed?;
        }
        Ok(false)
    }

    /// The number of stored fingerprints.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.with(py, |s| Ok(s.stats().fingerprints))? as usize)
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { ", closed" } else { "" };
        format!("Store({:?}{state})", self.path.display().to_string())
    }
}

/// A numpy array of `u64`, one column of a result.
type Column<'py> = Bound<'py, PyArray1<u64>>;

/// Batch answers as columns, one row per (match, id); a fingerprint stored
/// without an id has one row with id [`NO_ID`].
struct Columns {
    query: Vec<i64>,
    fingerprint: Vec<u64>,
    distance: Vec<i32>,
    id: Vec<u64>,
    /// How many ids each row's fingerprint has; filled only when asked.
    id_count: Vec<u64>,
}

impl Columns {
    /// The rows of `answers`, with their fingerprints' id counts when
    /// `counts`.
    fn of(answers: &[Vec<simstore::Match>], counts: bool) -> Self {
        let rows: usize = answers.iter().flatten().map(|m| m.ids.len().max(1)).sum();
        let mut c = Columns {
            query: Vec::with_capacity(rows),
            fingerprint: Vec::with_capacity(rows),
            distance: Vec::with_capacity(rows),
            id: Vec::with_capacity(rows),
            id_count: Vec::with_capacity(if counts { rows } else { 0 }),
        };
        for (q, matches) in answers.iter().enumerate() {
            for m in matches {
                let mut push = |id: u64| {
                    c.query.push(q as i64);
                    c.fingerprint.push(m.fingerprint);
                    c.distance.push(m.distance as i32);
                    c.id.push(id);
                    if counts {
                        c.id_count.push(m.id_count as u64);
                    }
                };
                if m.ids.is_empty() {
                    push(NO_ID);
                }
                for &id in &m.ids {
                    push(id);
                }
            }
        }
        c
    }
}
