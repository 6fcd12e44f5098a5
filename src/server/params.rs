//! Decoding a request's params for the native face: every type error is `invalidParams` with
//! the field's path, checked before anything else about the request; an unknown mode name is
//! `invalidMode`; prompt content becomes history parts under the engine's admission rule.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::engine::history::Part;
use crate::protocol::{self as wire, ErrorKind, RpcErrorObject};

/// Decode a method's params. A field of the wrong JSON type, a missing required field or a value
/// outside a closed set is `-32602 invalidParams`, with the field's path in the message and in
/// `data.field`, so a client sees exactly what to fix. This runs before any semantic check (does
/// the session exist, is the model known), so a malformed request never reaches the engine.
pub(super) fn params<T: DeserializeOwned>(method: &str, value: Value) -> Result<T, RpcErrorObject> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner().to_string();
        // serde names a missing field in its message and points the path at the object that
        // lacks it; the field itself is the useful path.
        let field = match inner
            .strip_prefix("missing field `")
            .and_then(|rest| rest.strip_suffix('`'))
        {
            Some(missing) if path == "." => missing.to_owned(),
            Some(missing) => format!("{path}.{missing}"),
            None => path,
        };
        // A missing top-level field is named by serde's own words already.
        let what = if field == "." || !field.contains(['.', '[']) && inner.starts_with("missing") {
            format!("invalid params for `{method}`: {inner}")
        } else {
            format!("invalid params for `{method}`: `{field}`: {inner}")
        };
        let mut error = RpcErrorObject::new(
            ErrorKind::InvalidParams,
            format!("{what}; see the `{method}` section of protocol.md for its params"),
        );
        if field != "." {
            error.data.field = Some(field);
        }
        error
    })
}

/// Decode the params of a method with a `mode` field. The types are checked first (a `mode` that
/// is not a string is `invalidParams` like any other field); a string that names no mode is then
/// `invalidMode`, listing the modes, because that is a question of which modes exist, not of shape.
pub(super) fn params_with_mode<T: DeserializeOwned>(
    method: &str,
    mut raw: Value,
) -> Result<T, RpcErrorObject> {
    let unknown_mode = match raw.get_mut("mode") {
        Some(slot @ Value::String(_))
            if slot
                .as_str()
                .is_some_and(|m| m.parse::<crate::protocol::Mode>().is_err()) =>
        {
            // Stand in a valid mode so the type check covers every other field first.
            Some(std::mem::replace(slot, Value::String("ask".to_owned())))
        }
        _ => None,
    };
    let decoded = params(method, raw)?;
    match unknown_mode {
        Some(mode) => Err(RpcErrorObject::new(
            ErrorKind::InvalidMode,
            format!(
                "unknown mode {mode}; use one of \"ask\", \"autoEdit\", \"plan\", \"fullAuto\""
            ),
        )),
        None => Ok(decoded),
    }
}

pub(super) fn prompt_parts(content: wire::PromptContent) -> Result<Vec<Part>, RpcErrorObject> {
    let parts: Vec<Part> = match content {
        wire::PromptContent::Text(text) => vec![Part::Text { text }],
        wire::PromptContent::Parts(parts) => parts
            .into_iter()
            .map(|p| match p {
                wire::ContentPart::Text { text } => Part::Text { text },
                wire::ContentPart::Image { mime_type, data } => Part::Image { mime_type, data },
                wire::ContentPart::Document {
                    mime_type,
                    data,
                    name,
                } => Part::Document {
                    mime_type,
                    data,
                    name,
                },
            })
            .collect(),
    };
    // Checked here too so a bad prompt is `invalidParams` before the session is looked up.
    match crate::engine::history::prompt_problem(&parts) {
        Some(problem) => Err(RpcErrorObject::new(ErrorKind::InvalidParams, problem)),
        None => Ok(parts),
    }
}
