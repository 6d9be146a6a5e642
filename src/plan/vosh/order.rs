//! A query's header bits with their odds of flipping, ordered likeliest
//! first, and the total odds of every set of at most `k` of them (the
//! elementary symmetric sums, weighted by the chance that the other bits
//! stay within the distance left).

use super::{MAX_HEADER, MIN_ODDS};

/// A query's header bits ordered likeliest first, with their odds and
/// the total odds of the sets of at most `k` of them.
pub(super) struct Order {
    /// Header bits ordered: every one in use, or those a walk's sets can
    /// hold (see [`Odds::order`]).
    pub(super) n: usize,
    /// The largest set size, at most the header's bits in use and 8.
    pub(super) k: usize,
    /// Header bit numbers, likeliest first.
    pub(super) bits: [u8; MAX_HEADER],
    /// Their odds `p/(1−p)`, at most 1, in the same order.
    pub(super) odds: [f64; MAX_HEADER],
    /// `weight[h]`: what a set of `h` bits' odds product is multiplied
    /// by, `R(k − h) / R(k)` (see the [module documentation](self)): 1
    /// for the empty set, then not increasing.
    pub(super) weight: [f64; 9],
    /// The sum of the weighted odds products of every set of at most `k`
    /// bits, the empty set's 1 included.
    pub(super) total: f64,
}

impl Order {
    /// The order of `header` with each bit `j` flipping with odds
    /// `odds[j]` (see [`likeliest_by_odds`](super::likeliest_by_odds)).
    pub(super) fn new(header: &[u8], odds: &[f64; 64], k: u8) -> Self {
        Odds::new(header, odds, k).order(0.0)
    }
}

/// A query's header bits with their odds, unordered, and the total odds
/// of the sets of at most `k` of them: what both the heap (which orders
/// every bit) and the walk (which orders only the bits a set it lists
/// can hold) start from.
pub(super) struct Odds {
    /// Every bit's odds, within `MIN_ODDS..=1`.
    pub(super) odds_of: [f64; 64],
    /// The header bits in use, as a mask.
    pub(super) inside: u64,
    /// The largest set size, at most the header's bits and 8.
    pub(super) k: usize,
    /// See [`Order::weight`].
    pub(super) weight: [f64; 9],
    /// See [`Order::total`].
    pub(super) total: f64,
}

impl Odds {
    #[inline]
    pub(super) fn new(header: &[u8], odds: &[f64; 64], k: u8) -> Self {
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
    #[inline]
    pub(super) fn order(&self, least: f64) -> Order {
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
#[inline]
pub(super) fn bits_of(mut mask: u64) -> impl Iterator<Item = u8> {
    std::iter::from_fn(move || {
        let b = (mask != 0).then(|| mask.trailing_zeros() as u8)?;
        mask &= mask - 1;
        Some(b)
    })
}

/// `e[h]`: the sum over sets of `h` of `odds` of their products (`e[0]`
/// = 1), for `h` up to `k` (at most 8); the entries past `k` are not
/// computed.
#[inline]
pub(super) fn symmetric_sums(odds: &[f64], k: usize) -> [f64; 9] {
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
pub(super) fn sums_to<const D: usize>(odds: &[f64]) -> [f64; D] {
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
#[inline]
pub(super) fn rest_weights(inside: u64, odds_of: &[f64; 64], k: usize) -> [f64; 9] {
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
