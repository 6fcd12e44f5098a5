//! Configuration: the TOML file of providers and models, and the built-in offline default.
//!
//! Errors name the file, the key and what to do, because a user who mistyped a provider name
//! should not have to read source code to find out why the server refused to start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub mod mcp;
pub mod slash_commands;

use serde::Deserialize;

/// The model id of the built-in offline provider.
pub const SCRIPTED_MODEL_ID: &str = "scripted";

/// The default cap on model requests in one turn: the last guard, not a working limit.
pub const DEFAULT_MAX_ITERATIONS: u32 = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible `/chat/completions` with streaming (OpenAI, OpenRouter, Ollama, vLLM,
    /// llama.cpp, LM Studio).
    Openai,
    /// Anthropic's Messages API (`/v1/messages`) with streaming.
    Anthropic,
    /// Google's Gemini API (`/v1beta/models/{model}:streamGenerateContent`).
    Gemini,
    /// The built-in offline demo provider.
    Scripted,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    #[serde(default)]
    pub base_url: Option<String>,
    /// The environment variable holding the API key; the key itself never lives in the file.
    #[serde(default)]
    pub api_key_env: Option<String>,
}

/// One model of the catalog, with every capability resolved.
///
/// Fields the config leaves out come from [`known_model`] (by the provider-side `name`), then
/// from conservative defaults, so `initialize` and the engine always see a complete entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "RawModelConfig")]
pub struct ModelConfig {
    pub provider: String,
    /// The model name sent to the provider.
    pub name: String,
    pub context_window: u64,
    /// The most tokens one answer may have; sent as the request's output limit when known
    /// (Anthropic requires one, so it falls back to 8192 there).
    pub max_output_tokens: Option<u64>,
    /// Whether the model accepts images; images are replaced in the outbound view otherwise.
    pub vision: bool,
    /// Whether the model reads PDF documents natively; replaced in the outbound view otherwise.
    pub pdf: bool,
    /// Whether the model thinks before it answers (reasoning text, thinking blocks).
    pub reasoning: bool,
    /// Whether the model may call several tools in one answer.
    pub parallel_tool_calls: bool,
    /// The thinking budget in tokens: Anthropic's `thinking.budget_tokens` and Gemini's
    /// `thinkingConfig.thinkingBudget`. Without it Anthropic models answer without extended
    /// thinking and Gemini thinks with its own default budget.
    pub thinking_budget: Option<u64>,
}

/// The config file's shape of a model: everything but `provider` and `name` is optional.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModelConfig {
    provider: String,
    name: String,
    #[serde(default)]
    context_window: Option<u64>,
    #[serde(default)]
    max_output_tokens: Option<u64>,
    #[serde(default)]
    vision: Option<bool>,
    #[serde(default)]
    pdf: Option<bool>,
    #[serde(default)]
    reasoning: Option<bool>,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
    #[serde(default)]
    thinking_budget: Option<u64>,
}

impl From<RawModelConfig> for ModelConfig {
    fn from(raw: RawModelConfig) -> Self {
        let known = known_model(&raw.name);
        ModelConfig {
            context_window: raw
                .context_window
                .or(known.map(|k| k.context_window))
                .unwrap_or_else(default_context_window),
            max_output_tokens: raw.max_output_tokens.or(known.map(|k| k.max_output_tokens)),
            vision: raw.vision.or(known.map(|k| k.vision)).unwrap_or(false),
            pdf: raw.pdf.or(known.map(|k| k.pdf)).unwrap_or(false),
            // A thinking budget says the user wants the model to think.
            reasoning: raw
                .reasoning
                .or(raw.thinking_budget.map(|_| true))
                .or(known.map(|k| k.reasoning))
                .unwrap_or(false),
            parallel_tool_calls: raw
                .parallel_tool_calls
                .or(known.map(|k| k.parallel_tool_calls))
                .unwrap_or(true),
            thinking_budget: raw.thinking_budget,
            provider: raw.provider,
            name: raw.name,
        }
    }
}

/// What tandem knows about a well-known model id, used for fields the config leaves out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KnownModel {
    pub context_window: u64,
    pub max_output_tokens: u64,
    pub vision: bool,
    pub pdf: bool,
    pub reasoning: bool,
    pub parallel_tool_calls: bool,
}

/// Capabilities of well-known model families, matched by prefix of the provider-side name
/// (the first matching prefix wins, so longer prefixes come first). Vendor prefixes such as
/// `models/`, `anthropic/` or `openai/` (OpenRouter) are ignored.
const KNOWN_MODELS: &[(&str, KnownModel)] = &[
    (
        "claude-3-5-haiku",
        known(200_000, 8_192, true, true, false, true),
    ),
    (
        "claude-3-5-sonnet",
        known(200_000, 8_192, true, true, false, true),
    ),
    (
        "claude-3-7-sonnet",
        known(200_000, 64_000, true, true, true, true),
    ),
    (
        "claude-3-haiku",
        known(200_000, 4_096, true, false, false, true),
    ),
    (
        "claude-3-opus",
        known(200_000, 4_096, true, false, false, true),
    ),
    (
        "claude-opus-4-5",
        known(200_000, 64_000, true, true, true, true),
    ),
    (
        "claude-opus-4",
        known(200_000, 32_000, true, true, true, true),
    ),
    (
        "claude-sonnet-4",
        known(200_000, 64_000, true, true, true, true),
    ),
    (
        "claude-haiku-4",
        known(200_000, 64_000, true, true, true, true),
    ),
    ("claude-", known(200_000, 8_192, true, true, false, true)),
    (
        "gemini-1.5-pro",
        known(2_097_152, 8_192, true, true, false, true),
    ),
    (
        "gemini-1.5",
        known(1_048_576, 8_192, true, true, false, true),
    ),
    (
        "gemini-2.0",
        known(1_048_576, 8_192, true, true, false, true),
    ),
    (
        "gemini-2.5",
        known(1_048_576, 65_536, true, true, true, true),
    ),
    ("gemini-3", known(1_048_576, 65_536, true, true, true, true)),
    ("gemini-", known(1_048_576, 8_192, true, true, false, true)),
    ("gpt-4o", known(128_000, 16_384, true, true, false, true)),
    ("gpt-4.1", known(1_047_576, 32_768, true, true, false, true)),
    ("gpt-5", known(400_000, 128_000, true, true, true, true)),
    ("o1", known(200_000, 100_000, true, true, true, false)),
    ("o3", known(200_000, 100_000, true, true, true, true)),
    ("o4-mini", known(200_000, 100_000, true, true, true, true)),
];

const fn known(
    context_window: u64,
    max_output_tokens: u64,
    vision: bool,
    pdf: bool,
    reasoning: bool,
    parallel_tool_calls: bool,
) -> KnownModel {
    KnownModel {
        context_window,
        max_output_tokens,
        vision,
        pdf,
        reasoning,
        parallel_tool_calls,
    }
}

/// The catalog entry for a provider-side model name, if tandem knows its family.
pub fn known_model(name: &str) -> Option<KnownModel> {
    let bare = name.rsplit('/').next().unwrap_or(name);
    KNOWN_MODELS
        .iter()
        .find(|(prefix, _)| bare.starts_with(prefix))
        .map(|(_, k)| *k)
}

fn default_context_window() -> u64 {
    128_000
}

fn default_max_iterations() -> u32 {
    DEFAULT_MAX_ITERATIONS
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub default_model: String,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    #[serde(default)]
    pub models: BTreeMap<String, ModelConfig>,
    /// The most model requests one turn may make before it ends with `maxIterations`.
    #[serde(default = "default_max_iterations")]
    pub max_iterations: u32,
    /// How long a stopped shell command gets after SIGINT before SIGKILL, in milliseconds.
    #[serde(default = "default_shell_grace_ms")]
    pub shell_kill_grace_ms: u64,
    /// Attempts per model request on retriable failures (5xx, 429, transport errors, streams cut
    /// short), including the first.
    #[serde(default = "default_provider_attempts")]
    pub provider_max_attempts: u32,
    /// The first retry delay; each further retry doubles it (with jitter), up to the maximum.
    #[serde(default = "default_retry_base_ms")]
    pub retry_base_delay_ms: u64,
    #[serde(default = "default_retry_max_ms")]
    pub retry_max_delay_ms: u64,
    /// The longest `Retry-After` honoured; longer waits are capped so a turn never hangs for hours.
    #[serde(default = "default_retry_after_cap_ms")]
    pub retry_after_cap_ms: u64,
    /// A stream that sends nothing for this long is treated as broken and retried.
    #[serde(default = "default_idle_timeout_ms")]
    pub stream_idle_timeout_ms: u64,
    /// Compact the history before a request estimated above this share of the context window.
    #[serde(default = "default_compaction_threshold")]
    pub compaction_threshold: f64,
    /// Names of environment variables that shell commands inherit besides the minimal set
    /// (`tools::shell::INHERITED_ENV`, `LC_*`); a provider's `api_key_env` is never passed.
    #[serde(default)]
    pub shell_env: Vec<String>,
    /// The most processes one shell command may have at once (a pids cgroup, where tandem can
    /// make one); a fork bomb hits this instead of the machine.
    #[serde(default = "default_shell_max_processes")]
    pub shell_max_processes: u64,
    /// The most bytes of one model answer's text: past it the stream is cut and the turn ends
    /// with an error that says so (a hostile or broken provider cannot fill memory or the store).
    #[serde(default = "default_max_answer_bytes")]
    pub max_answer_bytes: usize,
    /// The same cap for one answer's reasoning text.
    #[serde(default = "default_max_answer_bytes")]
    pub max_reasoning_bytes: usize,
    /// The most bytes of one tool call's arguments: past it the stream is cut and the call fails
    /// with a tool error the model can act on (a `write_file` of a huge file must be split).
    #[serde(default = "default_max_tool_arguments_bytes")]
    pub max_tool_arguments_bytes: usize,
    /// The most bytes queued for one client that does not read its stdout: past it streamed
    /// pieces (deltas, shell output) are dropped and a `streamTruncated` event says which, while
    /// every other event still reaches the client in order once it reads again.
    #[serde(default = "default_outbound_buffer_bytes")]
    pub outbound_buffer_bytes: usize,
    /// The most bytes waiting for one WebSocket client behind the message being written (`serve
    /// --listen`): past it the client is disconnected (it attaches again from its last `seq`).
    /// Keep it above `outbound_buffer_bytes` plus the largest message (16 MiB), or a client
    /// reading a large answer slowly is disconnected too.
    #[serde(default = "default_attach_backlog_bytes")]
    pub attach_backlog_bytes: usize,
    /// The most `steer` texts queued in one turn before its next safe point; past it `steer`
    /// answers `steeringQueueFull` (what is queued is applied as one message at the safe point).
    #[serde(default = "default_max_queued_steering")]
    pub max_queued_steering: usize,
    /// The most bytes of steering text queued in one turn, for the same reason.
    #[serde(default = "default_max_queued_steering_bytes")]
    pub max_queued_steering_bytes: usize,
    /// `[mcp_servers.NAME]` tables as written; [`Config::parse`] checks them into
    /// [`Config::mcp_servers`].
    #[serde(default, rename = "mcp_servers")]
    raw_mcp_servers: BTreeMap<String, mcp::RawMcpServer>,
    /// The MCP servers every session starts (see `mcp::McpHub`), in name order.
    #[serde(skip)]
    pub mcp_servers: Vec<mcp::McpServerConfig>,
    /// The file this config was read from; tandem protects it from the agent.
    #[serde(skip)]
    pub source_path: Option<PathBuf>,
}

fn default_provider_attempts() -> u32 {
    5
}
fn default_retry_base_ms() -> u64 {
    500
}
fn default_retry_max_ms() -> u64 {
    8_000
}
fn default_retry_after_cap_ms() -> u64 {
    30_000
}
fn default_idle_timeout_ms() -> u64 {
    90_000
}
fn default_compaction_threshold() -> f64 {
    0.8
}

fn default_max_answer_bytes() -> usize {
    // About a million tokens of text: far above any model's output limit (128K tokens is about
    // 512 KB), far below what hurts memory or the store.
    4 * 1024 * 1024
}
fn default_max_tool_arguments_bytes() -> usize {
    // A `write_file` of a large generated file fits; a provider streaming garbage does not.
    8 * 1024 * 1024
}
fn default_outbound_buffer_bytes() -> usize {
    32 * 1024 * 1024
}
fn default_attach_backlog_bytes() -> usize {
    // Room for a full outbound buffer of streamed pieces and two messages of the 16 MiB cap.
    64 * 1024 * 1024
}
fn default_max_queued_steering() -> usize {
    // A person steers a few times between two tool batches; a client in a loop does not get to
    // grow the next request without bound.
    64
}
fn default_max_queued_steering_bytes() -> usize {
    1024 * 1024
}

fn default_shell_max_processes() -> u64 {
    // Generous for builds (a JVM or a parallel compiler runs hundreds of threads, and the pids
    // controller counts threads), small next to what takes a machine down.
    4096
}

fn default_shell_grace_ms() -> u64 {
    100
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}; check the path given to --config or TANDEM_CONFIG")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML for tandem: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("config file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl Config {
    /// The environment of a shell command, from this process's environment (see
    /// `tools::shell::command_environment`).
    pub fn command_environment(&self) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
        let keys: Vec<String> = self
            .providers
            .values()
            .filter_map(|p| p.api_key_env.clone())
            .collect();
        crate::tools::shell::command_environment(std::env::vars_os(), &self.shell_env, &keys)
    }

    /// The configuration used when no file is given: one offline scripted model.
    pub fn builtin() -> Config {
        let mut providers = BTreeMap::new();
        providers.insert(
            "builtin".to_owned(),
            ProviderConfig {
                kind: ProviderKind::Scripted,
                base_url: None,
                api_key_env: None,
            },
        );
        let mut models = BTreeMap::new();
        models.insert(
            SCRIPTED_MODEL_ID.to_owned(),
            ModelConfig {
                provider: "builtin".to_owned(),
                name: "tandem-scripted-demo".to_owned(),
                context_window: default_context_window(),
                max_output_tokens: None,
                vision: false,
                pdf: false,
                reasoning: false,
                parallel_tool_calls: true,
                thinking_budget: None,
            },
        );
        Config {
            default_model: SCRIPTED_MODEL_ID.to_owned(),
            providers,
            models,
            max_iterations: DEFAULT_MAX_ITERATIONS,
            shell_kill_grace_ms: default_shell_grace_ms(),
            provider_max_attempts: default_provider_attempts(),
            retry_base_delay_ms: default_retry_base_ms(),
            retry_max_delay_ms: default_retry_max_ms(),
            retry_after_cap_ms: default_retry_after_cap_ms(),
            stream_idle_timeout_ms: default_idle_timeout_ms(),
            compaction_threshold: default_compaction_threshold(),
            shell_env: Vec::new(),
            shell_max_processes: default_shell_max_processes(),
            max_answer_bytes: default_max_answer_bytes(),
            max_reasoning_bytes: default_max_answer_bytes(),
            max_tool_arguments_bytes: default_max_tool_arguments_bytes(),
            outbound_buffer_bytes: default_outbound_buffer_bytes(),
            attach_backlog_bytes: default_attach_backlog_bytes(),
            max_queued_steering: default_max_queued_steering(),
            max_queued_steering_bytes: default_max_queued_steering_bytes(),
            raw_mcp_servers: BTreeMap::new(),
            mcp_servers: Vec::new(),
            source_path: None,
        }
    }

    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut config = Config::parse(&text, path)?;
        // Canonical, so the file is protected under the path the checks see (a relative or
        // linked spelling would not match the resolved path of a write).
        config.source_path =
            Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
        Ok(config)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        config.validate(path)?;
        config.mcp_servers = std::mem::take(&mut config.raw_mcp_servers)
            .into_iter()
            .map(|(name, raw)| raw.into_config(&name))
            .collect::<Result<_, _>>()
            .map_err(|e| ConfigError::Invalid {
                path: path.to_owned(),
                message: e.to_string(),
            })?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_owned(),
            message,
        };
        if !self.models.contains_key(&self.default_model) {
            let known: Vec<&str> = self.models.keys().map(String::as_str).collect();
            return Err(invalid(format!(
                "default_model = \"{}\" is not defined; add a [models.{}] table or pick one of: {}",
                self.default_model,
                self.default_model,
                if known.is_empty() {
                    "(no models defined)".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        }
        for (id, model) in &self.models {
            let Some(provider) = self.providers.get(&model.provider) else {
                return Err(invalid(format!(
                    "[models.{id}] names provider \"{}\", which is not defined; add a [providers.{}] table",
                    model.provider, model.provider
                )));
            };
            if let (ProviderKind::Anthropic, Some(budget)) = (provider.kind, model.thinking_budget)
            {
                let max = model.max_output_tokens.unwrap_or(8_192);
                if budget < 1_024 || budget >= max {
                    return Err(invalid(format!(
                        "[models.{id}] thinking_budget = {budget} must be at least 1024 and below max_output_tokens ({max}) for Anthropic; lower it or raise max_output_tokens"
                    )));
                }
            }
        }
        for (name, provider) in &self.providers {
            if let Some(url) = &provider.base_url {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(invalid(format!(
                        "[providers.{name}] base_url = \"{url}\" must start with http:// or https://"
                    )));
                }
            }
            if provider.api_key_env.as_deref() == Some("") {
                return Err(invalid(format!(
                    "[providers.{name}] api_key_env is empty; name the environment variable that holds the key, for example \"ANTHROPIC_API_KEY\""
                )));
            }
            if let Some(key) = provider
                .api_key_env
                .as_ref()
                .filter(|key| self.shell_env.contains(key))
            {
                return Err(invalid(format!(
                    "shell_env names {key}, which holds the API key of [providers.{name}]; commands never get a provider key (the model could print it), so remove it from shell_env"
                )));
            }
            if provider.kind == ProviderKind::Openai {
                match &provider.base_url {
                    Some(url) if url.starts_with("http://") || url.starts_with("https://") => {}
                    Some(url) => {
                        return Err(invalid(format!(
                            "[providers.{name}] base_url = \"{url}\" must start with http:// or https://"
                        )))
                    }
                    None => {
                        return Err(invalid(format!(
                            "[providers.{name}] needs base_url, for example \"https://api.openai.com/v1\""
                        )))
                    }
                }
            }
        }
        if self.max_iterations == 0 {
            return Err(invalid("max_iterations must be at least 1".to_owned()));
        }
        if self.provider_max_attempts == 0 {
            return Err(invalid(
                "provider_max_attempts must be at least 1".to_owned(),
            ));
        }
        if !(self.compaction_threshold > 0.0 && self.compaction_threshold <= 1.0) {
            return Err(invalid(format!(
                "compaction_threshold = {} must be a share of the context window, above 0 and at most 1 (default 0.8)",
                self.compaction_threshold
            )));
        }
        Ok(())
    }

    pub fn model(&self, id: &str) -> Option<&ModelConfig> {
        self.models.get(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_design_example() {
        let text = r#"
default_model = "mock"
[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"
api_key_env = "LOCAL_API_KEY"
[models.mock]
provider = "local"
name = "mock-model"
context_window = 128000
"#;
        let config = Config::parse(text, Path::new("t.toml")).unwrap();
        assert_eq!(config.default_model, "mock");
        assert_eq!(config.models["mock"].name, "mock-model");
        assert_eq!(config.max_iterations, DEFAULT_MAX_ITERATIONS);
    }

    #[test]
    fn unknown_default_model_names_the_fix() {
        let text = "default_model = \"nope\"\n";
        let err = Config::parse(text, Path::new("t.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("default_model = \"nope\" is not defined"),
            "{err}"
        );
        assert!(err.contains("[models.nope]"), "{err}");
    }

    #[test]
    fn unknown_provider_is_refused() {
        let text = "default_model = \"m\"\n[models.m]\nprovider = \"p\"\nname = \"x\"\n";
        let err = Config::parse(text, Path::new("t.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("names provider \"p\""), "{err}");
    }

    #[test]
    fn openai_needs_base_url() {
        let text = "default_model = \"m\"\n[providers.p]\nkind = \"openai\"\n[models.m]\nprovider = \"p\"\nname = \"x\"\n";
        let err = Config::parse(text, Path::new("t.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs base_url"), "{err}");
    }

    #[test]
    fn catalog_defaults_fill_only_what_the_config_leaves_out() {
        let text = r#"
default_model = "claude"
[providers.a]
kind = "anthropic"
api_key_env = "ANTHROPIC_API_KEY"
[providers.g]
kind = "gemini"
[models.claude]
provider = "a"
name = "claude-sonnet-4-5-20250929"
[models.flash]
provider = "g"
name = "models/gemini-2.5-flash"
vision = false
[models.odd]
provider = "a"
name = "some-local-thing"
"#;
        let config = Config::parse(text, Path::new("t.toml")).unwrap();
        let claude = &config.models["claude"];
        assert_eq!(claude.context_window, 200_000);
        assert_eq!(claude.max_output_tokens, Some(64_000));
        assert!(claude.vision && claude.pdf && claude.reasoning && claude.parallel_tool_calls);
        let flash = &config.models["flash"];
        assert!(!flash.vision, "an explicit value wins over the catalog");
        assert!(flash.pdf && flash.reasoning);
        assert_eq!(flash.context_window, 1_048_576);
        let odd = &config.models["odd"];
        assert_eq!(odd.context_window, 128_000);
        assert_eq!(odd.max_output_tokens, None);
        assert!(!odd.vision && !odd.pdf && !odd.reasoning && odd.parallel_tool_calls);
        assert_eq!(known_model("gpt-4o-mini").map(|k| k.vision), Some(true));
        assert_eq!(known_model("openai/o3").map(|k| k.reasoning), Some(true));
    }

    #[test]
    fn anthropic_thinking_budget_must_fit_below_the_output_limit() {
        let text = "default_model = \"m\"\n[providers.p]\nkind = \"anthropic\"\n[models.m]\nprovider = \"p\"\nname = \"claude-3-5-haiku-latest\"\nthinking_budget = 9000\n";
        let err = Config::parse(text, Path::new("t.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("thinking_budget = 9000") && err.contains("8192"),
            "{err}"
        );
    }

    #[test]
    fn builtin_is_valid() {
        let config = Config::builtin();
        config.validate(Path::new("builtin")).unwrap();
        assert!(config.model(SCRIPTED_MODEL_ID).is_some());
    }
}
