//! One permuted table held in memory: its block keys (the block index),
//! its compressed blocks and its codes. Pure: the store layer loads it from
//! and persists it to RocksDB.

mod codes;
mod marks;
mod merge;

use std::collections::VecDeque;
use std::sync::Arc;

use zerocopy::FromBytes;

pub use codes::Codebook;
pub use merge::{merge, MergeOutput};

use crate::codec::{
    sweep_stretches, BlockHeader, BlockView, Code, LaneVisit, ResumePoint, Visit, MIN_BLOCK_LEN,
};
use crate::error::{Error, Result};
use crate::index;

/// Where a table's blocks are read from when they are not held in memory
/// (a store whose tables exceed its memory budget).
pub trait BlockSource: Send + Sync + std::fmt::Debug {
    /// The stored bytes of table `table`'s block with key `key`.
    fn fetch(&self, table: usize, key: u64) -> Result<Arc<[u8]>>;
}

/// A block's bytes: borrowed from memory or fetched from its source.
enum Bytes<'a> {
    Held(&'a [u8]),
    Fetched(Arc<[u8]>),
}

impl std::ops::Deref for Bytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Held(b) => b,
            Bytes::Fetched(b) => b,
        }
    }
}

/// An immutable snapshot of one table. Compaction builds a new snapshot
/// (sharing unchanged blocks) and swaps it in, so a query never sees a
/// half-merged table.
#[derive(Debug, Clone)]
pub struct TableState {
    number: usize,
    keys: Vec<u64>,
    /// Narrows block lookups (memory only, derived from `keys`).
    directory: index::Directory,
    /// One entry per block, in key order: what a probe reads, together.
    blocks: Vec<Slot>,
    codes: Arc<Codebook>,
    fingerprints: u64,
    /// Where blocks not held in memory are read from (`None`: every block
    /// is held).
    source: Option<Arc<dyn BlockSource>>,
}

impl TableState {
    /// A table from its blocks in key order, as read from disk: every
    /// block's CRC is checked once here (a failed block reports the
    /// mismatch whenever it is read). Counts come from the block headers.
    pub fn new(
        number: usize,
        keys: Vec<u64>,
        blocks: Vec<Arc<[u8]>>,
        codes: Arc<Codebook>,
    ) -> Self {
        let blocks = blocks
            .into_iter()
            .map(|bytes| Slot {
                verified: BlockView::parse(&bytes).is_ok(),
                len: bytes.len() as u32,
                count: header_count(&bytes),
                bytes: Some(bytes),
                marks: marks::Marks::default(),
            })
            .collect();
        Self::from_slots(number, keys, blocks, codes, None)
    }

    /// A table whose blocks stay on disk: only the keys and each block's
    /// length and fingerprint count (from its header) are held; probes
    /// read blocks from `source`.
    pub fn on_disk(
        number: usize,
        keys: Vec<u64>,
        sizes: Vec<(u32, u16)>,
        codes: Arc<Codebook>,
        source: Arc<dyn BlockSource>,
    ) -> Self {
        let blocks = sizes
            .into_iter()
            .map(|(len, count)| Slot {
                bytes: None,
                len,
                count,
                verified: false,
                marks: marks::Marks::default(),
            })
            .collect();
        Self::from_slots(number, keys, blocks, codes, Some(source))
    }

    fn from_slots(
        number: usize,
        keys: Vec<u64>,
        blocks: Vec<Slot>,
        codes: Arc<Codebook>,
        source: Option<Arc<dyn BlockSource>>,
    ) -> Self {
        debug_assert_eq!(blocks.len(), keys.len());
        let fingerprints = blocks.iter().map(|b| u64::from(b.count)).sum();
        Self {
            number,
            directory: index::Directory::new(&keys),
            keys,
            blocks,
            codes,
            fingerprints,
            source,
        }
    }

    /// Whether every block is held in memory (otherwise probes read blocks
    /// through the table's source).
    pub fn in_memory(&self) -> bool {
        self.source.is_none()
    }

    /// The table number.
    pub fn number(&self) -> usize {
        self.number
    }

    /// The block keys, in order.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// The encoded blocks held in memory, in key order (all of them
    /// unless the table is on disk).
    pub fn blocks(&self) -> impl Iterator<Item = &Arc<[u8]>> + '_ {
        self.blocks.iter().filter_map(|b| b.bytes.as_ref())
    }

    /// The table's codes.
    pub fn codes(&self) -> &Arc<Codebook> {
        &self.codes
    }

    /// Number of fingerprints, by the block headers.
    pub fn fingerprints(&self) -> u64 {
        self.fingerprints
    }

    /// Bytes of memory held by structures derived from the blocks (resume
    /// points and the block directory; neither is stored on disk).
    pub fn mark_bytes(&self) -> u64 {
        let points: u64 = self
            .blocks
            .iter()
            .map(|b| (b.marks.heap_bytes() + std::mem::size_of::<marks::Marks>()) as u64)
            .sum();
        points + self.directory.heap_bytes() as u64
    }

    /// Total encoded bytes of all blocks, headers included.
    pub fn encoded_bytes(&self) -> u64 {
        self.blocks.iter().map(|b| u64::from(b.len)).sum()
    }

    /// Block `j`'s bytes: borrowed when held, else read from the source.
    #[inline(always)]
    fn bytes(&self, j: usize) -> Result<Bytes<'_>> {
        match (&self.blocks[j].bytes, &self.source) {
            (Some(b), _) => Ok(Bytes::Held(b)),
            (None, Some(source)) => source.fetch(self.number, self.keys[j]).map(Bytes::Fetched),
            (None, None) => Err(self.corrupt(self.keys[j], "block not held and no source".into())),
        }
    }

    /// Parses block `j`'s `bytes` and finds its code, checking its key.
    #[inline(always)]
    fn parse<'b>(&self, j: usize, bytes: &'b [u8]) -> Result<(BlockView<'b>, &Code)> {
        let key = self.keys[j];
        let view = if self.blocks[j].verified {
            BlockView::parse_verified(bytes)
        } else {
            BlockView::parse(bytes)
        }
        .map_err(|e| Error::block(self.number, key, &e))?;
        if view.first() != key {
            return Err(self.corrupt(
                key,
                format!(
                    "first fingerprint {:016x} differs from the key",
                    view.first()
                ),
            ));
        }
        let code = self.codes.get(view.code_id()).ok_or_else(|| {
            self.corrupt(key, format!("unknown Huffman code id {}", view.code_id()))
        })?;
        Ok((view, code))
    }

    fn corrupt(&self, key: u64, reason: String) -> Error {
        Error::corrupt(
            crate::error::Location::Block {
                table: self.number,
                key,
            },
            reason,
        )
    }

    /// Decodes block `j` completely into `out`, checking its padding.
    #[inline(always)]
    pub fn decode_block(&self, j: usize, out: &mut Vec<u64>) -> Result<()> {
        let bytes = self.bytes(j)?;
        let (view, code) = self.parse(j, &bytes)?;
        view.decode_into(code, out)
            .map_err(|e| Error::block(self.number, self.keys[j], &e))
    }

    /// Calls `visit` with every permuted fingerprint in `lo..=hi`, in order,
    /// until it returns `false`. Returns whether the visit was stopped.
    pub fn scan(&self, lo: u64, hi: u64, visit: impl FnMut(u64) -> bool) -> Result<bool> {
        self.scan_from(self.probe_start(lo, hi), lo, hi, visit)
    }

    /// Where a probe for `lo..=hi` starts: its block and, if that block's
    /// resume points are built, the nearest one at or below `lo`. The
    /// stages ([`probe_keys`](Self::probe_keys),
    /// [`probe_block`](Self::probe_block),
    /// [`probe_touch`](Self::probe_touch),
    /// [`probe_start_at`](Self::probe_start_at)) each start the memory
    /// reads the next one needs; a caller probing several tables runs each
    /// stage for all of them before the next, so their cache misses overlap
    /// instead of queuing.
    #[inline]
    pub fn probe_start(&self, lo: u64, hi: u64) -> ProbeStart {
        let keys = self.probe_keys(lo);
        let block = self.probe_block(keys, lo, hi);
        self.probe_touch(block, hi);
        self.probe_start_at(block, lo, hi)
    }

    /// Stage 0 of a probe: the range of block keys to search for `lo`
    /// (from the directory); asks the processor for those keys.
    #[inline]
    pub fn probe_keys(&self, lo: u64) -> std::ops::Range<usize> {
        let range = self.directory.range(lo);
        let end = range.end.min(self.keys.len());
        prefetch(self.keys.get(range.start.min(end)..end).unwrap_or_default());
        range
    }

    /// Stage 1: the block holding `lo`'s place, searched within `keys`
    /// (from stage 0); asks the processor for that block's slot, and the
    /// next block's when the range `lo..=hi` reaches into it.
    #[inline]
    pub fn probe_block(&self, keys: std::ops::Range<usize>, lo: u64, hi: u64) -> usize {
        let block = index::locate_within(&self.keys, keys, lo).unwrap_or(0);
        let end = block + 1 + usize::from(self.reaches_next(block, hi));
        prefetch(self.blocks.get(block..end).unwrap_or_default());
        block
    }

    /// Whether a range ending at `hi` that starts in block `j` reaches
    /// into block `j + 1`.
    #[inline(always)]
    fn reaches_next(&self, j: usize, hi: u64) -> bool {
        self.keys.get(j + 1).is_some_and(|&next| next <= hi)
    }

    /// Stage 2: asks for the resume points and first bytes of the block
    /// (and of the next, when the range reaches into it).
    #[inline]
    pub fn probe_touch(&self, block: usize, hi: u64) {
        let end = block + 1 + usize::from(self.reaches_next(block, hi));
        for (slot, &key) in self
            .blocks
            .get(block..end)
            .unwrap_or_default()
            .iter()
            .zip(&self.keys[block..])
        {
            if let Some(points) = slot.marks.built(key) {
                prefetch(points.words());
            }
            if let Some(bytes) = &slot.bytes {
                prefetch(bytes.get(..1).unwrap_or_default());
            }
        }
    }

    /// Stage 3: finds the resume point and asks for the bytes the probe
    /// will decode (up to where `hi` falls by interpolation between the
    /// block keys, into at most one more block).
    #[inline]
    pub fn probe_start_at(&self, block: usize, lo: u64, hi: u64) -> ProbeStart {
        let point = self
            .blocks
            .get(block)
            .and_then(|slot| point_at(slot.marks.built(self.keys[block])?, lo));
        let mut from = point.map_or(0, |p| MIN_BLOCK_LEN + p.bit as usize / 8);
        for j in block..block + 2 {
            let Some(slot) = self.blocks.get(j) else {
                break;
            };
            let Some(bytes) = &slot.bytes else {
                break;
            };
            let len = bytes.len();
            let end = match self.keys.get(j + 1) {
                Some(&next) if next <= hi => len,
                Some(&next) => {
                    let key = self.keys[j];
                    let fraction = hi.saturating_sub(key) as f64 / (next - key).max(1) as f64;
                    let stream = len.saturating_sub(MIN_BLOCK_LEN) as f64;
                    MIN_BLOCK_LEN + (fraction.min(1.0) * stream) as usize + 64
                }
                None => len,
            };
            prefetch(bytes.get(from..end.min(len)).unwrap_or_default());
            if end < len || self.keys.get(j + 1).is_none_or(|&next| next > hi) {
                break;
            }
            from = 0;
        }
        ProbeStart { block, point }
    }

    /// Builds the resume points of every block that has none yet, stopping
    /// early when `stop` becomes true. Blocks that fail to parse are left
    /// alone (their readers report the error).
    pub fn build_marks(&self, stop: &std::sync::atomic::AtomicBool) {
        for j in 0..self.blocks.len() {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            // Points are kept only for blocks held in memory.
            let Some(bytes) = &self.blocks[j].bytes else {
                continue;
            };
            if let Ok((view, code)) = self.parse(j, bytes) {
                self.blocks[j].marks.build_now(&view, code);
            }
        }
    }

    /// [`scan`](Self::scan) from `start`, which must be
    /// [`probe_start(lo, hi)`](Self::probe_start). Always inlined, so the
    /// decoding loop is compiled for the caller's target features.
    #[inline(always)]
    pub fn scan_from(
        &self,
        start: ProbeStart,
        lo: u64,
        hi: u64,
        mut visit: impl FnMut(u64) -> bool,
    ) -> Result<bool> {
        for j in start.block..self.keys.len() {
            if self.keys[j] > hi {
                break;
            }
            let bytes = self.bytes(j)?;
            let (view, code) = self.parse(j, &bytes)?;
            let point = self.first_point(j, &view, code, start, lo);
            match self.scan_block(j, &view, code, point, lo, hi, &mut visit)? {
                Visit::Exhausted => {}
                Visit::PastEnd => return Ok(false),
                Visit::Stopped => return Ok(true),
            }
        }
        Ok(false)
    }

    /// Calls `near(v, d)` for the stored permuted fingerprints `v` in
    /// `lo..=hi` at distance `d <= k` from `q`, until it returns `false`
    /// (then `true`: stopped early). It may also report stored values near
    /// that range (any value within `k` of `q` is a match whatever its
    /// range), some twice, not in order. In blocks whose resume points were
    /// built by a clean decode it sweeps the stretches between them four at
    /// a time ([`sweep_stretches`](crate::codec::sweep_stretches)); other
    /// blocks are decoded in order by the checked decoder.
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
            let bytes = self.bytes(j)?;
            let (view, code) = self.parse(j, &bytes)?;
            let first_block = j == start.block;
            // Only blocks that decoded cleanly when their points were
            // built are swept (the sweep's precondition).
            let visited = match self.blocks[j].marks.clean(view.first()) {
                Some(points) => {
                    // Stretch `m` holds the values after point `m - 1`
                    // up to and including point `m`.
                    let from = if first_block {
                        points.partition_point(|fp| fp < lo)
                    } else {
                        0
                    };
                    let to = points.partition_point(|fp| fp <= hi);
                    if from == 0 && !within(q, k, &mut near)(view.first()) {
                        return Ok(true);
                    }
                    let stretch = |m: usize| match m.checked_sub(1) {
                        None => Some(view.lane(marks::STRIDE - 1)),
                        Some(p) => view.lane_from(points.point(p)?, marks::STRIDE),
                    };
                    let stream = view.stream_bytes();
                    match sweep_stretches(stream, code, stretch, from, to, q, k, &mut near) {
                        LaneVisit::Done => Visit::Exhausted,
                        LaneVisit::Stopped => Visit::Stopped,
                        // Decode the stretch again with the checked
                        // iterator, which reports an error if there is one.
                        LaneVisit::Careful => {
                            let point = from.checked_sub(1).and_then(|m| points.point(m));
                            let mut visit = within(q, k, &mut near);
                            self.scan_block(j, &view, code, point, lo, hi, &mut visit)?
                        }
                    }
                }
                None => {
                    let point = self.first_point(j, &view, code, start, lo);
                    let mut visit = within(q, k, &mut near);
                    self.scan_block(j, &view, code, point, lo, hi, &mut visit)?
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

    /// Where an in-order scan of block `j` starts decoding: in the probe's
    /// first block, the resume point at or below `lo` (found by the probe,
    /// or now, counting this read towards building the block's points);
    /// elsewhere the block's start.
    fn first_point(
        &self,
        j: usize,
        view: &BlockView<'_>,
        code: &Code,
        start: ProbeStart,
        lo: u64,
    ) -> Option<ResumePoint> {
        if j != start.block {
            return None;
        }
        // Points are kept only for blocks held in memory.
        self.blocks[j].bytes.as_ref()?;
        start
            .point
            .or_else(|| point_at(self.blocks[j].marks.get(view, code)?, lo))
    }

    /// Visits `lo..=hi` within block `j` in order, decoding from `point`
    /// (or the block's start).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn scan_block(
        &self,
        j: usize,
        view: &BlockView<'_>,
        code: &Code,
        point: Option<ResumePoint>,
        lo: u64,
        hi: u64,
        visit: &mut impl FnMut(u64) -> bool,
    ) -> Result<Visit> {
        let mut iter = match point {
            Some(point) => view.iter_from(code, point),
            None => view.iter(code),
        };
        iter.visit_range(lo, hi, visit)
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
        for (r, &(lo, hi)) in ranges.iter().enumerate() {
            let start = self.directory.locate(&self.keys, lo).unwrap_or(0);
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

    /// Whether the table holds this permuted fingerprint.
    pub fn contains(&self, permuted: u64) -> Result<bool> {
        let mut found = false;
        self.scan(permuted, permuted, |_| {
            found = true;
            false
        })?;
        Ok(found)
    }
}

/// Where a probe starts: see [`TableState::probe_start`].
#[derive(Debug, Clone, Copy)]
pub struct ProbeStart {
    block: usize,
    point: Option<ResumePoint>,
}

/// The resume point at or below `lo`, if any.
fn point_at(points: marks::Points<'_>, lo: u64) -> Option<ResumePoint> {
    let m = points.partition_point(|fp| fp <= lo).checked_sub(1)?;
    points.point(m)
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

/// Asks the processor to bring `items` into cache, without waiting.
#[inline(always)]
pub(crate) fn prefetch<T>(items: &[T]) {
    let start = items.as_ptr().cast::<u8>();
    let len = std::mem::size_of_val(items);
    let line = |at: usize| {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 processor
        // has; a prefetch is only a hint and never faults.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                start.wrapping_add(at).cast(),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    };
    let mut at = 0;
    while at < len {
        line(at);
        at += 64;
    }
    // The last line, when the range does not start on a line boundary.
    if len > 0 {
        line(len - 1);
    }
}

/// A block as a table holds it in memory.
#[derive(Debug, Clone)]
struct Slot {
    /// The encoded block, exactly as stored; `None` when the table is on
    /// disk (its source holds it).
    bytes: Option<Arc<[u8]>>,
    /// Its length in bytes.
    len: u32,
    /// Its fingerprint count (by its header; 0 when unreadable).
    count: u16,
    /// Its CRC matched when it came into memory, so queries need not
    /// recompute it. A block that failed keeps failing, with the checksum
    /// error, whenever it is read.
    verified: bool,
    /// Resume points for probes (memory only).
    marks: marks::Marks,
}

/// The fingerprint count in a block header, 0 when the header is unreadable.
pub(crate) fn header_count(block: &[u8]) -> u16 {
    BlockHeader::read_from_prefix(block).map_or(0, |(h, _)| h.count.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random values, half of them packed into dense runs.
    fn values(n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed;
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = x ^ (x >> 29);
            out.push(v);
            if x.is_multiple_of(2) {
                out.extend((1..(x >> 58)).map(|d| v.wrapping_add(d)));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    fn scanned(t: &TableState, lo: u64, hi: u64) -> Vec<u64> {
        let mut got = Vec::new();
        t.scan(lo, hi, |v| {
            got.push(v);
            true
        })
        .unwrap();
        // The near scan with a distance reaching everything reports the
        // same values, perhaps with stored neighbours outside the range and
        // repeats; with distance 3 from a value in the range, exactly the
        // range's values within 3 of it, perhaps with stored others.
        let mut unordered = Vec::new();
        t.scan_near(t.probe_start(lo, hi), lo, hi, lo, 64, |v, d| {
            assert_eq!(d, (v ^ lo).count_ones());
            unordered.push(v);
            true
        })
        .unwrap();
        let q = got.get(got.len() / 2).map_or(lo, |&v| v ^ 0b101);
        let mut near = Vec::new();
        t.scan_near(t.probe_start(lo, hi), lo, hi, q, 3, |v, d| {
            assert!(d <= 3 && d == (v ^ q).count_ones());
            near.push(v);
            true
        })
        .unwrap();
        for &v in unordered.iter().chain(&near) {
            assert!(t.contains(v).unwrap(), "near scan made up {v:x}");
        }
        near.retain(|&v| v >= lo && v <= hi);
        near.sort_unstable();
        near.dedup();
        let want: Vec<u64> = got
            .iter()
            .copied()
            .filter(|v| (v ^ q).count_ones() <= 3)
            .collect();
        assert_eq!(near, want, "near scan of {lo:x}..={hi:x} around {q:x}");
        unordered.sort_unstable();
        unordered.dedup();
        unordered.retain(|&v| v >= lo && v <= hi);
        assert_eq!(unordered, got, "near scan of {lo:x}..={hi:x}");
        got
    }

    /// `fps` in 1 KB blocks under a flat code: the code, the blocks and
    /// their keys.
    fn encoded(fps: &[u64]) -> (Code, Vec<Vec<u8>>, Vec<u64>) {
        let code = Code::from_counts(&[1; crate::codec::SYMBOLS]);
        let blocks = crate::codec::encode_blocks(fps, &code, 0, 1024).unwrap();
        let mut keys = Vec::new();
        let mut at = 0;
        for b in &blocks {
            keys.push(fps[at]);
            at += usize::from(header_count(b));
        }
        (code, blocks, keys)
    }

    /// Probes read blocks three times (plain, building resume points,
    /// resuming) and after a merge that keeps some blocks' points: every
    /// answer equals a brute-force filter.
    #[test]
    fn scans_with_resume_points_match_brute_force() {
        let mut fps = values(20_000, 7);
        let (code, encoded, keys) = encoded(&fps);
        let blocks = encoded.into_iter().map(Arc::from).collect();
        let mut table =
            TableState::new(0, keys, blocks, Arc::new(Codebook::from_codes([(0, code)])));
        let mut x = 3u64;
        for round in 0..4 {
            for i in 0..3000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                let base = fps[(x >> 33) as usize % fps.len()];
                let width = [0u64, 1, 1 << 20, 1 << 50][i % 4];
                let lo = base.wrapping_sub((x >> 7) % 4);
                let hi = lo.saturating_add(width);
                let expect: Vec<u64> = fps
                    .iter()
                    .copied()
                    .filter(|&v| v >= lo && v <= hi)
                    .collect();
                assert_eq!(
                    scanned(&table, lo, hi),
                    expect,
                    "round {round} probe {lo:x}..={hi:x}"
                );
            }
            assert!(table.mark_bytes() > 0);
            if round == 2 {
                let adds: Vec<u64> = fps
                    .iter()
                    .map(|v| v ^ 1)
                    .filter(|v| fps.binary_search(v).is_err())
                    .step_by(97)
                    .collect();
                let mut adds = adds;
                adds.sort_unstable();
                table = merge(&table, &adds, &[], 1024).unwrap().state;
                let mut all: Vec<u64> = fps.iter().copied().chain(adds).collect();
                all.sort_unstable();
                assert_eq!(scanned(&table, 0, u64::MAX), all);
                fps = all;
            }
        }
    }

    /// A block whose checksum passes but whose stream was damaged (an
    /// encoder bug, not a disk fault: the CRC catches those) is answered as
    /// the checked decoder answers it, once its resume points are built as
    /// before: an error where that decoder fails, its values where it
    /// does not. (The sweep skips the growth check the checked decoder
    /// makes, so it only runs on blocks whose points were built cleanly.)
    #[test]
    fn damaged_streams_are_answered_as_the_checked_decoder_does() {
        let fps = values(6_000, 11);
        let (code, encoded, keys) = encoded(&fps);
        // From block 2 to the end, so every probe reads all of block 2.
        let (lo, hi) = (keys[2], u64::MAX);
        let later: Vec<u64> = fps.iter().copied().filter(|&v| v >= keys[3]).collect();
        let mut errors = 0;
        for flip in (crate::codec::HEADER_LEN + 8..encoded[2].len()).step_by(29) {
            let mut blocks = encoded.clone();
            blocks[2][flip] ^= 0x20;
            crate::codec::block::reseal(&mut blocks[2]);
            let checked: std::result::Result<Vec<u64>, _> =
                BlockView::parse(&blocks[2]).unwrap().iter(&code).collect();
            let blocks = blocks.into_iter().map(Arc::from).collect();
            let codes = Arc::new(Codebook::from_codes([(0, code.clone())]));
            let table = TableState::new(0, keys.clone(), blocks, codes);
            for round in 0..3 {
                let mut got = Vec::new();
                let result = table.scan_near(table.probe_start(lo, hi), lo, hi, lo, 64, |v, _| {
                    got.push(v);
                    true
                });
                match &checked {
                    Err(_) => assert!(result.is_err(), "flip {flip} round {round}: no error"),
                    Ok(values) => {
                        result.unwrap();
                        got.sort_unstable();
                        got.dedup();
                        let mut want: Vec<u64> = values.iter().chain(&later).copied().collect();
                        want.sort_unstable();
                        want.dedup();
                        assert_eq!(got, want, "flip {flip} round {round}");
                    }
                }
            }
            errors += usize::from(checked.is_err());
        }
        assert!(errors > 3, "too few flips the checked decoder rejects");
    }
}
