//! MCP: an MCP tool call inside a turn beside the same call made directly by the official
//! Python SDK's client, and `session/new` with three configured servers beside it with none.
//!
//! - Call overhead: `tandem serve` with `tests/mcp/stdio_server.py` configured as server `t`, a
//!   `fullAuto` session (so no approval waits), and a scripted model that calls `mcp__t__echo`
//!   once per turn. Timed from the `toolCall` event to the call's `completed` update, median of
//!   `RUNS` turns after `WARMUPS`. The anchor is `mcp_direct.py`: the SDK's `ClientSession` over
//!   stdio to the same server script, timing `call_tool("echo")`, median of as many calls. The
//!   figure is the difference of the medians (what tandem adds to the server's own round trip).
//! - `session/new`: a fresh `tandem serve` per sample, `initialize`, then `session/new` timed
//!   from the request to its response; with three configured stdio servers (the same script)
//!   and without, alternating, median of `NEW_RUNS` each. The servers start in the background.
//!
//! Needs the Python SDK's venv from `tests/mcp/setup` (`~/.cache/tandem/mcp-venv`, or
//! `$TANDEM_MCP_VENV`); without it the rows say **not run**.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;
use crate::mock::{chat_tool_results, MockLlm, Reply, Wire};
use crate::rpc::{tandem_close, tandem_initialize, tandem_turn, RpcChild};

const WARMUPS: usize = 3;
const RUNS: usize = 40;
const NEW_RUNS: usize = 15;
/// The allowed overhead of a call made through a tandem turn.
const MAX_OVERHEAD: Duration = Duration::from_micros(1_500);

pub struct McpFigures {
    call_in_turn: Duration,
    call_direct: Duration,
    new_with_servers: Duration,
    new_without: Duration,
}

impl McpFigures {
    pub fn rows(&self) -> Vec<Row> {
        let overhead = self.call_in_turn.saturating_sub(self.call_direct);
        let extra = self.call_in_turn.as_secs_f64() - self.call_direct.as_secs_f64();
        vec![
            Row {
                measure: "MCP tool call inside a turn (toolCall → completed), overhead over the Python SDK client's call".to_owned(),
                tandem: format!(
                    "{} (+{:.2} ms)",
                    format_duration(self.call_in_turn),
                    extra * 1e3
                ),
                anchor: format!("{} (Python SDK `call_tool`)", format_duration(self.call_direct)),
                ratio: ratio(
                    self.call_in_turn.as_secs_f64(),
                    self.call_direct.as_secs_f64(),
                ),
                target: "≤ +1.5 ms".to_owned(),
                verdict: if overhead <= MAX_OVERHEAD { "met" } else { "**missed**" },
            },
            Row::within_ratio(
                "session/new reply with three configured MCP servers",
                self.new_with_servers,
                self.new_without,
                "no servers",
                (1.2, "≤ 1.2×"),
            ),
        ]
    }

    pub fn note(&self) -> String {
        format!(
            "MCP: server `tests/mcp/stdio_server.py` (Python SDK) over stdio; the call is `echo`. In a turn: \
             `fullAuto`, one call per turn, {RUNS} turns after {WARMUPS} warm-ups, `toolCall` → `completed` as read \
             by the client; direct: `examples/bench/mcp_direct.py`, the SDK's `ClientSession.call_tool`, {RUNS} calls \
             after {WARMUPS}. session/new: a fresh `tandem serve` per sample, {NEW_RUNS} samples each, alternating \
             three servers and none."
        )
    }
}

/// The venv python with the MCP SDK, and the server script.
pub fn locate() -> Result<(PathBuf, PathBuf)> {
    let venv = std::env::var_os("TANDEM_MCP_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/tandem/mcp-venv"))
        })
        .ok_or("no HOME to find the MCP venv in")?;
    let python = venv.join("bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/stdio_server.py");
    let ok = std::process::Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        return Err(format!(
            "the MCP Python SDK is not installed at {}; run tests/mcp/setup",
            venv.display()
        )
        .into());
    }
    Ok((python, script))
}

fn server_table(name: &str, python: &Path, script: &Path) -> String {
    format!(
        "\n[mcp_servers.{name}]\ncommand = {:?}\nargs = [{:?}]\nstartup_timeout_ms = 60000\n",
        python.display().to_string(),
        script.display().to_string()
    )
}

/// `spawn_tandem` with `servers` appended to its config.
fn spawn_with(
    bin: &Path,
    dir: &Path,
    base_url: &str,
    cwd: &Path,
    servers: &str,
) -> Result<RpcChild> {
    let command = crate::rpc::tandem_command(bin, dir, base_url, cwd)?;
    let config = dir.join("tandem.toml");
    let mut text = std::fs::read_to_string(&config)?;
    text.push_str(servers);
    std::fs::write(&config, text)?;
    RpcChild::spawn("tandem", command, dir.join("tandem-stderr.log"))
}

pub fn measure(bin: &Path, runtime: &tokio::runtime::Runtime) -> Result<McpFigures> {
    let (python, script) = locate()?;
    let workspace = tempfile::tempdir()?;
    progress(&format!(
        "mcp: {WARMUPS} warm-up + {RUNS} echo calls in turns, then as many through the Python SDK"
    ));
    let call_in_turn = runtime.block_on(calls_in_turns(bin, &python, &script, workspace.path()))?;
    let call_direct = direct_calls(&python, &script)?;
    progress(&format!(
        "mcp: {NEW_RUNS} session/new with three servers and without, alternating"
    ));
    let (new_with_servers, new_without) =
        runtime.block_on(session_new(bin, &python, &script, workspace.path()))?;
    Ok(McpFigures {
        call_in_turn,
        call_direct,
        new_with_servers,
        new_without,
    })
}

/// The scripted model: one echo call, then a text.
fn brain(request: &Value) -> Reply {
    if chat_tool_results(request) == 0 {
        Reply::ToolCalls(vec![(
            "call_echo".to_owned(),
            "mcp__t__echo".to_owned(),
            json!({"text": "benchmark"}).to_string(),
        )])
    } else {
        Reply::Text("echoed".to_owned())
    }
}

async fn calls_in_turns(bin: &Path, python: &Path, script: &Path, cwd: &Path) -> Result<Duration> {
    let dir = tempfile::tempdir()?;
    let mock = MockLlm::start(Wire::ChatCompletions, Arc::new(brain)).await?;
    let mut server = spawn_with(
        bin,
        dir.path(),
        &mock.base_url,
        cwd,
        &server_table("t", python, script),
    )?;
    let result = async {
        tandem_initialize(&mut server).await?;
        let created = server
            .request("session/new", json!({"cwd": cwd, "mode": "fullAuto"}))
            .await?;
        let session = created["sessionId"]
            .as_str()
            .ok_or("session/new returned no sessionId")?
            .to_owned();
        let mut samples = Vec::new();
        for run in 0..WARMUPS + RUNS {
            // The first turn waits for the server to start (prepare_turn); it is a warm-up.
            let log = tandem_turn(&mut server, &session, "echo").await?;
            // The turn's one call (the mock gives it an id of its own).
            let (id, called) =
                log.tool_calls.first().cloned().ok_or_else(|| {
                    format!("no toolCall event in the turn (text {:?})", log.text)
                })?;
            let completed = log
                .tool_updates
                .iter()
                .rev()
                .find(|(update, status, _)| *update == id && status == "completed")
                .map(|(_, _, at)| *at)
                .ok_or_else(|| format!("the echo call did not complete: {:?}", log.tool_updates))?;
            if run >= WARMUPS {
                samples.push(completed.duration_since(called));
            }
        }
        Ok::<_, BoxError>(summarize(samples).median)
    }
    .await;
    match result {
        Ok(median) => {
            tandem_close(&mut server).await?;
            Ok(median)
        }
        Err(error) => Err(format!("{error}{}", server.stderr_tail()).into()),
    }
}

fn direct_calls(python: &Path, script: &Path) -> Result<Duration> {
    let anchor = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bench/mcp_direct.py");
    let output = std::process::Command::new(python)
        .arg(anchor)
        .arg(script)
        .arg(WARMUPS.to_string())
        .arg(RUNS.to_string())
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "mcp_direct.py failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let line: Value = serde_json::from_slice(&output.stdout)?;
    let micros = line["median_us"]
        .as_f64()
        .ok_or("mcp_direct.py printed no median")?;
    Ok(Duration::from_secs_f64(micros / 1e6))
}

async fn session_new(
    bin: &Path,
    python: &Path,
    script: &Path,
    cwd: &Path,
) -> Result<(Duration, Duration)> {
    let mock = MockLlm::start(Wire::ChatCompletions, Arc::new(brain)).await?;
    let three: String = ["a", "b", "c"]
        .iter()
        .map(|name| server_table(name, python, script))
        .collect();
    let mut with = Vec::new();
    let mut without = Vec::new();
    for run in 0..NEW_RUNS + 1 {
        // Alternate which variant goes first, so a slow moment is shared.
        let order: [bool; 2] = if run % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for servers in order {
            let dir = tempfile::tempdir()?;
            let mut server = spawn_with(
                bin,
                dir.path(),
                &mock.base_url,
                cwd,
                if servers { &three } else { "" },
            )?;
            tandem_initialize(&mut server).await?;
            let start = Instant::now();
            server.request("session/new", json!({"cwd": cwd})).await?;
            let elapsed = start.elapsed();
            if servers {
                // Let the servers finish starting before the next sample, so their imports do
                // not slow it; the wait is not part of the figure.
                let mut ready = 0;
                while ready < 3 {
                    let (_, message) = tokio::time::timeout(TURN_TIMEOUT, server.next_message())
                        .await
                        .map_err(|_| "the MCP servers did not become ready")??;
                    let params = &message["params"];
                    if params["type"] == "mcpStatus" {
                        match params["status"].as_str() {
                            Some("ready") => ready += 1,
                            Some("starting") => {}
                            other => {
                                return Err(format!(
                                    "an MCP server did not start: {other:?} {params}"
                                )
                                .into())
                            }
                        }
                    }
                }
            }
            tandem_close(&mut server).await?;
            // The first round is a warm-up (page cache, the venv's bytecode).
            if run > 0 {
                if servers {
                    with.push(elapsed);
                } else {
                    without.push(elapsed);
                }
            }
        }
    }
    Ok((summarize(with).median, summarize(without).median))
}
