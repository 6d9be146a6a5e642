//! The state shared by a store handle, its background compactor and its
//! concurrent callers.

use std::path::PathBuf;

use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use super::health::Health;
use super::locks::Locks;
use super::options::{Durability, Options, DEFAULT_MIN_MERGE_THRESHOLD};
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
    /// Bytes of blocks and id blocks merges have written since the open.
    pub merge_bytes: std::sync::atomic::AtomicU64,
    /// Set by the first write: the levels read at open get their
    /// membership filters (see [`want_filters`](Self::want_filters)).
    pub filters_wanted: std::sync::atomic::AtomicBool,
    /// The machine's physical memory (`u64::MAX` when unknown).
    pub physical_memory: u64,
    /// Sketches read recently.
    pub sketch_cache: super::sketch_cache::SketchCache,
    /// Which of the two `ids` families writers put pairs into.
    pub id_families: super::id_families::IdFamilies,
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

    /// Writes a merge's batch, which changes where fingerprints are kept
    /// but not what is stored: not fsynced of its own in sync mode (it
    /// holds writers off while it is written). It is on disk before any
    /// later write is acknowledged there, as the log is synced up to each
    /// of those; a power cut before one loses the merge and nothing
    /// stored. In buffered mode, as [`write_or_poison`](Self::write_or_poison).
    pub fn write_merge_or_poison(&self, batch: crate::storage::Batch) -> Result<()> {
        let sync = !self.sync_writes() && self.locks.sync_due();
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

    /// The merge due now (see [`levels::due`](super::levels::due)), if
    /// any: a level past its capacity, enough pending or tombstoned, or
    /// an overlay of ids outside the id blocks of level-0 fingerprints
    /// (new ids of fingerprints in level 0, removed ids) of twice the
    /// threshold, which is folded into level 0's id blocks.
    pub fn due_job(&self) -> Option<super::levels::Job> {
        let threshold = self.merge_threshold();
        let state = self.state.read();
        let sizes = state.level_sizes();
        let pending = state.pending.len() as u64;
        let job = super::levels::due(
            &sizes,
            pending,
            state.tombstones.len() as u64,
            state.fingerprints(),
            threshold as u64,
        );
        if job.is_some() {
            return job;
        }
        // The pairs of pending fingerprints and of other levels' are in
        // the overlay too (about one each), and no fold takes them out.
        let outside: u64 = pending + sizes.iter().skip(1).sum::<u64>();
        let fold_due = state.overlay.len() as u64
            >= outside.saturating_add((threshold as u64).saturating_mul(2));
        fold_due.then(super::levels::Job::fold)
    }

    /// Whether a merge is due (see [`due_job`](Self::due_job)).
    pub fn merge_due(&self) -> bool {
        self.due_job().is_some()
    }

    /// The merge threshold: as configured, or
    /// [`DEFAULT_MIN_MERGE_THRESHOLD`].
    pub fn merge_threshold(&self) -> usize {
        self.options
            .merge_threshold
            .unwrap_or(DEFAULT_MIN_MERGE_THRESHOLD)
    }

    /// The pending fingerprints at which writes wait (see
    /// [`Options::max_pending`]), the tables holding `table_fingerprints`.
    pub fn max_pending(&self, table_fingerprints: u64) -> usize {
        // Never below the threshold: below it no merge falls due to free
        // the writers.
        let threshold = self.merge_threshold();
        self.options
            .max_pending
            .unwrap_or_else(|| {
                super::options::default_max_pending(
                    threshold,
                    table_fingerprints,
                    self.plan.tables().len(),
                    self.physical_memory,
                )
            })
            .max(threshold)
    }

    /// Waits while the pending fingerprints reach [`max_pending`](Self::max_pending)
    /// and the background compactor runs (backpressure on writers that
    /// outrun the merges); returns at once otherwise, or when the store is
    /// closing or has failed.
    pub fn throttle(&self) {
        if self.options.manual_compaction {
            return;
        }
        let limit = {
            let state = self.state.read();
            let limit = self.max_pending(state.table_fingerprints());
            if state.pending.len() < limit {
                return;
            }
            limit
        };
        let _held_back = self.locks.hold_back();
        while self.state.read().pending.len() >= limit {
            // A failing compactor would never free the writers: its error
            // goes to them instead (see `Health`).
            if self.health.stopping() || self.health.last_failure().is_some() {
                return;
            }
            // The merges that free writers are run by one of them when no
            // other merge runs (see `compact::help_merge`); the compactor
            // is asked for the others.
            match super::compact::help_merge(self, limit) {
                Ok(true) => continue,
                Ok(false) => self.compactor.wake(),
                Err(e) => {
                    self.health
                        .background_failed("merge of pending fingerprints", e);
                    return;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Asks for the membership filters of the levels read at open, which
    /// only writes use (see `filters`): the first write of a handle has
    /// them built, by the background compactor or, without one, by the
    /// writer itself (which then waits for them). A store that only
    /// answers queries never builds them. Called with no lock held.
    pub fn want_filters(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.filters_wanted.load(Relaxed) || self.filters_wanted.swap(true, Relaxed) {
            return;
        }
        if self.options.manual_compaction {
            let _one_at_a_time = self.locks.merging();
            super::filters::install(self);
        } else {
            self.compactor.wake();
        }
    }

    /// Counts bytes a merge wrote.
    pub fn count_merge_bytes(&self, bytes: u64) {
        self.merge_bytes
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
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
