//! `stop` from every state of a turn: before the first token, mid-stream, with a half-formed tool
//! call, while a shell command runs, at a pending approval or question, and between iterations.
//! Each test then prompts again and checks the next request has no orphan tool call.

use crate::support::*;
use serde_json::{json, Value};

fn assert_no_orphans(request: &Value) {
    let messages = request["messages"].as_array().expect("messages array");
    for (i, m) in messages.iter().enumerate() {
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            let id = call["id"].as_str().expect("tool call id");
            let answered = messages[i + 1..]
                .iter()
                .any(|later| later["role"] == "tool" && later["tool_call_id"] == id);
            assert!(
                answered,
                "tool call {id} has no result in request: {request:#}"
            );
        }
    }
}

/// A sleep duration no other process on the machine uses, to find the command's processes.
const MARKER: &str = "30.4242427";

/// After a stop: the turn ended interrupted with a notice, nothing of the turn follows its
/// `turnEnded`, and the next turn's request is well formed.
async fn check_interrupted_then_continue(
    t: &Tandem,
    mock: &MockLlm,
    sid: &str,
    turn_id: &str,
) -> Value {
    let events = t.wait_turn(sid, turn_id).await;
    let last = events.last().expect("events");
    assert_eq!(last["type"], "turnEnded");
    assert_eq!(last["reason"], "interrupted");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "notice" && e["kind"] == "interrupted"),
        "notice(interrupted) announced"
    );
    let before = mock.requests().len();
    mock.push(Script::text_reply("fresh start"));
    let next = t.prompt(sid, "continue").await;
    let ended = t.wait_turn(sid, &next).await;
    assert_eq!(ended.last().unwrap()["reason"], "completed");
    let request = mock.wait_for_requests(before + 1).await[before].clone();
    assert_no_orphans(&request);
    let all = t.events(sid);
    assert_seq_gap_free(&all);
    // No event of the stopped turn arrives after its turnEnded.
    let end_seq = last["seq"].as_u64().unwrap();
    assert!(all
        .iter()
        .filter(|e| e["turnId"] == turn_id)
        .all(|e| e["seq"].as_u64().unwrap() <= end_seq));
    request
}

#[tokio::test]
async fn stop_before_the_first_token() {
    let ws = workspace();
    let gate = Gate::new();
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("never seen").hold_head_until(&gate));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "hi").await;
    gate.wait_reached().await;
    assert!(t.stop(&sid).await, "stop reports a running turn");
    assert!(t.events_of_type(&sid, "assistantMessage").is_empty());
    mock.wait_for_cancelled(1).await;
    check_interrupted_then_continue(&t, &mock, &sid, &turn).await;
    gate.open();
    t.shutdown().await;
}

#[tokio::test]
async fn stop_mid_stream_keeps_the_text_already_seen() {
    let ws = workspace();
    let gate = Gate::new();
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .role()
            .text("Partial answer, ")
            .wait_for(&gate)
            .text("never shown")
            .finish("stop")
            .done(),
    );
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "hi").await;
    t.wait_event_type(&sid, "assistantDelta").await;
    gate.wait_reached().await;
    assert!(t.stop(&sid).await);
    let message = t.events_of_type(&sid, "assistantMessage");
    assert_eq!(message[0]["text"], "Partial answer, ");
    let request = check_interrupted_then_continue(&t, &mock, &sid, &turn).await;
    let text = request.to_string();
    assert!(
        text.contains("Partial answer, "),
        "partial text stays in history"
    );
    assert!(!text.contains("never shown"));
    gate.open();
    t.shutdown().await;
}

#[tokio::test]
async fn stop_drops_a_half_formed_tool_call() {
    let ws = workspace();
    let gate = Gate::new();
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .role()
            .text("Writing.")
            .tool_call(
                "w1",
                "write_file",
                json!({"path": "x.txt", "content": "x"}).to_string(),
            )
            .wait_for(&gate)
            .finish("tool_calls")
            .done(),
    );
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "write").await;
    gate.wait_reached().await;
    assert!(t.stop(&sid).await);
    let request = check_interrupted_then_continue(&t, &mock, &sid, &turn).await;
    assert!(
        !request.to_string().contains("\"w1\""),
        "the unfinished call is dropped"
    );
    assert!(!ws.path().join("x.txt").exists());
    gate.open();
    t.shutdown().await;
}

#[tokio::test]
async fn stop_kills_a_running_shell_command() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    // The command ignores SIGINT, so only the SIGKILL that follows the grace period ends it.
    mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": format!("trap '' INT; echo started; sleep {MARKER}; echo finished > after")}),
    ));
    let t = Tandem::start(&mock).await;
    let sid = t
        .new_session_with(ws.path(), json!({"mode": "fullAuto"}))
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let turn = t.prompt(&sid, "run").await;
    t.wait_event(&sid, |e| {
        e["type"] == "toolCallUpdate" && e["output"].as_str().is_some_and(|o| o.contains("started"))
    })
    .await;
    assert!(t.stop(&sid).await);
    let update = t
        .find_event(&sid, |e| {
            e["type"] == "toolCallUpdate" && e["toolCallId"] == "s1" && e["status"] == "interrupted"
        })
        .expect("interrupted update");
    assert!(update["result"]
        .as_str()
        .unwrap()
        .contains("interrupted by user"));
    // The stop response comes after the group was killed and reaped: no process of the
    // command is left (found by its unique sleep argument, since it may run in a PID
    // namespace where its own PIDs mean nothing to the host).
    let survivors: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(MARKER))
        .collect();
    assert!(
        survivors.is_empty(),
        "processes survived the stop: {survivors:?}"
    );
    let request = check_interrupted_then_continue(&t, &mock, &sid, &turn).await;
    let result = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "s1")
        .expect("s1 result")
        .clone();
    assert!(result["content"]
        .as_str()
        .unwrap()
        .contains("interrupted by user"));
    assert!(!ws.path().join("after").exists());
    t.shutdown().await;
}

#[tokio::test]
async fn stop_at_a_pending_approval_withdraws_it() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_calls(vec![
        ("r1", "list_dir", json!({"path": "."}).to_string()),
        (
            "w1",
            "write_file",
            json!({"path": "x.txt", "content": "x"}).to_string(),
        ),
        ("r2", "list_dir", json!({"path": "."}).to_string()),
    ]));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "write").await;
    let approval = t.wait_approval(&sid).await;
    assert!(t.stop(&sid).await);
    let resolved = t.events_of_type(&sid, "approvalResolved");
    assert_eq!(resolved[0]["requestId"], approval["requestId"]);
    let err = t
        .request_err(
            "approve",
            json!({"sessionId": sid, "requestId": approval["requestId"], "decision": "once"}),
        )
        .await;
    assert_eq!(err.kind, "staleApproval");
    let request = check_interrupted_then_continue(&t, &mock, &sid, &turn).await;
    let tool_messages: Vec<&Value> = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(
        tool_messages.len(),
        3,
        "every call of the batch has a result"
    );
    assert!(tool_messages
        .iter()
        .all(|m| m["content"] == "interrupted by user"));
    assert!(!ws.path().join("x.txt").exists());
    t.shutdown().await;
}

#[tokio::test]
async fn stop_at_a_pending_question() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "q1",
        "ask_user",
        json!({"question": "Proceed?"}),
    ));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "ask").await;
    let question = t.wait_event_type(&sid, "questionAsked").await;
    assert!(t.stop(&sid).await);
    let err = t
        .request_err(
            "answer",
            json!({"sessionId": sid, "requestId": question["requestId"], "answer": "yes"}),
        )
        .await;
    assert_eq!(err.kind, "staleApproval");
    check_interrupted_then_continue(&t, &mock, &sid, &turn).await;
    t.shutdown().await;
}

#[tokio::test]
async fn stop_between_iterations() {
    let ws = workspace();
    let gate = Gate::new();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "l1",
        "list_dir",
        json!({"path": "."}),
    ));
    // The second request hangs before its first byte, so the stop lands at the boundary.
    mock.push(Script::text_reply("never").hold_head_until(&gate));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "list").await;
    t.wait_event(&sid, |e| {
        e["type"] == "toolCallUpdate" && e["toolCallId"] == "l1" && e["status"] == "completed"
    })
    .await;
    assert!(t.stop(&sid).await);
    // The stop may land before the second request is sent (then the held script answers the
    // next turn) or while it waits for its first byte; release it either way.
    gate.open();
    let request = check_interrupted_then_continue(&t, &mock, &sid, &turn).await;
    assert!(
        request.to_string().contains("\"l1\""),
        "the completed call stays paired"
    );
    t.shutdown().await;
}

#[tokio::test]
async fn stop_when_idle_reports_false() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    assert!(!t.stop(&sid).await);
    t.shutdown().await;
}

/// A `write_file` that rewrites every line of a 400,000-line file: planning its diff takes the
/// whole diff deadline (it was minutes before there was one). A stop sent while it runs is
/// answered at once, the turn ends interrupted, and nothing is written.
#[tokio::test]
async fn stop_while_a_huge_diff_is_planned_answers_at_once() {
    let ws = workspace();
    let old: String = (0..400_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(ws.path().join("big.txt"), &old).unwrap();
    let new: String = (0..400_000).map(|i| format!("LINE {i}\n")).collect();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "big.txt", "content": new}),
    ));
    // The call's 5 MB of arguments stay in the history; the turn after the stop must not end
    // with contextExceeded (no request goes out above the window), so the model's window
    // holds them.
    let config =
        config_with(&mock, "").replacen("context_window = 128000", "context_window = 100000000", 1);
    let t = Tandem::start_with(TandemOptions::with_mock(&mock).config(config)).await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "rewrite it").await;
    // The call is announced just before its diff is planned.
    t.wait_event(&sid, |e| e["type"] == "toolCall").await;
    let asked = std::time::Instant::now();
    assert!(t.stop(&sid).await);
    let took = asked.elapsed();
    eprintln!(
        "stop answered in {} ms while the diff was planned",
        took.as_millis()
    );
    // Planning alone runs to its 1 s deadline and then builds the whole-file fallback (4.9 s
    // when stop waited for it); an answer well under that proves stop did not wait. The margin
    // absorbs a loaded 2-core CI machine (it answers in about 140 ms when idle, see the note
    // printed above); the 200 ms figure of the issue is measured, not asserted here.
    assert!(
        took < std::time::Duration::from_millis(1000),
        "stop took {took:?} while the diff was planned"
    );
    assert!(
        t.find_event(&sid, |e| e["type"] == "approvalRequested")
            .is_none(),
        "the approval was asked before the stop was answered"
    );
    check_interrupted_then_continue(&t, &mock, &sid, &turn).await;
    assert_eq!(
        std::fs::read_to_string(ws.path().join("big.txt")).unwrap(),
        old
    );
    t.shutdown().await;
}
