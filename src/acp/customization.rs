//! The ACP face's slash commands and hooks: `available_commands_update` after a session opens
//! and after each turn when the set changed (a prompt starting with `/name` runs the command in
//! the session, as on the native face), and the extension methods `_hooks/list` and
//! `_hooks/trust` (native params and results), advertised in `initialize._meta.tandem`.

use super::*;
use crate::protocol as wire;

/// `_hooks/list`: params `{sessionId}`, result as native `hooks/list`.
pub const HOOKS_LIST_METHOD: &str = "_hooks/list";
/// `_hooks/trust`: params `{sessionId}`, result `{}`.
pub const HOOKS_TRUST_METHOD: &str = "_hooks/trust";

/// The methods above, for `initialize._meta.tandem`.
pub(super) fn advertised() -> [(&'static str, Value); 2] {
    [
        (
            "hooksList",
            json!({"method": HOOKS_LIST_METHOD, "params": {"sessionId": "string"}}),
        ),
        (
            "hooksTrust",
            json!({"method": HOOKS_TRUST_METHOD, "params": {"sessionId": "string"}}),
        ),
    ]
}

/// Whether `method` (with or without its leading `_`) is one of this module's.
pub(super) fn is_customization_method(method: &str) -> bool {
    let method = method.strip_prefix('_').unwrap_or(method);
    [HOOKS_LIST_METHOD, HOOKS_TRUST_METHOD]
        .iter()
        .any(|m| m.trim_start_matches('_') == method)
}

/// Send the session's commands as `available_commands_update` when they differ from what the
/// client was sent last (a task: listing reads the commands folders).
pub(super) fn announce_commands(bridge: Arc<Bridge>, handle: SessionHandle) {
    tokio::spawn(async move {
        let listed = session::commands::wire_list(&handle.shared).await;
        let commands: Vec<acp::AvailableCommand> = listed
            .commands
            .into_iter()
            .map(|c| {
                let command = acp::AvailableCommand::new(c.name, c.description);
                match c.argument_hint {
                    Some(hint) => command.input(acp::AvailableCommandInput::Unstructured(
                        acp::UnstructuredCommandInput::new(hint),
                    )),
                    None => command,
                }
            })
            .collect();
        if bridge.remember_commands(&commands) {
            bridge.send_update(acp::SessionUpdate::AvailableCommandsUpdate(
                acp::AvailableCommandsUpdate::new(commands),
            ));
        }
    });
}

impl Acp {
    /// `_hooks/list` or `_hooks/trust` (answered from a task beside the dispatch loop).
    pub(super) async fn customization_method(
        &self,
        method: &str,
        params: &str,
    ) -> Result<Value, AcpError> {
        let method = method.strip_prefix('_').unwrap_or(method);
        let p: wire::SessionIdParams = serde_json::from_str(params)
            .map_err(|e| invalid(format!("bad params for _{method}: {e}")))?;
        let (_, handle) = self.live(&p.session_id)?;
        if method == &HOOKS_LIST_METHOD[1..] {
            to_value(session::commands::wire_hooks(&handle.shared).await)
        } else {
            handle.shared.trust_hooks().await.map_err(invalid)?;
            to_value(wire::EmptyResult {})
        }
    }
}
