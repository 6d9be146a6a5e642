//! Upgrading a store of format 2 to format 3: the ids of fingerprints in
//! the tables move from one `ids` key per pair into id blocks, one per
//! table-0 block; the pairs of pending fingerprints stay where they are
//! (an empty value means the same in both formats). Upgrading format 3 to
//! 4: the manifest gains its features byte (a store of format 3 keeps no
//! sketches); nothing else changes. Upgrading 4 to 5 and 5 to 6 writes
//! the manifest only.

use super::shared::Shared;
use crate::error::{Error, Location, Result};
use crate::format::ids::IdBlockWriter;
use crate::format::keys;
use crate::format::manifest::Manifest;
use crate::storage;

/// The key just after `key` in RocksDB's order (a 17-byte key after the
/// largest 16-byte one).
fn after(key: [u8; 16]) -> Vec<u8> {
    match u128::from_be_bytes(key).checked_add(1) {
        Some(next) => next.to_be_bytes().to_vec(),
        None => vec![0xff; 17],
    }
}

/// Writes the id block of every table-0 block, deletes the pairs they
/// hold from the `ids` family (range deletes over the runs between
/// pending fingerprints' pairs) and writes `manifest` (version 3), in one
/// synced batch; then reads the overlay left (the pending fingerprints'
/// pairs) into memory.
pub(crate) fn to_3(shared: &Shared, manifest: &Manifest) -> Result<()> {
    let db = &shared.db;
    let ids_cf = db.family(keys::IDS_FAMILY)?;
    let blocks_cf = db.family(keys::ID_BLOCKS_FAMILY)?;
    let bad = |what: String| {
        Error::corrupt(
            Location::Record {
                family: keys::IDS_FAMILY,
            },
            what,
        )
    };
    let mut batch = storage::batch();
    {
        let state = shared.state.read();
        if let Some(table0) = state.tables.first() {
            let block_keys = table0.keys();
            let mut values = Vec::new();
            let mut pairs: Vec<(u64, u64)> = Vec::new();
            let mut folded: Vec<bool> = Vec::new();
            let mut writer = IdBlockWriter::new();
            let mut ids = Vec::new();
            for (j, &key) in block_keys.iter().enumerate() {
                table0.decode_block(j, &mut values)?;
                let end = block_keys.get(j + 1).copied();
                pairs.clear();
                db.scan(ids_cf, &keys::id_pair(key, 0), |k, v| {
                    let (fp, id) = keys::parse_id_pair(k)
                        .ok_or_else(|| bad(format!("key of {} bytes, expected 16", k.len())))?;
                    if end.is_some_and(|e| fp >= e) {
                        return Ok(false);
                    }
                    if !v.is_empty() {
                        return Err(bad(format!("value of {} bytes for a pair", v.len())));
                    }
                    pairs.push((fp, id));
                    Ok(true)
                })?;
                folded.clear();
                folded.resize(pairs.len(), false);
                let mut p = 0;
                for &fp in &values {
                    while p < pairs.len() && pairs[p].0 < fp {
                        p += 1;
                    }
                    ids.clear();
                    while p < pairs.len() && pairs[p].0 == fp {
                        ids.push(pairs[p].1);
                        folded[p] = true;
                        p += 1;
                    }
                    writer.push(&ids);
                }
                batch.put_cf(blocks_cf, keys::fingerprint(key), writer.finish());
                // Each run of folded pairs goes with one range delete.
                let mut i = 0;
                while i < pairs.len() {
                    if !folded[i] {
                        i += 1;
                        continue;
                    }
                    let start = i;
                    while i < pairs.len() && folded[i] {
                        i += 1;
                    }
                    let (first, last) = (pairs[start], pairs[i - 1]);
                    batch.delete_range_cf(
                        ids_cf,
                        &keys::id_pair(first.0, first.1)[..],
                        &after(keys::id_pair(last.0, last.1))[..],
                    );
                }
            }
        }
    }
    batch.put_cf(db.default_family()?, keys::MANIFEST, manifest.encode());
    db.write(batch, true)?;
    let overlay = super::open::read_overlay(db)?;
    shared.state.write().overlay = overlay;
    Ok(())
}

/// Writes `manifest`, synced: the whole upgrade to version 4 (no
/// sketches), to 5 (every level's families were added and their index
/// records written before the load) and to 6 (a pending fingerprint may
/// be named by its pairs, marked [`ID_PENDING`](keys::ID_PENDING),
/// instead of a `pending` key; a store of format 5 has a key for each).
pub(crate) fn manifest_only(shared: &Shared, manifest: &Manifest) -> Result<()> {
    debug_assert!(manifest.version >= 4 && (manifest.version > 4 || !manifest.sketches));
    let db = &shared.db;
    let mut batch = storage::batch();
    batch.put_cf(db.default_family()?, keys::MANIFEST, manifest.encode());
    db.write(batch, true)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_key_after_a_pair_key() {
        let key = crate::format::keys::id_pair(1, u64::MAX);
        assert_eq!(
            super::after(key),
            crate::format::keys::id_pair(2, 0).to_vec()
        );
        assert_eq!(super::after([0xff; 16]), vec![0xff; 17]);
    }
}
