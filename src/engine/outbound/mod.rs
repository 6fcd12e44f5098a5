//! The outbound projection: the one function that turns canonical history into provider input.
//!
//! Everything a provider ever sees passes through [`project`]. It drops notices and every
//! sidecar, keeps provider-private extras only for the provider that owns them, degrades images
//! and PDFs the active model cannot take (in the view only, so a switch back restores them), and
//! appends the per-turn context to every prompt without persisting it.
//!
//! The per-turn context rides on each prompt (a user message the user typed, `Source::User`),
//! not only on the newest: a request then differs from the previous one only at its end, and a
//! provider's prompt cache reads everything before back (moving the block from prompt to prompt
//! made every turn resend the previous turn uncached). [`cache::OutboundCache`] keeps each
//! prompt as it was first sent, so after a mode switch earlier prompts keep the mode they were
//! sent with and only the new prompt names the new one; a rebuild of the cache (a model switch,
//! a compaction, a restart) gives every prompt the current context.

pub mod cache;

use std::collections::BTreeMap;

use serde_json::Value;

use super::history::{Message, Part, Role, Source};
use crate::providers::{OutboundMessage, OutboundPart, OutboundToolCall};

/// What the projection needs to know about the request it is building.
pub struct ProjectionContext<'a> {
    /// The provider kind the request goes to; extras keyed `_<kind>.` are kept, others dropped.
    pub provider_kind: &'a str,
    /// The client-facing model id, for the image placeholder text.
    pub model_id: &'a str,
    pub vision: bool,
    /// Whether the model reads PDF documents natively.
    pub pdf: bool,
    /// Per-turn context (mode reminder, workspace roots), appended to every prompt (and to the
    /// last user message of a view that holds no prompt).
    pub turn_context: Option<&'a str>,
}

fn owned_extras(extras: &BTreeMap<String, Value>, provider_kind: &str) -> BTreeMap<String, Value> {
    let prefix = format!("_{provider_kind}.");
    extras
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn project_parts(parts: &[Part], ctx: &ProjectionContext<'_>) -> Vec<OutboundPart> {
    parts
        .iter()
        .map(|part| match part {
            Part::Text { text } => OutboundPart::Text(text.clone()),
            Part::Image { mime_type, data } if ctx.vision => OutboundPart::Image {
                mime_type: mime_type.clone(),
                data: data.clone(),
            },
            Part::Image { mime_type, .. } => OutboundPart::Text(format!(
                "[an image ({mime_type}) was attached here; the current model {} cannot view images]",
                ctx.model_id
            )),
            Part::Document {
                mime_type,
                data,
                name,
            } if ctx.pdf && mime_type == "application/pdf" => OutboundPart::Document {
                mime_type: mime_type.clone(),
                data: data.clone(),
                name: name.clone(),
            },
            Part::Document {
                mime_type, name, ..
            } => OutboundPart::Text(format!(
                "[a document {} ({mime_type}) was attached here; the current model {} cannot read it; ask the user to paste the relevant text or to switch to a model that reads PDFs]",
                name.as_deref().map(|n| format!("\"{n}\"")).unwrap_or_else(|| "without a name".to_owned()),
                ctx.model_id
            )),
        })
        .collect()
}

/// The user message that carries the images of a run of tool results.
fn tool_images_message(parts: Vec<OutboundPart>) -> OutboundMessage {
    OutboundMessage::User { parts }
}

/// The `<compacted-history>` message that stands for everything before a compaction's boundary.
pub fn summary_message(summary: &str) -> OutboundMessage {
    OutboundMessage::User {
        parts: vec![OutboundPart::Text(format!(
            "<compacted-history>\n{summary}\n</compacted-history>"
        ))],
    }
}

/// Whether `message` is a prompt the user typed, which carries the per-turn context.
pub fn is_prompt(message: &Message) -> bool {
    message.role == Role::User && message.meta.source == Source::User
}

/// Build the provider view of `history`.
///
/// After a compaction, everything before its boundary is shown as one
/// `<compacted-history>` user message carrying the summary.
pub fn project(history: &[Message], ctx: &ProjectionContext<'_>) -> Vec<OutboundMessage> {
    let mut out = Vec::with_capacity(history.len());
    let mut start = 0;
    if let Some((_, boundary, summary)) = super::compaction::latest_compaction(history) {
        out.push(summary_message(summary));
        start = boundary;
    }
    let view = &history[start..];
    let has_prompt = view.iter().any(is_prompt);
    project_range(view, ctx, has_prompt, &mut out);
    if !has_prompt {
        // A view without a prompt (a compaction cut after the last one): the context rides on
        // its last user message, so the model still sees it.
        if let Some(context) = ctx.turn_context {
            if let Some(OutboundMessage::User { parts }) = out
                .iter_mut()
                .rev()
                .find(|m| matches!(m, OutboundMessage::User { .. }))
            {
                parts.push(OutboundPart::Text(context.to_owned()));
            }
        }
    }
    out
}

/// Project `messages`, a stretch of history that does not start inside a run of tool results,
/// onto the end of `out`. With `prompts_carry_context`, each prompt gets the per-turn context.
///
/// Projecting a history in two stretches gives the same messages as projecting it whole when
/// the second starts at a user or assistant message: images of a run of tool results are
/// written when the run ends, and such a message ends it. The outbound cache relies on this.
pub fn project_range(
    messages: &[Message],
    ctx: &ProjectionContext<'_>,
    prompts_carry_context: bool,
    out: &mut Vec<OutboundMessage>,
) {
    // Images of tool results (an MCP tool's) wait until the run of tool results ends: no
    // vendor takes an image inside every kind of tool result, and a user message between two
    // results would break the pairing of calls and results that every vendor checks.
    let mut result_images: Vec<OutboundPart> = Vec::new();
    for message in messages {
        // Notices are not sent, so one between two results does not end the run.
        if !matches!(message.role, Role::Tool | Role::Notice) && !result_images.is_empty() {
            out.push(tool_images_message(std::mem::take(&mut result_images)));
        }
        match message.role {
            Role::Notice => {}
            Role::User => {
                let mut parts = project_parts(&message.parts, ctx);
                if let (true, Some(context)) = (
                    prompts_carry_context && message.meta.source == Source::User,
                    ctx.turn_context,
                ) {
                    parts.push(OutboundPart::Text(context.to_owned()));
                }
                out.push(OutboundMessage::User { parts })
            }
            Role::Assistant => out.push(OutboundMessage::Assistant {
                text: message.text(),
                tool_calls: message
                    .tool_calls
                    .iter()
                    .map(|c| OutboundToolCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                        extras: owned_extras(&c.extras, ctx.provider_kind),
                    })
                    .collect(),
                extras: owned_extras(&message.meta.extras, ctx.provider_kind),
            }),
            Role::Tool => {
                if let Some(result) = &message.tool_result {
                    out.push(OutboundMessage::Tool {
                        tool_call_id: result.tool_call_id.clone(),
                        name: result.name.clone(),
                        content: message.text(),
                    });
                    let images: Vec<Part> = message
                        .parts
                        .iter()
                        .filter(|p| matches!(p, Part::Image { .. }))
                        .cloned()
                        .collect();
                    if !images.is_empty() {
                        result_images.push(OutboundPart::Text(format!(
                            "[the images the tool call {} returned:]",
                            result.tool_call_id
                        )));
                        result_images.extend(project_parts(&images, ctx));
                    }
                }
            }
        }
    }
    if !result_images.is_empty() {
        out.push(tool_images_message(result_images));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::history::{NoticeKind, ResultStatus, Source, ToolCallRecord};

    fn ctx(vision: bool) -> ProjectionContext<'static> {
        ProjectionContext {
            provider_kind: "openai",
            model_id: "m",
            vision,
            pdf: vision,
            turn_context: Some("<context>roots</context>"),
        }
    }

    #[test]
    fn drops_notices_and_foreign_extras_and_adds_context() {
        let mut call = ToolCallRecord {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: "{}".into(),
            extras: BTreeMap::new(),
        };
        call.extras
            .insert("_anthropic.sig".into(), Value::from("x"));
        call.extras.insert("_openai.k".into(), Value::from("y"));
        let history = vec![
            Message::user(vec![Part::Text { text: "hi".into() }], Source::User, None),
            Message::assistant("ok".into(), vec![call.clone()], "t"),
            Message::tool_result(&call, ResultStatus::Completed, "data".into(), "t"),
            Message::notice(NoticeKind::Interrupted, "stopped".into(), None),
        ];
        let out = project(&history, &ctx(false));
        assert_eq!(out.len(), 3);
        match &out[0] {
            OutboundMessage::User { parts } => {
                assert_eq!(
                    parts.last(),
                    Some(&OutboundPart::Text("<context>roots</context>".into()))
                )
            }
            other => panic!("{other:?}"),
        }
        match &out[1] {
            OutboundMessage::Assistant { tool_calls, .. } => {
                assert!(tool_calls[0].extras.contains_key("_openai.k"));
                assert!(!tool_calls[0].extras.contains_key("_anthropic.sig"));
            }
            other => panic!("{other:?}"),
        }
        // The canonical history is untouched.
        assert_eq!(history[0].parts.len(), 1);
    }

    #[test]
    fn compaction_replaces_the_prefix_in_the_view_only() {
        let history = vec![
            Message::user(
                vec![Part::Text {
                    text: "old question".into(),
                }],
                Source::User,
                None,
            ),
            Message::assistant("old answer".into(), vec![], "t"),
            Message::user(
                vec![Part::Text {
                    text: "new question".into(),
                }],
                Source::User,
                None,
            ),
        ];
        let mut with_notice = history.clone();
        let mut notice = Message::notice(NoticeKind::Compacted, "compacted".into(), None);
        notice.meta.compaction = Some(Box::new(crate::engine::history::CompactionRecord {
            boundary: history[2].id.clone(),
            summary: "they asked an old question".into(),
        }));
        with_notice.push(notice);
        let out = project(&with_notice, &ctx(false));
        assert_eq!(out.len(), 2);
        assert!(
            matches!(&out[0], OutboundMessage::User { parts } if matches!(&parts[0], OutboundPart::Text(t) if t.contains("<compacted-history>") && t.contains("old question")))
        );
        assert!(
            matches!(&out[1], OutboundMessage::User { parts } if matches!(&parts[0], OutboundPart::Text(t) if t == "new question"))
        );
        assert_eq!(with_notice.len(), 4, "history is untouched");
    }

    #[test]
    fn images_degrade_only_in_the_view() {
        let history = vec![Message::user(
            vec![Part::Image {
                mime_type: "image/png".into(),
                data: "AAAA".into(),
            }],
            Source::User,
            None,
        )];
        let blind = project(&history, &ctx(false));
        let seeing = project(&history, &ctx(true));
        assert!(
            matches!(&blind[0], OutboundMessage::User { parts } if matches!(&parts[0], OutboundPart::Text(t) if t.contains("cannot view images")))
        );
        assert!(
            matches!(&seeing[0], OutboundMessage::User { parts } if matches!(&parts[0], OutboundPart::Image { .. }))
        );
        assert!(matches!(history[0].parts[0], Part::Image { .. }));
    }

    #[test]
    fn documents_degrade_only_in_the_view_with_their_name() {
        let history = vec![Message::user(
            vec![Part::Document {
                mime_type: "application/pdf".into(),
                data: "JVBERi0=".into(),
                name: Some("spec.pdf".into()),
            }],
            Source::User,
            None,
        )];
        let blind = project(&history, &ctx(false));
        let reading = project(&history, &ctx(true));
        assert!(
            matches!(&blind[0], OutboundMessage::User { parts } if matches!(&parts[0], OutboundPart::Text(t) if t.contains("\"spec.pdf\"") && t.contains("cannot read it")))
        );
        assert!(
            matches!(&reading[0], OutboundMessage::User { parts } if matches!(&parts[0], OutboundPart::Document { name: Some(n), .. } if n == "spec.pdf"))
        );
        assert!(matches!(history[0].parts[0], Part::Document { .. }));
    }

    #[test]
    fn tool_result_images_follow_the_whole_run_of_results() {
        let call = |id: &str| ToolCallRecord {
            id: id.into(),
            name: "mcp__s__shot".into(),
            arguments: "{}".into(),
            extras: BTreeMap::new(),
        };
        let (a, b) = (call("c1"), call("c2"));
        let mut first = Message::tool_result(&a, ResultStatus::Completed, "[image 1]".into(), "t");
        first.parts.push(Part::Image {
            mime_type: "image/png".into(),
            data: "AAAA".into(),
        });
        let history = vec![
            Message::user(
                vec![Part::Text {
                    text: "look".into(),
                }],
                Source::User,
                None,
            ),
            Message::assistant(String::new(), vec![a.clone(), b.clone()], "t"),
            first,
            // Not sent: it must not end the run of results.
            Message::notice(NoticeKind::Interrupted, "a notice".into(), None),
            Message::tool_result(&b, ResultStatus::Completed, "text only".into(), "t"),
            Message::assistant("seen".into(), vec![], "t"),
        ];
        let out = project(&history, &ctx(true));
        let kinds: Vec<&str> = out
            .iter()
            .map(|m| match m {
                OutboundMessage::User { .. } => "user",
                OutboundMessage::Assistant { .. } => "assistant",
                OutboundMessage::Tool { .. } => "tool",
            })
            .collect();
        assert_eq!(
            kinds,
            ["user", "assistant", "tool", "tool", "user", "assistant"]
        );
        match &out[4] {
            OutboundMessage::User { parts } => {
                assert!(matches!(&parts[0], OutboundPart::Text(t) if t.contains("c1")));
                assert!(parts
                    .iter()
                    .any(|p| matches!(p, OutboundPart::Image { .. })));
            }
            other => panic!("{other:?}"),
        }
    }
}
