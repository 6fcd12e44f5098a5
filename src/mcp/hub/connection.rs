//! One server connection's life, run as a task per (re)start: spawn or connect, the MCP
//! handshake and the tool list within the startup timeout, then serving until the server goes
//! away or the hub stops it; and the client handler that notes `tools/list_changed`.
//!
//! Invariants: every path out of [`run_connection`] leaves no process behind (a stop kills it,
//! a failure or an exit goes through [`fail`], which kills what is left and waits for the
//! stderr tail); the server's status changes only through `Server::set`, so the listener hears
//! each change once.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, Tool};
use rmcp::service::{NotificationContext, RoleClient};
use rmcp::ClientHandler;
use tokio_util::sync::CancellationToken;

use super::{lock, McpStatus, Server};
use crate::config::mcp::{McpServerConfig, McpTransport};
use crate::mcp::stdio::{self, StdioProcess};

/// The MCP client handler of one connection: on `tools/list_changed` it lists the server's
/// tools again in the background, so the next model request after that listing offers them.
pub(super) struct Handler {
    /// Weak: the server holds the connection, which holds this handler.
    pub(super) server: Weak<Server>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("tandem", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        // One lister at a time; a notification during a listing asks for one more after it.
        server.relist_wanted.store(true, Ordering::SeqCst);
        if server.relisting.swap(true, Ordering::SeqCst) {
            return;
        }
        let server = self.server.clone();
        tokio::spawn(async move {
            loop {
                let Some(server) = server.upgrade() else {
                    return;
                };
                while server.relist_wanted.swap(false, Ordering::SeqCst) {
                    server.relist_tools().await;
                }
                server.relisting.store(false, Ordering::SeqCst);
                // A notification between the last check and the store above found a lister
                // still running and left its wish behind: take it up, unless another did.
                if !server.relist_wanted.load(Ordering::SeqCst)
                    || server.relisting.swap(true, Ordering::SeqCst)
                {
                    return;
                }
            }
        });
    }
}

/// The server's tools its definition offers.
///
/// A hostile or careless server cannot flood every request: at most [`MAX_TOOLS_PER_SERVER`]
/// tools (the first ones, in the server's order) and no tool whose schema is over
/// [`MAX_SCHEMA_BYTES`] (each dropped tool is logged with the reason).
pub(super) fn offered_tools(config: &McpServerConfig, tools: Vec<Tool>) -> Vec<Tool> {
    let mut offered: Vec<Tool> = Vec::new();
    for tool in tools.into_iter().filter(|t| config.offers(&t.name)) {
        let schema_bytes =
            serde_json::to_string(&*tool.input_schema).map_or(usize::MAX, |s| s.len());
        if schema_bytes > MAX_SCHEMA_BYTES {
            tracing::warn!(
                "MCP server `{}`: tool {} is not offered, its input schema has {schema_bytes} bytes (at most {MAX_SCHEMA_BYTES})",
                config.name,
                tool.name
            );
            continue;
        }
        if offered.len() == MAX_TOOLS_PER_SERVER {
            tracing::warn!(
                "MCP server `{}` lists more than {MAX_TOOLS_PER_SERVER} tools; the rest are not offered (narrow them with enabled_tools)",
                config.name
            );
            break;
        }
        offered.push(tool);
    }
    offered
}

/// The most tools one server may add to every request.
pub(super) const MAX_TOOLS_PER_SERVER: usize = 128;
/// The largest input schema of one tool, as JSON.
pub(super) const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// One connection's life: connect and list within the startup timeout, then serve until the
/// server goes away or the hub stops it, then kill what is left.
pub(super) async fn run_connection(
    server: Arc<Server>,
    cwd: PathBuf,
    never: Vec<String>,
    stop: CancellationToken,
) {
    let config = &server.config;
    let handler = Handler {
        server: Arc::downgrade(&server),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_millis(config.startup_timeout_ms);
    let mut process: Option<StdioProcess> = None;
    let connecting = async {
        match &config.transport {
            McpTransport::Stdio { .. } => {
                let (child, stdout, stdin) = stdio::spawn(config, &cwd, &never)?;
                let tail = child.stderr.clone();
                lock(&server.state).stderr = Some(tail);
                process = Some(child);
                rmcp::serve_client(handler, (stdout, stdin))
                    .await
                    .map_err(|e| format!("it did not complete the MCP handshake: {e}"))
            }
            McpTransport::Http {
                url,
                bearer_token_env,
                headers,
            } => {
                let token = match bearer_token_env {
                    Some(name) => Some(std::env::var(name).map_err(|_| {
                        format!("bearer_token_env names `{name}`, which is not set in tandem's environment; set it and start tandem again")
                    })?),
                    None => None,
                };
                let headers: Vec<(String, String)> = headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let transport =
                    crate::mcp::http::transport(url, token, headers).map_err(|e| e.to_string())?;
                rmcp::serve_client(handler, transport).await.map_err(|e| {
                    // The transport's own error says what to do; rmcp wraps it in its own.
                    match crate::mcp::http::cause(&e) {
                        Some(cause) => cause.to_string(),
                        None => format!("it did not complete the MCP handshake at {url}: {e}"),
                    }
                })
            }
        }
    };
    let connected = tokio::select! {
        biased;
        _ = stop.cancelled() => None,
        result = tokio::time::timeout_at(deadline, connecting) => Some(match result {
            Ok(result) => result,
            Err(_) => Err(format!("it did not start within {} ms (startup_timeout_ms)", config.startup_timeout_ms)),
        }),
    };
    let running = match connected {
        None => {
            if let Some(mut process) = process {
                process.kill().await;
            }
            return;
        }
        Some(Err(why)) => {
            fail(&server, process, McpStatus::Failed, why).await;
            return;
        }
        Some(Ok(running)) => running,
    };
    let listed = tokio::select! {
        biased;
        _ = stop.cancelled() => None,
        result = tokio::time::timeout_at(deadline, running.list_all_tools()) => Some(match result {
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(e)) => Err(format!("it did not list its tools: {e}")),
            Err(_) => Err(format!("it did not list its tools within {} ms (startup_timeout_ms)", config.startup_timeout_ms)),
        }),
    };
    let tools = match listed {
        None => {
            let _ = running.cancel().await;
            if let Some(mut process) = process {
                process.kill().await;
            }
            return;
        }
        Some(Err(why)) => {
            let _ = running.cancel().await;
            fail(&server, process, McpStatus::Failed, why).await;
            return;
        }
        Some(Ok(tools)) => offered_tools(config, tools),
    };
    let peer = running.peer().clone();
    server.set(|state| {
        state.status = McpStatus::Ready;
        state.error = None;
        state.tools = tools;
        state.peer = Some(peer);
    });
    let cancel_service = running.cancellation_token();
    tokio::select! {
        _ = stop.cancelled() => {
            cancel_service.cancel();
            if let Some(mut process) = process {
                process.kill().await;
            }
        }
        _ = running.waiting() => {
            let status = match process.as_mut() {
                Some(child) => {
                    // The transport closed; give the process a moment to finish exiting.
                    match tokio::time::timeout(Duration::from_millis(500), child.wait()).await {
                        Ok(Some(status)) => format!("the server exited ({status})"),
                        _ => "the server closed its connection".to_owned(),
                    }
                }
                None => "the server closed the connection".to_owned(),
            };
            fail(&server, process, McpStatus::Exited, status).await;
        }
    }
}

/// Record that the server failed or exited (with its stderr tail and the next step) and kill
/// what is left of its process.
async fn fail(server: &Server, process: Option<StdioProcess>, status: McpStatus, why: String) {
    let mut why = why;
    if let Some(mut process) = process {
        // A server that broke the handshake has usually exited: its exit status and the last
        // of its stderr say why better than the broken pipe does.
        if status == McpStatus::Failed {
            if let Ok(Some(exit)) =
                tokio::time::timeout(Duration::from_millis(500), process.wait()).await
            {
                why = format!("it exited ({exit}) before completing the MCP handshake");
            }
        }
        process.kill().await;
        process.drain_stderr(Duration::from_millis(500)).await;
    }
    let note = server.stderr_note();
    let next = match status {
        McpStatus::Exited => "tandem restarts it once, at the next turn",
        _ => "check its definition and the program, then start a new session",
    };
    server.set(|state| {
        state.status = status;
        state.peer = None;
        state.tools.clear();
        state.error = Some(format!("{why}{note}; {next}"));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::mcp::McpSource;

    fn tool(name: &str, schema_bytes: usize) -> Tool {
        let mut schema = serde_json::Map::new();
        schema.insert("type".into(), serde_json::json!("object"));
        schema.insert(
            "description".into(),
            serde_json::json!("x".repeat(schema_bytes)),
        );
        Tool::new(name.to_owned(), "a tool", Arc::new(schema))
    }

    #[test]
    fn a_server_offers_a_bounded_number_of_tools_with_bounded_schemas() {
        let config = McpServerConfig {
            name: "s".into(),
            source: McpSource::Config,
            transport: McpTransport::Http {
                url: "http://127.0.0.1:1/mcp".into(),
                bearer_token_env: None,
                headers: Default::default(),
            },
            startup_timeout_ms: 1000,
            tool_timeout_ms: 1000,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            trust_read_only_hints: false,
        };
        let mut tools: Vec<Tool> = (0..500).map(|i| tool(&format!("t{i}"), 10)).collect();
        tools.insert(3, tool("huge", MAX_SCHEMA_BYTES));
        let offered = offered_tools(&config, tools);
        assert_eq!(offered.len(), MAX_TOOLS_PER_SERVER);
        assert!(offered.iter().all(|t| t.name != "huge"));
        assert_eq!(offered[0].name, "t0");
        assert_eq!(
            offered[MAX_TOOLS_PER_SERVER - 1].name,
            format!("t{}", MAX_TOOLS_PER_SERVER - 1)
        );
    }
}
