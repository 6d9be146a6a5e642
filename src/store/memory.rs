//! Giving memory the allocator keeps back to the system.

use super::shared::Shared;

/// Returns memory freed inside the allocator's arenas to the system, when
/// [`Options::trim_allocator`](super::Options::trim_allocator) asks for it
/// (glibc's `malloc_trim` acts on the whole process, so a library does
/// not call it unasked).
///
/// Called after work that frees much at once: the warming (blocks read
/// twice while it ran, the scans' buffers) and every merge into level 0 (the
/// replaced tables, the merge's buffers, the pending sets). glibc keeps
/// freed memory in the arena of the thread that allocated it, and a store
/// with many writer threads spreads its pending sets and merges over
/// many arenas: without this, incremental ingest into a 10M store with
/// 64 writers peaked at 2.4 GB of RSS (1.35 GB with it) for 0.25 GB of
/// tables. It takes milliseconds to a few hundred at 10M, beside merges
/// of a second or more.
pub(super) fn release_free_memory(shared: &Shared) {
    if !shared.options.trim_allocator {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: glibc's `malloc_trim` only releases free memory of the
        // allocator's own arenas; it takes no pointers.
        unsafe {
            malloc_trim(0);
        }
    }
}
