// Unit tests of the ChatState reducer: how session events become chat items, turn state and usage.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { ChatState, isTurnStart, rewoundText, shortPrompt } from '../../src/chatState';
import type { SessionEvent } from '../../src/protocol';

function feeder(state: ChatState, sessionId = 's1') {
  let seq = 0;
  return (e: Record<string, unknown>) => state.apply({ sessionId, seq: ++seq, turnId: 't1', ...e } as SessionEvent);
}

function fresh() {
  const s = new ChatState();
  s.reset({ sessionId: 's1', model: 'm', mode: 'ask' });
  return { s, feed: feeder(s) };
}

test('deltas stream into one assistant item that assistantMessage finalizes', () => {
  const { s, feed } = fresh();
  feed({ type: 'turnStarted', model: 'm' });
  assert.equal(s.meta.turn, 'running');
  const c1 = feed({ type: 'assistantDelta', text: 'Hel' });
  feed({ type: 'reasoningDelta', text: 'hmm' });
  const c2 = feed({ type: 'assistantDelta', text: 'lo' });
  assert.deepEqual(c1.items, c2.items, 'both deltas update the same item');
  let a = s.items[0];
  assert.ok(a.type === 'assistant' && a.text === 'Hello' && a.reasoning === 'hmm' && a.streaming);
  feed({ type: 'assistantMessage', text: 'Hello!' });
  a = s.items[0];
  assert.ok(a.type === 'assistant' && a.text === 'Hello!' && !a.streaming);
  feed({ type: 'assistantDelta', text: 'next' });
  assert.equal(s.items.length, 2, 'text after a finished message starts a new bubble');
});

test("a turn another attached client prompted shows that client's prompt", () => {
  const { s, feed } = fresh();
  feed({ type: 'turnStarted', model: 'm', prompt: 'from the phone' });
  feed({ type: 'assistantMessage', text: 'answer' });
  assert.equal(s.items.length, 2);
  const u = s.items[0];
  assert.ok(u.type === 'user' && u.text === 'from the phone' && u.turnId === 't1', JSON.stringify(u));
  assert.equal(s.promptOf('t1'), u);
});

test("this chat's own prompt is claimed by its turnStarted, not shown twice", () => {
  const { s, feed } = fresh();
  s.addUser('mine');
  feed({ type: 'turnStarted', model: 'm', prompt: 'mine' });
  assert.equal(s.items.filter((x) => x.type === 'user').length, 1);
});

test("a hook's line of this chat's own turn before its turnStarted does not make the prompt look foreign", () => {
  const { s, feed } = fresh();
  const added = s.addUser('mine');
  feed({ type: 'hookRan', event: 'UserPromptSubmit', command: 'true', exitCode: 0, durationMs: 1, blocked: false });
  feed({ type: 'turnStarted', model: 'm', prompt: 'mine' });
  s.setTurnOf(s.items[added.items[0]].id, 't1');
  assert.equal(s.items.filter((x) => x.type === 'user').length, 1, JSON.stringify(s.items));
});

test('an empty assistantMessage with nothing streamed adds no bubble', () => {
  const { s, feed } = fresh();
  feed({ type: 'turnStarted', model: 'm' });
  feed({ type: 'assistantMessage', text: '' });
  assert.equal(s.items.length, 0);
});

test('tool card goes through approval, running, streamed output and completion', () => {
  const { s, feed } = fresh();
  feed({ type: 'turnStarted', model: 'm' });
  feed({ type: 'toolCall', toolCallId: 'c1', name: 'shell', kind: 'execute', title: 'Run ls', arguments: { command: 'ls' } });
  feed({
    type: 'approvalRequested', requestId: 'r1', toolCallId: 'c1', name: 'shell', kind: 'execute', title: 'Run ls', reason: 'runs a command',
    arguments: {}, command: 'ls', cwd: '/w', options: [{ decision: 'once', label: 'Allow once' }, { decision: 'deny', label: 'Deny' }],
  });
  assert.equal(s.meta.turn, 'awaitingApproval');
  assert.equal(s.pendingApprovals().length, 1);
  assert.equal(s.toolByRequest('r1')?.approval?.command, 'ls');
  feed({ type: 'approvalResolved', requestId: 'r1', decision: 'once' });
  assert.equal(s.meta.turn, 'running');
  assert.equal(s.pendingApprovals().length, 0);
  feed({ type: 'toolCallUpdate', toolCallId: 'c1', status: 'running' });
  feed({ type: 'toolCallUpdate', toolCallId: 'c1', status: 'running', output: 'a\n' });
  feed({ type: 'toolCallUpdate', toolCallId: 'c1', status: 'running', output: 'b\n' });
  feed({ type: 'toolCallUpdate', toolCallId: 'c1', status: 'completed', result: 'a\nb' });
  const t = s.items[0];
  assert.ok(t.type === 'tool');
  assert.equal(t.output, 'a\nb\n');
  assert.equal(t.status, 'completed');
  assert.equal(t.result, 'a\nb');
  assert.equal(t.approval?.resolved, 'once');
});

test('a denied approval marks the card denied', () => {
  const { s, feed } = fresh();
  feed({ type: 'turnStarted', model: 'm' });
  feed({ type: 'toolCall', toolCallId: 'c1', name: 'write_file', kind: 'edit', title: 'Write', arguments: {} });
  feed({ type: 'approvalRequested', requestId: 'r1', toolCallId: 'c1', name: 'write_file', kind: 'edit', title: 'Write', reason: '', arguments: {}, options: [] });
  feed({ type: 'approvalResolved', requestId: 'r1', decision: 'deny' });
  const t = s.items[0];
  assert.ok(t.type === 'tool' && t.status === 'denied');
});

test('duplicate seq and foreign sessions are ignored', () => {
  const { s } = fresh();
  s.apply({ sessionId: 's1', seq: 1, type: 'turnStarted', model: 'm' } as SessionEvent);
  const dup = s.apply({ sessionId: 's1', seq: 1, type: 'assistantDelta', text: 'x' } as SessionEvent);
  const foreign = s.apply({ sessionId: 'other', seq: 2, type: 'assistantDelta', text: 'y' } as SessionEvent);
  assert.deepEqual(dup.items, []);
  assert.deepEqual(foreign.items, []);
  assert.equal(s.items.length, 0);
});

test('usage keeps the last call and the session totals', () => {
  const { s, feed } = fresh();
  feed({ type: 'usage', model: 'm', inputTokens: 10, outputTokens: 2 });
  feed({ type: 'usage', model: 'm', inputTokens: 30, outputTokens: 5, cachedTokens: 8 });
  assert.deepEqual(s.meta.usage, { model: 'm', inputTokens: 30, outputTokens: 5, cachedTokens: 8, totalInput: 40, totalOutput: 7 });
});

test('questions wait for an answer, and are withdrawn when the turn ends unanswered', () => {
  const { s, feed } = fresh();
  feed({ type: 'turnStarted', model: 'm' });
  feed({ type: 'toolCall', toolCallId: 'q', name: 'ask_user', kind: 'think', title: 'Ask', arguments: {} });
  feed({ type: 'questionAsked', requestId: 'r1', toolCallId: 'q', question: 'Which?', choices: ['a', 'b'] });
  assert.equal(s.meta.turn, 'awaitingAnswer');
  s.markAnswered('r1', 'a');
  assert.equal(s.meta.turn, 'running');
  assert.equal(s.questionByRequest('r1')?.answer, 'a');
  feed({ type: 'questionAsked', requestId: 'r2', toolCallId: 'q2', question: 'Plan ok?', plan: '# Plan' });
  feed({ type: 'notice', kind: 'interrupted', text: 'Interrupted' });
  feed({ type: 'turnEnded', reason: 'interrupted' });
  assert.equal(s.questionByRequest('r2')?.withdrawn, true);
  assert.equal(s.pendingQuestions().length, 0);
  assert.equal(s.meta.turn, 'idle');
  assert.deepEqual(s.meta.lastEnd, { reason: 'interrupted', error: undefined });
});

test('a turn that ends in error shows the error as a notice; model switches update the model', () => {
  const { s, feed } = fresh();
  feed({ type: 'turnStarted', model: 'm' });
  feed({ type: 'modelSwitched', from: 'm', to: 'n', warning: 'no images' });
  assert.equal(s.meta.model, 'n');
  feed({ type: 'turnEnded', reason: 'error', error: { message: 'provider said 500', retriable: true } });
  const texts = s.items.filter((i) => i.type === 'notice').map((i) => (i as { text: string }).text);
  assert.ok(texts.some((t) => /from m to n \(no images\)/.test(t)));
  assert.ok(texts.includes('provider said 500'));
});

test('loadHistory rebuilds messages and tool calls of session/load', () => {
  const s = new ChatState();
  s.loadHistory([
    { role: 'user', text: 'hi' },
    { role: 'assistant', text: 'looking', toolCalls: [{ toolCallId: 'c1', name: 'write_file', arguments: { path: 'a.md' }, result: 'denied by user: no', status: 'denied' }] },
    { role: 'notice', kind: 'interrupted', text: 'Interrupted by user' },
  ]);
  assert.deepEqual(s.items.map((i) => i.type), ['user', 'assistant', 'tool', 'notice']);
  const t = s.items[2];
  assert.ok(t.type === 'tool' && t.kind === 'edit' && t.status === 'denied' && t.title === 'write_file a.md');
});

test('a fresh state has no server and no session; reset without a session empties the chat into a draft', () => {
  const s = new ChatState();
  assert.equal(s.meta.server, 'notStarted', 'nothing is started before first use');
  assert.equal(s.meta.sessionId, undefined);
  s.reset({ sessionId: 's1', model: 'm', mode: 'autoEdit' });
  s.setMeta({ server: 'ready', models: ['m'], sessionStore: true });
  const feed = feeder(s);
  feed({ type: 'turnStarted', model: 'm' });
  feed({ type: 'assistantDelta', text: 'old' });
  feed({ type: 'usage', model: 'm', inputTokens: 3, outputTokens: 2 });
  s.reset();
  assert.deepEqual(s.items, []);
  assert.equal(s.meta.sessionId, undefined, 'the next prompt creates the session');
  assert.equal(s.meta.turn, 'idle');
  assert.equal(s.meta.usage, undefined);
  assert.deepEqual([s.meta.server, s.meta.models, s.meta.sessionStore], ['ready', ['m'], true], 'server info is kept');
  // The next session's events start at seq 1 again.
  s.reset({ sessionId: 's2', model: 'm', mode: 'ask' });
  feeder(s, 's2')({ type: 'assistantDelta', text: 'new' });
  assert.equal(s.items.length, 1);
});

test('a resumed session with a pending approval shows the call once, pending, then asking again', () => {
  // session/load of a session killed while it waited for the second of two write approvals (protocol.md).
  const s = new ChatState();
  s.reset({ sessionId: 's1', model: 'm', mode: 'ask' });
  s.loadHistory([
    { role: 'user', text: 'Add a changelog entry and a note' },
    {
      role: 'assistant',
      text: '',
      toolCalls: [
        { toolCallId: 'call_w2', name: 'write_file', arguments: { path: 'CHANGELOG.md', content: '- add\n' } },
        { toolCallId: 'call_w3', name: 'write_file', arguments: { path: 'NOTES.md', content: 'todo\n' } },
      ],
    },
  ]);
  const cards = () => s.items.filter((i) => i.type === 'tool');
  assert.deepEqual(cards().map((t) => t.type === 'tool' && t.status), ['pending', 'pending'], 'calls without a result are not "completed"');
  const feed = feeder(s);
  feed({ type: 'turnStarted', model: 'm' });
  feed({ type: 'toolCall', toolCallId: 'call_w2', name: 'write_file', kind: 'edit', title: 'Write CHANGELOG.md', arguments: {} });
  feed({ type: 'toolCall', toolCallId: 'call_w3', name: 'write_file', kind: 'edit', title: 'Write NOTES.md', arguments: {} });
  feed({
    type: 'approvalRequested', requestId: 'r9', toolCallId: 'call_w3', name: 'write_file', kind: 'edit', title: 'Write NOTES.md', reason: 'writes',
    arguments: {}, options: [{ decision: 'once', label: 'Allow once' }, { decision: 'deny', label: 'Deny' }],
  });
  assert.equal(cards().length, 2, 'each call has one card, none repeated');
  const w3 = s.toolByCallId('call_w3');
  assert.equal(w3?.status, 'awaitingApproval');
  assert.equal(w3?.title, 'Write NOTES.md');
  assert.equal(s.pendingApprovals().length, 1);
  assert.ok(!cards().some((t) => t.type === 'tool' && t.status === 'completed'), 'no copy claims to be completed');
  feed({ type: 'toolCallUpdate', toolCallId: 'call_w2', status: 'completed', result: 'ok', diff: [{ path: 'CHANGELOG.md', oldText: null, newText: '- add\n', unified: '+- add\n' }] });
  assert.equal(s.toolByCallId('call_w2')?.status, 'completed');
  assert.equal(s.toolByCallId('call_w2')?.diff?.[0].path, 'CHANGELOG.md', 'the applied diff is kept on the card');
});

test('history keeps the diff an applied edit wrote, and a stored result means completed', () => {
  const s = new ChatState();
  s.reset({ sessionId: 's1', model: 'm', mode: 'ask' });
  s.loadHistory([
    {
      role: 'assistant',
      text: 'Noted.',
      toolCalls: [{ toolCallId: 'w1', name: 'write_file', arguments: { path: 'n.txt' }, result: 'Wrote', diff: [{ path: 'n.txt', oldText: null, newText: 'a\n', unified: '+a\n' }] }],
    },
  ]);
  const t = s.toolByCallId('w1');
  assert.equal(t?.status, 'completed');
  assert.equal(t?.diff?.[0].newText, 'a\n');
});

// ---- turns: which item belongs to which turn, and what a rewind does to the chat ---------------------------

/** Feeds events of one session with explicit turn ids (the feeder above always says t1). */
function turnFeeder(state: ChatState) {
  let seq = 0;
  return (turnId: string | undefined, e: Record<string, unknown>) => state.apply({ sessionId: 's1', seq: ++seq, ...(turnId ? { turnId } : {}), ...e } as SessionEvent);
}

test('every item knows its turn: a prompt from its response or from turnStarted, a steer from the running turn, event items from their event', () => {
  const { s } = fresh();
  const feed = turnFeeder(s);
  const p1 = s.addUser('first (with @a.txt)', false, 'first');
  assert.equal(s.items[p1.items[0]].turnId, undefined, 'not admitted yet');
  assert.deepEqual(s.setTurnOf(s.items[0].id, 't1').items, [0]);
  feed('t1', { type: 'turnStarted', model: 'm' });
  feed('t1', { type: 'assistantDelta', text: 'a' });
  s.addUser('steer it', true);
  feed('t1', { type: 'toolCall', toolCallId: 'c1', name: 'shell', kind: 'execute', title: 'Run', arguments: {} });
  feed('t1', { type: 'turnEnded', reason: 'completed' });
  s.addNotice('mode', 'Permission mode: ask');
  // The next prompt's response comes late: turnStarted names its turn first.
  s.addUser('second');
  const started = feed('t2', { type: 'turnStarted', model: 'm' });
  assert.deepEqual(started.items, [5], 'the prompt is re-rendered with its turn');
  feed('t2', { type: 'assistantMessage', text: 'b' });
  feed(undefined, { type: 'notice', kind: 'network', text: 'Network access allowed' });
  // A retry's turn has no prompt of its own: it does not take the older prompt's.
  feed('t3', { type: 'turnStarted', model: 'm' });
  feed('t3', { type: 'assistantMessage', text: 'c' });
  assert.deepEqual(
    s.items.map((i) => [i.type, i.turnId]),
    [['user', 't1'], ['assistant', 't1'], ['user', 't1'], ['tool', 't1'], ['notice', undefined], ['user', 't2'], ['assistant', 't2'], ['notice', undefined], ['assistant', 't3']],
  );
  assert.deepEqual(s.items.map((_, i) => isTurnStart(s.items, i)), [true, false, false, false, false, true, false, false, true], 'the actions go on the first item of each turn');
  assert.equal(s.promptOf('t1')?.draft, 'first', 'the text as typed, for Edit & resend');
  assert.equal(s.promptOf('t3'), undefined);
  assert.equal(s.lastPrompt()?.text, 'second');
  assert.equal(s.lastTurnId(), 't3');
});

test('history items carry their turn; steering shows as a steer; a rewound notice belongs to no turn', () => {
  const s = new ChatState();
  s.reset({ sessionId: 's1', model: 'm', mode: 'ask' });
  s.loadHistory([
    { role: 'user', source: 'user', text: 'gone', turnId: 't0' },
    { role: 'notice', kind: 'rewound', text: 'Rewound: “gone”', turnId: 't0' },
    { role: 'user', source: 'user', text: 'kept', turnId: 't1' },
    { role: 'user', source: 'steering', text: 'shorter', turnId: 't1' },
    { role: 'assistant', text: 'ok', toolCalls: [{ toolCallId: 'w1', name: 'write_file', arguments: { path: 'a' }, result: 'Wrote', status: 'completed' }], turnId: 't1' },
    { role: 'notice', kind: 'model_switch', text: 'Switched', turnId: null },
  ]);
  assert.deepEqual(
    s.items.map((i) => [i.type, i.turnId, i.type === 'user' ? !!i.steer : null]),
    [['user', 't0', false], ['notice', undefined, null], ['user', 't1', false], ['user', 't1', true], ['assistant', 't1', null], ['tool', 't1', null], ['notice', undefined, null]],
  );
  assert.equal(s.lastPrompt()?.text, 'kept');
  // Items the extension adds itself are not part of a turn.
  s.addNotice('info', 'resumed');
  assert.equal(s.items.at(-1)!.turnId, undefined);
});

test('a conversation rewind cuts the chat at the turn, forgets what it held and ends an edit of it; a files rewind only adds a notice', () => {
  const { s } = fresh();
  const feed = turnFeeder(s);
  s.addUser('one');
  feed('t1', { type: 'turnStarted', model: 'm' });
  feed('t1', { type: 'assistantMessage', text: 'answer one' });
  feed('t1', { type: 'turnEnded', reason: 'error', error: { message: 'boom', retriable: true } });
  s.addUser('two');
  feed('t2', { type: 'turnStarted', model: 'm' });
  feed('t2', { type: 'toolCall', toolCallId: 'c2', name: 'write_file', kind: 'edit', title: 'Write', arguments: {} });
  feed('t2', { type: 'assistantDelta', text: 'streaming' });
  s.setMeta({ editing: { turnId: 't2', text: 'two', id: 1 } });
  assert.deepEqual(s.rewind('t9', 'both', []), { items: [], meta: false }, 'a turn the chat does not show: nothing');
  const files = s.rewind('t1', 'files', ['a.txt']);
  assert.equal(files.reset, undefined);
  assert.deepEqual(files.items, [s.items.length - 1]);
  assert.equal(s.items.at(-1)!.turnId, undefined, 'the notice is not part of the turn');
  const n = s.items.length;
  const ch = s.rewind('t2', 'both', ['a.txt', 'b.txt']);
  assert.deepEqual([ch.reset, ch.meta], [true, true]);
  assert.ok(s.items.length < n);
  assert.deepEqual(s.items.map((i) => ('text' in i ? i.text : i.type)).slice(0, 3), ['one', 'answer one', 'boom']);
  assert.equal(s.items.at(-1)!.type, 'notice');
  assert.match((s.items.at(-1) as { text: string }).text, /^Rewound to before “two”: .*2 files put back \(a\.txt, b\.txt\)/);
  assert.equal(s.toolByCallId('c2'), undefined, 'the dropped tool card is forgotten');
  assert.equal(s.meta.editing, undefined, 'the edited turn is gone');
  assert.equal(s.meta.lastEnd, undefined, 'no Retry for a turn that is gone');
  // Late events of the dropped turn do not resurrect it, and new text starts a new bubble.
  const before = s.items.length;
  feed('t2', { type: 'toolCallUpdate', toolCallId: 'c2', status: 'completed', result: 'x' });
  assert.equal(s.items.length, before);
  s.addUser('three');
  feed('t3', { type: 'turnStarted', model: 'm' });
  feed('t3', { type: 'assistantDelta', text: 'fresh' });
  assert.deepEqual(s.items.slice(-2).map((i) => ('text' in i ? i.text : '')), ['three', 'fresh']);
});

test('the echo of a rewind this client applied is skipped once; the same event from elsewhere applies', () => {
  const { s } = fresh();
  const feed = turnFeeder(s);
  s.addUser('one');
  feed('t1', { type: 'turnStarted', model: 'm' });
  s.expectEcho('t1', 'files');
  s.rewind('t1', 'files', ['a.txt']);
  const n = s.items.length;
  assert.deepEqual(feed('t1', { type: 'rewound', restore: 'files', files: ['a.txt'] }).items, []);
  assert.equal(s.items.length, n, 'no second notice');
  feed('t1', { type: 'rewound', restore: 'files', files: ['a.txt'] });
  assert.equal(s.items.length, n + 1, 'a later files rewind (another client) is shown');
});

test('rewound notices name the turn and what was put back', () => {
  assert.equal(rewoundText('fix the bug', 'both', []), 'Rewound to before “fix the bug”: that turn and every later one left the conversation; no file needed putting back.');
  assert.equal(rewoundText(undefined, 'files', ['a']), 'Files put back to before that turn: 1 file put back (a). The conversation keeps its turns.');
  assert.equal(shortPrompt(`  ${'x'.repeat(80)}\nsecond line`), `${'x'.repeat(59)}…`);
});
