//! Select in a word: where its `r`-th set bit is, without a branch (the
//! broadword method of Vigna, *Broadword Implementation of Rank/Select
//! Queries*, 2008): the bytes' bit counts summed in parallel find the
//! byte holding the bit, and a table the bit within that byte.

/// `IN_BYTE[r << 8 | b]`: the position of the `r`-th set bit of byte `b`
/// (8 when it has no more than `r`).
static IN_BYTE: [u8; 2048] = in_byte();

const fn in_byte() -> [u8; 2048] {
    let mut table = [8u8; 2048];
    let mut b = 0;
    while b < 256 {
        let mut r = 0;
        let mut bit = 0;
        while bit < 8 {
            if b >> bit & 1 == 1 {
                table[r << 8 | b] = bit as u8;
                r += 1;
            }
            bit += 1;
        }
        b += 1;
    }
    table
}

/// Each byte's lowest bit.
const L8: u64 = 0x0101_0101_0101_0101;
/// Each byte's highest bit.
const H8: u64 = 0x8080_8080_8080_8080;

/// The position of the `rank`-th set bit of `word` (counting from 0; the
/// word must have more than `rank`).
#[inline(always)]
pub(super) fn select_in_word(word: u64, rank: u32) -> u32 {
    debug_assert!(rank < word.count_ones());
    // Each byte's count of set bits.
    let mut counts = word - ((word >> 1) & 0x5555_5555_5555_5555);
    counts = (counts & 0x3333_3333_3333_3333) + ((counts >> 2) & 0x3333_3333_3333_3333);
    counts = (counts + (counts >> 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    // Byte i: the set bits of bytes 0 to i (at most 64, so no carries).
    let through = counts.wrapping_mul(L8);
    // The high bit of each byte whose running count is at most `rank`:
    // those bytes lie before the one holding the bit.
    let before = (((u64::from(rank) * L8) | H8) - through) & H8;
    // Their number, times 8: the byte's first bit.
    let shift = (((before >> 7).wrapping_mul(L8) >> 53) & !7) as u32;
    let below = ((through << 8) >> shift) & 0xff;
    let byte = (word >> shift) & 0xff;
    let at = (u64::from(rank) - below) << 8 | byte;
    shift + u32::from(IN_BYTE[at as usize & 2047])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(word: u64, rank: u32) -> u32 {
        (0..64)
            .filter(|&b| word >> b & 1 == 1)
            .nth(rank as usize)
            .unwrap()
    }

    #[test]
    fn every_rank_of_edge_words() {
        for word in [
            1,
            1 << 63,
            u64::MAX,
            0x8000_0000_0000_0001,
            0x00ff_0000_0000_ff00,
            0xaaaa_aaaa_aaaa_aaaa,
            0x0100_0000_0000_0000,
        ] {
            for rank in 0..word.count_ones() {
                assert_eq!(
                    select_in_word(word, rank),
                    naive(word, rank),
                    "{word:#x} {rank}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn every_rank_of_random_words(word in any::<u64>(), sparse in any::<u64>(), dense in any::<bool>()) {
            let word = if dense { word | sparse } else { word & sparse };
            for rank in 0..word.count_ones() {
                prop_assert_eq!(select_in_word(word, rank), naive(word, rank));
            }
        }
    }
}
