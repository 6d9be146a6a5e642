//! Bodies of the fuzz targets under `fuzz/`, kept in the library so the
//! normal test suite runs them on deterministic inputs and they cannot rot.
//! Not part of the stable API.

use crate::codec::{encode_blocks, BlockView, Code, MIN_BLOCK_LEN, SYMBOLS};

/// Feeds arbitrary bytes to the block parser and decoders and to the
/// record decoders: they must return `Err` or a value, never panic, and the
/// fast and reference decoders must agree.
pub fn decode_arbitrary(data: &[u8]) {
    let (seed, bytes) = data.split_first().map_or((0, data), |(s, rest)| (*s, rest));
    let mut counts = [0u64; SYMBOLS];
    for (i, c) in counts.iter_mut().enumerate() {
        *c = u64::from(seed.rotate_left(i as u32 % 8)) * (i as u64 % 7);
    }
    let code = Code::from_counts(&counts);
    if let Ok(view) = BlockView::parse(bytes) {
        let mut fast = Vec::new();
        let fast = view.decode_into(&code, &mut fast).map(|()| fast);
        assert_eq!(fast, view.decode_slow(&code), "decoders disagree");
        sweep_arbitrary(&view, &code);
    }
    let _ = crate::format::manifest::Manifest::decode(bytes);
    let _ = crate::format::records::decode_code(bytes);
    let _ = crate::format::records::decode_counters(bytes);
}

/// Sweeps a parsed (possibly malformed) block as one lane and as two (split
/// at a resume point of the checked iterator). On any block it must not
/// panic or read outside the stream; on a block the checked iterator
/// decodes in full (the sweep's precondition) it never reports a value
/// that iterator does not decode, and a single lane reports them in its
/// order.
fn sweep_arbitrary(view: &BlockView<'_>, code: &Code) {
    use crate::codec::{sweep_stretches, LaneVisit};

    let mut iter = view.iter(code);
    let mut checked = Vec::new();
    let mut middle = None;
    let clean = loop {
        match iter.next() {
            Some(Ok(v)) => checked.push(v),
            Some(Err(_)) => break false,
            None => break checked.len() == view.count(),
        }
        if checked.len() == view.count() / 2 {
            middle = iter.resume_point();
        }
    };
    let stream = view.stream_bytes();
    let mut one = Vec::new();
    let lane = |_| Some(view.lane(usize::MAX));
    let end = sweep_stretches(stream, code, lane, 0, 0, 0, 64, |v, _| {
        one.push(v);
        true
    });
    if clean {
        assert_eq!(one, checked.get(1..).unwrap_or_default(), "one lane");
        assert_eq!(end, LaneVisit::Done, "one lane stopped short");
    }
    if let Some(point) = middle {
        let half = usize::from(point.index);
        let stretch = |m| match m {
            0 => Some(view.lane(half)),
            _ => view.lane_from(point, usize::MAX),
        };
        let mut two = Vec::new();
        sweep_stretches(stream, code, stretch, 0, 1, 0, 64, |v, _| {
            two.push(v);
            true
        });
        if clean {
            assert!(two.iter().all(|v| checked.contains(v)), "two lanes");
        }
    }
}

/// Interprets bytes as a run of fingerprints and a block size, encodes the
/// sorted, deduplicated run and checks that decoding returns it exactly.
pub fn roundtrip(data: &[u8]) {
    let Some((&size, rest)) = data.split_first() else {
        return;
    };
    let mut fps: Vec<u64> = rest
        .chunks(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect();
    fps.sort_unstable();
    fps.dedup();
    let block_size = MIN_BLOCK_LEN + usize::from(size) * 4;
    let mut counts = [0u64; SYMBOLS];
    crate::codec::delta_histogram(&fps, &mut counts);
    let code = Code::from_counts(&counts);
    let blocks =
        encode_blocks(&fps, &code, 0, block_size).unwrap_or_else(|e| panic!("encode failed: {e}"));
    let mut all = Vec::new();
    let mut out = Vec::new();
    for b in &blocks {
        assert!(b.len() <= block_size);
        let view = BlockView::parse(b).unwrap_or_else(|e| panic!("own block rejected: {e}"));
        view.decode_into(&code, &mut out)
            .unwrap_or_else(|e| panic!("own block undecodable: {e}"));
        all.extend_from_slice(&out);
    }
    assert_eq!(all, fps);
}

/// One step of the stateful target.
#[cfg(feature = "storage")]
#[derive(Debug, Clone, arbitrary::Arbitrary)]
pub enum Step {
    /// Inserts a pair.
    Insert(Pick, u8),
    /// Removes a pair.
    Delete(Pick, u8),
    /// Removes a fingerprint with all its ids.
    DeleteFingerprint(Pick),
    /// Inserts many pairs in one call (four or more take the bulk path);
    /// `None` stores the fingerprint alone.
    InsertMany(Vec<(Pick, Option<u8>)>),
    /// Merges everything pending.
    Compact,
    /// Closes and reopens the store.
    Reopen,
    /// Queries a fingerprint and sixteen neighbours of it by every path.
    Query(Pick),
}

/// A fingerprint: a new one, or one near a fingerprint used before (so
/// operations meet each other).
#[cfg(feature = "storage")]
#[derive(Debug, Clone, Copy, arbitrary::Arbitrary)]
pub enum Pick {
    /// This fingerprint.
    New(u64),
    /// The `index`th fingerprint used before (modulo their number) with
    /// `flips % 3` bits flipped from bit `at % 64` on.
    Near {
        /// Which earlier fingerprint.
        index: u16,
        /// How many bits to flip (modulo 3).
        flips: u8,
        /// From which bit.
        at: u8,
    },
}

/// The steps `data` decodes to, one after another until it runs out
/// (the fuzz target's own decoding stops at each step with probability
/// one half on unstructured bytes, which suits a fuzzer that learns, not
/// fixed pseudo-random inputs).
#[cfg(feature = "storage")]
pub fn steps_of(data: &[u8]) -> Vec<Step> {
    use arbitrary::Arbitrary;
    let mut u = arbitrary::Unstructured::new(data);
    let mut steps = Vec::new();
    while !u.is_empty() {
        match Step::arbitrary(&mut u) {
            Ok(step) => steps.push(step),
            Err(_) => break,
        }
    }
    steps
}

/// Applies `steps` to a store with tiny blocks, checking it after every
/// step against an in-memory model and a brute-force scan (every query
/// path, contents and ids compared), and verifying it at the end.
#[cfg(feature = "storage")]
pub fn stateful(steps: &[Step]) {
    use std::collections::{BTreeMap, BTreeSet};

    use crate::{Options, Store};

    type Model = BTreeMap<u64, BTreeSet<u64>>;
    /// What every query path must answer: matches by distance, then
    /// fingerprint, with their ids.
    fn within(model: &Model, q: u64, k: u32) -> Vec<(u32, u64, Vec<u64>)> {
        let mut expect: Vec<(u32, u64, Vec<u64>)> = model
            .iter()
            .map(|(&f, ids)| ((f ^ q).count_ones(), f, ids.iter().copied().collect()))
            .filter(|&(d, _, _)| d <= k)
            .collect();
        expect.sort();
        expect
    }
    fn shape(matches: &[crate::Match]) -> Vec<(u32, u64, Vec<u64>)> {
        matches
            .iter()
            .map(|m| (m.distance, m.fingerprint, m.ids.clone()))
            .collect()
    }

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let path = dir.path().join("s");
    let options = Options::new()
        .warm(false)
        .block_size(40)
        .merge_threshold(4)
        .manual_compaction(true)
        .durability(crate::Durability::Buffered);
    let mut store = Store::create(&path, &options).unwrap_or_else(|e| panic!("create: {e}"));
    let mut model = Model::new();
    let mut known: Vec<u64> = Vec::new();
    let mut pick = |p: Pick| -> u64 {
        let fp = match p {
            Pick::Near { index, flips, at } if !known.is_empty() => {
                let base = known[usize::from(index) % known.len()];
                base ^ u64::from(flips % 3).rotate_left(u32::from(at) % 64)
            }
            Pick::Near { index, .. } => u64::from(index),
            Pick::New(fp) => fp,
        };
        known.push(fp);
        fp
    };
    for step in steps {
        match step.clone() {
            Step::Insert(p, id) => {
                let (fp, id) = (pick(p), u64::from(id % 8));
                store
                    .insert(fp, id)
                    .unwrap_or_else(|e| panic!("insert: {e}"));
                model.entry(fp).or_default().insert(id);
            }
            Step::Delete(p, id) => {
                let (fp, id) = (pick(p), u64::from(id % 8));
                let removed = store
                    .delete(fp, id)
                    .unwrap_or_else(|e| panic!("delete: {e}"));
                let expect = model.get_mut(&fp).is_some_and(|ids| ids.remove(&id));
                assert_eq!(removed, expect, "delete({fp:016x}, {id})");
                // The fingerprint goes with its last id (one stored
                // without ids stays).
                if expect && model.get(&fp).is_some_and(BTreeSet::is_empty) {
                    model.remove(&fp);
                }
            }
            Step::DeleteFingerprint(p) => {
                let fp = pick(p);
                let removed = store
                    .delete_fingerprint(fp)
                    .unwrap_or_else(|e| panic!("delete fingerprint: {e}"));
                assert_eq!(
                    removed,
                    model.remove(&fp).is_some(),
                    "delete_fingerprint({fp:016x})"
                );
            }
            Step::InsertMany(entries) => {
                let pairs: Vec<(u64, Option<u64>)> = entries
                    .into_iter()
                    .take(64)
                    .map(|(p, id)| (pick(p), id.map(|id| u64::from(id % 8))))
                    .collect();
                store
                    .insert_many(&pairs)
                    .unwrap_or_else(|e| panic!("insert_many: {e}"));
                for (fp, id) in pairs {
                    model.entry(fp).or_default().extend(id);
                }
            }
            Step::Compact => {
                store.compact().unwrap_or_else(|e| panic!("compact: {e}"));
            }
            Step::Reopen => {
                store.close().unwrap_or_else(|e| panic!("close: {e}"));
                store = Store::open(&path, &options).unwrap_or_else(|e| panic!("reopen: {e}"));
            }
            Step::Query(p) => {
                let q = pick(p);
                // The query and neighbours of it, enough to fill more
                // than one group of the grouped paths.
                let group: Vec<u64> = (0..17u32)
                    .map(|i| match i {
                        0 => q,
                        1..=8 => q ^ (1u64 << (i * 7)),
                        _ => q ^ (0b101u64 << (i * 3)),
                    })
                    .collect();
                for k in 0..=3u32 {
                    let many = store
                        .query_many(&group, k)
                        .unwrap_or_else(|e| panic!("query_many: {e}"));
                    let first_many = store
                        .query_first_many(&group, k)
                        .unwrap_or_else(|e| panic!("query_first_many: {e}"));
                    assert_eq!((many.len(), first_many.len()), (17, 17));
                    for ((&g, all), first) in group.iter().zip(&many).zip(&first_many) {
                        let expect = within(&model, g, k);
                        assert_eq!(shape(all), expect, "query_many {g:016x} k={k}");
                        let single = store.query(g, k).unwrap_or_else(|e| panic!("query: {e}"));
                        assert_eq!(shape(&single), expect, "query {g:016x} k={k}");
                        let alone = store
                            .query_many(&[g], k)
                            .unwrap_or_else(|e| panic!("query_many of one: {e}"));
                        assert_eq!(shape(&alone[0]), expect, "query_many of {g:016x} k={k}");
                        let one = store
                            .query_first(g, k)
                            .unwrap_or_else(|e| panic!("query_first: {e}"));
                        for (path, found) in
                            [("query_first", one), ("query_first_many", first.clone())]
                        {
                            match found {
                                Some(m) => assert!(
                                    expect.contains(&(m.distance, m.fingerprint, m.ids.clone())),
                                    "{path} {g:016x} k={k}"
                                ),
                                None => assert!(expect.is_empty(), "{path} {g:016x} k={k}"),
                            }
                        }
                    }
                }
            }
        }
    }
    let stats = store.stats();
    assert_eq!(stats.fingerprints, model.len() as u64);
    assert_eq!(
        stats.ids,
        model.values().map(|ids| ids.len() as u64).sum::<u64>()
    );
    let report = store.verify().unwrap_or_else(|e| panic!("verify: {e}"));
    assert!(report.ok(), "{:?}", report.problems);
    store.close().unwrap_or_else(|e| panic!("close: {e}"));
}

#[cfg(test)]
mod tests {
    use crate::test_rng::TestRng;

    /// A short deterministic run of each target.
    #[test]
    fn targets_run_on_pseudo_random_inputs() {
        let mut rng = TestRng::new(1);
        for len in 0..600usize {
            let data = rng.bytes(len);
            super::decode_arbitrary(&data);
            super::roundtrip(&data);
        }
    }

    /// Deterministic operation sequences through the stateful target.
    #[cfg(feature = "storage")]
    #[test]
    fn stateful_target_on_pseudo_random_sequences() {
        use super::Step;
        let mut rng = TestRng::new(2);
        let (mut steps, mut queries, mut reopens) = (0, 0, 0);
        for len in [0usize, 60, 300, 900] {
            for _ in 0..3 {
                let data = rng.bytes(len);
                let decoded = super::steps_of(&data);
                steps += decoded.len();
                queries += decoded
                    .iter()
                    .filter(|s| matches!(s, Step::Query(_)))
                    .count();
                reopens += decoded.iter().filter(|s| matches!(s, Step::Reopen)).count();
                super::stateful(&decoded);
            }
        }
        // The inputs decode to real sequences, not empty ones.
        assert!(
            steps >= 100 && queries >= 5 && reopens >= 2,
            "{steps} {queries} {reopens}"
        );
    }
}
