//! Pure conversions between tandem's vocabulary and ACP v1 types: prompt content, tool kinds,
//! locations, diffs, config options, timestamps, and the history replay of `session/load`.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema as acp;
use serde_json::Value;

use crate::config::Config;
use crate::engine::history::{Message, Part, ResultStatus, Role, Source};
use crate::protocol::{DiffEntry, Location, Mode, ToolKind};
use crate::tools::{meta_for, parse_args};
use crate::workspace::Workspace;

pub const MODEL_OPTION: &str = "model";
pub const MODE_OPTION: &str = "mode";
/// The config option that allows the session\'s commands to use the network.
pub const NETWORK_OPTION: &str = "network";

/// What ACP clients show for each mode: a label and a description. The id on the wire is
/// the native protocol's name ([`Mode::as_str`]).
pub fn mode_label(mode: Mode) -> (&'static str, &'static str) {
    match mode {
        Mode::Ask => ("Ask", "Ask before every edit and command"),
        Mode::AutoEdit => (
            "Auto edit",
            "Edits inside the workspace apply without asking; commands still ask",
        ),
        Mode::Plan => ("Plan", "Read and plan only; no edits or commands"),
        Mode::FullAuto => ("Full auto", "Edits and commands run without asking"),
    }
}

pub fn mode_id(mode: Mode) -> &'static str {
    mode.as_str()
}

pub fn parse_mode_id(id: &str) -> Option<Mode> {
    id.parse().ok()
}

/// The `configOptions` of a session: the model (category `model`), the mode (category `mode`)
/// and whether its commands may use the network (`network`: `off` or `on`, the user's choice
/// only), with their current values.
pub fn config_options(
    config: &Config,
    model: &str,
    mode: Mode,
    network: bool,
) -> Vec<acp::SessionConfigOption> {
    let models: Vec<acp::SessionConfigSelectOption> = config
        .models
        .iter()
        .map(|(id, m)| {
            acp::SessionConfigSelectOption::new(id.clone(), id.clone())
                .description(model_description(m))
        })
        .collect();
    let modes: Vec<acp::SessionConfigSelectOption> = Mode::ALL
        .into_iter()
        .map(|m| {
            let (name, description) = mode_label(m);
            acp::SessionConfigSelectOption::new(m.as_str(), name).description(description)
        })
        .collect();
    vec![
        acp::SessionConfigOption::select(MODEL_OPTION, "Model", model.to_owned(), models)
            .category(acp::SessionConfigOptionCategory::Model)
            .description("The model for the next request (also inside a running turn)"),
        acp::SessionConfigOption::select(MODE_OPTION, "Mode", mode_id(mode), modes)
            .category(acp::SessionConfigOptionCategory::Mode)
            .description("What tandem may do without asking"),
        acp::SessionConfigOption::select(
            NETWORK_OPTION,
            "Network",
            if network { "on" } else { "off" },
            vec![
                acp::SessionConfigSelectOption::new("off", "Off")
                    .description("Commands run without network access"),
                acp::SessionConfigSelectOption::new("on", "On")
                    .description("Sandboxed commands may connect to the network"),
            ],
        )
        .description("Whether the agent's shell commands may use the network"),
    ]
}

/// A model's one-line description in the model picker: where it runs and what it can take.
pub fn model_description(model: &crate::config::ModelConfig) -> String {
    let mut text = format!(
        "{} via {}; {}k context",
        model.name,
        model.provider,
        model.context_window / 1_000
    );
    for (has, what) in [
        (model.vision, "images"),
        (model.pdf, "PDFs"),
        (model.reasoning, "reasoning"),
    ] {
        if has {
            text.push_str(", ");
            text.push_str(what);
        }
    }
    text
}

/// The legacy `modes` state, for clients that predate config options.
pub fn mode_state(mode: Mode) -> acp::SessionModeState {
    acp::SessionModeState::new(
        mode_id(mode),
        Mode::ALL
            .into_iter()
            .map(|m| {
                let (name, description) = mode_label(m);
                acp::SessionMode::new(m.as_str(), name).description(description)
            })
            .collect(),
    )
}

pub fn tool_kind(kind: ToolKind) -> acp::ToolKind {
    match kind {
        ToolKind::Read => acp::ToolKind::Read,
        ToolKind::Search => acp::ToolKind::Search,
        ToolKind::Edit => acp::ToolKind::Edit,
        ToolKind::Delete => acp::ToolKind::Delete,
        ToolKind::Move => acp::ToolKind::Move,
        ToolKind::Execute => acp::ToolKind::Execute,
        ToolKind::Think => acp::ToolKind::Think,
        ToolKind::Fetch => acp::ToolKind::Fetch,
        ToolKind::Other => acp::ToolKind::Other,
    }
}

/// ACP wants absolute paths; the engine shows paths relative to the first root.
pub fn absolute(root: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    }
}

pub fn locations(root: &Path, locations: &[Location]) -> Vec<acp::ToolCallLocation> {
    locations
        .iter()
        .map(|l| {
            acp::ToolCallLocation::new(absolute(root, &l.path))
                .line(l.line.and_then(|n| u32::try_from(n).ok()))
        })
        .collect()
}

pub fn diff_content(root: &Path, diff: &[DiffEntry]) -> Vec<acp::ToolCallContent> {
    diff.iter()
        .map(|d| {
            acp::ToolCallContent::Diff(
                acp::Diff::new(absolute(root, &d.path), d.new_text.clone())
                    .old_text(d.old_text.clone()),
            )
        })
        .collect()
}

pub fn text_content(text: impl Into<String>) -> acp::ToolCallContent {
    acp::ToolCallContent::Content(acp::Content::new(acp::ContentBlock::Text(
        acp::TextContent::new(text),
    )))
}

pub fn text_block(text: impl Into<String>) -> acp::ContentBlock {
    acp::ContentBlock::Text(acp::TextContent::new(text))
}

/// Text shown inside a tool card: fenced so that editors render it as output, cut to a size an
/// editor pane can hold (the model got the whole result).
/// The most bytes of a command's output or a result shown on an ACP tool card.
pub const SHOWN_OUTPUT_BYTES: usize = 16 * 1024;

pub fn fenced(text: &str) -> String {
    // Room for the bridge's "more bytes so far" note after a full head.
    const MAX: usize = SHOWN_OUTPUT_BYTES + 128;
    let cut = if text.len() > MAX {
        let mut end = MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}\n… ({} more bytes)", &text[..end], text.len() - end)
    } else {
        text.to_owned()
    };
    let fence = if cut.contains("```") { "````" } else { "```" };
    format!("{fence}\n{cut}\n{fence}")
}

/// ACP prompt content → the engine's parts. Embedded resources become tagged text (the editor's
/// buffer content wins over the disk), links are named for the model to read, and audio (which
/// tandem does not advertise) becomes a note.
pub fn prompt_parts(blocks: Vec<acp::ContentBlock>) -> Vec<Part> {
    blocks
        .into_iter()
        .map(|block| match block {
            acp::ContentBlock::Text(t) => Part::Text { text: t.text },
            acp::ContentBlock::Image(i) => Part::Image {
                mime_type: i.mime_type,
                data: i.data,
            },
            acp::ContentBlock::Audio(_) => Part::Text {
                text: "(an audio clip was attached; tandem cannot listen to audio)".to_owned(),
            },
            acp::ContentBlock::ResourceLink(link) => Part::Text {
                text: format!("[@{}]({})", link.name, link.uri),
            },
            acp::ContentBlock::Resource(resource) => match resource.resource {
                acp::EmbeddedResourceResource::TextResourceContents(t) => Part::Text {
                    text: format!(
                        "<context uri=\"{}\">\n{}\n</context>",
                        t.uri,
                        t.text.trim_end_matches('\n')
                    ),
                },
                acp::EmbeddedResourceResource::BlobResourceContents(b) => match b.mime_type {
                    Some(mime_type) if mime_type.starts_with("image/") => Part::Image {
                        mime_type,
                        data: b.blob,
                    },
                    Some(mime_type) if mime_type == "application/pdf" => Part::Document {
                        mime_type,
                        data: b.blob,
                        name: b.uri.rsplit('/').next().map(str::to_owned),
                    },
                    _ => Part::Text {
                        text: format!(
                            "(binary resource {} attached; read it with the tools if needed)",
                            b.uri
                        ),
                    },
                },
                _ => Part::Text {
                    text: "(an attachment of an unknown kind was dropped)".to_owned(),
                },
            },
            _ => Part::Text {
                text: "(content of an unknown kind was dropped)".to_owned(),
            },
        })
        .collect()
}

/// The `(uri, text)` of a text part that [`prompt_parts`] made from an embedded text
/// resource, so a replay shows the client the resource it attached rather than the wrapper
/// the model reads. The history keeps the part as the model saw it (one text), which is why
/// the shape is recognized here: it is the exact shape written above, opening and closing.
fn embedded_resource(text: &str) -> Option<(String, String)> {
    let rest = text.strip_prefix(CONTEXT_OPEN)?;
    let (uri, body) = rest.split_once("\">\n")?;
    let body = body.strip_suffix(CONTEXT_CLOSE)?;
    (!uri.contains('"')).then(|| (uri.to_owned(), format!("{body}\n")))
}

const CONTEXT_OPEN: &str = "<context uri=\"";
const CONTEXT_CLOSE: &str = "\n</context>";

/// Milliseconds since the epoch as an RFC 3339 UTC timestamp (ACP's `updatedAt`).
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        ms % 1000
    )
}

/// A notice as text for clients without ACP's notice update.
pub fn notice_text(text: &str) -> String {
    format!("\n\n> _{}_\n\n", text.trim())
}

/// The tool call card of one recorded call.
pub fn tool_call(workspace: &Workspace, id: &str, name: &str, arguments: &Value) -> acp::ToolCall {
    let root = workspace.roots()[0].clone();
    let kind = meta_for(name).map(|m| m.kind).unwrap_or(ToolKind::Other);
    let (title, locs) = match parse_args(name, arguments) {
        Ok(args) => (args.title(), args.locations(workspace).unwrap_or_default()),
        Err(_) => (name.to_owned(), Vec::new()),
    };
    acp::ToolCall::new(id.to_owned(), title)
        .kind(tool_kind(kind))
        .status(acp::ToolCallStatus::Pending)
        .locations(locations(&root, &locs))
        .raw_input(arguments.clone())
}

/// The history as `session/update`s, for `session/load`: user prompts (and steering) as user
/// chunks, reasoning as thought chunks, answers as message chunks, every tool call with its
/// final status, result and diff, and notices. Reminders the engine wrote for the model are
/// not shown.
pub fn replay(
    workspace: &Workspace,
    history: &[Message],
    notice: &dyn Fn(&str) -> acp::SessionUpdate,
) -> Vec<acp::SessionUpdate> {
    let root = workspace.roots()[0].clone();
    let mut out = Vec::new();
    for message in history {
        match message.role {
            Role::User if message.meta.source == Source::Reminder => {}
            Role::User => {
                for part in &message.parts {
                    let block = match part {
                        Part::Text { text } => match embedded_resource(text) {
                            Some((uri, body)) => {
                                acp::ContentBlock::Resource(acp::EmbeddedResource::new(
                                    acp::EmbeddedResourceResource::TextResourceContents(
                                        acp::TextResourceContents::new(body, uri),
                                    ),
                                ))
                            }
                            None => text_block(text.clone()),
                        },
                        Part::Image { mime_type, data } => acp::ContentBlock::Image(
                            acp::ImageContent::new(data.clone(), mime_type.clone()),
                        ),
                        Part::Document { name, .. } => text_block(format!(
                            "(PDF document {} attached)",
                            name.as_deref().unwrap_or("without a name")
                        )),
                    };
                    out.push(acp::SessionUpdate::UserMessageChunk(
                        acp::ContentChunk::new(block),
                    ));
                }
            }
            Role::Assistant => {
                if let Some(reasoning) = message.meta.reasoning.as_ref().filter(|r| !r.is_empty()) {
                    out.push(acp::SessionUpdate::AgentThoughtChunk(
                        acp::ContentChunk::new(text_block(reasoning.clone())),
                    ));
                }
                let text = message.text();
                if !text.is_empty() {
                    out.push(acp::SessionUpdate::AgentMessageChunk(
                        acp::ContentChunk::new(text_block(text)),
                    ));
                }
                for call in &message.tool_calls {
                    let arguments = serde_json::from_str::<Value>(&call.arguments)
                        .unwrap_or_else(|_| Value::String(call.arguments.clone()));
                    out.push(acp::SessionUpdate::ToolCall(tool_call(
                        workspace, &call.id, &call.name, &arguments,
                    )));
                }
            }
            Role::Tool => {
                let Some(result) = &message.tool_result else {
                    continue;
                };
                let status = match result.status {
                    ResultStatus::Completed => acp::ToolCallStatus::Completed,
                    _ => acp::ToolCallStatus::Failed,
                };
                let text = message.text();
                let mut content = vec![text_content(fenced(&text))];
                if let Some(diff) = message
                    .meta
                    .diff
                    .as_ref()
                    .and_then(|d| serde_json::from_value::<Vec<DiffEntry>>(d.clone()).ok())
                {
                    content.extend(diff_content(&root, &diff));
                }
                out.push(acp::SessionUpdate::ToolCallUpdate(
                    acp::ToolCallUpdate::new(
                        result.tool_call_id.clone(),
                        acp::ToolCallUpdateFields::new()
                            .status(status)
                            .content(content)
                            .raw_output(serde_json::json!({ "result": text })),
                    ),
                ));
            }
            Role::Notice => out.push(notice(&message.text())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn modes_round_trip() {
        for mode in Mode::ALL {
            assert_eq!(parse_mode_id(mode_id(mode)), Some(mode));
        }
        assert_eq!(parse_mode_id("autoEdit"), Some(Mode::AutoEdit));
        assert_eq!(parse_mode_id("auto-edit"), None);
    }

    #[test]
    fn fences_survive_backticks() {
        assert!(fenced("a ``` b").starts_with("````\n"));
        assert!(fenced(&"x".repeat(20_000)).contains("more bytes"));
    }
}
