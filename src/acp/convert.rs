//! Pure conversions between tandem's vocabulary and ACP v1 types: prompt content, tool kinds,
//! locations, diffs, config options, timestamps, and the history replay of `session/load`.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema as acp;
use serde_json::Value;

use crate::config::Config;
use crate::engine::display::LoadView;
use crate::engine::history::Part;
use crate::protocol::{DiffEntry, DisplayRole, Location, Mode, ToolKind, ToolStatus};
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

/// A user message's text as content blocks: each embedded text resource that
/// [`prompt_parts`] wrapped for the model (`<context uri="…">\n…\n</context>`) as the resource
/// the client attached, the text around them as text. The display history joins a message's
/// text parts, so the wrappers are found in the joined text: a wrapper runs from its opening to
/// the last closing before the next opening (or the end), which keeps a resource whose own text
/// contains the closing line whole.
fn user_text_blocks(text: &str) -> Vec<acp::ContentBlock> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find(CONTEXT_OPEN) {
        let after_open = &rest[open + CONTEXT_OPEN.len()..];
        let Some((uri, body_and_rest)) = after_open.split_once("\">\n") else {
            break;
        };
        if uri.contains('"') || uri.contains('\n') {
            // Not a wrapper this face wrote: keep it as text up to here and look further on.
            let end = open + CONTEXT_OPEN.len();
            push_text(&mut blocks, &rest[..end]);
            rest = &rest[end..];
            continue;
        }
        let window_end = body_and_rest
            .find(CONTEXT_OPEN)
            .unwrap_or(body_and_rest.len());
        let Some(close) = body_and_rest[..window_end].rfind(CONTEXT_CLOSE) else {
            break;
        };
        push_text(&mut blocks, &rest[..open]);
        blocks.push(acp::ContentBlock::Resource(acp::EmbeddedResource::new(
            acp::EmbeddedResourceResource::TextResourceContents(acp::TextResourceContents::new(
                format!("{}\n", &body_and_rest[..close]),
                uri.to_owned(),
            )),
        )));
        rest = &body_and_rest[close + CONTEXT_CLOSE.len()..];
    }
    push_text(&mut blocks, rest);
    blocks
}

fn push_text(blocks: &mut Vec<acp::ContentBlock>, text: &str) {
    if text.is_empty() {
        return;
    }
    // Text split around a wrapper that was not one joins the text before it.
    if let Some(acp::ContentBlock::Text(previous)) = blocks.last_mut() {
        previous.text.push_str(text);
        return;
    }
    blocks.push(text_block(text.to_owned()));
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

/// The session's [`LoadView`] as `session/update`s, for `session/load`: user prompts (and
/// steering) as user chunks, reasoning as thought chunks, answers as message chunks, every
/// tool call with its final status, result and diff, and notices; the same view the native
/// `session/load` pages, so both faces show the same history. Reminders the engine wrote for
/// the model are not in it. An entry that cannot be read (a damaged stored entry) becomes a
/// notice that says so, and the replay goes on.
pub fn replay(
    workspace: &Workspace,
    view: &LoadView<'_>,
    notice: &dyn Fn(&str) -> acp::SessionUpdate,
) -> Vec<acp::SessionUpdate> {
    let root = workspace.roots()[0].clone();
    let mut out = Vec::new();
    for (position, entry) in view.entries.iter().enumerate() {
        let message = match entry.to_message() {
            Ok(message) => message,
            Err(e) => {
                out.push(notice(&format!(
                    "message {position} of this session cannot be shown ({e})"
                )));
                continue;
            }
        };
        match message.role {
            DisplayRole::User => {
                for block in user_text_blocks(&message.text) {
                    out.push(acp::SessionUpdate::UserMessageChunk(
                        acp::ContentChunk::new(block),
                    ));
                }
                for image in message.images.into_iter().flatten() {
                    out.push(acp::SessionUpdate::UserMessageChunk(
                        acp::ContentChunk::new(acp::ContentBlock::Image(acp::ImageContent::new(
                            image.data,
                            image.mime_type,
                        ))),
                    ));
                }
                for document in message.documents.into_iter().flatten() {
                    out.push(acp::SessionUpdate::UserMessageChunk(
                        acp::ContentChunk::new(text_block(format!(
                            "(PDF document {} attached)",
                            document.name.as_deref().unwrap_or("without a name")
                        ))),
                    ));
                }
            }
            DisplayRole::Assistant => {
                if let Some(reasoning) = message.reasoning.filter(|r| !r.is_empty()) {
                    out.push(acp::SessionUpdate::AgentThoughtChunk(
                        acp::ContentChunk::new(text_block(reasoning)),
                    ));
                }
                if !message.text.is_empty() {
                    out.push(acp::SessionUpdate::AgentMessageChunk(
                        acp::ContentChunk::new(text_block(message.text)),
                    ));
                }
                let calls = message.tool_calls.unwrap_or_default();
                for call in &calls {
                    out.push(acp::SessionUpdate::ToolCall(tool_call(
                        workspace,
                        &call.tool_call_id,
                        &call.name,
                        &call.arguments,
                    )));
                }
                // Results after all the calls of the message, as they came.
                for call in calls {
                    let Some(status) = call.status else {
                        continue;
                    };
                    let status = match status {
                        ToolStatus::Completed => acp::ToolCallStatus::Completed,
                        _ => acp::ToolCallStatus::Failed,
                    };
                    let text = call.result.unwrap_or_default();
                    let mut content = vec![text_content(fenced(&text))];
                    if let Some(diff) = call
                        .diff
                        .and_then(|d| serde_json::from_value::<Vec<DiffEntry>>(d).ok())
                    {
                        content.extend(diff_content(&root, &diff));
                    }
                    out.push(acp::SessionUpdate::ToolCallUpdate(
                        acp::ToolCallUpdate::new(
                            call.tool_call_id,
                            acp::ToolCallUpdateFields::new()
                                .status(status)
                                .content(content)
                                .raw_output(serde_json::json!({ "result": text })),
                        ),
                    ));
                }
            }
            DisplayRole::Notice => out.push(notice(&message.text)),
        }
    }
    out
}

/// The model's plan as ACP's `plan` update (the whole list; ACP's entries carry a priority,
/// which `update_plan` does not ask for: all are `medium`).
pub fn plan_update(entries: &[crate::protocol::PlanEntry]) -> acp::SessionUpdate {
    use crate::protocol::PlanStatus;
    acp::SessionUpdate::Plan(acp::Plan::new(
        entries
            .iter()
            .map(|e| {
                acp::PlanEntry::new(
                    e.content.clone(),
                    acp::PlanEntryPriority::Medium,
                    match e.status {
                        PlanStatus::Pending => acp::PlanEntryStatus::Pending,
                        PlanStatus::InProgress => acp::PlanEntryStatus::InProgress,
                        PlanStatus::Completed => acp::PlanEntryStatus::Completed,
                    },
                )
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What [`user_text_blocks`] makes of a joined text: `("text", t)` or `("resource", uri, t)`.
    fn blocks_of(text: &str) -> Vec<(String, String)> {
        user_text_blocks(text)
            .into_iter()
            .map(|block| match block {
                acp::ContentBlock::Text(t) => ("text".to_owned(), t.text),
                acp::ContentBlock::Resource(r) => match r.resource {
                    acp::EmbeddedResourceResource::TextResourceContents(t) => (t.uri, t.text),
                    other => panic!("unexpected resource {other:?}"),
                },
                other => panic!("unexpected block {other:?}"),
            })
            .collect()
    }

    fn wrapped(uri: &str, body: &str) -> String {
        match prompt_parts(vec![acp::ContentBlock::Resource(
            acp::EmbeddedResource::new(acp::EmbeddedResourceResource::TextResourceContents(
                acp::TextResourceContents::new(body, uri),
            )),
        )])
        .pop()
        {
            Some(Part::Text { text }) => text,
            other => panic!("a text resource became {other:?}"),
        }
    }

    #[test]
    fn a_replayed_user_text_gives_back_the_resources_it_carried() {
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        // Text, then a resource: the shape a prompt with an attached file has.
        let joined = format!("see this{}", wrapped("file:///a.md", "# A\nkeep\n"));
        assert_eq!(
            blocks_of(&joined),
            vec![
                pair("text", "see this"),
                pair("file:///a.md", "# A\nkeep\n")
            ]
        );
        // A resource whose own text holds the closing line stays whole, and text between
        // two resources stays between them.
        let tricky = "x\n</context>\ny\n";
        let joined = format!(
            "{}and{}after",
            wrapped("file:///t.xml", tricky),
            wrapped("file:///b.md", "b\n")
        );
        assert_eq!(
            blocks_of(&joined),
            vec![
                pair("file:///t.xml", tricky),
                pair("text", "and"),
                pair("file:///b.md", "b\n"),
                pair("text", "after"),
            ]
        );
        // Text that only looks like a wrapper is text.
        for text in [
            "<context uri=\"a\"b\">\nbody\n</context>",
            "<context uri=\"file:///x\">\nno closing",
            "plain words",
        ] {
            assert_eq!(blocks_of(text), vec![pair("text", text)]);
        }
    }

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
