//! Reads and writes through the editor (ACP's `fs/read_text_file` and `fs/write_text_file`),
//! and the registry of those requests still open, so cancel, close and the end of the connection
//! withdraw them (`$/cancel_request`) instead of waiting for an editor that may never answer.
//!
//! Invariants: a call waiting on a withdrawn request fails at once with a reason; a late answer
//! finds nobody waiting and is dropped; a failed read fails the call (never a silent disk read).

use super::*;

/// The editor's `fs/read_text_file` and `fs/write_text_file` requests still waiting for an
/// answer. A turn that waits on one cannot stop until it resolves, and an editor may never
/// answer; so `session/cancel`, `session/close` and the end of the connection withdraw them
/// (`$/cancel_request` to the client), the waiting call fails at once with a reason, and a
/// late answer finds nobody waiting and is dropped.
#[derive(Default)]
pub(super) struct OpenFsRequests {
    pub(super) next_key: u64,
    pub(super) open: HashMap<u64, (RequestCancellationHandle, tokio::sync::oneshot::Sender<()>)>,
}

impl OpenFsRequests {
    pub(super) fn withdraw_all(&mut self) {
        for (_, (request, waiter)) in self.open.drain() {
            let _ = request.cancel();
            let _ = waiter.send(());
        }
    }
}

/// Reads and writes through the editor: ACP's `fs/read_text_file` and `fs/write_text_file`.
pub(super) struct EditorFs {
    pub(super) cx: ConnectionTo<Client>,
    pub(super) session_id: Arc<OnceLock<String>>,
    pub(super) open: Arc<Mutex<OpenFsRequests>>,
    /// To wait for the session's events to reach the client first (weak: the bridge owns
    /// the session, which owns this).
    pub(super) bridge: std::sync::Weak<Bridge>,
}

impl EditorFs {
    /// Resolves once the events emitted so far (the call's `tool_call` among them) have been
    /// sent, so no `fs/*` request reaches the client before the call it serves.
    fn events_sent(&self) -> BoxFuture<'static, ()> {
        match self.bridge.upgrade().and_then(|b| b.handle()) {
            Some(handle) => Box::pin(handle.shared.emitter.delivered()),
            None => Box::pin(async {}),
        }
    }

    fn session_id(&self) -> String {
        self.session_id.get().cloned().unwrap_or_default()
    }

    fn clone_parts(&self) -> EditorFs {
        EditorFs {
            cx: self.cx.clone(),
            session_id: self.session_id.clone(),
            open: self.open.clone(),
            bridge: self.bridge.clone(),
        }
    }

    /// Wait for the editor's answer to `sent`, or for the request to be withdrawn.
    fn answer<T: Send + 'static>(
        &self,
        sent: agent_client_protocol::SentRequest<T, agent_client_protocol::V1>,
        what: &'static str,
    ) -> BoxFuture<'static, Result<T, String>>
    where
        agent_client_protocol::SentRequest<T, agent_client_protocol::V1>: Send,
    {
        let (waiter, withdrawn) = tokio::sync::oneshot::channel();
        let key = {
            let mut open = lock(&self.open);
            open.next_key += 1;
            let key = open.next_key;
            open.open.insert(key, (sent.cancellation_handle(), waiter));
            key
        };
        let open = self.open.clone();
        Box::pin(async move {
            let answer = tokio::select! {
                answer = sent.block_task() => Some(answer),
                _ = withdrawn => None,
            };
            lock(&open).open.remove(&key);
            match answer {
                Some(answer) => answer.map_err(|e| format!("the editor refused to {what}: {e}")),
                None => Err(format!(
                    "the turn was stopped while the editor had not answered the request to {what}, so it was withdrawn; whether the editor acted on it is unknown"
                )),
            }
        })
    }
}

impl ClientFs for EditorFs {
    fn read_text(&self, path: PathBuf) -> BoxFuture<'static, Result<String, String>> {
        let events_sent = self.events_sent();
        let fs = self.clone_parts();
        Box::pin(async move {
            events_sent.await;
            let sent = fs
                .cx
                .send_request(acp::ReadTextFileRequest::new(fs.session_id(), path));
            fs.answer(sent, "read the file").await.map(|r| r.content)
        })
    }

    fn write_text(&self, path: PathBuf, content: String) -> BoxFuture<'static, Result<(), String>> {
        let events_sent = self.events_sent();
        let fs = self.clone_parts();
        Box::pin(async move {
            events_sent.await;
            let sent = fs.cx.send_request(acp::WriteTextFileRequest::new(
                fs.session_id(),
                path,
                content,
            ));
            fs.answer(sent, "write the file").await.map(|_| ())
        })
    }
}
