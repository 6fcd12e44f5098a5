//! The shell sandbox: commands run under bubblewrap with the workspace roots and a private temp
//! dir writable, everything else read-only, `.git/hooks`, `.git/config` and tandem's own files
//! read-only, no network, and their own PID namespace.
//!
//! Detection runs once per process on the blocking pool (it starts `bwrap` to prove namespaces
//! work here, since a container may forbid them). When no sandbox can be enforced the engine asks
//! for every shell command, whatever the mode, and says why.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::sync::OnceCell;

/// What the sandbox allows one command to do.
#[derive(Debug, Clone)]
pub struct SandboxPolicy {
    /// Writable: the workspace roots.
    pub writable: Vec<PathBuf>,
    /// Read-only even inside a writable root (tandem's own config and data, for example).
    pub read_only: Vec<PathBuf>,
    /// Whether the command may use the network; the user's choice, never the model's.
    pub network: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxStatus {
    /// bubblewrap at this path works here.
    Bwrap(PathBuf),
    /// No sandbox can be enforced; the text says why and what to install.
    Unavailable(String),
}

static STATUS: OnceCell<SandboxStatus> = OnceCell::const_new();

fn find_bwrap() -> Option<PathBuf> {
    let preferred = Path::new("/usr/bin/bwrap");
    if preferred.is_file() {
        return Some(preferred.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("bwrap"))
            .find(|candidate| candidate.is_file())
    })
}

fn probe() -> SandboxStatus {
    if std::env::var_os("TANDEM_DISABLE_SANDBOX").is_some() {
        return SandboxStatus::Unavailable(
            "the sandbox is disabled by TANDEM_DISABLE_SANDBOX".to_owned(),
        );
    }
    let Some(bwrap) = find_bwrap() else {
        return SandboxStatus::Unavailable(
            "bubblewrap (bwrap) is not installed; install it (Debian/Ubuntu: apt-get install bubblewrap) to let commands run sandboxed".to_owned(),
        );
    };
    let probe = std::process::Command::new(&bwrap)
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-net",
            "--unshare-pid",
            "--die-with-parent",
            "--",
            "/bin/true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Ok(output) if output.status.success() => SandboxStatus::Bwrap(bwrap),
        Ok(output) => SandboxStatus::Unavailable(format!(
            "bubblewrap cannot create namespaces here ({}); allow unprivileged user namespaces or run tandem outside this container",
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(e) => SandboxStatus::Unavailable(format!("bubblewrap could not start: {e}")),
    }
}

/// Whether commands can be sandboxed here; detected once, off the async workers.
pub async fn status() -> SandboxStatus {
    STATUS
        .get_or_init(|| async {
            tokio::task::spawn_blocking(probe)
                .await
                .unwrap_or_else(|e| {
                    SandboxStatus::Unavailable(format!("the sandbox probe crashed: {e}"))
                })
        })
        .await
        .clone()
}

/// The bwrap arguments that run `program args…` under `policy`.
pub fn bwrap_args(policy: &SandboxPolicy, cwd: &Path, temp: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--ro-bind".into(),
        "/".into(),
        "/".into(),
        "--dev".into(),
        "/dev".into(),
        "--proc".into(),
        "/proc".into(),
        // A private /tmp: what the command leaves there goes away with it.
        "--bind".into(),
        temp.display().to_string(),
        "/tmp".into(),
    ];
    for root in &policy.writable {
        args.extend([
            "--bind".into(),
            root.display().to_string(),
            root.display().to_string(),
        ]);
    }
    for root in &policy.writable {
        // Git runs hooks and reads config with the user's privileges later; the agent's
        // commands must not plant code there.
        for inner in [".git/hooks", ".git/config"] {
            let path = root.join(inner);
            args.extend([
                "--ro-bind-try".into(),
                path.display().to_string(),
                path.display().to_string(),
            ]);
        }
    }
    for path in &policy.read_only {
        args.extend([
            "--ro-bind-try".into(),
            path.display().to_string(),
            path.display().to_string(),
        ]);
    }
    if !policy.network {
        args.push("--unshare-net".into());
    }
    args.extend([
        "--unshare-pid".into(),
        "--unshare-ipc".into(),
        "--die-with-parent".into(),
        "--chdir".into(),
        cwd.display().to_string(),
        "--".into(),
    ]);
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_bind_roots_writable_and_protect_git() {
        let policy = SandboxPolicy {
            writable: vec![PathBuf::from("/w")],
            read_only: vec![PathBuf::from("/w/.tandem.toml")],
            network: false,
        };
        let args = bwrap_args(&policy, Path::new("/w"), Path::new("/tmp/t1"));
        let joined = args.join(" ");
        assert!(joined.starts_with("--ro-bind / /"));
        assert!(joined.contains("--bind /w /w"));
        assert!(joined.contains("--ro-bind-try /w/.git/hooks /w/.git/hooks"));
        assert!(joined.contains("--ro-bind-try /w/.tandem.toml /w/.tandem.toml"));
        assert!(joined.contains("--unshare-net"));
        assert!(joined.ends_with("--chdir /w --"));
        // Read-only binds come after the writable root so they win.
        let writable = joined.find("--bind /w /w").unwrap();
        let hooks = joined.find("/w/.git/hooks").unwrap();
        assert!(hooks > writable);
        let open = bwrap_args(
            &SandboxPolicy {
                network: true,
                ..policy
            },
            Path::new("/w"),
            Path::new("/tmp/t1"),
        );
        assert!(!open.contains(&"--unshare-net".to_owned()));
    }
}
