//! A merge into level 0 and the ids: the truth of each fingerprint's ids,
//! the id blocks of the merged blocks built, and the overlay reconciled
//! with them.

use super::overlay::{apply, difference, Entries, Overlay};
use super::{ids_at, IdTable};
use crate::error::Result;
use crate::format::ids::IdBlockWriter;
use crate::table::{Added, Bytes, TableState};

/// The ids of fingerprints as of one state, read in increasing order of
/// fingerprint from table 0 block by block (as a merge writes them), with
/// the overlay applied and `extra` pairs (sorted) added.
pub(crate) struct Truth<'a> {
    pub(super) table0: &'a TableState,
    pub(super) ids: &'a IdTable,
    /// The overlay's fingerprints with their entries, increasing, and
    /// where the last one asked for stands among them: most fingerprints
    /// a merge writes have no entry, and walking this list beside them
    /// costs far less than a look-up in the overlay's map (a cache miss or
    /// two) for each; those that have one read it from here too.
    pub(super) listed: Vec<(u64, Entries)>,
    pub(super) listed_at: usize,
    pub(super) extra: &'a [(u64, u64)],
    pub(super) block: Option<usize>,
    pub(super) values: Vec<u64>,
    /// The id block of `block`.
    pub(super) id_bytes: Option<Bytes<'a>>,
    pub(super) at: usize,
    /// Where the last fingerprint asked for starts in `extra`.
    pub(super) extra_at: usize,
}

impl<'a> Truth<'a> {
    pub fn new(
        table0: &'a TableState,
        ids: &'a IdTable,
        overlay: &'a Overlay,
        extra: &'a [(u64, u64)],
    ) -> Self {
        Self {
            table0,
            ids,
            listed: overlay.sorted(),
            listed_at: 0,
            extra,
            block: None,
            values: Vec::new(),
            id_bytes: None,
            at: 0,
            extra_at: 0,
        }
    }

    /// `fp`'s ids in its id block (none when table 0 does not hold it),
    /// into `out` (replaced). Cheapest when called in increasing order.
    pub fn base(&mut self, fp: u64, out: &mut Vec<u64>) -> Result<()> {
        out.clear();
        let keys = self.table0.keys();
        // Fingerprints come in increasing order, most in the block of the
        // one before.
        let j = match self.block {
            Some(j) if keys[j] <= fp && keys.get(j + 1).is_none_or(|&next| fp < next) => j,
            _ => match crate::index::locate(keys, fp) {
                Some(j) => j,
                None => return Ok(()),
            },
        };
        if self.block != Some(j) {
            self.block = None;
            self.table0.decode_block(j, &mut self.values)?;
            self.id_bytes = Some(self.ids.block(self.table0, j)?);
            self.block = Some(j);
            self.at = 0;
        }
        if self.at > 0 && self.values[self.at - 1] >= fp {
            self.at = 0;
        }
        while self.at < self.values.len() && self.values[self.at] < fp {
            self.at += 1;
        }
        if let (Some(&v), Some(bytes)) = (self.values.get(self.at), &self.id_bytes) {
            if v == fp {
                ids_at(bytes, keys[j], self.at, out)?;
            }
        }
        Ok(())
    }

    /// `extra`'s ids of `fp`, increasing (found from where the last
    /// call's were: fingerprints come in increasing order).
    fn extra(&mut self, fp: u64) -> &'a [(u64, u64)] {
        let extra = self.extra;
        let from = seek(extra, self.extra_at, fp, |&(f, _)| f);
        let mut to = from;
        while to < extra.len() && extra[to].0 == fp {
            to += 1;
        }
        self.extra_at = from;
        &extra[from..to]
    }

    /// Whether the overlay has entries for `fp` (cheapest when called in
    /// increasing order).
    pub fn in_overlay(&mut self, fp: u64) -> bool {
        self.listed_at = seek(&self.listed, self.listed_at, fp, |&(f, _)| f);
        self.listed.get(self.listed_at).map(|&(f, _)| f) == Some(fp)
    }

    /// `fp`'s ids into `out` (replaced); returns how many came from
    /// `extra` alone.
    pub fn ids(&mut self, fp: u64, out: &mut Vec<u64>) -> Result<u64> {
        self.base(fp, out)?;
        if self.in_overlay(fp) {
            apply(self.listed[self.listed_at].1.as_slice(), out, 0);
        }
        Ok(add_ids(self.extra(fp), out))
    }
}

/// Adds the ids of `pairs` (one fingerprint's, sorted) to increasing
/// `ids`; returns how many were not there.
pub(super) fn add_ids(pairs: &[(u64, u64)], ids: &mut Vec<u64>) -> u64 {
    let mut new = 0;
    for &(_, id) in pairs {
        if let Err(at) = ids.binary_search(&id) {
            ids.insert(at, id);
            new += 1;
        }
    }
    new
}

/// Builds the id blocks of table 0's new blocks as a merge writes them
/// (see [`merge_observed`](crate::table::merge_observed)).
pub(crate) struct IdBuilder<'a> {
    pub(super) truth: Truth<'a>,
    pub(super) writer: IdBlockWriter,
    pub(super) scratch: Vec<u64>,
    /// The id blocks, keyed like their table-0 blocks.
    pub blocks: Added,
    /// Pairs of `extra` that were not stored before.
    pub new_pairs: u64,
    /// The fingerprints of the new blocks that had overlay entries (folded
    /// into their id blocks), increasing.
    pub folded: Vec<u64>,
}

impl<'a> IdBuilder<'a> {
    pub fn new(truth: Truth<'a>) -> Self {
        Self {
            truth,
            writer: IdBlockWriter::new(),
            scratch: Vec::new(),
            folded: Vec::new(),
            blocks: Added::default(),
            new_pairs: 0,
        }
    }

    /// The id block of the new table-0 block `key` holding `values`.
    pub fn observe(&mut self, key: u64, values: &[u64]) -> Result<()> {
        for &fp in values {
            // An overlay holds no empty list (see `Overlay::set`).
            if self.truth.in_overlay(fp) {
                self.folded.push(fp);
            }
            self.new_pairs += self.truth.ids(fp, &mut self.scratch)?;
            self.writer.push(&self.scratch);
        }
        self.blocks.push(key, &self.writer.finish());
        Ok(())
    }
}

/// What a merge of table 0 does to the ids: the changes to the `ids`
/// family, and the overlay after it.
pub(crate) struct Reconciled {
    /// The overlay of the new state.
    pub overlay: Overlay,
    /// `ids` keys to delete, then keys to put (`true`: added, `false`:
    /// removed), then keys to set in order (`None`: delete), last: the
    /// corrections of [`Reconcile::patch`].
    pub deletes: Vec<(u64, u64)>,
    pub puts: Vec<(u64, u64, bool)>,
    pub fixes: Vec<(u64, u64, Option<bool>)>,
    /// Whether the family's new content (the overlay as it was then) is
    /// written already, after emptying it, so that only the `fixes` made
    /// since are left to write (`deletes` and `puts` are then empty).
    pub written_whole: bool,
    /// Whether writers were switched to the other `ids` family at the
    /// snapshot (see [`IdFamilies`](crate::store::id_families::IdFamilies)): when
    /// written whole, only the family of the snapshot's pairs was emptied,
    /// and the keys written since are still there.
    pub switched: bool,
}

/// Level 0's unpermuted table before a merge and its id blocks: where a
/// fingerprint's ids in level 0 are read.
pub(crate) struct Base<'a> {
    /// Table 0 of level 0 (the identity permutation).
    pub table: &'a TableState,
    /// Its id blocks.
    pub ids: &'a IdTable,
}

impl Base<'_> {
    /// The ids of `fp` in its id block (none when the table does not hold
    /// it), into `out` (replaced).
    pub fn ids_into(&self, fp: u64, out: &mut Vec<u64>) -> Result<()> {
        out.clear();
        if let Some((j, position)) = self.table.position(fp)? {
            self.ids.ids_into(self.table, j, position, out)?;
        }
        Ok(())
    }
}

/// A merge of table 0, as the overlay's reconciliation sees it: the
/// overlay once `new0`, table 0 merged from `base`'s with the
/// (unpermuted, sorted) `adds` and `removes`, and its new id blocks
/// (`written`, built from the `snapshot` overlay and `extra` pairs) are
/// swapped in is, for every fingerprint with entries then or now, the
/// difference between what it stores now (with `extra`) and what its id
/// block holds after the merge. Entries folded into new id blocks go;
/// changes made since the snapshot stay, against the new id blocks.
///
/// Only a fingerprint the merge adds, removes or folds (`folded`: those
/// of the new id blocks that had entries in `snapshot`), or whose entries
/// changed since the snapshot, can have other entries after the merge;
/// every other one keeps its entries as they are, unwritten (the pairs of
/// other levels' fingerprints and of pending ones, most of the overlay,
/// are not rewritten by every merge into level 0).
pub(crate) struct Reconcile<'a> {
    pub base: Base<'a>,
    pub snapshot: &'a Overlay,
    pub extra: &'a [(u64, u64)],
    pub adds: &'a [u64],
    /// Fingerprints of `adds` known not to be in level 0, increasing.
    pub fresh: &'a [u64],
    pub removes: &'a [u64],
    pub folded: &'a [u64],
    pub new0: &'a TableState,
    pub written: &'a Added,
}

impl Reconcile<'_> {
    /// The reconciliation against the snapshot itself, as if nothing were
    /// written since it was taken: every fingerprint with entries in it.
    /// Writes made since are corrected by [`patch`](Self::patch).
    pub fn all(&self) -> Result<Reconciled> {
        let listed = self.snapshot.sorted();
        let mut out = Reconciled {
            overlay: Overlay::with_capacity(listed.len().max(self.overlay_room())),
            deletes: Vec::new(),
            puts: Vec::new(),
            fixes: Vec::new(),
            written_whole: false,
            switched: false,
        };
        let mut scratch = Vec::new();
        let mut roles = self.roles();
        // Each lookup is a cache miss in a map of millions: the snapshot's
        // entries are read as its map is walked, and `out.overlay` (which
        // holds none of them yet) is touched only to insert.
        for (fp, current) in &listed {
            let (fp, current) = (*fp, current.as_slice());
            let roles = roles.of(fp);
            match self.one(current, true, fp, roles, &mut scratch)? {
                None => out.overlay.replace(fp, current),
                Some(entries) => {
                    out.deletes.extend(current.iter().map(|&(id, _)| (fp, id)));
                    out.puts
                        .extend(entries.iter().map(|&(id, added)| (fp, id, added)));
                    if !entries.is_empty() {
                        out.overlay.replace(fp, &entries);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Corrects `done`, [`all`](Self::all) against the snapshot, for
    /// writes made since: `changed` (increasing) holds every fingerprint
    /// whose entries `now` may hold otherwise than the snapshot. Each of
    /// them has every key `done` or `now` gives it that its entries do
    /// not deleted, then its entries put, in `fixes` (written after
    /// `done`'s deletes and puts, which the puts override).
    ///
    /// `pending` tells whether a fingerprint is pending now, and so in no
    /// level's tables: one the merge does not involve keeps its entries
    /// and keys as `now` has them, the common case (new fingerprints
    /// written while a merge ran) and one with no key to correct (unless
    /// `done` is [`written_whole`](Reconciled::written_whole)).
    pub fn patch(
        &self,
        done: &mut Reconciled,
        now: &Overlay,
        changed: &[u64],
        pending: impl Fn(u64) -> bool,
    ) -> Result<()> {
        let mut scratch = Vec::new();
        let mut roles = self.roles();
        for &fp in changed {
            let roles = roles.of(fp);
            let current = now.get(fp);
            // `done` wrote keys only for fingerprints the merge involves,
            // unless it wrote the family whole (which then empties the
            // keys writers put since; or, with writers switched to the
            // other family, puts back the snapshot's entries, keys a
            // fingerprint without any then has only from writers since).
            let kept = !done.written_whole || (done.switched && self.snapshot.get(fp).is_empty());
            if kept && !roles.involved() && (pending(fp) || !rewritten(self.new0, self.written, fp))
            {
                done.overlay.replace(fp, current);
                continue;
            }
            let unchanged = current == self.snapshot.get(fp);
            let entries = match self.one(current, unchanged, fp, roles, &mut scratch)? {
                None => current.to_vec(),
                Some(entries) => entries,
            };
            // A key put again needs no delete before it (the later write
            // of a key in a batch is the one that stays): each is an entry
            // RocksDB sorts, flushes and compacts away.
            let not_put = |id: &u64| entries.binary_search_by_key(id, |&(e, _)| e).is_err();
            let mut stale: Vec<u64> = done
                .overlay
                .get(fp)
                .iter()
                .chain(current)
                .map(|&(id, _)| id)
                .filter(not_put)
                .collect();
            stale.sort_unstable();
            stale.dedup();
            done.fixes
                .extend(stale.into_iter().map(|id| (fp, id, None)));
            done.fixes
                .extend(entries.iter().map(|&(id, added)| (fp, id, Some(added))));
            done.overlay.replace(fp, &entries);
        }
        Ok(())
    }

    /// Fingerprints the overlay is given room for after the merge: a sixth
    /// of level 0. The pairs of the other levels and of pending
    /// fingerprints reach a third of level 0 and more by the next merge
    /// into it, and writes then grow its maps, a shard at a time (see
    /// [`Overlay`]). Room for all of them from the start costs elsewhere:
    /// the next merge copies every bucket under the state's read lock,
    /// and memory peaks higher (`bench/RESULTS.md`).
    fn overlay_room(&self) -> usize {
        usize::try_from(self.new0.fingerprints() / 6).unwrap_or(usize::MAX)
    }

    /// What the merge does to each fingerprint, asked in increasing order:
    /// each of its lists is walked once beside them instead of searched
    /// for each.
    fn roles(&self) -> RoleWalk<'_> {
        RoleWalk {
            adds: Walk::new(self.adds),
            removes: Walk::new(self.removes),
            folded: Walk::new(self.folded),
            extra: Walk::new(self.extra),
            fresh: Walk::new(self.fresh),
        }
    }

    /// `fp`'s entries after the merge, or `None` when they stay as they
    /// are now, `current` (`unchanged`: the same as in the snapshot;
    /// `old_base`: scratch space).
    fn one(
        &self,
        current: &[(u64, bool)],
        unchanged: bool,
        fp: u64,
        roles: Roles,
        old_base: &mut Vec<u64>,
    ) -> Result<Option<Vec<(u64, bool)>>> {
        if !roles.involved() && unchanged {
            return Ok(None);
        }
        // The common case of a merge into level 0, most of what it moves:
        // a fingerprint new to level 0 lands in a new block, whose id
        // block the merge built from the snapshot's entries; unchanged
        // since, and with no pairs beside them, it keeps none.
        if roles.fresh && !roles.removed && !roles.extra && unchanged {
            debug_assert!(rewritten(self.new0, self.written, fp));
            return Ok(Some(Vec::new()));
        }
        // A fingerprint moving into level 0 was not in it.
        let in_old = if roles.fresh {
            old_base.clear();
            false
        } else {
            self.base.ids_into(fp, old_base)?;
            self.base.table.contains(fp)?
        };
        let in_new = (in_old && !roles.removed) || roles.added;
        let extra = self.extra;
        let from = extra.partition_point(|&(f, _)| f < fp);
        let to = from + extra[from..].partition_point(|&(f, _)| f == fp);
        let with_extra = |ids: &mut Vec<u64>| {
            add_ids(&extra[from..to], ids);
        };
        let mut truth = old_base.clone();
        apply(current, &mut truth, 0);
        with_extra(&mut truth);
        let new_base = if !in_new {
            Vec::new()
        } else if rewritten(self.new0, self.written, fp) {
            let mut ids = old_base.clone();
            self.snapshot.apply(fp, &mut ids);
            with_extra(&mut ids);
            ids
        } else {
            old_base.clone()
        };
        Ok(Some(difference(&new_base, &truth)))
    }
}

/// What a merge does to one fingerprint: whether it adds it to level 0,
/// removes it, folds its overlay entries into its id block, gives it
/// `extra` pairs, and whether it is known not to be in level 0 before.
#[derive(Debug, Clone, Copy)]
pub(super) struct Roles {
    pub(super) added: bool,
    pub(super) removed: bool,
    pub(super) folded: bool,
    pub(super) extra: bool,
    pub(super) fresh: bool,
}

/// The lists of a [`Reconcile`] walked beside increasing fingerprints.
pub(super) struct RoleWalk<'a> {
    pub(super) adds: Walk<'a, u64>,
    pub(super) removes: Walk<'a, u64>,
    pub(super) folded: Walk<'a, u64>,
    pub(super) extra: Walk<'a, (u64, u64)>,
    pub(super) fresh: Walk<'a, u64>,
}

impl RoleWalk<'_> {
    /// What the merge does to `fp` (not below the fingerprint asked about
    /// before, for the walk to stay linear).
    fn of(&mut self, fp: u64) -> Roles {
        Roles {
            added: self.adds.has(fp, |&f| f),
            removed: self.removes.has(fp, |&f| f),
            folded: self.folded.has(fp, |&f| f),
            extra: self.extra.has(fp, |&(f, _)| f),
            fresh: self.fresh.has(fp, |&f| f),
        }
    }
}

impl Roles {
    /// Whether the merge changes the fingerprint's placement or pairs.
    fn involved(&self) -> bool {
        self.added || self.removed || self.folded || self.extra
    }
}

/// A walk over a list sorted by fingerprint, cheapest when asked about
/// increasing fingerprints.
pub(crate) struct Walk<'a, T> {
    pub(super) items: &'a [T],
    pub(super) at: usize,
}

impl<'a, T> Walk<'a, T> {
    pub fn new(items: &'a [T]) -> Self {
        Self { items, at: 0 }
    }

    /// Whether an item of fingerprint `fp` is listed.
    pub fn has(&mut self, fp: u64, key: impl Fn(&T) -> u64) -> bool {
        self.at = seek(self.items, self.at, fp, &key);
        self.items.get(self.at).is_some_and(|x| key(x) == fp)
    }
}

/// Where the first item of `items` (sorted by `key`) whose fingerprint is
/// not below `fp` stands, found from `at`, the answer for the fingerprint
/// asked about before: galloped forward while fingerprints increase (the
/// way merges ask), searched anew when one goes back.
///
/// The gallop doubles its step until it passes `fp`, then searches the
/// last step: a walk asked about every item costs a comparison or two an
/// item, and one asked about a few fingerprints far apart in a long list
/// (a catch-up's slice of fingerprints written during a merge, against
/// the millions the merge moves) costs a logarithm of the gap, not every
/// item between.
pub(super) fn seek<T>(items: &[T], at: usize, fp: u64, key: impl Fn(&T) -> u64) -> usize {
    let mut lo = at.min(items.len());
    if lo > 0 && items.get(lo - 1).is_some_and(|x| key(x) >= fp) {
        return items.partition_point(|x| key(x) < fp);
    }
    // Every item before `lo` is below `fp`.
    let mut step = 1;
    while items.get(lo + step - 1).is_some_and(|x| key(x) < fp) {
        lo += step;
        step = step.saturating_mul(2);
    }
    let end = lo.saturating_add(step).min(items.len());
    lo + items[lo..end].partition_point(|x| key(x) < fp)
}

/// Whether the block of `new0` that holds `fp`'s place is among `written`.
pub(super) fn rewritten(new0: &TableState, written: &Added, fp: u64) -> bool {
    crate::index::locate(new0.keys(), fp)
        .is_some_and(|j| written.keys().binary_search(&new0.keys()[j]).is_ok())
}

/// The fingerprints of `state`'s overlay whose id blocks a merge into
/// level 0 should rewrite: those in level 0 and not tombstoned (a
/// tombstoned one leaves the tables, and a pending one or one of another
/// level has no id block); increasing.
pub(crate) fn to_fold(
    plan: &crate::plan::Plan,
    state: &crate::store::state::State,
) -> Result<Vec<u64>> {
    let mut fold = Vec::new();
    for fp in state.overlay.fingerprints() {
        if !state.pending.contains(plan, fp)
            && !state.tombstones.contains(&fp)
            && state.in_base(plan, fp)?
        {
            fold.push(fp);
        }
    }
    fold.sort_unstable();
    Ok(fold)
}
