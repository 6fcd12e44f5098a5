//! The ACP face under a slow, silent or broken client, driven line by line over real pipes:
//! requests to the editor that are never answered, bytes that are not UTF-8 or not JSON, a
//! client that goes away, and the error codes an ACP client branches on.
//!
//! The SDK clients of `tests/it/acp.rs` always answer and always send valid JSON, so these cases
//! need a raw client: this file spawns the real `tandem acp`, writes lines to its stdin and
//! reads every line it writes, against the mock LLM on loopback.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};

const WAIT: Duration = Duration::from_secs(20);

struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Every line tandem wrote, parsed (a line that is not JSON fails the test).
    seen: Arc<Mutex<Vec<Value>>>,
    /// The raw length of each line, by position in `seen`.
    lengths: Arc<Mutex<Vec<usize>>>,
    arrived: Arc<tokio::sync::Notify>,
    /// Every line both ways, in order, as `tests/acp/wiretap.py` logs them, for the schema check.
    wire: Arc<Mutex<Vec<Value>>>,
    next_id: u64,
    scratch: tempfile::TempDir,
}

impl Raw {
    fn spawn(mock: &MockLlm, data_dir: &std::path::Path) -> Raw {
        let scratch = tempfile::tempdir().expect("scratch");
        let config = scratch.path().join("config.toml");
        std::fs::write(&config, config_for(mock)).expect("write config");
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tandem"))
            .arg("acp")
            .arg("--config")
            .arg(&config)
            .arg("--data-dir")
            .arg(data_dir)
            .env_remove("TANDEM_CONFIG")
            .env_remove("TANDEM_HOME")
            .env("XDG_CONFIG_HOME", scratch.path().join("xdg-config"))
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn tandem acp");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let lengths = Arc::new(Mutex::new(Vec::new()));
        let arrived = Arc::new(tokio::sync::Notify::new());
        let wire = Arc::new(Mutex::new(Vec::new()));
        let (s, l, a, w) = (seen.clone(), lengths.clone(), arrived.clone(), wire.clone());
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("tandem wrote a line that is not JSON ({e}): {line}")
                });
                w.lock().unwrap().push(json!({"dir": "out", "line": line}));
                l.lock().unwrap().push(line.len());
                s.lock().unwrap().push(value);
                a.notify_waiters();
            }
        });
        Raw {
            child,
            stdin,
            seen,
            lengths,
            arrived,
            wire,
            next_id: 0,
            scratch,
        }
    }

    /// Checks every message tandem wrote so far against the official ACP JSON schema with
    /// `tests/acp/validate.py` (see tests/it/acp.rs), and fails on any invalid one.
    async fn validate_against_the_schema(&self) {
        let log = self.scratch.path().join("wiretap.jsonl");
        let mut text = String::new();
        for entry in self.wire.lock().unwrap().iter() {
            text.push_str(&entry.to_string());
            text.push('\n');
        }
        std::fs::write(&log, text).expect("write the wire log");
        let acp_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp");
        let python = dirs::home_dir()
            .expect("a home directory")
            .join(".cache/tandem/acp-venv/bin/python");
        let python = std::env::var_os("TANDEM_ACP_VENV")
            .map(|venv| PathBuf::from(venv).join("bin/python"))
            .unwrap_or(python);
        let output = tokio::process::Command::new(&python)
            .arg(acp_dir.join("validate.py"))
            .arg(&log)
            .output()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "run {} (install it with tests/acp/setup): {e}",
                    python.display()
                )
            });
        let stdout = String::from_utf8_lossy(&output.stdout);
        println!("── {}", stdout.trim_end());
        assert!(
            output.status.success(),
            "tandem sent messages the ACP schema rejects:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            self.wire
                .lock()
                .unwrap()
                .push(json!({"dir": "in", "line": String::from_utf8_lossy(line)}));
        }
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).await.expect("write to tandem");
        stdin.flush().await.expect("flush");
    }

    async fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.send_raw(&line).await;
    }

    async fn request(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// The first message from position `from` on that satisfies `pred`, with its position.
    async fn wait_from(
        &self,
        from: usize,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> (usize, Value) {
        let deadline = Instant::now() + WAIT;
        loop {
            let notified = self.arrived.notified();
            {
                let seen = self.seen.lock().unwrap();
                let start = from.min(seen.len());
                if let Some(found) = seen[start..].iter().position(&pred) {
                    let at = start + found;
                    return (at, seen[at].clone());
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "waited {WAIT:?} for {what}; tandem wrote:\n{}",
                self.dump()
            );
            let _ = tokio::time::timeout(left, notified).await;
        }
    }

    async fn wait(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_from(0, what, pred).await.1
    }

    async fn response(&self, id: u64) -> Value {
        self.wait(&format!("the response to request {id}"), |m| {
            m["id"] == id && m.get("method").is_none()
        })
        .await
    }

    async fn result(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        let response = self.response(id).await;
        assert!(
            response.get("error").is_none(),
            "{method} failed: {response}"
        );
        response["result"].clone()
    }

    async fn error(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        let response = self.response(id).await;
        assert!(
            response.get("error").is_some(),
            "{method} did not fail: {response}"
        );
        response["error"].clone()
    }

    fn dump(&self) -> String {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|m| {
                let text = m.to_string();
                text.chars().take(400).collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn position_of(&self, pred: impl Fn(&Value) -> bool) -> Option<usize> {
        self.seen.lock().unwrap().iter().position(pred)
    }

    async fn initialize(&mut self, fs: bool) {
        self.result(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": fs, "writeTextFile": fs}}}),
        )
        .await;
    }

    async fn new_session(&mut self, cwd: &std::path::Path) -> String {
        let result = self
            .result("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        result["sessionId"].as_str().expect("sessionId").to_owned()
    }

    fn prompt_params(session: &str, text: &str) -> Value {
        json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
    }

    /// Close stdin and return how long tandem took to exit.
    async fn close_stdin_and_time_exit(&mut self) -> Duration {
        self.stdin.take();
        let started = Instant::now();
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("tandem exits after stdin closes")
            .expect("wait for tandem");
        started.elapsed()
    }
}

fn read_call(id: &str, path: &str) -> Script {
    Script::tool_call_reply(id, "read_file", json!({"path": path}))
}

fn data_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("data dir")
}

#[tokio::test]
async fn cancel_and_close_work_while_the_editor_does_not_answer_a_read_and_a_late_answer_is_dropped(
) {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(read_call("r1", "a.txt"));
    let data = data_dir();
    let mut acp = Raw::spawn(&mock, data.path());
    acp.initialize(true).await;
    let session = acp.new_session(&canonical(ws.path())).await;
    let prompt = acp
        .request("session/prompt", Raw::prompt_params(&session, "read a.txt"))
        .await;
    let (read_at, read) = acp
        .wait_from(0, "fs/read_text_file", |m| {
            m["method"] == "fs/read_text_file"
        })
        .await;
    // The editor hears of the call before it is asked for the file.
    let call_at = acp
        .position_of(|m| {
            m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == "tool_call"
        })
        .expect("a tool_call update");
    assert!(
        call_at < read_at,
        "fs/read_text_file went out before its tool_call:\n{}",
        acp.dump()
    );
    // The editor never answers; the user cancels.
    acp.notify("session/cancel", json!({"sessionId": session}))
        .await;
    let answered = acp.response(prompt).await;
    assert_eq!(answered["result"]["stopReason"], "cancelled", "{answered}");
    let withdrawn = acp
        .wait("$/cancel_request for the read", |m| {
            m["method"] == "$/cancel_request" && m["params"]["requestId"] == read["id"]
        })
        .await;
    assert_eq!(withdrawn["params"]["requestId"], read["id"]);
    // The late answer finds nobody waiting and changes nothing; the next prompt runs.
    acp.send(json!({"jsonrpc": "2.0", "id": read["id"], "result": {"content": "late"}}))
        .await;
    mock.push(read_call("r2", "a.txt"));
    let second = acp
        .request("session/prompt", Raw::prompt_params(&session, "again"))
        .await;
    let (_, read2) = acp
        .wait_from(read_at + 1, "the second read", |m| {
            m["method"] == "fs/read_text_file"
        })
        .await;
    // Closing the session while that read is open answers at once and withdraws it.
    let close = acp
        .request("session/close", json!({"sessionId": session}))
        .await;
    let closed = acp.response(close).await;
    assert!(closed.get("error").is_none(), "{closed}");
    let second = acp.response(second).await;
    assert_eq!(second["result"]["stopReason"], "cancelled", "{second}");
    acp.wait("$/cancel_request for the second read", |m| {
        m["method"] == "$/cancel_request" && m["params"]["requestId"] == read2["id"]
    })
    .await;
    // The connection still answers.
    let list = acp.result("session/list", json!({})).await;
    assert!(list["sessions"].is_array());
    let exit = acp.close_stdin_and_time_exit().await;
    assert!(
        exit < Duration::from_secs(2),
        "tandem took {exit:?} to exit"
    );
    acp.validate_against_the_schema().await;
}

#[tokio::test]
async fn close_answers_while_the_editor_holds_a_write_and_tandem_exits_soon_after_stdin_closes() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "a.txt", "content": "beta\n"}),
    ));
    let data = data_dir();
    let mut acp = Raw::spawn(&mock, data.path());
    acp.initialize(true).await;
    let session = acp.new_session(&canonical(ws.path())).await;
    acp.result(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "fullAuto"}),
    )
    .await;
    let prompt = acp
        .request(
            "session/prompt",
            Raw::prompt_params(&session, "write a.txt"),
        )
        .await;
    // Planning and applying read the buffer; the write itself is never answered.
    let mut from = 0;
    let write = loop {
        let (at, asked) = acp
            .wait_from(from, "a request to the editor", |m| {
                m["method"] == "fs/read_text_file" || m["method"] == "fs/write_text_file"
            })
            .await;
        from = at + 1;
        if asked["method"] == "fs/write_text_file" {
            break asked;
        }
        acp.send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"content": "alpha\n"}}))
            .await;
    };
    let close = acp
        .request("session/close", json!({"sessionId": session}))
        .await;
    let closed = acp.response(close).await;
    assert!(closed.get("error").is_none(), "{closed}");
    let answered = acp.response(prompt).await;
    assert_eq!(answered["result"]["stopReason"], "cancelled", "{answered}");
    acp.wait("$/cancel_request for the write", |m| {
        m["method"] == "$/cancel_request" && m["params"]["requestId"] == write["id"]
    })
    .await;
    // The connection still answers after the close.
    let list = acp.result("session/list", json!({})).await;
    assert!(list["sessions"].is_array());
    let exit = acp.close_stdin_and_time_exit().await;
    // The contract is one second; the margin is for a loaded CI machine.
    assert!(
        exit < Duration::from_secs(2),
        "tandem took {exit:?} to exit"
    );
    acp.validate_against_the_schema().await;
}

#[tokio::test]
async fn tandem_acp_exits_soon_after_stdin_closes_while_the_editor_holds_a_read() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(read_call("r1", "a.txt"));
    let data = data_dir();
    let mut acp = Raw::spawn(&mock, data.path());
    acp.initialize(true).await;
    let session = acp.new_session(&canonical(ws.path())).await;
    acp.request("session/prompt", Raw::prompt_params(&session, "read a.txt"))
        .await;
    acp.wait("fs/read_text_file", |m| m["method"] == "fs/read_text_file")
        .await;
    let exit = acp.close_stdin_and_time_exit().await;
    // The contract is one second; the margin is for a loaded CI machine.
    assert!(
        exit < Duration::from_secs(2),
        "tandem took {exit:?} to exit"
    );
    acp.validate_against_the_schema().await;
}

#[tokio::test]
async fn a_failed_editor_read_fails_the_call_instead_of_reading_the_disk() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "DISK CONTENT\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(read_call("r1", "a.txt"));
    mock.push(Script::text_reply("ok"));
    let data = data_dir();
    let mut acp = Raw::spawn(&mock, data.path());
    acp.initialize(true).await;
    let session = acp.new_session(&canonical(ws.path())).await;
    let prompt = acp
        .request("session/prompt", Raw::prompt_params(&session, "read a.txt"))
        .await;
    let read = acp
        .wait("fs/read_text_file", |m| m["method"] == "fs/read_text_file")
        .await;
    acp.send(json!({"jsonrpc": "2.0", "id": read["id"], "error": {"code": -32603, "message": "buffer is locked"}}))
        .await;
    let done = acp.response(prompt).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let tool = mock.request(1)["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .expect("a tool result");
    let text = tool["content"].as_str().unwrap();
    assert!(!text.contains("DISK CONTENT"), "{text}");
    assert!(text.contains("buffer is locked"), "{text}");
    acp.validate_against_the_schema().await;
}

#[tokio::test]
async fn bad_lines_get_parse_errors_without_echo_and_the_running_turn_survives() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    let gate = Gate::new();
    mock.push(
        Script::new()
            .role()
            .text("part one")
            .wait_for(&gate)
            .text(" and two")
            .finish("stop")
            .done(),
    );
    let data = data_dir();
    let mut acp = Raw::spawn(&mock, data.path());
    acp.initialize(false).await;
    let session = acp.new_session(&canonical(ws.path())).await;
    let prompt = acp
        .request("session/prompt", Raw::prompt_params(&session, "go"))
        .await;
    gate.wait_reached().await;
    let before = acp.seen.lock().unwrap().len();
    // Invalid UTF-8 inside a request whose id can still be read.
    acp.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"session/list\",\"params\":{\"cwd\":\"\xff\xfe\"}}\n")
        .await;
    let (_, utf8) = acp
        .wait_from(before, "the UTF-8 parse error", |m| m["id"] == 77)
        .await;
    assert_eq!(utf8["error"]["code"], -32700, "{utf8}");
    assert!(utf8["error"]["message"].as_str().unwrap().contains("UTF-8"));
    // 1 MB that is not JSON: answered briefly, without the input.
    let garbage = "x".repeat(1_000_000) + "\n";
    acp.send_raw(garbage.as_bytes()).await;
    let (at, not_json) = acp
        .wait_from(before, "the parse error for the garbage line", |m| {
            m["error"]["code"] == -32700 && m["id"].is_null()
        })
        .await;
    assert!(acp.lengths.lock().unwrap()[at] < 1000, "{not_json}");
    // A lone surrogate escape is valid JSON: the prompt is taken, with U+FFFD for it.
    gate.open();
    let done = acp.response(prompt).await;
    assert_eq!(
        done["result"]["stopReason"], "end_turn",
        "the turn survived: {done}"
    );
    mock.push(Script::text_reply("fine"));
    acp.send_raw(
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":78,\"method\":\"session/prompt\",\"params\":{{\"sessionId\":\"{session}\",\"prompt\":[{{\"type\":\"text\",\"text\":\"half \\ud83d pair\"}}]}}}}\n"
        )
        .as_bytes(),
    )
    .await;
    let surrogate = acp.response(78).await;
    assert_eq!(surrogate["result"]["stopReason"], "end_turn", "{surrogate}");
    let sent = mock.request(1).to_string();
    assert!(sent.contains("half \u{fffd} pair"), "{sent}");
    acp.validate_against_the_schema().await;
}

#[tokio::test]
async fn error_codes_follow_acp_and_name_the_kind() {
    let ws = workspace();
    let other = workspace();
    let mock = MockLlm::start().await;
    let gate = Gate::new();
    mock.push(
        Script::new()
            .role()
            .wait_for(&gate)
            .text("done")
            .finish("stop")
            .done(),
    );
    mock.push(Script::text_reply("second"));
    let data = data_dir();
    let mut acp = Raw::spawn(&mock, data.path());
    acp.initialize(false).await;
    // Bad params are -32602, never ACP's -32000 ("authentication required").
    let bad_cwd = acp
        .error(
            "session/new",
            json!({"cwd": "relative/dir", "mcpServers": []}),
        )
        .await;
    assert_eq!(bad_cwd["code"], -32602, "{bad_cwd}");
    assert_eq!(bad_cwd["data"]["kind"], "invalidCwd");
    let auth = acp
        .error("authenticate", json!({"methodId": "anything"}))
        .await;
    assert_eq!(auth["code"], -32602, "{auth}");
    assert!(auth["message"].as_str().unwrap().contains("anything"));
    let session = acp.new_session(&canonical(ws.path())).await;
    let unknown_mode = acp
        .error(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "yolo"}),
        )
        .await;
    assert_eq!(unknown_mode["code"], -32602, "{unknown_mode}");
    assert_eq!(unknown_mode["data"]["kind"], "invalidMode");
    // A busy session is tandem's own code, in its documented range.
    let first = acp
        .request("session/prompt", Raw::prompt_params(&session, "one"))
        .await;
    gate.wait_reached().await;
    let busy = acp
        .error("session/prompt", Raw::prompt_params(&session, "two"))
        .await;
    assert_eq!(busy["code"], -32050, "{busy}");
    assert_eq!(busy["data"]["kind"], "turnInProgress");
    gate.open();
    acp.response(first).await;
    // The legacy set_mode also tells a client that shows config options.
    let before = acp.seen.lock().unwrap().len();
    acp.result(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "autoEdit"}),
    )
    .await;
    acp.wait_from(
        before,
        "a config_option_update after session/set_mode",
        |m| m["params"]["update"]["sessionUpdate"] == "config_option_update",
    )
    .await;
    // A session belongs to its folder: loading it for another one is refused.
    let stored = acp.result("session/list", json!({})).await;
    assert!(stored.get("nextCursor").is_none() || stored["nextCursor"].is_null());
    let wrong = acp
        .error(
            "session/load",
            json!({"sessionId": session, "cwd": canonical(other.path()), "mcpServers": []}),
        )
        .await;
    assert_eq!(wrong["code"], -32602, "{wrong}");
    assert_eq!(wrong["data"]["kind"], "invalidCwd");
    let bad_cursor = acp.error("session/list", json!({"cursor": "nope"})).await;
    assert_eq!(bad_cursor["code"], -32602, "{bad_cursor}");
    let unknown = acp
        .error("session/prompt", Raw::prompt_params("s_nope", "hi"))
        .await;
    assert_eq!(unknown["code"], -32002, "{unknown}");
    assert_eq!(unknown["data"]["kind"], "unknownSession");
    acp.validate_against_the_schema().await;
}

#[tokio::test]
async fn session_list_pages_and_an_embedded_resource_is_replayed_as_a_resource() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    let data = data_dir();
    let mut acp = Raw::spawn(&mock, data.path());
    acp.initialize(false).await;
    let cwd: PathBuf = canonical(ws.path());
    // 101 sessions with a message each: more than one page.
    let mut ids = Vec::new();
    for index in 0..101 {
        mock.push(Script::text_reply("ok"));
        let session = acp.new_session(&cwd).await;
        let params = if index == 0 {
            json!({"sessionId": session, "prompt": [
                {"type": "text", "text": "see this"},
                {"type": "resource", "resource": {"uri": "file:///notes.md", "text": "# Notes\nkeep\n"}},
            ]})
        } else {
            Raw::prompt_params(&session, "hi")
        };
        acp.result("session/prompt", params).await;
        ids.push(session);
    }
    let first = acp.result("session/list", json!({"cwd": cwd})).await;
    let cursor = first["nextCursor"]
        .as_str()
        .expect("a second page")
        .to_owned();
    let second = acp
        .result("session/list", json!({"cwd": cwd, "cursor": cursor}))
        .await;
    assert!(second.get("nextCursor").is_none() || second["nextCursor"].is_null());
    let mut listed: Vec<String> = first["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["sessions"].as_array().unwrap())
        .map(|s| s["sessionId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(first["sessions"].as_array().unwrap().len(), 100);
    let resource_session = ids[0].clone();
    listed.sort();
    ids.sort();
    assert_eq!(listed, ids);
    // A fresh process replays the first session's resource as the resource it was.
    acp.close_stdin_and_time_exit().await;
    let mut acp = Raw::spawn(&mock, data.path());
    acp.initialize(false).await;
    acp.result(
        "session/load",
        json!({"sessionId": resource_session, "cwd": cwd, "mcpServers": []}),
    )
    .await;
    let replayed = acp
        .wait("the replayed resource", |m| {
            m["params"]["update"]["sessionUpdate"] == "user_message_chunk"
                && m["params"]["update"]["content"]["type"] == "resource"
        })
        .await;
    let resource = &replayed["params"]["update"]["content"]["resource"];
    assert_eq!(resource["uri"], "file:///notes.md");
    assert_eq!(resource["text"], "# Notes\nkeep\n");
    acp.validate_against_the_schema().await;
}

#[tokio::test]
async fn a_content_filter_stop_ends_the_prompt_with_refusal_and_another_warning_does_not() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .role()
            .text("I can't help")
            .finish("content_filter")
            .done(),
    );
    // An answer that merely quotes the refusal notice ends as any answer does.
    mock.push(Script::text_reply(
        "the provider's content filter stopped the model's answer (quoting it)",
    ));
    let data = data_dir();
    let mut acp = Raw::spawn(&mock, data.path());
    acp.initialize(false).await;
    let session = acp.new_session(&canonical(ws.path())).await;
    let refused = acp
        .request("session/prompt", Raw::prompt_params(&session, "something"))
        .await;
    let done = acp.response(refused).await;
    assert_eq!(done["result"]["stopReason"], "refusal", "{done}");
    let next = acp
        .request("session/prompt", Raw::prompt_params(&session, "again"))
        .await;
    let done = acp.response(next).await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    acp.validate_against_the_schema().await;
}
