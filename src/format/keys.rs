//! Key encodings. Every integer in a key is big-endian so that RocksDB's
//! bytewise order is numeric order.

/// Key of a block (its first permuted fingerprint), of a pending
/// fingerprint and of a tombstone: the fingerprint, 8 bytes big-endian.
pub fn fingerprint(fp: u64) -> [u8; 8] {
    fp.to_be_bytes()
}

/// Decodes an 8-byte fingerprint key.
pub fn parse_fingerprint(key: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(key.try_into().ok()?))
}

/// Key of one (fingerprint, id) pair: fingerprint then id, 16 bytes.
pub fn id_pair(fp: u64, id: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&fp.to_be_bytes());
    k[8..].copy_from_slice(&id.to_be_bytes());
    k
}

/// Decodes a 16-byte (fingerprint, id) key.
pub fn parse_id_pair(key: &[u8]) -> Option<(u64, u64)> {
    let fp = u64::from_be_bytes(key.get(..8)?.try_into().ok()?);
    let id = u64::from_be_bytes(key.get(8..16)?.try_into().ok()?);
    (key.len() == 16).then_some((fp, id))
}

/// Key of a stored Huffman code: table number (u16) then code id (u32).
pub fn code(table: u16, code_id: u32) -> [u8; 6] {
    let mut k = [0u8; 6];
    k[..2].copy_from_slice(&table.to_be_bytes());
    k[2..].copy_from_slice(&code_id.to_be_bytes());
    k
}

/// Decodes a code key.
pub fn parse_code(key: &[u8]) -> Option<(u16, u32)> {
    let table = u16::from_be_bytes(key.get(..2)?.try_into().ok()?);
    let id = u32::from_be_bytes(key.get(2..6)?.try_into().ok()?);
    (key.len() == 6).then_some((table, id))
}

/// Key of the manifest in the default column family.
pub const MANIFEST: &[u8] = b"manifest";

/// Key of the counters record in the default column family.
pub const COUNTERS: &[u8] = b"counters";

/// Key of the document-frequency record in the default family (format 4,
/// stores created with one).
pub const IDF: &[u8] = b"idf";

/// Key of the table files record in the default column family: present
/// only while a commit's table files are being ingested.
pub const TABLE_FILES: &[u8] = b"table-files";

/// Key of table `table`'s index record in the default column family:
/// ASCII `index` then the table number (u16).
pub fn index(table: u16) -> [u8; 7] {
    let mut k = [0u8; 7];
    k[..5].copy_from_slice(b"index");
    k[5..].copy_from_slice(&table.to_be_bytes());
    k
}

/// Name of the column family holding table `n`.
pub fn table_family(n: usize) -> String {
    format!("table-{n:03}")
}

/// Column family of stored Huffman codes.
pub const CODES_FAMILY: &str = "codes";
/// Column family of (fingerprint, id) pairs not in the id blocks: pairs
/// added outside them (empty value, or [`ID_PENDING`] for a pair of a
/// fingerprint in no level when written) and pairs of an id block removed
/// ([`ID_REMOVED`]).
pub const IDS_FAMILY: &str = "ids";
/// The second column family of pairs not in the id blocks, keyed and
/// valued like [`IDS_FAMILY`] (format 7): writers put pairs into one of
/// the two, and a merge into level 0 switches them to the other, so that
/// its commit empties the first by one range delete and leaves the pairs
/// written while it ran where they are.
pub const IDS_ALT_FAMILY: &str = "ids-alt";
/// The two families of pairs not in the id blocks.
pub const IDS_FAMILIES: [&str; 2] = [IDS_FAMILY, IDS_ALT_FAMILY];
/// Column family of id blocks, keyed like the table-0 blocks they belong
/// to.
pub const ID_BLOCKS_FAMILY: &str = "id-blocks";

/// Value of an `ids` key naming a pair of an id block that was removed.
pub const ID_REMOVED: &[u8] = &[0];

/// Value of an `ids` key naming a pair added outside the id blocks whose
/// fingerprint was pending when it was written (format 6): a fingerprint
/// with such a pair that no level holds is pending, with no key in the
/// `pending` family.
pub const ID_PENDING: &[u8] = &[1];

/// The value of an `ids` key: empty for a pair added outside the id
/// blocks, [`ID_REMOVED`] for one of an id block removed.
pub fn id_mark(added: bool) -> &'static [u8] {
    if added {
        &[]
    } else {
        ID_REMOVED
    }
}

/// The value of an `ids` key of a pair added outside the id blocks
/// (`added`) or of one removed from them, [`ID_PENDING`] for an added one
/// whose fingerprint is `pending`.
pub fn id_value(added: bool, pending: bool) -> &'static [u8] {
    if added && pending {
        ID_PENDING
    } else {
        id_mark(added)
    }
}

/// Decodes the value of an `ids` key: `true` for a pair added outside
/// the id blocks, `false` for one of an id block removed.
pub fn parse_id_mark(value: &[u8]) -> Option<bool> {
    match value {
        [] | [1] => Some(true),
        [0] => Some(false),
        _ => None,
    }
}

/// Whether the value of an `ids` key is [`ID_PENDING`].
pub fn marks_pending(value: &[u8]) -> bool {
    value == ID_PENDING
}
/// Column family of fingerprints not yet merged into the tables.
pub const PENDING_FAMILY: &str = "pending";

/// Column family of the similarity sketches of `(fingerprint, id)` pairs,
/// keyed like [`IDS_FAMILY`] (format 4, stores created with sketches only).
pub const SKETCHES_FAMILY: &str = "sketches";
/// Column family of fingerprints deleted from the tables but not yet
/// removed from their blocks.
pub const TOMBSTONES_FAMILY: &str = "tombstones";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_sort_numerically() {
        assert_eq!(
            parse_fingerprint(&fingerprint(0xdead_beef)),
            Some(0xdead_beef)
        );
        assert!(fingerprint(1) < fingerprint(256));
        assert_eq!(parse_id_pair(&id_pair(7, u64::MAX)), Some((7, u64::MAX)));
        assert!(id_pair(1, u64::MAX) < id_pair(2, 0));
        assert_eq!(parse_code(&code(3, 9)), Some((3, 9)));
        assert_eq!(parse_fingerprint(&[1, 2, 3]), None);
        assert_eq!(parse_id_pair(&[0; 17]), None);
        assert_eq!(table_family(7), "table-007");
        for added in [true, false] {
            assert_eq!(parse_id_mark(id_mark(added)), Some(added));
        }
        assert_eq!(parse_id_mark(id_value(true, true)), Some(true));
        assert!(marks_pending(id_value(true, true)));
        assert_eq!(id_value(true, false), id_mark(true));
        assert_eq!(id_value(false, true), ID_REMOVED);
        assert!(!marks_pending(id_mark(true)) && !marks_pending(ID_REMOVED));
        assert_eq!(parse_id_mark(&[2]), None);
        assert_eq!(parse_id_mark(&[0, 0]), None);
    }
}
