//! Compaction: merging pending fingerprints into the compressed blocks
//! and removing tombstoned ones, off the query path.
//!
//! The merge is computed from snapshots without holding any lock that
//! queries or writers need. The commit then takes the commit lock, fixes
//! up fingerprints that were inserted or deleted meanwhile (so no write
//! made during the merge is lost or resurrected), writes one atomic batch
//! covering every table, and swaps the new table snapshots in.

use std::sync::Arc;

use super::files::{self, Merged, MergedIds};
use super::ids::{self, IdBuilder, IdTable, Overlay, Truth};
use super::shared::Shared;
use super::state::Pending;
use crate::error::Result;
use crate::format::{keys, records};
use crate::table::{merge, merge_observed, TableState};

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

/// Runs one compaction of everything pending and tombstoned now.
pub(crate) fn compact(shared: &Shared) -> Result<CompactionReport> {
    let _one_at_a_time = shared.locks.merging();
    shared.check_writable()?;
    let plan = &shared.plan;
    let (tables, id_table, overlay, fold, adds, removes, generation) = {
        let state = shared.state.read();
        let mut removes: Vec<u64> = state.tombstones.iter().copied().collect();
        removes.sort_unstable();
        let generation = shared.locks.generation();
        (
            Arc::clone(&state.tables),
            Arc::clone(&state.id_table),
            state.overlay.clone(),
            ids::to_fold(plan, &state),
            state.pending.all(plan),
            removes,
            generation,
        )
    };
    if adds.is_empty() && removes.is_empty() && fold.is_empty() {
        return Ok(CompactionReport::default());
    }
    let ids = IdsInput {
        table: &id_table,
        overlay: &overlay,
        extra: &[],
        adds0: &with_fold(&adds, &fold),
    };
    let outputs = merge_all(shared, &tables, &adds, &removes, &ids)?;
    let report = commit(shared, &tables, outputs, &adds, &removes, &ids, generation);
    drop(tables);
    super::memory::release_free_memory(shared);
    report
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
}

/// The sorted union of `adds` and `fold` (fingerprints of the tables
/// whose overlay entries a merge folds into their id blocks: merged into
/// table 0 again, they make their blocks rewritten, and change nothing
/// else).
pub(crate) fn with_fold(adds: &[u64], fold: &[u64]) -> Vec<u64> {
    let mut all = Vec::with_capacity(adds.len() + fold.len());
    all.extend_from_slice(adds);
    if !fold.is_empty() {
        all.extend_from_slice(fold);
        all.sort_unstable();
        all.dedup();
    }
    all
}

/// Merges sorted unpermuted `adds` into and `removes` out of every table,
/// the tables spread over the machine's cores; a table with enough new
/// blocks has them written to its table file as soon as it is merged (see
/// [`files`]). Table 0 (the identity permutation) also takes `ids.adds0`
/// and builds the id blocks of its new blocks.
pub(crate) fn merge_all(
    shared: &Shared,
    tables: &[TableState],
    adds: &[u64],
    removes: &[u64],
    ids: &IdsInput<'_>,
) -> Result<Vec<Merged>> {
    // Files a failed merge or commit left behind go first. None is needed:
    // a commit that wrote its table files record and then failed poisoned
    // the store, and a poisoned store merges nothing (callers check).
    files::discard(&shared.dir)?;
    let plan = &shared.plan;
    let one = |t: usize| -> Result<Merged> {
        let spec = &plan.tables()[t];
        let permute = |v: &[u64]| super::sort::sorted_keys(v, |&x| spec.permutation.apply(x));
        if t == 0 {
            debug_assert!((0..64).all(|b| spec.permutation.apply(1 << b) == 1 << b));
            let truth = Truth::new(&tables[0], ids.table, ids.overlay, ids.extra);
            let mut builder = IdBuilder::new(truth);
            let out = merge_observed(
                &tables[0],
                ids.adds0,
                removes,
                shared.block_size,
                &mut |key, values| builder.observe(key, values),
            )?;
            let mut ids = MergedIds {
                blocks: builder.blocks,
                new_pairs: builder.new_pairs,
                filed: false,
            };
            files::file_ids(shared, &out.removed, &mut ids)?;
            let mut merged = files::file(shared, 0, out)?;
            merged.ids = Some(ids);
            return Ok(merged);
        }
        let out = merge(
            &tables[t],
            &permute(adds),
            &permute(removes),
            shared.block_size,
        )?;
        files::file(shared, t, out)
    };
    let threads = if adds.len() + removes.len() < PARALLEL_MERGE_MIN {
        1
    } else {
        super::parallel::cores()
    };
    super::parallel::map_indexed(tables.len(), threads, one)
        .into_iter()
        .collect()
}

/// Merges smaller than this run on the calling thread.
const PARALLEL_MERGE_MIN: usize = 1 << 14;

/// A write batch with room for [`write_tables`] of `outputs` and a few
/// more records, so a large one is not copied as it grows.
pub(crate) fn tables_batch(outputs: &[Merged]) -> crate::storage::Batch {
    // Each record: a tag, a column family id, two lengths, the key.
    const RECORD: usize = 24;
    let bytes: usize = outputs
        .iter()
        .filter(|m| m.filed.is_none())
        .map(|m| m.out.added.byte_len() + (m.out.added.len() + m.out.removed.len()) * RECORD)
        .sum();
    let ids: usize = outputs
        .iter()
        .filter_map(|m| m.ids.as_ref())
        .filter(|ids| !ids.filed)
        .map(|ids| ids.blocks.byte_len() + 2 * ids.blocks.len() * RECORD)
        .sum();
    let bytes = bytes + ids;
    crate::storage::batch_with_capacity(bytes + 4096)
}

/// Adds the block (and code) changes of every table not filed to
/// `batch`, with every table's code and new index record.
///
/// Each table's new blocks are dropped once they are in `batch` (the
/// batch holds the copy that is written), so a merge that rewrote every
/// table does not hold its blocks twice while RocksDB takes the batch.
pub(crate) fn write_tables(
    shared: &Shared,
    batch: &mut crate::storage::Batch,
    outputs: &mut [Merged],
    report: &mut CompactionReport,
) -> Result<()> {
    let db = &shared.db;
    for (t, Merged { out, filed, .. }) in outputs.iter_mut().enumerate() {
        let family = db.table(t)?;
        report.blocks_replaced += out.removed.len();
        if let Some(written) = *filed {
            report.blocks_written += written;
        } else {
            for &key in &out.removed {
                batch.delete_cf(family, keys::fingerprint(key));
            }
            let added = std::mem::take(&mut out.added);
            for (key, bytes) in added.iter() {
                batch.put_cf(family, keys::fingerprint(key), bytes);
            }
            report.blocks_written += added.len();
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

/// Adds table 0's id block changes (deletes of its replaced blocks' keys,
/// the new blocks' id blocks) and the overlay's reconciliation (see
/// [`ids::reconcile`]) to `batch`, under the commit lock; returns the id
/// table and overlay to swap in with the tables, and the pairs the new
/// id blocks hold that were not stored before.
pub(crate) fn write_ids(
    shared: &Shared,
    batch: &mut crate::storage::Batch,
    outputs: &mut [Merged],
    ids: &IdsInput<'_>,
    removes: &[u64],
) -> Result<(Arc<IdTable>, Overlay, u64)> {
    let db = &shared.db;
    let Some(first) = outputs.first_mut() else {
        return Ok(Default::default());
    };
    let merged_ids = first.ids.get_or_insert_with(Default::default);
    // The blocks go (memory held by the new id table, or the batch, holds
    // them); the record of whether they were filed stays.
    let written = std::mem::take(&mut merged_ids.blocks);
    let new_pairs = merged_ids.new_pairs;
    if !merged_ids.filed {
        let family = db.family(keys::ID_BLOCKS_FAMILY)?;
        for &key in &first.out.removed {
            batch.delete_cf(family, keys::fingerprint(key));
        }
        for (key, bytes) in written.iter() {
            batch.put_cf(family, keys::fingerprint(key), bytes);
        }
    }
    let state = shared.state.read();
    let new0 = &first.out.state;
    let old0 = state
        .tables
        .first()
        .ok_or_else(|| crate::Error::InvalidArgument("a store has at least one table".into()))?;
    let table = state.id_table.rebuilt(old0, new0, &written)?;
    let reconciled = ids::reconcile(
        &shared.plan,
        &state,
        ids.overlay,
        ids.extra,
        ids.adds0,
        removes,
        new0,
        &written,
    )?;
    let ids_cf = db.family(keys::IDS_FAMILY)?;
    for (fp, id) in reconciled.deletes {
        batch.delete_cf(ids_cf, keys::id_pair(fp, id));
    }
    for (fp, id, added) in reconciled.puts {
        batch.put_cf(ids_cf, keys::id_pair(fp, id), keys::id_mark(added));
    }
    Ok((Arc::new(table), reconciled.overlay, new_pairs))
}

fn commit(
    shared: &Shared,
    old: &Arc<Vec<crate::table::TableState>>,
    mut outputs: Vec<Merged>,
    adds: &[u64],
    removes: &[u64],
    ids: &IdsInput<'_>,
    generation: u64,
) -> Result<CompactionReport> {
    let db = &shared.db;
    let plan = &shared.plan;
    let _leader = shared.locks.commit();
    shared.check_writable()?;
    shared.check_directory()?;
    let mut report = CompactionReport {
        merged: adds.len(),
        removed: removes.len(),
        ..Default::default()
    };
    let mut batch = tables_batch(&outputs);
    write_tables(shared, &mut batch, &mut outputs, &mut report)?;
    let (id_table, overlay, _) = write_ids(shared, &mut batch, &mut outputs, ids, removes)?;

    let (pending_cf, tomb_cf) = (
        db.family(keys::PENDING_FAMILY)?,
        db.family(keys::TOMBSTONES_FAMILY)?,
    );
    let new_table_fingerprints = outputs.first().map_or(0, |m| m.out.state.fingerprints());
    if shared.locks.generation() == generation {
        // Nothing was written while the merge ran: everything pending was
        // merged and every tombstone applied, so both families empty out.
        // (No other key can be in them: writers are held off by the commit
        // lock until this batch is written.)
        for family in [pending_cf, tomb_cf] {
            batch.delete_range_cf(family, &[0u8; 8][..], &[0xffu8; 9][..]);
        }
        let counters = records::Counters {
            pending: 0,
            tombstones: 0,
            table_fingerprints: new_table_fingerprints,
            ..shared.state.read().counters()
        };
        shared.put_counters(&mut batch, &counters)?;
        let filed = files::filed(&outputs);
        files::commit(shared, batch, &filed, |state| {
            state.tables = files::tables(outputs);
            state.id_table = id_table;
            state.overlay = overlay;
            state.pending = Pending::new(plan.tables().len());
            state.tombstones.clear();
        })?;
        return Ok(report);
    }

    // Reconcile fingerprints whose state changed while the merge ran.
    let mut touched: Vec<u64> = adds.iter().chain(removes).copied().collect();
    touched.sort_unstable();
    touched.dedup();
    let mut fixes = Vec::new();
    {
        let state = shared.state.read();
        for &x in &touched {
            let was_in_tables = removes.binary_search(&x).is_ok();
            let pending = state.pending.contains(plan, x);
            let tombstoned = state.tombstones.contains(&x);
            let live = pending || (was_in_tables && !tombstoned);
            let in_new = adds.binary_search(&x).is_ok();
            let (want_pending, want_tomb) = if in_new {
                (false, !live)
            } else {
                (live, false)
            };
            if want_pending != pending {
                if want_pending {
                    batch.put_cf(pending_cf, keys::fingerprint(x), []);
                } else {
                    batch.delete_cf(pending_cf, keys::fingerprint(x));
                }
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
        let mut counters = records::Counters {
            table_fingerprints: new_table_fingerprints,
            ..state.counters()
        };
        for &(_, pending, want_pending, tombstoned, want_tomb) in &fixes {
            counters.moved((pending, tombstoned), (want_pending, want_tomb));
        }
        shared.put_counters(&mut batch, &counters)?;
    }
    let filed = files::filed(&outputs);
    files::commit(shared, batch, &filed, |state| {
        debug_assert!(
            Arc::ptr_eq(&state.tables, old),
            "tables change only under the compaction lock"
        );
        state.tables = files::tables(outputs);
        state.id_table = id_table;
        state.overlay = overlay;
        // In increasing order, as `touched` is.
        let merged: Vec<u64> = fixes
            .iter()
            .filter(|&&(_, pending, want_pending, ..)| pending && !want_pending)
            .map(|&(x, ..)| x)
            .collect();
        state.pending.remove_sorted(plan, &merged);
        for (x, pending, want_pending, tombstoned, want_tomb) in fixes {
            if want_pending && !pending {
                state.pending.insert(plan, x);
            }
            if tombstoned && !want_tomb {
                state.tombstones.remove(&x);
            } else if want_tomb && !tombstoned {
                state.tombstones.insert(x);
            }
        }
    })?;
    Ok(report)
}
