// Diff review of proposed edits: the proposed text lives in an in-memory file system (scheme
// `tandem-proposed`) so the user can edit it in the diff editor before accepting; the left side is the
// file on disk, or for a new file an empty document from a TextDocumentContentProvider (`tandem-empty`).
// Why a FileSystemProvider for the right side: documents of a TextDocumentContentProvider are read-only
// in VS Code, which would make "edit the proposal, accept your version" (editedContent) impossible.
// A proposal too large to show in full (the server cut its longest strings, and refuses editedContent for it)
// is registered read-only instead: its file reports FilePermission.Readonly, so VS Code opens it read-only, and
// edited() never reports a version of it; the diff title and a message say why.
import * as path from 'node:path';
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import type { FileDiff } from './protocol';

export const PROPOSED_SCHEME = 'tandem-proposed';
export const EMPTY_SCHEME = 'tandem-empty';
export const ORIGINAL_SCHEME = 'tandem-original';
/** Both sides of an applied edit's diff (`toolCallUpdate.diff`): read-only text the server reported. */
export const APPLIED_SCHEME = 'tandem-applied';

/**
 * `tandem-proposed:/<relative path>?<requestId>/<index>`: the path alone shows in the tab and breadcrumbs
 * (and keeps the file extension for syntax highlighting); the query makes it unique and names the request.
 */
export function proposedUri(requestId: string, index: number, filePath: string): vscode.Uri {
  const rel = filePath.replace(/^\/+/, '');
  return vscode.Uri.from({ scheme: PROPOSED_SCHEME, path: `/${rel}`, query: `${requestId}/${index}` });
}

export function requestIdOf(uri: vscode.Uri | undefined): string | undefined {
  if (!uri || uri.scheme !== PROPOSED_SCHEME) return undefined;
  return uri.query.split('/')[0] || undefined;
}

/** The provider's key for a proposal document: path and query, since only both together are unique. */
const keyOf = (uri: vscode.Uri) => `${uri.path}?${uri.query}`;

class ProposedFs implements vscode.FileSystemProvider {
  readonly files = new Map<string, { data: Uint8Array; mtime: number; readOnly?: boolean }>();
  private readonly emitter = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  readonly onDidChangeFile = this.emitter.event;

  watch(): vscode.Disposable {
    return new vscode.Disposable(() => {});
  }
  stat(uri: vscode.Uri): vscode.FileStat {
    const f = this.files.get(keyOf(uri));
    if (!f) throw vscode.FileSystemError.FileNotFound(uri);
    const stat: vscode.FileStat = { type: vscode.FileType.File, ctime: f.mtime, mtime: f.mtime, size: f.data.byteLength };
    if (f.readOnly) stat.permissions = vscode.FilePermission.Readonly;
    return stat;
  }
  readDirectory(): [string, vscode.FileType][] {
    return [];
  }
  createDirectory(): void {}
  readFile(uri: vscode.Uri): Uint8Array {
    const f = this.files.get(keyOf(uri));
    if (!f) throw vscode.FileSystemError.FileNotFound(uri);
    return f.data;
  }
  writeFile(uri: vscode.Uri, content: Uint8Array): void {
    const f = this.files.get(keyOf(uri));
    if (f?.readOnly) throw vscode.FileSystemError.NoPermissions('this proposal is too large to show in full and cannot be edited');
    this.files.set(keyOf(uri), { data: content, mtime: Date.now() });
    this.emitter.fire([{ type: vscode.FileChangeType.Changed, uri }]);
  }
  delete(uri: vscode.Uri): void {
    this.files.delete(keyOf(uri));
  }
  rename(): void {
    throw vscode.FileSystemError.NoPermissions('proposals cannot be renamed');
  }
}

interface Review {
  cwd: string;
  diffs: FileDiff[];
  uris: vscode.Uri[];
  /** A cut proposal (too large to show in full): shown read-only, never sent back as editedContent. */
  readOnly: boolean;
  /** Whether the read-only explanation was shown already (once per proposal, not per opened file). */
  explained?: boolean;
}

/** What the user is told when a read-only (cut) proposal opens. */
export const READ_ONLY_NOTICE =
  'tandem: this change is too large to show in full, so parts of the proposal are cut and it cannot be edited before it is applied. Allow or Deny it as proposed; what is allowed is the whole change.';

export class DiffReview implements vscode.Disposable {
  private readonly fsp = new ProposedFs();
  private readonly originals = new Map<string, string>();
  /** Texts of applied edits' diffs by URI key, kept while the window lives (they are small next to the chat). */
  private readonly applied = new Map<string, string>();
  private readonly reviews = new Map<string, Review>();
  private readonly disposables: vscode.Disposable[] = [];

  constructor() {
    this.disposables.push(
      vscode.workspace.registerFileSystemProvider(PROPOSED_SCHEME, this.fsp, { isCaseSensitive: true }),
      vscode.workspace.registerTextDocumentContentProvider(EMPTY_SCHEME, { provideTextDocumentContent: () => '' }),
      vscode.workspace.registerTextDocumentContentProvider(ORIGINAL_SCHEME, {
        provideTextDocumentContent: (uri) => this.originals.get(keyOf(uri)) ?? '',
      }),
      vscode.workspace.registerTextDocumentContentProvider(APPLIED_SCHEME, {
        provideTextDocumentContent: (uri) => this.applied.get(keyOf(uri)) ?? '',
      }),
    );
  }

  /**
   * Registers the proposal of an approval (no editor opens yet). `readOnly` for a proposal too large to show in
   * full (isTooLargeToEdit of its reason): it opens read-only and edited() ignores it.
   */
  add(requestId: string, cwd: string, diffs: FileDiff[], opts: { readOnly?: boolean } = {}): void {
    const readOnly = !!opts.readOnly;
    const uris = diffs.map((d, i) => {
      const uri = proposedUri(requestId, i, d.path);
      this.fsp.files.set(keyOf(uri), { data: Buffer.from(d.newText, 'utf8'), mtime: Date.now(), readOnly });
      return uri;
    });
    this.reviews.set(requestId, { cwd, diffs, uris, readOnly });
  }

  /**
   * The original text a proposal document is compared with (empty for a new file) and whether it is read-only,
   * for the per-hunk revert; undefined when the document is no pending proposal.
   */
  originalOf(uri: vscode.Uri): { text: string; readOnly: boolean } | undefined {
    const requestId = requestIdOf(uri);
    const r = requestId ? this.reviews.get(requestId) : undefined;
    const index = Number(uri.query.split('/')[1]);
    const d = r?.diffs[index];
    if (!r || !d || r.uris[index].toString() !== uri.toString()) return undefined;
    return { text: d.oldText ?? '', readOnly: r.readOnly };
  }

  /** Whether the proposal is registered read-only (cut, too large to show in full). */
  isReadOnly(requestId: string): boolean {
    return this.reviews.get(requestId)?.readOnly ?? false;
  }

  has(requestId: string): boolean {
    return this.reviews.has(requestId);
  }

  /**
   * Opens `vscode.diff` for every file of the proposal (or only `onlyPath`). `focus` only when the user asked
   * for it (the chat card's Open diff): an automatic open keeps the focus where the user is, because keystrokes
   * meant for another editor landed in the editable proposal, and Allow would have written them (issue 23 item 2).
   */
  async open(requestId: string, onlyPath?: string, opts: { focus?: boolean } = {}): Promise<void> {
    const r = this.reviews.get(requestId);
    if (!r) throw new Error('This proposal is no longer pending (it was answered or the turn ended).');
    // Opened by itself, the review goes beside the editor the user works in, so that editor stays on screen and
    // keeps the keyboard; in the same group it would hide it and the keystrokes would go nowhere visible.
    const working = vscode.window.activeTextEditor;
    const beside = !opts.focus && !!working && working.document.uri.scheme !== PROPOSED_SCHEME;
    for (let i = 0; i < r.diffs.length; i++) {
      const d = r.diffs[i];
      if (onlyPath && d.path !== onlyPath) continue;
      const abs = path.isAbsolute(d.path) ? d.path : path.join(r.cwd, d.path);
      let left: vscode.Uri;
      if (d.oldText === null) {
        left = vscode.Uri.from({ scheme: EMPTY_SCHEME, path: '/' + d.path.replace(/^\/+/, '') });
      } else if (fs.existsSync(abs)) {
        left = vscode.Uri.file(abs);
      } else {
        // The server saw a file that is gone now: show its text as the server knew it.
        left = vscode.Uri.from({ scheme: ORIGINAL_SCHEME, path: '/' + d.path.replace(/^\/+/, ''), query: `${requestId}/${i}` });
        this.originals.set(keyOf(left), d.oldText);
      }
      const name = path.basename(d.path);
      const access = r.readOnly ? '(read-only: too large to show in full, cannot be edited)' : '(editable)';
      const title = `${name} ${d.oldText === null ? '(new file)' : ''} ↔ proposed by tandem ${access}`.replace(/\s+/g, ' ');
      await vscode.commands.executeCommand('vscode.diff', left, r.uris[i], title, {
        preview: false,
        preserveFocus: !opts.focus,
        ...(beside ? { viewColumn: vscode.ViewColumn.Beside } : {}),
      });
    }
    if (r.readOnly && !r.explained) {
      r.explained = true;
      void vscode.window.showWarningMessage(READ_ONLY_NOTICE);
    }
  }

  /**
   * Opens what a completed edit wrote (`toolCallUpdate.diff`, the change as applied, the user's version when
   * they edited the proposal) as a read-only diff: text before on the left, text written on the right. Both
   * come from the server's report, not from the disk, which may have changed since.
   */
  async openApplied(toolCallId: string, diffs: FileDiff[], onlyPath?: string): Promise<void> {
    for (let i = 0; i < diffs.length; i++) {
      const d = diffs[i];
      if (onlyPath && d.path !== onlyPath) continue;
      const rel = '/' + d.path.replace(/^\/+/, '');
      const left = vscode.Uri.from({ scheme: APPLIED_SCHEME, path: rel, query: `${toolCallId}/${i}/before` });
      const right = vscode.Uri.from({ scheme: APPLIED_SCHEME, path: rel, query: `${toolCallId}/${i}/after` });
      this.applied.set(keyOf(left), d.oldText ?? '');
      this.applied.set(keyOf(right), d.newText);
      const title = `${path.basename(d.path)} ${d.oldText === null ? '(new file)' : ''} ↔ applied by tandem (read-only)`.replace(/\s+/g, ' ');
      await vscode.commands.executeCommand('vscode.diff', left, right, title, { preview: true });
    }
  }

  /**
   * The user's version of a single-file proposal if they edited the right side, else undefined.
   * Reads the open (possibly unsaved) document, falling back to what was saved into the provider.
   */
  edited(requestId: string): string | undefined {
    const r = this.reviews.get(requestId);
    // A cut proposal has no user version: the server would refuse it, and the text shown is not the whole change.
    if (!r || r.readOnly || r.diffs.length !== 1) return undefined;
    const uri = r.uris[0];
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
    const current = doc ? doc.getText() : Buffer.from(this.fsp.files.get(keyOf(uri))?.data ?? new Uint8Array()).toString('utf8');
    return current === r.diffs[0].newText ? undefined : current;
  }

  /** Closes the diff editors of a resolved proposal and forgets it. */
  async close(requestId: string): Promise<void> {
    const r = this.reviews.get(requestId);
    if (!r) return;
    this.reviews.delete(requestId);
    const keys = new Set(r.uris.map((u) => u.toString()));
    // Saving first writes to our in-memory provider only; it prevents a "save changes?" prompt on close.
    // A read-only proposal cannot be dirty in VS Code, and its provider refuses writes: nothing to save there.
    for (const doc of vscode.workspace.textDocuments) {
      if (!r.readOnly && keys.has(doc.uri.toString()) && doc.isDirty) await doc.save();
    }
    const tabs: vscode.Tab[] = [];
    for (const g of vscode.window.tabGroups.all) {
      for (const t of g.tabs) {
        const input = t.input;
        if (input instanceof vscode.TabInputTextDiff && keys.has(input.modified.toString())) tabs.push(t);
        else if (input instanceof vscode.TabInputText && keys.has(input.uri.toString())) tabs.push(t);
      }
    }
    if (tabs.length) await vscode.window.tabGroups.close(tabs, true);
    for (const u of r.uris) this.fsp.files.delete(keyOf(u));
  }

  async closeAll(): Promise<void> {
    for (const id of [...this.reviews.keys()]) await this.close(id);
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
