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

/// Why reading `relative` needs an explicit approval (it may hold secrets), or `None`.
pub fn secret_reason(relative: &Path) -> Option<String> {
    let parts = names(relative);
    let file = parts.last().map(String::as_str).unwrap_or_default();
    if let Some(dir) = parts[..parts.len().saturating_sub(1)]
        .iter()
        .find(|p| matches!(p.as_str(), ".ssh" | ".aws" | ".gnupg"))
    {
        return Some(format!("it is inside {dir}/, which holds credentials"));
    }
    if file.starts_with(".env") {
        return Some(format!("{file} usually holds secrets"));
    }
    if file == ".netrc" || file.ends_with(".pem") || file.ends_with(".key") {
        return Some(format!("{file} usually holds credentials or keys"));
    }
    // SSH keys: id_rsa, id_ed25519, id_ecdsa and their .pub halves; not id_helpers.rs.
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
        assert!(secret(".netrc"));
        assert!(!secret("src/id_generator.rs"));
        assert!(!secret("environment.md"));
        assert!(secret(".envrc"));
        assert!(!secret(".envrc-docs/readme.md"));
    }
}
