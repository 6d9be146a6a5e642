//! The decision log of `simstore.dedup` (`dedup.log`) read at start:
//! where each line starts and a hash of its document's name, for the
//! lines in the layout the log is written in, without a Python object a
//! line (a log of millions of decisions is read at every start).
//!
//! A line is `{"seq":N,"line":"{\"id\":\"NAME\",…}"}`: the decision as
//! `simstore dedup` prints it, as a JSON string. Lines this reader does
//! not take (a name with escapes, another layout, a torn last line) are
//! left to the Python reader, which parses them as JSON.

use std::fs::File;
use std::hash::Hasher;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;
use simstore::dedup::log::{decided_new, name_of};

/// The hash of a document name in the log's index (SipHash with fixed
/// keys, of the name's UTF-8 bytes), masked by `mask` (tests make names
/// share hashes with a mask of 0).
#[pyfunction]
pub fn log_name_hash(name: &str, mask: u64) -> u64 {
    hash(name.as_bytes()) & mask
}

fn hash(bytes: &[u8]) -> u64 {
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new();
    h.write(bytes);
    h.finish()
}

/// Whether log line `line` (without its end) decided its document new
/// ([`decided_new`]).
#[pyfunction]
pub fn log_decided_new(line: &[u8]) -> bool {
    decided_new(line)
}

/// Where lines start, their names' hashes, where the next begins, and
/// how many of the lines decided their document new.
type Lines<'py> = (
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
    u64,
    u64,
);

/// Reads the log at `path` from byte `start`, where the line numbered
/// `seq` begins: the start of each whole line in the log's layout, its
/// number the next one, and its name's hash ([`log_name_hash`] with
/// `mask`), up to the first line that is not one or `limit` lines;
/// returns the starts, the hashes, where the next line begins and how
/// many of the lines decided their document new
/// ([`decided_new`]: the documents a store without sketches holds a pair
/// of).
#[pyfunction]
pub fn scan_log<'py>(
    py: Python<'py>,
    path: PathBuf,
    start: u64,
    seq: u64,
    mask: u64,
    limit: usize,
) -> PyResult<Lines<'py>> {
    let (starts, hashes, stop, new) = py.detach(|| scan(&path, start, seq, mask, limit))?;
    Ok((starts.into_pyarray(py), hashes.into_pyarray(py), stop, new))
}

type Scanned = (Vec<u64>, Vec<u64>, u64, u64);

fn scan(
    path: &Path,
    start: u64,
    mut seq: u64,
    mask: u64,
    limit: usize,
) -> std::io::Result<Scanned> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(start))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let (mut starts, mut hashes) = (Vec::new(), Vec::new());
    let mut at = start;
    let mut new = 0;
    let mut line = Vec::new();
    while starts.len() < limit {
        line.clear();
        let read = reader.read_until(b'\n', &mut line)?;
        let whole = line.strip_suffix(b"\n");
        let Some(name) = whole.and_then(|l| name_of(l, seq)) else {
            return Ok((starts, hashes, at, new));
        };
        new += u64::from(whole.is_some_and(decided_new));
        starts.push(at);
        hashes.push(hash(name.as_bytes()) & mask);
        at += read as u64;
        seq += 1;
    }
    Ok((starts, hashes, at, new))
}
