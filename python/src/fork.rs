//! Handles in a process forked from the one that opened them.
//!
//! A store is held by the process that opened it. A child made by
//! `fork()` (as `multiprocessing` does by default on Linux) gets a copy of
//! the handle's memory but none of its background threads, and shares its
//! files with the parent: a write there could wait forever for a thread
//! that is not in the child, or write past the parent's lock. A handle
//! used in such a child raises `LockedError`, and its copy is forgotten
//! there rather than closed, which would stop threads and release files
//! that belong to the parent.

use std::path::Path;

use pyo3::prelude::*;

use crate::errors;

/// The process that opened a handle.
#[derive(Clone, Copy)]
pub struct Owner(u32);

impl Owner {
    /// The calling process.
    pub fn here() -> Self {
        Self(std::process::id())
    }

    /// Whether the calling process is not the one that opened the handle.
    pub fn forked(self) -> bool {
        std::process::id() != self.0
    }

    /// `LockedError` when the calling process is not the handle's, checked
    /// before any lock of the handle is taken (a lock held by one of the
    /// parent's threads at the fork stays held in the child).
    pub fn check(self, py: Python<'_>, path: &Path) -> PyResult<()> {
        if self.forked() {
            return Err(errors::forked(py, path, self.0));
        }
        Ok(())
    }

    /// Drops `value` in the handle's process, forgets it in a forked one.
    pub fn release<T>(self, value: T) {
        if self.forked() {
            std::mem::forget(value);
        }
    }
}
