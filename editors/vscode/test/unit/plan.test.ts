// Unit tests of the model's plan in the chat (issue 27): ChatState keeps the plan of the latest `plan` event (an
// empty one clears it), restores it from `session/load`, drops it with the session; the bridge sends it to the
// webview; planView() is what the checklist shows (markers, the "2/5" count, the step in progress).
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { ChatState, kindOf } from '../../src/chatState';
import { ViewBridge, type HostMessage } from '../../src/viewBridge';
import { normalizePlan, planView, PLAN_MARKERS } from '../../src/plan';
import type { PlanEntry, SessionEvent } from '../../src/protocol';

const THREE: PlanEntry[] = [
  { content: 'Read the failing test', status: 'completed' },
  { content: 'Fix the parser', status: 'in_progress' },
  { content: 'Run the suite', status: 'pending' },
];

function fresh(sessionId = 's1') {
  const s = new ChatState();
  s.reset({ sessionId, model: 'm', mode: 'ask' });
  let seq = 0;
  const feed = (e: Record<string, unknown>) => s.apply({ sessionId, seq: ++seq, turnId: 't1', ...e } as SessionEvent);
  return { s, feed };
}

test('each plan event replaces the plan in meta (a meta change), and an empty one clears it', () => {
  const { s, feed } = fresh();
  assert.equal(s.meta.plan, undefined, 'no plan before the model sets one');
  feed({ type: 'turnStarted', model: 'm' });
  const c1 = feed({ type: 'plan', entries: THREE });
  assert.deepEqual(c1, { items: [], meta: true }, 'the plan is meta: no chat item, the meta goes to the view');
  assert.deepEqual(s.meta.plan, THREE);
  const shorter: PlanEntry[] = [{ content: 'Fix the parser', status: 'completed' }];
  feed({ type: 'plan', entries: shorter });
  assert.deepEqual(s.meta.plan, shorter, 'the whole list is replaced, not merged');
  const c3 = feed({ type: 'plan', entries: [] });
  assert.equal(c3.meta, true);
  assert.equal(s.meta.plan, undefined, 'an empty plan means no plan');
  assert.equal(s.items.length, 0);
});

test('the plan of another session, or a replayed event, changes nothing', () => {
  const { s, feed } = fresh();
  feed({ type: 'plan', entries: THREE });
  s.apply({ sessionId: 'other', seq: 99, type: 'plan', entries: [] } as SessionEvent);
  assert.deepEqual(s.meta.plan, THREE, 'a foreign session');
  s.apply({ sessionId: 's1', seq: 1, type: 'plan', entries: [] } as SessionEvent);
  assert.deepEqual(s.meta.plan, THREE, 'a replayed seq');
});

test('session/load restores the plan; a new session or another loaded session without one clears it', () => {
  const { s, feed } = fresh();
  feed({ type: 'plan', entries: THREE });
  s.reset();
  assert.equal(s.meta.plan, undefined, 'a new (draft) session has no plan');
  s.reset({ sessionId: 's2', model: 'm', mode: 'ask' });
  assert.deepEqual(s.loadPlan(THREE), { items: [], meta: true });
  assert.deepEqual(s.meta.plan, THREE, 'restored from session/load');
  assert.notEqual(s.meta.plan, THREE, 'copied, not shared with the response');
  s.reset({ sessionId: 's3', model: 'm', mode: 'ask' });
  s.loadPlan(undefined);
  assert.equal(s.meta.plan, undefined, 'a session without a plan shows none');
  s.loadPlan([]);
  assert.equal(s.meta.plan, undefined);
});

test('entries that are not {content, status} are left out; an unknown status reads as pending', () => {
  assert.deepEqual(normalizePlan([{ content: 'a', status: 'completed' }, { status: 'pending' }, null, 7, { content: 'b', status: 'blocked' }]), [
    { content: 'a', status: 'completed' },
    { content: 'b', status: 'pending' },
  ]);
  assert.equal(normalizePlan({ entries: [] }), undefined);
  assert.equal(normalizePlan([{ nope: 1 }]), undefined);
});

test('the checklist: a marker per status, completed of all as "1/3", the step in progress', () => {
  const v = planView(THREE)!;
  assert.equal(v.count, '1/3');
  assert.deepEqual([v.done, v.total], [1, 3]);
  assert.equal(v.current, 'Fix the parser');
  assert.deepEqual(
    v.rows.map((r) => [r.marker, r.status, r.content, r.label]),
    [
      ['✓', 'completed', 'Read the failing test', 'completed'],
      ['▸', 'in_progress', 'Fix the parser', 'in progress'],
      ['○', 'pending', 'Run the suite', 'pending'],
    ],
  );
  assert.equal(new Set(Object.values(PLAN_MARKERS)).size, 3, 'the three statuses look different');
  const all = planView(THREE.map((e) => ({ ...e, status: 'completed' as const })))!;
  assert.deepEqual([all.count, all.current], ['3/3', undefined]);
  assert.equal(planView(undefined), undefined, 'no plan, no panel');
  assert.equal(planView([]), undefined);
});

test('the plan reaches the webview in meta, also in the snapshot of a view opened later', () => {
  const { s, feed } = fresh();
  const bridge = new ViewBridge(s);
  const posted: HostMessage[] = [];
  bridge.attach((m) => posted.push(structuredClone(m)));
  bridge.onReady();
  bridge.publish(feed({ type: 'plan', entries: THREE }));
  const meta = posted.at(-1);
  assert.ok(meta?.type === 'meta');
  assert.deepEqual(meta.meta.plan, THREE);
  bridge.publish(feed({ type: 'plan', entries: [] }));
  const cleared = posted.at(-1);
  assert.ok(cleared?.type === 'meta' && cleared.meta.plan === undefined);
  bridge.publish(feed({ type: 'plan', entries: THREE }));
  // A reloaded view: its snapshot carries the plan.
  bridge.attach((m) => posted.push(structuredClone(m)));
  bridge.onReady();
  const snap = posted.at(-1);
  assert.ok(snap?.type === 'snapshot');
  assert.deepEqual(snap.snapshot.meta.plan, THREE);
});

test('update_plan cards of a resumed session have the kind and title the server gives them live', () => {
  assert.equal(kindOf('update_plan'), 'think');
  const s = new ChatState();
  s.loadHistory([{ role: 'assistant', text: '', turnId: 't1', toolCalls: [{ toolCallId: 'c1', name: 'update_plan', arguments: { entries: THREE }, result: 'Plan updated: 1 of 3 steps completed.', status: 'completed' }] }]);
  const card = s.items[0];
  assert.ok(card?.type === 'tool');
  assert.deepEqual([card.kind, card.title, card.status], ['think', 'Update the plan (3 steps)', 'completed']);
});
