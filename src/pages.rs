//! Huge pages for the large structures of tables held in memory.
//!
//! Queries read a table held in memory at random. With 4 KiB pages nearly
//! every such read of a large table also misses the TLB (on a virtual
//! machine, a two-dimensional page walk); with 2 MiB pages the page tables
//! of a whole table stay within the TLB's reach. On Linux, memory is
//! marked for transparent huge pages before it is first written
//! (`madvise(MADV_HUGEPAGE)`, which takes effect where
//! `/sys/kernel/mm/transparent_hugepage/enabled` is `always` or
//! `madvise`); elsewhere, and under miri, these are plain allocations.

/// Bytes of a huge page (x86-64's and most arm64 kernels' 2 MiB).
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// An empty vector with room for `n` values, its memory marked for huge
/// pages (before it is written) when it takes at least two huge pages (so
/// at least one whole page lies within it, wherever it starts).
pub(crate) fn with_capacity<T>(n: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(n);
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    if ADVISES && bytes >= 2 * HUGE_PAGE {
        advise(v.as_ptr().cast(), bytes);
    }
    v
}

/// The values of `values` collected as by [`with_capacity`] for as many
/// values as the iterator says it has.
pub(crate) fn collect<T>(values: impl ExactSizeIterator<Item = T>) -> Vec<T> {
    let mut v = with_capacity(values.len());
    v.extend(values);
    v
}

/// `v` moved into memory marked for huge pages when large (as by
/// [`with_capacity`]); otherwise `v` itself. For vectors whose length is
/// not known before they are filled; the others are built in place by
/// [`with_capacity`] or [`collect`].
pub(crate) fn huge_vec<T>(v: Vec<T>) -> Vec<T> {
    if !ADVISES || std::mem::size_of_val::<[T]>(&v) < 2 * HUGE_PAGE {
        return v;
    }
    collect(v.into_iter())
}

/// Whether this build marks memory for huge pages.
const ADVISES: bool = cfg!(all(target_os = "linux", not(miri)));

/// Marks the whole huge pages within `len` bytes at `ptr` for huge pages.
#[cfg(all(target_os = "linux", not(miri)))]
fn advise(ptr: *const u8, len: usize) {
    let start = (ptr as usize).next_multiple_of(HUGE_PAGE);
    let end = (ptr as usize + len) / HUGE_PAGE * HUGE_PAGE;
    if end > start {
        // SAFETY: advice on pages of an allocation this process holds;
        // it changes how they are backed, not what they hold.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn advise(_ptr: *const u8, _len: usize) {}

/// A zeroed [`HUGE_PAGE`] of memory aligned to its size, marked for a
/// huge page; `None` when the memory cannot be had.
#[cfg(all(target_os = "linux", not(miri)))]
pub(crate) fn map_huge() -> Option<std::ptr::NonNull<u8>> {
    // Twice the size, so that an aligned page lies within; the rest is
    // unmapped.
    let span = 2 * HUGE_PAGE;
    // SAFETY: a new private anonymous mapping; no memory is touched.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return None;
    }
    let start = base as usize;
    let aligned = start.next_multiple_of(HUGE_PAGE);
    let head = aligned - start;
    let tail = span - head - HUGE_PAGE;
    // SAFETY: both ranges lie in the mapping just made, outside the page
    // kept.
    unsafe {
        if head > 0 {
            libc::munmap(base, head);
        }
        if tail > 0 {
            libc::munmap((aligned + HUGE_PAGE) as *mut libc::c_void, tail);
        }
    }
    advise(aligned as *const u8, HUGE_PAGE);
    std::ptr::NonNull::new(aligned as *mut u8)
}

/// Returns memory from [`map_huge`].
///
/// # Safety
/// `ptr` came from [`map_huge`] and is not used after.
#[cfg(all(target_os = "linux", not(miri)))]
pub(crate) unsafe fn unmap_huge(ptr: std::ptr::NonNull<u8>) {
    // SAFETY: the caller's.
    unsafe {
        libc::munmap(ptr.as_ptr().cast(), HUGE_PAGE);
    }
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn layout() -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(HUGE_PAGE, HUGE_PAGE).unwrap_or_else(|_| unreachable!())
}

/// A zeroed [`HUGE_PAGE`] of memory aligned to its size; `None` when the
/// memory cannot be had.
#[cfg(not(all(target_os = "linux", not(miri))))]
pub(crate) fn map_huge() -> Option<std::ptr::NonNull<u8>> {
    // SAFETY: the layout's size is not zero.
    std::ptr::NonNull::new(unsafe { std::alloc::alloc_zeroed(layout()) })
}

/// Returns memory from [`map_huge`].
///
/// # Safety
/// `ptr` came from [`map_huge`] and is not used after.
#[cfg(not(all(target_os = "linux", not(miri))))]
pub(crate) unsafe fn unmap_huge(ptr: std::ptr::NonNull<u8>) {
    // SAFETY: the caller's.
    unsafe { std::alloc::dealloc(ptr.as_ptr(), layout()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_in_advised_memory_hold_what_was_put_in() {
        let n = 3 * HUGE_PAGE / 8;
        let mut v: Vec<u64> = with_capacity(n);
        assert!(v.capacity() >= n);
        v.extend(0..n as u64);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
        let c = collect((0..n as u32).map(|i| i * 3));
        assert_eq!(c.len(), n);
        assert!(c.iter().enumerate().all(|(i, &x)| x == i as u32 * 3));
        assert_eq!(collect(["a", "b"].into_iter()), ["a", "b"]);
        assert!(with_capacity::<u8>(0).is_empty());
    }

    #[test]
    fn huge_vec_keeps_the_values_in_order() {
        let v: Vec<u64> = (0..(3 * HUGE_PAGE / 8) as u64).collect();
        let moved = huge_vec(v);
        assert!(moved.iter().enumerate().all(|(i, &x)| x == i as u64));
        let small = huge_vec(vec![String::from("a"), String::from("b")]);
        assert_eq!(small, ["a", "b"]);
    }

    #[test]
    fn a_huge_page_is_aligned_zeroed_and_writable() {
        let page = map_huge().expect("memory");
        assert_eq!(page.as_ptr() as usize % HUGE_PAGE, 0);
        // SAFETY: the page is HUGE_PAGE bytes, ours until unmapped.
        unsafe {
            let bytes = std::slice::from_raw_parts_mut(page.as_ptr(), HUGE_PAGE);
            assert!(bytes.iter().all(|&b| b == 0));
            bytes[HUGE_PAGE - 1] = 7;
            assert_eq!(bytes[HUGE_PAGE - 1], 7);
            unmap_huge(page);
        }
    }
}
