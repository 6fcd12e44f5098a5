//! The terminal face: `tandem run "prompt"` plays one turn headless and prints it readably.
//!
//! It drives the same session actor as the JSON-RPC face. Approvals and questions are asked on
//! the terminal; when stdin is not a terminal nobody can answer, so approvals are denied (the
//! default) unless `--yes` was given.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the terminal face: printing the turn to the terminal is its job (tandem run has no protocol on stdout)"
)]

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::mpsc;

use crate::config::Config;
use crate::engine::history::Part;
use crate::engine::EngineContext;
use crate::protocol::{Decision, Event, Mode, ToolStatus, TurnEndReason};
use crate::session::{self, EventSink, NewSession, Op};
use crate::workspace::Workspace;

pub struct RunOptions {
    pub prompt: String,
    pub cwd: PathBuf,
    pub model: Option<String>,
    pub mode: Mode,
    pub auto_approve: bool,
}

struct ChannelSink {
    tx: mpsc::UnboundedSender<Event>,
}

impl EventSink for ChannelSink {
    fn emit(&self, _session_id: &str, _seq: u64, _turn_id: Option<&str>, event: &Event) {
        let _ = self.tx.send(event.clone());
    }
}

fn colour(enabled: bool, code: &str, text: &str) -> String {
    if enabled {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

async fn read_line(prompt: String) -> Option<String> {
    tokio::task::spawn_blocking(move || {
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim().to_owned()),
        }
    })
    .await
    .ok()
    .flatten()
}

/// Run one turn; the exit code is 0 when the turn completed.
pub async fn run(config: Config, options: RunOptions) -> anyhow::Result<u8> {
    let model = options
        .model
        .clone()
        .unwrap_or_else(|| config.default_model.clone());
    if config.model(&model).is_none() {
        anyhow::bail!(
            "unknown model `{model}`; the config defines: {}",
            config.models.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    // A terminal run keeps no store, but its config file is still the user's, not the agent's.
    let own_files = crate::workspace::protected::OwnFiles::new(config.source_path.as_deref(), None);
    let cwd = options.cwd.clone();
    let protecting = own_files.clone();
    let workspace =
        tokio::task::spawn_blocking(move || Workspace::open_protecting(vec![cwd], protecting))
            .await?
            .with_context(|| format!("cannot open the workspace {}", options.cwd.display()))?;
    let interactive = std::io::stdin().is_terminal();
    let engine = EngineContext::new(config, own_files);
    engine.set_client_can_answer(interactive || options.auto_approve);
    let (tx, mut events) = mpsc::unbounded_channel();
    // The config's MCP servers; a terminal run has no store, so no workspace server is trusted.
    let mcp = session::mcp::build_hub(&engine, None, &workspace, &[]).await;
    let handle = session::spawn(
        engine,
        Arc::new(ChannelSink { tx: tx.clone() }),
        NewSession {
            workspace,
            model: model.clone(),
            mode: options.mode,
            // A one-shot terminal run is not persisted; `tandem serve` sessions are.
            store: None,
            client_fs: None,
            mcp,
        },
    );
    handle.start_mcp_servers();
    let color = std::io::stdout().is_terminal();
    handle.send(Op::Prompt {
        parts: vec![Part::Text {
            text: options.prompt.clone(),
        }],
        // A built-in slash command (`/status`) answers without a turn: show its output and end
        // as a turn would. A refused prompt says why.
        reply: Box::new(move |result| {
            let ended = |error: Option<crate::protocol::TurnError>| Event::TurnEnded {
                reason: if error.is_some() {
                    TurnEndReason::Error
                } else {
                    TurnEndReason::Completed
                },
                error,
            };
            match result {
                Ok(crate::session::PromptOutcome::Command { output, .. }) => {
                    println!("{output}");
                    let _ = tx.send(ended(None));
                }
                Ok(crate::session::PromptOutcome::Turn { .. }) => {}
                Err(e) => {
                    let _ = tx.send(ended(Some(crate::protocol::TurnError {
                        message: e.to_string(),
                        retriable: false,
                    })));
                }
            }
        }),
    });
    if !interactive && !options.auto_approve {
        eprintln!(
            "{}",
            colour(
                color,
                "2",
                "(stdin is not a terminal: approvals will be denied by default; pass --yes to approve them)"
            )
        );
    }
    let mut out = std::io::stdout();
    let mut mid_line = false;
    let mut code = 1u8;
    while let Some(event) = events.recv().await {
        match event {
            Event::TurnStarted { model, .. } => {
                println!(
                    "{}",
                    colour(color, "2", &format!("── turn started on {model}"))
                );
            }
            Event::AssistantDelta { text } => {
                print!("{text}");
                mid_line = !text.ends_with('\n');
                let _ = out.flush();
            }
            Event::ReasoningDelta { text } => {
                print!("{}", colour(color, "2;3", &text));
                let _ = out.flush();
            }
            Event::AssistantMessage { .. } => {
                if mid_line {
                    println!();
                    mid_line = false;
                }
            }
            Event::ToolCall { title, .. } => {
                println!("{} {title}", colour(color, "36", "▸"));
            }
            Event::ApprovalRequested {
                request_id,
                title,
                reason,
                diff,
                command,
                cwd,
                options: choices,
                ..
            } => {
                println!("{} {title}: {reason}", colour(color, "33", "? approval"));
                for d in diff.iter().flatten() {
                    for line in d.unified.lines() {
                        let code = match line.chars().next() {
                            Some('+') => "32",
                            Some('-') => "31",
                            Some('@') => "36",
                            _ => "0",
                        };
                        println!("    {}", colour(color, code, line));
                    }
                }
                if let (Some(command), Some(cwd)) = (&command, &cwd) {
                    println!("    $ {command}    (in {cwd})");
                }
                let (decision, message) = if options.auto_approve {
                    println!("    approved by --yes");
                    (Decision::Once, None)
                } else {
                    let has_command = choices
                        .iter()
                        .any(|c| c.decision == Decision::AlwaysCommand);
                    let menu = if has_command {
                        "    [y] allow once  [a] always this tool  [c] always this command  [n] deny > "
                    } else {
                        "    [y] allow once  [a] always this tool  [n] deny > "
                    };
                    match read_line(menu.to_owned()).await.as_deref() {
                        Some("y") | Some("yes") => (Decision::Once, None),
                        Some("a") => (Decision::AlwaysTool, None),
                        Some("c") if has_command => (Decision::AlwaysCommand, None),
                        Some(_) => {
                            let why =
                                read_line("    reason for the model (optional) > ".to_owned())
                                    .await;
                            (Decision::Deny, why.filter(|w| !w.is_empty()))
                        }
                        None => (Decision::Deny, None),
                    }
                };
                handle.send(Op::Approve {
                    request_id,
                    decision,
                    message,
                    edited_content: None,
                    arguments_digest: None,
                    deny_memory: session::DenyMemory::ThisCallOnly,
                    reply: Box::new(|_| {}),
                });
            }
            Event::ApprovalResolved { decision, .. } => {
                println!("{}", colour(color, "2", &format!("    → {decision:?}")));
            }
            Event::QuestionAsked {
                request_id,
                question,
                choices,
                plan,
                ..
            } => {
                if let Some(plan) = &plan {
                    println!("{}\n{plan}", colour(color, "35", "plan:"));
                }
                let mut prompt = format!("{} {question}", colour(color, "35", "?"));
                if let Some(choices) = &choices {
                    prompt.push_str(&format!(" [{}]", choices.join("/")));
                }
                prompt.push_str(" > ");
                let answer = if options.auto_approve && !interactive {
                    choices
                        .as_ref()
                        .and_then(|c| c.first().cloned())
                        .unwrap_or_else(|| "(no answer: running unattended)".to_owned())
                } else {
                    read_line(prompt)
                        .await
                        .unwrap_or_else(|| "(no answer)".to_owned())
                };
                handle.send(Op::Answer {
                    request_id,
                    answer,
                    reply: Box::new(|_| {}),
                });
            }
            Event::ToolCallUpdate {
                status,
                output,
                result,
                ..
            } => {
                if let Some(output) = output {
                    print!("{}", colour(color, "2", &output));
                    let _ = out.flush();
                }
                if status != ToolStatus::Running {
                    let first = result
                        .as_deref()
                        .and_then(|r| r.lines().next())
                        .unwrap_or_default()
                        .to_owned();
                    let tag = match status {
                        ToolStatus::Completed => colour(color, "32", "  ✓"),
                        ToolStatus::Denied => colour(color, "33", "  ✗ denied"),
                        ToolStatus::Interrupted => colour(color, "33", "  ✗ interrupted"),
                        _ => colour(color, "31", "  ✗"),
                    };
                    println!("{tag} {first}");
                }
            }
            Event::SteeringApplied { text } => println!("(steering: {text})"),
            Event::Compacting { .. } => println!("{}", colour(color, "2", "(compacting history…)")),
            Event::Compacted { .. } => println!("{}", colour(color, "2", "(history compacted)")),
            Event::ModelSwitched { from, to, .. } => println!("(model {from} → {to})"),
            Event::Notice { kind, text } => {
                println!("{}", colour(color, "33", &format!("[{kind:?}] {text}")));
            }
            // A server that cannot serve is worth a line; the others are routine.
            Event::McpStatus {
                server,
                status,
                error: Some(error),
                ..
            } => {
                println!(
                    "{}",
                    colour(color, "33", &format!("[mcp {server}: {status:?}] {error}"))
                );
            }
            Event::McpStatus { .. } => {}
            Event::HookRan {
                event,
                command,
                exit_code,
                duration_ms,
                blocked,
                ..
            } => {
                let ended = exit_code.map_or("no exit code".to_owned(), |c| format!("exit {c}"));
                let what = if blocked { ", blocked" } else { "" };
                println!(
                    "{}",
                    colour(
                        color,
                        "2",
                        &format!("    (hook {event} `{command}`: {ended}, {duration_ms} ms{what})")
                    )
                );
            }
            Event::Usage {
                model,
                input_tokens,
                output_tokens,
                ..
            } => {
                println!(
                    "{}",
                    colour(
                        color,
                        "2",
                        &format!("    ({model}: {input_tokens} in, {output_tokens} out)")
                    )
                );
            }
            // Made by the native face for a client that does not read; the engine never sends it.
            Event::StreamTruncated { .. } | Event::Rewound { .. } => {}
            Event::Plan { entries } => {
                for entry in entries {
                    let mark = match entry.status {
                        crate::protocol::PlanStatus::Completed => "[x]",
                        crate::protocol::PlanStatus::InProgress => "[~]",
                        crate::protocol::PlanStatus::Pending => "[ ]",
                    };
                    println!(
                        "{}",
                        colour(color, "2", &format!("{mark} {}", entry.content))
                    );
                }
            }
            Event::TurnEnded { reason, error } => {
                if mid_line {
                    println!();
                }
                let text = match &error {
                    Some(e) => format!("── turn ended: {reason:?}: {}", e.message),
                    None => format!("── turn ended: {reason:?}"),
                };
                println!("{}", colour(color, "2", &text));
                code = if reason == TurnEndReason::Completed {
                    0
                } else {
                    1
                };
                break;
            }
        }
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    handle.send(Op::Shutdown {
        reply: Box::new(move |_| {
            let _ = tx.send(());
        }),
    });
    let _ = rx.await;
    Ok(code)
}
