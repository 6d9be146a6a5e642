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

/// Interprets bytes as a sequence of store operations (insert, bulk
/// insert, delete, delete-fingerprint, query at every distance, compact,
/// reopen) on a
/// store with tiny blocks, checked after every step against an in-memory
/// model and a brute-force scan.
#[cfg(feature = "storage")]
pub fn stateful(data: &[u8]) {
    use std::collections::{BTreeMap, BTreeSet};

    use crate::{Op, Options, Store};

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let path = dir.path().join("s");
    let options = Options::new()
        .warm(false)
        .block_size(40)
        .merge_threshold(4)
        .manual_compaction(true)
        .durability(crate::Durability::Buffered);
    let mut store = Some(Store::create(&path, &options).unwrap_or_else(|e| panic!("create: {e}")));
    let mut model: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    let mut known: Vec<u64> = Vec::new();
    let mut bytes = data.iter().copied();
    let mut next = |n: usize| -> Option<u64> {
        let mut v = 0u64;
        for _ in 0..n {
            v = (v << 8) | u64::from(bytes.next()?);
        }
        Some(v)
    };
    while let Some(op) = next(1) {
        let Some(s) = store.as_ref() else { break };
        // Fingerprints: new random ones, or near/equal to known ones.
        let mut fingerprint = |sel: u64| -> Option<u64> {
            let fp = if known.is_empty() || sel.is_multiple_of(3) {
                next(8)?
            } else {
                let base = known[(sel as usize / 3) % known.len()];
                base ^ (next(1)? % 3)
                    .checked_shl(next(1)? as u32 % 64)
                    .unwrap_or(0)
            };
            known.push(fp);
            Some(fp)
        };
        match op % 8 {
            0 | 1 => {
                let Some(fp) = fingerprint(op / 8) else {
                    break;
                };
                let id = next(1).unwrap_or(0) % 8;
                s.apply(vec![Op::Insert {
                    fingerprint: fp,
                    id: Some(id),
                }])
                .unwrap_or_else(|e| panic!("insert: {e}"));
                model.entry(fp).or_default().insert(id);
            }
            2 => {
                let Some(fp) = fingerprint(op / 8) else {
                    break;
                };
                let id = next(1).unwrap_or(0) % 8;
                let removed = s.delete(fp, id).unwrap_or_else(|e| panic!("delete: {e}"));
                let expect = model.get_mut(&fp).is_some_and(|ids| ids.remove(&id));
                assert_eq!(removed, expect, "delete({fp:016x}, {id})");
                if model.get(&fp).is_some_and(BTreeSet::is_empty) {
                    model.remove(&fp);
                }
            }
            3 => {
                let Some(fp) = fingerprint(op / 8) else {
                    break;
                };
                let removed = s
                    .delete_fingerprint(fp)
                    .unwrap_or_else(|e| panic!("delete fingerprint: {e}"));
                assert_eq!(
                    removed,
                    model.remove(&fp).is_some(),
                    "delete_fingerprint({fp:016x})"
                );
            }
            7 => {
                // A batch: four or more pairs take the bulk path.
                let mut fps = Vec::new();
                for _ in 0..(op / 8) % 8 + 1 {
                    let Some(fp) = fingerprint(op / 8) else {
                        break;
                    };
                    fps.push(fp);
                }
                let pairs: Vec<(u64, Option<u64>)> = fps
                    .into_iter()
                    .map(|fp| (fp, Some(next(1).unwrap_or(0) % 8)))
                    .collect();
                s.insert_many(&pairs)
                    .unwrap_or_else(|e| panic!("bulk insert: {e}"));
                for (fp, id) in pairs {
                    model.entry(fp).or_default().extend(id);
                }
            }
            4 => {
                s.compact().unwrap_or_else(|e| panic!("compact: {e}"));
            }
            5 => {
                drop(store.take());
                store =
                    Some(Store::open(&path, &options).unwrap_or_else(|e| panic!("reopen: {e}")));
            }
            _ => {
                let Some(q) = fingerprint(op / 8) else {
                    break;
                };
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
                    let within = |q: u64| {
                        let mut expect: Vec<(u32, u64, Vec<u64>)> = model
                            .iter()
                            .map(|(&f, ids)| {
                                ((f ^ q).count_ones(), f, ids.iter().copied().collect())
                            })
                            .filter(|&(d, _, _)| d <= k)
                            .collect();
                        expect.sort();
                        expect
                    };
                    let many = s
                        .query_many(&group, k)
                        .unwrap_or_else(|e| panic!("query_many: {e}"));
                    let first_many = s
                        .query_first_many(&group, k)
                        .unwrap_or_else(|e| panic!("query_first_many: {e}"));
                    for ((&g, all), first) in group.iter().zip(&many).zip(&first_many) {
                        let expect = within(g);
                        let all: Vec<(u32, u64, Vec<u64>)> = all
                            .iter()
                            .map(|m| (m.distance, m.fingerprint, m.ids.clone()))
                            .collect();
                        assert_eq!(all, expect, "query_many {g:016x} k={k}");
                        match first {
                            Some(m) => assert!(
                                expect.contains(&(m.distance, m.fingerprint, m.ids.clone())),
                                "query_first_many {g:016x} k={k}"
                            ),
                            None => assert!(expect.is_empty(), "query_first_many {g:016x} k={k}"),
                        }
                    }
                    assert_eq!(many.len(), group.len());
                    assert_eq!(first_many.len(), group.len());
                    let expect = within(q);
                    let got: Vec<(u32, u64, Vec<u64>)> = s
                        .query(q, k)
                        .unwrap_or_else(|e| panic!("query: {e}"))
                        .into_iter()
                        .map(|m| (m.distance, m.fingerprint, m.ids))
                        .collect();
                    assert_eq!(got, expect, "query {q:016x} k={k}");
                    let batch = s
                        .query_many(&[q], k)
                        .unwrap_or_else(|e| panic!("batch: {e}"));
                    assert_eq!(batch[0].len(), expect.len(), "batch query {q:016x} k={k}");
                    let first = s.query_first(q, k).unwrap_or_else(|e| panic!("first: {e}"));
                    assert_eq!(
                        first.is_some(),
                        !expect.is_empty(),
                        "first-match {q:016x} k={k}"
                    );
                }
            }
        }
    }
    if let Some(s) = store {
        assert_eq!(s.stats().fingerprints, model.len() as u64);
        let report = s.verify().unwrap_or_else(|e| panic!("verify: {e}"));
        assert!(report.ok(), "{:?}", report.problems);
    }
}

#[cfg(test)]
mod tests {
    /// `len` xorshift bytes from the state `x`.
    fn bytes(x: &mut u64, len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| {
                *x ^= *x << 13;
                *x ^= *x >> 7;
                *x ^= *x << 17;
                *x as u8
            })
            .collect()
    }

    /// A short deterministic run of each target.
    #[test]
    fn targets_run_on_pseudo_random_inputs() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for len in 0..600usize {
            let data = bytes(&mut x, len);
            super::decode_arbitrary(&data);
            super::roundtrip(&data);
        }
    }

    /// Deterministic operation sequences through the stateful target.
    #[cfg(feature = "storage")]
    #[test]
    fn stateful_target_on_pseudo_random_sequences() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in [0usize, 60, 300, 1200] {
            for _ in 0..3 {
                super::stateful(&bytes(&mut x, len));
            }
        }
    }
}
