//! Table files: one table's block changes written as a RocksDB table file
//! and ingested into its column family whole, bypassing the write-ahead
//! log and the memtables (the commit protocol in `storage-format.md` says
//! when and how a commit uses them).

use std::path::Path;

use rocksdb::{IngestExternalFileOptions, SstFileWriter};

use super::{db_error, Db};
use crate::error::Result;
use crate::format::keys;

/// One change a table file makes to its table's family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFileEntry<'a> {
    /// A block stored under its key.
    Put(u64, &'a [u8]),
    /// A block key deleted.
    Delete(u64),
}

impl Db {
    /// Writes `entries`, at least one and with strictly increasing keys,
    /// to a new table file at `path`, built with the table families'
    /// options; the file is fsynced when this returns.
    pub fn write_table_file<'a>(
        &self,
        path: &Path,
        entries: impl IntoIterator<Item = TableFileEntry<'a>>,
    ) -> Result<()> {
        let options = self.family.lock().clone();
        let mut writer = SstFileWriter::create(&options);
        writer
            .open(path)
            .map_err(db_error("creating a table file"))?;
        for entry in entries {
            match entry {
                TableFileEntry::Put(key, bytes) => writer.put(keys::fingerprint(key), bytes),
                TableFileEntry::Delete(key) => writer.delete(keys::fingerprint(key)),
            }
            .map_err(db_error("writing a table file"))?;
        }
        writer
            .finish()
            .map_err(db_error("finishing a table file"))?;
        read_back(path);
        Ok(())
    }

    /// Ingests the table file at `path` into table `t`'s family (the id
    /// blocks' when `t` is the number of tables): its puts and deletes
    /// take effect over everything stored before, atomically and durably.
    /// The file is moved into the database (the name at `path` is gone
    /// once this returns successfully).
    pub fn ingest_table_file(&self, t: usize, path: &Path) -> Result<()> {
        let mut options = IngestExternalFileOptions::default();
        options.set_move_files(true);
        self.db
            .ingest_external_file_cf_opts(self.file_family(t)?, &options, vec![path])
            .map_err(db_error("ingesting a table file"))
    }

    /// Table `t`'s family, or the id blocks' when `t` is the number of
    /// tables.
    fn file_family(&self, t: usize) -> Result<&super::Family> {
        if t == self.tables {
            return self.family(keys::ID_BLOCKS_FAMILY);
        }
        self.table(t)
    }

    /// Writes the memtables of the given tables' families to table files
    /// and waits for it (an ingestion overlapping a memtable would
    /// otherwise flush it itself, while the store's readers wait).
    pub fn flush_tables(&self, tables: &[usize]) -> Result<()> {
        let families = tables
            .iter()
            .map(|&t| self.file_family(t))
            .collect::<Result<Vec<_>>>()?;
        self.db
            .flush_cfs_opt(&families, &rocksdb::FlushOptions::default())
            .map_err(db_error("flushing memtables"))
    }
}

/// Reads the file at `path` back into the page cache, on a thread of its
/// own so the merge goes on meanwhile (the file is opened first: its
/// ingestion moves it). RocksDB's table file writer drops what it writes
/// from the page cache as it goes; written through a memtable instead,
/// the blocks would have stayed cached, and the next open reads them all
/// (a 100M store's first query after a bulk load took 12.8 s instead of
/// 8.5 s; the kernel's `POSIX_FADV_WILLNEED` brought back only a sixth of
/// a 10M store's files). Best effort: nothing depends on it, and nothing
/// waits for it.
fn read_back(path: &Path) {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("simstore-read-back".into())
        .spawn(move || {
            let mut buffer = vec![0u8; 1 << 20];
            while matches!(file.read(&mut buffer), Ok(n) if n > 0) {}
        });
}
