// Native UI for `questionAsked`: a QuickPick of the choices (plus a free-text answer) or an input box, and
// for plans a Markdown preview with Accept / Reject / Comment. The chat card offers the same answers; whichever
// answers first wins and the other is withdrawn through the returned handle.
import * as vscode from 'vscode';

export const PLAN_SCHEME = 'tandem-plan';

export class PlanDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly plans = new Map<string, string>();
  private readonly reg = vscode.workspace.registerTextDocumentContentProvider(PLAN_SCHEME, this);

  uri(requestId: string): vscode.Uri {
    return vscode.Uri.from({ scheme: PLAN_SCHEME, path: `/${requestId}/plan.md` });
  }
  set(requestId: string, plan: string): vscode.Uri {
    this.plans.set(requestId, plan);
    return this.uri(requestId);
  }
  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.plans.get(uri.path.split('/')[1]) ?? '';
  }
  async show(requestId: string): Promise<void> {
    const uri = this.uri(requestId);
    try {
      await vscode.commands.executeCommand('markdown.showPreview', uri);
    } catch {
      // Without the built-in Markdown extension, the source is still readable.
      await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(uri), { preview: true });
    }
  }
  dispose(): void {
    this.reg.dispose();
  }
}

export interface QuestionHandle {
  cancel(): void;
}

const OTHER = '$(edit) Type another answer…';

/** Asks a plain question; calls onAnswer once with the user's answer (never on cancel). */
export function askQuestion(question: string, choices: string[] | undefined, onAnswer: (a: string) => void): QuestionHandle {
  let done = false;
  const finish = (a: string | undefined) => {
    if (done || a === undefined) return;
    done = true;
    onAnswer(a);
  };
  if (choices?.length) {
    const qp = vscode.window.createQuickPick();
    qp.title = 'tandem asks';
    qp.placeholder = question;
    qp.ignoreFocusOut = true;
    qp.items = [...choices.map((label) => ({ label })), { label: OTHER }];
    qp.onDidAccept(async () => {
      const picked = qp.selectedItems[0]?.label;
      qp.hide();
      if (picked === OTHER) finish(await vscode.window.showInputBox({ title: 'tandem asks', prompt: question, ignoreFocusOut: true }));
      else finish(picked);
    });
    qp.onDidHide(() => qp.dispose());
    qp.show();
    return { cancel: () => ((done = true), qp.hide()) };
  }
  const cts = new vscode.CancellationTokenSource();
  void vscode.window
    .showInputBox({ title: 'tandem asks', prompt: question, ignoreFocusOut: true }, cts.token)
    .then(finish);
  return { cancel: () => ((done = true), cts.cancel()) };
}

/** Shows a plan as a Markdown preview and asks Accept / Reject / Comment in a notification. */
export function reviewPlan(plans: PlanDocuments, requestId: string, plan: string, onAnswer: (a: string) => void): QuestionHandle {
  let done = false;
  plans.set(requestId, plan);
  void plans.show(requestId);
  void vscode.window.showInformationMessage('tandem proposes a plan (open in the preview).', 'Accept', 'Reject', 'Comment…').then(async (pick) => {
    if (done || !pick) return;
    if (pick === 'Comment…') {
      const c = await vscode.window.showInputBox({ title: 'Comment on the plan', prompt: 'Your comment is sent to the agent instead of accept/reject', ignoreFocusOut: true });
      if (c === undefined || done) return;
      done = true;
      onAnswer(c);
      return;
    }
    done = true;
    onAnswer(pick === 'Accept' ? 'accept' : 'reject');
  });
  return { cancel: () => (done = true) };
}
