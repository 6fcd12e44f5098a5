//! The wire: malformed frames, both framings, error kinds, lifecycle, and path escapes through
//! the tools, all against the real binary over real pipes.

use crate::support::*;
use serde_json::{json, Value};

fn error_of(message: &Value) -> (i64, String) {
    (
        message["error"]["code"].as_i64().unwrap_or_default(),
        message["error"]["data"]["kind"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

#[tokio::test]
async fn malformed_frames_get_errors_and_the_server_keeps_serving() {
    let mock = MockLlm::start().await;
    let t = Tandem::start(&mock).await;
    let cases: Vec<(&[u8], i64, &str)> = vec![
        (b"{not json}\n", -32700, "parseError"),
        (b"\xff\xfe\xfd\n", -32700, "parseError"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":\"x\0\"\n", -32700, "parseError"),
        (b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}]\n", -32600, "invalidRequest"),
        (b"42\n", -32600, "invalidRequest"),
        (b"{\"jsonrpc\":\"1.0\",\"id\":\"a\",\"method\":\"initialize\"}\n", -32600, "invalidRequest"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"initialize\"}\n", -32600, "invalidRequest"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":5}\n", -32600, "invalidRequest"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":\"c\",\"method\":\"nope\"}\n", -32601, "methodNotFound"),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"prompt\",\"params\":{\"sessionId\":1}}\n",
            -32602,
            "invalidParams",
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":\"e\",\"method\":\"setMode\",\"params\":{\"sessionId\":\"s\",\"mode\":\"yolo\"}}\n",
            -32000,
            "invalidMode",
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":\"f\",\"method\":\"stop\",\"params\":[\"s\"]}\n",
            -32602,
            "invalidParams",
        ),
    ];
    for (bytes, code, kind) in cases {
        t.send_raw(bytes).await;
        let message = t.next_raw_message().await;
        assert_eq!(
            error_of(&message),
            (code, kind.to_owned()),
            "for {:?}: {message}",
            String::from_utf8_lossy(bytes)
        );
        assert!(
            !message["error"]["message"].as_str().unwrap().is_empty(),
            "errors say what went wrong"
        );
    }
    // 10,000-deep nesting is a parse error, not a stack overflow.
    let deep = format!("{}{}\n", "[".repeat(10_000), "]".repeat(10_000));
    t.send_raw(deep.as_bytes()).await;
    assert_eq!(error_of(&t.next_raw_message().await).1, "parseError");
    // A frame over the 16 MiB cap is refused and skipped; the next one is served.
    let mut huge = vec![b'x'; 17 * 1024 * 1024];
    huge.push(b'\n');
    t.send_raw(&huge).await;
    assert_eq!(error_of(&t.next_raw_message().await).1, "frameTooLarge");
    // A frame split into one-byte writes still arrives whole.
    let ok = b"{\"jsonrpc\":\"2.0\",\"id\":\"z\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n";
    for byte in ok.iter() {
        t.send_raw(std::slice::from_ref(byte)).await;
    }
    let message = t.next_raw_message().await;
    assert_eq!(message["id"], "z");
    assert_eq!(message["result"]["protocolVersion"], 1);
    let ws = workspace();
    let sid = t.new_session(ws.path()).await;
    assert!(sid.starts_with("s_"));
    t.shutdown().await;
}

#[tokio::test]
async fn content_length_framing_is_detected_and_answered_in_kind() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "cl.txt", "content": "framed\n"}),
    ));
    mock.push(Script::text_reply("ok"));
    let t =
        Tandem::start_with(TandemOptions::with_mock(&mock).framing(Framing::ContentLength)).await;
    let init = t.messages();
    assert!(!init.is_empty());
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "write").await;
    let approval = t.wait_approval(&sid).await;
    t.approve(
        &sid,
        approval["requestId"].as_str().unwrap(),
        "once",
        None,
        None,
    )
    .await;
    t.wait_turn_ended(&sid).await;
    assert_eq!(
        std::fs::read_to_string(ws.path().join("cl.txt")).unwrap(),
        "framed\n"
    );
    // Malformed input in this framing is answered in this framing too.
    t.send_raw(b"Content-Length: 5\r\n\r\n{oops").await;
    assert_eq!(error_of(&t.next_raw_message().await).1, "parseError");
    t.send_raw(b"Content-Length: nope\r\n\r\n").await;
    assert_eq!(error_of(&t.next_raw_message().await).1, "parseError");
    assert!(t.stdout_errors().is_empty(), "{:?}", t.stdout_errors());
    t.shutdown().await;
}

#[tokio::test]
async fn ndjson_is_the_default_framing() {
    let mock = MockLlm::start().await;
    let t = Tandem::start(&mock).await;
    let init = t
        .request_ok("initialize", json!({"protocolVersion": 1}))
        .await;
    assert_eq!(init["capabilities"]["framing"], "ndjson");
    assert_eq!(init["serverInfo"]["name"], "tandem");
    assert_eq!(init["defaultModel"], "mock");
    let ids: Vec<&str> = init["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"mock") && ids.contains(&"mock-2"));
    assert!(t.stdout_errors().is_empty());
    t.shutdown().await;
}

#[tokio::test]
async fn lifecycle_errors_name_the_fix() {
    let mock = MockLlm::start().await;
    let t = Tandem::spawn(TandemOptions::with_mock(&mock));
    let err = t.request_err("session/new", json!({"cwd": "/tmp"})).await;
    assert_eq!(err.kind, "notInitialized");
    assert!(err.message.contains("initialize"));
    let err = t
        .request_err("initialize", json!({"protocolVersion": 2}))
        .await;
    assert_eq!(err.kind, "unsupportedProtocolVersion");
    t.request_ok("initialize", json!({"protocolVersion": 1}))
        .await;
    let err = t
        .request_err("session/new", json!({"cwd": "relative/dir"}))
        .await;
    assert_eq!(err.kind, "invalidCwd");
    let err = t
        .request_err("session/new", json!({"cwd": "/definitely/not/here"}))
        .await;
    assert_eq!(err.kind, "invalidCwd");
    let err = t
        .request_err("prompt", json!({"sessionId": "s_missing", "content": "hi"}))
        .await;
    assert_eq!(err.kind, "unknownSession");
    let ws = workspace();
    let sid = t.new_session(ws.path()).await;
    let err = t
        .request_err("prompt", json!({"sessionId": sid, "content": "  "}))
        .await;
    assert_eq!(err.kind, "invalidParams");
    let err = t
        .request_err("steer", json!({"sessionId": sid, "text": "x"}))
        .await;
    assert_eq!(err.kind, "noTurnRunning");
    let err = t
        .request_err(
            "approve",
            json!({"sessionId": sid, "requestId": "r_nope", "decision": "once"}),
        )
        .await;
    assert_eq!(err.kind, "staleApproval");
    // A session nobody prompted is not listed, but it is there to load.
    let list = t.request_ok("session/list", json!({})).await;
    assert_eq!(list["sessions"], json!([]));
    let loaded = t
        .request_ok("session/load", json!({"sessionId": sid}))
        .await;
    assert_eq!(loaded["sessionId"], sid.as_str());
    t.shutdown().await;
}

#[tokio::test]
async fn end_of_stdin_ends_a_running_turn_and_exits_cleanly() {
    let ws = workspace();
    let gate = Gate::new();
    let mock = MockLlm::start().await;
    mock.push(Script::new().role().text("working").wait_for(&gate).done());
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "go").await;
    gate.wait_reached().await;
    t.close_stdin().await;
    let status = t.wait_exit().await;
    assert!(status.success(), "exit status {status:?}");
    let ended = t.events_of_type(&sid, "turnEnded");
    assert_eq!(ended[0]["reason"], "interrupted");
    gate.open();
}

#[tokio::test]
async fn paths_outside_the_workspace_are_refused_by_the_tools() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret\n").unwrap();
    let ws = workspace();
    std::os::unix::fs::symlink(outside.path(), ws.path().join("link")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        ws.path().join("secret-link"),
    )
    .unwrap();
    let outside_file = outside.path().join("secret.txt");
    let mock = MockLlm::start().await;
    mock.push(Script::tool_calls(vec![
        (
            "a",
            "read_file",
            json!({"path": "../secret.txt"}).to_string(),
        ),
        (
            "b",
            "read_file",
            json!({"path": outside_file.to_str().unwrap()}).to_string(),
        ),
        (
            "c",
            "read_file",
            json!({"path": "link/secret.txt"}).to_string(),
        ),
        ("d", "read_file", json!({"path": "secret-link"}).to_string()),
        ("e", "list_dir", json!({"path": "link"}).to_string()),
        (
            "f",
            "grep",
            json!({"pattern": "secret", "path": "link"}).to_string(),
        ),
    ]));
    mock.push(Script::tool_calls(vec![
        (
            "w",
            "write_file",
            json!({"path": "link/pwned.txt", "content": "x"}).to_string(),
        ),
        (
            "x",
            "edit_file",
            json!({"path": "secret-link", "old_string": "top", "new_string": "low"}).to_string(),
        ),
    ]));
    mock.push(Script::text_reply("ok"));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "escape").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    for request in mock.requests().iter().skip(1) {
        let text = request.to_string();
        assert!(!text.contains("top secret"), "secret leaked: {text}");
    }
    let results: Vec<Value> = mock.request(2)["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect();
    assert_eq!(results.len(), 8);
    for r in &results {
        let content = r["content"].as_str().unwrap();
        assert!(
            content.contains("outside the workspace") || content.contains("outside"),
            "call {} was not refused: {content}",
            r["tool_call_id"]
        );
    }
    assert!(
        t.events_of_type(&sid, "approvalRequested").is_empty(),
        "an escaping write fails before asking"
    );
    assert!(!outside.path().join("pwned.txt").exists());
    assert_eq!(
        std::fs::read_to_string(&outside_file).unwrap(),
        "top secret\n"
    );
    t.shutdown().await;
}

/// A client that stops reading (busy, or slow) must not stall the server, and must get every
/// event whole and in order once it reads again. The server writes small messages straight to
/// a non-blocking stdout; when the pipe is full they go to its writer thread, which waits for
/// room (the log line this waits for), and direct writes resume only once that queue is empty.
/// A direct write cut short by a full pipe is covered by `server::stdout`'s unit tests, which
/// can set the pipe up for it exactly.
#[tokio::test]
async fn a_client_that_stops_reading_gets_the_whole_stream_in_order_when_it_reads_again() {
    for framing in [Framing::Ndjson, Framing::ContentLength] {
        let ws = workspace();
        let mock = MockLlm::start().await;
        let chunks: Vec<String> = (0..400)
            .map(|i| format!("<{i}>{}", "x".repeat(6_000 + i % 5)))
            .collect();
        let mut script = Script::new().role();
        for chunk in &chunks {
            script = script.text(chunk.clone());
        }
        mock.push(script.finish("stop").done());
        let t = Tandem::start_with(
            TandemOptions::with_mock(&mock)
                .framing(framing)
                .env("RUST_LOG", "tandem::server=debug"),
        )
        .await;
        let sid = t.new_session(ws.path()).await;
        t.pause_stdout();
        let id = t
            .send_request("prompt", json!({"sessionId": sid, "content": "stream"}))
            .await;
        // The stream is 2.4 MB; the pipe holds 64 KiB.
        t.wait_stderr("stdout is full").await;
        t.resume_stdout();
        t.response(id).await.expect("the prompt is admitted");
        let ended = t.wait_turn_ended(&sid).await;
        assert_eq!(ended["reason"], "completed", "{framing:?}: {ended}");
        let events = t.events(&sid);
        assert_seq_contiguous(&events);
        let streamed: String = events
            .iter()
            .filter(|e| e["type"] == "assistantDelta")
            .map(|e| e["text"].as_str().expect("a delta has text"))
            .collect();
        assert!(
            streamed == chunks.concat(),
            "{framing:?}: the streamed text differs"
        );
        assert!(t.stdout_errors().is_empty(), "{:?}", t.stdout_errors());
        t.shutdown().await;
    }
}

/// Some clients hand one socket to the server as both stdin and stdout. Making stdout
/// non-blocking would then make stdin non-blocking too (the flag belongs to the open file) and
/// the server's first read would fail; it must notice and keep that socket blocking.
#[test]
fn one_socket_as_both_stdin_and_stdout_keeps_working() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;
    use std::process::{Command, Stdio};

    let data = tempfile::tempdir().expect("data dir");
    let ws = workspace();
    let (ours, theirs) = UnixStream::pair().expect("a socket pair");
    let theirs_too = theirs.try_clone().expect("dup");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tandem"))
        .arg("serve")
        .arg("--data-dir")
        .arg(data.path())
        .env_remove("TANDEM_CONFIG")
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::from(OwnedFd::from(theirs_too)))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn tandem");
    // The moment that matters is the server's first read finding nothing to read: a
    // non-blocking stdin fails it with EAGAIN and the server ends. So wait until a thread of the
    // server sits in read(0, …) (its /proc syscall line), or it has exited.
    let deadline = std::time::Instant::now() + wait_timeout();
    loop {
        if let Some(status) = child.try_wait().expect("poll the child") {
            panic!("tandem exited before the client sent anything: {status}");
        }
        if blocked_reading_stdin(child.id()) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "tandem never blocked reading its stdin"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    ours.set_read_timeout(Some(wait_timeout()))
        .expect("read timeout");
    let mut writer = ours.try_clone().expect("dup");
    let mut reader = BufReader::new(ours);
    let mut call = |id: u64, method: &str, params: Value| -> Value {
        let mut line = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            line["params"] = params;
        }
        writeln!(writer, "{line}").expect("write a request");
        loop {
            let mut reply = String::new();
            let n = reader
                .read_line(&mut reply)
                .expect("a reply before the timeout");
            assert!(n > 0, "tandem closed the socket while {method} was open");
            let reply: Value = serde_json::from_str(&reply).expect("a JSON line");
            if reply["id"] == id {
                return reply;
            }
        }
    };
    let init = call(1, "initialize", json!({"protocolVersion": 1}));
    assert!(init["result"]["protocolVersion"] == 1, "{init}");
    let created = call(2, "session/new", json!({"cwd": ws.path()}));
    assert!(created["result"]["sessionId"].is_string(), "{created}");
    let listed = call(3, "session/list", json!({}));
    assert_eq!(
        listed["result"]["sessions"].as_array().map(Vec::len),
        // A session nobody prompted yet is not listed.
        Some(0),
        "{listed}"
    );
    let _ = call(4, "shutdown", Value::Null);
    let status = child.wait().expect("tandem exits after shutdown");
    assert!(status.success(), "{status}");
}

/// Whether a thread of `pid` is blocked in `read` on fd 0 (syscall 0, first argument 0).
fn blocked_reading_stdin(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("syscall"))
            .is_ok_and(|line| line.starts_with("0 0x0 "))
    })
}

/// Process ids of live processes whose command line contains `needle`.
fn processes_running(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) && !cmdline.contains("cargo") {
            found.push(pid);
        }
    }
    found
}

#[tokio::test]
async fn end_of_stdin_exits_within_a_second_from_every_state_and_kills_running_commands() {
    // Three sessions in one server: one runs a long command, one waits on an approval, one
    // is in the middle of a streamed answer. Closing stdin must end all three, kill the
    // command and exit promptly (the contract is one second; the margin is for a loaded CI
    // machine), never wait for the command to finish.
    let sleeper = "sleep 31.4417";
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let gate = Gate::new();
    let mock = MockLlm::start().await;
    let t = Tandem::start(&mock).await;

    let running = t.new_session_in(ws.path(), "fullAuto").await;
    mock.push(Script::tool_call_reply(
        "long",
        "shell",
        json!({"command": format!("echo started; {sleeper}")}),
    ));
    t.prompt(&running, "run it").await;
    t.wait_event(&running, |e| {
        e["type"] == "toolCallUpdate" && e["output"].as_str().is_some_and(|o| o.contains("started"))
    })
    .await;

    let asking = t.new_session(ws.path()).await;
    mock.push(Script::tool_call_reply(
        "w",
        "write_file",
        json!({"path": "a.txt", "content": "beta\n"}),
    ));
    t.prompt(&asking, "write it").await;
    t.wait_approval(&asking).await;

    let streaming = t.new_session(ws.path()).await;
    mock.push(Script::new().role().text("partial").wait_for(&gate).done());
    t.prompt(&streaming, "talk").await;
    gate.wait_reached().await;

    assert!(
        !processes_running(sleeper).is_empty(),
        "the long command runs before stdin closes"
    );
    t.close_stdin().await;
    let started = std::time::Instant::now();
    let status = t.wait_exit().await;
    let took = started.elapsed();
    assert!(status.success(), "exit status {status:?}");
    assert!(
        took < std::time::Duration::from_secs(2),
        "tandem took {took:?} to exit after stdin closed"
    );
    assert_eq!(
        processes_running(sleeper),
        Vec::<u32>::new(),
        "the command died with tandem"
    );
    for sid in [&running, &asking, &streaming] {
        let ended = t.events_of_type(sid, "turnEnded");
        assert_eq!(ended.len(), 1, "{sid} ended once: {ended:?}");
        assert_eq!(ended[0]["reason"], "interrupted", "{sid}");
    }
    gate.open();
    // The file the unanswered approval proposed was never written.
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "alpha\n"
    );
}
