//! The in-memory block index of one table: the sorted first keys of its
//! blocks, searched by interpolation (fingerprints are close to uniform)
//! with a bounded fallback to bisection, so clustered keys never cost more
//! than `O(log n)` probes.

/// Interpolation steps tried before switching to bisection.
const INTERPOLATION_STEPS: u32 = 6;

/// Returns the index of the last key `≤ target` in sorted `keys`, or `None`
/// when every key is larger (or `keys` is empty).
pub fn locate(keys: &[u64], target: u64) -> Option<usize> {
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
            let span = (hi - lo) as u128;
            let offset = u128::from(target - lo_key) * span / u128::from(hi_key - lo_key);
            (lo + offset as usize).clamp(lo + 1, hi)
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
        let mut x = 1u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x ^ (x >> 33)
        };
        let mut uniform: Vec<u64> = (0..2000).map(|_| next()).collect();
        uniform.sort_unstable();
        uniform.dedup();
        let mut clustered: Vec<u64> = (0..2000u64)
            .map(|i| if i < 1900 { i } else { u64::MAX - i })
            .collect();
        clustered.push(1 << 40);
        clustered.sort_unstable();
        for keys in [&uniform[..], &clustered[..], &[42][..], &[][..]] {
            for t in keys
                .iter()
                .flat_map(|&k| [k, k.wrapping_sub(1), k.wrapping_add(1)])
                .chain([0, u64::MAX, 1 << 39])
            {
                assert_eq!(locate(keys, t), reference(keys, t), "target {t}");
            }
        }
    }
}
