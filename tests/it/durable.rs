//! Durable sessions through the real binary and real SQLite files: SIGKILL at a pending
//! approval, during an approved shell command, and at 50 seeded random points of a turn with
//! reads, a write and shell calls; then restart, load and continue. Nothing acknowledged is
//! lost, no side effect runs twice, and the database stays intact.

use std::path::Path;
use std::time::Duration;

use crate::support::*;
use serde_json::{json, Value};

fn database(data_dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(data_dir.join("tandem.sqlite3")).expect("open the session database")
}

fn count_lines(path: &Path, needle: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.trim() == needle)
        .count()
}

#[tokio::test]
async fn sigkill_at_a_pending_approval_then_resume_and_write_once() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "once.txt", "content": "written once\n"}),
    ));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "write it").await;
    let approval = t.wait_approval(&sid).await;
    let request_id = approval["requestId"].as_str().unwrap().to_owned();
    let seen = t.events(&sid).len() as u64;
    t.kill().await;
    assert!(!ws.path().join("once.txt").exists());

    mock.push(Script::text_reply("done after the restart"));
    let t = t.respawn().await;
    t.initialize().await;
    let loaded = t.load_session(&sid).await;
    assert_eq!(loaded["state"], "running");
    let pending = loaded["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{loaded:#}");
    assert_eq!(pending[0]["type"], "approvalRequested");
    assert_eq!(
        pending[0]["requestId"],
        request_id.as_str(),
        "same request id after restart"
    );
    let messages = loaded["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["text"], "write it");
    assert_eq!(messages[1]["toolCalls"][0]["toolCallId"], "w1");

    // The resumed turn asks again with the same id; answering it continues the turn.
    let again = t.wait_approval(&sid).await;
    assert_eq!(again["requestId"], request_id.as_str());
    t.approve(&sid, &request_id, "once", None, None).await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("once.txt")).unwrap(),
        "written once\n"
    );
    let events = t.events(&sid);
    assert_eq!(
        events[0]["seq"].as_u64().unwrap(),
        seen + 1,
        "seq continues across the restart"
    );
    assert_seq_contiguous(&events);
    let request = mock.request(1);
    let results: Vec<&Value> = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 1);
    assert!(results[0]["content"].as_str().unwrap().starts_with("Wrote"));
    t.shutdown().await;
}

#[tokio::test]
async fn an_answered_approval_is_not_asked_again_after_a_crash() {
    let ws = workspace();
    let gate = Gate::new();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_calls(vec![
        (
            "s1",
            "shell",
            json!({"command": "echo first >> log"}).to_string(),
        ),
        (
            "s2",
            "shell",
            json!({"command": "echo second >> log"}).to_string(),
        ),
    ]));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "run both").await;
    let first = t.wait_approval(&sid).await;
    t.approve(
        &sid,
        first["requestId"].as_str().unwrap(),
        "once",
        None,
        None,
    )
    .await;
    // The first call is approved; the crash comes while the second waits.
    let second = t
        .wait_event(&sid, |e| {
            e["type"] == "approvalRequested" && e["toolCallId"] == "s2"
        })
        .await;
    t.kill().await;
    assert!(
        !ws.path().join("log").exists(),
        "nothing ran before both were authorized"
    );

    mock.push(Script::text_reply("both ran").hold_head_until(&gate));
    let t = t.respawn().await;
    t.initialize().await;
    let loaded = t.load_session(&sid).await;
    let pending = loaded["pending"].as_array().unwrap();
    assert_eq!(
        pending.len(),
        1,
        "only the unanswered approval is pending: {loaded:#}"
    );
    assert_eq!(pending[0]["toolCallId"], "s2");
    let again = t.wait_approval(&sid).await;
    assert_eq!(
        again["toolCallId"], "s2",
        "s1's recorded approval is not asked again"
    );
    assert_eq!(again["requestId"], second["requestId"]);
    t.approve(
        &sid,
        again["requestId"].as_str().unwrap(),
        "once",
        None,
        None,
    )
    .await;
    gate.open();
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    assert_eq!(count_lines(&ws.path().join("log"), "first"), 1);
    assert_eq!(count_lines(&ws.path().join("log"), "second"), 1);
    t.shutdown().await;
}

#[tokio::test]
async fn sigkill_during_an_approved_shell_command_reports_it_interrupted() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": "echo ran >> log; echo started; sleep 30"}),
    ));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "run it").await;
    let approval = t.wait_approval(&sid).await;
    t.approve(
        &sid,
        approval["requestId"].as_str().unwrap(),
        "once",
        None,
        None,
    )
    .await;
    t.wait_event(&sid, |e| {
        e["type"] == "toolCallUpdate" && e["output"].as_str().is_some_and(|o| o.contains("started"))
    })
    .await;
    t.kill().await;

    mock.push(Script::text_reply("I see it was interrupted"));
    let t = t.respawn().await;
    t.initialize().await;
    let loaded = t.load_session(&sid).await;
    assert_eq!(loaded["state"], "idle");
    assert!(loaded["pending"].as_array().unwrap().is_empty());
    let call = &loaded["messages"][1]["toolCalls"][0];
    assert_eq!(call["toolCallId"], "s1");
    assert_eq!(call["status"], "interrupted", "{loaded:#}");
    assert!(call["result"].as_str().unwrap().contains("not run again"));
    t.prompt(&sid, "what happened?").await;
    t.wait_turn_ended(&sid).await;
    let told = mock.request(1).to_string();
    assert!(told.contains("not run again"), "the model is told");
    assert_eq!(
        count_lines(&ws.path().join("log"), "ran"),
        1,
        "never re-run"
    );
    t.shutdown().await;
}

#[tokio::test]
async fn a_fresh_process_loads_the_whole_history_in_order() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .role()
            .reasoning("look first")
            .text("Reading.")
            .tool_call("r1", "read_file", json!({"path": "a.txt"}).to_string())
            .finish("tool_calls")
            .usage(50, 5)
            .done(),
    );
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "b.txt", "content": "beta\n"}),
    ));
    mock.push(Script::text_reply("All done."));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "copy it").await;
    let approval = t.wait_approval(&sid).await;
    t.approve(
        &sid,
        approval["requestId"].as_str().unwrap(),
        "alwaysTool",
        None,
        None,
    )
    .await;
    t.wait_turn_ended(&sid).await;
    t.switch_model(&sid, "mock-2").await;
    let live = t.load_session(&sid).await;
    let t = {
        t.kill().await;
        t.respawn().await
    };
    t.initialize().await;
    let list = t.request_ok("session/list", json!({})).await;
    let listed = &list["sessions"][0];
    assert_eq!(listed["sessionId"], sid.as_str());
    assert_eq!(listed["title"], "copy it");
    assert_eq!(listed["model"], "mock-2");
    let loaded = t.load_session(&sid).await;
    assert_eq!(
        loaded["messages"], live["messages"],
        "the store holds what memory held"
    );
    assert_eq!(loaded["model"], "mock-2");
    let roles: Vec<&str> = loaded["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        vec!["user", "assistant", "assistant", "assistant", "notice"],
        "{loaded:#}"
    );
    let messages = loaded["messages"].as_array().unwrap();
    assert_eq!(messages[1]["reasoning"], "look first");
    assert_eq!(messages[1]["toolCalls"][0]["status"], "completed");
    assert!(messages[1]["toolCalls"][0]["result"]
        .as_str()
        .unwrap()
        .contains("alpha"));
    assert_eq!(messages[2]["toolCalls"][0]["diff"][0]["path"], "b.txt");
    assert_eq!(messages[3]["text"], "All done.");
    assert_eq!(messages[4]["kind"], "model_switch");
    // The remembered rule survives: the next write is not asked.
    mock.push(Script::tool_call_reply(
        "w2",
        "write_file",
        json!({"path": "c.txt", "content": "gamma\n"}),
    ));
    mock.push(Script::text_reply("ok"));
    t.prompt(&sid, "one more").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    assert!(t.events_of_type(&sid, "approvalRequested").is_empty());
    assert!(ws.path().join("c.txt").exists());
    t.shutdown().await;
}

/// A tiny deterministic generator, so every kill point can be reproduced from its seed.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn push_scenario(mock: &MockLlm) {
    mock.push(Script::tool_calls(vec![
        ("r1", "read_file", json!({"path": "a.txt"}).to_string()),
        ("l1", "list_dir", json!({"path": "."}).to_string()),
    ]));
    mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": "echo s1 >> log; sleep 0.02"}),
    ));
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "b.txt", "content": "beta\n"}),
    ));
    mock.push(Script::tool_call_reply(
        "s2",
        "shell",
        json!({"command": "echo s2 >> log; sleep 0.02"}),
    ));
    mock.push(
        Script::new()
            .role()
            .text("All ")
            .text("done ")
            .text("now.")
            .finish("stop")
            .done(),
    );
}

#[tokio::test]
async fn sigkill_at_fifty_random_points_loses_nothing_and_repeats_nothing() {
    let mut rng = SplitMix(0x7A4D_E3C0);
    for round in 0..50 {
        let ws = workspace();
        std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
        let mock = MockLlm::start().await;
        push_scenario(&mock);
        let t = Tandem::start(&mock).await;
        let sid = t
            .new_session_with(ws.path(), json!({"mode": "fullAuto"}))
            .await["sessionId"]
            .as_str()
            .unwrap()
            .to_owned();
        t.prompt(&sid, "do the scenario").await;
        // Kill after a random number of events, plus a random sub-millisecond offset so the
        // kill also lands inside tool runs and commits, not only between events.
        let target = 1 + (rng.next() % 40) as usize;
        let offset = Duration::from_micros(rng.next() % 2_000);
        t.wait_event(&sid, |_| true).await;
        loop {
            let events = t.events(&sid);
            if events.len() >= target || events.iter().any(|e| e["type"] == "turnEnded") {
                break;
            }
            t.wait_event(&sid, |_| true).await;
        }
        tokio::time::sleep(offset).await;
        t.kill().await;
        let acknowledged = t.events(&sid);

        // Everything the client saw that is persisted as a row is in the database.
        {
            let db = database(t.data_dir());
            let check: String = db
                .query_row("PRAGMA integrity_check", [], |r| r.get(0))
                .unwrap();
            assert_eq!(check, "ok", "round {round}");
            for event in &acknowledged {
                let ty = event["type"].as_str().unwrap();
                let streamed = ty == "assistantDelta"
                    || ty == "reasoningDelta"
                    || (ty == "toolCallUpdate" && event.get("output").is_some());
                if streamed {
                    continue;
                }
                let seq = event["seq"].as_i64().unwrap();
                let stored: Option<String> = db
                    .query_row(
                        "SELECT type FROM events WHERE session_id = ?1 AND seq = ?2",
                        rusqlite::params![sid, seq],
                        |r| r.get(0),
                    )
                    .ok();
                assert_eq!(
                    stored.as_deref(),
                    Some(ty),
                    "round {round}: acknowledged event seq {seq} ({ty}) lost"
                );
            }
        }

        // Restart, load, and let the turn finish; extra replies cover any resumed requests.
        for _ in 0..4 {
            mock.push(Script::text_reply("resumed and done"));
        }
        let t = t.respawn().await;
        t.initialize().await;
        let loaded = t.load_session(&sid).await;
        if loaded["state"] == "running" {
            let ended = t.wait_turn_ended(&sid).await;
            assert_ne!(ended["reason"], "error", "round {round}: {ended}");
        }
        let log = ws.path().join("log");
        assert!(count_lines(&log, "s1") <= 1, "round {round}: s1 ran twice");
        assert!(count_lines(&log, "s2") <= 1, "round {round}: s2 ran twice");
        // A shell call recorded as completed really ran exactly once.
        let loaded = t.load_session(&sid).await;
        for message in loaded["messages"].as_array().unwrap() {
            for call in message["toolCalls"].as_array().into_iter().flatten() {
                let id = call["toolCallId"].as_str().unwrap();
                if (id == "s1" || id == "s2") && call["status"] == "completed" {
                    assert_eq!(
                        count_lines(&log, id),
                        1,
                        "round {round}: {id} completed but log says otherwise"
                    );
                }
                assert!(
                    call.get("status").is_some(),
                    "round {round}: {id} left without a result: {loaded:#}"
                );
            }
        }
        t.shutdown().await;
    }
}

/// The highest `seq` among `events`.
fn max_seq(events: &[Value]) -> u64 {
    events
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .max()
        .unwrap_or(0)
}

#[tokio::test]
async fn a_crash_mid_stream_never_repeats_a_seq_and_a_clean_stop_leaves_no_gap() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    // A stream that sends three deltas and then hangs until the process is killed.
    let hang = Gate::new();
    mock.push(
        Script::new()
            .role()
            .text("one ")
            .text("two ")
            .text("three ")
            .wait_for(&hang),
    );
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "stream then crash").await;
    t.wait_event(&sid, |e| {
        e["type"] == "assistantDelta" && e["text"] == "three "
    })
    .await;
    let seen = t.events(&sid);
    let crashed_at = max_seq(&seen);
    // The deltas are not stored, so the numbers they used exist only in the reservation.
    assert!(
        seen.iter().any(|e| e["type"] == "assistantDelta"),
        "{seen:#?}"
    );

    mock.push(Script::text_reply("after the crash"));
    let t = t.respawn().await;
    t.initialize().await;
    t.load_session(&sid).await;
    t.prompt(&sid, "go on").await;
    t.wait_turn_ended(&sid).await;
    let after = t.events(&sid);
    assert!(
        after[0]["seq"].as_u64().unwrap() > crashed_at,
        "a seq the client saw before the crash ({crashed_at}) was used again: {after:#?}"
    );
    assert_seq_contiguous(&after);
    let before_stop = max_seq(&after);

    // A clean stop gives the reservation back: the next process numbers on without a gap.
    t.request_ok("shutdown", Value::Null).await;
    t.wait_exit().await;
    mock.push(Script::text_reply("after a clean stop"));
    let t = t.respawn().await;
    t.initialize().await;
    t.load_session(&sid).await;
    t.prompt(&sid, "once more").await;
    t.wait_turn_ended(&sid).await;
    let resumed = t.events(&sid);
    assert_eq!(
        resumed[0]["seq"].as_u64().unwrap(),
        before_stop + 1,
        "seq continues exactly after a clean stop: {resumed:#?}"
    );
    assert_seq_contiguous(&resumed);
    t.shutdown().await;
}

/// Stops the server cleanly (everything committed), runs `edit` on its database while no
/// server has it open, and starts a new server on the same data dir. `edit` must change a row.
async fn restart_after_edit(t: Tandem, db: &rusqlite::Connection, edit: &str) -> Tandem {
    t.request_ok("shutdown", Value::Null).await;
    assert!(t.wait_exit().await.success(), "{}", t.stderr_tail());
    if !edit.is_empty() {
        let changed = db.execute(edit, []).unwrap();
        assert!(changed > 0, "{edit} changed no row");
    }
    let t = t.respawn().await;
    t.initialize().await;
    t
}

/// [`restart_after_edit`] without an edit.
async fn restart_cleanly(t: Tandem, db: &rusqlite::Connection) -> Tandem {
    restart_after_edit(t, db, "").await
}

fn rows_without_display(db: &rusqlite::Connection) -> i64 {
    db.query_row(
        "SELECT COUNT(*) FROM messages WHERE display IS NULL",
        [],
        |row| row.get(0),
    )
    .unwrap()
}

fn stored_display(db: &rusqlite::Connection, position: i64) -> Option<String> {
    db.query_row(
        "SELECT display FROM messages WHERE position = ?1",
        [position],
        |row| row.get(0),
    )
    .unwrap()
}

/// A message whose display entry can no longer change (no open call before it, no call or
/// result of its own) is written with its entry in the same row, so a turn that only talks
/// has no entry left to store when it ends. A message with a call waiting for its result gets
/// its entry only once the call is answered, so no stored entry is ever stale.
#[tokio::test]
async fn a_final_display_entry_is_written_with_its_row_and_an_open_call_waits_for_its_result() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("Hello there."));
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "a.txt", "content": "alpha\n"}),
    ));
    mock.push(Script::text_reply("Written."));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    let db = database(t.data_dir());

    t.prompt(&sid, "hi").await;
    assert_eq!(t.wait_turn_ended(&sid).await["reason"], "completed");
    let talk = t.load_session(&sid).await;
    for position in 0..2 {
        let stored = stored_display(&db, position).expect("an entry stored with the row");
        let stored: Value = serde_json::from_str(&stored).unwrap();
        assert_eq!(stored, talk["messages"][position as usize], "{talk:#}");
    }

    // Suspended at an approval: the prompt's entry is stored with it, the call's is not yet.
    t.prompt(&sid, "write a.txt").await;
    let approval = t.wait_approval(&sid).await;
    let prompt: Value = serde_json::from_str(&stored_display(&db, 2).unwrap()).unwrap();
    assert_eq!(prompt["text"], "write a.txt");
    assert_eq!(stored_display(&db, 3), None, "the call has no result yet");

    t.approve(
        &sid,
        approval["requestId"].as_str().unwrap(),
        "once",
        None,
        None,
    )
    .await;
    assert_eq!(t.wait_turn_ended(&sid).await["reason"], "completed");
    // Once the turn ended, the call's entry carries its result, and every row has an entry.
    let t = restart_cleanly(t, &db).await;
    assert_eq!(rows_without_display(&db), 0);
    let call: Value = serde_json::from_str(&stored_display(&db, 3).unwrap()).unwrap();
    assert_eq!(call["toolCalls"][0]["status"], "completed", "{call:#}");
    let loaded = t.load_session(&sid).await;
    assert_eq!(loaded["messages"][3]["toolCalls"][0]["status"], "completed");
    t.shutdown().await;
}

/// A resume sends the display entries stored as each turn ended instead of parsing the
/// history, parses the history when a turn needs it, and falls back to parsing whatever has no
/// usable entry (a database from before entries existed, a damaged entry). A damaged message
/// does not stop the load; it stops the next turn with an error that names it.
#[tokio::test]
async fn a_resume_sends_stored_display_entries_and_parses_the_history_when_a_turn_needs_it() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "r1",
        "read_file",
        json!({"path": "a.txt"}),
    ));
    mock.push(Script::text_reply("It says alpha."));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "what is in a.txt?").await;
    assert_eq!(t.wait_turn_ended(&sid).await["reason"], "completed");
    let live = t.load_session(&sid).await;
    assert_eq!(live["messages"].as_array().unwrap().len(), 3, "{live:#}");

    // Every row of the ended turn has its entry: the user prompt, the assistant's call, the
    // tool result (an empty entry: it shows inside its call) and the answer.
    let db = database(t.data_dir());
    let t = restart_cleanly(t, &db).await;
    assert_eq!(rows_without_display(&db), 0);
    let hidden: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM messages WHERE display = '' AND role = 'tool'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(hidden, 1);

    // The load sends the stored entries as they are: an entry changed in the database shows.
    let t = restart_after_edit(
        t,
        &db,
        "UPDATE messages SET display = replace(display, 'It says alpha.', 'It says alpha (stored).')
         WHERE display LIKE '%It says alpha.%'",
    )
    .await;
    let loaded = t.load_session(&sid).await;
    assert_eq!(loaded["messages"][2]["text"], "It says alpha (stored).");
    assert_eq!(
        loaded["messages"].as_array().unwrap()[..2],
        live["messages"].as_array().unwrap()[..2]
    );

    // Without entries (a database written before they existed) the load parses the rows and
    // gives the same history, then stores the entries for the next resume.
    let t = restart_after_edit(t, &db, "UPDATE messages SET display = NULL").await;
    let loaded = t.load_session(&sid).await;
    assert_eq!(loaded["messages"], live["messages"], "{loaded:#}");
    let t = restart_cleanly(t, &db).await;
    assert_eq!(rows_without_display(&db), 0);

    // A truncated entry is not sent: that row and the rest are parsed instead.
    let t = restart_after_edit(
        t,
        &db,
        "UPDATE messages SET display = substr(display, 1, 20) WHERE position = 1",
    )
    .await;
    let loaded = t.load_session(&sid).await;
    assert_eq!(loaded["messages"], live["messages"], "{loaded:#}");

    // A damaged message in the unparsed part: the load still shows the stored history, and
    // the next turn is refused with the message's position instead of running on a history
    // with a hole in it. Nothing is sent to the model.
    let t = restart_after_edit(
        t,
        &db,
        "UPDATE messages SET json = '{\"id\": \"broken' WHERE position = 0",
    )
    .await;
    let loaded = t.load_session(&sid).await;
    assert_eq!(loaded["messages"], live["messages"], "{loaded:#}");
    let requests_before = mock.requests().len();
    let error = t
        .request_err("prompt", json!({"sessionId": sid, "content": "go on"}))
        .await;
    assert_eq!(error.kind, "internal", "{error:?}");
    assert!(
        error.message.contains("damaged message at position 0")
            && error.message.contains("start a new session"),
        "{error:?}"
    );
    assert_eq!(mock.requests().len(), requests_before);
    // The error holds until the row is repaired; other sessions and methods are unaffected.
    let again = t
        .request_err("prompt", json!({"sessionId": sid, "content": "go on"}))
        .await;
    assert_eq!(again.message, error.message);
    assert_eq!(
        t.request_ok("session/list", json!({})).await["sessions"][0]["sessionId"],
        sid.as_str()
    );
    t.shutdown().await;
}

/// The first turn after a resume runs on the whole history: the request the model gets holds
/// every earlier message, parsed from the store only then.
#[tokio::test]
async fn the_first_turn_after_a_resume_sends_the_whole_history_to_the_model() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("first answer"));
    mock.push(Script::text_reply("second answer"));
    mock.push(Script::text_reply("third answer"));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "first question").await;
    t.wait_turn_ended(&sid).await;
    t.prompt(&sid, "second question").await;
    t.wait_turn_ended(&sid).await;
    let db = database(t.data_dir());
    let t = restart_cleanly(t, &db).await;
    t.load_session(&sid).await;
    t.prompt(&sid, "third question").await;
    assert_eq!(t.wait_turn_ended(&sid).await["reason"], "completed");
    let last = mock.requests().last().cloned().unwrap();
    let sent = last.to_string();
    let order: Vec<usize> = [
        "first question",
        "first answer",
        "second question",
        "second answer",
        "third question",
    ]
    .iter()
    .map(|text| {
        sent.find(text)
            .unwrap_or_else(|| panic!("{text:?} missing from the request: {sent}"))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{sent}");
    t.shutdown().await;
}

/// Fail closed when the store cannot write. Another program holds the database's write lock
/// (as a backup tool or a second process would) from the moment the model's shell call is on
/// its way: the call's "started" row cannot be made durable, so the command does not run and
/// its result says why; the turn ends with an error; while the lock is held every new op of
/// the session answers `storeUnavailable`. Once the lock is gone the next prompt saves what
/// was lost first, so after a clean restart the history has the whole failed turn.
#[tokio::test]
async fn a_side_effect_whose_start_cannot_be_stored_does_not_run() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.request_ok("setMode", json!({"sessionId": sid, "mode": "fullAuto"}))
        .await;
    mock.push(Script::text_reply("ready"));
    t.prompt(&sid, "first").await;
    assert_eq!(t.wait_turn_ended(&sid).await["reason"], "completed");

    let gate = Gate::new();
    mock.push(
        Script::new()
            .role()
            .wait_for(&gate)
            .tool_call("c1", "shell", r#"{"command":"touch ran"}"#)
            .finish("tool_calls")
            .done(),
    );
    t.prompt(&sid, "run it").await;
    gate.wait_reached().await;
    let locker = database(t.data_dir());
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    gate.open();

    let result = t
        .wait_event(&sid, |e| {
            e["type"] == "toolCallUpdate" && e["toolCallId"] == "c1" && e["result"].is_string()
        })
        .await;
    assert_eq!(result["status"], "failed", "{result}");
    let text = result["result"].as_str().unwrap();
    assert!(
        text.contains("not run")
            && text.contains("session store cannot write")
            && text.contains("database is locked"),
        "the result names the cause and the next step: {text}"
    );
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "error", "{ended}");
    assert!(ended["error"]["message"]
        .as_str()
        .unwrap()
        .contains("session store cannot write"));
    assert!(
        !ws.path().join("ran").exists(),
        "the command must not have run"
    );
    assert_eq!(
        mock.requests().len(),
        2,
        "the model is not asked again after the failure"
    );

    let refused = t
        .request_err("prompt", json!({"sessionId": sid, "content": "again"}))
        .await;
    assert_eq!(
        (refused.code, refused.kind.as_str()),
        (-32000, "storeUnavailable"),
        "{refused}"
    );
    assert!(refused.message.contains("database is locked"), "{refused}");
    let refused = t
        .request_err("setMode", json!({"sessionId": sid, "mode": "ask"}))
        .await;
    assert_eq!(refused.kind, "storeUnavailable", "{refused}");

    locker.execute_batch("COMMIT").unwrap();
    mock.push(Script::text_reply("back"));
    t.prompt(&sid, "after").await;
    assert_eq!(t.wait_turn_ended(&sid).await["reason"], "completed");

    let t = restart_cleanly(t, &locker).await;
    let loaded = t.load_session(&sid).await;
    let messages = loaded["messages"].as_array().unwrap();
    let texts: Vec<String> = messages
        .iter()
        .map(|m| {
            format!(
                "{}:{}",
                m["role"].as_str().unwrap_or(""),
                m["text"].as_str().unwrap_or("")
            )
        })
        .collect();
    let order = [
        "user:first",
        "assistant:ready",
        "user:run it",
        "user:after",
        "assistant:back",
    ];
    let mut at = 0;
    for text in &texts {
        if at < order.len() && *text == order[at] {
            at += 1;
        }
    }
    assert_eq!(
        at,
        order.len(),
        "the whole history survives, in order: {texts:?}"
    );
    let call = messages
        .iter()
        .find_map(|m| m["toolCalls"].as_array().and_then(|c| c.first()))
        .expect("the failed call is stored");
    assert_eq!(call["status"], "failed", "{call}");
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("notice:") && t.contains("session store cannot write")),
        "the error notice is stored: {texts:?}"
    );
    assert!(!ws.path().join("ran").exists());
    t.shutdown().await;
}

/// A provider that reuses tool call ids (some local servers number calls from `call_0` in
/// every answer; a hostile one repeats them on purpose) must never make two calls one:
/// approvals, the side-effect marks, resume, `session/load` and the next request each keep
/// every call apart.
#[tokio::test]
async fn a_provider_that_reuses_call_ids_never_confuses_two_calls() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    // One answer with two writes under one id: the first is denied, the crash comes while the
    // second waits.
    mock.push(Script::tool_calls(vec![
        (
            "dup",
            "write_file",
            json!({"path": "denied.txt", "content": "never\n"}).to_string(),
        ),
        (
            "dup",
            "write_file",
            json!({"path": "wanted.txt", "content": "yes\n"}).to_string(),
        ),
    ]));
    let t = Tandem::start(&mock).await;
    let sid = t.new_session(ws.path()).await;
    t.prompt(&sid, "write two files").await;
    let first = t.wait_approval(&sid).await;
    assert_eq!(first["arguments"]["path"], "denied.txt");
    t.approve(
        &sid,
        first["requestId"].as_str().unwrap(),
        "deny",
        None,
        None,
    )
    .await;
    let second = t
        .wait_event(&sid, |e| {
            e["type"] == "approvalRequested" && e["arguments"]["path"] == "wanted.txt"
        })
        .await;
    assert_ne!(
        first["toolCallId"], second["toolCallId"],
        "two calls, two ids: {first} {second}"
    );
    t.kill().await;

    // After the restart the pending entry is the second write, and approving it writes that
    // file only.
    mock.push(Script::text_reply("one written"));
    let t = t.respawn().await;
    t.initialize().await;
    let loaded = t.load_session(&sid).await;
    let pending = loaded["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{loaded:#}");
    assert_eq!(pending[0]["arguments"]["path"], "wanted.txt", "{loaded:#}");
    assert_eq!(pending[0]["toolCallId"], second["toolCallId"]);
    let again = t.wait_approval(&sid).await;
    assert_eq!(again["arguments"]["path"], "wanted.txt");
    t.approve(
        &sid,
        again["requestId"].as_str().unwrap(),
        "once",
        None,
        None,
    )
    .await;
    assert_eq!(t.wait_turn_ended(&sid).await["reason"], "completed");
    assert!(
        !ws.path().join("denied.txt").exists(),
        "the denied write ran"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("wanted.txt")).unwrap(),
        "yes\n"
    );
    // The next request pairs each call with its own result.
    let request = mock.request(1);
    let messages = request["messages"].as_array().unwrap();
    let call_ids: Vec<&str> = messages
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    let result_ids: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(call_ids.len(), 2);
    assert_ne!(call_ids[0], call_ids[1], "{request:#}");
    assert_eq!(call_ids, result_ids, "{request:#}");

    // A later turn reuses the id of a completed command: the first answer's command runs, the
    // crash comes while the second answer's command (same id again) waits; the resumed turn
    // asks for it instead of treating it as the one that ran.
    mock.push(Script::tool_call_reply(
        "dup",
        "shell",
        json!({"command": "echo first >> log"}),
    ));
    mock.push(Script::tool_call_reply(
        "dup",
        "shell",
        json!({"command": "echo second >> log"}),
    ));
    t.prompt(&sid, "run two commands").await;
    let run = t
        .wait_event(&sid, |e| {
            e["type"] == "approvalRequested" && e["command"] == "echo first >> log"
        })
        .await;
    t.approve(&sid, run["requestId"].as_str().unwrap(), "once", None, None)
        .await;
    let waiting = t
        .wait_event(&sid, |e| {
            e["type"] == "approvalRequested" && e["command"] == "echo second >> log"
        })
        .await;
    t.kill().await;
    assert_eq!(count_lines(&ws.path().join("log"), "first"), 1);

    mock.push(Script::text_reply("both ran"));
    let t = t.respawn().await;
    t.initialize().await;
    let loaded = t.load_session(&sid).await;
    let pending = loaded["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{loaded:#}");
    assert_eq!(pending[0]["command"], "echo second >> log", "{loaded:#}");
    let asked = t.wait_approval(&sid).await;
    assert_eq!(asked["requestId"], waiting["requestId"]);
    t.approve(
        &sid,
        asked["requestId"].as_str().unwrap(),
        "once",
        None,
        None,
    )
    .await;
    assert_eq!(t.wait_turn_ended(&sid).await["reason"], "completed");
    let log = ws.path().join("log");
    assert_eq!(count_lines(&log, "first"), 1, "the first command ran again");
    assert_eq!(count_lines(&log, "second"), 1);
    // The display history shows every call with its own result.
    let loaded = t.load_session(&sid).await;
    let shown: Vec<&Value> = loaded["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["toolCalls"].as_array().into_iter().flatten())
        .collect();
    assert_eq!(shown.len(), 4, "{loaded:#}");
    let mut ids: Vec<&str> = shown
        .iter()
        .map(|c| c["toolCallId"].as_str().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4, "every call has its own id: {loaded:#}");
    for call in &shown {
        assert!(
            call["result"].is_string(),
            "every call shows its result: {loaded:#}"
        );
    }
    t.shutdown().await;
}
