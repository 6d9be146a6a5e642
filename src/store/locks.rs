//! The two locks that order a handle's changes, and what they guard.
//!
//! Lock order, outermost first: [`Locks::merging`], then
//! [`Locks::commit`], then the state's `RwLock`. A thread holding one may
//! take the ones after it, never one before it, so no two threads can
//! each hold a lock the other waits for. The other locks of a handle (the
//! write queue, a queued request's turn, the health flags, the compactor's
//! signal, the warming's gate, the merge journal, the time of the last
//! sync) are leaves: no lock is taken while one of them is held, except a
//! request's turn under the write queue (queue, then turn). `ARCHITECTURE.md` lists the threads
//! that take them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::{Mutex, MutexGuard};

use super::options::BUFFERED_SYNC_INTERVAL;

/// The merge lock, the commit lock, the write generation, the journal of
/// fingerprints written during a merge, the time of the last
/// buffered-mode sync and the count of writers held back.
pub(crate) struct Locks {
    merging: Mutex<()>,
    held_back: AtomicUsize,
    commit: Mutex<()>,
    generation: AtomicU64,
    journal: Mutex<Option<Vec<u64>>>,
    last_sync: Mutex<Instant>,
}

impl Default for Locks {
    fn default() -> Self {
        Self {
            merging: Mutex::new(()),
            held_back: AtomicUsize::new(0),
            commit: Mutex::new(()),
            generation: AtomicU64::new(0),
            journal: Mutex::new(None),
            last_sync: Mutex::new(Instant::now()),
        }
    }
}

impl Locks {
    /// Serialises the work that rewrites or reads every table: a
    /// compaction, a bulk insert, the warming, `verify`. Taken first.
    pub fn merging(&self) -> MutexGuard<'_, ()> {
        self.merging.lock()
    }

    /// [`merging`](Self::merging), unless another thread holds it.
    pub fn try_merging(&self) -> Option<MutexGuard<'_, ()>> {
        self.merging.try_lock()
    }

    /// Counts a writer held back until merges take the pending
    /// fingerprints down, until the guard is dropped.
    pub fn hold_back(&self) -> HeldBack<'_> {
        self.held_back.fetch_add(1, Ordering::AcqRel);
        HeldBack(&self.held_back)
    }

    /// Whether some writer is held back (see [`hold_back`](Self::hold_back)).
    pub fn writers_held_back(&self) -> bool {
        self.held_back.load(Ordering::Acquire) > 0
    }

    /// The commit lock: its holder is the only writer of the database and
    /// of the state. Taken after [`merging`](Self::merging), if at all.
    pub fn commit(&self) -> MutexGuard<'_, ()> {
        self.commit.lock()
    }

    /// How many write groups have been committed; a compaction that sees
    /// it unchanged across its merge knows nothing was inserted or
    /// deleted meanwhile.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Counts a committed write group (under the state's write lock).
    pub fn next_generation(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Starts the journal: from now on, until [`take_journal`], every
    /// committed write group records the fingerprints it changed. Every
    /// merge starts it (under the state's read lock, with the snapshot it
    /// merges) so that its commit re-reads, under the commit lock, only
    /// the placement of the fingerprints those writes changed, and a merge
    /// into level 0 redoes only their ids.
    ///
    /// [`take_journal`]: Self::take_journal
    pub fn start_journal(&self) {
        *self.journal.lock() = Some(Vec::new());
    }

    /// Records fingerprints a write group changed, if the journal runs
    /// (under the state's write lock, so the journal holds exactly the
    /// write groups a state read after its start did not see).
    pub fn record(&self, fps: impl IntoIterator<Item = u64>) {
        if let Some(journal) = self.journal.lock().as_mut() {
            journal.extend(fps);
        }
    }

    /// What the journal recorded so far, increasing and distinct, leaving
    /// it running and empty (`None` if it was not running).
    pub fn drain_journal(&self) -> Option<Vec<u64>> {
        let mut fps = std::mem::take(self.journal.lock().as_mut()?);
        fps.sort_unstable();
        fps.dedup();
        Some(fps)
    }

    /// Stops the journal and returns what it recorded, increasing and
    /// distinct (`None` if it was not running).
    pub fn take_journal(&self) -> Option<Vec<u64>> {
        let mut fps = self.journal.lock().take()?;
        fps.sort_unstable();
        fps.dedup();
        Some(fps)
    }

    /// In buffered mode, whether a write now should be fsynced: the first
    /// at least [`BUFFERED_SYNC_INTERVAL`] after the last sync (which it
    /// then counts as done).
    pub fn sync_due(&self) -> bool {
        let mut last = self.last_sync.lock();
        let due = last.elapsed() >= BUFFERED_SYNC_INTERVAL;
        if due {
            *last = Instant::now();
        }
        due
    }

    /// Records a sync done now.
    pub fn synced(&self) {
        *self.last_sync.lock() = Instant::now();
    }
}

/// A writer held back (see [`Locks::hold_back`]).
pub(crate) struct HeldBack<'a>(&'a AtomicUsize);

impl Drop for HeldBack<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
