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
    /// Whether building them decoded the whole block without an error
    /// (set before `points`, so read after it).
    clean: AtomicBool,
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
            clean: AtomicBool::new(self.clean.load(Ordering::Relaxed)),
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
        Some(self.points.get_or_init(|| self.build(view, code)))
    }

    /// Builds the points, noting whether the block decoded cleanly.
    fn build(&self, view: &BlockView<'_>, code: &Code) -> Box<[Mark]> {
        let (points, clean) = build(view, code);
        self.clean.store(clean, Ordering::Relaxed);
        points
    }

    /// Builds the points now if they are not built yet.
    pub fn build_now(&self, view: &BlockView<'_>, code: &Code) {
        let _ = self.points.get_or_init(|| self.build(view, code));
    }

    /// The points, if built (without counting a read).
    #[inline]
    pub fn built(&self) -> Option<&[Mark]> {
        self.points.get().map(|p| &p[..])
    }

    /// The points, if built by a decode of the whole block that met no
    /// error: then every stretch between them decodes as the checked
    /// decoder decodes it, which is what
    /// [`sweep_stretches`](crate::codec::sweep_stretches) needs.
    #[inline]
    pub fn clean(&self) -> Option<&[Mark]> {
        let points = self.points.get()?;
        // `clean` was stored before `points` was set, and `get` saw it set.
        self.clean.load(Ordering::Relaxed).then_some(&points[..])
    }

    /// Bytes of memory the points take (beyond this struct).
    pub fn heap_bytes(&self) -> usize {
        self.points
            .get()
            .map_or(0, |p| std::mem::size_of_val::<[Mark]>(p))
    }
}

/// Decodes the block once, noting a point after every `STRIDE`-th
/// fingerprint, and whether it decoded all of them without an error. Stops
/// quietly at a decoding error: the points before it are sound, and
/// reading past them reports the error.
fn build(view: &BlockView<'_>, code: &Code) -> (Box<[Mark]>, bool) {
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
            let mark = Mark {
                fingerprint: p.fingerprint,
                bit: p.bit,
            };
            debug_assert_eq!(mark.point(points.len()), p);
            points.push(mark);
        }
    };
    (points.into_boxed_slice(), clean)
}
