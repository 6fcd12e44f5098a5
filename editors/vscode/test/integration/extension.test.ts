// Integration tests of the whole extension (activate → controller → commands → diff review → webview
// protocol) inside the fake `vscode` host, against the real tandem binary and the mock LLM. They check what a
// user would see: the diff editor opens, edits on its proposed side are what lands on disk, commands and the
// webview's buttons drive approvals, stop and steering, and crashes are reported and recovered from. What
// the extension starts is observed where it happens: every spawn of the binary and every request on the wire,
// so "activation starts no server" and "the first prompt creates one session" are facts, not inferences.
import '../vscodeHook';
import { after, afterEach, before, describe, test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import childProcess = require('node:child_process');
import { fake, Uri, type FakeDocument } from '../fakeVscode';
import { MockLlm, call, gate, say, waitFor } from '../mockLlm';
import { tempDir, TANDEM_BIN, requireBinary } from './harness';
import { TandemClient } from '../../src/client';
import * as ext from '../../src/extension';
import { mcpApprovalText } from '../../src/mcp';
import * as os from 'node:os';

const EXT_DIR = path.resolve(__dirname, '..', '..', '..');

interface FakeView {
  posted: any[];
  send(m: unknown): void;
  /** The HTML the view was given (what shows before its script runs). */
  html?: () => string;
}

/** The server processes the extension spawned (argv of each) and the requests it sent, in order. */
const spawned: string[][] = [];
const sent: { method: string; params: any }[] = [];
/** The clients that sent those requests, to listen to their events too. */
const clients = new Set<TandemClient>();
/** Set by a test to make the server's answer to `stop` fail (a stop that does not get through). */
let failStop = false;
/** Set by a test to make `mcp/status` fail, so only the mcpStatus events tell the extension about MCP servers. */
let failMcpStatus = false;
const sentOf = (method: string) => sent.filter((r) => r.method === method);

/**
 * Activates the extension the way VS Code does. Unless `showView` is false, VS Code also shows the chat
 * (it resolves a webview view when it becomes visible), which `show()` does later otherwise.
 */
async function activate(
  settings: Record<string, unknown>,
  opts: { showView?: boolean; ws?: string } = {},
): Promise<{ view: FakeView; ws: string; show(): void }> {
  fake.reset();
  spawned.length = 0;
  sent.length = 0;
  clients.clear();
  failStop = false;
  failMcpStatus = false;
  const ws = opts.ws ?? tempDir('tandem-ext-ws-');
  fake.workspaceFolder = ws;
  for (const [k, v] of Object.entries(settings)) fake.settings.set(k, v);
  const context = { subscriptions: [] as { dispose(): void }[], extensionUri: Uri.file(EXT_DIR), extension: { packageJSON: { version: '0.0.0-test' } } };
  ext.activate(context as never);
  const posted: any[] = [];
  let handler: (m: unknown) => void = () => {};
  const webview: { html: string } = { html: '' };
  const show = () =>
    fake.webviewProviders.get('tandem.chat').resolveWebviewView({
      visible: true,
      webview: Object.assign(webview, {
        options: {},
        html: '',
        cspSource: 'vscode-resource:',
        asWebviewUri: (u: Uri) => u,
        // A copy, as VS Code serializes what it posts: the view must not see later changes of the state it was sent.
        postMessage: async (m: unknown) => posted.push(structuredClone(m)),
        onDidReceiveMessage: (h: (m: unknown) => void) => (handler = h),
      }),
      onDidDispose: () => undefined,
    });
  if (opts.showView !== false) show();
  return { view: { posted, send: (m) => handler(m), html: () => webview.html }, ws, show };
}

/** The chat items as the webview would have them, rebuilt from the posted snapshot and updates. */
function viewItems(view: FakeView): any[] {
  let items: any[] = [];
  for (const m of view.posted) {
    if (m.type === 'snapshot') items = m.snapshot.items.slice();
    if (m.type === 'items') for (const u of m.updates) items[u.index] = u.item;
    if (m.type === 'append') {
      items[m.index] = { ...items[m.index], text: items[m.index].text + m.text, reasoning: items[m.index].reasoning + m.reasoning };
    }
  }
  return items;
}

function viewMeta(view: FakeView): any {
  let meta: any;
  for (const m of view.posted) {
    if (m.type === 'snapshot') meta = m.snapshot.meta;
    if (m.type === 'meta') meta = m.meta;
  }
  return meta;
}

/** The server is up and no turn runs (there may be no session yet: the first prompt creates it). */
const idle = (view: FakeView) => viewMeta(view)?.server === 'ready' && viewMeta(view)?.turn === 'idle';

/** A config with a second model, so a model picked before the first prompt is told apart from the default. */
const twoModels = (llm: MockLlm) => `${llm.config()}[models.mock2]\nprovider = "local"\nname = "mock-model-2"\n`;

describe('the extension in a fake VS Code host', () => {
  let llm: MockLlm;
  let cfgFile: string;
  const realSpawn = childProcess.spawn;
  const client = TandemClient.prototype as unknown as { request(method: string, params?: object): Promise<unknown> };
  const realRequest = client.request;

  before(async () => {
    requireBinary();
    // The server's session store goes to a scratch dir, never the user's; so does its config folder (the user's own
    // slash commands and hooks under ~/.config/tandem must not reach the tests).
    process.env.TANDEM_HOME = tempDir('tandem-ext-home-');
    process.env.XDG_CONFIG_HOME = tempDir('tandem-ext-xdg-');
    llm = await new MockLlm().start();
    cfgFile = path.join(tempDir('tandem-ext-cfg-'), 'tandem.toml');
    fs.writeFileSync(cfgFile, llm.config());
    // client.ts calls child_process.spawn through the module object, so replacing it here sees every launch.
    (childProcess as { spawn: unknown }).spawn = (cmd: string, args: string[], ...rest: unknown[]) => {
      if (cmd === TANDEM_BIN) spawned.push([cmd, ...args]);
      return (realSpawn as (...a: unknown[]) => unknown)(cmd, args, ...rest);
    };
    // Every JSON-RPC request of every client after initialize goes through request(): the wire, method by method.
    client.request = function (this: TandemClient, method: string, params?: object) {
      sent.push({ method, params });
      clients.add(this);
      if (method === 'stop' && failStop) return Promise.reject(new Error('stop did not get through'));
      if (method === 'mcp/status' && failMcpStatus) return Promise.reject(new Error('mcp/status did not get through'));
      return realRequest.call(this, method, params);
    };
  });
  afterEach(async () => {
    await ext.deactivate();
    await llm.expectDrained();
  });
  after(async () => {
    (childProcess as { spawn: unknown }).spawn = realSpawn;
    client.request = realRequest;
    await llm.close();
  });

  test('activation starts no server and stores no session; the chat view starts the server; the first prompt creates one session with the model and mode picked before it', async () => {
    const home = tempDir('tandem-ext-lazy-home-');
    const savedHome = process.env.TANDEM_HOME;
    process.env.TANDEM_HOME = home;
    try {
      const cfg = path.join(tempDir('tandem-ext-cfg2-'), 'tandem.toml');
      fs.writeFileSync(cfg, twoModels(llm));
      const { view, show } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfg }, { showView: false });
      // Commands that need no server stay local: the log, an empty New Session, stop/steer/retry with no turn.
      await fake.commands.get('tandem.showLog')!();
      await fake.commands.get('tandem.newSession')!();
      await fake.commands.get('tandem.stop')!();
      fake.inputBoxAnswers.push('nothing runs');
      await fake.commands.get('tandem.steer')!();
      await fake.commands.get('tandem.retry')!();
      // The mode needs no server either; picked now, it is kept for the first prompt's session.
      fake.quickPickAnswers.push((items) => items.find((i: any) => i.label === 'autoEdit'));
      await fake.commands.get('tandem.setMode')!();
      assert.deepEqual(spawned, [], 'no server process was started');
      assert.deepEqual(fs.readdirSync(home), [], 'nothing was written to the data dir');
      assert.match(fake.statusBar.text, /tandem: — · not started/);
      assert.deepEqual(
        fake.messages.map((m) => m.text),
        ['tandem: No turn is running, so there is nothing to steer: send it as a prompt instead.', 'tandem: Nothing to retry: no turn has run in this chat yet.'],
      );

      fake.messages.length = 0;

      // Shown, the chat needs the model list: that starts the server, which still gets no session/new.
      show();
      view.send({ type: 'ready' });
      await waitFor(() => idle(view) && viewMeta(view).model === 'mock', 10_000, 'the server to be ready');
      assert.equal(spawned.length, 1);
      // Only reads: the session/list behind "Resume last session" (and models/list for the picker). No session/new.
      const writes = () => sent.filter((r) => r.method !== 'session/list' && r.method !== 'models/list');
      assert.deepEqual(writes(), [], 'initialize and session/list only: no session/new');
      assert.equal(viewMeta(view).sessionId, undefined, 'no session before the first prompt');
      assert.equal(viewMeta(view).mode, 'autoEdit', 'the header shows the mode the session will get');

      // The model list needs the server, but the pick is only remembered too.
      fake.quickPickAnswers.push((items) => items.find((i: any) => i.label === 'mock2'));
      await fake.commands.get('tandem.switchModel')!();
      assert.deepEqual(writes(), []);
      assert.equal(viewMeta(view).model, 'mock2');
      assert.equal(viewMeta(view).mode, 'autoEdit');

      await llm.enqueue({ steps: [say('first answer')] }, { steps: [say('second answer')] });
      const n = llm.requests.length;
      view.send({ type: 'prompt', text: 'first prompt' });
      await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'first answer'), 10_000, 'the first turn');
      assert.equal(sentOf('session/new').length, 1);
      assert.equal(sentOf('session/new')[0].params.model, 'mock2');
      assert.equal(sentOf('session/new')[0].params.mode, 'autoEdit');
      assert.equal(llm.requests[n].body.model, 'mock-model-2', 'the turn ran on the picked model');
      const sessionId = viewMeta(view).sessionId;
      assert.match(sessionId, /\S/);
      assert.deepEqual([viewMeta(view).model, viewMeta(view).mode], ['mock2', 'autoEdit']);
      view.send({ type: 'prompt', text: 'second prompt' });
      await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'second answer'), 10_000, 'the second turn');
      assert.equal(sentOf('session/new').length, 1, 'later prompts reuse the session');
      assert.deepEqual(sentOf('prompt').map((r) => r.params.sessionId), [sessionId, sessionId]);
      assert.equal(spawned.length, 1);
      assert.deepEqual(fake.messages.filter((m) => m.level === 'error'), []);
    } finally {
      process.env.TANDEM_HOME = savedHome;
    }
  });

  test('a settings change restarts only a server that runs; one not started yet picks the new settings up when it starts', async () => {
    const { view, show } = await activate({ 'tandem.serverPath': '/no/such/tandem' }, { showView: false });
    fake.changeSettings({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    assert.deepEqual(spawned, [], 'no server is started for a settings change');
    assert.equal(fake.messages.length, 0, 'and nothing says it restarts');
    show();
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'the server with the new settings');
    assert.deepEqual(spawned, [[TANDEM_BIN, 'serve', '--config', cfgFile]]);
    const cfg = path.join(tempDir('tandem-ext-cfg3-'), 'tandem.toml');
    fs.writeFileSync(cfg, twoModels(llm));
    fake.changeSettings({ 'tandem.configFile': cfg });
    assert.match(fake.messages.at(-1)!.text, /restarting the server/);
    await waitFor(() => spawned.length === 2 && idle(view), 10_000, 'the restart');
    assert.deepEqual(spawned[1], [TANDEM_BIN, 'serve', '--config', cfg]);
    assert.deepEqual(viewMeta(view).models, ['mock', 'mock2']);
    assert.deepEqual(sentOf('session/new'), []);
  });

  test('tandem.attach.listen restarts the server listening; Share Session copies a URL and token the server accepts; cleared, sharing is off again', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    assert.doesNotMatch(fake.statusBar.tooltip, /Shareable/);
    fake.changeSettings({ 'tandem.attach.listen': 'ws://127.0.0.1:0', 'tandem.attach.allowOrigins': ['http://localhost:5173'] });
    assert.match(fake.messages.at(-1)!.text, /restarting the server/);
    await waitFor(() => spawned.length === 2 && idle(view), 10_000, 'the restart with the listener');
    assert.deepEqual(spawned[1], [TANDEM_BIN, 'serve', '--config', cfgFile, '--listen', 'stdio', '--listen', 'ws://127.0.0.1:0', '--allow-origin', 'http://localhost:5173']);
    assert.match(fake.statusBar.tooltip, /Shareable: other clients can attach at ws:\/\/127\.0\.0\.1:\d+ /);

    await llm.enqueue({ steps: [say('shared answer')] });
    view.send({ type: 'prompt', text: 'a session to share' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'shared answer'), 10_000, 'the turn');
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.action === 'copySnippet'));
    await fake.commands.get('tandem.shareSession')!();
    const snippet = JSON.parse(fake.clipboard);
    const token = fs.readFileSync(path.join(process.env.TANDEM_HOME!, 'attach-token'), 'utf8').trim();
    assert.match(token, /^[0-9a-f]{64}$/);
    assert.deepEqual(snippet, { url: snippet.url, token, sessionId: viewMeta(view).sessionId });
    assert.match(snippet.url, new RegExp(`^ws://127\\.0\\.0\\.1:\\d+/\\?token=${token}$`));
    // The URL is the live listener's, the token its current one: the handshake is accepted with it and refused without.
    assert.equal(await wsHandshake(snippet.url), 101);
    assert.equal(await wsHandshake(snippet.url.replace(/\?token=.*$/, '')), 401);

    fake.changeSettings({ 'tandem.attach.listen': '' });
    await waitFor(() => spawned.length === 3 && idle(view), 10_000, 'the restart without the listener');
    assert.deepEqual(spawned[2], [TANDEM_BIN, 'serve', '--config', cfgFile], 'origins without a listen address are not passed');
    assert.doesNotMatch(fake.statusBar.tooltip, /Shareable/);
    fake.clipboard = '';
    await fake.commands.get('tandem.shareSession')!();
    assert.match(fake.messages.at(-1)!.text, /Set "tandem\.attach\.listen"/);
    assert.equal(fake.clipboard, '');
  });

  test('prompts sent before session/new answers share one session', async () => {
    const { view, ws } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    fs.writeFileSync(path.join(ws, 'a.txt'), 'A');
    // The first turn is held, so the second prompt finds it running and becomes a steer, applied at the
    // read_file safe point.
    const hold = gate();
    await llm.enqueue({ steps: [{ until: hold.promise }, call('call_race', 'read_file', { path: 'a.txt' })] }, { steps: [say('both handled')] });
    // Two Enter presses in a row: the second arrives while the first still waits for its session.
    view.send({ type: 'prompt', text: 'first' });
    view.send({ type: 'prompt', text: 'second' });
    await waitFor(() => sentOf('steer').length === 1, 10_000, 'the second prompt to steer the first one\'s turn');
    hold.open();
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'both handled'), 10_000, 'the turn');
    assert.equal(sentOf('session/new').length, 1);
    const ids = new Set([...sentOf('prompt'), ...sentOf('steer')].map((r) => r.params.sessionId));
    assert.deepEqual([...ids], [viewMeta(view).sessionId]);
    assert.deepEqual(fake.messages.filter((m) => m.level === 'error'), []);
  });

  test('a crash before the first prompt restarts the server without creating a session', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    process.kill(Number(spawnedPid(0)), 'SIGKILL');
    await waitFor(() => spawned.length === 2 && idle(view), 10_000, 'the restart');
    assert.deepEqual(sentOf('session/new'), [], 'a restarted server gets no session/new either');
    assert.equal(viewMeta(view).sessionId, undefined);
    await llm.enqueue({ steps: [say('after the restart')] });
    view.send({ type: 'prompt', text: 'hello' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'after the restart'), 10_000, 'the turn');
    assert.equal(sentOf('session/new').length, 1);
  });

  test('without a session store, a restarted server leaves an empty chat and the next prompt creates the new session', async () => {
    // Servers before the store had no session/load: the extension must not resume then, nor create eagerly.
    const proto = TandemClient.prototype as unknown as { start(): Promise<any> };
    const realStart = proto.start;
    proto.start = async function (this: TandemClient) {
      const init = await realStart.call(this);
      return { ...init, capabilities: { ...init.capabilities, sessionStore: false } };
    };
    try {
      const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
      view.send({ type: 'ready' });
      await waitFor(() => idle(view), 10_000, 'ready');
      assert.equal(fake.contexts.get('tandem.noSessionStore'), true, 'the Sessions command is hidden');
      await llm.enqueue({ steps: [say('lost with the crash')] });
      view.send({ type: 'prompt', text: 'before' });
      await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant'), 10_000, 'the first turn');
      process.kill(spawnedPid(0), 'SIGKILL');
      await waitFor(() => spawned.length === 2 && idle(view), 10_000, 'the restart');
      assert.equal(viewMeta(view).sessionId, undefined);
      assert.deepEqual(viewItems(view).map((i) => i.text), ['The tandem server was restarted; the next prompt starts a new session (the server keeps no session store yet).']);
      assert.equal(sentOf('session/new').length, 1, 'no session/new until the next prompt');
      assert.deepEqual(sentOf('session/load'), []);
      await llm.enqueue({ steps: [say('fresh')] });
      view.send({ type: 'prompt', text: 'after' });
      await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'fresh'), 10_000, 'the turn after the restart');
      assert.equal(sentOf('session/new').length, 2);
    } finally {
      proto.start = realStart;
    }
  });

  test('New Session during a turn stops it, and nothing of the old session reaches the new chat', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    const events: { sessionId: string; type: string }[] = [];
    const hold1 = gate();
    await llm.enqueue({ steps: [say('old turn'), { until: hold1.promise }, say(' never shown')] });
    view.send({ type: 'prompt', text: 'old' });
    await waitFor(() => viewItems(view).some((i) => i.type === 'assistant' && i.text === 'old turn'), 10_000, 'the old turn to stream');
    const old = viewMeta(view).sessionId;
    const n = llm.requests.length;
    await fake.commands.get('tandem.newSession')!();
    hold1.open();
    assert.deepEqual(sentOf('stop').map((r) => r.params.sessionId), [old]);
    // The mock is another process: its record of the hang-up arrives with the next long-poll answer.
    await waitFor(() => llm.requests[n - 1]?.aborted === true, 10_000, 'the old turn to be stopped (its stream closed)');
    assert.deepEqual([viewMeta(view).sessionId, viewMeta(view).turn, viewItems(view)], [undefined, 'idle', []]);

    // A stop that does not get through leaves the old turn running: its events must not land in the draft.
    for (const c of clients) c.onEvent((e) => events.push(e));
    const hold2 = gate();
    await llm.enqueue({ steps: [say('second old'), { until: hold2.promise }, say(' late text')] });
    view.send({ type: 'prompt', text: 'again' });
    await waitFor(() => viewItems(view).some((i) => i.type === 'assistant' && i.text === 'second old'), 10_000, 'the second turn to stream');
    const second = viewMeta(view).sessionId;
    failStop = true;
    await fake.commands.get('tandem.newSession')!();
    hold2.open();
    await waitFor(() => events.some((e) => e.sessionId === second && e.type === 'turnEnded'), 10_000, 'the old turn to end on its own');
    assert.deepEqual([viewMeta(view).sessionId, viewMeta(view).turn, viewItems(view)], [undefined, 'idle', []]);
  });

  test('Sessions resumes a stored session in a window whose chat was never shown, starting the server for it', async () => {
    const first = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    first.view.send({ type: 'ready' });
    await waitFor(() => idle(first.view), 10_000, 'ready');
    await llm.enqueue({ steps: [say('stored answer')] });
    first.view.send({ type: 'prompt', text: 'stored prompt' });
    await waitFor(() => idle(first.view) && viewItems(first.view).some((i) => i.type === 'assistant'), 10_000, 'the turn');
    const stored = viewMeta(first.view).sessionId;
    await ext.deactivate();

    // A second window on the same folder; its chat stays hidden.
    const second = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile }, { showView: false, ws: first.ws });
    assert.deepEqual(spawned, []);
    let offered: string[] = [];
    fake.quickPickAnswers.push((items) => ((offered = items.map((i: any) => i.sessionId)), items.find((i: any) => i.sessionId === stored)));
    await fake.commands.get('tandem.sessions')!();
    assert.ok(offered.includes(stored), `the stored session is offered: ${offered}`);
    assert.equal(spawned.length, 1, 'the command started the server');
    // mcp/status and hooks/list are reads too: the loaded session's MCP servers and whether its hooks need trust.
    const reads = ['session/list', 'mcp/status', 'hooks/list'];
    assert.deepEqual(sent.map((r) => r.method).filter((m) => !reads.includes(m)), ['session/load'], 'reads only: no session/new');
    assert.deepEqual(sentOf('mcp/status').map((r) => r.params), [{ sessionId: stored }]);
    assert.deepEqual(sentOf('hooks/list').map((r) => r.params), [{ sessionId: stored }]);
    assert.ok(sentOf('session/list').length >= 1);
    second.show();
    second.view.send({ type: 'ready' });
    assert.equal(viewMeta(second.view).sessionId, stored);
    assert.deepEqual(viewItems(second.view).map((i) => i.text), ['stored prompt', 'stored answer']);
    assert.equal(spawned.length, 1, 'showing the chat afterwards starts no second server');
  });

  test('prompt from the webview, diff opens, the edited proposal is accepted from the editor title', async () => {
    const { view, ws } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    await waitFor(() => /mock · idle/.test(fake.statusBar.text), 10_000, 'the server to be ready');
    // Until the script's first snapshot the view says it is loading instead of being blank.
    assert.match(view.html!(), /data-testid="loading">Loading the tandem chat…</);
    // The handshake: nothing is posted before the webview says ready, then a snapshot comes first.
    assert.equal(view.posted.length, 0);
    view.send({ type: 'ready' });
    assert.equal(view.posted[0]?.type, 'snapshot');
    assert.ok(idle(view) && viewMeta(view).model === 'mock', 'the snapshot carries the server info that arrived before the view was ready');

    await llm.enqueue({ steps: [say('Writing.'), call('call_e1', 'write_file', { path: 'hello.txt', content: 'proposed\n' })] }, { steps: [say('Saved.')] });
    view.send({ type: 'prompt', text: 'make hello' });
    await waitFor(() => fake.executed.some((e) => e.id === 'vscode.diff'), 10_000, 'the diff editor');
    const diff = fake.executed.find((e) => e.id === 'vscode.diff')!;
    const [left, right] = diff.args as [Uri, Uri];
    // Opened by the approval, not by the user: the focus stays in the editor they type in.
    assert.equal((diff.args[3] as any).preserveFocus, true, 'the automatic review does not take the focus');
    const card0 = viewItems(view).find((i) => i.type === 'tool');
    view.send({ type: 'openDiff', requestId: card0.approval.requestId });
    await waitFor(() => fake.executed.filter((e) => e.id === 'vscode.diff').length === 2, 5000, 'the diff opened from the card');
    assert.equal((fake.executed.filter((e) => e.id === 'vscode.diff')[1].args[3] as any).preserveFocus, false, 'Open diff from the card focuses it');
    assert.equal((diff.args[3] as any).viewColumn, undefined, 'with no editor in use it opens in the active group');
    assert.equal(left.scheme, 'tandem-empty', 'a new file is compared with an empty document');
    assert.equal(right.scheme, 'tandem-proposed');
    const doc = fake.textDocuments.find((d) => d.uri.toString() === right.toString()) as FakeDocument;
    assert.equal(doc.getText(), 'proposed\n', 'the right side serves the proposed content');
    assert.equal(fake.contexts.get('tandem.hasPendingApproval'), true);
    assert.match(fake.statusBar.text, /approval needed/);
    const card = viewItems(view).find((i) => i.type === 'tool');
    assert.equal(card.status, 'awaitingApproval');
    assert.deepEqual(card.approval.options.map((o: any) => o.decision).sort(), ['alwaysTool', 'deny', 'once']);

    doc.setText('my own version\n');
    await fake.commands.get('tandem.approve')!(right);
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'tool' && i.status === 'completed'), 10_000, 'the turn to finish');
    assert.equal(fs.readFileSync(path.join(ws, 'hello.txt'), 'utf8'), 'my own version\n');
    assert.equal(fake.tabs.length, 0, 'the diff editor closes once the approval is resolved');
    assert.equal(fake.contexts.get('tandem.hasPendingApproval'), false);
    const texts = viewItems(view).filter((i) => i.type === 'assistant').map((i) => i.text);
    assert.deepEqual(texts, ['Writing.', 'Saved.']);
    assert.ok(viewMeta(view).usage.totalOutput > 0, 'token usage reaches the view');
    assert.deepEqual(fake.messages.filter((m) => m.level === 'error'), []);
  });

  test('a change too large to show in full opens read-only, and allowing it sends no editedContent', async () => {
    // A window big enough for the model to take 7 MiB, as the server's own limit tests do.
    const cfg = path.join(tempDir('tandem-ext-cfg-big-'), 'tandem.toml');
    fs.writeFileSync(cfg, llm.config().replace('context_window = 128000', 'context_window = 100000000'));
    const { view, ws } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfg });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    // 7 MiB of new file: its approval would carry it three times, over the server's 6 MiB cap, so it is cut.
    const content = Array.from({ length: (7 * 1024 * 1024) / 64 }, (_, i) => `${String(i).padStart(63)}\n`).join('');
    await llm.enqueue({ steps: [call('call_big', 'write_file', { path: 'big.txt', content }, 1)] }, { steps: [say('Written.')] });
    view.send({ type: 'prompt', text: 'write the big file' });
    await waitFor(() => fake.executed.some((e) => e.id === 'vscode.diff'), 20_000, 'the diff editor');
    const [, right, title] = fake.executed.find((e) => e.id === 'vscode.diff')!.args as [Uri, Uri, string];
    assert.match(title, /read-only/);
    assert.equal(fake.fileSystems.get('tandem-proposed').stat(right).permissions, 1, 'VS Code opens the proposal read-only');
    const card = viewItems(view).find((i) => i.type === 'tool');
    assert.match(card.approval.reason, /too large to show in full/);
    assert.ok(fake.messages.some((m) => m.level === 'warning' && /cannot be edited before it is applied/.test(m.text)), 'the user is told why');
    // Even if the document changed (VS Code would not let it), no edited version goes to the server.
    const doc = fake.textDocuments.find((d) => d.uri.toString() === right.toString()) as FakeDocument;
    assert.match(doc.getText(), /bytes not shown/, 'what is shown is the cut proposal');
    doc.setText('mine\n');
    await fake.commands.get('tandem.approve')!(right);
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'tool' && i.status === 'completed'), 20_000, 'the turn to finish');
    const approves = sentOf('approve');
    assert.equal(approves.length, 1);
    assert.equal(approves[0].params.editedContent, undefined, 'a cut proposal is approved as proposed');
    assert.ok(fs.readFileSync(path.join(ws, 'big.txt'), 'utf8') === content, 'the whole change is written, not the cut or the edit');
    assert.deepEqual(fake.messages.filter((m) => m.level === 'error'), []);
  });

  test('resuming a session whose history comes in pages shows all of it, oldest first', async () => {
    const cfg = path.join(tempDir('tandem-ext-cfg-pages-'), 'tandem.toml');
    fs.writeFileSync(cfg, llm.config().replace('context_window = 128000', 'context_window = 100000000'));
    const first = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfg });
    first.view.send({ type: 'ready' });
    await waitFor(() => idle(first.view), 10_000, 'ready');
    // Six prompts of 3 MiB: 18 MiB of history, more than one 16 MiB frame holds.
    const prompts = Array.from({ length: 6 }, (_, i) => `prompt ${i} ` + String.fromCharCode(97 + i).repeat(3 * 1024 * 1024));
    for (const [i, text] of prompts.entries()) {
      await llm.enqueue({ steps: [say(`answer ${i}`)] });
      first.view.send({ type: 'prompt', text });
      await waitFor(() => idle(first.view) && viewItems(first.view).some((it) => it.type === 'assistant' && it.text === `answer ${i}`), 30_000, `turn ${i}`);
    }
    const stored = viewMeta(first.view).sessionId;
    await ext.deactivate();

    const second = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfg }, { ws: first.ws });
    second.view.send({ type: 'ready' });
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.sessionId === stored));
    await fake.commands.get('tandem.sessions')!();
    const loads = sentOf('session/load');
    assert.ok(loads.length >= 2, `the history came in pages: ${loads.length} session/load`);
    assert.equal(loads[0].params.cursor, undefined, 'the newest page first');
    assert.ok(loads.slice(1).every((l) => typeof l.params.cursor === 'string'), 'then each older page by its cursor');
    const expected = prompts.flatMap((p, i) => [p, `answer ${i}`]);
    const shown = viewItems(second.view).map((i) => i.text);
    assert.equal(shown.length, expected.length, 'every message of every page');
    assert.ok(shown.every((t, i) => t === expected[i]), 'in order, oldest first');
    assert.equal(viewMeta(second.view).sessionId, stored);
  });

  test('deny with a reason from the command; the shell card shows command and cwd', async () => {
    const { view, ws } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    await llm.enqueue({ steps: [call('call_d1', 'shell', { command: 'touch denied.txt' })] }, { steps: [say('OK, not running it.')] });
    const n = llm.requests.length;
    fake.inputBoxAnswers.push('please do not');
    view.send({ type: 'prompt', text: 'touch it' });
    await waitFor(() => fake.contexts.get('tandem.pendingApprovalIsShell') === true, 10_000, 'the shell approval');
    const card = viewItems(view).find((i) => i.type === 'tool');
    assert.equal(card.approval.command, 'touch denied.txt');
    assert.equal(card.approval.cwd, ws);
    await fake.commands.get('tandem.deny')!();
    await waitFor(() => idle(view), 10_000, 'the turn to end');
    assert.equal(viewItems(view).find((i) => i.type === 'tool').status, 'denied');
    assert.ok(!fs.existsSync(path.join(ws, 'denied.txt')));
    const toolMsg = (llm.requests[n + 1].body.messages as any[]).find((m) => m.role === 'tool');
    assert.match(String(toolMsg.content), /please do not/);
  });

  test('stop from the webview mid-stream; the prompt box steers while a turn runs', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    const hold = gate();
    await llm.enqueue({ steps: [say('thinking out loud'), { until: hold.promise }] });
    view.send({ type: 'prompt', text: 'go slowly' });
    await waitFor(() => viewItems(view).some((i) => i.type === 'assistant' && i.text === 'thinking out loud'), 10_000, 'streamed text');
    assert.equal(viewMeta(view).turn, 'running');
    assert.equal(fake.contexts.get('tandem.turnRunning'), true);
    view.send({ type: 'steer', text: 'focus on tests' });
    await waitFor(() => viewItems(view).some((i) => i.type === 'user' && i.steer && i.text === 'focus on tests'), 5000, 'the steer to be queued');
    view.send({ type: 'stop' });
    await waitFor(() => viewMeta(view).turn === 'idle', 10_000, 'the stop');
    hold.open();
    assert.equal(viewMeta(view).lastEnd.reason, 'interrupted');
    assert.ok(viewItems(view).some((i) => i.type === 'notice' && i.kind === 'interrupted'));
    assert.equal(fake.contexts.get('tandem.turnRunning'), false);
  });

  test('switch model and mode through quick picks; sessions list and resume when the server has a store', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    let offered: string[] = [];
    fake.quickPickAnswers.push((items) => ((offered = items.map((i: any) => i.label)), items[0]));
    await fake.commands.get('tandem.switchModel')!();
    assert.deepEqual(offered, ['mock'], 'the models come from initialize');
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.label === 'autoEdit'));
    await fake.commands.get('tandem.setMode')!();
    assert.equal(viewMeta(view).mode, 'autoEdit');

    const store = viewMeta(view).sessionStore;
    assert.equal(fake.contexts.get('tandem.noSessionStore'), !store, 'the context key follows capabilities.sessionStore');
    if (!store) {
      await fake.commands.get('tandem.sessions')!();
      assert.match(fake.messages.at(-1)!.text, /no session store/);
      return;
    }
    await llm.enqueue({ steps: [say('remember me')] });
    view.send({ type: 'prompt', text: 'first session prompt' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'remember me'), 10_000, 'the first turn');
    const first = viewMeta(view).sessionId;
    assert.equal(viewMeta(view).mode, 'autoEdit', 'the mode picked before the first prompt went into its session');
    const created = sentOf('session/new').length;
    await fake.commands.get('tandem.newSession')!();
    assert.equal(viewMeta(view).sessionId, undefined, 'New Session leaves an empty chat whose session the next prompt creates');
    assert.equal(sentOf('session/new').length, created, 'New Session sends no session/new');
    assert.deepEqual(viewItems(view), [], 'a new session starts empty');
    assert.equal(viewMeta(view).mode, 'ask', 'a new session gets the default mode again');
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.sessionId === first));
    await fake.commands.get('tandem.sessions')!();
    assert.equal(viewMeta(view).sessionId, first);
    const texts = viewItems(view).map((i) => i.text);
    assert.ok(texts.includes('first session prompt') && texts.includes('remember me'), `history restored: ${JSON.stringify(texts)}`);
  });

  test('a plan opens as a Markdown preview and is accepted from the chat card; a question is answered in an input box', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    await llm.enqueue(
      { steps: [call('call_p1', 'propose_plan', { plan: '# Plan\n\n1. read\n2. fix' })] },
      { steps: [call('call_q1', 'ask_user', { question: 'Which file?' })] },
      { steps: [say('All answered.')] },
    );
    const n = llm.requests.length;
    fake.inputBoxAnswers.push('src/main.rs');
    view.send({ type: 'prompt', text: 'plan it' });
    await waitFor(() => fake.executed.some((e) => e.id === 'markdown.showPreview'), 10_000, 'the plan preview');
    const uri = fake.executed.find((e) => e.id === 'markdown.showPreview')!.args[0] as Uri;
    assert.equal(fake.contentProviders.get(uri.scheme).provideTextDocumentContent(uri), '# Plan\n\n1. read\n2. fix');
    assert.ok(fake.messages.some((m) => /proposes a plan/.test(m.text) && m.actions.join() === 'Accept,Reject,Comment…'));
    const card = viewItems(view).find((i) => i.type === 'question');
    assert.equal(card.plan, '# Plan\n\n1. read\n2. fix');
    assert.equal(fake.contexts.get('tandem.hasPendingQuestion'), true);
    view.send({ type: 'answer', requestId: card.requestId, answer: 'accept' });
    // The ask_user question that follows is answered through the (scripted) input box.
    await waitFor(() => idle(view), 10_000, 'the turn to end');
    const questions = viewItems(view).filter((i) => i.type === 'question');
    assert.deepEqual(questions.map((q) => q.answer), ['accept', 'src/main.rs']);
    const tools = (llm.requests.at(-1)!.body.messages as any[]).filter((m) => m.role === 'tool').map((m) => String(m.content));
    assert.equal(llm.requests.length, n + 3);
    assert.match(tools[0], /accept/);
    assert.match(tools[1], /src\/main\.rs/);
  });

  test('tandem.prompt sends the editor selection as context; the status bar opens the chat', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    assert.equal(fake.statusBar.command, 'tandem.openChat');
    const ws = fake.workspaceFolder!;
    const vscodeFake = require('../fakeVscode');
    vscodeFake.window.activeTextEditor = {
      selection: { isEmpty: false, start: { line: 1, character: 0 }, end: { line: 2, character: 5 } },
      document: { uri: Uri.file(path.join(ws, 'lib.rs')), languageId: 'rust', getText: () => 'fn a() {}\nfn b' },
    };
    try {
      await llm.enqueue({ steps: [say('Looks fine.')] });
      fake.inputBoxAnswers.push('review this');
      await fake.commands.get('tandem.prompt')!();
      await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant'), 10_000, 'the answer');
      const users = (llm.requests.at(-1)!.body.messages as any[]).filter((m) => m.role === 'user');
      const last = JSON.stringify(users.at(-1).content);
      assert.match(last, /review this/);
      assert.match(last, /Selected in lib\.rs \(lines 2-3\)/);
      assert.match(last, /fn a\(\) \{\}/);
    } finally {
      vscodeFake.window.activeTextEditor = undefined;
    }
  });

  test('a provider error ends the turn with the error shown, and tandem.retry runs it again', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    await fake.commands.get('tandem.retry')!();
    assert.match(fake.messages.at(-1)!.text, /Nothing to retry/);
    await llm.enqueue({ steps: [], status: 400 }, { steps: [say('recovered')] });
    view.send({ type: 'prompt', text: 'fail first' });
    await waitFor(() => idle(view) && viewMeta(view).lastEnd?.reason === 'error', 15_000, 'the failed turn');
    const errors = viewItems(view).filter((i) => i.type === 'notice' && i.kind === 'error');
    assert.equal(errors.length, 1, `the error is shown in the chat once: ${JSON.stringify(errors)}`);
    assert.match(errors[0].text, /400|mock provider error/);
    await fake.commands.get('tandem.retry')!();
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'recovered'), 15_000, 'the retried turn');
    assert.equal(viewMeta(view).lastEnd.reason, 'completed');
  });

  test('turn actions against the real server: Show changes, Undo with files and conversation puts the file back byte for byte and drops the turn, Edit & resend sends only the edited text', async () => {
    const { view, ws } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    // CRLF, non-ASCII and no final newline: what comes back must be these bytes, not a normalized text.
    const original = Buffer.from('line one\r\nläuft ✓\r\nno newline at the end', 'utf8');
    const file = path.join(ws, 'undo-me.txt');
    fs.writeFileSync(file, original);
    await llm.enqueue({ steps: [say('Rewriting.'), call('call_undo', 'write_file', { path: 'undo-me.txt', content: 'rewritten by the agent\n' })] }, { steps: [say('Rewritten.')] });
    view.send({ type: 'prompt', text: 'rewrite undo-me.txt' });
    await waitFor(() => viewItems(view).some((i) => i.type === 'tool' && i.approval && !i.approval.resolved), 10_000, 'the approval');
    const card = viewItems(view).find((i) => i.type === 'tool');
    view.send({ type: 'approve', requestId: card.approval.requestId, decision: 'once' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'Rewritten.'), 10_000, 'the turn');
    assert.equal(fs.readFileSync(file, 'utf8'), 'rewritten by the agent\n');
    const prompt = viewItems(view).find((i) => i.type === 'user' && i.text === 'rewrite undo-me.txt');
    assert.match(prompt.turnId ?? '', /\S/, 'the prompt knows its turn');
    const sessionId = viewMeta(view).sessionId;

    view.send({ type: 'turnAction', action: 'showChanges', turnId: prompt.turnId });
    await waitFor(() => fake.executed.some((e) => e.id === 'vscode.changes'), 10_000, 'the multi-file diff');
    assert.deepEqual(sentOf('turn/diff').map((r) => r.params), [{ sessionId, turnId: prompt.turnId }]);
    const [, list] = fake.executed.find((e) => e.id === 'vscode.changes')!.args as [string, [Uri, Uri, Uri][]];
    const provider = fake.contentProviders.get('tandem-turn');
    assert.deepEqual(
      list.map(([r, b, a]) => [r.fsPath, provider.provideTextDocumentContent(b), provider.provideTextDocumentContent(a)]),
      [[file, original.toString('utf8'), 'rewritten by the agent\n']],
    );

    fake.quickPickAnswers.push((items) => items.find((i: any) => i.restore === 'both'));
    view.send({ type: 'turnAction', action: 'undo', turnId: prompt.turnId });
    await waitFor(() => fs.readFileSync(file).equals(original), 10_000, 'undo-me.txt back as it was');
    await waitFor(() => viewItems(view).some((i) => i.type === 'notice' && i.kind === 'rewound'), 10_000, 'the rewound notice');
    assert.deepEqual(sentOf('session/rewind').map((r) => r.params), [
      { sessionId, turnId: prompt.turnId, restore: 'files' },
      { sessionId, turnId: prompt.turnId, restore: 'conversation' },
    ]);
    assert.deepEqual(viewItems(view).map((i) => i.type), ['notice'], 'the turn left the chat');
    assert.match(viewItems(view)[0].text, /Rewound to before “rewrite undo-me\.txt”: .*1 file put back \(undo-me\.txt\)/);
    assert.deepEqual(fake.messages.filter((m) => m.level !== 'info'), [], 'no conflict, no error');

    // Edit & resend: the model's next request has the edited text, and the old prompt is gone from its history.
    await llm.enqueue({ steps: [say('Apples are red.')] }, { steps: [say('Pears are green.')] });
    view.send({ type: 'prompt', text: 'tell me about apples' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'Apples are red.'), 10_000, 'the apples turn');
    const apples = viewItems(view).find((i) => i.type === 'user' && i.text === 'tell me about apples');
    view.send({ type: 'turnAction', action: 'edit', turnId: apples.turnId });
    await waitFor(() => viewMeta(view).editing?.text === 'tell me about apples', 5000, 'the prompt in the box');
    const n = llm.requests.length;
    view.send({ type: 'prompt', text: 'tell me about pears', editTurnId: apples.turnId });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'Pears are green.'), 10_000, 'the resent turn');
    assert.equal(llm.requests.length, n + 1);
    const users = (llm.requests[n].body.messages as { role: string; content: unknown }[]).filter((m) => m.role === 'user').map((m) => JSON.stringify(m.content));
    assert.ok(users.at(-1)!.includes('tell me about pears'), `the request ends with the edited prompt: ${users}`);
    assert.ok(!users.some((u) => u.includes('apples')), `the old prompt is not in the request: ${users}`);
    assert.deepEqual(sentOf('session/rewind').slice(-2).map((r) => r.params), [
      { sessionId, turnId: apples.turnId, restore: 'files' },
      { sessionId, turnId: apples.turnId, restore: 'conversation' },
    ]);
    const methods = sent.map((r) => r.method);
    assert.ok(methods.lastIndexOf('session/rewind') < methods.lastIndexOf('prompt'), 'rewind, then prompt');
    assert.equal(viewMeta(view).editing, undefined);
    assert.deepEqual(
      viewItems(view).map((i) => (i.type === 'notice' ? i.kind : i.text)),
      ['rewound', 'rewound', 'tell me about pears', 'Pears are green.'],
    );

    // Resumed from the store, the history shows the server's rewound notices where the turns were.
    await ext.deactivate();
    const again = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile }, { ws });
    again.view.send({ type: 'ready' });
    await waitFor(() => idle(again.view), 10_000, 'ready again');
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.sessionId === sessionId));
    await fake.commands.get('tandem.sessions')!();
    const resumed = viewItems(again.view);
    assert.deepEqual(resumed.filter((i) => i.type !== 'notice').map((i) => i.text), ['tell me about pears', 'Pears are green.']);
    assert.equal(resumed.filter((i) => i.type === 'notice' && i.kind === 'rewound').length, 2, JSON.stringify(resumed));
    assert.ok(resumed.filter((i) => i.type === 'notice').every((i) => !i.turnId), 'a rewound notice offers no turn actions');
  });

  test('undo against the real server: a file changed since the turn is a conflict, listed with its reason; Force puts it back and the conversation is rewound too', async () => {
    const { view, ws } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile, 'tandem.defaultMode': 'autoEdit' });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    const file = path.join(ws, 'conflict.txt');
    fs.writeFileSync(file, 'before the turn\n');
    await llm.enqueue({ steps: [call('call_conflict', 'write_file', { path: 'conflict.txt', content: 'by the agent\n' })] }, { steps: [say('Written.')] });
    view.send({ type: 'prompt', text: 'write conflict.txt' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'Written.'), 10_000, 'the turn');
    // The user changes the file after the turn: the rewind must not overwrite that without asking.
    fs.writeFileSync(file, 'changed by the user\n');
    const turnId = viewItems(view).find((i) => i.type === 'user').turnId;
    const sessionId = viewMeta(view).sessionId;
    fake.onMessage = (m) => (m.modal ? 'Force' : undefined);
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.restore === 'both'));
    view.send({ type: 'turnAction', action: 'undo', turnId });
    await waitFor(() => viewItems(view).some((i) => i.type === 'notice' && i.kind === 'rewound'), 10_000, 'the rewind');
    const dialog = fake.messages.find((m) => m.modal);
    assert.ok(dialog, 'the conflict is shown');
    assert.match(dialog.text, /left 1 file as it is/);
    assert.match(dialog.detail ?? '', /^conflict\.txt: \S/);
    assert.equal(fs.readFileSync(file, 'utf8'), 'before the turn\n', 'Force put it back');
    assert.deepEqual(sentOf('session/rewind').map((r) => r.params), [
      { sessionId, turnId, restore: 'files' },
      { sessionId, turnId, restore: 'files', force: true },
      { sessionId, turnId, restore: 'conversation' },
    ]);
    assert.deepEqual(viewItems(view).map((i) => i.kind), ['rewound']);
    assert.match(viewItems(view)[0].text, /1 file put back \(conflict\.txt\)/);
    assert.deepEqual(fake.messages.filter((m) => m.level === 'error'), []);
    const { checkpoints } = await [...clients][0].checkpoints(sessionId);
    assert.deepEqual(checkpoints, [], 'the turn left the conversation');
  });

  test('fork against the real server: Fork from here opens a new session with the turns before, and the next prompt goes there', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    await llm.enqueue({ steps: [say('one done')] }, { steps: [say('two done')] }, { steps: [say('forked answer')] });
    view.send({ type: 'prompt', text: 'turn one' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.text === 'one done'), 10_000, 'turn one');
    view.send({ type: 'prompt', text: 'turn two' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.text === 'two done'), 10_000, 'turn two');
    const source = viewMeta(view).sessionId;
    const two = viewItems(view).find((i) => i.text === 'turn two');
    view.send({ type: 'turnAction', action: 'fork', turnId: two.turnId });
    await waitFor(() => !!viewMeta(view).sessionId && viewMeta(view).sessionId !== source, 10_000, 'the forked session');
    const forked = viewMeta(view).sessionId;
    assert.deepEqual(sentOf('session/fork').map((r) => r.params), [{ sessionId: source, turnId: two.turnId }]);
    assert.deepEqual(sentOf('session/load').at(-1)!.params, { sessionId: forked });
    assert.deepEqual(viewItems(view).filter((i) => i.type !== 'notice').map((i) => i.text), ['turn one', 'one done']);
    const n = llm.requests.length;
    view.send({ type: 'prompt', text: 'after the fork' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.text === 'forked answer'), 10_000, 'the forked turn');
    assert.equal(sentOf('prompt').at(-1)!.params.sessionId, forked);
    const users = (llm.requests[n].body.messages as { role: string; content: unknown }[]).filter((m) => m.role === 'user').map((m) => JSON.stringify(m.content));
    assert.ok(users[0].includes('turn one') && users.at(-1)!.includes('after the fork') && !users.some((u) => u.includes('turn two')), JSON.stringify(users));
  });

  test('an edit applied without asking keeps its diff on the card, and Open diff shows it read-only', async () => {
    const { view, ws } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile, 'tandem.defaultMode': 'autoEdit' });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    fs.writeFileSync(path.join(ws, 'auto.txt'), 'one\n');
    await llm.enqueue({ steps: [call('call_auto', 'write_file', { path: 'auto.txt', content: 'one\ntwo\n' })] }, { steps: [say('done')] });
    view.send({ type: 'prompt', text: 'append two' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'done'), 10_000, 'the turn');
    assert.equal(sentOf('approve').length, 0, 'autoEdit asked nothing');
    assert.equal(fake.executed.filter((e) => e.id === 'vscode.diff').length, 0, 'no review opened');
    const card = viewItems(view).find((i) => i.type === 'tool');
    assert.equal(card.status, 'completed');
    assert.deepEqual(card.diff.map((d: any) => [d.path, d.oldText, d.newText]), [['auto.txt', 'one\n', 'one\ntwo\n']]);
    assert.match(card.diff[0].unified, /\+two/);
    view.send({ type: 'openAppliedDiff', toolCallId: card.toolCallId, path: 'auto.txt' });
    await waitFor(() => fake.executed.some((e) => e.id === 'vscode.diff'), 5000, 'the applied diff');
    const [left, right, title] = fake.executed.find((e) => e.id === 'vscode.diff')!.args as [Uri, Uri, string];
    assert.deepEqual([left.scheme, right.scheme], ['tandem-applied', 'tandem-applied'], 'both sides are read-only documents');
    const provider = fake.contentProviders.get('tandem-applied');
    assert.equal(provider.provideTextDocumentContent(left), 'one\n');
    assert.equal(provider.provideTextDocumentContent(right), 'one\ntwo\n');
    assert.match(title, /applied by tandem \(read-only\)/);
    // The diff survives a resume: session/load keeps it with the tool call.
    const sessionId = viewMeta(view).sessionId;
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.sessionId === sessionId));
    await fake.commands.get('tandem.sessions')!();
    const resumed = viewItems(view).find((i) => i.type === 'tool');
    assert.equal(resumed.diff?.[0]?.newText, 'one\ntwo\n', 'the resumed card still has the applied diff');
  });

  test('mode changes, steering while an approval waits, and token usage after a resume are all visible', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    await llm.enqueue({ steps: [say('first')], usage: { prompt_tokens: 100, completion_tokens: 7 } });
    view.send({ type: 'prompt', text: 'one' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'first'), 10_000, 'the first turn');
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.label === 'fullAuto'));
    await fake.commands.get('tandem.setMode')!();
    assert.equal(sentOf('setMode').at(-1)?.params.mode, 'fullAuto');
    const modeNotice = viewItems(view).filter((i) => i.type === 'notice' && i.kind === 'mode').at(-1);
    assert.match(modeNotice?.text ?? '', /Permission mode: fullAuto/, 'the chat says the mode changed');
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.label === 'ask'));
    await fake.commands.get('tandem.setMode')!();

    await llm.enqueue({ steps: [call('call_steer', 'shell', { command: 'true' })], usage: { prompt_tokens: 200, completion_tokens: 9 } }, { steps: [say('after')], usage: { prompt_tokens: 300, completion_tokens: 11 } });
    view.send({ type: 'prompt', text: 'run it' });
    await waitFor(() => fake.contexts.get('tandem.hasPendingApproval') === true, 10_000, 'the approval');
    view.send({ type: 'steer', text: 'use -v' });
    await waitFor(() => viewItems(view).some((i) => i.type === 'notice' && /Steering queued.*after you answer the pending approval/.test(i.text)), 5000, 'the queued-steer notice');
    const card = viewItems(view).find((i) => i.type === 'tool' && i.approval && !i.approval.resolved);
    view.send({ type: 'approve', requestId: card.approval.requestId, decision: 'once' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'after'), 10_000, 'the turn');
    const live = viewMeta(view).usage;
    assert.deepEqual([live.totalInput, live.totalOutput], [600, 27]);

    const sessionId = viewMeta(view).sessionId;
    await fake.commands.get('tandem.newSession')!();
    assert.equal(viewMeta(view).usage, undefined);
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.sessionId === sessionId));
    await fake.commands.get('tandem.sessions')!();
    const resumed = viewMeta(view).usage;
    assert.ok(resumed, 'the resumed session shows its token usage');
    assert.deepEqual([resumed.totalInput, resumed.totalOutput, resumed.inputTokens, resumed.outputTokens], [600, 27, 300, 11], 'session totals and the last answer');
  });

  test('the plan the model sets with update_plan shows in the chat, follows each update, is gone in a new session and comes back on resume', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    const first = [
      { content: 'Read the failing test', status: 'in_progress' },
      { content: 'Fix the parser', status: 'pending' },
      { content: 'Run the suite', status: 'pending' },
    ];
    const second = [
      { content: 'Read the failing test', status: 'completed' },
      { content: 'Fix the parser', status: 'in_progress' },
      { content: 'Run the suite', status: 'pending' },
    ];
    const hold = gate();
    await llm.enqueue(
      { steps: [call('call_plan1', 'update_plan', { entries: first })] },
      { steps: [{ until: hold.promise }, call('call_plan2', 'update_plan', { entries: second })] },
      { steps: [say('Planned.')] },
    );
    view.send({ type: 'prompt', text: 'fix the parser' });
    // update_plan never asks, in ask mode too: the first plan shows while the turn still runs.
    await waitFor(() => viewMeta(view).plan?.length === 3, 10_000, 'the first plan in the view');
    assert.deepEqual(viewMeta(view).plan, first);
    assert.equal(viewMeta(view).turn, 'running');
    hold.open();
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'Planned.'), 10_000, 'the turn');
    assert.deepEqual(viewMeta(view).plan, second, 'the second update_plan replaced the first');
    const cards = viewItems(view).filter((i) => i.type === 'tool' && i.name === 'update_plan');
    assert.deepEqual(cards.map((c) => [c.status, c.kind]), [['completed', 'think'], ['completed', 'think']]);

    const sessionId = viewMeta(view).sessionId;
    await fake.commands.get('tandem.newSession')!();
    assert.equal(viewMeta(view).plan, undefined, 'a new session has no plan');
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.sessionId === sessionId));
    await fake.commands.get('tandem.sessions')!();
    assert.equal(viewMeta(view).sessionId, sessionId);
    assert.deepEqual(viewMeta(view).plan, second, 'session/load brought the plan back');
    const resumedCards = viewItems(view).filter((i) => i.type === 'tool' && i.name === 'update_plan');
    assert.deepEqual(resumedCards.map((c) => [c.kind, c.title]), cards.map((c) => [c.kind, c.title]), 'the resumed cards read as the live ones');

    // The model clears its plan with an empty list.
    await llm.enqueue({ steps: [call('call_plan3', 'update_plan', { entries: [] })] }, { steps: [say('No plan now.')] });
    view.send({ type: 'prompt', text: 'drop the plan' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'No plan now.'), 10_000, 'the clearing turn');
    assert.equal(viewMeta(view).plan, undefined, 'an empty plan clears the checklist');
  });

  test('a resumed session waiting on an approval shows the call once, awaiting approval, not completed', async () => {
    const first = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    first.view.send({ type: 'ready' });
    await waitFor(() => idle(first.view), 10_000, 'ready');
    await llm.enqueue({ steps: [call('call_resume', 'write_file', { path: 'later.txt', content: 'x\n' })] }, { steps: [say('written after resume')] });
    first.view.send({ type: 'prompt', text: 'write later' });
    await waitFor(() => fake.contexts.get('tandem.hasPendingApproval') === true, 10_000, 'the approval');
    const sessionId = viewMeta(first.view).sessionId;
    // The server dies with the approval open; a new window resumes the session from the store.
    process.kill(spawnedPid(0), 'SIGKILL');
    await ext.deactivate();
    const second = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile }, { ws: first.ws });
    second.view.send({ type: 'ready' });
    await waitFor(() => idle(second.view), 10_000, 'ready');
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.sessionId === sessionId));
    await fake.commands.get('tandem.sessions')!();
    await waitFor(() => viewItems(second.view).some((i) => i.type === 'tool' && i.status === 'awaitingApproval'), 10_000, 'the approval asked again');
    const cards = viewItems(second.view).filter((i) => i.type === 'tool' && i.toolCallId === 'call_resume');
    assert.equal(cards.length, 1, `one card for the call: ${JSON.stringify(cards.map((c) => c.status))}`);
    assert.equal(cards[0].status, 'awaitingApproval');
    second.view.send({ type: 'approve', requestId: cards[0].approval.requestId, decision: 'once' });
    await waitFor(() => idle(second.view) && viewItems(second.view).some((i) => i.type === 'assistant' && i.text === 'written after resume'), 10_000, 'the resumed turn');
    assert.deepEqual(viewItems(second.view).filter((i) => i.type === 'tool').map((i) => i.status), ['completed']);
  });

  test('sessions are listed by title and date, newest first; an empty chat offers "Resume last session"; five windows store no session', async () => {
    const home = tempDir('tandem-ext-sessions-home-');
    const savedHome = process.env.TANDEM_HOME;
    process.env.TANDEM_HOME = home;
    try {
      const first = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
      first.view.send({ type: 'ready' });
      await waitFor(() => idle(first.view), 10_000, 'ready');
      assert.equal(viewMeta(first.view).lastSession, undefined, 'a folder with no session offers none');
      const ids: string[] = [];
      for (const title of ['older session prompt', 'newer session prompt']) {
        await llm.enqueue({ steps: [say(`answer to ${title}`)] });
        first.view.send({ type: 'prompt', text: title });
        await waitFor(() => idle(first.view) && viewItems(first.view).some((i) => i.type === 'assistant' && i.text === `answer to ${title}`), 10_000, title);
        ids.push(viewMeta(first.view).sessionId);
        await fake.commands.get('tandem.newSession')!();
      }
      // After New Session the draft offers the session just left, the newest.
      await waitFor(() => viewMeta(first.view).lastSession?.sessionId === ids[1], 5000, 'the offer in the new draft');
      let offered: any[] = [];
      fake.quickPickAnswers.push((items) => ((offered = items), undefined));
      await fake.commands.get('tandem.sessions')!();
      assert.deepEqual(offered.map((i) => i.label), ['newer session prompt', 'older session prompt'], 'by title, newest first');
      assert.ok(offered.every((i) => /\d/.test(i.description) && /mock/.test(i.description)), `each with its date and model: ${JSON.stringify(offered)}`);
      await ext.deactivate();

      // Five more windows on the folder, each showing the chat: no session is created, each offers the newest.
      let win!: Awaited<ReturnType<typeof activate>>;
      for (let w = 0; w < 5; w++) {
        win = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile }, { ws: first.ws });
        win.view.send({ type: 'ready' });
        await waitFor(() => idle(win.view) && viewMeta(win.view).lastSession !== undefined, 10_000, `window ${w}`);
        assert.equal(viewMeta(win.view).lastSession.sessionId, ids[1]);
        assert.equal(viewMeta(win.view).lastSession.title, 'newer session prompt');
        assert.deepEqual(sentOf('session/new'), [], `window ${w} created no session`);
        if (w < 4) await ext.deactivate();
      }
      // The last window resumes through the offer; the store still holds the two sessions only.
      await fake.commands.get('tandem.resumeLast')!();
      assert.equal(viewMeta(win.view).sessionId, ids[1]);
      assert.deepEqual(viewItems(win.view).map((i) => i.text), ['newer session prompt', 'answer to newer session prompt']);
      const client = [...clients].at(-1)!;
      const listed = await (client as unknown as { listSessions(cwd?: string): Promise<{ sessions: { sessionId: string }[] }> }).listSessions();
      assert.deepEqual(listed.sessions.map((x) => x.sessionId).sort(), [...ids].sort(), 'no empty session was stored by the five windows');
      assert.deepEqual(sentOf('session/load').map((r) => r.params.sessionId), [ids[1]]);
    } finally {
      process.env.TANDEM_HOME = savedHome;
    }
  });

  test('@ in the prompt box picks a file whose text goes to the model; @selection attaches the selection', async () => {
    const { view, ws } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    fs.mkdirSync(path.join(ws, 'docs'));
    fs.writeFileSync(path.join(ws, 'docs', 'spec.md'), 'The widget must be blue. MARKER-7f3a\n');
    fs.writeFileSync(path.join(ws, 'other.txt'), 'not mentioned MARKER-other\n');
    // The webview posts pickMention when `@` is typed; the quick pick lists the folder's files.
    let offered: string[] = [];
    fake.quickPickAnswers.push((items) => ((offered = items.map((i: any) => i.label)), items.find((i: any) => i.mention === path.join('docs', 'spec.md'))));
    view.send({ type: 'pickMention' });
    await waitFor(() => view.posted.some((m) => m.type === 'mention'), 5000, 'the picked mention');
    assert.ok(offered.includes(path.join('docs', 'spec.md')) && offered.includes('other.txt'), `the folder's files are offered: ${offered}`);
    assert.equal(view.posted.find((m) => m.type === 'mention').mention, path.join('docs', 'spec.md'));
    await llm.enqueue({ steps: [say('It must be blue.')] });
    const n = llm.requests.length;
    view.send({ type: 'prompt', text: 'What colour? See @docs/spec.md and @missing.md' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'It must be blue.'), 10_000, 'the turn');
    const sentText = JSON.stringify((llm.requests[n].body.messages as any[]).filter((m) => m.role === 'user').at(-1).content);
    assert.match(sentText, /MARKER-7f3a/, 'the mentioned file reached the model');
    assert.match(sentText, /File docs\/spec\.md/);
    assert.doesNotMatch(sentText, /MARKER-other/, 'only mentioned files go');
    assert.match(sentText, /@missing\.md/, 'a mention of no file stays as typed');
    assert.match(viewItems(view).find((i) => i.type === 'user').text, /with @docs\/spec\.md/);

    // @selection: the selection of the editor when it was picked.
    const vscodeFake = require('../fakeVscode');
    vscodeFake.window.activeTextEditor = {
      selection: { isEmpty: false, start: { line: 0, character: 0 }, end: { line: 0, character: 9 } },
      document: { uri: Uri.file(path.join(ws, 'other.txt')), languageId: 'plaintext', getText: () => 'SELECTED-BIT' },
    };
    try {
      fake.quickPickAnswers.push((items) => items.find((i: any) => i.mention === 'selection'));
      view.send({ type: 'pickMention' });
      await waitFor(() => view.posted.filter((m) => m.type === 'mention').length === 2, 5000, 'the selection mention');
    } finally {
      vscodeFake.window.activeTextEditor = undefined;
    }
    await llm.enqueue({ steps: [say('seen')] });
    const k = llm.requests.length;
    view.send({ type: 'prompt', text: 'explain @selection' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'seen'), 10_000, 'the selection turn');
    assert.match(JSON.stringify((llm.requests[k].body.messages as any[]).at(-1).content), /SELECTED-BIT/);
  });

  test('images go to the model as image parts; the model list shows windows and abilities; the gauge has the window', async () => {
    const cfg = path.join(tempDir('tandem-ext-cfg-vision-'), 'tandem.toml');
    fs.writeFileSync(cfg, `${llm.config()}[models.eyes]\nprovider = "local"\nname = "mock-vision"\ncontext_window = 200000\nvision = true\n`);
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfg });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    assert.deepEqual(viewMeta(view).modelInfos.map((m: any) => [m.id, m.contextWindow, m.vision]), [['eyes', 200000, true], ['mock', 128000, false]].sort());
    let details: string[] = [];
    fake.quickPickAnswers.push((items) => ((details = items.map((i: any) => `${i.label}: ${i.detail}`)), items.find((i: any) => i.label === 'eyes')));
    await fake.commands.get('tandem.switchModel')!();
    assert.equal(sentOf('models/list').length, 1, 'the picker asks models/list for the current catalog');
    assert.ok(details.includes('eyes: 200,000 tokens of context · images · parallel tools'), JSON.stringify(details));
    assert.ok(details.includes('mock: 128,000 tokens of context · no images · parallel tools'), JSON.stringify(details));
    await llm.enqueue({ steps: [say('a red dot')], usage: { prompt_tokens: 50_000, completion_tokens: 10 } });
    const n = llm.requests.length;
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
    view.send({ type: 'prompt', text: 'what is this?', images: [{ mimeType: 'image/png', data: png }] });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'a red dot'), 10_000, 'the turn');
    const content = (llm.requests[n].body.messages as any[]).filter((m) => m.role === 'user').at(-1).content;
    assert.ok(JSON.stringify(content).includes(`data:image/png;base64,${png}`), `the image reached the model: ${JSON.stringify(content).slice(0, 300)}`);
    assert.match(viewItems(view).find((i) => i.type === 'user').text, /with 1 image/);
    assert.equal(viewMeta(view).model, 'eyes');
    assert.deepEqual([viewMeta(view).usage.inputTokens, viewMeta(view).usage.outputTokens], [50_000, 10], 'the gauge reads 50,010 of eyes\' 200,000');
  });

  test('the network switch sends setNetworkAccess, shows the server notice and the state, also from a draft', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    await fake.commands.get('tandem.toggleNetwork')!();
    assert.equal(viewMeta(view).networkAccess, true, 'the draft remembers it');
    assert.deepEqual(sentOf('setNetworkAccess'), [], 'no session yet, no request');
    await llm.enqueue({ steps: [say('ok')] });
    view.send({ type: 'prompt', text: 'hi' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'ok'), 10_000, 'the turn');
    assert.deepEqual(sentOf('setNetworkAccess').map((r) => r.params.allow), [true], 'opened when the session was created');
    assert.equal(viewMeta(view).networkAccess, true);
    await fake.commands.get('tandem.toggleNetwork')!();
    assert.deepEqual(sentOf('setNetworkAccess').map((r) => r.params.allow), [true, false]);
    assert.equal(viewMeta(view).networkAccess, false);
    await waitFor(() => viewItems(view).some((i) => i.type === 'notice' && i.kind === 'network'), 5000, "the server's network notice");
  });

  test('a crashed server is restarted with a visible message, and deactivate stops it', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    await llm.enqueue({ steps: [say('before the crash')] });
    view.send({ type: 'prompt', text: 'make a session' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant'), 10_000, 'the first turn');
    const pidOf = (line: string | undefined) => Number(/pid (\d+)/.exec(line ?? '')?.[1]);
    const firstPid = pidOf(fake.output.find((l) => l.includes(' pid ')));
    const firstSession = viewMeta(view).sessionId;
    process.kill(firstPid, 'SIGKILL');
    await waitFor(() => fake.messages.some((m) => m.level === 'warning' && /crashed/.test(m.text)), 10_000, 'the crash message');
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'notice' && /restarted/.test(i.text)), 10_000, 'the restart');
    // With a store the session is resumed; without one a new session replaces it.
    if (viewMeta(view).sessionStore) assert.equal(viewMeta(view).sessionId, firstSession);
    else assert.equal(viewMeta(view).sessionId, undefined, 'without a store the next prompt starts a new session');
    assert.equal(sentOf('session/new').length, 1, 'the restart creates no session of its own');
    const secondPid = pidOf(fake.output.filter((l) => l.includes(' pid ')).at(-1));
    assert.notEqual(secondPid, firstPid);
    await ext.deactivate();
    await waitFor(() => !alive(secondPid), 5000, 'the server to exit');
  });

  test('a missing binary and a bad config give the cause and the next step', async () => {
    const { view } = await activate({ 'tandem.serverPath': '/no/such/tandem' });
    view.send({ type: 'ready' });
    await waitFor(() => fake.messages.some((m) => m.level === 'error'), 10_000, 'the error');
    const err = fake.messages.find((m) => m.level === 'error')!;
    assert.match(err.text, /not found.*tandem\.serverPath/s);
    assert.deepEqual(err.actions, ['Open Settings', 'Retry']);
    assert.equal(viewMeta(view).server, 'failed');
    assert.match(fake.statusBar.text, /server down/);
    await ext.deactivate();

    // Started by a command instead of the view: the failure is reported once, with its actions.
    await activate({ 'tandem.serverPath': '/no/such/tandem' }, { showView: false });
    await fake.commands.get('tandem.switchModel')!();
    assert.deepEqual(
      fake.messages.map((m) => [m.level, m.actions]),
      [['error', ['Open Settings', 'Retry']]],
    );
    assert.match(fake.messages[0].text, /not found/);
    await ext.deactivate();

    const bad = path.join(tempDir('tandem-ext-bad-'), 'bad.toml');
    fs.writeFileSync(bad, '[models.x]\nprovider = 3\n');
    const second = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': bad });
    second.view.send({ type: 'ready' });
    await waitFor(() => fake.messages.some((m) => m.level === 'error'), 10_000, 'the config error');
    const cfgErr = fake.messages.find((m) => m.level === 'error')!;
    assert.match(cfgErr.text, /bad\.toml/);
    assert.match(cfgErr.text, /tandem\.configFile/);
    assert.ok(cfgErr.actions.includes('Show Log'));
  });

  // ---- MCP servers (protocol.md "MCP servers"): a real stdio server of the Python SDK (tests/mcp/setup) ----

  test('an MCP server of the config: the status bar and header show it ready with its tools; its approval shows server, tool and pretty JSON; allowing runs it', async () => {
    const cfg = path.join(tempDir('tandem-ext-mcp-cfg-'), 'tandem.toml');
    fs.writeFileSync(cfg, `${llm.config()}\n[mcp_servers.t]\ncommand = ${JSON.stringify(mcpPython())}\nargs = [${JSON.stringify(MCP_STDIO_SERVER)}]\n`);
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfg });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    assert.equal(fake.statusBars.get('tandem.mcp')?.visible, false, 'no session yet: no MCP status');
    await llm.enqueue(
      { steps: [say('Echoing.'), call('call_mcp_echo', 'mcp__t__echo', { text: 'hello from mcp', opts: { n: 1 } })] },
      { steps: [say('Echoed.')] },
    );
    const n = llm.requests.length;
    view.send({ type: 'prompt', text: 'echo something' });
    const mcpBar = () => fake.statusBars.get('tandem.mcp')!;
    await waitFor(() => viewMeta(view)?.mcp?.[0]?.status === 'ready' && viewMeta(view).mcp[0].source === 'config' && mcpBar().visible && mcpBar().text === '$(plug) MCP 1/1', 30_000, `the server ready in the view and the status bar (${mcpBar()?.text})`);
    assert.deepEqual(
      viewMeta(view).mcp.map((s: any) => [s.name, s.source, s.status]),
      [['t', 'config', 'ready']],
    );
    assert.ok(viewMeta(view).mcp[0].tools.includes('mcp__t__echo'), `tools: ${viewMeta(view).mcp[0].tools}`);
    assert.equal(mcpBar().command, 'tandem.mcpServers');
    assert.match(mcpBar().tooltip, /t: ready, \d+ tools/);
    assert.equal(mcpBar().backgroundColor, undefined, 'nothing to warn about');
    assert.ok(sentOf('mcp/status').some((r) => r.params.sessionId === viewMeta(view).sessionId), 'the list is asked for when the session opens');

    await waitFor(() => viewItems(view).some((i) => i.type === 'tool' && i.status === 'awaitingApproval'), 30_000, 'the MCP approval');
    const tools = (llm.requests[n].body.tools ?? []).map((t: any) => t.function?.name);
    assert.ok(tools.includes('mcp__t__echo'), `the model was offered the MCP tool: ${tools}`);
    const card = viewItems(view).find((i) => i.type === 'tool');
    assert.deepEqual(card.mcp, { server: 't', tool: 'echo' }, 'the card knows its server');
    assert.deepEqual(card.approval.mcp, { server: 't', tool: 'echo' });
    assert.deepEqual(card.approval.options.map((o: any) => o.decision), ['once', 'alwaysTool', 'deny']);
    // What the approval shows, computed from what the view was sent, as the webview renders it.
    const shown = mcpApprovalText(card.approval.mcp, card.arguments);
    assert.equal(shown.heading, 'MCP server `t` wants to run `echo`');
    assert.equal(shown.arguments, '{\n  "text": "hello from mcp",\n  "opts": {\n    "n": 1\n  }\n}');
    assert.equal(fake.contexts.get('tandem.hasPendingApproval'), true);

    view.send({ type: 'approve', requestId: card.approval.requestId, decision: 'once' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'Echoed.'), 30_000, 'the turn after the MCP call');
    const done = viewItems(view).find((i) => i.type === 'tool');
    assert.equal(done.status, 'completed');
    assert.match(done.result, /hello from mcp/, 'the server ran the tool');
    const toolMessage = (llm.requests[n + 1].body.messages as any[]).find((m) => m.role === 'tool');
    assert.match(JSON.stringify(toolMessage?.content), /hello from mcp/, 'the model got the server\'s answer');

    // tandem.mcpServers: the server with status, source and tools; picking it shows everything about it.
    let rows: any[] = [];
    fake.quickPickAnswers.push((items) => ((rows = items), items.find((i: any) => i.server === 't' && i.action === 'show')));
    await fake.commands.get('tandem.mcpServers')!();
    assert.deepEqual(rows.map((r) => [r.server, r.action]), [['t', 'show']], 'no trust row for a config server');
    assert.match(rows[0].description, /^ready · from tandem's config · \d+ tools$/);
    assert.match(rows[0].detail, /\becho\b/);
    assert.match(fake.messages.at(-1)!.text, /MCP server "t" \(from tandem's config\): ready, \d+ tools\. Tools: .*echo/);
    assert.deepEqual(fake.messages.filter((m) => m.level === 'error'), []);
  });

  test("a server of the workspace's .mcp.json shows untrusted with a warning, is announced once, and Trust and start in MCP Servers makes it ready", async () => {
    const ws = tempDir('tandem-ext-mcp-ws-');
    fs.writeFileSync(path.join(ws, '.mcp.json'), JSON.stringify({ mcpServers: { w: { command: mcpPython(), args: [MCP_STDIO_SERVER] } } }));
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile }, { ws });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    await llm.enqueue({ steps: [say('hi')] });
    view.send({ type: 'prompt', text: 'hello' });
    const mcpBar = () => fake.statusBars.get('tandem.mcp')!;
    // The event may come before mcp/status answers; the source comes with the answer.
    await waitFor(() => viewMeta(view)?.mcp?.[0]?.status === 'untrusted' && viewMeta(view).mcp[0].source === 'workspace' && mcpBar().text === '$(warning) MCP 0/1', 30_000, `the untrusted server (${mcpBar()?.text})`);
    assert.equal((mcpBar().backgroundColor as { id?: string })?.id, 'statusBarItem.warningBackground');
    const announced = () => fake.messages.filter((m) => m.level === 'warning' && /\.mcp\.json defines the MCP server "w"/.test(m.text));
    await waitFor(() => announced().length === 1, 10_000, 'the notification');
    assert.deepEqual(announced()[0].actions, ['Trust and start', 'Show MCP Servers']);
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'hi'), 10_000, 'the turn');
    // Both the event and mcp/status reported it untrusted, and the pick below asks again: still one notification.

    const why = viewMeta(view).mcp[0].error;
    assert.match(why, /\.mcp\.json.*trust/, 'the server says why it waits');
    let rows: any[] = [];
    fake.quickPickAnswers.push((items) => ((rows = items), items.find((i: any) => i.server === 'w' && i.action === 'trust')));
    await fake.commands.get('tandem.mcpServers')!();
    assert.equal(announced().length, 1, 'announced once');
    assert.deepEqual(rows.map((r) => [r.server, r.action]), [['w', 'show'], ['w', 'trust']]);
    assert.match(rows[0].description, /^untrusted · from the workspace's \.mcp\.json · 0 tools$/);
    assert.equal(rows[0].detail, why, 'the whole error');
    assert.deepEqual(sentOf('mcp/trust').map((r) => r.params), [{ sessionId: viewMeta(view).sessionId, server: 'w' }]);
    await waitFor(() => viewMeta(view).mcp[0].status === 'ready' && mcpBar().text === '$(plug) MCP 1/1', 30_000, `the trusted server ready (${mcpBar().text})`);
    assert.ok(viewMeta(view).mcp[0].tools.includes('mcp__w__echo'));
    assert.equal(mcpBar().backgroundColor, undefined);
    assert.deepEqual(fake.messages.filter((m) => m.level === 'error'), []);
  });

  test('without an mcp/status answer the mcpStatus events alone drive the status bar and announce an untrusted server', async () => {
    const ws = tempDir('tandem-ext-mcp-ws3-');
    fs.writeFileSync(path.join(ws, '.mcp.json'), JSON.stringify({ mcpServers: { w: { command: mcpPython(), args: [MCP_STDIO_SERVER] } } }));
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile }, { ws });
    failMcpStatus = true;
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    await llm.enqueue({ steps: [say('hi')] });
    view.send({ type: 'prompt', text: 'hello' });
    const mcpBar = () => fake.statusBars.get('tandem.mcp')!;
    await waitFor(() => fake.messages.some((m) => /\.mcp\.json defines the MCP server "w"/.test(m.text)), 30_000, 'the notification from the event');
    await waitFor(() => mcpBar().text === '$(warning) MCP 0/1', 10_000, `the status bar from the event (${mcpBar().text})`);
    assert.ok(sentOf('mcp/status').length >= 1, 'mcp/status was asked (and failed)');
    assert.ok(fake.output.some((l) => /mcp\/status failed/.test(l)), 'its failure is logged');
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'hi'), 10_000, 'the turn');
    assert.deepEqual(fake.messages.filter((m) => m.level === 'error'), [], 'and not shown as an error');
  });

  test("the notification's Trust and start trusts a .mcp.json server; a later session of the folder starts it without asking", async () => {
    const ws = tempDir('tandem-ext-mcp-ws2-');
    fs.writeFileSync(path.join(ws, '.mcp.json'), JSON.stringify({ mcpServers: { w: { command: mcpPython(), args: [MCP_STDIO_SERVER] } } }));
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile }, { ws });
    fake.onMessage = (m) => (m.actions.includes('Trust and start') ? 'Trust and start' : undefined);
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    await llm.enqueue({ steps: [say('first')] }, { steps: [say('second')] });
    view.send({ type: 'prompt', text: 'hello' });
    await waitFor(() => sentOf('mcp/trust').length === 1, 30_000, 'the trust from the notification');
    assert.equal(sentOf('mcp/trust')[0].params.server, 'w');
    await waitFor(() => viewMeta(view)?.mcp?.[0]?.status === 'ready', 30_000, 'the trusted server ready');
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'first'), 10_000, 'the turn');
    const notices = fake.messages.filter((m) => /\.mcp\.json defines/.test(m.text)).length;
    assert.equal(notices, 1);

    await fake.commands.get('tandem.newSession')!();
    view.send({ type: 'prompt', text: 'again' });
    await waitFor(() => viewMeta(view)?.sessionId && viewMeta(view)?.mcp?.[0]?.status === 'ready', 30_000, 'the second session\'s server ready without a trust');
    assert.equal(sentOf('mcp/trust').length, 1, 'trusted once for the folder');
    assert.equal(fake.messages.filter((m) => /\.mcp\.json defines/.test(m.text)).length, notices, 'not announced again');
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'second'), 10_000, 'the second turn');
  });

  test('slash commands from the chat: the completion gets the project command, /status shows its block without a turn, a custom command runs a turn shown as typed, /fork opens the new session', async () => {
    const ws = tempDir('tandem-ext-slash-ws-');
    fs.mkdirSync(path.join(ws, '.tandem', 'commands'), { recursive: true });
    fs.writeFileSync(path.join(ws, '.tandem', 'commands', 'review.md'), '---\ndescription: Review a file\nargument-hint: FILE\n---\nReview $ARGUMENTS carefully.\n');
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile }, { ws });
    const lists = () => view.posted.filter((m) => m.type === 'commands');
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');

    // A draft: the built-ins, and a note; commands/list needs a session.
    view.send({ type: 'listCommands' });
    await waitFor(() => lists().length === 1, 10_000, 'the draft list');
    assert.ok(lists()[0].commands.some((c: any) => c.name === 'status'));
    assert.match(lists()[0].note, /first prompt/);
    assert.equal(sentOf('commands/list').length, 0);

    await llm.enqueue({ steps: [say('hello back')] });
    view.send({ type: 'prompt', text: 'hello' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'hello back'), 10_000, 'the first turn');
    const sessionId = viewMeta(view).sessionId;
    view.send({ type: 'listCommands' });
    await waitFor(() => lists().some((m) => m.commands.some((c: any) => c.name === 'review')), 10_000, 'the session list');
    const review = lists().at(-1).commands.find((c: any) => c.name === 'review');
    assert.deepEqual(review, { name: 'review', description: 'Review a file', argumentHint: 'FILE', source: 'project' });
    assert.deepEqual(sentOf('commands/list').map((r) => r.params), [{ sessionId }]);

    // /status: a block with the text as typed and the output; no turn, no model request.
    const n = llm.requests.length;
    view.send({ type: 'prompt', text: '/status' });
    await waitFor(() => viewItems(view).some((i) => i.type === 'command' && i.name === 'status'), 10_000, 'the /status block');
    const status = viewItems(view).find((i) => i.type === 'command');
    assert.equal(status.text, '/status');
    assert.match(status.output, /mock/);
    assert.equal(status.turnId, undefined);
    assert.equal(viewItems(view).filter((i) => i.type === 'user' && i.text === '/status').length, 0, 'no separate prompt line');
    assert.equal(llm.requests.length, n, 'the model was not asked');

    // A custom command: a normal turn, the prompt line as typed, the model gets the command's text.
    await llm.enqueue({ steps: [say('Reviewed.')] });
    view.send({ type: 'prompt', text: '/review README.md' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'Reviewed.'), 10_000, 'the command turn');
    const line = viewItems(view).find((i) => i.type === 'user' && i.text === '/review README.md');
    assert.ok(line?.turnId, 'the prompt line belongs to the turn');
    const user = JSON.stringify((llm.requests[n].body.messages as { role: string; content: unknown }[]).filter((m) => m.role === 'user').at(-1)?.content);
    assert.match(user, /Review README\.md carefully\./);

    // /fork: the block names the new session; its button opens it.
    view.send({ type: 'prompt', text: '/fork' });
    await waitFor(() => viewItems(view).some((i) => i.type === 'command' && i.name === 'fork'), 10_000, 'the /fork block');
    const fork = viewItems(view).find((i) => i.type === 'command' && i.name === 'fork');
    assert.match(fork.sessionId, /\S/);
    assert.notEqual(fork.sessionId, sessionId);
    view.send({ type: 'openSession', sessionId: fork.sessionId });
    await waitFor(() => viewMeta(view).sessionId === fork.sessionId, 10_000, 'the forked session open');
    assert.deepEqual(sentOf('session/load').at(-1)?.params, { sessionId: fork.sessionId });
    const texts = viewItems(view).filter((i) => i.type === 'user').map((i) => i.text);
    assert.deepEqual(texts, ['hello', '/review README.md'], 'the fork has the conversation, with the command as typed');
    assert.deepEqual(fake.messages.filter((m) => m.level === 'error'), []);
  });

  test('a workspace with untrusted hooks: the first prompt asks first (modal, the hook listed), Trust sends hooks/trust, the hook runs in the turn as a line; a later session is not asked again', async () => {
    const ws = tempDir('tandem-ext-hooks-ws-');
    const command = 'cat > /dev/null; exit 0';
    fs.mkdirSync(path.join(ws, '.tandem'), { recursive: true });
    fs.writeFileSync(path.join(ws, '.tandem', 'hooks.json'), JSON.stringify({ hooks: { PreToolUse: [{ matcher: 'Read', hooks: [{ type: 'command', command }] }] } }));
    fs.writeFileSync(path.join(ws, 'a.txt'), 'alpha\n');
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile }, { ws });
    const asked = () => fake.messages.filter((m) => m.modal && /defines hooks/.test(m.text));
    fake.onMessage = (m) => (m.modal && /defines hooks/.test(m.text) ? 'Trust' : undefined);
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    await llm.enqueue({ steps: [call('call_hook_r1', 'read_file', { path: 'a.txt' })] }, { steps: [say('read it')] });
    view.send({ type: 'prompt', text: 'read a.txt' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'read it'), 15_000, 'the turn');
    assert.equal(asked().length, 1);
    assert.equal(asked()[0].level, 'warning');
    assert.deepEqual(asked()[0].actions, ['Trust', 'Not now']);
    assert.match(asked()[0].text, /\.tandem\/hooks\.json/);
    assert.ok(asked()[0].detail?.includes(`PreToolUse (Read): ${command}`), asked()[0].detail);
    const sessionId = viewMeta(view).sessionId;
    assert.deepEqual(sentOf('hooks/trust').map((r) => r.params), [{ sessionId }]);
    const methods = sent.map((r) => r.method);
    assert.ok(methods.indexOf('hooks/trust') < methods.indexOf('prompt'), `trusted before the first prompt: ${methods.join(', ')}`);
    const hooks = viewItems(view).filter((i) => i.type === 'hook');
    assert.deepEqual(hooks.map((i) => [i.event, i.command, i.exitCode]), [['PreToolUse', command, 0]], 'the trusted hook ran in the turn');
    assert.ok(hooks[0].turnId);

    let rows: any[] = [];
    fake.quickPickAnswers.push((items) => ((rows = items), undefined));
    await fake.commands.get('tandem.showHooks')!();
    assert.deepEqual(rows.map((r) => [r.label, r.detail]), [['PreToolUse · Read', command]]);
    assert.match(rows[0].description, /project \(\.tandem\/hooks\.json\) · runs/);

    // Trust is the folder's: a new session runs the hooks without asking.
    await fake.commands.get('tandem.newSession')!();
    await llm.enqueue({ steps: [call('call_hook_r2', 'read_file', { path: 'a.txt' })] }, { steps: [say('second')] });
    view.send({ type: 'prompt', text: 'again' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'second'), 10_000, 'the second session');
    const second = viewMeta(view).sessionId;
    assert.notEqual(second, sessionId);
    assert.deepEqual(sentOf('hooks/list').at(-1)?.params, { sessionId: second }, 'the new session was checked too');
    assert.equal(asked().length, 1, 'not asked again');
    assert.deepEqual(viewItems(view).filter((i) => i.type === 'hook').map((i) => [i.event, i.exitCode]), [['PreToolUse', 0]], 'the hook ran in the new session');
    assert.equal(sentOf('hooks/trust').length, 1);
    assert.deepEqual(fake.messages.filter((m) => m.level === 'error'), []);
  });
});

/** The Python of the MCP test venv (tests/mcp/setup), where the SDK's stdio server runs. */
function mcpPython(): string {
  const venv = process.env.TANDEM_MCP_VENV || path.join(os.homedir(), '.cache', 'tandem', 'mcp-venv');
  const python = path.join(venv, 'bin', 'python');
  if (!fs.existsSync(python)) throw new Error(`${python} is missing: run tests/mcp/setup in the repository root (or set TANDEM_MCP_VENV)`);
  return python;
}

/** The repository's stdio MCP test server (tools echo, env, slow, crash). */
const MCP_STDIO_SERVER = path.resolve(EXT_DIR, '..', '..', 'tests', 'mcp', 'stdio_server.py');

/** The pid of the n-th server the extension spawned, from its log line. */
/** The HTTP status a WebSocket opening handshake to `url` gets: 101 when the server accepts it. */
function wsHandshake(url: string): Promise<number> {
  const u = new URL(url.replace(/^ws:/, 'http:'));
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: u.hostname,
      port: u.port,
      path: `${u.pathname}${u.search}`,
      headers: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': Buffer.from('vsc-attach-nonce').toString('base64') },
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.setTimeout(5000, () => req.destroy(new Error(`no answer to the handshake at ${url}`)));
    req.end();
  });
}

function spawnedPid(n: number): number {
  const line = fake.output.filter((l) => / pid \d+ ready/.test(l))[n];
  return Number(/ pid (\d+)/.exec(line ?? '')?.[1]);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
