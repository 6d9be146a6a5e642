//! One permuted table held in memory: its block keys (the block index),
//! its compressed blocks and its codes. Pure: the store layer loads it from
//! and persists it to RocksDB.

mod codes;
mod fill;
mod loader;
mod merge;
mod packed;
mod probe;
mod scan;
mod state;
#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use codes::Codebook;
pub use fill::{Filling, Piece};
pub use loader::Loader;
pub use merge::{merge, merge_observed, Added, MergeOutput};
pub use packed::{Cursor, Packed};
pub use probe::ProbeStart;
pub(crate) use state::header_count;
pub use state::TableState;
use state::{disagreement, Held, Slot};

use crate::error::Result;

/// Where a table's blocks are read from when they are not held in memory
/// (a store whose tables exceed its memory budget).
pub trait BlockSource: Send + Sync + std::fmt::Debug {
    /// The stored bytes of table `table`'s block with key `key`.
    fn fetch(&self, table: usize, key: u64) -> Result<Arc<[u8]>>;
}

/// A block's bytes (a table's, or an id block's): borrowed from memory or
/// fetched from its source.
pub(crate) enum Bytes<'a> {
    Held(&'a [u8]),
    Fetched(Arc<[u8]>),
}

impl std::ops::Deref for Bytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Held(b) => b,
            Bytes::Fetched(b) => b,
        }
    }
}

/// Asks the processor to bring `items` into cache, without waiting.
#[inline(always)]
pub(crate) fn prefetch<T>(items: &[T]) {
    let start = items.as_ptr().cast::<u8>();
    let len = std::mem::size_of_val(items);
    let line = |at: usize| {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 processor
        // has; a prefetch is only a hint and never faults.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                start.wrapping_add(at).cast(),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    };
    let mut at = 0;
    while at < len {
        line(at);
        at += 64;
    }
    // The last line, when the range does not start on a line boundary.
    if len > 0 {
        line(len - 1);
    }
}
