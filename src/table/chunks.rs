//! Memory for the packed blocks of a table read into memory: 2 MiB
//! chunks, each aligned to 2 MiB and marked for transparent huge pages
//! (on Linux), filled block after block in key order.
//!
//! Queries read a table held in memory at random, and each probe lands on
//! a block no recent probe touched. With the blocks' words in small heap
//! allocations of 4 KiB pages, each of those reads also misses the TLB
//! (on a virtual machine, a two-dimensional page walk); in huge pages the
//! page tables of a whole table stay within the TLB's reach, and a
//! table's blocks lie in key order, back to back. Where the kernel gives
//! no huge pages (`/sys/kernel/mm/transparent_hugepage/enabled` set to
//! `never`) the chunks are ordinary pages.
//!
//! A chunk is freed when the last block packed into it is dropped. A table
//! gets chunks only past [`HEAP_FIRST`] bytes of packed blocks, so a small
//! table does not hold a whole huge page.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::pages::{self as os, HUGE_PAGE as CHUNK_BYTES};

/// Words of a chunk.
const CHUNK_WORDS: usize = CHUNK_BYTES / 8;

/// Blocks' words a table packs on the heap before it takes chunks.
const HEAP_FIRST: usize = CHUNK_BYTES / 2;

/// Blocks of more words than this go to the heap (they would waste too
/// much of a chunk's end).
const LARGEST_IN_CHUNK: usize = CHUNK_WORDS / 16;

/// A block's packed words, on the heap or in a chunk, read only once
/// made. Their number is not kept (the block's layout gives it): a
/// [`Words`] is two pointers, so a table's slot stays one cache line.
#[derive(Clone)]
pub struct Words {
    ptr: NonNull<u64>,
    /// What keeps the words alive.
    owner: Arc<Memory>,
}

/// Memory holding blocks' words.
enum Memory {
    /// One block's, on the heap.
    Heap(#[allow(dead_code)] Box<[u64]>),
    /// Many blocks' (see [`Chunks`]).
    Chunk(Chunk),
}

// SAFETY: `Words` is a shared, immutable view of memory its owner keeps
// alive, and nothing writes through it.
unsafe impl Send for Words {}
// SAFETY: as above.
unsafe impl Sync for Words {}

impl Words {
    /// `len` zeroed words filled by `fill`, on the heap.
    pub fn heap(len: usize, fill: impl FnOnce(&mut [u64])) -> Self {
        let mut words = vec![0u64; len].into_boxed_slice();
        fill(&mut words);
        Self {
            ptr: NonNull::new(words.as_mut_ptr()).unwrap_or_else(|| unreachable!()),
            owner: Arc::new(Memory::Heap(words)),
        }
    }

    /// The first `len` words.
    ///
    /// # Safety
    /// `len` is at most the number these words were made with.
    #[inline(always)]
    pub unsafe fn get(&self, len: usize) -> &[u64] {
        // SAFETY: `ptr..ptr + len` lies in memory `owner` keeps alive
        // (the caller's), initialised before this `Words` was made and
        // never written after.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len) }
    }

    /// Whether these words are in a chunk.
    #[cfg(test)]
    pub(super) fn in_chunk(&self) -> bool {
        matches!(*self.owner, Memory::Chunk(_))
    }
}

impl fmt::Debug for Words {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = match *self.owner {
            Memory::Heap(_) => "heap",
            Memory::Chunk(_) => "chunk",
        };
        f.debug_struct("Words").field("in", &place).finish()
    }
}

/// One chunk of [`CHUNK_BYTES`], zeroed when made.
struct Chunk {
    ptr: NonNull<u64>,
}

// SAFETY: a chunk is plain memory; the `Chunks` that fills it hands out
// disjoint ranges, each written once before it is shared.
unsafe impl Send for Chunk {}
// SAFETY: as above.
unsafe impl Sync for Chunk {}

impl Chunk {
    /// A new zeroed chunk, or `None` when the memory cannot be had.
    fn new() -> Option<Self> {
        let ptr = os::map_huge()?.cast();
        Some(Self { ptr })
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `os::map_huge` and is unmapped once.
        unsafe { os::unmap_huge(self.ptr.cast()) }
    }
}

/// Fills chunks with one table's blocks' words, in the order asked.
#[derive(Default)]
pub struct Chunks {
    current: Option<Arc<Memory>>,
    /// Words of `current` handed out.
    used: usize,
    /// Words packed on the heap so far (see [`HEAP_FIRST`]).
    on_heap: usize,
}

impl fmt::Debug for Chunks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chunks")
            .field("used", &self.used)
            .field("on_heap", &self.on_heap)
            .finish()
    }
}

impl Chunks {
    /// `len` zeroed words filled by `fill`: in the current chunk (or a new
    /// one) once the table has packed [`HEAP_FIRST`] bytes, on the heap
    /// before that, for a large block, or when no chunk can be had.
    pub fn words(&mut self, len: usize, fill: impl FnOnce(&mut [u64])) -> Words {
        if self.on_heap * 8 < HEAP_FIRST || len > LARGEST_IN_CHUNK {
            self.on_heap += len;
            return Words::heap(len, fill);
        }
        if self.current.is_none() || self.used + len > CHUNK_WORDS {
            match Chunk::new() {
                Some(chunk) => {
                    self.current = Some(Arc::new(Memory::Chunk(chunk)));
                    self.used = 0;
                }
                None => {
                    self.current = None;
                    return Words::heap(len, fill);
                }
            }
        }
        let Some(owner) = self.current.as_ref() else {
            unreachable!("a chunk was just made")
        };
        let Memory::Chunk(chunk) = &**owner else {
            unreachable!("`current` holds chunks only")
        };
        // SAFETY: `used..used + len` is within the chunk, zeroed, and
        // handed out only here, once; nothing reads it before `fill`
        // returns.
        let ptr = unsafe { NonNull::new_unchecked(chunk.ptr.as_ptr().add(self.used)) };
        fill(unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr(), len) });
        self.used += len;
        Words {
            ptr,
            owner: Arc::clone(owner),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_fill_chunks_in_order_and_outlive_the_filler() {
        let mut chunks = Chunks::default();
        // Past the heap's share, into several chunks.
        let n = 3 * CHUNK_WORDS / 1000;
        let blocks: Vec<Words> = (0..n)
            .map(|b| {
                chunks.words(1000, |w| {
                    for (i, x) in w.iter_mut().enumerate() {
                        assert_eq!(*x, 0, "a block's words start zeroed");
                        *x = (b * 1000 + i) as u64;
                    }
                })
            })
            .collect();
        drop(chunks);
        let in_chunks = blocks.iter().filter(|w| w.in_chunk()).count();
        assert!(in_chunks > n / 2, "{in_chunks} of {n}");
        for (b, w) in blocks.iter().enumerate() {
            // SAFETY: each was made with 1000 words.
            let w = unsafe { w.get(1000) };
            assert!(w
                .iter()
                .enumerate()
                .all(|(i, &x)| x == (b * 1000 + i) as u64));
        }
        // A clone outlives the others.
        let last = blocks.last().cloned().expect("blocks");
        drop(blocks);
        // SAFETY: as above.
        assert_eq!(unsafe { last.get(1000) }[999], (n * 1000 - 1) as u64);
    }

    #[test]
    fn large_blocks_and_small_tables_stay_on_the_heap() {
        let mut chunks = Chunks::default();
        let small = chunks.words(10, |w| w[9] = 9);
        assert!(!small.in_chunk());
        // SAFETY: made with 10 words.
        assert_eq!(unsafe { small.get(10) }[9], 9);
        let mut chunks = Chunks {
            on_heap: HEAP_FIRST,
            ..Chunks::default()
        };
        let large = chunks.words(LARGEST_IN_CHUNK + 1, |w| w[0] = 1);
        assert!(!large.in_chunk());
        let next = chunks.words(4, |w| w[3] = 3);
        assert!(next.in_chunk());
        // SAFETY: made with these many words.
        unsafe {
            assert_eq!((large.get(1)[0], next.get(4)[3]), (1, 3));
        }
        let empty = chunks.words(0, |_| {});
        // SAFETY: made with none.
        assert!(unsafe { empty.get(0) }.is_empty());
    }
}
