//! File access through the client's editor instead of the disk.
//!
//! A face whose client can read and write files itself (ACP's `fs/read_text_file` and
//! `fs/write_text_file`) gives the session a [`ClientFs`]. Then `read_file` sees unsaved
//! buffers, edits are planned against the buffer, and approved edits are handed to the editor,
//! which shows them in its own review. Confinement is unchanged: every path is resolved
//! through the workspace first (symlinks followed only inside the root), so only paths inside
//! the roots ever reach the client. Everything else (list, glob, grep, shell) stays on disk.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::fs::{self, PlannedEdit, ToolOutcome};
use super::{run_read_only, ToolArgs};
use crate::workspace::{Workspace, WorkspaceError, WorkspacePath};

/// Reads and writes whole text files through the client. Errors are the client's message.
pub trait ClientFs: Send + Sync + 'static {
    fn read_text(&self, path: PathBuf) -> BoxFuture<'static, Result<String, String>>;
    fn write_text(&self, path: PathBuf, content: String) -> BoxFuture<'static, Result<(), String>>;
    /// Whether the client holds `path` (absolute, confined) for reads; `false` reads it from
    /// disk as if there were no client. ACP's editor reads every file; the LSP face holds only
    /// the documents the editor has open.
    fn reads(&self, _path: &Path) -> bool {
        true
    }
    /// Whether the client takes the approved write of `path`; `false` writes it through the
    /// workspace (confined, on disk) as if there were no client.
    fn writes(&self, _path: &Path) -> bool {
        true
    }
}

/// The absolute path to hand the client for `p`, after confinement: links are followed only as
/// far as they stay inside the root (the kernel decides), so a link out is refused here.
fn client_path(ws: &Workspace, p: &WorkspacePath) -> Result<PathBuf, WorkspaceError> {
    let relative = ws.resolved_relative(p)?;
    Ok(ws.roots()[p.root_index].join(relative))
}

/// The file's current text as the editor has it (`None` when it does not exist on disk).
///
/// Existence, file type and UTF-8 are judged on disk, with the workspace's usual errors; the
/// content then comes from the client, so an unsaved buffer wins over the disk.
fn current_text(
    ws: Workspace,
    client: Arc<dyn ClientFs>,
    p: WorkspacePath,
) -> BoxFuture<'static, Result<Option<String>, TextError>> {
    Box::pin(async move {
        let probe_ws = ws.clone();
        let probe = p.clone();
        let on_disk = tokio::task::spawn_blocking(move || {
            let text = probe_ws.read_text_if_exists(&probe)?;
            let path = client_path(&probe_ws, &probe)?;
            Ok::<_, WorkspaceError>((text, path))
        })
        .await
        .map_err(|e| {
            TextError::Disk(WorkspaceError::Io {
                path: p.display.clone(),
                op: "read",
                source: std::io::Error::other(e.to_string()),
            })
        })?
        .map_err(TextError::Disk)?;
        let (text, path) = on_disk;
        if text.is_none() || !client.reads(&path) {
            return Ok(text);
        }
        client
            .read_text(path)
            .await
            .map(Some)
            .map_err(|why| TextError::Editor(format!("`{}`: {why}", p.display)))
    })
}

/// Why the current text could not be had.
enum TextError {
    /// On disk: missing root, not UTF-8, a directory, … (the disk tools say it best).
    Disk(WorkspaceError),
    /// The editor failed or did not answer. Never answered from the disk instead: the
    /// editor's buffer may differ, and a silent fallback would show the model a file the
    /// user does not have in front of them.
    Editor(String),
}

impl std::fmt::Display for TextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TextError::Disk(e) => e.fmt(f),
            TextError::Editor(why) => write!(f, "reading through the editor failed: {why}"),
        }
    }
}

/// Run a low-risk tool: `read_file` through the client when there is one, everything else (and
/// every read without a client) on disk.
pub async fn read_only(
    workspace: Workspace,
    client: Option<Arc<dyn ClientFs>>,
    args: ToolArgs,
) -> ToolOutcome {
    let (
        Some(client),
        ToolArgs::ReadFile {
            path,
            offset,
            limit,
        },
    ) = (client, &args)
    else {
        return run_read_only(workspace, args).await;
    };
    let p = match workspace.resolve(path) {
        Ok(p) => p,
        Err(e) => return e.into(),
    };
    let (offset, limit) = (*offset, *limit);
    match current_text(workspace.clone(), client, p.clone()).await {
        Ok(Some(text)) => fs::read_text_window(&p.display, &text, offset, limit),
        // Missing files, directories, binary files: the disk tool says it best.
        Ok(None) | Err(TextError::Disk(_)) => run_read_only(workspace, args).await,
        Err(editor @ TextError::Editor(_)) => ToolOutcome {
            output: format!(
                "{editor}; the file was not read (try again, or ask the user to check the editor)"
            ),
            is_error: true,
        },
    }
}

/// Plan write_file/edit_file against the editor's buffer.
pub async fn plan(
    workspace: Workspace,
    client: Arc<dyn ClientFs>,
    args: ToolArgs,
) -> Result<PlannedEdit, String> {
    let path = match &args {
        ToolArgs::WriteFile { path, .. } | ToolArgs::EditFile { path, .. } => path.clone(),
        other => return Err(format!("internal error: {} is not an edit", other.title())),
    };
    let p = workspace.resolve(&path).map_err(|e| e.to_string())?;
    // A protected path is refused before the editor is even asked for it.
    let (probe_ws, probe) = (workspace.clone(), p.clone());
    tokio::task::spawn_blocking(move || fs::refuse_protected(&probe_ws, &probe))
        .await
        .map_err(|e| format!("planning the edit crashed: {e}"))??;
    let old = current_text(workspace.clone(), client, p.clone())
        .await
        .map_err(|e| match (e, &args) {
            (TextError::Disk(WorkspaceError::NotUtf8 { path }), ToolArgs::WriteFile { .. }) => format!(
                "`{path}` exists and is not UTF-8 text; write_file will not replace it blindly, so use the shell tool if it must change"
            ),
            (other, _) => other.to_string(),
        })?;
    tokio::task::spawn_blocking(move || match args {
        ToolArgs::WriteFile { content, .. } => fs::plan_write_from(&workspace, p, old, &content),
        ToolArgs::EditFile {
            old_string,
            new_string,
            replace_all,
            ..
        } => fs::plan_edit_from(&workspace, p, old, &old_string, &new_string, replace_all),
        _ => unreachable!("checked above"),
    })
    .await
    .unwrap_or_else(|e| Err(format!("planning the edit crashed: {e}")))
}

/// Apply an approved plan through the editor: re-read the buffer, refuse if it changed since
/// planning, then hand the new content to the client.
pub async fn apply(
    workspace: Workspace,
    client: Arc<dyn ClientFs>,
    plan: &PlannedEdit,
    edited: Option<&str>,
) -> ToolOutcome {
    let shown = &plan.path.display;
    let probe_ws = workspace.clone();
    let probe = plan.path.clone();
    let path = match tokio::task::spawn_blocking(move || client_path(&probe_ws, &probe)).await {
        Ok(Ok(path)) => path,
        Ok(Err(e)) => return e.into(),
        Err(e) => return ToolOutcome::error(format!("the edit crashed: {e}")),
    };
    if !client.writes(&path) {
        let (plan, edited) = (plan.clone(), edited.map(str::to_owned));
        return tokio::task::spawn_blocking(move || {
            fs::apply_edit(&workspace, &plan, edited.as_deref())
        })
        .await
        .unwrap_or_else(|e| ToolOutcome::error(format!("the edit crashed: {e}")));
    }
    let current = match current_text(workspace.clone(), client.clone(), plan.path.clone()).await {
        Ok(current) => current,
        Err(e) => {
            return ToolOutcome::error(format!("could not re-read `{shown}` before writing: {e}"))
        }
    };
    let content = match fs::content_to_write(plan, current.as_deref(), edited) {
        Ok(content) => content.to_owned(),
        Err(refused) => return refused,
    };
    match client.write_text(path, content).await {
        Ok(()) => fs::edit_written(plan, edited),
        // `why` says whether the editor refused (nothing written) or never answered (unknown).
        Err(why) => ToolOutcome::error(format!("writing `{shown}` through the editor: {why}")),
    }
}
