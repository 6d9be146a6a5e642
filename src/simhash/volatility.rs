//! Per-query volatility: how likely each bit of a fingerprint is to differ
//! in a near-duplicate (Sood & Loguinov, CIKM 2011, §4.3 and §5.1).
//!
//! Bit `j` of a simhash is the sign of a weight sum `W_j`. An edit that
//! removes and adds features changes every sum by a zero-mean amount `Y_j`,
//! and bit `j` flips when `Y_j` crosses `W_j`: the smaller `|W_j|`, the
//! likelier. The model here measures `|W_j|` against the document's own
//! scale, `z_j = |W_j| / rms(W)` (the root mean square of the 64 sums,
//! which estimates the standard deviation every sum has over random
//! feature hashes), and takes the change as Gaussian with standard
//! deviation `τ · rms(W)`:
//!
//! ```text
//! p_j = P(Y_j > |W_j|) = ½ · erfc(z_j / (τ·√2))
//! ```
//!
//! [`FLIP_SCALE`] is `τ` as fitted by maximum likelihood on the pairs of
//! real documents within distance 3 of each other (`simstore-bench
//! volatility`, see bench/README.md). The order of the bits by `p_j` is
//! the order by `|W_j|` whatever `τ` is; `τ` weighs one volatile bit
//! against two less volatile ones.
//!
//! A [`Volatility`] carries the 64 probabilities in 64 bytes, byte `j`
//! (bit `j`, least significant first) holding `round(−8·log2 p_j)`
//! clamped to `0..=255`: steps of 2^(1/8) (9%), from 1 down to 2^−31.9.
//! Its text form is those bytes in 128 hexadecimal digits.
//!
//! ```
//! use simstore::simhash::{Fingerprinter, Volatility};
//!
//! let s = Fingerprinter::new().fingerprint("the quick brown fox jumps over the lazy dog").unwrap();
//! let v = Volatility::from_weights(&s.weights);
//! let likeliest = v.order()[0]; // the bit with the smallest |W_j|
//! assert!(s.weights.iter().all(|w| w.abs() >= s.weights[likeliest as usize].abs()));
//! assert_eq!(Volatility::from_hex(&v.to_hex()).unwrap(), v);
//! ```

/// `τ`: the standard deviation of a near-duplicate's change to a weight
/// sum, in units of the sums' root mean square; fitted on real documents
/// (see the module documentation).
pub const FLIP_SCALE: f64 = 0.18;

/// Quantization steps per halving of a probability.
const STEPS_PER_BIT: f64 = 8.0;

/// The probability and the odds of each of the 256 levels.
struct Levels {
    probability: [f64; 256],
    odds: [f64; 256],
}

static LEVELS: std::sync::LazyLock<Levels> = std::sync::LazyLock::new(|| {
    let probability = std::array::from_fn(|q| (-(q as f64) / STEPS_PER_BIT).exp2());
    let odds = probability.map(|p: f64| {
        let p = p.min(0.5);
        p / (1.0 - p)
    });
    Levels { probability, odds }
});

/// The flip probability of each of a fingerprint's 64 bits, quantized
/// (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Volatility([u8; 64]);

/// Text that is not 128 hexadecimal digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadVolatility(pub String);

impl std::fmt::Display for BadVolatility {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for BadVolatility {}

impl Volatility {
    /// The volatility of a simhash's weight sums under the fitted model
    /// ([`FLIP_SCALE`]).
    pub fn from_weights(weights: &[f64; 64]) -> Self {
        Self::from_weights_scaled(weights, FLIP_SCALE)
    }

    /// The volatility of weight sums with `tau` in place of
    /// [`FLIP_SCALE`]. All-zero sums (a document without features) give
    /// every bit probability ½.
    pub fn from_weights_scaled(weights: &[f64; 64], tau: f64) -> Self {
        let rms = (weights.iter().map(|w| w * w).sum::<f64>() / 64.0).sqrt();
        let mut p = [0.5f64; 64];
        if rms > 0.0 && tau > 0.0 {
            for (p, w) in p.iter_mut().zip(weights) {
                let z = w.abs() / rms;
                *p = 0.5 * erfc(z / (tau * std::f64::consts::SQRT_2));
            }
        }
        Self::from_probabilities(&p)
    }

    /// Quantizes per-bit flip probabilities (index = bit, least
    /// significant first); values outside `0..=1` are clamped, NaN taken
    /// as 0.
    pub fn from_probabilities(p: &[f64; 64]) -> Self {
        let mut q = [0u8; 64];
        for (q, &p) in q.iter_mut().zip(p) {
            let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
            *q = if p <= 0.0 {
                255
            } else {
                (-STEPS_PER_BIT * p.log2()).round().clamp(0.0, 255.0) as u8
            };
        }
        Self(q)
    }

    /// Every bit equally volatile, with probability `p` (for fingerprints
    /// that come without weights).
    pub fn uniform(p: f64) -> Self {
        Self::from_probabilities(&[p; 64])
    }

    /// The quantized probability of bit `bit` (0 = least significant).
    pub fn probability(&self, bit: u8) -> f64 {
        LEVELS.probability[usize::from(self.0[usize::from(bit & 63)])]
    }

    /// Every bit's odds of flipping, `p / (1 − p)` with `p` its
    /// [`probability`](Self::probability) taken at most ½ (so odds at most
    /// 1), bit 0 first: what [`crate::plan::vosh::likeliest_by_odds`]
    /// orders a query's flips by, read from a table of the 256 levels.
    ///
    /// ```
    /// use simstore::simhash::Volatility;
    /// let v = Volatility::from_probabilities(&[0.25; 64]);
    /// let p = v.probability(0);
    /// assert_eq!(v.odds()[0], p / (1.0 - p));
    /// assert_eq!(Volatility::uniform(0.9).odds()[63], 1.0);
    /// ```
    pub fn odds(&self) -> [f64; 64] {
        let odds = &LEVELS.odds;
        std::array::from_fn(|b| odds[usize::from(self.0[b])])
    }

    /// The 64 bits from the most to the least volatile (ties by bit
    /// number).
    pub fn order(&self) -> [u8; 64] {
        let mut bits: [u8; 64] = std::array::from_fn(|j| j as u8);
        bits.sort_by_key(|&j| self.0[usize::from(j)]);
        bits
    }

    /// The 64 bytes.
    pub fn to_bytes(&self) -> [u8; 64] {
        self.0
    }

    /// A volatility from its 64 bytes (every value is one).
    pub fn from_bytes(bytes: [u8; 64]) -> Self {
        Self(bytes)
    }

    /// The text form: 128 lowercase hexadecimal digits, bit 0's byte
    /// first.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Reads the text form (either case).
    pub fn from_hex(text: &str) -> Result<Self, BadVolatility> {
        let bytes = text.as_bytes();
        if bytes.len() != 128 {
            return Err(BadVolatility(format!(
                "a volatility is 128 hexadecimal digits, not {}",
                bytes.len()
            )));
        }
        let mut out = [0u8; 64];
        let mut bad = 0u8;
        for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
            let (high, low) = (NIBBLES[pair[0] as usize], NIBBLES[pair[1] as usize]);
            bad |= high | low;
            *o = high << 4 | (low & 0x0f);
        }
        if bad & 0x80 != 0 {
            let pair = bytes
                .chunks_exact(2)
                .find(|pair| pair.iter().any(|&d| NIBBLES[d as usize] & 0x80 != 0))
                .unwrap_or_default();
            return Err(BadVolatility(format!(
                "{:?} is not a hexadecimal byte",
                String::from_utf8_lossy(pair)
            )));
        }
        Ok(Self(out))
    }
}

/// Each byte's value as a hexadecimal digit (either case), 0xff for the
/// bytes that are not one: a table rather than ranges, so decoding random
/// digits does not branch on them.
const NIBBLES: [u8; 256] = {
    let mut table = [0xffu8; 256];
    let mut d = 0;
    while d < 10 {
        table[b'0' as usize + d] = d as u8;
        d += 1;
    }
    let mut d = 0;
    while d < 6 {
        table[b'a' as usize + d] = 10 + d as u8;
        table[b'A' as usize + d] = 10 + d as u8;
        d += 1;
    }
    table
};

/// The complementary error function, to a relative error below 1.2e-7
/// (Chebyshev fit of Numerical Recipes, §6.2).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erfc_matches_known_values() {
        for (x, want) in [
            (0.0, 1.0),
            (0.5, 0.479_500_122_186_953_5),
            (1.0, 0.157_299_207_050_285_1),
            (2.0, 0.004_677_734_981_047_266),
            (3.0, 2.209_049_699_858_544e-5),
            (-1.0, 1.842_700_792_949_715),
        ] {
            let got = erfc(x);
            assert!(
                (got - want).abs() <= 1.2e-7 * want.max(1e-300) + 1e-15,
                "{x}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn smaller_sums_are_likelier_to_flip() {
        let mut w = [0f64; 64];
        for (j, w) in w.iter_mut().enumerate() {
            *w = if j % 2 == 0 { 1.0 } else { -1.0 } * (j as f64 + 1.0);
        }
        let v = Volatility::from_weights(&w);
        let order = v.order();
        assert_eq!(order[0], 0);
        for pair in order.windows(2) {
            assert!(v.probability(pair[0]) >= v.probability(pair[1]));
        }
        assert!(v.probability(0) > v.probability(63));
        // A zero sum is a coin toss.
        w[5] = 0.0;
        assert_eq!(Volatility::from_weights(&w).probability(5), 0.5);
        assert_eq!(
            Volatility::from_weights(&[0.0; 64]),
            Volatility::uniform(0.5)
        );
    }

    #[test]
    fn quantization_is_within_a_step() {
        for p in [1.0, 0.5, 0.3, 0.01, 1e-5, 1e-9] {
            let v = Volatility::uniform(p);
            let back = v.probability(7);
            assert!(
                (back / p).log2().abs() <= 0.5 / STEPS_PER_BIT + 1e-12,
                "{p} -> {back}"
            );
        }
        assert_eq!(Volatility::uniform(0.0).to_bytes(), [255; 64]);
        assert_eq!(Volatility::uniform(f64::NAN).to_bytes(), [255; 64]);
        assert_eq!(Volatility::uniform(7.0).to_bytes(), [0; 64]);
    }

    #[test]
    fn text_form_round_trips_and_rejects_junk() {
        let v = Volatility::from_bytes(std::array::from_fn(|j| (j * 4) as u8));
        let hex = v.to_hex();
        assert_eq!(hex.len(), 128);
        assert!(hex.starts_with("0004080c"));
        assert_eq!(Volatility::from_hex(&hex), Ok(v));
        assert_eq!(Volatility::from_hex(&hex.to_uppercase()), Ok(v));
        assert!(Volatility::from_hex(&hex[..126]).is_err());
        assert!(Volatility::from_hex(&format!("zz{}", &hex[2..])).is_err());
        assert!(Volatility::from_hex(&format!("é{}", &hex[2..])).is_err());
        assert!(Volatility::from_hex(&format!("+f{}", &hex[2..])).is_err());
    }
}
