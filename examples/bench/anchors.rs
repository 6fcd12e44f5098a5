//! The anchor programs the suite compares tandem with, installed on first use into
//! `<target>/bench-tools` (outside the source tree, reused by later runs):
//! - Codex app-server from the npm package `@openai/codex` (its native binary ships in the
//!   optional platform package, e.g. `@openai/codex-linux-x64`);
//! - ripgrep 14 or newer, built with `cargo install ripgrep --locked`.
//!
//! `CODEX_BIN` and `RG_BIN` name existing binaries instead.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{progress, target_dir, Result};

/// The Codex release the figures in the README were taken with.
pub const CODEX_VERSION: &str = "0.171.0";
const RG_MIN_MAJOR: u32 = 14;

pub fn tools_dir() -> PathBuf {
    std::env::var_os("TANDEM_BENCH_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("bench-tools"))
}

/// The native `codex` binary, installed with npm when missing.
pub fn codex() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("CODEX_BIN") {
        return Ok(PathBuf::from(path));
    }
    let dir = tools_dir().join("codex");
    if let Some(found) = find_codex(&dir) {
        return Ok(found);
    }
    progress(&format!(
        "installing @openai/codex@{CODEX_VERSION} with npm into {}",
        dir.display()
    ));
    std::fs::create_dir_all(&dir)?;
    let manifest = dir.join("package.json");
    if !manifest.exists() {
        std::fs::write(
            &manifest,
            "{\"name\":\"tandem-bench-tools\",\"private\":true}\n",
        )?;
    }
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--no-save"])
        .arg(format!("@openai/codex@{CODEX_VERSION}"))
        .current_dir(&dir)
        .status()
        .map_err(|e| format!("cannot run npm ({e}); install Node.js and npm, or set CODEX_BIN"))?;
    if !status.success() {
        return Err(format!("`npm install @openai/codex@{CODEX_VERSION}` failed ({status}); see its output above, or set CODEX_BIN").into());
    }
    find_codex(&dir).ok_or_else(|| {
        format!(
            "npm installed @openai/codex but no native binary for this platform was found under {}; set CODEX_BIN",
            dir.join("node_modules/@openai").display()
        )
        .into()
    })
}

/// `node_modules/@openai/codex-<platform>/vendor/<triple>/bin/codex`.
fn find_codex(dir: &Path) -> Option<PathBuf> {
    let scope = dir.join("node_modules/@openai");
    for package in std::fs::read_dir(&scope).ok()?.flatten() {
        let name = package.file_name();
        if !name.to_string_lossy().starts_with("codex-") {
            continue;
        }
        for triple in std::fs::read_dir(package.path().join("vendor"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let candidate = triple.path().join("bin/codex");
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// ripgrep 14+, installed with `cargo install` when missing (Debian 12 ships 13).
pub fn rg() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("RG_BIN") {
        let path = PathBuf::from(path);
        check_rg(&path)?;
        return Ok(path);
    }
    let root = tools_dir();
    let path = root.join("bin/rg");
    if !path.is_file() {
        progress(&format!(
            "installing ripgrep with `cargo install ripgrep --locked --root {}` (a few minutes)",
            root.display()
        ));
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["install", "ripgrep", "--locked", "--root"])
            .arg(&root)
            // The suite's own target dir must not be reused for an unrelated crate.
            .env_remove("CARGO_TARGET_DIR")
            .status()?;
        if !status.success() {
            return Err(format!("`cargo install ripgrep` failed ({status}); or set RG_BIN to ripgrep {RG_MIN_MAJOR}+").into());
        }
    }
    check_rg(&path)?;
    Ok(path)
}

/// The suite compares with ripgrep's current defaults, so an old one is refused.
fn check_rg(path: &Path) -> Result<String> {
    let output = Command::new(path).arg("--version").output()?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let version = text
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_owned();
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < RG_MIN_MAJOR {
        return Err(format!(
            "{} is ripgrep {version}; the benchmark needs {RG_MIN_MAJOR} or newer",
            path.display()
        )
        .into());
    }
    Ok(version)
}

pub fn rg_version(path: &Path) -> String {
    check_rg(path).unwrap_or_else(|_| "unknown".to_owned())
}
