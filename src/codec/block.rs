//! Huffman-delta coded blocks of sorted permuted fingerprints (Manku §3.2).
//!
//! ```text
//! | version u8 | count u16 BE | code_id u32 BE | crc32 u32 BE | first u64 BE | codes ... | pad |
//! ```
//!
//! After the first fingerprint, each next fingerprint is coded as the
//! Huffman code of `h`, the position of the most significant 1-bit of its
//! XOR with the previous one, followed by the `h` bits below that position.
//! The CRC-32 covers the header without its CRC field, then the payload.
//! storage-format.md is the normative description.

use zerocopy::byteorder::{BigEndian, U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::bits::{BitReader, BitWriter};
use super::huffman::Code;

/// The block format version this code writes and reads.
pub const BLOCK_VERSION: u8 = 1;

/// The fixed header at the start of every block.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct BlockHeader {
    /// Block format version ([`BLOCK_VERSION`]).
    pub version: u8,
    /// Number of fingerprints in the block, the first included (≥ 1).
    pub count: U16<BigEndian>,
    /// Which of the table's Huffman codes the block was written with.
    pub code_id: U32<BigEndian>,
    /// CRC-32 (IEEE) of the header's first 7 bytes followed by the payload.
    pub crc: U32<BigEndian>,
}

/// Size of [`BlockHeader`] in bytes.
pub const HEADER_LEN: usize = std::mem::size_of::<BlockHeader>();

/// Offset of the CRC field within the header.
const CRC_OFFSET: usize = HEADER_LEN - 4;

/// Header plus the first fingerprint: the smallest possible block.
pub const MIN_BLOCK_LEN: usize = HEADER_LEN + 8;

/// Why bytes could not be decoded as a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than a header and one fingerprint.
    TooShort {
        /// The length found.
        len: usize,
    },
    /// The header names a format version this build does not read.
    Version {
        /// The version this build reads.
        expected: u8,
        /// The version found.
        found: u8,
    },
    /// The stored CRC does not match the bytes.
    Checksum {
        /// CRC stored in the header.
        stored: u32,
        /// CRC computed over the bytes.
        computed: u32,
    },
    /// The header claims zero fingerprints.
    Empty,
    /// The bit stream ended before `count` fingerprints were decoded.
    Truncated {
        /// Fingerprints decoded before the end.
        decoded: usize,
    },
    /// A decoded fingerprint does not exceed its predecessor.
    NotIncreasing {
        /// Index of the offending fingerprint.
        index: usize,
    },
    /// Bytes remain after the last fingerprint beyond zero padding.
    TrailingBits,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooShort { len } => write!(
                f,
                "block of {len} bytes is shorter than the minimum {MIN_BLOCK_LEN}"
            ),
            Self::Version { expected, found } => {
                write!(
                    f,
                    "block format version {found} is not supported (expected {expected})"
                )
            }
            Self::Checksum { stored, computed } => {
                write!(
                    f,
                    "block checksum mismatch (stored {stored:08x}, computed {computed:08x})"
                )
            }
            Self::Empty => write!(f, "block header claims zero fingerprints"),
            Self::Truncated { decoded } => write!(
                f,
                "block ends after {decoded} fingerprints, before its count"
            ),
            Self::NotIncreasing { index } => write!(
                f,
                "fingerprint {index} of block does not exceed its predecessor"
            ),
            Self::TrailingBits => write!(f, "block has data after its last fingerprint"),
        }
    }
}

/// Why fingerprints could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// The input was not strictly increasing.
    OutOfOrder {
        /// The fingerprint before.
        previous: u64,
        /// The fingerprint that did not exceed it.
        got: u64,
    },
    /// The block size cannot hold even one fingerprint.
    BlockTooSmall {
        /// The size asked for.
        max_len: usize,
    },
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::OutOfOrder { previous, got } => {
                write!(
                    f,
                    "fingerprints out of order: {got:016x} after {previous:016x}"
                )
            }
            Self::BlockTooSmall { max_len } => {
                write!(
                    f,
                    "block size {max_len} cannot hold one fingerprint (minimum {MIN_BLOCK_LEN})"
                )
            }
        }
    }
}

/// The position of the most significant 1-bit of `prev ^ next`, and the
/// number of bits the delta costs under `code`.
#[inline]
fn delta_cost(code: &Code, prev: u64, next: u64) -> (u8, usize) {
    let h = 63 - (prev ^ next).leading_zeros() as u8;
    let (_, len) = code.word(h);
    (h, usize::from(len) + usize::from(h))
}

/// Packs strictly increasing fingerprints into blocks of at most `max_len`
/// bytes each, filling every block before starting the next.
pub fn encode_blocks(
    fps: &[u64],
    code: &Code,
    code_id: u32,
    max_len: usize,
) -> Result<Vec<Vec<u8>>, EncodeError> {
    let (bytes, ends) = encode_blocks_into(fps, code, code_id, max_len, Vec::new())?;
    let starts = std::iter::once(0).chain(ends.iter().copied());
    Ok(starts
        .zip(&ends)
        .map(|(start, &end)| bytes[start..end].to_vec())
        .collect())
}

/// [`encode_blocks`], the blocks appended back to back to `out`: returns
/// `out` and where in it each new block ends (the first starts at its
/// length on entry). One buffer for a whole table's blocks, not one
/// allocation a block.
pub fn encode_blocks_into(
    fps: &[u64],
    code: &Code,
    code_id: u32,
    max_len: usize,
    out: Vec<u8>,
) -> Result<(Vec<u8>, Vec<usize>), EncodeError> {
    if max_len < MIN_BLOCK_LEN {
        return Err(EncodeError::BlockTooSmall { max_len });
    }
    let max_bits = max_len * 8;
    let mut ends = Vec::new();
    let mut writer = BitWriter::with_prefix(out);
    // The block being written: where it starts, its last value, its count.
    let mut current: Option<(usize, u64, u16)> = None;
    for (i, &fp) in fps.iter().enumerate() {
        if i > 0 && fps[i - 1] >= fp {
            return Err(EncodeError::OutOfOrder {
                previous: fps[i - 1],
                got: fp,
            });
        }
        if let Some((start, prev, count)) = current.as_mut() {
            let (h, cost) = delta_cost(code, *prev, fp);
            if writer.bit_len() - *start * 8 + cost <= max_bits && *count < u16::MAX {
                let (word, len) = code.word(h);
                writer.write(u64::from(word), u32::from(len));
                writer.write(fp, u32::from(h));
                *prev = fp;
                *count += 1;
                continue;
            }
        }
        if let Some((start, _, count)) = current.take() {
            ends.push(seal(&mut writer, start, count, code_id));
        }
        writer.pad();
        let start = writer.bytes_mut().len();
        writer.bytes_mut().resize(start + HEADER_LEN, 0);
        writer.write(fp, 64);
        current = Some((start, fp, 1));
    }
    if let Some((start, _, count)) = current {
        ends.push(seal(&mut writer, start, count, code_id));
    }
    Ok((writer.finish(), ends))
}

/// Ends the block that starts at `start` of the writer's bytes: pads it
/// and writes its header (with CRC) in front of its payload. Returns
/// where it ends.
fn seal(writer: &mut BitWriter, start: usize, count: u16, code_id: u32) -> usize {
    writer.pad();
    let bytes = &mut writer.bytes_mut()[start..];
    let header = BlockHeader {
        version: BLOCK_VERSION,
        count: count.into(),
        code_id: code_id.into(),
        crc: 0.into(),
    };
    bytes[..HEADER_LEN].copy_from_slice(header.as_bytes());
    let crc = checksum(bytes);
    bytes[CRC_OFFSET..HEADER_LEN].copy_from_slice(&crc.to_be_bytes());
    start + bytes.len()
}

/// Rewrites a block's CRC to match its bytes: for tests that need blocks
/// whose checksum passes but whose stream is damaged.
#[cfg(test)]
pub(crate) fn reseal(block: &mut [u8]) {
    let crc = checksum(block);
    if let Some(field) = block.get_mut(CRC_OFFSET..HEADER_LEN) {
        field.copy_from_slice(&crc.to_be_bytes());
    }
}

fn checksum(block: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(block.get(..CRC_OFFSET).unwrap_or_default());
    hasher.update(block.get(HEADER_LEN..).unwrap_or_default());
    hasher.finalize()
}

/// A block whose header and checksum have been verified; decoding the
/// fingerprints needs the code named by [`code_id`](Self::code_id).
#[derive(Debug, Clone, Copy)]
pub struct BlockView<'a> {
    header: BlockHeader,
    first: u64,
    stream: &'a [u8],
}

impl<'a> BlockView<'a> {
    /// Checks the length, version and CRC of `bytes`.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        Self::parse_inner(bytes, true)
    }

    /// Like [`parse`](Self::parse) but without recomputing the CRC: for
    /// bytes whose CRC was checked when they were loaded into memory and
    /// that have not changed since. Length, version and count are still
    /// checked, and decoding still rejects malformed streams.
    pub fn parse_verified(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        Self::parse_inner(bytes, false)
    }

    #[inline]
    fn parse_inner(bytes: &'a [u8], check_crc: bool) -> Result<Self, DecodeError> {
        let (header, rest) = BlockHeader::read_from_prefix(bytes)
            .map_err(|_| DecodeError::TooShort { len: bytes.len() })?;
        let (first, stream) = <[u8; 8]>::read_from_prefix(rest)
            .map_err(|_| DecodeError::TooShort { len: bytes.len() })?;
        if header.version != BLOCK_VERSION {
            return Err(DecodeError::Version {
                expected: BLOCK_VERSION,
                found: header.version,
            });
        }
        let computed = if check_crc {
            checksum(bytes)
        } else {
            header.crc.get()
        };
        if computed != header.crc.get() {
            return Err(DecodeError::Checksum {
                stored: header.crc.get(),
                computed,
            });
        }
        if header.count.get() == 0 {
            return Err(DecodeError::Empty);
        }
        Ok(Self {
            header,
            first: u64::from_be_bytes(first),
            stream,
        })
    }

    /// The first (smallest) fingerprint, which is also the block's key.
    pub fn first(&self) -> u64 {
        self.first
    }

    /// The bit stream after the first fingerprint.
    pub(super) fn stream(&self) -> &'a [u8] {
        self.stream
    }

    /// The bit stream after the first fingerprint, as
    /// [`sweep_lanes`](super::sweep_lanes) takes it.
    pub fn stream_bytes(&self) -> &'a [u8] {
        self.stream
    }

    /// Number of fingerprints in the block.
    pub fn count(&self) -> usize {
        usize::from(self.header.count.get())
    }

    /// The Huffman code the block was written with.
    pub fn code_id(&self) -> u32 {
        self.header.code_id.get()
    }

    /// Iterates the fingerprints in order with the table-driven decoder.
    pub fn iter<'c>(&self, code: &'c Code) -> BlockIter<'a, 'c> {
        BlockIter {
            reader: BitReader::new(self.stream),
            code,
            prev: self.first,
            index: 0,
            count: self.count(),
            failed: false,
            started: false,
        }
    }

    /// Iterates from a point recorded earlier by [`BlockIter::resume_point`]
    /// on this same block: the first item is the fingerprint at `point`.
    /// A point that does not belong to this block yields garbage or an
    /// error, never a panic.
    pub fn iter_from<'c>(&self, code: &'c Code, point: ResumePoint) -> BlockIter<'a, 'c> {
        let mut reader = BitReader::new(self.stream);
        let skipped = reader.skip(point.bit).is_some();
        BlockIter {
            reader,
            code,
            prev: point.fingerprint,
            index: point.index as usize,
            count: if skipped { self.count() } else { 0 },
            failed: false,
            started: false,
        }
    }

    /// Decodes every fingerprint into `out` (cleared first) and checks that
    /// nothing but zero padding follows the last one.
    #[inline(always)]
    pub fn decode_into(&self, code: &Code, out: &mut Vec<u64>) -> Result<(), DecodeError> {
        out.clear();
        out.reserve(self.count());
        let mut iter = self.iter(code);
        iter.visit_range(0, u64::MAX, |fp| {
            out.push(fp);
            true
        })?;
        iter.check_end()
    }

    /// Decodes every fingerprint a bit at a time: the reference the
    /// table-driven decoder is tested against.
    pub fn decode_slow(&self, code: &Code) -> Result<Vec<u64>, DecodeError> {
        let mut reader = BitReader::new(self.stream);
        let mut out = vec![self.first];
        let mut prev = self.first;
        for index in 1..self.count() {
            let truncated = DecodeError::Truncated { decoded: index };
            let h = code.decode_slow(&mut reader).ok_or(truncated.clone())?;
            let low = reader.read(u32::from(h)).ok_or(truncated)?;
            prev = apply_delta(prev, h, low).ok_or(DecodeError::NotIncreasing { index })?;
            out.push(prev);
        }
        check_padding(&reader)?;
        Ok(out)
    }
}

/// One table-driven decoding step after `prev`: the next fingerprint when
/// its code and low bits both lie in the reader's window (which holds at
/// least 57 valid bits) and within the stream, and it exceeds `prev`.
/// `None` (consuming nothing) sends the caller to the careful path, which
/// decodes the rare long deltas and reports malformed streams.
#[inline(always)]
pub(super) fn fast_step(reader: &mut BitReader<'_>, code: &Code, prev: u64) -> Option<u64> {
    let window = reader.peek_window();
    let entry = code.fast_entry(window);
    let (total, h, len) = (entry >> 16, (entry >> 8) & 0x3f, entry & 0xff);
    if entry == 0 || total as usize > reader.remaining() {
        return None;
    }
    // The `h` bits after the code word (none when h = 0: the first shift
    // clears the top bit, the second then shifts out everything).
    let low = ((window << len) >> 1) >> (63 - h);
    // Bit h of the successor flips from 0 to 1; a set bit h is malformed.
    let above = prev >> h;
    if above & 1 != 0 {
        return None;
    }
    reader.advance(total);
    Some(((above | 1) << h) | low)
}

/// The step [`fast_step`] declines: a code or low bits reaching past the
/// window. `None` when the stream is malformed (the checked iterator then
/// says how).
#[cold]
#[inline(never)]
pub(super) fn long_step(reader: &mut BitReader<'_>, code: &Code, prev: u64) -> Option<u64> {
    let (h, len) = code.lookup(reader.peek_window());
    reader.skip(u32::from(len))?;
    let low = reader.read(u32::from(h))?;
    apply_delta(prev, h, low)
}

/// The successor of `prev` whose XOR with it has its top bit at `h` and
/// whose bits below `h` are `low`; `None` when bit `h` of `prev` is set
/// (the successor would not be larger).
#[inline(always)]
fn apply_delta(prev: u64, h: u8, low: u64) -> Option<u64> {
    let bit = 1u64 << h;
    if prev & bit != 0 {
        return None;
    }
    let keep = if h == 63 { 0 } else { prev & !((bit << 1) - 1) };
    Some(keep | bit | low)
}

fn check_padding(reader: &BitReader<'_>) -> Result<(), DecodeError> {
    let rest = reader.remaining();
    if rest >= 8 || (rest > 0 && reader.peek_window() != 0) {
        return Err(DecodeError::TrailingBits);
    }
    Ok(())
}

/// Iterator over a block's fingerprints (table-driven decoding).
///
/// Yields `Err` once and then stops if the stream is malformed.
#[derive(Debug, Clone)]
pub struct BlockIter<'a, 'c> {
    reader: BitReader<'a>,
    code: &'c Code,
    prev: u64,
    index: usize,
    count: usize,
    failed: bool,
    /// Whether `prev` (the first fingerprint, or a resume point's) has
    /// been yielded.
    started: bool,
}

/// How [`BlockIter::visit_range`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// The block ended before the range did.
    Exhausted,
    /// A fingerprint beyond the range was reached.
    PastEnd,
    /// The visitor asked to stop.
    Stopped,
}

/// Where a [`BlockIter`] stood: enough to resume decoding there without
/// decoding what came before (an in-memory index into a block; not part
/// of the block format).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumePoint {
    /// The fingerprint last yielded.
    pub fingerprint: u64,
    /// Its index in the block.
    pub index: u16,
    /// Bits of the stream consumed up to and including it.
    pub bit: u32,
}

impl BlockIter<'_, '_> {
    /// After the iterator is exhausted: checks that only zero padding
    /// remains.
    pub fn check_end(&self) -> Result<(), DecodeError> {
        check_padding(&self.reader)
    }

    /// Calls `visit` with each remaining fingerprint in `lo..=hi`, in
    /// order, skipping smaller ones, until one exceeds `hi` or `visit`
    /// returns `false`: [`next`](Iterator::next) inlined into one loop
    /// without the per-item `Option<Result>` reaching the caller.
    #[inline(always)]
    pub fn visit_range(
        &mut self,
        lo: u64,
        hi: u64,
        mut visit: impl FnMut(u64) -> bool,
    ) -> Result<Visit, DecodeError> {
        for item in self.by_ref() {
            let fp = item?;
            if fp > hi {
                return Ok(Visit::PastEnd);
            }
            if fp >= lo && !visit(fp) {
                return Ok(Visit::Stopped);
            }
        }
        Ok(Visit::Exhausted)
    }

    /// The point just after the last fingerprint yielded, `None` before the
    /// first one.
    pub fn resume_point(&self) -> Option<ResumePoint> {
        let index = self.index.checked_sub(1)?;
        Some(ResumePoint {
            fingerprint: self.prev,
            index: u16::try_from(index).ok()?,
            bit: u32::try_from(self.reader.position()).ok()?,
        })
    }
}

impl Iterator for BlockIter<'_, '_> {
    type Item = Result<u64, DecodeError>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.index >= self.count {
            return None;
        }
        let index = self.index;
        self.index += 1;
        if !self.started {
            self.started = true;
            return Some(Ok(self.prev));
        }
        if let Some(fp) = fast_step(&mut self.reader, self.code, self.prev) {
            self.prev = fp;
            return Some(Ok(fp));
        }
        let (h, len) = self.code.lookup(self.reader.peek_window());
        let decoded = self
            .reader
            .skip(u32::from(len))
            .and_then(|()| self.reader.read(u32::from(h)))
            .ok_or(DecodeError::Truncated { decoded: index })
            .and_then(|low| {
                apply_delta(self.prev, h, low).ok_or(DecodeError::NotIncreasing { index })
            });
        match decoded {
            Ok(fp) => {
                self.prev = fp;
                Some(Ok(fp))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::huffman::SYMBOLS;

    fn sample(n: usize, seed: u64) -> Vec<u64> {
        let mut rng = crate::test_rng::TestRng::new(seed);
        let mut v: Vec<u64> = (0..n).map(|_| rng.next_u64()).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    fn skewed_code() -> Code {
        let mut counts = [0u64; SYMBOLS];
        for (i, c) in counts.iter_mut().enumerate() {
            *c = (i as u64 % 9) * 13 + 1;
        }
        Code::from_counts(&counts)
    }

    #[test]
    fn round_trip_and_block_limits() {
        let code = skewed_code();
        for (n, max_len) in [
            (1, 1024),
            (2, MIN_BLOCK_LEN),
            (1000, 1024),
            (5000, 64),
            (300, 19 + 9),
        ] {
            let fps = sample(n, n as u64);
            let blocks = encode_blocks(&fps, &code, 7, max_len).unwrap();
            let mut all = Vec::new();
            let mut out = Vec::new();
            for b in &blocks {
                assert!(b.len() <= max_len);
                let view = BlockView::parse(b).unwrap();
                assert_eq!(view.code_id(), 7);
                view.decode_into(&code, &mut out).unwrap();
                assert_eq!(view.decode_slow(&code).unwrap(), out);
                assert_eq!(out.first(), Some(&view.first()));
                all.extend_from_slice(&out);
            }
            assert_eq!(all, fps);
        }
    }

    /// Blocks appended to a buffer that already holds bytes are the same
    /// blocks, back to back after them, with their ends.
    #[test]
    fn blocks_appended_after_other_bytes() {
        let code = skewed_code();
        for (n, max_len) in [(0, 1024), (1, 1024), (1000, 1024), (5000, 64)] {
            let fps = sample(n, n as u64 + 1);
            let blocks = encode_blocks(&fps, &code, 3, max_len).unwrap();
            let prefix = b"earlier bytes".to_vec();
            let (bytes, ends) =
                encode_blocks_into(&fps, &code, 3, max_len, prefix.clone()).unwrap();
            assert_eq!(ends.len(), blocks.len());
            let mut want = prefix;
            for (b, &end) in blocks.iter().zip(&ends) {
                want.extend_from_slice(b);
                assert_eq!(end, want.len());
            }
            assert_eq!(bytes, want);
        }
    }

    #[test]
    fn maximal_deltas_and_extremes() {
        let code = skewed_code();
        let fps = vec![
            0,
            1,
            2,
            1 << 62,
            (1 << 63) - 1,
            1 << 63,
            u64::MAX - 1,
            u64::MAX,
        ];
        let blocks = encode_blocks(&fps, &code, 0, 1024).unwrap();
        assert_eq!(blocks.len(), 1);
        let view = BlockView::parse(&blocks[0]).unwrap();
        let mut out = Vec::new();
        view.decode_into(&code, &mut out).unwrap();
        assert_eq!(out, fps);
    }

    #[test]
    fn rejects_unsorted_and_duplicate_input() {
        let code = skewed_code();
        assert_eq!(
            encode_blocks(&[5, 5], &code, 0, 1024),
            Err(EncodeError::OutOfOrder {
                previous: 5,
                got: 5
            })
        );
        assert_eq!(
            encode_blocks(&[1], &code, 0, MIN_BLOCK_LEN - 1),
            Err(EncodeError::BlockTooSmall {
                max_len: MIN_BLOCK_LEN - 1
            })
        );
    }

    #[test]
    fn detects_corruption() {
        let code = skewed_code();
        let fps = sample(50, 3);
        let block = encode_blocks(&fps, &code, 1, 1024).unwrap().remove(0);
        for i in 0..block.len() {
            for bit in 0..8 {
                let mut bad = block.clone();
                bad[i] ^= 1 << bit;
                assert!(
                    BlockView::parse(&bad).is_err(),
                    "flip at byte {i} bit {bit} undetected"
                );
            }
        }
        assert_eq!(
            BlockView::parse(&block[..10]).unwrap_err(),
            DecodeError::TooShort { len: 10 }
        );
        let mut truncated = block[..block.len() - 1].to_vec();
        let crc = checksum(&truncated);
        truncated[CRC_OFFSET..HEADER_LEN].copy_from_slice(&crc.to_be_bytes());
        let view = BlockView::parse(&truncated).unwrap();
        assert!(matches!(
            view.decode_into(&code, &mut Vec::new()),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
