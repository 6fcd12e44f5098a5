//! The real MCP servers the tests start (installed by `tests/mcp/setup`): the Python SDK's venv,
//! the SDK-written `stdio_server.py` and `http_server.py`, and the npm reference servers.
//!
//! Without the setup, `python()` fails the test with a message pointing at `tests/mcp/setup`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

/// Generous: the Python SDK takes a second or two to import on a loaded 2-core machine.
pub const MCP_STARTUP: Duration = Duration::from_secs(60);

/// `tests/mcp` of the checkout.
pub fn mcp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// The venv's python, checked to import the SDK.
pub fn python() -> PathBuf {
    let venv = std::env::var_os("TANDEM_MCP_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            dirs::home_dir()
                .expect("a home directory")
                .join(".cache/tandem/mcp-venv")
        });
    let python = venv.join("bin/python");
    let ok = std::process::Command::new(&python)
        .args(["-c", "import mcp.server, uvicorn"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "the MCP Python SDK is not installed at {}; run tests/mcp/setup first",
        venv.display()
    );
    python
}

/// The entry script of an npm reference server (`server-everything`, `server-filesystem`),
/// checked to exist.
pub fn npm_server(package: &str) -> PathBuf {
    let script = mcp_dir()
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        script.is_file(),
        "{} is missing; run tests/mcp/setup first",
        script.display()
    );
    script
}

/// A TOML table for `stdio_server.py` named `name`, with `extra` lines appended to the table.
pub fn stdio_server_toml(name: &str, extra: &str) -> String {
    format!(
        "[mcp_servers.{name}]\ncommand = {python:?}\nargs = [{script:?}]\nstartup_timeout_ms = 60000\n{extra}\n",
        python = python().display().to_string(),
        script = mcp_dir().join("stdio_server.py").display().to_string(),
    )
}

/// `tests/mcp/http_server.py`, killed when dropped.
pub struct PyServer {
    pub url: String,
    _child: tokio::process::Child,
}

impl PyServer {
    pub async fn start(extra: &[&str]) -> PyServer {
        let mut child = tokio::process::Command::new(python())
            .arg(mcp_dir().join("http_server.py"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // The SDK logs each session to stderr; a failed start shows in the missing URL.
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start tests/mcp/http_server.py");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        tokio::time::timeout(MCP_STARTUP, BufReader::new(stdout).read_line(&mut line))
            .await
            .expect("http_server.py printed no URL in time")
            .expect("read http_server.py's URL");
        let url = line.trim().to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "not a URL: {line:?}");
        PyServer { url, _child: child }
    }
}
