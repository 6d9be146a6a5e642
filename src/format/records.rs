//! Stored Huffman codes, the counters record, table index records and the
//! table files record.

use super::{checked_body, seal};
use crate::codec::{Code, SYMBOLS};

/// Version byte of a stored code.
pub const CODE_RECORD_VERSION: u8 = 1;

/// `| version u8 | 64 code lengths u8 | crc32 u32 BE |`
pub fn encode_code(code: &Code) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + SYMBOLS + 4);
    v.push(CODE_RECORD_VERSION);
    v.extend_from_slice(code.lengths());
    seal(v)
}

/// Decodes and validates a stored code.
pub fn decode_code(bytes: &[u8]) -> Result<Code, String> {
    let body = checked_body(bytes)?;
    let (&version, lengths) = body.split_first().ok_or("empty code record")?;
    if version != CODE_RECORD_VERSION {
        return Err(format!(
            "code record version {version}, expected {CODE_RECORD_VERSION}"
        ));
    }
    let lengths: [u8; SYMBOLS] = lengths.try_into().map_err(|_| {
        format!(
            "code record holds {} lengths, expected {SYMBOLS}",
            lengths.len()
        )
    })?;
    Code::from_lengths(lengths).map_err(|e| e.to_string())
}

/// Persisted counts, rewritten in the same batch as every change to them.
/// `ids` cannot be derived cheaply at open; the others are checked at open
/// against what RocksDB returns, so records RocksDB lost (a damaged
/// MANIFEST can drop a table file) are reported instead of answered from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Number of (fingerprint, id) pairs stored.
    pub ids: u64,
    /// Number of pending fingerprints.
    pub pending: u64,
    /// Number of tombstones.
    pub tombstones: u64,
    /// Fingerprints in each table's blocks (the same in every table).
    pub table_fingerprints: u64,
}

impl Counters {
    /// Accounts for one fingerprint whose pending and tombstone flags go
    /// from `(pending, tombstoned)` before to after.
    pub fn moved(&mut self, before: (bool, bool), after: (bool, bool)) {
        self.pending = (self.pending + u64::from(after.0)).saturating_sub(u64::from(before.0));
        self.tombstones =
            (self.tombstones + u64::from(after.1)).saturating_sub(u64::from(before.1));
    }
}

/// `| ids u64 | pending u64 | tombstones u64 | table_fingerprints u64 | crc32 u32 |`
pub fn encode_counters(c: &Counters) -> Vec<u8> {
    let mut v = Vec::with_capacity(36);
    for n in [c.ids, c.pending, c.tombstones, c.table_fingerprints] {
        v.extend_from_slice(&n.to_be_bytes());
    }
    seal(v)
}

/// Decodes the counters record.
pub fn decode_counters(bytes: &[u8]) -> Result<Counters, String> {
    let body = checked_body(bytes)?;
    if body.len() != 32 {
        return Err(format!(
            "counters body of {} bytes, expected 32",
            body.len()
        ));
    }
    let field = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&body[i * 8..i * 8 + 8]);
        u64::from_be_bytes(b)
    };
    Ok(Counters {
        ids: field(0),
        pending: field(1),
        tombstones: field(2),
        table_fingerprints: field(3),
    })
}

/// Version byte of a table index record.
pub const INDEX_RECORD_VERSION: u8 = 1;

/// Bytes of one block's entry in a table index record.
const INDEX_ENTRY_LEN: usize = 12;

/// One block as its table's index record lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// The block's key (its first permuted fingerprint).
    pub key: u64,
    /// The block's stored length in bytes.
    pub len: u16,
    /// The fingerprints in the block (its header's count).
    pub count: u16,
}

/// `| version u8 | blocks u32 | blocks × ( key u64 | len u16 | count u16 ) | crc32 u32 |`
pub fn encode_index(entries: impl ExactSizeIterator<Item = IndexEntry>) -> Vec<u8> {
    let n = entries.len();
    let mut v = Vec::with_capacity(1 + 4 + n * INDEX_ENTRY_LEN + 4);
    v.push(INDEX_RECORD_VERSION);
    v.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_be_bytes());
    for e in entries {
        v.extend_from_slice(&e.key.to_be_bytes());
        v.extend_from_slice(&e.len.to_be_bytes());
        v.extend_from_slice(&e.count.to_be_bytes());
    }
    seal(v)
}

/// Decodes and validates a table index record: its checksum, version and
/// length, keys strictly increasing, every count at least 1 and every
/// length at least a block header and first fingerprint.
pub fn decode_index(bytes: &[u8]) -> Result<Vec<IndexEntry>, String> {
    let body = checked_body(bytes)?;
    let (&version, rest) = body.split_first().ok_or("empty table index record")?;
    if version != INDEX_RECORD_VERSION {
        return Err(format!(
            "table index record version {version}, expected {INDEX_RECORD_VERSION}"
        ));
    }
    let (n, entries) = rest
        .split_first_chunk::<4>()
        .ok_or("table index record too short for its block count")?;
    let n = u32::from_be_bytes(*n) as usize;
    if entries.len() != n.saturating_mul(INDEX_ENTRY_LEN) {
        return Err(format!(
            "table index record of {} entry bytes for {n} blocks",
            entries.len()
        ));
    }
    let min_len = crate::codec::MIN_BLOCK_LEN;
    let mut out = Vec::with_capacity(n);
    for (i, e) in entries.chunks_exact(INDEX_ENTRY_LEN).enumerate() {
        let entry = IndexEntry {
            key: u64::from_be_bytes(e[..8].try_into().map_err(|_| "short entry")?),
            len: u16::from_be_bytes([e[8], e[9]]),
            count: u16::from_be_bytes([e[10], e[11]]),
        };
        if entry.count == 0 || usize::from(entry.len) < min_len {
            return Err(format!(
                "table index entry {i} (block {:016x}): {} fingerprints in {} bytes",
                entry.key, entry.count, entry.len
            ));
        }
        if out.last().is_some_and(|p: &IndexEntry| p.key >= entry.key) {
            return Err(format!(
                "table index entry {i} (block {:016x}) is not above the one before",
                entry.key
            ));
        }
        out.push(entry);
    }
    Ok(out)
}

/// Version byte of a table files record.
pub const TABLE_FILES_RECORD_VERSION: u8 = 1;

/// `| version u8 | tables u16 | tables × table u16 | crc32 u32 |`: the
/// tables whose new blocks a commit wrote as table files to be ingested.
pub fn encode_table_files(tables: &[u16]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + 2 + tables.len() * 2 + 4);
    v.push(TABLE_FILES_RECORD_VERSION);
    v.extend_from_slice(
        &u16::try_from(tables.len())
            .unwrap_or(u16::MAX)
            .to_be_bytes(),
    );
    for t in tables {
        v.extend_from_slice(&t.to_be_bytes());
    }
    seal(v)
}

/// Decodes and validates a table files record: its checksum, version and
/// length, and table numbers strictly increasing.
pub fn decode_table_files(bytes: &[u8]) -> Result<Vec<u16>, String> {
    let body = checked_body(bytes)?;
    let (&version, rest) = body.split_first().ok_or("empty table files record")?;
    if version != TABLE_FILES_RECORD_VERSION {
        return Err(format!(
            "table files record version {version}, expected {TABLE_FILES_RECORD_VERSION}"
        ));
    }
    let (n, tables) = rest
        .split_first_chunk::<2>()
        .ok_or("table files record too short for its table count")?;
    let n = usize::from(u16::from_be_bytes(*n));
    if tables.len() != n * 2 {
        return Err(format!(
            "table files record of {} table bytes for {n} tables",
            tables.len()
        ));
    }
    let tables: Vec<u16> = tables
        .chunks_exact(2)
        .map(|t| u16::from_be_bytes([t[0], t[1]]))
        .collect();
    if tables.windows(2).any(|w| w[0] >= w[1]) {
        return Err("table files record lists tables out of order".into());
    }
    Ok(tables)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_detect_flips() {
        let code = Code::from_counts(&[3; SYMBOLS]);
        let bytes = encode_code(&code);
        assert_eq!(bytes.len(), 69);
        assert_eq!(decode_code(&bytes).unwrap(), code);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(decode_code(&bad).is_err());
        }
        let c = Counters {
            ids: 12345,
            pending: 3,
            tombstones: 2,
            table_fingerprints: 1 << 40,
        };
        assert_eq!(decode_counters(&encode_counters(&c)).unwrap(), c);
        assert!(decode_counters(&[1, 2]).is_err());
    }

    #[test]
    fn table_files_records_round_trip_and_refuse_damage() {
        let bytes = encode_table_files(&[0, 3, 9]);
        assert_eq!(bytes, [1, 0, 3, 0, 0, 0, 3, 0, 9, 0xbb, 0x00, 0x1c, 0x8d]);
        assert_eq!(decode_table_files(&bytes).unwrap(), [0, 3, 9]);
        assert_eq!(decode_table_files(&encode_table_files(&[])).unwrap(), []);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x02;
            assert!(decode_table_files(&bad).is_err(), "flip in byte {i}");
        }
        assert!(decode_table_files(&encode_table_files(&[4, 4])).is_err());
        assert!(decode_table_files(&encode_table_files(&[5, 2])).is_err());
        assert!(decode_table_files(&seal(vec![2, 0, 0])).is_err());
        assert!(decode_table_files(&seal(vec![1, 0, 2, 0, 1])).is_err());
    }

    #[test]
    fn index_records_round_trip_and_refuse_damage() {
        let entries = [
            IndexEntry {
                key: 5,
                len: 1024,
                count: 150,
            },
            IndexEntry {
                key: u64::MAX,
                len: 19,
                count: 1,
            },
        ];
        let bytes = encode_index(entries.iter().copied());
        assert_eq!(bytes.len(), 1 + 4 + 2 * 12 + 4);
        assert_eq!(decode_index(&bytes).unwrap(), entries);
        assert_eq!(decode_index(&encode_index(std::iter::empty())).unwrap(), []);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x04;
            assert!(decode_index(&bad).is_err(), "flip of byte {i}");
        }
        let resealed = |entries: &[IndexEntry]| {
            let mut b = encode_index(entries.iter().copied());
            b.truncate(b.len() - 4);
            seal(b)
        };
        let out_of_order = [entries[1], entries[0]];
        assert!(decode_index(&resealed(&out_of_order))
            .unwrap_err()
            .contains("not above"));
        let empty_block = [IndexEntry {
            count: 0,
            ..entries[0]
        }];
        assert!(decode_index(&resealed(&empty_block)).is_err());
        let short_block = [IndexEntry {
            len: 18,
            ..entries[0]
        }];
        assert!(decode_index(&resealed(&short_block)).is_err());
        // A count that promises more entries than the record holds.
        let mut long = encode_index(entries.iter().copied());
        long.truncate(long.len() - 4);
        long[4] += 1;
        assert!(decode_index(&seal(long)).unwrap_err().contains("blocks"));
    }
}
