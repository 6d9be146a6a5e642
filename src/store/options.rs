//! Options for creating and opening a store.

use crate::plan::MAX_SUPPORTED_DISTANCE;

/// The default maximum distance a store is created with.
pub const DEFAULT_MAX_DISTANCE: u32 = 3;
/// The default expected collection size given to the planner.
pub const DEFAULT_EXPECTED_SIZE: u64 = 10_000_000;
/// The default block size, in bytes (Manku §3.2).
pub const DEFAULT_BLOCK_SIZE: usize = 1024;
/// The merge threshold used when none is set: pending fingerprints are
/// merged into the top level once this many have gathered (see
/// [`Options::merge_threshold`]).
pub const DEFAULT_MIN_MERGE_THRESHOLD: usize = 65_536;

/// Bytes of new blocks for one table past which a commit writes that table
/// as a file to ingest (see [`Options::table_file_bytes`]).
pub const DEFAULT_TABLE_FILE_BYTES: usize = 16 << 20;

/// In [`Durability::Buffered`] mode, the first commit at least this long
/// after the last fsync of the write-ahead log is fsynced (and so is
/// everything before it); closing the store fsyncs it too.
pub const BUFFERED_SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// How durable an acknowledged write is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// Every acknowledged write has been fsynced: it survives a killed
    /// process and a power loss. Concurrent writers share one fsync
    /// (group commit).
    #[default]
    Sync,
    /// Acknowledged writes are in the operating system's hands: they
    /// survive a killed process, but a power loss or kernel crash may lose
    /// the most recent ones (a suffix, never a hole): those acknowledged
    /// since the last fsync, which the first commit at least
    /// [`BUFFERED_SYNC_INTERVAL`] (1 s) after the previous one performs, and
    /// closing the store performs.
    Buffered,
}

impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sync" => Ok(Self::Sync),
            "buffered" => Ok(Self::Buffered),
            other => Err(format!(
                "unknown durability {other:?} (expected sync or buffered)"
            )),
        }
    }
}

/// Options for [`Store::create`](super::Store::create) and
/// [`Store::open`](super::Store::open).
///
/// Creation options (`max_distance`, `expected_size`, `tables`) shape the
/// table plan and are persisted; when given to `open` they must agree with
/// the stored plan. The other options apply to one open handle.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("simstore-doc-options-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// use simstore::{Durability, Options, Store};
///
/// // A crawler's store: distance up to 3, planned for 50M fingerprints,
/// // writes acknowledged before their fsync (at most a second's worth is
/// // lost at a power cut; nothing at a crash of the process).
/// let options = Options::new()
///     .max_distance(3)
///     .expected_size(50_000_000)
///     .durability(Durability::Buffered);
/// let store = Store::create(&dir, &options)?;
/// assert_eq!(store.max_distance(), 3);
/// store.close()?;
/// // Opening needs no creation options; given, they must match.
/// let store = Store::open(&dir, &Options::new().max_distance(3))?;
/// # drop(store);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), simstore::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct Options {
    pub(crate) max_distance: Option<u32>,
    pub(crate) expected_size: Option<u64>,
    pub(crate) tables: Option<u32>,
    pub(crate) block_size: Option<usize>,
    pub(crate) durability: Durability,
    pub(crate) merge_threshold: Option<usize>,
    pub(crate) max_pending: Option<usize>,
    pub(crate) manual_compaction: bool,
    pub(crate) memory_budget: Option<u64>,
    /// [`warm`](Self::warm) turned off.
    pub(crate) no_warm: bool,
    pub(crate) table_file_bytes: Option<usize>,
    pub(crate) stop_table_files_after: Option<usize>,
    pub(crate) pause_merge: Option<super::pause::MergePause>,
    pub(crate) query_threads: Option<usize>,
    pub(crate) trim_allocator: bool,
    pub(crate) sketches: Option<bool>,
    pub(crate) idf: Option<crate::simhash::Idf>,
}

impl Options {
    /// Default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// The largest Hamming distance queries may ask for (creation; default
    /// 3, at most 8).
    pub fn max_distance(mut self, k: u32) -> Self {
        self.max_distance = Some(k);
        self
    }

    /// The collection size the planner designs the tables for (creation;
    /// default 10,000,000). Larger sizes get more tables with wider
    /// prefixes.
    pub fn expected_size(mut self, n: u64) -> Self {
        self.expected_size = Some(n);
        self
    }

    /// An exact table count, overriding the planner (creation). Must be
    /// `C(r, k)` for some block count `r`; e.g. 4, 10, 20, 35 for `k = 3`.
    pub fn tables(mut self, t: u32) -> Self {
        self.tables = Some(t);
        self
    }

    /// Keep a similarity sketch per `(fingerprint, id)` pair (creation;
    /// default off): [`Store::insert_sketched`] stores one with a pair,
    /// [`Store::sketch`] reads it back to re-check a candidate. Costs 68
    /// bytes per pair before RocksDB's compression (a 16-byte key beside
    /// it), and nothing for a store created without. Given when opening,
    /// it must match the store.
    ///
    /// [`Store::insert_sketched`]: crate::Store::insert_sketched
    /// [`Store::sketch`]: crate::Store::sketch
    pub fn sketches(mut self, keep: bool) -> Self {
        self.sketches = Some(keep);
        self
    }

    /// Document frequencies learned from a sample of the collection, kept
    /// with the store (creation; default none) so that every later
    /// fingerprint is weighed alike ([`Store::idf`],
    /// [`Fingerprinter::fingerprint_idf`]). Given when opening, it must
    /// match the store's. A sample of fewer than [`MIN_IDF_DOCUMENTS`]
    /// documents is refused when the store is created
    /// ([`Error::InvalidArgument`](crate::Error::InvalidArgument)).
    ///
    /// [`Store::idf`]: crate::Store::idf
    /// [`Fingerprinter::fingerprint_idf`]: crate::simhash::Fingerprinter::fingerprint_idf
    pub fn idf(mut self, idf: crate::simhash::Idf) -> Self {
        self.idf = Some(idf);
        self
    }

    /// Durability of acknowledged writes (default [`Durability::Sync`]).
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }

    /// Pending fingerprints that trigger a background merge into the
    /// compressed tables (default [`DEFAULT_MIN_MERGE_THRESHOLD`], 65,536).
    /// They are merged into the top (smallest) level, so the merge costs
    /// about the same at any store size; it is also the least the top
    /// level holds before it moves into a larger level, and the size of a
    /// batch that [`Store::insert_many`](super::Store::insert_many)
    /// may merge straight into the tables.
    pub fn merge_threshold(mut self, n: usize) -> Self {
        self.merge_threshold = Some(n.max(1));
        self
    }

    /// Pending fingerprints at which writes wait for the background
    /// compactor: a write that finds this many pending waits until a merge
    /// has taken them below it, so memory for pending fingerprints and the
    /// work left to a reopen after a crash stay bounded when writers
    /// outrun the merges. Never below the merge threshold; no effect with
    /// [`manual_compaction`](Self::manual_compaction).
    ///
    /// Default: half the fingerprints in the tables, at least 64 merge
    /// thresholds (4,194,304 by default) and at most what an eighth of the
    /// machine's memory holds at 8 bytes a fingerprint a table (100M
    /// fingerprints with 4 tables on 24 GiB). Merges into the small levels take seconds at most (a writer
    /// held back runs them itself, at its own CPU priority, when no other
    /// merge runs), but one into level 0 rewrites it and takes time in
    /// proportion to the store, while pending fingerprints gather: a
    /// limit that grows with the store lets writes go on through it (a
    /// merge into level 0 of 16M fingerprints runs for about 25 seconds,
    /// and writers add 3 to 4M meanwhile on two cores) instead of waiting
    /// for the whole level to be rewritten. The price is at a reopen after
    /// a crash: every pending fingerprint and its ids are read back and
    /// sorted, about 1.1 µs a fingerprint on two cores (9 s for 8M
    /// pending with ids beside a 10M store, against 0.15 s with none).
    pub fn max_pending(mut self, n: usize) -> Self {
        self.max_pending = Some(n.max(1));
        self
    }

    /// Disables the background compaction thread; pending fingerprints are
    /// then merged only by [`Store::compact`](super::Store::compact)
    /// (default: background compaction on). The background thread runs at
    /// a lower CPU priority (nice 10, on Linux) and lowers RocksDB's
    /// flush and compaction threads to it; RocksDB shares those threads
    /// among every database the process opens.
    pub fn manual_compaction(mut self, manual: bool) -> Self {
        self.manual_compaction = manual;
        self
    }

    /// Whether a background thread reads every block into memory after
    /// the open (default: on). The open itself reads no block: tables are
    /// opened from their index records, and a query reads a block it needs
    /// that is not held yet through RocksDB (then holds it). Off, blocks
    /// are read only by the queries that need them. No effect on tables
    /// beyond the memory budget, which stay on disk.
    /// [`Store::wait_warm`](super::Store::wait_warm) waits for the reading.
    pub fn warm(mut self, warm: bool) -> Self {
        self.no_warm = !warm;
        self
    }

    /// Most bytes of compressed tables and id blocks to hold in memory
    /// (default: half the machine's physical memory, by `/proc/meminfo`;
    /// unlimited where that cannot be read). When the tables and the id
    /// blocks together take more at open, by RocksDB's accounting of their
    /// families, blocks (and id blocks) stay on disk: the
    /// handle keeps only the block keys and sizes, and every probe reads
    /// its blocks through RocksDB (and its block cache), CRC-checking
    /// each read. Only level 0's tables stay on disk so: the other levels
    /// (at most a seventh of the fingerprints) and level 0's first table
    /// (unpermuted), all probed by every write to learn whether its
    /// fingerprint is stored, are held whatever the budget (unless that
    /// table is level 0's only one, as in a one-table store). Id blocks
    /// of 64 KiB or more (fingerprints with tens of thousands of ids),
    /// up to 64 MiB of them, are held once read whatever the budget:
    /// every write naming such a fingerprint and every match on it would
    /// read and check the whole block again. Decided at
    /// open; a store that outgrows the budget while open stays in memory
    /// until reopened. A store held whole in memory also keeps its levels
    /// above level 0 as one uncompressed set for queries (8 bytes a
    /// fingerprint a table, see [`Stats::upper_set_bytes`](super::Stats::upper_set_bytes)),
    /// and a one-table store its level 0 also as one flat sequence for
    /// header probes (about `64 - header + 2.5` bits a fingerprint, see
    /// [`Stats::flat_bytes`](super::Stats::flat_bytes)), both outside the
    /// budget (at 1B fingerprints, 4.6 GB of sequence beside 4.8 GB of
    /// table and 4 GB of id blocks).
    pub fn memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget = Some(bytes);
        self
    }

    /// The memory budget in effect (see [`memory_budget`](Self::memory_budget)).
    pub(crate) fn effective_memory_budget(&self) -> u64 {
        self.memory_budget.unwrap_or_else(default_memory_budget)
    }

    /// Most threads one batch call ([`Store::query_many`](super::Store::query_many),
    /// [`query_first_many`](super::Store::query_first_many),
    /// [`query_many_max_ids`](super::Store::query_many_max_ids) and
    /// [`query_probabilistic_many`](super::Store::query_probabilistic_many))
    /// may use for a batch of 4,096 queries or more (at least 1; default:
    /// the machine's available parallelism). Smaller batches run on the
    /// calling thread.
    pub fn query_threads(mut self, threads: usize) -> Self {
        self.query_threads = Some(threads.max(1));
        self
    }

    /// Whether to return the memory freed by a merge into level 0, a bulk
    /// load or the reading of blocks into memory to the system, by glibc's
    /// `malloc_trim` (default: off; no effect on other allocators). glibc
    /// keeps freed memory in the arena of the thread that allocated it, so
    /// a process with many writer threads can hold about twice the memory
    /// the store uses (incremental ingest into a 10M store with 64
    /// writers: 2.4 GB of RSS without, 1.35 GB with it, for 0.25 GB of
    /// tables). The trim acts on the whole process and takes milliseconds
    /// to a few hundred at 10M, so it is the embedding program's choice;
    /// the `simstore` command turns it on.
    pub fn trim_allocator(mut self, trim: bool) -> Self {
        self.trim_allocator = trim;
        self
    }

    /// A commit that writes at least this many bytes of new blocks to one
    /// table (a bulk insert, a large compaction) writes that table's
    /// changes as a RocksDB table file and ingests it, instead of passing
    /// them through the write-ahead log and a memtable that RocksDB then
    /// flushes: one copy of the blocks written instead of three, and no
    /// memtable as large as the table (default
    /// [`DEFAULT_TABLE_FILE_BYTES`], 16 MiB; 0 makes every commit that
    /// changes a table's blocks use files). The storage format's commit
    /// protocol describes both paths.
    pub fn table_file_bytes(mut self, bytes: usize) -> Self {
        self.table_file_bytes = Some(bytes);
        self
    }

    /// The table file threshold in effect (see [`table_file_bytes`](Self::table_file_bytes)).
    pub(crate) fn effective_table_file_bytes(&self) -> usize {
        self.table_file_bytes.unwrap_or(DEFAULT_TABLE_FILE_BYTES)
    }

    /// For tests of recovery: a commit through table files fails after
    /// ingesting `n` of its files (leaving the store as a crash there
    /// would; the handle refuses further writes). Not part of the stable
    /// API.
    #[doc(hidden)]
    pub fn stop_table_files_after(mut self, n: usize) -> Self {
        self.stop_table_files_after = Some(n);
        self
    }

    /// For tests of writes made while a merge runs: once `pause` is
    /// armed, the next merge into level 0 waits between computing its
    /// tables and committing them until the test releases it. Not part of
    /// the stable API.
    #[doc(hidden)]
    pub fn pause_merge(mut self, pause: super::pause::MergePause) -> Self {
        self.pause_merge = Some(pause);
        self
    }

    /// Block size in bytes (creation; default 1024). For tests that need
    /// many small blocks; not part of the stable API.
    #[doc(hidden)]
    pub fn block_size(mut self, bytes: usize) -> Self {
        self.block_size = Some(bytes);
        self
    }

    pub(crate) fn check(&self) -> crate::Result<()> {
        if let Some(k) = self.max_distance {
            if k > u32::from(MAX_SUPPORTED_DISTANCE) {
                return Err(crate::Error::Plan(
                    crate::plan::PlanError::DistanceUnsupported {
                        asked: k,
                        supported: MAX_SUPPORTED_DISTANCE,
                    },
                ));
            }
        }
        if let Some(b) = self.block_size {
            if !(crate::codec::MIN_BLOCK_LEN..=u16::MAX as usize).contains(&b) {
                return Err(crate::Error::InvalidArgument(format!(
                    "block size {b} outside {}..={}",
                    crate::codec::MIN_BLOCK_LEN,
                    u16::MAX
                )));
            }
        }
        Ok(())
    }

    /// What only creating a store checks, beyond [`Options::check`]: the
    /// document frequencies it is to keep come from a sample large enough
    /// (opening checks only [`Options::check`], so a store that holds a
    /// smaller sample still opens).
    pub(crate) fn check_create(&self) -> crate::Result<()> {
        self.check()?;
        match &self.idf {
            Some(idf) if idf.documents() < MIN_IDF_DOCUMENTS => {
                Err(crate::Error::InvalidArgument(format!(
                    "document frequencies learned from {} documents: at least {MIN_IDF_DOCUMENTS} \
                     are needed (from fewer, every feature weighs nothing or less)",
                    idf.documents()
                )))
            }
            _ => Ok(()),
        }
    }
}

/// The fewest sample documents [`Options::idf`] accepts: with one, every
/// feature's weight `ln((n + 1) / (df + 1))` is 0 and every fingerprint
/// would be 0; with none, every weight is negative.
pub const MIN_IDF_DOCUMENTS: u32 = 2;

/// The default of [`Options::max_pending`] for tables holding
/// `table_fingerprints` in `tables` tables a level, at merge threshold
/// `threshold` on a machine of `memory` bytes.
pub(crate) fn default_max_pending(
    threshold: usize,
    table_fingerprints: u64,
    tables: usize,
    memory: u64,
) -> usize {
    let floor = threshold.saturating_mul(64);
    let share = usize::try_from(table_fingerprints / 2).unwrap_or(usize::MAX);
    let bytes_each = 8 * tables.max(1) as u64;
    let cap = usize::try_from(memory / 8 / bytes_each).unwrap_or(usize::MAX);
    floor.max(share.min(cap))
}

/// Half the machine's physical memory, or unlimited when unknown.
fn default_memory_budget() -> u64 {
    physical_memory().map_or(u64::MAX, |bytes| bytes / DEFAULT_MEMORY_DIVISOR)
}

/// The machine's physical memory, when known.
pub(crate) fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// The default memory budget is physical memory divided by this.
pub const DEFAULT_MEMORY_DIVISOR: u64 = 2;

#[cfg(test)]
mod tests {
    use super::default_max_pending;

    #[test]
    fn max_pending_grows_with_the_store_within_memory() {
        let gib = 1u64 << 30;
        // A small store: 64 thresholds.
        assert_eq!(
            default_max_pending(65_536, 1_000_000, 4, 24 * gib),
            4_194_304
        );
        // Half the tables' fingerprints past that.
        assert_eq!(
            default_max_pending(65_536, 20_000_000, 4, 24 * gib),
            10_000_000
        );
        // At most an eighth of the memory, at 8 bytes a fingerprint a
        // table: 3 GiB / 32.
        let at_1b = default_max_pending(65_536, 1_000_000_000, 4, 24 * gib);
        assert_eq!(at_1b, (3 * gib / 32) as usize);
        // Never below the floor, whatever the budget.
        assert_eq!(default_max_pending(1000, 1 << 40, 20, 0), 64_000);
    }
}
