//! Compaction inside a turn: when the estimate passes the threshold (or the provider reports an
//! overflow), summarize the history before a boundary and go on from the summary.
//!
//! Invariants: a request never goes out above the model's window by tandem's own estimate; a
//! compaction must move the boundary forward, and 3 rapid refills end the turn with
//! `contextExceeded` (invariant 9); the summary has the answer's byte cap.

use super::*;

impl Turn {
    /// Compact when the next request would pass the threshold (or when `forced` after the
    /// provider reported an overflow). `Err` ends the turn.
    pub(super) async fn maybe_compact(
        &mut self,
        model_id: &str,
        model: &crate::config::ModelConfig,
        provider: &dyn Provider,
        forced: bool,
    ) -> Result<(), Outcome> {
        let config = self.session.engine.config.clone();
        let window = model.context_window;
        let fixed = self.fixed_tokens;
        let estimate = self.session.with_history(compaction::estimate_request) + fixed;
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
        // `/compact` keeps as little verbatim as a clean cut allows.
        let target = if self.compact_only {
            0
        } else {
            (window / 2).saturating_sub(fixed)
        };
        let chosen = self.session.with_history(|history| {
            let Some(boundary) = compaction::choose_boundary(history, target) else {
                return Err(exceeded(
                    "compaction cannot move past the most recent messages",
                ));
            };
            // What stays verbatim must fit with room for a summary, or the summarizing
            // request would be spent on a compaction that frees too little.
            let verbatim = compaction::estimate_verbatim(history, boundary);
            if verbatim + fixed + compaction::summary_allowance(window) > window {
                return Err(exceeded(&format!(
                    "the most recent messages, which compaction must keep, come to about {verbatim} tokens by themselves"
                )));
            }
            let mut prefix: Vec<Message> = history[..boundary].to_vec();
            // A previous compaction whose notice lies after the new boundary still applies
            // to the prefix, so carry it over for the summarizer's view.
            if let Some((notice, _, _)) = compaction::latest_compaction(history) {
                if notice >= boundary {
                    prefix.push(history[notice].clone());
                }
            }
            let count = prefix
                .iter()
                .filter(|m| m.role != crate::engine::history::Role::Notice)
                .count();
            Ok((prefix, history[boundary].id.clone(), count))
        });
        let (prefix, boundary_id, compacted_count) = chosen?;
        self.pre_compact_hooks(if self.compact_only { "manual" } else { "auto" })
            .await;
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
            .filter(|m| m.role != crate::engine::history::Role::Notice)
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
            encoded: Default::default(),
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
        notice.meta.compaction = Some(Box::new(crate::engine::history::CompactionRecord {
            boundary: boundary_id,
            summary: summary.clone(),
        }));
        self.session.commit(notice);
        self.emit(Event::Compacted {
            summary: Some(summary),
        });
        self.compactions += 1;
        self.batches_since_compaction = 0;
        // Invariant 9: no request goes out above the window by tandem's own estimate.
        let after = self.session.with_history(compaction::estimate_request) + fixed;
        if after > window {
            return Err(exceeded(&format!(
                "after compacting, the next request would still carry about {after} tokens"
            )));
        }
        Ok(())
    }

    /// Run the summarizing request; its text is not streamed to the user.
    pub(super) async fn summarize(
        &self,
        provider: &dyn Provider,
        request: ProviderRequest,
    ) -> SummaryOutcome {
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
}
