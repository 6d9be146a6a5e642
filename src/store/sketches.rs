//! Similarity sketches kept beside `(fingerprint, id)` pairs: reading one,
//! re-checking a query's candidates with them, and verifying them.
//!
//! A pair's sketch is written in the batch that stores the pair and
//! removed in the batch that removes it (see `write.rs`), so a sketch
//! record exists only for a stored pair; merges and compaction never touch
//! them.

use super::shared::Shared;
use super::state::State;
use crate::error::{Error, Location, Result};
use crate::format::{keys, sketches};
use crate::simhash::Sketch;

/// A stored document whose sketch passed the re-check.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Similar {
    /// Its fingerprint.
    pub fingerprint: u64,
    /// Its document id.
    pub id: u64,
    /// The Hamming distance of its fingerprint from the query's.
    pub distance: u32,
    /// The Jaccard similarity its sketch and the query's estimate.
    pub similarity: f64,
}

/// A stored pair with its sketch, within some distance of a query.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Sketched {
    /// Its fingerprint.
    pub fingerprint: u64,
    /// Its document id.
    pub id: u64,
    /// The Hamming distance of its fingerprint from the query's.
    pub distance: u32,
    /// Its sketch.
    pub sketch: Sketch,
}

fn bad(what: String) -> Error {
    Error::corrupt(
        Location::Record {
            family: keys::SKETCHES_FAMILY,
        },
        what,
    )
}

/// The sketch stored with `(fp, id)`, if the store keeps sketches and the
/// pair has one.
pub(crate) fn sketch(shared: &Shared, fp: u64, id: u64) -> Result<Option<Sketch>> {
    let mut out = Vec::with_capacity(1);
    sketches(shared, &[(fp, id)], &mut out)?;
    Ok(out[0])
}

/// The sketches stored with `pairs` (`None` for a pair without one), read
/// together: into `out`, in the order of `pairs`. Those the store's
/// [`SketchCache`](super::sketch_cache::SketchCache) holds are not read.
pub(crate) fn sketches(
    shared: &Shared,
    pairs: &[(u64, u64)],
    out: &mut Vec<Option<Sketch>>,
) -> Result<()> {
    out.clear();
    out.resize(pairs.len(), None);
    if !shared.sketches || pairs.is_empty() {
        return Ok(());
    }
    let generation = shared.sketch_cache.look_up(pairs, out);
    // The others' keys in increasing order, as the batched read takes them.
    let mut order: Vec<usize> = (0..pairs.len()).filter(|&i| out[i].is_none()).collect();
    if order.is_empty() {
        return Ok(());
    }
    order.sort_unstable_by_key(|&i| pairs[i]);
    let keys: Vec<[u8; 16]> = order
        .iter()
        .map(|&i| keys::id_pair(pairs[i].0, pairs[i].1))
        .collect();
    let db = &shared.db;
    db.get_sorted(db.family(keys::SKETCHES_FAMILY)?, &keys, |at, value| {
        let (fp, id) = pairs[order[at]];
        if let Some(value) = value {
            let bytes = sketches::decode_sketch(fp, id, value).map_err(bad)?;
            out[order[at]] = Some(Sketch::from_bytes(bytes));
        }
        Ok(())
    })?;
    let read = order.iter().filter_map(|&i| Some((pairs[i], out[i]?)));
    shared.sketch_cache.keep(generation, read);
    Ok(())
}

/// Every stored pair within distance `k` of `fp` that has a sketch, with
/// it, sorted by distance, then fingerprint, then id.
pub(crate) fn query_sketched(shared: &Shared, fp: u64, k: u32) -> Result<Vec<Sketched>> {
    let matches = super::query::query(shared, fp, k)?;
    let pairs: Vec<(u64, u64)> = matches
        .iter()
        .flat_map(|m| m.ids.iter().map(|&id| (m.fingerprint, id)))
        .collect();
    // Read in one batch.
    let mut read = Vec::new();
    sketches(shared, &pairs, &mut read)?;
    let mut read = read.into_iter();
    let mut out = Vec::new();
    for m in &matches {
        for &id in &m.ids {
            if let Some(sketch) = read.next().flatten() {
                out.push(Sketched {
                    fingerprint: m.fingerprint,
                    id,
                    distance: m.distance,
                    sketch,
                });
            }
        }
    }
    Ok(out)
}

/// The pairs of [`query_sketched`] whose sketch passes [`Sketch::recheck`]
/// against `query` at `threshold` among all of them, most similar first
/// (then nearest, then smallest id).
pub(crate) fn query_similar(
    shared: &Shared,
    fp: u64,
    k: u32,
    query: &Sketch,
    threshold: f64,
) -> Result<Vec<Similar>> {
    if !(0.0..=1.0).contains(&threshold) {
        return Err(Error::InvalidArgument(format!(
            "similarity threshold {threshold} is not between 0 and 1"
        )));
    }
    let candidates = query_sketched(shared, fp, k)?;
    let mut out: Vec<Similar> = candidates
        .iter()
        .filter_map(|c| {
            let similarity = c.sketch.recheck(query, threshold, candidates.len())?;
            Some(Similar {
                fingerprint: c.fingerprint,
                id: c.id,
                distance: c.distance,
                similarity,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.similarity
            .total_cmp(&a.similarity)
            .then(a.distance.cmp(&b.distance))
            .then(a.id.cmp(&b.id))
    });
    Ok(out)
}

/// Checks every sketch record: its key names a pair, its value passes its
/// checksum, and the pair is stored. Returns how many there are.
pub(crate) fn check(shared: &Shared, state: &State, note: &mut impl FnMut(String)) -> Result<u64> {
    if !shared.sketches {
        return Ok(0);
    }
    let db = &shared.db;
    let mut count = 0u64;
    let mut ids = Vec::new();
    let mut last_fp = None;
    db.scan(db.family(keys::SKETCHES_FAMILY)?, &[], |k, v| {
        count += 1;
        let Some((fp, id)) = keys::parse_id_pair(k) else {
            note(format!("sketches: key of {} bytes", k.len()));
            return Ok(true);
        };
        if let Err(e) = sketches::decode_sketch(fp, id, v) {
            note(format!("sketches: {e}"));
            return Ok(true);
        }
        if last_fp != Some(fp) {
            if let Err(e) = state.ids_of(&shared.plan, fp, &mut ids) {
                note(format!("sketches: ids of {fp:016x}: {e}"));
                ids.clear();
            }
            last_fp = Some(fp);
        }
        if ids.binary_search(&id).is_err() {
            note(format!(
                "sketches: a sketch for ({fp:016x}, {id}), which is not stored"
            ));
        }
        Ok(true)
    })?;
    Ok(count)
}
