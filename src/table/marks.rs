//! Resume points inside in-memory blocks: every [`STRIDE`] fingerprints,
//! the fingerprint and bit position there (8 bytes a point in most
//! blocks, see [`Points`]), so a probe starts decoding at
//! the nearest point at or below its range instead of at the block start
//! (delta coding otherwise forces decoding everything before it).
//!
//! Memory only, never stored. A block's points are built the second time a
//! probe reads it (one full decode), or earlier by the store's background
//! warmer after open.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::codec::{BlockView, Code, ResumePoint};

/// Fingerprints between resume points.
pub const STRIDE: usize = 16;

/// Bits of a narrow point's word holding its bit position (a 1 KB block's
/// stream has fewer than 2^13 bits).
const BIT_BITS: u32 = 13;

/// A block's resume points as built, read with the block's first
/// fingerprint. Point `m` is the one after fingerprint `(m + 1) * STRIDE -
/// 1`. When every point fits, one word a point: its fingerprint's offset
/// from the block's first in the top 51 bits, its bit position in the low
/// 13 (8 bytes a point; blocks of stores from a few million fingerprints
/// up, whose blocks span less than 2^51); otherwise two words, the
/// fingerprint and the bit position.
#[derive(Debug, Clone, Copy)]
pub struct Points<'a> {
    words: &'a [u64],
    wide: bool,
    base: u64,
}

impl<'a> Points<'a> {
    /// Number of points.
    #[inline(always)]
    pub fn len(&self) -> usize {
        if self.wide {
            self.words.len() / 2
        } else {
            self.words.len()
        }
    }

    /// The words, for prefetching.
    #[inline(always)]
    pub fn words(&self) -> &'a [u64] {
        self.words
    }

    /// The fingerprint at point `m < len()`.
    #[inline(always)]
    fn fingerprint(&self, m: usize) -> u64 {
        if self.wide {
            self.words[2 * m]
        } else {
            self.base.wrapping_add(self.words[m] >> BIT_BITS)
        }
    }

    /// The number of leading points whose fingerprints satisfy `pred`
    /// (which must hold for a prefix of them, as for
    /// [`slice::partition_point`]).
    #[inline(always)]
    pub fn partition_point(&self, pred: impl Fn(u64) -> bool) -> usize {
        if self.wide {
            let (pairs, _) = self.words.as_chunks::<2>();
            pairs.partition_point(|&[fp, _]| pred(fp))
        } else {
            // Offsets sit in the top bits, so words sort as fingerprints do.
            let base = self.base;
            self.words
                .partition_point(|&w| pred(base.wrapping_add(w >> BIT_BITS)))
        }
    }

    /// Point `m` as a [`ResumePoint`], if there is one.
    #[inline(always)]
    pub fn point(&self, m: usize) -> Option<ResumePoint> {
        if m >= self.len() {
            return None;
        }
        let bit = if self.wide {
            self.words[2 * m + 1] as u32
        } else {
            (self.words[m] & ((1 << BIT_BITS) - 1)) as u32
        };
        Some(ResumePoint {
            fingerprint: self.fingerprint(m),
            // Exact: points lie within the block's (u16) count.
            index: ((m + 1) * STRIDE - 1) as u16,
            bit,
        })
    }
}

/// The resume points of one block, built on demand.
#[derive(Debug, Default)]
pub struct Marks {
    seen: AtomicBool,
    /// Whether building them decoded the whole block without an error
    /// (set before `points`, so read after it).
    clean: AtomicBool,
    /// Whether `points` holds two words a point (set like `clean`).
    wide: AtomicBool,
    points: OnceLock<Box<[u64]>>,
}

impl Clone for Marks {
    fn clone(&self) -> Self {
        let points = OnceLock::new();
        if let Some(p) = self.points.get() {
            let _ = points.set(p.clone());
        }
        Self {
            seen: AtomicBool::new(self.seen.load(Ordering::Relaxed)),
            clean: AtomicBool::new(self.clean.load(Ordering::Relaxed)),
            wide: AtomicBool::new(self.wide.load(Ordering::Relaxed)),
            points,
        }
    }
}

impl Marks {
    /// The block's points, or `None` on its first read.
    pub fn get(&self, view: &BlockView<'_>, code: &Code) -> Option<Points<'_>> {
        if self.points.get().is_none() && !self.seen.swap(true, Ordering::Relaxed) {
            return None;
        }
        let words = self.points.get_or_init(|| self.build(view, code));
        Some(self.view(words, view.first()))
    }

    /// Builds the points now if they are not built yet.
    pub fn build_now(&self, view: &BlockView<'_>, code: &Code) {
        let _ = self.points.get_or_init(|| self.build(view, code));
    }

    /// Builds the points, noting whether the block decoded cleanly and
    /// how they are laid out.
    fn build(&self, view: &BlockView<'_>, code: &Code) -> Box<[u64]> {
        let (words, clean, wide) = build(view, code);
        self.clean.store(clean, Ordering::Relaxed);
        self.wide.store(wide, Ordering::Relaxed);
        words
    }

    /// The built `words` read with `base`, the block's first fingerprint.
    #[inline(always)]
    fn view<'a>(&self, words: &'a [u64], base: u64) -> Points<'a> {
        // `wide` was stored before `points` was set, and it was seen set.
        Points {
            words,
            wide: self.wide.load(Ordering::Relaxed),
            base,
        }
    }

    /// The points, if built (without counting a read), for the block whose
    /// first fingerprint is `base`.
    #[inline]
    pub fn built(&self, base: u64) -> Option<Points<'_>> {
        Some(self.view(self.points.get()?, base))
    }

    /// The points, if built by a decode of the whole block that met no
    /// error: then every stretch between them decodes as the checked
    /// decoder decodes it, which is what
    /// [`sweep_stretches`](crate::codec::sweep_stretches) needs.
    #[inline]
    pub fn clean(&self, base: u64) -> Option<Points<'_>> {
        let points = self.built(base)?;
        // `clean` was stored before `points` was set, and it was seen set.
        self.clean.load(Ordering::Relaxed).then_some(points)
    }

    /// Bytes of memory the points take (beyond this struct).
    pub fn heap_bytes(&self) -> usize {
        self.points
            .get()
            .map_or(0, |p| std::mem::size_of_val::<[u64]>(p))
    }
}

/// Decodes the block once, noting a point after every `STRIDE`-th
/// fingerprint, whether it decoded all of them without an error, and
/// whether the points need two words each. Stops quietly at a decoding
/// error: the points before it are sound, and reading past them reports
/// the error.
fn build(view: &BlockView<'_>, code: &Code) -> (Box<[u64]>, bool, bool) {
    let mut points = Vec::with_capacity(view.count() / STRIDE);
    let mut iter = view.iter(code);
    let mut n = 0;
    let clean = loop {
        match iter.next() {
            None => break n == view.count(),
            Some(Err(_)) => break false,
            Some(Ok(_)) => n += 1,
        }
        if n % STRIDE == 0 {
            let Some(p) = iter.resume_point() else {
                break false;
            };
            points.push((p.fingerprint, p.bit));
        }
    };
    let base = view.first();
    let narrow = points
        .iter()
        .all(|&(fp, bit)| fp.wrapping_sub(base) >> (64 - BIT_BITS) == 0 && bit >> BIT_BITS == 0);
    let words: Box<[u64]> = if narrow {
        points
            .iter()
            .map(|&(fp, bit)| (fp.wrapping_sub(base) << BIT_BITS) | u64::from(bit))
            .collect()
    } else {
        points
            .iter()
            .flat_map(|&(fp, bit)| [fp, u64::from(bit)])
            .collect()
    };
    (words, clean, !narrow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{delta_histogram, encode_blocks, SYMBOLS};

    /// Points read back exactly as the iterator's resume points, one word
    /// a point where the block's span allows it and two elsewhere, and
    /// `partition_point` agrees with a linear count.
    #[test]
    fn points_read_back_in_both_layouts() {
        let mut layouts = [0usize; 2];
        // Spacing as in a table of 10M (narrow) and of 100K (wide).
        for spacing in [u64::MAX / 10_000_000, u64::MAX / 100_000] {
            let mut x = 0x9e37_79b9_7f4a_7c15_u64;
            let mut fps: Vec<u64> = (0..5_000u64)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    i * spacing + x % spacing
                })
                .collect();
            fps.dedup();
            let mut counts = [0u64; SYMBOLS];
            delta_histogram(&fps, &mut counts);
            let code = Code::from_counts(&counts);
            for bytes in encode_blocks(&fps, &code, 0, 1024).unwrap() {
                let view = BlockView::parse(&bytes).unwrap();
                let marks = Marks::default();
                marks.build_now(&view, &code);
                let points = marks.clean(view.first()).unwrap();
                layouts[usize::from(points.wide)] += 1;
                let mut iter = view.iter(&code);
                let mut want = Vec::new();
                for n in 1..=view.count() {
                    iter.next().unwrap().unwrap();
                    if n % STRIDE == 0 {
                        want.push(iter.resume_point().unwrap());
                    }
                }
                let got: Vec<_> = (0..points.len())
                    .map(|m| points.point(m).unwrap())
                    .collect();
                assert_eq!(got, want);
                assert_eq!(points.point(points.len()), None);
                for p in &want {
                    for probe in [p.fingerprint - 1, p.fingerprint, p.fingerprint + 1] {
                        let linear = want.iter().filter(|w| w.fingerprint <= probe).count();
                        assert_eq!(points.partition_point(|fp| fp <= probe), linear);
                    }
                }
            }
        }
        assert!(
            layouts[0] > 0 && layouts[1] > 0,
            "both layouts: {layouts:?}"
        );
    }
}
