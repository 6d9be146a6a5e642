//! What a write group reads of a fingerprint's ids before it changes
//! them: the id block holding them and the fingerprint's overlay entries,
//! asked one id at a time, listed only when a delete needs them all.

use super::ids::{Entries, IdPlace, Overlay};
use super::state::State;
use crate::error::Result;
use crate::plan::Plan;

/// A fingerprint's ids before a write group: its id block's (see
/// [`ids`](super::ids)), less the pairs its overlay entries remove, plus
/// those they add. "Is this pair stored?", all an insert asks, is
/// answered by a look-up in the entries and a binary search of the
/// block, decoding none of the others: a group adding one document to a
/// fingerprint with 300K ids (an empty page) costs about what one adding
/// it to any other does.
#[derive(Debug, Default)]
pub(super) struct Before {
    /// Where the fingerprint's id-block ids are, when level 0 holds it.
    block: Option<IdPlace>,
    /// Its overlay entries, when it has any.
    entries: Option<Entries>,
    /// All its ids, increasing, once listed.
    all: Option<Vec<u64>>,
}

impl Before {
    /// `fp`'s ids in `state`: its id block when `in_tables` (level 0 may
    /// hold it), its overlay entries when it is stored at all (a
    /// fingerprint in no level and not pending has none: see
    /// [`Overlay`]).
    pub fn read(
        state: &State,
        plan: &Plan,
        fp: u64,
        in_tables: bool,
        stored: bool,
    ) -> Result<Self> {
        if !stored {
            return Ok(Self::default());
        }
        let block = if in_tables {
            state.base_block(plan, fp)?
        } else {
            None
        };
        let before = Self {
            block,
            entries: state.overlay.shared(fp),
            all: None,
        };
        if let Some(block) = &before.block {
            block.parsed()?;
        }
        Ok(before)
    }

    /// Whether `id` is in the fingerprint's id block.
    pub fn in_block(&self, id: u64) -> Result<bool> {
        match &self.block {
            Some(b) => Ok(b.parsed()?.contains(b.position, id)),
            None => Ok(false),
        }
    }

    /// The fingerprint's overlay entries, by id.
    fn entries(&self) -> &[(u64, bool)] {
        self.entries.as_ref().map_or(&[], Entries::as_slice)
    }

    /// Whether the fingerprint had `id`.
    pub fn has(&self, id: u64) -> Result<bool> {
        let entries = self.entries();
        match entries.binary_search_by_key(&id, |&(i, _)| i) {
            Ok(at) => Ok(entries[at].1),
            Err(_) => self.in_block(id),
        }
    }

    /// How many ids the fingerprint had: its block's, with each entry
    /// that changes them counted.
    pub fn count(&self) -> Result<usize> {
        let mut count = match &self.block {
            Some(b) => b.parsed()?.len_at(b.position),
            None => 0,
        };
        for &(id, added) in self.entries() {
            match (added, self.in_block(id)?) {
                (true, false) => count += 1,
                (false, true) => count = count.saturating_sub(1),
                _ => {}
            }
        }
        Ok(count)
    }

    /// Every id the fingerprint had, increasing: decoded and listed once.
    pub fn all(&mut self) -> Result<&[u64]> {
        let all = match self.all.take() {
            Some(all) => all,
            None => {
                let mut all = Vec::new();
                if let Some(b) = &self.block {
                    b.parsed()?.ids_into(b.position, &mut all);
                }
                Overlay::apply_entries(self.entries(), &mut all);
                all
            }
        };
        Ok(self.all.insert(all))
    }
}
