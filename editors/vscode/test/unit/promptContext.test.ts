// Unit tests of the prompt helpers: the selection attached as context, and when edited content is sent.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { editedContent, formatExit, isTooLargeToEdit, promptWithSelection } from '../../src/promptContext';

test('the selection is attached in a fenced block naming the file and lines', () => {
  const out = promptWithSelection('explain', { path: 'src/a.ts', languageId: 'typescript', startLine: 3, endLine: 5, text: 'const a = 1;' });
  assert.equal(out, 'explain\n\nSelected in src/a.ts (lines 3-5):\n```typescript\nconst a = 1;\n```');
  assert.match(promptWithSelection('x', { path: 'b', languageId: 'md', startLine: 2, endLine: 2, text: 'y' }), /\(line 2\)/);
});

test('a selection containing a fence gets a longer fence', () => {
  const out = promptWithSelection('q', { path: 'r.md', languageId: 'markdown', startLine: 1, endLine: 3, text: '```js\nx\n```' });
  assert.ok(out.includes('````markdown\n```js\nx\n```\n````'));
});

test('no or blank selection leaves the prompt alone', () => {
  assert.equal(promptWithSelection('q'), 'q');
  assert.equal(promptWithSelection('q', { path: 'a', languageId: 'x', startLine: 1, endLine: 1, text: '  ' }), 'q');
});

test('edited content is sent only when the user changed the proposal', () => {
  assert.equal(editedContent('a\n', 'a\n'), undefined);
  assert.equal(editedContent('a\n', undefined), undefined);
  assert.equal(editedContent('a\n', 'b\n'), 'b\n');
});

test('exit descriptions name the signal or the code', () => {
  assert.equal(formatExit(null, 'SIGKILL'), 'signal SIGKILL');
  assert.equal(formatExit(2, null), 'exit code 2');
});

test('a proposal whose reason says it is too large to show in full is not editable', () => {
  // The reason as the server writes it for a cut approval (protocol.md, approvalRequested).
  const cut =
    'write_file changes a file in the workspace. The change is too large to show in full: parts of it are cut, each cut says how much it leaves out. Approve or deny it as proposed; it cannot be edited before it is applied.';
  assert.equal(isTooLargeToEdit(cut), true);
  assert.equal(isTooLargeToEdit('Too large to show in full'), true, 'the case of the sentence does not matter');
  assert.equal(isTooLargeToEdit('write_file changes a file in the workspace'), false);
  assert.equal(isTooLargeToEdit('the file is too large'), false, 'only the sentence itself marks a cut proposal');
  assert.equal(isTooLargeToEdit(''), false);
  assert.equal(isTooLargeToEdit(undefined), false);
});

test('mentions, file context, the context gauge and model abilities', async () => {
  const { mentions, fileContext, contextGauge, modelAbilities } = await import('../../src/promptContext');
  assert.deepEqual(mentions('see @a.ts and @b/c.md, not me@mail.com, again @a.ts'), ['a.ts', 'b/c.md']);
  assert.match(fileContext('a.md', 'x ``` y'), /^File a\.md \(mentioned as @a\.md\):\n````\nx ``` y\n````$/);
  assert.deepEqual(contextGauge({ inputTokens: 96_000, outputTokens: 0 }, 128_000), { used: 96_000, window: 128_000, percent: 75 });
  assert.equal(contextGauge(undefined, 128_000), undefined);
  assert.equal(modelAbilities({ contextWindow: 200_000, vision: true, pdf: true, reasoning: true }), '200,000 tokens of context · images · PDF · reasoning');
});
