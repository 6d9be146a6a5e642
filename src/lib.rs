//! simstore: a persistent, embedded store for 64-bit simhash fingerprints
//! answering "which stored fingerprints are within Hamming distance k?"
//! with the permuted-table method of Manku, Jain and Das Sarma (WWW 2007).
//!
//! Layers, bottom up: [`plan`] (permutation math), [`codec`] (Huffman-delta
//! blocks), [`index`] (block index search), [`format`] (byte layouts of the
//! other records), [`table`] (one table in memory and its merges); then,
//! with the `storage` feature, the RocksDB-backed store.

pub mod codec;
mod cpu;
pub mod error;
pub mod format;
pub mod index;
pub mod plan;
pub mod simhash;
pub mod table;

pub use error::{Error, Location, Result};

/// The README's Rust examples, compiled and run as doctests.
#[cfg(all(doctest, feature = "storage", feature = "html"))]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

#[cfg(feature = "storage")]
mod storage;
#[cfg(feature = "storage")]
pub mod store;

#[cfg(feature = "storage")]
pub use store::{
    Durability, Match, Op, Options, Stats, Store, VerifyReport, BUFFERED_SYNC_INTERVAL,
};

/// Bodies of the fuzz targets under `fuzz/`; built for them (feature
/// `fuzzing`) and for the unit tests, which run them on fixed inputs.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzz_support;
