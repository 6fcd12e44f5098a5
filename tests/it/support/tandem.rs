//! A JSON-RPC client that drives the real `tandem serve` binary over its stdin/stdout pipes.
//!
//! One reader task parses stdout (NDJSON or `Content-Length:` frames, detected per message so a
//! framing mismatch is reported rather than hung on), files responses by id and
//! `session/event` notifications by session, and records anything that is not a protocol
//! message as a stdout error (invariant 10: stdout carries only protocol messages).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::watch;

use super::mock_llm::MockLlm;
use super::wait_timeout;

/// How messages are framed on the pipes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Framing {
    /// One JSON object per line.
    #[default]
    Ndjson,
    /// LSP style: `Content-Length: N\r\n\r\n{json}`.
    ContentLength,
}

/// Frames one message body for the wire.
pub fn frame(framing: Framing, body: &[u8]) -> Vec<u8> {
    match framing {
        Framing::Ndjson => {
            let mut v = body.to_vec();
            v.push(b'\n');
            v
        }
        Framing::ContentLength => {
            let mut v = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
            v.extend_from_slice(body);
            v
        }
    }
}

/// Reads one message in either framing: `Ok(None)` at end of stream; the inner `Err` carries
/// the text of a frame that was not JSON. Blank lines between messages are skipped.
pub async fn read_message<R: AsyncBufRead + Unpin>(
    r: &mut R,
) -> std::io::Result<Option<(Framing, Result<Value, String>)>> {
    use std::io::{Error, ErrorKind};
    loop {
        let mut line = Vec::new();
        if r.read_until(b'\n', &mut line).await? == 0 {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&line).into_owned();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            continue;
        }
        let lower = trimmed.to_ascii_lowercase();
        if let Some(rest) = lower.strip_prefix("content-length:") {
            let len: usize = rest.trim().parse().map_err(|_| {
                Error::new(ErrorKind::InvalidData, format!("bad header {trimmed:?}"))
            })?;
            // Further headers (Content-Type) up to the empty line.
            loop {
                let mut h = Vec::new();
                if r.read_until(b'\n', &mut h).await? == 0 {
                    return Err(Error::new(ErrorKind::UnexpectedEof, "eof in frame headers"));
                }
                if h.iter().all(|b| b.is_ascii_whitespace()) {
                    break;
                }
            }
            let mut body = vec![0u8; len];
            r.read_exact(&mut body).await?;
            let parsed = serde_json::from_slice(&body).map_err(|e| {
                format!(
                    "Content-Length frame is not JSON ({e}): {:?}",
                    String::from_utf8_lossy(&body)
                )
            });
            return Ok(Some((Framing::ContentLength, parsed)));
        }
        let parsed = serde_json::from_str(trimmed)
            .map_err(|e| format!("stdout line is not JSON ({e}): {trimmed:?}"));
        return Ok(Some((Framing::Ndjson, parsed)));
    }
}

/// A JSON-RPC error response.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    /// `error.data.kind`, or "" when the server sent none.
    pub kind: String,
    /// `error.data` as sent (Null when absent).
    pub data: Value,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "JSON-RPC error {} ({}): {}",
            self.code, self.kind, self.message
        )
    }
}

impl std::error::Error for RpcError {}

impl RpcError {
    fn from_response(resp: &Value) -> Option<RpcError> {
        let e = resp.get("error")?;
        let data = e.get("data").cloned().unwrap_or(Value::Null);
        Some(RpcError {
            code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: e
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            kind: data
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            data,
        })
    }
}

/// How to start the server.
#[derive(Clone, Debug, Default)]
pub struct TandemOptions {
    /// TOML written to a temp file and passed as `--config`; `None` passes no `--config`
    /// (the built-in offline `scripted` model).
    pub config: Option<String>,
    /// Passed as `--data-dir`; `None` uses a fresh temp dir owned by the `Tandem`.
    /// Pass your own directory to reopen the same store from a second process.
    pub data_dir: Option<PathBuf>,
    pub framing: Framing,
    /// Extra environment variables (applied last, so they override the harness defaults).
    pub env: Vec<(String, String)>,
    /// Extra arguments appended after `serve --config F --data-dir D`.
    pub args: Vec<String>,
    /// The server's working directory (default: the test's), for relative paths in `args`.
    pub cwd: Option<PathBuf>,
}

impl TandemOptions {
    pub fn new() -> TandemOptions {
        TandemOptions::default()
    }

    /// Options with `config_for(mock)`.
    pub fn with_mock(mock: &MockLlm) -> TandemOptions {
        TandemOptions::new().config(config_for(mock))
    }

    pub fn config(mut self, toml: impl Into<String>) -> TandemOptions {
        self.config = Some(toml.into());
        self
    }

    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> TandemOptions {
        self.data_dir = Some(dir.into());
        self
    }

    pub fn framing(mut self, framing: Framing) -> TandemOptions {
        self.framing = framing;
        self
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> TandemOptions {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> TandemOptions {
        self.cwd = Some(dir.into());
        self
    }

    pub fn arg(mut self, arg: impl Into<String>) -> TandemOptions {
        self.args.push(arg.into());
        self
    }
}

/// The provider/model TOML of DESIGN.md §5 (with the catalog fields protocol.md documents), pointed at the mock:
/// models `mock` (default, name "mock-model"), `mock-2` (name "mock-model-2") and
/// `mock-vision` (name "mock-vision-model", `vision = true`), all on provider `local`.
pub fn config_for(mock: &MockLlm) -> String {
    config_with(mock, "")
}

/// Like `config_for`, with `prelude` inserted right after `default_model`: top-level keys
/// there stay top-level, and any `[table]` it opens ends where the provider table starts.
pub fn config_with(mock: &MockLlm, prelude: &str) -> String {
    format!(
        r#"default_model = "mock"
{prelude}

[providers.local]
kind = "openai"
base_url = "{base}"

[models.mock]
provider = "local"
name = "mock-model"
context_window = 128000

[models.mock-2]
provider = "local"
name = "mock-model-2"
context_window = 128000

[models.mock-vision]
provider = "local"
name = "mock-vision-model"
context_window = 128000
vision = true
"#,
        base = mock.base_url()
    )
}

/// Asserts that the events' `seq` values are exactly 1, 2, 3, ...
pub fn assert_seq_gap_free(events: &[Value]) {
    let seqs: Vec<Option<u64>> = events
        .iter()
        .map(|e| e.get("seq").and_then(Value::as_u64))
        .collect();
    let expected: Vec<Option<u64>> = (1..=events.len() as u64).map(Some).collect();
    assert_eq!(
        seqs, expected,
        "event seq must start at 1 and increase by exactly one"
    );
}

/// Asserts that the events' `seq` values increase by exactly one from whatever the first is
/// (for a process that continues a persisted session).
pub fn assert_seq_contiguous(events: &[Value]) {
    let seqs: Vec<Option<u64>> = events
        .iter()
        .map(|e| e.get("seq").and_then(Value::as_u64))
        .collect();
    let Some(Some(first)) = seqs.first().copied() else {
        assert!(seqs.is_empty(), "first event has no numeric seq: {seqs:?}");
        return;
    };
    let expected: Vec<Option<u64>> = (first..first + seqs.len() as u64).map(Some).collect();
    assert_eq!(seqs, expected, "event seq must increase by exactly one");
}

#[derive(Default)]
struct Log {
    /// Every message from stdout, in arrival order.
    all: Vec<Value>,
    /// Responses keyed by the JSON text of their id.
    responses: HashMap<String, Value>,
    /// `session/event` params per session, in arrival order.
    events: HashMap<String, Vec<Value>>,
    /// Per session: index of the first event `wait_event` has not consumed.
    event_cursor: HashMap<String, usize>,
    /// Ids the harness itself issued; their responses are not returned by `next_raw_message`.
    harness_ids: HashSet<String>,
    raw_cursor: usize,
    /// `all.len()` at the latest `send_raw`: events before it are old news to raw readers.
    raw_events_before: usize,
    /// Anything on stdout that is not a well-formed protocol message, or in the wrong framing.
    stdout_errors: Vec<String>,
    /// stdout reached EOF (the process exited or closed it).
    closed: bool,
}

struct Inner {
    log: Mutex<Log>,
    // Bumped after every change to `log`; waiters re-check their condition when it moves.
    version: watch::Sender<u64>,
    stderr: Mutex<Vec<u8>>,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    framing: Framing,
    next_id: AtomicU64,
    /// False while the test plays a client that does not read stdout.
    reading: watch::Sender<bool>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test may poison a lock; the diagnostics on the way out still need it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    fn update(&self, f: impl FnOnce(&mut Log)) {
        f(&mut lock(&self.log));
        self.version.send_modify(|v| *v += 1);
    }

    fn route(&self, msg: Value) {
        self.update(|log| {
            if msg.get("jsonrpc") != Some(&json!("2.0")) {
                log.stdout_errors
                    .push(format!("message without \"jsonrpc\":\"2.0\": {msg}"));
            }
            let method = msg.get("method").and_then(Value::as_str);
            if method == Some("session/event") && msg.get("id").is_none() {
                let params = msg.get("params").cloned().unwrap_or(Value::Null);
                let sid = params
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if sid.is_empty() {
                    log.stdout_errors
                        .push(format!("session/event without sessionId: {msg}"));
                }
                log.events.entry(sid).or_default().push(params);
            } else if method.is_none() {
                match msg.get("id") {
                    Some(id) if msg.get("result").is_some() || msg.get("error").is_some() => {
                        log.responses.insert(id.to_string(), msg.clone());
                    }
                    _ => log
                        .stdout_errors
                        .push(format!("not a JSON-RPC response or notification: {msg}")),
                }
            }
            log.all.push(msg);
        });
    }
}

/// The running server plus its pipes. Dropping it kills the process.
pub struct Tandem {
    inner: Arc<Inner>,
    child: tokio::sync::Mutex<Option<Child>>,
    opts: TandemOptions,
    data_dir: PathBuf,
    config_path: Option<PathBuf>,
    // Temp dirs live as long as the Tandem (and move to a respawned one).
    scratch: Arc<tempfile::TempDir>,
    owned_data: Option<Arc<tempfile::TempDir>>,
    stderr_reported: AtomicBool,
}

impl Tandem {
    /// Starts `tandem serve` with these options (does not send `initialize`).
    pub fn spawn(opts: TandemOptions) -> Tandem {
        let scratch = Arc::new(
            tempfile::Builder::new()
                .prefix("tandem-test-")
                .tempdir()
                .expect("create scratch tempdir"),
        );
        let (data_dir, owned_data) = match &opts.data_dir {
            Some(d) => (d.clone(), None),
            None => {
                let d = tempfile::Builder::new()
                    .prefix("tandem-data-")
                    .tempdir()
                    .expect("create data tempdir");
                (d.path().to_path_buf(), Some(Arc::new(d)))
            }
        };
        Tandem::spawn_in(opts, scratch, data_dir, owned_data)
    }

    fn spawn_in(
        opts: TandemOptions,
        scratch: Arc<tempfile::TempDir>,
        data_dir: PathBuf,
        owned_data: Option<Arc<tempfile::TempDir>>,
    ) -> Tandem {
        let config_path = opts.config.as_ref().map(|toml| {
            let p = scratch.path().join("config.toml");
            std::fs::write(&p, toml).expect("write config");
            p
        });

        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tandem"));
        cmd.arg("serve");
        if let Some(p) = &config_path {
            cmd.arg("--config").arg(p);
        }
        cmd.arg("--data-dir").arg(&data_dir);
        cmd.args(&opts.args);
        // Keep the developer's own configuration out of the test.
        cmd.env_remove("TANDEM_CONFIG").env_remove("TANDEM_HOME");
        cmd.env("XDG_CONFIG_HOME", scratch.path().join("xdg-config"));
        cmd.env("XDG_DATA_HOME", scratch.path().join("xdg-data"));
        // The mock is on loopback; a proxy from the outer environment must not intercept it.
        for k in [
            "HTTP_PROXY",
            "http_proxy",
            "HTTPS_PROXY",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
        ] {
            cmd.env_remove(k);
        }
        cmd.env("NO_PROXY", "127.0.0.1,localhost");
        // Debug logs only go to the captured stderr buffer, and make failure tails useful.
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "tandem=debug,info");
        }
        for (k, v) in &opts.env {
            cmd.env(k, v);
        }
        if let Some(dir) = &opts.cwd {
            cmd.current_dir(dir);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn the tandem binary");

        let inner = Arc::new(Inner {
            log: Mutex::new(Log::default()),
            version: watch::Sender::new(0),
            stderr: Mutex::new(Vec::new()),
            stdin: tokio::sync::Mutex::new(child.stdin.take()),
            framing: opts.framing,
            next_id: AtomicU64::new(1),
            reading: watch::Sender::new(true),
        });

        let stdout = child.stdout.take().unwrap();
        let i = inner.clone();
        tokio::spawn(async move {
            let mut r = BufReader::new(stdout);
            let mut reading = i.reading.subscribe();
            loop {
                // A paused client reads nothing, so the server's stdout pipe fills up.
                if reading.wait_for(|on| *on).await.is_err() {
                    break;
                }
                match read_message(&mut r).await {
                    Ok(Some((framing, Ok(msg)))) => {
                        if framing != i.framing {
                            i.update(|log| {
                                log.stdout_errors.push(format!(
                                    "server answered in {framing:?} framing, client uses {:?}: {msg}",
                                    i.framing
                                ))
                            });
                        }
                        i.route(msg);
                    }
                    Ok(Some((_, Err(text)))) => i.update(|log| log.stdout_errors.push(text)),
                    Ok(None) => break,
                    Err(e) => {
                        i.update(|log| log.stdout_errors.push(format!("stdout read error: {e}")));
                        break;
                    }
                }
            }
            i.update(|log| log.closed = true);
        });

        let stderr = child.stderr.take().unwrap();
        let i = inner.clone();
        let echo = std::env::var_os("TANDEM_TEST_ECHO_STDERR").is_some();
        tokio::spawn(async move {
            let mut stderr = stderr;
            let mut buf = [0u8; 4096];
            loop {
                match stderr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if echo {
                            eprint!("{}", String::from_utf8_lossy(&buf[..n]));
                        }
                        lock(&i.stderr).extend_from_slice(&buf[..n]);
                        i.version.send_modify(|v| *v += 1);
                    }
                }
            }
        });

        Tandem {
            inner,
            child: tokio::sync::Mutex::new(Some(child)),
            opts,
            data_dir,
            config_path,
            scratch,
            owned_data,
            stderr_reported: AtomicBool::new(false),
        }
    }

    /// Spawns with `config_for(mock)` and sends `initialize`.
    pub async fn start(mock: &MockLlm) -> Tandem {
        Tandem::start_with(TandemOptions::with_mock(mock)).await
    }

    /// Spawns with these options and sends `initialize`.
    pub async fn start_with(opts: TandemOptions) -> Tandem {
        let t = Tandem::spawn(opts);
        t.initialize().await;
        t
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn config_path(&self) -> Option<&Path> {
        self.config_path.as_deref()
    }

    pub fn framing(&self) -> Framing {
        self.inner.framing
    }

    // ---- diagnostics -------------------------------------------------------------------

    /// The whole stderr captured so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&lock(&self.inner.stderr)).into_owned()
    }

    /// The last 60 lines of stderr, for failure messages.
    pub fn stderr_tail(&self) -> String {
        let all = self.stderr();
        let lines: Vec<&str> = all.lines().collect();
        let start = lines.len().saturating_sub(60);
        lines[start..].join("\n")
    }

    /// Everything on stdout that was not a well-formed protocol message in the client's framing.
    pub fn stdout_errors(&self) -> Vec<String> {
        lock(&self.inner.log).stdout_errors.clone()
    }

    /// Every message received so far, in arrival order.
    pub fn messages(&self) -> Vec<Value> {
        lock(&self.inner.log).all.clone()
    }

    fn failure_context(&self, log: &Log, session: Option<&str>) -> String {
        let mut s = String::new();
        if let Some(sid) = session {
            let evs = log.events.get(sid).map(Vec::as_slice).unwrap_or(&[]);
            let cur = log.event_cursor.get(sid).copied().unwrap_or(0);
            s.push_str(&format!(
                "\n--- events of session {sid} ({} total, {} already consumed by wait_event; last 25) ---\n",
                evs.len(),
                cur
            ));
            for e in evs.iter().skip(evs.len().saturating_sub(25)) {
                s.push_str(&format!("{e}\n"));
            }
        } else {
            s.push_str("\n--- last 15 messages ---\n");
            for m in log.all.iter().skip(log.all.len().saturating_sub(15)) {
                s.push_str(&format!("{m}\n"));
            }
        }
        if !log.stdout_errors.is_empty() {
            s.push_str(&format!(
                "--- stdout errors ---\n{:#?}\n",
                log.stdout_errors
            ));
        }
        s.push_str(&format!(
            "--- tandem stderr (tail) ---\n{}\n--- end ---",
            self.stderr_tail()
        ));
        self.stderr_reported.store(true, Ordering::Relaxed);
        s
    }

    /// Stop reading stdout, like a client that is busy elsewhere: once the pipe is full the
    /// server's writes would block. Messages already read stay readable.
    pub fn pause_stdout(&self) {
        self.inner.reading.send_replace(false);
    }

    /// Read stdout again after [`Tandem::pause_stdout`].
    pub fn resume_stdout(&self) {
        self.inner.reading.send_replace(true);
    }

    /// Waits until the server's stderr (its log) contains `text`.
    pub async fn wait_stderr(&self, text: &str) {
        let what = format!("{text:?} on stderr");
        self.wait_for(&what, None, |_| self.stderr().contains(text).then_some(()))
            .await
    }

    /// Waits until `check` returns Some, re-checking after every message. Panics on timeout or
    /// when stdout closes first, with the session's events (or the last messages) and stderr.
    async fn wait_for<T>(
        &self,
        what: &str,
        session: Option<&str>,
        check: impl FnMut(&mut Log) -> Option<T>,
    ) -> T {
        self.wait_for_within(what, session, wait_timeout(), check)
            .await
    }

    /// [`Tandem::wait_for`] with its own guard, for the few steps whose work grows with a
    /// deliberately huge input (megabytes through a debug build on a loaded 2-core machine).
    async fn wait_for_within<T>(
        &self,
        what: &str,
        session: Option<&str>,
        limit: std::time::Duration,
        mut check: impl FnMut(&mut Log) -> Option<T>,
    ) -> T {
        let mut rx = self.inner.version.subscribe();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            rx.borrow_and_update();
            let failure = {
                let mut log = lock(&self.inner.log);
                if let Some(t) = check(&mut log) {
                    return t;
                }
                log.closed.then(|| {
                    format!(
                        "tandem closed stdout (exited?) while waiting for {what}{}",
                        self.failure_context(&log, session)
                    )
                })
            };
            if let Some(msg) = failure {
                panic!("{msg}");
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                let msg = {
                    let log = lock(&self.inner.log);
                    format!(
                        "timed out after {:?} waiting for {what}{}",
                        wait_timeout(),
                        self.failure_context(&log, session)
                    )
                };
                panic!("{msg}");
            }
        }
    }

    // ---- writing -----------------------------------------------------------------------

    async fn write_bytes(&self, bytes: &[u8]) {
        let mut stdin = self.inner.stdin.lock().await;
        let Some(w) = stdin.as_mut() else {
            panic!("tandem stdin was already closed");
        };
        let r = async {
            w.write_all(bytes).await?;
            w.flush().await
        }
        .await;
        if let Err(e) = r {
            drop(stdin);
            panic!(
                "writing to tandem stdin failed ({e}); stderr tail:\n{}",
                self.stderr_tail()
            );
        }
    }

    /// Writes one message in the client's framing.
    pub async fn send_message(&self, msg: &Value) {
        let body = serde_json::to_vec(msg).unwrap();
        self.write_bytes(&frame(self.inner.framing, &body)).await;
    }

    /// Writes bytes verbatim (malformed-frame tests). Use string ids in hand-written requests
    /// so they cannot collide with the harness's numeric ids.
    pub async fn send_raw(&self, bytes: &[u8]) {
        {
            let mut log = lock(&self.inner.log);
            log.raw_events_before = log.all.len();
        }
        self.write_bytes(bytes).await;
    }

    /// Closes stdin (EOF for the server).
    pub async fn close_stdin(&self) {
        self.inner.stdin.lock().await.take();
    }

    // ---- requests ----------------------------------------------------------------------

    /// Sends a request without waiting; returns its id (for pipelining several messages).
    /// `Value::Null` params are omitted from the message.
    pub async fn send_request(&self, method: &str, params: Value) -> u64 {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.inner.log)
            .harness_ids
            .insert(json!(id).to_string());
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        self.send_message(&msg).await;
        id
    }

    /// Waits for the response to a request sent with `send_request`.
    pub async fn response(&self, id: u64) -> Result<Value, RpcError> {
        let resp = self.wait_response(&json!(id)).await;
        match RpcError::from_response(&resp) {
            Some(e) => Err(e),
            None => Ok(resp.get("result").cloned().unwrap_or(Value::Null)),
        }
    }

    /// Waits for the full response object (`{jsonrpc, id, result|error}`) with this id.
    pub async fn wait_response(&self, id: &Value) -> Value {
        let key = id.to_string();
        self.wait_for(&format!("the response to id {key}"), None, |log| {
            log.responses.get(&key).cloned()
        })
        .await
    }

    /// Sends a request and waits for its result or error.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.send_request(method, params).await;
        self.response(id).await
    }

    /// `request`, panicking (with stderr) on an error response.
    pub async fn request_ok(&self, method: &str, params: Value) -> Value {
        let shown = params.to_string();
        match self.request(method, params).await {
            Ok(v) => v,
            Err(e) => {
                self.stderr_reported.store(true, Ordering::Relaxed);
                panic!(
                    "{method} {shown} failed: {e} (data {})\n--- tandem stderr (tail) ---\n{}",
                    e.data,
                    self.stderr_tail()
                )
            }
        }
    }

    /// `request`, panicking unless it fails; returns the error.
    pub async fn request_err(&self, method: &str, params: Value) -> RpcError {
        let shown = params.to_string();
        match self.request(method, params).await {
            Ok(v) => panic!("{method} {shown} was expected to fail but returned {v}"),
            Err(e) => e,
        }
    }

    /// Sends a notification (no id, no response).
    pub async fn notify(&self, method: &str, params: Value) {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        self.send_message(&msg).await;
    }

    /// The next message not yet returned by this function, in arrival order, skipping
    /// responses to the harness's own requests (those belong to `request`) and
    /// `session/event`s that arrived before the latest `send_raw`. Later events are included:
    /// use `next_raw_message_where` while a session is emitting events.
    pub async fn next_raw_message(&self) -> Value {
        self.next_raw_message_where(|_| true).await
    }

    /// Like `next_raw_message`, but also skips (for good) messages not matching `pred`.
    pub async fn next_raw_message_where(&self, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_for("the next raw message", None, |log| {
            while log.raw_cursor < log.all.len() {
                let i = log.raw_cursor;
                log.raw_cursor += 1;
                let m = &log.all[i];
                let harness_response = m.get("method").is_none()
                    && m.get("id")
                        .is_some_and(|id| log.harness_ids.contains(&id.to_string()));
                let old_event = i < log.raw_events_before
                    && m.get("method").and_then(Value::as_str) == Some("session/event");
                if !harness_response && !old_event && pred(m) {
                    return Some(m.clone());
                }
            }
            None
        })
        .await
    }

    /// Moves the raw cursor past everything received so far.
    pub fn skip_raw_messages(&self) {
        let mut log = lock(&self.inner.log);
        log.raw_cursor = log.all.len();
    }

    // ---- events ------------------------------------------------------------------------

    /// All events of a session so far (the `params` of each `session/event`), in arrival order.
    pub fn events(&self, session_id: &str) -> Vec<Value> {
        lock(&self.inner.log)
            .events
            .get(session_id)
            .cloned()
            .unwrap_or_default()
    }

    /// Events of a session with this `type`, so far.
    pub fn events_of_type(&self, session_id: &str, ty: &str) -> Vec<Value> {
        self.events(session_id)
            .into_iter()
            .filter(|e| e["type"] == ty)
            .collect()
    }

    /// The first event so far (consumed or not) matching `pred`.
    pub fn find_event(&self, session_id: &str, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        self.events(session_id).into_iter().find(|e| pred(e))
    }

    /// Waits for the next event of the session matching `pred`.
    ///
    /// Each session has a cursor: the search starts after the event the previous `wait_event`
    /// returned, and the match moves the cursor past it. Skipped events stay in `events()`.
    /// So two `wait_event_type(sid, "turnEnded")` calls return two different turns' ends, and
    /// waiting for an event that came before the last match times out: look it up with
    /// `events`/`find_event` instead.
    /// Waits up to `limit` for an event of the session matching `pred`, searching all its
    /// events (seen or not) and leaving `wait_event`'s cursor alone: for facts that arrive in no
    /// fixed order with others, like the statuses of MCP servers starting in parallel.
    pub async fn wait_any_event_within(
        &self,
        session_id: &str,
        what: &str,
        limit: std::time::Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let what = format!("{what} in session {session_id}");
        self.wait_for_within(&what, Some(session_id), limit, |log| {
            log.events
                .get(session_id)?
                .iter()
                .find(|e| pred(e))
                .cloned()
        })
        .await
    }

    pub async fn wait_event(&self, session_id: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_event_described(session_id, "a matching event", pred)
            .await
    }

    async fn wait_event_described(
        &self,
        session_id: &str,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let what = format!("{what} in session {session_id}");
        self.wait_for(&what, Some(session_id), |log| {
            let evs = log.events.get(session_id)?;
            let cur = log.event_cursor.get(session_id).copied().unwrap_or(0);
            let found = evs
                .iter()
                .enumerate()
                .skip(cur)
                .find(|(_, e)| pred(e))
                .map(|(i, e)| (i, e.clone()));
            found.map(|(i, e)| {
                log.event_cursor.insert(session_id.to_string(), i + 1);
                e
            })
        })
        .await
    }

    /// Waits for the next event with this `type` (see `wait_event` for the cursor rule).
    pub async fn wait_event_type(&self, session_id: &str, ty: &str) -> Value {
        self.wait_event_described(session_id, &format!("a {ty:?} event"), |e| e["type"] == ty)
            .await
    }

    /// Waits for the next `turnEnded` event.
    pub async fn wait_turn_ended(&self, session_id: &str) -> Value {
        self.wait_event_type(session_id, "turnEnded").await
    }

    /// Waits for `turnEnded` of this turn and returns all the session's events of the turn.
    pub async fn wait_turn(&self, session_id: &str, turn_id: &str) -> Vec<Value> {
        self.wait_event_described(session_id, &format!("turnEnded of turn {turn_id}"), |e| {
            e["type"] == "turnEnded" && e["turnId"] == turn_id
        })
        .await;
        self.events(session_id)
            .into_iter()
            .filter(|e| e["turnId"] == turn_id)
            .collect()
    }

    /// Waits for the next `approvalRequested` event.
    pub async fn wait_approval(&self, session_id: &str) -> Value {
        self.wait_event_type(session_id, "approvalRequested").await
    }

    /// [`Tandem::wait_approval`] with its own guard (see [`Tandem::wait_for_within`]).
    pub async fn wait_approval_within(
        &self,
        session_id: &str,
        limit: std::time::Duration,
    ) -> Value {
        let what = format!("an approvalRequested event in session {session_id}");
        self.wait_for_within(&what, Some(session_id), limit, |log| {
            let evs = log.events.get(session_id)?;
            let cur = log.event_cursor.get(session_id).copied().unwrap_or(0);
            let (i, e) = evs
                .iter()
                .enumerate()
                .skip(cur)
                .find(|(_, e)| e["type"] == "approvalRequested")
                .map(|(i, e)| (i, e.clone()))?;
            log.event_cursor.insert(session_id.to_string(), i + 1);
            Some(e)
        })
        .await
    }

    // ---- protocol conveniences (panic on error; use `request` to test errors) -----------

    /// `initialize` with protocol 1, a test clientInfo and `capabilities.approvals: true`.
    pub async fn initialize(&self) -> Value {
        self.request_ok(
            "initialize",
            json!({
                "protocolVersion": 1,
                "clientInfo": {"name": "tandem-tests", "version": "0.0.0"},
                "capabilities": {"approvals": true},
            }),
        )
        .await
    }

    /// `session/new` in `cwd`; returns the session id.
    pub async fn new_session(&self, cwd: &Path) -> String {
        let r = self.request_ok("session/new", json!({"cwd": cwd})).await;
        r["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new result without sessionId: {r}"))
            .to_string()
    }

    /// `session/new` with extra params (`model`, `mode`); returns the whole result.
    pub async fn new_session_with(&self, cwd: &Path, extra: Value) -> Value {
        let mut params = json!({"cwd": cwd});
        if let Value::Object(m) = extra {
            for (k, v) in m {
                params[k] = v;
            }
        }
        self.request_ok("session/new", params).await
    }

    /// `session/new` in `mode`; returns the session id.
    pub async fn new_session_in(&self, cwd: &Path, mode: &str) -> String {
        let created = self.new_session_with(cwd, json!({ "mode": mode })).await;
        created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new without a sessionId: {created}"))
            .to_owned()
    }

    /// `prompt` with a text; returns the turn id.
    pub async fn prompt(&self, session_id: &str, text: &str) -> String {
        self.prompt_content(session_id, json!(text)).await
    }

    /// `prompt` with any content (a string or a parts array); returns the turn id.
    pub async fn prompt_content(&self, session_id: &str, content: Value) -> String {
        let r = self
            .request_ok(
                "prompt",
                json!({"sessionId": session_id, "content": content}),
            )
            .await;
        r["turnId"]
            .as_str()
            .unwrap_or_else(|| panic!("prompt result without turnId: {r}"))
            .to_string()
    }

    /// `approve`; `edited` becomes `editedContent`.
    pub async fn approve(
        &self,
        session_id: &str,
        request_id: &str,
        decision: &str,
        message: Option<&str>,
        edited: Option<&str>,
    ) {
        let mut params = json!({
            "sessionId": session_id,
            "requestId": request_id,
            "decision": decision,
        });
        if let Some(m) = message {
            params["message"] = json!(m);
        }
        if let Some(e) = edited {
            params["editedContent"] = json!(e);
        }
        self.request_ok("approve", params).await;
    }

    /// `answer` an `ask_user` question or a plan proposal.
    pub async fn answer(&self, session_id: &str, request_id: &str, answer: &str) {
        self.request_ok(
            "answer",
            json!({"sessionId": session_id, "requestId": request_id, "answer": answer}),
        )
        .await;
    }

    /// `stop`; returns `stopped`.
    pub async fn stop(&self, session_id: &str) -> bool {
        let r = self
            .request_ok("stop", json!({"sessionId": session_id}))
            .await;
        r["stopped"]
            .as_bool()
            .unwrap_or_else(|| panic!("stop result without stopped: {r}"))
    }

    pub async fn steer(&self, session_id: &str, text: &str) {
        self.request_ok("steer", json!({"sessionId": session_id, "text": text}))
            .await;
    }

    /// `switchModel`; returns `{model, warning?}`.
    pub async fn switch_model(&self, session_id: &str, model: &str) -> Value {
        self.request_ok(
            "switchModel",
            json!({"sessionId": session_id, "model": model}),
        )
        .await
    }

    pub async fn set_mode(&self, session_id: &str, mode: &str) {
        self.request_ok("setMode", json!({"sessionId": session_id, "mode": mode}))
            .await;
    }

    /// `session/load`; returns the whole result.
    pub async fn load_session(&self, session_id: &str) -> Value {
        self.request_ok("session/load", json!({"sessionId": session_id}))
            .await
    }

    // ---- process lifecycle -------------------------------------------------------------

    /// Waits (guarded) for the process to exit and returns its status.
    pub async fn wait_exit(&self) -> ExitStatus {
        let mut guard = self.child.lock().await;
        let Some(child) = guard.as_mut() else {
            panic!("tandem process already reaped");
        };
        match tokio::time::timeout(wait_timeout(), child.wait()).await {
            Ok(status) => {
                let status = status.expect("wait for tandem");
                guard.take();
                status
            }
            Err(_) => {
                drop(guard);
                self.stderr_reported.store(true, Ordering::Relaxed);
                panic!(
                    "tandem did not exit within {:?} (a server blocked reading stdin would hang \
                     like this)\n--- tandem stderr (tail) ---\n{}",
                    wait_timeout(),
                    self.stderr_tail()
                );
            }
        }
    }

    /// Sends `shutdown`, expects a `null` result, a zero exit status and a clean stdout.
    pub async fn shutdown(self) {
        let r = self.request_ok("shutdown", Value::Null).await;
        assert_eq!(r, Value::Null, "shutdown result must be null");
        let status = self.wait_exit().await;
        // stdout is flushed before exit; the reader has seen EOF once it closes.
        let what = "stdout to close after exit (does a leaked child process hold it open?)";
        self.wait_for(what, None, |log| log.closed.then_some(()))
            .await;
        assert!(
            status.success(),
            "tandem exited with {status} after shutdown\n--- stderr tail ---\n{}",
            self.stderr_tail()
        );
        let errors = self.stdout_errors();
        assert!(
            errors.is_empty(),
            "stdout carried non-protocol output: {errors:#?}"
        );
    }

    /// The server's process id, while it runs.
    pub async fn pid(&self) -> Option<u32> {
        self.child.lock().await.as_ref().and_then(|c| c.id())
    }

    /// The server's resident memory in KiB (VmRSS), while it runs.
    pub async fn rss_kib(&self) -> Option<u64> {
        self.proc_status_kib("VmRSS:").await
    }

    /// The most resident memory the server has had so far, in KiB (VmHWM): a peak that no
    /// sampling can miss.
    pub async fn peak_rss_kib(&self) -> Option<u64> {
        self.proc_status_kib("VmHWM:").await
    }

    async fn proc_status_kib(&self, field: &str) -> Option<u64> {
        let pid = self.pid().await?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    }

    /// Kills the process (SIGKILL, a crash) and reaps it; the data dir is kept.
    pub async fn kill(&self) {
        let mut guard = self.child.lock().await;
        if let Some(child) = guard.as_mut() {
            let _ = child.start_kill();
            let _ = child.wait().await;
            guard.take();
        }
    }

    /// Kills the process if it still runs and starts a new one with the same options, config
    /// and data dir (crash/restart tests). The new process is not initialized.
    pub async fn respawn(self) -> Tandem {
        self.kill().await;
        self.stderr_reported.store(true, Ordering::Relaxed);
        Tandem::spawn_in(
            self.opts.clone(),
            self.scratch.clone(),
            self.data_dir.clone(),
            self.owned_data.clone(),
        )
    }
}

impl Drop for Tandem {
    fn drop(&mut self) {
        // When a test fails somewhere the harness did not see, the server's log is still the
        // first thing one wants; print it once.
        if std::thread::panicking() && !self.stderr_reported.swap(true, Ordering::Relaxed) {
            eprintln!(
                "--- tandem stderr (tail, test panicked) ---\n{}\n--- end ---",
                self.stderr_tail()
            );
        }
    }
}
