//! Sorting the keys of a large batch (a bulk insert's fingerprints, each
//! table's permutation of them) by one radix pass on their top bits and a
//! small sort per bucket: a comparison sort of 100M random keys took most
//! of a 100M bulk load's time.

/// Inputs smaller than this are mapped and sorted by comparison.
const RADIX_MIN: usize = 1 << 16;

/// `key(v)` for every `v` of `values`, in increasing order (repeats kept).
///
/// Large inputs are counted by their keys' top bits (16K to 32K keys a
/// bucket, at most 2^12 buckets: few enough write positions for the
/// scatter, buckets small enough to sort in the cache), scattered into
/// their buckets and each bucket sorted on its own; no unsorted copy of
/// the keys is made (`key` is computed twice instead). At 100M, 16-bit
/// buckets made a 100M-line `simstore add` take 106 s, 12-bit ones 101 s,
/// a comparison sort of each table's keys 112 s.
pub(crate) fn sorted_keys<T>(values: &[T], key: impl Fn(&T) -> u64) -> Vec<u64> {
    if values.len() < RADIX_MIN {
        let mut out: Vec<u64> = values.iter().map(key).collect();
        out.sort_unstable();
        return out;
    }
    let log = usize::BITS - 1 - values.len().leading_zeros();
    let bits = log.saturating_sub(14).clamp(8, 12);
    let shift = 64 - bits;
    let bucket = |k: u64| (k >> shift) as usize;
    let mut starts = vec![0usize; (1 << bits) + 1];
    for v in values {
        starts[bucket(key(v)) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut out = vec![0u64; values.len()];
    let mut at = starts.clone();
    for v in values {
        let k = key(v);
        let b = bucket(k);
        out[at[b]] = k;
        at[b] += 1;
    }
    for pair in starts.windows(2) {
        out[pair[0]..pair[1]].sort_unstable();
    }
    out
}

/// Most moved top bits [`permuted_sorted`] sorts by radix passes.
const STABLE_BITS_MAX: u32 = 33;
/// Most bits of one radix pass of [`permuted_sorted`] (2048 buckets).
const DIGIT_BITS_MAX: u32 = 11;

/// `values` under `permutation`, in increasing order (repeats kept).
///
/// Values already in increasing order need only a stable sort on the
/// permuted word's moved top bits ([`Permutation::moved_top_bits`]: 16
/// for each table but the first of the four-table plan), a pass or two
/// of least-significant-digit radix scatters instead of a sort of every
/// bucket. Other values, small inputs and wider moves go to
/// [`sorted_keys`].
///
/// [`Permutation::moved_top_bits`]: crate::plan::Permutation::moved_top_bits
pub(crate) fn permuted_sorted(values: &[u64], permutation: &crate::plan::Permutation) -> Vec<u64> {
    let moved = permutation.moved_top_bits();
    if values.len() < RADIX_MIN
        || moved > STABLE_BITS_MAX
        || !values.windows(2).all(|p| p[0] <= p[1])
    {
        return sorted_keys(values, |&x| permutation.apply(x));
    }
    let mut keys: Vec<u64> = values.iter().map(|&x| permutation.apply(x)).collect();
    if moved == 0 {
        return keys;
    }
    let passes = moved.div_ceil(DIGIT_BITS_MAX);
    let digit = moved.div_ceil(passes);
    let mut spare = vec![0u64; keys.len()];
    let mut low = 64 - moved;
    while low < 64 {
        let width = digit.min(64 - low);
        stable_scatter(&keys, &mut spare, low, width);
        std::mem::swap(&mut keys, &mut spare);
        low += width;
    }
    keys
}

/// `from` into `to`, stably ordered by bits `low..low + width` (at most
/// [`DIGIT_BITS_MAX`]).
fn stable_scatter(from: &[u64], to: &mut [u64], low: u32, width: u32) {
    let mask = (1u64 << width) - 1;
    let digit = |k: u64| ((k >> low) & mask) as usize;
    let mut at = vec![0usize; 1 << width];
    for &k in from {
        at[digit(k)] += 1;
    }
    let mut sum = 0;
    for slot in &mut at {
        let count = *slot;
        *slot = sum;
        sum += count;
    }
    for &k in from {
        let d = digit(k);
        to[at[d]] = k;
        at[d] += 1;
    }
}

/// The `(fingerprint, id)` pairs of `pairs` that have an id, sorted
/// (repeats kept), by the same radix pass on the fingerprints' top bits.
pub(crate) fn sorted_pairs<E: super::Entry>(pairs: &[E]) -> Vec<(u64, u64)> {
    sorted_pairs_on(pairs, super::parallel::cores())
}

/// [`sorted_pairs`] counted, scattered and sorted by up to `threads`
/// threads (the calling one included).
fn sorted_pairs_on<E: super::Entry>(pairs: &[E], threads: usize) -> Vec<(u64, u64)> {
    let with_ids = || {
        pairs
            .iter()
            .filter_map(|e| e.id().map(|id| (e.fingerprint(), id)))
    };
    let sorted = || {
        let mut out: Vec<(u64, u64)> = with_ids().collect();
        out.sort_unstable();
        out
    };
    if pairs.len() < RADIX_MIN {
        return sorted();
    }
    // Buckets sized for the whole input (the pairs with ids are usually
    // all of it); their count, below, comes from the same pass.
    let log = usize::BITS - 1 - pairs.len().leading_zeros();
    let bits = log.saturating_sub(14).clamp(8, 12);
    let shift = 64 - bits;
    let bucket = |fp: u64| (fp >> shift) as usize;
    // Each share of the input is counted and scattered by its own thread,
    // into its own piece of every bucket (the pieces of a bucket follow
    // each other in share order).
    let per = super::parallel::share_len(pairs.len(), threads);
    let counts = super::parallel::map_shares(pairs, threads, |share| {
        let mut counts = vec![0usize; 1 << bits];
        for e in share {
            if e.id().is_some() {
                counts[bucket(e.fingerprint())] += 1;
            }
        }
        counts
    });
    let n = counts.iter().flatten().sum();
    if n < RADIX_MIN {
        return sorted();
    }
    let mut starts = vec![0usize; (1 << bits) + 1];
    for b in 0..1 << bits {
        starts[b + 1] = starts[b] + counts.iter().map(|c| c[b]).sum::<usize>();
    }
    let mut out = vec![(0u64, 0u64); n];
    let mut pieces: Vec<Vec<&mut [(u64, u64)]>> = (0..counts.len()).map(|_| Vec::new()).collect();
    let mut rest = &mut out[..];
    for b in 0..1 << bits {
        for (t, c) in counts.iter().enumerate() {
            let (piece, after) = std::mem::take(&mut rest).split_at_mut(c[b]);
            pieces[t].push(piece);
            rest = after;
        }
    }
    let scatter = |share: &[E], mut pieces: Vec<&mut [(u64, u64)]>| {
        let mut at = vec![0usize; pieces.len()];
        for e in share {
            if let Some(id) = e.id() {
                let fp = e.fingerprint();
                let b = bucket(fp);
                pieces[b][at[b]] = (fp, id);
                at[b] += 1;
            }
        }
    };
    std::thread::scope(|scope| {
        let mut shares = pairs.chunks(per).zip(pieces);
        let first = shares.next();
        for (share, pieces) in shares {
            scope.spawn(move || scatter(share, pieces));
        }
        if let Some((share, pieces)) = first {
            scatter(share, pieces);
        }
    });
    sort_buckets(&mut out, &starts, threads);
    out
}

/// Sorts each bucket `out[starts[b]..starts[b + 1]]`, the buckets shared
/// out in consecutive runs of about equal length over up to `threads`
/// scoped threads (the calling one included).
fn sort_buckets<T: Ord + Send>(out: &mut [T], starts: &[usize], threads: usize) {
    let sort_all = |out: &mut [T], starts: &[usize]| {
        let base = starts[0];
        for range in starts.windows(2) {
            out[range[0] - base..range[1] - base].sort_unstable();
        }
    };
    let n = out.len();
    let threads = threads.clamp(1, n / RADIX_MIN + 1);
    if threads == 1 {
        return sort_all(out, starts);
    }
    // The bucket boundaries nearest each share's end.
    let cuts: Vec<usize> = (0..=threads)
        .map(|t| starts.partition_point(|&s| s < n * t / threads))
        .collect();
    std::thread::scope(|scope| {
        let mut rest = out;
        let mut shares = Vec::with_capacity(threads);
        for pair in cuts.windows(2) {
            let bounds = &starts[pair[0]..=pair[1].max(pair[0])];
            let len = bounds[bounds.len() - 1] - bounds[0];
            let (share, after) = std::mem::take(&mut rest).split_at_mut(len);
            rest = after;
            shares.push((share, bounds));
        }
        let (first, first_bounds) = shares.remove(0);
        for (share, bounds) in shares {
            scope.spawn(move || sort_all(share, bounds));
        }
        sort_all(first, first_bounds);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same as mapping and sorting, across the radix threshold, with
    /// repeats, extremes and keys crowded into few buckets.
    #[test]
    fn sorted_keys_match_a_comparison_sort() {
        let mut rng = crate::test_rng::TestRng::new(1);
        let mut next = move || rng.next_u64();
        for (n, spread) in [
            (0usize, 64u32),
            (1, 64),
            (1000, 64),
            (RADIX_MIN - 1, 64),
            (RADIX_MIN, 64),
            (RADIX_MIN + 7, 3),
            (300_000, 64),
            (300_000, 20),
            (1 << 21, 64),
        ] {
            let values: Vec<u64> = (0..n)
                .map(|i| match i % 97 {
                    0 => 0,
                    1 => u64::MAX,
                    2 => 12345,
                    _ => next() >> (64 - spread),
                })
                .collect();
            let mix = |&v: &u64| v.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15;
            let mut want: Vec<u64> = values.iter().map(mix).collect();
            want.sort_unstable();
            assert_eq!(sorted_keys(&values, mix), want, "n {n} spread {spread}");
            let mut plain = values.clone();
            plain.sort_unstable();
            assert_eq!(sorted_keys(&values, |&v| v), plain, "n {n} spread {spread}");
            let pairs: Vec<(u64, Option<u64>)> = values
                .iter()
                .enumerate()
                .map(|(i, &v)| (v, (i % 5 != 0).then_some(v.rotate_left(7) % 1000)))
                .collect();
            let mut want: Vec<(u64, u64)> = pairs
                .iter()
                .filter_map(|&(f, id)| id.map(|id| (f, id)))
                .collect();
            want.sort_unstable();
            for threads in [1, 2, 3, 8] {
                assert_eq!(
                    sorted_pairs_on(&pairs, threads),
                    want,
                    "n {n} spread {spread} threads {threads}"
                );
            }
        }
    }

    /// The same as mapping and sorting, for the plans' permutations and
    /// others (moved blocks of every width, a scattered bit map), sorted
    /// and unsorted input, with repeats.
    #[test]
    fn permuted_sorted_matches_a_comparison_sort() {
        use crate::plan::{Permutation, Plan};
        let mut permutations: Vec<Permutation> = Vec::new();
        for (k, blocks) in [(3, 4), (3, 5), (3, 6), (4, 5), (2, 3), (1, 2)] {
            let plan = Plan::new(k, blocks).unwrap();
            permutations.extend(plan.tables().iter().map(|t| t.permutation.clone()));
        }
        for top in [11u8, 12, 20, 33, 34, 48] {
            let rest = 64 - top;
            let split = rest / 2;
            permutations.push(
                Permutation::from_runs_top_down(&[
                    (split, top),
                    (split + top, rest - split),
                    (0, split),
                ])
                .unwrap(),
            );
        }
        let mut scattered = [0u8; 64];
        for (i, s) in scattered.iter_mut().enumerate() {
            *s = ((i * 37) % 64) as u8;
        }
        permutations.push(Permutation::from_source(scattered).unwrap());
        let mut rng = crate::test_rng::TestRng::new(4);
        for n in [0usize, 5, RADIX_MIN - 1, RADIX_MIN, 200_000] {
            let mut values: Vec<u64> = (0..n)
                .map(|i| match i % 50 {
                    0 => 0,
                    1 => u64::MAX,
                    // Repeats.
                    2..=4 => 0x0123_4567_89ab_cdef,
                    _ => rng.next_u64(),
                })
                .collect();
            for sorted in [false, true] {
                if sorted {
                    values.sort_unstable();
                }
                for p in &permutations {
                    let mut want: Vec<u64> = values.iter().map(|&v| p.apply(v)).collect();
                    want.sort_unstable();
                    assert_eq!(
                        permuted_sorted(&values, p),
                        want,
                        "n {n} sorted {sorted} moved {}",
                        p.moved_top_bits()
                    );
                }
            }
        }
    }

    /// Buckets sorted by any number of threads, whatever their sizes
    /// (empty ones, one holding nearly everything).
    #[test]
    fn buckets_are_sorted_by_any_number_of_threads() {
        let mut rng = crate::test_rng::TestRng::new(2);
        for sizes in [
            vec![0, 0, 0],
            vec![5, 0, RADIX_MIN * 3, 1, 0],
            vec![RADIX_MIN; 7],
            vec![1, RADIX_MIN * 4 + 3],
            vec![RADIX_MIN * 2 + 1, 0, 0, 2, RADIX_MIN, 9],
        ] {
            let mut starts = vec![0];
            for s in &sizes {
                starts.push(starts[starts.len() - 1] + s);
            }
            let values: Vec<(u64, u64)> = (0..starts[starts.len() - 1])
                .map(|_| (rng.next_u64() % 1000, rng.next_u64()))
                .collect();
            let mut want = values.clone();
            for range in starts.windows(2) {
                want[range[0]..range[1]].sort_unstable();
            }
            for threads in [1, 2, 3, 8] {
                let mut got = values.clone();
                sort_buckets(&mut got, &starts, threads);
                assert_eq!(got, want, "sizes {sizes:?} threads {threads}");
            }
        }
    }
}
