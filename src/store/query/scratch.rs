//! The buffers a thread's queries reuse from one group to the next.

use super::flipped::Staged;
use super::probes::Probe;
use crate::store::answers::Candidates;
use crate::table::FlatStart;

/// Buffers the probes of a group of queries reuse.
#[derive(Default)]
pub(in crate::store) struct Work {
    pub(super) part: Vec<u64>,
    pub(super) probes: Vec<Probe>,
    pub(super) heads: Vec<(u64, FlatStart)>,
    pub(super) staged: Staged,
    /// First-match passes: the queries still open, and each query's match.
    pub(super) open: Vec<usize>,
    pub(super) firsts: Vec<Option<(u64, u32)>>,
}

impl Scratch {
    /// The bytes its buffers hold room for.
    pub(in crate::store) fn capacity_bytes(&self) -> usize {
        let w = &self.work;
        let held = [
            bytes(&self.levels),
            bytes(&self.found.hits),
            bytes(&self.found.ends),
            bytes(&self.fps),
            bytes(&self.spans),
            bytes(&w.part),
            bytes(&w.probes),
            bytes(&w.heads),
            bytes(&w.staged.masks),
            bytes(&w.staged.heads),
            bytes(&w.staged.ends),
            bytes(&w.open),
            bytes(&w.firsts),
        ];
        held.iter().sum()
    }
}

/// The bytes `v` holds room for.
pub(in crate::store) fn bytes<T>(v: &Vec<T>) -> usize {
    v.capacity() * std::mem::size_of::<T>()
}

/// Buffers the queries of [`Answers`](crate::store::answers::Answers) reuse from one group to the next.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The tables probed, of every level.
    pub(super) levels: Vec<usize>,
    /// The group's candidates.
    pub(in crate::store) found: Candidates,
    pub(in crate::store) work: Work,
    /// The fingerprints whose ids are looked up, and for each where its
    /// ids end and how many it has.
    pub(super) fps: Vec<u64>,
    pub(super) spans: Vec<(usize, usize)>,
}
