//! Hooks in Claude Code's format over the real binary, with hook scripts written here: every
//! event with its stdin JSON, exit 2 for each blocking event, the JSON decisions, a hook past
//! its timeout killed with its children, untrusted project hooks not run (trust bound to the
//! files' bytes), `Stop` continuing at most 3 times, Claude's tool names as aliases, and hook
//! files out of reach of the model's tools and commands.

use std::path::{Path, PathBuf};

use crate::support::*;
use serde_json::{json, Value};

/// A user config folder (`XDG_CONFIG_HOME`) holding `hooks` as the user's hook file.
fn user_hooks(hooks: Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tandem")).unwrap();
    std::fs::write(
        dir.path().join("tandem/hooks.json"),
        json!({ "hooks": hooks }).to_string(),
    )
    .unwrap();
    dir
}

async fn start(mock: &MockLlm, config_home: &Path) -> Tandem {
    Tandem::start_with(
        TandemOptions::with_mock(mock).env("XDG_CONFIG_HOME", config_home.display().to_string()),
    )
    .await
}

/// One hook entry running `command`.
fn entry(matcher: Option<&str>, command: &str) -> Value {
    let mut e = json!({"hooks": [{"type": "command", "command": command}]});
    if let Some(m) = matcher {
        e["matcher"] = json!(m);
    }
    e
}

/// A command that appends its stdin (one JSON line) to `log`.
fn log_to(log: &Path) -> String {
    format!("cat >> '{0}'; echo >> '{0}'", log.display())
}

fn read_log(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every user message's text of a recorded request, joined.
fn user_texts(request: &Value) -> String {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn hook_runs(t: &Tandem, sid: &str, event: &str) -> Vec<Value> {
    t.events_of_type(sid, "hookRan")
        .into_iter()
        .filter(|e| e["event"] == event)
        .collect()
}

#[tokio::test]
async fn every_event_gets_its_input_and_context_reaches_the_model() {
    let ws = workspace();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("events.jsonl");
    let logged = log_to(&log);
    let config = user_hooks(json!({
        "SessionStart": [entry(None, &format!("{logged}; echo 'the build uses make'"))],
        "UserPromptSubmit": [entry(None, &format!("{logged}; echo 'today is release day'"))],
        "PreToolUse": [entry(Some("Bash"), &logged)],
        "PostToolUse": [entry(Some("Bash"), &logged)],
        "Notification": [entry(None, &logged)],
        "Stop": [entry(None, &logged)],
        "PreCompact": [entry(Some("manual"), &logged)],
    }));
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "c1",
        "shell",
        json!({"command": "echo hi-from-shell"}),
    ));
    mock.push(Script::text_reply("done"));
    let t = start(&mock, config.path()).await;
    t.initialize().await;
    let sid = t.new_session_in(ws.path(), "ask").await;
    let turn = t.prompt(&sid, "run it").await;
    let approval = t.wait_approval(&sid).await;
    // The Notification hook runs beside the waiting turn.
    t.wait_event(&sid, |e| {
        e["type"] == "hookRan" && e["event"] == "Notification"
    })
    .await;
    t.approve(
        &sid,
        approval["requestId"].as_str().unwrap(),
        "once",
        None,
        None,
    )
    .await;
    let events = t.wait_turn(&sid, &turn).await;
    assert!(events
        .iter()
        .any(|e| e["type"] == "turnEnded" && e["reason"] == "completed"));

    // The hooks' stdout of SessionStart and UserPromptSubmit is context for the model, in
    // this request and the next.
    for request in mock.requests() {
        let text = user_texts(&request);
        assert!(text.contains("the build uses make"), "{text}");
        assert!(text.contains("today is release day"), "{text}");
    }

    // A `/compact` runs PreCompact with the manual trigger.
    mock.push(Script::text_reply("summary of the work"));
    let compact = t
        .request_ok("prompt", json!({"sessionId": sid, "content": "/compact"}))
        .await;
    assert_eq!(compact["command"]["name"], "compact");
    t.wait_turn(&sid, compact["turnId"].as_str().unwrap()).await;

    let entries = read_log(&log);
    let of = |event: &str| -> Value {
        entries
            .iter()
            .find(|e| e["hook_event_name"] == event)
            .cloned()
            .unwrap_or_else(|| panic!("no {event} in {entries:#?}"))
    };
    let root = canonical(ws.path()).display().to_string();
    for e in &entries {
        assert_eq!(e["session_id"], sid.as_str(), "{e}");
        assert_eq!(e["cwd"], root.as_str(), "{e}");
    }
    assert_eq!(of("SessionStart")["source"], "startup");
    assert_eq!(of("UserPromptSubmit")["prompt"], "run it");
    let pre = of("PreToolUse");
    assert_eq!(pre["tool_name"], "shell");
    assert_eq!(pre["tool_alias"], "Bash");
    assert_eq!(pre["tool_input"]["command"], "echo hi-from-shell");
    let post = of("PostToolUse");
    assert!(
        post["tool_response"]
            .as_str()
            .unwrap()
            .contains("hi-from-shell"),
        "{post}"
    );
    assert!(of("Notification")["message"]
        .as_str()
        .unwrap()
        .contains("shell"));
    assert_eq!(of("Stop")["stop_hook_active"], false);
    assert_eq!(of("PreCompact")["trigger"], "manual");
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Notification",
        "Stop",
        "PreCompact",
    ] {
        let runs = hook_runs(&t, &sid, event);
        assert_eq!(runs.len(), 1, "{event}: {runs:?}");
        assert_eq!(runs[0]["exitCode"], 0, "{event}");
        assert_eq!(runs[0]["blocked"], false, "{event}");
        assert!(runs[0]["durationMs"].is_u64());
    }
    t.shutdown().await;
}

#[tokio::test]
async fn exit_2_blocks_a_call_and_bash_matches_shell() {
    let ws = workspace();
    let config = user_hooks(json!({
        "PreToolUse": [entry(Some("Bash"), "echo 'no shell in this repository' >&2; exit 2")],
    }));
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "c1",
        "shell",
        json!({"command": "touch ran.txt"}),
    ));
    mock.push(Script::tool_call_reply(
        "r1",
        "read_file",
        json!({"path": "a.txt"}),
    ));
    mock.push(Script::text_reply("ok"));
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let t = start(&mock, config.path()).await;
    t.initialize().await;
    let sid = t.new_session_in(ws.path(), "fullAuto").await;
    let turn = t.prompt(&sid, "go").await;
    let events = t.wait_turn(&sid, &turn).await;
    let blocked = tool_result(&mock.request(1), "c1");
    assert!(blocked.contains("no shell in this repository"), "{blocked}");
    assert!(!ws.path().join("ran.txt").exists(), "the command ran");
    assert!(events.iter().any(|e| e["type"] == "toolCallUpdate"
        && e["toolCallId"] == "c1"
        && e["status"] == "denied"));
    // `Bash` does not match read_file: it runs.
    assert!(tool_result(&mock.request(2), "r1").contains("alpha"));
    let runs = hook_runs(&t, &sid, "PreToolUse");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["exitCode"], 2);
    assert_eq!(runs[0]["blocked"], true);
    assert_eq!(runs[0]["toolCallId"], "c1");
    t.shutdown().await;
}

#[tokio::test]
async fn a_prompt_refused_by_a_hook_never_reaches_the_model() {
    let ws = workspace();
    let config = user_hooks(json!({
        "UserPromptSubmit": [entry(None, "if grep -q 'hunter[2]'; then echo 'the prompt holds a password' >&2; exit 2; fi")],
    }));
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("fine"));
    let t = start(&mock, config.path()).await;
    t.initialize().await;
    let sid = t.new_session(ws.path()).await;
    let refused = t.prompt(&sid, "my password is hunter2").await;
    let events = t.wait_turn(&sid, &refused).await;
    let ended = events.iter().find(|e| e["type"] == "turnEnded").unwrap();
    assert_eq!(ended["reason"], "error", "{ended}");
    assert!(
        ended["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the prompt holds a password"),
        "{ended}"
    );
    assert_eq!(mock.request_count(), 0, "a refused prompt asked the model");
    // Nor does it name the session.
    let listed = t.request_ok("session/list", json!({})).await;
    assert!(!listed.to_string().contains("hunter2"), "{listed}");
    let next = t.prompt(&sid, "hello").await;
    t.wait_turn(&sid, &next).await;
    let request = mock.request(0);
    assert!(!request.to_string().contains("hunter2"), "{request}");
    let loaded = t
        .request_ok("session/load", json!({"sessionId": sid}))
        .await;
    assert!(!loaded.to_string().contains("hunter2"), "{loaded}");

    t.shutdown().await;
}

#[tokio::test]
async fn a_stop_hook_continues_the_turn_at_most_three_times() {
    let ws = workspace();
    let config = user_hooks(json!({
        "Stop": [entry(None, "echo 'run the tests before you stop' >&2; exit 2")],
    }));
    let mock = MockLlm::start().await;
    for i in 0..4 {
        mock.push(Script::text_reply(&format!("answer {i}")));
    }
    let t = start(&mock, config.path()).await;
    t.initialize().await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "work").await;
    let events = t.wait_turn(&sid, &turn).await;
    assert_eq!(
        mock.request_count(),
        4,
        "the first answer and 3 continuations"
    );
    let last = mock.request(3);
    assert_eq!(
        user_texts(&last)
            .matches("<hook-feedback event=\"Stop\">")
            .count(),
        3,
        "{last}"
    );
    let runs: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "hookRan" && e["event"] == "Stop")
        .collect();
    assert_eq!(runs.len(), 4, "{runs:?}");
    assert!(events.iter().any(|e| e["type"] == "notice"
        && e["text"]
            .as_str()
            .unwrap()
            .contains("continued it 3 times already")));
    assert!(events
        .iter()
        .any(|e| e["type"] == "turnEnded" && e["reason"] == "completed"));
    t.shutdown().await;
}

#[tokio::test]
async fn json_decisions_allow_deny_and_ask() {
    let ws = workspace();
    let decision = |d: &str, why: &str| {
        format!(
            "echo '{{\"hookSpecificOutput\":{{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"{d}\",\"permissionDecisionReason\":\"{why}\"}}}}'"
        )
    };
    let config = user_hooks(json!({
        "PreToolUse": [
            entry(Some("Write"), &decision("allow", "writes are fine")),
            entry(Some("Bash"), &decision("deny", "commands are off today")),
            entry(Some("Edit"), &decision("ask", "edits need a look")),
        ],
    }));
    std::fs::write(ws.path().join("e.txt"), "old\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "w.txt", "content": "written\n"}),
    ));
    mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": "touch ran.txt"}),
    ));
    mock.push(Script::text_reply("first turn done"));
    mock.push(Script::tool_call_reply(
        "e1",
        "edit_file",
        json!({"path": "e.txt", "old_string": "old", "new_string": "new"}),
    ));
    mock.push(Script::text_reply("second turn done"));
    let t = start(&mock, config.path()).await;
    t.initialize().await;
    // `ask`: the write would ask; the hook's allow skips the approval.
    let sid = t.new_session_in(ws.path(), "ask").await;
    let turn = t.prompt(&sid, "write").await;
    let events = t.wait_turn(&sid, &turn).await;
    assert!(
        events.iter().all(|e| e["type"] != "approvalRequested"),
        "{events:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("w.txt")).unwrap(),
        "written\n"
    );
    assert!(tool_result(&mock.request(2), "s1").contains("commands are off today"));
    assert!(!ws.path().join("ran.txt").exists());

    // `fullAuto` would not ask; the hook's ask does.
    t.request_ok("setMode", json!({"sessionId": sid, "mode": "fullAuto"}))
        .await;
    let turn = t.prompt(&sid, "edit").await;
    let approval = t.wait_approval(&sid).await;
    assert!(
        approval["reason"]
            .as_str()
            .unwrap()
            .contains("edits need a look"),
        "{approval}"
    );
    t.approve(
        &sid,
        approval["requestId"].as_str().unwrap(),
        "once",
        None,
        None,
    )
    .await;
    t.wait_turn(&sid, &turn).await;
    assert_eq!(
        std::fs::read_to_string(ws.path().join("e.txt")).unwrap(),
        "new\n"
    );
    t.shutdown().await;
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn a_hook_past_its_timeout_is_killed_with_its_children_and_its_call_is_blocked() {
    let ws = workspace();
    let logs = tempfile::tempdir().unwrap();
    let pid_file = logs.path().join("child.pid");
    let config = user_hooks(json!({
        "PreToolUse": [{"matcher": "read_file", "hooks": [{
            "type": "command",
            "command": format!("sleep 300 & echo $! > '{}'; wait", pid_file.display()),
            "timeout": 1,
        }]}],
        // A failing Stop hook warns and does not block.
        "Stop": [entry(None, "echo 'lint crashed' >&2; exit 1")],
    }));
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    // Two reads in one answer: the first would start early as the second streams.
    mock.push(Script::tool_calls(vec![
        ("r1", "read_file", json!({"path": "a.txt"}).to_string()),
        ("r2", "list_dir", json!({"path": "."}).to_string()),
    ]));
    mock.push(Script::text_reply("ok"));
    let t = start(&mock, config.path()).await;
    t.initialize().await;
    let sid = t.new_session(ws.path()).await;
    let turn = t.prompt(&sid, "read").await;
    let events = t.wait_turn(&sid, &turn).await;
    let result = tool_result(&mock.request(1), "r1");
    assert!(result.contains("failed"), "{result}");
    assert!(result.contains("timeout"), "{result}");
    assert!(!result.contains("alpha"), "the read ran: {result}");
    // A call a PreToolUse hook sees is never started early, before the hook decided.
    assert!(
        !events.iter().any(|e| e["type"] == "toolCallUpdate"
            && e["toolCallId"] == "r1"
            && e["status"] == "running"),
        "{events:#?}"
    );
    let run = hook_runs(&t, &sid, "PreToolUse").remove(0);
    assert!(run["exitCode"].is_null(), "{run}");
    assert_eq!(run["blocked"], true);
    let child: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !gone(child) {
        assert!(
            std::time::Instant::now() < deadline,
            "the hook's child {child} outlived it"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let stop = hook_runs(&t, &sid, "Stop").remove(0);
    assert_eq!(stop["exitCode"], 1);
    assert_eq!(stop["blocked"], false);
    assert!(events.iter().any(|e| e["type"] == "notice"
        && e["kind"] == "warning"
        && e["text"].as_str().unwrap().contains("lint crashed")));
    assert!(events
        .iter()
        .any(|e| e["type"] == "turnEnded" && e["reason"] == "completed"));
    t.shutdown().await;
}

fn project_hooks(root: &Path, log: &Path) -> PathBuf {
    let file = root.join(".tandem/hooks.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(
        &file,
        json!({"hooks": {"UserPromptSubmit": [entry(None, &log_to(log))]}}).to_string(),
    )
    .unwrap();
    file
}

#[tokio::test]
async fn project_hooks_run_only_once_trusted_and_a_changed_file_asks_again() {
    let ws = workspace();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("project.jsonl");
    let file = project_hooks(ws.path(), &log);
    let mock = MockLlm::start().await;
    let no_user_hooks = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let t = Tandem::start_with(TandemOptions::with_mock(&mock).data_dir(data.path()).env(
        "XDG_CONFIG_HOME",
        no_user_hooks.path().display().to_string(),
    ))
    .await;
    t.initialize().await;
    let sid = t.new_session(ws.path()).await;
    let listed = t.request_ok("hooks/list", json!({"sessionId": sid})).await;
    assert_eq!(listed["trusted"], false, "{listed}");
    assert_eq!(listed["projectFiles"], json!([".tandem/hooks.json"]));
    assert_eq!(listed["hooks"][0]["event"], "UserPromptSubmit");
    assert_eq!(listed["hooks"][0]["source"], "project");
    mock.push(Script::text_reply("one"));
    let turn = t.prompt(&sid, "before trust").await;
    t.wait_turn(&sid, &turn).await;
    assert!(read_log(&log).is_empty(), "an untrusted hook ran");
    assert!(hook_runs(&t, &sid, "UserPromptSubmit").is_empty());

    t.request_ok("hooks/trust", json!({"sessionId": sid})).await;
    mock.push(Script::text_reply("two"));
    let turn = t.prompt(&sid, "after trust").await;
    t.wait_turn(&sid, &turn).await;
    assert_eq!(read_log(&log).len(), 1);

    // Remembered for the folder.
    let again = t.new_session(ws.path()).await;
    let listed = t
        .request_ok("hooks/list", json!({"sessionId": again}))
        .await;
    assert_eq!(listed["trusted"], true);

    // Any change to the file's bytes (here one space) needs trust again.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{text} ")).unwrap();
    let changed = t.new_session(ws.path()).await;
    let listed = t
        .request_ok("hooks/list", json!({"sessionId": changed}))
        .await;
    assert_eq!(listed["trusted"], false);
    mock.push(Script::text_reply("three"));
    let turn = t.prompt(&changed, "changed").await;
    t.wait_turn(&changed, &turn).await;
    assert_eq!(read_log(&log).len(), 1, "a changed hook file ran untrusted");

    // Nothing to trust in a folder without project hooks.
    let empty = workspace();
    let bare = t.new_session(empty.path()).await;
    let err = t
        .request_err("hooks/trust", json!({"sessionId": bare}))
        .await;
    assert_eq!(err.kind, "invalidParams");
    assert!(err.message.contains("no project hooks"), "{err:?}");
    t.shutdown().await;
}

#[tokio::test]
async fn hook_files_are_out_of_reach_of_file_tools_and_commands() {
    let ws = workspace();
    let logs = tempfile::tempdir().unwrap();
    let file = project_hooks(ws.path(), &logs.path().join("x.jsonl"));
    let before = std::fs::read(&file).unwrap();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": ".tandem/hooks.json", "content": "{\"hooks\":{}}"}),
    ));
    mock.push(Script::tool_call_reply(
        "s1",
        "shell",
        json!({"command": "echo '{}' > .tandem/hooks.json; echo x > .tandem/planted.sh; echo done"}),
    ));
    mock.push(Script::text_reply("tried"));
    let config = tempfile::tempdir().unwrap();
    let t = start(&mock, config.path()).await;
    t.initialize().await;
    let sid = t.new_session_in(ws.path(), "fullAuto").await;
    let turn = t.prompt(&sid, "rewrite the hooks").await;
    t.wait_turn(&sid, &turn).await;
    let refused = tool_result(&mock.request(1), "w1");
    assert!(refused.contains("protected"), "{refused}");
    let shell = tool_result(&mock.request(2), "s1");
    assert!(shell.contains("done"), "{shell}");
    assert_eq!(std::fs::read(&file).unwrap(), before, "{shell}");
    assert!(!ws.path().join(".tandem/planted.sh").exists(), "{shell}");
    t.shutdown().await;
}
