//! Where hooks meet the turn loop: `UserPromptSubmit` (and the `SessionStart` context) before the
//! first request, `PreToolUse` as a call is authorized, `PostToolUse` after a batch's results,
//! `Stop` when the model ends, `PreCompact` before a compaction, `Notification` when the turn
//! waits for the user.
//!
//! Invariants: what hooks tell the model is committed as a reminder message (durable, hidden
//! from the display, part of every later request, so the prompt prefix stays stable); a blocked
//! prompt is taken out of the history before the turn ends, so no later request carries it; a
//! stop is honoured while hooks run (their process groups are killed).

use serde_json::Map;

use super::*;
use crate::hooks::HookEvent;

/// How many times `Stop` hooks may continue one turn.
pub(super) const MAX_STOP_CONTINUATIONS: u32 = 3;

/// What the turn does after a prompt's hooks ran.
pub(super) enum PromptHooks {
    Proceed,
    /// A hook refused the prompt (the text for the turn's error).
    Refused(String),
    Interrupted,
}

impl Turn {
    /// Commit `context` for the model as one reminder message.
    fn commit_hook_context(&self, event: &str, context: &[String]) {
        if context.is_empty() {
            return;
        }
        let text = format!(
            "<hook-context event=\"{event}\">\n{}\n</hook-context>",
            context.join("\n\n")
        );
        self.session.commit(Message::user(
            vec![Part::Text { text }],
            Source::Reminder,
            Some(&self.turn_id),
        ));
    }

    /// Before the first request of a prompted turn: the `SessionStart` context, then the
    /// `UserPromptSubmit` hooks with the prompt's text.
    pub(super) async fn prompt_hooks(&mut self) -> PromptHooks {
        let start = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return PromptHooks::Interrupted,
            context = self.session.take_session_start_context() => context,
        };
        self.commit_hook_context("SessionStart", &start);
        let prompt = self.session.with_history(|history| {
            history
                .iter()
                .rev()
                .take_while(|m| m.meta.turn_id.as_deref() == Some(self.turn_id.as_str()))
                .find(|m| {
                    m.role == crate::engine::history::Role::User && m.meta.source == Source::User
                })
                .map(Message::text)
        });
        let Some(prompt) = prompt else {
            return PromptHooks::Proceed;
        };
        if !self
            .session
            .hook_set()
            .await
            .any(HookEvent::UserPromptSubmit, None)
        {
            return PromptHooks::Proceed;
        }
        let mut fields = Map::new();
        fields.insert("prompt".into(), Value::from(prompt));
        let outcome = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return PromptHooks::Interrupted,
            outcome = self.session.run_hooks(Some(&self.turn_id), HookEvent::UserPromptSubmit, None, fields) => outcome,
        };
        if let Some(reason) = outcome.blocked {
            // The prompt leaves the history (moved aside, like a rewind) so that no request
            // ever carries what a hook refused.
            if let Err(e) = self.session.withdraw_prompt(&self.turn_id).await {
                return PromptHooks::Refused(format!(
                    "a UserPromptSubmit hook refused the prompt ({reason}), and taking it out of the history failed: {e}"
                ));
            }
            return PromptHooks::Refused(format!(
                "the prompt was refused by a hook and is not sent to the model: {reason}"
            ));
        }
        self.commit_hook_context("UserPromptSubmit", &outcome.context);
        PromptHooks::Proceed
    }

    /// `PreToolUse` for one call about to be authorized.
    pub(super) async fn pre_tool_hooks(
        &self,
        call: &ToolCallRecord,
        arguments: &Value,
    ) -> Option<super::super::hooks::HookOutcome> {
        if !self
            .session
            .hook_set()
            .await
            .any(HookEvent::PreToolUse, Some(&call.name))
        {
            return Some(Default::default());
        }
        let mut fields = Map::new();
        fields.insert("tool_name".into(), Value::from(call.name.as_str()));
        if let Some(alias) = crate::hooks::claude_alias(&call.name) {
            fields.insert("tool_alias".into(), Value::from(alias));
        }
        fields.insert("tool_input".into(), arguments.clone());
        fields.insert("tool_use_id".into(), Value::from(call.id.as_str()));
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => None,
            outcome = self.session.run_hooks(Some(&self.turn_id), HookEvent::PreToolUse, Some(&call.name), fields) => Some(outcome),
        }
    }

    /// Whether a `PreToolUse` hook would see this call (then it is never started early: the
    /// hook decides before anything runs).
    pub(super) fn pre_tool_hooked(&self, tool: &str) -> bool {
        // Loaded before the first request (see `run`), so this never waits.
        self.hooks_loaded
            .as_ref()
            .is_some_and(|set| set.any(HookEvent::PreToolUse, Some(tool)))
    }

    /// `PostToolUse` for each call of a batch that completed; what the hooks say back (exit 2,
    /// a block decision, `additionalContext`) reaches the model as one reminder. `false` when
    /// the turn was stopped meanwhile.
    pub(super) async fn post_tool_hooks(&self, calls: &[ToolCallRecord]) -> bool {
        let set = self.session.hook_set().await;
        let hooked: Vec<&ToolCallRecord> = calls
            .iter()
            .filter(|c| set.any(HookEvent::PostToolUse, Some(&c.name)))
            .collect();
        if hooked.is_empty() {
            return true;
        }
        let results: HashMap<String, (ResultStatus, String)> =
            self.session.with_history(|history| {
                history
                    .iter()
                    .rev()
                    .take_while(|m| m.meta.turn_id.as_deref() == Some(self.turn_id.as_str()))
                    .filter_map(|m| {
                        let result = m.tool_result.as_ref()?;
                        Some((result.tool_call_id.clone(), (result.status, m.text())))
                    })
                    .collect()
            });
        let mut feedback = Vec::new();
        for call in hooked {
            let Some((status, text)) = results.get(&call.id) else {
                continue;
            };
            if *status != ResultStatus::Completed {
                continue;
            }
            let mut fields = Map::new();
            fields.insert("tool_name".into(), Value::from(call.name.as_str()));
            if let Some(alias) = crate::hooks::claude_alias(&call.name) {
                fields.insert("tool_alias".into(), Value::from(alias));
            }
            fields.insert(
                "tool_input".into(),
                serde_json::from_str(arguments_or_empty(&call.arguments)).unwrap_or(Value::Null),
            );
            fields.insert("tool_response".into(), Value::from(text.as_str()));
            fields.insert("tool_use_id".into(), Value::from(call.id.as_str()));
            let outcome = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return false,
                outcome = self.session.run_hooks(Some(&self.turn_id), HookEvent::PostToolUse, Some(&call.name), fields) => outcome,
            };
            if let Some(reason) = outcome.blocked {
                feedback.push(format!("After {} ({}): {reason}", call.name, call.id));
            }
            feedback.extend(outcome.context);
        }
        self.commit_hook_context("PostToolUse", &feedback);
        true
    }

    /// `Stop` when the model ended without calls: `Some(reason)` when a hook continues the
    /// turn (at most [`MAX_STOP_CONTINUATIONS`] times), `None` to end, `Err` on a stop.
    pub(super) async fn stop_hooks(&mut self) -> Result<Option<String>, ()> {
        if !self.session.hook_set().await.any(HookEvent::Stop, None) {
            return Ok(None);
        }
        let mut fields = Map::new();
        fields.insert(
            "stop_hook_active".into(),
            Value::Bool(self.stop_continuations > 0),
        );
        let outcome = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err(()),
            outcome = self.session.run_hooks(Some(&self.turn_id), HookEvent::Stop, None, fields) => outcome,
        };
        let Some(reason) = outcome.blocked else {
            return Ok(None);
        };
        if self.stop_continuations >= MAX_STOP_CONTINUATIONS {
            self.notice(
                NoticeKind::Warning,
                format!(
                    "a Stop hook asked to continue the turn again ({reason}), but it continued it {MAX_STOP_CONTINUATIONS} times already; the turn ends"
                ),
            );
            return Ok(None);
        }
        self.stop_continuations += 1;
        self.session.commit(Message::user(
            vec![Part::Text {
                text: format!("<hook-feedback event=\"Stop\">\n{reason}\n</hook-feedback>"),
            }],
            Source::Reminder,
            Some(&self.turn_id),
        ));
        Ok(Some(reason))
    }

    /// `PreCompact` (`trigger`: `auto` or `manual`); it cannot block, only warn.
    pub(super) async fn pre_compact_hooks(&self, trigger: &'static str) {
        if !self
            .session
            .hook_set()
            .await
            .any(HookEvent::PreCompact, Some(trigger))
        {
            return;
        }
        let mut fields = Map::new();
        fields.insert("trigger".into(), Value::from(trigger));
        fields.insert("custom_instructions".into(), Value::from(""));
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => {}
            _ = self.session.run_hooks(Some(&self.turn_id), HookEvent::PreCompact, Some(trigger), fields) => {}
        }
    }

    /// `Notification` as the turn starts waiting for the user; runs beside the turn (a
    /// notification never holds anything up).
    pub(super) fn notification_hooks(&self, message: String) {
        let Some(set) = &self.hooks_loaded else {
            return;
        };
        if !set.any(HookEvent::Notification, None) {
            return;
        }
        let session = self.session.clone();
        let turn_id = self.turn_id.clone();
        tokio::spawn(async move {
            let mut fields = Map::new();
            fields.insert("message".into(), Value::from(message));
            session
                .run_hooks(Some(&turn_id), HookEvent::Notification, None, fields)
                .await;
        });
    }
}
