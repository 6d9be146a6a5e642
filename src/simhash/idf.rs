//! Inverse document frequencies learned from a sample of a collection, so
//! that features common to most of its documents (a navigation template,
//! a list repeated on hundreds of pages) weigh little in a fingerprint.

/// Document frequencies of a sample: a feature's weight is
/// `ln((n + 1) / (df + 1))` for `n` sample documents of which `df` held
/// it; a feature held by fewer than two of them counts as held by one.
///
/// ```
/// use simstore::simhash::{Fingerprinter, Idf};
///
/// let f = Fingerprinter::new();
/// let pages = [
///     "menu home about contact the first story about rivers",
///     "menu home about contact a second story about mountains",
///     "menu home about contact and a third one about the sea",
/// ];
/// let idf = Idf::learn(pages.iter().map(|p| f.feature_hashes(p)));
/// assert_eq!(idf.documents(), 3);
/// // The template's shingles weigh ln(4/4) = 0; a page's own ln(4/2).
/// let weighted = f.fingerprint_idf(pages[0], &idf).unwrap();
/// assert_ne!(weighted.fingerprint, f.fingerprint(pages[0]).unwrap().fingerprint);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Idf {
    documents: u32,
    /// `(hash, df)` of the features held by at least two documents, by
    /// increasing hash.
    common: Vec<(u64, u32)>,
}

impl Idf {
    /// Learns from the distinct feature hashes of each sample document (as
    /// [`Fingerprinter::feature_hashes`](super::Fingerprinter::feature_hashes)
    /// gives them; counts are ignored).
    pub fn learn<D: AsRef<[(u64, u32)]>>(documents: impl IntoIterator<Item = D>) -> Self {
        let mut all: Vec<u64> = Vec::new();
        let mut n = 0u32;
        for doc in documents {
            n = n.saturating_add(1);
            let mut hashes: Vec<u64> = doc.as_ref().iter().map(|&(h, _)| h).collect();
            hashes.sort_unstable();
            hashes.dedup();
            all.extend(hashes);
        }
        all.sort_unstable();
        let mut common = Vec::new();
        let mut i = 0;
        while i < all.len() {
            let j = i + all[i..].iter().take_while(|&&h| h == all[i]).count();
            if j - i >= 2 {
                common.push((all[i], (j - i) as u32));
            }
            i = j;
        }
        Self {
            documents: n,
            common,
        }
    }

    /// The learned frequencies from their stored form: `documents` and the
    /// `(hash, df)` pairs of features held by at least two, increasing.
    pub fn from_parts(documents: u32, common: Vec<(u64, u32)>) -> Self {
        Self { documents, common }
    }

    /// The sample's size.
    pub fn documents(&self) -> u32 {
        self.documents
    }

    /// The `(hash, df)` pairs of features held by at least two sample
    /// documents, by increasing hash.
    pub fn common(&self) -> &[(u64, u32)] {
        &self.common
    }

    /// The weight of the feature with hash `h`.
    pub fn weight(&self, h: u64) -> f64 {
        let df = self
            .common
            .binary_search_by_key(&h, |&(k, _)| k)
            .map_or(1, |i| self.common[i].1);
        ((f64::from(self.documents) + 1.0) / (f64::from(df) + 1.0)).ln()
    }
}
