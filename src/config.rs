//! Configuration: the TOML file of providers and models, and the built-in offline default.
//!
//! Errors name the file, the key and what to do, because a user who mistyped a provider name
//! should not have to read source code to find out why the server refused to start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub provider: String,
    /// The model name sent to the provider.
    pub name: String,
    #[serde(default = "default_context_window")]
    pub context_window: u64,
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    /// Whether the model accepts images; images are replaced in the outbound view otherwise.
    #[serde(default)]
    pub vision: bool,
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
            source_path: None,
        }
    }

    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut config = Config::parse(&text, path)?;
        config.source_path = Some(path.to_path_buf());
        Ok(config)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        config.validate(path)?;
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
            if !self.providers.contains_key(&model.provider) {
                return Err(invalid(format!(
                    "[models.{id}] names provider \"{}\", which is not defined; add a [providers.{}] table",
                    model.provider, model.provider
                )));
            }
        }
        for (name, provider) in &self.providers {
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
    fn builtin_is_valid() {
        let config = Config::builtin();
        config.validate(Path::new("builtin")).unwrap();
        assert!(config.model(SCRIPTED_MODEL_ID).is_some());
    }
}
