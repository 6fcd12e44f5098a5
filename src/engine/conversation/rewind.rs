//! The conversation's side of checkpoints: its turns as rewind points, a turn's diff, the
//! rewind (files through [`crate::engine::checkpoint`], the history here) and the fork.
//!
//! Invariants: a rewind or a fork runs only from the session actor while no turn is active
//! (the actor refuses them with `turnInProgress` otherwise), on a complete history; the rows a
//! conversation rewind takes out of the history are moved to `superseded_messages` and that is
//! committed with full durability before the in-memory history is cut, so the two never
//! disagree after a crash (a crash in between leaves the store cut and the restart reads it).

use super::{lock, Conversation, SessionError};
use crate::engine::history::{new_id, now_ms, Message, NoticeKind, Role, Source};
use crate::protocol::{Checkpoint, PlanEntry, RestoreScope, RewindResult, TurnFileDiff};
use crate::store::SessionRecord;

/// Where one turn starts in the history.
#[derive(Debug, Clone)]
struct TurnSpan {
    turn_id: String,
    first_index: usize,
    started_at: u64,
    prompt: String,
}

fn no_store() -> SessionError {
    SessionError::Unsupported(
        "this session is not stored (a `tandem run` session), so it has no checkpoints; use `tandem serve`".to_owned(),
    )
}

impl Conversation {
    /// The turns of the parsed history, oldest first (call after `complete_history`).
    fn turn_spans(&self) -> Vec<TurnSpan> {
        let state = lock(&self.state);
        let mut spans: Vec<TurnSpan> = Vec::new();
        for (index, message) in state.history.iter().enumerate() {
            let Some(turn_id) = message.meta.turn_id.as_deref() else {
                continue;
            };
            if spans.iter().rev().any(|s| s.turn_id == turn_id) {
                continue;
            }
            let prompt = if message.role == Role::User && message.meta.source == Source::User {
                message.meta.typed.clone().unwrap_or_else(|| message.text())
            } else {
                String::new()
            };
            spans.push(TurnSpan {
                turn_id: turn_id.to_owned(),
                first_index: index,
                started_at: message.meta.ts,
                prompt,
            });
        }
        spans
    }

    fn span_of(&self, turn_id: &str) -> Result<TurnSpan, SessionError> {
        self.turn_spans()
            .into_iter()
            .find(|s| s.turn_id == turn_id)
            .ok_or_else(|| SessionError::UnknownTurn(turn_id.to_owned()))
    }

    /// Where a turn that is no longer in the conversation started, from its checkpoint
    /// records (the first one's time); `None` when it recorded nothing.
    async fn span_of_recorded(
        &self,
        recorder: &crate::engine::checkpoint::Recorder,
        turn_id: &str,
    ) -> Result<Option<TurnSpan>, SessionError> {
        let records = recorder
            .store
            .checkpoint_records(&self.id)
            .await
            .map_err(|e| SessionError::StoreUnavailable(e.cause()))?;
        Ok(records
            .iter()
            .filter(|r| r.turn_id == turn_id)
            .map(|r| r.created_at)
            .min()
            .map(|started_at| TurnSpan {
                turn_id: turn_id.to_owned(),
                first_index: usize::MAX,
                started_at,
                prompt: String::new(),
            }))
    }

    /// `session/checkpoints`: every turn of the conversation with what it changed.
    pub async fn checkpoints(&self) -> Result<Vec<Checkpoint>, SessionError> {
        let recorder = self.recorder().ok_or_else(no_store)?;
        self.complete_history().await?;
        recorder.settle().await;
        let mut changes = recorder
            .change_lists()
            .await
            .map_err(|e| SessionError::StoreUnavailable(e.cause()))?;
        Ok(self
            .turn_spans()
            .into_iter()
            .map(|span| {
                let (files, files_restored) = changes.remove(&span.turn_id).unwrap_or_default();
                Checkpoint {
                    turn_id: span.turn_id,
                    prompt: span.prompt,
                    created_at: span.started_at,
                    files,
                    files_restored,
                }
            })
            .collect())
    }

    /// `turn/diff`: everything `turn_id` changed in the workspace.
    pub async fn turn_diff(&self, turn_id: &str) -> Result<Vec<TurnFileDiff>, SessionError> {
        let recorder = self.recorder().ok_or_else(no_store)?;
        self.complete_history().await?;
        if let Err(unknown) = self.span_of(turn_id) {
            // A turn a conversation rewind took out still has its changes to show.
            self.span_of_recorded(&recorder, turn_id)
                .await?
                .ok_or(unknown)?;
        }
        recorder.settle().await;
        recorder
            .turn_diff(turn_id)
            .await
            .map_err(|e| SessionError::StoreUnavailable(e.cause()))
    }

    /// `session/rewind`: put the session back to just before `turn_id`. The caller (the actor)
    /// has checked that no turn runs.
    /// Answers the result, and the plan the history now ends with when the rewind changed it
    /// (the caller announces it after the answer).
    pub async fn rewind(
        &self,
        turn_id: &str,
        restore: RestoreScope,
        force: bool,
    ) -> Result<(RewindResult, Option<Vec<PlanEntry>>), SessionError> {
        let recorder = self.recorder().ok_or_else(no_store)?;
        self.complete_history().await?;
        let span = match self.span_of(turn_id) {
            Ok(span) => span,
            // A files rewind needs only the turn's records: it may name a turn a conversation
            // rewind took out already (forcing the files a `both` rewind left in conflict).
            Err(unknown) if !restore.conversation() => self
                .span_of_recorded(&recorder, turn_id)
                .await?
                .ok_or(unknown)?,
            Err(unknown) => return Err(unknown),
        };
        let mut result = RewindResult {
            restored: Vec::new(),
            conflicts: Vec::new(),
            conversation_rewound: false,
        };
        if restore.files() {
            recorder.settle().await;
            let records = recorder
                .store
                .checkpoint_records(&self.id)
                .await
                .map_err(|e| SessionError::StoreUnavailable(e.cause()))?
                .into_iter()
                .filter(|r| r.rewound_at.is_none())
                .filter(|r| r.turn_id == span.turn_id || r.created_at >= span.started_at)
                .collect();
            let outcome = recorder
                .rewind_files(records, force)
                .await
                .map_err(|e| SessionError::StoreUnavailable(e.cause()))?;
            result.restored = outcome.restored;
            result.conflicts = outcome.conflicts;
        }
        let mut plan = None;
        if restore.conversation() {
            plan = self.rewind_history(&span, &result).await?;
            result.conversation_rewound = true;
        }
        Ok((result, plan))
    }

    async fn rewind_history(
        &self,
        span: &TurnSpan,
        files: &RewindResult,
    ) -> Result<Option<Vec<PlanEntry>>, SessionError> {
        let Some(store) = &self.store else {
            return Err(no_store());
        };
        store
            .supersede_messages(&self.id, span.first_index as u64, &span.turn_id, now_ms())
            .await
            .map_err(|e| SessionError::StoreUnavailable(e.cause()))?;
        let mut state = lock(&self.state);
        // Ids of the rewound calls stay taken: their rows (tool runs, pending) keep them.
        let _ = state.tool_call_id_taken("");
        state.history.truncate(span.first_index);
        state.displays_stored = state.displays_stored.min(span.first_index);
        let excerpt: String = span.prompt.chars().take(60).collect();
        let what = if files.restored.is_empty() {
            "the conversation".to_owned()
        } else {
            format!(
                "the conversation and {} file{}",
                files.restored.len(),
                if files.restored.len() == 1 { "" } else { "s" }
            )
        };
        let text = if excerpt.is_empty() {
            format!("Rewound to before a turn: {what} restored")
        } else {
            format!("Rewound to before \u{201c}{excerpt}\u{201d}: {what} restored")
        };
        let notice = Message::notice(NoticeKind::Rewound, text, None);
        self.append_locked(&mut state, notice);
        // The plan is the one the remaining history last set.
        let plan = last_plan(&state.history);
        if plan == state.plan {
            return Ok(None);
        }
        state.plan = plan.clone();
        drop(state);
        self.store_plan(&plan);
        Ok(Some(plan))
    }

    /// Take turn `turn_id`'s messages (its prompt) out of the history, as a conversation rewind
    /// does (moved aside in the store first), without a notice: a `UserPromptSubmit` hook
    /// refused the prompt, so no request may carry it. Called by that turn itself.
    pub async fn withdraw_prompt(&self, turn_id: &str) -> Result<(), SessionError> {
        let span = self.span_of(turn_id)?;
        if let Some(store) = &self.store {
            store
                .supersede_messages(&self.id, span.first_index as u64, turn_id, now_ms())
                .await
                .map_err(|e| SessionError::StoreUnavailable(e.cause()))?;
        }
        let mut state = lock(&self.state);
        state.history.truncate(span.first_index);
        state.displays_stored = state.displays_stored.min(span.first_index);
        // The first prompt named the session; a refused one must not (the next prompt will).
        if !state.history.iter().any(|m| m.role == Role::User) {
            self.persist_session_fields(None, None, Some("(a prompt a hook refused)"));
        }
        Ok(())
    }

    /// `session/fork`: a new stored session with the history before `turn_id` (all of it
    /// without one); answers its id. The workspace is not touched.
    pub async fn fork(&self, turn_id: Option<&str>) -> Result<String, SessionError> {
        let store = self.store.clone().ok_or_else(no_store)?;
        self.complete_history().await?;
        let up_to = match turn_id {
            Some(turn_id) => Some(self.span_of(turn_id)?.first_index as u64),
            None => None,
        };
        let settings = self.settings();
        let title = {
            let state = lock(&self.state);
            state
                .history
                .iter()
                .find(|m| m.role == Role::User)
                .map(|m| m.text().chars().take(80).collect::<String>())
        };
        let id = new_id("s");
        let now = now_ms();
        store
            .fork_session(
                &self.id,
                SessionRecord {
                    id: id.clone(),
                    cwd: self.workspace.roots()[0].display().to_string(),
                    model: settings.model,
                    mode: settings.mode.as_str().to_owned(),
                    title,
                    created_at: now,
                    updated_at: now,
                    allow_network: settings.allow_network,
                },
                up_to,
            )
            .await
            .map_err(|e| SessionError::StoreUnavailable(e.cause()))?;
        Ok(id)
    }
}

/// The plan the last `update_plan` call of `history` set (none when it has none).
fn last_plan(history: &[Message]) -> Vec<PlanEntry> {
    history
        .iter()
        .rev()
        .flat_map(|m| m.tool_calls.iter().rev())
        .filter(|call| call.name == "update_plan")
        .find_map(|call| {
            let value = serde_json::from_str(&call.arguments).ok()?;
            match crate::tools::parse_args("update_plan", &value) {
                Ok(crate::tools::ToolArgs::UpdatePlan { entries }) => Some(entries),
                _ => None,
            }
        })
        .unwrap_or_default()
}
