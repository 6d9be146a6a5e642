//! Arbitrary sequences of insert / delete / query / compact / reopen
//! against an in-memory model and brute-force search.
#![no_main]

libfuzzer_sys::fuzz_target!(|steps: Vec<simstore::fuzz_support::Step>| {
    simstore::fuzz_support::stateful(&steps)
});
