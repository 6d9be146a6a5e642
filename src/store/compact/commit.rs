//! A merge's commit: under the commit lock, the writes made while it ran
//! folded in, one atomic batch for every table, and the new snapshots
//! swapped in.

use std::mem::replace;
use std::sync::Arc;

use super::id_blocks::{
    catch_up, rebuilt_id_table, rewrite_whole, write_ids, write_ids_whole, IdsInput,
};
use super::tables::{swapped, table_fingerprints, tables_batch, write_tables};
use super::{CompactionReport, Gathered};
use crate::error::Result;
use crate::format::{keys, records};
use crate::store::files::{self, Merged};
use crate::store::ids::{Reconciled, Walk};
use crate::store::levels::Job;
use crate::store::pending::Pending;
use crate::store::shared::Shared;
use crate::store::state::Retired;

/// Adds a merge's changes to the `pending` family to `batch`: `changes`
/// (increasing; `true`: the fingerprint becomes pending, `false`: it
/// leaves) to a family holding `count` fingerprints, of which `now` lists
/// (increasing) at least every one that stays (and maybe some leaving).
/// A merge moves most of what is pending into the tables,
/// so the family is usually emptied and written again with the few
/// fingerprints written while the merge ran: those of them `keyed` says
/// need a key (the others are named by their pairs, see
/// [`keys::ID_PENDING`]), and every one joining.
pub(super) fn write_pending(
    batch: &mut crate::storage::Batch,
    family: &crate::storage::Family,
    count: usize,
    now: impl FnOnce() -> Vec<u64>,
    changes: &[(u64, bool)],
    keyed: impl Fn(u64) -> bool,
) {
    let joining = changes.iter().filter(|&&(_, join)| join).count();
    let after = (count + joining).saturating_sub(changes.len() - joining);
    if !rewrite_whole(after, changes.len()) {
        for &(x, join) in changes {
            if join {
                batch.put_cf(family, keys::fingerprint(x), []);
            } else {
                batch.delete_cf(family, keys::fingerprint(x));
            }
        }
        return;
    }
    batch.delete_all_cf(family, 8);
    let leaving: Vec<u64> = changes
        .iter()
        .filter(|&&(_, join)| !join)
        .map(|&(x, _)| x)
        .collect();
    // A joining fingerprint is not pending now: no key is put twice.
    let mut left = Walk::new(&leaving);
    let staying = now()
        .into_iter()
        .filter(|&x| !left.has(x, |&f| f) && keyed(x));
    let joining = changes.iter().filter(|&&(_, join)| join).map(|&(x, _)| x);
    for x in staying.chain(joining) {
        batch.put_cf(family, keys::fingerprint(x), []);
    }
}

pub(super) fn commit(
    shared: &Shared,
    job: &Job,
    g: &Gathered,
    mut outputs: Vec<(usize, Merged)>,
    ids: Option<(&IdsInput<'_>, Reconciled)>,
    upper: Option<Arc<Pending>>,
) -> Result<CompactionReport> {
    let db = &shared.db;
    let plan = &shared.plan;
    let removes = &g.removes[..];
    let mut report = CompactionReport {
        merged: g.pending.len(),
        removed: removes.len(),
        ..Default::default()
    };
    // The tables' part of the batch depends on nothing a writer changes
    // (only merges change tables, one at a time): it is assembled before
    // writers are held off.
    let mut batch = tables_batch(&outputs);
    write_tables(shared, &mut batch, &mut outputs, &mut report)?;
    let caught_up = ids.is_some();
    let ids = match ids {
        Some((ids, mut done)) => {
            done.switched = g.switched;
            catch_up(
                shared, &g.tables, &outputs, ids, removes, &mut done, &mut batch,
            )?;
            if write_ids_whole(shared, &mut batch, ids, &mut done)? {
                if let Some(pause) = &shared.options.pause_merge {
                    pause.hold(crate::store::pause::Point::Whole);
                }
                // Putting the family's keys back takes seconds at scale:
                // the writes made meanwhile are caught up with as well
                // (their corrections go to the batch after the keys).
                catch_up(
                    shared, &g.tables, &outputs, ids, removes, &mut done, &mut batch,
                )?;
            }
            // Only merges change level 0 and its id table (this one holds
            // the merge lock): rebuilt before writers are held off.
            let table = rebuilt_id_table(g, &outputs)?;
            Some((ids, done, table))
        }
        None => None,
    };
    // Fingerprints whose placement the merge changes (see below), and the
    // pending ones among them under each table's permutation.
    let mut touched: Vec<u64> = g.pending.iter().chain(&g.removes).copied().collect();
    touched.sort_unstable();
    touched.dedup();
    // A merge of the pending set into a level above level 0 rebuilds what
    // is left pending (see `rest` below) and needs no removal list.
    let merged = (!job.pending || caught_up).then(|| Pending::permuted(plan, &g.pending));
    // Declared before the commit lock's guard: dropped after it.
    let mut retired = Retired::default();
    let _leader = shared.locks.commit();
    // Every fingerprint written since the merge's snapshot: no write
    // commits while the commit lock is held.
    let journal = shared.locks.take_journal();
    shared.check_writable()?;
    shared.check_directory()?;
    let id_parts = match ids {
        Some((ids, prepared, table)) => Some(write_ids(
            shared,
            &mut batch,
            &mut outputs,
            ids,
            removes,
            Some((prepared, table)),
            journal.as_deref(),
        )?),
        None => None,
    };
    let emptied_other = id_parts.as_ref().is_some_and(|parts| parts.3);
    let (pending_cf, tomb_cf) = (
        db.family(keys::PENDING_FAMILY)?,
        db.family(keys::TOMBSTONES_FAMILY)?,
    );
    let new_table_fingerprints = table_fingerprints(&g.tables, g.per_level, &outputs);
    let full = job.pending && job.sources.len() + 1 == g.tables.len() / g.per_level.max(1);
    if full && shared.locks.generation() == g.generation {
        // A full merge with nothing written while it ran: everything
        // pending was merged and every tombstone applied, so both
        // families empty out. (No other key can be in them: writers are
        // held off by the commit lock until this batch is written.)
        for family in [pending_cf, tomb_cf] {
            batch.delete_all_cf(family, 8);
        }
        let counters = records::Counters {
            pending: 0,
            tombstones: 0,
            table_fingerprints: new_table_fingerprints,
            ..shared.state.read().counters()
        };
        shared.put_counters(&mut batch, &counters)?;
        let filed = files::filed(&outputs, db.tables());
        files::commit(shared, batch, &filed, true, |state| {
            retired.keep(replace(&mut state.tables, swapped(&g.tables, outputs)));
            if let Some((id_table, overlay, ..)) = id_parts {
                retired.keep(replace(&mut state.id_table, id_table));
                retired.keep(replace(&mut state.overlay, overlay));
            }
            retired.keep(replace(
                &mut state.pending,
                Pending::new(plan.tables().len()),
            ));
            retired.keep(replace(&mut state.upper, upper));
            retired.keep(std::mem::take(&mut state.tombstones));
        })?;
        if emptied_other {
            shared.id_families.other_emptied();
        }
        return Ok(report);
    }

    // Reconcile the fingerprints whose placement the merge changes (the
    // pending ones it moved into the tables, the tombstoned ones it
    // dropped) with what was written while it ran, so no write made
    // meanwhile is lost or resurrected. Fingerprints moved from a source
    // level stay in the tables: a tombstone written meanwhile names them
    // in their new level.
    let mut fixes = Vec::new();
    let rest = {
        let state = shared.state.read();
        let mut pending_changes = Vec::new();
        let mut taken = 0;
        // Walked in increasing order beside `touched`: a fingerprint not
        // written since the snapshot is pending exactly when it was then.
        // (A merge into level 0 drained the journal as it caught up with
        // the writes, which leaves it only the last: every placement is
        // read again.)
        let (mut was_pending, mut in_removes) = (Walk::new(&g.pending), Walk::new(removes));
        let written_since = journal.as_deref().filter(|_| !caught_up);
        let mut written = written_since.map(Walk::new);
        // Most of `touched` (all of it, for a merge of the pending set into
        // the top, which can be millions after a merge into level 0) is
        // pending fingerprints merged and not written since: walked, not
        // looked up, as the writers wait.
        for &x in &touched {
            let was_in_tables = in_removes.has(x, |&f| f);
            // Pending at the snapshot: the merge takes it in.
            let in_new = was_pending.has(x, |&f| f);
            let unchanged = written.as_mut().is_some_and(|w| !w.has(x, |&f| f));
            if unchanged && in_new {
                // Pending then (so in no table, not tombstoned) and not
                // written since: moved into the tables, which the swap
                // does in memory (removing `merged`, or rebuilding what is
                // left pending).
                pending_changes.push((x, false));
                taken += 1;
                continue;
            }
            // (Not pending then, and not written since: not pending now.)
            let pending = !unchanged && state.pending.contains(plan, x);
            let tombstoned = state.tombstones.contains(&x);
            let live = pending || (was_in_tables && !tombstoned);
            let (want_pending, want_tomb) = if in_new {
                (false, !live)
            } else {
                (live, false)
            };
            if want_pending != pending {
                pending_changes.push((x, want_pending));
            }
            if want_tomb != tombstoned {
                if want_tomb {
                    batch.put_cf(tomb_cf, keys::fingerprint(x), []);
                } else {
                    batch.delete_cf(tomb_cf, keys::fingerprint(x));
                }
            }
            fixes.push((x, pending, want_pending, tombstoned, want_tomb));
        }
        // A merge of the pending set leaves pending only fingerprints
        // made pending since its snapshot, which were stored nowhere
        // before: every pair of theirs was written marked pending, and
        // only those without pairs need their key put back. (Without the
        // pending set merged, one may be pending from before with pairs
        // written unmarked by an older format, and a key.)
        let keyed = |x| !job.pending || state.overlay.get(x).is_empty();
        // When the merge took the whole pending set of its snapshot and
        // the journal holds every write since, a fingerprint pending now
        // was pending then (and is leaving: the merge takes it in) or was
        // written since: the journal's ones pending now and not then are
        // all that stay, found without listing the tens of thousands
        // being merged as writers wait.
        let staying: Option<Vec<u64>> = match written_since {
            Some(fps) if job.pending => {
                let mut then = Walk::new(&g.pending);
                Some(
                    fps.iter()
                        .copied()
                        .filter(|&x| !then.has(x, |&f| f) && state.pending.contains(plan, x))
                        .collect(),
                )
            }
            _ => None,
        };
        write_pending(
            &mut batch,
            pending_cf,
            state.pending.len(),
            || staying.clone().unwrap_or_else(|| state.pending.all(plan)),
            &pending_changes,
            keyed,
        );
        let mut counters = records::Counters {
            table_fingerprints: new_table_fingerprints,
            ..state.counters()
        };
        counters.pending = counters.pending.saturating_sub(taken);
        for &(_, pending, want_pending, tombstoned, want_tomb) in &fixes {
            counters.moved((pending, tombstoned), (want_pending, want_tomb));
        }
        shared.put_counters(&mut batch, &counters)?;
        // What is left pending then: `staying` and the fingerprints the
        // fixes make pending, a set built here, before the state's write
        // lock, rather than the tens of thousands merged filtered out of
        // every table's runs under it.
        staying.map(|mut rest| {
            let joining = fixes
                .iter()
                .filter(|&&(_, pending, want, ..)| want && !pending);
            rest.extend(joining.map(|&(x, ..)| x));
            rest.sort_unstable();
            Pending::from_fingerprints(plan, &rest)
        })
    };
    let filed = files::filed(&outputs, db.tables());
    files::commit(shared, batch, &filed, true, |state| {
        debug_assert!(
            Arc::ptr_eq(&state.tables, &g.tables),
            "tables change only under the compaction lock"
        );
        retired.keep(replace(&mut state.tables, swapped(&g.tables, outputs)));
        retired.keep(replace(&mut state.upper, upper));
        if let Some((id_table, overlay, ..)) = id_parts {
            retired.keep(replace(&mut state.id_table, id_table));
            retired.keep(replace(&mut state.overlay, overlay));
        }
        // Every fingerprint that leaves the pending set is one the merge
        // took in (a tombstoned one that is pending again stays), and the
        // rest of those are not pending any more.
        let rebuilt = rest.is_some();
        match rest {
            Some(rest) => retired.keep(replace(&mut state.pending, rest)),
            None => state
                .pending
                .remove_permuted(&merged.unwrap_or_else(|| Pending::permuted(plan, &g.pending))),
        }
        for (x, pending, want_pending, tombstoned, want_tomb) in fixes {
            if want_pending && !pending && !rebuilt {
                state.pending.insert(plan, x);
            }
            if tombstoned && !want_tomb {
                state.tombstones.remove(&x);
            } else if want_tomb && !tombstoned {
                state.tombstones.insert(x);
            }
        }
    })?;
    if emptied_other {
        shared.id_families.other_emptied();
    }
    Ok(report)
}
