//! Shared integration-test support: a scripted OpenAI-compatible mock LLM and a client that
//! drives the real `tandem` binary over real pipes.
//!
//! `tests/it/main.rs` declares it once for every test module. The `allow`s below cover helpers
//! kept for interactive debugging and the editor suites' needs that no module calls today.
//!
//! Waiting is always on a condition (an event, a request count, a gate), never a bare sleep.
//! Each wait is guarded by `wait_timeout()` (10 s, or `TANDEM_TEST_TIMEOUT_SECS`) and fails the
//! test with what was seen so far, plus the tail of the server's stderr.
#![allow(dead_code, unused_imports)]

pub mod canary;
pub mod mock_llm;
pub mod tandem;

use std::time::Duration;

pub use canary::Canary;
pub use mock_llm::{
    Dialect, Gate, MockLlm, RecordedRequest, Script, Step, HELPER_USAGE, NO_SCRIPT_MESSAGE,
};
pub use tandem::{
    assert_seq_contiguous, assert_seq_gap_free, config_for, config_with, frame, read_message,
    Framing, RpcError, Tandem, TandemOptions,
};

/// The guard timeout for every wait in the harness.
///
/// Generous enough for a debug build on a loaded 2-core machine, short enough that a hang
/// fails fast. `TANDEM_TEST_TIMEOUT_SECS` overrides it (for example under a debugger).
pub fn wait_timeout() -> Duration {
    std::env::var("TANDEM_TEST_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(10))
}

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
