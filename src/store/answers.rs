//! Answers to a group of queries kept in flat, reusable buffers: the
//! matches of every query one after the other, their ids in one list.
//! A caller that answers query after query with one [`Answers`] (a
//! server, the command line) then allocates no list per query or per
//! match once its buffers have grown, where a `Vec<Vec<Match>>`
//! allocates one for each.

use super::query::{Match, Scratch};

/// The answers of [`Store::query_many_into`](crate::Store::query_many_into):
/// for each query asked, in order, its matches sorted by distance then
/// fingerprint, each with its ids. Reuse one `Answers` from call to call:
/// each call replaces what it holds and keeps its buffers.
///
/// ```
/// use simstore::{Answers, Options, Store};
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::create(dir.path(), &Options::new())?;
/// store.insert_many(&[(0x0123_4567_89ab_cdef, 7), (0x0123_4567_89ab_cdef, 9)])?;
/// let mut answers = Answers::new();
/// store.query_many_into(&[0x0123_4567_89ab_cdee, 0x1111_1111_1111_1111], 3, false, None, &mut answers)?;
/// assert_eq!(answers.len(), 2);
/// let near: Vec<_> = answers.get(0).unwrap().collect();
/// assert_eq!((near[0].fingerprint, near[0].distance, near[0].ids), (0x0123_4567_89ab_cdef, 1, &[7, 9][..]));
/// assert_eq!(answers.get(1).unwrap().len(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct Answers {
    /// Every query's matches, one query after the other.
    pub(super) matches: Vec<Found>,
    /// The ids of every match, one match after the other.
    pub(super) ids: Vec<u64>,
    /// Where each query's matches end in `matches`.
    pub(super) ends: Vec<usize>,
    /// Buffers the queries reuse.
    pub(super) scratch: Scratch,
}

/// One match as [`Answers`] holds it: its ids are `ids[ids_end - listed..ids_end]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Found {
    pub fingerprint: u64,
    pub distance: u32,
    /// Where its ids end in [`Answers::ids`].
    pub ids_end: usize,
    /// How many of its ids are listed.
    pub listed: usize,
    /// How many ids it has.
    pub id_count: usize,
}

/// A match within [`Answers`], borrowing its ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MatchRef<'a> {
    /// The stored fingerprint.
    pub fingerprint: u64,
    /// Its Hamming distance from the query.
    pub distance: u32,
    /// Its document ids, increasing: all of them, or the smallest when the
    /// query limited how many it lists.
    pub ids: &'a [u64],
    /// How many ids it has: `ids.len()` unless the query listed fewer.
    pub id_count: usize,
}

impl MatchRef<'_> {
    /// The match as an owned [`Match`].
    pub fn to_match(&self) -> Match {
        Match {
            fingerprint: self.fingerprint,
            distance: self.distance,
            ids: self.ids.to_vec(),
            id_count: self.id_count,
        }
    }
}

impl From<MatchRef<'_>> for Match {
    fn from(m: MatchRef<'_>) -> Self {
        m.to_match()
    }
}

impl<'a> From<&'a Match> for MatchRef<'a> {
    fn from(m: &'a Match) -> Self {
        Self {
            fingerprint: m.fingerprint,
            distance: m.distance,
            ids: &m.ids,
            id_count: m.id_count,
        }
    }
}

impl Answers {
    /// Empty answers, to be filled by
    /// [`Store::query_many_into`](crate::Store::query_many_into).
    pub fn new() -> Self {
        Self::default()
    }

    /// How many queries are answered.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether no query is answered.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The matches of query `i` (in the order asked), sorted by distance
    /// then fingerprint; `None` past the last query.
    pub fn get(&self, i: usize) -> Option<impl ExactSizeIterator<Item = MatchRef<'_>> + '_> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Some(self.matches[start..end].iter().map(|f| self.view(f)))
    }

    /// Every query's matches, in the order asked.
    pub fn iter(
        &self,
    ) -> impl ExactSizeIterator<Item = impl ExactSizeIterator<Item = MatchRef<'_>> + '_> + '_ {
        (0..self.len()).map(|i| {
            self.get(i)
                .unwrap_or_else(|| unreachable!("every index below len is answered"))
        })
    }

    /// The bytes the answers' buffers (and the queries') hold room for.
    pub(super) fn capacity_bytes(&self) -> usize {
        use super::query::bytes;
        bytes(&self.matches) + bytes(&self.ids) + bytes(&self.ends) + self.scratch.capacity_bytes()
    }

    /// Empties the answers, keeping their buffers.
    pub fn clear(&mut self) {
        self.matches.clear();
        self.ids.clear();
        self.ends.clear();
    }

    /// The answers as owned lists, one per query.
    pub(super) fn to_nested(&self) -> Vec<Vec<Match>> {
        self.iter()
            .map(|ms| ms.map(|m| m.to_match()).collect())
            .collect()
    }

    fn view<'a>(&'a self, f: &Found) -> MatchRef<'a> {
        MatchRef {
            fingerprint: f.fingerprint,
            distance: f.distance,
            ids: &self.ids[f.ids_end - f.listed..f.ids_end],
            id_count: f.id_count,
        }
    }
}

impl Clone for Answers {
    /// The answers, without the buffers the queries reuse.
    fn clone(&self) -> Self {
        Self {
            matches: self.matches.clone(),
            ids: self.ids.clone(),
            ends: self.ends.clone(),
            scratch: Scratch::default(),
        }
    }
}

impl PartialEq for Answers {
    /// The same matches for the same number of queries.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a.eq(b))
    }
}

impl Eq for Answers {}

impl std::fmt::Debug for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|ms| ms.collect::<Vec<_>>()))
            .finish()
    }
}

/// Each query's candidates `(fingerprint, distance)`, one query after the
/// other, as the tables found them (unsorted, possibly repeated).
#[derive(Default)]
pub(super) struct Candidates {
    pub hits: Vec<(u64, u32)>,
    /// Where each query's candidates end in `hits`.
    pub ends: Vec<usize>,
}

impl Candidates {
    /// Ends the current query's candidates.
    #[inline]
    pub fn end_query(&mut self) {
        self.ends.push(self.hits.len());
    }

    pub fn clear(&mut self) {
        self.hits.clear();
        self.ends.clear();
    }

    /// Where query `i`'s candidates lie in `hits`.
    pub fn range(&self, i: usize) -> std::ops::Range<usize> {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        start..self.ends[i]
    }

    /// Lists one query after the other.
    pub fn from_nested(found: Vec<Vec<(u64, u32)>>) -> Self {
        let mut c = Self::default();
        for f in found {
            c.hits.extend(f);
            c.end_query();
        }
        c
    }
}
