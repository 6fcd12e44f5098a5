// Unit tests of loadAllPages: the paged `session/load` is followed back to the oldest message, the history comes
// out oldest first, the other members come from the last page, and a looping or endless server is stopped.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { loadAllPages } from '../../src/loadPages';
import type { LoadSessionResult } from '../../src/protocol';

function page(messages: string[], extra: Partial<LoadSessionResult> = {}): LoadSessionResult {
  return { sessionId: 's1', cwd: '/w', model: 'm', mode: 'ask', state: 'idle', pending: [], messages: messages.map((text) => ({ role: 'user', text })), ...extra };
}

/** A fetch that answers from a table keyed by cursor ('' for the first call) and records what it was asked. */
function server(pages: Record<string, LoadSessionResult>) {
  const asked: (string | undefined)[] = [];
  const fetch = async (cursor?: string) => {
    asked.push(cursor);
    const p = pages[cursor ?? ''];
    if (!p) throw new Error(`no page for cursor ${cursor}`);
    return p;
  };
  return { asked, fetch };
}

const texts = (r: LoadSessionResult) => r.messages.map((m) => (m as { text: string }).text);

test('three pages are joined oldest first, following each cursor backwards', async () => {
  const approval = { type: 'approvalRequested', requestId: 'r1' };
  const { asked, fetch } = server({
    '': page(['m5', 'm6'], { cursor: '40', state: 'running', pending: [approval] }),
    '40': page(['m3', 'm4'], { cursor: '38', state: 'running', pending: [approval] }),
    // The newest view of the session: the approval was answered and the turn ended while the pages came.
    '38': page(['m1', 'm2'], { state: 'idle', pending: [], mode: 'autoEdit' }),
  });
  const r = await loadAllPages(fetch);
  assert.deepEqual(asked, [undefined, '40', '38'], 'the newest page first, then each cursor as the server gave it');
  assert.deepEqual(texts(r), ['m1', 'm2', 'm3', 'm4', 'm5', 'm6']);
  assert.equal(r.cursor, undefined, 'nothing is left out of the result');
  assert.deepEqual([r.state, r.pending, r.mode], ['idle', [], 'autoEdit'], 'the other members come from the last page fetched');
  assert.equal(r.sessionId, 's1');
});

test('a single page without a cursor is the whole history, fetched once', async () => {
  const { asked, fetch } = server({ '': page(['only', 'two'], { state: 'running', pending: [{ type: 'questionAsked' }] }) });
  const r = await loadAllPages(fetch);
  assert.deepEqual(asked, [undefined]);
  assert.deepEqual(texts(r), ['only', 'two']);
  assert.deepEqual([r.state, r.pending], ['running', [{ type: 'questionAsked' }]]);
  assert.equal('cursor' in r, false);
});

test('a cursor returned a second time stops the loading with an error naming it', async () => {
  const { asked, fetch } = server({
    '': page(['m3'], { cursor: '7' }),
    '7': page(['m2'], { cursor: '5' }),
    '5': page(['m1'], { cursor: '7' }),
  });
  await assert.rejects(loadAllPages(fetch), (err: Error) => {
    assert.match(err.message, /cursor "7" a second time/);
    return true;
  });
  assert.deepEqual(asked, [undefined, '7', '5'], 'the repeated cursor is not fetched again');
});

test('a page answering with its own cursor is caught at once', async () => {
  const { asked, fetch } = server({ '': page(['m2'], { cursor: 'c' }), c: page(['m1'], { cursor: 'c' }) });
  await assert.rejects(loadAllPages(fetch), /cursor "c" a second time/);
  assert.deepEqual(asked, [undefined, 'c']);
});

test('more pages than maxPages stop with an error, after exactly maxPages fetches', async () => {
  let n = 0;
  const fetch = async () => page([`m${n}`], { cursor: `c${++n}` });
  await assert.rejects(loadAllPages(fetch, 3), /cursor "c3"\) after 3 pages/);
  assert.equal(n, 3);
  // maxPages pages that end in time are fine.
  const { fetch: ok } = server({ '': page(['b'], { cursor: 'x' }), x: page(['a']) });
  assert.deepEqual(texts(await loadAllPages(ok, 2)), ['a', 'b']);
});

test('a page without messages adds nothing', async () => {
  const { fetch } = server({ '': page(['b'], { cursor: 'x' }), x: { ...page([]), messages: undefined as unknown as unknown[] } });
  assert.deepEqual(texts(await loadAllPages(fetch)), ['b']);
});
