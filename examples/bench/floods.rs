//! Floods: the peak RSS of the release `tandem serve` (and its descendants) under five hostile
//! floods with the default caps, each beside the idle RSS of the same process after
//! `session/new`, against a bound of 200 MB.
//!
//! Every flood runs in a fresh `tandem serve` (its own data dir and workspace in temp dirs, a
//! `fullAuto` session, the OpenAI-compatible provider on the loopback mock):
//! - shell: the model runs a command printing 200 MB while the client stops reading stdout
//!   until the command is through, then reads again and drains to the turn's end;
//! - answer: the model streams 300 MB of text deltas (`max_answer_bytes` should cut it);
//! - arguments: one tool call whose arguments are streamed as 100 MB
//!   (`max_tool_arguments_bytes` should cut it);
//! - read_file: `limit: 1` on a 1.5 GB file of one line (no newline anywhere);
//! - steers: 3,000 `steer` requests pipelined while a turn runs (`max_queued_steering` should
//!   refuse most of them with `steeringQueueFull`).
//!
//! The figure is the largest VmRSS sum over the server and its descendants, sampled every 2 ms
//! from the prompt to `turnEnded`, raised to the server's own `VmHWM`; both are shown. A flood
//! that goes past the bound is **missed** in the table, not an error.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;
use crate::mock::{Flood, MockLlm, Reply, Wire};
use crate::rpc::{spawn_tandem, tandem_close, tandem_initialize, RpcChild};

const TARGET_KIB: u64 = 200 * 1024;
const TARGET_LABEL: &str = "< 200 MB";
/// As the idle figures of `core` and `codex`: long enough for start-up allocations to settle.
const IDLE_SETTLE: Duration = Duration::from_secs(1);

const SHELL_FLOOD_BYTES: usize = 200_000_000;
const ANSWER_FLOOD_BYTES: usize = 300_000_000;
const ARGUMENTS_FLOOD_BYTES: usize = 100_000_000;
/// Bytes of text (or argument characters) in each streamed event of a model flood.
const FLOOD_PIECE: usize = 16_000;
const BIG_FILE_BYTES: u64 = 1_500_000_000;
/// Left free on the temp filesystem when the big file would not fit whole.
const DISK_MARGIN: u64 = 1_000_000_000;
const STEERS: usize = 3_000;
/// Large enough that the texts cost something to parse and refuse (12 MB in all), small enough
/// that the count cap (64 texts, 256 kB), not the byte cap (1 MiB), is the one that binds.
const STEER_TEXT_BYTES: usize = 4_000;
/// Generous: 200 MB through `tr` takes a few seconds even when tandem drops what it cannot send.
const SHELL_FLOOD_TIMEOUT: Duration = Duration::from_secs(120);

/// The command of the shell flood: `flood-done` tells the benchmark, which is not reading
/// tandem's stdout meanwhile, that the output is all written.
const SHELL_COMMAND: &str =
    r"echo start; head -c 200000000 /dev/zero | tr '\0' a; echo; touch flood-done";
/// Holds the steered turn in a running tool call until the benchmark has every steer answered.
const HOLD_COMMAND: &str = "while [ ! -e steer-release ]; do sleep 0.02; done; echo released";
const BIG_FILE: &str = "one-line.txt";
const ARGUMENTS_PATH: &str = "big.txt";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Shell,
    Answer,
    Arguments,
    ReadFile,
    Steers,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Shell,
        Kind::Answer,
        Kind::Arguments,
        Kind::ReadFile,
        Kind::Steers,
    ];

    /// The prompt, which also tells the shared mock which flood a request belongs to.
    fn prompt(self) -> &'static str {
        match self {
            Kind::Shell => "flood:shell",
            Kind::Answer => "flood:answer",
            Kind::Arguments => "flood:arguments",
            Kind::ReadFile => "flood:read_file",
            Kind::Steers => "flood:steers",
        }
    }

    fn measure(self, file_bytes: u64) -> String {
        match self {
            Kind::Shell => format!(
                "Peak RSS: shell flood {} MB, client not reading stdout",
                SHELL_FLOOD_BYTES / 1_000_000
            ),
            Kind::Answer => format!(
                "Peak RSS: streamed answer of {} MB",
                ANSWER_FLOOD_BYTES / 1_000_000
            ),
            Kind::Arguments => format!(
                "Peak RSS: one tool call with {} MB of arguments",
                ARGUMENTS_FLOOD_BYTES / 1_000_000
            ),
            Kind::ReadFile => format!(
                "Peak RSS: read_file limit 1 on a {} line with no newline",
                format_size(file_bytes)
            ),
            Kind::Steers => format!("Peak RSS: {} steers during one turn", thousands(STEERS)),
        }
    }
}

/// One flood in its own server.
struct Run {
    kind: Kind,
    idle_kib: u64,
    tree_peak_kib: u64,
    hwm_kib: u64,
    elapsed: Duration,
    /// What tandem answered, for the note.
    outcome: String,
}

impl Run {
    /// The bound applies to the larger reading: a peak between two samples still counts.
    fn peak_kib(&self) -> u64 {
        self.tree_peak_kib.max(self.hwm_kib)
    }
}

pub struct FloodsFigures {
    runs: Vec<Run>,
    file_bytes: u64,
    /// Why the big file is smaller than asked, when it is.
    file_note: Option<String>,
}

impl FloodsFigures {
    pub fn rows(&self) -> Vec<Row> {
        self.runs
            .iter()
            .map(|run| {
                let peak = run.peak_kib();
                Row {
                    measure: run.kind.measure(self.file_bytes),
                    tandem: format!(
                        "{} (tree; server VmHWM {})",
                        format_kib(peak),
                        format_kib(run.hwm_kib)
                    ),
                    anchor: format!(
                        "{} (idle after session/new, same binary)",
                        format_kib(run.idle_kib)
                    ),
                    ratio: ratio(peak as f64, run.idle_kib as f64),
                    target: TARGET_LABEL.to_owned(),
                    verdict: if peak < TARGET_KIB {
                        "met"
                    } else {
                        "**missed**"
                    },
                }
            })
            .collect()
    }

    pub fn note(&self) -> String {
        let mut note = format!(
            "Floods: each in a fresh `tandem serve` (own data dir and workspace in temp dirs, default caps, a `fullAuto` \
             session, the OpenAI-compatible provider on the loopback mock). Anchor: VmRSS summed over the server and its \
             descendants {} s after `session/new`. Figure: the same sum sampled every 2 ms from `prompt` to `turnEnded`, \
             raised to the server's own VmHWM (shown apart). Model floods are streamed in events of {} of payload. \
             What tandem answered:",
            IDLE_SETTLE.as_secs(),
            format_size(FLOOD_PIECE as u64),
        );
        for run in &self.runs {
            note.push_str(&format!(
                "\n- {} ({:.1} s): {}",
                run.kind.prompt(),
                run.elapsed.as_secs_f64(),
                run.outcome
            ));
        }
        if let Some(why) = &self.file_note {
            note.push_str(&format!("\n- {why}"));
        }
        note
    }
}

pub fn measure(bin: &Path, runtime: &tokio::runtime::Runtime) -> Result<FloodsFigures> {
    progress("floods: shell 200 MB, answer 300 MB, arguments 100 MB, read_file 1.5 GB, 3,000 steers; each in a fresh server");
    runtime.block_on(async {
        let mock = MockLlm::start(Wire::ChatCompletions, Arc::new(brain)).await?;
        let mut runs = Vec::with_capacity(Kind::ALL.len());
        let mut file_bytes = BIG_FILE_BYTES;
        let mut file_note = None;
        for kind in Kind::ALL {
            progress(&format!("floods: {}", kind.prompt()));
            let workspace = tempfile::tempdir()?;
            if kind == Kind::ReadFile {
                let (bytes, note) = big_file_size(workspace.path())?;
                file_bytes = bytes;
                file_note = note;
                let written = Instant::now();
                write_big_file(&workspace.path().join(BIG_FILE), bytes)?;
                progress(&format!(
                    "floods: wrote {} in {:.1} s",
                    format_size(bytes),
                    written.elapsed().as_secs_f64()
                ));
            }
            let result = run_flood(bin, &mock, kind, workspace.path()).await;
            if kind == Kind::ReadFile {
                // Gone before the next flood, not only when the temp dir is dropped: 1.5 GB.
                std::fs::remove_file(workspace.path().join(BIG_FILE))?;
            }
            runs.push(result?);
        }
        Ok(FloodsFigures {
            runs,
            file_bytes,
            file_note,
        })
    })
}

/// The scripted model: the first user message names the flood, and any tool result in the
/// request means the flooding step is over (counted over the whole request, because a steering
/// message after the tool result is a user message too).
fn brain(request: &Value) -> Reply {
    let messages = request["messages"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let prompt = messages
        .iter()
        .find(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    let Some(kind) = Kind::ALL
        .into_iter()
        .find(|kind| prompt.contains(kind.prompt()))
    else {
        return Reply::Text("unknown flood".to_owned());
    };
    if messages.iter().any(|m| m["role"] == "tool") {
        return Reply::Text(format!("{} done", kind.prompt()));
    }
    let call = |id: &str, name: &str, arguments: Value| {
        Reply::ToolCalls(vec![(
            id.to_owned(),
            name.to_owned(),
            arguments.to_string(),
        )])
    };
    match kind {
        Kind::Shell => call("call_flood", "shell", json!({"command": SHELL_COMMAND})),
        Kind::Answer => Reply::Flood(Flood::Text {
            bytes: ANSWER_FLOOD_BYTES,
            piece: FLOOD_PIECE,
        }),
        Kind::Arguments => Reply::Flood(Flood::ToolArguments {
            id: "call_arguments".to_owned(),
            name: "write_file".to_owned(),
            path: ARGUMENTS_PATH.to_owned(),
            bytes: ARGUMENTS_FLOOD_BYTES,
            piece: FLOOD_PIECE,
        }),
        Kind::ReadFile => call(
            "call_read",
            "read_file",
            json!({"path": BIG_FILE, "limit": 1}),
        ),
        Kind::Steers => call("call_hold", "shell", json!({"command": HOLD_COMMAND})),
    }
}

/// Starts a server, opens the session, takes the idle anchor, and runs one flood under the
/// sampler.
async fn run_flood(bin: &Path, mock: &MockLlm, kind: Kind, workspace: &Path) -> Result<Run> {
    let dir = tempfile::tempdir()?;
    let mut server = spawn_tandem(bin, dir.path(), &mock.base_url, workspace)?;
    let result = async {
        tandem_initialize(&mut server).await?;
        let session = server
            .request("session/new", json!({"cwd": workspace, "mode": "fullAuto"}))
            .await?;
        let session = session["sessionId"]
            .as_str()
            .ok_or("session/new returned no sessionId")?
            .to_owned();
        tokio::time::sleep(IDLE_SETTLE).await;
        let idle_kib = tree_rss_kib(server.pid())?;
        let sampler = PeakSampler::start(server.pid());
        let start = Instant::now();
        let outcome = match kind {
            Kind::Shell => shell_flood(&mut server, &session, workspace).await,
            Kind::Answer => answer_flood(&mut server, &session, mock).await,
            Kind::Arguments => arguments_flood(&mut server, &session, mock, workspace).await,
            Kind::ReadFile => read_file_flood(&mut server, &session).await,
            Kind::Steers => steers_flood(&mut server, &session, workspace).await,
        };
        let elapsed = start.elapsed();
        // The sampler is stopped whatever the outcome, so its thread does not outlive the run.
        let (tree_peak_kib, hwm_kib) = sampler.finish_parts()?;
        Ok::<_, BoxError>(Run {
            kind,
            idle_kib,
            tree_peak_kib,
            hwm_kib,
            elapsed,
            outcome: outcome?,
        })
    }
    .await;
    match result {
        Ok(run) => {
            tandem_close(&mut server).await?;
            Ok(run)
        }
        Err(error) => {
            Err(format!("floods: {}: {error}{}", kind.prompt(), server.stderr_tail()).into())
        }
    }
}

/// What a flood showed on the wire.
#[derive(Default)]
struct Log {
    delta_bytes: usize,
    message_bytes: usize,
    /// `(status, result)` of every final `toolCallUpdate`.
    results: Vec<(String, String)>,
    running: bool,
    output_seen: bool,
    truncated: usize,
    dropped: u64,
    dropped_bytes: u64,
    steering_applied: usize,
    steering_bytes: usize,
    approvals: usize,
    ended: Option<Value>,
}

impl Log {
    fn reason(&self) -> String {
        self.ended
            .as_ref()
            .map(|end| {
                let reason = end["reason"].as_str().unwrap_or("?");
                match end["error"]["message"].as_str() {
                    Some(message) => format!("`{reason}`: \"{}\"", clip(message, 200)),
                    None => format!("`{reason}`"),
                }
            })
            .unwrap_or_else(|| "no turnEnded".to_owned())
    }
}

/// Records one message; approves any approval once (none is expected in `fullAuto`, but a
/// machine without a sandbox asks for every command).
fn observe(server: &mut RpcChild, log: &mut Log, message: &Value) -> Result<()> {
    if let Some(error) = message.get("error") {
        return Err(format!("tandem answered an error during the flood: {error}").into());
    }
    if message["method"] != "session/event" {
        return Ok(());
    }
    let params = &message["params"];
    let text_len = |field: &str| params[field].as_str().map_or(0, str::len);
    match params["type"].as_str() {
        Some("assistantDelta") => log.delta_bytes += text_len("text"),
        Some("assistantMessage") => log.message_bytes += text_len("text"),
        Some("toolCallUpdate") => {
            let status = params["status"].as_str().unwrap_or_default();
            if status == "running" {
                log.running = true;
                log.output_seen |= params["output"].is_string();
            } else {
                log.results.push((
                    status.to_owned(),
                    params["result"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
        Some("streamTruncated") => {
            log.truncated += 1;
            log.dropped += params["dropped"].as_u64().unwrap_or(0);
            log.dropped_bytes += params["droppedBytes"].as_u64().unwrap_or(0);
        }
        Some("steeringApplied") => {
            log.steering_applied += 1;
            log.steering_bytes += text_len("text");
        }
        Some("approvalRequested") => {
            log.approvals += 1;
            server.send_request(
                "approve",
                json!({"sessionId": params["sessionId"], "requestId": params["requestId"], "decision": "once"}),
            )?;
        }
        Some("turnEnded") => log.ended = Some(params.clone()),
        _ => {}
    }
    Ok(())
}

async fn prompt(server: &mut RpcChild, log: &mut Log, session: &str, kind: Kind) -> Result<()> {
    server
        .request_with(
            "prompt",
            json!({"sessionId": session, "content": kind.prompt()}),
            &mut |server, _, message| observe(server, log, message),
        )
        .await?;
    Ok(())
}

/// Reads until `done` holds for the log; fails if the turn ends first (unless `done` is the end).
async fn read_until(
    server: &mut RpcChild,
    log: &mut Log,
    done: impl Fn(&Log) -> bool,
) -> Result<()> {
    while !done(log) {
        if log.ended.is_some() {
            return Err(format!("the turn ended early: {}", log.reason()).into());
        }
        let (_, message) = server.next_message().await?;
        observe(server, log, &message)?;
    }
    Ok(())
}

async fn read_to_end(server: &mut RpcChild, log: &mut Log) -> Result<()> {
    read_until(server, log, |log| log.ended.is_some()).await
}

async fn shell_flood(server: &mut RpcChild, session: &str, workspace: &Path) -> Result<String> {
    let mut log = Log::default();
    prompt(server, &mut log, session, Kind::Shell).await?;
    // The command is streaming once its first output arrives; from here on the client is stalled.
    read_until(server, &mut log, |log| log.output_seen).await?;
    server.pause_reading();
    let paused = Instant::now();
    let done = workspace.join("flood-done");
    while !done.exists() {
        if paused.elapsed() > SHELL_FLOOD_TIMEOUT {
            server.resume_reading();
            return Err(format!(
                "the flooding command did not finish within {SHELL_FLOOD_TIMEOUT:?} of the client stalling"
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stalled = paused.elapsed();
    server.resume_reading();
    read_to_end(server, &mut log).await?;
    let result = log.results.first().cloned().unwrap_or_default();
    Ok(format!(
        "the client stopped reading at the first output and resumed when the command was through ({:.1} s later); \
         {} `streamTruncated` standing for {} dropped pieces ({}); the call ended `{}` with a result of {}{}; turn {}",
        stalled.as_secs_f64(),
        log.truncated,
        thousands(log.dropped as usize),
        format_size(log.dropped_bytes),
        result.0,
        format_size(result.1.len() as u64),
        if result.1.contains("bytes of output cut") {
            " (head and tail, the middle cut with a note)"
        } else {
            ""
        },
        log.reason(),
    ))
}

async fn answer_flood(server: &mut RpcChild, session: &str, mock: &MockLlm) -> Result<String> {
    let mut log = Log::default();
    let (requests, flooded) = (mock.requests(), mock.flooded_bytes());
    prompt(server, &mut log, session, Kind::Answer).await?;
    read_to_end(server, &mut log).await?;
    Ok(format!(
        "the mock wrote {} of the {} answer into the socket before tandem hung up ({} model request); \
         {} reached the client as `assistantDelta`, `assistantMessage` kept {}; turn {}",
        format_size((mock.flooded_bytes() - flooded) as u64),
        format_size(ANSWER_FLOOD_BYTES as u64),
        mock.requests() - requests,
        format_size(log.delta_bytes as u64),
        format_size(log.message_bytes as u64),
        log.reason(),
    ))
}

async fn arguments_flood(
    server: &mut RpcChild,
    session: &str,
    mock: &MockLlm,
    workspace: &Path,
) -> Result<String> {
    let mut log = Log::default();
    let (requests, flooded) = (mock.requests(), mock.flooded_bytes());
    prompt(server, &mut log, session, Kind::Arguments).await?;
    read_to_end(server, &mut log).await?;
    let result = log.results.first().cloned().unwrap_or_default();
    Ok(format!(
        "the mock wrote {} of the {} arguments (a `write_file` of `{ARGUMENTS_PATH}`) before tandem hung up; \
         the call ended `{}`: \"{}\"; `{ARGUMENTS_PATH}` {}; {} model requests; turn {}",
        format_size((mock.flooded_bytes() - flooded) as u64),
        format_size(ARGUMENTS_FLOOD_BYTES as u64),
        result.0,
        clip(&result.1, 200),
        if workspace.join(ARGUMENTS_PATH).exists() {
            "was written"
        } else {
            "was not written"
        },
        mock.requests() - requests,
        log.reason(),
    ))
}

async fn read_file_flood(server: &mut RpcChild, session: &str) -> Result<String> {
    let mut log = Log::default();
    prompt(server, &mut log, session, Kind::ReadFile).await?;
    read_to_end(server, &mut log).await?;
    let result = log.results.first().cloned().unwrap_or_default();
    Ok(format!(
        "the call ended `{}` with a result of {}{}; the file was deleted afterwards; turn {}",
        result.0,
        format_size(result.1.len() as u64),
        if result.1.contains("[line truncated]") {
            " (the line cut with a note)"
        } else {
            ""
        },
        log.reason(),
    ))
}

async fn steers_flood(server: &mut RpcChild, session: &str, workspace: &Path) -> Result<String> {
    let mut log = Log::default();
    prompt(server, &mut log, session, Kind::Steers).await?;
    // The turn is parked in the holding command: every steer meets a running turn.
    read_until(server, &mut log, |log| log.running).await?;
    let start = Instant::now();
    let mut pending = HashSet::with_capacity(STEERS);
    for i in 0..STEERS {
        let mut text = format!("steer {i}: ");
        text.push_str(&"s".repeat(STEER_TEXT_BYTES.saturating_sub(text.len())));
        pending.insert(server.send_request("steer", json!({"sessionId": session, "text": text}))?);
    }
    let sent = start.elapsed();
    let mut answers: BTreeMap<String, usize> = BTreeMap::new();
    while !pending.is_empty() {
        let (_, message) = server.next_message().await?;
        let is_steer_answer = message.get("method").is_none()
            && message["id"].as_u64().is_some_and(|id| pending.remove(&id));
        if !is_steer_answer {
            observe(server, &mut log, &message)?;
            continue;
        }
        let answer = match message.get("error") {
            Some(error) => error["data"]["kind"]
                .as_str()
                .unwrap_or("an error without kind")
                .to_owned(),
            None if message["result"]["queued"] == true => "queued".to_owned(),
            None => format!("result {}", message["result"]),
        };
        *answers.entry(answer).or_default() += 1;
    }
    let answered = start.elapsed();
    std::fs::write(workspace.join("steer-release"), "")?;
    read_to_end(server, &mut log).await?;
    let answers: Vec<String> = answers
        .iter()
        .map(|(answer, count)| format!("{} `{answer}`", thousands(*count)))
        .collect();
    Ok(format!(
        "{} steers of {} each written in {:.0} ms, all answered {:.0} ms after the first: {}; \
         {} `steeringApplied` carrying {}; turn {}",
        thousands(STEERS),
        format_size(STEER_TEXT_BYTES as u64),
        sent.as_secs_f64() * 1000.0,
        answered.as_secs_f64() * 1000.0,
        answers.join(", "),
        log.steering_applied,
        format_size(log.steering_bytes as u64),
        log.reason(),
    ))
}

/// The big file's size: as asked when the temp filesystem has room for it and a margin, else
/// the largest that leaves the margin (with the reason for the note).
fn big_file_size(dir: &Path) -> Result<(u64, Option<String>)> {
    let stat = rustix::fs::statvfs(dir)?;
    let available = stat.f_bavail.saturating_mul(stat.f_frsize);
    if available >= BIG_FILE_BYTES + DISK_MARGIN {
        return Ok((BIG_FILE_BYTES, None));
    }
    let bytes = available.saturating_sub(DISK_MARGIN);
    if bytes < 1_000_000 {
        return Err(format!(
            "the temp filesystem has {} free, too little for the read_file flood",
            format_size(available)
        )
        .into());
    }
    Ok((
        bytes,
        Some(format!(
            "the read_file flood used {} instead of {}: the temp filesystem had {} free",
            format_size(bytes),
            format_size(BIG_FILE_BYTES),
            format_size(available)
        )),
    ))
}

/// `bytes` of `a` and no newline (no NUL either, which would make it a binary file to
/// `read_file`), written for real rather than sparse for the same reason.
fn write_big_file(path: &Path, bytes: u64) -> Result<()> {
    let block = vec![b'a'; 1 << 20];
    let mut file = std::fs::File::create(path)?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        file.write_all(&block[..n])?;
        left -= n as u64;
    }
    // Written back now, so flushing 1.5 GB of dirty pages does not compete with the measured read.
    file.sync_all()?;
    Ok(())
}

/// Decimal units, as the flood sizes are given (200 MB = 200,000,000 bytes).
fn format_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1_000_000_000 => format!("{:.2} GB", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b if b >= 1_000 => format!("{:.1} kB", b as f64 / 1e3),
        b => format!("{b} B"),
    }
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The first `max` bytes of `text` (at a character boundary), with an ellipsis when cut.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.replace('\n', " ");
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", text[..end].replace('\n', " "))
}
