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

/// The value of 16 hex digits, if they are: two words of eight digits
/// each, checked and converted a whole word at a time ([`hex8`]; lines
/// are read by the million).
#[inline]
fn hex16(digits: &[u8]) -> Option<u64> {
    let digits: &[u8; 16] = digits.try_into().ok()?;
    let (high, low) = digits.split_at(8);
    let word = |half: &[u8]| u64::from_le_bytes(half.try_into().unwrap_or_default());
    Some((hex8(word(high))? << 32) | hex8(word(low))?)
}

/// The value of the eight hex digits of `x` (read little-endian: its low
/// byte is the first, most significant digit), if each byte is one.
///
/// Each test works on all eight bytes at once: with every byte below
/// 0x80, adding `0x80 - lo` to each sets its high bit exactly when it is
/// at least `lo`, and no sum carries into the next byte.
#[inline]
fn hex8(x: u64) -> Option<u64> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    if x & HIGH != 0 {
        return None;
    }
    let at_least = |w: u64, lo: u8| w.wrapping_add(ONES * u64::from(0x80 - lo));
    let above = |w: u64, hi: u8| w.wrapping_add(ONES * u64::from(0x7f - hi));
    let digit = at_least(x, b'0') & !above(x, b'9');
    // Upper-case letters folded onto lower-case ones.
    let folded = x | (ONES * 0x20);
    let letter = at_least(folded, b'a') & !above(folded, b'f');
    if (digit | letter) & HIGH != HIGH {
        return None;
    }
    // A digit's value is its low nibble; a letter's, its low nibble plus
    // 9 (letters have bit 6 set, digits not).
    let v = (x & (ONES * 0x0f)) + ((x >> 6) & ONES) * 9;
    // Pairs of nibbles into bytes, bytes into 16-bit halves, halves into
    // the 32-bit value, the first digit highest.
    let v = ((v << 4) | (v >> 8)) & 0x00ff_00ff_00ff_00ff;
    let v = ((v << 8) | (v >> 16)) & 0x0000_ffff_0000_ffff;
    Some(((v << 16) | (v >> 32)) & 0xffff_ffff)
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

/// A query line's fingerprint and, when the line named its document, the
/// name.
pub type Query = (u64, Option<String>);

/// Parses a query line (the line's bytes, without its end): `FP`, or
/// `FP<TAB>NAME` as `hash` prints it, whose name (everything after the
/// TAB; none when empty) the answer echoes. The column `hash --weights`
/// and `hash --sketch` print between the two (128 hex digits and a TAB)
/// is passed over. `Ok(None)` for a blank line.
pub fn parse_query(line: &[u8]) -> Result<Option<Query>, String> {
    if let Some((fp, _)) = parse_plain(line, false) {
        return Ok(Some((fp, None)));
    }
    let line = utf8(line)?;
    let (head, name) = match line.split_once('\t') {
        Some((head, rest)) => {
            let name = match rest.split_once('\t') {
                Some((column, name))
                    if column.len() == 128 && column.bytes().all(|c| c.is_ascii_hexdigit()) =>
                {
                    name
                }
                _ => rest,
            };
            (head, named(name))
        }
        None => (line, None),
    };
    match parse_record(head, false)? {
        Some((fp, _)) => Ok(Some((fp, name))),
        None if name.is_some() => Err("no fingerprint before the name".into()),
        None => Ok(None),
    }
}

/// A line's name field: none when empty.
fn named(name: &str) -> Option<String> {
    (!name.is_empty()).then(|| name.to_string())
}

/// Parses `FP [VOLATILITY]` (a probabilistic query: the fingerprint and
/// the 128 hex digits `hash --weights` prints), or
/// `FP<TAB>VOLATILITY<TAB>NAME` as `hash --weights` prints it, whose name
/// (everything after the second TAB; none when empty) the answer echoes.
/// Without a volatility every bit is taken as equally likely to flip
/// (probability 1/64). `Ok(None)` for a blank line.
pub fn parse_probabilistic(
    line: &str,
) -> Result<Option<(u64, simstore::simhash::Volatility, Option<String>)>, String> {
    let mut tabs = line.splitn(3, '\t');
    let (head, name) = match (tabs.next(), tabs.next(), tabs.next()) {
        (Some(fp), Some(volatility), Some(_)) if fp.trim().is_empty() && !volatility.is_empty() => {
            return Err("no fingerprint before the volatility".into());
        }
        (Some(fp), Some(volatility), Some(name)) => {
            (&line[..fp.len() + 1 + volatility.len()], named(name))
        }
        _ => (line, None),
    };
    let mut fields = head.split_ascii_whitespace();
    let Some(fp) = fields.next() else {
        return match name {
            Some(_) => Err("no fingerprint before the name".into()),
            None => Ok(None),
        };
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
    Ok(Some((fp, volatility, name)))
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

    /// The word-at-a-time digits agree with a digit-by-digit reading for
    /// every byte value at every place, and on random digit strings.
    #[test]
    fn hex_words_match_a_digit_by_digit_reading() {
        let reference = |digits: &[u8]| -> Option<u64> {
            digits
                .iter()
                .all(u8::is_ascii_hexdigit)
                .then(|| u64::from_str_radix(std::str::from_utf8(digits).unwrap(), 16).unwrap())
        };
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet = b"0123456789abcdefABCDEF";
        for round in 0..4000 {
            let mut digits: [u8; 16] =
                std::array::from_fn(|_| alphabet[(next() % alphabet.len() as u64) as usize]);
            assert_eq!(hex16(&digits), reference(&digits), "{digits:?}");
            let place = round % 16;
            for byte in 0..=255u8 {
                digits[place] = byte;
                assert_eq!(hex16(&digits), reference(&digits), "{digits:?}");
            }
        }
    }

    #[test]
    fn query_lines_may_carry_the_name_hash_prints() {
        let fp = 0x0123_4567_89ab_cdef;
        let name = |s: &str| Some(s.to_string());
        let q = |s: &str| parse_query(s.as_bytes());
        assert_eq!(q("0123456789abcdef"), Ok(Some((fp, None))));
        assert_eq!(
            q("0123456789abcdef\tdocs/a b.txt"),
            Ok(Some((fp, name("docs/a b.txt"))))
        );
        assert_eq!(
            q(" 0x0123456789ABCDEF \ta\tb"),
            Ok(Some((fp, name("a\tb"))))
        );
        assert_eq!(q("0123456789abcdef\t"), Ok(Some((fp, None))));
        // hash --weights's and --sketch's column, passed over.
        let column = "0f".repeat(64);
        assert_eq!(
            q(&format!("0123456789abcdef\t{column}\tn a")),
            Ok(Some((fp, name("n a"))))
        );
        let short = &column[1..];
        assert_eq!(
            q(&format!("0123456789abcdef\t{short}\tn")),
            Ok(Some((fp, name(&format!("{short}\tn")))))
        );
        assert_eq!(q("  "), Ok(None));
        assert_eq!(q("\tname"), Err("no fingerprint before the name".into()));
        assert!(q("0123456789abcdef 7\tname").is_err());
        assert!(q("0123456789abcdef 7").is_err());
        assert!(q("0123456789abcde\tname").is_err());

        let v = "00".repeat(64);
        let volatile = simstore::simhash::Volatility::from_hex(&v).unwrap();
        let uniform = simstore::simhash::Volatility::uniform(1.0 / 64.0);
        let p = |s: &str| parse_probabilistic(s);
        assert_eq!(
            p(&format!("0123456789abcdef {v}")),
            Ok(Some((fp, volatile, None)))
        );
        assert_eq!(
            p(&format!("0123456789abcdef\t{v}")),
            Ok(Some((fp, volatile, None)))
        );
        assert_eq!(
            p(&format!("0123456789abcdef\t{v}\tdocs/a\tb")),
            Ok(Some((fp, volatile, name("docs/a\tb"))))
        );
        assert_eq!(
            p(&format!("0123456789abcdef\t{v}\t")),
            Ok(Some((fp, volatile, None)))
        );
        assert_eq!(p("0123456789abcdef"), Ok(Some((fp, uniform, None))));
        assert_eq!(p("\t\tname"), Err("no fingerprint before the name".into()));
        assert_eq!(
            p(&format!("\t{v}\tname")),
            Err("no fingerprint before the volatility".into())
        );
        assert!(p("0123456789abcdef\tname").is_err());
        assert!(p(&format!("0123456789abcdef\t{v} x\tname")).is_err());
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
