//! A scripted LLM server on 127.0.0.1 for integration tests, speaking three vendors' streaming
//! formats: OpenAI-compatible chat completions, Anthropic's Messages API and Gemini's
//! `streamGenerateContent?alt=sse`.
//!
//! It is a deliberately small hand-written HTTP/1.1 server (one request per connection,
//! `Connection: close`) so that tests control every byte and every pause of the SSE stream:
//! the provider code under test must cope with real sockets, real chunk boundaries and real
//! disconnects, not with an in-process fake.
//!
//! The request path picks the dialect (`/v1/chat/completions`, `/v1/messages`,
//! `/v1beta/models/{model}:streamGenerateContent?alt=sse`), so one server and one FIFO queue of
//! vendor-neutral [`Script`]s serve a session that switches vendors mid-conversation; each
//! script is rendered in the dialect of the request that takes it. Like the real APIs, the mock
//! refuses (HTTP 400, in the vendor's error shape) a request whose tool calls and results are not
//! paired the way that vendor demands, and Gemini tool schemas with keys Gemini rejects.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::wait_timeout;

/// The usage numbers `Script::text_reply` and `Script::tool_calls` report.
pub const HELPER_USAGE: (u64, u64) = (10, 5);

/// The message of the HTTP 500 the mock answers when no script is queued.
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

    fn mark_reached(&self) {
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

    /// Withholds the response head until `gate` opens (see `head_gate`).
    pub fn hold_head_until(mut self, gate: &Gate) -> Script {
        self.head_gate = Some(gate.clone());
        self
    }
}

/// Which vendor's API a request was made to (chosen by its path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    Anthropic,
    Gemini,
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
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    queue: VecDeque<Script>,
    requests: Vec<RecordedRequest>,
}

struct Shared {
    state: Mutex<State>,
    // Bumped on every state change; waiters re-check their condition when it moves.
    version: watch::Sender<u64>,
}

impl Shared {
    fn update<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let r = f(&mut self.state.lock().unwrap());
        self.version.send_modify(|v| *v += 1);
        r
    }
}

/// The mock server. Dropping it stops accepting connections.
pub struct MockLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_task: JoinHandle<()>,
}

impl MockLlm {
    /// Binds 127.0.0.1:0 and starts serving.
    pub async fn start() -> MockLlm {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind mock LLM");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            version: watch::Sender::new(0),
        });
        let s = shared.clone();
        let accept_task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                tokio::spawn(handle_connection(stream, s.clone()));
            }
        });
        MockLlm {
            addr,
            shared,
            accept_task,
        }
    }

    /// `http://127.0.0.1:PORT/v1`, the value for an OpenAI-compatible provider's `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `http://127.0.0.1:PORT`, the value for an Anthropic or Gemini provider's `base_url`.
    pub fn root_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests made in one dialect, in arrival order.
    pub fn recorded_in(&self, dialect: Dialect) -> Vec<RecordedRequest> {
        self.recorded()
            .into_iter()
            .filter(|r| r.dialect == dialect)
            .collect()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a script; requests take scripts in FIFO order.
    pub fn push(&self, script: Script) {
        if let Some(pos) = script
            .steps
            .iter()
            .position(|s| matches!(s, Step::HttpError { .. } | Step::Plain { .. }))
        {
            assert_eq!(
                pos, 0,
                "Step::HttpError must be the first step of a script (and so must Step::Plain)"
            );
        }
        self.shared.update(|st| st.queue.push_back(script));
    }

    /// How many pushed scripts no request has taken yet.
    pub fn pending_scripts(&self) -> usize {
        self.shared.state.lock().unwrap().queue.len()
    }

    /// Bodies of the chat-completions requests received so far, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.recorded().into_iter().map(|r| r.body).collect()
    }

    /// Everything recorded about each request, in arrival order.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        self.shared.state.lock().unwrap().requests.clone()
    }

    /// The body of request number `i` (0-based); panics with the count if absent.
    pub fn request(&self, i: usize) -> Value {
        let reqs = self.requests();
        match reqs.get(i) {
            Some(v) => v.clone(),
            None => panic!(
                "mock LLM request #{i} asked for, only {} received",
                reqs.len()
            ),
        }
    }

    /// Waits until at least `n` requests were received; returns all bodies so far.
    pub async fn wait_for_requests(&self, n: usize) -> Vec<Value> {
        self.wait_until(&format!("{n} mock LLM request(s)"), |st| {
            st.requests.len() >= n
        })
        .await;
        self.requests()
    }

    /// Requests whose connection the client dropped before the script ended.
    pub fn cancelled_count(&self) -> usize {
        let st = self.shared.state.lock().unwrap();
        st.requests.iter().filter(|r| r.cancelled).count()
    }

    /// Waits until `cancelled_count() >= n` (detection is asynchronous: the mock notices the
    /// close while paused or on its next write).
    pub async fn wait_for_cancelled(&self, n: usize) {
        self.wait_until(&format!("{n} cancelled mock LLM stream(s)"), |st| {
            st.requests.iter().filter(|r| r.cancelled).count() >= n
        })
        .await;
    }

    /// Waits until `n` requests have been fully answered (script finished or cancelled),
    /// useful before asserting that nothing else was sent.
    pub async fn wait_for_settled(&self, n: usize) {
        self.wait_until(&format!("{n} settled mock LLM request(s)"), |st| {
            st.requests
                .iter()
                .filter(|r| r.finished || r.cancelled || !r.scripted)
                .count()
                >= n
        })
        .await;
    }

    async fn wait_until(&self, what: &str, cond: impl Fn(&State) -> bool) {
        let mut rx = self.shared.version.subscribe();
        let deadline = tokio::time::Instant::now() + wait_timeout();
        loop {
            rx.borrow_and_update();
            if cond(&self.shared.state.lock().unwrap()) {
                return;
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                let st = self.shared.state.lock().unwrap();
                panic!(
                    "timed out after {:?} waiting for {what}; received {} request(s), {} cancelled, \
                     {} script(s) still queued",
                    wait_timeout(),
                    st.requests.len(),
                    st.requests.iter().filter(|r| r.cancelled).count(),
                    st.queue.len()
                );
            }
        }
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        self.accept_task.abort();
    }
}

/// A parsed HTTP request head plus body.
struct HttpRequest {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

async fn read_request<R: AsyncRead + Unpin>(r: &mut BufReader<R>) -> std::io::Result<HttpRequest> {
    use std::io::{Error, ErrorKind};
    let bad = |m: String| Error::new(ErrorKind::InvalidData, m);

    let mut line = String::new();
    if r.read_line(&mut line).await? == 0 {
        return Err(Error::new(ErrorKind::UnexpectedEof, "no request line"));
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();

    let mut headers = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Err(bad("eof in headers".into()));
        }
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };

    let mut body = Vec::new();
    let chunked = header("transfer-encoding")
        .map(|v| v.to_ascii_lowercase().contains("chunked"))
        .unwrap_or(false);
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line).await?;
            let size_text = line.trim().split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| bad(format!("bad chunk size line {line:?}")))?;
            if size == 0 {
                // Trailers, then the final empty line.
                loop {
                    line.clear();
                    if r.read_line(&mut line).await? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..]).await?;
            line.clear();
            r.read_line(&mut line).await?; // the CRLF after the chunk data
        }
    } else if let Some(len) = header("content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| bad(format!("bad content-length {len:?}")))?;
        body.resize(len, 0);
        r.read_exact(&mut body).await?;
    }
    Ok(HttpRequest {
        method,
        path,
        headers,
        body,
    })
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

async fn write_plain<W: AsyncWrite + Unpin>(
    w: &mut W,
    status: u16,
    content_type: &str,
    body: &str,
    retry_after: Option<u32>,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason_phrase(status),
        body.len()
    );
    if let Some(secs) = retry_after {
        head.push_str(&format!("Retry-After: {secs}\r\n"));
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes()).await?;
    w.write_all(body.as_bytes()).await?;
    w.flush().await?;
    w.shutdown().await
}

/// The dialect a request path names, and the model for Gemini (which puts it in the path).
fn route(method: &str, path: &str) -> Option<(Dialect, Option<String>)> {
    if method != "POST" {
        return None;
    }
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    match path.trim_end_matches('/') {
        "/v1/chat/completions" => Some((Dialect::OpenAi, None)),
        "/v1/messages" => Some((Dialect::Anthropic, None)),
        other => {
            let model = other
                .strip_prefix("/v1beta/models/")?
                .strip_suffix(":streamGenerateContent")?;
            // Without alt=sse Gemini answers one JSON array, not an event stream.
            query
                .split('&')
                .any(|kv| kv == "alt=sse")
                .then(|| (Dialect::Gemini, Some(model.to_owned())))
        }
    }
}

fn error_body(dialect: Dialect, status: u16, message: &str) -> String {
    match dialect {
        Dialect::OpenAi => json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}),
        Dialect::Anthropic => json!({"type": "error", "error": {"type": if status == 400 { "invalid_request_error" } else { "api_error" }, "message": message}}),
        Dialect::Gemini => json!({"error": {"code": status, "message": message, "status": if status == 400 { "INVALID_ARGUMENT" } else { "INTERNAL" }}}),
    }
    .to_string()
}

async fn handle_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let req = {
        let mut reader = BufReader::new(&mut stream);
        match read_request(&mut reader).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("mock LLM: could not read request: {e}");
                return;
            }
        }
    };

    let Some((dialect, path_model)) = route(&req.method, &req.path) else {
        let msg = format!(
            "mock LLM serves POST /v1/chat/completions, /v1/messages and /v1beta/models/M:streamGenerateContent?alt=sse, got {} {}",
            req.method, req.path
        );
        eprintln!("{msg}");
        let body = json!({"error": {"message": msg, "type": "not_found"}}).to_string();
        let _ = write_plain(&mut stream, 404, "application/json", &body, None).await;
        return;
    };
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => {
            let msg = format!("mock LLM: request body is not JSON: {e}");
            eprintln!("{msg}");
            let _ = write_plain(
                &mut stream,
                400,
                "application/json",
                &error_body(dialect, 400, &msg),
                None,
            )
            .await;
            return;
        }
    };
    let model = path_model
        .or_else(|| body.get("model").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| "mock-model".to_string());
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let rejected = match dialect {
        Dialect::OpenAi => check_openai(&body),
        Dialect::Anthropic => match header("anthropic-version") {
            None => Err("anthropic-version: header is required".to_string()),
            Some(_) => check_anthropic(&body),
        },
        Dialect::Gemini => check_gemini(&body),
    }
    .err();

    let (index, script) = shared.update(|st| {
        let script = if rejected.is_none() {
            st.queue.pop_front()
        } else {
            None
        };
        st.requests.push(RecordedRequest {
            dialect,
            method: req.method.clone(),
            path: req.path.clone(),
            headers: req.headers.clone(),
            body,
            scripted: script.is_some(),
            rejected: rejected.clone(),
            cancelled: false,
            finished: false,
        });
        (st.requests.len() - 1, script)
    });

    if let Some(why) = rejected {
        eprintln!("mock LLM: request #{index} ({dialect:?}) rejected like the vendor would: {why}");
        let _ = write_plain(
            &mut stream,
            400,
            "application/json",
            &error_body(dialect, 400, &why),
            None,
        )
        .await;
        return;
    }
    let Some(script) = script else {
        // Loud failure: the test forgot to script this call (or the server made an extra one).
        eprintln!("mock LLM: request #{index} arrived but {NO_SCRIPT_MESSAGE}");
        let msg = format!("{NO_SCRIPT_MESSAGE} (request #{index})");
        let _ = write_plain(
            &mut stream,
            500,
            "application/json",
            &error_body(dialect, 500, &msg),
            None,
        )
        .await;
        return;
    };

    let outcome = play(&mut stream, &script, dialect, &model, index).await;
    match outcome {
        Outcome::Finished => {
            let _ = stream.shutdown().await;
            shared.update(|st| st.requests[index].finished = true);
        }
        Outcome::Cancelled => {
            shared.update(|st| st.requests[index].cancelled = true);
        }
        Outcome::Disconnect => {
            // A zero linger turns close() into a RST, which the client sees as a broken
            // connection rather than a clean end of body.
            let _ = stream.set_zero_linger();
            drop(stream);
            shared.update(|st| st.requests[index].finished = true);
        }
    }
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

enum Outcome {
    Finished,
    Cancelled,
    Disconnect,
}

/// Turns vendor-neutral steps into one vendor's SSE bytes. Stateful: Anthropic's content
/// blocks open and close around runs of steps, and usage is read from the whole script up front
/// because Anthropic and Gemini report it before the script's `Usage` step comes.
enum Renderer {
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
}

/// (prompt, completion, cached) from the script's usage step.
fn script_usage(script: &Script) -> (u64, u64, u64) {
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
            _ => None,
        })
        .unwrap_or((0, 0, 0))
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

impl Renderer {
    fn new(dialect: Dialect, script: &Script, model: &str, index: usize) -> Renderer {
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
                usage: script_usage(script),
            },
            Dialect::Gemini => Renderer::Gemini {
                model: model.to_string(),
                response_id: format!("mock-response-{index}"),
                signature: None,
                usage: script_usage(script),
            },
        }
    }

    /// What the body starts with, before the first step.
    fn start(&mut self, out: &mut Vec<String>) {
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

    fn step(&mut self, step: &Step, out: &mut Vec<String>) {
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
        }
    }
}

/// Plays a script on the connection, watching the read side for the client hanging up.
async fn play(
    stream: &mut TcpStream,
    script: &Script,
    dialect: Dialect,
    model: &str,
    index: usize,
) -> Outcome {
    let (mut rd, mut wr) = stream.split();
    // The request was read completely, so any further read ending means the client closed
    // (or reset) the connection: that is how a cancelled stream is detected while paused.
    let closed = async move {
        let mut buf = [0u8; 512];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    };
    tokio::pin!(closed);

    if let Some(gate) = &script.head_gate {
        gate.mark_reached();
        tokio::select! {
            biased;
            _ = &mut closed => return Outcome::Cancelled,
            _ = gate.wait_open() => {}
        }
    }

    if let Some(Step::HttpError {
        status,
        body,
        retry_after,
    }) = script.steps.first()
    {
        return match write_plain(&mut wr, *status, "application/json", body, *retry_after).await {
            Ok(()) => Outcome::Finished,
            Err(_) => Outcome::Cancelled,
        };
    }
    if let Some(Step::Plain {
        status,
        content_type,
        body,
    }) = script.steps.first()
    {
        return match write_plain(&mut wr, *status, content_type, body, None).await {
            Ok(()) => Outcome::Finished,
            Err(_) => Outcome::Cancelled,
        };
    }

    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
    let mut pieces: Vec<String> = vec![head.to_string()];
    let mut renderer = Renderer::new(dialect, script, model, index);
    renderer.start(&mut pieces);

    for step in &script.steps {
        // What to write for this step, or a pause / a disconnect.
        match step {
            Step::Raw(s) => pieces.push(s.clone()),
            Step::HttpError { .. } | Step::Plain { .. } => {
                unreachable!("checked in MockLlm::push")
            }
            Step::Delay(_) | Step::WaitFor(_) | Step::Disconnect => {}
            other => renderer.step(other, &mut pieces),
        }

        // Each chunk is written and flushed on its own so the client sees real chunk
        // boundaries; `biased` makes a hang-up win over further writing.
        for piece in pieces.drain(..) {
            tokio::select! {
                biased;
                _ = &mut closed => return Outcome::Cancelled,
                r = write_flush(&mut wr, piece.as_bytes()) => {
                    if r.is_err() {
                        return Outcome::Cancelled;
                    }
                }
            }
        }

        match step {
            Step::Delay(d) => {
                tokio::select! {
                    biased;
                    _ = &mut closed => return Outcome::Cancelled,
                    _ = tokio::time::sleep(*d) => {}
                }
            }
            Step::WaitFor(gate) => {
                gate.mark_reached();
                tokio::select! {
                    biased;
                    _ = &mut closed => return Outcome::Cancelled,
                    _ = gate.wait_open() => {}
                }
            }
            Step::Disconnect => return Outcome::Disconnect,
            _ => {}
        }
    }
    // A script with no steps still sends its head.
    for piece in pieces.drain(..) {
        if write_flush(&mut wr, piece.as_bytes()).await.is_err() {
            return Outcome::Cancelled;
        }
    }
    Outcome::Finished
}

async fn write_flush<W: AsyncWrite + Unpin>(w: &mut W, bytes: &[u8]) -> std::io::Result<()> {
    w.write_all(bytes).await?;
    w.flush().await
}

fn split_at_char_middle(s: &str) -> (&str, &str) {
    let n = s.chars().count();
    let cut = s
        .char_indices()
        .nth(n / 2)
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    s.split_at(cut)
}

/// Splits on char boundaries into up to three non-empty pieces.
fn split_in_three(s: &str) -> Vec<&str> {
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
