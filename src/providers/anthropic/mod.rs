//! The Anthropic provider: the Messages API (`POST {base_url}/v1/messages`) with streaming.
//!
//! Requests are built from the outbound projection on every call: tool results become
//! `tool_result` blocks in user messages, consecutive messages of one role are merged (the API
//! wants alternating roles), images and PDFs become `image`/`document` blocks, and the signed
//! thinking blocks kept in the assistant message's `_anthropic.thinking` extra are sent back
//! ahead of its text and tool calls. Prompt caching puts `cache_control` on the last block and
//! on two blocks before it (`request::mark_cache_breakpoints`), so the cached prefix grows turn
//! by turn even across a round of many tool calls. Each
//! message's blocks are serialized once (`encode_message`, kept by the engine's outbound
//! cache); a request merges them into alternating roles and writes them after its head.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{json, Value};

use super::http::{self, Progress, SseParser};
use super::wire::{EncodedMessage, MessageForm};
use super::{
    Chunk, ChunkStream, FinishReason, OutboundMessage, Provider, ProviderError, ProviderRequest,
    Usage,
};

mod request;

pub use request::{encode_message, request_body, request_bytes};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const API_VERSION: &str = "2023-06-01";
/// The extra (on assistant messages) holding the signed thinking blocks, in answer order.
pub const THINKING_EXTRA: &str = "_anthropic.thinking";
/// Anthropic requires an output limit; this is used when the catalog knows none.
const FALLBACK_MAX_TOKENS: u64 = 8_192;

pub struct AnthropicProvider {
    base_url: String,
    api_key_env: Option<String>,
    client: OnceLock<reqwest::Client>,
}

impl AnthropicProvider {
    pub fn new(base_url: String, api_key_env: Option<String>) -> Self {
        // `https://api.anthropic.com/v1` is a common way to write the base URL; the path below
        // adds `/v1` itself.
        let base = base_url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        AnthropicProvider {
            base_url: base.to_owned(),
            api_key_env,
            client: OnceLock::new(),
        }
    }
}

impl Provider for AnthropicProvider {
    fn kind(&self) -> &'static str {
        "anthropic"
    }

    fn encode(&self, message: &OutboundMessage, form: MessageForm) -> Option<EncodedMessage> {
        Some(encode_message(message, form))
    }

    fn stream(&self, request: ProviderRequest) -> ChunkStream {
        let key = match http::configured_key(self.api_key_env.as_deref()) {
            Ok(key) => key,
            Err(error) => return http::failed(error),
        };
        let url = format!("{}/v1/messages", self.base_url);
        let builder = self
            .client
            .get_or_init(http::build_client)
            .post(&url)
            .header("anthropic-version", API_VERSION)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        let mut builder = http::post_json(builder, request_bytes(&request));
        if let Some(key) = key {
            builder = builder.header("x-api-key", key);
        }
        http::stream_sse(builder, url, Parser::default())
    }
}

/// What a content block of the streamed answer is.
enum Block {
    Text,
    Thinking { text: String, signature: String },
    Redacted(Value),
    ToolUse,
}

/// The most bytes of thinking signatures one answer may carry. A real signature is a few
/// kilobytes; `max_reasoning_bytes` bounds the thinking text but not its signature, which is
/// kept (and stored) whole to be sent back, so a hostile stream of `signature_delta`s would
/// otherwise grow it without end.
pub const MAX_SIGNATURE_BYTES: usize = 1024 * 1024;

/// The state of one streamed answer.
#[derive(Default)]
pub struct Parser {
    blocks: HashMap<u64, Block>,
    /// Content block index → tool call index (tool calls are numbered from 0 in answer order).
    tool_index: HashMap<u64, usize>,
    thinking: Vec<Value>,
    /// Bytes of thinking signatures read so far in this answer (see [`MAX_SIGNATURE_BYTES`]).
    signature_bytes: usize,
    input_tokens: u64,
    cache_creation: u64,
    cache_read: u64,
    output_tokens: u64,
}

impl Parser {
    fn read_usage(&mut self, usage: &Value) {
        let get = |k: &str| usage.get(k).and_then(Value::as_u64);
        if let Some(v) = get("input_tokens") {
            self.input_tokens = v;
        }
        if let Some(v) = get("cache_creation_input_tokens") {
            self.cache_creation = v;
        }
        if let Some(v) = get("cache_read_input_tokens") {
            self.cache_read = v;
        }
        if let Some(v) = get("output_tokens") {
            self.output_tokens = v;
        }
    }

    fn usage(&self) -> Usage {
        // `input_tokens` excludes cached tokens; the engine's input is the whole prompt.
        Usage {
            input_tokens: self.input_tokens + self.cache_creation + self.cache_read,
            output_tokens: self.output_tokens,
            cached_tokens: Some(self.cache_read),
        }
    }
}

fn stop_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// A streamed `error` event: overloaded and server errors are worth retrying.
fn stream_error(value: &Value) -> ProviderError {
    let error = value.get("error").unwrap_or(value);
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    let retriable = matches!(
        kind,
        "overloaded_error" | "api_error" | "rate_limit_error" | "timeout_error"
    );
    let mut e = ProviderError::new(
        format!("the provider reported an error mid-stream: {kind}: {message}"),
        retriable,
    );
    e.context_overflow = super::looks_like_context_overflow(message);
    e
}

impl SseParser for Parser {
    fn event(
        &mut self,
        _event: &str,
        data: &str,
        out: &mut Vec<Chunk>,
    ) -> Result<Progress, ProviderError> {
        let value = http::json_event(data)?;
        let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
        match value.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                if let Some(usage) = value.pointer("/message/usage") {
                    self.read_usage(usage);
                }
            }
            "content_block_start" => {
                let block = value.get("content_block").cloned().unwrap_or(Value::Null);
                match block.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text" => {
                        if let Some(text) = block.get("text").and_then(Value::as_str) {
                            if !text.is_empty() {
                                out.push(Chunk::Text(text.to_owned()));
                            }
                        }
                        self.blocks.insert(index, Block::Text);
                    }
                    "thinking" => {
                        let text = block
                            .get("thinking")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        if !text.is_empty() {
                            out.push(Chunk::Reasoning(text.clone()));
                        }
                        let signature = block
                            .get("signature")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        self.blocks
                            .insert(index, Block::Thinking { text, signature });
                    }
                    "redacted_thinking" => {
                        self.blocks.insert(index, Block::Redacted(block));
                    }
                    "tool_use" => {
                        let tool = self.tool_index.len();
                        self.tool_index.insert(index, tool);
                        self.blocks.insert(index, Block::ToolUse);
                        out.push(Chunk::ToolCallDelta {
                            index: tool,
                            id: block.get("id").and_then(Value::as_str).map(str::to_owned),
                            name: block.get("name").and_then(Value::as_str).map(str::to_owned),
                            arguments: String::new(),
                        });
                    }
                    // Server tools and future block kinds are not ours to replay.
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta = value.get("delta").cloned().unwrap_or(Value::Null);
                let text = |key: &str| {
                    delta
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                match delta.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text_delta" => {
                        let t = text("text");
                        if !t.is_empty() {
                            out.push(Chunk::Text(t));
                        }
                    }
                    "thinking_delta" => {
                        let t = text("thinking");
                        if let Some(Block::Thinking { text: kept, .. }) =
                            self.blocks.get_mut(&index)
                        {
                            kept.push_str(&t);
                        }
                        if !t.is_empty() {
                            out.push(Chunk::Reasoning(t));
                        }
                    }
                    "signature_delta" => {
                        let piece = text("signature");
                        self.signature_bytes += piece.len();
                        if self.signature_bytes > MAX_SIGNATURE_BYTES {
                            return Err(ProviderError::new(
                                format!(
                                    "the provider sent more than {MAX_SIGNATURE_BYTES} bytes of thinking signatures in one answer, so tandem stopped reading it; check base_url points at the Anthropic API, or turn thinking off for this model"
                                ),
                                false,
                            ));
                        }
                        if let Some(Block::Thinking { signature, .. }) = self.blocks.get_mut(&index)
                        {
                            signature.push_str(&piece);
                        }
                    }
                    "input_json_delta" => {
                        if let Some(&tool) = self.tool_index.get(&index) {
                            out.push(Chunk::ToolCallDelta {
                                index: tool,
                                id: None,
                                name: None,
                                arguments: text("partial_json"),
                            });
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => match self.blocks.remove(&index) {
                Some(Block::Thinking { text, signature }) => {
                    self.thinking.push(
                        json!({"type": "thinking", "thinking": text, "signature": signature}),
                    );
                    out.push(Chunk::Extra {
                        key: THINKING_EXTRA.to_owned(),
                        value: Value::Array(self.thinking.clone()),
                    });
                }
                Some(Block::Redacted(block)) => {
                    self.thinking.push(block);
                    out.push(Chunk::Extra {
                        key: THINKING_EXTRA.to_owned(),
                        value: Value::Array(self.thinking.clone()),
                    });
                }
                Some(Block::Text | Block::ToolUse) | None => {}
            },
            "message_delta" => {
                if let Some(usage) = value.get("usage") {
                    self.read_usage(usage);
                }
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    out.push(Chunk::Finish(stop_reason(reason)));
                }
                out.push(Chunk::Usage(self.usage()));
            }
            "message_stop" => return Ok(Progress::Complete),
            "error" => return Err(stream_error(&value)),
            // `ping` and event kinds added later.
            _ => {}
        }
        Ok(Progress::More)
    }

    fn end_of_body(&mut self, _out: &mut Vec<Chunk>) -> Result<(), ProviderError> {
        Err(http::cut_short())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::providers::{OutboundPart, OutboundToolCall, ToolSpec};

    fn request(messages: Vec<OutboundMessage>) -> ProviderRequest {
        ProviderRequest {
            encoded: Default::default(),
            model: "claude-sonnet-4-5".into(),
            system: "be brief".into(),
            messages,
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "read".into(),
                parameters: json!({"type": "object"}),
            }],
            max_output_tokens: Some(64_000),
            reasoning: true,
            thinking_budget: Some(2_048),
            parallel_tool_calls: true,
        }
    }

    fn user(text: &str) -> OutboundMessage {
        OutboundMessage::User {
            parts: vec![OutboundPart::Text(text.into())],
        }
    }

    #[test]
    fn history_converts_with_merged_tool_results_thinking_and_cache_control() {
        let mut extras = BTreeMap::new();
        extras.insert(
            THINKING_EXTRA.to_owned(),
            json!([{"type": "thinking", "thinking": "hm", "signature": "sig"}]),
        );
        let call = |id: &str| OutboundToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: r#"{"path":"a"}"#.into(),
            extras: BTreeMap::new(),
        };
        let body = request_body(&request(vec![
            user("hi"),
            OutboundMessage::Assistant {
                text: String::new(),
                tool_calls: vec![call("t1"), call("t2")],
                extras,
            },
            OutboundMessage::Tool {
                tool_call_id: "t1".into(),
                name: "read_file".into(),
                content: "one".into(),
            },
            OutboundMessage::Tool {
                tool_call_id: "t2".into(),
                name: "read_file".into(),
                content: String::new(),
            },
            user("steer"),
        ]));
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3, "{body:#}");
        assert_eq!(messages[1]["content"][0]["type"], "thinking");
        assert_eq!(messages[1]["content"][0]["signature"], "sig");
        assert_eq!(messages[1]["content"][1]["input"], json!({"path": "a"}));
        let last = messages[2]["content"].as_array().unwrap();
        assert_eq!(last[0]["tool_use_id"], "t1");
        assert_eq!(last[1]["tool_use_id"], "t2");
        assert_eq!(last[2]["text"], "steer");
        assert_eq!(last[2]["cache_control"], json!({"type": "ephemeral"}));
        assert!(last[0].get("cache_control").is_none());
        assert_eq!(body["thinking"]["budget_tokens"], 2_048);
        assert_eq!(body["system"][0]["text"], "be brief");
        assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
    }

    #[test]
    fn a_request_without_tools_writes_calls_as_text() {
        let mut extras = BTreeMap::new();
        extras.insert(
            THINKING_EXTRA.to_owned(),
            json!([{"type": "thinking", "thinking": "hm", "signature": "sig"}]),
        );
        let mut req = request(vec![
            user("hi"),
            OutboundMessage::Assistant {
                text: String::new(),
                tool_calls: vec![OutboundToolCall {
                    id: "t1".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a"}"#.into(),
                    extras: BTreeMap::new(),
                }],
                extras,
            },
            OutboundMessage::Tool {
                tool_call_id: "t1".into(),
                name: "read_file".into(),
                content: "one".into(),
            },
            user("summarize"),
        ]);
        req.tools.clear();
        let body = request_body(&req);
        let text = body.to_string();
        assert!(
            !text.contains("tool_use") && !text.contains("tool_result"),
            "{body:#}"
        );
        assert!(!text.contains("\"thinking\":\"hm\""), "{body:#}");
        assert!(text.contains("[called tool read_file"), "{body:#}");
        assert_eq!(body["messages"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn thinking_signatures_past_the_cap_end_the_answer_with_an_error() {
        let mut parser = Parser::default();
        let start = r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#;
        let mut out = Vec::new();
        parser.event("", start, &mut out).unwrap();
        let piece = "S".repeat(64 * 1024);
        let delta = json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature": piece}}).to_string();
        let mut error = None;
        for _ in 0..(MAX_SIGNATURE_BYTES / piece.len() + 1) {
            if let Err(e) = parser.event("", &delta, &mut out) {
                error = Some(e);
                break;
            }
        }
        let error = error.expect("the cap is enforced");
        assert!(!error.retriable);
        assert!(
            error.message.contains("thinking signatures"),
            "{}",
            error.message
        );
        assert!(parser.signature_bytes <= MAX_SIGNATURE_BYTES + piece.len());
    }

    #[test]
    fn stream_parses_thinking_signature_tool_use_and_usage() {
        let mut parser = Parser::default();
        let mut out = Vec::new();
        let events = [
            r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","stop_reason":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"let me"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"opaque"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Reading."}}"#,
            r#"{"type":"content_block_stop","index":2}"#,
            r#"{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_1","name":"read_file","input":{}}}"#,
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}"#,
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"\"a\"}"}}"#,
            r#"{"type":"content_block_stop","index":3}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}"#,
        ];
        for e in events {
            assert_eq!(parser.event("", e, &mut out).unwrap(), Progress::More);
        }
        assert_eq!(
            parser
                .event("", r#"{"type":"message_stop"}"#, &mut out)
                .unwrap(),
            Progress::Complete
        );
        assert!(out.contains(&Chunk::Reasoning("let me".into())));
        assert!(out.contains(&Chunk::Text("Reading.".into())));
        assert!(out.contains(&Chunk::Extra {
            key: THINKING_EXTRA.into(),
            value: json!([
                {"type": "thinking", "thinking": "let me", "signature": "SIG"},
                {"type": "redacted_thinking", "data": "opaque"}
            ])
        }));
        assert!(out.contains(&Chunk::ToolCallDelta {
            index: 0,
            id: Some("toolu_1".into()),
            name: Some("read_file".into()),
            arguments: String::new()
        }));
        assert!(out.contains(&Chunk::Finish(FinishReason::ToolCalls)));
        assert_eq!(
            out.last(),
            Some(&Chunk::Usage(Usage {
                input_tokens: 115,
                output_tokens: 42,
                cached_tokens: Some(100)
            }))
        );
        assert!(parser.end_of_body(&mut out).is_err());
    }

    #[test]
    fn stream_errors_classify() {
        let mut parser = Parser::default();
        let e = parser
            .event(
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                &mut Vec::new(),
            )
            .unwrap_err();
        assert!(e.retriable);
        let e = parser
            .event(
                "error",
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#,
                &mut Vec::new(),
            )
            .unwrap_err();
        assert!(!e.retriable);
    }

    #[test]
    fn an_mcp_schema_is_sent_as_the_server_gave_it() {
        // The API takes JSON Schema with references, `oneOf`, `const` and
        // `additionalProperties`, so an MCP tool's schema (its root made an object by
        // `mcp::schema::model_schema`) goes out unchanged.
        let schema = crate::mcp::schema::model_schema(json!({
            "$defs": {"Mode": {"type": "string", "enum": ["fast", "slow"]}},
            "properties": {
                "mode": {"$ref": "#/$defs/Mode"},
                "limit": {"oneOf": [{"type": "integer"}, {"type": "null"}]},
                "kind": {"const": "x"}
            },
            "additionalProperties": false
        }));
        let request = ProviderRequest {
            encoded: Default::default(),
            model: "m".into(),
            system: String::new(),
            messages: vec![OutboundMessage::User {
                parts: vec![OutboundPart::Text("hi".into())],
            }],
            tools: vec![ToolSpec {
                name: "mcp__s__t".into(),
                description: "t".into(),
                parameters: schema.clone(),
            }],
            max_output_tokens: None,
            reasoning: false,
            thinking_budget: None,
            parallel_tool_calls: true,
        };
        let body = request_body(&request);
        assert_eq!(body["tools"][0]["input_schema"], schema);
        assert_eq!(schema["type"], "object", "the root is an object: {schema}");
    }
}
