//! A block's fingerprints as queries read them in memory: each stored as
//! its offset from the block's first fingerprint in a fixed number of bits
//! (the bits of the block's span), packed back to back. Any fingerprint is
//! one unaligned load, a shift and a mask away, so a probe finds its place
//! by binary search and checks a run without decoding anything before it.
//!
//! Memory only, never stored: built from a block that decoded cleanly, or
//! from the fingerprints a merge encodes. At the densities stores reach it
//! takes about as many bits a fingerprint as the Huffman-delta stream plus
//! the resume points that stream needed (49 bits at 10M fingerprints a
//! table against 44.8 + 4).

use std::sync::Arc;

/// Widths above this are stored as whole words: a value of up to 57 bits
/// starting anywhere in a byte fits one 8-byte load.
const MAX_PACKED_WIDTH: u32 = 57;

/// Sorted fingerprints, packed as offsets from the first.
#[derive(Debug, Clone)]
pub struct Packed {
    first: u64,
    /// Mask of an offset's `width` bits.
    mask: u64,
    count: u32,
    /// Bits an offset takes: 0..=57, or 64.
    width: u32,
    /// The offsets, little-endian bit order, then 8 spare bytes so every
    /// offset can be read with one 8-byte load.
    bytes: Arc<[u8]>,
}

/// How a [`Packed::scan_near`] ended.
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
    /// Packs `values`, which must be sorted (non-decreasing).
    pub fn new(values: &[u64]) -> Self {
        debug_assert!(values.windows(2).all(|w| w[0] <= w[1]));
        let first = values.first().copied().unwrap_or(0);
        let span = values.last().map_or(0, |&last| last.wrapping_sub(first));
        let mut width = u64::BITS - span.leading_zeros();
        if width > MAX_PACKED_WIDTH {
            width = u64::BITS;
        }
        let mask = if width == u64::BITS {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        let len = (values.len() * width as usize).div_ceil(8) + 8;
        let mut bytes = Vec::with_capacity(len);
        // Bits not yet written, the lowest first.
        let (mut pending, mut filled) = (0u128, 0u32);
        for &v in values {
            pending |= u128::from(v - first) << filled;
            filled += width;
            if filled >= 64 {
                bytes.extend_from_slice(&(pending as u64).to_le_bytes());
                pending >>= 64;
                filled -= 64;
            }
        }
        bytes.extend_from_slice(&pending.to_le_bytes()[..filled.div_ceil(8) as usize]);
        bytes.resize(len, 0);
        Self {
            first,
            mask,
            count: values.len() as u32,
            width,
            bytes: bytes.into(),
        }
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
        self.bytes.len()
    }

    /// The packed bytes, for prefetching.
    #[inline(always)]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The byte holding the start of value `i`'s offset.
    #[inline(always)]
    pub fn byte_of(&self, i: usize) -> usize {
        i * self.width as usize / 8
    }

    /// Value `i < len()`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> u64 {
        let bit = i * self.width as usize;
        let offset = (read_word(&self.bytes, bit / 8) >> (bit % 8)) & self.mask;
        self.first.wrapping_add(offset)
    }

    /// The number of values below `x` (where `x` would be inserted).
    #[inline(always)]
    pub fn lower_bound(&self, x: u64) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.get(mid) < x {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// [`lower_bound`](Self::lower_bound), searching out from index
    /// `guess` (where interpolation puts `x`): a few reads when the guess
    /// is close, twice a binary search's when it is far.
    #[inline(always)]
    pub fn lower_bound_near(&self, x: u64, guess: usize) -> usize {
        let n = self.len();
        let g = guess.min(n);
        // The answer lies in lo..=hi.
        let (mut lo, mut hi);
        if g < n && self.get(g) < x {
            lo = g + 1;
            hi = n;
            let mut step = 1;
            while g + step < n {
                if self.get(g + step) >= x {
                    hi = g + step;
                    break;
                }
                lo = g + step + 1;
                step *= 2;
            }
        } else {
            lo = 0;
            hi = g;
            let mut step = 1;
            while step <= g {
                if self.get(g - step) < x {
                    lo = g - step + 1;
                    break;
                }
                hi = g - step;
                step *= 2;
            }
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.get(mid) < x {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Appends every value to `out`, in order.
    pub fn values_into(&self, out: &mut Vec<u64>) {
        out.extend((0..self.len()).map(|i| self.get(i)));
    }

    /// Calls `near(v, d)` for the values `v` from index `from` up to `hi`
    /// whose distance `d` from `q` is at most `k`, in order, until it
    /// returns `false`.
    #[inline(always)]
    pub fn scan_near(
        &self,
        from: usize,
        hi: u64,
        q: u64,
        k: u32,
        mut near: impl FnMut(u64, u32) -> bool,
    ) -> Scan {
        for i in from..self.len() {
            let v = self.get(i);
            if v > hi {
                return Scan::PastEnd;
            }
            let d = (v ^ q).count_ones();
            if d <= k && !near(v, d) {
                return Scan::Stopped;
            }
        }
        Scan::Exhausted
    }

    /// Calls `visit(v)` for the values from index `from` up to `hi`, in
    /// order, until it returns `false`.
    #[inline(always)]
    pub fn visit(&self, from: usize, hi: u64, mut visit: impl FnMut(u64) -> bool) -> Scan {
        for i in from..self.len() {
            let v = self.get(i);
            if v > hi {
                return Scan::PastEnd;
            }
            if !visit(v) {
                return Scan::Stopped;
            }
        }
        Scan::Exhausted
    }
}

/// The little-endian word at byte `at` (which has 8 bytes after it).
#[inline(always)]
fn read_word(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sorted(mut v: Vec<u64>) -> Vec<u64> {
        v.sort_unstable();
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 8 } else { 256 }, ..ProptestConfig::default() })]

        /// Every value reads back, searches agree with the slice's, and
        /// near scans report exactly the brute-force matches, for spans of
        /// every width (a shift narrows the values' range).
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
            let mut back = Vec::new();
            packed.values_into(&mut back);
            prop_assert_eq!(&back, &values);
            for &p in &probes {
                let x = values.get(p as usize % values.len().max(1)).map_or(p, |&v| v ^ (p & 3));
                let want = values.partition_point(|&v| v < x);
                prop_assert_eq!(packed.lower_bound(x), want);
                for guess in [0, want.saturating_sub(3), want, want + 1, want + 9, p as usize % 400] {
                    prop_assert_eq!(packed.lower_bound_near(x, guess), want, "guess {}", guess);
                }
                let from = packed.lower_bound(x);
                let hi = x.saturating_add(p >> (p % 64));
                let q = x ^ (p >> 40);
                let mut got = Vec::new();
                let end = packed.scan_near(from, hi, q, k, |v, d| {
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
            }
        }
    }

    #[test]
    fn widths_at_the_edges() {
        for span in [0u64, 1, (1 << 57) - 1, 1 << 57, u64::MAX - 5] {
            let values = [5, 5 + span / 3, 5 + span / 2, 5u64.wrapping_add(span)];
            let values = sorted(values.to_vec());
            let packed = Packed::new(&values);
            let mut back = Vec::new();
            packed.values_into(&mut back);
            assert_eq!(back, values, "span {span:x}");
        }
        assert_eq!(Packed::new(&[7]).get(0), 7);
        assert!(Packed::new(&[]).is_empty());
    }

    #[test]
    fn a_stop_ends_the_scan() {
        let values: Vec<u64> = (0..100).collect();
        let packed = Packed::new(&values);
        let mut seen = 0;
        let end = packed.scan_near(10, u64::MAX, 0, 64, |_, _| {
            seen += 1;
            seen < 5
        });
        assert_eq!((end, seen), (Scan::Stopped, 5));
        let mut seen = 0;
        assert_eq!(
            packed.visit(0, 3, |_| {
                seen += 1;
                true
            }),
            Scan::PastEnd
        );
        assert_eq!(seen, 4);
    }
}
