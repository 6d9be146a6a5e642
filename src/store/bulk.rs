//! Bulk inserts: a large batch of inserts merged straight into the
//! compressed tables' level 0, together with everything pending and
//! tombstoned and every other level, in one atomic write of whole blocks
//! (no per-fingerprint pending keys).
//!
//! It holds the compaction lock and the commit lock throughout, so no
//! other write or compaction interleaves; queries go on, reading the old
//! tables until the new ones are swapped in.

use std::mem::replace;
use std::sync::Arc;

use super::compact::{
    cleared_output, merge_all, swapped, tables_batch, with_fold, write_ids, write_tables,
    CompactionReport, IdsInput,
};
use super::files;
use super::pending::Pending;
use super::shared::Shared;
use super::state::Retired;
use crate::error::Result;
use crate::format::{keys, records};

/// Inserts every `(fingerprint, id)` pair; `None` stores the fingerprint
/// alone. All or nothing.
pub(crate) fn insert_bulk<E: super::Entry>(shared: &Shared, pairs: &[E]) -> Result<()> {
    let _one_at_a_time = shared.locks.merging();
    let _leader = shared.locks.commit();
    shared.check_writable()?;
    shared.check_directory()?;
    let plan = &shared.plan;
    let db = &shared.db;

    let mut ids = super::sort::sorted_pairs(pairs);
    // When every pair has an id, the sorted pairs give the fingerprints
    // in order: no second sort.
    let mut fps = if ids.len() == pairs.len() {
        ids.iter().map(|&(fp, _)| fp).collect()
    } else {
        super::sort::sorted_keys(pairs, E::fingerprint)
    };
    fps.dedup();
    ids.dedup();

    let (tables, per_level, id_table, overlay, fold, adds, removes, counters) = {
        let state = shared.state.read();
        // Everything pending and every other level go into level 0 with
        // the new fingerprints (those already in level 0 merge as
        // no-ops); tombstones are applied except where the fingerprint is
        // being re-inserted.
        let per_level = state.per_level;
        let mut upper = Vec::new();
        for l in 1..state.levels() {
            state.level(l).append_all(&mut upper)?;
        }
        upper.retain(|x| !state.tombstones.contains(x) || fps.binary_search(x).is_ok());
        let pending = state.pending.all(plan);
        // The new fingerprints are sorted and distinct: alone, they are
        // taken as they are.
        let adds = if pending.is_empty() && upper.is_empty() {
            std::mem::take(&mut fps)
        } else {
            let mut adds = pending;
            adds.extend_from_slice(&fps);
            adds.extend(upper);
            adds.sort_unstable();
            adds.dedup();
            adds
        };
        // A tombstoned fingerprint is in the tables, so not pending: it is
        // being re-inserted exactly when it is in `adds`.
        let mut removes: Vec<u64> = state
            .tombstones
            .iter()
            .copied()
            .filter(|x| adds.binary_search(x).is_err())
            .collect();
        removes.sort_unstable();
        (
            Arc::clone(&state.tables),
            per_level,
            Arc::clone(&state.id_table),
            state.overlay.clone(),
            super::ids::to_fold(plan, &state)?,
            adds,
            removes,
            state.counters(),
        )
    };
    let ids_input = IdsInput {
        table: &id_table,
        overlay: &overlay,
        extra: &ids,
        adds0: &with_fold(&adds, &fold),
        fresh: &[],
        // Everything pending goes into level 0.
        pending: &adds,
    };
    let mut outputs = merge_all(shared, &tables, 0, &adds, &removes, Some(&ids_input))?;
    let table_fingerprints = outputs
        .first()
        .map_or(0, |(_, m)| m.out.state.fingerprints());
    for g in per_level..tables.len() {
        outputs.push((g, cleared_output(&tables[g])));
    }

    let mut batch = tables_batch(&outputs);
    write_tables(
        shared,
        &mut batch,
        &mut outputs,
        &mut CompactionReport::default(),
    )?;
    for family in [keys::PENDING_FAMILY, keys::TOMBSTONES_FAMILY] {
        batch.delete_all_cf(db.family(family)?, 8);
    }
    let (id_table, overlay, new_ids, emptied_other) = write_ids(
        shared,
        &mut batch,
        &mut outputs,
        &ids_input,
        &removes,
        None,
        // Nothing is written beside a bulk insert (it holds the commit
        // lock throughout): the overlay is its snapshot.
        Some(&[]),
    )?;
    shared.put_counters(
        &mut batch,
        &records::Counters {
            ids: counters.ids + new_ids,
            pending: 0,
            tombstones: 0,
            table_fingerprints,
        },
    )?;
    let filed = files::filed(&outputs, db.tables());
    let mut retired = Retired::default();
    files::commit(shared, batch, &filed, false, |state| {
        retired.keep(replace(&mut state.tables, swapped(&tables, outputs)));
        retired.keep(replace(&mut state.id_table, id_table));
        retired.keep(replace(&mut state.overlay, overlay));
        retired.keep(replace(
            &mut state.pending,
            Pending::new(plan.tables().len()),
        ));
        // Every upper level is emptied into level 0.
        if state.upper.is_some() {
            state.upper = Some(Arc::new(Pending::new(plan.tables().len())));
        }
        state.tombstones.clear();
        state.ids = counters.ids + new_ids;
        shared.locks.next_generation();
    })?;
    if emptied_other {
        shared.id_families.other_emptied();
    }
    // The memtables may now hold blocks of tables not filed (and the ids):
    // flush them before returning rather than beside the next bulk
    // insert's merge (and so the log of a bulk insert is not replayed by
    // the next open). The insert is committed whatever the flush does: a
    // failed flush leaves the memtables to a later one and the log to be
    // replayed, and RocksDB fails the next write if the disk is at fault.
    let _ = shared.db.flush();
    drop((tables, _leader));
    super::flats::install(shared);
    super::memory::release_free_memory(shared);
    Ok(())
}

/// Whether a batch of `n` inserts is worth merging straight into the
/// tables: as many as would make a compaction due on their own, and at
/// least an eighth of the store (a bulk insert rewrites level 0, which a
/// smaller batch would not pay for: it goes through the top level and
/// the runs).
pub(crate) fn worth_it(shared: &Shared, n: usize) -> bool {
    let stored = shared.state.read().fingerprints();
    n >= shared.merge_threshold() && (n as u64).saturating_mul(BULK_SHARE) >= stored
}

/// A batch of at least `1 / BULK_SHARE` of the store is merged straight
/// into level 0 (see [`worth_it`]).
const BULK_SHARE: u64 = 8;
