//! A merge's tables: the levels' tables merged (in parallel when large),
//! their membership filters, and their blocks written as table files or
//! in the commit's batch.

use std::sync::Arc;

use super::id_blocks::IdsInput;
use super::CompactionReport;
use crate::error::Result;
use crate::format::{keys, records};
use crate::store::files::{self, Merged, MergedIds};
use crate::store::ids::{IdBuilder, Truth};
use crate::store::shared::Shared;
use crate::table::{merge, merge_observed, MergeOutput, TableState};

/// A table emptied, as a merge output.
pub(crate) fn cleared_output(old: &TableState) -> Merged {
    Merged {
        out: crate::table::cleared(old),
        filed: None,
        ids: None,
    }
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
        let permute = |v: &[u64]| crate::store::sort::permuted_sorted(v, &spec.permutation);
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
        crate::store::parallel::cores()
    };
    crate::store::parallel::map_indexed(per_level, threads, one)
        .into_iter()
        .enumerate()
        .map(|(t, m)| m.map(|m| (first + t, m)))
        .collect()
}

/// Merges smaller than this run on the calling thread.
pub(super) const PARALLEL_MERGE_MIN: usize = 1 << 14;

/// A level's table 0 as merged, with its membership filter (see
/// [`TableState::filtered`]): every write asks it whether it holds a
/// fingerprint. A handle that has not written yet (a bulk load, which
/// asks no table) builds none: its first write has it built, as for the
/// tables read at open (see [`filters`](crate::store::filters)). Level 0's of a
/// one-table store also gets its flat sequence (see [`flats`](crate::store::flats)).
pub(super) fn filtered(shared: &Shared, level: usize, out: MergeOutput) -> MergeOutput {
    let state = crate::store::flats::flattened(shared, level, out.state);
    let state = if crate::store::filters::wanted(shared) {
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

/// The tables after a merge: `old` with each of `outputs` in its place.
pub(crate) fn swapped(old: &[TableState], outputs: Vec<(usize, Merged)>) -> Arc<Vec<TableState>> {
    let mut tables = old.to_vec();
    for (g, m) in outputs {
        tables[g] = m.out.state;
    }
    Arc::new(tables)
}

/// Fingerprints in the tables of every level after a merge.
pub(super) fn table_fingerprints(
    old: &[TableState],
    per_level: usize,
    outputs: &[(usize, Merged)],
) -> u64 {
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
