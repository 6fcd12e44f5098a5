//! The OpenAI-compatible provider: streaming `/chat/completions` over reqwest.
//!
//! One implementation covers OpenAI, OpenRouter, Ollama, vLLM, llama.cpp and LM Studio, which all
//! speak this wire format. The shared driver in `http.rs` sends the request and reads the SSE
//! body; each `data:` event is one `chat.completion.chunk`, and `data: [DONE]` ends the stream.

use std::sync::OnceLock;

use serde_json::{json, Map, Value};

use super::wire::{self, Body, EncodedMessage, ItemKind, MessageForm};
use super::{
    Chunk, ChunkStream, FinishReason, OutboundMessage, OutboundPart, Provider, ProviderError,
    ProviderRequest, Usage,
};

pub struct OpenAiProvider {
    base_url: String,
    api_key_env: Option<String>,
    /// Built on first use so that a server that never calls a model starts faster.
    client: OnceLock<reqwest::Client>,
}

impl OpenAiProvider {
    pub fn new(base_url: String, api_key_env: Option<String>) -> Self {
        OpenAiProvider {
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key_env,
            client: OnceLock::new(),
        }
    }

    fn client(&self) -> reqwest::Client {
        self.client.get_or_init(super::http::build_client).clone()
    }
}

/// One projected message as a chat-completions message.
pub fn encode_message(message: &OutboundMessage, _form: MessageForm) -> EncodedMessage {
    let (role, value) = match message {
        OutboundMessage::User { parts } => {
            let only_text = parts.iter().all(|p| matches!(p, OutboundPart::Text(_)));
            if only_text {
                let text: Vec<&str> = parts
                    .iter()
                    .filter_map(|p| match p {
                        OutboundPart::Text(t) => Some(t.as_str()),
                        _ => None,
                    })
                    .collect();
                (
                    "user",
                    json!({"role": "user", "content": text.join("\n\n")}),
                )
            } else {
                let content: Vec<Value> = parts
                    .iter()
                    .map(|p| match p {
                        OutboundPart::Text(t) => json!({"type": "text", "text": t}),
                        OutboundPart::Image { mime_type, data } => json!({
                            "type": "image_url",
                            "image_url": {"url": format!("data:{mime_type};base64,{data}")}
                        }),
                        // Chat completions take a PDF as a `file` part with a data URL.
                        OutboundPart::Document {
                            mime_type,
                            data,
                            name,
                        } => json!({
                            "type": "file",
                            "file": {
                                "filename": name.as_deref().unwrap_or("document.pdf"),
                                "file_data": format!("data:{mime_type};base64,{data}"),
                            }
                        }),
                    })
                    .collect();
                ("user", json!({"role": "user", "content": content}))
            }
        }
        OutboundMessage::Assistant {
            text, tool_calls, ..
        } => {
            let mut m = Map::new();
            m.insert("role".into(), json!("assistant"));
            m.insert(
                "content".into(),
                if text.is_empty() && !tool_calls.is_empty() {
                    Value::Null
                } else {
                    json!(text)
                },
            );
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|c| {
                        json!({
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments}
                        })
                    })
                    .collect();
                m.insert("tool_calls".into(), Value::Array(calls));
            }
            ("assistant", Value::Object(m))
        }
        OutboundMessage::Tool {
            tool_call_id,
            content,
            ..
        } => (
            "tool",
            json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
        ),
    };
    EncodedMessage {
        role,
        items: vec![wire::item(ItemKind::Whole, &value)],
    }
}

/// The body of one streamed chat-completions request: its settings and tools first, the
/// messages last (see [`Body::with_head`]).
pub fn request_bytes(request: &ProviderRequest) -> Body {
    let mut head = Map::new();
    head.insert("model".into(), json!(request.model));
    head.insert("stream".into(), json!(true));
    head.insert("stream_options".into(), json!({"include_usage": true}));
    if let Some(max) = request.max_output_tokens {
        // OpenAI's reasoning models refuse `max_tokens`; the newer name is understood by the
        // other OpenAI-compatible servers that host reasoning models too.
        let key = if request.reasoning {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        head.insert(key.into(), json!(max));
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters}
                })
            })
            .collect();
        head.insert("tools".into(), Value::Array(tools));
        if !request.parallel_tool_calls {
            head.insert("parallel_tool_calls".into(), json!(false));
        }
    }
    let mut body = Body::with_head(head, 2 * request.messages.len());
    body.field("messages");
    body.push_static("[");
    let mut first = true;
    if !request.system.is_empty() {
        body.push_json(&json!({"role": "system", "content": request.system}));
        first = false;
    }
    // The cached messages as one run, walked only while the body streams; then the rest,
    // encoded now.
    if body.push_run(&request.encoded, !first) {
        first = false;
    }
    for message in request.encode_rest(encode_message) {
        for item in &message.items {
            if !first {
                body.push_static(",");
            }
            body.push_shared(&item.json);
            first = false;
        }
    }
    body.push_static("]");
    body.close();
    body
}

/// The body of one request as JSON (what tests inspect).
pub fn request_body(request: &ProviderRequest) -> Value {
    request_bytes(request).to_json()
}

/// Translate one `chat.completion.chunk` into typed chunks, appending to `out`.
pub fn parse_chunk(value: &Value, out: &mut Vec<Chunk>) {
    if let Some(choices) = value.get("choices").and_then(Value::as_array) {
        for choice in choices {
            if let Some(delta) = choice.get("delta") {
                // Different servers name reasoning differently; DeepSeek and vLLM use
                // `reasoning_content`, OpenRouter and Ollama use `reasoning`.
                for key in ["reasoning_content", "reasoning"] {
                    if let Some(text) = delta.get(key).and_then(Value::as_str) {
                        if !text.is_empty() {
                            out.push(Chunk::Reasoning(text.to_owned()));
                        }
                    }
                }
                if let Some(text) = delta.get("content").and_then(Value::as_str) {
                    if !text.is_empty() {
                        out.push(Chunk::Text(text.to_owned()));
                    }
                }
                if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                    for (position, call) in calls.iter().enumerate() {
                        let index = call
                            .get("index")
                            .and_then(Value::as_u64)
                            .map(|i| i as usize)
                            .unwrap_or(position);
                        let function = call.get("function");
                        out.push(Chunk::ToolCallDelta {
                            index,
                            id: call.get("id").and_then(Value::as_str).map(str::to_owned),
                            name: function
                                .and_then(|f| f.get("name"))
                                .and_then(Value::as_str)
                                .map(str::to_owned),
                            arguments: function
                                .and_then(|f| f.get("arguments"))
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                        });
                    }
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                out.push(Chunk::Finish(match reason {
                    "stop" => FinishReason::Stop,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "length" => FinishReason::Length,
                    "content_filter" => FinishReason::ContentFilter,
                    other => FinishReason::Other(other.to_owned()),
                }));
            }
        }
    }
    if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
        let get = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        out.push(Chunk::Usage(Usage {
            input_tokens: get("prompt_tokens"),
            output_tokens: get("completion_tokens"),
            cached_tokens: usage
                .get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens"))
                .and_then(Value::as_u64),
        }));
    }
}

impl Provider for OpenAiProvider {
    fn kind(&self) -> &'static str {
        "openai"
    }

    fn encode(&self, message: &OutboundMessage, form: MessageForm) -> Option<EncodedMessage> {
        Some(encode_message(message, form))
    }

    fn stream(&self, request: ProviderRequest) -> ChunkStream {
        let url = format!("{}/chat/completions", self.base_url);
        let api_key = match super::http::configured_key(self.api_key_env.as_deref()) {
            Ok(key) => key,
            Err(error) => return super::http::failed(error),
        };
        let mut builder = super::http::post_json(self.client().post(&url), request_bytes(&request));
        if let Some(key) = api_key {
            builder = builder.bearer_auth(key);
        }
        super::http::stream_sse(builder, url, ChunkEvents::default())
    }
}

/// The `chat.completion.chunk` event format for the shared SSE driver.
#[derive(Default)]
struct ChunkEvents {
    /// A `finish_reason` arrived. The stream still runs after it (a usage chunk can follow)
    /// until `[DONE]` or the end of the body.
    finished: bool,
}

impl super::http::SseParser for ChunkEvents {
    fn event(
        &mut self,
        _event: &str,
        data: &str,
        out: &mut Vec<Chunk>,
    ) -> Result<super::http::Progress, ProviderError> {
        if data == "[DONE]" {
            if !self.finished {
                // Some servers send [DONE] without a finish_reason; treat it as a normal stop
                // rather than failing a complete answer.
                out.push(Chunk::Finish(FinishReason::Stop));
                self.finished = true;
            }
            return Ok(super::http::Progress::Complete);
        }
        let value = super::http::json_event(data)?;
        if let Some(error) = value.get("error") {
            return Err(ProviderError::new(
                format!("the provider reported an error mid-stream: {error}"),
                true,
            ));
        }
        let first = out.len();
        parse_chunk(&value, out);
        if out[first..].iter().any(|c| matches!(c, Chunk::Finish(_))) {
            self.finished = true;
        }
        Ok(super::http::Progress::More)
    }

    fn end_of_body(&mut self, _out: &mut Vec<Chunk>) -> Result<(), ProviderError> {
        if self.finished {
            Ok(())
        } else {
            Err(super::http::cut_short())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_pieces_parse() {
        let mut out = Vec::new();
        parse_chunk(
            &json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"pa"}}]},"finish_reason":null}]}),
            &mut out,
        );
        parse_chunk(
            &json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":1}"}}]},"finish_reason":"tool_calls"}]}),
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                Chunk::ToolCallDelta {
                    index: 0,
                    id: Some("c1".into()),
                    name: Some("read_file".into()),
                    arguments: "{\"pa".into()
                },
                Chunk::ToolCallDelta {
                    index: 0,
                    id: None,
                    name: None,
                    arguments: "th\":1}".into()
                },
                Chunk::Finish(FinishReason::ToolCalls),
            ]
        );
    }

    #[test]
    fn usage_and_reasoning_parse() {
        let mut out = Vec::new();
        parse_chunk(
            &json!({"choices":[{"index":0,"delta":{"reasoning_content":"hmm","content":"hi"}}]}),
            &mut out,
        );
        parse_chunk(
            &json!({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}),
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                Chunk::Reasoning("hmm".into()),
                Chunk::Text("hi".into()),
                Chunk::Usage(Usage {
                    input_tokens: 10,
                    output_tokens: 3,
                    cached_tokens: Some(4)
                })
            ]
        );
    }

    #[test]
    fn chunk_events_end_at_done_and_fail_when_cut_short() {
        use super::super::http::{Progress, SseParser};
        let mut events = ChunkEvents::default();
        let mut out = Vec::new();
        let progress = events
            .event(
                "",
                r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}"#,
                &mut out,
            )
            .expect("a chunk");
        assert_eq!(progress, Progress::More, "a usage chunk may still follow");
        let progress = events
            .event(
                "",
                r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
                &mut out,
            )
            .expect("usage");
        assert_eq!(progress, Progress::More);
        assert_eq!(
            events.event("", "[DONE]", &mut out).expect("done"),
            Progress::Complete
        );
        assert!(
            matches!(out.as_slice(), [Chunk::Text(t), Chunk::Finish(FinishReason::Stop), Chunk::Usage(_)] if t == "hi")
        );
        assert!(events.end_of_body(&mut out).is_ok());

        // [DONE] without a finish_reason is a normal stop.
        let mut events = ChunkEvents::default();
        let mut out = Vec::new();
        events
            .event("", r#"{"choices":[{"delta":{"content":"x"}}]}"#, &mut out)
            .expect("a chunk");
        events.event("", "[DONE]", &mut out).expect("done");
        assert!(matches!(
            out.last(),
            Some(Chunk::Finish(FinishReason::Stop))
        ));

        // A body that ends before any finish is retried; an error object mid-stream fails.
        let mut events = ChunkEvents::default();
        let mut out = Vec::new();
        events
            .event("", r#"{"choices":[{"delta":{"content":"x"}}]}"#, &mut out)
            .expect("a chunk");
        assert!(events.end_of_body(&mut out).is_err_and(|e| e.retriable));
        let error = ChunkEvents::default()
            .event("", r#"{"error":{"message":"overloaded"}}"#, &mut out)
            .expect_err("an error object");
        assert!(error.message.contains("overloaded") && error.retriable);
        assert!(ChunkEvents::default().event("", "{nope", &mut out).is_err());
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
            tools: vec![crate::providers::ToolSpec {
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
        assert_eq!(body["tools"][0]["function"]["parameters"], schema);
        assert_eq!(schema["type"], "object", "the root is an object: {schema}");
    }
}
