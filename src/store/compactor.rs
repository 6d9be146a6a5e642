//! The background compactor: a thread that merges pending fingerprints
//! and tombstones into the tables whenever enough have gathered (checked
//! when a write wakes it and once a second), until the handle closes.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::compact::compact_due;
use super::shared::Shared;

/// How long the compactor sleeps between checks when nobody wakes it.
const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Wakes the compactor, or asks it to stop.
#[derive(Default)]
pub(crate) struct Signal {
    /// `true` once the compactor is asked to stop.
    stop: Mutex<bool>,
    changed: Condvar,
}

impl Signal {
    /// Has the compactor check now whether a merge is due.
    pub fn wake(&self) {
        let _stop = self.stop.lock();
        self.changed.notify_one();
    }

    /// Asks the compactor to stop.
    fn stop(&self) {
        *self.stop.lock() = true;
        self.changed.notify_all();
    }

    /// Sleeps until woken, asked to stop or `timeout`; whether to stop.
    fn wait(&self, timeout: Duration) -> bool {
        let mut stop = self.stop.lock();
        if !*stop {
            self.changed.wait_for(&mut stop, timeout);
        }
        *stop
    }
}

/// Starts the background compactor: it merges whenever enough is pending
/// and stops when [`stop`] is called. A failed merge is recorded in the
/// handle's health (for the next call to return) and retried at the next
/// check.
pub(crate) fn spawn(shared: Arc<Shared>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("simstore-compactor".into())
        .spawn(move || {
            super::priority::lower_this_thread();
            while !shared.compactor.wait(CHECK_INTERVAL) {
                if super::filters::missing(&shared) {
                    let _one_at_a_time = shared.locks.merging();
                    super::filters::install(&shared);
                }
                if !shared.merge_due() {
                    continue;
                }
                // RocksDB starts its threads when it first needs them.
                super::priority::lower_storage_threads();
                match compact_due(&shared) {
                    Ok(_) => shared.health.background_succeeded(),
                    Err(e) => {
                        shared
                            .health
                            .background_failed("merge of pending fingerprints", e);
                        std::thread::sleep(CHECK_INTERVAL);
                    }
                }
            }
        })
}

/// Asks the compactor to stop and waits for it.
pub(crate) fn stop(shared: &Shared, handle: JoinHandle<()>) {
    shared.compactor.stop();
    let _ = handle.join();
}
