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

use crate::codec::{BlockHeader, BlockView, Code, Visit};
use crate::error::{Error, Result};
use crate::index;

/// An immutable snapshot of one table. Compaction builds a new snapshot
/// (sharing unchanged blocks) and swaps it in, so a query never sees a
/// half-merged table.
#[derive(Debug, Clone)]
pub struct TableState {
    number: usize,
    keys: Vec<u64>,
    /// One entry per block, in key order: what a probe reads, together.
    blocks: Vec<Slot>,
    codes: Arc<Codebook>,
    fingerprints: u64,
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
                bytes,
                marks: marks::Marks::default(),
            })
            .collect();
        Self::from_slots(number, keys, blocks, codes)
    }

    fn from_slots(number: usize, keys: Vec<u64>, blocks: Vec<Slot>, codes: Arc<Codebook>) -> Self {
        debug_assert_eq!(blocks.len(), keys.len());
        let fingerprints = blocks.iter().map(|b| header_count(&b.bytes)).sum();
        Self {
            number,
            keys,
            blocks,
            codes,
            fingerprints,
        }
    }

    /// The table number.
    pub fn number(&self) -> usize {
        self.number
    }

    /// The block keys, in order.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// The encoded blocks, in key order.
    pub fn blocks(&self) -> impl ExactSizeIterator<Item = &Arc<[u8]>> + '_ {
        self.blocks.iter().map(|b| &b.bytes)
    }

    /// The table's codes.
    pub fn codes(&self) -> &Arc<Codebook> {
        &self.codes
    }

    /// Number of fingerprints, by the block headers.
    pub fn fingerprints(&self) -> u64 {
        self.fingerprints
    }

    /// Bytes of memory held by resume points (not stored on disk).
    pub fn mark_bytes(&self) -> u64 {
        self.blocks
            .iter()
            .map(|b| (b.marks.heap_bytes() + std::mem::size_of::<marks::Marks>()) as u64)
            .sum()
    }

    /// Total encoded bytes of all blocks, headers included.
    pub fn encoded_bytes(&self) -> u64 {
        self.blocks.iter().map(|b| b.bytes.len() as u64).sum()
    }

    /// Parses block `j` and finds its code, checking its key.
    fn view(&self, j: usize) -> Result<(BlockView<'_>, &Code)> {
        let key = self.keys[j];
        let slot = &self.blocks[j];
        let view = if slot.verified {
            BlockView::parse_verified(&slot.bytes)
        } else {
            BlockView::parse(&slot.bytes)
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
    pub fn decode_block(&self, j: usize, out: &mut Vec<u64>) -> Result<()> {
        let (view, code) = self.view(j)?;
        view.decode_into(code, out)
            .map_err(|e| Error::block(self.number, self.keys[j], &e))
    }

    /// Calls `visit` with every permuted fingerprint in `lo..=hi`, in order,
    /// until it returns `false`. Returns whether the visit was stopped.
    pub fn scan(&self, lo: u64, hi: u64, visit: impl FnMut(u64) -> bool) -> Result<bool> {
        self.scan_from(self.probe_start(lo), lo, hi, visit)
    }

    /// The block a probe for `lo..` starts at. Also loads the first bytes
    /// of that block and of its resume points, so that a caller probing
    /// several tables can start all their cache misses before decoding any
    /// (they then overlap instead of queuing).
    #[inline]
    pub fn probe_start(&self, lo: u64) -> usize {
        let j = index::locate(&self.keys, lo).unwrap_or(0);
        if let Some(slot) = self.blocks.get(j) {
            std::hint::black_box(slot.bytes.first().copied());
            std::hint::black_box(slot.marks.first_point());
        }
        j
    }

    /// Builds the resume points of every block that has none yet, stopping
    /// early when `stop` becomes true. Blocks that fail to parse are left
    /// alone (their readers report the error).
    pub fn build_marks(&self, stop: &std::sync::atomic::AtomicBool) {
        for j in 0..self.blocks.len() {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            if let Ok((view, code)) = self.view(j) {
                self.blocks[j].marks.build_now(&view, code);
            }
        }
    }

    /// [`scan`](Self::scan) starting at block `start`, which must be
    /// [`probe_start(lo)`](Self::probe_start). Always inlined, so the
    /// decoding loop is compiled for the caller's target features.
    #[inline(always)]
    pub fn scan_from(
        &self,
        start: usize,
        lo: u64,
        hi: u64,
        mut visit: impl FnMut(u64) -> bool,
    ) -> Result<bool> {
        for j in start..self.keys.len() {
            if self.keys[j] > hi {
                break;
            }
            let (view, code) = self.view(j)?;
            let mut iter = view.iter(code);
            if j == start {
                if let Some(points) = self.blocks[j].marks.get(&view, code) {
                    let m = points.partition_point(|p| p.fingerprint <= lo);
                    if let Some(&point) = m.checked_sub(1).and_then(|m| points.get(m)) {
                        iter = view.iter_from(code, point);
                    }
                }
            }
            match iter
                .visit_range(lo, hi, &mut visit)
                .map_err(|e| Error::block(self.number, self.keys[j], &e))?
            {
                Visit::Exhausted => {}
                Visit::PastEnd => return Ok(false),
                Visit::Stopped => return Ok(true),
            }
        }
        Ok(false)
    }

    /// Visits the permuted fingerprints in each of `ranges` (inclusive,
    /// sorted by their low ends) as `visit(range index, fingerprint)`,
    /// decoding every block at most once for the whole batch (Manku §3.3).
    pub fn scan_sorted(
        &self,
        ranges: &[(u64, u64)],
        mut visit: impl FnMut(usize, u64),
    ) -> Result<()> {
        let mut cache: VecDeque<Vec<u64>> = VecDeque::new();
        let mut spare: Vec<Vec<u64>> = Vec::new();
        let mut cache_start = 0usize;
        for (r, &(lo, hi)) in ranges.iter().enumerate() {
            let start = index::locate(&self.keys, lo).unwrap_or(0);
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
                for &f in &fps[from..] {
                    if f > hi {
                        break;
                    }
                    visit(r, f);
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

/// A block as a table holds it in memory.
#[derive(Debug, Clone)]
struct Slot {
    /// The encoded block, exactly as stored.
    bytes: Arc<[u8]>,
    /// Its CRC matched when it came into memory, so queries need not
    /// recompute it. A block that failed keeps failing, with the checksum
    /// error, whenever it is read.
    verified: bool,
    /// Resume points for probes (memory only).
    marks: marks::Marks,
}

/// The fingerprint count in a block header, 0 when the header is unreadable.
fn header_count(block: &[u8]) -> u64 {
    BlockHeader::read_from_prefix(block).map_or(0, |(h, _)| u64::from(h.count.get()))
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
            if x % 2 == 0 {
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
        got
    }

    /// Probes read blocks three times (plain, building resume points,
    /// resuming) and after a merge that keeps some blocks' points: every
    /// answer equals a brute-force filter.
    #[test]
    fn scans_with_resume_points_match_brute_force() {
        let mut fps = values(20_000, 7);
        let code = Code::from_counts(&[1; crate::codec::SYMBOLS]);
        let encoded = crate::codec::encode_blocks(&fps, &code, 0, 1024).unwrap();
        let mut keys = Vec::new();
        let mut at = 0;
        for b in &encoded {
            keys.push(fps[at]);
            at += header_count(b) as usize;
        }
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
}
