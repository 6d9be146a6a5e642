//! Unit tests of the flip sets: the heap's order against every set, the
//! walk and its buckets against the heap, the odds' sums against brute force.

use super::order::{symmetric_sums, Order};
use super::walk::{walk, walk_any};
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
        let ordered: Vec<u64> = likeliest(&header, |b| v.probability(b), k, stop, true).collect();
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
