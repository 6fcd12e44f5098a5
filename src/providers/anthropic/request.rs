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
    let rest = request.encode_rest(encode_message);
    let mut messages = wire::merge_by_role(request.all_encoded(&rest));
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
    mark_cache_breakpoints(&mut messages);
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
    let pieces: usize = messages.iter().map(|(_, items)| items.len() + 1).sum();
    let mut body = Body::with_head(head, 2 * pieces);
    body.field("messages");
    body.push_role_messages(&messages, "content");
    body.close();
    body
}

/// How many blocks apart the cache breakpoints are placed, counting back from the last block.
/// Anthropic looks for an earlier cache entry at most 20 blocks before each breakpoint; the
/// margin covers thinking blocks stepped over (they take no breakpoint).
const BREAKPOINT_SPACING: usize = 16;
/// Breakpoints per request; the API allows four, one is left for a client that adds its own.
const BREAKPOINTS: usize = 3;

/// Prompt caching: a breakpoint on the last block caches everything up to it (tools, system,
/// history), and the next request reads that prefix back. The API looks for an earlier entry
/// only 20 blocks before a breakpoint, so a round that adds more (a fan-out of ten tool calls
/// and their results) would find none; two more breakpoints, 16 and 32 blocks before the last,
/// reach the previous request's end across about 50 new blocks. Markers are not part of what
/// the cache compares, so they may move from block to block. Thinking blocks take none.
fn mark_cache_breakpoints(messages: &mut [(&'static str, Vec<EncodedItem>)]) {
    let blocks: Vec<(usize, usize, ItemKind)> = messages
        .iter()
        .enumerate()
        .flat_map(|(m, (_, items))| {
            items
                .iter()
                .enumerate()
                .map(move |(i, item)| (m, i, item.kind))
        })
        .collect();
    let mut chosen: Vec<(usize, usize)> = Vec::new();
    let mut target = blocks.len();
    for _ in 0..BREAKPOINTS {
        let Some(found) = blocks[..target]
            .iter()
            .rposition(|(_, _, kind)| *kind != ItemKind::Thinking)
        else {
            break;
        };
        chosen.push((blocks[found].0, blocks[found].1));
        let Some(next) = found.checked_sub(BREAKPOINT_SPACING - 1) else {
            break;
        };
        target = next;
    }
    for (m, i) in chosen {
        let item = &mut messages[m].1[i];
        if let Ok(Value::Object(mut block)) = serde_json::from_str::<Value>(&item.json) {
            block.insert("cache_control".into(), json!({"type": "ephemeral"}));
            *item = wire::item(item.kind, &Value::Object(block));
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::OutboundToolCall;

    #[test]
    fn breakpoints_sit_on_the_last_block_and_every_sixteen_blocks_before_it() {
        let mut messages = vec![OutboundMessage::User {
            parts: vec![OutboundPart::Text("go".into())],
        }];
        for n in 0..30 {
            messages.push(OutboundMessage::Assistant {
                text: String::new(),
                tool_calls: vec![OutboundToolCall {
                    id: format!("c{n}"),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                    extras: Default::default(),
                }],
                extras: Default::default(),
            });
            messages.push(OutboundMessage::Tool {
                tool_call_id: format!("c{n}"),
                name: "read_file".into(),
                content: "x".into(),
            });
        }
        let request = ProviderRequest {
            encoded: Default::default(),
            model: "m".into(),
            system: String::new(),
            messages,
            tools: vec![crate::providers::ToolSpec {
                name: "read_file".into(),
                description: "d".into(),
                parameters: json!({}),
            }],
            max_output_tokens: None,
            reasoning: false,
            thinking_budget: None,
            parallel_tool_calls: true,
        };
        let body = request_body(&request);
        let blocks: Vec<&Value> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["content"].as_array().unwrap())
            .collect();
        assert_eq!(blocks.len(), 61);
        let marked: Vec<usize> = blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.get("cache_control").is_some())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(marked, vec![28, 44, 60]);
    }
}
