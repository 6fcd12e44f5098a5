//! The display history: what `session/load` shows of a session's canonical history, and the
//! per-message entries the store keeps so a resume can send them without parsing the history.
//!
//! A message's entry is final once every tool call in it has its result, which is true of
//! everything before the end of a turn. [`settled_displays`] serializes the entries of such a
//! stretch of history, one per message (`""` for a message that shows as no entry of its own).
//! The session writes an entry with its message's row when it is final already (no call open
//! before it, none of its own), and the rest at the end of the turn; `restore` hands them back
//! to the load reply
//! as they are. Entries of the messages after the last settled one are computed from the parsed
//! messages, so an entry is never stale: it is written once, when it can no longer change.

use std::borrow::Cow;
use std::collections::HashSet;

use serde::Serialize;

use crate::engine::history::{Message, StoredJson};
use crate::protocol as wire;
use crate::store::StoredDisplay;

/// [`wire::DisplayMessage`], borrowing from one history message.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DisplayMessageRef<'a> {
    /// Which message of the slice given to [`display_history`] this entry shows.
    #[serde(skip)]
    pub source_index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    documents: Option<Vec<DisplayDocumentRef<'a>>>,
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    images: Option<Vec<DisplayImageRef<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<wire::NoticeKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<&'a str>,
    role: wire::DisplayRole,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<wire::DisplaySource>,
    text: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<DisplayToolCallRef<'a>>>,
    ts: u64,
    turn_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<DisplayUsageRef<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DisplayDocumentRef<'a> {
    data: &'a str,
    mime_type: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DisplayImageRef<'a> {
    data: &'a str,
    mime_type: &'a str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DisplayToolCallRef<'a> {
    arguments: ArgumentsRef<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    diff: Option<&'a serde_json::value::RawValue>,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<wire::ToolStatus>,
    tool_call_id: &'a str,
}

/// A call's arguments: the model's JSON text as it is (validated, not rebuilt as a tree), or
/// a string holding the raw text when it is not valid JSON.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum ArgumentsRef<'a> {
    Json(&'a serde_json::value::RawValue),
    Text(&'a str),
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DisplayUsageRef<'a> {
    input_tokens: u64,
    model: &'a str,
    output_tokens: u64,
}

/// A message's text parts joined, borrowed when there is only one.
fn message_text(message: &crate::engine::history::Message) -> Cow<'_, str> {
    use crate::engine::history::Part;
    // A slash command shows as the user typed it; the model saw its expansion.
    if let Some(typed) = &message.meta.typed {
        return Cow::Borrowed(typed);
    }
    let mut texts = message.parts.iter().filter_map(|p| match p {
        Part::Text { text } => Some(text.as_str()),
        Part::Image { .. } | Part::Document { .. } => None,
    });
    match (texts.next(), texts.next()) {
        (None, _) => Cow::Borrowed(""),
        (Some(only), None) => Cow::Borrowed(only),
        _ => Cow::Owned(message.text()),
    }
}

/// The history as a client shows it: user prompts, assistant messages with reasoning and their
/// tool calls (each with its result, status and diff), and notices. Reminders the engine wrote
/// for the model are not shown.
///
/// It borrows from the history, so a resume of a long session serializes the reply without
/// copying every message once more.
pub fn display_history(history: &[crate::engine::history::Message]) -> Vec<DisplayMessageRef<'_>> {
    use crate::engine::history::{Part, ResultStatus, Role, Source};
    let mut out: Vec<DisplayMessageRef<'_>> = Vec::with_capacity(history.len());
    for (source_index, message) in history.iter().enumerate() {
        let entry = |role| DisplayMessageRef {
            source_index,
            documents: None,
            id: &message.id,
            images: None,
            kind: None,
            reasoning: None,
            role,
            source: None,
            text: message_text(message),
            tool_calls: None,
            ts: message.meta.ts,
            turn_id: message.meta.turn_id.as_deref(),
            usage: None,
        };
        match message.role {
            Role::User if message.meta.source == Source::Reminder => {}
            Role::User => {
                let images: Vec<DisplayImageRef<'_>> = message
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Image { mime_type, data } => {
                            Some(DisplayImageRef { data, mime_type })
                        }
                        _ => None,
                    })
                    .collect();
                let documents: Vec<DisplayDocumentRef<'_>> = message
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Document {
                            mime_type,
                            data,
                            name,
                        } => Some(DisplayDocumentRef {
                            data,
                            mime_type,
                            name: name.as_deref(),
                        }),
                        _ => None,
                    })
                    .collect();
                let mut user = entry(wire::DisplayRole::User);
                user.source = Some(if message.meta.source == Source::Steering {
                    wire::DisplaySource::Steering
                } else {
                    wire::DisplaySource::User
                });
                user.images = (!images.is_empty()).then_some(images);
                user.documents = (!documents.is_empty()).then_some(documents);
                out.push(user);
            }
            Role::Assistant => {
                let calls: Vec<DisplayToolCallRef<'_>> = message
                    .tool_calls
                    .iter()
                    .map(|c| DisplayToolCallRef {
                        arguments: match serde_json::from_str(&c.arguments) {
                            Ok(json) => ArgumentsRef::Json(json),
                            Err(_) => ArgumentsRef::Text(&c.arguments),
                        },
                        diff: None,
                        name: &c.name,
                        result: None,
                        status: None,
                        tool_call_id: &c.id,
                    })
                    .collect();
                let mut assistant = entry(wire::DisplayRole::Assistant);
                assistant.tool_calls = Some(calls);
                assistant.reasoning = message.meta.reasoning.as_deref();
                assistant.usage = message.meta.usage.as_ref().map(|u| DisplayUsageRef {
                    input_tokens: u.input_tokens,
                    model: &u.model,
                    output_tokens: u.output_tokens,
                });
                out.push(assistant);
            }
            Role::Tool => {
                let Some(result) = &message.tool_result else {
                    continue;
                };
                // Results follow their assistant message, so the search from the end stops at
                // the first or second entry it looks at.
                let Some(call) = out
                    .iter_mut()
                    .rev()
                    .filter_map(|entry| entry.tool_calls.as_mut())
                    .flat_map(|calls| calls.iter_mut())
                    .find(|call| call.tool_call_id == result.tool_call_id)
                else {
                    continue;
                };
                call.status = Some(match result.status {
                    ResultStatus::Completed => wire::ToolStatus::Completed,
                    ResultStatus::Failed => wire::ToolStatus::Failed,
                    ResultStatus::Denied => wire::ToolStatus::Denied,
                    ResultStatus::Interrupted => wire::ToolStatus::Interrupted,
                });
                call.result = Some(message_text(message));
                call.diff = message.meta.diff.as_ref().map(StoredJson::as_raw);
            }
            Role::Notice => {
                let mut notice = entry(wire::DisplayRole::Notice);
                notice.kind = message.notice;
                out.push(notice);
            }
        }
    }
    out
}

/// What a face shows as it opens a session: its settings and its whole display history, one
/// view for the native `session/load` (which pages it) and ACP's replay (which converts each
/// entry to `session/update`s). Built under the state lock by
/// [`Conversation::load_view`](crate::engine::conversation::Conversation::load_view), borrowing
/// from the history: nothing is copied until a face serializes or converts an entry.
pub struct LoadView<'a> {
    pub model: &'a str,
    pub mode: crate::protocol::Mode,
    /// Whether a turn is running (a restored session's resumed turn counts).
    pub running: bool,
    pub allow_network: bool,
    /// Token usage per model, in the order the models were first used.
    pub usage: &'a [crate::store::UsageTotals],
    /// The model's current plan (`update_plan`).
    pub plan: &'a [crate::protocol::PlanEntry],
    /// The display history in order: a restored session's stored entries first (its unparsed
    /// messages; those that show as no entry are left out), then the entries computed from
    /// the parsed messages. A position in this list names the same message for the session's
    /// life, since the history only grows at its end.
    pub entries: Vec<LoadEntry<'a>>,
}

/// One entry of a [`LoadView`].
pub enum LoadEntry<'a> {
    /// A stored entry, as the store kept it (a [`wire::DisplayMessage`] as JSON); see
    /// [`usable_entry`].
    Stored(&'a str),
    /// An entry computed from a parsed message.
    Computed(DisplayMessageRef<'a>),
}

impl LoadEntry<'_> {
    /// The entry as JSON bytes: a stored one as it is, a computed one serialized.
    pub fn to_json(&self) -> Result<Cow<'_, [u8]>, serde_json::Error> {
        match self {
            LoadEntry::Stored(text) => Ok(Cow::Borrowed(text.as_bytes())),
            LoadEntry::Computed(entry) => serde_json::to_vec(entry).map(Cow::Owned),
        }
    }

    /// The entry as an owned [`wire::DisplayMessage`], for a face that converts it.
    pub fn to_message(&self) -> Result<wire::DisplayMessage, serde_json::Error> {
        serde_json::from_slice(&self.to_json()?)
    }
}

/// How many messages from the start of `messages` have every tool call answered within them:
/// the longest prefix whose display entries can no longer change.
pub fn settled_len(messages: &[Message]) -> usize {
    let mut open: HashSet<&str> = HashSet::new();
    let mut settled = 0;
    for (index, message) in messages.iter().enumerate() {
        open.extend(message.tool_calls.iter().map(|c| c.id.as_str()));
        if let Some(result) = &message.tool_result {
            open.remove(result.tool_call_id.as_str());
        }
        if open.is_empty() {
            settled = index + 1;
        }
    }
    settled
}

/// The display entries of the settled prefix of `messages` (see [`settled_len`]), one per
/// message, numbered from `first_position`: what the store keeps for a resume. A message that
/// shows as no entry of its own (a tool result, a reminder) gets `""`.
pub fn settled_displays(first_position: u64, messages: &[Message]) -> Vec<StoredDisplay> {
    let settled = &messages[..settled_len(messages)];
    let mut displays: Vec<String> = vec![String::new(); settled.len()];
    for entry in display_history(settled) {
        match serde_json::to_string(&entry) {
            Ok(json) => displays[entry.source_index] = json,
            // Leaving the prefix unsettled from here on keeps loads correct: they parse it.
            Err(e) => {
                tracing::error!(
                    "cannot serialize the display entry of message {}: {e}",
                    entry.id
                );
                displays.truncate(entry.source_index);
                break;
            }
        }
    }
    displays
        .into_iter()
        .zip(settled)
        .enumerate()
        .map(|(index, (display, message))| StoredDisplay {
            position: first_position + index as u64,
            message_id: message.id.clone(),
            display,
        })
        .collect()
}

/// Whether a stored entry can be sent as it is: `""` (no entry) or a JSON object. A cheap
/// check of the ends, which catches a truncated or foreign value without parsing it.
pub fn usable_entry(display: &str) -> bool {
    display.is_empty() || (display.starts_with('{') && display.ends_with('}'))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::engine::history::{Part, ResultStatus, Source, ToolCallRecord};

    fn call(id: &str) -> ToolCallRecord {
        ToolCallRecord {
            id: id.to_owned(),
            name: "read_file".to_owned(),
            arguments: r#"{"path":"a.txt"}"#.to_owned(),
            extras: BTreeMap::new(),
        }
    }

    /// A prompt, an assistant message with two calls, their results (one of them only when
    /// `both_answered`), a reminder and an answer.
    fn turn(both_answered: bool) -> Vec<Message> {
        let (a, b) = (call("c1"), call("c2"));
        let mut messages = vec![
            Message::user(
                vec![Part::Text { text: "go".into() }],
                Source::User,
                Some("t1"),
            ),
            Message::assistant("reading".into(), vec![a.clone(), b.clone()], "t1"),
            Message::tool_result(&a, ResultStatus::Completed, "alpha".into(), "t1"),
        ];
        if both_answered {
            messages.push(Message::tool_result(
                &b,
                ResultStatus::Failed,
                "no such file".into(),
                "t1",
            ));
        }
        messages.push(Message::user(
            vec![Part::Text {
                text: "remember the plan".into(),
            }],
            Source::Reminder,
            Some("t1"),
        ));
        messages.push(Message::assistant("done".into(), Vec::new(), "t1"));
        messages
    }

    #[test]
    fn a_call_without_its_result_ends_the_settled_prefix() {
        assert_eq!(settled_len(&turn(true)), 6);
        // Only the prompt is settled: the assistant message waits for its second result.
        assert_eq!(settled_len(&turn(false)), 1);
        assert_eq!(settled_len(&[]), 0);
    }

    #[test]
    fn stored_entries_are_the_display_history_entry_by_entry() {
        let messages = turn(true);
        let stored = settled_displays(7, &messages);
        assert_eq!(stored.len(), messages.len());
        for (index, entry) in stored.iter().enumerate() {
            assert_eq!(entry.position, 7 + index as u64);
            assert_eq!(entry.message_id, messages[index].id);
        }
        // Results and reminders show as no entry of their own.
        let shown: Vec<&str> = stored
            .iter()
            .map(|s| s.display.as_str())
            .filter(|d| !d.is_empty())
            .collect();
        assert_eq!(shown.len(), 3);
        assert!(stored.iter().all(|s| usable_entry(&s.display)));
        // Joined, they are byte for byte what the reply built from the parsed history holds.
        let computed = serde_json::to_string(&display_history(&messages)).unwrap();
        assert_eq!(format!("[{}]", shown.join(",")), computed);
        // The assistant's entry carries both results.
        let assistant: serde_json::Value = serde_json::from_str(shown[1]).unwrap();
        assert_eq!(assistant["toolCalls"][0]["result"], "alpha");
        assert_eq!(assistant["toolCalls"][1]["status"], "failed");
    }

    #[test]
    fn an_unanswered_call_is_not_stored() {
        let stored = settled_displays(0, &turn(false));
        assert_eq!(stored.len(), 1);
        assert!(stored[0].display.contains("\"go\""));
    }

    #[test]
    fn only_empty_or_object_entries_are_sent_as_they_are() {
        assert!(usable_entry(""));
        assert!(usable_entry("{\"id\":\"m1\"}"));
        assert!(!usable_entry("{\"id\":\"m1\""));
        assert!(!usable_entry("null"));
    }
}
