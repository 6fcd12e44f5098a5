//! The native face: `tandem serve`, JSON-RPC 2.0 over stdio.
//!
//! One reader task decodes frames in arrival order and turns each into a session op or a
//! server-level answer. Only `stdout.rs` writes to stdout, in one order: a sender writes a small
//! message itself when nothing is queued, anything else goes through its writer thread (see
//! that module), so protocol messages are the only thing there (logs go to stderr). This module
//! holds no agent logic: it translates.

mod attach;
mod checkpoints;
mod customization;
mod fanout;
pub mod framing;
pub mod listen;
mod load;
mod mcp;
mod outbound;
mod params;

use load::load_response;
use params::{params, params_with_mode, prompt_parts};
pub mod rpc;
mod stdio;
mod stdout;

pub use stdio::{outbound_channel, outbound_to_fd, run};

use crate::session::host::Host;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::config::Config;
use crate::engine::EngineContext;
use crate::protocol::{self as wire, method, ErrorKind, Framing, RpcErrorObject};
use crate::session::{self, NewSession, Op, SessionError, SessionHandle};
use crate::store::Store;
use crate::workspace::protected::OwnFiles;
use crate::workspace::Workspace;
use fanout::{ConnectionId, SessionEvents};
pub use outbound::Outbound;
pub(crate) use outbound::QueuedBytes;
use rpc::Incoming;

/// What every connection of one `tandem serve` process shares: the engine, the store and the
/// live sessions (each with its [`SessionEvents`], the list of connections it sends to).
pub(crate) struct Shared {
    engine: Arc<EngineContext>,
    host: Host<Arc<SessionEvents>>,
    /// Held while a stored session is being opened, so two connections that `session/load` or
    /// `session/attach` it at once never restore it twice.
    opening: tokio::sync::Mutex<()>,
    /// Whether the process listens for WebSocket clients: sessions then keep their recent
    /// events for clients that attach again, and a connection's `initialize` does not turn
    /// approvals off for the others (a client may attach and answer).
    listening: bool,
    /// Where clients attach, once the listener is bound (reported by `initialize`).
    attach: std::sync::OnceLock<wire::AttachInfo>,
    next_connection: AtomicU64,
}

impl Shared {
    pub(crate) fn new(
        engine: Arc<EngineContext>,
        store: Option<tokio::task::JoinHandle<Result<Store, crate::store::StoreError>>>,
        listening: bool,
    ) -> Arc<Self> {
        Arc::new(Shared {
            host: Host::with_store_task(engine.clone(), store),
            engine,
            opening: tokio::sync::Mutex::new(()),
            listening,
            attach: std::sync::OnceLock::new(),
            next_connection: AtomicU64::new(1),
        })
    }

    /// End of the process: nobody answers approvals any more, so stop every turn, then let go
    /// of the store.
    pub(crate) async fn shut_down(&self) {
        self.engine.set_client_can_answer(false);
        self.host.shutdown().await;
        self.host.close_store().await;
    }
}

/// Which transport a connection came in on; they differ only in what `shutdown` ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    /// The process's stdin/stdout: its end (or `shutdown`) ends the process.
    Stdio,
    /// An attached WebSocket client: its end (or `shutdown`) ends only this connection.
    WebSocket,
}

/// One client connection: its outbound side, its handshake state and the sessions whose events
/// it receives.
pub(crate) struct Connection {
    shared: Arc<Shared>,
    id: ConnectionId,
    transport: Transport,
    engine: Arc<EngineContext>,
    out: Outbound,
    initialized: bool,
    framing: Framing,
    /// The sessions this connection receives events of, to let go of when it ends.
    subscriptions: Vec<Arc<SessionEvents>>,
}

fn session_error(error: SessionError) -> RpcErrorObject {
    RpcErrorObject::new(error.kind(), error.to_string())
}

/// How `tandem serve` talks to clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeOptions {
    /// Serve the process's stdin/stdout (the default, and what editors start).
    pub stdio: bool,
    /// Also (or only) accept WebSocket clients (`--listen ws://HOST:PORT`).
    pub websocket: Option<listen::ListenOptions>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            stdio: true,
            websocket: None,
        }
    }
}

/// Run the server until `shutdown` or the end of stdin (or, listening without stdio, until
/// SIGINT or SIGTERM).
///
/// Sessions are stored in `data_dir/tandem.sqlite3` (default: the user's data directory).
pub async fn serve(
    config: Config,
    data_dir: Option<PathBuf>,
    options: ServeOptions,
) -> anyhow::Result<()> {
    let path = crate::store::default_database_path(data_dir.as_deref());
    // The agent may not edit tandem's own config or its permission store, by any path.
    let own_files = OwnFiles::new(config.source_path.as_deref(), Some(&path));
    let opening = tokio::task::spawn_blocking(move || Store::open(&path));
    let engine = EngineContext::new(config, own_files);
    let shared = Shared::new(engine, Some(opening), options.websocket.is_some());
    // Caught before the listener prints its address (see `StopSignals`).
    let signals = (!options.stdio).then(listen::StopSignals::catch);
    let listener = match &options.websocket {
        Some(listen) => {
            let dir = crate::store::default_database_path(data_dir.as_deref())
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            Some(listen::start(shared.clone(), listen, &dir).await?)
        }
        None => None,
    };
    if options.stdio {
        return stdio::serve_stdio(shared, listener).await;
    }
    if let Some(signals) = signals {
        signals.arrived().await;
    }
    if let Some(listener) = listener {
        listener.stop().await;
    }
    shared.shut_down().await;
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    /// `shutdown`: the process ends (stdio) or this connection closes (WebSocket).
    Shutdown,
}

impl Connection {
    fn new(shared: Arc<Shared>, transport: Transport, out: Outbound) -> Self {
        let id = ConnectionId(shared.next_connection.fetch_add(1, Ordering::Relaxed));
        Connection {
            engine: shared.engine.clone(),
            shared,
            id,
            transport,
            out,
            initialized: false,
            framing: Framing::Ndjson,
            subscriptions: Vec::new(),
        }
    }

    /// Decode one whole message and act on it.
    async fn handle_message(&mut self, bytes: &[u8]) -> Flow {
        match rpc::decode(bytes) {
            Incoming::Invalid { id, error } => {
                self.out.respond::<()>(&id, Err(error));
                Flow::Continue
            }
            Incoming::Response => Flow::Continue,
            Incoming::Notification { method, params } => self.handle(None, &method, params).await,
            Incoming::Request { id, method, params } => {
                self.handle(Some(id), &method, params).await
            }
        }
    }

    /// The connection ended: its sessions stop sending to it (they keep running).
    pub(super) fn close(&mut self) {
        for events in self.subscriptions.drain(..) {
            events.unsubscribe(self.id);
        }
    }

    /// Receive `events` from now on (nothing when this connection already does).
    fn subscribe(&mut self, events: &Arc<SessionEvents>) {
        events.subscribe(self.id, self.out.clone());
        if !self.subscriptions.iter().any(|e| Arc::ptr_eq(e, events)) {
            self.subscriptions.push(events.clone());
        }
    }

    /// The sink of a session this connection creates or restores (no connection on it yet).
    fn session_events(&self) -> Arc<SessionEvents> {
        Arc::new(SessionEvents::new(
            self.engine.config.outbound_buffer_bytes,
            self.shared.listening,
        ))
    }

    /// A reply closure that writes the response for `id` (nothing for a notification).
    fn reply<T: Serialize + 'static, U: 'static>(
        &self,
        id: Option<Value>,
        map: impl FnOnce(U) -> T + Send + 'static,
    ) -> session::Reply<U> {
        let out = self.out.clone();
        Box::new(move |result: Result<U, SessionError>| {
            if let Some(id) = id {
                out.respond(&id, result.map(map).map_err(session_error));
            }
        })
    }

    fn answer<T: Serialize>(&self, id: &Option<Value>, result: Result<T, RpcErrorObject>) {
        if let Some(id) = id {
            self.out.respond(id, result);
        }
    }

    /// The store, waiting for it to finish opening if needed.
    async fn store(&self) -> Result<Option<Store>, RpcErrorObject> {
        self.shared
            .host
            .store()
            .await
            .map_err(|e| RpcErrorObject::new(ErrorKind::Internal, e.to_string()))
    }
    fn session(&self, session_id: &str) -> Result<SessionHandle, RpcErrorObject> {
        self.shared
            .host
            .get(session_id)
            .map(|live| live.handle)
            .ok_or_else(|| {
                RpcErrorObject::new(
                    ErrorKind::UnknownSession,
                    format!("session {session_id} is not loaded in this server; resume it with session/load, or create one with session/new"),
                )
            })
    }

    async fn handle(&mut self, id: Option<Value>, method: &str, params: Value) -> Flow {
        if method == method::SHUTDOWN {
            if self.transport == Transport::Stdio {
                // From here nobody answers approvals; turns end with the disconnect notice.
                self.engine.set_client_can_answer(false);
                self.shared.host.shutdown().await;
            }
            // An attached client's `shutdown` ends only its own connection: the sessions are
            // the stdio client's (or the listening process's) and others may be attached.
            self.answer(&id, Ok(Value::Null));
            return Flow::Shutdown;
        }
        if method != method::INITIALIZE && !self.initialized && method::ALL.contains(&method) {
            self.answer::<()>(
                &id,
                Err(RpcErrorObject::new(
                    ErrorKind::NotInitialized,
                    "the server is not initialized; send `initialize` first",
                )),
            );
            return Flow::Continue;
        }
        let result = self.dispatch(&id, method, params).await;
        if let Err(error) = result {
            self.answer::<()>(&id, Err(error));
        }
        Flow::Continue
    }

    /// Handle one method. An `Err` is answered by the caller; `Ok` means it was answered (now or
    /// later, by the session actor).
    async fn dispatch(
        &mut self,
        id: &Option<Value>,
        method: &str,
        raw: Value,
    ) -> Result<(), RpcErrorObject> {
        match method {
            method::INITIALIZE => {
                let p: wire::InitializeParams = params(method, raw)?;
                if p.protocol_version != wire::PROTOCOL_VERSION {
                    return Err(RpcErrorObject::new(
                        ErrorKind::UnsupportedProtocolVersion,
                        format!(
                            "protocolVersion {} is not supported; this server speaks protocolVersion {}",
                            p.protocol_version,
                            wire::PROTOCOL_VERSION
                        ),
                    ));
                }
                let can_answer = p
                    .capabilities
                    .as_ref()
                    .and_then(|c| c.approvals)
                    .unwrap_or(true);
                // A listening process keeps asking: an attached client may answer even when
                // this one cannot.
                if !self.shared.listening {
                    self.engine.set_client_can_answer(can_answer);
                }
                self.initialized = true;
                let config = &self.engine.config;
                let models = model_catalog(config);
                self.answer(
                    id,
                    Ok(wire::InitializeResult {
                        protocol_version: wire::PROTOCOL_VERSION,
                        server_info: wire::ServerInfo {
                            name: "tandem".to_owned(),
                            version: env!("CARGO_PKG_VERSION").to_owned(),
                        },
                        capabilities: wire::ServerCapabilities {
                            session_store: self.shared.host.has_store().await,
                            framing: self.framing,
                            image_prompts: true,
                            document_prompts: true,
                            attach: self.shared.attach.get().cloned(),
                        },
                        models,
                        default_model: config.default_model.clone(),
                    }),
                );
                Ok(())
            }
            method::MODELS_LIST => {
                let config = &self.engine.config;
                self.answer(
                    id,
                    Ok(wire::ModelsListResult {
                        models: model_catalog(config),
                        default_model: config.default_model.clone(),
                    }),
                );
                Ok(())
            }
            method::SESSION_NEW => {
                let p: wire::SessionNewParams = params_with_mode(method, raw)?;
                let model = p
                    .model
                    .unwrap_or_else(|| self.engine.config.default_model.clone());
                if self.engine.config.model(&model).is_none() {
                    return Err(session_error(SessionError::UnknownModel {
                        known: self
                            .engine
                            .config
                            .models
                            .keys()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", "),
                        model,
                    }));
                }
                let cwd = p.cwd.clone();
                let own_files = self.engine.own_files.clone();
                let workspace =
                    tokio::task::spawn_blocking(move || open_workspace(&cwd, own_files))
                        .await
                        .map_err(|e| RpcErrorObject::new(ErrorKind::Internal, e.to_string()))??;
                let mode = p.mode.unwrap_or(wire::Mode::Ask);
                let store = self.store().await?;
                let mcp = session::mcp::build_hub(
                    &self.engine,
                    store.as_ref(),
                    &workspace,
                    p.mcp_servers.as_deref().unwrap_or_default(),
                )
                .await;
                let events = self.session_events();
                self.subscribe(&events);
                let handle = session::spawn(
                    self.engine.clone(),
                    events.clone(),
                    NewSession {
                        workspace,
                        model: model.clone(),
                        mode,
                        store,
                        client_fs: None,
                        mcp,
                    },
                );
                let session_id = handle.id().to_owned();
                let servers = handle.clone();
                self.shared.host.insert(handle, p.cwd, events);
                self.answer(
                    id,
                    Ok(wire::SessionNewResult {
                        session_id,
                        model,
                        mode,
                    }),
                );
                // After the response: the client knows the session before its mcpStatus.
                servers.start_mcp_servers();
                Ok(())
            }
            method::SESSION_LIST => {
                let mut p: wire::SessionListParams = params(method, raw)?;
                // Sessions store the canonical workspace path; match the filter the same way.
                if let Some(cwd) = p.cwd.take() {
                    let probe = cwd.clone();
                    let canonical =
                        tokio::task::spawn_blocking(move || std::fs::canonicalize(probe))
                            .await
                            .ok()
                            .and_then(Result::ok)
                            .map(|c| c.display().to_string());
                    p.cwd = Some(canonical.unwrap_or(cwd));
                }
                let sessions: Vec<wire::SessionSummary> = self
                    .shared
                    .host
                    .list(p.cwd)
                    .await
                    .map_err(|e| RpcErrorObject::new(ErrorKind::Internal, e.to_string()))?
                    .into_iter()
                    .map(|l| wire::SessionSummary {
                        session_id: l.session_id,
                        cwd: l.cwd,
                        title: l.title,
                        model: l.model,
                        updated_at: l.updated_at,
                    })
                    .collect();
                self.answer(id, Ok(wire::SessionListResult { sessions }));
                Ok(())
            }
            method::SESSION_LOAD => {
                let p: wire::SessionLoadParams = params(method, raw)?;
                let opened = self.open_session(&p.session_id).await?;
                self.subscribe(&opened.events);
                if let Some(id) = id {
                    let reply = load_response(
                        opened.handle.shared.clone(),
                        id.clone(),
                        opened.cwd.clone(),
                        opened.pending.clone(),
                        p.cursor,
                    );
                    self.out.send(reply.await);
                }
                opened.start();
                Ok(())
            }
            method::SESSION_ATTACH => {
                let p: wire::SessionAttachParams = params(method, raw)?;
                self.attach(id, p).await
            }
            method::MCP_STATUS => {
                let p: wire::SessionIdParams = params(method, raw)?;
                let result = mcp::status(&self.session(&p.session_id)?);
                self.answer(id, Ok(result));
                Ok(())
            }
            method::MCP_TRUST => {
                let p: wire::McpTrustParams = params(method, raw)?;
                let handle = self.session(&p.session_id)?;
                let store = self.store().await?;
                mcp::trust(&handle, store.as_ref(), &p.server).await?;
                self.answer(id, Ok(wire::EmptyResult {}));
                Ok(())
            }
            method::RETRY => {
                let p: wire::SessionIdParams = params(method, raw)?;
                let reply = self.reply(id.clone(), |turn_id| wire::PromptResult {
                    turn_id: Some(turn_id),
                    command: None,
                });
                self.session(&p.session_id)?.send(Op::Retry { reply });
                Ok(())
            }
            method::PROMPT => {
                let p: wire::PromptParams = params(method, raw)?;
                let parts = prompt_parts(p.content)?;
                let reply = self.reply(id.clone(), customization::prompt_result);
                self.session(&p.session_id)?
                    .send(Op::Prompt { parts, reply });
                Ok(())
            }
            method::COMMANDS_LIST => {
                let p: wire::SessionIdParams = params(method, raw)?;
                let result = customization::commands_list(&self.session(&p.session_id)?).await;
                self.answer(id, Ok(result));
                Ok(())
            }
            method::HOOKS_LIST => {
                let p: wire::SessionIdParams = params(method, raw)?;
                let result = customization::hooks_list(&self.session(&p.session_id)?).await;
                self.answer(id, Ok(result));
                Ok(())
            }
            method::HOOKS_TRUST => {
                let p: wire::SessionIdParams = params(method, raw)?;
                customization::hooks_trust(&self.session(&p.session_id)?).await?;
                self.answer(id, Ok(wire::EmptyResult {}));
                Ok(())
            }
            method::STOP => {
                let p: wire::SessionIdParams = params(method, raw)?;
                let reply = self.reply(id.clone(), |stopped| wire::StopResult { stopped });
                self.session(&p.session_id)?.send(Op::Stop { reply });
                Ok(())
            }
            method::STEER => {
                let p: wire::SteerParams = params(method, raw)?;
                if p.text.trim().is_empty() {
                    return Err(RpcErrorObject::new(
                        ErrorKind::InvalidParams,
                        "steer text is empty; send the text to inject",
                    ));
                }
                let reply = self.reply(id.clone(), |()| wire::SteerResult { queued: true });
                self.session(&p.session_id)?.send(Op::Steer {
                    text: p.text,
                    reply,
                });
                Ok(())
            }
            method::APPROVE => {
                let p: wire::ApproveParams = params(method, raw)?;
                let reply = self.reply(id.clone(), |()| wire::EmptyResult {});
                // The session binds the approval to the arguments the user saw (the digest).
                self.session(&p.session_id)?.send(Op::Approve {
                    request_id: p.request_id,
                    decision: p.decision,
                    message: p.message,
                    edited_content: p.edited_content,
                    arguments_digest: p.arguments_digest,
                    deny_memory: session::DenyMemory::ThisCallOnly,
                    reply,
                });
                Ok(())
            }
            method::ANSWER => {
                let p: wire::AnswerParams = params(method, raw)?;
                let reply = self.reply(id.clone(), |()| wire::EmptyResult {});
                self.session(&p.session_id)?.send(Op::Answer {
                    request_id: p.request_id,
                    answer: p.answer,
                    reply,
                });
                Ok(())
            }
            method::SWITCH_MODEL => {
                let p: wire::SwitchModelParams = params(method, raw)?;
                let reply = self.reply(id.clone(), |(model, warning)| wire::SwitchModelResult {
                    model,
                    warning,
                });
                self.session(&p.session_id)?.send(Op::SwitchModel {
                    model: p.model,
                    reply,
                });
                Ok(())
            }
            method::SET_MODE => {
                let p: wire::SetModeParams = params_with_mode(method, raw)?;
                let reply = self.reply(id.clone(), |()| wire::EmptyResult {});
                self.session(&p.session_id)?.send(Op::SetMode {
                    mode: p.mode,
                    reply,
                });
                Ok(())
            }
            method::SET_NETWORK_ACCESS => {
                let p: wire::SetNetworkAccessParams = params(method, raw)?;
                let reply = self.reply(id.clone(), |allow| wire::SetNetworkAccessResult { allow });
                self.session(&p.session_id)?.send(Op::SetNetworkAccess {
                    allow: p.allow,
                    reply,
                });
                Ok(())
            }
            m if checkpoints::METHODS.contains(&m) => self.dispatch_checkpoint(id, m, raw).await,
            other => Err(RpcErrorObject::new(
                ErrorKind::MethodNotFound,
                format!(
                    "method `{other}` does not exist; the methods are: {}",
                    method::ALL.join(", ")
                ),
            )),
        }
    }
}

fn open_workspace(cwd: &str, own_files: OwnFiles) -> Result<Workspace, RpcErrorObject> {
    let path = Path::new(cwd);
    let bad = |why: &str| {
        RpcErrorObject::new(
            ErrorKind::InvalidCwd,
            format!("cwd `{cwd}` {why}; pass the absolute path of the workspace folder"),
        )
    };
    if !path.is_absolute() {
        return Err(bad("is not an absolute path"));
    }
    if !path.is_dir() {
        return Err(bad("is not an existing directory"));
    }
    Workspace::open_protecting(vec![path.to_path_buf()], own_files).map_err(|e| bad(&e.to_string()))
}

/// The model catalog as `initialize` and `models/list` report it.
fn model_catalog(config: &crate::config::Config) -> Vec<wire::ModelInfo> {
    config
        .models
        .iter()
        .map(|(id, m)| wire::ModelInfo {
            id: id.clone(),
            provider: m.provider.clone(),
            name: m.name.clone(),
            context_window: m.context_window,
            max_output_tokens: m.max_output_tokens,
            vision: m.vision,
            pdf: m.pdf,
            reasoning: m.reasoning,
            parallel_tool_calls: m.parallel_tool_calls,
        })
        .collect()
}
