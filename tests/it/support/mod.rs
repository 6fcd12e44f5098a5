//! Shared integration-test support: the workspace's scripted mock LLM (`crates/mock-llm`,
//! re-exported by `mock_llm.rs`) and a client that drives the real `tandem` binary over real pipes.
//!
//! `tests/it/main.rs` declares it once for every test module. The `allow`s below cover helpers
//! kept for interactive debugging and the editor suites' needs that no module calls today.
//!
//! Waiting is always on a condition (an event, a request count, a gate), never a bare sleep.
//! Each wait is guarded by `wait_timeout()` (10 s, or `TANDEM_TEST_TIMEOUT_SECS`) and fails the
//! test with what was seen so far, plus the tail of the server's stderr.
#![allow(dead_code, unused_imports)]

pub mod canary;
pub mod mcp;
pub mod mock_llm;
pub mod tandem;

pub use canary::Canary;
// The guard timeout for every wait in the harness is the mock crate's, so the mock's own waits
// and the harness's agree (10 s, or `TANDEM_TEST_TIMEOUT_SECS`).
pub use mock_llm::{
    wait_timeout, Dialect, Gate, MockLlm, RecordedRequest, Script, Step, HELPER_USAGE,
    NO_SCRIPT_MESSAGE,
};
pub use tandem::{
    assert_seq_contiguous, assert_seq_gap_free, config_for, config_with, frame, read_message,
    Framing, RpcError, Tandem, TandemOptions,
};

/// A fresh temporary directory to use as a session's workspace (`cwd`).
///
/// Compare paths the server reports against `canonical(ws.path())`, since a temp root may be
/// a symlink on some systems.
pub fn workspace() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("tandem-ws-")
        .tempdir()
        .expect("create workspace tempdir")
}

/// The canonical path of a directory (what the server is expected to report).
pub fn canonical(p: &std::path::Path) -> std::path::PathBuf {
    std::fs::canonicalize(p).expect("canonicalize")
}

/// The text of tool call `id`'s result in a recorded chat-completions request (panics, naming
/// the request, when it has none).
pub fn tool_result(request: &serde_json::Value, id: &str) -> String {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {id} in {request}"))
        .to_owned()
}

/// The Python of a test venv that a `tests/*/setup` script made: `$ENV_VAR`, else
/// `~/.cache/tandem/<default_dir>`. Fails, naming the setup script, when `import` does not work
/// there (nothing is skipped: a missing client is a failed test).
pub fn venv_python(
    env_var: &str,
    default_dir: &str,
    import: &str,
    what: &str,
    setup: &str,
) -> std::path::PathBuf {
    let venv = std::env::var_os(env_var)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            dirs::home_dir()
                .expect("a home directory")
                .join(".cache/tandem")
                .join(default_dir)
        });
    let python = venv.join("bin/python");
    let ok = std::process::Command::new(&python)
        .args(["-c", &format!("import {import}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "{what} is not installed at {}; run {setup} first",
        venv.display()
    );
    python
}
