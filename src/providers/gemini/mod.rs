//! The Gemini provider: `POST {base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse`.
//!
//! Each message's parts are serialized once (`encode_message`, kept by the engine's outbound
//! cache) and merged per request: `user`/`model` contents,
//! `functionCall`/`functionResponse` parts (Gemini pairs them by name and order, so a whole
//! batch of results goes in one content), `inlineData` for images and PDFs, the system prompt
//! as `systemInstruction`, and tool schemas cut down to the subset Gemini accepts. Thought
//! signatures are kept as `_gemini.thoughtSignature` extras (on the tool call, or on the message
//! for one that came on a text part) and reattached only here. Function calls arrive whole and
//! without ids, so ids are made up when they arrive and then stored with the call.

use std::sync::OnceLock;

use serde_json::{json, Map, Value};

use super::http::{self, Progress, SseParser};
use super::wire::{self, Body, EncodedItem, EncodedMessage, ItemKind, MessageForm};
use super::{
    Chunk, ChunkStream, FinishReason, OutboundMessage, OutboundPart, Provider, ProviderError,
    ProviderRequest, Usage,
};

mod schema;

pub use schema::{gemini_schema, inline_refs};

pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";
/// The extra holding a thought signature, on a tool call or on the assistant message.
pub const SIGNATURE_EXTRA: &str = "_gemini.thoughtSignature";
/// The value Google documents for function calls that carry no signature of their own (calls
/// another vendor's model made): Gemini 3 refuses unsigned calls in the current turn otherwise.
const UNSIGNED_CALL: &str = "skip_thought_signature_validator";

pub struct GeminiProvider {
    base_url: String,
    api_key_env: Option<String>,
    client: OnceLock<reqwest::Client>,
}

impl GeminiProvider {
    pub fn new(base_url: String, api_key_env: Option<String>) -> Self {
        let base = base_url.trim_end_matches('/');
        let base = base.strip_suffix("/v1beta").unwrap_or(base);
        GeminiProvider {
            base_url: base.to_owned(),
            api_key_env,
            client: OnceLock::new(),
        }
    }
}

impl Provider for GeminiProvider {
    fn kind(&self) -> &'static str {
        "gemini"
    }

    fn encode(&self, message: &OutboundMessage, form: MessageForm) -> Option<EncodedMessage> {
        Some(encode_message(message, form))
    }

    fn stream(&self, request: ProviderRequest) -> ChunkStream {
        let key = match http::configured_key(self.api_key_env.as_deref()) {
            Ok(key) => key,
            Err(error) => return http::failed(error),
        };
        let model = request.model.trim_start_matches("models/");
        let url = format!(
            "{}/v1beta/models/{model}:streamGenerateContent?alt=sse",
            self.base_url
        );
        let builder = self.client.get_or_init(http::build_client).post(&url);
        let mut builder = http::post_json(builder, request_bytes(&request));
        if let Some(key) = key {
            // The header keeps the key out of URLs, which proxies and logs record.
            builder = builder.header("x-goog-api-key", key);
        }
        http::stream_sse(builder, url, Parser::default())
    }
}

/// One projected message as Gemini parts, in the role it is sent under.
pub fn encode_message(message: &OutboundMessage, form: MessageForm) -> EncodedMessage {
    // Without declared tools (the summarizing request of a compaction), calls and results are
    // written out as text rather than as function parts nothing declares.
    let as_text = form.calls_as_text;
    let (role, items) = match message {
        OutboundMessage::User { parts } => ("user", user_parts(parts)),
        OutboundMessage::Assistant {
            text,
            tool_calls,
            extras,
        } => {
            let mut items = Vec::new();
            let signature = extras.get(SIGNATURE_EXTRA);
            if !text.is_empty() || (signature.is_some() && tool_calls.is_empty()) {
                let mut part = json!({"text": text});
                if let Some(signature) = signature {
                    part["thoughtSignature"] = signature.clone();
                }
                items.push(wire::item(ItemKind::Text, &part));
            }
            for call in tool_calls {
                if as_text {
                    items.push(wire::item(
                        ItemKind::Text,
                        &json!({"text": super::call_as_text(call)}),
                    ));
                    continue;
                }
                let mut part = json!({
                    "functionCall": {"name": call.name, "args": call_args(&call.arguments)}
                });
                let signature = call.extras.get(SIGNATURE_EXTRA);
                if let Some(signature) = signature {
                    part["thoughtSignature"] = signature.clone();
                }
                items.push(wire::item(
                    ItemKind::Call {
                        signed: signature.is_some(),
                    },
                    &part,
                ));
            }
            ("model", items)
        }
        OutboundMessage::Tool { name, content, .. } if as_text => (
            "user",
            vec![wire::item(
                ItemKind::Text,
                &json!({"text": super::result_as_text(name, content)}),
            )],
        ),
        OutboundMessage::Tool { name, content, .. } => (
            "user",
            vec![wire::item(
                ItemKind::Result,
                &json!({
                    "functionResponse": {"name": name, "response": {"content": content}}
                }),
            )],
        ),
    };
    EncodedMessage { role, items }
}

/// The body of one `streamGenerateContent` request: system prompt, tools and settings first,
/// the contents last (see [`Body::with_head`]).
pub fn request_bytes(request: &ProviderRequest) -> Body {
    let rest = request.encode_rest(encode_message);
    let mut contents = wire::merge_by_role(request.all_encoded(&rest));
    if request.model.contains("gemini-3") {
        sign_current_turn(&mut contents);
    }

    let mut head = Map::new();
    if !request.system.is_empty() {
        head.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": request.system}]}),
        );
    }
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "parameters": gemini_schema(&inline_refs(&t.parameters)),
                })
            })
            .collect();
        head.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
    }
    let mut generation = Map::new();
    if let Some(max) = request.max_output_tokens {
        generation.insert("maxOutputTokens".into(), json!(max));
    }
    if request.reasoning {
        let mut thinking = json!({"includeThoughts": true});
        if let Some(budget) = request.thinking_budget {
            thinking["thinkingBudget"] = json!(budget);
        }
        generation.insert("thinkingConfig".into(), thinking);
    }
    if !generation.is_empty() {
        head.insert("generationConfig".into(), Value::Object(generation));
    }
    let pieces: usize = contents.iter().map(|(_, items)| items.len() + 1).sum();
    let mut body = Body::with_head(head, 2 * pieces);
    body.field("contents");
    body.push_role_messages(&contents, "parts");
    body.close();
    body
}

/// The body of one request as JSON (what tests inspect).
pub fn request_body(request: &ProviderRequest) -> Value {
    request_bytes(request).to_json()
}

/// Give the first function call of each model step in the current turn (after the last user
/// content that is not only function responses) a signature if it has none.
fn sign_current_turn(contents: &mut [(&'static str, Vec<EncodedItem>)]) {
    let turn_start = contents
        .iter()
        .rposition(|(role, items)| {
            *role == "user" && items.iter().any(|i| i.kind != ItemKind::Result)
        })
        .unwrap_or(0);
    for (role, items) in contents.iter_mut().skip(turn_start) {
        if *role != "model" {
            continue;
        }
        if let Some(first_call) = items
            .iter_mut()
            .find(|i| matches!(i.kind, ItemKind::Call { .. }))
        {
            if first_call.kind == (ItemKind::Call { signed: false }) {
                if let Ok(mut part) = serde_json::from_str::<Value>(&first_call.json) {
                    part["thoughtSignature"] = json!(UNSIGNED_CALL);
                    *first_call = wire::item(ItemKind::Call { signed: true }, &part);
                }
            }
        }
    }
}

fn user_parts(parts: &[OutboundPart]) -> Vec<EncodedItem> {
    parts
        .iter()
        .filter_map(|part| match part {
            OutboundPart::Text(text) if text.is_empty() => None,
            OutboundPart::Text(text) => Some(wire::item(ItemKind::Text, &json!({"text": text}))),
            OutboundPart::Image { mime_type, data }
            | OutboundPart::Document {
                mime_type, data, ..
            } => Some(wire::item(
                ItemKind::Media,
                &json!({"inlineData": {"mimeType": mime_type, "data": data}}),
            )),
        })
        .collect()
}

fn call_args(arguments: &str) -> Value {
    let trimmed = arguments.trim();
    if trimmed.is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(value @ Value::Object(_)) => value,
        _ => json!({"_unparsed_arguments": arguments}),
    }
}

/// The state of one streamed answer.
#[derive(Default)]
pub struct Parser {
    calls: usize,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    /// A fresh id prefix per answer, so made-up call ids never collide across answers.
    id_prefix: Option<String>,
}

impl Parser {
    fn call_id(&mut self, index: usize) -> String {
        let prefix = self
            .id_prefix
            .get_or_insert_with(|| uuid::Uuid::new_v4().simple().to_string()[..12].to_owned());
        format!("gemini_{prefix}_{index}")
    }
}

fn finish_reason(reason: &str, called: bool) -> FinishReason {
    match reason {
        // Gemini ends an answer with function calls with STOP too.
        "STOP" if called => FinishReason::ToolCalls,
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        other => FinishReason::Other(other.to_owned()),
    }
}

impl SseParser for Parser {
    fn event(
        &mut self,
        _event: &str,
        data: &str,
        out: &mut Vec<Chunk>,
    ) -> Result<Progress, ProviderError> {
        let value = http::json_event(data)?;
        if let Some(error) = value.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            let status = error.get("status").and_then(Value::as_str).unwrap_or("");
            let retriable = matches!(status, "UNAVAILABLE" | "RESOURCE_EXHAUSTED" | "INTERNAL");
            let mut e = ProviderError::new(
                format!("the provider reported an error mid-stream: {status} {message}"),
                retriable,
            );
            e.context_overflow = super::looks_like_context_overflow(message);
            return Err(e);
        }
        if let Some(reason) = value
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
        {
            // The prompt itself was blocked: there will be no candidate.
            tracing::info!("gemini blocked the prompt: {reason}");
            self.finish = Some(FinishReason::ContentFilter);
        }
        if let Some(candidate) = value.pointer("/candidates/0") {
            let parts = candidate
                .pointer("/content/parts")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for part in parts {
                let signature = part.get("thoughtSignature").cloned();
                if let Some(call) = part.get("functionCall") {
                    let index = self.calls;
                    self.calls += 1;
                    let id = match call.get("id").and_then(Value::as_str) {
                        Some(id) if !id.is_empty() => id.to_owned(),
                        _ => self.call_id(index),
                    };
                    let args = call.get("args").cloned().unwrap_or_else(|| json!({}));
                    out.push(Chunk::ToolCallDelta {
                        index,
                        id: Some(id),
                        name: call.get("name").and_then(Value::as_str).map(str::to_owned),
                        arguments: args.to_string(),
                    });
                    if let Some(signature) = signature {
                        out.push(Chunk::ToolCallExtra {
                            index,
                            key: SIGNATURE_EXTRA.to_owned(),
                            value: signature,
                        });
                    }
                    continue;
                }
                if let Some(text) = part.get("text").and_then(Value::as_str) {
                    if !text.is_empty() {
                        if part.get("thought").and_then(Value::as_bool) == Some(true) {
                            out.push(Chunk::Reasoning(text.to_owned()));
                        } else {
                            out.push(Chunk::Text(text.to_owned()));
                        }
                    }
                }
                if let Some(signature) = signature {
                    out.push(Chunk::Extra {
                        key: SIGNATURE_EXTRA.to_owned(),
                        value: signature,
                    });
                }
            }
            if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
                self.finish = Some(finish_reason(reason, self.calls > 0));
            }
        }
        if let Some(meta) = value.get("usageMetadata") {
            let get = |k: &str| meta.get(k).and_then(Value::as_u64);
            // Thinking tokens are billed as output; the engine's output is what the model made.
            self.usage = Some(Usage {
                input_tokens: get("promptTokenCount").unwrap_or(0),
                output_tokens: get("candidatesTokenCount").unwrap_or(0)
                    + get("thoughtsTokenCount").unwrap_or(0),
                cached_tokens: get("cachedContentTokenCount"),
            });
        }
        Ok(Progress::More)
    }

    /// Gemini has no end marker: the body ends after the chunk with `finishReason`.
    fn end_of_body(&mut self, out: &mut Vec<Chunk>) -> Result<(), ProviderError> {
        let Some(finish) = self.finish.take() else {
            return Err(http::cut_short());
        };
        out.push(Chunk::Finish(finish));
        if let Some(usage) = self.usage.take() {
            out.push(Chunk::Usage(usage));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::schema::MAX_REF_DEPTH;
    use super::*;
    use crate::providers::{OutboundToolCall, ToolSpec};

    #[test]
    fn history_converts_with_signatures_and_merged_responses() {
        let mut call_extras = BTreeMap::new();
        call_extras.insert(SIGNATURE_EXTRA.to_owned(), json!("SIG"));
        let call = |id: &str, extras: BTreeMap<String, Value>| OutboundToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: r#"{"path":"a"}"#.into(),
            extras,
        };
        let request = ProviderRequest {
            encoded: Default::default(),
            model: "gemini-2.5-pro".into(),
            system: "be brief".into(),
            messages: vec![
                OutboundMessage::User {
                    parts: vec![
                        OutboundPart::Text("look".into()),
                        OutboundPart::Image {
                            mime_type: "image/png".into(),
                            data: "AAAA".into(),
                        },
                    ],
                },
                OutboundMessage::Assistant {
                    text: "Reading.".into(),
                    tool_calls: vec![call("c1", call_extras), call("c2", BTreeMap::new())],
                    extras: BTreeMap::new(),
                },
                OutboundMessage::Tool {
                    tool_call_id: "c1".into(),
                    name: "read_file".into(),
                    content: "one".into(),
                },
                OutboundMessage::Tool {
                    tool_call_id: "c2".into(),
                    name: "read_file".into(),
                    content: "two".into(),
                },
            ],
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "read".into(),
                parameters: json!({"$schema": "x", "type": "object", "properties": {"path": {"type": ["string", "null"]}}, "additionalProperties": false}),
            }],
            max_output_tokens: Some(100),
            reasoning: true,
            thinking_budget: None,
            parallel_tool_calls: true,
        };
        let body = request_body(&request);
        let contents = body["contents"].as_array().unwrap();
        assert_eq!(contents.len(), 3, "{body:#}");
        assert_eq!(
            contents[0]["parts"][1]["inlineData"]["mimeType"],
            "image/png"
        );
        assert_eq!(contents[1]["role"], "model");
        assert_eq!(contents[1]["parts"][1]["thoughtSignature"], "SIG");
        assert!(contents[1]["parts"][2].get("thoughtSignature").is_none());
        assert_eq!(contents[2]["parts"].as_array().unwrap().len(), 2);
        assert_eq!(
            contents[2]["parts"][1]["functionResponse"]["response"]["content"],
            "two"
        );
        let params = &body["tools"][0]["functionDeclarations"][0]["parameters"];
        assert_eq!(
            params,
            &json!({"type": "object", "properties": {"path": {"type": "string", "nullable": true}}})
        );
        assert_eq!(body["systemInstruction"]["parts"][0]["text"], "be brief");
        assert_eq!(
            body["generationConfig"]["thinkingConfig"]["includeThoughts"],
            true
        );
    }

    #[test]
    fn gemini_3_gets_a_placeholder_signature_only_on_unsigned_calls_of_the_current_turn() {
        let call = |id: &str| OutboundToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: "{}".into(),
            extras: BTreeMap::new(),
        };
        let step = |id: &str| OutboundMessage::Assistant {
            text: String::new(),
            tool_calls: vec![call(id)],
            extras: BTreeMap::new(),
        };
        let result = |id: &str| OutboundMessage::Tool {
            tool_call_id: id.into(),
            name: "read_file".into(),
            content: "x".into(),
        };
        let user = |t: &str| OutboundMessage::User {
            parts: vec![OutboundPart::Text(t.into())],
        };
        let mut request = ProviderRequest {
            encoded: Default::default(),
            model: "gemini-3-pro-preview".into(),
            system: String::new(),
            messages: vec![
                user("old"),
                step("a"),
                result("a"),
                user("new"),
                step("b"),
                result("b"),
                step("c"),
                result("c"),
            ],
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "read".into(),
                parameters: json!({"type": "object"}),
            }],
            max_output_tokens: None,
            reasoning: false,
            thinking_budget: None,
            parallel_tool_calls: true,
        };
        let body = request_body(&request);
        let signatures: Vec<Value> = body["contents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["role"] == "model")
            .map(|c| c["parts"][0]["thoughtSignature"].clone())
            .collect();
        assert_eq!(
            signatures,
            vec![Value::Null, json!(UNSIGNED_CALL), json!(UNSIGNED_CALL)]
        );
        request.model = "gemini-2.5-pro".into();
        assert!(!request_body(&request).to_string().contains(UNSIGNED_CALL));
    }

    #[test]
    fn an_mcp_schema_with_references_becomes_gemini_s_subset() {
        // What MCP servers send (pydantic and zod write $defs, oneOf, const and
        // additionalProperties), which Gemini's API refuses as it stands.
        let given = json!({
            "type": "object",
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$defs": {
                "Mode": {"type": "string", "enum": ["fast", "slow"]},
                "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}
            },
            "properties": {
                "mode": {"$ref": "#/$defs/Mode"},
                "const": {"const": "x"},
                "limit": {"oneOf": [{"type": "integer"}, {"type": "null"}]},
                "tree": {"$ref": "#/$defs/Node"},
                "tags": {"type": "array", "items": {"$ref": "#/$defs/Mode"}}
            },
            "required": ["mode"],
            "additionalProperties": false
        });
        let request = ProviderRequest {
            encoded: Default::default(),
            model: "gemini-2.5-pro".into(),
            system: String::new(),
            messages: Vec::new(),
            tools: vec![ToolSpec {
                name: "mcp__s__t".into(),
                description: "t".into(),
                parameters: given,
            }],
            max_output_tokens: None,
            reasoning: false,
            thinking_budget: None,
            parallel_tool_calls: true,
        };
        let body = request_body(&request);
        let params = &body["tools"][0]["functionDeclarations"][0]["parameters"];
        let text = params.to_string();
        for refused in ["$ref", "$defs", "$schema", "additionalProperties", "oneOf"] {
            assert!(!text.contains(refused), "{refused} left in {params:#}");
        }
        assert_eq!(
            params["properties"]["mode"]["enum"],
            json!(["fast", "slow"])
        );
        // A property may be named `const`; the keyword inside it is what changes.
        assert_eq!(params["properties"]["const"], json!({"enum": ["x"]}));
        assert_eq!(params["properties"]["limit"]["anyOf"][0]["type"], "integer");
        assert_eq!(
            params["properties"]["tags"]["items"]["enum"],
            json!(["fast", "slow"])
        );
        // A recursive reference ends as an open object after a few levels.
        let mut node = &params["properties"]["tree"];
        let mut levels = 0;
        while node["properties"]["next"].is_object() {
            node = &node["properties"]["next"];
            levels += 1;
        }
        assert_eq!(levels, MAX_REF_DEPTH);
        assert_eq!(params["required"], json!(["mode"]));
    }

    #[test]
    fn stream_parses_thoughts_calls_and_usage() {
        let mut parser = Parser::default();
        let mut out = Vec::new();
        for e in [
            r#"{"candidates":[{"content":{"parts":[{"text":"pondering","thought":true}],"role":"model"},"index":0}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"Reading."},{"functionCall":{"name":"read_file","args":{"path":"a"}},"thoughtSignature":"SIG"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":20,"candidatesTokenCount":7,"thoughtsTokenCount":3,"cachedContentTokenCount":8,"totalTokenCount":30}}"#,
        ] {
            assert_eq!(parser.event("", e, &mut out).unwrap(), Progress::More);
        }
        parser.end_of_body(&mut out).unwrap();
        assert_eq!(out[0], Chunk::Reasoning("pondering".into()));
        assert_eq!(out[1], Chunk::Text("Reading.".into()));
        match &out[2] {
            Chunk::ToolCallDelta {
                index: 0,
                id: Some(id),
                name: Some(name),
                arguments,
            } => {
                assert!(id.starts_with("gemini_"));
                assert_eq!(name, "read_file");
                assert_eq!(arguments, r#"{"path":"a"}"#);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            out[3],
            Chunk::ToolCallExtra {
                index: 0,
                key: SIGNATURE_EXTRA.into(),
                value: json!("SIG")
            }
        );
        assert_eq!(out[4], Chunk::Finish(FinishReason::ToolCalls));
        assert_eq!(
            out[5],
            Chunk::Usage(Usage {
                input_tokens: 20,
                output_tokens: 10,
                cached_tokens: Some(8)
            })
        );
    }

    #[test]
    fn a_body_without_finish_is_cut_short_and_safety_is_a_filter() {
        let mut parser = Parser::default();
        parser
            .event(
                "",
                r#"{"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"index":0}]}"#,
                &mut Vec::new(),
            )
            .unwrap();
        assert!(parser.end_of_body(&mut Vec::new()).unwrap_err().retriable);
        let mut parser = Parser::default();
        let mut out = Vec::new();
        parser
            .event(
                "",
                r#"{"candidates":[{"finishReason":"SAFETY","index":0}]}"#,
                &mut out,
            )
            .unwrap();
        parser.end_of_body(&mut out).unwrap();
        assert_eq!(out, vec![Chunk::Finish(FinishReason::ContentFilter)]);
    }
}
