//! Inserts and deletes: each call is one request; concurrent requests are
//! committed together by one leader among their callers (group commit),
//! as one atomic RocksDB write batch and, in sync mode, one fsync.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::before::Before;
use super::ids::{FpSet, MixHasher};
use super::shared::Shared;
use crate::error::{Error, Result};
use crate::format::keys;
use crate::simhash::Sketch;

/// One change to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// Store a fingerprint, with a document id when given.
    Insert {
        /// The fingerprint.
        fingerprint: u64,
        /// The document id, if any.
        id: Option<u64>,
    },
    /// Store a `(fingerprint, id)` pair with the similarity sketch of its
    /// document (stores created with [`Options::sketches`] only; a pair
    /// stored already gets this sketch in place of its own).
    ///
    /// [`Options::sketches`]: crate::Options::sketches
    InsertSketched {
        /// The fingerprint.
        fingerprint: u64,
        /// The document id.
        id: u64,
        /// The document's sketch.
        sketch: Sketch,
    },
    /// Remove one (fingerprint, id) pair; the fingerprint goes too when it
    /// was its last id.
    Delete {
        /// The fingerprint.
        fingerprint: u64,
        /// The document id.
        id: u64,
    },
    /// Remove a fingerprint with all its ids.
    DeleteFingerprint {
        /// The fingerprint.
        fingerprint: u64,
    },
}

/// One caller's changes, waiting for a leader to commit them.
pub(crate) struct Request {
    ops: Vec<Op>,
    turn: Mutex<Turn>,
    wake: Condvar,
    /// Set once `turn` is no longer [`Turn::Waiting`]: the caller looks at
    /// it for a while before it sleeps.
    settled: AtomicBool,
}

/// Where a waiting request stands.
enum Turn {
    /// Queued behind the current leader.
    Waiting,
    /// Handed the lead: commit the queue, this request included.
    Lead,
    /// Committed (or failed) by a leader.
    Done(Result<Vec<bool>>),
}

/// Requests waiting for the leader, and whether there is one.
#[derive(Default)]
pub(crate) struct Queue {
    waiting: VecDeque<Arc<Request>>,
    leading: bool,
}

/// Submits `ops` and returns, per op, whether it changed the store
/// (a new fingerprint or id; something removed).
///
/// Group commit: the first caller to find no leader leads; callers that
/// arrive while it commits queue up and wait, each on its own request (in
/// buffered mode watching for the outcome briefly before sleeping: see
/// [`BUFFERED_SPIN`]).
/// The leader commits everything queued as one group, wakes each caller
/// with its outcome and hands the lead to one still queued (in buffered
/// mode, after committing what queued meanwhile: see [`BUFFERED_ROUNDS`]).
/// No caller waits on a lock another caller holds through an fsync, so
/// the group grows with the number of concurrent callers.
pub(crate) fn submit(shared: &Shared, ops: Vec<Op>) -> Result<Vec<bool>> {
    if ops.is_empty() {
        return Ok(Vec::new());
    }
    shared.throttle();
    shared.want_filters();
    if !shared.sketches && ops.iter().any(|op| matches!(op, Op::InsertSketched { .. })) {
        return Err(Error::InvalidArgument(
            "a sketch for a store that keeps none (create it with sketches)".into(),
        ));
    }
    let request = Arc::new(Request {
        ops,
        turn: Mutex::new(Turn::Waiting),
        wake: Condvar::new(),
        settled: AtomicBool::new(false),
    });
    let lead = {
        let mut queue = shared.queue.lock();
        if queue.leading {
            queue.waiting.push_back(Arc::clone(&request));
        }
        !std::mem::replace(&mut queue.leading, true)
    };
    let outcome = if lead {
        None
    } else if shared.sync_writes() {
        request.wait(std::time::Duration::ZERO)
    } else {
        request.wait(BUFFERED_SPIN)
    };
    let outcome = match outcome {
        Some(outcome) => outcome,
        None => lead_group(shared, request),
    };
    shared.maybe_wake_compactor();
    outcome
}

impl Request {
    /// Sleeps until a leader commits this request (`Some(outcome)`) or
    /// hands it the lead (`None`).
    ///
    /// It first watches for the outcome for up to `spin`, yielding the
    /// processor as it goes (see [`BUFFERED_SPIN`]).
    fn wait(&self, spin: std::time::Duration) -> Option<Result<Vec<bool>>> {
        let started = std::time::Instant::now();
        while !self.settled.load(Ordering::Acquire) && started.elapsed() < spin {
            std::thread::yield_now();
        }
        let mut turn = self.turn.lock();
        loop {
            match std::mem::replace(&mut *turn, Turn::Waiting) {
                Turn::Waiting => self.wake.wait(&mut turn),
                Turn::Lead => return None,
                Turn::Done(outcome) => return Some(outcome),
            }
        }
    }

    /// Wakes the caller with `turn`.
    fn settle(&self, turn: Turn) {
        *self.turn.lock() = turn;
        self.settled.store(true, Ordering::Release);
        self.wake.notify_one();
    }
}

/// How long a queued caller in buffered mode watches for its outcome
/// (yielding the processor between looks) before it sleeps. A buffered
/// group commits in tens of microseconds, so the outcome usually comes
/// within it, and a caller that never slept needs no wake-up: a futex
/// call by the leader and a context switch, each several microseconds on
/// a VM, were as much as the commit's own work per operation. 1M bench,
/// one-operation writers: 4 threads 143K/s -> 194K/s, 64 threads 154K/s
/// -> 247K/s (50 us: 191K / 176K; 100 us: 191K / 218K; 300 us and 1 ms
/// no better). In sync mode callers sleep at once: a group waits for an
/// fsync of a few hundred microseconds, and watching through it (1 ms)
/// made 4 and 16 writers slower.
const BUFFERED_SPIN: std::time::Duration = std::time::Duration::from_micros(200);

/// Groups a leader commits in a row in buffered mode before handing the
/// lead on: without an fsync to wait for, handing it to a sleeping
/// caller (a wake and a context switch) cost as much as a group's work,
/// and with two to four writers of one operation each the leader going
/// on commits ~40% more a second. In sync mode the leader stops after
/// its own group: its caller would wait for more fsyncs and write nothing
/// meanwhile, which with a few writers costs more than the hand-over.
const BUFFERED_ROUNDS: usize = 16;

/// Commits `own` with every queued request, as one group, and returns
/// `own`'s outcome; in buffered mode then goes on committing what queued
/// meanwhile, up to [`BUFFERED_ROUNDS`] groups in all.
fn lead_group(shared: &Shared, own: Arc<Request>) -> Result<Vec<bool>> {
    let _lead = Leadership(shared);
    let rounds = if shared.sync_writes() {
        1
    } else {
        BUFFERED_ROUNDS
    };
    let mut own = Some(own);
    let mut mine = Ok(Vec::new());
    for _ in 0..rounds {
        let mut requests: Vec<Arc<Request>> = shared.queue.lock().waiting.drain(..).collect();
        let leads_own = own.is_some();
        match own.take() {
            Some(own) => requests.push(own),
            None if requests.is_empty() => break,
            None => {}
        }
        let mut group = Group {
            requests,
            leads_own,
            settled: false,
        };
        let outcomes = {
            let _leader = shared.locks.commit();
            commit_group(shared, &group.requests)
        };
        if let Some(outcome) = group.settle(outcomes) {
            mine = outcome;
        }
    }
    mine
}

/// The lead of the queue. Dropping it hands the lead on to a queued
/// request, or gives it up when none is queued.
struct Leadership<'a>(&'a Shared);

impl Drop for Leadership<'_> {
    fn drop(&mut self) {
        let mut queue = self.0.queue.lock();
        match queue.waiting.pop_front() {
            Some(next) => next.settle(Turn::Lead),
            None => queue.leading = false,
        }
    }
}

/// A group being committed; the leader's own request last when
/// `leads_own`. If the leader unwinds before settling it, the other
/// callers get [`Error::Poisoned`] instead of sleeping forever.
struct Group {
    requests: Vec<Arc<Request>>,
    leads_own: bool,
    settled: bool,
}

impl Group {
    /// Wakes every caller but the leader with its outcome; returns the
    /// leader's, when its request is in the group.
    fn settle(&mut self, outcomes: Result<Vec<Vec<bool>>>) -> Option<Result<Vec<bool>>> {
        let others = self.others();
        let mine = match outcomes {
            Ok(mut outcomes) => {
                let mine = self
                    .leads_own
                    .then(|| Ok(outcomes.pop().unwrap_or_default()));
                for (r, o) in others.iter().zip(outcomes) {
                    r.settle(Turn::Done(Ok(o)));
                }
                mine
            }
            Err(e) => {
                for r in others {
                    r.settle(Turn::Done(Err(e.replicate())));
                }
                self.leads_own.then_some(Err(e))
            }
        };
        self.settled = true;
        mine
    }

    /// The requests of callers other than the leader.
    fn others(&self) -> &[Arc<Request>] {
        &self.requests[..self.requests.len() - usize::from(self.leads_own)]
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.settled {
            for r in self.others() {
                r.settle(Turn::Done(Err(Error::Poisoned)));
            }
        }
    }
}

/// A fingerprint's placement, before and after the group.
#[derive(Debug, Clone, Copy)]
struct Placement {
    in_tables: bool,
    pending: bool,
    tombstoned: bool,
}

impl Placement {
    fn live(&self) -> bool {
        self.pending || (self.in_tables && !self.tombstoned)
    }
}

/// The group's changes, staged over the current state.
#[derive(Default)]
struct Staged {
    fps: BTreeMap<u64, (Placement, Placement)>,
    ids: BTreeMap<(u64, u64), (bool, bool)>,
    /// The ids of each fingerprint the group names, before it.
    stored: HashMap<u64, Before, MixHasher>,
    /// Sketches the group writes (`Some`) or removes with their pair.
    sketches: BTreeMap<(u64, u64), Option<Sketch>>,
    /// How many ids each fingerprint a delete asked about has now, kept
    /// up to date from then on: a delete of one of 100K ids asks whether
    /// any is left without listing them. Empty in insert-only groups.
    counts: HashMap<u64, i64, MixHasher>,
    /// Fingerprints whose stored ids are all in `ids` (see
    /// [`Staged::ids_of`]).
    listed: FpSet,
}

impl Staged {
    /// Reads the placement of every fingerprint of `fps` (increasing),
    /// and the ids stored for those of `with_ids`, from the state before
    /// the group, under one read lock. In increasing order the searches of
    /// level 0's index and its blocks find most of their path in the
    /// cache, and the maps staged here grow at their end.
    fn prefetch(&mut self, shared: &Shared, fps: &[u64], with_ids: &[u64]) -> Result<()> {
        let state = shared.state.read();
        // The levels' filters of the fingerprints a few places on are
        // asked for ahead, so that their cache misses overlap.
        const AHEAD: usize = 8;
        for &fp in fps.iter().take(AHEAD) {
            state.prefetch_level_of(&shared.plan, fp);
        }
        for (i, &fp) in fps.iter().enumerate() {
            if let Some(&next) = fps.get(i + AHEAD) {
                state.prefetch_level_of(&shared.plan, next);
            }
            if let Some(&soon) = fps.get(i + AHEAD / 2) {
                state.prefetch_pending_of(&shared.plan, soon);
            }
            let p = read_placement(shared, &state, fp)?;
            self.fps.insert(fp, (p, p));
        }
        for &fp in with_ids {
            // Every fingerprint of `with_ids` is in `fps`, placed above.
            let placed = self.fps[&fp].0;
            self.stored
                .insert(fp, read_stored(shared, &state, fp, placed)?);
        }
        Ok(())
    }

    fn placement(&mut self, shared: &Shared, fp: u64) -> Result<&mut Placement> {
        match self.fps.entry(fp) {
            Entry::Occupied(e) => Ok(&mut e.into_mut().1),
            Entry::Vacant(e) => {
                let p = read_placement(shared, &shared.state.read(), fp)?;
                Ok(&mut e.insert((p, p)).1)
            }
        }
    }

    /// The ids `fp` had before the group (see [`Staged::stored`]).
    fn stored(&mut self, shared: &Shared, fp: u64) -> Result<&mut Before> {
        if !self.stored.contains_key(&fp) {
            // Only a fingerprint in the tables has an id block to read (a
            // read of its table-0 block and id block, from disk when the
            // tables are kept there): most inserted ones are new. Its
            // placement before the group, not where the group put it.
            self.placement(shared, fp)?;
            let placed = self.fps[&fp].0;
            let stored = read_stored(shared, &shared.state.read(), fp, placed)?;
            self.stored.insert(fp, stored);
        }
        // Read above: nothing is inserted.
        Ok(self.stored.entry(fp).or_default())
    }

    /// Whether `(fp, id)` is stored now (before the group, or staged).
    fn has_id(&mut self, shared: &Shared, fp: u64, id: u64) -> Result<bool> {
        if let Some(&(_, now)) = self.ids.get(&(fp, id)) {
            return Ok(now);
        }
        let present = self.stored(shared, fp)?.has(id)?;
        self.ids.insert((fp, id), (present, present));
        Ok(present)
    }

    /// Stages `(fp, id)` as stored or not; returns whether it was.
    fn set_id(&mut self, shared: &Shared, fp: u64, id: u64, stored: bool) -> Result<bool> {
        let was = self.has_id(shared, fp, id)?;
        if was != stored {
            if let Some(entry) = self.ids.get_mut(&(fp, id)) {
                entry.1 = stored;
            }
            if let Some(count) = self.counts.get_mut(&fp) {
                *count += if stored { 1 } else { -1 };
            }
        }
        Ok(was)
    }

    /// How many ids the fingerprint has now, stored or staged: counted
    /// once a group, then kept in `counts`.
    fn id_count(&mut self, shared: &Shared, fp: u64) -> Result<i64> {
        if let Some(&count) = self.counts.get(&fp) {
            return Ok(count);
        }
        let stored = self.stored(shared, fp)?.count()? as i64;
        let staged: i64 = self
            .ids
            .range((fp, 0)..=(fp, u64::MAX))
            .map(|(_, &(before, now))| i64::from(now) - i64::from(before))
            .sum();
        self.counts.insert(fp, stored + staged);
        Ok(stored + staged)
    }

    /// Every id the fingerprint has now, stored or staged. Its stored ids
    /// are staged once a group (each then answers from `ids`).
    fn ids_of(&mut self, shared: &Shared, fp: u64) -> Result<Vec<u64>> {
        if self.id_count(shared, fp)? == 0 {
            return Ok(Vec::new());
        }
        if self.listed.insert(fp) {
            for id in self.stored(shared, fp)?.all()?.to_vec() {
                self.has_id(shared, fp, id)?;
            }
        }
        Ok(self
            .ids
            .range((fp, 0)..=(fp, u64::MAX))
            .filter(|(_, &(_, now))| now)
            .map(|(&(_, id), _)| id)
            .collect())
    }

    fn make_live(&mut self, shared: &Shared, fp: u64) -> Result<bool> {
        let p = self.placement(shared, fp)?;
        if p.live() {
            return Ok(false);
        }
        if p.in_tables {
            p.tombstoned = false;
        } else {
            p.pending = true;
        }
        Ok(true)
    }

    fn kill(&mut self, shared: &Shared, fp: u64) -> Result<bool> {
        let p = self.placement(shared, fp)?;
        if !p.live() {
            return Ok(false);
        }
        if p.pending {
            p.pending = false;
        } else {
            p.tombstoned = true;
        }
        Ok(true)
    }

    fn apply(&mut self, shared: &Shared, op: Op) -> Result<bool> {
        match op {
            Op::Insert { fingerprint, id } => {
                let new_fp = self.make_live(shared, fingerprint)?;
                let new_id = match id {
                    Some(id) => !self.set_id(shared, fingerprint, id, true)?,
                    None => false,
                };
                Ok(new_fp || new_id)
            }
            Op::InsertSketched {
                fingerprint,
                id,
                sketch,
            } => {
                let new_fp = self.make_live(shared, fingerprint)?;
                let new_id = !self.set_id(shared, fingerprint, id, true)?;
                self.sketches.insert((fingerprint, id), Some(sketch));
                Ok(new_fp || new_id)
            }
            Op::Delete { fingerprint, id } => {
                if !self.set_id(shared, fingerprint, id, false)? {
                    return Ok(false);
                }
                self.sketches.insert((fingerprint, id), None);
                if self.id_count(shared, fingerprint)? == 0 {
                    self.kill(shared, fingerprint)?;
                }
                Ok(true)
            }
            Op::DeleteFingerprint { fingerprint } => {
                let mut changed = false;
                for id in self.ids_of(shared, fingerprint)? {
                    self.set_id(shared, fingerprint, id, false)?;
                    self.sketches.insert((fingerprint, id), None);
                    changed = true;
                }
                Ok(self.kill(shared, fingerprint)? || changed)
            }
        }
    }
}

/// `fp`'s placement in `state`.
fn read_placement(shared: &Shared, state: &super::state::State, fp: u64) -> Result<Placement> {
    Ok(Placement {
        in_tables: state.in_tables(&shared.plan, fp)?,
        pending: state.pending.contains(&shared.plan, fp),
        tombstoned: state.tombstones.contains(&fp),
    })
}

/// `fp`'s ids in `state` (see [`Staged::stored`]), given where it is
/// `placed` in that state. A fingerprint neither in the tables nor
/// pending has no ids: the overlay holds pairs of stored fingerprints
/// only (`verify` checks it), so the look-up in its map, a cache miss or
/// two, is left out for the new fingerprints that most inserts bring.
fn read_stored(
    shared: &Shared,
    state: &super::state::State,
    fp: u64,
    placed: Placement,
) -> Result<Before> {
    let stored = placed.in_tables || placed.pending;
    Before::read(state, &shared.plan, fp, placed.in_tables, stored)
}

/// Stages every request, writes one batch, then updates memory.
fn commit_group(shared: &Shared, group: &[Arc<Request>]) -> Result<Vec<Vec<bool>>> {
    shared.check_writable()?;
    shared.check_directory()?;
    let mut staged = Staged::default();
    let (fps, with_ids) = named(group);
    staged.prefetch(shared, &fps, &with_ids)?;
    let mut outcomes = Vec::with_capacity(group.len());
    for request in group {
        let mut o = Vec::with_capacity(request.ops.len());
        for &op in &request.ops {
            o.push(staged.apply(shared, op)?);
        }
        outcomes.push(o);
    }

    let db = &shared.db;
    let (pending_cf, tomb_cf) = (
        db.family(keys::PENDING_FAMILY)?,
        db.family(keys::TOMBSTONES_FAMILY)?,
    );
    // The commit lock is held: the family writers put into stays.
    let ids_out = shared.id_families.writer(db)?;
    let mut batch = crate::storage::batch();
    // A pair added outside the id blocks to a fingerprint in no level is
    // marked pending (format 6): the fingerprint needs no `pending` key
    // while it has such a pair, the common insert of a new fingerprint
    // with its id. A pair of an id block is removed by a mark, and added
    // back by deleting it; any other pair is added and removed by its key.
    let mut ids_delta: i64 = 0;
    let mut overlay = Vec::new();
    // Fingerprints given a pair marked pending, and those whose pairs
    // change, increasing.
    let (mut marked, mut changed) = (Vec::new(), Vec::new());
    for (&(fp, id), &(before, after)) in &staged.ids {
        if before != after {
            let in_block = match staged.stored.get(&fp) {
                Some(stored) => stored.in_block(id)?,
                None => false,
            };
            let mark = match (after, in_block) {
                (true, false) => Some(true),
                (false, true) => Some(false),
                _ => None,
            };
            let pending = staged.fps.get(&fp).is_some_and(|(_, p)| p.pending);
            match mark {
                Some(added) => {
                    ids_out.put_absent(&mut batch, fp, id, keys::id_value(added, pending));
                    if added && pending && marked.last() != Some(&fp) {
                        marked.push(fp);
                    }
                }
                None => ids_out.delete(&mut batch, fp, id),
            }
            if changed.last() != Some(&fp) {
                changed.push(fp);
            }
            overlay.push((fp, id, mark));
            ids_delta += if after { 1 } else { -1 };
        }
    }
    // The overlay entries read are shared with the overlay: let go, so
    // that its update below changes them in place.
    staged.stored.clear();
    for (&fp, (before, after)) in &staged.fps {
        let key = keys::fingerprint(fp);
        // A pending fingerprint given no pair marked pending here has a
        // key when it becomes pending, or when its pairs change (the pairs
        // that named it may be gone; the key may be there already).
        let named = marked.binary_search(&fp).is_ok();
        let pairs_changed = changed.binary_search(&fp).is_ok();
        if before.pending != after.pending || (after.pending && pairs_changed) {
            if !after.pending {
                batch.delete_cf(pending_cf, key);
            } else if !named {
                batch.put_cf(pending_cf, key, []);
            }
        }
        if before.tombstoned != after.tombstoned {
            if after.tombstoned {
                batch.put_cf(tomb_cf, key, []);
            } else {
                batch.delete_cf(tomb_cf, key);
            }
        }
    }
    if shared.sketches {
        let sketches_cf = db.family(keys::SKETCHES_FAMILY)?;
        for (&(fp, id), sketch) in &staged.sketches {
            let key = keys::id_pair(fp, id);
            match sketch {
                Some(s) => batch.put_cf(
                    sketches_cf,
                    key,
                    crate::format::sketches::encode_sketch(fp, id, &s.to_bytes()),
                ),
                None => batch.delete_cf(sketches_cf, key),
            }
        }
    }
    if batch.is_empty() {
        return Ok(outcomes);
    }
    let mut counters = shared.state.read().counters();
    let ids = counters.ids.saturating_add_signed(ids_delta);
    counters.ids = ids;
    for (before, after) in staged.fps.values() {
        counters.moved(
            (before.pending, before.tombstoned),
            (after.pending, after.tombstoned),
        );
    }
    shared.put_counters(&mut batch, &counters)?;
    let written = shared.write_or_poison(batch);
    // Even when the write failed: it may have reached the files.
    if !staged.sketches.is_empty() {
        shared.sketch_cache.forget(staged.sketches.keys().copied());
    }
    written?;

    // The pending set's new runs, merged under the read lock (queries go
    // on; the commit lock keeps the set as it is) unless the group also
    // takes fingerprints out of it.
    let new_pending: Vec<u64> = staged
        .fps
        .iter()
        .filter(|(_, (before, after))| after.pending && !before.pending)
        .map(|(&fp, _)| fp)
        .collect();
    let leaving = staged
        .fps
        .values()
        .any(|(before, after)| before.pending && !after.pending);
    let prepared = if leaving || new_pending.is_empty() {
        None
    } else {
        let state = shared.state.read();
        state.pending.prepare_insert(&shared.plan, &new_pending)
    };
    let mut state = shared.state.write();
    shared.locks.record(staged.fps.keys().copied());
    for (&fp, (before, after)) in &staged.fps {
        if before.pending && !after.pending {
            state.pending.remove(&shared.plan, fp);
        }
        if before.tombstoned != after.tombstoned {
            if after.tombstoned {
                state.tombstones.insert(fp);
            } else {
                state.tombstones.remove(&fp);
            }
        }
    }
    if !prepared.is_some_and(|p| state.pending.apply_insert(p)) {
        state.pending.insert_many(&shared.plan, &new_pending);
    }
    // In (fingerprint, id) order: a fingerprint's few changes set one by
    // one (a search each, and no move when its new ids come last, as
    // document ids in crawl order do: a group adding one id to a list of
    // 300K costs no copy of it), more merged into its entries at once.
    for run in overlay.chunk_by(|a, b| a.0 == b.0) {
        if run.len() <= SET_ONE_BY_ONE {
            for &(fp, id, mark) in run {
                state.overlay.set(fp, id, mark);
            }
        } else {
            let changes: Vec<(u64, Option<bool>)> =
                run.iter().map(|&(_, id, mark)| (id, mark)).collect();
            state.overlay.set_many(run[0].0, &changes);
        }
    }
    state.ids = ids;
    shared.locks.next_generation();
    Ok(outcomes)
}

/// A fingerprint's changes in a group up to which they are set in its
/// overlay entries one by one rather than merged: each set moves the
/// entries after it, at worst the whole list, so up to this many cost at
/// most a few merges, and nothing when they come last.
const SET_ONE_BY_ONE: usize = 4;

/// The distinct fingerprints `group` names, and those of them named with
/// an id (whose stored ids the group reads), both increasing.
fn named(group: &[Arc<Request>]) -> (Vec<u64>, Vec<u64>) {
    let mut fps = Vec::new();
    let mut with_ids = Vec::new();
    for op in group.iter().flat_map(|r| &r.ops) {
        match *op {
            Op::Insert {
                fingerprint,
                id: None,
            } => fps.push(fingerprint),
            Op::Insert {
                fingerprint,
                id: Some(_),
            }
            | Op::InsertSketched { fingerprint, .. }
            | Op::Delete { fingerprint, .. }
            | Op::DeleteFingerprint { fingerprint } => {
                fps.push(fingerprint);
                with_ids.push(fingerprint);
            }
        }
    }
    for list in [&mut fps, &mut with_ids] {
        list.sort_unstable();
        list.dedup();
    }
    (fps, with_ids)
}
