//! Compaction: merging pending fingerprints into the compressed blocks
//! and removing tombstoned ones, off the query path.
//!
//! The merge is computed from snapshots without holding any lock that
//! queries or writers need. The commit then takes the commit lock, fixes
//! up fingerprints that were inserted or deleted meanwhile (so no write
//! made during the merge is lost or resurrected), writes one atomic batch
//! covering every table, and swaps the new table snapshots in.

use std::mem::replace;
use std::sync::Arc;

use super::files::{self, Merged, MergedIds};
use super::id_families::IdsWriter;
use super::ids::{self, Base, IdBuilder, IdTable, Overlay, Reconcile, Reconciled, Truth, Walk};
use super::levels::Job;
use super::pending::Pending;
use super::shared::Shared;
use super::state::Retired;
use crate::error::Result;
use crate::format::{keys, records};
use crate::table::{merge, merge_observed, MergeOutput, TableState};

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
fn merge_while_due(
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
struct Gathered {
    tables: Arc<Vec<TableState>>,
    per_level: usize,
    id_table: Arc<IdTable>,
    overlay: Overlay,
    fold: Vec<u64>,
    /// Pending fingerprints moved into the target level.
    pending: Vec<u64>,
    /// Everything added to the target level: `pending` and the source
    /// levels' fingerprints not tombstoned; increasing.
    adds: Vec<u64>,
    /// Tombstoned fingerprints of the target and source levels (they
    /// leave the tables); increasing.
    removes: Vec<u64>,
    /// The upper levels' set, when built (see [`upper`](super::upper)).
    upper: Option<Arc<Pending>>,
    generation: u64,
    /// Whether writers were switched to the other `ids` family at the
    /// snapshot (see [`IdFamilies::switch`]).
    ///
    /// [`IdFamilies::switch`]: super::id_families::IdFamilies::switch
    switched: bool,
}

/// Reads what `job` merges from the state, under its read lock (the
/// source levels' fingerprints are decoded outside it, from the same
/// snapshot).
fn gather(shared: &Shared, job: &Job) -> Result<Gathered> {
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
fn run(shared: &Shared, job: &Job) -> Result<CompactionReport> {
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
struct StopJournal<'a>(&'a Shared);

impl Drop for StopJournal<'_> {
    fn drop(&mut self) {
        self.0.locks.take_journal();
    }
}

/// A table emptied, as a merge output.
pub(crate) fn cleared_output(old: &TableState) -> Merged {
    Merged {
        out: crate::table::cleared(old),
        filed: None,
        ids: None,
    }
}

/// What the merge of table 0 builds the id blocks of its new blocks from
/// (see [`ids`]).
pub(crate) struct IdsInput<'a> {
    /// The id blocks of the tables merged.
    pub table: &'a IdTable,
    /// The overlay as of the tables merged.
    pub overlay: &'a Overlay,
    /// Pairs being inserted, sorted.
    pub extra: &'a [(u64, u64)],
    /// Table 0's adds: the adds and the fingerprints whose id blocks are
    /// rewritten to fold their overlay entries in (see [`with_fold`]).
    pub adds0: &'a [u64],
    /// Fingerprints of `adds0` known not to be in level 0 (pending ones
    /// and other levels' moving into it), increasing: their ids need no
    /// lookup of an id block.
    pub fresh: &'a [u64],
    /// Pending fingerprints the merge takes in (all those pending at its
    /// snapshot), increasing: any other fingerprint pending when the
    /// merge writes its pairs stays pending, and they are written marked
    /// so (see [`keys::ID_PENDING`]).
    pub pending: &'a [u64],
}

impl IdsInput<'_> {
    /// Whether `fp`, pending now (`pending_now`), stays so after the
    /// merge (see [`pending`](Self::pending)).
    fn stays_pending(&self, fp: u64, pending_now: bool) -> bool {
        pending_now && self.pending.binary_search(&fp).is_err()
    }

    /// The overlay's reconciliation for the merge of table 0 from `base`
    /// into `new0` with these ids, its new id blocks `written`, `folded`
    /// the fingerprints whose overlay entries they took in.
    fn reconcile<'r>(
        &'r self,
        base: Base<'r>,
        removes: &'r [u64],
        folded: &'r [u64],
        new0: &'r TableState,
        written: &'r crate::table::Added,
    ) -> Reconcile<'r> {
        Reconcile {
            base,
            snapshot: self.overlay,
            extra: self.extra,
            adds: self.adds0,
            fresh: self.fresh,
            removes,
            folded,
            new0,
            written,
        }
    }
}

/// The sorted union of `adds` and `fold` (fingerprints of the tables
/// whose overlay entries a merge folds into their id blocks: merged into
/// table 0 again, they make their blocks rewritten, and change nothing
/// else). `adds` itself when there is nothing to fold.
pub(crate) fn with_fold<'a>(adds: &'a [u64], fold: &[u64]) -> std::borrow::Cow<'a, [u64]> {
    if fold.is_empty() {
        return adds.into();
    }
    let mut all = Vec::with_capacity(adds.len() + fold.len());
    all.extend_from_slice(adds);
    all.extend_from_slice(fold);
    all.sort_unstable();
    all.dedup();
    all.into()
}

/// Merges sorted unpermuted `adds` into and `removes` out of every table
/// of level `target`, the tables spread over the machine's cores; a table
/// with enough new blocks has them written to its table file as soon as
/// it is merged (see [`files`]). With `ids` (level 0 only), its table 0
/// (the identity permutation) also takes `ids.adds0` and builds the id
/// blocks of its new blocks. Returns each table's number (over all
/// levels) and merge.
pub(crate) fn merge_all(
    shared: &Shared,
    tables: &[TableState],
    target: usize,
    adds: &[u64],
    removes: &[u64],
    ids: Option<&IdsInput<'_>>,
) -> Result<Vec<(usize, Merged)>> {
    // Files a failed merge or commit left behind go first. None is needed:
    // a commit that wrote its table files record and then failed poisoned
    // the store, and a poisoned store merges nothing (callers check).
    files::discard(&shared.dir)?;
    let plan = &shared.plan;
    let per_level = plan.tables().len();
    let first = target * per_level;
    let one = |t: usize| -> Result<Merged> {
        let spec = &plan.tables()[t];
        let g = first + t;
        let permute = |v: &[u64]| super::sort::permuted_sorted(v, &spec.permutation);
        if let (0, Some(ids)) = (t, ids) {
            debug_assert!((0..64).all(|b| spec.permutation.apply(1 << b) == 1 << b));
            let truth = Truth::new(&tables[g], ids.table, ids.overlay, ids.extra);
            let mut builder = IdBuilder::new(truth);
            let out = merge_observed(
                &tables[g],
                ids.adds0,
                removes,
                shared.block_size,
                &mut |key, values| builder.observe(key, values),
            )?;
            let mut ids = MergedIds {
                blocks: builder.blocks,
                new_pairs: builder.new_pairs,
                folded: builder.folded,
                filed: false,
            };
            files::file_ids(shared, &out.removed, &mut ids)?;
            let mut merged = files::file(shared, g, filtered(shared, target, out))?;
            merged.ids = Some(ids);
            return Ok(merged);
        }
        let out = if t == 0 {
            filtered(
                shared,
                target,
                merge(&tables[g], adds, removes, shared.block_size)?,
            )
        } else {
            merge(
                &tables[g],
                &permute(adds),
                &permute(removes),
                shared.block_size,
            )?
        };
        files::file(shared, g, out)
    };
    let threads = if adds.len() + removes.len() < PARALLEL_MERGE_MIN {
        1
    } else {
        super::parallel::cores()
    };
    super::parallel::map_indexed(per_level, threads, one)
        .into_iter()
        .enumerate()
        .map(|(t, m)| m.map(|m| (first + t, m)))
        .collect()
}

/// Merges smaller than this run on the calling thread.
const PARALLEL_MERGE_MIN: usize = 1 << 14;

/// A level's table 0 as merged, with its membership filter (see
/// [`TableState::filtered`]): every write asks it whether it holds a
/// fingerprint. A handle that has not written yet (a bulk load, which
/// asks no table) builds none: its first write has it built, as for the
/// tables read at open (see [`filters`](super::filters)). Level 0's of a
/// one-table store also gets its flat sequence (see [`flats`](super::flats)).
fn filtered(shared: &Shared, level: usize, out: MergeOutput) -> MergeOutput {
    let state = super::flats::flattened(shared, level, out.state);
    let state = if super::filters::wanted(shared) {
        state.filtered()
    } else {
        state
    };
    MergeOutput { state, ..out }
}

/// A write batch with room for [`write_tables`] of `outputs` and a few
/// more records, so a large one is not copied as it grows.
pub(crate) fn tables_batch(outputs: &[(usize, Merged)]) -> crate::storage::Batch {
    // Each record: a tag, a column family id, two lengths, the key.
    const RECORD: usize = 24;
    let bytes: usize = outputs
        .iter()
        .map(|(_, m)| m)
        .filter(|m| m.filed.is_none())
        .map(|m| m.out.added.byte_len() + (m.out.added.len() + m.out.removed.len()) * RECORD)
        .sum();
    let ids: usize = outputs
        .iter()
        .filter_map(|(_, m)| m.ids.as_ref())
        .filter(|ids| !ids.filed)
        .map(|ids| ids.blocks.byte_len() + 2 * ids.blocks.len() * RECORD)
        .sum();
    let bytes = bytes + ids;
    crate::storage::batch_with_capacity(bytes + 4096)
}

/// Adds the block (and code) changes of every table of `outputs` (each
/// numbered over all levels) not filed to `batch`, with every table's
/// code and new index record.
///
/// Each table's new blocks are dropped once they are in `batch` (the
/// batch holds the copy that is written), so a merge that rewrote every
/// table does not hold its blocks twice while RocksDB takes the batch.
pub(crate) fn write_tables(
    shared: &Shared,
    batch: &mut crate::storage::Batch,
    outputs: &mut [(usize, Merged)],
    report: &mut CompactionReport,
) -> Result<()> {
    let db = &shared.db;
    for (t, Merged { out, filed, .. }) in outputs.iter_mut() {
        let t = *t;
        let family = db.table(t)?;
        report.blocks_replaced += out.removed.len();
        if let Some(written) = *filed {
            report.blocks_written += written;
        } else if out.added.is_empty() && out.state.keys().is_empty() && !out.removed.is_empty() {
            // A table emptied (a level merged into the next): one range
            // delete, not a tombstone per block for reads to step over.
            batch.delete_all_cf(family, 8);
        } else {
            for &key in &out.removed {
                batch.delete_cf(family, keys::fingerprint(key));
            }
            let added = std::mem::take(&mut out.added);
            for (key, bytes) in added.iter() {
                batch.put_cf(family, keys::fingerprint(key), bytes);
            }
            report.blocks_written += added.len();
            shared.count_merge_bytes(added.byte_len() as u64);
        }
        if let Some((id, code)) = &out.new_code {
            batch.put_cf(
                db.family(keys::CODES_FAMILY)?,
                keys::code(t as u16, *id),
                records::encode_code(code),
            );
        }
        batch.put_cf(
            db.default_family()?,
            keys::index(t as u16),
            records::encode_index(out.state.index_entries()),
        );
    }
    Ok(())
}

/// The overlay's reconciliation for a merge of level 0 (`outputs` must
/// start with level 0's table 0, merged from `tables`' with its new id
/// blocks), as if nothing were written while it ran: computed outside the
/// commit lock, and corrected under it by [`write_ids`].
pub(crate) fn prepare_ids(
    tables: &[TableState],
    outputs: &[(usize, Merged)],
    ids: &IdsInput<'_>,
    removes: &[u64],
) -> Result<Reconciled> {
    with_reconcile(tables, outputs, ids, removes, |context| context.all())
}

/// `f` of the overlay's reconciliation for the merge of level 0's table 0
/// from `tables` into `outputs` (which must start with it).
fn with_reconcile<T>(
    tables: &[TableState],
    outputs: &[(usize, Merged)],
    ids: &IdsInput<'_>,
    removes: &[u64],
    f: impl FnOnce(&Reconcile<'_>) -> Result<T>,
) -> Result<T> {
    let (Some(old0), Some((0, first))) = (tables.first(), outputs.first()) else {
        return Err(crate::Error::InvalidArgument(
            "id blocks are written with level 0's table 0".into(),
        ));
    };
    let merged_ids = first.ids.as_ref();
    let none = crate::table::Added::default();
    let base = Base {
        table: old0,
        ids: ids.table,
    };
    let folded = merged_ids.map_or(&[][..], |m| &m.folded[..]);
    let written = merged_ids.map_or(&none, |m| &m.blocks);
    f(&ids.reconcile(base, removes, folded, &first.out.state, written))
}

/// Fingerprints a catch-up reconciles under one hold of the state's read
/// lock (writers wait for it meanwhile).
const CATCH_UP_SLICE: usize = 16_384;

/// A catch-up stops once a round finds fewer fingerprints written than
/// this, or after [`CATCH_UP_ROUNDS`] rounds: the commit reconciles the
/// rest under the commit lock.
const CATCH_UP_LEFT: usize = 16_384;

/// Rounds of a catch-up at most (writers faster than it would keep it
/// going).
const CATCH_UP_ROUNDS: usize = 8;

/// Corrects `done` (from [`prepare_ids`]) for the writes made since the
/// merge's snapshot, before the commit lock is taken: a merge into level
/// 0 runs for seconds at scale, and the fingerprints written meanwhile
/// (millions) would otherwise all be reconciled with writers held off.
/// Each round takes what the journal recorded so far and reconciles it
/// in slices, each against the state of the moment under its read lock;
/// a fingerprint written again after its slice is in a later round's
/// journal, or the commit's, and reconciled again (a reconciliation of a
/// fingerprint replaces the one before). When `done` was written whole,
/// each round's corrections go to `batch` at once.
fn catch_up(
    shared: &Shared,
    tables: &[TableState],
    outputs: &[(usize, Merged)],
    ids: &IdsInput<'_>,
    removes: &[u64],
    done: &mut Reconciled,
    batch: &mut crate::storage::Batch,
) -> Result<()> {
    // Once written whole, the family of the snapshot's pairs is emptied
    // earlier in the batch: the corrections go to the current one alone.
    let whole_out = IdsWriter::only(shared.db.family(shared.id_families.current())?);
    with_reconcile(tables, outputs, ids, removes, |context| {
        for _ in 0..CATCH_UP_ROUNDS {
            let Some(changed) = shared.locks.drain_journal() else {
                return Ok(());
            };
            for slice in changed.chunks(CATCH_UP_SLICE) {
                let state = shared.state.read();
                let pending = |fp| state.pending.contains(&shared.plan, fp);
                context.patch(done, &state.overlay, slice, pending)?;
            }
            // Written whole already: the batch takes the corrections now
            // (after the family's keys, which they override).
            if done.written_whole {
                let state = shared.state.read();
                let stays = |fp| ids.stays_pending(fp, state.pending.contains(&shared.plan, fp));
                write_fixes(batch, &whole_out, done.fixes.drain(..), stays);
            }
            if changed.len() < CATCH_UP_LEFT {
                break;
            }
        }
        Ok(())
    })
}

/// The id table after the merge `g` into level 0 made `outputs` (which
/// must start with level 0's table 0).
fn rebuilt_id_table(g: &Gathered, outputs: &[(usize, Merged)]) -> Result<IdTable> {
    let (Some(old0), Some((0, first))) = (g.tables.first(), outputs.first()) else {
        return Err(crate::Error::InvalidArgument(
            "id blocks are written with level 0's table 0".into(),
        ));
    };
    let none = crate::table::Added::default();
    let written = first.ids.as_ref().map_or(&none, |m| &m.blocks);
    g.id_table.rebuilt(old0, &first.out.state, written)
}

/// Adds table 0's id block changes (`outputs` must start with level 0's
/// table 0: deletes of its replaced blocks' keys,
/// the new blocks' id blocks) and the overlay's reconciliation (see
/// [`ids::Reconcile`]) to `batch`, under the commit lock; returns the id
/// table and overlay to swap in with the tables, and the pairs the new
/// id blocks hold that were not stored before. `prepared` is the
/// reconciliation from [`prepare_ids`] and the id table rebuilt for the
/// merge (without it, both are made here); `journal` holds every
/// fingerprint written since it was caught up (see [`catch_up`]), or
/// since the snapshot: only those are reconciled again (without a
/// journal, every fingerprint with overlay entries then or now is).
/// The last value returned says whether the batch empties the `ids`
/// family writers do not put into (see [`IdFamilies::other_emptied`]).
///
/// [`IdFamilies::other_emptied`]: super::id_families::IdFamilies::other_emptied
pub(crate) fn write_ids(
    shared: &Shared,
    batch: &mut crate::storage::Batch,
    outputs: &mut [(usize, Merged)],
    ids: &IdsInput<'_>,
    removes: &[u64],
    prepared: Option<(Reconciled, IdTable)>,
    journal: Option<&[u64]>,
) -> Result<(Arc<IdTable>, Overlay, u64, bool)> {
    let db = &shared.db;
    let Some((0, first)) = outputs.first_mut() else {
        return Err(crate::Error::InvalidArgument(
            "id blocks are written with level 0's table 0".into(),
        ));
    };
    let merged_ids = first.ids.get_or_insert_with(Default::default);
    // The blocks go (memory held by the new id table, or the batch, holds
    // them); the record of whether they were filed stays.
    let written = std::mem::take(&mut merged_ids.blocks);
    let folded = std::mem::take(&mut merged_ids.folded);
    let new_pairs = merged_ids.new_pairs;
    if !merged_ids.filed {
        let family = db.family(keys::ID_BLOCKS_FAMILY)?;
        for &key in &first.out.removed {
            batch.delete_cf(family, keys::fingerprint(key));
        }
        for (key, bytes) in written.iter() {
            batch.put_cf(family, keys::fingerprint(key), bytes);
        }
        shared.count_merge_bytes(written.byte_len() as u64);
    }
    let state = shared.state.read();
    let new0 = &first.out.state;
    let old0 = state
        .tables
        .first()
        .ok_or_else(|| crate::Error::InvalidArgument("a store has at least one table".into()))?;
    let (prepared, table) = match prepared {
        Some((done, table)) => (Some(done), table),
        None => (None, state.id_table.rebuilt(old0, new0, &written)?),
    };
    let base = Base {
        table: old0,
        ids: &state.id_table,
    };
    let context = ids.reconcile(base, removes, &folded, new0, &written);
    // The journal holds every fingerprint written since the snapshot, or
    // since the catch-up's last round. Without one, any fingerprint with
    // entries now may have changed since the snapshot; without a
    // reconciliation prepared, the snapshot's is made now.
    let pending = |fp| state.pending.contains(&shared.plan, fp);
    let mut reconciled = match prepared {
        Some(done) => done,
        None => context.all()?,
    };
    match journal {
        Some(changed) => context.patch(&mut reconciled, &state.overlay, changed, pending)?,
        None => {
            let mut changed: Vec<u64> = state.overlay.fingerprints().collect();
            changed.extend(ids.overlay.fingerprints());
            changed.sort_unstable();
            changed.dedup();
            context.patch(&mut reconciled, &state.overlay, &changed, pending)?;
        }
    }
    let stays = |fp| ids.stays_pending(fp, state.pending.contains(&shared.plan, fp));
    if !reconciled.written_whole && ids_better_whole(&reconciled) {
        let out = put_whole(shared, batch, &reconciled, ids.overlay, stays)?;
        if reconciled.switched {
            // The keys written since the snapshot stayed: the stale ones go.
            write_fixes(batch, &out, reconciled.fixes, stays);
        }
        return Ok((Arc::new(table), reconciled.overlay, new_pairs, true));
    }
    let out = if reconciled.written_whole {
        IdsWriter::only(db.family(shared.id_families.current())?)
    } else {
        shared.id_families.writer(db)?
    };
    for (fp, id) in reconciled.deletes {
        out.delete(batch, fp, id);
    }
    for (fp, id, added) in reconciled.puts {
        out.put(batch, fp, id, keys::id_mark(added));
    }
    write_fixes(batch, &out, reconciled.fixes, stays);
    // Switched with nothing in the snapshot, the family writers left was
    // empty then, and writers only delete there since.
    let emptied = reconciled.written_whole || (reconciled.switched && ids.overlay.len() == 0);
    Ok((Arc::new(table), reconciled.overlay, new_pairs, emptied))
}

/// Adds a reconciliation's `fixes` (see [`Reconcile::patch`]) to `batch`,
/// in order, the pairs added to fingerprints that stay pending marked so.
fn write_fixes(
    batch: &mut crate::storage::Batch,
    out: &IdsWriter<'_>,
    fixes: impl IntoIterator<Item = (u64, u64, Option<bool>)>,
    stays_pending: impl Fn(u64) -> bool,
) {
    for (fp, id, mark) in fixes {
        match mark {
            Some(added) => out.put(
                batch,
                fp,
                id,
                keys::id_value(added, added && stays_pending(fp)),
            ),
            None => out.delete(batch, fp, id),
        }
    }
}

/// The `ids` families' content after a merge into level 0 (`done`, see
/// [`rewrite_whole`]) written in `batch`, the pairs of the fingerprints
/// that stay pending marked so; returns the writer of the corrections
/// that follow (into the current family alone).
///
/// With writers switched to the other family at the snapshot (`done.switched`),
/// the family of the snapshot's pairs is emptied and only the entries of
/// the fingerprints that had some in the `snapshot` are put (into the
/// current family): a fingerprint without any then has keys only from
/// writes since, which are where they were, and corrected by `done`'s
/// fixes (or left as they are). Otherwise both families are emptied and
/// every entry put.
fn put_whole<'a>(
    shared: &'a Shared,
    batch: &mut crate::storage::Batch,
    done: &Reconciled,
    snapshot: &Overlay,
    stays_pending: impl Fn(u64) -> bool,
) -> Result<IdsWriter<'a>> {
    let families = &shared.id_families;
    let current = shared.db.family(families.current())?;
    if done.switched {
        batch.delete_all_cf(shared.db.family(families.other())?, 16);
    } else {
        batch.delete_all_cf(current, 16);
        if families.other_holds() {
            batch.delete_all_cf(shared.db.family(families.other())?, 16);
        }
    }
    let out = IdsWriter::only(current);
    // Put in key order: the family's memtable is a vector, sorted when it
    // is flushed, and a sort of keys already in order reads them in order
    // instead of at random.
    let mut staying: Vec<(u64, &[(u64, bool)])> = done
        .overlay
        .iter()
        .filter(|&(fp, _)| !done.switched || !snapshot.get(fp).is_empty())
        .collect();
    staying.sort_unstable_by_key(|&(fp, _)| fp);
    for (fp, entries) in staying {
        let pending = stays_pending(fp);
        for &(id, added) in entries {
            out.put(batch, fp, id, keys::id_value(added, pending));
        }
    }
    Ok(out)
}

/// When the overlay after a merge into level 0 (`done`, caught up with
/// the writes made while it ran) holds fewer pairs than its changes to
/// the `ids` family (most of the pairs moved into id blocks), empties the
/// family and writes it again in `batch` before the commit lock is taken,
/// leaving `done` only the corrections for the writes made since, which
/// [`catch_up`] and the commit add after it (the family's keys put back
/// are most of such a batch, millions of them at scale); whether it did.
fn write_ids_whole(
    shared: &Shared,
    batch: &mut crate::storage::Batch,
    ids: &IdsInput<'_>,
    done: &mut Reconciled,
) -> Result<bool> {
    if !ids_better_whole(done) {
        return Ok(false);
    }
    // The pending set of the moment, read under the lock and searched
    // outside it: a fingerprint whose placement changes later is written
    // since, and its pairs written again by a correction.
    let pending = shared.state.read().pending.all(&shared.plan);
    let stays = |fp| ids.stays_pending(fp, pending.binary_search(&fp).is_ok());
    let out = put_whole(shared, batch, done, ids.overlay, stays)?;
    if done.switched {
        // The corrections so far delete the stale keys writers put since
        // the snapshot (which stay), and put what the entries skipped.
        write_fixes(batch, &out, done.fixes.drain(..), stays);
    }
    done.deletes.clear();
    done.puts.clear();
    done.fixes.clear();
    done.written_whole = true;
    Ok(true)
}

/// Whether the `ids` family is better written whole after the merge
/// `reconciled` describes than changed key by key (see [`rewrite_whole`]).
fn ids_better_whole(reconciled: &Reconciled) -> bool {
    let per_key = reconciled.deletes.len() + reconciled.puts.len() + reconciled.fixes.len();
    rewrite_whole(reconciled.overlay.len(), per_key)
}

/// Whether a family is better emptied by one range delete and written
/// again with its `after` keys than changed by `per_key` puts and deletes:
/// every key is an entry RocksDB sorts when it flushes its memtable.
fn rewrite_whole(after: usize, per_key: usize) -> bool {
    after < per_key
}

/// Adds a merge's changes to the `pending` family to `batch`: `changes`
/// (increasing; `true`: the fingerprint becomes pending, `false`: it
/// leaves) to a family holding `count` fingerprints, of which `now` lists
/// (increasing) at least every one that stays (and maybe some leaving).
/// A merge moves most of what is pending into the tables,
/// so the family is usually emptied and written again with the few
/// fingerprints written while the merge ran: those of them `keyed` says
/// need a key (the others are named by their pairs, see
/// [`keys::ID_PENDING`]), and every one joining.
fn write_pending(
    batch: &mut crate::storage::Batch,
    family: &crate::storage::Family,
    count: usize,
    now: impl FnOnce() -> Vec<u64>,
    changes: &[(u64, bool)],
    keyed: impl Fn(u64) -> bool,
) {
    let joining = changes.iter().filter(|&&(_, join)| join).count();
    let after = (count + joining).saturating_sub(changes.len() - joining);
    if !rewrite_whole(after, changes.len()) {
        for &(x, join) in changes {
            if join {
                batch.put_cf(family, keys::fingerprint(x), []);
            } else {
                batch.delete_cf(family, keys::fingerprint(x));
            }
        }
        return;
    }
    batch.delete_all_cf(family, 8);
    let leaving: Vec<u64> = changes
        .iter()
        .filter(|&&(_, join)| !join)
        .map(|&(x, _)| x)
        .collect();
    // A joining fingerprint is not pending now: no key is put twice.
    let mut left = Walk::new(&leaving);
    let staying = now()
        .into_iter()
        .filter(|&x| !left.has(x, |&f| f) && keyed(x));
    let joining = changes.iter().filter(|&&(_, join)| join).map(|&(x, _)| x);
    for x in staying.chain(joining) {
        batch.put_cf(family, keys::fingerprint(x), []);
    }
}

/// The tables after a merge: `old` with each of `outputs` in its place.
pub(crate) fn swapped(old: &[TableState], outputs: Vec<(usize, Merged)>) -> Arc<Vec<TableState>> {
    let mut tables = old.to_vec();
    for (g, m) in outputs {
        tables[g] = m.out.state;
    }
    Arc::new(tables)
}

/// Fingerprints in the tables of every level after a merge.
fn table_fingerprints(old: &[TableState], per_level: usize, outputs: &[(usize, Merged)]) -> u64 {
    let mut sizes: Vec<u64> = old
        .iter()
        .step_by(per_level.max(1))
        .map(TableState::fingerprints)
        .collect();
    for (g, m) in outputs {
        if g % per_level == 0 {
            sizes[g / per_level] = m.out.state.fingerprints();
        }
    }
    sizes.iter().sum()
}

fn commit(
    shared: &Shared,
    job: &Job,
    g: &Gathered,
    mut outputs: Vec<(usize, Merged)>,
    ids: Option<(&IdsInput<'_>, Reconciled)>,
    upper: Option<Arc<Pending>>,
) -> Result<CompactionReport> {
    let db = &shared.db;
    let plan = &shared.plan;
    let removes = &g.removes[..];
    let mut report = CompactionReport {
        merged: g.pending.len(),
        removed: removes.len(),
        ..Default::default()
    };
    // The tables' part of the batch depends on nothing a writer changes
    // (only merges change tables, one at a time): it is assembled before
    // writers are held off.
    let mut batch = tables_batch(&outputs);
    write_tables(shared, &mut batch, &mut outputs, &mut report)?;
    let caught_up = ids.is_some();
    let ids = match ids {
        Some((ids, mut done)) => {
            done.switched = g.switched;
            catch_up(
                shared, &g.tables, &outputs, ids, removes, &mut done, &mut batch,
            )?;
            if write_ids_whole(shared, &mut batch, ids, &mut done)? {
                if let Some(pause) = &shared.options.pause_merge {
                    pause.hold(super::pause::Point::Whole);
                }
                // Putting the family's keys back takes seconds at scale:
                // the writes made meanwhile are caught up with as well
                // (their corrections go to the batch after the keys).
                catch_up(
                    shared, &g.tables, &outputs, ids, removes, &mut done, &mut batch,
                )?;
            }
            // Only merges change level 0 and its id table (this one holds
            // the merge lock): rebuilt before writers are held off.
            let table = rebuilt_id_table(g, &outputs)?;
            Some((ids, done, table))
        }
        None => None,
    };
    // Fingerprints whose placement the merge changes (see below), and the
    // pending ones among them under each table's permutation.
    let mut touched: Vec<u64> = g.pending.iter().chain(&g.removes).copied().collect();
    touched.sort_unstable();
    touched.dedup();
    // A merge of the pending set into a level above level 0 rebuilds what
    // is left pending (see `rest` below) and needs no removal list.
    let merged = (!job.pending || caught_up).then(|| Pending::permuted(plan, &g.pending));
    // Declared before the commit lock's guard: dropped after it.
    let mut retired = Retired::default();
    let _leader = shared.locks.commit();
    // Every fingerprint written since the merge's snapshot: no write
    // commits while the commit lock is held.
    let journal = shared.locks.take_journal();
    shared.check_writable()?;
    shared.check_directory()?;
    let id_parts = match ids {
        Some((ids, prepared, table)) => Some(write_ids(
            shared,
            &mut batch,
            &mut outputs,
            ids,
            removes,
            Some((prepared, table)),
            journal.as_deref(),
        )?),
        None => None,
    };
    let emptied_other = id_parts.as_ref().is_some_and(|parts| parts.3);
    let (pending_cf, tomb_cf) = (
        db.family(keys::PENDING_FAMILY)?,
        db.family(keys::TOMBSTONES_FAMILY)?,
    );
    let new_table_fingerprints = table_fingerprints(&g.tables, g.per_level, &outputs);
    let full = job.pending && job.sources.len() + 1 == g.tables.len() / g.per_level.max(1);
    if full && shared.locks.generation() == g.generation {
        // A full merge with nothing written while it ran: everything
        // pending was merged and every tombstone applied, so both
        // families empty out. (No other key can be in them: writers are
        // held off by the commit lock until this batch is written.)
        for family in [pending_cf, tomb_cf] {
            batch.delete_all_cf(family, 8);
        }
        let counters = records::Counters {
            pending: 0,
            tombstones: 0,
            table_fingerprints: new_table_fingerprints,
            ..shared.state.read().counters()
        };
        shared.put_counters(&mut batch, &counters)?;
        let filed = files::filed(&outputs, db.tables());
        files::commit(shared, batch, &filed, true, |state| {
            retired.keep(replace(&mut state.tables, swapped(&g.tables, outputs)));
            if let Some((id_table, overlay, ..)) = id_parts {
                retired.keep(replace(&mut state.id_table, id_table));
                retired.keep(replace(&mut state.overlay, overlay));
            }
            retired.keep(replace(
                &mut state.pending,
                Pending::new(plan.tables().len()),
            ));
            retired.keep(replace(&mut state.upper, upper));
            retired.keep(std::mem::take(&mut state.tombstones));
        })?;
        if emptied_other {
            shared.id_families.other_emptied();
        }
        return Ok(report);
    }

    // Reconcile the fingerprints whose placement the merge changes (the
    // pending ones it moved into the tables, the tombstoned ones it
    // dropped) with what was written while it ran, so no write made
    // meanwhile is lost or resurrected. Fingerprints moved from a source
    // level stay in the tables: a tombstone written meanwhile names them
    // in their new level.
    let mut fixes = Vec::new();
    let rest = {
        let state = shared.state.read();
        let mut pending_changes = Vec::new();
        let mut taken = 0;
        // Walked in increasing order beside `touched`: a fingerprint not
        // written since the snapshot is pending exactly when it was then.
        // (A merge into level 0 drained the journal as it caught up with
        // the writes, which leaves it only the last: every placement is
        // read again.)
        let (mut was_pending, mut in_removes) = (Walk::new(&g.pending), Walk::new(removes));
        let written_since = journal.as_deref().filter(|_| !caught_up);
        let mut written = written_since.map(Walk::new);
        // Most of `touched` (all of it, for a merge of the pending set into
        // the top, which can be millions after a merge into level 0) is
        // pending fingerprints merged and not written since: walked, not
        // looked up, as the writers wait.
        for &x in &touched {
            let was_in_tables = in_removes.has(x, |&f| f);
            // Pending at the snapshot: the merge takes it in.
            let in_new = was_pending.has(x, |&f| f);
            let unchanged = written.as_mut().is_some_and(|w| !w.has(x, |&f| f));
            if unchanged && in_new {
                // Pending then (so in no table, not tombstoned) and not
                // written since: moved into the tables, which the swap
                // does in memory (removing `merged`, or rebuilding what is
                // left pending).
                pending_changes.push((x, false));
                taken += 1;
                continue;
            }
            // (Not pending then, and not written since: not pending now.)
            let pending = !unchanged && state.pending.contains(plan, x);
            let tombstoned = state.tombstones.contains(&x);
            let live = pending || (was_in_tables && !tombstoned);
            let (want_pending, want_tomb) = if in_new {
                (false, !live)
            } else {
                (live, false)
            };
            if want_pending != pending {
                pending_changes.push((x, want_pending));
            }
            if want_tomb != tombstoned {
                if want_tomb {
                    batch.put_cf(tomb_cf, keys::fingerprint(x), []);
                } else {
                    batch.delete_cf(tomb_cf, keys::fingerprint(x));
                }
            }
            fixes.push((x, pending, want_pending, tombstoned, want_tomb));
        }
        // A merge of the pending set leaves pending only fingerprints
        // made pending since its snapshot, which were stored nowhere
        // before: every pair of theirs was written marked pending, and
        // only those without pairs need their key put back. (Without the
        // pending set merged, one may be pending from before with pairs
        // written unmarked by an older format, and a key.)
        let keyed = |x| !job.pending || state.overlay.get(x).is_empty();
        // When the merge took the whole pending set of its snapshot and
        // the journal holds every write since, a fingerprint pending now
        // was pending then (and is leaving: the merge takes it in) or was
        // written since: the journal's ones pending now and not then are
        // all that stay, found without listing the tens of thousands
        // being merged as writers wait.
        let staying: Option<Vec<u64>> = match written_since {
            Some(fps) if job.pending => {
                let mut then = Walk::new(&g.pending);
                Some(
                    fps.iter()
                        .copied()
                        .filter(|&x| !then.has(x, |&f| f) && state.pending.contains(plan, x))
                        .collect(),
                )
            }
            _ => None,
        };
        write_pending(
            &mut batch,
            pending_cf,
            state.pending.len(),
            || staying.clone().unwrap_or_else(|| state.pending.all(plan)),
            &pending_changes,
            keyed,
        );
        let mut counters = records::Counters {
            table_fingerprints: new_table_fingerprints,
            ..state.counters()
        };
        counters.pending = counters.pending.saturating_sub(taken);
        for &(_, pending, want_pending, tombstoned, want_tomb) in &fixes {
            counters.moved((pending, tombstoned), (want_pending, want_tomb));
        }
        shared.put_counters(&mut batch, &counters)?;
        // What is left pending then: `staying` and the fingerprints the
        // fixes make pending, a set built here, before the state's write
        // lock, rather than the tens of thousands merged filtered out of
        // every table's runs under it.
        staying.map(|mut rest| {
            let joining = fixes
                .iter()
                .filter(|&&(_, pending, want, ..)| want && !pending);
            rest.extend(joining.map(|&(x, ..)| x));
            rest.sort_unstable();
            Pending::from_fingerprints(plan, &rest)
        })
    };
    let filed = files::filed(&outputs, db.tables());
    files::commit(shared, batch, &filed, true, |state| {
        debug_assert!(
            Arc::ptr_eq(&state.tables, &g.tables),
            "tables change only under the compaction lock"
        );
        retired.keep(replace(&mut state.tables, swapped(&g.tables, outputs)));
        retired.keep(replace(&mut state.upper, upper));
        if let Some((id_table, overlay, ..)) = id_parts {
            retired.keep(replace(&mut state.id_table, id_table));
            retired.keep(replace(&mut state.overlay, overlay));
        }
        // Every fingerprint that leaves the pending set is one the merge
        // took in (a tombstoned one that is pending again stays), and the
        // rest of those are not pending any more.
        let rebuilt = rest.is_some();
        match rest {
            Some(rest) => retired.keep(replace(&mut state.pending, rest)),
            None => state
                .pending
                .remove_permuted(&merged.unwrap_or_else(|| Pending::permuted(plan, &g.pending))),
        }
        for (x, pending, want_pending, tombstoned, want_tomb) in fixes {
            if want_pending && !pending && !rebuilt {
                state.pending.insert(plan, x);
            }
            if tombstoned && !want_tomb {
                state.tombstones.remove(&x);
            } else if want_tomb && !tombstoned {
                state.tombstones.insert(x);
            }
        }
    })?;
    if emptied_other {
        shared.id_families.other_emptied();
    }
    Ok(report)
}
