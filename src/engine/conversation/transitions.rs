//! The conversation's state transitions: admitting a prompt or a retry, queueing steering,
//! switching model, mode and network access. Each changes the fields that must change together
//! under one lock, so no caller can leave them half-changed (a turn marked active without
//! accepting steering, a model switched without its notice).
//!
//! Invariants: a turn is admitted only when none is active, and its user message is committed
//! before the admission returns (invariant 8); steering is queued only while the turn accepts
//! it, within the configured caps (invariant 6); persisting and announcing happen here, once.

use std::collections::VecDeque;

use super::{lock, retry_allowed, Conversation, SessionError};
use crate::engine::history::{new_id, Message, NoticeKind, Part, Role, Source};
use crate::engine::pending::{PendingKind, PendingRequest, ProposalShown};
use crate::protocol::{Event, Mode};

impl Conversation {
    /// Admit a prompt as a new turn: refuses one that says nothing or arrives while a turn
    /// runs; otherwise commits the user message (the session's title is the first prompt's
    /// start) and returns the new turn's id. The caller starts the turn.
    /// `typed` is the slash command as the user typed it when `parts` are its expansion (the
    /// display and the title show it).
    pub fn admit_prompt(
        &self,
        parts: Vec<Part>,
        typed: Option<String>,
    ) -> Result<String, SessionError> {
        if let Some(problem) = crate::engine::history::prompt_problem(&parts) {
            return Err(SessionError::InvalidPrompt(problem));
        }
        let turn_id = new_id("t");
        let mut state = lock(&self.state);
        if state.active_turn.is_some() {
            return Err(SessionError::TurnInProgress);
        }
        state.active_turn = Some(turn_id.clone());
        state.accepting_steering = true;
        let mut message = Message::user(parts, Source::User, Some(&turn_id));
        message.meta.typed = typed;
        let first = !state.history.iter().any(|m| m.role == Role::User);
        let title: Option<String> = first.then(|| match &message.meta.typed {
            Some(typed) => typed.chars().take(80).collect(),
            None => message.text().chars().take(80).collect(),
        });
        self.append_locked(&mut state, message);
        self.persist_session_fields(None, None, title.as_deref());
        Ok(turn_id)
    }

    /// Admit a `/compact` turn: no user message, the history must hold something to compact.
    pub fn admit_compaction(&self) -> Result<String, SessionError> {
        let turn_id = new_id("t");
        let mut state = lock(&self.state);
        if state.active_turn.is_some() {
            return Err(SessionError::TurnInProgress);
        }
        state.active_turn = Some(turn_id.clone());
        state.accepting_steering = false;
        Ok(turn_id)
    }

    /// Admit a retry of a turn a provider error ended, as a new turn without a user message.
    pub fn admit_retry(&self) -> Result<String, SessionError> {
        let turn_id = new_id("t");
        let mut state = lock(&self.state);
        if state.active_turn.is_some() {
            return Err(SessionError::TurnInProgress);
        }
        retry_allowed(&state.history).map_err(SessionError::RetryUnavailable)?;
        state.active_turn = Some(turn_id.clone());
        state.accepting_steering = true;
        Ok(turn_id)
    }

    /// Replace the model's plan (`update_plan`): stored, then announced as a `plan` event.
    pub fn set_plan(&self, turn_id: Option<&str>, entries: Vec<crate::protocol::PlanEntry>) {
        self.store_plan(&entries);
        lock(&self.state).plan = entries.clone();
        self.emit(turn_id, Event::Plan { entries });
    }

    /// Persist `entries` as the session's plan (none when empty).
    pub(super) fn store_plan(&self, entries: &[crate::protocol::PlanEntry]) {
        if let Some(store) = &self.store {
            let json = (!entries.is_empty())
                .then(|| serde_json::to_string(entries).ok())
                .flatten();
            store.set_plan(&self.id, json);
        }
    }

    /// The model's current plan.
    pub fn plan(&self) -> Vec<crate::protocol::PlanEntry> {
        lock(&self.state).plan.clone()
    }

    /// Whether a turn is running.
    pub fn turn_active(&self) -> bool {
        lock(&self.state).active_turn.is_some()
    }

    /// Queue steering for the running turn's next safe point.
    pub fn queue_steering(&self, text: String) -> Result<(), SessionError> {
        let mut state = lock(&self.state);
        if !state.accepting_steering {
            return Err(SessionError::NoTurnRunning);
        }
        if let Some(full) = steering_queue_full(&state.steering, &text, &self.engine.config) {
            return Err(full);
        }
        state.steering.push_back(text);
        Ok(())
    }

    /// End a restored session's crashed turn that cannot continue (its history is damaged):
    /// no turn is active any more, and the user sees why.
    pub fn end_unresumable_turn(&self, turn_id: &str, why: String) {
        {
            let mut state = lock(&self.state);
            state.active_turn = None;
            state.accepting_steering = false;
        }
        self.emit(
            Some(turn_id),
            Event::Notice {
                kind: NoticeKind::Error,
                text: why.clone(),
            },
        );
        self.emit(
            Some(turn_id),
            Event::TurnEnded {
                reason: crate::protocol::TurnEndReason::Error,
                error: Some(crate::protocol::TurnError {
                    message: why,
                    retriable: false,
                }),
            },
        );
    }

    /// Commit what a restore decided for the crashed turn (interrupted results, the interrupted
    /// notice), and close the side-effect marks of the calls those results settle.
    pub fn commit_restore_fixes(&self, fixes: Vec<Message>) {
        let mut state = lock(&self.state);
        for fix in fixes {
            let finished = fix.tool_result.as_ref().map(|r| r.tool_call_id.clone());
            self.append_locked(&mut state, fix);
            if let Some(tool_call_id) = finished {
                self.after_side_effect(&tool_call_id);
            }
        }
    }

    /// Take the pending request `request_id` if it is of the expected kind.
    pub fn take_pending(
        &self,
        request_id: &str,
        expected: PendingKind,
    ) -> Result<PendingRequest, SessionError> {
        let mut pending = lock(&self.pending);
        let kind = match pending.get(request_id) {
            None => {
                return Err(SessionError::StaleApproval(format!(
                    "request {request_id} is not pending in this session (already answered, withdrawn, or from another session); answer only the latest approvalRequested/questionAsked"
                )))
            }
            Some(p) => p.kind,
        };
        if kind != expected {
            let (used, right) = match expected {
                PendingKind::Approval => ("approve", "answer"),
                PendingKind::Question => ("answer", "approve"),
            };
            return Err(SessionError::StaleApproval(format!(
                "request {request_id} cannot be resolved with `{used}`; use `{right}`"
            )));
        }
        pending.remove(request_id).ok_or_else(|| {
            SessionError::StaleApproval(format!("request {request_id} is not pending"))
        })
    }

    /// Whether an approval may be applied as sent: `argumentsDigest`, when given, must be the
    /// digest of the arguments the request holds (the user approves what they saw), and a
    /// proposal shown cut cannot be edited (the edit would be made on text the user never saw).
    pub fn check_approval(
        &self,
        request_id: &str,
        edited: bool,
        arguments_digest: Option<&str>,
    ) -> Result<(), SessionError> {
        let pending = lock(&self.pending);
        let Some(request) = pending.get(request_id) else {
            // `take_pending` answers an unknown request with the reason.
            return Ok(());
        };
        if let Some(digest) = arguments_digest {
            if request.payload["argumentsDigest"].as_str() != Some(digest) {
                return Err(SessionError::StaleApproval(format!(
                    "request {request_id} now holds different arguments than the ones approved (digest {digest}); review the latest approvalRequested and answer that"
                )));
            }
        }
        if edited && request.shown == ProposalShown::Cut {
            return Err(SessionError::EditUnavailable(format!(
                "request {request_id} proposes a change too large to show in full, so it cannot be edited before it is applied; approve or deny it without editedContent (after approving, edit the file itself)"
            )));
        }
        Ok(())
    }

    /// Set the permission mode (the next authorization uses it) and persist it.
    pub fn set_mode(&self, mode: Mode) {
        lock(&self.state).mode = mode;
        self.persist_session_fields(None, Some(mode), None);
    }

    /// Let the session's sandboxed commands use the network, or not. A change is persisted and
    /// announced by a `network` notice (not in history: the model never sees it); the next
    /// command runs with the new choice, also inside a running turn.
    pub fn set_network_access(&self, allow: bool) {
        let changed = {
            let mut state = lock(&self.state);
            std::mem::replace(&mut state.allow_network, allow) != allow
        };
        if !changed {
            return;
        }
        if let Some(store) = &self.store {
            store.set_network(&self.id, allow);
        }
        self.emit(
            None,
            Event::Notice {
                kind: NoticeKind::Network,
                text: super::network_notice(allow).to_owned(),
            },
        );
    }

    /// Switch the model for the next request (also inside a running turn): a `model_switch`
    /// notice in history and a `modelSwitched` event, with a warning when the history holds
    /// parts the new model cannot take.
    pub fn switch_model(&self, model: String) -> Result<(String, Option<String>), SessionError> {
        let config = &self.engine.config;
        let Some(target) = config.model(&model) else {
            return Err(SessionError::UnknownModel {
                model,
                known: config.models.keys().cloned().collect::<Vec<_>>().join(", "),
            });
        };
        let (from, warning, turn_id) = {
            let mut state = lock(&self.state);
            let from = state.model.clone();
            if from == model {
                return Ok((model, None));
            }
            let images: usize = state.history.iter().map(Message::image_count).sum();
            let documents: usize = state.history.iter().map(Message::document_count).sum();
            let mut warnings = Vec::new();
            if images > 0 && !target.vision {
                warnings.push(format!(
                    "the history holds {images} image(s) that {model} cannot see; they are replaced by a placeholder for this model and restored if you switch back to a vision model"
                ));
            }
            if documents > 0 && !target.pdf {
                warnings.push(format!(
                    "the history holds {documents} PDF document(s) that {model} cannot read; they are replaced by a placeholder for this model and restored if you switch back to a model that reads PDFs"
                ));
            }
            let warning = (!warnings.is_empty()).then(|| warnings.join("; "));
            let turn_id = state.active_turn.clone();
            let mut text = format!("Switched model from {from} to {model}");
            if turn_id.is_some() {
                text.push_str("; the running turn uses it from its next model request");
            }
            if let Some(w) = &warning {
                text.push_str("; ");
                text.push_str(w);
            }
            state.model = model.clone();
            let notice = Message::notice(NoticeKind::ModelSwitch, text, turn_id.as_deref());
            self.append_locked(&mut state, notice);
            self.persist_session_fields(Some(&model), None, None);
            (from, warning, turn_id)
        };
        self.emit(
            turn_id.as_deref(),
            Event::ModelSwitched {
                from,
                to: model.clone(),
                warning: warning.clone(),
            },
        );
        Ok((model, warning))
    }
}

/// Whether one more steering text would pass the config's caps on queued steering; the error
/// says which cap and what to do. The queue is drained at every safe point, so the caps bound
/// what one client can pile up between two model requests, not a session's total.
fn steering_queue_full(
    queued: &VecDeque<String>,
    text: &str,
    config: &crate::config::Config,
) -> Option<SessionError> {
    if queued.len() >= config.max_queued_steering {
        return Some(SessionError::SteeringQueueFull(format!(
            "{} steering messages are already queued for this turn's next safe point (max_queued_steering); wait for steeringApplied, or stop the turn and prompt again",
            queued.len()
        )));
    }
    let queued_bytes: usize = queued.iter().map(String::len).sum();
    if queued_bytes + text.len() > config.max_queued_steering_bytes {
        return Some(SessionError::SteeringQueueFull(format!(
            "this steering text would bring the queued steering to {} bytes, above max_queued_steering_bytes ({}); send a shorter text, or wait for steeringApplied",
            queued_bytes + text.len(),
            config.max_queued_steering_bytes
        )));
    }
    None
}

impl Conversation {
    // The turn loop's own transitions and reads. The turn holds no lock of its own: each of
    // these takes the state lock once, so what the actor and the faces do in between sees
    // either the state before or the state after, never half of it.

    /// Run `view` on the parsed history under the state lock, read-only. `view` must be short
    /// and must not block (the turn estimates tokens and projects requests with it).
    pub fn with_history<R>(&self, view: impl FnOnce(&[Message]) -> R) -> R {
        view(&lock(&self.state).history)
    }

    /// Run `view` on the parsed history and its outbound cache under the state lock (the turn
    /// builds its requests with it). Like [`Conversation::with_history`], `view` must be short.
    pub fn with_history_and_outbound<R>(
        &self,
        view: impl FnOnce(&[Message], &mut crate::engine::outbound::cache::OutboundCache) -> R,
    ) -> R {
        let mut state = lock(&self.state);
        let state = &mut *state;
        view(&state.history, &mut state.outbound)
    }

    /// How many parsed messages the history holds.
    pub fn history_len(&self) -> usize {
        lock(&self.state).history.len()
    }

    /// What the session's rules say of a call of `name` (a built-in tool or an MCP tool) of
    /// `risk` in `mode`. A tool the mode does not offer (the model named it anyway) is judged
    /// as `plan` judges it.
    pub fn verdict(
        &self,
        mode: Mode,
        name: &str,
        risk: crate::tools::Risk,
        command: Option<&str>,
    ) -> crate::permissions::Verdict {
        let mode = if crate::permissions::offered_risk(mode, risk) {
            mode
        } else {
            Mode::Plan
        };
        let state = lock(&self.state);
        crate::permissions::evaluate_call(mode, &state.rules, name, risk, command)
    }

    /// Whether a tool call of this session already has `id` (see
    /// [`ConversationState::tool_call_id_taken`]).
    pub fn tool_call_id_taken(&self, id: &str) -> bool {
        lock(&self.state).tool_call_id_taken(id)
    }

    /// Take the steering queued since the last safe point (a tool batch ended).
    pub fn take_steering(&self) -> Vec<String> {
        lock(&self.state).steering.drain(..).collect()
    }

    /// At the model's natural end: the queued steering to continue with, or, when none is
    /// queued, `None` with steering closed. Both under one lock, so a steer cannot slip in
    /// between the check and the close (it gets `noTurnRunning` instead of being lost).
    pub fn finish_or_take_steering(&self) -> Option<Vec<String>> {
        let mut state = lock(&self.state);
        if state.steering.is_empty() {
            state.accepting_steering = false;
            return None;
        }
        Some(state.steering.drain(..).collect())
    }

    /// Close steering as the turn ends for any reason, and take what never reached a safe
    /// point (the turn keeps it as a user message for the next turn).
    pub fn close_steering(&self) -> Vec<String> {
        let mut state = lock(&self.state);
        state.accepting_steering = false;
        state.steering.drain(..).collect()
    }

    /// Register an open approval or question of a turn; its inbox row was persisted first.
    pub fn open_pending(&self, request_id: String, request: PendingRequest) {
        lock(&self.pending).insert(request_id, request);
    }

    /// Forget an open request nobody will answer now (its turn was stopped), so a late answer
    /// gets `staleApproval`.
    pub fn forget_pending(&self, request_id: &str) {
        lock(&self.pending).remove(request_id);
    }

    /// End turn `turn_id`: its open requests can no longer be answered (withdrawn in memory
    /// and in the store), the turn becomes inactive, `announce` emits its `turnEnded`, and the
    /// display entries of its messages are stored. The turn becomes inactive and announces its
    /// end under one lock, so a prompt admitted right after cannot emit its `turnStarted`
    /// before this `turnEnded`.
    pub fn end_turn(&self, turn_id: &str, announce: impl FnOnce()) {
        lock(&self.pending).retain(|_, p| p.turn_id != turn_id);
        self.withdraw_pending_rows(turn_id);
        let mut state = lock(&self.state);
        if state.active_turn.as_deref() == Some(turn_id) {
            state.active_turn = None;
        }
        announce();
        // After the event, so its commit does not wait for these; still under the lock, so
        // they cover exactly this turn's messages and what came before.
        self.store_displays(&mut state);
    }
}
