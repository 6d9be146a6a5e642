//! Id blocks: the document ids of one block of table 0, in the block's
//! fingerprint order, bit-packed. Pure encoding, decoding and lookup;
//! storage-format.md ("Id blocks") is the normative text.
//!
//! ```text
//! | version u8 = 1 | count u16 | usual u8 | multi u16 | width u8 | base u64 |
//! | multi × ( position u16 | ids u32 ) | packed ids | crc32 u32 |
//! ```
//!
//! Every fingerprint has `usual` ids (0 or 1, whichever more of the
//! block's fingerprints have) unless listed in `multi` with its number of
//! ids. The ids of all fingerprints follow each
//! other in fingerprint order (a fingerprint's own ids increasing), each
//! stored as `id − base` in `width` bits, most significant bit first.

use super::{checked_body, seal};

/// Version byte of an id block.
pub const ID_BLOCK_VERSION: u8 = 1;

/// Bytes before the exception list.
const HEADER: usize = 15;

/// Bytes of one exception entry.
const ENTRY: usize = 6;

/// Builds an id block one fingerprint at a time, in block order.
#[derive(Debug, Default)]
pub struct IdBlockWriter {
    count: usize,
    /// Each fingerprint's number of ids, when not 1.
    multi: Vec<(u16, u32)>,
    /// Fingerprints with no id.
    none: usize,
    ids: Vec<u64>,
}

impl IdBlockWriter {
    /// An empty block.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the next fingerprint's ids (increasing).
    pub fn push(&mut self, ids: &[u64]) {
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]));
        if ids.len() != 1 {
            self.multi.push((self.count as u16, ids.len() as u32));
            self.none += usize::from(ids.is_empty());
        }
        self.ids.extend_from_slice(ids);
        self.count += 1;
    }

    /// Appends the next fingerprint with exactly one id.
    pub fn push_one(&mut self, id: u64) {
        self.ids.push(id);
        self.count += 1;
    }

    /// Fingerprints pushed so far.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The encoded block; the writer is left empty for the next one.
    pub fn finish(&mut self) -> Vec<u8> {
        let base = self.ids.iter().copied().min().unwrap_or(0);
        let span = self.ids.iter().copied().max().unwrap_or(0) - base;
        let width = u64::BITS - span.leading_zeros();
        let packed = (self.ids.len() * width as usize).div_ceil(8);
        // The fingerprints listed are those with other than the usual
        // number of ids: with no id mostly, those with any.
        let one = self.count - self.multi.len();
        let usual = u8::from(one >= self.none);
        let listed = if usual == 1 {
            self.multi.len()
        } else {
            self.count - self.none
        };
        let mut v = Vec::with_capacity(HEADER + ENTRY * listed + packed + 4);
        v.push(ID_BLOCK_VERSION);
        v.extend_from_slice(&(self.count as u16).to_be_bytes());
        v.push(usual);
        v.extend_from_slice(&(listed as u16).to_be_bytes());
        v.push(width as u8);
        v.extend_from_slice(&base.to_be_bytes());
        if usual == 1 {
            for &(position, ids) in &self.multi {
                v.extend_from_slice(&position.to_be_bytes());
                v.extend_from_slice(&ids.to_be_bytes());
            }
        } else {
            let mut multi = self.multi.iter().peekable();
            for position in 0..self.count as u16 {
                let ids = match multi.peek() {
                    Some(&&(p, n)) if p == position => {
                        multi.next();
                        n
                    }
                    _ => 1,
                };
                if ids != 0 {
                    v.extend_from_slice(&position.to_be_bytes());
                    v.extend_from_slice(&ids.to_be_bytes());
                }
            }
        }
        if width > 0 {
            // Bits not yet written, most significant first, at the top.
            let (mut pending, mut filled) = (0u128, 0u32);
            for &id in &self.ids {
                pending |= u128::from(id - base) << (128 - filled - width);
                filled += width;
                if filled >= 64 {
                    v.extend_from_slice(&((pending >> 64) as u64).to_be_bytes());
                    pending <<= 64;
                    filled -= 64;
                }
            }
            let tail = (pending >> 64) as u64;
            v.extend_from_slice(&tail.to_be_bytes()[..filled.div_ceil(8) as usize]);
        }
        self.count = 0;
        self.none = 0;
        self.multi.clear();
        self.ids.clear();
        seal(v)
    }
}

/// Encodes one block from each fingerprint's ids, in block order.
pub fn encode_id_block<'a>(lists: impl IntoIterator<Item = &'a [u64]>) -> Vec<u8> {
    let mut w = IdBlockWriter::new();
    for ids in lists {
        w.push(ids);
    }
    w.finish()
}

/// Writes `value` in `width` bits at bit `at` of `bits`, MSB first.
#[cfg(test)]
fn write_bits(bits: &mut [u8], at: usize, width: u32, value: u64) {
    for b in 0..width as usize {
        if value >> (width as usize - 1 - b) & 1 == 1 {
            let bit = at + b;
            bits[bit / 8] |= 0x80 >> (bit % 8);
        }
    }
}

/// A parsed id block, borrowing its bytes.
#[derive(Debug, Clone, Copy)]
pub struct IdBlock<'a> {
    count: usize,
    usual: usize,
    width: u32,
    base: u64,
    multi: &'a [u8],
    packed: &'a [u8],
    total: usize,
}

impl<'a> IdBlock<'a> {
    /// Parses and checks a stored id block: its CRC, version and layout,
    /// and that each fingerprint's ids increase and fit in 64 bits.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, String> {
        let block = Self::parse_layout(checked_body(bytes)?)?;
        block.check_ids()?;
        Ok(block)
    }

    /// Parses an id block whose bytes were checked by [`parse`](Self::parse)
    /// before (held in memory since): the layout only, no CRC.
    /// Reads the header and finds the list and the packed ids, without
    /// walking the list ([`total`](Self::total) is then 0).
    #[inline]
    pub fn parse_checked(bytes: &'a [u8]) -> Result<Self, String> {
        let body = bytes
            .get(..bytes.len().saturating_sub(4))
            .unwrap_or_default();
        let header = body
            .get(..HEADER)
            .ok_or_else(|| format!("id block of {} bytes is too short", bytes.len()))?;
        let multi = usize::from(u16::from_be_bytes([header[4], header[5]]));
        let list_end = HEADER + multi * ENTRY;
        let entries = body
            .get(HEADER..list_end)
            .ok_or_else(|| format!("id block of {} bytes ends in its list", bytes.len()))?;
        Ok(Self {
            count: usize::from(u16::from_be_bytes([header[1], header[2]])),
            usual: usize::from(header[3].min(1)),
            width: u32::from(header[6].min(64)),
            base: u64::from_be_bytes(header[7..15].try_into().unwrap_or_default()),
            multi: entries,
            packed: &body[list_end..],
            total: 0,
        })
    }

    fn parse_layout(body: &'a [u8]) -> Result<Self, String> {
        if body.len() < HEADER {
            return Err(format!("id block of {} bytes is too short", body.len() + 4));
        }
        if body[0] != ID_BLOCK_VERSION {
            return Err(format!(
                "id block version {}, expected {ID_BLOCK_VERSION}",
                body[0]
            ));
        }
        let count = usize::from(u16::from_be_bytes([body[1], body[2]]));
        let usual = usize::from(body[3]);
        let multi = usize::from(u16::from_be_bytes([body[4], body[5]]));
        let width = u32::from(body[6]);
        let base = u64::from_be_bytes(body[7..15].try_into().unwrap_or_default());
        if usual > 1 {
            return Err(format!("usual id count {usual}, expected 0 or 1"));
        }
        if width > 64 {
            return Err(format!("id width {width} is over 64 bits"));
        }
        if multi > count {
            return Err(format!(
                "{multi} fingerprints with several ids in a block of {count}"
            ));
        }
        let list_end = HEADER + multi * ENTRY;
        let entries = body
            .get(HEADER..list_end)
            .ok_or_else(|| format!("id block of {} bytes ends in its list", body.len() + 4))?;
        let mut total = (count - multi) * usual;
        let mut last: Option<u16> = None;
        for e in entries.chunks_exact(ENTRY) {
            let position = u16::from_be_bytes([e[0], e[1]]);
            let ids = u32::from_be_bytes([e[2], e[3], e[4], e[5]]);
            if usize::from(position) >= count || last.is_some_and(|l| l >= position) {
                return Err(format!(
                    "list entry for position {position} out of order or past {count}"
                ));
            }
            if ids as usize == usual {
                return Err(format!(
                    "list entry for position {position} has the usual {usual} ids"
                ));
            }
            last = Some(position);
            total += ids as usize;
        }
        let packed = &body[list_end..];
        let want = (total as u128 * u128::from(width)).div_ceil(8);
        if packed.len() as u128 != want {
            return Err(format!(
                "{} bytes of packed ids, expected {want} for {total} ids of {width} bits",
                packed.len()
            ));
        }
        let block = Self {
            count,
            usual,
            width,
            base,
            multi: entries,
            packed,
            total,
        };
        let used = total * width as usize;
        if !used.is_multiple_of(8)
            && packed
                .last()
                .is_some_and(|&b| b & (0xff >> (used % 8)) != 0)
        {
            return Err("padding bits after the ids are not zero".into());
        }
        Ok(block)
    }

    /// Checks that every fingerprint's ids increase and that no id
    /// overflows (`base` plus the stored offset).
    fn check_ids(&self) -> Result<(), String> {
        // One pass: positions in order, the list's entries met in order.
        let mut listed = self.multi.chunks_exact(ENTRY).peekable();
        let mut start = 0usize;
        for position in 0..self.count {
            let n = match listed.peek() {
                Some(e) if usize::from(u16::from_be_bytes([e[0], e[1]])) == position => {
                    let e = listed.next().unwrap_or_default();
                    u32::from_be_bytes([e[2], e[3], e[4], e[5]]) as usize
                }
                _ => self.usual,
            };
            debug_assert_eq!((start, n), self.span(position));
            let mut previous: Option<u64> = None;
            for i in start..start + n {
                let id = self
                    .base
                    .checked_add(self.offset(i))
                    .ok_or_else(|| format!("id at position {position} overflows"))?;
                if previous.is_some_and(|p| p >= id) {
                    return Err(format!("ids of position {position} do not increase"));
                }
                previous = Some(id);
            }
            start += n;
        }
        Ok(())
    }

    /// Where in `bytes` (a checked id block) the ids of the fingerprint
    /// at `position` about start: exact when no fingerprint before it has
    /// other than the usual count, else a few ids off. For a prefetch;
    /// never reads beyond the header.
    #[inline]
    pub fn approximate_offset(bytes: &'a [u8], position: usize) -> usize {
        let Ok(block) = Self::parse_checked(bytes) else {
            return 0;
        };
        let bits = position * block.usual * block.width as usize;
        (HEADER + block.multi.len() + bits / 8).min(bytes.len().saturating_sub(1))
    }

    /// Fingerprints in the block.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Ids stored in the block, over all its fingerprints.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Where the ids of the fingerprint at `position` start among all the
    /// block's ids, and how many it has.
    #[inline]
    fn span(&self, position: usize) -> (usize, usize) {
        let entries = self.multi.len() / ENTRY;
        if entries == 0 {
            return (position * self.usual, self.usual);
        }
        let entry = |e: usize| {
            let b = &self.multi[e * ENTRY..][..ENTRY];
            (
                usize::from(u16::from_be_bytes([b[0], b[1]])),
                u32::from_be_bytes([b[2], b[3], b[4], b[5]]) as usize,
            )
        };
        // Entries before `position`, and the ids they hold beyond one each.
        let (mut lo, mut hi) = (0, entries);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if entry(mid).0 < position {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        // Unlisted fingerprints before `position` have the usual count.
        let mut start = (position - lo) * self.usual;
        for e in 0..lo {
            start += entry(e).1;
        }
        let n = if lo < entries && entry(lo).0 == position {
            entry(lo).1
        } else {
            self.usual
        };
        (start, n)
    }

    /// Stored offset `i` (from `base`).
    #[inline]
    fn offset(&self, i: usize) -> u64 {
        if self.width == 0 {
            return 0;
        }
        let bit = i * self.width as usize;
        let byte = bit / 8;
        // A whole window where the block has 16 bytes left (no copy), else
        // the bytes left, zero-padded.
        let word: [u8; 16] = match self.packed.get(byte..byte + 16) {
            Some(window) => window.try_into().unwrap_or_default(),
            None => {
                let mut word = [0u8; 16];
                let avail = self.packed.len().saturating_sub(byte).min(16);
                word[..avail].copy_from_slice(&self.packed[byte..byte + avail]);
                word
            }
        };
        let x = u128::from_be_bytes(word) << (bit % 8);
        (x >> (128 - self.width)) as u64
    }

    /// Appends the ids of the fingerprint at `position` (below
    /// [`count`](Self::count)) to `out`, increasing.
    #[inline]
    pub fn ids_into(&self, position: usize, out: &mut Vec<u64>) {
        let (start, n) = self.span(position);
        out.extend((start..start + n).map(|i| self.base.wrapping_add(self.offset(i))));
    }

    /// How many ids the fingerprint at `position` (below
    /// [`count`](Self::count)) has.
    #[inline]
    pub fn len_at(&self, position: usize) -> usize {
        self.span(position).1
    }

    /// Whether the fingerprint at `position` (below
    /// [`count`](Self::count)) has `id`: a binary search of its ids (they
    /// increase, at a fixed width), reading only those it probes. A
    /// writer asking whether a document id is new to a fingerprint with
    /// 100K ids decodes 17 of them, not all.
    pub fn contains(&self, position: usize, id: u64) -> bool {
        let Some(offset) = id.checked_sub(self.base) else {
            return false;
        };
        let (start, n) = self.span(position);
        let (mut lo, mut hi) = (start, start + n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.offset(mid).cmp(&offset) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Equal => return true,
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        false
    }

    /// How many ids of the fingerprint at `position` (below
    /// [`count`](Self::count)) are below `id`: a binary search, as
    /// [`contains`](Self::contains).
    pub fn rank(&self, position: usize, id: u64) -> usize {
        let (start, n) = self.span(position);
        let Some(offset) = id.checked_sub(self.base) else {
            return 0;
        };
        let (mut lo, mut hi) = (start, start + n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.offset(mid) < offset {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo - start
    }

    /// The ids of the fingerprint at `position` (below
    /// [`count`](Self::count)), increasing, each decoded when asked for.
    pub fn iter_at(&self, position: usize) -> impl Iterator<Item = u64> + '_ {
        let (start, n) = self.span(position);
        (start..start + n).map(|i| self.base.wrapping_add(self.offset(i)))
    }

    /// The ids of the fingerprint at `position`.
    pub fn ids(&self, position: usize) -> Vec<u64> {
        let mut out = Vec::new();
        self.ids_into(position, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(lists: &[Vec<u64>]) {
        let bytes = encode_id_block(lists.iter().map(Vec::as_slice));
        let block = IdBlock::parse(&bytes).unwrap();
        assert_eq!(block.count(), lists.len());
        assert_eq!(block.total(), lists.iter().map(Vec::len).sum::<usize>());
        for (p, want) in lists.iter().enumerate() {
            assert_eq!(&block.ids(p), want, "position {p}");
        }
        let checked = IdBlock::parse_checked(&bytes).unwrap();
        assert_eq!(checked.count(), lists.len());
        for (p, want) in lists.iter().enumerate() {
            assert_eq!(&checked.ids(p), want, "position {p}");
            assert_eq!(checked.len_at(p), want.len(), "position {p}");
            // Every id, its neighbours, the ends of the range and the
            // other positions' ids: found exactly when the position has it.
            let near = want
                .iter()
                .flat_map(|&id| [id, id.wrapping_sub(1), id.wrapping_add(1)]);
            let others = lists.iter().flatten().copied();
            for id in near.chain(others).chain([0, u64::MAX]) {
                assert_eq!(
                    checked.contains(p, id),
                    want.binary_search(&id).is_ok(),
                    "position {p}, id {id}"
                );
                assert_eq!(
                    checked.rank(p, id),
                    want.partition_point(|&w| w < id),
                    "position {p}, rank of {id}"
                );
            }
            assert_eq!(
                &checked.iter_at(p).collect::<Vec<_>>(),
                want,
                "position {p}"
            );
        }
    }

    #[test]
    fn approximate_offsets_point_at_the_ids() {
        // One id each: the offset is the byte holding the position's ids.
        let lists: Vec<Vec<u64>> = (0..200u64).map(|i| vec![1_000 + i * 37]).collect();
        let bytes = encode_id_block(lists.iter().map(Vec::as_slice));
        let block = IdBlock::parse(&bytes).unwrap();
        for p in 0..lists.len() {
            let (start, _) = block.span(p);
            let byte = start * block.width as usize / 8;
            let at = IdBlock::approximate_offset(&bytes, p);
            assert_eq!(
                at,
                bytes.len() - 4 - block.packed.len() + byte,
                "position {p}"
            );
        }
        // With exceptions it stays within the block, however far off.
        let mut lists = lists;
        lists[3] = vec![];
        lists[9] = vec![5, 6, 7, 8];
        let bytes = encode_id_block(lists.iter().map(Vec::as_slice));
        for p in 0..lists.len() + 10 {
            assert!(IdBlock::approximate_offset(&bytes, p) < bytes.len());
        }
        assert_eq!(IdBlock::approximate_offset(&bytes[..3], 5), 0);
    }

    #[test]
    fn blocks_round_trip() {
        round_trip(&[]);
        round_trip(&[vec![7]]);
        round_trip(&[vec![0], vec![u64::MAX]]);
        round_trip(&[vec![], vec![5], vec![1, 2, 3], vec![], vec![9]]);
        round_trip(&[vec![], vec![], vec![1, 2, 3], vec![], vec![9]]);
        round_trip(&[vec![], vec![]]);
        round_trip(&[vec![0, u64::MAX], vec![3]]);
        let many: Vec<u64> = (0..100_000).map(|i| i * 3 + 1_000_000).collect();
        round_trip(&[vec![1], many, vec![2], vec![]]);
        let mut rng = crate::test_rng::TestRng::new(1);
        let lists: Vec<Vec<u64>> = (0..300)
            .map(|i| {
                let x = rng.next_u64();
                match i % 7 {
                    0 => vec![],
                    1 => vec![x >> 40, (x >> 40) + 1 + (x & 0xff)],
                    _ => vec![x >> (i % 50)],
                }
            })
            .collect();
        round_trip(&lists);
    }

    #[test]
    fn one_id_a_fingerprint_costs_its_width() {
        let ids: Vec<Vec<u64>> = (0..200u64).map(|i| vec![i * 80_000]).collect();
        let bytes = encode_id_block(ids.iter().map(Vec::as_slice));
        // 200 ids of 24 bits, the header and the CRC.
        assert_eq!(bytes.len(), HEADER + 600 + 4);
        // None: the header and the CRC.
        let none: Vec<Vec<u64>> = vec![vec![]; 200];
        assert_eq!(
            encode_id_block(none.iter().map(Vec::as_slice)).len(),
            HEADER + 4
        );
    }

    #[test]
    fn damage_is_reported() {
        let bytes = encode_id_block([&[1u64, 2][..], &[3], &[]]);
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(IdBlock::parse(&b).is_err(), "byte {i} bit {bit}");
            }
        }
        assert!(IdBlock::parse(&bytes[..bytes.len() - 1]).is_err());
        // Well sealed but out of order.
        let mut body = bytes[..bytes.len() - 4].to_vec();
        let packed_at = HEADER + 2 * ENTRY;
        body.truncate(packed_at);
        let width = body[6] as usize;
        let mut packed = vec![0u8; (3 * width).div_ceil(8)];
        for (i, v) in [2u64, 1, 3].into_iter().enumerate() {
            write_bits(&mut packed, i * width, width as u32, v - 1);
        }
        body.extend_from_slice(&packed);
        let sealed = seal(body);
        assert!(IdBlock::parse(&sealed)
            .unwrap_err()
            .contains("do not increase"));
    }
}
