// Shared setup of the integration tests: finds the real tandem binary ($TANDEM_BIN or <repo>/target/debug/tandem),
// makes a temporary workspace and config, and starts the extension's TandemClient on it with every event
// recorded and folded into a ChatState, exactly as the extension does.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TandemClient } from '../../src/client';
import { ChatState } from '../../src/chatState';
import type { SessionEvent } from '../../src/protocol';
import { waitFor } from '../mockLlm';

// out/test/integration -> editors/vscode -> repo root
export const REPO_ROOT = path.resolve(__dirname, '..', '..', '..', '..', '..');
export const TANDEM_BIN = process.env.TANDEM_BIN || path.join(REPO_ROOT, 'target', 'debug', 'tandem');

export function requireBinary(): void {
  if (!fs.existsSync(TANDEM_BIN)) {
    throw new Error(`tandem binary not found at ${TANDEM_BIN}: run "cargo build" in ${REPO_ROOT} or set TANDEM_BIN`);
  }
}

export interface Harness {
  client: TandemClient;
  sessionId: string;
  workspace: string;
  events: SessionEvent[];
  state: ChatState;
  /** Resolves with the first event (after `from`) matching the predicate. */
  event<T extends SessionEvent['type']>(type: T, pred?: (e: Extract<SessionEvent, { type: T }>) => boolean, from?: number): Promise<Extract<SessionEvent, { type: T }>>;
  close(): Promise<void>;
}

// All scratch dirs of one test process live under one root, removed when the process exits.
let scratchRoot: string | undefined;
export function tempDir(prefix: string): string {
  if (!scratchRoot) {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-vscode-test-'));
    scratchRoot = root;
    process.on('exit', () => fs.rmSync(root, { recursive: true, force: true }));
  }
  return fs.mkdtempSync(path.join(scratchRoot, prefix));
}

/**
 * `prepare` writes into the workspace before the session opens (hook files are read then); `env` adds to the
 * server's environment. XDG_CONFIG_HOME is a scratch dir unless `env` names one, so the user's own
 * ~/.config/tandem (commands, hooks) never reaches a test.
 */
export async function startHarness(configToml?: string, opts: { prepare?: (workspace: string) => void; env?: Record<string, string> } = {}): Promise<Harness> {
  requireBinary();
  const workspace = tempDir('tandem-ws-');
  opts.prepare?.(workspace);
  let configFile: string | undefined;
  if (configToml !== undefined) {
    configFile = path.join(tempDir('tandem-cfg-'), 'tandem.toml');
    fs.writeFileSync(configFile, configToml);
  }
  const env = { ...process.env, TANDEM_HOME: tempDir('tandem-home-'), XDG_CONFIG_HOME: tempDir('tandem-xdg-'), ...opts.env };
  const client = new TandemClient({ serverPath: TANDEM_BIN, configFile, cwd: workspace, env });
  const events: SessionEvent[] = [];
  const state = new ChatState();
  client.onEvent((e) => {
    events.push(e);
    state.apply(e);
  });
  await client.start();
  const s = await client.newSession(workspace);
  state.reset(s);
  const h: Harness = {
    client,
    sessionId: s.sessionId,
    workspace,
    events,
    state,
    async event(type, pred, from = 0) {
      let found: SessionEvent | undefined;
      await waitFor(
        () => !!(found = events.slice(from).find((e) => e.type === type && (!pred || pred(e as never)))),
        15_000,
        `event ${type}; got: ${events.map((e) => e.type).join(',')}`,
      );
      return found as never;
    },
    close: () => client.dispose(),
  };
  return h;
}
