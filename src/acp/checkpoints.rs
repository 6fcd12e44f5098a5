//! The ACP face's checkpoints: the unstable `session/fork` of the ACP schema (the crate's
//! `unstable_session_fork`), and the extension methods `_session/checkpoints`, `_turn/diff` and
//! `_session/rewind`, whose params and results are the native protocol's (`protocol.md`),
//! advertised in `initialize._meta.tandem`.
//!
//! Invariants: every one of them goes through the session's queue like a prompt, so it keeps
//! arrival order and a rewind is refused while a turn runs; a fork opens the new session in
//! this connection (as `session/resume` would) before it answers.

use super::*;
use crate::protocol as wire;

/// `_session/checkpoints`: params `{sessionId}`, result `{checkpoints}` (native shape).
pub const CHECKPOINTS_METHOD: &str = "_session/checkpoints";
/// `_turn/diff`: params `{sessionId, turnId}`, result `{files}` (native shape).
pub const TURN_DIFF_METHOD: &str = "_turn/diff";
/// `_session/rewind`: params `{sessionId, turnId, restore, force?}`, result as native.
pub const REWIND_METHOD: &str = "_session/rewind";

/// The methods above, for `initialize._meta.tandem`.
pub(super) fn advertised() -> Value {
    json!({
        "checkpoints": {"method": CHECKPOINTS_METHOD, "params": {"sessionId": "string"}},
        "turnDiff": {"method": TURN_DIFF_METHOD, "params": {"sessionId": "string", "turnId": "string"}},
        "rewind": {"method": REWIND_METHOD, "params": {"sessionId": "string", "turnId": "string", "restore": "files|conversation|both", "force": "boolean?"}},
        "fork": {"method": "session/fork", "meta": {"tandem": {"turnId": "string?"}}},
    })
}

/// Whether `method` (as the crate hands it over: without the leading `_`, or with it) is one
/// of this module's.
pub(super) fn is_checkpoint_method(method: &str) -> bool {
    let method = method.strip_prefix('_').unwrap_or(method);
    [CHECKPOINTS_METHOD, TURN_DIFF_METHOD, REWIND_METHOD]
        .iter()
        .any(|m| m.trim_start_matches('_') == method)
}

fn parse<T: serde::de::DeserializeOwned>(method: &str, params: &str) -> Result<T, AcpError> {
    serde_json::from_str(params).map_err(|e| invalid(format!("bad params for {method}: {e}")))
}

/// Send `make(reply)` to the session and wait for its answer.
async fn ask<T: Send + 'static>(
    handle: &SessionHandle,
    make: impl FnOnce(session::Reply<T>) -> Op,
) -> Result<T, AcpError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    handle.send(make(Box::new(move |result| {
        let _ = tx.send(result);
    })));
    rx.await
        .map_err(|_| session_error(SessionError::Closed))?
        .map_err(session_error)
}

impl Acp {
    /// One of the extension methods above (answered from a task beside the dispatch loop).
    pub(super) async fn checkpoint_method(
        &self,
        method: &str,
        params: &str,
    ) -> Result<Value, AcpError> {
        let method = method.strip_prefix('_').unwrap_or(method);
        match method {
            m if m == &CHECKPOINTS_METHOD[1..] => {
                let p: wire::SessionIdParams = parse(CHECKPOINTS_METHOD, params)?;
                let (_, handle) = self.live(&p.session_id)?;
                let checkpoints = ask(&handle, |reply| Op::Checkpoints { reply }).await?;
                to_value(wire::CheckpointsResult { checkpoints })
            }
            m if m == &TURN_DIFF_METHOD[1..] => {
                let p: wire::TurnDiffParams = parse(TURN_DIFF_METHOD, params)?;
                let (_, handle) = self.live(&p.session_id)?;
                let files = ask(&handle, |reply| Op::TurnDiff {
                    turn_id: p.turn_id,
                    reply,
                })
                .await?;
                to_value(wire::TurnDiffResult { files })
            }
            _ => {
                let p: wire::RewindParams = parse(REWIND_METHOD, params)?;
                let (_, handle) = self.live(&p.session_id)?;
                let result = ask(&handle, |reply| Op::Rewind {
                    turn_id: p.turn_id,
                    restore: p.restore,
                    force: p.force.unwrap_or(false),
                    reply,
                })
                .await?;
                to_value(result)
            }
        }
    }

    /// `session/fork`: a new stored session with the source's history (before
    /// `_meta.tandem.turnId` when given), opened in this connection.
    pub(super) async fn fork(
        &self,
        request: acp::ForkSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<Value, AcpError> {
        let source = request.session_id.0.to_string();
        let turn_id = request
            .meta
            .as_ref()
            .and_then(|m| m.get("tandem"))
            .and_then(|t| t.get("turnId"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let handle = match self.live(&source) {
            Ok((_, handle)) => handle,
            Err(_) => {
                // Not open here: open it (without a replay) so its history can be read.
                self.open_session(
                    source.clone(),
                    request.cwd.clone(),
                    false,
                    Vec::new(),
                    cx.clone(),
                )
                .await?;
                self.live(&source)?.1
            }
        };
        let new_id = ask(&handle, |reply| Op::Fork { turn_id, reply }).await?;
        self.open_session(new_id.clone(), request.cwd, false, request.mcp_servers, cx)
            .await?;
        let (_, forked) = self.live(&new_id)?;
        let settings = forked.shared.settings();
        to_value(
            acp::ForkSessionResponse::new(new_id)
                .config_options(convert::config_options(
                    &self.engine.config,
                    &settings.model,
                    settings.mode,
                    settings.allow_network,
                ))
                .modes(convert::mode_state(settings.mode)),
        )
    }
}
