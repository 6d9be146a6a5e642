//! The set bits of each byte of a 256-bit register, for the AVX2 loops of
//! [`lows`](super::lows) and [`near`](super::near) (AVX2 has no vector
//! popcount).

use std::arch::x86_64::{
    __m256i, _mm256_add_epi8, _mm256_and_si256, _mm256_set1_epi8, _mm256_setr_epi8,
    _mm256_shuffle_epi8, _mm256_srli_epi16,
};

/// The number of set bits of each byte of `x`: each nibble looks up its
/// count in a 16-entry table (one byte shuffle per nibble) and the two
/// counts are added.
///
/// # Safety
/// The processor must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn ones_per_byte_avx2(x: __m256i) -> __m256i {
    let ones_of = _mm256_setr_epi8(
        0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3,
        3, 4,
    );
    let nibble = _mm256_set1_epi8(0x0f);
    _mm256_add_epi8(
        _mm256_shuffle_epi8(ones_of, _mm256_and_si256(x, nibble)),
        _mm256_shuffle_epi8(ones_of, _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::arch::x86_64::_mm256_storeu_si256;

    #[test]
    fn counts_every_byte_value() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        for first in (0..256).step_by(32) {
            let bytes: [u8; 32] = std::array::from_fn(|i| (first + i) as u8);
            let mut out = [0u8; 32];
            // SAFETY: AVX2 was detected; both arrays are 32 bytes.
            unsafe {
                let x = std::arch::x86_64::_mm256_loadu_si256(bytes.as_ptr().cast());
                _mm256_storeu_si256(out.as_mut_ptr().cast(), ones_per_byte_avx2(x));
            }
            for (b, n) in bytes.iter().zip(out) {
                assert_eq!(u32::from(n), b.count_ones(), "byte {b:#04x}");
            }
        }
    }
}
