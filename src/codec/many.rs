//! Decoding several blocks at once, as a table is loaded.
//!
//! Each fingerprint's position in a delta-coded stream depends on the
//! previous code's length, so one block decodes as a chain of dependent
//! steps that leaves most of the core idle. [`decode_many`] steps `L`
//! blocks in turn, each step a table-driven one with every check the
//! checked decoder makes (code word known, bits within the stream, the
//! value growing), so the chains overlap. A step it cannot take that way
//! (a long code word, the stream's last bytes, a malformed stream) goes
//! through the careful step; a lane whose careful step fails is finished
//! by the checked iterator, which reports the same error
//! [`BlockView::decode_into`] would.

use super::bits::BitReader;
use super::block::{long_step, BlockView, DecodeError, ResumePoint};
use super::huffman::Code;

/// Decodes `views[i]` with `codes[i]` into `outs[i]` (cleared first) for
/// every `i`, with the same results as [`BlockView::decode_into`] on each.
// Lane `i`'s state sits in arrays indexed by `i` so that the lockstep
// loop unrolls with it in registers; value `n` goes to `outs[i][n]`.
#[allow(clippy::needless_range_loop)]
pub fn decode_many<const L: usize>(
    views: &[BlockView<'_>; L],
    codes: [&Code; L],
    outs: &mut [Vec<u64>; L],
) -> [Result<(), DecodeError>; L] {
    let mut pos = [0usize; L];
    let mut prev = [0u64; L];
    // Values decoded so far; for a failed lane, those before the failure.
    let mut decoded = [0usize; L];
    let mut failed = [false; L];
    // Bit positions below `end` start an eight-byte load within the stream.
    let mut end = [0usize; L];
    let mut rounds = usize::MAX;
    for i in 0..L {
        let view = &views[i];
        let out = &mut outs[i];
        out.clear();
        out.resize(view.count(), 0);
        out[0] = view.first();
        prev[i] = view.first();
        decoded[i] = view.count();
        end[i] = view.stream().len().checked_sub(8).map_or(0, |b| b * 8 + 8);
        rounds = rounds.min(view.count());
    }
    // Value `n` of lane `i`, unless the lane has failed.
    let mut decode = |i: usize, n: usize| {
        if failed[i] {
            return;
        }
        match step(views[i].stream(), end[i], codes[i], &mut pos[i], prev[i]) {
            Some(v) => {
                prev[i] = v;
                outs[i][n] = v;
            }
            None => {
                failed[i] = true;
                decoded[i] = n;
            }
        }
    };
    // Value `n` of every lane, in turn, while all lanes have one; then the
    // rest of each lane alone.
    for n in 1..rounds {
        for i in 0..L {
            decode(i, n);
        }
    }
    for i in 0..L {
        for n in rounds.max(1)..views[i].count() {
            decode(i, n);
        }
    }
    std::array::from_fn(|i| {
        // The checked iterator takes over after the last value decoded:
        // it finds the error of a failed lane (the same one, at the same
        // index, as decoding from the start) and checks the padding.
        outs[i].truncate(decoded[i]);
        let index = decoded[i] - 1;
        let point = ResumePoint {
            fingerprint: prev[i],
            index: u16::try_from(index).map_err(|_| DecodeError::Truncated { decoded: index })?,
            bit: u32::try_from(pos[i]).map_err(|_| DecodeError::Truncated { decoded: index })?,
        };
        let mut iter = views[i].iter_from(codes[i], point);
        iter.next();
        if failed[i] {
            iter.visit_range(0, u64::MAX, |v| {
                outs[i].push(v);
                true
            })?;
        }
        iter.check_end()
    })
}

/// One step at bit `*pos` after `prev`, moving `*pos` past it: the
/// table-driven step when its window lies within the stream (below
/// `end`), its code word is a short one and the value grows, the careful
/// step otherwise; `None` when the stream is malformed there.
#[inline(always)]
fn step(stream: &[u8], end: usize, code: &Code, pos: &mut usize, prev: u64) -> Option<u64> {
    let p = *pos;
    if p < end {
        // SAFETY: `p < end` means `p / 8 + 8 <= stream.len()`, so the
        // eight bytes read lie within `stream`.
        let word = unsafe {
            stream
                .as_ptr()
                .add(p / 8)
                .cast::<[u8; 8]>()
                .read_unaligned()
        };
        let window = u64::from_be_bytes(word) << (p % 8);
        let entry = code.fast_entry(window);
        let (total, h, len) = (entry >> 16, (entry >> 8) & 0x3f, entry & 0xff);
        let above = prev >> h;
        if entry != 0 && above & 1 == 0 {
            // A fast step takes at most 57 bits: within the window.
            *pos = p + total as usize;
            // The `h` bits after the code word (none when h = 0).
            let low = ((window << len) >> 1) >> (63 - h);
            return Some(((above | 1) << h) | low);
        }
    }
    careful(stream, code, pos, prev)
}

/// The careful step at bit `*pos` after `prev`, moving `*pos` past it;
/// `None` when the stream is malformed there.
#[cold]
#[inline(never)]
fn careful(stream: &[u8], code: &Code, pos: &mut usize, prev: u64) -> Option<u64> {
    let mut reader = BitReader::new(stream);
    reader.skip(u32::try_from(*pos).ok()?)?;
    let v = long_step(&mut reader, code, prev)?;
    *pos = reader.position();
    Some(v)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::codec::{delta_histogram, encode_blocks, SYMBOLS};

    /// Blocks of `values` (sorted, distinct) encoded with their own code.
    fn blocks(values: &[u64], block_size: usize) -> (Code, Vec<Vec<u8>>) {
        let mut counts = [1u64; SYMBOLS];
        delta_histogram(values, &mut counts);
        let code = Code::from_counts(&counts);
        let blocks = encode_blocks(values, &code, 0, block_size).unwrap();
        (code, blocks)
    }

    fn check<const L: usize>(bytes: &[Vec<u8>], code: &Code) {
        let views: Vec<BlockView<'_>> = bytes
            .iter()
            .map(|b| BlockView::parse_verified(b).unwrap())
            .collect();
        for group in views.chunks_exact(L) {
            let group: [BlockView<'_>; L] = std::array::from_fn(|i| group[i]);
            let mut outs: [Vec<u64>; L] = std::array::from_fn(|_| vec![7]);
            let got = decode_many(&group, [code; L], &mut outs);
            for i in 0..L {
                let mut want = Vec::new();
                let expected = group[i].decode_into(code, &mut want);
                assert_eq!(got[i], expected, "lane {i}");
                if expected.is_ok() {
                    assert_eq!(outs[i], want, "lane {i}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

        /// Every lane decodes as the checked decoder does, on whole
        /// blocks and on blocks whose stream bytes were damaged (the
        /// header's checksum is not checked here, so the stream is
        /// decoded as it stands).
        #[test]
        fn lanes_decode_as_the_checked_decoder(
            raw in proptest::collection::vec(any::<u64>(), 1..3000),
            shift in 0u32..40,
            block_size in prop_oneof![Just(64usize), Just(200), Just(1024)],
            damage in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        ) {
            let mut values: Vec<u64> = raw.iter().map(|v| v >> shift).collect();
            values.sort_unstable();
            values.dedup();
            let (code, mut bytes) = blocks(&values, block_size);
            check::<1>(&bytes, &code);
            check::<4>(&bytes, &code);
            for (at, xor) in damage {
                let n = bytes.len();
                let block = &mut bytes[at % n];
                let stream_start = crate::codec::MIN_BLOCK_LEN;
                if block.len() > stream_start {
                    let i = stream_start + (at / n) % (block.len() - stream_start);
                    block[i] ^= xor;
                }
            }
            check::<3>(&bytes, &code);
            check::<4>(&bytes, &code);
        }
    }

    /// A set bit in a stream's padding is reported as the checked decoder
    /// reports it.
    #[test]
    fn padding_is_checked() {
        let values: Vec<u64> = (0..5000u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 3)
            .collect();
        let mut values = values;
        values.sort_unstable();
        let (code, mut bytes) = blocks(&values, 256);
        let mut trailing = 0;
        for block in &mut bytes {
            *block.last_mut().unwrap() ^= 1;
            let view = BlockView::parse_verified(block).unwrap();
            trailing += usize::from(
                view.decode_into(&code, &mut Vec::new()) == Err(DecodeError::TrailingBits),
            );
        }
        assert!(trailing > 0, "no block had padding to damage");
        check::<4>(&bytes, &code);
    }
}
