//! Queries: all matches, first match, and batches.
//!
//! Each query runs under the state read lock, so it sees one consistent
//! set of tables, pending fingerprints and tombstones; compaction only
//! takes the write lock for the instant it swaps snapshots in.

mod collect;
mod finish;
mod flipped;
mod probes;
mod scratch;

use super::answers::Answers;
use super::listing::Listing;
use super::parallel::{map_scattered, threads_for};
use super::shared::Shared;
use super::state::State;
use crate::error::{Error, Result};
use crate::plan::vosh;
use collect::collect;
pub(in crate::store) use finish::{finish_all, finish_into};
use flipped::{collect_flipped_fast, FIRST_FLIP_PASS};
pub(in crate::store) use scratch::bytes;
pub(crate) use scratch::Scratch;

/// A stored fingerprint within the asked distance of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Match {
    /// The stored fingerprint.
    pub fingerprint: u64,
    /// Its Hamming distance from the query.
    pub distance: u32,
    /// Its document ids, increasing: all of them, or the smallest when the
    /// query limited how many it lists (as
    /// [`Store::query_many_max_ids`](crate::Store::query_many_max_ids)).
    pub ids: Vec<u64>,
    /// How many ids it has: `ids.len()` unless the query listed fewer.
    pub id_count: usize,
}

impl Match {
    /// A match as the store reports one (for tests and adapters that
    /// build answers of their own).
    pub fn new(fingerprint: u64, distance: u32, ids: Vec<u64>) -> Self {
        Self {
            fingerprint,
            distance,
            id_count: ids.len(),
            ids,
        }
    }
}

pub(super) fn check_distance(shared: &Shared, k: u32) -> Result<&[usize]> {
    let supported = shared.plan.max_distance();
    u8::try_from(k)
        .ok()
        .and_then(|k8| {
            if k8 <= supported {
                shared.plan.probe_set(k8)
            } else {
                None
            }
        })
        .ok_or(Error::DistanceTooLarge {
            asked: k,
            supported: u32::from(supported),
        })
}

/// Every stored fingerprint within distance `k` of `fp`.
pub(crate) fn query(shared: &Shared, fp: u64, k: u32) -> Result<Vec<Match>> {
    query_one(shared, fp, None, k, false, Listing::ALL)
}

/// One stored fingerprint within distance `k` of `fp`, if any.
pub(crate) fn query_first(shared: &Shared, fp: u64, k: u32) -> Result<Option<Match>> {
    Ok(query_one(shared, fp, None, k, true, Listing::ALL)?.pop())
}

/// One query's answer (with `first`, at most one match), ids as
/// `listing` lists them; with `probabilistic`, a probabilistic query
/// with that volatility and budget. Through this thread's reused answers.
pub(crate) fn query_one(
    shared: &Shared,
    fp: u64,
    probabilistic: Option<(&crate::simhash::Volatility, vosh::Budget)>,
    k: u32,
    first: bool,
    listing: Listing,
) -> Result<Vec<Match>> {
    with_answers(|answers| {
        match probabilistic {
            Some((v, budget)) => {
                let queries = [(fp, *v)];
                query_probabilistic_into(shared, &queries, k, budget, first, listing, answers)?;
            }
            None => query_many_into(shared, &[fp], k, first, listing, answers)?,
        }
        Ok(answers.iter().flatten().map(Match::from).collect())
    })
}

/// Bytes of buffers past which the answers a thread keeps for its
/// single queries are let go after one (a match on a fingerprint with
/// many ids, a query near thousands of fingerprints, an exact one-table
/// query's many header flips), rather than held for the next.
const KEPT: usize = 1 << 20;

thread_local! {
    /// The answers each thread's single queries reuse.
    static ONE: std::cell::Cell<Answers> = std::cell::Cell::new(Answers::new());
}

/// Runs `f` with this thread's reused answers, so a single query does
/// not allocate its probe, candidate and answer lists anew: fresh ones
/// when they are in use or gone (a query from a thread-local's
/// destructor), and let go when they grew past [`KEPT`].
fn with_answers<T>(f: impl FnOnce(&mut Answers) -> Result<T>) -> Result<T> {
    let mut answers = ONE.try_with(|one| one.take()).unwrap_or_default();
    let result = f(&mut answers);
    if answers.capacity_bytes() <= KEPT {
        // Gone only while the thread ends: then the answers go with it.
        let _ = ONE.try_with(|one| one.set(answers));
    }
    result
}

/// Queries [`query_many_into`] answers together.
pub(super) const GROUP: usize = 4;

/// Queries [`query_many_into`] answers together with `first`: enough for its
/// passes (see [`collect_first`](collect::collect_first)) to probe one table at a time while half
/// of them are unanswered.
pub(super) const FIRST_GROUP: usize = 16;

/// [`query`] for each of `fps` (or, with `first`, [`query_first`], as a
/// list of at most one), ids as `listing` lists them, into `answers`
/// (emptied first, its buffers reused): `GROUP` at a time under one read
/// lock with their probes' stages interleaved, so the cache misses of
/// several queries overlap.
pub(crate) fn query_many_into(
    shared: &Shared,
    fps: &[u64],
    k: u32,
    first: bool,
    listing: Listing,
    answers: &mut Answers,
) -> Result<()> {
    answers.clear();
    let probe = check_distance(shared, k)?;
    let group = if first { FIRST_GROUP } else { GROUP };
    in_groups(
        shared,
        fps,
        group,
        first,
        listing,
        answers,
        |state, group, s| collect(shared, state, probe, group, k, first, s),
    )
}

/// Answers `queries` `group` at a time into `answers`, each group under
/// one read lock: `find` puts the group's candidates in the scratch
/// buffers' [`Candidates`](super::answers::Candidates), which are then finished (sorted, ids attached
/// as `listing` lists them; with `first`, one match at most).
fn in_groups<T>(
    shared: &Shared,
    queries: &[T],
    group: usize,
    first: bool,
    listing: Listing,
    answers: &mut Answers,
    find: impl Fn(&State, &[T], &mut Scratch) -> Result<()>,
) -> Result<()> {
    for group in queries.chunks(group) {
        let state = shared.readable_state()?;
        answers.scratch.found.clear();
        find(&state, group, &mut answers.scratch)?;
        finish_into(shared, &state, listing, first, answers)?;
    }
    Ok(())
}

/// Probabilistic queries (Sood & Loguinov's PSM): on a one-table store,
/// for each `(fingerprint, volatility)`, the runs of the headers VOSH
/// gives within `budget` ([`vosh::flips`]); on other stores the exact
/// answer, never less exact than asked. With `first`, at most one match a
/// query.
pub(crate) fn query_probabilistic(
    shared: &Shared,
    queries: &[(u64, crate::simhash::Volatility)],
    k: u32,
    budget: vosh::Budget,
    first: bool,
    listing: Listing,
) -> Result<Vec<Vec<Match>>> {
    check_budget(budget)?;
    if shared.plan.header_bits().is_none() {
        // Other stores answer exactly, so as a batch of exact queries.
        let fps: Vec<u64> = queries.iter().map(|q| q.0).collect();
        return super::batch::query_batch(shared, &fps, k, first, listing);
    }
    // Large batches are spread over the query threads, as the batches of
    // `Store::query_many` are.
    let threads = threads_for(queries.len(), shared.query_threads);
    map_scattered(
        queries,
        threads,
        |q| q.0,
        |part| {
            let mut answers = Answers::new();
            query_probabilistic_into(shared, part, k, budget, first, listing, &mut answers)?;
            Ok(answers.to_nested())
        },
    )
}

/// Refuses a budget that allows no probe or a negative recall.
fn check_budget(budget: vosh::Budget) -> Result<()> {
    if budget.is_valid() {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "a probabilistic budget needs a recall of at least 0 and a probe, not {budget:?}"
    )))
}

/// [`query_probabilistic`] on the calling thread, into `answers`
/// (emptied first).
pub(crate) fn query_probabilistic_into(
    shared: &Shared,
    queries: &[(u64, crate::simhash::Volatility)],
    k: u32,
    budget: vosh::Budget,
    first: bool,
    listing: Listing,
    answers: &mut Answers,
) -> Result<()> {
    answers.clear();
    check_budget(budget)?;
    let probe = check_distance(shared, k)?;
    let Some(header) = shared.plan.header_bits() else {
        let fps: Vec<u64> = queries.iter().map(|q| q.0).collect();
        return query_many_into(shared, &fps, k, first, listing, answers);
    };
    probabilistic_in_turn(
        shared, queries, probe, header, k, budget, first, listing, answers,
    )
}

/// Probabilistic queries answered together under one read lock, the
/// first passes of their flat probes staged together.
const PROBABILISTIC_GROUP: usize = 64;

/// [`query_probabilistic`] of `queries` on this thread into `answers`,
/// [`PROBABILISTIC_GROUP`] at a time under one read lock.
#[allow(clippy::too_many_arguments)]
fn probabilistic_in_turn(
    shared: &Shared,
    queries: &[(u64, crate::simhash::Volatility)],
    probe: &[usize],
    header: u8,
    k: u32,
    budget: vosh::Budget,
    first: bool,
    listing: Listing,
    answers: &mut Answers,
) -> Result<()> {
    let bits: Vec<u8> = (64 - header..64).collect();
    let k8 = k.min(8) as u8;
    // All matches over every flip set: the order the sets are taken in
    // changes nothing (the answers are sorted), so this is an exact query,
    // its sets listed without the heap.
    let every =
        !first && budget.recall >= 1.0 && budget.max_probes as u64 >= vosh::exact_count(header, k8);
    let ordered_past = if first { FIRST_FLIP_PASS } else { usize::MAX };
    in_groups(
        shared,
        queries,
        PROBABILISTIC_GROUP,
        first,
        listing,
        answers,
        |state, group, scratch| {
            let fps: Vec<u64> = group.iter().map(|q| q.0).collect();
            if every {
                return collect(shared, state, probe, &fps, k, first, scratch);
            }
            // The sets the budget takes (the same with and without `first`),
            // likeliest first for `first`'s passes (to within a bucket of their
            // odds when not from the heap) when there are more than its first
            // pass probes together.
            let flips = |i: usize| {
                vosh::likeliest_by_odds(&bits, &group[i].1.odds(), k8, budget, ordered_past)
            };
            let Scratch { found, work, .. } = scratch;
            let probe = state.probes(probe);
            collect_flipped_fast(shared, state, &probe, &fps, flips, k, first, work, found)
        },
    )
}
