//! The `simstore` Python package's native module, `simstore._simstore`:
//! the store, batch queries over numpy arrays and the fingerprinter, on
//! the Rust library. Long calls run without the GIL; a `Store` may be used
//! from several threads at once.

use pyo3::prelude::*;

mod convert;
mod dedup;
mod errors;
mod fingerprint;
mod fork;
mod join;
mod log;
mod store;

#[pymodule]
fn _simstore(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("NO_ID", convert::NO_ID)?;
    m.add_class::<store::PyStore>()?;
    m.add_class::<store::PyMatch>()?;
    m.add_class::<fingerprint::PyFingerprinter>()?;
    m.add_class::<dedup::DedupSession>()?;
    m.add_class::<join::PyJoin>()?;
    m.add_class::<join::PyJoinIndex>()?;
    m.add_function(wrap_pyfunction!(log::scan_log, m)?)?;
    m.add_function(wrap_pyfunction!(log::log_name_hash, m)?)?;
    m.add_function(wrap_pyfunction!(log::log_decided_new, m)?)?;
    Ok(())
}
