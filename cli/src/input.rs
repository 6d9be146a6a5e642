//! Parsing input lines: `FP [ID]`, with FP as 16 hex digits (optional
//! `0x`) and ID as an unsigned decimal.

/// Longest field quoted whole in an error message.
const QUOTE_MAX: usize = 40;

/// `field` quoted for an error message: whole when short, else its first
/// characters and its length (a 10 MB line is not echoed to stderr).
pub fn quoted(field: &str) -> String {
    if field.len() <= QUOTE_MAX {
        return format!("{field:?}");
    }
    let mut end = 24;
    while !field.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}... ({} bytes)", &field[..end], field.len())
}

/// Parses a fingerprint: exactly 16 hex digits, optionally after `0x`.
pub fn parse_fingerprint(s: &str) -> Result<u64, String> {
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    match digits.len() {
        16 => hex16(digits.as_bytes()),
        _ => None,
    }
    .ok_or_else(|| {
        format!(
            "fingerprint {} is not 16 hex digits (optionally prefixed by 0x)",
            quoted(s)
        )
    })
}

/// Parses a document id: an unsigned 64-bit decimal.
pub fn parse_id(s: &str) -> Result<u64, String> {
    let mut value = Some(0u64);
    for &b in s.as_bytes() {
        if !b.is_ascii_digit() {
            return Err(format!(
                "id {} is not an unsigned decimal integer",
                quoted(s)
            ));
        }
        value = value
            .and_then(|v| v.checked_mul(10))
            .and_then(|v| v.checked_add(u64::from(b - b'0')));
    }
    match value {
        Some(v) if !s.is_empty() => Ok(v),
        _ => Err(format!("id {} does not fit in 64 bits", quoted(s))),
    }
}

/// Each byte's value as a hex digit; 0xff for a byte that is not one.
const HEX: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = match b as u8 {
            c @ b'0'..=b'9' => c - b'0',
            c @ b'a'..=b'f' => c - b'a' + 10,
            c @ b'A'..=b'F' => c - b'A' + 10,
            _ => 0xff,
        };
        b += 1;
    }
    table
};

/// The value of 16 hex digits, if they are (a table look-up a digit, with
/// no branch on the digits: lines are read by the million).
#[inline]
fn hex16(digits: &[u8]) -> Option<u64> {
    let digits: &[u8; 16] = digits.try_into().ok()?;
    let mut value = 0u64;
    let mut invalid = 0u8;
    for &b in digits {
        let digit = HEX[usize::from(b)];
        invalid |= digit;
        value = value << 4 | u64::from(digit & 0x0f);
    }
    (invalid & 0xf0 == 0).then_some(value)
}

/// `FP` or `FP ID` exactly as a program writes them (16 hex digits, one
/// space, at most 19 decimal digits, which always fit), read without
/// splitting the line; `None` for anything else, left to the general
/// parser.
#[inline]
fn parse_plain(line: &[u8], allow_id: bool) -> Option<(u64, Option<u64>)> {
    let b = line.strip_suffix(b"\n").unwrap_or(line);
    let fp = hex16(b.get(..16)?)?;
    match b.get(16..)? {
        [] => Some((fp, None)),
        [b' ', digits @ ..] if allow_id && !digits.is_empty() && digits.len() <= 19 => {
            let mut id = 0u64;
            for &d in digits {
                if !d.is_ascii_digit() {
                    return None;
                }
                id = id * 10 + u64::from(d - b'0');
            }
            Some((fp, Some(id)))
        }
        _ => None,
    }
}

/// Parses `FP [VOLATILITY]` (a probabilistic query: the fingerprint and
/// the 128 hex digits `hash --weights` prints); without a volatility every
/// bit is taken as equally likely to flip (probability 1/64).
/// `Ok(None)` for a blank line.
pub fn parse_probabilistic(
    line: &str,
) -> Result<Option<(u64, simstore::simhash::Volatility)>, String> {
    let mut fields = line.split_ascii_whitespace();
    let Some(fp) = fields.next() else {
        return Ok(None);
    };
    let fp = parse_fingerprint(fp)?;
    let volatility = match fields.next() {
        Some(v) => simstore::simhash::Volatility::from_hex(v)
            .map_err(|e| format!("bad volatility {}: {e}", quoted(v)))?,
        None => simstore::simhash::Volatility::uniform(1.0 / 64.0),
    };
    if let Some(extra) = fields.next() {
        return Err(format!(
            "unexpected field {} after the volatility",
            quoted(extra)
        ));
    }
    Ok(Some((fp, volatility)))
}

/// Parses `FP [ID]` (the line's bytes, without its end); `Ok(None)` for
/// a blank line. The exact form programs write is read straight from the
/// bytes; anything else must be UTF-8 and goes through the general parser.
pub fn parse_record(
    line: impl AsRef<[u8]>,
    allow_id: bool,
) -> Result<Option<(u64, Option<u64>)>, String> {
    let line = line.as_ref();
    if let Some(record) = parse_plain(line, allow_id) {
        return Ok(Some(record));
    }
    let mut fields = utf8(line)?.split_ascii_whitespace();
    let Some(fp) = fields.next() else {
        return Ok(None);
    };
    let fp = parse_fingerprint(fp)?;
    let id = match fields.next() {
        Some(id) if allow_id => Some(parse_id(id)?),
        Some(extra) => {
            return Err(format!(
                "unexpected field {} after the fingerprint",
                quoted(extra)
            ))
        }
        None => None,
    };
    if let Some(extra) = fields.next() {
        return Err(format!("unexpected field {} after the id", quoted(extra)));
    }
    Ok(Some((fp, id)))
}

/// A line's bytes as text, or the error naming why they are not.
pub fn utf8(line: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(line).map_err(|_| "line is not valid UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_quote_a_short_prefix_of_a_long_field() {
        let long = "x".repeat(10 << 20);
        let message = parse_record(&long, true).unwrap_err();
        assert!(message.len() < 200, "{} bytes", message.len());
        assert!(message.contains("(10485760 bytes)"), "{message}");
        let id = format!("0123456789abcdef 1{}", "é".repeat(100));
        let message = parse_record(&id, true).unwrap_err();
        assert!(
            message.len() < 200 && message.contains("bytes)"),
            "{message}"
        );
        assert_eq!(quoted("0123"), "\"0123\"");
    }

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
        assert!(parse_record("0123456789abcdef0", true).is_err());
        assert_eq!(
            parse_record("0123456789abcdef 7\n", true),
            Ok(Some((0x0123_4567_89ab_cdef, Some(7))))
        );
        assert_eq!(
            parse_record("0123456789abcdef\n", false),
            Ok(Some((0x0123_4567_89ab_cdef, None)))
        );
        assert_eq!(
            parse_record("0123456789abcdef 9999999999999999999\n", true),
            Ok(Some((
                0x0123_4567_89ab_cdef,
                Some(9_999_999_999_999_999_999)
            )))
        );
        assert!(parse_record("0123456789abcdef 7\n", false).is_err());
        assert_eq!(
            parse_record("0123456789abcdef 7 ", true),
            Ok(Some((0x0123_4567_89ab_cdef, Some(7))))
        );
        assert!(parse_record("0123456789abcdef  7", true).is_ok());
        assert_eq!(
            parse_record("0XaBcDeF0123456789 18446744073709551615", true),
            Ok(Some((0xabcd_ef01_2345_6789, Some(u64::MAX))))
        );
        assert_eq!(
            parse_record("0123456789abcdef 18446744073709551616", true),
            Err("id \"18446744073709551616\" does not fit in 64 bits".into())
        );
        assert_eq!(
            parse_record("0123456789abcdef 99999999999999999999x", true),
            Err("id \"99999999999999999999x\" is not an unsigned decimal integer".into())
        );
    }
}
