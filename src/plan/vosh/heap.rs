//! The Volatility Ordered Set Heap (Algorithm 2): flip sets popped in
//! decreasing probability, each set packed into one integer.

use std::collections::BinaryHeap;

use super::order::Order;
use super::{odds_table, Budget, MAX_HEADER, MIN_ODDS};

/// A set of header positions (indexes into the bits sorted by
/// probability) with its odds product, packed into one integer whose
/// order is the heap's: the odds' bits on top (positive floats order as
/// their bits), then ties broken towards smaller sets, then towards
/// smaller positions, so the order is deterministic.
///
/// Layout, from the top: 64 bits of odds, 4 bits of `8 − len`, then eight
/// 7-bit fields holding `127 − position` (unused fields hold 127).
pub(super) type Node = u128;

/// Bits of one position field of a [`Node`].
pub(super) const FIELD: u32 = 7;

/// The largest position a [`Node`] field holds (also its filler).
pub(super) const FIELD_MAX: u8 = (1 << FIELD) - 1;

pub(super) fn node(odds: f64, at: &[u8]) -> Node {
    debug_assert!(odds > 0.0 && at.len() <= 8);
    let mut payload = u128::from(8 - at.len() as u8);
    for i in 0..8 {
        let p = at.get(i).copied().unwrap_or(0);
        payload = payload << FIELD | u128::from(FIELD_MAX - p);
    }
    u128::from(odds.to_bits()) << 64 | payload
}

pub(super) fn node_odds(n: Node) -> f64 {
    f64::from_bits((n >> 64) as u64)
}

pub(super) fn node_len(n: Node) -> usize {
    8 - ((n >> (8 * FIELD)) & 0xf) as usize
}

pub(super) fn node_at(n: Node, i: usize) -> u8 {
    FIELD_MAX - ((n >> ((7 - i) as u32 * FIELD)) as u8 & FIELD_MAX)
}

/// `n` with position `i` moved one place down the order and odds `odds`.
pub(super) fn node_step(n: Node, i: usize, odds: f64) -> Node {
    // The field holds 127 − position: one less moves the position on.
    let stepped = n - (1u128 << ((7 - i) as u32 * FIELD));
    (stepped & u128::from(u64::MAX)) | u128::from(odds.to_bits()) << 64
}

/// [`flips`](super::flips) one mask at a time: a caller that stops early (a first-match
/// query that found one) spends nothing on the sets it does not take.
#[derive(Debug, Clone)]
pub struct Flips {
    /// Header bits in use.
    pub(super) n: usize,
    /// Header bit numbers, likeliest first.
    pub(super) bits: [u8; MAX_HEADER],
    /// `step[i]`: the odds `p/(1−p)` of bit `i + 1` of that order over
    /// those of bit `i` (what moving a set's bit one place down the order
    /// multiplies its odds by).
    pub(super) step: [f64; MAX_HEADER],
    pub(super) heap: BinaryHeap<Node>,
    pub(super) covered: f64,
    pub(super) goal: f64,
    pub(super) exhaustive: bool,
    pub(super) max_probes: usize,
    pub(super) taken: usize,
}

impl Flips {
    /// The flip sets of [`flips`](super::flips), to be taken in order.
    pub fn new(header: &[u8], p: impl Fn(u8) -> f64, k: u8, stop: Budget) -> Self {
        Self::ordered(&Order::new(header, &odds_table(p), k), stop)
    }

    pub(super) fn ordered(order: &Order, stop: Budget) -> Self {
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
