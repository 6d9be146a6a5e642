//! Similarity sketches against a model through every change a pair can go
//! through: stored with a sketch or without, given a new sketch, removed
//! alone or with its fingerprint, stored again; merges, compactions and
//! reopens; `query_similar` against a brute force over the model, on
//! random and clustered fingerprints; corruption reported by reads and
//! `verify`; sketches refused by a store that keeps none.

mod common;
#[path = "common/raw.rs"]
mod raw;

use std::collections::BTreeMap;

use common::{check_store, clustered, random, Model, Rng};
use simstore::simhash::Sketch;
use simstore::{Error, Op, Options, Store};

/// A document's sketch: a set of `size` feature hashes drawn from `base`'s
/// family, the first `shared` of them common to every member.
fn sketch(base: u64, shared: u64, own: u64, rng: &mut Rng) -> Sketch {
    let hashes = (0..shared)
        .map(|i| base.wrapping_mul(31).wrapping_add(i))
        .chain((0..own).map(|_| rng.next()));
    Sketch::of_hashes(hashes).unwrap()
}

/// The model of sketches: pair -> its sketch, when it has one.
type Sketches = BTreeMap<(u64, u64), Sketch>;

/// Every pair of the model has its sketch (or none), and `query_similar`
/// answers as a brute force over the model for queries near its pairs.
fn check(store: &Store, model: &Model, sketches: &Sketches, rng: &mut Rng) {
    for (&fp, ids) in &model.fps {
        for &id in ids {
            assert_eq!(
                store.sketch(fp, id).unwrap(),
                sketches.get(&(fp, id)).copied(),
                "sketch of ({fp:016x}, {id})"
            );
        }
    }
    let pairs: Vec<((u64, u64), Sketch)> = sketches.iter().map(|(&p, &s)| (p, s)).collect();
    let (mut answered, mut passed_over) = (0, 0);
    for i in 0..60 {
        let ((fp, _), mut s) = pairs[rng.below(pairs.len() as u64) as usize];
        if i % 5 == 4 {
            // Another document with the same fingerprint.
            s = sketch(rng.next(), 0, 100, rng);
        }
        let q = rng.flip(fp, (i % 4) as u32);
        let threshold = [0.5, 0.8, 0.9][i % 3];
        let k = [2, 5, 8][i % 3];
        let within = sketches
            .keys()
            .filter(|&&(f, _)| (f ^ q).count_ones() <= k)
            .count();
        let mut want: Vec<(u64, u64, u32)> = sketches
            .iter()
            .filter(|(&(f, _), t)| {
                (f ^ q).count_ones() <= k && t.recheck(&s, threshold, within).is_some()
            })
            .map(|(&(f, id), _)| (f, id, (f ^ q).count_ones()))
            .collect();
        want.sort();
        answered += usize::from(!want.is_empty());
        passed_over += sketches
            .iter()
            .filter(|(&(f, _), t)| {
                (f ^ q).count_ones() <= k && t.recheck(&s, threshold, within).is_none()
            })
            .count();
        let got = store.query_similar(q, k, &s, threshold).unwrap();
        for w in got.windows(2) {
            assert!(w[0].similarity >= w[1].similarity, "most similar first");
        }
        let mut got: Vec<(u64, u64, u32)> = got
            .iter()
            .map(|m| (m.fingerprint, m.id, m.distance))
            .collect();
        got.sort();
        assert_eq!(got, want, "query_similar {q:016x} k={k} at {threshold}");
    }
    // The check can fail both ways: answers found, and candidates turned
    // away by their sketches.
    assert!(answered >= 25, "{answered} of 60 queries with an answer");
    assert!(passed_over > 0, "no candidate turned away");
    let report = store.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.sketches, sketches.len() as u64);
}

fn run(fps: Vec<u64>, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let options = Options::new()
        .sketches(true)
        .max_distance(8)
        .expected_size(100_000)
        .merge_threshold(300)
        .block_size(256);
    let store = Store::create(&path, &options).unwrap();
    let mut rng = Rng(seed);
    let (mut model, mut sketches) = (Model::default(), Sketches::new());
    let mut next_id = 0u64;
    for (n, chunk) in fps.chunks(97).enumerate() {
        let mut ops = Vec::new();
        for &fp in chunk {
            next_id += 1;
            let id = next_id;
            // Documents of one fingerprint family share most features.
            let s = sketch(fp >> 40, 200, rng.below(80), &mut rng);
            if rng.below(10) == 0 {
                ops.push(Op::Insert {
                    fingerprint: fp,
                    id: Some(id),
                });
                model.insert(fp, Some(id));
            } else {
                ops.push(Op::InsertSketched {
                    fingerprint: fp,
                    id,
                    sketch: s,
                });
                model.insert(fp, Some(id));
                sketches.insert((fp, id), s);
            }
        }
        // Changes to pairs stored earlier: a new sketch, a removed pair, a
        // removed fingerprint, a removed pair stored again.
        let stored: Vec<(u64, u64)> = model
            .fps
            .iter()
            .flat_map(|(&f, ids)| ids.iter().map(move |&id| (f, id)))
            .collect();
        for _ in 0..6 {
            let (fp, id) = stored[rng.below(stored.len() as u64) as usize];
            match rng.below(4) {
                0 => {
                    let s = sketch(rng.next(), 50, 50, &mut rng);
                    ops.push(Op::InsertSketched {
                        fingerprint: fp,
                        id,
                        sketch: s,
                    });
                    sketches.insert((fp, id), s);
                }
                1 => {
                    ops.push(Op::Delete {
                        fingerprint: fp,
                        id,
                    });
                    model.delete(fp, id);
                    sketches.remove(&(fp, id));
                }
                2 => {
                    ops.push(Op::DeleteFingerprint { fingerprint: fp });
                    model.delete_fingerprint(fp);
                    sketches.retain(|&(f, _), _| f != fp);
                }
                _ => {
                    ops.push(Op::Delete {
                        fingerprint: fp,
                        id,
                    });
                    let s = sketch(fp >> 40, 200, 3, &mut rng);
                    ops.push(Op::InsertSketched {
                        fingerprint: fp,
                        id,
                        sketch: s,
                    });
                    model.insert(fp, Some(id));
                    sketches.insert((fp, id), s);
                }
            }
        }
        store.apply(ops).unwrap();
        if n % 7 == 3 {
            check(&store, &model, &sketches, &mut rng);
        }
    }
    check(&store, &model, &sketches, &mut rng);
    let queries = common::queries(&fps, 50, &mut rng);
    check_store(&store, &model, &queries);
    store.compact().unwrap();
    check(&store, &model, &sketches, &mut rng);
    store.close().unwrap();
    for warm in [true, false] {
        let store = Store::open(&path, &Options::new().warm(warm)).unwrap();
        assert!(store.keeps_sketches() && store.stats().sketches);
        check(&store, &model, &sketches, &mut rng);
        check_store(&store, &model, &queries);
    }
}

#[test]
fn sketches_follow_their_pairs_on_random_fingerprints() {
    let mut rng = Rng(1);
    run(random(2_000, &mut rng), 2);
}

#[test]
fn sketches_follow_their_pairs_on_clustered_fingerprints() {
    let mut rng = Rng(3);
    run(clustered(2_000, &mut rng), 4);
}

#[test]
fn a_store_without_sketches_refuses_them_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, &Options::new()).unwrap();
    let s = Sketch::of_hashes(0..100).unwrap();
    assert!(matches!(
        store.insert_sketched(5, 1, &s),
        Err(Error::InvalidArgument(_))
    ));
    let ops = vec![
        Op::Insert {
            fingerprint: 6,
            id: Some(2),
        },
        Op::InsertSketched {
            fingerprint: 5,
            id: 1,
            sketch: s,
        },
    ];
    assert!(matches!(store.apply(ops), Err(Error::InvalidArgument(_))));
    assert_eq!(store.stats().fingerprints, 0);
    assert_eq!(store.sketch(5, 1).unwrap(), None);
    assert!(store.query_similar(5, 3, &s, 0.5).unwrap().is_empty());
    assert!(matches!(
        store.query_similar(5, 3, &s, 1.5),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        store.query_similar(5, 4, &s, 0.5),
        Err(Error::DistanceTooLarge { .. })
    ));
    drop(store);
    // The option must match the store when given.
    assert!(matches!(
        Store::open(&path, &Options::new().sketches(true)),
        Err(Error::IncompatibleOptions {
            option: "sketches",
            ..
        })
    ));
    let store = Store::create(dir.path().join("t"), &Options::new().sketches(true)).unwrap();
    drop(store);
    assert!(matches!(
        Store::open(dir.path().join("t"), &Options::new().sketches(false)),
        Err(Error::IncompatibleOptions {
            option: "sketches",
            ..
        })
    ));
}

#[test]
fn corrupt_and_orphan_sketches_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let store = Store::create(&path, &Options::new().sketches(true)).unwrap();
    let s = Sketch::of_hashes(0..100).unwrap();
    store.insert_sketched(7, 1, &s).unwrap();
    store.insert_sketched(8, 2, &s).unwrap();
    store.close().unwrap();
    {
        let db = raw::raw_db(&path);
        let cf = db.cf_handle("sketches").unwrap();
        let key = |fp: u64, id: u64| [fp.to_be_bytes(), id.to_be_bytes()].concat();
        let mut value = db.get_cf(cf, key(7, 1)).unwrap().unwrap();
        value[3] ^= 1;
        db.put_cf(cf, key(7, 1), &value).unwrap();
        // A sketch for a pair that is not stored.
        let orphan = simstore::format::sketches::encode_sketch(9, 3, &s.to_bytes());
        db.put_cf(cf, key(9, 3), orphan).unwrap();
    }
    let store = Store::open(&path, &Options::new()).unwrap();
    assert!(matches!(store.sketch(7, 1), Err(Error::Corrupt { .. })));
    assert!(matches!(
        store.query_similar(7, 3, &s, 0.5),
        Err(Error::Corrupt { .. })
    ));
    assert_eq!(store.sketch(8, 2).unwrap(), Some(s));
    let report = store.verify().unwrap();
    assert_eq!(report.problems.len(), 2, "{:?}", report.problems);
    assert!(report.problems.iter().any(|p| p.contains("checksum")));
    assert!(report.problems.iter().any(|p| p.contains("not stored")));
}

/// `docs` decided by `dedup` in batches of `batch`, each batch decided
/// twice (as after a crash between the commit and the caller's record of
/// it: the second time its own stored pairs are ignored, so its nearest
/// matches can have no candidates) to the same decisions.
fn decide_in_batches(
    dedup: &simstore::dedup::Deduper<'_>,
    docs: &[Sketch],
    batch: usize,
) -> Vec<Option<simstore::dedup::Earlier>> {
    let mut got = Vec::new();
    for (b, chunk) in docs.chunks(batch).enumerate() {
        let candidates: Vec<simstore::dedup::Candidate> = chunk
            .iter()
            .map(|s| simstore::dedup::Candidate {
                fingerprint: s.fingerprint(),
                sketch: Some(*s),
                volatility: None,
            })
            .collect();
        let decided = dedup.decide((b * batch) as u64, &candidates).unwrap();
        assert_eq!(
            dedup.decide((b * batch) as u64, &candidates).unwrap(),
            decided
        );
        got.extend(decided);
    }
    got
}

/// `Deduper` by similarity against a brute force over every earlier
/// document, when many stored documents share one fingerprint: copies of a
/// boilerplate page, variants of it with the same fingerprint and copies
/// of those, decided in batches of several sizes (so candidates are both
/// stored and in the batch). A copy of a variant finds the variant among
/// the copies' ids, not first.
#[test]
fn dedup_by_similarity_among_many_copies_matches_brute_force() {
    use simstore::dedup::Deduper;
    let mut rng = Rng(0xd0c5);
    let base = sketch(7, 400, 0, &mut rng);
    // Variants: the boilerplate's features and one of their own, kept
    // only when they share its fingerprint.
    let mut variants = Vec::new();
    for i in 0..400u64 {
        let s = Sketch::of_hashes(
            (0..400)
                .map(|h| 7u64.wrapping_mul(31).wrapping_add(h))
                .chain([i << 40]),
        )
        .unwrap();
        if s.fingerprint() == base.fingerprint() && s != base {
            variants.push(s);
        }
        if variants.len() == 6 {
            break;
        }
    }
    assert!(
        variants.len() >= 3,
        "variants sharing the fingerprint: {}",
        variants.len()
    );
    let mut docs = Vec::new();
    for i in 0..90usize {
        docs.push(match i % 5 {
            1 => variants[(i / 5) % variants.len()],
            3 if i > 5 => variants[(i / 5 - 1) % variants.len()],
            _ => base,
        });
    }
    for (j, batch) in [(0.8, 1usize), (0.8, 4), (0.95, 7)] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path(), &Options::new().sketches(true)).unwrap();
        let dedup = Deduper::new(&store, None, Some(j)).unwrap();
        let k = dedup.k();
        let got = decide_in_batches(&dedup, &docs, batch);
        for (i, doc) in docs.iter().enumerate() {
            let within: Vec<usize> = (0..i)
                .filter(|&e| (docs[e].fingerprint() ^ doc.fingerprint()).count_ones() <= k)
                .collect();
            let want = within
                .iter()
                .filter_map(|&e| {
                    let s = doc.recheck(&docs[e], j, within.len())?;
                    Some((
                        (docs[e].fingerprint() ^ doc.fingerprint()).count_ones(),
                        s,
                        e,
                    ))
                })
                .min_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)).then(a.2.cmp(&b.2)));
            let got = got[i]
                .as_ref()
                .map(|e| (e.distance, e.similarity.unwrap(), e.seq as usize));
            assert_eq!(got, want, "document {i}, threshold {j}, batches of {batch}");
        }
    }
}

/// `Deduper` by similarity with a cap on the candidates re-checked, against
/// a brute force that re-checks only the nearest (then earliest) `cap`
/// earlier documents within the distance: documents of one dense cluster
/// (every fingerprint a few bits from one, sketches a few estimate bits
/// from one, exact copies among them), so that most documents have more
/// candidates than the cap and the most similar is often not the nearest.
#[test]
fn dedup_by_similarity_rechecks_the_nearest_candidates_up_to_its_cap() {
    use simstore::dedup::Deduper;
    let mut rng = Rng(0xca9);
    let mut base = [0u8; 64];
    for b in base.iter_mut() {
        *b = rng.next() as u8;
    }
    base[62..].copy_from_slice(&1000u16.to_le_bytes());
    // Flips `bits` bits (not always distinct) among `range` from `from`.
    let flip = |bytes: &mut [u8; 64], from: usize, range: u64, bits: usize, rng: &mut Rng| {
        for _ in 0..bits {
            let bit = from + (rng.next() % range) as usize;
            bytes[bit / 8] ^= 1 << (bit % 8);
        }
    };
    let mut docs: Vec<Sketch> = Vec::new();
    for i in 0..160usize {
        if i % 9 == 8 {
            // An exact copy of an earlier document.
            let e = (rng.next() % i as u64) as usize;
            docs.push(docs[e]);
            continue;
        }
        let mut s = base;
        let fp_bits = (rng.next() % 5) as usize;
        flip(&mut s, 0, 64, fp_bits, &mut rng);
        let est_bits = [0, 4, 10, 20, 35][(rng.next() % 5) as usize];
        flip(&mut s, 64, 432, est_bits, &mut rng);
        docs.push(Sketch::from_bytes(s));
    }
    let mut capped = 0usize;
    // At 0.99 a pair of equal sketches clears the bar among at most 8
    // candidates, not among 9: the bar must be the one for those read.
    for (cap, batch, j, k) in [
        (1usize, 1usize, 0.8, None),
        (2, 9, 0.8, None),
        (3, 12, 0.8, None),
        (4, 7, 0.8, None),
        (16, 1, 0.8, None),
        (16, 5, 0.8, None),
        (1000, 3, 0.8, None),
        (8, 4, 0.99, Some(8)),
        (9, 1, 0.99, Some(8)),
        (9, 5, 0.99, Some(8)),
        (9, 13, 0.99, Some(8)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::new().sketches(true).max_distance(8);
        let store = Store::create(dir.path(), &options).unwrap();
        let dedup = Deduper::new(&store, k, Some(j))
            .unwrap()
            .max_candidates(cap)
            .unwrap();
        let k = dedup.k();
        let got = decide_in_batches(&dedup, &docs, batch);
        for (i, doc) in docs.iter().enumerate() {
            let distance = |e: usize| (docs[e].fingerprint() ^ doc.fingerprint()).count_ones();
            let mut within: Vec<usize> = (0..i).filter(|&e| distance(e) <= k).collect();
            within.sort_by_key(|&e| (distance(e), e));
            capped += usize::from(within.len() > cap);
            within.truncate(cap);
            let want = within
                .iter()
                .filter_map(|&e| Some((distance(e), doc.recheck(&docs[e], j, within.len())?, e)))
                .min_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)).then(a.2.cmp(&b.2)));
            let got = got[i]
                .as_ref()
                .map(|e| (e.distance, e.similarity.unwrap(), e.seq as usize));
            assert_eq!(
                got, want,
                "document {i}, cap {cap}, batches of {batch}, {j}"
            );
        }
    }
    assert!(
        capped > 300,
        "documents with more candidates than the cap: {capped}"
    );
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path(), &Options::new().sketches(true)).unwrap();
    assert!(matches!(
        Deduper::new(&store, None, Some(0.8))
            .unwrap()
            .max_candidates(0),
        Err(Error::InvalidArgument(_))
    ));
    // Documents numbered past the largest id: refused, nothing stored.
    let plain_dir = tempfile::tempdir().unwrap();
    let plain = Store::create(plain_dir.path(), &Options::new()).unwrap();
    let doc = |fingerprint| simstore::dedup::Candidate {
        fingerprint,
        sketch: None,
        volatility: None,
    };
    let dedup = Deduper::new(&plain, None, None).unwrap();
    assert!(matches!(
        dedup.decide(u64::MAX, &[doc(1), doc(2)]),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(plain.stats().ids, 0);
    let far = !0x0f0f_u64;
    assert_eq!(
        dedup
            .decide(u64::MAX - 1, &[doc(0x0f0f), doc(far)])
            .unwrap(),
        [None, None]
    );
    assert_eq!(plain.ids(far).unwrap(), [u64::MAX]);
}

/// An exact copy's shortcut takes the bar of the candidates the decision
/// reads, not of the ids the nearest matches list: decided again, a
/// document's own stored fingerprint (no id below its number) is among its
/// nearest matches, and must not lower the bar. At 0.99 a pair of equal
/// sketches clears the bar among 8 candidates, not among 9.
#[test]
fn a_copy_clears_the_bar_of_the_candidates_read() {
    use simstore::dedup::{Candidate, Deduper};
    let mut base = [0u8; 64];
    for (i, b) in base.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(37) ^ 0x5a;
    }
    base[62..].copy_from_slice(&1000u16.to_le_bytes());
    let with = |fp_bits: &[usize], estimate_bits: usize| {
        let mut s = base;
        for &b in fp_bits {
            s[b / 8] ^= 1 << (b % 8);
        }
        for b in 0..estimate_bits {
            let bit = 64 + 7 * b;
            s[bit / 8] ^= 1 << (bit % 8);
        }
        Sketch::from_bytes(s)
    };
    let doc = with(&[], 0);
    // A copy one bit away; seven pages two bits away, similarity 0.954;
    // one three bits away, four five bits away.
    let mut stored = vec![with(&[0], 0)];
    stored.extend((1..8).map(|i| with(&[i, i + 8], 10)));
    stored.push(with(&[20, 21, 22], 10));
    stored.extend((0..4).map(|i| {
        with(
            &[30 + 5 * i, 31 + 5 * i, 32 + 5 * i, 33 + 5 * i, 34 + 5 * i],
            10,
        )
    }));
    let decide = |cap: usize| {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::new().sketches(true).max_distance(8);
        let store = Store::create(dir.path(), &options).unwrap();
        let ops: Vec<Op> = stored
            .iter()
            .enumerate()
            .map(|(id, s)| Op::InsertSketched {
                fingerprint: s.fingerprint(),
                id: id as u64 + 1,
                sketch: *s,
            })
            .collect();
        store.apply(ops).unwrap();
        let dedup = Deduper::new(&store, Some(8), Some(0.99))
            .unwrap()
            .max_candidates(cap)
            .unwrap();
        let candidate = [Candidate {
            fingerprint: doc.fingerprint(),
            sketch: Some(doc),
            volatility: None,
        }];
        let first = dedup.decide(100, &candidate).unwrap();
        let again = dedup.decide(100, &candidate).unwrap();
        assert_eq!(first, again, "cap {cap}");
        first[0].as_ref().map(|e| e.seq)
    };
    assert_eq!(decide(8), Some(1));
    assert_eq!(decide(9), None);
    assert_eq!(decide(13), None);
}
