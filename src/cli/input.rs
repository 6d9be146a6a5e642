//! Parsing input lines: `FP [ID]`, with FP as 16 hex digits (optional
//! `0x`) and ID as an unsigned decimal.

/// Parses a fingerprint: exactly 16 hex digits, optionally after `0x`.
pub fn parse_fingerprint(s: &str) -> Result<u64, String> {
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if digits.len() != 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "fingerprint {s:?} is not 16 hex digits (optionally prefixed by 0x)"
        ));
    }
    u64::from_str_radix(digits, 16).map_err(|e| format!("fingerprint {s:?}: {e}"))
}

/// Parses a document id: an unsigned 64-bit decimal.
pub fn parse_id(s: &str) -> Result<u64, String> {
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("id {s:?} is not an unsigned decimal integer"));
    }
    s.parse()
        .map_err(|_| format!("id {s:?} does not fit in 64 bits"))
}

/// Parses `FP [ID]`; `Ok(None)` for a blank line.
pub fn parse_record(line: &str, allow_id: bool) -> Result<Option<(u64, Option<u64>)>, String> {
    let mut fields = line.split_ascii_whitespace();
    let Some(fp) = fields.next() else {
        return Ok(None);
    };
    let fp = parse_fingerprint(fp)?;
    let id = match fields.next() {
        Some(id) if allow_id => Some(parse_id(id)?),
        Some(extra) => return Err(format!("unexpected field {extra:?} after the fingerprint")),
        None => None,
    };
    if let Some(extra) = fields.next() {
        return Err(format!("unexpected field {extra:?} after the id"));
    }
    Ok(Some((fp, id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_contract_and_rejects_the_rest() {
        assert_eq!(
            parse_record("0123456789abcdef 42", true),
            Ok(Some((0x0123_4567_89ab_cdef, Some(42))))
        );
        assert_eq!(
            parse_record("0xFFFFFFFFFFFFFFFF", true),
            Ok(Some((u64::MAX, None)))
        );
        assert_eq!(parse_record("   ", true), Ok(None));
        assert!(parse_record("123", true).is_err());
        assert!(parse_record("0123456789abcdeg", true).is_err());
        assert!(parse_record("0123456789abcdef -1", true).is_err());
        assert!(parse_record("0123456789abcdef 1 2", true).is_err());
        assert!(parse_record("0123456789abcdef 1", false).is_err());
        assert!(parse_record("0123456789abcdef 99999999999999999999", true).is_err());
        assert!(parse_record("+123456789abcdef", true).is_err());
    }
}
