//! An MCP tool's input schema, made fit for every vendor's function-calling API.
//!
//! The MCP spec asks for an object schema at the root, but servers send `{}`, a root without
//! `type`, or one without `properties`; OpenAI and Anthropic reject a tool whose parameters are
//! not `type: "object"`, and one such tool fails the whole request. [`model_schema`] fixes the
//! root only and keeps the rest exactly as the server gave it: each provider converts what its
//! own API rejects (Gemini's schema subset, in `providers::gemini`).
//!
//! Invariant: the result's root is `{"type": "object", "properties": {...}, ...}`; below the root
//! nothing is changed.

use serde_json::{Map, Value};

/// The schema of `input_schema` with an object root (see the module's invariant).
pub fn model_schema(input_schema: Value) -> Value {
    let mut root = match input_schema {
        Value::Object(map) => map,
        // Not a schema at all: the model may still call the tool with no arguments.
        _ => Map::new(),
    };
    let is_object = match root.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => false,
    };
    if !is_object {
        root.insert("type".into(), Value::String("object".into()));
    } else if let Some(Value::Array(_)) = root.get("type") {
        // `["object", "null"]`: the arguments are always an object.
        root.insert("type".into(), Value::String("object".into()));
    }
    if !matches!(root.get("properties"), Some(Value::Object(_))) {
        root.insert("properties".into(), Value::Object(Map::new()));
    }
    Value::Object(root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_root_becomes_an_object_and_the_rest_stays_as_given() {
        assert_eq!(
            model_schema(json!({})),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            model_schema(json!(true)),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            model_schema(
                json!({"type": ["object", "null"], "properties": {"a": {"type": "string"}}})
            ),
            json!({"type": "object", "properties": {"a": {"type": "string"}}})
        );
        let given = json!({
            "type": "object",
            "$defs": {"P": {"type": "string", "format": "uri"}},
            "properties": {"p": {"$ref": "#/$defs/P"}, "n": {"oneOf": [{"type": "integer"}, {"type": "null"}]}},
            "required": ["p"],
            "additionalProperties": false
        });
        assert_eq!(model_schema(given.clone()), given);
    }
}
