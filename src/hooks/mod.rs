//! Hooks in Claude Code's format: commands the user configured to run at seven points of a
//! session (`SessionStart`, `UserPromptSubmit`, `PreToolUse`, `PostToolUse`, `Stop`,
//! `PreCompact`, `Notification`), from `~/.config/tandem/hooks.json` (the user's) and, per
//! workspace root, `.tandem/hooks.json`, `.claude/settings.json` and `.claude/settings.local.json`
//! (the project's, which run only once the user trusted their content).
//!
//! This module parses hook files, matches hooks to events ([`HookSet::matching`], with Claude's
//! tool names as aliases of tandem's) and binds project hooks to the SHA-256 of the files'
//! content ([`ProjectHooks::content_hash`]); `run.rs` runs one hook command and reads its answer.
//!
//! Invariants: what runs is exactly what was parsed from the bytes whose hash the trust names
//! (the files are read once, as the session opens); a hook file that cannot be parsed is a
//! problem the session reports, never a reason to run part of it.
//! Does not: decide what a verdict does to a turn (that is `engine::hooks`), read files itself
//! (the caller passes their text), or run anything inside the command sandbox.

pub mod run;

use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// A hook's timeout when its entry names none (Claude Code's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest timeout an entry may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// The largest hook file read, in bytes.
pub const MAX_HOOK_FILE_BYTES: u64 = 1024 * 1024;
/// How many hook commands one file may declare.
pub const MAX_HOOKS_PER_FILE: usize = 100;

/// The project's hook files under each workspace root, in the order they are read.
pub const PROJECT_HOOK_FILES: [&str; 3] = [
    ".tandem/hooks.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
];

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookEvent {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    Stop,
    PreCompact,
    Notification,
}

impl HookEvent {
    pub const ALL: [HookEvent; 7] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::Stop,
        HookEvent::PreCompact,
        HookEvent::Notification,
    ];

    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::Stop => "Stop",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::Notification => "Notification",
        }
    }

    fn by_name(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Whether exit code 2 (or a `block` decision) stops what the event announces.
    pub fn can_block(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse | HookEvent::UserPromptSubmit | HookEvent::Stop
        )
    }
}

/// Whose file a hook comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookSource {
    /// `~/.config/tandem/hooks.json`: the user wrote it for themselves; it always runs.
    User,
    /// A file of the workspace: runs only once the user trusted its content.
    Project,
}

/// One configured hook command.
#[derive(Debug, Clone)]
pub struct Hook {
    pub event: HookEvent,
    /// The matcher as written (`None`: every tool, or the event has no matcher).
    pub matcher: Option<String>,
    regex: Option<regex_automata::meta::Regex>,
    pub command: String,
    pub timeout: Duration,
    pub source: HookSource,
}

/// Claude Code's tool names that match tandem's tools.
pub const TOOL_ALIASES: &[(&str, &str)] = &[
    ("Bash", "shell"),
    ("Write", "write_file"),
    ("Edit", "edit_file"),
    ("MultiEdit", "edit_file"),
    ("Read", "read_file"),
    ("Grep", "grep"),
    ("Glob", "glob"),
    ("LS", "list_dir"),
];

/// Claude Code's name for tandem tool `tool`, if it has one.
pub fn claude_alias(tool: &str) -> Option<&'static str> {
    TOOL_ALIASES
        .iter()
        .find(|(_, ours)| *ours == tool)
        .map(|(claude, _)| *claude)
}

impl Hook {
    /// Whether this hook's matcher accepts `subject` (a tool name for the tool events, the
    /// source or trigger for `SessionStart`/`PreCompact`; ignored by the other events).
    pub fn matches(&self, subject: Option<&str>) -> bool {
        let (Some(regex), Some(subject)) = (&self.regex, subject) else {
            return true;
        };
        let hit = |name: &str| regex.is_match(name);
        if hit(subject) {
            return true;
        }
        TOOL_ALIASES
            .iter()
            .filter(|(_, ours)| *ours == subject)
            .any(|(claude, _)| hit(claude))
    }
}

/// The project's hook files as read, with their hooks.
#[derive(Debug, Clone, Default)]
pub struct ProjectHooks {
    /// `(path relative to its root, text)` of each file that exists, in read order.
    pub files: Vec<(String, String)>,
    pub hooks: Vec<Hook>,
}

impl ProjectHooks {
    /// What a trust binds to: SHA-256 over each file's path and bytes (a rewritten, added or
    /// removed file gives another hash).
    pub fn content_hash(&self) -> String {
        content_hash(self.files.iter().map(|(p, t)| (p.as_str(), t.as_bytes())))
    }
}

/// SHA-256 (hex) over `(name, bytes)` pairs, each length-prefixed so no two sets collide.
pub fn content_hash<'a>(parts: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
    let mut hasher = Sha256::new();
    for (name, bytes) in parts {
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    let digest = hasher.finalize();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every hook of one session: the user's and the project's, and whether the project's may run.
#[derive(Debug, Default)]
pub struct HookSet {
    pub user: Vec<Hook>,
    pub project: ProjectHooks,
    /// Files that could not be used, with why (reported to the user, nothing of them runs).
    pub problems: Vec<String>,
    trusted: std::sync::atomic::AtomicBool,
}

impl HookSet {
    pub fn new(
        user: Vec<Hook>,
        project: ProjectHooks,
        problems: Vec<String>,
        trusted: bool,
    ) -> HookSet {
        HookSet {
            user,
            project,
            problems,
            trusted: std::sync::atomic::AtomicBool::new(trusted),
        }
    }

    /// Whether the project's hooks may run (there are none, or the user trusted them).
    pub fn project_trusted(&self) -> bool {
        self.project.files.is_empty() || self.trusted.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn set_project_trusted(&self) {
        self.trusted
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Every hook, the user's first, for listing.
    pub fn all(&self) -> impl Iterator<Item = &Hook> {
        self.user.iter().chain(self.project.hooks.iter())
    }

    /// The hooks that run for `event` on `subject`: the user's, and the project's once trusted.
    pub fn matching(&self, event: HookEvent, subject: Option<&str>) -> Vec<&Hook> {
        let project = self.project_trusted();
        self.all()
            .filter(|h| h.event == event)
            .filter(|h| project || h.source == HookSource::User)
            .filter(|h| h.matches(subject))
            .collect()
    }

    /// Whether any hook would run for `event` and `subject`.
    pub fn any(&self, event: HookEvent, subject: Option<&str>) -> bool {
        !self.matching(event, subject).is_empty()
    }
}

/// Parse one hook file's text (`{"hooks": {EVENT: [{"matcher"?, "hooks": [{"type":
/// "command", "command", "timeout"?}]}]}}`; other top-level keys, as in Claude Code's
/// settings files, are ignored). Errors say what is wrong where.
pub fn parse(text: &str, source: HookSource) -> Result<Vec<Hook>, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("it is not valid JSON ({e})"))?;
    let Some(top) = value.as_object() else {
        return Err("it is not a JSON object".to_owned());
    };
    let Some(events) = top.get("hooks") else {
        return Ok(Vec::new());
    };
    let Some(events) = events.as_object() else {
        return Err("`hooks` is not an object of events".to_owned());
    };
    let mut out = Vec::new();
    for (name, groups) in events {
        let Some(event) = HookEvent::by_name(name) else {
            return Err(format!(
                "`{name}` is not a hook event tandem knows; the events are {}",
                HookEvent::ALL.map(HookEvent::name).join(", ")
            ));
        };
        let Some(groups) = groups.as_array() else {
            return Err(format!("`hooks.{name}` is not an array"));
        };
        for (g, group) in groups.iter().enumerate() {
            let at = format!("hooks.{name}[{g}]");
            let matcher = match group.get("matcher") {
                None | Some(Value::Null) => None,
                Some(Value::String(m)) if m.is_empty() || m == "*" => None,
                Some(Value::String(m)) => Some(m.clone()),
                Some(_) => return Err(format!("`{at}.matcher` is not a string")),
            };
            let regex = match &matcher {
                Some(m) => Some(
                    regex_automata::meta::Regex::new(&format!("^(?:{m})$"))
                        .map_err(|e| format!("`{at}.matcher` is not a valid regex ({e})"))?,
                ),
                None => None,
            };
            let Some(commands) = group.get("hooks").and_then(Value::as_array) else {
                return Err(format!("`{at}.hooks` is missing or not an array"));
            };
            for (c, command) in commands.iter().enumerate() {
                let at = format!("{at}.hooks[{c}]");
                match command.get("type").and_then(Value::as_str) {
                    Some("command") => {}
                    Some(other) => {
                        return Err(format!(
                            "`{at}.type` is `{other}`; tandem runs only `command` hooks"
                        ))
                    }
                    None => return Err(format!("`{at}.type` is missing (use \"command\")")),
                }
                let Some(text) = command.get("command").and_then(Value::as_str) else {
                    return Err(format!("`{at}.command` is missing or not a string"));
                };
                if text.trim().is_empty() {
                    return Err(format!("`{at}.command` is empty"));
                }
                let timeout = match command.get("timeout") {
                    None | Some(Value::Null) => DEFAULT_TIMEOUT,
                    Some(v) => match v.as_f64() {
                        Some(s) if s > 0.0 => Duration::from_secs_f64(s).min(MAX_TIMEOUT),
                        _ => {
                            return Err(format!(
                                "`{at}.timeout` is not a positive number of seconds"
                            ))
                        }
                    },
                };
                out.push(Hook {
                    event,
                    matcher: matcher.clone(),
                    regex: regex.clone(),
                    command: text.to_owned(),
                    timeout,
                    source,
                });
                if out.len() > MAX_HOOKS_PER_FILE {
                    return Err(format!("it declares more than {MAX_HOOKS_PER_FILE} hooks"));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Vec<Hook> {
        parse(text, HookSource::Project).unwrap()
    }

    #[test]
    fn claude_names_match_as_aliases_and_matchers_are_anchored() {
        let hooks = one(r#"{"hooks":{"PreToolUse":[
                {"matcher":"Bash","hooks":[{"type":"command","command":"a"}]},
                {"matcher":"Edit|Write","hooks":[{"type":"command","command":"b","timeout":5}]},
                {"matcher":"read","hooks":[{"type":"command","command":"c"}]},
                {"hooks":[{"type":"command","command":"d"}]}]}}"#);
        let set = HookSet::new(
            Vec::new(),
            ProjectHooks {
                files: vec![],
                hooks,
            },
            vec![],
            false,
        );
        let names = |tool: &str| -> Vec<String> {
            set.matching(HookEvent::PreToolUse, Some(tool))
                .into_iter()
                .map(|h| h.command.clone())
                .collect()
        };
        assert_eq!(names("shell"), ["a", "d"]);
        assert_eq!(names("write_file"), ["b", "d"]);
        assert_eq!(names("edit_file"), ["b", "d"]);
        // Anchored: `read` does not match `read_file`.
        assert_eq!(names("read_file"), ["d"]);
        assert_eq!(names("mcp__files__read"), ["d"]);
        assert!(set.matching(HookEvent::Stop, None).is_empty());
        assert_eq!(set.project.hooks[1].timeout, Duration::from_secs(5));
    }

    #[test]
    fn untrusted_project_hooks_do_not_match_until_trusted() {
        let hooks = one(r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"x"}]}]}}"#);
        let project = ProjectHooks {
            files: vec![(".tandem/hooks.json".into(), "{}".into())],
            hooks,
        };
        let set = HookSet::new(Vec::new(), project, vec![], false);
        assert!(!set.any(HookEvent::Stop, None));
        set.set_project_trusted();
        assert!(set.any(HookEvent::Stop, None));
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let err = |t: &str| parse(t, HookSource::User).unwrap_err();
        assert!(err("[").contains("not valid JSON"));
        assert!(err(r#"{"hooks":{"BeforeTool":[]}}"#).contains("`BeforeTool` is not a hook event"));
        assert!(
            err(r#"{"hooks":{"Stop":[{"hooks":[{"type":"prompt","prompt":"x"}]}]}}"#)
                .contains("only `command` hooks")
        );
        assert!(
            err(r#"{"hooks":{"PreToolUse":[{"matcher":"(","hooks":[]}]}}"#)
                .contains("not a valid regex")
        );
        // Claude Code settings without hooks are fine.
        assert!(
            parse(r#"{"permissions":{"allow":[]}}"#, HookSource::Project)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn the_hash_changes_with_any_byte_or_name() {
        let a = content_hash([("a", b"x".as_slice())]);
        assert_ne!(a, content_hash([("a", b"y".as_slice())]));
        assert_ne!(a, content_hash([("b", b"x".as_slice())]));
        assert_ne!(
            content_hash([("a", b"bc".as_slice())]),
            content_hash([("ab", b"c".as_slice())])
        );
    }
}
