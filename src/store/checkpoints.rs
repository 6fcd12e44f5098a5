//! Checkpoints in the store: file contents once per SHA-256 (`checkpoint_blobs`), what each
//! turn changed per path (`checkpoint_files`), the workspace manifest a running command started
//! from (`checkpoint_scans`), rewound messages (`superseded_messages`), forks and deletion.
//!
//! The store does not interpret a path's state: the engine hands it JSON (`before`, `after`)
//! plus the content hashes that JSON refers to, which the store keeps in columns of their own so
//! that deleting a session can tell which contents nobody refers to any more.

use std::collections::{HashMap, HashSet};

use rusqlite::{params, Connection, OptionalExtension};

use super::writer::answer;
use super::writer::sql::{insert_session, to_i64, to_u64};
use super::{Command, Reply, SessionRecord, Store, StoreError};

/// One path a turn changed, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointFileRecord {
    pub turn_id: String,
    pub root: u32,
    /// Relative to the root, `/`-separated.
    pub path: String,
    /// JSON of the path's state before the turn first touched it.
    pub before: String,
    /// JSON of its state at the end of the turn's last change; `None` until that is known.
    pub after: Option<String>,
    pub before_hash: Option<String>,
    pub after_hash: Option<String>,
    /// When the path was first touched by the turn (ms since the epoch).
    pub created_at: u64,
    /// When a `files` rewind put this change back.
    pub rewound_at: Option<u64>,
}

/// The workspace manifest a command started from, kept until the command's changes are
/// recorded: after a crash it tells what the command may have changed.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingScan {
    pub turn_id: String,
    pub tool_call_id: String,
    /// The hash of the manifest's blob (JSON).
    pub manifest: String,
}

/// How an op completes once its batch committed (`None`) or failed (the error).
pub(super) use super::writer::Finish;

pub(super) enum CheckpointOp {
    PutBlob {
        hash: String,
        bytes: Vec<u8>,
    },
    /// Insert a path's record, or update the `after` of the one the turn has (the first
    /// `before` stays).
    RecordFile(CheckpointFileRecord),
    PendingScan(PendingScan),
    ClearPendingScan {
        tool_call_id: String,
    },
    /// Mark the records `(turn, root, path)` as put back by a rewind.
    MarkRewound {
        entries: Vec<(String, u32, String)>,
        at: u64,
    },
    Records {
        reply: Reply<Vec<CheckpointFileRecord>>,
    },
    Blobs {
        hashes: Vec<String>,
        reply: Reply<HashMap<String, Vec<u8>>>,
    },
    PendingScans {
        reply: Reply<Vec<PendingScan>>,
    },
    Supersede {
        from_position: u64,
        turn_id: String,
        at: u64,
        reply: Reply<u64>,
    },
    Fork {
        record: SessionRecord,
        up_to_position: Option<u64>,
        reply: Reply<()>,
    },
    Delete {
        reply: Reply<bool>,
    },
}

impl CheckpointOp {
    pub(super) fn writes(&self) -> bool {
        !matches!(
            self,
            CheckpointOp::Records { .. }
                | CheckpointOp::Blobs { .. }
                | CheckpointOp::PendingScans { .. }
        )
    }

    pub(super) fn answers(&self) -> bool {
        matches!(
            self,
            CheckpointOp::Records { .. }
                | CheckpointOp::Blobs { .. }
                | CheckpointOp::PendingScans { .. }
                | CheckpointOp::Supersede { .. }
                | CheckpointOp::Fork { .. }
                | CheckpointOp::Delete { .. }
        )
    }

    /// A rewind, a fork and a deletion are the user's explicit acts: they survive power loss.
    pub(super) fn full(&self) -> bool {
        matches!(
            self,
            CheckpointOp::MarkRewound { .. }
                | CheckpointOp::Supersede { .. }
                | CheckpointOp::Fork { .. }
                | CheckpointOp::Delete { .. }
        )
    }

    /// Complete an op whose batch never ran (see `writer::skip`).
    pub(super) fn skip(self, cause: &str) -> Finish {
        let unavailable = || StoreError::Unavailable(cause.to_owned());
        match self {
            CheckpointOp::Records { reply } => send_err(reply, unavailable()),
            CheckpointOp::Blobs { reply, .. } => send_err(reply, unavailable()),
            CheckpointOp::PendingScans { reply } => send_err(reply, unavailable()),
            CheckpointOp::Supersede { reply, .. } => send_err(reply, unavailable()),
            CheckpointOp::Fork { reply, .. } => send_err(reply, unavailable()),
            CheckpointOp::Delete { reply } => send_err(reply, unavailable()),
            _ => Box::new(|_| ()),
        }
    }

    /// Run the op inside the writer's open transaction: how to complete it, and the error
    /// of a write that failed (the batch is then rolled back whole).
    pub(super) fn apply(
        self,
        conn: &Connection,
        session_id: &str,
    ) -> (Finish, Option<rusqlite::Error>) {
        let done = || -> Finish { Box::new(|_| ()) };
        match self {
            CheckpointOp::PutBlob { hash, bytes } => (
                done(),
                conn.prepare_cached(
                    "INSERT OR IGNORE INTO checkpoint_blobs (hash, bytes) VALUES (?1, ?2)",
                )
                .and_then(|mut s| s.execute(params![hash, bytes]))
                .err(),
            ),
            CheckpointOp::RecordFile(r) => (done(), record_file(conn, session_id, &r).err()),
            CheckpointOp::PendingScan(p) => (
                done(),
                conn.prepare_cached(
                    "INSERT OR REPLACE INTO checkpoint_scans (session_id, turn_id, tool_call_id, manifest)
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .and_then(|mut s| s.execute(params![session_id, p.turn_id, p.tool_call_id, p.manifest]))
                .err(),
            ),
            CheckpointOp::ClearPendingScan { tool_call_id } => (
                done(),
                conn.prepare_cached(
                    "DELETE FROM checkpoint_scans WHERE session_id = ?1 AND tool_call_id = ?2",
                )
                .and_then(|mut s| s.execute(params![session_id, tool_call_id]))
                .err(),
            ),
            CheckpointOp::MarkRewound { entries, at } => {
                let result = (|| {
                    let mut s = conn.prepare_cached(
                        "UPDATE checkpoint_files SET rewound_at = ?5
                         WHERE session_id = ?1 AND turn_id = ?2 AND root = ?3 AND path = ?4
                           AND rewound_at IS NULL",
                    )?;
                    for (turn, root, path) in &entries {
                        s.execute(params![session_id, turn, root, path, to_i64(at)])?;
                    }
                    Ok(())
                })();
                (done(), result.err())
            }
            CheckpointOp::Records { reply } => (answer(reply, records(conn, session_id)), None),
            CheckpointOp::Blobs { hashes, reply } => (answer(reply, blobs(conn, &hashes)), None),
            CheckpointOp::PendingScans { reply } => {
                (answer(reply, pending_scans(conn, session_id)), None)
            }
            CheckpointOp::Supersede {
                from_position,
                turn_id,
                at,
                reply,
            } => match supersede(conn, session_id, from_position, &turn_id, at) {
                Ok(moved) => (answer(reply, Ok(moved)), None),
                Err(e) => (done_err(reply), Some(e)),
            },
            CheckpointOp::Fork {
                record,
                up_to_position,
                reply,
            } => match fork(conn, session_id, &record, up_to_position) {
                Ok(()) => (answer(reply, Ok(())), None),
                Err(e) => (done_err(reply), Some(e)),
            },
            CheckpointOp::Delete { reply } => match delete(conn, session_id) {
                Ok(existed) => (answer(reply, Ok(existed)), None),
                Err(e) => (done_err(reply), Some(e)),
            },
        }
    }
}

fn send_err<T: Send + 'static>(reply: Reply<T>, error: StoreError) -> Finish {
    Box::new(move |_| {
        let _ = reply.send(Err(error));
    })
}

/// A reply for an op whose write failed: the batch's error reaches it.
fn done_err<T: Send + 'static>(reply: Reply<T>) -> Finish {
    Box::new(move |failure| {
        let error = failure.map_or(StoreError::Closed, StoreError::duplicate);
        let _ = reply.send(Err(error));
    })
}

fn record_file(
    conn: &Connection,
    session_id: &str,
    r: &CheckpointFileRecord,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "INSERT INTO checkpoint_files
             (session_id, turn_id, root, path, before, after, before_hash, after_hash, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (session_id, turn_id, root, path) DO UPDATE SET
             after = excluded.after, after_hash = excluded.after_hash",
    )?
    .execute(params![
        session_id,
        r.turn_id,
        r.root,
        r.path,
        r.before,
        r.after,
        r.before_hash,
        r.after_hash,
        to_i64(r.created_at)
    ])
}

fn records(conn: &Connection, session_id: &str) -> Result<Vec<CheckpointFileRecord>, StoreError> {
    let mut s = conn.prepare_cached(
        "SELECT turn_id, root, path, before, after, before_hash, after_hash, created_at, rewound_at
         FROM checkpoint_files WHERE session_id = ?1 ORDER BY rowid",
    )?;
    let rows = s.query_map([session_id], |row| {
        Ok(CheckpointFileRecord {
            turn_id: row.get(0)?,
            root: row.get(1)?,
            path: row.get(2)?,
            before: row.get(3)?,
            after: row.get(4)?,
            before_hash: row.get(5)?,
            after_hash: row.get(6)?,
            created_at: to_u64(row.get(7)?),
            rewound_at: row.get::<_, Option<i64>>(8)?.map(to_u64),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn blobs(conn: &Connection, hashes: &[String]) -> Result<HashMap<String, Vec<u8>>, StoreError> {
    let mut s = conn.prepare_cached("SELECT bytes FROM checkpoint_blobs WHERE hash = ?1")?;
    let mut out = HashMap::with_capacity(hashes.len());
    for hash in hashes {
        if out.contains_key(hash) {
            continue;
        }
        if let Some(bytes) = s
            .query_row([hash], |row| row.get::<_, Vec<u8>>(0))
            .optional()?
        {
            out.insert(hash.clone(), bytes);
        }
    }
    Ok(out)
}

fn pending_scans(conn: &Connection, session_id: &str) -> Result<Vec<PendingScan>, StoreError> {
    let mut s = conn.prepare_cached(
        "SELECT turn_id, tool_call_id, manifest FROM checkpoint_scans WHERE session_id = ?1 ORDER BY rowid",
    )?;
    let rows = s.query_map([session_id], |row| {
        Ok(PendingScan {
            turn_id: row.get(0)?,
            tool_call_id: row.get(1)?,
            manifest: row.get(2)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Move the messages from `from_position` on to `superseded_messages`, so the history the model
/// sees ends before them while the rows stay in the database.
fn supersede(
    conn: &Connection,
    session_id: &str,
    from_position: u64,
    turn_id: &str,
    at: u64,
) -> rusqlite::Result<u64> {
    let moved = conn
        .prepare_cached(
            "INSERT INTO superseded_messages
                 (session_id, position, message_id, turn_id, role, json, display, rewind_turn_id, superseded_at)
             SELECT session_id, position, message_id, turn_id, role, json, display, ?3, ?4
             FROM messages WHERE session_id = ?1 AND position >= ?2 ORDER BY position",
        )?
        .execute(params![session_id, to_i64(from_position), turn_id, to_i64(at)])?;
    conn.prepare_cached("DELETE FROM messages WHERE session_id = ?1 AND position >= ?2")?
        .execute(params![session_id, to_i64(from_position)])?;
    Ok(moved as u64)
}

/// A new session `record` holding the messages of `source` before `up_to_position` (all of
/// them without it) and its permission rules.
fn fork(
    conn: &Connection,
    source: &str,
    record: &SessionRecord,
    up_to_position: Option<u64>,
) -> rusqlite::Result<()> {
    insert_session(conn, record)?;
    conn.prepare_cached(
        "INSERT INTO messages (session_id, position, message_id, turn_id, role, json, display)
         SELECT ?2, position, message_id, turn_id, role, json, display FROM messages
         WHERE session_id = ?1 AND position < ?3 ORDER BY position",
    )?
    .execute(params![
        source,
        record.id,
        up_to_position.map_or(i64::MAX, to_i64)
    ])?;
    conn.prepare_cached(
        "INSERT INTO rules (session_id, kind, value) SELECT ?2, kind, value FROM rules WHERE session_id = ?1",
    )?
    .execute(params![source, record.id])?;
    Ok(())
}

/// Delete a session (its rows go with it: messages, events, rules, checkpoints) and every stored
/// content no remaining checkpoint or pending manifest refers to. `false` if there was none.
fn delete(conn: &Connection, session_id: &str) -> rusqlite::Result<bool> {
    let deleted = conn
        .prepare_cached("DELETE FROM sessions WHERE id = ?1")?
        .execute([session_id])?;
    if deleted == 0 {
        return Ok(false);
    }
    // The contents a pending manifest lists are in use by a command that runs right now (or
    // was cut by a crash and is settled later): keep them.
    let mut keep: HashSet<String> = HashSet::new();
    {
        let mut s = conn.prepare_cached(
            "SELECT b.bytes FROM checkpoint_scans s JOIN checkpoint_blobs b ON b.hash = s.manifest",
        )?;
        let manifests = s.query_map([], |row| row.get::<_, Vec<u8>>(0))?;
        for manifest in manifests {
            let manifest = manifest?;
            keep.extend(manifest_hashes(&manifest));
        }
    }
    let mut s = conn.prepare_cached(
        "SELECT hash FROM checkpoint_blobs WHERE hash NOT IN (
             SELECT before_hash FROM checkpoint_files WHERE before_hash IS NOT NULL
             UNION SELECT after_hash FROM checkpoint_files WHERE after_hash IS NOT NULL
             UNION SELECT manifest FROM checkpoint_scans)",
    )?;
    let orphans: Vec<String> = s
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    let mut remove = conn.prepare_cached("DELETE FROM checkpoint_blobs WHERE hash = ?1")?;
    for hash in orphans.iter().filter(|h| !keep.contains(*h)) {
        remove.execute([hash])?;
    }
    Ok(true)
}

/// The content hashes a manifest (JSON, see `engine::checkpoint`) names: every 64-hex-digit
/// string value of `"hash"` members. Read loosely on purpose: a manifest the store cannot parse
/// keeps nothing alive beyond what rows refer to.
fn manifest_hashes(manifest: &[u8]) -> Vec<String> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(manifest) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut stack = vec![&value];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::Object(map) => {
                for (key, member) in map {
                    match member {
                        serde_json::Value::String(s) if key == "hash" && s.len() == 64 => {
                            out.push(s.clone())
                        }
                        other => stack.push(other),
                    }
                }
            }
            serde_json::Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    out
}

impl Store {
    fn checkpoint(&self, session_id: &str, op: CheckpointOp) {
        self.send(Command::Checkpoint {
            session_id: session_id.to_owned(),
            op,
        });
    }

    async fn ask_checkpoint<T>(
        &self,
        session_id: &str,
        make: impl FnOnce(Reply<T>) -> CheckpointOp,
    ) -> Result<T, StoreError> {
        let session_id = session_id.to_owned();
        self.ask(|reply| Command::Checkpoint {
            session_id,
            op: make(reply),
        })
        .await
    }

    /// Store a content under its hash (nothing happens when it is there already).
    pub fn put_blob(&self, session_id: &str, hash: String, bytes: Vec<u8>) {
        self.checkpoint(session_id, CheckpointOp::PutBlob { hash, bytes });
    }

    pub fn record_checkpoint_file(&self, session_id: &str, record: CheckpointFileRecord) {
        self.checkpoint(session_id, CheckpointOp::RecordFile(record));
    }

    pub fn record_pending_scan(&self, session_id: &str, scan: PendingScan) {
        self.checkpoint(session_id, CheckpointOp::PendingScan(scan));
    }

    pub fn clear_pending_scan(&self, session_id: &str, tool_call_id: &str) {
        self.checkpoint(
            session_id,
            CheckpointOp::ClearPendingScan {
                tool_call_id: tool_call_id.to_owned(),
            },
        );
    }

    pub fn mark_rewound(&self, session_id: &str, entries: Vec<(String, u32, String)>, at: u64) {
        self.checkpoint(session_id, CheckpointOp::MarkRewound { entries, at });
    }

    /// Every checkpoint record of the session, rewound ones included, in the order the paths
    /// were first touched.
    pub async fn checkpoint_records(
        &self,
        session_id: &str,
    ) -> Result<Vec<CheckpointFileRecord>, StoreError> {
        self.ask_checkpoint(session_id, |reply| CheckpointOp::Records { reply })
            .await
    }

    /// The stored contents of `hashes` (those the store has).
    pub async fn blobs(
        &self,
        session_id: &str,
        hashes: Vec<String>,
    ) -> Result<HashMap<String, Vec<u8>>, StoreError> {
        self.ask_checkpoint(session_id, |reply| CheckpointOp::Blobs { hashes, reply })
            .await
    }

    pub async fn pending_scans(&self, session_id: &str) -> Result<Vec<PendingScan>, StoreError> {
        self.ask_checkpoint(session_id, |reply| CheckpointOp::PendingScans { reply })
            .await
    }

    /// Move the session's messages from `from_position` on out of its history (see
    /// `superseded_messages`); answers how many moved, once committed with full durability.
    pub async fn supersede_messages(
        &self,
        session_id: &str,
        from_position: u64,
        turn_id: &str,
        at: u64,
    ) -> Result<u64, StoreError> {
        let turn_id = turn_id.to_owned();
        self.ask_checkpoint(session_id, |reply| CheckpointOp::Supersede {
            from_position,
            turn_id,
            at,
            reply,
        })
        .await
    }

    /// Store `record` as a new session with the messages of `source` before `up_to_position`.
    pub async fn fork_session(
        &self,
        source: &str,
        record: SessionRecord,
        up_to_position: Option<u64>,
    ) -> Result<(), StoreError> {
        self.ask_checkpoint(source, |reply| CheckpointOp::Fork {
            record,
            up_to_position,
            reply,
        })
        .await
    }

    /// Delete a session and the contents only it used; `false` if the store had no such session.
    pub async fn delete_session(&self, session_id: &str) -> Result<bool, StoreError> {
        self.ask_checkpoint(session_id, |reply| CheckpointOp::Delete { reply })
            .await
    }
}
