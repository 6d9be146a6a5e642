//! The upper levels as one uncompressed set: every fingerprint of the
//! levels above level 0, kept per table under its permutation as a few
//! sorted runs with a directory (the pending set's structure, see
//! [`pending`](super::pending)).
//!
//! Each level is a full set of tables, so a query probing every level
//! would pay a full probe set per level, small levels as dearly as level
//! 0 (the cost is the cache misses, not the run's length). Probed instead
//! with level 0's tables, in the same stages, the upper levels cost about
//! what a pending set of their size does. The tables stay what is stored,
//! merged and verified; this set is derived from them, built once every
//! table is held in memory and carried through every merge by the merge
//! itself (outside the locks: only merges change the tables, one at a
//! time), so it always holds exactly the upper levels' fingerprints.

use std::sync::Arc;

use super::levels::Job;
use super::pending::Pending;
use super::shared::Shared;
use crate::error::Result;
use crate::plan::Plan;
use crate::table::TableState;

/// The upper levels' fingerprints of `tables` (every level's, `per_level`
/// a level) as one set, when every table is held in memory and every
/// block of the upper levels decodes (`None` otherwise: queries then
/// probe the levels' tables, which report a damaged block).
pub(super) fn build(tables: &[TableState], per_level: usize) -> Option<Pending> {
    if per_level == 0 || tables.iter().any(|t| !t.in_memory() || t.has_unread()) {
        return None;
    }
    // One table a core.
    let per_table = super::parallel::map_indexed(per_level, super::parallel::cores(), |t| {
        let levels = || tables.iter().skip(per_level + t).step_by(per_level);
        let mut values = Vec::with_capacity(levels().map(|l| l.fingerprints() as usize).sum());
        for table in levels() {
            table.append_all(&mut values).ok()?;
        }
        // The levels are disjoint, each sorted: the stable sort merges
        // their runs.
        values.sort();
        Some(values)
    });
    Some(Pending::from_permuted(
        per_table.into_iter().collect::<Option<_>>()?,
    ))
}

/// Builds the set for the store's state when it has none and can have one
/// (see [`build`]). The caller holds the merge lock, so the tables do not
/// change meanwhile.
pub(super) fn install(shared: &Shared) {
    // Decoding and sorting take a while: from a snapshot, outside the
    // lock.
    let (tables, per_level) = {
        let state = shared.state.read();
        if state.upper.is_some() {
            return;
        }
        (Arc::clone(&state.tables), state.per_level)
    };
    let Some(upper) = build(&tables, per_level) else {
        return;
    };
    let mut state = shared.state.write();
    if Arc::ptr_eq(&state.tables, &tables) && state.upper.is_none() {
        state.upper = Some(Arc::new(upper));
    }
}

/// The set after `job`'s merge, from `old` (the set of the state the merge
/// read): a merge into level 0 takes its source levels' fingerprints out
/// (all of them when it empties every upper level); a merge into an upper
/// level takes out the tombstoned fingerprints it drops (`removes`,
/// increasing) and adds the pending ones it moves in (`pending`). Source
/// levels' other fingerprints move between upper levels and stay.
pub(super) fn after_merge(
    plan: &Plan,
    old: &Arc<Pending>,
    tables: &[TableState],
    per_level: usize,
    job: &Job,
    pending: &[u64],
    removes: &[u64],
) -> Result<Arc<Pending>> {
    if job.target == 0 {
        let level = |l: usize| &tables[l * per_level];
        let emptied = (1..tables.len() / per_level.max(1))
            .all(|l| job.sources.contains(&l) || level(l).fingerprints() == 0);
        if emptied {
            return Ok(Arc::new(Pending::new(plan.tables().len())));
        }
        let mut leaving = Vec::new();
        for &l in &job.sources {
            level(l).append_all(&mut leaving)?;
        }
        leaving.sort_unstable();
        let mut new = Pending::clone(old);
        new.remove_sorted(plan, &leaving);
        return Ok(Arc::new(new));
    }
    if pending.is_empty() && removes.is_empty() {
        return Ok(Arc::clone(old));
    }
    let mut new = Pending::clone(old);
    new.remove_sorted(plan, removes);
    new.insert_many(plan, pending);
    Ok(Arc::new(new))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::build;
    use crate::store::pending::Pending;
    use crate::store::{Options, Store};
    use crate::test_rng::TestRng;

    /// The set each merge carries forward equals the one built afresh
    /// from the levels' tables, through merges into every level and
    /// deletes; `verify` reports a set that differs.
    #[test]
    fn merges_carry_the_set_and_verify_checks_it() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::new()
            .block_size(64)
            .merge_threshold(40)
            .manual_compaction(true);
        let store = Store::create(dir.path().join("s"), &options).unwrap();
        let mut rng = TestRng::new(3);
        let mut stored = Vec::new();
        let mut largest = 0;
        let mut merged_into_0 = false;
        for round in 0..120u64 {
            for i in 0..37 {
                let fp = rng.next_u64();
                stored.push(fp);
                store.insert(fp, round * 100 + i).unwrap();
            }
            if round % 5 == 2 {
                let fp = stored[(rng.next_u64() % stored.len() as u64) as usize];
                store.delete_fingerprint(fp).unwrap();
            }
            let before = store.stats().levels[0].fingerprints;
            store.merge_due().unwrap();
            merged_into_0 |= store.stats().levels[0].fingerprints != before;
            let state = store.shared.state.read();
            let set = state
                .upper
                .as_deref()
                .expect("built when the store was created");
            let fresh = build(&state.tables, state.per_level).unwrap();
            for t in 0..state.per_level {
                assert_eq!(set.table_values(t), fresh.table_values(t), "round {round}");
            }
            largest = largest.max(set.len());
        }
        assert!(largest > 200 && merged_into_0, "{largest} {merged_into_0}");
        assert!(store.verify().unwrap().ok());

        {
            let mut state = store.shared.state.write();
            let mut set = Pending::clone(state.upper.as_ref().unwrap());
            match set.table_values(0).first() {
                Some(&one) => set.remove_sorted(store.plan(), &[one]),
                None => set.insert_many(store.plan(), &[rng.next_u64()]),
            }
            state.upper = Some(Arc::new(set));
        }
        let report = store.verify().unwrap();
        assert!(
            report.problems.iter().any(|p| p.contains("in-memory set")),
            "{:?}",
            report.problems
        );
    }
}
