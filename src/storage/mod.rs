//! The durable layer: a RocksDB database with one column family per table
//! plus the families for codes, ids, pending fingerprints and tombstones.
//! This is the only module that names RocksDB types.

mod batch;
mod directory;
mod files;

use std::path::Path;

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, DBRecoveryMode, ErrorKind,
    Options as DbOptions, WriteOptions, DB,
};

pub use batch::{Batch, Family};

pub use directory::{
    check_directory, io, publish, staging_directory, sync_directory, write_marker,
};
pub use files::TableFileEntry;

use crate::error::{Error, Location, Result};
use crate::format::keys;

/// Bytes of memtable shared by all column families.
const WRITE_BUFFER_BYTES: usize = 64 << 20;
/// RocksDB's own block cache, shared by all column families. The serving
/// path reads blocks from memory, so this only serves ids and recovery.
const BLOCK_CACHE_BYTES: usize = 32 << 20;
/// WAL size past which RocksDB flushes the oldest column families.
const MAX_WAL_BYTES: u64 = 256 << 20;

/// The fixed, non-table column families, in creation order after `default`.
pub const FIXED_FAMILIES: [&str; 6] = [
    keys::CODES_FAMILY,
    keys::IDS_FAMILY,
    keys::PENDING_FAMILY,
    keys::TOMBSTONES_FAMILY,
    keys::ID_BLOCKS_FAMILY,
    keys::IDS_ALT_FAMILY,
];

/// The fixed families that stores of older formats lack until an upgrade
/// adds them (see [`Db::add_family`]): `id-blocks` (format 3) and
/// `ids-alt` (format 7).
pub const UPGRADE_FAMILIES: [&str; 2] = [keys::ID_BLOCKS_FAMILY, keys::IDS_ALT_FAMILY];

/// An open database.
pub struct Db {
    db: std::sync::Arc<DB>,
    tables: usize,
    /// RocksDB's block cache (all families share it).
    cache: Cache,
    /// The options of the table families, which table files written for
    /// ingestion are built with.
    family: parking_lot::Mutex<DbOptions>,
}

/// Reads table blocks straight from the database: for tables not held in
/// memory (RocksDB's block cache keeps the recently read ones), and for
/// blocks not read yet of tables that are (their reads bypass the cache:
/// the table keeps what it reads).
#[derive(Debug)]
pub struct TableBlocks {
    db: std::sync::Arc<DB>,
    fill_cache: bool,
}

impl crate::table::BlockSource for TableBlocks {
    fn fetch(&self, table: usize, key: u64) -> Result<std::sync::Arc<[u8]>> {
        let missing =
            |reason: &str| Error::corrupt(Location::Block { table, key }, reason.to_string());
        let family = self
            .db
            .cf_handle(&keys::table_family(table))
            .ok_or_else(|| missing("its table's column family is missing"))?;
        let mut read = rocksdb::ReadOptions::default();
        read.fill_cache(self.fill_cache);
        let bytes = self
            .db
            .get_pinned_cf_opt(family, keys::fingerprint(key), &read)
            .map_err(db_error("reading a block"))?
            .ok_or_else(|| missing("the block is missing from the database"))?;
        Ok(std::sync::Arc::from(&bytes[..]))
    }
}

/// Reads id blocks straight from the database (through RocksDB's block
/// cache when `fill_cache`: for a store whose tables are kept on disk).
#[derive(Debug)]
pub struct IdBlocks {
    db: std::sync::Arc<DB>,
    fill_cache: bool,
}

impl crate::table::IdSource for IdBlocks {
    fn fetch(&self, key: u64) -> Result<Option<std::sync::Arc<[u8]>>> {
        let family = self.db.cf_handle(keys::ID_BLOCKS_FAMILY).ok_or_else(|| {
            Error::corrupt(
                Location::Database,
                format!("column family {} is missing", keys::ID_BLOCKS_FAMILY),
            )
        })?;
        let mut read = rocksdb::ReadOptions::default();
        read.fill_cache(self.fill_cache);
        Ok(self
            .db
            .get_pinned_cf_opt(family, keys::fingerprint(key), &read)
            .map_err(db_error("reading an id block"))?
            .map(|bytes| std::sync::Arc::from(&bytes[..])))
    }
}

/// Maps a RocksDB error: its corruption kind becomes [`Error::Corrupt`].
pub fn db_error(context: &'static str) -> impl Fn(rocksdb::Error) -> Error {
    move |e| match e.kind() {
        ErrorKind::Corruption => Error::corrupt(Location::Database, e.into_string()),
        _ => Error::Storage {
            context,
            message: e.into_string(),
        },
    }
}

/// Options of the families holding one key per pending or tombstoned
/// fingerprint or per pair outside the id blocks (`pending`,
/// `tombstones`, `ids`). They are only written and scanned whole (at
/// open and by `verify`), never read by key, so their memtables are vectors
/// (an insert is an append; a scan sorts once) instead of skip lists:
/// replaying a crashed store's log inserts every pending fingerprint
/// again, and skip-list inserts of random keys were most of that time; a
/// merge into level 0 deletes the pairs of every fingerprint it moves
/// there, under the commit lock.
/// Nor do their table files need Bloom filters (building one for a
/// million keys was a fifth of flushing a recovered log). Their level 0
/// is compacted at 8 files instead of RocksDB's 4.
fn log_family_options(family: &DbOptions) -> DbOptions {
    let mut log = family.clone();
    log.set_memtable_factory(rocksdb::MemtableFactory::Vector);
    log.set_block_based_table_factory(&BlockBasedOptions::default());
    // Their keys are deleted in bulk by later merges (one range delete
    // empties the family); compacting them less often leaves more of them
    // to be dropped by those deletes instead of being rewritten first.
    // The stall limits keep RocksDB's distance above the trigger.
    log.set_level_zero_file_num_compaction_trigger(8);
    log.set_level_zero_slowdown_writes_trigger(48);
    log.set_level_zero_stop_writes_trigger(64);
    log
}

/// The options of the column family `name`, given the table families'.
fn family_options(name: &str, family: &DbOptions) -> DbOptions {
    let log = [
        keys::PENDING_FAMILY,
        keys::TOMBSTONES_FAMILY,
        keys::IDS_FAMILY,
        keys::IDS_ALT_FAMILY,
    ];
    if log.contains(&name) {
        log_family_options(family)
    } else {
        family.clone()
    }
}

/// The options of each named column family.
fn descriptors(names: Vec<String>, family: &DbOptions) -> Vec<ColumnFamilyDescriptor> {
    names
        .into_iter()
        .map(|n| {
            let options = family_options(&n, family);
            ColumnFamilyDescriptor::new(n, options)
        })
        .collect()
}

fn options(create: bool) -> Result<(DbOptions, DbOptions, Cache)> {
    let mut base = DbOptions::default();
    // Replaying a crashed store's log fills the memtables; flushing them
    // at the end of recovery (the default) would write them out again
    // before the store is usable. The log stays until a later flush, so
    // nothing is less durable. Not exposed by the crate except as an
    // options string.
    let mut db = base
        .get_options_from_string("avoid_flush_during_recovery=true")
        .map_err(|e| Error::Storage {
            context: "setting RocksDB options",
            message: e.into_string(),
        })?;
    db.create_if_missing(create);
    db.create_missing_column_families(create);
    db.set_wal_recovery_mode(DBRecoveryMode::TolerateCorruptedTailRecords);
    db.set_paranoid_checks(true);
    db.set_db_write_buffer_size(WRITE_BUFFER_BYTES);
    db.set_max_total_wal_size(MAX_WAL_BYTES);
    db.set_max_background_jobs(2);
    // Two flush threads (and one compaction thread) instead of the one
    // that two jobs give: a merge's commit flushes its tables' families
    // and waits for it with writers held off, and behind a flush of a log
    // family's full memtable (millions of keys to sort, seconds) that
    // wait would last as long.
    #[allow(deprecated)]
    db.set_max_background_flushes(2);
    db.set_keep_log_file_num(4);
    // Vector memtables (see `log_family_options`) need memtable inserts
    // made one write at a time (RocksDB still takes concurrent writers;
    // simstore's commits are serialised by its commit lock anyway).
    db.set_allow_concurrent_memtable_write(false);
    let mut family = DbOptions::default();
    family.set_compression_type(DBCompressionType::None);
    let mut table = BlockBasedOptions::default();
    let cache = Cache::new_lru_cache(BLOCK_CACHE_BYTES);
    table.set_block_cache(&cache);
    table.set_bloom_filter(10.0, false);
    family.set_block_based_table_factory(&table);
    Ok((db, family, cache))
}

fn family_names(tables: usize) -> Vec<String> {
    let mut names = vec![rocksdb::DEFAULT_COLUMN_FAMILY_NAME.to_string()];
    names.extend(FIXED_FAMILIES.iter().map(|s| s.to_string()));
    names.extend((0..tables).map(keys::table_family));
    names
}

impl Db {
    /// Creates the database with every column family for `tables` tables,
    /// and the sketches family when `sketches`.
    pub fn create(dir: &Path, tables: usize, sketches: bool) -> Result<Self> {
        let path = dir.join(crate::format::marker::DB_DIR);
        let (db_opts, family, cache) = options(true)?;
        let mut names = family_names(tables);
        if sketches {
            names.push(keys::SKETCHES_FAMILY.to_string());
        }
        let descriptors = descriptors(names, &family);
        let db = DB::open_cf_descriptors(&db_opts, &path, descriptors)
            .map_err(|e| open_error(dir, e))?;
        Ok(Self {
            db: std::sync::Arc::new(db),
            tables,
            cache,
            family: parking_lot::Mutex::new(family),
        })
    }

    /// Opens an existing database with the column families it has, which
    /// must be those of a store; the caller checks them against the manifest.
    pub fn open(dir: &Path) -> Result<Self> {
        let path = dir.join(crate::format::marker::DB_DIR);
        let (db_opts, family, cache) = options(false)?;
        let names = DB::list_cf(&db_opts, &path).map_err(|e| open_error(dir, e))?;
        let tables = names.iter().filter(|n| n.starts_with("table-")).count();
        let mut expected = family_names(tables);
        // Stores of older formats lack some families until they are
        // upgraded (see `add_family`).
        for added in UPGRADE_FAMILIES {
            if !names.iter().any(|n| n == added) {
                expected.retain(|n| n != added);
            }
        }
        // Only stores created with sketches have their family; the
        // caller checks it against the manifest.
        if names.iter().any(|n| n == keys::SKETCHES_FAMILY) {
            expected.push(keys::SKETCHES_FAMILY.to_string());
        }
        let mut sorted_names = names.clone();
        sorted_names.sort();
        let mut sorted_expected = expected.clone();
        sorted_expected.sort();
        if sorted_names != sorted_expected {
            return Err(Error::corrupt(
                Location::Database,
                format!("column families {names:?} are not those of a store with {tables} tables"),
            ));
        }
        let descriptors = descriptors(expected, &family);
        let db = DB::open_cf_descriptors(&db_opts, &path, descriptors)
            .map_err(|e| open_error(dir, e))?;
        Ok(Self {
            db: std::sync::Arc::new(db),
            tables,
            cache,
            family: parking_lot::Mutex::new(family),
        })
    }

    /// Whether the database has the column family `name` (stores of older
    /// formats lack those of [`UPGRADE_FAMILIES`] until upgraded).
    pub fn has_family(&self, name: &str) -> bool {
        self.db.cf_handle(name).is_some()
    }

    /// Adds the column family `name` (one of [`UPGRADE_FAMILIES`]), empty,
    /// to a database that lacks it: the first step of the upgrade that
    /// brings it. Only on a database no reader shares yet.
    pub fn add_family(&mut self, name: &str) -> Result<()> {
        let family = family_options(name, &self.family.lock());
        let db = std::sync::Arc::get_mut(&mut self.db).ok_or_else(|| Error::Storage {
            context: "adding a column family",
            message: "the database is shared already".into(),
        })?;
        db.create_cf(name, &family)
            .map_err(db_error("adding a column family"))
    }

    /// Adds table families up to `tables` in all (the first step of
    /// upgrading a store of format 4 and older, whose families are those
    /// of one level). Only on a database no reader shares yet.
    pub fn add_table_families(&mut self, tables: usize) -> Result<()> {
        let family = self.family.lock().clone();
        let db = std::sync::Arc::get_mut(&mut self.db).ok_or_else(|| Error::Storage {
            context: "adding table families",
            message: "the database is shared already".into(),
        })?;
        for t in self.tables..tables {
            db.create_cf(keys::table_family(t), &family)
                .map_err(db_error("adding a table family"))?;
        }
        self.tables = self.tables.max(tables);
        Ok(())
    }

    /// A source of id blocks read from this database, through the block
    /// cache when `fill_cache`.
    pub fn id_blocks(&self, fill_cache: bool) -> IdBlocks {
        IdBlocks {
            db: std::sync::Arc::clone(&self.db),
            fill_cache,
        }
    }

    /// Resizes RocksDB's block cache (which serves tables kept on disk).
    pub fn set_block_cache_bytes(&self, bytes: usize) {
        self.cache
            .clone()
            .set_capacity(bytes.max(BLOCK_CACHE_BYTES));
    }

    /// A block source reading this database's tables, through the block
    /// cache when `fill_cache`.
    pub fn table_blocks(&self, fill_cache: bool) -> TableBlocks {
        TableBlocks {
            db: std::sync::Arc::clone(&self.db),
            fill_cache,
        }
    }

    /// Bytes the table families hold on disk and in memtables, by
    /// RocksDB's own accounting (what holding every block in memory
    /// would take, about).
    pub fn table_bytes(&self) -> Result<u64> {
        let mut total = 0u64;
        for t in 0..self.tables {
            total += self.family_bytes(self.table(t)?)?;
        }
        Ok(total)
    }

    /// Bytes the id blocks family holds on disk and in memtables, by
    /// RocksDB's accounting (0 before a store is upgraded to format 3).
    pub fn id_block_bytes(&self) -> Result<u64> {
        if !self.has_family(keys::ID_BLOCKS_FAMILY) {
            return Ok(0);
        }
        self.family_bytes(self.family(keys::ID_BLOCKS_FAMILY)?)
    }

    fn family_bytes(&self, family: &Family) -> Result<u64> {
        let mut total = 0u64;
        for property in [
            "rocksdb.total-sst-files-size",
            "rocksdb.cur-size-all-mem-tables",
        ] {
            total += self
                .db
                .property_int_value_cf(family, property)
                .map_err(db_error("reading family sizes"))?
                .unwrap_or(0);
        }
        Ok(total)
    }

    /// Number of table column families.
    pub fn tables(&self) -> usize {
        self.tables
    }

    /// A column family by name.
    pub fn family(&self, name: &str) -> Result<&Family> {
        self.db.cf_handle(name).ok_or_else(|| {
            Error::corrupt(
                Location::Database,
                format!("column family {name} is missing"),
            )
        })
    }

    /// The column family of table `n`.
    pub fn table(&self, n: usize) -> Result<&Family> {
        self.family(&keys::table_family(n))
    }

    /// The default column family (manifest, counters).
    pub fn default_family(&self) -> Result<&Family> {
        self.family(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
    }

    /// Writes a batch atomically; with `sync` it is fsynced before return.
    pub fn write(&self, batch: Batch, sync: bool) -> Result<()> {
        let mut opts = WriteOptions::default();
        opts.set_sync(sync);
        self.db
            .write_opt(batch.into_inner(), &opts)
            .map_err(db_error("writing a batch"))
    }

    /// Reads one value.
    pub fn get(&self, family: &Family, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db
            .get_cf(family, key)
            .map_err(db_error("reading a record"))
    }

    /// Reads the values of `keys`, given in increasing order, in one batch
    /// (RocksDB's batched `MultiGet`: the keys that share a block are
    /// found by one look-up of it), visiting each key's index and value.
    pub fn get_sorted(
        &self,
        family: &Family,
        keys: &[impl AsRef<[u8]>],
        mut visit: impl FnMut(usize, Option<&[u8]>) -> Result<()>,
    ) -> Result<()> {
        let values = self.db.batched_multi_get_cf(family, keys, true);
        for (i, value) in values.into_iter().enumerate() {
            let value = value.map_err(db_error("reading records"))?;
            visit(i, value.as_deref())?;
        }
        Ok(())
    }

    /// Visits every `(key, value)` of a family from `from` on, in key
    /// order, until `visit` returns `Ok(false)`.
    pub fn scan(
        &self,
        family: &Family,
        from: &[u8],
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<bool>,
    ) -> Result<()> {
        // Scans load whole families into memory once (or verify them):
        // caching their blocks would only evict the ones lookups use.
        let mut read = rocksdb::ReadOptions::default();
        read.fill_cache(false);
        let mut it = self.db.raw_iterator_cf_opt(family, read);
        it.seek(from);
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            if !visit(k, v)? {
                return Ok(());
            }
            it.next();
        }
        it.status().map_err(db_error("scanning a column family"))
    }

    /// Starts writing every column family's memtable to SST files in the
    /// background (RocksDB's threads), so the next open replays less WAL.
    /// A failure only leaves the log to be replayed again.
    pub fn start_flush(&self) {
        let Ok(families) = self.family_handles() else {
            return;
        };
        let mut options = rocksdb::FlushOptions::default();
        options.set_wait(false);
        let _ = self.db.flush_cfs_opt(&families, &options);
    }

    /// Writes every column family's memtable to SST files, so the next
    /// open replays less WAL.
    pub fn flush(&self) -> Result<()> {
        let families: Vec<&Family> = self.family_handles()?;
        self.db
            .flush_cfs_opt(&families, &rocksdb::FlushOptions::default())
            .map_err(db_error("flushing memtables"))
    }

    fn family_handles(&self) -> Result<Vec<&Family>> {
        let mut names = family_names(self.tables);
        if self.has_sketches_family() {
            names.push(keys::SKETCHES_FAMILY.to_string());
        }
        names
            .iter()
            .filter(|n| !UPGRADE_FAMILIES.contains(&n.as_str()) || self.has_family(n))
            .map(|n| self.family(n))
            .collect()
    }

    /// Whether the database has the sketches family (stores created with
    /// sketches only).
    pub fn has_sketches_family(&self) -> bool {
        self.db.cf_handle(keys::SKETCHES_FAMILY).is_some()
    }

    /// Has RocksDB rewrite every column family's files, dropping replaced
    /// and deleted values (blocks a merge rewrote, merged pending keys).
    pub fn compact_files(&self) -> Result<()> {
        for family in self.family_handles()? {
            self.db
                .compact_range_cf(family, None::<&[u8]>, None::<&[u8]>);
        }
        Ok(())
    }

    /// Syncs the WAL to disk.
    pub fn flush_wal(&self) -> Result<()> {
        self.db.flush_wal(true).map_err(db_error("syncing the WAL"))
    }
}

/// A new write batch.
pub fn batch() -> Batch {
    Batch::new()
}

/// An empty write batch with room for about `bytes` of records, so a
/// large one is not copied as it grows.
pub fn batch_with_capacity(bytes: usize) -> Batch {
    Batch::with_capacity(bytes)
}

/// The name of RocksDB's default column family (the store's records).
pub const DEFAULT_FAMILY: &str = rocksdb::DEFAULT_COLUMN_FAMILY_NAME;

/// Maps an error from opening RocksDB: a held lock becomes
/// [`Error::Locked`]; a file of the database that is missing (its
/// `CURRENT` or `MANIFEST`, or the database directory itself, in a
/// directory whose marker says it is a store) is corruption, as RocksDB
/// reports a missing table file.
fn open_error(dir: &Path, e: rocksdb::Error) -> Error {
    let message = e.to_string();
    if message.contains("LOCK")
        || message.contains("lock hold")
        || message.contains("Resource temporarily unavailable")
    {
        return Error::Locked {
            path: dir.to_path_buf(),
        };
    }
    if e.kind() == ErrorKind::IOError && message.contains("No such file or directory") {
        return Error::corrupt(
            Location::Database,
            format!("a file of the database is missing: {}", e.into_string()),
        );
    }
    db_error("opening the database")(e)
}
