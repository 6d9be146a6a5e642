//! Stored Huffman codes and the counters record.

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
}
