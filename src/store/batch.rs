//! Batches of queries: answered query by query (their probes interleaved,
//! as [`query_many_into`] does) when small
//! next to the tables,
//! by sorted passes over every table when large, spread over the handle's
//! query threads when there are enough of them.

use super::answers::{Answers, Candidates};
use super::listing::Listing;
use super::parallel::{map_scattered, map_shares, map_shares_mut, threads_for};
use super::query::{check_distance, finish_all, finish_into, query_many_into, Match};
use super::shared::Shared;
use super::state::State;
use crate::error::Result;

/// Queries of a batch answered by sorted passes under one read-lock
/// acquisition (per thread's share, when a chunk is spread over threads),
/// so that a long batch holds writers off for at most a chunk's passes
/// (queries answered one by one take the lock a group at a time). Each
/// query sees one state; queries of different shares, chunks or groups
/// may see different ones.
const BATCH_CHUNK: usize = 1 << 20;

/// Answers many queries, visiting each table's blocks in order once per
/// chunk of queries; results come back in input order. Large chunks are
/// spread over up to `batch_threads` threads: with every table held in
/// memory each thread takes a share of the queries through every table;
/// with tables on disk each takes whole tables (so every block is still
/// read and decoded once per chunk), then each finishes a share of the
/// queries. Ids are listed as `listing` says. With `first`, each query's
/// answer is at most one match: the nearest a sorted pass found, or the
/// first a query answered on its own found (see [`query_many_into`]).
pub(crate) fn query_batch(
    shared: &Shared,
    fps: &[u64],
    k: u32,
    first: bool,
    listing: Listing,
) -> Result<Vec<Vec<Match>>> {
    let plan_probe = check_distance(shared, k)?;
    let ask = Ask { k, first, listing };
    let mut results = Vec::with_capacity(fps.len());
    for chunk in fps.chunks(BATCH_CHUNK) {
        let threads = threads_for(chunk.len(), shared.query_threads);
        // Sorting pays off when the chunk is large next to the tables:
        // each block is then decoded once for many queries. A smaller
        // chunk would decode whole blocks for a query or two each, so its
        // queries are answered one by one.
        // Every level's tables are probed, as listed by the state each
        // share reads (see `State::probes`).
        let (blocks, in_memory) = {
            let state = shared.state.read();
            let probe = state.probes(plan_probe);
            (
                probe.first().map_or(0, |&t| state.tables[t].keys().len()),
                probe.iter().all(|&t| state.tables[t].in_memory()),
            )
        };
        // A one-table store's queries flip header bits: one by one. So
        // are those of a store whose fingerprints are all pending (its
        // tables have no block to pass over).
        let few = blocks == 0 || chunk.len() < SORTED_MIN_PER_BLOCK * blocks;
        if few || shared.plan.header_bits().is_some() {
            results.extend(query_each(shared, chunk, threads, ask)?);
            continue;
        }
        if threads == 1 || in_memory {
            results.extend(sorted_by_queries(shared, plan_probe, chunk, threads, ask)?);
            continue;
        }
        // Tables on disk: each thread takes whole tables.
        let state = shared.readable_state()?;
        let probe = state.probes(plan_probe);
        let probe = &probe[..];
        let threads = threads.min(probe.len());
        let mut found: Vec<Vec<(u64, u32)>> = {
            let state = &*state;
            let mut parts = map_shares(probe, threads, |tables| {
                probe_tables_dispatch(shared, state, tables, chunk, k)
            })
            .into_iter()
            .collect::<Result<Vec<_>>>()?;
            let mut found = parts.pop().unwrap_or_default();
            for part in parts {
                for (f, p) in found.iter_mut().zip(part) {
                    f.extend(p);
                }
            }
            found
        };
        found.resize_with(chunk.len(), Vec::new);
        let finished = {
            let state = &*state;
            map_shares_mut(&mut found, threads, |part| {
                let part = part.iter_mut().map(std::mem::take).collect();
                finish_all(shared, state, part, first, listing)
            })
            .into_iter()
            .collect::<Result<Vec<_>>>()?
        };
        drop(state);
        results.extend(finished.into_iter().flatten());
    }
    Ok(results)
}

/// Answers `chunk` by sorted passes over every table, its queries split
/// into up to `threads` shares, each answered by one thread from start
/// to finish. For tables held in memory, where a pass reads packed
/// blocks and no stored block is decoded, this leaves no serial step
/// between the threads (splitting the tables instead merges every
/// query's candidates on one thread).
///
/// A query's share is picked by a hash of its fingerprint, so queries
/// that cost more (those with matches, to scan and give ids) are spread
/// evenly however the input is ordered. A share's candidates are found
/// and finished (sorted, ids attached as `ask.listing` lists them; with
/// `ask.first`, the nearest only) under one read-lock acquisition.
fn sorted_by_queries(
    shared: &Shared,
    probe: &[usize],
    chunk: &[u64],
    threads: usize,
    ask: Ask,
) -> Result<Vec<Vec<Match>>> {
    map_scattered(
        chunk,
        threads,
        |&fp| fp,
        |part| {
            let state = shared.readable_state()?;
            let mut answers = Answers::new();
            let found = probe_tables_dispatch(shared, &state, &state.probes(probe), part, ask.k)?;
            answers.scratch.found = Candidates::from_nested(found);
            finish_into(shared, &state, ask.listing, ask.first, &mut answers)?;
            Ok(answers.to_nested())
        },
    )
}

/// Queries per block of a table below which a batch chunk is answered
/// query by query rather than by one sorted pass over the tables.
const SORTED_MIN_PER_BLOCK: usize = 2;

/// Answers `chunk` query by query, spread over `threads` threads, each
/// taking the read lock for one group of queries at a time (as
/// [`query_many_into`] does), so that writers wait for a group, not for a
/// share.
fn query_each(shared: &Shared, chunk: &[u64], threads: usize, ask: Ask) -> Result<Vec<Vec<Match>>> {
    map_scattered(
        chunk,
        threads,
        |&fp| fp,
        |part| {
            let mut answers = Answers::new();
            query_many_into(shared, part, ask.k, ask.first, ask.listing, &mut answers)?;
            Ok(answers.to_nested())
        },
    )
}

/// What a batch asks of each of its queries.
#[derive(Clone, Copy)]
struct Ask {
    k: u32,
    /// One match at most.
    first: bool,
    listing: Listing,
}

/// [`probe_tables`], compiled for the processor's bit instructions when
/// it has them (as `query::collect`).
fn probe_tables_dispatch(
    shared: &Shared,
    state: &State,
    tables: &[usize],
    chunk: &[u64],
    k: u32,
) -> Result<Vec<Vec<(u64, u32)>>> {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::cpu::fast_bits() {
        // SAFETY: `fast_bits` checked that this processor has every
        // feature `probe_tables_fast_bits` is compiled for.
        return unsafe { probe_tables_fast_bits(shared, state, tables, chunk, k) };
    }
    probe_tables(shared, state, tables, chunk, k)
}

/// [`probe_tables`] compiled for POPCNT, BMI1, BMI2 and LZCNT.
///
/// # Safety
/// The processor must have those features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt,bmi1,bmi2,lzcnt")]
unsafe fn probe_tables_fast_bits(
    shared: &Shared,
    state: &State,
    tables: &[usize],
    chunk: &[u64],
    k: u32,
) -> Result<Vec<Vec<(u64, u32)>>> {
    probe_tables(shared, state, tables, chunk, k)
}

/// Candidates for each query of `chunk` from the given tables (and their
/// pending fingerprints), in chunk order.
///
/// The hits of every table are gathered in one flat list and handed out
/// at the end, one allocation per query with hits (a list per query
/// filled as the passes find them cost an allocation and a cache miss
/// per hit).
#[inline(always)]
fn probe_tables(
    shared: &Shared,
    state: &State,
    tables: &[usize],
    chunk: &[u64],
    k: u32,
) -> Result<Vec<Vec<(u64, u32)>>> {
    // (query, fingerprint, distance); about one a query with a match in
    // each table that finds it.
    let mut hits: Vec<(u32, u64, u32)> = Vec::with_capacity(chunk.len());
    // Each table's permuted queries and their ranges, in the table's
    // order (buffers reused from table to table).
    let mut queries: Vec<u64> = Vec::with_capacity(chunk.len());
    let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(chunk.len());
    for &t in tables {
        let spec = &shared.plan.tables()[t % state.per_level];
        let order = by_prefix(spec, chunk);
        queries.clear();
        queries.extend(
            order
                .iter()
                .map(|&i| spec.permutation.apply(chunk[i as usize])),
        );
        ranges.clear();
        ranges.extend(queries.iter().map(|&q| spec.prefix_range(q)));
        state.tables[t].scan_near_sorted(&ranges, &queries, k, |r, p, d| {
            let x = spec.permutation.invert(p);
            if !state.tombstones.contains(&x) {
                hits.push((order[r], x, d));
            }
        })?;
        // Pending fingerprints and the upper levels' (see `State::upper`)
        // are probed with level 0's tables.
        if t >= state.per_level {
            continue;
        }
        if state.pending.len() > 0 {
            for (r, (&q, &i)) in queries.iter().zip(&order).enumerate() {
                state.pending.near(t, ranges[r], q, k, |p, d| {
                    hits.push((i, spec.permutation.invert(p), d));
                    true
                });
            }
        }
        if let Some(upper) = state.upper.as_deref().filter(|u| u.len() > 0) {
            for (r, (&q, &i)) in queries.iter().zip(&order).enumerate() {
                upper.near(t, ranges[r], q, k, |p, d| {
                    let x = spec.permutation.invert(p);
                    if !state.tombstones.contains(&x) {
                        hits.push((i, x, d));
                    }
                    true
                });
            }
        }
    }
    let mut counts = vec![0usize; chunk.len()];
    for &(i, ..) in &hits {
        counts[i as usize] += 1;
    }
    let mut found: Vec<Vec<(u64, u32)>> = counts.into_iter().map(Vec::with_capacity).collect();
    for (i, x, d) in hits {
        found[i as usize].push((x, d));
    }
    Ok(found)
}

/// The indexes of `chunk` (at most 2^32 queries) in the order of their
/// permuted prefixes under `spec`: the order a sorted pass visits their
/// runs in. The prefix and the index are packed in one key (the index in
/// the bits below the prefix) and sorted by a radix pass
/// ([`sorted_keys`](super::sort::sorted_keys)) when both fit in 64 bits,
/// by comparison otherwise.
fn by_prefix(spec: &crate::plan::TableSpec, chunk: &[u64]) -> Vec<u32> {
    debug_assert!(u32::try_from(chunk.len()).is_ok());
    let index_bits = usize::BITS - chunk.len().leading_zeros();
    if u32::from(spec.prefix_bits) + index_bits <= 64 {
        // The permuted value with the bits below its prefix replaced by
        // the index.
        let indexes: Vec<u32> = (0..chunk.len() as u32).collect();
        let key = |&i: &u32| {
            spec.prefix_range(spec.permutation.apply(chunk[i as usize]))
                .0
                | u64::from(i)
        };
        let mask = (1u64 << index_bits) - 1;
        return super::sort::sorted_keys(&indexes, key)
            .into_iter()
            .map(|key| (key & mask) as u32)
            .collect();
    }
    let mut order: Vec<(u64, u32)> = chunk
        .iter()
        .enumerate()
        .map(|(i, &fp)| (spec.permutation.apply(fp), i as u32))
        .collect();
    order.sort_unstable();
    order.into_iter().map(|(_, i)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;
    use crate::test_rng::TestRng;

    /// Both orders (the packed radix keys, and the comparison sort when
    /// prefix and index do not fit in one word) visit every query once,
    /// by increasing permuted prefix.
    #[test]
    fn queries_come_in_the_order_of_their_prefixes() {
        let mut rng = TestRng::new(5);
        for (k, r) in [(0u8, 1u8), (1, 2), (3, 4), (3, 6), (4, 8)] {
            let plan = Plan::new(k, r).unwrap();
            for n in [0usize, 1, 7, 1000, 100_000] {
                // Repeats and near neighbours, as batches have.
                let chunk: Vec<u64> = (0..n)
                    .map(|i| {
                        if i % 5 == 4 {
                            rng.next_u64() >> 20
                        } else {
                            rng.next_u64()
                        }
                    })
                    .collect();
                for spec in plan.tables() {
                    let order = by_prefix(spec, &chunk);
                    let mut seen = order.clone();
                    seen.sort_unstable();
                    assert!(seen.iter().copied().eq(0..n as u32), "plan {k}/{r} n {n}");
                    let prefixes: Vec<u64> = order
                        .iter()
                        .map(|&i| {
                            spec.prefix_range(spec.permutation.apply(chunk[i as usize]))
                                .0
                        })
                        .collect();
                    assert!(
                        prefixes.windows(2).all(|w| w[0] <= w[1]),
                        "plan {k}/{r} n {n}"
                    );
                }
            }
        }
    }
}
