// Unit tests of the pure helpers of the per-turn actions (src/checkpoints.ts): which files of a turn diff are
// diffed and which are listed, the Undo choices, the turns' Quick Pick rows and the conflict dialog's text.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { checkpointPickItems, conflictText, planTurnChanges, RESTORE_PICKS, turnLabel } from '../../src/checkpoints';

test('text files are diffed; binary, uncaptured and folders are listed with a note', () => {
  const { diffs, notes } = planTurnChanges([
    { path: 'a', change: 'modified', oldText: 'x', newText: 'y', unified: '' },
    { path: 'new', change: 'added', oldText: null, newText: '', unified: '' },
    { path: 'gone', change: 'deleted', oldText: 'z', newText: null, unified: '' },
    { path: 'p.png', change: 'modified', oldText: null, newText: null, unified: '', binary: true },
    { path: 'huge', change: 'modified', oldText: null, newText: null, unified: '', binary: true, notCaptured: 'over 5 MiB' },
    { path: 'dir', change: 'deleted', oldText: null, newText: null, unified: '' },
  ]);
  assert.deepEqual(diffs.map((d) => d.path), ['a', 'new', 'gone'], 'an empty new file is still text');
  assert.deepEqual(notes, [
    { path: 'p.png', note: 'modified; binary, not shown as a diff' },
    { path: 'huge', note: 'modified; not captured: over 5 MiB' },
    { path: 'dir', note: 'folder deleted' },
  ]);
});

test('Undo offers both first, then files, then conversation', () => {
  assert.deepEqual(RESTORE_PICKS.map((p) => p.restore), ['both', 'files', 'conversation']);
  assert.equal(turnLabel(undefined), 'that turn');
  assert.equal(turnLabel('do it\nplease'), '“do it”');
});

test('the turns are listed newest first with age, files and whether their files were put back', () => {
  const now = 1_000_000_000;
  const items = checkpointPickItems(
    [
      { turnId: 't1', prompt: 'first', createdAt: now - 3 * 3600_000, files: [{ path: 'a', change: 'added' }, { path: 'b', change: 'deleted' }], filesRestored: true },
      { turnId: 't2', prompt: 'second', createdAt: now - 5_000, files: [] },
    ],
    now,
  );
  assert.deepEqual(items.map((i) => [i.turnId, i.label, i.description, i.detail]), [
    ['t2', 'second', 'just now · no files changed', undefined],
    ['t1', 'first', '3 h ago · 2 files changed · files put back', '+a  −b'],
  ]);
});

test('the conflict dialog names how many files and lists each with its reason', () => {
  const one = conflictText([{ path: 'README.md', reason: 'changed since' }], '“x”');
  assert.equal(one.message, "tandem left 1 file as it is while undoing “x”: changed since this session's turns wrote it. Put it back anyway?");
  assert.equal(one.detail, 'README.md: changed since');
  assert.match(conflictText([{ path: 'a', reason: 'r' }, { path: 'b', reason: 's' }], '“x”').message, /left 2 files as they are/);
});
