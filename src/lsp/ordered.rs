//! The ordered wrapper around `LspService`: the one place where the LSP face reads the client's
//! messages in arrival order.
//!
//! tower-lsp-server's transport calls `Service::call` synchronously, in read order, and only
//! then runs the returned futures, up to four at once and interleaved (`buffer_unordered`); a
//! handler's body is lazy, so anything a handler does can be overtaken by a later message's
//! handler (tower-lsp issue #284). So `call` itself does what must keep its order:
//! - `workspace/executeCommand` with a `tandem.*` command becomes session work on the driver's
//!   queue (an unbounded send, never a wait) and is not forwarded; the returned future only
//!   waits for the op's reply.
//! - `textDocument/didOpen|didChange|didClose` change the overlay, then go on.
//! - `shutdown` marks the connection shut down, then goes on. Everything else goes on as is.
//!
//! Invariant: `call` never blocks and never awaits. The intercepted requests skip the inner
//! service's gating (`-32002` before `initialize`, cancellation), so the face answers them
//! itself; losing `$/cancelRequest` for them is harmless, their replies are immediate or end
//! with the op.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::Value;
use tower::Service;
use tower_lsp_server::jsonrpc::{self, Request, Response};
use tower_lsp_server::{ExitedError, LanguageServer, LspService};

use super::{commands, lock, Face, INITIALIZED, SHUT_DOWN, UNINITIALIZED};

pub struct Ordered<S: LanguageServer> {
    inner: LspService<S>,
    face: Arc<Face>,
}

impl<S: LanguageServer> Ordered<S> {
    pub(super) fn new(inner: LspService<S>, face: Arc<Face>) -> Self {
        Ordered { inner, face }
    }
}

/// Whether the request is an `executeCommand` of one of tandem's commands.
fn tandem_command(req: &Request) -> Option<String> {
    if req.method() != "workspace/executeCommand" {
        return None;
    }
    let command = req.params()?.get("command")?.as_str()?;
    command.starts_with("tandem.").then(|| command.to_owned())
}

impl<S: LanguageServer> Service<Request> for Ordered<S> {
    type Response = Option<Response>;
    type Error = ExitedError;
    type Future = BoxFuture<'static, Result<Option<Response>, ExitedError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The inner service is not ready while `initialize` runs, so nothing after it is read
        // (and no command is queued) before the root and the client's abilities are known.
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        if let Some(command) = tandem_command(&req) {
            let (_, id, params) = req.into_parts();
            let argument = params
                .as_ref()
                .and_then(|p| p.get("arguments"))
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .cloned()
                .unwrap_or(Value::Null);
            let answer = match self.face.state.load(Ordering::SeqCst) {
                UNINITIALIZED => Err(jsonrpc::Error {
                    code: jsonrpc::ErrorCode::ServerError(-32002),
                    message: "the server is not initialized; send `initialize` first".into(),
                    data: None,
                }),
                SHUT_DOWN => Err(jsonrpc::Error::invalid_request()),
                INITIALIZED => Ok(commands::dispatch(&self.face, &command, argument)),
                _ => Err(jsonrpc::Error::internal_error()),
            };
            return async move {
                let result = match answer {
                    Ok(waiting) => waiting.await,
                    Err(e) => Err(e),
                };
                // An `executeCommand` sent as a notification gets no answer.
                Ok(id.map(|id| Response::from_parts(id, result)))
            }
            .boxed();
        }
        match req.method() {
            "textDocument/didOpen" | "textDocument/didChange" | "textDocument/didClose" => {
                lock(&self.face.documents).apply(req.method(), req.params());
            }
            "shutdown" => self.face.state.store(SHUT_DOWN, Ordering::SeqCst),
            // The cancel button of a turn's progress: a stop, queued here in arrival order like
            // `tandem.stop`. Its answer has nowhere to go (a notification).
            "window/workDoneProgress/cancel" => {
                let ours = req
                    .params()
                    .and_then(|p| p.get("token"))
                    .and_then(Value::as_str)
                    .is_some_and(|token| token.starts_with(super::bridge::PROGRESS_TOKEN_PREFIX));
                if ours && self.face.state.load(Ordering::SeqCst) == INITIALIZED {
                    drop(commands::dispatch(&self.face, "tandem.stop", Value::Null));
                }
                return async { Ok(None) }.boxed();
            }
            _ => {}
        }
        self.inner.call(req)
    }
}
