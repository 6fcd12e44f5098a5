//! The built-in offline provider: plays a short demo scenario so a new user sees a full turn.
//!
//! The scenario is decided from the outbound request alone, like a real model: list the workspace,
//! propose a new file (which shows a diff and asks for approval), read it back, and finish. A
//! denial changes the ending. No network and no API key are involved.

use futures_util::StreamExt;
use serde_json::json;

use super::{
    Chunk, ChunkStream, FinishReason, OutboundMessage, OutboundPart, Provider, ProviderRequest,
    Usage,
};

/// The file the demo proposes to write.
pub const DEMO_FILE: &str = "tandem-demo.md";

pub struct ScriptedProvider;

impl ScriptedProvider {
    pub fn new() -> Self {
        ScriptedProvider
    }
}

impl Default for ScriptedProvider {
    fn default() -> Self {
        Self::new()
    }
}

fn words(text: &str) -> Vec<Chunk> {
    // Stream word by word so the client shows the answer arriving, as with a real model.
    let mut out = Vec::new();
    let mut current = String::new();
    for ch in text.chars() {
        current.push(ch);
        if ch == ' ' || ch == '\n' {
            out.push(Chunk::Text(std::mem::take(&mut current)));
        }
    }
    if !current.is_empty() {
        out.push(Chunk::Text(current));
    }
    out
}

fn tool_call(name: &str, arguments: serde_json::Value) -> Chunk {
    Chunk::ToolCallDelta {
        index: 0,
        id: Some(format!("call_{}", uuid::Uuid::new_v4().simple())),
        name: Some(name.to_owned()),
        arguments: arguments.to_string(),
    }
}

/// The chunks of the next demo step, given what the conversation holds so far.
pub fn next_step(request: &ProviderRequest) -> Vec<Chunk> {
    let last_user = request
        .messages
        .iter()
        .rposition(|m| matches!(m, OutboundMessage::User { .. }));
    let prompt = last_user
        .and_then(|i| match &request.messages[i] {
            OutboundMessage::User { parts } => parts.iter().find_map(|p| match p {
                OutboundPart::Text(t) => Some(t.lines().next().unwrap_or_default().to_owned()),
                _ => None,
            }),
            _ => None,
        })
        .unwrap_or_default();
    let after: &[OutboundMessage] = match last_user {
        Some(i) => &request.messages[i + 1..],
        None => &[],
    };
    let steps_done = after
        .iter()
        .filter(|m| matches!(m, OutboundMessage::Assistant { .. }))
        .count();
    let last_tool_result = after.iter().rev().find_map(|m| match m {
        OutboundMessage::Tool { content, .. } => Some(content.as_str()),
        _ => None,
    });
    let offered = |name: &str| request.tools.iter().any(|t| t.name == name);

    let mut chunks = Vec::new();
    match steps_done {
        0 => {
            chunks.extend(words(
                "Hi! I'm tandem's built-in offline demo. No model or API key is involved. \
                 First I'll look at the workspace.\n",
            ));
            chunks.push(tool_call("list_dir", json!({"path": "."})));
            chunks.push(Chunk::Finish(FinishReason::ToolCalls));
        }
        1 if offered("write_file") => {
            let entries = last_tool_result
                .map(|r| r.lines().filter(|l| !l.trim().is_empty()).count())
                .unwrap_or(0);
            let seen = match entries {
                0 => "The workspace is empty.".to_owned(),
                1 => "I see 1 entry.".to_owned(),
                n => format!("I see {n} entries."),
            };
            chunks.extend(words(&format!(
                "{seen} Now I'll propose a small note in {DEMO_FILE}; \
                 you review the diff and approve or deny it.\n"
            )));
            let content = format!(
                "# tandem demo\n\nYou asked: {prompt}\n\nThe workspace has {entries} entries at its top level.\n\
                 To do real work, point tandem at a real model: in VS Code run \"tandem: Configure Model…\"; \
                 in Neovim give setup() a `config_file` and the key in `env` (:help tandem-api-key).\n"
            );
            chunks.push(tool_call(
                "write_file",
                json!({"path": DEMO_FILE, "content": content}),
            ));
            chunks.push(Chunk::Finish(FinishReason::ToolCalls));
        }
        1 => {
            chunks.extend(words(
                "Edits are switched off in this mode, so I'll stop here. Switch to `ask` mode to see a diff and an approval.",
            ));
            chunks.push(Chunk::Finish(FinishReason::Stop));
        }
        2 if last_tool_result.is_some_and(|r| !r.starts_with("Wrote")) => {
            chunks.extend(words(&format!(
                "The write did not happen ({}), so nothing changed. That's the whole demo.",
                last_tool_result
                    .unwrap_or_default()
                    .lines()
                    .next()
                    .unwrap_or_default()
            )));
            chunks.push(Chunk::Finish(FinishReason::Stop));
        }
        2 => {
            chunks.extend(words("Written. Let me read it back to check.\n"));
            chunks.push(tool_call("read_file", json!({"path": DEMO_FILE})));
            chunks.push(Chunk::Finish(FinishReason::ToolCalls));
        }
        _ => {
            chunks.extend(words(&format!(
                "Done: {DEMO_FILE} is in your workspace. That was a full turn: streamed text, \
                 tool calls, a diff, an approval. To use a real model from your editor: in VS Code run \
                 \"tandem: Configure Model…\" (the API key goes to VS Code's secret storage); in Neovim pass \
                 `config_file` and `env` to setup() (:help tandem-api-key); in a terminal, `--config FILE`."
            )));
            chunks.push(Chunk::Finish(FinishReason::Stop));
        }
    }
    chunks.push(Chunk::Usage(Usage {
        input_tokens: request.messages.len() as u64 * 50,
        output_tokens: chunks.len() as u64,
        cached_tokens: None,
    }));
    chunks
}

impl Provider for ScriptedProvider {
    fn kind(&self) -> &'static str {
        "scripted"
    }

    fn stream(&self, request: ProviderRequest) -> ChunkStream {
        let chunks = next_step(&request);
        futures_util::stream::iter(chunks.into_iter().map(Ok)).boxed()
    }
}
