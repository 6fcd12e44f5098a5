//! tandem's one mock LLM: a scripted model server on 127.0.0.1 speaking four vendors' streaming
//! formats — OpenAI-compatible chat completions, Anthropic's Messages API, Gemini's
//! `streamGenerateContent?alt=sse` and OpenAI's Responses API.
//!
//! It is a deliberately small hand-written HTTP/1.1 server (one request per connection,
//! `Connection: close`) so that tests control every byte and every pause of the SSE stream:
//! the provider code under test must cope with real sockets, real chunk boundaries and real
//! disconnects, not with an in-process fake. It is dev-only: the integration tests
//! (`tests/it/support/mock_llm.rs` re-exports it), the benchmarks (`examples/bench/mock.rs`
//! wraps it) and, through the `tandem-mock-llm` binary (`src/main.rs`), the editor suites use it;
//! the product never links it.
//!
//! The request path picks the dialect (`/v1/chat/completions`, `/v1/messages`,
//! `/v1beta/models/{model}:streamGenerateContent?alt=sse`, `/v1/responses`), so one server and
//! one FIFO queue of vendor-neutral [`Script`]s serve a session that switches vendors
//! mid-conversation; each script is rendered in the dialect of the request that takes it.
//! Instead of the queue, a responder closure can pick each script from the request itself
//! ([`MockLlm::start_responding`], what the benchmarks do). Like the real APIs, the mock refuses
//! (HTTP 400, in the vendor's error shape) a request whose tool calls and results are not paired
//! the way that vendor demands, and Gemini tool schemas with keys Gemini rejects.
//!
//! Control endpoints under `/_mock/` (`control.rs`) let a process outside this one queue
//! scripts, open gates and read the recorded requests.
#![allow(
    clippy::print_stderr,
    reason = "a test-support server: its diagnostics (a request it could not read, one it \
              refused) belong on the test's stderr, beside the failure they explain"
)]

mod checks;
mod control;
mod http;
pub mod json_script;
mod play;
mod render;
mod script;

use std::collections::{HashMap, VecDeque};
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use serde_json::{json, Value};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

pub use script::{
    wait_timeout, DeltaTimes, Deltas, Dialect, Gate, IncomingRequest, RecordedRequest, Script,
    Step, HELPER_USAGE, NO_SCRIPT_MESSAGE,
};

use http::{error_body, read_request, route, write_plain, Route};
use play::{play, Outcome, PlayContext};

/// Picks the answer to a request from the request itself (see [`MockLlm::start_responding`]).
pub type Responder = Arc<dyn Fn(&IncomingRequest<'_>) -> Script + Send + Sync>;

/// Told of every change to the record of a request (see [`MockBuilder::on_record`]).
pub type RecordHook = Arc<dyn Fn(usize, &RecordedRequest) + Send + Sync>;

#[derive(Default)]
struct State {
    queue: VecDeque<Script>,
    requests: Vec<RecordedRequest>,
    /// Gates by name, for scripts given as JSON (`{"wait": "NAME"}`) and the control endpoint
    /// that opens them.
    gates: HashMap<String, Gate>,
    /// How many responses were queued so far, numbering the default tool call ids of JSON
    /// scripts.
    responses_queued: usize,
}

/// How a mock answers what its queue does not cover, set before it starts.
#[derive(Clone, Default)]
struct Options {
    responder: Option<Responder>,
    when_empty: Option<Script>,
    serve_model_list: bool,
    request_log: Option<PathBuf>,
    on_record: Option<RecordHook>,
    keep_raw_bodies: bool,
}

struct Shared {
    state: Mutex<State>,
    // Bumped on every state change; waiters re-check their condition when it moves.
    version: watch::Sender<u64>,
    options: Options,
    repeated_payload_bytes: AtomicUsize,
    delta_times: mpsc::UnboundedSender<DeltaTimes>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind: still usable for the
        // report of the test that panicked.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn update<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let r = f(&mut self.lock());
        self.version.send_modify(|v| *v += 1);
        r
    }

    /// Changes the record of request `index` and tells the record hook, under the lock, so the
    /// hook sees the changes in the order they were made.
    fn update_request(&self, index: usize, f: impl FnOnce(&mut RecordedRequest)) {
        self.update(|st| {
            f(&mut st.requests[index]);
            if let Some(hook) = &self.options.on_record {
                hook(index, &st.requests[index]);
            }
        });
    }

    fn gate_named(&self, name: &str) -> Gate {
        self.update(|st| st.gates.entry(name.to_owned()).or_default().clone())
    }
}

/// Configures a mock before it starts; [`MockLlm::start`] is the tests' default.
#[derive(Default)]
pub struct MockBuilder {
    options: Options,
}

impl MockBuilder {
    /// Answers every model request with the script this closure picks from the request,
    /// instead of taking scripts from the FIFO queue.
    pub fn responder(
        mut self,
        responder: impl Fn(&IncomingRequest<'_>) -> Script + Send + Sync + 'static,
    ) -> MockBuilder {
        self.options.responder = Some(Arc::new(responder));
        self
    }

    /// Answers with this script when the queue is empty (by default the mock answers an HTTP
    /// 500 naming [`NO_SCRIPT_MESSAGE`], so a test that forgot a script fails loudly).
    pub fn when_empty(mut self, script: Script) -> MockBuilder {
        self.options.when_empty = Some(script);
        self
    }

    /// Answers `GET /v1/models` with `mock-model` and `mock-model-2` (by default a 404, as for
    /// any path the mock does not serve).
    pub fn serve_model_list(mut self) -> MockBuilder {
        self.options.serve_model_list = true;
        self
    }

    /// Appends each model request's body as one JSON line to this file before answering.
    pub fn request_log(mut self, path: PathBuf) -> MockBuilder {
        self.options.request_log = Some(path);
        self
    }

    /// Keeps each request's body bytes as they arrived in [`RecordedRequest::raw_body`] (by
    /// default only the parsed `body` is kept): for comparing what a client sends byte for byte,
    /// such as how much of one request repeats the previous one.
    pub fn keep_raw_bodies(mut self) -> MockBuilder {
        self.options.keep_raw_bodies = true;
        self
    }

    /// Calls `hook` with the index and record of a request when it is recorded (before it is
    /// answered) and when it ends (finished or cancelled), in that order, under the mock's lock.
    /// The CLI prints these as lines, so a client process learns of a request before the model
    /// client can see its answer.
    pub fn on_record(
        mut self,
        hook: impl Fn(usize, &RecordedRequest) + Send + Sync + 'static,
    ) -> MockBuilder {
        self.options.on_record = Some(Arc::new(hook));
        self
    }

    /// Binds 127.0.0.1 on `port` (0: any free port) and starts serving.
    pub async fn start_on(self, port: u16) -> std::io::Result<MockLlm> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let addr = listener.local_addr()?;
        let (delta_sender, delta_receiver) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            version: watch::Sender::new(0),
            options: self.options,
            repeated_payload_bytes: AtomicUsize::new(0),
            delta_times: delta_sender,
        });
        let s = shared.clone();
        let accept_task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                // Without NODELAY, Nagle would hold small chunks back: tests would see merged
                // chunks and benchmarks would measure Nagle.
                let _ = stream.set_nodelay(true);
                tokio::spawn(handle_connection(stream, s.clone()));
            }
        });
        Ok(MockLlm {
            addr,
            shared,
            accept_task,
            delta_times: tokio::sync::Mutex::new(delta_receiver),
        })
    }

    /// Binds 127.0.0.1:0 and starts serving.
    pub async fn start(self) -> std::io::Result<MockLlm> {
        self.start_on(0).await
    }
}

/// The mock server. Dropping it stops accepting connections.
pub struct MockLlm {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_task: JoinHandle<()>,
    delta_times: tokio::sync::Mutex<mpsc::UnboundedReceiver<DeltaTimes>>,
}

impl MockLlm {
    /// Binds 127.0.0.1:0 and starts serving scripts from the FIFO queue; panics (failing the
    /// test) if it cannot bind.
    pub async fn start() -> MockLlm {
        match MockLlm::builder().start().await {
            Ok(mock) => mock,
            Err(e) => panic!("could not bind the mock LLM on 127.0.0.1: {e}"),
        }
    }

    /// A mock to configure before it starts.
    pub fn builder() -> MockBuilder {
        MockBuilder::default()
    }

    /// A mock that answers each request with the script `responder` picks from it.
    pub async fn start_responding(
        responder: impl Fn(&IncomingRequest<'_>) -> Script + Send + Sync + 'static,
    ) -> std::io::Result<MockLlm> {
        MockLlm::builder().responder(responder).start().await
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

    /// Queues a script; requests take scripts in FIFO order. Panics (failing the test) on a
    /// script the mock cannot play, such as an `HttpError` that is not the first step.
    pub fn push(&self, script: Script) {
        if let Err(why) = script.check() {
            panic!("{why}");
        }
        self.shared.update(|st| {
            st.queue.push_back(script);
            st.responses_queued += 1;
        });
    }

    /// The gate called `name` (created closed on first use), shared with scripts given as
    /// JSON and with the control endpoint `POST /_mock/gates/NAME/open`.
    pub fn gate_named(&self, name: &str) -> Gate {
        self.shared.gate_named(name)
    }

    /// Queues responses given in the JSON form of scripts (see [`json_script`]).
    pub fn push_json(&self, responses: &Value) -> Result<usize, json_script::ScriptError> {
        control::enqueue_json(&self.shared, responses)
    }

    /// How many pushed scripts no request has taken yet.
    pub fn pending_scripts(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// Bodies of the requests received so far, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.recorded().into_iter().map(|r| r.body).collect()
    }

    /// How many model requests were received so far (cheaper than `requests().len()`).
    pub fn request_count(&self) -> usize {
        self.shared.lock().requests.len()
    }

    /// Everything recorded about each request, in arrival order.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// The records of the requests from number `first` (0-based) on, in arrival order: what
    /// arrived since a caller last looked, without cloning every earlier body again.
    pub fn recorded_since(&self, first: usize) -> Vec<RecordedRequest> {
        let st = self.shared.lock();
        st.requests.get(first..).unwrap_or_default().to_vec()
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
        let st = self.shared.lock();
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

    /// The write instants of the next script with numbered deltas (`Step::Deltas`) played to
    /// its end, in the order the scripts ended; `None` once the server is gone.
    pub async fn next_delta_times(&self) -> Option<DeltaTimes> {
        self.delta_times.lock().await.recv().await
    }

    /// Payload bytes of `Step::Repeat` pieces written into sockets so far (all connections):
    /// how much of a flood got out before the client hung up.
    pub fn repeated_payload_bytes(&self) -> usize {
        self.shared.repeated_payload_bytes.load(Ordering::Relaxed)
    }

    async fn wait_until(&self, what: &str, cond: impl Fn(&State) -> bool) {
        let mut rx = self.shared.version.subscribe();
        let deadline = tokio::time::Instant::now() + wait_timeout();
        loop {
            rx.borrow_and_update();
            if cond(&self.shared.lock()) {
                return;
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                let st = self.shared.lock();
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

/// The body of `GET /v1/models`: the two model ids the editor suites configure.
const MODEL_LIST: &str = r#"{"object":"list","data":[{"id":"mock-model"},{"id":"mock-model-2"}]}"#;

async fn handle_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    // `peek` returns as soon as the first byte is readable, so this is when the client's request
    // reached the mock, not when its whole body had (a large body takes a while to arrive). A
    // client that connects and closes without a byte gets an instant too; `read_request` then
    // fails as before.
    let mut first_byte = [0u8; 1];
    let _ = stream.peek(&mut first_byte).await;
    let first_byte_at = Instant::now();
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

    let (dialect, path_model) = match route(&req.method, &req.path) {
        Some(Route::Model(dialect, model)) => (dialect, model),
        Some(Route::Control(rest)) => {
            control::handle(&mut stream, &shared, &req, &rest).await;
            return;
        }
        Some(Route::ModelList) if shared.options.serve_model_list => {
            let _ = write_plain(&mut stream, 200, "application/json", MODEL_LIST, None).await;
            return;
        }
        _ => {
            let msg = format!(
                "mock LLM serves POST /v1/chat/completions, /v1/messages, /v1/responses and /v1beta/models/M:streamGenerateContent?alt=sse, got {} {}",
                req.method, req.path
            );
            eprintln!("{msg}");
            let body = json!({"error": {"message": msg, "type": "not_found"}}).to_string();
            let _ = write_plain(&mut stream, 404, "application/json", &body, None).await;
            return;
        }
    };
    let body: Value = match serde_json::from_slice(&req.body) {
        Ok(v) => v,
        Err(e) => {
            let msg = format!("mock LLM: request body is not JSON (is it compressed?): {e}");
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
    let rejected = checks::vendor_rejection(dialect, &req.headers, &body);

    // A responder sees the request before it is recorded, outside the state's lock: it may
    // take its time, and no other request waits for it.
    let responded = match (&shared.options.responder, &rejected) {
        (Some(responder), None) => {
            let index = shared.lock().requests.len();
            Some(responder(&IncomingRequest {
                dialect,
                index,
                path: &req.path,
                headers: &req.headers,
                body: &body,
                raw_body: &req.body,
                first_byte_at,
            }))
        }
        _ => None,
    };

    // Copied outside the lock: a large body takes a moment.
    let raw_body = shared
        .options
        .keep_raw_bodies
        .then(|| Arc::from(req.body.as_slice()));
    let (index, script, log_error) = shared.update(|st| {
        let script = match (responded, &rejected) {
            (_, Some(_)) => None,
            (Some(script), None) => Some(script),
            (None, None) => st
                .queue
                .pop_front()
                .or_else(|| shared.options.when_empty.clone()),
        };
        // Appended under the lock, so the log's order is the requests' order.
        let log_error = shared
            .options
            .request_log
            .as_ref()
            .and_then(|path| append_line(path, &body).err());
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
            first_byte_at,
            raw_body,
        });
        let index = st.requests.len() - 1;
        if let Some(hook) = &shared.options.on_record {
            hook(index, &st.requests[index]);
        }
        (index, script, log_error)
    });
    if let Some(e) = log_error {
        eprintln!("mock LLM: could not append request #{index} to the request log: {e}");
    }

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
    let script = match script.map(|s| s.check().map(|()| s)) {
        Some(Ok(script)) => script,
        Some(Err(why)) => {
            // Only a responder's script gets here unchecked.
            eprintln!("mock LLM: request #{index}: {why}");
            let _ = write_plain(
                &mut stream,
                500,
                "application/json",
                &error_body(dialect, 500, &why),
                None,
            )
            .await;
            return;
        }
        None => {
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
        }
    };

    let context = PlayContext {
        dialect,
        model: &model,
        index,
        repeated_payload_bytes: &shared.repeated_payload_bytes,
    };
    match play(&mut stream, &script, &context).await {
        Outcome::Finished { sent } => {
            let _ = stream.shutdown().await;
            shared.update_request(index, |r| r.finished = true);
            if let Some(deltas) = script.steps.iter().find_map(|s| match s {
                Step::Deltas(d) => Some(d),
                _ => None,
            }) {
                let tag = deltas.tag.clone().unwrap_or_default();
                // Nobody listening (a test that does not ask) is fine.
                let _ = shared.delta_times.send(DeltaTimes { tag, sent });
            }
        }
        Outcome::Cancelled => {
            shared.update_request(index, |r| r.cancelled = true);
        }
        Outcome::Disconnect => {
            // A zero linger turns close() into a RST, which the client sees as a broken
            // connection rather than a clean end of body.
            let _ = stream.set_zero_linger();
            drop(stream);
            shared.update_request(index, |r| r.finished = true);
        }
    }
}

/// Appends `value` as one JSON line to the file at `path`.
///
/// The line is built first and handed to the kernel in one `write`: `writeln!` on a `File`
/// issues a write per formatted piece, and a test polling the log (the Neovim specs do) then
/// read half a JSON object and failed to decode it.
fn append_line(path: &std::path::Path, value: &Value) -> std::io::Result<()> {
    let mut line = value.to_string();
    line.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(line.as_bytes())
}
