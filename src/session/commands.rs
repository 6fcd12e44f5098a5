//! Slash commands as the session runs them: a prompt whose text starts with `/name` (a
//! built-in or a custom Markdown command, see [`crate::config::slash_commands`]) is expanded
//! into a prompt for the model, or run by the session without one.
//!
//! Invariants: commands run inside the actor, in arrival order with every other op, and answer
//! through the op's reply before anything they cause is announced (a `/undo`'s `rewound`
//! follows its answer, like `session/rewind`'s); a `/word` that names no command is an ordinary
//! prompt, sent as typed (a path such as `/usr/bin` never becomes a command); custom commands
//! are read again at each use, so an edit to one applies at once.

use std::sync::Arc;

use crate::config::slash_commands::{self, Builtin, CommandInfo, INIT_PROMPT};
use crate::engine::conversation::{Conversation, SessionError};
use crate::engine::history::Part;
use crate::protocol::{Event, Mode, RestoreScope};

/// What a prompt became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptOutcome {
    /// A turn started: an ordinary prompt (`command` none), a custom command, `/init` or
    /// `/compact` (`command` names it).
    Turn {
        turn_id: String,
        command: Option<String>,
    },
    /// A built-in ran without the model: its output (Markdown), and the new session of `/fork`.
    Command {
        name: String,
        output: String,
        session_id: Option<String>,
    },
}

/// What a prompt asks for.
pub(super) enum Invocation {
    /// An ordinary prompt.
    Prompt(Vec<Part>),
    /// A prompt for the model written by a command (custom or `/init`); `typed` is what the user
    /// typed.
    Expanded {
        name: String,
        parts: Vec<Part>,
        typed: String,
    },
    Builtin {
        builtin: Builtin,
        arguments: String,
    },
}

/// The commands of `conversation`'s workspace: the built-ins and the custom ones (blocking
/// reads on the blocking pool).
pub async fn list(conversation: &Conversation) -> Vec<CommandInfo> {
    let roots = conversation.workspace.roots().to_vec();
    let custom = tokio::task::spawn_blocking(move || {
        slash_commands::discover(&slash_commands::command_folders(&roots))
    })
    .await
    .unwrap_or_default();
    slash_commands::list(&custom)
}

/// `commands/list` in the wire's shape (both faces answer with it).
pub async fn wire_list(conversation: &Conversation) -> crate::protocol::CommandsListResult {
    use crate::config::slash_commands::CommandSource;
    use crate::protocol as wire;
    wire::CommandsListResult {
        commands: list(conversation)
            .await
            .into_iter()
            .map(|c| wire::CommandEntry {
                name: c.name,
                description: c.description,
                argument_hint: c.argument_hint,
                source: match c.source {
                    CommandSource::Builtin => wire::CommandSource::Builtin,
                    CommandSource::Project => wire::CommandSource::Project,
                    CommandSource::User => wire::CommandSource::User,
                },
            })
            .collect(),
    }
}

/// `hooks/list` in the wire's shape (both faces answer with it).
pub async fn wire_hooks(conversation: &Conversation) -> crate::protocol::HooksListResult {
    use crate::protocol as wire;
    let listing = conversation.hook_listing().await;
    wire::HooksListResult {
        hooks: listing
            .hooks
            .into_iter()
            .map(|h| wire::HookEntry {
                event: h.event.name().to_owned(),
                matcher: h.matcher,
                command: h.command,
                timeout: h.timeout.as_secs_f64(),
                source: match h.source {
                    crate::hooks::HookSource::User => wire::HookSourceName::User,
                    crate::hooks::HookSource::Project => wire::HookSourceName::Project,
                },
            })
            .collect(),
        project_files: listing.project_files,
        trusted: listing.trusted,
    }
}

/// Classify a prompt's `parts`.
pub(super) async fn classify(conversation: &Conversation, mut parts: Vec<Part>) -> Invocation {
    let Some(Part::Text { text }) = parts.first() else {
        return Invocation::Prompt(parts);
    };
    let Some((name, arguments)) = slash_commands::parse_invocation(text) else {
        return Invocation::Prompt(parts);
    };
    let (name, arguments, typed) = (name.to_owned(), arguments.to_owned(), text.clone());
    if let Some(builtin) = Builtin::by_name(&name) {
        if builtin == Builtin::Init {
            let mut prompt = INIT_PROMPT.to_owned();
            if !arguments.is_empty() {
                prompt.push_str("\n\nThe user adds: ");
                prompt.push_str(&arguments);
            }
            parts[0] = Part::Text { text: prompt };
            return Invocation::Expanded { name, parts, typed };
        }
        return Invocation::Builtin { builtin, arguments };
    }
    let roots = conversation.workspace.roots().to_vec();
    let custom = tokio::task::spawn_blocking(move || {
        slash_commands::discover(&slash_commands::command_folders(&roots))
    })
    .await
    .unwrap_or_default();
    match custom.into_iter().find(|c| c.name == name) {
        Some(command) => {
            parts[0] = Part::Text {
                text: slash_commands::expand(&command.body, &arguments),
            };
            Invocation::Expanded { name, parts, typed }
        }
        None => Invocation::Prompt(parts),
    }
}

/// Run a built-in that needs no model. `Ok(None)` for `/compact`, which the actor starts as
/// a turn.
pub(super) async fn run_builtin(
    conversation: &Arc<Conversation>,
    builtin: Builtin,
    arguments: &str,
) -> Result<Option<PromptOutcome>, SessionError> {
    let done = |output: String| {
        Ok(Some(PromptOutcome::Command {
            name: builtin.name().to_owned(),
            output,
            session_id: None,
        }))
    };
    match builtin {
        Builtin::Compact => {
            // A compaction needs a clean cut that moves forward; without one there is nothing
            // to summarize yet, and a turn would only end in a misleading context error.
            let cut = conversation
                .with_history(|history| crate::engine::compaction::choose_boundary(history, 0));
            if cut.is_none() {
                return done(
                    "Nothing to compact yet: the conversation is too short to summarize."
                        .to_owned(),
                );
            }
            Ok(None)
        }
        Builtin::Init => Ok(None),
        Builtin::Status => done(status(conversation).await),
        Builtin::Model => {
            let config = &conversation.engine.config;
            if arguments.is_empty() {
                let current = conversation.settings().model;
                let mut out = format!("Model: **{current}**\n\nConfigured models:\n");
                for name in config.models.keys() {
                    let mark = if *name == current { " (current)" } else { "" };
                    out.push_str(&format!("- `{name}`{mark}\n"));
                }
                out.push_str("\nSwitch with `/model NAME`.");
                return done(out);
            }
            let (model, warning) = conversation.switch_model(arguments.to_owned())?;
            let mut out = format!("Model: **{model}**");
            if let Some(w) = warning {
                out.push_str(&format!("\n\n{w}"));
            }
            done(out)
        }
        Builtin::Mode => {
            if arguments.is_empty() {
                let current = conversation.settings().mode;
                return done(format!(
                    "Mode: **{current}**\n\nModes: `ask` (edits and commands need approval), `autoEdit` (edits apply, commands need approval), `plan` (read only), `fullAuto` (nothing asks). Switch with `/mode NAME`."
                ));
            }
            let mode: Mode = arguments
                .parse()
                .map_err(|_| SessionError::InvalidMode(arguments.to_owned()))?;
            conversation.set_mode(mode);
            done(format!("Mode: **{mode}**"))
        }
        Builtin::Fork => {
            if conversation.turn_active() {
                return Err(SessionError::TurnInProgress);
            }
            let id = conversation.fork(None).await?;
            Ok(Some(PromptOutcome::Command {
                name: builtin.name().to_owned(),
                output: format!(
                    "Forked this conversation into a new session `{id}`. Open it to go on there; this session stays as it is."
                ),
                session_id: Some(id),
            }))
        }
        Builtin::Diff => {
            let Some(turn) = last_turn(conversation).await? else {
                return done("No turn yet, so nothing to show.".to_owned());
            };
            let files = conversation.turn_diff(&turn.turn_id).await?;
            if files.is_empty() {
                return done(format!(
                    "The last turn (\u{201c}{}\u{201d}) changed no file.",
                    excerpt(&turn.prompt)
                ));
            }
            let mut out = format!(
                "The last turn (\u{201c}{}\u{201d}) changed {} file{}:\n",
                excerpt(&turn.prompt),
                files.len(),
                if files.len() == 1 { "" } else { "s" }
            );
            for file in &files {
                out.push_str(&format!("\n**{}** ({:?})\n", file.path, file.change));
                if let Some(why) = &file.not_captured {
                    out.push_str(&format!("\nnot captured: {why}\n"));
                } else if file.unified.is_empty() {
                    out.push_str("\n(no text diff)\n");
                } else {
                    out.push_str(&format!("\n```diff\n{}\n```\n", file.unified.trim_end()));
                }
            }
            done(out)
        }
        Builtin::Undo => {
            if conversation.turn_active() {
                return Err(SessionError::TurnInProgress);
            }
            let Some(turn) = last_turn(conversation).await? else {
                return done("No turn yet, so nothing to undo.".to_owned());
            };
            let (result, plan) = conversation
                .rewind(&turn.turn_id, RestoreScope::Both, false)
                .await?;
            let mut out = format!(
                "Undid the last turn (\u{201c}{}\u{201d}): the conversation is back to before it",
                excerpt(&turn.prompt)
            );
            if result.restored.is_empty() {
                out.push('.');
            } else {
                out.push_str(&format!(
                    ", and {} file{} put back: {}.",
                    result.restored.len(),
                    if result.restored.len() == 1 { "" } else { "s" },
                    result.restored.join(", ")
                ));
            }
            if !result.conflicts.is_empty() {
                out.push_str("\n\nLeft as they are (changed since; `session/rewind` with `force` puts them back):\n");
                for conflict in &result.conflicts {
                    out.push_str(&format!("- {}: {}\n", conflict.path, conflict.reason));
                }
            }
            let files = result.restored.clone();
            let turn_id = turn.turn_id.clone();
            let conversation = conversation.clone();
            // After the answer, as `session/rewind` does.
            tokio::spawn(async move {
                conversation.emit(
                    Some(&turn_id),
                    Event::Rewound {
                        restore: RestoreScope::Both,
                        files,
                    },
                );
                if let Some(entries) = plan {
                    conversation.emit(None, Event::Plan { entries });
                }
            });
            done(out)
        }
    }
}

async fn last_turn(
    conversation: &Conversation,
) -> Result<Option<crate::protocol::Checkpoint>, SessionError> {
    Ok(conversation.checkpoints().await?.pop())
}

fn excerpt(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: String = one_line.chars().take(60).collect();
    if one_line.chars().count() > 60 {
        out.push('\u{2026}');
    }
    out
}

/// `/status`: what the session is and holds, as Markdown.
async fn status(conversation: &Conversation) -> String {
    let settings = conversation.settings();
    let roots: Vec<String> = conversation
        .workspace
        .roots()
        .iter()
        .map(|r| format!("`{}`", r.display()))
        .collect();
    let mut out = format!(
        "**Session** `{}`\n\n- Model: `{}`\n- Mode: `{}`\n- Network for commands: {}\n- Workspace: {}\n- Messages: {}\n",
        conversation.id,
        settings.model,
        settings.mode,
        if settings.allow_network { "allowed" } else { "off" },
        roots.join(", "),
        conversation.history_len(),
    );
    let plan = conversation.plan();
    if !plan.is_empty() {
        let done = plan
            .iter()
            .filter(|e| e.status == crate::protocol::PlanStatus::Completed)
            .count();
        out.push_str(&format!("- Plan: {done} of {} done\n", plan.len()));
    }
    let servers = conversation.mcp.statuses();
    if !servers.is_empty() {
        out.push_str("\n**MCP servers**\n\n");
        for server in servers {
            out.push_str(&format!(
                "- `{}`: {:?}, {} tool{}{}\n",
                server.name,
                server.status,
                server.tools.len(),
                if server.tools.len() == 1 { "" } else { "s" },
                server.error.map(|e| format!(" ({e})")).unwrap_or_default()
            ));
        }
    }
    let hooks = conversation.hook_listing().await;
    if !hooks.hooks.is_empty() {
        out.push_str(&format!(
            "\n**Hooks**: {} configured{}\n",
            hooks.hooks.len(),
            if hooks.trusted {
                String::new()
            } else {
                format!(
                    "; the project's ({}) wait for trust (`hooks/trust`)",
                    hooks.project_files.join(", ")
                )
            }
        ));
    }
    let commands = list(conversation).await;
    let custom = commands
        .iter()
        .filter(|c| c.source != slash_commands::CommandSource::Builtin)
        .count();
    out.push_str(&format!(
        "\n**Commands**: {} built-in, {custom} custom\n",
        Builtin::ALL.len()
    ));
    out
}
