// "Show changes" of a turn: everything `turn/diff` reports, in VS Code's multi-file diff editor (the
// `vscode.changes` command), both sides served read-only from memory by a TextDocumentContentProvider of the
// `tandem-turn` scheme, so what is shown is what the server recorded, not the disk (which may have changed since).
// Where the multi-diff editor is missing (an older VS Code) each file opens in its own `vscode.diff`. Binary
// files, files whose content was not captured and folders have no text to compare: they are listed in a message.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { planTurnChanges, type TurnChangeNote } from './checkpoints';
import type { TurnFileDiff } from './protocol';

export const TURN_SCHEME = 'tandem-turn';

/** What show() did: the editor it opened (or none) and the files it listed instead of diffing. */
export interface ShownChanges {
  opened: 'changes' | 'diff' | 'none';
  notes: TurnChangeNote[];
}

export class TurnChanges implements vscode.Disposable {
  /** Texts by URI (path and query): both sides of every shown diff, kept while the window lives. */
  private readonly texts = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  private readonly registration: vscode.Disposable;

  constructor() {
    this.registration = vscode.workspace.registerTextDocumentContentProvider(TURN_SCHEME, {
      onDidChange: this.changed.event,
      provideTextDocumentContent: (uri) => this.texts.get(`${uri.path}?${uri.query}`) ?? '',
    });
  }

  /** `tandem-turn:/<path>?<turnId>/<index>/<side>`: the tab shows the file's path, the query keeps it unique. */
  private uri(turnId: string, index: number, side: 'before' | 'after', file: string, text: string): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: TURN_SCHEME, path: '/' + file.replace(/^\/+/, ''), query: `${turnId}/${index}/${side}` });
    const key = `${uri.path}?${uri.query}`;
    const had = this.texts.get(key);
    this.texts.set(key, text);
    // Shown again (the running turn changed more): an open document of the same URI reads the new text.
    if (had !== undefined && had !== text) this.changed.fire(uri);
    return uri;
  }

  /** Opens the diffs of a turn (`label` names it in the title); `cwd` resolves the paths the server reports. */
  async show(turnId: string, label: string, cwd: string, files: TurnFileDiff[]): Promise<ShownChanges> {
    const { diffs, notes } = planTurnChanges(files);
    let opened: ShownChanges['opened'] = 'none';
    if (diffs.length) {
      const sides = diffs.map((d, i) => ({
        d,
        resource: vscode.Uri.file(path.isAbsolute(d.path) ? d.path : path.join(cwd, d.path)),
        // A missing side (added or deleted file) is left out, as the multi-diff editor expects.
        before: d.oldText === null ? undefined : this.uri(turnId, i, 'before', d.path, d.oldText),
        after: d.newText === null ? undefined : this.uri(turnId, i, 'after', d.path, d.newText),
      }));
      const title = `tandem: changes of ${label}`;
      try {
        await vscode.commands.executeCommand('vscode.changes', title, sides.map((s) => [s.resource, s.before, s.after]));
        opened = 'changes';
      } catch {
        // No multi-diff editor: one diff editor per file, an empty side for an added or deleted file.
        for (const [i, s] of sides.entries()) {
          const before = s.before ?? this.uri(turnId, i, 'before', s.d.path, '');
          const after = s.after ?? this.uri(turnId, i, 'after', s.d.path, '');
          const what = s.d.change === 'added' ? ' (added)' : s.d.change === 'deleted' ? ' (deleted)' : '';
          await vscode.commands.executeCommand('vscode.diff', before, after, `${path.basename(s.d.path)}${what} ↔ ${label} (tandem, read-only)`, { preview: false });
        }
        opened = 'diff';
      }
    }
    if (notes.length) {
      const list = notes.map((n) => `${n.path} (${n.note})`).join('; ');
      void vscode.window.showInformationMessage(`tandem: ${label} also changed ${notes.length === 1 ? 'a path' : `${notes.length} paths`} that ${notes.length === 1 ? 'has' : 'have'} no text diff: ${list}.`);
    } else if (!diffs.length) {
      void vscode.window.showInformationMessage(`tandem: ${label} changed no files.`);
    }
    return { opened, notes };
  }

  dispose(): void {
    this.registration.dispose();
    this.changed.dispose();
  }
}
