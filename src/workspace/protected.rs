//! Paths the agent may never edit, and paths whose contents need an explicit approval to read.
//!
//! Both checks run on the *resolved* path (symlinks followed inside the root, missing parents
//! spelled out), so a link named `notes.txt` that points at `.env`, or a write to
//! `link/pre-commit` where `link` points at `.git/hooks`, is caught like the direct spelling.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The file in tandem's data directory that holds the token WebSocket clients attach with
/// (`tandem serve --listen`). A command the model runs could otherwise read it and, with the
/// network on, attach and approve its own calls: the shell sandbox covers it (see
/// [`OwnFiles::hidden_files`]), and file tools read a file of this name only with the user's
/// approval ([`SECRET_FILES`]) and never write one in tandem's data directory (it is one of
/// tandem's own files).
pub const ATTACH_TOKEN_FILE: &str = "attach-token";

/// Absolute paths outside the built-in patterns that are protected too: tandem's own config
/// file and its data directory (which holds the permission rules). A value, not a process
/// global: each face builds it from its config and data dir and opens every workspace with it
/// ([`crate::workspace::Workspace::open_protecting`]), so two engines in one process (tests,
/// a second face) protect each their own files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnFiles(Arc<[PathBuf]>);

impl OwnFiles {
    /// tandem's config file and the directory of its session database, canonical (so a
    /// linked or relative spelling of a write still matches).
    pub fn new(config: Option<&Path>, database: Option<&Path>) -> OwnFiles {
        let mut paths: Vec<PathBuf> = config.map(Path::to_path_buf).into_iter().collect();
        if let Some(dir) = database.and_then(Path::parent) {
            paths.push(dir.to_path_buf());
        }
        OwnFiles(
            paths
                .into_iter()
                .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
                .collect(),
        )
    }

    /// The paths, for the shell sandbox to mount read-only.
    pub fn paths(&self) -> &[PathBuf] {
        &self.0
    }

    /// The secret files among tandem's own that exist now (the attach token), for the shell
    /// sandbox to cover with an empty file: a read-only mount still lets a command read.
    pub fn hidden_files(&self) -> Vec<PathBuf> {
        self.0
            .iter()
            .map(|dir| dir.join(ATTACH_TOKEN_FILE))
            .filter(|path| path.is_file())
            .collect()
    }

    fn covers(&self, absolute: &Path) -> bool {
        self.0.iter().any(|p| absolute.starts_with(p))
    }
}

fn names(relative: &Path) -> Vec<String> {
    relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

/// Why the agent may not write `relative` (inside a root whose absolute path is `absolute`'s
/// prefix), or `None` if it may; `own` are tandem's own files (see [`OwnFiles`]).
pub fn protected_reason(relative: &Path, absolute: &Path, own: &OwnFiles) -> Option<String> {
    let parts = names(relative);
    let file = parts.last().map(String::as_str).unwrap_or_default();
    if parts.iter().any(|p| p == ".git") {
        return Some(
            "it is inside .git (hooks and config there run code and rewrite history)".to_owned(),
        );
    }
    if parts.iter().any(|p| p == ".tandem") {
        return Some("it is tandem's own state".to_owned());
    }
    if let Some((rule, what)) = RUNS_CODE_FILES
        .iter()
        .find(|(rule, _)| rule.matches(&parts))
    {
        return Some(format!("{file} matches {}: {what}", rule.spelled()));
    }
    if own.covers(absolute) {
        return Some("it is tandem's own configuration or permission store".to_owned());
    }
    None
}

/// Files that make an editor, a shell, git, an agent or the desktop run code (or trust a
/// server) the next time the user opens the folder, a terminal or a session. File tools never
/// write them; commands find the ones that exist read-only. ARCHITECTURE.md shows this table.
pub const RUNS_CODE_FILES: &[(PathPattern, &str)] = &[
    (
        PathPattern::PathEnd(".vscode/settings.json"),
        "VS Code workspace settings",
    ),
    (
        PathPattern::NameSuffix(".code-workspace"),
        "VS Code workspace settings",
    ),
    (
        PathPattern::PathEnd(".zed/settings.json"),
        "Zed project settings",
    ),
    (
        PathPattern::PathEnd(".helix/languages.toml"),
        "Helix language servers it starts",
    ),
    (
        PathPattern::PathEnd(".idea/workspace.xml"),
        "JetBrains run configurations",
    ),
    (
        PathPattern::Name(".nvim.lua"),
        "Neovim runs it on start (exrc)",
    ),
    (
        PathPattern::Name(".nvimrc"),
        "Neovim runs it on start (exrc)",
    ),
    (PathPattern::Name(".exrc"), "Vim runs it on start"),
    (PathPattern::Name(".envrc"), "direnv runs it on cd"),
    (PathPattern::Name(".mcp.json"), "which MCP servers run"),
    (
        PathPattern::PathEnd(".claude/settings.json"),
        "agent hooks and permissions",
    ),
    (
        PathPattern::PathEnd(".claude/settings.local.json"),
        "agent hooks and permissions",
    ),
    (PathPattern::Name(".bashrc"), "a shell start-up file"),
    (PathPattern::Name(".bash_profile"), "a shell start-up file"),
    (PathPattern::Name(".bash_login"), "a shell start-up file"),
    (PathPattern::Name(".bash_logout"), "a shell start-up file"),
    (PathPattern::Name(".bash_aliases"), "a shell start-up file"),
    (PathPattern::Name(".profile"), "a shell start-up file"),
    (PathPattern::Name(".zshrc"), "a shell start-up file"),
    (PathPattern::Name(".zshenv"), "a shell start-up file"),
    (PathPattern::Name(".zprofile"), "a shell start-up file"),
    (PathPattern::Name(".zlogin"), "a shell start-up file"),
    (PathPattern::Name(".cshrc"), "a shell start-up file"),
    (PathPattern::Name(".tcshrc"), "a shell start-up file"),
    (PathPattern::Name(".kshrc"), "a shell start-up file"),
    (PathPattern::PathEnd(".config/fish"), "fish start-up files"),
    (
        PathPattern::Name(".gitconfig"),
        "git aliases and hook paths run code",
    ),
    (
        PathPattern::PathEnd(".config/git/config"),
        "git aliases and hook paths run code",
    ),
    (
        PathPattern::PathEnd(".ssh/authorized_keys"),
        "who may log in",
    ),
    (
        PathPattern::PathEnd(".ssh/config"),
        "ssh runs its ProxyCommand",
    ),
    (PathPattern::PathEnd(".ssh/rc"), "ssh runs it at login"),
    (
        PathPattern::PathEnd(".config/autostart"),
        "programs started at login",
    ),
    (
        PathPattern::PathEnd(".config/systemd/user"),
        "user services",
    ),
    (
        PathPattern::PathEnd(".local/bin"),
        "programs on the user's PATH",
    ),
];

/// Project files a user edits on purpose that also run code when the user runs a task, a
/// debugger, a commit or a build: every change asks, in every mode (also `fullAuto`), each time;
/// commands find the ones that exist read-only. ARCHITECTURE.md shows this table.
pub const ASK_FILES: &[(PathPattern, &str)] = &[
    (
        PathPattern::PathEnd(".vscode/tasks.json"),
        "VS Code tasks run commands",
    ),
    (
        PathPattern::PathEnd(".vscode/launch.json"),
        "VS Code launch configurations run programs",
    ),
    (
        PathPattern::PathEnd(".zed/tasks.json"),
        "Zed tasks run commands",
    ),
    (
        PathPattern::PathEnd(".devcontainer/devcontainer.json"),
        "dev containers run lifecycle commands",
    ),
    (
        PathPattern::Name(".pre-commit-config.yaml"),
        "pre-commit runs its hooks at every commit",
    ),
    (
        PathPattern::PathEnd(".cargo/config.toml"),
        "cargo runs its runners and build settings",
    ),
    (
        PathPattern::PathEnd(".cargo/config"),
        "cargo runs its runners and build settings",
    ),
];

/// Why a change to `relative` asks every time (it is in [`ASK_FILES`]), or `None`.
pub fn ask_reason(relative: &Path) -> Option<String> {
    let parts = names(relative);
    let file = parts.last().map(String::as_str).unwrap_or_default();
    ASK_FILES
        .iter()
        .find(|(rule, _)| rule.matches(&parts))
        .map(|(rule, what)| format!("{file} matches {}: {what}", rule.spelled()))
}

/// The paths below a root that the protected tables name exactly (not by a name pattern),
/// for the shell sandbox to mount read-only where they exist.
pub fn fixed_protected_paths() -> impl Iterator<Item = &'static str> {
    RUNS_CODE_FILES
        .iter()
        .chain(ASK_FILES)
        .filter_map(|(rule, _)| match rule {
            PathPattern::PathEnd(path) | PathPattern::Name(path) => Some(*path),
            _ => None,
        })
}

/// How one entry of [`SECRET_FILES`], [`RUNS_CODE_FILES`] or [`ASK_FILES`] matches a path
/// (relative to its root, links resolved).
#[derive(Debug, Clone, Copy)]
pub enum PathPattern {
    /// Anything inside a folder of this name, at any depth (`.ssh/`).
    InFolder(&'static str),
    /// A file of exactly this name, in any folder.
    Name(&'static str),
    /// A file whose name starts with this.
    NamePrefix(&'static str),
    /// A file whose name ends with this.
    NameSuffix(&'static str),
    /// A path that ends with these components (`.docker/config.json`).
    PathEnd(&'static str),
}

/// Files that may hold credentials: reading, editing or writing one asks the user first, in
/// every mode, and each time (no "always allow"); `grep` skips them. Drawn from what gitleaks,
/// trufflehog and Claude Code treat as credential files. ARCHITECTURE.md shows this table
/// (a test keeps the two equal).
pub const SECRET_FILES: &[(PathPattern, &str)] = &[
    (PathPattern::InFolder(".ssh"), "SSH keys and config"),
    (
        PathPattern::Name(ATTACH_TOKEN_FILE),
        "the token that lets a client drive tandem's sessions",
    ),
    (PathPattern::InFolder(".aws"), "AWS credentials"),
    (PathPattern::InFolder(".gnupg"), "GnuPG keys"),
    (PathPattern::InFolder(".kube"), "Kubernetes credentials"),
    (PathPattern::InFolder(".azure"), "Azure credentials"),
    (PathPattern::InFolder(".password-store"), "pass(1) secrets"),
    (
        PathPattern::PathEnd(".config/gcloud"),
        "Google Cloud credentials",
    ),
    (
        PathPattern::PathEnd(".docker/config.json"),
        "registry credentials",
    ),
    (
        PathPattern::PathEnd(".config/gh/hosts.yml"),
        "GitHub CLI tokens",
    ),
    (PathPattern::PathEnd(".config/hub"), "GitHub tokens"),
    (
        PathPattern::PathEnd(".cargo/credentials"),
        "crates.io tokens",
    ),
    (
        PathPattern::PathEnd(".cargo/credentials.toml"),
        "crates.io tokens",
    ),
    (PathPattern::PathEnd(".gem/credentials"), "RubyGems tokens"),
    (
        PathPattern::PathEnd(".git/config"),
        "remote URLs with tokens, auth headers",
    ),
    (PathPattern::NamePrefix(".env"), "environment secrets"),
    (PathPattern::Name(".netrc"), "login credentials"),
    (PathPattern::Name("_netrc"), "login credentials"),
    (PathPattern::Name(".npmrc"), "npm tokens"),
    (PathPattern::Name(".yarnrc.yml"), "npm tokens"),
    (PathPattern::Name(".pypirc"), "PyPI tokens"),
    (PathPattern::Name(".pgpass"), "PostgreSQL passwords"),
    (PathPattern::Name(".my.cnf"), "MySQL passwords"),
    (
        PathPattern::Name(".git-credentials"),
        "git passwords and tokens",
    ),
    (PathPattern::Name(".htpasswd"), "password hashes"),
    (PathPattern::Name(".vault-token"), "Vault tokens"),
    (PathPattern::Name(".boto"), "cloud credentials"),
    (PathPattern::Name(".s3cfg"), "S3 credentials"),
    (PathPattern::Name(".terraformrc"), "Terraform Cloud tokens"),
    (PathPattern::Name("credentials"), "credentials"),
    (PathPattern::Name("credentials.json"), "credentials"),
    (
        PathPattern::Name("terraform.tfstate"),
        "secrets in Terraform state",
    ),
    (
        PathPattern::Name("terraform.tfstate.backup"),
        "secrets in Terraform state",
    ),
    (PathPattern::Name("secrets.yaml"), "secrets"),
    (PathPattern::Name("secrets.yml"), "secrets"),
    (PathPattern::Name("secrets.json"), "secrets"),
    (PathPattern::Name("secrets.toml"), "secrets"),
    (
        PathPattern::NamePrefix("client_secret"),
        "OAuth client secrets",
    ),
    (
        PathPattern::NamePrefix("service-account"),
        "cloud service-account keys",
    ),
    (
        PathPattern::NameSuffix(".tfvars"),
        "Terraform variables (often secrets)",
    ),
    (PathPattern::NameSuffix(".pem"), "keys or certificates"),
    (PathPattern::NameSuffix(".key"), "private keys"),
    (PathPattern::NameSuffix(".p12"), "key stores"),
    (PathPattern::NameSuffix(".pfx"), "key stores"),
    (PathPattern::NameSuffix(".jks"), "Java key stores"),
    (PathPattern::NameSuffix(".keystore"), "key stores"),
    (PathPattern::NameSuffix(".kdbx"), "KeePass databases"),
    (PathPattern::NameSuffix(".ovpn"), "VPN keys"),
    (PathPattern::NamePrefix("id_rsa"), "an SSH key"),
    (PathPattern::NamePrefix("id_dsa"), "an SSH key"),
    (PathPattern::NamePrefix("id_ecdsa"), "an SSH key"),
    (PathPattern::NamePrefix("id_ed25519"), "an SSH key"),
];

impl PathPattern {
    fn matches(self, parts: &[String]) -> bool {
        let file = parts.last().map(String::as_str).unwrap_or_default();
        match self {
            PathPattern::InFolder(dir) => parts[..parts.len().saturating_sub(1)]
                .iter()
                .any(|p| p == dir),
            PathPattern::Name(name) => file == name,
            PathPattern::NamePrefix(prefix) => file.starts_with(prefix),
            PathPattern::NameSuffix(suffix) => file.len() > suffix.len() && file.ends_with(suffix),
            PathPattern::PathEnd(end) => {
                let want: Vec<&str> = end.split('/').collect();
                // The path itself, or anything beneath it (`.config/gcloud/…`).
                (0..parts.len()).any(|stop| {
                    stop + 1 >= want.len()
                        && parts[stop + 1 - want.len()..=stop]
                            .iter()
                            .zip(&want)
                            .all(|(a, b)| a == b)
                })
            }
        }
    }

    /// How the table in ARCHITECTURE.md spells this entry.
    pub fn spelled(self) -> String {
        match self {
            PathPattern::InFolder(dir) => format!("`{dir}/`"),
            PathPattern::Name(name) => format!("`{name}`"),
            PathPattern::NamePrefix(prefix) => format!("`{prefix}*`"),
            PathPattern::NameSuffix(suffix) => format!("`*{suffix}`"),
            PathPattern::PathEnd(end) => format!("`{end}`"),
        }
    }
}

/// Why reading `relative` needs an explicit approval (it may hold secrets), or `None`.
pub fn secret_reason(relative: &Path) -> Option<String> {
    let parts = names(relative);
    let file = parts.last().map(String::as_str).unwrap_or_default();
    if let Some((rule, what)) = SECRET_FILES.iter().find(|(rule, _)| rule.matches(&parts)) {
        return Some(format!(
            "{file} matches {} and may hold {what}",
            rule.spelled()
        ));
    }
    // Other SSH keys: id_<word> with no extension (not id_helpers.rs), and their .pub halves.
    if let Some(rest) = file.strip_prefix("id_") {
        let stem = rest.strip_suffix(".pub").unwrap_or(rest);
        if !stem.is_empty() && !stem.contains('.') {
            return Some(format!("{file} looks like an SSH key"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protected(p: &str) -> bool {
        protected_reason(Path::new(p), &Path::new("/w").join(p), &OwnFiles::default()).is_some()
    }

    #[test]
    fn protected_paths() {
        assert!(protected(".git/hooks/pre-commit"));
        assert!(protected(".git/config"));
        assert!(protected("sub/.git/HEAD"));
        assert!(protected(".vscode/settings.json"));
        assert!(protected(".mcp.json"));
        assert!(protected(".bashrc"));
        assert!(protected(".config/fish/config.fish"));
        assert!(!protected("src/main.rs"));
        assert!(!protected(".vscode/launch.json"), "asked, not refused");
        for path in [
            ".vscode/settings.json",
            ".zed/settings.json",
            ".helix/languages.toml",
            ".nvim.lua",
            ".exrc",
            ".envrc",
            ".idea/workspace.xml",
            ".claude/settings.json",
            "team.code-workspace",
            ".bash_aliases",
            ".gitconfig",
            ".config/git/config",
            ".ssh/authorized_keys",
            ".ssh/config",
            ".config/fish/conf.d/evil.fish",
            ".config/autostart/evil.desktop",
            ".config/systemd/user/evil.service",
            ".local/bin/git",
        ] {
            assert!(protected(path), "{path} must be refused");
        }
        let ask = |p: &str| ask_reason(Path::new(p)).is_some();
        for path in [
            ".vscode/tasks.json",
            ".vscode/launch.json",
            ".zed/tasks.json",
            ".devcontainer/devcontainer.json",
            ".pre-commit-config.yaml",
            ".cargo/config.toml",
        ] {
            assert!(ask(path), "{path} must ask");
        }
        assert!(!ask("src/tasks.json"));
        assert!(!protected(".github/workflows/ci.yml"));
    }

    /// ARCHITECTURE.md's tables are these tables, row for row, in order.
    #[test]
    fn the_architecture_tables_list_every_pattern() {
        let doc = include_str!("../../ARCHITECTURE.md");
        for (header, table) in [
            ("| pattern | may hold |", SECRET_FILES),
            ("| pattern | runs code as |", RUNS_CODE_FILES),
            ("| pattern | asked because |", ASK_FILES),
        ] {
            let rows: Vec<&str> = doc
                .lines()
                .skip_while(|l| *l != header)
                .skip(2)
                .take_while(|l| l.starts_with('|'))
                .collect();
            let expected: Vec<String> = table
                .iter()
                .map(|(rule, what)| format!("| {} | {what} |", rule.spelled()))
                .collect();
            assert_eq!(
                rows, expected,
                "regenerate {header} in ARCHITECTURE.md's Threat model"
            );
        }
    }

    #[test]
    fn secret_paths() {
        let secret = |p: &str| secret_reason(Path::new(p)).is_some();
        assert!(secret(".env"));
        assert!(secret("app/.env.local"));
        assert!(secret("certs/server.pem"));
        assert!(secret("id_rsa"));
        assert!(secret("keys/id_ed25519.pub"));
        assert!(secret(".ssh/config"));
        assert!(secret(".aws/credentials"));
        // Credential files beyond the usual names (issue 21's list).
        for path in [
            ".npmrc",
            ".git-credentials",
            ".kube/config",
            ".docker/config.json",
            ".config/gh/hosts.yml",
            "deploy/credentials.json",
            ".pgpass",
            ".pypirc",
            "infra/terraform.tfstate",
            "k8s/secrets.yaml",
            "certs/client.p12",
            "certs/client.pfx",
            "backup/id_rsa.bak",
            ".git/config",
            "vendor/lib/.git/config",
            ".config/gcloud/application_default_credentials.json",
        ] {
            assert!(secret(path), "{path} must need an approval to read");
        }
        assert!(!secret("src/secrets.rs"));
        assert!(!secret("docs/keys.md"));
        assert!(!secret("id_helpers.rs"));
        assert!(!secret("src/credentials_test.rs"));
        assert!(!secret(".gitconfig.example"));
        assert!(secret(".netrc"));
        assert!(!secret("src/id_generator.rs"));
        assert!(!secret("environment.md"));
        assert!(secret(".envrc"));
        assert!(!secret(".envrc-docs/readme.md"));
    }
}
