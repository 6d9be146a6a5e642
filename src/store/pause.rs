//! A test hook: a merge into level 0 held between its merge and its
//! commit until the test lets it go, so that writes are made exactly
//! there, or a merge's commit held between writing its batch and
//! swapping in its state, so that reads are made exactly there (see
//! [`Options::pause_merge`](super::Options::pause_merge)).

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

/// Holds the next merge into level 0, once armed, between computing its
/// tables and committing them, or (armed with
/// [`arm_after_write`](Self::arm_after_write)) the next merge's commit
/// between writing its batch and swapping in its state. Not part of the
/// stable API.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct MergePause(Arc<(Mutex<Pause>, Condvar)>);

#[derive(Debug, Default)]
struct Pause {
    armed: Option<Point>,
    held: bool,
}

/// Where a merge is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    /// A merge into level 0, its tables merged, before its commit.
    Merged,
    /// A merge's commit, its batch written, before its state is swapped
    /// in.
    Written,
    /// A merge into level 0, the `ids` families' content after it put in
    /// its batch whole, before it catches up with the writes since.
    Whole,
}

impl MergePause {
    /// A pause that holds nothing until armed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next merge into level 0 wait for [`release`](Self::release).
    pub fn arm(&self) {
        self.0 .0.lock().armed = Some(Point::Merged);
    }

    /// Makes the next merge's commit wait for [`release`](Self::release)
    /// once its batch is written, before its state is swapped in.
    pub fn arm_after_write(&self) {
        self.0 .0.lock().armed = Some(Point::Written);
    }

    /// Makes the next merge into level 0 that writes the `ids` families
    /// whole wait for [`release`](Self::release) once it has put their
    /// content in its batch, before it catches up with the writes made
    /// since its snapshot.
    pub fn arm_after_whole(&self) {
        self.0 .0.lock().armed = Some(Point::Whole);
    }

    /// Waits until a merge is held.
    pub fn wait_held(&self) {
        let (lock, signal) = &*self.0;
        let mut pause = lock.lock();
        while !pause.held {
            signal.wait(&mut pause);
        }
    }

    /// Lets the held merge (or the next one) go on, and disarms.
    pub fn release(&self) {
        let (lock, signal) = &*self.0;
        let mut pause = lock.lock();
        pause.armed = None;
        pause.held = false;
        signal.notify_all();
    }

    /// Called by a merge at `point`: waits while armed there.
    pub(crate) fn hold(&self, point: Point) {
        let (lock, signal) = &*self.0;
        let mut pause = lock.lock();
        if pause.armed != Some(point) {
            return;
        }
        pause.held = true;
        signal.notify_all();
        while pause.armed == Some(point) {
            signal.wait(&mut pause);
        }
    }
}
