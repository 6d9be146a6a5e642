//! `verify`: re-reads every table from disk and checks every block's
//! checksum, decoding, ordering and key, that all tables hold the same
//! fingerprint set, that each table's index record lists exactly its
//! blocks, and that pending, tombstone and id records agree with the
//! tables.

use std::collections::HashSet;

use super::shared::Shared;
use crate::codec::BlockView;
use crate::error::Result;
use crate::format::keys;
use crate::format::records::{self, IndexEntry};

/// What [`Store::verify`](super::Store::verify) found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Tables checked.
    pub tables: usize,
    /// Blocks checked, over all tables.
    pub blocks: u64,
    /// Fingerprints decoded in table 0.
    pub fingerprints: u64,
    /// Every problem found; empty when the store is sound.
    pub problems: Vec<String>,
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
    let _no_compaction = shared.compaction.lock();
    let _no_writes = shared.commit.lock();
    let db = &shared.db;
    let plan = &shared.plan;
    shared.check_families_current()?;
    let state = shared.state.read();
    let mut report = VerifyReport {
        tables: plan.tables().len(),
        ..Default::default()
    };
    let mut digests = Vec::new();
    let mut decoded = Vec::new();
    for (t, spec) in plan.tables().iter().enumerate() {
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
                digest.add(spec.permutation.invert(p));
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
    report.fingerprints = digests.first().map_or(0, |d| d.count);
    for (t, d) in digests.iter().enumerate().skip(1) {
        if Some(d) != digests.first() {
            report.problems.push(format!(
                "table {t} holds a different fingerprint set from table 0 ({} vs {} fingerprints)",
                d.count, report.fingerprints
            ));
        }
    }
    check_records(shared, &state, &mut report)?;
    Ok(report)
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
    let mut pairs = 0u64;
    let mut checked: HashSet<u64> = HashSet::new();
    let mut problems = Vec::new();
    let scanned = db.scan(db.family(keys::IDS_FAMILY)?, &[], |k, _| {
        pairs += 1;
        let Some((fp, id)) = keys::parse_id_pair(k) else {
            problems.push(format!("ids: key of {} bytes", k.len()));
            return Ok(true);
        };
        if checked.insert(fp) {
            match state.is_live(plan, fp) {
                Ok(true) => {}
                Ok(false) => problems.push(format!(
                    "id {id} belongs to fingerprint {fp:016x}, which is not stored"
                )),
                Err(e) => problems.push(format!("ids of {fp:016x}: {e}")),
            }
        }
        Ok(true)
    });
    if let Err(e) = scanned {
        problems.push(format!("ids: {e}"));
    }
    for p in problems {
        note(p);
    }
    if pairs != state.ids {
        note(format!(
            "{pairs} id records on disk, counters say {}",
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
