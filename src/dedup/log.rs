//! The lines of the decision log that `simstore dedup` and the Python
//! package's `simstore.dedup` keep beside a store (`dedup.log`), read
//! fast: one line per decided document, `{"seq":N,"line":"…"}`, the
//! decision as `simstore dedup` prints it (`{"id":NAME,…}`) as a JSON
//! string. [`name_of`] takes the layout they write, with a name without
//! escapes, without building JSON values (a log of millions of decisions
//! is read at every start); readers parse other lines as JSON.

/// What a log line starts with, up to its sequence number.
const HEAD: &[u8] = b"{\"seq\":";
/// Between the sequence number and the document's name.
const NAME_START: &[u8] = b",\"line\":\"{\\\"id\\\":\\\"";

/// The document name of log line `line` (without its end) when it is a
/// line numbered `seq` in the layout the log is written in, with a name
/// without escapes; `None` for any other line.
///
/// ```
/// use simstore::dedup::log::name_of;
///
/// let line = br#"{"seq":7,"line":"{\"id\":\"a.html\",\"duplicate_of\":null}"}"#;
/// assert_eq!(name_of(line, 7), Some("a.html"));
/// assert_eq!(name_of(line, 8), None); // numbered out of turn
/// assert_eq!(name_of(&line[..20], 7), None); // torn
/// ```
pub fn name_of(line: &[u8], seq: u64) -> Option<&str> {
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
    let name = std::str::from_utf8(name).ok()?;
    string_rest(&after[2..]).then_some(name)
}

/// What ends a log line in the layout the log is written in whose
/// decision is that its document is new (the decision's `null}`, then the
/// string's and the line's ends).
const NEW_END: &[u8] = b"\\\"duplicate_of\\\":null}\"}";

/// Whether log line `line` (without its end), in the layout the log is
/// written in, records a document decided new (and so stored; a
/// near-duplicate is stored only by a store that keeps sketches).
///
/// ```
/// use simstore::dedup::log::decided_new;
///
/// let new = br#"{"seq":7,"line":"{\"id\":\"a\",\"fingerprint\":\"00000000000000ff\",\"duplicate_of\":null}"}"#;
/// let near = br#"{"seq":8,"line":"{\"id\":\"b\",\"fingerprint\":\"00000000000000fe\",\"duplicate_of\":{\"id\":\"a\",\"fingerprint\":\"00000000000000ff\",\"distance\":1}}"}"#;
/// assert!(decided_new(new));
/// assert!(!decided_new(near));
/// ```
pub fn decided_new(line: &[u8]) -> bool {
    // The decision line is escaped as a whole inside the log's: a name
    // ending with these characters has its quotes escaped twice, so only
    // the decision's own field ends the line so.
    line.ends_with(NEW_END)
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
        // Eight plain bytes at a time.
        if let Some(word) = body.get(i..i + 8) {
            if !special(u64::from_le_bytes(word.try_into().unwrap_or_default())) {
                i += 8;
                continue;
            }
        }
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

/// Whether a byte of `w` is a control character, a quote or a backslash.
fn special(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // A byte below `n` (at most 0x80) leaves its high bit set in `w - n`
    // where `w`'s is clear; a byte equal to `c` is one that `w ^ c` zeroes.
    let below = |w: u64, n: u64| w.wrapping_sub(ONES * n) & !w & HIGHS;
    let equal = |c: u8| below(w ^ (ONES * u64::from(c)), 1);
    below(w, 0x20) | equal(b'"') | equal(b'\\') != 0
}

/// What `simstore dedup` and `simstore.dedup` warn of at the end of a
/// run, after the store's directory, when a store holding `pairs` holds
/// more than its logged decisions stored: `logged` decisions, `logged_new`
/// of them deciding their document new. A decision stored one pair: every
/// one on a store that keeps sketches, else the new ones. Pairs written by
/// something else (`add`) have ids that are not decision numbers. `None`
/// when every pair is a decision's.
///
/// Checked once every chunk is logged: a chunk is committed, then logged,
/// so a run that starts after a kill may hold its last chunk's pairs
/// before their decisions are logged.
///
/// ```
/// use simstore::dedup::log::other_pairs;
///
/// assert_eq!(other_pairs(5, false, 9, 5), None); // 5 new, 4 near-duplicates
/// assert_eq!(other_pairs(9, true, 9, 5), None); // sketches: all 9 stored
/// assert!(other_pairs(6, false, 9, 5).unwrap().starts_with("holds 6 pair(s), 5 of them"));
/// ```
pub fn other_pairs(pairs: u64, sketches: bool, logged: u64, logged_new: u64) -> Option<String> {
    let decided = if sketches { logged } else { logged_new };
    (pairs > decided).then(|| {
        format!(
            "holds {pairs} pair(s), {decided} of them stored by dedup's decisions: dedup reads \
             the store's ids as its decision numbers, so the pairs it did not write (by add) \
             are named wrongly or not matched"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_bytes_are_found_in_every_place() {
        for place in 0..8 {
            for byte in 0..=255u8 {
                let mut word = *b"abcdefgh";
                word[place] = byte;
                let want = byte < 0x20 || byte == b'"' || byte == b'\\';
                assert_eq!(special(u64::from_le_bytes(word)), want, "{place} {byte}");
            }
        }
    }

    #[test]
    fn takes_the_layout_and_leaves_the_rest() {
        let line = br#"{"seq":12,"line":"{\"id\":\"http://a/b?c=1\",\"fingerprint\":\"00000000000000ff\",\"duplicate_of\":null}"}"#;
        assert_eq!(name_of(line, 12), Some("http://a/b?c=1"));
        assert_eq!(name_of(line, 11), None);
        for cut in 0..line.len() {
            assert_eq!(name_of(&line[..cut], 12), None, "{cut}");
        }
        let empty = br#"{"seq":0,"line":"{\"id\":\"\",\"duplicate_of\":null}"}"#;
        assert_eq!(name_of(empty, 0), Some(""));
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
            Some("ünï ✓")
        );
    }
}
