//! The fingerprints of a decoded run within distance k of a query.
//!
//! A batch decodes each block once into a sorted array and then, for every
//! query whose prefix run the block holds, compares the query with each
//! fingerprint of the run: at 10M fingerprints and 16-bit prefixes that is
//! about 150 comparisons per table per query, nearly all of them misses.
//! [`near`] does those comparisons eight at a time with AVX-512's
//! per-lane popcount where the processor has it, four at a time with
//! AVX2 where it has only that, and one at a time otherwise;
//! `near_scalar` (compiled for tests) is the reference they are tested against.

/// Appends `(fingerprint, distance)` for every fingerprint of `run` within
/// distance `k` of `q`, in run order.
#[inline]
pub(crate) fn near(run: &[u64], q: u64, k: u32, out: &mut Vec<(u64, u32)>) {
    each(run, q, k, |p, d| {
        out.push((p, d));
        true
    });
}

/// Calls `f` with every fingerprint of `run` within distance `k` of `q`
/// and its distance, in run order, until it returns `false`; returns
/// whether it did.
#[inline]
pub(crate) fn each(run: &[u64], q: u64, k: u32, mut f: impl FnMut(u64, u32) -> bool) -> bool {
    #[cfg(target_arch = "x86_64")]
    if run.len() >= WIDE_MIN {
        if crate::simd::cpu::wide_popcount() {
            // SAFETY: `wide_popcount` checked that this processor has
            // AVX-512F and AVX512-VPOPCNTDQ, the features `each_wide` is
            // compiled for.
            return unsafe { each_wide(run, q, k, &mut f) };
        }
        if crate::simd::cpu::avx2_lows() {
            // SAFETY: `avx2_lows` checked that this processor has AVX2,
            // the feature `each_avx2` is compiled for.
            return unsafe { each_avx2(run, q, k, &mut f) };
        }
    }
    for &p in run {
        let d = (p ^ q).count_ones();
        if d <= k && !f(p, d) {
            return true;
        }
    }
    false
}

/// Runs shorter than this are compared one at a time (the vector loop's
/// call and setup would cost more than it saves).
const WIDE_MIN: usize = 16;

/// [`near`], one fingerprint at a time: the reference the others are
/// tested against.
#[cfg(test)]
pub(crate) fn near_scalar(run: &[u64], q: u64, k: u32, out: &mut Vec<(u64, u32)>) {
    for &p in run {
        let d = (p ^ q).count_ones();
        if d <= k {
            out.push((p, d));
        }
    }
}

/// [`each`] eight fingerprints at a time: XOR, per-lane popcount and an
/// unsigned compare give a mask of the lanes within `k`; the rare hits are
/// then handed out one by one.
///
/// # Safety
/// The processor must have AVX-512F and AVX512-VPOPCNTDQ.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vpopcntdq,popcnt")]
unsafe fn each_wide(run: &[u64], q: u64, k: u32, f: &mut impl FnMut(u64, u32) -> bool) -> bool {
    use std::arch::x86_64::{
        _mm512_cmple_epu64_mask, _mm512_loadu_si512, _mm512_maskz_loadu_epi64, _mm512_popcnt_epi64,
        _mm512_set1_epi64, _mm512_xor_si512,
    };
    let qs = _mm512_set1_epi64(q as i64);
    let ks = _mm512_set1_epi64(i64::from(k));
    // Hands out the lanes of `mask`; `false` when `f` asked to stop.
    let mut hits = |base: usize, mut mask: u8| {
        while mask != 0 {
            let p = run[base + mask.trailing_zeros() as usize];
            if !f(p, (p ^ q).count_ones()) {
                return false;
            }
            mask &= mask - 1;
        }
        true
    };
    let mut at = 0;
    while at + 8 <= run.len() {
        // SAFETY: `at + 8 <= run.len()`, so the eight unaligned u64 lanes
        // read lie inside `run`.
        let xs = unsafe { _mm512_loadu_si512(run.as_ptr().add(at).cast()) };
        let mask = _mm512_cmple_epu64_mask(_mm512_popcnt_epi64(_mm512_xor_si512(xs, qs)), ks);
        if mask != 0 && !hits(at, mask) {
            return true;
        }
        at += 8;
    }
    let left = run.len() - at;
    if left > 0 {
        let lanes = (1u8 << left) - 1;
        // SAFETY: the load mask enables only the `left` lanes inside `run`;
        // masked-off lanes are not read and cannot fault.
        let xs = unsafe { _mm512_maskz_loadu_epi64(lanes, run.as_ptr().add(at).cast()) };
        let mask = _mm512_cmple_epu64_mask(_mm512_popcnt_epi64(_mm512_xor_si512(xs, qs)), ks);
        return !hits(at, mask & lanes);
    }
    false
}

/// [`each`] four fingerprints at a time with AVX2, for processors without
/// AVX-512: XOR, a nibble-table popcount per byte (two shuffles), the
/// bytes of each 64-bit lane summed (VPSADBW) and a compare give a mask
/// of the lanes within `k`; the last fingerprints (fewer than four) are
/// compared one at a time.
///
/// # Safety
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn each_avx2(run: &[u64], q: u64, k: u32, f: &mut impl FnMut(u64, u32) -> bool) -> bool {
    use std::arch::x86_64::{
        _mm256_castsi256_pd, _mm256_cmpgt_epi64, _mm256_loadu_si256, _mm256_movemask_pd,
        _mm256_sad_epu8, _mm256_set1_epi64x, _mm256_setzero_si256, _mm256_xor_si256,
    };
    let qs = _mm256_set1_epi64x(q as i64);
    let ks = _mm256_set1_epi64x(i64::from(k));
    let zero = _mm256_setzero_si256();
    let mut at = 0;
    while at + 4 <= run.len() {
        // SAFETY: `at + 4 <= run.len()`, so the four unaligned u64 lanes
        // read lie inside `run`.
        let xs = unsafe { _mm256_loadu_si256(run.as_ptr().add(at).cast()) };
        let x = _mm256_xor_si256(xs, qs);
        // SAFETY: this function has AVX2.
        let per_byte = unsafe { super::ones_per_byte_avx2(x) };
        let d = _mm256_sad_epu8(per_byte, zero);
        let far = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(d, ks))) as u32;
        let mut hits = !far & 0xf;
        while hits != 0 {
            let p = run[at + hits.trailing_zeros() as usize];
            if !f(p, (p ^ q).count_ones()) {
                return true;
            }
            hits &= hits - 1;
        }
        at += 4;
    }
    for &p in &run[at..] {
        let d = (p ^ q).count_ones();
        if d <= k && !f(p, d) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Runs of fingerprints near `q` (a few bits flipped) mixed with
    /// random ones, of every length around the vector width.
    fn cases() -> impl Strategy<Value = (Vec<u64>, u64, u32)> {
        (any::<u64>(), 0u32..=8).prop_flat_map(|(q, k)| {
            let item = prop_oneof![
                any::<u64>(),
                proptest::collection::vec(0u32..64, 0..6)
                    .prop_map(move |bits| bits.iter().fold(q, |x, &b| x ^ (1 << b))),
            ];
            (proptest::collection::vec(item, 0..80), Just(q), Just(k))
        })
    }

    proptest! {
        /// The dispatching [`near`] (the AVX-512 loop on machines that
        /// have it) finds exactly what the scalar reference finds.
        #[test]
        fn near_matches_the_scalar_reference((run, q, k) in cases()) {
            let mut want = Vec::new();
            near_scalar(&run, q, k, &mut want);
            let mut got = Vec::new();
            near(&run, q, k, &mut got);
            prop_assert_eq!(&got, &want);
            // The AVX2 loop itself, which machines with AVX-512 do not
            // dispatch to; and stopped at each hit in turn.
            #[cfg(target_arch = "x86_64")]
            if crate::simd::cpu::avx2_lows() {
                let mut four = Vec::new();
                // SAFETY: `avx2_lows` checked the feature.
                let stopped = unsafe {
                    each_avx2(&run, q, k, &mut |p, d| {
                        four.push((p, d));
                        true
                    })
                };
                prop_assert!(!stopped);
                prop_assert_eq!(&four, &want);
                for stop in 0..want.len() {
                    let mut seen = Vec::new();
                    // SAFETY: as above.
                    let stopped = unsafe {
                        each_avx2(&run, q, k, &mut |p, d| {
                            seen.push((p, d));
                            seen.len() <= stop
                        })
                    };
                    prop_assert!(stopped);
                    prop_assert_eq!(&seen[..], &want[..=stop]);
                }
            }
        }
    }

    /// [`each`] stops at the hit its callback refuses, in run order, on
    /// both the vector loop's whole chunks and its tail.
    #[test]
    fn each_stops_when_asked() {
        let q = 0x0f0f_0f0f_0f0f_0f0fu64;
        for len in [5usize, 16, 23, 40] {
            let run: Vec<u64> = (0..len as u64).map(|i| q ^ (i % 3)).collect();
            for stop in 0..len {
                let mut seen = 0;
                let stopped = each(&run, q, 1, |_, _| {
                    seen += 1;
                    seen <= stop
                });
                let within = run.iter().filter(|&&p| (p ^ q).count_ones() <= 1).count();
                assert_eq!(stopped, stop < within, "len {len}, stop {stop}");
                assert_eq!(seen, (stop + 1).min(within), "len {len}, stop {stop}");
            }
        }
    }

    /// The reference itself, against distances computed by hand.
    #[test]
    fn scalar_reference_by_hand() {
        let q = 0xff00_0000_0000_00ffu64;
        let run = [q, q ^ 1, q ^ 0b111, q ^ 0b1111, !q, q ^ (1 << 63)];
        let mut got = Vec::new();
        near_scalar(&run, q, 3, &mut got);
        assert_eq!(
            got,
            vec![(q, 0), (q ^ 1, 1), (q ^ 0b111, 3), (q ^ (1 << 63), 1)]
        );
    }

    /// Every run length from 0 to 40 with hits at both ends, so the
    /// vector loop's whole chunks and its masked tail are both exercised.
    #[test]
    fn every_length_and_hit_position() {
        let q = 0x0123_4567_89ab_cdefu64;
        for len in 0..40usize {
            for hit in 0..len {
                let run: Vec<u64> = (0..len)
                    .map(|i| if i == hit { q ^ 0b101 } else { !q ^ i as u64 })
                    .collect();
                let mut got = Vec::new();
                near(&run, q, 2, &mut got);
                assert_eq!(got, vec![(q ^ 0b101, 2)], "len {len}, hit at {hit}");
            }
        }
    }
}
