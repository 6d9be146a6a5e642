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

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Location, Result};
use crate::format::ids::{IdBlock, IdBlockWriter};
use crate::table::{Added, Bytes, IdSource, TableState};

/// What a slot holds of its id block.
#[derive(Debug, Clone)]
enum Held {
    /// The block as stored, checked (CRC, layout, count).
    Block(Arc<[u8]>),
    /// Not usable, for this reason.
    Corrupt(Arc<str>),
}

/// The id blocks of table 0, one slot per table-0 block, in the same
/// order (the table is passed to every call that needs its keys).
#[derive(Debug, Default)]
pub(crate) struct IdTable {
    slots: Vec<OnceLock<Held>>,
    source: Option<Arc<dyn IdSource>>,
    /// Whether blocks are held once read.
    memory: bool,
    /// Bytes of [`LARGE`] blocks held though the table is not in memory.
    held_large: AtomicUsize,
}

/// An id block as a look-up got it.
enum Got<'s> {
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
const LARGE: usize = 64 << 10;

/// Most bytes of [`LARGE`] id blocks held by a table not in memory.
const HELD_LARGE: usize = 64 << 20;

/// The corruption error of the id block keyed `key`.
fn corrupt(key: u64, reason: impl Into<String>) -> Error {
    Error::corrupt(Location::IdBlock { key }, reason)
}

/// Checks a stored id block against the table-0 block it belongs to.
fn check(bytes: &[u8], count: u16) -> std::result::Result<(), String> {
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
fn ids_at(bytes: &[u8], key: u64, position: usize, out: &mut Vec<u64>) -> Result<()> {
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
fn hold(bytes: Arc<[u8]>, count: u16) -> Held {
    match check(&bytes, count) {
        Ok(()) => Held::Block(bytes),
        Err(reason) => Held::Corrupt(reason.into()),
    }
}

/// Pairs not in the id blocks as they are: `(id, added)` per fingerprint,
/// increasing by id; `added` false for a pair of an id block that was
/// removed.
///
/// The fingerprints are spread over [`SHARDS`] maps by bits of their hash
/// that the maps do not use: a map grows, every entry of it moved, when a
/// write fills it, under the state's write lock. One map of 7M entries
/// took a second to grow, holding every writer and query; a shard takes a
/// thousandth of that, and as the shards fill at slightly different
/// rates, a write group grows a few of them, not all.
#[derive(Debug, Clone, Default)]
pub(crate) struct Overlay {
    /// [`SHARDS`] maps, or none while the overlay has never held an entry.
    shards: Vec<HashMap<u64, Entries, MixHasher>>,
    entries: usize,
}

/// Maps an overlay spreads its fingerprints over (see [`Overlay`]).
const SHARDS: usize = 1 << 10;

/// The shard of `fp`: ten bits of its hash from the middle, which a map
/// of fewer than 2^32 buckets does not use (`hashbrown` places an entry by
/// the low bits and tags it with the top seven).
fn shard_of(fp: u64) -> usize {
    (crate::table::mix(fp) >> 32) as usize & (SHARDS - 1)
}

/// An empty map with room for `fingerprints`.
fn map_with_room(fingerprints: usize) -> HashMap<u64, Entries, MixHasher> {
    HashMap::with_capacity_and_hasher(fingerprints, MixHasher)
}

/// One fingerprint's overlay entries, never none: a single entry (a new
/// fingerprint with its one id, nearly every one) is held in place, so
/// that the overlay of millions of fingerprints costs no allocation each
/// to build, change, clone or drop; more are on the heap, shared by
/// clones (a writer reading the entries of a fingerprint with 300K ids
/// added since its id block, a merge's snapshot of the overlay) and
/// copied only when changed while shared.
#[derive(Debug, Clone)]
pub(crate) enum Entries {
    One([(u64, bool); 1]),
    /// The entries, and how many of them are removals.
    Many(Arc<Vec<(u64, bool)>>, usize),
}

impl Entries {
    /// The entries of `list` (increasing by id), `None` when it is empty.
    fn new(list: &[(u64, bool)]) -> Option<Self> {
        match list {
            [] => None,
            [one] => Some(Self::One([*one])),
            _ => {
                let removed = list.iter().filter(|e| !e.1).count();
                Some(Self::Many(Arc::new(list.to_vec()), removed))
            }
        }
    }

    /// How many of the entries are removals (pairs of an id block).
    pub fn removed(&self) -> usize {
        match self {
            Self::One([(_, added)]) => usize::from(!added),
            Self::Many(_, removed) => *removed,
        }
    }

    /// The entries, increasing by id.
    pub fn as_slice(&self) -> &[(u64, bool)] {
        match self {
            Self::One(one) => one,
            Self::Many(list, _) => list,
        }
    }

    /// Sets the entry of `id` (see [`Overlay::set`]); the change in the
    /// number of entries.
    fn set(&mut self, id: u64, mark: Option<bool>) -> isize {
        if let (Self::One([(at, added)]), Some(now)) = (&mut *self, mark) {
            if *at == id {
                *added = now;
                return 0;
            }
        }
        let mut removed = self.removed();
        let mut list = std::mem::replace(self, Self::One([(0, false)])).into_vec();
        let delta = match (list.binary_search_by_key(&id, |&(i, _)| i), mark) {
            (Ok(at), Some(added)) => {
                removed = removed + usize::from(!added) - usize::from(!list[at].1);
                list[at].1 = added;
                0
            }
            (Ok(at), None) => {
                removed -= usize::from(!list.remove(at).1);
                -1
            }
            (Err(at), Some(added)) => {
                list.insert(at, (id, added));
                removed += usize::from(!added);
                1
            }
            (Err(_), None) => 0,
        };
        *self = match list.as_slice() {
            [one] => Self::One([*one]),
            _ => Self::Many(Arc::new(list), removed),
        };
        delta
    }

    /// The entries as a list of their own (copied when shared).
    fn into_vec(self) -> Vec<(u64, bool)> {
        match self {
            Self::One(one) => one.to_vec(),
            Self::Many(list, _) => Arc::try_unwrap(list).unwrap_or_else(|shared| (*shared).clone()),
        }
    }
}

/// Hashes a fingerprint key by a 64-bit mix (splitmix64's finalizer): one
/// multiply-and-shift round trip instead of SipHash's, for keys that are
/// not chosen by an adversary to collide (a fingerprint is a hash
/// already; the mix spreads clustered ones over the buckets).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MixHasher;

/// A set of fingerprints hashed by [`MixHasher`].
pub(crate) type FpSet = std::collections::HashSet<u64, MixHasher>;

/// The hasher [`MixHasher`] builds.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Mix(u64);

impl std::hash::BuildHasher for MixHasher {
    type Hasher = Mix;
    fn build_hasher(&self) -> Mix {
        Mix(0)
    }
}

impl std::hash::Hasher for Mix {
    fn finish(&self) -> u64 {
        crate::table::mix(self.0)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = self.0.rotate_left(29) ^ x;
    }
}

impl Overlay {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// The entries of `fp`, by id.
    pub fn get(&self, fp: u64) -> &[(u64, bool)] {
        self.entries(fp).map_or(&[], Entries::as_slice)
    }

    /// The entries of `fp`, when it has any.
    #[inline]
    pub fn entries(&self, fp: u64) -> Option<&Entries> {
        self.shards.get(shard_of(fp))?.get(&fp)
    }

    /// The entries of `fp`, shared (no copy), when it has any.
    pub fn shared(&self, fp: u64) -> Option<Entries> {
        self.entries(fp).cloned()
    }

    /// The fingerprints with entries, in no order.
    pub fn fingerprints(&self) -> impl Iterator<Item = u64> + '_ {
        self.shards.iter().flat_map(|map| map.keys().copied())
    }

    /// Makes the shards when there are none yet.
    fn with_shards(&mut self) {
        if self.shards.is_empty() {
            self.shards = (0..SHARDS).map(|_| map_with_room(0)).collect();
        }
    }

    /// Every fingerprint with entries and its entries (increasing by id),
    /// increasing by fingerprint: for walks beside sorted fingerprints,
    /// which then read each one's entries without a look-up in the map
    /// (a cache miss or two each). The entries are copied as the map is
    /// walked, in its order: read later in the fingerprints' order from
    /// the map itself, each would be a cache miss again.
    fn sorted(&self) -> Vec<(u64, Entries)> {
        let mut sorted: Vec<(u64, Entries)> = self
            .shards
            .iter()
            .flatten()
            .map(|(&fp, list)| (fp, list.clone()))
            .collect();
        sorted.sort_unstable_by_key(|&(fp, _)| fp);
        sorted
    }

    /// Every fingerprint with its entries, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[(u64, bool)])> + '_ {
        self.shards
            .iter()
            .flatten()
            .map(|(&fp, list)| (fp, list.as_slice()))
    }

    /// Sets the entry of `(fp, id)`: added, removed, or none.
    pub fn set(&mut self, fp: u64, id: u64, mark: Option<bool>) {
        use std::collections::hash_map::Entry;
        if mark.is_none() && self.entries == 0 {
            return;
        }
        self.with_shards();
        match self.shards[shard_of(fp)].entry(fp) {
            Entry::Vacant(vacant) => {
                if let Some(added) = mark {
                    vacant.insert(Entries::One([(id, added)]));
                    self.entries += 1;
                }
            }
            Entry::Occupied(mut list) => {
                let delta = list.get_mut().set(id, mark);
                self.entries = self.entries.wrapping_add_signed(delta);
                if list.get().as_slice().is_empty() {
                    list.remove();
                }
            }
        }
    }

    /// Sets the entries of `fp` for each of `changes` (increasing by id,
    /// each id once) as [`set`](Self::set) would, in one merge of the two
    /// lists: a write group changing many of one fingerprint's pairs (a
    /// document id deleted from an empty page shared by 100K documents)
    /// costs the length of its list once, not once a pair.
    pub fn set_many(&mut self, fp: u64, changes: &[(u64, Option<bool>)]) {
        let merged = merge_changes(
            self.get(fp),
            |e| e.0,
            changes,
            |&(id, mark)| (id, mark.map(|added| (id, added))),
        );
        self.replace(fp, &merged);
    }

    /// Builds the overlay from `(fp, id, added)` entries in increasing
    /// `(fp, id)` order (the `ids` family's): the map sized once for the
    /// fingerprints counted, then one insertion per fingerprint (a store
    /// reopened with millions of pending fingerprints builds it at open).
    pub fn from_sorted(entries: &[(u64, u64, bool)]) -> Self {
        let mut overlay = Self::default();
        if entries.is_empty() {
            return overlay;
        }
        let mut counts = vec![0usize; SHARDS];
        for run in entries.chunk_by(|a, b| a.0 == b.0) {
            counts[shard_of(run[0].0)] += 1;
        }
        overlay.shards = counts.into_iter().map(map_with_room).collect();
        let mut list = Vec::new();
        for run in entries.chunk_by(|a, b| a.0 == b.0) {
            list.clear();
            list.extend(run.iter().map(|&(_, id, added)| (id, added)));
            if let Some(one) = Entries::new(&list) {
                overlay.shards[shard_of(run[0].0)].insert(run[0].0, one);
                overlay.entries += list.len();
            }
        }
        overlay
    }

    /// Replaces every entry of `fp`.
    pub fn replace(&mut self, fp: u64, entries: &[(u64, bool)]) {
        use std::collections::hash_map::Entry;
        // One lookup: merges replace millions of fingerprints' entries,
        // each a cache miss in a large map.
        if entries.is_empty() && self.entries == 0 {
            return;
        }
        self.with_shards();
        match (self.shards[shard_of(fp)].entry(fp), Entries::new(entries)) {
            (Entry::Occupied(mut at), Some(list)) => {
                self.entries -= at.get().as_slice().len();
                at.insert(list);
            }
            (Entry::Occupied(at), None) => {
                self.entries -= at.remove().as_slice().len();
            }
            (Entry::Vacant(at), Some(list)) => {
                at.insert(list);
            }
            (Entry::Vacant(_), None) => {}
        }
        self.entries += entries.len();
    }

    /// An empty overlay with room for `fingerprints` fingerprints (each
    /// shard for its share and four standard deviations more).
    pub fn with_capacity(fingerprints: usize) -> Self {
        if fingerprints == 0 {
            return Self::default();
        }
        let share = fingerprints.div_ceil(SHARDS);
        let room = share + 4 * share.isqrt() + 1;
        Self {
            shards: (0..SHARDS).map(|_| map_with_room(room)).collect(),
            entries: 0,
        }
    }

    /// Applies `fp`'s entries to its id block's `ids` (increasing).
    #[inline]
    pub fn apply(&self, fp: u64, ids: &mut Vec<u64>) {
        self.apply_from(fp, ids, 0);
    }

    /// [`apply`](Self::apply) to `ids[start..]`, the id block's ids of
    /// `fp` (increasing) after others' kept before them.
    #[inline]
    pub fn apply_from(&self, fp: u64, ids: &mut Vec<u64>, start: usize) {
        if self.entries == 0 {
            return;
        }
        if let Some(list) = self.entries(fp) {
            apply(list.as_slice(), ids, start);
        }
    }

    /// Applies `entries` (one fingerprint's, as [`get`](Self::get) gave
    /// them) to its id block's `ids` (increasing).
    pub fn apply_entries(entries: &[(u64, bool)], ids: &mut Vec<u64>) {
        apply(entries, ids, 0);
    }
}

/// Entries past which [`apply`] merges the two lists in one pass instead
/// of placing each entry by a search: a fingerprint with many ids changed
/// since its id block (100K of an empty page's deleted) would otherwise
/// move the rest of its list once an entry.
const APPLY_BY_MERGE: usize = 16;

/// Applies overlay entries (by id) to increasing `ids[start..]`.
fn apply(list: &[(u64, bool)], ids: &mut Vec<u64>, start: usize) {
    if list.len() > APPLY_BY_MERGE {
        let merged = merge_changes(
            &ids[start..],
            |&x| x,
            list,
            |&(id, added)| (id, added.then_some(id)),
        );
        ids.truncate(start);
        ids.extend(merged);
        return;
    }
    for &(id, added) in list {
        match (ids[start..].binary_search(&id), added) {
            (Err(at), true) => ids.insert(start + at, id),
            (Ok(at), false) => {
                ids.remove(start + at);
            }
            _ => {}
        }
    }
}

/// `old` (increasing by `key`) with `changes` (increasing by id, each id
/// once) applied, in one pass: a change `(id, Some(item))` puts `item` in
/// place of the one with that id, or adds it; `(id, None)` removes the
/// one with that id, if any.
fn merge_changes<T: Copy, C>(
    old: &[T],
    key: impl Fn(&T) -> u64,
    changes: &[C],
    change: impl Fn(&C) -> (u64, Option<T>),
) -> Vec<T> {
    let mut out = Vec::with_capacity(old.len() + changes.len());
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < changes.len() {
        let next = changes.get(j).map(&change);
        match (old.get(i), next) {
            (Some(item), Some((id, _))) if key(item) < id => {
                out.push(*item);
                i += 1;
            }
            (Some(item), None) => {
                out.push(*item);
                i += 1;
            }
            (item, Some((id, value))) => {
                if item.is_some_and(|item| key(item) == id) {
                    i += 1;
                }
                out.extend(value);
                j += 1;
            }
            (None, None) => break,
        }
    }
    out
}

/// The entries that make `base` (an id block's ids) into `truth`, both
/// increasing.
pub(crate) fn difference(base: &[u64], truth: &[u64]) -> Vec<(u64, bool)> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < base.len() || j < truth.len() {
        match (base.get(i), truth.get(j)) {
            (Some(&b), Some(&t)) if b == t => {
                i += 1;
                j += 1;
            }
            (Some(&b), Some(&t)) if b < t => {
                out.push((b, false));
                i += 1;
            }
            (Some(&b), None) => {
                out.push((b, false));
                i += 1;
            }
            (_, Some(&t)) => {
                out.push((t, true));
                j += 1;
            }
            (None, None) => break,
        }
    }
    out
}

/// The ids of fingerprints as of one state, read in increasing order of
/// fingerprint from table 0 block by block (as a merge writes them), with
/// the overlay applied and `extra` pairs (sorted) added.
pub(crate) struct Truth<'a> {
    table0: &'a TableState,
    ids: &'a IdTable,
    /// The overlay's fingerprints with their entries, increasing, and
    /// where the last one asked for stands among them: most fingerprints
    /// a merge writes have no entry, and walking this list beside them
    /// costs far less than a look-up in the overlay's map (a cache miss or
    /// two) for each; those that have one read it from here too.
    listed: Vec<(u64, Entries)>,
    listed_at: usize,
    extra: &'a [(u64, u64)],
    block: Option<usize>,
    values: Vec<u64>,
    /// The id block of `block`.
    id_bytes: Option<Bytes<'a>>,
    at: usize,
    /// Where the last fingerprint asked for starts in `extra`.
    extra_at: usize,
}

impl<'a> Truth<'a> {
    pub fn new(
        table0: &'a TableState,
        ids: &'a IdTable,
        overlay: &'a Overlay,
        extra: &'a [(u64, u64)],
    ) -> Self {
        Self {
            table0,
            ids,
            listed: overlay.sorted(),
            listed_at: 0,
            extra,
            block: None,
            values: Vec::new(),
            id_bytes: None,
            at: 0,
            extra_at: 0,
        }
    }

    /// `fp`'s ids in its id block (none when table 0 does not hold it),
    /// into `out` (replaced). Cheapest when called in increasing order.
    pub fn base(&mut self, fp: u64, out: &mut Vec<u64>) -> Result<()> {
        out.clear();
        let keys = self.table0.keys();
        // Fingerprints come in increasing order, most in the block of the
        // one before.
        let j = match self.block {
            Some(j) if keys[j] <= fp && keys.get(j + 1).is_none_or(|&next| fp < next) => j,
            _ => match crate::index::locate(keys, fp) {
                Some(j) => j,
                None => return Ok(()),
            },
        };
        if self.block != Some(j) {
            self.block = None;
            self.table0.decode_block(j, &mut self.values)?;
            self.id_bytes = Some(self.ids.block(self.table0, j)?);
            self.block = Some(j);
            self.at = 0;
        }
        if self.at > 0 && self.values[self.at - 1] >= fp {
            self.at = 0;
        }
        while self.at < self.values.len() && self.values[self.at] < fp {
            self.at += 1;
        }
        if let (Some(&v), Some(bytes)) = (self.values.get(self.at), &self.id_bytes) {
            if v == fp {
                ids_at(bytes, keys[j], self.at, out)?;
            }
        }
        Ok(())
    }

    /// `extra`'s ids of `fp`, increasing (found from where the last
    /// call's were: fingerprints come in increasing order).
    fn extra(&mut self, fp: u64) -> &'a [(u64, u64)] {
        let extra = self.extra;
        let from = seek(extra, self.extra_at, fp, |&(f, _)| f);
        let mut to = from;
        while to < extra.len() && extra[to].0 == fp {
            to += 1;
        }
        self.extra_at = from;
        &extra[from..to]
    }

    /// Whether the overlay has entries for `fp` (cheapest when called in
    /// increasing order).
    pub fn in_overlay(&mut self, fp: u64) -> bool {
        self.listed_at = seek(&self.listed, self.listed_at, fp, |&(f, _)| f);
        self.listed.get(self.listed_at).map(|&(f, _)| f) == Some(fp)
    }

    /// `fp`'s ids into `out` (replaced); returns how many came from
    /// `extra` alone.
    pub fn ids(&mut self, fp: u64, out: &mut Vec<u64>) -> Result<u64> {
        self.base(fp, out)?;
        if self.in_overlay(fp) {
            apply(self.listed[self.listed_at].1.as_slice(), out, 0);
        }
        Ok(add_ids(self.extra(fp), out))
    }
}

/// Adds the ids of `pairs` (one fingerprint's, sorted) to increasing
/// `ids`; returns how many were not there.
fn add_ids(pairs: &[(u64, u64)], ids: &mut Vec<u64>) -> u64 {
    let mut new = 0;
    for &(_, id) in pairs {
        if let Err(at) = ids.binary_search(&id) {
            ids.insert(at, id);
            new += 1;
        }
    }
    new
}

/// Builds the id blocks of table 0's new blocks as a merge writes them
/// (see [`merge_observed`](crate::table::merge_observed)).
pub(crate) struct IdBuilder<'a> {
    truth: Truth<'a>,
    writer: IdBlockWriter,
    scratch: Vec<u64>,
    /// The id blocks, keyed like their table-0 blocks.
    pub blocks: Added,
    /// Pairs of `extra` that were not stored before.
    pub new_pairs: u64,
    /// The fingerprints of the new blocks that had overlay entries (folded
    /// into their id blocks), increasing.
    pub folded: Vec<u64>,
}

impl<'a> IdBuilder<'a> {
    pub fn new(truth: Truth<'a>) -> Self {
        Self {
            truth,
            writer: IdBlockWriter::new(),
            scratch: Vec::new(),
            folded: Vec::new(),
            blocks: Added::default(),
            new_pairs: 0,
        }
    }

    /// The id block of the new table-0 block `key` holding `values`.
    pub fn observe(&mut self, key: u64, values: &[u64]) -> Result<()> {
        for &fp in values {
            // An overlay holds no empty list (see `Overlay::set`).
            if self.truth.in_overlay(fp) {
                self.folded.push(fp);
            }
            self.new_pairs += self.truth.ids(fp, &mut self.scratch)?;
            self.writer.push(&self.scratch);
        }
        self.blocks.push(key, &self.writer.finish());
        Ok(())
    }
}

/// What a merge of table 0 does to the ids: the changes to the `ids`
/// family, and the overlay after it.
pub(crate) struct Reconciled {
    /// The overlay of the new state.
    pub overlay: Overlay,
    /// `ids` keys to delete, then keys to put (`true`: added, `false`:
    /// removed), then keys to set in order (`None`: delete), last: the
    /// corrections of [`Reconcile::patch`].
    pub deletes: Vec<(u64, u64)>,
    pub puts: Vec<(u64, u64, bool)>,
    pub fixes: Vec<(u64, u64, Option<bool>)>,
    /// Whether the family's new content (the overlay as it was then) is
    /// written already, after emptying it, so that only the `fixes` made
    /// since are left to write (`deletes` and `puts` are then empty).
    pub written_whole: bool,
    /// Whether writers were switched to the other `ids` family at the
    /// snapshot (see [`IdFamilies`](super::id_families::IdFamilies)): when
    /// written whole, only the family of the snapshot's pairs was emptied,
    /// and the keys written since are still there.
    pub switched: bool,
}

/// Level 0's unpermuted table before a merge and its id blocks: where a
/// fingerprint's ids in level 0 are read.
pub(crate) struct Base<'a> {
    /// Table 0 of level 0 (the identity permutation).
    pub table: &'a TableState,
    /// Its id blocks.
    pub ids: &'a IdTable,
}

impl Base<'_> {
    /// The ids of `fp` in its id block (none when the table does not hold
    /// it), into `out` (replaced).
    pub fn ids_into(&self, fp: u64, out: &mut Vec<u64>) -> Result<()> {
        out.clear();
        if let Some((j, position)) = self.table.position(fp)? {
            self.ids.ids_into(self.table, j, position, out)?;
        }
        Ok(())
    }
}

/// A merge of table 0, as the overlay's reconciliation sees it: the
/// overlay once `new0`, table 0 merged from `base`'s with the
/// (unpermuted, sorted) `adds` and `removes`, and its new id blocks
/// (`written`, built from the `snapshot` overlay and `extra` pairs) are
/// swapped in is, for every fingerprint with entries then or now, the
/// difference between what it stores now (with `extra`) and what its id
/// block holds after the merge. Entries folded into new id blocks go;
/// changes made since the snapshot stay, against the new id blocks.
///
/// Only a fingerprint the merge adds, removes or folds (`folded`: those
/// of the new id blocks that had entries in `snapshot`), or whose entries
/// changed since the snapshot, can have other entries after the merge;
/// every other one keeps its entries as they are, unwritten (the pairs of
/// other levels' fingerprints and of pending ones, most of the overlay,
/// are not rewritten by every merge into level 0).
pub(crate) struct Reconcile<'a> {
    pub base: Base<'a>,
    pub snapshot: &'a Overlay,
    pub extra: &'a [(u64, u64)],
    pub adds: &'a [u64],
    /// Fingerprints of `adds` known not to be in level 0, increasing.
    pub fresh: &'a [u64],
    pub removes: &'a [u64],
    pub folded: &'a [u64],
    pub new0: &'a TableState,
    pub written: &'a Added,
}

impl Reconcile<'_> {
    /// The reconciliation against the snapshot itself, as if nothing were
    /// written since it was taken: every fingerprint with entries in it.
    /// Writes made since are corrected by [`patch`](Self::patch).
    pub fn all(&self) -> Result<Reconciled> {
        let listed = self.snapshot.sorted();
        let mut out = Reconciled {
            overlay: Overlay::with_capacity(listed.len().max(self.overlay_room())),
            deletes: Vec::new(),
            puts: Vec::new(),
            fixes: Vec::new(),
            written_whole: false,
            switched: false,
        };
        let mut scratch = Vec::new();
        let mut roles = self.roles();
        // Each lookup is a cache miss in a map of millions: the snapshot's
        // entries are read as its map is walked, and `out.overlay` (which
        // holds none of them yet) is touched only to insert.
        for (fp, current) in &listed {
            let (fp, current) = (*fp, current.as_slice());
            let roles = roles.of(fp);
            match self.one(current, true, fp, roles, &mut scratch)? {
                None => out.overlay.replace(fp, current),
                Some(entries) => {
                    out.deletes.extend(current.iter().map(|&(id, _)| (fp, id)));
                    out.puts
                        .extend(entries.iter().map(|&(id, added)| (fp, id, added)));
                    if !entries.is_empty() {
                        out.overlay.replace(fp, &entries);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Corrects `done`, [`all`](Self::all) against the snapshot, for
    /// writes made since: `changed` (increasing) holds every fingerprint
    /// whose entries `now` may hold otherwise than the snapshot. Each of
    /// them has every key `done` or `now` gives it that its entries do
    /// not deleted, then its entries put, in `fixes` (written after
    /// `done`'s deletes and puts, which the puts override).
    ///
    /// `pending` tells whether a fingerprint is pending now, and so in no
    /// level's tables: one the merge does not involve keeps its entries
    /// and keys as `now` has them, the common case (new fingerprints
    /// written while a merge ran) and one with no key to correct (unless
    /// `done` is [`written_whole`](Reconciled::written_whole)).
    pub fn patch(
        &self,
        done: &mut Reconciled,
        now: &Overlay,
        changed: &[u64],
        pending: impl Fn(u64) -> bool,
    ) -> Result<()> {
        let mut scratch = Vec::new();
        let mut roles = self.roles();
        for &fp in changed {
            let roles = roles.of(fp);
            let current = now.get(fp);
            // `done` wrote keys only for fingerprints the merge involves,
            // unless it wrote the family whole (which then empties the
            // keys writers put since; or, with writers switched to the
            // other family, puts back the snapshot's entries, keys a
            // fingerprint without any then has only from writers since).
            let kept = !done.written_whole || (done.switched && self.snapshot.get(fp).is_empty());
            if kept && !roles.involved() && (pending(fp) || !rewritten(self.new0, self.written, fp))
            {
                done.overlay.replace(fp, current);
                continue;
            }
            let unchanged = current == self.snapshot.get(fp);
            let entries = match self.one(current, unchanged, fp, roles, &mut scratch)? {
                None => current.to_vec(),
                Some(entries) => entries,
            };
            // A key put again needs no delete before it (the later write
            // of a key in a batch is the one that stays): each is an entry
            // RocksDB sorts, flushes and compacts away.
            let not_put = |id: &u64| entries.binary_search_by_key(id, |&(e, _)| e).is_err();
            let mut stale: Vec<u64> = done
                .overlay
                .get(fp)
                .iter()
                .chain(current)
                .map(|&(id, _)| id)
                .filter(not_put)
                .collect();
            stale.sort_unstable();
            stale.dedup();
            done.fixes
                .extend(stale.into_iter().map(|id| (fp, id, None)));
            done.fixes
                .extend(entries.iter().map(|&(id, added)| (fp, id, Some(added))));
            done.overlay.replace(fp, &entries);
        }
        Ok(())
    }

    /// Fingerprints the overlay is given room for after the merge: a sixth
    /// of level 0. The pairs of the other levels and of pending
    /// fingerprints reach a third of level 0 and more by the next merge
    /// into it, and writes then grow its maps, a shard at a time (see
    /// [`Overlay`]). Room for all of them from the start costs elsewhere:
    /// the next merge copies every bucket under the state's read lock,
    /// and memory peaks higher (`bench/RESULTS.md`).
    fn overlay_room(&self) -> usize {
        usize::try_from(self.new0.fingerprints() / 6).unwrap_or(usize::MAX)
    }

    /// What the merge does to each fingerprint, asked in increasing order:
    /// each of its lists is walked once beside them instead of searched
    /// for each.
    fn roles(&self) -> RoleWalk<'_> {
        RoleWalk {
            adds: Walk::new(self.adds),
            removes: Walk::new(self.removes),
            folded: Walk::new(self.folded),
            extra: Walk::new(self.extra),
            fresh: Walk::new(self.fresh),
        }
    }

    /// `fp`'s entries after the merge, or `None` when they stay as they
    /// are now, `current` (`unchanged`: the same as in the snapshot;
    /// `old_base`: scratch space).
    fn one(
        &self,
        current: &[(u64, bool)],
        unchanged: bool,
        fp: u64,
        roles: Roles,
        old_base: &mut Vec<u64>,
    ) -> Result<Option<Vec<(u64, bool)>>> {
        if !roles.involved() && unchanged {
            return Ok(None);
        }
        // The common case of a merge into level 0, most of what it moves:
        // a fingerprint new to level 0 lands in a new block, whose id
        // block the merge built from the snapshot's entries; unchanged
        // since, and with no pairs beside them, it keeps none.
        if roles.fresh && !roles.removed && !roles.extra && unchanged {
            debug_assert!(rewritten(self.new0, self.written, fp));
            return Ok(Some(Vec::new()));
        }
        // A fingerprint moving into level 0 was not in it.
        let in_old = if roles.fresh {
            old_base.clear();
            false
        } else {
            self.base.ids_into(fp, old_base)?;
            self.base.table.contains(fp)?
        };
        let in_new = (in_old && !roles.removed) || roles.added;
        let extra = self.extra;
        let from = extra.partition_point(|&(f, _)| f < fp);
        let to = from + extra[from..].partition_point(|&(f, _)| f == fp);
        let with_extra = |ids: &mut Vec<u64>| {
            add_ids(&extra[from..to], ids);
        };
        let mut truth = old_base.clone();
        apply(current, &mut truth, 0);
        with_extra(&mut truth);
        let new_base = if !in_new {
            Vec::new()
        } else if rewritten(self.new0, self.written, fp) {
            let mut ids = old_base.clone();
            self.snapshot.apply(fp, &mut ids);
            with_extra(&mut ids);
            ids
        } else {
            old_base.clone()
        };
        Ok(Some(difference(&new_base, &truth)))
    }
}

/// What a merge does to one fingerprint: whether it adds it to level 0,
/// removes it, folds its overlay entries into its id block, gives it
/// `extra` pairs, and whether it is known not to be in level 0 before.
#[derive(Debug, Clone, Copy)]
struct Roles {
    added: bool,
    removed: bool,
    folded: bool,
    extra: bool,
    fresh: bool,
}

/// The lists of a [`Reconcile`] walked beside increasing fingerprints.
struct RoleWalk<'a> {
    adds: Walk<'a, u64>,
    removes: Walk<'a, u64>,
    folded: Walk<'a, u64>,
    extra: Walk<'a, (u64, u64)>,
    fresh: Walk<'a, u64>,
}

impl RoleWalk<'_> {
    /// What the merge does to `fp` (not below the fingerprint asked about
    /// before, for the walk to stay linear).
    fn of(&mut self, fp: u64) -> Roles {
        Roles {
            added: self.adds.has(fp, |&f| f),
            removed: self.removes.has(fp, |&f| f),
            folded: self.folded.has(fp, |&f| f),
            extra: self.extra.has(fp, |&(f, _)| f),
            fresh: self.fresh.has(fp, |&f| f),
        }
    }
}

impl Roles {
    /// Whether the merge changes the fingerprint's placement or pairs.
    fn involved(&self) -> bool {
        self.added || self.removed || self.folded || self.extra
    }
}

/// A walk over a list sorted by fingerprint, cheapest when asked about
/// increasing fingerprints.
pub(crate) struct Walk<'a, T> {
    items: &'a [T],
    at: usize,
}

impl<'a, T> Walk<'a, T> {
    pub fn new(items: &'a [T]) -> Self {
        Self { items, at: 0 }
    }

    /// Whether an item of fingerprint `fp` is listed.
    pub fn has(&mut self, fp: u64, key: impl Fn(&T) -> u64) -> bool {
        self.at = seek(self.items, self.at, fp, &key);
        self.items.get(self.at).is_some_and(|x| key(x) == fp)
    }
}

/// Where the first item of `items` (sorted by `key`) whose fingerprint is
/// not below `fp` stands, found from `at`, the answer for the fingerprint
/// asked about before: galloped forward while fingerprints increase (the
/// way merges ask), searched anew when one goes back.
///
/// The gallop doubles its step until it passes `fp`, then searches the
/// last step: a walk asked about every item costs a comparison or two an
/// item, and one asked about a few fingerprints far apart in a long list
/// (a catch-up's slice of fingerprints written during a merge, against
/// the millions the merge moves) costs a logarithm of the gap, not every
/// item between.
fn seek<T>(items: &[T], at: usize, fp: u64, key: impl Fn(&T) -> u64) -> usize {
    let mut lo = at.min(items.len());
    if lo > 0 && items.get(lo - 1).is_some_and(|x| key(x) >= fp) {
        return items.partition_point(|x| key(x) < fp);
    }
    // Every item before `lo` is below `fp`.
    let mut step = 1;
    while items.get(lo + step - 1).is_some_and(|x| key(x) < fp) {
        lo += step;
        step = step.saturating_mul(2);
    }
    let end = lo.saturating_add(step).min(items.len());
    lo + items[lo..end].partition_point(|x| key(x) < fp)
}

/// Whether the block of `new0` that holds `fp`'s place is among `written`.
fn rewritten(new0: &TableState, written: &Added, fp: u64) -> bool {
    crate::index::locate(new0.keys(), fp)
        .is_some_and(|j| written.keys().binary_search(&new0.keys()[j]).is_ok())
}

/// The fingerprints of `state`'s overlay whose id blocks a merge into
/// level 0 should rewrite: those in level 0 and not tombstoned (a
/// tombstoned one leaves the tables, and a pending one or one of another
/// level has no id block); increasing.
pub(crate) fn to_fold(plan: &crate::plan::Plan, state: &super::state::State) -> Result<Vec<u64>> {
    let mut fold = Vec::new();
    for fp in state.overlay.fingerprints() {
        if !state.pending.contains(plan, fp)
            && !state.tombstones.contains(&fp)
            && state.in_base(plan, fp)?
        {
            fold.push(fp);
        }
    }
    fold.sort_unstable();
    Ok(fold)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seek_finds_what_a_search_from_the_start_finds() {
        // Lists with repeats, of every length up to 70 and a long one, asked
        // about in increasing runs (close and far apart) that sometimes go
        // back, the position before each answer carried into the next seek.
        let mut rng = crate::test_rng::TestRng::new(11);
        for len in (0..70).chain([5_000]) {
            let mut items: Vec<u64> = (0..len).map(|_| rng.next_u64() % 400).collect();
            items.sort_unstable();
            let mut at = 0;
            let mut fp = 0;
            for _ in 0..300 {
                fp = match rng.next_u64() % 8 {
                    0 => rng.next_u64() % 420,
                    1 => fp + rng.next_u64() % 100,
                    _ => fp + rng.next_u64() % 3,
                };
                at = seek(&items, at, fp, |&x| x);
                assert_eq!(at, items.partition_point(|&x| x < fp), "{len} {fp}");
                let mut walk = Walk::new(&items);
                assert_eq!(walk.has(fp, |&x| x), items.contains(&fp));
            }
        }
    }

    #[test]
    fn entries_count_their_removals_through_every_change() {
        // Sets that add, remove, flip and drop entries, while the list is
        // shared (copied) and not, compared with a count of the list.
        let mut rng = crate::test_rng::TestRng::new(5);
        let mut overlay = Overlay::default();
        let mut held = Vec::new();
        for step in 0..4_000 {
            let fp = rng.next_u64() % 3;
            let id = rng.next_u64() % 50;
            let mark = match rng.next_u64() % 3 {
                0 => None,
                1 => Some(true),
                _ => Some(false),
            };
            overlay.set(fp, id, mark);
            if step % 7 == 0 {
                held.push(overlay.shared(fp));
            }
            if step % 501 == 0 {
                let list: Vec<(u64, bool)> =
                    overlay.get(fp).iter().map(|&(i, a)| (i, !a)).collect();
                overlay.set_many(
                    fp,
                    &list.iter().map(|&(i, a)| (i, Some(a))).collect::<Vec<_>>(),
                );
            }
            for fp in 0..3 {
                let removed = overlay.get(fp).iter().filter(|e| !e.1).count();
                assert_eq!(
                    overlay.entries(fp).map_or(0, Entries::removed),
                    removed,
                    "step {step}"
                );
            }
        }
        for entries in held.into_iter().flatten() {
            let removed = entries.as_slice().iter().filter(|e| !e.1).count();
            assert_eq!(
                entries.removed(),
                removed,
                "a shared list kept its own count"
            );
        }
    }

    #[test]
    fn a_sharded_overlay_holds_what_one_map_would() {
        // Random 64-bit fingerprints over every shard, a few of them with
        // several ids: sets, removals and replacements against an ordered
        // map, and every way of reading the overlay back.
        use std::collections::BTreeMap;
        let mut rng = crate::test_rng::TestRng::new(21);
        let fps: Vec<u64> = (0..5_000).map(|_| rng.next_u64()).collect();
        let mut overlay = Overlay::default();
        let mut oracle: BTreeMap<u64, BTreeMap<u64, bool>> = BTreeMap::new();
        for step in 0..40_000 {
            let fp = fps[(rng.next_u64() % fps.len() as u64) as usize];
            let id = rng.next_u64() % 4;
            match rng.next_u64() % 10 {
                0 => {
                    let list: Vec<(u64, bool)> =
                        (0..rng.next_u64() % 3).map(|i| (i * 5, i != 1)).collect();
                    overlay.replace(fp, &list);
                    oracle.remove(&fp);
                    if !list.is_empty() {
                        oracle.insert(fp, list.into_iter().collect());
                    }
                }
                1..=2 => {
                    overlay.set(fp, id, None);
                    if let Some(ids) = oracle.get_mut(&fp) {
                        ids.remove(&id);
                        if ids.is_empty() {
                            oracle.remove(&fp);
                        }
                    }
                }
                _ => {
                    let added = step % 5 != 0;
                    overlay.set(fp, id, Some(added));
                    oracle.entry(fp).or_default().insert(id, added);
                }
            }
        }
        let want: Vec<(u64, Vec<(u64, bool)>)> = oracle
            .iter()
            .map(|(&fp, ids)| (fp, ids.iter().map(|(&i, &a)| (i, a)).collect()))
            .collect();
        let sorted: Vec<(u64, Vec<(u64, bool)>)> = overlay
            .sorted()
            .into_iter()
            .map(|(fp, e)| (fp, e.as_slice().to_vec()))
            .collect();
        assert_eq!(sorted, want);
        let mut iterated: Vec<(u64, Vec<(u64, bool)>)> =
            overlay.iter().map(|(fp, e)| (fp, e.to_vec())).collect();
        iterated.sort_unstable();
        assert_eq!(iterated, want);
        let mut listed: Vec<u64> = overlay.fingerprints().collect();
        listed.sort_unstable();
        assert_eq!(listed, oracle.keys().copied().collect::<Vec<_>>());
        assert_eq!(
            overlay.len(),
            oracle.values().map(BTreeMap::len).sum::<usize>()
        );
        for &fp in &fps {
            let want: Vec<(u64, bool)> = oracle
                .get(&fp)
                .map(|ids| ids.iter().map(|(&i, &a)| (i, a)).collect())
                .unwrap_or_default();
            assert_eq!(overlay.get(fp), &want[..], "{fp:x}");
        }
        let used = overlay.shards.iter().filter(|m| !m.is_empty()).count();
        assert!(used > SHARDS / 2, "{used} shards used");
    }

    #[test]
    fn an_overlay_given_room_holds_that_many_without_growing() {
        let mut rng = crate::test_rng::TestRng::new(22);
        let n = 200_000;
        let mut overlay = Overlay::with_capacity(n);
        let before: Vec<usize> = overlay.shards.iter().map(HashMap::capacity).collect();
        for id in 0..n as u64 {
            overlay.set(rng.next_u64(), id, Some(true));
        }
        let after: Vec<usize> = overlay.shards.iter().map(HashMap::capacity).collect();
        assert_eq!(before, after);
        assert_eq!(overlay.len(), n);
    }

    #[test]
    fn an_overlay_built_from_sorted_entries_equals_one_set_entry_by_entry() {
        let mut rng = crate::test_rng::TestRng::new(3);
        let mut entries: Vec<(u64, u64, bool)> = (0..2000)
            .map(|_| {
                (
                    rng.next_u64() % 300,
                    rng.next_u64() % 50,
                    rng.next_u64().is_multiple_of(3),
                )
            })
            .collect();
        entries.sort_unstable_by_key(|&(fp, id, _)| (fp, id));
        entries.dedup_by_key(|&mut (fp, id, _)| (fp, id));
        let mut one_by_one = Overlay::default();
        for &(fp, id, added) in &entries {
            one_by_one.set(fp, id, Some(added));
        }
        let built = Overlay::from_sorted(&entries);
        assert_eq!(built.len(), one_by_one.len());
        assert_eq!(built.len(), entries.len());
        for fp in 0..300 {
            assert_eq!(built.get(fp), one_by_one.get(fp), "{fp}");
        }
    }

    #[test]
    fn long_entry_lists_apply_as_short_ones_do_after_other_ids_too() {
        // Id lists and entry lists of every length around the switch to a
        // merge, entries adding ids present or not and removing them.
        let mut rng = crate::test_rng::TestRng::new(12);
        for round in 0..2_000 {
            let n = (rng.next_u64() % 60) as usize;
            let mut ids: Vec<u64> = (0..n).map(|_| rng.next_u64() % 100).collect();
            ids.sort_unstable();
            ids.dedup();
            let m = round % (2 * APPLY_BY_MERGE + 4);
            let mut list: Vec<(u64, bool)> = (0..m)
                .map(|_| (rng.next_u64() % 100, rng.next_u64().is_multiple_of(2)))
                .collect();
            list.sort_unstable_by_key(|&(id, _)| id);
            list.dedup_by_key(|&mut (id, _)| id);
            let mut expect: std::collections::BTreeSet<u64> = ids.iter().copied().collect();
            for &(id, added) in &list {
                match added {
                    true => expect.insert(id),
                    false => expect.remove(&id),
                };
            }
            // Applied to the whole list, and to the same list after other
            // ids (another fingerprint's, as a query's answers hold them),
            // which stay as they were.
            let expect: Vec<u64> = expect.into_iter().collect();
            let mut got = ids.clone();
            apply(&list, &mut got, 0);
            assert_eq!(got, expect, "round {round}");
            let before = [1_000, 5, 7];
            let mut got = before.to_vec();
            got.extend(&ids);
            apply(&list, &mut got, before.len());
            assert_eq!(got[..before.len()], before, "round {round}");
            assert_eq!(got[before.len()..], expect, "round {round}");
        }
    }

    #[test]
    fn changes_merged_at_once_equal_changes_set_one_by_one() {
        // Lists of none, one and many entries; runs of changes adding,
        // re-marking and removing entries, of ids present or not.
        let mut rng = crate::test_rng::TestRng::new(8);
        let mut merged = Overlay::default();
        let mut one_by_one = Overlay::default();
        for round in 0..3_000 {
            let fp = rng.next_u64() % 30;
            let n = match round % 7 {
                0 => 400,
                _ => (rng.next_u64() % 6) as usize,
            };
            let mut changes: Vec<(u64, Option<bool>)> = (0..n)
                .map(|_| {
                    let mark = match rng.next_u64() % 3 {
                        0 => None,
                        1 => Some(true),
                        _ => Some(false),
                    };
                    (rng.next_u64() % 500, mark)
                })
                .collect();
            changes.sort_unstable_by_key(|&(id, _)| id);
            changes.dedup_by_key(|&mut (id, _)| id);
            merged.set_many(fp, &changes);
            for &(id, mark) in &changes {
                one_by_one.set(fp, id, mark);
            }
            assert_eq!(merged.get(fp), one_by_one.get(fp), "round {round}");
            assert_eq!(merged.len(), one_by_one.len(), "round {round}");
        }
        assert!(
            merged.len() > 1_000,
            "the lists grew long: {}",
            merged.len()
        );
    }

    #[test]
    fn replacing_a_fingerprints_entries_keeps_the_count() {
        // Lists of none, one and several entries replacing each other.
        let mut rng = crate::test_rng::TestRng::new(5);
        let mut overlay = Overlay::default();
        let mut model: std::collections::BTreeMap<u64, Vec<(u64, bool)>> = Default::default();
        for _ in 0..5_000 {
            let fp = rng.next_u64() % 40;
            let n = (rng.next_u64() % 4) as usize;
            let mut list: Vec<(u64, bool)> = (0..n)
                .map(|_| (rng.next_u64() % 20, rng.next_u64().is_multiple_of(2)))
                .collect();
            list.sort_unstable_by_key(|&(id, _)| id);
            list.dedup_by_key(|&mut (id, _)| id);
            overlay.replace(fp, &list);
            if list.is_empty() {
                model.remove(&fp);
            } else {
                model.insert(fp, list);
            }
            assert_eq!(overlay.len(), model.values().map(Vec::len).sum::<usize>());
        }
        for fp in 0..40 {
            assert_eq!(overlay.get(fp), model.get(&fp).map_or(&[][..], |l| &l[..]));
        }
        assert_eq!(overlay.fingerprints().count(), model.len());
    }

    #[test]
    fn an_overlay_changed_entry_by_entry_matches_a_map_of_pairs() {
        // Few fingerprints and ids, so that lists grow from one entry to
        // several and shrink back to one and to none.
        let mut rng = crate::test_rng::TestRng::new(11);
        let mut overlay = Overlay::default();
        let mut model = std::collections::BTreeMap::new();
        for _ in 0..20_000 {
            let (fp, id) = (rng.next_u64() % 20, rng.next_u64() % 6);
            let mark = match rng.next_u64() % 3 {
                0 => None,
                1 => Some(true),
                _ => Some(false),
            };
            overlay.set(fp, id, mark);
            match mark {
                Some(added) => model.insert((fp, id), added),
                None => model.remove(&(fp, id)),
            };
            assert_eq!(overlay.len(), model.len());
            let want: Vec<(u64, bool)> = model
                .range((fp, 0)..=(fp, u64::MAX))
                .map(|(&(_, id), &added)| (id, added))
                .collect();
            assert_eq!(overlay.get(fp), want.as_slice());
        }
        let mut with: Vec<u64> = overlay.fingerprints().collect();
        with.sort_unstable();
        let mut want: Vec<u64> = model.keys().map(|&(fp, _)| fp).collect();
        want.dedup();
        assert_eq!(with, want);
        let copy = overlay.clone();
        for fp in 0..20 {
            assert_eq!(copy.get(fp), overlay.get(fp));
        }
    }

    #[test]
    fn the_overlay_applies_and_difference_inverts_it() {
        let base = vec![1, 4, 9];
        for truth in [
            vec![],
            vec![1, 4, 9],
            vec![0, 4, 10],
            vec![2, 3],
            vec![1, 9, 20],
        ] {
            let d = difference(&base, &truth);
            let mut o = Overlay::default();
            o.replace(7, &d);
            let mut ids = base.clone();
            o.apply(7, &mut ids);
            assert_eq!(ids, truth, "{d:?}");
            assert_eq!(o.len(), d.len());
            let mut other = base.clone();
            o.apply(8, &mut other);
            assert_eq!(other, base);
        }
        let mut o = Overlay::default();
        o.set(1, 5, Some(true));
        o.set(1, 3, Some(false));
        o.set(1, 5, Some(false));
        assert_eq!(o.get(1), &[(3, false), (5, false)]);
        o.set(1, 3, None);
        o.set(1, 5, None);
        o.set(1, 9, None);
        assert_eq!(o.len(), 0);
        assert_eq!(o.fingerprints().count(), 0);
    }
}
