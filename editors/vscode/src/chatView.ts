// The chat webview view (`tandem.chat` in the tandem activity-bar container): builds its HTML with a strict
// CSP, wires the ready handshake to the ViewBridge, forwards the webview's messages to the controller and
// reports when VS Code first shows the view (it resolves a view only when it becomes visible).
// The HTML says "Loading" until the script's first snapshot replaces it: a webview shown for the first time
// (a palette prompt in a window whose chat was never open) takes 1.5-3.5 s to boot, and was blank meanwhile.
import * as crypto from 'node:crypto';
import * as vscode from 'vscode';
import type { ViewBridge } from './viewBridge';

export type WebviewMessage =
  | { type: 'ready' }
  /** `editTurnId`: the prompt box held an Edit & resend of that turn (ChatMeta.editing): rewind, then prompt. */
  | { type: 'prompt'; text: string; images?: { mimeType: string; data: string }[]; editTurnId?: string }
  /** A turn's button in the chat: Show changes, Undo, Edit & resend, Fork from here. */
  | { type: 'turnAction'; action: import('./checkpoints').TurnAction; turnId: string }
  | { type: 'cancelEdit' }
  | { type: 'pickMention' }
  /** A fresh `/` at the start of the prompt box: the slash commands for its completion (answered with `commands`). */
  | { type: 'listCommands' }
  /** A command block's button (the session `/fork` made): switch the chat to that session. */
  | { type: 'openSession'; sessionId: string }
  | { type: 'steer'; text: string }
  | { type: 'stop' }
  | { type: 'approve'; requestId: string; decision: import('./protocol').Decision; message?: string }
  | { type: 'answer'; requestId: string; answer: string }
  | { type: 'openDiff'; requestId: string; path?: string }
  | { type: 'openPlan'; requestId: string }
  | { type: 'openAppliedDiff'; toolCallId: string; path?: string }
  | { type: 'command'; command: string };

export class ChatViewProvider implements vscode.WebviewViewProvider {
  static readonly viewId = 'tandem.chat';
  private view?: vscode.WebviewView;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly bridge: ViewBridge,
    private readonly onMessage: (m: WebviewMessage) => void,
    private readonly onResolved: () => void = () => {},
  ) {}

  get visible(): boolean {
    return !!this.view?.visible;
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const dist = vscode.Uri.joinPath(this.extensionUri, 'dist');
    const media = vscode.Uri.joinPath(this.extensionUri, 'media');
    view.webview.options = { enableScripts: true, localResourceRoots: [dist, media] };
    this.bridge.attach((m) => view.webview.postMessage(m));
    view.webview.onDidReceiveMessage((m: WebviewMessage) => {
      if (m.type === 'ready') this.bridge.onReady();
      else this.onMessage(m);
    });
    view.onDidDispose(() => {
      if (this.view === view) {
        this.view = undefined;
        this.bridge.detach();
      }
    });
    view.webview.html = this.html(view.webview, dist, media);
    this.onResolved();
  }

  /**
   * Shows a view VS Code resolved already without moving the focus (false when it never was: only the
   * container command can show it then, and that focuses it).
   */
  showWithoutFocus(): boolean {
    if (!this.view) return false;
    this.view.show(true);
    return true;
  }

  /** Focuses the prompt box (after the view is shown). */
  focusInput(): void {
    this.bridge.send({ type: 'focus' });
  }

  private html(webview: vscode.Webview, dist: vscode.Uri, media: vscode.Uri): string {
    const nonce = crypto.randomBytes(16).toString('base64');
    const script = webview.asWebviewUri(vscode.Uri.joinPath(dist, 'webview.js'));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.css'));
    const csp = [
      `default-src 'none'`,
      `style-src ${webview.cspSource}`,
      `img-src ${webview.cspSource} data: https:`,
      `font-src ${webview.cspSource}`,
      `script-src 'nonce-${nonce}'`,
    ].join('; ');
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>tandem</title>
</head>
<body>
<header id="bar">
  <button id="model" class="chip" title="Switch model" data-testid="model">—</button>
  <button id="mode" class="chip" title="Set permission mode" data-testid="mode">—</button>
  <button id="network" class="chip" title="Network access of shell commands (click to switch)" data-testid="network">net: off</button>
  <button id="mcp" class="chip" title="MCP servers" data-testid="mcp" hidden></button>
  <span id="turn" class="turn" data-testid="turn-state">…</span>
  <button id="new" class="chip" title="New session" data-testid="new-session">+</button>
</header>
<div id="banner" class="banner" data-testid="banner" hidden></div>
<div id="resume" class="resume" hidden><span id="resume-title"></span> <button id="resume-last" data-testid="resume-last" type="button">Resume last session</button></div>
<main id="log" data-testid="log" aria-live="polite"><div class="notice" data-testid="loading">Loading the tandem chat…</div></main>
<footer>
  <div id="ended" class="ended" data-testid="turn-ended"></div>
  <div id="usage" class="usage" data-testid="usage"></div>
  <div id="context" class="context" data-testid="context-gauge" hidden><div class="gauge"><div id="gauge-fill" class="gauge-fill"></div></div><span id="context-text"></span></div>
  <div id="attachments" class="attachments" data-testid="attachments"></div>
  <details id="plan" class="plan-panel" data-testid="plan" open hidden><summary><span class="plan-title">Plan</span> <span id="plan-count" class="plan-count" data-testid="plan-count"></span> <span id="plan-current" class="plan-current"></span></summary><ol id="plan-list" class="plan-list"></ol></details>
  <div id="editing" class="editing" data-testid="editing" hidden><span>Editing a sent prompt: sending undoes that turn and every later one (files and conversation), then sends this text.</span> <button id="cancel-edit" class="secondary" data-testid="cancel-edit" type="button">Cancel</button></div>
  <div id="slash-menu" class="slash-menu" role="listbox" aria-label="Slash commands" data-testid="slash-menu" hidden></div>
  <div class="composer">
    <textarea id="prompt" rows="3" data-testid="prompt" aria-label="Prompt" role="combobox" aria-autocomplete="list" aria-expanded="false" aria-controls="slash-menu" aria-haspopup="listbox"></textarea>
    <div class="composer-buttons">
      <button id="send" data-testid="send" type="button">Send</button>
      <button id="stop" data-testid="stop" class="danger" type="button" disabled>Stop</button>
      <button id="attach" data-testid="attach-image" class="secondary" type="button" title="Attach an image (or paste one into the box)">Image…</button>
      <input id="image-file" type="file" accept="image/png,image/jpeg,image/gif,image/webp" multiple hidden>
    </div>
  </div>
</footer>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
  }
}
