//! Core benchmark of `tandem serve`: cold start, idle memory and streaming delta latency, each printed beside an anchor measured in the same run.
//!
//! Run it with `cargo run --release --example bench_core [-- --bin PATH]`. It exits non-zero only
//! when something fails; a missed target is reported in the table, not as an error.
//!
//! Every figure has an anchor so that a slow or loaded machine shows up as a slow anchor rather
//! than as a tandem regression:
//! - cold start and idle memory are compared with `/bin/cat`, the floor of "spawn a process and
//!   echo one line through its pipes";
//! - delta latency is compared with the same mock stream consumed in-process by the minimal
//!   reqwest + eventsource-stream + serde_json pipeline that any Rust agent needs.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Result<T> = std::result::Result<T, BoxError>;

const INITIALIZE_LINE: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#;
const COLD_START_WARMUPS: usize = 2;
const COLD_START_RUNS: usize = 20;
/// Idle memory is sampled a few times because page-fault timing makes single samples noisy.
const RSS_RUNS: usize = 3;
const RSS_SETTLE: Duration = Duration::from_secs(1);
const DELTAS: usize = 2_000;
const DELTA_PACE: Duration = Duration::from_millis(1);
/// Generous: the turn itself takes about DELTAS * DELTA_PACE.
const TURN_TIMEOUT: Duration = Duration::from_secs(30);
const EXIT_TIMEOUT: Duration = Duration::from_secs(5);

const COLD_START_TARGET: Duration = Duration::from_millis(10);
const IDLE_RSS_TARGET_KIB: u64 = 15 * 1024;
const DELTA_MEDIAN_TARGET: Duration = Duration::from_micros(300);

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench_core: error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let bin = resolve_binary(parse_bin_arg()?)?;
    let tandem = Subject::Tandem(&bin);

    progress(&format!(
        "cold start: {COLD_START_WARMUPS} warm-up + {COLD_START_RUNS} runs each"
    ));
    let cold_tandem = summarize(cold_starts(&tandem)?);
    let cold_cat = summarize(cold_starts(&Subject::Cat)?);

    progress(&format!(
        "idle memory: {RSS_RUNS} samples each, {} s after initialize",
        RSS_SETTLE.as_secs()
    ));
    let rss_tandem = median_u64(idle_rss_samples(&tandem)?);
    let rss_cat = median_u64(idle_rss_samples(&Subject::Cat)?);

    progress(&format!(
        "delta latency: {DELTAS} deltas paced {} ms apart, floor then tandem",
        DELTA_PACE.as_millis()
    ));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (floor, turn) = runtime.block_on(async {
        let floor = floor_latencies().await?;
        let turn = tandem_latencies(&bin).await?;
        Ok::<_, BoxError>((summarize(floor), turn))
    })?;
    let delta_tandem = summarize(turn.latencies);

    let rows = vec![
        Row::duration(
            "Cold start, median (spawn → initialize reply)",
            cold_tandem.median,
            cold_cat.median,
            "`/bin/cat` round trip",
            Some((COLD_START_TARGET, "< 10 ms")),
        ),
        Row::duration(
            "Cold start, p90",
            cold_tandem.p90,
            cold_cat.p90,
            "`/bin/cat` round trip",
            None,
        ),
        Row::memory(
            "Idle RSS, 1 s after initialize",
            rss_tandem,
            rss_cat,
            (IDLE_RSS_TARGET_KIB, "< 15 MB"),
        ),
        Row::duration(
            "Delta latency, median (mock write → stdout line)",
            delta_tandem.median,
            floor.median,
            "in-process reqwest+SSE+serde floor",
            Some((DELTA_MEDIAN_TARGET, "< 0.3 ms")),
        ),
        Row::duration(
            "Delta latency, p99",
            delta_tandem.p99,
            floor.p99,
            "in-process reqwest+SSE+serde floor",
            None,
        ),
    ];
    print_report(&bin, &rows, turn.rss_after_kib);
    Ok(())
}

fn progress(message: &str) {
    eprintln!("bench_core: {message}");
}

// ---------------------------------------------------------------------------------------------
// The binary under test

/// `--bin PATH` (or `--bin=PATH`), the only option.
fn parse_bin_arg() -> Result<Option<PathBuf>> {
    let mut args = std::env::args_os().skip(1);
    let mut bin = None;
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy().into_owned();
        if text == "--bin" {
            let value = args.next().ok_or("--bin needs a path")?;
            bin = Some(PathBuf::from(value));
        } else if let Some(value) = text.strip_prefix("--bin=") {
            bin = Some(PathBuf::from(value));
        } else if text == "-h" || text == "--help" {
            println!("usage: cargo run --release --example bench_core [-- --bin PATH]\n\nPATH defaults to $TANDEM_BIN, then target/release/tandem (built if missing).");
            std::process::exit(0);
        } else {
            return Err(format!("unknown argument `{text}`; the only option is --bin PATH").into());
        }
    }
    Ok(bin)
}

/// An explicit path must exist; the default one is built when missing, since that is what a
/// fresh checkout needs.
fn resolve_binary(explicit: Option<PathBuf>) -> Result<PathBuf> {
    let explicit = explicit.or_else(|| std::env::var_os("TANDEM_BIN").map(PathBuf::from));
    if let Some(path) = explicit {
        if !path.is_file() {
            return Err(format!("the tandem binary {} does not exist", path.display()).into());
        }
        return Ok(path);
    }
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = manifest_dir.join("target/release/tandem");
    if !path.is_file() {
        progress(&format!(
            "{} is missing: running `cargo build --release --bin tandem` first",
            path.display()
        ));
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
        let status = Command::new(cargo)
            .args(["build", "--release", "--bin", "tandem"])
            .current_dir(manifest_dir)
            .status()?;
        if !status.success() || !path.is_file() {
            return Err(format!("`cargo build --release` failed ({status})").into());
        }
    }
    warn_if_stale(&path, manifest_dir);
    Ok(path)
}

/// `cargo run --example` does not rebuild the server binary, so say when the figures would
/// describe older sources than the ones checked out.
fn warn_if_stale(bin: &Path, manifest_dir: &Path) {
    let Ok(built) = std::fs::metadata(bin).and_then(|m| m.modified()) else {
        return;
    };
    let mut newer = Vec::new();
    collect_newer(&manifest_dir.join("src"), built, &mut newer);
    collect_newer(&manifest_dir.join("Cargo.toml"), built, &mut newer);
    if !newer.is_empty() {
        progress(&format!(
            "warning: {} is older than {} source file(s) (e.g. {}); run `cargo build --release` to measure the current sources",
            bin.display(),
            newer.len(),
            newer[0].display()
        ));
    }
}

fn collect_newer(path: &Path, than: std::time::SystemTime, newer: &mut Vec<PathBuf>) {
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            collect_newer(&entry.path(), than, newer);
        }
    } else if meta.modified().is_ok_and(|m| m > than) {
        newer.push(path.to_owned());
    }
}

// ---------------------------------------------------------------------------------------------
// Cold start and idle memory

/// A process that answers one line on stdin with one line on stdout.
enum Subject<'a> {
    Tandem(&'a Path),
    Cat,
}

impl Subject<'_> {
    fn command(&self, data_dir: &Path) -> Command {
        match self {
            Subject::Tandem(bin) => {
                let mut command = Command::new(bin);
                command.arg("serve").arg("--data-dir").arg(data_dir);
                // The ambient environment must not pick a config or a log level for us.
                command.env_remove("TANDEM_CONFIG").env_remove("RUST_LOG");
                command
            }
            Subject::Cat => Command::new("/bin/cat"),
        }
    }

    /// Checked after the clock stops, so validation is not part of the figure.
    fn check_reply(&self, line: &str) -> Result<()> {
        let reply: Value =
            serde_json::from_str(line).map_err(|e| format!("reply is not JSON ({e}): {line:?}"))?;
        let ok = match self {
            Subject::Tandem(_) => reply["id"] == 1 && reply.get("result").is_some(),
            Subject::Cat => reply["method"] == "initialize",
        };
        if ok {
            Ok(())
        } else {
            Err(format!("unexpected initialize reply: {line}").into())
        }
    }
}

/// A spawned subject with its pipes; it exits when its stdin closes.
struct Served {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Served {
    fn spawn(subject: &Subject, data_dir: &Path) -> Result<Served> {
        let mut child = subject
            .command(data_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take().expect("stdin was piped");
        let stdout = child.stdout.take().expect("stdout was piped");
        Ok(Served {
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout),
        })
    }

    fn round_trip(&mut self, line: &str) -> Result<String> {
        let stdin = self.stdin.as_mut().expect("stdin is open until close");
        stdin.write_all(line.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush()?;
        let mut reply = String::new();
        if self.stdout.read_line(&mut reply)? == 0 {
            return Err("the process closed stdout before replying".into());
        }
        Ok(reply)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn close(mut self) -> Result<()> {
        drop(self.stdin.take());
        wait_or_kill(&mut self.child, EXIT_TIMEOUT)
    }
}

/// End of stdin must make the server exit; a hang is reported rather than waited out.
fn wait_or_kill(child: &mut Child, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill()?;
    child.wait()?;
    Err(format!(
        "process {} did not exit within {timeout:?} of its stdin closing",
        child.id()
    )
    .into())
}

fn cold_start_once(subject: &Subject) -> Result<Duration> {
    // A fresh data dir per run, created before the clock starts.
    let data_dir = tempfile::tempdir()?;
    let start = Instant::now();
    let mut served = Served::spawn(subject, data_dir.path())?;
    let reply = served.round_trip(INITIALIZE_LINE)?;
    let elapsed = start.elapsed();
    subject.check_reply(&reply)?;
    served.close()?;
    Ok(elapsed)
}

fn cold_starts(subject: &Subject) -> Result<Vec<Duration>> {
    for _ in 0..COLD_START_WARMUPS {
        cold_start_once(subject)?;
    }
    (0..COLD_START_RUNS)
        .map(|_| cold_start_once(subject))
        .collect()
}

fn idle_rss_once(subject: &Subject) -> Result<u64> {
    let data_dir = tempfile::tempdir()?;
    let mut served = Served::spawn(subject, data_dir.path())?;
    let reply = served.round_trip(INITIALIZE_LINE)?;
    subject.check_reply(&reply)?;
    // A measurement point, not a synchronisation: whatever the process does in its first second
    // (lazy allocations, thread stacks touched) counts as idle footprint.
    std::thread::sleep(RSS_SETTLE);
    let rss = rss_kib(served.pid())?;
    served.close()?;
    Ok(rss)
}

fn idle_rss_samples(subject: &Subject) -> Result<Vec<u64>> {
    (0..RSS_RUNS).map(|_| idle_rss_once(subject)).collect()
}

/// VmRSS of a live process, in KiB.
fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or("no VmRSS line in /proc/PID/status")?;
    let kib = line
        .split_whitespace()
        .nth(1)
        .ok_or("malformed VmRSS line")?
        .parse()?;
    Ok(kib)
}

// ---------------------------------------------------------------------------------------------
// The mock OpenAI-compatible server

/// Streams `DELTAS` chat-completion chunks per request and reports when each was written.
struct MockLlm {
    base_url: String,
    send_times: mpsc::UnboundedReceiver<Vec<Instant>>,
}

impl MockLlm {
    async fn start() -> Result<MockLlm> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}/v1", listener.local_addr()?);
        let (tx, send_times) = mpsc::unbounded_channel();
        tokio::spawn(accept_loop(listener, tx));
        Ok(MockLlm {
            base_url,
            send_times,
        })
    }

    /// The write instants of the next completed stream, indexed by delta number.
    async fn next_send_times(&mut self) -> Result<Vec<Instant>> {
        let times = tokio::time::timeout(TURN_TIMEOUT, self.send_times.recv())
            .await
            .map_err(|_| "the mock never finished a stream")?
            .ok_or("the mock server stopped")?;
        Ok(times)
    }
}

async fn accept_loop(listener: TcpListener, tx: mpsc::UnboundedSender<Vec<Instant>>) {
    while let Ok((stream, _)) = listener.accept().await {
        let tx = tx.clone();
        tokio::spawn(async move {
            match serve_connection(stream).await {
                Ok(Some(times)) => {
                    let _ = tx.send(times);
                }
                Ok(None) => {}
                Err(error) => progress(&format!("mock server: connection failed: {error}")),
            }
        });
    }
}

/// One request per connection (`Connection: close`); `None` for anything but a chat completion.
async fn serve_connection(mut stream: TcpStream) -> Result<Option<Vec<Instant>>> {
    // Without NODELAY, Nagle would hold small chunks back and the figure would measure it.
    stream.set_nodelay(true)?;
    let request_line = read_request(&mut stream).await?;
    if !request_line.starts_with("POST /v1/chat/completions ") {
        stream
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await?;
        return Ok(None);
    }
    stream
        .write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
        )
        .await?;
    stream.flush().await?;
    let times = stream_deltas(&mut stream).await?;
    stream.shutdown().await?;
    Ok(Some(times))
}

/// Reads the whole request (headers and body), so closing the socket later cannot reset it
/// with unread data, and returns the request line.
async fn read_request(stream: &mut TcpStream) -> Result<String> {
    let mut buffer = Vec::with_capacity(16 * 1024);
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(at) = find(&buffer, b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err("client closed the connection mid-request".into());
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    let chunked = header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let content_length: usize = header("content-length")
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(0);
    loop {
        let body = &buffer[header_end..];
        let complete = if chunked {
            body.ends_with(b"0\r\n\r\n")
        } else {
            body.len() >= content_length
        };
        if complete {
            break;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err("client closed the connection mid-body".into());
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    Ok(head.lines().next().unwrap_or_default().to_owned())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn delta_event(n: usize) -> String {
    format!(
        "data: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{n} \"}},\"finish_reason\":null}}]}}\n\n"
    )
}

const FINISH_EVENTS: &str = "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

async fn stream_deltas(stream: &mut TcpStream) -> Result<Vec<Instant>> {
    let mut interval = tokio::time::interval(DELTA_PACE);
    // If the mock falls behind it keeps the spacing instead of bursting to catch up: a burst
    // would measure queueing in tandem, not per-delta latency.
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut times = Vec::with_capacity(DELTAS);
    for n in 0..DELTAS {
        interval.tick().await;
        let event = delta_event(n);
        stream.write_all(event.as_bytes()).await?;
        stream.flush().await?;
        times.push(Instant::now());
    }
    stream.write_all(FINISH_EVENTS.as_bytes()).await?;
    stream.flush().await?;
    Ok(times)
}

// ---------------------------------------------------------------------------------------------
// Delta latency

/// Arrival instant per delta number, filled from delta texts such as "17 ".
struct Arrivals(Vec<Option<Instant>>);

impl Arrivals {
    fn new() -> Arrivals {
        Arrivals(vec![None; DELTAS])
    }

    /// A text may carry several numbers if deltas were ever merged; each gets this instant.
    fn record(&mut self, text: &str, at: Instant) -> Result<()> {
        for token in text.split_whitespace() {
            let n: usize = token
                .parse()
                .map_err(|_| format!("delta text {text:?} is not a delta number"))?;
            let slot = self
                .0
                .get_mut(n)
                .ok_or_else(|| format!("delta number {n} is out of range"))?;
            slot.get_or_insert(at);
        }
        Ok(())
    }

    fn latencies(&self, sends: &[Instant]) -> Result<Vec<Duration>> {
        if sends.len() != DELTAS {
            return Err(format!("the mock sent {} of {DELTAS} deltas", sends.len()).into());
        }
        let missing = self.0.iter().filter(|a| a.is_none()).count();
        if missing > 0 {
            return Err(format!("{missing} of {DELTAS} deltas never arrived").into());
        }
        // Saturating: the reader may stamp an arrival a hair before the writer stamps its send.
        Ok(self
            .0
            .iter()
            .zip(sends)
            .map(|(arrival, sent)| {
                arrival
                    .expect("checked above")
                    .saturating_duration_since(*sent)
            })
            .collect())
    }
}

/// The floor: what any Rust client must do per delta (HTTP body → SSE event → parsed chunk →
/// serialized notification line), in one process, with no tandem in between.
async fn floor_latencies() -> Result<Vec<Duration>> {
    let mut mock = MockLlm::start().await?;
    let client = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let response = client
        .post(format!("{}/chat/completions", mock.base_url))
        .json(&json!({"model": "mock-model", "stream": true, "messages": [{"role": "user", "content": "go"}]}))
        .send()
        .await?
        .error_for_status()?;
    let mut events = response.bytes_stream().eventsource();
    let mut out: Vec<u8> = Vec::with_capacity(DELTAS * 160);
    let mut arrivals = Arrivals::new();
    let mut seq = 0u64;
    while let Some(event) = events.next().await {
        let event = event?;
        if event.data == "[DONE]" {
            break;
        }
        let chunk: Value = serde_json::from_str(&event.data)?;
        let Some(text) = chunk
            .pointer("/choices/0/delta/content")
            .and_then(Value::as_str)
        else {
            continue;
        };
        seq += 1;
        let line = json!({
            "jsonrpc": "2.0",
            "method": "session/event",
            "params": {"sessionId": "bench", "seq": seq, "turnId": "t", "type": "assistantDelta", "text": text},
        });
        serde_json::to_writer(&mut out, &line)?;
        out.push(b'\n');
        arrivals.record(text, Instant::now())?;
    }
    let sends = mock.next_send_times().await?;
    arrivals.latencies(&sends)
}

struct TurnRun {
    latencies: Vec<Duration>,
    rss_after_kib: u64,
}

/// tandem, configured for the mock, driven over stdio like an editor would.
async fn tandem_latencies(bin: &Path) -> Result<TurnRun> {
    let mut mock = MockLlm::start().await?;
    let dir = tempfile::tempdir()?;
    let workspace = tempfile::tempdir()?;
    let mut server = RpcServer::spawn(bin, &dir, &mock.base_url)?;
    let result = drive_turn(&mut server, workspace.path(), &mut mock).await;
    let closed = server.close().await;
    match result {
        Ok(run) => closed.map(|_| run),
        Err(error) => Err(format!("{error}{}", server.stderr_tail()).into()),
    }
}

async fn drive_turn(server: &mut RpcServer, cwd: &Path, mock: &mut MockLlm) -> Result<TurnRun> {
    let mut arrivals = Arrivals::new();
    server
        .request("initialize", json!({"protocolVersion": 1}), &mut arrivals)
        .await?;
    let session = server
        .request("session/new", json!({"cwd": cwd}), &mut arrivals)
        .await?;
    let session_id = session["sessionId"]
        .as_str()
        .ok_or("session/new returned no sessionId")?
        .to_owned();
    server
        .request(
            "prompt",
            json!({"sessionId": session_id, "content": "go"}),
            &mut arrivals,
        )
        .await?;
    server.wait_turn_end(&mut arrivals).await?;
    let rss_after_kib = rss_kib(server.child.id())?;
    let sends = mock.next_send_times().await?;
    Ok(TurnRun {
        latencies: arrivals.latencies(&sends)?,
        rss_after_kib,
    })
}

/// A `tandem serve` child whose stdout is read by a dedicated thread, so each line is stamped
/// the moment it is read, independent of how busy the async runtime (and the mock) is.
struct RpcServer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<(Instant, String)>,
    stderr_path: PathBuf,
    next_id: u64,
}

impl RpcServer {
    fn spawn(bin: &Path, dir: &TempDir, base_url: &str) -> Result<RpcServer> {
        let config_path = dir.path().join("tandem.toml");
        std::fs::write(&config_path, mock_config(base_url))?;
        let data_dir = dir.path().join("data");
        std::fs::create_dir(&data_dir)?;
        let stderr_path = dir.path().join("stderr.log");
        let mut child = Command::new(bin)
            .arg("serve")
            .arg("--config")
            .arg(&config_path)
            .arg("--data-dir")
            .arg(&data_dir)
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(File::create(&stderr_path)?))
            .spawn()?;
        let stdin = child.stdin.take().expect("stdin was piped");
        let stdout = child.stdout.take().expect("stdout was piped");
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("tandem-stdout".to_owned())
            .spawn(move || pump_lines(stdout, tx))?;
        Ok(RpcServer {
            child,
            stdin: Some(stdin),
            lines,
            stderr_path,
            next_id: 1,
        })
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        // Small blocking writes into a pipe the server drains; not worth an async detour.
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        stdin.write_all(&line)?;
        stdin.flush()?;
        Ok(())
    }

    /// The next stdout message, with the instant its line was read.
    async fn next_message(&mut self) -> Result<(Instant, Value)> {
        let (at, line) = tokio::time::timeout(TURN_TIMEOUT, self.lines.recv())
            .await
            .map_err(|_| "tandem went silent")?
            .ok_or("tandem closed stdout")?;
        let message = serde_json::from_str(&line)
            .map_err(|e| format!("tandem wrote a non-JSON line ({e}): {line:?}"))?;
        Ok((at, message))
    }

    /// Send a request and wait for its response; events that arrive meanwhile are recorded.
    async fn request(
        &mut self,
        method: &str,
        params: Value,
        arrivals: &mut Arrivals,
    ) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let (at, message) = self.next_message().await?;
            if message["id"] == id {
                if let Some(error) = message.get("error") {
                    return Err(format!("{method} failed: {error}").into());
                }
                return Ok(message["result"].clone());
            }
            if let Some(end) = observe_event(&message, at, arrivals)? {
                return Err(format!("the turn ended ({end}) before the {method} response").into());
            }
        }
    }

    async fn wait_turn_end(&mut self, arrivals: &mut Arrivals) -> Result<()> {
        loop {
            let (at, message) = self.next_message().await?;
            if let Some(end) = observe_event(&message, at, arrivals)? {
                if end["reason"] == "completed" {
                    return Ok(());
                }
                return Err(format!("the turn did not complete: {end}").into());
            }
        }
    }

    async fn close(&mut self) -> Result<()> {
        let id = self.next_id;
        if self
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": "shutdown"}))
            .is_ok()
        {
            // Best effort: a failed turn may have left the server unable to answer.
            let _ = tokio::time::timeout(EXIT_TIMEOUT, async {
                while let Ok((_, message)) = self.next_message().await {
                    if message["id"] == id {
                        break;
                    }
                }
            })
            .await;
        }
        drop(self.stdin.take());
        wait_or_kill(&mut self.child, EXIT_TIMEOUT)
    }

    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        if tail.is_empty() {
            String::new()
        } else {
            format!("\ntandem stderr (last lines):\n{tail}")
        }
    }
}

fn mock_config(base_url: &str) -> String {
    format!(
        "default_model = \"mock\"\n\n[providers.local]\nkind = \"openai\"\nbase_url = \"{base_url}\"\n\n[models.mock]\nprovider = \"local\"\nname = \"mock-model\"\n"
    )
}

fn pump_lines(stdout: ChildStdout, tx: mpsc::UnboundedSender<(Instant, String)>) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let at = Instant::now();
                if tx.send((at, line)).is_err() {
                    break;
                }
            }
        }
    }
}

/// Records an `assistantDelta`; returns the event params when it is `turnEnded`.
fn observe_event(message: &Value, at: Instant, arrivals: &mut Arrivals) -> Result<Option<Value>> {
    if message["method"] != "session/event" {
        return Ok(None);
    }
    let params = &message["params"];
    match params["type"].as_str() {
        Some("assistantDelta") => {
            let text = params["text"]
                .as_str()
                .ok_or("assistantDelta without text")?;
            arrivals.record(text, at)?;
            Ok(None)
        }
        Some("turnEnded") => Ok(Some(params.clone())),
        _ => Ok(None),
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics and the report

struct Summary {
    median: Duration,
    p90: Duration,
    p99: Duration,
}

fn summarize(mut samples: Vec<Duration>) -> Summary {
    samples.sort_unstable();
    Summary {
        median: percentile(&samples, 50.0),
        p90: percentile(&samples, 90.0),
        p99: percentile(&samples, 99.0),
    }
}

/// Nearest-rank percentile of sorted, non-empty samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn median_u64(mut samples: Vec<u64>) -> u64 {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

struct Row {
    measure: &'static str,
    tandem: String,
    anchor: String,
    ratio: String,
    target: String,
    verdict: &'static str,
}

impl Row {
    fn duration(
        measure: &'static str,
        tandem: Duration,
        anchor: Duration,
        anchor_name: &str,
        target: Option<(Duration, &str)>,
    ) -> Row {
        Row {
            measure,
            tandem: format_duration(tandem),
            anchor: format!("{} ({anchor_name})", format_duration(anchor)),
            ratio: ratio(tandem.as_secs_f64(), anchor.as_secs_f64()),
            target: target.map_or("—", |(_, label)| label).to_owned(),
            verdict: match target {
                Some((t, _)) if tandem < t => "met",
                Some(_) => "**missed**",
                None => "—",
            },
        }
    }

    fn memory(
        measure: &'static str,
        tandem_kib: u64,
        anchor_kib: u64,
        (target_kib, target_label): (u64, &str),
    ) -> Row {
        Row {
            measure,
            tandem: format_kib(tandem_kib),
            anchor: format!("{} (`/bin/cat`)", format_kib(anchor_kib)),
            ratio: ratio(tandem_kib as f64, anchor_kib as f64),
            target: target_label.to_owned(),
            verdict: if tandem_kib < target_kib {
                "met"
            } else {
                "**missed**"
            },
        }
    }
}

fn format_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1.0 {
        format!("{ms:.3} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

fn format_kib(kib: u64) -> String {
    format!("{:.1} MB", kib as f64 / 1024.0)
}

fn ratio(value: f64, anchor: f64) -> String {
    if anchor > 0.0 {
        format!("{:.1}×", value / anchor)
    } else {
        "—".to_owned()
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

fn print_report(bin: &Path, rows: &[Row], rss_after_turn_kib: u64) {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    println!();
    println!("### tandem core benchmark");
    println!();
    println!("| Measure | tandem | Anchor (same run) | Ratio | Target | Status |");
    println!("|---|---:|---:|---:|---:|---|");
    for row in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            row.measure, row.tandem, row.anchor, row.ratio, row.target, row.verdict
        );
    }
    println!();
    println!(
        "Cold start: {COLD_START_RUNS} runs after {COLD_START_WARMUPS} warm-ups, fresh `--data-dir`, built-in offline model. \
         Idle RSS: median of {RSS_RUNS} VmRSS samples. \
         Delta latency: {DELTAS} chunks from a loopback mock paced {} ms apart; time from the mock's write to tandem's \
         `session/event` line being read from its stdout. tandem RSS after that turn: {}.",
        DELTA_PACE.as_millis(),
        format_kib(rss_after_turn_kib)
    );
    println!();
    println!(
        "Machine: {nproc} CPUs, {}, Linux {}. Binary: `{}`.",
        cpu_model(),
        kernel.trim(),
        bin.display()
    );
    println!();
    println!("Reproduce: `cargo run --release --example bench_core`");
}
