//! The ACP face: `tandem acp`, the Agent Client Protocol v1 over stdio, for Zed, JetBrains,
//! CodeCompanion, avante.nvim, agentic.nvim and Emacs agent-shell.
//!
//! It drives the same session actor and store as `tandem serve`, so a session started in one
//! face can be loaded in the other. The `agent-client-protocol` crate owns the JSON-RPC
//! envelope and dispatch, `transport` the bytes on stdin/stdout; this module only translates.
//! Its handlers run inside the crate's dispatch loop and return at once (or, for the ones that
//! wait on the store or a session, in a task beside it): a prompt is queued on the session
//! actor and answered later from `turnEnded` (see `bridge`), and requests to the client
//! (permissions, questions, file reads and writes) are awaited in tasks, so `session/cancel`
//! and the client's answers are always read.

mod bridge;
pub mod checkpoints;
pub mod convert;
pub mod customization;
mod sessions;
mod transport;

use crate::session::host::{shutdown_reply, Host};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ErrorCode};
use serde::Serialize;
use serde_json::{json, Value};

use crate::config::Config;
use crate::engine::EngineContext;
use crate::protocol::ErrorKind;
use crate::session::{self, lock, NewSession, Op, SessionError, SessionHandle};
use crate::store::Store;
use crate::workspace::Workspace;
use bridge::{Bridge, BridgeSink, ClientAbilities};

/// The extension method that steers a running turn: params `{sessionId, text}`, result
/// `{queued: true}`; also accepted as a notification. Advertised in `initialize._meta`.
pub const STEERING_METHOD: &str = "_session/steering";

type AcpError = agent_client_protocol::Error;

/// How long `tandem acp` may take to exit once stdin has ended, in every state.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_millis(800);

/// A JSON-RPC error with tandem's `data.kind`, like the native face's errors.
fn error(kind: ErrorKind, message: impl Into<String>, extra: Value) -> AcpError {
    let mut data = json!({"kind": kind});
    if let (Value::Object(data), Value::Object(extra)) = (&mut data, extra) {
        data.extend(extra);
    }
    AcpError::new(ErrorCode::from(acp_code(kind)), message).data(data)
}

/// The JSON-RPC code of an error on the ACP face. ACP gives `-32000` a meaning of its own
/// ("authentication required") and `-32002` ("resource not found"), so the native face's
/// `-32000` for every application error would tell an ACP client to log in. Bad params of
/// any kind are `-32602`; an unknown session is `-32002`; the rest of tandem's application
/// errors take one code each in `-32050..=-32059` (README, "Use it from Zed"), with `data.kind`
/// naming it as on the native face.
fn acp_code(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::InvalidParams
        | ErrorKind::InvalidMode
        | ErrorKind::UnknownModel
        | ErrorKind::InvalidCwd => -32602,
        ErrorKind::UnknownSession => -32002,
        ErrorKind::ParseError
        | ErrorKind::InvalidRequest
        | ErrorKind::FrameTooLarge
        | ErrorKind::MethodNotFound
        | ErrorKind::Internal => kind.code() as i32,
        ErrorKind::TurnInProgress => -32050,
        ErrorKind::NoTurnRunning => -32051,
        ErrorKind::StaleApproval => -32052,
        ErrorKind::RetryUnavailable => -32053,
        ErrorKind::Unsupported => -32054,
        ErrorKind::StoreUnavailable => -32055,
        ErrorKind::SteeringQueueFull => -32056,
        ErrorKind::NotInitialized => -32057,
        ErrorKind::UnsupportedProtocolVersion => -32058,
        ErrorKind::UnknownTurn => -32059,
    }
}

/// Sessions per `session/list` page.
const LIST_PAGE: usize = 100;

fn session_error(e: SessionError) -> AcpError {
    error(e.kind(), e.to_string(), Value::Null)
}

fn invalid(message: impl Into<String>) -> AcpError {
    error(ErrorKind::InvalidParams, message, Value::Null)
}

fn to_value<T: Serialize>(value: T) -> Result<Value, AcpError> {
    serde_json::to_value(value).map_err(AcpError::into_internal_error)
}

struct Acp {
    engine: Arc<EngineContext>,
    abilities: Mutex<ClientAbilities>,
    /// The store and the sessions of this connection, each with its bridge to the client.
    host: Host<Arc<Bridge>>,
}

/// Run the ACP agent on stdin/stdout until the client closes stdin.
pub async fn serve(config: Config, data_dir: Option<PathBuf>) -> anyhow::Result<()> {
    let path = crate::store::default_database_path(data_dir.as_deref());
    // The agent may not edit tandem's own config or its permission store, by any path, also
    // when the edit would go through the editor (`fs/write_text_file`).
    let own_files =
        crate::workspace::protected::OwnFiles::new(config.source_path.as_deref(), Some(&path));
    let engine = EngineContext::new(config, own_files);
    let acp = Arc::new(Acp {
        engine: engine.clone(),
        abilities: Mutex::new(ClientAbilities::default()),
        host: Host::new(engine, Some(path)),
    });
    let for_requests = acp.clone();
    let for_notifications = acp.clone();
    let transport = transport::stdio_transport(tokio::io::stdin(), tokio::io::stdout());
    let mut input_closed = transport.input_closed;
    let connection = Agent
        .v1()
        .name("tandem")
        .on_receive_request(
            async move |request: acp::ClientRequest,
                        responder: Responder<Value>,
                        cx: ConnectionTo<Client>| {
                for_requests.request(request, responder, cx).await;
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: acp::ClientNotification, _cx: ConnectionTo<Client>| {
                for_notifications.notification(notification);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport.lines);
    // The connection ends when the client closes stdin; whatever the crate still waits for
    // (a reply to a request the client will never answer), tandem exits within a second of
    // that, as a child of an editor that quit must.
    let result = tokio::select! {
        result = connection => result,
        _ = async {
            let _ = (&mut input_closed).await;
            tokio::time::sleep(EXIT_GRACE / 2).await;
        } => Ok(()),
    };
    // The client is gone: nobody can answer approvals, so stop every turn and shut down.
    acp.engine.set_client_can_answer(false);
    let live = acp.host.drain();
    for l in &live {
        l.face.cancel();
    }
    let stopping = async {
        for l in live {
            let _ = shutdown_reply(&l.handle).await;
            l.face.detach();
        }
    };
    if tokio::time::timeout(EXIT_GRACE / 2, stopping)
        .await
        .is_err()
    {
        tracing::warn!("sessions did not stop in time after the client left; exiting anyway");
    }
    let _ = tokio::time::timeout(EXIT_GRACE / 4, transport.writer).await;
    acp.host.close_store().await;
    result.map_err(|e| anyhow::anyhow!("ACP connection failed: {e}"))
}

impl Acp {
    /// The store (this face always keeps one), waiting for it to finish opening.
    async fn store(&self) -> Result<Store, AcpError> {
        match self.host.store().await {
            Ok(Some(store)) => Ok(store),
            Ok(None) => Err(error(
                ErrorKind::Internal,
                "this server keeps no session store".to_owned(),
                Value::Null,
            )),
            Err(e) => Err(error(ErrorKind::Internal, e.to_string(), Value::Null)),
        }
    }

    fn live(&self, session_id: &str) -> Result<(Arc<Bridge>, SessionHandle), AcpError> {
        self.host
            .get(session_id)
            .map(|l| (l.face, l.handle))
            .ok_or_else(|| {
                error(
                    ErrorKind::UnknownSession,
                    format!("unknown session {session_id}; create one with session/new or load it with session/load"),
                    json!({"sessionId": session_id}),
                )
            })
    }

    async fn request(
        self: &Arc<Self>,
        request: acp::ClientRequest,
        responder: Responder<Value>,
        cx: ConnectionTo<Client>,
    ) {
        // Handlers that wait (for a session to stop, for the store, for a long history to be
        // replayed) run beside the dispatch loop: while one waits the loop must go on reading,
        // or the client's answer to an open `fs/*` request (which that wait may depend on) and
        // its `session/cancel` would never be seen.
        let me = self.clone();
        fn answer_later(
            responder: Responder<Value>,
            work: futures_util::future::BoxFuture<'static, Result<Value, AcpError>>,
        ) {
            tokio::spawn(async move {
                let _ = responder.respond_with_result(work.await);
            });
        }
        match request {
            acp::ClientRequest::LoadSessionRequest(r) => answer_later(
                responder,
                Box::pin(async move {
                    me.open_session(r.session_id.0.to_string(), r.cwd, true, r.mcp_servers, cx)
                        .await
                }),
            ),
            acp::ClientRequest::ResumeSessionRequest(r) => answer_later(
                responder,
                Box::pin(async move {
                    me.open_session(r.session_id.0.to_string(), r.cwd, false, r.mcp_servers, cx)
                        .await
                }),
            ),
            acp::ClientRequest::CloseSessionRequest(r) => answer_later(
                responder,
                Box::pin(async move { me.close(&r.session_id.0).await }),
            ),
            acp::ClientRequest::ForkSessionRequest(r) => {
                answer_later(responder, Box::pin(async move { me.fork(r, cx).await }))
            }
            acp::ClientRequest::ExtMethodRequest(r)
                if checkpoints::is_checkpoint_method(&r.method) =>
            {
                answer_later(
                    responder,
                    Box::pin(async move { me.checkpoint_method(&r.method, r.params.get()).await }),
                )
            }
            acp::ClientRequest::ExtMethodRequest(r)
                if customization::is_customization_method(&r.method) =>
            {
                answer_later(
                    responder,
                    Box::pin(
                        async move { me.customization_method(&r.method, r.params.get()).await },
                    ),
                )
            }
            request => self.answer_now(request, responder, cx).await,
        }
    }

    async fn answer_now(
        &self,
        request: acp::ClientRequest,
        responder: Responder<Value>,
        cx: ConnectionTo<Client>,
    ) {
        let answer = match request {
            acp::ClientRequest::InitializeRequest(r) => self.initialize(r),
            // tandem advertises no authentication method (provider keys live in its config),
            // so no method id can be right.
            acp::ClientRequest::AuthenticateRequest(r) => Err(invalid(format!(
                "authentication method `{}` is not offered: tandem needs no authentication (provider keys are read from its config file or the environment)",
                r.method_id.0
            ))),
            acp::ClientRequest::LogoutRequest(_) => to_value(acp::LogoutResponse::new()),
            acp::ClientRequest::NewSessionRequest(r) => self.new_session(r, cx).await,
            acp::ClientRequest::ListSessionsRequest(r) => self.list(r).await,
            acp::ClientRequest::SetSessionConfigOptionRequest(r) => {
                return self.set_config_option(r, responder);
            }
            acp::ClientRequest::SetSessionModeRequest(r) => {
                return self.set_mode_legacy(r, responder);
            }
            acp::ClientRequest::PromptRequest(r) => return self.prompt(r, responder),
            acp::ClientRequest::ExtMethodRequest(r) if &*r.method == STEERING_METHOD => {
                return self.steer(r.params.get(), Some(responder));
            }
            acp::ClientRequest::ExtMethodRequest(r) => Err(error(
                ErrorKind::MethodNotFound,
                format!(
                    "extension method `{}` does not exist; tandem offers {STEERING_METHOD}, {}, {}, {}, {} and {}",
                    r.method,
                    checkpoints::CHECKPOINTS_METHOD,
                    checkpoints::TURN_DIFF_METHOD,
                    checkpoints::REWIND_METHOD,
                    customization::HOOKS_LIST_METHOD,
                    customization::HOOKS_TRUST_METHOD
                ),
                Value::Null,
            )),
            other => Err(error(
                ErrorKind::MethodNotFound,
                format!("`{}` is not supported by tandem", other.method()),
                Value::Null,
            )),
        };
        let _ = responder.respond_with_result(answer);
    }

    fn notification(&self, notification: acp::ClientNotification) {
        match notification {
            acp::ClientNotification::CancelNotification(c) => {
                if let Ok((bridge, _)) = self.live(&c.session_id.0) {
                    bridge.cancel();
                }
            }
            acp::ClientNotification::ExtNotification(n) if &*n.method == STEERING_METHOD => {
                self.steer(n.params.get(), None);
            }
            _ => {}
        }
    }

    fn initialize(&self, request: acp::InitializeRequest) -> Result<Value, AcpError> {
        let caps = &request.client_capabilities;
        let abilities = ClientAbilities {
            fs: caps.fs.read_text_file && caps.fs.write_text_file,
            elicitation_form: caps.elicitation.as_ref().is_some_and(|e| e.form.is_some()),
            notices: caps.session.as_ref().is_some_and(|s| s.notices.is_some()),
        };
        *lock(&self.abilities) = abilities;
        self.engine.set_client_can_answer(true);
        let capabilities = acp::AgentCapabilities::new()
            .load_session(true)
            // Streamable HTTP and stdio servers; SSE-only servers are refused with a reason.
            .mcp_capabilities(acp::McpCapabilities::new().http(true))
            .prompt_capabilities(
                acp::PromptCapabilities::new()
                    .image(true)
                    .embedded_context(true),
            )
            .session_capabilities(
                acp::SessionCapabilities::new()
                    .list(acp::SessionListCapabilities::new())
                    .resume(acp::SessionResumeCapabilities::new())
                    .close(acp::SessionCloseCapabilities::new())
                    .fork(acp::SessionForkCapabilities::new())
                    .additional_directories(acp::SessionAdditionalDirectoriesCapabilities::new()),
            );
        let mut meta = serde_json::Map::new();
        meta.insert(
            "steering".to_owned(),
            json!({"method": STEERING_METHOD, "params": {"sessionId": "string", "text": "string"}}),
        );
        let mut tandem = checkpoints::advertised();
        if let Some(object) = tandem.as_object_mut() {
            for (key, value) in customization::advertised() {
                object.insert(key.to_owned(), value);
            }
        }
        meta.insert("tandem".to_owned(), tandem);
        let response = acp::InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .agent_info(
                acp::Implementation::new("tandem", env!("CARGO_PKG_VERSION"))
                    .title("tandem".to_owned()),
            )
            .meta(meta);
        to_value(response)
    }

    fn prompt(&self, request: acp::PromptRequest, responder: Responder<Value>) {
        let (bridge, handle) = match self.live(&request.session_id.0) {
            Ok(live) => live,
            Err(e) => {
                let _ = responder.respond_with_error(e);
                return;
            }
        };
        let parts = convert::prompt_parts(request.prompt);
        if let Some(problem) = crate::engine::history::prompt_problem(&parts) {
            let _ = responder.respond_with_error(invalid(problem));
            return;
        }
        if let Err(responder) = bridge.wait_for_turn(responder) {
            let _ = responder.respond_with_error(session_error(SessionError::TurnInProgress));
            return;
        }
        let answer = bridge.clone();
        handle.send(Op::Prompt {
            parts,
            reply: Box::new(move |result| match result {
                Err(e) => answer.fail_prompt(session_error(e)),
                Ok(session::PromptOutcome::Command {
                    name,
                    output,
                    session_id,
                }) => answer.finish_command(&name, &output, session_id.as_deref()),
                Ok(session::PromptOutcome::Turn { .. }) => {}
            }),
        });
    }

    fn set_config_option(
        &self,
        request: acp::SetSessionConfigOptionRequest,
        responder: Responder<Value>,
    ) {
        let (bridge, handle) = match self.live(&request.session_id.0) {
            Ok(live) => live,
            Err(e) => {
                let _ = responder.respond_with_error(e);
                return;
            }
        };
        let Some(value) = request.value.as_value_id().map(|v| v.0.to_string()) else {
            let _ = responder.respond_with_error(invalid(
                "configuration values of tandem are select ids (strings)",
            ));
            return;
        };
        let config = self.engine.config.clone();
        let options_after = move |handle: &SessionHandle| {
            let settings = handle.shared.settings();
            convert::config_options(
                &config,
                &settings.model,
                settings.mode,
                settings.allow_network,
            )
        };
        match &*request.config_id.0 {
            convert::MODEL_OPTION => {
                let h = handle.clone();
                handle.send(Op::SwitchModel {
                    model: value,
                    reply: Box::new(move |result| {
                        let answer = result.map_err(session_error).and_then(|_| {
                            to_value(acp::SetSessionConfigOptionResponse::new(options_after(&h)))
                        });
                        let _ = responder.respond_with_result(answer);
                    }),
                });
            }
            convert::MODE_OPTION => {
                let Some(mode) = convert::parse_mode_id(&value) else {
                    let _ = responder.respond_with_error(error(
                        ErrorKind::InvalidMode,
                        format!("unknown mode `{value}`; use ask, autoEdit, plan or fullAuto"),
                        Value::Null,
                    ));
                    return;
                };
                let h = handle.clone();
                handle.send(Op::SetMode {
                    mode,
                    reply: Box::new(move |result| {
                        let answer = result.map_err(session_error).and_then(|_| {
                            to_value(acp::SetSessionConfigOptionResponse::new(options_after(&h)))
                        });
                        let _ = responder.respond_with_result(answer);
                        bridge.send_update(acp::SessionUpdate::CurrentModeUpdate(
                            acp::CurrentModeUpdate::new(convert::mode_id(mode)),
                        ));
                    }),
                });
            }
            convert::NETWORK_OPTION => {
                let allow = match value.as_str() {
                    "on" => true,
                    "off" => false,
                    other => {
                        let _ = responder.respond_with_error(invalid(format!(
                            "unknown network value `{other}`; use `on` or `off`"
                        )));
                        return;
                    }
                };
                let h = handle.clone();
                handle.send(Op::SetNetworkAccess {
                    allow,
                    reply: Box::new(move |result| {
                        let answer = result.map_err(session_error).and_then(|_| {
                            to_value(acp::SetSessionConfigOptionResponse::new(options_after(&h)))
                        });
                        let _ = responder.respond_with_result(answer);
                    }),
                });
            }
            other => {
                let _ = responder.respond_with_error(invalid(format!(
                    "unknown config option `{other}`; tandem has `model`, `mode` and `network`"
                )));
            }
        }
    }

    fn set_mode_legacy(&self, request: acp::SetSessionModeRequest, responder: Responder<Value>) {
        let (bridge, handle) = match self.live(&request.session_id.0) {
            Ok(live) => live,
            Err(e) => {
                let _ = responder.respond_with_error(e);
                return;
            }
        };
        let Some(mode) = convert::parse_mode_id(&request.mode_id.0) else {
            let _ = responder.respond_with_error(error(
                ErrorKind::InvalidMode,
                format!(
                    "unknown mode `{}`; use ask, autoEdit, plan or fullAuto",
                    request.mode_id.0
                ),
                Value::Null,
            ));
            return;
        };
        let config = self.engine.config.clone();
        let h = handle.clone();
        handle.send(Op::SetMode {
            mode,
            reply: Box::new(move |result| {
                let ok = result.is_ok();
                let answer = result
                    .map_err(session_error)
                    .and_then(|_| to_value(acp::SetSessionModeResponse::new()));
                let _ = responder.respond_with_result(answer);
                if ok {
                    // A client that shows the config options (the mode among them) learns of
                    // the change as it would have from `session/set_config_option`.
                    let settings = h.shared.settings();
                    let options = convert::config_options(
                        &config,
                        &settings.model,
                        settings.mode,
                        settings.allow_network,
                    );
                    bridge.send_update(acp::SessionUpdate::CurrentModeUpdate(
                        acp::CurrentModeUpdate::new(convert::mode_id(mode)),
                    ));
                    bridge.send_update(acp::SessionUpdate::ConfigOptionUpdate(
                        acp::ConfigOptionUpdate::new(options),
                    ));
                }
            }),
        });
    }

    /// `_session/steering {sessionId, text}`: queued for the engine's next safe point.
    fn steer(&self, params: &str, responder: Option<Responder<Value>>) {
        let respond = |answer: Result<Value, AcpError>, responder: Option<Responder<Value>>| {
            if let Some(r) = responder {
                let _ = r.respond_with_result(answer);
            }
        };
        let params: Value = serde_json::from_str(params).unwrap_or(Value::Null);
        let Some(session_id) = params["sessionId"].as_str() else {
            return respond(
                Err(invalid("steering needs `sessionId` and `text`")),
                responder,
            );
        };
        let text = match &params["text"] {
            Value::String(t) => t.clone(),
            _ => params["prompt"]
                .as_array()
                .map(|blocks| {
                    blocks
                        .iter()
                        .filter_map(|b| b["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default(),
        };
        if text.trim().is_empty() {
            return respond(
                Err(invalid("steering text is empty; send the text to inject")),
                responder,
            );
        }
        let handle = match self.live(session_id) {
            Ok((_, handle)) => handle,
            Err(e) => return respond(Err(e), responder),
        };
        handle.send(Op::Steer {
            text,
            reply: Box::new(move |result| {
                if let Some(r) = responder {
                    let _ = r.respond_with_result(
                        result
                            .map(|()| json!({"queued": true}))
                            .map_err(session_error),
                    );
                }
            }),
        });
    }
}
