//! Probabilistic queries (PSM with VOSH) on one-table stores: every answer
//! is a true match, the exhaustive budget is exact, and on the generative
//! model of simhash weights the default budget finds about the share of
//! true matches it aims for.

mod common;

use common::{shape, Rng};
use simstore::simhash::{Volatility, FLIP_SCALE};
use simstore::{Budget, Error, Options, Store};

/// A standard normal deviate (Box-Muller).
fn gauss(rng: &mut Rng) -> f64 {
    let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
    let v = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * (1.0 - u).ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

fn bits(w: &[f64; 64]) -> u64 {
    (0..64).fold(0u64, |fp, j| if w[j] > 0.0 { fp | 1 << j } else { fp })
}

/// The generative model: a stored document's 64 weight sums are standard
/// normal; a near-duplicate's are the same plus normal noise of standard
/// deviation `FLIP_SCALE` (the change the volatility model assumes).
/// Returns the stored fingerprints and the queries with their volatility.
fn generative(n: usize, queries: usize, seed: u64) -> (Vec<u64>, Vec<(u64, Volatility)>) {
    let mut rng = Rng(seed);
    let mut stored = Vec::with_capacity(n);
    let mut weights = Vec::with_capacity(n);
    for _ in 0..n {
        let w: [f64; 64] = std::array::from_fn(|_| gauss(&mut rng));
        stored.push(bits(&w));
        weights.push(w);
    }
    let mut qs = Vec::with_capacity(queries);
    for i in 0..queries {
        let base = &weights[(i * 7919) % n];
        let w: [f64; 64] = std::array::from_fn(|j| base[j] + FLIP_SCALE * gauss(&mut rng));
        qs.push((bits(&w), Volatility::from_weights(&w)));
    }
    (stored, qs)
}

/// A store made with `options` in a new directory, holding each of
/// `stored` with its index as id.
fn loaded(stored: &[u64], options: &Options) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("s"), options).unwrap();
    let pairs: Vec<(u64, u64)> = stored
        .iter()
        .enumerate()
        .map(|(i, &f)| (f, i as u64))
        .collect();
    store.insert_many(&pairs).unwrap();
    (dir, store)
}

#[test]
fn answers_are_true_matches_and_the_default_budget_finds_most() {
    let (stored, queries) = generative(20_000, 1500, 1);
    let options = Options::new().tables(1).expected_size(20_000);
    let (_dir, store) = loaded(&stored, &options);
    // A fifth of the fingerprints with two more ids.
    let more: Vec<(u64, u64)> = (stored.iter().step_by(5))
        .flat_map(|&f| [(f, 1 << 40), (f, 1 << 41)])
        .collect();
    store.insert_many(&more).unwrap();
    let k = 3;
    let (mut truth, mut found) = (0usize, 0usize);
    let default = store
        .query_probabilistic_many(&queries, k, Budget::default(), false)
        .unwrap();
    let exhaustive = store
        .query_probabilistic_many(&queries, k, Budget::EXHAUSTIVE, false)
        .unwrap();
    let firsts = store
        .query_probabilistic_many(&queries, k, Budget::default(), true)
        .unwrap();
    // The same answers into reused buffers, and with one id listed, on a
    // third of the queries.
    let mut answers = simstore::Answers::new();
    let third = &queries[..queries.len() / 3];
    for (first, expect) in [(false, &default), (true, &firsts)] {
        store
            .query_probabilistic_many_into(
                &queries,
                k,
                Budget::default(),
                first,
                None,
                &mut answers,
            )
            .unwrap();
        let got: Vec<Vec<simstore::Match>> = answers
            .iter()
            .map(|ms| ms.map(simstore::Match::from).collect())
            .collect();
        assert_eq!(&got, expect, "first={first}");
        store
            .query_probabilistic_many_into(
                third,
                k,
                Budget::default(),
                first,
                Some(1),
                &mut answers,
            )
            .unwrap();
        assert_eq!(answers.len(), third.len());
        for (ms, e) in answers.iter().zip(expect.iter()) {
            let ms: Vec<simstore::MatchRef<'_>> = ms.collect();
            assert_eq!(ms.len(), e.len());
            for (m, e) in ms.iter().zip(e) {
                assert_eq!((m.fingerprint, m.distance), (e.fingerprint, e.distance));
                assert_eq!(
                    (m.ids, m.id_count),
                    (&e.ids[..e.ids.len().min(1)], e.ids.len())
                );
            }
        }
    }
    for (i, &(q, v)) in queries.iter().enumerate() {
        let exact = store.query(q, k).unwrap();
        assert_eq!(shape(&exhaustive[i]), shape(&exact), "exhaustive {q:016x}");
        let one = store
            .query_probabilistic(q, &v, k, Budget::default())
            .unwrap();
        assert_eq!(shape(&one), shape(&default[i]));
        assert!(
            default[i].iter().all(|m| exact.contains(m)),
            "a false match"
        );
        assert!(firsts[i].len() <= 1 && firsts[i].iter().all(|m| exact.contains(m)));
        assert_eq!(
            firsts[i].is_empty(),
            default[i].is_empty(),
            "first and all disagree"
        );
        truth += exact.len();
        found += default[i].len();
        // A budget of one probe reads the query's own header only.
        let own = store
            .query_probabilistic(q, &v, k, Budget::probes(1))
            .unwrap();
        let header = 64 - u32::from(store.plan().header_bits().unwrap());
        assert!(own.iter().all(|m| (m.fingerprint ^ q) >> header == 0));
    }
    assert!(truth > 500, "the model makes near-duplicates ({truth})");
    let recall = found as f64 / truth as f64;
    eprintln!(
        "generative model: {found} of {truth} true matches at the default budget ({recall:.3})"
    );
    assert!(recall >= 0.85, "recall {recall:.3} at the default budget");
}

/// First-match queries over every header flip find a match exactly when
/// one exists, though they take the flips in several passes: queries are
/// stored fingerprints with up to three header bits flipped and, for half
/// of them, every bit equally volatile, so many of their matches lie in
/// the last passes' headers. Once with every fingerprint pending, once
/// with most of them merged into level 0 (read flat, its first passes
/// staged for several queries together) and the rest pending.
#[test]
fn exhaustive_first_matches_are_found_in_every_pass() {
    for merged in [false, true] {
        let mut rng = Rng(17);
        let stored: Vec<u64> = (0..20_000).map(|_| rng.next()).collect();
        let options = Options::new().tables(1).expected_size(20_000);
        let (_dir, store) = loaded(&stored[..18_000], &options);
        if merged {
            store.compact().unwrap();
            assert!(store.stats().flat_bytes.is_some(), "level 0 is flat");
        }
        let later: Vec<(u64, u64)> = (18_000..20_000).map(|i| (stored[i], i as u64)).collect();
        store.insert_many(&later).unwrap();
        let header = u32::from(store.plan().header_bits().unwrap());
        let flips = simstore::plan::vosh::exact_count(header as u8, 3);
        assert!(
            flips > 400,
            "{flips} header flips: too few for several passes"
        );
        let uniform = Volatility::uniform(0.1);
        let queries: Vec<(u64, Volatility)> = (0..1500)
            .map(|i| {
                // Every other query with bits of differing volatility, so
                // neighbouring queries take their flip sets in different
                // orders.
                let volatility = if i % 2 == 0 {
                    uniform
                } else {
                    Volatility::from_bytes(std::array::from_fn(|_| 16 + (rng.next() % 40) as u8))
                };
                let mut q = stored[(i * 7919) % stored.len()];
                for _ in 0..(i % 4) {
                    q ^= 1u64 << (63 - rng.next() % u64::from(header));
                }
                // Every eighth query is a random fingerprint.
                if i % 8 == 7 {
                    q = rng.next();
                }
                (q, volatility)
            })
            .collect();
        let firsts = store
            .query_probabilistic_many(&queries, 3, Budget::EXHAUSTIVE, true)
            .unwrap();
        let mut found = 0;
        for (i, &(q, _)) in queries.iter().enumerate() {
            let exact = store.query(q, 3).unwrap();
            assert!(firsts[i].len() <= 1 && firsts[i].iter().all(|m| exact.contains(m)));
            assert_eq!(
                firsts[i].is_empty(),
                exact.is_empty(),
                "merged {merged}, query {i} {q:016x}"
            );
            found += firsts[i].len();
        }
        assert!(found > 1200, "{found} first matches");
    }
}

#[test]
fn stores_of_several_tables_answer_exactly() {
    let (stored, queries) = generative(3000, 200, 2);
    let (_dir, store) = loaded(&stored, &Options::new());
    let mut answers = simstore::Answers::new();
    store
        .query_probabilistic_many_into(&queries, 3, Budget::probes(1), false, None, &mut answers)
        .unwrap();
    assert_eq!(answers.len(), queries.len());
    for (&(q, v), into) in queries.iter().zip(answers.iter()) {
        let got = store
            .query_probabilistic(q, &v, 3, Budget::probes(1))
            .unwrap();
        let exact = store.query(q, 3).unwrap();
        assert_eq!(shape(&got), shape(&exact));
        let into: Vec<simstore::Match> = into.map(simstore::Match::from).collect();
        assert_eq!(into, exact);
    }
}

#[test]
fn bad_budgets_and_distances_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("s"), &Options::new().tables(1)).unwrap();
    let v = Volatility::uniform(0.1);
    for budget in [
        Budget::probes(0),
        Budget::recall(f64::NAN),
        Budget::recall(-0.5),
    ] {
        assert!(matches!(
            store.query_probabilistic(1, &v, 3, budget),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(matches!(
        store.query_probabilistic(1, &v, 4, Budget::default()),
        Err(Error::DistanceTooLarge { .. })
    ));
}

/// Batches of 4,096 queries or more are spread over the query threads:
/// on a one-table store each query's answer is the one it gets alone; a
/// store of several tables answers exactly, as a batch (first matches:
/// the nearest).
#[test]
fn large_batches_split_over_threads_answer_the_same() {
    let (mut stored, mut queries) = generative(20_000, 6000, 3);
    // Queries with several matches: stored fingerprints with neighbours
    // one and three bits away.
    for j in 0..500 {
        let f = stored[j];
        stored.extend([f ^ 1, f ^ 0b1_0000_0011]);
        queries.push((f ^ 0b10, Volatility::uniform(0.1)));
    }
    let one_table = Options::new().tables(1).expected_size(20_000);
    for options in [one_table, Options::new()] {
        // Pending (the tables without a block, so each query answered on
        // its own), then merged into the tables (a several-table store's
        // batch then takes sorted passes over them).
        let (_dir, store) = loaded(&stored, &options.query_threads(2));
        split_batches_answer_the_same(&store, &queries);
        store.compact().unwrap();
        assert!(store.stats().blocks > 0);
        split_batches_answer_the_same(&store, &queries);
    }
}

fn split_batches_answer_the_same(store: &Store, queries: &[(u64, Volatility)]) {
    let stats = store.stats();
    let several = stats.tables > 1;
    // A several-table store's batch takes sorted passes over tables that
    // have blocks (a first match is then the nearest); answered query by
    // query, a first match is any.
    let sorted = several && stats.blocks > 0;
    for first in [false, true] {
        let many = store
            .query_probabilistic_many(queries, 3, Budget::default(), first)
            .unwrap();
        assert_eq!(many.len(), queries.len());
        for (i, &(q, v)) in queries.iter().enumerate().step_by(7) {
            if several {
                let mut exact = shape(&store.query(q, 3).unwrap());
                let got = shape(&many[i]);
                if first && !sorted {
                    assert_eq!(got.len(), exact.len().min(1), "query {i} first");
                    assert!(got.iter().all(|m| exact.contains(m)), "query {i} first");
                } else {
                    exact.truncate(if first { 1 } else { usize::MAX });
                    assert_eq!(got, exact, "query {i} first={first}");
                }
                continue;
            }
            let one = if first {
                store
                    .query_first_probabilistic(q, &v, 3, Budget::default())
                    .unwrap()
                    .into_iter()
                    .collect()
            } else {
                store
                    .query_probabilistic(q, &v, 3, Budget::default())
                    .unwrap()
            };
            assert_eq!(shape(&many[i]), shape(&one), "query {i} first={first}");
        }
    }
}

/// All matches within a budget are exactly the stored fingerprints within
/// `k` whose header differs from the query's by one of the flip sets the
/// budget takes (`vosh::likeliest`'s), with their ids: on level 0 read
/// flat, and with fingerprints pending and in the upper levels beside it,
/// for budgets walked, popped from the heap and of a few probes.
#[test]
fn all_matches_are_every_match_in_the_runs_the_budget_probes() {
    use simstore::plan::vosh;
    use std::collections::{BTreeMap, HashSet};
    for (n, seed) in [(3_000usize, 4u64), (30_000, 5)] {
        let (stored, queries) = generative(n, 300, seed);
        let options = Options::new()
            .tables(1)
            .expected_size(n as u64)
            .merge_threshold(300);
        // Three quarters loaded in bulk, the rest written in small batches
        // (merged into the upper levels as they gather, the last pending).
        let (_dir, store) = loaded(&stored[..n * 3 / 4], &options);
        let later: Vec<(u64, u64)> = stored
            .iter()
            .enumerate()
            .skip(n * 3 / 4)
            .map(|(i, &f)| (f, i as u64))
            .collect();
        for batch in later.chunks(97) {
            store.insert_many(batch).unwrap();
        }
        let mut ids: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for (i, &f) in stored.iter().enumerate() {
            ids.entry(f).or_default().push(i as u64);
        }
        let header = store.plan().header_bits().unwrap();
        let shift = 64 - u32::from(header);
        let bits: Vec<u8> = (64 - header..64).collect();
        for budget in [Budget::default(), Budget::recall(0.8), Budget::probes(5)] {
            let got = store
                .query_probabilistic_many(&queries, 3, budget, false)
                .unwrap();
            let mut matched = 0;
            for (i, &(q, v)) in queries.iter().enumerate() {
                let masks: HashSet<u64> =
                    vosh::likeliest(&bits, |b| v.probability(b), 3, budget, false).collect();
                let want: Vec<(u32, u64, Vec<u64>)> = ids
                    .iter()
                    .map(|(&f, ids)| ((f ^ q).count_ones(), f, ids.clone()))
                    .filter(|&(d, f, _)| d <= 3 && masks.contains(&((f ^ q) >> shift << shift)))
                    .collect();
                let mut want = want;
                want.sort();
                matched += want.len();
                assert_eq!(shape(&got[i]), want, "n {n}, query {i}, {budget:?}");
            }
            assert!(matched > 50, "the queries find matches ({matched})");
        }
    }
}
