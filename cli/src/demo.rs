//! `simstore demo`: the main job end to end on an embedded synthetic
//! collection, in a temporary directory.

use std::io::Write;
use std::time::Instant;

use simstore::{Durability, Op, Options, Store};

use super::rng::Rng;
use super::stream::Failure;

/// A crawl-like collection: mostly distinct pages, a share of
/// near-duplicates (1–3 bits from an earlier page), exact duplicates and a
/// spike (0.5%) of identical "empty page" fingerprints.
fn collection(size: usize, rng: &mut Rng) -> Vec<u64> {
    let mut fps: Vec<u64> = Vec::with_capacity(size);
    for _ in 0..size {
        let roll = rng.below(1000);
        let fp = if fps.is_empty() || roll < 700 {
            rng.next_u64()
        } else if roll < 900 {
            let base = fps[rng.below(fps.len() as u64) as usize];
            let bits = 1 + rng.below(3) as u32;
            rng.flip(base, bits)
        } else if roll < 995 {
            fps[rng.below(fps.len() as u64) as usize]
        } else {
            0x0000_0000_0000_0000
        };
        fps.push(fp);
    }
    fps
}

pub fn run(size: usize, queries: usize, out: &mut impl Write) -> Result<(), Failure> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("store");
    let mut rng = Rng(2007);
    writeln!(
        out,
        "simstore demo: {size} fingerprints, {queries} queries, store in {}",
        path.display()
    )?;
    let store = Store::create(
        &path,
        &Options::new()
            .expected_size(size as u64)
            .durability(Durability::Buffered)
            .manual_compaction(true),
    )?;
    let plan = store.plan();
    let prefixes: Vec<u8> = plan.tables().iter().map(|t| t.prefix_bits).collect();
    writeln!(
        out,
        "plan: k = {}, {} tables, prefixes {prefixes:?}",
        plan.max_distance(),
        prefixes.len()
    )?;

    let docs = collection(size, &mut rng);
    let started = Instant::now();
    for (chunk_no, chunk) in docs.chunks(10_000).enumerate() {
        let ops = chunk
            .iter()
            .enumerate()
            .map(|(i, &fp)| Op::Insert {
                fingerprint: fp,
                id: Some((chunk_no * 10_000 + i) as u64),
            })
            .collect();
        store.apply(ops)?;
    }
    let ingest = started.elapsed();
    let started = Instant::now();
    store.compact()?;
    let compaction = started.elapsed();
    let stats = store.stats();
    writeln!(
        out,
        "ingested {} documents in {:.2?} ({:.0}/s, buffered); compacted in {:.2?}",
        size,
        ingest,
        size as f64 / ingest.as_secs_f64(),
        compaction
    )?;
    writeln!(
        out,
        "stored {} distinct fingerprints with {} ids in {} blocks; {:.2} bytes per fingerprint per table",
        stats.fingerprints,
        stats.ids,
        stats.blocks,
        stats.table_bytes as f64 / (stats.fingerprints.max(1) * stats.tables as u64) as f64
    )?;

    // Queries: half near-duplicates of stored pages, half new pages.
    let qs: Vec<u64> = (0..queries)
        .map(|i| {
            if i % 2 == 0 {
                let base = docs[rng.below(docs.len() as u64) as usize];
                let bits = rng.below(4) as u32;
                rng.flip(base, bits)
            } else {
                rng.next_u64()
            }
        })
        .collect();
    let k = store.max_distance();
    let started = Instant::now();
    let mut with_match = 0usize;
    let mut total_matches = 0usize;
    for &q in &qs {
        let m = store.query(q, k)?;
        with_match += usize::from(!m.is_empty());
        total_matches += m.len();
    }
    let all = started.elapsed();
    let started = Instant::now();
    let mut first_hits = 0usize;
    for &q in &qs {
        first_hits += usize::from(store.query_first(q, k)?.is_some());
    }
    let first = started.elapsed();
    let started = Instant::now();
    let batch = store.query_many(&qs, k)?;
    let batched = started.elapsed();
    let rate = |d: std::time::Duration| queries as f64 / d.as_secs_f64().max(1e-9);
    writeln!(
        out,
        "queries at k = {k}: {with_match} of {queries} found near-duplicates ({total_matches} matches; first-match found {first_hits})"
    )?;
    writeln!(
        out,
        "  all matches {:.0}/s ({:.1} us each), first match {:.0}/s, batch {:.0}/s",
        rate(all),
        all.as_secs_f64() * 1e6 / queries.max(1) as f64,
        rate(first),
        rate(batched)
    )?;

    // Check a sample against a brute-force scan of the stored set.
    let mut distinct = docs.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let sample = qs.len().min(200);
    let started = Instant::now();
    let mut agree = 0;
    for (i, &q) in qs.iter().take(sample).enumerate() {
        let mut expect: Vec<(u32, u64)> = distinct
            .iter()
            .map(|&f| ((f ^ q).count_ones(), f))
            .filter(|&(d, _)| d <= k)
            .collect();
        expect.sort_unstable();
        let got: Vec<(u32, u64)> = batch[i]
            .iter()
            .map(|m| (m.distance, m.fingerprint))
            .collect();
        agree += usize::from(got == expect);
    }
    let scan = started.elapsed();
    writeln!(
        out,
        "brute-force check: {agree} of {sample} sampled queries agree exactly; the scan took {:.1} us per query ({:.0}x slower)",
        scan.as_secs_f64() * 1e6 / sample.max(1) as f64,
        (scan.as_secs_f64() / sample.max(1) as f64) / (all.as_secs_f64() / queries.max(1) as f64)
    )?;
    if let Some((i, m)) = batch.iter().enumerate().find(|(_, m)| m.len() > 1) {
        writeln!(out, "example: query {:016x} matched", qs[i])?;
        for x in m.iter().take(5) {
            writeln!(
                out,
                "  {:016x} at distance {} (ids {:?})",
                x.fingerprint,
                x.distance,
                &x.ids[..x.ids.len().min(5)]
            )?;
        }
    }
    if agree != sample {
        return Err(Failure::Io(std::io::Error::other(
            "demo results disagree with brute force",
        )));
    }
    Ok(())
}
