//! The session actor: one task per session owns its state and applies control messages in
//! arrival order; events leave on one ordered stream with a gap-free per-session `seq`.
//!
//! A face turns each incoming message into an [`Op`] and sends it to the session's queue. The
//! actor answers through the op's [`Reply`] closure *before* it starts anything the op causes,
//! so a `prompt` response always precedes that turn's first event. The running turn is a
//! separate task (`engine::turn`) so that `stop`, `steer` and `approve` are read while it runs;
//! it shares the session state through short, never-awaited critical sections.

pub mod display;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::engine::history::{new_id, now_ms, Message, NoticeKind, Part, Role, Source};
use crate::engine::{turn, EngineContext};
use crate::permissions::PermissionRules;
use crate::protocol::{Decision, ErrorKind, Event, Mode};
use crate::store::{
    AfterCommit, Durability, MessageRow, PendingRecord, RuleRecord, SessionRecord, Store,
};
use crate::tools::client_fs::ClientFs;
use crate::workspace::Workspace;

/// Where a session's events go. Implemented by each face (native JSON-RPC, ACP, the CLI).
pub trait EventSink: Send + Sync + 'static {
    fn emit(&self, session_id: &str, seq: u64, turn_id: Option<&str>, event: &Event);
}

/// Assigns `seq` and hands events to the sink under one lock, so the order of `seq` is the
/// order on the wire.
///
/// With a store, an event that has a row (everything but the streamed pieces) goes through the
/// store's writer queue and reaches the sink only after everything enqueued before it (the
/// messages it announces, and the event row itself) is committed: an event a client has seen is
/// never lost in a crash (invariant 8).
///
/// Streamed pieces have no row, so they only need their place in the order. When nothing of
/// this session is waiting in the store queue, a piece goes straight to the sink: a thread hop
/// and a commit per delta would cost more than the rest of the delta's path (issue 3 measures
/// it). Otherwise it queues behind what is waiting. Their numbers are made durable in blocks
/// ([`SEQ_RESERVATION`]) through [`Store::reserve_seq`], so a server restarted after a crash
/// never hands out a `seq` a client may have seen, and streaming writes nothing per delta.
pub struct Emitter {
    session_id: String,
    counters: Mutex<SeqCounters>,
    sink: Arc<dyn EventSink>,
    store: Option<Store>,
    /// Store callbacks of this session (events and ordered replies) not yet run; a streamed
    /// piece may skip the queue only when this is zero.
    queued: Arc<AtomicUsize>,
    /// The streamed pieces waiting in the store queue (their text or output, in bytes), and a
    /// wake-up for producers waiting for it to fall (see [`Emitter::stream_room`]).
    pieces: Arc<PieceBacklog>,
}

/// Streamed pieces of one session that wait in the store queue behind a stored event.
///
/// Once one piece waits there, every later piece must wait behind it (order), so a producer
/// faster than the store thread (a command flooding output: 200 MB in a few seconds) would
/// pile pieces up without bound. Producers that can pause (the shell tool stops reading the
/// command's pipes, so the command blocks as it would on a slow terminal) wait for room
/// instead: memory stays near [`STREAM_BACKLOG_BYTES`] whatever the command prints.
struct PieceBacklog {
    bytes: AtomicUsize,
    room: tokio::sync::Notify,
}

/// How many bytes of streamed pieces may wait in the store queue before producers pause.
pub const STREAM_BACKLOG_BYTES: usize = 4 * 1024 * 1024;

/// The bytes a streamed piece carries (0 for any other event).
fn piece_bytes(event: &Event) -> usize {
    match event {
        Event::AssistantDelta { text } | Event::ReasoningDelta { text } => text.len(),
        Event::ToolCallUpdate {
            output: Some(output),
            ..
        } => output.len(),
        _ => 0,
    }
}

/// How many `seq` numbers one reservation covers. After a crash in the middle of a stream,
/// the restored session numbers on after the reservation: a forward jump of at most this many,
/// never a repeat.
pub const SEQ_RESERVATION: u64 = 1024;

struct SeqCounters {
    /// The last `seq` handed out.
    seq: u64,
    /// The highest `seq` that a restored session is sure to skip: the last stored event's, or
    /// the end of the last reservation.
    durable: u64,
}

/// Events worth a row: everything but the streamed pieces, which the final message covers.
fn persisted(event: &Event) -> bool {
    !event.is_streamed_piece()
}

impl Emitter {
    fn new(
        session_id: String,
        last_seq: u64,
        sink: Arc<dyn EventSink>,
        store: Option<Store>,
    ) -> Self {
        Emitter {
            session_id,
            counters: Mutex::new(SeqCounters {
                seq: last_seq,
                durable: last_seq,
            }),
            sink,
            store,
            queued: Arc::new(AtomicUsize::new(0)),
            pieces: Arc::new(PieceBacklog {
                bytes: AtomicUsize::new(0),
                room: tokio::sync::Notify::new(),
            }),
        }
    }

    /// `None` when streamed pieces may go on at once; otherwise a future that resolves when
    /// the pieces waiting in the store queue have fallen to [`STREAM_BACKLOG_BYTES`].
    pub fn stream_room(&self) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        if self.pieces.bytes.load(Ordering::Acquire) <= STREAM_BACKLOG_BYTES {
            return None;
        }
        let pieces = self.pieces.clone();
        Some(async move {
            loop {
                let notified = pieces.room.notified();
                if pieces.bytes.load(Ordering::Acquire) <= STREAM_BACKLOG_BYTES {
                    return;
                }
                notified.await;
            }
        })
    }

    pub fn emit(&self, turn_id: Option<&str>, event: Event) {
        let mut counters = lock(&self.counters);
        counters.seq += 1;
        let seq = counters.seq;
        let Some(store) = &self.store else {
            self.sink.emit(&self.session_id, seq, turn_id, &event);
            return;
        };
        let json = persisted(&event)
            .then(|| serde_json::to_string(&event).ok())
            .flatten();
        // A turn streams right after it starts: its row reserves the numbers of the deltas, so
        // the first one does not wait for a reservation of its own.
        let reserve_with_row = json.is_some() && matches!(event, Event::TurnStarted { .. });
        if json.is_some() {
            // The row carries its seq, and the store sets the high-water mark to it (or to the
            // end of the reservation it carries).
            counters.durable = if reserve_with_row {
                seq + SEQ_RESERVATION
            } else {
                seq
            };
        } else if seq <= counters.durable && self.queued.load(Ordering::Acquire) == 0 {
            // Every earlier event of this session has reached the sink (a callback decrements
            // `queued` only after its emit), so this one cannot overtake anything.
            self.sink.emit(&self.session_id, seq, turn_id, &event);
            return;
        } else if seq > counters.durable {
            counters.durable = seq - 1 + SEQ_RESERVATION;
            store.reserve_seq(&self.session_id, counters.durable);
        }
        let sink = self.sink.clone();
        let session_id = self.session_id.clone();
        let turn = turn_id.map(str::to_owned);
        let event_type = event.type_name();
        let queued = self.queued.clone();
        queued.fetch_add(1, Ordering::AcqRel);
        let size = piece_bytes(&event);
        let pieces = (size > 0).then(|| {
            self.pieces.bytes.fetch_add(size, Ordering::AcqRel);
            self.pieces.clone()
        });
        let after_commit: AfterCommit = Box::new(move || {
            sink.emit(&session_id, seq, turn.as_deref(), &event);
            queued.fetch_sub(1, Ordering::AcqRel);
            if let Some(pieces) = pieces {
                let before = pieces.bytes.fetch_sub(size, Ordering::AcqRel);
                if before > STREAM_BACKLOG_BYTES && before - size <= STREAM_BACKLOG_BYTES {
                    pieces.room.notify_waiters();
                }
            }
        });
        match json {
            Some(json) if reserve_with_row => store.record_event_reserving(
                &self.session_id,
                seq,
                turn_id,
                event_type,
                json,
                counters.durable,
                Some(after_commit),
            ),
            json => store.record_event(
                &self.session_id,
                seq,
                turn_id,
                event_type,
                json,
                Some(after_commit),
            ),
        }
    }

    /// The highest `seq` a restarted server must skip: the last one handed out or reserved.
    pub fn durable_seq(&self) -> u64 {
        let counters = lock(&self.counters);
        counters.durable.max(counters.seq)
    }

    /// Resolves once every event emitted before the call has reached the sink. A face that
    /// sends its client something outside the event stream (ACP's `fs/*` requests) waits for
    /// it, so the client has seen the call's `tool_call` before the call reads a file.
    pub fn delivered(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        self.after_queued(Box::new(move || {
            let _ = tx.send(());
        }));
        async move {
            let _ = rx.await;
        }
    }

    /// Run `f` after every event emitted before it has reached the sink, and before any event
    /// emitted after it: how replies to ops are ordered with the session's events.
    fn after_queued(&self, f: Box<dyn FnOnce() + Send>) {
        let Some(store) = &self.store else {
            f();
            return;
        };
        // Under the counters lock, so a streamed piece that checks `queued` sees this reply.
        let _counters = lock(&self.counters);
        let queued = self.queued.clone();
        queued.fetch_add(1, Ordering::AcqRel);
        store.after_commit(Box::new(move || {
            f();
            queued.fetch_sub(1, Ordering::AcqRel);
        }));
    }
}

/// A message as the store keeps it. Tool results gate what runs next, so they are committed
/// with full durability. `None` (logged) for a message that cannot be serialized.
fn message_row(message: &Message, display: Option<String>) -> Option<MessageRow> {
    let durability = if message.role == Role::Tool {
        Durability::Full
    } else {
        Durability::Normal
    };
    match serde_json::to_string(message) {
        Ok(json) => Some(MessageRow {
            message_id: message.id.clone(),
            turn_id: message.meta.turn_id.clone(),
            role: role_name(message.role).to_owned(),
            json,
            display,
            durability,
        }),
        Err(e) => {
            tracing::error!("cannot serialize message {}: {e}", message.id);
            None
        }
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
    /// A stored message of a restored session cannot be parsed, so its history cannot be sent
    /// to a model.
    #[error("{0}")]
    HistoryDamaged(String),
    /// The store could not save this session's last changes and still cannot (see
    /// [`SessionShared::ensure_stored`]).
    #[error("the session store cannot write ({0}), so this session takes no new work: nothing more could be saved; free disk space or end the program that holds the database lock, then send the request again")]
    StoreUnavailable(String),
    /// The running turn already holds as much queued steering as the config allows.
    #[error("{0}")]
    SteeringQueueFull(String),
    /// `editedContent` for a proposal that was shown cut.
    #[error("{0}")]
    EditUnavailable(String),
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
            SessionError::HistoryDamaged(_) => ErrorKind::Internal,
            SessionError::StoreUnavailable(_) => ErrorKind::StoreUnavailable,
            SessionError::SteeringQueueFull(_) => ErrorKind::SteeringQueueFull,
            SessionError::EditUnavailable(_) => ErrorKind::InvalidParams,
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

/// The mutable state of a session.
pub struct SessionState {
    /// The canonical history; while `unparsed` is `Some`, only the messages after the unparsed
    /// ones (see [`SessionShared::complete_history`]).
    pub history: Vec<Message>,
    /// A restored session's first messages, still as stored JSON: a resume answers without
    /// parsing them, and the actor parses them before the first op that needs the history.
    pub unparsed: Option<UnparsedHistory>,
    /// How many messages from the start of the history have their display entry stored
    /// (see [`display`]); a message appended right after them whose entry is final already
    /// is stored with it, the rest get theirs when the turn that wrote them ends.
    pub displays_stored: usize,
    pub model: String,
    pub mode: Mode,
    pub rules: PermissionRules,
    /// Steering messages waiting for the next safe point.
    pub steering: VecDeque<String>,
    /// The running turn, cleared by the turn itself as it announces `turnEnded`.
    pub active_turn: Option<String>,
    /// Whether `steer` is accepted: true from admission until the turn decides to end.
    pub accepting_steering: bool,
    /// Whether sandboxed commands may use the network: the user's choice, never the model's.
    pub allow_network: bool,
    /// Token usage per model, in the order the models were first used (mirrors the store).
    pub usage: Vec<crate::store::UsageTotals>,
    /// Every tool call id in `history`, built the first time a turn asks
    /// ([`SessionState::tool_call_id_taken`]) and kept up to date by `append_locked`; `None`
    /// until then, and again whenever `history` is replaced wholesale.
    pub tool_call_ids: Option<std::collections::HashSet<String>>,
}

impl SessionState {
    /// Whether a tool call of this session already has `id`. A provider may reuse ids (some
    /// local servers number calls from `call_0` in every answer, a hostile one repeats them on
    /// purpose), and the session keys approvals, side-effect marks, results and resume on
    /// the id, so a new call only keeps its provider's id when no earlier call has it. While
    /// part of a restored history is still unparsed nothing can be ruled out, so every id
    /// counts as taken (a fresh one is always safe).
    pub fn tool_call_id_taken(&mut self, id: &str) -> bool {
        if self.unparsed.is_some() {
            return true;
        }
        let history = &self.history;
        self.tool_call_ids
            .get_or_insert_with(|| {
                history
                    .iter()
                    .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
                    .collect()
            })
            .contains(id)
    }
}

/// The stored messages at the start of a restored session's history that are not parsed yet.
pub struct UnparsedHistory {
    /// Message JSON in history order; the first message is at position 0.
    rows: Vec<String>,
    /// The stored display entry of each row (`""` for a message that shows as no entry), which
    /// `session/load` sends as they are while the rows are unparsed.
    displays: Vec<String>,
    /// What `session/list` shows while the rows are unparsed: the stored title and the time of
    /// the last stored change.
    pub title: Option<String>,
    pub updated_at: u64,
}

impl UnparsedHistory {
    /// How many messages are still unparsed.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The stored display entries of the unparsed messages, in order.
    pub fn displays(&self) -> &[String] {
        &self.displays
    }
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
    /// The event that asked, shown again by `session/load`.
    pub payload: serde_json::Value,
    /// Whether the client was shown the whole proposal; an edit of a cut one is refused.
    pub shown: ProposalShown,
    pub sender: oneshot::Sender<Resolution>,
}

/// How much of a proposed change its approval shows (see `engine::turn::fit_approval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProposalShown {
    /// Every byte of the arguments and the diff.
    Whole,
    /// Too large for one message: long parts are cut, each with a note.
    Cut,
}

/// State shared by the actor and the running turn.
pub struct SessionShared {
    pub id: String,
    pub workspace: Workspace,
    pub engine: Arc<EngineContext>,
    pub emitter: Emitter,
    pub state: Mutex<SessionState>,
    pub pending: Mutex<HashMap<String, PendingRequest>>,
    /// The durable store, when the face has one (`tandem serve` does; `tandem run` does not).
    pub store: Option<Store>,
    /// Reads and edits through the client's editor, when the face's client offers it (ACP's
    /// `fs/*`); `None` reads and writes the disk.
    pub client_fs: Option<Arc<dyn ClientFs>>,
    /// Held while the unparsed history is parsed, so two callers of
    /// [`SessionShared::complete_history`] parse it once.
    history_gate: tokio::sync::Mutex<()>,
}

impl SessionShared {
    /// Append a message to the canonical history. Every commit goes through here, before the
    /// event that announces it (invariant 8). Tool results gate what runs next, so they are
    /// committed with full durability.
    ///
    /// A message whose display entry is final already (see [`final_display`]) is stored with
    /// it, so the turn's end has no entry left to write for it: a turn that only talks ends
    /// with no display write at all.
    pub fn commit(&self, message: Message) {
        let mut state = lock(&self.state);
        self.append_locked(&mut state, message);
    }

    /// [`SessionShared::commit`] for a caller that holds the state lock already.
    pub fn append_locked(&self, state: &mut SessionState, message: Message) {
        let display = self
            .store
            .as_ref()
            .and_then(|_| final_display(state, &message));
        if display.is_some() {
            state.displays_stored += 1;
        }
        self.persist_message_with_display(&message, display);
        if let Some(ids) = &mut state.tool_call_ids {
            ids.extend(message.tool_calls.iter().map(|c| c.id.clone()));
        }
        state.history.push(message);
    }

    fn persist_message_with_display(&self, message: &Message, display: Option<String>) {
        if let (Some(store), Some(row)) = (&self.store, message_row(message, display)) {
            store.append_message_row(&self.id, row);
        }
    }

    pub fn emit(&self, turn_id: Option<&str>, event: Event) {
        self.emitter.emit(turn_id, event);
    }

    /// Store the display entries of the messages whose turn is over and whose entry was not
    /// written with their row (see [`SessionShared::commit`]), so the next resume sends them
    /// as they are; after a turn that made no tool call there is nothing left to write.
    /// Called as a turn ends, under the state lock, after the turn's messages were enqueued,
    /// so the rows exist when the writer updates them (which it does after the commit of what
    /// was queued with them: nothing waits for these rows).
    pub fn store_displays(&self, state: &mut SessionState) {
        let Some(store) = &self.store else {
            return;
        };
        // The unparsed messages were stored settled, so `displays_stored` is at least as many.
        let base = unparsed_len(state);
        let Some(from) = state.displays_stored.checked_sub(base) else {
            return;
        };
        let Some(messages) = state.history.get(from..) else {
            return;
        };
        let displays = display::settled_displays(state.displays_stored as u64, messages);
        state.displays_stored += displays.len();
        store.set_displays(&self.id, displays);
    }

    /// Parse the unparsed start of a restored session's history, on the blocking pool, and put
    /// it in front of the parsed messages. Every op that reads the history waits for this
    /// first; it is a no-op once done. A damaged row leaves the rows unparsed and is reported
    /// with its position on every call, so no op ever sees a history with a hole in it.
    pub async fn complete_history(&self) -> Result<(), SessionError> {
        let _gate = self.history_gate.lock().await;
        let Some(unparsed) = lock(&self.state).unparsed.take() else {
            return Ok(());
        };
        let UnparsedHistory {
            rows,
            displays,
            title,
            updated_at,
        } = unparsed;
        let id = self.id.clone();
        // Shared with the parsing thread so the rows survive a parse that fails or panics.
        let rows = Arc::new(rows);
        let parsing = rows.clone();
        let parsed = tokio::task::spawn_blocking(move || parse_history(&parsing, 0)).await;
        let mut state = lock(&self.state);
        let why = match parsed {
            Ok(Ok(mut prefix)) => {
                prefix.append(&mut state.history);
                state.history = prefix;
                state.tool_call_ids = None;
                return Ok(());
            }
            Ok(Err((position, why))) => {
                format!("has a damaged message at position {position} ({why})")
            }
            Err(e) => format!("could not have its history parsed (the parsing task failed: {e})"),
        };
        state.unparsed = Some(UnparsedHistory {
            rows: Arc::try_unwrap(rows).unwrap_or_else(|shared| shared.as_ref().clone()),
            displays,
            title,
            updated_at,
        });
        Err(SessionError::HistoryDamaged(format!(
            "session {id} {why}, so its history cannot be sent to a model; session/load still shows it, start a new session to go on"
        )))
    }

    /// Record that a side effect (a write or a command) is about to run and wait until that is
    /// durable, so a crash during it is reported as interrupted and never silently re-run.
    ///
    /// Fails closed: when the record cannot be made durable (the store cannot write, or an
    /// earlier change of this session was lost), the side effect must not run, and the error
    /// says why. A session without a store has nothing to record.
    pub async fn before_side_effect(&self, tool_call_id: &str, name: &str) -> Result<(), String> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        if let Some(cause) = store.unavailable(&self.id) {
            return Err(cause);
        }
        store.tool_started(&self.id, tool_call_id, name);
        if let Err(e) = store.session_barrier(&self.id, Durability::Full).await {
            tracing::error!("cannot record that {tool_call_id} starts: {e}");
            return Err(e.cause());
        }
        // The barrier's own batch may have committed while the row's batch failed or the row
        // was refused: the session's state says which.
        match store.unavailable(&self.id) {
            Some(cause) => Err(cause),
            None => Ok(()),
        }
    }

    /// Why this session's changes cannot be saved, if they cannot (see [`Store::unavailable`]).
    pub fn store_unavailable(&self) -> Option<String> {
        self.store.as_ref().and_then(|s| s.unavailable(&self.id))
    }

    /// Make the store hold everything this session holds before an op proceeds: a no-op while
    /// the store is healthy; after a failed commit, write the rows the store lost (one
    /// transaction) and accept new work again, or answer `StoreUnavailable` while it still
    /// cannot write. So a session never goes on with work that a restart would forget.
    pub async fn ensure_stored(&self) -> Result<(), SessionError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        if store.unavailable(&self.id).is_none() {
            return Ok(());
        }
        // Queued under the state lock: a message the turn appends after this snapshot is
        // queued after the resync, so the store gets every message exactly once, in order.
        let resynced = {
            let state = lock(&self.state);
            let title = match &state.unparsed {
                Some(unparsed) => unparsed.title.clone(),
                None => state
                    .history
                    .iter()
                    .find(|m| m.role == Role::User)
                    .map(|m| m.text().chars().take(80).collect()),
            };
            let record = SessionRecord {
                id: self.id.clone(),
                cwd: self.workspace.roots()[0].display().to_string(),
                model: state.model.clone(),
                mode: mode_name(state.mode).to_owned(),
                title,
                created_at: now_ms(),
                updated_at: now_ms(),
                allow_network: state.allow_network,
            };
            // A restored session's unparsed rows came from the store, so they are there.
            let rows: Vec<MessageRow> = state
                .history
                .iter()
                .filter_map(|message| message_row(message, None))
                .collect();
            let first_position = unparsed_len(&state) as u64;
            store.resync(record, rows, first_position, self.emitter.durable_seq())
        };
        match resynced.await {
            Ok(()) => {
                tracing::info!(session = %self.id, "the session store writes again; the session's lost changes are saved");
                Ok(())
            }
            Err(e) => Err(SessionError::StoreUnavailable(e.cause())),
        }
    }

    pub fn after_side_effect(&self, tool_call_id: &str) {
        if let Some(store) = &self.store {
            store.tool_finished(&self.id, tool_call_id);
        }
    }

    pub fn persist_pending(
        &self,
        request_id: &str,
        kind: PendingKind,
        tool_call_id: &str,
        turn_id: &str,
        payload: &serde_json::Value,
    ) {
        if let Some(store) = &self.store {
            store.upsert_pending(PendingRecord {
                session_id: self.id.clone(),
                request_id: request_id.to_owned(),
                tool_call_id: tool_call_id.to_owned(),
                kind: match kind {
                    PendingKind::Approval => "approval",
                    PendingKind::Question => "question",
                }
                .to_owned(),
                turn_id: turn_id.to_owned(),
                payload: payload.to_string(),
                decision: None,
                created_at: now_ms(),
            });
        }
    }

    pub fn persist_decision(&self, request_id: &str, decision: &serde_json::Value) {
        if let Some(store) = &self.store {
            store.resolve_pending(&self.id, request_id, decision.to_string());
        }
    }

    pub fn persist_rule(&self, kind: &str, value: &str) {
        if let Some(store) = &self.store {
            store.add_rule(
                &self.id,
                RuleRecord {
                    kind: kind.to_owned(),
                    value: value.to_owned(),
                },
            );
        }
    }

    /// Add one request's usage to the model's totals, in memory and in the store.
    pub fn persist_usage(&self, model: &str, input: u64, output: u64, cached: u64) {
        {
            let mut state = lock(&self.state);
            let index = match state.usage.iter().position(|u| u.model == model) {
                Some(index) => index,
                None => {
                    state.usage.push(crate::store::UsageTotals {
                        model: model.to_owned(),
                        ..Default::default()
                    });
                    state.usage.len() - 1
                }
            };
            let totals = &mut state.usage[index];
            totals.input_tokens += input;
            totals.output_tokens += output;
            totals.cached_tokens += cached;
        }
        if let Some(store) = &self.store {
            store.record_usage(&self.id, model, input, output, cached);
        }
    }

    pub fn withdraw_pending_rows(&self, turn_id: &str) {
        if let Some(store) = &self.store {
            store.delete_pending_for_turn(&self.id, turn_id);
        }
    }

    fn persist_session_fields(&self, model: Option<&str>, mode: Option<Mode>, title: Option<&str>) {
        if let Some(store) = &self.store {
            store.update_session(&self.id, model, mode.map(mode_name), title, now_ms());
        }
    }
}

/// What the `network` notice says.
pub fn network_notice(allow: bool) -> &'static str {
    if allow {
        "Network access allowed by the user: this session's commands may now use the network"
    } else {
        "Network access turned off: this session's commands run without network"
    }
}

pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
        Role::Notice => "notice",
    }
}

pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Ask => "ask",
        Mode::AutoEdit => "autoEdit",
        Mode::Plan => "plan",
        Mode::FullAuto => "fullAuto",
    }
}

pub fn parse_mode(text: &str) -> Option<Mode> {
    match text {
        "ask" => Some(Mode::Ask),
        "autoEdit" => Some(Mode::AutoEdit),
        "plan" => Some(Mode::Plan),
        "fullAuto" => Some(Mode::FullAuto),
        _ => None,
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

fn ordered<T: Send + 'static>(shared: &Arc<SessionShared>, reply: Reply<T>) -> Reply<T> {
    if shared.store.is_none() {
        return reply;
    }
    let shared = shared.clone();
    Box::new(move |result| shared.emitter.after_queued(Box::new(move || reply(result))))
}

fn order_replies(shared: &Arc<SessionShared>, op: Op) -> Op {
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
            reply,
        } => Op::Approve {
            request_id,
            decision,
            message,
            edited_content,
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
    /// Reads and edits through the client (see [`SessionShared::client_fs`]).
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
            mode: mode_name(new.mode).to_owned(),
            title: None,
            created_at: now,
            updated_at: now,
            allow_network: false,
        });
    }
    let state = SessionState {
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

/// What a restored session must do first: finish the tool calls its crashed turn left open.
pub struct Resume {
    pub turn_id: String,
    pub calls: Vec<crate::engine::history::ToolCallRecord>,
    /// Decisions and open requests recorded before the crash, by tool call id.
    pub recorded: HashMap<String, PendingRecord>,
}

#[allow(clippy::too_many_arguments)]
fn start_actor(
    engine: Arc<EngineContext>,
    sink: Arc<dyn EventSink>,
    id: String,
    workspace: Workspace,
    store: Option<Store>,
    client_fs: Option<Arc<dyn ClientFs>>,
    state: SessionState,
    last_seq: u64,
    resume: Option<Resume>,
) -> SessionHandle {
    let shared = Arc::new(SessionShared {
        id: id.clone(),
        workspace,
        engine,
        emitter: Emitter::new(id, last_seq, sink, store.clone()),
        state: Mutex::new(state),
        pending: Mutex::new(HashMap::new()),
        store,
        client_fs,
        history_gate: tokio::sync::Mutex::new(()),
    });
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
        match rule.kind.as_str() {
            "tool" => rules.tools.push(rule.value.clone()),
            "commandPrefix" => rules.command_prefixes.push(rule.value.clone()),
            _ => {}
        }
    }
    let model = if engine.config.model(&record.model).is_some() {
        record.model.clone()
    } else {
        engine.config.default_model.clone()
    };
    let mode = parse_mode(&record.mode).unwrap_or(Mode::Ask);

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
    let state = SessionState {
        history,
        unparsed: (!rows.is_empty()).then(|| UnparsedHistory {
            rows,
            displays: stored_displays,
            title: record.title.clone(),
            updated_at: record.updated_at,
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

/// Histories at least this long are parsed on two threads; below it a second thread costs
/// more than it saves.
const PARALLEL_PARSE_MIN: usize = 1_000;

/// Parse stored message rows into history messages, on the blocking pool (never on a runtime
/// worker: a long session takes tens of milliseconds). A long history is cut in two halves
/// that parse on two threads. A damaged row is reported with its position in the session,
/// `first_position` being the position of `rows[0]`.
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

fn parse_history(rows: &[String], first_position: usize) -> Result<Vec<Message>, (usize, String)> {
    fn parse(offset: usize, rows: &[String]) -> Result<Vec<Message>, (usize, String)> {
        rows.iter()
            .enumerate()
            .map(|(i, json)| serde_json::from_str(json).map_err(|e| (offset + i, e.to_string())))
            .collect()
    }
    let two_cores = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    if rows.len() < PARALLEL_PARSE_MIN || !two_cores {
        return parse(first_position, rows);
    }
    let (head, tail) = rows.split_at(rows.len() / 2);
    let offset = first_position + head.len();
    std::thread::scope(|scope| {
        let tail = scope.spawn(move || parse(offset, tail));
        let mut history = parse(first_position, head)?;
        let tail = tail
            .join()
            .map_err(|_| (offset, "the parsing thread panicked".to_owned()))??;
        history.extend(tail);
        Ok(history)
    })
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
    shared: Arc<SessionShared>,
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
                reply,
            } => {
                let cut = edited_content.is_some()
                    && lock(&shared.pending)
                        .get(&request_id)
                        .is_some_and(|p| p.shown == ProposalShown::Cut);
                if cut {
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
/// messages only here, see [`SessionShared::complete_history`]); `None` when the history is
/// damaged and the op has been answered with that error.
async fn op_with_history(shared: &Arc<SessionShared>, op: Op) -> Option<Op> {
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

fn resume_turn(shared: &Arc<SessionShared>, resume: Resume) -> RunningTurn {
    turn::announce(shared, &resume.turn_id);
    let cancel = CancellationToken::new();
    let join = tokio::spawn(turn::resume_turn(shared.clone(), resume, cancel.clone()));
    RunningTurn { cancel, join }
}

fn start_turn(shared: &Arc<SessionShared>, turn_id: String) -> RunningTurn {
    turn::announce(shared, &turn_id);
    let cancel = CancellationToken::new();
    let join = tokio::spawn(turn::run_turn(shared.clone(), turn_id, cancel.clone()));
    RunningTurn { cancel, join }
}

/// Marks the error notice of a turn that a provider error ended (`meta.display.reason`).
pub const PROVIDER_ERROR_REASON: &str = "providerError";

/// `retry` is for recovering from a provider error: the history must end in an error notice,
/// looking through model switches (switching model and then retrying is the intended recovery).
pub fn retry_allowed(history: &[Message]) -> Result<(), String> {
    let last = history
        .iter()
        .rev()
        .find(|m| m.notice != Some(NoticeKind::ModelSwitch));
    let provider_error = |m: &Message| {
        m.notice == Some(NoticeKind::Error)
            && m.meta
                .display
                .as_ref()
                .and_then(|d| d.get("reason"))
                .and_then(serde_json::Value::as_str)
                == Some(PROVIDER_ERROR_REASON)
    };
    match last {
        Some(m) if provider_error(m) => Ok(()),
        Some(_) => Err("retry is only for a turn that ended in a provider error, and the last turn did not; send `prompt` instead".to_owned()),
        None => Err("the session has no turn to retry; send `prompt` first".to_owned()),
    }
}

/// Take the pending request `request_id` if it is of the expected kind.
fn take_pending(
    shared: &SessionShared,
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
    shared: &SessionShared,
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

/// How many messages of a restored session's history are still unparsed JSON.
fn unparsed_len(state: &SessionState) -> usize {
    state.unparsed.as_ref().map_or(0, UnparsedHistory::len)
}

/// The display entry of `message`, about to be appended, when it is final already: every
/// message before it has its entry stored (so none of them has a call waiting for a result)
/// and it neither makes a tool call nor answers one. Only a tool result changes another
/// message's entry, so such an entry is exactly what the turn's end would store for it.
fn final_display(state: &SessionState, message: &Message) -> Option<String> {
    let position = unparsed_len(state) + state.history.len();
    if state.displays_stored != position
        || !message.tool_calls.is_empty()
        || message.tool_result.is_some()
    {
        return None;
    }
    display::settled_displays(position as u64, std::slice::from_ref(message))
        .pop()
        .map(|entry| entry.display)
}
