// The extension's commands (palette, keybindings, editor-title and context-menu actions on the diff): each is a
// thin wrapper over the controller that reports a failure with its cause instead of failing silently. Kept apart
// from extension.ts so activation stays small and the command set is in one place (package.json lists the same
// ids as activation events; test/unit/manifest.test.ts keeps the two in step).
import * as vscode from 'vscode';
import { Controller, currentSelectionContext, msg, ReportedError } from './controller';
import { PROPOSED_SCHEME } from './diffReview';
import { hunkAt, hunks, splitLines } from './hunks';
import type { SelectionContext } from './promptContext';
import type { Decision } from './protocol';
import { askQuestion } from './questions';

export function registerCommands(context: vscode.ExtensionContext, c: Controller, openChat: (focusInput?: boolean) => Promise<void>): void {
  // Every command reports failures with the cause instead of failing silently.
  const register = (id: string, fn: (...args: unknown[]) => unknown) =>
    context.subscriptions.push(
      vscode.commands.registerCommand(id, async (...args: unknown[]) => {
        try {
          await fn(...args);
        } catch (err) {
          if (!(err instanceof ReportedError)) c.showError(msg(err));
        }
      }),
    );

  register('tandem.openChat', () => openChat(true));
  register('tandem.prompt', async () => {
    const selection = currentSelectionContext();
    const running = c.state.meta.turn !== 'idle';
    const text = await vscode.window.showInputBox({
      title: running ? 'Steer the running tandem turn' : 'Prompt tandem',
      prompt: selection && !running ? `The selection from ${selection.path} (${selectionLines(selection)}) is attached.` : undefined,
      placeHolder: running ? 'Guidance injected at the next safe point' : 'What should tandem do?',
      ignoreFocusOut: true,
    });
    if (!text?.trim()) return;
    if (running) await c.steer(text.trim());
    else {
      void openChat(false);
      await c.prompt(text.trim(), selection);
    }
  });
  register('tandem.steer', async () => {
    const text = await vscode.window.showInputBox({ title: 'Steer the running tandem turn', placeHolder: 'Guidance injected at the next safe point', ignoreFocusOut: true });
    if (text?.trim()) await c.steer(text.trim());
  });
  register('tandem.stop', () => c.stop());
  register('tandem.retry', () => c.retry());
  register('tandem.switchModel', () => c.pickModel());
  register('tandem.setMode', () => c.pickMode());
  register('tandem.sessions', () => c.pickSession());
  register('tandem.resumeLast', () => c.resumeLast());
  register('tandem.toggleNetwork', () => c.toggleNetwork());
  register('tandem.configureModel', () => c.configureModel());
  register('tandem.newSession', () => c.newSession());
  register('tandem.restartServer', () => c.restart());
  register('tandem.showLog', () => c.showLog());
  register('tandem.shareSession', () => c.shareSession());
  register('tandem.mcpServers', () => c.pickMcpServer());
  register('tandem.trustHooks', () => c.trustHooks());
  register('tandem.showHooks', () => c.showHooks());
  // A turn's actions: on the turn given (the chat's buttons pass its id), else on the last turn of the session.
  const turnArg = (arg: unknown) => (typeof arg === 'string' && arg ? arg : undefined);
  register('tandem.showTurnChanges', (arg?: unknown) => c.showTurnChanges(turnArg(arg)));
  register('tandem.undoTurn', (arg?: unknown) => c.undoTurn(turnArg(arg)));
  register('tandem.editAndResend', (arg?: unknown) => c.startEdit(turnArg(arg)));
  // Without a turn the fork asks where to fork (the whole conversation, or before any turn).
  register('tandem.forkSession', (arg?: unknown) => c.forkSession(turnArg(arg)));
  register('tandem.checkpoints', () => c.pickCheckpoint());

  const decide = (decision: Decision) => async (arg?: unknown) => {
    const tool = c.resolveApproval(arg);
    if (!tool) throw new Error('No approval is pending.');
    await c.approve(tool.approval!.requestId, decision);
  };
  register('tandem.approve', decide('once'));
  register('tandem.approveAlwaysTool', decide('alwaysTool'));
  register('tandem.approveAlwaysCommand', decide('alwaysCommand'));
  register('tandem.deny', async (arg?: unknown) => {
    const tool = c.resolveApproval(arg);
    if (!tool) throw new Error('No approval is pending.');
    const reason = await vscode.window.showInputBox({
      title: `Deny: ${tool.title}`,
      prompt: 'Optional reason, sent to the agent. Enter to deny, Escape to cancel.',
      ignoreFocusOut: true,
    });
    if (reason === undefined) return;
    await c.deny(tool.approval!.requestId, reason.trim());
  });
  // Per-hunk reject in the review: puts the original lines of the change under the cursor back into the
  // proposal, as an edit of the proposal document (the user's deliberate act; Allow then writes their version).
  // VS Code's own Revert Block arrow in the diff gutter does the same; this is the same act from the keyboard,
  // the editor title and the context menu. Accepting a hunk is leaving it as it is.
  register('tandem.revertHunk', async () => {
    const ed = vscode.window.activeTextEditor;
    const doc = ed?.document;
    if (!ed || !doc || doc.uri.scheme !== PROPOSED_SCHEME) {
      throw new Error('Revert This Change works in a tandem proposal: click into the right side of its diff, on the change to revert.');
    }
    const original = c.diffs.originalOf(doc.uri);
    if (!original) throw new Error('This proposal is no longer pending (it was answered or the turn ended).');
    if (original.readOnly) throw new Error('This proposal is too large to show in full and cannot be edited: Allow or Deny it as a whole.');
    const list = hunks(original.text, doc.getText());
    const h = hunkAt(list, ed.selection.active.line);
    if (!h) throw new Error('The cursor is on an unchanged line: put it on a change (a highlighted block) to revert that change.');
    const restored = splitLines(original.text).slice(h.origStart, h.origStart + h.origCount).join('');
    await ed.edit((b) => b.replace(new vscode.Range(h.newStart, 0, h.newStart + h.newCount, 0), restored));
  });
  register('tandem.answer', async () => {
    const q = c.state.pendingQuestions()[0];
    if (!q) throw new Error('No question is pending.');
    if (q.plan !== undefined) {
      await c.plans.show(q.requestId);
      const pick = await vscode.window.showQuickPick(['accept', 'reject'], { title: 'Answer the plan' });
      if (pick) await c.answer(q.requestId, pick);
      return;
    }
    askQuestion(q.question, q.choices, (a) => void c.answer(q.requestId, a).catch((err) => c.showError(msg(err))));
  });

}

function selectionLines(s: SelectionContext): string {
  return s.startLine === s.endLine ? `line ${s.startLine}` : `lines ${s.startLine}-${s.endLine}`;
}
