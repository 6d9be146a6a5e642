//! Near-duplicate joins over fingerprints held in memory: the work of one
//! task of a distributed join (Manku, Jain, Das Sarma, WWW 2007, §3.3).
//!
//! A cluster job cannot keep one store: it routes every fingerprint, once
//! per table of a [`Plan`], to the task that owns its table prefix (its
//! [key](Join::key)), and each task finds the pairs within distance `k`
//! among what it received. The pigeonhole plan guarantees that two
//! fingerprints within `k` share the prefix of at least one table, so
//! some task sees every pair; a task of table `t` reports a pair only when
//! `t` is the *first* table whose prefix the two share
//! ([`first_table`](Join::first_table)), so every pair is reported exactly
//! once without a global distinct.
//!
//! ```
//! use simstore::join::Join;
//!
//! let join = Join::new(3, 1_000)?;
//! let fps = [0x0123_4567_89ab_cdef_u64, 0x0123_4567_89ab_cdee, 0xfedc_ba98_7654_3210];
//! // Every task of a cluster job gets the fingerprints of its keys; here
//! // one task per table gets them all.
//! let mut pairs = Vec::new();
//! for table in 0..join.tables() {
//!     pairs.extend(join.self_pairs(table, &fps));
//! }
//! assert_eq!(pairs.len(), 1);
//! assert_eq!((pairs[0].a, pairs[0].b, pairs[0].distance), (fps[1], fps[0], 1));
//! # Ok::<(), simstore::Error>(())
//! ```

use crate::index::Directory;
use crate::plan::{Plan, TableSpec};
use crate::Result;

/// A pair of fingerprints within the join's distance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pair {
    /// The smaller fingerprint of a self-join's pair; the left one of a
    /// cross join's.
    pub a: u64,
    /// The other fingerprint.
    pub b: u64,
    /// Their Hamming distance.
    pub distance: u32,
}

/// The tables of a join: which prefix of which permutation routes a
/// fingerprint to a task, and the kernels a task runs.
#[derive(Debug, Clone)]
pub struct Join {
    plan: Plan,
}

impl Join {
    /// The plan a store of `expected_size` fingerprints at maximum distance
    /// `k` would use (never the one-table plan: a join must be exact).
    ///
    /// # Errors
    /// [`Error::Plan`](crate::Error::Plan) when `k` is beyond
    /// [`MAX_SUPPORTED_DISTANCE`](crate::plan::MAX_SUPPORTED_DISTANCE).
    pub fn new(max_distance: u8, expected_size: u64) -> Result<Self> {
        Ok(Self {
            plan: Plan::for_size(max_distance, expected_size, None)?,
        })
    }

    /// The pigeonhole plan with `blocks` blocks (`C(blocks, k)` tables):
    /// more blocks give longer prefixes (smaller groups to compare) and
    /// more copies of every fingerprint to route.
    ///
    /// # Errors
    /// [`Error::Plan`](crate::Error::Plan) when the plan does not exist
    /// (`blocks ≤ k`, too many tables, `k` too large).
    pub fn with_blocks(max_distance: u8, blocks: u8) -> Result<Self> {
        Ok(Self {
            plan: Plan::new(max_distance, blocks)?,
        })
    }

    /// The largest distance a pair may have.
    pub fn max_distance(&self) -> u8 {
        self.plan.max_distance()
    }

    /// How many blocks the 64 bits are split into.
    pub fn blocks(&self) -> u8 {
        self.plan.blocks()
    }

    /// How many tables (copies of every fingerprint) the join routes.
    pub fn tables(&self) -> usize {
        self.plan.tables().len()
    }

    /// The width of table `table`'s prefix, the bits of its keys.
    ///
    /// # Panics
    /// When `table` is not below [`tables`](Self::tables).
    pub fn prefix_bits(&self, table: usize) -> u8 {
        self.plan.tables()[table].prefix_bits
    }

    /// The key of `fp` in table `table`: its permuted top
    /// [`prefix_bits`](Self::prefix_bits) bits. Two fingerprints share a
    /// table's prefix exactly when their keys in it are equal.
    ///
    /// # Panics
    /// When `table` is not below [`tables`](Self::tables).
    #[inline]
    pub fn key(&self, table: usize, fp: u64) -> u64 {
        key_of(&self.plan.tables()[table], fp)
    }

    /// The first table whose prefix `a` and `b` share, if any (always
    /// some table when they are within the join's distance).
    #[inline]
    pub fn first_table(&self, a: u64, b: u64) -> Option<usize> {
        self.plan
            .tables()
            .iter()
            .position(|spec| key_of(spec, a) == key_of(spec, b))
    }

    /// The pairs of distinct fingerprints of `fps` within the join's
    /// distance whose first shared table is `table`, each once, as
    /// `a < b`, in no particular order. Repeated fingerprints count once.
    ///
    /// Run by the task of `table` on the fingerprints routed to it: pairs
    /// whose keys differ are never compared, so the fingerprints of many
    /// keys may be passed at once.
    ///
    /// # Panics
    /// When `table` is not below [`tables`](Self::tables).
    pub fn self_pairs(&self, table: usize, fps: &[u64]) -> Vec<Pair> {
        let spec = &self.plan.tables()[table];
        let permuted = sorted_permuted(spec, fps);
        let k = u32::from(self.max_distance());
        let mut out = Vec::new();
        let mut near = Vec::new();
        for run in prefix_runs(spec, &permuted) {
            for (i, &p) in run.iter().enumerate() {
                near.clear();
                crate::simd::near::near(&run[i + 1..], p, k, &mut near);
                let a = spec.permutation.invert(p);
                for &(q, distance) in &near {
                    let b = spec.permutation.invert(q);
                    if self.first_table(a, b) == Some(table) {
                        out.push(Pair {
                            a: a.min(b),
                            b: a.max(b),
                            distance,
                        });
                    }
                }
            }
        }
        out
    }

    /// The pairs `(a from left, b from right)` with `a ≠ b` within the
    /// join's distance whose first shared table is `table`, each once
    /// (repeated fingerprints on either side count once).
    ///
    /// A self-join splits a key held by too many fingerprints into
    /// disjoint chunks and runs this on every two of them.
    ///
    /// # Panics
    /// When `table` is not below [`tables`](Self::tables).
    pub fn cross_pairs(&self, table: usize, left: &[u64], right: &[u64]) -> Vec<Pair> {
        let spec = &self.plan.tables()[table];
        let left = sorted_permuted(spec, left);
        let right = sorted_permuted(spec, right);
        let k = u32::from(self.max_distance());
        let mut out = Vec::new();
        let mut near = Vec::new();
        let mut j = 0;
        for run in prefix_runs(spec, &left) {
            let (lo, hi) = spec.prefix_range(run[0]);
            while j < right.len() && right[j] < lo {
                j += 1;
            }
            let end = j + right[j..].partition_point(|&q| q <= hi);
            let other = &right[j..end];
            if other.is_empty() {
                continue;
            }
            for &p in run {
                near.clear();
                crate::simd::near::near(other, p, k, &mut near);
                let a = spec.permutation.invert(p);
                for &(q, distance) in &near {
                    let b = spec.permutation.invert(q);
                    if a != b && self.first_table(a, b) == Some(table) {
                        out.push(Pair { a, b, distance });
                    }
                }
            }
            j = end;
        }
        out
    }

    /// An in-memory index of `fps` (every table, sorted) answering
    /// queries exactly: the broadcast side of a batch match.
    pub fn index(&self, fps: &[u64]) -> JoinIndex {
        let tables = self
            .plan
            .tables()
            .iter()
            .map(|spec| Directed::new(spec, sorted_permuted(spec, fps)))
            .collect();
        JoinIndex {
            join: self.clone(),
            tables,
        }
    }
}

/// The fingerprints of a batch in every table of a [`Join`], answering
/// which of them lie within the join's distance of a query
/// ([`Join::index`]).
#[derive(Debug, Clone)]
pub struct JoinIndex {
    join: Join,
    tables: Vec<Directed>,
}

/// One table of a [`JoinIndex`]: its sorted permuted fingerprints and a
/// directory of where each value of their top bits starts, so that a
/// query finds its prefix run without a binary search over the whole
/// table (whose probes would miss the cache).
#[derive(Debug, Clone)]
struct Directed {
    sorted: Vec<u64>,
    /// Where each value of their top bits starts, over no more bits than
    /// the table's prefix (so a prefix run lies in one bucket).
    directory: Directory,
}

/// The widest directory: 2^24 + 1 entries of 4 bytes.
const MAX_DIRECTORY_BITS: u32 = 24;

impl Directed {
    fn new(spec: &TableSpec, sorted: Vec<u64>) -> Self {
        let wanted = (usize::BITS - sorted.len().leading_zeros()).max(1);
        let bits = wanted
            .min(u32::from(spec.prefix_bits).max(1))
            .min(MAX_DIRECTORY_BITS);
        let directory = Directory::with_bits(&sorted, bits);
        Self { sorted, directory }
    }

    /// The fingerprints between `lo` and `hi`, which share their top
    /// directory bits (the directory is never wider than the prefix).
    #[inline]
    fn run(&self, lo: u64, hi: u64) -> &[u64] {
        let bucket = &self.sorted[self.directory.bucket(lo)];
        let start = bucket.partition_point(|&x| x < lo);
        let end = start + bucket[start..].partition_point(|&x| x <= hi);
        &bucket[start..end]
    }
}

impl JoinIndex {
    /// How many distinct fingerprints the index holds.
    pub fn len(&self) -> usize {
        self.tables[0].sorted.len()
    }

    /// Whether the index holds no fingerprint.
    pub fn is_empty(&self) -> bool {
        self.tables[0].sorted.is_empty()
    }

    /// Appends `(fingerprint, distance)` for every indexed fingerprint
    /// within the join's distance of `q`, each once, in no particular
    /// order.
    pub fn matches(&self, q: u64, out: &mut Vec<(u64, u32)>) {
        let k = u32::from(self.join.max_distance());
        for (t, (spec, table)) in self.join.plan.tables().iter().zip(&self.tables).enumerate() {
            let p = spec.permutation.apply(q);
            let (lo, hi) = spec.prefix_range(p);
            let from = out.len();
            crate::simd::near::near(table.run(lo, hi), p, k, out);
            // Keep a match only in the first table the two share.
            let mut keep = from;
            for i in from..out.len() {
                let (m, d) = out[i];
                let fp = spec.permutation.invert(m);
                if self.join.first_table(q, fp) == Some(t) {
                    out[keep] = (fp, d);
                    keep += 1;
                }
            }
            out.truncate(keep);
        }
    }
}

#[inline]
fn key_of(spec: &TableSpec, fp: u64) -> u64 {
    let permuted = spec.permutation.apply(fp);
    match spec.prefix_bits {
        0 => 0,
        bits if bits >= 64 => permuted,
        bits => permuted >> (64 - bits),
    }
}

fn sorted_permuted(spec: &TableSpec, fps: &[u64]) -> Vec<u64> {
    let mut permuted: Vec<u64> = fps.iter().map(|&fp| spec.permutation.apply(fp)).collect();
    permuted.sort_unstable();
    permuted.dedup();
    permuted
}

/// The runs of a sorted slice of permuted fingerprints that share the
/// table's prefix.
fn prefix_runs<'a>(spec: &'a TableSpec, sorted: &'a [u64]) -> impl Iterator<Item = &'a [u64]> {
    let mut rest = sorted;
    std::iter::from_fn(move || {
        let first = *rest.first()?;
        let (_, hi) = spec.prefix_range(first);
        let len = rest.partition_point(|&x| x <= hi);
        let (run, tail) = rest.split_at(len);
        rest = tail;
        Some(run)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::TestRng;
    use std::collections::BTreeSet;

    fn brute(fps: &[u64], k: u32) -> BTreeSet<Pair> {
        let distinct: BTreeSet<u64> = fps.iter().copied().collect();
        let v: Vec<u64> = distinct.into_iter().collect();
        let mut out = BTreeSet::new();
        for (i, &a) in v.iter().enumerate() {
            for &b in &v[i + 1..] {
                let distance = (a ^ b).count_ones();
                if distance <= k {
                    out.insert(Pair { a, b, distance });
                }
            }
        }
        out
    }

    /// Random fingerprints, near copies of a few of them and repeats.
    fn clustered(rng: &mut TestRng, n: usize, k: u32) -> Vec<u64> {
        let mut fps: Vec<u64> = Vec::with_capacity(n);
        while fps.len() < n {
            let r = rng.next_u64();
            if fps.is_empty() || r.is_multiple_of(3) {
                fps.push(rng.next_u64());
            } else {
                let base = fps[(r as usize >> 8) % fps.len()];
                let mut fp = base;
                for _ in 0..(rng.next_u64() % u64::from(k + 2)) {
                    fp ^= 1 << (rng.next_u64() % 64);
                }
                fps.push(fp);
            }
        }
        fps
    }

    fn joins() -> Vec<Join> {
        vec![
            Join::with_blocks(0, 1).unwrap(),
            Join::with_blocks(1, 2).unwrap(),
            Join::with_blocks(2, 3).unwrap(),
            Join::with_blocks(3, 4).unwrap(),
            Join::with_blocks(3, 5).unwrap(),
            Join::with_blocks(4, 6).unwrap(),
            Join::new(3, 1_000_000_000).unwrap(),
        ]
    }

    #[test]
    fn self_pairs_over_all_tables_equal_brute_force_each_pair_once() {
        let mut rng = TestRng::new(11);
        for join in joins() {
            let k = u32::from(join.max_distance());
            for n in [0, 1, 2, 300, 3000] {
                let fps = clustered(&mut rng, n, k);
                let mut got = Vec::new();
                for t in 0..join.tables() {
                    got.extend(join.self_pairs(t, &fps));
                }
                let set: BTreeSet<Pair> = got.iter().copied().collect();
                assert_eq!(set.len(), got.len(), "a pair reported twice");
                assert_eq!(set, brute(&fps, k), "k={k} r={} n={n}", join.blocks());
            }
        }
    }

    /// Splitting the fingerprints of one task among tasks by key, as a
    /// cluster does, changes nothing.
    #[test]
    fn routing_by_key_finds_the_same_pairs() {
        let mut rng = TestRng::new(12);
        let join = Join::with_blocks(3, 4).unwrap();
        let fps = clustered(&mut rng, 4000, 3);
        let mut got = BTreeSet::new();
        for t in 0..join.tables() {
            for task in 0..8u64 {
                let mine: Vec<u64> = fps
                    .iter()
                    .copied()
                    .filter(|&fp| join.key(t, fp).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 61 == task)
                    .collect();
                for p in join.self_pairs(t, &mine) {
                    assert!(got.insert(p));
                }
            }
        }
        assert_eq!(got, brute(&fps, 3));
    }

    /// A key split into disjoint chunks, every chunk against itself and
    /// every later chunk, gives the key's pairs once.
    #[test]
    fn chunks_of_a_hot_key_give_its_pairs_once() {
        let mut rng = TestRng::new(13);
        let join = Join::with_blocks(3, 4).unwrap();
        // Many fingerprints sharing table 0's 16-bit key.
        let mut fps: Vec<u64> = clustered(&mut rng, 3000, 3)
            .into_iter()
            .map(|fp| fp & 0x0000_ffff_ffff_ffff | 0xabcd_0000_0000_0000)
            .collect();
        fps.extend(clustered(&mut rng, 500, 3));
        let chunks: Vec<Vec<u64>> = (0..4u64)
            .map(|c| fps.iter().copied().filter(|fp| fp % 4 == c).collect())
            .collect();
        let mut got = BTreeSet::new();
        for t in 0..join.tables() {
            for i in 0..4 {
                for p in join.self_pairs(t, &chunks[i]) {
                    assert!(got.insert(p));
                }
                for j in i + 1..4 {
                    for p in join.cross_pairs(t, &chunks[i], &chunks[j]) {
                        let p = Pair {
                            a: p.a.min(p.b),
                            b: p.a.max(p.b),
                            distance: p.distance,
                        };
                        assert!(got.insert(p), "{p:?} twice");
                    }
                }
            }
        }
        assert_eq!(got, brute(&fps, 3));
    }

    #[test]
    fn index_answers_equal_brute_force() {
        let mut rng = TestRng::new(14);
        for join in joins() {
            let k = join.max_distance();
            let batch = clustered(&mut rng, 2000, u32::from(k));
            let index = join.index(&batch);
            let distinct: BTreeSet<u64> = batch.iter().copied().collect();
            assert_eq!(index.len(), distinct.len());
            let mut queries = clustered(&mut rng, 500, u32::from(k));
            queries.extend(batch.iter().take(200).map(|fp| fp ^ 1));
            let mut out = Vec::new();
            for &q in &queries {
                out.clear();
                index.matches(q, &mut out);
                let got: BTreeSet<(u64, u32)> = out.iter().copied().collect();
                assert_eq!(got.len(), out.len(), "a match reported twice");
                let want: BTreeSet<(u64, u32)> = distinct
                    .iter()
                    .map(|&fp| (fp, (fp ^ q).count_ones()))
                    .filter(|&(_, d)| d <= u32::from(k))
                    .collect();
                assert_eq!(got, want);
            }
        }
        let empty = Join::new(3, 10).unwrap().index(&[]);
        assert!(empty.is_empty());
    }

    #[test]
    fn bad_plans_are_errors() {
        assert!(Join::with_blocks(3, 3).is_err());
        assert!(Join::new(9, 10).is_err());
    }
}
