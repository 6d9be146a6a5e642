//! The two families of pairs not in the id blocks (`ids` and `ids-alt`,
//! format 7): which one writers put pairs into, and whether the other may
//! still hold some.
//!
//! A merge into level 0 moves most of those pairs into id blocks, which
//! its commit makes current: the pairs it folded must go from the
//! families, while the pairs written as it ran (millions at scale, over a
//! merge of seconds) must stay. With one family, the commit either deletes
//! the folded pairs key by key or empties the family and puts back what
//! stays, either way millions of entries written with writers held off.
//! With two, the merge switches writers to the other family when it takes
//! its snapshot (that family being empty then); its commit empties the
//! first by one range delete and puts back only what stays of the
//! snapshot's pairs (the pending fingerprints it does not take in),
//! leaving the pairs written since where they are.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::error::Result;
use crate::format::keys;
use crate::storage::{Batch, Db, Family};

/// Which family writers put pairs into, and whether the other may hold
/// pairs. Both change only under the commit lock, and writers read them
/// under it.
#[derive(Debug, Default)]
pub(crate) struct IdFamilies {
    /// Index in [`keys::IDS_FAMILIES`] of the family writers put into.
    current: AtomicU8,
    /// Whether the other family may hold pairs: then every delete of a
    /// pair, and every put (which may change a pair's value), also
    /// deletes its key there, so that no key is in both.
    other_holds: AtomicBool,
}

impl IdFamilies {
    /// The families as found at open: `held[i]` says whether family `i`
    /// of [`keys::IDS_FAMILIES`] holds any pair. Writers put into the one
    /// that does when only one does (`ids` otherwise).
    pub fn new(held: [bool; 2]) -> Self {
        let current = u8::from(held[1] && !held[0]);
        Self {
            current: AtomicU8::new(current),
            other_holds: AtomicBool::new(held[0] && held[1]),
        }
    }

    /// The name of the family writers put into.
    pub fn current(&self) -> &'static str {
        keys::IDS_FAMILIES[usize::from(self.current.load(Ordering::Relaxed))]
    }

    /// The name of the other family.
    pub fn other(&self) -> &'static str {
        keys::IDS_FAMILIES[1 - usize::from(self.current.load(Ordering::Relaxed))]
    }

    /// Whether the other family may hold pairs.
    pub fn other_holds(&self) -> bool {
        self.other_holds.load(Ordering::Relaxed)
    }

    /// Switches writers to the other family when it is empty (a merge into
    /// level 0 taking its snapshot, under the commit lock); whether it did.
    pub fn switch(&self) -> bool {
        if self.other_holds() {
            return false;
        }
        self.current.fetch_xor(1, Ordering::Relaxed);
        self.other_holds.store(true, Ordering::Relaxed);
        true
    }

    /// Records that a committed batch emptied the other family (under the
    /// commit lock).
    pub fn other_emptied(&self) {
        self.other_holds.store(false, Ordering::Relaxed);
    }

    /// A writer of pairs into the current family, deleting their keys
    /// from the other when it may hold them.
    pub fn writer<'a>(&self, db: &'a Db) -> Result<IdsWriter<'a>> {
        Ok(IdsWriter {
            current: db.family(self.current())?,
            other: if self.other_holds() {
                Some(db.family(self.other())?)
            } else {
                None
            },
        })
    }
}

/// Puts and deletes the keys of pairs (see [`IdFamilies::writer`]).
pub(crate) struct IdsWriter<'a> {
    current: &'a Family,
    other: Option<&'a Family>,
}

impl<'a> IdsWriter<'a> {
    /// A writer into `current` alone (the other family being emptied
    /// earlier in the same batch).
    pub fn only(current: &'a Family) -> Self {
        Self {
            current,
            other: None,
        }
    }

    /// Puts the key of `(fp, id)` with `value`.
    pub fn put(&self, batch: &mut Batch, fp: u64, id: u64, value: &[u8]) {
        let key = keys::id_pair(fp, id);
        if let Some(other) = self.other {
            batch.delete_cf(other, key);
        }
        batch.put_cf(self.current, key, value);
    }

    /// Puts the key of `(fp, id)`, which neither family holds, with
    /// `value`: a write group's puts, each of a pair added outside the id
    /// blocks or of an id block's pair removed, neither of which has a key
    /// before (the others delete theirs).
    pub fn put_absent(&self, batch: &mut Batch, fp: u64, id: u64, value: &[u8]) {
        batch.put_cf(self.current, keys::id_pair(fp, id), value);
    }

    /// Deletes the key of `(fp, id)`.
    pub fn delete(&self, batch: &mut Batch, fp: u64, id: u64) {
        let key = keys::id_pair(fp, id);
        if let Some(other) = self.other {
            batch.delete_cf(other, key);
        }
        batch.delete_cf(self.current, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_needs_the_other_family_empty() {
        let f = IdFamilies::new([false, false]);
        assert_eq!((f.current(), f.other_holds()), (keys::IDS_FAMILY, false));
        assert!(f.switch());
        assert_eq!(
            (f.current(), f.other()),
            (keys::IDS_ALT_FAMILY, keys::IDS_FAMILY)
        );
        assert!(f.other_holds());
        assert!(
            !f.switch(),
            "the other family still holds the snapshot's pairs"
        );
        f.other_emptied();
        assert!(f.switch());
        assert_eq!(f.current(), keys::IDS_FAMILY);

        let f = IdFamilies::new([false, true]);
        assert_eq!(
            (f.current(), f.other_holds()),
            (keys::IDS_ALT_FAMILY, false)
        );
        let f = IdFamilies::new([true, true]);
        assert!(f.other_holds());
        assert!(!f.switch());
    }
}
