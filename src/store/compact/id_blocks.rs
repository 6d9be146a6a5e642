//! A merge into level 0's id blocks: the overlay reconciled with the
//! blocks rewritten (outside the commit lock, then caught up and
//! corrected under it), and the id blocks and overlay entries written.

use std::sync::Arc;

use super::Gathered;
use crate::error::Result;
use crate::format::keys;
use crate::store::files::Merged;
use crate::store::id_families::IdsWriter;
use crate::store::ids::{Base, IdTable, Overlay, Reconcile, Reconciled};
use crate::store::shared::Shared;
use crate::table::TableState;

/// What the merge of table 0 builds the id blocks of its new blocks from
/// (see [`ids`](crate::store::ids)).
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
pub(super) fn with_reconcile<T>(
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
pub(super) const CATCH_UP_SLICE: usize = 16_384;

/// A catch-up stops once a round finds fewer fingerprints written than
/// this, or after [`CATCH_UP_ROUNDS`] rounds: the commit reconciles the
/// rest under the commit lock.
pub(super) const CATCH_UP_LEFT: usize = 16_384;

/// Rounds of a catch-up at most (writers faster than it would keep it
/// going).
pub(super) const CATCH_UP_ROUNDS: usize = 8;

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
pub(super) fn catch_up(
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
pub(super) fn rebuilt_id_table(g: &Gathered, outputs: &[(usize, Merged)]) -> Result<IdTable> {
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
/// [`ids::Reconcile`](crate::store::ids::Reconcile)) to `batch`, under the commit lock; returns the id
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
/// [`IdFamilies::other_emptied`]: crate::store::id_families::IdFamilies::other_emptied
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
pub(super) fn write_fixes(
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
pub(super) fn put_whole<'a>(
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
pub(super) fn write_ids_whole(
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
pub(super) fn ids_better_whole(reconciled: &Reconciled) -> bool {
    let per_key = reconciled.deletes.len() + reconciled.puts.len() + reconciled.fixes.len();
    rewrite_whole(reconciled.overlay.len(), per_key)
}

/// Whether a family is better emptied by one range delete and written
/// again with its `after` keys than changed by `per_key` puts and deletes:
/// every key is an entry RocksDB sorts when it flushes its memtable.
pub(super) fn rewrite_whole(after: usize, per_key: usize) -> bool {
    after < per_key
}
