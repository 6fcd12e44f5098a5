//! The JSON-RPC 2.0 envelope: classify an incoming frame and build outgoing messages.
//!
//! This is deliberately small instead of jsonrpsee's `RpcModule` (see ARCHITECTURE.md): the
//! contract needs every state-changing message applied in arrival order, answers in the framing
//! the client chose, and a precise error for each kind of malformed input.

use serde::Serialize;
use serde_json::Value;

use crate::protocol::{ErrorKind, Event, RpcErrorObject};

#[derive(Debug, PartialEq)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// A response from the client; the native protocol sends no server requests, so it is ignored.
    Response,
    /// Not a valid message; answer with this error (id is null when it could not be read).
    Invalid {
        id: Value,
        error: RpcErrorObject,
    },
}

fn invalid(id: Value, kind: ErrorKind, message: impl Into<String>) -> Incoming {
    Incoming::Invalid {
        id,
        error: RpcErrorObject::new(kind, message),
    }
}

pub fn decode(bytes: &[u8]) -> Incoming {
    let value: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            let what = if std::str::from_utf8(bytes).is_err() {
                "the frame is not valid UTF-8".to_owned()
            } else {
                format!("the frame is not valid JSON ({e})")
            };
            return invalid(
                Value::Null,
                ErrorKind::ParseError,
                format!("parse error: {what}; send one JSON-RPC 2.0 object per frame"),
            );
        }
    };
    let Value::Object(mut object) = value else {
        let message = if value.is_array() {
            "batch requests are not supported; send each request as its own frame"
        } else {
            "a JSON-RPC message must be a JSON object"
        };
        return invalid(Value::Null, ErrorKind::InvalidRequest, message);
    };
    let id = match object.remove("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(id),
        Some(_) => {
            return invalid(
                Value::Null,
                ErrorKind::InvalidRequest,
                "`id` must be a string, a number or null",
            )
        }
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(
            id.unwrap_or(Value::Null),
            ErrorKind::InvalidRequest,
            "`jsonrpc` must be \"2.0\"",
        );
    }
    let method = match object.remove("method") {
        Some(Value::String(m)) => m,
        None if object.contains_key("result") || object.contains_key("error") => {
            return Incoming::Response
        }
        None => {
            return invalid(
                id.unwrap_or(Value::Null),
                ErrorKind::InvalidRequest,
                "the message has no `method`",
            )
        }
        Some(_) => {
            return invalid(
                id.unwrap_or(Value::Null),
                ErrorKind::InvalidRequest,
                "`method` must be a string",
            )
        }
    };
    let params = match object.remove("params") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(p @ Value::Object(_)) => p,
        Some(Value::Array(_)) => {
            return invalid(
                id.unwrap_or(Value::Null),
                ErrorKind::InvalidParams,
                "`params` must be an object with named fields, not an array; see protocol.md",
            )
        }
        Some(_) => {
            return invalid(
                id.unwrap_or(Value::Null),
                ErrorKind::InvalidRequest,
                "`params` must be an object",
            )
        }
    };
    match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    }
}

#[derive(Serialize)]
struct ResultMessage<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: T,
}

#[derive(Serialize)]
struct ErrorMessage<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    error: &'a RpcErrorObject,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventParamsRef<'a> {
    session_id: &'a str,
    seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    turn_id: Option<&'a str>,
    #[serde(flatten)]
    event: &'a Event,
}

#[derive(Serialize)]
struct EventMessage<'a> {
    jsonrpc: &'static str,
    method: &'static str,
    params: EventParamsRef<'a>,
}

pub fn result_message<T: Serialize>(id: &Value, result: T) -> Vec<u8> {
    serde_json::to_vec(&ResultMessage {
        jsonrpc: "2.0",
        id,
        result,
    })
    .unwrap_or_else(|e| error_message(id, &RpcErrorObject::new(ErrorKind::Internal, e.to_string())))
}

/// A response whose `result` is `result`'s object plus one more member, an array that
/// `write_items` writes as raw JSON (its members joined by commas, without the brackets).
/// `session/load` uses it to send display entries stored as JSON text without parsing them
/// again. `capacity` presizes the buffer, so a reply of megabytes is not copied as it grows.
pub fn result_message_with_array<T: Serialize>(
    id: &Value,
    result: T,
    member: &str,
    capacity: usize,
    write_items: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
) -> Vec<u8> {
    let build = || -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(capacity);
        serde_json::to_writer(
            &mut out,
            &ResultMessage {
                jsonrpc: "2.0",
                id,
                result,
            },
        )
        .map_err(|e| e.to_string())?;
        // The result object and the envelope both close here; reopen the result object. An
        // empty object would need no comma, but `result` always has members.
        if !out.ends_with(b"}}") || out.ends_with(b"{}}") {
            return Err("the result is not an object with members".to_owned());
        }
        out.truncate(out.len() - 2);
        out.push(b',');
        serde_json::to_writer(&mut out, member).map_err(|e| e.to_string())?;
        out.extend_from_slice(b":[");
        write_items(&mut out).map_err(|e| e.to_string())?;
        out.extend_from_slice(b"]}}");
        Ok(out)
    };
    build().unwrap_or_else(|e| error_message(id, &RpcErrorObject::new(ErrorKind::Internal, e)))
}

pub fn error_message(id: &Value, error: &RpcErrorObject) -> Vec<u8> {
    serde_json::to_vec(&ErrorMessage {
        jsonrpc: "2.0",
        id,
        error,
    })
    .unwrap_or_default()
}

/// One `session/event` notification, serialized without copying the event.
pub fn event_message(session_id: &str, seq: u64, turn_id: Option<&str>, event: &Event) -> Vec<u8> {
    serde_json::to_vec(&EventMessage {
        jsonrpc: "2.0",
        method: crate::protocol::method::SESSION_EVENT,
        params: EventParamsRef {
            session_id,
            seq,
            turn_id,
            event,
        },
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind(incoming: Incoming) -> (Value, ErrorKind) {
        match incoming {
            Incoming::Invalid { id, error } => (id, error.data.kind),
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn classifies() {
        assert_eq!(kind(decode(b"{")), (Value::Null, ErrorKind::ParseError));
        assert_eq!(
            kind(decode(b"\xff\xfe")),
            (Value::Null, ErrorKind::ParseError)
        );
        assert_eq!(
            kind(decode(b"[1]")),
            (Value::Null, ErrorKind::InvalidRequest)
        );
        assert_eq!(kind(decode(b"3")), (Value::Null, ErrorKind::InvalidRequest));
        assert_eq!(
            kind(decode(br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#)),
            (Value::Null, ErrorKind::InvalidRequest)
        );
        assert_eq!(
            kind(decode(br#"{"jsonrpc":"1.0","id":4,"method":"x"}"#)),
            (json!(4), ErrorKind::InvalidRequest)
        );
        assert_eq!(
            kind(decode(br#"{"jsonrpc":"2.0","id":4,"method":7}"#)),
            (json!(4), ErrorKind::InvalidRequest)
        );
        assert_eq!(
            kind(decode(
                br#"{"jsonrpc":"2.0","id":4,"method":"x","params":3}"#
            )),
            (json!(4), ErrorKind::InvalidRequest)
        );
        assert_eq!(
            decode(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Incoming::Response
        );
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","method":"stop","params":{}}"#),
            Incoming::Notification { .. }
        ));
    }

    #[test]
    fn deep_nesting_is_a_parse_error_not_a_crash() {
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(kind(decode(deep.as_bytes())).1, ErrorKind::ParseError);
    }

    #[test]
    fn event_message_shape() {
        let bytes = event_message(
            "s1",
            3,
            Some("t1"),
            &Event::AssistantDelta { text: "hi".into() },
        );
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc":"2.0","method":"session/event","params":{"sessionId":"s1","seq":3,"turnId":"t1","type":"assistantDelta","text":"hi"}})
        );
    }
}
