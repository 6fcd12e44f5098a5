//! The durable store: sessions, their canonical history, events, the approvals inbox, rules and
//! usage in one SQLite database, written by one dedicated thread.
//!
//! A [`Store`] is a cheap handle to that thread. Writes are enqueued and return at once, so no
//! SQLite call ever blocks a tokio worker; reads are enqueued too and answered through a
//! oneshot, so a read sees every write enqueued before it. The thread commits what is queued
//! in batches (one transaction each) and runs each command's `after_commit` callback only once
//! the batch is committed, in enqueue order: an event announced from such a callback is never
//! ahead of the rows it announces (invariant 8). Batches holding a row that gates a side effect
//! (a tool about to run, a tool result, an approval decision) are committed with
//! `synchronous=FULL`, which survives power loss; the rest use NORMAL, which in WAL mode
//! survives a killed process.
//!
//! A batch that cannot be committed (disk full, a lock held by another program, an I/O error)
//! is rolled back whole, and every session with a write in it becomes *diverged*: its later
//! writes are refused ([`Store::unavailable`]) until [`Store::resync`] writes the missing tail,
//! so the rows of a session are always a prefix of what it did, never a prefix with holes.

mod checkpoints;
mod data_dir;
mod records;
mod schema;
mod trust;
mod writer;

pub use checkpoints::{CheckpointFileRecord, PendingScan};
pub use data_dir::{default_database_path, prepare_data_dir};
pub use records::*;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::{JoinHandle, ThreadId};

use rusqlite::Connection;
use tokio::sync::oneshot;

/// How hard a commit must try. `Full` is for rows that gate a side effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Survives the process being killed (WAL with `synchronous=NORMAL`).
    Normal,
    /// Also survives power loss: the WAL is fsynced before the batch counts as committed.
    Full,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the session database at {}: {source}; check that --data-dir / TANDEM_HOME points to a writable directory with free space", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("the session database failed: {0}; check free disk space and the permissions of the data directory (RUST_LOG=tandem=debug shows more)")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the session store has shut down; restart tandem")]
    Closed,
    #[error("the session database is unusable: {0}; move the file aside (tandem creates a new one) or restore a backup")]
    Corrupt(String),
    /// An earlier batch of this session could not be committed, so the store holds only a
    /// prefix of what the session did; its writes are refused until [`Store::resync`] wrote
    /// the rest (see [`Store::unavailable`]).
    #[error("the session store could not save this session's last changes ({0}); free disk space or end the program that holds the database lock, then try again")]
    Unavailable(String),
}

impl StoreError {
    /// A copy of this error for every reader of a failed batch; `rusqlite::Error` is not
    /// `Clone`, so variants other than a plain SQLite failure keep only their message.
    fn duplicate(&self) -> StoreError {
        match self {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(code, message)) => {
                StoreError::Sqlite(rusqlite::Error::SqliteFailure(*code, message.clone()))
            }
            StoreError::Sqlite(other) => StoreError::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
                Some(other.to_string()),
            )),
            StoreError::Open { path, source } => StoreError::Open {
                path: path.clone(),
                source: source.to_string().into(),
            },
            StoreError::Closed => StoreError::Closed,
            StoreError::Corrupt(message) => StoreError::Corrupt(message.clone()),
            StoreError::Unavailable(message) => StoreError::Unavailable(message.clone()),
        }
    }

    /// The cause alone, for messages that add their own next step: SQLite's own words
    /// ("database or disk is full", "database is locked") rather than the advice around them.
    pub fn cause(&self) -> String {
        match self {
            StoreError::Sqlite(source) => source.to_string(),
            StoreError::Unavailable(cause) => cause.clone(),
            other => other.to_string(),
        }
    }
}

/// A callback run on the writer thread once everything enqueued up to it is committed.
///
/// It must be quick and must not wait on the store (that would deadlock the writer); sending
/// into a channel or writing to the event sink is the intended use.
pub type AfterCommit = Box<dyn FnOnce() + Send>;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// One unit of work for the writer thread, applied in arrival order.
enum Command {
    CreateSession(SessionRecord),
    UpdateSession {
        id: String,
        model: Option<String>,
        mode: Option<String>,
        title: Option<String>,
        updated_at: u64,
    },
    SetNetwork {
        id: String,
        allow: bool,
    },
    /// The model's current plan (JSON), `None` for none.
    SetPlan {
        id: String,
        plan: Option<String>,
    },
    AppendMessage {
        session_id: String,
        row: MessageRow,
    },
    SetDisplays {
        session_id: String,
        displays: Vec<StoredDisplay>,
    },
    RecordEvent {
        session_id: String,
        seq: u64,
        turn_id: Option<String>,
        event_type: String,
        json: Option<String>,
        /// With a row: the `last_seq` written with it; `None` writes `seq`.
        reserve_to: Option<u64>,
        after_commit: Option<AfterCommit>,
    },
    UpsertPending(PendingRecord),
    ResolvePending {
        session_id: String,
        request_id: String,
        decision_json: String,
    },
    DeletePendingForTurn {
        session_id: String,
        turn_id: String,
    },
    AddRule {
        session_id: String,
        rule: RuleRecord,
    },
    RecordUsage {
        session_id: String,
        model: String,
        input: u64,
        output: u64,
        cached: u64,
    },
    ToolStarted {
        session_id: String,
        tool_call_id: String,
        name: String,
    },
    ToolFinished {
        session_id: String,
        tool_call_id: String,
    },
    /// Set the session's `last_seq` high-water mark (a reservation of seqs to come).
    ReserveSeq {
        session_id: String,
        up_to: u64,
    },
    Barrier {
        durability: Durability,
        /// The session it waits for, if any: refused while that session is diverged.
        session_id: Option<String>,
        reply: Reply<()>,
    },
    ListSessions {
        cwd: Option<String>,
        reply: Reply<Vec<SessionRecord>>,
    },
    LoadSession {
        id: String,
        reply: Reply<Option<LoadedSession>>,
    },
    EventsSince {
        session_id: String,
        after_seq: u64,
        limit: Option<usize>,
        reply: Reply<Vec<StoredEvent>>,
    },
    IntegrityCheck {
        reply: Reply<String>,
    },
    /// Remember that the user trusted workspace MCP server `server` of `cwd` as `definition`.
    TrustMcp {
        cwd: String,
        server: String,
        definition: String,
        trusted_at: u64,
        reply: Reply<()>,
    },
    /// The trusted workspace MCP servers of `cwd`: `(server, definition)`.
    TrustedMcp {
        cwd: String,
        reply: Reply<Vec<(String, String)>>,
    },
    /// Remember that the user trusted the project hooks of `cwd` whose content hashes to
    /// `content_hash`.
    TrustHooks {
        cwd: String,
        content_hash: String,
        trusted_at: u64,
        reply: Reply<()>,
    },
    /// The content hash of the project hooks of `cwd` the user trusted, if any.
    TrustedHooks {
        cwd: String,
        reply: Reply<Option<String>>,
    },
    /// Bring a diverged session's rows up to date with what it holds in memory, in one
    /// transaction, and accept its writes again (see [`Store::resync`]).
    Resync {
        record: SessionRecord,
        /// The session's messages from position `first_position` on; rows the store has
        /// already are skipped.
        rows: Vec<MessageRow>,
        first_position: u64,
        last_seq: u64,
        reply: Reply<()>,
    },
    /// Checkpoint work of one session (see `checkpoints.rs`).
    Checkpoint {
        session_id: String,
        op: checkpoints::CheckpointOp,
    },
}

impl Command {
    /// The session a write belongs to; `None` for reads, barriers and callbacks.
    fn session_id(&self) -> Option<&str> {
        match self {
            Command::CreateSession(r) => Some(&r.id),
            Command::UpdateSession { id, .. }
            | Command::SetNetwork { id, .. }
            | Command::SetPlan { id, .. } => Some(id),
            Command::AppendMessage { session_id, .. }
            | Command::SetDisplays { session_id, .. }
            | Command::RecordEvent { session_id, .. }
            | Command::ResolvePending { session_id, .. }
            | Command::DeletePendingForTurn { session_id, .. }
            | Command::AddRule { session_id, .. }
            | Command::RecordUsage { session_id, .. }
            | Command::ToolStarted { session_id, .. }
            | Command::ToolFinished { session_id, .. }
            | Command::ReserveSeq { session_id, .. }
            | Command::Checkpoint { session_id, .. } => Some(session_id),
            Command::UpsertPending(r) => Some(&r.session_id),
            Command::Resync { record, .. } => Some(&record.id),
            Command::Barrier { .. }
            | Command::ListSessions { .. }
            | Command::LoadSession { .. }
            | Command::EventsSince { .. }
            | Command::IntegrityCheck { .. }
            | Command::TrustMcp { .. }
            | Command::TrustedMcp { .. }
            | Command::TrustHooks { .. }
            | Command::TrustedHooks { .. } => None,
        }
    }
}

/// Sessions whose writes failed, with the error, shared by the writer (which fills and clears
/// it) and every handle (which asks it before a side effect and before each op).
pub(crate) type Diverged = Arc<Mutex<HashMap<String, String>>>;

/// A cheap, cloneable handle to the store's writer thread.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    sender: Option<mpsc::Sender<Command>>,
    diverged: Diverged,
    thread: Option<JoinHandle<()>>,
    thread_id: ThreadId,
    path: Option<PathBuf>,
}

impl Drop for Inner {
    /// The last handle is gone: close the queue, then wait for the writer to commit what is
    /// still queued, so a clean shutdown loses nothing even if the process exits right after.
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            // A handle captured by an `after_commit` callback is dropped on the writer thread
            // itself; joining there would wait forever, and the thread ends on its own.
            if std::thread::current().id() != self.thread_id && thread.join().is_err() {
                tracing::error!("the session store writer thread panicked while shutting down");
            }
        }
    }
}

impl Store {
    /// Open (or create) the database at `path`, creating its parent directories and running
    /// the migrations before returning. Call it at startup or from `spawn_blocking`: it does
    /// file I/O.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let open_error = |source: Box<dyn std::error::Error + Send + Sync>| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| open_error(Box::new(e)))?;
        }
        let conn = Connection::open(path).map_err(|e| open_error(Box::new(e)))?;
        Store::start(conn, Some(path.to_path_buf()))
    }

    /// A private in-memory database, for tests.
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let conn = Connection::open_in_memory().map_err(|e| StoreError::Open {
            path: PathBuf::from(":memory:"),
            source: Box::new(e),
        })?;
        Store::start(conn, None)
    }

    fn start(mut conn: Connection, path: Option<PathBuf>) -> Result<Store, StoreError> {
        let shown = path.clone().unwrap_or_else(|| PathBuf::from(":memory:"));
        let wrap = |e: StoreError| match e {
            // A newer schema or a damaged file is not an open failure the user can fix by
            // pointing elsewhere, so it keeps its own message.
            StoreError::Corrupt(_) => e,
            StoreError::Sqlite(source)
                if matches!(
                    source.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)
                ) =>
            {
                StoreError::Corrupt(format!("{}: {source}", shown.display()))
            }
            StoreError::Sqlite(source) => StoreError::Open {
                path: shown.clone(),
                source: Box::new(source),
            },
            other => other,
        };
        schema::configure(&conn).map_err(|e| wrap(StoreError::Sqlite(e)))?;
        schema::migrate(&mut conn).map_err(wrap)?;
        let (sender, receiver) = mpsc::channel();
        let diverged = Diverged::default();
        let writer_diverged = diverged.clone();
        let thread = std::thread::Builder::new()
            .name("tandem-store".to_owned())
            .spawn(move || writer::run(conn, receiver, writer_diverged))
            .map_err(|e| StoreError::Open {
                path: shown.clone(),
                source: Box::new(e),
            })?;
        let thread_id = thread.thread().id();
        Ok(Store {
            inner: Arc::new(Inner {
                sender: Some(sender),
                diverged,
                thread: Some(thread),
                thread_id,
                path,
            }),
        })
    }

    /// Why this session's writes are refused, if they are: a batch holding one of them failed
    /// to commit (disk full, the database locked by another program, an I/O error), so the
    /// store has only a prefix of the session. Until [`Store::resync`] succeeds, every write
    /// of the session is skipped, so the stored rows never get a hole in the middle.
    pub fn unavailable(&self, session_id: &str) -> Option<String> {
        self.inner
            .diverged
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(session_id)
            .cloned()
    }

    /// Write what a diverged session holds and the store lacks, in one transaction: its
    /// session row (inserted if the failed batch held it, else updated), the message rows from
    /// the first one the store is missing (`rows` start at `first_position`), and a `last_seq`
    /// at least `last_seq`, so a restart never hands out a `seq` a client saw. On success the
    /// session's writes are accepted again; on failure it stays refused and the error says why.
    ///
    /// The command is queued when this is called, not when the future is first polled, so a
    /// caller that holds the session's state lock while calling it knows that no later write
    /// of the session is queued ahead of it.
    pub fn resync(
        &self,
        record: SessionRecord,
        rows: Vec<MessageRow>,
        first_position: u64,
        last_seq: u64,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send + 'static {
        let (reply, answer) = oneshot::channel();
        let queued = self.inner.sender.as_ref().is_some_and(|sender| {
            sender
                .send(Command::Resync {
                    record,
                    rows,
                    first_position,
                    last_seq,
                    reply,
                })
                .is_ok()
        });
        async move {
            if !queued {
                return Err(StoreError::Closed);
            }
            answer.await.map_err(|_| StoreError::Closed)?
        }
    }

    /// The database file, `None` for an in-memory store.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    fn send(&self, command: Command) {
        let Some(sender) = &self.inner.sender else {
            return;
        };
        if let Err(mpsc::SendError(command)) = sender.send(command) {
            // Only reachable if the writer thread died; keep the session alive rather than
            // swallowing its events, and say loudly that nothing is being saved.
            tracing::error!("the session store writer is gone; this change is not saved");
            if let Command::RecordEvent {
                after_commit: Some(callback),
                ..
            } = command
            {
                callback();
            }
        }
    }

    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        let Some(sender) = &self.inner.sender else {
            return Err(StoreError::Closed);
        };
        sender.send(make(reply)).map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    pub fn create_session(&self, record: SessionRecord) {
        self.send(Command::CreateSession(record));
    }

    /// Change the given fields (`None` keeps a field) and set `updated_at`.
    pub fn update_session(
        &self,
        id: &str,
        model: Option<&str>,
        mode: Option<&str>,
        title: Option<&str>,
        updated_at: u64,
    ) {
        self.send(Command::UpdateSession {
            id: id.to_owned(),
            model: model.map(str::to_owned),
            mode: mode.map(str::to_owned),
            title: title.map(str::to_owned),
            updated_at,
        });
    }

    /// Record the user's network choice for the session's commands.
    pub fn set_network(&self, id: &str, allow: bool) {
        self.send(Command::SetNetwork {
            id: id.to_owned(),
            allow,
        });
    }

    /// Record the model's current plan (JSON of its entries; `None` when it has none).
    pub fn set_plan(&self, id: &str, plan: Option<String>) {
        self.send(Command::SetPlan {
            id: id.to_owned(),
            plan,
        });
    }

    /// Append a message at the next position of the session's history.
    pub fn append_message(
        &self,
        session_id: &str,
        message_id: &str,
        turn_id: Option<&str>,
        role: &str,
        json: String,
        durability: Durability,
    ) {
        self.append_message_row(
            session_id,
            MessageRow {
                message_id: message_id.to_owned(),
                turn_id: turn_id.map(str::to_owned),
                role: role.to_owned(),
                json,
                display: None,
                durability,
            },
        );
    }

    /// Append a message at the next position of the session's history, with its display entry
    /// when the caller knows it is final (see [`MessageRow::display`]).
    pub fn append_message_row(&self, session_id: &str, row: MessageRow) {
        self.send(Command::AppendMessage {
            session_id: session_id.to_owned(),
            row,
        });
    }

    /// Store the display entries of messages whose turn has ended, so a later load can send
    /// them without parsing the messages. An entry whose (position, message id) pair matches
    /// no row is skipped: the row then simply has no stored entry and a load parses it.
    pub fn set_displays(&self, session_id: &str, displays: Vec<StoredDisplay>) {
        if displays.is_empty() {
            return;
        }
        self.send(Command::SetDisplays {
            session_id: session_id.to_owned(),
            displays,
        });
    }

    /// Persist an event (when `json` is `Some`) and run `after_commit` once it and everything
    /// enqueued before it is committed. With `json` `None` (streamed deltas) nothing is
    /// written, but the callback keeps its place in the order.
    ///
    /// A stored event also sets the session's `last_seq` to its `seq`: it releases whatever
    /// [`Store::reserve_seq`] reserved beyond it, so a session restored after a clean stop, or
    /// after a crash at a stored event, numbers on without a gap.
    pub fn record_event(
        &self,
        session_id: &str,
        seq: u64,
        turn_id: Option<&str>,
        event_type: &str,
        json: Option<String>,
        after_commit: Option<AfterCommit>,
    ) {
        self.send(Command::RecordEvent {
            session_id: session_id.to_owned(),
            seq,
            turn_id: turn_id.map(str::to_owned),
            event_type: event_type.to_owned(),
            json,
            reserve_to: None,
            after_commit,
        });
    }

    /// [`Store::record_event`] for an event with a row that also reserves the `seq`s after it,
    /// up to `reserve_to`, in the same transaction: for an event that a stream follows at once
    /// (`turnStarted`), so the stream's first delta need not wait for a reservation of its own.
    #[allow(clippy::too_many_arguments)]
    pub fn record_event_reserving(
        &self,
        session_id: &str,
        seq: u64,
        turn_id: Option<&str>,
        event_type: &str,
        json: String,
        reserve_to: u64,
        after_commit: Option<AfterCommit>,
    ) {
        self.send(Command::RecordEvent {
            session_id: session_id.to_owned(),
            seq,
            turn_id: turn_id.map(str::to_owned),
            event_type: event_type.to_owned(),
            json: Some(json),
            reserve_to: Some(reserve_to.max(seq)),
            after_commit,
        });
    }

    /// Reserve every `seq` up to `up_to` for events that get no row of their own (streamed
    /// deltas): a restored session numbers on after `up_to`, so it never reuses a number a
    /// client may have seen. One reservation covers many deltas, so streaming writes nothing
    /// per delta.
    pub fn reserve_seq(&self, session_id: &str, up_to: u64) {
        self.send(Command::ReserveSeq {
            session_id: session_id.to_owned(),
            up_to,
        });
    }

    /// Run `f` on the writer thread once everything enqueued before it is committed, without
    /// writing anything: used to order a response after the events it follows.
    pub fn after_commit(&self, f: AfterCommit) {
        self.send(Command::RecordEvent {
            session_id: String::new(),
            seq: 0,
            turn_id: None,
            event_type: String::new(),
            json: None,
            reserve_to: None,
            after_commit: Some(f),
        });
    }

    /// Record that a tool call asked for approval or an answer. Asking again for the same
    /// tool call replaces the row's request id, kind, turn and payload; a decision recorded
    /// for the old request id is cleared, because a decision binds to its request id.
    pub fn upsert_pending(&self, record: PendingRecord) {
        self.send(Command::UpsertPending(record));
    }

    /// Record the user's answer to a pending request. Committed with `Durability::Full`: the
    /// decision gates a side effect.
    pub fn resolve_pending(&self, session_id: &str, request_id: &str, decision_json: String) {
        self.send(Command::ResolvePending {
            session_id: session_id.to_owned(),
            request_id: request_id.to_owned(),
            decision_json,
        });
    }

    /// Withdraw every inbox row of a turn, answered or not (the turn ended).
    pub fn delete_pending_for_turn(&self, session_id: &str, turn_id: &str) {
        self.send(Command::DeletePendingForTurn {
            session_id: session_id.to_owned(),
            turn_id: turn_id.to_owned(),
        });
    }

    /// Remember a permission rule; adding one that exists changes nothing.
    pub fn add_rule(&self, session_id: &str, rule: RuleRecord) {
        self.send(Command::AddRule {
            session_id: session_id.to_owned(),
            rule,
        });
    }

    /// Add to the session's token totals for `model`.
    pub fn record_usage(
        &self,
        session_id: &str,
        model: &str,
        input: u64,
        output: u64,
        cached: u64,
    ) {
        self.send(Command::RecordUsage {
            session_id: session_id.to_owned(),
            model: model.to_owned(),
            input,
            output,
            cached,
        });
    }

    /// Mark a tool call as about to run its side effect. Committed with `Durability::Full`, so
    /// after any crash a call with this mark and no result is known to be interrupted.
    pub fn tool_started(&self, session_id: &str, tool_call_id: &str, name: &str) {
        self.send(Command::ToolStarted {
            session_id: session_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            name: name.to_owned(),
        });
    }

    /// Clear the started mark once the call's result is recorded (enqueue it right after the
    /// result message; they land in the same or a later batch, never an earlier one).
    pub fn tool_finished(&self, session_id: &str, tool_call_id: &str) {
        self.send(Command::ToolFinished {
            session_id: session_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
        });
    }

    /// Resolves once everything enqueued before it is committed; with `Full`, also fsynced.
    pub async fn barrier(&self, durability: Durability) -> Result<(), StoreError> {
        self.ask(|reply| Command::Barrier {
            durability,
            session_id: None,
            reply,
        })
        .await
    }

    /// [`Store::barrier`] on behalf of one session: fails at once, without waiting for the
    /// database, while that session is diverged (see [`Store::unavailable`]).
    pub async fn session_barrier(
        &self,
        session_id: &str,
        durability: Durability,
    ) -> Result<(), StoreError> {
        let session_id = Some(session_id.to_owned());
        self.ask(|reply| Command::Barrier {
            durability,
            session_id,
            reply,
        })
        .await
    }

    /// Sessions, most recently updated first, optionally only those of one `cwd`.
    pub async fn list_sessions(
        &self,
        cwd: Option<String>,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        self.ask(|reply| Command::ListSessions { cwd, reply }).await
    }

    /// Everything needed to resume a session; `None` if there is no such session.
    pub async fn load_session(&self, id: &str) -> Result<Option<LoadedSession>, StoreError> {
        let id = id.to_owned();
        self.ask(|reply| Command::LoadSession { id, reply }).await
    }

    /// Persisted events with `seq > after_seq`, in seq order, at most `limit` of them (a
    /// replay reads a long session page by page).
    pub async fn events_since(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: Option<usize>,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let session_id = session_id.to_owned();
        self.ask(|reply| Command::EventsSince {
            session_id,
            after_seq,
            limit,
            reply,
        })
        .await
    }

    /// The result of `PRAGMA integrity_check`: `"ok"` for a healthy database.
    pub async fn integrity_check(&self) -> Result<String, StoreError> {
        self.ask(|reply| Command::IntegrityCheck { reply }).await
    }
}
