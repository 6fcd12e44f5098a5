//! The mock's vocabulary: vendor-neutral [`Script`]s of [`Step`]s, the [`Gate`] latches a
//! script pauses on, the [`Dialect`] a request picks by its path, and the [`RecordedRequest`]
//! kept for each request.
//!
//! A script says *what* the model answers (text, reasoning, tool calls, a finish reason, usage,
//! pauses, a reset); the renderer (`render.rs`) says *how* each vendor spells it on the wire.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::watch;

use crate::render::split_at_char_middle;

/// The guard timeout for every wait on the mock (and the harness around it).
///
/// Generous enough for a debug build on a loaded 2-core machine, short enough that a hang
/// fails fast. `TANDEM_TEST_TIMEOUT_SECS` overrides it (for example under a debugger).
pub fn wait_timeout() -> Duration {
    std::env::var("TANDEM_TEST_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(10))
}

/// The usage numbers `Script::text_reply` and `Script::tool_calls` report.
pub const HELPER_USAGE: (u64, u64) = (10, 5);

/// The message of the HTTP 500 the mock answers when no script is queued (unless an
/// empty-queue answer was set, as the CLI does).
pub const NO_SCRIPT_MESSAGE: &str = "mock LLM has no scripted response left";

/// A latch the test opens to let a paused stream continue.
///
/// Clones share one latch. Opening is permanent (a latch, not a semaphore), so a test can open
/// it before or after the stream reaches it without a race.
#[derive(Clone)]
pub struct Gate {
    open: Arc<watch::Sender<bool>>,
    // Counts how many streams have arrived at this gate, so a test can wait until the mock
    // is really paused (for example before sending `stop`) instead of sleeping.
    reached: Arc<watch::Sender<usize>>,
}

impl Gate {
    pub fn new() -> Gate {
        Gate {
            open: Arc::new(watch::Sender::new(false)),
            reached: Arc::new(watch::Sender::new(0)),
        }
    }

    /// Opens the gate; every stream waiting on it (now or later) proceeds.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    pub fn is_open(&self) -> bool {
        *self.open.borrow()
    }

    /// Waits until the gate is open (used by the mock).
    pub async fn wait_open(&self) {
        let mut rx = self.open.subscribe();
        // The sender lives in `self`, so `wait_for` can only end by seeing `true`.
        let _ = rx.wait_for(|open| *open).await;
    }

    /// Waits (with the harness guard timeout) until at least one stream is paused at this gate.
    pub async fn wait_reached(&self) {
        let mut rx = self.reached.subscribe();
        let fut = rx.wait_for(|n| *n > 0);
        if tokio::time::timeout(wait_timeout(), fut).await.is_err() {
            panic!(
                "timed out after {:?} waiting for the mock LLM stream to reach a gate \
                 (did the server send the request? was the script queued?)",
                wait_timeout()
            );
        }
    }

    /// How many streams have reached this gate so far.
    pub fn reached_count(&self) -> usize {
        *self.reached.borrow()
    }

    /// A receiver of the count of streams that reached this gate (the control endpoint's
    /// long-poll).
    pub(crate) fn reached_receiver(&self) -> watch::Receiver<usize> {
        self.reached.subscribe()
    }

    pub(crate) fn mark_reached(&self) {
        self.reached.send_modify(|n| *n += 1);
    }
}

impl Default for Gate {
    fn default() -> Self {
        Gate::new()
    }
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gate")
            .field("open", &self.is_open())
            .field("reached", &self.reached_count())
            .finish()
    }
}

/// One step of a scripted streaming response.
#[derive(Clone, Debug)]
pub enum Step {
    /// A chunk with `delta: {role: "assistant", content: ""}`, as real servers send first.
    Role,
    /// A chunk with `delta.content`.
    Text(String),
    /// Reasoning text: `delta.reasoning_content` (DeepSeek/vLLM style) for OpenAI, a `thinking`
    /// block for Anthropic, a `thought: true` part for Gemini.
    Reasoning(String),
    /// A reasoning signature: a `signature_delta` closing the open Anthropic thinking block, or a
    /// Gemini `thoughtSignature` on the next function call (or on a part of its own at the end).
    /// OpenAI has none, so it writes nothing there.
    Signature(String),
    /// A tool call, sent as one chunk with id/type/name and empty arguments followed by the
    /// arguments split into about three pieces, so the client must reassemble them.
    ToolCall {
        index: u32,
        id: String,
        name: String,
        args_json: String,
    },
    /// A chunk with an empty delta and this `finish_reason` ("stop", "tool_calls", "length").
    Finish(String),
    /// A chunk with empty `choices` and `usage: {prompt_tokens, completion_tokens, total_tokens}`.
    Usage { prompt: u64, completion: u64 },
    /// Like `Usage`, plus `prompt_tokens_details.cached_tokens`.
    UsageCached {
        prompt: u64,
        completion: u64,
        cached: u64,
    },
    /// `data: [DONE]`.
    Done,
    /// Pause the stream.
    Delay(Duration),
    /// Pause the stream until the gate is opened.
    WaitFor(Gate),
    /// Reset the connection (SO_LINGER 0, so the client sees an error, not a clean EOF).
    /// A script that simply ends without `Done` gives a clean EOF instead.
    Disconnect,
    /// Answer with a plain HTTP error instead of a stream. Must be the first step.
    HttpError {
        status: u16,
        body: String,
        retry_after: Option<u32>,
    },
    /// Bytes written verbatim into the SSE body (for malformed-stream tests).
    Raw(String),
    /// Answer with any status, content type and body instead of a stream (a proxy's HTML page,
    /// a JSON answer to a streaming request). Must be the first step.
    Plain {
        status: u16,
        content_type: String,
        body: String,
    },
    /// Like `Usage`, with the prompt count growing with the request: `prompt_base` plus the
    /// request's 1-based number, so a test can tell answers apart by their usage (what the
    /// editor suites' scripts get when they give no usage; see `json_script.rs`).
    UsageForRequest { prompt_base: u64, completion: u64 },
    /// A piece of the arguments of the already started tool call `index` (OpenAI's argument
    /// delta, Anthropic's `input_json_delta`, the Responses API's
    /// `function_call_arguments.delta`; Gemini sends whole arguments, so nothing there).
    ToolArguments { index: u32, json_piece: String },
    /// Numbered text deltas (`"0 "`, `"1 "`, … or `"TAG:0 "`, …), each written and flushed on
    /// its own, optionally paced; the write instants are reported through
    /// `MockLlm::next_delta_times` once the script ends (the benchmarks' latency streams).
    Deltas(Deltas),
    /// One text or tool-argument step written `times` times, rendered once: a hostile answer far
    /// larger than any real one that costs the mock no memory (the floods benchmark). Its
    /// payload bytes are counted in `MockLlm::repeated_payload_bytes`. Only `Text` and
    /// `ToolArguments` may be repeated.
    Repeat { step: Box<Step>, times: usize },
}

/// A stream of numbered text deltas (see [`Step::Deltas`]).
#[derive(Clone, Debug)]
pub struct Deltas {
    pub count: usize,
    /// `None`: each delta is written as soon as the previous one is. Otherwise one delta per
    /// period; when the mock falls behind it keeps the spacing instead of bursting to catch up,
    /// since a burst would measure queueing in the client, not per-delta latency.
    pub pace: Option<Duration>,
    /// Prefixes each delta's text (`"TAG:0 "`) so streams of many sessions can be told apart;
    /// reported with the instants.
    pub tag: Option<String>,
}

/// The write instants of a script's numbered deltas, reported when the script has been
/// played to its end.
#[derive(Clone, Debug)]
pub struct DeltaTimes {
    /// The `Deltas` step's tag (empty without one).
    pub tag: String,
    /// When delta `n` had been written and flushed, indexed by `n`.
    pub sent: Vec<Instant>,
}

/// A scripted response: the steps, played in order on one connection.
#[derive(Clone, Debug, Default)]
pub struct Script {
    pub steps: Vec<Step>,
    /// When set, the response head (status line and headers) is withheld until this gate
    /// opens, so the client is stuck before it even has a response (stop-while-connecting).
    /// By default the head is sent at once, like a real server, and only the body pauses.
    pub head_gate: Option<Gate>,
}

impl Script {
    /// An empty script; add steps with the builder methods.
    pub fn new() -> Script {
        Script::default()
    }

    pub fn from_steps(steps: Vec<Step>) -> Script {
        Script {
            steps,
            head_gate: None,
        }
    }

    /// Role chunk, the text in two pieces, `finish_reason: "stop"`, usage, `[DONE]`.
    pub fn text_reply(text: &str) -> Script {
        let (a, b) = split_at_char_middle(text);
        let mut s = Script::new().role().text(a);
        if !b.is_empty() {
            s = s.text(b);
        }
        s.finish("stop")
            .usage(HELPER_USAGE.0, HELPER_USAGE.1)
            .done()
    }

    /// Role chunk, one `ToolCall` per `(id, name, args_json)` (indexes 0, 1, ...),
    /// `finish_reason: "tool_calls"`, usage, `[DONE]`.
    pub fn tool_calls<I, N, A>(calls: Vec<(I, N, A)>) -> Script
    where
        I: Into<String>,
        N: Into<String>,
        A: Into<String>,
    {
        let mut s = Script::new().role();
        for (id, name, args) in calls {
            s = s.tool_call(id, name, args);
        }
        s.finish("tool_calls")
            .usage(HELPER_USAGE.0, HELPER_USAGE.1)
            .done()
    }

    /// A single tool call; shorthand for `tool_calls(vec![(id, name, args_json)])`.
    pub fn tool_call_reply(id: &str, name: &str, args: Value) -> Script {
        Script::tool_calls(vec![(id, name, args.to_string())])
    }

    /// An HTTP error with an OpenAI-style error body.
    /// Answer with this status, content type and body instead of a stream.
    pub fn plain(status: u16, content_type: &str, body: impl Into<String>) -> Script {
        Script::new().step(Step::Plain {
            status,
            content_type: content_type.to_owned(),
            body: body.into(),
        })
    }

    pub fn http_error(status: u16, retry_after: Option<u32>) -> Script {
        let body = json!({
            "error": {
                "message": format!("mock LLM scripted HTTP {status}"),
                "type": if status == 429 { "rate_limit_error" } else { "server_error" },
                "param": null,
                "code": null,
            }
        })
        .to_string();
        Script::new().step(Step::HttpError {
            status,
            body,
            retry_after,
        })
    }

    pub fn step(mut self, step: Step) -> Script {
        self.steps.push(step);
        self
    }

    pub fn role(self) -> Script {
        self.step(Step::Role)
    }

    pub fn text(self, text: impl Into<String>) -> Script {
        self.step(Step::Text(text.into()))
    }

    pub fn reasoning(self, text: impl Into<String>) -> Script {
        self.step(Step::Reasoning(text.into()))
    }

    pub fn signature(self, signature: impl Into<String>) -> Script {
        self.step(Step::Signature(signature.into()))
    }

    pub fn usage_cached(self, prompt: u64, completion: u64, cached: u64) -> Script {
        self.step(Step::UsageCached {
            prompt,
            completion,
            cached,
        })
    }

    /// Adds a tool call with the next free index (0 for the first tool call of the script).
    pub fn tool_call(
        self,
        id: impl Into<String>,
        name: impl Into<String>,
        args_json: impl Into<String>,
    ) -> Script {
        let index = self
            .steps
            .iter()
            .filter(|s| matches!(s, Step::ToolCall { .. }))
            .count() as u32;
        self.step(Step::ToolCall {
            index,
            id: id.into(),
            name: name.into(),
            args_json: args_json.into(),
        })
    }

    pub fn finish(self, reason: impl Into<String>) -> Script {
        self.step(Step::Finish(reason.into()))
    }

    pub fn usage(self, prompt: u64, completion: u64) -> Script {
        self.step(Step::Usage { prompt, completion })
    }

    pub fn done(self) -> Script {
        self.step(Step::Done)
    }

    pub fn delay(self, d: Duration) -> Script {
        self.step(Step::Delay(d))
    }

    pub fn wait_for(self, gate: &Gate) -> Script {
        self.step(Step::WaitFor(gate.clone()))
    }

    pub fn disconnect(self) -> Script {
        self.step(Step::Disconnect)
    }

    pub fn raw(self, bytes: impl Into<String>) -> Script {
        self.step(Step::Raw(bytes.into()))
    }

    /// Numbered text deltas (see [`Step::Deltas`]).
    pub fn deltas(self, count: usize, pace: Option<Duration>, tag: Option<String>) -> Script {
        self.step(Step::Deltas(Deltas { count, pace, tag }))
    }

    /// A piece of the arguments of tool call `index`.
    pub fn tool_arguments(self, index: u32, json_piece: impl Into<String>) -> Script {
        self.step(Step::ToolArguments {
            index,
            json_piece: json_piece.into(),
        })
    }

    /// `step` (a `Text` or a `ToolArguments`) written `times` times (see [`Step::Repeat`]).
    pub fn repeat(self, step: Step, times: usize) -> Script {
        self.step(Step::Repeat {
            step: Box::new(step),
            times,
        })
    }

    /// Whether the mock can play this script: an `HttpError` or a `Plain` answer must be the
    /// first step (the response head is its whole answer), and only `Text` and
    /// `ToolArguments` steps can be repeated.
    pub fn check(&self) -> Result<(), String> {
        for (i, step) in self.steps.iter().enumerate() {
            match step {
                Step::HttpError { .. } | Step::Plain { .. } if i != 0 => {
                    return Err(format!(
                        "step {i}: Step::HttpError must be the first step of a script (and so must Step::Plain)"
                    ));
                }
                Step::Repeat { step, .. }
                    if !matches!(**step, Step::Text(_) | Step::ToolArguments { .. }) =>
                {
                    return Err(format!(
                        "step {i}: Step::Repeat repeats only Text and ToolArguments, not {step:?}"
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Withholds the response head until `gate` opens (see `head_gate`).
    pub fn hold_head_until(mut self, gate: &Gate) -> Script {
        self.head_gate = Some(gate.clone());
        self
    }
}

/// Which vendor's API a request was made to (chosen by its path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// `POST /v1/chat/completions`: `chat.completion.chunk` events and `[DONE]`.
    OpenAi,
    /// `POST /v1/messages`: Anthropic's typed events.
    Anthropic,
    /// `POST /v1beta/models/{model}:streamGenerateContent?alt=sse`.
    Gemini,
    /// `POST /v1/responses`: OpenAI's Responses API, typed `response.*` events (what Codex
    /// speaks; the benchmarks' anchor).
    Responses,
}

impl Dialect {
    /// The lower-case name used in the control endpoints' JSON.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::Anthropic => "anthropic",
            Dialect::Gemini => "gemini",
            Dialect::Responses => "responses",
        }
    }
}

/// One request the mock received.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub dialect: Dialect,
    pub method: String,
    pub path: String,
    /// Header names are lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Value,
    /// True when a script was queued for it (false: it got the "no scripted response" 500, or a
    /// 400 because it broke the vendor's rules; then `rejected` says why).
    pub scripted: bool,
    pub rejected: Option<String>,
    /// True when the client closed the connection before the script ended.
    pub cancelled: bool,
    /// True when the mock finished writing the whole script.
    pub finished: bool,
    /// When the request's first byte could be read from its connection: a client's "request
    /// sent" as the server sees it, before the rest of the head and the body have arrived (the
    /// benchmarks time how long a server takes to start a model request).
    pub first_byte_at: Instant,
    /// The body exactly as it arrived, kept only when the mock was built with
    /// [`MockBuilder::keep_raw_bodies`](crate::MockBuilder::keep_raw_bodies) (tests have `body`
    /// and need no second copy). Shared, so cloning a record does not copy it.
    pub raw_body: Option<Arc<[u8]>>,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON the control endpoint `GET /_mock/requests` reports for this request.
    pub fn to_json(&self) -> Value {
        let headers: serde_json::Map<String, Value> = self
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        json!({
            "dialect": self.dialect.name(),
            "method": self.method,
            "path": self.path,
            "headers": headers,
            "body": self.body,
            "scripted": self.scripted,
            "rejected": self.rejected,
            "aborted": self.cancelled,
            "finished": self.finished,
        })
    }
}

/// What a responder (see `MockLlm::start_responding`) sees of a request before it answers.
#[derive(Debug)]
pub struct IncomingRequest<'a> {
    pub dialect: Dialect,
    /// How many model requests were recorded before this one: its 0-based index when requests
    /// do not overlap (a responder runs before the request is recorded, so two concurrent ones
    /// may see the same number).
    pub index: usize,
    pub path: &'a str,
    pub headers: &'a [(String, String)],
    pub body: &'a Value,
    /// The body's bytes as they arrived (what `body` was parsed from).
    pub raw_body: &'a [u8],
    /// When the request's first byte could be read (see [`RecordedRequest::first_byte_at`]).
    pub first_byte_at: Instant,
}
