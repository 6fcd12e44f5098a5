//! Anthropic requests: each projected message as content blocks (serialized once, for the
//! engine's outbound cache) and the body that merges them into alternating roles after its head.

use serde_json::{json, Map, Value};

use super::{FALLBACK_MAX_TOKENS, THINKING_EXTRA};
use crate::providers::wire::{self, Body, EncodedItem, EncodedMessage, ItemKind, MessageForm};
use crate::providers::{OutboundMessage, OutboundPart, ProviderRequest};

/// One projected message as Anthropic content blocks, in the role it is sent under.
pub fn encode_message(message: &OutboundMessage, form: MessageForm) -> EncodedMessage {
    // Anthropic refuses `tool_use`/`tool_result` blocks in a request that defines no tools (the
    // summarizing request of a compaction); there the calls are written out as text instead.
    let as_text = form.calls_as_text;
    let (role, items) = match message {
        OutboundMessage::User { parts } => ("user", user_blocks(parts)),
        OutboundMessage::Assistant {
            text,
            tool_calls,
            extras,
        } => {
            let mut items = Vec::new();
            // Thinking blocks only make sense next to the calls they led to.
            if let (Some(Value::Array(thinking)), false) = (extras.get(THINKING_EXTRA), as_text) {
                items.extend(thinking.iter().map(|b| wire::item(ItemKind::Thinking, b)));
            }
            if !text.is_empty() {
                items.push(wire::item(
                    ItemKind::Text,
                    &json!({"type": "text", "text": text}),
                ));
            }
            for call in tool_calls {
                items.push(if as_text {
                    wire::item(
                        ItemKind::Text,
                        &json!({"type": "text", "text": crate::providers::call_as_text(call)}),
                    )
                } else {
                    wire::item(
                        ItemKind::Call { signed: false },
                        &json!({
                            "type": "tool_use",
                            "id": call.id,
                            "name": call.name,
                            "input": tool_input(&call.arguments),
                        }),
                    )
                });
            }
            ("assistant", items)
        }
        OutboundMessage::Tool { name, content, .. } if as_text => (
            "user",
            vec![wire::item(
                ItemKind::Text,
                &json!({"type": "text", "text": crate::providers::result_as_text(name, content)}),
            )],
        ),
        OutboundMessage::Tool {
            tool_call_id,
            content,
            ..
        } => (
            "user",
            vec![wire::item(
                ItemKind::Result,
                &json!({
                    "type": "tool_result",
                    "tool_use_id": tool_call_id,
                    "content": if content.is_empty() { "(no output)" } else { content.as_str() },
                }),
            )],
        ),
    };
    EncodedMessage { role, items }
}

/// The body of one streamed Messages request: settings, tools and system prompt first, the
/// messages last (see [`Body::with_head`]).
pub fn request_bytes(request: &ProviderRequest) -> Body {
    let all = request.encoded_messages(encode_message);
    let mut messages: Vec<(&'static str, Vec<EncodedItem>)> = Vec::new();
    for message in &all {
        if message.items.is_empty() {
            // An empty assistant message (a stop before any text) has nothing to say, and the
            // API refuses empty content.
            continue;
        }
        match messages.last_mut() {
            // Roles must alternate: consecutive tool results, and a steering message after
            // them, share one user message (tool results first, as the API requires).
            Some((last_role, last_items)) if *last_role == message.role => {
                last_items.extend(message.items.iter().cloned())
            }
            _ => messages.push((message.role, message.items.clone())),
        }
    }
    if messages.first().map(|(role, _)| *role) == Some("assistant") {
        messages.insert(
            0,
            (
                "user",
                vec![wire::item(
                    ItemKind::Text,
                    &json!({"type": "text", "text": "(the conversation continues)"}),
                )],
            ),
        );
    }
    // Prompt caching: one breakpoint on the last block of the last message caches everything
    // up to it (tools, system, history); the next request reads the prefix back. The marker is
    // not part of what the cache compares, so it may move from block to block.
    if let Some((_, items)) = messages.last_mut() {
        if let Some(last) = items
            .iter_mut()
            .rev()
            .find(|i| i.kind != ItemKind::Thinking)
        {
            if let Ok(Value::Object(mut block)) = serde_json::from_str::<Value>(&last.json) {
                block.insert("cache_control".into(), json!({"type": "ephemeral"}));
                *last = wire::item(last.kind, &Value::Object(block));
            }
        }
    }

    let thinking_ok = thinking_allowed(&messages);
    let max_tokens = request.max_output_tokens.unwrap_or(FALLBACK_MAX_TOKENS);
    let mut head = Map::new();
    head.insert("model".into(), json!(request.model));
    head.insert("max_tokens".into(), json!(max_tokens));
    head.insert("stream".into(), json!(true));
    if let (true, Some(budget), true) = (request.reasoning, request.thinking_budget, thinking_ok) {
        // The budget must stay below max_tokens; the config check keeps it there, this keeps a
        // hand-built request valid too.
        let budget = budget.min(max_tokens.saturating_sub(1)).max(1_024);
        head.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        head.insert("tools".into(), Value::Array(tools));
        if !request.parallel_tool_calls {
            head.insert(
                "tool_choice".into(),
                json!({"type": "auto", "disable_parallel_tool_use": true}),
            );
        }
    }
    if !request.system.is_empty() {
        head.insert(
            "system".into(),
            json!([{"type": "text", "text": request.system}]),
        );
    }
    let mut body = Body::with_head(head);
    body.field("messages");
    body.push_static("[");
    for (i, (role, items)) in messages.iter().enumerate() {
        if i > 0 {
            body.push_static(",");
        }
        body.push_static("{\"role\":\"");
        body.push_static(role);
        body.push_static("\",\"content\":[");
        body.push_items(items.iter().map(|i| &i.json));
        body.push_static("]}");
    }
    body.push_static("]");
    body.close();
    body
}

/// The body of one request as JSON (what tests inspect).
pub fn request_body(request: &ProviderRequest) -> Value {
    request_bytes(request).to_json()
}

/// With thinking on, an assistant message that is still in its tool loop (the request ends with
/// its tool results) must start with a thinking block. One written by another vendor has none,
/// so such a request goes without thinking until the model answers again.
fn thinking_allowed(messages: &[(&'static str, Vec<EncodedItem>)]) -> bool {
    let Some((_, items)) = messages.iter().rev().find(|(role, _)| *role == "assistant") else {
        return true;
    };
    let in_tool_loop = items
        .iter()
        .any(|i| matches!(i.kind, ItemKind::Call { .. }));
    let starts_with_thinking = items.first().map(|i| i.kind) == Some(ItemKind::Thinking);
    !in_tool_loop || starts_with_thinking
}

fn user_blocks(parts: &[OutboundPart]) -> Vec<EncodedItem> {
    parts
        .iter()
        .filter_map(|part| match part {
            // The API refuses empty text blocks.
            OutboundPart::Text(text) if text.is_empty() => None,
            OutboundPart::Text(text) => Some(wire::item(
                ItemKind::Text,
                &json!({"type": "text", "text": text}),
            )),
            OutboundPart::Image { mime_type, data } => Some(wire::item(
                ItemKind::Media,
                &json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": mime_type, "data": data},
                }),
            )),
            OutboundPart::Document {
                mime_type,
                data,
                name,
            } => {
                let mut block = json!({
                    "type": "document",
                    "source": {"type": "base64", "media_type": mime_type, "data": data},
                });
                if let Some(name) = name {
                    block["title"] = json!(name);
                }
                Some(wire::item(ItemKind::Media, &block))
            }
        })
        .collect()
}

/// A tool call's arguments as the object the API wants. Arguments that are not a JSON object
/// (a model that produced broken JSON) are passed under one key, so the model sees what it sent.
fn tool_input(arguments: &str) -> Value {
    let trimmed = arguments.trim();
    if trimmed.is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({"_unparsed_arguments": arguments}),
    }
}
