// Unit tests of the config "tandem: Configure Model…" writes: the provider kind, base URL and model, and the key's
// variable name in place of the key.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { buildConfig, keyEnvName, PRESETS } from '../../src/modelConfig';

test('the config names the key variable and never holds a key', () => {
  const anthropic = PRESETS.find((p) => p.kind === 'anthropic')!;
  const toml = buildConfig({ preset: anthropic, model: 'claude-sonnet-4-5', withKey: true });
  assert.match(toml, /^default_model = "main"$/m);
  assert.match(toml, /^\[providers\.anthropic\]\nkind = "anthropic"\napi_key_env = "TANDEM_VSCODE_ANTHROPIC_API_KEY"$/m);
  assert.match(toml, /^\[models\.main\]\nprovider = "anthropic"\nname = "claude-sonnet-4-5"$/m);
  assert.equal(keyEnvName('openaiCompatible'), 'TANDEM_VSCODE_OPENAI_COMPATIBLE_API_KEY');
  const local = PRESETS.find((p) => p.kind === 'openaiCompatible')!;
  const t2 = buildConfig({ preset: local, model: 'qwen "x"', baseUrl: 'http://127.0.0.1:9/v1', withKey: false });
  assert.match(t2, /^kind = "openai"\nbase_url = "http:\/\/127\.0\.0\.1:9\/v1"$/m);
  assert.match(t2, /^name = "qwen \\"x\\""$/m, 'quotes are escaped');
  assert.doesNotMatch(t2, /api_key_env/, 'no key, no variable');
});
