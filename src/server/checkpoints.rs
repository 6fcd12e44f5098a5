//! The native face's checkpoint methods: `turn/diff`, `session/checkpoints`, `session/rewind`,
//! `session/fork` (queued on the session like every session method, so they keep arrival
//! order) and `session/delete` (a store operation, after the session is shut down if open).

use serde_json::Value;

use super::params::params;
use std::sync::Arc;

use super::Connection;
use crate::protocol::{self as wire, method, ErrorKind, RpcErrorObject};
use crate::session::Op;

/// The methods this module answers.
pub(super) const METHODS: &[&str] = &[
    method::TURN_DIFF,
    method::SESSION_CHECKPOINTS,
    method::SESSION_REWIND,
    method::SESSION_FORK,
    method::SESSION_DELETE,
];

impl Connection {
    pub(super) async fn dispatch_checkpoint(
        &mut self,
        id: &Option<Value>,
        method: &str,
        raw: Value,
    ) -> Result<(), RpcErrorObject> {
        match method {
            method::TURN_DIFF => {
                let p: wire::TurnDiffParams = params(method, raw)?;
                let reply = self.reply(id.clone(), |files| wire::TurnDiffResult { files });
                self.session(&p.session_id)?.send(Op::TurnDiff {
                    turn_id: p.turn_id,
                    reply,
                });
            }
            method::SESSION_CHECKPOINTS => {
                let p: wire::SessionIdParams = params(method, raw)?;
                let reply = self.reply(id.clone(), |checkpoints| wire::CheckpointsResult {
                    checkpoints,
                });
                self.session(&p.session_id)?.send(Op::Checkpoints { reply });
            }
            method::SESSION_REWIND => {
                let p: wire::RewindParams = params(method, raw)?;
                let reply = self.reply(id.clone(), |result: wire::RewindResult| result);
                self.session(&p.session_id)?.send(Op::Rewind {
                    turn_id: p.turn_id,
                    restore: p.restore,
                    force: p.force.unwrap_or(false),
                    reply,
                });
            }
            method::SESSION_FORK => {
                let p: wire::ForkParams = params(method, raw)?;
                let reply = self.reply(id.clone(), |session_id| wire::ForkResult { session_id });
                self.session(&p.session_id)?.send(Op::Fork {
                    turn_id: p.turn_id,
                    reply,
                });
            }
            method::SESSION_DELETE => {
                let p: wire::SessionIdParams = params(method, raw)?;
                let Some(store) = self.store().await? else {
                    return Err(RpcErrorObject::new(
                        ErrorKind::Unsupported,
                        "this server keeps no sessions (no store), so there is nothing to delete",
                    ));
                };
                // An open session is shut down first: its turn stopped, its servers ended.
                if let Some(live) = self.shared.host.remove(&p.session_id) {
                    self.subscriptions.retain(|e| !Arc::ptr_eq(e, &live.face));
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    live.handle.send(Op::Shutdown {
                        reply: Box::new(move |_| {
                            let _ = tx.send(());
                        }),
                    });
                    let _ = rx.await;
                }
                let existed = store.delete_session(&p.session_id).await.map_err(|e| {
                    RpcErrorObject::new(
                        ErrorKind::StoreUnavailable,
                        format!("the session could not be deleted: {e}"),
                    )
                })?;
                if !existed {
                    return Err(RpcErrorObject::new(
                        ErrorKind::UnknownSession,
                        format!(
                            "there is no session {} in the store; session/list lists them",
                            p.session_id
                        ),
                    ));
                }
                self.answer(id, Ok(wire::EmptyResult {}));
            }
            _ => {}
        }
        Ok(())
    }
}
