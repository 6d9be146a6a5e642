//! Signatures of a packed run within distance k of a query's, 16 or 8 at
//! a time.
//!
//! A packed block keeps the top bits of each value's low part (its
//! signature) in three bytes a value, and the low parts' other bits back
//! to back (little-endian bit order) with a spare word after them, so any
//! of those is one unaligned 8-byte load, a shift and a mask ([`low`]).
//! The distance of two signatures bounds the distance of the values from
//! below, so a scan compares signatures first and reads a value in full
//! only when they pass. [`within_wide`] compares 16 signatures with one
//! AVX-512 popcount, [`within_avx2`] eight with AVX2 on processors
//! without AVX-512; [`within_scalar`] is the reference both are tested
//! against.

/// The low part of value `index`: `width` bits at bit `index * width` of
/// `lower` (which must hold 8 bytes from that bit's byte on).
#[inline(always)]
pub(crate) fn low(lower: &[u8], width: u32, index: usize) -> u64 {
    let bit = index * width as usize;
    let mut word = [0u8; 8];
    word.copy_from_slice(&lower[bit / 8..bit / 8 + 8]);
    (u64::from_le_bytes(word) >> (bit % 8)) & ((1u64 << width) - 1)
}

/// Signature `i` of `sigs` (three bytes a value, little-endian).
#[inline(always)]
pub(crate) fn sig(sigs: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([sigs[3 * i], sigs[3 * i + 1], sigs[3 * i + 2], 0])
}

/// Calls `hit(i)`, in order, for each `i` in `start..end` whose
/// signature ([`sig`]) is within distance `k` of `q_sig`, until it
/// returns `false`; whether it did (the scan stopped).
#[inline(always)]
pub(crate) fn within_scalar(
    sigs: &[u8],
    (start, end): (usize, usize),
    q_sig: u32,
    k: u32,
    mut hit: impl FnMut(usize) -> bool,
) -> bool {
    (start..end).any(|i| (sig(sigs, i) ^ q_sig).count_ones() <= k && !hit(i))
}

/// Byte indexes that place signature `j`'s three bytes in the low three
/// bytes of 32-bit lane `j` (the fourth is cleared by a mask).
const PLACE: [u8; 64] = {
    let mut table = [0u8; 64];
    let mut j = 0;
    while j < 16 {
        let mut m = 0;
        while m < 4 {
            table[4 * j + m] = (3 * j + if m < 3 { m } else { 0 }) as u8;
            m += 1;
        }
        j += 1;
    }
    table
};

/// [`within_scalar`] 16 signatures at a time: a masked load of their 48
/// bytes, a byte permutation (VPERMB) that gives each 32-bit lane its
/// signature, a mask, XOR, per-lane popcount and an unsigned compare
/// give a mask of the lanes within `k`; the rare hits are then reported
/// one by one.
///
/// # Safety
/// The processor must have AVX-512F, AVX-512BW, AVX512-VBMI and
/// AVX512-VPOPCNTDQ.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vpopcntdq,popcnt")]
#[inline]
pub(crate) unsafe fn within_wide(
    sigs: &[u8],
    (start, end): (usize, usize),
    q_sig: u32,
    k: u32,
    mut hit: impl FnMut(usize) -> bool,
) -> bool {
    use std::arch::x86_64::{
        _mm512_and_si512, _mm512_loadu_si512, _mm512_mask_cmple_epu32_mask,
        _mm512_maskz_loadu_epi8, _mm512_permutexvar_epi8, _mm512_popcnt_epi32, _mm512_set1_epi32,
        _mm512_xor_si512,
    };
    let end = end.min(sigs.len() / 3);
    // SAFETY: a 64-byte table, read unaligned.
    let place = unsafe { _mm512_loadu_si512(PLACE.as_ptr().cast()) };
    let low3 = _mm512_set1_epi32(0x00ff_ffff);
    let qs = _mm512_set1_epi32(q_sig as i32);
    let ks = _mm512_set1_epi32(k.min(32) as i32);
    let mut i = start;
    while i < end {
        let left = end - i;
        let lanes: u16 = if left >= 16 {
            u16::MAX
        } else {
            (1u16 << left) - 1
        };
        let bytes = 3 * left.min(16);
        let load = if bytes >= 64 {
            u64::MAX
        } else {
            (1u64 << bytes) - 1
        };
        // SAFETY: the mask keeps the load to the signatures of `i..end`,
        // inside `sigs` (masked-off bytes are neither read nor faulted on).
        let words = unsafe { _mm512_maskz_loadu_epi8(load, sigs.as_ptr().add(3 * i).cast()) };
        let lanes_sigs = _mm512_and_si512(_mm512_permutexvar_epi8(place, words), low3);
        let d = _mm512_popcnt_epi32(_mm512_xor_si512(lanes_sigs, qs));
        let mut hits = _mm512_mask_cmple_epu32_mask(lanes, d, ks);
        while hits != 0 {
            let index = i + hits.trailing_zeros() as usize;
            hits &= hits - 1;
            if !hit(index) {
                return true;
            }
        }
        i += 16;
    }
    false
}

/// Byte indexes of [`within_avx2`]'s shuffle for the low 128-bit half
/// (bytes 0–15 of eight signatures): signature `j`'s three bytes into the
/// low three bytes of 32-bit lane `j`, the fourth cleared (an index with
/// the top bit set).
#[cfg(target_arch = "x86_64")]
const PLACE_LOW: [i8; 16] = [0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1];

/// The same for the high half, loaded from byte 8 (bytes 8–23, so the
/// load ends with the eighth signature): signatures 4–7 start at its
/// byte 4.
#[cfg(target_arch = "x86_64")]
const PLACE_HIGH: [i8; 16] = [4, 5, 6, -1, 7, 8, 9, -1, 10, 11, 12, -1, 13, 14, 15, -1];

/// [`within_scalar`] eight signatures at a time with AVX2, for processors
/// without AVX-512: two 16-byte loads (bytes 0–15 and 8–23 of eight
/// signatures) fill the two halves of a register, a byte shuffle gives
/// each 32-bit lane its signature, and after the XOR with the query's a
/// nibble-table popcount (two shuffles) summed per lane by two
/// multiply-adds is compared with `k`; the rare hits are reported one by
/// one. The last, partial group is the buffer's eight signatures ending
/// with it (or at the buffer's end), its lanes outside the range masked;
/// a buffer of fewer than eight is compared one at a time.
///
/// # Safety
/// The processor must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
#[inline]
pub(crate) unsafe fn within_avx2(
    sigs: &[u8],
    (start, end): (usize, usize),
    q_sig: u32,
    k: u32,
    mut hit: impl FnMut(usize) -> bool,
) -> bool {
    use std::arch::x86_64::{
        __m256i, _mm256_castsi256_ps, _mm256_cmpgt_epi32, _mm256_loadu2_m128i, _mm256_madd_epi16,
        _mm256_maddubs_epi16, _mm256_movemask_ps, _mm256_set1_epi16, _mm256_set1_epi32,
        _mm256_set1_epi8, _mm256_shuffle_epi8, _mm256_xor_si256,
    };
    // Signatures in the buffer.
    let total = sigs.len() / 3;
    let end = end.min(total);
    if total < 8 {
        return within_scalar(sigs, (start, end), q_sig, k, hit);
    }
    // SAFETY (both): 16-byte tables, read unaligned.
    let place: __m256i =
        unsafe { _mm256_loadu2_m128i(PLACE_HIGH.as_ptr().cast(), PLACE_LOW.as_ptr().cast()) };
    let qs = _mm256_set1_epi32((q_sig & 0x00ff_ffff) as i32);
    let ks = _mm256_set1_epi32(k.min(32) as i32);
    let bytes_1 = _mm256_set1_epi8(1);
    let pairs_1 = _mm256_set1_epi16(1);
    // The lanes of signatures i..i + 8 (i + 8 <= total) whose distance is
    // above `k`, as a mask.
    macro_rules! far {
        ($i:expr) => {{
            // SAFETY: bytes 3i..3i + 24 lie inside `sigs`, as i + 8 <= total.
            let words = unsafe {
                let at = sigs.as_ptr().add(3 * $i);
                _mm256_loadu2_m128i(at.add(8).cast(), at.cast())
            };
            let x = _mm256_xor_si256(_mm256_shuffle_epi8(words, place), qs);
            // SAFETY: this function has AVX2.
            let per_byte = unsafe { super::ones_per_byte_avx2(x) };
            let d = _mm256_madd_epi16(_mm256_maddubs_epi16(per_byte, bytes_1), pairs_1);
            _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(d, ks))) as u32
        }};
    }
    // Reports the lanes of `hits` counted from signature `i`; returns
    // when the callback asks to stop.
    macro_rules! report {
        ($i:expr, $hits:expr) => {{
            let mut hits = $hits;
            while hits != 0 {
                let index = $i + hits.trailing_zeros() as usize;
                hits &= hits - 1;
                if !hit(index) {
                    return true;
                }
            }
        }};
    }
    let mut i = start;
    while i + 8 <= end {
        let far = far!(i);
        if far != 0xff {
            report!(i, !far & 0xff);
        }
        i += 8;
    }
    if i < end {
        // Fewer than eight left: the group of eight from `i`, or the
        // buffer's last eight, with the lanes before `i` and from `end`
        // on masked.
        let from = i.min(total - 8);
        let lanes = ((1u32 << (end - from)) - 1) & !((1u32 << (i - from)) - 1);
        report!(from, !far!(from) & lanes);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::TestRng;

    /// A vector loop of this module, called with a callback.
    #[cfg(target_arch = "x86_64")]
    type VectorLoop =
        unsafe fn(&[u8], (usize, usize), u32, u32, &mut dyn FnMut(usize) -> bool) -> bool;

    /// The vector loops this processor has the features of, by name.
    #[cfg(target_arch = "x86_64")]
    fn vector_loops() -> Vec<(&'static str, VectorLoop)> {
        let mut loops: Vec<(&'static str, VectorLoop)> = Vec::new();
        if super::super::cpu::avx2_lows() {
            // SAFETY (callers): listed only when the processor has AVX2.
            loops.push(("avx2", |b, r, q, k, f| unsafe {
                within_avx2(b, r, q, k, f)
            }));
        }
        if super::super::cpu::wide_lows() {
            // SAFETY (callers): listed only when the processor has the
            // AVX-512 features.
            loops.push(("wide", |b, r, q, k, f| unsafe {
                within_wide(b, r, q, k, f)
            }));
        }
        loops
    }

    /// Values of every width packed back to back (with the spare word), as
    /// a block packs its low parts' remaining bits, read back by [`low`].
    #[test]
    fn packed_bits_read_back() {
        let mut rng = TestRng::new(3);
        for width in 0..=56u32 {
            for n in [0usize, 1, 7, 8, 9, 63, 200] {
                let values: Vec<u64> = (0..n)
                    .map(|_| rng.next_u64() & ((1u64 << width) - 1))
                    .collect();
                let mut lower = vec![0u8; (n * width as usize).div_ceil(8) + 8];
                for (i, &v) in values.iter().enumerate() {
                    for b in 0..width as usize {
                        if v >> b & 1 == 1 {
                            let bit = i * width as usize + b;
                            lower[bit / 8] |= 1 << (bit % 8);
                        }
                    }
                }
                for (i, &v) in values.iter().enumerate() {
                    assert_eq!(low(&lower, width, i), v, "width {width} index {i}");
                }
            }
        }
    }

    /// Signatures near a query's and far from it, every run length around
    /// the 16-lane step, every start: the wide loop reports what the
    /// scalar reference does, and stops where it is told to.
    #[test]
    fn wide_matches_the_scalar_reference() {
        let mut rng = TestRng::new(4);
        for n in [0usize, 1, 7, 15, 16, 17, 31, 32, 33, 200] {
            let q_sig = rng.next_u64() as u32 & 0xff_ffff;
            let sigs: Vec<u32> = (0..n)
                .map(|i| match i % 3 {
                    // Within three bits of the query's, often.
                    0 => q_sig ^ (1 << (rng.next_u64() % 24)) ^ (1 << (rng.next_u64() % 24)),
                    1 => q_sig ^ (rng.next_u64() as u32 & 0x01_0107),
                    _ => rng.next_u64() as u32 & 0xff_ffff,
                })
                .collect();
            let bytes: Vec<u8> = sigs
                .iter()
                .flat_map(|s| s.to_le_bytes()[..3].to_vec())
                .collect();
            for k in [0u32, 1, 3, 16, 40] {
                for start in [0, n / 3, n.saturating_sub(1), n] {
                    let want: Vec<usize> = (start..n)
                        .filter(|&i| (sigs[i] ^ q_sig).count_ones() <= k)
                        .collect();
                    let mut got = Vec::new();
                    assert!(!within_scalar(&bytes, (start, n), q_sig, k, |i| {
                        got.push(i);
                        true
                    }));
                    assert_eq!(got, want, "scalar, n {n} k {k} start {start}");
                    #[cfg(target_arch = "x86_64")]
                    for (name, vector) in vector_loops() {
                        let mut all = Vec::new();
                        // SAFETY: `vector_loops` lists the loops this
                        // processor has the features of.
                        let stopped = unsafe {
                            vector(&bytes, (start, n), q_sig, k, &mut |i| {
                                all.push(i);
                                true
                            })
                        };
                        assert!(!stopped);
                        assert_eq!(all, want, "{name}, n {n} k {k} start {start}");
                        // Stopped at each hit in turn.
                        for stop in 0..want.len() {
                            let mut seen = Vec::new();
                            // SAFETY: as above.
                            let stopped = unsafe {
                                vector(&bytes, (start, n), q_sig, k, &mut |i| {
                                    seen.push(i);
                                    seen.len() <= stop
                                })
                            };
                            assert!(stopped);
                            assert_eq!(seen, want[..=stop], "{name} stop {stop}, n {n} k {k}");
                        }
                    }
                }
            }
        }
    }
}
