// Unit tests of the diff review in the fake vscode host: URIs carry the request id, the left side is the file
// on disk or an empty document, the user's unsaved edits are read back, and close() closes the tabs.
import '../vscodeHook';
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fake, type FakeDocument, type Uri } from '../fakeVscode';
import { DiffReview, proposedUri, READ_ONLY_NOTICE, requestIdOf } from '../../src/diffReview';
import * as vscode from 'vscode';

test('proposed URIs round-trip the request id and keep the file name', () => {
  const u = proposedUri('r_42', 0, 'src/main.rs');
  assert.equal(u.scheme, 'tandem-proposed');
  assert.equal(requestIdOf(u), 'r_42');
  assert.equal(u.path, '/src/main.rs', 'the tab shows the file path, with its extension for highlighting');
  assert.equal(requestIdOf(vscode.Uri.file('/r_42/0/x')), undefined);
});

test('open, edit, read back and close a review', async () => {
  fake.reset();
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-dr-'));
  fs.writeFileSync(path.join(ws, 'old.txt'), 'old\n');
  const review = new DiffReview();
  review.add('r1', ws, [{ path: 'old.txt', oldText: 'old\n', newText: 'new\n', unified: '' }]);
  review.add('r2', ws, [{ path: 'fresh.txt', oldText: null, newText: 'fresh\n', unified: '' }]);
  await review.open('r1');
  await review.open('r2');
  const diffs = fake.executed.filter((e) => e.id === 'vscode.diff').map((e) => e.args as [Uri, Uri, string]);
  assert.equal(diffs[0][0].scheme, 'file', 'an existing file is compared as it is on disk');
  assert.equal(diffs[0][0].fsPath, path.join(ws, 'old.txt'));
  assert.equal(diffs[1][0].scheme, 'tandem-empty', 'a new file is compared with an empty document');
  assert.match(diffs[1][2], /new file/);
  assert.equal(review.edited('r1'), undefined, 'untouched proposal: no editedContent');
  const doc = fake.textDocuments.find((d) => d.uri.toString() === diffs[0][1].toString()) as FakeDocument;
  assert.equal(doc.getText(), 'new\n');
  doc.setText('mine\n');
  assert.equal(review.edited('r1'), 'mine\n', 'unsaved edits count');
  assert.equal(fake.tabs.length, 2);
  await review.close('r1');
  assert.equal(fake.tabs.length, 1, 'only the resolved proposal closes');
  assert.equal(doc.isDirty, false, 'saved to the in-memory provider first, so closing does not prompt');
  assert.equal(review.has('r1'), false);
  await assert.rejects(review.open('r1'), /no longer pending/);
  await review.closeAll();
  assert.equal(fake.tabs.length, 0);
  review.dispose();
  fs.rmSync(ws, { recursive: true, force: true });
});

test('a proposal too large to show in full opens read-only and never yields an edited version', async () => {
  fake.reset();
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-dr-'));
  fs.writeFileSync(path.join(ws, 'big.txt'), 'old\n');
  const review = new DiffReview();
  review.add('cut', ws, [{ path: 'big.txt', oldText: 'old\n', newText: 'head\n[tandem: 9 bytes not shown]', unified: '' }], { readOnly: true });
  review.add('whole', ws, [{ path: 'small.txt', oldText: null, newText: 'small\n', unified: '' }]);
  assert.equal(review.isReadOnly('cut'), true);
  assert.equal(review.isReadOnly('whole'), false);
  await review.open('cut');
  await review.open('cut');
  await review.open('whole');
  const diffs = fake.executed.filter((e) => e.id === 'vscode.diff').map((e) => e.args as [Uri, Uri, string]);
  assert.match(diffs[0][2], /read-only/);
  assert.doesNotMatch(diffs[0][2], /\(editable\)/);
  assert.match(diffs[2][2], /\(editable\)/);
  // VS Code opens a file read-only when its provider's stat says so.
  const fsp = fake.fileSystems.get('tandem-proposed');
  assert.equal(fsp.stat(diffs[0][1]).permissions, vscode.FilePermission.Readonly);
  assert.equal(fsp.stat(diffs[2][1]).permissions, undefined, 'a whole proposal stays editable');
  assert.throws(() => fsp.writeFile(diffs[0][1], Buffer.from('mine')), /NoPermissions/);
  const warned = fake.messages.filter((m) => m.text === READ_ONLY_NOTICE);
  assert.equal(warned.length, 1, 'the user is told once why the proposal cannot be edited');
  assert.match(READ_ONLY_NOTICE, /cannot be edited before it is applied/);
  // Even a document changed behind the read-only flag is not sent back as editedContent.
  const doc = fake.textDocuments.find((d) => d.uri.toString() === diffs[0][1].toString()) as FakeDocument;
  doc.setText('mine\n');
  assert.equal(review.edited('cut'), undefined);
  const small = fake.textDocuments.find((d) => d.uri.toString() === diffs[2][1].toString()) as FakeDocument;
  small.setText('mine\n');
  assert.equal(review.edited('whole'), 'mine\n');
  await review.closeAll();
  assert.equal(fake.tabs.length, 0, 'closing does not try to save into the read-only provider');
  review.dispose();
  fs.rmSync(ws, { recursive: true, force: true });
});

test('a review opened by itself keeps the focus and goes beside the editor in use; Open diff from the chat focuses it', async () => {
  fake.reset();
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-dr-'));
  const review = new DiffReview();
  review.add('r1', ws, [{ path: 'n.txt', oldText: null, newText: 'n\n', unified: '' }]);
  const vscodeFake = require('../fakeVscode');
  vscodeFake.window.activeTextEditor = { document: { uri: vscode.Uri.file(path.join(ws, 'other.ts')) } };
  try {
    await review.open('r1');
    await review.open('r1', undefined, { focus: true });
  } finally {
    vscodeFake.window.activeTextEditor = undefined;
  }
  const [auto, asked] = fake.executed.filter((e) => e.id === 'vscode.diff').map((e) => e.args[3] as { preserveFocus?: boolean; viewColumn?: number });
  assert.equal(auto.preserveFocus, true, 'keystrokes meant for other.ts stay there');
  assert.equal(auto.viewColumn, vscode.ViewColumn.Beside, 'other.ts stays on screen');
  assert.equal(asked.preserveFocus, false);
  assert.equal(asked.viewColumn, undefined);
  review.dispose();
  fs.rmSync(ws, { recursive: true, force: true });
});
