//! MCP tools end to end: the real `tandem` binary with real MCP servers (the Python SDK's
//! `tests/mcp/stdio_server.py` and `http_server.py`, the npm reference servers) and the mock LLM:
//! status events, approvals that name the server, the environment filter, risk and plan mode,
//! timeouts, crashes and the restart at the next turn, a server that cannot start, `.mcp.json`
//! trust bound to the file's content hash, HTTP with a bearer token from the environment,
//! `tools/list_changed`, images, and no server process left once tandem is gone.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::support::mcp::{mcp_dir, npm_server, python, stdio_server_toml, PyServer};
use crate::support::*;

/// MCP servers take seconds to start under load; every wait here gets a minute.
fn opts(mock: &MockLlm, servers: &str) -> TandemOptions {
    TandemOptions::with_mock(mock)
        .config(config_with(mock, servers))
        .env("TANDEM_TEST_TIMEOUT_SECS", "60")
}

/// Waits (up to a minute: the Python SDK imports slowly on a loaded machine) for `server`'s
/// `mcpStatus` with `status`, searching every event of the session, and returns it.
async fn wait_status(t: &Tandem, sid: &str, server: &str, status: &str) -> Value {
    t.wait_any_event_within(
        sid,
        &format!("mcpStatus {server} {status}"),
        std::time::Duration::from_secs(60),
        |e| e["type"] == "mcpStatus" && e["server"] == server && e["status"] == status,
    )
    .await
}

/// The model-facing tool names of a recorded request.
fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

fn request_id(approval: &Value) -> &str {
    approval["requestId"].as_str().expect("requestId")
}

#[tokio::test]
async fn an_mcp_tool_asks_names_its_server_and_always_tool_is_remembered() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "e1",
        "mcp__t__echo",
        json!({"text": "hello from the model"}),
    ));
    mock.push(Script::tool_call_reply(
        "e2",
        "mcp__t__echo",
        json!({"text": "second call"}),
    ));
    mock.push(Script::text_reply("done"));
    let t = Tandem::start_with(opts(&mock, &stdio_server_toml("t", ""))).await;
    let sid = t.new_session(ws.path()).await;

    let ready = wait_status(&t, &sid, "t", "ready").await;
    let tools: Vec<&str> = ready["tools"]
        .as_array()
        .expect("tools when ready")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for name in [
        "mcp__t__echo",
        "mcp__t__env",
        "mcp__t__slow",
        "mcp__t__crash",
    ] {
        assert!(tools.contains(&name), "{name} missing from {tools:?}");
    }
    let starting = t
        .find_event(&sid, |e| {
            e["type"] == "mcpStatus" && e["status"] == "starting"
        })
        .expect("starting comes first");
    assert!(starting["seq"].as_u64() < ready["seq"].as_u64());
    let status = t.request_ok("mcp/status", json!({"sessionId": sid})).await;
    assert_eq!(status["servers"][0]["name"], "t");
    assert_eq!(status["servers"][0]["source"], "config");
    assert_eq!(status["servers"][0]["status"], "ready");

    t.prompt(&sid, "echo something").await;
    // echo is annotated readOnlyHint, but the server's word is not trusted by default: it asks.
    let approval = t.wait_approval(&sid).await;
    assert_eq!(approval["name"], "mcp__t__echo");
    assert_eq!(approval["mcp"], json!({"server": "t", "tool": "echo"}));
    assert_eq!(
        approval["arguments"],
        json!({"text": "hello from the model"})
    );
    assert_eq!(approval["kind"], "read");
    assert!(
        approval["title"].as_str().unwrap().starts_with("t: echo"),
        "{approval}"
    );
    let decisions: Vec<&str> = approval["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["decision"].as_str())
        .collect();
    assert!(decisions.contains(&"alwaysTool"), "{decisions:?}");
    t.approve(&sid, request_id(&approval), "alwaysTool", None, None)
        .await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed", "{ended}");
    assert_eq!(
        t.events_of_type(&sid, "approvalRequested").len(),
        1,
        "alwaysTool covers the second call"
    );

    let first = mock.request(0);
    let echo = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__t__echo")
        .expect("the MCP tool is offered");
    assert_eq!(
        echo["function"]["parameters"]["properties"]["text"]["type"], "string",
        "the server's JSON Schema as given: {echo}"
    );
    assert_eq!(tool_result(&mock.request(1), "e1"), "hello from the model");
    assert_eq!(tool_result(&mock.request(2), "e2"), "second call");
    let call = t
        .find_event(&sid, |e| e["type"] == "toolCall" && e["toolCallId"] == "e1")
        .expect("toolCall e1");
    assert_eq!(call["mcp"], json!({"server": "t", "tool": "echo"}));
    t.shutdown().await;
}

#[tokio::test]
async fn a_denied_mcp_call_is_not_made_and_the_model_hears_why() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply("c1", "mcp__t__crash", json!({})));
    mock.push(Script::text_reply("ok"));
    let t = Tandem::start_with(opts(&mock, &stdio_server_toml("t", ""))).await;
    let sid = t.new_session(ws.path()).await;
    wait_status(&t, &sid, "t", "ready").await;
    t.prompt(&sid, "crash it").await;
    let approval = t.wait_approval(&sid).await;
    assert_eq!(approval["kind"], "other");
    t.approve(&sid, request_id(&approval), "deny", Some("not that"), None)
        .await;
    t.wait_turn_ended(&sid).await;
    assert!(tool_result(&mock.request(1), "c1").contains("not that"));
    // Denied, so never called: the server did not crash.
    let status = t.request_ok("mcp/status", json!({"sessionId": sid})).await;
    assert_eq!(status["servers"][0]["status"], "ready", "{status}");
    t.shutdown().await;
}

#[tokio::test]
async fn a_stdio_server_sees_only_the_base_the_named_variables_and_its_env() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply("v1", "mcp__t__env", json!({})));
    mock.push(Script::text_reply("ok"));
    let servers = stdio_server_toml(
        "t",
        "env_vars = [\"TANDEM_MCP_PASSED\"]\nenv = { LITERAL_SETTING = \"literal\" }\n\
         enabled_tools = [\"env\", \"echo\", \"slow\"]\ndisabled_tools = [\"slow\"]",
    );
    let t = Tandem::start_with(
        opts(&mock, &servers)
            .env("TANDEM_MCP_PASSED", "passed")
            .env("TANDEM_MCP_HIDDEN", "hidden")
            .env("OPENAI_API_KEY", "sk-must-not-leak")
            .env("ANTHROPIC_API_KEY", "sk-ant-must-not-leak"),
    )
    .await;
    let sid = t.new_session_in(ws.path(), "fullAuto").await;
    wait_status(&t, &sid, "t", "ready").await;
    t.prompt(&sid, "show the environment").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    // enabled_tools is an allow-list, disabled_tools a deny-list on top of it.
    let offered: BTreeSet<String> = tool_names(&mock.request(0))
        .into_iter()
        .filter(|n| n.starts_with("mcp__"))
        .collect();
    assert_eq!(
        offered,
        ["mcp__t__echo".to_owned(), "mcp__t__env".to_owned()].into()
    );
    let env: Value = serde_json::from_str(&tool_result(&mock.request(1), "v1"))
        .expect("the env tool answers a JSON object");
    let keys: BTreeSet<&str> = env
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(env["TANDEM_MCP_PASSED"], "passed");
    assert_eq!(env["LITERAL_SETTING"], "literal");
    assert!(keys.contains("PATH"), "{keys:?}");
    // Python itself may add LC_CTYPE when it coerces the C locale; nothing else is allowed.
    let allowed: BTreeSet<&str> = [
        "PATH",
        "HOME",
        "LANG",
        "LC_CTYPE",
        "TANDEM_MCP_PASSED",
        "LITERAL_SETTING",
    ]
    .into();
    let extra: Vec<&&str> = keys.difference(&allowed).collect();
    assert!(
        extra.is_empty(),
        "the server saw more than allowed: {extra:?}"
    );
    t.shutdown().await;
}

#[tokio::test]
async fn trusted_read_only_hints_run_without_asking_and_beside_reads() {
    let ws = workspace();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(
        Script::new()
            .role()
            .tool_call("e1", "mcp__t__barrier", json!({"key": "k"}).to_string())
            .tool_call("r1", "read_file", json!({"path": "a.txt"}).to_string())
            .tool_call("e2", "mcp__t__barrier", json!({"key": "k"}).to_string())
            .finish("tool_calls")
            .done(),
    );
    mock.push(Script::tool_call_reply(
        "s1",
        "mcp__t__slow",
        json!({"ms": 1}),
    ));
    mock.push(Script::text_reply("ok"));
    let servers = stdio_server_toml("t", "trust_read_only_hints = true");
    let t = Tandem::start_with(opts(&mock, &servers)).await;
    let sid = t.new_session(ws.path()).await;
    wait_status(&t, &sid, "t", "ready").await;
    t.prompt(&sid, "echo and read").await;
    // The read-only barrier calls and the read run at once (a barrier call answers "alone"
    // unless the other is in progress at the same time); `slow` has no hint and still asks.
    let approval = t.wait_approval(&sid).await;
    assert_eq!(approval["name"], "mcp__t__slow");
    assert_eq!(
        t.events_of_type(&sid, "approvalRequested").len(),
        1,
        "no approval for the read-only tools"
    );
    let second = mock.request(1);
    assert_eq!(tool_result(&second, "e1"), "met 2");
    assert_eq!(tool_result(&second, "e2"), "met 2");
    assert!(tool_result(&second, "r1").contains("alpha"));
    t.approve(&sid, request_id(&approval), "once", None, None)
        .await;
    t.wait_turn_ended(&sid).await;
    assert_eq!(tool_result(&mock.request(2), "s1"), "slept 1 ms");
    t.shutdown().await;
}

#[tokio::test]
async fn plan_mode_offers_only_low_risk_mcp_tools() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("a plan"));
    mock.push(Script::text_reply("another plan"));
    let servers = format!(
        "{}{}",
        stdio_server_toml("trusting", "trust_read_only_hints = true"),
        stdio_server_toml("wary", "")
    );
    let t = Tandem::start_with(opts(&mock, &servers)).await;
    let sid = t.new_session_in(ws.path(), "plan").await;
    wait_status(&t, &sid, "trusting", "ready").await;
    wait_status(&t, &sid, "wary", "ready").await;
    t.prompt(&sid, "plan it").await;
    t.wait_turn_ended(&sid).await;
    let names = tool_names(&mock.request(0));
    let mcp: BTreeSet<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| n.starts_with("mcp__"))
        .collect();
    assert_eq!(
        mcp,
        [
            "mcp__trusting__barrier",
            "mcp__trusting__echo",
            "mcp__trusting__env"
        ]
        .into(),
        "plan offers the trusted read-only tools only"
    );
    // Out of plan mode every tool is offered.
    t.set_mode(&sid, "ask").await;
    t.prompt(&sid, "again").await;
    t.wait_turn_ended(&sid).await;
    let names = tool_names(&mock.request(1));
    assert!(names.contains(&"mcp__wary__slow".to_owned()), "{names:?}");
    t.shutdown().await;
}

#[tokio::test]
async fn a_timeout_and_a_crash_are_tool_errors_and_the_server_restarts_at_the_next_turn() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "s1",
        "mcp__t__slow",
        json!({"ms": 20000}),
    ));
    mock.push(Script::tool_call_reply("c1", "mcp__t__crash", json!({})));
    mock.push(Script::tool_call_reply(
        "e1",
        "mcp__t__echo",
        json!({"text": "late"}),
    ));
    mock.push(Script::text_reply("first turn done"));
    mock.push(Script::tool_call_reply(
        "e2",
        "mcp__t__echo",
        json!({"text": "back"}),
    ));
    mock.push(Script::text_reply("second turn done"));
    let servers = stdio_server_toml("t", "tool_timeout_ms = 800");
    let t = Tandem::start_with(opts(&mock, &servers)).await;
    let sid = t.new_session_in(ws.path(), "fullAuto").await;
    wait_status(&t, &sid, "t", "ready").await;
    t.prompt(&sid, "break it").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed", "{ended}");

    let timed_out = tool_result(&mock.request(1), "s1");
    assert!(
        timed_out.contains("`t`") && timed_out.contains("800 ms"),
        "{timed_out}"
    );
    let crashed = tool_result(&mock.request(2), "c1");
    assert!(crashed.contains("`t`"), "{crashed}");
    let exited = wait_status(&t, &sid, "t", "exited").await;
    assert!(exited["error"].as_str().is_some(), "{exited}");
    // Until the next turn the server stays down, and its tools' calls say so.
    let late = tool_result(&mock.request(3), "e1");
    assert!(late.contains("`t`"), "{late}");

    let readies = t.events_of_type(&sid, "mcpStatus").len();
    t.prompt(&sid, "try again").await;
    t.wait_turn_ended(&sid).await;
    assert_eq!(tool_result(&mock.request(5), "e2"), "back");
    assert!(
        t.events_of_type(&sid, "mcpStatus").len() > readies,
        "the restart is reported"
    );
    t.shutdown().await;
}

#[tokio::test]
async fn a_server_that_cannot_start_fails_with_the_reason_and_the_turn_runs_without_it() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("no tools needed"));
    // `mute` never answers the handshake: the turn waits for it only up to its startup timeout.
    let servers = "[mcp_servers.gone]\ncommand = \"/nonexistent/tandem-mcp-server\"\n\n\
                   [mcp_servers.stderr]\ncommand = \"/bin/sh\"\n\
                   args = [\"-c\", \"echo the-reason-on-stderr >&2; exit 7\"]\n\n\
                   [mcp_servers.mute]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"exec sleep 300\"]\n\
                   startup_timeout_ms = 1500\n";
    let t = Tandem::start_with(opts(
        &mock,
        &format!("{servers}{}", stdio_server_toml("ok", "")),
    ))
    .await;
    let sid = t.new_session(ws.path()).await;
    let gone = wait_status(&t, &sid, "gone", "failed").await;
    let error = gone["error"].as_str().unwrap();
    assert!(
        error.contains("/nonexistent/tandem-mcp-server") && error.contains("command"),
        "{error}"
    );
    let stderr = wait_status(&t, &sid, "stderr", "failed").await;
    assert!(
        stderr["error"]
            .as_str()
            .unwrap()
            .contains("the-reason-on-stderr"),
        "the stderr tail is in the error: {stderr}"
    );
    t.prompt(&sid, "go").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed");
    let mute = wait_status(&t, &sid, "mute", "failed").await;
    assert!(
        mute["error"].as_str().unwrap().contains("1500 ms"),
        "the startup timeout is named: {mute}"
    );
    let names = tool_names(&mock.request(0));
    assert!(names.contains(&"mcp__ok__echo".to_owned()), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__mute")),
        "{names:?}"
    );
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("mcp__gone") || n.starts_with("mcp__stderr")),
        "{names:?}"
    );
    t.shutdown().await;
}

#[tokio::test]
async fn a_workspace_server_waits_for_trust_and_trust_binds_to_the_file_content() {
    let ws = workspace();
    let definition = |args: Vec<String>| {
        json!({"mcpServers": {"w": {"command": python(), "args": args}}}).to_string()
    };
    let script = mcp_dir().join("stdio_server.py").display().to_string();
    std::fs::write(
        ws.path().join(".mcp.json"),
        definition(vec![script.clone()]),
    )
    .unwrap();
    let mock = MockLlm::start().await;
    // The model tries to add a server of its own: the MCP file is protected.
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": ".mcp.json", "content": "{\"mcpServers\": {}}"}),
    ));
    mock.push(Script::text_reply("ok"));
    let data = tempfile::tempdir().unwrap();
    let t = Tandem::start_with(opts(&mock, "").data_dir(data.path())).await;
    let sid = t.new_session_in(ws.path(), "fullAuto").await;
    let untrusted = wait_status(&t, &sid, "w", "untrusted").await;
    assert!(untrusted["error"].as_str().unwrap().contains("mcp/trust"));
    // The client knows the session before its first mcpStatus (this one is told at once).
    let messages = t.messages();
    let position = |pred: &dyn Fn(&Value) -> bool| messages.iter().position(pred).unwrap();
    let reply = position(&|m| m["result"]["sessionId"] == sid.as_str());
    let status = position(&|m| {
        m["params"]["type"] == "mcpStatus" && m["params"]["sessionId"] == sid.as_str()
    });
    assert!(
        reply < status,
        "mcpStatus came before the session/new response"
    );
    let status = t.request_ok("mcp/status", json!({"sessionId": sid})).await;
    assert_eq!(status["servers"][0]["source"], "workspace");
    assert_eq!(status["servers"][0]["status"], "untrusted");

    t.prompt(&sid, "add a server").await;
    t.wait_turn_ended(&sid).await;
    let refused = tool_result(&mock.request(1), "w1");
    assert!(refused.contains("protected"), "{refused}");
    assert!(std::fs::read_to_string(ws.path().join(".mcp.json"))
        .unwrap()
        .contains("stdio_server.py"));

    let err = t
        .request_err("mcp/trust", json!({"sessionId": sid, "server": "nope"}))
        .await;
    assert!(err.message.contains("w"), "{err:?}");
    t.request_ok("mcp/trust", json!({"sessionId": sid, "server": "w"}))
        .await;
    wait_status(&t, &sid, "w", "ready").await;

    // Remembered for the folder: a new session starts it without asking.
    let again = t.new_session(ws.path()).await;
    wait_status(&t, &again, "w", "ready").await;

    // The trust names the file's bytes: the same definition spelled otherwise is asked again.
    let respelled = format!("{}\n", definition(vec![script.clone()]));
    std::fs::write(ws.path().join(".mcp.json"), respelled).unwrap();
    let respelled = t.new_session(ws.path()).await;
    wait_status(&t, &respelled, "w", "untrusted").await;
    t.request_ok("mcp/trust", json!({"sessionId": respelled, "server": "w"}))
        .await;
    wait_status(&t, &respelled, "w", "ready").await;

    // A changed definition is a new server to trust.
    std::fs::write(
        ws.path().join(".mcp.json"),
        definition(vec![script, "--changed".into()]),
    )
    .unwrap();
    let changed = t.new_session(ws.path()).await;
    wait_status(&t, &changed, "w", "untrusted").await;
    t.shutdown().await;
}

#[tokio::test]
async fn an_http_server_gets_its_bearer_token_from_the_environment_and_list_changed_is_honoured() {
    let ws = workspace();
    let server = PyServer::start(&["--token", "tok-123"]).await;
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "a1",
        "mcp__h__add_tool",
        json!({"name": "fresh"}),
    ));
    mock.push(Script::text_reply("added"));
    mock.push(Script::tool_calls(vec![
        ("f1", "mcp__h__fail", json!({}).to_string()),
        ("x1", "mcp__h__resource", json!({}).to_string()),
    ]));
    mock.push(Script::text_reply("ok"));
    let servers = format!(
        "[mcp_servers.h]\nurl = \"{url}\"\nbearer_token_env = \"TANDEM_TEST_MCP_TOKEN\"\n\
         headers = {{ \"X-Tandem-Test\" = \"1\" }}\n\n\
         [mcp_servers.nokey]\nurl = \"{url}\"\nbearer_token_env = \"TANDEM_TEST_MCP_UNSET\"\n",
        url = server.url
    );
    let t = Tandem::start_with(opts(&mock, &servers).env("TANDEM_TEST_MCP_TOKEN", "tok-123")).await;
    let sid = t.new_session_in(ws.path(), "fullAuto").await;
    wait_status(&t, &sid, "h", "ready").await;
    let nokey = wait_status(&t, &sid, "nokey", "failed").await;
    assert!(
        nokey["error"]
            .as_str()
            .unwrap()
            .contains("TANDEM_TEST_MCP_UNSET"),
        "{nokey}"
    );
    t.prompt(&sid, "add a tool").await;
    t.wait_turn_ended(&sid).await;
    assert!(!tool_names(&mock.request(0)).contains(&"mcp__h__fresh".to_owned()));
    // The server said its list changed (on its own stream, so the notification may trail the
    // call's answer): tandem lists the tools again and says so; the next request offers it.
    t.wait_any_event_within(
        &sid,
        "mcpStatus with the new tool",
        std::time::Duration::from_secs(60),
        |e| {
            e["type"] == "mcpStatus"
                && e["tools"]
                    .as_array()
                    .is_some_and(|tools| tools.contains(&json!("mcp__h__fresh")))
        },
    )
    .await;
    t.prompt(&sid, "use it").await;
    t.wait_turn_ended(&sid).await;
    assert!(
        tool_names(&mock.request(2)).contains(&"mcp__h__fresh".to_owned()),
        "{:?}",
        tool_names(&mock.request(2))
    );
    // isError is a tool result the model reads, not a failed turn.
    let failed = tool_result(&mock.request(3), "f1");
    assert!(failed.contains("it failed on purpose"), "{failed}");
    // An embedded resource reaches the model as text, with its URI.
    let resource = tool_result(&mock.request(3), "x1");
    assert!(
        resource.contains("remember the milk") && resource.contains("file:///notes.txt"),
        "{resource}"
    );
    t.shutdown().await;
}

#[tokio::test]
async fn the_reference_servers_work_and_images_reach_a_vision_model_only() {
    let ws = workspace();
    std::fs::write(ws.path().join("notes.txt"), "filesystem server read me\n").unwrap();
    let node = "node";
    let servers = format!(
        "[mcp_servers.everything]\ncommand = \"{node}\"\nargs = [{everything:?}]\n\
         startup_timeout_ms = 60000\ntrust_read_only_hints = true\n\n\
         [mcp_servers.fs]\ncommand = \"{node}\"\nargs = [{fs:?}, {root:?}]\nstartup_timeout_ms = 60000\n",
        everything = npm_server("server-everything").display().to_string(),
        fs = npm_server("server-filesystem").display().to_string(),
        root = canonical(ws.path()).display().to_string(),
    );
    let mock = MockLlm::start().await;
    let notes = canonical(ws.path()).join("notes.txt");
    mock.push(Script::tool_calls(vec![
        (
            "i1",
            "mcp__everything__get-tiny-image",
            json!({}).to_string(),
        ),
        (
            "f1",
            "mcp__fs__read_text_file",
            json!({"path": notes}).to_string(),
        ),
    ]));
    mock.push(Script::text_reply("seen"));
    mock.push(Script::tool_call_reply(
        "i2",
        "mcp__everything__get-tiny-image",
        json!({}),
    ));
    mock.push(Script::text_reply("blind"));
    let t = Tandem::start_with(opts(&mock, &servers)).await;
    let sid = t
        .new_session_with(
            ws.path(),
            json!({"mode": "fullAuto", "model": "mock-vision"}),
        )
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let ready = wait_status(&t, &sid, "everything", "ready").await;
    assert!(
        ready["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp__everything__get-tiny-image")),
        "{ready}"
    );
    wait_status(&t, &sid, "fs", "ready").await;
    t.prompt(&sid, "look").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed", "{ended}");
    let second = mock.request(1);
    assert!(tool_result(&second, "f1").contains("filesystem server read me"));
    let image_parts: Vec<&Value> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|p| p["type"] == "image_url")
        .collect();
    assert_eq!(
        image_parts.len(),
        1,
        "the image reaches the vision model: {second}"
    );
    assert!(image_parts[0]["image_url"]["url"]
        .as_str()
        .unwrap()
        .starts_with("data:image/png;base64,"));

    t.switch_model(&sid, "mock").await;
    t.prompt(&sid, "look without eyes").await;
    t.wait_turn_ended(&sid).await;
    let blind = mock.request(3);
    let blind_text = blind.to_string();
    assert!(
        !blind_text.contains("data:image/png;base64,"),
        "a model without vision gets no image"
    );
    t.shutdown().await;
}

/// The pids of live processes whose environment holds `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(false);
        if !zombie && environ.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

/// Waits (guarded) until no process holds `marker`.
async fn wait_gone(marker: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let left = processes_with(marker);
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "server processes outlived tandem: {left:?}"
        );
        // Process exit has no portable notification to await from outside the parent.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn no_server_process_outlives_a_shutdown_or_a_killed_tandem() {
    for kill in [false, true] {
        let ws = workspace();
        let mock = MockLlm::start().await;
        let marker = format!(
            "TANDEM_MCP_MARKER={}-{}",
            std::process::id(),
            if kill { "kill" } else { "shutdown" }
        );
        let (key, value) = marker.split_once('=').unwrap();
        // A grandchild too: the shell's child must end with the server's process group.
        let servers = format!(
            "{}[mcp_servers.sh]\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"sleep 300 & exec {python} {script}\"]\n\
             env = {{ {key} = \"{value}\" }}\nstartup_timeout_ms = 60000\n",
            stdio_server_toml("t", &format!("env = {{ {key} = \"{value}\" }}")),
            python = python().display(),
            script = mcp_dir().join("stdio_server.py").display(),
        );
        let t = Tandem::start_with(opts(&mock, &servers)).await;
        let sid = t.new_session(ws.path()).await;
        wait_status(&t, &sid, "t", "ready").await;
        wait_status(&t, &sid, "sh", "ready").await;
        assert!(processes_with(&marker).len() >= 3, "the servers run");
        if kill {
            t.kill().await;
        } else {
            t.shutdown().await;
        }
        wait_gone(&marker).await;
    }
}

#[tokio::test]
async fn a_server_that_stalls_its_tool_list_holds_up_no_turn() {
    let ws = workspace();
    let server = PyServer::start(&["--token", "tok-stall"]).await;
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "s1",
        "mcp__h__stall_listing",
        json!({}),
    ));
    mock.push(Script::text_reply("went on"));
    // A long startup timeout, which also bounds the re-listing: were the turn to wait for the
    // listing, it would hang for two minutes.
    let servers = format!(
        "[mcp_servers.h]\nurl = \"{url}\"\nbearer_token_env = \"TANDEM_TEST_MCP_TOKEN\"\nstartup_timeout_ms = 120000\n",
        url = server.url
    );
    let t =
        Tandem::start_with(opts(&mock, &servers).env("TANDEM_TEST_MCP_TOKEN", "tok-stall")).await;
    let sid = t.new_session_in(ws.path(), "fullAuto").await;
    wait_status(&t, &sid, "h", "ready").await;
    // The server says its tools changed half a second before it answers, then never answers
    // tools/list again: the listing runs beside the turn, which goes on with the list it has.
    t.prompt(&sid, "stall").await;
    let ended = t.wait_turn_ended(&sid).await;
    assert_eq!(ended["reason"], "completed", "{ended}");
    assert_eq!(mock.requests().len(), 2);
    assert!(tool_names(&mock.request(1)).contains(&"mcp__h__echo".to_owned()));
    // A stop and a shutdown do not wait for it either.
    t.shutdown().await;
}
