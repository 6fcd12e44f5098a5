//! The `tandem-mock-llm` binary itself, as the editor suites use it: a real process, a real
//! socket, the port on its first stdout line, a script file streamed as chat-completions SSE,
//! the request log, the control endpoints (enqueue, gates, the long-polled request list) and a
//! bad script refused at start with its place named.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic with its message is the failure report"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

/// A running `tandem-mock-llm`, killed when dropped.
struct Cli {
    child: Child,
    port: u16,
}

impl Drop for Cli {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tandem-mock-llm"));
    command.args(args).stdin(Stdio::null());
    command
}

/// Starts the binary and reads the port from its first stdout line.
fn start(args: &[&str]) -> Cli {
    start_reading(args).0
}

/// Starts the binary; the rest of its stdout after the port line.
fn start_reading(args: &[&str]) -> (Cli, BufReader<std::process::ChildStdout>) {
    let mut child = command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn tandem-mock-llm");
    let mut line = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut line).expect("read the port line");
    let port = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the first stdout line is the port, got {line:?}"));
    (Cli { child, port }, stdout)
}

/// One HTTP/1.1 request on its own connection; (status, body) once the server closes it.
fn http(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the mock");
    // A stream that never ends (a gate never opened) fails the test instead of hanging it.
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(15)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer test-key\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("read the answer");
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {response:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    (status, body.to_owned())
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// The `data:` payloads of an SSE body, in order.
fn data_lines(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(str::to_owned)
        .collect()
}

const CHAT: &str = "/v1/chat/completions";

fn chat_body(text: &str) -> String {
    json!({"model": "mock-model", "stream": true, "messages": [{"role": "user", "content": text}]})
        .to_string()
}

#[test]
fn a_script_file_streams_as_chat_completions_and_every_request_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    let log = dir.path().join("requests.jsonl");
    std::fs::write(
        &script,
        json!([
            [{"text": "hello there"}, {"reasoning": "hmm"},
             {"tool_call": {"name": "read_file", "arguments": {"path": "a.txt"}}}],
            {"status": 503},
        ])
        .to_string(),
    )
    .unwrap();
    let cli = start(&[
        "--script",
        script.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
    ]);

    let (status, body) = http(cli.port, "POST", CHAT, &chat_body("first"));
    assert_eq!(status, 200, "{body}");
    let data = data_lines(&body);
    let chunks: Vec<Value> = data[..data.len() - 1].iter().map(|d| json_of(d)).collect();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let deltas: Vec<&Value> = chunks.iter().map(|c| &c["choices"][0]["delta"]).collect();
    assert_eq!(deltas[0]["role"], "assistant", "a role chunk first");
    let text: String = deltas
        .iter()
        .filter_map(|d| d["content"].as_str())
        .collect();
    assert_eq!(text, "hello there");
    assert!(deltas.iter().any(|d| d["reasoning_content"] == "hmm"));
    let call = deltas
        .iter()
        .find_map(|d| d["tool_calls"][0]["id"].as_str())
        .expect("a tool call head");
    assert_eq!(call, "call_1_0", "the default id numbers response and call");
    let arguments: String = deltas
        .iter()
        .filter_map(|d| d["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(json_of(&arguments), json!({"path": "a.txt"}));
    let finish: Vec<&Value> = chunks
        .iter()
        .map(|c| &c["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(
        finish,
        [&json!("tool_calls")],
        "the finish a tool call implies"
    );
    let usage = chunks.iter().find(|c| c["usage"].is_object()).unwrap();
    // 100 + the request's number; one completion token per word of text, plus one.
    assert_eq!(usage["usage"]["prompt_tokens"], 101);
    assert_eq!(usage["usage"]["completion_tokens"], 3);

    let (status, _) = http(cli.port, "POST", CHAT, &chat_body("second"));
    assert_eq!(status, 503, "the second response is an HTTP error");

    let (status, body) = http(cli.port, "POST", CHAT, &chat_body("third"));
    assert_eq!(status, 200);
    assert!(
        body.contains("(mock: no scripted response left)"),
        "an empty queue answers a stream that says so: {body}"
    );

    let logged: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(json_of)
        .collect();
    let prompts: Vec<&Value> = logged
        .iter()
        .map(|b| &b["messages"][0]["content"])
        .collect();
    assert_eq!(
        prompts,
        [&json!("first"), &json!("second"), &json!("third")]
    );

    let (status, body) = http(cli.port, "GET", "/v1/models", "");
    assert_eq!(status, 200);
    assert_eq!(json_of(&body)["data"][1]["id"], "mock-model-2");
}

#[test]
fn enqueue_and_gates_over_the_control_endpoints() {
    let cli = start(&[]);
    let responses = json!([[{"text": "before "}, {"wait": "hold"}, {"text": "after"}]]);
    let (status, body) = http(cli.port, "POST", "/_mock/enqueue", &responses.to_string());
    assert_eq!((status, json_of(&body)["queued"].clone()), (200, json!(1)));

    let port = cli.port;
    let streaming = std::thread::spawn(move || http(port, "POST", CHAT, &chat_body("go")));

    // Await the pause instead of sleeping: the gate long-poll answers once a stream is there.
    let (_, body) = http(
        cli.port,
        "GET",
        "/_mock/gates/hold?min_reached=1&timeout_ms=10000",
        "",
    );
    assert_eq!(json_of(&body), json!({"open": false, "reached": 1}));
    let (_, body) = http(
        cli.port,
        "GET",
        "/_mock/requests?min=1&timeout_ms=10000",
        "",
    );
    let listed = json_of(&body);
    let request = &listed["requests"][0];
    assert_eq!(request["body"]["messages"][0]["content"], "go");
    assert_eq!(request["headers"]["authorization"], "Bearer test-key");
    assert_eq!(request["finished"], false, "still paused at the gate");
    assert_eq!(request["aborted"], false);

    // A long-poll on a newer version waits for the stream to finish once the gate opens.
    let version = listed["version"].as_u64().unwrap();
    let (status, _) = http(cli.port, "POST", "/_mock/gates/hold/open", "");
    assert_eq!(status, 200);
    let (status, body) = streaming.join().unwrap();
    assert_eq!(status, 200);
    let text: String = data_lines(&body)
        .iter()
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| {
            json_of(d)["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text, "before after");
    let (_, body) = http(
        cli.port,
        "GET",
        &format!("/_mock/requests?changed_since={version}&timeout_ms=10000"),
        "",
    );
    assert_eq!(json_of(&body)["requests"][0]["finished"], true);

    // Draining: what is still queued is dropped and counted, and the next stream finds nothing.
    let leftovers = json!([[{"text": "never taken"}], [{"text": "nor this"}]]);
    let (status, _) = http(cli.port, "POST", "/_mock/enqueue", &leftovers.to_string());
    assert_eq!(status, 200);
    let (status, body) = http(cli.port, "DELETE", "/_mock/queue", "");
    assert_eq!((status, json_of(&body)), (200, json!({"dropped": 2})));
    let (_, body) = http(cli.port, "GET", "/_mock/requests", "");
    assert_eq!(json_of(&body)["queued"], 0);
    let (_, body) = http(cli.port, "POST", CHAT, &chat_body("after the drain"));
    assert!(
        body.contains("(mock: no scripted response left)") && !body.contains("never taken"),
        "{body}"
    );
    let (_, body) = http(cli.port, "DELETE", "/_mock/queue", "");
    assert_eq!(json_of(&body), json!({"dropped": 0}));

    let (status, body) = http(
        cli.port,
        "POST",
        "/_mock/enqueue",
        r#"[[{"txet": "typo"}]]"#,
    );
    assert_eq!(status, 400);
    assert!(
        body.contains("response 0, step 0: unknown step `txet`"),
        "{body}"
    );
}

#[test]
fn a_bad_script_fails_at_start_naming_the_response_and_step() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"[[{"text": "fine"}], [{"text": "x"}, {"bogus": 1}]]"#,
    )
    .unwrap();
    let output = command(&["--script", script.to_str().unwrap()])
        .output()
        .expect("run tandem-mock-llm");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a bad script is an error");
    assert!(
        output.stdout.is_empty(),
        "no port line before the script is read"
    );
    assert!(
        stderr.contains("response 1, step 1: unknown step `bogus`"),
        "{stderr}"
    );
}

#[test]
fn stream_requests_prints_each_record_when_it_arrives_and_when_it_ends() {
    let (cli, mut stdout) = start_reading(&["--stream-requests"]);
    let (status, _) = http(cli.port, "POST", CHAT, &chat_body("recorded"));
    assert_eq!(status, 200);
    let mut next = || {
        let mut line = String::new();
        stdout.read_line(&mut line).expect("a record line");
        json_of(&line)
    };
    let arrived = next();
    assert_eq!(arrived["index"], 0);
    assert_eq!(
        arrived["request"]["body"]["messages"][0]["content"],
        "recorded"
    );
    assert_eq!(
        arrived["request"]["finished"], false,
        "written before the answer"
    );
    let ended = next();
    assert_eq!(
        (ended["index"].clone(), ended["request"]["finished"].clone()),
        (json!(0), json!(true))
    );
}
