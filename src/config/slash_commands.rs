//! Slash commands in the format users already have: the built-ins the session runs itself, and
//! custom Markdown commands (Claude Code's `.claude/commands/NAME.md` layout, with optional YAML
//! front matter `description` and `argument-hint`) from `<root>/.tandem/commands/`,
//! `<root>/.claude/commands/` and `~/.config/tandem/commands/`, whose body becomes the prompt
//! with `$ARGUMENTS` and `$1`…`$9` replaced.
//!
//! Invariants: discovery reads through a `cap_std` handle of each commands folder, so a link in
//! it cannot make tandem read elsewhere; it depends only on the files (sorted, a name found
//! earlier wins), and built-in names cannot be taken by a file. Listing reads the folders again
//! each time (a few directory reads), so a new file needs no restart.
//! Does not: run anything a command file says (Claude Code's `!`-prefixed shell lines are left as
//! text for the model, which goes through the usual approvals), or decide what a built-in does
//! (that is `session::commands`).

use std::io::Read;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::tools::skills::{front_value, split_front_matter};

/// How many custom commands are listed.
pub const MAX_COMMANDS: usize = 200;
/// The largest command file, in bytes.
pub const MAX_COMMAND_FILE_BYTES: u64 = 256 * 1024;
const MAX_NAME_CHARS: usize = 64;
const MAX_DESCRIPTION_CHARS: usize = 300;

/// Where a command comes from (`source` of `commands/list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandSource {
    Builtin,
    /// A file under a workspace root.
    Project,
    /// A file of the user's config folder.
    User,
}

/// The commands the session runs itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Compact,
    Diff,
    Fork,
    Init,
    Mode,
    Model,
    Status,
    Undo,
}

impl Builtin {
    pub const ALL: [Builtin; 8] = [
        Builtin::Compact,
        Builtin::Diff,
        Builtin::Fork,
        Builtin::Init,
        Builtin::Mode,
        Builtin::Model,
        Builtin::Status,
        Builtin::Undo,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Builtin::Compact => "compact",
            Builtin::Diff => "diff",
            Builtin::Fork => "fork",
            Builtin::Init => "init",
            Builtin::Mode => "mode",
            Builtin::Model => "model",
            Builtin::Status => "status",
            Builtin::Undo => "undo",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Builtin::Compact => "Summarize the conversation so far to free context",
            Builtin::Diff => "Show what the last turn changed in the workspace",
            Builtin::Fork => "Copy this conversation into a new session",
            Builtin::Init => "Have the model write an AGENTS.md describing this project",
            Builtin::Mode => "Switch the approval mode (ask, autoEdit, plan, fullAuto)",
            Builtin::Model => "Switch the model of this session",
            Builtin::Status => "Show the session's model, mode, usage, servers and hooks",
            Builtin::Undo => "Undo the last turn: its file changes and its messages",
        }
    }

    pub fn argument_hint(self) -> Option<&'static str> {
        match self {
            Builtin::Mode | Builtin::Model => Some("NAME"),
            _ => None,
        }
    }

    pub fn by_name(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }
}

/// One custom command found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCommand {
    pub name: String,
    pub description: String,
    pub argument_hint: Option<String>,
    pub source: CommandSource,
    /// The text after the front matter, with `$ARGUMENTS` and `$1`…`$9` still in it.
    pub body: String,
}

/// One entry of `commands/list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandInfo {
    pub name: String,
    pub description: String,
    pub argument_hint: Option<String>,
    pub source: CommandSource,
}

/// Where custom commands are looked for, in order (a name found earlier wins), with the source
/// each folder's commands get.
pub fn command_folders(roots: &[PathBuf]) -> Vec<(PathBuf, CommandSource)> {
    let mut folders = Vec::new();
    for root in roots {
        for sub in [".tandem/commands", ".claude/commands"] {
            folders.push((root.join(sub), CommandSource::Project));
        }
    }
    if let Some(config) = dirs::config_dir() {
        folders.push((config.join("tandem").join("commands"), CommandSource::User));
    }
    folders
}

/// Every custom command of `folders`, sorted by name, at most [`MAX_COMMANDS`]. A file in a
/// subfolder is named `sub:name` (Claude Code's namespacing). Blocking.
pub fn discover(folders: &[(PathBuf, CommandSource)]) -> Vec<CustomCommand> {
    let mut commands: Vec<CustomCommand> = Vec::new();
    for (folder, source) in folders {
        let Ok(dir) = Dir::open_ambient_dir(folder, ambient_authority()) else {
            continue;
        };
        let mut files = Vec::new();
        markdown_files(&dir, "", &mut files, 0);
        files.sort();
        for (name, path) in files {
            if commands.len() >= MAX_COMMANDS {
                break;
            }
            if name.chars().count() > MAX_NAME_CHARS
                || Builtin::by_name(&name).is_some()
                || commands.iter().any(|c| c.name == name)
            {
                continue;
            }
            let Some(text) = read_text(&dir, Path::new(&path)) else {
                continue;
            };
            let (front, body) = split_front_matter(&text);
            let description = front_value(front, "description")
                .or_else(|| {
                    body.lines()
                        .map(|l| l.trim().trim_start_matches('#').trim())
                        .find(|l| !l.is_empty())
                        .map(str::to_owned)
                })
                .unwrap_or_else(|| format!("Custom command from {path}"));
            commands.push(CustomCommand {
                name,
                description: description.chars().take(MAX_DESCRIPTION_CHARS).collect(),
                argument_hint: front_value(front, "argument-hint"),
                source: *source,
                body: body.to_owned(),
            });
        }
    }
    commands.sort_by(|a, b| a.name.cmp(&b.name));
    commands
}

/// The `.md` files of `dir` and of its subfolders one level down: `(command name, path)`.
fn markdown_files(dir: &Dir, prefix: &str, out: &mut Vec<(String, String)>, depth: usize) {
    let Ok(entries) = dir.entries() else { return };
    for entry in entries.flatten() {
        let Ok(file_name) = entry.file_name().into_string() else {
            continue;
        };
        match entry.file_type() {
            Ok(t) if t.is_dir() && depth == 0 && valid_name(&file_name) => {
                if let Ok(sub) = entry.open_dir() {
                    let mut inner = Vec::new();
                    markdown_files(&sub, &format!("{file_name}:"), &mut inner, depth + 1);
                    out.extend(
                        inner
                            .into_iter()
                            .map(|(name, path)| (name, format!("{file_name}/{path}"))),
                    );
                }
            }
            Ok(t) if t.is_file() => {
                if let Some(stem) = file_name.strip_suffix(".md") {
                    if valid_name(stem) {
                        out.push((format!("{prefix}{stem}"), file_name.clone()));
                    }
                }
            }
            _ => {}
        }
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

/// A UTF-8 file of at most [`MAX_COMMAND_FILE_BYTES`] beneath `dir` (links inside `dir` only).
fn read_text(dir: &Dir, path: &Path) -> Option<String> {
    let meta = dir.metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_COMMAND_FILE_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    dir.open(path)
        .ok()?
        .take(MAX_COMMAND_FILE_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// The built-ins and `custom`, sorted by name (what `commands/list` answers).
pub fn list(custom: &[CustomCommand]) -> Vec<CommandInfo> {
    let mut out: Vec<CommandInfo> = Builtin::ALL
        .into_iter()
        .map(|b| CommandInfo {
            name: b.name().to_owned(),
            description: b.description().to_owned(),
            argument_hint: b.argument_hint().map(str::to_owned),
            source: CommandSource::Builtin,
        })
        .chain(custom.iter().map(|c| CommandInfo {
            name: c.name.clone(),
            description: c.description.clone(),
            argument_hint: c.argument_hint.clone(),
            source: c.source,
        }))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// `text` split into a command name and its arguments when it starts with `/name` (a name
/// being letters, digits, `-`, `_`, `.` and `:`); `None` otherwise.
pub fn parse_invocation(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
    let name = &rest[..end];
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    valid.then(|| (name, rest[end..].trim()))
}

/// `body` with `$ARGUMENTS` replaced by `arguments` and `$1`…`$9` by the whitespace-separated
/// (double or single quotes group words) arguments, missing ones empty. A body that mentions
/// none of them gets the arguments appended on a line of their own, so nothing typed is lost.
pub fn expand(body: &str, arguments: &str) -> String {
    let positional = split_arguments(arguments);
    let mut out = String::with_capacity(body.len() + arguments.len());
    let mut used = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(arguments);
            used = true;
            rest = tail;
            continue;
        }
        match after.chars().next() {
            Some(d @ '1'..='9') => {
                let index = d as usize - '1' as usize;
                out.push_str(positional.get(index).map(String::as_str).unwrap_or(""));
                used = true;
                rest = &after[1..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    let mut out = out.trim().to_owned();
    if !used && !arguments.is_empty() {
        out.push_str("\n\n");
        out.push_str(arguments);
    }
    out
}

fn split_arguments(arguments: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut has_word = false;
    for c in arguments.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => current.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                has_word = true;
            }
            None if c.is_whitespace() => {
                if has_word {
                    out.push(std::mem::take(&mut current));
                    has_word = false;
                }
            }
            None => {
                current.push(c);
                has_word = true;
            }
        }
    }
    if has_word {
        out.push(current);
    }
    out
}

/// The prompt `/init` sends.
pub const INIT_PROMPT: &str = "Look through this repository and write an AGENTS.md at the root of the workspace for \
coding agents that will work here: what the project is, how it is laid out (the main folders and what each holds), \
how to build it, run it and run its tests (exact commands), the conventions the code follows (style, naming, error \
handling, testing), and anything surprising a newcomer must know. Read the README, the build files and a sample of \
the code first. Keep it short and factual; if an AGENTS.md exists already, improve it instead of starting over.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invocations_and_what_is_not_one() {
        assert_eq!(
            parse_invocation("/review src/a.rs"),
            Some(("review", "src/a.rs"))
        );
        assert_eq!(parse_invocation("  /status"), Some(("status", "")));
        assert_eq!(parse_invocation("/git:pr  1 2 "), Some(("git:pr", "1 2")));
        assert_eq!(parse_invocation("review"), None);
        assert_eq!(parse_invocation("/"), None);
        assert_eq!(parse_invocation("/usr/bin is odd"), None);
    }

    #[test]
    fn arguments_are_replaced() {
        assert_eq!(
            expand(
                "Review $1 for $2.\nAll: $ARGUMENTS",
                "a.rs \"security bugs\""
            ),
            "Review a.rs for security bugs.\nAll: a.rs \"security bugs\""
        );
        assert_eq!(expand("Fix $3 now", "x"), "Fix  now");
        assert_eq!(expand("Costs $5 or $", ""), "Costs  or $");
        assert_eq!(
            expand("Explain this.", "in French"),
            "Explain this.\n\nin French"
        );
        assert_eq!(expand("Explain this.", ""), "Explain this.");
    }

    #[test]
    fn discovery_reads_front_matter_namespaces_and_keeps_builtins() {
        let root = tempfile::tempdir().unwrap();
        let tandem = root.path().join(".tandem/commands");
        let claude = root.path().join(".claude/commands");
        std::fs::create_dir_all(tandem.join("git")).unwrap();
        std::fs::create_dir_all(&claude).unwrap();
        std::fs::write(
            tandem.join("review.md"),
            "---\ndescription: Review a file\nargument-hint: FILE\n---\nReview $1.\n",
        )
        .unwrap();
        std::fs::write(tandem.join("git/pr.md"), "# Open a pull request\nDo it.\n").unwrap();
        std::fs::write(claude.join("review.md"), "shadowed by .tandem's").unwrap();
        std::fs::write(claude.join("status.md"), "a built-in name is not taken").unwrap();
        std::fs::write(claude.join("notes.txt"), "not markdown").unwrap();
        let folders = vec![
            (tandem.clone(), CommandSource::Project),
            (claude.clone(), CommandSource::Project),
        ];
        let found = discover(&folders);
        let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["git:pr", "review"]);
        assert_eq!(found[1].description, "Review a file");
        assert_eq!(found[1].argument_hint.as_deref(), Some("FILE"));
        assert_eq!(found[1].body.trim(), "Review $1.");
        assert_eq!(found[0].description, "Open a pull request");
        let listed = list(&found);
        assert!(listed
            .iter()
            .any(|c| c.name == "status" && c.source == CommandSource::Builtin));
        assert_eq!(listed.len(), Builtin::ALL.len() + 2);
    }
}
