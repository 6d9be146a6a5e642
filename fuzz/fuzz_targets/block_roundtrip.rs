//! Encode-then-decode round trips of arbitrary sorted fingerprint runs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| simstore::fuzz_support::roundtrip(data));
