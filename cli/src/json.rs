//! Minimal JSON output for the CLI's line-oriented results.

use std::fmt::Write;

use simstore::{MatchRef, Stats, VerifyReport};

/// A JSON string literal.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn list<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
    let parts: Vec<String> = items.iter().map(f).collect();
    format!("[{}]", parts.join(","))
}

/// Appends `v` as 16 lower-case hex digits (as `{v:016x}` formats it,
/// without the formatting machinery: a query line prints one per match).
fn push_hex(line: &mut Vec<u8>, v: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 16];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = DIGITS[(v >> (60 - 4 * i) & 0xf) as usize];
    }
    line.extend_from_slice(&buf);
}

/// Appends `v` in decimal (as `{v}` formats it).
fn push_decimal(line: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    line.extend_from_slice(&buf[at..]);
}

/// Appends one query's result line (without its newline) to `line`; the
/// CLI reuses one buffer for every answer instead of building strings
/// per match, and writes its bytes as they are (ASCII but for a name). With
/// `max_ids`, each match lists at most that many ids (its smallest) and
/// gives how many it has ([`MatchRef::id_count`]) as `id_count`. A query
/// line that named its document (`FP<TAB>NAME`) has the name echoed as
/// `name`.
pub fn push_query_result<'a>(
    line: &mut Vec<u8>,
    query: u64,
    name: Option<&str>,
    matches: impl IntoIterator<Item = MatchRef<'a>>,
    max_ids: Option<usize>,
) {
    line.extend_from_slice(b"{\"query\":\"");
    push_hex(line, query);
    line.push(b'"');
    if let Some(name) = name {
        line.extend_from_slice(b",\"name\":");
        line.extend_from_slice(string(name).as_bytes());
    }
    line.extend_from_slice(b",\"matches\":[");
    for (i, m) in matches.into_iter().enumerate() {
        if i > 0 {
            line.push(b',');
        }
        line.extend_from_slice(b"{\"fingerprint\":\"");
        push_hex(line, m.fingerprint);
        line.extend_from_slice(b"\",\"distance\":");
        push_decimal(line, u64::from(m.distance));
        line.extend_from_slice(b",\"ids\":[");
        let shown = max_ids.map_or(m.ids.len(), |n| n.min(m.ids.len()));
        for (j, &id) in m.ids[..shown].iter().enumerate() {
            if j > 0 {
                line.push(b',');
            }
            push_decimal(line, id);
        }
        line.push(b']');
        if max_ids.is_some() {
            line.extend_from_slice(b",\"id_count\":");
            push_decimal(line, m.id_count as u64);
        }
        line.push(b'}');
    }
    line.extend_from_slice(b"]}");
}

/// The `stats` object.
pub fn stats(s: &Stats) -> String {
    format!(
        concat!(
            "{{\"fingerprints\":{},\"ids\":{},\"tables\":{},\"max_distance\":{},\"blocks\":{},",
            "\"pending\":{},\"tombstones\":{},\"bytes_on_disk\":{},\"table_bytes\":{},",
            "\"prefix_bits\":{},\"plan_blocks\":{},\"expected_size\":{},\"compaction_error\":{},",
            "\"tables_in_memory\":{},\"id_bytes\":{},\"sketches\":{},\"idf_documents\":{},",
            "\"levels\":{},\"merge_bytes_written\":{},\"upper_set_bytes\":{},\"flat_bytes\":{}}}"
        ),
        s.fingerprints,
        s.ids,
        s.tables,
        s.max_distance,
        s.blocks,
        s.pending,
        s.tombstones,
        s.bytes_on_disk,
        s.table_bytes,
        list(&s.prefix_bits, u8::to_string),
        s.plan_blocks,
        s.expected_size,
        s.compaction_error
            .as_deref()
            .map_or("null".to_string(), string),
        s.tables_in_memory,
        s.id_bytes,
        s.sketches,
        s.idf_documents
            .map_or("null".to_string(), |n| n.to_string()),
        list(&s.levels, |l| format!(
            "{{\"fingerprints\":{},\"blocks\":{},\"bytes\":{}}}",
            l.fingerprints, l.blocks, l.bytes
        )),
        s.merge_bytes_written,
        s.upper_set_bytes
            .map_or("null".to_string(), |n| n.to_string()),
        s.flat_bytes.map_or("null".to_string(), |n| n.to_string()),
    )
}

/// The `verify` report.
pub fn verify(r: &VerifyReport) -> String {
    format!(
        "{{\"ok\":{},\"tables\":{},\"levels\":{},\"blocks\":{},\"fingerprints\":{},\"sketches\":{},\"problems\":{}}}",
        r.ok(),
        r.tables,
        r.levels,
        r.blocks,
        r.fingerprints,
        r.sketches,
        list(&r.problems, |p| string(p))
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes() {
        assert_eq!(super::string("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
    }

    fn query_result(query: u64, matches: &[simstore::Match]) -> String {
        let mut line = Vec::new();
        super::push_query_result(&mut line, query, None, matches.iter().map(Into::into), None);
        String::from_utf8(line).unwrap()
    }

    /// The hand-written digits are what the formatting machinery writes.
    #[test]
    fn digits_match_the_formatter() {
        for v in [
            0,
            1,
            9,
            10,
            42,
            255,
            1 << 32,
            u64::MAX - 1,
            u64::MAX,
            0x0123_4567_89ab_cdef,
        ] {
            let mut hex = Vec::new();
            super::push_hex(&mut hex, v);
            assert_eq!(hex, format!("{v:016x}").as_bytes());
            let mut decimal = Vec::new();
            super::push_decimal(&mut decimal, v);
            assert_eq!(decimal, v.to_string().as_bytes());
        }
    }

    #[test]
    fn query_line_shape() {
        let m = simstore::Match::new(255, 2, vec![1, 7]);
        assert_eq!(
            query_result(1, &[m]),
            r#"{"query":"0000000000000001","matches":[{"fingerprint":"00000000000000ff","distance":2,"ids":[1,7]}]}"#
        );
        assert_eq!(
            query_result(0, &[]),
            r#"{"query":"0000000000000000","matches":[]}"#
        );
        // With a limit: the smallest ids, and how many there are.
        let many = simstore::Match::new(255, 0, vec![3, 4, 5]);
        for (max, ids) in [(0, ""), (2, "3,4"), (3, "3,4,5"), (9, "3,4,5")] {
            let mut line = Vec::new();
            super::push_query_result(&mut line, 1, None, [(&many).into()], Some(max));
            assert_eq!(
                String::from_utf8(line).unwrap(),
                format!(
                    r#"{{"query":"0000000000000001","matches":[{{"fingerprint":"00000000000000ff","distance":0,"ids":[{ids}],"id_count":3}}]}}"#
                )
            );
        }
        let two = [
            simstore::Match::new(1, 0, vec![]),
            simstore::Match::new(2, 3, vec![9]),
        ];
        assert_eq!(
            query_result(3, &two),
            concat!(
                r#"{"query":"0000000000000003","matches":["#,
                r#"{"fingerprint":"0000000000000001","distance":0,"ids":[]},"#,
                r#"{"fingerprint":"0000000000000002","distance":3,"ids":[9]}]}"#
            )
        );
    }
}
