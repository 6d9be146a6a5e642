//! Deciding, document after document, whether each is new or a
//! near-duplicate of an earlier one: the decisions of `simstore dedup`, for
//! every front end (the command line, the Python package).
//!
//! Documents are numbered in the order they are decided (their *sequence
//! numbers*). A new document is stored with its sequence number as id;
//! a near-duplicate is not (with sketches every document is, so that a
//! later one may match it). A document's candidates are the stored
//! fingerprints within distance `k` whose id is below its own sequence
//! number, and the earlier documents of its own batch; the decision is
//! the nearest candidate, the earliest among equals. With a similarity
//! threshold, candidates must also pass the sketch re-check
//! ([`Sketch::recheck`]) and the most similar wins, then the nearest,
//! then the earliest; only the nearest (then earliest) candidates are
//! re-checked, at most [`Deduper::max_candidates`]. Ignoring stored
//! ids at or past a document's own number (by similarity, at or past
//! its batch's first: the batch's earlier documents are candidates as
//! they are decided) makes a batch that is decided again after a crash (stored, not yet
//! recorded by the caller) come out the same.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::simhash::{Sketch, Volatility};

pub mod log;
use crate::{Budget, Error, Op, Result, Store};

/// Ids of each stored match a similarity decision lists first (the
/// smallest before the document): enough when one of the earliest
/// copies is the answer, as it is for a page stored many times; a list
/// is read again to the cap when the decision needs more of it, and every
/// id of every match is listed only when it needs more than the cap.
const FIRST_IDS: usize = 16;

/// The most sketches a similarity decision reads in one batch.
const MAX_READ_AHEAD: usize = 256;

/// The default of [`Deduper::max_candidates`].
pub const MAX_CANDIDATES: usize = 1_000;

/// A document to decide: its fingerprint, and with a similarity threshold
/// its sketch (whose [`Sketch::fingerprint`] is then its fingerprint).
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The document's fingerprint.
    pub fingerprint: u64,
    /// Its sketch: required when deciding by similarity, ignored otherwise.
    pub sketch: Option<Sketch>,
    /// Its volatility, for probabilistic queries
    /// ([`Deduper::probabilistic`]); without one the query is exact.
    pub volatility: Option<Volatility>,
}

/// The earlier document a document is a near-duplicate of.
#[derive(Debug, Clone, PartialEq)]
pub struct Earlier {
    /// Its sequence number (its id in the store).
    pub seq: u64,
    /// Its fingerprint.
    pub fingerprint: u64,
    /// The Hamming distance between the two fingerprints.
    pub distance: u32,
    /// The estimated Jaccard similarity of the two, when deciding by
    /// similarity.
    pub similarity: Option<f64>,
}

/// Decides batches of documents against a store (see the [module
/// documentation](self)).
///
/// ```
/// use simstore::dedup::{Candidate, Deduper};
/// use simstore::{Options, Store};
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::create(dir.path(), &Options::new())?;
/// let dedup = Deduper::new(&store, None, None)?;
/// let docs = [0x0123_4567_89ab_cdef, 0x0123_4567_89ab_cdee, 0xfedc_ba98_7654_3210]
///     .map(|fingerprint| Candidate { fingerprint, sketch: None, volatility: None });
/// let decided = dedup.decide(0, &docs)?;
/// assert_eq!(decided[0], None); // new: stored with id 0
/// assert_eq!(decided[1].as_ref().map(|e| (e.seq, e.distance)), Some((0, 1)));
/// assert_eq!(decided[2], None); // new: stored with id 2
/// assert_eq!(store.ids(0xfedc_ba98_7654_3210)?, vec![2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Deduper<'s> {
    store: &'s Store,
    k: u32,
    similarity: Option<f64>,
    probabilistic: Option<Budget>,
    max_candidates: usize,
    /// A smaller distance whose query probes at most a third of the
    /// tables `k`'s does, tried first by similarity decisions.
    near: Option<u32>,
}

impl<'s> Deduper<'s> {
    /// Decides against `store` at distance `k` (default: the store's
    /// maximum, or with a similarity threshold the distance it needs,
    /// [`Sketch::distance_for`]), re-checking candidates at Jaccard
    /// similarity `similarity` when given. A store with sketches
    /// ([`Options::sketches`](crate::Options::sketches)) is needed to
    /// decide by similarity.
    pub fn new(store: &'s Store, k: Option<u32>, similarity: Option<f64>) -> Result<Self> {
        if let Some(j) = similarity.filter(|j| !(0.0..=1.0).contains(j)) {
            return Err(Error::InvalidArgument(format!(
                "similarity {j} is not between 0 and 1"
            )));
        }
        if similarity.is_some() && !store.keeps_sketches() {
            return Err(Error::InvalidArgument(
                "deciding by similarity needs a store that keeps sketches".into(),
            ));
        }
        let k = match (k, similarity) {
            (Some(k), _) => k,
            (None, Some(j)) => Sketch::distance_for(j, store.max_distance()),
            (None, None) => store.max_distance(),
        };
        if k > store.max_distance() {
            return Err(Error::DistanceTooLarge {
                asked: k,
                supported: store.max_distance(),
            });
        }
        Ok(Self {
            store,
            k,
            similarity,
            probabilistic: None,
            max_candidates: MAX_CANDIDATES,
            near: near_distance(store.plan(), k),
        })
    }

    /// Re-checks at most `n` candidates a document (default
    /// [`MAX_CANDIDATES`]): the nearest, then the earliest, of those with
    /// sketches. Pages that share a template without being near-duplicates
    /// can be within the query distance of thousands of earlier pages;
    /// reading every one's sketch would make each such page cost time in
    /// proportion to the pages stored before it. A near-duplicate of a
    /// page is rarely farther than `n` of that template's other pages;
    /// when it is, it is not read (the document is then taken as new, or
    /// as a near-duplicate of a nearer page that clears the bar). The
    /// re-check's bar is the one for the `n` read, lower than the one
    /// among all candidates. Matters only when deciding by similarity.
    ///
    /// Fails with [`Error::InvalidArgument`] for `n = 0`.
    pub fn max_candidates(mut self, n: usize) -> Result<Self> {
        if n == 0 {
            return Err(Error::InvalidArgument(
                "at least one candidate must be re-checked".into(),
            ));
        }
        self.max_candidates = n;
        Ok(self)
    }

    /// Finds candidates by probabilistic queries within `budget`
    /// ([`Store::query_probabilistic`]) for the documents that come with
    /// a volatility: on a one-table store, a near-duplicate whose header
    /// differs in bits the search does not flip is missed (the document
    /// is then taken as new). Deciding by similarity
    /// ([`Deduper::new`]'s threshold) queries exactly whatever this says.
    pub fn probabilistic(mut self, budget: Budget) -> Self {
        self.probabilistic = Some(budget);
        self
    }

    /// The store decided against.
    pub fn store(&self) -> &'s Store {
        self.store
    }

    /// The query distance.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Decides `docs`, numbered `first_seq`, `first_seq + 1`, ... in
    /// order, and stores the ones to keep in one atomic commit. Returns,
    /// per document, the earlier document it is a near-duplicate of, or
    /// `None` for a new one.
    pub fn decide(&self, first_seq: u64, docs: &[Candidate]) -> Result<Vec<Option<Earlier>>> {
        let last = (docs.len() as u64).saturating_sub(1);
        if first_seq.checked_add(last).is_none() {
            return Err(Error::InvalidArgument(format!(
                "{} documents numbered from {first_seq} run past the largest id",
                docs.len()
            )));
        }
        let mut decided = Vec::with_capacity(docs.len());
        let mut inserts = Vec::new();
        // Documents of this batch that are being stored: (seq, fp, sketch).
        let mut fresh: Vec<(u64, u64, Option<Sketch>)> = Vec::new();
        for (i, doc) in docs.iter().enumerate() {
            let seq = first_seq + i as u64;
            let fp = doc.fingerprint;
            let best = match self.similarity {
                Some(j) => {
                    let sketch = doc.sketch.as_ref().ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "document {seq} has no sketch; deciding by similarity needs one"
                        ))
                    })?;
                    self.most_similar(j, first_seq, fp, sketch, &fresh)?
                }
                None => self.nearest(seq, fp, doc.volatility.as_ref(), &fresh)?,
            };
            match (self.similarity, doc.sketch) {
                (Some(_), Some(sketch)) => {
                    fresh.push((seq, fp, Some(sketch)));
                    inserts.push(Op::InsertSketched {
                        fingerprint: fp,
                        id: seq,
                        sketch,
                    });
                }
                _ if best.is_none() => {
                    fresh.push((seq, fp, None));
                    inserts.push(Op::Insert {
                        fingerprint: fp,
                        id: Some(seq),
                    });
                }
                _ => {}
            }
            decided.push(best);
        }
        self.store.apply(inserts)?;
        Ok(decided)
    }

    /// Nearest, then earliest: the smallest (distance, seq) among stored
    /// and fresh documents before `seq` within `k`.
    fn nearest(
        &self,
        seq: u64,
        fp: u64,
        volatility: Option<&Volatility>,
        fresh: &[(u64, u64, Option<Sketch>)],
    ) -> Result<Option<Earlier>> {
        let mut best: Option<(u32, u64, u64)> = None;
        // Each match's earliest id before `seq`, the only one that can win.
        let probabilistic = self.probabilistic.zip(volatility).map(|(b, v)| (v, b));
        let stored = self
            .store
            .query_ids_below(fp, probabilistic, self.k, 1, seq, usize::MAX)?;
        for m in stored {
            if let Some(&id) = m.ids.first() {
                let c = (m.distance, id, m.fingerprint);
                best = Some(best.map_or(c, |b| b.min(c)));
            }
        }
        for &(s, f, _) in fresh {
            let d = (f ^ fp).count_ones();
            if d <= self.k {
                best = Some(best.map_or((d, s, f), |b| b.min((d, s, f))));
            }
        }
        Ok(best.map(|(distance, seq, fingerprint)| Earlier {
            seq,
            fingerprint,
            distance,
            similarity: None,
        }))
    }

    /// Most similar, then nearest, then earliest, among the stored
    /// documents before `seq` (the batch's first) and the `fresh` ones
    /// (the batch's earlier ones) within `k` whose sketches pass the
    /// re-check at `j` among the first `max_candidates` of them, nearest,
    /// then earliest, first.
    ///
    /// Candidates are read in that order, and the first
    /// with similarity 1 that passes the re-check among as many
    /// candidates as there are ids, up to `max_candidates` (at least as many as have sketches, so
    /// a bar at least as high) is the answer: none can be more similar,
    /// and the bar is the same for every pair its sizes allow, so none
    /// before it with similarity 1 passed either. The copies of an empty
    /// page or of a boilerplate text, each stored with its sketch, then
    /// cost one sketch read, not one for every copy stored before, and
    /// the listing of a few of their ids ([`FIRST_IDS`]), not of all.
    fn most_similar(
        &self,
        j: f64,
        seq: u64,
        fp: u64,
        sketch: &Sketch,
        fresh: &[(u64, u64, Option<Sketch>)],
    ) -> Result<Option<Earlier>> {
        // The matches at the distances of the nearest `max_candidates`
        // (every one farther is farther than all of those).
        let nearest = self.max_candidates;
        if let Some(near) = self.near {
            // Those within a smaller distance, whose query probes a few
            // tables, when they hold the cap's candidates (pages of a
            // template stored by the thousand): the decision among them
            // is the one among all, unless it needs one farther.
            let matches = self
                .store
                .query_ids_below(fp, None, near, FIRST_IDS, seq, nearest)?;
            let limit = cut_at(&matches, nearest).unwrap_or(near);
            let fresh_within = fresh
                .iter()
                .filter(|&&(_, f, ref other)| other.is_some() && (f ^ fp).count_ones() <= limit)
                .count();
            let total = fresh_within + matches.iter().map(|m| m.id_count).sum::<usize>();
            if total >= self.max_candidates {
                if let Some(decided) =
                    self.most_similar_among(j, fp, sketch, fresh, &matches, Some(seq), Some(limit))?
                {
                    return Ok(decided);
                }
            }
        }
        let matches = self
            .store
            .query_ids_below(fp, None, self.k, FIRST_IDS, seq, nearest)?;
        let limit = cut_at(&matches, nearest);
        if let Some(decided) =
            self.most_similar_among(j, fp, sketch, fresh, &matches, Some(seq), limit)?
        {
            return Ok(decided);
        }
        // The nearest matches had fewer candidates than the cap (pairs
        // without sketches among them), or the answer needs more of a
        // fingerprint's ids than the cap: again with every id of every
        // match.
        let matches = self
            .store
            .query_ids_below(fp, None, self.k, usize::MAX, seq, usize::MAX)?;
        Ok(self
            .most_similar_among(j, fp, sketch, fresh, &matches, None, None)?
            .flatten())
    }

    /// [`most_similar`](Self::most_similar) among `matches` (each listing
    /// its smallest ids before the document, and counting all of them);
    /// `None` when the answer needs a candidate farther than `limit`, the
    /// distance past which matches were left out, or more ids of a
    /// fingerprint than the cap, or more than a list read again holds (a
    /// pair deleted meanwhile); never when there is no limit and every id
    /// is listed.
    ///
    /// With `below` (the document's number), the lists may be cut: a list
    /// that runs out before its count is read again from the store, up to
    /// the cap, when its next id is needed (a template's fingerprint that
    /// dozens of its pages share costs one more read, not a listing of
    /// every match's ids). Without it, the lists are complete.
    ///
    /// Candidates are taken and their sketches read in batches, so a
    /// corrupt sketch a few candidates past the answer fails the decision
    /// with [`Error::Corrupt`] (as reading it one at a time would, had the
    /// answer been past it).
    #[allow(clippy::too_many_arguments)]
    fn most_similar_among(
        &self,
        j: f64,
        fp: u64,
        sketch: &Sketch,
        fresh: &[(u64, u64, Option<Sketch>)],
        matches: &[crate::Match],
        below: Option<u64>,
        limit: Option<u32>,
    ) -> Result<Option<Option<Earlier>>> {
        // Each stored fingerprint's ids before the document (increasing)
        // and how many it has, and the fresh documents' sketches.
        let mut lists: Vec<(u32, u64, Cow<'_, [u64]>, usize)> = matches
            .iter()
            .map(|m| (m.distance, m.fingerprint, Cow::from(&m.ids[..]), m.id_count))
            .collect();
        let mut sketches = Vec::new();
        // Candidates taken in the order the decision ranks equally similar
        // ones, (distance, seq, fresh, fp), each with where it comes from
        // (a fresh document's sketch, or a stored fingerprint's list and
        // the place in it): a merge of the lists by a heap holding one
        // candidate of each, so the answer found first costs no sort of
        // thousands of ids.
        let mut order = BinaryHeap::new();
        for (at, (distance, f, ids, _)) in lists.iter().enumerate() {
            if let Some(&id) = ids.first() {
                let (distance, f) = (*distance, *f);
                order.push(Reverse(((distance, id, false, f), at, 0)));
            }
        }
        for &(s, f, other) in fresh {
            let distance = (f ^ fp).count_ones();
            if let (true, Some(other)) = (distance <= self.k, other) {
                order.push(Reverse(((distance, s, true, f), sketches.len(), 0)));
                sketches.push(other);
            }
        }
        // The candidates the decision is among, at most: a decision over
        // matches cut at `limit` reads exactly the cap (else it is redone),
        // however few ids the matches listed have.
        let most = match limit {
            Some(_) => self.max_candidates,
            None => {
                (sketches.len() + lists.iter().map(|l| l.3).sum::<usize>()).min(self.max_candidates)
            }
        };
        // Those with sketches: (seq, fp, distance, sketch).
        let mut within = Vec::new();
        // Candidates taken from the heap whose sketches are read together
        // (RocksDB's batched read), a batch four times the last, from one
        // (the first is the answer for the copies of an empty page).
        let mut ahead = VecDeque::new();
        let mut batch = 1;
        let (mut pairs, mut read) = (Vec::new(), Vec::new());
        while within.len() < self.max_candidates {
            if ahead.is_empty() {
                let want = batch.min(self.max_candidates - within.len());
                batch = (batch * 4).min(MAX_READ_AHEAD);
                for _ in 0..want {
                    let Some(next) = self.take(&mut order, &mut lists, &sketches, below, limit)?
                    else {
                        break;
                    };
                    // Nothing after a candidate that ends the decision.
                    let ends = matches!(next, Next::Beyond | Next::Candidate { cut: true, .. });
                    ahead.push_back(next);
                    if ends {
                        break;
                    }
                }
                pairs.clear();
                pairs.extend(ahead.iter().filter_map(|next| match *next {
                    Next::Candidate {
                        seq,
                        fp,
                        sketch: None,
                        ..
                    } => Some((fp, seq)),
                    _ => None,
                }));
                if !pairs.is_empty() {
                    self.store.sketches(&pairs, &mut read)?;
                }
                let mut read = read.iter();
                for next in ahead.iter_mut() {
                    if let Next::Candidate {
                        sketch: s @ None, ..
                    } = next
                    {
                        *s = Some(read.next().copied().flatten());
                    }
                }
            }
            let (distance, s, f, other, cut) = match ahead.pop_front() {
                None => break,
                // Stored matches this far were left out.
                Some(Next::Beyond) => return Ok(None),
                Some(Next::Candidate {
                    distance,
                    seq,
                    fp,
                    sketch,
                    cut,
                }) => (distance, seq, fp, sketch.flatten(), cut),
            };
            let other = match other {
                Some(other) => other,
                None if cut => return Ok(None),
                None => continue,
            };
            if sketch.similarity(&other) >= 1.0 && sketch.recheck(&other, j, most).is_some() {
                return Ok(Some(Some(Earlier {
                    seq: s,
                    fingerprint: f,
                    distance,
                    similarity: Some(1.0),
                })));
            }
            if cut {
                return Ok(None);
            }
            within.push((s, f, distance, other));
        }
        if limit.is_some() && within.len() < self.max_candidates {
            // Fewer than the cap within the limit: those past it count.
            return Ok(None);
        }
        let candidates = within.len();
        Ok(Some(
            within
                .into_iter()
                .filter_map(|(seq, fingerprint, distance, other)| {
                    let similarity = sketch.recheck(&other, j, candidates)?;
                    Some(Earlier {
                        seq,
                        fingerprint,
                        distance,
                        similarity: Some(similarity),
                    })
                })
                .min_by(|a, b| {
                    let (sa, sb) = (a.similarity.unwrap_or(0.0), b.similarity.unwrap_or(0.0));
                    sb.total_cmp(&sa)
                        .then(a.distance.cmp(&b.distance))
                        .then(a.seq.cmp(&b.seq))
                }),
        ))
    }

    /// The next candidate of `order` (see
    /// [`most_similar_among`](Self::most_similar_among)), its list's next
    /// id pushed in its place: a fresh document with its sketch, a stored
    /// pair with none read yet (`cut` when its list has ids past those
    /// listed), or [`Next::Beyond`] when it lies past `limit`.
    #[allow(clippy::type_complexity)]
    fn take(
        &self,
        order: &mut BinaryHeap<Reverse<((u32, u64, bool, u64), usize, usize)>>,
        lists: &mut [(u32, u64, Cow<'_, [u64]>, usize)],
        sketches: &[Sketch],
        below: Option<u64>,
        limit: Option<u32>,
    ) -> Result<Option<Next>> {
        let Some(Reverse(((distance, s, is_fresh, f), at, place))) = order.pop() else {
            return Ok(None);
        };
        if limit.is_some_and(|l| distance > l) {
            return Ok(Some(Next::Beyond));
        }
        if is_fresh {
            return Ok(Some(Next::Candidate {
                distance,
                seq: s,
                fp: f,
                sketch: Some(Some(sketches[at])),
                cut: false,
            }));
        }
        let (_, _, ids, count) = &mut lists[at];
        if ids.len() == place + 1 && place + 1 < *count && ids.len() < self.max_candidates {
            if let Some(below) = below {
                // Its further ids, to the cap (a k = 0 query probes one
                // table).
                let listed = self.store.query_ids_below(
                    f,
                    None,
                    0,
                    self.max_candidates,
                    below,
                    usize::MAX,
                )?;
                let more = listed.into_iter().find(|m| m.fingerprint == f);
                *ids = Cow::Owned(more.map(|m| m.ids).unwrap_or_default());
            }
        }
        // Whether this list has ids past those listed.
        let mut cut = false;
        match ids.get(place + 1) {
            Some(&next) => order.push(Reverse(((distance, next, false, f), at, place + 1))),
            None => cut = below.is_some() && place + 1 < *count,
        }
        Ok(Some(Next::Candidate {
            distance,
            seq: s,
            fp: f,
            sketch: None,
            cut,
        }))
    }
}

/// A candidate of a similarity decision, in the order it reads them.
enum Next {
    /// A candidate at `distance`: document `seq` with fingerprint `fp`,
    /// its sketch once read (`Some(None)` for a pair without one), and
    /// whether its list has ids past those listed.
    Candidate {
        distance: u32,
        seq: u64,
        fp: u64,
        sketch: Option<Option<Sketch>>,
        cut: bool,
    },
    /// The next candidate lies past the distance matches were listed to.
    Beyond,
}

/// The distance past which a query listing the matches at the distances
/// of its nearest `nearest` may have left some out: that of the last one
/// listed, when there are that many.
fn cut_at(matches: &[crate::Match], nearest: usize) -> Option<u32> {
    matches
        .last()
        .filter(|_| matches.len() >= nearest)
        .map(|m| m.distance)
}

/// The largest distance below `k` whose queries probe at most a third of
/// the tables `k`'s do, if any (6 in a store planned for 8 in 10 blocks:
/// 13 tables of 45).
fn near_distance(plan: &crate::plan::Plan, k: u32) -> Option<u32> {
    let tables = |d: u32| {
        u8::try_from(d)
            .ok()
            .and_then(|d| plan.probe_set(d))
            .map_or(usize::MAX, <[usize]>::len)
    };
    let all = tables(k);
    (0..k).rev().find(|&d| tables(d).saturating_mul(3) <= all)
}
