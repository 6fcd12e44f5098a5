//! The `session/load` reply of the native face: the session's head and the newest page of its
//! display history that fits the frame cap, serialized on the blocking pool without building a
//! `serde_json::Value` tree.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::{framing, rpc};
use crate::protocol::{self as wire, fit, ErrorKind, RpcErrorObject};
use crate::session;

/// Build the `session/load` reply: the session's head and the newest page of its display
/// history that fits the frame cap.
///
/// Messages are numbered by their position in the display history (stored entries first, then
/// the ones computed from the parsed history); the history only grows at its end, so a
/// position names the same message for the session's life. A page runs from the newest
/// message before `cursor` (all of them without one) back as far as fits
/// [`framing::MAX_FRAME_BYTES`] beside the head; when older messages remain, the reply's
/// `cursor` is the position of its first message. One entry larger than
/// [`fit::LOAD_ENTRY_BYTES`] (a 15 MB `editedContent`) has its long strings cut with a note;
/// the history itself keeps every byte.
///
/// It is serialized on the blocking pool: for a long session, building and serializing the
/// display history takes milliseconds that must not stall the runtime. The state lock is held
/// meanwhile (see [`session::Conversation::load_view`]), so the history cannot change
/// underneath; a restored session's turn has not resumed yet, and a live one waits at most
/// that long.
pub(super) async fn load_response(
    shared: Arc<session::Conversation>,
    id: Value,
    cwd: String,
    pending: Vec<Value>,
    cursor: Option<String>,
) -> Vec<u8> {
    let id_for_error = id.clone();
    tokio::task::spawn_blocking(move || shared.load_view(|view| {
        let total = view.entries.len();
        let end = match cursor.as_deref().map(str::parse::<usize>) {
            None => total,
            Some(Ok(position)) if position <= total => position,
            Some(_) => {
                return rpc::error_message(
                    &id,
                    &RpcErrorObject::new(
                        ErrorKind::InvalidParams,
                        format!(
                            "cursor {:?} is not a position in this session's {total} messages; send the `cursor` of an earlier session/load result, or none for the newest page",
                            cursor.unwrap_or_default()
                        ),
                    ),
                )
            }
        };
        let mut head = LoadResultHead {
            session_id: &shared.id,
            cwd: &cwd,
            model: view.model,
            mode: view.mode,
            state: if view.running {
                wire::ConversationState::Running
            } else {
                wire::ConversationState::Idle
            },
            network_access: view.allow_network,
            pending: &pending,
            usage: view
                .usage
                .iter()
                .map(|u| wire::UsageTotal {
                    model: u.model.clone(),
                    input_tokens: u.input_tokens,
                    output_tokens: u.output_tokens,
                    cached_tokens: u.cached_tokens,
                })
                .collect(),
            plan: view.plan,
            cursor: None,
        };
        // Room for the envelope, the id, the cursor and the array's brackets.
        let budget = framing::MAX_FRAME_BYTES
            .saturating_sub(fit::serialized_len(&head) + fit::serialized_len(&id) + 1024);
        let mut page: Vec<std::borrow::Cow<'_, [u8]>> = Vec::new();
        let mut used = 0;
        let mut start = end;
        while start > 0 {
            let position = start - 1;
            let entry = match view.entries[position].to_json() {
                Ok(bytes) => bytes,
                Err(e) => {
                    return rpc::error_message(
                        &id,
                        &RpcErrorObject::new(
                            ErrorKind::Internal,
                            format!("message {position} could not be shown: {e}"),
                        ),
                    )
                }
            };
            let entry = fit_entry(entry);
            if used + entry.len() + 1 > budget && !page.is_empty() {
                break;
            }
            used += entry.len() + 1;
            page.push(entry);
            start = position;
        }
        page.reverse();
        head.cursor = (start > 0).then(|| start.to_string());
        rpc::result_message_with_array(&id, head, "messages", used + 4096, |out| {
            for (index, entry) in page.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(entry);
            }
            Ok(())
        })
    }))
    .await
    .unwrap_or_else(|e| {
        rpc::error_message(
            &id_for_error,
            &RpcErrorObject::new(
                ErrorKind::Internal,
                format!("building the session/load response crashed: {e}"),
            ),
        )
    })
}

/// One display entry under [`fit::LOAD_ENTRY_BYTES`]: its long strings cut with a note.
fn fit_entry(entry: std::borrow::Cow<'_, [u8]>) -> std::borrow::Cow<'_, [u8]> {
    if entry.len() <= fit::LOAD_ENTRY_BYTES {
        return entry;
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(&entry) else {
        return entry;
    };
    fit::fit_value(&mut value, fit::LOAD_ENTRY_BYTES);
    match serde_json::to_vec(&value) {
        Ok(bytes) => std::borrow::Cow::Owned(bytes),
        Err(_) => entry,
    }
}

/// [`wire::SessionLoadResult`] without its `messages`, borrowing from the session; the reply
/// appends `messages` as the last member (see [`rpc::result_message_with_array`]).
/// `tests/it/protocol_doc.rs` decodes what the server writes into the wire type and checks that
/// it encodes back the same.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LoadResultHead<'a> {
    session_id: &'a str,
    cwd: &'a str,
    model: &'a str,
    mode: wire::Mode,
    state: wire::ConversationState,
    network_access: bool,
    pending: &'a [Value],
    usage: Vec<wire::UsageTotal>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    plan: &'a [wire::PlanEntry],
    #[serde(skip_serializing_if = "Option::is_none")]
    cursor: Option<String>,
}
