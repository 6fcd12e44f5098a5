//! Streaming one answer: bounded retries with backoff, replay without showing text twice,
//! per-answer byte caps, tool call ids unique in the session, and low-risk calls started early.
//!
//! Invariants: a stop ends the stream at once, keeping the text the user saw and dropping
//! half-formed calls (invariant 5); retries are bounded (invariant 9); a call keeps its
//! provider's id only when it is well-formed and unused in the session.

use super::*;

impl Turn {
    /// One model request with bounded retries. Retriable failures (5xx, 429, transport errors,
    /// idle streams, streams cut short) are retried from a clean request after a backoff; text
    /// the user already saw is not shown twice. A stop during the backoff ends at once.
    pub(super) async fn stream(
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

    pub(super) async fn stream_once(
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
    pub(super) fn assign_id(&self, calls: &mut [PartialCall], i: usize) {
        if !calls[i].id.is_empty() {
            return;
        }
        let wanted = calls[i].provider_id.as_str();
        let usable = well_formed_call_id(wanted)
            && !calls.iter().any(|c| c.id == wanted)
            && !self.session.tool_call_id_taken(wanted);
        let id = if usable {
            wanted.to_owned()
        } else {
            let fresh = crate::engine::history::new_id("call");
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
    pub(super) fn abandon_early(
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
    pub(super) fn start_early(
        &mut self,
        call: &PartialCall,
        mode: Mode,
    ) -> Option<JoinHandle<ToolOutcome>> {
        let meta = meta_for(&call.name)?;
        if meta.risk != Risk::Low
            || !permissions::offered(mode, meta)
            || self.pre_tool_hooked(&call.name)
        {
            return None;
        }
        let value: Value = serde_json::from_str(arguments_or_empty(&call.arguments)).ok()?;
        let args = parse_args(&call.name, &value).ok()?;
        // A plan update changes the session, not the workspace: it runs in call order.
        if matches!(args, ToolArgs::UpdatePlan { .. }) {
            return None;
        }
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

    pub(super) fn announce(&mut self, id: &str, name: &str, arguments: &Value, args: &ToolArgs) {
        if self.announced.iter().any(|a| a == id) {
            return;
        }
        self.announced.push(id.to_owned());
        let kind = match meta_for(name) {
            Some(meta) => meta.kind,
            None => self
                .session
                .mcp
                .tool(name)
                .map(|t| super::authorize::mcp_kind(&t))
                .unwrap_or(crate::protocol::ToolKind::Other),
        };
        self.emit(Event::ToolCall {
            tool_call_id: id.to_owned(),
            name: name.to_owned(),
            kind,
            title: args.title(),
            arguments: arguments.clone(),
            locations: args.locations(&self.session.workspace),
            mcp: args.mcp_ref(),
        });
    }

    pub(super) fn announce_unparsed(&mut self, call: &ToolCallRecord, arguments: &Value) {
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
            mcp: None,
        });
    }
}

/// Make room for tool call `index` (pieces may name a call before its first piece arrives).
pub(super) fn grow_calls(calls: &mut Vec<PartialCall>, index: usize) {
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
pub(super) fn well_formed_call_id(id: &str) -> bool {
    (1..=MAX_PROVIDER_CALL_ID_BYTES).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Longer provider ids are replaced (OpenAI's own are about 30 bytes, Anthropic's 30).
pub(super) const MAX_PROVIDER_CALL_ID_BYTES: usize = 64;

/// Text already shown to the user in this response, so a retried stream does not show it twice.
#[derive(Default)]
pub(super) struct Replay {
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
pub(super) fn backoff_delay(
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
