//! Compaction: merging pending fingerprints into the compressed blocks
//! and removing tombstoned ones, off the query path.
//!
//! The merge is computed from snapshots without holding any lock that
//! queries or writers need. The commit then takes the commit lock, fixes
//! up fingerprints that were inserted or deleted meanwhile (so no write
//! made during the merge is lost or resurrected), writes one atomic batch
//! covering every table, and swaps the new table snapshots in.

mod commit;
mod id_blocks;
mod tables;

use std::sync::Arc;

use crate::error::Result;
use crate::store::ids::{self, IdTable, Overlay};
use crate::store::levels::Job;
use crate::store::pending::Pending;
use crate::store::shared::Shared;
use crate::table::TableState;
use commit::commit;
pub(crate) use id_blocks::{prepare_ids, with_fold, write_ids, IdsInput};
pub(crate) use tables::{cleared_output, merge_all, swapped, tables_batch, write_tables};

/// What one compaction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactionReport {
    /// Pending fingerprints merged into the tables.
    pub merged: usize,
    /// Tombstoned fingerprints removed from the tables.
    pub removed: usize,
    /// Blocks rewritten or dropped, over all tables.
    pub blocks_replaced: usize,
    /// Blocks written, over all tables.
    pub blocks_written: usize,
}

/// Runs one compaction of everything pending and tombstoned now, every
/// level merged into level 0 (see [`Job::full`]).
pub(crate) fn compact(shared: &Shared) -> Result<CompactionReport> {
    let _one_at_a_time = shared.locks.merging();
    shared.check_writable()?;
    let levels = shared.state.read().levels();
    let report = run(shared, &Job::full(levels));
    // A merge's batch is not fsynced of its own (see
    // `Shared::write_merge_or_poison`); one asked for is on disk when this
    // returns, in sync mode.
    let report = report.and_then(|r| {
        if shared.sync_writes() {
            shared.db.flush_wal()?;
        }
        Ok(r)
    });
    super::flats::install(shared);
    super::memory::release_free_memory(shared);
    report
}

/// Runs the merges due (see [`levels::due`](super::levels::due)) until
/// none is: the background compactor's work.
pub(crate) fn compact_due(shared: &Shared) -> Result<CompactionReport> {
    let _one_at_a_time = shared.locks.merging();
    let mut total = CompactionReport::default();
    let mut rewrote_level_0 = false;
    let done = merge_while_due(shared, &mut total, &mut rewrote_level_0);
    // Merges into the smaller levels free little, and the next ones reuse
    // it; trimming after each (every merge threshold of writes) would hold
    // the allocator's locks against the writers for nothing. A flat
    // sequence a merge left to be built after it is built even when a
    // later merge failed.
    if rewrote_level_0 {
        super::flats::install(shared);
        super::memory::release_free_memory(shared);
    }
    done.map(|()| total)
}

/// [`compact_due`]'s merges, added up in `total`; `rewrote_level_0` is set
/// when one merged into level 0.
pub(super) fn merge_while_due(
    shared: &Shared,
    total: &mut CompactionReport,
    rewrote_level_0: &mut bool,
) -> Result<()> {
    // A merge makes the next one due at most once per level; the bound
    // only guards against a policy that would not settle.
    for _ in 0..4 * super::levels::LEVELS {
        shared.check_writable()?;
        let Some(job) = shared.due_job() else { break };
        *rewrote_level_0 |= job.target == 0;
        let report = run(shared, &job)?;
        total.merged += report.merged;
        total.removed += report.removed;
        total.blocks_replaced += report.blocks_replaced;
        total.blocks_written += report.blocks_written;
        // Writers held back by pending fingerprints run the merges that
        // free them themselves, at their own priority (see `help_merge`).
        if shared.health.stopping() || shared.locks.writers_held_back() {
            break;
        }
    }
    Ok(())
}

/// Runs the merges due into the levels above level 0 (those that take the
/// pending fingerprints in) on the calling thread, if no other merge runs,
/// until fewer than `limit` fingerprints are pending or one into level 0
/// is next; whether it ran any. Called by writers held back by
/// [`Options::max_pending`](super::Options::max_pending): the background
/// compactor runs at a lower CPU priority, and behind RocksDB's flushes of
/// a large commit it could take seconds to free them. Merges the writers
/// do not wait for (the top into a run, once the pending ones are in it)
/// are left to the compactor.
pub(crate) fn help_merge(shared: &Shared, limit: usize) -> Result<bool> {
    let Some(_one_at_a_time) = shared.locks.try_merging() else {
        return Ok(false);
    };
    let mut ran = false;
    for _ in 0..4 * super::levels::LEVELS {
        shared.check_writable()?;
        if shared.state.read().pending.len() < limit {
            break;
        }
        match shared.due_job() {
            Some(job) if job.target != 0 => {
                run(shared, &job)?;
                ran = true;
            }
            _ => break,
        }
    }
    Ok(ran)
}

/// What a job merges, read from one state.
pub(super) struct Gathered {
    pub(super) tables: Arc<Vec<TableState>>,
    pub(super) per_level: usize,
    pub(super) id_table: Arc<IdTable>,
    pub(super) overlay: Overlay,
    pub(super) fold: Vec<u64>,
    /// Pending fingerprints moved into the target level.
    pub(super) pending: Vec<u64>,
    /// Everything added to the target level: `pending` and the source
    /// levels' fingerprints not tombstoned; increasing.
    pub(super) adds: Vec<u64>,
    /// Tombstoned fingerprints of the target and source levels (they
    /// leave the tables); increasing.
    pub(super) removes: Vec<u64>,
    /// The upper levels' set, when built (see [`upper`](super::upper)).
    pub(super) upper: Option<Arc<Pending>>,
    pub(super) generation: u64,
    /// Whether writers were switched to the other `ids` family at the
    /// snapshot (see [`IdFamilies::switch`]).
    ///
    /// [`IdFamilies::switch`]: super::id_families::IdFamilies::switch
    pub(super) switched: bool,
}

/// Reads what `job` merges from the state, under its read lock (the
/// source levels' fingerprints are decoded outside it, from the same
/// snapshot).
pub(super) fn gather(shared: &Shared, job: &Job) -> Result<Gathered> {
    let plan = &shared.plan;
    let with_ids = job.target == 0;
    // A merge into level 0 switches writers to the other `ids` family
    // when that one is empty, between two write groups: every pair
    // written before is in the snapshot below, and every write after is
    // in the journal (started first: a write in both is reconciled
    // twice, which changes nothing).
    let switched = with_ids && {
        let _between_groups = shared.locks.commit();
        shared.locks.start_journal();
        shared.id_families.switch()
    };
    let (tables, per_level, id_table, overlay, fold, pending, tombstones, upper, generation) = {
        let state = shared.state.read();
        let mut tombstones: Vec<u64> = state.tombstones.iter().copied().collect();
        tombstones.sort_unstable();
        // The fingerprints written from here on are the only ones whose
        // placement the commit has to read again (see `commit`); a merge
        // into level 0 also redoes their ids (see `write_ids`), from the
        // overlay below.
        if !with_ids {
            shared.locks.start_journal();
        }
        (
            Arc::clone(&state.tables),
            state.per_level,
            Arc::clone(&state.id_table),
            if with_ids {
                state.overlay.clone()
            } else {
                Overlay::default()
            },
            if job.fold {
                ids::to_fold(plan, &state)?
            } else {
                Vec::new()
            },
            if job.pending {
                state.pending.all(plan)
            } else {
                Vec::new()
            },
            tombstones,
            state.upper.clone(),
            shared.locks.generation(),
        )
    };
    let mut moving = Vec::new();
    for &l in &job.sources {
        tables[l * per_level].append_all(&mut moving)?;
    }
    moving.sort_unstable();
    let target0 = &tables[job.target * per_level];
    let mut removes = Vec::new();
    for &x in &tombstones {
        if moving.binary_search(&x).is_ok() || target0.contains(x)? {
            removes.push(x);
        }
    }
    moving.retain(|x| removes.binary_search(x).is_err());
    let mut adds = moving;
    if !pending.is_empty() {
        adds.extend_from_slice(&pending);
        adds.sort_unstable();
    }
    Ok(Gathered {
        tables,
        per_level,
        id_table,
        overlay,
        fold,
        pending,
        adds,
        removes,
        upper,
        generation,
        switched,
    })
}

/// Runs one merge (the merge lock held).
pub(super) fn run(shared: &Shared, job: &Job) -> Result<CompactionReport> {
    let _journal = StopJournal(shared);
    let g = gather(shared, job)?;
    let sources_empty = job
        .sources
        .iter()
        .all(|&l| g.tables[l * g.per_level].keys().is_empty());
    if g.adds.is_empty() && g.removes.is_empty() && g.fold.is_empty() && sources_empty {
        if g.switched && g.overlay.len() == 0 {
            // The family writers left was empty at the snapshot, and
            // writers only delete there since.
            let _between_groups = shared.locks.commit();
            shared.id_families.other_emptied();
        }
        return Ok(CompactionReport::default());
    }
    let adds0 = with_fold(&g.adds, &g.fold);
    let ids = IdsInput {
        table: &g.id_table,
        overlay: &g.overlay,
        extra: &[],
        adds0: &adds0,
        fresh: &g.adds,
        pending: &g.pending,
    };
    let ids = (job.target == 0).then_some(&ids);
    let mut outputs = merge_all(shared, &g.tables, job.target, &g.adds, &g.removes, ids)?;
    // The overlay's reconciliation, against the snapshot and outside the
    // commit lock: the commit only corrects it for what was written since.
    let prepared = match ids {
        Some(ids) => Some(prepare_ids(&g.tables, &outputs, ids, &g.removes)?),
        None => None,
    };
    if let (Some(pause), Some(_)) = (&shared.options.pause_merge, ids) {
        pause.hold(super::pause::Point::Merged);
    }
    for &l in &job.sources {
        for t in 0..g.per_level {
            let old = &g.tables[l * g.per_level + t];
            outputs.push((l * g.per_level + t, cleared_output(old)));
        }
    }
    let upper = g
        .upper
        .as_ref()
        .map(|old| {
            let (pending, removes) = (&g.pending, &g.removes);
            super::upper::after_merge(
                &shared.plan,
                old,
                &g.tables,
                g.per_level,
                job,
                pending,
                removes,
            )
        })
        .transpose()?;
    commit(shared, job, &g, outputs, ids.zip(prepared), upper)
}

/// Stops the journal of writes (see [`Locks::start_journal`]) when a merge
/// ends, whether or not it committed.
///
/// [`Locks::start_journal`]: super::locks::Locks::start_journal
pub(super) struct StopJournal<'a>(&'a Shared);

impl Drop for StopJournal<'_> {
    fn drop(&mut self) {
        self.0.locks.take_journal();
    }
}
