//! The conversation a session holds: its canonical history, model, mode, rules, steering
//! queue, pending requests and the journal of everything it persists. The session actor and
//! the running turn share one [`Conversation`]; the engine owns it, the session layer only
//! queues ops against it.
//!
//! Invariants: every message enters the history through [`Conversation::commit`] (or
//! `append_locked`), which enqueues its row before any event can announce it (invariant 8); a
//! side effect runs only after [`Conversation::before_side_effect`] made its start durable;
//! critical sections on `state` are short and never held across an `await`.
//! Does not: read ops, spawn tasks, or know any face.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

mod error;
mod rewind;
mod transitions;

pub use error::SessionError;

use super::display;
use super::emitter::Emitter;
use super::history::{now_ms, Message, NoticeKind, Role};
pub use super::pending::{
    DenyMemory, PendingKind, PendingRequest, ProposalShown, RecordedDecision, Resolution,
};
use super::EngineContext;
use crate::permissions::{PermissionRules, RuleKind};
use crate::protocol::{Event, Mode};
use crate::store::{Durability, MessageRow, PendingRecord, RuleRecord, SessionRecord, Store};
use crate::tools::client_fs::ClientFs;
use crate::workspace::Workspace;

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
/// Make room for one more message, growing a full history by an eighth instead of doubling it.
///
/// Why: a resumed session's history is parsed into a vector of exactly its length, and the
/// first message appended after would double it; at 5,000 messages that is 2.4 MB of room
/// no message uses. Growing by an eighth keeps appends amortized O(1) (the allocator moves a
/// vector this large by remapping its pages, not by copying) with at most an eighth unused.
fn grow_gently<T>(vector: &mut Vec<T>) {
    if vector.len() == vector.capacity() {
        vector.reserve_exact(vector.len() / 8 + 16);
    }
}

pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The mutable state of a session. Its fields are private to this module and its
/// [`transitions`], so the rest of the engine, the session actor and the faces change it only
/// through the methods that keep fields which belong together (an active turn and whether it
/// accepts steering, the history and its id index) consistent.
pub struct ConversationState {
    /// The canonical history; while `unparsed` is `Some`, only the messages after the unparsed
    /// ones (see [`Conversation::complete_history`]).
    history: Vec<Message>,
    /// A restored session's first messages, still as stored JSON: a resume answers without
    /// parsing them, and the actor parses them before the first op that needs the history.
    unparsed: Option<UnparsedHistory>,
    /// How many messages from the start of the history have their display entry stored
    /// (see [`display`]); a message appended right after them whose entry is final already
    /// is stored with it, the rest get theirs when the turn that wrote them ends.
    displays_stored: usize,
    model: String,
    mode: Mode,
    rules: PermissionRules,
    /// Steering messages waiting for the next safe point.
    steering: VecDeque<String>,
    /// The running turn, cleared by the turn itself as it announces `turnEnded`.
    active_turn: Option<String>,
    /// Whether `steer` is accepted: true from admission until the turn decides to end.
    accepting_steering: bool,
    /// Whether sandboxed commands may use the network: the user's choice, never the model's.
    allow_network: bool,
    /// Token usage per model, in the order the models were first used (mirrors the store).
    usage: Vec<crate::store::UsageTotals>,
    /// Every tool call id in `history`, built the first time a turn asks
    /// ([`ConversationState::tool_call_id_taken`]) and kept up to date by `append_locked`; `None`
    /// until then, and again whenever `history` is replaced wholesale.
    tool_call_ids: Option<std::collections::HashSet<String>>,
    /// The model's current plan (`update_plan`).
    plan: Vec<crate::protocol::PlanEntry>,
    /// The serialized view of the history's start for the provider and model of the last
    /// request (see [`crate::engine::outbound::cache`]); checked against `history` at every use.
    outbound: crate::engine::outbound::cache::OutboundCache,
}

/// What a conversation starts from: a new session's settings, or what `restore` read back.
pub struct ConversationStart {
    /// The parsed history (for a restored session, the messages after the unparsed ones).
    pub history: Vec<Message>,
    pub unparsed: Option<UnparsedHistory>,
    /// How many messages from the start of the history have their display entry stored.
    pub displays_stored: usize,
    pub model: String,
    pub mode: Mode,
    pub rules: PermissionRules,
    pub allow_network: bool,
    pub usage: Vec<crate::store::UsageTotals>,
    /// The turn a restored session resumes: it is active and accepts steering from the start.
    pub resumed_turn: Option<String>,
    /// The model's current plan.
    pub plan: Vec<crate::protocol::PlanEntry>,
}

impl ConversationState {
    fn new(start: ConversationStart) -> ConversationState {
        ConversationState {
            history: start.history,
            unparsed: start.unparsed,
            displays_stored: start.displays_stored,
            model: start.model,
            mode: start.mode,
            rules: start.rules,
            steering: VecDeque::new(),
            accepting_steering: start.resumed_turn.is_some(),
            active_turn: start.resumed_turn,
            allow_network: start.allow_network,
            usage: start.usage,
            tool_call_ids: None,
            plan: start.plan,
            outbound: Default::default(),
        }
    }

    /// Whether a tool call of this session already has `id`. A provider may reuse ids (some
    /// local servers number calls from `call_0` in every answer, a hostile one repeats them on
    /// purpose), and the session keys approvals, side-effect marks, results and resume on
    /// the id, so a new call only keeps its provider's id when no earlier call has it. While
    /// part of a restored history is still unparsed nothing can be ruled out, so every id
    /// counts as taken (a fresh one is always safe).
    fn tool_call_id_taken(&mut self, id: &str) -> bool {
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
    /// Stored rows (history order, the first at position 0) with their display entries.
    pub fn new(
        rows: Vec<String>,
        displays: Vec<String>,
        title: Option<String>,
        updated_at: u64,
    ) -> Self {
        UnparsedHistory {
            rows,
            displays,
            title,
            updated_at,
        }
    }

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

/// State shared by the actor and the running turn.
pub struct Conversation {
    pub id: String,
    pub workspace: Workspace,
    pub engine: Arc<EngineContext>,
    pub emitter: Emitter,
    /// Private to this module and [`transitions`]: everyone else, the turn loop included,
    /// changes it through the transitions and reads it through the query methods, so fields
    /// that must change together (an active turn and its steering) change together.
    state: Mutex<ConversationState>,
    /// The open approvals and questions, by request id; private like `state`.
    pending: Mutex<HashMap<String, PendingRequest>>,
    /// The durable store, when the face has one (`tandem serve` does; `tandem run` does not).
    pub store: Option<Store>,
    /// Reads and edits through the client's editor, when the face's client offers it (ACP's
    /// `fs/*`); `None` reads and writes the disk.
    pub client_fs: Option<Arc<dyn ClientFs>>,
    /// The session's MCP servers and their tools (an empty hub when it has none).
    pub mcp: Arc<crate::mcp::McpHub>,
    /// The session's hooks (see [`super::hooks`]).
    pub hooks: super::hooks::SessionHooks,
    /// Held while the unparsed history is parsed, so two callers of
    /// [`Conversation::complete_history`] parse it once.
    history_gate: tokio::sync::Mutex<()>,
    /// What the session's checkpoint walks saw (see [`super::checkpoint`]).
    checkpoints: Arc<super::checkpoint::CheckpointCache>,
}

/// The settings a face shows beside a conversation (ACP's config options, a load reply).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationSettings {
    pub model: String,
    pub mode: Mode,
    pub allow_network: bool,
}

/// What a session list shows of a conversation that has messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationSummary {
    /// The stored title, or the first prompt's first 80 characters.
    pub title: Option<String>,
    pub model: String,
    /// The time of the newest message, when one is known (ms since the epoch).
    pub updated_at: Option<u64>,
}

impl Conversation {
    /// A conversation with `state`, numbering its events after `last_seq`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: String,
        workspace: Workspace,
        engine: Arc<EngineContext>,
        sink: Arc<dyn super::emitter::EventSink>,
        store: Option<Store>,
        client_fs: Option<Arc<dyn ClientFs>>,
        mcp: Arc<crate::mcp::McpHub>,
        start: ConversationStart,
        last_seq: u64,
    ) -> Arc<Self> {
        Arc::new(Conversation {
            emitter: Emitter::new(id.clone(), last_seq, sink, store.clone()),
            id,
            workspace,
            engine,
            state: Mutex::new(ConversationState::new(start)),
            pending: Mutex::new(HashMap::new()),
            store,
            client_fs,
            mcp,
            hooks: Default::default(),
            history_gate: tokio::sync::Mutex::new(()),
            checkpoints: Arc::default(),
        })
    }

    /// The session's checkpoint recorder; `None` for a session without a store (nothing could
    /// keep what it records).
    pub fn recorder(&self) -> Option<super::checkpoint::Recorder> {
        Some(super::checkpoint::Recorder {
            session_id: self.id.clone(),
            store: self.store.clone()?,
            workspace: self.workspace.clone(),
            cache: self.checkpoints.clone(),
        })
    }

    /// The model, mode and network choice, read together.
    pub fn settings(&self) -> ConversationSettings {
        let state = lock(&self.state);
        ConversationSettings {
            model: state.model.clone(),
            mode: state.mode,
            allow_network: state.allow_network,
        }
    }

    /// A copy of the parsed history (complete only after [`Conversation::complete_history`]).
    pub fn history_snapshot(&self) -> Vec<Message> {
        lock(&self.state).history.clone()
    }

    /// Whether the provider's content filter stopped an answer of turn `turn_id` (the turn's
    /// messages are the newest ones while it ends).
    pub fn refused_in(&self, turn_id: &str) -> bool {
        lock(&self.state)
            .history
            .iter()
            .rev()
            .take_while(|m| m.meta.turn_id.as_deref() == Some(turn_id))
            .any(Message::is_refusal)
    }

    /// The events that asked the pending approvals and questions, to show them again.
    pub fn pending_payloads(&self) -> Vec<serde_json::Value> {
        lock(&self.pending)
            .values()
            .map(|request| request.payload.clone())
            .collect()
    }

    /// What a session list shows; `None` for a conversation nobody has prompted yet (it is
    /// not listed, as the store does not list it).
    pub fn summary(&self) -> Option<ConversationSummary> {
        let state = lock(&self.state);
        if state.history.is_empty() && state.unparsed.is_none() {
            return None;
        }
        // A restored session whose start is unparsed answers with what the store kept.
        let title = match &state.unparsed {
            Some(unparsed) => unparsed.title.clone(),
            None => state
                .history
                .iter()
                .find(|m| m.role == Role::User)
                .map(|m| m.text().chars().take(80).collect::<String>()),
        };
        let updated_at = state
            .history
            .last()
            .map(|m| m.meta.ts)
            .or(state.unparsed.as_ref().map(|u| u.updated_at));
        Some(ConversationSummary {
            title,
            model: state.model.clone(),
            updated_at,
        })
    }

    /// Run `view` on the session's [`display::LoadView`] under the state lock, so the history
    /// cannot change underneath: the one view both faces show as they open a session (native
    /// `session/load`, ACP's replay). A restored session's unparsed messages show their stored
    /// entries as they are, so opening a long session parses nothing. `view` must not block;
    /// callers run it on the blocking pool when it serializes or converts much.
    pub fn load_view<R>(&self, view: impl FnOnce(display::LoadView<'_>) -> R) -> R {
        let state = lock(&self.state);
        let stored = state
            .unparsed
            .as_ref()
            .map_or(&[][..], UnparsedHistory::displays)
            .iter()
            .filter(|entry| !entry.is_empty())
            .map(|entry| display::LoadEntry::Stored(entry));
        let computed = display::display_history(&state.history)
            .into_iter()
            .map(display::LoadEntry::Computed);
        view(display::LoadView {
            model: &state.model,
            mode: state.mode,
            running: state.active_turn.is_some(),
            allow_network: state.allow_network,
            usage: &state.usage,
            plan: &state.plan,
            entries: stored.chain(computed).collect(),
        })
    }

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

    /// [`Conversation::commit`] for a caller that holds the state lock already.
    fn append_locked(&self, state: &mut ConversationState, message: Message) {
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
        grow_gently(&mut state.history);
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
    /// written with their row (see [`Conversation::commit`]), so the next resume sends them
    /// as they are; after a turn that made no tool call there is nothing left to write.
    /// Called as a turn ends, under the state lock, after the turn's messages were enqueued,
    /// so the rows exist when the writer updates them (which it does after the commit of what
    /// was queued with them: nothing waits for these rows).
    fn store_displays(&self, state: &mut ConversationState) {
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
                // Exactly: `append` alone would double the parsed vector (see `grow_gently`).
                prefix.reserve_exact(state.history.len() + prefix.len() / 8 + 16);
                prefix.append(&mut state.history);
                state.history = prefix;
                state.tool_call_ids = None;
                drop(state);
                drop(rows);
                // The rows' JSON was freed on this thread and the parse's on the blocking pool.
                tokio::task::spawn_blocking(crate::engine::memory::release_freed_memory);
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
                mode: state.mode.as_str().to_owned(),
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
                kind: kind.as_str().to_owned(),
                turn_id: turn_id.to_owned(),
                payload: payload.to_string(),
                decision: None,
                created_at: now_ms(),
            });
        }
    }

    pub fn persist_decision(&self, request_id: &str, decision: &RecordedDecision) {
        let Some(store) = &self.store else {
            return;
        };
        match serde_json::to_string(decision) {
            Ok(json) => store.resolve_pending(&self.id, request_id, json),
            // Plain strings and an enum: cannot fail; if it ever did, a resume asks again.
            Err(e) => tracing::error!("cannot serialize the decision of {request_id}: {e}"),
        }
    }

    /// Add a rule to the session's rules and persist it, unless the session has it already
    /// (the check and the add are one step under the lock).
    pub fn remember_rule(&self, kind: RuleKind, value: String) {
        if !lock(&self.state).rules.add(kind, value.clone()) {
            return;
        }
        if let Some(store) = &self.store {
            store.add_rule(
                &self.id,
                RuleRecord {
                    kind: kind.as_str().to_owned(),
                    value,
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

    pub fn persist_session_fields(
        &self,
        model: Option<&str>,
        mode: Option<Mode>,
        title: Option<&str>,
    ) {
        if let Some(store) = &self.store {
            store.update_session(&self.id, model, mode.map(Mode::as_str), title, now_ms());
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

/// What a restored session must do first: finish the tool calls its crashed turn left open.
pub struct Resume {
    pub turn_id: String,
    pub calls: Vec<crate::engine::history::ToolCallRecord>,
    /// Decisions and open requests recorded before the crash, by tool call id.
    pub recorded: HashMap<String, PendingRecord>,
}

/// Histories at least this long are parsed on two threads; below it a second thread costs
/// more than it saves.
const PARALLEL_PARSE_MIN: usize = 1_000;

/// Parse stored message rows into history messages, on the blocking pool (never on a runtime
/// worker: a long session takes tens of milliseconds). A long history is cut in two halves
/// that parse on two threads. A damaged row is reported with its position in the session,
/// `first_position` being the position of `rows[0]`.
pub fn parse_history(
    rows: &[String],
    first_position: usize,
) -> Result<Vec<Message>, (usize, String)> {
    // Vectors of exactly the rows' length: collecting through `Result` would grow by doubling.
    fn parse(offset: usize, rows: &[String]) -> Result<Vec<Message>, (usize, String)> {
        let mut messages = Vec::with_capacity(rows.len());
        for (i, json) in rows.iter().enumerate() {
            messages.push(serde_json::from_str(json).map_err(|e| (offset + i, e.to_string()))?);
        }
        Ok(messages)
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
        history.reserve_exact(tail.len());
        history.extend(tail);
        Ok(history)
    })
}

/// `retry` is for recovering from a provider error: the history must end in an error notice,
/// looking through model switches (switching model and then retrying is the intended recovery).
pub fn retry_allowed(history: &[Message]) -> Result<(), String> {
    let last = history
        .iter()
        .rev()
        .find(|m| m.notice != Some(NoticeKind::ModelSwitch));
    match last {
        Some(m) if m.provider_error().is_some() => Ok(()),
        Some(_) => Err("retry is only for a turn that ended in a provider error, and the last turn did not; send `prompt` instead".to_owned()),
        None => Err("the session has no turn to retry; send `prompt` first".to_owned()),
    }
}

/// How many messages of a restored session's history are still unparsed JSON.
fn unparsed_len(state: &ConversationState) -> usize {
    state.unparsed.as_ref().map_or(0, UnparsedHistory::len)
}

/// The display entry of `message`, about to be appended, when it is final already: every
/// message before it has its entry stored (so none of them has a call waiting for a result)
/// and it neither makes a tool call nor answers one. Only a tool result changes another
/// message's entry, so such an entry is exactly what the turn's end would store for it.
fn final_display(state: &ConversationState, message: &Message) -> Option<String> {
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
