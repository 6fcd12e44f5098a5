//! The plan and apply halves of `write_file` and `edit_file`: the diff shown for approval,
//! protected and credential paths refused or asked on the resolved path, and the write itself
//! through the workspace's descriptor-anchored atomic write.

use super::*;

/// A write or edit worked out and ready for approval. Nothing has been
/// written yet; `apply_edit` does that after the user approves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedEdit {
    pub path: WorkspacePath,
    /// The file's content when the plan was made; `None` for a new file.
    pub old_content: Option<String>,
    pub new_content: String,
    pub diff: FileDiff,
    /// For edit_file, how many occurrences were replaced; `None` for
    /// write_file. The success message depends on it.
    pub replacements: Option<usize>,
}

/// Plans write_file: replace (or create) the whole file with `content`.
pub fn plan_write(ws: &Workspace, path: &str, content: &str) -> Result<PlannedEdit, String> {
    let p = ws.resolve(path).map_err(|e| e.to_string())?;
    // Protected paths are refused before anything is read.
    refuse_protected(ws, &p)?;
    let old = ws.read_text_if_exists(&p).map_err(|e| match e {
        WorkspaceError::NotUtf8 { path } => format!(
            "`{path}` exists and is not UTF-8 text; write_file will not replace it blindly, so use the shell tool if it must change"
        ),
        other => other.to_string(),
    })?;
    plan_write_from(ws, p, old, content)
}

/// Plans write_file against `old`, the file's current content as the caller read it (from
/// disk, or from the client's editor buffer).
pub fn plan_write_from(
    ws: &Workspace,
    p: WorkspacePath,
    old: Option<String>,
    content: &str,
) -> Result<PlannedEdit, String> {
    // Every plan checks protection here, whoever read `old` (the disk or the client's editor).
    refuse_protected(ws, &p)?;
    // Refusing now spares the user an approval for a write that would fail.
    ws.check_writable(&p).map_err(|e| e.to_string())?;
    if old.as_deref() == Some(content) {
        return Err(format!(
            "`{}` already contains exactly this content; nothing needs to be written",
            p.display
        ));
    }
    let diff = file_diff(&p.display, old.as_deref(), content);
    Ok(PlannedEdit {
        path: p,
        old_content: old,
        new_content: content.to_string(),
        diff,
        replacements: None,
    })
}

/// Refuse edits of protected paths (checked on the resolved path, also for new files).
pub fn refuse_protected(ws: &Workspace, p: &crate::workspace::WorkspacePath) -> Result<(), String> {
    let resolved = ws.resolved_relative(p).map_err(|e| e.to_string())?;
    match ws.protected_reason(p.root_index, &resolved) {
        Some(why) => Err(format!(
            "`{}` is protected: {why}; tandem does not let the agent change it. Ask the user to make this change themselves",
            p.display
        )),
        None => Ok(()),
    }
}

/// Why a change to `path` asks the user every time, in every mode: a project file the user
/// edits on purpose that also runs code (`.vscode/tasks.json`; see
/// `workspace::protected::ASK_FILES`), on the resolved path.
pub fn ask_change_reason(ws: &Workspace, path: &str) -> Option<String> {
    let p = ws.resolve(path).ok()?;
    let resolved = ws.resolved_relative(&p).ok()?;
    crate::workspace::protected::ask_reason(&resolved).map(|why| {
        format!(
            "changing `{}` needs your approval every time: {why}",
            p.display
        )
    })
}

/// How a tool touches a file that may hold secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretAccess {
    Read,
    Edit,
    Write,
}

impl SecretAccess {
    fn verb(self) -> &'static str {
        match self {
            SecretAccess::Read => "reading",
            SecretAccess::Edit => "editing",
            SecretAccess::Write => "writing",
        }
    }
}

/// Why this `access` to `path` needs the user's approval because the file may hold secrets, on
/// the resolved path (a link cannot hide one). An edit or a write reveals content too (whether
/// `old_string` is there, whether anything changed), so each of them asks like a read.
pub fn secret_access_reason(ws: &Workspace, path: &str, access: SecretAccess) -> Option<String> {
    let p = ws.resolve(path).ok()?;
    let resolved = ws.resolved_relative(&p).ok()?;
    if access != SecretAccess::Read {
        // A protected file (`.git/config`) is refused outright when the change is planned;
        // asking first would only offer an approval that cannot be granted.
        if ws.protected_reason(p.root_index, &resolved).is_some() {
            return None;
        }
    }
    secret_reason(&resolved).map(|why| {
        format!(
            "{} `{}` needs your approval: {why}",
            access.verb(),
            p.display
        )
    })
}

/// Plans edit_file: replace `old_string` with `new_string`, which must be
/// unique in the file unless `replace_all` is set.
pub fn plan_edit(
    ws: &Workspace,
    path: &str,
    old_string: &str,
    new_string: &str,
    replace_all: bool,
) -> Result<PlannedEdit, String> {
    if old_string.is_empty() {
        return Err("old_string is empty; give the exact text to replace (copy it from read_file), or use write_file to create a file".to_string());
    }
    if old_string == new_string {
        return Err(
            "old_string and new_string are identical, so the edit would change nothing; give the new text in new_string"
                .to_string(),
        );
    }
    let p = ws.resolve(path).map_err(|e| e.to_string())?;
    refuse_protected(ws, &p)?;
    let old = ws.read_text_if_exists(&p).map_err(|e| e.to_string())?;
    plan_edit_from(ws, p, old, old_string, new_string, replace_all)
}

/// Plans edit_file against `old`, the file's current content as the caller read it (from
/// disk, or from the client's editor buffer); `None` means the file does not exist.
pub fn plan_edit_from(
    ws: &Workspace,
    p: WorkspacePath,
    old: Option<String>,
    old_string: &str,
    new_string: &str,
    replace_all: bool,
) -> Result<PlannedEdit, String> {
    // Every plan checks protection here, whoever read `old` (the disk or the client's editor).
    refuse_protected(ws, &p)?;
    let Some(old) = old else {
        return Err(format!(
            "`{}` does not exist; edit_file only changes existing files, so use write_file to create it (or check the path with glob)",
            p.display
        ));
    };

    let mut needle = std::borrow::Cow::Borrowed(old_string);
    let mut replacement = std::borrow::Cow::Borrowed(new_string);
    let mut count = old.matches(needle.as_ref()).count();
    // Models usually send '\n' line endings; a CRLF file would then never
    // match, so retry with the file's own line endings.
    if count == 0
        && old.contains("\r\n")
        && old_string.contains('\n')
        && !old_string.contains("\r\n")
    {
        let crlf = old_string.replace('\n', "\r\n");
        let crlf_count = old.matches(crlf.as_str()).count();
        if crlf_count > 0 {
            count = crlf_count;
            needle = std::borrow::Cow::Owned(crlf);
            replacement = std::borrow::Cow::Owned(new_string.replace('\n', "\r\n"));
        }
    }
    if count == 0 {
        return Err(format!(
            "old_string was not found in `{}`; call read_file on it and copy the exact text, including whitespace and indentation",
            p.display
        ));
    }
    if count > 1 && !replace_all {
        return Err(format!(
            "old_string occurs {count} times in `{}`; include more surrounding lines to make it unique, or set replace_all to true to change every occurrence",
            p.display
        ));
    }
    ws.check_writable(&p).map_err(|e| e.to_string())?;
    let new = if replace_all {
        old.replace(needle.as_ref(), replacement.as_ref())
    } else {
        old.replacen(needle.as_ref(), replacement.as_ref(), 1)
    };
    let diff = file_diff(&p.display, Some(&old), &new);
    Ok(PlannedEdit {
        path: p,
        old_content: Some(old),
        new_content: new,
        diff,
        replacements: Some(count),
    })
}

/// Carries out an approved plan. The file is re-read first: if it changed
/// since planning, the write is refused so nobody's work is overwritten.
/// `content_override` is the user's edited version of the proposal.
pub fn apply_edit(
    ws: &Workspace,
    plan: &PlannedEdit,
    content_override: Option<&str>,
) -> ToolOutcome {
    let shown = &plan.path.display;
    let current = match ws.read_text_if_exists(&plan.path) {
        Ok(current) => current,
        Err(e) => {
            return ToolOutcome::error(format!("could not re-read `{shown}` before writing: {e}"))
        }
    };
    let content = match content_to_write(plan, current.as_deref(), content_override) {
        Ok(content) => content,
        Err(refused) => return refused,
    };
    // Checked again where the write really lands: the plan's check saw names, and a command
    // may have swapped a folder for a link to `.git` since.
    let root_index = plan.path.root_index;
    let landing_check = |landing: &Path| match ws.protected_reason(root_index, landing) {
        Some(why) => Err(why),
        None => Ok(()),
    };
    if let Err(e) = ws.write_atomic(&plan.path, content.as_bytes(), &landing_check) {
        return e.into();
    }
    edit_written(plan, content_override)
}

/// The first half of applying a plan: refuse if the file changed since planning (`current`
/// is its content now), else the content to write (the user's edited version, if any).
pub fn content_to_write<'a>(
    plan: &'a PlannedEdit,
    current: Option<&str>,
    content_override: Option<&'a str>,
) -> Result<&'a str, ToolOutcome> {
    let shown = &plan.path.display;
    if current != plan.old_content.as_deref() {
        let what = match (&plan.old_content, &current) {
            (Some(_), None) => "was deleted",
            (None, Some(_)) => "was created by someone else",
            _ => "was changed by someone else",
        };
        return Err(ToolOutcome::error(format!(
            "`{shown}` {what} after this change was proposed, so nothing was written; call read_file on it again and redo the change against its current content"
        )));
    }
    let overridden = content_override.filter(|c| *c != plan.new_content);
    Ok(overridden.unwrap_or(&plan.new_content))
}

/// The second half: the result the model sees once the content was written.
pub fn edit_written(plan: &PlannedEdit, content_override: Option<&str>) -> ToolOutcome {
    let shown = &plan.path.display;
    let overridden = content_override.filter(|c| *c != plan.new_content);
    let content = overridden.unwrap_or(&plan.new_content);
    let new_file = if plan.old_content.is_none() {
        " (new file)"
    } else {
        ""
    };
    match (overridden, plan.replacements) {
        (None, Some(k)) => ToolOutcome::ok(format!("Edited {shown}: replaced {k} occurrence(s)")),
        (None, None) => ToolOutcome::ok(format!(
            "Wrote {} bytes to {shown}{new_file}",
            content.len()
        )),
        (Some(user), _) => {
            let mut out = format!(
                "Wrote {} bytes to {shown}{new_file}. The user edited your proposed content before approving; the file now holds the user's version.",
                user.len()
            );
            let diff = unified_diff(&plan.new_content, user, "proposed", "approved");
            let lines: Vec<&str> = diff.lines().collect();
            out.push_str("\nHow the user's version differs from your proposal:\n");
            out.push_str(&lines[..lines.len().min(OVERRIDE_DIFF_MAX_LINES)].join("\n"));
            if lines.len() > OVERRIDE_DIFF_MAX_LINES {
                out.push_str(&format!(
                    "\n… {} more diff lines; call read_file to see the file as it is now",
                    lines.len() - OVERRIDE_DIFF_MAX_LINES
                ));
            }
            ToolOutcome::ok(out)
        }
    }
}
