//! The wire shapes of the user's customizations (issue 27): slash commands (`commands/list`,
//! a `prompt` that runs one) and hooks (`hooks/list`, `hooks/trust`).

use serde::{Deserialize, Serialize};

/// Where a slash command comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CommandSource {
    Builtin,
    Project,
    User,
}

/// One entry of `commands/list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandEntry {
    /// Without the leading slash.
    pub name: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument_hint: Option<String>,
    pub source: CommandSource,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandsListResult {
    pub commands: Vec<CommandEntry>,
}

/// The command a `prompt` ran (`command` of its result).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptCommand {
    pub name: String,
    /// What a built-in that needs no model answered (Markdown); absent when a turn runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The new session `/fork` made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// Where a hook comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HookSourceName {
    User,
    Project,
}

/// One configured hook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookEntry {
    /// `SessionStart`, `UserPromptSubmit`, `PreToolUse`, `PostToolUse`, `Stop`, `PreCompact` or
    /// `Notification`.
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    pub command: String,
    /// Seconds.
    pub timeout: f64,
    pub source: HookSourceName,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HooksListResult {
    pub hooks: Vec<HookEntry>,
    /// The project's hook files that declare hooks (relative to the first root).
    pub project_files: Vec<String>,
    /// False while those files' content waits for `hooks/trust`.
    pub trusted: bool,
}
