//! Running one hook command and reading its answer.
//!
//! The command runs through `/bin/sh -c` outside the command sandbox (the user wrote it, as in
//! Claude Code), with the workspace root as its working directory, the event's JSON on stdin,
//! tandem's environment minus the providers' API key variables, and `TANDEM_PROJECT_DIR` and
//! `CLAUDE_PROJECT_DIR` set to the root. It leads a process group of its own; at its timeout,
//! when it exits, and when the turn that waits for it is stopped, the whole group is killed, so
//! nothing it started outlives it.
//!
//! Invariants: memory stays bounded (each stream keeps at most [`MAX_OUTPUT_BYTES`]); the call
//! returns within the hook's timeout plus a short grace for the pipes; nothing here blocks the
//! async runtime.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::{Hook, HookEvent};

/// The most bytes of a hook's stdout, and of its stderr, that are kept.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// How long the pipes may stay open after the hook's process group was killed (a process that
/// left the group can hold them).
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// Why a hook produced no usable exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookFailure {
    /// It could not be started.
    Spawn(String),
    /// It ran past its timeout and was killed with its process group.
    Timeout(Duration),
    /// A signal ended it.
    Signal(i32),
}

/// What one run of a hook gave.
#[derive(Debug, Clone)]
pub struct HookRun {
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub duration: Duration,
    pub failure: Option<HookFailure>,
}

/// The environment of hook processes.
#[derive(Debug, Clone, Default)]
pub struct HookEnvironment {
    /// Variables removed (the providers' API key variables).
    pub removed: Vec<String>,
    /// Variables set.
    pub set: Vec<(String, String)>,
}

/// Kills a hook's process group when dropped (the hook finished, timed out, or the future
/// awaiting it was dropped because the turn stopped).
struct GroupGuard(Option<rustix::process::Pid>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.0.take() {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}

/// Run `hook` with `input` on its stdin in `cwd`.
pub async fn run(hook: &Hook, input: &Value, cwd: &Path, environment: &HookEnvironment) -> HookRun {
    let started = Instant::now();
    let failed = |failure: HookFailure| HookRun {
        exit_code: None,
        stdout: String::new(),
        stderr: String::new(),
        duration: started.elapsed(),
        failure: Some(failure),
    };
    let mut command = tokio::process::Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(&hook.command)
        .current_dir(cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for name in &environment.removed {
        command.env_remove(name);
    }
    for (name, value) in &environment.set {
        command.env(name, value);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return failed(HookFailure::Spawn(e.to_string())),
    };
    let _guard = GroupGuard(
        child
            .id()
            .and_then(|id| rustix::process::Pid::from_raw(id as i32)),
    );
    let bytes = serde_json::to_vec(input).unwrap_or_default();
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that never reads its stdin must not block on a full pipe, nor this on it.
        tokio::spawn(async move {
            let _ = stdin.write_all(&bytes).await;
        });
    }
    let stdout = child.stdout.take().map(|s| tokio::spawn(read_capped(s)));
    let stderr = child.stderr.take().map(|s| tokio::spawn(read_capped(s)));
    let waited = tokio::time::timeout(hook.timeout, child.wait()).await;
    // The group goes now, whatever happened: what the hook left running must not hold its
    // pipes open or outlive it.
    drop(_guard);
    let (exit_code, failure) = match waited {
        Err(_) => {
            let _ = child.kill().await;
            (None, Some(HookFailure::Timeout(hook.timeout)))
        }
        Ok(Err(e)) => (None, Some(HookFailure::Spawn(e.to_string()))),
        Ok(Ok(status)) => match status.code() {
            Some(code) => (Some(code), None),
            None => {
                use std::os::unix::process::ExitStatusExt;
                (
                    None,
                    Some(HookFailure::Signal(status.signal().unwrap_or(0))),
                )
            }
        },
    };
    let collect = |handle: Option<tokio::task::JoinHandle<String>>| async move {
        match handle {
            Some(handle) => tokio::time::timeout(PIPE_GRACE, handle)
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default(),
            None => String::new(),
        }
    };
    let (stdout, stderr) = tokio::join!(collect(stdout), collect(stderr));
    HookRun {
        exit_code,
        stdout,
        stderr,
        duration: started.elapsed(),
        failure,
    }
}

/// Read `stream` to its end, keeping its first [`MAX_OUTPUT_BYTES`] (lossy UTF-8).
async fn read_capped(mut stream: impl AsyncRead + Unpin) -> String {
    let mut kept = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = MAX_OUTPUT_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// What a hook's run asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookAnswer {
    /// Go on; `context` is text for the model (plain stdout of `SessionStart` and
    /// `UserPromptSubmit`, or `additionalContext`).
    Proceed { context: Option<String> },
    /// Exit 2, `decision: "block"`, `continue: false` or `permissionDecision: "deny"`.
    Block { reason: String },
    /// `permissionDecision: "allow"` (or the older `decision: "approve"`).
    Allow { reason: Option<String> },
    /// `permissionDecision: "ask"`.
    Ask { reason: Option<String> },
    /// It could not run, timed out, crashed, exited with another code or answered bad JSON.
    Failed { why: String },
}

/// Read the answer of `run`, a hook of `event`.
pub fn interpret(event: HookEvent, run: &HookRun) -> HookAnswer {
    if let Some(failure) = &run.failure {
        let why = match failure {
            HookFailure::Spawn(e) => format!("it could not be started ({e})"),
            HookFailure::Timeout(t) => format!(
                "it ran past its timeout of {} s and was killed with its process group",
                t.as_secs_f64()
            ),
            HookFailure::Signal(s) => format!("signal {s} ended it"),
        };
        return HookAnswer::Failed { why };
    }
    match run.exit_code {
        Some(2) => HookAnswer::Block {
            reason: reason_or_default(&run.stderr),
        },
        Some(0) => {
            let out = run.stdout.trim();
            if out.starts_with('{') {
                match serde_json::from_str::<Value>(out) {
                    Ok(value) => json_answer(event, &value),
                    Err(e) => HookAnswer::Failed {
                        why: format!("its output starts like JSON but is not valid JSON ({e})"),
                    },
                }
            } else {
                let context =
                    matches!(event, HookEvent::SessionStart | HookEvent::UserPromptSubmit)
                        && !out.is_empty();
                HookAnswer::Proceed {
                    context: context.then(|| out.to_owned()),
                }
            }
        }
        code => HookAnswer::Failed {
            why: format!(
                "it exited with code {}{}",
                code.map_or("?".to_owned(), |c| c.to_string()),
                tail(&run.stderr)
                    .map(|t| format!(": {t}"))
                    .unwrap_or_default()
            ),
        },
    }
}

fn json_answer(event: HookEvent, value: &Value) -> HookAnswer {
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let specific = value.get("hookSpecificOutput");
    let context = text(specific.and_then(|s| s.get("additionalContext")));
    if value.get("continue") == Some(&Value::Bool(false)) {
        return HookAnswer::Block {
            reason: text(value.get("stopReason"))
                .or_else(|| text(value.get("reason")))
                .unwrap_or_else(|| "the hook said not to continue".to_owned()),
        };
    }
    if let Some(decision) = specific
        .and_then(|s| s.get("permissionDecision"))
        .and_then(Value::as_str)
    {
        let reason = text(specific.and_then(|s| s.get("permissionDecisionReason")));
        match decision {
            "deny" => {
                return HookAnswer::Block {
                    reason: reason.unwrap_or_else(|| "the hook denied it".to_owned()),
                }
            }
            "allow" => return HookAnswer::Allow { reason },
            "ask" => return HookAnswer::Ask { reason },
            _ => {}
        }
    }
    match value.get("decision").and_then(Value::as_str) {
        Some("block") => HookAnswer::Block {
            reason: text(value.get("reason")).unwrap_or_else(|| "the hook blocked it".to_owned()),
        },
        Some("approve") if event == HookEvent::PreToolUse => HookAnswer::Allow {
            reason: text(value.get("reason")),
        },
        _ => HookAnswer::Proceed { context },
    }
}

fn reason_or_default(stderr: &str) -> String {
    let trimmed = stderr.trim();
    if trimmed.is_empty() {
        "the hook exited with code 2 and gave no reason on stderr".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// The last lines of `text`, at most 500 characters, if any.
fn tail(text: &str) -> Option<String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return None;
    }
    let chars: Vec<char> = trimmed.chars().collect();
    let start = chars.len().saturating_sub(500);
    Some(chars[start..].iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(code: Option<i32>, stdout: &str, stderr: &str) -> HookRun {
        HookRun {
            exit_code: code,
            stdout: stdout.into(),
            stderr: stderr.into(),
            duration: Duration::ZERO,
            failure: None,
        }
    }

    #[test]
    fn exit_codes_and_json_forms() {
        use HookEvent::*;
        assert_eq!(
            interpret(PreToolUse, &ran(Some(2), "", "no rm\n")),
            HookAnswer::Block {
                reason: "no rm".into()
            }
        );
        assert_eq!(
            interpret(UserPromptSubmit, &ran(Some(0), "today is Monday\n", "")),
            HookAnswer::Proceed {
                context: Some("today is Monday".into())
            }
        );
        assert_eq!(
            interpret(PreToolUse, &ran(Some(0), "plain", "")),
            HookAnswer::Proceed { context: None }
        );
        assert!(matches!(
            interpret(PreToolUse, &ran(Some(1), "", "boom")),
            HookAnswer::Failed { why } if why.contains("code 1: boom")
        ));
        assert!(matches!(
            interpret(PreToolUse, &ran(Some(0), "{not json", "")),
            HookAnswer::Failed { .. }
        ));
        let json = |s: &str| interpret(PreToolUse, &ran(Some(0), s, ""));
        assert_eq!(
            json(
                r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"not here"}}"#
            ),
            HookAnswer::Block {
                reason: "not here".into()
            }
        );
        assert_eq!(
            json(r#"{"hookSpecificOutput":{"permissionDecision":"allow"}}"#),
            HookAnswer::Allow { reason: None }
        );
        assert_eq!(
            json(
                r#"{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"look"}}"#
            ),
            HookAnswer::Ask {
                reason: Some("look".into())
            }
        );
        assert_eq!(
            json(r#"{"decision":"block","reason":"tests fail"}"#),
            HookAnswer::Block {
                reason: "tests fail".into()
            }
        );
        assert_eq!(
            interpret(
                SessionStart,
                &ran(
                    Some(0),
                    r#"{"hookSpecificOutput":{"additionalContext":"ctx"}}"#,
                    ""
                )
            ),
            HookAnswer::Proceed {
                context: Some("ctx".into())
            }
        );
        let mut timed_out = ran(None, "", "");
        timed_out.failure = Some(HookFailure::Timeout(Duration::from_secs(1)));
        assert!(
            matches!(interpret(Stop, &timed_out), HookAnswer::Failed { why } if why.contains("timeout"))
        );
    }
}
