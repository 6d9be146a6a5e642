//! Readers, writers (group commits and bulk inserts) and the background
//! compactor at once: every query sees each acknowledged insert and delete,
//! and nothing else.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

use common::{check_store, Model, Rng};
use simstore::{Options, Store};

const UNSENT: u8 = 0;
const INSERTING: u8 = 1;
const PRESENT: u8 = 2;
const DELETING: u8 = 3;
const DELETED: u8 = 4;

#[test]
fn readers_writers_and_compactor() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        Store::create(
            dir.path().join("s"),
            &Options::new()
                .block_size(96)
                .merge_threshold(64)
                .durability(simstore::Durability::Buffered),
        )
        .unwrap(),
    );
    // The last writer inserts through the bulk path (batches of 100, above
    // the merge threshold of 64): merges straight into the tables that
    // race with the others' group commits and the background compactor.
    let writers = 4usize;
    let per_writer = 1500usize;
    let mut rng = Rng(1);
    // Fingerprints are distinct across writers; many are near each other.
    let mut fps: Vec<u64> = common::clustered(writers * per_writer * 2, &mut rng);
    fps.sort_unstable();
    fps.dedup();
    fps.truncate(writers * per_writer);
    let fps = Arc::new(fps);
    let states: Arc<Vec<AtomicU8>> =
        Arc::new((0..fps.len()).map(|_| AtomicU8::new(UNSENT)).collect());
    let done = Arc::new(AtomicBool::new(false));

    let mut handles = Vec::new();
    for w in 0..writers {
        let (store, fps, states) = (Arc::clone(&store), Arc::clone(&fps), Arc::clone(&states));
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng(100 + w as u64);
            let mine: Vec<usize> = (w..fps.len()).step_by(writers).collect();
            if w == writers - 1 {
                for chunk in mine.chunks(100) {
                    for &i in chunk {
                        states[i].store(INSERTING, Ordering::SeqCst);
                    }
                    let pairs: Vec<(u64, Option<u64>)> =
                        chunk.iter().map(|&i| (fps[i], Some(i as u64))).collect();
                    store.insert_many(&pairs).unwrap();
                    for &i in chunk {
                        states[i].store(PRESENT, Ordering::SeqCst);
                    }
                }
                return;
            }
            for (n, &i) in mine.iter().enumerate() {
                states[i].store(INSERTING, Ordering::SeqCst);
                store.insert(fps[i], i as u64).unwrap();
                states[i].store(PRESENT, Ordering::SeqCst);
                if n % 3 == 0 {
                    let j = mine[rng.below(n as u64 + 1) as usize];
                    if states[j].load(Ordering::SeqCst) == PRESENT {
                        states[j].store(DELETING, Ordering::SeqCst);
                        assert!(store.delete(fps[j], j as u64).unwrap());
                        states[j].store(DELETED, Ordering::SeqCst);
                    }
                }
            }
        }));
    }
    let mut readers = Vec::new();
    for r in 0..3u64 {
        let (store, fps, states, done) = (
            Arc::clone(&store),
            Arc::clone(&fps),
            Arc::clone(&states),
            Arc::clone(&done),
        );
        readers.push(std::thread::spawn(move || {
            let mut rng = Rng(200 + r);
            let mut checks = 0u64;
            while !done.load(Ordering::SeqCst) {
                let i = rng.below(fps.len() as u64) as usize;
                let before = states[i].load(Ordering::SeqCst);
                let found = match r {
                    0 => store
                        .query(fps[i], 0)
                        .unwrap()
                        .iter()
                        .any(|m| m.fingerprint == fps[i]),
                    1 => store
                        .query_first(fps[i], 0)
                        .unwrap()
                        .is_some_and(|m| m.fingerprint == fps[i]),
                    _ => store.query_many(&[fps[i], 0], 0).unwrap()[0]
                        .iter()
                        .any(|m| m.fingerprint == fps[i]),
                };
                let after = states[i].load(Ordering::SeqCst);
                if before == PRESENT && after == PRESENT {
                    assert!(found, "acknowledged fingerprint {:016x} missing", fps[i]);
                }
                if before == DELETED || (before == UNSENT && after == UNSENT) {
                    assert!(
                        !found,
                        "fingerprint {:016x} found in state {before}->{after}",
                        fps[i]
                    );
                }
                checks += 1;
            }
            checks
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let checks: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(checks > 100, "readers barely ran: {checks}");

    let mut model = Model::default();
    for (i, s) in states.iter().enumerate() {
        if s.load(Ordering::SeqCst) == PRESENT {
            model.insert(fps[i], Some(i as u64));
        }
    }
    let qs = common::queries(&fps, 200, &mut Rng(5));
    check_store(&store, &model, &qs);
    store.compact().unwrap();
    check_store(&store, &model, &qs);
    assert!(store.verify().unwrap().ok());
}

#[test]
fn concurrent_sync_writers_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Arc::new(Store::create(&path, &Options::new().manual_compaction(true)).unwrap());
    let handles: Vec<_> = (0..8u64)
        .map(|w| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for i in 0..40u64 {
                    store.insert((w << 32) | i, w * 1000 + i).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    drop(store);
    let store = Store::open(&path, &Options::new()).unwrap();
    for w in 0..8u64 {
        for i in 0..40u64 {
            assert_eq!(store.ids((w << 32) | i).unwrap(), vec![w * 1000 + i]);
        }
    }
    assert_eq!(store.stats().fingerprints, 320);
}

/// Many callers racing single-op requests through group commit: each
/// gets its own request's outcome (a fingerprint is new for exactly one
/// of the callers that insert it, and its removal reported to exactly
/// one of those that delete it), in both durability modes.
#[test]
fn racing_single_op_callers_each_get_their_own_outcome() {
    use simstore::{Durability, Op};
    for durability in [Durability::Buffered, Durability::Sync] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(
            dir.path().join("s"),
            &Options::new()
                .durability(durability)
                .manual_compaction(true),
        )
        .unwrap();
        let fps: Vec<u64> = (0..150u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        let callers = 24;
        let tally = |op: fn(u64) -> Op| -> Vec<usize> {
            let wins: Vec<Vec<usize>> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..callers)
                    .map(|c| {
                        let (store, fps) = (&store, &fps);
                        scope.spawn(move || {
                            // Every caller walks the list from its own place.
                            (0..fps.len())
                                .map(|i| (i + c * 7) % fps.len())
                                .filter(|&i| store.apply(vec![op(fps[i])]).unwrap()[0])
                                .collect()
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let mut per_fp = vec![0; fps.len()];
            for i in wins.into_iter().flatten() {
                per_fp[i] += 1;
            }
            per_fp
        };
        let inserted = tally(|fingerprint| Op::Insert {
            fingerprint,
            id: None,
        });
        assert_eq!(inserted, vec![1; fps.len()], "{durability:?} inserts");
        assert_eq!(store.stats().fingerprints, fps.len() as u64);
        let removed = tally(|fingerprint| Op::DeleteFingerprint { fingerprint });
        assert_eq!(removed, vec![1; fps.len()], "{durability:?} deletes");
        assert_eq!(store.stats().fingerprints, 0);
    }
}

/// A fingerprint written again and again with new ids (clustered data:
/// exact duplicates and near ones) while the background compactor moves
/// it from pending through the upper levels into level 0, whose id blocks
/// take its earlier ids: a reader beside the writer finds every id
/// acknowledged before its query began, and after the merges settle
/// every query path finds exactly the ids written.
#[test]
fn ids_written_across_background_merges_stay_in_every_answer() {
    use std::sync::Mutex;

    for seed in 1..=6u64 {
        let dir = tempfile::tempdir().unwrap();
        let threshold = [30, 50, 100][seed as usize % 3];
        let store = Arc::new(
            Store::create(
                dir.path().join("s"),
                &Options::new().block_size(64).merge_threshold(threshold),
            )
            .unwrap(),
        );
        let mut rng = Rng(seed);
        let data = common::clustered(4000, &mut rng);
        // The model holds what is acknowledged: a write's pairs go in
        // once `insert_many` returns.
        let model: Arc<Mutex<Model>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let reader = spawn_reader(
            store.clone(),
            model.clone(),
            stop.clone(),
            Arc::new(data.clone()),
            |_| true,
            seed,
        );
        let mut at = 0;
        while at < data.len() {
            let size = 1 + rng.below(80) as usize;
            let pairs: Vec<(u64, u64)> = data[at..(at + size).min(data.len())]
                .iter()
                .enumerate()
                .map(|(j, &fp)| (fp, (at + j) as u64))
                .collect();
            store.insert_many(&pairs).unwrap();
            let mut model = model.lock().unwrap();
            for &(fp, id) in &pairs {
                model.insert(fp, Some(id));
            }
            at += size;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while store.stats().pending >= threshold as u64 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        stop.store(true, Ordering::Release);
        reader.join().unwrap();
        let model = model.lock().unwrap();
        let mut stored: Vec<u64> = model.fps.keys().copied().collect();
        stored.truncate(200);
        check_store(&store, &model, &stored);
    }
}

/// A store whose tables are kept on disk reads their blocks, and its id
/// blocks, through RocksDB. A query made while a merge's commit has
/// written its batch but not yet swapped in its state must answer from
/// one state or the other (the same answers here), never from the state
/// before with the blocks after: for a commit through its batch, and one
/// through table files for the tables whose new blocks reach 6,000 bytes
/// and its batch for the others.
#[test]
fn queries_during_a_commit_of_a_store_kept_on_disk() {
    for (seed, table_file_bytes) in [(51u64, None), (52, Some(6000))] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut options = Options::new()
            .block_size(64)
            .merge_threshold(200)
            .manual_compaction(true)
            .durability(simstore::Durability::Buffered);
        if let Some(bytes) = table_file_bytes {
            options = options.table_file_bytes(bytes);
        }
        let mut rng = Rng(seed);
        let data = common::clustered(3000, &mut rng);
        let mut model = Model::default();
        let (first, rest) = data.split_at(2000);
        {
            let store = Store::create(&path, &options).unwrap();
            let pairs: Vec<(u64, u64)> = (0..).zip(first).map(|(i, &fp)| (fp, i)).collect();
            store.insert_many(&pairs).unwrap();
            for &(fp, id) in &pairs {
                model.insert(fp, Some(id));
            }
            store.compact().unwrap();
        }
        let pause = simstore::MergePause::new();
        let store = Store::open(
            &path,
            &options.clone().memory_budget(1).pause_merge(pause.clone()),
        )
        .unwrap();
        assert!(!store.stats().tables_in_memory);
        // New fingerprints across level 0's blocks and new ids of stored
        // ones: the merge held below rewrites most blocks and id blocks.
        let late: Vec<(u64, u64)> = (10_000..)
            .zip(rest.iter().chain(first.iter().step_by(7)))
            .map(|(id, &fp)| (fp, id))
            .collect();
        for chunk in late.chunks(50) {
            store.insert_many(chunk).unwrap();
            for &(fp, id) in chunk {
                model.insert(fp, Some(id));
            }
        }
        let qs = common::queries(&data, 150, &mut rng);
        std::thread::scope(|s| {
            pause.arm_after_write();
            let merge = s.spawn(|| store.compact().unwrap());
            pause.wait_held();
            let reader = s.spawn(|| check_store(&store, &model, &qs));
            std::thread::sleep(std::time::Duration::from_millis(100));
            pause.release();
            merge.join().unwrap();
            reader.join().unwrap();
        });
        check_store(&store, &model, &qs);
    }
}

/// The ids a query at distance 0 finds for `fp`, `None` when it does not
/// find the fingerprint.
fn ids_found(store: &Store, fp: u64) -> Option<Vec<u64>> {
    store
        .query(fp, 0)
        .unwrap()
        .into_iter()
        .find(|m| m.fingerprint == fp)
        .map(|m| m.ids)
}

/// A reader beside the writer: until `stop` (and at least once), each
/// answer for a fingerprint of `data` that is `kept` (never deleted)
/// holds every id acknowledged for it before the query began.
fn spawn_reader(
    store: Arc<Store>,
    acknowledged: Arc<std::sync::Mutex<Model>>,
    stop: Arc<AtomicBool>,
    data: Arc<Vec<u64>>,
    kept: fn(u64) -> bool,
    seed: u64,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut rng = Rng(seed + 200);
        let mut looked = 0u64;
        while !stop.load(Ordering::Acquire) || looked == 0 {
            let fp = data[rng.below(data.len() as u64) as usize];
            if !kept(fp) {
                continue;
            }
            looked += 1;
            let before = acknowledged
                .lock()
                .unwrap()
                .fps
                .get(&fp)
                .cloned()
                .unwrap_or_default();
            let got = ids_found(&store, fp).unwrap_or_default();
            for id in &before {
                assert!(
                    got.contains(id),
                    "seed {seed}: {fp:016x} answered {got:?}, acknowledged {before:?}"
                );
            }
        }
    })
}

/// Random work against a model, with the background compactor and a
/// reader beside the writer: small and bulk inserts, new ids of stored
/// fingerprints, deletes of pairs and of whole fingerprints, full
/// compactions and reopens; stores held in memory (read whole at open or
/// block by block as queries need them) or kept on disk (a memory budget
/// of one byte), merges committed through table files or not, writers
/// held back by a small pending limit or not. The reader
/// checks the fingerprints never deleted (each answer holds every id
/// acknowledged before it); the writer checks the ones it wrote last,
/// and at the end every fingerprint, the id count and `verify`.
#[test]
fn random_work_beside_a_reader_matches_the_model() {
    fn kept(fp: u64) -> bool {
        !fp.is_multiple_of(3)
    }
    for seed in 1..=6u64 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let threshold = [30, 50, 100][seed as usize % 3];
        let mut options = Options::new()
            .block_size(64)
            .merge_threshold(threshold)
            .durability(simstore::Durability::Buffered);
        if seed % 2 == 1 {
            options = options.memory_budget(1);
        }
        if seed % 3 == 0 {
            options = options.table_file_bytes(1500);
        }
        if seed % 4 == 2 {
            options = options.max_pending(2 * threshold);
        }
        if seed % 4 == 0 {
            // Reopened, its blocks are read by the queries that need them.
            options = options.warm(false);
        }
        let mut rng = Rng(seed + 40);
        let data = Arc::new(if seed % 3 == 2 {
            common::random(3000, &mut rng)
        } else {
            common::clustered(3000, &mut rng)
        });
        let mut model = Model::default();
        let acknowledged: Arc<std::sync::Mutex<Model>> = Arc::default();
        let mut store = Arc::new(Store::create(&path, &options).unwrap());
        let mut stop = Arc::new(AtomicBool::new(false));
        let start = |store: &Arc<Store>, stop: &Arc<AtomicBool>| {
            let (store, stop) = (store.clone(), stop.clone());
            spawn_reader(store, acknowledged.clone(), stop, data.clone(), kept, seed)
        };
        let mut reader = start(&store, &stop);
        let insert = |store: &Store, model: &mut Model, pairs: &[(u64, u64)]| {
            store.insert_many(pairs).unwrap();
            let mut acknowledged = acknowledged.lock().unwrap();
            for &(fp, id) in pairs {
                model.insert(fp, Some(id));
                if kept(fp) {
                    acknowledged.insert(fp, Some(id));
                }
            }
        };
        // A fingerprint written before `at`: half the time one of the
        // last written, most likely still pending (or being merged).
        let written = |rng: &mut Rng, at: usize| {
            let back = if rng.below(2) == 0 { 2 * threshold } else { at };
            at - 1 - rng.below(back.min(at) as u64) as usize
        };
        let (mut at, mut next_id, mut step) = (0usize, 1u64 << 32, 0u64);
        while at < data.len() {
            step += 1;
            let roll = rng.below(100);
            let sizes = if roll < 75 || at < 100 {
                // Below the merge threshold: pending.
                Some(1 + rng.below(80) as usize)
            } else if roll < 80 {
                // At or above it: straight into the tables.
                Some(threshold + rng.below(300) as usize)
            } else {
                None
            };
            if let Some(size) = sizes {
                let end = (at + size).min(data.len());
                let pairs: Vec<(u64, u64)> = (at as u64..)
                    .zip(&data[at..end])
                    .map(|(id, &fp)| (fp, id))
                    .collect();
                insert(&store, &mut model, &pairs);
                at = end;
            } else if roll < 88 {
                for _ in 0..1 + rng.below(10) {
                    let fp = data[written(&mut rng, at)];
                    let id = model.fps.get(&fp).and_then(|ids| {
                        ids.iter()
                            .nth(rng.below(ids.len() as u64) as usize)
                            .copied()
                    });
                    if let (false, Some(id)) = (kept(fp), id) {
                        assert!(store.delete(fp, id).unwrap());
                        model.delete(fp, id);
                    }
                }
            } else if roll < 92 {
                for _ in 0..1 + rng.below(5) {
                    let fp = data[written(&mut rng, at)];
                    if !kept(fp) {
                        store.delete_fingerprint(fp).unwrap();
                        model.delete_fingerprint(fp);
                    }
                }
            } else if roll < 97 {
                let pairs: Vec<(u64, u64)> = (0..1 + rng.below(40))
                    .map(|_| {
                        next_id += 1;
                        (data[rng.below(at as u64) as usize], next_id)
                    })
                    .collect();
                insert(&store, &mut model, &pairs);
            } else if roll < 98 {
                stop.store(true, Ordering::Release);
                reader.join().unwrap();
                drop(store);
                store = Arc::new(Store::open(&path, &options).unwrap());
                stop = Arc::new(AtomicBool::new(false));
                reader = start(&store, &stop);
            } else {
                store.compact().unwrap();
            }
            if step % 3 == 0 {
                for &fp in &data[at.saturating_sub(20)..at] {
                    let want = model.fps.get(&fp).map(|ids| ids.iter().copied().collect());
                    assert_eq!(ids_found(&store, fp), want, "seed {seed} step {step}");
                }
            }
        }
        stop.store(true, Ordering::Release);
        reader.join().unwrap();
        for &fp in data.iter() {
            let want = model.fps.get(&fp).map(|ids| ids.iter().copied().collect());
            assert_eq!(ids_found(&store, fp), want, "seed {seed}: {fp:016x}");
        }
        let stats = store.stats();
        assert_eq!(stats.fingerprints, model.fps.len() as u64, "seed {seed}");
        assert_eq!(stats.ids, model.ids(), "seed {seed}");
        assert!(store.verify().unwrap().ok(), "seed {seed}");
    }
}
