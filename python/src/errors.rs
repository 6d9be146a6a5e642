//! `simstore::Error` as Python exceptions: one class per variant, defined
//! in `simstore/errors.py` (where they can also derive from `ValueError`
//! and `OSError`) and raised from here with their details as attributes.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

/// The `simstore.errors` module, imported once.
static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// An exception of class `simstore.errors.<class>` with `message`.
pub fn raise(py: Python<'_>, class: &str, message: impl Into<String>) -> PyErr {
    build(py, class, message.into(), &[])
}

/// `simstore.InvalidArgumentError(message)`.
pub fn invalid(py: Python<'_>, message: impl Into<String>) -> PyErr {
    raise(py, "InvalidArgumentError", message)
}

/// `simstore.InvalidTypeError(message)`.
pub fn invalid_type(py: Python<'_>, message: impl Into<String>) -> PyErr {
    raise(py, "InvalidTypeError", message)
}

/// `simstore.ClosedError`.
pub fn closed(py: Python<'_>) -> PyErr {
    raise(py, "ClosedError", "the store is closed")
}

/// `simstore.LockedError` for a handle used in a process forked from the
/// one (`owner`) that opened it.
pub fn forked(py: Python<'_>, path: &std::path::Path, owner: u32) -> PyErr {
    let message = format!(
        "the store at {} is held by process {owner}, which this process was forked from; \
         open it in this process once that one has closed it",
        path.display()
    );
    build(
        py,
        "LockedError",
        message,
        &[("path", path.to_path_buf().to_py(py))],
    )
}

fn build(py: Python<'_>, class: &str, message: String, attributes: &[(&str, Py<PyAny>)]) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let module = ERRORS.get_or_try_init(py, || {
            PyModule::import(py, "simstore.errors").map(Bound::unbind)
        })?;
        let value = module.bind(py).getattr(class)?.call1((message.clone(),))?;
        for (name, v) in attributes {
            value.setattr(*name, v.bind(py))?;
        }
        Ok(PyErr::from_value(value))
    })();
    // Only a broken installation (no `simstore.errors`) gets here.
    made.unwrap_or_else(|e| e)
}

/// The Python exception of a library error.
pub fn to_py(py: Python<'_>, error: simstore::Error) -> PyErr {
    use simstore::Error as E;
    let message = error.to_string();
    let obj = |v: &dyn ToPy| v.to_py(py);
    let (class, attributes): (&str, Vec<(&str, Py<PyAny>)>) = match &error {
        E::NotAStore { path } => ("NotAStoreError", vec![("path", obj(path))]),
        E::AlreadyExists { path } => ("AlreadyExistsError", vec![("path", obj(path))]),
        E::Locked { path } => ("LockedError", vec![("path", obj(path))]),
        E::UnsupportedVersion {
            what,
            supported,
            found,
        } => (
            "UnsupportedVersionError",
            vec![
                ("what", obj(what)),
                ("supported", obj(supported)),
                ("found", obj(found)),
            ],
        ),
        E::IncompatibleOptions {
            option,
            stored,
            requested,
        } => (
            "IncompatibleOptionsError",
            vec![
                ("option", obj(option)),
                ("stored", obj(stored)),
                ("requested", obj(requested)),
            ],
        ),
        E::DistanceTooLarge { asked, supported } => (
            "DistanceTooLargeError",
            vec![("asked", obj(asked)), ("supported", obj(supported))],
        ),
        E::Plan(_) => ("PlanError", vec![]),
        E::InvalidArgument(_) => ("InvalidArgumentError", vec![]),
        E::Corrupt { location, reason } => (
            "CorruptError",
            vec![
                ("location", obj(&location.to_string())),
                ("reason", obj(reason)),
            ],
        ),
        E::Io { path, .. } => ("FileSystemError", vec![("path", obj(path))]),
        E::Storage { context, .. } => ("StorageError", vec![("context", obj(context))]),
        E::Poisoned => ("PoisonedError", vec![]),
        E::Background { task, .. } => ("BackgroundError", vec![("task", obj(task))]),
        _ => ("Error", vec![]),
    };
    let err = build(py, class, message, &attributes);
    if let E::Background { source, .. } = error {
        let cause = to_py(py, *source);
        err.set_cause(py, Some(cause));
    }
    err
}

/// Values that become exception attributes.
trait ToPy {
    fn to_py(&self, py: Python<'_>) -> Py<PyAny>;
}

impl ToPy for std::path::PathBuf {
    fn to_py(&self, py: Python<'_>) -> Py<PyAny> {
        self.to_string_lossy()
            .into_pyobject(py)
            .unwrap()
            .into_any()
            .unbind()
    }
}

impl ToPy for &'static str {
    fn to_py(&self, py: Python<'_>) -> Py<PyAny> {
        self.into_pyobject(py).unwrap().into_any().unbind()
    }
}

impl ToPy for String {
    fn to_py(&self, py: Python<'_>) -> Py<PyAny> {
        self.into_pyobject(py).unwrap().into_any().unbind()
    }
}

impl ToPy for u32 {
    fn to_py(&self, py: Python<'_>) -> Py<PyAny> {
        self.into_pyobject(py).unwrap().into_any().unbind()
    }
}

/// `?` on library results inside binding code.
pub trait OrRaise<T> {
    /// The result with the error as its Python exception.
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> OrRaise<T> for simstore::Result<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
