//! The pending-request registry's vocabulary: what a turn waits for (an approval or a
//! question), the user's answer to it, and what the store keeps of that answer so a resumed turn
//! does not ask again.
//!
//! Invariants: a pending request binds to (session, request id, tool call id); a recorded
//! decision is read back only as the kind of request it answered.

use tokio::sync::oneshot;

use crate::protocol::Decision;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingKind {
    Approval,
    Question,
}

impl PendingKind {
    /// The name the store keeps (`pending.kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            PendingKind::Approval => "approval",
            PendingKind::Question => "question",
        }
    }
}

/// What the store keeps of an answered request (`pending.decision`), so a turn resumed after a
/// crash uses the answer instead of asking again. A storage shape, like the history's types.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum RecordedDecision {
    #[serde(rename_all = "camelCase")]
    Approval {
        decision: Decision,
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        edited_content: Option<String>,
    },
    Answer {
        answer: String,
    },
}

impl RecordedDecision {
    /// The stored decision of a request of `kind`, if it parses as one of that kind.
    pub fn parse(kind: PendingKind, json: &str) -> Option<RecordedDecision> {
        let decision: RecordedDecision = serde_json::from_str(json).ok()?;
        match (&decision, kind) {
            (RecordedDecision::Approval { .. }, PendingKind::Approval)
            | (RecordedDecision::Answer { .. }, PendingKind::Question) => Some(decision),
            _ => None,
        }
    }
}

/// Whether a `deny` also refuses the same tool (or command prefix) for the rest of the session:
/// ACP's `reject_always`. The native protocol's `deny` is always [`DenyMemory::ThisCallOnly`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenyMemory {
    ThisCallOnly,
    RestOfSession,
}

/// The user's answer to a pending request.
#[derive(Debug)]
pub enum Resolution {
    Approval {
        decision: Decision,
        message: Option<String>,
        edited_content: Option<String>,
        /// Only read with `Decision::Deny`.
        deny_memory: DenyMemory,
    },
    Answer(String),
}

pub struct PendingRequest {
    pub kind: PendingKind,
    pub tool_call_id: String,
    pub turn_id: String,
    /// The event that asked, shown again by `session/load`.
    pub payload: serde_json::Value,
    /// Whether the client was shown the whole proposal; an edit of a cut one is refused.
    pub shown: ProposalShown,
    pub sender: oneshot::Sender<Resolution>,
}

/// How much of a proposed change its approval shows (see `engine::turn::authorize::fit_approval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProposalShown {
    /// Every byte of the arguments and the diff.
    Whole,
    /// Too large for one message: long parts are cut, each with a note.
    Cut,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_decisions_read_what_earlier_versions_stored_and_keep_their_kind() {
        // The shapes tandem stored before the type existed (built with `json!`).
        let approval = r#"{"decision":"alwaysTool","message":null,"editedContent":"new text"}"#;
        assert_eq!(
            RecordedDecision::parse(PendingKind::Approval, approval),
            Some(RecordedDecision::Approval {
                decision: Decision::AlwaysTool,
                message: None,
                edited_content: Some("new text".to_owned()),
            })
        );
        let answer = r#"{"answer":"yes"}"#;
        assert_eq!(
            RecordedDecision::parse(PendingKind::Question, answer),
            Some(RecordedDecision::Answer {
                answer: "yes".to_owned()
            })
        );
        // A row of the other kind, or garbage, is no decision: the request is asked again.
        assert_eq!(RecordedDecision::parse(PendingKind::Approval, answer), None);
        assert_eq!(
            RecordedDecision::parse(PendingKind::Question, approval),
            None
        );
        assert_eq!(RecordedDecision::parse(PendingKind::Approval, "{"), None);
        // What is stored now reads back the same.
        let deny = RecordedDecision::Approval {
            decision: Decision::Deny,
            message: Some("no".to_owned()),
            edited_content: None,
        };
        let json = serde_json::to_string(&deny).unwrap();
        assert_eq!(
            json,
            r#"{"decision":"deny","message":"no","editedContent":null}"#
        );
        assert_eq!(
            RecordedDecision::parse(PendingKind::Approval, &json),
            Some(deny)
        );
    }
}
