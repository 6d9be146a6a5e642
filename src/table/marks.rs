//! Resume points inside in-memory blocks: every [`STRIDE`] fingerprints,
//! the fingerprint and bit position there, so a probe starts decoding at
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

/// A resume point as a block keeps it: 12 bytes instead of a
/// [`ResumePoint`]'s 16, since its index follows from its position (point
/// `m` is the one after fingerprint `(m + 1) * STRIDE - 1`).
#[derive(Debug, Clone, Copy)]
#[repr(C, packed(4))]
pub struct Mark {
    fingerprint: u64,
    bit: u32,
}

const _: () = assert!(std::mem::size_of::<Mark>() == 12);

impl Mark {
    /// The fingerprint at the point.
    #[inline(always)]
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The full resume point, for mark `m` of its block.
    #[inline(always)]
    pub fn point(&self, m: usize) -> ResumePoint {
        ResumePoint {
            fingerprint: self.fingerprint,
            // Exact: points lie within the block's (u16) count.
            index: ((m + 1) * STRIDE - 1) as u16,
            bit: self.bit,
        }
    }
}

/// The resume points of one block, built on demand.
#[derive(Debug, Default)]
pub struct Marks {
    seen: AtomicBool,
    points: OnceLock<Box<[Mark]>>,
}

impl Clone for Marks {
    fn clone(&self) -> Self {
        let points = OnceLock::new();
        if let Some(p) = self.points.get() {
            let _ = points.set(p.clone());
        }
        Self {
            seen: AtomicBool::new(self.seen.load(Ordering::Relaxed)),
            points,
        }
    }
}

impl Marks {
    /// The block's points, or `None` on its first read.
    pub fn get(&self, view: &BlockView<'_>, code: &Code) -> Option<&[Mark]> {
        if let Some(p) = self.points.get() {
            return Some(p);
        }
        if !self.seen.swap(true, Ordering::Relaxed) {
            return None;
        }
        Some(self.points.get_or_init(|| build(view, code)))
    }

    /// Builds the points now if they are not built yet.
    pub fn build_now(&self, view: &BlockView<'_>, code: &Code) {
        let _ = self.points.get_or_init(|| build(view, code));
    }

    /// The points, if built (without counting a read).
    #[inline]
    pub fn built(&self) -> Option<&[Mark]> {
        self.points.get().map(|p| &p[..])
    }

    /// Bytes of memory the points take (beyond this struct).
    pub fn heap_bytes(&self) -> usize {
        self.points
            .get()
            .map_or(0, |p| std::mem::size_of_val::<[Mark]>(p))
    }
}

/// Decodes the block once, noting a point after every `STRIDE`-th
/// fingerprint. Stops quietly at a decoding error: the points before it
/// are sound, and reading past them reports the error.
fn build(view: &BlockView<'_>, code: &Code) -> Box<[Mark]> {
    let mut points = Vec::with_capacity(view.count() / STRIDE);
    let mut iter = view.iter(code);
    let mut n = 0;
    while let Some(Ok(_)) = iter.next() {
        n += 1;
        if n % STRIDE == 0 {
            let Some(p) = iter.resume_point() else {
                break;
            };
            let mark = Mark {
                fingerprint: p.fingerprint,
                bit: p.bit,
            };
            debug_assert_eq!(mark.point(points.len()), p);
            points.push(mark);
        }
    }
    points.into_boxed_slice()
}
