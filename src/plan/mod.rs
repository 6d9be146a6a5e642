//! The table plan: which permutations the store keeps and how wide each
//! table's matching prefix is (Manku, Jain, Das Sarma, WWW 2007, §3.1).
//!
//! The 64 bits are split into `r` blocks. Two fingerprints within Hamming
//! distance `k < r` differ in at most `k` blocks, so at least `r − k` blocks
//! agree exactly. Each table moves one choice of `r − k` blocks to the front;
//! its prefix `p` is their total width. A query probes, in each table, the
//! run of permuted fingerprints that share its top `p` bits; one of them
//! must hold every answer.

mod permutation;
mod planner;
pub mod vosh;

pub use permutation::{NotAPermutation, Permutation};
pub use planner::{choose_blocks, valid_table_counts, PlanError};

/// The largest maximum distance a store can be created with.
pub const MAX_SUPPORTED_DISTANCE: u8 = 8;

/// The header width of a one-table plan for `expected_size` fingerprints:
/// `log2 N` rounded (Sood & Loguinov's `t = d`, so that a header's run
/// holds about one fingerprint), between 8 and 40.
pub fn header_width(expected_size: u64) -> u8 {
    (expected_size.max(2) as f64)
        .log2()
        .round()
        .clamp(8.0, 40.0) as u8
}

/// One permuted table: its permutation and matching-prefix width.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    /// Moves the table's leading blocks to the top bits.
    pub permutation: Permutation,
    /// How many top bits of a permuted query must match exactly.
    pub prefix_bits: u8,
}

impl TableSpec {
    /// The inclusive range of permuted fingerprints sharing `permuted`'s
    /// top `prefix_bits` bits.
    #[inline]
    pub fn prefix_range(&self, permuted: u64) -> (u64, u64) {
        let low_mask = if self.prefix_bits == 0 {
            u64::MAX
        } else if self.prefix_bits >= 64 {
            0
        } else {
            u64::MAX >> self.prefix_bits
        };
        (permuted & !low_mask, permuted | low_mask)
    }
}

/// A complete table plan for one maximum distance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    max_distance: u8,
    blocks: u8,
    tables: Vec<TableSpec>,
    /// `probe_sets[k']`: the tables a query at distance `k'` must visit.
    probe_sets: Vec<Vec<usize>>,
}

impl Plan {
    /// Builds the pigeonhole plan for maximum distance `k` with `r` blocks
    /// (`C(r, k)` tables).
    pub fn new(max_distance: u8, blocks: u8) -> Result<Self, PlanError> {
        let k = max_distance;
        if k > MAX_SUPPORTED_DISTANCE {
            return Err(PlanError::DistanceUnsupported {
                asked: u32::from(k),
                supported: MAX_SUPPORTED_DISTANCE,
            });
        }
        if blocks <= k || blocks > 64 {
            return Err(PlanError::BadBlockCount {
                blocks,
                max_distance: k,
            });
        }
        let count = planner::binomial(u64::from(blocks), u64::from(k));
        if count > planner::MAX_TABLES {
            return Err(PlanError::TooManyTables {
                tables: count,
                max: planner::MAX_TABLES,
            });
        }
        let widths = planner::block_widths(blocks);
        // Block j covers the bits just below block j−1, block 0 being the top.
        let mut lows = Vec::with_capacity(widths.len());
        let mut top = 64u8;
        for &w in &widths {
            top -= w;
            lows.push(top);
        }
        let lead = usize::from(blocks - k);
        let mut tables = Vec::new();
        for chosen in planner::combinations(usize::from(blocks), lead) {
            let mut order: Vec<(u8, u8)> = chosen.iter().map(|&j| (lows[j], widths[j])).collect();
            let prefix_bits: u8 = order.iter().map(|&(_, w)| w).sum();
            order.extend(
                (0..usize::from(blocks))
                    .filter(|j| !chosen.contains(j))
                    .map(|j| (lows[j], widths[j])),
            );
            let permutation =
                Permutation::from_runs_top_down(&order).map_err(|_| PlanError::BadBlockCount {
                    blocks,
                    max_distance: k,
                })?;
            tables.push(TableSpec {
                permutation,
                prefix_bits,
            });
        }
        let probe_sets = (0..=k)
            .map(|d| {
                planner::covering_tables(
                    usize::from(blocks),
                    usize::from(k),
                    usize::from(d),
                    &tables,
                )
            })
            .collect();
        Ok(Self {
            max_distance: k,
            blocks,
            tables,
            probe_sets,
        })
    }

    /// Plans for `expected_size` fingerprints at maximum distance `k`, or
    /// with exactly `tables` tables when given (see [`choose_blocks`]);
    /// one table at `k > 0` is the one-table plan ([`one_table`](Self::one_table))
    /// with a header of [`header_width`] bits.
    pub fn for_size(
        max_distance: u8,
        expected_size: u64,
        tables: Option<u32>,
    ) -> Result<Self, PlanError> {
        let blocks = choose_blocks(max_distance, expected_size, tables)?;
        if blocks == 1 && max_distance > 0 {
            return Self::one_table(max_distance, header_width(expected_size));
        }
        Self::new(max_distance, blocks)
    }

    /// The one-table plan of probabilistic simhash matching (Sood &
    /// Loguinov, CIKM 2011): a single table sorted on all 64 bits, whose
    /// top `header_bits` bits (the header, 1 to 63) a query probes as they
    /// are and with bits flipped ([`vosh`]). Exact queries flip every set
    /// of at most `k` header bits ([`vosh::exact_count`] probes);
    /// probabilistic ones the likeliest sets only. Recorded as one block
    /// (`r = 1`), which the pigeonhole plans never use for `k > 0`.
    pub fn one_table(max_distance: u8, header_bits: u8) -> Result<Self, PlanError> {
        let k = max_distance;
        if k > MAX_SUPPORTED_DISTANCE {
            return Err(PlanError::DistanceUnsupported {
                asked: u32::from(k),
                supported: MAX_SUPPORTED_DISTANCE,
            });
        }
        if k == 0 || !(1..64).contains(&header_bits) {
            return Err(PlanError::BadBlockCount {
                blocks: 1,
                max_distance: k,
            });
        }
        Ok(Self {
            max_distance: k,
            blocks: 1,
            tables: vec![TableSpec {
                permutation: Permutation::identity(),
                prefix_bits: header_bits,
            }],
            probe_sets: vec![vec![0]; usize::from(k) + 1],
        })
    }

    /// The header width of a one-table plan, whose exact queries flip
    /// header bits; `None` for the pigeonhole plans, where every answer
    /// shares a probed table's prefix.
    pub fn header_bits(&self) -> Option<u8> {
        (self.blocks == 1 && self.max_distance > 0).then(|| self.tables[0].prefix_bits)
    }

    /// The largest distance this plan answers exactly.
    pub fn max_distance(&self) -> u8 {
        self.max_distance
    }

    /// How many blocks the 64 bits were split into (`r`).
    pub fn blocks(&self) -> u8 {
        self.blocks
    }

    /// The tables, in the order their column families are numbered.
    pub fn tables(&self) -> &[TableSpec] {
        &self.tables
    }

    /// The tables a query at distance `k ≤ max_distance` must probe; fewer
    /// than all of them when `k` is smaller than the plan's maximum.
    pub fn probe_set(&self, k: u8) -> Option<&[usize]> {
        self.probe_sets.get(usize::from(k)).map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair within distance k' ≤ k shares the prefix in some probed table.
    #[test]
    fn pigeonhole_guarantee_holds_for_every_probe_set() {
        let mut seed = crate::test_rng::TestRng::new(7);
        for (k, r) in [(0u8, 1u8), (1, 2), (2, 4), (3, 4), (3, 5), (3, 6), (4, 6)] {
            let plan = Plan::new(k, r).unwrap();
            assert_eq!(
                plan.tables().len() as u64,
                planner::binomial(r.into(), k.into())
            );
            for kq in 0..=k {
                let set = plan.probe_set(kq).unwrap();
                assert!(!set.is_empty());
                for _ in 0..3000 {
                    let a = seed.next_u64();
                    let mut b = a;
                    for _ in 0..kq {
                        b ^= 1u64 << (seed.next_u64() % 64);
                    }
                    let found = set.iter().any(|&t| {
                        let spec = &plan.tables()[t];
                        let pa = spec.permutation.apply(a);
                        let pb = spec.permutation.apply(b);
                        let (lo, hi) = spec.prefix_range(pa);
                        (lo..=hi).contains(&pb)
                    });
                    assert!(found, "k={k} r={r} kq={kq} a={a:016x} b={b:016x}");
                }
            }
        }
    }

    #[test]
    fn manku_example_prefixes() {
        let plan = Plan::new(3, 4).unwrap();
        assert!(plan.tables().iter().all(|t| t.prefix_bits == 16));
        let plan = Plan::new(3, 6).unwrap();
        assert_eq!(plan.tables().len(), 20);
        assert!(plan
            .tables()
            .iter()
            .all(|t| (31..=33).contains(&t.prefix_bits)));
        assert_eq!(plan.probe_set(0).unwrap().len(), 1);
    }

    #[test]
    fn rejects_impossible_plans() {
        assert!(matches!(
            Plan::new(3, 3),
            Err(PlanError::BadBlockCount { .. })
        ));
        assert!(matches!(
            Plan::new(9, 10),
            Err(PlanError::DistanceUnsupported { .. })
        ));
        assert!(matches!(
            Plan::new(8, 20),
            Err(PlanError::TooManyTables { .. })
        ));
    }

    #[test]
    fn prefix_range_edges() {
        let spec = TableSpec {
            permutation: Permutation::identity(),
            prefix_bits: 64,
        };
        assert_eq!(spec.prefix_range(5), (5, 5));
        let spec = TableSpec {
            permutation: Permutation::identity(),
            prefix_bits: 16,
        };
        assert_eq!(
            spec.prefix_range(0xabcd_1234_0000_0001),
            (0xabcd_0000_0000_0000, 0xabcd_ffff_ffff_ffff)
        );
    }
}
