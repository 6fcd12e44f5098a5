//! The vendors' rules a request must follow, checked before it is answered: like the real
//! APIs, the mock refuses (HTTP 400, in the vendor's error shape) a request whose tool calls and
//! results are not paired the way that vendor demands, and Gemini tool schemas with keys Gemini
//! rejects.

use serde_json::{json, Value};

use crate::script::Dialect;

/// Why the vendor would refuse this request, if it would.
pub(crate) fn vendor_rejection(
    dialect: Dialect,
    headers: &[(String, String)],
    body: &Value,
) -> Option<String> {
    let has_header = |name: &str| headers.iter().any(|(k, _)| k == name);
    match dialect {
        Dialect::OpenAi => check_openai(body),
        Dialect::Anthropic if !has_header("anthropic-version") => {
            Err("anthropic-version: header is required".to_string())
        }
        Dialect::Anthropic => check_anthropic(body),
        Dialect::Gemini => check_gemini(body),
        // The Responses API pairs calls and outputs by id across turns stored server-side;
        // there is no local rule worth mimicking.
        Dialect::Responses => Ok(()),
    }
    .err()
}

/// OpenAI's rule: an assistant message with `tool_calls` is followed by one `tool` message per
/// call id, and a `tool` message answers a call of the assistant message before it.
fn check_openai(body: &Value) -> Result<(), String> {
    // The harness self-test posts bare bodies; only a conversation has pairing to check.
    let Some(messages) = body["messages"].as_array() else {
        return Ok(());
    };
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        match m["role"].as_str() {
            Some("tool") => {
                let id = m["tool_call_id"].as_str().unwrap_or_default().to_string();
                let Some(pos) = open.iter().position(|o| *o == id) else {
                    return Err(format!("messages[{i}]: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (id {id})"));
                };
                open.remove(pos);
            }
            _ if !open.is_empty() => {
                return Err(format!("messages[{i}]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'; missing {open:?}"));
            }
            Some("assistant") => {
                open = m["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["id"].as_str().map(str::to_owned))
                    .collect();
            }
            _ => {}
        }
    }
    if !open.is_empty() {
        return Err(format!("tool calls without results at the end: {open:?}"));
    }
    Ok(())
}

/// Anthropic's rules: the first message is from the user, roles alternate, content blocks are
/// well formed, and each `tool_use` is answered by a `tool_result` at the start of the very
/// next (user) message, which answers nothing else.
fn check_anthropic(body: &Value) -> Result<(), String> {
    if body["stream"] != json!(true) {
        return Err("stream must be true for this mock".into());
    }
    if !body["max_tokens"].is_u64() {
        return Err("max_tokens: Field required".into());
    }
    let messages = body["messages"]
        .as_array()
        .ok_or("messages: Field required")?;
    if messages.is_empty() {
        return Err("messages: at least one message is required".into());
    }
    let mut previous_role = "";
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        if i == 0 && role != "user" {
            return Err("messages: first message must use the \"user\" role".into());
        }
        if role == previous_role {
            return Err(format!(
                "messages.{i}: roles must alternate between \"user\" and \"assistant\""
            ));
        }
        previous_role = role;
        // A plain string is one text block.
        let blocks = match &m["content"] {
            Value::String(text) if !text.is_empty() => vec![json!({"type": "text", "text": text})],
            Value::Array(blocks) => blocks.clone(),
            _ => {
                return Err(format!(
                    "messages.{i}.content: a non-empty string or a list of blocks"
                ))
            }
        };
        if blocks.is_empty() {
            return Err(format!(
                "messages.{i}: all messages must have non-empty content"
            ));
        }
        let mut answered = Vec::new();
        let mut seen_other = false;
        for (j, b) in blocks.iter().enumerate() {
            match b["type"].as_str() {
                Some("text") if b["text"].as_str().map(str::is_empty).unwrap_or(true) => {
                    return Err(format!(
                        "messages.{i}.content.{j}: text content blocks must be non-empty"
                    ));
                }
                Some("tool_result") => {
                    if role != "user" || seen_other {
                        return Err(format!("messages.{i}.content.{j}: tool_result blocks must come first in a user message"));
                    }
                    answered.push(b["tool_use_id"].as_str().unwrap_or_default().to_string());
                }
                Some("tool_use") if role != "assistant" => {
                    return Err(format!(
                        "messages.{i}.content.{j}: tool_use only in assistant messages"
                    ));
                }
                Some("thinking") if b["signature"].as_str().map(str::is_empty).unwrap_or(true) => {
                    return Err(format!(
                        "messages.{i}.content.{j}.thinking.signature: Field required"
                    ));
                }
                Some(_) => seen_other = true,
                None => return Err(format!("messages.{i}.content.{j}.type: Field required")),
            }
        }
        if answered != open {
            return Err(format!(
                "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after (expected {open:?}, got {answered:?})"
            ));
        }
        open = blocks
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .filter_map(|b| b["id"].as_str().map(str::to_owned))
            .collect();
    }
    if !open.is_empty() {
        return Err(format!(
            "the last message has tool_use without results: {open:?}"
        ));
    }
    let uses_tools = messages.iter().any(|m| {
        m["content"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|b| b["type"] == "tool_use" || b["type"] == "tool_result")
    });
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    if uses_tools && !has_tools {
        return Err(
            "Requests which include `tool_use` or `tool_result` blocks must define tools.".into(),
        );
    }
    Ok(())
}

/// Gemini's rules: roles are `user`/`model`, contents have parts, a content with N function
/// calls is followed by a user content with N function responses (same names, same order), and
/// tool schemas hold only keys of Gemini's `Schema`.
fn check_gemini(body: &Value) -> Result<(), String> {
    let contents = body["contents"].as_array().ok_or("contents is required")?;
    if contents.is_empty() {
        return Err("contents is not specified".into());
    }
    let mut expected: Vec<String> = Vec::new();
    for (i, c) in contents.iter().enumerate() {
        let role = c["role"].as_str().unwrap_or_default();
        if role != "user" && role != "model" {
            return Err(format!(
                "contents[{i}].role: please use a valid role: user, model"
            ));
        }
        let parts = c["parts"]
            .as_array()
            .ok_or(format!("contents[{i}].parts is required"))?;
        if parts.is_empty() {
            return Err(format!(
                "contents[{i}].parts: must contain at least one part"
            ));
        }
        let responses: Vec<String> = parts
            .iter()
            .filter_map(|p| p["functionResponse"]["name"].as_str().map(str::to_owned))
            .collect();
        if responses != expected {
            return Err(format!(
                "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn (contents[{i}]: expected {expected:?}, got {responses:?})"
            ));
        }
        if !responses.is_empty() && role != "user" {
            return Err(format!(
                "contents[{i}]: function responses must be in a user turn"
            ));
        }
        expected = parts
            .iter()
            .filter_map(|p| p["functionCall"]["name"].as_str().map(str::to_owned))
            .collect();
        if !expected.is_empty() && role != "model" {
            return Err(format!(
                "contents[{i}]: function calls must be in a model turn"
            ));
        }
    }
    if !expected.is_empty() {
        return Err(format!(
            "function calls without responses at the end: {expected:?}"
        ));
    }
    fn schema_ok(v: &Value, at: &str) -> Result<(), String> {
        if let Value::Object(map) = v {
            for (k, child) in map {
                if k.starts_with('$') || k == "additionalProperties" {
                    return Err(format!(
                        "Invalid JSON payload received. Unknown name \"{k}\" at '{at}'"
                    ));
                }
                if k == "properties" {
                    if let Value::Object(props) = child {
                        for (name, p) in props {
                            schema_ok(p, &format!("{at}.properties[{name}]"))?;
                        }
                    }
                } else if k == "items" {
                    schema_ok(child, &format!("{at}.items"))?;
                }
            }
        }
        Ok(())
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        for decl in tool["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            schema_ok(
                &decl["parameters"],
                &format!("tools.function_declarations[{}].parameters", decl["name"]),
            )?;
        }
    }
    Ok(())
}
