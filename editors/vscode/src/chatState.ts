// The chat's view model: folds the server's session events into a list of items (user prompts, assistant
// messages, tool cards with their approvals, questions, notices) plus the turn state and token usage.
// Pure and vscode-free: the extension owns one instance, the webview only renders what it is sent,
// so hiding or reloading the view loses nothing.
import { applyMcpStatus, type McpServerInfo, type McpToolRef } from './mcp';
import { normalizePlan } from './plan';
import type { ApprovalOption, Decision, FileDiff, Mode, ModelInfo, PlanEntry, PromptCommand, RestoreScope, SessionEvent, ToolKind, ToolStatus, TurnEndReason } from './protocol';

export interface ApprovalView {
  requestId: string;
  reason: string;
  options: ApprovalOption[];
  diff?: FileDiff[];
  command?: string;
  cwd?: string;
  /** An MCP tool's approval: the server and the tool (the arguments are the card's). */
  mcp?: McpToolRef;
  resolved?: Decision;
}

/**
 * One entry of the chat. `turnId` is the turn it belongs to (unset for what the extension itself adds between
 * turns, and for a prompt until the server admitted it): the chat offers the turn's actions (Show changes, Undo,
 * Edit & resend, Fork) on the turn's first item, and a conversation rewind drops the turn's items and all after.
 */
export type ChatItem = (
  | {
      type: 'user';
      id: string;
      text: string;
      steer?: boolean;
      /** The text as the user typed it (without attached context), for Edit & resend; unset: `text`. */
      draft?: string;
    }
  | { type: 'assistant'; id: string; text: string; reasoning: string; streaming: boolean }
  | {
      type: 'tool';
      id: string;
      toolCallId: string;
      name: string;
      kind: ToolKind;
      title: string;
      arguments: unknown;
      status: ToolStatus;
      output: string;
      result?: string;
      diff?: FileDiff[];
      approval?: ApprovalView;
      /** A tool of an MCP server: the card shows the server. */
      mcp?: McpToolRef;
    }
  | { type: 'question'; id: string; requestId: string; question: string; choices?: string[]; plan?: string; answer?: string; withdrawn?: boolean }
  | { type: 'notice'; id: string; kind: string; text: string }
  /**
   * A slash command that ran without a turn (`/status`, `/diff`, `/undo`, `/fork`, `/model`, `/mode`): the text as
   * typed, and the server's Markdown `output`, or its `error` when it refused. `sessionId`: the session `/fork` made.
   */
  | { type: 'command'; id: string; text: string; name: string; output?: string; sessionId?: string; error?: string }
  /** A hook ran (`hookRan`): the compact line in its turn. */
  | { type: 'hook'; id: string; event: string; command: string; exitCode: number | null; durationMs: number; blocked?: boolean }
) & { turnId?: string };

/** A ChatItem before it gets its id (distributive, so each variant keeps its own fields). */
type NewItem = ChatItem extends infer T ? (T extends ChatItem ? Omit<T, 'id'> : never) : never;

export type TurnState = 'idle' | 'running' | 'awaitingApproval' | 'awaitingAnswer';

export interface Usage {
  model: string;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  /** Sums over the session, for the footer. */
  totalInput: number;
  totalOutput: number;
}

export interface ChatMeta {
  /** Unset until the first prompt creates the session (or one is resumed): the chat is a draft until then. */
  sessionId?: string;
  /** Without a session: the model and mode the first prompt's session/new will use. */
  model?: string;
  mode?: Mode;
  turn: TurnState;
  turnId?: string;
  lastEnd?: { reason: TurnEndReason; error?: string };
  usage?: Usage;
  /** `notStarted`: the extension starts the server on first use, not on activation. */
  server: 'notStarted' | 'starting' | 'ready' | 'crashed' | 'failed';
  serverMessage?: string;
  sessionStore: boolean;
  models: string[];
  /** The server's model catalog (initialize / models/list): window and abilities, for the gauge and attachments. */
  modelInfos?: ModelInfo[];
  /** Whether the session's shell commands may use the network (setNetworkAccess; closed by default). */
  networkAccess?: boolean;
  /** The newest stored session of this folder, offered as "Resume last session" while the chat is an empty draft. */
  lastSession?: { sessionId: string; title?: string; updatedAt: number };
  /** The session's MCP servers (mcp/status, then mcpStatus events); unset before a session reports them. */
  mcp?: McpServerInfo[];
  /**
   * Edit & resend in progress: the prompt box holds this turn's prompt (`text`), and sending rewinds the session
   * to before `turnId` (files and conversation) and then prompts with the edited text. `id` changes with every
   * new edit, so the webview fills its box once per edit (also from a snapshot), never over what the user typed.
   */
  editing?: { turnId: string; text: string; id: number };
  /**
   * The model's current plan (`update_plan`), shown as a checklist above the prompt box: replaced by every `plan`
   * event, restored by `session/load`, unset when there is none (an empty plan, a new or other session).
   */
  plan?: PlanEntry[];
}

export interface Snapshot {
  items: ChatItem[];
  meta: ChatMeta;
}

/** What changed after applying something: the indices of items to (re)render and whether meta changed. */
export interface Change {
  items: number[];
  meta: boolean;
  /** Items were removed (a rewind): indices before and after no longer match, so the whole list is sent again. */
  reset?: boolean;
}

export class ChatState {
  items: ChatItem[] = [];
  meta: ChatMeta = { turn: 'idle', server: 'notStarted', sessionStore: false, models: [] };
  private nextId = 1;
  /** This chat's prompts sent and not yet named by their response (their turn) or turned into a command block. */
  private promptsInFlight = new Set<string>();
  private lastSeq = 0;
  private readonly toolIndex = new Map<string, number>();
  private readonly requestIndex = new Map<string, number>();
  private currentAssistant = -1;
  /** Texts of the error notices of the running turn: turnEnded repeats the same message (protocol.md). */
  private turnErrors = new Set<string>();

  snapshot(): Snapshot {
    return { items: this.items, meta: this.meta };
  }

  /** Clears the conversation for a loaded session, or without one for a draft; keeps server info. */
  reset(session?: { sessionId: string; model: string; mode: Mode }): void {
    this.items = [];
    this.promptsInFlight.clear();
    this.toolIndex.clear();
    this.requestIndex.clear();
    this.currentAssistant = -1;
    this.lastSeq = 0;
    this.rewindEchoes.clear();
    this.meta = { ...this.meta, sessionId: undefined, turn: 'idle', turnId: undefined, lastEnd: undefined, usage: undefined, lastSession: undefined, networkAccess: undefined, mcp: undefined, editing: undefined, plan: undefined };
    if (session) Object.assign(this.meta, { sessionId: session.sessionId, model: session.model, mode: session.mode });
  }

  /** `turnId`: the item's turn; unset, the turn of the event being applied (null: none). */
  private push(item: NewItem, turnId: string | null | undefined = this.eventTurn): number {
    this.items.push({ ...item, id: `i${this.nextId++}`, ...(turnId ? { turnId } : {}) } as ChatItem);
    return this.items.length - 1;
  }

  /**
   * A prompt (or a steer, which belongs to the running turn) as the user sent it. `draft` is the text as typed
   * when `text` shows more (the attached context), for Edit & resend.
   */
  addUser(text: string, steer = false, draft?: string): Change {
    const item: NewItem = { type: 'user', text, steer, ...(draft !== undefined && draft !== text ? { draft } : {}) };
    const index = this.push(item, steer ? this.meta.turnId : undefined);
    if (!steer) this.promptsInFlight.add(this.items[index].id);
    return { items: [index], meta: false };
  }

  /** The server admitted a prompt as `turnId` (the `prompt` response): its item now carries the turn. */
  setTurnOf(itemId: string, turnId: string): Change {
    this.promptsInFlight.delete(itemId);
    const i = this.items.findIndex((x) => x.id === itemId);
    if (i < 0 || this.items[i].turnId === turnId) return { items: [], meta: false };
    this.items[i].turnId = turnId;
    return { items: [i], meta: false };
  }

  /**
   * The server ran the prompt `itemId` as a command that needs no turn (the `prompt` answer had `command` and no
   * `turnId`): the prompt line becomes the command's block, with its output under the text as typed.
   */
  commandResult(itemId: string, command: PromptCommand): Change {
    this.promptsInFlight.delete(itemId);
    return this.toCommand(itemId, {
      name: command.name,
      ...(command.output !== undefined ? { output: command.output } : {}),
      ...(command.sessionId ? { sessionId: command.sessionId } : {}),
    });
  }

  /** The server refused the command the prompt `itemId` ran (its error answer): shown in the command's block. */
  commandFailed(itemId: string, name: string, error: string): Change {
    return this.toCommand(itemId, { name, error });
  }

  private toCommand(itemId: string, fields: { name: string; output?: string; sessionId?: string; error?: string }): Change {
    const i = this.items.findIndex((x) => x.id === itemId);
    const item = this.items[i];
    if (!item || (item.type !== 'user' && item.type !== 'command')) return { items: [], meta: false };
    const text = item.type === 'user' ? (item.draft ?? item.text) : item.text;
    this.items[i] = { type: 'command', id: item.id, text, ...fields };
    return { items: [i], meta: false };
  }

  /** The index of the first item of a turn (where the chat shows its actions), or -1. */
  turnStart(turnId: string): number {
    return this.items.findIndex((x) => x.turnId === turnId);
  }

  /** The newest turn the chat shows, or undefined. */
  lastTurnId(): string | undefined {
    for (let i = this.items.length - 1; i >= 0; i--) if (this.items[i].turnId) return this.items[i].turnId;
    return undefined;
  }

  /** The prompt that started a turn (its first user item that is not a steer), if the chat shows one. */
  promptOf(turnId: string): Extract<ChatItem, { type: 'user' }> | undefined {
    return this.items.find((x): x is Extract<ChatItem, { type: 'user' }> => x.type === 'user' && !x.steer && x.turnId === turnId);
  }

  /** The newest prompt the chat shows that belongs to a turn (for Edit & resend without a turn named). */
  lastPrompt(): Extract<ChatItem, { type: 'user' }> | undefined {
    for (let i = this.items.length - 1; i >= 0; i--) {
      const x = this.items[i];
      if (x.type === 'user' && !x.steer && x.turnId) return x;
    }
    return undefined;
  }

  /**
   * What a rewind did to this chat, from its response or from the `rewound` event (another client's rewind, or
   * the echo of ours). A conversation rewind drops the turn's items and every later one, and a notice stands
   * where they were (as `session/load` shows it); a files-only rewind keeps the turns and adds the notice.
   * A conversation rewind of a turn the chat no longer shows changes nothing, so the echo of a rewind already
   * applied is harmless; expectEcho() makes the echo of a files-only one silent too. `prompt` names the turn
   * when the chat does not show it (any more).
   */
  rewind(turnId: string, restore: RestoreScope, files: string[], prompt?: string): Change {
    const start = this.turnStart(turnId);
    const item = this.promptOf(turnId);
    const text = rewoundText(item ? (item.draft ?? item.text) : prompt, restore, files);
    if (restore === 'files') return { items: [this.push({ type: 'notice', kind: 'rewound', text }, null)], meta: false };
    if (start < 0) return { items: [], meta: false };
    // Commands typed after the turn stay (the `/undo` that did this rewind among them): they were no turn's.
    const commands = this.items.slice(start).filter((x) => x.type === 'command' && !x.turnId);
    this.items.length = start;
    this.items.push(...commands);
    for (const map of [this.toolIndex, this.requestIndex]) {
      for (const [k, i] of map) if (i >= start) map.delete(k);
    }
    if (this.currentAssistant >= start) this.currentAssistant = -1;
    // The turn bar's "Last turn: error · Retry" was about a turn that is gone.
    this.meta.lastEnd = undefined;
    // An edit of a turn that is gone has nothing left to rewind: the prompt box keeps its text, sent as a prompt.
    if (this.meta.editing && this.turnStart(this.meta.editing.turnId) < 0) this.meta.editing = undefined;
    this.push({ type: 'notice', kind: 'rewound', text }, null);
    return { items: [], meta: true, reset: true };
  }

  /** A rewind this client made and applies from its response: its `rewound` event (same turn and restore) is skipped. */
  expectEcho(turnId: string, restore: RestoreScope): void {
    const key = `${turnId}\0${restore}`;
    this.rewindEchoes.set(key, (this.rewindEchoes.get(key) ?? 0) + 1);
  }

  /** Events still to come of rewinds this client applied, by turn and restore (a Force repeats a files rewind). */
  private readonly rewindEchoes = new Map<string, number>();

  /** Whether an event is the echo of a rewind this client applied (then counted off). */
  private isEcho(turnId: string, restore: RestoreScope): boolean {
    const key = `${turnId}\0${restore}`;
    const n = this.rewindEchoes.get(key);
    if (!n) return false;
    if (n === 1) this.rewindEchoes.delete(key);
    else this.rewindEchoes.set(key, n - 1);
    return true;
  }

  addNotice(kind: string, text: string): Change {
    return { items: [this.push({ type: 'notice', kind, text }, null)], meta: false };
  }

  setMeta(patch: Partial<ChatMeta>): Change {
    Object.assign(this.meta, patch);
    return { items: [], meta: true };
  }

  /** Pending approvals not yet resolved, oldest first. */
  pendingApprovals(): Extract<ChatItem, { type: 'tool' }>[] {
    return this.items.filter(
      (i): i is Extract<ChatItem, { type: 'tool' }> => i.type === 'tool' && !!i.approval && !i.approval.resolved,
    );
  }

  pendingQuestions(): Extract<ChatItem, { type: 'question' }>[] {
    return this.items.filter(
      (i): i is Extract<ChatItem, { type: 'question' }> => i.type === 'question' && i.answer === undefined && !i.withdrawn,
    );
  }

  toolByRequest(requestId: string): Extract<ChatItem, { type: 'tool' }> | undefined {
    const i = this.requestIndex.get(requestId);
    const item = i === undefined ? undefined : this.items[i];
    return item?.type === 'tool' ? item : undefined;
  }

  toolByCallId(toolCallId: string): Extract<ChatItem, { type: 'tool' }> | undefined {
    const i = this.toolIndex.get(toolCallId);
    const item = i === undefined ? undefined : this.items[i];
    return item?.type === 'tool' ? item : undefined;
  }

  questionByRequest(requestId: string): Extract<ChatItem, { type: 'question' }> | undefined {
    const i = this.requestIndex.get(requestId);
    const item = i === undefined ? undefined : this.items[i];
    return item?.type === 'question' ? item : undefined;
  }

  /** Marks a question answered locally (the server sends no event for answers). */
  markAnswered(requestId: string, answer: string): Change {
    const i = this.requestIndex.get(requestId);
    const item = i === undefined ? undefined : this.items[i];
    if (item?.type !== 'question') return { items: [], meta: false };
    item.answer = answer;
    return { items: [i!], meta: this.recomputeTurn() };
  }

  private recomputeTurn(): boolean {
    if (this.meta.turn === 'idle') return false;
    const next: TurnState = this.pendingApprovals().length
      ? 'awaitingApproval'
      : this.pendingQuestions().length
        ? 'awaitingAnswer'
        : 'running';
    const changed = next !== this.meta.turn;
    this.meta.turn = next;
    return changed;
  }

  private ensureAssistant(): number {
    if (this.currentAssistant < 0) {
      this.currentAssistant = this.push({ type: 'assistant', text: '', reasoning: '', streaming: true });
    }
    return this.currentAssistant;
  }

  /** The turn of the event apply() is folding in: items it adds belong to that turn. */
  private eventTurn?: string;

  apply(e: SessionEvent): Change {
    if (this.meta.sessionId && e.sessionId !== this.meta.sessionId) return { items: [], meta: false };
    // Events are ordered with seq +1 each; a replayed or duplicated one must not render twice.
    if (e.seq <= this.lastSeq) return { items: [], meta: false };
    this.lastSeq = e.seq;
    this.eventTurn = e.turnId ?? undefined;
    try {
      return this.fold(e);
    } finally {
      this.eventTurn = undefined;
    }
  }

  private fold(e: SessionEvent): Change {
    const ch: Change = { items: [], meta: false };
    switch (e.type) {
      case 'turnStarted': {
        // The prompt that started the turn, if its response has not named the turn yet: the newest prompt after
        // every item of an earlier turn (a retry's turn has no prompt of its own).
        let claimed = false;
        for (let i = this.items.length - 1; i >= 0 && e.turnId; i--) {
          const x = this.items[i];
          if (x.turnId) break;
          if (x.type === 'user' && !x.steer) {
            x.turnId = e.turnId;
            ch.items.push(i);
            claimed = true;
            break;
          }
        }
        // A turn another attached client prompted (protocol.md "WebSocket"): show its prompt, which the event
        // carries, as this chat's own would be shown. Not while a prompt of this chat waits for its response: the
        // turn is that one's (items of the turn, a hook's line, may already stand after it).
        if (!claimed && e.turnId && e.prompt && !this.promptOf(e.turnId) && this.promptsInFlight.size === 0) {
          ch.items.push(this.push({ type: 'user', text: e.prompt, steer: false }, e.turnId));
        }
        this.meta.turn = 'running';
        this.meta.turnId = e.turnId;
        this.meta.model = e.model;
        this.meta.lastEnd = undefined;
        this.turnErrors.clear();
        ch.meta = true;
        break;
      }
      case 'assistantDelta':
      case 'reasoningDelta': {
        const i = this.ensureAssistant();
        const item = this.items[i] as Extract<ChatItem, { type: 'assistant' }>;
        if (e.type === 'assistantDelta') item.text += e.text;
        else item.reasoning += e.text;
        ch.items.push(i);
        break;
      }
      case 'assistantMessage': {
        // Always sent, even with empty text; an empty one with nothing streamed is not worth a bubble.
        if (this.currentAssistant < 0 && !e.text && !e.reasoning) break;
        const i = this.ensureAssistant();
        const item = this.items[i] as Extract<ChatItem, { type: 'assistant' }>;
        item.text = e.text;
        if (e.reasoning) item.reasoning = e.reasoning;
        item.streaming = false;
        this.currentAssistant = -1;
        ch.items.push(i);
        break;
      }
      case 'toolCall': {
        this.closeAssistant(ch);
        // A resumed turn announces again the calls the loaded history already shows (unfinished ones, with the
        // pending approval): one card per call, updated in place, never a second copy.
        const known = this.toolIndex.get(e.toolCallId);
        if (known !== undefined && this.items[known]?.type === 'tool') {
          const item = this.items[known] as Extract<ChatItem, { type: 'tool' }>;
          Object.assign(item, { name: e.name, kind: e.kind, title: e.title, arguments: e.arguments, status: 'pending', mcp: e.mcp });
          ch.items.push(known);
          break;
        }
        const i = this.push({
          type: 'tool',
          toolCallId: e.toolCallId,
          name: e.name,
          kind: e.kind,
          title: e.title,
          arguments: e.arguments,
          status: 'pending',
          output: '',
          ...(e.mcp ? { mcp: e.mcp } : {}),
        });
        this.toolIndex.set(e.toolCallId, i);
        ch.items.push(i);
        break;
      }
      case 'approvalRequested': {
        this.closeAssistant(ch);
        let i = this.toolIndex.get(e.toolCallId);
        if (i === undefined) {
          i = this.push({ type: 'tool', toolCallId: e.toolCallId, name: e.name, kind: e.kind, title: e.title, arguments: e.arguments, status: 'pending', output: '', ...(e.mcp ? { mcp: e.mcp } : {}) });
          this.toolIndex.set(e.toolCallId, i);
        }
        const item = this.items[i] as Extract<ChatItem, { type: 'tool' }>;
        item.status = 'awaitingApproval';
        item.approval = { requestId: e.requestId, reason: e.reason, options: e.options, diff: e.diff, command: e.command, cwd: e.cwd, mcp: e.mcp };
        if (e.mcp) item.mcp = e.mcp;
        this.requestIndex.set(e.requestId, i);
        ch.items.push(i);
        ch.meta = this.recomputeTurn();
        break;
      }
      case 'approvalResolved': {
        const i = this.requestIndex.get(e.requestId);
        const item = i === undefined ? undefined : this.items[i];
        if (item?.type === 'tool' && item.approval) {
          item.approval.resolved = e.decision;
          if (item.status === 'awaitingApproval') item.status = e.decision === 'deny' ? 'denied' : 'pending';
          ch.items.push(i!);
        }
        ch.meta = this.recomputeTurn();
        break;
      }
      case 'questionAsked': {
        this.closeAssistant(ch);
        const i = this.push({ type: 'question', requestId: e.requestId, question: e.question, choices: e.choices, plan: e.plan });
        this.requestIndex.set(e.requestId, i);
        ch.items.push(i);
        ch.meta = this.recomputeTurn();
        break;
      }
      case 'toolCallUpdate': {
        const i = this.toolIndex.get(e.toolCallId);
        const item = i === undefined ? undefined : this.items[i];
        if (item?.type !== 'tool') break;
        item.status = e.status;
        if (e.output) item.output += e.output;
        if (e.result !== undefined) item.result = e.result;
        if (e.diff) item.diff = e.diff;
        ch.items.push(i!);
        // A question tool that ended without our answer (stop, timeout) must not stay clickable.
        if (e.status !== 'running') {
          for (const [rid, qi] of this.requestIndex) {
            const q = this.items[qi];
            if (q.type === 'question' && q.answer === undefined && !q.withdrawn && this.questionTool.get(rid) === e.toolCallId) {
              q.withdrawn = true;
              ch.items.push(qi);
            }
          }
        }
        break;
      }
      case 'steeringApplied':
        ch.items.push(this.push({ type: 'notice', kind: 'steering', text: `Steering applied: ${e.text}` }));
        break;
      case 'compacting':
        ch.items.push(this.push({ type: 'notice', kind: 'compacting', text: 'Compacting the conversation…' }));
        break;
      case 'compacted':
        ch.items.push(this.push({ type: 'notice', kind: 'compacted', text: e.summary ? `Conversation compacted: ${e.summary}` : 'Conversation compacted.' }));
        break;
      case 'modelSwitched':
        this.meta.model = e.to;
        ch.meta = true;
        ch.items.push(
          this.push({ type: 'notice', kind: 'model_switch', text: `Model switched from ${e.from} to ${e.to}${e.warning ? ` (${e.warning})` : ''}` }),
        );
        break;
      case 'notice':
        if (e.kind === 'error') this.turnErrors.add(e.text);
        ch.items.push(this.push({ type: 'notice', kind: e.kind, text: e.text }));
        break;
      case 'usage': {
        const prev = this.meta.usage;
        this.meta.usage = {
          model: e.model,
          inputTokens: e.inputTokens,
          outputTokens: e.outputTokens,
          cachedTokens: e.cachedTokens ?? 0,
          totalInput: (prev?.totalInput ?? 0) + e.inputTokens,
          totalOutput: (prev?.totalOutput ?? 0) + e.outputTokens,
        };
        ch.meta = true;
        break;
      }
      case 'rewound': {
        if (e.turnId && this.isEcho(e.turnId, e.restore)) break;
        return e.turnId ? this.rewind(e.turnId, e.restore, e.files ?? []) : ch;
      }
      case 'plan':
        // The whole plan each time: what the chat shows is replaced, and an empty list clears it.
        this.meta.plan = normalizePlan(e.entries);
        ch.meta = true;
        break;
      case 'hookRan':
        // A line in the turn where the hook ran: text streamed before it stays above it.
        this.closeAssistant(ch);
        ch.items.push(
          this.push({ type: 'hook', event: e.event, command: e.command, exitCode: e.exitCode ?? null, durationMs: e.durationMs, ...(e.blocked ? { blocked: true } : {}) }),
        );
        break;
      case 'mcpStatus':
        // Not part of a turn: only the server list in meta changes.
        this.meta.mcp = applyMcpStatus(this.meta.mcp ?? [], e);
        ch.meta = true;
        break;
      case 'turnEnded': {
        this.closeAssistant(ch);
        // Nothing of this turn can be answered any more.
        for (const [, qi] of this.requestIndex) {
          const q = this.items[qi];
          if (q.type === 'question' && q.answer === undefined && !q.withdrawn) {
            q.withdrawn = true;
            ch.items.push(qi);
          }
        }
        this.meta.turn = 'idle';
        this.meta.lastEnd = { reason: e.reason, error: e.error?.message };
        // The server announces a provider error as notice{kind:"error"} and then ends the turn with the same
        // message: shown once. An error that came without its notice still gets one.
        if (e.reason === 'error' && e.error && !this.turnErrors.has(e.error.message)) {
          ch.items.push(this.push({ type: 'notice', kind: 'error', text: e.error.message }));
        }
        this.turnErrors.clear();
        ch.meta = true;
        break;
      }
    }
    if (e.type === 'questionAsked') this.questionTool.set(e.requestId, e.toolCallId);
    return ch;
  }

  private readonly questionTool = new Map<string, string>();

  private closeAssistant(ch: Change): void {
    if (this.currentAssistant >= 0) {
      const item = this.items[this.currentAssistant] as Extract<ChatItem, { type: 'assistant' }>;
      item.streaming = false;
      ch.items.push(this.currentAssistant);
      this.currentAssistant = -1;
    }
  }

  /**
   * Token usage of a resumed session: the totals from `session/load`'s `usage` (per model, summed here) and the
   * last answer's figures from the newest assistant message that carries `usage`. Without it the footer showed
   * nothing after a resume until the next answer, and then only that answer's tokens as the session's.
   */
  loadUsage(totals: { model: string; inputTokens: number; outputTokens: number; cachedTokens?: number }[] | undefined, messages: unknown[]): Change {
    if (!totals?.length) return { items: [], meta: false };
    let last: { model?: string; inputTokens?: number; outputTokens?: number } | undefined;
    for (let i = messages.length - 1; i >= 0 && !last; i--) {
      const m = messages[i] as { role?: string; usage?: { model?: string; inputTokens?: number; outputTokens?: number } };
      if (m?.role === 'assistant' && m.usage) last = m.usage;
    }
    const newest = totals[totals.length - 1];
    this.meta.usage = {
      model: last?.model ?? newest.model,
      inputTokens: last?.inputTokens ?? 0,
      outputTokens: last?.outputTokens ?? 0,
      cachedTokens: 0,
      totalInput: totals.reduce((a, u) => a + u.inputTokens, 0),
      totalOutput: totals.reduce((a, u) => a + u.outputTokens, 0),
    };
    return { items: [], meta: true };
  }

  /** The plan of a resumed session (`session/load`'s `plan`; absent: none). */
  loadPlan(plan: unknown): Change {
    this.meta.plan = normalizePlan(plan);
    return { items: [], meta: true };
  }

  /** Rebuilds items from `session/load` messages: user/assistant text, tool calls with their results, notices. */
  loadHistory(messages: unknown[]): void {
    for (const raw of messages) {
      const m = raw as {
        role?: string;
        content?: unknown;
        text?: string;
        kind?: string;
        source?: string;
        turnId?: string | null;
        reasoning?: string;
        toolCalls?: { toolCallId?: string; name?: string; arguments?: unknown; result?: string; status?: string; diff?: FileDiff[] }[];
      };
      const text = typeof m.text === 'string' ? m.text : typeof m.content === 'string' ? m.content : contentText(m.content);
      // A `rewound` notice stands where rewound turns were: it names a turn that is no longer one.
      this.eventTurn = m.role === 'notice' && m.kind === 'rewound' ? undefined : (m.turnId ?? undefined);
      if (m.role === 'user') this.push({ type: 'user', text, ...(m.source === 'steering' ? { steer: true } : {}) });
      else if (m.role === 'assistant') {
        if (text || m.reasoning) this.push({ type: 'assistant', text, reasoning: m.reasoning ?? '', streaming: false });
        for (const c of m.toolCalls ?? []) {
          const name = c.name ?? 'tool';
          // History keeps only the model-facing name: an MCP tool's server and tool are read back from it.
          const mcp = mcpOfName(name);
          const i = this.push({
            type: 'tool',
            toolCallId: c.toolCallId ?? '',
            name,
            kind: kindOf(name),
            title: mcp ? `${mcp.server}: ${mcp.tool}` : titleOf(name, c.arguments),
            ...(mcp ? { mcp } : {}),
            arguments: c.arguments,
            // A call stored without a status has no result yet (the turn was cut, or it waits for an approval
            // the resumed turn asks again): pending, not "completed".
            status: (c.status as ToolStatus | undefined) ?? (c.result !== undefined ? 'completed' : 'pending'),
            output: '',
            result: c.result,
            diff: c.diff,
          });
          if (c.toolCallId) this.toolIndex.set(c.toolCallId, i);
        }
      } else if (m.role === 'notice') this.push({ type: 'notice', kind: m.kind ?? 'notice', text });
    }
    this.eventTurn = undefined;
  }
}

/**
 * Whether `items[index]` is the first item of its turn, where the chat shows the turn's actions. Items of no turn
 * (the extension's own notices) may sit between a turn's items; they are skipped.
 */
export function isTurnStart(items: readonly ChatItem[], index: number): boolean {
  const turnId = items[index]?.turnId;
  if (!turnId) return false;
  for (let i = index - 1; i >= 0; i--) {
    const t = items[i].turnId;
    if (t) return t !== turnId;
  }
  return true;
}

/** A prompt as a rewind's notice names it: one line, at most 60 characters. */
export function shortPrompt(prompt: string): string {
  const line = prompt.trim().split('\n')[0].trim();
  return line.length > 60 ? `${line.slice(0, 59)}…` : line;
}

/** The notice a rewind leaves in the chat: which turn, and what was put back. */
export function rewoundText(prompt: string | undefined, restore: RestoreScope, files: string[]): string {
  const turn = prompt !== undefined ? `“${shortPrompt(prompt)}”` : 'that turn';
  const list = files.length ? `${files.length} file${files.length === 1 ? '' : 's'} put back (${files.join(', ')})` : 'no file needed putting back';
  switch (restore) {
    case 'both':
      return `Rewound to before ${turn}: that turn and every later one left the conversation; ${list}.`;
    case 'conversation':
      return `Rewound the conversation to before ${turn}: that turn and every later one left it; the files were left as they are.`;
    case 'files':
      return `Files put back to before ${turn}: ${list}. The conversation keeps its turns.`;
  }
}

/** `mcp__<server>__<tool>` as its server and tool (the first `__` after the server ends it); else undefined. */
export function mcpOfName(name: string): McpToolRef | undefined {
  const m = /^mcp__(.+?)__(.+)$/.exec(name);
  return m ? { server: m[1], tool: m[2] } : undefined;
}

/** The tool kind for a built-in tool name (history does not store it). */
export function kindOf(name: string): ToolKind {
  switch (name) {
    case 'read_file':
    case 'list_dir':
      return 'read';
    case 'glob':
    case 'grep':
      return 'search';
    case 'write_file':
    case 'edit_file':
      return 'edit';
    case 'shell':
      return 'execute';
    case 'ask_user':
    case 'propose_plan':
    case 'update_plan':
      return 'think';
    default:
      return 'other';
  }
}

function titleOf(name: string, args: unknown): string {
  const a = (args ?? {}) as { path?: string; command?: string; pattern?: string; entries?: unknown };
  // As the server titles it live (src/tools/mod.rs), so a resumed plan update reads the same.
  if (name === 'update_plan' && Array.isArray(a.entries)) return `Update the plan (${a.entries.length} steps)`;
  const detail = a.command ?? a.path ?? a.pattern;
  return detail ? `${name} ${detail}` : name;
}

function contentText(content: unknown): string {
  if (!Array.isArray(content)) return '';
  return content
    .map((p) => (p && typeof p === 'object' && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : ''))
    .join('');
}
