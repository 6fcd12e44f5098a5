//! The session actor: one task per session owns its state and applies control messages in
//! arrival order; events leave on one ordered stream with a gap-free per-session `seq`.
//!
//! A face turns each incoming message into an [`Op`] and sends it to the session's queue. The
//! actor answers through the op's [`Reply`] closure *before* it starts anything the op causes,
//! so a `prompt` response always precedes that turn's first event. The running turn is a
//! separate task (`engine::turn`) so that `stop`, `steer` and `approve` are read while it runs;
//! it shares the session state through short, never-awaited critical sections.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::engine::conversation::parse_history;
pub use crate::engine::conversation::{
    lock, network_notice, retry_allowed, role_name, Conversation, ConversationState, DenyMemory,
    PendingKind, PendingRequest, ProposalShown, Resolution, Resume, SessionError, UnparsedHistory,
    PROVIDER_ERROR_REASON,
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

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("session {0} is not in the store; list sessions with session/list")]
    NotFound(String),
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
    #[error("session {id} cannot be restored: its workspace {cwd} cannot be opened ({why}); restore the folder or start a new session")]
    Workspace {
        id: String,
        cwd: String,
        why: String,
    },
    #[error("session {id} has a damaged message at position {position}: {why}")]
    Corrupt {
        id: String,
        position: usize,
        why: String,
    },
}

/// Rebuild a session from the store alone (invariant 8) and start its actor.
///
/// Unanswered trailing tool calls are handled like this: a write or shell call that had
/// started has no trustworthy outcome, so it gets an `interrupted` result and is never re-run;
/// the rest go back through authorization in order (an approval answered before the crash is
/// not asked again) and then the turn continues.
pub async fn restore(
    engine: Arc<EngineContext>,
    sink: Arc<dyn EventSink>,
    store: Store,
    session_id: &str,
) -> Result<Restored, RestoreError> {
    restore_with_client_fs(engine, sink, store, session_id, None).await
}

/// [`restore`] for a face whose client reads and writes files itself.
pub async fn restore_with_client_fs(
    engine: Arc<EngineContext>,
    sink: Arc<dyn EventSink>,
    store: Store,
    session_id: &str,
    client_fs: Option<Arc<dyn ClientFs>>,
) -> Result<Restored, RestoreError> {
    let loaded = store
        .load_session(session_id)
        .await?
        .ok_or_else(|| RestoreError::NotFound(session_id.to_owned()))?;
    let mut loaded = loaded;
    let record = loaded.record.clone();
    // The messages with a stored display entry come first: every turn among them has ended,
    // so they hold no open call and nothing below needs them parsed. They stay JSON until an
    // op needs the history, and the load reply sends their entries as they are. The rest (the
    // crashed turn, or all of a history stored before entries existed) is parsed now.
    let mut rows = std::mem::take(&mut loaded.messages);
    let mut displays = std::mem::take(&mut loaded.displays);
    // An entry that is not a JSON object (a damaged row) ends the stretch: from there on the
    // rows are parsed and their entries computed, so the reply stays well-formed.
    let settled = displays
        .iter()
        .position(|d| !d.as_deref().is_some_and(display::usable_entry))
        .unwrap_or(displays.len());
    displays.truncate(settled);
    let stored_displays: Vec<String> = displays.into_iter().flatten().collect();
    let tail_rows = rows.split_off(settled);
    let (history, tail_displays) = tokio::task::spawn_blocking(move || {
        let history = parse_history(&tail_rows, settled)?;
        // Entries for the parsed messages whose turn is over, so the next resume skips them.
        let displays = display::settled_displays(settled as u64, &history);
        Ok((history, displays))
    })
    .await
    .map_err(|e| RestoreError::Corrupt {
        id: record.id.clone(),
        position: settled,
        why: format!("parsing the history crashed: {e}"),
    })?
    .map_err(|(position, why)| RestoreError::Corrupt {
        id: record.id.clone(),
        position,
        why,
    })?;
    let displays_stored = settled + tail_displays.len();
    store.set_displays(&record.id, tail_displays);
    let cwd = record.cwd.clone();
    let workspace = tokio::task::spawn_blocking(move || Workspace::open(vec![cwd.clone().into()]))
        .await
        .map_err(|e| RestoreError::Workspace {
            id: record.id.clone(),
            cwd: record.cwd.clone(),
            why: e.to_string(),
        })?
        .map_err(|e| RestoreError::Workspace {
            id: record.id.clone(),
            cwd: record.cwd.clone(),
            why: e.to_string(),
        })?;
    let mut rules = PermissionRules::default();
    for rule in &loaded.rules {
        match rule.kind.parse() {
            Ok(kind) => rules.add(kind, rule.value.clone()),
            // A newer tandem's rule: skipping it can only ask more, never allow more, except a
            // deny rule of a kind unknown here, which is why unknown kinds are logged loudly.
            Err(e) => tracing::warn!(session = %record.id, "{e}; the rule is ignored"),
        }
    }
    let model = if engine.config.model(&record.model).is_some() {
        record.model.clone()
    } else {
        engine.config.default_model.clone()
    };
    let mode = record.mode.parse().unwrap_or(Mode::Ask);

    // Find the calls the crashed turn left without results.
    let orphans = crate::engine::history::orphan_tool_calls(&history);
    let mut fixes: Vec<Message> = Vec::new();
    let mut resume = None;
    if !orphans.is_empty() {
        let calls: Vec<crate::engine::history::ToolCallRecord> = history
            .iter()
            .flat_map(|m| m.tool_calls.iter())
            .filter(|c| orphans.contains(&c.id))
            .cloned()
            .collect();
        let turn_id = history
            .iter()
            .rev()
            .find(|m| !m.tool_calls.is_empty())
            .and_then(|m| m.meta.turn_id.clone())
            .unwrap_or_else(|| new_id("t"));
        let mut remaining = Vec::new();
        for call in calls {
            if loaded.started_tools.contains(&call.id) {
                let message = Message::tool_result(
                    &call,
                    crate::engine::history::ResultStatus::Interrupted,
                    "interrupted: tandem stopped while this was running, so its outcome is unknown; it was not run again. Check its effects before repeating it.".to_owned(),
                    &turn_id,
                );
                fixes.push(message);
            } else {
                remaining.push(call);
            }
        }
        if !remaining.is_empty() {
            let recorded = loaded
                .pending
                .iter()
                .filter(|p| remaining.iter().any(|c| c.id == p.tool_call_id))
                .map(|p| (p.tool_call_id.clone(), p.clone()))
                .collect();
            resume = Some(Resume {
                turn_id,
                calls: remaining,
                recorded,
            });
        }
        if resume.is_none() && !fixes.is_empty() {
            fixes.push(Message::notice(
                NoticeKind::Interrupted,
                "tandem stopped while this turn was running a command or an edit; its outcome is unknown and it was not run again. Prompt again to continue".to_owned(),
                history.iter().rev().find_map(|m| m.meta.turn_id.as_deref()),
            ));
        }
    } else if history.last().is_some_and(|m| {
        // (An empty `history` here means the last message has a stored entry, so its turn
        // ended: nothing to say.)
        m.role == Role::User && matches!(m.meta.source, Source::User | Source::Steering)
    }) {
        // The turn died before the model answered; say so instead of silently re-asking.
        fixes.push(Message::notice(
            NoticeKind::Interrupted,
            "tandem stopped before this turn finished; prompt again to continue".to_owned(),
            history.last().and_then(|m| m.meta.turn_id.as_deref()),
        ));
    }
    let state = ConversationState {
        history,
        unparsed: (!rows.is_empty()).then(|| {
            UnparsedHistory::new(
                rows,
                stored_displays,
                record.title.clone(),
                record.updated_at,
            )
        }),
        displays_stored,
        model,
        mode,
        rules,
        steering: VecDeque::new(),
        active_turn: resume.as_ref().map(|r| r.turn_id.clone()),
        accepting_steering: resume.is_some(),
        allow_network: record.allow_network,
        usage: loaded.usage.clone(),
        tool_call_ids: None,
    };
    let handle = start_actor(
        engine,
        sink,
        record.id.clone(),
        workspace,
        Some(store),
        client_fs,
        state,
        loaded.last_seq,
        None,
    );
    {
        let mut state = lock(&handle.shared.state);
        for fix in fixes {
            let finished = fix.tool_result.as_ref().map(|r| r.tool_call_id.clone());
            handle.shared.append_locked(&mut state, fix);
            if let Some(tool_call_id) = finished {
                handle.shared.after_side_effect(&tool_call_id);
            }
        }
    }
    let pending: Vec<serde_json::Value> = resume
        .iter()
        .flat_map(|r| r.recorded.values())
        .filter(|p| p.decision.is_none())
        .filter_map(|p| serde_json::from_str(&p.payload).ok())
        .collect();
    Ok(Restored {
        handle,
        resume,
        pending,
    })
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

/// A restored session, before its crashed turn continues.
pub struct Restored {
    pub handle: SessionHandle,
    /// Send as `Op::Resume` once the client has the load response.
    pub resume: Option<Resume>,
    /// Requests that were open at the crash; the resumed turn asks them again with the same ids.
    pub pending: Vec<serde_json::Value>,
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
