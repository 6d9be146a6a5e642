//! `Join` and `JoinIndex`: the per-task kernels of distributed joins
//! (`simstore.spark`), over numpy arrays, without the GIL.

use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;
use simstore::join::{Join, JoinIndex, Pair};

use crate::convert::{small, uint64, uint64s};
use crate::errors::{invalid, to_py};

type Columns<'py> = (
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u32>>,
);

fn columns(py: Python<'_>, pairs: Vec<Pair>) -> Columns<'_> {
    let mut a = Vec::with_capacity(pairs.len());
    let mut b = Vec::with_capacity(pairs.len());
    let mut d = Vec::with_capacity(pairs.len());
    for p in pairs {
        a.push(p.a);
        b.push(p.b);
        d.push(p.distance);
    }
    (a.into_pyarray(py), b.into_pyarray(py), d.into_pyarray(py))
}

/// The tables of a near-duplicate join: how fingerprints are routed to
/// tasks (one key per table) and the pairs a task finds among what it
/// received, each pair found by the first table whose prefix the two
/// share. `Join(max_distance, expected_size)` takes the plan a store of
/// that size would use (defaults: 3 and 1,000,000); `blocks` picks the plan
/// with that many blocks instead.
#[pyclass(name = "Join", module = "simstore._simstore", frozen)]
pub struct PyJoin {
    inner: Join,
}

impl PyJoin {
    fn table(&self, py: Python<'_>, table: &Bound<'_, PyAny>) -> PyResult<usize> {
        let tables = self.inner.tables();
        let t = small(table, "table", u64::MAX)?;
        if t >= tables as u64 {
            return Err(invalid(
                py,
                format!("table {t} does not exist: the join has {tables} tables"),
            ));
        }
        Ok(t as usize)
    }
}

#[pymethods]
impl PyJoin {
    #[new]
    #[pyo3(signature = (max_distance = None, expected_size = None, blocks = None))]
    fn new(
        py: Python<'_>,
        max_distance: Option<&Bound<'_, PyAny>>,
        expected_size: Option<&Bound<'_, PyAny>>,
        blocks: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let k = match max_distance {
            Some(k) => small(k, "max_distance", 255)? as u8,
            None => 3,
        };
        let inner = match (blocks, expected_size) {
            (Some(b), _) => Join::with_blocks(k, small(b, "blocks", 255)? as u8),
            (None, Some(n)) => Join::new(k, uint64(n, "expected_size")?),
            (None, None) => Join::new(k, 1_000_000),
        }
        .map_err(|e| to_py(py, e))?;
        Ok(Self { inner })
    }

    /// The largest distance a pair may have.
    #[getter]
    fn max_distance(&self) -> u8 {
        self.inner.max_distance()
    }

    /// How many blocks the 64 bits are split into.
    #[getter]
    fn blocks(&self) -> u8 {
        self.inner.blocks()
    }

    /// How many tables (copies of every fingerprint) the join routes.
    #[getter]
    fn tables(&self) -> usize {
        self.inner.tables()
    }

    /// The width in bits of table `table`'s keys.
    fn prefix_bits(&self, py: Python<'_>, table: &Bound<'_, PyAny>) -> PyResult<u8> {
        Ok(self.inner.prefix_bits(self.table(py, table)?))
    }

    /// The keys of `fps` (uint64) in table `table`, as a uint64 array:
    /// equal keys, same task.
    fn keys<'py>(
        &self,
        py: Python<'py>,
        fps: &Bound<'py, PyAny>,
        table: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let t = self.table(py, table)?;
        let fps = uint64s(fps, "fingerprints")?;
        let keys: Vec<u64> = py.detach(|| fps.iter().map(|&fp| self.inner.key(t, fp)).collect());
        Ok(keys.into_pyarray(py))
    }

    /// The pairs of distinct fingerprints of `fps` within the distance
    /// whose first shared table is `table`: three arrays `(a, b,
    /// distance)` with `a < b`, each pair once.
    fn self_pairs<'py>(
        &self,
        py: Python<'py>,
        fps: &Bound<'py, PyAny>,
        table: &Bound<'py, PyAny>,
    ) -> PyResult<Columns<'py>> {
        let t = self.table(py, table)?;
        let fps = uint64s(fps, "fingerprints")?;
        let pairs = py.detach(|| self.inner.self_pairs(t, &fps));
        Ok(columns(py, pairs))
    }

    /// The pairs `(a from left, b from right)`, `a != b`, within the
    /// distance whose first shared table is `table`: three arrays.
    fn cross_pairs<'py>(
        &self,
        py: Python<'py>,
        left: &Bound<'py, PyAny>,
        right: &Bound<'py, PyAny>,
        table: &Bound<'py, PyAny>,
    ) -> PyResult<Columns<'py>> {
        let t = self.table(py, table)?;
        let left = uint64s(left, "left")?;
        let right = uint64s(right, "right")?;
        let pairs = py.detach(|| self.inner.cross_pairs(t, &left, &right));
        Ok(columns(py, pairs))
    }

    /// An in-memory index of `fps` (every table sorted) that answers
    /// queries exactly.
    fn index(&self, py: Python<'_>, fps: &Bound<'_, PyAny>) -> PyResult<PyJoinIndex> {
        let fps = uint64s(fps, "fingerprints")?;
        let inner = py.detach(|| self.inner.index(&fps));
        Ok(PyJoinIndex { inner })
    }

    fn __repr__(&self) -> String {
        format!(
            "Join(max_distance={}, blocks={}, tables={})",
            self.inner.max_distance(),
            self.inner.blocks(),
            self.inner.tables()
        )
    }
}

/// A batch of fingerprints in every table of a `Join`, for matching many
/// queries against it (`Join.index`).
#[pyclass(name = "JoinIndex", module = "simstore._simstore", frozen)]
pub struct PyJoinIndex {
    inner: JoinIndex,
}

#[pymethods]
impl PyJoinIndex {
    /// Every indexed fingerprint within the distance of each query: three
    /// arrays `(query, fingerprint, distance)`, `query` being the position
    /// of the query in `queries`; each match once.
    fn query_many<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
    ) -> PyResult<Columns<'py>> {
        let queries = uint64s(queries, "queries")?;
        let (q, f, d) = py.detach(|| {
            let (mut q, mut f, mut d) = (Vec::new(), Vec::new(), Vec::new());
            let mut out = Vec::new();
            for (i, &query) in queries.iter().enumerate() {
                out.clear();
                self.inner.matches(query, &mut out);
                for &(fp, distance) in &out {
                    q.push(i as u64);
                    f.push(fp);
                    d.push(distance);
                }
            }
            (q, f, d)
        });
        Ok((q.into_pyarray(py), f.into_pyarray(py), d.into_pyarray(py)))
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}
