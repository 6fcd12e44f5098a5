//! The session's file access through the editor (`ClientFs`): reads of documents the editor has
//! open come from the overlay (their unsaved text), and approved edits of open documents go to
//! the editor as `workspace/applyEdit` when it supports it, so its buffer changes and its undo
//! works. Every other read and write stays on the workspace's confined disk access (the
//! `reads`/`writes` answers send them there).
//!
//! Invariants: `applied: false` (or an error) fails the tool call with the editor's reason, and
//! nothing is written to disk for it; an edit the editor applied is put into the overlay at once
//! (the editor's `didChange` follows with the same text), so the next read sees it; an editor
//! that never answers fails the call after [`APPLY_PATIENCE`] instead of holding the turn.
//! Does not: map a URI spelled through a link to its canonical path (a document opened by
//! such a URI is read and written on disk, as if it were not open).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tower_lsp_server::ls_types::{Position, Range, TextEdit, Uri, WorkspaceEdit};
use tower_lsp_server::Client;

use super::documents::{uri_to_path, Documents};
use super::lock;
use crate::tools::client_fs::ClientFs;

/// How long the editor may take to answer `workspace/applyEdit`.
const APPLY_PATIENCE: Duration = Duration::from_secs(30);

pub struct EditorFs {
    pub client: Client,
    pub documents: Arc<Mutex<Documents>>,
    /// The client declared `workspace.applyEdit`.
    pub apply_edit: bool,
}

impl EditorFs {
    /// The URI of the open document that names `path`, as the client spelled it.
    fn open_uri(&self, path: &Path) -> Option<String> {
        lock(&self.documents)
            .uris()
            .find(|uri| uri_to_path(uri).as_deref() == Some(path))
            .map(str::to_owned)
    }
}

/// The range that covers all of `text` (lines and UTF-16 columns).
fn whole(text: &str) -> Range {
    let line = text.matches('\n').count();
    let last = text.rsplit('\n').next().unwrap_or_default();
    let character = last.chars().map(char::len_utf16).sum::<usize>();
    Range {
        start: Position::new(0, 0),
        end: Position::new(
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(character).unwrap_or(u32::MAX),
        ),
    }
}

impl ClientFs for EditorFs {
    fn reads(&self, path: &Path) -> bool {
        self.open_uri(path).is_some()
    }

    fn writes(&self, path: &Path) -> bool {
        self.apply_edit && self.open_uri(path).is_some()
    }

    fn read_text(&self, path: PathBuf) -> BoxFuture<'static, Result<String, String>> {
        let open = self
            .open_uri(&path)
            .and_then(|uri| lock(&self.documents).text(&uri).map(str::to_owned));
        Box::pin(async move {
            match open {
                Some(text) => Ok(text),
                // Closed since `reads` was asked. Not read from disk here by its absolute path:
                // that path was confined a moment ago, and a link swapped in since would lead
                // out; the next read goes through the workspace's confined path.
                None => Err(format!(
                    "`{}` was closed in the editor while it was being read; read it again",
                    path.display()
                )),
            }
        })
    }

    fn write_text(&self, path: PathBuf, content: String) -> BoxFuture<'static, Result<(), String>> {
        let client = self.client.clone();
        let documents = self.documents.clone();
        let open = self.open_uri(&path).and_then(|uri| {
            let text = lock(&self.documents).text(&uri).map(str::to_owned)?;
            Some((uri, text))
        });
        Box::pin(async move {
            let Some((uri, old)) = open else {
                return Err(format!(
                    "`{}` was closed in the editor before the edit could be applied; nothing was written",
                    path.display()
                ));
            };
            let target: Uri = uri
                .parse()
                .map_err(|e| format!("the document's URI `{uri}` is not valid: {e:?}"))?;
            let edit = WorkspaceEdit {
                changes: Some(HashMap::from([(
                    target,
                    vec![TextEdit {
                        range: whole(&old),
                        new_text: content.clone(),
                    }],
                )])),
                ..WorkspaceEdit::default()
            };
            match tokio::time::timeout(APPLY_PATIENCE, client.apply_edit(edit)).await {
                Ok(Ok(response)) if response.applied => {
                    lock(&documents).set(&uri, content);
                    Ok(())
                }
                Ok(Ok(response)) => Err(format!(
                    "the editor did not apply the edit: {}",
                    response
                        .failure_reason
                        .unwrap_or_else(|| "no reason given".to_owned())
                )),
                Ok(Err(e)) => Err(format!("workspace/applyEdit failed: {e}")),
                Err(_) => Err(format!(
                    "the editor did not answer workspace/applyEdit within {} s; whether it applied the edit is unknown",
                    APPLY_PATIENCE.as_secs()
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_range_ends_after_the_last_character() {
        assert_eq!(whole("a\nbc\n").end, Position::new(2, 0));
        assert_eq!(whole("a\nbé😀").end, Position::new(1, 4));
        assert_eq!(whole("").end, Position::new(0, 0));
    }
}
