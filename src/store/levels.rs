//! Levels: when pending fingerprints and tombstones are merged, and into
//! which level.
//!
//! A store holds [`LEVELS`] levels, each a complete set of the plan's
//! permuted tables (table `g = l * T + t` is table `t` of level `l`, `T`
//! the plan's table count). Level 0 is the largest and the only one whose
//! fingerprints have id blocks. The last level is the *top*: pending
//! fingerprints are flushed into it, and it is rewritten by each flush
//! until it holds [`top_capacity`]. The levels between are *runs*: the
//! top is merged into the one still filling (or an empty one), which is
//! full at [`RUN_SHARE`]`⁻¹` of level 0 and is then left alone; once
//! every run is full, all of them (and the top) are merged into level 0
//! together.
//!
//! So level 0 is rewritten once per quarter of its size written, not
//! once per eighth as when one level of an eighth sits above it, and the
//! two small levels split the rest: the top's size is the geometric mean
//! of the flush and a run, which makes the rewrites of the two about
//! equal. A merge rewrites only the level it merges into (and empties
//! those merged from); grown by flushes of 65,536, a fingerprint is
//! written about 7.5 times in all at 20M and 11.7 at 100M (13.2 and 16.2
//! with levels of capacity `|L0| / 8^l`, each merged into the next), and
//! write amplification grows with log N, not N. `storage-format.md`
//! (Levels) argues the choice.

/// Levels every store of format 5 has (table families `LEVELS * T`).
pub(crate) const LEVELS: usize = 6;

/// A run is full once it holds `1 / RUN_SHARE` of level 0's
/// fingerprints.
pub(crate) const RUN_SHARE: u64 = 16;

/// One merge: what goes into level `target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Job {
    /// The level rewritten.
    pub target: usize,
    /// Levels whose fingerprints move into `target` (emptied), increasing.
    pub sources: Vec<usize>,
    /// Whether the pending fingerprints move into `target` too.
    pub pending: bool,
    /// Whether every overlay entry of a level-0 fingerprint is folded into
    /// its id block (only with `target` 0; any merge into level 0 folds
    /// those of the blocks it rewrites anyway).
    pub fold: bool,
}

impl Job {
    /// Everything (pending, every other level, every tombstone) merged
    /// into level 0: what [`Store::compact`](super::Store::compact) does.
    pub fn full(levels: usize) -> Self {
        Self {
            target: 0,
            sources: (1..levels).collect(),
            pending: true,
            fold: true,
        }
    }

    /// Only the overlay folded into level 0's id blocks.
    pub fn fold() -> Self {
        Self {
            target: 0,
            sources: Vec::new(),
            pending: false,
            fold: true,
        }
    }
}

/// The fingerprints a run holds when full, next to a level 0 of `base`.
pub(crate) fn run_capacity(base: u64) -> u64 {
    base / RUN_SHARE
}

/// The fingerprints the top level holds before it is merged into a run:
/// the geometric mean of a run's capacity and the merge threshold (at
/// least the threshold), so a fingerprint is rewritten about as often
/// while the top fills as while a run fills.
pub(crate) fn top_capacity(run_capacity: u64, threshold: u64) -> u64 {
    run_capacity
        .saturating_mul(threshold)
        .isqrt()
        .max(threshold)
}

/// The merge due for levels of `sizes` fingerprints (level 0 first) with
/// `pending` fingerprints and `tombstones` tombstones, `stored` live
/// fingerprints in all, at merge threshold `threshold`; `None` when none
/// is. In order:
/// 1. a full merge when tombstones reach the larger of the threshold and
///    1/16 of the store;
/// 2. while level 0 holds less than the threshold, every other level,
///    then the pending fingerprints once they reach the threshold,
///    straight into level 0;
/// 3. once every run is full (holds fingerprints, at least its
///    capacity), every level into level 0;
/// 4. the top, once it holds its capacity, into the run still filling (an
///    empty one when none is);
/// 5. the pending fingerprints, once they reach the threshold, into the
///    top.
pub(crate) fn due(
    sizes: &[u64],
    pending: u64,
    tombstones: u64,
    stored: u64,
    threshold: u64,
) -> Option<Job> {
    let threshold = threshold.max(1);
    if tombstones >= threshold.max(stored / 16) {
        return Some(Job::full(sizes.len()));
    }
    let top = sizes.len().saturating_sub(1);
    let runs = 1..top;
    let held = || {
        (1..sizes.len())
            .filter(|&l| sizes[l] > 0)
            .collect::<Vec<_>>()
    };
    let base = sizes.first().copied().unwrap_or(0);
    let run_capacity = run_capacity(base);
    let into_0 = |sources: Vec<usize>, pending: bool| Job {
        target: 0,
        sources,
        pending,
        fold: false,
    };
    if base < threshold || runs.is_empty() {
        if sizes.iter().skip(1).any(|&n| n > 0) {
            return Some(into_0(held(), false));
        }
        return (pending >= threshold).then(|| into_0(Vec::new(), true));
    }
    if runs
        .clone()
        .all(|r| sizes[r] > 0 && sizes[r] >= run_capacity)
    {
        return Some(into_0(held(), false));
    }
    if sizes[top] >= top_capacity(run_capacity, threshold) {
        let filling = runs
            .clone()
            .find(|&r| sizes[r] > 0 && sizes[r] < run_capacity);
        let target = filling.or_else(|| runs.clone().find(|&r| sizes[r] == 0))?;
        return Some(Job {
            target,
            sources: vec![top],
            pending: false,
            fold: false,
        });
    }
    (pending >= threshold).then(|| Job {
        target: top,
        sources: Vec::new(),
        pending: true,
        fold: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities_follow_level_0() {
        assert_eq!(run_capacity(160_000), 10_000);
        assert_eq!(top_capacity(10_000, 1000), 3162);
        // Never below the threshold, and no overflow.
        assert_eq!(top_capacity(10, 1000), 1000);
        assert_eq!(top_capacity(u64::MAX, 1000), u64::MAX.isqrt());
    }

    #[test]
    fn merges_fall_due_in_order() {
        let t = 1000;
        let job = |target, sources: &[usize], pending| Job {
            target,
            sources: sources.to_vec(),
            pending,
            fold: false,
        };
        // Nothing to do.
        assert_eq!(due(&[160_000, 0, 0, 0, 0, 0], 999, 0, 160_999, t), None);
        // Pending flushed into the top.
        let flushed = due(&[160_000, 0, 0, 0, 0, 3161], 1000, 0, 164_161, t);
        assert_eq!(flushed, Some(job(5, &[], true)));
        // The top, full, into the run still filling, else an empty one.
        let s = [160_000, 10_000, 4_000, 0, 0, 3162];
        assert_eq!(due(&s, 1000, 0, 178_162, t), Some(job(2, &[5], false)));
        let s = [160_000, 10_000, 10_000, 0, 0, 3162];
        assert_eq!(due(&s, 0, 0, 183_162, t), Some(job(3, &[5], false)));
        // Every run full: all of them (and the top) into level 0.
        let s = [160_000, 10_000, 10_500, 10_000, 10_000, 7];
        assert_eq!(
            due(&s, 0, 0, 200_507, t),
            Some(job(0, &[1, 2, 3, 4, 5], false))
        );
        // While level 0 is smaller than a flush, straight into it.
        let small = [999, 0, 0, 0, 0, 0];
        assert_eq!(due(&small, 1000, 0, 1_999, t), Some(job(0, &[], true)));
        let small = [999, 10, 0, 0, 0, 3];
        assert_eq!(due(&small, 0, 0, 1_012, t), Some(job(0, &[1, 5], false)));
        // Past it, runs of a flush each (smaller than a flush when full)
        // gather four flushes and the top before level 0 is rewritten.
        let s = [5_000, 0, 0, 0, 0, 1000];
        assert_eq!(due(&s, 0, 0, 6_000, t), Some(job(1, &[5], false)));
        let s = [5_000, 1000, 1000, 1000, 0, 1000];
        assert_eq!(due(&s, 0, 0, 9_000, t), Some(job(4, &[5], false)));
        let s = [5_000, 1000, 1000, 1000, 1000, 1000];
        assert_eq!(
            due(&s, 0, 0, 10_000, t),
            Some(job(0, &[1, 2, 3, 4, 5], false))
        );
        // An empty run is never full, even when a run's capacity is 0.
        assert_eq!(
            due(&[3, 0, 0, 0, 0, 1], 0, 0, 4, 1),
            Some(job(1, &[5], false))
        );
        // A store of one level (opened before its upgrade) has no runs.
        assert_eq!(
            due(&[160_000], 1000, 0, 161_000, t),
            Some(job(0, &[], true))
        );
        // Many tombstones: everything.
        let full = due(&[100_000, 10, 0, 0, 0, 0], 0, 6_250, 100_010, t).unwrap();
        assert_eq!(full, Job::full(LEVELS));
        assert!(due(&[100_000, 10, 0, 0, 0, 0], 0, 6_000, 100_010, t).is_none());
    }

    /// Grows levels by flushes of the threshold, merging what falls due,
    /// and returns the fingerprints written per fingerprint stored.
    fn grown(n: u64, threshold: u64) -> f64 {
        let mut sizes = [0u64; LEVELS];
        let (mut pending, mut stored, mut written) = (0, 0, 0);
        while stored < n {
            pending += threshold;
            stored += threshold;
            while let Some(job) = due(&sizes, pending, 0, stored, threshold) {
                assert!(!job.sources.contains(&job.target), "{job:?}");
                let moved: u64 = job.sources.iter().map(|&l| sizes[l]).sum::<u64>()
                    + if job.pending { pending } else { 0 };
                written += sizes[job.target] + moved;
                sizes[job.target] += moved;
                for &l in &job.sources {
                    sizes[l] = 0;
                }
                if job.pending {
                    pending = 0;
                }
            }
            assert_eq!(sizes.iter().sum::<u64>() + pending, stored);
            assert!(pending < threshold);
        }
        written as f64 / stored as f64
    }

    #[test]
    fn write_amplification_grows_slowly() {
        let t = 65_536;
        let at_1m = grown(1_000_000, t);
        let at_20m = grown(20_000_000, t);
        let at_100m = grown(100_000_000, t);
        // 3.6, 7.5 and 11.7; levels of capacity |L0| / 8^l, each merged
        // into the next, write 6.3, 13.2 and 16.2 times.
        assert!(at_1m < 4.0, "{at_1m}");
        assert!(at_20m < 8.0, "{at_20m}");
        assert!(at_100m < 12.0, "{at_100m}");
        assert!(at_1m < at_20m && at_20m < at_100m);
    }
}
