//! Reading blocks into memory behind the open.
//!
//! A store opens its tables from their index records (each block's key,
//! length and count), so the open reads no block. A probe reads a block it
//! needs that is not in memory yet; the warming reads every table in key
//! order (a scan, far cheaper per block than a probe's point read),
//! decodes the blocks no probe has read four at a time and holds them. It
//! also compares what it reads with the index: a block missing,
//! disagreeing or unlisted is corrupt from then on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use super::shared::Shared;
use crate::error::{Error, Location, Result};
use crate::format::keys;
use crate::storage::{Db, TableBlocks};
use crate::table::{BlockSource, Codebook, Loader, TableState};

/// Paces the reads of blocks not held yet while the warming runs. A probe
/// reading one block through RocksDB costs a few times what the warming's
/// scan spends on it, so once probes have read [`Gate::set_blocks`]' share
/// of the blocks that way (a few queries' worth at most sizes: a store
/// answers its first queries right after the open), further reads wait for
/// the warming to finish instead of competing with it for the cores.
#[derive(Debug)]
pub(crate) struct Gate {
    reads: AtomicU64,
    budget: AtomicU64,
    running: Mutex<bool>,
    done: Condvar,
}

/// Blocks probes may read before waiting for the warming: this fraction
/// of all blocks, and at least [`MIN_READS`].
const READ_SHARE: u64 = 64;
const MIN_READS: u64 = 4096;

impl Gate {
    /// A gate that lets every read through until told the block count.
    pub(crate) fn new() -> Self {
        Self {
            reads: AtomicU64::new(0),
            budget: AtomicU64::new(u64::MAX),
            running: Mutex::new(false),
            done: Condvar::new(),
        }
    }

    /// Sets the read budget from the number of blocks of all tables.
    pub(crate) fn set_blocks(&self, blocks: u64) {
        self.budget
            .store((blocks / READ_SHARE).max(MIN_READS), Ordering::Relaxed);
    }

    /// Called before a probe reads a block: past the budget, waits while
    /// the warming runs.
    fn pace(&self) {
        if self.reads.fetch_add(1, Ordering::Relaxed) < self.budget.load(Ordering::Relaxed) {
            return;
        }
        let mut running = self.running.lock();
        while *running {
            self.done.wait(&mut running);
        }
    }

    /// Marks the warming running until the returned guard is dropped.
    fn running(&self) -> impl Drop + '_ {
        *self.running.lock() = true;
        Finished(self)
    }
}

/// Ends a [`Gate`]'s running state when dropped.
struct Finished<'a>(&'a Gate);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        *self.0.running.lock() = false;
        self.0.done.notify_all();
    }
}

/// The blocks of a table held in memory that are not read yet: read
/// through RocksDB (bypassing its block cache) as probes need them, paced
/// by the store's [`Gate`].
#[derive(Debug)]
pub(crate) struct LazyBlocks {
    pub blocks: TableBlocks,
    pub gate: Arc<Gate>,
}

impl BlockSource for LazyBlocks {
    fn fetch(&self, table: usize, key: u64) -> Result<Arc<[u8]>> {
        self.gate.pace();
        self.blocks.fetch(table, key)
    }
}

/// The fingerprint a block key names.
pub(crate) fn block_key(k: &[u8]) -> Result<u64> {
    keys::parse_fingerprint(k).ok_or_else(|| {
        Error::corrupt(
            Location::Record { family: "table" },
            format!("block key of {} bytes", k.len()),
        )
    })
}

/// Blocks read between two looks at `stop`, and in a piece the warming
/// hands to [`Filling::fill`](crate::table::Filling::fill) (a piece's
/// slots are the read's only copy of them).
const STOP_EVERY: usize = 4096;

/// Reads every block of table `t` into memory (see [`Loader`]) except
/// those `held` says are held already (only their lengths and counts are
/// kept); `None` when `stop` said so before the end.
pub(crate) fn read_table(
    db: &Db,
    t: usize,
    codes: Arc<Codebook>,
    held: &dyn Fn(u64) -> bool,
    stop: &dyn Fn() -> bool,
) -> Result<Option<TableState>> {
    let mut loader = Loader::new(t, codes);
    let read = scan_table(db, t, &mut loader, held, stop, &mut |_| {})?;
    Ok(read.then(|| loader.finish()))
}

/// Scans table `t`'s blocks into `loader` (see [`read_table`]), calling
/// `every` every [`STOP_EVERY`] blocks; false when `stop` ended it early.
fn scan_table(
    db: &Db,
    t: usize,
    loader: &mut Loader,
    held: &dyn Fn(u64) -> bool,
    stop: &dyn Fn() -> bool,
    every: &mut dyn FnMut(&mut Loader),
) -> Result<bool> {
    let mut read = 0usize;
    let mut stopped = false;
    db.scan(db.table(t)?, &[], |k, v| {
        let key = block_key(k)?;
        if held(key) {
            loader.skip(key, v);
        } else {
            loader.push(key, v);
        }
        read += 1;
        if read.is_multiple_of(STOP_EVERY) {
            every(loader);
            stopped = stop();
        }
        Ok(!stopped)
    })?;
    Ok(!stopped)
}

/// Fills `table` from a full read of its stored blocks, a piece at a time
/// (see [`Filling`](crate::table::Filling)); the problems found, or
/// `None` when `stop` ended the read early.
fn fill_table(
    db: &Db,
    t: usize,
    table: &TableState,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Vec<(u64, String)>>> {
    let mut loader = Loader::new(t, Arc::clone(table.codes()));
    let mut filling = table.filling();
    let held = |key| table.holds(key);
    let mut every = |loader: &mut Loader| filling.fill(&loader.take_piece());
    if !scan_table(db, t, &mut loader, &held, stop, &mut every)? {
        return Ok(None);
    }
    filling.fill(&loader.take_piece());
    Ok(Some(filling.finish()))
}

/// Reads every unread block of every table into memory, the tables spread
/// over the machine's cores.
/// Stops early when the store is closing. The compaction lock is held
/// throughout, so what the scans see is what the tables' indexes list
/// (compactions wait; writes go on, into the pending set).
///
/// A poisoned store is not read: a commit through table files that failed
/// part way leaves the families behind the tables in memory until the next
/// open finishes it (see [`files`](super::files)), and the scans would
/// take the difference for damage. Its blocks not held yet are read by the
/// probes that need them: such a block is one the commit did not change.
pub(crate) fn warm(shared: &Shared) -> Result<()> {
    let stop = || shared.health.stopping();
    let _one_at_a_time = shared.locks.merging();
    // Everything the scans need from the state is taken now: probes may
    // wait for the warming from `running` on, holding the state's read
    // lock, and a writer waiting for the write lock behind them would
    // hold up another read by the warming (the lock is fair), so the
    // warming takes the lock no more until it is done.
    let (snapshot, id_table) = {
        let state = shared.state.read();
        (Arc::clone(&state.tables), Arc::clone(&state.id_table))
    };
    let running = shared.gate.running();
    let read = |t: usize| -> Result<Option<Vec<(u64, String)>>> {
        let table = &snapshot[t];
        if !table.has_unread() || stop() {
            return Ok(Some(Vec::new()));
        }
        fill_table(&shared.db, t, table, &stop)
    };
    // The id blocks are read beside the tables, as one more job.
    let job = |j: usize| -> Result<Option<Vec<(u64, String)>>> {
        if j < snapshot.len() {
            return read(j);
        }
        if let Some(table0) = snapshot.first() {
            if id_table.has_unread() && !stop() {
                fill_ids(&shared.db, table0, &id_table, &stop)?;
            }
        }
        Ok(Some(Vec::new()))
    };
    let mut problems = Vec::new();
    let jobs = super::parallel::map_indexed(snapshot.len() + 1, super::parallel::cores(), job);
    for found in jobs.into_iter().take(snapshot.len() + 1) {
        match found? {
            Some(found) => problems.push(found),
            None => return Ok(()),
        }
    }
    problems.truncate(snapshot.len());
    drop((running, snapshot));
    // Blocks held already by probes when the scan found them unlisted
    // neighbours are marked in a new snapshot of their tables.
    if problems.iter().any(|p| !p.is_empty()) {
        let mut state = shared.state.write();
        let settled = state
            .tables
            .iter()
            .zip(&problems)
            .map(|(table, found)| table.settled(found))
            .collect();
        state.tables = Arc::new(settled);
    }
    super::filters::install(shared);
    super::flats::install(shared);
    super::upper::install(shared);
    super::memory::release_free_memory(shared);
    Ok(())
}

/// Holds every id block of `id_table` (the id blocks of `table0`) not
/// held yet, from a scan of the id blocks family; a table-0 block without
/// one is marked missing.
fn fill_ids(
    db: &Db,
    table0: &TableState,
    id_table: &super::ids::IdTable,
    stop: &dyn Fn() -> bool,
) -> Result<()> {
    let block_keys = table0.keys();
    let mut next = 0usize;
    let mut read = 0usize;
    let mut stopped = false;
    db.scan(db.family(keys::ID_BLOCKS_FAMILY)?, &[], |k, v| {
        let key = block_key(k)?;
        while next < block_keys.len() && block_keys[next] < key {
            id_table.mark_missing(next);
            next += 1;
        }
        if block_keys.get(next) == Some(&key) {
            id_table.fill(next, v, table0.count(next));
            next += 1;
        }
        read += 1;
        if read.is_multiple_of(STOP_EVERY) {
            stopped = stop();
        }
        Ok(!stopped)
    })?;
    if !stopped {
        for j in next..block_keys.len() {
            id_table.mark_missing(j);
        }
    }
    Ok(())
}

/// Starts warming the tables on a thread of its own; `None` when every
/// block is already held.
pub(crate) fn spawn(shared: &Arc<Shared>) -> std::io::Result<Option<JoinHandle<()>>> {
    let unread = {
        let state = shared.state.read();
        state.tables.iter().any(TableState::has_unread) || state.id_table.has_unread()
    };
    if !unread {
        return Ok(None);
    }
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("simstore-warm".into())
        .spawn(move || {
            if let Err(e) = warm(&shared) {
                shared
                    .health
                    .background_failed("reading of blocks into memory", e);
            }
        })
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Reads within the budget pass at once; past it they wait while the
    /// warming runs, and go on when it ends (also when it ends early).
    #[test]
    fn the_gate_holds_reads_past_the_budget_while_warming() {
        let gate = Arc::new(Gate::new());
        gate.set_blocks(0);
        let running = gate.running();
        for _ in 0..MIN_READS {
            gate.pace();
        }
        let waiter = {
            let gate = Arc::clone(&gate);
            std::thread::spawn(move || gate.pace())
        };
        std::thread::sleep(Duration::from_millis(200));
        assert!(!waiter.is_finished(), "a read past the budget did not wait");
        drop(running);
        waiter.join().unwrap();
        // Not warming: no wait, whatever the count.
        gate.pace();
    }
}
