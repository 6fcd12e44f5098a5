//! Paths the agent may never edit, and paths whose contents need an explicit approval to read.
//!
//! Both checks run on the *resolved* path (symlinks followed inside the root, missing parents
//! spelled out), so a link named `notes.txt` that points at `.env`, or a write to
//! `link/pre-commit` where `link` points at `.git/hooks`, is caught like the direct spelling.

use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// Absolute paths outside the built-in patterns that are protected too: tandem's own config
/// file and its data directory (which holds the permission rules). Set once at startup.
static EXTRA_PROTECTED: OnceLock<Vec<PathBuf>> = OnceLock::new();

pub fn set_extra_protected(paths: Vec<PathBuf>) {
    let canonical: Vec<PathBuf> = paths
        .into_iter()
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
        .collect();
    let _ = EXTRA_PROTECTED.set(canonical);
}

/// Protect tandem's own files for this process: its config file and the directory of its
/// session database (which holds the permission rules). Every face calls this at start-up.
pub fn protect_own_files(config: Option<&Path>, database: Option<&Path>) {
    let mut protected: Vec<PathBuf> = config.map(Path::to_path_buf).into_iter().collect();
    if let Some(dir) = database.and_then(Path::parent) {
        protected.push(dir.to_path_buf());
    }
    set_extra_protected(protected);
}

/// The extra protected paths, for the shell sandbox to mount read-only.
pub fn extra_protected() -> Vec<PathBuf> {
    EXTRA_PROTECTED.get().cloned().unwrap_or_default()
}

/// Shell start-up files: a write there runs code in the user's next terminal.
const SHELL_RC: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".cshrc",
    ".tcshrc",
    ".kshrc",
];

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
/// prefix), or `None` if it may.
pub fn protected_reason(relative: &Path, absolute: &Path) -> Option<String> {
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
    if parts.len() >= 2 && parts[parts.len() - 2] == ".vscode" && file == "settings.json" {
        return Some("it is the editor's workspace settings (.vscode/settings.json)".to_owned());
    }
    if file == ".mcp.json" {
        return Some("it configures which MCP servers run (.mcp.json)".to_owned());
    }
    if SHELL_RC.contains(&file) || relative.ends_with(".config/fish/config.fish") {
        return Some(format!("it is a shell start-up file ({file})"));
    }
    if let Some(extra) = EXTRA_PROTECTED.get() {
        if extra.iter().any(|p| absolute.starts_with(p)) {
            return Some("it is tandem's own configuration or permission store".to_owned());
        }
    }
    None
}

/// How one entry of [`SECRET_FILES`] matches a path (relative to its root, links resolved).
#[derive(Debug, Clone, Copy)]
pub enum SecretMatch {
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
pub const SECRET_FILES: &[(SecretMatch, &str)] = &[
    (SecretMatch::InFolder(".ssh"), "SSH keys and config"),
    (SecretMatch::InFolder(".aws"), "AWS credentials"),
    (SecretMatch::InFolder(".gnupg"), "GnuPG keys"),
    (SecretMatch::InFolder(".kube"), "Kubernetes credentials"),
    (SecretMatch::InFolder(".azure"), "Azure credentials"),
    (SecretMatch::InFolder(".password-store"), "pass(1) secrets"),
    (
        SecretMatch::PathEnd(".config/gcloud"),
        "Google Cloud credentials",
    ),
    (
        SecretMatch::PathEnd(".docker/config.json"),
        "registry credentials",
    ),
    (
        SecretMatch::PathEnd(".config/gh/hosts.yml"),
        "GitHub CLI tokens",
    ),
    (SecretMatch::PathEnd(".config/hub"), "GitHub tokens"),
    (
        SecretMatch::PathEnd(".cargo/credentials"),
        "crates.io tokens",
    ),
    (
        SecretMatch::PathEnd(".cargo/credentials.toml"),
        "crates.io tokens",
    ),
    (SecretMatch::PathEnd(".gem/credentials"), "RubyGems tokens"),
    (
        SecretMatch::PathEnd(".git/config"),
        "remote URLs with tokens, auth headers",
    ),
    (SecretMatch::NamePrefix(".env"), "environment secrets"),
    (SecretMatch::Name(".netrc"), "login credentials"),
    (SecretMatch::Name("_netrc"), "login credentials"),
    (SecretMatch::Name(".npmrc"), "npm tokens"),
    (SecretMatch::Name(".yarnrc.yml"), "npm tokens"),
    (SecretMatch::Name(".pypirc"), "PyPI tokens"),
    (SecretMatch::Name(".pgpass"), "PostgreSQL passwords"),
    (SecretMatch::Name(".my.cnf"), "MySQL passwords"),
    (
        SecretMatch::Name(".git-credentials"),
        "git passwords and tokens",
    ),
    (SecretMatch::Name(".htpasswd"), "password hashes"),
    (SecretMatch::Name(".vault-token"), "Vault tokens"),
    (SecretMatch::Name(".boto"), "cloud credentials"),
    (SecretMatch::Name(".s3cfg"), "S3 credentials"),
    (SecretMatch::Name(".terraformrc"), "Terraform Cloud tokens"),
    (SecretMatch::Name("credentials"), "credentials"),
    (SecretMatch::Name("credentials.json"), "credentials"),
    (
        SecretMatch::Name("terraform.tfstate"),
        "secrets in Terraform state",
    ),
    (
        SecretMatch::Name("terraform.tfstate.backup"),
        "secrets in Terraform state",
    ),
    (SecretMatch::Name("secrets.yaml"), "secrets"),
    (SecretMatch::Name("secrets.yml"), "secrets"),
    (SecretMatch::Name("secrets.json"), "secrets"),
    (SecretMatch::Name("secrets.toml"), "secrets"),
    (
        SecretMatch::NamePrefix("client_secret"),
        "OAuth client secrets",
    ),
    (
        SecretMatch::NamePrefix("service-account"),
        "cloud service-account keys",
    ),
    (
        SecretMatch::NameSuffix(".tfvars"),
        "Terraform variables (often secrets)",
    ),
    (SecretMatch::NameSuffix(".pem"), "keys or certificates"),
    (SecretMatch::NameSuffix(".key"), "private keys"),
    (SecretMatch::NameSuffix(".p12"), "key stores"),
    (SecretMatch::NameSuffix(".pfx"), "key stores"),
    (SecretMatch::NameSuffix(".jks"), "Java key stores"),
    (SecretMatch::NameSuffix(".keystore"), "key stores"),
    (SecretMatch::NameSuffix(".kdbx"), "KeePass databases"),
    (SecretMatch::NameSuffix(".ovpn"), "VPN keys"),
    (SecretMatch::NamePrefix("id_rsa"), "an SSH key"),
    (SecretMatch::NamePrefix("id_dsa"), "an SSH key"),
    (SecretMatch::NamePrefix("id_ecdsa"), "an SSH key"),
    (SecretMatch::NamePrefix("id_ed25519"), "an SSH key"),
];

impl SecretMatch {
    fn matches(self, parts: &[String]) -> bool {
        let file = parts.last().map(String::as_str).unwrap_or_default();
        match self {
            SecretMatch::InFolder(dir) => parts[..parts.len().saturating_sub(1)]
                .iter()
                .any(|p| p == dir),
            SecretMatch::Name(name) => file == name,
            SecretMatch::NamePrefix(prefix) => file.starts_with(prefix),
            SecretMatch::NameSuffix(suffix) => file.len() > suffix.len() && file.ends_with(suffix),
            SecretMatch::PathEnd(end) => {
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
            SecretMatch::InFolder(dir) => format!("`{dir}/`"),
            SecretMatch::Name(name) => format!("`{name}`"),
            SecretMatch::NamePrefix(prefix) => format!("`{prefix}*`"),
            SecretMatch::NameSuffix(suffix) => format!("`*{suffix}`"),
            SecretMatch::PathEnd(end) => format!("`{end}`"),
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
        protected_reason(Path::new(p), &Path::new("/w").join(p)).is_some()
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
        assert!(!protected(".vscode/launch.json"));
        assert!(!protected(".github/workflows/ci.yml"));
    }

    /// ARCHITECTURE.md's credential table is this table, row for row, in order.
    #[test]
    fn the_architecture_table_lists_every_secret_pattern() {
        let doc = include_str!("../../ARCHITECTURE.md");
        let rows: Vec<&str> = doc
            .lines()
            .skip_while(|l| *l != "| pattern | may hold |")
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .collect();
        let expected: Vec<String> = SECRET_FILES
            .iter()
            .map(|(rule, what)| format!("| {} | {what} |", rule.spelled()))
            .collect();
        assert_eq!(
            rows, expected,
            "regenerate the table in ARCHITECTURE.md's Threat model"
        );
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
