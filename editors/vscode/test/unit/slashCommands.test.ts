// Unit tests of slash commands in the controller (fake vscode host, scripted client): the list the completion
// gets (built-ins in a draft, commands/list per session, cached and fetched again at each fresh `/`), prompts that
// run a command (the text as typed, no attachments, a command while a turn runs is no steer), the `prompt` answers
// with and without a turn (the command's block with its Markdown output, `/fork`'s session opened from it), a
// refusal shown in the block, `/mode NAME` in the header, and `/undo`'s rewind keeping the block.
import '../vscodeHook';
import { afterEach, test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fake } from '../fakeVscode';
import { FakeClient, RpcError } from '../fakeClient';
import { Controller } from '../../src/controller';
import { registerCommands } from '../../src/commands';
import { ChatState } from '../../src/chatState';
import { renderMarkdown } from '../../src/markdown';
import type { HostMessage } from '../../src/viewBridge';
import type { SlashCommand } from '../../src/protocol';

const LIST: SlashCommand[] = [
  { name: 'fork', description: 'Copy this conversation into a new session', source: 'builtin' },
  { name: 'mode', description: 'Switch the approval mode', argumentHint: 'NAME', source: 'builtin' },
  { name: 'model', description: 'Switch the model', argumentHint: 'NAME', source: 'builtin' },
  { name: 'review', description: 'Review a file', argumentHint: 'FILE', source: 'project' },
  { name: 'status', description: 'Show the status', source: 'builtin' },
  { name: 'undo', description: 'Undo the last turn', source: 'builtin' },
];

let current: Controller | undefined;
afterEach(async () => {
  await current?.dispose();
  current = undefined;
});

async function setup() {
  fake.reset();
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-slash-'));
  fs.writeFileSync(path.join(ws, 'README.md'), '# readme text\n');
  fake.workspaceFolder = ws;
  const client = new FakeClient();
  client.handlers.set('commands/list', () => ({ commands: LIST }));
  const context = { subscriptions: [] as { dispose(): void }[], extension: { packageJSON: { version: '0.0.0-test' } } };
  const output = { appendLine() {}, show() {}, dispose() {} };
  const c = new Controller(context as never, output as never, { makeClient: () => client as never });
  current = c;
  registerCommands(context as never, c, async () => {});
  const posted: HostMessage[] = [];
  c.bridge.attach((m) => posted.push(structuredClone(m)));
  c.bridge.onReady();
  await c.start();
  /** A session with one finished turn (prompt `first`, turn t1). */
  const withSession = async () => {
    client.handlers.set('prompt', () => ({ turnId: 't1' }));
    await c.prompt('first');
    const sessionId = c.state.meta.sessionId!;
    client.emit({ sessionId, turnId: 't1', type: 'turnStarted', model: 'mock' });
    client.emit({ sessionId, turnId: 't1', type: 'assistantMessage', text: 'first answer' });
    client.emit({ sessionId, turnId: 't1', type: 'turnEnded', reason: 'completed' });
    client.requests.length = 0;
    return sessionId;
  };
  const commandsPosted = () => posted.filter((m): m is Extract<HostMessage, { type: 'commands' }> => m.type === 'commands');
  return { c, client, ws, posted, withSession, commandsPosted };
}

test('a draft gets the built-ins with a note and asks the server nothing; a session gets commands/list, cached and fetched again each time', async () => {
  const { c, client, withSession, commandsPosted } = await setup();
  await c.listCommands();
  assert.equal(client.sent('commands/list').length, 0, 'commands/list needs a session: a draft asks nothing');
  const draft = commandsPosted().at(-1)!;
  assert.deepEqual(draft.commands.map((x) => x.name), ['compact', 'diff', 'fork', 'init', 'mode', 'model', 'status', 'undo']);
  assert.match(draft.note ?? '', /first prompt/);

  const sessionId = await withSession();
  const before = commandsPosted().length;
  await c.listCommands();
  assert.deepEqual(client.sent('commands/list'), [{ sessionId }]);
  assert.deepEqual(commandsPosted().slice(before).map((m) => m.commands.map((x) => x.name)), [LIST.map((x) => x.name)], 'nothing cached yet: one post, the fetched list');

  // A new command file: the next fresh `/` shows the cached list at once, then the one read again.
  const more = [...LIST, { name: 'standup', source: 'user' as const }];
  client.handlers.set('commands/list', () => ({ commands: more }));
  const mid = commandsPosted().length;
  await c.listCommands();
  assert.equal(client.sent('commands/list').length, 2, 'read again at each fresh slash');
  assert.deepEqual(commandsPosted().slice(mid).map((m) => m.commands.length), [LIST.length, more.length], 'the cached list first, then the fresh one');

  // A failure keeps what was cached and says why.
  client.handlers.set('commands/list', () => {
    throw new RpcError('Method not found', { kind: 'methodNotFound' }, -32601);
  });
  await c.listCommands();
  const failed = commandsPosted().at(-1)!;
  assert.equal(failed.commands.length, more.length);
  assert.match(failed.error ?? '', /no slash commands: update tandem/);
});

test('/status: sent as typed, answered without a turn; its block shows the text as typed and the Markdown output', async () => {
  const { c, client, posted, withSession } = await setup();
  const sessionId = await withSession();
  client.handlers.set('prompt', () => ({ command: { name: 'status', output: '**Model:** mock\n\n| mode | ask |\n|---|---|' } }));
  await c.prompt('/status');
  assert.deepEqual(client.sent('prompt'), [{ sessionId, content: '/status' }]);
  const last = c.state.items.at(-1)!;
  assert.equal(last.type, 'command');
  assert.ok(last.type === 'command');
  assert.deepEqual({ text: last.text, name: last.name, output: last.output, turnId: last.turnId }, { text: '/status', name: 'status', output: '**Model:** mock\n\n| mode | ask |\n|---|---|', turnId: undefined });
  assert.equal(c.state.items.filter((i) => i.type === 'user' && i.text === '/status').length, 0, 'the prompt line became the block');
  // The webview got the block in place of the prompt line (same index).
  const update = posted.filter((m) => m.type === 'items').at(-1);
  assert.ok(update?.type === 'items' && update.updates.some((u) => u.item.type === 'command' && u.item.id === last.id));
  // Its output renders as Markdown; raw HTML stays text.
  const html = renderMarkdown(last.output!);
  assert.match(html, /<strong>Model:<\/strong> mock/);
  assert.match(html, /<table>/);
  assert.match(renderMarkdown('<img src=x onerror=alert(1)>'), /&lt;img/);
  assert.deepEqual(fake.messages.filter((m) => m.level === 'error'), []);
});

test('a custom command runs a turn: the prompt line shows the text as typed and gets the turn; mentions and images are not attached', async () => {
  const { c, client, withSession } = await setup();
  const sessionId = await withSession();
  client.handlers.set('prompt', () => ({ turnId: 't2', command: { name: 'review' } }));
  await c.prompt('/review @README.md', undefined, [{ mimeType: 'image/png', data: 'AAAA' }]);
  assert.deepEqual(client.sent('prompt'), [{ sessionId, content: '/review @README.md' }], 'exactly as typed: no file text, no image parts');
  const user = c.state.items.find((i) => i.type === 'user' && i.text === '/review @README.md');
  assert.ok(user, 'a normal prompt line');
  assert.equal(user.turnId, 't2');
  assert.ok(c.state.items.some((i) => i.type === 'notice' && /\/review is a command: it was sent as typed, without the images/.test(i.text)));
  // The same text that is no command gets its mention attached, as before.
  client.handlers.set('prompt', () => ({ turnId: 't3' }));
  await c.prompt('/etc/motd @README.md');
  assert.match(client.sent('prompt').at(-1).content, /# readme text/);
});

test('/fork answers with the new session: its block offers it, and opening it loads that session', async () => {
  const { c, client, withSession } = await setup();
  await withSession();
  client.handlers.set('prompt', () => ({ command: { name: 'fork', output: 'Forked into `s_new`.', sessionId: 's_new' } }));
  await c.prompt('/fork');
  const block = c.state.items.at(-1)!;
  assert.ok(block.type === 'command');
  assert.equal(block.sessionId, 's_new');
  client.handlers.set('session/load', (p) => ({ sessionId: p.sessionId, cwd: '/', model: 'mock', mode: 'ask', state: 'idle', messages: [{ role: 'user', text: 'first', turnId: 't1' }], pending: [] }));
  await c.openSession('s_new');
  assert.deepEqual(client.sent('session/load'), [{ sessionId: 's_new' }]);
  assert.equal(c.state.meta.sessionId, 's_new');
  assert.ok(c.state.items.some((i) => i.type === 'notice' && /forked session/.test(i.text)));
  // The new session has its own commands: the next list is asked for it.
  await c.listCommands();
  assert.deepEqual(client.sent('commands/list').at(-1), { sessionId: 's_new' });
});

test('a refused command shows the server’s message in its block, with no error popup', async () => {
  const { c, client, withSession } = await setup();
  await withSession();
  client.handlers.set('prompt', () => {
    throw new RpcError('unknown model "nope"; models: mock', { kind: 'unknownModel' });
  });
  await c.prompt('/model nope');
  const block = c.state.items.at(-1)!;
  assert.ok(block.type === 'command');
  assert.deepEqual([block.text, block.name, block.error], ['/model nope', 'model', 'unknown model "nope"; models: mock']);
  assert.deepEqual(fake.messages, []);
});

test('/mode NAME shows the new mode in the header', async () => {
  const { c, client, withSession } = await setup();
  await withSession();
  assert.equal(c.state.meta.mode, 'ask');
  client.handlers.set('prompt', () => ({ command: { name: 'mode', output: 'Mode: autoEdit' } }));
  await c.prompt('/mode autoEdit');
  assert.equal(c.state.meta.mode, 'autoEdit');
  client.handlers.set('prompt', () => ({ command: { name: 'mode', output: 'Modes: ask, autoEdit, plan, fullAuto' } }));
  await c.prompt('/mode');
  assert.equal(c.state.meta.mode, 'autoEdit', 'listing the modes changes none');
});

test('while a turn runs a command is sent as a prompt, not a steer; refused for the running turn, the user may stop it and run the command', async () => {
  const { c, client, withSession } = await setup();
  const sessionId = await withSession();
  client.emit({ sessionId, turnId: 't2', type: 'turnStarted', model: 'mock' });
  assert.equal(c.state.meta.turn, 'running');
  let refused = false;
  client.handlers.set('prompt', () => {
    if (!refused) {
      refused = true;
      throw new RpcError('a turn is running', { kind: 'turnInProgress' });
    }
    return { command: { name: 'undo', output: 'Undid the last turn.' } };
  });
  client.handlers.set('stop', () => {
    client.emit({ sessionId, turnId: 't2', type: 'turnEnded', reason: 'interrupted' });
    return { stopped: true };
  });
  fake.onMessage = (m) => m.actions.find((a) => /^Stop the Turn and Run \/undo$/.test(a));
  await c.prompt('/undo');
  assert.equal(client.sent('steer').length, 0, 'never steered');
  assert.equal(client.sent('prompt').length, 2, 'refused, then sent again after the stop');
  assert.equal(client.sent('stop').length, 1);
  assert.match(fake.messages[0].text, /a turn is running/);
  const block = c.state.items.at(-1)!;
  assert.ok(block.type === 'command' && block.output === 'Undid the last turn.');

  // Plain text while a turn runs still steers.
  client.emit({ sessionId, turnId: 't3', type: 'turnStarted', model: 'mock' });
  client.handlers.set('steer', () => ({ queued: true }));
  await c.prompt('/not-a-command but text');
  assert.deepEqual(client.sent('steer'), [{ sessionId, text: '/not-a-command but text' }]);
});

test('/undo: the rewind that follows drops the turn but keeps the command block, with the rewound notice after it', async () => {
  const { c, client, withSession } = await setup();
  const sessionId = await withSession();
  client.handlers.set('prompt', () => ({ command: { name: 'undo', output: 'Undid “first”.' } }));
  await c.prompt('/undo');
  client.emit({ sessionId, turnId: 't1', type: 'rewound', restore: 'both', files: [] });
  assert.deepEqual(
    c.state.items.map((i) => i.type),
    ['command', 'notice'],
    'the turn is gone; the /undo block and the rewound notice stay',
  );
  assert.match((c.state.items[1] as { text: string }).text, /Rewound to before “first”/);
});

test('ChatState: a command block keeps the text as typed (not the shown text with attachments) and an unknown item changes nothing', () => {
  const s = new ChatState();
  s.reset({ sessionId: 's', model: 'm', mode: 'ask' });
  s.addUser('/status\n(with @a.txt)', false, '/status');
  const id = s.items[0].id;
  assert.deepEqual(s.commandResult(id, { name: 'status', output: 'ok' }), { items: [0], meta: false });
  assert.deepEqual(s.items[0], { type: 'command', id, text: '/status', name: 'status', output: 'ok' });
  assert.deepEqual(s.commandFailed('nope', 'x', 'y'), { items: [], meta: false });
  s.commandFailed(id, 'status', 'refused');
  assert.equal((s.items[0] as { error?: string }).error, 'refused');
  assert.equal((s.items[0] as { output?: string }).output, undefined, 'a refusal replaces the output');
});
