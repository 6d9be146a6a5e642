//! The pure block codec: bit streams, Huffman codes and Huffman-delta
//! blocks. No I/O and no storage types: the bytes may come from RocksDB,
//! memory or a test vector alike.

pub mod bits;
pub mod block;
pub mod huffman;
pub mod lanes;
pub mod many;
pub mod sweep;

pub use block::{
    encode_blocks, encode_blocks_into, BlockHeader, BlockIter, BlockView, DecodeError, EncodeError,
    ResumePoint, Visit, BLOCK_VERSION, HEADER_LEN, MIN_BLOCK_LEN,
};
pub use huffman::{Code, CodeError, MAX_CODE_LEN, SYMBOLS};
pub use lanes::{Lane, LaneVisit};
pub use many::decode_many;
pub use sweep::{sweep_lanes, sweep_stretches};

/// Histogram of delta positions `h` between successive fingerprints of a
/// sorted run: the measured distribution a table's code is built from.
pub fn delta_histogram(sorted: &[u64], counts: &mut [u64; SYMBOLS]) {
    for pair in sorted.windows(2) {
        if let [a, b] = pair {
            let x = a ^ b;
            if x != 0 {
                counts[(63 - x.leading_zeros()) as usize] += 1;
            }
        }
    }
}
