use super::*;
use crate::codec::{BlockView, Code};
use crate::error::Error;
use crate::format::records::IndexEntry;

/// Random values, half of them packed into dense runs.
fn values(n: usize, seed: u64) -> Vec<u64> {
    let mut x = seed;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let v = x ^ (x >> 29);
        out.push(v);
        if x.is_multiple_of(2) {
            out.extend((1..(x >> 58)).map(|d| v.wrapping_add(d)));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn scanned(t: &TableState, lo: u64, hi: u64) -> Vec<u64> {
    let mut got = Vec::new();
    t.scan(lo, hi, |v| {
        got.push(v);
        true
    })
    .unwrap();
    // The near scan with a distance reaching everything reports the
    // same values, perhaps with stored neighbours outside the range and
    // repeats; with distance 3 from a value in the range, exactly the
    // range's values within 3 of it, perhaps with stored others.
    let mut unordered = Vec::new();
    t.scan_near(t.probe_start(lo, hi), lo, hi, lo, 64, |v, d| {
        assert_eq!(d, (v ^ lo).count_ones());
        unordered.push(v);
        true
    })
    .unwrap();
    let q = got.get(got.len() / 2).map_or(lo, |&v| v ^ 0b101);
    let mut near = Vec::new();
    t.scan_near(t.probe_start(lo, hi), lo, hi, q, 3, |v, d| {
        assert!(d <= 3 && d == (v ^ q).count_ones());
        near.push(v);
        true
    })
    .unwrap();
    for &v in unordered.iter().chain(&near) {
        assert!(t.contains(v).unwrap(), "near scan made up {v:x}");
    }
    near.retain(|&v| v >= lo && v <= hi);
    near.sort_unstable();
    near.dedup();
    let want: Vec<u64> = got
        .iter()
        .copied()
        .filter(|v| (v ^ q).count_ones() <= 3)
        .collect();
    assert_eq!(near, want, "near scan of {lo:x}..={hi:x} around {q:x}");
    unordered.sort_unstable();
    unordered.dedup();
    unordered.retain(|&v| v >= lo && v <= hi);
    assert_eq!(unordered, got, "near scan of {lo:x}..={hi:x}");
    got
}

/// `fps` in 1 KB blocks under a flat code: the code, the blocks and
/// their keys.
fn encoded(fps: &[u64]) -> (Code, Vec<Vec<u8>>, Vec<u64>) {
    let code = Code::from_counts(&[1; crate::codec::SYMBOLS]);
    let blocks = crate::codec::encode_blocks(fps, &code, 0, 1024).unwrap();
    let mut keys = Vec::new();
    let mut at = 0;
    for b in &blocks {
        keys.push(fps[at]);
        at += usize::from(header_count(b));
    }
    (code, blocks, keys)
}

/// Probes of every width, before and after a merge that rewrites some
/// blocks and keeps the others: every answer equals a brute-force
/// filter.
#[test]
fn scans_match_brute_force() {
    let mut fps = values(20_000, 7);
    let (code, encoded, keys) = encoded(&fps);
    let blocks = encoded.into_iter().map(Arc::from).collect();
    let mut table = TableState::new(0, keys, blocks, Arc::new(Codebook::from_codes([(0, code)])));
    let mut x = 3u64;
    for round in 0..4 {
        for i in 0..3000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let base = fps[(x >> 33) as usize % fps.len()];
            let width = [0u64, 1, 1 << 20, 1 << 50][i % 4];
            let lo = base.wrapping_sub((x >> 7) % 4);
            let hi = lo.saturating_add(width);
            let expect: Vec<u64> = fps
                .iter()
                .copied()
                .filter(|&v| v >= lo && v <= hi)
                .collect();
            assert_eq!(
                scanned(&table, lo, hi),
                expect,
                "round {round} probe {lo:x}..={hi:x}"
            );
        }
        // Every block was packed, at load and by the merge.
        assert!(table
            .blocks
            .iter()
            .all(|b| matches!(b.held.get(), Some(Held::Packed(_)))));
        if round == 2 {
            let adds: Vec<u64> = fps
                .iter()
                .map(|v| v ^ 1)
                .filter(|v| fps.binary_search(v).is_err())
                .step_by(97)
                .collect();
            let mut adds = adds;
            adds.sort_unstable();
            table = merge(&table, &adds, &[], 1024).unwrap().state;
            let mut all: Vec<u64> = fps.iter().copied().chain(adds).collect();
            all.sort_unstable();
            assert_eq!(scanned(&table, 0, u64::MAX), all);
            fps = all;
        }
    }
}

/// Blocks served from a map, counting the reads.
#[derive(Debug, Default)]
struct MapSource {
    blocks: std::collections::HashMap<u64, Arc<[u8]>>,
    reads: std::sync::atomic::AtomicUsize,
}

impl BlockSource for MapSource {
    fn fetch(&self, _table: usize, key: u64) -> Result<Arc<[u8]>> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.blocks.get(&key).cloned().ok_or_else(|| {
            Error::corrupt(crate::error::Location::Block { table: 0, key }, "missing")
        })
    }
}

fn entries(keys: &[u64], blocks: &[Vec<u8>]) -> Vec<IndexEntry> {
    keys.iter()
        .zip(blocks)
        .map(|(&key, b)| IndexEntry {
            key,
            len: b.len() as u16,
            count: header_count(b),
        })
        .collect()
}

/// A table opened from its index answers every probe as the table
/// read in full does, reading blocks as probes need them, before and
/// after a merge; filled from a full read and settled, it holds every
/// block and reads nothing more.
#[test]
fn lazy_tables_answer_as_loaded_ones() {
    let fps = values(40_000, 3);
    let (code, encoded, keys) = encoded(&fps);
    let codes = Arc::new(Codebook::from_codes([(0, code)]));
    let source = Arc::new(MapSource {
        blocks: keys
            .iter()
            .zip(&encoded)
            .map(|(&k, b)| (k, Arc::from(&b[..])))
            .collect(),
        ..Default::default()
    });
    let index = entries(&keys, &encoded);
    let full = TableState::new(
        0,
        keys.clone(),
        encoded.iter().map(|b| Arc::from(&b[..])).collect(),
        Arc::clone(&codes),
    );
    let lazy = TableState::lazy(0, &index, Arc::clone(&codes), source.clone());
    assert!(lazy.has_unread() && lazy.in_memory());
    assert_eq!(lazy.fingerprints(), fps.len() as u64);
    let mut x = 11u64;
    let mut probes = Vec::new();
    for i in 0..400 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        let lo = fps[(x >> 33) as usize % fps.len()].wrapping_sub(i % 3);
        probes.push((lo, lo.saturating_add([0u64, 1, 1 << 30][i as usize % 3])));
    }
    for (i, &(lo, hi)) in probes.iter().enumerate() {
        assert_eq!(
            scanned(&lazy, lo, hi),
            scanned(&full, lo, hi),
            "{lo:x}..={hi:x}"
        );
        if i == 1 {
            let reads = source.reads.load(std::sync::atomic::Ordering::Relaxed);
            assert!(reads > 0 && lazy.has_unread(), "{reads} reads");
        }
    }
    // A merge keeps unread blocks unread; the merged table reads them.
    let adds: Vec<u64> = fps
        .iter()
        .step_by(50)
        .map(|v| v ^ 1)
        .filter(|v| fps.binary_search(v).is_err())
        .collect();
    let mut adds = adds;
    adds.sort_unstable();
    let merged = merge(&lazy, &adds, &[], 1024).unwrap().state;
    let merged_full = merge(&full, &adds, &[], 1024).unwrap().state;

    assert_eq!(
        scanned(&merged, 0, u64::MAX),
        scanned(&merged_full, 0, u64::MAX)
    );
    // Filled from a full read and settled: nothing is read any more.
    assert!(lazy.fill_from(&full).is_empty());
    let settled = lazy.settled(&[]);
    assert!(!settled.has_unread());
    let before = source.reads.load(std::sync::atomic::Ordering::Relaxed);
    for &(lo, hi) in &probes {
        assert_eq!(scanned(&settled, lo, hi), scanned(&full, lo, hi));
    }
    assert_eq!(
        source.reads.load(std::sync::atomic::Ordering::Relaxed),
        before
    );
    assert_eq!(settled.memory_bytes(), full.memory_bytes());
}

/// Blocks that disagree with the index that listed them are reported,
/// whether a probe or the full read finds it, never answered from.
#[test]
fn lazy_tables_report_blocks_that_disagree_with_their_index() {
    let fps = values(6_000, 5);
    let (code, encoded, keys) = encoded(&fps);
    assert!(keys.len() > 6);
    let codes = Arc::new(Codebook::from_codes([(0, code)]));
    let index = entries(&keys, &encoded);
    // Block 1 is missing, block 2 is stored shorter than listed (the
    // tail of block 1's values dropped), and block 4 is stored under
    // its key but not listed.
    let mut stored: Vec<(u64, Vec<u8>)> = keys.iter().copied().zip(encoded.clone()).collect();
    let block2_values: Vec<u64> = fps
        .iter()
        .copied()
        .filter(|&v| v >= keys[2] && v < keys[3])
        .collect();
    let code = codes.get(0).unwrap().clone();
    let shorter =
        crate::codec::encode_blocks(&block2_values[..block2_values.len() - 1], &code, 0, 1024)
            .unwrap();
    stored[2].1 = shorter[0].clone();
    stored.remove(1);
    let mut listed = index.clone();
    listed.remove(4);
    let source = Arc::new(MapSource {
        blocks: stored
            .iter()
            .map(|(k, b)| (*k, Arc::from(&b[..])))
            .collect(),
        ..Default::default()
    });
    let probe = |t: &TableState, j: usize| {
        let lo = keys[j];
        t.scan(lo, lo, |_| true).map(|_| ())
    };
    let lazy = TableState::lazy(0, &listed, Arc::clone(&codes), source.clone());
    assert!(probe(&lazy, 1).is_err(), "missing block");
    assert!(probe(&lazy, 2).is_err(), "shorter block");
    probe(&lazy, 0).unwrap();
    // The full read finds the same, and the unlisted block.
    let fresh = TableState::new(
        0,
        stored.iter().map(|(k, _)| *k).collect(),
        stored.iter().map(|(_, b)| Arc::from(&b[..])).collect(),
        Arc::clone(&codes),
    );
    let lazy = TableState::lazy(0, &listed, Arc::clone(&codes), source.clone());
    probe(&lazy, 3).unwrap();
    let problems = lazy.fill_from(&fresh);
    let keyed: Vec<u64> = problems.iter().map(|p| p.0).collect();
    assert_eq!(keyed, [keys[1], keys[2], keys[3]], "{problems:?}");
    assert!(problems[2].1.contains("missing from the table index"));
    let settled = lazy.settled(&problems);
    for j in [1, 2, 3] {
        assert!(probe(&settled, j).is_err(), "block {j}");
    }
    probe(&settled, 0).unwrap();
    probe(&settled, 5).unwrap();

    // Filled piece by piece (as the warming reads), with the missing,
    // short and unlisted blocks at and beside pieces' edges: the same.
    for size in 1..=4 {
        let lazy = TableState::lazy(0, &listed, Arc::clone(&codes), source.clone());
        probe(&lazy, 3).unwrap();
        let mut loader = Loader::new(0, Arc::clone(&codes));
        let mut filling = lazy.filling();
        for (n, (key, bytes)) in stored.iter().enumerate() {
            if lazy.holds(*key) {
                loader.skip(*key, bytes);
            } else {
                loader.push(*key, bytes);
            }
            if (n + 1) % size == 0 {
                filling.fill(&loader.take_piece());
            }
        }
        filling.fill(&loader.take_piece());
        assert_eq!(filling.finish(), problems, "pieces of {size}");
        assert!(!lazy.has_unread(), "pieces of {size}");
        // Every block read is held (block 4, unlisted, is not).
        for (j, &key) in keys.iter().enumerate().filter(|(j, _)| ![1, 2].contains(j)) {
            let want = if j == 4 { vec![] } else { vec![key] };
            assert_eq!(
                scanned(&lazy, key, key),
                want,
                "pieces of {size}, block {j}"
            );
        }
    }
}

/// A block whose checksum passes but whose stream was damaged (an
/// encoder bug, not a disk fault: the CRC catches those) is answered as
/// the checked decoder answers it: an error where that decoder fails,
/// its values where it does not. (Only blocks that decode cleanly at
/// load are packed; the others are read with the checked decoder.)
#[test]
fn damaged_streams_are_answered_as_the_checked_decoder_does() {
    let fps = values(6_000, 11);
    let (code, encoded, keys) = encoded(&fps);
    // From block 2 to the end, so every probe reads all of block 2.
    let (lo, hi) = (keys[2], u64::MAX);
    let later: Vec<u64> = fps.iter().copied().filter(|&v| v >= keys[3]).collect();
    let mut errors = 0;
    for flip in (crate::codec::HEADER_LEN + 8..encoded[2].len()).step_by(29) {
        let mut blocks = encoded.clone();
        blocks[2][flip] ^= 0x20;
        crate::codec::block::reseal(&mut blocks[2]);
        let checked: std::result::Result<Vec<u64>, _> =
            BlockView::parse(&blocks[2]).unwrap().iter(&code).collect();
        let blocks = blocks.into_iter().map(Arc::from).collect();
        let codes = Arc::new(Codebook::from_codes([(0, code.clone())]));
        let table = TableState::new(0, keys.clone(), blocks, codes);
        for round in 0..3 {
            let mut got = Vec::new();
            let result = table.scan_near(table.probe_start(lo, hi), lo, hi, lo, 64, |v, _| {
                got.push(v);
                true
            });
            match &checked {
                Err(_) => assert!(result.is_err(), "flip {flip} round {round}: no error"),
                Ok(values) => {
                    result.unwrap();
                    got.sort_unstable();
                    got.dedup();
                    let mut want: Vec<u64> = values.iter().chain(&later).copied().collect();
                    want.sort_unstable();
                    want.dedup();
                    assert_eq!(got, want, "flip {flip} round {round}");
                }
            }
        }
        errors += usize::from(checked.is_err());
    }
    assert!(errors > 3, "too few flips the checked decoder rejects");
}

/// A block's slot stays within one cache line: a probe reads it with one
/// miss (a wider packed form or slot would add a second).
/// A table read whole (as at open) packs its blocks past the heap's share
/// into chunks, and answers every probe as brute force.
#[test]
fn a_table_read_into_chunks_answers_as_brute_force() {
    let fps = values(400_000, 13);
    let (code, encoded, keys) = encoded(&fps);
    let codes = Arc::new(Codebook::from_codes([(0, code)]));
    let mut loader = Loader::new(0, Arc::clone(&codes));
    for (key, bytes) in keys.iter().zip(&encoded) {
        loader.push(*key, bytes);
    }
    let table = loader.finish();
    let chunked = table
        .blocks
        .iter()
        .filter(|b| matches!(b.held.get(), Some(Held::Packed(p)) if p.in_chunk()))
        .count();
    assert!(
        3 * chunked > table.blocks.len(),
        "{chunked} of {}",
        table.blocks.len()
    );
    assert_eq!(scanned(&table, 0, u64::MAX), fps);
    let mut x = 17u64;
    for i in 0..2000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        let lo = fps[(x >> 33) as usize % fps.len()].wrapping_sub((x >> 7) % 4);
        let hi = lo.saturating_add([0u64, 1, 1 << 30, 1 << 44][i % 4]);
        let expect: Vec<u64> = fps
            .iter()
            .copied()
            .filter(|&v| v >= lo && v <= hi)
            .collect();
        assert_eq!(scanned(&table, lo, hi), expect, "probe {lo:x}..={hi:x}");
    }
}

#[test]
fn a_slot_fits_a_cache_line() {
    assert!(std::mem::size_of::<super::state::Slot>() <= 64);
}

/// A filtered table answers `contains` as the table without its filter,
/// for its values, their neighbours and random others.
#[test]
fn a_filtered_table_holds_what_it_held() {
    let fps = values(20_000, 11);
    let (code, encoded, keys) = encoded(&fps);
    let blocks = encoded.into_iter().map(Arc::from).collect();
    let table = TableState::new(0, keys, blocks, Arc::new(Codebook::from_codes([(0, code)])));
    let filtered = table.clone().filtered();
    assert!(filtered.filter.is_some());
    assert!(filtered.memory_bytes() > table.memory_bytes());
    let mut x = 5u64;
    let others = (0..20_000).map(|_| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        x
    });
    let neighbours = fps.iter().flat_map(|&v| [v.wrapping_add(1), v ^ 1 << 40]);
    for v in fps.iter().copied().chain(neighbours).chain(others) {
        assert_eq!(
            filtered.contains(v).unwrap(),
            table.contains(v).unwrap(),
            "{v:x}"
        );
    }
}
