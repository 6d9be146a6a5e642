//! Choosing the number of blocks `r` (and so the table count `C(r, k)`)
//! from the expected collection size (Manku et al. §3.1.2).
//!
//! A probe in a table with prefix `p` over `N` fingerprints decodes, on
//! average, half a compressed block to reach its run and then about
//! `N / 2^p` candidates. More blocks mean wider prefixes (fewer candidates)
//! but more tables (more probes and more space). The planner estimates the
//! per-query decoding work of each `r` and takes the fewest tables whose
//! work is within [`SLACK`] of the cheapest plan.

use std::fmt;

/// The most tables a plan may have.
pub const MAX_TABLES: u64 = 128;

/// How much slower than the fastest plan a smaller plan may be and still
/// be preferred for its space saving.
pub const SLACK: f64 = 1.5;

/// Fixed cost of one table probe (index search, cache misses), counted in
/// decoded-fingerprint equivalents.
const PROBE_COST: f64 = 32.0;

/// Why no plan could be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanError {
    /// The requested maximum distance exceeds what plans support.
    DistanceUnsupported {
        /// The distance asked for.
        asked: u32,
        /// The largest supported distance.
        supported: u8,
    },
    /// No split into `r` blocks yields the requested table count.
    NoSuchTableCount {
        /// The table count asked for.
        tables: u32,
        /// The counts that exist for this distance.
        valid: Vec<u64>,
    },
    /// `r` must exceed `k` and be at most 64.
    BadBlockCount {
        /// The block count.
        blocks: u8,
        /// The maximum distance.
        max_distance: u8,
    },
    /// The plan would need more tables than supported.
    TooManyTables {
        /// Tables the plan would need.
        tables: u64,
        /// The supported maximum.
        max: u64,
    },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DistanceUnsupported { asked, supported } => {
                write!(f, "maximum distance {asked} is not supported (at most {supported})")
            }
            Self::NoSuchTableCount { tables, valid } => write!(
                f,
                "no table plan has exactly {tables} tables for this distance; possible counts: {valid:?}"
            ),
            Self::BadBlockCount { blocks, max_distance } => write!(
                f,
                "cannot split 64 bits into {blocks} blocks for maximum distance {max_distance}"
            ),
            Self::TooManyTables { tables, max } => {
                write!(f, "plan needs {tables} tables, more than the supported {max}")
            }
        }
    }
}

impl std::error::Error for PlanError {}

/// `C(n, k)`, saturating.
pub(crate) fn binomial(n: u64, k: u64) -> u64 {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut acc: u128 = 1;
    for i in 0..k {
        acc = acc * u128::from(n - i) / u128::from(i + 1);
        if acc > u128::from(u64::MAX) {
            return u64::MAX;
        }
    }
    acc as u64
}

/// Widths of `r` blocks covering 64 bits, as even as possible, wider first.
pub(crate) fn block_widths(r: u8) -> Vec<u8> {
    let base = 64 / r;
    let extra = 64 % r;
    (0..r).map(|j| base + u8::from(j < extra)).collect()
}

/// All `m`-element subsets of `0..n`, in lexicographic order.
pub(crate) fn combinations(n: usize, m: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut current: Vec<usize> = (0..m).collect();
    if m > n {
        return out;
    }
    loop {
        out.push(current.clone());
        // Find the rightmost element that can still move right.
        let Some(i) = (0..m).rev().find(|&i| current[i] < n - m + i) else {
            return out;
        };
        current[i] += 1;
        for j in i + 1..m {
            current[j] = current[j - 1] + 1;
        }
    }
}

/// A small set of tables such that every way of changing `d ≤ k` blocks
/// leaves the leading blocks of at least one chosen table intact (greedy
/// set cover; ties go to the wider prefix).
pub(crate) fn covering_tables(
    r: usize,
    k: usize,
    d: usize,
    tables: &[super::TableSpec],
) -> Vec<usize> {
    let leads: Vec<u64> = combinations(r, r - k)
        .iter()
        .map(|c| c.iter().fold(0u64, |m, &j| m | (1u64 << j)))
        .collect();
    let mut uncovered: Vec<u64> = combinations(r, d)
        .iter()
        .map(|c| c.iter().fold(0u64, |m, &j| m | (1u64 << j)))
        .collect();
    let mut chosen = Vec::new();
    while !uncovered.is_empty() {
        let best = (0..leads.len())
            .filter(|i| !chosen.contains(i))
            .max_by_key(|&i| {
                let covers = uncovered.iter().filter(|&&s| s & leads[i] == 0).count();
                (
                    covers,
                    tables.get(i).map_or(0, |t| t.prefix_bits),
                    std::cmp::Reverse(i),
                )
            });
        let Some(best) = best else { break };
        uncovered.retain(|&s| s & leads[best] != 0);
        chosen.push(best);
    }
    chosen.sort_unstable();
    chosen
}

/// The table counts that exist for maximum distance `k`: 1 (the one-table
/// plan) and the pigeonhole plans' `C(r, k)`.
pub fn valid_table_counts(max_distance: u8) -> Vec<u64> {
    if max_distance == 0 {
        return vec![1];
    }
    std::iter::once(1)
        .chain(
            (u64::from(max_distance) + 1..=64)
                .map(|r| binomial(r, max_distance.into()))
                .take_while(|&t| t <= MAX_TABLES),
        )
        .collect()
}

/// Picks the block count `r` for maximum distance `k`: the `r` giving
/// exactly `tables` tables when that is asked for, otherwise the cheapest
/// plan for `expected_size` fingerprints as described in the module docs.
pub fn choose_blocks(
    max_distance: u8,
    expected_size: u64,
    tables: Option<u32>,
) -> Result<u8, PlanError> {
    let k = max_distance;
    if k > super::MAX_SUPPORTED_DISTANCE {
        return Err(PlanError::DistanceUnsupported {
            asked: u32::from(k),
            supported: super::MAX_SUPPORTED_DISTANCE,
        });
    }
    // One table at k > 0: the one-table plan (`Plan::one_table`).
    if k > 0 && tables == Some(1) {
        return Ok(1);
    }
    let candidates: Vec<u8> = if k == 0 {
        vec![1]
    } else {
        (k + 1..=64)
            .take_while(|&r| binomial(r.into(), k.into()) <= MAX_TABLES)
            .collect()
    };
    if let Some(t) = tables {
        return candidates
            .iter()
            .copied()
            .find(|&r| binomial(r.into(), k.into()) == u64::from(t))
            .ok_or_else(|| PlanError::NoSuchTableCount {
                tables: t,
                valid: valid_table_counts(k),
            });
    }
    let n = expected_size.max(2) as f64;
    let bits_per_fp = (64.0 - n.log2()).max(1.0) + 2.5;
    let per_block = (8.0 * 1000.0 / bits_per_fp).max(1.0);
    let cost = |r: u8| {
        let widths = block_widths(r);
        let mut sorted = widths.clone();
        sorted.sort_unstable();
        let min_prefix: u32 = sorted
            .iter()
            .take(usize::from(r - k))
            .map(|&w| u32::from(w))
            .sum();
        let candidates = n / 2f64.powi(min_prefix as i32);
        binomial(r.into(), k.into()) as f64 * (PROBE_COST + per_block / 2.0 + candidates)
    };
    let best = candidates
        .iter()
        .map(|&r| cost(r))
        .fold(f64::INFINITY, f64::min);
    candidates
        .iter()
        .copied()
        .find(|&r| cost(r) <= best * SLACK)
        .ok_or(PlanError::BadBlockCount {
            blocks: 0,
            max_distance: k,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomials_and_widths() {
        assert_eq!(binomial(6, 3), 20);
        assert_eq!(binomial(5, 2), 10);
        assert_eq!(binomial(3, 5), 0);
        assert_eq!(block_widths(6), vec![11, 11, 11, 11, 10, 10]);
        assert_eq!(
            block_widths(5).iter().map(|&w| u32::from(w)).sum::<u32>(),
            64
        );
        assert_eq!(combinations(4, 2).len(), 6);
        assert_eq!(combinations(3, 0), vec![Vec::<usize>::new()]);
    }

    #[test]
    fn planner_grows_tables_with_size() {
        assert_eq!(choose_blocks(3, 1_000, None), Ok(4));
        assert_eq!(choose_blocks(3, 10_000_000, None), Ok(4));
        assert_eq!(choose_blocks(3, 100_000_000, None), Ok(5));
        assert_eq!(choose_blocks(0, 100_000_000, None), Ok(1));
        assert_eq!(choose_blocks(3, 10, Some(20)), Ok(6));
        assert!(matches!(
            choose_blocks(3, 10, Some(7)),
            Err(PlanError::NoSuchTableCount { .. })
        ));
        assert_eq!(valid_table_counts(3), vec![1, 4, 10, 20, 35, 56, 84, 120]);
        assert_eq!(choose_blocks(3, 10, Some(1)), Ok(1));
    }
}
