//! One permuted table held in memory: its block keys (the block index),
//! its compressed blocks and its codes. Pure: the store layer loads it from
//! and persists it to RocksDB.

mod codes;
mod merge;

use std::collections::VecDeque;
use std::sync::Arc;

use zerocopy::FromBytes;

pub use codes::Codebook;
pub use merge::{merge, MergeOutput};

use crate::codec::{BlockHeader, BlockView, Code};
use crate::error::{Error, Result};
use crate::index;

/// An immutable snapshot of one table. Compaction builds a new snapshot
/// (sharing unchanged blocks) and swaps it in, so a query never sees a
/// half-merged table.
#[derive(Debug, Clone)]
pub struct TableState {
    number: usize,
    keys: Vec<u64>,
    blocks: Vec<Arc<[u8]>>,
    codes: Arc<Codebook>,
    fingerprints: u64,
}

impl TableState {
    /// A table from its blocks in key order. Counts come from the block
    /// headers; block contents are checked when read.
    pub fn new(
        number: usize,
        keys: Vec<u64>,
        blocks: Vec<Arc<[u8]>>,
        codes: Arc<Codebook>,
    ) -> Self {
        let fingerprints = blocks.iter().map(|b| header_count(b)).sum();
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
    pub fn blocks(&self) -> &[Arc<[u8]>] {
        &self.blocks
    }

    /// The table's codes.
    pub fn codes(&self) -> &Arc<Codebook> {
        &self.codes
    }

    /// Number of fingerprints, by the block headers.
    pub fn fingerprints(&self) -> u64 {
        self.fingerprints
    }

    /// Total encoded bytes of all blocks, headers included.
    pub fn encoded_bytes(&self) -> u64 {
        self.blocks.iter().map(|b| b.len() as u64).sum()
    }

    /// Parses block `j` and finds its code, checking its key.
    fn view(&self, j: usize) -> Result<(BlockView<'_>, &Code)> {
        let key = self.keys[j];
        let view =
            BlockView::parse(&self.blocks[j]).map_err(|e| Error::block(self.number, key, &e))?;
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
    pub fn scan(&self, lo: u64, hi: u64, mut visit: impl FnMut(u64) -> bool) -> Result<bool> {
        let start = index::locate(&self.keys, lo).unwrap_or(0);
        for j in start..self.keys.len() {
            if self.keys[j] > hi {
                break;
            }
            let (view, code) = self.view(j)?;
            for fp in view.iter(code) {
                let fp = fp.map_err(|e| Error::block(self.number, self.keys[j], &e))?;
                if fp < lo {
                    continue;
                }
                if fp > hi || !visit(fp) {
                    return Ok(fp <= hi);
                }
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
        let mut cache_start = 0usize;
        for (r, &(lo, hi)) in ranges.iter().enumerate() {
            let start = index::locate(&self.keys, lo).unwrap_or(0);
            while cache_start < start && !cache.is_empty() {
                cache.pop_front();
                cache_start += 1;
            }
            if cache.is_empty() {
                cache_start = start;
            }
            let mut j = start;
            while j < self.keys.len() && self.keys[j] <= hi {
                if j - cache_start == cache.len() {
                    let mut fps = Vec::new();
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

/// The fingerprint count in a block header, 0 when the header is unreadable.
fn header_count(block: &[u8]) -> u64 {
    BlockHeader::read_from_prefix(block).map_or(0, |(h, _)| u64::from(h.count.get()))
}
