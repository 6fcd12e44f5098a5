//! The native face's MCP methods: `mcp/status` (every server of a session, where it stands,
//! its tools and what went wrong) and `mcp/trust` (start a workspace `.mcp.json` server and
//! remember the trust for the folder). They translate; the hub and `session::mcp` decide.

use super::*;
use crate::mcp::McpServerStatus;

fn source(source: crate::config::mcp::McpSource) -> wire::McpServerSource {
    use crate::config::mcp::McpSource;
    match source {
        McpSource::Config => wire::McpServerSource::Config,
        McpSource::Session => wire::McpServerSource::Session,
        McpSource::Workspace => wire::McpServerSource::Workspace,
    }
}

/// One server as the wire shows it.
pub(super) fn server_info(status: McpServerStatus) -> wire::McpServerInfo {
    wire::McpServerInfo {
        name: status.name,
        source: source(status.source),
        status: session::mcp::wire_state(status.status),
        tools: status.tools,
        error: status.error,
    }
}

/// `mcp/status`.
pub(super) fn status(handle: &SessionHandle) -> wire::McpStatusResult {
    wire::McpStatusResult {
        servers: handle
            .shared
            .mcp
            .statuses()
            .into_iter()
            .map(server_info)
            .collect(),
    }
}

/// `mcp/trust`: an unknown or already trusted server is `invalidParams` with the reason.
pub(super) async fn trust(
    handle: &SessionHandle,
    store: Option<&Store>,
    server: &str,
) -> Result<(), RpcErrorObject> {
    session::mcp::trust(&handle.shared.mcp, store, &handle.shared.workspace, server)
        .await
        .map_err(|why| RpcErrorObject::new(ErrorKind::InvalidParams, why))
}
