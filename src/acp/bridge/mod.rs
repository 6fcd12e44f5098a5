//! One session as ACP sees it: the engine's events become `session/update` notifications,
//! approvals become `session/request_permission`, questions become `elicitation/create` (or a
//! permission-style choice), and `turnEnded` answers the waiting `session/prompt`.
//!
//! `emit` runs on the store's writer thread, after the event is committed, in `seq` order. It
//! never blocks: notifications are queued on the connection at once, and requests to the client
//! run in tasks that answer the session actor with an `Op`.

mod commands;
mod editor_fs;

use editor_fs::{EditorFs, OpenFsRequests};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, RequestCancellationHandle};
use futures_util::future::BoxFuture;
use serde_json::{json, Value};

use super::convert;
use crate::engine::EngineContext;
use crate::permissions::suggested_prefix;
use crate::protocol::{
    ApprovalOption, Decision, Event, McpServerState, NoticeKind, ToolStatus, TurnEndReason,
};
use crate::session::{lock, DenyMemory, EventSink, Op, SessionHandle};
use crate::tools::client_fs::ClientFs;

/// What the client said it can do in `initialize`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientAbilities {
    /// `fs.readTextFile` and `fs.writeTextFile` both: reads and edits go through the editor.
    pub fs: bool,
    /// `elicitation.form`: questions are asked as forms.
    pub elicitation_form: bool,
    /// `session.notices`: notices are sent as ACP notice updates instead of message text.
    pub notices: bool,
}

/// The prompt waiting for its turn to end.
struct WaitingPrompt {
    responder: Responder<Value>,
}

#[derive(Default)]
struct TurnFlags {
    cancel_requested: bool,
    refused: bool,
}

pub struct Bridge {
    /// Set once the actor exists (the engine picks the id); no event comes before that.
    session_id: Arc<OnceLock<String>>,
    pub root: PathBuf,
    cx: ConnectionTo<Client>,
    runtime: tokio::runtime::Handle,
    engine: Arc<EngineContext>,
    abilities: ClientAbilities,
    handle: Mutex<Option<SessionHandle>>,
    prompt: Mutex<Option<WaitingPrompt>>,
    flags: Mutex<TurnFlags>,
    /// Requests to the client still open, by the engine's request id.
    asks: Mutex<HashMap<String, RequestCancellationHandle>>,
    /// Streamed shell output per tool call, re-sent whole (ACP replaces a card's content).
    output: Mutex<HashMap<String, ShownOutput>>,
    /// `fs/*` requests to the editor still open; a cancel withdraws them.
    fs_requests: Arc<Mutex<OpenFsRequests>>,
    /// The slash commands the client was sent last (`available_commands_update`).
    commands_sent: Mutex<Option<Vec<acp::AvailableCommand>>>,
}

/// The part of a running command's output shown on its card, and how much came in all.
#[derive(Default)]
struct ShownOutput {
    head: String,
    total: usize,
}

/// The sink handed to the session actor; the bridge is shared with the face.
pub struct BridgeSink(pub Arc<Bridge>);

impl EventSink for BridgeSink {
    fn emit(&self, _session_id: &str, _seq: u64, turn_id: Option<&str>, event: &Event) {
        self.0.on_event(turn_id, event);
    }
}

impl Bridge {
    pub fn new(
        root: PathBuf,
        cx: ConnectionTo<Client>,
        engine: Arc<EngineContext>,
        abilities: ClientAbilities,
    ) -> Arc<Bridge> {
        Arc::new(Bridge {
            session_id: Arc::new(OnceLock::new()),
            root,
            cx,
            runtime: tokio::runtime::Handle::current(),
            engine,
            abilities,
            handle: Mutex::new(None),
            prompt: Mutex::new(None),
            flags: Mutex::new(TurnFlags::default()),
            asks: Mutex::new(HashMap::new()),
            output: Mutex::new(HashMap::new()),
            fs_requests: Arc::new(Mutex::new(OpenFsRequests::default())),
            commands_sent: Mutex::new(None),
        })
    }

    pub fn set_handle(&self, handle: SessionHandle) {
        let _ = self.session_id.set(handle.id().to_owned());
        *lock(&self.handle) = Some(handle);
    }

    pub fn session_id(&self) -> String {
        self.session_id.get().cloned().unwrap_or_default()
    }

    pub fn handle(&self) -> Option<SessionHandle> {
        lock(&self.handle).clone()
    }

    /// Forget the session (it was closed); late events are dropped with it.
    pub fn detach(&self) -> Option<SessionHandle> {
        lock(&self.handle).take()
    }

    /// The client filesystem hook, when the client offers both reads and writes.
    pub fn client_fs(self: &Arc<Self>) -> Option<Arc<dyn ClientFs>> {
        self.abilities.fs.then(|| {
            Arc::new(EditorFs {
                cx: self.cx.clone(),
                session_id: self.session_id.clone(),
                open: self.fs_requests.clone(),
                bridge: Arc::downgrade(self),
            }) as Arc<dyn ClientFs>
        })
    }

    pub fn send_update(&self, update: acp::SessionUpdate) {
        let note = acp::SessionNotification::new(self.session_id(), update);
        if let Err(e) = self.cx.send_notification(note) {
            tracing::debug!("session/update not sent: {e}");
        }
    }

    /// A notice: ACP's notice update when the client takes it, else message text.
    pub fn notice_update(&self, text: &str) -> acp::SessionUpdate {
        if self.abilities.notices {
            acp::SessionUpdate::Notice(acp::Notice::new(acp::NoticeSeverity::Info, text.trim()))
        } else {
            acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(convert::text_block(
                convert::notice_text(text),
            )))
        }
    }

    fn notice_with(&self, severity: acp::NoticeSeverity, text: &str) -> acp::SessionUpdate {
        if self.abilities.notices {
            acp::SessionUpdate::Notice(acp::Notice::new(severity, text.trim()))
        } else {
            self.notice_update(text)
        }
    }

    /// Register the `session/prompt` that waits for the next `turnEnded`. Fails if one waits.
    #[allow(clippy::result_large_err)] // The responder goes back to the caller untouched.
    pub fn wait_for_turn(&self, responder: Responder<Value>) -> Result<(), Responder<Value>> {
        let mut slot = lock(&self.prompt);
        if slot.is_some() {
            return Err(responder);
        }
        *slot = Some(WaitingPrompt { responder });
        *lock(&self.flags) = TurnFlags::default();
        Ok(())
    }

    /// The prompt was not admitted: answer it with the error.
    pub fn fail_prompt(&self, error: agent_client_protocol::Error) {
        if let Some(waiting) = lock(&self.prompt).take() {
            let _ = waiting.responder.respond_with_error(error);
        }
    }

    /// `session/cancel`: stop the turn; the prompt then ends with `cancelled`, and every open
    /// request to the client is withdrawn.
    pub fn cancel(&self) {
        lock(&self.flags).cancel_requested = true;
        for (_, ask) in lock(&self.asks).drain() {
            let _ = ask.cancel();
        }
        lock(&self.fs_requests).withdraw_all();
        if let Some(handle) = self.handle() {
            handle.send(Op::Stop {
                reply: Box::new(|_| {}),
            });
        }
    }

    fn on_event(self: &Arc<Self>, turn_id: Option<&str>, event: &Event) {
        match event {
            Event::TurnStarted { .. } => {}
            Event::AssistantDelta { text } => {
                self.send_update(acp::SessionUpdate::AgentMessageChunk(
                    acp::ContentChunk::new(convert::text_block(text.clone())),
                ));
            }
            Event::ReasoningDelta { text } => {
                self.send_update(acp::SessionUpdate::AgentThoughtChunk(
                    acp::ContentChunk::new(convert::text_block(text.clone())),
                ));
            }
            // Streamed already, delta by delta.
            Event::AssistantMessage { .. } => {}
            Event::ToolCall {
                tool_call_id,
                kind,
                title,
                arguments,
                locations,
                ..
            } => {
                let call = acp::ToolCall::new(tool_call_id.clone(), title.clone())
                    .kind(convert::tool_kind(*kind))
                    .status(acp::ToolCallStatus::Pending)
                    .locations(convert::locations(
                        &self.root,
                        locations.as_deref().unwrap_or_default(),
                    ))
                    .raw_input(arguments.clone());
                self.send_update(acp::SessionUpdate::ToolCall(call));
            }
            Event::ApprovalRequested {
                request_id,
                tool_call_id,
                name,
                kind,
                title,
                arguments,
                diff,
                command,
                options,
                ..
            } => {
                let mut fields = acp::ToolCallUpdateFields::new()
                    .title(title.clone())
                    .kind(convert::tool_kind(*kind))
                    .raw_input(arguments.clone());
                if let Some(diff) = diff {
                    fields = fields.content(convert::diff_content(&self.root, diff));
                } else if let Some(command) = command {
                    fields = fields.content(vec![convert::text_content(format!(
                        "```sh\n{command}\n```"
                    ))]);
                }
                self.send_update(acp::SessionUpdate::ToolCallUpdate(
                    acp::ToolCallUpdate::new(tool_call_id.clone(), fields.clone()),
                ));
                self.ask_permission(
                    request_id.clone(),
                    tool_call_id.clone(),
                    name.clone(),
                    command.clone(),
                    fields,
                    options,
                );
            }
            Event::ApprovalResolved { request_id, .. } => {
                // Still open here means the engine withdrew it (a stop): withdraw it too.
                if let Some(ask) = lock(&self.asks).remove(request_id) {
                    let _ = ask.cancel();
                }
            }
            Event::QuestionAsked {
                request_id,
                tool_call_id,
                question,
                choices,
                plan,
            } => self.ask_question(
                request_id.clone(),
                tool_call_id.clone(),
                question.clone(),
                choices.clone(),
                plan.clone(),
            ),
            Event::ToolCallUpdate {
                tool_call_id,
                status,
                output,
                result,
                diff,
            } => {
                let mut fields = acp::ToolCallUpdateFields::new();
                if let Some(chunk) = output {
                    let mut outputs = lock(&self.output);
                    let shown = outputs.entry(tool_call_id.clone()).or_default();
                    // ACP replaces a card's content, so each update carries what is shown so far.
                    // Only the first `SHOWN_OUTPUT_BYTES` are kept and shown; past them the card
                    // only counts, and is updated once per 64 KiB, not per chunk (a 2 GB flood
                    // would otherwise be held whole and re-sent with every chunk).
                    let was_full = shown.head.len() >= convert::SHOWN_OUTPUT_BYTES;
                    let before = shown.total;
                    shown.total += chunk.len();
                    if !was_full {
                        let room = convert::SHOWN_OUTPUT_BYTES - shown.head.len();
                        let mut end = chunk.len().min(room);
                        while !chunk.is_char_boundary(end) {
                            end -= 1;
                        }
                        shown.head.push_str(&chunk[..end]);
                    } else if before / (64 * 1024) == shown.total / (64 * 1024) && result.is_none()
                    {
                        return;
                    }
                    let mut text = shown.head.clone();
                    if shown.total > shown.head.len() {
                        text.push_str(&format!(
                            "\n… ({} more bytes so far)",
                            shown.total - shown.head.len()
                        ));
                    }
                    fields = fields.content(vec![convert::text_content(convert::fenced(&text))]);
                }
                fields = fields.status(match status {
                    ToolStatus::Running => acp::ToolCallStatus::InProgress,
                    ToolStatus::Completed => acp::ToolCallStatus::Completed,
                    ToolStatus::Failed | ToolStatus::Denied | ToolStatus::Interrupted => {
                        acp::ToolCallStatus::Failed
                    }
                });
                if let Some(result) = result {
                    lock(&self.output).remove(tool_call_id);
                    let mut content = vec![convert::text_content(convert::fenced(result))];
                    if let Some(diff) = diff {
                        content.extend(convert::diff_content(&self.root, diff));
                    }
                    fields = fields.content(content).raw_output(json!({
                        "result": result,
                        "status": status,
                    }));
                }
                self.send_update(acp::SessionUpdate::ToolCallUpdate(
                    acp::ToolCallUpdate::new(tool_call_id.clone(), fields),
                ));
            }
            Event::SteeringApplied { text } => {
                self.send_update(acp::SessionUpdate::UserMessageChunk(
                    acp::ContentChunk::new(convert::text_block(text.clone())),
                ));
            }
            Event::Compacting { .. } => {
                self.send_update(self.notice_update("Compacting the conversation history…"));
            }
            Event::Compacted { summary } => {
                let text = match summary {
                    Some(s) => format!("History compacted: {s}"),
                    None => "History compacted".to_owned(),
                };
                self.send_update(self.notice_update(&text));
            }
            Event::ModelSwitched { to, warning, .. } => {
                if let Some(handle) = self.handle() {
                    let settings = handle.shared.settings();
                    let options = convert::config_options(
                        &self.engine.config,
                        to,
                        settings.mode,
                        settings.allow_network,
                    );
                    self.send_update(acp::SessionUpdate::ConfigOptionUpdate(
                        acp::ConfigOptionUpdate::new(options),
                    ));
                }
                if let Some(w) = warning {
                    self.send_update(self.notice_with(acp::NoticeSeverity::Warning, w));
                }
            }
            // ACP has no update for MCP servers: a server that cannot serve (failed, exited,
            // waiting for trust) is a warning notice naming it; the routine ones say nothing.
            Event::McpStatus {
                server,
                status,
                error: Some(error),
                ..
            } => {
                let state = match status {
                    McpServerState::Untrusted => "waits for trust",
                    McpServerState::Exited => "exited",
                    McpServerState::Failed => "failed",
                    McpServerState::Starting | McpServerState::Ready => return,
                };
                self.send_update(self.notice_with(
                    acp::NoticeSeverity::Warning,
                    &format!("MCP server `{server}` {state}: {error}"),
                ));
            }
            Event::McpStatus { .. } => {}
            // ACP has no shape for it; a hook that blocks says so through what it blocked
            // (the tool's result, the turn's error) and a failure through a warning notice.
            Event::HookRan { .. } => {}
            Event::Notice { kind, text } => {
                // Typed, not by its words: the refusal notice carries the engine's mark in the
                // history, committed before this event. Asked here, where no lock of the
                // conversation is held by the emitter (a `turnEnded` is emitted under one).
                let refusal = *kind == NoticeKind::Warning
                    && turn_id
                        .zip(self.handle())
                        .is_some_and(|(turn, handle)| handle.shared.refused_in(turn));
                if refusal {
                    lock(&self.flags).refused = true;
                }
                let severity = match kind {
                    NoticeKind::Error => acp::NoticeSeverity::Error,
                    NoticeKind::Warning | NoticeKind::Interrupted => acp::NoticeSeverity::Warning,
                    _ => acp::NoticeSeverity::Info,
                };
                // A stop the user asked for needs no words; the stop reason says it.
                if *kind == NoticeKind::Interrupted && lock(&self.flags).cancel_requested {
                    return;
                }
                if *kind == NoticeKind::Network {
                    // The choice may come from another client of the same session; keep this
                    // client's option in step.
                    if let Some(handle) = self.handle() {
                        let settings = handle.shared.settings();
                        let options = convert::config_options(
                            &self.engine.config,
                            &settings.model,
                            settings.mode,
                            settings.allow_network,
                        );
                        self.send_update(acp::SessionUpdate::ConfigOptionUpdate(
                            acp::ConfigOptionUpdate::new(options),
                        ));
                    }
                }
                self.send_update(self.notice_with(severity, text));
            }
            Event::Usage {
                model,
                input_tokens,
                output_tokens,
                ..
            } => {
                if let Some(m) = self.engine.config.model(model) {
                    self.send_update(acp::SessionUpdate::UsageUpdate(acp::UsageUpdate::new(
                        input_tokens + output_tokens,
                        m.context_window,
                    )));
                }
            }
            // Made by the native face for a client that does not read; the engine never sends it.
            Event::StreamTruncated { .. } => {}
            // The answer to `_session/rewind` carries the same facts, and ACP has no update that
            // takes messages back out of a client's transcript.
            Event::Rewound { .. } => {}
            Event::Plan { entries } => self.send_update(convert::plan_update(entries)),
            Event::TurnEnded { reason, error } => {
                self.end_prompt(turn_id, *reason, error.as_ref());
                // A turn may have written a command file (`/init`, an edit).
                if let Some(handle) = self.handle() {
                    super::customization::announce_commands(self.clone(), handle);
                }
            }
        }
    }

    /// Answer the waiting `session/prompt`; its `_meta.tandem.turnId` names the turn for the
    /// checkpoint extensions (`_turn/diff`, `_session/rewind`).
    fn end_prompt(
        &self,
        turn_id: Option<&str>,
        reason: TurnEndReason,
        error: Option<&crate::protocol::TurnError>,
    ) {
        let flags = std::mem::take(&mut *lock(&self.flags));
        lock(&self.output).clear();
        let Some(waiting) = lock(&self.prompt).take() else {
            // A resumed turn after `session/load`, or a prompt that was already answered.
            return;
        };
        let stop = if flags.cancel_requested {
            Some(acp::StopReason::Cancelled)
        } else {
            match reason {
                TurnEndReason::Completed if flags.refused => Some(acp::StopReason::Refusal),
                TurnEndReason::Completed => Some(acp::StopReason::EndTurn),
                TurnEndReason::Interrupted => Some(acp::StopReason::Cancelled),
                TurnEndReason::MaxIterations => Some(acp::StopReason::MaxTurnRequests),
                TurnEndReason::ContextExceeded => Some(acp::StopReason::MaxTokens),
                TurnEndReason::Error => None,
            }
        };
        let result = match stop {
            Some(stop) => {
                let mut response = acp::PromptResponse::new(stop);
                if let Some(turn_id) = turn_id {
                    let mut meta = serde_json::Map::new();
                    meta.insert("tandem".to_owned(), json!({ "turnId": turn_id }));
                    response = response.meta(meta);
                }
                serde_json::to_value(response)
                    .map_err(agent_client_protocol::Error::into_internal_error)
            }
            None => {
                let (message, retriable) = error
                    .map(|e| (e.message.clone(), e.retriable))
                    .unwrap_or_else(|| ("the turn failed".to_owned(), false));
                Err(super::error(
                    crate::protocol::ErrorKind::Internal,
                    message,
                    json!({"kind": "providerError", "retriable": retriable}),
                ))
            }
        };
        let _ = waiting.responder.respond_with_result(result);
    }

    fn approve(
        &self,
        request_id: String,
        decision: Decision,
        message: Option<String>,
        deny_memory: DenyMemory,
    ) {
        if let Some(handle) = self.handle() {
            handle.send(Op::Approve {
                request_id,
                decision,
                message,
                edited_content: None,
                arguments_digest: None,
                deny_memory,
                reply: Box::new(|result| {
                    if let Err(e) = result {
                        tracing::debug!("approval not applied: {e}");
                    }
                }),
            });
        }
    }

    fn answer(&self, request_id: String, answer: String) {
        if let Some(handle) = self.handle() {
            handle.send(Op::Answer {
                request_id,
                answer,
                reply: Box::new(|result| {
                    if let Err(e) = result {
                        tracing::debug!("answer not applied: {e}");
                    }
                }),
            });
        }
    }

    /// `session/request_permission` with ACP's four option kinds, mapped to engine decisions:
    /// allow_once → once; allow_always → alwaysCommand for shell (the prefix rule; offered only
    /// when the command has a safe prefix) and alwaysTool otherwise; reject_once → deny;
    /// reject_always → deny, remembered by this face (persisted as a session rule).
    fn ask_permission(
        self: &Arc<Self>,
        request_id: String,
        tool_call_id: String,
        tool: String,
        command: Option<String>,
        fields: acp::ToolCallUpdateFields,
        options: &[ApprovalOption],
    ) {
        let mut acp_options = Vec::new();
        let mut always: Option<Decision> = None;
        if options.iter().any(|o| o.decision == Decision::Once) {
            acp_options.push(acp::PermissionOption::new(
                "allow_once",
                "Allow once",
                acp::PermissionOptionKind::AllowOnce,
            ));
        }
        if command.is_some() {
            if let Some(o) = options
                .iter()
                .find(|o| o.decision == Decision::AlwaysCommand)
            {
                always = Some(Decision::AlwaysCommand);
                acp_options.push(acp::PermissionOption::new(
                    "allow_always",
                    o.label.clone(),
                    acp::PermissionOptionKind::AllowAlways,
                ));
            }
        } else if let Some(o) = options.iter().find(|o| o.decision == Decision::AlwaysTool) {
            always = Some(Decision::AlwaysTool);
            acp_options.push(acp::PermissionOption::new(
                "allow_always",
                o.label.clone(),
                acp::PermissionOptionKind::AllowAlways,
            ));
        }
        acp_options.push(acp::PermissionOption::new(
            "reject_once",
            "Reject",
            acp::PermissionOptionKind::RejectOnce,
        ));
        let reject_always_label = match &command {
            Some(c) => {
                let prefix = suggested_prefix(c);
                if prefix.is_empty() {
                    "Always reject this command".to_owned()
                } else {
                    format!("Always reject commands starting with `{prefix}`")
                }
            }
            None => format!("Always reject {tool}"),
        };
        acp_options.push(acp::PermissionOption::new(
            "reject_always",
            reject_always_label,
            acp::PermissionOptionKind::RejectAlways,
        ));
        let request = acp::RequestPermissionRequest::new(
            self.session_id(),
            acp::ToolCallUpdate::new(tool_call_id, fields),
            acp_options,
        );
        let sent = self.cx.send_request(request);
        lock(&self.asks).insert(request_id.clone(), sent.cancellation_handle());
        let bridge = self.clone();
        self.runtime.spawn(async move {
            let response = sent.block_task().await;
            if lock(&bridge.asks).remove(&request_id).is_none() {
                // Withdrawn (stop or cancel) while the client decided.
                return;
            }
            let once = DenyMemory::ThisCallOnly;
            let (decision, message, deny_memory) = match response {
                Ok(response) => match response.outcome {
                    acp::RequestPermissionOutcome::Selected(selected) => {
                        match &*selected.option_id.0 {
                            "allow_once" => (Decision::Once, None, once),
                            "allow_always" => (always.unwrap_or(Decision::Once), None, once),
                            // The engine remembers it as a deny rule of the session (the tool,
                            // or the command's prefix) and refuses later calls it covers.
                            "reject_always" => (
                                Decision::Deny,
                                Some(
                                    "the user asked to always reject this; do not try it again"
                                        .to_owned(),
                                ),
                                DenyMemory::RestOfSession,
                            ),
                            _ => (Decision::Deny, None, once),
                        }
                    }
                    _ => (
                        Decision::Deny,
                        Some("the user dismissed the request".to_owned()),
                        once,
                    ),
                },
                Err(e) => {
                    tracing::warn!("session/request_permission failed: {e}; denying");
                    (Decision::Deny, None, once)
                }
            };
            bridge.approve(request_id, decision, message, deny_memory);
        });
    }

    /// ask_user and propose_plan: a form through `elicitation/create` when the client has
    /// forms, else a permission-style choice (one option per choice, or continue/decline).
    fn ask_question(
        self: &Arc<Self>,
        request_id: String,
        tool_call_id: String,
        question: String,
        choices: Option<Vec<String>>,
        plan: Option<String>,
    ) {
        let message = match &plan {
            Some(plan) => format!("{question}\n\n{plan}"),
            None => question.clone(),
        };
        let bridge = self.clone();
        if self.abilities.elicitation_form {
            let mut answer = json!({"type": "string", "title": "Answer", "description": question});
            if let Some(choices) = choices.as_ref().filter(|c| !c.is_empty()) {
                answer["enum"] = json!(choices);
            }
            let request: Result<acp::CreateElicitationRequest, _> = serde_json::from_value(json!({
                "mode": "form",
                "sessionId": self.session_id(),
                "toolCallId": tool_call_id,
                "message": message,
                "requestedSchema": {
                    "type": "object",
                    "properties": {"answer": answer},
                    "required": ["answer"],
                },
            }));
            match request {
                Ok(request) => {
                    let sent = self.cx.send_request(request);
                    lock(&self.asks).insert(request_id.clone(), sent.cancellation_handle());
                    self.runtime.spawn(async move {
                        let response = sent.block_task().await;
                        if lock(&bridge.asks).remove(&request_id).is_none() {
                            return;
                        }
                        let value = response
                            .ok()
                            .and_then(|r| serde_json::to_value(r).ok())
                            .unwrap_or(Value::Null);
                        let text = match value["action"].as_str() {
                            Some("accept") => match &value["content"]["answer"] {
                                Value::String(s) => s.clone(),
                                Value::Null => "(the user accepted without an answer)".to_owned(),
                                other => other.to_string(),
                            },
                            Some("decline") => "(the user declined to answer)".to_owned(),
                            _ => "(the user dismissed the question)".to_owned(),
                        };
                        bridge.answer(request_id, text);
                    });
                    return;
                }
                Err(e) => tracing::warn!("cannot build the elicitation: {e}; asking as a choice"),
            }
        }
        let choices = choices.filter(|c| !c.is_empty());
        let mut options: Vec<acp::PermissionOption> = match &choices {
            Some(choices) => choices
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    acp::PermissionOption::new(
                        format!("choice:{i}"),
                        c.clone(),
                        acp::PermissionOptionKind::AllowOnce,
                    )
                })
                .collect(),
            None => vec![acp::PermissionOption::new(
                "continue",
                "Continue (answer in your next message)",
                acp::PermissionOptionKind::AllowOnce,
            )],
        };
        options.push(acp::PermissionOption::new(
            "decline",
            "Decline",
            acp::PermissionOptionKind::RejectOnce,
        ));
        let fields = acp::ToolCallUpdateFields::new()
            .title(question.clone())
            .content(vec![convert::text_content(message)]);
        let request = acp::RequestPermissionRequest::new(
            self.session_id(),
            acp::ToolCallUpdate::new(tool_call_id, fields),
            options,
        );
        let sent = self.cx.send_request(request);
        lock(&self.asks).insert(request_id.clone(), sent.cancellation_handle());
        self.runtime.spawn(async move {
            let response = sent.block_task().await;
            if lock(&bridge.asks).remove(&request_id).is_none() {
                return;
            }
            let text = match response.map(|r| r.outcome) {
                Ok(acp::RequestPermissionOutcome::Selected(selected)) => {
                    let id = selected.option_id.0.to_string();
                    match id.strip_prefix("choice:").and_then(|i| i.parse::<usize>().ok()) {
                        Some(i) => choices
                            .as_ref()
                            .and_then(|c| c.get(i).cloned())
                            .unwrap_or_default(),
                        None if id == "continue" => "(this client cannot type an answer; the user will answer in their next message, so proceed with your best judgement or finish the turn)".to_owned(),
                        None => "(the user declined to answer)".to_owned(),
                    }
                }
                _ => "(the user dismissed the question)".to_owned(),
            };
            bridge.answer(request_id, text);
        });
    }
}
