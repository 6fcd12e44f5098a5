//! Opening a session for a connection (`session/load`, `session/attach`) in a process whose
//! sessions any connection may reach, and `session/attach`'s replay.
//!
//! A session lives once per process: the first connection that loads or attaches a stored
//! session restores it (under `Shared::opening`, so two connections never restore it twice) and
//! every later one finds it live. `session/attach {sessionId, fromSeq?}` answers `{}` first,
//! then sends every event after `fromSeq` and then the live ones (see `fanout.rs`).

use std::sync::Arc;

use serde_json::Value;

use super::fanout::SessionEvents;
use super::Connection;
use crate::protocol::{self as wire, ErrorKind, RpcErrorObject};
use crate::session::{self, Op, Resume, SessionHandle};

/// A session a connection opened: live already, or restored from the store just now.
pub(super) struct Opened {
    pub(super) handle: SessionHandle,
    pub(super) cwd: String,
    pub(super) events: Arc<SessionEvents>,
    /// Requests open in the session (the load response lists them).
    pub(super) pending: Vec<Value>,
    /// `Some` when this call restored it: what to start once the client has its answer.
    restored: Option<Option<Resume>>,
}

impl Opened {
    /// After the client has the answer: a session restored just now starts its MCP servers and
    /// continues the turn a crash cut short.
    pub(super) fn start(self) {
        if let Some(resume) = self.restored {
            self.handle.start_mcp_servers();
            if let Some(resume) = resume {
                self.handle.send(Op::Resume { resume });
            }
        }
    }
}

impl Connection {
    /// The session `session_id`, live in this process or restored from the store; this
    /// connection is not subscribed to it yet (the caller decides how).
    pub(super) async fn open_session(
        &mut self,
        session_id: &str,
    ) -> Result<Opened, RpcErrorObject> {
        let _opening = self.shared.opening.lock().await;
        if let Some(live) = self.shared.host.get(session_id) {
            return Ok(Opened {
                pending: live.handle.shared.pending_payloads(),
                handle: live.handle,
                cwd: live.cwd,
                events: live.face,
                restored: None,
            });
        }
        let Some(store) = self.store().await? else {
            return Err(RpcErrorObject::new(
                ErrorKind::UnknownSession,
                format!("unknown session {session_id}; this server keeps no store"),
            ));
        };
        let events = self.session_events();
        let restored = session::restore(self.engine.clone(), events.clone(), store, session_id)
            .await
            .map_err(|e| {
                let kind = match e {
                    session::RestoreError::NotFound(_) => ErrorKind::UnknownSession,
                    session::RestoreError::Workspace { .. } => ErrorKind::InvalidCwd,
                    _ => ErrorKind::Internal,
                };
                RpcErrorObject::new(kind, e.to_string())
            })?;
        let cwd = restored.handle.shared.workspace.roots()[0]
            .display()
            .to_string();
        self.shared
            .host
            .insert(restored.handle.clone(), cwd.clone(), events.clone());
        Ok(Opened {
            handle: restored.handle,
            cwd,
            events,
            pending: restored.pending,
            restored: Some(restored.resume),
        })
    }

    /// `session/attach`: `{}`, then the events after `fromSeq`, then the live ones.
    pub(super) async fn attach(
        &mut self,
        id: &Option<Value>,
        params: wire::SessionAttachParams,
    ) -> Result<(), RpcErrorObject> {
        let opened = self.open_session(&params.session_id).await?;
        let store = self.store().await?;
        self.answer(id, Ok(wire::EmptyResult {}));
        let replay = opened
            .events
            .attach(
                &params.session_id,
                self.id,
                self.out.clone(),
                params.from_seq.unwrap_or(0),
                store.as_ref(),
            )
            .await;
        match replay {
            Ok(()) => {
                if !self
                    .subscriptions
                    .iter()
                    .any(|e| Arc::ptr_eq(e, &opened.events))
                {
                    self.subscriptions.push(opened.events.clone());
                }
            }
            // The answer is out; the client sees no events and may attach again.
            Err(e) => tracing::warn!(
                session = params.session_id,
                "the replay of an attach failed, so the client is not attached: {e}"
            ),
        }
        opened.start();
        Ok(())
    }
}
