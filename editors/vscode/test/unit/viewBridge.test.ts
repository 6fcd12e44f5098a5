// Unit tests of the webview ready handshake: nothing is posted before `ready`, the snapshot then carries
// every earlier event, and a reloaded view must handshake again.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { ChatState } from '../../src/chatState';
import { ViewBridge } from '../../src/viewBridge';
import type { SessionEvent } from '../../src/protocol';

test('events before ready arrive in the snapshot; updates after it are incremental', () => {
  const state = new ChatState();
  state.reset({ sessionId: 's', model: 'm', mode: 'ask' });
  const bridge = new ViewBridge(state);
  const posted: any[] = [];
  bridge.attach((m) => posted.push(m));
  bridge.publish(state.apply({ sessionId: 's', seq: 1, type: 'turnStarted', model: 'm' } as SessionEvent));
  bridge.publish(state.apply({ sessionId: 's', seq: 2, type: 'assistantDelta', text: 'early' } as SessionEvent));
  assert.equal(posted.length, 0, 'nothing is posted to a webview that is not ready');
  bridge.onReady();
  assert.equal(posted.length, 1);
  assert.equal(posted[0].type, 'snapshot');
  assert.equal(posted[0].snapshot.items[0].text, 'early');
  assert.equal(posted[0].snapshot.meta.turn, 'running');
  bridge.publish(state.apply({ sessionId: 's', seq: 3, type: 'assistantDelta', text: ' late' } as SessionEvent));
  assert.deepEqual(posted[1], { type: 'append', index: 0, text: ' late', reasoning: '' }, 'a streaming message sends only what was appended');
  bridge.publish(state.apply({ sessionId: 's', seq: 5, type: 'reasoningDelta', text: 'hmm' } as SessionEvent));
  bridge.publish(state.apply({ sessionId: 's', seq: 6, type: 'assistantDelta', text: '!' } as SessionEvent));
  assert.deepEqual(posted.slice(2), [
    { type: 'append', index: 0, text: '', reasoning: 'hmm' },
    { type: 'append', index: 0, text: '!', reasoning: '' },
  ]);
  bridge.publish(state.apply({ sessionId: 's', seq: 7, type: 'assistantMessage', text: 'early late!' } as SessionEvent));
  assert.equal(posted[4].updates?.[0]?.item?.streaming, false);
  assert.deepEqual(posted[4], { type: 'items', updates: [{ index: 0, item: state.items[0] }] }, 'the finished message is sent whole');
  bridge.publish(state.apply({ sessionId: 's', seq: 8, type: 'turnEnded', reason: 'completed' } as SessionEvent));
  assert.ok(posted.some((m) => m.type === 'meta' && m.meta.turn === 'idle'));
});

test('a re-created view gets nothing until its own ready, then the full state', () => {
  const state = new ChatState();
  const bridge = new ViewBridge(state);
  const first: any[] = [];
  bridge.attach((m) => first.push(m));
  bridge.onReady();
  bridge.detach();
  bridge.publish(state.addNotice('info', 'while hidden'));
  const second: any[] = [];
  bridge.attach((m) => second.push(m));
  bridge.publish(state.addNotice('info', 'before ready'));
  assert.equal(first.length, 1);
  assert.equal(second.length, 0);
  bridge.onReady();
  assert.deepEqual(second[0].snapshot.items.map((i: any) => i.text), ['while hidden', 'before ready']);
});

test('after a resync the appends continue from what the snapshot held, never repeating text', () => {
  const state = new ChatState();
  state.reset({ sessionId: 's', model: 'm', mode: 'ask' });
  const bridge = new ViewBridge(state);
  const posted: any[] = [];
  bridge.attach((m) => posted.push(m));
  bridge.onReady();
  bridge.publish(state.apply({ sessionId: 's', seq: 1, type: 'assistantDelta', text: 'one' } as SessionEvent));
  assert.equal(posted[1].type, 'items', 'a new streaming item is first sent whole');
  bridge.resync();
  bridge.publish(state.apply({ sessionId: 's', seq: 2, type: 'assistantDelta', text: ' two' } as SessionEvent));
  assert.equal(posted[2].type, 'snapshot');
  assert.deepEqual(posted[3], { type: 'append', index: 0, text: ' two', reasoning: '' });
});

test('a change that removed items (a rewind) sends the whole list again', () => {
  const state = new ChatState();
  state.reset({ sessionId: 's', model: 'm', mode: 'ask' });
  const bridge = new ViewBridge(state);
  const posted: any[] = [];
  bridge.attach((m) => posted.push(structuredClone(m)));
  bridge.onReady();
  state.addUser('one');
  bridge.publish(state.apply({ sessionId: 's', seq: 1, turnId: 't1', type: 'turnStarted', model: 'm' } as SessionEvent));
  bridge.publish(state.apply({ sessionId: 's', seq: 2, turnId: 't1', type: 'assistantDelta', text: 'streaming' } as SessionEvent));
  posted.length = 0;
  bridge.publish(state.apply({ sessionId: 's', seq: 3, turnId: 't1', type: 'rewound', restore: 'conversation', files: [] } as SessionEvent));
  assert.deepEqual(posted.map((m) => m.type), ['snapshot']);
  assert.deepEqual(posted[0].snapshot.items.map((i: any) => i.kind), ['rewound']);
  // A new stream after the cut starts from the snapshot, not from the dropped item's lengths.
  state.addUser('two');
  bridge.publish(state.apply({ sessionId: 's', seq: 4, turnId: 't2', type: 'turnStarted', model: 'm' } as SessionEvent));
  bridge.publish(state.apply({ sessionId: 's', seq: 5, turnId: 't2', type: 'assistantDelta', text: 'new' } as SessionEvent));
  assert.deepEqual(posted.at(-1), { type: 'items', updates: [{ index: 2, item: state.items[2] }] });
});
