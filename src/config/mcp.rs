//! MCP server definitions: the `[mcp_servers.NAME]` tables of tandem's config, the `mcpServers`
//! a client sends with `session/new` (ACP's shape, which the native face takes too), and a
//! workspace's `.mcp.json` (Claude Code's shape). All three become one [`McpServerConfig`], so
//! the hub that starts servers never knows where a definition came from except through its
//! [`McpSource`].
//!
//! Invariants: a definition names exactly one transport; an SSE-only definition is refused here
//! with an error naming the transport, never started; a name is what the user wrote (the
//! model-facing tool names are derived from it in `mcp::names`).
//! Does not: start anything, read the environment (`env_vars` are names; the hub reads their
//! values when it starts a server), or decide trust.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// How long a server may take to start and list its tools before its status is `failed`.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 10_000;
/// How long one tool call may take before it is a tool error naming the server.
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 60_000;

/// Where a server definition came from; it decides trust and what `mcp/status` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum McpSource {
    /// tandem's own config file: the user wrote it, so it is trusted.
    Config,
    /// The client's `session/new` (or ACP `session/load`/`resume`): the editor's settings.
    Session,
    /// A workspace's `.mcp.json`: anyone who could write the repository wrote it, so its
    /// servers start only after the user trusts them (`mcp/trust`).
    Workspace,
}

impl McpSource {
    pub fn as_str(self) -> &'static str {
        match self {
            McpSource::Config => "config",
            McpSource::Session => "session",
            McpSource::Workspace => "workspace",
        }
    }
}

/// How tandem reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking JSON-RPC on its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Literal values, set as given.
        env: BTreeMap<String, String>,
        /// Names of variables passed through from tandem's own environment; nothing else of it
        /// is (the provider keys least of all).
        env_vars: Vec<String>,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        /// The environment variable holding a bearer token, sent as `Authorization: Bearer`.
        bearer_token_env: Option<String>,
        headers: BTreeMap<String, String>,
    },
}

/// One MCP server as tandem starts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    pub name: String,
    pub source: McpSource,
    pub transport: McpTransport,
    pub startup_timeout_ms: u64,
    pub tool_timeout_ms: u64,
    /// When set, only these tools of the server are offered.
    pub enabled_tools: Option<Vec<String>>,
    /// Tools of the server never offered.
    pub disabled_tools: Vec<String>,
    /// Whether a tool annotated `readOnlyHint: true` runs without approval (and concurrently
    /// with other reads). Annotations are the server's word, so this is off unless the user
    /// turned it on for this server.
    pub trust_read_only_hints: bool,
}

impl McpServerConfig {
    /// Whether the model is offered the server's tool `tool`.
    pub fn offers(&self, tool: &str) -> bool {
        let enabled = self
            .enabled_tools
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == tool));
        enabled && !self.disabled_tools.iter().any(|n| n == tool)
    }
}

/// A definition that cannot be used, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP server `{name}`: {message}")]
pub struct McpConfigError {
    pub name: String,
    pub message: String,
}

/// The `args` of server `name` (absent or null: none), in either JSON shape's definition.
fn string_list(name: &str, args: Option<&Value>) -> Result<Vec<String>, McpConfigError> {
    match args {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|a| {
                a.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| config_error(name, "args must be strings"))
            })
            .collect(),
        Some(_) => Err(config_error(name, "args must be a list of strings")),
    }
}

fn config_error(name: &str, message: impl Into<String>) -> McpConfigError {
    McpConfigError {
        name: name.to_owned(),
        message: message.into(),
    }
}

/// A `[mcp_servers.NAME]` table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMcpServer {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    env_vars: Vec<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    bearer_token_env: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    startup_timeout_ms: Option<u64>,
    #[serde(default)]
    tool_timeout_ms: Option<u64>,
    #[serde(default)]
    enabled_tools: Option<Vec<String>>,
    #[serde(default)]
    disabled_tools: Vec<String>,
    #[serde(default)]
    trust_read_only_hints: bool,
}

impl RawMcpServer {
    /// The server of tandem's config named `name`.
    pub fn into_config(self, name: &str) -> Result<McpServerConfig, McpConfigError> {
        let transport = transport(
            name,
            self.kind.as_deref(),
            self.command,
            self.args,
            self.env,
            self.url,
            self.headers,
        )?;
        let transport = match transport {
            McpTransport::Stdio {
                command, args, env, ..
            } => {
                if self.bearer_token_env.is_some() {
                    return Err(config_error(
                        name,
                        "bearer_token_env is for HTTP servers (url = …); remove it or give a url instead of a command",
                    ));
                }
                McpTransport::Stdio {
                    command,
                    args,
                    env,
                    env_vars: self.env_vars,
                }
            }
            McpTransport::Http { url, headers, .. } => {
                if !self.env_vars.is_empty() {
                    return Err(config_error(
                        name,
                        "env_vars is for stdio servers (command = …); an HTTP server gets headers and bearer_token_env",
                    ));
                }
                McpTransport::Http {
                    url,
                    bearer_token_env: self.bearer_token_env,
                    headers,
                }
            }
        };
        for (key, value) in [
            ("startup_timeout_ms", self.startup_timeout_ms),
            ("tool_timeout_ms", self.tool_timeout_ms),
        ] {
            if value == Some(0) {
                return Err(config_error(
                    name,
                    format!("{key} = 0 would fail every call; give milliseconds above 0 or leave it out"),
                ));
            }
        }
        Ok(McpServerConfig {
            name: checked_name(name)?,
            source: McpSource::Config,
            transport,
            startup_timeout_ms: self
                .startup_timeout_ms
                .unwrap_or(DEFAULT_STARTUP_TIMEOUT_MS),
            tool_timeout_ms: self.tool_timeout_ms.unwrap_or(DEFAULT_TOOL_TIMEOUT_MS),
            enabled_tools: self.enabled_tools,
            disabled_tools: self.disabled_tools,
            trust_read_only_hints: self.trust_read_only_hints,
        })
    }
}

/// A server name must be non-empty and printable; the model-facing tool names are derived
/// from it, and status lines and errors show it.
fn checked_name(name: &str) -> Result<String, McpConfigError> {
    if name.trim().is_empty() {
        return Err(config_error(name, "the server needs a name"));
    }
    if name.len() > 128 || name.chars().any(char::is_control) {
        return Err(config_error(
            name,
            "a server name is at most 128 bytes without control characters; rename it",
        ));
    }
    Ok(name.to_owned())
}

/// The one transport a definition names.
fn transport(
    name: &str,
    kind: Option<&str>,
    command: Option<String>,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    url: Option<String>,
    headers: BTreeMap<String, String>,
) -> Result<McpTransport, McpConfigError> {
    match kind {
        Some("sse") => {
            return Err(config_error(
                name,
                "the SSE transport is not supported (it is deprecated in MCP); use the server's streamable HTTP endpoint (type = \"http\") or run it over stdio",
            ))
        }
        None | Some("stdio") | Some("http") | Some("streamable-http") | Some("streamableHttp") => {}
        Some(other) => {
            return Err(config_error(
                name,
                format!("unknown transport type `{other}`; use \"stdio\" (command = …) or \"http\" (url = …)"),
            ))
        }
    }
    match (command, url) {
        (Some(_), Some(_)) => Err(config_error(
            name,
            "give either command (a stdio server) or url (an HTTP server), not both",
        )),
        (None, None) => Err(config_error(
            name,
            "give command (a stdio server) or url (an HTTP server)",
        )),
        (Some(command), None) => {
            if kind.is_some_and(|k| k != "stdio") {
                return Err(config_error(
                    name,
                    "type says HTTP but the server has a command; give a url",
                ));
            }
            if command.trim().is_empty() {
                return Err(config_error(
                    name,
                    "command is empty; give the program to run",
                ));
            }
            Ok(McpTransport::Stdio {
                command,
                args,
                env,
                env_vars: Vec::new(),
            })
        }
        (None, Some(url)) => {
            if kind == Some("stdio") {
                return Err(config_error(
                    name,
                    "type says stdio but the server has a url; give a command",
                ));
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(config_error(
                    name,
                    format!("url `{url}` is not an http:// or https:// address"),
                ));
            }
            if !args.is_empty() || !env.is_empty() {
                return Err(config_error(
                    name,
                    "args and env are for stdio servers; an HTTP server gets headers",
                ));
            }
            Ok(McpTransport::Http {
                url,
                bearer_token_env: None,
                headers,
            })
        }
    }
}

/// One entry of a client's `mcpServers` (ACP's `McpServer`): stdio
/// `{name, command, args, env: [{name, value}]}`, or `{type: "http", name, url, headers:
/// [{name, value}]}`; `{type: "sse", …}` is refused.
pub fn session_server(value: &Value) -> Result<McpServerConfig, McpConfigError> {
    let name = value
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let pairs = |key: &str| -> Result<BTreeMap<String, String>, McpConfigError> {
        let mut out = BTreeMap::new();
        let Some(list) = value.get(key) else {
            return Ok(out);
        };
        let Some(list) = list.as_array() else {
            return Err(config_error(
                &name,
                format!("{key} must be a list of {{name, value}}"),
            ));
        };
        for pair in list {
            match (
                pair.get("name").and_then(Value::as_str),
                pair.get("value").and_then(Value::as_str),
            ) {
                (Some(k), Some(v)) => {
                    out.insert(k.to_owned(), v.to_owned());
                }
                _ => {
                    return Err(config_error(
                        &name,
                        format!("each entry of {key} needs a string name and value"),
                    ))
                }
            }
        }
        Ok(out)
    };
    let args = string_list(&name, value.get("args"))?;
    let kind = value.get("type").and_then(Value::as_str);
    let transport = transport(
        &name,
        kind,
        value
            .get("command")
            .and_then(Value::as_str)
            .map(str::to_owned),
        args,
        pairs("env")?,
        value.get("url").and_then(Value::as_str).map(str::to_owned),
        pairs("headers")?,
    )?;
    Ok(McpServerConfig {
        name: checked_name(&name)?,
        source: McpSource::Session,
        transport,
        startup_timeout_ms: DEFAULT_STARTUP_TIMEOUT_MS,
        tool_timeout_ms: DEFAULT_TOOL_TIMEOUT_MS,
        enabled_tools: None,
        disabled_tools: Vec::new(),
        trust_read_only_hints: false,
    })
}

/// The servers of a workspace's `.mcp.json`: `{"mcpServers": {NAME: {command, args, env} |
/// {type: "http", url, headers}}}` (env and headers as objects, Claude Code's shape). Each
/// entry is parsed on its own, so one bad server does not hide the others.
pub fn workspace_servers(
    text: &str,
) -> Result<Vec<Result<McpServerConfig, McpConfigError>>, String> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("it is not valid JSON ({e}); fix it or remove it"))?;
    let Some(servers) = value.get("mcpServers").and_then(Value::as_object) else {
        return Err("it has no \"mcpServers\" object; see the MCP section of README".to_owned());
    };
    Ok(servers
        .iter()
        .map(|(name, entry)| {
            let map = |key: &str| -> Result<BTreeMap<String, String>, McpConfigError> {
                match entry.get(key) {
                    None | Some(Value::Null) => Ok(BTreeMap::new()),
                    Some(Value::Object(map)) => map
                        .iter()
                        .map(|(k, v)| {
                            v.as_str()
                                .map(|v| (k.clone(), v.to_owned()))
                                .ok_or_else(|| {
                                    config_error(name, format!("{key}.{k} must be a string"))
                                })
                        })
                        .collect(),
                    Some(_) => Err(config_error(
                        name,
                        format!("{key} must be an object of strings"),
                    )),
                }
            };
            let args = string_list(name, entry.get("args"))?;
            let transport = transport(
                name,
                entry.get("type").and_then(Value::as_str),
                entry
                    .get("command")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                args,
                map("env")?,
                entry.get("url").and_then(Value::as_str).map(str::to_owned),
                map("headers")?,
            )?;
            Ok(McpServerConfig {
                name: checked_name(name)?,
                source: McpSource::Workspace,
                transport,
                startup_timeout_ms: DEFAULT_STARTUP_TIMEOUT_MS,
                tool_timeout_ms: DEFAULT_TOOL_TIMEOUT_MS,
                enabled_tools: None,
                disabled_tools: Vec::new(),
                trust_read_only_hints: false,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_toml(text: &str) -> Result<McpServerConfig, McpConfigError> {
        let raw: RawMcpServer = toml::from_str(text).expect("valid TOML");
        raw.into_config("s")
    }

    #[test]
    fn the_design_examples_parse() {
        let files = from_toml(
            r#"command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
env = { LOG_LEVEL = "warn" }
env_vars = ["GITHUB_TOKEN"]
enabled_tools = ["read_file"]"#,
        )
        .unwrap();
        assert_eq!(files.startup_timeout_ms, DEFAULT_STARTUP_TIMEOUT_MS);
        assert!(files.offers("read_file"));
        assert!(!files.offers("write_file"));
        match files.transport {
            McpTransport::Stdio { env, env_vars, .. } => {
                assert_eq!(env.get("LOG_LEVEL").map(String::as_str), Some("warn"));
                assert_eq!(env_vars, vec!["GITHUB_TOKEN"]);
            }
            other => panic!("{other:?}"),
        }
        let docs = from_toml(
            r#"url = "http://127.0.0.1:8931/mcp"
bearer_token_env = "DOCS_TOKEN"
disabled_tools = ["drop"]"#,
        )
        .unwrap();
        assert!(!docs.offers("drop"));
        assert!(matches!(
            docs.transport,
            McpTransport::Http { bearer_token_env: Some(ref v), .. } if v == "DOCS_TOKEN"
        ));
    }

    #[test]
    fn a_definition_names_one_usable_transport() {
        for (text, says) in [
            (
                r#"type = "sse"
url = "http://x/sse""#,
                "SSE transport is not supported",
            ),
            (
                r#"command = "a"
url = "http://x""#,
                "not both",
            ),
            ("args = []", "give command"),
            (r#"url = "ftp://x""#, "not an http"),
            (
                r#"command = "a"
bearer_token_env = "T""#,
                "bearer_token_env is for HTTP",
            ),
            (
                r#"command = "a"
tool_timeout_ms = 0"#,
                "tool_timeout_ms = 0",
            ),
        ] {
            let error = from_toml(text).unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn session_and_workspace_shapes_parse_and_refuse_sse() {
        let stdio = session_server(&serde_json::json!({
            "name": "fs", "command": "npx", "args": ["x"], "env": [{"name": "A", "value": "1"}]
        }))
        .unwrap();
        assert_eq!(stdio.source, McpSource::Session);
        let http = session_server(&serde_json::json!({
            "type": "http", "name": "docs", "url": "http://127.0.0.1:1/mcp",
            "headers": [{"name": "X-Key", "value": "k"}]
        }))
        .unwrap();
        assert!(
            matches!(http.transport, McpTransport::Http { ref headers, .. } if headers["X-Key"] == "k")
        );
        let sse = session_server(&serde_json::json!({
            "type": "sse", "name": "old", "url": "http://127.0.0.1:1/sse", "headers": []
        }))
        .unwrap_err();
        assert!(sse.to_string().contains("SSE"), "{sse}");
        let servers = workspace_servers(
            r#"{"mcpServers": {"a": {"command": "node", "args": ["s.js"], "env": {"K": "v"}},
                               "b": {"type": "http", "url": "https://x/mcp"},
                               "c": {"args": []}}}"#,
        )
        .unwrap();
        assert_eq!(servers.len(), 3);
        assert_eq!(servers[0].as_ref().unwrap().source, McpSource::Workspace);
        assert!(servers[1].is_ok());
        assert!(servers[2].is_err());
        assert!(workspace_servers("{")
            .unwrap_err()
            .contains("not valid JSON"));
    }

    #[test]
    fn args_that_are_not_strings_are_refused_in_both_shapes() {
        let bad = session_server(&serde_json::json!({"name": "s", "command": "x", "args": [1]}))
            .unwrap_err();
        assert_eq!(
            (bad.name.as_str(), bad.message.as_str()),
            ("s", "args must be strings")
        );
        let entries =
            workspace_servers(r#"{"mcpServers": {"w": {"command": "x", "args": "a b"}}}"#).unwrap();
        let bad = entries.into_iter().next().unwrap().unwrap_err();
        assert_eq!(
            (bad.name.as_str(), bad.message.as_str()),
            ("w", "args must be a list of strings")
        );
        let fine =
            session_server(&serde_json::json!({"name": "s", "command": "x", "args": ["-v"]}))
                .unwrap();
        assert!(matches!(fine.transport, McpTransport::Stdio { ref args, .. } if args == &["-v"]));
    }
}
