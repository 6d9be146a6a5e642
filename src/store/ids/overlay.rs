//! The overlay: pairs written since their fingerprint's id block was,
//! sharded by fingerprint, and the sets and hashers its maps use.

use std::collections::HashMap;
use std::sync::Arc;

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
    pub(super) shards: Vec<HashMap<u64, Entries, MixHasher>>,
    pub(super) entries: usize,
}

/// Maps an overlay spreads its fingerprints over (see [`Overlay`]).
pub(super) const SHARDS: usize = 1 << 10;

/// The shard of `fp`: ten bits of its hash from the middle, which a map
/// of fewer than 2^32 buckets does not use (`hashbrown` places an entry by
/// the low bits and tags it with the top seven).
pub(super) fn shard_of(fp: u64) -> usize {
    (crate::table::mix(fp) >> 32) as usize & (SHARDS - 1)
}

/// An empty map with room for `fingerprints`.
pub(super) fn map_with_room(fingerprints: usize) -> HashMap<u64, Entries, MixHasher> {
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
    pub(super) fn sorted(&self) -> Vec<(u64, Entries)> {
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
pub(super) const APPLY_BY_MERGE: usize = 16;

/// Applies overlay entries (by id) to increasing `ids[start..]`.
pub(super) fn apply(list: &[(u64, bool)], ids: &mut Vec<u64>, start: usize) {
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
pub(super) fn merge_changes<T: Copy, C>(
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
