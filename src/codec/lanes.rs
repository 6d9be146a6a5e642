//! Lanes: independent stretches of one block, each a number of
//! fingerprints after a known one (the block's first, or a resume point).
//! [`sweep`](super::sweep) decodes several in lockstep. When a lane meets a
//! malformed stream the visit ends with [`LaneVisit::Careful`] and the
//! caller decodes that part with the checked iterator, which reports the
//! error.

use super::bits::BitReader;
use super::block::{fast_step, long_step, BlockView, ResumePoint};
use super::huffman::Code;

/// A stretch of a block: a number of fingerprints after a known one.
#[derive(Debug, Clone)]
pub struct Lane<'a> {
    pub(super) reader: BitReader<'a>,
    pub(super) prev: u64,
    pub(super) left: usize,
}

/// How a visit of lanes ended.
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

    /// Decodes the rest of the lane through the checked step.
    #[inline(always)]
    pub(super) fn finish(&mut self, code: &Code, visit: &mut impl FnMut(u64) -> bool) -> LaneVisit {
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
