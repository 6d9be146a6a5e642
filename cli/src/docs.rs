//! Documents from the command line's inputs: files, directories walked
//! recursively in sorted path order, standard input, or JSONL records.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// Where documents come from and how to read them.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// Extract visible text from HTML.
    pub html: bool,
    /// Read JSONL records instead of whole files: `(text field, id field)`.
    pub jsonl: Option<(String, String)>,
}

/// One document, or why it could not be read.
pub struct Document {
    /// The name the user knows it by: the path as given (joined with the
    /// walked part), `-` for standard input, or the JSONL id.
    pub name: String,
    /// Its contents (HTML still to extract when `html`), or a message
    /// saying why it is skipped.
    contents: Result<String, String>,
    /// Whether `contents` is HTML whose visible text is the document's.
    html: bool,
}

impl Document {
    /// The document's text (for HTML, its visible text: the costly part,
    /// left to the caller's threads), or why it is skipped.
    pub fn text(&self) -> Result<std::borrow::Cow<'_, str>, String> {
        #[cfg(feature = "html")]
        return self.text_by(simstore::simhash::visible_text);
        #[cfg(not(feature = "html"))]
        self.text_by(str::to_string)
    }

    /// [`text`](Self::text), HTML read by the one-pass scanner that
    /// sketches are defined with (`simhash::visible_text_fast`) instead
    /// of the parser.
    pub fn scanned_text(&self) -> Result<std::borrow::Cow<'_, str>, String> {
        #[cfg(feature = "html")]
        return self.text_by(simstore::simhash::visible_text_fast);
        #[cfg(not(feature = "html"))]
        self.text_by(str::to_string)
    }

    /// The contents, HTML read by `visible`.
    fn text_by(&self, visible: fn(&str) -> String) -> Result<std::borrow::Cow<'_, str>, String> {
        let contents = self.contents.as_deref().map_err(Clone::clone)?;
        if self.html {
            return Ok(visible(contents).into());
        }
        Ok(contents.into())
    }
}

/// `f` of every document, on all cores, results in input order.
pub fn map_parallel<R: Send>(docs: &[Document], f: impl Fn(&Document) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(docs.len().max(1));
    if threads == 1 {
        return docs.iter().map(f).collect();
    }
    // Small interleaved shares keep the threads equally busy when
    // document sizes vary.
    let next = std::sync::atomic::AtomicUsize::new(0);
    const SHARE: usize = 8;
    let mut parts: Vec<(usize, Vec<R>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let start = next.fetch_add(SHARE, std::sync::atomic::Ordering::Relaxed);
                        if start >= docs.len() {
                            return done;
                        }
                        let end = (start + SHARE).min(docs.len());
                        done.push((start, docs[start..end].iter().map(&f).collect()));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("document thread panicked"))
            .collect()
    });
    parts.sort_by_key(|&(start, _)| start);
    parts.into_iter().flat_map(|(_, r)| r).collect()
}

/// Expands inputs into files: directories are walked recursively, their
/// entries in sorted path order, following symbolic links except into a
/// directory the walk is already inside (a loop, reported as an error in
/// its place). No inputs means standard input (`-`).
pub fn files(inputs: &[PathBuf]) -> Vec<Result<PathBuf, String>> {
    if inputs.is_empty() {
        return vec![Ok(PathBuf::from("-"))];
    }
    let mut out = Vec::new();
    for input in inputs {
        walk(input, &mut Vec::new(), &mut out);
    }
    out
}

/// Appends the files of `path` to `out`; `inside` holds the resolved
/// paths of the directories the walk is in.
fn walk(path: &Path, inside: &mut Vec<PathBuf>, out: &mut Vec<Result<PathBuf, String>>) {
    if path.as_os_str() == "-" || !path.is_dir() {
        out.push(Ok(path.to_path_buf()));
        return;
    }
    let resolved = match std::fs::canonicalize(path) {
        Ok(resolved) => resolved,
        Err(e) => {
            out.push(Err(format!("{}: cannot resolve: {e}", path.display())));
            return;
        }
    };
    if inside.contains(&resolved) {
        out.push(Err(format!(
            "{}: not walked: a link back to {}, which contains it",
            path.display(),
            resolved.display()
        )));
        return;
    }
    match std::fs::read_dir(path) {
        Ok(entries) => {
            let mut children: Vec<PathBuf> =
                entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            children.sort();
            inside.push(resolved);
            for c in children {
                walk(&c, inside, out);
            }
            inside.pop();
        }
        Err(e) => out.push(Err(format!(
            "{}: cannot list directory: {e}",
            path.display()
        ))),
    }
}

fn read_all(path: &Path) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    let result = if path.as_os_str() == "-" {
        std::io::stdin().lock().read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut bytes))
    };
    result
        .map(|_| bytes)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))
}

impl Source {
    fn document(&self, name: String, contents: Result<String, String>) -> Document {
        Document {
            name,
            contents,
            html: self.html,
        }
    }

    /// Calls `visit` with every document of `path` in order.
    pub fn documents(&self, path: &Path, visit: &mut dyn FnMut(Document)) {
        let name = path.display().to_string();
        let bytes = match read_all(path) {
            Ok(b) => b,
            Err(e) => return visit(self.document(name, Err(e))),
        };
        let Some((text_field, id_field)) = &self.jsonl else {
            let text =
                String::from_utf8(bytes).map_err(|_| format!("{name}: not valid UTF-8 text"));
            return visit(self.document(name, text));
        };
        for (n, line) in BufReader::new(&bytes[..]).split(b'\n').enumerate() {
            let line_no = n + 1;
            let line = line.unwrap_or_default();
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let record = serde_json::from_slice::<serde_json::Value>(&line)
                .map_err(|e| format!("{name}: line {line_no}: malformed JSON: {e}"));
            let doc = record.and_then(|v| {
                let id = match v.get(id_field) {
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(serde_json::Value::Number(n)) => n.to_string(),
                    _ => {
                        return Err(format!(
                            "{name}: line {line_no}: no string or number field {id_field:?}"
                        ))
                    }
                };
                match v.get(text_field) {
                    Some(serde_json::Value::String(t)) => Ok((id, t.clone())),
                    _ => Err(format!(
                        "{name}: line {line_no}: no string field {text_field:?}"
                    )),
                }
            });
            match doc {
                Ok((id, text)) => visit(self.document(id, Ok(text))),
                Err(e) => visit(self.document(format!("{name}:{line_no}"), Err(e))),
            }
        }
    }
}
