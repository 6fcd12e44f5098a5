//! The Landlock side of the shell sandbox: the hidden `tandem sandbox-exec` helper restricts
//! itself with a Landlock ruleset and then `exec`s the command, which inherits the restriction.
//!
//! The restriction is applied by a fresh, single-threaded process (a re-exec of the tandem
//! binary) rather than in `pre_exec` after `fork`, where allocating or opening files is unsafe in
//! a multi-threaded parent. Under bubblewrap the helper runs *inside* the sandbox, after
//! bubblewrap has set up its mounts (a Landlock-restricted process can no longer mount anything,
//! so bubblewrap itself must not be restricted).
//!
//! Landlock is an allow-list: a write right granted on a directory holds for everything beneath
//! it, and nothing can take it back for a subdirectory. To keep `.git/hooks`, `.git/config` and
//! tandem's own files read-only inside a writable root, a `--root` is *carved*: the root itself
//! gets no rights, each of its children does, except a child that holds a protected path, which
//! is carved in turn. The price is that no entry can be created or removed directly in a carved
//! directory (the root of a git checkout and its `.git`), only beneath its other children.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath,
    PathFd, RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError,
    RulesetStatus, Scope, ABI,
};

/// The newest Landlock ABI whose rights tandem asks for. Newer kernels enforce these; older ones
/// enforce what they know (best effort), which `--probe` measures and reports.
const TARGET: ABI = ABI::V6;

/// Exit code of the helper when it refuses to run the command (mirrors a shell's "cannot
/// execute").
pub const REFUSED: i32 = 126;

/// What one `sandbox-exec` invocation grants.
#[derive(Debug, Clone, Default)]
pub struct Spec {
    /// Writable with everything beneath them.
    pub write: Vec<PathBuf>,
    /// Writable except `.git/hooks`, `.git/config` and the `protect` paths beneath them.
    pub roots: Vec<PathBuf>,
    /// Read-only even beneath a root.
    pub protect: Vec<PathBuf>,
    /// A private temp dir: writable and exported as `TMPDIR`.
    pub tmp: Option<PathBuf>,
    /// Whether TCP connect and bind stay allowed.
    pub network: bool,
    /// Whether every socket but TCP is refused ([`close_other_sockets`]): for Landlock alone,
    /// where no network namespace keeps the host's UDP and unix sockets out of reach.
    pub seal_sockets: bool,
    /// Stay the command's parent and end everything it leaves running ([`supervise`]), giving
    /// it this long after a SIGINT: for Landlock alone, where no PID namespace does that.
    pub supervise: Option<std::time::Duration>,
}

/// How one path is granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grant {
    /// Every write right, for the path and everything beneath it.
    Tree,
    /// Writing the contents of an existing file.
    File,
}

fn write_rights() -> BitFlags<AccessFs> {
    AccessFs::from_write(TARGET)
}

fn file_rights() -> BitFlags<AccessFs> {
    AccessFs::from_write(TARGET) & AccessFs::from_file(TARGET)
}

/// Character devices every shell writes to; granted as files, never `/dev` as a whole (which
/// would include block devices).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/random",
    "/dev/urandom",
];

/// The paths a root protects on its own: git runs hooks and reads config with the user's
/// privileges later, so a command must not plant code there.
pub fn git_protected(root: &Path) -> [PathBuf; 2] {
    [root.join(".git/hooks"), root.join(".git/config")]
}

/// The grants that make `root` writable except for `protected` paths beneath it.
fn carve(dir: &Path, protected: &[PathBuf], grants: &mut Vec<(PathBuf, Grant)>) {
    if protected.iter().any(|p| p == dir) {
        return;
    }
    if !protected.iter().any(|p| p.starts_with(dir)) {
        grants.push((dir.to_path_buf(), Grant::Tree));
        return;
    }
    // A protected path lies beneath: grant the children one by one and never `dir` itself,
    // since a right on `dir` would cover the protected path too.
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            // A rule follows the link; the target keeps whatever its own place grants.
            continue;
        }
        if kind.is_dir() {
            carve(&path, protected, grants);
        } else if !protected.contains(&path) {
            grants.push((path, Grant::File));
        }
    }
}

/// Every grant `spec` makes, in order.
fn grants(spec: &Spec) -> Vec<(PathBuf, Grant)> {
    let mut grants: Vec<(PathBuf, Grant)> = Vec::new();
    for path in spec.write.iter().chain(spec.tmp.iter()) {
        grants.push((path.clone(), Grant::Tree));
    }
    for root in &spec.roots {
        // Only protected paths whose parent exists need carving: a root without `.git` has no
        // hooks to protect and stays writable as a whole (a command may still `git init`; the
        // hooks of a repository it creates are its own).
        let protected: Vec<PathBuf> = git_protected(root)
            .into_iter()
            .chain(spec.protect.iter().cloned())
            .filter(|p| p.starts_with(root) && p.parent().is_some_and(Path::exists))
            .collect();
        carve(root, &protected, &mut grants);
    }
    for device in DEVICES {
        let path = Path::new(device);
        if path.exists() {
            grants.push((path.to_path_buf(), Grant::File));
        }
    }
    if Path::new("/dev/pts").is_dir() {
        grants.push((PathBuf::from("/dev/pts"), Grant::File));
    }
    grants
}

/// Restrict the calling (single-threaded) process as `spec` says.
fn restrict(spec: &Spec) -> Result<RestrictionStatus, RulesetError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(write_rights())?;
    if !spec.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(TARGET))?;
        // Abstract unix sockets (D-Bus, X11 and similar) are another way out.
        ruleset = ruleset.scope(Scope::AbstractUnixSocket)?;
    }
    // The command may not signal processes outside its sandbox (tandem itself, the editor).
    ruleset = ruleset.scope(Scope::Signal)?;
    let mut created = ruleset.create()?;
    for (path, grant) in grants(spec) {
        let Ok(fd) = PathFd::new(&path) else {
            // Gone since it was listed; nothing to grant.
            continue;
        };
        let rights = match grant {
            Grant::Tree if path.is_dir() => write_rights(),
            _ => file_rights(),
        };
        created = created.add_rule(PathBeneath::new(fd, rights))?;
    }
    created.restrict_self()
}

fn abi_number(status: &RestrictionStatus) -> Option<i32> {
    match status.landlock {
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => Some(kernel_abi.unwrap_or(effective_abi as i32)),
        _ => None,
    }
}

/// `tandem sandbox-exec --probe`: restrict this process with no write grant and no network,
/// then prove that a write and a TCP connect are really refused. Prints one line,
/// `landlock abi=N fs=enforced|open net=enforced|open`, which the server's probe parses.
#[allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "runs in the sandbox-exec helper process, whose stdout and stderr belong to the confined command and its caller, never to a protocol"
)]
pub fn probe() -> i32 {
    let scratch = std::env::temp_dir();
    let spec = Spec::default();
    let status = match restrict(&spec) {
        Ok(status) => status,
        Err(e) => {
            println!("landlock unavailable: {e}");
            return 1;
        }
    };
    if status.ruleset == RulesetStatus::NotEnforced {
        println!("landlock unavailable: the kernel does not enforce Landlock (not built in or not enabled at boot; see /sys/kernel/security/lsm)");
        return 1;
    }
    let target = scratch.join(format!("tandem-landlock-probe-{}", std::process::id()));
    let fs = match std::fs::File::create(&target) {
        Ok(_) => {
            let _ = std::fs::remove_file(&target);
            "open"
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => "enforced",
        Err(_) => "open",
    };
    // Under Landlock a denied connect fails with EACCES before any packet is sent; without it,
    // a closed loopback port answers ECONNREFUSED.
    let net = match std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], 9)),
        std::time::Duration::from_secs(1),
    ) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => "enforced",
        _ => "open",
    };
    println!(
        "landlock abi={} fs={fs} net={net}",
        abi_number(&status).unwrap_or(0)
    );
    0
}

/// With the network closed, Landlock still lets a command reach the host by UDP (it has rules for
/// TCP only) and by pathname unix sockets (no rule before ABI 9), and as root by raw or netlink
/// sockets. A seccomp filter closes those: `socket()` is refused (`EACCES`) for every family but
/// IPv4 and IPv6, and for those for every type but a stream (TCP, which Landlock rules); and
/// `io_uring_setup` is refused, since io_uring creates sockets without the `socket` system call.
/// `socketpair` stays allowed: it connects a process with itself, never with the host.
fn close_other_sockets() -> Result<(), String> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    let condition = |index: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
    };
    let families = [libc::AF_INET as u64, libc::AF_INET6 as u64];
    let mut socket_rules = vec![SeccompRule::new(vec![
        condition(0, SeccompCmpOp::Ne, families[0])?,
        condition(0, SeccompCmpOp::Ne, families[1])?,
    ])
    .map_err(|e| e.to_string())?];
    // The type's low bits; SOCK_NONBLOCK and SOCK_CLOEXEC sit above them.
    let not_streams = [
        libc::SOCK_DGRAM,
        libc::SOCK_RAW,
        libc::SOCK_RDM,
        libc::SOCK_SEQPACKET,
    ];
    for family in families {
        for kind in not_streams {
            socket_rules.push(
                SeccompRule::new(vec![
                    condition(0, SeccompCmpOp::Eq, family)?,
                    condition(1, SeccompCmpOp::MaskedEq(0xf), kind as u64)?,
                ])
                .map_err(|e| e.to_string())?,
            );
        }
    }
    let rules = [
        (libc::SYS_socket, socket_rules),
        (libc::SYS_io_uring_setup, Vec::new()),
    ]
    .into_iter()
    .collect();
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    // Landlock's restrict_self already set no_new_privs, which an unprivileged filter needs.
    seccompiler::apply_filter(&program).map_err(|e| e.to_string())
}

/// Run the (already restricted) command as a child instead of becoming it, and end everything it
/// leaves behind: the helper is a child subreaper, so a process the command started with
/// `setsid`, `nohup` or `&` stays its descendant (or becomes its child when its parent exits),
/// and when the command ends, or `grace` after a SIGINT (a stop: tandem sends SIGKILL after its
/// own grace, which this must beat), every descendant is killed and reaped. Without it such a
/// process would go on writing the workspace after the command, the turn and tandem ended.
/// Returns the command's exit code (128 + the signal for one killed by a signal).
#[allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "runs in the sandbox-exec helper process, whose stdout and stderr belong to the confined command and its caller, never to a protocol"
)]
fn supervise(
    spec: &Spec,
    first: &std::ffi::OsString,
    rest: &[std::ffi::OsString],
    grace: std::time::Duration,
) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    use tokio::signal::unix::{signal, SignalKind};
    if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        eprintln!("tandem sandbox: cannot supervise the command ({e}), so it did not run");
        return REFUSED;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tandem sandbox: cannot supervise the command ({e}), so it did not run");
            return REFUSED;
        }
    };
    let status = runtime.block_on(async {
        // Handling these keeps the helper alive through a stop; the command (same process
        // group) receives them itself.
        let (Ok(mut interrupt), Ok(mut terminate)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return Err("cannot handle signals".to_owned());
        };
        let mut command = tokio::process::Command::new(first);
        command.args(rest);
        if let Some(tmp) = &spec.tmp {
            command.env("TMPDIR", tmp);
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", Path::new(first).display()))?;
        tokio::select! {
            status = child.wait() => return status.map_err(|e| e.to_string()),
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        match tokio::time::timeout(grace / 2, child.wait()).await {
            Ok(status) => status.map_err(|e| e.to_string()),
            Err(_) => {
                super::process_tree::kill_descendants();
                child.wait().await.map_err(|e| e.to_string())
            }
        }
    });
    super::process_tree::kill_descendants();
    match status {
        Ok(status) => status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(1),
        Err(e) => {
            eprintln!("tandem sandbox: {e}");
            REFUSED
        }
    }
}

/// `tandem sandbox-exec [grants] -- program args…`: restrict, then become the program. Returns
/// only when it could not (the caller exits with the returned code).
#[allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "runs in the sandbox-exec helper process, whose stdout and stderr belong to the confined command and its caller, never to a protocol"
)]
pub fn exec(spec: &Spec, program: &[std::ffi::OsString]) -> i32 {
    let Some((first, rest)) = program.split_first() else {
        eprintln!("tandem sandbox-exec: no command given after `--`");
        return 2;
    };
    match restrict(spec) {
        Ok(status) if status.ruleset != RulesetStatus::NotEnforced => {
            if spec.seal_sockets && !spec.network {
                if let Err(e) = close_other_sockets() {
                    eprintln!("tandem sandbox: cannot close the host's sockets to the command ({e}), so it did not run; install bubblewrap");
                    return REFUSED;
                }
            }
        }
        Ok(_) => {
            eprintln!("tandem sandbox: Landlock is not enforced by this kernel, so the command did not run; install bubblewrap or enable Landlock");
            return REFUSED;
        }
        Err(e) => {
            eprintln!(
                "tandem sandbox: cannot apply the Landlock rules ({e}), so the command did not run"
            );
            return REFUSED;
        }
    }
    if let Some(grace) = spec.supervise {
        return supervise(spec, first, rest, grace);
    }
    let mut command = std::process::Command::new(first);
    command.args(rest);
    if let Some(tmp) = &spec.tmp {
        command.env("TMPDIR", tmp);
    }
    let error = command.exec();
    eprintln!(
        "tandem sandbox: cannot run {}: {error}",
        Path::new(first).display()
    );
    REFUSED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_root_is_carved_around_hooks_and_config() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(r.join(".git/objects")).unwrap();
        std::fs::write(r.join(".git/config"), "").unwrap();
        std::fs::write(r.join(".git/HEAD"), "").unwrap();
        std::fs::create_dir_all(r.join("src")).unwrap();
        std::fs::write(r.join("README"), "").unwrap();
        std::fs::write(r.join("tandem.toml"), "").unwrap();
        std::os::unix::fs::symlink(".git/hooks", r.join("hooks")).unwrap();
        let spec = Spec {
            roots: vec![r.to_path_buf()],
            protect: vec![r.join("tandem.toml")],
            ..Spec::default()
        };
        let granted = grants(&spec);
        let has = |p: PathBuf, g: Grant| granted.contains(&(p, g));
        assert!(has(r.join("src"), Grant::Tree));
        assert!(has(r.join("README"), Grant::File));
        assert!(has(r.join(".git/objects"), Grant::Tree));
        assert!(has(r.join(".git/HEAD"), Grant::File));
        for denied in [
            r.to_path_buf(),
            r.join(".git"),
            r.join(".git/hooks"),
            r.join(".git/config"),
            r.join("tandem.toml"),
            r.join("hooks"),
        ] {
            assert!(
                !granted.iter().any(|(p, _)| p == &denied),
                "{} must get no right",
                denied.display()
            );
        }
    }

    #[test]
    fn a_plain_root_is_writable_as_a_whole() {
        let root = tempfile::tempdir().unwrap();
        let spec = Spec {
            roots: vec![root.path().to_path_buf()],
            ..Spec::default()
        };
        assert!(grants(&spec).contains(&(root.path().to_path_buf(), Grant::Tree)));
    }
}
