//! Slash commands over the real binary: `commands/list` (built-ins, the project's and the
//! user's Markdown commands), a Claude Code style `.claude/commands` + `.claude/skills` tree
//! working unchanged (the expansion is what the model sees, the display shows what was typed),
//! and the built-ins that run without a model request.

use crate::support::*;
use serde_json::{json, Value};

/// A workspace in Claude Code's layout (written here after the public examples' shape):
/// `.claude/commands/review.md` with front matter, a namespaced `.tandem/commands/git/pr.md`,
/// and a `.claude/skills/testing/SKILL.md`.
fn claude_style_workspace() -> tempfile::TempDir {
    let ws = workspace();
    let commands = ws.path().join(".claude/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(
        commands.join("review.md"),
        "---\ndescription: Review a file for a kind of problem\nargument-hint: FILE KIND\nallowed-tools: Read, Grep\n---\n\nReview $1 and look for $2.\n\nThe whole request: $ARGUMENTS\n",
    )
    .unwrap();
    std::fs::create_dir_all(ws.path().join(".tandem/commands/git")).unwrap();
    std::fs::write(
        ws.path().join(".tandem/commands/git/pr.md"),
        "# Open a pull request\n\nWrite a pull request description for the current branch.\n",
    )
    .unwrap();
    let skill = ws.path().join(".claude/skills/testing");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: testing\ndescription: How this project writes and runs its tests\n---\nRun `make test`.\n",
    )
    .unwrap();
    ws
}

fn user_commands() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let commands = dir.path().join("tandem/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(
        commands.join("standup.md"),
        "---\ndescription: Write my standup\n---\nSummarize what changed since yesterday.\n",
    )
    .unwrap();
    dir
}

async fn start(mock: &MockLlm, config_home: &std::path::Path) -> Tandem {
    let t = Tandem::start_with(
        TandemOptions::with_mock(mock).env("XDG_CONFIG_HOME", config_home.display().to_string()),
    )
    .await;
    t.initialize().await;
    t
}

fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .unwrap()
}

#[tokio::test]
async fn commands_are_listed_with_their_sources() {
    let ws = claude_style_workspace();
    let home = user_commands();
    let mock = MockLlm::start().await;
    let t = start(&mock, home.path()).await;
    let sid = t.new_session(ws.path()).await;
    let listed = t
        .request_ok("commands/list", json!({"sessionId": sid}))
        .await;
    let commands = listed["commands"].as_array().unwrap();
    let find = |name: &str| -> &Value {
        commands
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {listed}"))
    };
    for builtin in [
        "compact", "undo", "fork", "diff", "model", "mode", "init", "status",
    ] {
        assert_eq!(find(builtin)["source"], "builtin", "{builtin}");
    }
    assert_eq!(find("model")["argumentHint"], "NAME");
    let review = find("review");
    assert_eq!(review["source"], "project");
    assert_eq!(review["description"], "Review a file for a kind of problem");
    assert_eq!(review["argumentHint"], "FILE KIND");
    assert_eq!(find("git:pr")["description"], "Open a pull request");
    assert_eq!(find("standup")["source"], "user");
    let names: Vec<&str> = commands
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "sorted by name");

    // A new file shows up at the next call, without a restart.
    std::fs::write(
        ws.path().join(".claude/commands/fresh.md"),
        "Something new.\n",
    )
    .unwrap();
    let listed = t
        .request_ok("commands/list", json!({"sessionId": sid}))
        .await;
    assert!(listed["commands"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "fresh"));
    t.shutdown().await;
}

#[tokio::test]
async fn a_claude_code_tree_works_unchanged() {
    let ws = claude_style_workspace();
    let home = user_commands();
    let mock = MockLlm::start().await;
    mock.push(Script::text_reply("reviewed"));
    mock.push(Script::text_reply("answered"));
    let t = start(&mock, home.path()).await;
    let sid = t.new_session(ws.path()).await;
    let result = t
        .request_ok(
            "prompt",
            json!({"sessionId": sid, "content": "/review src/main.rs \"race conditions\""}),
        )
        .await;
    assert_eq!(result["command"]["name"], "review", "{result}");
    let turn = result["turnId"].as_str().unwrap().to_owned();
    t.wait_turn(&sid, &turn).await;
    let request = mock.request(0);
    let sent = last_user_text(&request);
    assert!(
        sent.starts_with(
            "Review src/main.rs and look for race conditions.\n\nThe whole request: src/main.rs \"race conditions\""
        ),
        "{sent}"
    );
    assert!(!sent.contains("argument-hint"), "{sent}");
    let system = request["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("- testing: How this project writes and runs its tests"),
        "{system}"
    );

    // A slash word that names no command is an ordinary prompt, sent as typed.
    let plain = t
        .request_ok(
            "prompt",
            json!({"sessionId": sid, "content": "/usr/bin/env is missing, why?"}),
        )
        .await;
    assert!(plain.get("command").is_none(), "{plain}");
    t.wait_turn(&sid, plain["turnId"].as_str().unwrap()).await;
    assert!(last_user_text(&mock.request(1)).starts_with("/usr/bin/env is missing, why?"));

    // The display shows the command as typed, the model saw the expansion.
    let loaded = t
        .request_ok("session/load", json!({"sessionId": sid}))
        .await;
    let users: Vec<&Value> = loaded["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .collect();
    assert_eq!(users[0]["text"], "/review src/main.rs \"race conditions\"");
    t.shutdown().await;
}

#[tokio::test]
async fn builtins_run_in_the_session_without_a_model_request() {
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "first\n").unwrap();
    let mock = MockLlm::start().await;
    mock.push(Script::tool_call_reply(
        "w1",
        "write_file",
        json!({"path": "notes.txt", "content": "second\n"}),
    ));
    mock.push(Script::text_reply("rewrote the notes"));
    let t = start(&mock, home.path()).await;
    let sid = t.new_session_in(ws.path(), "fullAuto").await;
    let command = |text: &str| {
        let t = &t;
        let sid = sid.clone();
        let text = text.to_owned();
        async move {
            t.request_ok("prompt", json!({"sessionId": sid, "content": text}))
                .await
        }
    };

    let nothing = command("/compact").await;
    assert!(nothing.get("turnId").is_none(), "{nothing}");
    assert!(nothing["command"]["output"]
        .as_str()
        .unwrap()
        .contains("Nothing to compact yet"));

    let status = command("/status").await;
    assert!(status.get("turnId").is_none(), "{status}");
    let output = status["command"]["output"].as_str().unwrap();
    assert!(output.contains("Model: `mock`"), "{output}");
    assert!(output.contains("Mode: `fullAuto`"), "{output}");

    let turn = t.prompt(&sid, "rewrite the notes").await;
    t.wait_turn(&sid, &turn).await;
    assert_eq!(mock.request_count(), 2);

    let diff = command("/diff").await;
    let output = diff["command"]["output"].as_str().unwrap();
    assert!(output.contains("notes.txt"), "{output}");
    assert!(output.contains("-first"), "{output}");
    assert!(output.contains("+second"), "{output}");

    let models = command("/model").await;
    assert!(models["command"]["output"]
        .as_str()
        .unwrap()
        .contains("`mock` (current)"));
    let err = t
        .request_err(
            "prompt",
            json!({"sessionId": sid, "content": "/model nope"}),
        )
        .await;
    assert_eq!(err.kind, "unknownModel", "{err:?}");
    let err = t
        .request_err("prompt", json!({"sessionId": sid, "content": "/mode yolo"}))
        .await;
    assert_eq!(err.kind, "invalidMode", "{err:?}");
    let mode = command("/mode plan").await;
    assert_eq!(mode["command"]["output"], "Mode: **plan**");

    let fork = command("/fork").await;
    let forked = fork["command"]["sessionId"].as_str().unwrap().to_owned();
    let loaded = t
        .request_ok("session/load", json!({"sessionId": forked}))
        .await;
    assert!(loaded.to_string().contains("rewrite the notes"));

    let undo = command("/undo").await;
    let output = undo["command"]["output"].as_str().unwrap();
    assert!(output.contains("rewrite the notes"), "{output}");
    assert!(output.contains("notes.txt"), "{output}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(),
        "first\n"
    );
    let rewound = t.wait_event_type(&sid, "rewound").await;
    assert_eq!(rewound["restore"], "both");
    // The `rewound` event follows the response.
    let messages = t.messages();
    let response = messages
        .iter()
        .position(|m| m["result"]["command"]["name"] == "undo")
        .unwrap();
    let event = messages
        .iter()
        .position(|m| m["params"]["type"] == "rewound")
        .unwrap();
    assert!(response < event);
    let loaded = t
        .request_ok("session/load", json!({"sessionId": sid}))
        .await;
    assert_eq!(loaded["mode"], "plan");
    assert!(!loaded["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["role"] == "user"));
    assert_eq!(mock.request_count(), 2, "a built-in asked the model");

    // `/init` is a turn whose prompt asks for an AGENTS.md; the display shows `/init`.
    mock.push(Script::text_reply("wrote it"));
    let init = command("/init").await;
    assert_eq!(init["command"]["name"], "init");
    t.wait_turn(&sid, init["turnId"].as_str().unwrap()).await;
    assert!(last_user_text(&mock.request(2)).contains("AGENTS.md"));
    let loaded = t
        .request_ok("session/load", json!({"sessionId": sid}))
        .await;
    assert!(loaded["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["role"] == "user" && m["text"] == "/init"));
    t.shutdown().await;
}
