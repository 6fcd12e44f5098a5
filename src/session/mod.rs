//! The session actor: one task per session owns its state and applies control messages in
//! arrival order; events leave on one ordered stream with a gap-free per-session `seq`.
//!
//! A face turns each incoming message into an [`Op`] and sends it to the session's queue. The
//! actor answers through the op's [`Reply`] closure *before* it starts anything the op causes,
//! so a `prompt` response always precedes that turn's first event. The running turn is a
//! separate task (`engine::turn`) so that `stop`, `steer` and `approve` are read while it runs;
//! it shares the session state through short, never-awaited critical sections.

pub mod commands;
pub mod host;
pub mod mcp;
mod restore;

pub use commands::PromptOutcome;
pub use restore::{restore, restore_with_client_fs, RestoreError, Restored};

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::engine::conversation::parse_history;
pub use crate::engine::conversation::{
    lock, network_notice, retry_allowed, role_name, Conversation, ConversationStart, DenyMemory,
    PendingKind, PendingRequest, ProposalShown, Resolution, Resume, SessionError, UnparsedHistory,
};
pub use crate::engine::display;
pub use crate::engine::emitter::{Emitter, EventSink, SEQ_RESERVATION, STREAM_BACKLOG_BYTES};
use crate::engine::history::{new_id, now_ms, Message, NoticeKind, Part, Role, Source};
use crate::engine::{turn, EngineContext};
use crate::permissions::PermissionRules;
use crate::protocol::{Decision, Mode};
use crate::store::{SessionRecord, Store};
use crate::tools::client_fs::ClientFs;
use crate::workspace::Workspace;

/// The answer channel of one op. Faces build it so that the answer is written in order.
pub type Reply<T> = Box<dyn FnOnce(Result<T, SessionError>) + Send>;

pub enum Op {
    /// A prompt, or a slash command (see [`commands`]).
    Prompt {
        parts: Vec<Part>,
        reply: Reply<PromptOutcome>,
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
    /// `turn/diff` (answered from a task beside the actor: it reads).
    TurnDiff {
        turn_id: String,
        reply: Reply<Vec<crate::protocol::TurnFileDiff>>,
    },
    /// `session/checkpoints` (answered from a task beside the actor).
    Checkpoints {
        reply: Reply<Vec<crate::protocol::Checkpoint>>,
    },
    /// `session/rewind`: refused while a turn runs.
    Rewind {
        turn_id: String,
        restore: crate::protocol::RestoreScope,
        force: bool,
        reply: Reply<crate::protocol::RewindResult>,
    },
    /// `session/fork`: answers the new session's id.
    Fork {
        turn_id: Option<String>,
        reply: Reply<String>,
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

    /// Start the session's MCP servers in the background (see `start_actor`). A face calls it
    /// once, right after it has answered the request that created or opened the session.
    pub fn start_mcp_servers(&self) {
        self.shared.mcp.start();
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
        Op::TurnDiff { turn_id, reply } => Op::TurnDiff {
            turn_id,
            reply: ordered(shared, reply),
        },
        Op::Checkpoints { reply } => Op::Checkpoints {
            reply: ordered(shared, reply),
        },
        Op::Rewind {
            turn_id,
            restore,
            force,
            reply,
        } => Op::Rewind {
            turn_id,
            restore,
            force,
            reply: ordered(shared, reply),
        },
        Op::Fork { turn_id, reply } => Op::Fork {
            turn_id,
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
        Op::Prompt { reply, .. } => reply(Err(error)),
        Op::Retry { reply } => reply(Err(error)),
        Op::Stop { reply } => reply(Err(error)),
        Op::Steer { reply, .. }
        | Op::Approve { reply, .. }
        | Op::Answer { reply, .. }
        | Op::SetMode { reply, .. }
        | Op::Shutdown { reply } => reply(Err(error)),
        Op::SwitchModel { reply, .. } => reply(Err(error)),
        Op::SetNetworkAccess { reply, .. } => reply(Err(error)),
        Op::TurnDiff { reply, .. } => reply(Err(error)),
        Op::Checkpoints { reply } => reply(Err(error)),
        Op::Rewind { reply, .. } => reply(Err(error)),
        Op::Fork { reply, .. } => reply(Err(error)),
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
    /// The session's MCP servers ([`mcp::build_hub`]); they start once the session exists.
    pub mcp: Arc<crate::mcp::McpHub>,
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
    let state = ConversationStart {
        history: Vec::new(),
        unparsed: None,
        displays_stored: 0,
        model: new.model,
        mode: new.mode,
        rules: PermissionRules::default(),
        allow_network: false,
        usage: Vec::new(),
        resumed_turn: None,
        plan: Vec::new(),
    };
    start_actor(
        engine,
        sink,
        id,
        new.workspace,
        new.store,
        new.client_fs,
        new.mcp,
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
    mcp_hub: Arc<crate::mcp::McpHub>,
    state: ConversationStart,
    last_seq: u64,
    resume: Option<Resume>,
) -> SessionHandle {
    let shared = Conversation::new(
        id, workspace, engine, sink, store, client_fs, mcp_hub, state, last_seq,
    );
    // Every status change of a server becomes an `mcpStatus` event of this session. The
    // servers start when the face calls `start_mcp_servers`, after its response to
    // `session/new` or `session/load`, so the client knows the session before its first
    // `mcpStatus` and sees each server from `starting` on.
    let weak = Arc::downgrade(&shared);
    shared.mcp.set_listener(Arc::new(move |status| {
        if let Some(conversation) = weak.upgrade() {
            let event = mcp::status_event(&conversation.mcp, &status);
            conversation.emit(None, event);
        }
    }));
    // The hooks load, and the `SessionStart` ones run, beside the actor; the first turn waits
    // for them.
    shared.start_session_hooks(if resume.is_some() || last_seq > 0 {
        "resume"
    } else {
        "startup"
    });
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(actor(shared.clone(), rx, resume));
    SessionHandle { shared, ops: tx }
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
            Op::Prompt { parts, reply } => match commands::classify(&shared, parts).await {
                commands::Invocation::Prompt(parts) => match shared.admit_prompt(parts, None) {
                    Err(error) => reply(Err(error)),
                    Ok(turn_id) => {
                        reply(Ok(PromptOutcome::Turn {
                            turn_id: turn_id.clone(),
                            command: None,
                        }));
                        running = Some(start_turn(&shared, turn_id));
                    }
                },
                commands::Invocation::Expanded { name, parts, typed } => {
                    match shared.admit_prompt(parts, Some(typed)) {
                        Err(error) => reply(Err(error)),
                        Ok(turn_id) => {
                            reply(Ok(PromptOutcome::Turn {
                                turn_id: turn_id.clone(),
                                command: Some(name),
                            }));
                            running = Some(start_turn(&shared, turn_id));
                        }
                    }
                }
                commands::Invocation::Builtin { builtin, arguments } => {
                    match commands::run_builtin(&shared, builtin, &arguments).await {
                        Err(error) => reply(Err(error)),
                        Ok(Some(outcome)) => reply(Ok(outcome)),
                        // `/compact`: a turn that only compacts.
                        Ok(None) => match shared.admit_compaction() {
                            Err(error) => reply(Err(error)),
                            Ok(turn_id) => {
                                reply(Ok(PromptOutcome::Turn {
                                    turn_id: turn_id.clone(),
                                    command: Some(builtin.name().to_owned()),
                                }));
                                running = Some(start_compaction(&shared, turn_id));
                            }
                        },
                    }
                }
            },
            Op::Retry { reply } => match shared.admit_retry() {
                Err(error) => reply(Err(error)),
                Ok(turn_id) => {
                    reply(Ok(turn_id.clone()));
                    running = Some(start_turn(&shared, turn_id));
                }
            },
            Op::Stop { reply } => {
                let was_active = shared.turn_active();
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
            Op::Steer { text, reply } => reply(shared.queue_steering(text)),
            Op::Approve {
                request_id,
                decision,
                message,
                edited_content,
                arguments_digest,
                deny_memory,
                reply,
            } => {
                let checked = shared.check_approval(
                    &request_id,
                    edited_content.is_some(),
                    arguments_digest.as_deref(),
                );
                if let Err(error) = checked {
                    reply(Err(error));
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
            Op::SwitchModel { model, reply } => reply(shared.switch_model(model)),
            Op::SetMode { mode, reply } => {
                shared.set_mode(mode);
                reply(Ok(()));
            }
            Op::SetNetworkAccess { allow, reply } => {
                shared.set_network_access(allow);
                reply(Ok(allow));
            }
            Op::Resume { resume } => {
                if running.is_none() {
                    running = Some(resume_turn(&shared, resume));
                }
            }
            Op::TurnDiff { turn_id, reply } => {
                let shared = shared.clone();
                tokio::spawn(async move { reply(shared.turn_diff(&turn_id).await) });
            }
            Op::Checkpoints { reply } => {
                let shared = shared.clone();
                tokio::spawn(async move { reply(shared.checkpoints().await) });
            }
            Op::Rewind {
                turn_id,
                restore,
                force,
                reply,
            } => {
                if shared.turn_active() {
                    reply(Err(SessionError::TurnInProgress));
                    continue;
                }
                match shared.rewind(&turn_id, restore, force).await {
                    Err(error) => reply(Err(error)),
                    Ok((result, plan)) => {
                        let files = result.restored.clone();
                        reply(Ok(result));
                        shared.emit(
                            Some(&turn_id),
                            crate::protocol::Event::Rewound { restore, files },
                        );
                        if let Some(entries) = plan {
                            shared.emit(None, crate::protocol::Event::Plan { entries });
                        }
                    }
                }
            }
            Op::Fork { turn_id, reply } => {
                if turn_id.is_none() && shared.turn_active() {
                    reply(Err(SessionError::TurnInProgress));
                    continue;
                }
                reply(shared.fork(turn_id.as_deref()).await);
            }
            Op::Shutdown { reply } => {
                if let Some(turn) = running.take() {
                    turn.cancel.cancel();
                    let _ = turn.join.await;
                }
                shared.mcp.close(MCP_CLOSE_PATIENCE).await;
                reply(Ok(()));
                break;
            }
        }
    }
    // The face dropped the session or shut it down: end any turn so no task outlives it,
    // and every MCP server so no process does.
    if let Some(turn) = running.take() {
        turn.cancel.cancel();
        let _ = turn.join.await;
    }
    shared.mcp.close(MCP_CLOSE_PATIENCE).await;
}

/// How long a session that ends waits for its MCP servers' processes to be killed and reaped.
const MCP_CLOSE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(3);

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
        shared.end_unresumable_turn(&resume.turn_id, error.to_string());
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

fn start_compaction(shared: &Arc<Conversation>, turn_id: String) -> RunningTurn {
    turn::announce(shared, &turn_id);
    let cancel = CancellationToken::new();
    let join = tokio::spawn(turn::run_compact_turn(
        shared.clone(),
        turn_id,
        cancel.clone(),
    ));
    RunningTurn { cancel, join }
}

fn start_turn(shared: &Arc<Conversation>, turn_id: String) -> RunningTurn {
    turn::announce(shared, &turn_id);
    let cancel = CancellationToken::new();
    let join = tokio::spawn(turn::run_turn(shared.clone(), turn_id, cancel.clone()));
    RunningTurn { cancel, join }
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
    match shared.take_pending(request_id, expected) {
        Err(error) => reply(Err(error)),
        Ok(request) => {
            reply(Ok(()));
            // The turn may have been stopped a moment ago; then nobody waits and that is fine.
            let _ = request.sender.send(resolution);
        }
    }
}
