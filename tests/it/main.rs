//! The integration tests, one binary: every module drives the real `tandem` binary (or the
//! library's public API) over real pipes, sockets and SQLite files, against the mock LLM in
//! `support/`.
//!
//! One binary instead of one per file: the crate and the harness are linked once, not eighteen
//! times (rust-analyzer and cargo do the same). Run one module with
//! `cargo test --test it -- durable::`, or one test with its full path.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "tests: a panic with its message is the failure report, and output is for the reader of a failed run"
)]

mod support;

mod acp;
mod acp_raw;
mod attach;
mod checkpoints;
mod command_isolation;
mod commands;
mod durable;
mod fuzz_corpus;
mod fuzz_frames;
mod harness_selftest;
mod hooks;
mod limits;
mod lsp;
mod mcp;
mod mcp_http;
mod params;
mod plan;
mod protocol_doc;
mod providers;
mod resilience;
mod sandbox;
mod security;
mod skills;
mod stop;
mod storm;
mod tidy;
mod turn_loop;
mod turns;
mod wire;
