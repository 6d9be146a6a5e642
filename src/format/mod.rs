//! Byte layouts of everything the store writes besides blocks: keys, the
//! manifest, stored Huffman codes, counters and the directory marker.
//! Pure encoding and decoding; storage-format.md is the normative text.

pub mod idf;
pub mod ids;
pub mod keys;
pub mod manifest;
pub mod marker;
pub mod records;
pub mod sketches;

/// The store format version this build writes (marker file and
/// manifest).
pub const FORMAT_VERSION: u16 = 7;

/// The oldest store format version this build opens (and upgrades to
/// [`FORMAT_VERSION`]).
pub const OLDEST_FORMAT_VERSION: u16 = 1;

/// CRC-32 (IEEE) as used by every record.
pub(crate) fn crc(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// Splits `bytes` into the body and its trailing big-endian CRC-32 and
/// checks it; `None` when too short or the CRC does not match.
pub(crate) fn checked_body(bytes: &[u8]) -> Result<&[u8], String> {
    let split = bytes.len().checked_sub(4).ok_or_else(|| {
        format!(
            "record of {} bytes is too short for its checksum",
            bytes.len()
        )
    })?;
    let (body, tail) = bytes.split_at(split);
    let stored = u32::from_be_bytes(
        tail.try_into()
            .map_err(|_| "bad checksum field".to_string())?,
    );
    let computed = crc(body);
    if stored != computed {
        return Err(format!(
            "checksum mismatch (stored {stored:08x}, computed {computed:08x})"
        ));
    }
    Ok(body)
}

/// Appends the big-endian CRC-32 of `bytes` to it.
pub(crate) fn seal(mut bytes: Vec<u8>) -> Vec<u8> {
    let c = crc(&bytes);
    bytes.extend_from_slice(&c.to_be_bytes());
    bytes
}
