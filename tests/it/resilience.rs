//! Provider faults and context limits through the real binary: bounded retries with backoff,
//! Retry-After, mid-stream disconnects without duplicated text, idle stalls, `retry` after a
//! failed turn, compaction (automatic, forced by an overflow error, bounded), and continuation
//! after an output-length cut.

use crate::support::*;
use serde_json::{json, Value};

/// Fast retries so the tests spend no time in backoff.
const FAST: &str = "retry_base_delay_ms = 1\nretry_max_delay_ms = 5";

fn tiny_model(config: String) -> String {
    format!("{config}\n[models.tiny]\nprovider = \"local\"\nname = \"tiny-model\"\ncontext_window = 4000\n")
}

fn overflow() -> Script {
    Script::new().step(Step::HttpError {
        status: 400,
        body: json!({"error": {"code": "context_length_exceeded", "message": "This model's maximum context length is 4000 tokens."}}).to_string(),
        retry_after: None,
    })
}

fn delta_text(t: &Tandem, sid: &str, turn: &str) -> String {
    t.events(sid)
        .iter()
        .filter(|e| e["turnId"] == turn && e["type"] == "assistantDelta")
        .map(|e| e["text"].as_str().unwrap().to_owned())
        .collect()
}

async fn start(mock: &MockLlm, prelude: &str) -> Tandem {
    Tandem::start_with(TandemOptions::with_mock(mock).config(config_with(mock, prelude))).await
}

#[tokio::test]
async fn two_server_errors_then_success() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::http_error(500, None));
    mock.push(Script::http_error(503, None));
    mock.push(Script::text_reply("third time lucky"));
    let t = start(&mock, FAST).await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "hi").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    let retries: Vec<String> = t
        .events(&sid)
        .iter()
        .filter(|e| e["type"] == "notice" && e["kind"] == "retrying")
        .map(|e| e["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert!(retries[0].contains("retrying 2/5"), "{}", retries[0]);
    assert!(retries[1].contains("retrying 3/5"), "{}", retries[1]);
    assert!(retries[0].contains("HTTP 500"));
    assert_eq!(delta_text(&t, &sid, &turn), "third time lucky");
    assert_eq!(mock.requests().len(), 3);
    t.shutdown().await;
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::http_error(400, None));
    let t = start(&mock, FAST).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "hi").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "error");
    assert_eq!(ended["error"]["retriable"], false);
    assert_eq!(mock.requests().len(), 1);
    t.shutdown().await;
}

#[tokio::test]
async fn persistent_failure_then_retry_after_a_model_switch() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::http_error(500, None));
    mock.push(Script::http_error(500, None));
    let t = start(&mock, &format!("{FAST}\nprovider_max_attempts = 2")).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "hi").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "error");
    assert_eq!(ended["error"]["retriable"], true);
    // Switching model and then retrying is the intended recovery.
    t.switch_model(&sid, "mock-2").await;
    mock.push(Script::text_reply("recovered"));
    let retried = t.request_ok("retry", json!({"sessionId": sid})).await;
    let turn = retried["turnId"].as_str().unwrap().to_owned();
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    assert_eq!(delta_text(&t, &sid, &turn), "recovered");
    let request = mock.request(2);
    assert_eq!(request["model"], "mock-model-2");
    let users = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .count();
    assert_eq!(users, 1, "retry adds no user message");
    let err = t.request_err("retry", json!({"sessionId": sid})).await;
    assert_eq!(err.kind, "retryUnavailable");
    t.shutdown().await;
}

#[tokio::test]
async fn rate_limit_honours_retry_after() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::http_error(429, Some(1)));
    mock.push(Script::text_reply("ok"));
    let t = start(&mock, FAST).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "hi").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    let notice = t
        .find_event(&sid, |e| e["type"] == "notice" && e["kind"] == "retrying")
        .unwrap();
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.contains("HTTP 429") && text.contains("in 1.0 s"),
        "{text}"
    );
    t.shutdown().await;
}

#[tokio::test]
async fn mid_stream_disconnect_is_retried_without_duplicated_text() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::new().role().text("Hello ").text("wor").disconnect());
    mock.push(
        Script::new()
            .role()
            .text("Hello ")
            .text("world!")
            .finish("stop")
            .done(),
    );
    let t = start(&mock, FAST).await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "greet").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    assert_eq!(delta_text(&t, &sid, &turn), "Hello world!");
    let messages = t.events_of_type(&sid, "assistantMessage");
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["text"], "Hello world!");
    t.shutdown().await;
}

#[tokio::test]
async fn an_idle_stream_is_retried() {
    let ws = workspace();
    let stall = Gate::new();
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .role()
            .text("thinking")
            .wait_for(&stall)
            .done(),
    );
    mock.push(Script::text_reply("thinking harder"));
    let t = start(&mock, &format!("{FAST}\nstream_idle_timeout_ms = 300")).await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "hi").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    let notice = t
        .find_event(&sid, |e| e["type"] == "notice" && e["kind"] == "retrying")
        .unwrap();
    assert!(notice["text"].as_str().unwrap().contains("sent nothing"));
    assert_eq!(delta_text(&t, &sid, &turn), "thinking harder");
    stall.open();
    t.shutdown().await;
}

#[tokio::test]
async fn stop_during_backoff_ends_at_once() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::http_error(500, None));
    let t = start(
        &mock,
        "retry_base_delay_ms = 600000\nretry_max_delay_ms = 600000",
    )
    .await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "hi").await;
    t.wait_event(&sid, |e| e["type"] == "notice" && e["kind"] == "retrying")
        .await;
    assert!(t.stop(&sid).await);
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "interrupted");
    assert_eq!(mock.requests().len(), 1);
    t.shutdown().await;
}

#[tokio::test]
async fn a_length_cut_continues_with_a_prompt_that_is_never_persisted() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .role()
            .text("part one, ")
            .finish("length")
            .done(),
    );
    mock.push(Script::new().role().text("part two.").finish("stop").done());
    mock.push(Script::text_reply("next turn"));
    let t = start(&mock, FAST).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "write a lot").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    let second = mock.request(1).to_string();
    assert!(second.contains("cut off at the output limit"));
    assert!(second.contains("part one, "));
    t.prompt(&sid, "again").await;
    t.wait_turn_ended(&sid).await;
    let third = mock.request(2).to_string();
    assert!(
        !third.contains("cut off at the output limit"),
        "continuation prompt persisted"
    );
    assert!(third.contains("part one, ") && third.contains("part two."));
    t.shutdown().await;
}

#[tokio::test]
async fn an_overflow_error_forces_compaction_and_a_retry() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("first answer about the parser"));
    let t = start(&mock, FAST).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "explain the parser in detail").await;
    t.wait_turn_ended(&sid).await;
    mock.push(overflow());
    mock.push(Script::text_reply(
        "SUMMARY: the user asked about the parser.",
    ));
    mock.push(Script::text_reply("second answer"));
    t.prompt(&sid, "now the lexer").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    assert!(!t.events_of_type(&sid, "compacting").is_empty());
    let compacted = t.events_of_type(&sid, "compacted");
    assert_eq!(
        compacted[0]["summary"],
        "SUMMARY: the user asked about the parser."
    );
    let summarize = mock.request(2);
    assert!(summarize["tools"].is_null(), "the summarizer gets no tools");
    assert!(summarize
        .to_string()
        .contains("explain the parser in detail"));
    let after = mock.request(3);
    let text = after.to_string();
    assert!(text.contains("<compacted-history>"));
    assert!(text.contains("SUMMARY: the user asked about the parser."));
    assert!(
        !text.contains("explain the parser in detail"),
        "the prefix is summarized"
    );
    assert!(text.contains("now the lexer"), "recent turns stay verbatim");
    t.shutdown().await;
}

#[tokio::test]
async fn compaction_that_cannot_move_forward_gives_up_with_advice() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(overflow());
    let t = start(&mock, FAST).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "a single huge prompt").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "contextExceeded");
    let message = ended["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("new session") && message.contains("larger context window"),
        "{message}"
    );
    t.shutdown().await;
}

#[tokio::test]
async fn usage_near_the_window_compacts_automatically_and_rapid_refills_are_bounded() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    // Every answer reports a prompt of 3,900 tokens against a 4,000-token window, so each
    // batch fills the context again: compactions 2..5 are rapid refills, and the 4th refill
    // ends the turn.
    for i in 0..5 {
        mock.push(
            Script::new()
                .role()
                .tool_call(
                    format!("r{i}"),
                    "read_file",
                    json!({"path": "a.txt"}).to_string(),
                )
                .finish("tool_calls")
                .usage(3_900, 10)
                .done(),
        );
        mock.push(Script::text_reply(&format!("summary number {i}")));
    }
    let t = Tandem::start_with(
        TandemOptions::with_mock(&mock).config(tiny_model(config_with(&mock, FAST))),
    )
    .await;
    let sid = t
        .new_session_with(ws.path(), json!({"model": "tiny"}))
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    t.prompt(&sid, "read it").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "contextExceeded", "{ended}");
    assert!(
        ended["error"]["message"]
            .as_str()
            .unwrap()
            .contains("3 compactions"),
        "{ended}"
    );
    assert_eq!(t.events_of_type(&sid, "compacted").len(), 4);
    let requests: Vec<Value> = mock.requests();
    assert_eq!(requests.len(), 9);
    // After the first compaction the main request carries the summary, not the old batch.
    let text = requests[2].to_string();
    assert!(text.contains("summary number 0"));
    for r in &requests {
        let messages = r["messages"].as_array().unwrap();
        for (i, m) in messages.iter().enumerate() {
            for call in m["tool_calls"].as_array().into_iter().flatten() {
                assert!(
                    messages[i + 1..]
                        .iter()
                        .any(|l| l["role"] == "tool" && l["tool_call_id"] == call["id"]),
                    "compaction split a tool call from its result: {r}"
                );
            }
        }
    }
    t.shutdown().await;
}

/// A provider answer that is not an event stream (a proxy's HTML page, a JSON body) is a clear,
/// non-retriable error that says what came back and points at `base_url`; an event over the cap
/// (a body with no event boundary) is one too, naming the cap, and is never held whole.
#[tokio::test]
async fn bodies_that_are_not_event_streams_end_the_turn_with_what_came_back() {
    let huge = format!("data: {}", "x".repeat(17 * 1024 * 1024));
    let cases = [
        (
            Script::plain(
                200,
                "text/html; charset=utf-8",
                "<html><body>Sign in to the proxy</body></html>",
            ),
            vec!["text/html", "Sign in to the proxy", "base_url"],
        ),
        (
            Script::plain(200, "application/json", r#"{"id":"x","choices":[]}"#),
            vec!["application/json", "choices", "base_url"],
        ),
        (
            Script::new().raw(huge),
            vec!["larger than 16 MiB", "cap on one event"],
        ),
        (
            Script::new().raw("data: <html>not json</html>\n\n"),
            vec!["not JSON", "<html>not json</html>", "base_url"],
        ),
    ];
    for (script, says) in cases {
        let ws = workspace();
        let mock = MockLlm::start().await;
        mock.push(script);
        let t = Tandem::start(&mock).await;
        let sid = t.new_session(ws.path()).await;
        t.prompt(&sid, "hello").await;
        let ended = t.wait_turn_ended(&sid).await;
        assert_eq!(ended["reason"], "error", "{ended}");
        assert_eq!(ended["error"]["retriable"], false, "{ended}");
        let message = ended["error"]["message"].as_str().unwrap();
        for word in &says {
            assert!(message.contains(word), "`{word}` missing from: {message}");
        }
        assert_eq!(mock.requests().len(), 1, "not retried: {message}");
        t.shutdown().await;
    }
}

/// A model with a 20,000-token window: room for the fixed part (system prompt and tools, about
/// 2,400 tokens by tandem's estimate) and a batch, small enough to overflow with a few files.
fn small_model(config: String) -> String {
    format!("{config}\n[models.small]\nprovider = \"local\"\nname = \"small-model\"\ncontext_window = 20000\n")
}

async fn start_small(mock: &MockLlm, ws: &std::path::Path) -> (Tandem, String) {
    let t = Tandem::start_with(
        TandemOptions::with_mock(mock).config(small_model(config_with(mock, FAST))),
    )
    .await;
    let sid = t.new_session_with(ws, json!({"model": "small"})).await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    (t, sid)
}

const WINDOW: usize = 20_000;

/// Sixteen reads whose results alone are several times the window: each result is cut to its
/// share with a note saying how to read the rest, so the next request fits without any
/// compaction (the red team saw a compaction that freed nothing and then a request five times
/// the window).
#[tokio::test]
async fn one_tool_batch_larger_than_the_window_is_cut_to_fit_before_any_compaction() {
    let ws = workspace();
    let mut calls = Vec::new();
    for i in 0..16 {
        let name = format!("f{i}.txt");
        let line = format!("file {i} line of text that the model asked to read\n");
        std::fs::write(ws.path().join(&name), line.repeat(120)).unwrap();
        calls.push((
            format!("r{i}"),
            "read_file".to_owned(),
            json!({"path": name}).to_string(),
        ));
    }
    let mock = MockLlm::start().await;
    mock.push(Script::tool_calls(calls));
    mock.push(Script::text_reply("read them"));
    let (t, sid) = start_small(&mock, ws.path()).await;
    t.prompt(&sid, "read every file").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed", "{ended}");
    assert!(t.events_of_type(&sid, "compacting").is_empty());
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let results: Vec<String> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(results.len(), 16);
    for (i, result) in results.iter().enumerate() {
        assert!(
            result.contains(&format!("file {i} line")),
            "the start of the result is kept: {result}"
        );
        assert!(
            result.contains("tandem cut this result to fit the model's context window")
                && result.contains("read_file with offset and limit"),
            "{result}"
        );
    }
    // By tandem's own estimate (four bytes a token) the request fits the window.
    let request_bytes = requests[1].to_string().len();
    assert!(
        request_bytes / 4 < WINDOW,
        "the request after the batch is about {} tokens",
        request_bytes / 4
    );
    // The store and the client hold the same cut result the model got.
    let shown = t.events_of_type(&sid, "toolCallUpdate");
    let shown_r0 = shown
        .iter()
        .find(|e| e["toolCallId"] == "r0" && e["result"].is_string())
        .unwrap();
    assert_eq!(shown_r0["result"].as_str().unwrap(), results[0]);
    t.shutdown().await;
}

/// A compaction that could not make room is not attempted, and nothing goes out above the window:
/// the model's call carried 100 KB of arguments (25,000 tokens), which compaction must keep
/// verbatim with its result.
#[tokio::test]
async fn a_compaction_that_cannot_free_enough_ends_the_turn_without_sending_anything() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "big",
        "read_file",
        json!({"path": "a.txt", "why": "x".repeat(100_000)}),
    ));
    mock.push(Script::text_reply("a summary"));
    mock.push(Script::text_reply("never asked"));
    let (t, sid) = start_small(&mock, ws.path()).await;
    t.prompt(&sid, "read it").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "contextExceeded", "{ended}");
    let message = ended["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("most recent messages") && message.contains("start a new session"),
        "{message}"
    );
    assert_eq!(mock.requests().len(), 1, "no summarizing or main request");
    t.shutdown().await;
}

/// A summary too long to make the next request fit ends the turn instead of sending it.
#[tokio::test]
async fn a_summary_that_leaves_the_request_above_the_window_ends_the_turn() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    // The provider reports 19,000 prompt tokens: the next request must compact.
    mock.push(
        Script::new()
            .role()
            .tool_call("r", "read_file", json!({"path": "a.txt"}).to_string())
            .finish("tool_calls")
            .usage(19_000, 10)
            .done(),
    );
    mock.push(Script::text_reply(&"summary ".repeat(12_000)));
    mock.push(Script::text_reply("never asked"));
    let (t, sid) = start_small(&mock, ws.path()).await;
    t.prompt(&sid, "read it").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "contextExceeded", "{ended}");
    assert!(
        ended["error"]["message"]
            .as_str()
            .unwrap()
            .contains("after compacting"),
        "{ended}"
    );
    assert_eq!(mock.requests().len(), 2, "the main request never went out");
    t.shutdown().await;
}

/// Earlier messages too large for one summarizing request are not sent to be summarized: a
/// first prompt of about 22,000 tokens could not be answered, and the next turn cannot
/// compact it either.
#[tokio::test]
async fn a_summarizing_request_above_the_window_is_never_sent() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("a summary"));
    mock.push(Script::text_reply("never asked"));
    let (t, sid) = start_small(&mock, ws.path()).await;
    t.prompt(&sid, &"word ".repeat(18_000)).await;
    let first = t.wait_turn_ended(&sid).await;
    assert_eq!(first["reason"], "contextExceeded", "{first}");
    t.prompt(&sid, "hi").await;
    let second = t.wait_turn_ended(&sid).await;
    assert_eq!(second["reason"], "contextExceeded", "{second}");
    assert!(
        second["error"]["message"]
            .as_str()
            .unwrap()
            .contains("earlier messages to summarize"),
        "{second}"
    );
    assert_eq!(mock.requests().len(), 0);
    t.shutdown().await;
}

/// A request body goes out with its exact `Content-Length` (never chunked: some
/// OpenAI-compatible servers refuse chunked requests) and its conversation last; a base URL
/// that redirects is a clear, non-retriable error naming where it points, since a body streamed
/// from shared pieces is not sent twice.
#[tokio::test]
async fn a_request_has_its_length_and_a_redirect_names_where_it_points() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut seen = Vec::new();
        let mut buffer = [0u8; 65536];
        let head_end = loop {
            let n = socket.read(&mut buffer).await.unwrap();
            assert!(n > 0, "the connection closed before the request head ended");
            seen.extend_from_slice(&buffer[..n]);
            if let Some(at) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
        };
        let head = String::from_utf8_lossy(&seen[..head_end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .expect("no content-length header")
            .trim()
            .parse()
            .unwrap();
        while seen.len() < head_end + length {
            let n = socket.read(&mut buffer).await.unwrap();
            assert!(n > 0, "the body ended before its content-length");
            seen.extend_from_slice(&buffer[..n]);
        }
        socket
            .write_all(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: https://elsewhere.example/v1/chat/completions\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        (head, seen[head_end..].to_vec())
    });
    let config = format!(
        "default_model = \"m\"\nprovider_max_attempts = 1\n\n[providers.local]\nkind = \"openai\"\nbase_url = \"{base}\"\n\n[models.m]\nprovider = \"local\"\nname = \"m\"\ncontext_window = 128000\n"
    );
    let ws = workspace();
    let t = Tandem::start_with(TandemOptions::new().config(config)).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "hello").await;
    let ended = t.wait_turn_ended(&sid).await;
    let (head, body) = server.await.unwrap();
    assert!(!head.contains("transfer-encoding"), "{head}");
    let text = String::from_utf8(body).unwrap();
    let parsed: Value =
        serde_json::from_str(&text).expect("the body is the announced length of JSON");
    assert_eq!(parsed["model"], "m");
    // The conversation is the last field, after the tools, as sent.
    let messages_at = text.find("\"messages\":[").unwrap();
    assert!(text.find("\"tools\":[").unwrap() < messages_at, "{text}");
    assert!(text.ends_with("]}"), "{text}");
    assert_eq!(ended["reason"], "error", "{ended}");
    assert_eq!(ended["error"]["retriable"], false, "{ended}");
    let message = ended["error"]["message"].as_str().unwrap();
    for word in [
        "307",
        "https://elsewhere.example/v1/chat/completions",
        "base_url",
    ] {
        assert!(message.contains(word), "`{word}` missing from: {message}");
    }
    t.shutdown().await;
}
