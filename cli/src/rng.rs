//! SplitMix64: the small deterministic generator behind the synthetic
//! collections of `demo`, `bench` and `workload`.

/// A SplitMix64 generator.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// `fp` with exactly `bits` distinct bits flipped.
    pub fn flip(&mut self, fp: u64, bits: u32) -> u64 {
        let mut out = fp;
        while (out ^ fp).count_ones() < bits {
            out ^= 1u64 << self.below(64);
        }
        out
    }
}
