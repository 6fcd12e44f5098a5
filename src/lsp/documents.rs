//! The open documents of the editor (full text sync) and the context a `tandem.prompt` carries.
//!
//! The overlay is changed only by the ordered wrapper (`ordered.rs`), inside `call`, in the order
//! the client sent the notifications; a `tandem.prompt` read after a `didChange` therefore sees
//! that text (the race of tower-lsp issue #284 cannot happen here).
//! The session's reads of open documents come from here (`editor_fs.rs`).

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

/// The text of every document the client has open, by URI as the client spells it.
#[derive(Default)]
pub struct Documents {
    open: HashMap<String, String>,
}

impl Documents {
    /// Apply a `textDocument/didOpen`, `didChange` (full sync: the last change is the whole
    /// text) or `didClose` notification's params.
    pub fn apply(&mut self, method: &str, params: Option<&Value>) {
        let Some(params) = params else { return };
        let Some(uri) = params["textDocument"]["uri"].as_str() else {
            return;
        };
        match method {
            "textDocument/didOpen" => {
                if let Some(text) = params["textDocument"]["text"].as_str() {
                    self.open.insert(uri.to_owned(), text.to_owned());
                }
            }
            "textDocument/didChange" => {
                // Full sync is advertised, so a change without a range is the whole document.
                // A client that sends ranges anyway gets them applied in order.
                let Some(changes) = params["contentChanges"].as_array() else {
                    return;
                };
                for change in changes {
                    let Some(text) = change["text"].as_str() else {
                        continue;
                    };
                    match (change.get("range"), self.open.get_mut(uri)) {
                        (Some(range), Some(doc)) if !range.is_null() => {
                            if let Some((start, end)) = byte_range(doc, range) {
                                doc.replace_range(start..end, text);
                            }
                        }
                        _ => {
                            self.open.insert(uri.to_owned(), text.to_owned());
                        }
                    }
                }
            }
            "textDocument/didClose" => {
                self.open.remove(uri);
            }
            _ => {}
        }
    }

    pub fn text(&self, uri: &str) -> Option<&str> {
        self.open.get(uri).map(String::as_str)
    }

    /// The URIs of the open documents.
    pub fn uris(&self) -> impl Iterator<Item = &str> {
        self.open.keys().map(String::as_str)
    }

    /// Replace an open document's text (an edit the editor applied; its `didChange` follows).
    pub fn set(&mut self, uri: &str, text: String) {
        if let Some(doc) = self.open.get_mut(uri) {
            *doc = text;
        }
    }
}

/// The byte offsets of an LSP range (lines and UTF-16 columns) in `text`, clamped to it.
fn byte_range(text: &str, range: &Value) -> Option<(usize, usize)> {
    let start = byte_offset(text, &range["start"])?;
    let end = byte_offset(text, &range["end"])?;
    Some((start.min(end), end.max(start)))
}

fn byte_offset(text: &str, position: &Value) -> Option<usize> {
    let line = usize::try_from(position["line"].as_u64()?).ok()?;
    let column = usize::try_from(position["character"].as_u64()?).ok()?;
    let mut offset = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i == line {
            let mut units = 0;
            for (b, c) in l.char_indices() {
                if units >= column || c == '\n' {
                    return Some(offset + b);
                }
                units += c.len_utf16();
            }
            return Some(offset + l.len());
        }
        offset += l.len();
    }
    Some(text.len())
}

/// The local path of a `file://` URI (percent-decoded); `None` for any other scheme.
pub fn uri_to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file:///x` (empty authority) and `file://localhost/x` name local files.
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    use std::os::unix::ffi::OsStringExt;
    Some(PathBuf::from(std::ffi::OsString::from_vec(out)))
}

/// The lines of `text` a range covers (whole lines, 0-based, end line included), with their
/// first line number (1-based) for the prompt.
pub fn lines_of(text: &str, range: Option<&Value>) -> (usize, String) {
    let Some(range) = range.filter(|r| !r.is_null()) else {
        return (1, text.to_owned());
    };
    let start = range["start"]["line"].as_u64().unwrap_or(0) as usize;
    let mut end = range["end"]["line"].as_u64().unwrap_or(start as u64) as usize;
    // A selection that ends at column 0 of a line does not include that line.
    if end > start && range["end"]["character"].as_u64() == Some(0) {
        end -= 1;
    }
    let picked: String = text
        .split_inclusive('\n')
        .skip(start)
        .take(end.saturating_sub(start) + 1)
        .collect();
    (start + 1, picked)
}

/// The prompt text with the file (and range) appended as context, fenced.
pub fn prompt_with_context(text: &str, shown_path: &str, first_line: usize, body: &str) -> String {
    let last_line = first_line + body.lines().count().saturating_sub(1);
    let fence = if body.contains("```") { "````" } else { "```" };
    let mut out = String::with_capacity(text.len() + body.len() + 100);
    out.push_str(text);
    out.push_str(&format!(
        "\n\nContext: `{shown_path}` lines {first_line}-{last_line}:\n{fence}\n{body}"
    ));
    if !body.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(fence);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn full_and_ranged_changes_apply_in_order() {
        let mut d = Documents::default();
        let uri = "file:///w/a.txt";
        d.apply(
            "textDocument/didOpen",
            Some(&json!({"textDocument": {"uri": uri, "text": "one\ntwo\n"}})),
        );
        d.apply(
            "textDocument/didChange",
            Some(
                &json!({"textDocument": {"uri": uri}, "contentChanges": [{"text": "uno\ntwo\n"}]}),
            ),
        );
        assert_eq!(d.text(uri), Some("uno\ntwo\n"));
        d.apply(
            "textDocument/didChange",
            Some(&json!({"textDocument": {"uri": uri}, "contentChanges": [
                {"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 3}}, "text": "dos"}
            ]})),
        );
        assert_eq!(d.text(uri), Some("uno\ndos\n"));
        d.apply(
            "textDocument/didClose",
            Some(&json!({"textDocument": {"uri": uri}})),
        );
        assert_eq!(d.text(uri), None);
    }

    #[test]
    fn file_uris_decode_and_ranges_pick_lines() {
        assert_eq!(
            uri_to_path("file:///tmp/a%20b.txt"),
            Some(PathBuf::from("/tmp/a b.txt"))
        );
        assert_eq!(uri_to_path("untitled:1"), None);
        let range =
            json!({"start": {"line": 1, "character": 2}, "end": {"line": 2, "character": 0}});
        assert_eq!(lines_of("a\nb\nc\n", Some(&range)), (2, "b\n".to_owned()));
    }
}
