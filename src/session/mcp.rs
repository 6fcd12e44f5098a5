//! A session's MCP hub, built as the session opens: the config's servers, the ones the client
//! sent (`mcpServers` of `session/new`, or ACP's load and resume), and the workspace's
//! `.mcp.json`, whose servers start only if the user trusted them in that very file before: the
//! trust names the SHA-256 of the file's bytes, so any change to the file asks again.
//!
//! Invariants: building never waits on a server (the hub starts them after the conversation
//! exists, so every status reaches the client as an `mcpStatus` event); a definition that
//! cannot be used is a failed status with its reason, never an error of the session; the
//! provider keys are never in a server's environment.

use std::sync::Arc;

use serde_json::Value;

use crate::config::mcp::{self as definitions, McpServerConfig, McpSource};
use crate::engine::EngineContext;
use crate::mcp::{hub::trust_key, McpHub, McpServerStatus, McpStatus};
use crate::store::Store;
use crate::workspace::Workspace;

/// The file of a workspace root that declares its MCP servers (Claude Code's name).
pub const WORKSPACE_MCP_FILE: &str = ".mcp.json";
/// The largest `.mcp.json` read, in bytes.
const MAX_WORKSPACE_MCP_FILE_BYTES: u64 = 1024 * 1024;

fn refused(name: String, source: McpSource, error: String) -> McpServerStatus {
    McpServerStatus {
        name,
        source,
        status: McpStatus::Failed,
        tools: Vec::new(),
        error: Some(error),
    }
}

/// What a trust of a `.mcp.json` server binds to: the hash of the file's bytes.
fn file_key(text: &str) -> String {
    format!(
        "sha256:{}",
        crate::hooks::content_hash([(WORKSPACE_MCP_FILE, text.as_bytes())])
    )
}

/// The servers of the workspace's `.mcp.json`, read through the workspace (confined to the
/// root, so a link cannot make tandem read elsewhere), with what could not be used and the
/// file's trust key.
fn workspace_definitions(
    workspace: &Workspace,
) -> (Vec<McpServerConfig>, Vec<McpServerStatus>, Option<String>) {
    let text = workspace
        .resolve(WORKSPACE_MCP_FILE)
        .and_then(|path| workspace.read_text_if_exists_capped(&path, MAX_WORKSPACE_MCP_FILE_BYTES));
    let text = match text {
        Ok(Some(text)) => text,
        Ok(None) => return (Vec::new(), Vec::new(), None),
        Err(e) => {
            return (
                Vec::new(),
                vec![refused(
                    WORKSPACE_MCP_FILE.to_owned(),
                    McpSource::Workspace,
                    format!("cannot read {WORKSPACE_MCP_FILE}: {e}"),
                )],
                None,
            )
        }
    };
    let key = Some(file_key(&text));
    match definitions::workspace_servers(&text) {
        Ok(entries) => {
            let mut servers = Vec::new();
            let mut bad = Vec::new();
            for entry in entries {
                match entry {
                    Ok(server) => servers.push(server),
                    Err(e) => bad.push(refused(e.name.clone(), McpSource::Workspace, e.message)),
                }
            }
            (servers, bad, key)
        }
        Err(why) => (
            Vec::new(),
            vec![refused(
                WORKSPACE_MCP_FILE.to_owned(),
                McpSource::Workspace,
                format!("{WORKSPACE_MCP_FILE} is not usable: {why}"),
            )],
            None,
        ),
    }
}

/// The hub of a session in `workspace`, with the client's `session_servers` (ACP's
/// `McpServer` shape). Nothing starts yet (see [`McpHub::start`]).
pub async fn build_hub(
    engine: &EngineContext,
    store: Option<&Store>,
    workspace: &Workspace,
    session_servers: &[Value],
) -> Arc<McpHub> {
    let mut servers: Vec<McpServerConfig> = engine.config.mcp_servers.clone();
    let mut refused_servers = Vec::new();
    for value in session_servers {
        match definitions::session_server(value) {
            Ok(server) => servers.push(server),
            Err(e) => refused_servers.push(refused(e.name.clone(), McpSource::Session, e.message)),
        }
    }
    let reading = workspace.clone();
    let (workspace_servers, workspace_refused, key) =
        tokio::task::spawn_blocking(move || workspace_definitions(&reading))
            .await
            .unwrap_or_default();
    let cwd = workspace.roots()[0].display().to_string();
    let trusted: Vec<(String, String)> = if workspace_servers.is_empty() {
        Vec::new()
    } else {
        match store {
            Some(store) => store.trusted_mcp(&cwd).await.unwrap_or_else(|e| {
                tracing::warn!("cannot read which MCP servers of {cwd} are trusted: {e}");
                Vec::new()
            }),
            None => Vec::new(),
        }
    };
    servers.extend(workspace_servers);
    refused_servers.extend(workspace_refused);
    let never: Vec<String> = engine
        .config
        .providers
        .values()
        .filter_map(|p| p.api_key_env.clone())
        .collect();
    McpHub::new(
        servers,
        refused_servers,
        &|server| {
            key.as_ref().is_some_and(|key| {
                trusted
                    .iter()
                    .any(|(name, trusted_key)| *name == server.name && trusted_key == key)
            })
        },
        workspace.roots()[0].clone(),
        never,
    )
}

/// Trust workspace server `server` of `hub` (remembered for the folder in `store`) and start
/// it. Errors name the server and the next step.
pub async fn trust(
    hub: &McpHub,
    store: Option<&Store>,
    workspace: &Workspace,
    server: &str,
) -> Result<(), String> {
    // The trust is remembered for the file as it is now, and only if this session's
    // definition is still the one the file holds (else what the user trusts is not what runs).
    let session_definition = hub.definition(server)?;
    let reading = workspace.clone();
    let (now, _, key) = tokio::task::spawn_blocking(move || workspace_definitions(&reading))
        .await
        .unwrap_or_default();
    let same = now
        .iter()
        .any(|d| d.name == server && trust_key(d) == trust_key(&session_definition));
    let Some(key) = key.filter(|_| same) else {
        return Err(format!(
            "{WORKSPACE_MCP_FILE} changed since this session read `{server}`, so it is not trusted: start a new session to read the file again, then trust it"
        ));
    };
    hub.trust(server)?;
    if let Some(store) = store {
        let cwd = workspace.roots()[0].display().to_string();
        store
            .trust_mcp(&cwd, server, &key, crate::engine::history::now_ms())
            .await
            .map_err(|e| {
                format!("`{server}` starts for this session, but the store could not remember the trust ({e}); send mcp/trust again")
            })?;
    }
    Ok(())
}

/// What a status change tells the client: the `mcpStatus` event.
pub fn status_event(hub: &McpHub, status: &McpServerStatus) -> crate::protocol::Event {
    let tools = (status.status == McpStatus::Ready).then(|| {
        hub.statuses()
            .into_iter()
            .find(|s| s.name == status.name)
            .map(|s| s.tools)
            .unwrap_or_default()
    });
    crate::protocol::Event::McpStatus {
        server: status.name.clone(),
        status: wire_state(status.status),
        tools,
        error: status.error.clone(),
    }
}

/// The wire's name for a status.
pub fn wire_state(status: McpStatus) -> crate::protocol::McpServerState {
    use crate::protocol::McpServerState as Wire;
    match status {
        McpStatus::Starting => Wire::Starting,
        McpStatus::Ready => Wire::Ready,
        McpStatus::Failed => Wire::Failed,
        McpStatus::Exited => Wire::Exited,
        McpStatus::Untrusted => Wire::Untrusted,
    }
}
