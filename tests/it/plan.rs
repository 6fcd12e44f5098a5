//! The model's plan over the real binary: `update_plan` never asks and is offered in every mode,
//! each call is a `plan` event with the whole list, the current plan is in `session/load` (also
//! after a restart), a plan over the caps is a tool error, and a conversation rewind brings the
//! earlier plan back.

use crate::support::*;
use serde_json::{json, Value};

fn plan(steps: &[(&str, &str)]) -> Value {
    json!({"entries": steps.iter().map(|(c, s)| json!({"content": c, "status": s})).collect::<Vec<_>>()})
}

#[tokio::test]
async fn update_plan_is_announced_stored_and_brought_back_by_a_rewind() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    let first = plan(&[
        ("Read the code", "in_progress"),
        ("Fix it", "pending"),
        ("Test", "pending"),
    ]);
    let second = plan(&[
        ("Read the code", "completed"),
        ("Fix it", "completed"),
        ("Test", "in_progress"),
    ]);
    mock.push(Script::tool_call_reply("p1", "update_plan", first.clone()));
    mock.push(Script::text_reply("planned"));
    mock.push(Script::tool_call_reply("p2", "update_plan", second.clone()));
    mock.push(Script::text_reply("progressed"));
    let t = Tandem::start(&mock).await;
    t.initialize().await;
    // Ask mode: a plan update still never asks.
    let sid = t.new_session(ws.path()).await;
    let turn1 = t.prompt(&sid, "make a plan").await;
    let events = t.wait_turn(&sid, &turn1).await;
    assert!(
        events.iter().all(|e| e["type"] != "approvalRequested"),
        "{events:#?}"
    );
    let announced = events
        .iter()
        .find(|e| e["type"] == "plan")
        .expect("a plan event");
    assert_eq!(announced["entries"], first["entries"]);
    let result = events
        .iter()
        .find(|e| e["type"] == "toolCallUpdate" && e["status"] == "completed")
        .unwrap();
    assert!(
        result["result"].as_str().unwrap().contains("0 of 3"),
        "{result}"
    );
    assert_eq!(t.load_session(&sid).await["plan"], first["entries"]);

    let turn2 = t.prompt(&sid, "go on").await;
    t.wait_turn(&sid, &turn2).await;
    assert_eq!(t.load_session(&sid).await["plan"], second["entries"]);

    // The plan survives a restart.
    t.kill().await;
    let t = t.respawn().await;
    t.initialize().await;
    assert_eq!(t.load_session(&sid).await["plan"], second["entries"]);

    // A conversation rewind of the second turn brings the first plan back, announced.
    t.request_ok(
        "session/rewind",
        json!({"sessionId": sid, "turnId": turn2, "restore": "conversation"}),
    )
    .await;
    let back = t.wait_event_type(&sid, "plan").await;
    assert_eq!(back["entries"], first["entries"]);
    assert_eq!(t.load_session(&sid).await["plan"], first["entries"]);
    // And rewinding the first turn leaves no plan.
    t.request_ok(
        "session/rewind",
        json!({"sessionId": sid, "turnId": turn1, "restore": "conversation"}),
    )
    .await;
    let none = t.wait_event_type(&sid, "plan").await;
    assert_eq!(none["entries"], json!([]));
    assert!(t.load_session(&sid).await.get("plan").is_none());
    t.shutdown().await;
}

#[tokio::test]
async fn update_plan_is_offered_in_plan_mode_and_refuses_a_plan_over_its_caps() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    let steps: Vec<(String, &str)> = (0..65).map(|i| (format!("step {i}"), "pending")).collect();
    let too_many = json!({"entries": steps.iter().map(|(c, s)| json!({"content": c, "status": s})).collect::<Vec<_>>()});
    mock.push(Script::tool_call_reply("p1", "update_plan", too_many));
    mock.push(Script::text_reply("too long"));
    let t = Tandem::start(&mock).await;
    t.initialize().await;
    let sid = t.new_session_in(ws.path(), "plan").await;
    let turn = t.prompt(&sid, "plan it").await;
    let events = t.wait_turn(&sid, &turn).await;
    let offered: Vec<String> = mock.request(0)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(offered.contains(&"update_plan".to_owned()), "{offered:?}");
    assert!(!offered.contains(&"shell".to_owned()));
    assert!(events.iter().all(|e| e["type"] != "plan"), "{events:#?}");
    let failed = events
        .iter()
        .find(|e| e["type"] == "toolCallUpdate" && e["status"] == "failed")
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert!(
        failed["result"].as_str().unwrap().contains("at most 64"),
        "{failed}"
    );
    t.shutdown().await;
}
