//! The staged probes of the permuted tables and the scans of their runs.

use crate::error::Result;
use crate::store::shared::Shared;
use crate::store::state::State;
use crate::table::ProbeStart;

/// Runs the probing stages (the block keys to search, the block, its
/// slot and the run's memory, the run's start; for level 0's tables, the
/// directory entries and values of the pending runs and of the upper
/// levels' runs too) for every probe, each stage for all before the
/// next, so the cache misses of a stage overlap (merging two stages'
/// loops measurably loses that overlap); the runs are then scanned query
/// by query.
#[inline(always)]
pub(super) fn run_stages(state: &State, probes: &mut [Probe]) {
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
pub(super) fn scan_probes(
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
pub(super) fn scan_runs(
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
pub(super) struct Probe {
    pub(super) t: usize,
    pub(super) q: u64,
    pub(super) lo: u64,
    pub(super) hi: u64,
    pub(super) keys: std::ops::Range<usize>,
    pub(super) block: usize,
    pub(super) start: Option<ProbeStart>,
}

impl Probe {
    /// Table `t`'s probe for `fp` (`t` numbering the tables of every
    /// level), its first stage (the block keys to search) done.
    #[inline(always)]
    pub(super) fn new(shared: &Shared, state: &State, t: usize, fp: u64) -> Self {
        Self::flipped(shared, state, t, fp, 0)
    }

    /// [`new`](Self::new) for the run of the permuted query's prefix with
    /// the bits of `mask` flipped (a one-table store's header flips),
    /// distances still taken to the query.
    #[inline(always)]
    pub(super) fn flipped(shared: &Shared, state: &State, t: usize, fp: u64, mask: u64) -> Self {
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
pub(super) fn accept(
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
