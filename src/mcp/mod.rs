//! The MCP client: tools from MCP servers (DESIGN.md §7.1, issue 25).

pub mod http;
