//! Flip sets listed without the heap: a pruned depth-first walk over the
//! sets above a bound, their odds bucketed to find the ones the heap
//! would take.

use super::order::{Odds, Order};
use super::{Budget, HOPEFUL};

/// The masks [`likeliest`](super::likeliest) listed, taken in order. Dropped, it gives its
/// buffer back to the thread's next listings, which then list without
/// allocating.
#[derive(Debug, Clone)]
pub struct Listed {
    pub(super) masks: Vec<u64>,
    pub(super) next: usize,
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

/// [`likeliest`](super::likeliest)'s lists, kept by each thread from one query to the
/// next.
#[derive(Default)]
struct Scratch {
    pub(super) sets: Vec<u128>,
    pub(super) edge: Vec<u128>,
    /// Buffers of [`Listed`]s dropped (the queries of a group are listed
    /// before any is dropped).
    pub(super) spare: Vec<Vec<u64>>,
}

/// The most buffers a thread keeps for its next listings.
pub(super) const SPARES: usize = 128;

/// The largest buffer (in masks) a thread keeps: a listing of more sets
/// costs far more than its allocation.
pub(super) const SPARE_MASKS: usize = 1024;

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

/// [`listed`] into the buffers this thread keeps: the masks, or `None`
/// when rounding left the sets above `bound` short of the goal.
pub(super) fn listed_here(
    odds: &Odds,
    bound: f64,
    goal: f64,
    stop: Budget,
    ordered_past: usize,
) -> Option<Vec<u64>> {
    SCRATCH.with_borrow_mut(|scratch| {
        let Scratch { sets, edge, spare } = scratch;
        let mut out = spare.pop().unwrap_or_default();
        listed(odds, bound, goal, stop, ordered_past, sets, edge, &mut out).then_some(out)
    })
}

/// [`likeliest`](super::likeliest) once the safe `bound` is known, with
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
pub(super) const BUCKETS: usize = 128;

/// The bucket of a set with odds `odds` (at most 1).
pub(super) fn bucket(odds: f64) -> usize {
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
pub(super) fn take_likeliest(
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

/// [`likeliest`](super::likeliest)'s walk: every set of 1 to `k` bits with weighted odds
/// at least `bound`, pushed as the weighted odds' bits over the mask,
/// depth first (a set, then the sets extending it by later bits, then the
/// next bit in its place). The odds are in decreasing order and a larger
/// set weighs no more than a smaller one, so at the first bit that takes
/// a set below the bound no later bit in its place, and nothing extending
/// it, does better.
pub(super) fn walk(order: &Order, bound: f64, sets: &mut Vec<u128>) {
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
pub(super) fn walk_to_three(order: &Order, bound: f64, sets: &mut Vec<u128>) {
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
pub(super) fn walk_any(order: &Order, bound: f64, sets: &mut Vec<u128>) {
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
