//! The low parts of a packed run within distance k of a query's, eight
//! at a time.
//!
//! A packed block keeps each value's low `width` bits back to back
//! (little-endian bit order) with a spare word after them, so any low part
//! is one unaligned 8-byte load, a shift and a mask. The distance of two
//! low parts bounds the distance of the values from below, so a scan
//! compares low parts first and reads a value in full only when they pass.
//! [`within_wide`] reads eight low parts with one load and a byte
//! permutation and compares them with one AVX-512 popcount; [`within_scalar`] is the reference it is tested
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

/// Calls `hit(i)`, in order, for each `i` in `start..end` whose low part
/// is within distance `k` of the low `width` bits of `q_low`, until it
/// returns `false`; whether it did (the scan stopped).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn within_scalar(
    lower: &[u8],
    width: u32,
    (start, end): (usize, usize),
    q_low: u64,
    k: u32,
    mut hit: impl FnMut(usize) -> bool,
) -> bool {
    let q_low = q_low & ((1u64 << width) - 1);
    (start..end).any(|i| (low(lower, width, i) ^ q_low).count_ones() <= k && !hit(i))
}

/// Byte indexes that place value `j`'s eight bytes (from the byte of
/// bit `j * width`) in lane `j`, for eight values whose first starts on a
/// byte boundary; `PLACE[width]`, for every width up to 56.
const PLACE: [[u8; 64]; 57] = {
    let mut table = [[0u8; 64]; 57];
    let mut width = 0;
    while width < 57 {
        let mut j = 0;
        while j < 8 {
            let mut m = 0;
            while m < 8 {
                table[width][8 * j + m] = (j * width / 8 + m) as u8;
                m += 1;
            }
            j += 1;
        }
        width += 1;
    }
    table
};

/// How far lane `j`'s word is shifted right to bring value `j`'s low part
/// to bit 0 (`j * width % 8`); `SHIFT[width]`.
const SHIFT: [[u64; 8]; 57] = {
    let mut table = [[0u64; 8]; 57];
    let mut width = 0;
    while width < 57 {
        let mut j = 0;
        while j < 8 {
            table[width][j] = (j * width % 8) as u64;
            j += 1;
        }
        width += 1;
    }
    table
};

/// [`within_scalar`] eight low parts at a time: eight values' low parts
/// (starting on a byte boundary, at an index that is a multiple of
/// eight) lie in at most 57 bytes, read by one masked 64-byte load; a
/// byte permutation gives each lane its value's eight bytes, a per-lane
/// shift and a mask its low part; XOR, per-lane popcount and an unsigned
/// compare give a mask of the lanes within `k`; the rare hits are then
/// reported one by one. (A gather of the eight words costs several
/// times as much on the processors measured.)
///
/// # Safety
/// The processor must have AVX-512F, AVX-512BW, AVX512-VBMI and
/// AVX512-VPOPCNTDQ, and `width` must be at most 56.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vpopcntdq,popcnt")]
#[inline]
pub(crate) unsafe fn within_wide(
    lower: &[u8],
    width: u32,
    (start, end): (usize, usize),
    q_low: u64,
    k: u32,
    mut hit: impl FnMut(usize) -> bool,
) -> bool {
    use std::arch::x86_64::{
        __mmask8, _mm512_and_si512, _mm512_loadu_si512, _mm512_mask_cmple_epu64_mask,
        _mm512_maskz_loadu_epi8, _mm512_permutexvar_epi8, _mm512_popcnt_epi64, _mm512_set1_epi64,
        _mm512_srlv_epi64, _mm512_xor_si512,
    };
    debug_assert!(width <= 56);
    let w = width as usize;
    let mask = (1u64 << width) - 1;
    // SAFETY: both rows are 64 bytes, read unaligned.
    let (place, shift) = unsafe {
        (
            _mm512_loadu_si512(PLACE[w].as_ptr().cast()),
            _mm512_loadu_si512(SHIFT[w].as_ptr().cast()),
        )
    };
    let masks = _mm512_set1_epi64(mask as i64);
    let qs = _mm512_set1_epi64((q_low & mask) as i64);
    let ks = _mm512_set1_epi64(i64::from(k));
    // From the multiple of eight at or below `start`, whose low part
    // starts on a byte boundary; lanes below `start` are left out.
    let mut i = start & !7;
    while i < end {
        let from: __mmask8 = 0xff << (start.saturating_sub(i));
        let to: __mmask8 = if end - i >= 8 {
            0xff
        } else {
            (1u8 << (end - i)) - 1
        };
        let byte = i * w / 8;
        let left = lower.len().saturating_sub(byte);
        let load = if left >= 64 {
            u64::MAX
        } else {
            (1u64 << left) - 1
        };
        // SAFETY: the mask keeps the load inside `lower` (masked-off
        // bytes are neither read nor faulted on).
        let bytes = unsafe {
            _mm512_maskz_loadu_epi8(load, lower.as_ptr().add(byte.min(lower.len())).cast())
        };
        let words = _mm512_permutexvar_epi8(place, bytes);
        let lows = _mm512_and_si512(_mm512_srlv_epi64(words, shift), masks);
        let d = _mm512_popcnt_epi64(_mm512_xor_si512(lows, qs));
        let mut hits = _mm512_mask_cmple_epu64_mask(from & to, d, ks);
        while hits != 0 {
            let index = i + hits.trailing_zeros() as usize;
            hits &= hits - 1;
            if !hit(index) {
                return true;
            }
        }
        i += 8;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::TestRng;

    /// Low parts of every width, packed as a block packs them (with the
    /// spare word), and the indexes each path reports.
    #[test]
    fn wide_matches_the_scalar_reference() {
        let mut rng = TestRng::new(3);
        for width in 1..=56u32 {
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
                // High bits beyond the width are not compared.
                let q = values.get(n / 2).copied().unwrap_or(0) ^ (rng.next_u64() & 0b1011);
                let q_low = q & ((1u64 << width) - 1);
                for k in [0, 1, 3, width] {
                    let start = n / 3;
                    let want: Vec<usize> = (start..n)
                        .filter(|&i| (values[i] ^ q_low).count_ones() <= k)
                        .collect();
                    let mut got = Vec::new();
                    assert!(!within_scalar(&lower, width, (start, n), q, k, |i| {
                        got.push(i);
                        true
                    }));
                    assert_eq!(got, want, "scalar, width {width} n {n} k {k}");
                    #[cfg(target_arch = "x86_64")]
                    if super::super::cpu::wide_lows() {
                        let mut wide = Vec::new();
                        // SAFETY: the processor has the features (checked
                        // just above) and `lower` ends with a spare word.
                        let stopped = unsafe {
                            within_wide(&lower, width, (start, n), q, k, |i| {
                                wide.push(i);
                                true
                            })
                        };
                        assert!(!stopped);
                        assert_eq!(wide, want, "wide, width {width} n {n} k {k}");
                        // Stopping at the first hit reports it alone.
                        let mut first = Vec::new();
                        // SAFETY: as above.
                        let stopped = unsafe {
                            within_wide(&lower, width, (start, n), q, k, |i| {
                                first.push(i);
                                false
                            })
                        };
                        assert_eq!(stopped, !want.is_empty());
                        assert_eq!(first, want.first().copied().into_iter().collect::<Vec<_>>());
                    }
                }
            }
        }
    }
}
