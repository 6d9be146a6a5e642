//! A handle's health: whether it may still write, whether its table
//! families lag its state, whether it is closing, and the failures of its
//! background work. Flags only ever go from clear to set within a handle's
//! life (a reopen starts clear).

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::error::{Error, Result};

/// The health flags and background failures of one handle.
#[derive(Default)]
pub(crate) struct Health {
    /// Set when a write failed and may or may not have reached the disk:
    /// memory can no longer be trusted to match it, so writes are refused.
    poisoned: AtomicBool,
    /// Set when a commit through table files failed before every file
    /// went in: the table families lag the state in memory, so reads of
    /// tables kept on disk, and `verify`, are refused until the store is
    /// reopened (which finishes the commit). Tables held in memory still
    /// answer: a block they have not read is one the commit did not change.
    tables_lag: AtomicBool,
    /// Set when the handle closes: background work stops.
    stopping: AtomicBool,
    /// The message of the last background failure, until that work next
    /// succeeds (for `Stats::compaction_error`).
    last_failure: Mutex<Option<String>>,
    /// A background failure not yet returned to a caller.
    unreported: Mutex<Option<Error>>,
}

impl Health {
    /// Refuses every later write.
    pub fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
    }

    /// Fails with [`Error::Poisoned`] once a write failed.
    pub fn check_writable(&self) -> Result<()> {
        match self.poisoned.load(Ordering::Acquire) {
            true => Err(Error::Poisoned),
            false => Ok(()),
        }
    }

    /// Records that the table families lag the state (see the field).
    pub fn set_tables_lag(&self) {
        self.tables_lag.store(true, Ordering::Release);
    }

    /// Whether the table families lag the state.
    pub fn tables_lag(&self) -> bool {
        self.tables_lag.load(Ordering::Acquire)
    }

    /// Asks background work to stop.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Whether background work should stop: the handle is closing, or
    /// poisoned (nothing it would write could be committed).
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire) || self.poisoned.load(Ordering::Acquire)
    }

    /// Records a failure of background work `task`: its message until the
    /// work next succeeds, and the error for the next call that returns it.
    pub fn background_failed(&self, task: &'static str, error: Error) {
        *self.last_failure.lock() = Some(format!("{task}: {error}"));
        *self.unreported.lock() = Some(Error::Background {
            task,
            source: Box::new(error),
        });
    }

    /// Records that background work succeeded: the last failure's message
    /// is cleared (an unreported error stays to be returned).
    pub fn background_succeeded(&self) {
        *self.last_failure.lock() = None;
    }

    /// The message of the last background failure, while it stands.
    pub fn last_failure(&self) -> Option<String> {
        self.last_failure.lock().clone()
    }

    /// The background failure not yet returned to a caller, as an error
    /// (once).
    pub fn take_background_error(&self) -> Result<()> {
        match self.unreported.lock().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
