//! Arbitrary bytes into the block decoder and the record decoders.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| simstore::fuzz_support::decode_arbitrary(data));
