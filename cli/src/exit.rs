//! Exit codes, documented in `simstore --help`.

use simstore::Error;

/// Success.
pub const OK: i32 = 0;
/// An I/O or storage failure, or another error not listed below.
pub const FAILURE: i32 = 1;
/// The command line itself is wrong (unknown flag, missing argument).
pub const USAGE: i32 = 2;
/// A malformed input line; earlier lines stay applied, later ones are not.
pub const INPUT: i32 = 3;
/// The store cannot be opened or created as asked: not a store, already
/// exists, locked by another process, options contradicting the store,
/// unsupported format version, no table plan for the options.
pub const STORE: i32 = 4;
/// Corruption detected (including problems found by `verify`).
pub const CORRUPT: i32 = 5;
/// A query distance beyond the store's maximum distance.
pub const DISTANCE: i32 = 6;

/// The text appended to `--help`.
pub const HELP: &str = "\
Exit codes:
  0  success
  1  I/O or storage failure
  2  bad command line
  3  malformed input line (lines before it stay committed; nothing after it is applied);
     for hash, some documents were skipped (each with a warning; the rest were processed)
  4  store cannot be opened or created as asked (not a store, already exists,
     locked by another process, options contradicting the store, unsupported version,
     no table plan for the options)
  5  corruption detected (a query or dump hit a corrupt block, or verify found problems)
  6  query distance larger than the store's maximum distance";

/// The exit code for a library error.
pub fn for_error(e: &Error) -> i32 {
    match e {
        Error::NotAStore { .. }
        | Error::AlreadyExists { .. }
        | Error::Locked { .. }
        | Error::UnsupportedVersion { .. }
        | Error::IncompatibleOptions { .. }
        | Error::Plan(_) => STORE,
        Error::Corrupt { .. } => CORRUPT,
        Error::DistanceTooLarge { .. } => DISTANCE,
        Error::InvalidArgument(_) => USAGE,
        _ => FAILURE,
    }
}
