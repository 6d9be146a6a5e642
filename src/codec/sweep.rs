//! Sweeping stretches of a block for values near a query: the decoding
//! kernel of all-matches and first-match probes.
//!
//! Each fingerprint's position in a delta-coded stream depends on the
//! previous code's length, so one stretch decodes as a chain of dependent
//! steps (about 20 cycles each here) that leaves most of the core idle.
//! The kernel steps `L` independent stretches (between resume points) in
//! lockstep, their bit positions and last values in registers, while every
//! step is a fast one (code word and low bits inside an in-bounds
//! eight-byte window, read through byte tables of the code); it tests each
//! value's distance itself and calls out only for the rare near value. A
//! long code word, a delta of one bit (h = 0) or the block's end ends the
//! lockstep part, and each lane's own checked steps finish it.
//!
//! The fast step does not check what the checked decoder checks on every
//! value (that it grows): the kernel is for streams the checked decoder
//! has accepted in full, which the store knows of a block once it has
//! built the block's resume points (see `table::marks`). On any other
//! bytes it stays within the stream and reports values within `k` of the
//! query, but they may not be the block's.

use super::huffman::Code;
use super::lanes::{Lane, LaneVisit};

/// Sweeps stretches `from..=to` of a block (`stretch(m)` makes stretch
/// `m`'s lane; `None` when it cannot, which ends the sweep `Careful`),
/// four lanes in lockstep and the rest in smaller groups; see
/// [`sweep_lanes`]. The block's stream must be one the checked decoder
/// decodes in full (see the module documentation).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn sweep_stretches<'a>(
    stream: &[u8],
    code: &Code,
    mut stretch: impl FnMut(usize) -> Option<Lane<'a>>,
    from: usize,
    to: usize,
    q: u64,
    k: u32,
    mut near: impl FnMut(u64, u32) -> bool,
) -> LaneVisit {
    let mut m = from;
    while m <= to {
        let taken = (to - m + 1).min(4);
        let end = match taken {
            1 => group::<1>(stream, code, &mut stretch, m, q, k, &mut near),
            2 => group::<2>(stream, code, &mut stretch, m, q, k, &mut near),
            3 => group::<3>(stream, code, &mut stretch, m, q, k, &mut near),
            _ => group::<4>(stream, code, &mut stretch, m, q, k, &mut near),
        };
        if end != LaneVisit::Done {
            return end;
        }
        m += taken;
    }
    LaneVisit::Done
}

/// Sweeps the `L` stretches from `m` on.
#[inline(always)]
fn group<'a, const L: usize>(
    stream: &[u8],
    code: &Code,
    stretch: &mut impl FnMut(usize) -> Option<Lane<'a>>,
    m: usize,
    q: u64,
    k: u32,
    near: &mut impl FnMut(u64, u32) -> bool,
) -> LaneVisit {
    let Some(first) = stretch(m) else {
        return LaneVisit::Careful;
    };
    let mut lanes: [Lane<'a>; L] = std::array::from_fn(|_| first.clone());
    for (i, lane) in lanes.iter_mut().enumerate().skip(1) {
        match stretch(m + i) {
            Some(l) => *lane = l,
            None => return LaneVisit::Careful,
        }
    }
    sweep_lanes(stream, code, &mut lanes, q, k, near)
}

/// Decodes `lanes` (stretches of the block whose stream is `stream`),
/// calling `near(v, d)` for every decoded value `v` at distance
/// `d = (v ^ q).count_ones() <= k`, until it returns `false` (then
/// `Stopped`). Values arrive in no particular order. The stream must be
/// one the checked decoder decodes in full (see the module documentation);
/// a lane that still meets an error in its checked steps (a stretch
/// running past the stream) ends the sweep `Careful`.
#[inline(always)]
pub fn sweep_lanes<const L: usize>(
    stream: &[u8],
    code: &Code,
    lanes: &mut [Lane<'_>; L],
    q: u64,
    k: u32,
    near: &mut impl FnMut(u64, u32) -> bool,
) -> LaneVisit {
    // The last bit position from which an eight-byte load stays within
    // the stream; a fast step consumes at most 57 bits of that window, so
    // it stays within the stream too.
    let limit = stream.len().checked_sub(8).map_or(0, |b| b * 8 + 7);
    let base = stream.as_ptr();
    let mut pos = [0usize; L];
    let mut prev = [0u64; L];
    let mut steps = if stream.len() < 8 { 0 } else { usize::MAX };
    for i in 0..L {
        pos[i] = lanes[i].reader.position();
        prev[i] = lanes[i].prev;
        steps = steps.min(lanes[i].left);
    }
    // Steps taken by every lane, and by the lanes before `stopped` one
    // more (when the lockstep part ended in the middle of a round).
    let mut done = 0;
    let mut stopped = L;
    'lockstep: while done < steps {
        for i in 0..L {
            let p = pos[i];
            if p > limit {
                stopped = i;
                break 'lockstep;
            }
            // SAFETY: `p <= limit` means `p / 8 + 8 <= stream.len()`, so
            // the eight bytes read lie within `stream`.
            let word = unsafe { base.add(p / 8).cast::<[u8; 8]>().read_unaligned() };
            let window = u64::from_be_bytes(word) << (p % 8);
            let step = code.step_bytes(window);
            let total = step[0];
            if total == 0 {
                stopped = i;
                break 'lockstep;
            }
            let (h, len, rest) = (u32::from(step[1]), u32::from(step[2]), u32::from(step[3]));
            let above = prev[i] >> h;
            let low = (window << len) >> rest;
            let v = ((above | 1) << h) | low;
            prev[i] = v;
            pos[i] = p + usize::from(total);
            let d = (v ^ q).count_ones();
            if d <= k && !near(v, d) {
                return LaneVisit::Stopped;
            }
        }
        done += 1;
    }
    let mut visit = |v: u64| {
        let d = (v ^ q).count_ones();
        d > k || near(v, d)
    };
    for i in 0..L {
        let lane = &mut lanes[i];
        // Exact: positions only grow, by fast steps checked to stay
        // within the stream.
        lane.reader
            .advance((pos[i] - lane.reader.position()) as u32);
        lane.prev = prev[i];
        lane.left -= done + usize::from(i < stopped && stopped < L);
        let end = lane.finish(code, &mut visit);
        if end != LaneVisit::Done {
            return end;
        }
    }
    LaneVisit::Done
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;
    use crate::codec::{delta_histogram, encode_blocks, BlockView, ResumePoint, SYMBOLS};

    /// Resume points every `stride` fingerprints, from the checked iterator.
    fn points(view: &BlockView<'_>, code: &Code, stride: usize) -> Vec<ResumePoint> {
        let mut iter = view.iter(code);
        let mut points = Vec::new();
        for n in 1..=view.count() {
            iter.next();
            if n % stride == 0 && n < view.count() {
                points.extend(iter.resume_point());
            }
        }
        points
    }

    /// What a sweep of every stretch of `view` reports, as a set, and how
    /// it ended.
    fn sweep_all(
        view: &BlockView<'_>,
        code: &Code,
        points: &[ResumePoint],
        stride: usize,
        q: u64,
        k: u32,
    ) -> (BTreeSet<u64>, usize, LaneVisit) {
        let mut got = BTreeSet::new();
        let mut reports = 0;
        if (view.first() ^ q).count_ones() <= k {
            got.insert(view.first());
            reports += 1;
        }
        let stretch = |m: usize| match m.checked_sub(1) {
            None => Some(view.lane(stride - 1)),
            Some(p) => view.lane_from(*points.get(p)?, stride),
        };
        let end = sweep_stretches(
            view.stream(),
            code,
            stretch,
            0,
            points.len(),
            q,
            k,
            |v, d| {
                assert_eq!(d, (v ^ q).count_ones());
                got.insert(v);
                reports += 1;
                true
            },
        );
        (got, reports, end)
    }

    fn blocks_of(fps: &mut Vec<u64>, block_size: usize) -> (Code, Vec<Vec<u8>>) {
        fps.sort_unstable();
        fps.dedup();
        let mut counts = [0u64; SYMBOLS];
        delta_histogram(fps, &mut counts);
        let code = Code::from_counts(&counts);
        let blocks = encode_blocks(fps, &code, 0, block_size).unwrap();
        (code, blocks)
    }

    proptest! {
        // No failure files (miri has no working directory); few cases
        // under miri, which runs this for the unsafe load.
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { 256 },
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Over every stretch of every block, the sweep reports exactly the
        /// block's values within `k` of the query, each once: uniform and clustered
        /// runs, several block sizes and strides, queries at stored values,
        /// near them and anywhere.
        #[test]
        fn sweeps_report_exactly_the_near_values(
            seeds in proptest::collection::vec(any::<u64>(), 1..40),
            spread in 0u32..64,
            copies in 1usize..60,
            block_size in prop_oneof![Just(40usize), Just(200), Just(1024)],
            stride in prop_oneof![Just(1usize), Just(7), Just(16)],
            flips in any::<u64>(),
            k in prop_oneof![Just(0u32), Just(1), Just(3), Just(7), Just(64)],
        ) {
            // Each seed and `copies` values within `spread` low bits of it.
            let mut fps = Vec::new();
            for (i, &s) in seeds.iter().enumerate() {
                fps.push(s);
                let mut rng = crate::test_rng::TestRng::new(s);
                for _ in 0..copies {
                    let x = rng.next_u64();
                    let mask = if spread == 0 { 0 } else { u64::MAX >> (64 - spread) };
                    fps.push(s ^ (x & mask) ^ (i as u64));
                }
            }
            let (code, blocks) = blocks_of(&mut fps, block_size);
            let queries = [fps[fps.len() / 2], fps[0] ^ (flips & 0x8421), flips];
            for bytes in &blocks {
                let view = BlockView::parse(bytes).unwrap();
                let all: Vec<u64> = view.iter(&code).map(Result::unwrap).collect();
                let points = points(&view, &code, stride);
                for q in queries {
                    let want: BTreeSet<u64> =
                        all.iter().copied().filter(|v| (v ^ q).count_ones() <= k).collect();
                    let (got, reports, end) = sweep_all(&view, &code, &points, stride, q, k);
                    prop_assert_eq!(end, LaneVisit::Done);
                    // The stretches partition the block: nothing twice.
                    prop_assert_eq!(reports, want.len());
                    prop_assert_eq!(got, want);
                }
            }
        }
    }

    /// A `false` from the callback stops the sweep at once.
    #[test]
    fn a_false_from_the_callback_stops() {
        let mut fps: Vec<u64> = (0..2000u64).map(|i| i * 0x1_0000_0001).collect();
        let (code, blocks) = blocks_of(&mut fps, 1024);
        let view = BlockView::parse(&blocks[0]).unwrap();
        let points = points(&view, &code, 16);
        let stretch = |m: usize| match m.checked_sub(1) {
            None => Some(view.lane(15)),
            Some(p) => view.lane_from(*points.get(p)?, 16),
        };
        let mut seen = 0;
        let end = sweep_stretches(
            view.stream(),
            &code,
            stretch,
            0,
            points.len(),
            0,
            64,
            |_, _| {
                seen += 1;
                seen < 5
            },
        );
        assert_eq!((end, seen), (LaneVisit::Stopped, 5));
    }

    /// A truncated stream ends the sweep `Careful`; nothing reported is a
    /// value the block does not hold. (Flipped bits are the CRC's job:
    /// blocks are checked when they are loaded.)
    #[test]
    fn malformed_streams_end_careful_without_wrong_values() {
        let mut rng = crate::test_rng::TestRng::new(7);
        let mut fps: Vec<u64> = (0..3000).map(|_| rng.next_u64() >> 20).collect();
        let (code, blocks) = blocks_of(&mut fps, 1024);
        let bytes = &blocks[1];
        let view = BlockView::parse(bytes).unwrap();
        let all: BTreeSet<u64> = view.iter(&code).map(Result::unwrap).collect();
        let points = points(&view, &code, 16);
        for cut in [1usize, 8, 100, 400] {
            let short = &bytes[..bytes.len() - cut];
            let view = BlockView::parse_verified(short).unwrap();
            let (got, _, end) = sweep_all(&view, &code, &points, 16, view.first(), 64);
            assert!(
                got.is_subset(&all),
                "cut {cut}: reported a value not stored"
            );
            if cut >= 8 {
                assert_eq!(end, LaneVisit::Careful, "cut {cut} went unnoticed");
            }
        }
    }
}
