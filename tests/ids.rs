//! Document ids against the model through every change they can go
//! through: new ids of fingerprints already in the tables, removed ids of
//! several, a fingerprint deleted and stored again with an old id, a
//! fingerprint with thousands of ids, bulk inserts, compactions (which
//! fold the changes into the id blocks), reopens with tables in memory
//! and on disk, and compactions running beside a writer.

mod common;
#[path = "common/raw.rs"]
mod raw;

use common::{check_store, Model, Rng};
use simstore::{Options, Store};

/// Every fingerprint of `pool` has the model's ids, and queries near
/// them answer as the model does.
fn check(store: &Store, model: &Model, pool: &[u64], rng: &mut Rng) {
    for &fp in pool {
        let want: Vec<u64> = model
            .fps
            .get(&fp)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        assert_eq!(store.ids(fp).unwrap(), want, "ids of {fp:016x}");
    }
    let queries: Vec<u64> = (0..40)
        .map(|i| {
            let fp = pool[rng.below(pool.len() as u64) as usize];
            rng.flip(fp, i % 3)
        })
        .collect();
    check_store(store, model, &queries);
}

/// One random change, to the store and the model.
fn change(store: &Store, model: &mut Model, pool: &[u64], rng: &mut Rng) {
    let fp = pool[rng.below(pool.len() as u64) as usize];
    let id = rng.below(40);
    match rng.below(10) {
        0..=4 => {
            model.insert(fp, Some(id));
            store.insert(fp, id).unwrap();
        }
        5 => {
            model.insert(fp, None);
            store.insert_fingerprint(fp).unwrap();
        }
        6 | 7 => {
            let had = model.fps.get(&fp).is_some_and(|s| s.contains(&id));
            model.delete(fp, id);
            assert_eq!(store.delete(fp, id).unwrap(), had);
        }
        8 => {
            // Remove one id it has, when it has any.
            if let Some(&id) = model.fps.get(&fp).and_then(|s| s.iter().next()) {
                model.delete(fp, id);
                assert!(store.delete(fp, id).unwrap());
            }
        }
        _ => {
            let had = model.fps.contains_key(&fp);
            model.delete_fingerprint(fp);
            assert_eq!(store.delete_fingerprint(fp).unwrap(), had);
        }
    }
}

#[test]
fn ids_follow_every_change_across_merges_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut rng = Rng(0x1d5);
    let base = |o: Options| o.block_size(96).manual_compaction(true);
    let mut store = Store::create(&path, &base(Options::new())).unwrap();
    let mut model = Model::default();
    let mut pool: Vec<u64> = common::clustered(400, &mut rng);
    pool.sort_unstable();
    pool.dedup();
    // A bulk load with one id each and a few with several, one with many.
    let mut pairs: Vec<(u64, Option<u64>)> = pool
        .iter()
        .enumerate()
        .map(|(i, &fp)| (fp, (i % 17 != 3).then_some(1000 + i as u64)))
        .collect();
    pairs.extend(pool.iter().step_by(23).map(|&fp| (fp, Some(7))));
    pairs.extend((0..3000).map(|i| (pool[5], Some(50_000 + 3 * i))));
    for &(fp, id) in &pairs {
        model.insert(fp, id);
    }
    store.insert_many(&pairs).unwrap();
    check(&store, &model, &pool, &mut rng);

    for round in 0..12 {
        for _ in 0..60 {
            change(&store, &mut model, &pool, &mut rng);
        }
        check(&store, &model, &pool, &mut rng);
        match round % 4 {
            0 => {
                store.compact().unwrap();
            }
            1 => {
                // A bulk insert over what is pending: new fingerprints,
                // new ids of stored ones, one deleted and stored again.
                let mut bulk: Vec<(u64, Option<u64>)> = (0..200)
                    .map(|i| {
                        let fp = pool[rng.below(pool.len() as u64) as usize];
                        (fp, (i % 5 != 0).then_some(rng.below(60)))
                    })
                    .collect();
                bulk.extend((0..300).map(|_| (rng.next(), Some(rng.below(1 << 40)))));
                for &(fp, id) in &bulk {
                    model.insert(fp, id);
                }
                store.insert_many(&bulk).unwrap();
                for &(fp, _) in &bulk[200..] {
                    pool.push(fp);
                }
            }
            2 => {
                drop(store);
                // Alternately held in memory and served from disk.
                let options = if round % 8 == 2 {
                    base(Options::new()).memory_budget(0)
                } else {
                    base(Options::new()).warm(round % 3 == 0)
                };
                store = Store::open(&path, &options).unwrap();
                assert_eq!(store.stats().tables_in_memory, round % 8 != 2);
            }
            _ => {}
        }
        check(&store, &model, &pool, &mut rng);
        let report = store.verify().unwrap();
        assert!(report.ok(), "round {round}: {:?}", report.problems);
    }
    store.compact().unwrap();
    drop(store);
    // A compaction with no write beside it folds every pair into the id
    // blocks: nothing is pending, so the `ids` family is empty.
    {
        let db = raw::raw_db(&path);
        let ids = db.cf_handle("ids").unwrap();
        assert_eq!(db.iterator_cf(ids, rocksdb::IteratorMode::Start).count(), 0);
    }
    let store = Store::open(&path, &base(Options::new())).unwrap();
    check(&store, &model, &pool, &mut rng);
    assert!(store.verify().unwrap().ok());
}

/// A writer changes ids (and fingerprints) while compactions run beside
/// it: every change made while a merge was computed survives it, against
/// the id blocks that merge wrote.
#[test]
fn ids_written_while_compactions_run_survive_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut rng = Rng(0xc0c0);
    let store = Store::create(
        &path,
        &Options::new().block_size(96).manual_compaction(true),
    )
    .unwrap();
    let mut model = Model::default();
    let pool: Vec<u64> = (0..600).map(|_| rng.next()).collect();
    let pairs: Vec<(u64, Option<u64>)> = pool.iter().map(|&fp| (fp, Some(fp % 97))).collect();
    for &(fp, id) in &pairs {
        model.insert(fp, id);
    }
    store.insert_many(&pairs).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    /// Stops the compactor however the writer ends (a failed check
    /// unwinds through it).
    struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    std::thread::scope(|scope| {
        let compactor = scope.spawn(|| {
            let mut runs = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                store.compact().unwrap();
                runs += 1;
            }
            runs
        });
        let stopping = Stop(&stop);
        for _ in 0..4000 {
            change(&store, &mut model, &pool, &mut rng);
        }
        drop(stopping);
        assert!(compactor.join().unwrap() > 3, "too few compactions ran");
    });
    check(&store, &model, &pool, &mut rng);
    assert!(store.verify().unwrap().ok());
    store.compact().unwrap();
    check(&store, &model, &pool, &mut rng);
    drop(store);
    let store = Store::open(&path, &Options::new()).unwrap();
    check(&store, &model, &pool, &mut rng);
    assert!(store.verify().unwrap().ok());
}
