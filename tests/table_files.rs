//! Commits through table files (`Options::table_file_bytes`): a bulk
//! insert or compaction that writes a table's changes as a RocksDB table
//! file and ingests it. Answers match a brute-force oracle, and a commit
//! stopped after its table files record was written (before any file was
//! ingested, after some, after all) is finished by the next open: the
//! store then answers as if the commit had completed, `verify` is clean,
//! and no table file or record is left.

mod common;
#[path = "common/raw.rs"]
mod raw;

use std::path::Path;

use common::{check_store, clustered, queries, random, Model, Rng};
use raw::raw_db;
use simstore::{Error, Options, Store};

const TABLES: usize = 4;
/// Levels of tables every store has.
const LEVELS: u16 = 6;
/// Files a commit writes: one a table, then the id blocks' (ingested
/// last).
const FILES: usize = TABLES + 1;

fn options() -> Options {
    Options::new()
        .tables(TABLES as u32)
        .block_size(64)
        .manual_compaction(true)
        .merge_threshold(100)
        .table_file_bytes(0)
}

/// Table files waiting in the store's `ingest` directory.
fn waiting_files(store: &Path) -> usize {
    match std::fs::read_dir(store.join("ingest")) {
        Ok(entries) => entries.count(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => panic!("{e}"),
    }
}

/// Whether the table files record is in the store's default family.
fn has_record(store: &Path) -> bool {
    raw_db(store).get(b"table-files").unwrap().is_some()
}

/// The store built so far: a bulk load, then pending inserts and deletes
/// (tombstones), so the interrupted commit merges all three.
fn prepare(path: &Path, data: &[u64], model: &mut Model) {
    let store = Store::create(path, &options()).unwrap();
    let first: Vec<(u64, Option<u64>)> = data[..600].iter().map(|&fp| (fp, None)).collect();
    for &(fp, id) in &first {
        model.insert(fp, id);
    }
    store.insert_many(&first).unwrap();
    assert_eq!(store.stats().pending, 0, "took the bulk path");
    for (i, &fp) in data[600..800].iter().enumerate() {
        model.insert(fp, Some(i as u64));
        store.insert(fp, i as u64).unwrap();
    }
    for &fp in data[..300].iter().step_by(4) {
        model.delete_fingerprint(fp);
        store.delete_fingerprint(fp).unwrap();
    }
    assert!(store.stats().pending > 0 && store.stats().tombstones > 0);
}

#[test]
fn interrupted_commits_are_finished_by_the_next_open() {
    for bulk in [true, false] {
        for stop in 0..=FILES {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s");
            let mut rng = Rng(stop as u64 + 10 * u64::from(bulk));
            let data = if stop % 2 == 0 {
                random(1500, &mut rng)
            } else {
                clustered(1500, &mut rng)
            };
            let mut model = Model::default();
            prepare(&path, &data, &mut model);
            let qs = queries(&data, 100, &mut rng);

            let store = Store::open(&path, &options().stop_table_files_after(stop)).unwrap();
            let result = if bulk {
                let more: Vec<(u64, Option<u64>)> = data[800..]
                    .iter()
                    .enumerate()
                    .map(|(i, &fp)| (fp, Some(5000 + i as u64)))
                    .collect();
                for &(fp, id) in &more {
                    model.insert(fp, id);
                }
                store.insert_many(&more).map(|_| ())
            } else {
                store.compact().map(|_| ())
            };
            assert!(
                matches!(result, Err(Error::Storage { .. })),
                "bulk {bulk} stop {stop}: {result:?}"
            );
            // The commit is decided: memory answers with it.
            check_store(&store, &model, &qs);
            assert!(matches!(store.insert(1, 1), Err(Error::Poisoned)));
            // Families that lag the tables in memory cannot be verified
            // against them.
            if stop < FILES {
                let verified = store.verify();
                assert!(matches!(verified, Err(Error::Poisoned)), "{verified:?}");
            }
            drop(store);

            assert_eq!(
                waiting_files(&path),
                FILES - stop,
                "bulk {bulk} stop {stop}"
            );
            assert!(has_record(&path));
            let store = Store::open(&path, &options()).unwrap();
            check_store(&store, &model, &qs);
            let stats = store.stats();
            assert_eq!((stats.pending, stats.tombstones), (0, 0));
            let report = store.verify().unwrap();
            assert!(
                report.ok(),
                "bulk {bulk} stop {stop}: {:?}",
                report.problems
            );
            // It takes writes and commits through files again.
            for &fp in &data[..50] {
                model.delete_fingerprint(fp);
                store.delete_fingerprint(fp).unwrap();
            }
            store.compact().unwrap();
            check_store(&store, &model, &qs);
            drop(store);
            assert_eq!(waiting_files(&path), 0);
            assert!(!has_record(&path));
            let store = Store::open(&path, &options()).unwrap();
            check_store(&store, &model, &qs);
            assert!(store.verify().unwrap().ok());
        }
    }
}

#[test]
fn table_files_left_without_a_record_are_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut rng = Rng(3);
    let data = random(1000, &mut rng);
    let mut model = Model::default();
    prepare(&path, &data, &mut model);
    // A crash while the merge wrote its files leaves them, and no record.
    let stray = path.join("ingest");
    std::fs::create_dir_all(&stray).unwrap();
    std::fs::write(stray.join("table-001.sst"), b"half a table file").unwrap();
    let store = Store::open(&path, &options()).unwrap();
    assert_eq!(waiting_files(&path), 0);
    let qs = queries(&data, 100, &mut rng);
    check_store(&store, &model, &qs);
    store.compact().unwrap();
    check_store(&store, &model, &qs);
}

#[test]
fn a_damaged_table_files_record_refuses_the_open() {
    let valid_beyond_the_plan = simstore::format::records::encode_table_files(&[99]);
    // The number after the last table (of the last level) names the id
    // blocks; one more is beyond the plan.
    let past_the_id_blocks =
        simstore::format::records::encode_table_files(&[LEVELS * TABLES as u16 + 1]);
    let mut bad_checksum = simstore::format::records::encode_table_files(&[1]);
    *bad_checksum.last_mut().unwrap() ^= 1;
    for (record, reason) in [
        (valid_beyond_the_plan, "names table 99"),
        (past_the_id_blocks, "names table 25"),
        (bad_checksum, "checksum"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut model = Model::default();
        prepare(&path, &random(1000, &mut Rng(4)), &mut model);
        raw_db(&path).put(b"table-files", record).unwrap();
        let Err(err) = Store::open(&path, &options()) else {
            panic!("opened a store with a damaged table files record");
        };
        assert!(
            matches!(err, Error::Corrupt { .. }) && err.to_string().contains(reason),
            "{err}"
        );
    }
}

#[test]
fn clustered_and_random_data_through_files_match_the_oracle() {
    for (seed, budget) in [(1u64, None), (2, Some(0u64))] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut rng = Rng(seed);
        let mut data = random(2000, &mut rng);
        data.extend(clustered(2000, &mut rng));
        let mut opts = options();
        if let Some(b) = budget {
            opts = opts.memory_budget(b);
        }
        let store = Store::create(&path, &opts).unwrap();
        let mut model = Model::default();
        let qs = queries(&data, 150, &mut rng);
        for chunk in data.chunks(700) {
            let pairs: Vec<(u64, Option<u64>)> = chunk.iter().map(|&fp| (fp, None)).collect();
            for &(fp, id) in &pairs {
                model.insert(fp, id);
            }
            store.insert_many(&pairs).unwrap();
            for &fp in chunk.iter().step_by(9) {
                model.delete_fingerprint(fp);
                store.delete_fingerprint(fp).unwrap();
            }
            store.compact().unwrap();
            check_store(&store, &model, &qs);
        }
        drop(store);
        let store = Store::open(&path, &opts).unwrap();
        check_store(&store, &model, &qs);
        assert!(store.verify().unwrap().ok());
    }
}

/// Tables kept on disk read every block through RocksDB, where a commit
/// stopped before all its table files went in leaves some tables behind
/// the state in memory (a block may be missing, or an older one stored
/// under the same key). Such a handle refuses every read with
/// `Poisoned` rather than report corruption or answer from the mix (one
/// stopped after every file answers with the commit); the next open
/// finishes the commit and answers as the model does.
#[test]
fn interrupted_commits_on_disk_refuse_reads_until_reopened() {
    for bulk in [true, false] {
        for stop in 0..=FILES {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s");
            let mut rng = Rng(100 + stop as u64 + 10 * u64::from(bulk));
            let data = random(1500, &mut rng);
            let mut model = Model::default();
            prepare(&path, &data, &mut model);
            let qs = queries(&data, 100, &mut rng);
            let on_disk = options().memory_budget(0);

            let stopping = on_disk
                .clone()
                .stop_table_files_after(stop)
                .query_threads(2);
            let store = Store::open(&path, &stopping).unwrap();
            assert!(!store.stats().tables_in_memory);
            let result = if bulk {
                let more: Vec<(u64, Option<u64>)> =
                    data[800..].iter().map(|&fp| (fp, None)).collect();
                for &(fp, id) in &more {
                    model.insert(fp, id);
                }
                store.insert_many(&more).map(|_| ())
            } else {
                store.compact().map(|_| ())
            };
            assert!(matches!(result, Err(Error::Storage { .. })), "{result:?}");
            if stop == FILES {
                // Every file went in (only the record's deletion was
                // stopped): the families hold the commit.
                check_store(&store, &model, &qs);
                assert!(matches!(store.insert(1, 1), Err(Error::Poisoned)));
            } else {
                let poisoned = |what: &str, e: Option<Error>| {
                    assert!(
                        matches!(e, Some(Error::Poisoned)),
                        "bulk {bulk} stop {stop} {what}: {e:?}"
                    );
                };
                for &q in &qs {
                    poisoned("query", store.query(q, 3).err());
                    poisoned("query_first", store.query_first(q, 3).err());
                }
                poisoned("query_many", store.query_many(&qs, 3).err());
                poisoned("query_first_many", store.query_first_many(&qs, 3).err());
                // A batch large enough to be spread over threads (by table
                // shares, the tables being on disk, two threads).
                let many: Vec<u64> = qs.iter().cycle().take(5000).copied().collect();
                poisoned("large query_many", store.query_many(&many, 3).err());
                poisoned("verify", store.verify().err());
            }
            drop(store);

            let store = Store::open(&path, &on_disk).unwrap();
            check_store(&store, &model, &qs);
            assert!(store.verify().unwrap().ok());
        }
    }
}
