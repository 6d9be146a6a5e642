//! One permuted table held in memory: its block keys (the block index),
//! its compressed blocks and its codes. Pure: the store layer loads it from
//! and persists it to RocksDB.

mod codes;
mod fill;
mod merge;
mod packed;

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use zerocopy::FromBytes;

pub use codes::Codebook;
pub use fill::{Filling, Piece};
pub use merge::{merge, merge_observed, Added, MergeOutput};
pub use packed::{Cursor, Packed};

use crate::codec::{BlockHeader, BlockView, Code, Visit};
use crate::error::{Error, Result};
use crate::format::records::IndexEntry;
use crate::index;

/// Where a table's blocks are read from when they are not held in memory
/// (a store whose tables exceed its memory budget).
pub trait BlockSource: Send + Sync + std::fmt::Debug {
    /// The stored bytes of table `table`'s block with key `key`.
    fn fetch(&self, table: usize, key: u64) -> Result<Arc<[u8]>>;
}

/// A block's bytes (a table's, or an id block's): borrowed from memory or
/// fetched from its source.
pub(crate) enum Bytes<'a> {
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
    storage: Storage,
}

/// Where a table's blocks live besides its slots.
#[derive(Debug, Clone)]
struct Storage {
    /// Where blocks not held are read from (`None`: every block is held).
    source: Option<Arc<dyn BlockSource>>,
    /// Whether blocks are held in memory once read (a slot not filled yet
    /// is filled by the first probe that reads its block, or by
    /// [`fill_from`](TableState::fill_from)); false for a table on disk,
    /// whose probes read every block from `source`.
    memory: bool,
}

impl Storage {
    fn memory() -> Self {
        Self {
            source: None,
            memory: true,
        }
    }
}

impl TableState {
    /// A table from its blocks in key order, as read from disk (see
    /// [`Loader`]).
    pub fn new(
        number: usize,
        keys: Vec<u64>,
        blocks: Vec<Arc<[u8]>>,
        codes: Arc<Codebook>,
    ) -> Self {
        let mut loader = Loader::new(number, codes);
        for (key, bytes) in keys.into_iter().zip(blocks) {
            loader.push(key, &bytes);
        }
        loader.finish()
    }

    /// A table held in memory whose blocks are read on first use: opened
    /// from its index record (`entries`), each block is read from `source`
    /// by the first probe that needs it, or by [`fill_from`](Self::fill_from).
    pub fn lazy(
        number: usize,
        entries: &[IndexEntry],
        codes: Arc<Codebook>,
        source: Arc<dyn BlockSource>,
    ) -> Self {
        let keys = entries.iter().map(|e| e.key).collect();
        let blocks = entries
            .iter()
            .map(|e| Slot {
                held: OnceLock::new(),
                len: u32::from(e.len),
                count: e.count,
            })
            .collect();
        let storage = Storage {
            source: Some(source),
            memory: true,
        };
        Self::from_slots(number, keys, blocks, codes, storage)
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
                held: OnceLock::new(),
                len,
                count,
            })
            .collect();
        let storage = Storage {
            source: Some(source),
            memory: false,
        };
        Self::from_slots(number, keys, blocks, codes, storage)
    }

    fn from_slots(
        number: usize,
        keys: Vec<u64>,
        blocks: Vec<Slot>,
        codes: Arc<Codebook>,
        storage: Storage,
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
            storage,
        }
    }

    /// Whether blocks are held in memory, all of them once read (otherwise
    /// probes read every block through the table's source).
    pub fn in_memory(&self) -> bool {
        self.storage.memory
    }

    /// Whether some block has not been read yet (the table was opened from
    /// its index and neither a probe nor the warming has read them all).
    pub fn has_unread(&self) -> bool {
        self.storage.memory && self.blocks.iter().any(|b| b.held.get().is_none())
    }

    /// Whether the block keyed `key` is held in memory already (read by a
    /// probe, or never lazy).
    pub fn holds(&self, key: u64) -> bool {
        self.keys
            .binary_search(&key)
            .is_ok_and(|j| self.blocks[j].held.get().is_some())
    }

    /// The table's index entries (each block's key, length and count), in
    /// key order, for its index record.
    pub fn index_entries(&self) -> impl ExactSizeIterator<Item = IndexEntry> + '_ {
        self.keys
            .iter()
            .zip(&self.blocks)
            .map(|(&key, b)| IndexEntry {
                key,
                len: u16::try_from(b.len).unwrap_or(u16::MAX),
                count: b.count,
            })
    }

    /// The table number.
    pub fn number(&self) -> usize {
        self.number
    }

    /// The block keys, in order.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// The table's codes.
    pub fn codes(&self) -> &Arc<Codebook> {
        &self.codes
    }

    /// Number of fingerprints, by the block headers.
    pub fn fingerprints(&self) -> u64 {
        self.fingerprints
    }

    /// Bytes of memory the blocks take as held (packed, or encoded when
    /// they could not be packed; none on disk), with the block directory.
    pub fn memory_bytes(&self) -> u64 {
        let held: u64 = self
            .blocks
            .iter()
            .map(|b| match b.held.get() {
                Some(Held::Packed(p)) => p.heap_bytes() as u64,
                Some(Held::Encoded { bytes, .. }) => bytes.len() as u64,
                Some(Held::Corrupt(_)) | None => 0,
            })
            .sum();
        held + self.directory.heap_bytes() as u64
    }

    /// The encoded length of every block, in key order.
    #[cfg(test)]
    fn block_lens(&self) -> impl Iterator<Item = u32> + '_ {
        self.blocks.iter().map(|b| b.len)
    }

    /// Total encoded bytes of all blocks, headers included.
    pub fn encoded_bytes(&self) -> u64 {
        self.blocks.iter().map(|b| u64::from(b.len)).sum()
    }

    /// Block `j` for reading: packed, or its encoded bytes (borrowed when
    /// held, else read from the source).
    #[inline(always)]
    fn read(&self, j: usize) -> Result<Read<'_>> {
        let held = match self.held(j) {
            Some(held) => held,
            None if self.storage.memory => self.read_lazy(j)?,
            None => {
                return self
                    .source()?
                    .fetch(self.number, self.keys[j])
                    .map(|b| Read::Encoded(Bytes::Fetched(b), false))
            }
        };
        match held {
            Held::Packed(p) => Ok(Read::Packed(p)),
            Held::Encoded { bytes, verified } => Ok(Read::Encoded(Bytes::Held(bytes), *verified)),
            Held::Corrupt(reason) => Err(self.corrupt(self.keys[j], reason.to_string())),
        }
    }

    /// What the table holds of block `j`, if anything yet.
    #[inline(always)]
    fn held(&self, j: usize) -> Option<&Held> {
        self.blocks[j].held.get()
    }

    fn source(&self) -> Result<&Arc<dyn BlockSource>> {
        self.storage.source.as_ref().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "table {}: block not held and no source",
                self.number
            ))
        })
    }

    /// Reads block `j` from the source and holds it.
    #[cold]
    #[inline(never)]
    fn read_lazy(&self, j: usize) -> Result<&Held> {
        let bytes = self.source()?.fetch(self.number, self.keys[j])?;
        let held = hold(&self.codes, self.keys[j], &bytes, &self.blocks[j]);
        Ok(self.blocks[j].held.get_or_init(|| held))
    }

    /// This table with the blocks keyed in `problems` corrupt, for those
    /// reasons (what [`fill_from`](Self::fill_from) found, where the
    /// blocks were held already).
    pub fn settled(&self, problems: &[(u64, String)]) -> TableState {
        let mut table = self.clone();
        for (key, reason) in problems {
            if let Ok(j) = self.keys.binary_search(key) {
                table.blocks[j].held = OnceLock::from(Held::Corrupt(reason.as_str().into()));
            }
        }
        table
    }

    /// Parses block `j`'s encoded `bytes` and finds its code, checking its
    /// key (and its CRC unless `verified`).
    #[inline(always)]
    fn parse<'b>(
        &self,
        j: usize,
        bytes: &'b [u8],
        verified: bool,
    ) -> Result<(BlockView<'b>, &Code)> {
        let key = self.keys[j];
        let view = if verified {
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

    /// Decodes block `j` completely into `out` (replacing its contents),
    /// checking its padding.
    #[inline(always)]
    pub fn decode_block(&self, j: usize, out: &mut Vec<u64>) -> Result<()> {
        match self.read(j)? {
            Read::Packed(p) => {
                out.clear();
                p.values_into(out);
                Ok(())
            }
            Read::Encoded(bytes, verified) => {
                let (view, code) = self.parse(j, &bytes, verified)?;
                view.decode_into(code, out)
                    .map_err(|e| Error::block(self.number, self.keys[j], &e))
            }
        }
    }

    /// Calls `visit` with every permuted fingerprint in `lo..=hi`, in order,
    /// until it returns `false`. Returns whether the visit was stopped.
    pub fn scan(&self, lo: u64, hi: u64, visit: impl FnMut(u64) -> bool) -> Result<bool> {
        self.scan_from(self.probe_start(lo, hi), lo, hi, visit)
    }

    /// Where a probe for `lo..=hi` starts: its block and, in a packed
    /// block, where the first value at or above `lo` is. The stages
    /// ([`probe_keys`](Self::probe_keys),
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
        self.probe_touch(block, lo, hi);
        self.probe_start_at(block, lo)
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

    /// Where `x` falls in block `j` by interpolation between its key and
    /// the next block's: an index guess among the block's `count` values.
    #[inline(always)]
    fn guess(&self, j: usize, x: u64, count: usize) -> usize {
        let key = self.keys[j];
        let Some(&next) = self.keys.get(j + 1) else {
            return if x <= key { 0 } else { count / 2 };
        };
        let fraction = x.saturating_sub(key) as f64 / next.saturating_sub(key).max(1) as f64;
        ((fraction.min(1.0) * count as f64) as usize).min(count)
    }

    /// Stage 2: asks for the bytes of the block holding the probe's values
    /// from `lo` to `hi` (where they fall by interpolation, a line either
    /// side), and of the next block's when the range reaches into it.
    #[inline]
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
    #[inline]
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

    /// Each block's fingerprint count (by its header, or the table index),
    /// in key order.
    pub fn counts(&self) -> impl ExactSizeIterator<Item = u16> + '_ {
        self.blocks.iter().map(|b| b.count)
    }

    /// Block `j`'s fingerprint count (0 past the last block).
    pub fn count(&self, j: usize) -> u16 {
        self.blocks.get(j).map_or(0, |b| b.count)
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

/// Builds a table held in memory from its stored blocks, pushed in key
/// order: every block's CRC is checked and its fingerprints decoded once,
/// and held packed (see [`Packed`]), so the encoded bytes need not be
/// kept; a block that fails either is kept as stored and reports its error
/// whenever it is read. Counts come from the block headers.
#[derive(Debug)]
pub struct Loader {
    number: usize,
    keys: Vec<u64>,
    blocks: Vec<Slot>,
    codes: Arc<Codebook>,
    /// Blocks waiting to be decoded together: slot number and a copy of
    /// the bytes (the buffers are reused).
    waiting: Vec<(usize, Vec<u8>)>,
    /// How many of `waiting` are in use.
    waiting_len: usize,
    scratch: [Vec<u64>; LOAD_LANES],
}

/// Blocks a [`Loader`] decodes together (see [`crate::codec::decode_many`]).
const LOAD_LANES: usize = 4;

impl Loader {
    /// A loader for table `number`, whose blocks use `codes`.
    pub fn new(number: usize, codes: Arc<Codebook>) -> Self {
        Self {
            number,
            keys: Vec::new(),
            blocks: Vec::new(),
            codes,
            waiting: Vec::new(),
            waiting_len: 0,
            scratch: Default::default(),
        }
    }

    /// Adds the block stored under `key` without decoding it: only its
    /// length and count are kept (for a block held elsewhere already; the
    /// table built holds it as not held).
    pub fn skip(&mut self, key: u64, bytes: &[u8]) {
        self.keys.push(key);
        self.blocks.push(Slot {
            held: OnceLock::new(),
            len: bytes.len() as u32,
            count: header_count(bytes),
        });
    }

    /// Adds the block stored under `key`.
    pub fn push(&mut self, key: u64, bytes: &[u8]) {
        let view = BlockView::parse(bytes);
        let verified = view.is_ok();
        let decodable =
            view.is_ok_and(|v| v.first() == key && self.codes.get(v.code_id()).is_some());
        let slot = self.blocks.len();
        self.keys.push(key);
        self.blocks.push(Slot {
            // A block to decode is a placeholder until it is decoded (in
            // `decode_waiting`, at the latest from `finish`).
            held: if decodable {
                OnceLock::new()
            } else {
                OnceLock::from(Held::Encoded {
                    bytes: Arc::from(bytes),
                    verified,
                })
            },
            len: bytes.len() as u32,
            count: header_count(bytes),
        });
        if !decodable {
            return;
        }
        if self.waiting_len == self.waiting.len() {
            self.waiting.push((slot, Vec::new()));
        }
        let (at, copy) = &mut self.waiting[self.waiting_len];
        *at = slot;
        copy.clear();
        copy.extend_from_slice(bytes);
        self.waiting_len += 1;
        if self.waiting_len == LOAD_LANES {
            self.decode_waiting();
        }
    }

    /// Decodes the waiting blocks; each one that decodes is held packed.
    fn decode_waiting(&mut self) {
        let n = self.waiting_len;
        self.waiting_len = 0;
        let views: [Option<(BlockView<'_>, &Code)>; LOAD_LANES] = std::array::from_fn(|i| {
            let (_, bytes) = self.waiting[..n].get(i)?;
            let view = BlockView::parse_verified(bytes).ok()?;
            Some((view, self.codes.get(view.code_id())?))
        });
        let results: [bool; LOAD_LANES] = match views {
            [Some(a), Some(b), Some(c), Some(d)] => crate::codec::decode_many(
                &[a.0, b.0, c.0, d.0],
                [a.1, b.1, c.1, d.1],
                &mut self.scratch,
            )
            .map(|r| r.is_ok()),
            _ => {
                let mut ok = [false; LOAD_LANES];
                for ((ok, v), out) in ok.iter_mut().zip(&views).zip(&mut self.scratch) {
                    *ok = v.is_some_and(|(view, code)| view.decode_into(code, out).is_ok());
                }
                ok
            }
        };
        for (i, ok) in results.into_iter().enumerate().take(n) {
            let (slot, bytes) = &self.waiting[i];
            self.blocks[*slot].held = OnceLock::from(if ok {
                Held::Packed(Packed::new(&self.scratch[i]))
            } else {
                Held::Encoded {
                    bytes: Arc::from(&bytes[..]),
                    verified: true,
                }
            });
        }
    }

    /// The table.
    pub fn finish(mut self) -> TableState {
        self.decode_waiting();
        TableState::from_slots(
            self.number,
            self.keys,
            self.blocks,
            self.codes,
            Storage::memory(),
        )
    }
}

/// Where a probe starts: see [`TableState::probe_start`].
#[derive(Debug, Clone, Copy)]
pub struct ProbeStart {
    block: usize,
    /// In a packed block, where its first value at or above the probe's
    /// low end is (encoded blocks are read from their start).
    from: Cursor,
}

/// A block as read: packed, or encoded (with whether its CRC was checked).
enum Read<'a> {
    Packed(&'a Packed),
    Encoded(Bytes<'a>, bool),
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
    /// What the table holds of it; empty when not read yet (or never, on
    /// disk).
    held: OnceLock<Held>,
    /// Its encoded length in bytes.
    len: u32,
    /// Its fingerprint count (by its header; 0 when unreadable).
    count: u16,
}

/// What a table holds of a block.
#[derive(Debug, Clone)]
enum Held {
    /// Its fingerprints, packed (the block passed its CRC and decoded
    /// cleanly, or a merge just encoded it).
    Packed(Packed),
    /// The encoded block, exactly as stored, when it failed its CRC
    /// (`verified` false: it keeps failing, with the checksum error,
    /// whenever it is read) or its decoding (read with the checked decoder,
    /// which reports the error where it meets it).
    Encoded { bytes: Arc<[u8]>, verified: bool },
    /// Not readable, for this reason: the block disagrees with the table
    /// index that listed it, or is missing.
    Corrupt(Arc<str>),
}

/// A stored block of `len` bytes holding `count` fingerprints, held as
/// corrupt when that is not what the table index says of `slot`.
fn disagreement(len: usize, count: usize, slot: &Slot) -> Option<Held> {
    ((len, count) != (slot.len as usize, usize::from(slot.count))).then(|| {
        Held::Corrupt(
            format!(
                "the block holds {count} fingerprints in {len} bytes, the table index says {} in {}",
                slot.count, slot.len
            )
            .into(),
        )
    })
}

/// What a table holds of the block stored under `key` as `bytes`, read
/// for `slot` (whose length and count come from the table index): packed
/// when it passes its CRC, agrees with the index and decodes cleanly;
/// kept encoded when it fails its CRC or decoding (it reports that error
/// when read); corrupt when it disagrees with the index.
fn hold(codes: &Codebook, key: u64, bytes: &[u8], slot: &Slot) -> Held {
    let encoded = |verified| Held::Encoded {
        bytes: Arc::from(bytes),
        verified,
    };
    let Ok(view) = BlockView::parse(bytes) else {
        return encoded(false);
    };
    if let Some(corrupt) = disagreement(bytes.len(), view.count(), slot) {
        return corrupt;
    }
    let Some(code) = codes.get(view.code_id()).filter(|_| view.first() == key) else {
        return encoded(true);
    };
    let mut values = Vec::with_capacity(view.count());
    match view.decode_into(code, &mut values) {
        Ok(()) => Held::Packed(Packed::new(&values)),
        Err(_) => encoded(true),
    }
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

    /// Probes of every width, before and after a merge that rewrites some
    /// blocks and keeps the others: every answer equals a brute-force
    /// filter.
    #[test]
    fn scans_match_brute_force() {
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
            // Every block was packed, at load and by the merge.
            assert!(table
                .blocks
                .iter()
                .all(|b| matches!(b.held.get(), Some(Held::Packed(_)))));
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

    /// Blocks served from a map, counting the reads.
    #[derive(Debug, Default)]
    struct MapSource {
        blocks: std::collections::HashMap<u64, Arc<[u8]>>,
        reads: std::sync::atomic::AtomicUsize,
    }

    impl BlockSource for MapSource {
        fn fetch(&self, _table: usize, key: u64) -> Result<Arc<[u8]>> {
            self.reads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.blocks.get(&key).cloned().ok_or_else(|| {
                Error::corrupt(crate::error::Location::Block { table: 0, key }, "missing")
            })
        }
    }

    fn entries(keys: &[u64], blocks: &[Vec<u8>]) -> Vec<IndexEntry> {
        keys.iter()
            .zip(blocks)
            .map(|(&key, b)| IndexEntry {
                key,
                len: b.len() as u16,
                count: header_count(b),
            })
            .collect()
    }

    /// A table opened from its index answers every probe as the table
    /// read in full does, reading blocks as probes need them, before and
    /// after a merge; filled from a full read and settled, it holds every
    /// block and reads nothing more.
    #[test]
    fn lazy_tables_answer_as_loaded_ones() {
        let fps = values(40_000, 3);
        let (code, encoded, keys) = encoded(&fps);
        let codes = Arc::new(Codebook::from_codes([(0, code)]));
        let source = Arc::new(MapSource {
            blocks: keys
                .iter()
                .zip(&encoded)
                .map(|(&k, b)| (k, Arc::from(&b[..])))
                .collect(),
            ..Default::default()
        });
        let index = entries(&keys, &encoded);
        let full = TableState::new(
            0,
            keys.clone(),
            encoded.iter().map(|b| Arc::from(&b[..])).collect(),
            Arc::clone(&codes),
        );
        let lazy = TableState::lazy(0, &index, Arc::clone(&codes), source.clone());
        assert!(lazy.has_unread() && lazy.in_memory());
        assert_eq!(lazy.fingerprints(), fps.len() as u64);
        let mut x = 11u64;
        let mut probes = Vec::new();
        for i in 0..400 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let lo = fps[(x >> 33) as usize % fps.len()].wrapping_sub(i % 3);
            probes.push((lo, lo.saturating_add([0u64, 1, 1 << 30][i as usize % 3])));
        }
        for (i, &(lo, hi)) in probes.iter().enumerate() {
            assert_eq!(
                scanned(&lazy, lo, hi),
                scanned(&full, lo, hi),
                "{lo:x}..={hi:x}"
            );
            if i == 1 {
                let reads = source.reads.load(std::sync::atomic::Ordering::Relaxed);
                assert!(reads > 0 && lazy.has_unread(), "{reads} reads");
            }
        }
        // A merge keeps unread blocks unread; the merged table reads them.
        let adds: Vec<u64> = fps
            .iter()
            .step_by(50)
            .map(|v| v ^ 1)
            .filter(|v| fps.binary_search(v).is_err())
            .collect();
        let mut adds = adds;
        adds.sort_unstable();
        let merged = merge(&lazy, &adds, &[], 1024).unwrap().state;
        let merged_full = merge(&full, &adds, &[], 1024).unwrap().state;

        assert_eq!(
            scanned(&merged, 0, u64::MAX),
            scanned(&merged_full, 0, u64::MAX)
        );
        // Filled from a full read and settled: nothing is read any more.
        assert!(lazy.fill_from(&full).is_empty());
        let settled = lazy.settled(&[]);
        assert!(!settled.has_unread());
        let before = source.reads.load(std::sync::atomic::Ordering::Relaxed);
        for &(lo, hi) in &probes {
            assert_eq!(scanned(&settled, lo, hi), scanned(&full, lo, hi));
        }
        assert_eq!(
            source.reads.load(std::sync::atomic::Ordering::Relaxed),
            before
        );
        assert_eq!(settled.memory_bytes(), full.memory_bytes());
    }

    /// Blocks that disagree with the index that listed them are reported,
    /// whether a probe or the full read finds it, never answered from.
    #[test]
    fn lazy_tables_report_blocks_that_disagree_with_their_index() {
        let fps = values(6_000, 5);
        let (code, encoded, keys) = encoded(&fps);
        assert!(keys.len() > 6);
        let codes = Arc::new(Codebook::from_codes([(0, code)]));
        let index = entries(&keys, &encoded);
        // Block 1 is missing, block 2 is stored shorter than listed (the
        // tail of block 1's values dropped), and block 4 is stored under
        // its key but not listed.
        let mut stored: Vec<(u64, Vec<u8>)> = keys.iter().copied().zip(encoded.clone()).collect();
        let block2_values: Vec<u64> = fps
            .iter()
            .copied()
            .filter(|&v| v >= keys[2] && v < keys[3])
            .collect();
        let code = codes.get(0).unwrap().clone();
        let shorter =
            crate::codec::encode_blocks(&block2_values[..block2_values.len() - 1], &code, 0, 1024)
                .unwrap();
        stored[2].1 = shorter[0].clone();
        stored.remove(1);
        let mut listed = index.clone();
        listed.remove(4);
        let source = Arc::new(MapSource {
            blocks: stored
                .iter()
                .map(|(k, b)| (*k, Arc::from(&b[..])))
                .collect(),
            ..Default::default()
        });
        let probe = |t: &TableState, j: usize| {
            let lo = keys[j];
            t.scan(lo, lo, |_| true).map(|_| ())
        };
        let lazy = TableState::lazy(0, &listed, Arc::clone(&codes), source.clone());
        assert!(probe(&lazy, 1).is_err(), "missing block");
        assert!(probe(&lazy, 2).is_err(), "shorter block");
        probe(&lazy, 0).unwrap();
        // The full read finds the same, and the unlisted block.
        let fresh = TableState::new(
            0,
            stored.iter().map(|(k, _)| *k).collect(),
            stored.iter().map(|(_, b)| Arc::from(&b[..])).collect(),
            Arc::clone(&codes),
        );
        let lazy = TableState::lazy(0, &listed, Arc::clone(&codes), source.clone());
        probe(&lazy, 3).unwrap();
        let problems = lazy.fill_from(&fresh);
        let keyed: Vec<u64> = problems.iter().map(|p| p.0).collect();
        assert_eq!(keyed, [keys[1], keys[2], keys[3]], "{problems:?}");
        assert!(problems[2].1.contains("missing from the table index"));
        let settled = lazy.settled(&problems);
        for j in [1, 2, 3] {
            assert!(probe(&settled, j).is_err(), "block {j}");
        }
        probe(&settled, 0).unwrap();
        probe(&settled, 5).unwrap();

        // Filled piece by piece (as the warming reads), with the missing,
        // short and unlisted blocks at and beside pieces' edges: the same.
        for size in 1..=4 {
            let lazy = TableState::lazy(0, &listed, Arc::clone(&codes), source.clone());
            probe(&lazy, 3).unwrap();
            let mut loader = Loader::new(0, Arc::clone(&codes));
            let mut filling = lazy.filling();
            for (n, (key, bytes)) in stored.iter().enumerate() {
                if lazy.holds(*key) {
                    loader.skip(*key, bytes);
                } else {
                    loader.push(*key, bytes);
                }
                if (n + 1) % size == 0 {
                    filling.fill(&loader.take_piece());
                }
            }
            filling.fill(&loader.take_piece());
            assert_eq!(filling.finish(), problems, "pieces of {size}");
            assert!(!lazy.has_unread(), "pieces of {size}");
            // Every block read is held (block 4, unlisted, is not).
            for (j, &key) in keys.iter().enumerate().filter(|(j, _)| ![1, 2].contains(j)) {
                let want = if j == 4 { vec![] } else { vec![key] };
                assert_eq!(
                    scanned(&lazy, key, key),
                    want,
                    "pieces of {size}, block {j}"
                );
            }
        }
    }

    /// A block whose checksum passes but whose stream was damaged (an
    /// encoder bug, not a disk fault: the CRC catches those) is answered as
    /// the checked decoder answers it: an error where that decoder fails,
    /// its values where it does not. (Only blocks that decode cleanly at
    /// load are packed; the others are read with the checked decoder.)
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
