//! A JSON-RPC client over a child's stdio, as an editor would drive an agent server: a dedicated
//! thread reads stdout and stamps each line the moment it is read, so timings do not depend on
//! how busy the async runtime (and the mocks on it) are. It drives `tandem serve` and
//! `codex app-server` alike; `TandemServer` adds tandem's handshake, sessions and turns.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::common::{wait_or_kill, Result, EXIT_TIMEOUT, TURN_TIMEOUT};

/// A spawned server whose stdout lines arrive stamped on a channel.
pub struct RpcChild {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<(Instant, String)>,
    stderr_path: PathBuf,
    next_id: u64,
    name: &'static str,
    gate: std::sync::Arc<ReadGate>,
}

/// Lets a benchmark play an editor that stops reading the server's stdout for a while: the
/// stdout thread waits here before each line while the gate is closed.
#[derive(Default)]
pub struct ReadGate {
    closed: std::sync::Mutex<bool>,
    changed: std::sync::Condvar,
}

impl ReadGate {
    fn set_closed(&self, closed: bool) {
        if let Ok(mut state) = self.closed.lock() {
            *state = closed;
        }
        self.changed.notify_all();
    }

    fn wait_open(&self) {
        let Ok(mut closed) = self.closed.lock() else {
            return;
        };
        while *closed {
            closed = match self.changed.wait(closed) {
                Ok(guard) => guard,
                Err(_) => return,
            };
        }
    }
}

impl RpcChild {
    /// Spawns `command` with piped stdin/stdout and stderr into `stderr_path`.
    pub fn spawn(
        name: &'static str,
        mut command: Command,
        stderr_path: PathBuf,
    ) -> Result<RpcChild> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(File::create(&stderr_path)?))
            .spawn()?;
        let stdin = child.stdin.take().ok_or("stdin was not piped")?;
        let stdout = child.stdout.take().ok_or("stdout was not piped")?;
        let (tx, lines) = mpsc::unbounded_channel();
        let gate = std::sync::Arc::new(ReadGate::default());
        let pump_gate = gate.clone();
        std::thread::Builder::new()
            .name(format!("{name}-stdout"))
            .spawn(move || pump_lines(stdout, tx, &pump_gate))?;
        Ok(RpcChild {
            child,
            stdin: Some(stdin),
            lines,
            stderr_path,
            next_id: 1,
            name,
            gate,
        })
    }

    /// Stops reading stdout (after at most the line being read), as a stalled editor would:
    /// the server's writes back up into the pipe.
    pub fn pause_reading(&self) {
        self.gate.set_closed(true);
    }

    pub fn resume_reading(&self) {
        self.gate.set_closed(false);
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send(&mut self, message: &Value) -> Result<()> {
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        // Small blocking writes into a pipe the server drains; not worth an async detour.
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        stdin.write_all(&line)?;
        stdin.flush()?;
        Ok(())
    }

    /// Sends a request and returns its id without waiting.
    pub fn send_request(&mut self, method: &str, params: Value) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        Ok(id)
    }

    pub fn notify(&mut self, method: &str, params: Option<Value>) -> Result<()> {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        self.send(&message)
    }

    /// Answers a server-to-client request.
    pub fn respond(&mut self, id: &Value, result: Value) -> Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    /// The next stdout message, with the instant its line was read.
    pub async fn next_message(&mut self) -> Result<(Instant, Value)> {
        let name = self.name;
        let (at, line) = tokio::time::timeout(TURN_TIMEOUT, self.lines.recv())
            .await
            .map_err(|_| format!("{name} went silent"))?
            .ok_or_else(|| format!("{name} closed stdout"))?;
        let message = serde_json::from_str(&line)
            .map_err(|e| format!("{name} wrote a non-JSON line ({e}): {line:?}"))?;
        Ok((at, message))
    }

    /// Sends a request and waits for its response; every other message that arrives meanwhile
    /// goes to `on_other`, with the instant it was read.
    pub async fn request_with(
        &mut self,
        method: &str,
        params: Value,
        on_other: &mut dyn FnMut(&mut RpcChild, Instant, &Value) -> Result<()>,
    ) -> Result<(Instant, Value)> {
        let id = self.send_request(method, params)?;
        self.wait_response(id, method, on_other).await
    }

    pub async fn wait_response(
        &mut self,
        id: u64,
        method: &str,
        on_other: &mut dyn FnMut(&mut RpcChild, Instant, &Value) -> Result<()>,
    ) -> Result<(Instant, Value)> {
        loop {
            let (at, message) = self.next_message().await?;
            if message["id"] == id && message.get("method").is_none() {
                if let Some(error) = message.get("error") {
                    return Err(format!("{method} failed: {error}").into());
                }
                return Ok((at, message["result"].clone()));
            }
            on_other(self, at, &message)?;
        }
    }

    /// Sends a request and waits for its response, ignoring everything else.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let (_, result) = self
            .request_with(method, params, &mut |_, _, _| Ok(()))
            .await?;
        Ok(result)
    }

    /// Closes stdin (the end of the session for both servers) and waits for the exit.
    pub fn close(&mut self) -> Result<()> {
        drop(self.stdin.take());
        wait_or_kill(&mut self.child, EXIT_TIMEOUT)
    }

    pub fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        if tail.is_empty() {
            String::new()
        } else {
            format!("\n{} stderr (last lines):\n{tail}", self.name)
        }
    }
}

impl Drop for RpcChild {
    /// A benchmark that failed half-way must not leave a server running.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn pump_lines(stdout: ChildStdout, tx: mpsc::UnboundedSender<(Instant, String)>, gate: &ReadGate) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    loop {
        gate.wait_open();
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

// ---------------------------------------------------------------------------------------------
// tandem

/// The config that points tandem's OpenAI-compatible provider at a mock.
pub fn mock_config(base_url: &str) -> String {
    format!(
        "default_model = \"mock\"\n\n[providers.local]\nkind = \"openai\"\nbase_url = \"{base_url}\"\n\n[models.mock]\nprovider = \"local\"\nname = \"mock-model\"\n"
    )
}

/// `tandem serve --config <dir>/tandem.toml --data-dir <dir>/data`, cwd `cwd`.
pub fn tandem_command(bin: &Path, dir: &Path, base_url: &str, cwd: &Path) -> Result<Command> {
    tandem_command_with_config(bin, dir, &mock_config(base_url), cwd)
}

/// The same with the config file's text given (a mock config with more settings).
pub fn tandem_command_with_config(
    bin: &Path,
    dir: &Path,
    config: &str,
    cwd: &Path,
) -> Result<Command> {
    let config_path = dir.join("tandem.toml");
    std::fs::write(&config_path, config)?;
    let data_dir = dir.join("data");
    std::fs::create_dir_all(&data_dir)?;
    let mut command = Command::new(bin);
    command
        .arg("serve")
        .arg("--config")
        .arg(&config_path)
        .arg("--data-dir")
        .arg(&data_dir)
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .env_remove("TANDEM_CONFIG");
    Ok(command)
}

pub fn spawn_tandem(bin: &Path, dir: &Path, base_url: &str, cwd: &Path) -> Result<RpcChild> {
    let command = tandem_command(bin, dir, base_url, cwd)?;
    RpcChild::spawn("tandem", command, dir.join("tandem-stderr.log"))
}

pub async fn tandem_initialize(server: &mut RpcChild) -> Result<Value> {
    server
        .request("initialize", json!({"protocolVersion": 1}))
        .await
}

pub async fn tandem_new_session(server: &mut RpcChild, cwd: &Path) -> Result<String> {
    let session = server.request("session/new", json!({"cwd": cwd})).await?;
    Ok(session["sessionId"]
        .as_str()
        .ok_or("session/new returned no sessionId")?
        .to_owned())
}

/// What one tandem turn showed on the wire.
#[derive(Default)]
pub struct TurnLog {
    pub approvals: usize,
    pub text: String,
    /// `(toolCallId, instant)` of every `toolCall` event (the call announced).
    pub tool_calls: Vec<(String, Instant)>,
    /// `(toolCallId, status, instant)` of every `toolCallUpdate`.
    pub tool_updates: Vec<(String, String, Instant)>,
    /// `(inputTokens, cachedTokens)` of every `usage` event (0 when `cachedTokens` is absent).
    pub usage: Vec<(u64, u64)>,
}

/// Prompts and waits for `turnEnded{completed}`, approving every request once (as a user who
/// clicks "allow" would), and returns what the turn showed.
pub async fn tandem_turn(server: &mut RpcChild, session_id: &str, prompt: &str) -> Result<TurnLog> {
    let mut log = TurnLog::default();
    // Shared by the closure and the loop that waits for the end.
    let ended = std::cell::RefCell::new(None);
    let mut observe = |server: &mut RpcChild, at: Instant, message: &Value| -> Result<()> {
        if message["method"] != "session/event" {
            return Ok(());
        }
        let params = &message["params"];
        match params["type"].as_str() {
            Some("approvalRequested") => {
                log.approvals += 1;
                let request_id = params["requestId"].clone();
                // The reply is read later like any other message.
                server.send_request(
                    "approve",
                    json!({"sessionId": params["sessionId"], "requestId": request_id, "decision": "once"}),
                )?;
            }
            Some("assistantMessage") => {
                log.text
                    .push_str(params["text"].as_str().unwrap_or_default());
            }
            Some("toolCall") => log.tool_calls.push((
                params["toolCallId"].as_str().unwrap_or_default().to_owned(),
                at,
            )),
            Some("toolCallUpdate") => log.tool_updates.push((
                params["toolCallId"].as_str().unwrap_or_default().to_owned(),
                params["status"].as_str().unwrap_or_default().to_owned(),
                at,
            )),
            Some("usage") => log.usage.push((
                params["inputTokens"].as_u64().unwrap_or_default(),
                params["cachedTokens"].as_u64().unwrap_or_default(),
            )),
            Some("turnEnded") => *ended.borrow_mut() = Some(params.clone()),
            _ => {}
        }
        Ok(())
    };
    server
        .request_with(
            "prompt",
            json!({"sessionId": session_id, "content": prompt}),
            &mut observe,
        )
        .await?;
    while ended.borrow().is_none() {
        let (at, message) = server.next_message().await?;
        if let Some(error) = message.get("error") {
            return Err(format!("tandem answered an error during the turn: {error}").into());
        }
        observe(server, at, &message)?;
    }
    let end = ended.take().unwrap_or_default();
    if end["reason"] != "completed" {
        return Err(format!("the tandem turn did not complete: {end}").into());
    }
    Ok(log)
}

/// `shutdown`, then end of stdin.
pub async fn tandem_close(server: &mut RpcChild) -> Result<()> {
    if let Ok(id) = server.send_request("shutdown", Value::Null) {
        // Best effort: a failed turn may have left the server unable to answer.
        let _ = tokio::time::timeout(EXIT_TIMEOUT, async {
            while let Ok((_, message)) = server.next_message().await {
                if message["id"] == id {
                    break;
                }
            }
        })
        .await;
    }
    server.close()
}
