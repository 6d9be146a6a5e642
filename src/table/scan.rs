//! Reading a table's fingerprints: range scans (plain, near a query, and
//! batched over sorted ranges), positions and membership.

use std::collections::VecDeque;

use super::state::Read;
use super::{packed, Cursor, ProbeStart, TableState};
use crate::codec::{BlockView, Code, Visit};
use crate::error::{Error, Result};

impl TableState {
    /// Calls `visit` with every permuted fingerprint in `lo..=hi`, in order,
    /// until it returns `false`. Returns whether the visit was stopped.
    pub fn scan(&self, lo: u64, hi: u64, visit: impl FnMut(u64) -> bool) -> Result<bool> {
        self.scan_from(self.probe_start(lo, hi), lo, hi, visit)
    }

    /// [`scan`](Self::scan) from `start`, which must be
    /// [`probe_start(lo, hi)`](Self::probe_start). Always inlined, so its
    /// loops are compiled for the caller's target features.
    #[inline(always)]
    pub fn scan_from(
        &self,
        start: ProbeStart,
        lo: u64,
        hi: u64,
        mut visit: impl FnMut(u64) -> bool,
    ) -> Result<bool> {
        let mut j = start.block;
        while j < self.keys.len() && self.keys[j] <= hi {
            let visited = match self.read(j)? {
                Read::Packed(p) => {
                    let from = if j == start.block {
                        start.from
                    } else {
                        Cursor::START
                    };
                    packed_visit(p.visit(from, hi, &mut visit))
                }
                Read::Encoded(bytes, verified) => {
                    let (view, code) = self.parse(j, &bytes, verified)?;
                    self.scan_block(j, &view, code, lo, hi, &mut visit)?
                }
            };
            match visited {
                Visit::Exhausted => j += 1,
                Visit::PastEnd => return Ok(false),
                Visit::Stopped => return Ok(true),
            }
        }
        Ok(false)
    }

    /// Calls `near(v, d)` for the stored permuted fingerprints `v` in
    /// `lo..=hi` at distance `d <= k` from `q`, in order, until it returns
    /// `false` (then `true`: stopped early). `start` must be
    /// [`probe_start(lo, hi)`](Self::probe_start). Always inlined, so its
    /// loops are compiled for the caller's target features.
    #[inline(always)]
    pub fn scan_near(
        &self,
        start: ProbeStart,
        lo: u64,
        hi: u64,
        q: u64,
        k: u32,
        mut near: impl FnMut(u64, u32) -> bool,
    ) -> Result<bool> {
        let mut j = start.block;
        while j < self.keys.len() && self.keys[j] <= hi {
            let visited = match self.read(j)? {
                Read::Packed(p) => {
                    let from = if j == start.block {
                        start.from
                    } else {
                        Cursor::START
                    };
                    packed_visit(p.scan_near(from, hi, q, k, &mut near))
                }
                Read::Encoded(bytes, verified) => {
                    let (view, code) = self.parse(j, &bytes, verified)?;
                    let mut visit = within(q, k, &mut near);
                    self.scan_block(j, &view, code, lo, hi, &mut visit)?
                }
            };
            match visited {
                Visit::Exhausted => j += 1,
                Visit::PastEnd => return Ok(false),
                Visit::Stopped => return Ok(true),
            }
        }
        Ok(false)
    }

    /// Visits `lo..=hi` within encoded block `j` in order, decoding from
    /// the block's start.
    #[inline(always)]
    fn scan_block(
        &self,
        j: usize,
        view: &BlockView<'_>,
        code: &Code,
        lo: u64,
        hi: u64,
        visit: &mut impl FnMut(u64) -> bool,
    ) -> Result<Visit> {
        view.iter(code)
            .visit_range(lo, hi, visit)
            .map_err(|e| Error::block(self.number, self.keys[j], &e))
    }

    /// Visits the permuted fingerprints in each of `ranges` (inclusive,
    /// sorted by their low ends) as `visit(range index, run)`, where each
    /// run is the sorted part of one decoded block inside the range,
    /// decoding every block at most once for the whole batch (Manku §3.3).
    /// Always inlined, so its loops are compiled for the caller's target
    /// features.
    #[inline(always)]
    pub fn scan_sorted(
        &self,
        ranges: &[(u64, u64)],
        mut visit: impl FnMut(usize, &[u64]),
    ) -> Result<()> {
        let mut cache: VecDeque<Vec<u64>> = VecDeque::new();
        let mut spare: Vec<Vec<u64>> = Vec::new();
        let mut cache_start = 0usize;
        // The block of the previous range's low end: the next one's is
        // usually that block or one a step or two after it.
        let mut at: Option<usize> = None;
        for (r, &(lo, hi)) in ranges.iter().enumerate() {
            let start = self.sorted_start(at, lo);
            at = Some(start);
            while cache_start < start && !cache.is_empty() {
                spare.extend(cache.pop_front());
                cache_start += 1;
            }
            if cache.is_empty() {
                cache_start = start;
            }
            let mut j = start;
            while j < self.keys.len() && self.keys[j] <= hi {
                if j - cache_start == cache.len() {
                    let mut fps = spare.pop().unwrap_or_default();
                    self.decode_block(j, &mut fps)?;
                    cache.push_back(fps);
                }
                let fps = &cache[j - cache_start];
                let from = fps.partition_point(|&f| f < lo);
                let to = fps.partition_point(|&f| f <= hi);
                if from < to {
                    visit(r, &fps[from..to]);
                }
                j += 1;
            }
        }
        Ok(())
    }

    /// Calls `near(r, v, d)` for each of `ranges` (inclusive, sorted by
    /// their low ends) and each permuted fingerprint `v` in range `r`
    /// within distance `k` of `queries[r]` (`d` the distance), in order.
    /// For a table held in memory: each range is scanned in place in its
    /// packed blocks (by their signatures, as a single query's probe is),
    /// the ranges' blocks found by stepping forward from the previous
    /// range's, and nothing is decoded. Otherwise each stored block is
    /// decoded once for the whole batch ([`scan_sorted`](Self::scan_sorted)).
    /// Always inlined, so its loops are compiled for the caller's target
    /// features.
    #[inline(always)]
    pub fn scan_near_sorted(
        &self,
        ranges: &[(u64, u64)],
        queries: &[u64],
        k: u32,
        mut near: impl FnMut(usize, u64, u32),
    ) -> Result<()> {
        debug_assert_eq!(ranges.len(), queries.len());
        if !self.in_memory() {
            let mut found = Vec::new();
            return self.scan_sorted(ranges, |r, run| {
                found.clear();
                crate::simd::near::near(run, queries[r], k, &mut found);
                for &(v, d) in &found {
                    near(r, v, d);
                }
            });
        }
        let mut at: Option<usize> = None;
        for (r, (&(lo, hi), &q)) in ranges.iter().zip(queries).enumerate() {
            let block = self.sorted_start(at, lo);
            at = Some(block);
            if block >= self.keys.len() {
                continue;
            }
            let from = match self.read(block)? {
                Read::Packed(p) => p.lower_bound(lo),
                Read::Encoded(..) => Cursor::START,
            };
            self.scan_near(ProbeStart { block, from }, lo, hi, q, k, |v, d| {
                near(r, v, d);
                true
            })?;
        }
        Ok(())
    }

    /// The block holding the last key at most `lo` (0 when there is
    /// none), given `from`, that block for a lower `lo` (ranges sorted by
    /// their low ends): a few steps forward from it, or a search.
    #[inline(always)]
    fn sorted_start(&self, from: Option<usize>, lo: u64) -> usize {
        /// Steps forward tried before searching.
        const STEPS: usize = 4;
        if let Some(mut j) = from {
            for _ in 0..STEPS {
                match self.keys.get(j + 1) {
                    Some(&next) if next <= lo => j += 1,
                    _ => return j,
                }
            }
        }
        self.directory.locate(&self.keys, lo).unwrap_or(0)
    }

    /// Where the table holds the permuted fingerprint `x`: its block and
    /// its index among the block's fingerprints; `None` when it does not.
    pub fn position(&self, x: u64) -> Result<Option<(usize, usize)>> {
        self.position_from(self.probe_start(x, x), x)
    }

    /// [`position`](Self::position) of `x` from its probe's start
    /// (`probe_start(x, x)`, or its stages run for several values
    /// together).
    #[inline]
    pub fn position_from(&self, start: ProbeStart, x: u64) -> Result<Option<(usize, usize)>> {
        let j = start.block;
        if self.keys.get(j).is_none_or(|&key| key > x) {
            return Ok(None);
        }
        match self.read(j)? {
            Read::Packed(p) => {
                let mut found = false;
                p.visit(start.from, x, |v| {
                    found = v == x;
                    false
                });
                Ok(found.then(|| (j, start.from.index())))
            }
            Read::Encoded(bytes, verified) => {
                let (view, code) = self.parse(j, &bytes, verified)?;
                let mut values = Vec::with_capacity(view.count());
                view.decode_into(code, &mut values)
                    .map_err(|e| Error::block(self.number, self.keys[j], &e))?;
                Ok(values.binary_search(&x).ok().map(|i| (j, i)))
            }
        }
    }

    /// Asks the processor for what [`contains`](Self::contains) reads
    /// first for `permuted` (its membership filter's words), so that the
    /// look-ups of several fingerprints overlap.
    #[inline]
    pub fn prefetch_contains(&self, permuted: u64) {
        if let Some(filter) = &self.filter {
            filter.prefetch(permuted);
        }
    }

    /// Whether the table holds this permuted fingerprint.
    pub fn contains(&self, permuted: u64) -> Result<bool> {
        if self
            .filter
            .as_ref()
            .is_some_and(|f| !f.may_contain(permuted))
        {
            return Ok(false);
        }
        let mut found = false;
        self.scan(permuted, permuted, |_| {
            found = true;
            false
        })?;
        Ok(found)
    }
}

/// A packed scan's end as the decoder's [`Visit`].
#[inline(always)]
fn packed_visit(scan: packed::Scan) -> Visit {
    match scan {
        packed::Scan::Exhausted => Visit::Exhausted,
        packed::Scan::PastEnd => Visit::PastEnd,
        packed::Scan::Stopped => Visit::Stopped,
    }
}

/// A visitor of every decoded value that passes those within `k` of `q`
/// (with their distance) to `near`.
#[inline(always)]
fn within(q: u64, k: u32, near: &mut impl FnMut(u64, u32) -> bool) -> impl FnMut(u64) -> bool + '_ {
    move |v| {
        let d = (v ^ q).count_ones();
        d > k || near(v, d)
    }
}
