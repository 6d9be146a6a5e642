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
    // blocks: nothing is pending, so both `ids` families are empty.
    {
        let db = raw::raw_db(&path);
        for family in ["ids", "ids-alt"] {
            let ids = db.cf_handle(family).unwrap();
            assert_eq!(
                db.iterator_cf(ids, rocksdb::IteratorMode::Start).count(),
                0,
                "{family}"
            );
        }
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

/// A pending fingerprint inserted with an id is named by its pairs, with
/// no `pending` key: kept across reopens as its pairs change (one of two
/// deleted; all of them deleted and the fingerprint stored again without
/// an id, in one write or two), and not taken for pending once a merge
/// moved it into a level above level 0 or into level 0, with the model's
/// ids and the `pending` family's keys each time.
#[test]
fn pending_fingerprints_named_by_their_pairs_are_kept_across_reopens() {
    use simstore::Op;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let options = Options::new().merge_threshold(40).manual_compaction(true);
    let mut rng = Rng(5);
    let mut model = Model::default();
    let pool = common::random(300, &mut rng);
    let mut next_id = 0u64;
    let mut insert = |store: &Store, model: &mut Model, fp: u64| {
        next_id += 1;
        model.insert(fp, Some(next_id));
        store.insert(fp, next_id).unwrap();
        next_id
    };
    // Level 0 holds the first hundred.
    let store = Store::create(&path, &options).unwrap();
    for &fp in &pool[..100] {
        insert(&store, &mut model, fp);
    }
    store.compact().unwrap();
    // The next hundred move into a level above level 0.
    for &fp in &pool[100..200] {
        insert(&store, &mut model, fp);
    }
    store.merge_due().unwrap();
    assert_eq!(store.stats().pending, 0);
    assert!(store.stats().levels[1..].iter().any(|l| l.fingerprints > 0));
    // The rest stay pending, changed in every way a write can.
    let [a, b, c, d, e] = [pool[200], pool[201], pool[202], pool[203], pool[204]];
    for &fp in &pool[200..] {
        insert(&store, &mut model, fp);
    }
    let second = insert(&store, &mut model, a);
    let first = *model.fps[&a].iter().next().unwrap();
    model.delete(a, first);
    assert!(store.delete(a, first).unwrap());
    assert_eq!(model.fps[&a].iter().copied().collect::<Vec<_>>(), [second]);
    let of_b = *model.fps[&b].iter().next().unwrap();
    store
        .apply(vec![
            Op::DeleteFingerprint { fingerprint: b },
            Op::Insert {
                fingerprint: b,
                id: None,
            },
        ])
        .unwrap();
    model.delete(b, of_b);
    model.insert(b, None);
    let of_c = *model.fps[&c].iter().next().unwrap();
    store
        .apply(vec![
            Op::Delete {
                fingerprint: c,
                id: of_c,
            },
            Op::Insert {
                fingerprint: c,
                id: None,
            },
        ])
        .unwrap();
    model.delete(c, of_c);
    model.insert(c, None);
    let of_d = *model.fps[&d].iter().next().unwrap();
    assert!(store.delete(d, of_d).unwrap());
    model.delete(d, of_d);
    store.insert_fingerprint(d).unwrap();
    model.insert(d, None);
    assert!(store.delete_fingerprint(e).unwrap());
    model.delete_fingerprint(e);
    let pending = store.stats().pending;
    assert_eq!(pending, 99);
    drop(store);

    let keys = |path: &std::path::Path| {
        let db = raw::raw_db(path);
        let cf = db.cf_handle("pending").unwrap();
        let mut fps: Vec<u64> = db
            .iterator_cf(cf, rocksdb::IteratorMode::Start)
            .map(|kv| u64::from_be_bytes(kv.unwrap().0[..8].try_into().unwrap()))
            .collect();
        fps.sort_unstable();
        fps
    };
    // Those left without ids (b, c, d) have a key; so may `a`, whose
    // pairs changed while pending; no other does.
    let named = keys(&path);
    for fp in [b, c, d] {
        assert!(named.contains(&fp), "{fp:016x} has no key");
    }
    assert!(
        named.iter().all(|fp| [a, b, c, d].contains(fp)),
        "{named:?}"
    );

    for round in 0..3 {
        let store = Store::open(&path, &options).unwrap();
        let want = if round == 0 { pending } else { 0 };
        assert_eq!(store.stats().pending, want, "round {round}");
        check(&store, &model, &pool, &mut rng);
        check_store(&store, &model, &pool);
        let report = store.verify().unwrap();
        assert!(report.ok(), "round {round}: {:?}", report.problems);
        if round == 0 {
            // Into a level above level 0, their pairs still marked.
            store.merge_due().unwrap();
            let levels = &store.stats().levels;
            assert!(levels[1..].iter().any(|l| l.fingerprints >= 99));
        } else {
            store.compact().unwrap();
        }
        assert_eq!(store.stats().pending, 0, "round {round}");
        check_store(&store, &model, &pool);
        let report = store.verify().unwrap();
        assert!(report.ok(), "round {round}: {:?}", report.problems);
    }
}

/// Groups of mixed operations in one `Store::apply` call (each group one
/// write), on a few fingerprints of which one holds thousands of ids:
/// many of its ids deleted in one group, in random order; all deleted and
/// one stored again in the same group; the fingerprint deleted whole then
/// given ids again. Each operation's outcome (did it change the store?)
/// and every id are checked against the model after each group, across
/// compactions (the ids then in id blocks) and reopens.
/// Applies `ops` to `model` in order; the model's outcome of each.
fn apply_to_model(model: &mut Model, ops: &[simstore::Op]) -> Vec<bool> {
    use simstore::Op;
    let mut want = Vec::new();
    for op in ops {
        want.push(match *op {
            Op::Insert { fingerprint, id } => {
                let new = !model.fps.contains_key(&fingerprint)
                    || id.is_some_and(|id| !model.fps[&fingerprint].contains(&id));
                model.insert(fingerprint, id);
                new
            }
            Op::Delete { fingerprint, id } => {
                let had = model.fps.get(&fingerprint).is_some_and(|s| s.contains(&id));
                model.delete(fingerprint, id);
                had
            }
            Op::DeleteFingerprint { fingerprint } => model.fps.remove(&fingerprint).is_some(),
            _ => unreachable!(),
        });
    }
    want
}

#[test]
fn small_groups_naming_a_fingerprint_with_many_ids() {
    // Each small group asks of a fingerprint with 60K ids (40K in an id
    // block of ~130 KB, held though the tables are on disk; 20K added
    // since) whether a pair is stored, without listing its ids: ids it
    // has, ids it has not (below and above all of them, between two), ids
    // added or removed since its id block, in a group with deletes and
    // other fingerprints.
    use simstore::Op;
    for memory in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut rng = Rng(0x5a11 + u64::from(memory));
        let mut options = Options::new().manual_compaction(true);
        if !memory {
            options = options.memory_budget(0);
        }
        let mut store = Store::create(&path, &options).unwrap();
        let mut model = Model::default();
        let hot = 0x0123_4567_89ab_cdefu64;
        let others: Vec<u64> = (0..50).map(|_| rng.next()).collect();
        let mut pool = others.clone();
        pool.push(hot);
        // Ids spaced ~1,000 apart from 5,000,000 on: 26 bits each.
        let mut first: Vec<(u64, u64)> = (0..40_000u64)
            .map(|i| (hot, 5_000_000 + i * 1_000 + rng.below(1_000)))
            .collect();
        first.extend(others.iter().map(|&fp| (fp, rng.below(1 << 40))));
        for &(fp, id) in &first {
            model.insert(fp, Some(id));
        }
        store.insert_many(&first).unwrap();
        store.compact().unwrap();
        // 20K more since its id block, by groups: overlay entries.
        for group in 0..4u64 {
            let ops: Vec<Op> = (0..5_000u64)
                .map(|i| Op::Insert {
                    fingerprint: hot,
                    id: Some(45_000_000 + (group * 5_000 + i) * 7),
                })
                .collect();
            let want = apply_to_model(&mut model, &ops);
            assert_eq!(store.apply(ops).unwrap(), want, "more ids {group}");
        }
        for group in 0..400u64 {
            let stored: Vec<u64> = model.fps[&hot].iter().copied().collect();
            let some = |rng: &mut Rng| stored[rng.below(stored.len() as u64) as usize];
            let mut ops = Vec::new();
            for _ in 0..4 {
                let id = match rng.below(8) {
                    0 => some(&mut rng),
                    1 => some(&mut rng) + 1,
                    2 => some(&mut rng) - 1,
                    3 => rng.below(5_000_000),
                    4 => 45_000_000 + rng.below(1 << 30),
                    5 => u64::MAX - rng.below(2),
                    _ => 5_000_000 + rng.below(40_000_000),
                };
                ops.push(match rng.below(3) {
                    0 => Op::Delete {
                        fingerprint: hot,
                        id,
                    },
                    _ => Op::Insert {
                        fingerprint: hot,
                        id: Some(id),
                    },
                });
            }
            ops.push(Op::Insert {
                fingerprint: others[rng.below(others.len() as u64) as usize],
                id: Some(rng.below(1 << 40)),
            });
            let want = apply_to_model(&mut model, &ops);
            assert_eq!(store.apply(ops).unwrap(), want, "group {group}");
            if group % 50 == 49 {
                check(&store, &model, &pool, &mut rng);
            }
            match group % 150 {
                99 => {
                    store.compact().unwrap();
                }
                149 => {
                    drop(store);
                    store = Store::open(&path, &options).unwrap();
                }
                _ => {}
            }
        }
        // A small group deleting it whole, and another storing it again.
        let ops = vec![
            Op::DeleteFingerprint { fingerprint: hot },
            Op::Insert {
                fingerprint: hot,
                id: Some(9),
            },
            Op::DeleteFingerprint { fingerprint: hot },
        ];
        let want = apply_to_model(&mut model, &ops);
        assert_eq!(store.apply(ops).unwrap(), want, "deleted whole");
        check(&store, &model, &pool, &mut rng);
        let report = store.verify().unwrap();
        assert!(report.ok(), "{:?}", report.problems);
    }
}

#[test]
fn groups_of_many_changes_to_a_fingerprint_with_many_ids() {
    use simstore::Op;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut rng = Rng(0x4075);
    let options = Options::new().block_size(96).manual_compaction(true);
    let mut store = Store::create(&path, &options).unwrap();
    let mut model = Model::default();
    let hot = 0x00ff_00ff_00ff_00ffu64;
    let pool: Vec<u64> = vec![hot, rng.next(), rng.next(), rng.next()];
    let first: Vec<(u64, u64)> = (0..4000).map(|i| (hot, 10 * i)).collect();
    for &(fp, id) in &first {
        model.insert(fp, Some(id));
    }
    store.insert_many(&first).unwrap();
    for round in 0..16 {
        let mut ops = Vec::new();
        let ids_now: Vec<u64> = model.fps.get(&hot).into_iter().flatten().copied().collect();
        match round % 4 {
            // Delete a third of the hot fingerprint's ids, in random
            // order, among new ids of it and changes of the others.
            0 => {
                for (i, &id) in ids_now.iter().enumerate() {
                    if i % 3 == round % 3 {
                        ops.push(Op::Delete {
                            fingerprint: hot,
                            id,
                        });
                    }
                }
                for _ in 0..400 {
                    let fp = pool[rng.below(pool.len() as u64) as usize];
                    ops.push(Op::Insert {
                        fingerprint: fp,
                        id: Some(rng.below(50_000)),
                    });
                }
            }
            // Delete every id one by one (the fingerprint goes with the
            // last); every other time, then store it again without an id,
            // delete an id it does not have and give it one.
            1 => {
                for &id in &ids_now {
                    ops.push(Op::Delete {
                        fingerprint: hot,
                        id,
                    });
                }
                if round % 8 == 5 {
                    ops.push(Op::Insert {
                        fingerprint: hot,
                        id: None,
                    });
                    ops.push(Op::Delete {
                        fingerprint: hot,
                        id: 8,
                    });
                    ops.push(Op::Insert {
                        fingerprint: hot,
                        id: Some(7),
                    });
                }
            }
            // Delete it whole, twice, storing ids between and after.
            2 => {
                ops.push(Op::DeleteFingerprint { fingerprint: hot });
                ops.push(Op::Insert {
                    fingerprint: hot,
                    id: Some(3),
                });
                ops.push(Op::DeleteFingerprint { fingerprint: hot });
                ops.push(Op::DeleteFingerprint { fingerprint: hot });
                for i in 0..3000 {
                    ops.push(Op::Insert {
                        fingerprint: hot,
                        id: Some(1_000_000 + i),
                    });
                }
            }
            // Random changes of all of them.
            _ => {
                for _ in 0..3000 {
                    let fp = pool[rng.below(pool.len() as u64) as usize];
                    let id = 1_000_000 + rng.below(4000);
                    ops.push(match rng.below(8) {
                        0..=3 => Op::Insert {
                            fingerprint: fp,
                            id: Some(id),
                        },
                        4..=6 => Op::Delete {
                            fingerprint: fp,
                            id,
                        },
                        _ => Op::DeleteFingerprint { fingerprint: fp },
                    });
                }
            }
        }
        let want = apply_to_model(&mut model, &ops);
        let got = store.apply(ops).unwrap();
        assert_eq!(got, want, "round {round}: outcomes");
        check(&store, &model, &pool, &mut rng);
        match round % 3 {
            0 => {
                store.compact().unwrap();
            }
            1 => {
                drop(store);
                store = Store::open(&path, &options).unwrap();
            }
            _ => {}
        }
        check(&store, &model, &pool, &mut rng);
        let report = store.verify().unwrap();
        assert!(report.ok(), "round {round}: {:?}", report.problems);
    }
}

/// Queries listing at most N ids a match (`query_many_max_ids`, first or
/// not, plain and batched; `query_probabilistic_many_max_ids`) give the
/// full listing cut to its N smallest ids, and count them all, for a
/// fingerprint with ids in its id block and changed since (the smallest
/// removed, others added below, between and above), one pending with all
/// its ids added since, one with ids in its block only, fingerprints
/// with one id and none; on disk and in memory, four tables and one,
/// across compaction and reopen.
#[test]
fn queries_listing_a_few_ids_are_the_full_listing_cut() {
    use simstore::simhash::Volatility;
    use simstore::{Budget, Op};
    for (memory, tables) in [(false, 4), (true, 4), (true, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut rng = Rng(0x1157 + u64::from(memory) + tables as u64);
        let mut options = Options::new().manual_compaction(true).tables(tables);
        if !memory {
            options = options.memory_budget(0);
        }
        let mut store = Store::create(&path, &options).unwrap();
        let mut model = Model::default();
        let (changed, pending, block_only) =
            (0x0123_4567_89ab_cdefu64, !0x0123_4567u64, 0x5555 << 40);
        let others: Vec<u64> = (0..2_000).map(|_| rng.next()).collect();
        let mut first: Vec<(u64, Option<u64>)> = (0..3_000u64)
            .map(|i| (changed, Some(1_000 + i * 10)))
            .chain((0..2_000u64).map(|i| (block_only, Some(7 + i * 3))))
            .chain(
                others
                    .iter()
                    .enumerate()
                    .map(|(i, &fp)| (fp, (i % 20 != 0).then_some(i as u64))),
            )
            .collect();
        first.sort_unstable();
        for &(fp, id) in &first {
            model.insert(fp, id);
        }
        store.insert_many(&first).unwrap();
        store.compact().unwrap();
        // Changes since the id blocks: removals of `changed`'s smallest
        // ids and of some others, additions below, between and above; all
        // of `pending`'s ids.
        let mut ops: Vec<Op> = (0..8u64)
            .map(|i| Op::Delete {
                fingerprint: changed,
                id: 1_000 + i * 10,
            })
            .collect();
        ops.extend((0..300u64).map(|i| Op::Insert {
            fingerprint: changed,
            id: Some(match i % 3 {
                0 => i,
                1 => 1_000 + i * 100 + 5,
                _ => 1_000_000 + i,
            }),
        }));
        ops.extend((0..100u64).map(|i| Op::Delete {
            fingerprint: changed,
            id: 2_000 + i * 20,
        }));
        ops.extend((0..700u64).map(|i| Op::Insert {
            fingerprint: pending,
            id: Some(50_000 - i * 3),
        }));
        for ops in ops.chunks(37) {
            let want = apply_to_model(&mut model, ops);
            assert_eq!(store.apply(ops.to_vec()).unwrap(), want);
        }
        let mut queries = Vec::new();
        for _ in 0..60 {
            for fp in [changed, pending, block_only] {
                let bits = rng.below(4) as u32;
                queries.push(rng.flip(fp, bits));
            }
            let other = others[rng.below(others.len() as u64) as usize];
            let bits = rng.below(4) as u32;
            queries.push(rng.flip(other, bits));
            queries.push(rng.next());
        }
        for round in 0..3 {
            check_store(&store, &model, &queries);
            check_listing(&store, &queries, tables == 1, &[0, 1, 3, 700, usize::MAX]);
            // A batch large enough to be sorted and spread over threads.
            let batch: Vec<u64> = (0..5_000)
                .map(|i| queries[i % queries.len()] ^ (i as u64 >> 8))
                .collect();
            check_listing(&store, &batch, false, &[2]);
            match round {
                0 => {
                    store.compact().unwrap();
                    // Changes since the new id blocks: the smallest ids
                    // removed, smaller ones added.
                    let smallest: Vec<u64> = model.fps[&changed].iter().take(5).copied().collect();
                    let mut ops: Vec<Op> = smallest
                        .iter()
                        .map(|&id| Op::Delete {
                            fingerprint: changed,
                            id,
                        })
                        .collect();
                    ops.push(Op::Insert {
                        fingerprint: changed,
                        id: Some(smallest[2] + 1),
                    });
                    ops.push(Op::Delete {
                        fingerprint: pending,
                        id: 50_000,
                    });
                    let want = apply_to_model(&mut model, &ops);
                    assert_eq!(store.apply(ops).unwrap(), want);
                }
                _ => {
                    drop(store);
                    store = Store::open(&path, &options).unwrap();
                }
            }
        }
    }

    fn check_listing(store: &Store, queries: &[u64], probabilistic: bool, maxes: &[usize]) {
        let k = 3;
        let full = store.query_many(queries, k).unwrap();
        let first_full = store.query_first_many(queries, k).unwrap();
        let volatile: Vec<(u64, Volatility)> = queries
            .iter()
            .map(|&q| (q, Volatility::uniform(0.1)))
            .collect();
        let budgets = if probabilistic {
            vec![Budget::default(), Budget::EXHAUSTIVE]
        } else {
            vec![Budget::default()]
        };
        for &max in maxes {
            let cut = |m: &simstore::Match| {
                assert_eq!(m.id_count, m.ids.len(), "a full listing counts its ids");
                (
                    m.fingerprint,
                    m.distance,
                    m.ids[..max.min(m.ids.len())].to_vec(),
                    m.ids.len(),
                )
            };
            let shape =
                |m: &simstore::Match| (m.fingerprint, m.distance, m.ids.clone(), m.id_count);
            let got = store.query_many_max_ids(queries, k, false, max).unwrap();
            for (q, (g, f)) in got.iter().zip(&full).enumerate() {
                let g: Vec<_> = g.iter().map(shape).collect();
                let f: Vec<_> = f.iter().map(cut).collect();
                assert_eq!(g, f, "query {q}, at most {max}");
            }
            let got = store.query_many_max_ids(queries, k, true, max).unwrap();
            for (q, (g, f)) in got.iter().zip(&first_full).enumerate() {
                let g: Vec<_> = g.iter().map(shape).collect();
                let f: Vec<_> = f.iter().map(cut).collect();
                assert_eq!(g, f, "first, query {q}, at most {max}");
            }
            for &budget in &budgets {
                for first in [false, true] {
                    let full = store
                        .query_probabilistic_many(&volatile, k, budget, first)
                        .unwrap();
                    let got = store
                        .query_probabilistic_many_max_ids(&volatile, k, budget, first, max)
                        .unwrap();
                    for (q, (g, f)) in got.iter().zip(&full).enumerate() {
                        let g: Vec<_> = g.iter().map(shape).collect();
                        let f: Vec<_> = f.iter().map(cut).collect();
                        assert_eq!(g, f, "probabilistic {first}, query {q}, at most {max}");
                    }
                }
            }
        }
    }
}
