//! Candidates from the permuted tables: a group of queries' probes
//! staged together, all matches or first matches.

use super::flipped::collect_flipped;
use super::probes::{run_stages, scan_probes, Probe};
use super::scratch::{Scratch, Work};
use crate::error::Result;
use crate::plan::vosh;
use crate::store::answers::Candidates;
use crate::store::shared::Shared;
use crate::store::state::State;

/// For each of `fps`, the candidates `(fingerprint, distance)` within `k`
/// of it, unsorted and possibly repeated (with `first`, at most one a
/// query), appended to `scratch.found`, one query after the other. Runs
/// the copy of the loop compiled for the processor's bit instructions
/// when it has them (see [`cpu`](crate::simd::cpu)).
pub(in crate::store) fn collect(
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
pub(super) unsafe fn collect_fast_bits(
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
pub(super) fn collect_portable(
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

/// Probes in flight that a first-match pass aims for: a pass takes as
/// many tables as needed for its open queries to make about this many.
pub(super) const FIRST_IN_FLIGHT: usize = 8;

/// [`collect`] with `first`: the tables are probed in passes, each for
/// the queries no earlier pass found a match for, so a query answered
/// by its first table costs no other table's probe. A pass takes one
/// table when enough queries are open to keep [`FIRST_IN_FLIGHT`] probes'
/// cache misses overlapping, more tables when fewer are (all of them for
/// a lone query, as [`collect`] without `first` does).
#[inline(always)]
pub(super) fn collect_first(
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
