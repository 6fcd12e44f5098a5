//! The bridge's side of slash commands: which command list the client has, and answering a
//! `session/prompt` that a built-in command answered without a turn.

use super::*;

impl Bridge {
    /// Remember `commands` as the list the client has; `false` when it has exactly this one
    /// already (nothing to send).
    pub fn remember_commands(&self, commands: &[acp::AvailableCommand]) -> bool {
        let mut sent = lock(&self.commands_sent);
        if sent.as_deref() == Some(commands) {
            return false;
        }
        *sent = Some(commands.to_vec());
        true
    }

    /// A built-in command answered the prompt without a turn: its output as agent text, then
    /// the prompt's answer (`end_turn`, with `_meta.tandem.command` naming the command and the
    /// session `/fork` made).
    pub fn finish_command(&self, name: &str, output: &str, session_id: Option<&str>) {
        self.send_update(acp::SessionUpdate::AgentMessageChunk(
            acp::ContentChunk::new(convert::text_block(output.to_owned())),
        ));
        if let Some(waiting) = lock(&self.prompt).take() {
            let mut meta = serde_json::Map::new();
            meta.insert(
                "tandem".to_owned(),
                json!({"command": {"name": name, "sessionId": session_id}}),
            );
            let response = acp::PromptResponse::new(acp::StopReason::EndTurn).meta(meta);
            let result = serde_json::to_value(response)
                .map_err(agent_client_protocol::Error::into_internal_error);
            let _ = waiting.responder.respond_with_result(result);
        }
    }
}
