//! Filling a table opened from its index (see [`TableState::lazy`]) from a
//! full read of its stored blocks, delivered in key-ordered pieces so the
//! read never holds a second copy of the table's slots.

use super::{disagreement, Held, Loader, Slot, TableState};

/// Blocks a [`Loader`] read since its last piece, in key order.
pub struct Piece {
    keys: Vec<u64>,
    blocks: Vec<Slot>,
}

impl Loader {
    /// The blocks added since the last piece (decoded); the loader goes on
    /// with the blocks that follow them.
    pub fn take_piece(&mut self) -> Piece {
        self.decode_waiting();
        Piece {
            keys: std::mem::take(&mut self.keys),
            blocks: std::mem::take(&mut self.blocks),
        }
    }
}

/// A fill in progress: the pieces seen so far cover this table's blocks
/// up to `next`.
pub struct Filling<'a> {
    table: &'a TableState,
    next: usize,
    problems: Vec<(u64, String)>,
}

impl TableState {
    /// Starts filling this table's unread blocks from a full read of its
    /// stored blocks, given to [`Filling::fill`] piece by piece in key
    /// order.
    pub fn filling(&self) -> Filling<'_> {
        Filling {
            table: self,
            next: 0,
            problems: Vec::new(),
        }
    }

    /// Holds the unread blocks as `fresh` does, the same table as read from
    /// disk in full (by a [`Loader`], which may leave out blocks held
    /// here): [`filling`](Self::filling) with one piece.
    pub fn fill_from(&self, fresh: &TableState) -> Vec<(u64, String)> {
        let mut filling = self.filling();
        filling.fill_slots(&fresh.keys, &fresh.blocks);
        filling.finish()
    }
}

impl Filling<'_> {
    /// Takes the next piece of the read. A block whose key, length and
    /// count agree with the table's index is held as the piece holds it
    /// (not at all when the loader left it out, being held here already);
    /// one that does not is corrupt, as is every listed block the read
    /// passed without finding. A block the index does not list is reported
    /// against the block whose range holds it (see
    /// [`TableState::settled`]).
    pub fn fill(&mut self, piece: &Piece) {
        self.fill_slots(&piece.keys, &piece.blocks);
    }

    fn fill_slots(&mut self, keys: &[u64], found: &[Slot]) {
        let listed = &self.table.keys;
        for (&key, found) in keys.iter().zip(found) {
            while listed.get(self.next).is_some_and(|&k| k < key) {
                self.missing();
            }
            if listed.get(self.next) == Some(&key) {
                let slot = &self.table.blocks[self.next];
                let held = match disagreement(found.len as usize, usize::from(found.count), slot) {
                    None => found.held.get().cloned(),
                    corrupt => corrupt,
                };
                self.hold(held);
            } else {
                self.problems.push((
                    listed
                        .get(self.next.saturating_sub(1))
                        .copied()
                        .unwrap_or(0),
                    format!("block {key:016x} is stored but missing from the table index"),
                ));
            }
        }
    }

    /// Holds `held` (if any) in the next listed block's slot, noting it
    /// when it is corrupt.
    fn hold(&mut self, held: Option<Held>) {
        let key = self.table.keys[self.next];
        if let Some(Held::Corrupt(reason)) = &held {
            self.problems.push((key, reason.to_string()));
        }
        if let Some(held) = held {
            let _ = self.table.blocks[self.next].held.set(held);
        }
        self.next += 1;
    }

    /// The next listed block was not found by the read.
    fn missing(&mut self) {
        self.hold(Some(Held::Corrupt(
            "the block the table index lists is missing".into(),
        )));
    }

    /// Ends the fill: listed blocks the read did not reach are missing.
    /// Returns the problems found.
    pub fn finish(mut self) -> Vec<(u64, String)> {
        while self.next < self.table.keys.len() {
            self.missing();
        }
        self.problems
    }
}
