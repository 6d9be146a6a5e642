//! How many of a match's ids a query lists: all of them, or its smallest
//! few, counted without decoding the rest. A match on a fingerprint that
//! 300K documents share (an empty page) then costs a few ids' reads, not
//! 300K decoded and listed.

use crate::format::ids::IdBlock;

/// The ids a query lists of each match: at most `max` (the smallest), of
/// those below `below` when it is set; its count is of all of those.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Listing {
    /// At most this many ids a match, its smallest.
    pub max: usize,
    /// Only ids below this one are listed and counted, when set.
    pub below: Option<u64>,
    /// Only the matches at the distances of a query's nearest `nearest`
    /// are listed (every match at the farthest of those distances, so
    /// that the ones left out are all farther than every one listed).
    pub nearest: usize,
}

impl Listing {
    /// Every id.
    pub const ALL: Self = Self {
        max: usize::MAX,
        below: None,
        nearest: usize::MAX,
    };

    /// At most `max` ids a match, its smallest.
    pub fn at_most(max: usize) -> Self {
        Self { max, ..Self::ALL }
    }

    /// Whether every id is listed.
    pub fn is_all(&self) -> bool {
        *self == Self::ALL
    }

    /// Whether `id` is below the bound.
    #[inline]
    fn admits(&self, id: u64) -> bool {
        self.below.is_none_or(|b| id < b)
    }
}

/// `listing`'s share of a fingerprint's ids, which are those of its id
/// block (`block`, at a position, when level 0 holds it) less the pairs
/// its overlay `entries` remove, plus those they add (see
/// [`Overlay`](super::ids::Overlay); `removed` of the entries are
/// removals): the first `listing.max` of them into `out` (appended),
/// increasing; returns how many it has in all (below `listing.below`).
///
/// Reads the listed ids, a binary search of the block and, when the bound
/// falls among the entries, those below it; none of the others. The count
/// takes the overlay's invariant (an added pair is not in the id block, a
/// removed one is; `verify` checks it).
pub(crate) fn window(
    block: Option<(&IdBlock<'_>, usize)>,
    entries: &[(u64, bool)],
    removed: usize,
    listing: Listing,
    out: &mut Vec<u64>,
) -> usize {
    let in_block = match (block, listing.below) {
        (Some((b, p)), Some(below)) => b.rank(p, below),
        (Some((b, p)), None) => b.len_at(p),
        (None, _) => 0,
    };
    let under = match listing.below {
        Some(below) => entries.partition_point(|&(id, _)| id < below),
        None => entries.len(),
    };
    let removals = if under == entries.len() {
        removed
    } else {
        entries[..under].iter().filter(|e| !e.1).count()
    };
    let count = (in_block + under - removals).saturating_sub(removals);
    // The two increasing lists merged, removals dropped, until enough.
    let mut ids = block
        .map(|(b, p)| b.iter_at(p))
        .into_iter()
        .flatten()
        .peekable();
    let mut changes = entries.iter().peekable();
    let mut listed = 0;
    while listed < listing.max {
        let next = match (ids.peek().copied(), changes.peek().copied()) {
            (None, None) => break,
            (Some(a), None) => {
                ids.next();
                Some(a)
            }
            (Some(a), Some(&(c, _))) if a < c => {
                ids.next();
                Some(a)
            }
            (a, Some(&(c, added))) => {
                changes.next();
                if a == Some(c) {
                    ids.next();
                }
                added.then_some(c)
            }
        };
        let Some(id) = next else { continue };
        if !listing.admits(id) {
            break;
        }
        out.push(id);
        listed += 1;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::ids::encode_id_block;

    /// The ids of `block_ids` changed by `entries`, as a full listing
    /// would give them.
    fn model(block_ids: &[u64], entries: &[(u64, bool)]) -> Vec<u64> {
        let mut all: std::collections::BTreeSet<u64> = block_ids.iter().copied().collect();
        for &(id, added) in entries {
            if added {
                all.insert(id);
            } else {
                all.remove(&id);
            }
        }
        all.into_iter().collect()
    }

    #[test]
    fn windows_are_the_full_listing_cut() {
        let block_ids: Vec<u64> = (0..500u64).map(|i| 1_000 + i * 7).collect();
        // Additions between, before and after the block's ids; removals of
        // its first, last and some in between.
        let mut entries: Vec<(u64, bool)> = vec![(1, true), (1_000, false), (1_003, true)];
        entries.extend((0..40u64).map(|i| (1_000 + i * 70, i % 2 == 0 && i > 0)));
        entries.retain(|&(id, added)| added != block_ids.contains(&id));
        entries.extend([(1_000 + 499 * 7, false), (9_999, true), (u64::MAX, true)]);
        entries.sort_unstable();
        entries.dedup_by_key(|e| e.0);
        let bytes = encode_id_block([&block_ids[..0], &block_ids[..], &[5, 6][..]]);
        let block = IdBlock::parse(&bytes).unwrap();
        for (with_block, with_entries) in [(true, true), (true, false), (false, true)] {
            let b: &[u64] = if with_block { &block_ids } else { &[] };
            let e: &[(u64, bool)] = if with_entries { &entries } else { &[] };
            // Entries alone only ever add (there is no block to remove from).
            let e: Vec<(u64, bool)> = e.iter().copied().filter(|x| with_block || x.1).collect();
            let all = model(b, &e);
            let place = with_block.then_some((&block, 1));
            for below in [
                None,
                Some(0),
                Some(1),
                Some(1_001),
                Some(2_000),
                Some(9_999),
            ]
            .into_iter()
            .chain([Some(u64::MAX)])
            {
                let under: Vec<u64> = all
                    .iter()
                    .copied()
                    .filter(|&id| below.is_none_or(|b| id < b))
                    .collect();
                for max in [0, 1, 2, 5, 100, 1_000, usize::MAX] {
                    let mut out = vec![42];
                    let listing = Listing {
                        max,
                        below,
                        ..Listing::ALL
                    };
                    let removed = e.iter().filter(|x| !x.1).count();
                    let count = window(place, &e, removed, listing, &mut out);
                    assert_eq!(count, under.len(), "count, {listing:?}");
                    assert_eq!(out[0], 42, "appended");
                    let want = &under[..max.min(under.len())];
                    assert_eq!(&out[1..], want, "{listing:?} {with_block} {with_entries}");
                }
            }
        }
    }
}
