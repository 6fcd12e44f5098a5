//! Self-tests of the test harness: the mock LLM spoken to with a real HTTP client (reqwest),
//! and the stdout frame reader, so a failing acceptance test can be trusted to be the server's
//! fault. None of these start the tandem binary.

use std::time::Duration;

use crate::support::{read_message, Framing, Gate, MockLlm, Script, Step, HELPER_USAGE};
use futures_util::StreamExt;
use serde_json::{json, Value};

fn client() -> reqwest::Client {
    // No proxy: the mock is on loopback and an outer proxy setting must not interfere.
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn chat_body() -> Value {
    json!({
        "model": "mock-model",
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "hi"}],
    })
}

async fn post(mock: &MockLlm, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{}/chat/completions", mock.base_url()))
        .json(body)
        .send()
        .await
        .expect("POST to mock")
}

/// Splits an SSE body into its `data:` payloads.
fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("SSE event without data: {e:?}"))
                .to_string()
        })
        .collect()
}

/// Parses all chunks before `[DONE]`, checking the common chunk envelope.
fn chunks(body: &str) -> Vec<Value> {
    let data = sse_data(body);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{body}");
    data[..data.len() - 1]
        .iter()
        .map(|d| {
            let v: Value = serde_json::from_str(d).expect("chunk is JSON");
            assert_eq!(v["object"], "chat.completion.chunk");
            assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
            assert!(v["created"].as_u64().is_some());
            assert_eq!(v["model"], "mock-model");
            assert!(v["choices"].is_array());
            v
        })
        .collect()
}

#[tokio::test]
async fn text_reply_streams_real_chunk_shapes() {
    let mock = MockLlm::start().await;
    assert!(mock.base_url().starts_with("http://127.0.0.1:"));
    assert!(mock.base_url().ends_with("/v1"));
    mock.push(Script::text_reply("hello"));

    let resp = post(&mock, &chat_body()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.headers()["connection"], "close");
    assert!(resp.headers().get("content-length").is_none());
    let body = resp.text().await.unwrap();
    let cs = chunks(&body);

    // Role chunk first, as real servers send it.
    assert_eq!(cs[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = cs
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "hello");
    let pieces = cs
        .iter()
        .filter(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        })
        .count();
    assert_eq!(pieces, 2, "text is split in two chunks");
    for c in cs
        .iter()
        .filter(|c| c["choices"][0]["delta"]["content"].is_string())
    {
        assert_eq!(c["choices"][0]["index"], 0);
        assert!(c["choices"][0]["finish_reason"].is_null());
    }
    let finishes: Vec<&Value> = cs
        .iter()
        .filter(|c| !c["choices"][0]["finish_reason"].is_null())
        .collect();
    assert_eq!(finishes.len(), 1);
    assert_eq!(finishes[0]["choices"][0]["finish_reason"], "stop");

    let usage = cs.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], HELPER_USAGE.0);
    assert_eq!(usage["usage"]["completion_tokens"], HELPER_USAGE.1);

    assert_eq!(mock.requests(), vec![chat_body()]);
    mock.wait_for_settled(1).await;
    assert_eq!(mock.cancelled_count(), 0);
}

#[tokio::test]
async fn tool_call_arguments_reassemble_into_json() {
    let mock = MockLlm::start().await;
    let args_a = json!({"path": "src/main.rs", "offset": 1, "note": "ünïcødé ✓"}).to_string();
    let args_b = json!({"command": "cargo test", "timeout_ms": 5000}).to_string();
    mock.push(Script::tool_calls(vec![
        ("call_a", "read_file", args_a.as_str()),
        ("call_b", "shell", args_b.as_str()),
    ]));

    let body = post(&mock, &chat_body()).await.text().await.unwrap();
    let cs = chunks(&body);

    // Reassemble the way an OpenAI client must: by index, concatenating arguments.
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut pieces = [0usize; 2];
    for c in &cs {
        let Some(tcs) = c["choices"][0]["delta"]["tool_calls"].as_array() else {
            continue;
        };
        for tc in tcs {
            let i = tc["index"].as_u64().unwrap() as usize;
            if let Some(id) = tc["id"].as_str() {
                assert_eq!(tc["type"], "function");
                assert_eq!(
                    tc["function"]["arguments"], "",
                    "first chunk has empty arguments"
                );
                assert_eq!(calls.len(), i, "indexes are assigned in order");
                calls.push((
                    id.to_string(),
                    tc["function"]["name"].as_str().unwrap().to_string(),
                    String::new(),
                ));
            } else {
                assert!(tc["function"].get("name").is_none());
                calls[i]
                    .2
                    .push_str(tc["function"]["arguments"].as_str().unwrap());
                pieces[i] += 1;
            }
        }
    }
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].0.as_str(), calls[0].1.as_str()),
        ("call_a", "read_file")
    );
    assert_eq!(
        (calls[1].0.as_str(), calls[1].1.as_str()),
        ("call_b", "shell")
    );
    let a: Value = serde_json::from_str(&calls[0].2).unwrap();
    let b: Value = serde_json::from_str(&calls[1].2).unwrap();
    assert_eq!(a, serde_json::from_str::<Value>(&args_a).unwrap());
    assert_eq!(b, serde_json::from_str::<Value>(&args_b).unwrap());
    assert_eq!(pieces, [3, 3], "arguments arrive in three pieces each");

    let finish = cs
        .iter()
        .find(|c| !c["choices"][0]["finish_reason"].is_null())
        .unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn custom_steps_reasoning_and_cached_usage() {
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .role()
            .reasoning("think")
            .text("answer")
            .finish("length")
            .step(Step::UsageCached {
                prompt: 100,
                completion: 20,
                cached: 64,
            })
            .done(),
    );
    let body = post(&mock, &chat_body()).await.text().await.unwrap();
    let cs = chunks(&body);
    assert_eq!(cs[1]["choices"][0]["delta"]["reasoning_content"], "think");
    assert_eq!(cs[2]["choices"][0]["delta"]["content"], "answer");
    assert_eq!(cs[3]["choices"][0]["finish_reason"], "length");
    assert_eq!(cs[4]["usage"]["prompt_tokens_details"]["cached_tokens"], 64);
    assert_eq!(cs[4]["usage"]["total_tokens"], 120);
}

#[tokio::test]
async fn requests_are_recorded_and_scripts_are_fifo() {
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("first"));
    mock.push(Script::text_reply("second"));

    // A request sent from another task: wait_for_requests must wake up for it.
    let url = format!("{}/chat/completions", mock.base_url());
    let bg = tokio::spawn(async move {
        client()
            .post(url)
            .header("Authorization", "Bearer sk-test")
            .json(&json!({"model": "mock-model", "n": 1}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    let reqs = mock.wait_for_requests(1).await;
    assert_eq!(reqs[0]["n"], 1);
    let first = bg.await.unwrap();

    let second = post(&mock, &json!({"model": "mock-model", "n": 2}))
        .await
        .text()
        .await
        .unwrap();
    let text = |b: &str| -> String {
        chunks(b)
            .iter()
            .filter_map(|c| {
                c["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(String::from)
            })
            .collect()
    };
    assert_eq!(text(&first), "first");
    assert_eq!(text(&second), "second");

    let rec = mock.recorded();
    assert_eq!(rec.len(), 2);
    assert_eq!(rec[0].method, "POST");
    assert_eq!(rec[0].path, "/v1/chat/completions");
    assert_eq!(rec[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(mock.request(1)["n"], 2);
    assert_eq!(mock.pending_scripts(), 0);
}

#[tokio::test]
async fn chunked_request_bodies_are_read() {
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("ok"));
    let body = chat_body().to_string().into_bytes();
    let (a, b) = body.split_at(body.len() / 2);
    let parts: Vec<Result<Vec<u8>, std::io::Error>> = vec![Ok(a.to_vec()), Ok(b.to_vec())];
    // A streamed body has no known length, so reqwest sends Transfer-Encoding: chunked.
    let resp = client()
        .post(format!("{}/chat/completions", mock.base_url()))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            parts,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap();
    let rec = mock.recorded();
    assert_eq!(rec[0].header("transfer-encoding"), Some("chunked"));
    assert_eq!(rec[0].body, chat_body());
}

#[tokio::test]
async fn gate_holds_the_stream_until_opened() {
    let mock = MockLlm::start().await;
    let gate = Gate::new();
    mock.push(
        Script::new()
            .role()
            .text("before")
            .wait_for(&gate)
            .text("after")
            .finish("stop")
            .done(),
    );
    let resp = post(&mock, &chat_body()).await;
    let mut stream = resp.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("before") {
        let chunk = stream.next().await.expect("stream ended early").unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    gate.wait_reached().await;
    assert_eq!(gate.reached_count(), 1);
    // Proving that nothing arrives needs a bounded wait; the mock is known to be paused.
    let held = tokio::time::timeout(Duration::from_millis(300), stream.next()).await;
    assert!(
        held.is_err(),
        "data arrived through a closed gate: {held:?}"
    );
    assert!(!seen.contains("after"));

    gate.open();
    while let Some(chunk) = stream.next().await {
        seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(seen.contains("after"));
    assert!(seen.ends_with("data: [DONE]\n\n"));
    mock.wait_for_settled(1).await;
    assert_eq!(mock.cancelled_count(), 0);
}

#[tokio::test]
async fn head_gate_withholds_the_response_head() {
    let mock = MockLlm::start().await;
    let gate = Gate::new();
    mock.push(Script::text_reply("x").hold_head_until(&gate));
    let send = tokio::spawn(post_owned(mock.base_url()));
    gate.wait_reached().await;
    assert!(!send.is_finished());
    gate.open();
    let body = send.await.unwrap();
    assert!(body.contains("[DONE]"));
}

async fn post_owned(base: String) -> String {
    client()
        .post(format!("{base}/chat/completions"))
        .json(&chat_body())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn empty_queue_answers_500_loudly() {
    let mock = MockLlm::start().await;
    let resp = post(&mock, &chat_body()).await;
    assert_eq!(resp.status(), 500);
    let v: Value = resp.json().await.unwrap();
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("mock LLM has no scripted response left"),
        "{msg}"
    );
    assert_eq!(
        mock.requests().len(),
        1,
        "unscripted requests are recorded too"
    );
    assert!(!mock.recorded()[0].scripted);
}

#[tokio::test]
async fn http_error_sets_status_body_and_retry_after() {
    let mock = MockLlm::start().await;
    mock.push(Script::http_error(429, Some(7)));
    mock.push(Script::new().step(Step::HttpError {
        status: 503,
        body: "{\"error\":{\"message\":\"overloaded\"}}".into(),
        retry_after: None,
    }));

    let resp = post(&mock, &chat_body()).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "7");
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "rate_limit_error");

    let resp = post(&mock, &chat_body()).await;
    assert_eq!(resp.status(), 503);
    assert!(resp.headers().get("retry-after").is_none());
    assert_eq!(
        resp.text().await.unwrap(),
        "{\"error\":{\"message\":\"overloaded\"}}"
    );
}

#[tokio::test]
#[should_panic(expected = "HttpError must be the first step")]
async fn http_error_after_other_steps_is_rejected() {
    let mock = MockLlm::start().await;
    mock.push(Script::new().role().step(Step::HttpError {
        status: 500,
        body: String::new(),
        retry_after: None,
    }));
}

#[tokio::test]
async fn client_hangup_is_counted_as_cancelled() {
    let mock = MockLlm::start().await;
    let gate = Gate::new();
    // Paused before the first token: the case of a stop before anything was seen.
    mock.push(Script::new().wait_for(&gate).text("never").done());
    let resp = post(&mock, &chat_body()).await;
    assert_eq!(resp.status(), 200);
    gate.wait_reached().await;
    drop(resp);
    mock.wait_for_cancelled(1).await;
    assert_eq!(mock.cancelled_count(), 1);
    assert!(mock.recorded()[0].cancelled);
    assert!(!mock.recorded()[0].finished);
}

#[tokio::test]
async fn disconnect_breaks_the_stream_after_what_was_sent() {
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .role()
            .text("partial")
            .disconnect()
            .text("unreachable"),
    );
    let resp = post(&mock, &chat_body()).await;
    let mut stream = resp.bytes_stream();
    let mut seen = String::new();
    let mut error = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(b) => seen.push_str(&String::from_utf8_lossy(&b)),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    assert!(seen.contains("partial"), "{seen:?}");
    assert!(!seen.contains("unreachable"));
    assert!(!seen.contains("[DONE]"));
    assert!(
        error.is_some(),
        "a reset connection is an error, not a clean end"
    );
}

#[tokio::test]
async fn unknown_paths_get_404() {
    let mock = MockLlm::start().await;
    let resp = client()
        .get(format!("{}/models", mock.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn frame_reader_handles_both_framings_and_garbage() {
    let a = json!({"jsonrpc": "2.0", "id": 1, "result": {"x": "é"}});
    let b = json!({"jsonrpc": "2.0", "method": "session/event", "params": {"seq": 1}});
    let mut bytes = Vec::new();
    bytes.extend(format!("{a}\n\n").into_bytes());
    let body = b.to_string();
    bytes.extend(
        format!(
            "Content-Length: {}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    );
    // LSP frames are not newline-terminated: the next frame starts right after the body.
    bytes.extend(format!("content-length: {}\r\n\r\n{a}", a.to_string().len()).into_bytes());
    bytes.extend(b"not json\n");

    let mut r = tokio::io::BufReader::new(&bytes[..]);
    let m1 = read_message(&mut r).await.unwrap().unwrap();
    assert_eq!(m1.0, Framing::Ndjson);
    assert_eq!(m1.1.unwrap(), a);
    let m2 = read_message(&mut r).await.unwrap().unwrap();
    assert_eq!(m2.0, Framing::ContentLength);
    assert_eq!(m2.1.unwrap(), b);
    let m3 = read_message(&mut r).await.unwrap().unwrap();
    assert_eq!(m3.0, Framing::ContentLength);
    assert_eq!(m3.1.unwrap(), a);
    let m4 = read_message(&mut r).await.unwrap().unwrap();
    assert!(m4.1.unwrap_err().contains("not json"));
    assert!(read_message(&mut r).await.unwrap().is_none());
}

#[tokio::test]
async fn frame_writer_matches_reader() {
    let v = json!({"jsonrpc": "2.0", "id": "x", "method": "initialize"});
    for framing in [Framing::Ndjson, Framing::ContentLength] {
        let bytes = crate::support::tandem::frame(framing, v.to_string().as_bytes());
        let mut r = tokio::io::BufReader::new(&bytes[..]);
        let (f, m) = read_message(&mut r).await.unwrap().unwrap();
        assert_eq!(f, framing);
        assert_eq!(m.unwrap(), v);
    }
}
