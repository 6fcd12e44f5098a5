//! The native face's slash-command and hook methods: `commands/list`, `hooks/list`,
//! `hooks/trust`, and the `prompt` result of a command. They translate; `session::commands`
//! and `engine::hooks` decide.

use super::*;

/// `commands/list`.
pub(super) async fn commands_list(handle: &SessionHandle) -> wire::CommandsListResult {
    session::commands::wire_list(&handle.shared).await
}

/// `hooks/list`.
pub(super) async fn hooks_list(handle: &SessionHandle) -> wire::HooksListResult {
    session::commands::wire_hooks(&handle.shared).await
}

/// `hooks/trust`: nothing to trust is `invalidParams` with the reason.
pub(super) async fn hooks_trust(handle: &SessionHandle) -> Result<(), RpcErrorObject> {
    handle
        .shared
        .trust_hooks()
        .await
        .map_err(|why| RpcErrorObject::new(ErrorKind::InvalidParams, why))
}

/// The `prompt` result of what the prompt became.
pub(super) fn prompt_result(outcome: session::PromptOutcome) -> wire::PromptResult {
    match outcome {
        session::PromptOutcome::Turn { turn_id, command } => wire::PromptResult {
            turn_id: Some(turn_id),
            command: command.map(|name| wire::PromptCommand {
                name,
                output: None,
                session_id: None,
            }),
        },
        session::PromptOutcome::Command {
            name,
            output,
            session_id,
        } => wire::PromptResult {
            turn_id: None,
            command: Some(wire::PromptCommand {
                name,
                output: Some(output),
                session_id,
            }),
        },
    }
}
