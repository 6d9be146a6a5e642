//! Candidates from a one-table store: the runs of a query's header
//! with sets of its bits flipped (every set within `k` for an exact
//! query, the likeliest for a probabilistic one), staged across queries.

use super::probes::{accept, run_stages, scan_probes, scan_runs, Probe};
use super::scratch::Work;
use crate::error::Result;
use crate::store::answers::Candidates;
use crate::store::shared::Shared;
use crate::store::state::State;
use crate::table::FlatStart;

/// Headers a one-table store probes in the first pass of a query with
/// `first` (the likeliest ones); each later pass takes
/// [`FIRST_FLIP_GROWTH`] times as many, and none follows a pass that
/// found a match. A pass's probes overlap their cache misses only with
/// each other, so a query that stops after a small first pass saves less
/// than one that finds nothing loses by taking two: at 60M on the
/// generative model (a quarter of the queries matching), a first pass of
/// 8 headers answered 12–22% fewer first-match queries a second than one
/// of 128 (about every header of budgets 0.9 and 0.95), and with nearly
/// half matching, 8 still lost to 32. Larger budgets still stop early.
pub(super) const FIRST_FLIP_PASS: usize = 128;

/// How much larger each pass of a first-match query on a one-table store
/// is than the one before.
pub(super) const FIRST_FLIP_GROWTH: usize = 4;

/// The most headers one pass of a one-table query probes: a pass holds
/// its masks, headers and probes in memory, and an exact query with a
/// wide header and a large distance flips millions of sets (40 header
/// bits at `k = 8`: 118 million), so its passes are cut to this size.
pub(super) const FLIP_PASS_MAX: usize = 16_384;

/// [`collect_flipped`], in the copy compiled for the processor's bit
/// instructions when it has them (as [`collect`](super::collect::collect) does): a probe of a
/// header's run selects in the run's bit vector and counts bits.
#[allow(clippy::too_many_arguments)]
pub(super) fn collect_flipped_fast<M: Iterator<Item = u64>>(
    shared: &Shared,
    state: &State,
    probe: &[usize],
    fps: &[u64],
    masks: impl Fn(usize) -> M,
    k: u32,
    first: bool,
    work: &mut Work,
    found: &mut Candidates,
) -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::cpu::fast_bits() {
        // SAFETY: `fast_bits` checked that this processor has every
        // feature `collect_flipped_fast_bits` is compiled for.
        return unsafe {
            collect_flipped_fast_bits(shared, state, probe, fps, masks, k, first, work, found)
        };
    }
    collect_flipped(shared, state, probe, fps, masks, k, first, work, found)
}

/// [`collect_flipped`] compiled for POPCNT, BMI1, BMI2 and LZCNT.
///
/// # Safety
/// The processor must have those features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,bmi1,bmi2,lzcnt")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn collect_flipped_fast_bits<M: Iterator<Item = u64>>(
    shared: &Shared,
    state: &State,
    probe: &[usize],
    fps: &[u64],
    masks: impl Fn(usize) -> M,
    k: u32,
    first: bool,
    work: &mut Work,
    found: &mut Candidates,
) -> Result<()> {
    collect_flipped(shared, state, probe, fps, masks, k, first, work, found)
}

/// [`collect`](super::collect::collect) on a one-table store: for the `i`-th query, the run of
/// every header `masks(i)` flips (the unflipped header being mask 0) in
/// each level's table, the distance always taken to the query itself.
/// With `first`, in passes growing from [`FIRST_FLIP_PASS`], the likeliest
/// flips first. When level 0's table is read flat, the first pass of
/// every query in `fps` goes through its stages together (see
/// [`stage_flat`]); the probes of one query's later passes, and of the
/// other levels, are staged query by query.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(in crate::store) fn collect_flipped<M: Iterator<Item = u64>>(
    shared: &Shared,
    state: &State,
    probe: &[usize],
    fps: &[u64],
    masks: impl Fn(usize) -> M,
    k: u32,
    first: bool,
    work: &mut Work,
    found: &mut Candidates,
) -> Result<()> {
    let first_pass = if first { FIRST_FLIP_PASS } else { usize::MAX };
    // Level 0's table read flat (when it is): its probes go apart, the
    // other levels' through the stages.
    let (flat, probe) = match (state.tables.first().and_then(|t| t.flat()), probe) {
        (Some(flat), [0, rest @ ..]) => (flat, rest),
        _ => {
            for (i, &fp) in fps.iter().enumerate() {
                let mut source = masks(i);
                let on = Query { fp, k, first };
                probe_passes(
                    shared,
                    state,
                    None,
                    probe,
                    on,
                    &mut source,
                    first_pass,
                    work,
                    &mut found.hits,
                )?;
                found.end_query();
            }
            return Ok(());
        }
    };
    let spec = &shared.plan.tables()[0];
    let mut sources: Vec<M> = Vec::new();
    // Taken out of `work` while the other buffers are in use (and left
    // behind by an error).
    let mut staged = std::mem::take(&mut work.staged);
    let mut next = 0;
    while next < fps.len() {
        let begin = next;
        next = stage_flat(
            flat,
            spec,
            fps,
            &masks,
            &mut sources,
            begin,
            first_pass,
            &mut staged,
        );
        let mut from = 0;
        for (i, &to) in (begin..next).zip(&staged.ends) {
            let fp = fps[i];
            let hits = &mut found.hits;
            let q = spec.permutation.apply(fp);
            let on = Query { fp, k, first };
            let heads = &staged.heads[from..to];
            let mut stopped = scan_heads(spec, state, flat, q, heads, k, first, hits);
            if !stopped {
                let masks = &staged.masks[from..to];
                stopped = probe_levels(shared, state, probe, on, masks, work, hits)?;
            }
            if !stopped && to > from {
                let pass = first_pass.saturating_mul(FIRST_FLIP_GROWTH);
                let source = &mut sources[i - begin];
                probe_passes(
                    shared,
                    state,
                    Some(flat),
                    probe,
                    on,
                    source,
                    pass,
                    work,
                    hits,
                )?;
            }
            found.end_query();
            from = to;
        }
    }
    work.staged = staged;
    Ok(())
}

/// What one query asks.
#[derive(Clone, Copy)]
pub(super) struct Query {
    pub(super) fp: u64,
    pub(super) k: u32,
    pub(super) first: bool,
}

/// The first passes of a group of queries, staged together: every
/// query's masks and headers, one query after the other, and where each
/// query's ones end.
#[derive(Default)]
pub(super) struct Staged {
    pub(super) masks: Vec<u64>,
    pub(super) heads: Vec<(u64, FlatStart)>,
    pub(super) ends: Vec<usize>,
}

/// Headers staged together at most, give or take one query's: enough
/// for a few queries' cache misses to overlap, few enough for what the
/// first stages bring in to stay cached until the last reads it (an
/// exhaustive query alone has thousands).
pub(super) const STAGED_HEADS: usize = 256;

/// Takes up to `pass` masks (at most [`FLIP_PASS_MAX`]) of each query
/// from `fps[begin]` on (the `i`-th query's from `masks(i)`, kept in
/// `sources`, which starts afresh), until about [`STAGED_HEADS`] headers
/// are staged, and runs the flat probe's three stages (sample, bit vector, run start) for all of
/// them together, one stage for all before the next: the queries' cache
/// misses overlap with each other and with the flip sets still being
/// listed, rather than each query waiting three times for its own.
/// Returns the end of the queries staged.
#[allow(clippy::too_many_arguments)]
pub(super) fn stage_flat<M: Iterator<Item = u64>>(
    flat: &crate::table::Flat,
    spec: &crate::plan::TableSpec,
    fps: &[u64],
    masks: impl Fn(usize) -> M,
    sources: &mut Vec<M>,
    begin: usize,
    pass: usize,
    staged: &mut Staged,
) -> usize {
    sources.clear();
    staged.masks.clear();
    staged.heads.clear();
    staged.ends.clear();
    let mut end = begin;
    while end < fps.len() && staged.heads.len() < STAGED_HEADS {
        let q = spec.permutation.apply(fps[end]);
        let mut source = masks(end);
        for m in source.by_ref().take(pass.min(FLIP_PASS_MAX)) {
            staged.masks.push(m);
            staged.heads.push(sampled_head(flat, q ^ m));
        }
        sources.push(source);
        staged.ends.push(staged.heads.len());
        end += 1;
    }
    find_starts(flat, &mut staged.heads);
    end
}

/// The flat probe's first stage for the permuted value `x`: its header,
/// whose sample is asked for, with its run's start still to be found.
#[inline(always)]
pub(super) fn sampled_head(flat: &crate::table::Flat, x: u64) -> (u64, FlatStart) {
    let header = flat.header(x);
    flat.touch_sample(header);
    (header, FlatStart::default())
}

/// The flat probe's second and third stages for `heads`, whose samples
/// were asked for: their bit vector's words asked for, then each run's
/// start found (and its first low part asked for).
#[inline(always)]
pub(super) fn find_starts(flat: &crate::table::Flat, heads: &mut [(u64, FlatStart)]) {
    for &(header, _) in heads.iter() {
        flat.touch_upper(header);
    }
    for (header, start) in heads.iter_mut() {
        *start = flat.start(*header);
    }
}

/// One query's passes from `pass` masks on (each at most
/// [`FLIP_PASS_MAX`]): each pass's headers in level 0's flat table (when
/// `flat`) and in the other levels' tables `probe`, until `source` runs
/// out or, with `first`, a pass finds a match.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn probe_passes<M: Iterator<Item = u64>>(
    shared: &Shared,
    state: &State,
    flat: Option<&crate::table::Flat>,
    probe: &[usize],
    on: Query,
    source: &mut M,
    mut pass: usize,
    work: &mut Work,
    hits: &mut Vec<(u64, u32)>,
) -> Result<()> {
    let mut part = std::mem::take(&mut work.part);
    let result = loop {
        part.clear();
        part.extend(source.by_ref().take(pass.min(FLIP_PASS_MAX)));
        if part.is_empty() {
            break Ok(());
        }
        pass = pass.saturating_mul(FIRST_FLIP_GROWTH);
        if let Some(flat) = flat {
            if scan_flat(shared, state, flat, on, &part, &mut work.heads, hits) {
                break Ok(());
            }
        }
        match probe_levels(shared, state, probe, on, &part, work, hits) {
            Ok(true) => break Ok(()),
            Ok(false) => {}
            Err(e) => break Err(e),
        }
    };
    work.part = part;
    result
}

/// The headers of `on.fp` with each of `masks` flipped in the tables
/// `probe` (not read flat), their stages run together. Returns whether
/// `first` stopped at a match.
#[inline(always)]
pub(super) fn probe_levels(
    shared: &Shared,
    state: &State,
    probe: &[usize],
    on: Query,
    masks: &[u64],
    work: &mut Work,
    hits: &mut Vec<(u64, u32)>,
) -> Result<bool> {
    if probe.is_empty() {
        return Ok(false);
    }
    work.probes.clear();
    for &m in masks {
        for &t in probe {
            work.probes.push(Probe::flipped(shared, state, t, on.fp, m));
        }
    }
    run_stages(state, &mut work.probes);
    let before = hits.len();
    scan_probes(shared, state, &work.probes, on.k, on.first, hits)?;
    Ok(on.first && hits.len() > before)
}

/// [`collect_flipped`]'s probes of level 0 when its table is read flat:
/// the headers of `on.fp` with each of `masks` flipped, their stages run
/// for all before the next (the sample, the bit vector's words, the
/// run's start), then scanned with the pending and upper runs sharing
/// them. Returns whether `first` stopped at a match.
#[inline(always)]
pub(super) fn scan_flat(
    shared: &Shared,
    state: &State,
    flat: &crate::table::Flat,
    on: Query,
    masks: &[u64],
    heads: &mut Vec<(u64, FlatStart)>,
    found: &mut Vec<(u64, u32)>,
) -> bool {
    let spec = &shared.plan.tables()[0];
    let q = spec.permutation.apply(on.fp);
    heads.clear();
    heads.extend(masks.iter().map(|&m| sampled_head(flat, q ^ m)));
    find_starts(flat, heads);
    scan_heads(spec, state, flat, q, heads, on.k, on.first, found)
}

/// The last stage of level 0's flat probes: the runs of `heads` (their
/// starts found) scanned, with the pending and upper runs of the same
/// headers, for fingerprints within `k` of `q` (the query under the
/// table's permutation). Returns whether `first` stopped at a match.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn scan_heads(
    spec: &crate::plan::TableSpec,
    state: &State,
    flat: &crate::table::Flat,
    q: u64,
    heads: &[(u64, FlatStart)],
    k: u32,
    first: bool,
    found: &mut Vec<(u64, u32)>,
) -> bool {
    for &(header, start) in heads {
        let (lo, hi) = spec.prefix_range(header << (64 - flat.header_bits()));
        if scan_runs(spec, state, 0, (lo, hi), q, k, first, found) {
            return true;
        }
        let stopped = flat.near(start, header, q, k, |p, d| {
            !accept(spec, state, p, d, found) || !first
        });
        if stopped {
            return true;
        }
    }
    false
}
