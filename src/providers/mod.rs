//! Model providers: turn an outbound request into one vendor's wire request and its stream back
//! into typed chunks.
//!
//! Providers know nothing about sessions, tools or the canonical history. They receive the
//! projection that `engine::outbound` built (the only provider feed) and return a stream of
//! [`Chunk`]s. A stream is cancelled by dropping it, which closes the HTTP connection.

pub mod anthropic;
pub mod gemini;
mod http;
pub mod openai;
pub mod scripted;
pub mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::stream::BoxStream;
use serde_json::Value;

use crate::config::{Config, ProviderKind};
pub use wire::{EncodedList, EncodedMessage, MessageForm};

/// What a model sees: a system prompt, the projected messages, and the offered tools.
#[derive(Debug, Clone)]
pub struct ProviderRequest {
    /// The model name sent to the provider (the config's `name`, not the client-facing id).
    pub model: String,
    pub system: String,
    /// The conversation's first messages, already encoded by the provider this request goes
    /// to (kept by the engine's outbound cache, in this request's [`MessageForm`], and shared
    /// with it); `messages` follow them.
    pub encoded: Arc<EncodedList>,
    /// The rest of the conversation, typed: what the cache does not hold yet.
    pub messages: Vec<OutboundMessage>,
    pub tools: Vec<ToolSpec>,
    pub max_output_tokens: Option<u64>,
    /// The model thinks before answering (from the model catalog).
    pub reasoning: bool,
    /// The configured thinking budget, if any (see `ModelConfig::thinking_budget`).
    pub thinking_budget: Option<u64>,
    /// Whether the model may call several tools in one answer; `false` is sent to vendors that
    /// have a switch for it.
    pub parallel_tool_calls: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OutboundPart {
    Text(String),
    Image {
        mime_type: String,
        data: String,
    },
    /// A document the model reads natively (today: PDF), base64 in `data`.
    Document {
        mime_type: String,
        data: String,
        name: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct OutboundToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
    /// Only the extras owned by the provider this request goes to.
    pub extras: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OutboundMessage {
    User {
        parts: Vec<OutboundPart>,
    },
    Assistant {
        text: String,
        tool_calls: Vec<OutboundToolCall>,
        extras: BTreeMap<String, Value>,
    },
    Tool {
        tool_call_id: String,
        name: String,
        content: String,
    },
}

impl ProviderRequest {
    /// How this request's messages are written.
    pub fn form(&self) -> MessageForm {
        MessageForm {
            calls_as_text: self.tools.is_empty(),
        }
    }

    /// The typed messages (those the cache does not hold) in one vendor's encoding; they follow
    /// `encoded`'s (see [`ProviderRequest::all_encoded`]).
    pub fn encode_rest(
        &self,
        encode: impl Fn(&OutboundMessage, MessageForm) -> EncodedMessage,
    ) -> Vec<EncodedMessage> {
        let form = self.form();
        self.messages.iter().map(|m| encode(m, form)).collect()
    }

    /// Every message of the conversation in one vendor's encoding: the cached ones, then
    /// `rest` (from [`ProviderRequest::encode_rest`]).
    pub fn all_encoded<'a>(
        &'a self,
        rest: &'a [EncodedMessage],
    ) -> impl Iterator<Item = &'a EncodedMessage> {
        self.encoded.messages().iter().chain(rest)
    }
}

/// A tool as offered to the model.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// A built-in tool's name, or an MCP tool's `mcp__<server>__<tool>`.
    pub name: std::borrow::Cow<'static, str>,
    pub description: std::borrow::Cow<'static, str>,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FinishReason {
    Stop,
    ToolCalls,
    Length,
    ContentFilter,
    Other(String),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: Option<u64>,
}

/// One typed piece of a streamed model response.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    Text(String),
    Reasoning(String),
    /// A piece of tool call `index`. `id` and `name` come with the first piece; `arguments` is
    /// a fragment of the JSON text that the engine concatenates.
    ToolCallDelta {
        index: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    },
    Finish(FinishReason),
    Usage(Usage),
    /// A provider-private extra for the assistant message (key `_<kind>.…`), such as
    /// Anthropic's signed thinking blocks. A later extra with the same key replaces the earlier.
    Extra {
        key: String,
        value: Value,
    },
    /// A provider-private extra for tool call `index`, such as Gemini's thought signature.
    ToolCallExtra {
        index: usize,
        key: String,
        value: Value,
    },
}

/// Why a provider call failed. `retriable` drives the retry policy and what the user is told.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    pub message: String,
    pub retriable: bool,
    pub status: Option<u16>,
    /// The provider's `Retry-After`, when it sent one.
    pub retry_after: Option<std::time::Duration>,
    /// The request did not fit the model's context window; compaction may help, a plain
    /// retry never does.
    pub context_overflow: bool,
}

impl ProviderError {
    pub fn new(message: impl Into<String>, retriable: bool) -> Self {
        ProviderError {
            message: message.into(),
            retriable,
            status: None,
            retry_after: None,
            context_overflow: false,
        }
    }
}

/// Whether an error text from a provider says the prompt was too long for the model.
///
/// Vendors word this differently; these phrases cover OpenAI, Anthropic, Gemini, vLLM,
/// llama.cpp and Ollama.
pub fn looks_like_context_overflow(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    [
        "context_length_exceeded",
        "maximum context length",
        "context window",
        "prompt is too long",
        "too many tokens",
        "exceeds the context",
        "input is too long",
        "context length",
        "exceeds the maximum number of tokens",
        "request_too_large",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

/// A tool call written out as text, for a request that declares no tools.
pub fn call_as_text(call: &OutboundToolCall) -> String {
    format!("[called tool {} with {}]", call.name, call.arguments)
}

/// A tool result written out as text, for a request that declares no tools.
pub fn result_as_text(name: &str, content: &str) -> String {
    format!("[result of tool {name}]\n{content}")
}

pub type ChunkStream = BoxStream<'static, Result<Chunk, ProviderError>>;

pub trait Provider: Send + Sync {
    /// The provider kind that owns extras keyed `_<kind>.…`.
    fn kind(&self) -> &'static str;
    /// Serialize one projected message in this vendor's wire format, for the engine's
    /// outbound cache. `None` (the default): this provider reads typed messages only, and every
    /// request carries the whole conversation typed.
    fn encode(&self, _message: &OutboundMessage, _form: MessageForm) -> Option<EncodedMessage> {
        None
    }
    /// Start one streamed completion. The stream ends after `Finish` (and a trailing `Usage`).
    fn stream(&self, request: ProviderRequest) -> ChunkStream;
}

/// The providers named in a config, built once and shared by every session.
#[derive(Clone)]
pub struct ProviderRegistry {
    providers: BTreeMap<String, Arc<dyn Provider>>,
}

impl ProviderRegistry {
    pub fn from_config(config: &Config) -> Self {
        let mut providers: BTreeMap<String, Arc<dyn Provider>> = BTreeMap::new();
        for (name, provider) in &config.providers {
            if let Some(var) = &provider.api_key_env {
                // Said once at start-up so a missing key is seen before the first prompt; the
                // request itself fails with the same advice. Only the variable's name is logged.
                if http::api_key(var).is_err() {
                    tracing::warn!(
                        "provider {name}: the environment variable {var} (api_key_env) is not set; requests to it will fail until it is"
                    );
                }
            }
            let built: Arc<dyn Provider> = match provider.kind {
                ProviderKind::Openai => Arc::new(openai::OpenAiProvider::new(
                    provider.base_url.clone().unwrap_or_default(),
                    provider.api_key_env.clone(),
                )),
                ProviderKind::Anthropic => Arc::new(anthropic::AnthropicProvider::new(
                    provider
                        .base_url
                        .clone()
                        .unwrap_or_else(|| anthropic::DEFAULT_BASE_URL.to_owned()),
                    provider.api_key_env.clone(),
                )),
                ProviderKind::Gemini => Arc::new(gemini::GeminiProvider::new(
                    provider
                        .base_url
                        .clone()
                        .unwrap_or_else(|| gemini::DEFAULT_BASE_URL.to_owned()),
                    provider.api_key_env.clone(),
                )),
                ProviderKind::Scripted => Arc::new(scripted::ScriptedProvider::new()),
            };
            providers.insert(name.clone(), built);
        }
        ProviderRegistry { providers }
    }

    pub fn get(&self, provider_name: &str) -> Option<Arc<dyn Provider>> {
        self.providers.get(provider_name).cloned()
    }
}
