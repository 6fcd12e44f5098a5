//! tandem: a coding agent that lives beside the editor.
//!
//! The crate is cut into modules that could each become a crate: `protocol` (wire vocabulary),
//! `server`, `acp`, `lsp` and `cli` (faces), `session` (the actor), `engine` (the turn loop), `store`
//! (the SQLite session store), `providers`, `mcp` (the MCP client), `tools`, `workspace`,
//! `permissions` and `config`.
//! ARCHITECTURE.md maps them and their invariants, and the two import circles that remain.

pub mod acp;
pub mod cli;
pub mod config;
pub mod engine;
pub mod hooks;
pub mod lsp;
pub mod mcp;
pub mod permissions;
pub mod protocol;
pub mod providers;
pub mod server;
pub mod session;
pub mod store;
pub mod tools;
pub mod workspace;
