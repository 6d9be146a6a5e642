//! A test hook: a merge into level 0 held between its merge and its
//! commit until the test lets it go, so that writes are made exactly
//! there (see [`Options::pause_merge`](super::Options::pause_merge)).

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

/// Holds the next merge into level 0, once armed, between computing its
/// tables and committing them. Not part of the stable API.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct MergePause(Arc<(Mutex<Pause>, Condvar)>);

#[derive(Debug, Default)]
struct Pause {
    armed: bool,
    held: bool,
}

impl MergePause {
    /// A pause that holds nothing until armed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next merge into level 0 wait for [`release`](Self::release).
    pub fn arm(&self) {
        self.0 .0.lock().armed = true;
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
        pause.armed = false;
        pause.held = false;
        signal.notify_all();
    }

    /// Called by a merge: waits while armed.
    pub(crate) fn hold(&self) {
        let (lock, signal) = &*self.0;
        let mut pause = lock.lock();
        if !pause.armed {
            return;
        }
        pause.held = true;
        signal.notify_all();
        while pause.armed {
            signal.wait(&mut pause);
        }
    }
}
