//! Decoding several stretches of one block in turn.
//!
//! Each fingerprint's position in a delta-coded stream depends on the
//! previous code's length, so decoding one stretch is a chain of dependent
//! steps that leaves most of the core idle. Resume points split a block
//! into independent stretches; stepping two of them in turn lets the
//! processor overlap their chains. When a lane meets a malformed stream
//! the visit ends with [`LaneVisit::Careful`] and the caller decodes that
//! part with the checked iterator, which reports the error.

use super::bits::BitReader;
use super::block::{fast_step, long_step, BlockView, ResumePoint};
use super::huffman::Code;

/// A stretch of a block: a number of fingerprints after a known one.
#[derive(Debug, Clone)]
pub struct Lane<'a> {
    reader: BitReader<'a>,
    prev: u64,
    left: usize,
}

/// How [`visit_lanes`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneVisit {
    /// Every lane was decoded to its end.
    Done,
    /// The visitor asked to stop.
    Stopped,
    /// A lane met a malformed stream; values visited so far were correct,
    /// the rest were not decoded.
    Careful,
}

impl<'a> BlockView<'a> {
    /// The lane of (at most) the `n` fingerprints after the block's first.
    pub fn lane(&self, n: usize) -> Lane<'a> {
        Lane {
            reader: BitReader::new(self.stream()),
            prev: self.first(),
            left: n.min(self.count().saturating_sub(1)),
        }
    }

    /// The lane of (at most) the `n` fingerprints after a resume point of
    /// this block; `None` when the point lies outside the block.
    pub fn lane_from(&self, point: ResumePoint, n: usize) -> Option<Lane<'a>> {
        let mut reader = BitReader::new(self.stream());
        reader.skip(point.bit)?;
        let after = self.count().checked_sub(usize::from(point.index) + 1)?;
        Some(Lane {
            reader,
            prev: point.fingerprint,
            left: n.min(after),
        })
    }
}

impl Lane<'_> {
    /// Fingerprints left to decode.
    pub fn left(&self) -> usize {
        self.left
    }

    #[inline(always)]
    fn step(&mut self, code: &Code) -> Option<u64> {
        let fp = match fast_step(&mut self.reader, code, self.prev) {
            Some(fp) => fp,
            None => long_step(&mut self.reader, code, self.prev)?,
        };
        self.prev = fp;
        self.left -= 1;
        Some(fp)
    }

    #[inline(always)]
    fn finish(&mut self, code: &Code, visit: &mut impl FnMut(u64) -> bool) -> LaneVisit {
        while self.left > 0 {
            let Some(fp) = self.step(code) else {
                return LaneVisit::Careful;
            };
            if !visit(fp) {
                return LaneVisit::Stopped;
            }
        }
        LaneVisit::Done
    }
}

/// Decodes two lanes of one block in turn (then what is left of either),
/// calling `visit` with each fingerprint until it returns `false`. Values
/// of the two lanes arrive interleaved, each lane's in increasing order.
#[inline(always)]
pub fn visit_lanes(
    code: &Code,
    a: &mut Lane<'_>,
    b: &mut Lane<'_>,
    mut visit: impl FnMut(u64) -> bool,
) -> LaneVisit {
    while a.left > 0 && b.left > 0 {
        let (Some(x), Some(y)) = (a.step(code), b.step(code)) else {
            return LaneVisit::Careful;
        };
        if !visit(x) || !visit(y) {
            return LaneVisit::Stopped;
        }
    }
    match a.finish(code, &mut visit) {
        LaneVisit::Done => b.finish(code, &mut visit),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{delta_histogram, encode_blocks, SYMBOLS};

    /// Every pair of stretches (split at every resume point of the
    /// iterator) decodes to exactly the block's values.
    #[test]
    fn lanes_cover_the_block_exactly() {
        let mut x = 11u64;
        let mut fps: Vec<u64> = (0..3000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                x >> 20
            })
            .collect();
        fps.sort_unstable();
        fps.dedup();
        let mut counts = [0u64; SYMBOLS];
        delta_histogram(&fps, &mut counts);
        let code = Code::from_counts(&counts);
        let blocks = encode_blocks(&fps, &code, 0, 1024).unwrap();
        for bytes in &blocks {
            let view = BlockView::parse(bytes).unwrap();
            let all: Vec<u64> = view.iter(&code).map(Result::unwrap).collect();
            let mut iter = view.iter(&code);
            let mut points = Vec::new();
            for n in 1..=all.len() {
                iter.next();
                if n % 7 == 0 {
                    points.extend(iter.resume_point());
                }
            }
            for (split, &point) in points.iter().enumerate() {
                let mut a = view.lane(7 * (split + 1) - 1);
                let mut b = view.lane_from(point, usize::MAX).unwrap();
                let mut got = vec![view.first()];
                let end = visit_lanes(&code, &mut a, &mut b, |v| {
                    got.push(v);
                    true
                });
                assert_eq!(end, LaneVisit::Done);
                got.sort_unstable();
                assert_eq!(got, all, "split at point {split}");
            }
        }
    }

    /// A lane that meets a malformed stream ends the visit as `Careful`,
    /// and a visitor's `false` stops it.
    #[test]
    fn malformed_streams_and_stops() {
        let fps: Vec<u64> = (0..200u64).map(|i| i * 0x1_0000_0001).collect();
        let mut counts = [0u64; SYMBOLS];
        delta_histogram(&fps, &mut counts);
        let code = Code::from_counts(&counts);
        let mut bytes = encode_blocks(&fps, &code, 0, 4096).unwrap().remove(0);
        let view = BlockView::parse(&bytes).unwrap();
        let (mut a, mut b) = (view.lane(50), view.lane(50));
        let mut n = 0;
        let end = visit_lanes(&code, &mut a, &mut b, |_| {
            n += 1;
            n < 5
        });
        assert_eq!((end, n), (LaneVisit::Stopped, 5));
        let len = bytes.len();
        bytes.truncate(len - 200);
        let view = BlockView::parse_verified(&bytes).unwrap();
        let (mut a, mut b) = (view.lane(usize::MAX), view.lane(3));
        let end = visit_lanes(&code, &mut a, &mut b, |_| true);
        assert_eq!(end, LaneVisit::Careful);
        let other = view.iter(&code).find(Result::is_err);
        assert!(other.is_some(), "the checked iterator reports the error");
    }
}
