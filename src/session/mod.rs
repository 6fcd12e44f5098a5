//! The session actor: one task per session owns its state and applies control messages in
//! arrival order; events leave on one ordered stream with a gap-free per-session `seq`.
//!
//! A face turns each incoming message into an [`Op`] and sends it to the session's queue. The
//! actor answers through the op's [`Reply`] closure *before* it starts anything the op causes,
//! so a `prompt` response always precedes that turn's first event. The running turn is a
//! separate task (`engine::turn`) so that `stop`, `steer` and `approve` are read while it runs;
//! it shares the session state through short, never-awaited critical sections.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::engine::history::{new_id, Message, NoticeKind, Part, Source};
use crate::engine::{turn, EngineContext};
use crate::permissions::PermissionRules;
use crate::protocol::{Decision, ErrorKind, Event, Mode};
use crate::workspace::Workspace;

/// Where a session's events go. Implemented by each face (native JSON-RPC, ACP, the CLI).
pub trait EventSink: Send + Sync + 'static {
    fn emit(&self, session_id: &str, seq: u64, turn_id: Option<&str>, event: &Event);
}

/// Assigns `seq` and hands events to the sink under one lock, so the order of `seq` is the
/// order on the wire.
pub struct Emitter {
    session_id: String,
    seq: Mutex<u64>,
    sink: Arc<dyn EventSink>,
}

impl Emitter {
    pub fn emit(&self, turn_id: Option<&str>, event: Event) {
        let mut seq = lock(&self.seq);
        *seq += 1;
        self.sink.emit(&self.session_id, *seq, turn_id, &event);
    }
}

/// Lock a mutex, recovering the data if a panicking thread poisoned it: the state is plain
/// data that every critical section leaves consistent.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("a turn is already running in this session; wait for turnEnded, `steer` it, or `stop` it first")]
    TurnInProgress,
    #[error("no turn is running in this session; send `prompt` instead")]
    NoTurnRunning,
    #[error("{0}")]
    StaleApproval(String),
    #[error("unknown model `{model}`; pick one of: {known}")]
    UnknownModel { model: String, known: String },
    #[error("{0}")]
    RetryUnavailable(String),
    #[error("the session has shut down; start a new session")]
    Closed,
}

impl SessionError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            SessionError::TurnInProgress => ErrorKind::TurnInProgress,
            SessionError::NoTurnRunning => ErrorKind::NoTurnRunning,
            SessionError::StaleApproval(_) => ErrorKind::StaleApproval,
            SessionError::UnknownModel { .. } => ErrorKind::UnknownModel,
            SessionError::RetryUnavailable(_) => ErrorKind::RetryUnavailable,
            SessionError::Closed => ErrorKind::UnknownSession,
        }
    }
}

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
    /// Stop any running turn and end the actor.
    Shutdown {
        reply: Reply<()>,
    },
}

/// The mutable state of a session.
pub struct SessionState {
    pub history: Vec<Message>,
    pub model: String,
    pub mode: Mode,
    pub rules: PermissionRules,
    /// Steering messages waiting for the next safe point.
    pub steering: VecDeque<String>,
    /// The running turn, cleared by the turn itself as it announces `turnEnded`.
    pub active_turn: Option<String>,
    /// Whether `steer` is accepted: true from admission until the turn decides to end.
    pub accepting_steering: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingKind {
    Approval,
    Question,
}

/// The user's answer to a pending request.
#[derive(Debug)]
pub enum Resolution {
    Approval {
        decision: Decision,
        message: Option<String>,
        edited_content: Option<String>,
    },
    Answer(String),
}

pub struct PendingRequest {
    pub kind: PendingKind,
    pub tool_call_id: String,
    pub turn_id: String,
    pub sender: oneshot::Sender<Resolution>,
}

/// State shared by the actor and the running turn.
pub struct SessionShared {
    pub id: String,
    pub workspace: Workspace,
    pub engine: Arc<EngineContext>,
    pub emitter: Emitter,
    pub state: Mutex<SessionState>,
    pub pending: Mutex<HashMap<String, PendingRequest>>,
}

impl SessionShared {
    /// Append a message to the canonical history. Every commit goes through here, before the
    /// event that announces it (invariant 8), so the store can hook in at one place.
    pub fn commit(&self, message: Message) {
        lock(&self.state).history.push(message);
    }

    pub fn emit(&self, turn_id: Option<&str>, event: Event) {
        self.emitter.emit(turn_id, event);
    }
}

/// A cheap handle to a session: its queue and its shared state.
#[derive(Clone)]
pub struct SessionHandle {
    pub shared: Arc<SessionShared>,
    ops: mpsc::UnboundedSender<Op>,
}

impl SessionHandle {
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Queue an op. If the actor is gone the op's reply gets `Closed`.
    pub fn send(&self, op: Op) {
        if let Err(mpsc::error::SendError(op)) = self.ops.send(op) {
            reply_closed(op);
        }
    }
}

fn reply_closed(op: Op) {
    match op {
        Op::Prompt { reply, .. } | Op::Retry { reply } => reply(Err(SessionError::Closed)),
        Op::Stop { reply } => reply(Err(SessionError::Closed)),
        Op::Steer { reply, .. }
        | Op::Approve { reply, .. }
        | Op::Answer { reply, .. }
        | Op::SetMode { reply, .. }
        | Op::Shutdown { reply } => reply(Err(SessionError::Closed)),
        Op::SwitchModel { reply, .. } => reply(Err(SessionError::Closed)),
    }
}

pub struct NewSession {
    pub workspace: Workspace,
    pub model: String,
    pub mode: Mode,
}

/// Start a session actor and return its handle.
pub fn spawn(
    engine: Arc<EngineContext>,
    sink: Arc<dyn EventSink>,
    new: NewSession,
) -> SessionHandle {
    let id = new_id("s");
    let shared = Arc::new(SessionShared {
        id: id.clone(),
        workspace: new.workspace,
        engine,
        emitter: Emitter {
            session_id: id,
            seq: Mutex::new(0),
            sink,
        },
        state: Mutex::new(SessionState {
            history: Vec::new(),
            model: new.model,
            mode: new.mode,
            rules: PermissionRules::default(),
            steering: VecDeque::new(),
            active_turn: None,
            accepting_steering: false,
        }),
        pending: Mutex::new(HashMap::new()),
    });
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(actor(shared.clone(), rx));
    SessionHandle { shared, ops: tx }
}

struct RunningTurn {
    cancel: CancellationToken,
    join: JoinHandle<()>,
}

async fn actor(shared: Arc<SessionShared>, mut ops: mpsc::UnboundedReceiver<Op>) {
    let mut running: Option<RunningTurn> = None;
    while let Some(op) = ops.recv().await {
        match op {
            Op::Prompt { parts, reply } => {
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
                    state
                        .history
                        .push(Message::user(parts, Source::User, Some(&turn_id)));
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
                reply,
            } => {
                let result = resolve_pending(
                    &shared,
                    &request_id,
                    PendingKind::Approval,
                    Resolution::Approval {
                        decision,
                        message,
                        edited_content,
                    },
                );
                reply(result);
            }
            Op::Answer {
                request_id,
                answer,
                reply,
            } => {
                let result = resolve_pending(
                    &shared,
                    &request_id,
                    PendingKind::Question,
                    Resolution::Answer(answer),
                );
                reply(result);
            }
            Op::SwitchModel { model, reply } => reply(switch_model(&shared, model)),
            Op::SetMode { mode, reply } => {
                lock(&shared.state).mode = mode;
                reply(Ok(()));
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

fn start_turn(shared: &Arc<SessionShared>, turn_id: String) -> RunningTurn {
    let cancel = CancellationToken::new();
    let join = tokio::spawn(turn::run_turn(shared.clone(), turn_id, cancel.clone()));
    RunningTurn { cancel, join }
}

/// `retry` is for recovering from a provider error: the history must end in an error notice,
/// looking through model switches (switching model and then retrying is the intended recovery).
pub fn retry_allowed(history: &[Message]) -> Result<(), String> {
    let last = history
        .iter()
        .rev()
        .find(|m| m.notice != Some(NoticeKind::ModelSwitch));
    match last {
        Some(m) if m.notice == Some(NoticeKind::Error) => Ok(()),
        Some(_) => Err("retry is only for a turn that ended in a provider error, and the last turn did not; send `prompt` instead".to_owned()),
        None => Err("the session has no turn to retry; send `prompt` first".to_owned()),
    }
}

fn resolve_pending(
    shared: &SessionShared,
    request_id: &str,
    expected: PendingKind,
    resolution: Resolution,
) -> Result<(), SessionError> {
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
    if let Some(request) = pending.remove(request_id) {
        // The turn may have been stopped a moment ago; then nobody waits and that is fine.
        let _ = request.sender.send(resolution);
    }
    Ok(())
}

fn switch_model(
    shared: &SessionShared,
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
        let warning = (images > 0 && !target.vision).then(|| {
            format!(
                "the history holds {images} image(s) that {model} cannot see; they are replaced by a placeholder for this model and restored if you switch back to a vision model"
            )
        });
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
        state.history.push(Message::notice(
            NoticeKind::ModelSwitch,
            text,
            turn_id.as_deref(),
        ));
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
