//! Params of the wrong shape, for every method, against the real binary: each is `-32602
//! invalidParams` naming the field (`data.field` and the message) and what type was expected,
//! before any semantic check, and the server keeps serving.

use crate::support::*;
use ::tandem::protocol::method;
use serde_json::{json, Value};

/// One malformed request and the field the error must name.
struct Case {
    method: &'static str,
    params: Value,
    field: &'static str,
    /// A word of the expected type or of the problem that the message must contain.
    says: &'static str,
}

fn case(method: &'static str, params: Value, field: &'static str, says: &'static str) -> Case {
    Case {
        method,
        params,
        field,
        says,
    }
}

/// Methods that take no params at all: nothing to get wrong.
const WITHOUT_PARAMS: &[&str] = &[method::MODELS_LIST, method::SHUTDOWN];

fn cases() -> Vec<Case> {
    // Session ids that do not exist: a semantic check (unknownSession) would answer first if the
    // type check did not run before it.
    let s = "s_missing";
    vec![
        case(
            method::INITIALIZE,
            json!({"protocolVersion": "1"}),
            "protocolVersion",
            "u32",
        ),
        case(method::INITIALIZE, json!({}), "protocolVersion", "missing"),
        case(
            method::INITIALIZE,
            json!({"protocolVersion": 1, "capabilities": {"approvals": "yes"}}),
            "capabilities.approvals",
            "a boolean",
        ),
        case(
            method::INITIALIZE,
            json!({"protocolVersion": 1, "clientInfo": 5}),
            "clientInfo",
            "struct",
        ),
        // The issue's own example: the array is the error, not the unknown mode 5.
        case(
            method::SESSION_NEW,
            json!({"cwd": ["/tmp"], "mode": 5}),
            "cwd",
            "a string",
        ),
        case(
            method::SESSION_NEW,
            json!({"mode": 5, "cwd": "/tmp"}),
            "mode",
            "expected string",
        ),
        // A wrong type goes first even when another field holds an unknown mode name.
        case(
            method::SESSION_NEW,
            json!({"mode": "yolo", "cwd": 7}),
            "cwd",
            "a string",
        ),
        case(
            method::SESSION_NEW,
            json!({"cwd": "/tmp", "model": 7}),
            "model",
            "a string",
        ),
        case(method::SESSION_NEW, json!({}), "cwd", "missing"),
        case(method::SESSION_LIST, json!({"cwd": 5}), "cwd", "a string"),
        case(
            method::SESSION_LOAD,
            json!({"sessionId": 5}),
            "sessionId",
            "a string",
        ),
        case(method::SESSION_LOAD, json!({}), "sessionId", "missing"),
        case(
            method::SESSION_ATTACH,
            json!({"sessionId": s, "fromSeq": "7"}),
            "fromSeq",
            "expected u64",
        ),
        case(
            method::PROMPT,
            json!({"sessionId": s, "content": 5}),
            "content",
            "a string or an array",
        ),
        case(
            method::PROMPT,
            json!({"sessionId": s, "content": [{"type": "text", "text": "hi"}, {"type": "image", "data": "AA=="}]}),
            "content[1].mimeType",
            "missing field",
        ),
        case(
            method::PROMPT,
            json!({"content": "hi"}),
            "sessionId",
            "missing",
        ),
        case(
            method::STOP,
            json!({"sessionId": true}),
            "sessionId",
            "a string",
        ),
        case(
            method::RETRY,
            json!({"sessionId": []}),
            "sessionId",
            "a string",
        ),
        case(
            method::STEER,
            json!({"sessionId": s, "text": 5}),
            "text",
            "a string",
        ),
        case(method::STEER, json!({"sessionId": s}), "text", "missing"),
        case(
            method::APPROVE,
            json!({"sessionId": s, "requestId": "r", "decision": "yes"}),
            "decision",
            "alwaysTool",
        ),
        case(
            method::APPROVE,
            json!({"sessionId": s, "requestId": 5, "decision": "once"}),
            "requestId",
            "a string",
        ),
        case(
            method::APPROVE,
            json!({"sessionId": s, "requestId": "r", "decision": "deny", "message": 5}),
            "message",
            "a string",
        ),
        case(
            method::APPROVE,
            json!({"sessionId": s, "requestId": "r", "decision": "once", "editedContent": {}}),
            "editedContent",
            "a string",
        ),
        case(
            method::APPROVE,
            json!({"sessionId": s, "requestId": "r", "decision": "once", "argumentsDigest": 5}),
            "argumentsDigest",
            "a string",
        ),
        case(
            method::ANSWER,
            json!({"sessionId": s, "requestId": "r", "answer": 5}),
            "answer",
            "a string",
        ),
        case(
            method::SWITCH_MODEL,
            json!({"sessionId": s, "model": 5}),
            "model",
            "a string",
        ),
        case(
            method::SET_MODE,
            json!({"sessionId": s, "mode": 5}),
            "mode",
            "expected string",
        ),
        case(
            method::SET_MODE,
            json!({"sessionId": 5, "mode": "yolo"}),
            "sessionId",
            "a string",
        ),
        case(
            method::SET_NETWORK_ACCESS,
            json!({"sessionId": s, "allow": "yes"}),
            "allow",
            "a boolean",
        ),
        case(
            method::MCP_STATUS,
            json!({"sessionId": 5}),
            "sessionId",
            "a string",
        ),
        case(
            method::MCP_TRUST,
            json!({"sessionId": s, "server": ["a"]}),
            "server",
            "a string",
        ),
        case(
            method::MCP_TRUST,
            json!({"sessionId": s}),
            "server",
            "missing",
        ),
        case(
            method::TURN_DIFF,
            json!({"sessionId": s, "turnId": 5}),
            "turnId",
            "a string",
        ),
        case(
            method::SESSION_CHECKPOINTS,
            json!({"sessionId": true}),
            "sessionId",
            "a string",
        ),
        case(
            method::SESSION_REWIND,
            json!({"sessionId": s, "turnId": "t", "restore": "everything"}),
            "restore",
            "unknown variant",
        ),
        case(
            method::SESSION_REWIND,
            json!({"sessionId": s, "turnId": "t", "restore": "files", "force": "yes"}),
            "force",
            "a boolean",
        ),
        case(
            method::SESSION_FORK,
            json!({"sessionId": s, "turnId": 7}),
            "turnId",
            "a string",
        ),
        case(method::SESSION_DELETE, json!({}), "sessionId", "missing"),
        case(method::COMMANDS_LIST, json!({}), "sessionId", "missing"),
        case(
            method::HOOKS_LIST,
            json!({"sessionId": 1}),
            "sessionId",
            "a string",
        ),
        case(method::HOOKS_TRUST, json!({}), "sessionId", "missing"),
    ]
}

#[test]
fn the_table_covers_every_method_that_takes_params() {
    let covered: Vec<&str> = cases().iter().map(|c| c.method).collect();
    for m in method::ALL {
        assert!(
            covered.contains(m) || WITHOUT_PARAMS.contains(m),
            "no wrong-typed params case for `{m}`: add one to cases()"
        );
    }
}

#[tokio::test]
async fn wrong_typed_params_are_invalid_params_naming_the_field() {
    let mock = MockLlm::start().await;
    let t = Tandem::start(&mock).await;
    for c in cases() {
        let err = t.request_err(c.method, c.params.clone()).await;
        let at = format!("{} {}: {err} {}", c.method, c.params, err.data);
        assert_eq!(err.code, -32602, "{at}");
        assert_eq!(err.kind, "invalidParams", "{at}");
        assert_eq!(err.data["field"], c.field, "{at}");
        assert!(
            err.message.contains(&format!("`{}`", c.field)),
            "the message names the field: {at}"
        );
        assert!(
            err.message.contains(c.says),
            "the message says `{}`: {at}",
            c.says
        );
        assert!(
            err.message.contains(c.method),
            "the message names the method: {at}"
        );
    }
    // An unknown mode name (a string, the right type) stays its own clear error listing the modes.
    for m in [method::SESSION_NEW, method::SET_MODE] {
        let err = t
            .request_err(
                m,
                json!({"sessionId": "s_missing", "cwd": "/tmp", "mode": "yolo"}),
            )
            .await;
        assert_eq!(
            (err.code, err.kind.as_str()),
            (-32000, "invalidMode"),
            "{m}: {err}"
        );
        for mode in ["ask", "autoEdit", "plan", "fullAuto"] {
            assert!(err.message.contains(mode), "{m}: {err}");
        }
    }
    // The server still serves well-formed requests.
    let ws = workspace();
    let session = t
        .request_ok(
            method::SESSION_NEW,
            json!({"cwd": ws.path().to_str().unwrap(), "mode": "plan"}),
        )
        .await;
    assert_eq!(session["mode"], "plan");
}
