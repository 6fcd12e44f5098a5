//! The SQL of the writer thread: one statement per write command, and the reads (a session's
//! load, the session list, events since a `seq`, the integrity check). Prepared statements are
//! cached on the connection; nothing here decides batching or durability.

use super::*;

/// Run one write; answers what it was (for the log) and how many rows it changed.
pub(super) fn apply_write(
    conn: &Connection,
    command: Command,
) -> (&'static str, rusqlite::Result<usize>) {
    match command {
        Command::CreateSession(r) => ("create_session", insert_session(conn, &r)),
        Command::UpdateSession {
            id,
            model,
            mode,
            title,
            updated_at,
        } => (
            "update_session",
            conn.prepare_cached(
                "UPDATE sessions SET model = COALESCE(?2, model), mode = COALESCE(?3, mode),
                 title = COALESCE(?4, title), updated_at = ?5 WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![id, model, mode, title, to_i64(updated_at)])),
        ),
        Command::SetNetwork { id, allow } => (
            "set_network",
            conn.prepare_cached("UPDATE sessions SET allow_network = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, allow])),
        ),
        Command::SetPlan { id, plan } => (
            "set_plan",
            conn.prepare_cached("UPDATE sessions SET plan = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, plan])),
        ),
        Command::AppendMessage { session_id, row } => (
            "append_message",
            conn.prepare_cached(APPEND_MESSAGE_SQL).and_then(|mut s| {
                s.execute(params![
                    session_id,
                    row.message_id,
                    row.turn_id,
                    row.role,
                    row.json,
                    row.display
                ])
            }),
        ),
        Command::SetDisplays {
            session_id,
            displays,
        } => {
            let result = conn
                .prepare_cached(
                    "UPDATE messages SET display = ?4
                     WHERE session_id = ?1 AND position = ?2 AND message_id = ?3",
                )
                .and_then(|mut statement| {
                    let mut changed = 0;
                    for entry in displays {
                        changed += statement.execute(params![
                            session_id,
                            to_i64(entry.position),
                            entry.message_id,
                            entry.display
                        ])?;
                    }
                    Ok(changed)
                });
            ("set_displays", result)
        }
        Command::UpsertPending(r) => (
            "upsert_pending",
            conn.prepare_cached(
                "INSERT INTO pending (session_id, tool_call_id, request_id, kind, turn_id,
                                      payload, decision, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (session_id, tool_call_id) DO UPDATE SET
                     decision = CASE WHEN pending.request_id = excluded.request_id
                                     THEN COALESCE(excluded.decision, pending.decision)
                                     ELSE excluded.decision END,
                     request_id = excluded.request_id,
                     kind = excluded.kind,
                     turn_id = excluded.turn_id,
                     payload = excluded.payload",
            )
            .and_then(|mut s| {
                s.execute(params![
                    r.session_id,
                    r.tool_call_id,
                    r.request_id,
                    r.kind,
                    r.turn_id,
                    r.payload,
                    r.decision,
                    to_i64(r.created_at)
                ])
            }),
        ),
        Command::ResolvePending {
            session_id,
            request_id,
            decision_json,
        } => (
            "resolve_pending",
            conn.prepare_cached(
                "UPDATE pending SET decision = ?3 WHERE session_id = ?1 AND request_id = ?2",
            )
            .and_then(|mut s| s.execute(params![session_id, request_id, decision_json])),
        ),
        Command::DeletePendingForTurn {
            session_id,
            turn_id,
        } => (
            "delete_pending_for_turn",
            conn.prepare_cached("DELETE FROM pending WHERE session_id = ?1 AND turn_id = ?2")
                .and_then(|mut s| s.execute(params![session_id, turn_id])),
        ),
        Command::AddRule { session_id, rule } => (
            "add_rule",
            conn.prepare_cached(
                "INSERT INTO rules (session_id, kind, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT DO NOTHING",
            )
            .and_then(|mut s| s.execute(params![session_id, rule.kind, rule.value])),
        ),
        Command::RecordUsage {
            session_id,
            model,
            input,
            output,
            cached,
        } => (
            "record_usage",
            conn.prepare_cached(
                "INSERT INTO usage (session_id, model, input_tokens, output_tokens, cached_tokens)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (session_id, model) DO UPDATE SET
                     input_tokens = input_tokens + excluded.input_tokens,
                     output_tokens = output_tokens + excluded.output_tokens,
                     cached_tokens = cached_tokens + excluded.cached_tokens",
            )
            .and_then(|mut s| {
                s.execute(params![
                    session_id,
                    model,
                    to_i64(input),
                    to_i64(output),
                    to_i64(cached)
                ])
            }),
        ),
        Command::ToolStarted {
            session_id,
            tool_call_id,
            name,
        } => (
            "tool_started",
            conn.prepare_cached(
                "INSERT INTO tool_runs (session_id, tool_call_id, name) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id, tool_call_id) DO UPDATE SET name = excluded.name",
            )
            .and_then(|mut s| s.execute(params![session_id, tool_call_id, name])),
        ),
        Command::ToolFinished {
            session_id,
            tool_call_id,
        } => (
            "tool_finished",
            conn.prepare_cached(
                "DELETE FROM tool_runs WHERE session_id = ?1 AND tool_call_id = ?2",
            )
            .and_then(|mut s| s.execute(params![session_id, tool_call_id])),
        ),
        Command::ReserveSeq { session_id, up_to } => {
            ("reserve_seq", set_last_seq(conn, &session_id, up_to))
        }
        // Reads, barriers, events and resyncs are handled by `Writer::apply_or_fail`.
        Command::RecordEvent { .. }
        | Command::Barrier { .. }
        | Command::ListSessions { .. }
        | Command::LoadSession { .. }
        | Command::EventsSince { .. }
        | Command::IntegrityCheck { .. }
        | Command::Checkpoint { .. }
        | Command::TrustMcp { .. }
        | Command::TrustedMcp { .. }
        | Command::TrustHooks { .. }
        | Command::TrustedHooks { .. }
        | Command::Resync { .. } => ("nothing", Ok(0)),
    }
}

/// A new session row (`session/new`, and the copy `session/fork` makes).
pub(crate) fn insert_session(conn: &Connection, r: &SessionRecord) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "INSERT INTO sessions (id, cwd, model, mode, title, created_at, updated_at, allow_network)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        r.id,
        r.cwd,
        r.model,
        r.mode,
        r.title,
        to_i64(r.created_at),
        to_i64(r.updated_at),
        r.allow_network
    ])
}

/// Remember a trusted workspace MCP server (replacing what was trusted under its name).
pub(super) fn trust_mcp(
    conn: &Connection,
    cwd: &str,
    server: &str,
    definition: &str,
    trusted_at: u64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO mcp_trust (cwd, server, definition, trusted_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (cwd, server) DO UPDATE SET
             definition = excluded.definition, trusted_at = excluded.trusted_at",
    )?
    .execute(params![cwd, server, definition, to_i64(trusted_at)])?;
    Ok(())
}

/// The trusted workspace MCP servers of `cwd`.
pub(super) fn trusted_mcp(
    conn: &Connection,
    cwd: &str,
) -> Result<Vec<(String, String)>, StoreError> {
    let mut statement = conn.prepare_cached(
        "SELECT server, definition FROM mcp_trust WHERE cwd = ?1 ORDER BY server",
    )?;
    let rows = statement.query_map(params![cwd], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Remember the trusted project hooks of `cwd` (replacing an earlier trust).
pub(super) fn trust_hooks(
    conn: &Connection,
    cwd: &str,
    content_hash: &str,
    trusted_at: u64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO hook_trust (cwd, content_hash, trusted_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (cwd) DO UPDATE SET
             content_hash = excluded.content_hash, trusted_at = excluded.trusted_at",
    )?
    .execute(params![cwd, content_hash, to_i64(trusted_at)])?;
    Ok(())
}

/// The content hash of the trusted project hooks of `cwd`.
pub(super) fn trusted_hooks(conn: &Connection, cwd: &str) -> Result<Option<String>, StoreError> {
    use rusqlite::OptionalExtension;
    Ok(conn
        .prepare_cached("SELECT content_hash FROM hook_trust WHERE cwd = ?1")?
        .query_row(params![cwd], |row| row.get(0))
        .optional()?)
}

/// Appends a message row, with its display entry when it is final already (else `NULL`). The
/// position is computed in the same statement from the (session, position) index, so it is
/// always the next one even across restarts.
///
/// `COLLATE BINARY` (which TEXT columns compare with anyway) is there for speed: without it,
/// SQLite marks `?1` in this MAX subquery as a parameter whose value may change the plan, and
/// re-compiles the statement at every execution (its `SQLITE_STMTSTATUS_REPREPARE` count
/// grows by one per row): about a quarter of the samples in a profile of message commits. The
/// plan is the same index search either way; `store::tests` checks that the statement is
/// compiled once.
pub(crate) const APPEND_MESSAGE_SQL: &str =
    "INSERT INTO messages (session_id, position, message_id, turn_id, role, json, display)
     VALUES (?1, (SELECT COALESCE(MAX(position), -1) + 1 FROM messages
                  WHERE session_id = ?1 COLLATE BINARY), ?2, ?3, ?4, ?5, ?6)";

pub(super) fn set_last_seq(
    conn: &Connection,
    session_id: &str,
    seq: u64,
) -> rusqlite::Result<usize> {
    conn.prepare_cached("UPDATE sessions SET last_seq = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![session_id, to_i64(seq)]))
}

/// SQLite integers are signed; values past `i64::MAX` (never reached by timestamps, seqs or
/// token counts) are clamped rather than failing the write.
pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The inverse of [`to_i64`]; a negative value can only come from a foreign writer and reads
/// as 0.
pub(crate) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

pub(super) fn session_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRecord> {
    Ok(SessionRecord {
        id: row.get(0)?,
        cwd: row.get(1)?,
        model: row.get(2)?,
        mode: row.get(3)?,
        title: row.get(4)?,
        created_at: to_u64(row.get(5)?),
        updated_at: to_u64(row.get(6)?),
        allow_network: row.get(7)?,
    })
}

pub(super) fn list_sessions(
    conn: &Connection,
    cwd: Option<String>,
) -> Result<Vec<SessionRecord>, StoreError> {
    // Two statements rather than `?1 IS NULL OR cwd = ?1`, which would defeat the index.
    // A session with no message yet (created, never prompted) is left out: an editor that opens a
    // session it never uses must not fill the history with empty entries. It stays loadable by id.
    let sessions = match cwd {
        Some(cwd) => conn
            .prepare_cached(
                "SELECT id, cwd, model, mode, title, created_at, updated_at, allow_network FROM sessions
                 WHERE cwd = ?1
                   AND EXISTS (SELECT 1 FROM messages WHERE messages.session_id = sessions.id)
                 ORDER BY updated_at DESC, rowid DESC",
            )?
            .query_map([cwd], session_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?,
        None => conn
            .prepare_cached(
                "SELECT id, cwd, model, mode, title, created_at, updated_at, allow_network FROM sessions
                 WHERE EXISTS (SELECT 1 FROM messages WHERE messages.session_id = sessions.id)
                 ORDER BY updated_at DESC, rowid DESC",
            )?
            .query_map([], session_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?,
    };
    Ok(sessions)
}

pub(super) fn load_session(
    conn: &Connection,
    id: &str,
) -> Result<Option<LoadedSession>, StoreError> {
    let Some(record) = conn
        .prepare_cached(
            "SELECT id, cwd, model, mode, title, created_at, updated_at, allow_network FROM sessions
             WHERE id = ?1",
        )?
        .query_row([id], session_row)
        .optional()?
    else {
        return Ok(None);
    };
    let mut messages = Vec::new();
    let mut displays = Vec::new();
    let mut statement = conn.prepare_cached(
        "SELECT json, display FROM messages WHERE session_id = ?1 ORDER BY position",
    )?;
    let mut rows = statement.query([id])?;
    while let Some(row) = rows.next()? {
        messages.push(row.get::<_, String>(0)?);
        displays.push(row.get::<_, Option<String>>(1)?);
    }
    drop(rows);
    drop(statement);
    let plan: Option<String> = conn
        .prepare_cached("SELECT plan FROM sessions WHERE id = ?1")?
        .query_row([id], |row| row.get(0))?;
    let last_seq: i64 = conn
        .prepare_cached(
            "SELECT MAX(COALESCE((SELECT MAX(seq) FROM events WHERE session_id = ?1), 0),
                        (SELECT last_seq FROM sessions WHERE id = ?1))",
        )?
        .query_row([id], |row| row.get(0))?;
    let pending = conn
        .prepare_cached(
            "SELECT session_id, request_id, tool_call_id, kind, turn_id, payload, decision,
                    created_at
             FROM pending WHERE session_id = ?1 ORDER BY created_at, rowid",
        )?
        .query_map([id], |row| {
            Ok(PendingRecord {
                session_id: row.get(0)?,
                request_id: row.get(1)?,
                tool_call_id: row.get(2)?,
                kind: row.get(3)?,
                turn_id: row.get(4)?,
                payload: row.get(5)?,
                decision: row.get(6)?,
                created_at: to_u64(row.get(7)?),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let rules = conn
        .prepare_cached("SELECT kind, value FROM rules WHERE session_id = ?1 ORDER BY rowid")?
        .query_map([id], |row| {
            Ok(RuleRecord {
                kind: row.get(0)?,
                value: row.get(1)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let started_tools = conn
        .prepare_cached("SELECT tool_call_id FROM tool_runs WHERE session_id = ?1 ORDER BY rowid")?
        .query_map([id], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let usage = conn
        .prepare_cached(
            "SELECT model, input_tokens, output_tokens, cached_tokens FROM usage
             WHERE session_id = ?1 ORDER BY rowid",
        )?
        .query_map([id], |row| {
            Ok(UsageTotals {
                model: row.get(0)?,
                input_tokens: to_u64(row.get(1)?),
                output_tokens: to_u64(row.get(2)?),
                cached_tokens: to_u64(row.get(3)?),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Some(LoadedSession {
        record,
        plan,
        messages,
        displays,
        last_seq: to_u64(last_seq),
        pending,
        rules,
        started_tools,
        usage,
    }))
}

pub(super) fn events_since(
    conn: &Connection,
    session_id: &str,
    after_seq: u64,
    limit: Option<usize>,
) -> Result<Vec<StoredEvent>, StoreError> {
    // SQLite reads a negative LIMIT as none.
    let limit = limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    let events = conn
        .prepare_cached(
            "SELECT seq, turn_id, type, json FROM events
             WHERE session_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?
        .query_map(params![session_id, to_i64(after_seq), limit], |row| {
            Ok(StoredEvent {
                seq: to_u64(row.get(0)?),
                turn_id: row.get(1)?,
                event_type: row.get(2)?,
                json: row.get(3)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(events)
}

pub(super) fn integrity_check(conn: &Connection) -> Result<String, StoreError> {
    // One row "ok", or one row per problem found.
    let lines = conn
        .prepare("PRAGMA integrity_check")?
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(lines.join("\n"))
}

pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
