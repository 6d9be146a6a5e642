//! Minimal JSON output for the CLI's line-oriented results.

use std::fmt::Write;

use simstore::{Match, Stats, VerifyReport};

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

/// Appends one query's result line (without its newline) to `line`; the
/// CLI reuses one buffer for every answer instead of building strings
/// per match.
pub fn push_query_result(line: &mut String, query: u64, matches: &[Match]) {
    // Writing into a String cannot fail.
    let _ = write!(line, "{{\"query\":\"{query:016x}\",\"matches\":[");
    for (i, m) in matches.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        let _ = write!(
            line,
            "{{\"fingerprint\":\"{:016x}\",\"distance\":{},\"ids\":[",
            m.fingerprint, m.distance
        );
        for (j, id) in m.ids.iter().enumerate() {
            if j > 0 {
                line.push(',');
            }
            let _ = write!(line, "{id}");
        }
        line.push_str("]}");
    }
    line.push_str("]}");
}

/// The `stats` object.
pub fn stats(s: &Stats) -> String {
    format!(
        concat!(
            "{{\"fingerprints\":{},\"ids\":{},\"tables\":{},\"max_distance\":{},\"blocks\":{},",
            "\"pending\":{},\"tombstones\":{},\"bytes_on_disk\":{},\"table_bytes\":{},",
            "\"prefix_bits\":{},\"plan_blocks\":{},\"expected_size\":{},\"compaction_error\":{},",
            "\"tables_in_memory\":{},\"id_bytes\":{}}}"
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
    )
}

/// The `verify` report.
pub fn verify(r: &VerifyReport) -> String {
    format!(
        "{{\"ok\":{},\"tables\":{},\"blocks\":{},\"fingerprints\":{},\"problems\":{}}}",
        r.ok(),
        r.tables,
        r.blocks,
        r.fingerprints,
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
        let mut line = String::new();
        super::push_query_result(&mut line, query, matches);
        line
    }

    #[test]
    fn query_line_shape() {
        let m = simstore::Match {
            fingerprint: 255,
            distance: 2,
            ids: vec![1, 7],
        };
        assert_eq!(
            query_result(1, &[m]),
            r#"{"query":"0000000000000001","matches":[{"fingerprint":"00000000000000ff","distance":2,"ids":[1,7]}]}"#
        );
        assert_eq!(
            query_result(0, &[]),
            r#"{"query":"0000000000000000","matches":[]}"#
        );
        let two = [
            simstore::Match {
                fingerprint: 1,
                distance: 0,
                ids: vec![],
            },
            simstore::Match {
                fingerprint: 2,
                distance: 3,
                ids: vec![9],
            },
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
