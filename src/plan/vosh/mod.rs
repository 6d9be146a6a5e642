//! Which header bits to flip, in decreasing probability: the Volatility
//! Ordered Set Heap of Sood & Loguinov (CIKM 2011, §5.2, Algorithm 2).
//!
//! A one-table store keeps every fingerprint sorted on all 64 bits and
//! probes, for a query, the run sharing its top `t` bits (the header) and
//! then the runs of headers with some bits flipped. Flip sets are taken
//! in decreasing probability under independent per-bit flip
//! probabilities `p_j`, the probability that a stored fingerprint within
//! `k` bits of the query differs from it in exactly the header bits `S`:
//! `P(S) ∝ ∏_{j∈S} p_j/(1−p_j) · R(k − |S|)`, where `R(m)` is the
//! probability that at most `m` of the other bits (those outside the
//! header) flip. The second factor is what the paper's ordering leaves
//! out: a set of three header bits is found only when no other bit
//! flipped, which on 38 other bits of typical volatility is far less
//! likely than the header alone says. For each size `h` the sets form a
//! tree over the bits sorted by probability: the root is the `h`
//! likeliest bits; a set's left child moves its last bit one place down
//! the order, its right child moves the bit before the first gap of two
//! (none when that gap is wider). Every set of size `h` is reached
//! exactly once and no child is likelier than its parent (the factor
//! `R` is the same for a whole tree), so a heap holding the frontier of
//! the `k` trees yields the sets in decreasing probability.
//!
//! The search stops when the sets taken cover the asked share of the
//! probability of all sets of at most `k` bits (the elementary symmetric
//! sums of the odds, weighted by `R`, give that total without listing the
//! sets), or at the probe budget. The share covered is then the expected
//! recall of the query under the model.
//!
//! A query needs the sets more than their exact order: for large budgets,
//! [`likeliest`] lists every set above a bound by a pruned depth-first
//! walk and picks the ones the heap would take by bucketing their odds,
//! without the heap's logarithmic steps, likeliest first to within a
//! bucket.

mod heap;
mod order;
#[cfg(test)]
mod tests;
mod walk;

use order::Odds;

pub use heap::Flips;
pub use walk::Listed;

/// How far a probabilistic query searches: when to stop taking flip sets.
///
/// The default stops at an expected recall of 98.5% under the flip model,
/// with no probe limit: on real documents, whose bits flip together more
/// than the model's independent bits, that is 95.5% at `k = 3` (98.2% at
/// `k = 2`, 92.3% at `k = 4`; the README's measurements).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// The expected recall to reach: the share of the probability that a
    /// match within `k` differs from the query in one of the header flip
    /// sets taken; 1 or more takes every set, in probability order.
    pub recall: f64,
    /// The most flip sets taken, the unflipped header included.
    pub max_probes: usize,
}

/// The default [`Budget::recall`].
pub const DEFAULT_RECALL: f64 = 0.985;

impl Default for Budget {
    fn default() -> Self {
        Self {
            recall: DEFAULT_RECALL,
            max_probes: usize::MAX,
        }
    }
}

impl Budget {
    /// Every flip set of at most `k` bits: an exact search.
    pub const EXHAUSTIVE: Budget = Budget {
        recall: 1.0,
        max_probes: usize::MAX,
    };

    /// A budget reaching an expected recall of `recall`, without a probe
    /// limit.
    pub fn recall(recall: f64) -> Self {
        Self {
            recall,
            max_probes: usize::MAX,
        }
    }

    /// At most `probes` flip sets (the unflipped header included),
    /// whatever they cover.
    pub fn probes(probes: usize) -> Self {
        Self {
            recall: 1.0,
            max_probes: probes,
        }
    }

    /// Whether the budget is usable: a recall that is a number at least
    /// 0, and at least one probe.
    pub fn is_valid(&self) -> bool {
        self.recall >= 0.0 && self.max_probes >= 1
    }
}

/// The smallest recall [`likeliest`] walks for: smaller budgets take few
/// sets (14 to 19 at 0.8 with headers of 23 to 26 bits, against 34 to 48
/// at 0.95), which the heap pops for less than the walk's listing and
/// bucketing cost.
pub(super) const WALK_FROM: f64 = 0.9;

/// The most sets of a header [`likeliest`] walks over (so that the
/// sets it lists take at most a megabyte); beyond, the heap.
pub(super) const MAX_LISTED: u64 = 1 << 16;

/// How far above [`likeliest`]'s safe bound its first walk lists sets.
pub(super) const HOPEFUL: f64 = 32.0;

/// The smallest odds a bit is given, so that products of up to 8 of them
/// stay normal numbers and comparable.
pub(super) const MIN_ODDS: f64 = 1e-30;

/// The odds `p/(1−p)` a bit flipping with probability `p` is given: `p`
/// taken within 0 to 0.5 (0 when not a number), the odds at least
/// [`MIN_ODDS`].
pub(super) fn odds(p: f64) -> f64 {
    let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 0.5) };
    (p / (1.0 - p)).max(MIN_ODDS)
}

/// [`odds`] of each bit's probability `p(j)`, bit 0 first.
pub(super) fn odds_table(p: impl Fn(u8) -> f64) -> [f64; 64] {
    std::array::from_fn(|b| odds(p(b as u8)))
}

/// Header bits a flip search orders at most; further ones are ignored.
pub(super) const MAX_HEADER: usize = 64;

/// The flip masks to probe for a query whose header is the bits
/// `header` (bit numbers, any order, at most 64 taken), each bit `j`
/// flipping with probability `p(j)`: the empty mask first, then sets of 1
/// to `k` bits in decreasing probability, until `stop`. `k` is at most 8.
pub fn flips(header: &[u8], p: impl Fn(u8) -> f64, k: u8, stop: Budget) -> Vec<u64> {
    Flips::new(header, p, k, stop).collect()
}

/// The flip masks [`flips`] takes: the empty mask first, then the others,
/// with `in_order` in decreasing odds to within an eighth of a halving
/// (sets of equal odds may be taken in another order than the heap's),
/// without it in any order (as an all-matches query needs them). For a
/// recall from 90% to below 100%, on headers of at most 65,536 sets,
/// they are found without the heap (otherwise the heap's are taken):
/// every set whose odds are at least a bound (which leaves out less than
/// the probability the budget gives up) is listed by a depth-first walk
/// that stops a branch at the first bit taking it below the bound; the
/// sets are then bucketed by their odds, whole buckets taken by their
/// sums, and only the bucket where the budget is met is sorted.
pub fn likeliest(
    header: &[u8],
    p: impl Fn(u8) -> f64,
    k: u8,
    stop: Budget,
    in_order: bool,
) -> Likeliest {
    let ordered_past = if in_order { 0 } else { usize::MAX };
    likeliest_by_odds(header, &odds_table(p), k, stop, ordered_past)
}

/// [`likeliest`] given each bit's odds of flipping, `odds[j] = p(j) / (1 −
/// p(j))` (taken within 10⁻³⁰ to 1, a NaN as the least), as
/// [`Volatility::odds`](crate::simhash::Volatility::odds) reads them from
/// a table without a division. The sets come in order (as with
/// `in_order`) when more than `ordered_past` are taken, in any order
/// (the empty set first) otherwise: a first-match search that probes its
/// first `n` sets together whatever their order passes `n` (0 always
/// orders them, `usize::MAX` never).
///
/// ```
/// use simstore::plan::vosh::{likeliest, likeliest_by_odds, Budget};
/// use simstore::simhash::Volatility;
/// let p: [f64; 64] = std::array::from_fn(|j| 0.01 + 0.4 * (j % 7) as f64 / 7.0);
/// let v = Volatility::from_probabilities(&p);
/// let header: Vec<u8> = (40..64).collect();
/// let budget = Budget { recall: 0.95, max_probes: 1000 };
/// let by_odds: Vec<u64> = likeliest_by_odds(&header, &v.odds(), 3, budget, 0).collect();
/// let by_p: Vec<u64> = likeliest(&header, |j| v.probability(j), 3, budget, true).collect();
/// assert_eq!(by_odds, by_p);
/// assert_eq!(by_odds[0], 0);
/// ```
pub fn likeliest_by_odds(
    header: &[u8],
    odds: &[f64; 64],
    k: u8,
    stop: Budget,
    ordered_past: usize,
) -> Likeliest {
    let odds = Odds::new(header, odds, k);
    let goal = stop.recall * odds.total;
    let heap = |odds: &Odds| Likeliest::Popped(Flips::ordered(&odds.order(0.0), stop));
    if stop.recall < WALK_FROM || stop.recall >= 1.0 || goal <= 1.0 || stop.max_probes <= 1 {
        // Few sets, which popping costs less than listing and bucketing;
        // or every set (a probe limit's likeliest), which the heap takes
        // without listing them.
        return heap(&odds);
    }
    let count = exact_count(odds.inside.count_ones() as u8, odds.k as u8);
    if count > MAX_LISTED {
        // The walk could list too many to hold.
        return heap(&odds);
    }
    // Fewer than `count` sets have odds below the bound, so together
    // they weigh less than `total − goal`: the sets at or above it cover
    // the goal.
    let bound = (odds.total - goal) / count as f64;
    match walk::listed_here(&odds, bound, goal, stop, ordered_past) {
        Some(masks) => Likeliest::Listed(Listed { masks, next: 0 }),
        // Rounding left the sets above the safe bound a hair short: take
        // them in order.
        None => heap(&odds),
    }
}

/// The masks of [`likeliest`], popped from the heap or listed.
// Lives on the stack for one query: boxing the heap's state would cost an
// allocation a query.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Likeliest {
    /// Taken from the heap as they are asked for.
    Popped(Flips),
    /// Listed already.
    Listed(Listed),
}

impl Iterator for Likeliest {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        match self {
            Likeliest::Popped(flips) => flips.next(),
            Likeliest::Listed(masks) => masks.next(),
        }
    }
}

/// The flip masks of an exact query on a one-table store whose header is
/// the top `header` bits (1 to 63): every set of at most `k` header bits,
/// smaller sets first ([`exact_count`] of them), generated as they are
/// taken, without a heap or a list.
pub fn exact(header: u8, k: u8) -> impl Iterator<Item = u64> {
    let t = u32::from(header.clamp(1, 63));
    let shift = 64 - t;
    let end = 1u64 << t;
    (0..=u32::from(k).min(t)).flat_map(move |h| {
        // The h-subsets of t bits in increasing order (Gosper's hack).
        let first = if h == 0 { 0 } else { (1u64 << h) - 1 };
        std::iter::successors(Some(first), move |&x| {
            if x == 0 {
                return None;
            }
            let c = x & x.wrapping_neg();
            let r = x + c;
            let next = (((r ^ x) >> 2) / c) | r;
            (next < end).then_some(next)
        })
        .map(move |m| m << shift)
    })
}

/// The number of flip sets of at most `k` of `t` header bits (the probes
/// of an exact query on a one-table store), saturating.
pub fn exact_count(t: u8, k: u8) -> u64 {
    (0..=u64::from(k))
        .map(|h| super::planner::binomial(u64::from(t), h))
        .fold(0u64, u64::saturating_add)
}
