//! Every stored fingerprint with its ids, in increasing order (see
//! [`Store::export`](super::Store::export)).
//!
//! Each level's table 0 holds that level's fingerprints unpermuted, in
//! increasing order, so the levels and the (sorted) pending fingerprints
//! are merged as sorted streams, a block of each level decoded at a time.
//! A level-0 fingerprint's ids start from its id block, read once per
//! table-0 block; every fingerprint's then get the overlay's changes, as a
//! query's do.

use std::sync::Arc;

use super::ids::parsed_at;
use super::state::State;
use crate::error::Result;
use crate::plan::Plan;
use crate::table::TableState;

/// One level's fingerprints, decoded a block at a time.
struct Cursor<'a> {
    table: &'a TableState,
    /// Whether the level is level 0 (whose fingerprints have id blocks).
    base: bool,
    /// The next block to decode.
    next: usize,
    /// The decoded block (`next - 1`) and the place in it.
    values: Vec<u64>,
    at: usize,
    /// The id block of the decoded block, for level 0.
    ids: Option<Arc<[u8]>>,
}

impl<'a> Cursor<'a> {
    fn new(table: &'a TableState, base: bool) -> Self {
        Self {
            table,
            base,
            next: 0,
            values: Vec::new(),
            at: 0,
            ids: None,
        }
    }

    /// The fingerprint at the cursor, decoding the next block when the
    /// current one is done; `None` at the level's end.
    fn peek(&mut self, state: &State) -> Result<Option<u64>> {
        while self.at == self.values.len() {
            if self.next == self.table.keys().len() {
                return Ok(None);
            }
            self.table.decode_block(self.next, &mut self.values)?;
            self.ids = if self.base {
                Some(state.id_table.shared_block(self.table, self.next)?)
            } else {
                None
            };
            self.next += 1;
            self.at = 0;
        }
        Ok(Some(self.values[self.at]))
    }

    /// Moves past the fingerprint at the cursor, putting its id block's
    /// ids (none outside level 0) into `ids`.
    fn take(&mut self, ids: &mut Vec<u64>) -> Result<()> {
        if let Some(bytes) = &self.ids {
            let j = self.next - 1;
            parsed_at(bytes, self.table.keys()[j], self.at)?.ids_into(self.at, ids);
        }
        self.at += 1;
        Ok(())
    }
}

/// Calls `visit` with every fingerprint `state` stores and its ids
/// (increasing), in increasing order of fingerprint, until it returns
/// `false`; returns how many fingerprints it was given.
pub(crate) fn export(
    plan: &Plan,
    state: &State,
    mut visit: impl FnMut(u64, &[u64]) -> bool,
) -> Result<u64> {
    // Table 0's permutation is the identity in every plan: `all` and
    // each level's table 0 are in fingerprint order.
    let pending = state.pending.all(plan);
    let mut pending = pending.iter().copied().peekable();
    let mut levels: Vec<Cursor<'_>> = (0..state.levels())
        .filter(|&l| state.level(l).fingerprints() > 0)
        .map(|l| Cursor::new(state.level(l), l == 0))
        .collect();
    let mut ids = Vec::new();
    let mut given = 0u64;
    let mut last = None;
    loop {
        // The smallest fingerprint at any cursor, and where it is.
        let mut next = pending.peek().map(|&fp| (fp, None));
        for (i, level) in levels.iter_mut().enumerate() {
            if let Some(fp) = level.peek(state)? {
                if next.is_none_or(|(best, _)| fp < best) {
                    next = Some((fp, Some(i)));
                }
            }
        }
        let Some((fp, from)) = next else {
            return Ok(given);
        };
        ids.clear();
        let stored = match from {
            None => {
                pending.next();
                true
            }
            Some(i) => {
                levels[i].take(&mut ids)?;
                !state.tombstones.contains(&fp)
            }
        };
        // The levels and the pending set are disjoint (`verify` checks
        // it); a fingerprint is given once even if they are not.
        if !stored || last == Some(fp) {
            continue;
        }
        last = Some(fp);
        state.overlay.apply(fp, &mut ids);
        given += 1;
        if !visit(fp, &ids) {
            return Ok(given);
        }
    }
}
