//! End-to-end turns through the real binary: tools, approvals, diffs, scheduling, steering,
//! model switches, modes and outbound hygiene, against a mock OpenAI-compatible server.

use crate::support::*;
use serde_json::{json, Value};

/// Every `tool_calls` id in a recorded request is answered by a later `tool` message.
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

/// The tool messages of a request, in order, as (tool_call_id, content).
fn tool_results(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            t["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn three_reads_then_a_write_with_approval_and_diff() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    std::fs::write(ws.path().join("b.txt"), "beta\n").unwrap();
    std::fs::write(ws.path().join("c.txt"), "gamma\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .role()
            .text("Reading ")
            .text("three files.")
            .tool_call("r1", "read_file", json!({"path": "a.txt"}).to_string())
            .tool_call("r2", "read_file", json!({"path": "b.txt"}).to_string())
            .tool_call("r3", "read_file", json!({"path": "c.txt"}).to_string())
            .finish("tool_calls")
            .usage(100, 20)
            .done(),
    );
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "out.txt", "content": "alpha beta gamma\n"}),
    ));
    mock.push(Script::text_reply("Wrote out.txt."));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    let turn_id = t.prompt(&sid, "combine the files").await;

    let approval = t.wait_approval(&sid).await;
    assert_eq!(approval["turnId"], turn_id);
    assert_eq!(approval["name"], "write_file");
    assert_eq!(approval["kind"], "edit");
    let diff = &approval["diff"][0];
    assert_eq!(diff["path"], "out.txt");
    assert!(
        diff["oldText"].is_null(),
        "new file has oldText null: {diff}"
    );
    assert_eq!(diff["newText"], "alpha beta gamma\n");
    assert!(diff["unified"]
        .as_str()
        .unwrap()
        .contains("+alpha beta gamma"));
    let decisions: Vec<&str> = approval["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["decision"].as_str().unwrap())
        .collect();
    assert_eq!(decisions, vec!["once", "alwaysTool", "deny"]);
    assert!(
        !ws.path().join("out.txt").exists(),
        "nothing is written before the approval"
    );

    t.approve(
        &sid,
        approval["requestId"].as_str().unwrap(),
        "once",
        None,
        None,
    )
    .await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out.txt")).unwrap(),
        "alpha beta gamma\n"
    );

    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 3);
    assert_eq!(
        results.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        vec!["r1", "r2", "r3"],
        "results are committed in call order"
    );
    assert!(results[0].1.contains("alpha") && results[2].1.contains("gamma"));
    let last = tool_results(&requests[2]);
    assert!(last[3].1.starts_with("Wrote"), "{:?}", last[3]);
    for r in &requests {
        assert_no_orphans(r);
    }

    let events = t.events(&sid);
    assert_seq_gap_free(&events);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"turnStarted"));
    assert_eq!(types.last(), Some(&"turnEnded"));
    assert!(types.contains(&"assistantDelta") && types.contains(&"usage"));
    let completed = t
        .find_event(&sid, |e| {
            e["type"] == "toolCallUpdate" && e["toolCallId"] == "w1" && e["status"] == "completed"
        })
        .expect("write completed");
    assert_eq!(completed["diff"][0]["path"], "out.txt");
    t.shutdown().await;
}

#[tokio::test]
async fn deny_with_a_message_reaches_the_model() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "x.txt", "content": "x"}),
    ));
    mock.push(Script::text_reply("Understood."));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "write x").await;
    let approval = t.wait_approval(&sid).await;
    t.approve(
        &sid,
        approval["requestId"].as_str().unwrap(),
        "deny",
        Some("use y.txt instead"),
        None,
    )
    .await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    assert!(!ws.path().join("x.txt").exists());
    let denied = t
        .find_event(&sid, |e| {
            e["type"] == "toolCallUpdate" && e["status"] == "denied"
        })
        .expect("denied update");
    assert_eq!(denied["result"], "denied by user: use y.txt instead");
    let resolved = t.events_of_type(&sid, "approvalResolved");
    assert_eq!(resolved[0]["decision"], "deny");
    let results = tool_results(&mock.request(1));
    assert_eq!(results[0].1, "denied by user: use y.txt instead");
    t.shutdown().await;
}

#[tokio::test]
async fn edited_content_is_written_and_the_model_is_told() {
    let ws = workspace();
    std::fs::write(ws.path().join("f.txt"), "one\ntwo\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "e1",
        "edit_file",
        json!({"path": "f.txt", "old_string": "two", "new_string": "2"}),
    ));
    mock.push(Script::text_reply("ok"));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "edit").await;
    let approval = t.wait_approval(&sid).await;
    let diff = &approval["diff"][0];
    assert_eq!(diff["oldText"], "one\ntwo\n");
    assert_eq!(diff["newText"], "one\n2\n");
    t.approve(
        &sid,
        approval["requestId"].as_str().unwrap(),
        "once",
        None,
        Some("one\nTWO (user)\n"),
    )
    .await;
    t.wait_turn_ended(&sid).await;
    assert_eq!(
        std::fs::read_to_string(ws.path().join("f.txt")).unwrap(),
        "one\nTWO (user)\n"
    );
    let results = tool_results(&mock.request(1));
    assert!(
        results[0]
            .1
            .contains("The user edited your proposed content"),
        "{}",
        results[0].1
    );
    t.shutdown().await;
}

#[tokio::test]
async fn read_write_read_sees_the_write() {
    let ws = workspace();
    std::fs::write(ws.path().join("x.txt"), "old\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_calls(vec![
        ("r1", "read_file", json!({"path": "x.txt"}).to_string()),
        (
            "w1",
            "write_file",
            json!({"path": "x.txt", "content": "new\n"}).to_string(),
        ),
        ("r2", "read_file", json!({"path": "x.txt"}).to_string()),
    ]));
    mock.push(Script::text_reply("done"));
    let t = Tandem::start(&mock).await;
    let sid = t
        .new_session_with(ws.path(), json!({"mode": "autoEdit"}))
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    t.prompt(&sid, "go").await;
    t.wait_turn_ended(&sid).await;
    let results = tool_results(&mock.request(1));
    assert_eq!(results.len(), 3);
    assert!(results[0].1.contains("old"), "{:?}", results[0]);
    assert!(results[1].1.starts_with("Wrote"), "{:?}", results[1]);
    assert!(
        results[2].1.contains("new") && !results[2].1.contains("old"),
        "third call sees the write: {:?}",
        results[2]
    );
    t.shutdown().await;
}

#[tokio::test]
async fn reads_start_while_the_model_still_streams_later_calls() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let gate = Gate::new();
    let mock = MockLlm::start().await;
    // The first call is complete once the second begins; the stream then pauses on the gate.
    mock.push(
        Script::new()
            .role()
            .tool_call("r1", "read_file", json!({"path": "a.txt"}).to_string())
            .tool_call("r2", "list_dir", json!({"path": "."}).to_string())
            .wait_for(&gate)
            .finish("tool_calls")
            .done(),
    );
    mock.push(Script::text_reply("ok"));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "read").await;
    let running = t
        .wait_event(&sid, |e| {
            e["type"] == "toolCallUpdate" && e["toolCallId"] == "r1" && e["status"] == "running"
        })
        .await;
    assert!(running["seq"].as_u64().is_some());
    assert!(!gate.is_open(), "r1 started before the stream finished");
    gate.open();
    t.wait_turn_ended(&sid).await;
    let results = tool_results(&mock.request(1));
    assert!(results[0].1.contains("alpha"));
    assert!(results[1].1.contains("a.txt"));
    t.shutdown().await;
}

#[tokio::test]
async fn steer_lands_after_the_tool_result() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let gate = Gate::new();
    let mock = MockLlm::start().await;
    // The first response holds until the steer is queued, so the steer is deterministic.
    mock.push(
        Script::new()
            .role()
            .wait_for(&gate)
            .tool_call("r1", "read_file", json!({"path": "a.txt"}).to_string())
            .finish("tool_calls")
            .done(),
    );
    mock.push(Script::text_reply("I see, focusing on tests."));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "look around").await;
    gate.wait_reached().await;
    t.steer(&sid, "focus on the tests").await;
    gate.open();
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    let applied = t.events_of_type(&sid, "steeringApplied");
    assert_eq!(applied.len(), 1);
    assert_eq!(applied[0]["text"], "focus on the tests");
    let request = mock.request(1);
    let messages = request["messages"].as_array().unwrap();
    let tool_pos = messages.iter().position(|m| m["role"] == "tool").unwrap();
    let steer_pos = messages
        .iter()
        .position(|m| {
            m["role"] == "user"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("focus on the tests"))
        })
        .expect("steer message in the next request");
    assert!(steer_pos > tool_pos, "steering comes after the tool result");
    assert_eq!(mock.requests().len(), 2, "no extra turn was started");
    t.shutdown().await;
}

#[tokio::test]
async fn steer_when_the_model_stops_continues_the_turn() {
    let ws = workspace();
    let gate = Gate::new();
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .role()
            .text("Thinking")
            .wait_for(&gate)
            .finish("stop")
            .done(),
    );
    mock.push(Script::text_reply("Continuing with your note."));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    let turn_id = t.prompt(&sid, "start").await;
    gate.wait_reached().await;
    t.steer(&sid, "also check docs").await;
    gate.open();
    let events = t.wait_turn(&sid, &turn_id).await;
    let ends: Vec<&Value> = events.iter().filter(|e| e["type"] == "turnEnded").collect();
    assert_eq!(ends.len(), 1, "one turn, continued");
    assert_eq!(mock.requests().len(), 2);
    let second = mock.request(1);
    let last_user = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone();
    assert!(last_user.to_string().contains("also check docs"));
    // Steering is refused once the turn is over.
    let err = t
        .request_err("steer", json!({"sessionId": sid, "text": "late"}))
        .await;
    assert_eq!(err.kind, "noTurnRunning");
    t.shutdown().await;
}

#[tokio::test]
async fn switch_model_applies_to_the_next_request_and_is_a_notice() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("one"));
    mock.push(Script::text_reply("two"));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "first").await;
    t.wait_turn_ended(&sid).await;
    let result = t.switch_model(&sid, "mock-2").await;
    assert_eq!(result["model"], "mock-2");
    assert!(result.get("warning").is_none());
    let switched = t.wait_event_type(&sid, "modelSwitched").await;
    assert_eq!(switched["from"], "mock");
    assert_eq!(switched["to"], "mock-2");
    t.prompt(&sid, "second").await;
    let started = t.wait_event_type(&sid, "turnStarted").await;
    assert_eq!(started["model"], "mock-2");
    t.wait_turn_ended(&sid).await;
    assert_eq!(mock.request(0)["model"], "mock-model");
    assert_eq!(mock.request(1)["model"], "mock-model-2");
    let err = t
        .request_err("switchModel", json!({"sessionId": sid, "model": "nope"}))
        .await;
    assert_eq!(err.kind, "unknownModel");
    assert!(
        err.message.contains("mock-2"),
        "lists known models: {}",
        err.message
    );
    t.shutdown().await;
}

#[tokio::test]
async fn switching_to_a_blind_model_warns_and_degrades_images_outbound_only() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("a red square"));
    mock.push(Script::text_reply("no image here"));
    mock.push(Script::text_reply("red again"));
    let t = Tandem::start(&mock).await;
    let sid = t
        .new_session_with(ws.path(), json!({"model": "mock-vision"}))
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    t.prompt_content(
        &sid,
        json!([{"type":"text","text":"what is this?"},{"type":"image","mimeType":"image/png","data":"iVBORw0KGgo="}]),
    )
    .await;
    t.wait_turn_ended(&sid).await;
    let first = mock.request(0).to_string();
    assert!(first.contains("data:image/png;base64,iVBORw0KGgo="));

    let result = t.switch_model(&sid, "mock").await;
    assert!(
        result["warning"]
            .as_str()
            .unwrap_or_default()
            .contains("1 image"),
        "{result}"
    );
    t.prompt(&sid, "and now?").await;
    t.wait_turn_ended(&sid).await;
    let blind = mock.request(1).to_string();
    assert!(
        !blind.contains("iVBORw0KGgo="),
        "image not sent to a blind model"
    );
    assert!(blind.contains("cannot view images"));

    t.switch_model(&sid, "mock-vision").await;
    t.prompt(&sid, "back?").await;
    t.wait_turn_ended(&sid).await;
    assert!(
        mock.request(2).to_string().contains("iVBORw0KGgo="),
        "history kept the image"
    );
    t.shutdown().await;
}

#[tokio::test]
async fn plan_mode_hides_edit_tools_and_refuses_them() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "p.txt", "content": "x"}),
    ));
    mock.push(Script::text_reply("ok, a plan instead"));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.set_mode(&sid, "plan").await;
    t.prompt(&sid, "change things").await;
    t.wait_turn_ended(&sid).await;
    let names = tool_names(&mock.request(0));
    assert!(names.contains(&"read_file".to_owned()));
    assert!(names.contains(&"propose_plan".to_owned()));
    for hidden in ["write_file", "edit_file", "shell"] {
        assert!(
            !names.contains(&hidden.to_owned()),
            "{hidden} offered in plan mode"
        );
    }
    assert!(!ws.path().join("p.txt").exists());
    assert!(t.events_of_type(&sid, "approvalRequested").is_empty());
    let results = tool_results(&mock.request(1));
    assert!(results[0].1.contains("plan mode"), "{:?}", results[0]);
    t.shutdown().await;
}

#[tokio::test]
async fn outbound_requests_carry_no_notices_or_sidecars() {
    let ws = workspace();
    std::fs::write(ws.path().join("AGENTS.md"), "Always answer in haiku.\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .role()
            .reasoning("let me think")
            .text("partial")
            .tool_call("r1", "read_file", json!({"path": "AGENTS.md"}).to_string())
            .finish("tool_calls")
            .done(),
    );
    mock.push(Script::text_reply("done"));
    mock.push(Script::text_reply("after the switch"));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "hello").await;
    t.wait_turn_ended(&sid).await;
    t.switch_model(&sid, "mock-2").await;
    t.prompt(&sid, "again").await;
    t.wait_turn_ended(&sid).await;
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        for m in request["messages"].as_array().unwrap() {
            let role = m["role"].as_str().unwrap();
            assert!(
                ["system", "user", "assistant", "tool"].contains(&role),
                "unexpected role {role}"
            );
            let object = m.as_object().unwrap();
            for key in object.keys() {
                assert!(
                    ["role", "content", "tool_calls", "tool_call_id"].contains(&key.as_str()),
                    "sidecar key {key} leaked: {m}"
                );
            }
        }
        let text = request.to_string();
        for leaked in [
            "\"ts\"",
            "\"source\"",
            "\"display\"",
            "\"usage\"",
            "let me think",
            "Switched model",
        ] {
            assert!(!text.contains(leaked), "{leaked} leaked into {text}");
        }
        assert_no_orphans(request);
    }
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("Always answer in haiku."),
        "AGENTS.md joins the system prompt"
    );
    // The per-turn context rides on every prompt (after the model switch rebuilt the view,
    // the first prompt too) and is not persisted into history.
    let first_user = &requests[2]["messages"][1];
    assert_eq!(first_user["role"], "user");
    assert!(first_user["content"].to_string().contains("turn-context"));
    let last_user = requests[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap();
    assert!(last_user["content"].to_string().contains("turn-context"));
    let loaded = t.load_session(&sid).await;
    assert!(
        !loaded.to_string().contains("turn-context"),
        "the per-turn context was persisted: {loaded}"
    );
    t.shutdown().await;
}

/// A provider's prompt cache reads back the longest common start of consecutive requests, so a
/// session's requests only grow at their end: over turns with tool calls and a mode switch,
/// every request's messages start with all of the previous request's, and the tools and the
/// system prompt stay the same.
#[tokio::test]
async fn each_request_starts_with_the_whole_previous_one() {
    let ws = workspace();
    std::fs::write(ws.path().join("notes.txt"), "some notes\n").unwrap();
    let mock = MockLlm::start().await;
    for turn in 0..3 {
        mock.push(Script::tool_call_reply(
            &format!("r{turn}"),
            "read_file",
            json!({"path": "notes.txt"}),
        ));
        mock.push(Script::text_reply(&format!("read it, turn {turn}")));
    }
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    for turn in 0..3 {
        if turn == 2 {
            t.set_mode(&sid, "autoEdit").await;
        }
        t.prompt(&sid, &format!("prompt {turn}")).await;
        t.wait_turn_ended(&sid).await;
    }
    let requests = mock.requests();
    assert_eq!(requests.len(), 6);
    for pair in requests.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        let (old, new) = (
            before["messages"].as_array().unwrap(),
            after["messages"].as_array().unwrap(),
        );
        assert!(new.len() > old.len());
        assert_eq!(
            &new[..old.len()],
            &old[..],
            "a request rewrote what the previous one sent"
        );
        assert_eq!(before["tools"], after["tools"]);
    }
    // After the switch, earlier prompts keep the mode they were sent with; the new one names
    // the new mode.
    let last = requests[5]["messages"].as_array().unwrap();
    let prompts: Vec<String> = last
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(prompts.len(), 3);
    assert!(prompts[0].contains("prompt 0") && prompts[0].contains("Permission mode: ask"));
    assert!(prompts[1].contains("Permission mode: ask"));
    assert!(prompts[2].contains("prompt 2") && prompts[2].contains("Permission mode: autoEdit"));
    t.shutdown().await;
}

#[tokio::test]
async fn provider_error_ends_the_turn_and_keeps_partial_text() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::new().role().text("Half an ans").disconnect());
    // One attempt only: retries have their own tests in resilience.rs.
    let t = Tandem::start_with(
        TandemOptions::with_mock(&mock).config(config_with(&mock, "provider_max_attempts = 1")),
    )
    .await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "hi").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "error");
    assert_eq!(ended["error"]["retriable"], true);
    let notice = t
        .find_event(&sid, |e| e["type"] == "notice" && e["kind"] == "error")
        .expect("error notice");
    assert!(!notice["text"].as_str().unwrap().is_empty());
    let message = t.events_of_type(&sid, "assistantMessage");
    assert_eq!(message[0]["text"], "Half an ans");

    mock.push(Script::http_error(401, None));
    t.prompt(&sid, "again").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["error"]["retriable"], false);
    assert!(ended["error"]["message"].as_str().unwrap().contains("401"));
    t.shutdown().await;
}

#[tokio::test]
async fn always_tool_and_always_command_are_remembered() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": "echo first"}),
    ));
    mock.push(Script::tool_call_reply(
        "s2",
        "shell",
        json!({"command": "echo second"}),
    ));
    mock.push(Script::tool_call_reply(
        "s3",
        "shell",
        json!({"command": "echo third && echo chained"}),
    ));
    mock.push(Script::text_reply("done"));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "run things").await;
    let approval = t.wait_approval(&sid).await;
    assert_eq!(approval["command"], "echo first");
    assert_eq!(
        approval["cwd"].as_str().unwrap(),
        canonical(ws.path()).to_str().unwrap()
    );
    let always = approval["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["decision"] == "alwaysCommand")
        .expect("alwaysCommand option for shell");
    assert_eq!(always["commandPrefix"], "echo first");
    // Allow the prefix `echo first`; `echo second` is a different prefix and must ask again.
    t.approve(
        &sid,
        approval["requestId"].as_str().unwrap(),
        "alwaysCommand",
        None,
        None,
    )
    .await;
    let second = t.wait_approval(&sid).await;
    assert_eq!(second["command"], "echo second");
    t.approve(
        &sid,
        second["requestId"].as_str().unwrap(),
        "alwaysTool",
        None,
        None,
    )
    .await;
    // alwaysTool now covers every shell call, chained or not.
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    assert_eq!(t.events_of_type(&sid, "approvalRequested").len(), 2);
    let results = tool_results(&mock.request(3));
    assert!(results[0].1.contains("first"));
    assert!(results[2].1.contains("chained"));
    let output: String = t
        .events(&sid)
        .iter()
        .filter(|e| e["type"] == "toolCallUpdate" && e["toolCallId"] == "s1")
        .filter_map(|e| e["output"].as_str().map(str::to_owned))
        .collect();
    assert!(output.contains("first"), "shell output streams: {output}");
    t.shutdown().await;
}

#[tokio::test]
async fn no_client_able_to_answer_means_deny() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "x.txt", "content": "x"}),
    ));
    mock.push(Script::text_reply("ok"));
    let t = Tandem::spawn(TandemOptions::with_mock(&mock));
    t.request_ok(
        "initialize",
        json!({"protocolVersion": 1, "capabilities": {"approvals": false}}),
    )
    .await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "write").await;
    t.wait_turn_ended(&sid).await;
    assert!(t.events_of_type(&sid, "approvalRequested").is_empty());
    assert!(!ws.path().join("x.txt").exists());
    let results = tool_results(&mock.request(1));
    assert!(
        results[0].1.contains("denies by default"),
        "{:?}",
        results[0]
    );
    t.shutdown().await;
}

#[tokio::test]
async fn ask_user_resolves_through_answer() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "q1",
        "ask_user",
        json!({"question": "Which file?", "choices": ["a", "b"]}),
    ));
    mock.push(Script::text_reply("thanks"));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "ask me").await;
    let question = t.wait_event_type(&sid, "questionAsked").await;
    assert_eq!(question["question"], "Which file?");
    assert_eq!(question["choices"], json!(["a", "b"]));
    assert!(t.events_of_type(&sid, "approvalRequested").is_empty());
    let request_id = question["requestId"].as_str().unwrap().to_owned();
    // `approve` is the wrong verb for a question.
    let err = t
        .request_err(
            "approve",
            json!({"sessionId": sid, "requestId": request_id, "decision": "once"}),
        )
        .await;
    assert_eq!(err.kind, "staleApproval");
    t.answer(&sid, &request_id, "b").await;
    t.wait_turn_ended(&sid).await;
    assert_eq!(tool_results(&mock.request(1))[0].1, "The user answered: b");
    // A second answer to the same request is stale.
    let err = t
        .request_err(
            "answer",
            json!({"sessionId": sid, "requestId": request_id, "answer": "a"}),
        )
        .await;
    assert_eq!(err.kind, "staleApproval");
    t.shutdown().await;
}

#[tokio::test]
async fn repeated_identical_calls_earn_a_warning_not_a_stop() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    for i in 0..3 {
        mock.push(Script::tool_call_reply(
            &format!("r{i}"),
            "read_file",
            json!({"path": "a.txt"}),
        ));
    }
    mock.push(Script::text_reply("ok, stopping"));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "read").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    let before = mock.request(2).to_string();
    assert!(!before.contains("same input 3 times"));
    let after = mock.request(3).to_string();
    assert!(after.contains("You have called read_file with the same input 3 times in a row"));
    t.shutdown().await;
}

#[tokio::test]
async fn the_iteration_cap_is_the_last_guard() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    for i in 0..3 {
        mock.push(Script::tool_call_reply(
            &format!("l{i}"),
            "list_dir",
            json!({"path": "."}),
        ));
    }
    let t = Tandem::start_with(
        TandemOptions::with_mock(&mock).config(config_with(&mock, "max_iterations = 2")),
    )
    .await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "loop").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "maxIterations");
    assert_eq!(mock.requests().len(), 2);
    assert_no_orphans(&mock.request(1));
    t.shutdown().await;
}

#[tokio::test]
async fn a_second_prompt_during_a_turn_is_refused() {
    let ws = workspace();
    let gate = Gate::new();
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .role()
            .text("slow")
            .wait_for(&gate)
            .finish("stop")
            .done(),
    );
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "one").await;
    let err = t
        .request_err("prompt", json!({"sessionId": sid, "content": "two"}))
        .await;
    assert_eq!(err.kind, "turnInProgress");
    gate.open();
    t.wait_turn_ended(&sid).await;
    t.shutdown().await;
}

#[tokio::test]
async fn the_builtin_scripted_model_plays_a_full_turn() {
    let ws = workspace();
    let t = Tandem::start_with(TandemOptions::new()).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "show me").await;
    let approval = t.wait_approval(&sid).await;
    assert_eq!(approval["diff"][0]["path"], "tandem-demo.md");
    t.approve(
        &sid,
        approval["requestId"].as_str().unwrap(),
        "once",
        None,
        None,
    )
    .await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    let written = std::fs::read_to_string(ws.path().join("tandem-demo.md")).unwrap();
    assert!(written.contains("You asked: show me"));
    assert!(!t.events_of_type(&sid, "assistantDelta").is_empty());
    // The demo's last words tell an editor user how to set up a real model from the editor, not
    // only with a command-line flag.
    let answer: String = t
        .events_of_type(&sid, "assistantDelta")
        .iter()
        .filter_map(|e| e["text"].as_str().map(str::to_owned))
        .collect();
    let last_line = answer.lines().last().unwrap_or_default();
    for needle in ["tandem: Configure Model…", "config_file", "env", "--config"] {
        assert!(
            last_line.contains(needle),
            "the demo's last line names {needle:?}: {last_line}"
        );
    }
    // What it points at exists: the Neovim help tag, and the VS Code command's title.
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let tag = last_line
        .split(":help ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("the last line names a Neovim help tag");
    let help = std::fs::read_to_string(repo.join("editors/neovim/doc/tandem.txt")).unwrap();
    assert!(
        help.contains(&format!("*{tag}*")),
        "no help tag *{tag}* in doc/tandem.txt"
    );
    let manifest = std::fs::read_to_string(repo.join("editors/vscode/package.json")).unwrap();
    assert!(
        manifest.contains("\"title\": \"Configure Model…\""),
        "the VS Code manifest has no command titled as the demo names it"
    );
    t.shutdown().await;
}
