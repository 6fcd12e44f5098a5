// Unit tests of the ChatState reducer: how session events become chat items, turn state and usage.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { ChatState } from '../../src/chatState';
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
