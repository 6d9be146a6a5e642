//! `Store::export` against the model: every stored fingerprint with its
//! ids, in order, from stores holding fingerprints in every place (level
//! 0 with its id blocks, the other levels, pending, tombstoned), with the
//! tables in memory and read from disk, across reopen and compaction; and
//! a visitor that stops early.

mod common;

use common::{check_export, clustered, random, Model, Rng};
use simstore::{Options, Store};

/// Grows a store at `path` by small writes (merges of 40, so every level
/// fills), with bare fingerprints, many ids on a few, deletes of pairs
/// and of fingerprints and re-inserts; returns the model.
fn grow(path: &std::path::Path, options: &Options, data: &[u64], rng: &mut Rng) -> Model {
    let store = Store::create(path, options).unwrap();
    let mut model = Model::default();
    let mut id = 0u64;
    for (round, chunk) in data.chunks(61).enumerate() {
        for &fp in chunk {
            if rng.below(10) == 0 {
                store.insert_fingerprint(fp).unwrap();
                model.insert(fp, None);
            } else {
                store.insert(fp, id).unwrap();
                model.insert(fp, Some(id));
                id += 1;
            }
        }
        // The first fingerprint gathers hundreds of ids.
        for _ in 0..20 {
            store.insert(data[0], id).unwrap();
            model.insert(data[0], Some(id));
            id += 1;
        }
        // A pair and a whole fingerprint deleted, one deleted fingerprint
        // inserted again.
        let seen = &data[..((round + 1) * 61).min(data.len())];
        let fp = seen[rng.below(seen.len() as u64) as usize];
        if let Some(&one) = model.fps.get(&fp).and_then(|ids| ids.iter().next()) {
            store.delete(fp, one).unwrap();
            model.delete(fp, one);
        }
        let gone = seen[rng.below(seen.len() as u64) as usize];
        store.delete_fingerprint(gone).unwrap();
        model.delete_fingerprint(gone);
        if round % 3 == 0 {
            store.insert(gone, id).unwrap();
            model.insert(gone, Some(id));
            id += 1;
        }
        store.merge_due().unwrap();
        if round % 7 == 3 {
            check_export(&store, &model);
        }
    }
    // Left unmerged: some fingerprints of the levels deleted, new ones
    // pending.
    let some: Vec<u64> = model.fps.keys().step_by(97).copied().collect();
    for fp in some {
        store.delete_fingerprint(fp).unwrap();
        model.delete_fingerprint(fp);
    }
    for i in 0..5 {
        let fp = rng.next();
        store.insert(fp, id + i).unwrap();
        model.insert(fp, Some(id + i));
    }
    let held = store
        .stats()
        .levels
        .iter()
        .filter(|l| l.fingerprints > 0)
        .count();
    assert!(held >= 3, "only {held} levels held");
    assert!(store.stats().pending > 0 && store.stats().tombstones > 0);
    check_export(&store, &model);
    store.close().unwrap();
    model
}

fn exported_everywhere(data: &[u64], seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let options = Options::new().merge_threshold(40).manual_compaction(true);
    let model = grow(&path, &options, data, &mut Rng(seed));
    // Tables read from disk through RocksDB, then held in memory.
    for budget in [0, u64::MAX] {
        let store = Store::open(&path, &options.clone().memory_budget(budget)).unwrap();
        check_export(&store, &model);
    }
    let store = Store::open(&path, &options.clone().memory_budget(0)).unwrap();
    store.compact().unwrap();
    check_export(&store, &model);
}

#[test]
fn export_is_the_model_random() {
    exported_everywhere(&random(3000, &mut Rng(1)), 11);
}

#[test]
fn export_is_the_model_clustered() {
    exported_everywhere(&clustered(3000, &mut Rng(2)), 12);
}

#[test]
fn export_of_a_one_table_store() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options::new()
        .tables(1)
        .expected_size(5000)
        .merge_threshold(40)
        .manual_compaction(true);
    grow(
        &dir.path().join("s"),
        &options,
        &random(2000, &mut Rng(3)),
        &mut Rng(13),
    );
}

#[test]
fn a_visitor_stops_the_export() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), &Options::new().expected_size(1000)).unwrap();
    let pairs: Vec<(u64, u64)> = (1..=100u64).map(|i| (i << 40, i)).collect();
    store.insert_many(&pairs).unwrap();
    let mut seen = Vec::new();
    let given = store
        .export(|fp, _| {
            seen.push(fp);
            seen.len() < 3
        })
        .unwrap();
    assert_eq!(given, 3);
    assert_eq!(seen, vec![1 << 40, 2 << 40, 3 << 40]);
    // An empty store gives nothing.
    let empty = tempfile::tempdir().unwrap();
    let store = Store::create(empty.path(), &Options::new().expected_size(1000)).unwrap();
    assert_eq!(store.export(|_, _| panic!("nothing stored")).unwrap(), 0);
}
