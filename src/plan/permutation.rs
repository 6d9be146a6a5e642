//! Bit permutations of a 64-bit fingerprint that move whole runs of bits.
//!
//! Bit positions are numbered from the least significant bit (0) to the most
//! significant (63). A permutation is given as a map: permuted bit `i` is
//! taken from original bit `source[i]`. The permutations the planner builds
//! only move contiguous runs of bits, so they are applied as a few
//! shift-and-mask moves rather than 64 single-bit moves.

/// One contiguous run of bits moved as a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Move {
    /// Lowest original bit position of the run.
    from: u8,
    /// Lowest permuted bit position of the run.
    to: u8,
    /// Mask of `width` low bits.
    mask: u64,
}

/// A bijection on the 64 bit positions of a fingerprint, with its inverse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permutation {
    source: [u8; 64],
    forward: Vec<Move>,
    backward: Vec<Move>,
}

/// Why a stored bit map is not a permutation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAPermutation {
    /// The first permuted position whose source is out of range or repeated.
    pub position: u8,
}

impl Permutation {
    /// The identity permutation.
    pub fn identity() -> Self {
        let mut source = [0u8; 64];
        for (i, s) in source.iter_mut().enumerate() {
            *s = i as u8;
        }
        Self::from_source(source).unwrap_or_else(|_| unreachable!("identity is a permutation"))
    }

    /// Builds a permutation from its bit map: permuted bit `i` comes from
    /// original bit `source[i]`. Fails unless every position appears once.
    pub fn from_source(source: [u8; 64]) -> Result<Self, NotAPermutation> {
        let mut seen = 0u64;
        for (i, &s) in source.iter().enumerate() {
            if s >= 64 || seen & (1u64 << s) != 0 {
                return Err(NotAPermutation { position: i as u8 });
            }
            seen |= 1u64 << s;
        }
        let forward = runs(&source);
        let mut inverse = [0u8; 64];
        for (i, &s) in source.iter().enumerate() {
            inverse[s as usize] = i as u8;
        }
        let backward = runs(&inverse);
        Ok(Self {
            source,
            forward,
            backward,
        })
    }

    /// Builds the permutation that places the given runs of original bits
    /// at the top of the permuted word, first run highest, in order.
    ///
    /// Each run is `(lowest bit, width)`; the runs must cover all 64 bits
    /// exactly once.
    pub fn from_runs_top_down(runs_in_order: &[(u8, u8)]) -> Result<Self, NotAPermutation> {
        let mut source = [u8::MAX; 64];
        let mut top: i32 = 64;
        for &(low, width) in runs_in_order {
            top -= i32::from(width);
            if top < 0 {
                return Err(NotAPermutation { position: 0 });
            }
            for j in 0..width {
                source[(top as usize) + j as usize] = low.saturating_add(j);
            }
        }
        if top != 0 {
            return Err(NotAPermutation { position: 0 });
        }
        Self::from_source(source)
    }

    /// The bit map: permuted bit `i` comes from original bit `source()[i]`.
    pub fn source(&self) -> &[u8; 64] {
        &self.source
    }

    /// The fewest top bits of a permuted word below which the bits keep
    /// their original order (permuted bits `0..64 - n` come from
    /// increasing original positions); 0 for the identity. The planner's
    /// permutations move whole blocks to the top and leave the rest in
    /// order, so values sorted in original order are put in permuted
    /// order by a stable sort on these bits alone.
    ///
    /// ```
    /// use simstore::plan::Permutation;
    /// assert_eq!(Permutation::identity().moved_top_bits(), 0);
    /// // Bits 16..32 moved to the top, the rest below in order.
    /// let p = Permutation::from_runs_top_down(&[(16, 16), (48, 16), (32, 16), (0, 16)]).unwrap();
    /// assert_eq!(p.moved_top_bits(), 16);
    /// ```
    pub fn moved_top_bits(&self) -> u32 {
        let in_order = 1 + self.source.windows(2).take_while(|p| p[0] < p[1]).count();
        64 - in_order as u32
    }

    /// Applies the permutation to a fingerprint.
    #[inline]
    pub fn apply(&self, fp: u64) -> u64 {
        apply_moves(&self.forward, fp)
    }

    /// Undoes the permutation: `invert(apply(x)) == x`.
    #[inline]
    pub fn invert(&self, permuted: u64) -> u64 {
        apply_moves(&self.backward, permuted)
    }
}

#[inline]
fn apply_moves(moves: &[Move], x: u64) -> u64 {
    let mut out = 0u64;
    for m in moves {
        out |= ((x >> m.from) & m.mask) << m.to;
    }
    out
}

/// Splits a bit map into maximal runs where consecutive permuted positions
/// take consecutive original positions.
fn runs(source: &[u8; 64]) -> Vec<Move> {
    let mut out = Vec::new();
    let mut start = 0usize;
    while start < 64 {
        let mut end = start + 1;
        while end < 64 && source[end] == source[end - 1].wrapping_add(1) {
            end += 1;
        }
        let width = end - start;
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        out.push(Move {
            from: source[start],
            to: start as u8,
            mask,
        });
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slow_apply(source: &[u8; 64], x: u64) -> u64 {
        let mut out = 0;
        for (i, &s) in source.iter().enumerate() {
            out |= ((x >> s) & 1) << i;
        }
        out
    }

    #[test]
    fn identity_is_identity() {
        let p = Permutation::identity();
        for x in [0u64, 1, u64::MAX, 0x0123_4567_89ab_cdef] {
            assert_eq!(p.apply(x), x);
            assert_eq!(p.invert(x), x);
        }
    }

    #[test]
    fn runs_match_bitwise_definition_and_invert() {
        // Original blocks: [0,16) [16,32) [32,48) [48,64); move block 1 to the top.
        let p = Permutation::from_runs_top_down(&[(16, 16), (48, 16), (32, 16), (0, 16)]).unwrap();
        let mut rng = crate::test_rng::TestRng::new(1);
        for _ in 0..1000 {
            let x = rng.next_u64();
            assert_eq!(p.apply(x), slow_apply(p.source(), x));
            assert_eq!(p.invert(p.apply(x)), x);
        }
        assert_eq!(p.apply(0x0000_0000_ffff_0000) >> 48, 0xffff);
    }

    #[test]
    fn rejects_non_permutations() {
        let mut s = *Permutation::identity().source();
        s[5] = 4;
        assert_eq!(
            Permutation::from_source(s),
            Err(NotAPermutation { position: 5 })
        );
        s[5] = 64;
        assert!(Permutation::from_source(s).is_err());
        assert!(Permutation::from_runs_top_down(&[(0, 32)]).is_err());
        assert!(Permutation::from_runs_top_down(&[(0, 40), (0, 40)]).is_err());
    }
}
