//! tandem beside Codex app-server: cold start to the `initialize` response, memory of the process
//! tree 1 s after `initialize` and at its peak over one full turn, and the wall time of that turn.
//!
//! The turn is the same script for both, each against a loopback mock in its own vendor's wire
//! format: the model asks for one shell call (`echo hi`), the client approves it, the model sees
//! the output and answers with a final text. tandem's `openai` provider talks to a
//! chat-completions mock; Codex to a Responses API mock (`POST /v1/responses`). Codex runs with
//! `CODEX_HOME` in a scratch dir whose `config.toml` points every model request at the mock and
//! turns off what would reach the network (update checks, analytics, feedback, OpenTelemetry,
//! plugin and app syncs).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tempfile::TempDir;

use crate::anchors::tools_dir;
use crate::common::*;
use crate::mock::{
    chat_tool_results, first_tool_output, responses_tool_results, MockLlm, Reply, Wire,
};
use crate::rpc::{
    spawn_tandem, tandem_close, tandem_initialize, tandem_new_session, tandem_turn, RpcChild,
};

const COLD_START_WARMUPS: usize = 2;
const COLD_START_RUNS: usize = 20;
const RSS_RUNS: usize = 3;
const RSS_SETTLE: Duration = Duration::from_secs(1);
const TURN_WARMUPS: usize = 1;
const TURN_RUNS: usize = 7;

const PROMPT: &str = "Run `echo hi` in the shell and tell me what it printed.";
/// What the scripted model answers once it has seen the command's output.
const FINAL_TEXT: &str = "done: hi";

pub struct CodexFigures {
    pub cold_tandem: Summary,
    pub cold_codex: Summary,
    pub idle_tandem: u64,
    pub idle_codex: u64,
    pub turn_tandem: Duration,
    pub turn_codex: Duration,
    pub peak_tandem: u64,
    pub peak_codex: u64,
    pub version: String,
}

impl CodexFigures {
    pub fn rows(&self) -> Vec<Row> {
        vec![
            Row::within_ratio(
                "Cold start, median of 20 (spawn → `initialize` response)",
                self.cold_tandem.median,
                self.cold_codex.median,
                "Codex app-server",
                (0.2, "≤ 0.2×"),
            ),
            Row::memory_ratio(
                "Idle memory: RSS of the process tree 1 s after `initialize`",
                self.idle_tandem,
                self.idle_codex,
                "Codex app-server",
                (0.2, "≤ 0.2×"),
            ),
            Row::memory_ratio(
                "Peak memory over one full turn (prompt, approved `echo hi`, final text)",
                self.peak_tandem,
                self.peak_codex,
                "Codex app-server",
                (0.2, "≤ 0.2×"),
            ),
            Row::within_ratio(
                "Full scripted turn, median (prompt → turn end)",
                self.turn_tandem,
                self.turn_codex,
                "Codex app-server",
                (0.5, "≤ 0.5×"),
            ),
        ]
    }
}

pub fn measure(
    bin: &Path,
    codex: &Path,
    runtime: &tokio::runtime::Runtime,
) -> Result<CodexFigures> {
    let version = codex_version(codex)?;
    runtime.block_on(async {
        let tandem_mock = MockLlm::start(Wire::ChatCompletions, tandem_brain()).await?;
        let codex_mock = MockLlm::start(Wire::Responses, codex_brain()).await?;
        let subjects = Subjects::new(bin, codex, &tandem_mock.base_url, &codex_mock.base_url)?;

        progress(&format!(
            "codex: cold start, {COLD_START_WARMUPS} warm-up + {COLD_START_RUNS} runs each, alternating"
        ));
        let mut cold = [Vec::new(), Vec::new()];
        for run in 0..COLD_START_WARMUPS + COLD_START_RUNS {
            for (i, kind) in [Kind::Tandem, Kind::Codex].into_iter().enumerate() {
                let elapsed = subjects.cold_start(kind).await?;
                if run >= COLD_START_WARMUPS {
                    cold[i].push(elapsed);
                }
            }
        }
        let [cold_tandem, cold_codex] = cold.map(summarize);

        progress(&format!(
            "codex: idle memory, {RSS_RUNS} samples each, {} s after initialize",
            RSS_SETTLE.as_secs()
        ));
        drop_cached_pages(bin)?;
        drop_cached_pages(codex)?;
        let mut idle = [Vec::new(), Vec::new()];
        for _ in 0..RSS_RUNS {
            for (i, kind) in [Kind::Tandem, Kind::Codex].into_iter().enumerate() {
                idle[i].push(subjects.idle_rss(kind).await?);
            }
        }
        let [idle_tandem, idle_codex] = idle.map(median_u64);

        progress(&format!(
            "codex: full turn, {TURN_WARMUPS} warm-up + {TURN_RUNS} runs each, alternating"
        ));
        let mut turns = [Vec::new(), Vec::new()];
        let mut peaks = [Vec::new(), Vec::new()];
        for run in 0..TURN_WARMUPS + TURN_RUNS {
            for (i, kind) in [Kind::Tandem, Kind::Codex].into_iter().enumerate() {
                let (elapsed, peak) = subjects.turn(kind).await?;
                if run >= TURN_WARMUPS {
                    turns[i].push(elapsed);
                    peaks[i].push(peak);
                }
            }
        }
        let [turn_tandem, turn_codex] = turns.map(|t| summarize(t).median);
        let [peak_tandem, peak_codex] = peaks.map(median_u64);
        Ok(CodexFigures {
            cold_tandem,
            cold_codex,
            idle_tandem,
            idle_codex,
            turn_tandem,
            turn_codex,
            peak_tandem,
            peak_codex,
            version,
        })
    })
}

pub fn codex_version(codex: &Path) -> Result<String> {
    let output = Command::new(codex).arg("--version").output()?;
    if !output.status.success() {
        return Err(format!("`{} --version` failed", codex.display()).into());
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// tandem's model: a `shell` call, then the final text once the result is in the history.
fn tandem_brain() -> crate::mock::Brain {
    Arc::new(|request: &Value| {
        if chat_tool_results(request) == 0 {
            Reply::ToolCalls(vec![(
                "call_echo".to_owned(),
                "shell".to_owned(),
                json!({"command": "echo hi"}).to_string(),
            )])
        } else {
            Reply::Text(final_text(request))
        }
    })
}

/// Codex's model: the same step as an `exec_command` call. It asks for escalation, which is how
/// a Codex model asks the user to approve a command under `approval_policy = "on-request"`, and
/// a plain (non-login) shell, as tandem's `bash -c` is one.
fn codex_brain() -> crate::mock::Brain {
    Arc::new(|request: &Value| {
        if responses_tool_results(request) == 0 {
            Reply::ToolCalls(vec![(
                "call_echo".to_owned(),
                "exec_command".to_owned(),
                json!({
                    "cmd": "echo hi",
                    "sandbox_permissions": "require_escalated",
                    "justification": "The user asked to run echo hi.",
                    "login": false,
                })
                .to_string(),
            )])
        } else {
            Reply::Text(final_text(request))
        }
    })
}

/// The final text proves the command ran: it quotes "hi" only if the tool result held it.
fn final_text(request: &Value) -> String {
    match first_tool_output(request) {
        Some(output) if output.contains("hi") => FINAL_TEXT.to_owned(),
        other => format!("the command output was {other:?}"),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tandem,
    Codex,
}

/// Both servers with their homes. Each keeps one data dir / `CODEX_HOME` across runs (created
/// by the warm-ups), as an editor finds it on every start after the first.
struct Subjects<'a> {
    bin: &'a Path,
    codex: &'a Path,
    tandem_dir: TempDir,
    codex_home: TempDir,
    workspace: TempDir,
    tandem_url: String,
}

impl<'a> Subjects<'a> {
    fn new(bin: &'a Path, codex: &'a Path, tandem_url: &str, codex_url: &str) -> Result<Self> {
        // Codex refuses to set up its helper links under the system temp dir, so its home
        // lives with the other bench tools.
        let scratch = tools_dir().join("tmp");
        std::fs::create_dir_all(&scratch)?;
        let codex_home = tempfile::Builder::new()
            .prefix("codex-home-")
            .tempdir_in(&scratch)?;
        std::fs::write(
            codex_home.path().join("config.toml"),
            codex_config(codex_url),
        )?;
        let workspace = tempfile::tempdir()?;
        std::fs::write(workspace.path().join("README.md"), "benchmark workspace\n")?;
        Ok(Subjects {
            bin,
            codex,
            tandem_dir: tempfile::tempdir()?,
            codex_home,
            workspace,
            tandem_url: tandem_url.to_owned(),
        })
    }

    fn spawn(&self, kind: Kind) -> Result<RpcChild> {
        match kind {
            Kind::Tandem => spawn_tandem(
                self.bin,
                self.tandem_dir.path(),
                &self.tandem_url,
                self.workspace.path(),
            ),
            Kind::Codex => spawn_codex(self.codex, self.codex_home.path(), self.workspace.path()),
        }
    }

    async fn initialize(&self, kind: Kind, server: &mut RpcChild) -> Result<()> {
        match kind {
            Kind::Tandem => {
                tandem_initialize(server).await?;
            }
            Kind::Codex => codex_initialize(server).await?,
        }
        Ok(())
    }

    async fn close(&self, kind: Kind, server: &mut RpcChild) -> Result<()> {
        match kind {
            Kind::Tandem => tandem_close(server).await,
            Kind::Codex => server.close(),
        }
    }

    async fn cold_start(&self, kind: Kind) -> Result<Duration> {
        let start = Instant::now();
        let mut server = self.spawn(kind)?;
        let result = self.initialize(kind, &mut server).await;
        let elapsed = start.elapsed();
        self.finish(kind, &mut server, result).await?;
        Ok(elapsed)
    }

    async fn idle_rss(&self, kind: Kind) -> Result<u64> {
        let mut server = self.spawn(kind)?;
        let result = async {
            self.initialize(kind, &mut server).await?;
            // A measurement point, not a synchronisation: whatever the server does in its first
            // second counts as its idle footprint.
            tokio::time::sleep(RSS_SETTLE).await;
            tree_rss_kib(server.pid())
        }
        .await;
        self.finish(kind, &mut server, result).await
    }

    /// A fresh server, initialized and with a session, then one timed turn with its peak memory.
    async fn turn(&self, kind: Kind) -> Result<(Duration, u64)> {
        let mut server = self.spawn(kind)?;
        let result = async {
            self.initialize(kind, &mut server).await?;
            match kind {
                Kind::Tandem => {
                    let session = tandem_new_session(&mut server, self.workspace.path()).await?;
                    let sampler = PeakSampler::start(server.pid());
                    let start = Instant::now();
                    let log = tandem_turn(&mut server, &session, PROMPT).await?;
                    let elapsed = start.elapsed();
                    let peak = sampler.finish()?;
                    check_turn("tandem", log.approvals, &log.text)?;
                    Ok((elapsed, peak))
                }
                Kind::Codex => {
                    let thread_id = codex_thread_start(&mut server, self.workspace.path()).await?;
                    let sampler = PeakSampler::start(server.pid());
                    let start = Instant::now();
                    let turn = codex_turn(&mut server, &thread_id, PROMPT).await?;
                    let elapsed = start.elapsed();
                    let peak = sampler.finish()?;
                    check_turn("Codex", turn.approvals, &turn.text)?;
                    Ok((elapsed, peak))
                }
            }
        }
        .await;
        self.finish(kind, &mut server, result).await
    }

    /// Closes the server; a failure carries the end of its stderr.
    async fn finish<T>(&self, kind: Kind, server: &mut RpcChild, result: Result<T>) -> Result<T> {
        match result {
            Ok(value) => {
                self.close(kind, server).await?;
                Ok(value)
            }
            Err(error) => Err(format!("{error}{}", server.stderr_tail()).into()),
        }
    }
}

fn check_turn(name: &str, approvals: usize, text: &str) -> Result<()> {
    if approvals != 1 || text.trim() != FINAL_TEXT {
        return Err(format!(
            "the {name} turn did not follow the script: {approvals} approvals (expected 1), final text {text:?} (expected {FINAL_TEXT:?})"
        )
        .into());
    }
    Ok(())
}

/// `codex app-server` with `CODEX_HOME=home`, in `cwd`, its stderr in `home/stderr.log`.
pub fn spawn_codex(codex: &Path, home: &Path, cwd: &Path) -> Result<RpcChild> {
    let mut command = Command::new(codex);
    command
        .arg("app-server")
        .env("CODEX_HOME", home)
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .current_dir(cwd);
    RpcChild::spawn("codex", command, home.join("stderr.log"))
}

/// `initialize` (with `clientInfo`, which Codex requires) and the `initialized` notification.
pub async fn codex_initialize(server: &mut RpcChild) -> Result<()> {
    let result = server
        .request(
            "initialize",
            json!({"clientInfo": {"name": "tandem-bench", "title": "tandem benchmark", "version": "0.1.0"}}),
        )
        .await?;
    if result.get("userAgent").is_none() {
        return Err(format!("unexpected Codex initialize result: {result}").into());
    }
    server.notify("initialized", None)
}

/// `thread/start {cwd}`; the new thread's id.
pub async fn codex_thread_start(server: &mut RpcChild, cwd: &Path) -> Result<String> {
    let thread = server.request("thread/start", json!({"cwd": cwd})).await?;
    Ok(thread["thread"]["id"]
        .as_str()
        .ok_or_else(|| format!("thread/start returned no thread id: {thread}"))?
        .to_owned())
}

/// What one Codex turn showed on the wire.
pub struct CodexTurn {
    /// Command approvals answered (each with `accept`).
    pub approvals: usize,
    /// The agent messages' text.
    pub text: String,
    /// The thread's token totals from the last `thread/tokenUsage/updated` of the turn:
    /// `(inputTokens, cachedInputTokens)`, zeros when none came.
    pub total_tokens: (u64, u64),
}

/// `turn/start` with `prompt`, approve every command once, wait for `turn/completed`.
pub async fn codex_turn(server: &mut RpcChild, thread_id: &str, prompt: &str) -> Result<CodexTurn> {
    let id = server.send_request(
        "turn/start",
        json!({"threadId": thread_id, "input": [{"type": "text", "text": prompt}]}),
    )?;
    let mut turn = CodexTurn {
        approvals: 0,
        text: String::new(),
        total_tokens: (0, 0),
    };
    loop {
        let (_, message) = server.next_message().await?;
        if message["id"] == id && message.get("method").is_none() {
            if let Some(error) = message.get("error") {
                return Err(format!("turn/start failed: {error}").into());
            }
            continue;
        }
        let method = message["method"].as_str().unwrap_or_default();
        let params = &message["params"];
        match method {
            "item/commandExecution/requestApproval" => {
                turn.approvals += 1;
                server.respond(&message["id"], json!({"decision": "accept"}))?;
            }
            "item/completed" if params["item"]["type"] == "agentMessage" => {
                turn.text
                    .push_str(params["item"]["text"].as_str().unwrap_or_default());
            }
            "thread/tokenUsage/updated" => {
                let total = &params["tokenUsage"]["total"];
                turn.total_tokens = (
                    total["inputTokens"].as_u64().unwrap_or_default(),
                    total["cachedInputTokens"].as_u64().unwrap_or_default(),
                );
            }
            "turn/completed" => {
                let status = &params["turn"]["status"];
                if status != "completed" {
                    return Err(format!("the Codex turn ended {status}: {params}").into());
                }
                return Ok(turn);
            }
            _ if message.get("id").is_some() => {
                return Err(format!("unexpected Codex server request: {message}").into());
            }
            _ => {}
        }
    }
}

/// Codex pointed at the mock, with everything that would reach the network turned off.
fn codex_config(base_url: &str) -> String {
    codex_config_with(base_url, "")
}

/// The same with more top-level settings (TOML lines), which must come before the tables.
pub fn codex_config_with(base_url: &str, extra_top_level: &str) -> String {
    format!(
        r#"# Written by tandem's benchmark: every model request goes to a loopback mock.
{extra_top_level}model = "mock-model"
model_provider = "mock"
approval_policy = "on-request"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.mock]
name = "bench mock"
base_url = "{base_url}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
plugins = false
apps = false
remote_plugin = false
plugin_sharing = false
in_app_updates = false
tool_suggest = false
skill_mcp_dependency_install = false
enable_request_compression = false
"#
    )
}
