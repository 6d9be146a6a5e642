//! Every query path against a brute-force oracle, on random and clustered
//! data, at several sizes and table plans, across appends, compaction,
//! deletion and reopen, with tiny blocks so splits and multi-block probes
//! are exercised.

mod common;

use common::{check_store, clustered, queries, random, shape, Model, Rng};
use simstore::{Op, Options, Store};

fn scenario(data: &[u64], options: Options, seed: u64) {
    scenario_on(data, options, seed, false);
}

/// [`scenario`]; `on_disk` says whether `options`' memory budget keeps the
/// tables on disk once they hold blocks (checked at the last reopen).
fn scenario_on(data: &[u64], options: Options, seed: u64, on_disk: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let mut rng = Rng(seed);
    let mut model = Model::default();
    let store = Store::create(&path, &options.clone().manual_compaction(true)).unwrap();
    let half = data.len() / 2;
    let (first, second) = data.split_at(half);

    // Pending only.
    for (i, chunk) in first.chunks(97).enumerate() {
        let ops: Vec<Op> = chunk
            .iter()
            .enumerate()
            .map(|(j, &fp)| {
                let id = (i * 97 + j) as u64;
                let id = (!id.is_multiple_of(5)).then_some(id);
                model.insert(fp, id);
                Op::Insert {
                    fingerprint: fp,
                    id,
                }
            })
            .collect();
        store.apply(ops).unwrap();
    }
    let qs = queries(data, 120, &mut rng);
    check_store(&store, &model, &qs);

    // Compacted, then a mix of blocks and pending.
    store.compact().unwrap();
    check_store(&store, &model, &qs);
    for (j, &fp) in second.iter().enumerate() {
        let id = (half + j) as u64;
        model.insert(fp, Some(id));
        store.insert(fp, id).unwrap();
    }
    check_store(&store, &model, &qs);

    // Deletions of pairs and of whole fingerprints, some pending, some in blocks.
    let stored: Vec<u64> = model.fps.keys().copied().collect();
    for (i, &fp) in stored.iter().enumerate() {
        match i % 7 {
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
    assert!(!store.delete(0x1234_5678_9abc_def0, 999_999_999).unwrap());
    check_store(&store, &model, &qs);

    // Reopen with pending work and tombstones, blocks read only by the
    // queries (and the merge) that need them; then compact and reopen.
    drop(store);
    let manual = options.clone().manual_compaction(true);
    let store = Store::open(&path, &manual.clone().warm(false)).unwrap();
    check_store(&store, &model, &qs);
    store.compact().unwrap();
    check_store(&store, &model, &qs);
    // Reinsert some deleted fingerprints and delete some again.
    for (i, &fp) in stored
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 7 == 0)
        .take(40)
    {
        model.insert(fp, Some(i as u64));
        store.insert(fp, i as u64).unwrap();
    }
    check_store(&store, &model, &qs);
    drop(store);
    // Reopen with the blocks read behind the open, answering while they
    // are read and after.
    let store = Store::open(&path, &options).unwrap();
    if !data.is_empty() {
        assert_eq!(store.stats().tables_in_memory, !on_disk);
    }
    check_store(&store, &model, &qs);
    store.wait_warm();
    check_store(&store, &model, &qs);
    store.compact().unwrap();
    check_store(&store, &model, &qs);
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.fingerprints, model.fps.len() as u64);
}

#[test]
fn random_data_small_blocks() {
    for n in [0usize, 1, 40, 2500] {
        let data = random(n, &mut Rng(n as u64));
        scenario(&data, Options::new().block_size(48), 1);
    }
}

#[test]
fn clustered_data_small_blocks() {
    for n in [1usize, 60, 3000] {
        let data = clustered(n, &mut Rng(n as u64 + 11));
        scenario(&data, Options::new().block_size(64), 2);
    }
}

#[test]
fn clustered_data_default_blocks_and_larger_plans() {
    let data = clustered(4000, &mut Rng(5));
    scenario(&data, Options::new().tables(10), 3);
    scenario(&data, Options::new().max_distance(2).block_size(100), 4);
    scenario(&data, Options::new().max_distance(0).block_size(40), 5);
    scenario(&data, Options::new().max_distance(4).block_size(80), 6);
}

/// A memory budget of 0 keeps every block on disk from the first reopen
/// on: probes, merges and verification read blocks through RocksDB.
#[test]
fn tables_beyond_the_memory_budget_stay_on_disk() {
    for n in [40usize, 2500] {
        let data = random(n, &mut Rng(n as u64 + 3));
        scenario_on(
            &data,
            Options::new().block_size(48).memory_budget(0),
            8,
            true,
        );
    }
    let data = clustered(3000, &mut Rng(13));
    scenario_on(
        &data,
        Options::new().block_size(64).memory_budget(0),
        9,
        true,
    );
    scenario_on(&data, Options::new().tables(10).memory_budget(0), 10, true);
}

#[test]
fn random_data_default_settings() {
    let data = random(20_000, &mut Rng(77));
    scenario(&data, Options::new(), 7);
}

#[test]
fn background_compaction_merges_while_answering() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(
        dir.path().join("s"),
        &Options::new().block_size(64).merge_threshold(100),
    )
    .unwrap();
    let mut rng = Rng(9);
    let mut model = Model::default();
    let data = clustered(3000, &mut rng);
    for (i, chunk) in data.chunks(50).enumerate() {
        let pairs: Vec<(u64, u64)> = chunk
            .iter()
            .enumerate()
            .map(|(j, &fp)| (fp, (i * 50 + j) as u64))
            .collect();
        for &(fp, id) in &pairs {
            model.insert(fp, Some(id));
        }
        store.insert_many(&pairs).unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while store.stats().pending >= 100 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let stats = store.stats();
    assert!(
        stats.pending < 100,
        "background compaction did not run: {stats:?}"
    );
    assert!(stats.blocks > 0);
    let qs = queries(&data, 100, &mut rng);
    check_store(&store, &model, &qs);
}

#[test]
fn distance_beyond_the_plan_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("s"), &Options::new().max_distance(2)).unwrap();
    for r in [
        store.query(1, 3).err(),
        store.query_first(1, 3).err(),
        store.query_many(&[1], 3).err(),
        store.query_many(&[1], 3).err(),
        store.query_first_many(&[1], 3).err(),
    ] {
        match r {
            Some(simstore::Error::DistanceTooLarge {
                asked: 3,
                supported: 2,
            }) => {}
            other => panic!("expected DistanceTooLarge, got {other:?}"),
        }
    }
    assert!(store.query(1, 2).unwrap().is_empty());
}

/// Bulk inserts (batches at or above the merge threshold go straight into
/// the tables) on top of pending fingerprints, tombstones, re-inserts of
/// deleted fingerprints, fingerprints already stored and repeats within
/// the batch, with and without ids; then reopen and compaction.
#[test]
fn bulk_inserts_merge_with_pending_and_tombstones() {
    for (n, clustered_data) in [(3000usize, false), (4000, true)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let options = Options::new()
            .block_size(64)
            .merge_threshold(500)
            .manual_compaction(true);
        let store = Store::create(&path, &options).unwrap();
        let mut rng = Rng(n as u64);
        let data = if clustered_data {
            clustered(n, &mut rng)
        } else {
            random(n, &mut rng)
        };
        let mut model = Model::default();
        // A bulk load into the empty store.
        let first: Vec<(u64, Option<u64>)> = data[..1000]
            .iter()
            .enumerate()
            .map(|(i, &fp)| (fp, (i % 3 != 0).then_some(i as u64)))
            .collect();
        for &(fp, id) in &first {
            model.insert(fp, id);
        }
        store.insert_many(&first).unwrap();
        assert_eq!(
            store.stats().pending,
            0,
            "the bulk path leaves nothing pending"
        );
        // Small writes: pending inserts and deletes (tombstones).
        for (i, &fp) in data[1000..1300].iter().enumerate() {
            model.insert(fp, Some(10_000 + i as u64));
            store.insert(fp, 10_000 + i as u64).unwrap();
        }
        for &fp in data[..400].iter().step_by(3) {
            model.delete_fingerprint(fp);
            store.delete_fingerprint(fp).unwrap();
        }
        assert!(store.stats().tombstones > 0 && store.stats().pending > 0);
        let qs = queries(&data, 150, &mut rng);
        check_store(&store, &model, &qs);
        // A bulk insert mixing new, stored, deleted and repeated fingerprints.
        let mut second: Vec<(u64, Option<u64>)> = Vec::new();
        for (i, &fp) in data[1300..].iter().enumerate() {
            second.push((fp, Some(20_000 + i as u64)));
        }
        for (i, &fp) in data[..600].iter().enumerate().step_by(2) {
            second.push((fp, (i % 4 == 0).then_some(30_000 + i as u64)));
        }
        second.push(second[0]);
        for &(fp, id) in &second {
            model.insert(fp, id);
        }
        store.insert_many(&second).unwrap();
        let stats = store.stats();
        assert_eq!((stats.pending, stats.tombstones), (0, 0));
        check_store(&store, &model, &qs);
        assert!(store.verify().unwrap().ok());
        drop(store);
        let store = Store::open(&path, &options).unwrap();
        check_store(&store, &model, &qs);
        // A small batch still takes the normal path.
        store.insert_many(&[(7, Some(7))]).unwrap();
        model.insert(7, Some(7));
        assert_eq!(store.stats().pending, 1);
        store.compact().unwrap();
        check_store(&store, &model, &qs);
        assert!(store.verify().unwrap().ok());
    }
}

/// Batches large enough to be spread over threads (4,096 queries or more
/// a chunk), on 1 to 3 threads, against the model: sorted passes split by
/// queries (tables in memory) or by tables (on disk), and, with blocks so
/// small that a chunk has fewer than two queries a block, query-by-query
/// shares; over blocks, pending fingerprints, tombstones and ids.
#[test]
fn large_batches_on_several_threads_match_the_oracle() {
    let mut rng = Rng(41);
    for (data, block_size, budget) in [
        (random(12_000, &mut rng), 1024, None),
        (clustered(12_000, &mut rng), 1024, None),
        (random(12_000, &mut rng), 1024, Some(0)),
        (clustered(30_000, &mut rng), 40, None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut options = Options::new()
            .block_size(block_size)
            .manual_compaction(true);
        if let Some(budget) = budget {
            options = options.memory_budget(budget);
        }
        let mut model = Model::default();
        let (bulk, pending) = data.split_at(data.len() * 3 / 4);
        let pairs: Vec<(u64, u64)> = bulk
            .iter()
            .enumerate()
            .map(|(i, &fp)| (fp, i as u64))
            .collect();
        for &(fp, id) in &pairs {
            model.insert(fp, Some(id));
        }
        let path = dir.path().join("s");
        let store = Store::create(&path, &options).unwrap();
        store.insert_many(&pairs).unwrap();
        store.compact().unwrap();
        drop(store);
        let store = Store::open(&path, &options).unwrap();
        store.wait_warm();
        for &fp in bulk.iter().step_by(9) {
            model.delete_fingerprint(fp);
            store.delete_fingerprint(fp).unwrap();
        }
        for &fp in pending {
            model.insert(fp, None);
            store.insert_fingerprint(fp).unwrap();
        }
        let stats = store.stats();
        assert_eq!(stats.tables_in_memory, budget.is_none());
        // 5,000 queries: at least the 4,096 a chunk needs to be spread
        // over threads (`SPREAD_MIN` in src/store/parallel.rs).
        let qs = queries(&data, 5_000, &mut rng);
        // Sorted passes when a chunk has two queries a block or more.
        let per_table = stats.blocks / stats.tables as u64;
        let by_query = (qs.len() as u64) < 2 * per_table;
        assert_eq!(block_size == 40, by_query, "{per_table} blocks a table");
        let expect: Vec<Vec<_>> = [1, 3]
            .iter()
            .flat_map(|&k| qs.iter().map(move |&q| (k, q)))
            .map(|(k, q)| model.query(q, k))
            .collect();
        drop(store);
        for threads in 1..=3 {
            let store = Store::open(&path, &options.clone().query_threads(threads)).unwrap();
            store.wait_warm();
            for (j, k) in [1, 3].into_iter().enumerate() {
                let expect = &expect[j * qs.len()..(j + 1) * qs.len()];
                let got = store.query_many(&qs, k).unwrap();
                assert_eq!(got.len(), qs.len());
                for (i, m) in got.iter().enumerate() {
                    assert_eq!(
                        shape(m),
                        expect[i],
                        "query {:016x} k={k} threads {threads}",
                        qs[i]
                    );
                }
                // First matches: a sorted pass gives the nearest, a query
                // answered on its own any match; every id, or the smallest
                // when limited.
                let firsts = store.query_first_many(&qs, k).unwrap();
                let limited = store.query_many_max_ids(&qs, k, true, 1).unwrap();
                assert_eq!((firsts.len(), limited.len()), (qs.len(), qs.len()));
                for (i, (first, one)) in firsts.iter().zip(&limited).enumerate() {
                    let q = qs[i];
                    let check = |m: &simstore::Match, listed: usize| {
                        let (d, f, ids) = expect[i]
                            .iter()
                            .find(|(_, f, _)| *f == m.fingerprint)
                            .unwrap_or_else(|| panic!("first {q:016x}: no match {m:?}"));
                        assert_eq!(m.distance, *d, "first {q:016x}");
                        assert_eq!(m.id_count, ids.len(), "first {q:016x} of {f:016x}");
                        assert_eq!(m.ids, ids[..listed.min(ids.len())], "ids of {f:016x}");
                    };
                    assert_eq!(
                        first.is_some(),
                        !expect[i].is_empty(),
                        "first {q:016x} k={k}"
                    );
                    assert_eq!(one.is_empty(), expect[i].is_empty(), "first {q:016x} k={k}");
                    assert!(one.len() <= 1, "first with max_ids {q:016x}");
                    first.iter().for_each(|m| check(m, usize::MAX));
                    one.iter().for_each(|m| check(m, 1));
                    if !by_query {
                        // Sorted passes find every match.
                        let nearest = expect[i].first().map(|(_, f, _)| *f);
                        assert_eq!(
                            first.as_ref().map(|m| m.fingerprint),
                            nearest,
                            "nearest {q:016x}"
                        );
                    }
                }
            }
        }
    }
}

/// One-table stores (`tables(1)`): exact queries flip every set of at
/// most `k` header bits; wide headers (runs of about one fingerprint) and
/// narrow ones (long runs), in memory and on disk.
#[test]
fn one_table_stores_answer_exactly() {
    for (n, seed) in [(0usize, 21u64), (1, 22), (50, 23), (3000, 24)] {
        let data = random(n, &mut Rng(seed));
        scenario(&data, Options::new().tables(1).block_size(64), seed);
    }
    let data = clustered(3000, &mut Rng(25));
    scenario(&data, Options::new().tables(1).expected_size(300), 26);
    scenario(&data, Options::new().tables(1).max_distance(2), 27);
    scenario(
        &data,
        Options::new()
            .tables(1)
            .max_distance(4)
            .expected_size(1 << 12),
        28,
    );
    scenario_on(
        &data,
        Options::new().tables(1).memory_budget(0).block_size(64),
        29,
        true,
    );
}

/// An exact query on a one-table store whose flip sets are too many for
/// one pass (over 16,384: at most 7 of 16 header bits) takes them all in
/// several: queries are stored fingerprints with up to 7 header bits
/// flipped, so some matches lie only in the last sets. Before level 0 is
/// read flat, with it flat and later fingerprints pending, reopened, and
/// with the tables on disk.
#[test]
fn one_table_exact_queries_take_every_flip_set_in_several_passes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let options = Options::new()
        .tables(1)
        .max_distance(7)
        .expected_size(1 << 16);
    let store = Store::create(&path, &options).unwrap();
    let header = store.plan().header_bits().unwrap();
    assert!(simstore::plan::vosh::exact_count(header, 7) > 16_384);
    let mut rng = Rng(30);
    let mut model = Model::default();
    let stored: Vec<(u64, u64)> = (0..17_000).map(|i| (rng.next(), i)).collect();
    let qs: Vec<u64> = (0..70)
        .map(|i| {
            let mut flips = 0u64;
            while flips.count_ones() < 1 + i % 7 {
                flips |= 1u64 << (63 - rng.below(u64::from(header)));
            }
            stored[rng.below(stored.len() as u64) as usize].0 ^ flips
        })
        .collect();
    let (most, rest) = stored.split_at(16_500);
    store.insert_many(most).unwrap();
    most.iter().for_each(|&(fp, id)| model.insert(fp, Some(id)));
    assert!(
        store.stats().flat_bytes.is_none(),
        "level 0 is not flat yet"
    );
    // Probes by block cost more: fewer queries, every number of flips.
    check_store(&store, &model, &qs[..14]);
    store.compact().unwrap();
    assert!(store.stats().flat_bytes.is_some(), "level 0 is flat");
    store.insert_many(rest).unwrap();
    rest.iter().for_each(|&(fp, id)| model.insert(fp, Some(id)));
    check_store(&store, &model, &qs);
    drop(store);
    check_store(&Store::open(&path, &options).unwrap(), &model, &qs);
    let on_disk = Store::open(&path, &options.clone().memory_budget(0)).unwrap();
    assert!(
        on_disk.stats().flat_bytes.is_none(),
        "level 0 is read by block"
    );
    check_store(&on_disk, &model, &qs[..14]);
}
