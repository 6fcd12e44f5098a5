//! The writer thread: owns the connection, applies queued commands in batches, one transaction
//! per batch, and completes each command (callback or reply) only after its batch committed.

pub(crate) mod sql;

use sql::*;

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;

use rusqlite::{params, Connection, OptionalExtension};

use super::{
    Command, Diverged, Durability, LoadedSession, MessageRow, PendingRecord, RuleRecord,
    SessionRecord, StoreError, StoredEvent, UsageTotals,
};

/// The most commands one transaction takes; bounds how long a reply waits behind a burst.
const MAX_BATCH: usize = 256;

/// What to do for one command once its batch is committed (or failed): `None` when the batch
/// committed, the commit error otherwise.
pub(super) type Finish = Box<dyn FnOnce(Option<&StoreError>) + Send>;

pub(super) fn run(conn: Connection, receiver: mpsc::Receiver<Command>, diverged: Diverged) {
    let mut writer = Writer {
        conn,
        synchronous: Durability::Normal,
        unsynced: false,
        diverged,
    };
    let mut batch = Vec::with_capacity(MAX_BATCH);
    // `recv` keeps returning queued commands after the last handle is dropped and fails only
    // once the queue is empty, so shutting down commits everything that was enqueued.
    while let Ok(first) = receiver.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(command) => batch.push(command),
                Err(_) => break,
            }
        }
        writer.run_batch(&mut batch);
    }
    if let Err((_, e)) = writer.conn.close() {
        tracing::error!(error = %e, "closing the session database failed");
    }
}

struct Writer {
    conn: Connection,
    /// The `synchronous` level currently set on the connection.
    synchronous: Durability,
    /// Whether a NORMAL commit may still sit in the WAL without an fsync; a FULL barrier
    /// then needs a write of its own, because committing an empty transaction syncs nothing.
    unsynced: bool,
    /// Sessions whose writes are refused after a failed batch (see [`super::Store::unavailable`]).
    diverged: Diverged,
}

impl Command {
    fn durability(&self) -> Durability {
        match self {
            Command::AppendMessage { row, .. } => row.durability,
            Command::Barrier { durability, .. } => *durability,
            Command::ResolvePending { .. }
            | Command::ToolStarted { .. }
            | Command::Resync { .. } => Durability::Full,
            Command::Checkpoint { op, .. } if op.full() => Durability::Full,
            _ => Durability::Normal,
        }
    }

    /// Whether the command needs the database at all (writes or reads). Events without a row
    /// (streamed deltas, ordering-only callbacks) only keep their place in the order.
    fn touches_database(&self) -> bool {
        match self {
            Command::Barrier { .. } => false,
            Command::RecordEvent { json, .. } => json.is_some(),
            _ => true,
        }
    }

    fn writes(&self) -> bool {
        !matches!(
            self,
            Command::Barrier { .. }
                | Command::ListSessions { .. }
                | Command::LoadSession { .. }
                | Command::EventsSince { .. }
                | Command::IntegrityCheck { .. }
                | Command::TrustedMcp { .. }
                | Command::TrustedHooks { .. }
                | Command::RecordEvent { json: None, .. }
        ) && !matches!(self, Command::Checkpoint { op, .. } if !op.writes())
    }
}

impl Command {
    /// Whether the command may wait until the batch's callbacks have run: a write that nothing
    /// waits for and that no side effect depends on. Stored display entries are such a write
    /// (a row without one is parsed instead), and they are written as a turn ends, where the
    /// `turnEnded` event must not wait for them.
    fn deferrable(&self) -> bool {
        matches!(self, Command::SetDisplays { .. })
    }
}

impl Writer {
    /// Commit a batch, then run its callbacks, then commit its deferrable writes (see
    /// [`Command::deferrable`]) in a transaction of their own, before the next batch. A batch
    /// with a reply to give (a read, a barrier) runs in order as it is, so whatever answers
    /// has seen every write enqueued before it.
    fn run_batch(&mut self, batch: &mut Vec<Command>) {
        let answers = batch.iter().any(|c| {
            matches!(
                c,
                Command::Barrier { .. }
                    | Command::ListSessions { .. }
                    | Command::LoadSession { .. }
                    | Command::EventsSince { .. }
                    | Command::IntegrityCheck { .. }
                    | Command::Resync { .. }
                    | Command::TrustMcp { .. }
                    | Command::TrustedMcp { .. }
                    | Command::TrustHooks { .. }
                    | Command::TrustedHooks { .. }
            ) || matches!(c, Command::Checkpoint { op, .. } if op.answers())
        });
        if answers {
            self.commit_batch(batch);
            return;
        }
        let mut deferred: Vec<Command> = batch.extract_if(.., |c| c.deferrable()).collect();
        if !batch.is_empty() {
            self.commit_batch(batch);
        }
        if !deferred.is_empty() {
            self.commit_batch(&mut deferred);
        }
    }

    fn commit_batch(&mut self, batch: &mut Vec<Command>) {
        // What a diverged session sends is answered without the database, so a locked or full
        // database does not make each of its events wait for the busy timeout again. Nothing is
        // diverged almost always: then nothing is looked up or allocated per command.
        let refusals: Vec<Option<String>> = {
            let diverged = self
                .diverged
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if diverged.is_empty() {
                Vec::new()
            } else {
                batch.iter().map(|c| refusal(&diverged, c)).collect()
            }
        };
        let refused = |index: usize| refusals.get(index).is_some_and(Option::is_some);
        let live = || {
            batch
                .iter()
                .enumerate()
                .filter(|(index, _)| !refused(*index))
                .map(|(_, c)| c)
        };
        let durability = if live().any(|c| c.durability() == Durability::Full) {
            Durability::Full
        } else {
            Durability::Normal
        };
        let writes = live().any(Command::writes);
        let needs_sync_write = durability == Durability::Full && !writes && self.unsynced;
        let needs_transaction = needs_sync_write || live().any(Command::touches_database);

        // Every session with a write here diverges if the batch fails; a resync that commits
        // makes its session whole again. Only a transaction can fail, so a batch of streamed
        // pieces lists nothing.
        let mut written: Vec<String> = Vec::new();
        let mut resynced: Vec<String> = Vec::new();
        for command in batch.iter().filter(|_| needs_transaction) {
            if let (true, Some(id)) = (command.writes(), command.session_id()) {
                if matches!(command, Command::Resync { .. }) {
                    resynced.push(id.to_owned());
                }
                if !written.iter().any(|w| w == id) {
                    written.push(id.to_owned());
                }
            }
        }
        let mut finishes: Vec<Finish> = Vec::with_capacity(batch.len());
        let mut failure: Option<StoreError> = None;
        let mut refusals = refusals.into_iter();
        if !needs_transaction {
            // Deltas and NORMAL barriers: nothing to write, only order to keep.
            for command in batch.drain(..) {
                finishes.push(match refusals.next().flatten() {
                    Some(cause) => refuse(command, cause),
                    None => self.apply_or_fail(command).0,
                });
            }
        } else {
            match self.begin(durability, writes || needs_sync_write) {
                Ok(()) => {
                    for command in batch.drain(..) {
                        if let Some(cause) = refusals.next().flatten() {
                            // A write of a diverged session: storing it would leave a hole
                            // where the lost rows were.
                            finishes.push(refuse(command, cause));
                            continue;
                        }
                        if failure.is_some() {
                            // The transaction is gone; running the rest in autocommit mode
                            // would commit them out of order with the lost ones.
                            finishes.push(skip(command));
                            continue;
                        }
                        let (finish, error) = self.apply_or_fail(command);
                        finishes.push(finish);
                        if let Some(e) = error {
                            failure = Some(e);
                        } else if self.conn.is_autocommit() {
                            // SQLite rolled the whole transaction back (disk full, I/O error).
                            failure = Some(StoreError::Sqlite(rusqlite::Error::SqliteFailure(
                                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                                Some(
                                    "SQLite rolled the batch back (disk full or I/O error, logged above)"
                                        .to_owned(),
                                ),
                            )));
                        }
                    }
                    if failure.is_none() && needs_sync_write {
                        if let Err(e) = self.conn.execute(
                            "INSERT INTO meta (key, value) VALUES ('last_full_barrier', ?1)
                             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                            [now_ms().to_string()],
                        ) {
                            failure = Some(e.into());
                        }
                    }
                    if failure.is_none() {
                        if let Err(e) = self
                            .conn
                            .prepare_cached("COMMIT")
                            .and_then(|mut s| s.execute([]))
                        {
                            failure = Some(e.into());
                        }
                    }
                    if failure.is_some() && !self.conn.is_autocommit() {
                        if let Err(e) = self.conn.execute_batch("ROLLBACK") {
                            tracing::error!(error = %e, "rolling back a failed batch failed");
                        }
                    }
                    if failure.is_none() && (writes || needs_sync_write) {
                        self.unsynced = durability == Durability::Normal;
                    }
                }
                Err(e) => {
                    failure = Some(e);
                    finishes.extend(batch.drain(..).map(skip));
                }
            }
        }
        if failure.is_some() || !resynced.is_empty() {
            // Before the callbacks run, so a caller woken by one (a side effect's barrier)
            // already sees the session refused.
            let mut diverged = self
                .diverged
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match &failure {
                Some(e) => {
                    let cause = e.cause();
                    for id in written {
                        diverged.entry(id).or_insert_with(|| cause.clone());
                    }
                }
                None => {
                    for id in resynced {
                        diverged.remove(&id);
                    }
                }
            }
        }
        if let Some(e) = &failure {
            tracing::error!(error = %e, commands = finishes.len(), "a session store batch was not committed");
        }
        for finish in finishes {
            // A panicking callback belongs to its caller; the writer must keep serving.
            if catch_unwind(AssertUnwindSafe(|| finish(failure.as_ref()))).is_err() {
                tracing::error!("an after_commit callback of the session store panicked");
            }
        }
    }

    fn begin(&mut self, durability: Durability, writes: bool) -> Result<(), StoreError> {
        // `synchronous` cannot change inside a transaction, so it is set before BEGIN.
        if self.synchronous != durability {
            let level = match durability {
                Durability::Normal => "NORMAL",
                Durability::Full => "FULL",
            };
            self.conn.pragma_update(None, "synchronous", level)?;
            self.synchronous = durability;
        }
        // IMMEDIATE takes the write lock up front: a deferred transaction that reads and then
        // writes fails at once with SQLITE_BUSY if another process wrote meanwhile.
        let begin = if writes { "BEGIN IMMEDIATE" } else { "BEGIN" };
        // Cached like every other statement: `execute_batch` would compile it at every batch.
        self.conn.prepare_cached(begin)?.execute([])?;
        Ok(())
    }

    /// Run one command inside the open transaction and return how to complete it, with the
    /// error of a write that failed: the caller rolls the whole batch back then, because a
    /// batch that commits without one of its rows would store a history with a hole in it.
    fn apply_or_fail(&self, command: Command) -> (Finish, Option<StoreError>) {
        let conn = &self.conn;
        match command {
            Command::RecordEvent {
                session_id,
                seq,
                turn_id,
                event_type,
                json,
                reserve_to,
                after_commit,
            } => {
                let mut error = None;
                if let Some(json) = json {
                    let written = conn
                        .prepare_cached(
                            "INSERT INTO events (session_id, seq, turn_id, type, json)
                             VALUES (?1, ?2, ?3, ?4, ?5)",
                        )
                        .and_then(|mut s| {
                            s.execute(params![session_id, to_i64(seq), turn_id, event_type, json])
                        })
                        // The row is the high-water mark now: any earlier reservation beyond
                        // it is given back, unless this event reserves for the stream that
                        // follows it.
                        .and_then(|_| set_last_seq(conn, &session_id, reserve_to.unwrap_or(seq)));
                    error = failed("record_event", &session_id, written.map(drop));
                }
                let finish: Finish = match after_commit {
                    Some(callback) => Box::new(move |_| callback()),
                    None => Box::new(|_| ()),
                };
                (finish, error)
            }
            Command::Barrier { reply, .. } => (answer(reply, Ok(())), None),
            Command::ListSessions { cwd, reply } => (answer(reply, list_sessions(conn, cwd)), None),
            Command::LoadSession { id, reply } => (answer(reply, load_session(conn, &id)), None),
            Command::EventsSince {
                session_id,
                after_seq,
                limit,
                reply,
            } => (
                answer(reply, events_since(conn, &session_id, after_seq, limit)),
                None,
            ),
            Command::IntegrityCheck { reply } => (answer(reply, integrity_check(conn)), None),
            Command::TrustMcp {
                cwd,
                server,
                definition,
                trusted_at,
                reply,
            } => (
                answer(
                    reply,
                    trust_mcp(conn, &cwd, &server, &definition, trusted_at),
                ),
                None,
            ),
            Command::TrustedMcp { cwd, reply } => (answer(reply, trusted_mcp(conn, &cwd)), None),
            Command::TrustHooks {
                cwd,
                content_hash,
                trusted_at,
                reply,
            } => (
                answer(reply, trust_hooks(conn, &cwd, &content_hash, trusted_at)),
                None,
            ),
            Command::TrustedHooks { cwd, reply } => {
                (answer(reply, trusted_hooks(conn, &cwd)), None)
            }
            Command::Checkpoint { session_id, op } => {
                let (finish, error) = op.apply(conn, &session_id);
                let error = failed("checkpoint", &session_id, error.map_or(Ok(()), Err));
                (finish, error)
            }
            Command::Resync {
                record,
                rows,
                first_position,
                last_seq,
                reply,
            } => {
                let result = resync(conn, &record, &rows, first_position, last_seq);
                let error = failed("resync", &record.id, result);
                (answer(reply, Ok(())), error)
            }
            write => {
                let session_id = write.session_id().unwrap_or_default().to_owned();
                let (what, result) = apply_write(conn, write);
                (
                    Box::new(|_| ()),
                    failed(what, &session_id, result.map(drop)),
                )
            }
        }
    }
}

/// Why `command` is refused, if it is: a write of a diverged session (other than the resync
/// that heals it), or a barrier that asks on behalf of one.
fn refusal(diverged: &HashMap<String, String>, command: &Command) -> Option<String> {
    let id = match command {
        Command::Resync { .. } => return None,
        Command::Barrier { session_id, .. } => session_id.as_deref()?,
        other if other.writes() => other.session_id()?,
        _ => return None,
    };
    diverged.get(id).cloned()
}

/// Complete a refused command (see [`refusal`]): a barrier gets the cause as its
/// error; anything else completes as if its batch never ran.
fn refuse(command: Command, cause: String) -> Finish {
    match command {
        Command::Barrier { reply, .. } => Box::new(move |_| {
            let _ = reply.send(Err(StoreError::Unavailable(cause)));
        }),
        other => skip(other),
    }
}

/// Complete a command whose batch never ran: replies get the error, callbacks still run so
/// the session's event stream does not stall (the failure is logged).
fn skip(command: Command) -> Finish {
    match command {
        Command::RecordEvent {
            after_commit: Some(callback),
            ..
        } => Box::new(move |_| callback()),
        Command::Barrier { reply, .. } => answer(reply, Ok(())),
        Command::ListSessions { reply, .. } => answer(reply, Ok(Vec::new())),
        Command::LoadSession { reply, .. } => answer(reply, Ok(None)),
        Command::EventsSince { reply, .. } => answer(reply, Ok(Vec::new())),
        Command::IntegrityCheck { reply } => answer(reply, Ok(String::new())),
        Command::TrustMcp { reply, .. } => answer(
            reply,
            Err(StoreError::Unavailable(
                "the store did not write the trust; send mcp/trust again".to_owned(),
            )),
        ),
        Command::TrustedMcp { reply, .. } => answer(reply, Ok(Vec::new())),
        Command::Resync { reply, .. } => answer(reply, Ok(())),
        Command::Checkpoint { op, .. } => op.skip("the store did not run this batch; try again"),
        _ => Box::new(|_| ()),
    }
}

/// Send `result` once the batch committed, or the batch's error if it did not (a read inside
/// a rolled-back batch may have seen rows that no longer exist).
pub(super) fn answer<T: Send + 'static>(
    reply: super::Reply<T>,
    result: Result<T, StoreError>,
) -> Finish {
    Box::new(move |failure| {
        let result = match failure {
            Some(e) => Err(e.duplicate()),
            None => result,
        };
        // The asker may have stopped waiting; that is not an error here.
        let _ = reply.send(result);
    })
}

/// Log a failed write and hand its error to the batch, which is then rolled back whole.
fn failed(what: &str, session_id: &str, result: rusqlite::Result<()>) -> Option<StoreError> {
    let error = result.err()?;
    tracing::error!(error = %error, session_id, "session store: {what} failed");
    Some(StoreError::Sqlite(error))
}

/// See [`super::Store::resync`].
fn resync(
    conn: &Connection,
    record: &SessionRecord,
    rows: &[MessageRow],
    first_position: u64,
    last_seq: u64,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO sessions (id, cwd, model, mode, title, created_at, updated_at, allow_network)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (id) DO UPDATE SET model = excluded.model, mode = excluded.mode,
             title = COALESCE(sessions.title, excluded.title), updated_at = excluded.updated_at,
             allow_network = excluded.allow_network",
    )?
    .execute(params![
        record.id,
        record.cwd,
        record.model,
        record.mode,
        record.title,
        to_i64(record.created_at),
        to_i64(record.updated_at),
        record.allow_network
    ])?;
    let stored: i64 = conn
        .prepare_cached("SELECT COUNT(*) FROM messages WHERE session_id = ?1")?
        .query_row([&record.id], |row| row.get(0))?;
    let stored = to_u64(stored);
    let mut append = conn.prepare_cached(APPEND_MESSAGE_SQL)?;
    for (offset, row) in rows.iter().enumerate() {
        if first_position + offset as u64 >= stored {
            append.execute(params![
                record.id,
                row.message_id,
                row.turn_id,
                row.role,
                row.json,
                row.display
            ])?;
        }
    }
    conn.prepare_cached("UPDATE sessions SET last_seq = MAX(last_seq, ?2) WHERE id = ?1")?
        .execute(params![record.id, to_i64(last_seq)])?;
    Ok(())
}
