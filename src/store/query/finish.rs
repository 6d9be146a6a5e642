//! From candidates to answers: the nearest kept, repeats removed, ids
//! attached.

use super::scratch::Scratch;
use super::Match;
use crate::error::Result;
use crate::store::answers::{Answers, Candidates, Found};
use crate::store::listing::Listing;
use crate::store::shared::Shared;
use crate::store::state::State;

/// Leaves in `found` (candidates `(fingerprint, distance)`, repeated as
/// the tables found them) the distinct ones at the distances of the
/// nearest `n`, sorted by distance then fingerprint: grouped by distance
/// first, so that only the groups kept are sorted (a query among
/// thousands of near fingerprints, pages of one template, sorts the
/// nearest few).
pub(super) fn nearest(found: &mut Vec<(u64, u32)>, n: usize) {
    if n == 0 {
        found.clear();
        return;
    }
    let mut starts = [0usize; 67];
    for &(_, d) in found.iter() {
        starts[d.min(64) as usize + 2] += 1;
    }
    for d in 2..starts.len() {
        starts[d] += starts[d - 1];
    }
    // starts[d + 1] is where distance d goes, moved on as it is filled.
    let mut grouped = vec![(0, 0); found.len()];
    for &(fp, d) in found.iter() {
        let at = &mut starts[d.min(64) as usize + 1];
        grouped[*at] = (fp, d);
        *at += 1;
    }
    // Now starts[d] is where distance d begins.
    // Each group sorted, its repeats dropped and moved down to `kept`
    // (never past what is still to be read).
    let mut kept = 0;
    for d in 0..65 {
        let (from, to) = (starts[d], starts[d + 1]);
        grouped[from..to].sort_unstable();
        for i in from..to {
            if i == from || grouped[i] != grouped[i - 1] {
                grouped[kept] = grouped[i];
                kept += 1;
            }
        }
        if kept >= n {
            break;
        }
    }
    grouped.truncate(kept);
    *found = grouped;
}

/// Sorts each query's candidates by distance then fingerprint, removes
/// repeats and attaches ids as `listing` lists them, from `state` (the
/// state the candidates were found in): looked up together for all the
/// queries' matches (see [`State::ids_of_many`]), from memory, or from
/// the id blocks on disk when the tables are kept there; with `first`,
/// the nearest match of each query only.
pub(in crate::store) fn finish_all(
    shared: &Shared,
    state: &State,
    found: Vec<Vec<(u64, u32)>>,
    first: bool,
    listing: Listing,
) -> Result<Vec<Vec<Match>>> {
    let mut answers = Answers::new();
    answers.scratch.found = Candidates::from_nested(found);
    finish_into(shared, state, listing, first, &mut answers)?;
    Ok(answers.to_nested())
}

/// [`finish_all`] of the candidates in `answers.scratch.found` (then
/// emptied), appended to `answers`; with `first`, one match a query at
/// most (the nearest found). On an error `answers` is left as it was.
pub(in crate::store) fn finish_into(
    shared: &Shared,
    state: &State,
    listing: Listing,
    first: bool,
    answers: &mut Answers,
) -> Result<()> {
    let before = (answers.matches.len(), answers.ids.len(), answers.ends.len());
    let finished = finish_group(shared, state, listing, first, answers);
    if finished.is_err() {
        answers.matches.truncate(before.0);
        answers.ids.truncate(before.1);
        answers.ends.truncate(before.2);
    }
    answers.scratch.found.clear();
    finished
}

/// [`finish_into`], which undoes what it appended when it fails.
pub(super) fn finish_group(
    shared: &Shared,
    state: &State,
    listing: Listing,
    first: bool,
    answers: &mut Answers,
) -> Result<()> {
    let Answers {
        matches,
        ids,
        ends,
        scratch,
    } = answers;
    let Scratch {
        found, fps, spans, ..
    } = scratch;
    let from = matches.len();
    for i in 0..found.ends.len() {
        let range = found.range(i);
        let f = &mut found.hits[range];
        if first {
            // The nearest, in one pass: a query near many stored
            // fingerprints (template pages) sorts none of them.
            let nearest = f.iter().copied().min_by_key(|&(fp, d)| (d, fp));
            push_found(matches, nearest.as_slice());
        } else if listing.nearest < f.len() {
            let mut near = f.to_vec();
            nearest(&mut near, listing.nearest);
            push_found(matches, &near);
        } else {
            f.sort_unstable_by_key(|&(fp, d)| (d, fp));
            let distinct = dedup_sorted(f);
            push_found(matches, &f[..distinct]);
        }
        ends.push(matches.len());
    }
    // A store without ids (fingerprints only) needs no lookups.
    if state.ids == 0 || matches.len() == from {
        return Ok(());
    }
    fps.clear();
    fps.extend(matches[from..].iter().map(|m| m.fingerprint));
    spans.clear();
    let mut start = ids.len();
    state.ids_of_many(&shared.plan, fps, listing, ids, spans)?;
    for (m, &(end, count)) in matches[from..].iter_mut().zip(spans.iter()) {
        m.ids_end = end;
        m.listed = end - start;
        m.id_count = count;
        start = end;
    }
    Ok(())
}

/// Appends `near` (sorted, distinct) as matches
/// without ids yet.
pub(super) fn push_found(matches: &mut Vec<Found>, near: &[(u64, u32)]) {
    let ids_end = matches.last().map_or(0, |m| m.ids_end);
    matches.extend(near.iter().map(|&(fingerprint, distance)| Found {
        fingerprint,
        distance,
        ids_end,
        listed: 0,
        id_count: 0,
    }));
}

/// Moves the distinct values of sorted `v` to its front; returns how
/// many there are.
pub(super) fn dedup_sorted<T: PartialEq + Copy>(v: &mut [T]) -> usize {
    let mut kept = 0;
    for i in 0..v.len() {
        if i == 0 || v[i] != v[kept - 1] {
            v[kept] = v[i];
            kept += 1;
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::nearest;
    use crate::test_rng::TestRng;

    /// `nearest` keeps what sorting, removing repeats and cutting after
    /// the distance of the `n`-th keeps: candidates repeated as several
    /// tables find them, distances 0 to 64, `n` from 0 past their number.
    #[test]
    fn nearest_is_the_sorted_distinct_list_cut_at_a_distance() {
        let mut rng = TestRng::new(0x6e);
        for round in 0..300 {
            let distinct = (rng.next_u64() % 60) as usize;
            let spread = [1, 3, 9, 65][round % 4];
            let mut found = Vec::new();
            for _ in 0..distinct {
                let fp = rng.next_u64() % 200;
                let d = (fp.wrapping_mul(0x9e37_79b9) >> 7) as u32 % spread;
                for _ in 0..=rng.next_u64() % 4 {
                    found.push((fp, d));
                }
            }
            // Shuffled, as the tables find them.
            for i in (1..found.len()).rev() {
                found.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
            }
            let mut all = found.clone();
            all.sort_unstable_by_key(|&(fp, d)| (d, fp));
            all.dedup();
            for n in [0, 1, 2, 5, 17, 59, 200] {
                let mut got = found.clone();
                nearest(&mut got, n);
                let want: Vec<(u64, u32)> = match n.checked_sub(1).and_then(|i| all.get(i)) {
                    Some(&(_, far)) => all.iter().copied().filter(|&(_, d)| d <= far).collect(),
                    None if n == 0 => Vec::new(),
                    None => all.clone(),
                };
                assert_eq!(got, want, "round {round}, n {n}");
            }
        }
    }
}
