//! Rendering: vendor-neutral steps turned into one vendor's SSE bytes (OpenAI chat completions,
//! Anthropic Messages, Gemini `streamGenerateContent`, OpenAI Responses).
//!
//! A renderer only produces strings; `play.rs` decides when each is written and flushed.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::script::{Dialect, Script, Step};

/// Turns vendor-neutral steps into one vendor's SSE bytes. Stateful: Anthropic's content
/// blocks open and close around runs of steps, and usage is read from the whole script up front
/// because Anthropic and Gemini report it before the script's `Usage` step comes.
pub(crate) enum Renderer {
    OpenAi {
        chunk_id: String,
        created: u64,
        model: String,
    },
    Anthropic {
        /// The open block: its index and kind ("text", "thinking", "tool_use").
        open: Option<(u32, &'static str)>,
        next_index: u32,
        usage: (u64, u64, u64),
    },
    Gemini {
        model: String,
        response_id: String,
        signature: Option<String>,
        usage: (u64, u64, u64),
    },
    Responses(ResponsesState),
}

/// The Responses API renderer's state: output items are numbered, and a message item is
/// announced when its first text comes and closed (with its whole text) before the next item.
pub(crate) struct ResponsesState {
    response_id: String,
    next_output: u32,
    /// The open message item: its output index and the text streamed into it so far.
    message: Option<(u32, String)>,
    /// The tool calls streamed so far: (tool index, output index, item id, call id, name,
    /// arguments), so `ToolArguments` can extend one and its `done` item carries the whole.
    calls: Vec<(u32, u32, String, String, String, String)>,
    usage: (u64, u64, u64),
}

/// (prompt, completion, cached) from the script's usage step; `index` is the request's.
fn script_usage(script: &Script, index: usize) -> (u64, u64, u64) {
    script
        .steps
        .iter()
        .find_map(|s| match s {
            Step::Usage { prompt, completion } => Some((*prompt, *completion, 0)),
            Step::UsageCached {
                prompt,
                completion,
                cached,
            } => Some((*prompt, *completion, *cached)),
            Step::UsageForRequest {
                prompt_base,
                completion,
            } => Some((prompt_for_request(*prompt_base, index), *completion, 0)),
            _ => None,
        })
        .unwrap_or((0, 0, 0))
}

/// The prompt count of `Step::UsageForRequest` for the request with this 0-based index.
fn prompt_for_request(prompt_base: u64, index: usize) -> u64 {
    prompt_base + index as u64 + 1
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

impl Renderer {
    pub(crate) fn new(dialect: Dialect, script: &Script, model: &str, index: usize) -> Renderer {
        match dialect {
            Dialect::OpenAi => Renderer::OpenAi {
                chunk_id: format!("chatcmpl-mock-{index}"),
                created: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0),
                model: model.to_string(),
            },
            Dialect::Anthropic => Renderer::Anthropic {
                open: None,
                next_index: 0,
                usage: script_usage(script, index),
            },
            Dialect::Gemini => Renderer::Gemini {
                model: model.to_string(),
                response_id: format!("mock-response-{index}"),
                signature: None,
                usage: script_usage(script, index),
            },
            Dialect::Responses => Renderer::Responses(ResponsesState {
                response_id: format!("resp_mock_{index}"),
                next_output: 0,
                message: None,
                calls: Vec::new(),
                usage: script_usage(script, index),
            }),
        }
    }

    /// What the body starts with, before the first step.
    pub(crate) fn start(&mut self, out: &mut Vec<String>) {
        if let Renderer::Responses(state) = self {
            out.push(responses_event(&json!({"type": "response.created",
                "response": {"id": state.response_id, "status": "in_progress", "output": []}})));
        }
        if let Renderer::Anthropic { usage, .. } = self {
            let (prompt, _, cached) = *usage;
            out.push(sse(
                "message_start",
                &json!({"type": "message_start", "message": {
                    "id": "msg_mock", "type": "message", "role": "assistant", "content": [],
                    "model": "claude-mock", "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": prompt - cached, "cache_creation_input_tokens": 0,
                              "cache_read_input_tokens": cached, "output_tokens": 1}
                }}),
            ));
            out.push(sse("ping", &json!({"type": "ping"})));
        }
    }

    /// Renders one step (not a pause, a reset, a raw write or a repetition: `play.rs` does
    /// those) for the request with this 0-based index.
    pub(crate) fn step(&mut self, step: &Step, index: usize, out: &mut Vec<String>) {
        match self {
            Renderer::OpenAi {
                chunk_id,
                created,
                model,
            } => {
                let chunk = |choices: Value, usage: Option<Value>| {
                    let mut c = json!({
                        "id": chunk_id, "object": "chat.completion.chunk", "created": created,
                        "model": model, "choices": choices,
                    });
                    if let Some(u) = usage {
                        c["usage"] = u;
                    }
                    format!("data: {c}\n\n")
                };
                let delta = |d: Value| {
                    chunk(
                        json!([{"index": 0, "delta": d, "finish_reason": null}]),
                        None,
                    )
                };
                match step {
                    Step::Role => out.push(delta(json!({"role": "assistant", "content": ""}))),
                    Step::Text(t) => out.push(delta(json!({"content": t}))),
                    Step::Reasoning(t) => out.push(delta(json!({"reasoning_content": t}))),
                    Step::ToolCall {
                        index,
                        id,
                        name,
                        args_json,
                    } => {
                        out.push(delta(json!({"tool_calls": [{
                            "index": index, "id": id, "type": "function",
                            "function": {"name": name, "arguments": ""}
                        }]})));
                        for part in split_in_three(args_json) {
                            out.push(delta(json!({"tool_calls": [{
                                "index": index, "function": {"arguments": part}
                            }]})));
                        }
                    }
                    Step::Finish(reason) => out.push(chunk(
                        json!([{"index": 0, "delta": {}, "finish_reason": reason}]),
                        None,
                    )),
                    Step::Usage { prompt, completion } => out.push(chunk(
                        json!([]),
                        Some(json!({
                            "prompt_tokens": prompt,
                            "completion_tokens": completion,
                            "total_tokens": prompt + completion,
                        })),
                    )),
                    Step::UsageCached {
                        prompt,
                        completion,
                        cached,
                    } => out.push(chunk(
                        json!([]),
                        Some(json!({
                            "prompt_tokens": prompt,
                            "completion_tokens": completion,
                            "total_tokens": prompt + completion,
                            "prompt_tokens_details": {"cached_tokens": cached},
                        })),
                    )),
                    Step::UsageForRequest {
                        prompt_base,
                        completion,
                    } => {
                        let prompt = prompt_for_request(*prompt_base, index);
                        out.push(chunk(
                            json!([]),
                            Some(json!({
                                "prompt_tokens": prompt,
                                "completion_tokens": completion,
                                "total_tokens": prompt + completion,
                            })),
                        ))
                    }
                    Step::ToolArguments { index, json_piece } => {
                        out.push(delta(json!({"tool_calls": [{
                            "index": index, "function": {"arguments": json_piece}
                        }]})))
                    }
                    Step::Done => out.push("data: [DONE]\n\n".to_string()),
                    _ => {}
                }
            }
            Renderer::Anthropic {
                open,
                next_index,
                usage,
            } => {
                let close = |open: &mut Option<(u32, &'static str)>, out: &mut Vec<String>| {
                    if let Some((i, _)) = open.take() {
                        out.push(sse(
                            "content_block_stop",
                            &json!({"type": "content_block_stop", "index": i}),
                        ));
                    }
                };
                let mut begin = |kind: &'static str,
                                 block: Value,
                                 open: &mut Option<(u32, &'static str)>,
                                 out: &mut Vec<String>|
                 -> u32 {
                    if let Some((i, k)) = *open {
                        if k == kind && kind != "tool_use" {
                            return i;
                        }
                    }
                    close(open, out);
                    let i = *next_index;
                    *next_index += 1;
                    *open = Some((i, kind));
                    out.push(sse(
                        "content_block_start",
                        &json!({"type": "content_block_start", "index": i, "content_block": block}),
                    ));
                    i
                };
                let delta = |i: u32, d: Value| {
                    sse(
                        "content_block_delta",
                        &json!({"type": "content_block_delta", "index": i, "delta": d}),
                    )
                };
                match step {
                    Step::Text(t) => {
                        let i = begin("text", json!({"type": "text", "text": ""}), open, out);
                        out.push(delta(i, json!({"type": "text_delta", "text": t})));
                    }
                    Step::Reasoning(t) => {
                        let i = begin(
                            "thinking",
                            json!({"type": "thinking", "thinking": "", "signature": ""}),
                            open,
                            out,
                        );
                        out.push(delta(i, json!({"type": "thinking_delta", "thinking": t})));
                    }
                    Step::Signature(sig) => {
                        if let Some((i, "thinking")) = *open {
                            out.push(delta(
                                i,
                                json!({"type": "signature_delta", "signature": sig}),
                            ));
                        }
                    }
                    Step::ToolCall {
                        id,
                        name,
                        args_json,
                        ..
                    } => {
                        let i = begin(
                            "tool_use",
                            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                            open,
                            out,
                        );
                        for part in split_in_three(args_json) {
                            out.push(delta(
                                i,
                                json!({"type": "input_json_delta", "partial_json": part}),
                            ));
                        }
                    }
                    Step::ToolArguments { json_piece, .. } => {
                        if let Some((i, "tool_use")) = *open {
                            out.push(delta(
                                i,
                                json!({"type": "input_json_delta", "partial_json": json_piece}),
                            ));
                        }
                    }
                    Step::Finish(reason) => {
                        close(open, out);
                        let stop = match reason.as_str() {
                            "stop" => "end_turn",
                            "tool_calls" => "tool_use",
                            "length" => "max_tokens",
                            "content_filter" => "refusal",
                            other => other,
                        };
                        out.push(sse(
                            "message_delta",
                            &json!({"type": "message_delta",
                                    "delta": {"stop_reason": stop, "stop_sequence": null},
                                    "usage": {"output_tokens": usage.1}}),
                        ));
                    }
                    Step::Done => {
                        close(open, out);
                        out.push(sse("message_stop", &json!({"type": "message_stop"})));
                    }
                    _ => {}
                }
            }
            Renderer::Gemini {
                model,
                response_id,
                signature,
                usage,
            } => {
                let (prompt, completion, cached) = *usage;
                let metadata = |last: bool| {
                    let mut m = json!({"promptTokenCount": prompt,
                        "totalTokenCount": prompt + if last { completion } else { 0 }});
                    if last {
                        m["candidatesTokenCount"] = json!(completion);
                        if cached > 0 {
                            m["cachedContentTokenCount"] = json!(cached);
                        }
                    }
                    m
                };
                let chunk = |parts: Vec<Value>, finish: Option<&str>, last: bool| {
                    let mut candidate =
                        json!({"content": {"parts": parts, "role": "model"}, "index": 0});
                    if let Some(f) = finish {
                        candidate["finishReason"] = json!(f);
                    }
                    let c = json!({"candidates": [candidate], "usageMetadata": metadata(last),
                                   "modelVersion": model, "responseId": response_id});
                    // Gemini separates events with CRLF pairs.
                    format!("data: {c}\r\n\r\n")
                };
                match step {
                    Step::Text(t) => {
                        let mut part = json!({"text": t});
                        if let Some(sig) = signature.take() {
                            part["thoughtSignature"] = json!(sig);
                        }
                        out.push(chunk(vec![part], None, false));
                    }
                    Step::Reasoning(t) => out.push(chunk(
                        vec![json!({"text": t, "thought": true})],
                        None,
                        false,
                    )),
                    Step::Signature(sig) => *signature = Some(sig.clone()),
                    Step::ToolCall {
                        name, args_json, ..
                    } => {
                        let args: Value = serde_json::from_str(args_json).unwrap_or(json!({}));
                        let mut part = json!({"functionCall": {"name": name, "args": args}});
                        if let Some(sig) = signature.take() {
                            part["thoughtSignature"] = json!(sig);
                        }
                        out.push(chunk(vec![part], None, false));
                    }
                    Step::Finish(reason) => {
                        let f = match reason.as_str() {
                            "stop" | "tool_calls" => "STOP",
                            "length" => "MAX_TOKENS",
                            "content_filter" => "SAFETY",
                            other => other,
                        };
                        let mut part = json!({"text": ""});
                        if let Some(sig) = signature.take() {
                            part["thoughtSignature"] = json!(sig);
                        }
                        out.push(chunk(vec![part], Some(f), true));
                    }
                    _ => {}
                }
            }
            Renderer::Responses(state) => state.step(step, out),
        }
    }
}

fn responses_event(event: &Value) -> String {
    let kind = event["type"].as_str().unwrap_or_default();
    format!("event: {kind}\ndata: {event}\n\n")
}

impl ResponsesState {
    fn step(&mut self, step: &Step, out: &mut Vec<String>) {
        match step {
            Step::Text(t) => {
                let output_index = match &mut self.message {
                    Some((i, text)) => {
                        text.push_str(t);
                        *i
                    }
                    None => {
                        let i = self.next_output;
                        self.next_output += 1;
                        self.message = Some((i, t.clone()));
                        out.push(responses_event(
                            &json!({"type": "response.output_item.added",
                            "output_index": i, "item": {"type": "message", "id": self.message_id(i),
                            "status": "in_progress", "role": "assistant", "content": []}}),
                        ));
                        i
                    }
                };
                out.push(responses_event(
                    &json!({"type": "response.output_text.delta",
                    "item_id": self.message_id(output_index), "output_index": output_index,
                    "content_index": 0, "delta": t}),
                ));
            }
            Step::ToolCall {
                index,
                id,
                name,
                args_json,
            } => {
                self.close_message(out);
                let output_index = self.next_output;
                self.next_output += 1;
                let item_id = format!("fc_{id}");
                out.push(responses_event(
                    &json!({"type": "response.output_item.added",
                    "output_index": output_index, "item": {"type": "function_call", "id": item_id,
                    "call_id": id, "name": name, "arguments": "", "status": "in_progress"}}),
                ));
                for part in split_in_three(args_json) {
                    out.push(responses_event(
                        &json!({"type": "response.function_call_arguments.delta",
                        "item_id": item_id, "output_index": output_index, "delta": part}),
                    ));
                }
                self.calls.push((
                    *index,
                    output_index,
                    item_id,
                    id.clone(),
                    name.clone(),
                    args_json.clone(),
                ));
            }
            Step::ToolArguments { index, json_piece } => {
                if let Some(call) = self.calls.iter_mut().find(|c| c.0 == *index) {
                    call.5.push_str(json_piece);
                    out.push(responses_event(
                        &json!({"type": "response.function_call_arguments.delta",
                        "item_id": call.2, "output_index": call.1, "delta": json_piece}),
                    ));
                }
            }
            Step::Finish(reason) => {
                self.close_message(out);
                for (_, output_index, item_id, call_id, name, arguments) in self.calls.drain(..) {
                    out.push(responses_event(&json!({"type": "response.output_item.done",
                        "output_index": output_index, "item": {"type": "function_call", "id": item_id,
                        "call_id": call_id, "name": name, "arguments": arguments, "status": "completed"}})));
                }
                let (prompt, completion, cached) = self.usage;
                let usage = json!({"input_tokens": prompt,
                    "input_tokens_details": {"cached_tokens": cached},
                    "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": prompt + completion});
                // A cut answer ends `incomplete`, like the API's `max_output_tokens` case.
                let (kind, status) = match reason.as_str() {
                    "length" => ("response.incomplete", "incomplete"),
                    _ => ("response.completed", "completed"),
                };
                out.push(responses_event(&json!({"type": kind, "response": {
                    "id": self.response_id, "status": status, "usage": usage}})));
            }
            // Reasoning summaries, signatures, usage steps (read up front) and `[DONE]` have no
            // Responses API event of their own here.
            _ => {}
        }
    }

    fn message_id(&self, output_index: u32) -> String {
        format!("msg_{}_{output_index}", self.response_id)
    }

    /// Ends the open message item with its whole text.
    fn close_message(&mut self, out: &mut Vec<String>) {
        if let Some((i, text)) = self.message.take() {
            out.push(responses_event(
                &json!({"type": "response.output_item.done",
                "output_index": i, "item": {"type": "message", "id": self.message_id(i),
                "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}}),
            ));
        }
    }

    /// Drops the last `bytes` of the open message's text: the numbered-delta template renders a
    /// placeholder text that must not end up in the message's `done` item.
    pub(crate) fn forget_text(&mut self, bytes: usize) {
        if let Some((_, text)) = &mut self.message {
            text.truncate(text.len().saturating_sub(bytes));
        }
    }
}

pub(crate) fn split_at_char_middle(s: &str) -> (&str, &str) {
    let n = s.chars().count();
    let cut = s
        .char_indices()
        .nth(n / 2)
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    s.split_at(cut)
}

/// Splits on char boundaries into up to three non-empty pieces.
pub(crate) fn split_in_three(s: &str) -> Vec<&str> {
    let idx: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
    let n = idx.len();
    if n == 0 {
        return Vec::new();
    }
    let cuts: Vec<usize> = [n / 3, 2 * n / 3]
        .into_iter()
        .filter(|&c| c > 0 && c < n)
        .map(|c| idx[c])
        .collect();
    let mut out = Vec::new();
    let mut start = 0;
    for c in cuts {
        if c > start {
            out.push(&s[start..c]);
            start = c;
        }
    }
    out.push(&s[start..]);
    out
}
