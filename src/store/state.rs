//! The in-memory view of the store that queries read: the table snapshots,
//! the pending fingerprints (appended but not yet merged into blocks) and
//! the tombstones (deleted from the tables but still in their blocks).
//!
//! The tables are those of every level (see [`levels`](super::levels)):
//! table `g = l * T + t` is table `t` of level `l`. A fingerprint `x` is
//! live iff `x` is pending, or it is in a level and not tombstoned.
//! Invariants: the levels are disjoint; tombstones ⊆ tables; no pending
//! fingerprint is in the tables.

use std::sync::Arc;

use super::ids::{parsed_at, FpSet, IdPlace, IdTable, Overlay};
use super::listing::{window, Listing};
use super::pending::Pending;
use crate::error::Result;
use crate::plan::Plan;
use crate::table::TableState;

/// Fingerprints whose ids [`State::ids_of_many`] looks up together.
pub const IDS_TOGETHER: usize = 16;

/// Parts of a [`State`] a commit replaced, kept until the commit's locks
/// are released: freeing an overlay or a set of millions of entries
/// takes tens of milliseconds, which writers and readers would otherwise
/// wait through.
#[derive(Default)]
pub(crate) struct Retired(Vec<Box<dyn std::any::Any + Send>>);

impl Retired {
    /// Keeps `old` until this is dropped.
    pub fn keep<T: Send + 'static>(&mut self, old: T) {
        self.0.push(Box::new(old));
    }
}

/// Everything a query reads, swapped or updated only under the store's
/// state lock.
#[derive(Debug, Clone)]
pub struct State {
    /// One snapshot per table of every level, level by level; replaced
    /// whole by a compaction.
    pub tables: Arc<Vec<TableState>>,
    /// Tables per level (the plan's).
    pub per_level: usize,
    /// Appended, not yet merged.
    pub pending: Pending,
    /// Every fingerprint of the levels above level 0 (tombstoned or not),
    /// once built (see [`upper`](super::upper)): queries probe it with
    /// level 0's tables instead of probing those levels' tables. `None`
    /// until every table is held in memory (then queries probe every
    /// level's tables).
    pub upper: Option<Arc<Pending>>,
    /// Deleted, not yet removed from the blocks.
    pub tombstones: FpSet,
    /// Number of (fingerprint, id) pairs.
    pub ids: u64,
    /// The id blocks of table 0's blocks; replaced with the tables.
    pub id_table: Arc<IdTable>,
    /// Pairs not in the id blocks (see [`Overlay`]).
    pub overlay: Overlay,
}

impl State {
    /// Puts each `(t, table)` of `built` in place of table `t`, when the
    /// tables are still `read` (the snapshot they were built from outside
    /// the lock; a merge may have swapped in others meanwhile, which
    /// then stay).
    pub fn replace_tables(
        &mut self,
        read: &Arc<Vec<TableState>>,
        built: impl IntoIterator<Item = (usize, TableState)>,
    ) {
        if !Arc::ptr_eq(&self.tables, read) {
            return;
        }
        let mut new = read.to_vec();
        for (t, table) in built {
            new[t] = table;
        }
        self.tables = Arc::new(new);
    }

    /// Number of levels.
    pub fn levels(&self) -> usize {
        self.tables.len() / self.per_level.max(1)
    }

    /// Table 0 of level `l` (unpermuted: every fingerprint of the level,
    /// in increasing order).
    pub fn level(&self, l: usize) -> &TableState {
        &self.tables[l * self.per_level]
    }

    /// The tables of level `l`.
    pub fn level_tables(&self, l: usize) -> &[TableState] {
        &self.tables[l * self.per_level..(l + 1) * self.per_level]
    }

    /// Fingerprints (tombstoned or not) of each level, level 0 first.
    pub fn level_sizes(&self) -> Vec<u64> {
        (0..self.levels())
            .map(|l| self.level(l).fingerprints())
            .collect()
    }

    /// The level holding `fp` (tombstoned or not), if one does.
    pub fn level_of(&self, plan: &Plan, fp: u64) -> Result<Option<usize>> {
        let Some(spec) = plan.tables().first() else {
            return Ok(None);
        };
        let x = spec.permutation.apply(fp);
        for l in 0..self.levels() {
            let table = self.level(l);
            if table.fingerprints() > 0 && table.contains(x)? {
                return Ok(Some(l));
            }
        }
        Ok(None)
    }

    /// Asks the processor for what [`level_of`](Self::level_of) reads
    /// first for `fp` (each level's membership filter) and for the
    /// directory entries of the pending runs that
    /// [`Pending::contains`](super::pending::Pending::contains) reads
    /// first, so that the look-ups of several fingerprints overlap.
    #[inline]
    pub fn prefetch_level_of(&self, plan: &Plan, fp: u64) {
        let Some(spec) = plan.tables().first() else {
            return;
        };
        let x = spec.permutation.apply(fp);
        for l in 0..self.levels() {
            let table = self.level(l);
            if table.fingerprints() > 0 {
                table.prefetch_contains(x);
            }
        }
        self.pending.touch_directory(0, (x, x));
    }

    /// The second stage of [`prefetch_level_of`](Self::prefetch_level_of),
    /// once its directory entries have come: asks for the pending values
    /// they point at. (A writer's batch that finds millions pending waits
    /// on one or two cache misses a run otherwise.)
    #[inline]
    pub fn prefetch_pending_of(&self, plan: &Plan, fp: u64) {
        if let Some(spec) = plan.tables().first() {
            let x = spec.permutation.apply(fp);
            self.pending.touch_values(0, (x, x));
        }
    }

    /// Whether `fp` is in the compressed tables of any level (tombstoned
    /// or not).
    pub fn in_tables(&self, plan: &Plan, fp: u64) -> Result<bool> {
        Ok(self.level_of(plan, fp)?.is_some())
    }

    /// Whether `fp` is in level 0 (whose fingerprints have id blocks).
    pub fn in_base(&self, plan: &Plan, fp: u64) -> Result<bool> {
        match (self.tables.first(), plan.tables().first()) {
            (Some(table), Some(spec)) => table.contains(spec.permutation.apply(fp)),
            _ => Ok(false),
        }
    }

    /// The tables a query probes for the plan's tables `probe`: those of
    /// level 0 (which carry the probes of the pending fingerprints and of
    /// [`upper`](Self::upper)), then, while `upper` is not built, those of
    /// every other level holding fingerprints.
    pub fn probes(&self, probe: &[usize]) -> Vec<usize> {
        let mut out = Vec::with_capacity(probe.len());
        self.probes_into(probe, &mut out);
        out
    }

    /// [`probes`](Self::probes) into `out` (emptied first).
    pub fn probes_into(&self, probe: &[usize], out: &mut Vec<usize>) {
        out.clear();
        for l in 0..self.levels() {
            if l == 0 || (self.upper.is_none() && self.level(l).fingerprints() > 0) {
                out.extend(probe.iter().map(|&t| l * self.per_level + t));
            }
        }
    }

    /// Fingerprints in the tables of every level.
    pub fn table_fingerprints(&self) -> u64 {
        (0..self.levels())
            .map(|l| self.level(l).fingerprints())
            .sum()
    }

    /// Whether a read of this state may fetch a block from RocksDB: a
    /// table (or the id table) kept on disk, or one held in memory with a
    /// block not read yet. Such a read finds, under a block's key, what
    /// the last commit wrote there.
    pub fn reads_stored_blocks(&self) -> bool {
        self.tables.iter().any(|t| !t.in_memory() || t.has_unread()) || self.id_table.reads_source()
    }

    /// The id block holding `fp`'s ids in level 0 (shared), its key and
    /// `fp`'s position in it; none when level 0 does not hold `fp`.
    pub fn base_block(&self, plan: &Plan, fp: u64) -> Result<Option<IdPlace>> {
        let (Some(table0), Some(spec)) = (self.tables.first(), plan.tables().first()) else {
            return Ok(None);
        };
        let Some((j, position)) = table0.position(spec.permutation.apply(fp))? else {
            return Ok(None);
        };
        Ok(Some(IdPlace {
            bytes: self.id_table.shared_block(table0, j)?,
            key: table0.keys()[j],
            position,
        }))
    }

    /// The ids of `fp` in its id block (none when the tables do not hold
    /// it), into `out` (replaced).
    pub fn base_ids(&self, plan: &Plan, fp: u64, out: &mut Vec<u64>) -> Result<()> {
        out.clear();
        let (Some(table0), Some(spec)) = (self.tables.first(), plan.tables().first()) else {
            return Ok(());
        };
        let base = super::ids::Base {
            table: table0,
            ids: &self.id_table,
        };
        base.ids_into(spec.permutation.apply(fp), out)
    }

    /// The ids stored for `fp`, increasing, into `out` (replaced).
    pub fn ids_of(&self, plan: &Plan, fp: u64, out: &mut Vec<u64>) -> Result<()> {
        self.base_ids(plan, fp, out)?;
        self.overlay.apply(fp, out);
        Ok(())
    }

    /// [`ids_of`](Self::ids_of) for each of `fps`, as `listing` lists
    /// them, appended to `out` one list after the other, and for each
    /// into `spans` (appended) where its list ends in `out` and how many
    /// ids it has: table 0's probe stages, the id blocks' headers,
    /// the lines of the positions' ids and their reads run for
    /// [`IDS_TOGETHER`] fingerprints at a time, each stage for all before
    /// the next, so their cache misses overlap.
    pub fn ids_of_many(
        &self,
        plan: &Plan,
        fps: &[u64],
        listing: Listing,
        out: &mut Vec<u64>,
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<()> {
        let (Some(table0), Some(spec)) = (self.tables.first(), plan.tables().first()) else {
            spans.extend(fps.iter().map(|_| (out.len(), 0)));
            return Ok(());
        };
        for fps in fps.chunks(IDS_TOGETHER) {
            let mut xs = [0u64; IDS_TOGETHER];
            let mut keys: [std::ops::Range<usize>; IDS_TOGETHER] = Default::default();
            let mut blocks = [0usize; IDS_TOGETHER];
            for ((x, keys), &fp) in xs.iter_mut().zip(&mut keys).zip(fps) {
                *x = spec.permutation.apply(fp);
                *keys = table0.probe_keys(*x);
            }
            let xs = &xs[..fps.len()];
            for ((b, &x), keys) in blocks.iter_mut().zip(xs).zip(&keys) {
                *b = table0.probe_block(keys.clone(), x, x);
                self.id_table.touch_slot(*b);
            }
            for (&b, &x) in blocks.iter().zip(xs) {
                table0.probe_touch(b, x, x);
                self.id_table.touch_block(b);
            }
            let mut at = [None; IDS_TOGETHER];
            for ((&b, &x), at) in blocks.iter().zip(xs).zip(&mut at) {
                *at = table0.position_from(table0.probe_start_at(b, x), x)?;
                if let Some((j, position)) = *at {
                    self.id_table.touch_ids(j, position);
                }
            }
            for (at, &fp) in at.iter().zip(fps) {
                let start = out.len();
                if listing.is_all() {
                    if let Some((j, position)) = *at {
                        self.id_table.ids_into(table0, j, position, out)?;
                    }
                    self.overlay.apply_from(fp, out, start);
                    spans.push((out.len(), out.len() - start));
                    continue;
                }
                let bytes = match *at {
                    Some((j, position)) => Some((self.id_table.block(table0, j)?, j, position)),
                    None => None,
                };
                let block = match &bytes {
                    Some((bytes, j, position)) => {
                        Some((parsed_at(bytes, table0.keys()[*j], *position)?, *position))
                    }
                    None => None,
                };
                let place = block.as_ref().map(|(b, position)| (b, *position));
                let entries = self.overlay.entries(fp);
                let (list, removed) = entries.map_or((&[][..], 0), |e| (e.as_slice(), e.removed()));
                let count = window(place, list, removed, listing, out);
                spans.push((out.len(), count));
            }
        }
        Ok(())
    }

    /// The counters record describing this state.
    pub fn counters(&self) -> crate::format::records::Counters {
        crate::format::records::Counters {
            ids: self.ids,
            pending: self.pending.len() as u64,
            tombstones: self.tombstones.len() as u64,
            table_fingerprints: self.table_fingerprints(),
        }
    }

    /// Number of live fingerprints.
    pub fn fingerprints(&self) -> u64 {
        self.table_fingerprints()
            .saturating_sub(self.tombstones.len() as u64)
            + self.pending.len() as u64
    }
}
