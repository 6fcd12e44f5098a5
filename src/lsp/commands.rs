//! The `tandem.*` commands as session work, and the driver task that owns the workspace's
//! session.
//!
//! `dispatch` runs inside the ordered wrapper's `call`: it parses the arguments and queues one
//! [`Work`] on the driver's unbounded queue (never a wait), returning a future of the reply.
//! The driver applies the queue in order: it creates or resumes the session on first use (one
//! per workspace root; on restart the newest stored session of that root is restored), then
//! hands each op to the session's queue, so ops reach the session actor in the order the
//! client sent the commands, even while the session is still being opened.
//!
//! Does not: wait for the client, or read files inside `call` (an unopened file named as a
//! prompt's context is read by the driver, still in order).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tower_lsp_server::jsonrpc;

use super::bridge::{Bridge, BridgeSink};
use super::{documents, error, lock, session_error, Face};
use crate::engine::history::Part;
use crate::protocol::{ErrorKind, Mode};
use crate::session::host::shutdown_reply;
use crate::session::{self, NewSession, Op, PromptOutcome, SessionHandle};
use crate::workspace::Workspace;

type Answer = oneshot::Sender<jsonrpc::Result<Value>>;

/// A session's handle and the face's bridge for it.
type Current = (SessionHandle, Arc<Bridge>);

/// Builds and sends an op once the session is open, or answers the error that kept it shut.
type SendOp = Box<dyn FnOnce(Result<&Current, jsonrpc::Error>) + Send>;

/// One unit of session work, in the order the client sent it.
pub enum Work {
    /// `tandem.prompt` (and `tandem.undo`): the text, with the file named as context.
    Prompt {
        text: String,
        context: Option<FileContext>,
        reply: Answer,
    },
    /// Any other op: built and sent once the session exists.
    Op(SendOp),
    /// `tandem.newSession`: stop the current session and start a new one.
    NewSession { reply: Answer },
}

/// The file a prompt was asked about: its overlay text as of the `call` (when open), else it is
/// read from disk by the driver.
pub struct FileContext {
    uri: String,
    open_text: Option<String>,
    range: Option<Value>,
}

/// Turn one `tandem.*` command into queued work; the future resolves with the command's result.
pub fn dispatch(
    face: &Arc<Face>,
    command: &str,
    argument: Value,
) -> BoxFuture<'static, jsonrpc::Result<Value>> {
    let (tx, rx) = oneshot::channel();
    let queued = match build(face, command, &argument, tx) {
        Ok(work) => face.work.send(work).map_err(|_| {
            error(
                ErrorKind::Internal,
                "the session driver has stopped; restart the language server",
            )
        }),
        Err(e) => Err(e),
    };
    async move {
        queued?;
        rx.await.unwrap_or_else(|_| {
            Err(error(
                ErrorKind::Internal,
                "the command was dropped before it was answered",
            ))
        })
    }
    .boxed()
}

fn text_arg<'a>(argument: &'a Value, key: &str, command: &str) -> jsonrpc::Result<&'a str> {
    argument[key].as_str().ok_or_else(|| {
        error(
            ErrorKind::InvalidParams,
            format!("{command} needs an argument object with a string `{key}`"),
        )
    })
}

/// Answer `reply` from an op's reply closure.
fn answer<T: Send + 'static>(
    reply: Answer,
    to_value: impl FnOnce(T) -> Value + Send + 'static,
) -> session::Reply<T> {
    Box::new(move |result| {
        let _ = reply.send(result.map(to_value).map_err(session_error));
    })
}

/// Work that sends `op(reply)` to the session, or answers the session's opening error.
fn op_work(reply: Answer, op: impl FnOnce(Answer) -> Op + Send + 'static) -> Work {
    Work::Op(Box::new(move |current| match current {
        Ok((handle, _)) => handle.send(op(reply)),
        Err(e) => {
            let _ = reply.send(Err(e));
        }
    }))
}

fn build(face: &Face, command: &str, argument: &Value, reply: Answer) -> jsonrpc::Result<Work> {
    Ok(match command {
        "tandem.prompt" => {
            let uri = argument["uri"].as_str().map(str::to_owned);
            let text = match argument["text"].as_str() {
                Some(t) if !t.trim().is_empty() => t.to_owned(),
                // "tandem: ask…": LSP has no request for free text.
                _ if uri.is_some() => "I have a question about this code. Read it, summarize it in two sentences, and ask me what I want to know.".to_owned(),
                _ => {
                    return Err(error(
                        ErrorKind::InvalidParams,
                        "tandem.prompt needs `{text, uri?, range?}` with a non-empty `text`",
                    ))
                }
            };
            let context = uri.map(|uri| FileContext {
                open_text: lock(&face.documents).text(&uri).map(str::to_owned),
                range: argument.get("range").cloned(),
                uri,
            });
            Work::Prompt {
                text,
                context,
                reply,
            }
        }
        "tandem.undo" => Work::Prompt {
            text: "/undo".to_owned(),
            context: None,
            reply,
        },
        "tandem.stop" => op_work(reply, |reply| Op::Stop {
            reply: answer(reply, |stopped| json!({"stopped": stopped})),
        }),
        "tandem.steer" => {
            let text = text_arg(argument, "text", command)?.to_owned();
            op_work(reply, |reply| Op::Steer {
                text,
                reply: answer(reply, |()| json!({"queued": true})),
            })
        }
        "tandem.switchModel" => {
            let model = text_arg(argument, "model", command)?.to_owned();
            op_work(reply, |reply| Op::SwitchModel {
                model,
                reply: answer(
                    reply,
                    |(model, warning)| json!({"model": model, "warning": warning}),
                ),
            })
        }
        "tandem.setMode" => {
            let name = text_arg(argument, "mode", command)?;
            let mode: Mode = name.parse().map_err(|_| {
                error(
                    ErrorKind::InvalidMode,
                    format!("unknown mode `{name}`; use ask, autoEdit, plan or fullAuto"),
                )
            })?;
            op_work(reply, move |reply| Op::SetMode {
                mode,
                reply: answer(reply, move |()| json!({"mode": mode})),
            })
        }
        "tandem.newSession" => Work::NewSession { reply },
        other => {
            return Err(error(
                ErrorKind::MethodNotFound,
                format!(
                    "unknown command `{other}`; tandem offers {}",
                    super::COMMANDS.join(", ")
                ),
            ))
        }
    })
}

/// The driver: applies the face's work in order against the workspace's session.
pub async fn drive(face: Arc<Face>, mut queue: mpsc::UnboundedReceiver<Work>) {
    let mut current: Option<Current> = None;
    while let Some(work) = queue.recv().await {
        if let Work::NewSession { reply } = work {
            if let Some((handle, bridge)) = current.take() {
                face.host.remove(handle.id());
                let _ = shutdown_reply(&handle).await;
                bridge.detach();
            }
            let opened = open(&face, false).await;
            let _ = reply.send(
                opened
                    .as_ref()
                    .map(|(handle, _)| json!({"sessionId": handle.id()}))
                    .map_err(Clone::clone),
            );
            current = opened.ok();
            continue;
        }
        if current.is_none() {
            match open(&face, true).await {
                Ok(opened) => current = Some(opened),
                Err(e) => {
                    fail(work, e);
                    continue;
                }
            }
        }
        let Some(live) = current.as_ref() else {
            continue;
        };
        match work {
            Work::Prompt {
                text,
                context,
                reply,
            } => {
                let text = match context {
                    Some(context) => match with_context(&face, text, context).await {
                        Ok(text) => text,
                        Err(e) => {
                            let _ = reply.send(Err(e));
                            continue;
                        }
                    },
                    None => text,
                };
                live.1.prompt_queued(&text);
                live.0.send(Op::Prompt {
                    parts: vec![Part::Text { text }],
                    reply: answer(reply, |outcome| match outcome {
                        PromptOutcome::Turn { turn_id, command } => {
                            json!({"turnId": turn_id, "command": command})
                        }
                        PromptOutcome::Command {
                            name,
                            output,
                            session_id,
                        } => json!({"command": name, "output": output, "sessionId": session_id}),
                    }),
                });
            }
            Work::Op(send) => send(Ok(live)),
            Work::NewSession { .. } => {}
        }
    }
}

fn fail(work: Work, e: jsonrpc::Error) {
    match work {
        Work::Prompt { reply, .. } | Work::NewSession { reply } => {
            let _ = reply.send(Err(e));
        }
        Work::Op(send) => send(Err(e)),
    }
}

/// The prompt with its file (overlay text, else disk) and range appended.
async fn with_context(face: &Face, text: String, context: FileContext) -> jsonrpc::Result<String> {
    let path = documents::uri_to_path(&context.uri);
    let body = match (context.open_text, &path) {
        (Some(open), _) => open,
        (None, Some(path)) => tokio::fs::read_to_string(path).await.map_err(|e| {
            error(
                ErrorKind::InvalidParams,
                format!(
                    "cannot read `{}` for the prompt's context: {e}",
                    path.display()
                ),
            )
        })?,
        (None, None) => {
            return Err(error(
                ErrorKind::InvalidParams,
                format!(
                    "`{}` is neither open in the editor nor a file:// URI",
                    context.uri
                ),
            ))
        }
    };
    let root = lock(&face.root).clone();
    let shown = match (&path, &root) {
        (Some(path), Some(root)) => path
            .strip_prefix(root)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| path.clone())
            .display()
            .to_string(),
        (Some(path), None) => path.display().to_string(),
        (None, _) => context.uri.clone(),
    };
    let (first, picked) = documents::lines_of(&body, context.range.as_ref());
    Ok(documents::prompt_with_context(
        &text, &shown, first, &picked,
    ))
}

/// Open the workspace's session: the newest stored one of the root when `resume`, else a new one.
async fn open(face: &Arc<Face>, resume: bool) -> jsonrpc::Result<Current> {
    let root = lock(&face.root).clone().ok_or_else(|| {
        error(
            ErrorKind::InvalidCwd,
            "the client sent no workspace root (rootUri or workspaceFolders) in `initialize`; open a folder",
        )
    })?;
    // The store keeps the canonical root as the session's cwd; list and create with the same.
    let shown = root.display().to_string();
    let root = tokio::task::spawn_blocking(move || std::fs::canonicalize(&root))
        .await
        .map_err(|e| error(ErrorKind::Internal, e.to_string()))?
        .map_err(|e| {
            error(
                ErrorKind::InvalidCwd,
                format!("the workspace root `{shown}`: {e}"),
            )
        })?;
    let store = match face.host.store().await {
        Ok(Some(store)) => store,
        Ok(None) => return Err(error(ErrorKind::StoreUnavailable, "no session store")),
        Err(e) => return Err(error(ErrorKind::StoreUnavailable, e.to_string())),
    };
    let bridge = Bridge::new(
        face.client.clone(),
        face.abilities(),
        face.transcripts.clone(),
    );
    let sink = Arc::new(BridgeSink(bridge.clone()));
    if resume {
        let newest = face
            .host
            .list(Some(root.display().to_string()))
            .await
            .map_err(|e| error(ErrorKind::StoreUnavailable, e.to_string()))?
            .into_iter()
            .next();
        if let Some(listing) = newest {
            let restored = session::restore(face.engine.clone(), sink, store, &listing.session_id)
                .await
                .map_err(|e| error(ErrorKind::Internal, e.to_string()))?;
            let handle = restored.handle;
            bridge.set_handle(handle.clone());
            face.host
                .insert(handle.clone(), listing.cwd, bridge.clone());
            handle.start_mcp_servers();
            if let Some(resume) = restored.resume {
                handle.send(Op::Resume { resume });
            }
            return Ok((handle, bridge));
        }
    }
    let handle = spawn_new(face, root, store, sink).await?;
    bridge.set_handle(handle.clone());
    let cwd = handle.shared.workspace.roots()[0].display().to_string();
    face.host.insert(handle.clone(), cwd, bridge.clone());
    handle.start_mcp_servers();
    Ok((handle, bridge))
}

/// Reads of open documents from the overlay, edits of them through `workspace/applyEdit`.
fn editor_fs(face: &Face) -> Arc<dyn crate::tools::client_fs::ClientFs> {
    Arc::new(super::editor_fs::EditorFs {
        client: face.client.clone(),
        documents: face.documents.clone(),
        apply_edit: face.abilities().apply_edit,
    })
}

async fn spawn_new(
    face: &Face,
    root: PathBuf,
    store: crate::store::Store,
    sink: Arc<BridgeSink>,
) -> jsonrpc::Result<SessionHandle> {
    let own_files = face.engine.own_files.clone();
    let workspace =
        tokio::task::spawn_blocking(move || Workspace::open_protecting(vec![root], own_files))
            .await
            .map_err(|e| error(ErrorKind::Internal, e.to_string()))?
            .map_err(|e| error(ErrorKind::InvalidCwd, e.to_string()))?;
    let mcp = session::mcp::build_hub(&face.engine, Some(&store), &workspace, &[]).await;
    Ok(session::spawn(
        face.engine.clone(),
        sink,
        NewSession {
            workspace,
            model: face.engine.config.default_model.clone(),
            mode: Mode::Ask,
            store: Some(store),
            client_fs: Some(editor_fs(face)),
            mcp,
        },
    ))
}
