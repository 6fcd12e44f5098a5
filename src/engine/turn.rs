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
    lock, Conversation, PendingKind, PendingRequest, ProposalShown, Resolution, Resume,
    PROVIDER_ERROR_REASON,
};
use super::history::{
    Message, NoticeKind, Part, ResultStatus, Source, ToolCallRecord, UsageRecord,
};
use super::outbound::{project, ProjectionContext};
use crate::config::ModelConfig;
use crate::permissions::{self, suggested_prefix, Verdict};
use crate::protocol::fit;
use crate::protocol::{
    ApprovalOption, Decision, DiffEntry, Event, Mode, ToolStatus, TurnEndReason, TurnError,
};
use crate::providers::{Chunk, FinishReason, Provider, ProviderError, ProviderRequest, ToolSpec};
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
}

/// Announce a turn (`turnStarted`, with the model it runs on). The actor calls this as it admits
/// the turn, right after queuing the `prompt` reply and before spawning the turn's task, so the
/// user message, the reply and this event reach the store together and usually share a commit.
pub fn announce(session: &Conversation, turn_id: &str) {
    let model = lock(&session.state).model.clone();
    session.emit(Some(turn_id), Event::TurnStarted { model });
}

/// Run one turn to its end. The user message is already in history and the turn announced
/// (the actor did both).
pub async fn run_turn(session: Arc<Conversation>, turn_id: String, cancel: CancellationToken) {
    drive(session, turn_id, cancel, None, HashMap::new()).await;
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
    )
    .await;
}

async fn drive(
    session: Arc<Conversation>,
    turn_id: String,
    cancel: CancellationToken,
    resume_calls: Option<Vec<ToolCallRecord>>,
    recorded: HashMap<String, crate::store::PendingRecord>,
) {
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
        refused: HashMap::new(),
        fixed_tokens: 0,
        result_share: usize::MAX,
    };
    let outcome = turn.run().await;
    turn.end(outcome);
}

impl Turn {
    fn emit(&self, event: Event) {
        self.session.emit(Some(&self.turn_id), event);
    }

    async fn run(&mut self) -> Outcome {
        let system = self.system_prompt().await;
        // The system prompt and tool schemas ride on every request; about 2,000 tokens.
        self.fixed_tokens = (system.len() as u64).div_ceil(4) + 2_000;
        let max_iterations = self.session.engine.config.max_iterations;
        let mut iteration: u32 = 0;
        if let Some(calls) = self.resume_calls.take() {
            let mode = lock(&self.session.state).mode;
            if !self.run_tools(&calls, HashMap::new(), mode).await {
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
            let (model_id, mode) = {
                let state = lock(&self.session.state);
                (state.model.clone(), state.mode)
            };
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
                .maybe_compact(&model_id, &model, provider.as_ref(), false)
                .await
            {
                return outcome;
            }
            let request = self.build_request(&system, &model_id, &model, mode, provider.kind());
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
                                let position = lock(&self.session.state).history.len();
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
                            // Faces that have a "refused" ending (ACP's `refusal`) key on this.
                            self.notice(
                                NoticeKind::Warning,
                                format!("{REFUSAL_NOTICE}; rephrase the request or switch model"),
                            );
                        }
                        if self.finish_or_steer() {
                            return Outcome::Completed;
                        }
                        continue;
                    }
                    if !self.run_tools(&records, early, mode).await {
                        return Outcome::Interrupted;
                    }
                    self.batches_since_compaction += 1;
                    self.check_repeats(&records);
                    self.apply_steering();
                }
            }
        }
    }

    /// Compact when the next request would pass the threshold (or when `forced` after the
    /// provider reported an overflow). `Err` ends the turn.
    async fn maybe_compact(
        &mut self,
        model_id: &str,
        model: &crate::config::ModelConfig,
        provider: &dyn Provider,
        forced: bool,
    ) -> Result<(), Outcome> {
        let config = self.session.engine.config.clone();
        let window = model.context_window;
        let fixed = self.fixed_tokens;
        let estimate = compaction::estimate_request(&lock(&self.session.state).history) + fixed;
        let threshold = (window as f64 * config.compaction_threshold) as u64;
        if !forced && estimate <= threshold.min(window) {
            return Ok(());
        }
        let exceeded = |why: &str| {
            Outcome::ContextExceeded(format!(
                "the conversation no longer fits in {model_id}'s context window ({window} tokens): {why}; \
                 start a new session, or switch to a model with a larger context window"
            ))
        };
        if self.compactions > 0 && self.batches_since_compaction < 3 {
            self.rapid_refills += 1;
            if self.rapid_refills > 3 {
                return Err(exceeded(
                    "the context filled up again right after each of 3 compactions",
                ));
            }
        }
        let target = (window / 2).saturating_sub(fixed);
        let (prefix, boundary_id, compacted_count) = {
            let state = lock(&self.session.state);
            let Some(boundary) = compaction::choose_boundary(&state.history, target) else {
                drop(state);
                return Err(exceeded(
                    "compaction cannot move past the most recent messages",
                ));
            };
            // What stays verbatim must fit with room for a summary, or the summarizing
            // request would be spent on a compaction that frees too little.
            let verbatim = compaction::estimate_verbatim(&state.history, boundary);
            if verbatim + fixed + compaction::summary_allowance(window) > window {
                drop(state);
                return Err(exceeded(&format!(
                    "the most recent messages, which compaction must keep, come to about {verbatim} tokens by themselves"
                )));
            }
            let mut prefix: Vec<Message> = state.history[..boundary].to_vec();
            // A previous compaction whose notice lies after the new boundary still applies
            // to the prefix, so carry it over for the summarizer's view.
            if let Some((notice, _, _)) = compaction::latest_compaction(&state.history) {
                if notice >= boundary {
                    prefix.push(state.history[notice].clone());
                }
            }
            let count = prefix
                .iter()
                .filter(|m| m.role != super::history::Role::Notice)
                .count();
            (prefix, state.history[boundary].id.clone(), count)
        };
        self.emit(Event::Compacting { summary: None });
        let mut messages = project(
            &prefix,
            &ProjectionContext {
                provider_kind: provider.kind(),
                model_id,
                vision: model.vision,
                pdf: model.pdf,
                turn_context: None,
            },
        );
        messages.push(crate::providers::OutboundMessage::User {
            parts: vec![crate::providers::OutboundPart::Text(
                compaction::SUMMARY_REQUEST.to_owned(),
            )],
        });
        // The summarizing request is a request too: it never goes out above the window.
        let summarizing = prefix
            .iter()
            .filter(|m| m.role != super::history::Role::Notice)
            .map(compaction::estimate_message)
            .sum::<u64>()
            + prefix
                .iter()
                .filter_map(|m| m.meta.compaction.as_ref())
                .map(|c| (c.summary.len() as u64).div_ceil(4))
                .sum::<u64>()
            + (compaction::SUMMARY_INSTRUCTIONS.len() as u64).div_ceil(4)
            + 2_000;
        if summarizing > window {
            return Err(exceeded(&format!(
                "the earlier messages to summarize come to about {summarizing} tokens, more than one summarizing request can carry"
            )));
        }
        let request = ProviderRequest {
            model: model.name.clone(),
            system: compaction::SUMMARY_INSTRUCTIONS.to_owned(),
            messages,
            tools: Vec::new(),
            max_output_tokens: model.max_output_tokens,
            reasoning: model.reasoning,
            thinking_budget: model.thinking_budget,
            parallel_tool_calls: model.parallel_tool_calls,
        };
        let summary = match self.summarize(provider, request).await {
            SummaryOutcome::Done(summary) => summary,
            SummaryOutcome::Cancelled => return Err(Outcome::Interrupted),
            SummaryOutcome::Failed(error) if error.context_overflow => {
                return Err(exceeded(
                    "even the summarizing request is too long for the model",
                ))
            }
            SummaryOutcome::Failed(error) => return Err(Outcome::Error(error)),
        };
        let mut notice = Message::notice(
            NoticeKind::Compacted,
            format!("Compacted {compacted_count} earlier messages into a summary"),
            Some(&self.turn_id),
        );
        notice.meta.compaction = Some(super::history::CompactionRecord {
            boundary: boundary_id,
            summary: summary.clone(),
        });
        self.session.commit(notice);
        self.emit(Event::Compacted {
            summary: Some(summary),
        });
        self.compactions += 1;
        self.batches_since_compaction = 0;
        // Invariant 9: no request goes out above the window by tandem's own estimate.
        let after = compaction::estimate_request(&lock(&self.session.state).history) + fixed;
        if after > window {
            return Err(exceeded(&format!(
                "after compacting, the next request would still carry about {after} tokens"
            )));
        }
        Ok(())
    }

    /// Run the summarizing request; its text is not streamed to the user.
    async fn summarize(&self, provider: &dyn Provider, request: ProviderRequest) -> SummaryOutcome {
        let config = &self.session.engine.config;
        let idle = Duration::from_millis(config.stream_idle_timeout_ms);
        let mut chunks = provider.stream(request);
        let mut text = String::new();
        loop {
            let next = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return SummaryOutcome::Cancelled,
                next = tokio::time::timeout(idle, chunks.next()) => next,
            };
            match next {
                Err(_) => {
                    return SummaryOutcome::Failed(ProviderError::new(
                        "the provider went silent while summarizing the history",
                        true,
                    ))
                }
                Ok(None) => break,
                Ok(Some(Err(error))) => return SummaryOutcome::Failed(error),
                Ok(Some(Ok(Chunk::Text(delta))))
                    if text.len() + delta.len() > config.max_answer_bytes =>
                {
                    return SummaryOutcome::Failed(ProviderError::new(
                        format!(
                            "the model's summary of the history passed max_answer_bytes ({} bytes), so tandem stopped reading it",
                            config.max_answer_bytes
                        ),
                        false,
                    ))
                }
                Ok(Some(Ok(Chunk::Text(delta)))) => text.push_str(&delta),
                Ok(Some(Ok(_))) => {}
            }
        }
        if text.trim().is_empty() {
            // Nothing is lost (the history is whole), so the turn can simply be tried again.
            return SummaryOutcome::Failed(ProviderError::new(
                "the model returned an empty summary when asked to compact the history; retry the turn, or switch to another model to compact it",
                true,
            ));
        }
        SummaryOutcome::Done(text)
    }

    async fn system_prompt(&self) -> String {
        // AGENTS.md and CLAUDE.md at the workspace root are project instructions the user wrote
        // for agents; they join the system prompt. Reads go through the confined workspace.
        let workspace = self.session.workspace.clone();
        let files = tokio::task::spawn_blocking(move || {
            let mut found = Vec::new();
            for name in ["AGENTS.md", "CLAUDE.md"] {
                if let Ok(path) = workspace.resolve(name) {
                    if let Ok(Some(text)) = workspace.read_text_if_exists(&path) {
                        found.push((name, text));
                    }
                }
            }
            found
        })
        .await
        .unwrap_or_default();
        let mut system = BASE_SYSTEM_PROMPT.to_owned();
        for (name, text) in files {
            system.push_str(&format!(
                "\n\n<project-instructions file=\"{name}\">\n{text}\n</project-instructions>"
            ));
        }
        system
    }

    fn build_request(
        &self,
        system: &str,
        model_id: &str,
        model: &ModelConfig,
        mode: Mode,
        provider_kind: &str,
    ) -> ProviderRequest {
        let roots: Vec<String> = self
            .session
            .workspace
            .roots()
            .iter()
            .map(|r| r.display().to_string())
            .collect();
        let mode_text = match mode {
            Mode::Ask => "ask: reads run freely; every edit and shell command waits for the user's approval",
            Mode::AutoEdit => "autoEdit: edits inside the workspace apply without asking; shell commands need approval",
            Mode::Plan => "plan: you cannot edit files or run commands; investigate, then present a plan with propose_plan",
            Mode::FullAuto => "fullAuto: edits and commands run without asking; be careful",
        };
        let context = format!(
            "<turn-context>\nWorkspace roots: {}\nPermission mode: {mode_text}\n</turn-context>",
            roots.join(", ")
        );
        let messages = {
            let state = lock(&self.session.state);
            let ctx = ProjectionContext {
                provider_kind,
                model_id,
                vision: model.vision,
                pdf: model.pdf,
                turn_context: Some(&context),
            };
            if self.ephemeral.is_empty() {
                project(&state.history, &ctx)
            } else {
                let mut merged: Vec<Message> =
                    Vec::with_capacity(state.history.len() + self.ephemeral.len());
                let mut pending = self.ephemeral.iter().peekable();
                for (index, message) in state.history.iter().enumerate() {
                    while let Some((_, text)) = pending.next_if(|(at, _)| *at == index) {
                        merged.push(Message::user(
                            vec![Part::Text { text: text.clone() }],
                            Source::Reminder,
                            Some(&self.turn_id),
                        ));
                    }
                    merged.push(message.clone());
                }
                for (_, text) in pending {
                    merged.push(Message::user(
                        vec![Part::Text { text: text.clone() }],
                        Source::Reminder,
                        Some(&self.turn_id),
                    ));
                }
                project(&merged, &ctx)
            }
        };
        let tools: Vec<ToolSpec> = TOOLS
            .iter()
            .filter(|t| permissions::offered(mode, t))
            .map(|t| ToolSpec {
                name: t.name,
                description: t.description,
                parameters: t.parameters(),
            })
            .collect();
        ProviderRequest {
            model: model.name.clone(),
            system: system.to_owned(),
            messages,
            tools,
            max_output_tokens: model.max_output_tokens,
            reasoning: model.reasoning,
            thinking_budget: model.thinking_budget,
            parallel_tool_calls: model.parallel_tool_calls,
        }
    }

    /// One model request with bounded retries. Retriable failures (5xx, 429, transport errors,
    /// idle streams, streams cut short) are retried from a clean request after a backoff; text
    /// the user already saw is not shown twice. A stop during the backoff ends at once.
    async fn stream(
        &mut self,
        provider: &dyn Provider,
        request: ProviderRequest,
        mode: Mode,
    ) -> StreamOutcome {
        let config = self.session.engine.config.clone();
        let mut shown = Replay::default();
        let mut shown_reasoning = Replay::default();
        let mut attempt: u32 = 1;
        loop {
            let outcome = self
                .stream_once(
                    provider,
                    request.clone(),
                    mode,
                    &mut shown,
                    &mut shown_reasoning,
                )
                .await;
            match outcome {
                StreamOutcome::Failed { error, .. }
                    if error.retriable && attempt < config.provider_max_attempts =>
                {
                    let delay = backoff_delay(&config, attempt, error.retry_after);
                    attempt += 1;
                    self.notice(
                        NoticeKind::Retrying,
                        format!(
                            "{}; retrying {attempt}/{} in {:.1} s",
                            error.message,
                            config.provider_max_attempts,
                            delay.as_secs_f64()
                        ),
                    );
                    tokio::select! {
                        biased;
                        _ = self.cancel.cancelled() => {
                            return StreamOutcome::Cancelled {
                                text: shown.text,
                                reasoning: shown_reasoning.text,
                            };
                        }
                        _ = tokio::time::sleep(delay) => {}
                    }
                    shown.restart();
                    shown_reasoning.restart();
                }
                StreamOutcome::Failed { error, .. } => {
                    // What the user saw is what is kept, even if the last attempt saw less.
                    return StreamOutcome::Failed {
                        text: shown.text,
                        reasoning: shown_reasoning.text,
                        error,
                    };
                }
                StreamOutcome::Cancelled { .. } => {
                    return StreamOutcome::Cancelled {
                        text: shown.text,
                        reasoning: shown_reasoning.text,
                    };
                }
                finished => return finished,
            }
        }
    }

    async fn stream_once(
        &mut self,
        provider: &dyn Provider,
        request: ProviderRequest,
        mode: Mode,
        shown: &mut Replay,
        shown_reasoning: &mut Replay,
    ) -> StreamOutcome {
        let caps = self.session.engine.config.clone();
        let idle = Duration::from_millis(caps.stream_idle_timeout_ms);
        let mut chunks = provider.stream(request);
        let mut text = String::new();
        let mut reasoning = String::new();
        let mut extras: BTreeMap<String, Value> = BTreeMap::new();
        let mut calls: Vec<PartialCall> = Vec::new();
        let mut finish = None;
        let mut usage = None;
        let mut early: HashMap<usize, JoinHandle<ToolOutcome>> = HashMap::new();
        // Reads may start while later calls still stream, but only a prefix of low-risk calls:
        // a read after a write must see the write, so the first other call ends early starts.
        let mut early_allowed = true;
        let mut early_checked = 0usize;
        loop {
            let next = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => {
                    self.abandon_early(&calls, &mut early, "interrupted by user");
                    return StreamOutcome::Cancelled { text, reasoning };
                }
                next = tokio::time::timeout(idle, chunks.next()) => match next {
                    Ok(next) => next,
                    Err(_) => Some(Err(ProviderError::new(
                        format!(
                            "the provider sent nothing for {} s (stream_idle_timeout_ms)",
                            idle.as_secs_f64()
                        ),
                        true,
                    ))),
                },
            };
            match next {
                None => break,
                Some(Err(error)) => {
                    self.abandon_early(
                        &calls,
                        &mut early,
                        "the provider stream broke before the answer was complete; the model is asked again",
                    );
                    return StreamOutcome::Failed {
                        text,
                        reasoning,
                        error,
                    };
                }
                Some(Ok(chunk)) => match chunk {
                    Chunk::Text(delta) if text.len() + delta.len() > caps.max_answer_bytes => {
                        // Dropping the stream closes the connection: nothing more is read.
                        self.abandon_early(&calls, &mut early, "the answer passed its size cap");
                        return StreamOutcome::Failed {
                            text,
                            reasoning,
                            error: ProviderError::new(
                                format!(
                                    "the model's answer passed max_answer_bytes ({} bytes), so tandem stopped reading it; what came before is kept. Ask for a shorter answer, or raise max_answer_bytes in the config",
                                    caps.max_answer_bytes
                                ),
                                false,
                            ),
                        };
                    }
                    Chunk::Reasoning(delta)
                        if reasoning.len() + delta.len() > caps.max_reasoning_bytes =>
                    {
                        self.abandon_early(&calls, &mut early, "the answer passed its size cap");
                        return StreamOutcome::Failed {
                            text,
                            reasoning,
                            error: ProviderError::new(
                                format!(
                                    "the model's reasoning passed max_reasoning_bytes ({} bytes), so tandem stopped reading the answer; what came before is kept. Prompt again, or raise max_reasoning_bytes in the config",
                                    caps.max_reasoning_bytes
                                ),
                                false,
                            ),
                        };
                    }
                    Chunk::Text(delta) => {
                        if let Some(part) = shown.accept(&mut text, &delta) {
                            self.emit(Event::AssistantDelta { text: part });
                        }
                    }
                    Chunk::Reasoning(delta) => {
                        if let Some(part) = shown_reasoning.accept(&mut reasoning, &delta) {
                            self.emit(Event::ReasoningDelta { text: part });
                        }
                    }
                    Chunk::ToolCallDelta {
                        index,
                        id,
                        name,
                        arguments,
                    } => {
                        grow_calls(&mut calls, index);
                        if calls[index].arguments.len() + arguments.len()
                            > caps.max_tool_arguments_bytes
                        {
                            // Stop reading: the calls before this one are complete and kept,
                            // this one fails with a tool error the model can act on, and any
                            // after it are half-formed and dropped with the stream.
                            calls.truncate(index + 1);
                            let call = &mut calls[index];
                            if let Some(id) = id {
                                call.provider_id = id;
                            }
                            call.arguments = "{}".to_owned();
                            self.assign_id(&mut calls, index);
                            let call = &calls[index];
                            self.refused.insert(
                                call.id.clone(),
                                format!(
                                    "not run: the arguments of this {} call passed max_tool_arguments_bytes ({} bytes), so tandem stopped reading them. Make the change in smaller pieces (for example write_file a part, then edit_file to add the rest)",
                                    call.name, caps.max_tool_arguments_bytes
                                ),
                            );
                            finish = Some(FinishReason::ToolCalls);
                            break;
                        }
                        let call = &mut calls[index];
                        if let Some(id) = id {
                            call.provider_id = id;
                        }
                        if let Some(name) = name {
                            call.name.push_str(&name);
                        }
                        call.arguments.push_str(&arguments);
                        // Every call before `index` is complete now.
                        while early_allowed && early_checked < index {
                            let i = early_checked;
                            early_checked += 1;
                            self.assign_id(&mut calls, i);
                            match self.start_early(&calls[i], mode) {
                                Some(handle) => {
                                    early.insert(i, handle);
                                }
                                None => early_allowed = false,
                            }
                        }
                    }
                    Chunk::Finish(reason) => finish = Some(reason),
                    Chunk::Usage(u) => usage = Some(u),
                    Chunk::Extra { key, value } => {
                        extras.insert(key, value);
                    }
                    Chunk::ToolCallExtra { index, key, value } => {
                        grow_calls(&mut calls, index);
                        calls[index].extras.insert(key, value);
                    }
                },
            }
        }
        for i in 0..calls.len() {
            self.assign_id(&mut calls, i);
        }
        StreamOutcome::Finished {
            text,
            reasoning,
            extras,
            calls,
            finish,
            usage,
            early,
        }
    }

    /// Give call `i` of a streamed answer its id in the session, once: the provider's id when
    /// it is well-formed and no other call of the session (nor an earlier call of this answer)
    /// has it, else a fresh id of tandem's own. Every later step (events, approvals, the
    /// side-effect marks, results, resume and every provider's request) uses this id only,
    /// so a provider that reuses ids can never make two calls one. The provider's own id is
    /// not sent back: a reused one would be ambiguous to that provider too.
    fn assign_id(&self, calls: &mut [PartialCall], i: usize) {
        if !calls[i].id.is_empty() {
            return;
        }
        let wanted = calls[i].provider_id.as_str();
        let usable = well_formed_call_id(wanted)
            && !calls.iter().any(|c| c.id == wanted)
            && !lock(&self.session.state).tool_call_id_taken(wanted);
        let id = if usable {
            wanted.to_owned()
        } else {
            let fresh = super::history::new_id("call");
            if !wanted.is_empty() {
                tracing::info!(
                    provider_id = %wanted.chars().take(80).collect::<String>(),
                    id = %fresh,
                    "the provider's tool call id is reused or malformed; the call gets its own"
                );
            }
            fresh
        };
        calls[i].id = id;
    }

    /// Abort reads started early from a stream that will not complete, and close their cards.
    /// They are not in history, so no result is committed for them.
    fn abandon_early(
        &mut self,
        calls: &[PartialCall],
        early: &mut HashMap<usize, JoinHandle<ToolOutcome>>,
        why: &str,
    ) {
        for (index, handle) in early.drain() {
            handle.abort();
            if let Some(call) = calls.get(index) {
                self.announced.retain(|a| a != &call.id);
                self.emit(Event::ToolCallUpdate {
                    tool_call_id: call.id.clone(),
                    status: ToolStatus::Interrupted,
                    output: None,
                    result: Some(why.to_owned()),
                    diff: None,
                });
            }
        }
    }

    /// Start a complete call now if it is a low-risk read allowed without asking.
    fn start_early(&mut self, call: &PartialCall, mode: Mode) -> Option<JoinHandle<ToolOutcome>> {
        let meta = meta_for(&call.name)?;
        if meta.risk != Risk::Low || !permissions::offered(mode, meta) {
            return None;
        }
        let value: Value = serde_json::from_str(arguments_or_empty(&call.arguments)).ok()?;
        let args = parse_args(&call.name, &value).ok()?;
        self.announce(&call.id, &call.name, &value, &args);
        self.emit(Event::ToolCallUpdate {
            tool_call_id: call.id.clone(),
            status: ToolStatus::Running,
            output: None,
            result: None,
            diff: None,
        });
        Some(tokio::spawn(client_fs::read_only(
            self.session.workspace.clone(),
            self.session.client_fs.clone(),
            args,
        )))
    }

    fn announce(&mut self, id: &str, name: &str, arguments: &Value, args: &ToolArgs) {
        if self.announced.iter().any(|a| a == id) {
            return;
        }
        self.announced.push(id.to_owned());
        let kind = meta_for(name)
            .map(|m| m.kind)
            .unwrap_or(crate::protocol::ToolKind::Other);
        self.emit(Event::ToolCall {
            tool_call_id: id.to_owned(),
            name: name.to_owned(),
            kind,
            title: args.title(),
            arguments: arguments.clone(),
            locations: args.locations(&self.session.workspace),
        });
    }

    fn announce_unparsed(&mut self, call: &ToolCallRecord, arguments: &Value) {
        if self.announced.iter().any(|a| a == &call.id) {
            return;
        }
        self.announced.push(call.id.clone());
        let kind = meta_for(&call.name)
            .map(|m| m.kind)
            .unwrap_or(crate::protocol::ToolKind::Other);
        self.emit(Event::ToolCall {
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            kind,
            title: call.name.clone(),
            arguments: arguments.clone(),
            locations: None,
        });
    }

    fn commit_partial(&self, text: String, reasoning: String) {
        // What the user already saw stays; half-formed tool calls are dropped with the stream.
        if text.is_empty() && reasoning.is_empty() {
            return;
        }
        let mut message = Message::assistant(text.clone(), Vec::new(), &self.turn_id);
        if !reasoning.is_empty() {
            message.meta.reasoning = Some(reasoning.clone());
        }
        self.session.commit(message);
        self.emit(Event::AssistantMessage {
            text,
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
        });
    }

    fn commit_assistant(
        &self,
        model_id: &str,
        text: String,
        reasoning: String,
        extras: BTreeMap<String, Value>,
        calls: Vec<ToolCallRecord>,
        usage: Option<crate::providers::Usage>,
    ) {
        let mut message = Message::assistant(text.clone(), calls, &self.turn_id);
        message.meta.extras = extras;
        if !reasoning.is_empty() {
            message.meta.reasoning = Some(reasoning.clone());
        }
        let usage = usage.map(|u| UsageRecord {
            model: model_id.to_owned(),
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cached_tokens: u.cached_tokens,
        });
        message.meta.usage = usage.clone();
        self.session.commit(message);
        self.emit(Event::AssistantMessage {
            text,
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
        });
        if let Some(u) = usage {
            self.session.persist_usage(
                &u.model,
                u.input_tokens,
                u.output_tokens,
                u.cached_tokens.unwrap_or(0),
            );
            self.emit(Event::Usage {
                model: u.model,
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                cached_tokens: u.cached_tokens,
            });
        }
    }

    fn notice(&self, kind: NoticeKind, text: String) {
        self.session
            .commit(Message::notice(kind, text.clone(), Some(&self.turn_id)));
        self.emit(Event::Notice { kind, text });
    }

    /// End the turn with `reason` and `text` as a non-retriable error: an error notice, and the
    /// `turnEnded` fields that go with it.
    fn fail(&self, reason: TurnEndReason, text: String) -> (TurnEndReason, Option<TurnError>) {
        self.notice(NoticeKind::Error, text.clone());
        (
            reason,
            Some(TurnError {
                message: text,
                retriable: false,
            }),
        )
    }

    /// Whether the workspace folder was moved or replaced under the session (see
    /// `Workspace::moved`), checked off the async workers.
    async fn workspace_moved(&self) -> Option<String> {
        let workspace = self.session.workspace.clone();
        tokio::task::spawn_blocking(move || workspace.moved())
            .await
            .unwrap_or_else(|e| Some(format!("checking the workspace folder failed: {e}")))
    }

    /// Whether a write or a command may run now. It may not when the workspace folder moved
    /// under the session, or when its start cannot be made durable (invariant 8, fail closed);
    /// then its result is a tool error that says why, and the turn ends at its next step.
    async fn ready_for_side_effect(&self, call: &ToolCallRecord) -> bool {
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

    /// The most bytes each of `calls` results may keep: the batch gets what compaction can
    /// always keep verbatim (half the window less the fixed part, as `maybe_compact` targets),
    /// less a fifth for the calls themselves and the answer, shared evenly. The estimator
    /// counts four bytes a token, so by tandem's own estimate the batch fits.
    fn result_share_for(&self, calls: usize) -> usize {
        let model_id = lock(&self.session.state).model.clone();
        let Some(model) = self.session.engine.config.model(&model_id) else {
            return usize::MAX;
        };
        let batch_tokens = (model.context_window / 2).saturating_sub(self.fixed_tokens) * 4 / 5;
        let batch_bytes = usize::try_from(batch_tokens.saturating_mul(4)).unwrap_or(usize::MAX);
        (batch_bytes / calls.max(1)).max(MIN_RESULT_SHARE)
    }

    fn commit_result(
        &self,
        call: &ToolCallRecord,
        status: ResultStatus,
        text: String,
        diff: Option<&FileDiff>,
    ) {
        let diff_entries = diff.map(|d| vec![diff_entry(d)]);
        let text = fit_result(text, self.result_share);
        let mut message = Message::tool_result(call, status, text.clone(), &self.turn_id);
        if let Some(entries) = &diff_entries {
            message.meta.diff = serde_json::to_value(entries).ok();
        }
        self.session.commit(message);
        self.emit(Event::ToolCallUpdate {
            tool_call_id: call.id.clone(),
            status: match status {
                ResultStatus::Completed => ToolStatus::Completed,
                ResultStatus::Failed => ToolStatus::Failed,
                ResultStatus::Denied => ToolStatus::Denied,
                ResultStatus::Interrupted => ToolStatus::Interrupted,
            },
            output: None,
            result: Some(text),
            diff: diff_entries,
        });
    }

    fn interrupt_rest(&mut self, calls: &[ToolCallRecord]) {
        for call in calls {
            // A call the stop reached before authorization still gets its card first.
            if !self.announced.contains(&call.id) {
                let arguments = serde_json::from_str(arguments_or_empty(&call.arguments))
                    .unwrap_or_else(|_| Value::String(call.arguments.clone()));
                match parse_args(&call.name, &arguments) {
                    Ok(args) => self.announce(&call.id, &call.name, &arguments, &args),
                    Err(_) => self.announce_unparsed(call, &arguments),
                }
            }
            self.commit_result(
                call,
                ResultStatus::Interrupted,
                "interrupted by user".to_owned(),
                None,
            );
        }
    }

    /// Authorize every call in order, then execute. Returns false if the turn was stopped; every
    /// call has a committed result either way.
    async fn run_tools(
        &mut self,
        calls: &[ToolCallRecord],
        mut early: HashMap<usize, JoinHandle<ToolOutcome>>,
        mode: Mode,
    ) -> bool {
        self.result_share = self.result_share_for(calls.len());
        // Phase A: authorize in call order. Nothing runs yet except early-started reads.
        let mut prepared: Vec<Prepared> = Vec::with_capacity(calls.len());
        for (index, call) in calls.iter().enumerate() {
            if self.cancel.is_cancelled() {
                abort_all(&mut early);
                self.interrupt_rest(calls);
                return false;
            }
            match self.authorize(call, mode).await {
                Some(p) => {
                    // A read that turned out to need approval (a secret) must not use a result
                    // started before it was approved.
                    if self.needs_fresh_run.contains(&call.id) {
                        if let Some(handle) = early.remove(&index) {
                            handle.abort();
                        }
                    }
                    prepared.push(p);
                }
                None => {
                    abort_all(&mut early);
                    self.interrupt_rest(calls);
                    return false;
                }
            }
        }

        // Phase B: execute. Contiguous low-risk runs go concurrently; everything else alone.
        let mut index = 0;
        while index < calls.len() {
            if self.cancel.is_cancelled() {
                abort_all(&mut early);
                self.interrupt_rest(&calls[index..]);
                return false;
            }
            let is_low = |p: &Prepared| {
                matches!(
                    p,
                    Prepared::Run {
                        risk: Risk::Low,
                        ..
                    }
                )
            };
            if is_low(&prepared[index]) {
                let end = (index..calls.len())
                    .find(|&j| !is_low(&prepared[j]))
                    .unwrap_or(calls.len());
                let mut handles = Vec::with_capacity(end - index);
                for (offset, slot) in prepared[index..end].iter_mut().enumerate() {
                    let i = index + offset;
                    let handle = match early.remove(&i) {
                        Some(handle) => handle,
                        None => {
                            let Prepared::Run { args, .. } = std::mem::replace(
                                slot,
                                Prepared::Done {
                                    status: ResultStatus::Failed,
                                    text: String::new(),
                                },
                            ) else {
                                continue;
                            };
                            self.emit(Event::ToolCallUpdate {
                                tool_call_id: calls[i].id.clone(),
                                status: ToolStatus::Running,
                                output: None,
                                result: None,
                                diff: None,
                            });
                            tokio::spawn(client_fs::read_only(
                                self.session.workspace.clone(),
                                self.session.client_fs.clone(),
                                args,
                            ))
                        }
                    };
                    handles.push((i, handle));
                }
                let mut handles = handles.into_iter();
                while let Some((i, handle)) = handles.next() {
                    let abort = handle.abort_handle();
                    let outcome = tokio::select! {
                        biased;
                        _ = self.cancel.cancelled() => None,
                        joined = handle => Some(joined),
                    };
                    match outcome {
                        None => {
                            abort.abort();
                            for (_, rest) in handles.by_ref() {
                                rest.abort();
                            }
                            abort_all(&mut early);
                            self.interrupt_rest(&calls[i..]);
                            return false;
                        }
                        Some(joined) => {
                            let outcome = joined.unwrap_or_else(|e| ToolOutcome {
                                output: format!("the tool crashed: {e}"),
                                is_error: true,
                            });
                            let status = if outcome.is_error {
                                ResultStatus::Failed
                            } else {
                                ResultStatus::Completed
                            };
                            self.commit_result(&calls[i], status, outcome.output, None);
                        }
                    }
                }
                index = end;
                continue;
            }
            let slot = std::mem::replace(
                &mut prepared[index],
                Prepared::Done {
                    status: ResultStatus::Failed,
                    text: String::new(),
                },
            );
            let call = &calls[index];
            match slot {
                Prepared::Done { status, text } => self.commit_result(call, status, text, None),
                Prepared::Run {
                    args, plan, edited, ..
                } => {
                    if !self.execute_alone(call, args, plan, edited).await {
                        self.interrupt_rest(&calls[index + 1..]);
                        return false;
                    }
                }
            }
            index += 1;
        }
        true
    }

    /// Decide one call. `None` means the turn was stopped while waiting for the user.
    async fn authorize(&mut self, call: &ToolCallRecord, mode: Mode) -> Option<Prepared> {
        if let Some(text) = self.refused.remove(&call.id) {
            self.announce_unparsed(call, &Value::Object(Default::default()));
            return Some(Prepared::Done {
                status: ResultStatus::Failed,
                text,
            });
        }
        let value: Value = match serde_json::from_str(arguments_or_empty(&call.arguments)) {
            Ok(v) => v,
            Err(e) => {
                self.announce_unparsed(call, &Value::String(call.arguments.clone()));
                return Some(Prepared::Done {
                    status: ResultStatus::Failed,
                    text: format!(
                        "the arguments of {} are not valid JSON ({e}); call it again with a JSON object",
                        call.name
                    ),
                });
            }
        };
        let args = match parse_args(&call.name, &value) {
            Ok(args) => args,
            Err(text) => {
                self.announce_unparsed(call, &value);
                return Some(Prepared::Done {
                    status: ResultStatus::Failed,
                    text,
                });
            }
        };
        self.announce(&call.id, &call.name, &value, &args);
        let Some(meta) = meta_for(&call.name) else {
            return Some(Prepared::Done {
                status: ResultStatus::Failed,
                text: format!("unknown tool {}", call.name),
            });
        };
        let mut verdict = {
            let state = lock(&self.session.state);
            if permissions::offered(mode, meta) {
                permissions::evaluate(mode, &state.rules, meta, args.command())
            } else {
                permissions::evaluate(Mode::Plan, &state.rules, meta, args.command())
            }
        };
        // A credential file or a project file that runs code: asked in every mode, each time, with
        // no "always" option.
        let mut asked_each_time = false;
        let changed_path = match &args {
            ToolArgs::EditFile { path, .. } | ToolArgs::WriteFile { path, .. } => {
                Some(path.clone())
            }
            _ => None,
        };
        let secret_access = match &args {
            ToolArgs::ReadFile { path, .. } => Some((path.clone(), SecretAccess::Read)),
            ToolArgs::EditFile { path, .. } => Some((path.clone(), SecretAccess::Edit)),
            ToolArgs::WriteFile { path, .. } => Some((path.clone(), SecretAccess::Write)),
            _ => None,
        };
        if let Some((path, access)) =
            secret_access.filter(|_| !matches!(verdict, Verdict::Refuse { .. }))
        {
            // Files that may hold secrets need an explicit approval, in every mode, for every
            // tool that reveals their content (an edit tells whether `old_string` is there);
            // checked on the resolved path so a link cannot hide one.
            let workspace = self.session.workspace.clone();
            let reason = tokio::task::spawn_blocking(move || {
                crate::tools::fs::secret_access_reason(&workspace, &path, access)
            })
            .await
            .ok()
            .flatten();
            if let Some(reason) = reason {
                asked_each_time = true;
                self.needs_fresh_run.insert(call.id.clone());
                verdict = Verdict::Ask { reason };
            }
        }
        if let Some(path) =
            changed_path.filter(|_| !asked_each_time && !matches!(verdict, Verdict::Refuse { .. }))
        {
            // Project files that run code (tasks, launch configs, pre-commit) are asked every
            // time, also in fullAuto, with no rule to cover them.
            let workspace = self.session.workspace.clone();
            let reason = tokio::task::spawn_blocking(move || {
                crate::tools::fs::ask_change_reason(&workspace, &path)
            })
            .await
            .ok()
            .flatten();
            if let Some(reason) = reason {
                asked_each_time = true;
                verdict = Verdict::Ask { reason };
            }
        }
        if matches!(args, ToolArgs::Shell { .. }) && !matches!(verdict, Verdict::Refuse { .. }) {
            let network = lock(&self.session.state).allow_network;
            if let Some(reason) = sandbox::status().await.approval_reason(network) {
                // Without a sandbox (or one that cannot keep the network closed) nothing limits
                // a command, so the user sees every one.
                verdict = Verdict::Ask { reason };
            }
        }
        // Edits are planned now so the approval can show the diff and a bad edit fails early,
        // except on a file asked each time: there the failure itself says something about the content
        // ("old_string not found"), so the model learns it only after the user approved.
        let mut failed_plan: Option<String> = None;
        let plan = match &args {
            ToolArgs::WriteFile { .. } | ToolArgs::EditFile { .. }
                if !matches!(verdict, Verdict::Refuse { .. }) =>
            {
                let planned = tokio::select! {
                    biased;
                    // Planning runs on the blocking pool and may take up to the diff deadline
                    // on a huge rewrite; a stop does not wait for it (its result is dropped).
                    _ = self.cancel.cancelled() => return None,
                    planned = self.plan(args.clone()) => planned,
                };
                match planned {
                    Ok(plan) => {
                        if plan.diff.shape == DiffShape::WholeFile {
                            if let Verdict::Ask { reason } = &mut verdict {
                                reason.push_str(
                                    "; the change is too large to compare line by line in time, so the diff shows the whole file replaced",
                                );
                            }
                        }
                        Some(Box::new(plan))
                    }
                    Err(text) if asked_each_time => {
                        if let Verdict::Ask { reason } = &mut verdict {
                            reason.push_str(&format!(
                                "; as proposed it cannot be applied ({text}), and approving only tells the model that"
                            ));
                        }
                        failed_plan = Some(text);
                        None
                    }
                    Err(text) => {
                        return Some(Prepared::Done {
                            status: ResultStatus::Failed,
                            text,
                        })
                    }
                }
            }
            _ => None,
        };
        match verdict {
            Verdict::Allow => Some(Prepared::Run {
                args,
                risk: meta.risk,
                plan,
                edited: None,
            }),
            Verdict::Refuse { reason } => Some(Prepared::Done {
                status: ResultStatus::Failed,
                text: reason,
            }),
            Verdict::Ask { reason } => {
                if !self.session.engine.client_can_answer() {
                    return Some(Prepared::Done {
                        status: ResultStatus::Denied,
                        text: "denied: no client is able to answer approvals, so tandem denies by default"
                            .to_owned(),
                    });
                }
                let command = args.command().map(str::to_owned);
                // A decision recorded before a crash is not asked again (invariant 8).
                let recorded = self.recorded.remove(&call.id);
                let earlier = recorded
                    .as_ref()
                    .filter(|r| r.kind == "approval")
                    .and_then(|r| r.decision.as_deref())
                    .and_then(parse_recorded_approval);
                let (decision, message, edited_content) = match earlier {
                    Some(decided) => decided,
                    None => {
                        let request_id = recorded
                            .map(|r| r.request_id)
                            .unwrap_or_else(|| super::history::new_id("r"));
                        let event = Event::ApprovalRequested {
                            arguments_digest: crate::protocol::arguments_digest(&call.name, &value),
                            request_id: request_id.clone(),
                            tool_call_id: call.id.clone(),
                            name: call.name.clone(),
                            kind: meta.kind,
                            title: args.title(),
                            reason,
                            arguments: value.clone(),
                            diff: plan.as_ref().map(|p| vec![diff_entry(&p.diff)]),
                            cwd: command
                                .as_ref()
                                .map(|_| self.session.workspace.roots()[0].display().to_string()),
                            command: command.clone(),
                            options: if asked_each_time {
                                // Each such read or change is its own decision; no rule covers them.
                                approval_options(&call.name, None)
                                    .into_iter()
                                    .filter(|o| {
                                        matches!(o.decision, Decision::Once | Decision::Deny)
                                    })
                                    .collect()
                            } else {
                                approval_options(&call.name, command.as_deref())
                            },
                        };
                        let estimate = call.arguments.len()
                            + plan.as_ref().map_or(0, |p| {
                                p.diff.old_text.as_ref().map_or(0, String::len)
                                    + p.diff.new_text.len()
                                    + p.diff.unified.len()
                            });
                        let Some((event, shown)) = fit_approval(event, estimate).await else {
                            return Some(Prepared::Done {
                                status: ResultStatus::Failed,
                                text: "tandem could not prepare this change for review, so it was not applied; try a smaller change".to_owned(),
                            });
                        };
                        let receiver = self.register_pending(
                            &request_id,
                            PendingKind::Approval,
                            &call.id,
                            &event,
                            shown,
                        );
                        self.emit(event);
                        let resolution = self.wait_pending(&request_id, receiver).await;
                        let Some(Resolution::Approval {
                            decision,
                            message,
                            edited_content,
                        }) = resolution
                        else {
                            // Stopped while waiting: the approval is withdrawn.
                            self.emit(Event::ApprovalResolved {
                                request_id,
                                decision: Decision::Deny,
                            });
                            return None;
                        };
                        self.session.persist_decision(
                            &request_id,
                            &serde_json::json!({
                                "decision": decision,
                                "message": message,
                                "editedContent": edited_content,
                            }),
                        );
                        self.emit(Event::ApprovalResolved {
                            request_id,
                            decision,
                        });
                        (decision, message, edited_content)
                    }
                };
                match decision {
                    Decision::Deny => Some(Prepared::Done {
                        status: ResultStatus::Denied,
                        text: match message.filter(|m| !m.trim().is_empty()) {
                            Some(m) => format!("denied by user: {m}"),
                            None => "denied by user".to_owned(),
                        },
                    }),
                    Decision::Once | Decision::AlwaysTool | Decision::AlwaysCommand => {
                        {
                            let mut state = lock(&self.session.state);
                            match (decision, &command) {
                                (Decision::AlwaysTool, _)
                                    if !state.rules.tools.contains(&call.name) =>
                                {
                                    state.rules.tools.push(call.name.clone());
                                    self.session.persist_rule("tool", &call.name);
                                }
                                (Decision::AlwaysCommand, Some(command)) => {
                                    let prefix = suggested_prefix(command);
                                    if !prefix.is_empty()
                                        && !state.rules.command_prefixes.contains(&prefix)
                                    {
                                        self.session.persist_rule("commandPrefix", &prefix);
                                        state.rules.command_prefixes.push(prefix);
                                    }
                                }
                                _ => {}
                            }
                        }
                        if let Some(text) = failed_plan {
                            return Some(Prepared::Done {
                                status: ResultStatus::Failed,
                                text,
                            });
                        }
                        let edited = edited_content.filter(|_| plan.is_some());
                        Some(Prepared::Run {
                            args,
                            risk: meta.risk,
                            plan,
                            edited,
                        })
                    }
                }
            }
        }
    }

    async fn plan(&self, args: ToolArgs) -> Result<PlannedEdit, String> {
        let workspace = self.session.workspace.clone();
        if let Some(client) = self.session.client_fs.clone() {
            return client_fs::plan(workspace, client, args).await;
        }
        tokio::task::spawn_blocking(move || match args {
            ToolArgs::WriteFile { path, content } => plan_write(&workspace, &path, &content),
            ToolArgs::EditFile {
                path,
                old_string,
                new_string,
                replace_all,
            } => plan_edit(&workspace, &path, &old_string, &new_string, replace_all),
            other => Err(format!("internal error: {} is not an edit", other.title())),
        })
        .await
        .unwrap_or_else(|e| Err(format!("planning the edit crashed: {e}")))
    }

    fn register_pending(
        &self,
        request_id: &str,
        kind: PendingKind,
        tool_call_id: &str,
        event: &Event,
        shown: ProposalShown,
    ) -> oneshot::Receiver<Resolution> {
        let (sender, receiver) = oneshot::channel();
        let payload = serde_json::to_value(event).unwrap_or(Value::Null);
        // The inbox row is committed before the event that announces it.
        self.session
            .persist_pending(request_id, kind, tool_call_id, &self.turn_id, &payload);
        lock(&self.session.pending).insert(
            request_id.to_owned(),
            PendingRequest {
                kind,
                tool_call_id: tool_call_id.to_owned(),
                turn_id: self.turn_id.clone(),
                payload,
                shown,
                sender,
            },
        );
        receiver
    }

    /// Wait for the user, or for a stop. On stop the pending entry is removed so a late answer
    /// gets `staleApproval`.
    async fn wait_pending(
        &self,
        request_id: &str,
        receiver: oneshot::Receiver<Resolution>,
    ) -> Option<Resolution> {
        let result = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => None,
            r = receiver => r.ok(),
        };
        if result.is_none() {
            lock(&self.session.pending).remove(request_id);
        }
        result
    }

    /// Execute one non-read call alone. Returns false if the turn was stopped during it (its
    /// result is committed as interrupted).
    async fn execute_alone(
        &mut self,
        call: &ToolCallRecord,
        args: ToolArgs,
        plan: Option<Box<PlannedEdit>>,
        edited: Option<String>,
    ) -> bool {
        self.emit(Event::ToolCallUpdate {
            tool_call_id: call.id.clone(),
            status: ToolStatus::Running,
            output: None,
            result: None,
            diff: None,
        });
        match args {
            ToolArgs::WriteFile { .. } | ToolArgs::EditFile { .. } => {
                let Some(plan) = plan else {
                    self.commit_result(
                        call,
                        ResultStatus::Failed,
                        "internal error: edit without a plan".into(),
                        None,
                    );
                    return true;
                };
                let workspace = self.session.workspace.clone();
                let diff = match &edited {
                    // The user's version is compared off the async workers: a large file
                    // takes up to the diff deadline.
                    Some(content) => {
                        let (path, old, new) = (
                            plan.diff.path.clone(),
                            plan.old_content.clone(),
                            content.clone(),
                        );
                        tokio::task::spawn_blocking(move || {
                            crate::workspace::diff::file_diff(&path, old.as_deref(), &new)
                        })
                        .await
                        .unwrap_or_else(|_| plan.diff.clone())
                    }
                    None => plan.diff.clone(),
                };
                // A write is not interrupted halfway: it is short and atomic, and a stop that
                // arrives during it takes effect right after it is recorded.
                if !self.ready_for_side_effect(call).await {
                    return true;
                }
                let outcome = match self.session.client_fs.clone() {
                    Some(client) => {
                        client_fs::apply(workspace, client, &plan, edited.as_deref()).await
                    }
                    None => tokio::task::spawn_blocking(move || {
                        apply_edit(&workspace, &plan, edited.as_deref())
                    })
                    .await
                    .unwrap_or_else(|e| ToolOutcome {
                        output: format!("the edit crashed: {e}"),
                        is_error: true,
                    }),
                };
                let status = if outcome.is_error {
                    ResultStatus::Failed
                } else {
                    ResultStatus::Completed
                };
                let shown = (!outcome.is_error).then_some(&diff);
                self.commit_result(call, status, outcome.output, shown);
                self.session.after_side_effect(&call.id);
                true
            }
            ToolArgs::Shell {
                command,
                timeout_ms,
            } => {
                let timeout = timeout_ms
                    .map(Duration::from_millis)
                    .unwrap_or(shell::DEFAULT_TIMEOUT)
                    .min(shell::MAX_TIMEOUT);
                let roots = self.session.workspace.roots().to_vec();
                let read_only = {
                    let roots = roots.clone();
                    // It looks at the roots' `.git` entries, so it runs off the async workers.
                    tokio::task::spawn_blocking(move || sandbox::read_only_paths(&roots))
                        .await
                        .unwrap_or_else(|_| crate::workspace::protected::extra_protected())
                };
                let sandbox = Confinement::new(
                    &sandbox::status().await,
                    SandboxPolicy {
                        writable: roots,
                        read_only,
                        network: lock(&self.session.state).allow_network,
                    },
                );
                let request = ShellRequest {
                    command,
                    cwd: self.session.workspace.roots()[0].clone(),
                    timeout,
                    kill_grace: Duration::from_millis(
                        self.session.engine.config.shell_kill_grace_ms,
                    ),
                    sandbox,
                    env: self.session.engine.config.command_environment(),
                    max_processes: Some(self.session.engine.config.shell_max_processes),
                };
                if !self.ready_for_side_effect(call).await {
                    return true;
                }
                let session = self.session.clone();
                let turn_id = self.turn_id.clone();
                let tool_call_id = call.id.clone();
                // Protected files a mount cannot cover (they do not exist yet) are checked after.
                let sentinel_roots = self.session.workspace.roots().to_vec();
                let sentinels = tokio::task::spawn_blocking(move || {
                    sandbox::ProtectedSentinels::before(&sentinel_roots)
                })
                .await
                .unwrap_or_default();
                let result = shell::run(request, &self.cancel, |chunk| {
                    session.emit(
                        Some(&turn_id),
                        Event::ToolCallUpdate {
                            tool_call_id: tool_call_id.clone(),
                            status: ToolStatus::Running,
                            output: Some(chunk.to_owned()),
                            result: None,
                            diff: None,
                        },
                    );
                    session
                        .emitter
                        .stream_room()
                        .map(|room| Box::pin(room) as shell::OutputPause)
                })
                .await;
                let mut text = result.model_text(timeout);
                if let Ok(Some(note)) = tokio::task::spawn_blocking(move || sentinels.after()).await
                {
                    text.push('\n');
                    text.push_str(&note);
                }
                let keep_going = match result.end {
                    shell::ShellEnd::Interrupted => {
                        self.commit_result(call, ResultStatus::Interrupted, text, None);
                        false
                    }
                    _ => {
                        let status = if result.is_success() {
                            ResultStatus::Completed
                        } else {
                            ResultStatus::Failed
                        };
                        self.commit_result(call, status, text, None);
                        true
                    }
                };
                self.session.after_side_effect(&call.id);
                keep_going
            }
            ToolArgs::AskUser { question, choices } => {
                self.ask(call, question, choices, None).await
            }
            ToolArgs::ProposePlan { plan } => {
                self.ask(
                    call,
                    "Do you accept this plan?".to_owned(),
                    Some(vec!["accept".to_owned(), "reject".to_owned()]),
                    Some(plan),
                )
                .await
            }
            read => {
                // Read-only tools are normally batched; one that lands here still runs.
                let outcome = client_fs::read_only(
                    self.session.workspace.clone(),
                    self.session.client_fs.clone(),
                    read,
                )
                .await;
                let status = if outcome.is_error {
                    ResultStatus::Failed
                } else {
                    ResultStatus::Completed
                };
                self.commit_result(call, status, outcome.output, None);
                true
            }
        }
    }

    async fn ask(
        &mut self,
        call: &ToolCallRecord,
        question: String,
        choices: Option<Vec<String>>,
        plan: Option<String>,
    ) -> bool {
        if !self.session.engine.client_can_answer() {
            self.commit_result(
                call,
                ResultStatus::Failed,
                "no client is able to answer questions right now; continue with your best judgement and say what you assumed".to_owned(),
                None,
            );
            return true;
        }
        let is_plan = plan.is_some();
        let recorded = self
            .recorded
            .remove(&call.id)
            .filter(|r| r.kind == "question");
        let earlier = recorded
            .as_ref()
            .and_then(|r| r.decision.as_deref())
            .and_then(|d| serde_json::from_str::<Value>(d).ok())
            .and_then(|v| v.get("answer").and_then(Value::as_str).map(str::to_owned));
        let request_id = recorded
            .map(|r| r.request_id)
            .unwrap_or_else(|| super::history::new_id("r"));
        let resolution = match earlier {
            // Answered before a crash: not asked again.
            Some(answer) => Some(Resolution::Answer(answer)),
            None => {
                let event = Event::QuestionAsked {
                    request_id: request_id.clone(),
                    tool_call_id: call.id.clone(),
                    question,
                    choices,
                    plan,
                };
                let receiver = self.register_pending(
                    &request_id,
                    PendingKind::Question,
                    &call.id,
                    &event,
                    ProposalShown::Whole,
                );
                self.emit(event);
                let resolution = self.wait_pending(&request_id, receiver).await;
                if let Some(Resolution::Answer(answer)) = &resolution {
                    self.session
                        .persist_decision(&request_id, &serde_json::json!({ "answer": answer }));
                }
                resolution
            }
        };
        match resolution {
            Some(Resolution::Answer(answer)) => {
                let text = if is_plan {
                    format!("The user responded to the plan: {answer}")
                } else {
                    format!("The user answered: {answer}")
                };
                self.commit_result(call, ResultStatus::Completed, text, None);
                true
            }
            Some(Resolution::Approval { .. }) | None => {
                self.commit_result(
                    call,
                    ResultStatus::Interrupted,
                    "interrupted by user".to_owned(),
                    None,
                );
                false
            }
        }
    }

    /// Count identical consecutive calls across batches and warn the model at the threshold.
    fn check_repeats(&mut self, calls: &[ToolCallRecord]) {
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
    fn apply_steering(&self) {
        let texts: Vec<String> = lock(&self.session.state).steering.drain(..).collect();
        self.commit_steering(texts);
    }

    /// Everything queued since the last safe point becomes one user message, so a client that
    /// steers many times adds one message to the next request, not one per steer.
    fn commit_steering(&self, texts: Vec<String>) {
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

    /// At the model's natural end: continue with queued steering, or stop accepting steering.
    /// Both happen under the state lock so a steer cannot slip in between the check and the end.
    fn finish_or_steer(&self) -> bool {
        let texts: Vec<String> = {
            let mut state = lock(&self.session.state);
            if state.steering.is_empty() {
                state.accepting_steering = false;
                return true;
            }
            state.steering.drain(..).collect()
        };
        self.commit_steering(texts);
        false
    }

    fn end(&mut self, outcome: Outcome) {
        // Steering that never reached a safe point is kept as a user message, so nothing the
        // user typed is lost; the next turn's model sees it. It goes before the turn's closing
        // notice, so `retry` still finds a provider error at the tail.
        let leftover: Vec<String> = {
            let mut state = lock(&self.session.state);
            state.accepting_steering = false;
            state.steering.drain(..).collect()
        };
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
                let mut notice = Message::notice(
                    NoticeKind::Error,
                    error.message.clone(),
                    Some(&self.turn_id),
                );
                notice.meta.display = Some(serde_json::json!({
                    "reason": PROVIDER_ERROR_REASON,
                    "retriable": error.retriable,
                }));
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
            Outcome::WorkspaceMoved(text) => self.fail(TurnEndReason::Error, text),
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
        // Anything still pending belongs to this turn and can no longer be answered.
        lock(&self.session.pending).retain(|_, p| p.turn_id != self.turn_id);
        self.session.withdraw_pending_rows(&self.turn_id);
        // The turn becomes inactive and announces its end under one lock, so a prompt admitted
        // right after cannot emit its `turnStarted` before this `turnEnded`.
        let mut state = lock(&self.session.state);
        if state.active_turn.as_deref() == Some(self.turn_id.as_str()) {
            state.active_turn = None;
        }
        self.emit(Event::TurnEnded { reason, error });
        // After the event, so its commit does not wait for these; still under the lock, so
        // they cover exactly this turn's messages and what came before.
        self.session.store_displays(&mut state);
        drop(state);
    }
}

fn abort_all(early: &mut HashMap<usize, JoinHandle<ToolOutcome>>) {
    for (_, handle) in early.drain() {
        handle.abort();
    }
}

/// Make room for tool call `index` (pieces may name a call before its first piece arrives).
fn grow_calls(calls: &mut Vec<PartialCall>, index: usize) {
    while calls.len() <= index {
        calls.push(PartialCall {
            id: String::new(),
            provider_id: String::new(),
            name: String::new(),
            arguments: String::new(),
            extras: BTreeMap::new(),
        });
    }
}

/// Whether a provider's tool call id can serve as the session's id: present (some local
/// servers omit it), short, and made only of the characters every vendor accepts in the ids
/// sent back to it (Anthropic allows `[A-Za-z0-9_-]`), so a switch of vendor keeps working.
fn well_formed_call_id(id: &str) -> bool {
    (1..=MAX_PROVIDER_CALL_ID_BYTES).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Longer provider ids are replaced (OpenAI's own are about 30 bytes, Anthropic's 30).
const MAX_PROVIDER_CALL_ID_BYTES: usize = 64;

fn arguments_or_empty(arguments: &str) -> &str {
    if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    }
}

/// The least a tool result keeps however many calls share the window: enough for the start of
/// the result and the note that says how to read the rest.
const MIN_RESULT_SHARE: usize = 512;

/// `text` cut to at most `limit` bytes (on a character boundary), with a note that says what
/// was left out and how to read it in pieces. The cut is what the model, the store and the
/// client all see: a result too large for the window would otherwise be sent whole, or cost
/// a compaction that cannot free it.
fn fit_result(text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let total = text.len();
    let note_room = 360;
    let mut keep = limit.saturating_sub(note_room);
    while keep > 0 && !text.is_char_boundary(keep) {
        keep -= 1;
    }
    let mut cut = text;
    cut.truncate(keep);
    cut.push_str(&format!(
        "\n\n[tandem cut this result to fit the model's context window: it shows the first {keep} of {total} bytes. \
         Read the rest in smaller pieces: read_file with offset and limit, grep for the part you need, \
         or a narrower command.]"
    ));
    cut
}

/// Fit an `approvalRequested` under [`fit::APPROVAL_DISPLAY_BYTES`], so it and the
/// `session/load` that shows it again stay under the frame cap. A proposal of an 8 MiB file
/// carries the file twice plus the unified diff; cut, the approval says so in its `reason`, and
/// the request is marked [`ProposalShown::Cut`] so an `approve` with `editedContent` is refused:
/// an edit of a text the user never saw whole would write the cut. `estimate` (the raw
/// arguments and the diff's texts) keeps the common case free of a serialization pass; the
/// exact check and the cut run off the async workers.
async fn fit_approval(event: Event, estimate: usize) -> Option<(Event, ProposalShown)> {
    if estimate < fit::APPROVAL_DISPLAY_BYTES / 8 {
        return Some((event, ProposalShown::Whole));
    }
    let fitted = tokio::task::spawn_blocking(move || {
        if fit::serialized_len(&event) <= fit::APPROVAL_DISPLAY_BYTES {
            return (event, ProposalShown::Whole);
        }
        let Ok(mut value) = serde_json::to_value(&event) else {
            return (event, ProposalShown::Cut);
        };
        // The reason's sentence is added first, so the cut leaves room for it.
        if let Some(Value::String(reason)) = value.get_mut("reason") {
            if !reason.ends_with(['.', '!', '?']) {
                reason.push('.');
            }
            reason.push_str(
                " The change is too large to show in full: parts of it are cut, each cut says how much it leaves out. Approve or deny it as proposed; it cannot be edited before it is applied.",
            );
        }
        let cut = fit::fit_value(&mut value, fit::APPROVAL_DISPLAY_BYTES);
        tracing::info!(cut, "an approval's proposal was cut to fit one message");
        match serde_json::from_value::<Event>(value) {
            Ok(fitted) => (fitted, ProposalShown::Cut),
            Err(_) => (event, ProposalShown::Cut),
        }
    })
    .await;
    // The task cannot panic short of a bug; then the change is not shown and not applied.
    fitted
        .map_err(|e| tracing::error!("fitting an approval crashed: {e}"))
        .ok()
}

fn diff_entry(diff: &FileDiff) -> DiffEntry {
    DiffEntry {
        path: diff.path.clone(),
        old_text: diff.old_text.clone(),
        new_text: diff.new_text.clone(),
        unified: diff.unified.clone(),
    }
}

/// Text already shown to the user in this response, so a retried stream does not show it twice.
#[derive(Default)]
struct Replay {
    text: String,
    /// Whether the current attempt still agrees with what was shown.
    matching: bool,
    attempt_started: bool,
}

impl Replay {
    /// A new attempt begins: its text is compared against what was shown.
    fn restart(&mut self) {
        self.matching = true;
        self.attempt_started = true;
    }

    /// Append `delta` to the attempt's `text` and return the part the user has not seen yet.
    /// Only the new bytes are compared, so this stays linear in the length of the answer.
    fn accept(&mut self, text: &mut String, delta: &str) -> Option<String> {
        let previous = text.len();
        text.push_str(delta);
        if !self.attempt_started {
            self.text.push_str(delta);
            return (!delta.is_empty()).then(|| delta.to_owned());
        }
        if self.matching {
            let end = text.len().min(self.text.len());
            if previous < end
                && self.text.as_bytes()[previous..end] != text.as_bytes()[previous..end]
            {
                self.matching = false;
            }
        }
        let from = if self.matching {
            previous.max(self.text.len())
        } else {
            previous
        };
        if from >= text.len() || !text.is_char_boundary(from) {
            return None;
        }
        let part = text[from..].to_owned();
        self.text.push_str(&part);
        Some(part)
    }
}

/// Exponential backoff with jitter, at least the provider's (capped) `Retry-After`.
fn backoff_delay(
    config: &crate::config::Config,
    attempt: u32,
    retry_after: Option<Duration>,
) -> Duration {
    let exponent = attempt.saturating_sub(1).min(16);
    let base = config
        .retry_base_delay_ms
        .saturating_mul(1u64 << exponent)
        .min(config.retry_max_delay_ms);
    // Jitter of ±25% spreads retries from many sessions; the randomness needs no quality.
    let random = (uuid::Uuid::new_v4().as_u128() % 1000) as u64;
    let jittered = base * (750 + random / 2) / 1000;
    let mut delay = Duration::from_millis(jittered);
    if let Some(after) = retry_after {
        delay = delay.max(after.min(Duration::from_millis(config.retry_after_cap_ms)));
    }
    delay
}

fn approval_options(tool: &str, command: Option<&str>) -> Vec<ApprovalOption> {
    let mut options = vec![
        ApprovalOption {
            decision: Decision::Once,
            label: "Allow once".to_owned(),
            command_prefix: None,
        },
        ApprovalOption {
            decision: Decision::AlwaysTool,
            label: format!("Always allow {tool}"),
            command_prefix: None,
        },
    ];
    if let Some(command) = command {
        let prefix = suggested_prefix(command);
        if !prefix.is_empty() {
            options.push(ApprovalOption {
                decision: Decision::AlwaysCommand,
                label: format!("Always allow commands starting with `{prefix}`"),
                command_prefix: Some(prefix),
            });
        }
    }
    options.push(ApprovalOption {
        decision: Decision::Deny,
        label: "Deny".to_owned(),
        command_prefix: None,
    });
    options
}

/// A decision stored by `persist_decision`.
fn parse_recorded_approval(json: &str) -> Option<(Decision, Option<String>, Option<String>)> {
    let value: Value = serde_json::from_str(json).ok()?;
    let decision: Decision = serde_json::from_value(value.get("decision")?.clone()).ok()?;
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    Some((decision, text("message"), text("editedContent")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_shows_only_unseen_text() {
        let mut shown = Replay::default();
        let mut first = String::new();
        assert_eq!(shown.accept(&mut first, "Hello "), Some("Hello ".into()));
        assert_eq!(shown.accept(&mut first, "wor"), Some("wor".into()));
        shown.restart();
        let mut second = String::new();
        assert_eq!(shown.accept(&mut second, "Hello "), None);
        assert_eq!(shown.accept(&mut second, "world"), Some("ld".into()));
        assert_eq!(shown.text, "Hello world");
        assert_eq!(second, "Hello world");
    }

    #[test]
    fn replay_diverging_attempt_shows_new_text() {
        let mut shown = Replay::default();
        let mut first = String::new();
        shown.accept(&mut first, "abc");
        shown.restart();
        let mut second = String::new();
        assert_eq!(shown.accept(&mut second, "xy"), Some("xy".into()));
    }

    #[test]
    fn backoff_grows_and_honours_retry_after() {
        let config = crate::config::Config::builtin();
        let one = backoff_delay(&config, 1, None);
        assert!(one >= Duration::from_millis(375) && one <= Duration::from_millis(625));
        let big = backoff_delay(&config, 10, None);
        assert!(big <= Duration::from_millis(config.retry_max_delay_ms * 5 / 4));
        let after = backoff_delay(&config, 1, Some(Duration::from_secs(3)));
        assert!(after >= Duration::from_secs(3));
        let capped = backoff_delay(&config, 1, Some(Duration::from_secs(3600)));
        assert!(capped <= Duration::from_millis(config.retry_after_cap_ms));
    }
}
