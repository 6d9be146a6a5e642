//! `verify`: re-reads every table from disk and checks every block's
//! checksum, decoding, ordering and key, that all tables of a level hold
//! the same fingerprint set and no fingerprint is in two levels, that each
//! table's index record lists exactly its blocks, and that pending,
//! tombstone and id records agree with the tables.

use std::collections::HashSet;

use super::pending::Pending;
use super::shared::Shared;
use super::state::State;
use crate::codec::BlockView;
use crate::error::Result;
use crate::format::ids::IdBlock;
use crate::format::keys;
use crate::format::records::{self, IndexEntry};

/// What [`Store::verify`](super::Store::verify) found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyReport {
    /// Tables checked (per level).
    pub tables: usize,
    /// Levels checked.
    pub levels: usize,
    /// Blocks checked, over all tables.
    pub blocks: u64,
    /// Fingerprints decoded in table 0 of every level.
    pub fingerprints: u64,
    /// Every problem found; empty when the store is sound.
    pub problems: Vec<String>,
    /// Sketch records checked (stores with sketches).
    pub sketches: u64,
}

impl VerifyReport {
    /// True when no problem was found.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Order-independent digest of a fingerprint set: count, sum and xor of
/// a strong mix of each member.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SetDigest {
    count: u64,
    sum: u64,
    xor: u64,
}

impl SetDigest {
    fn add(&mut self, fp: u64) {
        let mut z = fp.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        self.count += 1;
        self.sum = self.sum.wrapping_add(z);
        self.xor ^= z.rotate_left(17);
    }
}

pub(crate) fn verify(shared: &Shared) -> Result<VerifyReport> {
    let _no_compaction = shared.locks.merging();
    let _no_writes = shared.locks.commit();
    let db = &shared.db;
    let plan = &shared.plan;
    shared.check_families_current()?;
    let state = shared.state.read();
    let per_level = state.per_level;
    let mut report = VerifyReport {
        tables: per_level,
        levels: state.levels(),
        ..Default::default()
    };
    // The levels are disjoint: every fingerprint of a level above level 0
    // (read from memory; a block that cannot be read there is reported
    // by the scans below), with its level, to look up as each level's
    // table 0 is read from disk.
    let mut upper: Vec<(u64, usize)> = Vec::new();
    let mut values = Vec::new();
    for l in 1..state.levels() {
        let table = state.level(l);
        for j in 0..table.keys().len() {
            if table.decode_block(j, &mut values).is_ok() {
                upper.extend(values.iter().map(|&x| (x, l)));
            }
        }
    }
    upper.sort_unstable();
    let mut digests = Vec::new();
    let mut decoded = Vec::new();
    for t in 0..state.tables.len() {
        let level = t / per_level.max(1);
        let spec = &plan.tables()[t % per_level.max(1)];
        let table = &state.tables[t];
        let mut digest = SetDigest::default();
        let mut last: Option<u64> = None;
        let mut problems = Vec::new();
        let mut stored = Vec::new();
        let scanned = db.scan(db.table(t)?, &[], |k, v| {
            report.blocks += 1;
            let Some(key) = keys::parse_fingerprint(k) else {
                problems.push(format!("table {t}: block key of {} bytes", k.len()));
                return Ok(true);
            };
            stored.push(IndexEntry {
                key,
                len: u16::try_from(v.len()).unwrap_or(u16::MAX),
                count: crate::table::header_count(v),
            });
            let at = format!("table {t} block {key:016x}");
            if v.len() > shared.block_size {
                problems.push(format!(
                    "{at}: {} bytes exceeds the block size {}",
                    v.len(),
                    shared.block_size
                ));
            }
            let view = match BlockView::parse(v) {
                Ok(view) => view,
                Err(e) => {
                    problems.push(format!("{at}: {e}"));
                    return Ok(true);
                }
            };
            if view.first() != key {
                problems.push(format!(
                    "{at}: first fingerprint {:016x} differs from the key",
                    view.first()
                ));
            }
            let Some(code) = table.codes().get(view.code_id()) else {
                problems.push(format!("{at}: unknown Huffman code {}", view.code_id()));
                return Ok(true);
            };
            if let Err(e) = view.decode_into(code, &mut decoded) {
                problems.push(format!("{at}: {e}"));
                return Ok(true);
            }
            if let (Some(prev), Some(&first)) = (last, decoded.first()) {
                if first <= prev {
                    problems.push(format!(
                        "{at}: starts at or below the previous block's last fingerprint"
                    ));
                }
            }
            last = decoded.last().copied();
            for &p in &decoded {
                let x = spec.permutation.invert(p);
                digest.add(x);
                if t % per_level == 0 {
                    let from = upper.partition_point(|&(y, _)| y < x);
                    for &(_, other) in upper[from..].iter().take_while(|&&(y, _)| y == x) {
                        if other != level {
                            problems.push(format!(
                                "fingerprint {x:016x} is in levels {level} and {other}"
                            ));
                        }
                    }
                }
            }
            Ok(true)
        });
        match scanned {
            Ok(()) => check_index(shared, t, &stored, &mut problems)?,
            Err(e) => problems.push(format!("table {t}: {e}")),
        }
        if digest.count != table.fingerprints() {
            problems.push(format!(
                "table {t}: {} fingerprints on disk, {} by the block headers in memory",
                digest.count,
                table.fingerprints()
            ));
        }
        report.problems.extend(problems);
        digests.push(digest);
    }
    for (t, d) in digests.iter().enumerate() {
        let first = &digests[t - t % per_level];
        if t % per_level == 0 {
            report.fingerprints += d.count;
        } else if d != first {
            report.problems.push(format!(
                "table {t} holds a different fingerprint set from table {} of its level ({} vs {} fingerprints)",
                t - t % per_level,
                d.count,
                first.count
            ));
        }
    }
    if let Some(set) = state.upper.as_deref() {
        check_upper(set, &state, &mut report);
    }
    check_records(shared, &state, &mut report)?;
    Ok(report)
}

/// The in-memory set of the upper levels (see [`upper`](super::upper))
/// against the levels' tables it was derived from: the same values in
/// every table. (A block that does not decode is reported by the scans.)
fn check_upper(set: &Pending, state: &State, report: &mut VerifyReport) {
    let Some(expected) = super::upper::build(&state.tables, state.per_level) else {
        return;
    };
    for t in 0..state.per_level {
        let (held, stored) = (set.table_values(t), expected.table_values(t));
        if held != stored {
            report.problems.push(format!(
                "table {t}: the in-memory set of the levels above level 0 holds {} fingerprints, their tables {} ({} differ)",
                held.len(),
                stored.len(),
                differing(&held, &stored)
            ));
        }
    }
}

/// How many values are in one of the increasing `a` and `b` only.
fn differing(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => (i, n) = (i + 1, n + 1),
            std::cmp::Ordering::Greater => (j, n) = (j + 1, n + 1),
            std::cmp::Ordering::Equal => (i, j) = (i + 1, j + 1),
        }
    }
    n + (a.len() - i) + (b.len() - j)
}

/// Table `t`'s index record (of a store of the current format) against
/// the blocks `stored` in its family.
fn check_index(
    shared: &Shared,
    t: usize,
    stored: &[IndexEntry],
    problems: &mut Vec<String>,
) -> Result<()> {
    let db = &shared.db;
    let Some(bytes) = db.get(db.default_family()?, &keys::index(t as u16))? else {
        problems.push(format!("table {t} index: the record is missing"));
        return Ok(());
    };
    let listed = match records::decode_index(&bytes) {
        Ok(listed) => listed,
        Err(e) => {
            problems.push(format!("table {t} index: {e}"));
            return Ok(());
        }
    };
    let mut differences = listed
        .iter()
        .map(Some)
        .chain(std::iter::repeat(None))
        .zip(stored.iter().map(Some).chain(std::iter::repeat(None)))
        .take(listed.len().max(stored.len()))
        .filter(|(a, b)| a != b);
    if let Some((a, b)) = differences.next() {
        let show = |e: Option<&IndexEntry>| {
            e.map_or("nothing".to_string(), |e| {
                format!(
                    "block {:016x} of {} bytes holding {}",
                    e.key, e.len, e.count
                )
            })
        };
        problems.push(format!(
            "table {t} index: lists {} where the table stores {} ({} differences in all)",
            show(a),
            show(b),
            1 + differences.count()
        ));
    }
    Ok(())
}

/// Pending, tombstone and id records against the tables.
fn check_records(
    shared: &Shared,
    state: &super::state::State,
    report: &mut VerifyReport,
) -> Result<()> {
    let plan = &shared.plan;
    let db = &shared.db;
    let mut note = |p: String| report.problems.push(p);
    for fp in state.pending.all(plan) {
        match state.in_tables(plan, fp) {
            Ok(true) => note(format!(
                "pending fingerprint {fp:016x} is also in the tables"
            )),
            Ok(false) => {}
            Err(e) => note(format!("pending fingerprint {fp:016x}: {e}")),
        }
    }
    for &fp in &state.tombstones {
        match state.in_tables(plan, fp) {
            Ok(true) => {}
            Ok(false) => note(format!(
                "tombstone {fp:016x} names a fingerprint not in the tables"
            )),
            Err(e) => note(format!("tombstone {fp:016x}: {e}")),
        }
    }
    let (pairs, named) = check_ids(shared, state, &mut note)?;
    check_family(
        shared,
        keys::PENDING_FAMILY,
        state.pending.all(plan),
        &named,
        &mut note,
    )?;
    let mut tombstones: Vec<u64> = state.tombstones.iter().copied().collect();
    tombstones.sort_unstable();
    check_family(shared, keys::TOMBSTONES_FAMILY, tombstones, &[], &mut note)?;
    report.sketches = super::sketches::check(shared, state, &mut note)?;
    if shared.idf.is_some() {
        if let Err(e) = super::open::read_idf(db) {
            note(format!("idf: {e}"));
        }
    }
    if pairs != state.ids {
        note(format!(
            "{pairs} (fingerprint, id) pairs stored, counters say {}",
            state.ids
        ));
    }
    match db.get(db.default_family()?, keys::COUNTERS)? {
        Some(bytes) => {
            if let Err(e) = records::decode_counters(&bytes) {
                note(format!("counters: {e}"));
            }
        }
        None => note("counters record is missing".into()),
    }
    Ok(())
}

/// The keys of the `pending` or `tombstones` family, read from disk, with
/// the fingerprints `named` (increasing) there by other records, against
/// the fingerprints (increasing) the store holds there in memory.
fn check_family(
    shared: &Shared,
    family: &str,
    memory: Vec<u64>,
    named: &[u64],
    note: &mut impl FnMut(String),
) -> Result<()> {
    let db = &shared.db;
    let mut on_disk = Vec::with_capacity(memory.len());
    let scanned = db.scan(db.family(family)?, &[], |k, _| {
        match keys::parse_fingerprint(k) {
            Some(fp) => on_disk.push(fp),
            None => note(format!("{family}: key of {} bytes", k.len())),
        }
        Ok(true)
    });
    if let Err(e) = scanned {
        note(format!("{family}: {e}"));
        return Ok(());
    }
    if !named.is_empty() {
        on_disk.extend_from_slice(named);
        on_disk.sort_unstable();
        on_disk.dedup();
    }
    if on_disk != memory {
        let first = on_disk
            .iter()
            .zip(&memory)
            .position(|(a, b)| a != b)
            .unwrap_or(on_disk.len().min(memory.len()));
        note(format!(
            "{family}: {} fingerprints named on disk, {} in memory, first difference at {first}",
            on_disk.len(),
            memory.len()
        ));
    }
    Ok(())
}

/// The `ids` family and the id blocks, read from disk, against the tables
/// and each other: every table-0 block has one id block of the same count
/// and no other id block is stored; a pair added outside the id blocks
/// belongs to a stored fingerprint and is not in its id block, a removed
/// pair is in it; a tombstoned fingerprint has no ids left; a pair marked
/// pending belongs to a fingerprint of no level or of one above level 0.
/// Returns the number of pairs stored and the fingerprints of no level
/// that pairs marked pending name (pending, increasing).
fn check_ids(
    shared: &Shared,
    state: &super::state::State,
    note: &mut impl FnMut(String),
) -> Result<(u64, Vec<u64>)> {
    let plan = &shared.plan;
    let db = &shared.db;
    let mut overlay = super::ids::Overlay::default();
    let mut marked: Vec<u64> = Vec::new();
    let mut named = Vec::new();
    let mut in_both = 0usize;
    for name in keys::IDS_FAMILIES {
        let mut held = 0usize;
        let scanned = db.scan(db.family(name)?, &[], |k, v| {
            match (keys::parse_id_pair(k), keys::parse_id_mark(v)) {
                (Some((fp, id)), Some(added)) => {
                    held += 1;
                    if name != keys::IDS_FAMILY && overlay.get(fp).iter().any(|&(e, _)| e == id) {
                        in_both += 1;
                    }
                    overlay.set(fp, id, Some(added));
                    if keys::marks_pending(v) {
                        marked.push(fp);
                    }
                }
                (None, _) => note(format!("{name}: key of {} bytes", k.len())),
                (_, None) => note(format!("{name}: value of {} bytes", v.len())),
            }
            Ok(true)
        });
        if let Err(e) = scanned {
            note(format!("{name}: {e}"));
        }
        // No merge runs (the merge lock is held): writers put into the
        // current family, and the other is empty unless the handle knows
        // it may hold pairs.
        let families = &shared.id_families;
        if held > 0 && name == families.other() && !families.other_holds() {
            note(format!(
                "{name}: {held} pairs, in the family the handle takes as empty"
            ));
        }
    }
    if in_both > 0 {
        note(format!("ids: {in_both} pairs in both ids families"));
    }
    marked.sort_unstable();
    marked.dedup();
    // Equal counts and every pair on disk in memory: the same pairs.
    let differing = overlay
        .iter()
        .filter(|&(fp, entries)| state.overlay.get(fp) != entries)
        .count();
    if differing > 0 || overlay.len() != state.overlay.len() {
        note(format!(
            "ids: {} entries on disk, {} in memory; {differing} fingerprints differ",
            overlay.len(),
            state.overlay.len()
        ));
    }
    let mut pairs = 0u64;
    let mut seen: HashSet<u64> = HashSet::new();
    let Some(table0) = state.tables.first() else {
        return Ok((0, named));
    };
    let block_keys = table0.keys();
    let mut next = 0usize;
    let mut values = Vec::new();
    let mut ids = Vec::new();
    let scanned = db.scan(db.family(keys::ID_BLOCKS_FAMILY)?, &[], |k, v| {
        let Some(key) = keys::parse_fingerprint(k) else {
            note(format!("id blocks: key of {} bytes", k.len()));
            return Ok(true);
        };
        while next < block_keys.len() && block_keys[next] < key {
            note(format!("id block {:016x}: missing", block_keys[next]));
            next += 1;
        }
        if block_keys.get(next) != Some(&key) {
            note(format!("id block {key:016x}: no table-0 block has its key"));
            return Ok(true);
        }
        let j = next;
        next += 1;
        let block = match IdBlock::parse(v) {
            Ok(block) if block.count() == usize::from(table0.count(j)) => block,
            Ok(block) => {
                note(format!(
                    "id block {key:016x}: {} fingerprints, its table-0 block {}",
                    block.count(),
                    table0.count(j)
                ));
                return Ok(true);
            }
            Err(e) => {
                note(format!("id block {key:016x}: {e}"));
                return Ok(true);
            }
        };
        if let Err(e) = table0.decode_block(j, &mut values) {
            note(format!("id block {key:016x}: its table-0 block: {e}"));
            return Ok(true);
        }
        for (position, &fp) in values.iter().enumerate() {
            ids.clear();
            block.ids_into(position, &mut ids);
            for &(id, added) in overlay.get(fp) {
                if added == ids.binary_search(&id).is_ok() {
                    note(format!(
                        "ids: pair ({fp:016x}, {id}) is marked {} but is {}in its id block",
                        if added { "added" } else { "removed" },
                        if added { "" } else { "not " }
                    ));
                }
            }
            if !overlay.get(fp).is_empty() {
                seen.insert(fp);
                if marked.binary_search(&fp).is_ok() {
                    note(format!(
                        "ids: a pair of {fp:016x} is marked pending but its fingerprint is in level 0"
                    ));
                }
            }
            overlay.apply(fp, &mut ids);
            if !ids.is_empty() && state.tombstones.contains(&fp) {
                note(format!(
                    "deleted fingerprint {fp:016x} still has {} ids",
                    ids.len()
                ));
            }
            pairs += ids.len() as u64;
        }
        Ok(true)
    });
    if let Err(e) = scanned {
        note(format!("id blocks: {e}"));
    }
    for &key in &block_keys[next.min(block_keys.len())..] {
        note(format!("id block {key:016x}: missing"));
    }
    let mut outside: Vec<u64> = overlay
        .fingerprints()
        .filter(|fp| !seen.contains(fp))
        .collect();
    outside.sort_unstable();
    for fp in outside {
        // A fingerprint of level 0 has an id block (checked above); one
        // of another level, like a pending one, has every pair here.
        let upper = match (state.in_base(plan, fp), state.in_tables(plan, fp)) {
            (Ok(true), _) => continue,
            (Ok(false), Ok(upper)) => upper,
            (Err(e), _) | (_, Err(e)) => {
                note(format!("ids of {fp:016x}: {e}"));
                continue;
            }
        };
        if !upper && marked.binary_search(&fp).is_ok() {
            named.push(fp);
        }
        for &(id, added) in overlay.get(fp) {
            if !added {
                note(format!(
                    "ids: pair ({fp:016x}, {id}) is marked removed but its fingerprint is not in level 0"
                ));
            } else if !upper && !state.pending.contains(plan, fp) {
                note(format!(
                    "id {id} belongs to fingerprint {fp:016x}, which is not stored"
                ));
            } else if upper && state.tombstones.contains(&fp) {
                note(format!("deleted fingerprint {fp:016x} still has id {id}"));
            } else {
                pairs += 1;
            }
        }
    }
    Ok((pairs, named))
}

#[cfg(test)]
mod tests {
    use crate::store::{Options, Store};

    /// `verify` compares the `pending`, `tombstones` and `ids` families
    /// on disk with what the store holds in memory (what queries and the
    /// next merge use), and reports a difference in any of them.
    #[test]
    fn families_on_disk_are_checked_against_memory() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options::new().manual_compaction(true);
        let store = Store::create(dir.path().join("s"), &options).unwrap();
        for i in 0..50u64 {
            store
                .insert(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i)
                .unwrap();
        }
        store.compact().unwrap();
        for i in 50..80u64 {
            store
                .insert(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i)
                .unwrap();
        }
        store.delete_fingerprint(0x9e37_79b9_7f4a_7c15).unwrap();
        assert!(store.verify().unwrap().ok());
        let plan = store.plan().clone();
        let problems = |store: &Store| store.verify().unwrap().problems;

        let fp = 79u64.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        store.shared.state.write().pending.remove(&plan, fp);
        let found = problems(&store);
        assert!(found.iter().any(|p| p.starts_with("pending:")), "{found:?}");
        store.shared.state.write().pending.insert(&plan, fp);

        let tomb = 0x9e37_79b9_7f4a_7c15u64;
        store.shared.state.write().tombstones.remove(&tomb);
        let found = problems(&store);
        assert!(
            found.iter().any(|p| p.starts_with("tombstones:")),
            "{found:?}"
        );
        store.shared.state.write().tombstones.insert(tomb);

        store
            .shared
            .state
            .write()
            .overlay
            .set(fp, 1_000_000, Some(true));
        let found = problems(&store);
        assert!(found.iter().any(|p| p.contains("in memory;")), "{found:?}");
        store.shared.state.write().overlay.set(fp, 1_000_000, None);
        assert!(store.verify().unwrap().ok());
    }
}
