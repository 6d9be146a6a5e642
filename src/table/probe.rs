//! The staged probe pipeline: where a probe starts in a table, found in
//! stages that each ask the processor for the memory the next one reads.

use super::{prefetch, Cursor, Held, TableState};
use crate::index;

/// Where a probe starts: see [`TableState::probe_start`].
#[derive(Debug, Clone, Copy)]
pub struct ProbeStart {
    pub(super) block: usize,
    /// In a packed block, where its first value at or above the probe's
    /// low end is (encoded blocks are read from their start).
    pub(super) from: Cursor,
}

impl TableState {
    /// Where a probe for `lo..=hi` starts: its block and, in a packed
    /// block, where the first value at or above `lo` is. The stages
    /// ([`probe_keys`](Self::probe_keys),
    /// [`probe_block`](Self::probe_block),
    /// [`probe_touch`](Self::probe_touch),
    /// [`probe_start_at`](Self::probe_start_at)) each start the memory
    /// reads the next one needs; a caller probing several tables runs each
    /// stage for all of them before the next, so their cache misses overlap
    /// instead of queuing. The stages are always inlined, so their bit
    /// operations are compiled for the caller's target features (see
    /// [`cpu`](crate::simd::cpu)).
    #[inline]
    pub fn probe_start(&self, lo: u64, hi: u64) -> ProbeStart {
        let keys = self.probe_keys(lo);
        let block = self.probe_block(keys, lo, hi);
        self.probe_touch(block, lo, hi);
        self.probe_start_at(block, lo)
    }

    /// Stage 0 of a probe: the range of block keys to search for `lo`
    /// (from the directory); asks the processor for those keys.
    #[inline(always)]
    pub fn probe_keys(&self, lo: u64) -> std::ops::Range<usize> {
        let range = self.directory.range(lo);
        let end = range.end.min(self.keys.len());
        prefetch(self.keys.get(range.start.min(end)..end).unwrap_or_default());
        range
    }

    /// Stage 1: the block holding `lo`'s place, searched within `keys`
    /// (from stage 0); asks the processor for that block's slot, and the
    /// next block's when the range `lo..=hi` reaches into it.
    #[inline(always)]
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

    /// Where `x` falls in block `j` by interpolation between its key and
    /// the next block's: an index guess among the block's `count` values.
    #[inline(always)]
    fn guess(&self, j: usize, x: u64, count: usize) -> usize {
        let key = self.keys[j];
        let Some(&next) = self.keys.get(j + 1) else {
            return if x <= key { 0 } else { count / 2 };
        };
        // In integers: the span narrowed to 32 bits, so its product with a
        // block's count (under 2^32) fits a word.
        let span = next.saturating_sub(key).max(1);
        let offset = x.saturating_sub(key).min(span);
        let shift = (64 - span.leading_zeros()).saturating_sub(32);
        let (offset, span) = (offset >> shift, (span >> shift).max(1));
        ((offset * count as u64 / span) as usize).min(count)
    }

    /// Stage 2: asks for the bytes of the block holding the probe's values
    /// from `lo` to `hi` (where they fall by interpolation, a line either
    /// side), and of the next block's when the range reaches into it.
    #[inline(always)]
    pub fn probe_touch(&self, block: usize, lo: u64, hi: u64) {
        let end = block + 1 + usize::from(self.reaches_next(block, hi));
        for j in block..end.min(self.blocks.len()) {
            match self.held(j) {
                Some(Held::Packed(p)) => {
                    let n = p.len();
                    let from = if j == block { self.guess(j, lo, n) } else { 0 };
                    let to = self.guess(j, hi, n).saturating_add(2).min(n);
                    let (upper, lower) = p.regions(from.saturating_sub(2), to);
                    prefetch(upper);
                    prefetch(lower);
                }
                Some(Held::Encoded { bytes, .. }) => prefetch(bytes.get(..1).unwrap_or_default()),
                Some(Held::Corrupt(_)) | None => {}
            }
        }
    }

    /// Stage 3: in a packed block, finds the first value at or above `lo`.
    #[inline(always)]
    pub fn probe_start_at(&self, block: usize, lo: u64) -> ProbeStart {
        // A block not read yet is read now: a scan from a packed block's
        // start would also visit its values below `lo`. (When the read
        // fails, the scan reads it again and reports the error.)
        let held = match self.blocks.get(block).map(|b| b.held.get()) {
            Some(None) if self.storage.memory => self.read_lazy(block).ok(),
            held => held.flatten(),
        };
        let from = match held {
            Some(Held::Packed(p)) => p.lower_bound(lo),
            _ => Cursor::START,
        };
        ProbeStart { block, from }
    }
}
