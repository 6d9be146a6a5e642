//! Building a table held in memory from its stored blocks.

use std::sync::{Arc, OnceLock};

use super::state::Storage;
use super::{header_count, Chunks, Codebook, Held, Packed, Slot, TableState};
use crate::codec::{BlockView, Code};

/// Builds a table held in memory from its stored blocks, pushed in key
/// order: every block's CRC is checked and its fingerprints decoded once,
/// and held packed (see [`Packed`]), so the encoded bytes need not be
/// kept; a block that fails either is kept as stored and reports its error
/// whenever it is read. Counts come from the block headers.
#[derive(Debug)]
pub struct Loader {
    number: usize,
    pub(super) keys: Vec<u64>,
    pub(super) blocks: Vec<Slot>,
    codes: Arc<Codebook>,
    /// Blocks waiting to be decoded together: slot number and a copy of
    /// the bytes (the buffers are reused).
    waiting: Vec<(usize, Vec<u8>)>,
    /// How many of `waiting` are in use.
    waiting_len: usize,
    scratch: [Vec<u64>; LOAD_LANES],
    /// Where the decoded blocks are packed, in key order.
    chunks: Chunks,
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
            chunks: Chunks::default(),
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
    pub(super) fn decode_waiting(&mut self) {
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
                Held::Packed(Packed::new_in(&self.scratch[i], &mut self.chunks))
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
        // Read at random by every probe: in huge pages when large (see
        // `crate::pages`); their number is known only now.
        TableState::from_slots(
            self.number,
            crate::pages::huge_vec(self.keys),
            crate::pages::huge_vec(self.blocks),
            self.codes,
            Storage::memory(),
        )
    }
}
