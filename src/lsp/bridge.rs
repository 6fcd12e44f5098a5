//! One session as an LSP client sees it: the engine's events become `$/progress` (begin with
//! the prompt, report with the latest text and tool steps, end), the whole answer goes to
//! `window/logMessage` at turn end and to the session's Markdown transcript (opened with
//! `window/showDocument` when the client supports it), and approvals become `window/showMessageRequest`s whose
//! answers come back to the session as `Op::Approve`.
//!
//! `emit` runs on the store's writer thread in `seq` order and never blocks: it hands the event
//! to this session's bridge task, which talks to the client one event at a time (so progress
//! messages keep the events' order). Requests that wait for the user (approvals) run in tasks of
//! their own, so a stop's events still flow while a question is open.
//!
//! Does not: send approvals from inside a request handler (only from these tasks), or keep the
//! engine waiting on a client that cannot answer (without `window.showMessage` the face tells
//! the engine nobody can answer, and every approval is denied without a request).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::mpsc;
use tower::ServiceExt;
use tower_lsp_server::jsonrpc::{Id, Request};
use tower_lsp_server::ls_types::notification::Cancel;
use tower_lsp_server::ls_types::{
    CancelParams, MessageType, NumberOrString, ShowDocumentParams, Uri,
};
use tower_lsp_server::{Cancellable, Client, OngoingProgress, Unbounded};

use crate::protocol::{ApprovalOption, Decision, DiffEntry, Event, NoticeKind, TurnEndReason};
use crate::session::{lock, DenyMemory, EventSink, Op, SessionHandle};

/// What the client said it can do in `initialize`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientAbilities {
    /// `window.workDoneProgress`: `$/progress` may be sent (after `workDoneProgress/create`).
    pub progress: bool,
    /// `window.showMessage`: `window/showMessageRequest` is answered (approvals can be asked).
    pub show_message: bool,
    /// `window.showDocument.support`: the transcript is opened after each turn.
    pub show_document: bool,
    /// `workspace.applyEdit`: approved edits of open documents go to the editor.
    pub apply_edit: bool,
    /// `textDocument.codeAction.codeActionLiteralSupport`: code actions as literals.
    pub code_action_literals: bool,
}

/// The actions of an approval request, in the order the user sees them.
pub const ALLOW_ONCE: &str = "Allow once";
pub const ALWAYS_ALLOW: &str = "Always allow";
pub const DENY: &str = "Deny";

/// How much of a diff an approval message shows.
const DIFF_LINES: usize = 40;
/// At most one `report` of streamed text per this interval (tool steps are always reported).
const REPORT_EVERY: Duration = Duration::from_millis(100);
/// A turn's progress token is this and the turn id.
pub const PROGRESS_TOKEN_PREFIX: &str = "tandem/";
/// How long the client may take to answer `window/workDoneProgress/create`.
const CREATE_PATIENCE: Duration = Duration::from_secs(10);

/// Bytes of streamed pieces that may wait for the bridge task (which waits for the client):
/// past this, pieces are dropped, so a client that stops reading never makes tandem hold a
/// flooding command's output. Nothing is lost that is shown: the answer is rebuilt from each
/// stored `assistantMessage`, and progress only shows the latest text.
const PIECE_BACKLOG_BYTES: usize = 4 * 1024 * 1024;

/// One event on its way to the bridge task, with the bytes it counts against the backlog.
type Queued = (Option<String>, Event, usize);

/// The face's part of a session: what the driver and the bridge task share.
pub struct Bridge {
    events: mpsc::UnboundedSender<Queued>,
    /// Bytes of streamed pieces sent to the bridge task and not yet taken by it.
    piece_backlog: Arc<AtomicUsize>,
    shared: Arc<Shared>,
}

struct Shared {
    client: Client,
    abilities: ClientAbilities,
    /// Where the session's Markdown transcripts go (`DATA_DIR/transcripts`).
    transcripts: PathBuf,
    /// This session's transcript, once its id is known.
    transcript: Mutex<Option<PathBuf>>,
    handle: Mutex<Option<SessionHandle>>,
    /// The text of the prompt just queued, for the progress `begin` of its turn.
    next_prompt: Mutex<Option<String>>,
    /// Approval requests open at the client: the engine's request id → the LSP request id.
    asks: Mutex<HashMap<String, Id>>,
}

/// The sink handed to the session actor.
pub struct BridgeSink(pub Arc<Bridge>);

impl EventSink for BridgeSink {
    fn emit(&self, _session_id: &str, _seq: u64, turn_id: Option<&str>, event: &Event) {
        let bytes = piece_bytes(event);
        if bytes > 0 {
            if self.0.piece_backlog.load(Ordering::Acquire) > PIECE_BACKLOG_BYTES {
                return;
            }
            self.0.piece_backlog.fetch_add(bytes, Ordering::AcqRel);
        }
        let _ = self
            .0
            .events
            .send((turn_id.map(str::to_owned), event.clone(), bytes));
    }
}

/// What a streamed piece carries, in bytes (0 for every other event).
fn piece_bytes(event: &Event) -> usize {
    match event {
        Event::AssistantDelta { text } | Event::ReasoningDelta { text } => text.len().max(1),
        Event::ToolCallUpdate {
            output: Some(output),
            ..
        } => output.len().max(1),
        _ => 0,
    }
}

impl Bridge {
    pub fn new(client: Client, abilities: ClientAbilities, transcripts: PathBuf) -> Arc<Bridge> {
        let shared = Arc::new(Shared {
            client,
            abilities,
            transcript: Mutex::new(None),
            transcripts,
            handle: Mutex::new(None),
            next_prompt: Mutex::new(None),
            asks: Mutex::new(HashMap::new()),
        });
        let (events, rx) = mpsc::unbounded_channel();
        let piece_backlog = Arc::new(AtomicUsize::new(0));
        // The task ends when the session drops its sink and the face its bridge.
        tokio::spawn(run(shared.clone(), rx, piece_backlog.clone()));
        Arc::new(Bridge {
            events,
            piece_backlog,
            shared,
        })
    }

    pub fn set_handle(&self, handle: SessionHandle) {
        let file = self.shared.transcripts.join(format!("{}.md", handle.id()));
        *lock(&self.shared.transcript) = Some(file);
        *lock(&self.shared.handle) = Some(handle);
    }

    /// Forget the session; answers to its open requests are dropped.
    pub fn detach(&self) {
        lock(&self.shared.handle).take();
        lock(&self.shared.asks).clear();
    }

    /// The prompt the next `turnStarted` belongs to (its progress `begin` shows it).
    pub fn prompt_queued(&self, text: &str) {
        *lock(&self.shared.next_prompt) = Some(text.to_owned());
    }
}

/// The progress of the running turn and what it has said so far.
#[derive(Default)]
struct TurnView {
    progress: Option<OngoingProgress<Unbounded, Cancellable>>,
    prompt: Option<String>,
    answer: String,
    /// Where the current assistant message's text starts in `answer`: its stored
    /// `assistantMessage` replaces what its deltas added (some may have been dropped).
    message_start: usize,
    last_report: Option<Instant>,
    titles: HashMap<String, String>,
}

async fn run(
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<Queued>,
    piece_backlog: Arc<AtomicUsize>,
) {
    let mut turn = TurnView::default();
    while let Some((turn_id, event, bytes)) = rx.recv().await {
        if bytes > 0 {
            piece_backlog.fetch_sub(bytes, Ordering::AcqRel);
        }
        match event {
            Event::TurnStarted { .. } => {
                let prompt = lock(&shared.next_prompt).take();
                turn = TurnView::default();
                if shared.abilities.progress {
                    turn.progress = begin(&shared.client, turn_id.as_deref(), prompt.clone()).await;
                }
                turn.prompt = prompt;
            }
            Event::AssistantDelta { text } => {
                turn.answer.push_str(&text);
                let due = turn
                    .last_report
                    .is_none_or(|at| at.elapsed() >= REPORT_EVERY);
                if due {
                    let latest = tail(&turn.answer, 80);
                    report(&mut turn, latest).await;
                }
            }
            Event::AssistantMessage { text, .. } => {
                turn.answer.truncate(turn.message_start);
                turn.answer.push_str(&text);
                turn.message_start = turn.answer.len();
            }
            Event::ToolCall {
                tool_call_id,
                title,
                ..
            } => {
                report(&mut turn, format!("▶ {title}")).await;
                turn.titles.insert(tool_call_id, title);
            }
            Event::ToolCallUpdate {
                tool_call_id,
                status,
                result: Some(_),
                ..
            } => {
                let title = turn.titles.remove(&tool_call_id).unwrap_or_default();
                let status = serde_json::to_value(status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                report(&mut turn, format!("{title}: {status}")).await;
            }
            Event::ApprovalRequested {
                request_id,
                name,
                title,
                reason,
                arguments,
                diff,
                command,
                options,
                ..
            } => {
                let message = approval_message(
                    &name,
                    &title,
                    &reason,
                    &arguments,
                    diff.as_deref(),
                    command.as_deref(),
                );
                ask(&shared, request_id, message, command.is_some(), &options);
            }
            Event::ApprovalResolved { request_id, .. } => {
                // Still open here means the engine withdrew it (a stop): withdraw it too. The
                // client may still answer; that answer finds no entry and is dropped.
                let open = lock(&shared.asks).remove(&request_id);
                if let Some(Id::Number(n)) = open {
                    if let Ok(n) = i32::try_from(n) {
                        shared
                            .client
                            .send_notification::<Cancel>(CancelParams {
                                id: NumberOrString::Number(n),
                            })
                            .await;
                    }
                }
            }
            Event::QuestionAsked {
                request_id,
                question,
                choices,
                plan,
                ..
            } => ask_question(&shared, request_id, question, choices, plan),
            Event::Notice { kind, text } => {
                let typ = match kind {
                    NoticeKind::Error => MessageType::ERROR,
                    NoticeKind::Warning | NoticeKind::Interrupted => MessageType::WARNING,
                    _ => MessageType::INFO,
                };
                shared.client.log_message(typ, text).await;
            }
            Event::TurnEnded { reason, error } => {
                let how = match reason {
                    TurnEndReason::Completed => "done",
                    TurnEndReason::Interrupted => "stopped",
                    TurnEndReason::Error => "failed",
                    TurnEndReason::ContextExceeded => "context window exceeded",
                    TurnEndReason::MaxIterations => "stopped after too many steps",
                };
                let view = std::mem::take(&mut turn);
                if let Some(progress) = view.progress {
                    progress.finish_with_message(how).await;
                }
                if !view.answer.is_empty() {
                    shared
                        .client
                        .log_message(MessageType::INFO, view.answer.clone())
                        .await;
                }
                if let Some(error) = &error {
                    shared
                        .client
                        .log_message(MessageType::ERROR, error.message.clone())
                        .await;
                }
                let entry = transcript_entry(
                    view.prompt.as_deref(),
                    &view.answer,
                    how,
                    error.as_ref().map(|e| e.message.as_str()),
                );
                transcript(&shared, entry).await;
            }
            _ => {}
        }
    }
}

/// One turn of the Markdown transcript.
fn transcript_entry(prompt: Option<&str>, answer: &str, how: &str, error: Option<&str>) -> String {
    let mut entry = String::new();
    if let Some(prompt) = prompt {
        entry.push_str("## > ");
        entry.push_str(&prompt.replace('\n', "\n> "));
        entry.push_str("\n\n");
    }
    if !answer.is_empty() {
        entry.push_str(answer.trim_end());
        entry.push_str("\n\n");
    }
    if let Some(error) = error {
        entry.push_str(&format!("**error:** {error}\n\n"));
    }
    entry.push_str(&format!("_({how})_\n\n"));
    entry
}

/// Append the turn to the session's transcript and, when the client can, show it (without
/// taking focus). A transcript that cannot be written is logged, never a failed turn.
async fn transcript(shared: &Shared, entry: String) {
    let Some(file) = lock(&shared.transcript).clone() else {
        return;
    };
    let written = async {
        if let Some(dir) = file.parent() {
            tokio::fs::create_dir_all(dir).await?;
        }
        let mut out = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .await?;
        tokio::io::AsyncWriteExt::write_all(&mut out, entry.as_bytes()).await
    }
    .await;
    if let Err(e) = written {
        tracing::warn!("cannot write the transcript {}: {e}", file.display());
        return;
    }
    if !shared.abilities.show_document {
        return;
    }
    let Some(uri) = Uri::from_file_path(&file) else {
        return;
    };
    let params = ShowDocumentParams {
        uri,
        external: None,
        take_focus: Some(false),
        selection: None,
    };
    if let Err(e) = shared.client.show_document(params).await {
        tracing::debug!("window/showDocument failed: {e}");
    }
}

/// `window/workDoneProgress/create` with a token of the turn, then `begin` with the prompt.
async fn begin(
    client: &Client,
    turn_id: Option<&str>,
    prompt: Option<String>,
) -> Option<OngoingProgress<Unbounded, Cancellable>> {
    let token = NumberOrString::String(format!(
        "{PROGRESS_TOKEN_PREFIX}{}",
        turn_id.unwrap_or("turn")
    ));
    match tokio::time::timeout(
        CREATE_PATIENCE,
        client.create_work_done_progress(token.clone()),
    )
    .await
    {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::debug!("workDoneProgress/create refused: {e}");
            return None;
        }
        Err(_) => {
            tracing::debug!("workDoneProgress/create not answered in time");
            return None;
        }
    }
    let message = tail(prompt.as_deref().unwrap_or("working…"), 120);
    Some(
        client
            .progress(token, "tandem")
            .with_message(message)
            // The editor's cancel button sends `window/workDoneProgress/cancel`, which the
            // ordered wrapper turns into a stop (see `ordered.rs`).
            .with_cancel_button()
            .begin()
            .await,
    )
}

async fn report(turn: &mut TurnView, message: String) {
    if let Some(progress) = &turn.progress {
        progress.report_with_message(message, None).await;
        turn.last_report = Some(Instant::now());
    }
}

/// The last `chars` characters of `text`, on one line.
fn tail(text: &str, chars: usize) -> String {
    let flat = text.trim().replace('\n', " ");
    let count = flat.chars().count();
    if count <= chars {
        return flat;
    }
    let skip = count - chars;
    format!("…{}", flat.chars().skip(skip).collect::<String>())
}

/// The approval's message: the tool, the path and a short unified diff, or the command.
pub fn approval_message(
    name: &str,
    title: &str,
    reason: &str,
    arguments: &Value,
    diff: Option<&[DiffEntry]>,
    command: Option<&str>,
) -> String {
    let mut text = format!("tandem wants to use {name}: {title}");
    if let Some(command) = command {
        text.push_str(&format!("\ncommand: {command}"));
    }
    match diff {
        Some(entries) if !entries.is_empty() => {
            for entry in entries {
                text.push_str(&format!("\npath: {}", entry.path));
                let lines: Vec<&str> = entry.unified.lines().collect();
                for line in lines.iter().take(DIFF_LINES) {
                    text.push('\n');
                    text.push_str(line);
                }
                if lines.len() > DIFF_LINES {
                    text.push_str(&format!("\n… ({} more lines)", lines.len() - DIFF_LINES));
                }
            }
        }
        _ => {
            if let Some(path) = arguments["path"].as_str() {
                text.push_str(&format!("\npath: {path}"));
            }
        }
    }
    if !reason.is_empty() {
        text.push_str(&format!("\n({reason})"));
    }
    text
}

/// Ask the user through `window/showMessageRequest` in a task; the answer becomes `Op::Approve`.
fn ask(
    shared: &Arc<Shared>,
    request_id: String,
    message: String,
    is_command: bool,
    options: &[ApprovalOption],
) {
    // "Always allow" is offered only when the engine offers a rule for this call: the command's
    // prefix for a shell command (never "every command"), the tool otherwise.
    let always = if is_command {
        options
            .iter()
            .any(|o| o.decision == Decision::AlwaysCommand)
            .then_some(Decision::AlwaysCommand)
    } else {
        options
            .iter()
            .any(|o| o.decision == Decision::AlwaysTool)
            .then_some(Decision::AlwaysTool)
    };
    let mut actions = vec![json!({"title": ALLOW_ONCE})];
    if always.is_some() {
        actions.push(json!({"title": ALWAYS_ALLOW}));
    }
    actions.push(json!({"title": DENY}));
    show_request(
        shared,
        request_id,
        message,
        actions,
        move |shared, request_id, answer| {
            let (decision, message) = match answer.as_deref() {
                Some(ALLOW_ONCE) => (Decision::Once, None),
                Some(ALWAYS_ALLOW) => (always.unwrap_or(Decision::Once), None),
                Some(_) => (Decision::Deny, None),
                // Dismissed: LSP answers `null`, which is a deny.
                None => (
                    Decision::Deny,
                    Some("the user dismissed the request".to_owned()),
                ),
            };
            let Some(handle) = lock(&shared.handle).clone() else {
                return;
            };
            handle.send(Op::Approve {
                request_id,
                decision,
                message,
                edited_content: None,
                arguments_digest: None,
                deny_memory: DenyMemory::ThisCallOnly,
                reply: Box::new(|result| {
                    if let Err(e) = result {
                        tracing::debug!("approval not applied: {e}");
                    }
                }),
            });
        },
    );
}

/// Send `window/showMessageRequest` from a task and hand the chosen title (`None`: dismissed or
/// failed) to `answered`, unless the engine withdrew the request meanwhile.
fn show_request(
    shared: &Arc<Shared>,
    request_id: String,
    message: String,
    actions: Vec<Value>,
    answered: impl FnOnce(&Shared, String, Option<String>) + Send + 'static,
) {
    let id = shared.client.next_request_id();
    // Built by hand (not `show_message_request`) so the request id is known and a withdrawn
    // request can be cancelled with `$/cancelRequest`.
    let request = Request::build("window/showMessageRequest")
        .id(id.clone())
        .params(json!({"type": 3, "message": message, "actions": actions}))
        .finish();
    lock(&shared.asks).insert(request_id.clone(), id);
    let sent = shared.client.clone().oneshot(request);
    let shared = shared.clone();
    tokio::spawn(async move {
        let response = sent.await;
        if lock(&shared.asks).remove(&request_id).is_none() {
            // Withdrawn (a stop) while the user decided: the late answer is dropped.
            return;
        }
        let answer = match response {
            Ok(Some(response)) => match response.into_parts().1 {
                Ok(value) => value["title"].as_str().map(str::to_owned),
                Err(e) => {
                    tracing::warn!("window/showMessageRequest failed: {e}");
                    None
                }
            },
            _ => None,
        };
        answered(&shared, request_id, answer);
    });
}

/// `ask_user` with choices and `propose_plan`: the choices (or Accept/Reject) as the actions
/// of a `window/showMessageRequest`. A question without choices cannot be answered over LSP (it
/// has no free-text request), so the model is told so at once.
fn ask_question(
    shared: &Arc<Shared>,
    request_id: String,
    question: String,
    choices: Option<Vec<String>>,
    plan: Option<String>,
) {
    let choices = match (choices.filter(|c| !c.is_empty()), &plan) {
        (Some(choices), _) => choices,
        (None, Some(_)) => vec![ACCEPT.to_owned(), REJECT.to_owned()],
        (None, None) => return send_answer(shared, request_id, NO_FREE_TEXT.to_owned()),
    };
    let message = match &plan {
        Some(plan) => format!("{question}\n\n{plan}"),
        None => question,
    };
    let actions = choices.iter().map(|c| json!({"title": c})).collect();
    show_request(
        shared,
        request_id,
        message,
        actions,
        |shared, request_id, answer| {
            let text = answer.unwrap_or_else(|| "(the user dismissed the question)".to_owned());
            send_answer(shared, request_id, text);
        },
    );
}

/// What the model is told when a question needs free text.
const NO_FREE_TEXT: &str = "(this editor talks to tandem over LSP, which has no way to type an answer; proceed with your best judgement or ask in your reply)";
/// The actions of a proposed plan without choices.
const ACCEPT: &str = "Accept";
const REJECT: &str = "Reject";

fn send_answer(shared: &Shared, request_id: String, answer: String) {
    let Some(handle) = lock(&shared.handle).clone() else {
        return;
    };
    handle.send(Op::Answer {
        request_id,
        answer,
        reply: Box::new(|result| {
            if let Err(e) = result {
                tracing::debug!("answer not applied: {e}");
            }
        }),
    });
}
