//! The canonical history: every message of a session with the sidecars the model must not see.
//!
//! The canonical history is append-only from the engine's point of view and is never rewritten for
//! a provider (invariant 1). Providers get a projection built by `engine::outbound`, the only
//! function that turns history into provider input. These types derive serde so the store can
//! persist them unchanged; they are a storage shape, not a wire shape.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::protocol::NoticeKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    Tool,
    /// Shown to the user and persisted, never sent to a model.
    Notice,
}

/// Who put a message into the history. A sidecar: never sent to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Typed by the user as a prompt.
    User,
    /// Typed by the user while a turn was running and injected at a safe point.
    Steering,
    /// Written by the engine for the model (repeated-call warnings and similar reminders).
    Reminder,
    /// Produced by the model.
    Model,
    /// Produced by a tool.
    Tool,
    /// Written by the engine for the user (notices).
    Engine,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    Image {
        mime_type: String,
        data: String,
    },
    /// A document the user attached (today: PDF), base64 in `data`; `name` is its file name.
    Document {
        mime_type: String,
        data: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
}

/// One tool call as the model made it. `arguments` is the raw JSON text the model produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    pub id: String,
    pub name: String,
    pub arguments: String,
    /// Provider-private extras, keys start with `_<provider kind>.`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extras: BTreeMap<String, Value>,
}

/// How a tool result came about; the model sees only the text, the user sees the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultStatus {
    Completed,
    Failed,
    Denied,
    Interrupted,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResultRecord {
    pub tool_call_id: String,
    pub name: String,
    pub status: ResultStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageRecord {
    /// The model id that produced this usage, so totals stay right across switches.
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

/// What the engine itself records in a notice's `meta.display`, typed. Stored as
/// `{"reason": "providerError", "retriable": true}`, the shape earlier versions wrote by hand,
/// so stored sessions read the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum DisplayMark {
    ProviderError {
        retriable: bool,
    },
    /// The provider's content filter stopped the model's answer (ACP's `refusal` stop reason).
    Refusal,
}

/// Sidecars: data about a message that no model ever sees.
///
/// The ones most messages lack are boxed: a session keeps every message in memory, and an
/// inline `Value` or record costs its full size in each of them (a message was 496 bytes
/// before its text; 232 with these boxed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageMeta {
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// User-only display metadata (for example the editor selection a prompt came with).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<Box<Value>>,
    /// The model's reasoning text, shown to the user, not sent back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<UsageRecord>>,
    /// Provider-private extras (keys start with `_`), reattached only by the provider that owns them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extras: BTreeMap<String, Value>,
    /// The tool call diff shown to the user, kept for display on reload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<StoredJson>,
    /// On a user message that a slash command wrote: the command as the user typed it, which
    /// the display shows instead of the expanded text the model sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typed: Option<String>,
    /// On a `compacted` notice: what the outbound view replaces and with what.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Box<CompactionRecord>>,
}

/// A compaction: messages before `boundary` are shown to models as `summary`. The canonical
/// history keeps them; only the outbound view changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionRecord {
    /// The id of the first message kept verbatim.
    pub boundary: String,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    pub role: Role,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_result: Option<Box<ToolResultRecord>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<NoticeKind>,
    pub meta: MessageMeta,
}

/// JSON kept as the text it was written as, for a value only ever shown, never read by the
/// engine (a tool call's diff): it costs its bytes, where a `Value` tree of maps cost about
/// three times as much (an edit's diff of 600 bytes took 1.7 KB, about 170 bytes per message
/// of a long session's history).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StoredJson(Box<serde_json::value::RawValue>);

impl StoredJson {
    /// `None` only for a value serde cannot write as JSON (a map with non-string keys).
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Option<StoredJson> {
        serde_json::value::to_raw_value(value).ok().map(StoredJson)
    }

    pub fn as_raw(&self) -> &serde_json::value::RawValue {
        &self.0
    }
}

impl PartialEq for StoredJson {
    fn eq(&self, other: &StoredJson) -> bool {
        self.0.get() == other.0.get()
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

impl MessageMeta {
    pub fn new(source: Source, turn_id: Option<&str>) -> Self {
        MessageMeta {
            ts: now_ms(),
            source,
            turn_id: turn_id.map(str::to_owned),
            display: None,
            reasoning: None,
            usage: None,
            extras: BTreeMap::new(),
            diff: None,
            typed: None,
            compaction: None,
        }
    }
}

impl Message {
    pub fn user(parts: Vec<Part>, source: Source, turn_id: Option<&str>) -> Self {
        Message {
            id: new_id("m"),
            role: Role::User,
            parts,
            tool_calls: Vec::new(),
            tool_result: None,
            notice: None,
            meta: MessageMeta::new(source, turn_id),
        }
    }

    pub fn assistant(text: String, tool_calls: Vec<ToolCallRecord>, turn_id: &str) -> Self {
        let parts = if text.is_empty() {
            Vec::new()
        } else {
            vec![Part::Text { text }]
        };
        Message {
            id: new_id("m"),
            role: Role::Assistant,
            parts,
            tool_calls,
            tool_result: None,
            notice: None,
            meta: MessageMeta::new(Source::Model, Some(turn_id)),
        }
    }

    pub fn tool_result(
        call: &ToolCallRecord,
        status: ResultStatus,
        text: String,
        turn_id: &str,
    ) -> Self {
        Message {
            id: new_id("m"),
            role: Role::Tool,
            parts: vec![Part::Text { text }],
            tool_calls: Vec::new(),
            tool_result: Some(Box::new(ToolResultRecord {
                tool_call_id: call.id.clone(),
                name: call.name.clone(),
                status,
            })),
            notice: None,
            meta: MessageMeta::new(Source::Tool, Some(turn_id)),
        }
    }

    pub fn notice(kind: NoticeKind, text: String, turn_id: Option<&str>) -> Self {
        Message {
            id: new_id("m"),
            role: Role::Notice,
            parts: vec![Part::Text { text }],
            tool_calls: Vec::new(),
            tool_result: None,
            notice: Some(kind),
            meta: MessageMeta::new(Source::Engine, turn_id),
        }
    }

    /// The error notice of a turn that a provider error ended: `retry` is offered only after one.
    pub fn provider_error_notice(text: String, retriable: bool, turn_id: Option<&str>) -> Self {
        let mut notice = Message::notice(NoticeKind::Error, text, turn_id);
        notice.meta.display = serde_json::to_value(DisplayMark::ProviderError { retriable })
            .ok()
            .map(Box::new);
        notice
    }

    /// Whether this is the error notice of a turn a provider error ended, and if so whether the
    /// error was retriable.
    pub fn provider_error(&self) -> Option<bool> {
        if self.notice != Some(NoticeKind::Error) {
            return None;
        }
        match self.mark()? {
            DisplayMark::ProviderError { retriable } => Some(retriable),
            DisplayMark::Refusal => None,
        }
    }

    /// The warning notice that the provider's content filter stopped the model's answer.
    pub fn refusal_notice(text: String, turn_id: Option<&str>) -> Self {
        let mut notice = Message::notice(NoticeKind::Warning, text, turn_id);
        notice.meta.display = serde_json::to_value(DisplayMark::Refusal)
            .ok()
            .map(Box::new);
        notice
    }

    /// Whether this notice says the provider's content filter stopped an answer.
    pub fn is_refusal(&self) -> bool {
        self.notice == Some(NoticeKind::Warning) && self.mark() == Some(DisplayMark::Refusal)
    }

    /// The engine's typed mark in `meta.display`, if it holds one.
    fn mark(&self) -> Option<DisplayMark> {
        DisplayMark::deserialize(self.meta.display.as_deref()?).ok()
    }

    /// All text parts joined, for display and for providers that take plain strings.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if let Part::Text { text } = part {
                out.push_str(text);
            }
        }
        out
    }

    pub fn image_count(&self) -> usize {
        self.parts
            .iter()
            .filter(|p| matches!(p, Part::Image { .. }))
            .count()
    }

    pub fn document_count(&self) -> usize {
        self.parts
            .iter()
            .filter(|p| matches!(p, Part::Document { .. }))
            .count()
    }
}

/// Tool call ids in `history` that have no tool result yet, in call order.
///
/// The engine keeps this empty at every turn end (invariant 2); tests and recovery use it to check.
pub fn orphan_tool_calls(history: &[Message]) -> Vec<String> {
    let mut open: Vec<String> = Vec::new();
    for message in history {
        for call in &message.tool_calls {
            open.push(call.id.clone());
        }
        if let Some(result) = &message.tool_result {
            open.retain(|id| id != &result.tool_call_id);
        }
    }
    open
}

/// Why a prompt cannot start a turn, if it cannot: no part says anything (only whitespace text,
/// no parts, or images and documents without data), or a document that is not a PDF. The one
/// admission rule of every face; the session actor checks it again before it admits a turn.
pub fn prompt_problem(parts: &[Part]) -> Option<String> {
    for part in parts {
        if let Part::Document { mime_type, .. } = part {
            if mime_type != "application/pdf" {
                return Some(format!("document parts must be PDFs (mimeType \"application/pdf\"), got \"{mime_type}\"; send other files as text"));
            }
        }
    }
    let empty = parts.iter().all(|p| match p {
        Part::Text { text } => text.trim().is_empty(),
        Part::Image { data, .. } | Part::Document { data, .. } => data.is_empty(),
    });
    empty.then(|| "prompt content is empty; send some text, an image or a document".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_error_notice_keeps_the_stored_shape_and_is_read_back_typed() {
        let notice = Message::provider_error_notice("rate limited".to_owned(), true, Some("t1"));
        assert_eq!(
            notice.meta.display.as_deref(),
            Some(&serde_json::json!({"reason": "providerError", "retriable": true}))
        );
        assert_eq!(notice.provider_error(), Some(true));
        // A notice stored by an earlier version (the JSON written by hand) reads the same.
        let stored: Message = serde_json::from_value(serde_json::json!({
            "id": "m1", "role": "notice", "parts": [{"type": "text", "text": "boom"}],
            "notice": "error",
            "meta": {"ts": 1, "source": "engine", "display": {"reason": "providerError", "retriable": false}}
        }))
        .unwrap();
        assert_eq!(stored.provider_error(), Some(false));
        // Anything else is no provider error: another display, or another notice kind.
        let mut other = Message::notice(NoticeKind::Error, "x".to_owned(), None);
        other.meta.display = Some(Box::new(serde_json::json!({"selection": "a"})));
        assert_eq!(other.provider_error(), None);
        let mut warning = Message::provider_error_notice("y".to_owned(), true, None);
        warning.notice = Some(NoticeKind::Warning);
        assert_eq!(warning.provider_error(), None);
        assert!(!warning.is_refusal());
        // The refusal mark: stored as {"reason": "refusal"}, read only on a warning notice.
        let refusal = Message::refusal_notice("filtered".to_owned(), Some("t1"));
        assert_eq!(
            refusal.meta.display.as_deref(),
            Some(&serde_json::json!({"reason": "refusal"}))
        );
        assert!(refusal.is_refusal());
        assert_eq!(refusal.provider_error(), None);
        let plain = Message::notice(NoticeKind::Warning, "filtered".to_owned(), Some("t1"));
        assert!(!plain.is_refusal(), "the words alone are no refusal");
    }
}
