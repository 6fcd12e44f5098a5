//! Starting a stdio MCP server: under the guard (`tandem mcp-guard`, see [`super::guard`]) in a
//! session (and process group) of its own, with a minimal environment, its stderr kept as a
//! bounded tail for status messages.
//!
//! Invariants: the server gets `PATH`, `HOME` and `LANG` from tandem's environment, the
//! variables its definition names in `env_vars` (never a provider's API key variable), and its
//! literal `env`, nothing else; it has no controlling terminal; everything it started ends when
//! its [`StdioProcess`] is dropped or [`StdioProcess::kill`] runs (the guard gets SIGTERM and
//! kills its whole subtree), and when tandem dies first (the guard's `PR_SET_PDEATHSIG`); its
//! stderr never holds more than [`STDERR_TAIL_BYTES`] in memory.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::config::mcp::{McpServerConfig, McpTransport};

/// How much of a server's stderr is kept for status messages.
pub const STDERR_TAIL_BYTES: usize = 2048;

/// The variables of tandem's own environment every stdio server gets.
pub const BASE_ENV: &[&str] = &["PATH", "HOME", "LANG"];

/// The last [`STDERR_TAIL_BYTES`] a server wrote to stderr.
#[derive(Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<u8>>>);

impl StderrTail {
    fn push(&self, bytes: &[u8]) {
        let mut tail = self.0.lock().unwrap_or_else(|p| p.into_inner());
        tail.extend(bytes);
        let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
        tail.drain(..excess);
    }

    /// The tail as text, trimmed; empty when the server wrote nothing.
    pub fn text(&self) -> String {
        let tail = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (a, b) = tail.as_slices();
        let mut bytes = a.to_vec();
        bytes.extend_from_slice(b);
        String::from_utf8_lossy(&bytes).trim().to_owned()
    }
}

/// How long the guard gets to end the server's subtree before its group is killed outright.
const GUARD_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// A running stdio server process (the guard, with the server below it).
pub struct StdioProcess {
    child: Child,
    /// The guard's pid, which is also its process group's.
    group: Option<i32>,
    pub stderr: StderrTail,
    /// The task reading stderr into the tail; done at the pipe's end.
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
}

impl StdioProcess {
    /// End the server and everything it started, and reap the guard.
    pub async fn kill(&mut self) {
        self.signal(rustix::process::Signal::TERM);
        if tokio::time::timeout(GUARD_PATIENCE, self.child.wait())
            .await
            .is_err()
        {
            self.signal_group(rustix::process::Signal::KILL);
            let _ = self.child.kill().await;
        }
    }

    /// Wait until stderr's last bytes are in the tail (the pipe ended), at most `patience`:
    /// the tail of a server that just died explains why.
    pub async fn drain_stderr(&mut self, patience: std::time::Duration) {
        if let Some(reader) = self.stderr_reader.take() {
            let _ = tokio::time::timeout(patience, reader).await;
        }
    }

    /// Signal the guard alone: on SIGTERM it kills its whole subtree, then exits.
    fn signal(&self, signal: rustix::process::Signal) {
        if let Some(pid) = self.group.and_then(rustix::process::Pid::from_raw) {
            // The guard may be gone already; that is the outcome wanted.
            let _ = rustix::process::kill_process(pid, signal);
        }
    }

    fn signal_group(&self, signal: rustix::process::Signal) {
        if let Some(pid) = self.group.and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process_group(pid, signal);
        }
    }

    /// The exit status, once the child has exited; `None` while it runs.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Wait for the child to exit.
    pub async fn wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.wait().await.ok()
    }
}

impl Drop for StdioProcess {
    fn drop(&mut self) {
        // Not SIGKILL: the guard must live long enough to end the subtree below it. The
        // guard is reaped by tokio's orphan queue.
        if matches!(self.child.try_wait(), Ok(None)) {
            self.signal(rustix::process::Signal::TERM);
        }
    }
}

/// The environment of a stdio server (see the module's invariants), from `source`.
pub fn server_environment(
    source: impl IntoIterator<Item = (OsString, OsString)>,
    env_vars: &[String],
    env: &std::collections::BTreeMap<String, String>,
    never: &[String],
) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = source
        .into_iter()
        .filter(|(name, _)| {
            let Some(name) = name.to_str() else {
                return false;
            };
            !never.iter().any(|n| n == name)
                && (BASE_ENV.contains(&name) || env_vars.iter().any(|n| n == name))
        })
        .collect();
    for (name, value) in env {
        out.retain(|(n, _)| n.to_str() != Some(name.as_str()));
        out.push((OsString::from(name), OsString::from(value)));
    }
    out
}

/// Start `config`'s command in `cwd`. `never` names the variables that hold provider keys.
pub fn spawn(
    config: &McpServerConfig,
    cwd: &Path,
    never: &[String],
) -> Result<(StdioProcess, ChildStdout, ChildStdin), String> {
    let McpTransport::Stdio {
        command,
        args,
        env,
        env_vars,
    } = &config.transport
    else {
        return Err("not a stdio server".to_owned());
    };
    // The guard is this very binary (like the sandbox's Landlock helper).
    let guard = std::env::current_exe()
        .map_err(|e| format!("cannot find the tandem binary to start `{command}` under: {e}"))?;
    let mut process = tokio::process::Command::new(guard);
    process
        .arg(super::guard::SUBCOMMAND)
        .arg("--")
        .arg(command)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(server_environment(
            std::env::vars_os(),
            env_vars,
            env,
            never,
        ))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the forked child before exec and makes only the `setsid`,
    // `prctl` and `getppid` system calls, which are async-signal-safe and allocate nothing.
    unsafe {
        process.pre_exec(move || {
            // A session of its own: a process group to kill as a whole, no controlling terminal.
            rustix::process::setsid().map_err(std::io::Error::from)?;
            // SIGTERM when the thread that spawned it ends (a runtime worker, alive as long as
            // tandem): the guard then ends the server's subtree, so a killed tandem leaves
            // nothing behind.
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))
                .map_err(std::io::Error::from)?;
            // tandem died between the fork and the prctl: no signal will come, so do not start.
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::Error::other(
                    "tandem ended while the server started",
                ));
            }
            Ok(())
        });
    }
    let mut child = process
        .spawn()
        .map_err(|e| format!("cannot start the guard of `{command}`: {e}"))?;
    let group = child.id().and_then(|id| i32::try_from(id).ok());
    let (Some(stdout), Some(stdin), Some(mut stderr)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return Err(format!("`{command}` started without its pipes"));
    };
    let tail = StderrTail::default();
    let writer = tail.clone();
    let reader = tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        loop {
            match stderr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => writer.push(&buf[..n]),
            }
        }
    });
    Ok((
        StdioProcess {
            child,
            group,
            stderr: tail,
            stderr_reader: Some(reader),
        },
        stdout,
        stdin,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_the_base_the_named_variables_and_the_literals() {
        let source = [
            ("PATH", "/bin"),
            ("HOME", "/home/u"),
            ("LANG", "C.UTF-8"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("GITHUB_TOKEN", "ghp"),
            ("UNRELATED", "x"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let env = std::collections::BTreeMap::from([("LOG".to_owned(), "warn".to_owned())]);
        let named = vec!["GITHUB_TOKEN".to_owned(), "OPENAI_API_KEY".to_owned()];
        let got = server_environment(source, &named, &env, &["OPENAI_API_KEY".to_owned()]);
        let names: Vec<&str> = got.iter().filter_map(|(k, _)| k.to_str()).collect();
        assert_eq!(names, vec!["PATH", "HOME", "LANG", "GITHUB_TOKEN", "LOG"]);
    }

    #[test]
    fn the_stderr_tail_is_bounded() {
        let tail = StderrTail::default();
        tail.push(&vec![b'a'; 5000]);
        tail.push(b"the end");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL_BYTES);
        assert!(text.ends_with("the end"));
    }
}
