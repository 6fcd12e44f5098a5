//! The shell tool: runs one command line in its own process group, streams its output, and
//! stops it on request (SIGINT to the group, then SIGKILL after a grace period).
//!
//! The command gets its own session (and so its own process group) so that a stop reaches every
//! process it started (`make` and its compilers, a test runner and its workers), not only the
//! shell, and so that it has no controlling terminal: a command run from `tandem run` in the
//! user's terminal must not be able to push keystrokes into it with `TIOCSTI` (the user's shell
//! would run them after tandem exits). Its stdin is `/dev/null`, never a terminal.
//!
//! It also gets a minimal environment ([`command_environment`]): tandem's own environment holds
//! provider API keys and whatever tokens the user exported, and a command the model wrote must
//! not be able to print them back to the model.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use rustix::process::{kill_process_group, Pid, Signal};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The longest a model may ask a command to run.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// How much output the model sees: the head and the tail, with a note in between.
const HEAD_BYTES: usize = 8 * 1024;
const TAIL_BYTES: usize = 24 * 1024;

pub struct ShellRequest {
    pub command: String,
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// Time between SIGINT and SIGKILL when the command is stopped or times out.
    pub kill_grace: Duration,
    /// How to confine the command (bubblewrap, Landlock or both); `None` runs it unconfined
    /// (the engine then asks the user for every command).
    pub sandbox: Option<super::sandbox::Confinement>,
    /// The command's whole environment (see [`command_environment`]); nothing else is inherited.
    pub env: Vec<(OsString, OsString)>,
    /// The most processes the command may have at once, enforced by a pids cgroup where one can
    /// be made (see `tools::cgroup`); `None` makes none.
    pub max_processes: Option<u64>,
}

/// Variables a command inherits from tandem's environment by default: what tools need to find
/// programs, speak the user's language and format output. Everything else (API keys, tokens,
/// `SSH_AUTH_SOCK`, `DBUS_SESSION_BUS_ADDRESS`) is dropped unless the user names it in the
/// config's `shell_env`.
pub const INHERITED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "TMPDIR",
];

/// The environment of a command: the [`INHERITED_ENV`] variables and every `LC_*` one, plus
/// the `extra` names the user allowed, taken from `source`; a name in `never` (the variables
/// that hold provider API keys) is dropped even if `extra` lists it.
pub fn command_environment(
    source: impl IntoIterator<Item = (OsString, OsString)>,
    extra: &[String],
    never: &[String],
) -> Vec<(OsString, OsString)> {
    source
        .into_iter()
        .filter(|(name, _)| {
            let Some(name) = name.to_str() else {
                return false;
            };
            if never.iter().any(|n| n == name) {
                return false;
            }
            INHERITED_ENV.contains(&name)
                || name.starts_with("LC_")
                || extra.iter().any(|n| n == name)
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShellEnd {
    Exited(i32),
    Signalled(i32),
    TimedOut,
    Interrupted,
    FailedToStart(String),
}

#[derive(Debug, Clone)]
pub struct ShellResult {
    pub end: ShellEnd,
    /// Combined stdout and stderr, capped for the model.
    pub output: String,
}

impl ShellResult {
    /// The text the model sees.
    pub fn model_text(&self, timeout: Duration) -> String {
        let status = match &self.end {
            ShellEnd::Exited(code) => format!("exit code {code}"),
            ShellEnd::Signalled(sig) => format!("killed by signal {sig}"),
            ShellEnd::TimedOut => format!(
                "timed out after {} ms and was killed; pass a larger timeout_ms if it needs longer",
                timeout.as_millis()
            ),
            ShellEnd::Interrupted => "interrupted by user".to_owned(),
            ShellEnd::FailedToStart(e) => return format!("the command could not start: {e}"),
        };
        if self.output.is_empty() {
            format!("{status}\n(no output)")
        } else {
            format!("{status}\n{}", self.output)
        }
    }

    pub fn is_success(&self) -> bool {
        self.end == ShellEnd::Exited(0)
    }
}

/// Keeps the head and tail of a long output without holding all of it.
struct CappedOutput {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    dropped: usize,
}

impl CappedOutput {
    fn new() -> Self {
        CappedOutput {
            head: Vec::new(),
            tail: Default::default(),
            dropped: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < HEAD_BYTES {
            let take = bytes.len().min(HEAD_BYTES - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        while self.tail.len() > TAIL_BYTES {
            self.tail.pop_front();
            self.dropped += 1;
        }
    }

    fn finish(self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.dropped > 0 {
            text.push_str(&format!(
                "\n… [{} bytes of output cut; rerun with a narrower command to see them] …\n",
                self.dropped
            ));
        }
        let (a, b) = self.tail.as_slices();
        let mut tail = a.to_vec();
        tail.extend_from_slice(b);
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }
}

fn shell_program() -> &'static str {
    if std::path::Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    }
}

fn signal_group(pid: Option<u32>, signal: Signal) {
    if let Some(pid) = pid.and_then(|p| Pid::from_raw(p as i32)) {
        // The group may already be gone; that is the outcome we wanted anyway.
        let _ = kill_process_group(pid, signal);
    }
}

/// What `on_output` returns when whoever shows the output cannot keep up: the command's pipes
/// are not read until it resolves, so a command that floods output blocks on its pipe (as it
/// would on a slow terminal) instead of filling memory. Stop and the timeout still apply.
pub type OutputPause = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Run the command; `on_output` receives each chunk of output as it arrives, and may ask the
/// reading to pause (see [`OutputPause`]).
pub async fn run(
    request: ShellRequest,
    cancel: &CancellationToken,
    mut on_output: impl FnMut(&str) -> Option<OutputPause>,
) -> ShellResult {
    // A private temp dir per sandboxed command, mounted as its /tmp.
    let temp = match &request.sandbox {
        Some(_) => {
            let dir =
                std::env::temp_dir().join(format!("tandem-sh-{}", uuid::Uuid::new_v4().simple()));
            if let Err(e) = tokio::fs::create_dir(&dir).await {
                return ShellResult {
                    end: ShellEnd::FailedToStart(format!(
                        "cannot create the sandbox temp dir {}: {e}",
                        dir.display()
                    )),
                    output: String::new(),
                };
            }
            Some(dir)
        }
        None => None,
    };
    let mut command = match (&request.sandbox, &temp) {
        (Some(confinement), Some(temp)) => {
            let argv = confinement.argv(
                &request.cwd,
                temp,
                shell_program(),
                &request.command,
                request.kill_grace,
            );
            let mut command = tokio::process::Command::new(&argv[0]);
            command.args(&argv[1..]);
            command
        }
        _ => {
            let mut command = tokio::process::Command::new(shell_program());
            command.arg("-c").arg(&request.command);
            command
        }
    };
    command
        .current_dir(&request.cwd)
        .env_clear()
        .envs(request.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let cgroup = match request.max_processes {
        Some(limit) => {
            match tokio::task::spawn_blocking(move || super::cgroup::CommandCgroup::create(limit))
                .await
            {
                Ok(Ok(cgroup)) => Some(cgroup),
                Ok(Err(why)) => {
                    tracing::debug!("commands run without a process cap: {why}");
                    None
                }
                Err(_) => None,
            }
        }
        None => None,
    };
    let join = cgroup
        .as_ref()
        .map(|c| std::os::fd::AsRawFd::as_raw_fd(&c.join_fd()));
    // SAFETY: the closure runs in the forked child before exec and only makes the `setsid` and
    // `write` system calls, which are async-signal-safe and allocate nothing; `join` is a
    // descriptor of the parent that stays open until the child has been spawned.
    unsafe {
        command.pre_exec(move || {
            // A new session: a new process group led by the child (so `kill_process_group`
            // reaches everything it starts) and no controlling terminal (no `TIOCSTI`).
            rustix::process::setsid().map_err(std::io::Error::from)?;
            if let Some(fd) = join {
                // Join the command's cgroup ("0" is the writing process) before anything runs.
                rustix::io::write(std::os::fd::BorrowedFd::borrow_raw(fd), b"0")
                    .map_err(std::io::Error::from)?;
            }
            Ok(())
        });
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            return ShellResult {
                end: ShellEnd::FailedToStart(format!("{e} (shell {})", shell_program())),
                output: String::new(),
            }
        }
    };
    let pid = child.id();
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    for pipe in [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
    ]
    .into_iter()
    .flatten()
    {
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut pipe = pipe;
            let mut buf = vec![0u8; 8192];
            loop {
                match pipe.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send(buf[..n].to_vec()).await.is_err() {
                            break;
                        }
                    }
                }
            }
        });
    }
    drop(tx);

    let mut output = CappedOutput::new();
    let mut emit = |bytes: &[u8], output: &mut CappedOutput| {
        output.push(bytes);
        on_output(&String::from_utf8_lossy(bytes))
    };
    let deadline = tokio::time::sleep(request.timeout);
    tokio::pin!(deadline);
    let mut pipes_open = true;
    let mut pause: Option<OutputPause> = None;
    let end = loop {
        let waiting = pause.take();
        let next_chunk = async {
            if let Some(waiting) = waiting {
                waiting.await;
            }
            rx.recv().await
        };
        tokio::select! {
            chunk = next_chunk, if pipes_open => match chunk {
                Some(bytes) => pause = emit(&bytes, &mut output),
                None => pipes_open = false,
            },
            status = child.wait() => {
                break match status {
                    Ok(status) => match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status)) {
                        (Some(code), _) => ShellEnd::Exited(code),
                        (None, Some(sig)) => ShellEnd::Signalled(sig),
                        (None, None) => ShellEnd::Exited(-1),
                    },
                    Err(e) => ShellEnd::FailedToStart(e.to_string()),
                };
            }
            _ = cancel.cancelled() => {
                stop_group(pid, &mut child, request.kill_grace).await;
                break ShellEnd::Interrupted;
            }
            _ = &mut deadline => {
                stop_group(pid, &mut child, request.kill_grace).await;
                break ShellEnd::TimedOut;
            }
        }
    };
    // Collect what the pipes still hold. A background process the command left running may
    // keep a pipe open forever, so this drain is bounded rather than waiting for EOF.
    let drain_until = tokio::time::Instant::now() + Duration::from_millis(200);
    while pipes_open {
        match tokio::time::timeout_at(drain_until, rx.recv()).await {
            // Bounded by time, so no pause here: what is left is what the pipes held.
            Ok(Some(bytes)) => drop(emit(&bytes, &mut output)),
            Ok(None) | Err(_) => pipes_open = false,
        }
    }
    if let Some(cgroup) = cgroup {
        // Whatever the command started in the background ends with it.
        let _ = tokio::task::spawn_blocking(move || cgroup.end()).await;
    }
    if let Some(temp) = temp {
        let _ = tokio::fs::remove_dir_all(&temp).await;
    }
    ShellResult {
        end,
        output: output.finish(),
    }
}

async fn stop_group(pid: Option<u32>, child: &mut tokio::process::Child, grace: Duration) {
    signal_group(pid, Signal::INT);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        signal_group(pid, Signal::KILL);
        let _ = child.wait().await;
    } else {
        // The shell exited on SIGINT, but processes it started may ignore SIGINT; make sure
        // nothing of the stopped command keeps running.
        signal_group(pid, Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(command: &str) -> ShellRequest {
        ShellRequest {
            command: command.to_owned(),
            cwd: std::env::temp_dir(),
            timeout: Duration::from_secs(10),
            kill_grace: Duration::from_millis(100),
            sandbox: None,
            env: command_environment(std::env::vars_os(), &[], &[]),
            max_processes: None,
        }
    }

    async fn sandboxed(command: &str, root: &std::path::Path) -> Option<ShellResult> {
        // The unit-test binary is not tandem, so only the bubblewrap layer is tried here;
        // tests/it/sandbox.rs drives the Landlock helper through the real binary.
        let super::super::sandbox::SandboxStatus::Bwrap { bwrap, .. } =
            super::super::sandbox::status().await
        else {
            return None;
        };
        let mut r = request(command);
        r.cwd = root.to_path_buf();
        r.sandbox = Some(super::super::sandbox::Confinement {
            policy: super::super::sandbox::SandboxPolicy {
                writable: vec![root.to_path_buf()],
                read_only: super::super::sandbox::read_only_paths(
                    &[root.to_path_buf()],
                    &Default::default(),
                ),
                hidden: Vec::new(),
                network: false,
            },
            bwrap: Some(bwrap),
            landlock: None,
        });
        Some(run(r, &CancellationToken::new(), |_| None).await)
    }

    #[tokio::test]
    async fn the_sandbox_confines_writes_and_network() {
        let Some(_) = sandboxed("true", &std::env::temp_dir()).await else {
            // Only where bwrap works; tests/it/security.rs asserts that CI has it.
            return;
        };
        let root =
            std::env::temp_dir().join(format!("tandem-sbx-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        // Outside the root and outside /tmp (which the sandbox replaces with a private dir).
        let outside = std::env::current_dir()
            .unwrap()
            .join("target")
            .join(format!("tandem-out-{}", uuid::Uuid::new_v4().simple()));
        let result = sandboxed(
            &format!(
                "echo ok > inside.txt; echo x > {out} 2>/dev/null || echo outside-refused; \
                 echo hook > .git/hooks/pre-commit 2>/dev/null || echo hook-refused; \
                 (exec 3<>/dev/tcp/127.0.0.1/9) 2>/dev/null && echo net-open || echo net-refused; \
                 echo $$",
                out = outside.display()
            ),
            &root,
        )
        .await
        .unwrap();
        assert!(root.join("inside.txt").exists(), "{}", result.output);
        assert!(!outside.exists());
        assert!(!root.join(".git/hooks/pre-commit").exists());
        assert!(
            result.output.contains("outside-refused"),
            "{}",
            result.output
        );
        assert!(result.output.contains("hook-refused"), "{}", result.output);
        assert!(result.output.contains("net-refused"), "{}", result.output);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[tokio::test]
    async fn runs_and_streams() {
        let mut seen = String::new();
        let result = run(
            request("echo hello; echo oops >&2; exit 3"),
            &CancellationToken::new(),
            |s| {
                seen.push_str(s);
                None
            },
        )
        .await;
        assert_eq!(result.end, ShellEnd::Exited(3));
        assert!(result.output.contains("hello") && result.output.contains("oops"));
        assert!(seen.contains("hello"));
    }

    #[tokio::test]
    async fn cancel_kills_the_group() {
        // The command ignores SIGINT and leaves a grandchild, so only SIGKILL of the whole group
        // ends it. Cancel as soon as the command has printed that it is running.
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        let started = std::time::Instant::now();
        let result = run(
            request("trap '' INT; sleep 30 & echo ready; sleep 30; wait"),
            &cancel,
            |s| {
                if s.contains("ready") {
                    trigger.cancel();
                }
                None
            },
        )
        .await;
        assert_eq!(result.end, ShellEnd::Interrupted);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn timeout_is_reported() {
        let mut r = request("sleep 5");
        r.timeout = Duration::from_millis(100);
        let result = run(r, &CancellationToken::new(), |_| None).await;
        assert_eq!(result.end, ShellEnd::TimedOut);
        assert!(result
            .model_text(Duration::from_millis(100))
            .contains("timed out"));
    }

    #[test]
    fn output_is_capped_with_a_note() {
        let mut out = CappedOutput::new();
        out.push(&vec![b'a'; HEAD_BYTES]);
        out.push(&vec![b'b'; TAIL_BYTES * 2]);
        let text = out.finish();
        assert!(text.contains("bytes of output cut"));
        assert!(text.len() < HEAD_BYTES + TAIL_BYTES + 200);
    }
}
