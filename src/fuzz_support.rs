//! Bodies of the fuzz targets under `fuzz/`, kept in the library so the
//! normal test suite runs them on deterministic inputs and they cannot rot.
//! Not part of the stable API.

use crate::codec::{encode_blocks, BlockView, Code, MIN_BLOCK_LEN, SYMBOLS};

/// Feeds arbitrary bytes to the block parser and decoders and to the
/// record decoders: they must return `Err` or a value, never panic, and the
/// fast and reference decoders must agree.
pub fn decode_arbitrary(data: &[u8]) {
    let (seed, bytes) = data.split_first().map_or((0, data), |(s, rest)| (*s, rest));
    let mut counts = [0u64; SYMBOLS];
    for (i, c) in counts.iter_mut().enumerate() {
        *c = u64::from(seed.rotate_left(i as u32 % 8)) * (i as u64 % 7);
    }
    let code = Code::from_counts(&counts);
    if let Ok(view) = BlockView::parse(bytes) {
        let mut fast = Vec::new();
        let fast = view.decode_into(&code, &mut fast).map(|()| fast);
        assert_eq!(fast, view.decode_slow(&code), "decoders disagree");
    }
    let _ = crate::format::manifest::Manifest::decode(bytes);
    let _ = crate::format::records::decode_code(bytes);
    let _ = crate::format::records::decode_counters(bytes);
}

/// Interprets bytes as a run of fingerprints and a block size, encodes the
/// sorted, deduplicated run and checks that decoding returns it exactly.
pub fn roundtrip(data: &[u8]) {
    let Some((&size, rest)) = data.split_first() else {
        return;
    };
    let mut fps: Vec<u64> = rest
        .chunks(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect();
    fps.sort_unstable();
    fps.dedup();
    let block_size = MIN_BLOCK_LEN + usize::from(size) * 4;
    let mut counts = [0u64; SYMBOLS];
    crate::codec::delta_histogram(&fps, &mut counts);
    let code = Code::from_counts(&counts);
    let blocks =
        encode_blocks(&fps, &code, 0, block_size).unwrap_or_else(|e| panic!("encode failed: {e}"));
    let mut all = Vec::new();
    let mut out = Vec::new();
    for b in &blocks {
        assert!(b.len() <= block_size);
        let view = BlockView::parse(b).unwrap_or_else(|e| panic!("own block rejected: {e}"));
        view.decode_into(&code, &mut out)
            .unwrap_or_else(|e| panic!("own block undecodable: {e}"));
        all.extend_from_slice(&out);
    }
    assert_eq!(all, fps);
}

#[cfg(test)]
mod tests {
    /// A short deterministic run of each target.
    #[test]
    fn targets_run_on_pseudo_random_inputs() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for len in 0..600usize {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            super::decode_arbitrary(&data);
            super::roundtrip(&data);
        }
    }
}
