//! Levels against the brute-force oracle: stores grown by small writes
//! with a tiny merge threshold, so pending fingerprints go into the
//! smallest level and levels merge into larger ones; every query path
//! (ids included) checked after each merge, across deletes and re-inserts
//! of fingerprints held in every level, reopen, bulk inserts and a full
//! compaction, with `verify` clean throughout.

mod common;
#[path = "common/raw.rs"]
mod raw;

use common::{check_store, clustered, queries, random, shape, Model, Rng};
use simstore::{Options, Store};

/// The batch path (sorted passes over every level) against the model.
fn check_batch(store: &Store, model: &Model, qs: &[u64]) {
    let k = store.max_distance();
    let answers = store.query_many(qs, k).unwrap();
    for (q, got) in qs.iter().zip(&answers) {
        assert_eq!(shape(got), model.query(*q, k), "batch {q:016x}");
    }
}

fn verified(store: &Store) {
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
}

/// The `i`-th of four changes to `fp`, in the store and the model: a new
/// id (from `id`), one of its ids deleted, the fingerprint deleted, or
/// deleted and inserted again with a new id.
fn change(store: &Store, model: &mut Model, fp: u64, i: usize, id: &mut impl FnMut() -> u64) {
    match i % 4 {
        0 => {
            let id = id();
            model.insert(fp, Some(id));
            store.insert(fp, id).unwrap();
        }
        1 => {
            if let Some(&id) = model.fps.get(&fp).and_then(|ids| ids.iter().next()) {
                model.delete(fp, id);
                store.delete(fp, id).unwrap();
            }
        }
        2 => {
            model.delete_fingerprint(fp);
            store.delete_fingerprint(fp).unwrap();
        }
        _ => {
            model.delete_fingerprint(fp);
            store.delete_fingerprint(fp).unwrap();
            let id = id();
            model.insert(fp, Some(id));
            store.insert(fp, id).unwrap();
        }
    }
}

/// A store at `path` of `options` with small blocks and merges, made
/// only when asked, whose merges the returned pause holds when armed;
/// it holds `bulk`'s fingerprints, each with the id `fp % 1000`, as
/// `model` does.
fn pausable_with(
    path: &std::path::Path,
    options: Options,
    bulk: &[u64],
    model: &mut Model,
) -> (Store, simstore::MergePause) {
    let pause = simstore::MergePause::new();
    let options = options
        .block_size(64)
        .merge_threshold(40)
        .manual_compaction(true)
        .pause_merge(pause.clone());
    let store = Store::create(path, &options).unwrap();
    let pairs: Vec<(u64, u64)> = bulk.iter().map(|&fp| (fp, fp % 1000)).collect();
    store.insert_many(&pairs).unwrap();
    for &(fp, id) in &pairs {
        model.insert(fp, Some(id));
    }
    (store, pause)
}

/// Ids counted up from `after` (the first is `after + 1`).
fn ids_after(mut after: u64) -> impl FnMut() -> u64 {
    move || {
        after += 1;
        after
    }
}

/// Non-empty levels.
fn levels_held(store: &Store) -> usize {
    store
        .stats()
        .levels
        .iter()
        .filter(|l| l.fingerprints > 0)
        .count()
}

fn grown(data: &[u64], block_size: usize, seed: u64) {
    grown_with(data, Options::new().block_size(block_size), seed);
}

/// [`grown`] from `options` (merges of 40, manual compaction added).
fn grown_with(data: &[u64], options: Options, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let options = options.merge_threshold(40).manual_compaction(true);
    let store = Store::create(&path, &options).unwrap();
    // Every table is in memory: queries probe the levels above level 0
    // through their in-memory set, carried by every merge below.
    assert!(store.stats().upper_set_bytes.is_some());
    let mut rng = Rng(seed);
    let mut model = Model::default();
    let qs = queries(data, 150, &mut rng);
    let mut most_levels = 0;
    let mut next_id = 0u64;
    for (round, chunk) in data.chunks(53).enumerate() {
        for &fp in chunk {
            model.insert(fp, Some(next_id));
            store.insert(fp, next_id).unwrap();
            next_id += 1;
        }
        // Some fingerprints already stored (in some level) get another id.
        for i in 0..3 {
            let fp = data[(round * 31 + i * 7) % (chunk.len() + round * 53)];
            model.insert(fp, Some(next_id));
            store.insert(fp, next_id).unwrap();
            next_id += 1;
        }
        store.merge_due().unwrap();
        most_levels = most_levels.max(levels_held(&store));
        if round % 9 == 4 {
            check_store(&store, &model, &qs);
            check_batch(&store, &model, &qs);
            verified(&store);
        }
    }
    assert!(
        data.len() < 1000 || most_levels >= 3,
        "only {most_levels} levels held at once"
    );
    check_store(&store, &model, &qs);
    check_batch(&store, &model, &qs);
    verified(&store);

    // Deletes across the levels: whole fingerprints and single pairs,
    // then merges carry the tombstones to the levels holding them.
    let stored: Vec<u64> = model.fps.keys().copied().collect();
    for (i, &fp) in stored.iter().enumerate() {
        match i % 5 {
            0 => {
                model.delete_fingerprint(fp);
                assert!(store.delete_fingerprint(fp).unwrap());
            }
            1 => {
                if let Some(&id) = model.fps[&fp].iter().next() {
                    model.delete(fp, id);
                    assert!(store.delete(fp, id).unwrap());
                }
            }
            _ => {}
        }
    }
    check_store(&store, &model, &qs);
    verified(&store);
    // New fingerprints make merges due; the tombstones go with them.
    for &fp in random(300, &mut rng).iter() {
        model.insert(fp, Some(next_id));
        store.insert(fp, next_id).unwrap();
        next_id += 1;
        if next_id.is_multiple_of(45) {
            store.merge_due().unwrap();
        }
    }
    store.merge_due().unwrap();
    check_store(&store, &model, &qs);
    check_batch(&store, &model, &qs);
    verified(&store);

    // Re-inserts of deleted fingerprints, reopen (blocks read on demand,
    // then warmed), more merges.
    for &fp in stored.iter().step_by(10).take(60) {
        model.insert(fp, Some(next_id));
        store.insert(fp, next_id).unwrap();
        next_id += 1;
    }
    drop(store);
    let store = Store::open(&path, &options.clone().warm(false)).unwrap();
    // Blocks read on demand: queries probe every level's tables.
    assert_eq!(store.stats().upper_set_bytes, None);
    check_store(&store, &model, &qs);
    store.merge_due().unwrap();
    check_store(&store, &model, &qs);
    verified(&store);
    drop(store);
    let store = Store::open(&path, &options).unwrap();
    store.wait_warm();
    assert!(store.stats().upper_set_bytes.is_some());
    check_store(&store, &model, &qs);

    // A bulk insert as large as an eighth of the store takes every level
    // into level 0 with it.
    let bulk: Vec<(u64, u64)> = random(data.len() / 4 + 41, &mut rng)
        .into_iter()
        .map(|fp| {
            next_id += 1;
            (fp, next_id)
        })
        .collect();
    for &(fp, id) in &bulk {
        model.insert(fp, Some(id));
    }
    store.insert_many(&bulk).unwrap();
    check_store(&store, &model, &qs);
    verified(&store);

    // A full compaction leaves one level.
    for &fp in data.iter().take(100) {
        model.insert(fp, Some(next_id));
        store.insert(fp, next_id).unwrap();
        next_id += 1;
    }
    store.merge_due().unwrap();
    store.compact().unwrap();
    assert_eq!(levels_held(&store), usize::from(!model.fps.is_empty()));
    check_store(&store, &model, &qs);
    check_batch(&store, &model, &qs);
    verified(&store);
    assert_eq!(store.stats().pending, 0);
}

#[test]
fn random_data_grown_through_levels() {
    for n in [0usize, 30, 4000] {
        grown(&random(n, &mut Rng(n as u64 + 1)), 48, 7);
    }
}

#[test]
fn clustered_data_grown_through_levels() {
    grown(&clustered(5000, &mut Rng(3)), 64, 8);
}

/// One-table stores (header flips) through the same growth, merges and
/// deletions, level 0 read through its blocks and (narrow headers) flat.
#[test]
fn one_table_stores_grown_through_levels() {
    let one = Options::new().tables(1);
    grown_with(&random(4000, &mut Rng(4001)), one.clone().block_size(48), 7);
    grown_with(&clustered(5000, &mut Rng(3)), one.clone().block_size(64), 8);
    // Headers narrow enough for level 0 to be held flat too.
    grown_with(
        &random(4000, &mut Rng(4002)),
        one.block_size(64).expected_size(1 << 10),
        9,
    );
}

/// Stats report each level and the bytes merges wrote; the background
/// compactor runs the same merges.
#[test]
fn background_merges_fill_levels_and_count_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(
        dir.path().join("s"),
        &Options::new().block_size(64).merge_threshold(30),
    )
    .unwrap();
    let data = random(3000, &mut Rng(99));
    let mut model = Model::default();
    for (i, &fp) in data.iter().enumerate() {
        model.insert(fp, Some(i as u64));
        store.insert(fp, i as u64).unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while store.stats().pending >= 30 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let stats = store.stats();
    assert!(stats.pending < 30, "{stats:?}");
    assert_eq!(stats.levels.len(), 6);
    assert!(stats.merge_bytes_written > 0);
    let held: u64 = stats.levels.iter().map(|l| l.fingerprints).sum();
    assert_eq!(held + stats.pending, 3000);
    assert_eq!(
        stats.levels.iter().map(|l| l.blocks).sum::<u64>(),
        stats.blocks
    );
    assert_eq!(
        stats.levels.iter().map(|l| l.bytes).sum::<u64>(),
        stats.table_bytes
    );
    check_store(&store, &model, &queries(&data, 100, &mut Rng(5)));
    verified(&store);
}

/// Writers wait for the background merges once `max_pending` fingerprints
/// are pending, so a single writer never finds more than that.
#[test]
fn writers_wait_at_max_pending() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(
        dir.path().join("s"),
        &Options::new()
            .block_size(64)
            .merge_threshold(50)
            .max_pending(120)
            .durability(simstore::Durability::Buffered),
    )
    .unwrap();
    let data = random(4000, &mut Rng(17));
    let mut most = 0;
    for (i, &fp) in data.iter().enumerate() {
        store.insert(fp, i as u64).unwrap();
        most = most.max(store.stats().pending);
    }
    assert!(most <= 120, "{most} pending");
    let mut model = Model::default();
    for (i, &fp) in data.iter().enumerate() {
        model.insert(fp, Some(i as u64));
    }
    check_store(&store, &model, &queries(&data, 60, &mut Rng(2)));
}

/// A `max_pending` below the merge threshold counts as the threshold: a
/// merge falls due before writers would wait, so they never wait forever.
#[test]
fn max_pending_below_the_threshold_does_not_stall_writers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(
        dir.path().join("s"),
        &Options::new()
            .merge_threshold(80)
            .max_pending(10)
            .durability(simstore::Durability::Buffered),
    )
    .unwrap();
    let store = std::sync::Arc::new(store);
    let (done, finished) = std::sync::mpsc::channel();
    let writer = std::sync::Arc::clone(&store);
    std::thread::spawn(move || {
        for (i, &fp) in random(500, &mut Rng(23)).iter().enumerate() {
            writer.insert(fp, i as u64).unwrap();
        }
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("writers stalled");
    assert!(store.stats().pending <= 80);
    assert_eq!(store.stats().fingerprints, 500);
}

/// Writes made while a merge into level 0 runs (held after its snapshot,
/// before its commit, which redoes the overlay's part they changed; and
/// while it catches up with them and commits) are
/// all kept, ids included: new fingerprints, new ids of fingerprints in
/// level 0 and in the levels moving into it, pairs and whole fingerprints
/// deleted from both, re-inserts; across reopen too.
#[test]
fn writes_made_while_a_merge_into_level_0_runs_are_kept() {
    for (seed, data) in [
        (41, random(2600, &mut Rng(41))),
        (42, clustered(2600, &mut Rng(42))),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut rng = Rng(seed);
        let mut model = Model::default();
        let (bulk, rest) = data.split_at(1600);
        let (small, late) = rest.split_at(800);
        let buffered = Options::new().durability(simstore::Durability::Buffered);
        let (store, pause) = pausable_with(&path, buffered, bulk, &mut model);
        // The last 40 are flushed into level 1 on their own (the ones
        // before may have gone on into level 0).
        for (i, &fp) in small.iter().enumerate() {
            model.insert(fp, Some(5000 + i as u64));
            store.insert(fp, 5000 + i as u64).unwrap();
            if i % 40 == 39 && i + 1 < small.len() {
                store.merge_due().unwrap();
            }
        }
        store.merge_due().unwrap();
        assert!(levels_held(&store) >= 2, "{:?}", store.stats().levels);
        // Enough pending when the merge starts that it writes the
        // `pending` family again whole.
        let mut pending_ids = Vec::new();
        for (i, &fp) in late.iter().enumerate() {
            for bit in [60, 61] {
                pending_ids.push((fp ^ (1 << bit), 20_000 + 2 * i as u64 + bit));
            }
        }
        for &(fp, id) in &pending_ids {
            model.insert(fp, Some(id));
            store.insert(fp, id).unwrap();
        }
        // Pending without an id when the merge takes its snapshot, given
        // one while it runs: the merge takes them into level 0, where
        // their pairs are no longer marked pending.
        let bare: Vec<u64> = late.iter().step_by(5).map(|&fp| fp ^ (1 << 59)).collect();
        for &fp in &bare {
            model.insert(fp, None);
            store.insert_fingerprint(fp).unwrap();
        }
        let qs = queries(&data, 120, &mut rng);
        std::thread::scope(|s| {
            pause.arm();
            let merge = s.spawn(|| store.compact().unwrap());
            pause.wait_held();
            let mut id = ids_after(10_000);
            for &fp in &bare {
                let id = id();
                model.insert(fp, Some(id));
                store.insert(fp, id).unwrap();
            }
            for (i, &fp) in late.iter().enumerate() {
                let id = id();
                model.insert(fp, Some(id));
                store.insert(fp, id).unwrap();
                // Pending ones change again.
                if i % 7 == 0 {
                    model.delete(fp, id);
                    store.delete(fp, id).unwrap();
                }
                // Pending ones without an id (with a `pending` key).
                if i % 11 == 0 {
                    model.insert(fp ^ (1 << 62), None);
                    store.insert_fingerprint(fp ^ (1 << 62)).unwrap();
                }
            }
            for (i, &fp) in bulk.iter().chain(small).enumerate().step_by(9) {
                change(&store, &mut model, fp, i, &mut id);
            }
            assert!(!merge.is_finished(), "the merge waits for its release");
            pause.release();
            // Writes go on while the merge catches up with those above
            // and commits: new fingerprints, and ids of the ones it moves.
            let mut i = 0;
            while !merge.is_finished() || i < 50 {
                let id = id();
                let fp = if i % 2 == 0 {
                    late[i % late.len()] ^ (1 << 63)
                } else {
                    small[i % small.len()]
                };
                model.insert(fp, Some(id));
                store.insert(fp, id).unwrap();
                if i % 5 == 0 {
                    model.delete(fp, id);
                    store.delete(fp, id).unwrap();
                }
                i += 1;
            }
            merge.join().unwrap();
        });
        check_store(&store, &model, &qs);
        check_batch(&store, &model, &qs);
        verified(&store);
        assert_eq!(store.stats().ids, model.ids());
        drop(store);
        // The merge wrote the `pending` family again with the fingerprints
        // left pending: keys for those without ids (the others are named
        // by their pairs, and have none unless a merge that did not take
        // the pending set in wrote the family again).
        let db = raw::raw_db(&path);
        let cf = db.cf_handle("pending").unwrap();
        let keys: std::collections::HashSet<u64> = db
            .iterator_cf(cf, rocksdb::IteratorMode::Start)
            .map(|kv| u64::from_be_bytes(kv.unwrap().0[..8].try_into().unwrap()))
            .collect();
        drop(db);
        let mut without_ids = 0;
        for &fp in late {
            let x = fp ^ (1 << 62);
            if model.fps.get(&x).is_some_and(|ids| ids.is_empty()) {
                assert!(keys.contains(&x), "{x:016x} has no key");
                without_ids += 1;
            }
        }
        assert!(without_ids > 0);
        let store = Store::open(&path, &Options::new()).unwrap();
        check_store(&store, &model, &qs);
        verified(&store);
        store.compact().unwrap();
        check_store(&store, &model, &qs);
        verified(&store);
    }
}

/// Writes made after a merge into level 0 that leaves the other levels
/// and the pending set where they are (it folds the pairs added to level
/// 0's fingerprints into their id blocks) has put the `ids` families'
/// content in its batch, before it catches up with them: pairs of the
/// fingerprints it leaves deleted and added, ids given to and taken from
/// the ones whose id blocks it rewrites, fingerprints deleted and
/// inserted again. It writes them again after that content, so all are
/// kept, across reopen and a compaction.
#[test]
fn writes_made_after_a_merge_into_level_0_put_its_pairs_back_are_kept() {
    for (seed, data) in [
        (61, random(2000, &mut Rng(61))),
        (62, clustered(2000, &mut Rng(62))),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut rng = Rng(seed);
        let mut model = Model::default();
        let bulk = &data[..1600];
        // Fingerprints new to the store, whatever the data.
        let rest = random(90, &mut Rng(seed + 100));
        let (top, rest) = rest.split_at(40);
        let (store, pause) = pausable_with(&path, Options::new(), bulk, &mut model);
        store.compact().unwrap();
        // One flush into the top, then 30 pending (fewer than the
        // threshold): with ids, with several, and without.
        for (i, &fp) in top.iter().enumerate() {
            model.insert(fp, Some(5000 + i as u64));
            store.insert(fp, 5000 + i as u64).unwrap();
        }
        store.merge_due().unwrap();
        let pending = &rest[..30];
        for (i, &fp) in pending.iter().enumerate() {
            let ids = match i % 3 {
                0 => vec![],
                1 => vec![9000 + i as u64],
                _ => vec![9000 + i as u64, 9500 + i as u64],
            };
            if ids.is_empty() {
                model.insert(fp, None);
                store.insert_fingerprint(fp).unwrap();
            }
            for id in ids {
                model.insert(fp, Some(id));
                store.insert(fp, id).unwrap();
            }
        }
        // More pairs added to level 0's fingerprints than twice the
        // threshold: the next merge due folds them into their id blocks.
        for (i, &fp) in bulk.iter().step_by(10).enumerate() {
            model.insert(fp, Some(40_000 + i as u64));
            store.insert(fp, 40_000 + i as u64).unwrap();
        }
        let levels = |store: &Store| {
            let stats = store.stats();
            let held: Vec<u64> = stats.levels.iter().map(|l| l.fingerprints).collect();
            (held, stats.pending)
        };
        let (held, waiting) = levels(&store);
        assert!(
            held[5] > 0 && held[1..5].iter().all(|&n| n == 0),
            "{held:?}"
        );
        assert!(waiting > 0 && waiting < 40, "{waiting} pending");
        let all: Vec<u64> = bulk.iter().chain(top).chain(rest).copied().collect();
        let qs = queries(&all, 160, &mut rng);
        std::thread::scope(|s| {
            pause.arm_after_whole();
            let merge = s.spawn(|| store.merge_due().unwrap());
            pause.wait_held();
            let mut id = ids_after(30_000);
            let folded = bulk.iter().step_by(10).take(12);
            for (i, &fp) in pending.iter().chain(top).chain(folded).enumerate() {
                change(&store, &mut model, fp, i, &mut id);
            }
            for &fp in &rest[30..50] {
                let id = id();
                model.insert(fp, Some(id));
                store.insert(fp, id).unwrap();
            }
            assert!(!merge.is_finished(), "the merge waits for its release");
            pause.release();
            merge.join().unwrap();
        });
        check_store(&store, &model, &qs);
        verified(&store);
        drop(store);
        for round in 0..2 {
            let store = Store::open(&path, &Options::new().manual_compaction(true)).unwrap();
            check_store(&store, &model, &qs);
            verified(&store);
            if round == 0 {
                store.compact().unwrap();
                check_store(&store, &model, &qs);
            }
        }
    }
}

/// Writes made while merges take the pending set into the smallest level
/// (run on another thread, beside the writes) are all kept across reopen:
/// each such merge writes the `pending` family again, from the
/// fingerprints written since its snapshot, and a fingerprint without ids
/// still pending after it keeps its key there.
#[test]
fn writes_made_while_the_pending_set_merges_are_kept_across_reopen() {
    for (seed, data) in [
        (51, random(5000, &mut Rng(51))),
        (52, clustered(5000, &mut Rng(52))),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let options = Options::new()
            .block_size(64)
            .merge_threshold(40)
            .manual_compaction(true)
            .durability(simstore::Durability::Buffered);
        let store = Store::create(&path, &options).unwrap();
        let mut model = Model::default();
        let done = std::sync::atomic::AtomicBool::new(false);
        // Merges that took pending fingerprints in so far.
        let progress = std::sync::atomic::AtomicU64::new(0);
        let merges = std::thread::scope(|s| {
            let merger = s.spawn(|| {
                let mut merges = 0u64;
                while !done.load(std::sync::atomic::Ordering::Acquire) {
                    merges += u64::from(store.merge_due().unwrap().merged > 0);
                    progress.store(merges, std::sync::atomic::Ordering::Release);
                }
                merges
            });
            let mut seen = 0u64;
            let mut again = std::collections::VecDeque::new();
            for (i, &fp) in data.iter().enumerate() {
                if i % 3 == 0 {
                    model.insert(fp, None);
                    store.insert_fingerprint(fp).unwrap();
                } else {
                    model.insert(fp, Some(i as u64));
                    store.insert(fp, i as u64).unwrap();
                }
                // Deleted from a level, tombstoned until a merge drops
                // it, and inserted again a little later: during that
                // merge, now and then, which must leave it pending.
                if i % 13 == 0 || i % 13 == 6 && i >= 60 {
                    // Far back (in a large level) or recent (in the
                    // smallest, which the next merge rewrites).
                    let old = data[if i % 13 == 0 { i / 2 } else { i - 60 }];
                    if model.fps.contains_key(&old) {
                        model.delete_fingerprint(old);
                        store.delete_fingerprint(old).unwrap();
                        again.push_back((i + [3, 11, 29][i % 3], old));
                    }
                }
                while again.front().is_some_and(|&(at, _)| at <= i) {
                    let (_, old) = again.pop_front().unwrap();
                    model.insert(old, None);
                    store.insert_fingerprint(old).unwrap();
                }
                // Lets the merges in on a busy machine; every 500 writes,
                // waits for one more, so that merges run beside the writes
                // however the threads are scheduled.
                if i % 20 == 0 {
                    std::thread::yield_now();
                }
                if i % 500 == 499 {
                    while progress.load(std::sync::atomic::Ordering::Acquire) <= seen {
                        std::thread::yield_now();
                    }
                    seen = progress.load(std::sync::atomic::Ordering::Acquire);
                }
            }
            done.store(true, std::sync::atomic::Ordering::Release);
            merger.join().unwrap()
        });
        assert!(merges >= 3, "{merges} merges");
        let qs = queries(&data, 150, &mut Rng(seed));
        check_store(&store, &model, &qs);
        drop(store);
        let store = Store::open(&path, &Options::new()).unwrap();
        check_store(&store, &model, &qs);
        assert_eq!(store.stats().fingerprints as usize, model.fps.len());
        verified(&store);
    }
}
