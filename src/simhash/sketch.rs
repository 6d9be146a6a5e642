//! Similarity sketches: 496 one-bit MinHash values of a document's
//! feature set and its size, in 64 bytes, from which the Jaccard
//! similarity of two documents is estimated without their text.
//!
//! The construction is MinHash (Broder 1997) under 496 hash functions,
//! keeping one bit of each minimum (b-bit minwise hashing, Li and König,
//! WWW 2010):
//!
//! 1. every distinct feature hash `h` (as
//!    [`feature_hash`](super::feature_hash) gives it) becomes
//!    `x = h ^ SKETCH_SEED`; function `i` maps it to
//!    `(x ^ key_i) · multiplier_i` (wrapping), with `key_i = mix(2i + 1)`
//!    and `multiplier_i = mix(2i + 2) | 1`; `min_i` is the smallest value;
//! 2. bit `i` is the low bit of `mix(min_i ^ (i + 1) · γ)`, stored as bit
//!    `i % 8` of byte `i / 8` (bytes 0 to 61);
//! 3. bytes 62 and 63 hold the number of distinct features, a
//!    little-endian `u16` saturating at 65,535.
//!
//! `mix` is SplitMix64's finaliser and `γ` its increment
//! (`0x9e3779b97f4a7c15`). storage-format.md, "Sketches", has the same
//! definition with a test vector.
//!
//! Two sets with Jaccard similarity `J` have the same minimum under each
//! function with probability `J`, so they agree on each bit with
//! probability `(1 + J) / 2`, independently from function to function
//! whatever the sets' sizes. The first 64 bits serve as a fingerprint
//! ([`Sketch::fingerprint`]): two documents differ in each of its bits
//! with probability `(1 − J) / 2`. The similarity is estimated from the
//! next 432 bits, so that it stays unbiased for candidates chosen because
//! their fingerprints are near: `Ĵ = 2a − 1` for the share `a` of those
//! bits that agree, with standard deviation `sqrt((1 − J²) / 432)`: 0.029
//! at `J = 0.8`, 0.021 at `J = 0.9`. [`Sketch::recheck`] accepts a pair
//! when the estimate clears the threshold by a margin (see
//! [`Sketch::bar`]), never when the sizes alone rule the threshold out.
//! Computing a sketch costs 496 multiplications per distinct feature.
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

/// Bins whose bit is kept: 64 of the fingerprint, then the estimate bits.
const BITS: usize = 64 + ESTIMATE_BITS;

/// Bits the similarity is estimated from.
const ESTIMATE_BITS: usize = 432;

/// Seed remixed into feature hashes before binning (ASCII "sketch01").
pub const SKETCH_SEED: u64 = 0x736b_6574_6368_3031;

/// SplitMix64's increment.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The hash functions `x ↦ (x ^ key_i) · multiplier_i` (wrapping), `i` in
/// `0..BITS`: `key_i = mix(2i + 1)`, `multiplier_i = mix(2i + 2) | 1`.
fn functions() -> (&'static [u64; BITS], &'static [u64; BITS]) {
    type Table = ([u64; BITS], [u64; BITS]);
    static TABLE: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    let (keys, multipliers) = TABLE.get_or_init(|| {
        (
            std::array::from_fn(|i| mix(2 * i as u64 + 1)),
            std::array::from_fn(|i| mix(2 * i as u64 + 2) | 1),
        )
    });
    (keys, multipliers)
}

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
        let mut distinct: Vec<u64> = hashes.into_iter().collect();
        if distinct.is_empty() {
            return None;
        }
        distinct.sort_unstable();
        distinct.dedup();
        let (keys, multipliers) = functions();
        let mut mins = [u64::MAX; BITS];
        for &h in &distinct {
            crate::simd::minima::fold(&mut mins, keys, multipliers, h ^ SKETCH_SEED);
        }
        let mut bytes = [0u8; SKETCH_BYTES];
        for (i, &min) in mins.iter().enumerate() {
            let bit = mix(min ^ (i as u64 + 1).wrapping_mul(GAMMA)) & 1;
            bytes[i / 8] |= (bit as u8) << (i % 8);
        }
        let features = u16::try_from(distinct.len()).unwrap_or(u16::MAX);
        bytes[SKETCH_BYTES - 2..].copy_from_slice(&features.to_le_bytes());
        Some(Self(bytes))
    }

    /// The number of distinct features sketched (saturating at 65,535).
    pub fn features(&self) -> u32 {
        u32::from(u16::from_le_bytes([
            self.0[SKETCH_BYTES - 2],
            self.0[SKETCH_BYTES - 1],
        ]))
    }

    /// The estimated Jaccard similarity of the two sketched sets:
    /// `2a − 1` clamped to `[0, 1]`, for the share `a` of the 432
    /// estimate bits that agree (see the module documentation).
    pub fn similarity(&self, other: &Sketch) -> f64 {
        let range = 8..8 + ESTIMATE_BITS / 8;
        let differ: u32 = self.0[range.clone()]
            .iter()
            .zip(&other.0[range])
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        let agree = 1.0 - f64::from(differ) / ESTIMATE_BITS as f64;
        (2.0 * agree - 1.0).clamp(0.0, 1.0)
    }

    /// The estimate two documents' sketches must reach for them to be
    /// taken as similar at `threshold` when `candidates` documents are
    /// weighed for the same one: the threshold plus `z` standard
    /// deviations of the estimate at the threshold, `sqrt((1 − J²) / 432)`,
    /// with `z = max(1, sqrt(ln candidates))`, so that the best of many
    /// candidates just under the threshold (a template's pages) is rarely
    /// taken for a near-duplicate (the largest of `c` standard normal
    /// errors is about `sqrt(2 ln c)`; the factor was chosen on the
    /// measurements in bench/RESULTS.md). Infinite when the sizes alone
    /// rule the threshold out (`min / max < threshold`).
    pub fn bar(&self, other: &Sketch, threshold: f64, candidates: usize) -> f64 {
        let j = threshold.clamp(0.0, 1.0);
        let (a, b) = (f64::from(self.features()), f64::from(other.features()));
        if a.min(b) < j * a.max(b) && a.max(b) < f64::from(u16::MAX) {
            return f64::INFINITY;
        }
        let variance = (1.0 - j * j) / ESTIMATE_BITS as f64;
        let z = (candidates.max(1) as f64).ln().sqrt().max(1.0);
        j + z * variance.sqrt()
    }

    /// The estimated similarity of two sketched documents when it reaches
    /// [`bar`](Self::bar) at `threshold` among `candidates`; `None`
    /// otherwise.
    pub fn recheck(&self, other: &Sketch, threshold: f64, candidates: usize) -> Option<f64> {
        let s = self.similarity(other);
        (s >= self.bar(other, threshold, candidates)).then_some(s)
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
        assert!((j - 0.8).abs() < 4.0 * 0.029, "{j}");
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
        let big = Sketch::of_hashes(0..5000).unwrap();
        assert!(
            (big.bar(&big, 0.8, 1) - 0.8289).abs() < 0.0001,
            "{}",
            big.bar(&big, 0.8, 1)
        );
        assert_eq!(big.bar(&big, 1.0, 1), 1.0);
        // Many candidates: a higher bar (z = sqrt(ln 1000) = 2.63).
        assert!(
            (big.bar(&big, 0.8, 1000) - 0.8759).abs() < 0.0001,
            "{}",
            big.bar(&big, 0.8, 1000)
        );
        // Sizes 10 and 20 cannot be 0.8 similar.
        let (ten, twenty) = (
            Sketch::of_hashes(0..10).unwrap(),
            Sketch::of_hashes(0..20).unwrap(),
        );
        assert_eq!(ten.bar(&twenty, 0.8, 1), f64::INFINITY);
        assert_eq!(ten.recheck(&twenty, 0.8, 1), None);
        assert_eq!(ten.recheck(&ten, 0.8, 1), Some(1.0));
        assert_eq!((ten.features(), big.features()), (10, 5000));
    }

    #[test]
    fn small_sets_do_not_collide() {
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
