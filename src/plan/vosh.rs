//! Which header bits to flip, in decreasing probability: the Volatility
//! Ordered Set Heap of Sood & Loguinov (CIKM 2011, §5.2, Algorithm 2).
//!
//! A one-table store keeps every fingerprint sorted on all 64 bits and
//! probes, for a query, the run sharing its top `t` bits (the header) and
//! then the runs of headers with some bits flipped. Flip sets are taken
//! in decreasing probability under independent per-bit flip
//! probabilities `p_j`: `P(S) ∝ ∏_{j∈S} p_j/(1−p_j)`. For each size `h`
//! the sets form a tree over the bits sorted by probability: the root is
//! the `h` likeliest bits; a set's left child moves its last bit one
//! place down the order, its right child moves the bit before the first
//! gap of two (none when that gap is wider). Every set of size `h` is
//! reached exactly once and no child is likelier than its parent, so a
//! heap holding the frontier of the `k` trees yields the sets in
//! decreasing probability.
//!
//! The search stops when the sets taken cover the asked share of the
//! probability of all sets of at most `k` bits (the elementary symmetric
//! sums of the odds give that total without listing the sets), or at the
//! probe budget.

use std::collections::BinaryHeap;

/// How far a probabilistic query searches: when to stop taking flip sets.
///
/// The default covers 95% of the flip probability with no probe limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Share of the flip probability (of sets of at most `k` header bits)
    /// to cover; 1 or more takes every set, in probability order.
    pub recall: f64,
    /// The most flip sets taken, the unflipped header included.
    pub max_probes: usize,
}

/// The default [`Budget::recall`].
pub const DEFAULT_RECALL: f64 = 0.95;

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

    /// A budget covering `recall` of the flip probability, without a probe
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

/// The smallest odds a bit is given, so that products of up to 8 of them
/// stay normal numbers and comparable.
const MIN_ODDS: f64 = 1e-30;

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

impl Flips {
    /// The flip sets of [`flips`], to be taken in order.
    pub fn new(header: &[u8], p: impl Fn(u8) -> f64, k: u8, stop: Budget) -> Self {
        let header = &header[..header.len().min(MAX_HEADER)];
        let n = header.len();
        let k = usize::from(k.min(8)).min(n);
        // Likeliest first, ties by bit number: the odds are positive, so
        // their bits order as they do.
        // One word a bit, which sorts without branches: the odds' bits
        // (below 2^62, odds being at most 1) inverted so the likeliest
        // sorts first, less their lowest 4 (odds within 2^-48 of each other
        // are ordered by bit number), then the bit number in the low 6.
        let mut order = [0u64; MAX_HEADER];
        let mut odds_of = [0f64; MAX_HEADER];
        for (o, &b) in order.iter_mut().zip(header) {
            let p = p(b);
            let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 0.5) };
            let odds = (p / (1.0 - p)).max(MIN_ODDS);
            odds_of[usize::from(b & 63)] = odds;
            *o = (!(odds.to_bits() << 2) & !0x3f) | u64::from(b & 63);
        }
        order[..n].sort_unstable();
        let mut bits = [0u8; MAX_HEADER];
        let mut odds = [0f64; MAX_HEADER];
        for (i, &o) in order[..n].iter().enumerate() {
            let b = (o & 0x3f) as u8;
            bits[i] = b;
            odds[i] = odds_of[usize::from(b)];
        }
        // e[h]: the sum over sets of h bits of their odds products.
        let mut e = [0f64; 9];
        e[0] = 1.0;
        for &o in &odds[..n] {
            for h in (1..=k).rev() {
                e[h] += e[h - 1] * o;
            }
        }
        let total: f64 = e[..=k].iter().sum();
        let mut heap = BinaryHeap::with_capacity(2 * k + 64);
        let first: [u8; 8] = std::array::from_fn(|i| i as u8);
        for h in 1..=k {
            heap.push(node(odds[..h].iter().product(), &first[..h]));
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
                let odds: f64 = (0..64)
                    .filter(|&j| m >> j & 1 == 1)
                    .map(|j| p(j) / (1.0 - p(j)))
                    .product();
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
            let odds = |b: u8| {
                let p = p[usize::from(b)];
                (p / (1.0 - p)).max(MIN_ODDS)
            };
            let reference = every_set(&header, odds, u32::from(k));
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
                let got: f64 = (0..64u8).filter(|&b| m >> b & 1 == 1).map(odds).product();
                assert!(
                    (got - want).abs() <= want * 1e-9,
                    "width {width}, k {k}: set {i} has odds {got}, the {i}-th likeliest {want}"
                );
            }
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
}
