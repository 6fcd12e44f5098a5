// Unit tests of hooks in the extension: the compact line of a `hookRan` event (its text and outcome style), the
// chat items it makes, and the trust prompt in the controller (fake vscode host, scripted client): asked after
// session/new (before the first prompt goes) and session/load when the workspace's hook files are not trusted,
// listing event, matcher and command, with Trust (hooks/trust) and Not now; not asked twice for the same hooks;
// the palette's Trust Project Hooks and Show Hooks.
import '../vscodeHook';
import { afterEach, test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fake } from '../fakeVscode';
import { FakeClient } from '../fakeClient';
import { gate, waitFor } from '../mockLlm';
import { Controller } from '../../src/controller';
import { registerCommands } from '../../src/commands';
import { ChatState } from '../../src/chatState';
import { formatDuration, hookLine, hookPickItems, needsTrust, trustText } from '../../src/hooks';
import type { HooksListResult, SessionEvent } from '../../src/protocol';

const UNTRUSTED: HooksListResult = {
  hooks: [
    { event: 'PreToolUse', matcher: 'Bash', command: '.tandem/hooks/check.sh', timeout: 60, source: 'project' },
    { event: 'Stop', command: 'notify-send done', source: 'project' },
    { event: 'PostToolUse', command: '~/bin/log-tool', source: 'user' },
  ],
  projectFiles: ['.tandem/hooks.json'],
  trusted: false,
};

test('a hook line: event, command, exit code and time; blocked and unfinished runs say so and are styled apart', () => {
  assert.deepEqual(hookLine({ event: 'PreToolUse', command: 'check.sh', exitCode: 0, durationMs: 3 }), {
    event: 'PreToolUse',
    command: 'check.sh',
    result: 'exit 0, 3 ms',
    outcome: 'ok',
  });
  const blocked = hookLine({ event: 'PreToolUse', command: 'check.sh', exitCode: 2, durationMs: 4, blocked: true });
  assert.deepEqual([blocked.result, blocked.outcome], ['blocked, exit 2, 4 ms', 'blocked']);
  const killed = hookLine({ event: 'Stop', command: 'sleep 99', exitCode: null, durationMs: 60_000 });
  assert.deepEqual([killed.result, killed.outcome], ['no exit code (did not run to the end), 60 s', 'failed']);
  assert.equal(hookLine({ event: 'Stop', command: 'false', exitCode: 1, durationMs: 1500 }).outcome, 'failed');
  assert.deepEqual([formatDuration(0), formatDuration(999), formatDuration(1234), formatDuration(12_345)], ['0 ms', '999 ms', '1.2 s', '12 s']);
});

test('hookRan events become hook items of their turn, after the text streamed before them', () => {
  const s = new ChatState();
  s.reset({ sessionId: 's', model: 'm', mode: 'ask' });
  let seq = 0;
  const feed = (e: Record<string, unknown>) => s.apply({ sessionId: 's', seq: ++seq, turnId: 't1', ...e } as SessionEvent);
  feed({ type: 'turnStarted', model: 'm' });
  feed({ type: 'assistantDelta', text: 'Let me run it.' });
  const ch = feed({ type: 'hookRan', event: 'PreToolUse', command: '.tandem/hooks/check.sh', exitCode: 2, durationMs: 4, blocked: true });
  feed({ type: 'assistantDelta', text: 'Blocked, so not.' });
  feed({ type: 'hookRan', event: 'Stop', command: 'sleep 99', exitCode: null, durationMs: 60_000 });
  assert.deepEqual(
    s.items.map((i) => [i.type, i.turnId]),
    [
      ['assistant', 't1'],
      ['hook', 't1'],
      ['assistant', 't1'],
      ['hook', 't1'],
    ],
  );
  assert.deepEqual(ch.items, [0, 1], 'the streamed text was closed and the hook line added');
  assert.deepEqual(s.items[1], { type: 'hook', id: s.items[1].id, turnId: 't1', event: 'PreToolUse', command: '.tandem/hooks/check.sh', exitCode: 2, durationMs: 4, blocked: true });
  assert.equal((s.items[3] as { exitCode: number | null }).exitCode, null);
});

test('the trust text lists files and each project hook with event, matcher and command, and says they run outside the sandbox', () => {
  assert.equal(needsTrust(UNTRUSTED), true);
  assert.equal(needsTrust({ ...UNTRUSTED, trusted: true }), false);
  assert.equal(needsTrust({ hooks: [], projectFiles: [], trusted: false }), false, 'no project files: nothing to trust');
  assert.equal(needsTrust(undefined), false);
  const { message, detail } = trustText(UNTRUSTED);
  assert.match(message, /\.tandem\/hooks\.json/);
  assert.match(message, /outside tandem's sandbox/);
  assert.match(detail, /^• PreToolUse \(Bash\): \.tandem\/hooks\/check\.sh\n• Stop: notify-send done\n\n/);
  assert.doesNotMatch(detail, /log-tool/, "the user's own hooks need no trust");
  assert.match(detail, /not a script a hook runs/, 'what the trust does not cover');
  const rows = hookPickItems(UNTRUSTED);
  assert.deepEqual(
    rows.map((r) => [r.label, r.description, r.detail]),
    [
      ['PreToolUse · Bash', 'project (.tandem/hooks.json) · waits for trust (does not run) · timeout 60 s', '.tandem/hooks/check.sh'],
      ['Stop', 'project (.tandem/hooks.json) · waits for trust (does not run)', 'notify-send done'],
      ['PostToolUse', 'user · runs', '~/bin/log-tool'],
    ],
  );
  assert.match(hookPickItems({ ...UNTRUSTED, trusted: true })[0].description, /· runs/);
});

let current: Controller | undefined;
afterEach(async () => {
  await current?.dispose();
  current = undefined;
});

async function setup(hooks: () => HooksListResult = () => UNTRUSTED) {
  fake.reset();
  fake.workspaceFolder = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-hooks-'));
  const client = new FakeClient();
  client.handlers.set('hooks/list', () => hooks());
  client.handlers.set('hooks/trust', () => ({}));
  client.handlers.set('prompt', () => ({ turnId: 't1' }));
  const context = { subscriptions: [] as { dispose(): void }[], extension: { packageJSON: { version: '0.0.0-test' } } };
  const output = { appendLine() {}, show() {}, dispose() {} };
  const c = new Controller(context as never, output as never, { makeClient: () => client as never });
  current = c;
  registerCommands(context as never, c, async () => {});
  await c.start();
  const asked = () => fake.messages.filter((m) => m.modal && /defines hooks/.test(m.text));
  return { c, client, asked };
}

test('the first prompt of a workspace with untrusted hooks asks first (modal, the hooks listed); Trust sends hooks/trust before the prompt', async () => {
  const { c, client, asked } = await setup();
  // The user takes their time: the prompt waits for the answer.
  const answer = gate();
  fake.onMessage = async (m) => (m.modal ? (await answer.promise, 'Trust') : undefined);
  const sending = c.prompt('hello');
  await waitFor(() => asked().length === 1, 5000, 'the trust prompt');
  assert.equal(client.sent('prompt').length, 0, 'the first prompt waits for the answer');
  answer.open();
  await sending;
  const sessionId = c.state.meta.sessionId!;
  assert.equal(asked().length, 1);
  const m = asked()[0];
  assert.equal(m.level, 'warning');
  assert.deepEqual(m.actions, ['Trust', 'Not now']);
  assert.match(m.detail ?? '', /PreToolUse \(Bash\): \.tandem\/hooks\/check\.sh/);
  const methods = client.requests.map((r) => r.method);
  assert.deepEqual(client.sent('hooks/trust'), [{ sessionId }]);
  assert.ok(methods.indexOf('hooks/trust') < methods.indexOf('prompt'), `trusted before the prompt went: ${methods.join(', ')}`);
  assert.ok(c.state.items.some((i) => i.type === 'notice' && /Trusted the project hooks/.test(i.text)));
});

test('Not now trusts nothing and says how to trust later; the same hooks are not asked about again in this window, changed ones are', async () => {
  let hooks = UNTRUSTED;
  const { c, client, asked } = await setup(() => hooks);
  fake.onMessage = (m) => (m.modal ? 'Not now' : undefined);
  await c.prompt('hello');
  assert.equal(asked().length, 1);
  assert.equal(client.sent('hooks/trust').length, 0);
  assert.equal(client.sent('prompt').length, 1, 'the prompt went all the same');
  assert.ok(c.state.items.some((i) => i.type === 'notice' && i.kind === 'warning' && /not trusted.*Trust Project Hooks/.test(i.text)));

  await c.newSession();
  await c.prompt('again');
  assert.equal(client.sent('hooks/list').length, 2, 'listed for each session');
  assert.equal(asked().length, 1, 'not asked again for the same hooks');

  hooks = { ...UNTRUSTED, hooks: [...UNTRUSTED.hooks, { event: 'PreToolUse', command: 'curl evil.example', source: 'project' }] };
  await c.newSession();
  await c.prompt('third');
  assert.equal(asked().length, 2, 'a changed hook file is asked about again');
  assert.match(asked()[1].detail ?? '', /curl evil\.example/);
});

test('a resumed session is checked too; trusted hooks or none ask nothing', async () => {
  let hooks = UNTRUSTED;
  const { c, client, asked } = await setup(() => hooks);
  await c.loadSession('s_old');
  await new Promise<void>((resolve) => setImmediate(resolve));
  assert.deepEqual(client.sent('hooks/list'), [{ sessionId: 's_old' }]);
  assert.equal(asked().length, 1);

  hooks = { ...UNTRUSTED, trusted: true };
  fake.messages.length = 0;
  await c.newSession();
  await c.prompt('hello');
  hooks = { hooks: [], projectFiles: [], trusted: false };
  await c.newSession();
  await c.prompt('again');
  assert.deepEqual(asked(), []);
});

test('Trust Project Hooks asks again after Not now and trusts; Show Hooks lists every hook and offers the trust', async () => {
  let hooks = UNTRUSTED;
  const { c, client, asked } = await setup(() => hooks);
  fake.onMessage = (m) => (m.modal ? 'Not now' : undefined);
  await fake.commands.get('tandem.trustHooks')!();
  assert.match(fake.messages.at(-1)!.text, /first prompt starts one/, 'no session yet');
  await c.prompt('hello');
  assert.equal(asked().length, 1);

  fake.onMessage = (m) => (m.modal ? 'Trust' : undefined);
  await fake.commands.get('tandem.trustHooks')!();
  assert.equal(asked().length, 2);
  assert.deepEqual(client.sent('hooks/trust'), [{ sessionId: c.state.meta.sessionId }]);

  let rows: any[] = [];
  fake.quickPickAnswers.push((items) => ((rows = items), items[0]));
  await fake.commands.get('tandem.showHooks')!();
  assert.deepEqual(rows.map((r) => r.label), ['$(shield) Trust the project hooks…', 'PreToolUse · Bash', 'Stop', 'PostToolUse']);
  assert.match(fake.quickPicks.at(-1)!.options.title, /wait for trust/);
  assert.equal(client.sent('hooks/trust').length, 2, 'the first row asks, and Trust trusts');

  hooks = { ...UNTRUSTED, trusted: true };
  fake.quickPickAnswers.push((items) => ((rows = items), items[0]));
  await fake.commands.get('tandem.showHooks')!();
  assert.equal(rows[0].label, 'PreToolUse · Bash', 'trusted: no trust row');
  assert.match(fake.messages.at(-1)!.text, /PreToolUse \(Bash\): \.tandem\/hooks\/check\.sh/);
  await fake.commands.get('tandem.trustHooks')!();
  assert.match(fake.messages.at(-1)!.text, /trusted already/);
  hooks = { hooks: [], projectFiles: [], trusted: true };
  await fake.commands.get('tandem.trustHooks')!();
  assert.match(fake.messages.at(-1)!.text, /no project hooks/);
  await fake.commands.get('tandem.showHooks')!();
  assert.match(fake.messages.at(-1)!.text, /no hooks/);
});
