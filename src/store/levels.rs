//! Levels: when pending fingerprints and tombstones are merged, and into
//! which level.
//!
//! A store holds [`LEVELS`] levels, each a complete set of the plan's
//! permuted tables (table `g = l * T + t` is table `t` of level `l`, `T`
//! the plan's table count). Level 0 is the largest and the only one whose
//! fingerprints have id blocks; level `l` may hold up to `|L0| / RATIO^l`
//! fingerprints. Pending fingerprints are flushed into the *top* level,
//! the highest whose capacity is at least the merge threshold, and a
//! level past its capacity is merged into the one below it. A merge
//! rewrites only the level it merges into (and empties the level merged
//! from), so a fingerprint is rewritten about `RATIO / 2 + 1` times per
//! level it passes through, and the levels number about
//! `log_RATIO(N / threshold)`: write amplification grows with log N, not
//! N. `storage-format.md` (Levels) argues the choice.

/// Levels every store of format 5 has (table families `LEVELS * T`).
pub(crate) const LEVELS: usize = 6;

/// How much larger each level may grow than the one above it.
pub(crate) const RATIO: u64 = 8;

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

/// The capacity of level `l` (`l >= 1`) next to a level 0 of `base`
/// fingerprints.
pub(crate) fn capacity(base: u64, l: usize) -> u64 {
    let shift = 3 * l as u32; // RATIO = 2^3
    debug_assert_eq!(RATIO, 8);
    base.checked_shr(shift).unwrap_or(0)
}

/// The level pending fingerprints are flushed into: the highest whose
/// capacity is at least `threshold` (level 0 while level 0 is small).
pub(crate) fn top(sizes: &[u64], threshold: u64) -> usize {
    let base = sizes.first().copied().unwrap_or(0);
    (1..sizes.len())
        .take_while(|&l| capacity(base, l) >= threshold.max(1))
        .last()
        .unwrap_or(0)
}

/// The merge due for levels of `sizes` fingerprints (level 0 first) with
/// `pending` fingerprints and `tombstones` tombstones, `stored` live
/// fingerprints in all, at merge threshold `threshold`; `None` when none
/// is. In order: a full merge when tombstones reach the larger of the
/// threshold and 1/16 of the store; a level past its capacity (or above
/// the top level) into the one below, the highest first; the pending
/// fingerprints into the top level once they reach the threshold.
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
    let top = top(sizes, threshold);
    let base = sizes.first().copied().unwrap_or(0);
    for l in (1..sizes.len()).rev() {
        if sizes[l] > 0 && (l > top || sizes[l] > capacity(base, l)) {
            return Some(Job {
                target: l - 1,
                sources: vec![l],
                pending: false,
                fold: false,
            });
        }
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
    fn the_top_level_rises_with_level_0() {
        let t = 1000;
        assert_eq!(top(&[0; LEVELS], t), 0);
        assert_eq!(top(&[7_999, 0, 0, 0, 0, 0], t), 0);
        assert_eq!(top(&[8_000, 0, 0, 0, 0, 0], t), 1);
        assert_eq!(top(&[64_000, 0, 0, 0, 0, 0], t), 2);
        assert_eq!(top(&[u64::MAX, 0, 0, 0, 0, 0], t), LEVELS - 1);
    }

    #[test]
    fn merges_fall_due_in_order() {
        let t = 1000;
        // Nothing to do.
        assert_eq!(due(&[10_000, 500, 0, 0, 0, 0], 999, 0, 10_500, t), None);
        // Pending flushed into the top level.
        let flush = due(&[10_000, 500, 0, 0, 0, 0], 1000, 0, 11_500, t).unwrap();
        assert_eq!((flush.target, flush.pending), (1, true));
        // While level 0 is small, straight into it.
        let flush = due(&[5_000, 0, 0, 0, 0, 0], 1000, 0, 6_000, t).unwrap();
        assert_eq!(flush.target, 0);
        // A level past its capacity goes down first.
        let down = due(&[10_000, 1_251, 0, 0, 0, 0], 5000, 0, 16_251, t).unwrap();
        assert_eq!((down.target, down.sources.as_slice()), (0, &[1][..]));
        assert!(!down.pending);
        // A level above the top (level 0 shrank) goes down too.
        let down = due(&[100_000, 10, 10, 0, 0, 5], 0, 0, 100_025, t).unwrap();
        assert_eq!((down.target, down.sources.as_slice()), (4, &[5][..]));
        // Many tombstones: everything.
        let full = due(&[100_000, 10, 0, 0, 0, 0], 0, 6_250, 100_010, t).unwrap();
        assert_eq!(full, Job::full(LEVELS));
        assert!(due(&[100_000, 10, 0, 0, 0, 0], 0, 6_000, 100_010, t).is_none());
    }
}
