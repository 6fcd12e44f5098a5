//! The turn's guards and safe points: a workspace replaced under the session, the durable mark
//! before a side effect, repeated identical calls, and steering.
//!
//! Invariants: a side effect runs only after its start is durable (invariant 8); steering is
//! applied only at safe points and never starts a turn (invariant 6); repeats earn warnings, at
//! most 3 a turn (invariant 9).

use super::*;

impl Turn {
    /// Whether the workspace folder was moved or replaced under the session (see
    /// `Workspace::moved`), checked off the async workers.
    pub(super) async fn workspace_moved(&self) -> Option<String> {
        let workspace = self.session.workspace.clone();
        tokio::task::spawn_blocking(move || workspace.moved())
            .await
            .unwrap_or_else(|e| Some(format!("checking the workspace folder failed: {e}")))
    }

    /// Whether a write or a command may run now. It may not when the workspace folder moved
    /// under the session, or when its start cannot be made durable (invariant 8, fail closed);
    /// then its result is a tool error that says why, and the turn ends at its next step.
    pub(super) async fn ready_for_side_effect(&self, call: &ToolCallRecord) -> bool {
        let refused = match self.workspace_moved().await {
            Some(why) => format!("not run: {why}"),
            None => match self.session.before_side_effect(&call.id, &call.name).await {
                Ok(()) => return true,
                Err(cause) => format!(
                    "not run: the session store cannot write ({cause}), so this {} could not be recorded as started; nothing was changed. Free disk space or end the program that holds the database lock, then prompt again",
                    call.name
                ),
            },
        };
        self.commit_result(call, ResultStatus::Failed, refused, None);
        false
    }

    /// Count identical consecutive calls across batches and warn the model at the threshold.
    pub(super) fn check_repeats(&mut self, calls: &[ToolCallRecord]) {
        for call in calls {
            // The same canonical form as the approval digest: key order does not make two calls differ.
            let canonical = serde_json::from_str::<Value>(arguments_or_empty(&call.arguments))
                .map(|v| crate::protocol::canonical_json(&v))
                .unwrap_or_else(|_| call.arguments.clone());
            let signature = format!("{}\u{0}{canonical}", call.name);
            if self.repeat_signature.as_deref() == Some(signature.as_str()) {
                self.repeat_streak += 1;
            } else {
                self.repeat_signature = Some(signature);
                self.repeat_streak = 1;
            }
            if self.repeat_streak == REPEAT_THRESHOLD && self.warnings < MAX_WARNINGS_PER_TURN {
                self.warnings += 1;
                let text = format!(
                    "<system-reminder>You have called {} with the same input {REPEAT_THRESHOLD} times in a row. \
                     The result will not change. Use what you already have, try a different approach, \
                     or finish and tell the user what is blocking you.</system-reminder>",
                    call.name
                );
                self.session.commit(Message::user(
                    vec![Part::Text { text }],
                    Source::Reminder,
                    Some(&self.turn_id),
                ));
            }
        }
    }

    /// Inject queued steering after a tool batch.
    pub(super) fn apply_steering(&self) {
        let texts = self.session.take_steering();
        self.commit_steering(texts);
    }

    /// Everything queued since the last safe point becomes one user message, so a client that
    /// steers many times adds one message to the next request, not one per steer.
    pub(super) fn commit_steering(&self, texts: Vec<String>) {
        if texts.is_empty() {
            return;
        }
        let text = texts.join("\n\n");
        self.session.commit(Message::user(
            vec![Part::Text { text: text.clone() }],
            Source::Steering,
            Some(&self.turn_id),
        ));
        self.emit(Event::SteeringApplied { text });
    }

    /// At the model's natural end: continue with queued steering (false), or stop accepting
    /// steering and end (true); see [`Conversation::finish_or_take_steering`].
    ///
    /// [`Conversation::finish_or_take_steering`]: crate::engine::conversation::Conversation::finish_or_take_steering
    pub(super) fn finish_or_steer(&self) -> bool {
        match self.session.finish_or_take_steering() {
            None => true,
            Some(texts) => {
                self.commit_steering(texts);
                false
            }
        }
    }
}
