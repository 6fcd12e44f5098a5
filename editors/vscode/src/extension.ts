// Extension entry point: creates the controller and the chat view, registers the commands (commands.ts) and
// routes the chat webview's messages; deactivate stops the server. Activation starts nothing:
// package.json activates on the chat view and the commands only, the server starts when the chat view is
// first shown or a command needs it, and the first prompt creates the session (see controller.ts).
import * as vscode from 'vscode';
import { ChatViewProvider, type WebviewMessage } from './chatView';
import { registerCommands } from './commands';
import { Controller, msg, ReportedError } from './controller';

let controller: Controller | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel('tandem');
  const c = new Controller(context, output);
  controller = c;

  // Shown, the chat needs the server's models for its header, and a broken setup is reported while the user
  // looks at it rather than after they typed a prompt.
  const view = new ChatViewProvider(context.extensionUri, c.bridge, (m) => void onWebviewMessage(c, m), () => c.ensureStarted());
  context.subscriptions.push(
    output,
    vscode.window.registerWebviewViewProvider(ChatViewProvider.viewId, view, { webviewOptions: { retainContextWhenHidden: true } }),
  );
  const openChat = async (focusInput = true) => {
    await vscode.commands.executeCommand('workbench.view.extension.tandem');
    await vscode.commands.executeCommand(`${ChatViewProvider.viewId}.focus`);
    if (focusInput) view.focusInput();
  };
  // An approval or a question reveals the chat without taking the focus from the editor the user types in.
  c.revealChat = (focusInput = false) => {
    if (view.visible) return;
    if (!focusInput && view.showWithoutFocus()) return;
    void openChat(focusInput);
  };

  registerCommands(context, c, openChat);

  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((e) => {
      // A server not started yet reads the new settings when it starts. The attach settings are arguments of the
      // server process too (--listen, --allow-origin): a running server takes them only by a restart.
      if (c.started && ['tandem.serverPath', 'tandem.configFile', 'tandem.attach'].some((s) => e.affectsConfiguration(s))) {
        void vscode.window.showInformationMessage('tandem settings changed: restarting the server.');
        void c.restart();
      }
    }),
  );
}

async function onWebviewMessage(c: Controller, m: WebviewMessage): Promise<void> {
  try {
    switch (m.type) {
      case 'prompt':
        if (m.editTurnId) return await c.editAndResend(m.editTurnId, m.text, m.images ?? []);
        return await c.prompt(m.text, undefined, m.images ?? []);
      case 'turnAction':
        return await c.turnAction(m.action, m.turnId);
      case 'cancelEdit':
        return c.cancelEdit();
      case 'pickMention': {
        const mention = await c.pickMention();
        c.bridge.send({ type: 'mention', mention: mention ?? null });
        return;
      }
      case 'listCommands':
        return await c.listCommands();
      case 'openSession':
        return await c.openSession(m.sessionId);
      case 'steer':
        return await c.steer(m.text);
      case 'stop':
        return await c.stop();
      case 'approve':
        return await c.approve(m.requestId, m.decision, m.message);
      case 'answer':
        return await c.answer(m.requestId, m.answer);
      case 'openDiff':
        return await c.diffs.open(m.requestId, m.path, { focus: true });
      case 'openAppliedDiff': {
        const tool = c.state.toolByCallId(m.toolCallId);
        if (!tool?.diff?.length) throw new Error('That edit has no recorded diff any more (the chat was reset).');
        return await c.diffs.openApplied(tool.toolCallId, tool.diff, m.path);
      }
      case 'openPlan':
        return await c.plans.show(m.requestId);
      case 'command':
        if (m.command.startsWith('tandem.')) await vscode.commands.executeCommand(m.command);
        return;
    }
  } catch (err) {
    if (!(err instanceof ReportedError)) c.showError(msg(err));
  }
}


export async function deactivate(): Promise<void> {
  await controller?.dispose();
  controller = undefined;
}
