//! Membership filters for tables read at open or bulk loaded.
//!
//! Every write asks each level's table 0 whether it holds the write's
//! fingerprint; a merge gives the table it writes a filter that answers
//! "no" for nearly every new fingerprint (see [`TableState::filtered`]),
//! once the handle has written (a bulk load into a handle that has not is
//! not kept waiting for one). Filters are memory only, so a reopened
//! store has none until merges rewrite its levels, and until then every
//! write probes every level. Queries do not use them: a table read at
//! open gets its filter here once the handle has written (see
//! [`Shared::want_filters`]) and the table's blocks are all held in
//! memory (at the first write, by the compactor, or at the end of the
//! warming), beside writers and queries.

use std::sync::Arc;

use super::shared::Shared;
use crate::table::TableState;

/// Gives each level's table 0 that is held in memory, has fingerprints
/// and has no filter one. The caller holds the merge lock, so the tables
/// do not change meanwhile (they are rebuilt from a snapshot and swapped
/// in when they are still the state's).
pub(super) fn install(shared: &Shared) {
    if !wanted(shared) {
        return;
    }
    let (tables, per_level) = {
        let state = shared.state.read();
        (Arc::clone(&state.tables), state.per_level)
    };
    let wanted: Vec<usize> = (0..tables.len())
        .step_by(per_level.max(1))
        .filter(|&t| wants_filter(&tables[t]))
        .collect();
    if wanted.is_empty() {
        return;
    }
    let built = super::parallel::map_indexed(wanted.len(), super::parallel::cores(), |i| {
        tables[wanted[i]].clone().filtered()
    });
    shared
        .state
        .write()
        .replace_tables(&tables, wanted.into_iter().zip(built));
}

/// Whether the handle has written and some level's table 0 held in
/// memory still has no filter (checked without the merge lock).
pub(super) fn missing(shared: &Shared) -> bool {
    if !wanted(shared) {
        return false;
    }
    let state = shared.state.read();
    (0..state.levels()).any(|l| wants_filter(state.level(l)))
}

/// Whether the handle has written (see [`Shared::want_filters`]).
pub(super) fn wanted(shared: &Shared) -> bool {
    shared
        .filters_wanted
        .load(std::sync::atomic::Ordering::Relaxed)
}

fn wants_filter(table: &TableState) -> bool {
    table.in_memory() && !table.has_unread() && !table.has_filter() && table.fingerprints() > 0
}

#[cfg(test)]
mod tests {
    use crate::store::{Options, Store};
    use crate::test_rng::TestRng;

    /// Each level's table 0 of a reopened store, with blocks in memory,
    /// has its filter once the handle writes, and not before (queries do
    /// not use them); the answers do not change.
    #[test]
    fn reopened_levels_get_their_filters() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let options = Options::new()
            .block_size(64)
            .merge_threshold(50)
            .manual_compaction(true);
        let store = Store::create(&path, &options).unwrap();
        let mut rng = TestRng::new(5);
        let fps: Vec<u64> = (0..3000).map(|_| rng.next_u64()).collect();
        for (i, &fp) in fps.iter().enumerate() {
            store.insert(fp, i as u64).unwrap();
            if i % 50 == 49 {
                store.merge_due().unwrap();
            }
        }
        let held = |store: &Store| {
            let state = store.shared.state.read();
            (0..state.levels())
                .filter(|&l| state.level(l).fingerprints() > 0)
                .map(|l| state.level(l).has_filter())
                .collect::<Vec<_>>()
        };
        assert!(held(&store).len() >= 2, "{:?}", held(&store));
        drop(store);

        let store = Store::open(&path, &options.clone().warm(false)).unwrap();
        assert!(
            held(&store).iter().all(|&f| !f),
            "memory only, never stored"
        );
        drop(store);
        let store = Store::open(&path, &options).unwrap();
        store.wait_warm();
        let unfiltered = held(&store);
        assert!(unfiltered.iter().all(|&f| !f), "{unfiltered:?}");
        store.insert(rng.next_u64(), 1 << 40).unwrap();
        let filtered = held(&store);
        assert!(filtered.iter().all(|&f| f), "{filtered:?}");
        for (i, &fp) in fps.iter().enumerate() {
            assert_eq!(store.ids(fp).unwrap(), vec![i as u64]);
        }
        assert!(store.verify().unwrap().ok());
    }

    /// With the background compactor, the first write has it build the
    /// filters.
    #[test]
    fn the_compactor_builds_them_after_the_first_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let options = Options::new().block_size(64);
        let store = Store::create(&path, &options).unwrap();
        let mut rng = TestRng::new(6);
        let pairs: Vec<(u64, u64)> = (0..2000u64).map(|i| (rng.next_u64(), i)).collect();
        store.insert_many(&pairs).unwrap();
        store.compact().unwrap();
        drop(store);
        let store = Store::open(&path, &options).unwrap();
        store.wait_warm();
        let level0 = |store: &Store| store.shared.state.read().level(0).has_filter();
        assert!(!level0(&store));
        store.insert(rng.next_u64(), 5000).unwrap();
        let start = std::time::Instant::now();
        while !level0(&store) {
            assert!(start.elapsed().as_secs() < 30, "no filter after a write");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// A bulk load into a handle that has not written builds no filter;
    /// the first write has it built, and a bulk load after that builds
    /// its own. Answers are the same throughout.
    #[test]
    fn a_bulk_load_waits_for_no_filter() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::new()
            .block_size(64)
            .merge_threshold(100)
            .manual_compaction(true);
        let store = Store::create(dir.path().join("s"), &options).unwrap();
        let mut rng = TestRng::new(7);
        let pairs: Vec<(u64, u64)> = (0..3000u64).map(|i| (rng.next_u64(), i)).collect();
        let level0 = |store: &Store| store.shared.state.read().level(0).has_filter();
        store.insert_many(&pairs[..1000]).unwrap();
        assert!(!level0(&store));
        for &(fp, id) in &pairs[..1000] {
            assert_eq!(store.ids(fp).unwrap(), vec![id]);
        }
        // A write that is already stored changes nothing but asks for
        // the filters.
        store.insert(pairs[0].0, pairs[0].1).unwrap();
        assert!(level0(&store));
        store.insert_many(&pairs[1000..]).unwrap();
        assert!(level0(&store));
        for &(fp, id) in &pairs {
            assert_eq!(store.ids(fp).unwrap(), vec![id]);
        }
        assert!(store.verify().unwrap().ok());
    }
}
