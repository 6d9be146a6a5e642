//! Document ids as queries and writers read them, from memory.
//!
//! A fingerprint in the tables has its ids in the id block of the table-0
//! block holding it, at the same position ([`IdTable`], one slot per
//! table-0 block, held in memory like the blocks when the tables are).
//! Pairs written since that id block was ([`Overlay`], the `ids` family):
//! a pair added outside the id blocks (every pair of a pending
//! fingerprint, and new ids of fingerprints in the tables), or a pair of
//! an id block removed. A fingerprint's ids are its id block's, less the
//! removed, plus the added. Merges that rewrite table 0 write the new
//! blocks' id blocks and fold the overlay into them.
//!
//! Only level 0 has id blocks (see [`levels`](super::levels)): every pair
//! of a fingerprint in another level is in the overlay, as a pending
//! fingerprint's is, until a merge moves the fingerprint into level 0.

mod overlay;
mod reconcile;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Location, Result};
use crate::format::ids::IdBlock;
use crate::table::{Added, Bytes, IdSource, TableState};
pub(crate) use overlay::{Entries, FpSet, MixHasher, Overlay};
pub(crate) use reconcile::{to_fold, Base, IdBuilder, Reconcile, Reconciled, Truth, Walk};

/// What a slot holds of its id block.
#[derive(Debug, Clone)]
pub(super) enum Held {
    /// The block as stored, checked (CRC, layout, count).
    Block(Arc<[u8]>),
    /// Not usable, for this reason.
    Corrupt(Arc<str>),
}

/// The id blocks of table 0, one slot per table-0 block, in the same
/// order (the table is passed to every call that needs its keys).
#[derive(Debug, Default)]
pub(crate) struct IdTable {
    pub(super) slots: Vec<OnceLock<Held>>,
    pub(super) source: Option<Arc<dyn IdSource>>,
    /// Whether blocks are held once read.
    pub(super) memory: bool,
    /// Bytes of [`LARGE`] blocks held though the table is not in memory.
    pub(super) held_large: AtomicUsize,
}

/// An id block as a look-up got it.
pub(super) enum Got<'s> {
    /// Held in its slot (once read, when the table is in memory or the
    /// block is [`LARGE`]).
    Held(&'s Arc<[u8]>),
    /// Read for this look-up only.
    Read(Arc<[u8]>),
}

/// A fingerprint's place in an id block, the block shared (a writer
/// keeps it beyond its look-up's lock).
#[derive(Debug)]
pub(crate) struct IdPlace {
    /// The block, checked when read.
    pub bytes: Arc<[u8]>,
    /// Its key (for errors).
    pub key: u64,
    /// The fingerprint's position in it.
    pub position: usize,
}

impl IdPlace {
    /// The block, its layout read again (no CRC: checked when read), and
    /// checked to have the position.
    pub fn parsed(&self) -> Result<IdBlock<'_>> {
        parsed_at(&self.bytes, self.key, self.position)
    }
}

/// Bytes from which an id block read from disk is held anyway (up to
/// [`HELD_LARGE`] in all): a block this large holds a fingerprint with
/// tens of thousands of ids (an empty page, a common template), and
/// every write naming it and every match on it would otherwise read and
/// check the whole block again. 2,000 small write groups each adding an
/// id to a fingerprint with 300K ids, from a process keeping its tables
/// on disk: 4.0 ms a group reading it each time.
pub(super) const LARGE: usize = 64 << 10;

/// Most bytes of [`LARGE`] id blocks held by a table not in memory.
pub(super) const HELD_LARGE: usize = 64 << 20;

/// The corruption error of the id block keyed `key`.
pub(super) fn corrupt(key: u64, reason: impl Into<String>) -> Error {
    Error::corrupt(Location::IdBlock { key }, reason)
}

/// Checks a stored id block against the table-0 block it belongs to.
pub(super) fn check(bytes: &[u8], count: u16) -> std::result::Result<(), String> {
    let block = IdBlock::parse(bytes)?;
    if block.count() != usize::from(count) {
        return Err(format!(
            "the id block holds {} fingerprints, its table-0 block {count}",
            block.count()
        ));
    }
    Ok(())
}

impl IdTable {
    /// A table of `blocks` slots read from `source` on first use, held
    /// once read when `memory`.
    pub fn lazy(blocks: usize, source: Arc<dyn IdSource>, memory: bool) -> Self {
        Self {
            // Read at random by every match's look-up: in huge pages
            // when large (see `crate::pages`).
            slots: crate::pages::collect((0..blocks).map(|_| OnceLock::new())),
            source: Some(source),
            memory,
            held_large: AtomicUsize::new(0),
        }
    }

    /// Whether some slot of a table held in memory is not read yet.
    pub fn has_unread(&self) -> bool {
        self.memory && self.slots.iter().any(|s| s.get().is_none())
    }

    /// Whether a look-up may read an id block from the source: one not
    /// held in memory, or not read yet.
    pub fn reads_source(&self) -> bool {
        !self.slots.is_empty() && (!self.memory || self.has_unread())
    }

    /// Asks the processor for slot `j` (the first stage of a staged
    /// look-up).
    #[inline]
    pub fn touch_slot(&self, j: usize) {
        crate::table::prefetch(self.slots.get(j..j + 1).unwrap_or_default());
    }

    /// Asks the processor for the start of slot `j`'s block, when held.
    #[inline]
    pub fn touch_block(&self, j: usize) {
        if let Some(Held::Block(b)) = self.slots.get(j).and_then(OnceLock::get) {
            crate::table::prefetch(&b[..b.len().min(64)]);
        }
    }

    /// Asks the processor for the ids of position `position` of slot
    /// `j`'s block, when held (the start of its block read before).
    #[inline]
    pub fn touch_ids(&self, j: usize, position: usize) {
        if let Some(Held::Block(b)) = self.slots.get(j).and_then(OnceLock::get) {
            let at = IdBlock::approximate_offset(b, position);
            crate::table::prefetch(&b[at..b.len().min(at + 8)]);
        }
    }

    /// Holds `bytes` as slot `j`'s block (read by the warming) unless it
    /// is held already; `count` is its table-0 block's.
    pub fn fill(&self, j: usize, bytes: &[u8], count: u16) {
        if let Some(slot) = self.slots.get(j) {
            if slot.get().is_none() {
                let _ = slot.set(hold(Arc::from(bytes), count));
            }
        }
    }

    /// Marks slot `j` as having no stored block (found missing by the
    /// warming).
    pub fn mark_missing(&self, j: usize) {
        if let Some(slot) = self.slots.get(j) {
            let _ = slot.set(Held::Corrupt("the id block is missing".into()));
        }
    }

    /// Slot `j`'s id block (checked), `table0`'s block `j` being the
    /// table-0 block it belongs to: borrowed when held, else read.
    pub fn block<'s>(&'s self, table0: &TableState, j: usize) -> Result<Bytes<'s>> {
        Ok(match self.slot_block(table0, j)? {
            Got::Held(held) => Bytes::Held(held),
            Got::Read(read) => Bytes::Fetched(read),
        })
    }

    /// Slot `j`'s id block (checked), as [`block`](Self::block) gives it,
    /// shared.
    pub fn shared_block(&self, table0: &TableState, j: usize) -> Result<Arc<[u8]>> {
        Ok(match self.slot_block(table0, j)? {
            Got::Held(held) => Arc::clone(held),
            Got::Read(read) => read,
        })
    }

    /// Slot `j`'s id block, checked.
    fn slot_block(&self, table0: &TableState, j: usize) -> Result<Got<'_>> {
        let key = table0.keys()[j];
        let slot = &self.slots[j];
        match slot.get() {
            Some(Held::Block(b)) => return Ok(Got::Held(b)),
            Some(Held::Corrupt(reason)) => return Err(corrupt(key, reason.to_string())),
            None => {}
        }
        let count = table0.count(j);
        let source = self
            .source
            .as_ref()
            .ok_or_else(|| corrupt(key, "the id block is not held and there is no source"))?;
        let bytes = source
            .fetch(key)?
            .ok_or_else(|| corrupt(key, "the id block is missing"))?;
        if self.memory || self.room_for_large(bytes.len()) {
            let held = slot.get_or_init(|| {
                if !self.memory {
                    self.held_large.fetch_add(bytes.len(), Ordering::Relaxed);
                }
                hold(bytes, count)
            });
            return match held {
                Held::Block(b) => Ok(Got::Held(b)),
                Held::Corrupt(reason) => Err(corrupt(key, reason.to_string())),
            };
        }
        check(&bytes, count).map_err(|r| corrupt(key, r))?;
        Ok(Got::Read(bytes))
    }

    /// Whether a table not in memory holds a block of `len` bytes read
    /// from disk (see [`LARGE`]).
    fn room_for_large(&self, len: usize) -> bool {
        len >= LARGE && self.held_large.load(Ordering::Relaxed) + len <= HELD_LARGE
    }

    /// Appends the ids stored in slot `j`'s block for position `position`
    /// of `table0`'s block `j`.
    pub fn ids_into(
        &self,
        table0: &TableState,
        j: usize,
        position: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        let bytes = self.block(table0, j)?;
        ids_at(&bytes, table0.keys()[j], position, out)
    }

    /// The id table of `new0`, the table 0 a merge made of `old0`: the
    /// blocks in `written` (key order) are new; every other block of
    /// `new0` is one of `old0`'s, whose slot it keeps.
    pub fn rebuilt(&self, old0: &TableState, new0: &TableState, written: &Added) -> Result<Self> {
        let mut new = written.iter().peekable();
        let mut slots = Vec::with_capacity(new0.keys().len());
        let mut held_large = 0;
        for (&key, count) in new0.keys().iter().zip(new0.counts()) {
            if new.peek().is_some_and(|&(k, _)| k == key) {
                let (_, bytes) = new.next().unwrap_or_else(|| unreachable!("peeked"));
                slots.push(if self.memory {
                    OnceLock::from(hold(Arc::from(bytes), count))
                } else {
                    OnceLock::new()
                });
                continue;
            }
            let j = old0
                .keys()
                .binary_search(&key)
                .map_err(|_| corrupt(key, "a block kept by a merge has no id block to keep"))?;
            if let (false, Some(Held::Block(b))) = (self.memory, self.slots[j].get()) {
                held_large += b.len();
            }
            slots.push(self.slots[j].clone());
        }
        Ok(Self {
            slots,
            source: self.source.clone(),
            memory: self.memory,
            held_large: AtomicUsize::new(held_large),
        })
    }
}

/// Appends the ids at `position` of the checked id block `bytes` (keyed
/// `key`) to `out`.
#[inline]
pub(super) fn ids_at(bytes: &[u8], key: u64, position: usize, out: &mut Vec<u64>) -> Result<()> {
    parsed_at(bytes, key, position)?.ids_into(position, out);
    Ok(())
}

/// The checked id block `bytes` (keyed `key`), its layout read again and
/// checked to have `position`.
#[inline]
pub(crate) fn parsed_at(bytes: &[u8], key: u64, position: usize) -> Result<IdBlock<'_>> {
    let block = IdBlock::parse_checked(bytes).map_err(|r| corrupt(key, r))?;
    if position >= block.count() {
        return Err(corrupt(key, format!("no position {position}")));
    }
    Ok(block)
}

/// Slot contents for a block read from disk or written by a merge.
pub(super) fn hold(bytes: Arc<[u8]>, count: u16) -> Held {
    match check(&bytes, count) {
        Ok(()) => Held::Block(bytes),
        Err(reason) => Held::Corrupt(reason.into()),
    }
}
