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

use std::collections::BinaryHeap;

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

/// A set of header positions (indexes into the bits sorted by
/// probability) with its odds product, packed into one integer whose
/// order is the heap's: the odds' bits on top (positive floats order as
/// their bits), then ties broken towards smaller sets, then towards
/// smaller positions, so the order is deterministic.
///
/// Layout, from the top: 64 bits of odds, 4 bits of `8 − len`, then eight
/// 7-bit fields holding `127 − position` (unused fields hold 127).
type Node = u128;

/// Bits of one position field of a [`Node`].
const FIELD: u32 = 7;

/// The largest position a [`Node`] field holds (also its filler).
const FIELD_MAX: u8 = (1 << FIELD) - 1;

fn node(odds: f64, at: &[u8]) -> Node {
    debug_assert!(odds > 0.0 && at.len() <= 8);
    let mut payload = u128::from(8 - at.len() as u8);
    for i in 0..8 {
        let p = at.get(i).copied().unwrap_or(0);
        payload = payload << FIELD | u128::from(FIELD_MAX - p);
    }
    u128::from(odds.to_bits()) << 64 | payload
}

fn node_odds(n: Node) -> f64 {
    f64::from_bits((n >> 64) as u64)
}

fn node_len(n: Node) -> usize {
    8 - ((n >> (8 * FIELD)) & 0xf) as usize
}

fn node_at(n: Node, i: usize) -> u8 {
    FIELD_MAX - ((n >> ((7 - i) as u32 * FIELD)) as u8 & FIELD_MAX)
}

/// `n` with position `i` moved one place down the order and odds `odds`.
fn node_step(n: Node, i: usize, odds: f64) -> Node {
    // The field holds 127 − position: one less moves the position on.
    let stepped = n - (1u128 << ((7 - i) as u32 * FIELD));
    (stepped & u128::from(u64::MAX)) | u128::from(odds.to_bits()) << 64
}

/// The smallest recall [`likeliest`] walks for: smaller budgets take few
/// sets (14 to 19 at 0.8 with headers of 23 to 26 bits, against 34 to 48
/// at 0.95), which the heap pops for less than the walk's listing and
/// bucketing cost.
const WALK_FROM: f64 = 0.9;

/// The most sets of a header [`likeliest`] walks over (so that the
/// sets it lists take at most a megabyte); beyond, the heap.
const MAX_LISTED: u64 = 1 << 16;

/// How far above [`likeliest`]'s safe bound its first walk lists sets.
const HOPEFUL: f64 = 32.0;

/// The smallest odds a bit is given, so that products of up to 8 of them
/// stay normal numbers and comparable.
const MIN_ODDS: f64 = 1e-30;

/// The odds `p/(1−p)` a bit flipping with probability `p` is given: `p`
/// taken within 0 to 0.5 (0 when not a number), the odds at least
/// [`MIN_ODDS`].
fn odds(p: f64) -> f64 {
    let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 0.5) };
    (p / (1.0 - p)).max(MIN_ODDS)
}

/// [`odds`] of each bit's probability `p(j)`, bit 0 first.
fn odds_table(p: impl Fn(u8) -> f64) -> [f64; 64] {
    std::array::from_fn(|b| odds(p(b as u8)))
}

/// Header bits a flip search orders at most; further ones are ignored.
const MAX_HEADER: usize = 64;

/// The flip masks to probe for a query whose header is the bits
/// `header` (bit numbers, any order, at most 64 taken), each bit `j`
/// flipping with probability `p(j)`: the empty mask first, then sets of 1
/// to `k` bits in decreasing probability, until `stop`. `k` is at most 8.
pub fn flips(header: &[u8], p: impl Fn(u8) -> f64, k: u8, stop: Budget) -> Vec<u64> {
    Flips::new(header, p, k, stop).collect()
}

/// [`flips`] one mask at a time: a caller that stops early (a first-match
/// query that found one) spends nothing on the sets it does not take.
#[derive(Debug, Clone)]
pub struct Flips {
    /// Header bits in use.
    n: usize,
    /// Header bit numbers, likeliest first.
    bits: [u8; MAX_HEADER],
    /// `step[i]`: the odds `p/(1−p)` of bit `i + 1` of that order over
    /// those of bit `i` (what moving a set's bit one place down the order
    /// multiplies its odds by).
    step: [f64; MAX_HEADER],
    heap: BinaryHeap<Node>,
    covered: f64,
    goal: f64,
    exhaustive: bool,
    max_probes: usize,
    taken: usize,
}

/// A query's header bits ordered likeliest first, with their odds and
/// the total odds of the sets of at most `k` of them.
struct Order {
    /// Header bits ordered: every one in use, or those a walk's sets can
    /// hold (see [`Odds::order`]).
    n: usize,
    /// The largest set size, at most the header's bits in use and 8.
    k: usize,
    /// Header bit numbers, likeliest first.
    bits: [u8; MAX_HEADER],
    /// Their odds `p/(1−p)`, at most 1, in the same order.
    odds: [f64; MAX_HEADER],
    /// `weight[h]`: what a set of `h` bits' odds product is multiplied
    /// by, `R(k − h) / R(k)` (see the [module documentation](self)): 1
    /// for the empty set, then not increasing.
    weight: [f64; 9],
    /// The sum of the weighted odds products of every set of at most `k`
    /// bits, the empty set's 1 included.
    total: f64,
}

impl Order {
    /// The order of `header` with each bit `j` flipping with odds
    /// `odds[j]` (see [`likeliest_by_odds`]).
    fn new(header: &[u8], odds: &[f64; 64], k: u8) -> Self {
        Odds::new(header, odds, k).order(0.0)
    }
}

/// A query's header bits with their odds, unordered, and the total odds
/// of the sets of at most `k` of them: what both the heap (which orders
/// every bit) and the walk (which orders only the bits a set it lists
/// can hold) start from.
struct Odds {
    /// Every bit's odds, within `MIN_ODDS..=1`.
    odds_of: [f64; 64],
    /// The header bits in use, as a mask.
    inside: u64,
    /// The largest set size, at most the header's bits and 8.
    k: usize,
    /// See [`Order::weight`].
    weight: [f64; 9],
    /// See [`Order::total`].
    total: f64,
}

impl Odds {
    fn new(header: &[u8], odds: &[f64; 64], k: u8) -> Self {
        let distance = usize::from(k.min(8));
        // Every bit's odds within `MIN_ODDS..=1` (`max` takes `MIN_ODDS`
        // for a NaN, where `clamp` would keep the NaN).
        #[allow(clippy::manual_clamp)]
        let odds_of: [f64; 64] = odds.map(|o| o.max(MIN_ODDS).min(1.0));
        // A bit named twice counts once.
        let inside = header.iter().fold(0u64, |m, &b| m | 1u64 << (b & 63));
        let n = inside.count_ones() as usize;
        let k = distance.min(n);
        // The sums do not depend on the order: taken in bit order, the
        // same for the heap and the walk.
        let mut in_header = [0f64; MAX_HEADER];
        for (o, b) in in_header.iter_mut().zip(bits_of(inside)) {
            *o = odds_of[usize::from(b)];
        }
        let e = symmetric_sums(&in_header[..n], k);
        let weight = rest_weights(inside, &odds_of, distance);
        Self {
            odds_of,
            inside,
            k,
            weight,
            total: e[..=k].iter().zip(&weight).map(|(e, w)| e * w).sum(),
        }
    }

    /// The header bits whose odds times `weight[1]` (a one-bit set's
    /// weighted odds) are at least `least`, likeliest first: with `least`
    /// a walk's bound, the only bits the sets it lists hold (every set
    /// holding another weighs less, odds being at most 1 and the weights
    /// not increasing); with 0, every bit.
    fn order(&self, least: f64) -> Order {
        // Likeliest first, ties by bit number, sorted as one word a bit
        // (which sorts without branches): the odds' bits (below 2^62, odds
        // being at most 1) inverted so the likeliest sorts first, less
        // their lowest 4 (odds within 2^-48 of each other are ordered by
        // bit number), then the bit number in the low 6.
        let mut keys = [0u64; MAX_HEADER];
        let mut n = 0;
        for b in bits_of(self.inside) {
            let o = self.odds_of[usize::from(b)];
            keys[n] = (!(o.to_bits() << 2) & !0x3f) | u64::from(b);
            n += usize::from(o * self.weight[1] >= least);
        }
        keys[..n].sort_unstable();
        let mut bits = [0u8; MAX_HEADER];
        let mut odds = [0f64; MAX_HEADER];
        for (i, &key) in keys[..n].iter().enumerate() {
            let b = (key & 0x3f) as u8;
            bits[i] = b;
            odds[i] = self.odds_of[usize::from(b)];
        }
        Order {
            n,
            k: self.k,
            bits,
            odds,
            weight: self.weight,
            total: self.total,
        }
    }
}

/// The bit numbers set in `mask`, lowest first.
fn bits_of(mut mask: u64) -> impl Iterator<Item = u8> {
    std::iter::from_fn(move || {
        let b = (mask != 0).then(|| mask.trailing_zeros() as u8)?;
        mask &= mask - 1;
        Some(b)
    })
}

/// `e[h]`: the sum over sets of `h` of `odds` of their products (`e[0]`
/// = 1), for `h` up to `k` (at most 8); the entries past `k` are not
/// computed.
fn symmetric_sums(odds: &[f64], k: usize) -> [f64; 9] {
    if k <= 3 {
        let e = sums_to::<4>(odds);
        std::array::from_fn(|h| e.get(h).copied().unwrap_or(0.0))
    } else {
        sums_to::<9>(odds)
    }
}

/// [`symmetric_sums`] up to `D − 1`, the loop's bounds fixed so its sums
/// stay in registers. The odds at even and odd places are summed apart
/// (two chains of dependent additions, each half as long as one), their
/// sums then multiplied as polynomials.
#[inline(always)]
fn sums_to<const D: usize>(odds: &[f64]) -> [f64; D] {
    let mut even = [0f64; D];
    even[0] = 1.0;
    let mut odd = even;
    let mut pairs = odds.chunks_exact(2);
    for pair in &mut pairs {
        for h in (1..D).rev() {
            even[h] += even[h - 1] * pair[0];
            odd[h] += odd[h - 1] * pair[1];
        }
    }
    for &o in pairs.remainder() {
        for h in (1..D).rev() {
            even[h] += even[h - 1] * o;
        }
    }
    let mut e = [0f64; D];
    for (i, &a) in even.iter().enumerate() {
        for (j, &b) in odd[..D - i].iter().enumerate() {
            e[i + j] += a * b;
        }
    }
    e
}

/// The weights of sets of `0..=k` header bits (see [`Order::weight`]):
/// `R(k − h) / R(k)`, with `R(m)` the probability that at most `m` of the
/// bits outside `inside` (a mask) flip, each bit `j` independently with
/// odds `odds_of[j]`: `R(m)` is proportional to the sum of the other
/// bits' symmetric sums up to `m`.
fn rest_weights(inside: u64, odds_of: &[f64; 64], k: usize) -> [f64; 9] {
    let mut rest = [0f64; 64];
    let mut r = 0;
    for b in bits_of(!inside) {
        rest[r] = odds_of[usize::from(b)];
        r += 1;
    }
    let e = symmetric_sums(&rest[..r], k);
    // up_to[m] ∝ R(m); R(k) ≥ R(0) > 0.
    let mut up_to = [0f64; 9];
    let mut sum = 0.0;
    for m in 0..9 {
        sum += e[m];
        up_to[m] = sum;
    }
    let k = k.min(8);
    let mut weight = [0f64; 9];
    for h in 0..=k {
        weight[h] = (up_to[k - h] / up_to[k]).min(1.0);
    }
    weight
}

impl Flips {
    /// The flip sets of [`flips`], to be taken in order.
    pub fn new(header: &[u8], p: impl Fn(u8) -> f64, k: u8, stop: Budget) -> Self {
        Self::ordered(&Order::new(header, &odds_table(p), k), stop)
    }

    fn ordered(order: &Order, stop: Budget) -> Self {
        let Order {
            n,
            k,
            bits,
            ref odds,
            ref weight,
            total,
        } = *order;
        let mut heap = BinaryHeap::with_capacity(2 * k + 64);
        let first: [u8; 8] = std::array::from_fn(|i| i as u8);
        for h in 1..=k {
            let odds = odds[..h].iter().product::<f64>() * weight[h];
            heap.push(node(odds.max(MIN_ODDS), &first[..h]));
        }
        let mut step = [0f64; MAX_HEADER];
        for i in 1..n {
            step[i - 1] = odds[i] / odds[i - 1];
        }
        Self {
            n,
            bits,
            step,
            heap,
            covered: 0.0,
            goal: stop.recall * total,
            exhaustive: stop.recall >= 1.0,
            max_probes: stop.max_probes,
            taken: 0,
        }
    }
}

impl Iterator for Flips {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.taken == 0 {
            // The query's own header, whatever the budget.
            self.taken = 1;
            self.covered = 1.0;
            return Some(0);
        }
        if self.taken >= self.max_probes || !(self.exhaustive || self.covered < self.goal) {
            return None;
        }
        let node = self.heap.pop()?;
        self.taken += 1;
        let odds = node_odds(node);
        self.covered += odds;
        let h = node_len(node);
        let last = usize::from(node_at(node, h - 1));
        if last + 1 < self.n {
            let stepped = odds * self.step[last];
            self.heap.push(node_step(node, h - 1, stepped));
        }
        let mut mask = 1u64 << self.bits[last];
        let mut next = last;
        let mut branched = false;
        for j in (0..h - 1).rev() {
            let at = usize::from(node_at(node, j));
            mask |= 1u64 << self.bits[at];
            if !branched && next - at >= 2 {
                branched = true;
                if next - at == 2 {
                    let stepped = odds * self.step[at];
                    self.heap.push(node_step(node, j, stepped));
                }
            }
            next = at;
        }
        Some(mask)
    }
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
    let listed = SCRATCH.with_borrow_mut(|scratch| {
        let Scratch { sets, edge, spare } = scratch;
        let mut out = spare.pop().unwrap_or_default();
        listed(&odds, bound, goal, stop, ordered_past, sets, edge, &mut out).then_some(out)
    });
    match listed {
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

/// The masks [`likeliest`] listed, taken in order. Dropped, it gives its
/// buffer back to the thread's next listings, which then list without
/// allocating.
#[derive(Debug, Clone)]
pub struct Listed {
    masks: Vec<u64>,
    next: usize,
}

impl Iterator for Listed {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let mask = self.masks.get(self.next).copied();
        self.next += 1;
        mask
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.masks.len().saturating_sub(self.next);
        (left, Some(left))
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        let masks = std::mem::take(&mut self.masks);
        // A thread whose locals are being torn down frees it instead.
        let _ = SCRATCH.try_with(|scratch| {
            if let Ok(mut scratch) = scratch.try_borrow_mut() {
                let kept = masks.capacity() <= SPARE_MASKS && masks.capacity() > 0;
                if kept && scratch.spare.len() < SPARES {
                    scratch.spare.push(masks);
                }
            }
        });
    }
}

/// [`likeliest`]'s lists, kept by each thread from one query to the
/// next.
#[derive(Default)]
struct Scratch {
    sets: Vec<u128>,
    edge: Vec<u128>,
    /// Buffers of [`Listed`]s dropped (the queries of a group are listed
    /// before any is dropped).
    spare: Vec<Vec<u64>>,
}

/// The most buffers a thread keeps for its next listings.
const SPARES: usize = 128;

/// The largest buffer (in masks) a thread keeps: a listing of more sets
/// costs far more than its allocation.
const SPARE_MASKS: usize = 1024;

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

/// [`likeliest`] once the safe `bound` is known, with
/// `sets` and `edge` to list into and the masks written to `out`; false
/// when rounding left the sets above the bound short of the goal. Each
/// walk orders only the bits its bound lets a set hold, a few of a
/// header's 23 to 30 on the usual volatilities.
#[allow(clippy::too_many_arguments)]
fn listed(
    odds: &Odds,
    bound: f64,
    goal: f64,
    stop: Budget,
    ordered_past: usize,
    sets: &mut Vec<u128>,
    edge: &mut Vec<u128>,
    out: &mut Vec<u64>,
) -> bool {
    // A bound some way above the safe one first: the likeliest sets nearly
    // always cover the goal with far fewer listed.
    for bound in [bound * HOPEFUL, bound] {
        sets.clear();
        walk(&odds.order(bound), bound, sets);
        if take_likeliest(sets, goal, stop.max_probes, ordered_past, edge, out) {
            return true;
        }
    }
    false
}

/// Buckets [`take_likeliest`] sorts sets into: an eighth of a halving of
/// the odds each, from odds 1 down.
const BUCKETS: usize = 128;

/// The bucket of a set with odds `odds` (at most 1).
fn bucket(odds: f64) -> usize {
    let below = 1f64.to_bits().saturating_sub(odds.to_bits()) >> 49;
    (below as usize).min(BUCKETS - 1)
}

/// The masks of the likeliest of `sets` (odds' bits over mask, in any
/// order) that the search takes, the empty mask first (the others
/// likeliest first to within a bucket when more than `ordered_past` are
/// taken): in decreasing
/// odds while fewer than `max_probes` are taken and the odds covered
/// (the empty set's 1 included) are below `goal`; `None` when all of
/// them stay below both. Whole buckets are taken by their sums; only the
/// bucket where the search stops is sorted. The masks are written to
/// `out`; false when they are not found.
fn take_likeliest(
    sets: &[u128],
    goal: f64,
    max_probes: usize,
    ordered_past: usize,
    edge: &mut Vec<u128>,
    out: &mut Vec<u64>,
) -> bool {
    let odds = |s: u128| f64::from_bits((s >> 64) as u64);
    let mut sums = [0f64; BUCKETS];
    let mut counts = [0u32; BUCKETS];
    for &s in sets {
        let b = bucket(odds(s));
        sums[b] += odds(s);
        counts[b] += 1;
    }
    let most = max_probes.saturating_sub(1);
    let mut covered = 1.0;
    let mut taken = 0usize;
    let mut cut = BUCKETS;
    for b in 0..BUCKETS {
        if taken + counts[b] as usize >= most || covered + sums[b] >= goal {
            cut = b;
            break;
        }
        covered += sums[b];
        taken += counts[b] as usize;
    }
    if cut == BUCKETS {
        return false;
    }
    // Without branches, which would mispredict about every other set:
    // each set is written to `out` and to `edge`, and kept in the one it
    // is for. In order, the sets of the buckets above the cut go to their
    // bucket's place in `out`, bucket after bucket, the others to places
    // past those, cut off after.
    let edge_len = counts[cut] as usize;
    // At most the sets above the cut, the cut's bucket and the empty set.
    let in_order = taken + edge_len + 1 > ordered_past;
    out.clear();
    out.resize(sets.len() + 1, 0);
    edge.clear();
    edge.resize(edge_len + 1, 0);
    let mut e = 0;
    let taken_whole = if in_order {
        let mut place = 1u32;
        for count in &mut counts[..=cut] {
            let here = *count;
            *count = place;
            place += here;
        }
        let first_past = counts[cut] as usize;
        for &s in sets {
            let b = bucket(odds(s));
            let at = &mut counts[b.min(cut)];
            out[*at as usize] = s as u64;
            *at += 1;
            edge[e] = s;
            e += usize::from(b == cut);
        }
        first_past
    } else {
        let mut n = 1;
        for &s in sets {
            let b = bucket(odds(s));
            out[n] = s as u64;
            n += usize::from(b < cut);
            edge[e] = s;
            e += usize::from(b == cut);
        }
        n
    };
    out.truncate(taken_whole);
    let edge = &mut edge[..e];
    // Likeliest first; of equal odds, fewer bits first (as the heap).
    edge.sort_unstable_by_key(|&s| {
        (
            std::cmp::Reverse(s >> 64),
            (s as u64).count_ones(),
            s as u64,
        )
    });
    for &s in edge.iter() {
        if taken >= most || covered >= goal {
            break;
        }
        covered += odds(s);
        taken += 1;
        out.push(s as u64);
    }
    true
}

/// [`likeliest`]'s walk: every set of 1 to `k` bits with weighted odds
/// at least `bound`, pushed as the weighted odds' bits over the mask,
/// depth first (a set, then the sets extending it by later bits, then the
/// next bit in its place). The odds are in decreasing order and a larger
/// set weighs no more than a smaller one, so at the first bit that takes
/// a set below the bound no later bit in its place, and nothing extending
/// it, does better.
fn walk(order: &Order, bound: f64, sets: &mut Vec<u128>) {
    if order.k <= 3 {
        walk_to_three(order, bound, sets);
    } else {
        walk_any(order, bound, sets);
    }
}

/// [`walk`] for sets of at most 3 bits (`k` of 3 or less, the usual
/// distance): a loop a size, whose products and masks stay in registers,
/// listing the same sets in the same order as [`walk_any`].
#[inline(always)]
fn walk_to_three(order: &Order, bound: f64, sets: &mut Vec<u128>) {
    let (odds, bits, w, k) = (
        &order.odds[..order.n],
        &order.bits[..order.n],
        &order.weight,
        order.k,
    );
    let set = |weighted: f64, m: u64| u128::from(weighted.to_bits()) << 64 | u128::from(m);
    if k == 0 {
        return;
    }
    for i in 0..odds.len() {
        let (o1, m1) = (odds[i], 1u64 << bits[i]);
        let w1 = o1 * w[1];
        if w1 < bound {
            return;
        }
        sets.push(set(w1, m1));
        if k < 2 {
            continue;
        }
        for j in i + 1..odds.len() {
            let (o2, m2) = (o1 * odds[j], m1 | 1u64 << bits[j]);
            let w2 = o2 * w[2];
            if w2 < bound {
                break;
            }
            sets.push(set(w2, m2));
            if k < 3 {
                continue;
            }
            for l in j + 1..odds.len() {
                let w3 = o2 * odds[l] * w[3];
                if w3 < bound {
                    break;
                }
                sets.push(set(w3, m2 | 1u64 << bits[l]));
            }
        }
    }
}

/// [`walk`] for sets of any size up to `k` (at most 8): a loop over the
/// sizes rather than a recursive call for each set extended.
fn walk_any(order: &Order, bound: f64, sets: &mut Vec<u128>) {
    let (n, k) = (order.n, order.k);
    if k == 0 {
        return;
    }
    // For the set being extended at each size (index `size − 1` being the
    // set of `size − 1` bits): its odds product, its mask, and the next
    // place to try.
    let mut product = [1f64; 9];
    let mut mask = [0u64; 9];
    let mut next = [0usize; 9];
    let mut size = 1;
    loop {
        let i = next[size - 1];
        let o = if i < n {
            product[size - 1] * order.odds[i]
        } else {
            0.0
        };
        let weighted = o * order.weight[size];
        if i >= n || weighted < bound {
            // Nothing more at this size: back to the set below.
            size -= 1;
            if size == 0 {
                return;
            }
            continue;
        }
        let m = mask[size - 1] | 1u64 << order.bits[i];
        sets.push(u128::from(weighted.to_bits()) << 64 | u128::from(m));
        next[size - 1] = i + 1;
        if size < k {
            product[size] = o;
            mask[size] = m;
            next[size] = i + 1;
            size += 1;
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

#[cfg(test)]
mod tests {
    use super::*;

    const EVERYTHING: Budget = Budget::EXHAUSTIVE;

    #[test]
    fn every_set_once_in_decreasing_probability() {
        let header: Vec<u8> = (40..64).collect();
        let p = |b: u8| 0.5 / (1.0 + f64::from(b % 7) + f64::from(b) / 100.0);
        for k in 0..=4u8 {
            let masks = flips(&header, p, k, EVERYTHING);
            assert_eq!(masks.len() as u64, exact_count(24, k), "k = {k}");
            let mut seen = std::collections::HashSet::new();
            let mut last = f64::INFINITY;
            for &m in &masks {
                assert!(seen.insert(m), "repeated {m:#x}");
                assert!(m.count_ones() <= u32::from(k));
                assert_eq!(m & ((1u64 << 40) - 1), 0, "a bit outside the header");
                let odds = weighted(m, &header, p, k);
                assert!(odds <= last * (1.0 + 1e-9), "{m:#x} out of order");
                last = odds;
            }
        }
    }

    #[test]
    fn exact_masks_are_every_small_set_of_header_bits_once() {
        for (t, k) in [(1u8, 3u8), (10, 0), (10, 2), (24, 3), (40, 2), (63, 1)] {
            let masks: Vec<u64> = exact(t, k).collect();
            assert_eq!(masks.len() as u64, exact_count(t, k), "t = {t}, k = {k}");
            let mut seen = std::collections::HashSet::new();
            let mut size = 0;
            for &m in &masks {
                assert!(seen.insert(m), "repeated {m:#x}");
                assert!(m.count_ones() >= size, "a smaller set after a larger one");
                size = m.count_ones();
                assert!(size <= u32::from(k));
                assert_eq!(m & (u64::MAX >> t), 0, "a bit outside the header");
            }
        }
    }

    #[test]
    fn stops_at_the_recall_and_the_budget() {
        let header: Vec<u8> = (0..20).collect();
        let p = |b: u8| if b < 2 { 0.4 } else { 0.001 };
        let masks = flips(
            &header,
            p,
            3,
            Budget {
                recall: 0.95,
                max_probes: 1000,
            },
        );
        // The two volatile bits, alone and together, carry nearly all
        // the probability.
        assert_eq!(&masks[..4], &[0, 1, 2, 3]);
        assert!(masks.len() < 20, "{}", masks.len());
        let few = flips(
            &header,
            p,
            3,
            Budget {
                recall: 1.0,
                max_probes: 5,
            },
        );
        assert_eq!(few.len(), 5);
        assert_eq!(
            flips(
                &header,
                p,
                3,
                Budget {
                    recall: 0.0,
                    max_probes: 9
                }
            ),
            vec![0]
        );
    }

    /// The weighted odds of flipping the header bits `m` (of `header`) for
    /// a match within `k`: their odds product times `R(k − |m|) / R(k)`,
    /// `R(j)` from the elementary symmetric sums of the other bits' odds
    /// (`R(j) ∝ e_0 + … + e_j`; the search's own sums are checked against
    /// every subset of the other bits in
    /// `sizes_are_weighted_by_the_other_bits_staying_within_k`).
    fn weighted(m: u64, header: &[u8], p: impl Fn(u8) -> f64, k: u8) -> f64 {
        let inside = header.iter().fold(0u64, |a, &b| a | 1 << b);
        let mut e = vec![0f64; usize::from(k) + 1];
        e[0] = 1.0;
        for b in (0..64u8).filter(|&b| inside >> b & 1 == 0) {
            let q = p(b).clamp(0.0, 0.5);
            let o = q / (1.0 - q);
            for h in (1..e.len()).rev() {
                e[h] += e[h - 1] * o;
            }
        }
        let h = m.count_ones() as usize;
        let r = |j: usize| e[..=j].iter().sum::<f64>();
        odds_of(m, |b| odds(p(b))) * r(usize::from(k) - h) / r(usize::from(k))
    }

    /// The weights of sets of each size against every subset of the other
    /// bits enumerated, on a header of 52 bits (12 others) with bits of
    /// every volatility, at distances 0 to 8.
    #[test]
    fn sizes_are_weighted_by_the_other_bits_staying_within_k() {
        let header: Vec<u8> = (12..64).collect();
        let p = |b: u8| -> f64 {
            [
                0.5, 0.3, 0.01, 0.2, 0.0, 0.45, 0.07, 0.12, 0.33, 0.002, 0.25, 0.6,
            ][usize::from(b % 12)]
        };
        for k in 0..=8usize {
            // exactly[j]: the probability that exactly j of the 12 flip.
            let mut exactly = [0f64; 13];
            for flipped in 0u32..1 << 12 {
                let pr: f64 = (0..12u8)
                    .map(|b| {
                        let q = p(b).min(0.5);
                        if flipped >> b & 1 == 1 {
                            q
                        } else {
                            1.0 - q
                        }
                    })
                    .product();
                exactly[flipped.count_ones() as usize] += pr;
            }
            let r = |j: usize| exactly[..=j].iter().sum::<f64>();
            let w = Order::new(&header, &odds_table(p), k as u8).weight;
            for (h, &got) in w[..=k].iter().enumerate() {
                let want = r(k - h) / r(k);
                assert!(
                    (got - want).abs() <= 1e-12,
                    "k {k}, {h} bits: {got} against {want}"
                );
            }
            assert_eq!(w[0], 1.0);
        }
        // No other bit: every size weighs 1.
        let all: Vec<u8> = (0..64).collect();
        assert_eq!(
            Order::new(&all, &odds_table(p), 3).weight,
            [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        );
    }

    /// A set of three header bits needs every other bit to stay: with the
    /// other bits volatile it comes after every single bit, each less
    /// likely on its own, and with them steady among the first.
    #[test]
    fn volatile_other_bits_put_small_sets_first() {
        let header: Vec<u8> = (40..64).collect();
        // The top three header bits at 0.4, the others at 0.05; the bits
        // outside the header at `rest`.
        let p = |rest: f64| {
            move |b: u8| match b {
                61.. => 0.4,
                40.. => 0.05,
                _ => rest,
            }
        };
        let three = 0b111u64 << 61;
        let masks = flips(&header, p(0.1), 3, Budget::probes(40));
        let at = masks.iter().position(|&m| m == three);
        let last_single = masks.iter().rposition(|m| m.count_ones() == 1);
        assert!(at > last_single && last_single.is_some(), "{masks:x?}");
        let masks = flips(&header, p(0.0), 3, Budget::probes(30));
        assert!(masks[..8].contains(&three), "{masks:x?}");
    }

    /// A walk over only the bits its bound lets a set hold lists exactly
    /// the sets a walk over every header bit lists, at bounds from the
    /// likeliest single bit's down to below the least set's, on
    /// continuous odds and on quantized ones full of ties; the loops for
    /// sets of up to 3 bits list what the general walk lists, in order.
    #[test]
    fn a_walk_over_the_bits_its_bound_keeps_lists_every_set_above_it() {
        let mut rng = crate::test_rng::TestRng::new(41);
        let mut fewer = 0;
        for round in 0..48 {
            let (width, k) = [(23u8, 3u8), (26, 3), (30, 4), (12, 8), (20, 1), (23, 2)][round % 6];
            let header: Vec<u8> = (64 - width..64).collect();
            let odds: [f64; 64] = std::array::from_fn(|_| {
                let p = ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64).powi(4) * 0.5;
                let p = if round % 3 == 0 {
                    (-((-8.0 * p.log2()).round()) / 8.0).exp2()
                } else {
                    p
                };
                p / (1.0 - p)
            });
            let all = Odds::new(&header, &odds, k);
            let every = all.order(0.0);
            assert_eq!(every.n, usize::from(width));
            let listed = |order: &Order, bound: f64| {
                let mut sets = Vec::new();
                walk(order, bound, &mut sets);
                // The loops for small sets list what the general walk
                // lists, in its order.
                let mut any = Vec::new();
                walk_any(order, bound, &mut any);
                assert_eq!(sets, any, "round {round}, k {k}, bound {bound}");
                sets.sort_unstable();
                sets
            };
            for scale in [1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-12, 1e-40] {
                let bound = all.total * scale * 1e-2;
                let some = all.order(bound);
                fewer += usize::from(some.n < every.n);
                assert_eq!(
                    listed(&some, bound),
                    listed(&every, bound),
                    "round {round}, width {width}, k {k}, bound {bound}"
                );
            }
        }
        assert!(fewer > 48 * 3, "the bounds left out bits {fewer} times");
    }

    /// Every set of at most `k` of `header`'s bits, with its odds product,
    /// likeliest first.
    fn every_set(header: &[u8], odds: impl Fn(u8) -> f64, k: u32) -> Vec<(f64, u64)> {
        fn grow(at: usize, header: &[u8], left: u32, mask: u64, out: &mut Vec<u64>) {
            out.push(mask);
            if left == 0 {
                return;
            }
            for i in at..header.len() {
                grow(i + 1, header, left - 1, mask | 1 << header[i], out);
            }
        }
        let mut masks = Vec::new();
        grow(0, header, k, 0, &mut masks);
        let mut sets: Vec<(f64, u64)> = masks
            .into_iter()
            .map(|m| {
                let o = (0..64u8).filter(|&b| m >> b & 1 == 1).map(&odds).product();
                (o, m)
            })
            .collect();
        sets.sort_by(|a, b| b.0.total_cmp(&a.0));
        sets
    }

    /// A budgeted search takes a prefix of the likeliest sets, on headers
    /// of every width up to 64 bits and sets of up to 8 bits (every field
    /// of a heap node in use).
    #[test]
    fn a_budget_takes_the_likeliest_sets_of_wide_headers_and_large_sets() {
        let mut rng = crate::test_rng::TestRng::new(11);
        for (width, k, probes) in [(64u8, 3u8, 3000usize), (10, 8, 1024), (33, 5, 20_000)] {
            let header: Vec<u8> = (64 - width..64).collect();
            let p: Vec<f64> = (0..64)
                .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 0.5)
                .collect();
            let odds = |b: u8| odds(p[usize::from(b)]);
            let weighted = |m: u64| weighted(m, &header, |b| p[usize::from(b)], k);
            let mut reference = every_set(&header, odds, u32::from(k));
            for (o, m) in &mut reference {
                *o = weighted(*m);
            }
            reference.sort_by(|a, b| b.0.total_cmp(&a.0));
            let taken = flips(&header, |b| p[usize::from(b)], k, Budget::probes(probes));
            assert_eq!(taken.len(), probes.min(reference.len()), "width {width}");
            let mut seen = std::collections::HashSet::new();
            for (i, &m) in taken.iter().enumerate() {
                assert!(seen.insert(m), "repeated {m:#x}");
                assert!(m.count_ones() <= u32::from(k));
                assert_eq!(
                    m & !(u64::MAX << (64 - width)),
                    0,
                    "a bit outside the header"
                );
                // The i-th set taken is as likely as the i-th likeliest
                // (equal odds may come in either order).
                let want = reference[i].0;
                let got = weighted(m);
                assert!(
                    (got - want).abs() <= want * 1e-9,
                    "width {width}, k {k}: set {i} has odds {got}, the {i}-th likeliest {want}"
                );
            }
        }
    }

    /// The odds product of a mask's bits.
    fn odds_of(m: u64, odds: impl Fn(u8) -> f64) -> f64 {
        (0..64u8).filter(|&b| m >> b & 1 == 1).map(odds).product()
    }

    /// [`likeliest`] takes as many sets as [`flips`] and sets of the same
    /// odds (of equal odds, either may take another), the empty set first
    /// and none twice: on continuous probabilities and on quantized ones
    /// full of ties, headers of several widths, sets of up to 8 bits,
    /// recalls and probe limits.
    #[test]
    fn likeliest_takes_what_the_heap_takes() {
        let mut rng = crate::test_rng::TestRng::new(29);
        let mut uniform = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let budgets = [
            Budget::recall(0.5),
            Budget::recall(0.8),
            Budget::recall(0.95),
            Budget::recall(0.99),
            Budget::recall(0.999),
            Budget {
                recall: 0.95,
                max_probes: 10,
            },
            Budget::probes(40),
            Budget::probes(1),
            EVERYTHING,
        ];
        let mut compared = 0;
        for round in 0..60 {
            let (width, k) = [(26u8, 3u8), (20, 1), (23, 2), (30, 4), (12, 8), (64, 3)][round % 6];
            let header: Vec<u8> = (64 - width..64).collect();
            // Every third round quantized as a volatility is (eight steps
            // a halving), so many bits share their odds.
            let p: Vec<f64> = (0..64)
                .map(|_| {
                    let p = uniform().powi(3) * 0.5;
                    if round % 3 == 0 {
                        (-((-8.0 * p.log2()).round()) / 8.0).exp2()
                    } else {
                        p
                    }
                })
                .collect();
            let odds = |m: u64| weighted(m, &header, |b| p[usize::from(b)], k);
            for budget in budgets {
                let heap = flips(&header, |b| p[usize::from(b)], k, budget);
                let walked: Vec<u64> =
                    likeliest(&header, |b| p[usize::from(b)], k, budget, true).collect();
                // Without order: the same sets.
                let mut unordered: Vec<u64> =
                    likeliest(&header, |b| p[usize::from(b)], k, budget, false).collect();
                assert_eq!(unordered[0], 0);
                unordered.sort_unstable();
                let mut same = walked.clone();
                same.sort_unstable();
                assert_eq!(
                    unordered, same,
                    "round {round}, {budget:?}: another set unordered"
                );
                let context = format!("round {round}, width {width}, k {k}, {budget:?}");
                assert_eq!(walked.len(), heap.len(), "{context}");
                assert_eq!(walked[0], 0, "{context}");
                let mut seen = std::collections::HashSet::new();
                for &m in &walked {
                    assert!(seen.insert(m), "{context}: repeated {m:#x}");
                    assert!(m.count_ones() <= u32::from(k), "{context}");
                    assert_eq!(m & !(u64::MAX << (64 - width)), 0, "{context}");
                }
                // Decreasing odds, to within a bucket's width.
                let mut later = 0f64;
                for &m in walked[1..].iter().rev() {
                    let o = odds(m);
                    assert!(o * 1.2 >= later, "{context}: {m:#x} before likelier sets");
                    later = later.max(o);
                }
                let sorted = |masks: &[u64]| {
                    let mut o: Vec<f64> = masks.iter().map(|&m| odds(m)).collect();
                    o.sort_by(|a, b| b.total_cmp(a));
                    o
                };
                for (i, (a, b)) in sorted(&walked).iter().zip(sorted(&heap)).enumerate() {
                    assert!(
                        (a - b).abs() <= b * 1e-9,
                        "{context}: set {i}: {a} against {b}"
                    );
                }
                compared += 1;
            }
        }
        assert_eq!(compared, 60 * budgets.len());
    }

    /// A listing's buffer goes back to the thread when dropped and is
    /// taken by the next: listings alive together, dropped half-read or
    /// in any order, each yield exactly their own masks.
    #[test]
    fn listings_reusing_a_buffer_keep_their_own_masks() {
        let header: Vec<u8> = (38..64).collect();
        let p = |b: u8| 0.02 + f64::from(b % 13) * 0.03;
        let wide = Budget::recall(0.99);
        let narrow = Budget::recall(0.9);
        let fresh = |budget| -> Vec<u64> {
            std::thread::scope(|s| {
                s.spawn(|| likeliest(&header, p, 3, budget, true).collect())
                    .join()
                    .unwrap()
            })
        };
        let (all_wide, all_narrow) = (fresh(wide), fresh(narrow));
        assert!(all_wide.len() > all_narrow.len() + 10);
        for _ in 0..3 {
            let mut first = likeliest(&header, p, 3, wide, true);
            assert!(matches!(first, Likeliest::Listed(_)));
            let head: Vec<u64> = first.by_ref().take(5).collect();
            let second: Vec<u64> = likeliest(&header, p, 3, narrow, true).collect();
            assert_eq!(second, all_narrow);
            let rest: Vec<u64> = first.collect();
            assert_eq!([head, rest].concat(), all_wide);
            let half_read = likeliest(&header, p, 3, wide, false).nth(3);
            assert!(half_read.is_some());
            assert_eq!(
                likeliest(&header, p, 3, narrow, true).collect::<Vec<_>>(),
                all_narrow
            );
        }
    }

    #[test]
    fn odd_probabilities_are_tolerated() {
        let header: Vec<u8> = (0..10).collect();
        for p in [0.0, 1.0, f64::NAN, -3.0] {
            let masks = flips(&header, |_| p, 2, EVERYTHING);
            assert_eq!(masks.len() as u64, exact_count(10, 2));
        }
        assert_eq!(flips(&[], |_| 0.3, 3, EVERYTHING), vec![0]);
    }

    /// `symmetric_sums` against the sums over every subset enumerated, for
    /// 0 to 13 odds (odd and even counts: the two chains and the one left
    /// over) at every `k` its two widths serve.
    #[test]
    fn symmetric_sums_are_the_sums_over_every_subset() {
        let mut rng = crate::test_rng::TestRng::new(24);
        for n in 0..=13usize {
            let odds: Vec<f64> = (0..n)
                .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
                .collect();
            let mut want = [0f64; 9];
            for s in 0u32..1 << n {
                let h = s.count_ones() as usize;
                if h <= 8 {
                    let bits = (0..n).filter(|&i| s >> i & 1 == 1);
                    want[h] += bits.map(|i| odds[i]).product::<f64>();
                }
            }
            for k in 0..=8 {
                let e = symmetric_sums(&odds, k);
                for h in 0..=k {
                    let close = (e[h] - want[h]).abs() <= 1e-12 * want[h].max(1e-300);
                    assert!(
                        close,
                        "n = {n}, k = {k}, h = {h}: {} against {}",
                        e[h], want[h]
                    );
                }
            }
        }
    }

    /// `likeliest_by_odds` with a volatility's table of odds takes the sets
    /// `likeliest` takes from its probabilities, in order when more than
    /// `ordered_past` are taken, as they come without `in_order` when none
    /// is; odds out of range (above 1, negative, not a number) are taken
    /// as the probabilities they stand for would be.
    #[test]
    fn odds_from_the_table_take_the_sets_of_the_probabilities() {
        let mut rng = crate::test_rng::TestRng::new(25);
        for round in 0..200 {
            let bytes: [u8; 64] = std::array::from_fn(|_| (rng.next_u64() % 120) as u8);
            let v = crate::simhash::Volatility::from_bytes(bytes);
            let t = 10 + (round % 21) as u8;
            let header: Vec<u8> = (64 - t..64).collect();
            let k = (round % 5) as u8;
            let recall = [0.5, 0.9, 0.95, 0.99, 1.0][round / 5 % 5];
            let stop = Budget {
                recall,
                max_probes: 2000,
            };
            let ordered: Vec<u64> =
                likeliest(&header, |b| v.probability(b), k, stop, true).collect();
            let any: Vec<u64> = likeliest(&header, |b| v.probability(b), k, stop, false).collect();
            let odds = v.odds();
            assert_eq!(
                likeliest_by_odds(&header, &odds, k, stop, 0).collect::<Vec<_>>(),
                ordered
            );
            let never: Vec<u64> = likeliest_by_odds(&header, &odds, k, stop, usize::MAX).collect();
            assert_eq!(never, any, "round {round}");
            // Past `n`: in order when more than `n` are taken, else the
            // same sets in any order, the empty one first.
            let sorted = |mut m: Vec<u64>| {
                m.sort_unstable();
                m
            };
            for n in [1, 5, 20, 40, 200] {
                let past: Vec<u64> = likeliest_by_odds(&header, &odds, k, stop, n).collect();
                if ordered.len() > n {
                    assert_eq!(past, ordered, "round {round}, n = {n}");
                } else {
                    assert_eq!(past[0], 0);
                    assert_eq!(
                        sorted(past),
                        sorted(ordered.clone()),
                        "round {round}, n = {n}"
                    );
                }
            }
        }
        let header: Vec<u8> = (40..64).collect();
        let odds: [f64; 64] = std::array::from_fn(|j| match j % 4 {
            0 => 7.0,
            1 => -1.0,
            2 => f64::NAN,
            _ => 0.25,
        });
        let p = |j: u8| match j % 4 {
            0 => 0.9,
            1 => -1.0,
            2 => f64::NAN,
            _ => 0.2,
        };
        let stop = Budget {
            recall: 0.99,
            max_probes: 500,
        };
        let by_odds: Vec<u64> = likeliest_by_odds(&header, &odds, 3, stop, 0).collect();
        let by_p: Vec<u64> = likeliest(&header, p, 3, stop, true).collect();
        assert_eq!(by_odds, by_p);
    }
}
