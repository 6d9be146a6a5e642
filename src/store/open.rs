//! Creating a store and opening one: everything in memory (block indexes,
//! pending fingerprints, tombstones) is rebuilt from what RocksDB holds,
//! so a store reopened after a crash answers exactly as before it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::health::Health;
use super::ids::{FpSet, IdTable, Overlay};
use super::levels::LEVELS;
use super::locks::Locks;
use super::options::{Options, DEFAULT_BLOCK_SIZE, DEFAULT_EXPECTED_SIZE, DEFAULT_MAX_DISTANCE};
use super::pending::Pending;
use super::shared::Shared;
use super::state::State;
use super::warm::{Gate, LazyBlocks};
use super::write::Queue;
use crate::error::{Error, Location, Result};
use crate::format::manifest::{Manifest, ManifestError};
use crate::format::{keys, records, FORMAT_VERSION};
use crate::plan::Plan;
use crate::storage::{self, Db};
use crate::table::{Codebook, TableState};

/// Code ids are allocated from 0, one per rebuild of a table's code; a
/// stored id past this bound can only be corruption.
const MAX_CODE_ID: u32 = 1 << 20;

/// Creates a new store in `dir`, which must be absent or empty.
pub(crate) fn create(dir: &Path, options: &Options) -> Result<Shared> {
    options.check_create()?;
    // `check` bounded it by MAX_SUPPORTED_DISTANCE, far below 256.
    let k = options
        .max_distance
        .unwrap_or(DEFAULT_MAX_DISTANCE)
        .min(255) as u8;
    let expected_size = options.expected_size.unwrap_or(DEFAULT_EXPECTED_SIZE);
    let plan = Plan::for_size(k, expected_size, options.tables)?;
    let block_size = options.block_size.unwrap_or(DEFAULT_BLOCK_SIZE);
    let manifest = Manifest {
        version: FORMAT_VERSION,
        plan,
        block_size: block_size as u16,
        expected_size,
        sketches: options.sketches.unwrap_or(false),
        idf: options.idf.is_some(),
        levels: LEVELS as u8,
    };
    let tables = manifest.plan.tables().len() * LEVELS;
    // Build the store in a staging directory and rename it into place, so
    // a crash during creation leaves `dir` as it was.
    let staging = storage::staging_directory(dir)?;
    let built = (|| {
        let db = Db::create(&staging, tables, manifest.sketches)?;
        let mut batch = storage::batch();
        let default = db.default_family()?;
        batch.put_cf(default, keys::MANIFEST, manifest.encode());
        if let Some(idf) = &options.idf {
            batch.put_cf(
                default,
                keys::IDF,
                crate::format::idf::encode_idf(idf.documents(), idf.common()),
            );
        }
        batch.put_cf(
            default,
            keys::COUNTERS,
            records::encode_counters(&records::Counters::default()),
        );
        for t in 0..tables {
            batch.put_cf(
                default,
                keys::index(t as u16),
                records::encode_index(std::iter::empty()),
            );
        }
        db.write(batch, true)?;
        drop(db);
        storage::write_marker(&staging)?;
        storage::publish(&staging, dir)
    })();
    if let Err(e) = built {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    let db = Db::open(dir)?;
    load(dir, db, manifest, options)
}

/// Opens the store in `dir`, checking `options` against its manifest.
pub(crate) fn open(dir: &Path, options: &Options) -> Result<Shared> {
    options.check()?;
    storage::check_directory(dir)?;
    let db = Db::open(dir)?;
    let bytes = db
        .get(db.default_family()?, keys::MANIFEST)?
        .ok_or_else(|| Error::corrupt(Location::Manifest, "manifest record is missing"))?;
    let manifest = Manifest::decode(&bytes).map_err(|e| match e {
        ManifestError::Version(found) => Error::UnsupportedVersion {
            what: "manifest",
            supported: u32::from(FORMAT_VERSION),
            found: u32::from(found),
        },
        ManifestError::Corrupt(reason) => Error::corrupt(Location::Manifest, reason),
    })?;
    // A store of format 4 and older has one level's families, or every
    // level's when an upgrade added them and was interrupted.
    let per_level = manifest.plan.tables().len();
    let levels = usize::from(manifest.levels);
    let upgrading = manifest.version < 5 && db.tables() == per_level * LEVELS;
    if db.tables() != per_level * levels && !upgrading {
        return Err(Error::corrupt(
            Location::Database,
            format!(
                "{} table column families for {levels} levels of {per_level} tables",
                db.tables(),
            ),
        ));
    }
    if manifest.sketches != db.has_sketches_family() {
        return Err(Error::corrupt(
            Location::Database,
            format!(
                "the manifest says sketches {}, the sketches family is {}",
                if manifest.sketches {
                    "kept"
                } else {
                    "not kept"
                },
                if db.has_sketches_family() {
                    "present"
                } else {
                    "missing"
                }
            ),
        ));
    }
    check_compatible(&manifest, options)?;
    let mut db = db;
    // The first step of the upgrades to format 3 and to format 7 (see
    // `upgrade`): the family each brings, added empty.
    for (family, since) in [(keys::ID_BLOCKS_FAMILY, 3), (keys::IDS_ALT_FAMILY, 7)] {
        if db.has_family(family) {
            continue;
        }
        if manifest.version >= since {
            return Err(Error::corrupt(
                Location::Database,
                format!("column family {family} is missing"),
            ));
        }
        db.add_family(family)?;
    }
    super::files::finish_interrupted(&db, dir)?;
    if manifest.version < 5 {
        // The first step of the upgrade to format 5: every level's
        // families, each with an empty index record (the levels above
        // level 0 are empty until the store of format 5 writes them).
        db.add_table_families(per_level * LEVELS)?;
        if manifest.version >= 2 {
            let mut batch = storage::batch();
            for t in per_level..per_level * LEVELS {
                batch.put_cf(
                    db.default_family()?,
                    keys::index(t as u16),
                    records::encode_index(std::iter::empty()),
                );
            }
            db.write(batch, true)?;
        }
    }
    let version = manifest.version;
    let shared = load(dir, db, manifest, options)?;
    if version < FORMAT_VERSION {
        upgrade(&shared, version)?;
    }
    // What recovery replayed from the log stays in memtables (RocksDB is
    // told not to flush during recovery, which would delay the open);
    // flush it now, behind the open, so the next open need not replay it.
    shared.db.start_flush();
    Ok(shared)
}

/// Creation options given at open must agree with the manifest.
fn check_compatible(m: &Manifest, o: &Options) -> Result<()> {
    let mismatch = |option: &'static str, stored: String, requested: String| {
        Err(Error::IncompatibleOptions {
            option,
            stored,
            requested,
        })
    };
    let k = m.plan.max_distance();
    if let Some(asked) = o.max_distance {
        if asked != u32::from(k) {
            return mismatch("max_distance", k.to_string(), asked.to_string());
        }
    }
    if let Some(asked) = o.sketches {
        if asked != m.sketches {
            return mismatch("sketches", m.sketches.to_string(), asked.to_string());
        }
    }
    let tables = m.plan.tables().len();
    if let Some(asked) = o.tables {
        if asked as usize != tables {
            return mismatch("tables", tables.to_string(), asked.to_string());
        }
    }
    if let Some(size) = o.expected_size {
        // The size shapes the plan through its blocks, and a one-table
        // plan through its header width too.
        let asked = crate::plan::Plan::for_size(k, size, o.tables)?;
        let differs =
            asked.blocks() != m.plan.blocks() || asked.header_bits() != m.plan.header_bits();
        if differs && size != m.expected_size {
            return mismatch(
                "expected_size",
                m.expected_size.to_string(),
                size.to_string(),
            );
        }
    }
    if let Some(b) = o.block_size {
        if b != usize::from(m.block_size) {
            return mismatch("block_size", m.block_size.to_string(), b.to_string());
        }
    }
    Ok(())
}

fn fingerprint_key(family: &'static str, k: &[u8]) -> Result<u64> {
    keys::parse_fingerprint(k).ok_or_else(|| {
        Error::corrupt(
            Location::Record { family },
            format!("key of {} bytes, expected 8", k.len()),
        )
    })
}

/// Table `t` from its index record: held in memory and read on first use,
/// or (`on_disk`, the tables exceed the memory budget) read through
/// RocksDB by every probe.
fn open_table(
    db: &Db,
    t: usize,
    codes: Arc<Codebook>,
    on_disk: bool,
    gate: &Arc<Gate>,
) -> Result<TableState> {
    let location = Location::TableIndex { table: t };
    let bytes = db
        .get(db.default_family()?, &keys::index(t as u16))?
        .ok_or_else(|| Error::corrupt(location.clone(), "the table index record is missing"))?;
    let entries = records::decode_index(&bytes).map_err(|r| Error::corrupt(location, r))?;
    drop(bytes);
    Ok(if on_disk {
        let keys = entries.iter().map(|e| e.key).collect();
        let sizes = entries
            .iter()
            .map(|e| (u32::from(e.len), e.count))
            .collect();
        TableState::on_disk(t, keys, sizes, codes, Arc::new(db.table_blocks(true)))
    } else {
        let source = LazyBlocks {
            blocks: db.table_blocks(false),
            gate: Arc::clone(gate),
        };
        TableState::lazy(t, &entries, codes, Arc::new(source))
    })
}

/// Reads table `t` of a store of format 1 (no index records) by scanning
/// its blocks: into memory, or (`on_disk`) only each block's key, length
/// and count.
fn scan_table(db: &Db, t: usize, codes: Arc<Codebook>, on_disk: bool) -> Result<TableState> {
    if !on_disk {
        return super::warm::read_table(db, t, codes, &|_| false, &|| false)?
            .ok_or_else(|| Error::InvalidArgument("reading a table was stopped".into()));
    }
    let mut block_keys = Vec::new();
    let mut sizes = Vec::new();
    db.scan(db.table(t)?, &[], |k, v| {
        block_keys.push(super::warm::block_key(k)?);
        let len = u32::try_from(v.len()).unwrap_or(u32::MAX);
        sizes.push((len, crate::table::header_count(v)));
        Ok(true)
    })?;
    let source = Arc::new(db.table_blocks(true));
    Ok(TableState::on_disk(t, block_keys, sizes, codes, source))
}

/// The document-frequency record of a store whose manifest says it has one.
pub(crate) fn read_idf(db: &Db) -> Result<crate::simhash::Idf> {
    let bad = |what: String| {
        Error::corrupt(
            Location::Record {
                family: storage::DEFAULT_FAMILY,
            },
            what,
        )
    };
    let bytes = db
        .get(db.default_family()?, keys::IDF)?
        .ok_or_else(|| bad("the manifest names an idf record, which is missing".into()))?;
    let (documents, common) = crate::format::idf::decode_idf(&bytes).map_err(bad)?;
    Ok(crate::simhash::Idf::from_parts(documents, common))
}

/// The manifest of `shared`'s store at `version`.
fn manifest_of(shared: &Shared, version: u16) -> Manifest {
    Manifest {
        version,
        plan: shared.plan.clone(),
        block_size: shared.block_size as u16,
        expected_size: shared.expected_size,
        sketches: shared.sketches,
        idf: shared.idf.is_some(),
        levels: if version >= 5 { LEVELS as u8 } else { 1 },
    }
}

/// Upgrades a store of an older format just opened, one version at a
/// time: to 2 (see [`upgrade_to_2`]), to 3 (see
/// [`super::upgrade::to_3`]), to 4 (the manifest gains its features
/// byte: no sketches), to 5 (its levels byte: the families of every
/// level were added before the load), to 6 (pending fingerprints
/// may be named by their pairs instead of `pending` keys: nothing to
/// rewrite), then to 7 (the second `ids` family, added empty before the
/// load); then writes the marker.
fn upgrade(shared: &Shared, from: u16) -> Result<()> {
    if from < 2 && !upgrade_to_2(shared)? {
        return Ok(());
    }
    if from < 3 {
        super::upgrade::to_3(shared, &manifest_of(shared, 3))?;
    }
    if from < 4 {
        super::upgrade::manifest_only(shared, &manifest_of(shared, 4))?;
    }
    if from < 5 {
        super::upgrade::manifest_only(shared, &manifest_of(shared, 5))?;
    }
    if from < 6 {
        super::upgrade::manifest_only(shared, &manifest_of(shared, 6))?;
    }
    super::upgrade::manifest_only(shared, &manifest_of(shared, 7))?;
    storage::write_marker(&shared.dir)
}

/// Upgrades a store of format 1: writes every table's index record and
/// the manifest of version 2 in one synced batch. Skipped (false: the
/// store stays as it was, and opens by scanning its blocks again) when a
/// block header is unreadable, since an index entry needs its count.
fn upgrade_to_2(shared: &Shared) -> Result<bool> {
    let db = &shared.db;
    let default = db.default_family()?;
    let mut batch = storage::batch();
    let state = shared.state.read();
    for (t, table) in state.tables.iter().enumerate() {
        let record = records::encode_index(table.index_entries());
        if records::decode_index(&record).is_err() {
            return Ok(false);
        }
        batch.put_cf(default, keys::index(t as u16), record);
    }
    drop(state);
    batch.put_cf(default, keys::MANIFEST, manifest_of(shared, 2).encode());
    db.write(batch, true)?;
    Ok(true)
}

/// The overlay, from the `ids` families.
pub(crate) fn read_overlay(db: &Db) -> Result<Overlay> {
    let (entries, _, _) = read_pairs(db)?;
    Ok(Overlay::from_sorted(&entries))
}

/// The pairs of the `ids` families, in key order (for
/// [`Overlay::from_sorted`]); the fingerprints with a pair marked
/// [`ID_PENDING`](keys::ID_PENDING), increasing; and whether each family
/// of [`keys::IDS_FAMILIES`] holds any pair.
type Pairs = (Vec<(u64, u64, bool)>, Vec<u64>, [bool; 2]);

/// One `ids` family's pairs in key order, each with whether it is marked
/// pending.
fn read_family_pairs(db: &Db, family: &'static str) -> Result<Vec<(u64, u64, bool, bool)>> {
    let mut pairs = Vec::new();
    let Ok(cf) = db.family(family) else {
        // The second family of a store of format 6 and older, until its
        // upgrade adds it.
        return Ok(pairs);
    };
    db.scan(cf, &[], |k, v| {
        let bad = |what: String| Error::corrupt(Location::Record { family }, what);
        let (fp, id) = keys::parse_id_pair(k)
            .ok_or_else(|| bad(format!("key of {} bytes, expected 16", k.len())))?;
        let added = keys::parse_id_mark(v)
            .ok_or_else(|| bad(format!("value of {} bytes for a pair", v.len())))?;
        pairs.push((fp, id, added, keys::marks_pending(v)));
        Ok(true)
    })?;
    Ok(pairs)
}

/// Reads the `ids` families (see [`Pairs`]): a pair is in one of them at
/// most, and both hold pairs only after a crash during a merge into level
/// 0 (see [`IdFamilies`](super::id_families::IdFamilies)).
pub(crate) fn read_pairs(db: &Db) -> Result<Pairs> {
    let [first, second] = keys::IDS_FAMILIES;
    let a = read_family_pairs(db, first)?;
    let b = read_family_pairs(db, second)?;
    let held = [!a.is_empty(), !b.is_empty()];
    let merged = if b.is_empty() {
        a
    } else if a.is_empty() {
        b
    } else {
        let mut merged = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            let take_a = match (a.get(i), b.get(j)) {
                (Some(x), Some(y)) if (x.0, x.1) == (y.0, y.1) => {
                    return Err(Error::corrupt(
                        Location::Record {
                            family: keys::IDS_ALT_FAMILY,
                        },
                        format!("the pair ({:016x}, {}) is in both ids families", x.0, x.1),
                    ));
                }
                (Some(x), Some(y)) => (x.0, x.1) < (y.0, y.1),
                (Some(_), None) => true,
                _ => false,
            };
            if take_a {
                merged.push(a[i]);
                i += 1;
            } else {
                merged.push(b[j]);
                j += 1;
            }
        }
        merged
    };
    let mut marked: Vec<u64> = Vec::new();
    let mut entries = Vec::with_capacity(merged.len());
    for (fp, id, added, pending) in merged {
        if pending && marked.last() != Some(&fp) {
            marked.push(fp);
        }
        entries.push((fp, id, added));
    }
    Ok((entries, marked, held))
}

/// The keys of the `pending` family (increasing) and the tombstones, from
/// their families.
fn read_pending(db: &Db) -> Result<(Vec<u64>, FpSet)> {
    let mut pending_fps = Vec::new();
    db.scan(db.family(keys::PENDING_FAMILY)?, &[], |k, _| {
        pending_fps.push(fingerprint_key(keys::PENDING_FAMILY, k)?);
        Ok(true)
    })?;
    let mut tombstones = FpSet::default();
    db.scan(db.family(keys::TOMBSTONES_FAMILY)?, &[], |k, _| {
        tombstones.insert(fingerprint_key(keys::TOMBSTONES_FAMILY, k)?);
        Ok(true)
    })?;
    Ok((pending_fps, tombstones))
}

/// The pending set: the fingerprints of the `pending` family's `keys`
/// (increasing) and those of `marked` (increasing: with a pair marked
/// pending, see [`Pairs`]) that no level holds. A pair is marked
/// so only while its fingerprint is in no level or in a level above
/// level 0 (a merge into level 0 rewrites the pairs of the fingerprints
/// it takes in), so only the upper levels are searched, read whole (a
/// seventh of level 0 at most) for a walk beside the marked ones.
pub(crate) fn pending_set(
    plan: &Plan,
    tables: &[TableState],
    per_level: usize,
    mut keys: Vec<u64>,
    marked: &[u64],
) -> Result<Pending> {
    let mut named: Vec<u64> = marked
        .iter()
        .copied()
        .filter(|fp| keys.binary_search(fp).is_err())
        .collect();
    let upper = tables.get(per_level..).unwrap_or_default();
    if !named.is_empty() && upper.iter().any(|t| t.fingerprints() > 0) {
        let spec = &plan.tables()[0];
        let mut held = Vec::new();
        for table in upper.iter().step_by(per_level.max(1)) {
            table.append_all(&mut held)?;
        }
        held.sort_unstable();
        named.retain(|&fp| held.binary_search(&spec.permutation.apply(fp)).is_err());
    }
    if !named.is_empty() {
        keys.extend(named);
        keys.sort_unstable();
        keys.dedup();
    }
    Ok(Pending::from_fingerprints(plan, &keys))
}

/// Rebuilds the in-memory state from the database.
fn load(dir: &Path, db: Db, manifest: Manifest, options: &Options) -> Result<Shared> {
    let idf = if manifest.idf {
        Some(read_idf(&db)?)
    } else {
        None
    };
    if let (Some(asked), stored) = (&options.idf, &idf) {
        if stored.as_ref() != Some(asked) {
            return Err(Error::IncompatibleOptions {
                option: "idf",
                stored: stored.as_ref().map_or("none".into(), |i| {
                    format!(
                        "{} documents, {} common features",
                        i.documents(),
                        i.common().len()
                    )
                }),
                requested: format!(
                    "{} documents, {} common features",
                    asked.documents(),
                    asked.common().len()
                ),
            });
        }
    }
    let plan = manifest.plan;
    let per_level = plan.tables().len();
    let tables = db.tables();

    let mut codes: Vec<BTreeMap<u32, crate::codec::Code>> = vec![BTreeMap::new(); tables];
    db.scan(db.family(keys::CODES_FAMILY)?, &[], |k, v| {
        let (t, id) = keys::parse_code(k)
            .filter(|&(t, id)| usize::from(t) < tables && id < MAX_CODE_ID)
            .ok_or_else(|| {
                Error::corrupt(
                    Location::Record {
                        family: keys::CODES_FAMILY,
                    },
                    "malformed code key",
                )
            })?;
        let code = records::decode_code(v).map_err(|reason| {
            Error::corrupt(
                Location::Code {
                    table: usize::from(t),
                    code_id: id,
                },
                reason,
            )
        })?;
        codes[usize::from(t)].insert(id, code);
        Ok(true)
    })?;

    let budget = options.effective_memory_budget();
    let on_disk = db.table_bytes()?.saturating_add(db.id_block_bytes()?) > budget;
    let indexed = manifest.version >= 2;
    if on_disk {
        // Blocks are read through RocksDB: its block cache may use the
        // budget the tables could not have.
        db.set_block_cache_bytes(usize::try_from(budget).unwrap_or(usize::MAX));
    }
    // Tables are opened from their index records; blocks are read later
    // (see `warm`). A store of format 1 has no index records: its tables
    // are read in full, in parallel (reading, checksumming and decoding a
    // table's blocks is independent of the others).
    let threads = if indexed { 1 } else { super::parallel::cores() };
    let gate = Arc::new(Gate::new());
    let states = super::parallel::map_indexed(tables, threads, |t| {
        let codes = Arc::new(Codebook::from_codes(codes[t].clone()));
        // Only level 0 stays on disk: the other levels hold at most a
        // seventh of the fingerprints, and every write probes them. So does
        // every write probe level 0's table 0 (the unpermuted one: is the
        // fingerprint stored?), a block read and decode a write when on
        // disk; it stays in memory too, unless it is the whole level.
        let on_disk = on_disk && t < per_level && (t > 0 || per_level == 1);
        if indexed {
            open_table(&db, t, codes, on_disk, &gate)
        } else {
            scan_table(&db, t, codes, on_disk)
        }
    })
    .into_iter()
    .collect::<Result<Vec<TableState>>>()?;

    // The `ids` family is read beside the pending and tombstone families:
    // after a crash during a long merge, each can hold millions of keys.
    // Before format 3 every pair is in the `ids` family (the upgrade folds
    // those of fingerprints in the tables into id blocks, reading them
    // block by block).
    let ((pairs, marked, held), pending, tombstones) = std::thread::scope(|scope| {
        let pairs = scope.spawn(|| {
            if manifest.version >= 3 {
                read_pairs(&db)
            } else {
                Ok((Vec::new(), Vec::new(), [false; 2]))
            }
        });
        let rest = read_pending(&db);
        let pairs = pairs
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        rest.and_then(|(pending, tombstones)| Ok((pairs?, pending, tombstones)))
    })?;
    // The overlay's map is built beside the pending set, which needs the
    // marked pairs.
    let (overlay, pending) = std::thread::scope(|scope| {
        let overlay = scope.spawn(|| Overlay::from_sorted(&pairs));
        let pending = pending_set(&plan, &states, per_level, pending, &marked);
        let overlay = overlay
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        pending.map(|pending| (overlay, pending))
    })?;
    drop((pairs, marked));
    let counters = db
        .get(db.default_family()?, keys::COUNTERS)?
        .ok_or_else(|| Error::corrupt(Location::Counters, "counters record is missing"))?;
    let counters =
        records::decode_counters(&counters).map_err(|r| Error::corrupt(Location::Counters, r))?;

    gate.set_blocks(states.iter().map(|t| t.keys().len() as u64).sum());
    let id_table = IdTable::lazy(
        states.first().map_or(0, |t| t.keys().len()),
        Arc::new(db.id_blocks(on_disk)),
        !on_disk,
    );
    let state = State {
        tables: Arc::new(states),
        per_level,
        pending,
        upper: None,
        tombstones,
        ids: counters.ids,
        id_table: Arc::new(id_table),
        overlay,
    };
    let found = state.counters();
    for (t, table) in state.tables.iter().enumerate() {
        let level = state.level(t / per_level);
        if table.fingerprints() != level.fingerprints() {
            return Err(Error::corrupt(
                Location::Database,
                format!(
                    "table {t} holds {} fingerprints by its block headers, table {} of its level {}: records were lost or a header is damaged",
                    table.fingerprints(),
                    t - t % per_level,
                    level.fingerprints()
                ),
            ));
        }
    }
    if found.table_fingerprints != counters.table_fingerprints {
        return Err(Error::corrupt(
            Location::Database,
            format!(
                "the tables hold {} fingerprints by their block headers, the counters record {}: records were lost or a header is damaged",
                found.table_fingerprints, counters.table_fingerprints
            ),
        ));
    }
    if (found.pending, found.tombstones) != (counters.pending, counters.tombstones) {
        return Err(Error::corrupt(
            Location::Database,
            format!(
                "{} pending and {} tombstone records, the counters record {} and {}: records were lost",
                found.pending, found.tombstones, counters.pending, counters.tombstones
            ),
        ));
    }
    Ok(Shared {
        db,
        dir: dir.to_path_buf(),
        plan,
        block_size: usize::from(manifest.block_size),
        expected_size: manifest.expected_size,
        sketches: manifest.sketches,
        idf,
        options: options.clone(),
        state: RwLock::new(state),
        locks: Locks::default(),
        queue: Mutex::new(Queue::default()),
        health: Health::default(),
        compactor: Default::default(),
        gate,
        query_threads: options
            .query_threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
        merge_bytes: Default::default(),
        filters_wanted: Default::default(),
        physical_memory: super::options::physical_memory().unwrap_or(u64::MAX),
        sketch_cache: Default::default(),
        id_families: super::id_families::IdFamilies::new(held),
    })
}
