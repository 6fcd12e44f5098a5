//! The LSP face: `tandem lsp`, the Language Server Protocol 3.17 on stdio, for editors with an
//! LSP client and no tandem plugin (Helix, Sublime LSP, Emacs eglot, Kakoune, Neovim's
//! `vim.lsp`). Same engine and store as `tandem serve` and `tandem acp`.
//!
//! `tower-lsp-server` (the maintained fork of tower-lsp) owns the framing and the envelope; its
//! handlers run concurrently and lazily, so nothing that changes a session is left to them:
//! `ordered.rs` wraps the `LspService` and turns every `tandem.*` command into a session `Op`
//! inside `call`, in the order the client sent them. `commands.rs` is that translation and the
//! one driver task per connection that owns the workspace's session; `bridge.rs` turns the
//! session's events into progress, log messages and approval requests; `documents.rs` keeps the
//! open documents' text (full sync).

mod bridge;
mod commands;
mod documents;
mod editor_fs;
mod ordered;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::sync::mpsc;
use tower_lsp_server::jsonrpc::{self, ErrorCode};
use tower_lsp_server::ls_types::{
    CodeAction, CodeActionOrCommand, CodeActionParams, CodeActionProviderCapability,
    CodeActionResponse, Command, DidChangeTextDocumentParams, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams, ExecuteCommandOptions, InitializeParams, InitializeResult,
    InitializedParams, ServerCapabilities, ServerInfo, TextDocumentSyncCapability,
    TextDocumentSyncKind,
};
use tower_lsp_server::{Client, LanguageServer, LspService, Server};

use crate::config::Config;
use crate::engine::EngineContext;
use crate::protocol::ErrorKind;
use crate::session::host::{shutdown_reply, Host};
use crate::session::{lock, SessionError};
use bridge::{Bridge, ClientAbilities};
use documents::Documents;

/// The commands of `executeCommandProvider`, in the order the design lists them.
pub const COMMANDS: [&str; 7] = [
    "tandem.prompt",
    "tandem.stop",
    "tandem.steer",
    "tandem.switchModel",
    "tandem.setMode",
    "tandem.newSession",
    "tandem.undo",
];

/// Where the connection stands, for the requests the wrapper answers itself (they skip the
/// inner service's own gating).
const UNINITIALIZED: u8 = 0;
const INITIALIZED: u8 = 1;
const SHUT_DOWN: u8 = 2;

/// How long `tandem lsp` waits for its sessions to stop once the client has gone.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_millis(800);

/// What every part of the face shares.
pub(crate) struct Face {
    engine: Arc<EngineContext>,
    host: Host<Arc<Bridge>>,
    client: Client,
    abilities: Mutex<ClientAbilities>,
    /// The workspace root from `initialize` (its `rootUri`, or the first workspace folder).
    root: Mutex<Option<PathBuf>>,
    documents: Arc<Mutex<Documents>>,
    state: AtomicU8,
    /// Where the sessions' Markdown transcripts are written (`DATA_DIR/transcripts`).
    transcripts: PathBuf,
    /// The driver's queue (`commands::drive`): session work in arrival order.
    work: mpsc::UnboundedSender<commands::Work>,
}

/// The `LanguageServer` the inner service dispatches to: only what needs no ordering.
struct Backend {
    face: Arc<Face>,
}

/// Run the language server on stdin/stdout until the client sends `exit` or closes stdin.
pub async fn serve(config: Config, data_dir: Option<PathBuf>) -> anyhow::Result<()> {
    let path = crate::store::default_database_path(data_dir.as_deref());
    // The agent may not edit tandem's own config or its session store, by any path.
    let own_files =
        crate::workspace::protected::OwnFiles::new(config.source_path.as_deref(), Some(&path));
    let engine = EngineContext::new(config, own_files);
    let transcripts = path
        .parent()
        .map(|dir| dir.join("transcripts"))
        .unwrap_or_else(|| PathBuf::from("transcripts"));
    let (work, queue) = mpsc::unbounded_channel();
    let (service, socket) = LspService::new(|client| Backend {
        face: Arc::new(Face {
            engine: engine.clone(),
            host: Host::new(engine.clone(), Some(path)),
            client,
            abilities: Mutex::new(ClientAbilities::default()),
            root: Mutex::new(None),
            documents: Arc::new(Mutex::new(Documents::default())),
            state: AtomicU8::new(UNINITIALIZED),
            transcripts,
            work,
        }),
    });
    let face = service.inner().face.clone();
    let driver = tokio::spawn(commands::drive(face.clone(), queue));
    let ordered = ordered::Ordered::new(service, face.clone());
    Server::new(tokio::io::stdin(), tokio::io::stdout(), socket)
        .serve(ordered)
        .await;
    // The client is gone: nobody can answer approvals, so stop every turn and shut down.
    face.engine.set_client_can_answer(false);
    driver.abort();
    let live = face.host.drain();
    let stopping = async {
        for l in live {
            let _ = shutdown_reply(&l.handle).await;
            l.face.detach();
        }
    };
    if tokio::time::timeout(EXIT_GRACE, stopping).await.is_err() {
        tracing::warn!("sessions did not stop in time after the client left; exiting anyway");
    }
    face.host.close_store().await;
    Ok(())
}

impl Face {
    fn abilities(&self) -> ClientAbilities {
        *lock(&self.abilities)
    }
}

/// A JSON-RPC error with tandem's `data.kind`, as the other faces send them.
pub(crate) fn error(kind: ErrorKind, message: impl Into<String>) -> jsonrpc::Error {
    let code = match kind {
        ErrorKind::InvalidParams
        | ErrorKind::InvalidMode
        | ErrorKind::UnknownModel
        | ErrorKind::InvalidCwd => ErrorCode::InvalidParams,
        ErrorKind::MethodNotFound => ErrorCode::MethodNotFound,
        other => ErrorCode::ServerError(other.code()),
    };
    jsonrpc::Error {
        code,
        message: message.into().into(),
        data: Some(json!({"kind": kind})),
    }
}

pub(crate) fn session_error(e: SessionError) -> jsonrpc::Error {
    error(e.kind(), e.to_string())
}

/// Whether `initializationOptions` opt in to approvals through `window/showMessageRequest`
/// even without the `window.showMessage` capability: `{"approvals": "showMessageRequest"}`.
fn asks_with_show_message_request(options: Option<&serde_json::Value>) -> bool {
    options
        .and_then(|o| o.get("approvals"))
        .and_then(serde_json::Value::as_str)
        == Some("showMessageRequest")
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> jsonrpc::Result<InitializeResult> {
        let caps = &params.capabilities;
        let window = caps.window.as_ref();
        let abilities = ClientAbilities {
            progress: window.and_then(|w| w.work_done_progress) == Some(true),
            // Emacs eglot answers `window/showMessageRequest` (with completing-read) but does
            // not declare it, so its users opt in through `initializationOptions`.
            show_message: window.is_some_and(|w| w.show_message.is_some())
                || asks_with_show_message_request(params.initialization_options.as_ref()),
            show_document: window
                .and_then(|w| w.show_document.as_ref())
                .is_some_and(|d| d.support),
            apply_edit: caps.workspace.as_ref().and_then(|w| w.apply_edit) == Some(true),
            code_action_literals: caps
                .text_document
                .as_ref()
                .and_then(|t| t.code_action.as_ref())
                .is_some_and(|c| c.code_action_literal_support.is_some()),
        };
        *lock(&self.face.abilities) = abilities;
        // Without `window/showMessageRequest` nobody can answer an approval: the engine then
        // denies every call that would ask (DESIGN 7.4, "default deny").
        self.face
            .engine
            .set_client_can_answer(abilities.show_message);
        #[allow(deprecated)] // `rootUri` is what most clients still send.
        let root_uri = params.root_uri.as_ref().map(|u| u.as_str().to_owned());
        let folder = params
            .workspace_folders
            .as_ref()
            .and_then(|f| f.first())
            .map(|f| f.uri.as_str().to_owned());
        let root = root_uri
            .or(folder)
            .and_then(|uri| documents::uri_to_path(&uri));
        *lock(&self.face.root) = root;
        self.face.state.store(INITIALIZED, Ordering::SeqCst);
        Ok(InitializeResult {
            capabilities: ServerCapabilities {
                text_document_sync: Some(TextDocumentSyncCapability::Kind(
                    TextDocumentSyncKind::FULL,
                )),
                code_action_provider: Some(CodeActionProviderCapability::Simple(true)),
                execute_command_provider: Some(ExecuteCommandOptions {
                    commands: COMMANDS.iter().map(|c| (*c).to_owned()).collect(),
                    ..ExecuteCommandOptions::default()
                }),
                ..ServerCapabilities::default()
            },
            server_info: Some(ServerInfo {
                name: "tandem".to_owned(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            }),
            ..InitializeResult::default()
        })
    }

    async fn initialized(&self, _: InitializedParams) {}

    async fn shutdown(&self) -> jsonrpc::Result<()> {
        Ok(())
    }

    // Applied to the overlay by the ordered wrapper, in arrival order, before they get here.
    async fn did_open(&self, _: DidOpenTextDocumentParams) {}
    async fn did_change(&self, _: DidChangeTextDocumentParams) {}
    async fn did_close(&self, _: DidCloseTextDocumentParams) {}

    /// "tandem: explain", "tandem: fix" and "tandem: ask…" on the range: `tandem.prompt` with
    /// the document and the range as context. Literals only when the client takes them.
    async fn code_action(
        &self,
        params: CodeActionParams,
    ) -> jsonrpc::Result<Option<CodeActionResponse>> {
        let uri = params.text_document.uri.as_str().to_owned();
        let range = serde_json::to_value(params.range).unwrap_or(Value::Null);
        let literals = self.face.abilities().code_action_literals;
        Ok(Some(code_actions(&uri, &range, literals)))
    }
}

/// The three code actions on a range, as `Command`s or as literals carrying the command.
fn code_actions(uri: &str, range: &Value, literals: bool) -> CodeActionResponse {
    [
        ("tandem: explain", Some("Explain this code.")),
        ("tandem: fix", Some("Fix the problems in this code.")),
        // LSP has no request for free text: the prompt asks the model to invite the question.
        ("tandem: ask…", None),
    ]
    .into_iter()
    .map(|(title, text)| {
        let mut argument = json!({"uri": uri, "range": range});
        if let Some(text) = text {
            argument["text"] = json!(text);
        }
        let command = Command {
            title: title.to_owned(),
            command: "tandem.prompt".to_owned(),
            arguments: Some(vec![argument]),
        };
        if literals {
            CodeActionOrCommand::CodeAction(CodeAction {
                title: title.to_owned(),
                command: Some(command),
                ..CodeAction::default()
            })
        } else {
            CodeActionOrCommand::Command(command)
        }
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_actions_are_literals_only_when_the_client_takes_them() {
        let range =
            json!({"start": {"line": 0, "character": 0}, "end": {"line": 2, "character": 0}});
        let literal = serde_json::to_value(code_actions("file:///w/a.rs", &range, true)).unwrap();
        assert_eq!(literal[0]["title"], "tandem: explain");
        assert_eq!(literal[0]["command"]["command"], "tandem.prompt");
        assert_eq!(
            literal[0]["command"]["arguments"][0]["uri"],
            "file:///w/a.rs"
        );
        assert_eq!(literal[1]["command"]["arguments"][0]["range"], range);
        assert!(literal[2]["command"]["arguments"][0].get("text").is_none());
        let plain = serde_json::to_value(code_actions("file:///w/a.rs", &range, false)).unwrap();
        assert_eq!(plain[0]["command"], "tandem.prompt");
        assert_eq!(plain[0]["arguments"][0]["text"], "Explain this code.");
    }
}
