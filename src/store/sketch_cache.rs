//! Sketches read recently, held in memory: a similarity decision among a
//! template's pages reads the same few thousand sketches for every page
//! after them, and a hash look-up costs a small share of a RocksDB read.
//!
//! Only sketches read from the store enter it, and every write that puts
//! or deletes a pair's sketch removes the pair from it once the write is
//! committed. A read that raced such a write must not put back what it
//! read before the write: each removal advances a generation, and a read's
//! sketches enter only when the generation is still the one the read
//! began in. Full, it is emptied and fills again with what is read next.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::simhash::Sketch;

/// Sketches held at most: 64 bytes each plus the 16-byte key, in a hash
/// table of twice as many slots: about 11 MB.
pub(crate) const SKETCH_CACHE_ENTRIES: usize = 65_536;

/// The cache of a store's sketches, keyed by `(fingerprint, id)`.
#[derive(Default)]
pub(crate) struct SketchCache(Mutex<Inner>);

#[derive(Default)]
struct Inner {
    /// Advanced by every removal.
    generation: u64,
    sketches: HashMap<(u64, u64), Sketch>,
}

impl SketchCache {
    /// Fills `out[i]` with the sketch of `pairs[i]` where the cache holds
    /// it (leaving the others as they are); returns the generation to
    /// [`keep`](Self::keep) what is then read of the others under.
    pub fn look_up(&self, pairs: &[(u64, u64)], out: &mut [Option<Sketch>]) -> u64 {
        let inner = self.0.lock();
        if !inner.sketches.is_empty() {
            for (pair, slot) in pairs.iter().zip(out.iter_mut()) {
                if let Some(s) = inner.sketches.get(pair) {
                    *slot = Some(*s);
                }
            }
        }
        inner.generation
    }

    /// Holds the sketches read from the store since
    /// [`look_up`](Self::look_up) returned `generation`, unless a write
    /// changed sketches since.
    pub fn keep(&self, generation: u64, read: impl Iterator<Item = ((u64, u64), Sketch)>) {
        let mut inner = self.0.lock();
        if inner.generation != generation {
            return;
        }
        for (pair, sketch) in read {
            if inner.sketches.len() >= SKETCH_CACHE_ENTRIES {
                inner.sketches.clear();
            }
            inner.sketches.insert(pair, sketch);
        }
    }

    /// Forgets `pairs`, whose sketches a committed write put or deleted.
    pub fn forget(&self, pairs: impl Iterator<Item = (u64, u64)>) {
        let mut inner = self.0.lock();
        inner.generation += 1;
        if !inner.sketches.is_empty() {
            for pair in pairs {
                inner.sketches.remove(&pair);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sketch(byte: u8) -> Sketch {
        Sketch::from_bytes([byte; 64])
    }

    #[test]
    fn holds_what_was_read_until_a_write_changes_it() {
        let cache = SketchCache::default();
        let pairs = [(1, 10), (2, 20)];
        let mut out = [None; 2];
        let g = cache.look_up(&pairs, &mut out);
        assert_eq!(out, [None, None]);
        cache.keep(g, [((1, 10), sketch(1))].into_iter());
        cache.look_up(&pairs, &mut out);
        assert_eq!(out, [Some(sketch(1)), None]);
        // A write of (1, 10) forgets it.
        cache.forget([(1, 10)].into_iter());
        let mut out = [None; 2];
        cache.look_up(&pairs, &mut out);
        assert_eq!(out, [None, None]);
    }

    #[test]
    fn a_read_that_raced_a_write_is_not_kept() {
        let cache = SketchCache::default();
        let mut out = [None];
        let g = cache.look_up(&[(1, 10)], &mut out);
        // The write lands between the read's look-up and its store read.
        cache.forget([(1, 10)].into_iter());
        cache.keep(g, [((1, 10), sketch(1))].into_iter());
        cache.look_up(&[(1, 10)], &mut out);
        assert_eq!(out, [None]);
    }

    #[test]
    fn a_full_cache_is_emptied_before_it_grows_past_its_bound() {
        let cache = SketchCache::default();
        let g = cache.look_up(&[], &mut []);
        let n = SKETCH_CACHE_ENTRIES as u64;
        cache.keep(g, (0..n + 5).map(|i| ((i, i), sketch(i as u8))));
        let held = cache.0.lock().sketches.len();
        assert_eq!(held, 5);
        let mut out = [None; 2];
        cache.look_up(&[(n + 4, n + 4), (0, 0)], &mut out);
        assert_eq!(out, [Some(sketch((n + 4) as u8)), None]);
    }
}
