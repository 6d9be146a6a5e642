//! The native half of `simstore.dedup`: a store opened as `simstore dedup`
//! opens it, and batches of documents fingerprinted on all cores and
//! decided by the library's [`Deduper`], the command line's decisions.
//! The decision log (names, reruns) is kept by the Python half.

use std::path::PathBuf;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use simstore::dedup::{Candidate, Deduper};
use simstore::simhash::{Fingerprinter, Sketch};
use simstore::{Options, Store};

use crate::convert;
use crate::errors::{self, invalid, OrRaise};
use crate::fingerprint::{map_parallel, visible, visible_fast, PyFingerprinter};
use crate::fork::Owner;

/// The largest distance a store created for a similarity threshold gets
/// (as the command line).
const MAX_DISTANCE: u32 = 8;

/// One decision: `(fingerprint, earlier)` where earlier is `None` or
/// `(seq, fingerprint, distance, similarity)`; a document without words
/// is `None` as a whole.
type Decided = Option<(u64, Option<(u64, u64, u32, Option<f64>)>)>;

/// A store being deduplicated into.
#[pyclass(frozen, module = "simstore._simstore", name = "DedupSession")]
pub struct DedupSession {
    store: Mutex<Option<Store>>,
    path: PathBuf,
    owner: Owner,
    k: Option<u32>,
    similarity: Option<f64>,
    max_candidates: usize,
    fingerprinter: Fingerprinter,
    html: bool,
}

impl Drop for DedupSession {
    fn drop(&mut self) {
        // Without a lock: in a forked child it may be held for good.
        self.owner.release(self.store.get_mut().take());
    }
}

#[pymethods]
impl DedupSession {
    /// Opens the store in `path` or creates it when absent or empty: with
    /// a similarity threshold, keeping sketches, with the distance the
    /// threshold needs (or `k`).
    #[new]
    #[pyo3(signature = (path, k, similarity, fingerprinter, html, max_candidates=None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        k: Option<&Bound<'_, PyAny>>,
        similarity: Option<f64>,
        fingerprinter: &PyFingerprinter,
        html: bool,
        max_candidates: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let k = match k {
            Some(k) => Some(convert::small(k, "k", 64)? as u32),
            None => None,
        };
        let max_candidates = match max_candidates {
            Some(_) if similarity.is_none() => {
                return Err(invalid(py, "max_candidates needs similarity"));
            }
            Some(n) => convert::at_least_one(n, "max_candidates")?,
            None => simstore::dedup::MAX_CANDIDATES,
        };
        if let Some(j) = similarity.filter(|j| !(0.0..=1.0).contains(j)) {
            return Err(invalid(
                py,
                format!("similarity {j} is not between 0 and 1"),
            ));
        }
        let options = Options::new().sketches(similarity.is_some());
        let store = py
            .detach(|| {
                let empty = std::fs::read_dir(&path).map_or(true, |mut e| e.next().is_none());
                if !empty {
                    return Store::open(&path, &options);
                }
                let options = match (similarity, k) {
                    (Some(j), _) => options
                        .max_distance(k.unwrap_or_else(|| Sketch::distance_for(j, MAX_DISTANCE))),
                    (None, Some(k)) => options.max_distance(k),
                    (None, None) => options,
                };
                Store::create(&path, &options)
            })
            .or_raise(py)?;
        // Checked now, not at the first batch.
        Deduper::new(&store, k, similarity).or_raise(py)?;
        Ok(Self {
            store: Mutex::new(Some(store)),
            path,
            owner: Owner::here(),
            k,
            similarity,
            max_candidates,
            fingerprinter: fingerprinter.inner().clone(),
            html,
        })
    }

    /// The query distance used.
    #[getter]
    fn k(&self, py: Python<'_>) -> PyResult<u32> {
        self.owner.check(py, &self.path)?;
        let store = self.store.lock();
        let store = store.as_ref().ok_or_else(|| errors::closed(py))?;
        Ok(Deduper::new(store, self.k, self.similarity)
            .or_raise(py)?
            .k())
    }

    /// Fingerprints `texts` and decides the ones with words, numbered from
    /// `first_seq` in order, storing the new ones.
    fn decide(
        &self,
        py: Python<'_>,
        texts: Vec<PyBackedStr>,
        first_seq: u64,
    ) -> PyResult<Vec<Decided>> {
        self.owner.check(py, &self.path)?;
        let result = py.detach(|| -> simstore::Result<Option<Vec<Decided>>> {
            let guard = self.store.lock();
            let Some(store) = guard.as_ref() else {
                return Ok(None);
            };
            let idf = store.idf();
            let candidates: Vec<Option<Candidate>> = map_parallel(&texts, |t| {
                if self.similarity.is_some() {
                    let text = visible_fast(t, self.html);
                    let sketch = self.fingerprinter.sketch(&text)?;
                    Some(Candidate {
                        fingerprint: sketch.fingerprint(),
                        sketch: Some(sketch),
                        volatility: None,
                    })
                } else {
                    let text = visible(t, self.html);
                    let s = match idf {
                        Some(idf) => self.fingerprinter.fingerprint_idf(&text, idf),
                        None => self.fingerprinter.fingerprint(&text),
                    }?;
                    Some(Candidate {
                        fingerprint: s.fingerprint,
                        sketch: None,
                        volatility: None,
                    })
                }
            });
            let worded: Vec<Candidate> = candidates.iter().flatten().cloned().collect();
            let dedup = Deduper::new(store, self.k, self.similarity)?
                .max_candidates(self.max_candidates)?;
            let mut decided = dedup.decide(first_seq, &worded)?.into_iter();
            Ok(Some(
                candidates
                    .iter()
                    .map(|c| {
                        let c = c.as_ref()?;
                        let earlier = decided.next().flatten();
                        Some((
                            c.fingerprint,
                            earlier.map(|e| (e.seq, e.fingerprint, e.distance, e.similarity)),
                        ))
                    })
                    .collect(),
            ))
        });
        result.or_raise(py)?.ok_or_else(|| errors::closed(py))
    }

    /// What to warn of when the store holds more pairs than `logged`
    /// decisions, `logged_new` of them new, stored
    /// ([`simstore::dedup::log::other_pairs`]); `None` when nothing.
    fn other_pairs(
        &self,
        py: Python<'_>,
        logged: u64,
        logged_new: u64,
    ) -> PyResult<Option<String>> {
        self.owner.check(py, &self.path)?;
        let stats = py.detach(|| self.store.lock().as_ref().map(Store::stats));
        let stats = stats.ok_or_else(|| errors::closed(py))?;
        Ok(simstore::dedup::log::other_pairs(
            stats.ids,
            stats.sketches,
            logged,
            logged_new,
        ))
    }

    /// Closes the store; raises what failed.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.owner.check(py, &self.path)?;
        let store = py.detach(|| self.store.lock().take());
        match store {
            Some(s) => py.detach(|| s.close()).or_raise(py),
            None => Ok(()),
        }
    }
}
