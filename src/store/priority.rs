//! CPU priority of background work. Merges and RocksDB's own flushes and
//! compactions run at nice [`BACKGROUND_NICE`], below writers and queries:
//! on a machine short of cores they take what writers and queries leave
//! idle instead of an equal share (a write group then waits less behind a
//! flush of the log families' memtables), and still a tenth of a busy core
//! each, so a merge's commit waiting on a flush is not starved. On other
//! systems than Linux priorities are left as they are.

/// The nice value of background work.
#[cfg(target_os = "linux")]
const BACKGROUND_NICE: std::ffi::c_int = 10;

/// Lowers the calling thread's CPU priority to [`BACKGROUND_NICE`], and so
/// that of the threads it starts (they inherit it).
pub(crate) fn lower_this_thread() {
    #[cfg(target_os = "linux")]
    set_nice(0);
}

/// Lowers the CPU priority of RocksDB's background threads in this process
/// (named `rocksdb:low`, `rocksdb:high`, …; started by RocksDB when work is
/// first scheduled, and shared by every store the process opens) to
/// [`BACKGROUND_NICE`]. Threads started after the call keep the priority of
/// the thread that made RocksDB start them; calling again lowers them too.
pub(crate) fn lower_storage_threads() {
    #[cfg(target_os = "linux")]
    {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return;
        };
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let is_storage = std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|name| name.starts_with("rocksdb:"));
            if is_storage {
                set_nice(tid);
            }
        }
    }
}

/// Sets the nice value of thread `tid` (0: the calling thread).
#[cfg(target_os = "linux")]
fn set_nice(tid: std::ffi::c_uint) {
    extern "C" {
        fn setpriority(
            which: std::ffi::c_int,
            who: std::ffi::c_uint,
            prio: std::ffi::c_int,
        ) -> std::ffi::c_int;
    }
    // `PRIO_PROCESS` with a thread id: on Linux the nice value is a
    // per-thread attribute, and this sets that thread's only.
    const PRIO_PROCESS: std::ffi::c_int = 0;
    // SAFETY: `setpriority` takes no pointers; a failure (a thread that
    // has exited, or no permission to change it) leaves the priority as
    // it was, which is harmless.
    unsafe {
        setpriority(PRIO_PROCESS, tid, BACKGROUND_NICE);
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::sync::mpsc;

    /// The nice value of the calling thread, from `/proc`.
    fn own_nice() -> i64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // Fields after the parenthesised name; nice is the 19th field.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split(' ').nth(16).unwrap().parse().unwrap()
    }

    /// Starts a thread named `name` that reports its nice value each time
    /// it is asked.
    fn named(name: &str) -> (mpsc::Sender<()>, mpsc::Receiver<i64>) {
        let (ask, asked) = mpsc::channel::<()>();
        let (tell, told) = mpsc::channel();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                while asked.recv().is_ok() {
                    tell.send(own_nice()).unwrap();
                }
            })
            .unwrap();
        (ask, told)
    }

    #[test]
    fn storage_threads_and_only_they_are_lowered() {
        let (ask_storage, storage) = named("rocksdb:probe");
        let (ask_other, other) = named("simstore-probe");
        ask_storage.send(()).unwrap();
        ask_other.send(()).unwrap();
        let before = (storage.recv().unwrap(), other.recv().unwrap());
        if before.0 >= i64::from(super::BACKGROUND_NICE) {
            // A process started at this nice value or lower priority: no
            // change to see.
            eprintln!("running at nice {}: nothing to lower", before.0);
            return;
        }
        super::lower_storage_threads();
        ask_storage.send(()).unwrap();
        ask_other.send(()).unwrap();
        assert_eq!(storage.recv().unwrap(), i64::from(super::BACKGROUND_NICE));
        assert_eq!(other.recv().unwrap(), before.1);
    }
}
