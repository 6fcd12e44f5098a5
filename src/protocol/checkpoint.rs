//! Wire types of checkpoints, turn diffs, rewind and fork (DESIGN §7.2): `turn/diff`,
//! `session/checkpoints`, `session/rewind`, `session/fork`, `session/delete` and the `rewound`
//! event's vocabulary.

use serde::{Deserialize, Serialize};

/// What happened to a path during a turn, seen from before the turn to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FileChange {
    Added,
    Modified,
    Deleted,
}

/// What `session/rewind` puts back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RestoreScope {
    /// The workspace files the turns changed; the conversation keeps the turns.
    Files,
    /// The conversation: the model's history ends before the turn; files stay as they are.
    Conversation,
    Both,
}

impl RestoreScope {
    pub fn files(self) -> bool {
        matches!(self, RestoreScope::Files | RestoreScope::Both)
    }

    pub fn conversation(self) -> bool {
        matches!(self, RestoreScope::Conversation | RestoreScope::Both)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RestoreScope::Files => "files",
            RestoreScope::Conversation => "conversation",
            RestoreScope::Both => "both",
        }
    }
}

/// Params of `turn/diff`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnDiffParams {
    pub session_id: String,
    pub turn_id: String,
}

/// One path a turn changed, from before the turn to its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnFileDiff {
    pub path: String,
    pub change: FileChange,
    /// The text before the turn; `null` for a path that did not exist, a folder, or content that
    /// is not text (then `binary` is true) or was not captured (then `notCaptured` says why).
    pub old_text: Option<String>,
    /// The text at the end of the turn, `null` on the same terms.
    pub new_text: Option<String>,
    /// A unified diff of the two texts (empty when either side is not text).
    pub unified: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<bool>,
    /// Why the content before the turn was not captured (over 5 MiB, unreadable, the budget of
    /// one command's checkpoint used up); a rewind cannot put this path back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_captured: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnDiffResult {
    pub files: Vec<TurnFileDiff>,
}

/// A path of a checkpoint and how the turn changed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointFile {
    pub path: String,
    pub change: FileChange,
}

/// One turn of the conversation as a rewind point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    pub turn_id: String,
    /// The text of the turn's prompt.
    pub prompt: String,
    /// When the turn's prompt was committed (milliseconds since the Unix epoch).
    pub created_at: u64,
    /// What the turn changed in the workspace; empty for a turn that changed nothing.
    pub files: Vec<CheckpointFile>,
    /// True once a `files` rewind put this turn's changes back (its conversation is still there).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub files_restored: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointsResult {
    pub checkpoints: Vec<Checkpoint>,
}

/// Params of `session/rewind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindParams {
    pub session_id: String,
    pub turn_id: String,
    pub restore: RestoreScope,
    /// Put back files that changed since the turn by someone else too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

/// A path a rewind left alone, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindConflict {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindResult {
    pub restored: Vec<String>,
    pub conflicts: Vec<RewindConflict>,
    pub conversation_rewound: bool,
}

/// Params of `session/fork`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkParams {
    pub session_id: String,
    /// Fork before this turn; without it, the whole history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkResult {
    pub session_id: String,
}
