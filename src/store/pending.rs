//! The pending fingerprints: appended, not yet merged into a level.
//!
//! Each table keeps them under its own permutation, so a query probes
//! them exactly like the table. A table's set is a few sorted runs, each
//! at least twice as long as the next (like the digits of a binary
//! counter): a batch of insertions becomes a new run, merged with the
//! runs no longer than it, so a fingerprint is copied about
//! `log2(pending / batch)` times in sequential passes instead of walking a
//! tree at a random place per table; a probe searches each run through a
//! directory of its values' top bits, about one cache line a run.
//! Fingerprints removed one at a time (deleted while pending) are set
//! aside and skipped until enough of them gather to filter the runs.

use std::collections::HashSet;
use std::sync::Arc;

use crate::plan::Plan;

/// Pending fingerprints, kept once per table under that table's
/// permutation.
#[derive(Debug, Clone)]
pub struct Pending {
    per_table: Vec<Runs>,
    /// Pending fingerprints removed one at a time, still in `per_table`'s
    /// runs: per table, permuted.
    removed: Vec<HashSet<u64>>,
}

/// Pending sets smaller than this are built on the calling thread.
const PARALLEL_BUILD_MIN: usize = 1 << 16;

/// Removals set aside (see [`Pending::remove`]) before the runs are
/// filtered, at least.
const REMOVED_FOLD_MIN: usize = 4096;

impl Pending {
    /// An empty set for `tables` tables.
    pub fn new(tables: usize) -> Self {
        Self {
            per_table: vec![Runs::default(); tables],
            removed: vec![HashSet::new(); tables],
        }
    }

    /// The set holding `fps` (distinct), one sorted run per table, the
    /// tables spread over the cores (an open rebuilds it from every
    /// pending fingerprint, up to `Options::max_pending` of them).
    pub fn from_fingerprints(plan: &Plan, fps: &[u64]) -> Self {
        Self::from_permuted(Self::permuted(plan, fps))
    }

    /// The set holding, for each table, the permuted values `per_table[t]`
    /// (each sorted and distinct, all the permutations of one set of
    /// fingerprints), one run per table.
    pub fn from_permuted(per_table: Vec<Vec<u64>>) -> Self {
        debug_assert!(per_table.iter().all(|v| v.windows(2).all(|w| w[0] < w[1])));
        let per_table: Vec<Runs> = per_table
            .into_iter()
            .map(|values| {
                let mut runs = Runs::default();
                runs.push(values);
                runs
            })
            .collect();
        Self {
            removed: vec![HashSet::new(); per_table.len()],
            per_table,
        }
    }

    /// Table `t`'s values (permuted), in increasing order.
    pub fn table_values(&self, t: usize) -> Vec<u64> {
        let (Some(runs), Some(removed)) = (self.per_table.get(t), self.removed.get(t)) else {
            return Vec::new();
        };
        let mut v: Vec<u64> = if removed.is_empty() {
            runs.range(0, u64::MAX).collect()
        } else {
            runs.range(0, u64::MAX)
                .filter(|p| !removed.contains(p))
                .collect()
        };
        // The runs one after the other: the stable sort merges them (it
        // finds runs already in order), where the unstable one sorts the
        // whole anew; merges and their commits read millions of pending
        // values with writers held off.
        v.sort();
        v
    }

    /// Bytes the runs and their directories take.
    pub fn heap_bytes(&self) -> u64 {
        let runs = self.per_table.iter().flat_map(|r| &r.runs);
        runs.map(|r| (r.values.capacity() * 8 + r.directory.capacity() * 4) as u64)
            .sum()
    }

    /// Number of pending fingerprints.
    pub fn len(&self) -> usize {
        match (self.per_table.first(), self.removed.first()) {
            (Some(runs), Some(removed)) => runs.len() - removed.len(),
            _ => 0,
        }
    }

    /// Adds a fingerprint (not pending).
    pub fn insert(&mut self, plan: &Plan, fp: u64) {
        self.insert_many(plan, &[fp]);
    }

    /// Adds fingerprints (distinct, none pending): per table, one new run
    /// (a fingerprint removed while it was set aside is simply kept).
    pub fn insert_many(&mut self, plan: &Plan, fps: &[u64]) {
        for ((runs, removed), spec) in self
            .per_table
            .iter_mut()
            .zip(&mut self.removed)
            .zip(plan.tables())
        {
            let mut permuted = permuted_sorted(spec, fps);
            if !removed.is_empty() {
                permuted.retain(|p| !removed.remove(p));
            }
            runs.push(permuted);
        }
    }

    /// What [`insert_many`](Self::insert_many) of `fps` (distinct, none
    /// pending) would make of this set, computed from a shared reference:
    /// a writer merges the runs (tens of milliseconds at millions pending)
    /// under the state's read lock, with queries going on, and installs
    /// them with [`apply_insert`](Self::apply_insert) under the write
    /// lock. `None` while removals are set aside (they may meet `fps`).
    pub fn prepare_insert(&self, plan: &Plan, fps: &[u64]) -> Option<PreparedInsert> {
        if self.removals_aside() {
            return None;
        }
        let per_table = self
            .per_table
            .iter()
            .zip(plan.tables())
            .map(|(runs, spec)| runs.pushed(permuted_sorted(spec, fps)))
            .collect();
        Some(PreparedInsert { per_table })
    }

    /// Installs `prepared` (see [`prepare_insert`](Self::prepare_insert)),
    /// which must come from this set with no change since; returns `false`,
    /// changing nothing, when the runs it replaces are no longer the last
    /// ones or removals were set aside since (then
    /// [`insert_many`](Self::insert_many) is the way).
    pub fn apply_insert(&mut self, prepared: PreparedInsert) -> bool {
        let unchanged = self.per_table.len() == prepared.per_table.len()
            && !self.removals_aside()
            && self
                .per_table
                .iter()
                .zip(&prepared.per_table)
                .all(|(runs, p)| p.still_fits(runs));
        if !unchanged {
            return false;
        }
        for (runs, p) in self.per_table.iter_mut().zip(prepared.per_table) {
            runs.install(p);
        }
        true
    }

    /// Whether fingerprints removed one at a time are set aside, still in
    /// the runs.
    fn removals_aside(&self) -> bool {
        self.removed.iter().any(|r| !r.is_empty())
    }

    /// Removes a pending fingerprint: set aside, and skipped by every
    /// read until the runs are filtered (once the set-aside ones are an
    /// eighth of the set, or [`REMOVED_FOLD_MIN`]).
    pub fn remove(&mut self, plan: &Plan, fp: u64) {
        if !self.contains(plan, fp) {
            return;
        }
        for (removed, spec) in self.removed.iter_mut().zip(plan.tables()) {
            removed.insert(spec.permutation.apply(fp));
        }
        let aside = self.removed.first().map_or(0, HashSet::len);
        if aside >= REMOVED_FOLD_MIN.max(self.len() / 8) {
            self.fold_removed();
        }
    }

    /// Filters the set-aside removals out of the runs.
    fn fold_removed(&mut self) {
        for (runs, removed) in self.per_table.iter_mut().zip(&mut self.removed) {
            if !removed.is_empty() {
                runs.retain(|p| !removed.contains(&p));
                removed.clear();
            }
        }
    }

    /// Removes fingerprints that are pending, given in increasing order,
    /// by filtering each run in one pass (a compaction that ran beside
    /// writers removes most of the set at once, under the state lock).
    pub fn remove_sorted(&mut self, plan: &Plan, fps: &[u64]) {
        debug_assert!(fps.windows(2).all(|w| w[0] < w[1]));
        if fps.is_empty() {
            return;
        }
        self.remove_permuted(&Self::permuted(plan, fps));
    }

    /// `fps` under each table's permutation, in increasing order: what
    /// [`remove_permuted`](Self::remove_permuted) takes, computed before
    /// the state lock is taken (the tables spread over the cores).
    pub fn permuted(plan: &Plan, fps: &[u64]) -> Vec<Vec<u64>> {
        let specs = plan.tables();
        let threads = if fps.len() < PARALLEL_BUILD_MIN {
            1
        } else {
            super::parallel::cores()
        };
        super::parallel::map_indexed(specs.len(), threads, |t| permuted_sorted(&specs[t], fps))
    }

    /// Removes fingerprints given per table under its permutation, each
    /// list increasing (see [`permuted`](Self::permuted)); those not
    /// pending are ignored.
    pub fn remove_permuted(&mut self, per_table: &[Vec<u64>]) {
        if per_table.iter().all(Vec::is_empty) {
            return;
        }
        self.fold_removed();
        for (runs, permuted) in self.per_table.iter_mut().zip(per_table) {
            for run in &mut runs.runs {
                // Both sorted: one walk through the run and the removals.
                let mut gone = permuted.iter().copied().peekable();
                if gone.peek().is_none_or(|&g| g > run.last()) {
                    continue;
                }
                Arc::make_mut(run).filter(|v| {
                    while gone.next_if(|&g| g < v).is_some() {}
                    gone.next_if_eq(&v).is_none()
                });
            }
            runs.runs.retain(|r| !r.values.is_empty());
        }
    }

    /// Whether a fingerprint is pending.
    pub fn contains(&self, plan: &Plan, fp: u64) -> bool {
        match (self.per_table.first(), plan.tables().first()) {
            (Some(runs), Some(spec)) => {
                let p = spec.permutation.apply(fp);
                runs.contains(p) && !self.removed[0].contains(&p)
            }
            _ => false,
        }
    }

    /// Calls `near(p, d)` for each permuted pending fingerprint `p` of
    /// table `t` within `lo..=hi` and at distance `d <= k` from `q` (in no
    /// particular order) until it returns `false`; returns whether it did.
    /// A query's probe of the pending set: each run's values in the range
    /// compared eight at a time where the processor can, the rare near one
    /// checked against the set-aside removals.
    #[inline(always)]
    pub fn near(
        &self,
        t: usize,
        (lo, hi): (u64, u64),
        q: u64,
        k: u32,
        mut near: impl FnMut(u64, u32) -> bool,
    ) -> bool {
        let (Some(runs), Some(removed)) = (self.per_table.get(t), self.removed.get(t)) else {
            return false;
        };
        for run in &runs.runs {
            let (from, to) = (run.lower_bound(lo), run.past(hi));
            let values = run.values.get(from..to).unwrap_or_default();
            // A set-aside removal is skipped.
            let stopped = crate::simd::near::each(values, q, k, |v, d| {
                (!removed.is_empty() && removed.contains(&v)) || near(v, d)
            });
            if stopped {
                return true;
            }
        }
        false
    }

    /// The first stage of a probe of table `t` for the range `lo..=hi`:
    /// asks the processor for each run's directory entries of the range,
    /// which [`touch_values`](Self::touch_values) reads (a query stages
    /// its probes of the pending set with those of the tables).
    #[inline(always)]
    pub fn touch_directory(&self, t: usize, (lo, hi): (u64, u64)) {
        for run in self.per_table.get(t).map_or(&[][..], |r| &r.runs[..]) {
            let (from, to) = run.tops(lo, hi);
            crate::simd::prefetch(run.directory.get(from..to + 2).unwrap_or_default());
        }
    }

    /// The second stage: asks for the values of each run that the range
    /// may hold, which [`near`](Self::near) reads.
    #[inline(always)]
    pub fn touch_values(&self, t: usize, (lo, hi): (u64, u64)) {
        for run in self.per_table.get(t).map_or(&[][..], |r| &r.runs[..]) {
            let (from, to) = run.tops(lo, hi);
            if let (Some(&from), Some(&to)) = (run.directory.get(from), run.directory.get(to + 1)) {
                crate::simd::prefetch(
                    run.values
                        .get(from as usize..to as usize)
                        .unwrap_or_default(),
                );
            }
        }
    }

    /// All pending fingerprints, unpermuted, in increasing order.
    pub fn all(&self, plan: &Plan) -> Vec<u64> {
        let Some(spec) = plan.tables().first() else {
            return Vec::new();
        };
        let mut v = self.table_values(0);
        v.iter_mut().for_each(|p| *p = spec.permutation.invert(*p));
        // Table 0's permutation is the identity in every plan, which
        // leaves `v` sorted (the sort then passes over it once).
        v.sort_unstable();
        v
    }
}

/// `fps` under `spec`'s permutation, in increasing order.
fn permuted_sorted(spec: &crate::plan::TableSpec, fps: &[u64]) -> Vec<u64> {
    super::sort::permuted_sorted(fps, &spec.permutation)
}

/// A batch of fingerprints made into the pending set's new runs outside
/// its lock (see [`Pending::prepare_insert`]).
#[derive(Debug)]
pub struct PreparedInsert {
    per_table: Vec<Pushed>,
}

/// One table's runs after a push: the first `kept` runs, then `last`
/// (none when nothing was pushed), merged from the runs after them
/// (`merged`, held so that a change to one of them copies it).
#[derive(Debug)]
struct Pushed {
    kept: usize,
    merged: Vec<Arc<Run>>,
    last: Option<Arc<Run>>,
}

impl Pushed {
    /// Whether `runs` still end with the runs this push merged, unchanged.
    fn still_fits(&self, runs: &Runs) -> bool {
        runs.runs.len() == self.kept + self.merged.len()
            && runs.runs[self.kept..]
                .iter()
                .zip(&self.merged)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

/// One table's pending values: sorted runs, each at least twice as long
/// as the next. Runs are shared between clones (a copy of the set costs
/// a pointer a run; a run is copied when a shared one changes).
#[derive(Debug, Clone, Default)]
struct Runs {
    runs: Vec<Arc<Run>>,
}

impl Runs {
    fn len(&self) -> usize {
        self.runs.iter().map(|r| r.values.len()).sum()
    }

    /// Adds `values` (sorted, in no run) as a run, then merges the last
    /// two runs while the last is at least half as long as the one
    /// before it.
    fn push(&mut self, values: Vec<u64>) {
        let pushed = self.pushed(values);
        self.install(pushed);
    }

    /// What [`push`](Self::push) of `values` makes: the runs kept and the
    /// new last one, merged from `values` and the runs after those kept.
    fn pushed(&self, values: Vec<u64>) -> Pushed {
        let mut kept = self.runs.len();
        if values.is_empty() {
            return Pushed {
                kept,
                merged: Vec::new(),
                last: None,
            };
        }
        let mut last = values;
        while let Some(before) = kept.checked_sub(1).map(|i| &self.runs[i]) {
            if before.values.len() > 2 * last.len() {
                break;
            }
            last = merged(&before.values, &last);
            kept -= 1;
        }
        Pushed {
            kept,
            merged: self.runs[kept..].to_vec(),
            last: Some(Arc::new(Run::new(last))),
        }
    }

    /// Makes `pushed` (from [`pushed`](Self::pushed) of these runs) the
    /// runs.
    fn install(&mut self, pushed: Pushed) {
        if let Some(last) = pushed.last {
            self.runs.truncate(pushed.kept);
            self.runs.push(last);
        }
    }

    /// Keeps the values `keep` accepts.
    fn retain(&mut self, mut keep: impl FnMut(u64) -> bool) {
        for run in &mut self.runs {
            Arc::make_mut(run).filter(&mut keep);
        }
        self.runs.retain(|r| !r.values.is_empty());
    }

    fn contains(&self, p: u64) -> bool {
        self.runs
            .iter()
            .any(|r| r.values.get(r.lower_bound(p)) == Some(&p))
    }

    fn range(&self, lo: u64, hi: u64) -> impl Iterator<Item = u64> + '_ {
        self.runs.iter().flat_map(move |r| {
            r.values[r.lower_bound(lo)..]
                .iter()
                .copied()
                .take_while(move |&v| v <= hi)
        })
    }
}

/// The two sorted, disjoint runs `a` and `b` as one.
fn merged(a: &[u64], b: &[u64]) -> Vec<u64> {
    // Without a branch on the comparison, which random fingerprints
    // mispredict about every other value: each step writes the smaller
    // and moves on in the run it came from (the runs share no value).
    let mut out = vec![0u64; a.len() + b.len()];
    let (mut i, mut j, mut o) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        let from_a = x < y;
        out[o] = if from_a { x } else { y };
        i += usize::from(from_a);
        j += usize::from(!from_a);
        o += 1;
    }
    let rest = if i < a.len() { &a[i..] } else { &b[j..] };
    out[o..].copy_from_slice(rest);
    out
}

/// Runs shorter than this are searched without a directory.
const DIRECTORY_MIN: usize = 64;

/// Directory entries (about four values each) a probe asks the
/// processor for at most.
const TOUCH_ENTRIES: usize = 16;

/// A sorted run and the directory of its values' top bits.
#[derive(Debug, Clone, Default)]
struct Run {
    values: Vec<u64>,
    /// For each value of the top `64 - shift` bits, the index of the first
    /// value with those top bits or more; one entry past them (empty for
    /// runs shorter than [`DIRECTORY_MIN`]).
    directory: Vec<u32>,
    shift: u32,
}

impl Run {
    /// The run of `values` (sorted), with a directory of about one entry
    /// per four values.
    fn new(values: Vec<u64>) -> Self {
        if values.len() < DIRECTORY_MIN || values.len() > u32::MAX as usize {
            return Self {
                values,
                directory: Vec::new(),
                shift: 64,
            };
        }
        let bits = values.len().ilog2() - 2;
        let shift = 64 - bits;
        let mut directory = Vec::with_capacity((1 << bits) + 1);
        for (i, &v) in values.iter().enumerate() {
            let top = (v >> shift) as usize;
            while directory.len() <= top {
                directory.push(i as u32);
            }
        }
        directory.resize((1 << bits) + 1, values.len() as u32);
        Self {
            values,
            directory,
            shift,
        }
    }

    /// Keeps the values `keep` accepts (visited in increasing order),
    /// the directory rebuilt when any goes.
    fn filter(&mut self, mut keep: impl FnMut(u64) -> bool) {
        let before = self.values.len();
        self.values.retain(|&v| keep(v));
        if self.values.len() != before {
            *self = Run::new(std::mem::take(&mut self.values));
        }
    }

    /// The largest value (0 for an empty run).
    fn last(&self) -> u64 {
        self.values.last().copied().unwrap_or(0)
    }

    /// The directory entries of `lo` and `hi`, at most [`TOUCH_ENTRIES`]
    /// apart (a probe asks for the cache lines of a range that long at
    /// most; the rest come as the scan reaches them).
    #[inline(always)]
    fn tops(&self, lo: u64, hi: u64) -> (usize, usize) {
        let from = self.top(lo);
        (from, self.top(hi).min(from + TOUCH_ENTRIES))
    }

    /// The directory entry of `x` (0 without a directory).
    #[inline(always)]
    fn top(&self, x: u64) -> usize {
        x.checked_shr(self.shift).unwrap_or(0) as usize
    }

    /// The index of the first value above `x`.
    #[inline]
    fn past(&self, x: u64) -> usize {
        x.checked_add(1)
            .map_or(self.values.len(), |next| self.lower_bound(next))
    }

    /// The index of the first value at least `x`.
    #[inline]
    fn lower_bound(&self, x: u64) -> usize {
        if self.directory.is_empty() {
            return self.values.partition_point(|&v| v < x);
        }
        let top = self.top(x);
        let (from, to) = (
            self.directory[top] as usize,
            self.directory[top + 1] as usize,
        );
        from + self.values[from..to].partition_point(|&v| v < x)
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

    /// Table `t`'s permuted pending fingerprints within `lo..=hi`, sorted.
    fn range(pending: &Pending, t: usize, lo: u64, hi: u64) -> Vec<u64> {
        let mut got = Vec::new();
        pending.near(t, (lo, hi), 0, 64, |p, d| {
            assert_eq!(d, p.count_ones());
            got.push(p);
            true
        });
        got.sort_unstable();
        got
    }

    /// `pending` holds exactly `fps`: its length, its fingerprints, each
    /// table's whole range and the ranges around a sample of values.
    fn check(plan: &Plan, pending: &Pending, fps: &[u64]) {
        let mut sorted = fps.to_vec();
        sorted.sort_unstable();
        assert_eq!(pending.len(), sorted.len());
        assert_eq!(pending.all(plan), sorted);
        for (t, want) in expected(plan, fps).iter().enumerate() {
            assert_eq!(&range(pending, t, 0, u64::MAX), want, "table {t}");
            for w in want.windows(3).step_by(97) {
                let got = range(pending, t, w[0] + 1, w[2]);
                assert_eq!(got, w[1..].to_vec(), "table {t} around {:x}", w[1]);
                let got = range(pending, t, w[0] + 1, w[1] - 1);
                assert!(
                    got.is_empty(),
                    "table {t} between {:x} and {:x}",
                    w[0],
                    w[1]
                );
                // Only those within the distance asked, and a stop stops.
                let q = w[1] ^ 0b111;
                let mut near = Vec::new();
                pending.near(t, (w[0], w[2]), q, 2, |p, _| {
                    near.push(p);
                    true
                });
                let want: Vec<u64> = w
                    .iter()
                    .copied()
                    .filter(|v| (v ^ q).count_ones() <= 2)
                    .collect();
                near.sort_unstable();
                assert_eq!(near, want);
                assert!(pending.near(t, (w[0], w[2]), w[1], 0, |_, _| false));
            }
        }
        for &fp in fps.iter().step_by(31) {
            assert!(pending.contains(plan, fp));
            assert!(!pending.contains(plan, fp ^ 1) || fps.contains(&(fp ^ 1)));
        }
    }

    #[test]
    fn removing_sorted_fingerprints_few_or_most() {
        let plan = Plan::new(3, 5).unwrap();
        let mut rng = crate::test_rng::TestRng::new(1);
        let mut fps: Vec<u64> = (0..1000).map(|_| rng.next_u64()).collect();
        fps.sort_unstable();
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
            check(&plan, &pending, &kept);
        }
    }

    #[test]
    fn inserting_batches_of_every_size_keeps_every_fingerprint() {
        let plan = Plan::new(3, 5).unwrap();
        let mut rng = crate::test_rng::TestRng::new(2);
        let mut many = Pending::new(plan.tables().len());
        let mut all = Vec::new();
        for size in [10, 5000, 100, 3000, 20_000, 63, 64, 1, 1, 1, 40_000] {
            let batch: Vec<u64> = (0..size).map(|_| rng.next_u64()).collect();
            many.insert_many(&plan, &batch);
            all.extend_from_slice(&batch);
            check(&plan, &many, &all);
            // The runs stay few: each at least twice as long as the next.
            for runs in &many.per_table {
                for w in runs.runs.windows(2) {
                    assert!(w[0].values.len() > 2 * w[1].values.len());
                }
            }
        }
    }

    #[test]
    fn batches_prepared_outside_the_set_match_inserts_made_in_it() {
        let plan = Plan::new(3, 5).unwrap();
        let mut rng = crate::test_rng::TestRng::new(4);
        let (mut direct, mut prepared) = (
            Pending::new(plan.tables().len()),
            Pending::new(plan.tables().len()),
        );
        let mut all = Vec::new();
        for size in [10, 5000, 100, 3000, 20_000, 0, 63, 64, 1, 1, 1, 40_000] {
            let batch: Vec<u64> = (0..size).map(|_| rng.next_u64()).collect();
            direct.insert_many(&plan, &batch);
            let made = prepared.prepare_insert(&plan, &batch).unwrap();
            assert!(prepared.apply_insert(made));
            all.extend_from_slice(&batch);
            check(&plan, &prepared, &all);
            for (a, b) in direct.per_table.iter().zip(&prepared.per_table) {
                let lens = |r: &Runs| r.runs.iter().map(|r| r.values.len()).collect::<Vec<_>>();
                assert_eq!(lens(a), lens(b));
            }
        }
        // Made from a set changed since: refused, the set unchanged.
        let batch: Vec<u64> = (0..700).map(|_| rng.next_u64()).collect();
        let stale = prepared.prepare_insert(&plan, &batch).unwrap();
        let other: Vec<u64> = (0..700).map(|_| rng.next_u64()).collect();
        prepared.insert_many(&plan, &other);
        all.extend_from_slice(&other);
        assert!(!prepared.apply_insert(stale));
        check(&plan, &prepared, &all);
        // A run merged by the batch filtered in place since: refused.
        let stale = prepared.prepare_insert(&plan, &batch).unwrap();
        let gone: Vec<u64> = {
            let mut v = other[..10].to_vec();
            v.sort_unstable();
            v
        };
        prepared.remove_sorted(&plan, &gone);
        all.retain(|x| gone.binary_search(x).is_err());
        assert!(!prepared.apply_insert(stale));
        check(&plan, &prepared, &all);
        // Removals set aside: not prepared at all.
        prepared.remove(&plan, all[0]);
        all.swap_remove(0);
        assert!(prepared.prepare_insert(&plan, &batch).is_none());
        check(&plan, &prepared, &all);
    }

    #[test]
    fn clustered_values_share_a_directory_entry() {
        // Values alike in their top bits all fall in one directory entry.
        let plan = Plan::new(3, 5).unwrap();
        let fps: Vec<u64> = (0..5000u64)
            .map(|i| 0xabcd_0000_0000_0000 | (i * 3))
            .collect();
        let pending = Pending::from_fingerprints(&plan, &fps);
        check(&plan, &pending, &fps);
        assert!(!pending.contains(&plan, 0xabcd_0000_0000_0001));
    }

    #[test]
    fn removals_one_at_a_time_interleaved_with_insertions_match_a_set() {
        let plan = Plan::new(3, 5).unwrap();
        let mut rng = crate::test_rng::TestRng::new(3);
        let mut pending = Pending::new(plan.tables().len());
        let mut model: Vec<u64> = Vec::new();
        for round in 0..60 {
            let batch: Vec<u64> = (0..300).map(|_| rng.next_u64()).collect();
            pending.insert_many(&plan, &batch);
            model.extend_from_slice(&batch);
            // Remove some one at a time (enough to fold the set-aside
            // ones now and then), and put a few of them back.
            let mut gone = Vec::new();
            for _ in 0..200 {
                if model.is_empty() {
                    break;
                }
                let i = (rng.next_u64() % model.len() as u64) as usize;
                let fp = model.swap_remove(i);
                pending.remove(&plan, fp);
                gone.push(fp);
            }
            // Removing what is not pending changes nothing.
            pending.remove(&plan, rng.next_u64());
            let back: Vec<u64> = gone.iter().copied().step_by(3).collect();
            if round % 2 == 0 {
                pending.insert_many(&plan, &back);
            } else {
                for &fp in &back {
                    pending.insert(&plan, fp);
                }
            }
            model.extend_from_slice(&back);
            check(&plan, &pending, &model);
        }
        let mut sorted = model.clone();
        sorted.sort_unstable();
        let half: Vec<u64> = sorted.iter().copied().step_by(2).collect();
        pending.remove_sorted(&plan, &half);
        let kept: Vec<u64> = sorted.iter().copied().skip(1).step_by(2).collect();
        check(&plan, &pending, &kept);
    }
}
