//! Commits through table files.
//!
//! A commit that rewrites much of a table (a bulk insert, a large
//! compaction) writes that table's block changes as a RocksDB table file
//! in `DIR/ingest/` while it merges, instead of putting every block into
//! the write batch: the batch would copy them into the write-ahead log and
//! a memtable as large as the table, which RocksDB then writes out again.
//! The commit then writes its batch (every other change, with the table
//! files record naming the filed tables) fsynced, ingests each file into
//! its table's family and deletes the record. An open that finds the
//! record finishes the ingestion first: a file still present may not be
//! in yet (ingesting it again changes nothing), a file gone is in.
//! `storage-format.md` (commit protocol) is the reference.

use std::path::{Path, PathBuf};

use super::shared::Shared;
use super::state::State;
use crate::error::{Error, Location, Result};
use crate::format::{keys, records};
use crate::storage::{io, sync_directory, Db, TableFileEntry};
use crate::table::{Added, MergeOutput};

/// The directory, inside the store's, that holds table files until they
/// are ingested.
pub(crate) const DIR_NAME: &str = "ingest";

/// One table's merge, and whether its block changes went to a table file.
pub(crate) struct Merged {
    pub out: MergeOutput,
    /// Blocks written to the table's file, when it has one: its block
    /// changes are there, not in `out`.
    pub filed: Option<usize>,
    /// Table 0's only: the id blocks of its new blocks.
    pub ids: Option<MergedIds>,
}

/// The id blocks a merge of table 0 wrote.
#[derive(Default)]
pub(crate) struct MergedIds {
    /// Keyed like the new table-0 blocks they belong to.
    pub blocks: Added,
    /// Pairs they hold that were not stored before (a bulk insert's).
    pub new_pairs: u64,
    /// Fingerprints whose overlay entries they fold in, increasing.
    pub folded: Vec<u64>,
    /// Whether their changes went to the id blocks' table file (see
    /// [`file_ids`]) instead of the write batch.
    pub filed: bool,
}

fn dir(store: &Path) -> PathBuf {
    store.join(DIR_NAME)
}

/// The file of table `t`; `t` equal to the number of tables names the id
/// blocks' file.
fn path(store: &Path, t: usize, tables: usize) -> PathBuf {
    if t == tables {
        return dir(store).join("id-blocks.sst");
    }
    dir(store).join(format!("table-{t:03}.sst"))
}

/// Block changes in key order: deletes of `removed` keys no block of
/// `added` takes over, puts of the `added` blocks.
fn entries<'a>(removed: &'a [u64], added: &'a Added) -> impl Iterator<Item = TableFileEntry<'a>> {
    let mut removed = removed.iter().copied().peekable();
    let mut added = added.iter().peekable();
    std::iter::from_fn(move || match (removed.peek().copied(), added.peek()) {
        (Some(r), Some(&(a, _))) if r < a => {
            removed.next();
            Some(TableFileEntry::Delete(r))
        }
        (Some(r), Some(_)) => {
            let (a, bytes) = added.next()?;
            if r == a {
                removed.next();
            }
            Some(TableFileEntry::Put(a, bytes))
        }
        (Some(r), None) => {
            removed.next();
            Some(TableFileEntry::Delete(r))
        }
        (None, Some(_)) => added.next().map(|(a, bytes)| TableFileEntry::Put(a, bytes)),
        (None, None) => None,
    })
}

/// Files table `t`'s block changes when the new blocks reach the table
/// file threshold (see [`Options::table_file_bytes`](super::Options::table_file_bytes)):
/// writes them to the table's file and drops them from `out`.
pub(crate) fn file(shared: &Shared, t: usize, mut out: MergeOutput) -> Result<Merged> {
    let changed = !out.added.is_empty() || !out.removed.is_empty();
    if !changed || out.added.byte_len() < shared.options.effective_table_file_bytes() {
        return Ok(Merged {
            out,
            filed: None,
            ids: None,
        });
    }
    debug_assert!(out.removed.windows(2).all(|w| w[0] < w[1]));
    let dir = dir(&shared.dir);
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let tables = shared.db.tables();
    shared.db.write_table_file(
        &path(&shared.dir, t, tables),
        entries(&out.removed, &out.added),
    )?;
    let written = out.added.len();
    out.added = Default::default();
    Ok(Merged {
        out,
        filed: Some(written),
        ids: None,
    })
}

/// Files the id blocks table 0's merge wrote (`ids`, replacing the blocks
/// keyed `removed`) when they reach the table file threshold, as
/// [`file()`] does a table's blocks; they stay in `ids` (a store holding
/// its tables in memory holds them).
pub(crate) fn file_ids(shared: &Shared, removed: &[u64], ids: &mut MergedIds) -> Result<()> {
    if ids.blocks.is_empty() && removed.is_empty()
        || ids.blocks.byte_len() < shared.options.effective_table_file_bytes()
    {
        return Ok(());
    }
    let dir = dir(&shared.dir);
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let tables = shared.db.tables();
    shared.db.write_table_file(
        &path(&shared.dir, tables, tables),
        entries(removed, &ids.blocks),
    )?;
    ids.filed = true;
    Ok(())
}

/// The tables (numbered over all levels) whose block changes are in
/// table files, then (numbered `tables`, the table after the last) the id
/// blocks when theirs are.
pub(crate) fn filed(merged: &[(usize, Merged)], tables: usize) -> Vec<usize> {
    let mut filed: Vec<usize> = merged
        .iter()
        .filter(|(_, m)| m.filed.is_some())
        .map(|&(t, _)| t)
        .collect();
    filed.sort_unstable();
    if merged
        .iter()
        .filter_map(|(_, m)| m.ids.as_ref())
        .any(|ids| ids.filed)
    {
        filed.push(tables);
    }
    filed
}

/// Removes every table file (of a commit that failed before its record was
/// written, or of one interrupted before that).
pub(crate) fn discard(store: &Path) -> Result<()> {
    let dir = dir(store);
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&dir)(e)),
        _ => Ok(()),
    }
}

/// Commits `batch`, which holds every change but the filed tables' block
/// changes, then those; `swap` applies the commit to memory under the
/// state write lock.
///
/// Without filed tables this is one write: with the store's durability
/// for a bulk insert, as [`Shared::write_merge_or_poison`] for a merge
/// (`merge`). With some, the batch also carries the table files record; it and the
/// record's deletion are fsynced whatever the durability. A failure after
/// that first write poisons the store (memory has the new state; the next
/// open finishes the ingestion).
pub(crate) fn commit(
    shared: &Shared,
    mut batch: crate::storage::Batch,
    filed: &[usize],
    merge: bool,
    swap: impl FnOnce(&mut State),
) -> Result<()> {
    // A state whose reads may fetch blocks from RocksDB must not be read
    // once the batch is written: the blocks the commit replaces would be
    // read under their keys with what it wrote there (another block's
    // values, or none). Its write lock is then held from the batch's
    // write until the new state is in.
    let guarded = shared.state.read().reads_stored_blocks();
    let pause = || {
        if let (Some(pause), true) = (&shared.options.pause_merge, merge) {
            pause.hold(super::pause::Point::Written);
        }
    };
    if filed.is_empty() {
        let held = guarded.then(|| shared.state.write());
        if merge {
            shared.write_merge_or_poison(batch)?;
        } else {
            shared.write_or_poison(batch)?;
        }
        pause();
        swap(&mut held.unwrap_or_else(|| shared.state.write()));
        return Ok(());
    }
    let prepared = sync_directory(&dir(&shared.dir)).and_then(|()| shared.db.flush_tables(filed));
    if let Err(e) = prepared {
        let _ = discard(&shared.dir);
        return Err(e);
    }
    let tables: Vec<u16> = filed.iter().map(|&t| t as u16).collect();
    batch.put_cf(
        shared.db.default_family()?,
        keys::TABLE_FILES,
        records::encode_table_files(&tables),
    );
    let held = guarded.then(|| shared.state.write());
    shared.write_synced_or_poison(batch)?;
    pause();

    // A state read only from memory swaps first: the rewritten blocks are
    // held by the new state, and the others are the same before and after
    // each file goes in. Otherwise readers wait until all files are in.
    // A failed ingestion leaves some families without the blocks of the
    // state swapped in (or with older ones under their keys): marked
    // before the commit lock is released (`verify` holds it), and with
    // reads through RocksDB under the state write lock too, so no read of
    // them sees the new state without the mark.
    let ingest_marking_lag = || {
        let ingested = ingest(shared, filed);
        if ingested.is_err() {
            shared.health.set_tables_lag();
        }
        ingested
    };
    let ingested = match held {
        Some(mut state) => {
            let ingested = ingest_marking_lag();
            swap(&mut state);
            ingested
        }
        None => {
            swap(&mut shared.state.write());
            ingest_marking_lag()
        }
    };
    match ingested.and_then(|()| forget(shared, filed.len())) {
        // Committed whatever the removal does: a file left is removed by
        // the next merge or open.
        Ok(()) => {
            let _ = discard(&shared.dir);
            Ok(())
        }
        Err(e) => {
            shared.health.poison();
            Err(e)
        }
    }
}

/// Ingests the filed tables' files.
fn ingest(shared: &Shared, filed: &[usize]) -> Result<()> {
    let tables = shared.db.tables();
    for (i, &t) in filed.iter().enumerate() {
        if shared.options.stop_table_files_after == Some(i) {
            return Err(stopped(format!("after {i} files")));
        }
        shared
            .db
            .ingest_table_file(t, &path(&shared.dir, t, tables))?;
    }
    Ok(())
}

/// Deletes the table files record once its `files` are in (fsynced too:
/// the next such commit writes files under the same names, and a record
/// that survived a power cut must not name them).
fn forget(shared: &Shared, files: usize) -> Result<()> {
    if shared.options.stop_table_files_after == Some(files) {
        return Err(stopped("before deleting the table files record".into()));
    }
    let mut done = crate::storage::batch();
    done.delete_cf(shared.db.default_family()?, keys::TABLE_FILES);
    shared.write_synced_or_poison(done)
}

/// The error of a commit stopped where `Options::stop_table_files_after`
/// asked (for recovery tests).
fn stopped(what: String) -> Error {
    Error::Storage {
        context: "committing through table files",
        message: format!("stopped {what}, as the options asked"),
    }
}

/// At open: finishes a commit whose table files record is present
/// (ingests the files still there, then deletes the record) and removes
/// table files no record names.
pub(crate) fn finish_interrupted(db: &Db, store: &Path) -> Result<()> {
    let default = db.default_family()?;
    if let Some(bytes) = db.get(default, keys::TABLE_FILES)? {
        let corrupt = |reason: String| {
            Error::corrupt(
                Location::Record {
                    family: crate::storage::DEFAULT_FAMILY,
                },
                format!("table files record: {reason}"),
            )
        };
        let tables = records::decode_table_files(&bytes).map_err(corrupt)?;
        for t in tables.into_iter().map(usize::from) {
            // The number after the last table names the id blocks.
            if t > db.tables() {
                return Err(corrupt(format!(
                    "names table {t} of a store with {}",
                    db.tables()
                )));
            }
            let file = path(store, t, db.tables());
            if file.try_exists().map_err(io(&file))? {
                db.ingest_table_file(t, &file)?;
            }
        }
        let mut done = crate::storage::batch();
        done.delete_cf(default, keys::TABLE_FILES);
        db.write(done, true)?;
    }
    discard(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(removed: Vec<u64>, added: &[u64]) -> MergeOutput {
        let mut blocks = Added::default();
        for &k in added {
            blocks.push(k, &k.to_be_bytes());
        }
        MergeOutput {
            state: crate::table::TableState::new(0, Vec::new(), Vec::new(), Default::default()),
            removed,
            added: blocks,
            new_code: None,
        }
    }

    #[test]
    fn entries_delete_old_keys_no_new_block_takes_over() {
        let out = output(vec![1, 5, 9, 12], &[3, 5, 12, 20]);
        let got: Vec<(u64, bool)> = entries(&out.removed, &out.added)
            .map(|e| match e {
                TableFileEntry::Put(key, _) => (key, true),
                TableFileEntry::Delete(key) => (key, false),
            })
            .collect();
        assert_eq!(
            got,
            [
                (1, false),
                (3, true),
                (5, true),
                (9, false),
                (12, true),
                (20, true)
            ]
        );
        let only_removed = output(vec![4, 8], &[]);
        assert_eq!(
            entries(&only_removed.removed, &only_removed.added).count(),
            2
        );
        let only_added = output(vec![], &[2]);
        assert_eq!(entries(&only_added.removed, &only_added.added).count(), 1);
    }
}
