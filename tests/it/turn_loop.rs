//! In-process tests of the turn loop: the session actor and the engine run inside the test's own
//! runtime, with no store and no face, against the loopback mock LLM. They check invariants 2,
//! 3, 5 and 6 of `../shared/DESIGN.md` on the conversation itself (its history and its event
//! stream), in milliseconds instead of a process spawn per test; the binary tests
//! (`stop`, `turns`, `durable`) check the same rules through the wire.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tandem::config::Config;
use tandem::engine::history::{Message, Part, Role};
use tandem::engine::EngineContext;
use tandem::protocol::{Decision, Event, Mode};
use tandem::session::{self, DenyMemory, EventSink, NewSession, Op, SessionHandle};
use tandem::workspace::Workspace;
use tokio::sync::{mpsc, oneshot};

use crate::support::{config_for, wait_timeout, Gate, MockLlm, Script};

/// Every event of the session, as the JSON a client would get (`type` plus the fields).
struct ChannelSink(mpsc::UnboundedSender<Value>);

impl EventSink for ChannelSink {
    fn emit(&self, _session_id: &str, seq: u64, _turn_id: Option<&str>, event: &Event) {
        let mut value = serde_json::to_value(event).unwrap();
        value["seq"] = json!(seq);
        let _ = self.0.send(value);
    }
}

/// One conversation in the test's runtime, with everything it has emitted so far.
struct Harness {
    mock: MockLlm,
    handle: SessionHandle,
    events: mpsc::UnboundedReceiver<Value>,
    seen: Vec<Value>,
    workspace: tempfile::TempDir,
}

impl Harness {
    async fn start(mode: Mode) -> Harness {
        let mock = MockLlm::start().await;
        let workspace = tempfile::tempdir().unwrap();
        let config = Config::parse(&config_for(&mock), &workspace.path().join("config.toml"))
            .expect("the mock's config parses");
        let engine = EngineContext::new(config, Default::default());
        let (tx, events) = mpsc::unbounded_channel();
        let handle = session::spawn(
            engine,
            Arc::new(ChannelSink(tx)),
            NewSession {
                workspace: Workspace::open(vec![workspace.path().to_path_buf()]).unwrap(),
                model: "mock".to_owned(),
                mode,
                store: None,
                client_fs: None,
                mcp: tandem::mcp::McpHub::empty(),
            },
        );
        Harness {
            mock,
            handle,
            events,
            seen: Vec::new(),
            workspace,
        }
    }

    /// Send an op built around a reply closure and wait for the reply.
    async fn call<T: Send + 'static>(
        &self,
        op: impl FnOnce(session::Reply<T>) -> Op,
    ) -> Result<T, session::SessionError> {
        let (tx, rx) = oneshot::channel();
        self.handle.send(op(Box::new(move |result| {
            let _ = tx.send(result);
        })));
        tokio::time::timeout(wait_timeout(), rx)
            .await
            .expect("the session answered in time")
            .expect("the session kept the reply")
    }

    async fn prompt(&self, text: &str) -> String {
        let parts = vec![Part::Text {
            text: text.to_owned(),
        }];
        match self
            .call(|reply| Op::Prompt { parts, reply })
            .await
            .expect("the prompt is admitted")
        {
            tandem::session::PromptOutcome::Turn { turn_id, .. } => turn_id,
            other => panic!("a plain prompt starts a turn, not {other:?}"),
        }
    }

    async fn approve(&self, request_id: &str, decision: Decision) {
        let request_id = request_id.to_owned();
        self.call(|reply| Op::Approve {
            request_id,
            decision,
            message: None,
            edited_content: None,
            arguments_digest: None,
            deny_memory: DenyMemory::ThisCallOnly,
            reply,
        })
        .await
        .expect("the approval is taken");
    }

    async fn stop(&self) -> bool {
        self.call(|reply| Op::Stop { reply })
            .await
            .expect("stop answers")
    }

    /// The next event matching `want`, keeping every event in `seen`.
    async fn wait(&mut self, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        if let Some(found) = self.seen.iter().find(|e| want(e)) {
            return found.clone();
        }
        loop {
            let next = tokio::time::timeout(wait_timeout(), self.events.recv()).await;
            match next {
                Ok(Some(event)) => {
                    self.seen.push(event.clone());
                    if want(&event) {
                        return event;
                    }
                }
                _ => panic!("no {what} event; seen:\n{:#?}", self.seen),
            }
        }
    }

    async fn wait_type(&mut self, ty: &str) -> Value {
        self.wait(ty, |e| e["type"] == ty).await
    }

    fn of_type(&self, ty: &str) -> Vec<&Value> {
        self.seen.iter().filter(|e| e["type"] == ty).collect()
    }

    fn history(&self) -> Vec<Message> {
        self.handle.shared.history_snapshot()
    }
}

/// Invariant 2: every tool call in the history has exactly one result.
fn assert_no_orphan_calls(history: &[Message]) {
    for call in history.iter().flat_map(|m| &m.tool_calls) {
        let results = history
            .iter()
            .filter(|m| {
                m.tool_result
                    .as_ref()
                    .is_some_and(|r| r.tool_call_id == call.id)
            })
            .count();
        assert_eq!(results, 1, "call {} has {results} results", call.id);
    }
}

fn write(id: &str, path: &str) -> (String, String, String) {
    (
        id.to_owned(),
        "write_file".to_owned(),
        json!({"path": path, "content": format!("{path}\n")}).to_string(),
    )
}

#[tokio::test]
async fn every_call_of_a_batch_is_authorized_in_order_before_any_runs_and_results_keep_call_order()
{
    let mut h = Harness::start(Mode::Ask).await;
    h.mock.push(Script::tool_calls(vec![
        write("w1", "one.txt"),
        (
            "r1".to_owned(),
            "read_file".to_owned(),
            json!({"path": "one.txt"}).to_string(),
        ),
        write("w2", "two.txt"),
    ]));
    h.mock.push(Script::text_reply("done"));
    h.prompt("write two files").await;

    let first = h.wait_type("approvalRequested").await;
    assert_eq!(first["toolCallId"], "w1");
    h.approve(first["requestId"].as_str().unwrap(), Decision::Once)
        .await;
    let second = h
        .wait("the second approval", |e| {
            e["type"] == "approvalRequested" && e["toolCallId"] == "w2"
        })
        .await;
    // Authorize first (invariant 3): nothing ran while an approval of the batch was open.
    assert!(
        h.of_type("toolCallUpdate").is_empty(),
        "a call ran before the whole batch was authorized: {:#?}",
        h.of_type("toolCallUpdate")
    );
    assert!(!h.workspace.path().join("one.txt").exists());
    h.approve(second["requestId"].as_str().unwrap(), Decision::Once)
        .await;
    h.wait_type("turnEnded").await;

    // The read ran after the first write, in call order, and saw the file.
    let history = h.history();
    let results: Vec<&str> = history
        .iter()
        .filter_map(|m| m.tool_result.as_ref())
        .map(|r| r.tool_call_id.as_str())
        .collect();
    assert_eq!(
        results,
        ["w1", "r1", "w2"],
        "results are committed in call order"
    );
    let read = history
        .iter()
        .find(|m| {
            m.tool_result
                .as_ref()
                .is_some_and(|r| r.tool_call_id == "r1")
        })
        .unwrap();
    assert!(read.text().contains("one.txt"), "{}", read.text());
    assert_no_orphan_calls(&history);
}

#[tokio::test]
async fn a_stop_at_a_pending_approval_ends_the_turn_and_every_call_gets_a_result() {
    let mut h = Harness::start(Mode::Ask).await;
    h.mock.push(Script::tool_calls(vec![
        write("w1", "a.txt"),
        write("w2", "b.txt"),
    ]));
    h.prompt("write").await;
    h.wait_type("approvalRequested").await;
    assert!(h.stop().await, "a turn was running");
    let ended = h.wait_type("turnEnded").await;
    assert_eq!(ended["reason"], "interrupted");
    let history = h.history();
    assert_no_orphan_calls(&history);
    assert!(history
        .iter()
        .any(|m| m.role == Role::Notice && m.text().contains("stopped")
            || m.notice == Some(tandem::protocol::NoticeKind::Interrupted)));
    assert!(!h.workspace.path().join("a.txt").exists());
    assert!(!h.workspace.path().join("b.txt").exists());
}

#[tokio::test]
async fn a_stop_before_the_first_token_and_one_mid_stream_keep_what_the_user_saw() {
    let mut h = Harness::start(Mode::Ask).await;
    let held = Gate::new();
    h.mock
        .push(Script::new().role().wait_for(&held).text("never").done());
    h.prompt("hello").await;
    held.wait_reached().await;
    assert!(h.stop().await);
    assert_eq!(h.wait_type("turnEnded").await["reason"], "interrupted");
    assert!(h.of_type("assistantMessage").is_empty());

    let middle = Gate::new();
    h.mock.push(
        Script::new()
            .role()
            .text("seen text")
            .wait_for(&middle)
            .text(" unseen")
            .done(),
    );
    h.seen.clear();
    h.prompt("again").await;
    h.wait("the first delta", |e| e["type"] == "assistantDelta")
        .await;
    middle.wait_reached().await;
    assert!(h.stop().await);
    assert_eq!(h.wait_type("turnEnded").await["reason"], "interrupted");
    let history = h.history();
    let last_answer = history
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
        .unwrap();
    assert_eq!(
        last_answer.text(),
        "seen text",
        "the partial answer is kept"
    );
    assert_no_orphan_calls(&history);
}

#[tokio::test]
async fn a_stop_while_a_command_runs_kills_it_and_records_an_interrupted_result() {
    let mut h = Harness::start(Mode::FullAuto).await;
    h.mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": "echo started; sleep 30; touch finished"}),
    ));
    h.prompt("run it").await;
    // Its first output proves the command runs (it is not merely about to start).
    h.wait("the command's first output", |e| {
        e["type"] == "toolCallUpdate" && e["output"].as_str().is_some_and(|o| o.contains("started"))
    })
    .await;
    let asked = std::time::Instant::now();
    assert!(h.stop().await);
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "stop waited for the command"
    );
    assert_eq!(h.wait_type("turnEnded").await["reason"], "interrupted");
    let history = h.history();
    assert_no_orphan_calls(&history);
    let result = history
        .iter()
        .find(|m| {
            m.tool_result
                .as_ref()
                .is_some_and(|r| r.tool_call_id == "s1")
        })
        .unwrap();
    assert_eq!(
        result.tool_result.as_ref().unwrap().status,
        tandem::engine::history::ResultStatus::Interrupted
    );
    assert!(!h.workspace.path().join("finished").exists());
}

#[tokio::test]
async fn steering_is_applied_at_the_next_safe_point_and_never_starts_a_turn() {
    let mut h = Harness::start(Mode::Ask).await;
    // Without a turn, a steer is refused: it cannot start one.
    let refused = h
        .call(|reply| Op::Steer {
            text: "too early".to_owned(),
            reply,
        })
        .await;
    assert!(
        matches!(refused, Err(session::SessionError::NoTurnRunning)),
        "{refused:?}"
    );
    assert!(h.mock.requests().is_empty());

    let held = Gate::new();
    h.mock.push(
        Script::new()
            .role()
            .text("working")
            .wait_for(&held)
            .finish("stop")
            .done(),
    );
    h.mock
        .push(Script::text_reply("took the steer into account"));
    h.prompt("start").await;
    held.wait_reached().await;
    h.call(|reply| Op::Steer {
        text: "also do X".to_owned(),
        reply,
    })
    .await
    .expect("a steer is queued while the turn runs");
    held.open();
    let applied = h.wait_type("steeringApplied").await;
    assert_eq!(applied["text"], "also do X");
    let ended = h.wait_type("turnEnded").await;
    assert_eq!(ended["reason"], "completed");
    assert_eq!(h.of_type("turnStarted").len(), 1, "one turn, not two");
    // The model saw the steer as a user message in the same turn's second request.
    let requests = h.mock.requests();
    assert_eq!(requests.len(), 2);
    let last_user = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .to_string();
    assert!(last_user.contains("also do X"), "{last_user}");
    let seq: Vec<u64> = h.seen.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(
        seq.windows(2).all(|w| w[1] == w[0] + 1),
        "seq has no gaps: {seq:?}"
    );
    assert_no_orphan_calls(&h.history());
}

#[tokio::test]
async fn the_actor_refuses_a_prompt_that_says_nothing_whatever_face_sent_it() {
    let mut h = Harness::start(Mode::Ask).await;
    for parts in [
        vec![],
        vec![Part::Text {
            text: " \n\t".to_owned(),
        }],
        vec![Part::Document {
            mime_type: "text/plain".to_owned(),
            data: "aGk=".to_owned(),
            name: None,
        }],
    ] {
        let refused = h.call(|reply| Op::Prompt { parts, reply }).await;
        assert!(
            matches!(&refused, Err(session::SessionError::InvalidPrompt(_))),
            "{refused:?}"
        );
    }
    h.mock.push(Script::text_reply("hello"));
    h.prompt("a real prompt").await;
    h.wait_type("turnEnded").await;
    assert_eq!(
        h.of_type("turnStarted").len(),
        1,
        "only the real prompt started a turn"
    );
    assert_eq!(h.mock.requests().len(), 1);
}

#[tokio::test]
async fn a_command_denied_for_the_session_is_refused_unasked_also_inside_a_chain_and_in_full_auto()
{
    let mut h = Harness::start(Mode::Ask).await;
    h.mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": "cargo publish --dry-run"}),
    ));
    h.mock.push(Script::tool_call_reply(
        "s2",
        "shell",
        json!({"command": "echo harmless && cargo   publish"}),
    ));
    h.mock.push(Script::text_reply("giving up"));
    h.prompt("publish").await;
    let asked = h.wait_type("approvalRequested").await;
    let request_id = asked["requestId"].as_str().unwrap().to_owned();
    // ACP's `reject_always`: deny, and remember it for the rest of the session.
    h.call(|reply| Op::Approve {
        request_id,
        decision: Decision::Deny,
        message: None,
        edited_content: None,
        arguments_digest: None,
        deny_memory: DenyMemory::RestOfSession,
        reply,
    })
    .await
    .expect("the denial is taken");
    h.wait_type("turnEnded").await;
    assert_eq!(
        h.of_type("approvalRequested").len(),
        1,
        "the chained command was refused without asking"
    );
    let history = h.history();
    let refused = history
        .iter()
        .find(|m| {
            m.tool_result
                .as_ref()
                .is_some_and(|r| r.tool_call_id == "s2")
        })
        .expect("s2 has a result");
    assert!(
        refused
            .text()
            .contains("always reject commands starting with `cargo publish`"),
        "{}",
        refused.text()
    );
    assert_no_orphan_calls(&history);
    // The rule outlives the mode: in fullAuto nothing asks, and it is still refused.
    h.call(|reply| Op::SetMode {
        mode: Mode::FullAuto,
        reply,
    })
    .await
    .unwrap();
    h.mock.push(Script::tool_call_reply(
        "s3",
        "shell",
        json!({"command": "cargo publish"}),
    ));
    h.mock.push(Script::text_reply("still no"));
    h.seen.clear();
    h.prompt("publish again").await;
    h.wait_type("turnEnded").await;
    let history = h.history();
    let refused = history
        .iter()
        .find(|m| {
            m.tool_result
                .as_ref()
                .is_some_and(|r| r.tool_call_id == "s3")
        })
        .expect("s3 has a result");
    assert!(
        refused.text().contains("always reject"),
        "{}",
        refused.text()
    );
    assert!(
        h.of_type("toolCallUpdate")
            .iter()
            .all(|e| e["status"] != "running"),
        "nothing ran: {:#?}",
        h.of_type("toolCallUpdate")
    );
}
