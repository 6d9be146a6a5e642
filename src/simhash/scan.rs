//! Visible text of an HTML document in one pass, without building a tree:
//! the text sketches are computed from (storage-format.md, "Sketches").
//!
//! It follows the HTML tokenizer (tags, comments, raw text and RCDATA
//! elements, character references as the standard's table has them) but
//! not tree construction, so it differs from [`visible_text`] only where
//! a parser would repair markup: text that a misplaced end tag splits in
//! the source is split here (a parser may join it), text a parser moves
//! out of a table stays in place. On generated documentation the two give
//! the same words (`simstore-bench html` checks a corpus), several times
//! faster.
//!
//! [`visible_text`]: super::visible_text

use markup5ever::data::{C1_REPLACEMENTS, NAMED_ENTITIES};

/// Elements whose contents are raw text up to their end tag, hidden.
const HIDDEN_RAW_TEXT: &[&[u8]] = &[b"script", b"style", b"noscript"];

/// Elements whose contents are raw text up to their end tag, shown.
const RAW_TEXT: &[&[u8]] = &[b"xmp", b"iframe", b"noembed", b"noframes"];

/// Elements allowed inside `head`: any other start tag ends it.
const IN_HEAD: &[&[u8]] = &[
    b"base",
    b"basefont",
    b"bgsound",
    b"link",
    b"meta",
    b"title",
    b"noscript",
    b"noframes",
    b"style",
    b"script",
    b"template",
];

/// The visible text of an HTML document: the text outside tags, comments
/// and the `script`, `style`, `noscript`, `template`, `head` and `title`
/// elements, character references decoded, a space wherever a tag or
/// comment was.
pub fn visible_text_fast(html: &str) -> String {
    let b = html.as_bytes();
    let mut out = String::with_capacity(html.len() / 2);
    let mut i = 0;
    let mut in_head = false;
    let mut template_depth = 0usize;
    while i < b.len() {
        if b[i] != b'<' {
            // A text run up to the next tag.
            let end = memchr(b'<', &b[i..]).map_or(b.len(), |n| i + n);
            let text = &html[i..end];
            if in_head && text.bytes().any(|c| !c.is_ascii_whitespace()) {
                in_head = false;
            }
            if !in_head && template_depth == 0 {
                decode_into(text, &mut out);
            }
            i = end;
            continue;
        }
        let rest = &b[i + 1..];
        if rest.starts_with(b"!--") {
            i = find(b, i + 4, b"-->").map_or(b.len(), |n| n + 3);
            out.push(' ');
            continue;
        }
        match rest.first() {
            // A doctype makes no node (a parser drops it past the start).
            Some(b'!') if rest.len() >= 8 && rest[1..8].eq_ignore_ascii_case(b"doctype") => {
                i = memchr(b'>', &b[i..]).map_or(b.len(), |n| i + n + 1);
            }
            Some(b'!' | b'?') => {
                i = memchr(b'>', &b[i..]).map_or(b.len(), |n| i + n + 1);
                out.push(' ');
            }
            Some(b'/') if rest.get(1).is_some_and(u8::is_ascii_alphabetic) => {
                let (name, after) = tag(b, i + 2);
                i = after;
                out.push(' ');
                if name == b"head" {
                    in_head = false;
                } else if name == b"template" {
                    template_depth = template_depth.saturating_sub(1);
                }
            }
            // `</>` is dropped; `</` before anything but a letter starts a
            // comment that ends at `>`.
            Some(b'/') if rest.get(1) == Some(&b'>') => i += 3,
            Some(b'/') => {
                i = memchr(b'>', &b[i..]).map_or(b.len(), |n| i + n + 1);
                out.push(' ');
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let (name, after) = tag(b, i + 1);
                i = after;
                out.push(' ');
                if in_head && !IN_HEAD.contains(&name.as_slice()) {
                    in_head = false;
                }
                match name.as_slice() {
                    b"head" => in_head = true,
                    b"body" => in_head = false,
                    b"template" => template_depth += 1,
                    b"plaintext" => {
                        if !in_head && template_depth == 0 {
                            out.push_str(&html[i..]);
                        }
                        i = b.len();
                    }
                    b"title" | b"textarea" => {
                        let end = end_tag(b, i, &name);
                        if name == b"textarea" && !in_head && template_depth == 0 {
                            decode_into(&html[i..end], &mut out);
                        }
                        i = end;
                    }
                    n if HIDDEN_RAW_TEXT.contains(&n) => i = end_tag(b, i, &name),
                    n if RAW_TEXT.contains(&n) => {
                        let end = end_tag(b, i, &name);
                        if !in_head && template_depth == 0 {
                            out.push_str(&html[i..end]);
                        }
                        i = end;
                    }
                    _ => {}
                }
            }
            _ => {
                // A `<` that starts no tag is text.
                if !in_head && template_depth == 0 {
                    out.push('<');
                }
                i += 1;
            }
        }
    }
    out
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&c| c == needle)
}

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|n| from + n)
}

/// The lower-cased name of the tag whose name starts at `at`, and the
/// position after its `>` (quoted attribute values may hold `>`).
fn tag(b: &[u8], at: usize) -> (Vec<u8>, usize) {
    let mut i = at;
    while i < b.len() && !matches!(b[i], b'\t' | b'\n' | b'\x0c' | b'\r' | b' ' | b'/' | b'>') {
        i += 1;
    }
    let name = b[at..i].to_ascii_lowercase();
    // Attributes: a quote opens a value only right after `=` (and
    // whitespace).
    let mut after_equals = false;
    while i < b.len() {
        match b[i] {
            b'>' => return (name, i + 1),
            b'=' => after_equals = true,
            q @ (b'"' | b'\'') if after_equals => {
                i = memchr(q, &b[i + 1..]).map_or(b.len(), |n| i + 1 + n);
                after_equals = false;
            }
            c if c.is_ascii_whitespace() => {}
            _ => after_equals = false,
        }
        i += 1;
    }
    (name, b.len())
}

/// The position of the end tag `</name` (any case, followed by
/// whitespace, `/` or `>`) at or after `from`, or the end; the tag itself
/// is left for the caller's loop.
fn end_tag(b: &[u8], from: usize, name: &[u8]) -> usize {
    let mut i = from;
    while let Some(n) = memchr(b'<', &b[i..]) {
        let at = i + n;
        let rest = &b[at + 1..];
        if rest.first() == Some(&b'/')
            && rest.len() > name.len()
            && rest[1..=name.len()].eq_ignore_ascii_case(name)
            && matches!(
                rest.get(name.len() + 1),
                None | Some(b'\t' | b'\n' | b'\x0c' | b'\r' | b' ' | b'/' | b'>')
            )
        {
            return at;
        }
        i = at + 1;
    }
    b.len()
}

/// Appends `text` with its character references decoded.
fn decode_into(text: &str, out: &mut String) {
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        match reference(after) {
            Some((decoded, used)) => {
                out.push_str(&decoded);
                rest = &after[used..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
}

/// The character reference at the start of `s` (after its `&`): the text
/// it stands for and the bytes it takes; `None` when there is none.
fn reference(s: &str) -> Option<(String, usize)> {
    let b = s.as_bytes();
    if b.first() == Some(&b'#') {
        let hex = matches!(b.get(1), Some(b'x' | b'X'));
        let start = if hex { 2 } else { 1 };
        let digits = b[start..]
            .iter()
            .take_while(|c| {
                if hex {
                    c.is_ascii_hexdigit()
                } else {
                    c.is_ascii_digit()
                }
            })
            .count();
        if digits == 0 {
            return None;
        }
        let text = &s[start..start + digits];
        let n = u32::from_str_radix(text, if hex { 16 } else { 10 }).unwrap_or(u32::MAX);
        let c = match n {
            0 | 0xD800..=0xDFFF => '\u{fffd}',
            n if n > 0x10FFFF => '\u{fffd}',
            0x80..=0x9F => C1_REPLACEMENTS[(n - 0x80) as usize]
                .or_else(|| char::from_u32(n))
                .unwrap_or('\u{fffd}'),
            n => char::from_u32(n).unwrap_or('\u{fffd}'),
        };
        let mut used = start + digits;
        if b.get(used) == Some(&b';') {
            used += 1;
        }
        return Some((c.to_string(), used));
    }
    // The longest name in the table, growing one character at a time
    // while some entity starts with what is read.
    let mut best: Option<((u32, u32), usize)> = None;
    for (i, c) in s.char_indices().take(40) {
        let end = i + c.len_utf8();
        match NAMED_ENTITIES.get(&s[..end]) {
            Some(&m) => {
                if m.0 != 0 {
                    best = Some((m, end));
                }
            }
            None => break,
        }
    }
    let ((a, second), used) = best?;
    let mut text = String::new();
    text.extend(char::from_u32(a));
    if second != 0 {
        text.extend(char::from_u32(second));
    }
    Some((text, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        crate::simhash::tokens(s).collect()
    }

    /// The parser-based extraction and the scanner agree on the words of
    /// well-formed documents and of the constructs the scanner models.
    #[test]
    fn agrees_with_the_parser() {
        let docs = [
            "<html><head><title>T</title><style>p{}</style></head><body><p>Hello <b>world</b></p>\
             <script>var x = '</p>a';</script><!-- note --><div>again&amp;more</div></body></html>",
            "<!DOCTYPE html><meta charset=utf-8><p>no head or body tags &eacute;t&eacute; &#233;&#xE9; &#150;x",
            "<p title='a > b' data-x=\"<b>\">quoted &gt; attributes</p><br/>line<hr>rule",
            "<div>a<span>b</span>c</div><textarea>x <b>y</b> &amp;</textarea><xmp><i>raw</i></xmp>",
            "<p>legacy &copy2024 &notit; &amp &ampere &#; &#x; &#0; &#x110000; &unknown;</p>",
            "<template><p>hidden</p><template>deeper</template></template><p>shown</p>",
            "<head><link rel=x>text ends the head<p>and more</p>",
            "a < b and c <3 d</p>e<!---->f<!doctype html>g<?pi?>h",
            "<noscript><p>x</p></noscript><iframe>y</iframe><p>z</p><plaintext><b>all</b> &amp;",
            "<SCRIPT>hidden</SCRIPT >shown<STYLE>h</style>also",
            "<p>a</>b</ 3>c</ >d<iframe><b>frame</b></iframe><noembed>e</noembed>",
        ];
        for doc in docs {
            assert_eq!(
                words(&visible_text_fast(doc)),
                words(&crate::simhash::visible_text(doc)),
                "{doc}"
            );
        }
    }

    #[test]
    fn references() {
        assert_eq!(reference("amp;x"), Some(("&".into(), 4)));
        assert_eq!(reference("ampx"), Some(("&".into(), 3)));
        assert_eq!(reference("notit;"), Some(("¬".into(), 3)));
        assert_eq!(reference("#x41;"), Some(("A".into(), 5)));
        assert_eq!(reference("#65"), Some(("A".into(), 3)));
        assert_eq!(reference("#150;"), Some(("–".into(), 5)));
        assert_eq!(reference("#;"), None);
        assert_eq!(reference("zzz;"), None);
        assert_eq!(reference("NotNestedGreaterGreater;").map(|r| r.1), Some(24));
    }
}
