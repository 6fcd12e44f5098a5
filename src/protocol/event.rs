//! The session events: what the engine announces (its output vocabulary) and what the native
//! face sends as `session/event` notifications. The engine may import this module; it never
//! imports the method params and results of `protocol/mod.rs`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Decision;

/// The params of a `session/event` notification: the envelope fields plus one flattened event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEventParams {
    pub session_id: String,
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    #[serde(flatten)]
    pub event: Event,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolKind {
    Read,
    Search,
    Edit,
    Delete,
    Move,
    Execute,
    Think,
    Fetch,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolStatus {
    Running,
    Completed,
    Failed,
    Denied,
    Interrupted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnEndReason {
    Completed,
    Interrupted,
    Error,
    ContextExceeded,
    MaxIterations,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    Error,
    Interrupted,
    ModelSwitch,
    Compacted,
    Retrying,
    Warning,
    /// The user changed the session's network access (`setNetworkAccess`).
    Network,
    /// `session/rewind` put the conversation back: shown in history where the rewound turns
    /// were (never as an event; the `rewound` event announces it).
    Rewound,
}

/// Where an entry of the model's plan stands (`update_plan`; the same words as ACP's plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Pending,
    InProgress,
    Completed,
}

/// One entry of the model's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanEntry {
    pub content: String,
    pub status: PlanStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Location {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffEntry {
    pub path: String,
    /// `null` for a new file.
    pub old_text: Option<String>,
    pub new_text: String,
    pub unified: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalOption {
    pub decision: Decision,
    pub label: String,
    /// For `alwaysCommand`: the command prefix the rule would allow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_prefix: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnError {
    pub message: String,
    pub retriable: bool,
}

/// Which MCP server and tool a call goes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpToolRef {
    pub server: String,
    pub tool: String,
}

/// Where an MCP server stands (`mcp/status`, `mcpStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum McpServerState {
    Starting,
    Ready,
    Failed,
    Exited,
    Untrusted,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Event {
    /// An MCP server of the session changed status (not part of a turn).
    McpStatus {
        server: String,
        status: McpServerState,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tools: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    TurnStarted {
        model: String,
        /// The prompt that started the turn, as the user typed it (a slash command as typed,
        /// not its expansion; its text parts joined, cut past 64 KiB), so every client attached
        /// to the session can show who asked what. None for a retry, a resumed turn and a
        /// compaction.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt: Option<String>,
    },
    /// A hook ran (issue 27): which event, its command, how it ended (`exitCode` null when it
    /// could not run, timed out or a signal ended it), and whether it blocked what it was for.
    HookRan {
        event: String,
        command: String,
        exit_code: Option<i32>,
        duration_ms: u64,
        blocked: bool,
        /// The tool call a `PreToolUse` or `PostToolUse` hook ran for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
    },
    AssistantDelta {
        text: String,
    },
    ReasoningDelta {
        text: String,
    },
    AssistantMessage {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
    },
    ToolCall {
        tool_call_id: String,
        name: String,
        kind: ToolKind,
        title: String,
        arguments: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        locations: Option<Vec<Location>>,
        /// The MCP server and tool, for a tool of an MCP server.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mcp: Option<McpToolRef>,
    },
    ApprovalRequested {
        request_id: String,
        tool_call_id: String,
        name: String,
        kind: ToolKind,
        title: String,
        reason: String,
        arguments: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<Vec<DiffEntry>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        options: Vec<ApprovalOption>,
        /// A digest of the tool name and canonical arguments; an `approve` that sends it back
        /// is refused if the request now holds anything else.
        arguments_digest: String,
        /// The MCP server and tool, for a tool of an MCP server.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mcp: Option<McpToolRef>,
    },
    ApprovalResolved {
        request_id: String,
        decision: Decision,
    },
    QuestionAsked {
        request_id: String,
        tool_call_id: String,
        question: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        choices: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plan: Option<String>,
    },
    ToolCallUpdate {
        tool_call_id: String,
        status: ToolStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<Vec<DiffEntry>>,
    },
    SteeringApplied {
        text: String,
    },
    Compacting {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    Compacted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    ModelSwitched {
        from: String,
        to: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        warning: Option<String>,
    },
    Notice {
        kind: NoticeKind,
        text: String,
    },
    Usage {
        model: String,
        input_tokens: u64,
        output_tokens: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cached_tokens: Option<u64>,
    },
    TurnEnded {
        reason: TurnEndReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<TurnError>,
    },
    /// Stands for streamed pieces this connection dropped because its client did not read
    /// (the outbound buffer was full): the pieces from `from_seq` to this event's own `seq`.
    /// What they carried reaches the client in the stored events that follow (the assistant
    /// message, the call's final update). Sent only on the connection that dropped them.
    StreamTruncated {
        from_seq: u64,
        /// How many pieces were dropped.
        dropped: u64,
        /// How many bytes they would have taken on the wire.
        dropped_bytes: u64,
    },
    /// The model's plan changed (`update_plan`), or a conversation rewind brought an earlier one
    /// back: the whole current plan (empty when there is none).
    Plan {
        entries: Vec<PlanEntry>,
    },
    /// `session/rewind` put the session back to just before the turn of the envelope's
    /// `turnId`: the files it restored (display paths) and what it restored.
    Rewound {
        restore: super::RestoreScope,
        files: Vec<String>,
    },
}

impl Event {
    /// The wire name of this event's `type`, used by docs checks and readable logs.
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::TurnStarted { .. } => "turnStarted",
            Event::AssistantDelta { .. } => "assistantDelta",
            Event::ReasoningDelta { .. } => "reasoningDelta",
            Event::AssistantMessage { .. } => "assistantMessage",
            Event::McpStatus { .. } => "mcpStatus",
            Event::HookRan { .. } => "hookRan",
            Event::ToolCall { .. } => "toolCall",
            Event::ApprovalRequested { .. } => "approvalRequested",
            Event::ApprovalResolved { .. } => "approvalResolved",
            Event::QuestionAsked { .. } => "questionAsked",
            Event::ToolCallUpdate { .. } => "toolCallUpdate",
            Event::SteeringApplied { .. } => "steeringApplied",
            Event::Compacting { .. } => "compacting",
            Event::Compacted { .. } => "compacted",
            Event::ModelSwitched { .. } => "modelSwitched",
            Event::Notice { .. } => "notice",
            Event::Usage { .. } => "usage",
            Event::TurnEnded { .. } => "turnEnded",
            Event::StreamTruncated { .. } => "streamTruncated",
            Event::Rewound { .. } => "rewound",
            Event::Plan { .. } => "plan",
        }
    }

    /// Whether this is a streamed piece (a delta of text or reasoning, a chunk of a command's
    /// output): not stored, since the final message or update covers it, and the one kind a
    /// face may drop for a client that does not read (see `StreamTruncated`).
    pub fn is_streamed_piece(&self) -> bool {
        matches!(
            self,
            Event::AssistantDelta { .. }
                | Event::ReasoningDelta { .. }
                | Event::ToolCallUpdate {
                    output: Some(_),
                    ..
                }
        )
    }
}

/// Every event type name, for the documentation check.
pub const EVENT_TYPES: &[&str] = &[
    "turnStarted",
    "assistantDelta",
    "reasoningDelta",
    "assistantMessage",
    "toolCall",
    "approvalRequested",
    "approvalResolved",
    "questionAsked",
    "toolCallUpdate",
    "steeringApplied",
    "compacting",
    "compacted",
    "modelSwitched",
    "notice",
    "usage",
    "turnEnded",
    "streamTruncated",
    "mcpStatus",
    "rewound",
    "plan",
    "hookRan",
];
