//! A table's membership filter: a blocked Bloom filter over its
//! fingerprints, so that asking whether a fingerprint is stored (what
//! every write asks of every level) is answered "no" from one cache line
//! for nearly every fingerprint that is not, instead of by a probe of the
//! table.
//!
//! Memory only, never stored: built from a table's values when a merge
//! writes it. Each value sets [`HASHES`] bits of one 512-bit block chosen
//! by its hash; about [`BITS_PER_VALUE`] bits a value give a false
//! positive about once in 60 (a false positive only costs the probe the
//! filter would have saved; a value of the table is never reported
//! absent).

/// Bits of filter per value (rounded up to whole blocks).
pub const BITS_PER_VALUE: usize = 10;

/// Bits each value sets (and a lookup tests), all in one block.
const HASHES: u32 = 6;

/// Words of a block: 512 bits, one cache line.
const BLOCK_WORDS: usize = 8;

/// How far ahead [`Filter::insert_all`] asks for a value's block.
const AHEAD: usize = 16;

/// A blocked Bloom filter over `u64` values.
#[derive(Debug, Clone)]
pub struct Filter {
    words: Box<[u64]>,
    blocks: u64,
}

impl Filter {
    /// An empty filter sized for `count` values.
    pub fn new(count: usize) -> Self {
        let blocks = (count * BITS_PER_VALUE).div_ceil(BLOCK_WORDS * 64).max(1);
        Self {
            words: vec![0u64; blocks * BLOCK_WORDS].into_boxed_slice(),
            blocks: blocks as u64,
        }
    }

    /// Bytes of memory the filter takes.
    pub fn heap_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Adds `value`.
    #[inline]
    pub fn insert(&mut self, value: u64) {
        let (block, mut bits) = self.place(value);
        for _ in 0..HASHES {
            self.words[block + (bits & 7) as usize] |= 1 << ((bits >> 3) & 63);
            bits >>= 9;
        }
    }

    /// Adds every one of `values`, asking for the block of the value
    /// [`AHEAD`] places on while adding one, so the cache misses of a
    /// filter larger than the cache overlap instead of queuing.
    pub fn insert_all(&mut self, values: &[u64]) {
        for (i, &value) in values.iter().enumerate() {
            if let Some(&next) = values.get(i + AHEAD) {
                self.prefetch(next);
            }
            self.insert(value);
        }
    }

    /// Asks the processor for the words [`may_contain`](Self::may_contain)
    /// reads for `value`, so that the look-ups of several values overlap.
    #[inline]
    pub fn prefetch(&self, value: u64) {
        let (block, _) = self.place(value);
        crate::simd::prefetch(&self.words[block..block + BLOCK_WORDS]);
    }

    /// Whether `value` may be one of the values: always when it is, and
    /// for about one value in 60 that is not.
    #[inline]
    pub fn may_contain(&self, value: u64) -> bool {
        let (block, mut bits) = self.place(value);
        let mut all = true;
        for _ in 0..HASHES {
            all &= self.words[block + (bits & 7) as usize] & (1 << ((bits >> 3) & 63)) != 0;
            bits >>= 9;
        }
        all
    }

    /// The first word of `value`'s block, and the bits choosing its
    /// positions in it (9 a position: 3 for the word, 6 for the bit).
    #[inline(always)]
    fn place(&self, value: u64) -> (usize, u64) {
        let h = mix(value);
        let block = ((u128::from(h >> 32) * u128::from(self.blocks)) >> 32) as usize;
        (block * BLOCK_WORDS, mix(h ^ 0x9e37_79b9_7f4a_7c15))
    }
}

/// A 64-bit finalizer (splitmix64's): clustered fingerprints (near
/// duplicates differ in few bits) spread over the whole filter, and over
/// the buckets of the `ids` overlay's map.
#[inline(always)]
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::TestRng;

    #[test]
    fn holds_every_value_and_few_others() {
        for n in [0usize, 1, 7, 1000, 100_000] {
            let mut rng = TestRng::new(n as u64 + 1);
            // Clustered values: runs of near duplicates as well as random ones.
            let values: Vec<u64> = (0..n)
                .map(|i| {
                    if i % 2 == 0 {
                        rng.next_u64()
                    } else {
                        (i as u64) ^ (1 << (i % 64))
                    }
                })
                .collect();
            let mut one_by_one = Filter::new(values.len());
            values.iter().for_each(|&v| one_by_one.insert(v));
            let mut filter = Filter::new(values.len());
            filter.insert_all(&values);
            assert_eq!(filter.words, one_by_one.words);
            assert!(values.iter().all(|&v| filter.may_contain(v)));
            if n >= 1000 {
                let others = 100_000;
                let positives = (0..others)
                    .filter(|_| filter.may_contain(rng.next_u64()))
                    .count();
                // About 1 in 60 expected; far more means a broken hash.
                assert!(positives < others / 25, "{positives} of {others}");
            }
        }
    }
}
