//! Reading blocks into memory behind the open.
//!
//! A store opens its tables from their index records (each block's key,
//! length and count), so the open reads no block. A probe reads a block it
//! needs that is not in memory yet; the warming reads every table in key
//! order (a scan, far cheaper per block than a probe's point read),
//! decodes the blocks no probe has read four at a time and holds them. It
//! also compares what it reads with the index: a block missing,
//! disagreeing or unlisted is corrupt from then on.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::shared::Shared;
use crate::error::{Error, Location, Result};
use crate::format::keys;
use crate::storage::Db;
use crate::table::{Codebook, Loader, TableState};

/// The fingerprint a block key names.
pub(crate) fn block_key(k: &[u8]) -> Result<u64> {
    keys::parse_fingerprint(k).ok_or_else(|| {
        Error::corrupt(
            Location::Record { family: "table" },
            format!("block key of {} bytes", k.len()),
        )
    })
}

/// Blocks read between two looks at `stop`.
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
        stopped = read.is_multiple_of(STOP_EVERY) && stop();
        Ok(!stopped)
    })?;
    Ok((!stopped).then(|| loader.finish()))
}

/// Reads every unread block of every table into memory, the tables spread
/// over the machine's cores.
/// Stops early when the store is closing. The compaction lock is held
/// throughout, so what the scans see is what the tables' indexes list
/// (compactions wait; writes go on, into the pending set).
pub(crate) fn warm(shared: &Shared) -> Result<()> {
    let stop = || shared.stopping.load(Ordering::Acquire);
    let _one_at_a_time = shared.compaction.lock();
    let snapshot = Arc::clone(&shared.state.read().tables);
    let read = |t: usize| -> Result<Option<Vec<(u64, String)>>> {
        let table = &snapshot[t];
        if !table.has_unread() || stop() {
            return Ok(Some(Vec::new()));
        }
        let held = |key| table.holds(key);
        let fresh = read_table(&shared.db, t, Arc::clone(table.codes()), &held, &stop)?;
        Ok(fresh.map(|fresh| table.fill_from(&fresh)))
    };
    let mut problems = Vec::new();
    for found in super::parallel::map_indexed(snapshot.len(), super::parallel::cores(), read) {
        match found? {
            Some(found) => problems.push(found),
            None => return Ok(()),
        }
    }
    drop(snapshot);
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
    release_free_memory();
    Ok(())
}

/// Returns the memory freed by the warming (the blocks read twice while
/// it ran, the scans' buffers) to the system: the allocator would keep it.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: glibc's `malloc_trim` only releases free memory of the
        // allocator's own arenas; it takes no pointers.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// Starts warming the tables on a thread of its own; `None` when every
/// block is already held.
pub(crate) fn spawn(shared: &Arc<Shared>) -> std::io::Result<Option<JoinHandle<()>>> {
    if !shared
        .state
        .read()
        .tables
        .iter()
        .any(TableState::has_unread)
    {
        return Ok(None);
    }
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("simstore-warm".into())
        .spawn(move || {
            if let Err(e) = warm(&shared) {
                *shared.compaction_error.lock() = Some(format!("reading blocks into memory: {e}"));
            }
        })
        .map(Some)
}
