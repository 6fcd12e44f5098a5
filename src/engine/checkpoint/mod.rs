//! Checkpoints: what a turn needs recorded to put every path it changes back (DESIGN §7.2), and
//! the queries over those records (`turn/diff`, `session/checkpoints`, `session/rewind`).
//!
//! A file tool records its path's prior state (and the folders its write creates) before it
//! writes, and the state it left after. A shell command is bracketed by two walks of the
//! workspace ([`Workspace::walk_for_snapshot`]): before it, every entry's state (contents
//! stored once per SHA-256) goes into a manifest, stored and marked pending together with the
//! call's "started" mark, so the same fsync covers both; after it, what changed is recorded
//! and the manifest is dropped. A per-session cache of (metadata → state) means a walk reads
//! only files that are new or changed since the last walk, which is what keeps a command in a
//! large workspace cheap.
//!
//! Invariants: what a rewind needs is durable before the side effect it undoes (the blobs and
//! the manifest are queued before `before_side_effect`'s barrier); records are only ever added
//! or marked rewound, never changed otherwise; all filesystem work runs on the blocking pool.
//! Does not: touch `.git` or any protected path, follow links, or decide conflicts by name
//! (states are compared by content hash and mode).

mod rewind;

pub use rewind::{RewindOutcome, RewindPlanError};

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::store::{CheckpointFileRecord, PendingScan, Store};
use crate::workspace::snapshot::{EntryId, FileState, StatKey};
use crate::workspace::{Workspace, WorkspacePath};

use super::conversation::lock;
use super::history::now_ms;

/// The most content one command's checkpoint stores that was not stored before (a model that
/// writes gigabytes before a command cannot make tandem copy them all).
pub const COMMAND_CAPTURE_BUDGET_BYTES: u64 = 256 * 1024 * 1024;

/// How much content is queued to the store before waiting for it to be written: bounds the
/// memory a first walk of a large workspace holds.
const QUEUED_BLOB_BYTES: usize = 16 * 1024 * 1024;

/// The per-session cache that lets a walk skip files it has seen unchanged.
#[derive(Default)]
pub struct CheckpointCache {
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    /// The state last seen for each entry, by the metadata it had then.
    known: HashMap<EntryId, (StatKey, FileState)>,
    /// Contents known to be in the store (or queued to it).
    stored: HashSet<String>,
    /// Whether manifests left pending by a crash were settled.
    settled: bool,
}

/// The state of the workspace a command started from, sorted by id.
pub struct CommandBaseline {
    entries: Vec<BaselineEntry>,
    /// The ignored entries at the walk's edge (see `Walk::ignored`).
    ignored: Vec<BaselineEntry>,
    /// When its walk started (for the racy rule).
    started: std::time::SystemTime,
    tool_call_id: String,
}

/// One entry of a baseline: its metadata when the walk saw it (`None` for one restored from a
/// stored manifest) and its state.
struct BaselineEntry {
    id: EntryId,
    key: Option<StatKey>,
    state: FileState,
}

/// Serializable manifest: entries by root and path.
#[derive(serde::Serialize, serde::Deserialize)]
struct Manifest {
    entries: Vec<ManifestEntry>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ManifestEntry {
    root: usize,
    path: String,
    state: FileState,
}

/// The store and workspace a checkpoint operation works with.
#[derive(Clone)]
pub struct Recorder {
    pub session_id: String,
    pub store: Store,
    pub workspace: Workspace,
    pub cache: Arc<CheckpointCache>,
}

/// A relative path as records keep it (`/`-separated, which a Unix path already is).
pub(crate) fn path_text(relative: &std::path::Path) -> String {
    relative.to_string_lossy().into_owned()
}

impl Recorder {
    fn store_content(&self, hash: &str, bytes: Vec<u8>) -> usize {
        let mut inner = lock(&self.cache.inner);
        if !inner.stored.insert(hash.to_owned()) {
            return 0;
        }
        drop(inner);
        let len = bytes.len();
        self.store
            .put_blob(&self.session_id, hash.to_owned(), bytes);
        len
    }

    fn record(&self, turn_id: &str, id: &EntryId, before: &FileState, after: Option<&FileState>) {
        let json = |s: &FileState| serde_json::to_string(s).unwrap_or_else(|_| "{}".to_owned());
        self.store.record_checkpoint_file(
            &self.session_id,
            CheckpointFileRecord {
                turn_id: turn_id.to_owned(),
                root: id.root as u32,
                path: path_text(&id.relative),
                before: json(before),
                after: after.map(json),
                before_hash: before.hash().map(str::to_owned),
                after_hash: after.and_then(FileState::hash).map(str::to_owned),
                created_at: now_ms(),
                rewound_at: None,
            },
        );
    }

    /// The state of `id` now, its content stored; blocking.
    fn capture_and_store(&self, id: &EntryId) -> FileState {
        match self.workspace.capture(id) {
            Ok(captured) => {
                if let (Some(bytes), Some(hash)) = (captured.content, captured.state.hash()) {
                    self.store_content(hash, bytes);
                }
                if let Some(key) = captured.key {
                    lock(&self.cache.inner)
                        .known
                        .insert(id.clone(), (key, captured.state.clone()));
                }
                captured.state
            }
            Err(e) => FileState::File {
                mode: 0,
                size: 0,
                hash: None,
                not_captured: Some(format!("it could not be read: {e}")),
            },
        }
    }

    /// Before a file tool writes `path`: record its state and that of every folder the write
    /// will create, as the turn's `before` (a path the turn touched already keeps its first).
    /// Blocking. Returns the ids to pass to [`Recorder::after_edit`].
    pub fn before_edit(&self, turn_id: &str, path: &WorkspacePath) -> Vec<EntryId> {
        let mut ids = Vec::new();
        // The folders the write may create, outermost first.
        let mut missing = Vec::new();
        let mut parent = path.relative.parent();
        while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
            let id = EntryId {
                root: path.root_index,
                relative: dir.to_path_buf(),
            };
            match self.workspace.capture(&id) {
                Ok(c) if c.state == FileState::Absent => missing.push(id),
                _ => break,
            }
            parent = dir.parent();
        }
        missing.reverse();
        for id in missing {
            self.record(turn_id, &id, &FileState::Absent, None);
            ids.push(id);
        }
        let id = EntryId {
            root: path.root_index,
            relative: normalized(&path.relative),
        };
        let before = self.capture_and_store(&id);
        self.record(turn_id, &id, &before, None);
        ids.push(id);
        ids
    }

    /// After a file tool's write (or its failure): record what `ids` hold now as the turn's
    /// `after`. Blocking.
    pub fn after_edit(&self, turn_id: &str, ids: &[EntryId]) {
        for id in ids {
            let after = self.capture_and_store(id);
            // The insert keeps the `before` recorded first; this only sets `after`.
            self.record(turn_id, id, &FileState::Absent, Some(&after));
        }
    }

    /// Before a shell command: the state of everything the walk sees, contents stored, and the
    /// manifest stored and marked pending for `tool_call_id`. Blocking; the caller's barrier
    /// (`before_side_effect`) makes it durable.
    pub fn before_command(&self, turn_id: &str, tool_call_id: &str) -> CommandBaseline {
        let walk = self.workspace.walk_for_snapshot();
        let started = walk.started.unwrap_or(std::time::SystemTime::UNIX_EPOCH);
        // What the cache knows, under one lock; the rest is read after it.
        let known: Vec<Option<FileState>> = {
            let inner = lock(&self.cache.inner);
            walk.entries
                .iter()
                .map(|(id, key)| {
                    inner
                        .known
                        .get(id)
                        .filter(|(known_key, _)| known_key == key && !key.racy(started))
                        .map(|(_, state)| state.clone())
                })
                .collect()
        };
        let mut budget = COMMAND_CAPTURE_BUDGET_BYTES;
        let mut queued = 0usize;
        let entries: Vec<BaselineEntry> = walk
            .entries
            .into_iter()
            .zip(known)
            .map(|((id, key), known)| {
                let state =
                    known.unwrap_or_else(|| self.read_state(&id, &key, &mut budget, &mut queued));
                BaselineEntry {
                    id,
                    key: Some(key),
                    state,
                }
            })
            .collect();
        let ignored: Vec<BaselineEntry> = walk
            .ignored
            .into_iter()
            .map(|(id, key)| BaselineEntry {
                id,
                state: ignored_state(&key),
                key: Some(key),
            })
            .collect();
        let serialized = Manifest {
            entries: entries
                .iter()
                .chain(&ignored)
                .map(|e| ManifestEntry {
                    root: e.id.root,
                    path: path_text(&e.id.relative),
                    state: e.state.clone(),
                })
                .collect(),
        };
        if let Ok(bytes) = serde_json::to_vec(&serialized) {
            let hash = crate::workspace::snapshot::content_hash(&bytes);
            self.store.put_blob(&self.session_id, hash.clone(), bytes);
            self.store.record_pending_scan(
                &self.session_id,
                PendingScan {
                    turn_id: turn_id.to_owned(),
                    tool_call_id: tool_call_id.to_owned(),
                    manifest: hash,
                },
            );
        }
        CommandBaseline {
            entries,
            ignored,
            started,
            tool_call_id: tool_call_id.to_owned(),
        }
    }

    /// The state of a walked entry the cache could not vouch for: read (and stored, within
    /// the budget), and cached when it did not change while it was read.
    fn read_state(
        &self,
        id: &EntryId,
        key: &StatKey,
        budget: &mut u64,
        queued: &mut usize,
    ) -> FileState {
        use crate::workspace::snapshot::StatKind;
        if key.kind == StatKind::File && key.size > *budget {
            return FileState::File {
                mode: key.mode,
                size: key.size,
                hash: None,
                not_captured: Some(
                    "one command's checkpoint budget (256 MiB of new content) was used up"
                        .to_owned(),
                ),
            };
        }
        match self.workspace.capture(id) {
            Ok(captured) => {
                if let (Some(bytes), Some(hash)) = (captured.content, captured.state.hash()) {
                    let added = self.store_content(hash, bytes);
                    *budget = budget.saturating_sub(added as u64);
                    *queued += added;
                    if *queued >= QUEUED_BLOB_BYTES {
                        // Bound the memory of queued contents: wait for the writer.
                        *queued = 0;
                        block_on_barrier(&self.store);
                    }
                }
                if let Some(key) = captured.key {
                    lock(&self.cache.inner)
                        .known
                        .insert(id.clone(), (key, captured.state.clone()));
                }
                captured.state
            }
            Err(e) => FileState::File {
                mode: key.mode,
                size: key.size,
                hash: None,
                not_captured: Some(format!("it could not be read: {e}")),
            },
        }
    }

    /// After a shell command: walk again, record every path whose state changed (added,
    /// modified, deleted), and drop the pending manifest. Blocking.
    pub fn after_command(&self, turn_id: &str, baseline: CommandBaseline) {
        let CommandBaseline {
            entries,
            ignored,
            started,
            tool_call_id,
        } = baseline;
        self.record_changes_since(turn_id, &entries, &ignored, started);
        self.store
            .clear_pending_scan(&self.session_id, &tool_call_id);
    }

    /// Walk now and record what differs from `before` (sorted by id), one merge of the two.
    fn record_changes_since(
        &self,
        turn_id: &str,
        before: &[BaselineEntry],
        before_ignored: &[BaselineEntry],
        before_started: std::time::SystemTime,
    ) {
        use std::cmp::Ordering;
        let now = self.workspace.walk_for_snapshot();
        self.record_ignored_changes(turn_id, before_ignored, &now.ignored);
        let mut budget = COMMAND_CAPTURE_BUDGET_BYTES;
        let mut queued = 0usize;
        let (mut b, mut n) = (0usize, 0usize);
        loop {
            let order = match (before.get(b), now.entries.get(n)) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(old), Some((id, _))) => old.id.cmp(id),
            };
            match order {
                Ordering::Less => {
                    // Gone since.
                    let old = &before[b];
                    if old.state != FileState::Absent {
                        self.record(turn_id, &old.id, &old.state, Some(&FileState::Absent));
                        lock(&self.cache.inner).known.remove(&old.id);
                    }
                    b += 1;
                }
                Ordering::Greater => {
                    // New since.
                    let (id, key) = &now.entries[n];
                    let after = self.read_state(id, key, &mut budget, &mut queued);
                    if after != FileState::Absent {
                        self.record(turn_id, id, &FileState::Absent, Some(&after));
                    }
                    n += 1;
                }
                Ordering::Equal => {
                    let old = &before[b];
                    let (id, key) = &now.entries[n];
                    // A file too large to capture cannot be compared by content: its metadata
                    // is all there is, racy or not.
                    let unchanged = old.key.as_ref().is_some_and(|k| {
                        k == key
                            && (!k.racy(before_started)
                                || key.size > crate::workspace::snapshot::MAX_CAPTURED_FILE_BYTES)
                    });
                    if !unchanged {
                        let after = self.read_state(id, key, &mut budget, &mut queued);
                        // (A folder whose times changed because its entries did is the same
                        // folder.)
                        if !old.state.same_as(&after) {
                            self.record(turn_id, id, &old.state, Some(&after));
                        }
                    }
                    b += 1;
                    n += 1;
                }
            }
        }
    }

    /// What changed among the ignored entries at the walk's edge: listed (never captured), so
    /// a rewind can say per path that it cannot put them back. Metadata is all there is.
    fn record_ignored_changes(
        &self,
        turn_id: &str,
        before: &[BaselineEntry],
        now: &[(EntryId, StatKey)],
    ) {
        use std::cmp::Ordering;
        let (mut b, mut n) = (0usize, 0usize);
        loop {
            let order = match (before.get(b), now.get(n)) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(old), Some((id, _))) => old.id.cmp(id),
            };
            match order {
                Ordering::Less => {
                    let old = &before[b];
                    self.record(turn_id, &old.id, &old.state, Some(&FileState::Absent));
                    b += 1;
                }
                Ordering::Greater => {
                    let (id, key) = &now[n];
                    self.record(turn_id, id, &FileState::Absent, Some(&ignored_state(key)));
                    n += 1;
                }
                Ordering::Equal => {
                    let old = &before[b];
                    let (id, key) = &now[n];
                    // Without metadata (a manifest read back after a crash) nothing can be told.
                    if old.key.as_ref().is_some_and(|k| k != key) {
                        self.record(turn_id, id, &old.state, Some(&ignored_state(key)));
                    }
                    b += 1;
                    n += 1;
                }
            }
        }
    }

    /// Manifests left pending by a crash: what changed since each is attributed to its turn,
    /// then it is dropped. Runs once per session, before its first turn or rewind.
    pub async fn settle(&self) {
        if std::mem::replace(&mut lock(&self.cache.inner).settled, true) {
            return;
        }
        let Ok(scans) = self.store.pending_scans(&self.session_id).await else {
            return;
        };
        for scan in scans {
            let blobs = self
                .store
                .blobs(&self.session_id, vec![scan.manifest.clone()])
                .await
                .unwrap_or_default();
            let manifest: Option<Manifest> = blobs
                .get(&scan.manifest)
                .and_then(|b| serde_json::from_slice(b).ok());
            if let Some(manifest) = manifest {
                let (ignored, walked): (Vec<ManifestEntry>, Vec<ManifestEntry>) = manifest
                    .entries
                    .into_iter()
                    .partition(|e| matches!(e.state, FileState::Ignored { .. }));
                let to_entries = |list: Vec<ManifestEntry>| -> Vec<BaselineEntry> {
                    let mut entries: Vec<BaselineEntry> = list
                        .into_iter()
                        .map(|e| BaselineEntry {
                            id: EntryId {
                                root: e.root,
                                relative: e.path.into(),
                            },
                            // No metadata to trust after a restart: every entry is compared
                            // by content.
                            key: None,
                            state: e.state,
                        })
                        .collect();
                    entries.sort_unstable_by(|a, b| a.id.cmp(&b.id));
                    entries
                };
                let (entries, ignored) = (to_entries(walked), to_entries(ignored));
                let recorder = self.clone();
                let turn_id = scan.turn_id.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    recorder.record_changes_since(
                        &turn_id,
                        &entries,
                        &ignored,
                        std::time::SystemTime::UNIX_EPOCH,
                    );
                })
                .await;
            }
            self.store
                .clear_pending_scan(&self.session_id, &scan.tool_call_id);
        }
    }
}

/// The state of an ignored entry at the walk's edge.
fn ignored_state(key: &StatKey) -> FileState {
    FileState::Ignored {
        dir: key.kind == crate::workspace::snapshot::StatKind::Dir,
        size: key.size,
    }
}

/// Wait for the store's writer from a blocking thread (the walk runs on the blocking pool).
fn block_on_barrier(store: &Store) {
    let store = store.clone();
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        let _ = handle.block_on(store.barrier(crate::store::Durability::Normal));
    }
}

/// `a/./b` as `a/b`: records are keyed by the plain relative path.
fn normalized(relative: &std::path::Path) -> std::path::PathBuf {
    relative
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}
