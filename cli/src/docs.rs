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
    /// Its text, or a message saying why it is skipped.
    pub text: Result<String, String>,
}

/// Expands inputs into files: directories are walked recursively, their
/// entries in sorted path order. No inputs means standard input (`-`).
pub fn files(inputs: &[PathBuf]) -> Vec<Result<PathBuf, String>> {
    if inputs.is_empty() {
        return vec![Ok(PathBuf::from("-"))];
    }
    let mut out = Vec::new();
    for input in inputs {
        walk(input, &mut out);
    }
    out
}

fn walk(path: &Path, out: &mut Vec<Result<PathBuf, String>>) {
    if path.as_os_str() == "-" || !path.is_dir() {
        out.push(Ok(path.to_path_buf()));
        return;
    }
    match std::fs::read_dir(path) {
        Ok(entries) => {
            let mut children: Vec<PathBuf> =
                entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            children.sort();
            for c in children {
                walk(&c, out);
            }
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
    fn text_of(&self, raw: String) -> String {
        #[cfg(feature = "html")]
        if self.html {
            return simstore::simhash::visible_text(&raw);
        }
        raw
    }

    /// Calls `visit` with every document of `path` in order.
    pub fn documents(&self, path: &Path, visit: &mut dyn FnMut(Document)) {
        let name = path.display().to_string();
        let bytes = match read_all(path) {
            Ok(b) => b,
            Err(e) => return visit(Document { name, text: Err(e) }),
        };
        let Some((text_field, id_field)) = &self.jsonl else {
            let text = String::from_utf8(bytes)
                .map(|t| self.text_of(t))
                .map_err(|_| format!("{name}: not valid UTF-8 text"));
            return visit(Document { name, text });
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
                    Some(serde_json::Value::String(t)) => Ok((id, self.text_of(t.clone()))),
                    _ => Err(format!(
                        "{name}: line {line_no}: no string field {text_field:?}"
                    )),
                }
            });
            match doc {
                Ok((id, text)) => visit(Document {
                    name: id,
                    text: Ok(text),
                }),
                Err(e) => visit(Document {
                    name: format!("{name}:{line_no}"),
                    text: Err(e),
                }),
            }
        }
    }
}
