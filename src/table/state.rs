//! A table's state: its blocks' keys, slots and codes, and where its
//! blocks live (held in memory, or read through its source) and how a
//! block is read.

use std::sync::{Arc, OnceLock};

use zerocopy::FromBytes;

use super::{BlockSource, Bytes, Codebook, Filter, Flat, FlatBuilder, Loader, Packed};
use crate::codec::{BlockHeader, BlockView, Code};
use crate::error::{Error, Result};
use crate::format::records::IndexEntry;
use crate::index;

/// An immutable snapshot of one table. Compaction builds a new snapshot
/// (sharing unchanged blocks) and swaps it in, so a query never sees a
/// half-merged table. A clone shares the keys, directory and blocks (a
/// merge's commit copies the list of every level's tables, while writers
/// wait).
#[derive(Debug, Clone)]
pub struct TableState {
    pub(super) number: usize,
    pub(super) keys: Arc<Vec<u64>>,
    /// Narrows block lookups (memory only, derived from `keys`).
    pub(super) directory: Arc<index::Directory>,
    /// One entry per block, in key order: what a probe reads, together.
    pub(super) blocks: Arc<Vec<Slot>>,
    pub(super) codes: Arc<Codebook>,
    pub(super) fingerprints: u64,
    pub(super) storage: Storage,
    /// Every fingerprint of the table, when built (see
    /// [`filtered`](Self::filtered)).
    pub(super) filter: Option<Arc<Filter>>,
    /// Every fingerprint of the table as one flat sequence by header, when
    /// built (see [`flattened`](Self::flattened)).
    pub(super) flat: Option<Arc<Flat>>,
}

/// Where a table's blocks live besides its slots.
#[derive(Debug, Clone)]
pub(super) struct Storage {
    /// Where blocks not held are read from (`None`: every block is held).
    pub(super) source: Option<Arc<dyn BlockSource>>,
    /// Whether blocks are held in memory once read (a slot not filled yet
    /// is filled by the first probe that reads its block, or by
    /// [`fill_from`](TableState::fill_from)); false for a table on disk,
    /// whose probes read every block from `source`.
    pub(super) memory: bool,
}

impl Storage {
    pub(super) fn memory() -> Self {
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
        // Read at random by every probe: in huge pages when large (see
        // `crate::pages`).
        let keys = crate::pages::collect(entries.iter().map(|e| e.key));
        let blocks = crate::pages::collect(entries.iter().map(|e| Slot {
            held: OnceLock::new(),
            len: u32::from(e.len),
            count: e.count,
        }));
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
        let blocks = crate::pages::collect(sizes.into_iter().map(|(len, count)| Slot {
            held: OnceLock::new(),
            len,
            count,
        }));
        let storage = Storage {
            source: Some(source),
            memory: false,
        };
        Self::from_slots(number, keys, blocks, codes, storage)
    }

    /// A table of `keys` and their `blocks`, both in key order. The
    /// callers build large ones in memory marked for huge pages (see
    /// `crate::pages`): every probe reads them at random.
    pub(super) fn from_slots(
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
            directory: Arc::new(index::Directory::new(&keys)),
            keys: Arc::new(keys),
            blocks: Arc::new(blocks),
            codes,
            fingerprints,
            storage,
            filter: None,
            flat: None,
        }
    }

    /// The table with a membership filter of its fingerprints when its
    /// blocks are held in memory (unchanged otherwise): [`contains`](Self::contains)
    /// then answers nearly every fingerprint it does not hold from the
    /// filter, without a probe. Built by merges for each level's table 0,
    /// which every write asks whether it holds a fingerprint. A block that
    /// does not decode leaves the table without a filter (its probes
    /// report the block).
    pub fn filtered(mut self) -> Self {
        if !self.storage.memory {
            return self;
        }
        let mut filter = Filter::new(self.fingerprints as usize);
        let mut block = Vec::new();
        for j in 0..self.keys.len() {
            if self.decode_block(j, &mut block).is_err() {
                return self;
            }
            filter.insert_all(&block);
        }
        self.filter = Some(Arc::new(filter));
        self
    }

    /// The table with its fingerprints also held as one flat sequence by
    /// their top `header_bits` bits (see [`Flat`]), which a probe of one
    /// header reads instead of the blocks, when its blocks are held in
    /// memory and the sequence is built for such a table (see
    /// [`FlatBuilder::new`]); unchanged otherwise. Built for a one-table
    /// store's level 0. A block that does not decode leaves the table
    /// without it (its probes report the block).
    pub fn flattened(mut self, header_bits: u8) -> Self {
        if !self.storage.memory || self.flat.is_some() {
            return self;
        }
        let Some(mut builder) = FlatBuilder::new(u32::from(header_bits), self.fingerprints) else {
            return self;
        };
        let mut block = Vec::new();
        for j in 0..self.keys.len() {
            if self.decode_block(j, &mut block).is_err() {
                return self;
            }
            if !block.iter().all(|&v| builder.push(v)) {
                return self;
            }
        }
        self.flat = builder.finish().map(Arc::new);
        self
    }

    /// The flat sequence of the table's fingerprints, when built (see
    /// [`flattened`](Self::flattened)).
    #[inline(always)]
    pub fn flat(&self) -> Option<&Flat> {
        self.flat.as_deref()
    }

    /// Whether the table has a membership filter (see
    /// [`filtered`](Self::filtered)).
    pub fn has_filter(&self) -> bool {
        self.filter.is_some()
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
            .zip(self.blocks.iter())
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
    /// they could not be packed; none on disk), with the block directory,
    /// the filter and the flat sequence.
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
        let filter = self.filter.as_ref().map_or(0, |f| f.heap_bytes());
        let flat = self.flat.as_ref().map_or(0, |f| f.heap_bytes());
        held + (self.directory.heap_bytes() + filter + flat) as u64
    }

    /// The encoded length of every block, in key order.
    #[cfg(test)]
    pub(super) fn block_lens(&self) -> impl Iterator<Item = u32> + '_ {
        self.blocks.iter().map(|b| b.len)
    }

    /// Total encoded bytes of all blocks, headers included.
    pub fn encoded_bytes(&self) -> u64 {
        self.blocks.iter().map(|b| u64::from(b.len)).sum()
    }

    /// Block `j` for reading: packed, or its encoded bytes (borrowed when
    /// held, else read from the source).
    #[inline(always)]
    pub(super) fn read(&self, j: usize) -> Result<Read<'_>> {
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
    pub(super) fn held(&self, j: usize) -> Option<&Held> {
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
    pub(super) fn read_lazy(&self, j: usize) -> Result<&Held> {
        let bytes = self.source()?.fetch(self.number, self.keys[j])?;
        let held = hold(&self.codes, self.keys[j], &bytes, &self.blocks[j]);
        Ok(self.blocks[j].held.get_or_init(|| held))
    }

    /// This table with the blocks keyed in `problems` corrupt, for those
    /// reasons (what [`fill_from`](Self::fill_from) found, where the
    /// blocks were held already).
    pub fn settled(&self, problems: &[(u64, String)]) -> TableState {
        let mut table = self.clone();
        if !problems.is_empty() {
            // Built from blocks now found wanting: their probes report them.
            table.flat = None;
        }
        for (key, reason) in problems {
            if let Ok(j) = self.keys.binary_search(key) {
                Arc::make_mut(&mut table.blocks)[j].held =
                    OnceLock::from(Held::Corrupt(reason.as_str().into()));
            }
        }
        table
    }

    /// Parses block `j`'s encoded `bytes` and finds its code, checking its
    /// key (and its CRC unless `verified`).
    #[inline(always)]
    pub(super) fn parse<'b>(
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

    /// Appends every (permuted) fingerprint of the table to `out`, in
    /// increasing order.
    pub fn append_all(&self, out: &mut Vec<u64>) -> Result<()> {
        let mut block = Vec::new();
        for j in 0..self.keys.len() {
            self.decode_block(j, &mut block)?;
            out.extend_from_slice(&block);
        }
        Ok(())
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

    /// Each block's fingerprint count (by its header, or the table index),
    /// in key order.
    pub fn counts(&self) -> impl ExactSizeIterator<Item = u16> + '_ {
        self.blocks.iter().map(|b| b.count)
    }

    /// Block `j`'s fingerprint count (0 past the last block).
    pub fn count(&self, j: usize) -> u16 {
        self.blocks.get(j).map_or(0, |b| b.count)
    }
}

/// A block as read: packed, or encoded (with whether its CRC was checked).
pub(super) enum Read<'a> {
    Packed(&'a Packed),
    Encoded(Bytes<'a>, bool),
}

/// A block as a table holds it in memory.
#[derive(Debug, Clone)]
pub(super) struct Slot {
    /// What the table holds of it; empty when not read yet (or never, on
    /// disk).
    pub(super) held: OnceLock<Held>,
    /// Its encoded length in bytes.
    pub(super) len: u32,
    /// Its fingerprint count (by its header; 0 when unreadable).
    pub(super) count: u16,
}

/// What a table holds of a block.
#[derive(Debug, Clone)]
pub(super) enum Held {
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
pub(super) fn disagreement(len: usize, count: usize, slot: &Slot) -> Option<Held> {
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
