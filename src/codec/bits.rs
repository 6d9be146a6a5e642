//! Most-significant-bit-first bit streams over bytes.

/// Appends bit fields to a byte vector, most significant bit first.
#[derive(Debug, Default)]
pub struct BitWriter {
    bytes: Vec<u8>,
    acc: u64,
    filled: u32,
}

impl BitWriter {
    /// Starts a stream after the given bytes (which count towards its length).
    pub fn with_prefix(bytes: Vec<u8>) -> Self {
        Self {
            bytes,
            acc: 0,
            filled: 0,
        }
    }

    /// Appends the low `n` bits of `value` (`n ≤ 64`), high bit first.
    #[inline]
    pub fn write(&mut self, value: u64, n: u32) {
        debug_assert!(n <= 64);
        if n > 32 {
            self.write_32(value >> 32, n - 32);
            self.write_32(value, 32);
        } else {
            self.write_32(value, n);
        }
    }

    /// [`write`](Self::write) of at most 32 bits: no branch on `n` but
    /// the word flush (`n = 0` masks the value to nothing), so the
    /// encoder's loops inline it.
    #[inline(always)]
    fn write_32(&mut self, value: u64, n: u32) {
        debug_assert!(n <= 32);
        // At most 31 bits wait in `acc`, so 32 more always fit.
        let v = value & ((1u64 << n) - 1);
        self.acc = (self.acc << n) | v;
        self.filled += n;
        if self.filled >= 32 {
            self.filled -= 32;
            let word = (self.acc >> self.filled) as u32;
            self.bytes.extend_from_slice(&word.to_be_bytes());
            self.acc &= (1u64 << self.filled) - 1;
        }
    }

    /// Pads the last byte with zero bits, so the stream ends on a byte
    /// boundary and [`bytes_mut`](Self::bytes_mut) holds all of it.
    pub fn pad(&mut self) {
        while self.filled >= 8 {
            self.filled -= 8;
            self.bytes.push((self.acc >> self.filled) as u8);
        }
        if self.filled > 0 {
            self.bytes.push((self.acc << (8 - self.filled)) as u8);
        }
        self.acc = 0;
        self.filled = 0;
    }

    /// The bytes written and flushed so far (all of them after
    /// [`pad`](Self::pad)); bytes appended here count towards the stream.
    pub fn bytes_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Bits written so far, including the prefix bytes.
    pub fn bit_len(&self) -> usize {
        self.bytes.len() * 8 + self.filled as usize
    }

    /// Pads the last byte with zero bits and returns the bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.pad();
        self.bytes
    }
}

/// Reads bit fields from a byte slice, most significant bit first.
///
/// Reads past the end fail with `None` rather than panicking.
#[derive(Debug, Clone)]
pub struct BitReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    len: usize,
}

impl<'a> BitReader<'a> {
    /// A reader over all bits of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            pos: 0,
            len: bytes.len() * 8,
        }
    }

    /// The position of the next bit.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bits left to read.
    pub fn remaining(&self) -> usize {
        self.len - self.pos
    }

    /// The next 64 bits starting at the current position, without
    /// consuming them; bits past the end read as zero. Only the top
    /// `57` bits are guaranteed to come from whole bytes of the window.
    #[inline]
    pub fn peek_window(&self) -> u64 {
        let byte = self.pos / 8;
        let shift = (self.pos % 8) as u32;
        let word = match self.bytes.get(byte..byte + 8) {
            Some(eight) => u64::from_be_bytes(eight.try_into().unwrap_or([0; 8])),
            None => {
                let mut buf = [0u8; 8];
                if let Some(tail) = self.bytes.get(byte..) {
                    let n = tail.len().min(8);
                    buf[..n].copy_from_slice(&tail[..n]);
                }
                u64::from_be_bytes(buf)
            }
        };
        word << shift
    }

    /// Consumes `n` bits already examined through [`peek_window`](Self::peek_window).
    /// Returns `None` (and consumes nothing) when fewer than `n` bits remain.
    /// Moves past `n` bits the caller has checked are there
    /// (`n <= remaining()`).
    #[inline]
    pub fn advance(&mut self, n: u32) {
        debug_assert!(n as usize <= self.remaining());
        self.pos += n as usize;
    }

    #[inline]
    pub fn skip(&mut self, n: u32) -> Option<()> {
        if (n as usize) > self.remaining() {
            return None;
        }
        self.pos += n as usize;
        Some(())
    }

    /// Reads `n ≤ 64` bits as an unsigned value.
    #[inline]
    pub fn read(&mut self, n: u32) -> Option<u64> {
        if n == 0 {
            return Some(0);
        }
        if n > 56 {
            let high = self.read(n - 32)?;
            let low = self.read(32)?;
            return Some((high << 32) | low);
        }
        if (n as usize) > self.remaining() {
            return None;
        }
        let v = self.peek_window() >> (64 - n);
        self.pos += n as usize;
        Some(v)
    }

    /// Reads one bit.
    #[inline]
    pub fn read_bit(&mut self) -> Option<bool> {
        self.read(1).map(|b| b == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_mixed_widths() {
        let fields: Vec<(u64, u32)> = (0..500u64)
            .map(|i| {
                let n = (i * 7 % 65) as u32;
                let v = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                (if n == 64 { v } else { v & ((1u64 << n) - 1) }, n)
            })
            .collect();
        let mut w = BitWriter::default();
        for &(v, n) in &fields {
            w.write(v, n);
        }
        let total = w.bit_len();
        let bytes = w.finish();
        assert_eq!(bytes.len(), total.div_ceil(8));
        let mut r = BitReader::new(&bytes);
        for &(v, n) in &fields {
            assert_eq!(r.read(n), Some(v), "width {n}");
        }
        assert!(r.remaining() < 8);
        assert_eq!(r.read(8), None);
    }

    #[test]
    fn reads_past_end_fail() {
        let mut r = BitReader::new(&[0xff]);
        assert_eq!(r.read(9), None);
        assert_eq!(r.read(8), Some(0xff));
        assert_eq!(r.read_bit(), None);
        assert_eq!(r.skip(1), None);
    }
}
