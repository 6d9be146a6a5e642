//! Merging added and removed fingerprints into a table, rewriting only the
//! blocks the changes fall into (plus a neighbour when a rewritten run
//! would end in an underfull block).

use std::borrow::Cow;
use std::sync::Arc;

use super::{Held, Packed, Slot, TableState};
use crate::codec::{delta_histogram, encode_blocks_into, Code, SYMBOLS};
use crate::error::{Error, Result};
use crate::index;

/// The result of merging changes into one table.
#[derive(Debug, Clone)]
pub struct MergeOutput {
    /// The new in-memory table.
    pub state: TableState,
    /// Keys of old blocks that were rewritten or dropped.
    pub removed: Vec<u64>,
    /// New blocks, in key order.
    pub added: Added,
    /// A new code the added blocks use, to be stored under this id.
    pub new_code: Option<(u32, Arc<Code>)>,
}

/// The blocks a merge wrote, back to back in one buffer: a whole table
/// rewritten takes one allocation, given back at once when it is dropped
/// (once its blocks are in the write batch), not block by block.
#[derive(Debug, Clone, Default)]
pub struct Added {
    keys: Vec<u64>,
    /// Where each block ends in `bytes`.
    ends: Vec<usize>,
    bytes: Vec<u8>,
}

impl Added {
    /// Appends a block; keys must increase.
    pub fn push(&mut self, key: u64, block: &[u8]) {
        self.bytes.extend_from_slice(block);
        self.keys.push(key);
        self.ends.push(self.bytes.len());
    }

    /// Encodes strictly increasing `fps` into blocks appended after the
    /// others (see [`encode_blocks_into`]), each keyed by its first value.
    fn encode(&mut self, fps: &[u64], code: &Code, code_id: u32, max_len: usize) -> Result<()> {
        let bytes = std::mem::take(&mut self.bytes);
        let start = bytes.len();
        let (bytes, ends) =
            encode_blocks_into(fps, code, code_id, max_len, bytes).map_err(|e| {
                Error::InvalidArgument(format!("merge produced unencodable input: {e}"))
            })?;
        self.bytes = bytes;
        let mut offset = 0;
        let mut from = start;
        for end in ends {
            self.keys.push(fps[offset]);
            self.ends.push(end);
            offset += usize::from(crate::table::header_count(&self.bytes[from..end]));
            from = end;
        }
        Ok(())
    }

    /// Block `i`'s bytes.
    fn block(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// Drops every block from the `len`-th on.
    fn truncate(&mut self, len: usize) {
        self.keys.truncate(len);
        self.ends.truncate(len);
        self.bytes.truncate(self.ends.last().copied().unwrap_or(0));
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The blocks' keys, increasing.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Bytes of all the blocks.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// The blocks `(key, bytes)`, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        (0..self.len()).map(|i| (self.keys[i], self.block(i)))
    }
}

/// A maximal run of consecutive blocks touched by the changes, decoded and
/// merged.
struct Run<'a> {
    start: usize,
    end: usize,
    /// Borrowed from the adds when the run is only adds (a table being
    /// filled): no copy of a whole table's values.
    fps: Cow<'a, [u64]>,
}

/// Merges strictly increasing permuted `adds` into the table and removes
/// the permuted `removes` (absent ones are ignored). Blocks are at most
/// `block_size` bytes; a rewritten run whose last block would be less than
/// half full absorbs the next block.
pub fn merge(
    old: &TableState,
    adds: &[u64],
    removes: &[u64],
    block_size: usize,
) -> Result<MergeOutput> {
    merge_observed(old, adds, removes, block_size, &mut |_, _| Ok(()))
}

/// [`merge`], calling `observe(key, values)` with every new block's key
/// and permuted fingerprints, in key order, as it is written (so a caller
/// can build what it keeps beside the blocks).
pub fn merge_observed(
    old: &TableState,
    adds: &[u64],
    removes: &[u64],
    block_size: usize,
    observe: &mut dyn FnMut(u64, &[u64]) -> Result<()>,
) -> Result<MergeOutput> {
    let n = old.keys.len();
    let changes = union(&touched(&old.keys, adds), &touched(&old.keys, removes));

    // Pass 1: decode and merge every touched run.
    let mut runs = Vec::new();
    let mut scratch = Vec::new();
    let mut i = 0;
    while i < changes.len() {
        let start = changes[i];
        let mut end = start + 1;
        i += 1;
        while i < changes.len() && changes[i] == end {
            end += 1;
            i += 1;
        }
        let mut fps = Vec::new();
        for j in start..end.min(n) {
            old.decode_block(j, &mut scratch)?;
            fps.extend_from_slice(&scratch);
        }
        let lo = if start == 0 { 0 } else { old.keys[start] };
        let hi = if end >= n {
            u64::MAX
        } else {
            old.keys[end] - 1
        };
        let run_adds = slice_in(adds, lo, hi);
        let run_removes = slice_in(removes, lo, hi);
        let fps =
            if fps.is_empty() && run_removes.is_empty() && run_adds.windows(2).all(|w| w[0] < w[1])
            {
                Cow::Borrowed(run_adds)
            } else {
                Cow::Owned(apply(&fps, run_adds, run_removes))
            };
        runs.push(Run {
            start,
            end: end.min(n),
            fps,
        });
    }

    // Choose the code from the measured distribution of what is rewritten.
    let mut counts = [0u64; SYMBOLS];
    for run in &runs {
        delta_histogram(&run.fps, &mut counts);
    }
    let (codes, new_code) = match old.codes.rebuild_for(&counts) {
        Some(code) => {
            let (id, book) = old.codes.with(code);
            let book = Arc::new(book);
            let code = book.get(id).map(|c| Arc::new(c.clone()));
            (book, code.map(|c| (id, c)))
        }
        None => (Arc::clone(&old.codes), None),
    };
    let (code_id, code) = codes
        .current()
        .ok_or_else(|| Error::InvalidArgument("table has no code after merge".into()))?;

    // Pass 2: re-encode the runs. An underfull last block is rebalanced
    // with the block before it; a run that fits in one underfull block
    // absorbs the next block once. Neither cascades, so a small change
    // rewrites a bounded number of blocks.
    // Read at random by every probe: in huge pages when large (see
    // `crate::pages`), with room for the blocks the adds may need at the
    // old table's mean count a block (or at 8 bytes a fingerprint).
    let per_block = match n {
        0 => (block_size / 8).max(1),
        _ => (old.fingerprints / n as u64).max(1) as usize,
    };
    let room = n + runs.len() + adds.len().div_ceil(per_block);
    let mut keys = crate::pages::with_capacity(room);
    let mut blocks: Vec<Slot> = crate::pages::with_capacity(room);
    let mut removed = Vec::new();
    let mut added = Added::default();
    let mut carry: Vec<u64> = Vec::new();
    let mut runs = runs.into_iter().peekable();
    let mut j = 0;
    let underfull = |b: &[u8]| b.len() < block_size / 2;
    loop {
        let absorbing = !carry.is_empty();
        let fps = if runs.peek().is_some_and(|r| r.start == j) {
            let run = runs.next().unwrap_or_else(|| unreachable!("peeked"));
            removed.extend_from_slice(&old.keys[run.start..run.end]);
            j = run.end;
            take_joined(&mut carry, run.fps)
        } else if absorbing && j < n {
            old.decode_block(j, &mut scratch)?;
            removed.push(old.keys[j]);
            j += 1;
            take_joined(&mut carry, Cow::Owned(std::mem::take(&mut scratch)))
        } else if j < n {
            keys.push(old.keys[j]);
            blocks.push(old.blocks[j].clone());
            j += 1;
            continue;
        } else if absorbing {
            Cow::Owned(std::mem::take(&mut carry))
        } else {
            break;
        };
        let first = added.len();
        added.encode(&fps, code, code_id, block_size)?;
        match added.len() - first {
            1 if j < n && !absorbing && underfull(added.block(first)) => {
                added.truncate(first);
                carry = fps.into_owned();
                continue;
            }
            len if len >= 2 && underfull(added.block(first + len - 1)) => {
                let last_two: usize = (first + len - 2..first + len)
                    .map(|i| usize::from(crate::table::header_count(added.block(i))))
                    .sum();
                let (a, b) = fps[fps.len() - last_two..].split_at(last_two / 2);
                added.truncate(first + len - 2);
                added.encode(a, code, code_id, block_size)?;
                added.encode(b, code, code_id, block_size)?;
            }
            _ => {}
        }
        let mut offset = 0;
        for i in first..added.len() {
            let bytes = added.block(i);
            let key = added.keys[i];
            let count = crate::table::header_count(bytes);
            let values = &fps[offset..offset + usize::from(count)];
            offset += usize::from(count);
            observe(key, values)?;
            keys.push(key);
            blocks.push(Slot {
                // Packed from the values just encoded. A table on disk
                // keeps only the new block's size; the caller writes
                // `added` before the new state is used, and blocks read
                // back from disk are checked on every read.
                held: if old.storage.memory {
                    std::sync::OnceLock::from(Held::Packed(Packed::new(values)))
                } else {
                    std::sync::OnceLock::new()
                },
                len: bytes.len() as u32,
                count,
            });
        }
    }
    if keys.capacity() > room {
        // Grown past the room made: no longer in the advised memory.
        keys = crate::pages::huge_vec(keys);
        blocks = crate::pages::huge_vec(blocks);
    }
    let state = TableState::from_slots(old.number, keys, blocks, codes, old.storage.clone());
    Ok(MergeOutput {
        state,
        removed,
        added,
        new_code,
    })
}

/// Every block of `old` dropped: the table emptied (a level merged into
/// the one below it), keeping its codes so code ids never repeat.
pub fn cleared(old: &TableState) -> MergeOutput {
    MergeOutput {
        state: TableState::from_slots(
            old.number,
            Vec::new(),
            Vec::new(),
            Arc::clone(&old.codes),
            old.storage.clone(),
        ),
        removed: old.keys.to_vec(),
        added: Added::default(),
        new_code: None,
    }
}

/// The blocks (indexes into `keys`, increasing) whose ranges hold the
/// sorted `values`: block `j` holds the values from its key up to the next
/// block's (block 0 also those below its key; an empty table has block 0).
/// Each block is located once and the values it holds are skipped by a
/// binary search, so a bulk merge of N values into B blocks costs about
/// B log N, not a block search and a sort key per value.
fn touched(keys: &[u64], values: &[u64]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = values;
    while let Some(&v) = rest.first() {
        let j = index::locate(keys, v).unwrap_or(0);
        out.push(j);
        let Some(&next) = keys.get(j + 1) else { break };
        rest = &rest[rest.partition_point(|&x| x < next)..];
    }
    out
}

/// The sorted union, without repeats, of two increasing lists.
fn union(a: &[usize], b: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) if x <= y => {
                i += 1;
                j += usize::from(x == y);
                x
            }
            (_, Some(&y)) => {
                j += 1;
                y
            }
            (Some(&x), None) => {
                i += 1;
                x
            }
            (None, None) => break,
        };
        out.push(next);
    }
    out
}

/// `carry` followed by `more`, leaving `carry` empty.
fn take_joined<'a>(carry: &mut Vec<u64>, more: Cow<'a, [u64]>) -> Cow<'a, [u64]> {
    if carry.is_empty() {
        return more;
    }
    let mut v = std::mem::take(carry);
    v.extend_from_slice(&more);
    Cow::Owned(v)
}

/// The part of sorted `values` within `lo..=hi`.
fn slice_in(values: &[u64], lo: u64, hi: u64) -> &[u64] {
    let a = values.partition_point(|&v| v < lo);
    let b = values.partition_point(|&v| v <= hi);
    &values[a..b.max(a)]
}

/// Sorted `(fps ∖ removes) ∪ adds` without duplicates.
fn apply(fps: &[u64], adds: &[u64], removes: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(fps.len() + adds.len());
    let (mut a, mut r) = (0, 0);
    let push = |v: u64, out: &mut Vec<u64>| {
        if out.last() != Some(&v) {
            out.push(v);
        }
    };
    for &fp in fps {
        while a < adds.len() && adds[a] < fp {
            push(adds[a], &mut out);
            a += 1;
        }
        while r < removes.len() && removes[r] < fp {
            r += 1;
        }
        if r < removes.len() && removes[r] == fp {
            continue;
        }
        push(fp, &mut out);
    }
    for &v in &adds[a..] {
        push(v, &mut out);
    }
    out
}

/// A table with no blocks and no codes.
#[cfg(test)]
fn empty(number: usize) -> TableState {
    TableState::new(
        number,
        Vec::new(),
        Vec::new(),
        Arc::new(super::Codebook::default()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn all(t: &TableState) -> Vec<u64> {
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        for j in 0..t.keys.len() {
            t.decode_block(j, &mut scratch).unwrap();
            assert_eq!(scratch[0], t.keys[j]);
            out.extend_from_slice(&scratch);
        }
        out
    }

    /// A seeded generator of numbers below its argument.
    fn below(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut x = seed;
        move |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 11) % m
        }
    }

    /// The touched blocks are those a per-value search finds, sorted
    /// without repeats (values below the first key, past the last, on
    /// keys, an empty table, empty lists).
    #[test]
    fn touched_blocks_match_a_search_per_value() {
        let mut next = below(7);
        for round in 0..300 {
            let keys: BTreeSet<u64> = (0..next(12)).map(|_| next(1000)).collect();
            let keys: Vec<u64> = keys.into_iter().collect();
            let list = |next: &mut dyn FnMut(u64) -> u64| {
                let mut v: Vec<u64> = (0..next(30))
                    .map(|i| match i % 3 {
                        0 => keys.get(next(13) as usize).copied().unwrap_or(5),
                        _ => next(1100),
                    })
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let (a, b) = (list(&mut next), list(&mut next));
            let naive: BTreeSet<usize> = a
                .iter()
                .chain(&b)
                .map(|&v| index::locate(&keys, v).unwrap_or(0))
                .collect();
            let got = union(&touched(&keys, &a), &touched(&keys, &b));
            assert_eq!(got, naive.into_iter().collect::<Vec<_>>(), "round {round}");
        }
    }

    #[test]
    fn merges_match_a_set_model_with_tiny_blocks() {
        let mut next = below(99);
        for block_size in [40usize, 64, 1024] {
            let mut model = BTreeSet::new();
            let mut t = empty(0);
            for round in 0..40 {
                let space = if round % 3 == 0 {
                    1 << 20
                } else {
                    u64::MAX >> 1
                };
                let adds: BTreeSet<u64> = (0..next(300)).map(|_| next(space)).collect();
                let mut removes: BTreeSet<u64> =
                    model.iter().copied().filter(|_| next(4) == 0).collect();
                removes.extend((0..3).map(|_| next(space)));
                let adds: Vec<u64> = adds.into_iter().filter(|v| !removes.contains(v)).collect();
                let removes: Vec<u64> = removes.into_iter().collect();
                let out = merge(&t, &adds, &removes, block_size).unwrap();
                for v in &removes {
                    model.remove(v);
                }
                model.extend(adds.iter().copied());
                let got = all(&out.state);
                assert_eq!(got, model.iter().copied().collect::<Vec<_>>());
                assert_eq!(out.state.fingerprints(), model.len() as u64);
                assert!(out.state.block_lens().all(|len| len as usize <= block_size));
                // Blocks not rewritten are shared, not copied.
                let kept = out.state.keys().len() - out.added.len();
                assert_eq!(kept, t.keys().len() - out.removed.len());
                // Underfull blocks only at a table's end or next to one that is.
                let under: Vec<bool> = out
                    .state
                    .block_lens()
                    .map(|len| (len as usize) < block_size / 2)
                    .collect();
                assert!(under.windows(2).all(|w| !(w[0] && w[1])) || block_size == 40);
                t = out.state;
            }
        }
    }

    #[test]
    fn codes_are_rebuilt_as_density_grows_and_old_blocks_still_decode() {
        let mut x = 5u64;
        let mut t = empty(0);
        let mut model = BTreeSet::new();
        // The code id of every block of the table, by key.
        let mut code_of = std::collections::BTreeMap::new();
        for round in 0..6u32 {
            // Each round adds values in a narrower range, shifting the deltas.
            let span = u64::MAX >> (round * 6);
            let adds: BTreeSet<u64> = (0..3000)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (x >> 3) % span
                })
                .collect();
            let adds: Vec<u64> = adds.into_iter().filter(|v| !model.contains(v)).collect();
            model.extend(adds.iter().copied());
            let out = merge(&t, &adds, &[], 256).unwrap();
            for key in &out.removed {
                code_of.remove(key);
            }
            for (key, bytes) in out.added.iter() {
                let id = crate::codec::BlockView::parse(bytes).unwrap().code_id();
                code_of.insert(key, id);
            }
            t = out.state;
            assert_eq!(code_of.keys().copied().collect::<Vec<_>>(), t.keys());
            assert_eq!(all(&t), model.iter().copied().collect::<Vec<_>>());
        }
        assert!(t.codes().len() > 2, "only {} codes built", t.codes().len());
        let ids: BTreeSet<u32> = code_of.values().copied().collect();
        assert!(ids.len() > 1, "all blocks use one code: {ids:?}");
    }

    #[test]
    fn small_merge_touches_few_blocks() {
        let base: Vec<u64> = (0..20_000u64).map(|i| i * 0x0000_1000_0000_0001).collect();
        let full = merge(&empty(0), &base, &[], 1024).unwrap();
        let blocks = full.state.keys().len();
        assert!(blocks > 50);
        let out = merge(&full.state, &[base[5000] + 1], &[], 1024).unwrap();
        assert!(
            out.removed.len() <= 2,
            "rewrote {} of {blocks} blocks",
            out.removed.len()
        );
        assert!(out.added.len() <= 3);
    }
}
