//! A session's MCP servers: started in parallel in the background, their status, their tools
//! as the model sees them, calls with a timeout, lists fetched again in the background after
//! `tools/list_changed` (the next model request after that offers them), one restart of a
//! server that exited, and an end for every process when the session or tandem ends.
//!
//! Invariants: nothing here blocks its caller on a server (starting is a spawned task; a turn
//! waits for a starting server only through [`McpHub::prepare_turn`], bounded by the server's
//! startup timeout); a workspace server (`.mcp.json`) starts only once trusted; a call never
//! outlives its timeout or the turn's cancel; every status change reaches the listener once;
//! a server's process group is killed when its connection ends, is stopped, or the hub drops.
//! Does not: decide permissions (the engine does, from [`McpTool::low_risk`]), persist trust
//! (the host does), or emit protocol events (the listener, which the engine installs, does).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::service::RoleClient;
use rmcp::Peer;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

mod connection;

use connection::{offered_tools, run_connection};

use super::content::{output, McpOutput};
use super::names::unique_model_name;
use super::stdio::StderrTail;
use crate::config::mcp::{McpServerConfig, McpSource, McpTransport};

/// Where a server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpStatus {
    Starting,
    Ready,
    Failed,
    Exited,
    /// A workspace server the user has not trusted yet.
    Untrusted,
}

impl McpStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            McpStatus::Starting => "starting",
            McpStatus::Ready => "ready",
            McpStatus::Failed => "failed",
            McpStatus::Exited => "exited",
            McpStatus::Untrusted => "untrusted",
        }
    }
}

/// One server as `mcp/status` and the `mcpStatus` event show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerStatus {
    pub name: String,
    pub source: McpSource,
    pub status: McpStatus,
    /// The model-facing names of its tools (while ready).
    pub tools: Vec<String>,
    /// Why it failed or exited, with its stderr tail and the next step.
    pub error: Option<String>,
}

/// One MCP tool as the engine offers it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// `mcp__<server>__<tool>` (see `mcp::names`).
    pub model_name: String,
    pub server: String,
    pub tool: String,
    pub description: String,
    /// The tool's JSON Schema, as the server gave it.
    pub input_schema: Value,
    pub read_only_hint: bool,
    pub destructive_hint: bool,
    /// Runs without approval and beside other reads: annotated read-only by a server whose
    /// definition says `trust_read_only_hints`. Everything else asks (outside `fullAuto`).
    pub low_risk: bool,
}

/// A call that did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpCallError {
    #[error("no MCP tool is named {0}; call one of the tools you were given")]
    UnknownTool(String),
    #[error("the arguments of {tool} must be a JSON object, not {given}")]
    NotAnObject { tool: String, given: String },
    #[error("{0}")]
    Unavailable(String),
    #[error("MCP server `{server}` did not answer {tool} within {timeout_ms} ms (its tool_timeout_ms); try again with less work, or ask the user to raise the timeout")]
    TimedOut {
        server: String,
        tool: String,
        timeout_ms: u64,
    },
    #[error("MCP server `{server}` failed the call of {tool}: {why}")]
    Failed {
        server: String,
        tool: String,
        why: String,
    },
    #[error("the call was stopped")]
    Cancelled,
}

/// What the hub calls at every status change (the engine emits `mcpStatus`).
pub type StatusListener = Arc<dyn Fn(McpServerStatus) + Send + Sync>;

#[derive(Default)]
struct ListenerSlot(Mutex<Option<StatusListener>>);

impl ListenerSlot {
    fn tell(&self, status: McpServerStatus) {
        let listener = lock(&self.0).clone();
        if let Some(listener) = listener {
            listener(status);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

struct ServerState {
    status: McpStatus,
    error: Option<String>,
    /// The tools the definition offers, as the server listed them.
    tools: Vec<Tool>,
    peer: Option<Peer<RoleClient>>,
    /// Ends the current connection (its task kills the process).
    stop: Option<CancellationToken>,
    /// The current connection's task, awaited by [`McpHub::close`].
    task: Option<tokio::task::JoinHandle<()>>,
    started_at: Instant,
    stderr: Option<StderrTail>,
}

struct Server {
    config: McpServerConfig,
    trusted: AtomicBool,
    state: Mutex<ServerState>,
    /// Bumped at every status change, so a waiter sees a change without polling.
    changes: watch::Sender<u64>,
    /// Set by `notifications/tools/list_changed`: the tools are to be listed again (by a
    /// background lister, see `connection::Handler`).
    relist_wanted: AtomicBool,
    /// Whether a lister runs.
    relisting: AtomicBool,
    /// Whether the one restart after an exit has been used.
    restarted: AtomicBool,
    listener: Arc<ListenerSlot>,
}

impl Server {
    fn status(&self) -> McpServerStatus {
        let state = lock(&self.state);
        self.status_of(&state)
    }

    fn status_of(&self, state: &ServerState) -> McpServerStatus {
        McpServerStatus {
            name: self.config.name.clone(),
            source: self.config.source,
            status: state.status,
            tools: Vec::new(),
            error: state.error.clone(),
        }
    }

    /// List the tools again (after `tools/list_changed`), within the startup timeout; the
    /// listener hears the new list as a `ready` status.
    async fn relist_tools(&self) {
        let peer = lock(&self.state).peer.clone();
        let Some(peer) = peer else {
            return;
        };
        let timeout = Duration::from_millis(self.config.startup_timeout_ms);
        match tokio::time::timeout(timeout, peer.list_all_tools()).await {
            Ok(Ok(tools)) => {
                let offered = offered_tools(&self.config, tools);
                self.set(|state| state.tools = offered);
            }
            Ok(Err(e)) => tracing::warn!(
                "MCP server `{}` said its tools changed but did not list them: {e}",
                self.config.name
            ),
            Err(_) => tracing::warn!(
                "MCP server `{}` said its tools changed but did not list them within {} ms",
                self.config.name,
                self.config.startup_timeout_ms
            ),
        }
    }

    /// Change the status (with everything that goes with it) and tell the listener.
    fn set(&self, change: impl FnOnce(&mut ServerState)) {
        let status = {
            let mut state = lock(&self.state);
            change(&mut state);
            self.status_of(&state)
        };
        self.changes.send_modify(|n| *n += 1);
        self.listener.tell(status);
    }

    fn stderr_note(&self) -> String {
        let tail = lock(&self.state)
            .stderr
            .as_ref()
            .map(StderrTail::text)
            .unwrap_or_default();
        if tail.is_empty() {
            String::new()
        } else {
            format!("; its stderr ends with: {tail}")
        }
    }
}

/// A session's MCP servers (see the module docs).
pub struct McpHub {
    servers: Vec<Arc<Server>>,
    /// The folder stdio servers start in: the session's first root.
    cwd: PathBuf,
    /// Variables never passed to a server: the providers' API keys.
    never_env: Vec<String>,
    listener: Arc<ListenerSlot>,
    /// Definitions that could not be used (an SSE server, a malformed entry): shown as failed
    /// with their reason, never started.
    refused: Vec<McpServerStatus>,
}

impl McpHub {
    /// A hub for `servers` (in the order given; names must be unique, later duplicates are
    /// dropped with a log line). `trusted` says which workspace servers the user trusted; the
    /// others wait as `untrusted`. Nothing starts before [`McpHub::start`].
    pub fn new(
        servers: Vec<McpServerConfig>,
        refused: Vec<McpServerStatus>,
        trusted: &dyn Fn(&McpServerConfig) -> bool,
        cwd: PathBuf,
        never_env: Vec<String>,
    ) -> Arc<McpHub> {
        let listener = Arc::new(ListenerSlot::default());
        let mut seen = std::collections::HashSet::new();
        let servers = servers
            .into_iter()
            .filter(|config| {
                let fresh = seen.insert(config.name.clone());
                if !fresh {
                    tracing::warn!(
                        "MCP server `{}` is defined twice; the first definition is used",
                        config.name
                    );
                }
                fresh
            })
            .map(|config| {
                let trusted = config.source != McpSource::Workspace || trusted(&config);
                Arc::new(Server {
                    trusted: AtomicBool::new(trusted),
                    state: Mutex::new(ServerState {
                        status: if trusted {
                            McpStatus::Starting
                        } else {
                            McpStatus::Untrusted
                        },
                        error: (!trusted).then(|| {
                            format!(
                                "`{}` comes from the workspace's .mcp.json; trust it (mcp/trust) to start it",
                                config.name
                            )
                        }),
                        tools: Vec::new(),
                        peer: None,
                        stop: None,
                        task: None,
                        started_at: Instant::now(),
                        stderr: None,
                    }),
                    changes: watch::Sender::new(0),
                    relist_wanted: AtomicBool::new(false),
                    relisting: AtomicBool::new(false),
                    restarted: AtomicBool::new(false),
                    listener: listener.clone(),
                    config,
                })
            })
            .collect();
        Arc::new(McpHub {
            servers,
            cwd,
            never_env,
            listener,
            refused,
        })
    }

    /// A hub with no servers.
    pub fn empty() -> Arc<McpHub> {
        McpHub::new(
            Vec::new(),
            Vec::new(),
            &|_| false,
            PathBuf::from("/"),
            Vec::new(),
        )
    }

    /// Whether the hub has no servers at all.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.refused.is_empty()
    }

    /// Install what is told of every status change from now on.
    pub fn set_listener(&self, listener: StatusListener) {
        *lock(&self.listener.0) = Some(listener);
    }

    /// Start every trusted server in the background. Returns at once.
    ///
    /// Every server's first status goes to the listener: `starting` for those that start,
    /// `untrusted` for `.mcp.json` servers waiting for trust, `failed` for definitions that
    /// could not be used, so a client learns of each without asking.
    pub fn start(&self) {
        for server in &self.servers {
            if server.trusted.load(Ordering::SeqCst) {
                self.connect(server.clone());
            } else {
                self.listener.tell(server.status());
            }
        }
        for refused in &self.refused {
            self.listener.tell(refused.clone());
        }
    }

    /// The definition of workspace server `name` in this session; an unknown server or one
    /// that needs no trust is an error saying so.
    pub fn definition(&self, name: &str) -> Result<McpServerConfig, String> {
        self.workspace_server(name).map(|s| s.config.clone())
    }

    fn workspace_server(&self, name: &str) -> Result<&Arc<Server>, String> {
        let Some(server) = self.servers.iter().find(|s| s.config.name == name) else {
            let known: Vec<&str> = self
                .servers
                .iter()
                .map(|s| s.config.name.as_str())
                .collect();
            return Err(format!(
                "this session has no MCP server named `{name}`; its servers are: {}",
                if known.is_empty() {
                    "(none)".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        };
        if server.config.source != McpSource::Workspace {
            return Err(format!(
                "`{name}` comes from the {}, which is trusted already; only .mcp.json servers need trust",
                if server.config.source == McpSource::Config { "config file" } else { "client" }
            ));
        }
        Ok(server)
    }

    /// Trust the workspace server `name` and start it. Returns its definition as it was
    /// trusted.
    pub fn trust(&self, name: &str) -> Result<McpServerConfig, String> {
        let server = self.workspace_server(name)?;
        if !server.trusted.swap(true, Ordering::SeqCst) {
            self.connect(server.clone());
        }
        Ok(server.config.clone())
    }

    /// Every server's status, in definition order, with the model-facing names of its tools.
    pub fn statuses(&self) -> Vec<McpServerStatus> {
        let tools = self.tools();
        self.servers
            .iter()
            .map(|server| {
                let mut status = server.status();
                status.tools = tools
                    .iter()
                    .filter(|t| t.server == server.config.name)
                    .map(|t| t.model_name.clone())
                    .collect();
                status
            })
            .chain(self.refused.iter().cloned())
            .collect()
    }

    /// The tools of the ready servers, named uniquely, in server then tool order.
    pub fn tools(&self) -> Vec<McpTool> {
        let mut out: Vec<McpTool> = Vec::new();
        for server in &self.servers {
            let state = lock(&server.state);
            if state.status != McpStatus::Ready {
                continue;
            }
            for tool in &state.tools {
                let annotations = tool.annotations.as_ref();
                let read_only_hint = annotations.and_then(|a| a.read_only_hint) == Some(true);
                let destructive_hint = annotations.and_then(|a| a.destructive_hint) == Some(true);
                let model_name = unique_model_name(&server.config.name, &tool.name, &|n| {
                    out.iter().any(|t| t.model_name == n)
                });
                out.push(McpTool {
                    model_name,
                    server: server.config.name.clone(),
                    tool: tool.name.to_string(),
                    description: bounded_description(
                        tool.description.as_deref().unwrap_or_default(),
                    ),
                    input_schema: Value::Object((*tool.input_schema).clone()),
                    read_only_hint,
                    destructive_hint,
                    low_risk: read_only_hint && server.config.trust_read_only_hints,
                });
            }
        }
        out
    }

    /// The tool the model calls `model_name`, if a ready server has it.
    pub fn tool(&self, model_name: &str) -> Option<McpTool> {
        if !model_name.starts_with(super::names::PREFIX) {
            return None;
        }
        self.tools()
            .into_iter()
            .find(|t| t.model_name == model_name)
    }

    /// Before a turn's first request: restart (once) a server that exited, and wait for the
    /// servers still starting, each at most until its startup timeout.
    pub async fn prepare_turn(&self) {
        for server in &self.servers {
            let exited = lock(&server.state).status == McpStatus::Exited;
            if exited && !server.restarted.swap(true, Ordering::SeqCst) {
                self.connect(server.clone());
            }
        }
        for server in &self.servers {
            let mut changes = server.changes.subscribe();
            let (starting, started_at) = {
                let state = lock(&server.state);
                (state.status == McpStatus::Starting, state.started_at)
            };
            if !starting {
                continue;
            }
            // A little past the timeout: the connection task marks the server failed at it.
            let deadline = started_at
                + Duration::from_millis(server.config.startup_timeout_ms)
                + Duration::from_millis(250);
            let settled = changes.wait_for(|_| lock(&server.state).status != McpStatus::Starting);
            let _ = tokio::time::timeout_at(deadline.into(), settled).await;
        }
    }

    /// Call `model_name` with `arguments`, within its server's tool timeout, until `cancel`.
    pub async fn call(
        &self,
        model_name: &str,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> Result<McpOutput, McpCallError> {
        let Some(tool) = self.tool(model_name) else {
            return Err(self.unavailable(model_name));
        };
        let Some(server) = self.servers.iter().find(|s| s.config.name == tool.server) else {
            return Err(McpCallError::UnknownTool(model_name.to_owned()));
        };
        let arguments = match arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return Err(McpCallError::NotAnObject {
                    tool: model_name.to_owned(),
                    given: other.to_string().chars().take(80).collect(),
                })
            }
        };
        let peer = lock(&server.state).peer.clone();
        let Some(peer) = peer else {
            return Err(self.unavailable(model_name));
        };
        let mut params = CallToolRequestParams::new(tool.tool.clone());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let timeout_ms = server.config.tool_timeout_ms;
        tokio::select! {
            biased;
            _ = cancel.cancelled() => Err(McpCallError::Cancelled),
            result = tokio::time::timeout(Duration::from_millis(timeout_ms), peer.call_tool(params)) => match result {
                Ok(Ok(result)) => Ok(output(result)),
                Ok(Err(e)) => Err(McpCallError::Failed {
                    server: tool.server.clone(),
                    tool: tool.tool.clone(),
                    why: format!(
                        "{}{}",
                        super::http::cause(&e).map_or_else(|| e.to_string(), ToString::to_string),
                        server.stderr_note()
                    ),
                }),
                Err(_) => Err(McpCallError::TimedOut {
                    server: tool.server.clone(),
                    tool: tool.tool.clone(),
                    timeout_ms,
                }),
            },
        }
    }

    /// Why `model_name` cannot be called now: its server is not ready (with what it said).
    /// Why `model_name` cannot be called now, for the model: its server's status, error and
    /// stderr tail, or that no server has such a tool.
    pub fn why_unavailable(&self, model_name: &str) -> String {
        self.unavailable(model_name).to_string()
    }

    fn unavailable(&self, model_name: &str) -> McpCallError {
        for server in &self.servers {
            let prefix = super::names::model_name(&server.config.name, "");
            if model_name.starts_with(&prefix) {
                let status = server.status();
                return McpCallError::Unavailable(format!(
                    "MCP server `{}` is {}{}{}; its tools cannot be called until it is ready again (tandem restarts an exited server once, at the next turn)",
                    server.config.name,
                    status.status.as_str(),
                    status.error.map(|e| format!(" ({e})")).unwrap_or_default(),
                    server.stderr_note(),
                ));
            }
        }
        McpCallError::UnknownTool(model_name.to_owned())
    }

    /// End every server: their connections close and their process groups are killed (by
    /// their tasks, or by the processes' drop if the runtime ends first).
    pub fn shutdown(&self) {
        for server in &self.servers {
            let stop = lock(&server.state).stop.take();
            if let Some(stop) = stop {
                stop.cancel();
            }
        }
    }

    /// [`McpHub::shutdown`], then wait (at most `patience`) until every server's process is
    /// gone, so a session that ends leaves nothing running behind it.
    pub async fn close(&self, patience: Duration) {
        self.shutdown();
        let tasks: Vec<_> = self
            .servers
            .iter()
            .filter_map(|server| lock(&server.state).task.take())
            .collect();
        let _ = tokio::time::timeout(patience, futures_util::future::join_all(tasks)).await;
    }

    /// Start (or restart) one server's connection in the background.
    fn connect(&self, server: Arc<Server>) {
        let stop = CancellationToken::new();
        let previous = {
            let mut state = lock(&server.state);
            state.started_at = Instant::now();
            state.peer = None;
            state.tools.clear();
            state.stop.replace(stop.clone())
        };
        if let Some(previous) = previous {
            previous.cancel();
        }
        server.set(|state| {
            state.status = McpStatus::Starting;
            state.error = None;
        });
        let cwd = self.cwd.clone();
        let never = self.never_env.clone();
        let task = tokio::spawn(run_connection(server.clone(), cwd, never, stop));
        lock(&server.state).task = Some(task);
    }
}

impl Drop for McpHub {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The longest tool description sent to the model, in bytes; a longer one is cut with `…`.
const MAX_DESCRIPTION_BYTES: usize = 4096;

/// `description` cut at a char boundary to at most [`MAX_DESCRIPTION_BYTES`].
fn bounded_description(description: &str) -> String {
    if description.len() <= MAX_DESCRIPTION_BYTES {
        return description.to_owned();
    }
    let mut end = MAX_DESCRIPTION_BYTES;
    while !description.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &description[..end])
}

/// A definition's transport as canonical JSON: two definitions that start the same server
/// compare equal (`mcp/trust` checks that the file still holds the session's definition).
pub fn trust_key(config: &McpServerConfig) -> String {
    let transport = match &config.transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            env_vars,
        } => {
            serde_json::json!({"command": command, "args": args, "env": env, "env_vars": env_vars})
        }
        McpTransport::Http {
            url,
            bearer_token_env,
            headers,
        } => {
            serde_json::json!({"url": url, "bearer_token_env": bearer_token_env, "headers": headers})
        }
    };
    crate::protocol::canonical_json(&transport)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_description_is_cut_at_a_char_boundary() {
        let short = "reads a file";
        assert_eq!(bounded_description(short), short);
        // 3-byte characters, so the limit falls inside one.
        let long = "€".repeat(MAX_DESCRIPTION_BYTES);
        let cut = bounded_description(&long);
        assert!(cut.ends_with('…'));
        assert!(cut.len() <= MAX_DESCRIPTION_BYTES + '…'.len_utf8());
        assert!(cut.trim_end_matches('…').chars().all(|c| c == '€'));
    }
}
