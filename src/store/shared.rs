//! The state shared by a store handle, its background compactor and its
//! concurrent callers.

use std::path::PathBuf;

use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use super::health::Health;
use super::locks::Locks;
use super::options::{Durability, Options, DEFAULT_MIN_MERGE_THRESHOLD, MERGE_FRACTION};
use super::state::State;
use super::write::Queue;
use crate::error::{Error, Result};
use crate::format::keys;
use crate::format::records::{self, Counters};
use crate::plan::Plan;
use crate::storage::Db;

/// Shared internals of a [`Store`](super::Store).
pub(crate) struct Shared {
    pub db: Db,
    pub dir: PathBuf,
    pub plan: Plan,
    pub block_size: usize,
    pub expected_size: u64,
    /// Whether a similarity sketch is kept per pair.
    pub sketches: bool,
    /// The document frequencies kept with the store, if any.
    pub idf: Option<crate::simhash::Idf>,
    pub options: Options,
    /// What queries read. Held for reading during a query; for writing
    /// only to apply a committed change.
    pub state: RwLock<State>,
    /// The merge and commit locks (see [`Locks`] for their order).
    pub locks: Locks,
    /// Requests waiting to be committed, and whether a caller leads.
    pub queue: Mutex<Queue>,
    /// Whether the handle may write, whether its families lag, whether it
    /// is closing, and its background failures.
    pub health: Health,
    /// Wakes the background compactor, or stops it.
    pub compactor: super::compactor::Signal,
    /// Paces probes' reads of blocks not held yet while they are read
    /// behind the open.
    pub gate: std::sync::Arc<super::warm::Gate>,
    /// Threads a large query batch may use.
    pub query_threads: usize,
}

impl Shared {
    /// Whether writes are fsynced before they are acknowledged.
    pub fn sync_writes(&self) -> bool {
        self.options.durability == Durability::Sync
    }

    /// Fails once the store has been poisoned by an uncertain write.
    pub fn check_writable(&self) -> Result<()> {
        self.health.check_writable()
    }

    /// The failure of background work not yet returned to a caller, as an
    /// error (once).
    pub fn take_background_error(&self) -> Result<()> {
        self.health.take_background_error()
    }

    /// The state, read-locked, for reading its tables' blocks: refused
    /// with [`Error::Poisoned`] when it keeps tables on disk and the table
    /// families lag it (see [`Health::tables_lag`]).
    pub fn readable_state(&self) -> Result<RwLockReadGuard<'_, State>> {
        let state = self.state.read();
        if self.health.tables_lag() && state.tables.iter().any(|t| !t.in_memory()) {
            return Err(Error::Poisoned);
        }
        Ok(state)
    }

    /// Fails with [`Error::Poisoned`] when the table families lag the
    /// state (see [`Health::tables_lag`]): what is stored cannot
    /// be checked against it.
    pub fn check_families_current(&self) -> Result<()> {
        if self.health.tables_lag() {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    /// Fails (and refuses further writes) when the store directory was
    /// deleted or replaced under the running process: RocksDB would keep
    /// writing to unlinked files and every later write would be lost.
    pub fn check_directory(&self) -> Result<()> {
        if self.dir.join(crate::format::marker::FILE_NAME).is_file() {
            return Ok(());
        }
        self.health.poison();
        Err(Error::Storage {
            context: "committing a write",
            message: format!(
                "the store directory {} was removed or replaced",
                self.dir.display()
            ),
        })
    }

    /// Adds the counters record to a batch.
    pub fn put_counters(
        &self,
        batch: &mut crate::storage::Batch,
        counters: &Counters,
    ) -> Result<()> {
        batch.put_cf(
            self.db.default_family()?,
            keys::COUNTERS,
            records::encode_counters(counters),
        );
        Ok(())
    }

    /// Writes a batch with the store's durability. A failed write may
    /// still reach the disk (say, the WAL record was written but the fsync
    /// failed), so memory can no longer be trusted to match it: the store
    /// refuses further writes until it is reopened.
    ///
    /// In buffered mode the first write at least
    /// [`BUFFERED_SYNC_INTERVAL`](super::BUFFERED_SYNC_INTERVAL) after the last sync is fsynced, so a power
    /// cut loses at most the writes acknowledged since then.
    pub fn write_or_poison(&self, batch: crate::storage::Batch) -> Result<()> {
        let sync = self.sync_writes() || self.locks.sync_due();
        self.write_poisoning(batch, sync)
    }

    /// Writes a batch fsynced whatever the store's durability (poisoning
    /// the store on failure, as [`write_or_poison`](Self::write_or_poison)).
    pub fn write_synced_or_poison(&self, batch: crate::storage::Batch) -> Result<()> {
        if !self.sync_writes() {
            self.locks.synced();
        }
        self.write_poisoning(batch, true)
    }

    fn write_poisoning(&self, batch: crate::storage::Batch, sync: bool) -> Result<()> {
        let result = self.db.write(batch, sync);
        if result.is_err() {
            self.health.poison();
        }
        result
    }

    /// Whether enough is pending or tombstoned for the background
    /// compactor to merge: the merge threshold, or by default the larger of
    /// 65,536 and 1/64 of the stored fingerprints.
    ///
    /// Also when the overlay of ids outside the id blocks holds twice the
    /// threshold (new ids of fingerprints in the tables, removed ids; a
    /// pending fingerprint's pairs are merged with it).
    pub fn merge_due(&self) -> bool {
        let threshold = self.merge_threshold();
        let state = self.state.read();
        state.pending.len() + state.tombstones.len() >= threshold
            || state.overlay.len() >= threshold.saturating_mul(2)
    }

    /// The merge threshold now: as configured, or the larger of 65,536 and
    /// 1/64 of the stored fingerprints.
    pub fn merge_threshold(&self) -> usize {
        self.options.merge_threshold.unwrap_or_else(|| {
            let stored = self.state.read().fingerprints();
            DEFAULT_MIN_MERGE_THRESHOLD.max((stored / MERGE_FRACTION) as usize)
        })
    }

    /// Wakes the compactor when enough fingerprints are pending.
    pub fn maybe_wake_compactor(&self) {
        if self.options.manual_compaction {
            return;
        }
        if self.merge_due() {
            self.compactor.wake();
        }
    }
}
