//! A one-table store's largest table as one flat Elias-Fano sequence,
//! for probes by header (see [`Plan::header_bits`](crate::plan::Plan::header_bits)).
//!
//! A value's top `header` bits (its *header*) are its high part, stored
//! in unary in one bit vector over the whole table (value `i` with header
//! `h` sets bit `h + i`, so header `h`'s run of values sits between zero
//! number `h - 1` and zero number `h`); the other `64 - header` bits (its
//! low part) are stored back to back in a fixed width. The position of
//! every [`SAMPLE`]-th zero is kept, so a header's run is found by one
//! sample, a word or two of the bit vector and a select in a word, and
//! its values are read straight from the low parts: no block directory,
//! key search, block slot or in-block select, which is what a probe of
//! the blocks costs (each header of a probabilistic query is one probe).
//!
//! Memory only, never stored: built from a table whose blocks decoded
//! cleanly, in memory beside them. It takes `64 - header + 1` bits a
//! value plus `1 + 32 / SAMPLE` bits a header; with the header about
//! `log2` of the values, about `64 - header + 2.5` bits a value.

use super::prefetch;
use super::select::select_in_word;

/// Zeros of the bit vector between two samples of their positions.
const SAMPLE: u64 = 64;

/// Headers narrower than this are not flattened (their runs are long, and
/// the blocks' probes serve them as well).
pub const MIN_HEADER_BITS: u32 = 8;

/// Headers wider than this are not flattened (a low part is then narrower
/// than 24 bits; plans never choose such headers).
pub const MAX_HEADER_BITS: u32 = 40;

/// Sorted values, flattened: see the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Flat {
    header_bits: u32,
    low_bits: u32,
    len: u64,
    /// The high parts' bit vector, then a spare zero word.
    upper: Box<[u64]>,
    /// Bit position of every [`SAMPLE`]-th zero of `upper`.
    samples: Box<[u32]>,
    /// The low parts, little-endian bit order, then a spare word so any
    /// low part is read from two words.
    lows: Box<[u64]>,
}

/// Where a header's run starts in a [`Flat`]: its first value's index and
/// that value's bit in the bit vector (set when the run is not empty).
/// The default is header 0's start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlatStart {
    index: u64,
    bit: u64,
}

/// Builds a [`Flat`] from values pushed in order.
#[derive(Debug)]
pub struct FlatBuilder {
    header_bits: u32,
    low_bits: u32,
    len: u64,
    pushed: u64,
    last: u64,
    upper: Vec<u64>,
    lows: Vec<u64>,
}

impl FlatBuilder {
    /// A builder for `len` values with headers of `header_bits` bits, or
    /// `None` when such a sequence is not flattened: a header outside
    /// [`MIN_HEADER_BITS`]`..=`[`MAX_HEADER_BITS`], more headers than
    /// four a value (a table much smaller than its plan expects: the
    /// headers' zeros would outweigh it), or a bit vector longer than
    /// sample positions can name.
    pub fn new(header_bits: u32, len: u64) -> Option<Self> {
        Self::new_checked(header_bits, len)?;
        let low_bits = 64 - header_bits;
        let (upper_words, lows_words) = Self::words(header_bits, len);
        let (upper_words, lows_words) = (
            usize::try_from(upper_words).ok()?,
            usize::try_from(lows_words).ok()?,
        );
        Some(Self {
            header_bits,
            low_bits,
            len,
            pushed: 0,
            last: 0,
            upper: zeroed(upper_words + 1),
            lows: zeroed(lows_words + 1),
        })
    }

    /// Whether a sequence of `len` values with headers of `header_bits`
    /// bits is built (see [`new`](Self::new)).
    fn new_checked(header_bits: u32, len: u64) -> Option<()> {
        if !(MIN_HEADER_BITS..=MAX_HEADER_BITS).contains(&header_bits) {
            return None;
        }
        let headers = 1u64 << header_bits;
        let upper_bits = len.checked_add(headers)?;
        (headers <= len.saturating_mul(4) && upper_bits <= u64::from(u32::MAX)).then_some(())
    }

    /// Words of the bit vector and of the low parts of `len` values with
    /// headers of `header_bits` bits (which must be in range).
    fn words(header_bits: u32, len: u64) -> (u64, u64) {
        let upper = (len + (1 << header_bits)).div_ceil(64);
        let lows = (len * u64::from(64 - header_bits)).div_ceil(64);
        (upper, lows)
    }

    /// Bytes of memory the [`Flat`] of `len` values with headers of
    /// `header_bits` bits takes (see [`Flat::heap_bytes`]), or `None` when
    /// it is not built (see [`new`](Self::new)).
    pub fn heap_bytes(header_bits: u32, len: u64) -> Option<u64> {
        Self::new_checked(header_bits, len)?;
        let (upper, lows) = Self::words(header_bits, len);
        let samples = (1u64 << header_bits).div_ceil(SAMPLE);
        Some((upper + 1 + lows + 1) * 8 + samples * 4)
    }

    /// Appends `value`, which must not be below the last one pushed;
    /// returns `false` (pushing nothing) when it is, or when `len` values
    /// were pushed already.
    pub fn push(&mut self, value: u64) -> bool {
        if self.pushed == self.len || (self.pushed > 0 && value < self.last) {
            return false;
        }
        let i = self.pushed;
        let bit = (value >> self.low_bits) + i;
        self.upper[(bit / 64) as usize] |= 1 << (bit % 64);
        let low = value & low_mask(self.low_bits);
        let at = i * u64::from(self.low_bits);
        let (w, off) = ((at / 64) as usize, (at % 64) as u32);
        self.lows[w] |= low << off;
        if off + self.low_bits > 64 {
            self.lows[w + 1] |= low >> (64 - off);
        }
        self.pushed += 1;
        self.last = value;
        true
    }

    /// The sequence, or `None` when fewer values were pushed than the
    /// builder was made for.
    pub fn finish(self) -> Option<Flat> {
        if self.pushed != self.len {
            return None;
        }
        let headers = 1u64 << self.header_bits;
        let mut samples = crate::pages::with_capacity(headers.div_ceil(SAMPLE) as usize);
        // Zero number `seen` is the next one met; every SAMPLE-th is kept.
        let mut seen = 0u64;
        for (w, &word) in self.upper.iter().enumerate() {
            let zeros = !word;
            let count = u64::from(zeros.count_ones());
            let mut next = seen.next_multiple_of(SAMPLE);
            while next < seen + count && next < headers {
                let bit = w as u64 * 64 + u64::from(select_in_word(zeros, (next - seen) as u32));
                samples.push(bit as u32);
                next += SAMPLE;
            }
            seen += count;
            if seen >= headers {
                break;
            }
        }
        Some(Flat {
            header_bits: self.header_bits,
            low_bits: self.low_bits,
            len: self.len,
            upper: self.upper.into_boxed_slice(),
            samples: samples.into_boxed_slice(),
            lows: self.lows.into_boxed_slice(),
        })
    }
}

/// `n` zero words, in memory marked for huge pages when large (probes
/// read them at random: see [`pages`](crate::pages)).
fn zeroed(n: usize) -> Vec<u64> {
    let mut words = crate::pages::with_capacity(n);
    words.resize(n, 0);
    words
}

fn low_mask(bits: u32) -> u64 {
    u64::MAX >> (64 - bits)
}

impl Flat {
    /// Flattens `values` (sorted) with headers of `header_bits` bits (see
    /// [`FlatBuilder::new`] for when that is refused).
    pub fn new(header_bits: u32, values: &[u64]) -> Option<Self> {
        let mut builder = FlatBuilder::new(header_bits, values.len() as u64)?;
        values.iter().all(|&v| builder.push(v)).then_some(())?;
        builder.finish()
    }

    /// Number of values.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Width of a header in bits.
    pub fn header_bits(&self) -> u32 {
        self.header_bits
    }

    /// Bytes of memory it takes.
    pub fn heap_bytes(&self) -> usize {
        (self.upper.len() + self.lows.len()) * 8 + self.samples.len() * 4
    }

    /// The header of `value`.
    #[inline(always)]
    pub fn header(&self, value: u64) -> u64 {
        value >> self.low_bits
    }

    /// Stage 1 of a probe of `header`'s run: asks for the sample its
    /// start is found from.
    #[inline(always)]
    pub fn touch_sample(&self, header: u64) {
        if let Some(z) = header.checked_sub(1) {
            prefetch(std::slice::from_ref(
                self.samples.get((z / SAMPLE) as usize).unwrap_or(&0),
            ));
        }
    }

    /// Stage 2: asks for the bit vector's words from that sample on.
    #[inline(always)]
    pub fn touch_upper(&self, header: u64) {
        let Some(z) = header.checked_sub(1) else {
            return;
        };
        if let Some(&at) = self.samples.get((z / SAMPLE) as usize) {
            let w = at as usize / 64;
            prefetch(
                self.upper
                    .get(w..(w + 3).min(self.upper.len()))
                    .unwrap_or_default(),
            );
        }
    }

    /// Stage 3: where `header`'s run starts; asks for its first low part.
    #[inline(always)]
    pub fn start(&self, header: u64) -> FlatStart {
        let start = match header.checked_sub(1) {
            None => FlatStart { index: 0, bit: 0 },
            Some(z) if z < 1u64 << self.header_bits => {
                let bit = self.select_zero(z) + 1;
                FlatStart {
                    index: bit - header,
                    bit,
                }
            }
            // No such header: an empty run at the end.
            Some(_) => FlatStart {
                index: self.len,
                bit: self.upper.len() as u64 * 64 - 64,
            },
        };
        let w = (start.index * u64::from(self.low_bits) / 64) as usize;
        prefetch(
            self.lows
                .get(w..(w + 2).min(self.lows.len()))
                .unwrap_or_default(),
        );
        start
    }

    /// The position of zero number `z` (which exists) in the bit vector.
    #[inline(always)]
    fn select_zero(&self, z: u64) -> u64 {
        let at = u64::from(self.samples[(z / SAMPLE) as usize]);
        let mut left = z % SAMPLE;
        let mut w = (at / 64) as usize;
        let mut zeros = !self.upper[w] & (u64::MAX << (at % 64));
        loop {
            let count = u64::from(zeros.count_ones());
            if left < count {
                return w as u64 * 64 + u64::from(select_in_word(zeros, left as u32));
            }
            left -= count;
            w += 1;
            zeros = !self.upper[w];
        }
    }

    /// The low part of value `i`.
    #[inline(always)]
    fn low(&self, i: u64) -> u64 {
        let at = i * u64::from(self.low_bits);
        let w = (at / 64) as usize;
        let two = u128::from(self.lows[w]) | u128::from(self.lows[w + 1]) << 64;
        (two >> (at % 64)) as u64 & low_mask(self.low_bits)
    }

    /// Calls `near(v, d)` for each value `v` of `header`'s run (which
    /// starts at `start`, from [`start`](Self::start)) whose distance `d`
    /// from `q` is at most `k`, in order, until it returns `false`;
    /// returns whether it did.
    #[inline(always)]
    pub fn near(
        &self,
        start: FlatStart,
        header: u64,
        q: u64,
        k: u32,
        mut near: impl FnMut(u64, u32) -> bool,
    ) -> bool {
        let high = header << self.low_bits;
        let mut i = start.index;
        let mut w = (start.bit / 64) as usize;
        // The run's bits: the ones from `start.bit` to the next zero.
        let mut shift = (start.bit % 64) as u32;
        loop {
            let run = (self.upper[w] >> shift).trailing_ones();
            for _ in 0..run {
                let v = high | self.low(i);
                let d = (v ^ q).count_ones();
                if d <= k && !near(v, d) {
                    return true;
                }
                i += 1;
            }
            // The run goes on into the next word only when it reached
            // this one's end.
            if run < 64 - shift {
                return false;
            }
            w += 1;
            shift = 0;
        }
    }

    /// The values of `header`'s run, in order.
    #[cfg(test)]
    pub fn run(&self, header: u64) -> Vec<u64> {
        let mut out = Vec::new();
        self.near(self.start(header), header, 0, 64, |v, _| {
            out.push(v);
            true
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every header's run, and every near value, against a sorted list.
    fn check(header_bits: u32, mut values: Vec<u64>, queries: &[(u64, u32)]) {
        values.sort_unstable();
        let Some(flat) = Flat::new(header_bits, &values) else {
            panic!(
                "{} values with {header_bits}-bit headers not flattened",
                values.len()
            );
        };
        let low_bits = 64 - header_bits;
        let mut headers: Vec<u64> = values.iter().map(|v| v >> low_bits).collect();
        headers.extend(queries.iter().map(|&(q, _)| q >> low_bits));
        headers.extend([0, 1, (1 << header_bits) - 1]);
        headers.sort_unstable();
        headers.dedup();
        for &h in &headers {
            let want: Vec<u64> = values
                .iter()
                .copied()
                .filter(|v| v >> low_bits == h)
                .collect();
            assert_eq!(flat.run(h), want, "header {h:#x}");
        }
        for &(q, k) in queries {
            for h in [q >> low_bits, (q >> low_bits) ^ 1] {
                let want: Vec<(u64, u32)> = values
                    .iter()
                    .filter(|&&v| v >> low_bits == h)
                    .map(|&v| (v, (v ^ q).count_ones()))
                    .filter(|&(_, d)| d <= k)
                    .collect();
                let mut got = Vec::new();
                let stopped = flat.near(flat.start(h), h, q, k, |v, d| {
                    got.push((v, d));
                    true
                });
                assert!(!stopped);
                assert_eq!(got, want, "query {q:#x} header {h:#x} k {k}");
            }
        }
    }

    #[test]
    fn runs_of_every_length_and_at_the_edges() {
        // Header 0 and the last header, runs longer than a word, a value
        // repeated, empty headers between.
        let mut values = vec![0, 1, 5, u64::MAX, u64::MAX - 3];
        values.extend((0..200).map(|i| (7u64 << 54) | i));
        values.extend([3u64 << 54; 3]);
        values.extend((0..700).map(|i| i << 48));
        check(10, values, &[(7 << 54, 3), (0, 2), (u64::MAX, 5)]);
    }

    #[test]
    fn a_value_below_the_last_or_beyond_the_count_is_refused() {
        let mut b = FlatBuilder::new(8, 64).unwrap();
        assert!(b.push(10 << 56));
        assert!(!b.push(9 << 56));
        assert!((1..64).all(|_| b.push(10 << 56)));
        assert!(!b.push(11 << 56));
        assert_eq!(b.finish().unwrap().run(10), vec![10 << 56; 64]);
        let mut b = FlatBuilder::new(8, 64).unwrap();
        assert!(b.push(1));
        assert!(b.finish().is_none());
    }

    #[test]
    fn headers_out_of_range_or_outweighing_the_values_are_refused() {
        assert!(FlatBuilder::new(MIN_HEADER_BITS - 1, 1000).is_none());
        assert!(FlatBuilder::new(MAX_HEADER_BITS + 1, 1 << 40).is_none());
        assert!(FlatBuilder::new(12, 1023).is_none());
        assert!(FlatBuilder::new(12, 1024).is_some());
    }

    #[test]
    fn the_empty_run_past_the_last_value() {
        let values: Vec<u64> = (0..300u64).map(|i| i << 54).collect();
        let flat = Flat::new(10, &values).unwrap();
        assert_eq!(
            FlatBuilder::heap_bytes(10, 300),
            Some(flat.heap_bytes() as u64)
        );
        assert_eq!(flat.run(1023), Vec::<u64>::new());
        assert_eq!(flat.run(300), Vec::<u64>::new());
        assert_eq!(flat.run(299), vec![299 << 54]);
        assert_eq!(flat.run(0), vec![0]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn random_and_clustered_values(
            header_bits in 8u32..=20,
            seeds in proptest::collection::vec(any::<u64>(), 1..40),
            spread in 0u32..64,
            per in 1usize..200,
            k in 0u32..8,
        ) {
            // Clusters of `per` values around each seed, within `spread`
            // low bits, so runs are long or short.
            let mut values = Vec::new();
            for (j, &s) in seeds.iter().enumerate() {
                for i in 0..per {
                    let noise = (s.rotate_left(i as u32 * 7 + j as u32)) >> (64 - spread.max(1));
                    values.push(s ^ noise);
                }
            }
            let need = (1usize << header_bits).div_ceil(4);
            while values.len() < need {
                values.push(values[values.len() % seeds.len()].wrapping_mul(0x9e37_79b9_7f4a_7c15));
            }
            let queries: Vec<(u64, u32)> = seeds.iter().map(|&s| (s ^ 5, k)).collect();
            check(header_bits, values, &queries);
        }
    }
}
