//! A block's fingerprints as queries read them in memory, in the
//! Elias-Fano form: each fingerprint's offset from the block's first (with
//! that one's `low` lowest bits cleared) is split into `low` bits, stored
//! in a fixed number of bits, and the rest (`high`), stored in unary in a
//! small bit vector (offset `i` sets bit `high + i`). A probe finds its
//! place from the bit vector (which zero starts its high part) without
//! decoding anything before it.
//!
//! The low parts are kept in two arrays: their top 24 bits (the
//! *signatures*, three bytes a value; the whole low part when it is
//! narrower) and the bits below those, back to back. A value's low part
//! is its own low bits, so a near scan tests the signatures against the
//! query's (a popcount a value, 16 at a time with AVX-512) and reads the
//! rare value that passes in full: a scan reads three bytes a value
//! instead of the whole low part (five at 10M fingerprints a table).
//!
//! Memory only, never stored: built from a block that decoded cleanly, or
//! from the fingerprints a merge encodes. It takes `low + 2..3` bits a
//! fingerprint, with `low` about `log2(span / count)`: less than the
//! Huffman-delta stream it replaces in memory (42.5 bits at 10M
//! fingerprints a table against 44.8).

use zerocopy::IntoBytes;

use super::chunks::{Chunks, Words};
use super::select::select_in_word;

/// Blocks whose low parts are narrower than this have no signatures and
/// are scanned value by value, high part and all: their low parts'
/// distance from a query's would rule out too few values.
const LOWS_MIN_BITS: u32 = 16;

/// Bits of a signature at most: the top bits of a low part, scanned
/// first (with 24, a random value passes a distance of 3 once in 7,000).
const SIG_BITS: u32 = 24;

/// Bytes a signature takes.
const SIG_BYTES: usize = 3;

/// Runs spanning fewer high parts than this are scanned value by value
/// ([`Packed::scan_near_short`]).
const SHORT_RUN: u64 = 8;

/// Low parts are at most this wide, so one 8-byte load reads any of them
/// (a high part is then below 2^8).
const MAX_LOW_BITS: u32 = 56;

/// Sorted fingerprints, packed as offsets from their base (see
/// [`base`](Self::base)): the first with its low `low_bits` bits cleared,
/// so a value's low part is its own low bits.
#[derive(Debug, Clone)]
pub struct Packed {
    first: u64,
    count: u32,
    /// Bits of an offset stored in the low parts.
    low_bits: u32,
    /// Words of the high parts' bit vector at the start of `words`.
    upper_words: u32,
    /// Words of the signatures after it (0 when the low parts are
    /// narrower than [`LOWS_MIN_BITS`]).
    sig_words: u32,
    /// The high parts' bit vector, then the signatures (three bytes,
    /// little-endian), then the low parts' remaining bits (little-endian
    /// bit order), then a spare word so every remainder can be read with
    /// one 8-byte load.
    words: Words,
}

/// A place in a [`Packed`]: value `index`, whose high part's bit is the
/// first set bit at or after `bit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    index: u32,
    bit: u32,
}

impl Cursor {
    /// The first value.
    pub const START: Cursor = Cursor { index: 0, bit: 0 };

    /// The value's index.
    pub fn index(&self) -> usize {
        self.index as usize
    }
}

/// How a scan ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// Every value from the start was at most `hi`.
    Exhausted,
    /// A value above `hi` was reached.
    PastEnd,
    /// The callback asked to stop.
    Stopped,
}

impl Packed {
    /// Packs `values`, which must be sorted (non-decreasing), on the heap.
    pub fn new(values: &[u64]) -> Self {
        Self::pack(values, |len, fill| Words::heap(len, fill))
    }

    /// [`new`](Self::new), the words taken from `chunks` (a table's blocks
    /// read in key order; see [`Chunks`]).
    pub fn new_in(values: &[u64], chunks: &mut Chunks) -> Self {
        Self::pack(values, |len, fill| chunks.words(len, fill))
    }

    /// Packs `values` into the words `alloc(len, fill)` makes: `len`
    /// zeroed words, filled by `fill`.
    fn pack(
        values: &[u64],
        alloc: impl FnOnce(usize, &mut dyn FnMut(&mut [u64])) -> Words,
    ) -> Self {
        debug_assert!(values.windows(2).all(|w| w[0] <= w[1]));
        let n = values.len();
        let first = values.first().copied().unwrap_or(0);
        let span = values.last().map_or(0, |&last| last - first);
        let per = span / (n as u64).max(1);
        let low_bits = if per == 0 {
            0
        } else {
            (u64::BITS - 1 - per.leading_zeros()).min(MAX_LOW_BITS)
        };
        let mask = (1u64 << low_bits) - 1;
        let base = first & !mask;
        let sig_bits = sig_bits(low_bits);
        let rest_bits = low_bits - sig_bits;
        let rest_mask = (1u64 << rest_bits) - 1;
        let upper_bits = (values.last().map_or(0, |&last| last - base) >> low_bits) as usize + n;
        let upper_words = upper_bits.div_ceil(64);
        let sig_words = if sig_bits == 0 {
            0
        } else {
            (n * SIG_BYTES).div_ceil(8)
        };
        let rest_words = (n * rest_bits as usize).div_ceil(64);
        let mut fill = |words: &mut [u64]| {
            // Remainder bits not yet written, the lowest first.
            let (mut pending, mut filled, mut at) = (0u128, 0u32, upper_words + sig_words);
            for (i, &v) in values.iter().enumerate() {
                let offset = v - base;
                let bit = (offset >> low_bits) as usize + i;
                words[bit / 64] |= 1 << (bit % 64);
                if sig_bits > 0 {
                    let sig = (offset & mask) >> rest_bits;
                    let bytes = words[upper_words..upper_words + sig_words].as_mut_bytes();
                    bytes[i * SIG_BYTES..(i + 1) * SIG_BYTES]
                        .copy_from_slice(&sig.to_le_bytes()[..SIG_BYTES]);
                }
                pending |= u128::from(offset & rest_mask) << filled;
                filled += rest_bits;
                if filled >= 64 {
                    words[at] = pending as u64;
                    at += 1;
                    pending >>= 64;
                    filled -= 64;
                }
            }
            if filled > 0 {
                words[at] = pending as u64;
            }
        };
        let words = alloc(upper_words + sig_words + rest_words + 1, &mut fill);
        Self {
            first,
            count: n as u32,
            low_bits,
            upper_words: upper_words as u32,
            sig_words: sig_words as u32,
            words,
        }
    }

    /// Whether the words are in a chunk (see [`Chunks`]).
    #[cfg(test)]
    pub(super) fn in_chunk(&self) -> bool {
        self.words.in_chunk()
    }

    /// Number of values.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of memory the packed values take (beyond this struct).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val::<[u64]>(self.words())
    }

    /// All the words: the bit vector, the signatures, the remainders and
    /// the spare word (their number as [`pack`](Self::pack) counts them).
    #[inline(always)]
    fn words(&self) -> &[u64] {
        let rest_words = (self.count as usize * self.rest_bits() as usize).div_ceil(64);
        let len = (self.upper_words + self.sig_words) as usize + rest_words + 1;
        // SAFETY: `pack` made `words` with exactly `len` words.
        unsafe { self.words.get(len) }
    }

    /// The high parts' bit vector.
    #[inline(always)]
    fn upper(&self) -> &[u64] {
        // SAFETY: `pack` made `words` with the bit vector first (see
        // `words`), so its `upper_words` are among them.
        unsafe { self.words.get(self.upper_words as usize) }
    }

    /// The signatures' bytes (three a value; none when there are none).
    #[inline(always)]
    fn sigs(&self) -> &[u8] {
        let from = self.upper_words as usize;
        // SAFETY: `pack` made `words` with the signatures right after the
        // bit vector (see `words`).
        let words = unsafe { self.words.get(from + self.sig_words as usize) };
        words[from..].as_bytes()
    }

    /// The low parts' remaining bits, as bytes.
    #[inline(always)]
    fn rest(&self) -> &[u8] {
        self.words()[(self.upper_words + self.sig_words) as usize..].as_bytes()
    }

    /// Bits of each low part kept in `rest`.
    #[inline(always)]
    fn rest_bits(&self) -> u32 {
        self.low_bits - sig_bits(self.low_bits)
    }

    /// The memory a scan of values `from..to` reads first: the bit vector
    /// and those values' signatures (their low parts when there are no
    /// signatures), for prefetching.
    #[inline(always)]
    pub fn regions(&self, from: usize, to: usize) -> (&[u64], &[u8]) {
        let (bytes, bits) = if self.sig_words > 0 {
            (self.sigs(), 8 * SIG_BYTES)
        } else {
            (self.rest(), self.low_bits as usize)
        };
        let a = (from * bits / 8).min(bytes.len());
        let b = (to * bits).div_ceil(8).clamp(a, bytes.len());
        (self.upper(), &bytes[a..b])
    }

    /// Value `index`'s low part.
    #[inline(always)]
    fn low(&self, index: usize) -> u64 {
        let rest_bits = self.rest_bits();
        let rest = crate::simd::lows::low(self.rest(), rest_bits, index);
        if self.sig_words == 0 {
            return rest;
        }
        (u64::from(self.sig(index)) << rest_bits) | rest
    }

    /// The signature `x` would have in this block: the top bits of its
    /// low part.
    #[inline(always)]
    fn sig_of(&self, x: u64) -> u32 {
        ((x & ((1u64 << self.low_bits) - 1)) >> self.rest_bits()) as u32
    }

    /// Value `index`'s signature (the block must have signatures).
    #[inline(always)]
    fn sig(&self, index: usize) -> u32 {
        crate::simd::lows::sig(self.sigs(), index)
    }

    /// What offsets are from: the first value with its low `low_bits`
    /// bits cleared (kept as a method, not a field, so a block's slot stays
    /// one cache line).
    #[inline(always)]
    fn base(&self) -> u64 {
        self.first & !((1u64 << self.low_bits) - 1)
    }

    /// Where the first value at or above `x` is (`len()` as its index when
    /// there is none).
    #[inline(always)]
    pub fn lower_bound(&self, x: u64) -> Cursor {
        self.lower_bound_from(Cursor::START, x)
    }

    /// [`lower_bound`](Self::lower_bound) of `x` searched from `from`,
    /// which must not lie past it (a value before `from` is below `x`):
    /// the bit vector is read from `from`'s word on, so the end of a run
    /// is found from the run's start, not from the block's.
    #[inline(always)]
    pub fn lower_bound_from(&self, from: Cursor, x: u64) -> Cursor {
        if x <= self.first {
            return from;
        }
        let target = x - self.base();
        let high = target >> self.low_bits;
        // Every value's bit has as many zeros before it as its high part, so
        // the values with a smaller high part are those before zero number
        // `high - 1` (counting from 0); find it, unless it lies before
        // `from` (whose bit has `from.bit - from.index` zeros before it).
        let mut cursor = from;
        let before = u64::from(from.bit - from.index);
        if let Some(rank) = high.checked_sub(1).filter(|&rank| rank >= before) {
            let upper = self.upper();
            let mut w = from.bit as usize / 64;
            // The first word's zeros before `from.bit` are counted already.
            let mut word = upper
                .get(w)
                .map_or(0, |&word| !word & (u64::MAX << (from.bit % 64)));
            let mut zeros_left = rank - before;
            loop {
                if w >= upper.len() {
                    return self.end();
                }
                let zeros = u64::from(word.count_ones());
                if zeros_left < zeros {
                    let bit = w as u64 * 64 + u64::from(select_in_word(word, zeros_left as u32));
                    cursor = Cursor {
                        index: (bit - rank) as u32,
                        bit: bit as u32 + 1,
                    };
                    break;
                }
                zeros_left -= zeros;
                w += 1;
                word = upper.get(w).map_or(0, |&word| !word);
            }
        }
        // Then step over the values of that high part below `x`, by
        // their high parts and signatures (which order them unless equal
        // to the target's), reading a value's remaining bits only on a tie.
        let rest_bits = self.rest_bits();
        let coarse = |offset: u64| offset.checked_shr(rest_bits).unwrap_or(0);
        let target_coarse = coarse(target);
        while cursor.index() < self.len() {
            let (bit, _) = self.next_one(cursor.bit);
            let high = (bit as u64 - u64::from(cursor.index)) << self.low_bits;
            let i = cursor.index();
            let offset_coarse = if self.sig_words > 0 {
                coarse(high) | u64::from(self.sig(i))
            } else {
                coarse(high | self.low(i))
            };
            if offset_coarse > target_coarse
                || (offset_coarse == target_coarse && (high | self.low(i)) >= target)
            {
                break;
            }
            cursor = Cursor {
                index: cursor.index + 1,
                bit: bit + 1,
            };
        }
        cursor
    }

    /// The cursor past the last value.
    fn end(&self) -> Cursor {
        Cursor {
            index: self.count,
            bit: self.upper_words * 64,
        }
    }

    /// The first set bit of the bit vector at or after `bit`, and the word
    /// it is in with the bits up to it cleared.
    #[inline(always)]
    fn next_one(&self, bit: u32) -> (u32, u64) {
        let upper = self.upper();
        let mut w = bit as usize / 64;
        let mut word = upper[w] & (u64::MAX << (bit % 64));
        while word == 0 {
            w += 1;
            word = upper[w];
        }
        let found = w as u32 * 64 + word.trailing_zeros();
        (found, word & (word - 1))
    }

    /// Calls `visit(v)` for the values from `cursor` up to `hi`, in order,
    /// until it returns `false`.
    #[inline(always)]
    pub fn visit(&self, cursor: Cursor, hi: u64, mut visit: impl FnMut(u64) -> bool) -> Scan {
        let n = self.len();
        let mut i = cursor.index();
        if i >= n {
            return Scan::Exhausted;
        }
        let upper = self.upper();
        let low_bits = self.low_bits;
        let base = self.base();
        let (found, mut word) = self.next_one(cursor.bit);
        let mut w = found as usize / 64;
        let mut bit = found as usize;
        loop {
            let high = (bit - i) as u64;
            let v = base.wrapping_add((high << low_bits) | self.low(i));
            if v > hi {
                return Scan::PastEnd;
            }
            if !visit(v) {
                return Scan::Stopped;
            }
            i += 1;
            if i == n {
                return Scan::Exhausted;
            }
            while word == 0 {
                w += 1;
                word = upper[w];
            }
            bit = w * 64 + word.trailing_zeros() as usize;
            word &= word - 1;
        }
    }

    /// Calls `near(v, d)` for the values `v` from `cursor` up to `hi` whose
    /// distance `d` from `q` is at most `k`, in order, until it returns
    /// `false`.
    #[inline(always)]
    pub fn scan_near(
        &self,
        cursor: Cursor,
        hi: u64,
        q: u64,
        k: u32,
        near: impl FnMut(u64, u32) -> bool,
    ) -> Scan {
        if self.low_bits >= LOWS_MIN_BITS {
            // High parts the run may span past the cursor's (about one
            // value each): a short run (a one-table store's header, a
            // long prefix's) is not worth a vector loop and a search for
            // its end.
            let highs = (hi.saturating_sub(self.base()) >> self.low_bits)
                .saturating_sub(u64::from(cursor.bit - cursor.index));
            if highs < SHORT_RUN {
                return self.scan_near_short(cursor, hi, q, k, near);
            }
            #[cfg(target_arch = "x86_64")]
            if crate::simd::cpu::wide_lows() {
                // SAFETY: `wide_lows` checked that this processor has
                // AVX-512F, AVX-512BW, AVX512-VBMI and AVX512-VPOPCNTDQ,
                // the features `scan_near_wide` is compiled for.
                return unsafe { self.scan_near_wide(cursor, hi, q, k, near) };
            }
            #[cfg(target_arch = "x86_64")]
            if crate::simd::cpu::avx2_lows() {
                // SAFETY: `avx2_lows` checked that this processor has AVX2,
                // the feature `scan_near_avx2` is compiled for.
                return unsafe { self.scan_near_avx2(cursor, hi, q, k, near) };
            }
            return self.scan_near_lows(cursor, hi, q, k, near);
        }
        self.scan_near_scalar(cursor, hi, q, k, near)
    }

    /// [`scan_near`](Self::scan_near) value by value from the cursor,
    /// for runs expected to hold few values: each value is placed by its
    /// high part and signature, and its other bits are read only when its
    /// signature passes or they decide whether it lies past `hi`.
    #[inline(always)]
    pub fn scan_near_short(
        &self,
        cursor: Cursor,
        hi: u64,
        q: u64,
        k: u32,
        mut near: impl FnMut(u64, u32) -> bool,
    ) -> Scan {
        let n = self.len();
        let mut i = cursor.index();
        if i >= n {
            return Scan::Exhausted;
        }
        if self.sig_words == 0 {
            return self.scan_near_scalar(cursor, hi, q, k, near);
        }
        let base = self.base();
        let rest_bits = self.rest_bits();
        let rest_mask = (1u64 << rest_bits) - 1;
        let q_sig = self.sig_of(q);
        let mut bit = cursor.bit;
        loop {
            let (found, _) = self.next_one(bit);
            let high = u64::from(found) - i as u64;
            let sig = self.sig(i);
            // The value with its remaining bits cleared.
            let coarse = base.wrapping_add((high << self.low_bits) | (u64::from(sig) << rest_bits));
            if coarse > hi {
                return Scan::PastEnd;
            }
            if (sig ^ q_sig).count_ones() <= k || coarse | rest_mask > hi {
                let v = coarse | crate::simd::lows::low(self.rest(), rest_bits, i);
                if v > hi {
                    return Scan::PastEnd;
                }
                let d = (v ^ q).count_ones();
                if d <= k && !near(v, d) {
                    return Scan::Stopped;
                }
            }
            i += 1;
            if i == n {
                return Scan::Exhausted;
            }
            bit = found + 1;
        }
    }

    /// [`scan_near`](Self::scan_near) by signatures (by whole low parts
    /// in a block without them), one value at a time: a value's low part
    /// is its own low `low_bits` bits (offsets are from `base`, whose low
    /// bits are zero), so the distance of its top bits from `q`'s is a
    /// lower bound of the value's; only a value that passes it is read in
    /// full (its high part found by a select). The run's end is found
    /// first, by a search for the first value above `hi`.
    #[inline(always)]
    pub fn scan_near_lows(
        &self,
        cursor: Cursor,
        hi: u64,
        q: u64,
        k: u32,
        mut near: impl FnMut(u64, u32) -> bool,
    ) -> Scan {
        let n = self.len();
        let start = cursor.index();
        if start >= n {
            return Scan::Exhausted;
        }
        let end = self.end_of(cursor, hi);
        let q_low = q & ((1u64 << self.low_bits) - 1);
        let q_sig = self.sig_of(q);
        for i in start..end.max(start) {
            let passes = if self.sig_words > 0 {
                (self.sig(i) ^ q_sig).count_ones() <= k
            } else {
                (self.low(i) ^ q_low).count_ones() <= k
            };
            if passes && !self.report(cursor, i, q, k, &mut near) {
                return Scan::Stopped;
            }
        }
        self.ended(end)
    }

    /// [`scan_near`](Self::scan_near) one value at a time, high part and
    /// all: the reference the loops by low parts are tested against.
    #[inline(always)]
    pub fn scan_near_scalar(
        &self,
        cursor: Cursor,
        hi: u64,
        q: u64,
        k: u32,
        mut near: impl FnMut(u64, u32) -> bool,
    ) -> Scan {
        self.visit(cursor, hi, |v| {
            let d = (v ^ q).count_ones();
            d > k || near(v, d)
        })
    }

    /// [`scan_near_lows`](Self::scan_near_lows) 16 signatures at a time:
    /// the loop XORs 16 signatures with the query's, counts per lane and
    /// compares, and only the rare value whose signature passes is read
    /// in full.
    ///
    /// # Safety
    /// The processor must have AVX-512F, AVX-512BW, AVX512-VBMI and
    /// AVX512-VPOPCNTDQ.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vpopcntdq,popcnt")]
    pub unsafe fn scan_near_wide(
        &self,
        cursor: Cursor,
        hi: u64,
        q: u64,
        k: u32,
        mut near: impl FnMut(u64, u32) -> bool,
    ) -> Scan {
        let n = self.len();
        let start = cursor.index();
        if start >= n {
            return Scan::Exhausted;
        }
        if self.sig_words == 0 {
            return self.scan_near_lows(cursor, hi, q, k, near);
        }
        let end = self.end_of(cursor, hi);
        let q_sig = self.sig_of(q);
        // SAFETY: the caller's processor has the features `within_wide` is
        // compiled for (this function's own).
        let stopped = unsafe {
            crate::simd::lows::within_wide(self.sigs(), (start, end), q_sig, k, |index| {
                self.report(cursor, index, q, k, &mut near)
            })
        };
        if stopped {
            return Scan::Stopped;
        }
        self.ended(end)
    }

    /// [`scan_near_wide`](Self::scan_near_wide) for processors with AVX2
    /// but not AVX-512: eight signatures at a time
    /// ([`within_avx2`](crate::simd::lows::within_avx2)).
    ///
    /// # Safety
    /// The processor must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt")]
    pub unsafe fn scan_near_avx2(
        &self,
        cursor: Cursor,
        hi: u64,
        q: u64,
        k: u32,
        mut near: impl FnMut(u64, u32) -> bool,
    ) -> Scan {
        let n = self.len();
        let start = cursor.index();
        if start >= n {
            return Scan::Exhausted;
        }
        if self.sig_words == 0 {
            return self.scan_near_lows(cursor, hi, q, k, near);
        }
        let end = self.end_of(cursor, hi);
        let q_sig = self.sig_of(q);
        // SAFETY: the caller's processor has AVX2, the feature
        // `within_avx2` is compiled for (this function's own).
        let stopped = unsafe {
            crate::simd::lows::within_avx2(self.sigs(), (start, end), q_sig, k, |index| {
                self.report(cursor, index, q, k, &mut near)
            })
        };
        if stopped {
            return Scan::Stopped;
        }
        self.ended(end)
    }

    /// The index just past the last value at most `hi`, searched from
    /// `from` (which must not lie past it).
    #[inline(always)]
    fn end_of(&self, from: Cursor, hi: u64) -> usize {
        match hi.checked_add(1) {
            Some(above) => self.lower_bound_from(from, above).index(),
            None => self.len(),
        }
    }

    /// How a scan that went up to `end` (from [`end_of`](Self::end_of))
    /// ended.
    #[inline(always)]
    fn ended(&self, end: usize) -> Scan {
        if end < self.len() {
            Scan::PastEnd
        } else {
            Scan::Exhausted
        }
    }

    /// Reads value `index` (at or after `from`), whose low part passed, in
    /// full and passes it to `near` when it is within `k` of `q`; `false`
    /// when `near` asks to stop.
    #[inline(always)]
    fn report(
        &self,
        from: Cursor,
        index: usize,
        q: u64,
        k: u32,
        near: &mut impl FnMut(u64, u32) -> bool,
    ) -> bool {
        let Some(v) = self.value_at(from, index) else {
            return true;
        };
        let d = (v ^ q).count_ones();
        d > k || near(v, d)
    }

    /// Value `index` (`None` past the end), at or after `from`, its high
    /// part found by a select over the bit vector from `from`'s word
    /// (inlined, so its popcounts are compiled for the caller's target
    /// features).
    #[inline(always)]
    fn value_at(&self, from: Cursor, index: usize) -> Option<u64> {
        let from = if index >= from.index() {
            from
        } else {
            Cursor::START
        };
        let upper = self.upper();
        let first = from.bit as usize / 64;
        // The ones of `first` below `from.bit` are values before `from`'s;
        // none lie between `from.bit` and `from`'s value.
        let below = upper.get(first).map_or(0, |&word| {
            (word & ((1u64 << (from.bit % 64)) - 1)).count_ones() as usize
        });
        let mut rank = index - from.index() + below;
        for (w, &word) in upper.iter().enumerate().skip(first) {
            let ones = word.count_ones() as usize;
            if rank < ones {
                let bit = w * 64 + select_in_word(word, rank as u32) as usize;
                let low = self.low(index);
                return Some(
                    self.base()
                        .wrapping_add(((bit - index) as u64) << self.low_bits | low),
                );
            }
            rank -= ones;
        }
        None
    }

    /// The index of `x`, when it is one of the values.
    #[inline]
    pub fn position(&self, x: u64) -> Option<usize> {
        let at = self.lower_bound(x);
        let mut found = false;
        self.visit(at, x, |v| {
            found = v == x;
            false
        });
        found.then(|| at.index())
    }

    /// Appends every value to `out`, in order.
    pub fn values_into(&self, out: &mut Vec<u64>) {
        out.reserve(self.len());
        self.visit(Cursor::START, u64::MAX, |v| {
            out.push(v);
            true
        });
    }
}

/// Bits of a signature for low parts of `low_bits`: [`SIG_BITS`] or the
/// whole low part if narrower, and 0 (no signatures) when it is narrower
/// than [`LOWS_MIN_BITS`].
#[inline(always)]
fn sig_bits(low_bits: u32) -> u32 {
    if low_bits >= LOWS_MIN_BITS {
        low_bits.min(SIG_BITS)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sorted(mut v: Vec<u64>) -> Vec<u64> {
        v.sort_unstable();
        v
    }

    fn all(packed: &Packed) -> Vec<u64> {
        let mut back = Vec::new();
        packed.values_into(&mut back);
        back
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 8 } else { 256 }, ..ProptestConfig::default() })]

        /// Every value reads back, searches agree with the slice's, and
        /// near scans report exactly the brute-force matches, for spans of
        /// every width (a shift narrows the values' range) and with
        /// repeated values.
        #[test]
        fn packed_values_read_back_and_scan_as_the_slice(
            raw in proptest::collection::vec(any::<u64>(), 0..300),
            shift in 0u32..64,
            base in any::<u64>(),
            k in 0u32..8,
            probes in proptest::collection::vec(any::<u64>(), 1..8),
        ) {
            let values = sorted(raw.iter().map(|&v| base.saturating_add(v >> shift)).collect());
            let packed = Packed::new(&values);
            prop_assert_eq!(packed.len(), values.len());
            prop_assert_eq!(&all(&packed), &values);
            for &p in &probes {
                let x = values.get(p as usize % values.len().max(1)).map_or(p, |&v| v ^ (p & 3));
                let from = values.partition_point(|&v| v < x);
                let cursor = packed.lower_bound(x);
                prop_assert_eq!(cursor.index(), from);
                let hi = x.saturating_add(p >> (p % 64));
                // A query a few bits from `x` (often a stored value), and
                // one within two bits of it, so matches at exactly `k` occur.
                let near_x = x ^ (1 << (p % 64)) ^ (1 << ((p >> 6) % 64));
                for q in [x ^ (p >> 40), near_x] {
                    let mut got = Vec::new();
                    let end = packed.scan_near(cursor, hi, q, k, |v, d| {
                        got.push((v, d));
                        true
                    });
                    let want: Vec<(u64, u32)> = values[from..]
                        .iter()
                        .take_while(|&&v| v <= hi)
                        .map(|&v| (v, (v ^ q).count_ones()))
                        .filter(|&(_, d)| d <= k)
                        .collect();
                    prop_assert_eq!(&got, &want);
                    let past = values[from..].iter().any(|&v| v > hi);
                    prop_assert_eq!(end, if past { Scan::PastEnd } else { Scan::Exhausted });
                    // Every loop, whichever `scan_near` chose.
                    let mut scalar = Vec::new();
                    let scalar_end = packed.scan_near_scalar(cursor, hi, q, k, |v, d| {
                        scalar.push((v, d));
                        true
                    });
                    prop_assert_eq!((&scalar, scalar_end), (&want, end));
                    let mut lows = Vec::new();
                    let lows_end = packed.scan_near_lows(cursor, hi, q, k, |v, d| {
                        lows.push((v, d));
                        true
                    });
                    prop_assert_eq!((&lows, lows_end), (&want, end));
                    let mut short = Vec::new();
                    let short_end = packed.scan_near_short(cursor, hi, q, k, |v, d| {
                        short.push((v, d));
                        true
                    });
                    prop_assert_eq!((&short, short_end), (&want, end));
                    #[cfg(target_arch = "x86_64")]
                    if crate::simd::cpu::wide_lows() {
                        let mut wide = Vec::new();
                        // SAFETY: `wide_lows` checked the features.
                        let wide_end = unsafe {
                            packed.scan_near_wide(cursor, hi, q, k, |v, d| {
                                wide.push((v, d));
                                true
                            })
                        };
                        prop_assert_eq!((&wide, wide_end), (&want, end));
                    }
                    #[cfg(target_arch = "x86_64")]
                    if crate::simd::cpu::avx2_lows() {
                        let mut eight = Vec::new();
                        // SAFETY: `avx2_lows` checked the feature.
                        let eight_end = unsafe {
                            packed.scan_near_avx2(cursor, hi, q, k, |v, d| {
                                eight.push((v, d));
                                true
                            })
                        };
                        prop_assert_eq!((&eight, eight_end), (&want, end));
                    }
                }
            }
        }
    }

    proptest! {
        /// A search from any cursor not past the answer finds what the
        /// search from the start finds.
        #[test]
        fn lower_bound_from_a_cursor(
            values in proptest::collection::vec(any::<u64>(), 1..300),
            cuts in proptest::collection::vec(any::<u64>(), 1..12),
        ) {
            let values = sorted(values);
            let packed = Packed::new(&values);
            // Targets among the values, beside them and between them.
            let mut targets: Vec<u64> = cuts
                .iter()
                .map(|&c| {
                    let v = values[c as usize % values.len()];
                    match c % 3 {
                        0 => v,
                        1 => v.wrapping_add(1),
                        _ => c,
                    }
                })
                .collect();
            targets.sort_unstable();
            for pair in targets.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                let want = packed.lower_bound(b);
                prop_assert_eq!(want.index(), values.partition_point(|&v| v < b));
                for from in [Cursor::START, packed.lower_bound(a), want] {
                    prop_assert_eq!(packed.lower_bound_from(from, b).index(), want.index());
                }
            }
        }
    }

    #[test]
    fn spans_at_the_edges() {
        for span in [0u64, 1, 2, 255, 1 << 56, (1 << 57) - 1, u64::MAX - 5] {
            for n in [1usize, 2, 3, 64, 200] {
                let values: Vec<u64> = (0..n as u64)
                    .map(|i| 5u64.wrapping_add((span / n as u64).saturating_mul(i)))
                    .chain([5u64.wrapping_add(span)])
                    .collect();
                let values = sorted(values);
                let packed = Packed::new(&values);
                assert_eq!(all(&packed), values, "span {span:x} n {n}");
                for (i, &v) in values.iter().enumerate() {
                    let want = values.partition_point(|&x| x < v);
                    assert_eq!(packed.lower_bound(v).index(), want, "span {span:x} at {i}");
                }
                assert_eq!(
                    packed.lower_bound(u64::MAX).index(),
                    values.partition_point(|&x| x < u64::MAX)
                );
            }
        }
        assert_eq!(all(&Packed::new(&[7])), [7]);
        assert!(Packed::new(&[]).is_empty());
        assert_eq!(Packed::new(&[]).lower_bound(9).index(), 0);
    }

    #[test]
    fn memory_is_near_the_entropy_of_the_gaps() {
        // 183 values spread like a 10M table's block: about 42.5 bits each.
        let mut x = 1u64;
        let values = sorted(
            (0..183)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    (x >> 16) + (1 << 50)
                })
                .collect(),
        );
        let packed = Packed::new(&values);
        let bits = packed.heap_bytes() * 8 / values.len();
        assert!((41..=45).contains(&bits), "{bits} bits a value");
    }

    /// Blocks packed into chunks (as a table read at open is) hold and
    /// scan as those packed on the heap, beyond the chunks' first pages.
    #[test]
    fn blocks_in_chunks_read_as_on_the_heap() {
        let mut chunks = Chunks::default();
        let mut x = 9u64;
        for block in 0..if cfg!(miri) { 4 } else { 3000 } {
            let mut values: Vec<u64> = (0..183)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    x >> (block % 20)
                })
                .collect();
            values.sort_unstable();
            let heap = Packed::new(&values);
            let chunked = Packed::new_in(&values, &mut chunks);
            assert_eq!(all(&chunked), values, "block {block}");
            assert_eq!(chunked.heap_bytes(), heap.heap_bytes());
            let q = values[block % values.len()] ^ 0b1011;
            let mut near = [Vec::new(), Vec::new()];
            for (packed, out) in [&heap, &chunked].into_iter().zip(&mut near) {
                packed.scan_near(Cursor::START, u64::MAX, q, 3, |v, d| {
                    out.push((v, d));
                    true
                });
            }
            assert_eq!(near[0], near[1], "block {block}");
        }
    }

    #[test]
    fn a_stop_ends_the_scan() {
        let values: Vec<u64> = (0..100).collect();
        let packed = Packed::new(&values);
        let mut seen = 0;
        let end = packed.scan_near(packed.lower_bound(10), u64::MAX, 0, 64, |_, _| {
            seen += 1;
            seen < 5
        });
        assert_eq!((end, seen), (Scan::Stopped, 5));
        let mut seen = 0;
        let end = packed.visit(Cursor::START, 3, |_| {
            seen += 1;
            true
        });
        assert_eq!((end, seen), (Scan::PastEnd, 4));
    }
}
