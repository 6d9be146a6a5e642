//! The in-memory block index of one table: the sorted first keys of its
//! blocks, searched by interpolation (fingerprints are close to uniform)
//! with a bounded fallback to bisection, so clustered keys never cost more
//! than `O(log n)` probes.

/// Keys per directory bucket aimed for: about one cache line of keys.
const KEYS_PER_BUCKET: usize = 8;

/// A coarse directory over sorted keys: for each value of their top `bits`
/// bits, where its keys start. It narrows an interpolation search to about
/// one cache line of keys, so a lookup costs one directory read (small
/// enough to stay cached) and about one read of the keys, instead of the
/// two or three dependent reads of interpolating over the whole array.
/// Memory only, derived from the keys.
#[derive(Debug, Clone, Default)]
pub struct Directory {
    /// `starts[b]`: the number of keys whose top bits are below `b`;
    /// `2^bits + 1` entries.
    starts: Box<[u32]>,
    bits: u32,
}

impl Directory {
    /// The directory of sorted `keys`.
    pub fn new(keys: &[u64]) -> Self {
        let buckets = (keys.len() / KEYS_PER_BUCKET).max(1);
        let bits = usize::BITS - (buckets - 1).leading_zeros();
        Self::with_bits(keys, bits.min(24))
    }

    /// The directory of sorted `keys` over their top `bits` bits (at most
    /// 32: `2^bits + 1` entries of 4 bytes).
    pub fn with_bits(keys: &[u64], bits: u32) -> Self {
        debug_assert!(bits <= 32);
        let mut at = 0usize;
        // Read at random by every probe: in huge pages when large.
        let starts = crate::pages::collect((0..(1usize << bits) + 1).map(|b| {
            while at < keys.len() && bucket(keys[at], bits) < b {
                at += 1;
            }
            u32::try_from(at).unwrap_or(u32::MAX)
        }));
        Self {
            starts: starts.into_boxed_slice(),
            bits,
        }
    }

    /// Bytes of memory the directory takes.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val::<[u32]>(&self.starts)
    }

    /// [`locate`] in `keys` (the keys the directory was built from).
    #[inline]
    pub fn locate(&self, keys: &[u64], target: u64) -> Option<usize> {
        locate_within(keys, self.range(target), target)
    }

    /// The index range of `keys` (those the directory was built from)
    /// whose top bits are `target`'s.
    #[inline]
    pub fn bucket(&self, target: u64) -> std::ops::Range<usize> {
        let b = bucket(target, self.bits);
        self.starts[b] as usize..self.starts[b + 1] as usize
    }

    /// The index range of `keys` (those the directory was built from)
    /// that holds the last key ≤ `target`, if there is one.
    #[inline]
    pub fn range(&self, target: u64) -> std::ops::Range<usize> {
        let b = bucket(target, self.bits);
        match (self.starts.get(b), self.starts.get(b + 1)) {
            // The last key ≤ target is in this bucket or the one before it.
            (Some(&start), Some(&end)) => (start as usize).saturating_sub(1)..end as usize,
            _ => 0..usize::MAX,
        }
    }
}

/// [`locate`] restricted to `range` of `keys` (clamped to the keys),
/// which must hold the answer if there is one.
#[inline]
pub fn locate_within(keys: &[u64], range: std::ops::Range<usize>, target: u64) -> Option<usize> {
    let end = range.end.min(keys.len());
    let lo = range.start.min(end);
    locate(keys.get(lo..end)?, target).map(|i| lo + i)
}

/// The top `bits` bits of `key`, as a bucket number.
#[inline]
fn bucket(key: u64, bits: u32) -> usize {
    key.checked_shr(64 - bits).unwrap_or(0) as usize
}

/// Interpolation steps tried before switching to bisection.
const INTERPOLATION_STEPS: u32 = 6;

/// Keys few enough to be counted rather than searched: a directory
/// bucket's (about [`KEYS_PER_BUCKET`]) with room to spare.
const COUNTED_KEYS: usize = 16;

/// Returns the index of the last key `≤ target` in sorted `keys`, or `None`
/// when every key is larger (or `keys` is empty).
pub fn locate(keys: &[u64], target: u64) -> Option<usize> {
    if keys.len() <= COUNTED_KEYS {
        // A count of the keys `≤ target`, without a branch a key.
        let at_most = keys
            .iter()
            .map(|&k| usize::from(k <= target))
            .sum::<usize>();
        return at_most.checked_sub(1);
    }
    let first = *keys.first()?;
    if target < first {
        return None;
    }
    // Invariant: keys[lo] <= target, and every key past `hi` is > target.
    let mut lo = 0usize;
    let mut hi = keys.len() - 1;
    let mut steps = 0;
    while lo < hi {
        let (lo_key, hi_key) = (keys[lo], keys[hi]);
        if target >= hi_key {
            return Some(hi);
        }
        let mid = if steps < INTERPOLATION_STEPS && hi_key > lo_key {
            steps += 1;
            // Floating point: a guess need not be exact (it is clamped and
            // checked), and a 128-bit division costs far more.
            let fraction = (target - lo_key) as f64 / (hi_key - lo_key) as f64;
            let offset = (fraction * (hi - lo) as f64) as usize;
            (lo + offset).clamp(lo + 1, hi)
        } else {
            lo + (hi - lo).div_ceil(2)
        };
        if keys[mid] <= target {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(keys: &[u64], target: u64) -> Option<usize> {
        keys.partition_point(|&k| k <= target).checked_sub(1)
    }

    #[test]
    fn agrees_with_partition_point_on_uniform_and_clustered_keys() {
        let mut rng = crate::test_rng::TestRng::new(1);
        let mut next = || rng.next_u64();
        let mut uniform: Vec<u64> = (0..2000).map(|_| next()).collect();
        uniform.sort_unstable();
        uniform.dedup();
        let mut clustered: Vec<u64> = (0..2000u64)
            .map(|i| if i < 1900 { i } else { u64::MAX - i })
            .collect();
        clustered.push(1 << 40);
        clustered.sort_unstable();
        // Short runs of keys (counted) with repeats, beside the long ones.
        let short: Vec<u64> = [3u64, 3, 9, 9, 9, 40, 41, u64::MAX, u64::MAX].to_vec();
        for keys in [
            &uniform[..],
            &clustered[..],
            &uniform[..16],
            &uniform[..17],
            &short[..],
            &[42][..],
            &[][..],
        ] {
            let dir = Directory::new(keys);
            for t in keys
                .iter()
                .flat_map(|&k| [k, k.wrapping_sub(1), k.wrapping_add(1)])
                .chain([0, u64::MAX, 1 << 39])
            {
                assert_eq!(locate(keys, t), reference(keys, t), "target {t}");
                assert_eq!(
                    dir.locate(keys, t),
                    reference(keys, t),
                    "directory, target {t}"
                );
            }
        }
    }
}
