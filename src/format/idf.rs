//! The document-frequency record (`default` / `idf`): how many sample
//! documents held each feature common to at least two of them.
//!
//! ```text
//! | version u8 = 1 | documents u32 | count u32 | count × ( hash u64 | df u32 ) | crc32 u32 |
//! ```
//!
//! Hashes strictly increase; every `df` is at least 2 and at most
//! `documents`.

use super::{checked_body, seal};

/// Version byte of the record.
pub const IDF_RECORD_VERSION: u8 = 1;

/// Encodes a sample of `documents` documents and its `(hash, df)` pairs
/// (strictly increasing hashes).
pub fn encode_idf(documents: u32, common: &[(u64, u32)]) -> Vec<u8> {
    let mut v = Vec::with_capacity(9 + common.len() * 12 + 4);
    v.push(IDF_RECORD_VERSION);
    v.extend_from_slice(&documents.to_be_bytes());
    v.extend_from_slice(&(common.len() as u32).to_be_bytes());
    for &(h, df) in common {
        v.extend_from_slice(&h.to_be_bytes());
        v.extend_from_slice(&df.to_be_bytes());
    }
    seal(v)
}

/// Decodes and validates the record: `(documents, pairs)`.
pub fn decode_idf(bytes: &[u8]) -> Result<(u32, Vec<(u64, u32)>), String> {
    let body = checked_body(bytes)?;
    if body.len() < 9 {
        return Err(format!("idf record of {} bytes", bytes.len()));
    }
    if body[0] != IDF_RECORD_VERSION {
        return Err(format!(
            "idf record version {}, expected {IDF_RECORD_VERSION}",
            body[0]
        ));
    }
    let documents = u32::from_be_bytes(body[1..5].try_into().expect("4 bytes"));
    let count = u32::from_be_bytes(body[5..9].try_into().expect("4 bytes")) as usize;
    let rest = &body[9..];
    if rest.len() != count.saturating_mul(12) {
        return Err(format!(
            "idf record: {} bytes for {count} features",
            rest.len()
        ));
    }
    let mut common = Vec::with_capacity(count);
    for entry in rest.chunks_exact(12) {
        let h = u64::from_be_bytes(entry[..8].try_into().expect("8 bytes"));
        let df = u32::from_be_bytes(entry[8..].try_into().expect("4 bytes"));
        if common.last().is_some_and(|&(prev, _)| prev >= h) {
            return Err(format!("idf record: hash {h:016x} out of order"));
        }
        if df < 2 || df > documents {
            return Err(format!(
                "idf record: document frequency {df} of {documents} documents"
            ));
        }
        common.push((h, df));
    }
    Ok((documents, common))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let common = [(3u64, 2u32), (9, 5), (u64::MAX, 7)];
        let bytes = encode_idf(7, &common);
        assert_eq!(decode_idf(&bytes), Ok((7, common.to_vec())));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x20;
            assert!(decode_idf(&bad).is_err(), "flip at {i}");
        }
        assert!(
            decode_idf(&encode_idf(4, &common)).is_err(),
            "df above documents"
        );
        assert!(
            decode_idf(&encode_idf(7, &[(9, 2), (3, 2)])).is_err(),
            "order"
        );
        assert!(decode_idf(&encode_idf(7, &[(9, 1)])).is_err(), "df 1");
        assert_eq!(decode_idf(&encode_idf(0, &[])), Ok((0, vec![])));
    }
}
