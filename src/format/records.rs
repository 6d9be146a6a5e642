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

/// Persisted counts that cannot be derived cheaply at open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Number of (fingerprint, id) pairs stored.
    pub ids: u64,
}

/// `| ids u64 BE | crc32 u32 BE |`
pub fn encode_counters(c: &Counters) -> Vec<u8> {
    seal(c.ids.to_be_bytes().to_vec())
}

/// Decodes the counters record.
pub fn decode_counters(bytes: &[u8]) -> Result<Counters, String> {
    let body = checked_body(bytes)?;
    let ids = u64::from_be_bytes(
        body.try_into()
            .map_err(|_| format!("counters body of {} bytes", body.len()))?,
    );
    Ok(Counters { ids })
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
        let c = Counters { ids: 12345 };
        assert_eq!(decode_counters(&encode_counters(&c)).unwrap(), c);
        assert!(decode_counters(&[1, 2]).is_err());
    }
}
