//! The MCP client (DESIGN.md §7.1): tools from MCP servers, for the model, beside tandem's own.
//!
//! `hub` holds a session's servers (start, status, tools, calls, restart, shutdown); `stdio`
//! starts a child-process server in its own process group with a minimal environment; `http`
//! is the streamable HTTP transport over tandem's own reqwest; `names` makes the model-facing
//! `mcp__<server>__<tool>` names; `content` turns results into what the model reads.
//!
//! Invariants: see each module; the layer sits beside `providers` (it may use `config`,
//! `tools`, `workspace` and `protocol`) and knows nothing of sessions or the wire.

pub mod content;
pub mod guard;
pub mod http;
pub mod hub;
pub mod names;
pub mod schema;
pub mod stdio;

pub use hub::{McpCallError, McpHub, McpServerStatus, McpStatus, McpTool, StatusListener};
