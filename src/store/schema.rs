//! The database schema as numbered migrations, and the connection settings every open applies.
//!
//! `PRAGMA user_version` records how many migrations a database has seen. Migration `n` (1-based)
//! is `MIGRATIONS[n - 1]`; adding a schema change means appending one entry, never editing an
//! old one, because databases in the field have already run it.

use std::time::Duration;

use rusqlite::Connection;

use super::StoreError;

/// How long a statement waits for another process (a second tandem on the same data dir)
/// to release the write lock before it fails with `SQLITE_BUSY`.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The migrations in order. Each runs in its own transaction together with the
/// `user_version` bump, so a crash mid-migration leaves the previous version intact.
pub(crate) const MIGRATIONS: &[&str] = &[
    MIGRATION_1,
    MIGRATION_2,
    MIGRATION_3,
    MIGRATION_4,
    MIGRATION_5,
    MIGRATION_6,
    MIGRATION_7,
    MIGRATION_8,
    MIGRATION_9,
];

/// The project hooks (issue 27) the user trusted, per workspace folder: the SHA-256 of the hook
/// files' content as it was trusted, so a hook file that changes afterwards must be trusted
/// again. Like `mcp_trust`, it belongs to the folder, not to a session.
const MIGRATION_9: &str = "CREATE TABLE hook_trust (
    cwd           TEXT PRIMARY KEY,
    content_hash  TEXT NOT NULL,
    trusted_at    INTEGER NOT NULL
);";

/// The model's current plan (`update_plan`, issue 27) as JSON of its entries, so a restored
/// session shows it without reading its history.
const MIGRATION_8: &str = "ALTER TABLE sessions ADD COLUMN plan TEXT;";

/// Checkpoints (issue 26, see `checkpoints.rs`): contents once per SHA-256, what each turn
/// changed per path (state JSON before and after, their content hashes in columns of their own
/// so deleting a session can find contents nobody refers to), the manifest a running command
/// started from, and the messages a conversation rewind took out of the history.
const MIGRATION_7: &str = "CREATE TABLE checkpoint_blobs (
    hash   TEXT PRIMARY KEY NOT NULL,
    bytes  BLOB NOT NULL
);
CREATE TABLE checkpoint_files (
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id      TEXT NOT NULL,
    root         INTEGER NOT NULL,
    path         TEXT NOT NULL,
    before       TEXT NOT NULL,
    after        TEXT,
    before_hash  TEXT,
    after_hash   TEXT,
    created_at   INTEGER NOT NULL,
    rewound_at   INTEGER,
    UNIQUE (session_id, turn_id, root, path)
);
CREATE TABLE checkpoint_scans (
    session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id       TEXT NOT NULL,
    tool_call_id  TEXT NOT NULL,
    manifest      TEXT NOT NULL,
    PRIMARY KEY (session_id, tool_call_id)
);
CREATE TABLE superseded_messages (
    session_id      TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position        INTEGER NOT NULL,
    message_id      TEXT NOT NULL,
    turn_id         TEXT,
    role            TEXT NOT NULL,
    json            TEXT NOT NULL,
    display         TEXT,
    rewind_turn_id  TEXT NOT NULL,
    superseded_at   INTEGER NOT NULL
);
CREATE INDEX superseded_by_session ON superseded_messages (session_id, superseded_at);";

/// The workspace MCP servers (`.mcp.json`) the user trusted, per workspace folder: what the
/// trust binds to (since issue 27 the SHA-256 of the `.mcp.json` the session read; before, the
/// canonical JSON of the entry's transport, which no longer matches, so such a trust is asked
/// again), so a changed file must be trusted again. Kept apart from sessions: trust belongs to the folder, not to one session.
const MIGRATION_6: &str = "CREATE TABLE mcp_trust (
    cwd         TEXT NOT NULL,
    server      TEXT NOT NULL,
    definition  TEXT NOT NULL,
    trusted_at  INTEGER NOT NULL,
    PRIMARY KEY (cwd, server)
);";

/// Deny rules became the engine's (`permissions::RuleKind`): the ACP face's `reject_always` rows,
/// which only that face read, get the names every face now honours.
const MIGRATION_5: &str = "UPDATE rules SET kind = 'denyTool' WHERE kind = 'acpDenyTool';
UPDATE rules SET kind = 'denyCommandPrefix' WHERE kind = 'acpDenyCommandPrefix';";

/// A message's entry in the display history that `session/load` returns, serialized once the
/// turn that wrote it has ended (`''` for a message that shows as no entry of its own: a tool
/// result folds into its call, a reminder is not shown). `NULL` means not computed yet: the
/// rows of an unfinished turn, and every row written before this migration. A resume sends the
/// stored entries as they are and parses only the rows without one, so it need not parse a long
/// history before it answers.
const MIGRATION_4: &str = "ALTER TABLE messages ADD COLUMN display TEXT;";

/// Whether the user allowed the session's sandboxed commands to use the network (0 or 1); the
/// choice survives a restart like the mode does.
const MIGRATION_3: &str =
    "ALTER TABLE sessions ADD COLUMN allow_network INTEGER NOT NULL DEFAULT 0;";

/// The highest `seq` handed out, including streamed events that get no row of their own, so a
/// restarted server never reuses a `seq` a client already saw.
const MIGRATION_2: &str = "ALTER TABLE sessions ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;";

/// The first schema: everything a session needs to survive a crash.
///
/// Tables whose rows hold large JSON keep a rowid and a separate index, because SQLite
/// recommends `WITHOUT ROWID` only for small rows. Every column a query filters or orders by
/// is the prefix of an index.
const MIGRATION_1: &str = r#"
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY NOT NULL,
    cwd         TEXT NOT NULL,
    model       TEXT NOT NULL,
    mode        TEXT NOT NULL,
    title       TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX sessions_by_updated ON sessions (updated_at DESC);
CREATE INDEX sessions_by_cwd_updated ON sessions (cwd, updated_at DESC);

-- The canonical history: one row per message, `json` is the serde form of
-- engine::history::Message with all sidecars, `position` counts from 0 per session.
CREATE TABLE messages (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    message_id  TEXT NOT NULL,
    turn_id     TEXT,
    role        TEXT NOT NULL,
    json        TEXT NOT NULL,
    UNIQUE (session_id, position)
);

-- Announced events with their per-session `seq`; streamed deltas are not stored.
CREATE TABLE events (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    turn_id     TEXT,
    type        TEXT NOT NULL,
    json        TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- The approvals/questions inbox: one row per tool call that asked; `decision` is set once
-- the user answered, so a resumed session does not ask again.
CREATE TABLE pending (
    session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool_call_id  TEXT NOT NULL,
    request_id    TEXT NOT NULL,
    kind          TEXT NOT NULL,
    turn_id       TEXT NOT NULL,
    payload       TEXT NOT NULL,
    decision      TEXT,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (session_id, tool_call_id)
);
CREATE INDEX pending_by_request ON pending (session_id, request_id);
CREATE INDEX pending_by_turn ON pending (session_id, turn_id);

-- Remembered permission rules ("always allow this tool / this command prefix").
CREATE TABLE rules (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    value       TEXT NOT NULL,
    PRIMARY KEY (session_id, kind, value)
);

-- Tool calls whose side effect may have started; a row without a recorded result after a
-- crash means "interrupted, do not re-run".
CREATE TABLE tool_runs (
    session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool_call_id  TEXT NOT NULL,
    name          TEXT NOT NULL,
    PRIMARY KEY (session_id, tool_call_id)
);

-- Token usage totals per session and model.
CREATE TABLE usage (
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    model          TEXT NOT NULL,
    input_tokens   INTEGER NOT NULL DEFAULT 0,
    output_tokens  INTEGER NOT NULL DEFAULT 0,
    cached_tokens  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, model)
);

-- Store bookkeeping; also the row a FULL barrier writes to force an fsync of the WAL.
CREATE TABLE meta (
    key    TEXT PRIMARY KEY NOT NULL,
    value  TEXT NOT NULL
);
"#;

/// The settings every connection needs. WAL lets readers in other processes proceed while
/// the writer commits; NORMAL is the per-batch default and the writer raises it to FULL for
/// batches that gate side effects.
pub(crate) fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // An in-memory database answers "memory" here and that is fine: it has nothing to recover.
    let _mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    // No memory-mapped reads (SQLite's default): every page a mapped read touched stayed in
    // the process's resident set for as long as the connection lived, so resuming a session
    // of 5,000 messages kept its whole database file resident (about 1.3 MB per 1,000
    // messages, `bench -- history`). Reads copy pages with pread into SQLite's own page cache,
    // which is bounded (below); the file stays in the kernel's page cache.
    conn.pragma_update(None, "mmap_size", 0)?;
    // A page cache of 512 KiB, not SQLite's 2 MiB: a session's rows are read once, in order,
    // when it is resumed (the kernel's page cache keeps the file anyway), and writes append,
    // touching the last leaf and the few interior pages above it. The default filled up with
    // the pages of every session resumed and stayed full.
    conn.pragma_update(None, "cache_size", -512)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

/// Bring the schema up to date. Runs under `BEGIN IMMEDIATE`, so two processes opening the
/// same new database do not both apply migration 1.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let known = MIGRATIONS.len();
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
        let version = usize::try_from(version).map_err(|_| {
            StoreError::Corrupt(format!("the schema version {version} is negative"))
        })?;
        if version > known {
            return Err(StoreError::Corrupt(format!(
                "the database has schema version {version} but this tandem knows only {known}; it was written by a newer tandem, so upgrade tandem"
            )));
        }
        if version == known {
            tx.commit()?;
            return Ok(());
        }
        tx.execute_batch(MIGRATIONS[version])?;
        tx.pragma_update(
            None,
            "user_version",
            i64::try_from(version + 1).unwrap_or(i64::MAX),
        )?;
        tx.commit()?;
        tracing::info!(version = version + 1, "applied session database migration");
    }
}
