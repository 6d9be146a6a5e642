//! One permuted table held in memory: its block keys (the block index),
//! its compressed blocks and its codes. Pure: the store layer loads it from
//! and persists it to RocksDB.

mod chunks;
mod codes;
mod fill;
mod filter;
mod flat;
mod loader;
mod merge;
mod packed;
mod probe;
mod scan;
mod select;
mod state;
#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use chunks::Chunks;
pub use codes::Codebook;
pub use fill::{Filling, Piece};
pub(crate) use filter::mix;
pub use filter::Filter;
pub use flat::{Flat, FlatBuilder, FlatStart};
pub use loader::Loader;
pub use merge::{cleared, merge, merge_observed, Added, MergeOutput};
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

/// Where the id blocks of table 0's blocks are read from when they are not
/// held in memory.
pub trait IdSource: Send + Sync + std::fmt::Debug {
    /// The stored id block under `key` (a table-0 block key), if any.
    fn fetch(&self, key: u64) -> Result<Option<Arc<[u8]>>>;
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

pub(crate) use crate::simd::prefetch;
