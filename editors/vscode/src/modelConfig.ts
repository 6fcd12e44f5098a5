// "tandem: Configure Model…": writes a tandem config (TOML) for a provider kind the user picks and keeps the API
// key in VS Code's SecretStorage. The key never goes into the file: the config names an environment variable
// (`api_key_env`), and the extension puts the key into the server's environment when it starts it (protocol.md,
// Configuration: keys come only from the environment). The TOML building is pure and unit-tested.

export type ProviderKind = 'anthropic' | 'openai' | 'gemini' | 'openaiCompatible';

export interface ProviderPreset {
  kind: ProviderKind;
  label: string;
  detail: string;
  /** The config's provider `kind`. */
  wireKind: 'anthropic' | 'openai' | 'gemini';
  defaultModel: string;
  baseUrl?: string;
  /** Whether a key is needed (a local OpenAI-compatible server usually takes none). */
  needsKey: boolean;
}

export const PRESETS: ProviderPreset[] = [
  { kind: 'anthropic', label: 'Anthropic (Claude)', detail: 'The Messages API; key from console.anthropic.com', wireKind: 'anthropic', defaultModel: 'claude-sonnet-4-5', needsKey: true },
  { kind: 'openai', label: 'OpenAI', detail: 'api.openai.com; key from platform.openai.com', wireKind: 'openai', defaultModel: 'gpt-4.1', baseUrl: 'https://api.openai.com/v1', needsKey: true },
  { kind: 'gemini', label: 'Google Gemini', detail: 'The Gemini API; key from aistudio.google.com', wireKind: 'gemini', defaultModel: 'gemini-2.5-pro', needsKey: true },
  {
    kind: 'openaiCompatible',
    label: 'OpenAI-compatible server',
    detail: 'OpenRouter, Ollama, vLLM, llama.cpp, LM Studio…: any /chat/completions endpoint',
    wireKind: 'openai',
    defaultModel: 'qwen2.5-coder:14b',
    baseUrl: 'http://127.0.0.1:11434/v1',
    needsKey: false,
  },
];

/** The environment variable the config names for a provider kind's key; the extension sets it for the server. */
export function keyEnvName(kind: ProviderKind): string {
  return `TANDEM_VSCODE_${kind.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}_API_KEY`;
}

export interface ModelChoice {
  preset: ProviderPreset;
  /** The model name sent to the provider. */
  model: string;
  baseUrl?: string;
  /** Whether a key was given (then the config names keyEnvName). */
  withKey: boolean;
}

function tomlString(s: string): string {
  return JSON.stringify(s); // a TOML basic string has JSON's escapes for what can occur here
}

/** The config file text: one provider and one model, the default. Holds no key, only the variable's name. */
export function buildConfig(c: ModelChoice): string {
  const provider = c.preset.kind === 'openaiCompatible' ? 'compatible' : c.preset.kind;
  const lines = [
    '# Written by the tandem VS Code extension ("tandem: Configure Model…"). The API key is not in this file: it',
    "# is kept in VS Code's secret storage and given to the server in the environment variable named below.",
    'default_model = "main"',
    '',
    `[providers.${provider}]`,
    `kind = ${tomlString(c.preset.wireKind)}`,
  ];
  const base = c.baseUrl ?? c.preset.baseUrl;
  if (base) lines.push(`base_url = ${tomlString(base)}`);
  if (c.withKey) lines.push(`api_key_env = ${tomlString(keyEnvName(c.preset.kind))}`);
  lines.push('', '[models.main]', `provider = ${tomlString(provider)}`, `name = ${tomlString(c.model)}`, '');
  return lines.join('\n');
}

/** The SecretStorage key under which the API key of a provider kind is kept. */
export function secretKey(kind: ProviderKind): string {
  return `tandem.apiKey.${kind}`;
}
