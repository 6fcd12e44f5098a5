//! The benchmarks' model server: the workspace's one mock LLM (`crates/mock-llm`), with the
//! benchmarks' policy on top. Each request is answered by a `Brain` that looks at the request
//! body, like a real model, so one mock serves whole scripted turns (a tool call, then the final
//! text once the tool result is in the history); the brain's `Reply` becomes a mock `Script`.
//!
//! The HTTP server, the dialects (chat completions for tandem, the Responses API for Codex) and
//! the write loops are the crate's. Numbered delta streams are its `Step::Deltas`, written with
//! one `format!`, one write, one flush and one `Instant::now()` per delta, as this file's own
//! server did before, so the latency figures keep their meaning.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tandem_mock_llm::{Dialect, IncomingRequest, RecordedRequest, Script, Step};

use crate::common::{common_prefix_len, Result, TURN_TIMEOUT};

/// How the mock streams numbered text deltas.
#[derive(Clone, Copy)]
pub struct StreamShape {
    pub deltas: usize,
    /// `None`: every chunk is written (and flushed) as soon as the previous one is.
    pub pace: Option<Duration>,
}

/// One answer of the model.
pub enum Reply {
    /// `shape.deltas` chunks whose texts are `"0 "`, `"1 "`, …; their write instants are reported
    /// through `MockLlm::next_send_times`.
    Deltas(StreamShape),
    /// The same with each text prefixed by a tag (`"17:0 "`), so streams of many sessions can be
    /// told apart; reported through `MockLlm::next_tagged_send_times`.
    TaggedDeltas(StreamShape, String),
    /// Tool calls `(id, name, arguments JSON)` in one assistant message.
    ToolCalls(Vec<(String, String, String)>),
    /// A final text in one delta.
    Text(String),
    /// A hostile answer far larger than any real one, streamed in pieces (the floods benchmark).
    Flood(Flood),
}

/// What a flooding answer streams: `bytes` in all, `piece` bytes an event.
#[derive(Clone)]
pub enum Flood {
    /// Text deltas.
    Text { bytes: usize, piece: usize },
    /// One tool call whose arguments (`{"path":…,"content":"aaaa…`) are streamed piece by piece.
    ToolArguments {
        id: String,
        name: String,
        path: String,
        bytes: usize,
        piece: usize,
    },
}

/// Decides the reply from the request body.
pub type Brain = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

/// Which wire format a brain answers in; a request in another one gets a 404, as from a real
/// server that does not speak it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// `POST /v1/chat/completions`, `chat.completion.chunk` events, `[DONE]`.
    ChatCompletions,
    /// `POST /v1/responses`, typed `response.*` events.
    Responses,
}

/// What a mock keeps and reports beyond its answers (the history benchmark's needs).
#[derive(Clone, Copy, Default)]
pub struct MockOptions {
    /// Keep every request's body bytes as they arrived (`RecordedRequest::raw_body`).
    pub keep_raw_bodies: bool,
    /// Report usage as a provider with a prefix cache would, in tokens of four bytes of the raw
    /// body: prompt tokens = body bytes / 4, cached tokens = (the bytes this body shares from
    /// its start with the previous request of the same session) / 4. The session is the
    /// request's `prompt_cache_key` (Codex sends its thread id there) or, without one, the
    /// mock's only session, so a mock measured this way serves one session of a server that
    /// sends no key. It is a model of a cache keyed on an exact prefix, not any vendor's
    /// tokenizer: what it rewards is a request that starts with the bytes of the one before.
    pub prefix_cache: bool,
}

/// A model server on 127.0.0.1 with a random port.
pub struct MockLlm {
    pub base_url: String,
    mock: tandem_mock_llm::MockLlm,
}

impl MockLlm {
    /// Every request is answered with the same numbered delta stream.
    pub async fn deltas(shape: StreamShape) -> Result<MockLlm> {
        MockLlm::start(
            Wire::ChatCompletions,
            Arc::new(move |_: &Value| Reply::Deltas(shape)),
        )
        .await
    }

    pub async fn start(wire: Wire, brain: Brain) -> Result<MockLlm> {
        MockLlm::start_with(wire, brain, MockOptions::default()).await
    }

    pub async fn start_with(wire: Wire, brain: Brain, options: MockOptions) -> Result<MockLlm> {
        let dialect = match wire {
            Wire::ChatCompletions => Dialect::OpenAi,
            Wire::Responses => Dialect::Responses,
        };
        // The previous body of each session, for the prefix cache's usage.
        let previous: Mutex<HashMap<String, Vec<u8>>> = Mutex::new(HashMap::new());
        let responder = move |request: &IncomingRequest| {
            if request.dialect != dialect {
                return Script::new().step(Step::Plain {
                    status: 404,
                    content_type: "application/json".to_owned(),
                    body: json!({"error": {"message": format!("this benchmark mock does not serve {}", request.path)}}).to_string(),
                });
            }
            let reply = script(brain(request.body));
            if !options.prefix_cache {
                return reply;
            }
            let session = request.body["prompt_cache_key"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let cached_bytes = match previous.lock() {
                Ok(mut previous) => {
                    let shared = previous
                        .get(&session)
                        .map_or(0, |before| common_prefix_len(before, request.raw_body));
                    previous.insert(session, request.raw_body.to_vec());
                    shared
                }
                Err(_) => 0,
            };
            with_cached_usage(
                reply,
                (request.raw_body.len() / 4) as u64,
                (cached_bytes / 4) as u64,
            )
        };
        let mut builder = tandem_mock_llm::MockLlm::builder().responder(responder);
        if options.keep_raw_bodies {
            builder = builder.keep_raw_bodies();
        }
        let mock = builder.start().await?;
        Ok(MockLlm {
            base_url: mock.base_url(),
            mock,
        })
    }

    /// The write instants of the next completed delta stream, indexed by delta number.
    pub async fn next_send_times(&mut self) -> Result<Vec<Instant>> {
        Ok(self.next_tagged_send_times().await?.1)
    }

    /// The tag and write instants of the next completed delta stream.
    pub async fn next_tagged_send_times(&mut self) -> Result<(String, Vec<Instant>)> {
        let times = tokio::time::timeout(TURN_TIMEOUT, self.mock.next_delta_times())
            .await
            .map_err(|_| "the mock never finished a stream")?
            .ok_or("the mock server stopped")?;
        Ok((times.tag, times.sent))
    }

    /// Model requests answered so far.
    pub fn requests(&self) -> usize {
        self.mock.request_count()
    }

    /// The records of the requests from number `first` (0-based) on.
    pub fn recorded_since(&self, first: usize) -> Vec<RecordedRequest> {
        self.mock.recorded_since(first)
    }

    /// Bytes of `Reply::Flood` answers written into the socket so far (all connections): how
    /// much of a flood got out before tandem hung up.
    pub fn flooded_bytes(&self) -> usize {
        self.mock.repeated_payload_bytes()
    }
}

/// The mock script of a reply, in the dialect-neutral steps the crate renders.
fn script(reply: Reply) -> Script {
    match reply {
        Reply::Deltas(shape) => Script::new()
            .deltas(shape.deltas, shape.pace, None)
            .finish("stop")
            .done(),
        Reply::TaggedDeltas(shape, tag) => Script::new()
            .deltas(shape.deltas, shape.pace, Some(tag))
            .finish("stop")
            .done(),
        Reply::ToolCalls(calls) => Script::tool_calls(calls),
        Reply::Text(text) => Script::new()
            .role()
            .text(text)
            .finish("stop")
            .usage(10, 5)
            .done(),
        Reply::Flood(Flood::Text { bytes, piece }) => Script::new()
            .role()
            .repeat(Step::Text("a".repeat(piece)), bytes.div_ceil(piece.max(1)))
            .finish("stop")
            .done(),
        Reply::Flood(Flood::ToolArguments {
            id,
            name,
            path,
            bytes,
            piece,
        }) => Script::new()
            .role()
            .tool_call(id, name, format!("{{\"path\":\"{path}\",\"content\":\""))
            .repeat(
                Step::ToolArguments {
                    index: 0,
                    json_piece: "a".repeat(piece),
                },
                bytes.div_ceil(piece.max(1)),
            )
            .tool_arguments(0, "\"}")
            .finish("tool_calls")
            .done(),
    }
}

/// `reply` with its usage replaced by the prefix cache's numbers (see `MockOptions`).
fn with_cached_usage(mut reply: Script, prompt: u64, cached: u64) -> Script {
    for step in &mut reply.steps {
        if let Step::Usage { completion, .. } = *step {
            *step = Step::UsageCached {
                prompt,
                completion,
                cached,
            };
        }
    }
    reply
}

/// How many tool results the chat-completions request carries after its last user message:
/// the step of a scripted turn the model is at.
pub fn chat_tool_results(request: &Value) -> usize {
    let messages = request["messages"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    messages
        .iter()
        .rev()
        .take_while(|m| m["role"] != "user")
        .filter(|m| m["role"] == "tool")
        .count()
}

/// How many `function_call_output` items the Responses request carries after its last user
/// message.
pub fn responses_tool_results(request: &Value) -> usize {
    let input = request["input"].as_array().map_or(&[][..], Vec::as_slice);
    input
        .iter()
        .rev()
        .take_while(|item| !(item["type"] == "message" && item["role"] == "user"))
        .filter(|item| item["type"] == "function_call_output")
        .count()
}

/// The text of the first tool result in a chat-completions or Responses request, for checking
/// that the scripted command really ran.
pub fn first_tool_output(request: &Value) -> Option<String> {
    if let Some(messages) = request["messages"].as_array() {
        return messages
            .iter()
            .find(|m| m["role"] == "tool")
            .map(|m| m["content"].to_string());
    }
    request["input"].as_array().and_then(|input| {
        input
            .iter()
            .find(|item| item["type"] == "function_call_output")
            .map(|item| item["output"].to_string())
    })
}
