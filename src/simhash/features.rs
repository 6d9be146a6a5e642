//! Features of a text: Unicode-aware tokens, case-folded, optionally
//! without stop words, grouped into word shingles or character shingles.

/// Splits text into tokens: maximal runs of alphanumeric characters
/// (Unicode `Alphabetic` or `Numeric`), each lower-cased with Unicode case
/// mapping. Everything else separates tokens.
pub fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(|t| t.chars().flat_map(char::to_lowercase).collect())
}

/// English stop words removed when [`Fingerprinter::stop_words`] is set.
///
/// [`Fingerprinter::stop_words`]: super::Fingerprinter::stop_words
pub const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// Word shingles: every run of `width` consecutive tokens, joined by one
/// space. A text with fewer than `width` tokens (but at least one) yields
/// one shingle of all its tokens.
pub fn word_shingles(tokens: &[String], width: usize) -> Vec<String> {
    let width = width.max(1);
    if tokens.is_empty() {
        return Vec::new();
    }
    if tokens.len() < width {
        return vec![tokens.join(" ")];
    }
    tokens.windows(width).map(|w| w.join(" ")).collect()
}

/// Character shingles: every run of `width` consecutive characters of the
/// tokens joined by single spaces. A shorter text yields one shingle.
pub fn char_shingles(tokens: &[String], width: usize) -> Vec<String> {
    let width = width.max(1);
    let chars: Vec<char> = tokens.join(" ").chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    if chars.len() < width {
        return vec![chars.into_iter().collect()];
    }
    chars.windows(width).map(|w| w.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizes_unicode_and_folds_case() {
        let t: Vec<String> = tokens("Straße, ÉCOLE—naïve 42x; Σίσυφος").collect();
        assert_eq!(t, ["straße", "école", "naïve", "42x", "σίσυφος"]);
    }

    #[test]
    fn shingles() {
        let t: Vec<String> = tokens("a b c d").collect();
        assert_eq!(word_shingles(&t, 3), ["a b c", "b c d"]);
        assert_eq!(word_shingles(&t, 9), ["a b c d"]);
        assert!(word_shingles(&[], 3).is_empty());
        assert_eq!(char_shingles(&t, 5), ["a b c", " b c ", "b c d"]);
    }
}
