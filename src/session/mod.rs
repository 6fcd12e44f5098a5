//! The session actor: one task per session owns its state and applies control messages in
//! arrival order; events leave on one ordered stream with a gap-free per-session `seq`.
//!
//! A face turns each incoming message into an [`Op`] and sends it to the session's queue. The
//! actor answers through the op's [`Reply`] closure *before* it starts anything the op causes,
//! so a `prompt` response always precedes that turn's first event. The running turn is a
//! separate task (`engine::turn`) so that `stop`, `steer` and `approve` are read while it runs;
//! it shares the session state through short, never-awaited critical sections.

pub mod host;
mod restore;

pub use restore::{restore, restore_with_client_fs, RestoreError, Restored};

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::engine::conversation::parse_history;
pub use crate::engine::conversation::{
    lock, network_notice, retry_allowed, role_name, Conversation, ConversationState, DenyMemory,
    PendingKind, PendingRequest, ProposalShown, Resolution, Resume, SessionError, UnparsedHistory,
};
pub use crate::engine::display;
pub use crate::engine::emitter::{Emitter, EventSink, SEQ_RESERVATION, STREAM_BACKLOG_BYTES};
use crate::engine::history::{new_id, now_ms, Message, NoticeKind, Part, Role, Source};
use crate::engine::{turn, EngineContext};
use crate::permissions::PermissionRules;
use crate::protocol::{Decision, Event, Mode};
use crate::store::{SessionRecord, Store};
use crate::tools::client_fs::ClientFs;
use crate::workspace::Workspace;

/// The answer channel of one op. Faces build it so that the answer is written in order.
pub type Reply<T> = Box<dyn FnOnce(Result<T, SessionError>) + Send>;

pub enum Op {
    Prompt {
        parts: Vec<Part>,
        reply: Reply<String>,
    },
    Stop {
        reply: Reply<bool>,
    },
    /// Re-run the model loop after a provider error, without a new user message.
    Retry {
        reply: Reply<String>,
    },
    Steer {
        text: String,
        reply: Reply<()>,
    },
    Approve {
        request_id: String,
        decision: Decision,
        message: Option<String>,
        edited_content: Option<String>,
        /// The `argumentsDigest` of the proposal the user saw, when the client sends it: the
        /// approval binds to those arguments and is refused when the request holds others.
        arguments_digest: Option<String>,
        /// Whether a `deny` refuses the same tool or command for the rest of the session.
        deny_memory: DenyMemory,
        reply: Reply<()>,
    },
    Answer {
        request_id: String,
        answer: String,
        reply: Reply<()>,
    },
    SwitchModel {
        model: String,
        reply: Reply<(String, Option<String>)>,
    },
    SetMode {
        mode: Mode,
        reply: Reply<()>,
    },
    /// The user's choice whether sandboxed commands may use the network; answers the new value.
    SetNetworkAccess {
        allow: bool,
        reply: Reply<bool>,
    },
    /// Continue a restored session's crashed turn (sent once by `restore`).
    Resume {
        resume: Resume,
    },
    /// Stop any running turn and end the actor.
    Shutdown {
        reply: Reply<()>,
    },
}

/// A cheap handle to a session: its queue and its shared state.
#[derive(Clone)]
pub struct SessionHandle {
    pub shared: Arc<Conversation>,
    ops: mpsc::UnboundedSender<Op>,
}

impl SessionHandle {
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Queue an op. If the actor is gone the op's reply gets `Closed`.
    ///
    /// Replies are ordered with the session's events: a `stop` answer never overtakes the
    /// `turnEnded` it waited for, even though events pass through the store first.
    pub fn send(&self, op: Op) {
        let op = order_replies(&self.shared, op);
        if let Err(mpsc::error::SendError(op)) = self.ops.send(op) {
            reply_closed(op);
        }
    }
}

fn ordered<T: Send + 'static>(shared: &Arc<Conversation>, reply: Reply<T>) -> Reply<T> {
    if shared.store.is_none() {
        return reply;
    }
    let shared = shared.clone();
    Box::new(move |result| shared.emitter.after_queued(Box::new(move || reply(result))))
}

fn order_replies(shared: &Arc<Conversation>, op: Op) -> Op {
    match op {
        Op::Prompt { parts, reply } => Op::Prompt {
            parts,
            reply: ordered(shared, reply),
        },
        Op::Stop { reply } => Op::Stop {
            reply: ordered(shared, reply),
        },
        Op::Retry { reply } => Op::Retry {
            reply: ordered(shared, reply),
        },
        Op::Steer { text, reply } => Op::Steer {
            text,
            reply: ordered(shared, reply),
        },
        Op::Approve {
            request_id,
            decision,
            message,
            edited_content,
            arguments_digest,
            deny_memory,
            reply,
        } => Op::Approve {
            request_id,
            decision,
            message,
            edited_content,
            arguments_digest,
            deny_memory,
            reply: ordered(shared, reply),
        },
        Op::Answer {
            request_id,
            answer,
            reply,
        } => Op::Answer {
            request_id,
            answer,
            reply: ordered(shared, reply),
        },
        Op::SwitchModel { model, reply } => Op::SwitchModel {
            model,
            reply: ordered(shared, reply),
        },
        Op::SetMode { mode, reply } => Op::SetMode {
            mode,
            reply: ordered(shared, reply),
        },
        Op::SetNetworkAccess { allow, reply } => Op::SetNetworkAccess {
            allow,
            reply: ordered(shared, reply),
        },
        Op::Shutdown { reply } => Op::Shutdown {
            reply: ordered(shared, reply),
        },
        resume @ Op::Resume { .. } => resume,
    }
}

fn reply_closed(op: Op) {
    reply_error(op, SessionError::Closed);
}

/// Answer an op with `error` without applying it.
fn reply_error(op: Op, error: SessionError) {
    match op {
        Op::Prompt { reply, .. } | Op::Retry { reply } => reply(Err(error)),
        Op::Stop { reply } => reply(Err(error)),
        Op::Steer { reply, .. }
        | Op::Approve { reply, .. }
        | Op::Answer { reply, .. }
        | Op::SetMode { reply, .. }
        | Op::Shutdown { reply } => reply(Err(error)),
        Op::SwitchModel { reply, .. } => reply(Err(error)),
        Op::SetNetworkAccess { reply, .. } => reply(Err(error)),
        Op::Resume { .. } => {}
    }
}

pub struct NewSession {
    pub workspace: Workspace,
    pub model: String,
    pub mode: Mode,
    /// Where the session is persisted; `None` keeps it in memory only.
    pub store: Option<Store>,
    /// Reads and edits through the client (see [`Conversation::client_fs`]).
    pub client_fs: Option<Arc<dyn ClientFs>>,
}

/// Start a new session actor and return its handle.
pub fn spawn(
    engine: Arc<EngineContext>,
    sink: Arc<dyn EventSink>,
    new: NewSession,
) -> SessionHandle {
    let id = new_id("s");
    if let Some(store) = &new.store {
        let now = now_ms();
        store.create_session(SessionRecord {
            id: id.clone(),
            cwd: new.workspace.roots()[0].display().to_string(),
            model: new.model.clone(),
            mode: new.mode.as_str().to_owned(),
            title: None,
            created_at: now,
            updated_at: now,
            allow_network: false,
        });
    }
    let state = ConversationState {
        history: Vec::new(),
        unparsed: None,
        displays_stored: 0,
        model: new.model,
        mode: new.mode,
        rules: PermissionRules::default(),
        steering: VecDeque::new(),
        active_turn: None,
        accepting_steering: false,
        allow_network: false,
        usage: Vec::new(),
        tool_call_ids: None,
    };
    start_actor(
        engine,
        sink,
        id,
        new.workspace,
        new.store,
        new.client_fs,
        state,
        0,
        None,
    )
}

#[allow(clippy::too_many_arguments)]
fn start_actor(
    engine: Arc<EngineContext>,
    sink: Arc<dyn EventSink>,
    id: String,
    workspace: Workspace,
    store: Option<Store>,
    client_fs: Option<Arc<dyn ClientFs>>,
    state: ConversationState,
    last_seq: u64,
    resume: Option<Resume>,
) -> SessionHandle {
    let shared = Conversation::new(
        id, workspace, engine, sink, store, client_fs, state, last_seq,
    );
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(actor(shared.clone(), rx, resume));
    SessionHandle { shared, ops: tx }
}

/// Whether one more steering text would pass the config's caps on queued steering; the error
/// says which cap and what to do. The queue is drained at every safe point, so the caps bound
/// what one client can pile up between two model requests, not a session's total.
fn steering_queue_full(
    queued: &VecDeque<String>,
    text: &str,
    config: &crate::config::Config,
) -> Option<SessionError> {
    if queued.len() >= config.max_queued_steering {
        return Some(SessionError::SteeringQueueFull(format!(
            "{} steering messages are already queued for this turn's next safe point (max_queued_steering); wait for steeringApplied, or stop the turn and prompt again",
            queued.len()
        )));
    }
    let queued_bytes: usize = queued.iter().map(String::len).sum();
    if queued_bytes + text.len() > config.max_queued_steering_bytes {
        return Some(SessionError::SteeringQueueFull(format!(
            "this steering text would bring the queued steering to {} bytes, above max_queued_steering_bytes ({}); send a shorter text, or wait for steeringApplied",
            queued_bytes + text.len(),
            config.max_queued_steering_bytes
        )));
    }
    None
}

struct RunningTurn {
    cancel: CancellationToken,
    join: JoinHandle<()>,
}

async fn actor(
    shared: Arc<Conversation>,
    mut ops: mpsc::UnboundedReceiver<Op>,
    resume: Option<Resume>,
) {
    let mut running: Option<RunningTurn> = None;
    if let Some(resume) = resume {
        if let Some(Op::Resume { resume }) = op_with_history(&shared, Op::Resume { resume }).await {
            running = Some(resume_turn(&shared, resume));
        }
    }
    while let Some(op) = ops.recv().await {
        let op = match op_with_history(&shared, op).await {
            Some(op) => op,
            None => continue,
        };
        // After a lost commit, new work waits until the store holds everything again; stop
        // and shutdown always go through (they only end work).
        let takes_work = !matches!(
            op,
            Op::Stop { .. } | Op::Shutdown { .. } | Op::Resume { .. }
        );
        if takes_work {
            if let Err(error) = shared.ensure_stored().await {
                reply_error(op, error);
                continue;
            }
        }
        match op {
            Op::Prompt { parts, reply } => {
                if let Some(problem) = crate::engine::history::prompt_problem(&parts) {
                    reply(Err(SessionError::InvalidPrompt(problem)));
                    continue;
                }
                let turn_id = new_id("t");
                {
                    let mut state = lock(&shared.state);
                    if state.active_turn.is_some() {
                        drop(state);
                        reply(Err(SessionError::TurnInProgress));
                        continue;
                    }
                    state.active_turn = Some(turn_id.clone());
                    state.accepting_steering = true;
                    let message = Message::user(parts, Source::User, Some(&turn_id));
                    let first = !state.history.iter().any(|m| m.role == Role::User);
                    let title: Option<String> =
                        first.then(|| message.text().chars().take(80).collect());
                    shared.append_locked(&mut state, message);
                    shared.persist_session_fields(None, None, title.as_deref());
                }
                reply(Ok(turn_id.clone()));
                running = Some(start_turn(&shared, turn_id));
            }
            Op::Retry { reply } => {
                let turn_id = new_id("t");
                {
                    let mut state = lock(&shared.state);
                    if state.active_turn.is_some() {
                        drop(state);
                        reply(Err(SessionError::TurnInProgress));
                        continue;
                    }
                    if let Err(why) = retry_allowed(&state.history) {
                        drop(state);
                        reply(Err(SessionError::RetryUnavailable(why)));
                        continue;
                    }
                    state.active_turn = Some(turn_id.clone());
                    state.accepting_steering = true;
                }
                reply(Ok(turn_id.clone()));
                running = Some(start_turn(&shared, turn_id));
            }
            Op::Stop { reply } => {
                let was_active = lock(&shared.state).active_turn.is_some();
                match running.take() {
                    Some(turn) => {
                        turn.cancel.cancel();
                        // Answer only once the turn has ended, so the client can prompt again
                        // right after the response.
                        let _ = turn.join.await;
                        reply(Ok(was_active));
                    }
                    None => reply(Ok(false)),
                }
            }
            Op::Steer { text, reply } => {
                let mut state = lock(&shared.state);
                if !state.accepting_steering {
                    drop(state);
                    reply(Err(SessionError::NoTurnRunning));
                } else if let Some(full) =
                    steering_queue_full(&state.steering, &text, &shared.engine.config)
                {
                    drop(state);
                    reply(Err(full));
                } else {
                    state.steering.push_back(text);
                    drop(state);
                    reply(Ok(()));
                }
            }
            Op::Approve {
                request_id,
                decision,
                message,
                edited_content,
                arguments_digest,
                deny_memory,
                reply,
            } => {
                let (cut, other_arguments) = {
                    let pending = lock(&shared.pending);
                    let request = pending.get(&request_id);
                    (
                        edited_content.is_some()
                            && request.is_some_and(|p| p.shown == ProposalShown::Cut),
                        arguments_digest.as_deref().is_some_and(|digest| {
                            request.is_some_and(|p| {
                                p.payload["argumentsDigest"].as_str() != Some(digest)
                            })
                        }),
                    )
                };
                if other_arguments {
                    reply(Err(SessionError::StaleApproval(format!(
                        "request {request_id} now holds different arguments than the ones approved (digest {}); review the latest approvalRequested and answer that",
                        arguments_digest.unwrap_or_default()
                    ))));
                } else if cut {
                    reply(Err(SessionError::EditUnavailable(format!(
                        "request {request_id} proposes a change too large to show in full, so it cannot be edited before it is applied; approve or deny it without editedContent (after approving, edit the file itself)"
                    ))));
                } else {
                    resolve_pending(
                        &shared,
                        &request_id,
                        PendingKind::Approval,
                        Resolution::Approval {
                            decision,
                            message,
                            edited_content,
                            deny_memory,
                        },
                        reply,
                    );
                }
            }
            Op::Answer {
                request_id,
                answer,
                reply,
            } => {
                resolve_pending(
                    &shared,
                    &request_id,
                    PendingKind::Question,
                    Resolution::Answer(answer),
                    reply,
                );
            }
            Op::SwitchModel { model, reply } => reply(switch_model(&shared, model)),
            Op::SetMode { mode, reply } => {
                lock(&shared.state).mode = mode;
                shared.persist_session_fields(None, Some(mode), None);
                reply(Ok(()));
            }
            Op::SetNetworkAccess { allow, reply } => {
                let changed = {
                    let mut state = lock(&shared.state);
                    std::mem::replace(&mut state.allow_network, allow) != allow
                };
                if changed {
                    if let Some(store) = &shared.store {
                        store.set_network(&shared.id, allow);
                    }
                    // The next command runs with the new choice, also inside a running turn;
                    // the notice tells the user (and any other client) that it changed.
                    shared.emit(
                        None,
                        Event::Notice {
                            kind: NoticeKind::Network,
                            text: network_notice(allow).to_owned(),
                        },
                    );
                }
                reply(Ok(allow));
            }
            Op::Resume { resume } => {
                if running.is_none() {
                    running = Some(resume_turn(&shared, resume));
                }
            }
            Op::Shutdown { reply } => {
                if let Some(turn) = running.take() {
                    turn.cancel.cancel();
                    let _ = turn.join.await;
                }
                reply(Ok(()));
                break;
            }
        }
    }
    // The face dropped the session or shut it down: end any turn so no task outlives it.
    if let Some(turn) = running.take() {
        turn.cancel.cancel();
        let _ = turn.join.await;
    }
}

/// Completes the history before an op that reads it (a restored session parses its stored
/// messages only here, see [`Conversation::complete_history`]); `None` when the history is
/// damaged and the op has been answered with that error.
async fn op_with_history(shared: &Arc<Conversation>, op: Op) -> Option<Op> {
    let reads_history = matches!(
        op,
        Op::Prompt { .. } | Op::Retry { .. } | Op::SwitchModel { .. } | Op::Resume { .. }
    );
    if !reads_history {
        return Some(op);
    }
    let Err(error) = shared.complete_history().await else {
        return Some(op);
    };
    if let Op::Resume { resume } = &op {
        // The crashed turn cannot continue without its history: end it, and say why.
        let text = error.to_string();
        {
            let mut state = lock(&shared.state);
            state.active_turn = None;
            state.accepting_steering = false;
        }
        shared.emit(
            Some(&resume.turn_id),
            Event::Notice {
                kind: NoticeKind::Error,
                text: text.clone(),
            },
        );
        shared.emit(
            Some(&resume.turn_id),
            Event::TurnEnded {
                reason: crate::protocol::TurnEndReason::Error,
                error: Some(crate::protocol::TurnError {
                    message: text,
                    retriable: false,
                }),
            },
        );
        return None;
    }
    reply_error(op, error);
    None
}

fn resume_turn(shared: &Arc<Conversation>, resume: Resume) -> RunningTurn {
    turn::announce(shared, &resume.turn_id);
    let cancel = CancellationToken::new();
    let join = tokio::spawn(turn::resume_turn(shared.clone(), resume, cancel.clone()));
    RunningTurn { cancel, join }
}

fn start_turn(shared: &Arc<Conversation>, turn_id: String) -> RunningTurn {
    turn::announce(shared, &turn_id);
    let cancel = CancellationToken::new();
    let join = tokio::spawn(turn::run_turn(shared.clone(), turn_id, cancel.clone()));
    RunningTurn { cancel, join }
}

/// Take the pending request `request_id` if it is of the expected kind.
fn take_pending(
    shared: &Conversation,
    request_id: &str,
    expected: PendingKind,
) -> Result<PendingRequest, SessionError> {
    let mut pending = lock(&shared.pending);
    let kind = match pending.get(request_id) {
        None => {
            return Err(SessionError::StaleApproval(format!(
                "request {request_id} is not pending in this session (already answered, withdrawn, or from another session); answer only the latest approvalRequested/questionAsked"
            )))
        }
        Some(p) => p.kind,
    };
    if kind != expected {
        let (used, right) = match expected {
            PendingKind::Approval => ("approve", "answer"),
            PendingKind::Question => ("answer", "approve"),
        };
        return Err(SessionError::StaleApproval(format!(
            "request {request_id} cannot be resolved with `{used}`; use `{right}`"
        )));
    }
    pending
        .remove(request_id)
        .ok_or_else(|| SessionError::StaleApproval(format!("request {request_id} is not pending")))
}

/// Answer the client first, then hand the resolution to the waiting turn, so the response
/// precedes the `approvalResolved` and everything the decision causes.
fn resolve_pending(
    shared: &Conversation,
    request_id: &str,
    expected: PendingKind,
    resolution: Resolution,
    reply: Reply<()>,
) {
    match take_pending(shared, request_id, expected) {
        Err(error) => reply(Err(error)),
        Ok(request) => {
            reply(Ok(()));
            // The turn may have been stopped a moment ago; then nobody waits and that is fine.
            let _ = request.sender.send(resolution);
        }
    }
}

fn switch_model(
    shared: &Conversation,
    model: String,
) -> Result<(String, Option<String>), SessionError> {
    let config = &shared.engine.config;
    let Some(target) = config.model(&model) else {
        return Err(SessionError::UnknownModel {
            model,
            known: config.models.keys().cloned().collect::<Vec<_>>().join(", "),
        });
    };
    let (from, warning, turn_id) = {
        let mut state = lock(&shared.state);
        let from = state.model.clone();
        if from == model {
            return Ok((model, None));
        }
        let images: usize = state.history.iter().map(Message::image_count).sum();
        let documents: usize = state.history.iter().map(Message::document_count).sum();
        let mut warnings = Vec::new();
        if images > 0 && !target.vision {
            warnings.push(format!(
                "the history holds {images} image(s) that {model} cannot see; they are replaced by a placeholder for this model and restored if you switch back to a vision model"
            ));
        }
        if documents > 0 && !target.pdf {
            warnings.push(format!(
                "the history holds {documents} PDF document(s) that {model} cannot read; they are replaced by a placeholder for this model and restored if you switch back to a model that reads PDFs"
            ));
        }
        let warning = (!warnings.is_empty()).then(|| warnings.join("; "));
        let turn_id = state.active_turn.clone();
        let mut text = format!("Switched model from {from} to {model}");
        if turn_id.is_some() {
            text.push_str("; the running turn uses it from its next model request");
        }
        if let Some(w) = &warning {
            text.push_str("; ");
            text.push_str(w);
        }
        state.model = model.clone();
        let notice = Message::notice(NoticeKind::ModelSwitch, text, turn_id.as_deref());
        shared.append_locked(&mut state, notice);
        shared.persist_session_fields(Some(&model), None, None);
        (from, warning, turn_id)
    };
    shared.emit(
        turn_id.as_deref(),
        Event::ModelSwitched {
            from,
            to: model.clone(),
            warning: warning.clone(),
        },
    );
    Ok((model, warning))
}
