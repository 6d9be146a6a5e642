//! Which instruction-set extensions the query loops may use.
//!
//! The hot loops of a query are a popcount per candidate and a few
//! variable shifts per decoded fingerprint. The x86-64 baseline has no
//! popcount instruction (it is emulated with about a dozen) and its
//! variable shifts cost several micro-ops each, so the loops are compiled
//! twice: once for the baseline, once for processors with POPCNT, BMI1,
//! BMI2 and LZCNT (every x86-64 server processor since 2013), chosen at run
//! time. Other architectures use the one portable build.

use std::sync::OnceLock;

/// Environment variable that, when set to anything, forces the portable
/// loops (so tests can check them on any machine).
pub const PORTABLE_ENV: &str = "SIMSTORE_PORTABLE";

/// Whether the loops compiled for POPCNT/BMI1/BMI2/LZCNT may run here.
#[inline]
pub fn fast_bits() -> bool {
    static FAST: OnceLock<bool> = OnceLock::new();
    allowed(&FAST, detect)
}

/// Whether the loops that `detect` finds the instructions for may run:
/// decided once, never when [`PORTABLE_ENV`] is set.
fn allowed(decided: &OnceLock<bool>, detect: fn() -> bool) -> bool {
    *decided.get_or_init(|| std::env::var_os(PORTABLE_ENV).is_none() && detect())
}

#[cfg(target_arch = "x86_64")]
fn detect() -> bool {
    std::is_x86_feature_detected!("popcnt")
        && std::is_x86_feature_detected!("bmi1")
        && std::is_x86_feature_detected!("bmi2")
        && std::is_x86_feature_detected!("lzcnt")
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> bool {
    false
}

/// Whether [`near`](super::near)'s AVX-512 loop (VPOPCNTQ on eight
/// fingerprints at a time) may run here.
#[inline]
pub fn wide_popcount() -> bool {
    static WIDE: OnceLock<bool> = OnceLock::new();
    allowed(&WIDE, detect_wide)
}

/// Whether [`lows`](super::lows)'s AVX-512 loop (a byte permutation,
/// VPERMB, then VPOPCNTD on 16 signatures at a time) may run here.
#[inline]
pub fn wide_lows() -> bool {
    static LOWS: OnceLock<bool> = OnceLock::new();
    allowed(&LOWS, detect_lows)
}

#[cfg(target_arch = "x86_64")]
fn detect_lows() -> bool {
    detect_wide()
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vbmi")
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_lows() -> bool {
    false
}

/// Whether [`lows`](super::lows)'s AVX2 loop (a byte shuffle, then a
/// nibble-table popcount on eight signatures at a time) may run here: the
/// loop for processors without [`wide_lows`]'s AVX-512.
#[inline]
pub fn avx2_lows() -> bool {
    static LOWS: OnceLock<bool> = OnceLock::new();
    allowed(&LOWS, detect_avx2)
}

#[cfg(target_arch = "x86_64")]
fn detect_avx2() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("popcnt")
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_avx2() -> bool {
    false
}

/// Whether [`minima`](super::minima)'s AVX-512 loop (VPMULLQ on eight
/// 64-bit lanes) may run here.
#[inline]
pub fn wide_multiply() -> bool {
    static MULTIPLY: OnceLock<bool> = OnceLock::new();
    allowed(&MULTIPLY, detect_multiply)
}

#[cfg(target_arch = "x86_64")]
fn detect_multiply() -> bool {
    std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512dq")
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_multiply() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn detect_wide() -> bool {
    std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vpopcntdq")
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_wide() -> bool {
    false
}
