//! What a shell command inherits from tandem, against the real binary in every layer (bubblewrap
//! with Landlock, Landlock alone, and unconfined with an approval): no controlling terminal (so
//! no `TIOCSTI` keystrokes into the user's shell) and a minimal environment (no provider key, no
//! token the user exported, only what the config's `shell_env` names).

use std::process::Stdio;

use crate::support::*;
use serde_json::json;

const SECRET_KEY: &str = "sk-test-provider-key-4711";
const GITHUB_TOKEN: &str = "ghp_test_token_0815";

/// Prints whether the command can open the controlling terminal, then its environment.
const PROBE: &str =
    "if (exec 3</dev/tty) 2>/dev/null; then echo TTY-OPEN; else echo TTY-CLOSED; fi; env";

/// A config whose provider reads its key from `LOCAL_API_KEY` and that passes `MY_TOOL_HOME`
/// (and, trying its luck, nothing else) to commands.
fn config(mock: &MockLlm) -> String {
    config_with(mock, "shell_env = [\"MY_TOOL_HOME\"]").replace(
        "kind = \"openai\"\n",
        "kind = \"openai\"\napi_key_env = \"LOCAL_API_KEY\"\n",
    )
}

fn check_environment(output: &str, layer: &str) {
    assert!(output.contains("PATH="), "{layer}: PATH is kept: {output}");
    assert!(
        output.contains("MY_TOOL_HOME=/opt/tool"),
        "{layer}: a variable named in shell_env is passed: {output}"
    );
    for secret in [
        SECRET_KEY,
        GITHUB_TOKEN,
        "LOCAL_API_KEY",
        "GITHUB_TOKEN",
        "UNLISTED_VAR",
    ] {
        assert!(
            !output.contains(secret),
            "{layer}: {secret} leaked into the command's environment: {output}"
        );
    }
}

#[tokio::test]
async fn commands_get_a_minimal_environment_in_every_layer() {
    for layer in ["auto", "landlock", "off"] {
        let ws = workspace();
        let mock = MockLlm::start().await;
        let config_path = ws.path().join("tandem.toml");
        std::fs::write(&config_path, config(&mock)).unwrap();
        let t = Tandem::start_with(
            TandemOptions::new()
                .arg("--config")
                .arg(config_path.to_str().unwrap())
                .env("TANDEM_SANDBOX", layer)
                .env("LOCAL_API_KEY", SECRET_KEY)
                .env("GITHUB_TOKEN", GITHUB_TOKEN)
                .env("UNLISTED_VAR", "x")
                .env("MY_TOOL_HOME", "/opt/tool"),
        )
        .await;
        let sid = t.new_session_in(ws.path(), "fullAuto").await;
        mock.push(Script::tool_call_reply(
            "e1",
            "shell",
            json!({ "command": PROBE }),
        ));
        mock.push(Script::text_reply("done"));
        t.prompt(&sid, "show the environment").await;
        if layer == "off" {
            // Unconfined: every command asks, and the user allows this one.
            let approval = t.wait_approval(&sid).await;
            t.approve(
                &sid,
                approval["requestId"].as_str().unwrap(),
                "once",
                None,
                None,
            )
            .await;
        }
        assert_eq!(t.wait_turn_ended(&sid).await["reason"], "completed");
        let requests = mock.wait_for_requests(2).await;
        // The provider did get its key: only commands are denied it.
        assert_eq!(
            mock.recorded()[0].header("authorization"),
            Some(format!("Bearer {SECRET_KEY}").as_str())
        );
        check_environment(&tool_result(&requests[1], "e1"), layer);
        t.shutdown().await;
    }
}

#[tokio::test]
async fn a_config_that_passes_a_provider_key_to_commands_is_refused() {
    let ws = workspace();
    let mock = MockLlm::start().await;
    let config_path = ws.path().join("tandem.toml");
    let text = config(&mock).replace(
        "shell_env = [\"MY_TOOL_HOME\"]",
        "shell_env = [\"LOCAL_API_KEY\"]",
    );
    std::fs::write(&config_path, text).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(["serve", "--config", config_path.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("shell_env names LOCAL_API_KEY") && stderr.contains("remove it"),
        "{stderr}"
    );
}

/// `tandem run` in a real pseudo-terminal (util-linux `script` gives it one as its controlling
/// terminal, as the user's shell would): the command it runs cannot open that terminal, so it
/// cannot inject keystrokes with `TIOCSTI`.
#[tokio::test]
async fn commands_never_share_the_users_terminal() {
    // The check itself can see a terminal when there is one (else this test proves nothing).
    let direct = std::process::Command::new("script")
        .args(["-qec", PROBE, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .expect("util-linux `script` is installed");
    assert!(
        String::from_utf8_lossy(&direct.stdout).contains("TTY-OPEN"),
        "inside `script` a process has a controlling terminal: {direct:?}"
    );
    for layer in ["auto", "landlock", "off"] {
        let ws = workspace();
        let mock = MockLlm::start().await;
        let config_path = ws.path().join("tandem.toml");
        std::fs::write(&config_path, config_for(&mock)).unwrap();
        mock.push(Script::tool_call_reply(
            "t1",
            "shell",
            json!({ "command": PROBE }),
        ));
        mock.push(Script::text_reply("done"));
        let line = format!(
            "TANDEM_SANDBOX={layer} {} run --yes --config {} 'probe the terminal'",
            env!("CARGO_BIN_EXE_tandem"),
            config_path.display()
        );
        let output = tokio::process::Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .current_dir(ws.path())
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{layer}: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        let requests = mock.wait_for_requests(2).await;
        let result = tool_result(&requests[1], "t1");
        assert!(
            result.contains("TTY-CLOSED") && !result.contains("TTY-OPEN"),
            "{layer}: the command could open the user's terminal: {result}"
        );
    }
}
