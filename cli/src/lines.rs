//! Reading standard input a line at a time, parsed ahead on other
//! threads, for `add`, `delete` and `query`.

use std::io::{self, Read};
use std::sync::mpsc::{self, SyncSender};

use super::stream::Failure;

/// Reads lines, parsing each with `parse`, and hands them to `sink`
/// together with whether more input is already available (read and
/// waiting, or arriving within `patience`), so callers can commit or flush
/// exactly when the next line would have to be waited for.
///
/// A reader thread reads ahead ([`read_lines`]): it parses the whole
/// lines of each read (up to 64 KiB; a read returns what has arrived, so
/// an interactive writer gets its answer after each line while a file is
/// read in large blocks) and hands them over. On an early return the
/// thread is left blocked on its read; the process exits without waiting
/// for it.
pub(crate) fn for_each_line<T: Send + 'static>(
    input: impl Read + Send + 'static,
    patience: std::time::Duration,
    parse: impl Fn(&[u8]) -> Result<Option<T>, String> + Send + 'static,
    mut sink: impl FnMut(usize, Option<T>, bool) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let (tx, rx) = mpsc::sync_channel::<Parsed<T>>(64);
    std::thread::spawn(move || read_lines(input, &parse, &tx));
    let mut line = 0usize;
    let mut next = rx.recv().ok();
    while let Some(chunk) = next.take() {
        let chunk = chunk?;
        next = rx.try_recv().ok();
        let count = chunk.len();
        for (i, parsed) in chunk.into_iter().enumerate() {
            line += 1;
            let more = i + 1 < count || {
                if next.is_none() {
                    next = if patience.is_zero() {
                        rx.try_recv().ok()
                    } else {
                        rx.recv_timeout(patience).ok()
                    };
                }
                next.is_some()
            };
            match parsed {
                Ok(item) => sink(line, item, more)?,
                Err(message) => return Err(Failure::Input { line, message }),
            }
        }
        if next.is_none() {
            next = rx.recv().ok();
        }
    }
    Ok(())
}

/// The parsed lines of one read, in order, or the error that ended
/// reading.
type Parsed<T> = io::Result<Vec<Result<Option<T>, String>>>;

/// Bytes [`read_lines`] asks for at a time (more while a line is longer).
const READ_BLOCK: usize = 1 << 16;

/// Every line of `bytes` (each without its end, `\n` or `\r\n`), parsed.
fn parse_all<T>(
    parse: &impl Fn(&[u8]) -> Result<Option<T>, String>,
    bytes: &[u8],
) -> Vec<Result<Option<T>, String>> {
    let mut lines = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
        let (mut text, after) = rest.split_at(end);
        rest = after;
        while let [before @ .., b'\n' | b'\r'] = text {
            text = before;
        }
        lines.push(parse(text));
    }
    lines
}

/// The reader thread of [`for_each_line`]: reads blocks, parses their
/// whole lines and sends them, keeping a partial last line for the next
/// read; a line longer than the buffer grows it. Stops at the end of the
/// input (whose last line may lack its end), at a read error (sent),
/// after sending a malformed line, or when nobody receives.
fn read_lines<T>(
    mut input: impl Read,
    parse: &impl Fn(&[u8]) -> Result<Option<T>, String>,
    tx: &SyncSender<Parsed<T>>,
) {
    let mut buf = vec![0u8; READ_BLOCK];
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let read = match input.read(&mut buf[filled..]) {
            Ok(0) => {
                if filled > 0 {
                    let _ = tx.send(Ok(parse_all(parse, &buf[..filled])));
                }
                return;
            }
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        let searched = filled;
        filled += read;
        // The bytes before this read hold no line end.
        let Some(end) = memchr::memrchr(b'\n', &buf[searched..filled]).map(|i| searched + i + 1)
        else {
            continue;
        };
        let lines = parse_all(parse, &buf[..end]);
        let malformed = lines.iter().any(Result::is_err);
        if tx.send(Ok(lines)).is_err() || malformed {
            return;
        }
        buf.copy_within(end..filled, 0);
        filled -= end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::parse_record;

    /// Each line reaches the parser without its end (`\n`, `\r\n`, or
    /// none on the last), numbered from 1; invalid UTF-8 is the parser's
    /// to judge.
    #[test]
    fn lines_reach_the_parser_without_their_ends() {
        let seen = numbered_lines(b"a\r\n\nb c\n\xff\r\r\nlast".to_vec());
        let want: Vec<(usize, Vec<u8>)> = vec![
            (1, b"a".to_vec()),
            (2, b"".to_vec()),
            (3, b"b c".to_vec()),
            (4, b"\xff".to_vec()),
            (5, b"last".to_vec()),
        ];
        assert_eq!(seen, want);
        let error = for_each_line(
            std::io::Cursor::new(b"0123456789abcdef 1\n\xff\n".to_vec()),
            std::time::Duration::ZERO,
            |s| parse_record(s, true),
            |_, _, _| Ok(()),
        );
        assert!(
            matches!(&error, Err(Failure::Input { line: 2, message }) if message.contains("UTF-8"))
        );
    }

    /// Input read in bulk (many blocks, lines of every length up to
    /// several blocks) reaches the sink whole and in order, numbered from
    /// 1; a malformed line far in is reported with its own number after
    /// every line before it.
    #[test]
    fn bulk_input_arrives_in_order() {
        let mut rng = simstore_test_rng(7);
        let mut input = Vec::new();
        let mut want = Vec::new();
        for i in 0..60_000u64 {
            let len = if i % 9_973 == 0 {
                (READ_BLOCK * 3) as u64 + i % 7
            } else {
                rng() % 40
            };
            let text: Vec<u8> = (0..len).map(|j| b'a' + ((i + j) % 26) as u8).collect();
            input.extend_from_slice(&text);
            input.push(b'\n');
            want.push(text);
        }
        let want: Vec<(usize, Vec<u8>)> = (1..).zip(want).collect();
        let seen = numbered_lines(input);
        assert!(seen == want, "lines lost, changed or out of order");

        // The same input with line 45,678 malformed.
        let bad = 45_678;
        let mut input = Vec::new();
        for (line, text) in &want {
            input.extend_from_slice(if *line == bad { b"#bad" } else { text });
            input.push(b'\n');
        }
        let mut lines_seen = 0;
        let error = for_each_line(
            std::io::Cursor::new(input),
            std::time::Duration::ZERO,
            |s| match s {
                [b'#', ..] => Err("bad".to_string()),
                _ => Ok(Some(())),
            },
            |_, _, _| {
                lines_seen += 1;
                Ok(())
            },
        );
        assert!(matches!(error, Err(Failure::Input { line, .. }) if line == bad));
        assert_eq!(lines_seen, bad - 1);
    }

    /// Every line of `input` as the sink gets it, with its number.
    fn numbered_lines(input: Vec<u8>) -> Vec<(usize, Vec<u8>)> {
        let mut seen = Vec::new();
        for_each_line(
            std::io::Cursor::new(input),
            std::time::Duration::ZERO,
            |s| Ok(Some(s.to_vec())),
            |line, text, _| {
                seen.push((line, text.unwrap_or_default()));
                Ok(())
            },
        )
        .unwrap_or_else(|_| panic!("reading failed"));
        seen
    }

    /// A small deterministic generator.
    fn simstore_test_rng(seed: u64) -> impl FnMut() -> u64 {
        let mut rng = crate::rng::Rng(seed);
        move || rng.next_u64()
    }
}
