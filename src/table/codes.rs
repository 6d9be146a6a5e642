//! The Huffman codes of one table. A table keeps every code any of its
//! blocks was written with; new blocks use the newest.

use std::sync::Arc;

use crate::codec::{Code, SYMBOLS};

/// Deltas a compaction must have seen before it replaces a table's code.
pub const MIN_SAMPLE: u64 = 1024;

/// How much worse (in code-word bits) the current code must be on the
/// measured distribution before a new code is built.
pub const REBUILD_RATIO: f64 = 1.01;

/// The codes of one table, indexed by code id.
#[derive(Debug, Clone, Default)]
pub struct Codebook {
    codes: Vec<Option<Arc<Code>>>,
}

impl Codebook {
    /// A codebook holding the given `(id, code)` pairs.
    pub fn from_codes(codes: impl IntoIterator<Item = (u32, Code)>) -> Self {
        let mut book = Self::default();
        for (id, code) in codes {
            let i = id as usize;
            if book.codes.len() <= i {
                book.codes.resize(i + 1, None);
            }
            book.codes[i] = Some(Arc::new(code));
        }
        book
    }

    /// The code with this id.
    #[inline]
    pub fn get(&self, id: u32) -> Option<&Code> {
        self.codes.get(id as usize)?.as_deref()
    }

    /// The newest code and its id.
    pub fn current(&self) -> Option<(u32, &Code)> {
        let id = self.codes.len().checked_sub(1)?;
        Some((id as u32, self.codes[id].as_deref()?))
    }

    /// Number of code ids allocated.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    /// True before the first code is built.
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    /// Decides whether blocks written now should use a new code built from
    /// `counts`; returns the new code when so.
    pub fn rebuild_for(&self, counts: &[u64; SYMBOLS]) -> Option<Code> {
        let sample: u64 = counts.iter().sum();
        match self.current() {
            None => Some(Code::from_counts(counts)),
            Some(_) if sample < MIN_SAMPLE => None,
            Some((_, current)) => {
                let candidate = Code::from_counts(counts);
                let (old, new) = (current.cost(counts) as f64, candidate.cost(counts) as f64);
                (old > new * REBUILD_RATIO).then_some(candidate)
            }
        }
    }

    /// A copy with `code` added under the next id.
    pub fn with(&self, code: Code) -> (u32, Self) {
        let mut next = self.clone();
        let id = next.codes.len() as u32;
        next.codes.push(Some(Arc::new(code)));
        (id, next)
    }
}
