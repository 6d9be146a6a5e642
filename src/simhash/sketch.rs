//! Similarity sketches: 512 one-bit MinHash values of a document's feature
//! set in 64 bytes, from which the Jaccard similarity of two documents is
//! estimated without their text.
//!
//! The construction is one-permutation MinHash (Li, Owen and Zhang, NIPS
//! 2012) with optimal densification (Shrivastava, ICML 2017), keeping one
//! bit of each bin's minimum (b-bit minwise hashing, Li and König, WWW
//! 2010):
//!
//! 1. every feature hash `h` (as [`feature_hash`](super::feature_hash)
//!    gives it) is remixed, `z = mix(h ^ SKETCH_SEED)`; its top 9 bits pick
//!    one of 512 bins and its low 55 bits are its value; each bin keeps the
//!    smallest value it receives;
//! 2. an empty bin `i` takes the minimum of bin `mix(i · 512 + t) mod 512`
//!    for the first `t = 1, 2, ...` that names a non-empty bin;
//! 3. bit `i` of the sketch is the low bit of `mix(min_i ^ (i + 1) · γ)`.
//!
//! `mix` is SplitMix64's finaliser and `γ` its increment
//! (`0x9e3779b97f4a7c15`); the bytes are little-endian bit order (bit `i`
//! is bit `i % 8` of byte `i / 8`). storage-format.md, "Sketches", has the
//! same definition with test vectors.
//!
//! Two sets with Jaccard similarity `J` agree on each bin's minimum with
//! probability `J`, and on each bit with probability `(1 + J) / 2`. The
//! first 64 bits serve as a fingerprint ([`Sketch::fingerprint`]): two
//! documents differ in each of its bits with probability `(1 − J) / 2`.
//! The similarity is estimated from the other 448 bits, so that it stays
//! unbiased for candidates chosen because their fingerprints are near:
//! `Ĵ = 2a − 1` for the share `a` of those bits that agree, with standard
//! deviation `sqrt((1 − J²) / 448)`: 0.028 at `J = 0.8`, 0.021 at
//! `J = 0.9`.
//!
//! ```
//! use simstore::simhash::{Fingerprinter, Sketch};
//!
//! let f = Fingerprinter::new();
//! let text = "one two three four five six seven eight nine ten ".repeat(20);
//! let a = f.sketch(&text).unwrap();
//! let b = f.sketch(&(text.clone() + "eleven twelve")).unwrap();
//! let c = f.sketch("a completely different text about nothing at all").unwrap();
//! assert!(a.similarity(&b) > 0.8);
//! assert!(a.similarity(&c) < 0.3);
//! assert_eq!(Sketch::from_bytes(a.to_bytes()), a);
//! ```

/// Bytes of a sketch.
pub const SKETCH_BYTES: usize = 64;

/// Bins (and bits) of a sketch.
const BINS: usize = SKETCH_BYTES * 8;

/// Seed remixed into feature hashes before binning (ASCII "sketch01").
pub const SKETCH_SEED: u64 = 0x736b_6574_6368_3031;

/// SplitMix64's increment.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A 64-byte similarity sketch of a set of features (see the module
/// documentation).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sketch([u8; SKETCH_BYTES]);

impl std::fmt::Debug for Sketch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sketch(")?;
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

impl Sketch {
    /// The sketch of a set of feature hashes (duplicates count once);
    /// `None` for an empty set.
    pub fn of_hashes(hashes: impl IntoIterator<Item = u64>) -> Option<Self> {
        const EMPTY: u64 = u64::MAX;
        let mut mins = [EMPTY; BINS];
        let mut any = false;
        for h in hashes {
            let z = mix(h ^ SKETCH_SEED);
            let bin = (z >> 55) as usize;
            let value = z & ((1 << 55) - 1);
            mins[bin] = mins[bin].min(value);
            any = true;
        }
        if !any {
            return None;
        }
        let mut bytes = [0u8; SKETCH_BYTES];
        for i in 0..BINS {
            let mut min = mins[i];
            let mut t = 1u64;
            while min == EMPTY {
                min = mins[(mix(i as u64 * BINS as u64 + t) % BINS as u64) as usize];
                t += 1;
            }
            let bit = mix(min ^ (i as u64 + 1).wrapping_mul(GAMMA)) & 1;
            bytes[i / 8] |= (bit as u8) << (i % 8);
        }
        Some(Self(bytes))
    }

    /// The estimated Jaccard similarity of the two sketched sets:
    /// `2a − 1` clamped to `[0, 1]`, for the share `a` of equal bits past
    /// the first 64 (see the module documentation).
    pub fn similarity(&self, other: &Sketch) -> f64 {
        let from = 8;
        let bits = (SKETCH_BYTES - from) * 8;
        let differ: u32 = self.0[from..]
            .chunks_exact(8)
            .zip(other.0[from..].chunks_exact(8))
            .map(|(a, b)| {
                let a = u64::from_le_bytes(a.try_into().expect("8 bytes"));
                let b = u64::from_le_bytes(b.try_into().expect("8 bytes"));
                (a ^ b).count_ones()
            })
            .sum();
        let agree = 1.0 - f64::from(differ) / bits as f64;
        (2.0 * agree - 1.0).clamp(0.0, 1.0)
    }

    /// The sketch's bytes, as stored.
    pub fn to_bytes(&self) -> [u8; SKETCH_BYTES] {
        self.0
    }

    /// The sketch of these bytes (every 64-byte string is one).
    pub fn from_bytes(bytes: [u8; SKETCH_BYTES]) -> Self {
        Self(bytes)
    }

    /// The sketch's first 64 bits as a fingerprint: one-bit MinHash
    /// values, so two documents with Jaccard similarity `J` differ in each
    /// bit with probability `(1 − J) / 2` (32·(1 − J) bits on average,
    /// against about 64·acos(2J / (1 + J)) / π for a simhash of the same
    /// features).
    pub fn fingerprint(&self) -> u64 {
        u64::from_le_bytes(self.0[..8].try_into().expect("8 bytes"))
    }

    /// The estimate a candidate must reach to be taken as similar at
    /// `threshold`: the threshold plus one standard deviation of the
    /// estimate there, `J + sqrt((1 − J²) / 448)`, so that a pair just
    /// under the threshold passes rarely (0.828 at `J = 0.8`, 0.921 at
    /// `J = 0.9`).
    pub fn bar(threshold: f64) -> f64 {
        let j = threshold.clamp(0.0, 1.0);
        j + ((1.0 - j * j) / 448.0).sqrt()
    }

    /// The distance within which a pair of documents with Jaccard
    /// similarity `threshold` has [`fingerprint`](Self::fingerprint)s with
    /// probability at least 0.9 (the 90th percentile of a binomial of 64
    /// bits at `(1 − J) / 2`), at most `max`: 10 at `J = 0.8` (so 8 for a
    /// store of maximum distance 8), 6 at 0.9, 3 at 0.95.
    pub fn distance_for(threshold: f64, max: u32) -> u32 {
        let p = ((1.0 - threshold.clamp(0.0, 1.0)) / 2.0).clamp(0.0, 0.5);
        let mut term = (1.0 - p).powi(64);
        let mut cumulative = term;
        let mut k = 0u32;
        while cumulative < 0.9 && k < 64 {
            term *= (64 - k) as f64 / (k + 1) as f64 * p / (1.0 - p);
            k += 1;
            cumulative += term;
        }
        k.min(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(range: std::ops::Range<u64>) -> Vec<u64> {
        range
            .map(|i| i.wrapping_mul(0x2545_f491_4f6c_dd1d))
            .collect()
    }

    #[test]
    fn estimates_jaccard_within_its_error() {
        // |A ∩ B| = 800, |A ∪ B| = 1000: J = 0.8.
        let a = Sketch::of_hashes(set(0..900)).unwrap();
        let b = Sketch::of_hashes(set(100..1000)).unwrap();
        let j = a.similarity(&b);
        assert!((j - 0.8).abs() < 4.0 * 0.028, "{j}");
        let c = Sketch::of_hashes(set(5000..6000)).unwrap();
        assert!(a.similarity(&c) < 0.15, "{}", a.similarity(&c));
        assert_eq!(a.similarity(&a), 1.0);
    }

    #[test]
    fn distance_rule() {
        assert_eq!(Sketch::distance_for(0.8, 64), 10);
        assert_eq!(Sketch::distance_for(0.8, 8), 8);
        assert_eq!(Sketch::distance_for(0.9, 64), 6);
        assert_eq!(Sketch::distance_for(0.95, 64), 3);
        assert_eq!(Sketch::distance_for(1.0, 64), 0);
        assert!((Sketch::bar(0.8) - 0.828).abs() < 0.001);
        assert_eq!(Sketch::bar(1.0), 1.0);
    }

    #[test]
    fn small_sets_are_densified_and_do_not_collide() {
        let one = Sketch::of_hashes([1]).unwrap();
        let other = Sketch::of_hashes([2]).unwrap();
        assert!(one.similarity(&other) < 0.3, "{}", one.similarity(&other));
        assert_eq!(Sketch::of_hashes([1, 1, 1]), Some(one));
        assert_eq!(Sketch::of_hashes([]), None);
    }

    #[test]
    fn order_and_duplicates_do_not_matter() {
        let mut s = set(0..300);
        let a = Sketch::of_hashes(s.clone()).unwrap();
        s.reverse();
        s.extend(set(0..50));
        assert_eq!(Sketch::of_hashes(s).unwrap(), a);
    }
}
