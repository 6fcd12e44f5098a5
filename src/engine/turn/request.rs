//! Building one provider request: the system prompt, the outbound projection of the history
//! (the only provider feed, invariant 1) with its start from the session's outbound cache, the
//! per-turn context on the prompts (invariant 7, never persisted) and the tools the mode offers.

use super::*;

/// The largest `AGENTS.md` or `CLAUDE.md` that joins the system prompt, in bytes.
const MAX_INSTRUCTIONS_BYTES: u64 = 256 * 1024;

impl Turn {
    pub(super) async fn system_prompt(&self) -> String {
        // AGENTS.md and CLAUDE.md at the workspace root are project instructions the user wrote
        // for agents; they join the system prompt. Reads go through the confined workspace.
        let workspace = self.session.workspace.clone();
        let files = tokio::task::spawn_blocking(move || {
            let mut found = Vec::new();
            for name in ["AGENTS.md", "CLAUDE.md"] {
                if let Ok(path) = workspace.resolve(name) {
                    // Capped: a command may have made the file huge, and it rides on every
                    // request.
                    match workspace.read_text_if_exists_capped(&path, MAX_INSTRUCTIONS_BYTES) {
                        Ok(Some(text)) => found.push((name, text)),
                        Ok(None) => {}
                        Err(e) => tracing::warn!("project instructions not used: {e}"),
                    }
                }
            }
            // The skills' names and descriptions only (the `skill` tool loads a body), sorted:
            // the same files give the same bytes at every turn.
            let skills = crate::tools::skills::prompt_section(&crate::tools::skills::discover(
                &crate::tools::skills::skill_folders(workspace.roots()),
            ));
            (found, skills)
        })
        .await
        .unwrap_or_default();
        let (files, skills) = files;
        let mut system = BASE_SYSTEM_PROMPT.to_owned();
        for (name, text) in files {
            system.push_str(&format!(
                "\n\n<project-instructions file=\"{name}\">\n{text}\n</project-instructions>"
            ));
        }
        system.push_str(&skills);
        system
    }

    /// `history` (which starts at history index `offset`) with this turn's reminders inserted
    /// where they were raised.
    fn with_reminders<'h>(
        &self,
        history: &'h [Message],
        offset: usize,
    ) -> std::borrow::Cow<'h, [Message]> {
        if self.ephemeral.iter().all(|(at, _)| *at < offset) {
            return std::borrow::Cow::Borrowed(history);
        }
        let reminder = |text: &String| {
            Message::user(
                vec![Part::Text { text: text.clone() }],
                Source::Reminder,
                Some(&self.turn_id),
            )
        };
        let mut merged: Vec<Message> = Vec::with_capacity(history.len() + self.ephemeral.len());
        let mut pending = self
            .ephemeral
            .iter()
            .filter(|(at, _)| *at >= offset)
            .peekable();
        for (index, message) in history.iter().enumerate() {
            while let Some((_, text)) = pending.next_if(|(at, _)| *at == offset + index) {
                merged.push(reminder(text));
            }
            merged.push(message.clone());
        }
        for (_, text) in pending {
            merged.push(reminder(text));
        }
        std::borrow::Cow::Owned(merged)
    }

    pub(super) fn build_request(
        &self,
        system: &str,
        model_id: &str,
        model: &ModelConfig,
        mode: Mode,
        provider: &dyn Provider,
    ) -> ProviderRequest {
        let provider_kind = provider.kind();
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
        let ctx = ProjectionContext {
            provider_kind,
            model_id,
            vision: model.vision,
            pdf: model.pdf,
            turn_context: Some(&context),
        };
        // The turn's own reminders (continuation prompts) sit between history messages in
        // its requests only; the cache stops before the first of them.
        let limit = self.ephemeral.first().map_or(usize::MAX, |(at, _)| *at);
        let mut tools: Vec<ToolSpec> = TOOLS
            .iter()
            .filter(|t| permissions::offered(mode, t))
            .map(|t| ToolSpec {
                name: t.name.into(),
                description: t.description.into(),
                parameters: t.parameters(),
            })
            .collect();
        // The session's MCP tools, with their schemas as the servers gave them (each provider
        // converts what its API rejects); `plan` offers only the low-risk ones.
        tools.extend(
            self.session
                .mcp
                .tools()
                .into_iter()
                .filter(|t| permissions::offered_risk(mode, super::authorize::mcp_risk(t)))
                .map(|t| ToolSpec {
                    description: format!(
                        "{} (a tool of the MCP server `{}`)",
                        t.description.trim(),
                        t.server
                    )
                    .into(),
                    name: t.model_name.into(),
                    parameters: crate::mcp::schema::model_schema(t.input_schema),
                }),
        );
        // The form the provider will write this request in (`ProviderRequest::form`), so the
        // cached start and the rest agree.
        let form = MessageForm {
            calls_as_text: tools.is_empty(),
        };
        let (encoded, messages) = self.session.with_history_and_outbound(|history, cache| {
            let Some(start) = cache.start(history, &ctx, provider, form, limit) else {
                // Uncached (a provider that reads typed messages, or a view without a prompt):
                // the whole projection, typed.
                return (
                    Default::default(),
                    project(&self.with_reminders(history, 0), &ctx),
                );
            };
            let rest = self.with_reminders(&history[start.rest_from..], start.rest_from);
            let mut messages = Vec::new();
            project_range(&rest, &ctx, true, &mut messages);
            (start.encoded, messages)
        });
        ProviderRequest {
            encoded,
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
}
