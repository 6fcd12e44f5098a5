//! `tandem mcp-guard -- program args…`: the parent of every stdio MCP server, so that nothing
//! the server starts outlives it, tandem, or the session.
//!
//! Why a guard: a server is often a launcher (`npx` → `node`, `uvx` → `python`, `sh -c`), and
//! the process tandem spawns is not the one that serves. `PR_SET_PDEATHSIG` reaches only the
//! direct child, and a killed tandem (`kill -9`, OOM) runs no cleanup, so a grandchild would be
//! orphaned and live on, holding the workspace and its stdin. The guard is tandem's direct
//! child (in a session of its own, with SIGTERM as its parent-death signal) and a child
//! subreaper: every process below it stays its descendant, even one that daemonizes.
//!
//! Invariants: the guard forwards nothing itself (the server inherits its stdin, stdout and
//! stderr, so the protocol bytes never pass through it); it ends every descendant
//! ([`crate::tools::process_tree::kill_descendants`]) when the server exits, when it gets
//! SIGTERM, SIGINT or SIGHUP (tandem closing the server, or the kernel telling it tandem died),
//! and exits with the server's code (128 + the signal for a server killed by one).

use std::ffi::OsString;

/// The hidden subcommand's name.
pub const SUBCOMMAND: &str = "mcp-guard";

/// Exit code when the server could not be started or supervised at all.
pub const CANNOT_START: i32 = 127;

/// Run `program` under the guard; returns the exit code for the guard process.
#[allow(
    clippy::print_stderr,
    reason = "runs in the guard process, whose stderr is the server's stderr: tandem keeps its tail for the server's status"
)]
pub fn run(program: &[OsString]) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    use tokio::signal::unix::{signal, SignalKind};

    let Some((first, rest)) = program.split_first() else {
        eprintln!("tandem mcp-guard: no program given after `--`");
        return CANNOT_START;
    };
    if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        eprintln!("tandem mcp-guard: cannot supervise the server ({e}), so it did not start");
        return CANNOT_START;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tandem mcp-guard: cannot supervise the server ({e}), so it did not start");
            return CANNOT_START;
        }
    };
    let outcome = runtime.block_on(async {
        let (Ok(mut interrupt), Ok(mut terminate), Ok(mut hangup)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            return Err("cannot handle signals".to_owned());
        };
        let mut command = tokio::process::Command::new(first);
        command.args(rest);
        // SAFETY: the closure runs in the forked child before exec and makes one `prctl`
        // system call, which is async-signal-safe and allocates nothing.
        unsafe {
            command.pre_exec(|| {
                // Should the guard itself be killed (SIGKILL cannot be handled), the server
                // still dies with it.
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(std::io::Error::from)
            });
        }
        let mut child = command.spawn().map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                "; check `command` (is the program installed and on PATH?)"
            } else {
                ""
            };
            format!("cannot start `{}`: {e}{hint}", first.to_string_lossy())
        })?;
        tokio::select! {
            status = child.wait() => status.map(Some).map_err(|e| e.to_string()),
            _ = interrupt.recv() => Ok(None),
            _ = terminate.recv() => Ok(None),
            _ = hangup.recv() => Ok(None),
        }
    });
    // Whatever ended the wait, nothing below the guard outlives it.
    crate::tools::process_tree::kill_descendants();
    match outcome {
        Ok(Some(status)) => status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(1),
        Ok(None) => 128 + 15,
        Err(e) => {
            eprintln!("tandem mcp-guard: {e}");
            CANNOT_START
        }
    }
}
