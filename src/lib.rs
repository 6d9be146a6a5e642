//! simstore: a persistent, embedded store for 64-bit simhash fingerprints
//! answering "which stored fingerprints are within Hamming distance k?"
//! with the permuted-table method of Manku, Jain and Das Sarma (WWW 2007).
//!
//! A [`Store`] is a directory on local disk holding fingerprints with
//! their document ids, opened with [`Options`]; [`simhash`] turns text
//! into fingerprints; [`plan`] is the table plan a store is created with.
//! Every failure is an [`Error`].
//!
//! ```
//! # let dir = std::env::temp_dir().join(format!("simstore-doc-crate-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! use simstore::{Options, Store};
//!
//! let store = Store::open_or_create(&dir, &Options::new())?;
//! store.insert(0x0123_4567_89ab_cdef, 1)?;
//! let near = store.query(0x0123_4567_89ab_cdee, 3)?;
//! assert_eq!((near[0].distance, near[0].ids.clone()), (1, vec![1]));
//! store.close()?;
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), simstore::Error>(())
//! ```
//!
//! Features: `storage` (default) the RocksDB-backed store; `html`
//! (default) the visible text of HTML for fingerprinting. The layers
//! beneath the store are described in `ARCHITECTURE.md`.

// The layers beneath the store are internal: with the `internals` feature
// (this repository's tests, benchmarks and fuzz targets turn it on) they
// are public, hidden from the documentation and not a stable API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod codec;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod codec;
pub mod error;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod format;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod format;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod index;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod index;
pub mod join;
#[cfg_attr(not(feature = "storage"), allow(dead_code))]
mod pages;
pub mod plan;
#[cfg_attr(not(feature = "storage"), allow(dead_code))]
mod simd;
pub mod simhash;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod table;
#[cfg(not(feature = "internals"))]
#[allow(dead_code, unused_imports)]
pub(crate) mod table;

pub use error::{Error, Location, Result};

/// The README's Rust examples, compiled and run as doctests.
#[cfg(all(doctest, feature = "storage", feature = "html"))]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

#[cfg(feature = "storage")]
pub mod dedup;
#[cfg(feature = "storage")]
mod storage;
#[cfg(feature = "storage")]
pub mod store;

#[cfg(feature = "storage")]
pub use store::{
    Answers, Budget, Durability, LevelStats, Match, MatchRef, MergePause, Op, Options, Similar,
    Sketched, Stats, Store, VerifyReport, BUFFERED_SYNC_INTERVAL,
};

#[cfg(test)]
mod test_rng;

/// Bodies of the fuzz targets under `fuzz/`; built for them (feature
/// `fuzzing`) and for the unit tests, which run them on fixed inputs.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzz_support;
