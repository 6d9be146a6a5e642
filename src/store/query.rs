//! Queries: all matches, first match, and batches.
//!
//! Each query runs under the state read lock, so it sees one consistent
//! set of tables, pending fingerprints and tombstones; compaction only
//! takes the write lock for the instant it swaps snapshots in.

use super::answers::{Answers, Candidates, Found};
use super::listing::Listing;
use super::parallel::{map_scattered, threads_for};
use super::shared::Shared;
use super::state::State;
use crate::error::{Error, Result};
use crate::plan::vosh;
use crate::table::{FlatStart, ProbeStart};

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

/// For each of `fps`, the candidates `(fingerprint, distance)` within `k`
/// of it, unsorted and possibly repeated (with `first`, at most one a
/// query), appended to `scratch.found`, one query after the other. Runs
/// the copy of the loop compiled for the processor's bit instructions
/// when it has them (see [`cpu`](crate::simd::cpu)).
pub(super) fn collect(
    shared: &Shared,
    state: &State,
    probe: &[usize],
    fps: &[u64],
    k: u32,
    first: bool,
    scratch: &mut Scratch,
) -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::cpu::fast_bits() {
        // SAFETY: `fast_bits` checked that this processor has every
        // feature `collect_fast_bits` is compiled for.
        return unsafe { collect_fast_bits(shared, state, probe, fps, k, first, scratch) };
    }
    collect_portable(shared, state, probe, fps, k, first, scratch)
}

/// [`collect_portable`] compiled for POPCNT, BMI1, BMI2 and LZCNT.
///
/// # Safety
/// The processor must have those features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,bmi1,bmi2,lzcnt")]
unsafe fn collect_fast_bits(
    shared: &Shared,
    state: &State,
    probe: &[usize],
    fps: &[u64],
    k: u32,
    first: bool,
    scratch: &mut Scratch,
) -> Result<()> {
    collect_portable(shared, state, probe, fps, k, first, scratch)
}

/// [`collect`] for any processor; inlined into each compiled copy.
#[inline(always)]
fn collect_portable(
    shared: &Shared,
    state: &State,
    probe: &[usize],
    fps: &[u64],
    k: u32,
    first: bool,
    scratch: &mut Scratch,
) -> Result<()> {
    let Scratch {
        levels,
        found,
        work,
        ..
    } = scratch;
    // Every level's tables, level 0 (and the pending fingerprints) first.
    state.probes_into(probe, levels);
    let probe = &levels[..];
    if let Some(header) = shared.plan.header_bits() {
        // One table: every header within k bits of the query's.
        let k8 = k.min(8) as u8;
        let masks = |_| vosh::exact(header, k8);
        return collect_flipped(shared, state, probe, fps, masks, k, first, work, found);
    }
    if first && probe.len() > 1 {
        return collect_first(shared, state, probe, fps, k, work, found);
    }
    let probes = &mut work.probes;
    probes.clear();
    for &fp in fps {
        for &t in probe {
            probes.push(Probe::new(shared, state, t, fp));
        }
    }
    run_stages(state, probes);
    if probe.is_empty() {
        for _ in fps {
            found.end_query();
        }
        return Ok(());
    }
    // Loops, not closures: a closure is not compiled for the target
    // features of the function around it.
    for tables in probes.chunks(probe.len()) {
        scan_probes(shared, state, tables, k, first, &mut found.hits)?;
        found.end_query();
    }
    Ok(())
}

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
const FIRST_FLIP_PASS: usize = 128;

/// How much larger each pass of a first-match query on a one-table store
/// is than the one before.
const FIRST_FLIP_GROWTH: usize = 4;

/// The most headers one pass of a one-table query probes: a pass holds
/// its masks, headers and probes in memory, and an exact query with a
/// wide header and a large distance flips millions of sets (40 header
/// bits at `k = 8`: 118 million), so its passes are cut to this size.
const FLIP_PASS_MAX: usize = 16_384;

/// [`collect_flipped`], in the copy compiled for the processor's bit
/// instructions when it has them (as [`collect`] does): a probe of a
/// header's run selects in the run's bit vector and counts bits.
#[allow(clippy::too_many_arguments)]
fn collect_flipped_fast<M: Iterator<Item = u64>>(
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
unsafe fn collect_flipped_fast_bits<M: Iterator<Item = u64>>(
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

/// [`collect`] on a one-table store: for the `i`-th query, the run of
/// every header `masks(i)` flips (the unflipped header being mask 0) in
/// each level's table, the distance always taken to the query itself.
/// With `first`, in passes growing from [`FIRST_FLIP_PASS`], the likeliest
/// flips first. When level 0's table is read flat, the first pass of
/// every query in `fps` goes through its stages together (see
/// [`stage_flat`]); the probes of one query's later passes, and of the
/// other levels, are staged query by query.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn collect_flipped<M: Iterator<Item = u64>>(
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
struct Query {
    fp: u64,
    k: u32,
    first: bool,
}

/// Buffers the probes of a group of queries reuse.
#[derive(Default)]
pub(super) struct Work {
    part: Vec<u64>,
    probes: Vec<Probe>,
    heads: Vec<(u64, FlatStart)>,
    staged: Staged,
    /// First-match passes: the queries still open, and each query's match.
    open: Vec<usize>,
    firsts: Vec<Option<(u64, u32)>>,
}

impl Scratch {
    /// The bytes its buffers hold room for.
    pub(super) fn capacity_bytes(&self) -> usize {
        let w = &self.work;
        let held = [
            bytes(&self.levels),
            bytes(&self.found.hits),
            bytes(&self.found.ends),
            bytes(&self.fps),
            bytes(&self.spans),
            bytes(&w.part),
            bytes(&w.probes),
            bytes(&w.heads),
            bytes(&w.staged.masks),
            bytes(&w.staged.heads),
            bytes(&w.staged.ends),
            bytes(&w.open),
            bytes(&w.firsts),
        ];
        held.iter().sum()
    }
}

/// The bytes `v` holds room for.
pub(super) fn bytes<T>(v: &Vec<T>) -> usize {
    v.capacity() * std::mem::size_of::<T>()
}

/// Buffers the queries of [`Answers`] reuse from one group to the next.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The tables probed, of every level.
    levels: Vec<usize>,
    /// The group's candidates.
    pub(super) found: Candidates,
    pub(super) work: Work,
    /// The fingerprints whose ids are looked up, and for each where its
    /// ids end and how many it has.
    fps: Vec<u64>,
    spans: Vec<(usize, usize)>,
}

/// The first passes of a group of queries, staged together: every
/// query's masks and headers, one query after the other, and where each
/// query's ones end.
#[derive(Default)]
struct Staged {
    masks: Vec<u64>,
    heads: Vec<(u64, FlatStart)>,
    ends: Vec<usize>,
}

/// Headers staged together at most, give or take one query's: enough
/// for a few queries' cache misses to overlap, few enough for what the
/// first stages bring in to stay cached until the last reads it (an
/// exhaustive query alone has thousands).
const STAGED_HEADS: usize = 256;

/// Takes up to `pass` masks (at most [`FLIP_PASS_MAX`]) of each query
/// from `fps[begin]` on (the `i`-th query's from `masks(i)`, kept in
/// `sources`, which starts afresh), until about [`STAGED_HEADS`] headers
/// are staged, and runs the flat probe's three stages (sample, bit vector, run start) for all of
/// them together, one stage for all before the next: the queries' cache
/// misses overlap with each other and with the flip sets still being
/// listed, rather than each query waiting three times for its own.
/// Returns the end of the queries staged.
#[allow(clippy::too_many_arguments)]
fn stage_flat<M: Iterator<Item = u64>>(
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
fn sampled_head(flat: &crate::table::Flat, x: u64) -> (u64, FlatStart) {
    let header = flat.header(x);
    flat.touch_sample(header);
    (header, FlatStart::default())
}

/// The flat probe's second and third stages for `heads`, whose samples
/// were asked for: their bit vector's words asked for, then each run's
/// start found (and its first low part asked for).
#[inline(always)]
fn find_starts(flat: &crate::table::Flat, heads: &mut [(u64, FlatStart)]) {
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
fn probe_passes<M: Iterator<Item = u64>>(
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
fn probe_levels(
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
fn scan_flat(
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
fn scan_heads(
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

/// Probes in flight that a first-match pass aims for: a pass takes as
/// many tables as needed for its open queries to make about this many.
const FIRST_IN_FLIGHT: usize = 8;

/// [`collect`] with `first`: the tables are probed in passes, each for
/// the queries no earlier pass found a match for, so a query answered
/// by its first table costs no other table's probe. A pass takes one
/// table when enough queries are open to keep [`FIRST_IN_FLIGHT`] probes'
/// cache misses overlapping, more tables when fewer are (all of them for
/// a lone query, as [`collect`] without `first` does).
#[inline(always)]
fn collect_first(
    shared: &Shared,
    state: &State,
    probe: &[usize],
    fps: &[u64],
    k: u32,
    work: &mut Work,
    found: &mut Candidates,
) -> Result<()> {
    let Work {
        probes,
        open,
        firsts,
        ..
    } = work;
    firsts.clear();
    firsts.resize(fps.len(), None);
    open.clear();
    open.extend(0..fps.len());
    let mut tables = probe;
    while !tables.is_empty() && !open.is_empty() {
        let take = FIRST_IN_FLIGHT.div_ceil(open.len()).clamp(1, tables.len());
        let (pass, rest) = tables.split_at(take);
        tables = rest;
        probes.clear();
        for &i in open.iter() {
            for &t in pass {
                probes.push(Probe::new(shared, state, t, fps[i]));
            }
        }
        run_stages(state, probes);
        let mut still = 0;
        for n in 0..open.len() {
            let i = open[n];
            // A first-match scan stops at its first candidate.
            let hits = &mut found.hits;
            let before = hits.len();
            scan_probes(shared, state, &probes[n * take..][..take], k, true, hits)?;
            firsts[i] = hits.get(before).copied();
            hits.truncate(before);
            if firsts[i].is_none() {
                open[still] = i;
                still += 1;
            }
        }
        open.truncate(still);
    }
    for f in firsts.iter() {
        found.hits.extend(f);
        found.end_query();
    }
    Ok(())
}

/// Runs the probing stages (the block keys to search, the block, its
/// slot and the run's memory, the run's start; for level 0's tables, the
/// directory entries and values of the pending runs and of the upper
/// levels' runs too) for every probe, each stage for all before the
/// next, so the cache misses of a stage overlap (merging two stages'
/// loops measurably loses that overlap); the runs are then scanned query
/// by query.
#[inline(always)]
fn run_stages(state: &State, probes: &mut [Probe]) {
    // Level 0's tables carry the probes of the runs.
    let pending = (state.pending.len() > 0).then_some(&state.pending);
    let upper = state.upper.as_deref().filter(|u| u.len() > 0);
    let runs = [pending, upper];
    for p in probes.iter_mut() {
        p.block = state.tables[p.t].probe_block(p.keys.clone(), p.lo, p.hi);
        if p.t < state.per_level {
            runs.iter()
                .flatten()
                .for_each(|r| r.touch_directory(p.t, (p.lo, p.hi)));
        }
    }
    for p in probes.iter() {
        state.tables[p.t].probe_touch(p.block, p.lo, p.hi);
        if p.t < state.per_level {
            runs.iter()
                .flatten()
                .for_each(|r| r.touch_values(p.t, (p.lo, p.hi)));
        }
    }
    for p in probes.iter_mut() {
        p.start = Some(state.tables[p.t].probe_start_at(p.block, p.lo));
    }
}

/// One query's candidates from its probes (one a table), stages done.
#[inline(always)]
fn scan_probes(
    shared: &Shared,
    state: &State,
    probes: &[Probe],
    k: u32,
    first: bool,
    found: &mut Vec<(u64, u32)>,
) -> Result<()> {
    let before = found.len();
    for &Probe {
        t,
        q,
        lo,
        hi,
        start,
        ..
    } in probes
    {
        let spec = &shared.plan.tables()[t % state.per_level];
        let Some(start) = start else { continue };
        // Pending fingerprints and the upper levels' are probed with level
        // 0's tables.
        if t < state.per_level && scan_runs(spec, state, t, (lo, hi), q, k, first, found) {
            return Ok(());
        }
        // The distance test runs inside the decoding loop; the rare near
        // value comes out to be recorded.
        state.tables[t].scan_near(start, lo, hi, q, k, |p, d| {
            !accept(spec, state, p, d, found) || !first
        })?;
        if first && found.len() > before {
            return Ok(());
        }
    }
    Ok(())
}

/// Table `t` of level 0's share of the pending fingerprints' runs and of
/// the upper levels' set: its values in `lo..=hi` within `k` of `q` into
/// `found`; returns whether `first` stopped the scan at one.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn scan_runs(
    spec: &crate::plan::TableSpec,
    state: &State,
    t: usize,
    range: (u64, u64),
    q: u64,
    k: u32,
    first: bool,
    found: &mut Vec<(u64, u32)>,
) -> bool {
    if state.pending.len() > 0 {
        let stopped = state.pending.near(t, range, q, k, |p, d| {
            found.push((spec.permutation.invert(p), d));
            !first
        });
        if stopped {
            return true;
        }
    }
    match state.upper.as_deref() {
        Some(upper) if upper.len() > 0 => upper.near(t, range, q, k, |p, d| {
            !accept(spec, state, p, d, found) || !first
        }),
        _ => false,
    }
}

/// One table's probe of a query, filled in stage by stage.
struct Probe {
    t: usize,
    q: u64,
    lo: u64,
    hi: u64,
    keys: std::ops::Range<usize>,
    block: usize,
    start: Option<ProbeStart>,
}

impl Probe {
    /// Table `t`'s probe for `fp` (`t` numbering the tables of every
    /// level), its first stage (the block keys to search) done.
    #[inline(always)]
    fn new(shared: &Shared, state: &State, t: usize, fp: u64) -> Self {
        Self::flipped(shared, state, t, fp, 0)
    }

    /// [`new`](Self::new) for the run of the permuted query's prefix with
    /// the bits of `mask` flipped (a one-table store's header flips),
    /// distances still taken to the query.
    #[inline(always)]
    fn flipped(shared: &Shared, state: &State, t: usize, fp: u64, mask: u64) -> Self {
        let spec = &shared.plan.tables()[t % state.per_level];
        let q = spec.permutation.apply(fp);
        let (lo, hi) = spec.prefix_range(q ^ mask);
        Probe {
            t,
            q,
            lo,
            hi,
            keys: state.tables[t].probe_keys(lo),
            block: 0,
            start: None,
        }
    }
}

/// Records the permuted fingerprint `p` at distance `d` unless it is
/// deleted; returns whether it was recorded.
#[cold]
#[inline(never)]
fn accept(
    spec: &crate::plan::TableSpec,
    state: &State,
    p: u64,
    d: u32,
    found: &mut Vec<(u64, u32)>,
) -> bool {
    let x = spec.permutation.invert(p);
    if state.tombstones.contains(&x) {
        return false;
    }
    found.push((x, d));
    true
}

/// Leaves in `found` (candidates `(fingerprint, distance)`, repeated as
/// the tables found them) the distinct ones at the distances of the
/// nearest `n`, sorted by distance then fingerprint: grouped by distance
/// first, so that only the groups kept are sorted (a query among
/// thousands of near fingerprints, pages of one template, sorts the
/// nearest few).
fn nearest(found: &mut Vec<(u64, u32)>, n: usize) {
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
pub(super) fn finish_all(
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
pub(super) fn finish_into(
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
fn finish_group(
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
fn push_found(matches: &mut Vec<Found>, near: &[(u64, u32)]) {
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
fn dedup_sorted<T: PartialEq + Copy>(v: &mut [T]) -> usize {
    let mut kept = 0;
    for i in 0..v.len() {
        if i == 0 || v[i] != v[kept - 1] {
            v[kept] = v[i];
            kept += 1;
        }
    }
    kept
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
/// passes (see [`collect_first`]) to probe one table at a time while half
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
/// buffers' [`Candidates`], which are then finished (sorted, ids attached
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
