//! The processor-specific kernels of the query loops, each beside the
//! scalar reference it is tested against, and the run-time detection that
//! picks them ([`cpu`]): the distance of a decoded run's fingerprints
//! from a query eight at a time ([`near`]), of a packed block's low parts
//! eight at a time ([`lows`]), the running minima of a similarity sketch
//! ([`minima`]), the per-byte popcount AVX2 lacks (`ones`), and cache
//! prefetches. The loops around them
//! are compiled twice (for the x86-64 baseline and for POPCNT/BMI2
//! processors, see [`cpu`]) where they are: `store::query`,
//! `store::batch`.

pub(crate) mod cpu;
pub(crate) mod lows;
pub(crate) mod minima;
#[cfg_attr(not(feature = "storage"), allow(dead_code))]
pub(crate) mod near;
#[cfg(target_arch = "x86_64")]
mod ones;
#[cfg(target_arch = "x86_64")]
use ones::ones_per_byte_avx2;

/// Asks the processor to bring `items` into cache, without waiting.
#[inline(always)]
pub(crate) fn prefetch<T>(items: &[T]) {
    let start = items.as_ptr().cast::<u8>();
    let len = std::mem::size_of_val(items);
    let line = |at: usize| {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 processor
        // has; a prefetch is only a hint and never faults.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                start.wrapping_add(at).cast(),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    };
    let mut at = 0;
    while at < len {
        line(at);
        at += 64;
    }
    // The last line, when the range does not start on a line boundary.
    if len > 0 {
        line(len - 1);
    }
}
