// Unit tests of the per-hunk revert of a proposal: hunks between original and proposal, which hunk a cursor is in,
// and that reverting one hunk restores exactly its original lines and leaves the other hunks as proposed.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { hunkAt, hunks, MAX_CELLS, revertHunk, TooLargeToSplit } from '../../src/hunks';

const original = 'a\nb\nc\nd\ne\nf\ng\n';
// Two changes: b -> B (line 1), and f removed + h added at the end.
const proposal = 'a\nB\nc\nd\ne\ng\nh\n';

test('hunks find each change with its lines on both sides', () => {
  assert.deepEqual(hunks(original, proposal), [
    { origStart: 1, origCount: 1, newStart: 1, newCount: 1 },
    { origStart: 5, origCount: 1, newStart: 5, newCount: 0 },
    { origStart: 7, origCount: 0, newStart: 6, newCount: 1 },
  ]);
  assert.deepEqual(hunks(original, original), [], 'no change, no hunk');
  assert.deepEqual(hunks('', 'x\ny'), [{ origStart: 0, origCount: 0, newStart: 0, newCount: 2 }], 'a new file is one hunk');
});

test('reverting one hunk restores only that hunk', () => {
  const list = hunks(original, proposal);
  assert.equal(revertHunk(original, proposal, hunkAt(list, 1)!), 'a\nb\nc\nd\ne\ng\nh\n', 'B goes back to b; the rest stays proposed');
  assert.equal(revertHunk(original, proposal, hunkAt(list, 6)!), 'a\nB\nc\nd\ne\ng\n', 'the added h goes');
  // The removal of f has no proposal line: the line after it (g, line 5) is in it.
  assert.equal(revertHunk(original, proposal, list[1]), 'a\nB\nc\nd\ne\nf\ng\nh\n');
  assert.equal(hunkAt(list, 3), undefined, 'an unchanged line is in no hunk');
  let text = proposal;
  for (;;) {
    const [h] = hunks(original, text);
    if (!h) break;
    text = revertHunk(original, text, h);
  }
  assert.equal(text, original, 'reverting every hunk gives the original back');
});

test('a change too large to split is refused with the way out', () => {
  const big = (p: string) => Array.from({ length: 2100 }, (_, i) => `${p}${i}\n`).join('');
  assert.ok(2100 * 2100 > MAX_CELLS);
  assert.throws(() => hunks(big('x'), big('y')), (e: unknown) => e instanceof TooLargeToSplit && /Revert Block/.test((e as Error).message));
});
