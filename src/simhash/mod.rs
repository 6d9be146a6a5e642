//! Simhash fingerprints of documents (Charikar 2002, as used by Manku et
//! al. §2 and Sood & Loguinov Algorithm 1).
//!
//! Each feature is hashed to 64 bits with seeded XXH3; bit `j` of the
//! fingerprint is 1 when the weights of the features whose hash has bit `j`
//! set outweigh those whose hash has it clear. The exact definition (and
//! test vectors) is in storage-format.md, "Fingerprints": stored
//! fingerprints are only useful if tomorrow's build computes the same ones.
//!
//! ```
//! use simstore::simhash::Fingerprinter;
//!
//! let fingerprinter = Fingerprinter::new(); // word 3-shingles
//! let a = fingerprinter.fingerprint("the quick brown fox jumps over the lazy dog").unwrap();
//! let b = fingerprinter.fingerprint("the quick brown fox jumps over the lazy dog!").unwrap();
//! assert_eq!(a.fingerprint, b.fingerprint); // punctuation is not a word
//! assert!(fingerprinter.fingerprint("  ").is_none()); // no words, no fingerprint
//! ```

mod features;
#[cfg(feature = "html")]
mod html;
mod idf;
#[cfg(feature = "html")]
mod scan;
mod sketch;
mod volatility;

use std::collections::HashMap;

pub use features::{char_shingles, tokens, word_shingles, STOP_WORDS};
#[cfg(feature = "html")]
pub use html::visible_text;
pub use idf::Idf;
#[cfg(feature = "html")]
pub use scan::visible_text_fast;
pub use sketch::{Sketch, SKETCH_BYTES, SKETCH_SEED};
pub use volatility::{BadVolatility, Volatility, FLIP_SCALE};

/// The XXH3 seed of feature hashes (ASCII "simhash1").
pub const FEATURE_SEED: u64 = 0x7369_6d68_6173_6831;

/// The default word-shingle width.
pub const DEFAULT_SHINGLE: usize = 3;

/// A fingerprint with the per-bit accumulated weights it was decided by.
#[derive(Debug, Clone, PartialEq)]
pub struct Simhash {
    /// The 64-bit fingerprint.
    pub fingerprint: u64,
    /// `weights[j]`: the signed weight sum behind bit `j`. Bits with the
    /// smallest `|weights[j]|` are the likeliest to flip under small edits.
    pub weights: [f64; 64],
    /// Number of distinct features.
    pub features: usize,
}

/// The 64-bit hash of one feature.
pub fn feature_hash(feature: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(feature.as_bytes(), FEATURE_SEED)
}

/// Simhash of weighted feature hashes. Features are accumulated in
/// increasing hash order so the result does not depend on input order.
pub fn simhash(features: impl IntoIterator<Item = (u64, f64)>) -> Simhash {
    let mut merged: Vec<(u64, f64)> = features.into_iter().collect();
    merged.sort_by_key(|&(h, _)| h);
    let mut weights = [0f64; 64];
    let mut distinct = 0usize;
    let mut prev = None;
    for &(h, w) in &merged {
        if prev != Some(h) {
            distinct += 1;
            prev = Some(h);
        }
        for (j, acc) in weights.iter_mut().enumerate() {
            if (h >> j) & 1 == 1 {
                *acc += w;
            } else {
                *acc -= w;
            }
        }
    }
    let fingerprint =
        weights.iter().enumerate().fold(
            0u64,
            |fp, (j, &w)| if w > 0.0 { fp | (1u64 << j) } else { fp },
        );
    Simhash {
        fingerprint,
        weights,
        features: distinct,
    }
}

/// [`simhash`] of distinct hashes in increasing order with integral
/// weights (term frequencies): the same result, accumulated in integers.
fn simhash_counted(hashes: &[(u64, u32)]) -> Simhash {
    let mut sums = [0i64; 64];
    for &(h, n) in hashes {
        let n = i64::from(n);
        for (j, acc) in sums.iter_mut().enumerate() {
            let bit = ((h >> j) & 1) as i64;
            *acc += (2 * bit - 1) * n;
        }
    }
    let fingerprint = sums.iter().enumerate().fold(
        0u64,
        |fp, (j, &w)| if w > 0 { fp | (1u64 << j) } else { fp },
    );
    Simhash {
        fingerprint,
        weights: sums.map(|w| w as f64),
        features: hashes.len(),
    }
}

/// Turns text into a simhash: tokens, optional stop-word removal, word
/// (or character) shingles weighted by their frequency.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Fingerprinter {
    shingle: usize,
    char_shingle: Option<usize>,
    stop_words: bool,
}

impl Default for Fingerprinter {
    fn default() -> Self {
        Self {
            shingle: DEFAULT_SHINGLE,
            char_shingle: None,
            stop_words: false,
        }
    }
}

impl Fingerprinter {
    /// Word shingles of [`DEFAULT_SHINGLE`] tokens, no stop-word removal.
    pub fn new() -> Self {
        Self::default()
    }

    /// Word-shingle width (default [`DEFAULT_SHINGLE`]; at least 1).
    pub fn shingle(mut self, width: usize) -> Self {
        self.shingle = width.max(1);
        self
    }

    /// Use character shingles of this width instead of word shingles
    /// (default: word shingles).
    pub fn char_shingle(mut self, width: Option<usize>) -> Self {
        self.char_shingle = width.map(|w| w.max(1));
        self
    }

    /// Drop [`STOP_WORDS`] before shingling (default: keep them).
    pub fn stop_words(mut self, remove: bool) -> Self {
        self.stop_words = remove;
        self
    }

    /// The features of a text with their term frequencies, in first-seen
    /// order.
    pub fn features(&self, text: &str) -> Vec<(String, u64)> {
        let toks: Vec<String> = tokens(text)
            .filter(|t| !self.stop_words || !STOP_WORDS.contains(&t.as_str()))
            .collect();
        let shingles = match self.char_shingle {
            Some(w) => char_shingles(&toks, w),
            None => word_shingles(&toks, self.shingle),
        };
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut out: Vec<(String, u64)> = Vec::new();
        for s in shingles {
            match index.get(&s) {
                Some(&i) => out[i].1 += 1,
                None => {
                    index.insert(s.clone(), out.len());
                    out.push((s, 1));
                }
            }
        }
        out
    }

    /// The simhash of a text with term-frequency weights; `None` when the
    /// text has no tokens.
    pub fn fingerprint(&self, text: &str) -> Option<Simhash> {
        let hashes = self.feature_hashes(text);
        (!hashes.is_empty()).then(|| simhash_counted(&hashes))
    }

    /// The simhash of a text with term frequency times inverse document
    /// frequency weights ([`Idf::weight`]); `None` when the text has no
    /// tokens.
    pub fn fingerprint_idf(&self, text: &str, idf: &Idf) -> Option<Simhash> {
        let hashes = self.feature_hashes(text);
        (!hashes.is_empty()).then(|| {
            simhash(
                hashes
                    .iter()
                    .map(|&(h, tf)| (h, f64::from(tf) * idf.weight(h))),
            )
        })
    }

    /// The similarity [`Sketch`] of a text's feature set (the features
    /// [`fingerprint`](Self::fingerprint) weighs); `None` when the text has
    /// no tokens.
    pub fn sketch(&self, text: &str) -> Option<Sketch> {
        Sketch::of_hashes(self.feature_hashes(text).iter().map(|&(h, _)| h))
    }

    /// The distinct feature hashes of a text in increasing order, each
    /// with its term frequency: what [`features`](Self::features) gives,
    /// hashed by [`feature_hash`], without a string per feature.
    pub fn feature_hashes(&self, text: &str) -> Vec<(u64, u32)> {
        let mut hashes: Vec<u64> = match self.char_shingle {
            Some(_) => self
                .features(text)
                .iter()
                .flat_map(|(f, tf)| std::iter::repeat_n(feature_hash(f), *tf as usize))
                .collect(),
            None => self.word_shingle_hashes(text),
        };
        hashes.sort_unstable();
        let mut counted: Vec<(u64, u32)> = Vec::with_capacity(hashes.len());
        for h in hashes {
            match counted.last_mut() {
                Some((last, n)) if *last == h => *n += 1,
                _ => counted.push((h, 1)),
            }
        }
        counted
    }

    /// The hash of every word shingle of a text, in text order, as
    /// [`feature_hash`] of [`word_shingles`] of [`tokens`] would give.
    fn word_shingle_hashes(&self, text: &str) -> Vec<u64> {
        let mut arena = String::with_capacity(text.len());
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for token in text.split(|c: char| !c.is_alphanumeric()) {
            if token.is_empty() {
                continue;
            }
            let start = arena.len();
            if token.is_ascii() {
                arena.extend(token.bytes().map(|b| char::from(b.to_ascii_lowercase())));
            } else {
                arena.extend(token.chars().flat_map(char::to_lowercase));
            }
            if self.stop_words && STOP_WORDS.contains(&&arena[start..]) {
                arena.truncate(start);
                continue;
            }
            spans.push((start, arena.len()));
        }
        if spans.is_empty() {
            return Vec::new();
        }
        let width = self.shingle.min(spans.len());
        let mut joined = String::new();
        spans
            .windows(width)
            .map(|w| {
                joined.clear();
                for (n, &(a, b)) in w.iter().enumerate() {
                    if n > 0 {
                        joined.push(' ');
                    }
                    joined.push_str(&arena[a..b]);
                }
                feature_hash(&joined)
            })
            .collect()
    }

    /// The simhash of caller-weighted features (each hashed as by
    /// [`feature_hash`]); `None` when there are none.
    pub fn fingerprint_weighted<'a>(
        &self,
        features: impl IntoIterator<Item = (&'a str, f64)>,
    ) -> Option<Simhash> {
        let hashed: Vec<(u64, f64)> = features
            .into_iter()
            .map(|(f, w)| (feature_hash(f), w))
            .collect();
        (!hashed.is_empty()).then(|| simhash(hashed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_feature_fingerprint_is_its_hash() {
        let s = simhash([(0xdead_beef_0000_0001, 1.0)]);
        assert_eq!(s.fingerprint, 0xdead_beef_0000_0001);
        assert_eq!(s.features, 1);
        assert!(s.weights.iter().all(|w| w.abs() == 1.0));
    }

    #[test]
    fn order_independent_and_weighted() {
        let a = simhash([(1, 1.0), (u64::MAX, 3.0), (6, 2.0)]);
        let b = simhash([(6, 2.0), (1, 1.0), (u64::MAX, 3.0)]);
        assert_eq!(a, b);
        // Bits 0..3: 1 + 3 ± 2 > 0; above: -1 + 3 - 2 = 0, and ties give 0.
        assert_eq!(a.fingerprint, 0b111);
        let fp = Fingerprinter::new();
        assert_eq!(fp.fingerprint("  ,;  "), None);
        let w = fp.fingerprint_weighted([("x", 5.0), ("y", 1.0)]).unwrap();
        assert_eq!(w.fingerprint, feature_hash("x"));
    }

    #[test]
    fn small_edits_move_few_bits() {
        let base =
            "the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat "
                .repeat(8);
        let edited = base.replacen("lazy", "sleepy", 1);
        let fp = Fingerprinter::new();
        let (a, b) = (
            fp.fingerprint(&base).unwrap(),
            fp.fingerprint(&edited).unwrap(),
        );
        assert!((a.fingerprint ^ b.fingerprint).count_ones() <= 6);
    }

    /// The fast path (hashes without a string per feature, integer sums)
    /// gives what the definition gives: simhash of `features` hashed.
    #[test]
    fn fast_path_matches_the_definition() {
        let texts = [
            "the quick brown fox jumps over the lazy dog the quick brown fox",
            "Straße, ÉCOLE—naïve 42x; Σίσυφος İstanbul ǅemal the and of",
            "one",
            "two words",
            "",
            " ;; ",
        ];
        let mut rng = crate::test_rng::TestRng::new(11);
        let words = ["a", "the", "Zebra", "ÉTÉ", "x1", "of", "dog", "ß", "and"];
        let mut generated = Vec::new();
        for _ in 0..40 {
            let n = (rng.next_u64() % 60) as usize;
            let t: Vec<&str> = (0..n)
                .map(|_| words[(rng.next_u64() % words.len() as u64) as usize])
                .collect();
            generated.push(t.join(if rng.next_u64().is_multiple_of(2) {
                " "
            } else {
                ", "
            }));
        }
        for text in texts
            .iter()
            .copied()
            .chain(generated.iter().map(String::as_str))
        {
            for f in [
                Fingerprinter::new(),
                Fingerprinter::new().shingle(1),
                Fingerprinter::new().shingle(5).stop_words(true),
                Fingerprinter::new().char_shingle(Some(4)),
            ] {
                let features = f.features(text);
                let want = (!features.is_empty())
                    .then(|| simhash(features.iter().map(|(s, tf)| (feature_hash(s), *tf as f64))));
                assert_eq!(f.fingerprint(text), want, "{text:?}");
                let mut hashes: Vec<(u64, u32)> = features
                    .iter()
                    .map(|(s, tf)| (feature_hash(s), *tf as u32))
                    .collect();
                hashes.sort_unstable();
                assert_eq!(f.feature_hashes(text), hashes, "{text:?}");
            }
        }
    }
}
