//! Length-limited canonical Huffman codes over the 64 delta positions.
//!
//! Every symbol `h ∈ 0..64` (the position of the most significant bit of
//! the XOR of two successive fingerprints) always gets a code, even when
//! it was never seen, because blocks written later may need it under the
//! same code. Code lengths are limited to [`MAX_CODE_LEN`] bits so that one
//! table lookup decodes any symbol. Codes are canonical: the 64 lengths
//! alone determine every code word, and they are what is stored.

use super::bits::BitReader;

/// Number of symbols: one per bit position of a 64-bit fingerprint.
pub const SYMBOLS: usize = 64;

/// Longest code word, in bits; also the width of the decoding table index.
pub const MAX_CODE_LEN: u8 = 12;

/// Why a list of code lengths does not form a usable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeError {
    /// A length is 0 or exceeds [`MAX_CODE_LEN`].
    LengthOutOfRange {
        /// The symbol with the bad length.
        symbol: u8,
        /// Its length.
        length: u8,
    },
    /// The lengths do not describe a complete prefix code (Kraft sum ≠ 1).
    Incomplete,
}

impl std::fmt::Display for CodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::LengthOutOfRange { symbol, length } => {
                write!(
                    f,
                    "code length {length} of symbol {symbol} is out of range 1..={MAX_CODE_LEN}"
                )
            }
            Self::Incomplete => write!(f, "code lengths do not form a complete prefix code"),
        }
    }
}

/// A canonical Huffman code with its encoding and decoding tables.
#[derive(Clone, PartialEq, Eq)]
pub struct Code {
    lengths: [u8; SYMBOLS],
    words: [u16; SYMBOLS],
    /// Indexed by the next `MAX_CODE_LEN` bits: `symbol << 4 | length`.
    table: Box<[u16]>,
    /// Indexed by the next [`FAST_BITS`] bits: a
    /// [`fast_entry`](Self::fast_entry). Small enough that the codes of all tables a
    /// query probes stay in the first-level cache together.
    fast: [u32; 1 << FAST_BITS],
    /// The same steps as bytes, for the sweep: `[total, h, length, 64 - h]`;
    /// total 0 (not a fast step) also for h = 0.
    steps: [[u8; 4]; 1 << FAST_BITS],
}

/// Index width of the first-level decoding table.
const FAST_BITS: u8 = 8;

/// Most bits (code word and low bits) one fast step takes from a 64-bit
/// window: a window read at any bit offset holds at least 57 whole bits.
pub const FAST_STEP_BITS: u32 = 57;

impl std::fmt::Debug for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Code")
            .field("lengths", &self.lengths)
            .finish()
    }
}

impl Code {
    /// Builds the optimal length-limited code for the given symbol counts.
    /// Every count is increased by one first, so unseen symbols get codes.
    pub fn from_counts(counts: &[u64; SYMBOLS]) -> Self {
        let lengths = package_merge(counts);
        Self::from_lengths(lengths)
            .unwrap_or_else(|_| unreachable!("package-merge yields complete codes"))
    }

    /// Rebuilds a code from its stored lengths, checking that they form a
    /// complete prefix code within the length limit.
    pub fn from_lengths(lengths: [u8; SYMBOLS]) -> Result<Self, CodeError> {
        let mut kraft: u64 = 0;
        for (symbol, &length) in lengths.iter().enumerate() {
            if length == 0 || length > MAX_CODE_LEN {
                return Err(CodeError::LengthOutOfRange {
                    symbol: symbol as u8,
                    length,
                });
            }
            kraft += 1u64 << (MAX_CODE_LEN - length);
        }
        if kraft != 1u64 << MAX_CODE_LEN {
            return Err(CodeError::Incomplete);
        }
        let words = canonical_words(&lengths);
        let mut table = vec![0u16; 1 << MAX_CODE_LEN].into_boxed_slice();
        for symbol in 0..SYMBOLS {
            let len = lengths[symbol];
            let shift = MAX_CODE_LEN - len;
            let start = usize::from(words[symbol]) << shift;
            let entry = ((symbol as u16) << 4) | u16::from(len);
            for slot in table.iter_mut().skip(start).take(1 << shift) {
                *slot = entry;
            }
        }
        let mut fast = [0u32; 1 << FAST_BITS];
        for (i, slot) in fast.iter_mut().enumerate() {
            let entry = u32::from(table[i << (MAX_CODE_LEN - FAST_BITS)]);
            let (symbol, len) = (entry >> 4, entry & 0xf);
            if len <= u32::from(FAST_BITS) && symbol + len <= FAST_STEP_BITS {
                *slot = ((symbol + len) << 16) | (symbol << 8) | len;
            }
        }
        let mut steps = [[0u8; 4]; 1 << FAST_BITS];
        for (step, &entry) in steps.iter_mut().zip(&fast) {
            let (total, h, len) = (entry >> 16, (entry >> 8) & 0x3f, entry & 0xff);
            if entry != 0 && h != 0 {
                *step = [total as u8, h as u8, len as u8, (64 - h) as u8];
            }
        }
        Ok(Self {
            lengths,
            words,
            table,
            fast,
            steps,
        })
    }

    /// The code lengths, the code's stored form.
    pub fn lengths(&self) -> &[u8; SYMBOLS] {
        &self.lengths
    }

    /// The code word and its length for `symbol`.
    #[inline]
    pub fn word(&self, symbol: u8) -> (u16, u8) {
        let s = usize::from(symbol & 63);
        (self.words[s], self.lengths[s])
    }

    /// Expected encoded size, in bits, of symbols with the given counts
    /// (code words only).
    pub fn cost(&self, counts: &[u64; SYMBOLS]) -> u64 {
        counts
            .iter()
            .zip(&self.lengths)
            .map(|(&c, &l)| c * u64::from(l))
            .sum()
    }

    /// Decodes one symbol from the top bits of a window (see
    /// [`BitReader::peek_window`]); returns `(symbol, length)`.
    #[inline]
    pub fn lookup(&self, window: u64) -> (u8, u8) {
        let index = (window >> (64 - u32::from(MAX_CODE_LEN))) as usize;
        let entry = self.table.get(index).copied().unwrap_or(0);
        ((entry >> 4) as u8, (entry & 0xf) as u8)
    }

    /// The first-level table's entry for a window: `(length + symbol) << 16
    /// | symbol << 8 | length` when the code word is at most [`FAST_BITS`]
    /// long and code word and low bits together fit [`FAST_STEP_BITS`];
    /// 0 otherwise (use [`lookup`](Self::lookup) and read carefully).
    #[inline(always)]
    pub fn fast_entry(&self, window: u64) -> u32 {
        self.fast[(window >> (64 - u32::from(FAST_BITS))) as usize]
    }

    /// The sweep's step for a window: `[total, h, length, 64 - h]`, total
    /// 0 when the step is not a fast one or h is 0.
    #[inline(always)]
    pub fn step_bytes(&self, window: u64) -> &[u8; 4] {
        &self.steps[(window >> (64 - u32::from(FAST_BITS))) as usize]
    }

    /// Decodes one symbol a bit at a time, by the canonical-code rule.
    /// This is the reference the table-driven path is tested against.
    pub fn decode_slow(&self, reader: &mut BitReader<'_>) -> Option<u8> {
        let mut code: u32 = 0;
        for len in 1..=MAX_CODE_LEN {
            code = (code << 1) | u32::from(reader.read_bit()?);
            for symbol in 0..SYMBOLS {
                if self.lengths[symbol] == len && u32::from(self.words[symbol]) == code {
                    return Some(symbol as u8);
                }
            }
        }
        None
    }
}

/// Assigns canonical code words: shorter codes first, ties by symbol.
fn canonical_words(lengths: &[u8; SYMBOLS]) -> [u16; SYMBOLS] {
    let mut order: Vec<usize> = (0..SYMBOLS).collect();
    order.sort_by_key(|&s| (lengths[s], s));
    let mut words = [0u16; SYMBOLS];
    let mut code: u32 = 0;
    let mut prev_len = 0u8;
    for (i, &s) in order.iter().enumerate() {
        let len = lengths[s];
        if i > 0 {
            code = (code + 1) << (len - prev_len);
        }
        words[s] = code as u16;
        prev_len = len;
    }
    words
}

/// Optimal code lengths limited to `MAX_CODE_LEN` (package-merge, Larmore
/// and Hirschberg 1990) for `counts + 1`.
fn package_merge(counts: &[u64; SYMBOLS]) -> [u8; SYMBOLS] {
    #[derive(Clone)]
    struct Item {
        weight: u128,
        symbols: Vec<u8>,
    }
    let mut leaves: Vec<Item> = counts
        .iter()
        .enumerate()
        .map(|(s, &c)| Item {
            weight: u128::from(c) + 1,
            symbols: vec![s as u8],
        })
        .collect();
    leaves.sort_by_key(|item| item.weight);
    let mut list = leaves.clone();
    for _ in 1..MAX_CODE_LEN {
        let packages = list.chunks_exact(2).map(|pair| {
            let mut symbols = pair[0].symbols.clone();
            symbols.extend_from_slice(&pair[1].symbols);
            Item {
                weight: pair[0].weight + pair[1].weight,
                symbols,
            }
        });
        let mut merged: Vec<Item> = leaves.iter().cloned().chain(packages).collect();
        merged.sort_by_key(|item| item.weight);
        list = merged;
    }
    let mut lengths = [0u8; SYMBOLS];
    for item in list.iter().take(2 * SYMBOLS - 2) {
        for &s in &item.symbols {
            lengths[usize::from(s)] += 1;
        }
    }
    lengths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_counts_give_six_bit_codes() {
        let code = Code::from_counts(&[10; SYMBOLS]);
        assert!(code.lengths().iter().all(|&l| l == 6));
    }

    #[test]
    fn skewed_counts_respect_the_limit_and_favour_frequent_symbols() {
        let mut counts = [0u64; SYMBOLS];
        for (i, c) in counts.iter_mut().enumerate() {
            *c = 1u64 << i.min(62);
        }
        let code = Code::from_counts(&counts);
        assert!(code
            .lengths()
            .iter()
            .all(|&l| (1..=MAX_CODE_LEN).contains(&l)));
        assert!(code.lengths()[63] <= code.lengths()[0]);
        assert!(code.lengths()[63] <= 2);
    }

    #[test]
    fn table_and_slow_decoders_agree_on_every_symbol() {
        let mut counts = [0u64; SYMBOLS];
        for (i, c) in counts.iter_mut().enumerate() {
            *c = ((i as u64 * 7919) % 1000) * (i as u64 % 5);
        }
        let code = Code::from_counts(&counts);
        for s in 0..SYMBOLS as u8 {
            let (word, len) = code.word(s);
            let bytes = (u64::from(word) << (64 - u32::from(len))).to_be_bytes();
            let reader = BitReader::new(&bytes);
            assert_eq!(code.lookup(reader.peek_window()), (s, len));
            let mut slow = BitReader::new(&bytes);
            assert_eq!(code.decode_slow(&mut slow), Some(s));
            assert_eq!(slow.position(), usize::from(len));
        }
    }

    #[test]
    fn rejects_bad_lengths() {
        assert_eq!(
            Code::from_lengths([0; SYMBOLS]).unwrap_err(),
            CodeError::LengthOutOfRange {
                symbol: 0,
                length: 0
            }
        );
        assert_eq!(
            Code::from_lengths([7; SYMBOLS]).unwrap_err(),
            CodeError::Incomplete
        );
        let mut l = [6u8; SYMBOLS];
        l[0] = 13;
        assert!(matches!(
            Code::from_lengths(l),
            Err(CodeError::LengthOutOfRange { symbol: 0, .. })
        ));
    }
}
