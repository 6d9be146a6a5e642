//! `stats`: counts and sizes of a store.

use std::path::Path;

use super::shared::Shared;

/// Counts and sizes of a store at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Live fingerprints.
    pub fingerprints: u64,
    /// (fingerprint, id) pairs.
    pub ids: u64,
    /// Number of permuted tables (per level).
    pub tables: usize,
    /// The largest distance the tables answer.
    pub max_distance: u32,
    /// Blocks over all tables.
    pub blocks: u64,
    /// Fingerprints appended but not yet merged into blocks.
    pub pending: u64,
    /// Fingerprints deleted but still in blocks.
    pub tombstones: u64,
    /// Encoded block bytes over all tables, headers included.
    pub table_bytes: u64,
    /// Bytes of the id blocks (the ids of fingerprints in the tables) as
    /// stored, by RocksDB's accounting.
    pub id_bytes: u64,
    /// Bytes of all files in the store directory.
    pub bytes_on_disk: u64,
    /// Each table's prefix width, in table order.
    pub prefix_bits: Vec<u8>,
    /// The block count `r` of the plan.
    pub plan_blocks: u8,
    /// The expected size the plan was made for.
    pub expected_size: u64,
    /// The message of the last failed background compaction, if the most
    /// recent one failed.
    pub compaction_error: Option<String>,
    /// Whether this handle holds the tables' blocks in memory (`false`:
    /// they exceeded the memory budget at open and probes read them
    /// through RocksDB; see [`Options::memory_budget`](super::Options::memory_budget)).
    pub tables_in_memory: bool,
    /// Whether the store keeps similarity sketches.
    pub sketches: bool,
    /// The number of sample documents of the store's document
    /// frequencies, if it has them.
    pub idf_documents: Option<u32>,
    /// Each level's tables, level 0 (the largest, with the id blocks)
    /// first.
    pub levels: Vec<LevelStats>,
    /// Bytes of blocks and id blocks written by merges (compactions and
    /// bulk inserts) since this handle opened the store, as encoded
    /// (RocksDB adds its own write-ahead log and compaction writes).
    pub merge_bytes_written: u64,
    /// Bytes of the uncompressed copy of the levels above level 0 that
    /// queries probe with level 0's tables (8 bytes a fingerprint a table,
    /// and their directories); `None` while it is not built (until the
    /// tables are read into memory, or when they are not held there).
    pub upper_set_bytes: Option<u64>,
    /// Bytes of the flat copy of a one-table store's level 0 that header
    /// probes read instead of its blocks (about `64 - header + 2.5` bits
    /// a fingerprint); `None` while it is not built (until the table is
    /// read into memory, when it is not held there, while it is rebuilt
    /// after a merge that could not hold two within the memory budget, or
    /// on a store of several tables).
    pub flat_bytes: Option<u64>,
}

/// Counts and sizes of one level of tables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LevelStats {
    /// Fingerprints in the level (tombstoned or not).
    pub fingerprints: u64,
    /// Blocks over the level's tables.
    pub blocks: u64,
    /// Encoded block bytes over the level's tables.
    pub bytes: u64,
}

pub(crate) fn stats(shared: &Shared) -> Stats {
    let state = shared.state.read();
    Stats {
        fingerprints: state.fingerprints(),
        ids: state.ids,
        tables: state.per_level,
        max_distance: u32::from(shared.plan.max_distance()),
        blocks: state.tables.iter().map(|t| t.keys().len() as u64).sum(),
        pending: state.pending.len() as u64,
        tombstones: state.tombstones.len() as u64,
        table_bytes: state.tables.iter().map(|t| t.encoded_bytes()).sum(),
        id_bytes: shared.db.id_block_bytes().unwrap_or(0),
        bytes_on_disk: dir_size(&shared.dir),
        prefix_bits: shared.plan.tables().iter().map(|t| t.prefix_bits).collect(),
        plan_blocks: shared.plan.blocks(),
        expected_size: shared.expected_size,
        compaction_error: shared.health.last_failure(),
        tables_in_memory: state.tables.iter().all(|t| t.in_memory()),
        sketches: shared.sketches,
        idf_documents: shared.idf.as_ref().map(|i| i.documents()),
        levels: (0..state.levels())
            .map(|l| {
                let tables = state.level_tables(l);
                LevelStats {
                    fingerprints: state.level(l).fingerprints(),
                    blocks: tables.iter().map(|t| t.keys().len() as u64).sum(),
                    bytes: tables.iter().map(|t| t.encoded_bytes()).sum(),
                }
            })
            .collect(),
        upper_set_bytes: state.upper.as_ref().map(|u| u.heap_bytes()),
        flat_bytes: state
            .tables
            .first()
            .and_then(|t| t.flat())
            .map(|f| f.heap_bytes() as u64),
        merge_bytes_written: shared
            .merge_bytes
            .load(std::sync::atomic::Ordering::Relaxed),
    }
}

/// Total size of the files under `dir` (unreadable entries count as 0).
fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
