//! The turn loop: request, stream, authorize, execute, commit, repeat until the model stops.
//!
//! One turn runs as its own task so the session actor keeps reading control messages. The loop
//! keeps these rules (numbers refer to ARCHITECTURE.md's invariants):
//! - every assistant tool call gets exactly one result, whatever ends the turn (2);
//! - all calls of one assistant message are authorized in call order before any of them runs;
//!   then contiguous runs of low-risk calls run concurrently and every other call runs alone,
//!   and results are committed in call order (3);
//! - a stop is honoured in every await: the stream, an approval or question, a running tool,
//!   and between iterations (5);
//! - steering is injected only at safe points and never starts a new turn (6);
//! - each message is committed before the event that announces it (8);
//! - repeated identical calls earn the model a warning, not a hard stop, and the iteration cap
//!   is the last guard (9).

mod authorize;
mod compact;
mod execute;
mod guards;
mod hooks;
mod record;
mod request;
mod stream;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::compaction;
use super::conversation::{
    Conversation, DenyMemory, PendingKind, PendingRequest, ProposalShown, RecordedDecision,
    Resolution, Resume,
};
use super::outbound::{project, project_range, ProjectionContext};
use crate::config::ModelConfig;
use crate::engine::history::{
    Message, NoticeKind, Part, ResultStatus, Role, Source, ToolCallRecord, UsageRecord,
};
use crate::permissions::{self, suggested_prefix, RuleKind, Verdict};
use crate::protocol::fit;
use crate::protocol::{
    ApprovalOption, Decision, DiffEntry, Event, Mode, ToolStatus, TurnEndReason, TurnError,
};
use crate::providers::{
    Chunk, FinishReason, MessageForm, Provider, ProviderError, ProviderRequest, ToolSpec,
};
use crate::tools::fs::SecretAccess;
use crate::tools::fs::{apply_edit, plan_edit, plan_write, PlannedEdit, ToolOutcome};
use crate::tools::sandbox::{self, Confinement, SandboxPolicy};
use crate::tools::shell::{self, ShellRequest};
use crate::tools::{client_fs, meta_for, parse_args, Risk, ToolArgs, TOOLS};
use crate::workspace::diff::DiffShape;
use crate::workspace::diff::FileDiff;

/// Identical consecutive calls that earn the model a warning.
const REPEAT_THRESHOLD: u32 = 3;
/// Warnings injected per turn at most; after that the loop relies on the iteration cap.
const MAX_WARNINGS_PER_TURN: u32 = 3;
/// Automatic continuations after an output-length cut, per turn.
const MAX_CONTINUATIONS: u32 = 3;
const CONTINUATION_PROMPT: &str = "Your previous answer was cut off at the output limit. \
Continue exactly where it stopped, without repeating anything.";

/// The start of the warning notice for an answer the provider's content filter stopped.
pub const REFUSAL_NOTICE: &str = "the provider's content filter stopped the model's answer";

const BASE_SYSTEM_PROMPT: &str = "You are tandem, a coding agent working inside the user's editor. \
You can read and search the workspace, propose file edits (the user reviews each diff), run shell \
commands (the user approves them), ask the user questions, and propose plans. Paths are relative to \
the workspace root. Prefer small, reviewable edits. When you are done, say briefly what you changed.";

enum Outcome {
    /// Even after compaction the conversation does not fit the model's window.
    ContextExceeded(String),
    /// The model stopped and no steering was queued; steering is already closed.
    Completed,
    Interrupted,
    Error(ProviderError),
    MaxIterations,
    /// The session store cannot save what the turn does (the cause); the turn must not go on
    /// doing things a restart would forget.
    StoreFailed(String),
    /// The workspace folder is no longer the one the session opened (the message says so).
    WorkspaceMoved(String),
    /// A `UserPromptSubmit` hook refused the prompt (the message says which and why).
    PromptRefused(String),
}

struct PartialCall {
    /// The session's id of this call: empty until [`Turn::assign_id`] picks it.
    id: String,
    /// The id the provider gave, as it came (may be missing, reused or malformed).
    provider_id: String,
    name: String,
    arguments: String,
    /// Provider-private extras of this call (`_<kind>.…`).
    extras: BTreeMap<String, Value>,
}

enum StreamOutcome {
    Finished {
        text: String,
        reasoning: String,
        /// Provider-private extras of the assistant message.
        extras: BTreeMap<String, Value>,
        calls: Vec<PartialCall>,
        finish: Option<FinishReason>,
        usage: Option<crate::providers::Usage>,
        early: HashMap<usize, JoinHandle<ToolOutcome>>,
    },
    Cancelled {
        text: String,
        reasoning: String,
    },
    Failed {
        text: String,
        reasoning: String,
        error: ProviderError,
    },
}

enum SummaryOutcome {
    Done(String),
    Cancelled,
    Failed(ProviderError),
}

/// What phase A decided for one call.
enum Prepared {
    /// Run it; `plan` is set for edits, `edited` when the user supplied their own content.
    Run {
        args: ToolArgs,
        risk: Risk,
        plan: Option<Box<PlannedEdit>>,
        edited: Option<String>,
    },
    /// Never run; commit this result.
    Done { status: ResultStatus, text: String },
}

struct Turn {
    session: Arc<Conversation>,
    turn_id: String,
    cancel: CancellationToken,
    /// Calls already announced with a `toolCall` event (early-started reads).
    announced: Vec<String>,
    repeat_signature: Option<String>,
    repeat_streak: u32,
    warnings: u32,
    continuations: u32,
    compactions: u32,
    batches_since_compaction: u32,
    rapid_refills: u32,
    /// Request-only user messages (continuation prompts), with the history length at which
    /// each was inserted.
    ephemeral: Vec<(usize, String)>,
    /// For a restored session: the open calls to finish before the next model request.
    resume_calls: Option<Vec<ToolCallRecord>>,
    /// Requests and decisions recorded before a crash, by tool call id.
    recorded: HashMap<String, crate::store::PendingRecord>,
    /// Reads that needed approval: a result started early must not be used for them.
    needs_fresh_run: std::collections::HashSet<String>,
    /// Calls refused before they were parsed (arguments over `max_tool_arguments_bytes`), by
    /// id, with the tool error the model gets.
    refused: HashMap<String, String>,
    /// Tokens every request carries besides the history: the system prompt and tool schemas.
    fixed_tokens: u64,
    /// The most bytes one result of the running tool batch may keep (set by `run_tools`):
    /// the batch's share of the context window divided among its calls, so one batch can
    /// never outgrow the window by itself (invariant 9).
    result_share: usize,
    /// Images MCP tools returned, by tool call id, until their result is committed (a call
    /// that runs beside reads returns its text through the same task type as a read).
    mcp_images: Arc<std::sync::Mutex<HashMap<String, Vec<crate::mcp::content::McpImage>>>>,
    /// How many times `Stop` hooks continued this turn.
    stop_continuations: u32,
    /// The session's hooks, loaded before the first request (so the stream can ask them
    /// without waiting).
    hooks_loaded: Option<Arc<crate::hooks::HookSet>>,
    /// A `/compact` turn: it compacts and ends, with no prompt and no model answer.
    compact_only: bool,
}

/// Announce a turn (`turnStarted`, with the model it runs on). The actor calls this as it admits
/// the turn, right after queuing the `prompt` reply and before spawning the turn's task, so the
/// user message, the reply and this event reach the store together and usually share a commit.
pub fn announce(session: &Conversation, turn_id: &str) {
    let model = session.settings().model;
    let prompt = session.with_history(|history| {
        history
            .last()
            .filter(|m| {
                m.role == Role::User
                    && m.meta.source == Source::User
                    && m.meta.turn_id.as_deref() == Some(turn_id)
            })
            .map(|m| shown_prompt(m.meta.typed.clone().unwrap_or_else(|| m.text())))
    });
    session.emit(Some(turn_id), Event::TurnStarted { model, prompt });
}

/// The most of a prompt `turnStarted` carries: enough for any typed prompt, while a pasted file
/// stays in the history (and `session/load`) rather than in every event replay.
const SHOWN_PROMPT_BYTES: usize = 64 * 1024;

fn shown_prompt(mut text: String) -> String {
    if text.len() > SHOWN_PROMPT_BYTES {
        let mut cut = SHOWN_PROMPT_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let left_out = text.len() - cut;
        text.truncate(cut);
        text.push_str(&format!("\n[tandem: {left_out} bytes not shown]"));
    }
    text
}

/// Run one turn to its end. The user message is already in history and the turn announced
/// (the actor did both).
pub async fn run_turn(session: Arc<Conversation>, turn_id: String, cancel: CancellationToken) {
    drive(session, turn_id, cancel, None, HashMap::new(), false).await;
}

/// Run a `/compact` turn (already admitted and announced): compact the history now, whatever
/// its size, and end.
pub async fn run_compact_turn(
    session: Arc<Conversation>,
    turn_id: String,
    cancel: CancellationToken,
) {
    drive(session, turn_id, cancel, None, HashMap::new(), true).await;
}

/// Continue a restored session's crashed turn, already announced again: finish its open tool
/// calls, then go on.
pub async fn resume_turn(session: Arc<Conversation>, resume: Resume, cancel: CancellationToken) {
    drive(
        session,
        resume.turn_id,
        cancel,
        Some(resume.calls),
        resume.recorded,
        false,
    )
    .await;
}

async fn drive(
    session: Arc<Conversation>,
    turn_id: String,
    cancel: CancellationToken,
    resume_calls: Option<Vec<ToolCallRecord>>,
    recorded: HashMap<String, crate::store::PendingRecord>,
    compact_only: bool,
) {
    // A command cut by a crash left its manifest pending: attribute what changed to its turn
    // before this turn changes anything (once per session; a no-op afterwards).
    if let Some(recorder) = session.recorder() {
        recorder.settle().await;
    }
    let mut turn = Turn {
        session,
        turn_id,
        cancel,
        announced: Vec::new(),
        repeat_signature: None,
        repeat_streak: 0,
        warnings: 0,
        continuations: 0,
        compactions: 0,
        batches_since_compaction: 0,
        rapid_refills: 0,
        ephemeral: Vec::new(),
        resume_calls,
        recorded,
        needs_fresh_run: Default::default(),
        mcp_images: Default::default(),
        refused: HashMap::new(),
        fixed_tokens: 0,
        result_share: usize::MAX,
        stop_continuations: 0,
        hooks_loaded: None,
        compact_only,
    };
    let outcome = turn.run().await;
    turn.end(outcome);
    // What the turn built and dropped (its requests' pieces, a first request's encoding of a
    // resumed history, tool outputs) goes back to the system, off the async runtime.
    tokio::task::spawn_blocking(crate::engine::memory::release_freed_memory);
}

impl Turn {
    fn emit(&self, event: Event) {
        self.session.emit(Some(&self.turn_id), event);
    }

    async fn run(&mut self) -> Outcome {
        // MCP servers still starting get until their startup timeout (an exited one its one
        // restart) before the first request; a stop does not wait for them.
        if !self.session.mcp.is_empty() {
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Outcome::Interrupted,
                _ = self.session.mcp.prepare_turn() => {}
            }
        }
        self.hooks_loaded = Some(self.session.hook_set().await);
        if self.resume_calls.is_none() && !self.compact_only {
            match self.prompt_hooks().await {
                hooks::PromptHooks::Proceed => {}
                hooks::PromptHooks::Refused(text) => return Outcome::PromptRefused(text),
                hooks::PromptHooks::Interrupted => return Outcome::Interrupted,
            }
        }
        let system = self.system_prompt().await;
        // The system prompt and tool schemas ride on every request; about 2,000 tokens.
        self.fixed_tokens = (system.len() as u64).div_ceil(4) + 2_000;
        let max_iterations = self.session.engine.config.max_iterations;
        let mut iteration: u32 = 0;
        if let Some(calls) = self.resume_calls.take() {
            let mode = self.session.settings().mode;
            if !self.run_tools(&calls, HashMap::new(), mode).await
                || !self.post_tool_hooks(&calls).await
            {
                return Outcome::Interrupted;
            }
            self.batches_since_compaction += 1;
            self.apply_steering();
        }
        loop {
            if self.cancel.is_cancelled() {
                return Outcome::Interrupted;
            }
            // Fail closed: after a lost commit, nothing more is asked of the model.
            if let Some(cause) = self.session.store_unavailable() {
                return Outcome::StoreFailed(cause);
            }
            if let Some(why) = self.workspace_moved().await {
                return Outcome::WorkspaceMoved(why);
            }
            iteration += 1;
            if iteration > max_iterations {
                return Outcome::MaxIterations;
            }
            let settings = self.session.settings();
            let (model_id, mode) = (settings.model, settings.mode);
            let config = &self.session.engine.config;
            let Some(model) = config.model(&model_id).cloned() else {
                return Outcome::Error(ProviderError::new(
                    format!(
                        "model {model_id} is not configured any more; switch to a configured model"
                    ),
                    false,
                ));
            };
            let Some(provider) = self.session.engine.providers.get(&model.provider) else {
                return Outcome::Error(ProviderError::new(
                    format!(
                        "provider {} of model {model_id} is not configured",
                        model.provider
                    ),
                    false,
                ));
            };
            if let Err(outcome) = self
                .maybe_compact(&model_id, &model, provider.as_ref(), self.compact_only)
                .await
            {
                return outcome;
            }
            if self.compact_only {
                return Outcome::Completed;
            }
            let request = self.build_request(&system, &model_id, &model, mode, provider.as_ref());
            match self.stream(provider.as_ref(), request, mode).await {
                StreamOutcome::Failed {
                    text,
                    reasoning,
                    error,
                } if error.context_overflow && text.is_empty() && reasoning.is_empty() => {
                    // The provider says the request does not fit: compact, then ask again.
                    tracing::info!("context overflow from the provider; compacting");
                    if let Err(outcome) = self
                        .maybe_compact(&model_id, &model, provider.as_ref(), true)
                        .await
                    {
                        return outcome;
                    }
                    continue;
                }
                StreamOutcome::Cancelled { text, reasoning } => {
                    self.commit_partial(text, reasoning);
                    return Outcome::Interrupted;
                }
                StreamOutcome::Failed {
                    text,
                    reasoning,
                    error,
                } => {
                    self.commit_partial(text, reasoning);
                    return Outcome::Error(error);
                }
                StreamOutcome::Finished {
                    text,
                    reasoning,
                    extras,
                    calls,
                    finish,
                    usage,
                    early,
                } => {
                    let records: Vec<ToolCallRecord> = calls
                        .into_iter()
                        .map(|c| ToolCallRecord {
                            id: c.id,
                            name: c.name,
                            arguments: c.arguments,
                            extras: c.extras,
                        })
                        .collect();
                    self.commit_assistant(
                        &model_id,
                        text,
                        reasoning,
                        extras,
                        records.clone(),
                        usage,
                    );
                    if records.is_empty() {
                        if finish == Some(FinishReason::Length) {
                            if self.continuations < MAX_CONTINUATIONS {
                                // The continuation prompt lives only in this turn's requests,
                                // never in the canonical history.
                                self.continuations += 1;
                                let position = self.session.history_len();
                                self.ephemeral
                                    .push((position, CONTINUATION_PROMPT.to_owned()));
                                continue;
                            }
                            self.notice(
                                NoticeKind::Warning,
                                format!(
                                    "the model's answer was cut at its output limit {} times; prompt again to continue",
                                    MAX_CONTINUATIONS + 1
                                ),
                            );
                        }
                        if finish == Some(FinishReason::ContentFilter) {
                            // Faces that have a "refused" ending (ACP's `refusal`) ask the
                            // conversation (`Conversation::refused_in`), which reads the mark.
                            self.refusal_notice(format!(
                                "{REFUSAL_NOTICE}; rephrase the request or switch model"
                            ));
                        }
                        match self.stop_hooks().await {
                            Err(()) => return Outcome::Interrupted,
                            Ok(Some(_)) => continue,
                            Ok(None) => {}
                        }
                        if self.finish_or_steer() {
                            return Outcome::Completed;
                        }
                        continue;
                    }
                    if !self.run_tools(&records, early, mode).await
                        || !self.post_tool_hooks(&records).await
                    {
                        return Outcome::Interrupted;
                    }
                    self.batches_since_compaction += 1;
                    self.check_repeats(&records);
                    self.apply_steering();
                }
            }
        }
    }

    fn end(&mut self, outcome: Outcome) {
        // Steering that never reached a safe point is kept as a user message, so nothing the
        // user typed is lost; the next turn's model sees it. It goes before the turn's closing
        // notice, so `retry` still finds a provider error at the tail.
        let leftover = self.session.close_steering();
        if !leftover.is_empty() {
            let text = leftover.join("\n\n");
            self.session.commit(Message::user(
                vec![Part::Text { text: text.clone() }],
                Source::Steering,
                Some(&self.turn_id),
            ));
            self.notice(
                NoticeKind::Warning,
                format!("the turn ended before this steering message could be applied; it is kept for the next turn: {text}"),
            );
        }
        let (reason, error) = match outcome {
            Outcome::Completed => (TurnEndReason::Completed, None),
            Outcome::Interrupted => {
                let text = if self.session.engine.client_can_answer() {
                    "Interrupted by user"
                } else {
                    "Interrupted: the client disconnected or the server shut down"
                };
                self.notice(NoticeKind::Interrupted, text.to_owned());
                (TurnEndReason::Interrupted, None)
            }
            Outcome::Error(error) => {
                let notice = Message::provider_error_notice(
                    error.message.clone(),
                    error.retriable,
                    Some(&self.turn_id),
                );
                self.session.commit(notice);
                self.emit(Event::Notice {
                    kind: NoticeKind::Error,
                    text: error.message.clone(),
                });
                (
                    TurnEndReason::Error,
                    Some(TurnError {
                        message: error.message,
                        retriable: error.retriable,
                    }),
                )
            }
            Outcome::ContextExceeded(text) => self.fail(TurnEndReason::ContextExceeded, text),
            Outcome::WorkspaceMoved(text) | Outcome::PromptRefused(text) => {
                self.fail(TurnEndReason::Error, text)
            }
            Outcome::StoreFailed(cause) => {
                let text = format!(
                    "the session store cannot write ({cause}), so the turn stopped: what it did from here could not be saved. Free disk space or end the program that holds the database lock; the next request saves what was lost and goes on"
                );
                self.fail(TurnEndReason::Error, text)
            }
            Outcome::MaxIterations => {
                let text = format!(
                    "stopped after {} model requests in one turn (max_iterations); prompt again to continue",
                    self.session.engine.config.max_iterations
                );
                self.fail(TurnEndReason::MaxIterations, text)
            }
        };
        // Anything still pending belongs to this turn and can no longer be answered; the turn
        // becomes inactive and announces its end in one transition.
        self.session.end_turn(&self.turn_id, || {
            self.emit(Event::TurnEnded { reason, error })
        });
    }
}

fn arguments_or_empty(arguments: &str) -> &str {
    if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    }
}
