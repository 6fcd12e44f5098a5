//! Reading checkpoints back: a turn's diff, the per-turn change lists, and the file half of a
//! rewind (conflict detection, then the confined restore, latest turn first).

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use crate::protocol::{CheckpointFile, FileChange, RewindConflict, TurnFileDiff};
use crate::store::{CheckpointFileRecord, StoreError};
use crate::workspace::snapshot::{EntryId, FileState};

use super::Recorder;

/// What the file half of a rewind did.
#[derive(Debug, Default)]
pub struct RewindOutcome {
    pub restored: Vec<String>,
    pub conflicts: Vec<RewindConflict>,
}

#[derive(Debug, thiserror::Error)]
pub enum RewindPlanError {
    #[error("{0}")]
    Store(#[from] StoreError),
}

fn state(json: &str) -> FileState {
    serde_json::from_str(json).unwrap_or(FileState::File {
        mode: 0,
        size: 0,
        hash: None,
        not_captured: Some("its record could not be read".to_owned()),
    })
}

fn change_of(before: &FileState, after: &FileState) -> FileChange {
    match (before, after) {
        (FileState::Absent, _) => FileChange::Added,
        (_, FileState::Absent) => FileChange::Deleted,
        _ => FileChange::Modified,
    }
}

impl Recorder {
    fn display(&self, root: u32, path: &str) -> String {
        self.workspace
            .display_path(root as usize, std::path::Path::new(path))
    }

    /// The per-turn change lists of `turns` (a turn's paths in the order it touched them).
    pub async fn change_lists(
        &self,
    ) -> Result<BTreeMap<String, (Vec<CheckpointFile>, bool)>, StoreError> {
        let records = self.store.checkpoint_records(&self.session_id).await?;
        let mut out: BTreeMap<String, (Vec<CheckpointFile>, bool)> = BTreeMap::new();
        for r in records {
            let before = state(&r.before);
            let after = match &r.after {
                Some(after) => state(after),
                None => continue,
            };
            if before.same_as(&after) {
                continue;
            }
            let entry = out.entry(r.turn_id.clone()).or_default();
            entry.0.push(CheckpointFile {
                path: self.display(r.root, &r.path),
                change: change_of(&before, &after),
            });
            entry.1 |= r.rewound_at.is_some();
        }
        Ok(out)
    }

    /// Everything `turn_id` changed, before the turn against its end (or now, for a path whose
    /// change is still running).
    pub async fn turn_diff(&self, turn_id: &str) -> Result<Vec<TurnFileDiff>, StoreError> {
        let records: Vec<CheckpointFileRecord> = self
            .store
            .checkpoint_records(&self.session_id)
            .await?
            .into_iter()
            .filter(|r| r.turn_id == turn_id)
            .collect();
        let mut states = Vec::with_capacity(records.len());
        for r in &records {
            let before = state(&r.before);
            let after = match &r.after {
                Some(after) => state(after),
                None => {
                    let recorder = self.clone();
                    let id = EntryId {
                        root: r.root as usize,
                        relative: PathBuf::from(&r.path),
                    };
                    tokio::task::spawn_blocking(move || recorder.capture_and_store(&id))
                        .await
                        .unwrap_or(FileState::Absent)
                }
            };
            if before.same_as(&after) {
                continue;
            }
            states.push((r, before, after));
        }
        let hashes: Vec<String> = states
            .iter()
            .flat_map(|(_, b, a)| [b.hash(), a.hash()])
            .flatten()
            .map(str::to_owned)
            .collect();
        let blobs = self.store.blobs(&self.session_id, hashes).await?;
        let text = |s: &FileState| -> (Option<String>, bool) {
            match s.hash().and_then(|h| blobs.get(h)) {
                Some(bytes) => match std::str::from_utf8(bytes) {
                    Ok(t) if !t.contains('\0') => (Some(t.to_owned()), false),
                    _ => (None, true),
                },
                None => (None, matches!(s, FileState::File { .. })),
            }
        };
        let mut out = Vec::with_capacity(states.len());
        for (r, before, after) in states {
            let path = self.display(r.root, &r.path);
            let (old_text, old_binary) = text(&before);
            let (new_text, new_binary) = text(&after);
            let binary = old_binary || new_binary;
            let uncaptured = before.not_captured().is_some() || after.not_captured().is_some();
            let unified = if binary
                || uncaptured
                || matches!(before, FileState::Dir { .. })
                || matches!(after, FileState::Dir { .. })
            {
                String::new()
            } else {
                let old_header = if old_text.is_some() {
                    format!("a/{path}")
                } else {
                    "/dev/null".to_owned()
                };
                let new_header = if new_text.is_some() {
                    format!("b/{path}")
                } else {
                    "/dev/null".to_owned()
                };
                crate::workspace::diff::unified_diff(
                    old_text.as_deref().unwrap_or(""),
                    new_text.as_deref().unwrap_or(""),
                    &old_header,
                    &new_header,
                )
            };
            let not_captured = before
                .not_captured()
                .or(after.not_captured())
                .map(str::to_owned);
            out.push(TurnFileDiff {
                path,
                change: change_of(&before, &after),
                old_text: if binary { None } else { old_text },
                new_text: if binary { None } else { new_text },
                unified,
                binary: binary.then_some(true),
                not_captured,
            });
        }
        Ok(out)
    }

    /// Put back every path the records (the turns being rewound, not rewound before) changed:
    /// each path gets its state from before the earliest of them, unless it changed since the
    /// latest left it (a conflict, restored only with `force`). Marks what it restored.
    pub async fn rewind_files(
        &self,
        records: Vec<CheckpointFileRecord>,
        force: bool,
    ) -> Result<RewindOutcome, StoreError> {
        // Per path, its records in the order they were written (the order of the turns).
        let mut by_path: BTreeMap<(u32, String), Vec<CheckpointFileRecord>> = BTreeMap::new();
        for r in records {
            by_path.entry((r.root, r.path.clone())).or_default().push(r);
        }
        let hashes: Vec<String> = by_path
            .values()
            .filter_map(|rs| rs.first())
            .filter_map(|r| r.before_hash.clone())
            .collect();
        let blobs = self.store.blobs(&self.session_id, hashes).await?;
        let recorder = self.clone();
        let (outcome, marks) =
            tokio::task::spawn_blocking(move || recorder.restore_blocking(by_path, &blobs, force))
                .await
                .unwrap_or_default();
        if !marks.is_empty() {
            self.store
                .mark_rewound(&self.session_id, marks, super::now_ms());
        }
        Ok(outcome)
    }

    #[allow(clippy::type_complexity)]
    fn restore_blocking(
        &self,
        by_path: BTreeMap<(u32, String), Vec<CheckpointFileRecord>>,
        blobs: &std::collections::HashMap<String, Vec<u8>>,
        force: bool,
    ) -> (RewindOutcome, Vec<(String, u32, String)>) {
        let mut outcome = RewindOutcome::default();
        let mut marks = Vec::new();
        // Decide per path first: target, and whether it may be written.
        struct Step {
            id: EntryId,
            display: String,
            target: FileState,
            records: Vec<CheckpointFileRecord>,
        }
        let mut steps = Vec::new();
        for ((root, path), records) in by_path {
            let display = self.display(root, &path);
            let id = EntryId {
                root: root as usize,
                relative: PathBuf::from(&path),
            };
            let target = state(&records[0].before);
            // An ignored path was never captured: nothing to put back, and nothing to compare
            // what is there now with, so it is left as it is.
            let ignored = records.iter().any(|r| {
                matches!(state(&r.before), FileState::Ignored { .. })
                    || r.after
                        .as_deref()
                        .is_some_and(|a| matches!(state(a), FileState::Ignored { .. }))
            });
            if ignored {
                outcome.conflicts.push(RewindConflict {
                    path: display,
                    reason: format!(
                        "cannot be put back: {}",
                        crate::workspace::snapshot::IGNORED_REASON
                    ),
                });
                continue;
            }
            let now = match self.workspace.capture(&id) {
                Ok(c) => c.state,
                Err(e) => {
                    outcome.conflicts.push(RewindConflict {
                        path: display,
                        reason: format!("it could not be read: {e}"),
                    });
                    continue;
                }
            };
            let mark = |marks: &mut Vec<(String, u32, String)>| {
                for r in &records {
                    marks.push((r.turn_id.clone(), root, path.clone()));
                }
            };
            if now.same_as(&target) || (now == FileState::Absent && target == FileState::Absent) {
                // Already as it was (a rewind repeated after a crash, or a change undone by hand).
                outcome.restored.push(display);
                mark(&mut marks);
                continue;
            }
            if let Some(why) = target.not_captured() {
                outcome.conflicts.push(RewindConflict {
                    path: display,
                    reason: format!("cannot be put back: {why}"),
                });
                continue;
            }
            if let Some(hash) = target.hash() {
                if !blobs.contains_key(hash) {
                    outcome.conflicts.push(RewindConflict {
                        path: display,
                        reason: "cannot be put back: its content is missing from the session store"
                            .to_owned(),
                    });
                    continue;
                }
            }
            if !force {
                if let Some(reason) = conflict(&records, &now) {
                    outcome.conflicts.push(RewindConflict {
                        path: display,
                        reason,
                    });
                    continue;
                }
            }
            steps.push(Step {
                id,
                display,
                target,
                records,
            });
        }
        // Removals deepest first (what a turn created inside a folder it created), then the
        // rest outermost first (a folder before what goes into it).
        let depth = |s: &Step| s.id.relative.components().count();
        let (mut removals, mut writes): (Vec<Step>, Vec<Step>) = steps
            .into_iter()
            .partition(|s| s.target == FileState::Absent);
        removals.sort_by_key(|s| std::cmp::Reverse(depth(s)));
        writes.sort_by_key(depth);
        let mut restored_ids: HashSet<EntryId> = HashSet::new();
        for step in removals.into_iter().chain(writes) {
            let content = step
                .target
                .hash()
                .and_then(|h| blobs.get(h))
                .map(Vec::as_slice);
            match self
                .workspace
                .restore_entry(&step.id, &step.target, content)
            {
                Ok(()) => {
                    outcome.restored.push(step.display);
                    for r in &step.records {
                        marks.push((r.turn_id.clone(), r.root, r.path.clone()));
                    }
                    restored_ids.insert(step.id);
                }
                Err(reason) => outcome.conflicts.push(RewindConflict {
                    path: step.display,
                    reason: format!("could not be put back: {reason}"),
                }),
            }
        }
        outcome.restored.sort();
        (outcome, marks)
    }
}

/// Why a path must be left alone: it changed since the turns left it, or between two of them.
fn conflict(records: &[CheckpointFileRecord], now: &FileState) -> Option<String> {
    for pair in records.windows(2) {
        if let (Some(after), before) = (&pair[0].after, &pair[1].before) {
            if !state(after).same_as(&state(before)) {
                return Some(
                    "changed between this session's turns by someone else; pass force to put it back anyway".to_owned(),
                );
            }
        }
    }
    let last = records.last()?;
    let expected = state(last.after.as_deref()?);
    if now.same_as(&expected) || (*now == FileState::Absent && expected == FileState::Absent) {
        return None;
    }
    Some(
        "changed since this session's turns left it (by you or another program); pass force to put it back anyway".to_owned(),
    )
}
