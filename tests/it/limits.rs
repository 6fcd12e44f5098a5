//! Caps on what a provider or a client can make tandem hold, through the real binary: one
//! answer's text and reasoning, one tool call's arguments, a client that stops reading, queued
//! steering, and `session/load` replies within the frame cap. Past each cap tandem cuts, says
//! so, and keeps going; nothing it holds or stores grows past what the caps allow.

use crate::support::*;
use serde_json::{json, Value};

async fn start(mock: &MockLlm, prelude: &str) -> Tandem {
    Tandem::start_with(TandemOptions::with_mock(mock).config(config_with(mock, prelude))).await
}

fn database(t: &Tandem) -> rusqlite::Connection {
    rusqlite::Connection::open(t.data_dir().join("tandem.sqlite3")).expect("open the database")
}

/// The largest stored message row of the session, in bytes.
fn largest_row(t: &Tandem, sid: &str) -> usize {
    database(t)
        .query_row(
            "SELECT COALESCE(MAX(LENGTH(json)), 0) FROM messages WHERE session_id = ?1",
            [sid],
            |row| row.get::<_, i64>(0),
        )
        .expect("query the messages") as usize
}

#[tokio::test]
async fn an_answer_past_its_cap_is_cut_and_the_turn_ends_with_an_error_that_names_the_cap() {
    for (kind, key) in [
        ("text", "max_answer_bytes"),
        ("reasoning", "max_reasoning_bytes"),
    ] {
        let ws = workspace();
        let mock = MockLlm::start().await;
        let mut script = Script::new().role();
        // 40 pieces of 10 KB against a cap of 100 KB.
        for i in 0..40 {
            let piece = format!("{i:04}{}", "x".repeat(10_000 - 4));
            script = if kind == "text" {
                script.text(piece)
            } else {
                script.reasoning(piece)
            };
        }
        mock.push(script.finish("stop").done());
        let t = start(&mock, &format!("{key} = 100000")).await;
        let sid = t.new_session(ws.path()).await;
        t.prompt(&sid, "say a lot").await;
        let ended = t.wait_turn_ended(&sid).await;
        assert_eq!(ended["reason"], "error", "{kind}: {ended}");
        let message = ended["error"]["message"].as_str().unwrap();
        assert!(message.contains(key), "{kind}: {message}");
        assert_eq!(ended["error"]["retriable"], false);
        assert_eq!(mock.requests().len(), 1, "{kind}: a cut is not retried");
        // What came before the cap is kept, and nothing past it.
        let loaded = t.load_session(&sid).await;
        let kept: usize = loaded["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .map(|m| {
                m[if kind == "text" { "text" } else { "reasoning" }]
                    .as_str()
                    .map_or(0, str::len)
            })
            .sum();
        assert!(
            (90_000..=100_000).contains(&kept),
            "{kind}: kept {kept} bytes"
        );
        assert!(
            largest_row(&t, &sid) < 110_000,
            "{kind}: the store holds more"
        );
        t.shutdown().await;
    }
}

#[tokio::test]
async fn tool_call_arguments_past_their_cap_fail_that_call_and_the_turn_goes_on() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    let huge = json!({"path": "big.txt", "content": "y".repeat(300_000)}).to_string();
    mock.push(
        Script::new()
            .role()
            .tool_call("r1", "read_file", r#"{"path":"a.txt"}"#)
            .tool_call("w1", "write_file", huge)
            .tool_call("r2", "read_file", r#"{"path":"a.txt"}"#)
            .finish("tool_calls")
            .done(),
    );
    mock.push(Script::text_reply("I will split it"));
    let t = start(&mock, "max_tool_arguments_bytes = 100000").await;
    let sid = t.new_session_in(ws.path(), "fullAuto").await;
    t.prompt(&sid, "write a big file").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed", "{ended}");
    assert!(!ws.path().join("big.txt").exists());
    // The next request pairs the read with its result and the cut call with a tool error; the
    // call after the cut was never complete and is gone with the stream.
    let request = mock.request(1);
    let messages = request["messages"].as_array().unwrap();
    let calls: Vec<&Value> = messages
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .collect();
    assert_eq!(calls.len(), 2, "{request:#}");
    assert!(calls[1]["function"]["arguments"].as_str().unwrap().len() < 100);
    let results: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(results.len(), 2, "{request:#}");
    assert!(results[0].contains("alpha"), "{}", results[0]);
    assert!(
        results[1].contains("max_tool_arguments_bytes"),
        "{}",
        results[1]
    );
    assert!(
        largest_row(&t, &sid) < 10_000,
        "the store kept the arguments"
    );
    t.shutdown().await;
}

/// Every `seq` from the first to the last is either an event or inside a `streamTruncated`
/// range (`fromSeq` to its own `seq`), with no overlap.
fn assert_every_seq_accounted_for(events: &[Value]) {
    let mut next = events[0]["seq"].as_u64().unwrap();
    for event in events {
        let seq = event["seq"].as_u64().unwrap();
        let from = event["fromSeq"].as_u64().unwrap_or(seq);
        assert_eq!(from, next, "a gap or an overlap before {event}");
        next = seq + 1;
    }
}

#[tokio::test]
async fn a_client_that_stops_reading_while_a_command_floods_output_holds_tandem_to_its_buffer() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    // 200 MB of output, against the default outbound buffer of 32 MiB.
    mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": "echo start; head -c 200000000 /dev/zero | tr '\\0' x; echo; touch flood-done"}),
    ));
    mock.push(Script::text_reply("flooded"));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session_in(ws.path(), "fullAuto").await;
    t.prompt(&sid, "flood").await;
    t.wait_event(&sid, |e| {
        e["type"] == "toolCallUpdate" && e["output"].is_string()
    })
    .await;
    t.pause_stdout();
    let baseline = t.rss_kib().await.unwrap();
    let done = ws.path().join("flood-done");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    // The condition is a file the command writes when it is through.
    while !done.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never ended"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let peak = t.peak_rss_kib().await.unwrap();
    t.resume_stdout();
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed", "{ended}");
    eprintln!("RSS while the client did not read: {baseline} KiB before, {peak} KiB at most");
    assert!(
        peak < 120 * 1024,
        "RSS reached {peak} KiB with a client that did not read (from {baseline} KiB)"
    );
    let events = t.events(&sid);
    let truncated: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "streamTruncated")
        .collect();
    assert!(!truncated.is_empty(), "no streamTruncated marker");
    assert!(truncated[0]["dropped"].as_u64().unwrap() > 0);
    assert!(truncated[0]["droppedBytes"].as_u64().unwrap() > 1_000_000);
    assert_every_seq_accounted_for(&events);
    // The call's final update still came, in order, with the cut output.
    let result = events
        .iter()
        .find(|e| e["type"] == "toolCallUpdate" && e["status"] == "completed")
        .expect("the final update of the command");
    let text = result["result"].as_str().unwrap();
    assert!(text.contains("bytes of output cut"), "{}", &text[..200]);
    assert!(text.len() < 100_000, "the result is not capped");
    t.shutdown().await;
}

#[tokio::test]
async fn reading_one_line_of_a_huge_file_without_newlines_keeps_memory_flat() {
    let ws = workspace();
    // 300 MB of text with no newline (and no NUL byte, so it is not refused as binary).
    {
        use std::io::Write;
        let mut file = std::fs::File::create(ws.path().join("one-line.txt")).unwrap();
        let block = vec![b'x'; 1024 * 1024];
        for _ in 0..300 {
            file.write_all(&block).unwrap();
        }
    }
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "r1",
        "read_file",
        json!({"path": "one-line.txt", "limit": 1}),
    ));
    mock.push(Script::text_reply("read"));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "read it").await;
    assert_eq!(t.wait_turn_ended(&sid).await["reason"], "completed");
    let peak = t.peak_rss_kib().await.unwrap();
    eprintln!("peak RSS after read_file of a 300 MB line: {peak} KiB");
    assert!(peak < 100 * 1024, "peak RSS {peak} KiB");
    let result = mock.request(1)["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(result.len() < 10_000, "{} bytes", result.len());
    assert!(result.contains("[line truncated]"), "{}", &result[..200]);
    assert!(result.contains("Lines longer than"), "{result}");
    t.shutdown().await;
}

#[tokio::test]
async fn queued_steering_is_capped_and_applied_as_one_message() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let gate = Gate::new();
    let mock = MockLlm::start().await;
    // The first response holds until every steer has been sent, so all of them queue up.
    mock.push(
        Script::new()
            .role()
            .wait_for(&gate)
            .tool_call("r1", "read_file", json!({"path": "a.txt"}).to_string())
            .finish("tool_calls")
            .done(),
    );
    mock.push(Script::text_reply("Noted."));
    let t = start(
        &mock,
        "max_queued_steering = 3\nmax_queued_steering_bytes = 64",
    )
    .await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "look around").await;
    gate.wait_reached().await;
    for text in ["one", "two", "three"] {
        t.steer(&sid, text).await;
    }
    let full = t
        .request_err("steer", json!({"sessionId": sid, "text": "four"}))
        .await;
    assert_eq!(full.kind, "steeringQueueFull", "{}", full.message);
    assert!(
        full.message.contains("max_queued_steering"),
        "{}",
        full.message
    );
    gate.open();
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    let applied = t.events_of_type(&sid, "steeringApplied");
    assert_eq!(applied.len(), 1, "{applied:?}");
    assert_eq!(applied[0]["text"], "one\n\ntwo\n\nthree");
    // The next request carries the three texts as one user message after the tool result.
    let request = mock.request(1);
    let steering: Vec<&Value> = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .skip(1)
        .collect();
    assert_eq!(steering.len(), 1, "{request}");
    assert!(steering[0]["content"]
        .as_str()
        .is_some_and(|c| c.starts_with("one\n\ntwo\n\nthree")));

    // The byte cap: one text longer than the room left is refused with the key named.
    let gate = Gate::new();
    mock.push(
        Script::new()
            .role()
            .wait_for(&gate)
            .text("thinking")
            .finish("stop")
            .done(),
    );
    mock.push(Script::text_reply("Done."));
    let turn = t.prompt(&sid, "again").await;
    gate.wait_reached().await;
    let long = t
        .request_err("steer", json!({"sessionId": sid, "text": "x".repeat(65)}))
        .await;
    assert_eq!(long.kind, "steeringQueueFull");
    assert!(
        long.message.contains("max_queued_steering_bytes"),
        "{}",
        long.message
    );
    t.steer(&sid, "short").await;
    gate.open();
    let events = t.wait_turn(&sid, &turn).await;
    assert!(events
        .iter()
        .any(|e| e["type"] == "steeringApplied" && e["text"] == "short"));
    t.shutdown().await;
}

/// The frame cap every client is told about (protocol.md, Transport).
const FRAME_CAP: usize = 16 * 1024 * 1024;

fn frame_len(message: &Value) -> usize {
    serde_json::to_vec(message).unwrap().len()
}

/// A model window that holds many megabytes, so nothing is compacted away.
async fn start_with_a_huge_window(mock: &MockLlm) -> Tandem {
    let config =
        config_with(mock, "").replacen("context_window = 128000", "context_window = 100000000", 1);
    Tandem::start_with(TandemOptions::with_mock(mock).config(config)).await
}

/// Every page of `session/load`, newest first, following `cursor` to the oldest.
async fn load_all_pages(t: &Tandem, sid: &str) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut params = json!({"sessionId": sid});
        if let Some(cursor) = &cursor {
            params["cursor"] = json!(cursor);
        }
        let page = t.request_ok("session/load", params).await;
        cursor = page["cursor"].as_str().map(str::to_owned);
        pages.push(page);
        if cursor.is_none() {
            return pages;
        }
        assert!(pages.len() < 50, "session/load never stops paging");
    }
}

#[tokio::test]
async fn session_load_pages_a_history_larger_than_one_frame_and_cuts_an_entry_too_large_to_show() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    let t = start_with_a_huge_window(&mock).await;
    let sid = t.new_session(ws.path()).await;
    // 5 MiB (over the per-entry cap, so shown cut) and five of 3 MiB: 20 MiB in all.
    let mib = 1024 * 1024;
    let sizes = [5 * mib, 3 * mib, 3 * mib, 3 * mib, 3 * mib, 3 * mib];
    for (index, size) in sizes.iter().enumerate() {
        mock.push(Script::text_reply(&format!("answer {index}")));
        let text =
            format!("prompt {index} ") + &char::from(b'a' + index as u8).to_string().repeat(*size);
        let turn = t.prompt(&sid, &text).await;
        t.wait_turn(&sid, &turn).await;
    }
    let check = |pages: &[Value]| {
        for page in pages {
            // The reply's frame: the result plus an envelope of a few dozen bytes.
            assert!(
                frame_len(page) + 64 <= FRAME_CAP,
                "a page of {} bytes",
                frame_len(page)
            );
        }
        assert!(pages.len() >= 2, "20 MiB cannot come in one page");
        // Oldest page first, each page in order: every message exactly once.
        let messages: Vec<&Value> = pages
            .iter()
            .rev()
            .flat_map(|p| p["messages"].as_array().unwrap())
            .collect();
        let users: Vec<&str> = messages
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["text"].as_str().unwrap())
            .collect();
        let assistants: Vec<&str> = messages
            .iter()
            .filter(|m| m["role"] == "assistant")
            .map(|m| m["text"].as_str().unwrap())
            .collect();
        assert_eq!(users.len(), sizes.len());
        assert_eq!(
            assistants,
            (0..sizes.len())
                .map(|i| format!("answer {i}"))
                .collect::<Vec<_>>()
        );
        for (index, text) in users.iter().enumerate() {
            assert!(text.starts_with(&format!("prompt {index} ")));
            if index == 0 {
                // Over the per-entry cap: cut, and the cut says how much it left out.
                assert!(text.len() < 5 * mib, "{}", text.len());
                assert!(
                    text.contains("bytes not shown"),
                    "{}",
                    &text[text.len() - 200..]
                );
            } else {
                assert_eq!(text.len(), format!("prompt {index} ").len() + sizes[index]);
            }
        }
    };
    // From the live session (the parsed history) ...
    check(&load_all_pages(&t, &sid).await);
    // ... and after a restart, from the stored display entries.
    let t = t.respawn().await;
    t.initialize().await;
    check(&load_all_pages(&t, &sid).await);
    // A cursor that names no position is refused with the way out.
    let bad = t
        .request_err("session/load", json!({"sessionId": sid, "cursor": "999"}))
        .await;
    assert_eq!(bad.kind, "invalidParams", "{}", bad.message);
    assert!(bad.message.contains("cursor"), "{}", bad.message);
    t.shutdown().await;
}

#[tokio::test]
async fn an_approval_too_large_for_one_frame_is_cut_says_so_and_cannot_be_edited() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    // 7 MiB of new file: its approval would carry it three times (arguments, new text, diff).
    let content: String = (0..7 * 1024 * 1024 / 64)
        .map(|i| format!("{i:>63}\n"))
        .collect();
    mock.push(
        Script::new()
            .role()
            .tool_call(
                "w1",
                "write_file",
                json!({"path": "big.txt", "content": content}).to_string(),
            )
            .finish("tool_calls")
            .done(),
    );
    mock.push(Script::text_reply("Written."));
    let t = start_with_a_huge_window(&mock).await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "write the big file").await;
    // Streaming, planning and cutting 7 MiB (three times over) takes seconds in a debug build
    // on a loaded 2-core machine: more than the harness's usual guard, bounded all the same.
    let approval = t
        .wait_approval_within(&sid, crate::support::wait_timeout() * 4)
        .await;
    assert!(frame_len(&approval) < FRAME_CAP, "{}", frame_len(&approval));
    let reason = approval["reason"].as_str().unwrap();
    assert!(reason.contains("too large to show in full"), "{reason}");
    let diff = &approval["diff"][0];
    assert_eq!(diff["path"], "big.txt");
    for key in ["newText", "unified"] {
        assert!(
            diff[key].as_str().unwrap().contains("bytes not shown"),
            "{key}"
        );
    }
    let request_id = approval["requestId"].as_str().unwrap().to_owned();
    // A reload while it waits shows it the same way, inside the cap.
    let loaded = t.load_session(&sid).await;
    assert!(frame_len(&loaded) < FRAME_CAP);
    assert_eq!(loaded["pending"][0]["requestId"], request_id.as_str());
    assert!(loaded["pending"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("too large to show in full"));
    // Editing what the user never saw whole is refused, and the request stays pending.
    let edit = t
        .request_err(
            "approve",
            json!({"sessionId": sid, "requestId": request_id, "decision": "once", "editedContent": "mine"}),
        )
        .await;
    assert_eq!(edit.kind, "invalidParams", "{}", edit.message);
    assert!(
        edit.message.contains("cannot be edited"),
        "{}",
        edit.message
    );
    t.approve(&sid, &request_id, "once", None, None).await;
    let events = t.wait_turn(&sid, &turn).await;
    assert_eq!(
        events.last().unwrap()["reason"],
        "completed",
        "{:?}",
        events.last()
    );
    // What was approved is written whole: only the display was cut.
    assert_eq!(
        std::fs::read_to_string(ws.path().join("big.txt")).unwrap(),
        content
    );
    // Nothing the server sent, the applied edit's update included, exceeds the cap.
    for message in t.messages() {
        assert!(
            frame_len(&message) <= FRAME_CAP,
            "{} bytes",
            frame_len(&message)
        );
    }
    t.shutdown().await;
}
