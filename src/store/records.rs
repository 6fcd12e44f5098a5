//! The records the store reads and writes: a session's row, its pending requests, rules, usage
//! totals, message rows with their display entries, stored events, and what a load returns.
//! Plain data in the store's own shapes; the engine's types reach the store only as JSON.

use super::Durability;

#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub id: String,
    pub cwd: String,
    pub model: String,
    pub mode: String,
    pub title: Option<String>,
    /// Milliseconds since the Unix epoch, like every timestamp here.
    pub created_at: u64,
    pub updated_at: u64,
    /// Whether the user allowed sandboxed commands to use the network.
    pub allow_network: bool,
}

/// One row of the approvals/questions inbox, keyed by (session, tool call id).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRecord {
    pub session_id: String,
    pub request_id: String,
    pub tool_call_id: String,
    /// `"approval"` or `"question"`.
    pub kind: String,
    pub turn_id: String,
    /// JSON of the event that asked.
    pub payload: String,
    /// JSON of the answer once resolved.
    pub decision: Option<String>,
    pub created_at: u64,
}

/// A remembered permission rule.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleRecord {
    /// The name of a `permissions::RuleKind` (`tool`, `commandPrefix`, `denyTool`,
    /// `denyCommandPrefix`); the store does not interpret it.
    pub kind: String,
    pub value: String,
}

/// Token usage of one session with one model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UsageTotals {
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
}

/// Everything resume needs, read in one go.
#[derive(Debug, Clone)]
pub struct LoadedSession {
    pub record: SessionRecord,
    /// The model's current plan as JSON (`update_plan`), if it has one.
    pub plan: Option<String>,
    /// Message JSON in append order.
    pub messages: Vec<String>,
    /// Each message's stored display entry, index for index with `messages` (see
    /// [`Store::set_displays`]): `None` where none was stored.
    pub displays: Vec<Option<String>>,
    /// The highest persisted event seq, 0 if none.
    pub last_seq: u64,
    /// Every inbox row of the session, resolved or not, in creation order.
    pub pending: Vec<PendingRecord>,
    /// In the order they were first added.
    pub rules: Vec<RuleRecord>,
    /// Tool call ids marked started whose `tool_finished` was never recorded, in start order.
    pub started_tools: Vec<String>,
    /// Per model, in the order each model was first used.
    pub usage: Vec<UsageTotals>,
}

/// A message row to append, for [`Store::append_message_row`].
#[derive(Debug, Clone, PartialEq)]
pub struct MessageRow {
    pub message_id: String,
    pub turn_id: Option<String>,
    /// `"user"`, `"assistant"`, `"tool"` or `"notice"`.
    pub role: String,
    /// The serde form of the message.
    pub json: String,
    /// The message's display entry, written with the row: only for an entry that can no longer
    /// change (every earlier message settled and stored, no tool call of its own, not a tool
    /// result), so the turn's end has nothing left to write for it. `None` leaves the column
    /// `NULL` until [`Store::set_displays`] fills it.
    pub display: Option<String>,
    pub durability: Durability,
}

/// One message's display entry, for [`Store::set_displays`].
#[derive(Debug, Clone, PartialEq)]
pub struct StoredDisplay {
    /// The message's place in the session's history, counting from 0.
    pub position: u64,
    /// Checked against the row at `position`, so an entry never lands on another message.
    pub message_id: String,
    /// The entry's JSON, or `""` for a message that shows as no entry of its own.
    pub display: String,
}

/// A persisted event, for replay to a client that reconnects.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub seq: u64,
    pub turn_id: Option<String>,
    pub event_type: String,
    pub json: String,
}
