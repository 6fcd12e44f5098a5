// Unit tests of sharing the server with other clients: the settings tandem.attach.listen / allowOrigins as `serve`
// arguments, the snippet "tandem: Share Session…" copies (URL with the token, the token, the session id), and the
// command itself in the fake vscode host with a scripted client: what it offers with and without a listening
// server, what lands on the clipboard, and the status bar's hint that the server is shareable.
import '../vscodeHook';
import { afterEach, test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fake } from '../fakeVscode';
import { FakeClient } from '../fakeClient';
import { Controller } from '../../src/controller';
import { registerCommands } from '../../src/commands';
import { serveArgs, type LaunchOptions } from '../../src/client';
import { attachServeArgs, attachSettings, attachUrlWithToken, parseToken, sharePickItems, shareSnippet } from '../../src/attach';

const TOKEN = 'a'.repeat(32) + '0123456789abcdef0123456789abcdef';

test('sharing is off unless tandem.attach.listen is set: no --listen, and origins alone are not passed', () => {
  assert.equal(attachSettings('', ['http://localhost:5173']), undefined);
  assert.equal(attachSettings('   ', []), undefined);
  assert.equal(attachSettings(undefined, undefined), undefined);
  assert.equal(attachSettings(42, []), undefined, 'a hand-edited non-string is off, not "42"');
  assert.deepEqual(serveArgs({ configFile: '/c/tandem.toml', attach: attachSettings('', ['http://localhost:5173']) }), ['serve', '--config', '/c/tandem.toml']);
  assert.deepEqual(serveArgs({}), ['serve']);
});

test('tandem.attach.listen adds --listen stdio (the extension still talks on stdio) and the address; each origin is an --allow-origin', () => {
  assert.deepEqual(serveArgs({ attach: attachSettings(' ws://127.0.0.1:0 ', []) }), ['serve', '--listen', 'stdio', '--listen', 'ws://127.0.0.1:0']);
  assert.deepEqual(
    serveArgs({ configFile: '/c/t.toml', attach: attachSettings('ws://127.0.0.1:7777', ['http://localhost:5173', '', 7, ' https://example.test '] as unknown[]) }),
    ['serve', '--config', '/c/t.toml', '--listen', 'stdio', '--listen', 'ws://127.0.0.1:7777', '--allow-origin', 'http://localhost:5173', '--allow-origin', 'https://example.test'],
    'blank and non-string origins are dropped, the others trimmed',
  );
  assert.deepEqual(attachServeArgs(attachSettings('ws://127.0.0.1:1', 'http://x')), ['--listen', 'stdio', '--listen', 'ws://127.0.0.1:1'], 'origins that are not a list are ignored');
});

test('the share snippet is JSON with the URL carrying ?token=, the token and the session id (null before the first prompt)', () => {
  const attach = { url: 'ws://127.0.0.1:41457', tokenFile: '/h/attach-token' };
  assert.deepEqual(JSON.parse(shareSnippet(attach, TOKEN, 's_1')), { url: `ws://127.0.0.1:41457/?token=${TOKEN}`, token: TOKEN, sessionId: 's_1' });
  assert.deepEqual(JSON.parse(shareSnippet(attach, TOKEN, undefined)), { url: `ws://127.0.0.1:41457/?token=${TOKEN}`, token: TOKEN, sessionId: null });
  assert.equal(attachUrlWithToken('ws://127.0.0.1:7777/', 'a b&c'), 'ws://127.0.0.1:7777/?token=a%20b%26c', 'one slash, and the token is escaped');
  assert.equal(parseToken(`${TOKEN}\n`, '/h/attach-token'), TOKEN);
  assert.throws(() => parseToken('\n', '/h/attach-token'), /\/h\/attach-token is empty/);
  assert.deepEqual(sharePickItems(attach, undefined).map((i) => i.action), ['copySnippet', 'showTokenFile'], 'no session id to copy without a session');
  assert.deepEqual(sharePickItems(attach, 's_1').map((i) => i.action), ['copySnippet', 'copySessionId', 'showTokenFile']);
});

// ---- the command in the fake host --------------------------------------------------------------------------

let current: Controller | undefined;
afterEach(async () => {
  await current?.dispose();
  current = undefined;
});

/** A controller whose server reports `attach` in initialize (undefined: a server that does not listen). */
async function setup(settings: Record<string, unknown>, attach?: { url: string; tokenFile: string }) {
  fake.reset();
  fake.workspaceFolder = fs.mkdtempSync(path.join(os.tmpdir(), 'vsc-attach-ws-'));
  for (const [k, v] of Object.entries(settings)) fake.settings.set(k, v);
  const launches: LaunchOptions[] = [];
  let client: FakeClient | undefined;
  const makeClient = (o: LaunchOptions) => {
    launches.push(o);
    const c = new FakeClient(o);
    const start = c.start.bind(c);
    c.start = async () => {
      const init = await start();
      return (c.initializeResult = attach ? { ...init, capabilities: { ...init.capabilities, attach } } : init);
    };
    return (client = c);
  };
  const context = { subscriptions: [] as { dispose(): void }[], extension: { packageJSON: { version: '0.0.0-test' } } };
  const c = new Controller(context as never, { appendLine: (l: string) => fake.output.push(l), show() {}, dispose() {} } as never, { makeClient: makeClient as never });
  current = c;
  registerCommands(context as never, c, async () => {});
  return { c, launches, client: () => client!, share: () => fake.commands.get('tandem.shareSession')!() };
}

test('the settings reach the server process: its arguments carry --listen and --allow-origin', async () => {
  const { c, launches } = await setup({ 'tandem.attach.listen': 'ws://127.0.0.1:0', 'tandem.attach.allowOrigins': ['http://localhost:5173'] });
  await c.start();
  assert.deepEqual(serveArgs(launches[0]), ['serve', '--listen', 'stdio', '--listen', 'ws://127.0.0.1:0', '--allow-origin', 'http://localhost:5173']);
});

test('Share Session on a server that does not listen says which setting turns it on, and its button opens that setting', async () => {
  const { launches, share } = await setup({});
  fake.onMessage = () => 'Open Setting';
  await share();
  assert.equal(launches.length, 1, 'the command starts the server to ask it');
  assert.equal(fake.quickPicks.length, 0, 'nothing to pick');
  const m = fake.messages.at(-1)!;
  assert.equal(m.level, 'info');
  assert.match(m.text, /Set "tandem\.attach\.listen" \(for example ws:\/\/127\.0\.0\.1:0\) and restart the server/);
  assert.deepEqual(m.actions, ['Open Setting']);
  assert.deepEqual(fake.executed.filter((e) => e.id === 'workbench.action.openSettings').map((e) => e.args), [['tandem.attach.listen']]);
  assert.equal(fake.clipboard, '');
});

test('Share Session on a listening server warns about the token and copies the snippet with the token read from its file', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vsc-attach-home-'));
  const tokenFile = path.join(dir, 'attach-token');
  fs.writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
  const attach = { url: 'ws://127.0.0.1:41457', tokenFile };
  const { c, share, client } = await setup({ 'tandem.attach.listen': 'ws://127.0.0.1:0' }, attach);
  await c.start();
  assert.match(fake.statusBar.tooltip, /Shareable: other clients can attach at ws:\/\/127\.0\.0\.1:41457/);
  assert.match(fake.statusBar.text, /\$\(broadcast\)/);
  assert.ok(fake.output.some((l) => l.includes('other clients can attach at ws://127.0.0.1:41457')), 'the log says where');

  // Before the first prompt there is no session: the snippet says so with null.
  fake.quickPickAnswers.push((items) => items.find((i: any) => i.action === 'copySnippet'));
  await share();
  const pick = fake.quickPicks.at(-1)!;
  assert.match(`${pick.options.title} ${pick.options.placeHolder}`, /lets anyone who has it drive every session/);
  assert.deepEqual(JSON.parse(fake.clipboard), { url: `ws://127.0.0.1:41457/?token=${TOKEN}`, token: TOKEN, sessionId: null });

  client().handlers.set('prompt', () => ({ turnId: 't_1' }));
  await c.prompt('hello');
  const sessionId = c.state.meta.sessionId!;
  fake.quickPickAnswers.push((items) => items.find((i: any) => i.action === 'copySnippet'));
  await share();
  assert.deepEqual(JSON.parse(fake.clipboard), { url: `ws://127.0.0.1:41457/?token=${TOKEN}`, token: TOKEN, sessionId });

  fake.quickPickAnswers.push((items) => items.find((i: any) => i.action === 'copySessionId'));
  await share();
  assert.equal(fake.clipboard, sessionId);

  // The token is read at each use (a restart writes a new one); a missing file is an error naming it, not a copy.
  fs.rmSync(tokenFile);
  fake.clipboard = '';
  fake.quickPickAnswers.push((items) => items.find((i: any) => i.action === 'copySnippet'));
  await share();
  assert.equal(fake.clipboard, '');
  assert.match(fake.messages.at(-1)!.text, new RegExp(`Could not read the attach token from ${tokenFile.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`));
});

test('a server that does not listen reports no share hint in the status bar', async () => {
  const { c } = await setup({});
  await c.start();
  assert.doesNotMatch(fake.statusBar.tooltip, /Shareable/);
  assert.doesNotMatch(fake.statusBar.text, /broadcast/);
});
