//! Every documented error: precise, typed, and leaving the store intact.

mod common;
#[path = "common/raw.rs"]
mod raw;

use std::path::Path;

use common::index_key;
use raw::raw_db;
use simstore::{Error, Location, Options, Store};

fn filled(path: &Path, n: u64) -> Store {
    let store =
        Store::create(path, &Options::new().block_size(64).manual_compaction(true)).unwrap();
    let mut rng = common::Rng(n);
    let pairs: Vec<(u64, u64)> = (0..n).map(|i| (rng.next(), i)).collect();
    store.insert_many(&pairs).unwrap();
    store.compact().unwrap();
    store
}

#[test]
fn not_a_store_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    match Store::open(dir.path(), &Options::new()) {
        Err(Error::NotAStore { path }) => assert_eq!(path, dir.path()),
        other => panic!("expected NotAStore, got {other:?}"),
    }
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(
        entries.len(),
        1,
        "open wrote into a directory that is not a store"
    );
    assert!(matches!(
        Store::open(dir.path().join("missing"), &Options::new()),
        Err(Error::NotAStore { .. })
    ));
    assert!(!dir.path().join("missing").exists());
    match Store::create(dir.path(), &Options::new()) {
        Err(Error::AlreadyExists { .. }) => {}
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
}

#[test]
fn create_twice_and_second_handle_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, &Options::new()).unwrap();
    store.insert(7, 1).unwrap();
    assert!(matches!(
        Store::create(&path, &Options::new()),
        Err(Error::AlreadyExists { .. })
    ));
    match Store::open(&path, &Options::new()) {
        Err(Error::Locked { path: p }) => assert_eq!(p, path),
        other => panic!("expected Locked, got {other:?}"),
    }
    drop(store);
    let store = Store::open(&path, &Options::new()).unwrap();
    assert_eq!(store.query(7, 0).unwrap()[0].ids, vec![1]);
}

#[test]
fn contradicting_options_on_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    drop(Store::create(&path, &Options::new().max_distance(3)).unwrap());
    let cases = [
        (Options::new().max_distance(2), "max_distance", "3", "2"),
        (Options::new().tables(10), "tables", "4", "10"),
        (Options::new().block_size(512), "block_size", "1024", "512"),
        (
            Options::new().expected_size(10_000_000_000),
            "expected_size",
            "10000000",
            "10000000000",
        ),
    ];
    for (opts, option, stored, requested) in cases {
        match Store::open(&path, &opts) {
            Err(Error::IncompatibleOptions {
                option: o,
                stored: s,
                requested: r,
            }) => {
                assert_eq!((o, s.as_str(), r.as_str()), (option, stored, requested));
            }
            other => panic!("expected IncompatibleOptions for {option}, got {other:?}"),
        }
    }
    // Matching creation options are fine.
    drop(Store::open(&path, &Options::new().max_distance(3).tables(4)).unwrap());
    // A one-table store's expected size also sets its header's width: a
    // size that gives another width contradicts the store, one that gives
    // the same does not.
    let one = dir.path().join("one");
    let ten_million = Options::new().tables(1).expected_size(10_000_000);
    drop(Store::create(&one, &ten_million).unwrap());
    match Store::open(&one, &Options::new().tables(1).expected_size(1_000_000_000)) {
        Err(Error::IncompatibleOptions { option, .. }) => assert_eq!(option, "expected_size"),
        other => panic!("expected IncompatibleOptions, got {other:?}"),
    }
    drop(Store::open(&one, &Options::new().tables(1).expected_size(11_000_000)).unwrap());
    drop(Store::open(&one, &ten_million).unwrap());
}

#[test]
fn impossible_plans_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        Store::create(dir.path().join("a"), &Options::new().tables(7)),
        Err(Error::Plan(simstore::plan::PlanError::NoSuchTableCount {
            tables: 7,
            ..
        }))
    ));
    assert!(matches!(
        Store::create(dir.path().join("b"), &Options::new().max_distance(9)),
        Err(Error::Plan(
            simstore::plan::PlanError::DistanceUnsupported {
                asked: 9,
                supported: 8
            }
        ))
    ));
    assert!(!dir.path().join("a").exists() && !dir.path().join("b").exists());
}

/// Document frequencies from fewer than two documents weigh every feature
/// 0 or less: refused at creation, nothing created; two are accepted.
#[test]
fn idf_from_fewer_than_two_documents_is_refused() {
    use simstore::simhash::{Fingerprinter, Idf};
    let dir = tempfile::tempdir().unwrap();
    let f = Fingerprinter::new();
    let texts = ["one page about rivers and lakes", "another about hills"];
    for n in 0..=1 {
        let idf = Idf::learn(texts[..n].iter().map(|t| f.feature_hashes(t)));
        let path = dir.path().join(format!("s{n}"));
        let err = Store::create(&path, &Options::new().idf(idf)).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("at least 2")),
            "{err}"
        );
        assert!(!path.exists());
    }
    let idf = Idf::learn(texts.iter().map(|t| f.feature_hashes(t)));
    let store = Store::create(dir.path().join("s2"), &Options::new().idf(idf)).unwrap();
    assert_eq!(store.idf().map(Idf::documents), Some(2));
}

#[test]
fn newer_format_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    drop(Store::create(&path, &Options::new()).unwrap());
    std::fs::write(path.join("SIMSTORE"), "simstore store\nformat 8\n").unwrap();
    match Store::open(&path, &Options::new()) {
        Err(Error::UnsupportedVersion {
            found: 8,
            supported: 7,
            ..
        }) => {}
        other => panic!("expected UnsupportedVersion, got {other:?}"),
    }
}

#[test]
fn corrupt_block_is_reported_by_query_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let plan = filled(&path, 500).plan().clone();
    let (key, len) = {
        let db = raw_db(&path);
        let cf = db.cf_handle("table-001").unwrap();
        let mut it = db.raw_iterator_cf(cf);
        it.seek_to_first();
        it.next();
        let key = u64::from_be_bytes(it.key().unwrap().try_into().unwrap());
        let mut value = it.value().unwrap().to_vec();
        let len = value.len();
        value[len - 1] ^= 0x01;
        db.put_cf(cf, key.to_be_bytes(), &value).unwrap();
        (key, len)
    };
    assert!(len > 19);
    let store = Store::open(&path, &Options::new()).unwrap();
    let q = plan.tables()[1].permutation.invert(key);
    match store.query(q, 3) {
        Err(Error::Corrupt {
            location: Location::Block { table: 1, key: k },
            reason,
        }) => {
            assert_eq!(k, key);
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("expected block corruption, got {other:?}"),
    }
    assert!(matches!(
        store.query_many(&[q], 3),
        Err(Error::Corrupt { .. })
    ));
    let report = store.verify().unwrap();
    assert!(!report.ok());
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains(&format!("table 1 block {key:016x}")) && p.contains("checksum")),
        "{:?}",
        report.problems
    );
}

/// A damaged or missing id block is reported as the corruption of that
/// id block, by the queries whose matches it holds ids for (in memory
/// and from disk) and by verify; never answered as a match without ids.
#[test]
fn corrupt_or_missing_id_blocks_are_reported_by_query_and_verify() {
    for (damage, budget) in [(true, None), (true, Some(0u64)), (false, None)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        drop(filled(&path, 500));
        let key = {
            let db = raw_db(&path);
            let cf = db.cf_handle("id-blocks").unwrap();
            let mut it = db.raw_iterator_cf(cf);
            it.seek_to_first();
            it.next();
            let key = u64::from_be_bytes(it.key().unwrap().try_into().unwrap());
            if damage {
                let mut value = it.value().unwrap().to_vec();
                value[16] ^= 0x08;
                db.put_cf(cf, key.to_be_bytes(), &value).unwrap();
            } else {
                db.delete_cf(cf, key.to_be_bytes()).unwrap();
            }
            key
        };
        let mut options = Options::new();
        if let Some(b) = budget {
            options = options.memory_budget(b);
        }
        let store = Store::open(&path, &options).unwrap();
        store.wait_warm();
        // Table 0 is the identity: its block's key is a stored fingerprint.
        let expect_corrupt = |what: &str, got: Result<(), Error>| match got {
            Err(Error::Corrupt {
                location: Location::IdBlock { key: k },
                ..
            }) => assert_eq!(k, key, "{what}"),
            other => panic!("{what}: expected id block corruption, got {other:?}"),
        };
        expect_corrupt("query", store.query(key, 0).map(drop));
        expect_corrupt("query_many", store.query_many(&[key], 3).map(drop));
        expect_corrupt("ids", store.ids(key).map(drop));
        // Into reused answers, after queries that need no id: what the
        // call leaves is the queries answered before the group that
        // failed (none of the failing one), and the next call answers
        // afresh.
        let stored: Vec<u64> = {
            let mut rng = common::Rng(500);
            (0..500).map(|_| rng.next()).collect()
        };
        let mut rng = common::Rng(99);
        let mut asked: Vec<u64> = std::iter::repeat_with(|| rng.next())
            .filter(|q| stored.iter().all(|s| (s ^ q).count_ones() > 3))
            .take(4)
            .collect();
        asked.push(key);
        let mut answers = simstore::Answers::new();
        for first in [false, true] {
            let got = store.query_many_into(&asked, 3, first, None, &mut answers);
            expect_corrupt("query_many_into", got);
            assert!(answers.len() < asked.len(), "{answers:?}");
            assert!(answers.iter().all(|m| m.len() == 0), "{answers:?}");
            store
                .query_many_into(&asked[..2], 3, first, None, &mut answers)
                .unwrap();
            assert_eq!(answers.len(), 2);
            assert!(answers.iter().all(|m| m.len() == 0), "{answers:?}");
        }
        let report = store.verify().unwrap();
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.contains(&format!("id block {key:016x}"))),
            "{:?}",
            report.problems
        );
    }
}

#[test]
fn corrupt_manifest_and_code_are_reported_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    drop(filled(&path, 300));
    raw::flip_first_record(&path, "codes", 10, 0x40);
    match Store::open(&path, &Options::new()) {
        Err(Error::Corrupt {
            location:
                Location::Code {
                    table: 0,
                    code_id: 0,
                },
            ..
        }) => {}
        other => panic!("expected code corruption, got {other:?}"),
    }
    {
        let db = raw_db(&path);
        let mut m = db.get(b"manifest").unwrap().unwrap();
        m[12] ^= 0x01;
        db.put(b"manifest", &m).unwrap();
    }
    match Store::open(&path, &Options::new()) {
        Err(Error::Corrupt {
            location: Location::Manifest,
            ..
        }) => {}
        other => panic!("expected manifest corruption, got {other:?}"),
    }
}

#[test]
fn directory_removed_under_a_running_store_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, &Options::new().manual_compaction(true)).unwrap();
    store.insert(5, 1).unwrap();
    std::fs::remove_dir_all(&path).unwrap();
    match store.insert(6, 2) {
        Err(Error::Storage { message, .. }) => assert!(message.contains("removed"), "{message}"),
        other => panic!("expected a storage error, got {other:?}"),
    }
    assert!(matches!(store.insert(7, 3), Err(Error::Poisoned)));
    assert!(matches!(store.compact(), Err(Error::Poisoned)));
    // What was acknowledged before is still answered from memory.
    assert_eq!(store.query(5, 0).unwrap()[0].ids, vec![1]);
}

/// Empty batches are no-ops that write nothing; one enormous group commit
/// (300,000 operations through the pending path, then as many deletes)
/// and an enormous bulk insert are applied exactly.
#[test]
fn empty_and_enormous_batches() {
    use simstore::Op;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, &Options::new().manual_compaction(true)).unwrap();
    let before = store.stats();
    assert_eq!(store.apply(Vec::new()).unwrap(), Vec::<bool>::new());
    store.insert_many::<(u64, u64)>(&[]).unwrap();
    store.insert_many::<(u64, Option<u64>)>(&[]).unwrap();
    assert!(store.query_many(&[], 3).unwrap().is_empty());
    let after = store.stats();
    assert_eq!(
        (after.fingerprints, after.ids, after.pending),
        (before.fingerprints, before.ids, before.pending)
    );

    let mut rng = common::Rng(99);
    let fps: Vec<u64> = (0..300_000).map(|_| rng.next()).collect();
    let ops: Vec<Op> = fps
        .iter()
        .enumerate()
        .map(|(i, &fingerprint)| Op::Insert {
            fingerprint,
            id: Some(i as u64),
        })
        .collect();
    let changed = store.apply(ops).unwrap();
    assert!(changed.iter().all(|&c| c));
    let stats = store.stats();
    assert_eq!(
        (stats.fingerprints, stats.ids, stats.pending),
        (300_000, 300_000, 300_000)
    );
    let bulk: Vec<(u64, Option<u64>)> = (0..400_000u64)
        .map(|i| (rng.next(), (i % 2 == 0).then_some(i)))
        .collect();
    store.insert_many(&bulk).unwrap();
    let stats = store.stats();
    assert_eq!((stats.fingerprints, stats.pending), (700_000, 0));
    assert_eq!(stats.ids, 500_000);
    let deletes: Vec<Op> = fps
        .iter()
        .map(|&fingerprint| Op::DeleteFingerprint { fingerprint })
        .collect();
    assert!(store.apply(deletes).unwrap().iter().all(|&c| c));
    for &(fp, id) in bulk.iter().step_by(9973) {
        let m = store.query(fp, 0).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].ids, id.into_iter().collect::<Vec<_>>());
    }
    for &fp in fps.iter().step_by(9973) {
        assert!(store.query(fp, 0).unwrap().is_empty());
    }
    drop(store);
    let store = Store::open(&path, &Options::new()).unwrap();
    let stats = store.stats();
    assert_eq!(
        (stats.fingerprints, stats.ids, stats.tombstones),
        (400_000, 200_000, 300_000)
    );
    assert!(store.verify().unwrap().ok());
}

/// A damaged table index record refuses the open; a block the index
/// lists but RocksDB lost, or one stored without being listed, is
/// reported by the queries that reach it and by `verify`, whether the
/// blocks were read behind the open or by the queries.
#[test]
fn table_index_damage_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let plan = filled(&path, 800).plan().clone();
    let original = raw_db(&path).get(index_key(2)).unwrap().unwrap();
    {
        let mut bad = original.clone();
        bad[7] ^= 0x10;
        raw_db(&path).put(index_key(2), &bad).unwrap();
    }
    match Store::open(&path, &Options::new()) {
        Err(Error::Corrupt {
            location: Location::TableIndex { table: 2 },
            ..
        }) => {}
        other => panic!("expected table index corruption, got {other:?}"),
    }
    raw_db(&path).delete(index_key(2)).unwrap();
    assert!(matches!(
        Store::open(&path, &Options::new()),
        Err(Error::Corrupt {
            location: Location::TableIndex { table: 2 },
            ..
        })
    ));
    raw_db(&path).put(index_key(2), &original).unwrap();

    // Lose table 2's third block.
    let (lost, value) = {
        let db = raw_db(&path);
        let cf = db.cf_handle("table-002").unwrap();
        let mut it = db.raw_iterator_cf(cf);
        it.seek_to_first();
        it.next();
        it.next();
        let key = it.key().unwrap().to_vec();
        let value = it.value().unwrap().to_vec();
        drop(it);
        db.delete_cf(cf, &key).unwrap();
        (u64::from_be_bytes(key[..].try_into().unwrap()), value)
    };
    let q = plan.tables()[2].permutation.invert(lost);
    for warm in [false, true] {
        let store = Store::open(&path, &Options::new().warm(warm)).unwrap();
        store.wait_warm();
        match store.query(q, 3) {
            Err(Error::Corrupt {
                location: Location::Block { table: 2, key },
                reason,
            }) => {
                assert_eq!(key, lost);
                assert!(reason.contains("missing"), "{reason}");
            }
            other => panic!("expected the lost block reported (warm {warm}), got {other:?}"),
        }
        let report = store.verify().unwrap();
        assert!(
            report.problems.iter().any(|p| p.contains("table 2 index")),
            "{:?}",
            report.problems
        );
    }

    // Put it back under a key the index does not list (one above its own):
    // the block before it in the index is reported once the blocks are
    // read, since the index cannot be trusted to hold that range.
    {
        let db = raw_db(&path);
        let cf = db.cf_handle("table-002").unwrap();
        db.put_cf(cf, (lost + 1).to_be_bytes(), &value).unwrap();
        db.put_cf(cf, lost.to_be_bytes(), &value).unwrap();
    }
    let store = Store::open(&path, &Options::new()).unwrap();
    store.wait_warm();
    assert!(matches!(
        store.query(q, 3),
        Err(Error::Corrupt {
            location: Location::Block { table: 2, .. },
            ..
        })
    ));
    assert!(!store.verify().unwrap().ok());
}

/// A background merge that fails is returned, once and typed, by the next
/// write (which does nothing else), or by `close` when no write came; the
/// store keeps every acknowledged write.
#[test]
fn a_failed_background_merge_is_returned_by_the_next_call() {
    for by_close in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        drop(Store::create(&path, &Options::new().block_size(64)).unwrap());
        // Every merge commits through table files and is stopped before
        // its first file goes in.
        let failing = Options::new()
            .merge_threshold(100)
            .table_file_bytes(0)
            .stop_table_files_after(0);
        let store = Store::open(&path, &failing).unwrap();
        let mut rng = common::Rng(7);
        let fps: Vec<u64> = (0..150).map(|_| rng.next()).collect();
        // One commit (the normal path, not a bulk insert), so no write
        // races the merge it triggers.
        let ops = fps
            .iter()
            .enumerate()
            .map(|(i, &fingerprint)| simstore::Op::Insert {
                fingerprint,
                id: Some(i as u64),
            })
            .collect();
        store.apply(ops).unwrap();
        let started = std::time::Instant::now();
        while store.stats().compaction_error.is_none() {
            assert!(started.elapsed().as_secs() < 30, "the merge never ran");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let returned = if by_close {
            store.close().unwrap_err()
        } else {
            let e = store.insert(1, 1).unwrap_err();
            // Returned once: the handle then refuses writes as after any
            // failed commit.
            assert!(matches!(store.insert(1, 1), Err(Error::Poisoned)));
            drop(store);
            e
        };
        match &returned {
            Error::Background { task, source } => {
                assert_eq!(*task, "merge of pending fingerprints");
                assert!(matches!(**source, Error::Storage { .. }), "{source:?}");
            }
            other => panic!("expected a background error, got {other:?}"),
        }
        assert!(
            returned.to_string().starts_with("background merge"),
            "{returned}"
        );
        let store = Store::open(&path, &Options::new()).unwrap();
        assert_eq!(store.stats().fingerprints, 150);
        for (i, &fp) in fps.iter().enumerate() {
            assert_eq!(store.ids(fp).unwrap(), vec![i as u64]);
        }
        assert!(store.verify().unwrap().ok());
        store.close().unwrap();
    }
}
