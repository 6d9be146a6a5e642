//! Flat sequences for one-table stores (see [`TableState::flattened`]).
//!
//! A one-table store's probabilistic and exact queries probe one header
//! at a time, many headers a query; level 0's table (the largest) is
//! also held as one flat sequence by header, which such a probe reads in
//! place of the blocks. Merges into level 0 build it for the table they
//! write (or, for a table too large to hold two at once, right after, see
//! [`deferred`]); a table read at open gets it here once its blocks are
//! all held in memory (at the end of the warming). Until then, and for a
//! table kept on disk (see
//! [`Options::memory_budget`](super::Options::memory_budget), which does
//! not count the sequence), probes read the blocks. Other levels are
//! small and are probed through their blocks.

use std::sync::Arc;

use super::shared::Shared;
use crate::table::{FlatBuilder, TableState};

/// Gives level 0's table of a one-table store its flat sequence when it
/// is held in memory, has fingerprints and has none yet. The caller holds
/// the merge lock, so the table does not change meanwhile (it is rebuilt
/// from a snapshot and swapped in when it is still the state's).
pub(super) fn install(shared: &Shared) {
    let Some(header) = shared.plan.header_bits() else {
        return;
    };
    let tables = {
        let state = shared.state.read();
        Arc::clone(&state.tables)
    };
    let Some(table) = tables.first().filter(|t| wants_flat(t)) else {
        return;
    };
    let built = table.clone().flattened(header);
    if built.flat().is_none() {
        return;
    }
    shared.state.write().replace_tables(&tables, [(0, built)]);
}

/// The table as a merge into level 0 of a one-table store wrote it, with
/// its flat sequence (unchanged for other stores and levels), unless that
/// is [`deferred`].
pub(super) fn flattened(shared: &Shared, level: usize, table: TableState) -> TableState {
    match shared.plan.header_bits() {
        Some(header) if level == 0 && !deferred(shared, &table, header) => table.flattened(header),
        _ => table,
    }
}

/// Whether a merge into level 0 leaves `table`'s flat sequence to
/// [`install`], run once the merge is done and the replaced table's
/// sequence freed: when the tables and id blocks (by RocksDB's accounting,
/// as the budget is checked at open) and two sequences would not fit the
/// memory budget together. Queries probe the blocks meanwhile (at 1B
/// fingerprints, 4.6 GB a sequence, for the seconds its build takes).
fn deferred(shared: &Shared, table: &TableState, header: u8) -> bool {
    let Some(flat) = FlatBuilder::heap_bytes(u32::from(header), table.fingerprints()) else {
        return false;
    };
    let stored = || Some(shared.db.table_bytes().ok()? + shared.db.id_block_bytes().ok()?);
    stored().is_none_or(|held| {
        held.saturating_add(flat.saturating_mul(2)) > shared.options.effective_memory_budget()
    })
}

fn wants_flat(table: &TableState) -> bool {
    // Whether a block is unread is asked last: it looks at every slot.
    table.flat().is_none() && table.in_memory() && table.fingerprints() > 0 && !table.has_unread()
}

#[cfg(test)]
mod tests {
    use crate::store::{Options, Store};
    use crate::test_rng::TestRng;

    /// A one-table store's level 0 is flat once merged into, and again
    /// once a reopened store has read it into memory (not before, nor
    /// with its tables on disk); a store of several tables never is. The
    /// answers are those of the blocks.
    #[test]
    fn level_0_of_one_table_stores_is_flat_when_held_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let options = Options::new()
            .tables(1)
            .expected_size(1 << 10)
            .block_size(64)
            .manual_compaction(true);
        let store = Store::create(&path, &options).unwrap();
        let mut rng = TestRng::new(7);
        let pairs: Vec<(u64, u64)> = (0..3000u64).map(|i| (rng.next_u64(), i)).collect();
        store.insert_many(&pairs).unwrap();
        store.compact().unwrap();
        let flat = store.stats().flat_bytes;
        assert!(flat.is_some_and(|b| b > 3000 * 50 / 8), "{flat:?}");
        let answers = |store: &Store| {
            pairs
                .iter()
                .map(|&(fp, _)| store.query(fp ^ 0b1011, 3).unwrap())
                .collect::<Vec<_>>()
        };
        let want = answers(&store);
        assert!(want.iter().all(|m| m.len() == 1));
        drop(store);

        let store = Store::open(&path, &options.clone().warm(false)).unwrap();
        assert_eq!(store.stats().flat_bytes, None);
        assert_eq!(answers(&store), want);
        drop(store);
        let store = Store::open(&path, &options.clone().memory_budget(0)).unwrap();
        store.wait_warm();
        assert_eq!(store.stats().flat_bytes, None);
        assert_eq!(answers(&store), want);
        drop(store);
        let store = Store::open(&path, &options).unwrap();
        store.wait_warm();
        assert_eq!(store.stats().flat_bytes, flat);
        assert_eq!(answers(&store), want);
        let held =
            store.shared.db.table_bytes().unwrap() + store.shared.db.id_block_bytes().unwrap();
        drop(store);
        // The budget decides whether the tables and id blocks are held in
        // memory; the flat sequence comes with them, outside the budget.
        let tight = options.clone().memory_budget(held - 1);
        let store = Store::open(&path, &tight).unwrap();
        store.wait_warm();
        assert!(!store.stats().tables_in_memory);
        assert_eq!(store.stats().flat_bytes, None);
        assert_eq!(answers(&store), want);
        drop(store);
        let store = Store::open(&path, &options.clone().memory_budget(held)).unwrap();
        store.wait_warm();
        assert!(store.stats().tables_in_memory);
        assert_eq!(store.stats().flat_bytes, flat);
        assert_eq!(answers(&store), want);
        // A merge into level 0 rebuilds it, the budget notwithstanding
        // (here right after the merge: two would not fit the budget).
        let more: Vec<(u64, u64)> = (0..500u64).map(|i| (rng.next_u64(), 5000 + i)).collect();
        store.insert_many(&more).unwrap();
        store.compact().unwrap();
        assert!(store.stats().flat_bytes > flat);
        assert_eq!(answers(&store), want);
        drop(store);

        let dir = tempfile::tempdir().unwrap();
        let options = Options::new().expected_size(1 << 10).block_size(64);
        let store = Store::create(dir.path().join("s"), &options).unwrap();
        store.insert_many(&pairs).unwrap();
        store.compact().unwrap();
        assert_eq!(store.stats().flat_bytes, None);
    }
}
