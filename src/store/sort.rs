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

/// The `(fingerprint, id)` pairs of `pairs` that have an id, sorted
/// (repeats kept), by the same radix pass on the fingerprints' top bits.
pub(crate) fn sorted_pairs<E: super::Entry>(pairs: &[E]) -> Vec<(u64, u64)> {
    let with_ids = || {
        pairs
            .iter()
            .filter_map(|e| e.id().map(|id| (e.fingerprint(), id)))
    };
    let n = with_ids().count();
    if n < RADIX_MIN {
        let mut out: Vec<(u64, u64)> = with_ids().collect();
        out.sort_unstable();
        return out;
    }
    let log = usize::BITS - 1 - n.leading_zeros();
    let bits = log.saturating_sub(14).clamp(8, 12);
    let shift = 64 - bits;
    let bucket = |fp: u64| (fp >> shift) as usize;
    let mut starts = vec![0usize; (1 << bits) + 1];
    for (fp, _) in with_ids() {
        starts[bucket(fp) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut out = vec![(0u64, 0u64); n];
    let mut at = starts.clone();
    for pair in with_ids() {
        let b = bucket(pair.0);
        out[at[b]] = pair;
        at[b] += 1;
    }
    sort_buckets(&mut out, &starts, super::parallel::cores());
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
            assert_eq!(sorted_pairs(&pairs), want, "n {n} spread {spread}");
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
