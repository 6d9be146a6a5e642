//! Codec throughput: `cargo bench --bench codec` (no RocksDB involved).
//!
//! Encodes sorted uniform fingerprints at the density of a table of N
//! (1M, 10M and 100M) into 1 KB blocks and times, in the same run:
//! encoding, the table-driven decoder (whole blocks and iterator), the
//! sweep of stretches between resume points for values near a query (the
//! all-matches kernel), the bit-at-a-time reference decoder, and a baseline summing the same values
//! from an uncompressed array. Figures are fingerprints per second and
//! ratios against the in-run baselines; the machine is noisy, so read the
//! ratios. No external harness: timings use `std::time::Instant` over
//! several rounds and report the best.

use std::hint::black_box;
use std::time::{Duration, Instant};

use simstore::codec::{
    delta_histogram, encode_blocks, sweep_stretches, BlockView, Code, LaneVisit, ResumePoint,
    SYMBOLS,
};

/// Values per measured collection (the density is that of a table of N).
const SAMPLE: usize = 2_000_000;
const ROUNDS: usize = 5;

fn best(mut f: impl FnMut()) -> Duration {
    (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64().max(1e-12)
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters nothing.
    for n in [1_000_000u64, 10_000_000, 100_000_000] {
        // SAMPLE values spaced as in a table of n uniform fingerprints: the
        // top bits fixed, the rest uniform over 2^64 / n * SAMPLE.
        let span = (u64::MAX / n).saturating_mul(SAMPLE as u64);
        let mut x = 0x2545_f491_4f6c_dd1d_u64 ^ n;
        let mut fps: Vec<u64> = (0..SAMPLE)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % span.max(1)
            })
            .collect();
        fps.sort_unstable();
        fps.dedup();
        let mut counts = [0u64; SYMBOLS];
        delta_histogram(&fps, &mut counts);
        let code = Code::from_counts(&counts);

        let mut blocks = Vec::new();
        let encode = best(|| blocks = encode_blocks(&fps, &code, 0, 1024).expect("encode"));
        let bytes: usize = blocks.iter().map(Vec::len).sum();

        let sum_plain = best(|| {
            black_box(fps.iter().fold(0u64, |a, &v| a.wrapping_add(v)));
        });
        let mut out = Vec::new();
        let decode = best(|| {
            let mut total = 0u64;
            for b in &blocks {
                let view = BlockView::parse_verified(b).expect("parse");
                view.decode_into(&code, &mut out).expect("decode");
                total = total.wrapping_add(out.iter().fold(0u64, |a, &v| a.wrapping_add(v)));
            }
            black_box(total);
        });
        let iterate = best(|| {
            let mut total = 0u64;
            for b in &blocks {
                let view = BlockView::parse_verified(b).expect("parse");
                for v in view.iter(&code) {
                    total = total.wrapping_add(v.expect("decode"));
                }
            }
            black_box(total);
        });
        // Stretches of 16 (as the store keeps them) swept for values within
        // 3 bits of a query, four lanes in lockstep.
        let points16: Vec<Vec<ResumePoint>> = blocks
            .iter()
            .map(|b| {
                let view = BlockView::parse_verified(b).expect("parse");
                let mut iter = view.iter(&code);
                let mut points = Vec::new();
                let mut n = 0;
                while let Some(Ok(_)) = iter.next() {
                    n += 1;
                    if n % 16 == 0 {
                        points.extend(iter.resume_point());
                    }
                }
                points
            })
            .collect();
        /// Compiled for the bit instructions the store's query loop uses.
        ///
        /// # Safety
        /// On x86-64 the processor must have those (checked below).
        #[cfg_attr(
            target_arch = "x86_64",
            target_feature(enable = "popcnt,bmi1,bmi2,lzcnt")
        )]
        unsafe fn sweep_block(
            view: &BlockView<'_>,
            code: &Code,
            points: &[ResumePoint],
            near: &mut Vec<u64>,
        ) {
            let lane = |m: usize| match m.checked_sub(1) {
                None => Some(view.lane(15)),
                Some(p) => view.lane_from(*points.get(p)?, 16),
            };
            let q = view.first() ^ 0b1011;
            let near = |v: u64, _| {
                near.push(v);
                true
            };
            let end = sweep_stretches(view.stream_bytes(), code, lane, 0, points.len(), q, 3, near);
            assert_eq!(end, LaneVisit::Done);
        }
        #[cfg(target_arch = "x86_64")]
        assert!(
            std::arch::is_x86_feature_detected!("popcnt")
                && std::arch::is_x86_feature_detected!("bmi1")
                && std::arch::is_x86_feature_detected!("bmi2")
                && std::arch::is_x86_feature_detected!("lzcnt"),
            "the sweep needs POPCNT, BMI1, BMI2 and LZCNT"
        );
        let sweep = best(|| {
            let mut near = Vec::new();
            for (b, points) in blocks.iter().zip(&points16) {
                let view = BlockView::parse_verified(b).expect("parse");
                // SAFETY: checked before the rounds.
                unsafe { sweep_block(&view, &code, points, &mut near) };
            }
            black_box(near.len());
        });
        let checked = best(|| {
            for b in &blocks {
                black_box(BlockView::parse(b).expect("parse"));
            }
        });
        let slow = best(|| {
            for b in blocks.iter().take(blocks.len() / 10) {
                let view = BlockView::parse_verified(b).expect("parse");
                black_box(view.decode_slow(&code).expect("decode"));
            }
        }) * 10;

        let m = fps.len();
        println!(
            "density of N = {n}: {m} fingerprints, {:.3} bytes each in {} blocks of 1 KB",
            bytes as f64 / m as f64,
            blocks.len()
        );
        println!("  encode: {:.1} M/s", rate(m, encode) / 1e6);
        println!(
            "  decode whole blocks (table-driven): {:.1} M/s, {:.2} ns each; {:.1}x the bit-at-a-time reference; {:.2}x the time of summing an uncompressed array",
            rate(m, decode) / 1e6,
            decode.as_secs_f64() * 1e9 / m as f64,
            slow.as_secs_f64() / decode.as_secs_f64(),
            decode.as_secs_f64() / sum_plain.as_secs_f64()
        );
        println!(
            "  sweep stretches of 16 four at a time for near values: {:.1} M/s ({:.2}x whole blocks)",
            rate(m, sweep) / 1e6,
            decode.as_secs_f64() / sweep.as_secs_f64()
        );
        println!(
            "  decode through the iterator: {:.1} M/s; reference decoder {:.1} M/s; CRC check {:.1} M blocks/s",
            rate(m, iterate) / 1e6,
            rate(m, slow) / 1e6,
            rate(blocks.len(), checked) / 1e6
        );
    }
}
