//! Recording what the turn did: assistant messages, notices, tool results (cut to the batch's
//! share of the window) and the interrupted results of calls that will not run.
//!
//! Invariants: each message is committed before the event that announces it (invariant 8);
//! every call gets exactly one result (invariant 2).

use super::*;

impl Turn {
    pub(super) fn commit_partial(&self, text: String, reasoning: String) {
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

    pub(super) fn commit_assistant(
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
        message.meta.usage = usage.clone().map(Box::new);
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

    /// The warning that the provider's content filter stopped the answer, marked as such in
    /// history so a face can tell a refusal without reading the text.
    pub(super) fn refusal_notice(&self, text: String) {
        self.session
            .commit(Message::refusal_notice(text.clone(), Some(&self.turn_id)));
        self.emit(Event::Notice {
            kind: NoticeKind::Warning,
            text,
        });
    }

    pub(super) fn notice(&self, kind: NoticeKind, text: String) {
        self.session
            .commit(Message::notice(kind, text.clone(), Some(&self.turn_id)));
        self.emit(Event::Notice { kind, text });
    }

    /// End the turn with `reason` and `text` as a non-retriable error: an error notice, and the
    /// `turnEnded` fields that go with it.
    pub(super) fn fail(
        &self,
        reason: TurnEndReason,
        text: String,
    ) -> (TurnEndReason, Option<TurnError>) {
        self.notice(NoticeKind::Error, text.clone());
        (
            reason,
            Some(TurnError {
                message: text,
                retriable: false,
            }),
        )
    }

    /// The most bytes each of `calls` results may keep: the batch gets what compaction can
    /// always keep verbatim (half the window less the fixed part, as `maybe_compact` targets),
    /// less a fifth for the calls themselves and the answer, shared evenly. The estimator
    /// counts four bytes a token, so by tandem's own estimate the batch fits.
    pub(super) fn result_share_for(&self, calls: usize) -> usize {
        let model_id = self.session.settings().model;
        let Some(model) = self.session.engine.config.model(&model_id) else {
            return usize::MAX;
        };
        let batch_tokens = (model.context_window / 2).saturating_sub(self.fixed_tokens) * 4 / 5;
        let batch_bytes = usize::try_from(batch_tokens.saturating_mul(4)).unwrap_or(usize::MAX);
        (batch_bytes / calls.max(1)).max(MIN_RESULT_SHARE)
    }

    pub(super) fn commit_result(
        &self,
        call: &ToolCallRecord,
        status: ResultStatus,
        text: String,
        diff: Option<&FileDiff>,
    ) {
        let diff_entries = diff.map(|d| vec![diff_entry(d)]);
        let text = fit_result(text, self.result_share);
        let mut message = Message::tool_result(call, status, text.clone(), &self.turn_id);
        // An MCP tool's images ride in its result; the outbound projection gives them to the
        // model as it can take them (see `engine::outbound`).
        let images = self
            .mcp_images
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&call.id);
        for image in images.into_iter().flatten() {
            message.parts.push(crate::engine::history::Part::Image {
                mime_type: image.mime_type,
                data: image.data,
            });
        }
        if let Some(entries) = &diff_entries {
            message.meta.diff = crate::engine::history::StoredJson::from_serialize(&entries);
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

    pub(super) fn interrupt_rest(&mut self, calls: &[ToolCallRecord]) {
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
}

/// The least a tool result keeps however many calls share the window: enough for the start of
/// the result and the note that says how to read the rest.
pub(super) const MIN_RESULT_SHARE: usize = 512;

/// `text` cut to at most `limit` bytes (on a character boundary), with a note that says what
/// was left out and how to read it in pieces. The cut is what the model, the store and the
/// client all see: a result too large for the window would otherwise be sent whole, or cost
/// a compaction that cannot free it.
pub(super) fn fit_result(text: String, limit: usize) -> String {
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

pub(super) fn diff_entry(diff: &FileDiff) -> DiffEntry {
    DiffEntry {
        path: diff.path.clone(),
        old_text: diff.old_text.clone(),
        new_text: diff.new_text.clone(),
        unified: diff.unified.clone(),
    }
}
