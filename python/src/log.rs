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
use std::path::PathBuf;

use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;

/// What a log line starts with, up to its document's name.
const HEAD: &[u8] = b"{\"seq\":";
/// Between the sequence number and the name.
const NAME_START: &[u8] = b",\"line\":\"{\\\"id\\\":\\\"";

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

/// Where lines start, their names' hashes, and where the next begins.
type Lines<'py> = (Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<u64>>, u64);

/// Reads the log at `path` from byte `start`, where the line numbered
/// `seq` begins: the start of each whole line in the log's layout, its
/// number the next one, and its name's hash ([`log_name_hash`] with
/// `mask`), up to the first line that is not one or `limit` lines;
/// returns the starts, the hashes and where the next line begins.
#[pyfunction]
pub fn scan_log<'py>(
    py: Python<'py>,
    path: PathBuf,
    start: u64,
    seq: u64,
    mask: u64,
    limit: usize,
) -> PyResult<Lines<'py>> {
    let (starts, hashes, stop) = py.detach(|| scan(&path, start, seq, mask, limit))?;
    Ok((starts.into_pyarray(py), hashes.into_pyarray(py), stop))
}

type Scanned = (Vec<u64>, Vec<u64>, u64);

fn scan(
    path: &PathBuf,
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
    let mut line = Vec::new();
    while starts.len() < limit {
        line.clear();
        let read = reader.read_until(b'\n', &mut line)?;
        let Some(name) = line.strip_suffix(b"\n").and_then(|l| name_of(l, seq)) else {
            return Ok((starts, hashes, at));
        };
        starts.push(at);
        hashes.push(hash(name) & mask);
        at += read as u64;
        seq += 1;
    }
    Ok((starts, hashes, at))
}

/// The name of log line `line` (without its end) when it is a line of
/// number `seq` in the log's layout with a name without escapes.
fn name_of(line: &[u8], seq: u64) -> Option<&[u8]> {
    let rest = line.strip_prefix(HEAD)?;
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    let number = std::str::from_utf8(&rest[..digits]).ok()?;
    if number.parse::<u64>().ok()? != seq || (digits > 1 && number.starts_with('0')) {
        return None;
    }
    let rest = rest[digits..].strip_prefix(NAME_START)?;
    // The name ends at its closing quote, escaped once in the line: the
    // first backslash, which must be that quote's.
    let end = rest.iter().position(|&c| c == b'\\')?;
    let (name, after) = rest.split_at(end);
    if !after.starts_with(b"\\\"") || name.iter().any(|&c| c < 0x20 || c == b'"') {
        return None;
    }
    std::str::from_utf8(name).ok()?;
    string_rest(&after[2..]).then_some(name)
}

/// Whether `rest` is the rest of a JSON string literal that ends the
/// line: characters without a bare quote or control character, escapes,
/// then `"}`.
fn string_rest(rest: &[u8]) -> bool {
    let Some(body) = rest.strip_suffix(b"\"}") else {
        return false;
    };
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'\\' => match body.get(i + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                Some(b'u')
                    if body
                        .get(i + 2..i + 6)
                        .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) =>
                {
                    i += 6
                }
                _ => return false,
            },
            b'"' => return false,
            c if c < 0x20 => return false,
            _ => i += 1,
        }
    }
    std::str::from_utf8(body).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_layout_and_leaves_the_rest() {
        let line = br#"{"seq":12,"line":"{\"id\":\"http://a/b?c=1\",\"fingerprint\":\"00000000000000ff\",\"duplicate_of\":null}"}"#;
        assert_eq!(name_of(line, 12), Some(&b"http://a/b?c=1"[..]));
        assert_eq!(name_of(line, 11), None);
        for cut in 0..line.len() {
            assert_eq!(name_of(&line[..cut], 12), None, "{cut}");
        }
        let empty = br#"{"seq":0,"line":"{\"id\":\"\",\"duplicate_of\":null}"}"#;
        assert_eq!(name_of(empty, 0), Some(&b""[..]));
        // Escapes in the name, spaces, a leading zero, a bare quote after.
        for other in [
            &br#"{"seq":0,"line":"{\"id\":\"a\\\"b\",\"duplicate_of\":null}"}"#[..],
            br#"{"seq":0,"line":"{\"id\":\"a\\\\b\",\"duplicate_of\":null}"}"#,
            br#"{"seq": 0,"line":"{\"id\":\"a\",\"duplicate_of\":null}"}"#,
            br#"{"seq":00,"line":"{\"id\":\"a\",\"duplicate_of\":null}"}"#,
            br#"{"seq":0,"line":"{\"id\":\"a\",\"x\":"b"}"}"#,
            br#"{"seq":0,"line":"{\"id\":\"a\",\"x\":\q}"}"#,
        ] {
            assert_eq!(
                name_of(other, 0),
                None,
                "{}",
                String::from_utf8_lossy(other)
            );
        }
        assert_eq!(
            name_of(
                r#"{"seq":0,"line":"{\"id\":\"ünï ✓\",\"x\":\"\u00e9\"}"}"#.as_bytes(),
                0
            ),
            Some("ünï ✓".as_bytes())
        );
    }
}
