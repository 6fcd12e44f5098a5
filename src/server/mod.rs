//! The native face: `tandem serve`, JSON-RPC 2.0 over stdio.
//!
//! One reader task decodes frames in arrival order and turns each into a session op or a
//! server-level answer. Only `stdout.rs` writes to stdout, in one order: a sender writes a small
//! message itself when nothing is queued, anything else goes through its writer thread (see
//! that module), so protocol messages are the only thing there (logs go to stderr). This module
//! holds no agent logic: it translates.

mod checkpoints;
mod customization;
pub mod framing;
mod load;
mod mcp;
mod params;

use load::load_response;
use params::{params, params_with_mode, prompt_parts};
pub mod rpc;
mod stdout;

use crate::session::host::Host;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde_json::Value;
use tokio::io::AsyncRead;
use tokio::sync::mpsc;

use crate::config::Config;
use crate::engine::EngineContext;
use crate::protocol::{self as wire, method, ErrorKind, Event, Framing, RpcErrorObject};
use crate::session::{self, EventSink, NewSession, Op, SessionError, SessionHandle};
use crate::store::Store;
use crate::workspace::protected::OwnFiles;
use crate::workspace::Workspace;
use framing::{Frame, FrameReader};
use rpc::Incoming;

/// Messages for stdout, already serialized, not yet framed.
#[derive(Clone)]
pub struct Outbound {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    /// The real stdout, written directly when it can be (see `stdout`); `None` for an
    /// in-process driver that reads the channel.
    stdout: Option<Arc<stdout::Shared>>,
}

impl Outbound {
    fn send(&self, body: Vec<u8>) {
        // Nothing goes out above the frame cap clients are told about; builders of large
        // messages fit them first, this catches the rest (see `protocol::fit`).
        let Some(body) = crate::protocol::fit::fit_message(body) else {
            return;
        };
        match &self.stdout {
            Some(stdout) => stdout.send(&self.tx, body),
            // In-process drivers read the channel; the writer is gone only when stdout closed.
            None => {
                let _ = self.tx.send(body);
            }
        }
    }

    fn respond<T: Serialize>(&self, id: &Value, result: Result<T, RpcErrorObject>) {
        match result {
            Ok(value) => self.send(rpc::result_message(id, value)),
            Err(error) => self.send(rpc::error_message(id, &error)),
        }
    }
}

impl Outbound {
    /// Bytes waiting to be written to a client that reads slowly or not at all (0 for an
    /// in-process driver, which reads its channel).
    fn backlog_bytes(&self) -> usize {
        self.stdout
            .as_ref()
            .map_or(0, |stdout| stdout.backlog_bytes())
    }
}

/// One session's events on the native face.
///
/// A client that stops reading would make tandem hold everything it sends (a command that
/// floods output: gigabytes). So past `outbound_buffer_bytes` of backlog, streamed pieces are
/// dropped; the first event of the session that goes out after them is preceded by one
/// `streamTruncated` that stands for them, numbered with the last dropped piece's `seq`, so
/// the client still sees every `seq` accounted for. Stored events are never dropped: the
/// assistant message and the call's final update carry what the pieces did, so the client's
/// picture is whole again once it reads.
struct NativeSink {
    out: Outbound,
    /// `outbound_buffer_bytes`.
    cap: usize,
    /// Set while `dropped` holds a run, so the usual path takes no lock.
    dropping: AtomicBool,
    dropped: Mutex<Option<DroppedRun>>,
}

/// Streamed pieces dropped in a row for a client that did not read.
struct DroppedRun {
    from_seq: u64,
    last_seq: u64,
    turn_id: Option<String>,
    count: u64,
    bytes: u64,
}

impl EventSink for NativeSink {
    fn emit(&self, session_id: &str, seq: u64, turn_id: Option<&str>, event: &Event) {
        let message = rpc::event_message(session_id, seq, turn_id, event);
        if event.is_streamed_piece() && self.out.backlog_bytes() > self.cap {
            let mut dropped = self.dropped.lock().unwrap_or_else(PoisonError::into_inner);
            let run = dropped.get_or_insert_with(|| DroppedRun {
                from_seq: seq,
                last_seq: seq,
                turn_id: None,
                count: 0,
                bytes: 0,
            });
            run.last_seq = seq;
            run.turn_id = turn_id.map(str::to_owned);
            run.count += 1;
            run.bytes += message.len() as u64;
            self.dropping.store(true, Ordering::Relaxed);
            return;
        }
        if self.dropping.swap(false, Ordering::Relaxed) {
            let run = self
                .dropped
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(run) = run {
                tracing::info!(
                    session = session_id,
                    dropped = run.count,
                    bytes = run.bytes,
                    "the client did not read; streamed pieces were dropped"
                );
                self.out.send(rpc::event_message(
                    session_id,
                    run.last_seq,
                    run.turn_id.as_deref(),
                    &Event::StreamTruncated {
                        from_seq: run.from_seq,
                        dropped: run.count,
                        dropped_bytes: run.bytes,
                    },
                ));
            }
        }
        self.out.send(message);
    }
}

/// The framing shared with the writer: 0 undecided (NDJSON), 1 NDJSON, 2 Content-Length.
fn framing_code(framing: Framing) -> u8 {
    match framing {
        Framing::Ndjson => 1,
        Framing::ContentLength => 2,
    }
}

/// The framing a [`framing_code`] stands for; undecided (0) answers in NDJSON.
fn framing_from_code(code: u8) -> Framing {
    match code {
        2 => Framing::ContentLength,
        _ => Framing::Ndjson,
    }
}

struct Server {
    engine: Arc<EngineContext>,
    out: Outbound,
    /// The store and the sessions of this connection; the native face keeps nothing of its own
    /// per session.
    host: Host<()>,
    initialized: bool,
    framing: Framing,
}

fn session_error(error: SessionError) -> RpcErrorObject {
    RpcErrorObject::new(error.kind(), error.to_string())
}

/// Run the server on stdin/stdout until `shutdown` or the end of stdin.
///
/// Sessions are stored in `data_dir/tandem.sqlite3` (default: the user's data directory).
pub async fn serve(config: Config, data_dir: Option<PathBuf>) -> anyhow::Result<()> {
    let path = crate::store::default_database_path(data_dir.as_deref());
    // The agent may not edit tandem's own config or its permission store, by any path.
    let own_files = OwnFiles::new(config.source_path.as_deref(), Some(&path));
    let opening = tokio::task::spawn_blocking(move || Store::open(&path));
    let (tx, rx) = mpsc::unbounded_channel();
    let framing = Arc::new(AtomicU8::new(0));
    let (stdout, writer) = stdout::spawn_writer(rx, framing.clone()).map_err(|e| {
        anyhow::anyhow!("cannot write to stdout ({e}); start tandem with stdout open")
    })?;
    let out = Outbound {
        tx,
        stdout: Some(stdout),
    };
    let result = run(
        config,
        own_files,
        tokio::io::stdin(),
        out,
        framing,
        Some(opening),
    )
    .await;
    // All senders are dropped by now, so the writer drains what is queued and exits.
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
    result
}

/// The read loop, generic over the input so tests and benchmarks can drive it in-process.
pub async fn run(
    config: Config,
    own_files: OwnFiles,
    input: impl AsyncRead + Unpin,
    out: Outbound,
    framing_shared: Arc<AtomicU8>,
    store: Option<tokio::task::JoinHandle<Result<Store, crate::store::StoreError>>>,
) -> anyhow::Result<()> {
    let engine = EngineContext::new(config, own_files);
    let mut server = Server {
        engine: engine.clone(),
        out,
        host: Host::with_store_task(engine, store),
        initialized: false,
        framing: Framing::Ndjson,
    };
    let mut reader = FrameReader::new(input);
    loop {
        let frame = match reader.next_frame().await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("stdin read failed: {e}; shutting down");
                break;
            }
        };
        if let Some(detected) = reader.framing() {
            if server.framing != detected || framing_shared.load(Ordering::SeqCst) == 0 {
                server.framing = detected;
                framing_shared.store(framing_code(detected), Ordering::SeqCst);
            }
        }
        let bytes = match frame {
            Frame::Message(bytes) => bytes,
            Frame::TooLarge => {
                server.out.respond::<()>(
                    &Value::Null,
                    Err(RpcErrorObject::new(
                        ErrorKind::FrameTooLarge,
                        format!(
                            "frame larger than {} bytes was skipped; send smaller messages (attach large files by path)",
                            framing::MAX_FRAME_BYTES
                        ),
                    )),
                );
                continue;
            }
            Frame::Malformed(problem) => {
                server.out.respond::<()>(
                    &Value::Null,
                    Err(RpcErrorObject::new(
                        ErrorKind::ParseError,
                        format!("parse error: {problem}"),
                    )),
                );
                continue;
            }
        };
        match rpc::decode(&bytes) {
            Incoming::Invalid { id, error } => server.out.respond::<()>(&id, Err(error)),
            Incoming::Response => {}
            Incoming::Notification { method, params } => {
                if server.handle(None, &method, params).await == Flow::Shutdown {
                    break;
                }
            }
            Incoming::Request { id, method, params } => {
                if server.handle(Some(id), &method, params).await == Flow::Shutdown {
                    break;
                }
            }
        }
    }
    // End of input or shutdown: nobody can answer approvals any more, so stop every turn.
    server.engine.set_client_can_answer(false);
    server.host.shutdown().await;
    server.host.close_store().await;
    Ok(())
}

#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Shutdown,
}

impl Server {
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
        self.host
            .store()
            .await
            .map_err(|e| RpcErrorObject::new(ErrorKind::Internal, e.to_string()))
    }
    fn sink(&self) -> Arc<dyn EventSink> {
        Arc::new(NativeSink {
            out: self.out.clone(),
            cap: self.engine.config.outbound_buffer_bytes,
            dropping: AtomicBool::new(false),
            dropped: Mutex::new(None),
        })
    }

    fn session(&self, session_id: &str) -> Result<SessionHandle, RpcErrorObject> {
        self.host
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
            // From here nobody answers approvals; turns end with the disconnect notice.
            self.engine.set_client_can_answer(false);
            self.host.shutdown().await;
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
                self.engine.set_client_can_answer(can_answer);
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
                            session_store: self.host.has_store().await,
                            framing: self.framing,
                            image_prompts: true,
                            document_prompts: true,
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
                let handle = session::spawn(
                    self.engine.clone(),
                    self.sink(),
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
                self.host.insert(handle, p.cwd, ());
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
                if let Some(entry) = self.host.get(&p.session_id) {
                    let pending: Vec<Value> = entry.handle.shared.pending_payloads();
                    if let Some(id) = id {
                        let shared = entry.handle.shared.clone();
                        let reply =
                            load_response(shared, id.clone(), entry.cwd.clone(), pending, p.cursor);
                        self.out.send(reply.await);
                    }
                    return Ok(());
                }
                let Some(store) = self.store().await? else {
                    return Err(RpcErrorObject::new(
                        ErrorKind::UnknownSession,
                        format!(
                            "unknown session {}; this server keeps no store",
                            p.session_id
                        ),
                    ));
                };
                let restored =
                    session::restore(self.engine.clone(), self.sink(), store, &p.session_id)
                        .await
                        .map_err(|e| {
                            let kind = match e {
                                session::RestoreError::NotFound(_) => ErrorKind::UnknownSession,
                                session::RestoreError::Workspace { .. } => ErrorKind::InvalidCwd,
                                _ => ErrorKind::Internal,
                            };
                            RpcErrorObject::new(kind, e.to_string())
                        })?;
                let cwd = restored.handle.shared.workspace.roots()[0]
                    .display()
                    .to_string();
                if let Some(id) = id {
                    let shared = restored.handle.shared.clone();
                    let reply = load_response(
                        shared,
                        id.clone(),
                        cwd.clone(),
                        restored.pending,
                        p.cursor.clone(),
                    );
                    self.out.send(reply.await);
                }
                restored.handle.start_mcp_servers();
                // The crashed turn continues only after the client has the load response.
                if let Some(resume) = restored.resume {
                    restored.handle.send(Op::Resume { resume });
                }
                self.host.insert(restored.handle, cwd, ());
                Ok(())
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

/// Build an [`Outbound`] and its receiver, for in-process drivers (benchmarks, tests).
pub fn outbound_channel() -> (Outbound, mpsc::UnboundedReceiver<Vec<u8>>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Outbound { tx, stdout: None }, rx)
}

/// An outbound side that writes framed messages to `fd` (the write end of a pipe or socket)
/// exactly as `serve` writes its stdout: straight from the sending thread when it can, else on
/// a writer thread. For in-process drivers that must measure the real output path, not a
/// channel. The thread ends, and the returned handle joins, once `run` returned.
pub fn outbound_to_fd(
    fd: std::os::fd::OwnedFd,
    framing: Arc<AtomicU8>,
) -> (Outbound, std::thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (stdout, writer) = stdout::spawn_writer_on(fd, rx, framing);
    (
        Outbound {
            tx,
            stdout: Some(stdout),
        },
        writer,
    )
}
