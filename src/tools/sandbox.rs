//! The shell sandbox: commands run under bubblewrap with the workspace roots and a private temp
//! dir writable, everything else read-only, `.git/hooks`, `.git/config` and tandem's own files
//! read-only, no network, and their own PID namespace; Landlock adds a second layer inside it.
//! Where bubblewrap is missing or cannot create namespaces, Landlock alone confines the command
//! (see `tools/landlock.rs` for what it can and cannot express).
//!
//! Detection runs once per process on the blocking pool: it starts `bwrap` and the Landlock helper
//! (`tandem sandbox-exec --probe`) to prove that each really confines here, since a container may
//! forbid namespaces and a kernel may lack Landlock. When no sandbox can be enforced the engine
//! asks for every shell command, whatever the mode, and says why.
//!
//! `TANDEM_SANDBOX` picks the layers: `auto` (the default: bubblewrap plus Landlock where each
//! works), `bwrap` (bubblewrap only), `landlock` (Landlock only, as where bubblewrap is missing)
//! or `off` (no sandbox, like the older `TANDEM_DISABLE_SANDBOX`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::sync::OnceCell;

/// What the sandbox allows one command to do.
#[derive(Debug, Clone)]
pub struct SandboxPolicy {
    /// Writable: the workspace roots.
    pub writable: Vec<PathBuf>,
    /// Read-only even inside a writable root (tandem's own config and data, for example).
    pub read_only: Vec<PathBuf>,
    /// Files covered by an empty one, so a command cannot even read them (the attach token,
    /// see `workspace::protected::ATTACH_TOKEN_FILE`). Under Landlock alone (no bubblewrap)
    /// they stay readable: Landlock grants reads by folder and cannot take one file out.
    pub hidden: Vec<PathBuf>,
    /// Whether the command may use the network; the user's choice, never the model's.
    pub network: bool,
}

/// A working Landlock helper: the tandem binary that restricts itself and then runs the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockLayer {
    pub helper: PathBuf,
    /// The kernel's Landlock ABI version, as the probe measured it.
    pub abi: i32,
    /// Whether the probe saw a TCP connect refused (Landlock ABI 4 and later).
    pub blocks_network: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxStatus {
    /// bubblewrap at this path works here; Landlock adds a layer inside it where it works too.
    Bwrap {
        bwrap: PathBuf,
        landlock: Option<LandlockLayer>,
    },
    /// bubblewrap cannot be used (the text says why); Landlock alone confines commands.
    Landlock {
        layer: LandlockLayer,
        why_not_bwrap: String,
    },
    /// No sandbox can be enforced; the text says why and what to install.
    Unavailable(String),
}

impl SandboxStatus {
    /// Why a command must be approved by the user whatever the mode, or `None` when the sandbox
    /// confines it as promised (`network` is the session's choice).
    pub fn approval_reason(&self, network: bool) -> Option<String> {
        match self {
            SandboxStatus::Bwrap { .. } => None,
            SandboxStatus::Landlock { layer, .. } if layer.blocks_network || network => None,
            SandboxStatus::Landlock { layer, why_not_bwrap } => Some(format!(
                "commands are confined to the workspace by Landlock, but this kernel's Landlock (ABI {}) cannot block the network and bubblewrap is not usable ({why_not_bwrap}), so every command needs your approval",
                layer.abi
            )),
            SandboxStatus::Unavailable(why) => Some(format!(
                "commands cannot be sandboxed here ({why}), so every command needs your approval"
            )),
        }
    }

    /// A short description for logs and the user.
    pub fn describe(&self) -> String {
        match self {
            SandboxStatus::Bwrap {
                bwrap,
                landlock: Some(layer),
            } => format!(
                "bubblewrap ({}) with Landlock ABI {} inside",
                bwrap.display(),
                layer.abi
            ),
            SandboxStatus::Bwrap {
                bwrap,
                landlock: None,
            } => format!("bubblewrap ({})", bwrap.display()),
            SandboxStatus::Landlock { layer, .. } => {
                format!("Landlock ABI {} (no bubblewrap)", layer.abi)
            }
            SandboxStatus::Unavailable(why) => format!("none: {why}"),
        }
    }
}

/// Which layers the environment asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layers {
    Auto,
    BwrapOnly,
    LandlockOnly,
    Off,
}

fn layers() -> Result<Layers, String> {
    if std::env::var_os("TANDEM_DISABLE_SANDBOX").is_some() {
        return Ok(Layers::Off);
    }
    match std::env::var("TANDEM_SANDBOX").as_deref() {
        Err(_) | Ok("") | Ok("auto") => Ok(Layers::Auto),
        Ok("bwrap") => Ok(Layers::BwrapOnly),
        Ok("landlock") => Ok(Layers::LandlockOnly),
        Ok("off") => Ok(Layers::Off),
        Ok(other) => Err(format!(
            "TANDEM_SANDBOX={other} is not one of auto, bwrap, landlock, off"
        )),
    }
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

fn probe_bwrap() -> Result<PathBuf, String> {
    let Some(bwrap) = find_bwrap() else {
        return Err("bubblewrap (bwrap) is not installed; install it (Debian/Ubuntu: apt-get install bubblewrap) to let commands run sandboxed".to_owned());
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
        Ok(output) if output.status.success() => Ok(bwrap),
        Ok(output) => Err(format!(
            "bubblewrap cannot create namespaces here ({}); allow unprivileged user namespaces or run tandem outside this container",
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(e) => Err(format!("bubblewrap could not start: {e}")),
    }
}

/// Run `tandem sandbox-exec --probe` and parse what it proved.
fn probe_landlock() -> Result<LandlockLayer, String> {
    let helper = std::env::current_exe()
        .map_err(|e| format!("cannot find the tandem binary for the Landlock helper: {e}"))?;
    let output = std::process::Command::new(&helper)
        .args(["sandbox-exec", "--probe"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("the Landlock probe could not start: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().next().unwrap_or_default().trim();
    let Some(fields) = line.strip_prefix("landlock abi=") else {
        return Err(if line.starts_with("landlock unavailable") {
            line.trim_start_matches("landlock unavailable: ").to_owned()
        } else {
            format!("the Landlock probe gave no answer ({})", helper.display())
        });
    };
    let mut parts = fields.split_whitespace();
    let abi = parts
        .next()
        .and_then(|n| n.parse::<i32>().ok())
        .unwrap_or(0);
    let rest: Vec<&str> = parts.collect();
    if !rest.contains(&"fs=enforced") {
        return Err(format!(
            "Landlock ABI {abi} is reported but a write was not refused"
        ));
    }
    Ok(LandlockLayer {
        helper,
        abi,
        blocks_network: rest.contains(&"net=enforced"),
    })
}

fn probe() -> SandboxStatus {
    let layers = match layers() {
        Ok(layers) => layers,
        Err(e) => return SandboxStatus::Unavailable(e),
    };
    if layers == Layers::Off {
        return SandboxStatus::Unavailable(
            "the sandbox is disabled by TANDEM_DISABLE_SANDBOX or TANDEM_SANDBOX=off".to_owned(),
        );
    }
    let landlock = match layers {
        Layers::BwrapOnly => Err("TANDEM_SANDBOX=bwrap leaves Landlock out".to_owned()),
        _ => probe_landlock(),
    };
    let why_not_bwrap = match layers {
        Layers::LandlockOnly => "TANDEM_SANDBOX=landlock leaves bubblewrap out".to_owned(),
        _ => match probe_bwrap() {
            Ok(bwrap) => {
                return SandboxStatus::Bwrap {
                    bwrap,
                    landlock: landlock.ok(),
                }
            }
            Err(why) => why,
        },
    };
    match landlock {
        Ok(layer) => SandboxStatus::Landlock {
            layer,
            why_not_bwrap,
        },
        Err(why_not_landlock) => {
            SandboxStatus::Unavailable(format!("{why_not_bwrap}; Landlock: {why_not_landlock}"))
        }
    }
}

/// Whether commands can be sandboxed here; detected once, off the async workers.
pub async fn status() -> SandboxStatus {
    STATUS
        .get_or_init(|| async {
            let status = tokio::task::spawn_blocking(probe)
                .await
                .unwrap_or_else(|e| {
                    SandboxStatus::Unavailable(format!("the sandbox probe crashed: {e}"))
                });
            tracing::info!("shell sandbox: {}", status.describe());
            status
        })
        .await
        .clone()
}

/// The paths a command must not write even inside a writable root: tandem's own config and
/// data, each root's `.git/hooks` and `.git/config` that exist (git runs hooks and reads config
/// with the user's privileges later), and a root's `.git` when it is a file (a worktree or
/// submodule link), since rewriting its `gitdir:` line would point git at hooks the command
/// planted. Only existing paths are listed: bubblewrap cannot mount over a missing one, and
/// `--ro-bind-try` tolerates a missing source but not one under a file (`.git/hooks` in a
/// worktree), which would make every command fail.
pub fn read_only_paths(
    roots: &[PathBuf],
    own_files: &crate::workspace::protected::OwnFiles,
) -> Vec<PathBuf> {
    let mut paths = own_files.paths().to_vec();
    for root in roots {
        // Files that run code when the user opens the folder or runs a task, where they exist
        // (bubblewrap cannot mount over a missing one: a command can still create a new one).
        for relative in crate::workspace::protected::fixed_protected_paths() {
            let path = root.join(relative);
            if std::fs::symlink_metadata(&path).is_ok() {
                paths.push(path);
            }
        }
        // tandem's own folder: project hooks (which run outside the sandbox once trusted), hook
        // scripts, commands and skills. A command that cannot write them cannot plant code
        // there; a hook file it creates where none was is untrusted content all the same.
        let own = root.join(".tandem");
        if std::fs::symlink_metadata(&own).is_ok_and(|m| m.is_dir()) {
            paths.push(own);
        }
        let link = root.join(".git");
        match std::fs::symlink_metadata(&link) {
            Ok(meta) if meta.is_dir() => git_internals(&link, 0, &mut paths),
            Ok(meta) if meta.is_file() => paths.push(link),
            _ => {}
        }
    }
    paths
}

/// The parts of a git directory that make git run code or read another repository's config
/// or objects: hooks, config (and `config.worktree`), `info/` (attributes can name filter
/// drivers, `info/exclude` is harmless but lives there), `commondir` (turns the repository into
/// a linked worktree of another), `objects/info/` (`alternates`), and the same inside each
/// submodule's (`modules/*`) and linked worktree's (`worktrees/*`) git directory. The folders
/// `hooks`, `info` and `objects/info` are created when missing, as `git init` would, so that
/// they can be mounted read-only: a command must not be able to create them and fill them.
/// Missing files (`commondir`, `config.worktree`) cannot be mounted over; [`ProtectedSentinels`]
/// removes them when a command creates one.
fn git_internals(git_dir: &Path, depth: usize, paths: &mut Vec<PathBuf>) {
    for folder in ["hooks", "info", "objects/info"] {
        let path = git_dir.join(folder);
        if std::fs::symlink_metadata(&path).is_err() && git_dir.join("objects").is_dir() {
            if let Err(e) = std::fs::create_dir_all(&path) {
                tracing::warn!(path = %path.display(), error = %e, "cannot create a git folder to protect it");
            }
        }
    }
    for inner in [
        "hooks",
        "config",
        "config.worktree",
        "info",
        "commondir",
        "objects/info",
        "gitdir",
    ] {
        let path = git_dir.join(inner);
        if std::fs::symlink_metadata(&path).is_ok() {
            paths.push(path);
        }
    }
    // Submodules nest (modules/a/modules/b); a few levels cover real repositories.
    if depth < 4 {
        for nested in ["modules", "worktrees"] {
            if let Ok(entries) = std::fs::read_dir(git_dir.join(nested)) {
                for entry in entries.flatten() {
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        git_internals(&entry.path(), depth + 1, paths);
                    }
                }
            }
        }
    }
}

/// Protected paths that do not exist before a command and so cannot be mounted read-only: the
/// git files `commondir` and `config.worktree` of each root's git directory, and the paths of
/// the protected tables (`.envrc`, `.vscode/tasks.json`, `.config/autostart`, ...; see
/// `workspace::protected::fixed_protected_paths`). They are noted before a command; whatever
/// of them the command created is removed after it, with a line for the model saying so (the
/// file tools, which refuse or ask, are the way to make such a change).
#[derive(Debug, Default)]
pub struct ProtectedSentinels {
    missing: Vec<PathBuf>,
}

impl ProtectedSentinels {
    /// Which of the sentinel paths are missing now.
    pub fn before(roots: &[PathBuf]) -> ProtectedSentinels {
        let mut candidates: Vec<PathBuf> = Vec::new();
        for root in roots {
            let git = root.join(".git");
            if git.is_dir() {
                candidates.extend([git.join("commondir"), git.join("config.worktree")]);
            }
            candidates
                .extend(crate::workspace::protected::fixed_protected_paths().map(|p| root.join(p)));
        }
        let missing = candidates
            .into_iter()
            .filter(|path| std::fs::symlink_metadata(path).is_err())
            .collect();
        ProtectedSentinels { missing }
    }

    /// Remove the sentinel paths the command created; the note for the model, if any.
    pub fn after(self) -> Option<String> {
        let mut removed = Vec::new();
        for path in self.missing {
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let gone = if meta.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            match gone {
                Ok(()) => removed.push(path.display().to_string()),
                Err(e) => removed.push(format!("{} (could not remove it: {e})", path.display())),
            }
        }
        (!removed.is_empty()).then(|| {
            format!(
                "tandem removed {}, which the command created: files that make git, an editor or a shell run code are not writable to commands; propose the change with write_file, which asks the user where that is allowed",
                removed.join(", ")
            )
        })
    }
}

/// The host's pathname unix sockets that a command could `connect` to, from `/proc/net/unix`,
/// except those under `/run` (an empty tmpfs in the sandbox), `/tmp` (private), `/proc`, `/dev`
/// and `/sys`: each is covered by `/dev/null` in the sandbox.
fn host_unix_sockets() -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
        return Vec::new();
    };
    let mut sockets: Vec<PathBuf> = table
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(7))
        .filter(|path| path.starts_with('/'))
        .map(PathBuf::from)
        .filter(|path| {
            !["/run", "/tmp", "/proc", "/dev", "/sys"]
                .iter()
                .any(|skip| path.starts_with(skip))
        })
        .filter(|path| {
            std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_socket())
        })
        .collect();
    sockets.sort();
    sockets.dedup();
    sockets
}

/// How one command is confined, built from the status and the session's policy.
#[derive(Debug, Clone)]
pub struct Confinement {
    pub policy: SandboxPolicy,
    /// Run under bubblewrap at this path.
    pub bwrap: Option<PathBuf>,
    /// Restrict with Landlock through this helper (inside bubblewrap when both are set).
    pub landlock: Option<PathBuf>,
}

impl Confinement {
    /// The confinement `status` gives a command under `policy`; `None` when nothing confines.
    pub fn new(status: &SandboxStatus, policy: SandboxPolicy) -> Option<Confinement> {
        match status {
            SandboxStatus::Bwrap { bwrap, landlock } => Some(Confinement {
                policy,
                bwrap: Some(bwrap.clone()),
                landlock: landlock.as_ref().map(|l| l.helper.clone()),
            }),
            SandboxStatus::Landlock { layer, .. } => Some(Confinement {
                policy,
                bwrap: None,
                landlock: Some(layer.helper.clone()),
            }),
            SandboxStatus::Unavailable(_) => None,
        }
    }

    /// The program and arguments that run `shell -c command` confined, with `temp` as the
    /// command's private temp dir; `grace` is how long a stop waits between SIGINT and SIGKILL.
    pub fn argv(
        &self,
        cwd: &Path,
        temp: &Path,
        shell: &str,
        command: &str,
        grace: Duration,
    ) -> Vec<String> {
        let mut argv: Vec<String> = Vec::new();
        if let Some(bwrap) = &self.bwrap {
            argv.push(bwrap.display().to_string());
            argv.extend(bwrap_args(
                &self.policy,
                cwd,
                temp,
                self.landlock.as_deref(),
            ));
        }
        if let Some(helper) = &self.landlock {
            argv.push(helper.display().to_string());
            argv.push("sandbox-exec".into());
            if self.bwrap.is_some() {
                // Inside bubblewrap the mounts already make .git/hooks, .git/config and
                // tandem's files read-only (and Landlock forbids undoing a mount), so the
                // roots are granted whole; /tmp there is the private temp dir.
                for root in &self.policy.writable {
                    argv.extend(["--write".into(), root.display().to_string()]);
                }
                argv.extend(["--write".into(), "/tmp".into()]);
            } else {
                for root in &self.policy.writable {
                    argv.extend(["--root".into(), root.display().to_string()]);
                }
                for path in &self.policy.read_only {
                    argv.extend(["--protect".into(), path.display().to_string()]);
                }
                argv.extend(["--tmp".into(), temp.display().to_string()]);
                if !self.policy.network {
                    // No network namespace here: UDP and the host's unix sockets need closing too.
                    argv.push("--seal-sockets".into());
                }
                // No PID namespace either: the helper stays the command's parent and ends
                // whatever the command leaves running (see `landlock::supervise`).
                argv.extend([
                    "--supervise".into(),
                    "--grace-ms".into(),
                    grace.as_millis().to_string(),
                ]);
            }
            if self.policy.network {
                argv.push("--network".into());
            }
            argv.push("--".into());
        }
        argv.extend([shell.to_owned(), "-c".to_owned(), command.to_owned()]);
        argv
    }
}

/// The bwrap arguments that run `program args…` under `policy`.
pub fn bwrap_args(
    policy: &SandboxPolicy,
    cwd: &Path,
    temp: &Path,
    helper: Option<&Path>,
) -> Vec<String> {
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
    if !policy.network {
        // With the network closed, no socket of the host may be reachable. Abstract ones and
        // TCP/UDP live in the network namespace (`--unshare-net`); pathname ones are files, and
        // a read-only mount does not stop a `connect`. /run (D-Bus, the user's runtime dir,
        // docker.sock) becomes an empty tmpfs; the rest are covered one by one below.
        args.extend(["--tmpfs".into(), "/run".into()]);
    }
    if let Some(helper) = helper {
        // The Landlock helper runs inside; keep it visible even if it lives under /tmp.
        args.extend([
            "--ro-bind".into(),
            helper.display().to_string(),
            helper.display().to_string(),
        ]);
    }
    for root in &policy.writable {
        args.extend([
            "--bind".into(),
            root.display().to_string(),
            root.display().to_string(),
        ]);
    }
    // Every folder between a root and a protected path is mounted onto itself first: a mount
    // point cannot be renamed or removed (EBUSY), so `mv .git .git-old && mkdir .git` cannot
    // trade a read-only mount's parent for a tree of the command's own.
    let mut ancestors: Vec<&Path> = policy
        .read_only
        .iter()
        .filter_map(|path| {
            let root = policy.writable.iter().find(|root| path.starts_with(root))?;
            Some(
                path.ancestors()
                    .skip(1)
                    .take_while(move |a| a.starts_with(root) && *a != root.as_path()),
            )
        })
        .flatten()
        .collect();
    ancestors.sort_by_key(|a| (a.components().count(), a.to_path_buf()));
    ancestors.dedup();
    for ancestor in ancestors {
        args.extend([
            "--bind-try".into(),
            ancestor.display().to_string(),
            ancestor.display().to_string(),
        ]);
    }
    // Read-only binds over the writable roots (`.git/hooks`, `.git/config`, tandem's files;
    // see `read_only_paths`); they come after the roots so they win.
    for path in &policy.read_only {
        args.extend([
            "--ro-bind-try".into(),
            path.display().to_string(),
            path.display().to_string(),
        ]);
    }
    for path in &policy.hidden {
        args.extend([
            "--ro-bind-try".into(),
            "/dev/null".into(),
            path.display().to_string(),
        ]);
    }
    if !policy.network {
        args.push("--unshare-net".into());
        for socket in host_unix_sockets() {
            args.extend([
                "--ro-bind-try".into(),
                "/dev/null".into(),
                socket.display().to_string(),
            ]);
        }
    }
    args.extend([
        "--unshare-pid".into(),
        "--unshare-ipc".into(),
        // No controlling terminal inside either (tandem's `setsid` covers the outside; this
        // covers what bubblewrap starts): no `TIOCSTI` into the user's terminal.
        "--new-session".into(),
        "--die-with-parent".into(),
        // The private /tmp, whatever TMPDIR tandem itself was given.
        "--setenv".into(),
        "TMPDIR".into(),
        "/tmp".into(),
        "--chdir".into(),
        cwd.display().to_string(),
        "--".into(),
    ]);
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(blocks_network: bool) -> LandlockLayer {
        LandlockLayer {
            helper: PathBuf::from("/bin/tandem"),
            abi: if blocks_network { 6 } else { 3 },
            blocks_network,
        }
    }

    #[test]
    fn only_an_unconfined_or_leaky_sandbox_makes_every_command_ask() {
        let bwrap = SandboxStatus::Bwrap {
            bwrap: PathBuf::from("/usr/bin/bwrap"),
            landlock: None,
        };
        assert_eq!(bwrap.approval_reason(false), None);
        let full = SandboxStatus::Landlock {
            layer: layer(true),
            why_not_bwrap: "missing".into(),
        };
        assert_eq!(full.approval_reason(false), None);
        let leaky = SandboxStatus::Landlock {
            layer: layer(false),
            why_not_bwrap: "bwrap is missing".into(),
        };
        let reason = leaky.approval_reason(false).unwrap();
        assert!(reason.contains("cannot block the network") && reason.contains("bwrap is missing"));
        // With the network allowed by the user, blocking it is not needed.
        assert_eq!(leaky.approval_reason(true), None);
        let none = SandboxStatus::Unavailable("no bwrap; no Landlock".into());
        assert!(none.approval_reason(true).unwrap().contains("no Landlock"));
    }

    #[test]
    fn the_helper_runs_inside_bubblewrap_or_alone_with_carved_roots() {
        let policy = SandboxPolicy {
            writable: vec![PathBuf::from("/w")],
            read_only: vec![PathBuf::from("/w/tandem.toml")],
            hidden: Vec::new(),
            network: false,
        };
        let layered = Confinement::new(
            &SandboxStatus::Bwrap {
                bwrap: PathBuf::from("/usr/bin/bwrap"),
                landlock: Some(layer(true)),
            },
            policy.clone(),
        )
        .unwrap();
        let argv = layered
            .argv(
                Path::new("/w"),
                Path::new("/tmp/t1"),
                "/bin/bash",
                "ls",
                Duration::from_millis(100),
            )
            .join(" ");
        assert!(argv.starts_with("/usr/bin/bwrap --ro-bind / /"));
        assert!(argv.contains("--ro-bind /bin/tandem /bin/tandem"));
        assert!(argv
            .ends_with("-- /bin/tandem sandbox-exec --write /w --write /tmp -- /bin/bash -c ls"));
        let alone = Confinement::new(
            &SandboxStatus::Landlock {
                layer: layer(true),
                why_not_bwrap: String::new(),
            },
            SandboxPolicy {
                hidden: Vec::new(),
                network: true,
                ..policy
            },
        )
        .unwrap();
        assert_eq!(
            alone
                .argv(Path::new("/w"), Path::new("/tmp/t1"), "/bin/bash", "ls", Duration::from_millis(100))
                .join(" "),
            "/bin/tandem sandbox-exec --root /w --protect /w/tandem.toml --tmp /tmp/t1 --supervise --grace-ms 100 --network -- /bin/bash -c ls"
        );
        let sealed = Confinement::new(
            &SandboxStatus::Landlock {
                layer: layer(true),
                why_not_bwrap: String::new(),
            },
            SandboxPolicy {
                hidden: Vec::new(),
                network: false,
                ..alone.policy.clone()
            },
        )
        .unwrap();
        assert!(sealed
            .argv(
                Path::new("/w"),
                Path::new("/tmp/t1"),
                "/bin/bash",
                "ls",
                Duration::from_millis(100)
            )
            .join(" ")
            .contains("--tmp /tmp/t1 --seal-sockets --supervise --grace-ms 100 -- /bin/bash"));
    }

    #[test]
    fn read_only_paths_follow_what_the_roots_hold() {
        let plain = tempfile::tempdir().unwrap();
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(repo.path().join(".git/hooks")).unwrap();
        std::fs::write(repo.path().join(".git/config"), "").unwrap();
        let worktree = tempfile::tempdir().unwrap();
        std::fs::write(worktree.path().join(".git"), "gitdir: /x\n").unwrap();
        let paths = read_only_paths(
            &[
                plain.path().to_path_buf(),
                repo.path().to_path_buf(),
                worktree.path().to_path_buf(),
            ],
            &Default::default(),
        );
        assert!(paths.contains(&repo.path().join(".git/hooks")));
        assert!(paths.contains(&repo.path().join(".git/config")));
        assert!(paths.contains(&worktree.path().join(".git")));
        assert!(!paths.iter().any(|p| p.starts_with(plain.path())));
        assert!(!paths.contains(&worktree.path().join(".git/hooks")));
    }

    #[test]
    fn arguments_bind_roots_writable_and_protect_git() {
        let policy = SandboxPolicy {
            writable: vec![PathBuf::from("/w")],
            read_only: vec![
                PathBuf::from("/w/.tandem.toml"),
                PathBuf::from("/w/.git/hooks"),
            ],
            hidden: Vec::new(),
            network: false,
        };
        let args = bwrap_args(&policy, Path::new("/w"), Path::new("/tmp/t1"), None);
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
                hidden: Vec::new(),
                network: true,
                ..policy
            },
            Path::new("/w"),
            Path::new("/tmp/t1"),
            None,
        );
        assert!(!open.contains(&"--unshare-net".to_owned()));
    }
}
