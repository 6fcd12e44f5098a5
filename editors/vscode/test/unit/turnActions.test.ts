// Unit tests of the per-turn actions (Show changes, Undo, Edit & resend, Fork from here) in the controller, in the
// fake vscode host with a scripted client (test/fakeClient.ts) in place of the tandem binary: the requests they
// send (shapes and order), how a rewind changes the chat (at once, and again at its `rewound` event), conflicts
// and Force, a running turn's refusal with the offer to stop, and the commands acting on the last turn.
import '../vscodeHook';
import { afterEach, test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fake, type Uri } from '../fakeVscode';
import { FakeClient, RpcError } from '../fakeClient';
import { Controller } from '../../src/controller';
import { registerCommands } from '../../src/commands';
import type { RewindResult, TurnFileDiff } from '../../src/protocol';

let current: Controller | undefined;
afterEach(async () => {
  await current?.dispose();
  current = undefined;
});

async function setup() {
  fake.reset();
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-turns-'));
  fake.workspaceFolder = ws;
  const client = new FakeClient();
  const context = { subscriptions: [] as { dispose(): void }[], extension: { packageJSON: { version: '0.0.0-test' } } };
  const output = { appendLine() {}, show() {}, dispose() {} };
  const c = new Controller(context as never, output as never, { makeClient: () => client as never });
  current = c;
  registerCommands(context as never, c, async () => {});
  const posted: any[] = [];
  c.bridge.attach((m) => posted.push(structuredClone(m)));
  c.bridge.onReady();
  await c.start();
  /** A whole turn: the prompt (answered with `turnId`), then its events after the response. */
  const turn = async (text: string, turnId: string, answer: string) => {
    client.handlers.set('prompt', () => ({ turnId }));
    await c.prompt(text);
    const sessionId = c.state.meta.sessionId!;
    client.emit({ sessionId, turnId, type: 'turnStarted', model: 'mock' });
    client.emit({ sessionId, turnId, type: 'assistantMessage', text: answer });
    client.emit({ sessionId, turnId, type: 'turnEnded', reason: 'completed' });
  };
  const texts = () => c.state.items.map((i) => ('text' in i ? i.text : i.type));
  return { c, client, ws, posted, turn, texts };
}

const ok = (r: Partial<RewindResult> = {}): RewindResult => ({ restored: [], conflicts: [], conversationRewound: true, ...r });
const pickRestore = (restore: string) => fake.quickPickAnswers.push((items) => items.find((i: any) => i.restore === restore));

test('Show changes asks turn/diff for the turn and opens the multi-file diff; binary, uncaptured files and folders are listed, not diffed', async () => {
  const { c, client, ws, turn } = await setup();
  await turn('change things', 't1', 'changed');
  const files: TurnFileDiff[] = [
    { path: 'src/a.txt', change: 'modified', oldText: 'a\n', newText: 'a2\n', unified: '…' },
    { path: 'b.txt', change: 'added', oldText: null, newText: 'b\n', unified: '…' },
    { path: 'c.txt', change: 'deleted', oldText: 'c\n', newText: null, unified: '…' },
    { path: 'logo.png', change: 'added', oldText: null, newText: null, unified: '', binary: true },
    { path: 'big.bin', change: 'modified', oldText: null, newText: null, unified: '', binary: true, notCaptured: 'over 5 MiB' },
    { path: 'out', change: 'added', oldText: null, newText: null, unified: '' },
  ];
  client.handlers.set('turn/diff', () => ({ files }));
  await c.turnAction('showChanges', 't1');
  assert.deepEqual(client.sent('turn/diff'), [{ sessionId: c.state.meta.sessionId, turnId: 't1' }]);
  const changes = fake.executed.filter((e) => e.id === 'vscode.changes');
  assert.equal(changes.length, 1, 'one multi-file diff editor');
  const [title, list] = changes[0].args as [string, [Uri, Uri | undefined, Uri | undefined][]];
  assert.match(title, /“change things”/);
  assert.deepEqual(list.map(([r]) => r.fsPath), [path.join(ws, 'src/a.txt'), path.join(ws, 'b.txt'), path.join(ws, 'c.txt')], 'only text files are diffed');
  const provider = fake.contentProviders.get('tandem-turn');
  const text = (u: Uri | undefined) => (u ? provider.provideTextDocumentContent(u) : undefined);
  assert.deepEqual(list.map(([, before, after]) => [text(before), text(after)]), [['a\n', 'a2\n'], [undefined, 'b\n'], ['c\n', undefined]], 'both sides as the server recorded them; a missing side is left out');
  assert.ok(list.every(([, b, a]) => [b, a].every((u) => !u || u.scheme === 'tandem-turn')), 'read-only virtual documents, not the disk');
  const note = fake.messages.find((m) => m.level === 'info');
  assert.ok(note, 'the files without a text diff are listed');
  assert.match(note.text, /logo\.png \(added; binary, not shown as a diff\)/);
  assert.match(note.text, /big\.bin \(modified; not captured: over 5 MiB\)/);
  assert.match(note.text, /out \(folder added\)/);

  // An older VS Code without the multi-diff editor: one diff editor per file, an empty side for added and deleted.
  fake.missingCommands.add('vscode.changes');
  files[0] = { ...files[0], newText: 'a3\n' };
  await c.showTurnChanges('t1');
  const diffs = fake.executed.filter((e) => e.id === 'vscode.diff').map((e) => e.args as [Uri, Uri, string]);
  assert.deepEqual(diffs.map(([l, r]) => [text(l), text(r)]), [['a\n', 'a3\n'], ['', 'b\n'], ['c\n', '']]);
  assert.match(diffs[1][2], /b\.txt \(added\)/);
});

test('a turn that changed nothing says so', async () => {
  const { c, client, turn } = await setup();
  await turn('just talk', 't1', 'talked');
  client.handlers.set('turn/diff', () => ({ files: [] }));
  await c.showTurnChanges('t1');
  assert.equal(fake.executed.filter((e) => e.id === 'vscode.changes' || e.id === 'vscode.diff').length, 0);
  assert.deepEqual(fake.messages.map((m) => m.text), ['tandem: “just talk” changed no files.']);
});

test('Undo with files and conversation: the files, then the conversation; the chat drops the turn and every later one at once, and the echo events change nothing', async () => {
  const { c, client, turn, texts, posted } = await setup();
  await turn('zeroth', 't0', 'kept answer');
  await turn('first prompt', 't1', 'first answer');
  await turn('second prompt', 't2', 'second answer');
  const sessionId = c.state.meta.sessionId!;
  client.handlers.set('session/rewind', () => ok({ restored: ['a.txt'] }));
  pickRestore('both');
  await c.turnAction('undo', 't1');
  assert.match(fake.quickPicks[0].options.title, /Undo “first prompt”/);
  assert.deepEqual(fake.quickPicks[0].items.map((i: any) => i.restore), ['both', 'files', 'conversation']);
  assert.deepEqual(
    client.sent('session/rewind'),
    [
      { sessionId, turnId: 't1', restore: 'files' },
      { sessionId, turnId: 't1', restore: 'conversation' },
    ],
    'no force unless asked',
  );
  assert.deepEqual(texts(), ['zeroth', 'kept answer', 'Rewound to before “first prompt”: that turn and every later one left the conversation; 1 file put back (a.txt).']);
  assert.equal(c.state.items.at(-1)!.type, 'notice');
  assert.equal(posted.at(-1)?.type, 'snapshot', 'the webview gets the whole shorter list');
  assert.deepEqual(posted.at(-1).snapshot.items.map((i: any) => i.text), texts());
  client.emit({ sessionId, turnId: 't1', type: 'rewound', restore: 'files', files: ['a.txt'] });
  client.emit({ sessionId, turnId: 't1', type: 'rewound', restore: 'conversation', files: [] });
  assert.equal(c.state.items.length, 3, 'the echoes of our own rewind add nothing');
});

test('a rewound event from another client drops the turns from the chat; a files-only one keeps them and says what was put back', async () => {
  const { c, client, turn, texts } = await setup();
  await turn('first prompt', 't1', 'first answer');
  await turn('second prompt', 't2', 'second answer');
  const sessionId = c.state.meta.sessionId!;
  client.emit({ sessionId, turnId: 't1', type: 'rewound', restore: 'files', files: ['x.txt', 'y.txt'] });
  assert.deepEqual(texts().slice(0, 4), ['first prompt', 'first answer', 'second prompt', 'second answer'], 'files only: the turns stay');
  assert.equal(texts()[4], 'Files put back to before “first prompt”: 2 files put back (x.txt, y.txt). The conversation keeps its turns.');
  client.emit({ sessionId, turnId: 't2', type: 'rewound', restore: 'conversation', files: [] });
  assert.deepEqual(texts(), [
    'first prompt',
    'first answer',
    'Rewound the conversation to before “second prompt”: that turn and every later one left it; the files were left as they are.',
  ]);
  // An event of a turn the chat does not show (rewound already) changes nothing.
  client.emit({ sessionId, turnId: 't2', type: 'rewound', restore: 'conversation', files: [] });
  assert.equal(c.state.items.length, 3);
});

test('conflicts are listed with path and reason; Force sends the files rewind again with force: true before the conversation is rewound', async () => {
  const { c, client, turn, texts } = await setup();
  await turn('first prompt', 't1', 'first answer');
  const sessionId = c.state.meta.sessionId!;
  const answers = [
    ok({ restored: ['a.txt'], conflicts: [{ path: 'README.md', reason: 'changed since this session wrote it' }, { path: 'b.txt', reason: 'deleted by you' }], conversationRewound: false }),
    ok({ restored: ['README.md', 'b.txt'], conversationRewound: false }),
    ok(),
  ];
  client.handlers.set('session/rewind', () => answers.shift());
  fake.onMessage = (m) => (m.modal ? 'Force' : undefined);
  pickRestore('both');
  await c.undoTurn('t1');
  const dialog = fake.messages.find((m) => m.modal)!;
  assert.match(dialog.text, /left 2 files as they are while undoing “first prompt”/);
  assert.deepEqual(dialog.actions, ['Force']);
  assert.equal(dialog.detail, 'README.md: changed since this session wrote it\nb.txt: deleted by you');
  assert.deepEqual(client.sent('session/rewind'), [
    { sessionId, turnId: 't1', restore: 'files' },
    { sessionId, turnId: 't1', restore: 'files', force: true },
    { sessionId, turnId: 't1', restore: 'conversation' },
  ]);
  assert.deepEqual(texts(), ['Rewound to before “first prompt”: that turn and every later one left the conversation; 3 files put back (a.txt, README.md, b.txt).']);
  // Three answers, three events: each is the echo of what the chat already shows.
  client.emit({ sessionId, turnId: 't1', type: 'rewound', restore: 'files', files: ['a.txt'] });
  client.emit({ sessionId, turnId: 't1', type: 'rewound', restore: 'files', files: ['README.md', 'b.txt'] });
  client.emit({ sessionId, turnId: 't1', type: 'rewound', restore: 'conversation', files: [] });
  assert.equal(texts().length, 1);

  // Declined: nothing more is sent, and the chat says which files were left alone.
  await turn('again', 't2', 'again answer');
  client.handlers.set('session/rewind', () => ok({ restored: [], conflicts: [{ path: 'README.md', reason: 'changed' }], conversationRewound: false }));
  fake.onMessage = () => undefined;
  pickRestore('files');
  await c.undoTurn('t2');
  assert.deepEqual(client.sent('session/rewind').slice(3), [{ sessionId, turnId: 't2', restore: 'files' }]);
  assert.equal(texts().at(-1), 'Left as they are (changed since this session wrote them): README.md.');
  assert.ok(texts().includes('again answer'), 'a files-only undo keeps the turn');
});

test('a running turn refuses the rewind: the server message comes with an offer to stop; stopping then undoes', async () => {
  const { c, client, turn, texts } = await setup();
  await turn('first prompt', 't1', 'first answer');
  const sessionId = c.state.meta.sessionId!;
  const busy = new RpcError('a turn is already running in this session; wait for turnEnded, `steer` it, or `stop` it first', { kind: 'turnInProgress' });
  let calls = 0;
  client.handlers.set('session/rewind', () => {
    if (calls++ === 0) throw busy;
    return ok();
  });
  // Dismissed: the turn keeps running and nothing is undone.
  fake.onMessage = () => undefined;
  pickRestore('both');
  await c.undoTurn('t1');
  assert.equal(fake.messages[0].text, `tandem: ${busy.message}`);
  assert.deepEqual(fake.messages[0].actions, ['Stop the Turn and Undo “first prompt”']);
  assert.deepEqual([client.sent('stop').length, client.sent('session/rewind').length], [0, 1]);
  assert.ok(texts().includes('first answer'));
  // Accepted: stop, then the same rewind again.
  calls = 0;
  fake.onMessage = (m) => m.actions[0];
  pickRestore('both');
  await c.undoTurn('t1');
  assert.deepEqual(client.sent('stop'), [{ sessionId }]);
  const order = client.requests.map((r) => r.method).filter((m) => m === 'stop' || m === 'session/rewind');
  assert.deepEqual(order, ['session/rewind', 'session/rewind', 'stop', 'session/rewind', 'session/rewind']);
  assert.ok(!texts().includes('first answer'));
});

test('Edit & resend: the box gets the prompt as typed; sending rewinds files and conversation, then prompts with the new text, which outlives the rewound events', async () => {
  const { c, client, turn, texts, posted } = await setup();
  await turn('zeroth', 't0', 'kept');
  await turn('make it blue', 't1', 'made it blue');
  const sessionId = c.state.meta.sessionId!;
  await c.turnAction('edit', 't1');
  assert.deepEqual(c.state.meta.editing, { turnId: 't1', text: 'make it blue', id: 1 });
  assert.deepEqual(posted.filter((m) => m.type === 'meta').at(-1).meta.editing, c.state.meta.editing, 'the webview is told to fill its box');
  client.handlers.set('session/rewind', () => ok({ restored: ['style.css'] }));
  // The rewound events come after the rewinds' answers: here while the new prompt is on its way.
  client.handlers.set('prompt', () => {
    client.emit({ sessionId, turnId: 't1', type: 'rewound', restore: 'files', files: ['style.css'] });
    client.emit({ sessionId, turnId: 't1', type: 'rewound', restore: 'conversation', files: [] });
    return { turnId: 't2' };
  });
  await c.editAndResend('t1', 'make it red');
  const order = client.requests.map((r) => r.method).filter((m) => m === 'session/rewind' || m === 'prompt').slice(2);
  assert.deepEqual(order, ['session/rewind', 'session/rewind', 'prompt'], 'rewind first, then the prompt');
  assert.deepEqual(client.sent('session/rewind').map((p) => p.restore), ['files', 'conversation']);
  assert.deepEqual(client.sent('session/rewind')[0], { sessionId, turnId: 't1', restore: 'files' });
  assert.deepEqual(client.sent('prompt').at(-1), { sessionId, content: 'make it red' });
  assert.deepEqual(texts(), ['zeroth', 'kept', 'Rewound to before “make it blue”: that turn and every later one left the conversation; 1 file put back (style.css).', 'make it red']);
  const edited = c.state.items.at(-1)!;
  assert.equal(edited.turnId, 't2', 'the new prompt carries its turn');
  assert.equal(c.state.meta.editing, undefined, 'the edit is over');
});

test('Edit & resend sends no prompt when the rewind fails, and the edit stays', async () => {
  const { c, client, turn } = await setup();
  await turn('make it blue', 't1', 'made it blue');
  await c.startEdit();
  assert.equal(c.state.meta.editing?.turnId, 't1', 'without a turn named: the newest prompt');
  client.handlers.set('session/rewind', () => {
    throw new RpcError('`t1` is not a turn of this session\'s conversation (never one, or rewound already); session/checkpoints lists its turns', { kind: 'unknownTurn' });
  });
  const prompts = client.sent('prompt').length;
  await assert.rejects(c.editAndResend('t1', 'make it red'), /not a turn of this session's conversation/);
  assert.equal(client.sent('prompt').length, prompts);
  assert.equal(c.state.meta.editing?.turnId, 't1');
  c.cancelEdit();
  assert.equal(c.state.meta.editing, undefined);
});

test('Fork from here forks before the turn and switches the chat to the new session; from the palette the whole conversation can be forked', async () => {
  const { c, client, turn, texts } = await setup();
  await turn('first prompt', 't1', 'first answer');
  await turn('second prompt', 't2', 'second answer');
  const sessionId = c.state.meta.sessionId!;
  client.handlers.set('session/fork', () => ({ sessionId: 's_fork' }));
  client.handlers.set('session/load', (p) => ({
    sessionId: p.sessionId,
    cwd: '/',
    model: 'mock',
    mode: 'ask',
    state: 'idle',
    pending: [],
    messages: [
      { id: 'm1', role: 'user', source: 'user', text: 'first prompt', ts: 1, turnId: 't1' },
      { id: 'm2', role: 'assistant', text: 'first answer', toolCalls: [], ts: 2, turnId: 't1' },
    ],
  }));
  await c.turnAction('fork', 't2');
  assert.deepEqual(client.sent('session/fork'), [{ sessionId, turnId: 't2' }]);
  assert.deepEqual(client.sent('session/load'), [{ sessionId: 's_fork' }]);
  assert.equal(c.state.meta.sessionId, 's_fork');
  assert.deepEqual(texts().slice(0, 2), ['first prompt', 'first answer']);
  assert.match(texts()[2], /Forked before “second prompt” into this new session/);
  assert.equal(c.state.items[0].turnId, 't1', 'the loaded turns keep their ids, so their actions work');

  client.handlers.set('session/checkpoints', () => ({ checkpoints: [{ turnId: 't1', prompt: 'first prompt', createdAt: Date.now(), files: [] }] }));
  fake.quickPickAnswers.push((items) => items[0]);
  await fake.commands.get('tandem.forkSession')!();
  assert.match(fake.quickPicks.at(-1)!.items[0].label, /whole conversation/);
  assert.match(fake.quickPicks.at(-1)!.items[1].label, /Before “first prompt”/);
  assert.deepEqual(client.sent('session/fork').at(-1), { sessionId: 's_fork' }, 'the whole history: no turnId');
});

test('the palette commands act on the last turn of session/checkpoints; Checkpoints lists the turns newest first', async () => {
  const { c, client, turn } = await setup();
  await turn('first prompt', 't1', 'first answer');
  await turn('second prompt', 't2', 'second answer');
  const sessionId = c.state.meta.sessionId!;
  client.handlers.set('session/checkpoints', () => ({
    checkpoints: [
      { turnId: 't1', prompt: 'first prompt', createdAt: Date.now() - 120_000, files: [{ path: 'a.txt', change: 'added' }] },
      { turnId: 't2', prompt: 'second prompt', createdAt: Date.now(), files: [] },
    ],
  }));
  client.handlers.set('turn/diff', () => ({ files: [{ path: 'a.txt', change: 'added', oldText: null, newText: 'a\n', unified: '' }] }));
  client.handlers.set('session/rewind', () => ok());
  await fake.commands.get('tandem.showTurnChanges')!();
  assert.deepEqual(client.sent('turn/diff'), [{ sessionId, turnId: 't2' }]);
  pickRestore('conversation');
  await fake.commands.get('tandem.undoTurn')!();
  assert.deepEqual(client.sent('session/rewind'), [{ sessionId, turnId: 't2', restore: 'conversation' }]);
  await fake.commands.get('tandem.editAndResend')!();
  assert.deepEqual(c.state.meta.editing, { turnId: 't1', text: 'first prompt', id: 1 }, 'the newest prompt left in the chat');
  fake.quickPickAnswers.push((items) => items.find((i: any) => i.turnId === 't1'));
  fake.quickPickAnswers.push((items) => items.find((i: any) => i.action === 'showChanges'));
  await fake.commands.get('tandem.checkpoints')!();
  const turns = fake.quickPicks.find((p) => /turns of this session/.test(p.options.title))!.items;
  assert.deepEqual(turns.map((i: any) => [i.label, i.turnId]), [['second prompt', 't2'], ['first prompt', 't1']]);
  assert.match(turns[1].description, /2 min ago · 1 file changed/);
  assert.deepEqual(client.sent('turn/diff').at(-1), { sessionId, turnId: 't1' });
});

test('without a session the turn commands say that the first prompt starts one; a server without checkpoints is named', async () => {
  const { c, client, turn } = await setup();
  await fake.commands.get('tandem.undoTurn')!();
  assert.deepEqual(fake.messages.map((m) => m.text), ['tandem: No tandem session is open yet: the first prompt starts one.']);
  await turn('first prompt', 't1', 'first answer');
  client.handlers.set('turn/diff', () => {
    throw new RpcError('method not found: turn/diff', { kind: 'methodNotFound' }, -32601);
  });
  await fake.commands.get('tandem.showTurnChanges')!('t1');
  assert.equal(fake.messages.at(-1)!.text, 'tandem: This tandem server has no checkpoints (turn diff, undo, fork): update tandem.');
  void c;
});
