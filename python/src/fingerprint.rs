//! `simstore.Fingerprinter`: simhash of text and HTML, one document or many
//! on all cores without the GIL.

use numpy::{IntoPyArray, PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use simstore::simhash::{Fingerprinter, Simhash};

use crate::convert;
use crate::errors::{invalid, invalid_type};

/// Computes 64-bit simhash fingerprints of documents (Charikar's simhash
/// over word shingles weighted by term frequency), as `simstore hash` does.
#[pyclass(frozen, module = "simstore", name = "Fingerprinter")]
pub struct PyFingerprinter {
    inner: Fingerprinter,
    shingle: usize,
    char_shingle: Option<usize>,
    stop_words: bool,
}

/// Text of a document: `html` read for its visible text by the parser, as
/// `hash --html` and `dedup --html`.
pub fn visible(doc: &str, html: bool) -> std::borrow::Cow<'_, str> {
    if html {
        simstore::simhash::visible_text(doc).into()
    } else {
        doc.into()
    }
}

/// [`visible`] by the one-pass scanner sketches are defined with, as
/// `dedup --html --similarity`.
pub fn visible_fast(doc: &str, html: bool) -> std::borrow::Cow<'_, str> {
    if html {
        simstore::simhash::visible_text_fast(doc).into()
    } else {
        doc.into()
    }
}

impl PyFingerprinter {
    /// The library's fingerprinter.
    pub fn inner(&self) -> &Fingerprinter {
        &self.inner
    }

    fn simhash(&self, doc: &str, html: bool) -> Option<Simhash> {
        self.inner.fingerprint(&visible(doc, html))
    }
}

#[pymethods]
impl PyFingerprinter {
    #[new]
    #[pyo3(
        signature = (shingle=None, char_shingle=None, stop_words=false),
        text_signature = "(shingle=3, char_shingle=None, stop_words=False)"
    )]
    fn new(
        py: Python<'_>,
        shingle: Option<&Bound<'_, PyAny>>,
        char_shingle: Option<&Bound<'_, PyAny>>,
        stop_words: bool,
    ) -> PyResult<Self> {
        let shingle = match shingle {
            Some(w) => convert::small(w, "shingle", 1024)? as usize,
            None => simstore::simhash::DEFAULT_SHINGLE,
        };
        if shingle == 0 {
            return Err(invalid(py, "shingle must be at least 1"));
        }
        let char_shingle = match char_shingle {
            Some(w) => {
                let w = convert::small(w, "char_shingle", 1024)? as usize;
                if w == 0 {
                    return Err(invalid(py, "char_shingle must be at least 1"));
                }
                Some(w)
            }
            None => None,
        };
        Ok(Self {
            inner: Fingerprinter::new()
                .shingle(shingle)
                .char_shingle(char_shingle)
                .stop_words(stop_words),
            shingle,
            char_shingle,
            stop_words,
        })
    }

    /// Word-shingle width.
    #[getter]
    fn shingle(&self) -> usize {
        self.shingle
    }

    /// Character-shingle width, when characters are shingled instead of
    /// words.
    #[getter]
    fn char_shingle(&self) -> Option<usize> {
        self.char_shingle
    }

    /// Whether stop words are dropped before shingling.
    #[getter]
    fn stop_words(&self) -> bool {
        self.stop_words
    }

    /// The fingerprint of `text`; `None` when it has no words.
    fn fingerprint(&self, py: Python<'_>, text: PyBackedStr) -> Option<u64> {
        py.detach(|| self.simhash(&text, false).map(|s| s.fingerprint))
    }

    /// The fingerprint of the visible text of `html`; `None` when it has
    /// no words.
    fn fingerprint_html(&self, py: Python<'_>, html: PyBackedStr) -> Option<u64> {
        py.detach(|| self.simhash(&html, true).map(|s| s.fingerprint))
    }

    /// The 64 signed weight sums behind the fingerprint's bits (bit `j` is
    /// set when `weights[j] > 0`; bits with small `|weights[j]|` are the
    /// likeliest to flip under small edits), as a float64 array; `None`
    /// when the document has no words.
    #[pyo3(signature = (text, html=false))]
    fn weights<'py>(
        &self,
        py: Python<'py>,
        text: PyBackedStr,
        html: bool,
    ) -> Option<Bound<'py, PyArray1<f64>>> {
        let s = py.detach(|| self.simhash(&text, html))?;
        Some(s.weights.to_vec().into_pyarray(py))
    }

    /// Each bit's probability to differ in a near-duplicate (what
    /// `simstore hash --weights` prints), as 64 bytes, byte `j` for bit
    /// `j` holding `round(-8·log2 p)`: what probabilistic queries take
    /// beside the fingerprint. `None` when the document has no words.
    #[pyo3(signature = (text, html=false))]
    fn volatility<'py>(
        &self,
        py: Python<'py>,
        text: PyBackedStr,
        html: bool,
    ) -> Option<Bound<'py, pyo3::types::PyBytes>> {
        let s = py.detach(|| self.simhash(&text, html))?;
        let v = simstore::simhash::Volatility::from_weights(&s.weights);
        Some(pyo3::types::PyBytes::new(py, &v.to_bytes()))
    }

    /// The fingerprints of many documents, computed on all cores without
    /// the GIL, as a uint64 array in input order. A document without words
    /// gets 0 (the simhash of nothing); `fingerprint()` tells them apart.
    #[pyo3(signature = (texts, html=false))]
    fn fingerprint_many<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        html: bool,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let docs = texts_of(texts, "fingerprint_many")?;
        let out = py.detach(|| {
            map_parallel(&docs, |d| {
                self.simhash(d, html).map_or(0, |s| s.fingerprint)
            })
        });
        Ok(out.into_pyarray(py))
    }

    /// [`volatility`](Self::volatility) of many documents on all cores
    /// without the GIL: a `(n, 64)` uint8 array, row `i` for document `i`
    /// (what `Store.query_many(..., volatility=...)` takes). A document
    /// without words gets every bit at probability ½ (bytes of 8).
    #[pyo3(signature = (texts, html=false))]
    fn volatility_many<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        html: bool,
    ) -> PyResult<Bound<'py, numpy::PyArray2<u8>>> {
        let docs = texts_of(texts, "volatility_many")?;
        let n = docs.len();
        let rows = py.detach(|| {
            map_parallel(&docs, |d| {
                let weights = self.simhash(d, html).map_or([0.0; 64], |s| s.weights);
                Some(simstore::simhash::Volatility::from_weights(&weights).to_bytes())
            })
        });
        let flat: Vec<u8> = rows.into_iter().flatten().flatten().collect();
        flat.into_pyarray(py).reshape([n, 64])
    }

    fn __repr__(&self) -> String {
        format!(
            "Fingerprinter(shingle={}, char_shingle={}, stop_words={})",
            self.shingle,
            self.char_shingle
                .map_or("None".to_string(), |w| w.to_string()),
            if self.stop_words { "True" } else { "False" }
        )
    }
}

/// The texts of a sequence of `str` (not one `str`), borrowed.
fn texts_of(texts: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<PyBackedStr>> {
    let py = texts.py();
    if texts.is_instance_of::<pyo3::types::PyString>() {
        return Err(invalid_type(
            py,
            format!("{what} takes a sequence of texts, not one str"),
        ));
    }
    if texts.is_instance_of::<pyo3::types::PyBytes>() {
        return Err(invalid_type(
            py,
            format!("{what} takes a sequence of texts, not bytes"),
        ));
    }
    let mut docs: Vec<PyBackedStr> = Vec::with_capacity(texts.len().unwrap_or(0));
    for (i, t) in texts.try_iter()?.enumerate() {
        let t = t?;
        docs.push(t.extract().map_err(|_| {
            if t.is_instance_of::<pyo3::types::PyString>() {
                // A str that does not extract holds a lone surrogate.
                return crate::errors::invalid(
                    py,
                    format!("texts[{i}] is not valid Unicode (it holds a lone surrogate)"),
                );
            }
            invalid_type(
                py,
                format!(
                    "texts[{i}] must be a str, not {}",
                    t.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ),
            )
        })?);
    }
    Ok(docs)
}

/// `f` of every item on all cores, results in input order.
pub fn map_parallel<T: Sync, R: Send + Default + Clone>(
    items: &[T],
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut out = vec![R::default(); items.len()];
    if threads <= 1 || items.len() < 64 {
        for (o, item) in out.iter_mut().zip(items) {
            *o = f(item);
        }
        return out;
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for (outs, ins) in out.chunks_mut(chunk).zip(items.chunks(chunk)) {
            let f = &f;
            scope.spawn(move || {
                for (o, item) in outs.iter_mut().zip(ins) {
                    *o = f(item);
                }
            });
        }
    });
    out
}
