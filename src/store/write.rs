//! Inserts and deletes: each call is one request; concurrent requests are
//! committed together by whichever writer holds the commit lock (group
//! commit), as one atomic RocksDB write batch and, in sync mode, one fsync.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::shared::Shared;
use crate::error::{Error, Result};
use crate::format::keys;

/// One change to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Store a fingerprint, with a document id when given.
    Insert {
        /// The fingerprint.
        fingerprint: u64,
        /// The document id, if any.
        id: Option<u64>,
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

/// A request waiting for the commit lock.
pub(crate) struct Request {
    ops: Vec<Op>,
    outcome: Mutex<Option<Result<Vec<bool>>>>,
}

/// Submits `ops` and returns, per op, whether it changed the store
/// (a new fingerprint or id; something removed).
pub(crate) fn submit(shared: &Shared, ops: Vec<Op>) -> Result<Vec<bool>> {
    if ops.is_empty() {
        return Ok(Vec::new());
    }
    let request = Arc::new(Request {
        ops,
        outcome: Mutex::new(None),
    });
    shared.queue.lock().push(Arc::clone(&request));
    {
        let _leader = shared.commit.lock();
        if request.outcome.lock().is_none() {
            let group = std::mem::take(&mut *shared.queue.lock());
            match commit_group(shared, &group) {
                Ok(outcomes) => {
                    for (r, o) in group.iter().zip(outcomes) {
                        *r.outcome.lock() = Some(Ok(o));
                    }
                }
                Err(e) => {
                    for r in &group {
                        *r.outcome.lock() = Some(Err(e.replicate()));
                    }
                    *request.outcome.lock() = Some(Err(e));
                }
            }
        }
    }
    shared.maybe_wake_compactor();
    let outcome = request.outcome.lock().take();
    outcome.unwrap_or(Err(Error::Poisoned))
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
}

impl Staged {
    fn placement(&mut self, shared: &Shared, fp: u64) -> Result<&mut Placement> {
        match self.fps.entry(fp) {
            Entry::Occupied(e) => Ok(&mut e.into_mut().1),
            Entry::Vacant(e) => {
                let state = shared.state.read();
                let p = Placement {
                    in_tables: state.in_tables(&shared.plan, fp)?,
                    pending: state.pending.contains(&shared.plan, fp),
                    tombstoned: state.tombstones.contains(&fp),
                };
                Ok(&mut e.insert((p, p)).1)
            }
        }
    }

    fn id(&mut self, shared: &Shared, fp: u64, id: u64) -> Result<&mut bool> {
        match self.ids.entry((fp, id)) {
            Entry::Occupied(e) => Ok(&mut e.into_mut().1),
            Entry::Vacant(e) => {
                let family = shared.db.family(keys::IDS_FAMILY)?;
                let present = shared.db.get(family, &keys::id_pair(fp, id))?.is_some();
                Ok(&mut e.insert((present, present)).1)
            }
        }
    }

    /// Every id the fingerprint has now, stored or staged.
    fn ids_of(&mut self, shared: &Shared, fp: u64) -> Result<Vec<u64>> {
        for id in shared.ids_on_disk(fp)? {
            self.id(shared, fp, id)?;
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
                    Some(id) => !std::mem::replace(self.id(shared, fingerprint, id)?, true),
                    None => false,
                };
                Ok(new_fp || new_id)
            }
            Op::Delete { fingerprint, id } => {
                if !std::mem::replace(self.id(shared, fingerprint, id)?, false) {
                    return Ok(false);
                }
                if self.ids_of(shared, fingerprint)?.is_empty() {
                    self.kill(shared, fingerprint)?;
                }
                Ok(true)
            }
            Op::DeleteFingerprint { fingerprint } => {
                let mut changed = false;
                for id in self.ids_of(shared, fingerprint)? {
                    *self.id(shared, fingerprint, id)? = false;
                    changed = true;
                }
                Ok(self.kill(shared, fingerprint)? || changed)
            }
        }
    }
}

/// Stages every request, writes one batch, then updates memory.
fn commit_group(shared: &Shared, group: &[Arc<Request>]) -> Result<Vec<Vec<bool>>> {
    shared.check_writable()?;
    shared.check_directory()?;
    let mut staged = Staged::default();
    let mut outcomes = Vec::with_capacity(group.len());
    for request in group {
        let mut o = Vec::with_capacity(request.ops.len());
        for &op in &request.ops {
            o.push(staged.apply(shared, op)?);
        }
        outcomes.push(o);
    }

    let db = &shared.db;
    let (pending_cf, tomb_cf, ids_cf) = (
        db.family(keys::PENDING_FAMILY)?,
        db.family(keys::TOMBSTONES_FAMILY)?,
        db.family(keys::IDS_FAMILY)?,
    );
    let mut batch = crate::storage::batch();
    for (&fp, (before, after)) in &staged.fps {
        let key = keys::fingerprint(fp);
        if before.pending != after.pending {
            if after.pending {
                batch.put_cf(pending_cf, key, []);
            } else {
                batch.delete_cf(pending_cf, key);
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
    let mut ids_delta: i64 = 0;
    for (&(fp, id), &(before, after)) in &staged.ids {
        if before != after {
            let key = keys::id_pair(fp, id);
            if after {
                batch.put_cf(ids_cf, key, []);
                ids_delta += 1;
            } else {
                batch.delete_cf(ids_cf, key);
                ids_delta -= 1;
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
    shared.write_or_poison(batch)?;

    let mut state = shared.state.write();
    for (&fp, (before, after)) in &staged.fps {
        if before.pending != after.pending {
            if after.pending {
                state.pending.insert(&shared.plan, fp);
            } else {
                state.pending.remove(&shared.plan, fp);
            }
        }
        if before.tombstoned != after.tombstoned {
            if after.tombstoned {
                state.tombstones.insert(fp);
            } else {
                state.tombstones.remove(&fp);
            }
        }
    }
    state.ids = ids;
    shared
        .generation
        .fetch_add(1, std::sync::atomic::Ordering::Release);
    Ok(outcomes)
}
