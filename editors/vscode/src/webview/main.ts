// The chat webview's script (bundled to dist/webview.js): renders the extension's ChatState snapshot and
// updates, and turns clicks and keys into messages for the extension. It keeps no conversation state of
// its own beyond the draft, so a reloaded view is rebuilt from the extension after the `ready` handshake.
import { md } from '../markdown';
import { isTurnStart, type ChatItem, type ChatMeta } from '../chatState';
import type { WebviewMessage } from '../chatView';
import type { HostMessage } from '../viewBridge';
import { planView } from '../plan';
import type { TurnAction } from '../checkpoints';
import type { Decision } from '../protocol';
import { contextGauge, diffStat, isTooLargeToEdit } from '../promptContext';
import { mcpApprovalText, mcpSummary } from '../mcp';
import { SlashCompletion, SOURCE_LABELS } from '../slash';
import { hookLine } from '../hooks';

declare function acquireVsCodeApi(): { postMessage(m: WebviewMessage): void; getState(): unknown; setState(s: unknown): void };
const vscode = acquireVsCodeApi();

let items: ChatItem[] = [];
let meta: ChatMeta | undefined;
/** The Edit & resend whose prompt the box was given (ChatMeta.editing.id), so a snapshot does not give it again. */
let editId: number | undefined;

const $ = <T extends HTMLElement>(sel: string) => document.querySelector(sel) as T;
const log = $('#log');
const input = $<HTMLTextAreaElement>('#prompt');
const sendBtn = $<HTMLButtonElement>('#send');
const stopBtn = $<HTMLButtonElement>('#stop');

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function button(label: string, testid: string, onClick: () => void, cls = ''): HTMLButtonElement {
  const b = el('button', { 'data-testid': testid, class: cls, type: 'button' }, label);
  b.addEventListener('click', onClick);
  return b;
}

const STATUS_LABEL: Record<string, string> = {
  pending: 'pending',
  awaitingApproval: 'awaiting approval',
  running: 'running',
  completed: 'completed',
  failed: 'failed',
  denied: 'denied',
  interrupted: 'interrupted',
};

/** An item as shown: its own element, with the turn's actions when it is the first item of its turn. */
function renderItem(item: ChatItem, index: number): HTMLElement {
  const node = renderContent(item);
  if (meta?.sessionId && meta.sessionStore && isTurnStart(items, index)) node.append(turnActions(item));
  return node;
}

/**
 * The actions of a turn, under its first item: Show changes (turn/diff), Undo (session/rewind), Edit & resend (on
 * a prompt only) and Fork from here (session/fork). The extension asks what to restore and handles conflicts.
 */
function turnActions(item: ChatItem): HTMLElement {
  const turnId = item.turnId!;
  const act = (action: TurnAction) => () => vscode.postMessage({ type: 'turnAction', action, turnId });
  const row = el('div', { class: 'turn-actions', 'data-testid': 'turn-actions', 'data-turn': turnId });
  row.append(
    button('Show changes', 'turn-show-changes', act('showChanges'), 'link'),
    button('Undo', 'turn-undo', act('undo'), 'link'),
  );
  if (item.type === 'user' && !item.steer) row.append(button('Edit & resend', 'turn-edit', act('edit'), 'link'));
  row.append(button('Fork from here', 'turn-fork', act('fork'), 'link'));
  row.querySelectorAll('button').forEach((b) => (b.title = TURN_ACTION_TITLES[b.dataset.testid!] ?? ''));
  return row;
}

const TURN_ACTION_TITLES: Record<string, string> = {
  'turn-show-changes': 'Every file this turn changed, in a multi-file diff',
  'turn-undo': 'Undo this turn and every later one: put back the files, drop them from the conversation, or both',
  'turn-edit': 'Put this prompt in the box: sending it undoes this turn (files and conversation) and sends the edited text',
  'turn-fork': 'A new session with the conversation before this turn (files are not touched)',
};

function renderContent(item: ChatItem): HTMLElement {
  switch (item.type) {
    case 'user':
      return el(
        'div',
        { class: 'msg user' + (item.steer ? ' steer' : ''), 'data-testid': 'user-message' },
        el('span', { class: 'user-text' }, item.steer ? `Steer: ${item.text}` : item.text),
      );
    case 'assistant': {
      const div = el('div', { class: 'msg assistant' + (item.streaming ? ' streaming' : ''), 'data-testid': 'assistant-message' });
      const det = el('details', { class: 'reasoning', 'data-testid': 'reasoning' }, el('summary', {}, 'Reasoning'));
      det.append(el('div', { class: 'reasoning-body' }, item.reasoning));
      det.hidden = !item.reasoning;
      div.append(det);
      const body = el('div', { class: 'markdown' });
      div.append(body);
      if (item.streaming) {
        // Rendered piece by piece as it streams (see StreamedMarkdown); the finished message is rendered whole.
        const stream = new StreamedMarkdown(body);
        streams.set(div, stream);
        stream.append(item.text);
      } else {
        body.innerHTML = md.render(item.text);
      }
      return div;
    }
    case 'notice':
      return el('div', { class: `notice notice-${item.kind}`, 'data-testid': 'notice' }, item.text);
    case 'question':
      return renderQuestion(item);
    case 'tool':
      return renderTool(item);
    case 'command':
      return renderCommand(item);
    case 'hook':
      return renderHook(item);
  }
}

/**
 * A slash command that ran without a turn: the text as typed on a prompt line, then the server's Markdown output
 * (or its refusal); `/fork`'s block offers to open the new session.
 */
function renderCommand(c: Extract<ChatItem, { type: 'command' }>): HTMLElement {
  const box = el('div', { class: `msg command${c.error ? ' command-failed' : ''}`, 'data-testid': 'command-result', 'data-command': c.name });
  box.append(el('div', { class: 'command-prompt', 'data-testid': 'command-prompt' }, el('span', { class: 'badge command-badge' }, 'command'), el('code', {}, c.text)));
  if (c.output !== undefined && c.output !== '') {
    const body = el('div', { class: 'markdown command-output', 'data-testid': 'command-output' });
    body.innerHTML = md.render(c.output);
    box.append(body);
  }
  if (c.error !== undefined) box.append(el('div', { class: 'command-error', 'data-testid': 'command-error' }, c.error));
  if (c.sessionId) {
    const sessionId = c.sessionId;
    box.append(el('div', { class: 'actions' }, button('Open the new session', 'open-command-session', () => vscode.postMessage({ type: 'openSession', sessionId }))));
  }
  return box;
}

/** A hook run, as one compact line of its turn: `hook PreToolUse `cmd` — exit 0, 3 ms` (styled by its outcome). */
function renderHook(h: Extract<ChatItem, { type: 'hook' }>): HTMLElement {
  const v = hookLine(h);
  return el(
    'div',
    { class: `hook hook-${v.outcome}`, 'data-testid': 'hook-line', 'data-outcome': v.outcome },
    el('span', { class: 'hook-label' }, 'hook'),
    ' ',
    el('span', { class: 'hook-event' }, v.event),
    ' ',
    el('code', { class: 'hook-command' }, v.command),
    el('span', { class: 'hook-result' }, ` — ${v.result}`),
  );
}

/**
 * Markdown of a message still streaming, rendered incrementally. The text is cut at blank lines outside code
 * fences: everything before the last such cut is rendered once into frozen blocks and never again, and only the
 * unfinished tail after it is re-rendered when a chunk arrives. Re-rendering the whole message per chunk cost
 * 3.9 s of CPU for a 2,000-line answer. A cut can render a construct that spans a blank line (a loose list, a
 * reference link defined later) slightly differently while streaming; the finished message (assistantMessage)
 * is rendered whole, so what stays on screen is exact.
 */
class StreamedMarkdown {
  private text = '';
  /** Text before this offset is rendered in frozen blocks. */
  private frozen = 0;
  /** Complete lines before this offset were scanned for fences and blank lines. */
  private scanned = 0;
  private fence: string | undefined;
  /** Where the open fence's first line starts, and where its body (the line after it) starts. */
  private fenceStart = -1;
  private fenceBody = -1;
  /**
   * The open fence shown as it streams: a <pre><code> whose complete lines are appended as text nodes and whose
   * unfinished last line is one text node updated in place. A long code block has no blank line to cut at, so
   * without this its whole text was rendered again for every chunk.
   */
  private live?: { code: HTMLElement; upTo: number; partial: Text; piece: HTMLElement; pieceLines: number };
  private readonly tail: HTMLElement;

  constructor(private readonly root: HTMLElement) {
    this.tail = el('div', { class: 'md-tail' });
    root.append(this.tail);
  }

  append(chunk: string): void {
    this.text += chunk;
    let cut = this.frozen;
    for (;;) {
      const nl = this.text.indexOf('\n', this.scanned);
      if (nl < 0) break;
      const start = this.scanned;
      const line = this.text.slice(start, nl);
      this.scanned = nl + 1;
      const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
      if (this.fence) {
        if (marker && marker[0] === this.fence[0] && marker.length >= this.fence.length && line.trim() === marker) {
          // The fence is complete: it is frozen (rendered once, whole) with what came before it.
          this.fence = undefined;
          this.fenceStart = -1;
          cut = this.scanned;
        }
      } else if (marker) {
        // A fence starts a new block (it may interrupt a paragraph): what came before it can be frozen.
        this.fence = marker;
        this.fenceStart = start;
        this.fenceBody = this.scanned;
        cut = start;
      } else if (line.trim() === '') {
        cut = this.scanned;
      }
    }
    if (cut > this.frozen) {
      const block = el('div', { class: 'md-block' });
      block.innerHTML = md.render(this.text.slice(this.frozen, cut));
      this.root.insertBefore(block, this.tail);
      this.frozen = cut;
      this.live = undefined;
    }
    if (this.fence && this.fenceStart === this.frozen) {
      if (!this.live) {
        const code = el('code');
        const piece = el('span', { class: 'code-piece' });
        const partial = document.createTextNode('');
        code.append(piece, partial);
        this.tail.replaceChildren(el('pre', {}, code));
        this.live = { code, upTo: this.fenceBody, partial, piece, pieceLines: 0 };
      }
      const live = this.live;
      if (this.scanned > live.upTo) {
        // Lines go into pieces of LIVE_PIECE_LINES lines, each its own block: a new line then lays out only the
        // last piece, not the whole block (one growing text run cost the browser a relayout of all of it).
        if (live.pieceLines >= LIVE_PIECE_LINES) {
          live.piece = el('span', { class: 'code-piece' });
          live.code.insertBefore(live.piece, live.partial);
          live.pieceLines = 0;
        }
        const added = this.text.slice(live.upTo, this.scanned);
        live.piece.append(added);
        live.pieceLines += added.split('\n').length - 1;
        live.upTo = this.scanned;
      }
      live.partial.data = this.text.slice(this.scanned);
      return;
    }
    this.live = undefined;
    this.tail.innerHTML = md.render(this.text.slice(this.frozen));
  }
}

/** Lines per block of a code fence shown while it streams (see StreamedMarkdown.live). */
const LIVE_PIECE_LINES = 50;

/** The incremental renderer of each streaming assistant message node. */
const streams = new WeakMap<Element, StreamedMarkdown>();

function renderQuestion(q: Extract<ChatItem, { type: 'question' }>): HTMLElement {
  const card = el('div', { class: 'card question', 'data-testid': 'question-card' });
  card.append(el('div', { class: 'card-head' }, el('span', { class: 'badge' }, q.plan ? 'plan' : 'question'), el('span', { class: 'title' }, q.question)));
  if (q.plan) {
    const body = el('div', { class: 'markdown plan' });
    body.innerHTML = md.render(q.plan);
    card.append(body);
  }
  if (q.answer !== undefined) {
    card.append(el('div', { class: 'resolved' }, `Answered: ${q.answer}`));
    return card;
  }
  if (q.withdrawn) {
    card.append(el('div', { class: 'resolved' }, 'No longer waiting for an answer.'));
    return card;
  }
  const row = el('div', { class: 'actions' });
  if (q.plan) row.append(button('Open preview', 'open-plan', () => vscode.postMessage({ type: 'openPlan', requestId: q.requestId }), 'secondary'));
  for (const c of q.choices ?? []) {
    row.append(button(c, 'choice', () => vscode.postMessage({ type: 'answer', requestId: q.requestId, answer: c })));
  }
  card.append(row);
  const free = el('input', { type: 'text', placeholder: q.plan ? 'Or comment on the plan…' : 'Type an answer…', 'data-testid': 'answer-input' }) as HTMLInputElement;
  const send = () => free.value.trim() && vscode.postMessage({ type: 'answer', requestId: q.requestId, answer: free.value.trim() });
  free.addEventListener('keydown', (ev) => ev.key === 'Enter' && send());
  card.append(el('div', { class: 'actions' }, free, button('Answer', 'answer', send, 'secondary')));
  return card;
}

/** A tool title's `code` spans as <code> (the server writes "Run `cargo test`"); the backticks themselves go. */
function titleParts(title: string): (Node | string)[] {
  return title.split(/(`[^`]+`)/).filter(Boolean).map((p) => (p.length > 2 && p.startsWith('`') && p.endsWith('`') ? el('code', {}, p.slice(1, -1)) : p));
}

function renderTool(t: Extract<ChatItem, { type: 'tool' }>): HTMLElement {
  const card = el('div', { class: `card tool status-${t.status}`, 'data-testid': 'tool-card', 'data-tool': t.name, 'data-status': t.status });
  card.append(
    el(
      'div',
      { class: 'card-head' },
      el('span', { class: `badge kind-${t.kind}`, 'data-testid': 'tool-kind' }, t.kind),
      // An MCP tool says which server runs it (outside tandem's sandbox).
      ...(t.mcp ? [el('span', { class: 'badge mcp', 'data-testid': 'tool-mcp-server', title: `Tool ${t.mcp.tool} of the MCP server ${t.mcp.server}` }, `MCP ${t.mcp.server}`)] : []),
      el('span', { class: 'title', 'data-testid': 'tool-title' }, ...titleParts(t.title)),
      el('span', { class: 'status', 'data-testid': 'tool-status' }, STATUS_LABEL[t.status] ?? t.status),
    ),
  );
  const a = t.approval;
  if (a) {
    const box = el('div', { class: 'approval', 'data-testid': 'approval' });
    if (a.mcp) {
      // Who runs what, and the arguments in full: the server runs the tool outside tandem's sandbox.
      const text = mcpApprovalText(a.mcp, t.arguments);
      box.append(el('div', { class: 'mcp-heading', 'data-testid': 'approval-mcp' }, ...titleParts(text.heading)));
      box.append(el('pre', { class: 'mcp-arguments', 'data-testid': 'approval-arguments' }, text.arguments));
    }
    box.append(el('div', { class: 'reason' }, a.reason));
    // A cut proposal opens read-only: say so where the user decides, not only in the diff editor.
    const readOnly = !!a.diff?.length && isTooLargeToEdit(a.reason);
    if (readOnly && !a.resolved) {
      box.append(
        el('div', { class: 'read-only-note', 'data-testid': 'approval-read-only' }, 'This change cannot be edited before it is applied: its diff opens read-only. Allow or Deny it as proposed.'),
      );
    }
    if (a.command !== undefined) {
      box.append(el('div', { class: 'kv' }, el('span', {}, 'Command'), el('code', { 'data-testid': 'approval-command' }, a.command)));
      if (a.cwd) box.append(el('div', { class: 'kv' }, el('span', {}, 'Directory'), el('code', { 'data-testid': 'approval-cwd' }, a.cwd)));
    }
    for (const d of a.diff ?? []) {
      const row = el('div', { class: 'diff-file' }, el('code', {}, d.path + (d.oldText === null ? ' (new file)' : '')));
      // Only a pending proposal has a diff editor to open; afterwards the unified diff below remains.
      if (!a.resolved) row.append(button(readOnly ? 'Open diff (read-only)' : 'Open diff', 'open-diff', () => vscode.postMessage({ type: 'openDiff', requestId: a.requestId, path: d.path }), 'secondary'));
      box.append(row);
      const det = el('details', { class: 'unified' }, el('summary', {}, 'Unified diff'), el('pre', {}, d.unified));
      box.append(det);
    }
    if (a.resolved) {
      box.append(el('div', { class: 'resolved', 'data-testid': 'approval-resolved' }, a.resolved === 'deny' ? 'Denied' : `Allowed (${a.resolved})`));
    } else {
      const row = el('div', { class: 'actions' });
      const decide = (decision: Decision, message?: string) => vscode.postMessage({ type: 'approve', requestId: a.requestId, decision, message });
      for (const o of a.options.filter((o) => o.decision !== 'deny')) {
        const label = o.decision === 'alwaysCommand' && o.commandPrefix ? `${o.label} (${o.commandPrefix})` : o.label;
        row.append(button(label, `approve-${o.decision}`, () => decide(o.decision), o.decision === 'once' ? '' : 'secondary'));
      }
      box.append(row);
      const reason = el('input', { type: 'text', placeholder: 'Reason for denying (optional)', 'data-testid': 'deny-reason' }) as HTMLInputElement;
      reason.addEventListener('keydown', (ev) => ev.key === 'Enter' && decide('deny', reason.value.trim() || undefined));
      box.append(el('div', { class: 'actions' }, reason, button('Deny', 'deny', () => decide('deny', reason.value.trim() || undefined), 'danger')));
    }
    card.append(box);
  }
  if (t.diff?.length) card.append(renderApplied(t));
  if (t.output) card.append(el('pre', { class: 'output', 'data-testid': 'tool-output' }, t.output));
  if (t.result !== undefined && t.result !== '') {
    card.append(el('details', { class: 'result' }, el('summary', {}, 'Result'), el('pre', { 'data-testid': 'tool-result' }, t.result)));
  }
  return card;
}

/**
 * The change a completed edit wrote (`toolCallUpdate.diff`), collapsed: with autoEdit, fullAuto or an "always
 * allow" rule nobody was asked, and this is where the user sees what changed. Open diff shows it in a
 * read-only diff editor.
 */
function renderApplied(t: Extract<ChatItem, { type: 'tool' }>): HTMLElement {
  const diffs = t.diff ?? [];
  const total = diffs.map((d) => diffStat(d.unified)).reduce((a, b) => ({ added: a.added + b.added, removed: a.removed + b.removed }), { added: 0, removed: 0 });
  const files = diffs.map((d) => d.path).join(', ');
  const det = el('details', { class: 'applied', 'data-testid': 'applied-diff' }, el('summary', { 'data-testid': 'applied-summary' }, `Applied to ${files} (+${total.added} −${total.removed})`));
  for (const d of diffs) {
    const row = el('div', { class: 'diff-file' }, el('code', {}, d.path + (d.oldText === null ? ' (new file)' : '')));
    row.append(button('Open diff', 'open-applied-diff', () => vscode.postMessage({ type: 'openAppliedDiff', toolCallId: t.toolCallId, path: d.path }), 'secondary'));
    det.append(row, el('pre', { class: 'unified', 'data-testid': 'applied-unified' }, d.unified));
  }
  return det;
}

const TURN_LABEL: Record<string, string> = {
  idle: 'idle',
  running: 'running',
  awaitingApproval: 'waiting for your approval',
  awaitingAnswer: 'waiting for your answer',
};

const SERVER_LABEL: Record<Exclude<ChatMeta['server'], 'ready'>, string> = {
  notStarted: 'server not started',
  starting: 'starting server…',
  crashed: 'server down',
  failed: 'server down',
};

function renderMeta(): void {
  if (!meta) return;
  // Another session has other commands: the list is fetched again at the next `/`.
  if (meta.sessionId !== slashSession) {
    slashSession = meta.sessionId;
    slash.reset();
  }
  const running = meta.turn !== 'idle';
  $('#model').textContent = meta.model ?? '—';
  $('#mode').textContent = meta.mode ?? '—';
  const turn = $('#turn');
  turn.textContent = meta.server === 'ready' ? TURN_LABEL[meta.turn] : SERVER_LABEL[meta.server];
  turn.dataset.state = meta.server === 'ready' ? meta.turn : meta.server;
  const banner = $('#banner');
  banner.textContent = meta.serverMessage ?? '';
  banner.hidden = !meta.serverMessage;
  const editing = meta.editing;
  sendBtn.textContent = editing ? 'Resend' : running ? 'Steer' : 'Send';
  sendBtn.dataset.testid = running && !editing ? 'steer' : 'send';
  input.placeholder = editing ? 'The edited prompt (Enter undoes the turn and sends it)…' : running ? 'Steer the running turn (Enter)…' : 'Ask tandem (Enter to send, Shift+Enter for a new line)…';
  // Edit & resend: the box gets the turn's prompt once per edit (a snapshot of the same edit keeps what was typed).
  $('#editing').hidden = !editing;
  if (editing && editing.id !== editId) {
    editId = editing.id;
    input.value = editing.text;
    vscode.setState({ draft: input.value, editId });
    input.focus();
  }
  stopBtn.disabled = !running;
  // "Resume last session" while the chat is an empty draft (the server lists the folder's newest session).
  const last = meta.lastSession;
  const resume = $('#resume');
  resume.hidden = !last || !!meta.sessionId || items.some((i) => i.type !== 'notice');
  $('#resume-title').textContent = last ? `Last session: “${last.title ?? 'untitled'}”, ${new Date(last.updatedAt).toLocaleString()}.` : '';
  const mcp = mcpSummary(meta.sessionId ? meta.mcp : undefined);
  const mcpChip = $('#mcp');
  mcpChip.hidden = !mcp;
  mcpChip.textContent = mcp ? `${mcp.warning ? '⚠ ' : ''}${mcp.label}` : '';
  mcpChip.title = mcp ? `MCP servers (click for details)\n${mcp.tooltip}` : '';
  mcpChip.dataset.warning = String(!!mcp?.warning);
  const net = $('#network');
  net.textContent = meta.networkAccess ? 'net: on' : 'net: off';
  net.dataset.on = String(!!meta.networkAccess);
  // Context gauge: tokens in the model's context after the last answer, over the current model's window.
  const info = meta.modelInfos?.find((m) => m.id === meta!.model);
  const gauge = contextGauge(meta.usage, info?.contextWindow);
  const ctx = $('#context');
  ctx.hidden = !gauge;
  if (gauge) {
    $('#context-text').textContent = `Context: ${gauge.used.toLocaleString('en-US')} / ${gauge.window.toLocaleString('en-US')} tokens (${gauge.percent}%)`;
    const fill = $('#gauge-fill');
    fill.style.width = `${gauge.percent}%`;
    fill.dataset.level = gauge.percent >= 85 ? 'high' : gauge.percent >= 60 ? 'mid' : 'low';
  }
  renderPlan(meta.plan);
  const u = meta.usage;
  $('#usage').textContent = u
    ? `Tokens: last ${u.inputTokens} in / ${u.outputTokens} out${u.cachedTokens ? ` (${u.cachedTokens} cached)` : ''} · session ${u.totalInput} in / ${u.totalOutput} out`
    : '';
  const end = meta.lastEnd;
  const ended = $('#ended');
  // The error itself is the notice just above in the chat; repeating it here printed it twice.
  ended.textContent = !running && end ? `Last turn: ${end.reason} ` : '';
  if (!running && end?.reason === 'error') {
    ended.append(button('Retry', 'retry', () => vscode.postMessage({ type: 'command', command: 'tandem.retry' }), 'secondary'));
  }
}

/**
 * The model's plan as a checklist pinned above the prompt box: a heading with the count of completed steps ("2/5")
 * and the step in progress, and one row per step (✓ completed, ▸ in progress, ○ pending). Hidden without a plan.
 * The <details> is built once in the HTML, so whether the user folded it survives every update.
 */
function renderPlan(plan: ChatMeta['plan']): void {
  const box = $<HTMLDetailsElement>('#plan');
  const view = planView(plan);
  box.hidden = !view;
  if (!view) {
    $('#plan-list').replaceChildren();
    return;
  }
  $('#plan-count').textContent = view.count;
  $('#plan-current').textContent = view.current ?? (view.done === view.total ? 'all steps done' : '');
  box.dataset.done = String(view.done);
  box.dataset.total = String(view.total);
  $('#plan-list').replaceChildren(
    ...view.rows.map((r) =>
      el(
        'li',
        { class: `plan-entry plan-${r.status}`, 'data-testid': 'plan-entry', 'data-status': r.status, title: r.label },
        el('span', { class: 'plan-marker', 'aria-label': r.label }, r.marker),
        el('span', { class: 'plan-content' }, r.content),
      ),
    ),
  );
}

function atBottom(): boolean {
  return log.scrollHeight - log.scrollTop - log.clientHeight < 40;
}

function renderAll(): void {
  log.replaceChildren(...items.map((item, i) => renderItem(item, i)));
  log.scrollTop = log.scrollHeight;
}

function update(index: number, item: ChatItem): void {
  const stick = atBottom();
  items[index] = item;
  const node = renderItem(item, index);
  const old = log.children[index];
  // Keep a half-typed deny reason or answer when its card re-renders.
  const typed = old?.querySelector('input') as HTMLInputElement | null;
  if (typed?.value) {
    const fresh = node.querySelector(`input[data-testid="${typed.dataset.testid}"]`) as HTMLInputElement | null;
    if (fresh) fresh.value = typed.value;
  }
  if (old) old.replaceWith(node);
  else log.append(node);
  // A prompt that learned its turn after the next item arrived: that item no longer starts the turn.
  const next = log.children[index + 1];
  if (next && !!next.querySelector(':scope > .turn-actions') !== isTurnStart(items, index + 1)) next.replaceWith(renderItem(items[index + 1], index + 1));
  if (stick) log.scrollTop = log.scrollHeight;
}

/** Text appended to a streaming assistant message: only the new part is rendered. */
function append(index: number, text: string, reasoning: string): void {
  const item = items[index];
  const node = log.children[index];
  const stream = node && streams.get(node);
  if (item?.type !== 'assistant' || !stream) return;
  const stick = atBottom();
  item.text += text;
  item.reasoning += reasoning;
  if (reasoning) {
    const det = node.querySelector('.reasoning') as HTMLElement;
    det.hidden = false;
    det.querySelector('.reasoning-body')!.append(reasoning);
  }
  if (text) stream.append(text);
  if (stick) log.scrollTop = log.scrollHeight;
}

window.addEventListener('message', (ev: MessageEvent) => {
  const m = ev.data as HostMessage;
  if (m.type === 'snapshot') {
    items = m.snapshot.items.slice();
    meta = m.snapshot.meta;
    renderAll();
    renderMeta();
  } else if (m.type === 'items') {
    for (const u of m.updates) update(u.index, u.item);
    renderMeta();
  } else if (m.type === 'append') {
    append(m.index, m.text, m.reasoning);
  } else if (m.type === 'meta') {
    meta = m.meta;
    renderMeta();
  } else if (m.type === 'commands') {
    slash.setCommands(m.commands, m.error, m.note);
    renderSlash();
  } else if (m.type === 'focus') {
    input.focus();
  } else if (m.type === 'mention') {
    // The picked file goes right after the `@` (a cancelled pick leaves the `@` as typed).
    if (m.mention && mentionAt !== undefined) {
      input.value = `${input.value.slice(0, mentionAt)}${m.mention} ${input.value.slice(mentionAt)}`;
      input.selectionStart = input.selectionEnd = mentionAt + m.mention.length + 1;
      vscode.setState({ draft: input.value, editId });
    }
    mentionAt = undefined;
    input.focus();
  }
});

/** Images pasted or attached for the next prompt (base64, as the protocol's image parts take them). */
let images: { mimeType: string; data: string; name: string }[] = [];

function renderAttachments(): void {
  const box = $('#attachments');
  box.replaceChildren(
    ...images.map((img, i) =>
      el('span', { class: 'chip attachment', 'data-testid': 'attachment' }, `🖼 ${img.name}`, button('×', 'remove-attachment', () => {
        images.splice(i, 1);
        renderAttachments();
      }, 'secondary')),
    ),
  );
  const info = meta?.modelInfos?.find((m) => m.id === meta!.model);
  if (images.length && info && !info.vision) box.append(el('span', { class: 'warn', 'data-testid': 'no-vision' }, `${info.id} does not see images (it gets a placeholder).`));
}

function addImageFile(file: File): void {
  const reader = new FileReader();
  reader.onload = () => {
    const url = String(reader.result);
    const comma = url.indexOf(',');
    images.push({ mimeType: file.type || 'image/png', data: url.slice(comma + 1), name: file.name || 'pasted image' });
    renderAttachments();
  };
  reader.readAsDataURL(file);
}

function submit(): void {
  const text = input.value.trim();
  if (!text) return;
  // An edit is sent as one even while a turn runs: the extension then offers to stop the turn first.
  const editTurnId = meta?.editing?.turnId;
  // A text starting with `/word` goes as a prompt while a turn runs too: the extension runs it if it names a command
  // (the server refuses what it cannot run during a turn) and steers with it otherwise.
  const steering = !!meta && meta.turn !== 'idle' && !editTurnId && !/^\/[^\s/]/.test(text);
  vscode.postMessage(
    steering ? { type: 'steer', text } : { type: 'prompt', text, images: images.map(({ mimeType, data }) => ({ mimeType, data })), ...(editTurnId ? { editTurnId } : {}) },
  );
  input.value = '';
  prevText = '';
  slash.close();
  renderSlash();
  if (!steering) {
    images = [];
    renderAttachments();
  }
  vscode.setState({ draft: '', editId });
}

// ---- slash-command completion (src/slash.ts keeps its state; this renders it and feeds it the box) ------------
const slash = new SlashCompletion();
const slashMenu = $('#slash-menu');
/** The session the completion's list belongs to (another session's commands differ). */
let slashSession: string | undefined;
/** The box's text before the last input event: a `/` that starts the text only now is a fresh one. */
let prevText = input.value;

/** The list above the box (a listbox the box controls: arrow keys move, Tab/Enter complete, Escape closes). */
function renderSlash(): void {
  slashMenu.hidden = !slash.open;
  input.setAttribute('aria-expanded', String(slash.open));
  if (!slash.open) {
    input.removeAttribute('aria-activedescendant');
    slashMenu.replaceChildren();
    return;
  }
  const rows = slash.items.map((c, i) => {
    const active = i === slash.active;
    const row = el(
      'div',
      { id: `slash-opt-${i}`, role: 'option', class: `slash-item${active ? ' active' : ''}`, 'aria-selected': String(active), 'data-testid': 'slash-item', 'data-name': c.name },
      el('span', { class: 'slash-name' }, `/${c.name}`),
      ...(c.argumentHint ? [el('span', { class: 'slash-hint' }, c.argumentHint)] : []),
      el('span', { class: `slash-source source-${c.source}`, 'data-testid': 'slash-source' }, SOURCE_LABELS[c.source] ?? c.source),
      ...(c.description ? [el('div', { class: 'slash-desc' }, c.description)] : []),
    );
    // mousedown, not click: the box keeps the focus (and its caret) while the row is picked.
    row.addEventListener('mousedown', (ev) => {
      ev.preventDefault();
      applyCompletion(slash.complete(i, input.value));
    });
    return row;
  });
  const state = !slash.loaded
    ? 'Loading the commands…'
    : slash.error
      ? `Could not list the commands: ${slash.error}`
      : !slash.items.length
        ? `No command matches /${slash.query}: Enter sends the text as typed.`
        : undefined;
  slashMenu.replaceChildren(
    ...rows,
    ...(state ? [el('div', { class: 'slash-state', 'data-testid': 'slash-state' }, state)] : []),
    ...(slash.note ? [el('div', { class: 'slash-note', 'data-testid': 'slash-note' }, slash.note)] : []),
  );
  const active = rows[slash.active];
  if (active) {
    input.setAttribute('aria-activedescendant', active.id);
    active.scrollIntoView({ block: 'nearest' });
  } else {
    input.removeAttribute('aria-activedescendant');
  }
}

function applyCompletion(r: { text: string; caret: number }): void {
  input.value = r.text;
  input.selectionStart = input.selectionEnd = r.caret;
  prevText = input.value;
  vscode.setState({ draft: input.value, editId });
  renderSlash();
  input.focus();
}

input.addEventListener('input', () => {
  // A fresh `/` at the start: the list is fetched again (a new command file shows up without a restart).
  if (slash.input(input.value, input.selectionStart, prevText)) vscode.postMessage({ type: 'listCommands' });
  prevText = input.value;
  renderSlash();
});
input.addEventListener('blur', () => {
  slash.close();
  renderSlash();
});

/** Where the `@` that opened the file picker was typed, so the pick lands right after it. */
let mentionAt: number | undefined;
input.addEventListener('input', (ev) => {
  const e = ev as InputEvent;
  const at = input.selectionStart - 1;
  // An `@` typed at the start or after a space opens the picker; one inside a word (an e-mail) does not.
  if (e.inputType === 'insertText' && e.data === '@' && (at === 0 || /\s/.test(input.value[at - 1]))) {
    mentionAt = at + 1;
    vscode.postMessage({ type: 'pickMention' });
  }
});
input.addEventListener('paste', (ev) => {
  const files = Array.from(ev.clipboardData?.files ?? []).filter((f) => f.type.startsWith('image/'));
  if (!files.length) return;
  ev.preventDefault();
  files.forEach(addImageFile);
});
$('#attach').addEventListener('click', () => $<HTMLInputElement>('#image-file').click());
$<HTMLInputElement>('#image-file').addEventListener('change', (ev) => {
  const f = ev.target as HTMLInputElement;
  Array.from(f.files ?? []).forEach(addImageFile);
  f.value = '';
});
$('#network').addEventListener('click', () => vscode.postMessage({ type: 'command', command: 'tandem.toggleNetwork' }));
$('#mcp').addEventListener('click', () => vscode.postMessage({ type: 'command', command: 'tandem.mcpServers' }));

input.addEventListener('keydown', (ev) => {
  // The completion list takes its keys first (arrows, Tab, Enter on an entry, Escape).
  const wasOpen = slash.open;
  const k = slash.key(ev.key, { shift: ev.shiftKey, ctrl: ev.ctrlKey, alt: ev.altKey, meta: ev.metaKey, composing: ev.isComposing }, input.value);
  if (k.handled) {
    ev.preventDefault();
    if (k.text !== undefined) applyCompletion({ text: k.text, caret: k.caret ?? k.text.length });
    else renderSlash();
    return;
  }
  if (wasOpen && !slash.open) renderSlash();
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    submit();
  } else if (ev.key === 'Escape' && meta && meta.turn !== 'idle') {
    vscode.postMessage({ type: 'stop' });
  }
});
input.addEventListener('input', () => vscode.setState({ draft: input.value, editId }));
$('#cancel-edit').addEventListener('click', () => {
  input.value = '';
  vscode.setState({ draft: '', editId });
  vscode.postMessage({ type: 'cancelEdit' });
});
sendBtn.addEventListener('click', submit);
stopBtn.addEventListener('click', () => vscode.postMessage({ type: 'stop' }));
$('#model').addEventListener('click', () => vscode.postMessage({ type: 'command', command: 'tandem.switchModel' }));
$('#mode').addEventListener('click', () => vscode.postMessage({ type: 'command', command: 'tandem.setMode' }));
$('#resume-last').addEventListener('click', () => vscode.postMessage({ type: 'command', command: 'tandem.resumeLast' }));
$('#new').addEventListener('click', () => vscode.postMessage({ type: 'command', command: 'tandem.newSession' }));

const saved = vscode.getState() as { draft?: string; editId?: number } | undefined;
if (saved?.draft) input.value = saved.draft;
editId = saved?.editId;
// The handshake: the extension holds every event until this arrives, then sends a full snapshot.
vscode.postMessage({ type: 'ready' });
