//! The value of a `sketches` record: a pair's similarity sketch and a
//! checksum over the pair's key and the sketch.
//!
//! ```text
//! key:   fingerprint u64 BE | id u64 BE          (as in the ids family)
//! value: sketch [u8; 64] | crc32 u32 BE of (key ‖ sketch)
//! ```
//!
//! The checksum covers the key so that a value found under another pair's
//! key is reported, not used.

use super::keys;

/// Bytes of a sketch (`simhash::Sketch`).
pub const SKETCH_BYTES: usize = 64;

/// Bytes of a sketch record's value.
pub const SKETCH_VALUE_LEN: usize = SKETCH_BYTES + 4;

fn checksum(fp: u64, id: u64, sketch: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&keys::id_pair(fp, id));
    h.update(sketch);
    h.finalize()
}

/// The value stored for the sketch of `(fp, id)`.
pub fn encode_sketch(fp: u64, id: u64, sketch: &[u8; SKETCH_BYTES]) -> [u8; SKETCH_VALUE_LEN] {
    let mut out = [0u8; SKETCH_VALUE_LEN];
    out[..SKETCH_BYTES].copy_from_slice(sketch);
    out[SKETCH_BYTES..].copy_from_slice(&checksum(fp, id, sketch).to_be_bytes());
    out
}

/// The sketch stored for `(fp, id)`, or why the value is not one.
pub fn decode_sketch(fp: u64, id: u64, value: &[u8]) -> Result<[u8; SKETCH_BYTES], String> {
    if value.len() != SKETCH_VALUE_LEN {
        return Err(format!(
            "sketch value of {} bytes, expected {SKETCH_VALUE_LEN}",
            value.len()
        ));
    }
    let (body, tail) = value.split_at(SKETCH_BYTES);
    let stored = u32::from_be_bytes(tail.try_into().expect("4 bytes"));
    if stored != checksum(fp, id, body) {
        return Err(format!(
            "sketch of ({fp:016x}, {id}) fails its checksum: stored {stored:08x}, computed {:08x}",
            checksum(fp, id, body)
        ));
    }
    Ok(body.try_into().expect("64 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let sketch: [u8; SKETCH_BYTES] = std::array::from_fn(|i| i as u8 * 7);
        let value = encode_sketch(7, 9, &sketch);
        assert_eq!(decode_sketch(7, 9, &value), Ok(sketch));
        assert!(decode_sketch(7, 10, &value).is_err(), "another pair's key");
        for i in 0..value.len() {
            let mut bad = value;
            bad[i] ^= 0x10;
            assert!(decode_sketch(7, 9, &bad).is_err(), "flip at {i}");
        }
        assert!(decode_sketch(7, 9, &value[1..]).is_err());
    }
}
