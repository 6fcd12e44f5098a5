// End-to-end test in a real VS Code: installs what is missing (scripts/e2e-setup.sh), starts code-server with
// a fresh profile and the packaged .vsix, points tandem at the mock LLM, and drives Debian's Chromium through
// the scenario with playwright-core: a tandem command that needs no server starts none, opening the chat
// starts one server and no session, the first prompt creates the one session; prompt, streamed Markdown, diff
// editor for a write, edit the proposal and click Allow, file on disk; a prompt stopped mid-stream; a write
// denied with a reason; New Session. The server is launched through a transparent tap (see writeTap) that
// logs each launch and each request method, which is how the test sees what the extension starts.
// Saves screenshots to e2e-artifacts/ and prints "N passed, N failed".
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromium, type BrowserContext, type FrameLocator, type Page } from 'playwright-core';
import { MockLlm, call, gate, say, waitFor } from '../mockLlm';

const EXT_DIR = path.resolve(__dirname, '..', '..', '..');
const REPO_ROOT = path.resolve(EXT_DIR, '..', '..');
const TANDEM_BIN = process.env.TANDEM_BIN || path.join(REPO_ROOT, 'target', 'debug', 'tandem');
const VSIX = path.join(EXT_DIR, 'tandem-vscode.vsix');
const ARTIFACTS = path.join(EXT_DIR, 'e2e-artifacts');
const STEP_TIMEOUT = 30_000;
/** What undo-me.txt holds before the agent rewrites it (see the checkpoint checks). */
const UNDO_ORIGINAL = Buffer.from('line one\r\nläuft ✓\r\nno newline at the end', 'utf8');

const results: { name: string; ok: boolean; error?: string }[] = [];
let shot = 0;
const started = Date.now();

function log(msg: string): void {
  console.log(`[e2e ${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);
}

/** Runs one check; a failure is recorded with its cause and the scenario goes on where it still can. */
async function check(name: string, fn: () => Promise<void>): Promise<boolean> {
  try {
    await fn();
    results.push({ name, ok: true });
    log(`PASS ${name}`);
    return true;
  } catch (err) {
    const error = err instanceof Error ? err.message.split('\n').slice(0, 6).join('\n') : String(err);
    results.push({ name, ok: false, error });
    log(`FAIL ${name}: ${error}`);
    return false;
  }
}

async function screenshot(page: Page, name: string): Promise<void> {
  const file = path.join(ARTIFACTS, `${String(++shot).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file }).catch((e) => log(`screenshot ${name} failed: ${e}`));
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

function httpOk(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get(url, (res) => {
      res.resume();
      resolve((res.statusCode ?? 500) < 500);
    });
    req.on('error', () => resolve(false));
    req.setTimeout(2000, () => (req.destroy(), resolve(false)));
  });
}

async function waitHttp(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await httpOk(url)) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`code-server did not answer ${url} within ${timeoutMs} ms`);
}

/**
 * Writes the program that VS Code runs as `tandem.serverPath`: it appends one JSON line per launch and per
 * JSON-RPC request it forwards (Content-Length frames on stdin) to `log`, and otherwise passes stdin, stdout,
 * stderr and the exit status through to the real binary. Seeing the requests on the way in is what lets the
 * test say "no session/new was sent", independent of what the server's session/list chooses to list.
 */
function writeTap(dir: string, real: string, log: string): string {
  const tap = path.join(dir, 'tandem-tap.js');
  fs.writeFileSync(
    tap,
    `#!${process.execPath}
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const note = (o) => fs.appendFileSync(${JSON.stringify(log)}, JSON.stringify(o) + '\\n');
note({ launch: process.pid, args: process.argv.slice(2) });
const child = spawn(${JSON.stringify(real)}, process.argv.slice(2), { stdio: ['pipe', 'inherit', 'inherit'] });
child.stdin.on('error', () => {});
let buf = Buffer.alloc(0);
process.stdin.on('data', (chunk) => {
  child.stdin.write(chunk);
  buf = Buffer.concat([buf, chunk]);
  for (;;) {
    const end = buf.indexOf('\\r\\n\\r\\n');
    const length = end < 0 ? NaN : Number(/content-length: *(\\d+)/i.exec(buf.subarray(0, end).toString())?.[1]);
    if (Number.isNaN(length) || buf.length < end + 4 + length) break;
    const message = JSON.parse(buf.subarray(end + 4, end + 4 + length).toString());
    if (message.method) note({ method: message.method, params: message.params });
    buf = buf.subarray(end + 4 + length);
  }
});
process.stdin.on('end', () => child.stdin.end());
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(sig, () => child.kill(sig));
child.on('exit', (code, signal) => process.exit(code ?? 128 + (os.constants.signals[signal] ?? 0)));
`,
    { mode: 0o755 },
  );
  return tap;
}

interface TapRecord {
  launch?: number;
  method?: string;
  params?: any;
}

function tapRecords(log: string): TapRecord[] {
  if (!fs.existsSync(log)) return [];
  return fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as TapRecord);
}

/** The Python of the MCP test venv (tests/mcp/setup), where the SDK's stdio server runs. */
function mcpPython(): string {
  const venv = process.env.TANDEM_MCP_VENV || path.join(os.homedir(), '.cache', 'tandem', 'mcp-venv');
  const python = path.join(venv, 'bin', 'python');
  if (!fs.existsSync(python)) throw new Error(`${python} is missing: run tests/mcp/setup in the repository root (or set TANDEM_MCP_VENV)`);
  return python;
}

const MCP_STDIO_SERVER = path.join(REPO_ROOT, 'tests', 'mcp', 'stdio_server.py');

function setup(): string {
  log('installing prerequisites (idempotent): scripts/e2e-setup.sh');
  const r = spawnSync('bash', [path.join(EXT_DIR, 'scripts', 'e2e-setup.sh')], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`scripts/e2e-setup.sh failed with exit code ${r.status}; see its output above`);
  const launcher = r.stdout.trim().split('\n').at(-1)!;
  if (!fs.existsSync(launcher)) throw new Error(`e2e-setup.sh printed ${launcher}, which does not exist`);
  return launcher;
}

/** The chat webview's document: VS Code nests the view's content in two iframes. */
function chat(page: Page): FrameLocator {
  return page.frameLocator('iframe.webview.ready').first().frameLocator('#active-frame');
}

async function runPalette(page: Page, command: string): Promise<void> {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: STEP_TIMEOUT });
  await input.fill(`>${command}`);
  await page.locator('.quick-input-list .monaco-list-row').first().waitFor({ timeout: STEP_TIMEOUT });
  await page.keyboard.press('Enter');
}

/** Every process in the tree under `root` (the root included), from /proc. */
function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(d)]);
    } catch {
      /* exited while listed */
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    out.push(p);
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(root);
  return out;
}

/** CPU seconds (user + system) each process has used so far, by pid, with its command line. */
function cpuTimes(pids: number[]): Map<number, { cpu: number; cmd: string }> {
  const out = new Map<number, { cpu: number; cmd: string }>();
  for (const pid of pids) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // Fields 14 and 15 of stat (utime, stime), in clock ticks of 1/100 s on Linux.
      out.set(pid, { cpu: (Number(f[11]) + Number(f[12])) / 100, cmd: fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ') });
    } catch {
      /* exited */
    }
  }
  return out;
}

/** Processes the test measures: Chromium's (workbench and webview renderers) and code-server's extension host. */
interface Measured {
  browserPid: () => number | undefined;
  codeServerPid: number;
}

async function main(): Promise<number> {
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  if (!fs.existsSync(TANDEM_BIN)) throw new Error(`tandem binary not found at ${TANDEM_BIN}: run "cargo build" in ${REPO_ROOT} or set TANDEM_BIN`);
  if (!fs.existsSync(VSIX)) throw new Error(`${VSIX} is missing: run "npm run package" first`);
  const codeServer = setup();

  const llm = await new MockLlm().start();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-e2e-'));
  const ws = path.join(root, 'workspace');
  const userData = path.join(root, 'user-data');
  const extDir = path.join(root, 'extensions');
  const chromeData = path.join(root, 'chromium');
  for (const d of [ws, path.join(userData, 'User'), extDir, chromeData]) fs.mkdirSync(d, { recursive: true });
  fs.writeFileSync(path.join(ws, 'README.md'), '# e2e workspace\n');
  // The file the focus check types into while a review opens (not README.md, which a later diff compares with).
  fs.writeFileSync(path.join(ws, 'typing.txt'), 'typed here:\n');
  // The per-hunk revert check changes two separate lines of this file.
  fs.writeFileSync(path.join(ws, 'hunks.txt'), 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n');
  // The checkpoint check's file: CRLF, non-ASCII and no final newline, so an undo must give back these exact bytes.
  fs.writeFileSync(path.join(ws, 'undo-me.txt'), UNDO_ORIGINAL);
  const cfg = path.join(root, 'tandem.toml');
  // A real stdio MCP server (the Python SDK's, tests/mcp/setup) for the MCP checks; idle until the model calls it.
  fs.writeFileSync(cfg, `${llm.config()}\n[mcp_servers.t]\ncommand = ${JSON.stringify(mcpPython())}\nargs = [${JSON.stringify(MCP_STDIO_SERVER)}]\n`);
  const tapLog = path.join(root, 'tap.jsonl');
  const tap = writeTap(root, TANDEM_BIN, tapLog);
  const tandemHome = path.join(root, 'tandem-home');
  fs.writeFileSync(
    path.join(userData, 'User', 'settings.json'),
    JSON.stringify(
      {
        'security.workspace.trust.enabled': false,
        'window.dialogStyle': 'custom',
        'workbench.startupEditor': 'none',
        'workbench.tips.enabled': false,
        'extensions.autoCheckUpdates': false,
        'extensions.autoUpdate': false,
        'telemetry.telemetryLevel': 'off',
        'chat.disableAIFeatures': true,
        'tandem.serverPath': tap,
        'tandem.configFile': cfg,
      },
      null,
      2,
    ),
  );
  const csConfig = path.join(root, 'code-server.yaml');
  fs.writeFileSync(csConfig, 'auth: none\n');
  const common = ['--config', csConfig, '--user-data-dir', userData, '--extensions-dir', extDir];

  log('installing the .vsix into code-server');
  const inst = spawnSync(codeServer, [...common, '--install-extension', VSIX], { encoding: 'utf8', env: { ...process.env, TANDEM_HOME: tandemHome } });
  if (inst.status !== 0 || !/was successfully installed/.test(inst.stdout + inst.stderr)) {
    throw new Error(`code-server --install-extension failed (${inst.status}): ${inst.stdout}${inst.stderr}`);
  }

  const port = await freePort();
  log(`starting code-server on 127.0.0.1:${port}`);
  const cs: ChildProcess = spawn(
    codeServer,
    [...common, '--bind-addr', `127.0.0.1:${port}`, '--auth', 'none', '--disable-telemetry', '--disable-update-check', '--reconnection-grace-time', '5', ws],
    // XDG_CONFIG_HOME: tandem's user config folder (slash commands, hooks) is a scratch one, not the user's.
    { detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TANDEM_HOME: tandemHome, XDG_CONFIG_HOME: path.join(root, 'xdg-config') } },
  );
  const csLog = fs.createWriteStream(path.join(ARTIFACTS, 'code-server.log'));
  cs.stdout!.pipe(csLog);
  cs.stderr!.pipe(csLog);

  let browser: BrowserContext | undefined;
  try {
    await waitHttp(`http://127.0.0.1:${port}/healthz`, 60_000);
    browser = await chromium.launchPersistentContext(chromeData, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      viewport: { width: 1440, height: 900 },
      // The Share Session check reads what the extension copied (vscode.env.clipboard reaches the page's clipboard).
      permissions: ['clipboard-read', 'clipboard-write'],
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const page = browser.pages()[0] ?? (await browser.newPage());
    page.setDefaultTimeout(STEP_TIMEOUT);
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(ws)}`);
    // The browser process is the one Chromium process started with our profile dir and no --type.
    const browserPid = () =>
      fs
        .readdirSync('/proc')
        .filter((d) => /^\d+$/.test(d))
        .map(Number)
        .find((pid) => {
          try {
            const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
            return cmd.includes(`--user-data-dir=${chromeData}`) && !cmd.includes('--type=');
          } catch {
            return false;
          }
        });
    await scenario(page, llm, ws, { log: tapLog, home: tandemHome, userData }, { browserPid, codeServerPid: cs.pid! });
  } finally {
    await browser?.close().catch(() => undefined);
    // code-server runs detached in its own process group (with the extension host and tandem under it).
    const exited = cs.exitCode !== null ? Promise.resolve() : new Promise<void>((r) => cs.once('exit', () => r()));
    const killGroup = (sig: NodeJS.Signals) => {
      try {
        process.kill(-cs.pid!, sig);
      } catch {
        /* already gone */
      }
    };
    killGroup('SIGTERM');
    const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 10_000).unref());
    if ((await Promise.race([exited, timer])) === 'timeout') killGroup('SIGKILL');
    await llm.close();
    // The scratch profile and workspace are large; keep them only when asked to (debugging a failure).
    if (!process.env.TANDEM_E2E_KEEP) fs.rmSync(root, { recursive: true, force: true });
    else log(`kept ${root}`);
  }
  const passed = results.filter((r) => r.ok).length;
  const failed = results.length - passed;
  for (const r of results.filter((x) => !x.ok)) console.log(`  failed: ${r.name}\n    ${r.error?.replace(/\n/g, '\n    ')}`);
  log(`screenshots in ${ARTIFACTS}`);
  console.log(`${passed} passed, ${failed} failed`);
  return failed === 0 ? 0 : 1;
}

async function scenario(page: Page, llm: MockLlm, ws: string, server: { log: string; home: string; userData: string }, measured: Measured): Promise<void> {
  const c = chat(page);
  const launches = () => tapRecords(server.log).filter((r) => r.launch !== undefined).length;
  const sessionNews = () => tapRecords(server.log).filter((r) => r.method === 'session/new');
  const expectCounts = (want: { launches: number; sessionNew: number }) => {
    const got = { launches: launches(), sessionNew: sessionNews().length };
    if (got.launches !== want.launches || got.sessionNew !== want.sessionNew) {
      throw new Error(`expected ${JSON.stringify(want)}, the tap saw ${JSON.stringify(got)}: ${fs.existsSync(server.log) ? fs.readFileSync(server.log, 'utf8') : '(no log)'}`);
    }
  };

  await check('VS Code loads the workbench', async () => {
    await page.locator('.monaco-workbench').waitFor({ timeout: 90_000 });
    await page.locator('.activitybar').waitFor();
  });
  await screenshot(page, 'workbench');

  await check('a tandem command that needs no server activates the extension without starting one', async () => {
    // Show Server Log activates the extension (onCommand) in a window whose chat was never shown. The status
    // bar item exists only once activation ran, and "not started" is the state it is created in: an eager
    // start (the old onStartupFinished behaviour) shows "starting" at once instead.
    // The icon shows once the workbench registered the extension's contributions, so the palette lists them.
    await page.locator('.activitybar [aria-label^="tandem"]').first().waitFor({ timeout: 60_000 });
    await page.keyboard.press('F1');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible' });
    await input.fill('>tandem: Show Server Log');
    await page.locator('.quick-input-list .monaco-list-row.focused', { hasText: 'Show Server Log' }).waitFor();
    await page.keyboard.press('Enter');
    await page.locator('.statusbar-item', { hasText: /tandem: .* not started/ }).first().waitFor();
    expectCounts({ launches: 0, sessionNew: 0 });
    if (fs.existsSync(server.home)) throw new Error(`the data dir ${server.home} was created, so a server ran`);
  });
  await screenshot(page, 'activated-not-started');

  const opened = await check('the tandem activity-bar container opens the chat view', async () => {
    const icon = page.locator('.activitybar [aria-label^="tandem"]').first();
    await icon.waitFor({ timeout: 60_000 });
    await icon.click();
    await c.locator('[data-testid=prompt]').waitFor();
  });
  if (!opened) {
    // Keyboard path as a fallback so the rest of the scenario still runs.
    await runPalette(page, 'tandem: Open Chat').catch(() => undefined);
  }

  await check('the server is ready: status bar and chat header show the model, turn idle', async () => {
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
    await c.locator('[data-testid=model]', { hasText: 'mock' }).waitFor();
    await page.locator('.statusbar-item', { hasText: 'tandem: mock' }).first().waitFor();
  });
  await screenshot(page, 'chat-open');

  await check('showing the chat started one server and created no session', async () => {
    expectCounts({ launches: 1, sessionNew: 0 });
  });

  // ---- 1: prompt, streamed Markdown, diff review, edit the proposal, Allow from the editor title --------
  const hold1 = gate();
  await llm.enqueue(
    { steps: [say('Hello from the **mock** model. '), { until: hold1.promise }, say('I will write a note.'), call('call_e2e_1', 'write_file', { path: 'e2e-note.md', content: '# proposed by the agent\n' })] },
    { steps: [say('The note is written.')] },
  );
  await check('prompt from the chat box; the answer streams in as Markdown', async () => {
    await c.locator('[data-testid=prompt]').fill('Please write a note');
    await c.locator('[data-testid=prompt]').press('Enter');
    await c.locator('[data-testid=user-message]', { hasText: 'Please write a note' }).waitFor();
    // Held mid-stream: the first part is visible while the turn still runs, and bold is rendered.
    await c.locator('[data-testid=assistant-message] strong', { hasText: 'mock' }).waitFor();
    await c.locator('[data-testid=turn-state][data-state=running]').waitFor();
    await c.locator('[data-testid=steer]').waitFor();
  });
  await screenshot(page, 'streaming');
  hold1.open();

  await check('the first prompt created exactly one session', async () => {
    expectCounts({ launches: 1, sessionNew: 1 });
  });

  await check('the write opens vscode.diff with the proposed content, and the chat card asks for approval', async () => {
    await c.locator('[data-testid=tool-card][data-status=awaitingApproval]').waitFor();
    await c.locator('[data-testid=approve-once]').waitFor();
    await c.locator('[data-testid=approve-alwaysTool]').waitFor();
    await page.locator('.monaco-diff-editor').first().waitFor();
    await page.locator('.tab', { hasText: 'e2e-note.md' }).first().waitFor();
    await page.locator('.monaco-diff-editor .modified .view-lines', { hasText: 'proposed by the agent' }).first().waitFor();
    await page.locator('.statusbar-item', { hasText: 'approval needed' }).first().waitFor();
  });
  await screenshot(page, 'diff-review');

  await check('edit the proposed side, click Allow in the editor title: the edited file is on disk', async () => {
    const modified = page.locator('.monaco-diff-editor .editor.modified .view-lines').first();
    await modified.click();
    await page.keyboard.press('Control+A');
    await page.keyboard.type('# edited in VS Code\n');
    await page.locator('.monaco-diff-editor .modified .view-lines', { hasText: 'edited in VS Code' }).first().waitFor();
    await screenshot(page, 'diff-edited');
    await page.locator('.editor-actions [aria-label^="Allow Once"], .editor-actions [title^="Allow Once"]').first().click();
    const file = path.join(ws, 'e2e-note.md');
    await waitFor(() => fs.existsSync(file) && fs.readFileSync(file, 'utf8').startsWith('# edited in VS Code'), STEP_TIMEOUT, 'e2e-note.md with the edited content');
    await c.locator('[data-testid=tool-card][data-status=completed]').waitFor();
    await c.locator('[data-testid=assistant-message]', { hasText: 'The note is written.' }).waitFor();
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
    await page.locator('.monaco-diff-editor').first().waitFor({ state: 'detached' });
    await c.locator('[data-testid=usage]', { hasText: 'Tokens' }).waitFor();
  });
  await screenshot(page, 'allowed');

  // ---- 1b: a review opening while the user types in another editor takes no keystroke ----------------------
  const hold1b = gate();
  await llm.enqueue(
    { steps: [say('Writing the focus note.'), { until: hold1b.promise }, call('call_e2e_focus', 'write_file', { path: 'focus-note.md', content: '# focus proposal\nline two\n' })] },
    { steps: [say('The focus note is written.')] },
  );
  await check('typing in another editor while a review opens never changes the proposal; Allow writes it as proposed', async () => {
    await c.locator('[data-testid=prompt]').fill('Write the focus note');
    await c.locator('[data-testid=prompt]').press('Enter');
    await c.locator('[data-testid=assistant-message]', { hasText: 'Writing the focus note.' }).waitFor();
    // Open typing.txt and put the cursor at its end, as a user working in another file while the agent thinks.
    await page.keyboard.press('Control+P');
    const quick = page.locator('.quick-input-widget input');
    await quick.waitFor({ state: 'visible' });
    await quick.fill('typing.txt');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'typing.txt' }).first().waitFor();
    await page.keyboard.press('Enter');
    const typingEditor = page.locator('.editor-instance .monaco-editor .view-lines', { hasText: 'typed here:' }).first();
    await typingEditor.waitFor();
    await typingEditor.click();
    await page.keyboard.press('Control+End');
    // Keep typing through the moment the diff editor opens: the release of the model's write happens between
    // two keystrokes, and the typing goes on until the diff is on screen and then a while more.
    hold1b.open();
    let typed = 0;
    const diff = page.locator('.monaco-diff-editor .modified .view-lines', { hasText: 'focus proposal' }).first();
    while (!(await diff.isVisible()) && typed < 400) {
      await page.keyboard.type('k');
      typed++;
    }
    if (!(await diff.isVisible())) throw new Error('the diff editor did not open while typing');
    await page.keyboard.type(' AFTER-REVIEW-OPENED');
    await screenshot(page, 'typing-while-review-opens');
    // Every keystroke went to typing.txt, none to the proposal.
    await page.locator('.monaco-editor .view-lines', { hasText: 'AFTER-REVIEW-OPENED' }).first().waitFor();
    const proposal = await diff.innerText();
    if (/k{2,}|AFTER/.test(proposal)) throw new Error(`keystrokes reached the proposal: ${JSON.stringify(proposal)}`);
    await c.locator('[data-testid=tool-card][data-status=awaitingApproval] [data-testid=approve-once]').click();
    const file = path.join(ws, 'focus-note.md');
    await waitFor(() => fs.existsSync(file), STEP_TIMEOUT, 'focus-note.md');
    const written = fs.readFileSync(file, 'utf8');
    if (written !== '# focus proposal\nline two\n') throw new Error(`Allow wrote ${JSON.stringify(written)} instead of the proposal`);
    await c.locator('[data-testid=assistant-message]', { hasText: 'The focus note is written.' }).waitFor();
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
    // The approve request carried no editedContent: the server wrote the model's proposal.
    const approve = tapRecords(server.log).filter((r) => r.method === 'approve').at(-1);
    if (approve?.params?.editedContent !== undefined) throw new Error(`approve sent editedContent ${JSON.stringify(approve.params.editedContent)}`);
    // Save typing.txt (so no later dialog asks to), which also shows where the keystrokes went.
    await page.locator('.tab', { hasText: 'typing.txt' }).first().click();
    await page.keyboard.press('Control+S');
    const typingFile = path.join(ws, 'typing.txt');
    await waitFor(() => /^typed here:\nk*\s?AFTER-REVIEW-OPENED/.test(fs.readFileSync(typingFile, 'utf8')), STEP_TIMEOUT, 'typing.txt to hold what was typed');
  });
  await screenshot(page, 'focus-allowed');

  // ---- 1c: an edit applied without asking (autoEdit) shows its diff in the chat -----------------------------
  await llm.enqueue(
    { steps: [call('call_e2e_auto', 'write_file', { path: 'README.md', content: '# e2e workspace\nadded by autoEdit\n' })] },
    { steps: [say('Auto edit done.')] },
  );
  await check('an edit applied without asking (autoEdit) shows a collapsed diff card that opens a read-only diff editor', async () => {
    await runPalette(page, 'tandem: Set Permission Mode');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'autoEdit' }).first().click();
    await c.locator('[data-testid=mode]', { hasText: 'autoEdit' }).waitFor();
    const approvalsBefore = tapRecords(server.log).filter((r) => r.method === 'approve').length;
    await c.locator('[data-testid=prompt]').fill('Append a line to the README');
    await c.locator('[data-testid=prompt]').press('Enter');
    await c.locator('[data-testid=assistant-message]', { hasText: 'Auto edit done.' }).waitFor();
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
    const card = c.locator('[data-testid=tool-card][data-status=completed]', { hasText: 'README.md' }).last();
    if ((await card.locator('[data-testid=approval]').count()) !== 0) throw new Error('the autoEdit write asked for approval');
    const summary = card.locator('[data-testid=applied-summary]');
    await summary.waitFor();
    const text = await summary.innerText();
    if (!/README\.md/.test(text) || !/\+1 −0/.test(text)) throw new Error(`the applied-diff summary says ${JSON.stringify(text)}`);
    // Collapsed: the unified diff is there but not shown until the summary is clicked.
    if (await card.locator('[data-testid=applied-unified]').isVisible()) throw new Error('the applied diff is expanded by default');
    await summary.click();
    await card.locator('[data-testid=applied-unified]', { hasText: '+added by autoEdit' }).waitFor();
    await screenshot(page, 'applied-diff-card');
    await card.locator('[data-testid=open-applied-diff]').click();
    await page.locator('.tab', { hasText: 'applied by tandem' }).first().waitFor();
    await page.locator('.monaco-diff-editor .modified .view-lines', { hasText: 'added by autoEdit' }).first().waitFor();
    await page.locator('.monaco-diff-editor .original .view-lines', { hasText: 'e2e workspace' }).first().waitFor();
    await screenshot(page, 'applied-diff-editor');
    if (tapRecords(server.log).filter((r) => r.method === 'approve').length !== approvalsBefore) throw new Error('an approve was sent for an autoEdit write');
    // Back to ask for the flows below, with README.md as they expect it.
    fs.writeFileSync(path.join(ws, 'README.md'), '# e2e workspace\n');
    await runPalette(page, 'View: Close All Editors');
    await runPalette(page, 'tandem: Set Permission Mode');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: /^ask/ }).first().click();
    await c.locator('[data-testid=mode]', { hasText: /^ask$/ }).waitFor();
  });

  // ---- 2: a prompt stopped mid-stream -----------------------------------------------------------------
  const hold2 = gate();
  await llm.enqueue({ steps: [say('This answer is streaming slowly'), { until: hold2.promise }, say(' and never finishes')] });
  const before2 = llm.requests.length;
  await check('a second prompt is stopped mid-stream with the Stop button', async () => {
    await c.locator('[data-testid=prompt]').fill('Talk slowly');
    await c.locator('[data-testid=send]').click();
    await c.locator('[data-testid=assistant-message]', { hasText: 'streaming slowly' }).waitFor();
    await c.locator('[data-testid=turn-state][data-state=running]').waitFor();
    await screenshot(page, 'before-stop');
    await c.locator('[data-testid=stop]').click();
    await c.locator('[data-testid=turn-ended]', { hasText: 'interrupted' }).waitFor();
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
    await c.locator('[data-testid=notice]', { hasText: /interrupt/i }).first().waitFor();
    await waitFor(() => llm.requests[before2]?.aborted === true, STEP_TIMEOUT, 'the provider stream to be closed by the server');
    if ((await c.locator('text=never finishes').count()) !== 0) throw new Error('text after the stop was shown');
  });
  hold2.open();
  await screenshot(page, 'stopped');

  // ---- 3: a write denied with a reason from the chat card ------------------------------------------------
  await llm.enqueue(
    { steps: [say('Let me replace the README.'), call('call_e2e_3', 'write_file', { path: 'README.md', content: 'overwritten\n' })] },
    { steps: [say('Understood, I left README.md alone.')] },
  );
  const before3 = llm.requests.length;
  await check('a third prompt is denied with a reason; the reason reaches the model and the file is unchanged', async () => {
    await c.locator('[data-testid=prompt]').fill('Replace the README');
    await c.locator('[data-testid=prompt]').press('Enter');
    const card = c.locator('[data-testid=tool-card][data-status=awaitingApproval]');
    await card.waitFor();
    await page.locator('.tab', { hasText: 'README.md' }).first().waitFor();
    // An existing file: the left side is the file on disk, the right side the proposal; title actions are there.
    await page.locator('.monaco-diff-editor .original .view-lines', { hasText: 'e2e workspace' }).first().waitFor();
    await page.locator('.monaco-diff-editor .modified .view-lines', { hasText: 'overwritten' }).first().waitFor();
    await page.locator('.editor-actions [aria-label^="Deny"], .editor-actions [title^="Deny"]').first().waitFor();
    await card.locator('[data-testid=deny-reason]').fill('keep the README as it is');
    await screenshot(page, 'deny-reason');
    await card.locator('[data-testid=deny]').click();
    await c.locator('[data-testid=tool-card][data-status=denied]').waitFor();
    await c.locator('[data-testid=assistant-message]', { hasText: 'left README.md alone' }).waitFor();
    await waitFor(() => llm.requests.length >= before3 + 2, STEP_TIMEOUT, 'the follow-up LLM request');
    const toolMsg = (llm.requests[before3 + 1].body.messages as { role: string; content: string; tool_call_id?: string }[]).find((m) => m.role === 'tool' && m.tool_call_id === 'call_e2e_3');
    if (!/keep the README as it is/.test(String(toolMsg?.content))) throw new Error(`tool result was ${JSON.stringify(toolMsg)}`);
    if (fs.readFileSync(path.join(ws, 'README.md'), 'utf8') !== '# e2e workspace\n') throw new Error('README.md changed');
    await page.locator('.monaco-diff-editor').first().waitFor({ state: 'detached' });
  });
  await screenshot(page, 'denied');

  // ---- 3b: per-hunk reject: revert one of two changes in the proposal, allow the other ------------------------
  await llm.enqueue(
    { steps: [call('call_e2e_hunks', 'write_file', { path: 'hunks.txt', content: 'one\nTWO\nthree\nfour\nfive\nSIX\nseven\n' })] },
    { steps: [say('Hunks handled.')] },
  );
  await check('Revert This Change in the review puts one hunk back; Allow writes the other hunk only', async () => {
    await c.locator('[data-testid=prompt]').fill('Change two lines');
    await c.locator('[data-testid=prompt]').press('Enter');
    await c.locator('[data-testid=tool-card][data-status=awaitingApproval]').waitFor();
    const modified = page.locator('.monaco-diff-editor .editor.modified');
    // Regular expressions: a string in hasText matches regardless of case, and "two" must not pass for "TWO".
    await modified.locator('.view-line', { hasText: /TWO/ }).first().waitFor();
    await modified.locator('.view-line', { hasText: /SIX/ }).first().waitFor();
    // The per-hunk action is on the diff editor's title bar (and its context menu, Ctrl+Alt+R).
    const revert = page.locator('.editor-actions [aria-label^="Revert This Change"], .editor-actions [title^="Revert This Change"]').first();
    await revert.waitFor();
    await modified.locator('.view-line', { hasText: /TWO/ }).first().click();
    await screenshot(page, 'hunk-before-revert');
    await revert.click();
    // In the inline layout a narrow window gets, the removed "two" shows in the modified editor before the revert
    // too: what tells the revert happened is that TWO is gone.
    await modified.locator('.view-line', { hasText: /TWO/ }).first().waitFor({ state: 'detached' });
    await modified.locator('.view-line', { hasText: /SIX/ }).first().waitFor();
    await screenshot(page, 'hunk-reverted');
    await page.locator('.editor-actions [aria-label^="Allow Once"], .editor-actions [title^="Allow Once"]').first().click();
    const file = path.join(ws, 'hunks.txt');
    const want = 'one\ntwo\nthree\nfour\nfive\nSIX\nseven\n';
    await waitFor(() => fs.readFileSync(file, 'utf8') === want, STEP_TIMEOUT, `hunks.txt to be ${JSON.stringify(want)}`);
    const approve = tapRecords(server.log).filter((r) => r.method === 'approve').at(-1);
    if (approve?.params?.editedContent !== want) throw new Error(`approve sent editedContent ${JSON.stringify(approve?.params?.editedContent)}`);
    await c.locator('[data-testid=assistant-message]', { hasText: 'Hunks handled.' }).waitFor();
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
  });

  // ---- a shell approval: its header, and steering while it waits ---------------------------------------------
  await llm.enqueue({ steps: [call('call_e2e_shell', 'shell', { command: 'echo from-the-agent' })] }, { steps: [say('Not running it.')] });
  await check('a shell approval shows the command as code in a readable header; a steer sent while it waits says it is queued', async () => {
    await c.locator('[data-testid=prompt]').fill('Run echo');
    await c.locator('[data-testid=prompt]').press('Enter');
    const card = c.locator('[data-testid=tool-card][data-status=awaitingApproval]');
    await card.waitFor();
    const title = card.locator('[data-testid=tool-title]');
    await title.locator('code', { hasText: 'echo from-the-agent' }).waitFor();
    const text = await title.innerText();
    if (text.includes('`')) throw new Error(`the title shows literal backticks: ${JSON.stringify(text)}`);
    // Not a narrow column: the title takes most of the card's width.
    const [tw, cw] = [(await title.boundingBox())?.width ?? 0, (await card.boundingBox())?.width ?? 1];
    if (tw < cw * 0.6) throw new Error(`the title is ${tw}px wide in a ${cw}px card`);
    await c.locator('[data-testid=prompt]').fill('use printf instead');
    await c.locator('[data-testid=prompt]').press('Enter');
    await c.locator('[data-testid=notice]', { hasText: 'Steering queued' }).waitFor();
    await screenshot(page, 'shell-approval-steer-queued');
    await card.locator('[data-testid=deny]').click();
    await c.locator('[data-testid=assistant-message]', { hasText: 'Not running it.' }).waitFor();
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
  });

  await check('hiding the chat (Explorer) and showing it again keeps the conversation', async () => {
    await page.locator('.activitybar [aria-label^="Explorer"]').first().click();
    await page.locator('.explorer-folders-view, .explorer-viewlet').first().waitFor();
    await page.locator('.activitybar [aria-label^="tandem"]').first().click();
    await c.locator('[data-testid=user-message]', { hasText: 'Replace the README' }).waitFor();
    await c.locator('[data-testid=tool-card][data-status=denied]').first().waitFor();
    await c.locator('[data-testid=tool-card][data-status=completed]').first().waitFor();
  });

  await check('New Session empties the chat without a request; the next prompt creates the second session', async () => {
    expectCounts({ launches: 1, sessionNew: 1 });
    await c.locator('[data-testid=new-session]').click();
    await c.locator('[data-testid=user-message]').first().waitFor({ state: 'detached' });
    // The empty chat offers the session just left, by its title (its first prompt).
    await c.locator('[data-testid=resume-last]').waitFor();
    await c.locator('#resume-title', { hasText: 'Please write a note' }).waitFor();
    await screenshot(page, 'resume-last-offered');
    await c.locator('[data-testid=model]', { hasText: 'mock' }).waitFor();
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
    expectCounts({ launches: 1, sessionNew: 1 });
    await llm.enqueue({ steps: [say('A fresh start.')] });
    await c.locator('[data-testid=prompt]').fill('Start over');
    await c.locator('[data-testid=prompt]').press('Enter');
    await c.locator('[data-testid=assistant-message]', { hasText: 'A fresh start.' }).waitFor();
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
    expectCounts({ launches: 1, sessionNew: 2 });
    const [first, second] = sessionNews();
    if (first.params?.cwd !== ws || second.params?.cwd !== ws) throw new Error(`session/new for another folder: ${JSON.stringify(sessionNews())}`);
    if ((await c.locator('[data-testid=user-message]').count()) !== 1) throw new Error('the new chat shows messages of the old session');
    if (await c.locator('[data-testid=resume-last]').isVisible()) throw new Error('"Resume last session" is still offered in a chat with a session');
  });
  await screenshot(page, 'new-session');

  // ---- @-mention a file from the prompt box -------------------------------------------------------------------
  await llm.enqueue({ steps: [say('The README has a heading.')] });
  await check('@ in the prompt box opens a file picker; the picked file reaches the model; the context gauge shows the window', async () => {
    const box = c.locator('[data-testid=prompt]');
    await box.click();
    await box.pressSequentially('Summarize @');
    const quick = page.locator('.quick-input-widget input');
    await quick.waitFor({ state: 'visible' });
    await page.locator('.quick-input-widget', { hasText: 'Mention a file' }).waitFor();
    await quick.fill('README.md');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'README.md' }).first().waitFor();
    await screenshot(page, 'mention-picker');
    await page.keyboard.press('Enter');
    const filled = async () => (await box.inputValue()) === 'Summarize @README.md ';
    const deadline = Date.now() + STEP_TIMEOUT;
    while (!(await filled())) {
      if (Date.now() > deadline) throw new Error(`the prompt box holds ${JSON.stringify(await box.inputValue())}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const before = llm.requests.length;
    await box.press('End');
    await box.pressSequentially('please');
    await box.press('Enter');
    await c.locator('[data-testid=assistant-message]', { hasText: 'The README has a heading.' }).waitFor();
    const user = JSON.stringify((llm.requests[before].body.messages as { role: string; content: unknown }[]).filter((m) => m.role === 'user').at(-1)?.content);
    if (!user.includes('File README.md') || !user.includes('# e2e workspace')) throw new Error(`the model got ${user}`);
    await c.locator('[data-testid=user-message]', { hasText: 'with @README.md' }).waitFor();
    await c.locator('[data-testid=context-gauge]', { hasText: /Context: [\d,]+ \/ 128,000 tokens/ }).waitFor();
    await c.locator('[data-testid=network]', { hasText: 'net: off' }).waitFor();
    await screenshot(page, 'mention-sent');
  });

  // ---- the model's plan (update_plan) as a checklist above the prompt box ---------------------------------------
  await llm.enqueue(
    {
      steps: [
        call('call_e2e_plan', 'update_plan', {
          entries: [
            { content: 'Read the README', status: 'completed' },
            { content: 'Write the summary', status: 'in_progress' },
            { content: 'Check the links', status: 'pending' },
          ],
        }),
      ],
    },
    { steps: [say('Plan made.')] },
  );
  await check('the plan the model sets with update_plan shows as a checklist above the prompt box, with its count and markers', async () => {
    if (await c.locator('[data-testid=plan]').isVisible()) throw new Error('a plan panel shows before the model made a plan');
    await c.locator('[data-testid=prompt]').fill('Make a plan');
    await c.locator('[data-testid=prompt]').press('Enter');
    await c.locator('[data-testid=assistant-message]', { hasText: 'Plan made.' }).waitFor();
    const panel = c.locator('[data-testid=plan]');
    await panel.waitFor({ state: 'visible' });
    await panel.locator('[data-testid=plan-count]', { hasText: '1/3' }).waitFor();
    const rows = await panel.locator('[data-testid=plan-entry]').evaluateAll((els) => els.map((e) => [(e as HTMLElement).dataset.status, e.textContent?.trim()]));
    const want = [
      ['completed', '✓Read the README'],
      ['in_progress', '▸Write the summary'],
      ['pending', '○Check the links'],
    ];
    if (JSON.stringify(rows) !== JSON.stringify(want)) throw new Error(`the checklist shows ${JSON.stringify(rows)}`);
    // Pinned above the prompt box, where it stays in view while the chat scrolls.
    const [planBox, promptBox] = [await panel.boundingBox(), await c.locator('[data-testid=prompt]').boundingBox()];
    if (!planBox || !promptBox || planBox.y + planBox.height > promptBox.y) throw new Error(`the plan is not above the prompt box: ${JSON.stringify({ planBox, promptBox })}`);
    await screenshot(page, 'plan-checklist');
  });

  /** Streams `lines` as one answer, one line per chunk, and returns the CPU it cost (recorded in `file`). */
  const streamMeasured = async (lines: string[], prompt: string, file: string, end: string) => {
    await llm.enqueue({ steps: [...lines.map((l) => say(`${l}\n`)), say(end)] });
    const measure = () => {
      const browser = measured.browserPid();
      const chromiumPids = browser ? processTree(browser) : [];
      const hostPids = processTree(measured.codeServerPid).filter((p) => /extensionHost|bootstrap-fork/.test(cpuTimes([p]).get(p)?.cmd ?? ''));
      return { chromium: cpuTimes(chromiumPids), host: cpuTimes(hostPids) };
    };
    const sum = (m: Map<number, { cpu: number }>, base: Map<number, { cpu: number }>) => [...m].reduce((a, [pid, v]) => a + v.cpu - (base.get(pid)?.cpu ?? 0), 0);
    // Each stream starts in an empty chat, so what an earlier answer left on screen costs no layout here.
    await c.locator('[data-testid=new-session]').click();
    await c.locator('[data-testid=user-message]').first().waitFor({ state: 'detached' });
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
    const before = measure();
    const t0 = Date.now();
    await c.locator('[data-testid=prompt]').fill(prompt);
    await c.locator('[data-testid=prompt]').press('Enter');
    await c.locator('[data-testid=assistant-message]:not(.streaming)', { hasText: end }).waitFor({ timeout: 180_000 });
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
    const wall = (Date.now() - t0) / 1000;
    const after = measure();
    const figures = { lines: lines.length, wallSeconds: wall, chromiumCpuSeconds: sum(after.chromium, before.chromium), extensionHostCpuSeconds: sum(after.host, before.host) };
    fs.writeFileSync(path.join(ARTIFACTS, file), JSON.stringify(figures, null, 2) + '\n');
    log(`${prompt}: ${JSON.stringify(figures)}`);
    return figures;
  };

  // Streaming cost is checked as a ratio, never as seconds: the same shape of answer streams at 250 lines (the
  // anchor), at 2,000 lines, and at 250 lines again in this run, and the long one may cost at most SCALING_BOUND times the
  // mean of the two short ones around it (which cancels a machine that slows down or speeds up during the check);
  // each in a new session's empty chat.
  // Seconds of Chromium CPU on this shared 2-core machine varied 2× between runs of the same code (8.2 and 16.9 s
  // for the code block), so a bound in seconds either failed good code or passed a quadratic renderer. Each figure
  // goes to e2e-artifacts. The bound sits between what the incremental renderer and a renderer that redoes the
  // whole message per chunk measured here (ratios in each check); those are not 8× and 64×, the ideal linear and
  // quadratic ratios, because a turn has fixed costs and each re-render a fixed cost per chunk.
  const SCALING_BOUND = 16;
  // `shortEnd` shares no text with `end`: a message is awaited by the text it ends with.
  // `checkLong` checks the long answer while it is on screen.
  const scaling = async (make: (n: number) => string[], prompt: string, file: string, end: string, shortEnd: string, checkLong: () => Promise<void>) => {
    const before = await streamMeasured(make(250), `${prompt} (250 lines)`, file.replace('.json', '-250.json'), shortEnd);
    const long = await streamMeasured(make(2000), prompt, file, end);
    await checkLong();
    const after = await streamMeasured(make(250), `${prompt} (250 lines again)`, file.replace('.json', '-250-again.json'), `${shortEnd} AGAIN`);
    const anchor = Math.max((before.chromiumCpuSeconds + after.chromiumCpuSeconds) / 2, 0.05);
    const ratio = long.chromiumCpuSeconds / anchor;
    log(`${prompt}: 2,000 lines cost ${ratio.toFixed(1)}× the Chromium CPU of 250 (${long.chromiumCpuSeconds.toFixed(2)} s / ${anchor.toFixed(2)} s)`);
    return ratio;
  };

  await check('a 2,000-line answer streams in CPU that grows linearly with its length (recorded in e2e-artifacts/stream-cpu*.json)', async () => {
    // Prose, lists and code blocks, one line per streamed piece, as a long real answer comes.
    const answerLines = (n: number) => Array.from({ length: n }, (_, i) =>
      i % 50 === 0 ? `## Part ${i / 50}` : i % 50 === 1 || i % 50 === 20 ? '' : i % 50 < 12 ? `- item ${i} with **bold** and \`code\`` : i % 50 === 12 ? '```rust' : i % 50 < 19 ? `let x${i} = ${i}; // line ${i}` : i % 50 === 19 ? '```' : `Paragraph line ${i} of a long answer, with some words to wrap.`,
    );
    const ratio = await scaling(answerLines, 'Write a long answer', 'stream-cpu.json', 'THE END', 'FINISHED SHORT ANSWER', async () => {
      // The whole answer is there and rendered right: 40 parts, each with a heading, 10 list items and a code block.
      const answer = c.locator('[data-testid=assistant-message]', { hasText: 'THE END' });
      const counts = { h2: await answer.locator('h2').count(), li: await answer.locator('li').count(), code: await answer.locator('pre code').count() };
      if (counts.h2 !== 40 || counts.li !== 400 || counts.code !== 40) throw new Error(`the answer rendered as ${JSON.stringify(counts)}`);
      await screenshot(page, 'long-answer');
    });
    // The incremental renderer measured 7.5× here (8.92 s / 1.19 s); re-rendering the whole message per chunk 23.9×
    // (120.7 s / 5.06 s).
    if (ratio > SCALING_BOUND) throw new Error(`2,000 lines cost ${ratio.toFixed(1)}× the Chromium CPU of 250 (bound: ${SCALING_BOUND}×): the renderer redoes work per chunk`);
  });

  await check('a 2,000-line code block streams in CPU that grows linearly with its length (recorded in e2e-artifacts/stream-cpu-code*.json)', async () => {
    // One fenced block with no blank line to cut at: the case where only the fence itself can be streamed in pieces.
    const fileLines = (n: number) => ['Here is the file:', '', '```rust', ...Array.from({ length: n }, (_, i) => `fn f${i}() -> u32 { ${i} } // <not html> & more`), '```', ''];
    const ratio = await scaling(fileLines, 'Write a long file', 'stream-cpu-code.json', 'END OF FILE', 'FINISHED SHORT FILE', async () => {
      const code = c.locator('[data-testid=assistant-message]', { hasText: 'END OF FILE' }).locator('pre code');
      if ((await code.count()) !== 1) throw new Error(`the answer has ${await code.count()} code blocks`);
      const text = await code.innerText();
      if (!text.includes('fn f0() -> u32 { 0 } // <not html> & more') || !text.includes('fn f1999()')) throw new Error(`the code block holds ${JSON.stringify(text.slice(0, 200))}…`);
      await screenshot(page, 'long-code-block');
    });
    // The fence streamed in pieces measured 7.3× here (7.08 s / 0.98 s); re-rendering the whole message per chunk
    // 38.1× (82.9 s / 2.17 s); re-rendering only the open fence per chunk (the streamed fence turned off) 29.6×
    // (104.7 s / 3.54 s), while the prose check above still passed at 6.6×.
    if (ratio > SCALING_BOUND) throw new Error(`2,000 lines cost ${ratio.toFixed(1)}× the Chromium CPU of 250 (bound: ${SCALING_BOUND}×): the renderer redoes work per chunk`);
  });

  await check('the command palette lists the tandem commands', async () => {
    await page.keyboard.press('F1');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible' });
    await input.fill('>tandem: Switch Model');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Switch Model' }).first().waitFor();
    await page.keyboard.press('Enter');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'mock' }).first().waitFor();
    await screenshot(page, 'switch-model');
    await page.keyboard.press('Escape');
  });

  // ---- MCP: a config server's status and approval; a workspace .mcp.json server trusted from its notification ----
  await llm.enqueue({ steps: [call('call_e2e_mcp', 'mcp__t__echo', { text: 'e2e via mcp', n: 2 })] }, { steps: [say('MCP echoed.')] });
  await check('an MCP server of the config shows MCP 1/1; its approval names server and tool with the arguments as pretty JSON; Allow runs it', async () => {
    await page.locator('.statusbar-item', { hasText: 'MCP 1/1' }).first().waitFor();
    await c.locator('[data-testid=mcp]', { hasText: 'MCP 1/1' }).waitFor();
    await c.locator('[data-testid=prompt]').fill('Echo through MCP');
    await c.locator('[data-testid=prompt]').press('Enter');
    const card = c.locator('[data-testid=tool-card][data-status=awaitingApproval]');
    await card.waitFor();
    await card.locator('[data-testid=tool-mcp-server]', { hasText: 'MCP t' }).waitFor();
    const heading = await card.locator('[data-testid=approval-mcp]').innerText();
    if (heading.trim() !== 'MCP server t wants to run echo') throw new Error(`the approval says ${JSON.stringify(heading)}`);
    await card.locator('[data-testid=approval-mcp] code', { hasText: 'echo' }).waitFor();
    const args = await card.locator('[data-testid=approval-arguments]').innerText();
    if (args.trim() !== '{\n  "text": "e2e via mcp",\n  "n": 2\n}') throw new Error(`the arguments show as ${JSON.stringify(args)}`);
    await card.locator('[data-testid=approve-alwaysTool]').waitFor();
    await screenshot(page, 'mcp-approval');
    await card.locator('[data-testid=approve-once]').click();
    await c.locator('[data-testid=assistant-message]', { hasText: 'MCP echoed.' }).waitFor();
    await c.locator('[data-testid=tool-card][data-status=completed] [data-testid=tool-mcp-server]', { hasText: 'MCP t' }).first().waitFor();
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
  });

  await llm.enqueue({ steps: [say('A workspace server waits.')] });
  await check("a workspace .mcp.json server is untrusted (MCP 1/2, warning); the notification's Trust and start makes it ready (MCP 2/2)", async () => {
    fs.writeFileSync(path.join(ws, '.mcp.json'), JSON.stringify({ mcpServers: { w: { command: mcpPython(), args: [MCP_STDIO_SERVER] } } }));
    await c.locator('[data-testid=new-session]').click();
    await c.locator('[data-testid=user-message]').first().waitFor({ state: 'detached' });
    await c.locator('[data-testid=prompt]').fill('Any workspace servers?');
    await c.locator('[data-testid=prompt]').press('Enter');
    await c.locator('[data-testid=assistant-message]', { hasText: 'A workspace server waits.' }).waitFor();
    await page.locator('.statusbar-item', { hasText: 'MCP 1/2' }).first().waitFor();
    await c.locator('[data-testid=mcp][data-warning=true]', { hasText: 'MCP 1/2' }).waitFor();
    const toast = page.locator('.notification-toast', { hasText: 'defines the MCP server' }).first();
    await toast.waitFor();
    await screenshot(page, 'mcp-untrusted');
    await toast.locator('.monaco-button', { hasText: 'Trust and start' }).first().click();
    await page.locator('.statusbar-item', { hasText: 'MCP 2/2' }).first().waitFor();
    await c.locator('[data-testid=mcp][data-warning=false]', { hasText: 'MCP 2/2' }).waitFor();
    const trusts = tapRecords(server.log).filter((r) => r.method === 'mcp/trust');
    if (trusts.length !== 1 || trusts[0].params?.server !== 'w') throw new Error(`mcp/trust requests: ${JSON.stringify(trusts)}`);
    await screenshot(page, 'mcp-trusted');
  });

  // ---- checkpoints: Show changes, Undo (files and conversation), Edit & resend --------------------------------
  await llm.enqueue(
    { steps: [say('Rewriting undo-me.txt.'), call('call_e2e_undo', 'write_file', { path: 'undo-me.txt', content: 'rewritten by the agent\n' })] },
    { steps: [say('Rewritten.')] },
  );
  await check('a turn wrote a file: Show changes opens it in the multi-file diff; Undo with files and conversation puts the file back byte for byte and the chat drops the turn', async () => {
    await c.locator('[data-testid=new-session]').click();
    await c.locator('[data-testid=user-message]').first().waitFor({ state: 'detached' });
    await c.locator('[data-testid=prompt]').fill('Rewrite undo-me.txt');
    await c.locator('[data-testid=prompt]').press('Enter');
    const card = c.locator('[data-testid=tool-card][data-status=awaitingApproval]');
    await card.waitFor();
    await card.locator('[data-testid=approve-once]').click();
    const file = path.join(ws, 'undo-me.txt');
    await waitFor(() => fs.readFileSync(file, 'utf8') === 'rewritten by the agent\n', STEP_TIMEOUT, 'the agent to write undo-me.txt');
    await c.locator('[data-testid=assistant-message]', { hasText: 'Rewritten.' }).waitFor();
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
    await runPalette(page, 'View: Close All Editors');
    const prompt = c.locator('[data-testid=user-message]', { hasText: 'Rewrite undo-me.txt' });
    await prompt.locator('[data-testid=turn-show-changes]').click();
    await page.locator('.tab', { hasText: 'changes of “Rewrite undo-me.txt”' }).first().waitFor();
    await page.locator('.view-lines', { hasText: 'rewritten by the agent' }).first().waitFor();
    await page.locator('.view-lines', { hasText: 'no newline at the end' }).first().waitFor();
    await screenshot(page, 'turn-changes');
    await runPalette(page, 'View: Close All Editors');
    await prompt.locator('[data-testid=turn-undo]').click();
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Files and conversation' }).first().click();
    await waitFor(() => fs.readFileSync(file).equals(UNDO_ORIGINAL), STEP_TIMEOUT, 'undo-me.txt back byte for byte');
    await c.locator('[data-testid=notice]', { hasText: 'Rewound to before “Rewrite undo-me.txt”' }).waitFor();
    await prompt.waitFor({ state: 'detached' });
    const left = { assistant: await c.locator('[data-testid=assistant-message]').count(), tools: await c.locator('[data-testid=tool-card]').count() };
    if (left.assistant || left.tools) throw new Error(`the undone turn is still in the chat: ${JSON.stringify(left)}`);
    // Files and conversation go as a files rewind, then a conversation rewind (controller.ts, rewindTo); no force.
    const rewinds = tapRecords(server.log).filter((r) => r.method === 'session/rewind').map((r) => r.params);
    if (JSON.stringify(rewinds.map((p) => [p.restore, p.force])) !== JSON.stringify([['files', undefined], ['conversation', undefined]])) throw new Error(`session/rewind requests: ${JSON.stringify(rewinds)}`);
    await screenshot(page, 'turn-undone');
  });

  await llm.enqueue({ steps: [say('Apples are red.')] }, { steps: [say('Pears are green.')] });
  await check('Edit & resend puts the prompt into the box; sent edited, the model gets the new text and not the old prompt', async () => {
    const box = c.locator('[data-testid=prompt]');
    await box.fill('Tell me about apples');
    await box.press('Enter');
    await c.locator('[data-testid=assistant-message]', { hasText: 'Apples are red.' }).waitFor();
    await c.locator('[data-testid=turn-state][data-state=idle]').waitFor();
    await c.locator('[data-testid=user-message]', { hasText: 'Tell me about apples' }).locator('[data-testid=turn-edit]').click();
    await c.locator('[data-testid=editing]').waitFor();
    const deadline = Date.now() + STEP_TIMEOUT;
    while ((await box.inputValue()) !== 'Tell me about apples') {
      if (Date.now() > deadline) throw new Error(`the prompt box holds ${JSON.stringify(await box.inputValue())}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    await screenshot(page, 'edit-and-resend');
    const before = llm.requests.length;
    await box.fill('Tell me about pears');
    await box.press('Enter');
    await c.locator('[data-testid=assistant-message]', { hasText: 'Pears are green.' }).waitFor();
    await c.locator('[data-testid=editing]').waitFor({ state: 'hidden' });
    const users = (llm.requests[before].body.messages as { role: string; content: unknown }[]).filter((m) => m.role === 'user').map((m) => JSON.stringify(m.content));
    if (!users.at(-1)?.includes('Tell me about pears') || users.some((u) => u.includes('apples'))) throw new Error(`the model got the user messages ${JSON.stringify(users)}`);
    if ((await c.locator('[data-testid=user-message]', { hasText: 'apples' }).count()) !== 0) throw new Error('the edited prompt is still in the chat');
    await c.locator('[data-testid=user-message]', { hasText: 'Tell me about pears' }).waitFor();
    const methods = tapRecords(server.log).map((r) => r.method);
    const rewinds = tapRecords(server.log).filter((r) => r.method === 'session/rewind').map((r) => r.params.restore);
    if (rewinds.join() !== 'files,conversation,files,conversation' || methods.lastIndexOf('session/rewind') > methods.lastIndexOf('prompt')) throw new Error(`requests: ${methods.join(', ')}`);
    await screenshot(page, 'edit-resent');
  });

  // ---- slash commands: the completion list in the prompt box, a command's block ---------------------------------
  await check('typing / in the prompt box lists the slash commands (a project one marked); arrows and Tab complete one; Enter runs /status and its output shows as a command block', async () => {
    fs.mkdirSync(path.join(ws, '.tandem', 'commands'), { recursive: true });
    fs.writeFileSync(path.join(ws, '.tandem', 'commands', 'review.md'), '---\ndescription: Review a file\nargument-hint: FILE\n---\nReview $ARGUMENTS.\n');
    const box = c.locator('[data-testid=prompt]');
    const menu = c.locator('[data-testid=slash-menu]');
    const value = async (want: string) => {
      const deadline = Date.now() + STEP_TIMEOUT;
      while ((await box.inputValue()) !== want) {
        if (Date.now() > deadline) throw new Error(`the prompt box holds ${JSON.stringify(await box.inputValue())}, not ${JSON.stringify(want)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    await box.fill('');
    await box.click();
    await box.pressSequentially('/');
    await menu.waitFor({ state: 'visible' });
    // The list is read at this fresh `/`: the command file written just now is in it, marked as the project's.
    await menu.locator('[data-testid=slash-item][data-name=review] [data-testid=slash-source]', { hasText: 'project' }).waitFor();
    await menu.locator('[data-testid=slash-item][data-name=status]').waitFor();
    await menu.locator('[data-testid=slash-item][data-name=review]', { hasText: 'FILE' }).waitFor();
    if ((await box.getAttribute('aria-expanded')) !== 'true') throw new Error('the box does not say its list is expanded');
    await screenshot(page, 'slash-menu');
    await box.pressSequentially('mo');
    await menu.locator('[data-testid=slash-item]').nth(1).waitFor();
    const rows = async () => menu.locator('[data-testid=slash-item]').evaluateAll((els) => els.map((e) => [(e as HTMLElement).dataset.name, e.getAttribute('aria-selected')]));
    if (JSON.stringify(await rows()) !== JSON.stringify([['mode', 'true'], ['model', 'false']])) throw new Error(`/mo lists ${JSON.stringify(await rows())}`);
    await box.press('ArrowDown');
    await menu.locator('[data-testid=slash-item][data-name=model][aria-selected=true]').waitFor();
    if ((await box.getAttribute('aria-activedescendant')) !== (await menu.locator('[data-testid=slash-item][data-name=model]').getAttribute('id'))) throw new Error('aria-activedescendant does not name the highlighted row');
    await box.press('Tab');
    await value('/model ');
    await menu.waitFor({ state: 'hidden' });
    // Escape closes the list without stopping anything; Enter on a partly typed name completes it, then sends.
    await box.fill('');
    await box.pressSequentially('/sta');
    await menu.locator('[data-testid=slash-item][data-name=status]').waitFor();
    await box.press('Escape');
    await menu.waitFor({ state: 'hidden' });
    await box.fill('');
    await box.pressSequentially('/sta');
    await menu.locator('[data-testid=slash-item][data-name=status][aria-selected=true]').waitFor();
    await box.press('Enter');
    await value('/status ');
    const before = llm.requests.length;
    await box.press('Enter');
    const block = c.locator('[data-testid=command-result][data-command=status]');
    await block.waitFor();
    await block.locator('[data-testid=command-prompt]', { hasText: '/status' }).waitFor();
    await block.locator('[data-testid=command-output]', { hasText: 'mock' }).waitFor();
    if (llm.requests.length !== before) throw new Error('/status asked the model');
    const prompts = tapRecords(server.log).filter((r) => r.method === 'prompt').map((r) => r.params?.content);
    if (prompts.at(-1) !== '/status') throw new Error(`the last prompt sent was ${JSON.stringify(prompts.at(-1))}`);
    await screenshot(page, 'slash-status');
  });

  // ---- hooks: each run as a compact line in its turn (a user hook: it needs no trust) ---------------------------
  await llm.enqueue(
    { steps: [call('call_e2e_hook1', 'read_file', { path: 'README.md' })] },
    { steps: [call('call_e2e_hook2', 'read_file', { path: 'secret.txt' })] },
    { steps: [say('Hooks ran.')] },
  );
  await check('hook runs show as compact lines in the turn: an allowed read (exit 0) and a blocked one (exit 2), styled apart', async () => {
    // The user's hooks file is read when a session opens: written first, then a new session.
    const hooksFile = path.join(path.dirname(ws), 'xdg-config', 'tandem', 'hooks.json');
    fs.mkdirSync(path.dirname(hooksFile), { recursive: true });
    const guard = 'if grep -q secret.txt; then echo "secret.txt is off limits" >&2; exit 2; fi';
    fs.writeFileSync(hooksFile, JSON.stringify({ hooks: { PreToolUse: [{ matcher: 'Read', hooks: [{ type: 'command', command: guard }] }] } }));
    fs.writeFileSync(path.join(ws, 'secret.txt'), 'hunter2\n');
    try {
      await c.locator('[data-testid=new-session]').click();
      await c.locator('[data-testid=user-message]').first().waitFor({ state: 'detached' });
      await c.locator('[data-testid=prompt]').fill('Read two files');
      await c.locator('[data-testid=prompt]').press('Enter');
      await c.locator('[data-testid=assistant-message]', { hasText: 'Hooks ran.' }).waitFor();
      const lines = c.locator('[data-testid=hook-line]');
      await lines.nth(1).waitFor();
      const shown = await lines.evaluateAll((els) => els.map((e) => [(e as HTMLElement).dataset.outcome, e.textContent?.replace(/\s+/g, ' ').trim()]));
      const want = [
        ['ok', `hook PreToolUse ${guard} — exit 0`],
        ['blocked', `hook PreToolUse ${guard} — blocked, exit 2`],
      ];
      if (shown.length !== 2 || shown.some(([o, t], i) => o !== want[i][0] || !t?.startsWith(want[i][1]) || !/, \d+ ms$/.test(t))) throw new Error(`the hook lines are ${JSON.stringify(shown)}`);
      const colors = await lines.evaluateAll((els) => els.map((e) => getComputedStyle(e).borderLeftColor));
      if (colors[0] === colors[1]) throw new Error(`a blocked run looks like an allowed one (${colors.join(' / ')})`);
      await screenshot(page, 'hook-lines');
    } finally {
      fs.rmSync(hooksFile, { force: true });
    }
  });

  await llm.enqueue({ steps: [call('call_e2e_hook3', 'read_file', { path: 'README.md' })] }, { steps: [say('Trusted hooks ran.')] });
  await check("a workspace hook file is asked about in a modal dialog (Trust / Not now) before the first prompt goes; Trust sends hooks/trust and the hook runs", async () => {
    const command = 'cat > /dev/null; exit 0';
    const hooksFile = path.join(ws, '.tandem', 'hooks.json');
    fs.mkdirSync(path.dirname(hooksFile), { recursive: true });
    fs.writeFileSync(hooksFile, JSON.stringify({ hooks: { PreToolUse: [{ matcher: 'Read', hooks: [{ type: 'command', command }] }] } }));
    try {
      await c.locator('[data-testid=new-session]').click();
      await c.locator('[data-testid=user-message]').first().waitFor({ state: 'detached' });
      const news = sessionNews().length;
      await c.locator('[data-testid=prompt]').fill('Read with project hooks');
      await c.locator('[data-testid=prompt]').press('Enter');
      const dialog = page.locator('.monaco-dialog-box');
      await dialog.waitFor();
      await dialog.locator('.dialog-message-text', { hasText: 'defines hooks (.tandem/hooks.json)' }).waitFor();
      await dialog.locator('.dialog-message-detail', { hasText: `PreToolUse (Read): ${command}` }).waitFor();
      const buttons = (await dialog.locator('.dialog-buttons .monaco-button').allInnerTexts()).map((b) => b.trim()).sort();
      if (JSON.stringify(buttons) !== JSON.stringify(['Not now', 'Trust'])) throw new Error(`the dialog's buttons are ${JSON.stringify(buttons)}`);
      await screenshot(page, 'hooks-trust-dialog');
      const methods = () => tapRecords(server.log).map((r) => r.method);
      await waitFor(() => sessionNews().length === news + 1, STEP_TIMEOUT, 'the session/new');
      const sinceNew = () => methods().slice(methods().lastIndexOf('session/new'));
      if (sinceNew().includes('prompt')) throw new Error(`the prompt went before the answer: ${sinceNew().join(', ')}`);
      await dialog.locator('.dialog-buttons .monaco-button', { hasText: 'Trust' }).click();
      await c.locator('[data-testid=assistant-message]', { hasText: 'Trusted hooks ran.' }).waitFor();
      await c.locator('[data-testid=hook-line][data-outcome=ok]', { hasText: command }).waitFor();
      const order = sinceNew().filter((m) => m === 'hooks/trust' || m === 'prompt');
      if (order.join() !== 'hooks/trust,prompt') throw new Error(`after session/new: ${sinceNew().join(', ')}`);
    } finally {
      fs.rmSync(hooksFile, { force: true });
    }
  });

  // ---- Configure Model: the config for a provider kind, the key in SecretStorage and the server's environment --
  await llm.enqueue({ steps: [say('Configured and answering.')] });
  await check('Configure Model writes the config for the chosen kind, keeps the key out of it, and the server gets the key', async () => {
    const launchesBefore = launches();
    await runPalette(page, 'tandem: Configure Model');
    const quick = page.locator('.quick-input-widget input');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'OpenAI-compatible server' }).first().click();
    await page.locator('.quick-input-widget', { hasText: 'model name' }).waitFor();
    await quick.fill('mock-model');
    await page.keyboard.press('Enter');
    await page.locator('.quick-input-widget', { hasText: 'base URL' }).waitFor();
    await quick.fill(llm.baseUrl);
    await page.keyboard.press('Enter');
    await page.locator('.quick-input-widget', { hasText: 'API key' }).waitFor();
    await quick.fill('sk-e2e-secret-4711');
    await screenshot(page, 'configure-model-key');
    await page.keyboard.press('Enter');
    // The settings change restarts the server with the new config.
    await waitFor(() => launches() === launchesBefore + 1, STEP_TIMEOUT, 'the server to restart with the new config');
    const launch = tapRecords(server.log).filter((r) => r.launch !== undefined).at(-1) as { args?: string[] };
    const cfgPath = launch.args?.[launch.args.indexOf('--config') + 1] ?? '';
    const written = fs.readFileSync(cfgPath, 'utf8');
    if (!/kind = "openai"/.test(written) || !written.includes(`base_url = "${llm.baseUrl}"`) || !/name = "mock-model"/.test(written)) throw new Error(`the config is ${written}`);
    if (!/api_key_env = "TANDEM_VSCODE_OPENAI_COMPATIBLE_API_KEY"/.test(written)) throw new Error(`the config names no key variable: ${written}`);
    if (written.includes('sk-e2e-secret-4711')) throw new Error('the API key was written into the config file');
    const settings = fs.readFileSync(path.join(server.userData, 'User', 'settings.json'), 'utf8');
    if (settings.includes('sk-e2e-secret-4711')) throw new Error('the API key is in settings.json');
    if (!settings.includes(cfgPath)) throw new Error(`tandem.configFile does not point at ${cfgPath}: ${settings}`);
    await c.locator('[data-testid=model]', { hasText: 'main' }).waitFor();
    const before = llm.requests.length;
    await c.locator('[data-testid=prompt]').fill('Are you there?');
    await c.locator('[data-testid=prompt]').press('Enter');
    await c.locator('[data-testid=assistant-message]', { hasText: 'Configured and answering.' }).waitFor();
    // The key reached the provider only through the server's environment.
    const auth = llm.requests[before]?.headers.authorization;
    if (auth !== 'Bearer sk-e2e-secret-4711') throw new Error(`the provider got authorization ${JSON.stringify(auth)}`);
    await screenshot(page, 'configured-model');
  });

  // ---- Share Session: off by default; with tandem.attach.listen the server listens and the snippet is copied ----
  await check('Share Session without tandem.attach.listen says to set it and opens the setting; set there, the server restarts listening and the command copies the attach snippet', async () => {
    await runPalette(page, 'tandem: Share Session');
    const toast = page.locator('.notifications-toasts .notification-toast', { hasText: 'tandem.attach.listen' }).first();
    await toast.waitFor();
    await screenshot(page, 'share-not-listening');
    await toast.locator('.monaco-button', { hasText: 'Open Setting' }).click();
    // Open Setting shows the setting itself; typed in there, as a user does, VS Code saves it and the server restarts.
    const setting = page.locator('.settings-editor .setting-item', { hasText: 'Attach: Listen' }).first();
    await setting.waitFor();
    const launchesBefore = launches();
    await setting.locator('input').first().fill('ws://127.0.0.1:0');
    await waitFor(() => launches() === launchesBefore + 1, STEP_TIMEOUT, 'the server to restart with tandem.attach.listen');
    const launch = tapRecords(server.log).filter((r) => r.launch !== undefined).at(-1) as { args?: string[] };
    if (!launch.args?.join(' ').endsWith('--listen stdio --listen ws://127.0.0.1:0')) throw new Error(`the server was started with ${JSON.stringify(launch.args)}`);
    await screenshot(page, 'share-setting');
    // The settings editor is a modal over the workbench in this VS Code (a tab in older ones): closed by its X.
    await page.locator('.modal-editor-header .codicon-close, .tabs-container .tab.active .tab-actions .codicon-close').first().click();
    await page.locator('.settings-editor').waitFor({ state: 'detached' });
    // The status bar item carries the broadcast mark while the server listens.
    await page.locator('.statusbar-item', { hasText: /tandem: main · idle/ }).locator('.codicon-broadcast').first().waitFor();
    await page.evaluate(() => navigator.clipboard.writeText('')).catch(() => undefined);
    await runPalette(page, 'tandem: Share Session');
    await page.locator('.quick-input-widget', { hasText: 'lets anyone who has it drive every session' }).waitFor();
    await screenshot(page, 'share-pick');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'Copy the attach snippet' }).first().click();
    let copied = '';
    const deadline = Date.now() + STEP_TIMEOUT;
    while (!(copied = await page.evaluate(() => navigator.clipboard.readText()).catch((e: unknown) => `(clipboard unreadable: ${e})`)).startsWith('{')) {
      if (Date.now() > deadline) throw new Error(`the clipboard holds ${JSON.stringify(copied)}, not the snippet`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const snippet = JSON.parse(copied) as { url: string; token: string; sessionId: string };
    const token = fs.readFileSync(path.join(server.home, 'attach-token'), 'utf8').trim();
    if (!/^[0-9a-f]{64}$/.test(token) || snippet.token !== token) throw new Error(`the snippet's token ${JSON.stringify(snippet.token)} is not the token file's ${JSON.stringify(token)}`);
    if (!new RegExp(`^ws://127\\.0\\.0\\.1:\\d+/\\?token=${token}$`).test(snippet.url)) throw new Error(`the snippet's url is ${snippet.url}`);
    // After the restart the extension resumed the open session with session/load: that is the one to attach to.
    const resumed = tapRecords(server.log).filter((r) => r.method === 'session/load').at(-1)?.params?.sessionId;
    if (!resumed || snippet.sessionId !== resumed) throw new Error(`the snippet names session ${snippet.sessionId}, the open one is ${resumed}`);
    await screenshot(page, 'share-copied');
  });
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`[e2e] setup failed: ${err instanceof Error ? err.message : err}`);
    console.log(`${results.filter((r) => r.ok).length} passed, ${results.filter((r) => !r.ok).length + 1} failed`);
    process.exit(1);
  },
);
