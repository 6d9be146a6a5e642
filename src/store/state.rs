//! The in-memory view of the store that queries read: the table snapshots,
//! the pending fingerprints (appended but not yet merged into blocks) and
//! the tombstones (deleted from the tables but still in their blocks).
//!
//! The tables are those of every level (see [`levels`](super::levels)):
//! table `g = l * T + t` is table `t` of level `l`. A fingerprint `x` is
//! live iff `x` is pending, or it is in a level and not tombstoned.
//! Invariants: the levels are disjoint; tombstones ⊆ tables; no pending
//! fingerprint is in the tables.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use super::ids::{IdTable, Overlay};
use crate::error::Result;
use crate::plan::Plan;
use crate::table::TableState;

/// Pending fingerprints, kept once per table under that table's
/// permutation so a query probes them exactly like the table itself.
#[derive(Debug, Clone)]
pub struct Pending {
    per_table: Vec<BTreeSet<u64>>,
}

/// Pending sets smaller than this are built on the calling thread.
const PARALLEL_BUILD_MIN: usize = 1 << 16;

impl Pending {
    /// An empty set for `tables` tables.
    pub fn new(tables: usize) -> Self {
        Self {
            per_table: vec![BTreeSet::new(); tables],
        }
    }

    /// The set holding `fps` (distinct), built per table from sorted
    /// runs rather than by one insertion per fingerprint per table, the
    /// tables spread over the cores (recovery after a crash rebuilds it
    /// from up to a merge threshold of pending fingerprints).
    pub fn from_fingerprints(plan: &Plan, fps: &[u64]) -> Self {
        let build = |spec: &crate::plan::TableSpec| -> BTreeSet<u64> {
            let mut permuted: Vec<u64> = fps.iter().map(|&fp| spec.permutation.apply(fp)).collect();
            permuted.sort_unstable();
            permuted.into_iter().collect()
        };
        let specs = plan.tables();
        let threads = if fps.len() < PARALLEL_BUILD_MIN {
            1
        } else {
            super::parallel::cores()
        };
        let per_table = super::parallel::map_indexed(specs.len(), threads, |t| build(&specs[t]));
        Self { per_table }
    }

    /// Number of pending fingerprints.
    pub fn len(&self) -> usize {
        self.per_table.first().map_or(0, BTreeSet::len)
    }

    /// Adds a fingerprint.
    pub fn insert(&mut self, plan: &Plan, fp: u64) {
        for (set, spec) in self.per_table.iter_mut().zip(plan.tables()) {
            set.insert(spec.permutation.apply(fp));
        }
    }

    /// Adds fingerprints (distinct, none pending), a table at a time in
    /// increasing permuted order: consecutive insertions then descend the
    /// same part of the tree, in the cache, instead of a random path
    /// each; a batch of at least a quarter of the set is merged with it
    /// in one pass instead.
    pub fn insert_many(&mut self, plan: &Plan, fps: &[u64]) {
        if fps.len() < 64 {
            for &fp in fps {
                self.insert(plan, fp);
            }
            return;
        }
        let mut permuted = Vec::with_capacity(fps.len());
        for (set, spec) in self.per_table.iter_mut().zip(plan.tables()) {
            permuted.clear();
            permuted.extend(fps.iter().map(|&fp| spec.permutation.apply(fp)));
            permuted.sort_unstable();
            if permuted.len() * 4 >= set.len() {
                let mut batch: BTreeSet<u64> = permuted.iter().copied().collect();
                set.append(&mut batch);
            } else {
                for &x in &permuted {
                    set.insert(x);
                }
            }
        }
    }

    /// Removes a fingerprint.
    pub fn remove(&mut self, plan: &Plan, fp: u64) {
        for (set, spec) in self.per_table.iter_mut().zip(plan.tables()) {
            set.remove(&spec.permutation.apply(fp));
        }
    }

    /// Removes fingerprints that are pending, given in increasing order:
    /// one at a time when they are few, otherwise by rebuilding the set
    /// from those that stay (a compaction that ran beside writers removes
    /// most of the set at once, and building from sorted runs costs far
    /// less than a tree removal per fingerprint per table, all under the
    /// state lock).
    pub fn remove_sorted(&mut self, plan: &Plan, fps: &[u64]) {
        debug_assert!(fps.windows(2).all(|w| w[0] < w[1]));
        if fps.len() * 2 < self.len() {
            for &fp in fps {
                self.remove(plan, fp);
            }
            return;
        }
        let mut keep = self.all(plan);
        keep.retain(|x| fps.binary_search(x).is_err());
        *self = Self::from_fingerprints(plan, &keep);
    }

    /// Whether a fingerprint is pending.
    pub fn contains(&self, plan: &Plan, fp: u64) -> bool {
        match (self.per_table.first(), plan.tables().first()) {
            (Some(set), Some(spec)) => set.contains(&spec.permutation.apply(fp)),
            _ => false,
        }
    }

    /// Permuted pending fingerprints of table `t` within `lo..=hi`.
    pub fn range(&self, t: usize, lo: u64, hi: u64) -> impl Iterator<Item = u64> + '_ {
        // One descent of the tree (a bounded range searches for both
        // ends): a query probes the pending set once per table.
        self.per_table
            .get(t)
            .filter(|s| !s.is_empty())
            .into_iter()
            .flat_map(move |s| s.range(lo..).copied().take_while(move |&x| x <= hi))
    }

    /// All pending fingerprints, unpermuted, in increasing order.
    pub fn all(&self, plan: &Plan) -> Vec<u64> {
        let (Some(set), Some(spec)) = (self.per_table.first(), plan.tables().first()) else {
            return Vec::new();
        };
        let mut v: Vec<u64> = set.iter().map(|&p| spec.permutation.invert(p)).collect();
        v.sort_unstable();
        v
    }
}

/// Fingerprints whose ids [`State::ids_of_many`] looks up together.
pub const IDS_TOGETHER: usize = 16;

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
    /// Deleted, not yet removed from the blocks.
    pub tombstones: HashSet<u64>,
    /// Number of (fingerprint, id) pairs.
    pub ids: u64,
    /// The id blocks of table 0's blocks; replaced with the tables.
    pub id_table: Arc<IdTable>,
    /// Pairs not in the id blocks (see [`Overlay`]).
    pub overlay: Overlay,
}

impl State {
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
    /// level 0 (which carry the pending fingerprints' probes), then those
    /// of every other level holding fingerprints.
    pub fn probes(&self, probe: &[usize]) -> Vec<usize> {
        let mut out = Vec::with_capacity(probe.len());
        for l in 0..self.levels() {
            if l == 0 || self.level(l).fingerprints() > 0 {
                out.extend(probe.iter().map(|&t| l * self.per_level + t));
            }
        }
        out
    }

    /// Fingerprints in the tables of every level.
    pub fn table_fingerprints(&self) -> u64 {
        (0..self.levels())
            .map(|l| self.level(l).fingerprints())
            .sum()
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

    /// [`ids_of`](Self::ids_of) for each of `fps`, into `out` (one list
    /// each, appended to): table 0's probe stages and the id block reads
    /// run for [`IDS_TOGETHER`] fingerprints at a time, each stage for all
    /// before the next, so their cache misses overlap.
    pub fn ids_of_many(&self, plan: &Plan, fps: &[u64], out: &mut [Vec<u64>]) -> Result<()> {
        debug_assert_eq!(fps.len(), out.len());
        let (Some(table0), Some(spec)) = (self.tables.first(), plan.tables().first()) else {
            return Ok(());
        };
        for (fps, out) in fps.chunks(IDS_TOGETHER).zip(out.chunks_mut(IDS_TOGETHER)) {
            let mut xs = [0u64; IDS_TOGETHER];
            let mut blocks = [0usize; IDS_TOGETHER];
            for (x, &fp) in xs.iter_mut().zip(fps) {
                *x = spec.permutation.apply(fp);
            }
            let xs = &xs[..fps.len()];
            for (b, &x) in blocks.iter_mut().zip(xs) {
                *b = table0.probe_block(table0.probe_keys(x), x, x);
                self.id_table.touch_slot(*b);
            }
            for (&b, &x) in blocks.iter().zip(xs) {
                table0.probe_touch(b, x, x);
                self.id_table.touch_block(b);
            }
            for ((&b, &x), (&fp, ids)) in blocks.iter().zip(xs).zip(fps.iter().zip(out.iter_mut()))
            {
                if let Some((j, position)) = table0.position_from(table0.probe_start_at(b, x), x)? {
                    self.id_table.ids_into(table0, j, position, ids)?;
                }
                self.overlay.apply(fp, ids);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table's permuted set, as the plan's permutations of `fps`.
    fn expected(plan: &Plan, fps: &[u64]) -> Vec<Vec<u64>> {
        plan.tables()
            .iter()
            .map(|spec| {
                let mut v: Vec<u64> = fps.iter().map(|&x| spec.permutation.apply(x)).collect();
                v.sort_unstable();
                v
            })
            .collect()
    }

    #[test]
    fn removing_sorted_fingerprints_one_by_one_or_by_rebuilding_agree() {
        let plan = Plan::new(3, 5).unwrap();
        let mut rng = crate::test_rng::TestRng::new(1);
        let mut fps: Vec<u64> = (0..1000).map(|_| rng.next_u64()).collect();
        fps.sort_unstable();
        // A few (one at a time), then most of what is left (a rebuild).
        for removed in [
            fps.iter().step_by(50).copied().collect::<Vec<u64>>(),
            fps.iter().copied().filter(|v| v % 7 != 0).collect(),
        ] {
            let mut pending = Pending::from_fingerprints(&plan, &fps);
            pending.remove_sorted(&plan, &removed);
            let kept: Vec<u64> = fps
                .iter()
                .copied()
                .filter(|v| removed.binary_search(v).is_err())
                .collect();
            assert_eq!(pending.len(), kept.len());
            assert_eq!(pending.all(&plan), kept);
            for (t, want) in expected(&plan, &kept).iter().enumerate() {
                let got: Vec<u64> = pending.range(t, 0, u64::MAX).collect();
                assert_eq!(&got, want, "table {t}");
            }
        }
    }

    #[test]
    fn inserting_batches_of_every_size_matches_one_by_one() {
        let plan = Plan::new(3, 5).unwrap();
        let mut rng = crate::test_rng::TestRng::new(2);
        let mut many = Pending::new(plan.tables().len());
        let mut all = Vec::new();
        // Batches below the one-by-one size, into a larger set (sorted
        // insertions) and as large as the set or larger (a merge).
        for size in [10, 5000, 100, 3000, 20_000, 63, 64] {
            let batch: Vec<u64> = (0..size).map(|_| rng.next_u64()).collect();
            many.insert_many(&plan, &batch);
            all.extend_from_slice(&batch);
            let mut sorted = all.clone();
            sorted.sort_unstable();
            assert_eq!(many.len(), sorted.len());
            assert_eq!(many.all(&plan), sorted);
            for (t, want) in expected(&plan, &all).iter().enumerate() {
                let got: Vec<u64> = many.range(t, 0, u64::MAX).collect();
                assert_eq!(&got, want, "table {t}");
            }
        }
    }
}
