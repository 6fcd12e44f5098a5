// The extension's core: owns the supervised server, the current session and its ChatState, and implements
// every user action (prompt, steer, stop, approve, deny, answer, switch model, set mode, sessions). The chat
// view, the commands, the diff editor's title actions and the status bar all call into this one place.
// Nothing is started ahead of use: the server starts when something needs it (the chat view shown, a prompt,
// the model or session pickers), and a session is created by the first prompt. Until then the chat is a
// draft whose model and mode go into that session/new. Why: every VS Code window activates the extension it
// uses, and an eager start spawned a server per window and stored an empty session each time.
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { ServerStartError, type ExitInfo, type LaunchOptions, type TandemClient } from './client';
import { ChatState, type Change, type ChatItem } from './chatState';
import { DiffReview, requestIdOf } from './diffReview';
import { askQuestion, PlanDocuments, reviewPlan, type QuestionHandle } from './questions';
import { Supervisor } from './supervisor';
import { ViewBridge } from './viewBridge';
import { errorKind, DECISION_LABELS, MODES, MODE_DESCRIPTIONS, type Decision, type HooksListResult, type InitializeResult, type Mode, type PromptPart, type PromptResult, type RestoreScope, type RewindResult, type SessionEvent, type SlashCommand } from './protocol';
import { BUILTIN_COMMANDS, commandOf } from './slash';
import { hookPickItems, hookSummary, needsTrust, trustKey, trustText } from './hooks';
import { checkpointPickItems, conflictText, RESTORE_PICKS, turnLabel, type TurnAction } from './checkpoints';
import { TurnChanges } from './turnChanges';
import { editedContent, fileContext, formatExit, hasDecision, isTooLargeToEdit, mentions, modelAbilities, promptWithSelection, sessionPickItems, type SelectionContext } from './promptContext';
import * as fs from 'node:fs';
import { loadAllPages } from './loadPages';
import { buildConfig, keyEnvName, PRESETS, secretKey, type ProviderPreset } from './modelConfig';
import { mcpPickItems, mcpServerDetails, mcpSummary, untrustedNotice, type McpServerInfo } from './mcp';
import { attachSettings, attachTooltip, parseToken, SHARE_WARNING, sharePickItems, shareSnippet, type AttachInfo } from './attach';

type ToolItem = Extract<ChatItem, { type: 'tool' }>;

/** A steer that found no running turn; `prompt` sends the text as a prompt then. */
class NoTurnToSteer extends Error {
  constructor() {
    super('No turn is running, so there is nothing to steer: send it as a prompt instead.');
  }
}

export class Controller implements vscode.Disposable {
  readonly state = new ChatState();
  readonly bridge = new ViewBridge(this.state);
  readonly diffs = new DiffReview();
  readonly plans = new PlanDocuments();
  readonly turnChanges = new TurnChanges();
  private readonly status = vscode.window.createStatusBarItem('tandem.status', vscode.StatusBarAlignment.Left, 100);
  /** "MCP 2/3" beside the main item while the session has MCP servers; click: tandem.mcpServers. */
  private readonly mcpStatus = vscode.window.createStatusBarItem('tandem.mcp', vscode.StatusBarAlignment.Left, 99);
  /** Untrusted .mcp.json servers already announced in this window (folder and name), so each is announced once. */
  private readonly mcpAnnounced = new Set<string>();
  private readonly questions = new Map<string, QuestionHandle>();
  private readonly supervisor: Supervisor;
  private client?: TandemClient;
  private init?: InitializeResult;
  /** Model and mode picked while there is no session yet; the first prompt's session/new takes them. */
  private draft: { model?: string; mode?: Mode; network?: boolean } = {};
  /** The selection picked as `@selection` in the prompt box, attached to the next prompt that mentions it. */
  private mentionedSelection?: SelectionContext;
  /** The session/new in flight, so prompts sent before it answers share one session. */
  private creating?: Promise<string>;
  /** Resolved at the next turnEnded: a prompt that met a turn in the middle of ending waits for it. */
  private turnEndWaiters: Array<() => void> = [];
  private cwd = os.homedir();
  /** API keys from SecretStorage, by the environment variable the config names; read before each (re)start. */
  private secretEnv: Record<string, string> = {};
  /** Lets the chat view reveal itself (set by extension.ts). */
  revealChat: (focusInput?: boolean) => void = () => {};
  /** Numbers the edits of Edit & resend (ChatMeta.editing.id). */
  private editSeq = 0;
  /** The slash commands of a session as last listed (commands/list), shown at once when the completion opens. */
  private commandCache?: { sessionId: string; commands: SlashCommand[] };
  /** Project hooks the user was asked to trust in this window (folder, files and hooks): not asked again. */
  private readonly hooksAsked = new Set<string>();

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly output: vscode.OutputChannel,
    /** Tests put a scripted client in place of the real binary's. */
    opts: { makeClient?: (o: LaunchOptions) => TandemClient } = {},
  ) {
    this.status.name = 'tandem';
    this.status.command = 'tandem.openChat';
    this.status.show();
    this.mcpStatus.name = 'tandem MCP servers';
    this.mcpStatus.command = 'tandem.mcpServers';
    this.supervisor = new Supervisor(() => this.launchOptions(), {
      started: (client, init) => this.onStarted(client, init),
      crashed: (info, willRestart, attempt) => this.onCrashed(info, willRestart, attempt),
      failed: (err) => this.onFailed(err),
    }, { makeClient: opts.makeClient });
    this.showDraft();
    this.refreshUi({ items: [], meta: true });
  }

  // ---- server lifecycle -------------------------------------------------------------------------------

  private launchOptions(): LaunchOptions {
    const cfg = vscode.workspace.getConfiguration('tandem');
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    this.cwd = folder ?? os.homedir();
    const expand = (v: string) => v.replace(/\$\{workspaceFolder\}/g, folder ?? this.cwd).replace(/^~(?=\/|$)/, os.homedir());
    const serverPath = expand(cfg.get<string>('serverPath') || 'tandem');
    let configFile = expand(cfg.get<string>('configFile') || '');
    if (configFile && !path.isAbsolute(configFile)) configFile = path.join(this.cwd, configFile);
    return {
      serverPath,
      configFile: configFile || undefined,
      // Off unless the user set an address: a listening server accepts other clients that hold its token.
      attach: attachSettings(cfg.get<unknown>('attach.listen'), cfg.get<unknown>('attach.allowOrigins')),
      cwd: this.cwd,
      // Keys stored by Configure Model reach the server only here, in its environment (never in a file).
      env: { ...process.env, ...this.secretEnv },
      clientName: 'tandem-vscode',
      clientVersion: this.context.extension.packageJSON.version,
      log: (line) => this.output.appendLine(line),
    };
  }

  /** Whether the server was ever started in this window (activation alone does not start it). */
  get started(): boolean {
    return this.state.meta.server !== 'notStarted';
  }

  start(): Promise<unknown> {
    this.setServer('starting');
    // Kept so that a command arriving while the keys are read waits for this start instead of finding no server.
    this.starting = this.loadSecrets().then(() => this.supervisor.start());
    return this.starting;
  }

  private starting?: Promise<unknown>;

  /** Reads the API keys Configure Model stored, so launchOptions can put them into the server's environment. */
  private async loadSecrets(): Promise<void> {
    const env: Record<string, string> = {};
    for (const p of PRESETS) {
      const key = await Promise.resolve(this.context.secrets?.get(secretKey(p.kind))).catch(() => undefined);
      if (key) env[keyEnvName(p.kind)] = key;
    }
    this.secretEnv = env;
  }

  /** Starts the server unless that happened already: the chat view calls it when first shown, for the model list. */
  ensureStarted(): void {
    if (!this.started) void this.start();
  }

  async restart(): Promise<void> {
    if (!this.started) {
      await this.start();
      return;
    }
    this.setServer('starting', 'Restarting the tandem server…');
    this.dropPending();
    await this.loadSecrets();
    await this.supervisor.restart();
  }

  /**
   * The running server, started here on first use. A start in progress (the chat view's, or a crash
   * restart's) is awaited, not duplicated. A failed or given-up server is not started again behind the
   * user's back: the error says what to fix and how to restart.
   */
  private async server(): Promise<TandemClient> {
    if (!this.started) {
      await this.start();
      // onFailed already told the user why, with Open Settings / Retry: one message is enough.
      if (!this.client?.running) throw new ReportedError(this.state.meta.serverMessage ?? 'The tandem server did not start.');
    } else {
      await this.starting?.catch(() => undefined);
      await this.supervisor.pending;
    }
    return this.requireClient();
  }

  private async onStarted(client: TandemClient, init: InitializeResult): Promise<void> {
    this.client = client;
    this.init = init;
    // A session exists only if this is a restart of a server that had one.
    const previous = this.state.meta.sessionId;
    this.output.appendLine(`[tandem-vscode] server ${init.serverInfo.name} ${init.serverInfo.version} pid ${client.pid} ready (${init.models.length} models)`);
    const attach = this.attachInfo();
    if (attach) this.output.appendLine(`[tandem-vscode] other clients can attach at ${attach.url} with the token in ${attach.tokenFile} ("tandem: Share Session…")`);
    client.onEvent((e) => this.onEvent(e));
    // Negated so the Sessions command stays in the palette before the server runs and can tell.
    void vscode.commands.executeCommand('setContext', 'tandem.noSessionStore', !init.capabilities.sessionStore);
    this.state.setMeta({ server: 'ready', serverMessage: undefined, sessionStore: !!init.capabilities.sessionStore, models: init.models.map((m) => m.id), modelInfos: init.models });
    if (!previous) {
      this.showDraft();
      void this.offerLastSession();
    } else if (init.capabilities.sessionStore) {
      try {
        await this.loadSession(previous);
        this.publish(this.state.addNotice('info', 'The tandem server was restarted; this session was resumed from its store.'));
      } catch (err) {
        this.resetToDraft(`The tandem server was restarted but could not resume this session (${msg(err)}); the next prompt starts a new one.`);
      }
    } else {
      // No store to resume from. The next prompt creates the new session, as after "New Session".
      this.resetToDraft('The tandem server was restarted; the next prompt starts a new session (the server keeps no session store yet).');
    }
    this.refreshUi({ items: [], meta: true });
  }

  private onCrashed(info: ExitInfo, willRestart: boolean, attempt: number): void {
    this.client = undefined;
    this.dropPending();
    const why = `${formatExit(info.code, info.signal)}${info.stderrTail ? `: ${info.stderrTail.split('\n').slice(-3).join(' ')}` : ''}`;
    const text = willRestart
      ? `The tandem server crashed (${why}). Restarting it (attempt ${attempt}); the running turn was lost.`
      : `The tandem server crashed ${attempt} times in a minute (${why}). It was not restarted; see "tandem: Show Server Log", then run "tandem: Restart the Server".`;
    this.publish(this.state.addNotice('error', text));
    this.setServer(willRestart ? 'starting' : 'crashed', text);
    const actions = willRestart ? ['Show Log'] : ['Restart', 'Show Log'];
    void vscode.window.showWarningMessage(text, ...actions).then((a) => {
      if (a === 'Show Log') this.output.show(true);
      if (a === 'Restart') void this.restart();
    });
  }

  private onFailed(err: ServerStartError): void {
    this.client = undefined;
    this.output.appendLine(`[tandem-vscode] ${err.message}`);
    this.setServer('failed', err.message);
    const actions = err.kind === 'notFound' || err.kind === 'notExecutable' ? ['Open Settings', 'Retry'] : ['Open Settings', 'Show Log', 'Retry'];
    void vscode.window.showErrorMessage(err.message, ...actions).then((a) => {
      if (a === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'tandem.');
      if (a === 'Show Log') this.output.show(true);
      if (a === 'Retry') void this.restart();
    });
  }

  private setServer(server: 'starting' | 'ready' | 'crashed' | 'failed', serverMessage?: string): void {
    this.publish(this.state.setMeta({ server, serverMessage }));
  }

  /** Approvals and questions die with their turn: close their editors and pickers. */
  private dropPending(): void {
    void this.diffs.closeAll();
    for (const q of this.questions.values()) q.cancel();
    this.questions.clear();
    if (this.state.meta.turn !== 'idle') this.publish(this.state.setMeta({ turn: 'idle' }));
  }

  // ---- sessions ---------------------------------------------------------------------------------------

  private requireClient(): TandemClient {
    if (!this.client?.running) {
      throw new Error(
        this.state.meta.serverMessage ?? 'The tandem server is not running. Run "tandem: Restart the Server" (and see "tandem: Show Server Log").',
      );
    }
    return this.client;
  }

  private requireSession(): { client: TandemClient; sessionId: string } {
    const sessionId = this.state.meta.sessionId;
    if (!sessionId) throw new Error('No tandem session is open yet: the first prompt starts one.');
    return { client: this.requireClient(), sessionId };
  }

  private defaultMode(): Mode {
    return vscode.workspace.getConfiguration('tandem').get<Mode>('defaultMode') ?? 'ask';
  }

  private knownModel(id: string | undefined): string | undefined {
    return id && this.init?.models.some((m) => m.id === id) ? id : undefined;
  }

  /** Shows what the first prompt's session will use: the picked model and mode, else the defaults. */
  private showDraft(): void {
    const model = this.init ? (this.knownModel(this.draft.model) ?? this.init.defaultModel) : this.draft.model;
    this.publish(this.state.setMeta({ model, mode: this.draft.mode ?? this.defaultMode() }));
  }

  /** An empty chat with no session yet; the model in use carries over to the next session, the mode does not. */
  private resetToDraft(notice?: string): void {
    this.dropPending();
    this.draft = { model: this.state.meta.model };
    this.state.reset();
    if (notice) this.state.addNotice('info', notice);
    this.showDraft();
    this.bridge.resync();
    this.refreshUi({ items: [], meta: true });
    void this.offerLastSession();
  }

  /** "New Session": stops a running turn and empties the chat; the server sees nothing until the next prompt. */
  async newSession(): Promise<void> {
    const { sessionId, turn } = this.state.meta;
    if (sessionId && turn !== 'idle' && this.client?.running) await this.client.stop(sessionId).catch(() => undefined);
    this.resetToDraft();
  }

  /** The current session, created by session/new when there is none (the first prompt of a draft). */
  private session(client: TandemClient): Promise<string> {
    const current = this.state.meta.sessionId;
    if (current) return Promise.resolve(current);
    this.creating ??= (async () => {
      const s = await client.newSession(this.cwd, this.knownModel(this.draft.model), this.draft.mode ?? this.defaultMode());
      // Not a reset: notices shown in the draft (a restart, an error) stay above the first prompt.
      this.publish(this.state.setMeta({ sessionId: s.sessionId, model: s.model, mode: s.mode, networkAccess: false }));
      const network = this.draft.network;
      this.draft = {};
      // Sessions start with the network closed; one opened in the draft is opened before the first turn.
      if (network) this.publish(this.state.setMeta({ networkAccess: (await client.setNetworkAccess(s.sessionId, true)).allow }));
      void this.loadMcpStatus(client, s.sessionId);
      // Asked before the first prompt goes, so that hooks the user trusts already run in its turn.
      await this.checkHooks(client, s.sessionId);
      return s.sessionId;
    })().finally(() => (this.creating = undefined));
    return this.creating;
  }

  async loadSession(sessionId: string): Promise<void> {
    const client = this.requireClient();
    // A long history comes in pages, newest first: fetch them all so the resumed chat shows everything.
    const s = await loadAllPages((cursor) => client.loadSession(sessionId, cursor));
    this.dropPending();
    this.draft = {};
    this.state.reset({ sessionId: s.sessionId, model: s.model, mode: s.mode });
    this.state.setMeta({ networkAccess: s.networkAccess ?? false });
    this.state.loadHistory(s.messages ?? []);
    this.state.loadUsage(s.usage, s.messages ?? []);
    this.state.loadPlan(s.plan);
    this.bridge.resync();
    this.refreshUi({ items: [], meta: true });
    void this.loadMcpStatus(client, s.sessionId);
    void this.checkHooks(client, s.sessionId);
  }

  /** A command block's button (the session `/fork` made): the chat switches to that session. */
  async openSession(sessionId: string): Promise<void> {
    await this.server();
    await this.loadSession(sessionId);
    this.publish(this.state.addNotice('info', 'Opened the forked session; the session it came from is unchanged (tandem: Sessions lists both).'));
  }

  /** The folder as the store keeps it: session/list compares canonical paths as strings (protocol.md). */
  private canonicalCwd(): string {
    try {
      return fs.realpathSync(this.cwd);
    } catch {
      return this.cwd;
    }
  }

  /**
   * While the chat is an empty draft, offers the newest stored session of this folder ("Resume last session" in
   * the chat). session/list only reads the store: nothing is created, and a session never prompted is not listed.
   */
  private async offerLastSession(): Promise<void> {
    if (!this.client?.running || !this.init?.capabilities.sessionStore || this.state.meta.sessionId) return;
    try {
      const [newest] = sessionPickItems((await this.client.listSessions(this.canonicalCwd())).sessions);
      if (this.state.meta.sessionId || this.state.items.some((i) => i.type !== 'notice')) return;
      this.publish(this.state.setMeta({ lastSession: newest && { sessionId: newest.sessionId, title: newest.label, updatedAt: newest.updatedAt } }));
    } catch (err) {
      this.output.appendLine(`[tandem-vscode] could not list sessions for "Resume last session": ${msg(err)}`);
    }
  }

  /** "Resume last session": the newest stored session of this folder. */
  async resumeLast(): Promise<void> {
    const client = await this.server();
    if (!this.init?.capabilities.sessionStore) throw new Error('This tandem server keeps no session store, so there is no session to resume. Update tandem.');
    const [newest] = sessionPickItems((await client.listSessions(this.canonicalCwd())).sessions);
    if (!newest) {
      void vscode.window.showInformationMessage('tandem has no past sessions for this folder yet: the first prompt starts one.');
      return;
    }
    await this.loadSession(newest.sessionId);
  }

  async pickSession(): Promise<void> {
    const client = await this.server();
    if (!this.init?.capabilities.sessionStore) {
      throw new Error('This tandem server keeps no session store yet, so past sessions cannot be resumed. Update tandem.');
    }
    const { sessions } = await client.listSessions(this.canonicalCwd());
    if (!sessions.length) {
      void vscode.window.showInformationMessage('tandem has no past sessions for this folder yet.');
      return;
    }
    // Newest first, by title (the session's first prompt) and date; sorted here too, not only trusted to the server.
    const pick = await vscode.window.showQuickPick(sessionPickItems(sessions, this.state.meta.sessionId), {
      title: 'Resume a tandem session (newest first)',
      matchOnDescription: true,
    });
    if (pick) await this.loadSession(pick.sessionId);
  }

  // ---- events -----------------------------------------------------------------------------------------

  private onEvent(e: SessionEvent): void {
    if (e.type === 'turnEnded') {
      for (const resolve of this.turnEndWaiters.splice(0)) resolve();
    }
    // A draft has no session, so any event belongs to one left behind (a turn stopped by New Session).
    if (!this.state.meta.sessionId) return;
    const change = this.state.apply(e);
    this.publish(change);
    switch (e.type) {
      case 'approvalRequested': {
        if (e.diff?.length) {
          // A proposal too large to show in full is cut: the server refuses an edited version of it.
          this.diffs.add(e.requestId, this.cwd, e.diff, { readOnly: isTooLargeToEdit(e.reason) });
          if (vscode.workspace.getConfiguration('tandem').get<boolean>('openDiffOnApproval', true)) {
            void this.diffs.open(e.requestId).catch((err) => this.showError(`Could not open the diff: ${msg(err)}`));
          }
        }
        this.revealChat();
        break;
      }
      case 'approvalResolved':
        void this.diffs.close(e.requestId);
        break;
      case 'questionAsked': {
        this.revealChat();
        const answer = (a: string) => void this.answer(e.requestId, a).catch((err) => this.showError(msg(err)));
        this.questions.set(
          e.requestId,
          e.plan !== undefined ? reviewPlan(this.plans, e.requestId, e.plan, answer) : askQuestion(e.question, e.choices, answer),
        );
        break;
      }
      case 'turnEnded':
        this.dropPending();
        break;
      case 'mcpStatus':
        if (e.status === 'untrusted') this.announceUntrusted(e.server);
        break;
    }
  }

  private publish(change: Change): void {
    this.bridge.publish(change);
    if (change.meta) this.refreshUi(change);
  }

  private refreshUi(_change: Change): void {
    const m = this.state.meta;
    const pending = this.state.pendingApprovals();
    const running = m.turn !== 'idle';
    void vscode.commands.executeCommand('setContext', 'tandem.turnRunning', running);
    void vscode.commands.executeCommand('setContext', 'tandem.hasPendingApproval', pending.length > 0);
    void vscode.commands.executeCommand('setContext', 'tandem.pendingApprovalIsShell', pending.some((p) => hasDecision(p.approval!.options, 'alwaysCommand')));
    void vscode.commands.executeCommand('setContext', 'tandem.hasPendingQuestion', this.state.pendingQuestions().length > 0);
    const icon =
      m.server === 'failed' || m.server === 'crashed'
        ? '$(error)'
        : m.server === 'notStarted'
          ? '$(hubot)'
          : m.server === 'starting'
          ? '$(loading~spin)'
          : m.turn === 'running'
            ? '$(sync~spin)'
            : m.turn === 'idle'
              ? '$(hubot)'
              : '$(bell-dot)';
    const turn =
      m.server !== 'ready'
        ? { notStarted: 'not started', starting: 'starting', crashed: 'server down', failed: 'server down' }[m.server]
        : { idle: 'idle', running: 'running', awaitingApproval: 'approval needed', awaitingAnswer: 'question' }[m.turn];
    // A listening server takes other clients (anyone with its token): the broadcast mark keeps that in sight.
    const attach = m.server === 'ready' ? this.attachInfo() : undefined;
    this.status.text = `${icon} tandem: ${m.model ?? '—'} · ${turn}${attach ? ' $(broadcast)' : ''}`;
    this.status.tooltip = `tandem — model ${m.model ?? 'none'}, mode ${m.mode ?? '—'}, turn ${turn}. Click to open the chat.${attachTooltip(attach)}`;
    this.status.backgroundColor =
      m.turn === 'awaitingApproval' || m.turn === 'awaitingAnswer' ? new vscode.ThemeColor('statusBarItem.warningBackground') : m.server === 'failed' || m.server === 'crashed' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
    const mcp = mcpSummary(m.sessionId && m.server === 'ready' ? m.mcp : undefined);
    if (mcp) {
      this.mcpStatus.text = `${mcp.warning ? '$(warning)' : '$(plug)'} ${mcp.label}`;
      this.mcpStatus.tooltip = `tandem MCP servers (click for details)\n${mcp.tooltip}`;
      this.mcpStatus.backgroundColor = mcp.warning ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
      this.mcpStatus.show();
    } else {
      this.mcpStatus.hide();
    }
  }

  // ---- hooks ------------------------------------------------------------------------------------------------

  /**
   * After session/new or session/load: the session's hooks (hooks/list). When the workspace has hook files the
   * user has not trusted (their commands would run outside the sandbox), a modal lists them with Trust / Not now,
   * once per folder and content in this window. A server without the method (older tandem) has no hooks.
   */
  private async checkHooks(client: TandemClient, sessionId: string): Promise<void> {
    let r: HooksListResult;
    try {
      r = await client.hooksList(sessionId);
    } catch (err) {
      this.output.appendLine(`[tandem-vscode] hooks/list failed: ${msg(err)}`);
      return;
    }
    if (this.state.meta.sessionId !== sessionId || !needsTrust(r)) return;
    const key = trustKey(this.cwd, r);
    if (this.hooksAsked.has(key)) return;
    this.hooksAsked.add(key);
    try {
      await this.askTrustHooks(client, sessionId, r);
    } catch (err) {
      this.showError(`Could not trust the project hooks: ${msg(err)}`);
    }
  }

  /** The trust prompt (modal): the project hook files and commands, Trust / Not now. Trust sends hooks/trust. */
  private async askTrustHooks(client: TandemClient, sessionId: string, r: HooksListResult): Promise<boolean> {
    const { message, detail } = trustText(r);
    const trust: vscode.MessageItem = { title: 'Trust' };
    const later: vscode.MessageItem = { title: 'Not now', isCloseAffordance: true };
    const a = await vscode.window.showWarningMessage(message, { modal: true, detail }, trust, later);
    if (a !== trust) {
      this.publish(this.state.addNotice('warning', `The project hooks (${r.projectFiles.join(', ')}) were not trusted, so they do not run. To trust them later: tandem: Trust Project Hooks.`));
      return false;
    }
    await client.hooksTrust(sessionId);
    this.output.appendLine(`[tandem-vscode] trusted the project hooks of ${this.cwd}: ${r.projectFiles.join(', ')}`);
    this.publish(this.state.addNotice('info', `Trusted the project hooks (${r.projectFiles.join(', ')}): they run from now on, in later sessions of this folder too, until the files change.`));
    return true;
  }

  /** The session's hooks, or a message saying why there are none to show (no session yet, an older server). */
  private async sessionHooks(): Promise<{ client: TandemClient; sessionId: string; hooks: HooksListResult } | undefined> {
    const sessionId = this.state.meta.sessionId;
    if (!sessionId || !this.client?.running) {
      void vscode.window.showInformationMessage('tandem: hooks are read when a session starts, and the first prompt starts one. Send a prompt, then look again.');
      return undefined;
    }
    const client = this.client;
    try {
      return { client, sessionId, hooks: await client.hooksList(sessionId) };
    } catch (err) {
      if (errorKind(err) === 'methodNotFound' || (err as { code?: unknown })?.code === -32601) throw new Error('This tandem server has no hooks: update tandem.');
      throw err;
    }
  }

  /** "Trust Project Hooks": the same prompt as at session start, asked again (also after "Not now"). */
  async trustHooks(): Promise<void> {
    const s = await this.sessionHooks();
    if (!s) return;
    if (!s.hooks.projectFiles?.length) {
      void vscode.window.showInformationMessage('tandem: this workspace has no project hooks (.tandem/hooks.json, or hooks in .claude/settings.json or .claude/settings.local.json): nothing to trust.');
      return;
    }
    if (s.hooks.trusted) {
      void vscode.window.showInformationMessage(`tandem: the project hooks (${s.hooks.projectFiles.join(', ')}) are trusted already.`);
      return;
    }
    this.hooksAsked.add(trustKey(this.cwd, s.hooks));
    await this.askTrustHooks(s.client, s.sessionId, s.hooks);
  }

  /** "Show Hooks": every hook of the session (event, matcher, command, where from, whether it runs). */
  async showHooks(): Promise<void> {
    const s = await this.sessionHooks();
    if (!s) return;
    const r = s.hooks;
    if (!r.hooks.length) {
      void vscode.window.showInformationMessage('tandem: this session has no hooks. Define them in .tandem/hooks.json of the workspace, or in your tandem config.');
      return;
    }
    const untrusted = needsTrust(r);
    const trustRow = { label: '$(shield) Trust the project hooks…', description: 'they run outside the sandbox', detail: '', hook: undefined };
    const rows = [...(untrusted ? [trustRow] : []), ...hookPickItems(r)];
    const pick = await vscode.window.showQuickPick(rows, {
      title: `tandem: hooks of this session${untrusted ? ' (the project hooks wait for trust and do not run)' : ''}`,
      matchOnDescription: true,
      matchOnDetail: true,
    });
    if (!pick) return;
    if (!pick.hook) {
      this.hooksAsked.add(trustKey(this.cwd, r));
      await this.askTrustHooks(s.client, s.sessionId, r);
      return;
    }
    void vscode.window.showInformationMessage(`tandem hook ${hookSummary(pick.hook)} — ${pick.description}`);
  }

  // ---- slash commands ---------------------------------------------------------------------------------------

  /**
   * The slash commands for the prompt box's completion, posted to the chat (`commands`): the session's list as
   * last fetched at once, then fresh from commands/list (read again at each fresh `/`, so a new command file
   * shows up). A draft has no session to ask: it gets the built-ins, with a note.
   */
  async listCommands(): Promise<void> {
    const sessionId = this.state.meta.sessionId;
    if (!sessionId) {
      this.bridge.send({ type: 'commands', commands: [...BUILTIN_COMMANDS], note: "The project's and your own commands are listed once the first prompt has started the session." });
      return;
    }
    const cached = this.commandCache?.sessionId === sessionId ? this.commandCache.commands : undefined;
    if (cached) this.bridge.send({ type: 'commands', commands: cached });
    try {
      const commands = await this.fetchCommands(this.requireClient(), sessionId);
      if (this.state.meta.sessionId === sessionId) this.bridge.send({ type: 'commands', commands });
    } catch (err) {
      const noMethod = errorKind(err) === 'methodNotFound' || (err as { code?: unknown })?.code === -32601;
      this.bridge.send({ type: 'commands', commands: cached ?? [], error: noMethod ? 'This tandem server has no slash commands: update tandem.' : msg(err) });
    }
  }

  private async fetchCommands(client: TandemClient, sessionId: string): Promise<SlashCommand[]> {
    const { commands } = await client.commandsList(sessionId);
    this.commandCache = { sessionId, commands: commands ?? [] };
    return this.commandCache.commands;
  }

  /**
   * The command a prompt runs, if its text starts with `/name` of a command of the session (the list as last
   * fetched, fetched now if that is not this session's). Undefined for any other text, also when the list cannot
   * be had: the text is then sent as a prompt, which the server runs as a command all the same.
   */
  private async slashCommand(client: TandemClient, sessionId: string, text: string): Promise<string | undefined> {
    if (!/^\/[^\s/]/.test(text)) return undefined;
    const commands = this.commandCache?.sessionId === sessionId ? this.commandCache.commands : await this.fetchCommands(client, sessionId).catch(() => []);
    return commandOf(text, commands);
  }

  /** What a command changed that no event reports: `/mode NAME` switched the session's mode. */
  private afterCommand(name: string, text: string): void {
    const arg = text.trim().split(/\s+/)[1];
    if (name === 'mode' && arg && (MODES as readonly string[]).includes(arg)) {
      this.publish(this.state.setMeta({ mode: arg as Mode }));
    }
  }

  // ---- MCP servers --------------------------------------------------------------------------------------

  /**
   * The session's MCP servers from `mcp/status`, when a session was created or loaded: its `mcpStatus` events
   * may have come before the extension knew the session (they start right after the response). A server
   * without the method (older tandem) has no MCP servers to show.
   */
  private async loadMcpStatus(client: TandemClient, sessionId: string): Promise<void> {
    let servers: McpServerInfo[];
    try {
      servers = (await client.mcpStatus(sessionId)).servers ?? [];
    } catch (err) {
      this.output.appendLine(`[tandem-vscode] mcp/status failed: ${msg(err)}`);
      return;
    }
    if (this.state.meta.sessionId !== sessionId) return;
    this.publish(this.state.setMeta({ mcp: servers }));
    for (const s of servers) if (s.status === 'untrusted') this.announceUntrusted(s.name);
  }

  /** Once per server and folder in this window: a notification offering to trust a .mcp.json server. */
  private announceUntrusted(name: string): void {
    const key = `${this.cwd}\0${name}`;
    if (this.mcpAnnounced.has(key)) return;
    this.mcpAnnounced.add(key);
    void Promise.resolve(vscode.window.showWarningMessage(untrustedNotice(name), 'Trust and start', 'Show MCP Servers')).then((a) => {
      if (a === 'Trust and start') void this.trustMcp(name).catch((err) => this.showError(msg(err)));
      if (a === 'Show MCP Servers') void this.pickMcpServer().catch((err) => this.showError(msg(err)));
    });
  }

  /** Trusts a server of the workspace's .mcp.json (remembered for the folder) and starts it; mcpStatus events follow. */
  async trustMcp(name: string): Promise<void> {
    const { client, sessionId } = this.requireSession();
    const server = this.state.meta.mcp?.find((s) => s.name === name);
    if (server && server.status !== 'untrusted') return;
    await client.mcpTrust(sessionId, name);
    this.output.appendLine(`[tandem-vscode] trusted the MCP server ${name} of ${this.cwd}/.mcp.json`);
  }

  /** "tandem: MCP Servers": each server with status, source, tools and error; untrusted ones can be trusted here. */
  async pickMcpServer(): Promise<void> {
    const sessionId = this.state.meta.sessionId;
    if (!sessionId || !this.client?.running) {
      void vscode.window.showInformationMessage('tandem: MCP servers start with a session, and the first prompt starts one. Send a prompt, then look again.');
      return;
    }
    await this.loadMcpStatus(this.client, sessionId);
    const servers = this.state.meta.mcp ?? [];
    if (!servers.length) {
      void vscode.window.showInformationMessage(
        "tandem: this session has no MCP servers. Add one as [mcp_servers.NAME] in tandem's config file, or in the workspace's .mcp.json.",
      );
      return;
    }
    const summary = mcpSummary(servers)!;
    const pick = await vscode.window.showQuickPick(mcpPickItems(servers), { title: `tandem ${summary.label}: MCP servers of this session`, matchOnDescription: true, matchOnDetail: true });
    if (!pick) return;
    if (pick.action === 'trust') return this.trustMcp(pick.server);
    const s = (this.state.meta.mcp ?? []).find((x) => x.name === pick.server);
    if (!s) return;
    // The detail row of a Quick Pick may be cut; the message holds the whole error.
    const text = `tandem: ${mcpServerDetails(s)}`;
    if (s.status === 'untrusted') {
      const a = await vscode.window.showWarningMessage(text, 'Trust and start');
      if (a === 'Trust and start') await this.trustMcp(s.name);
    } else if (s.status === 'failed' || s.status === 'exited') {
      const a = await vscode.window.showErrorMessage(text, 'Show Log');
      if (a === 'Show Log') this.output.show(true);
    } else {
      void vscode.window.showInformationMessage(text);
    }
  }

  // ---- actions ----------------------------------------------------------------------------------------

  /**
   * The prompt as sent: the text, the selection (the Prompt command's, or `@selection`), each `@file` mentioned
   * that exists in the folder (its text in a fenced block), and pasted or attached images as image parts.
   * A mention that names no readable file stays plain text; one over 256 KiB is refused with the cause.
   */
  private async buildPrompt(text: string, selection?: SelectionContext, images: { mimeType: string; data: string }[] = []): Promise<{ content: string | PromptPart[]; shown: string }> {
    const sel = selection ?? (mentions(text).includes('selection') ? this.mentionedSelection : undefined);
    let body = promptWithSelection(text, sel);
    const attached: string[] = [];
    for (const m of mentions(text)) {
      if (m === 'selection') continue;
      const abs = path.resolve(this.cwd, m);
      if (path.relative(this.cwd, abs).startsWith('..')) continue;
      let stat: fs.Stats;
      try {
        stat = await fs.promises.stat(abs);
      } catch {
        continue;
      }
      if (!stat.isFile()) continue;
      if (stat.size > 256 * 1024) throw new Error(`@${m} is ${Math.round(stat.size / 1024)} KiB, over the 256 KiB a mention attaches: mention a smaller file, or ask tandem to read the part you need.`);
      body += `\n\n${fileContext(m, await fs.promises.readFile(abs, 'utf8'))}`;
      attached.push(m);
    }
    if (sel === this.mentionedSelection) this.mentionedSelection = undefined;
    const notes = [sel ? `the selection from ${sel.path}` : '', ...attached.map((a) => `@${a}`), images.length ? `${images.length} image(s)` : ''].filter(Boolean);
    const shown = notes.length ? `${text}\n(with ${notes.join(', ')})` : text;
    if (!images.length) return { content: body, shown };
    return { content: [{ type: 'text', text: body }, ...images.map((i) => ({ type: 'image' as const, mimeType: i.mimeType, data: i.data }))], shown };
  }

  /** `@` in the prompt box: a file of the folder (or the editor's selection) to mention, as the text to insert. */
  async pickMention(): Promise<string | undefined> {
    const files = await vscode.workspace.findFiles('**/*', '{**/node_modules/**,**/.git/**,**/target/**,**/dist/**,**/out/**}', 5000);
    const items: (vscode.QuickPickItem & { mention: string })[] = [];
    const sel = currentSelectionContext();
    if (sel) items.push({ label: '$(selection) selection', description: `${sel.path}, lines ${sel.startLine}-${sel.endLine}`, mention: 'selection' });
    for (const f of files) {
      const rel = path.relative(this.cwd, f.fsPath);
      if (!rel.startsWith('..')) items.push({ label: rel, mention: rel });
    }
    items.sort((a, b) => (a.mention === 'selection' ? -1 : b.mention === 'selection' ? 1 : a.label.localeCompare(b.label)));
    const pick = await vscode.window.showQuickPick(items, { title: 'Mention a file (its text goes to the model with the prompt)', matchOnDescription: true });
    if (!pick) return undefined;
    if (pick.mention === 'selection') this.mentionedSelection = sel;
    return pick.mention;
  }

  /** The network switch: lets the session's shell commands use the network, or not (closed by default). */
  async toggleNetwork(): Promise<void> {
    const sessionId = this.state.meta.sessionId;
    if (!sessionId) {
      this.draft.network = !this.draft.network;
      this.publish(this.state.setMeta({ networkAccess: this.draft.network }));
      this.publish(this.state.addNotice('network', `Network access for shell commands: ${this.draft.network ? 'allowed' : 'closed'} (applied when the first prompt starts the session).`));
      return;
    }
    const { client } = this.requireSession();
    const r = await client.setNetworkAccess(sessionId, !this.state.meta.networkAccess);
    // The server announces a change with a notice{kind:"network"} event; the header shows the value in force.
    this.publish(this.state.setMeta({ networkAccess: r.allow }));
  }

  async prompt(text: string, selection?: SelectionContext, images: { mimeType: string; data: string }[] = []): Promise<void> {
    const running = this.state.meta.sessionId && this.state.meta.turn !== 'idle';
    // A slash command goes as a prompt while a turn runs too (the server says what it cannot run then); other text steers.
    if (running && !(this.client?.running && (await this.slashCommand(this.client, this.state.meta.sessionId!, text)))) {
      try {
        return await this.steer(text);
      } catch (err) {
        // The turn ended between what the chat showed and the server's answer: the text becomes
        // the next prompt instead of an error.
        if (!(err instanceof NoTurnToSteer)) throw err;
      }
    }
    const slash = /^\/[^\s/]/.test(text);
    // A mention too large is refused before anything is sent; a text starting with `/` waits for the command list.
    let built = slash ? undefined : await this.buildPrompt(text, selection, images);
    const client = await this.server();
    const sessionId = await this.session(client);
    const command = slash ? await this.slashCommand(client, sessionId, text) : undefined;
    // A command gets its text as typed: the command file says what to read, so mentions, the selection and images
    // are not attached to it.
    built ??= command ? { content: text, shown: text } : await this.buildPrompt(text, selection, images);
    if (command && (images.length || selection)) {
      this.publish(this.state.addNotice('warning', `/${command} is a command: it was sent as typed, without the ${images.length ? 'images' : 'selection'} attached to it.`));
    }
    const content = built.content;
    const model = this.init?.models.find((m) => m.id === this.state.meta.model);
    if (!command && images.length && model && !model.vision) {
      this.publish(this.state.addNotice('warning', `${model.id} does not see images: the server sends it a placeholder instead and keeps the images for a model that does (Switch Model).`));
    }
    const added = this.state.addUser(built.shown, false, text);
    this.publish(added);
    // The response names the turn: the chat offers the turn's actions on this prompt from then on. A command that
    // needs no turn answers with its output instead, which takes the prompt's place in the chat.
    const itemId = this.state.items[added.items[0]].id;
    const admitted = (r: PromptResult) => {
      if (r.turnId) this.publish(this.state.setTurnOf(itemId, r.turnId));
      else if (r.command) this.publish(this.state.commandResult(itemId, r.command));
      if (r.command) this.afterCommand(r.command.name, text);
    };
    if (command) return this.runCommand(client, sessionId, content, itemId, command, admitted);
    // A prompt can meet a turn the chat has not seen yet: a running one takes the text as a steer;
    // one that is already ending (it refuses both a prompt and a steer until its turnEnded) is
    // waited for, and the text then starts the next turn. Either way the text is not lost.
    try {
      admitted(await client.prompt(sessionId, content));
      return;
    } catch (err) {
      if (errorKind(err) !== 'turnInProgress') throw err;
    }
    const ended = new Promise<void>((resolve) => this.turnEndWaiters.push(resolve));
    try {
      await client.steer(sessionId, typeof content === 'string' ? content : text);
      return;
    } catch (err) {
      if (errorKind(err) !== 'noTurnRunning') throw err;
    }
    await ended;
    admitted(await client.prompt(sessionId, content));
  }

  /**
   * Sends a slash command. Its refusal is shown in its block in the chat (an unknown model, an invalid mode, …);
   * a running turn's (`turnInProgress`) comes with the offer to stop the turn and run the command then.
   */
  private async runCommand(client: TandemClient, sessionId: string, content: string | PromptPart[], itemId: string, name: string, admitted: (r: PromptResult) => void): Promise<void> {
    try {
      admitted(await client.prompt(sessionId, content));
      return;
    } catch (err) {
      try {
        if (errorKind(err) === 'turnInProgress' && (await this.offerStop(err, `run /${name}`))) {
          admitted(await client.prompt(sessionId, content));
          return;
        }
        this.publish(this.state.commandFailed(itemId, name, msg(err)));
      } catch (again) {
        this.publish(this.state.commandFailed(itemId, name, msg(again)));
      }
    }
  }

  async steer(text: string): Promise<void> {
    if (!this.state.meta.sessionId) throw new Error('No turn is running, so there is nothing to steer: send it as a prompt instead.');
    const { client, sessionId } = this.requireSession();
    try {
      await client.steer(sessionId, text);
      this.publish(this.state.addUser(text, true));
      // The turn is parked on the user: the steer reaches the model only once they answered, so say so.
      const waitingOn = this.state.pendingApprovals().length ? 'the pending approval' : this.state.pendingQuestions().length ? 'the pending question' : undefined;
      if (waitingOn) {
        this.publish(this.state.addNotice('steering', `Steering queued: the agent reads it at its next step, after you answer ${waitingOn} above.`));
      }
    } catch (err) {
      if (errorKind(err) === 'noTurnRunning') throw new NoTurnToSteer();
      throw err;
    }
  }

  async stop(): Promise<void> {
    if (!this.state.meta.sessionId) {
      void vscode.window.setStatusBarMessage('tandem: no turn was running', 3000);
      return;
    }
    const { client, sessionId } = this.requireSession();
    const r = await client.stop(sessionId);
    if (!r.stopped) void vscode.window.setStatusBarMessage('tandem: no turn was running', 3000);
  }

  /** Re-runs the last turn after a provider error (the server refuses otherwise). */
  async retry(): Promise<void> {
    if (!this.state.meta.sessionId) throw new Error('Nothing to retry: no turn has run in this chat yet.');
    const { client, sessionId } = this.requireSession();
    try {
      await client.retry(sessionId);
    } catch (err) {
      if (errorKind(err) === 'retryUnavailable') throw new Error('Nothing to retry: the last turn did not end in a provider error.');
      throw err;
    }
  }

  // ---- checkpoints: a turn's changes, undo, edit & resend, fork ------------------------------------------

  /** A turn action from the chat (the turn's buttons) or a command (with a turn id, or the last turn without). */
  async turnAction(action: TurnAction, turnId?: string): Promise<void> {
    switch (action) {
      case 'showChanges':
        return this.showTurnChanges(turnId);
      case 'undo':
        return this.undoTurn(turnId);
      case 'edit':
        return this.startEdit(turnId);
      case 'fork':
        return this.forkSession(turnId ?? null);
    }
  }

  /**
   * The turn a command acts on, with its prompt: the one named, else the newest turn of the conversation as the
   * server lists it (session/checkpoints: the chat may not show every turn, another client may have added some).
   */
  private async turnOrLast(turnId?: string): Promise<{ turnId: string; prompt?: string }> {
    const item = turnId && this.state.promptOf(turnId);
    if (item) return { turnId: turnId!, prompt: item.draft ?? item.text };
    const { client, sessionId } = this.requireSession();
    const { checkpoints } = await client.checkpoints(sessionId).catch(checkpointError);
    const cp = turnId ? checkpoints.find((c) => c.turnId === turnId) : checkpoints.at(-1);
    if (cp) return { turnId: cp.turnId, prompt: cp.prompt };
    // A turn the server does not list: its own request names the error (unknownTurn).
    if (turnId) return { turnId };
    throw new Error('This session has no turn yet: nothing to act on.');
  }

  /** A turn's prompt as the user typed it, if the chat shows it. */
  private promptText(turnId: string): string | undefined {
    const item = this.state.promptOf(turnId);
    return item ? (item.draft ?? item.text) : undefined;
  }

  /** A turn as messages name it: its prompt in quotes. */
  private labelOf(turnId: string): string {
    return turnLabel(this.promptText(turnId));
  }

  /** "Show changes": everything the turn changed (turn/diff), in the multi-file diff editor. */
  async showTurnChanges(turnId?: string): Promise<void> {
    const { client, sessionId } = this.requireSession();
    const t = await this.turnOrLast(turnId);
    const { files } = await client.turnDiff(sessionId, t.turnId).catch(checkpointError);
    await this.turnChanges.show(t.turnId, turnLabel(t.prompt), this.cwd, files);
  }

  /** "Undo turn": asks what to put back (files, conversation or both), then rewinds to before the turn. */
  async undoTurn(turnId?: string): Promise<void> {
    const t = await this.turnOrLast(turnId);
    const label = turnLabel(t.prompt);
    const pick = await vscode.window.showQuickPick(
      RESTORE_PICKS.map((p) => ({ ...p })),
      { title: `Undo ${label} and every later turn: put back what?`, placeHolder: 'Files and conversation, files only, or conversation only' },
    );
    if (!pick) return;
    await this.rewindTo(t.turnId, pick.restore, t.prompt);
  }

  /**
   * `session/rewind` to before `turnId`. The chat drops the rewound turns at once when the conversation was
   * rewound (the server's `rewound` events repeat it; see ChatState.rewind). Files changed since by someone else
   * are conflicts: listed, with Force to put them back anyway. A running turn refuses a rewind: the user may stop it
   * and go on. Resolves undefined when nothing was rewound (the user did not stop the turn).
   *
   * `both` is sent as two requests, `files` and then `conversation`, so a conflict's Force (or the user keeping the
   * files) is settled while the turn is still in the chat, before the conversation goes. (The server would also
   * accept the forced files rewind after a `both`, for other clients.)
   */
  async rewindTo(turnId: string, restore: RestoreScope, prompt = this.promptText(turnId)): Promise<RewindResult | undefined> {
    const { client, sessionId } = this.requireSession();
    const label = turnLabel(prompt);
    const first: RestoreScope = restore === 'both' ? 'files' : restore;
    let r: RewindResult;
    try {
      r = await client.rewind(sessionId, turnId, first).catch(checkpointError);
    } catch (err) {
      if (!(await this.offerStop(err, `undo ${label}`))) return undefined;
      return this.rewindTo(turnId, restore, prompt);
    }
    // Shown from the answers, not at the `rewound` events: a prompt sent right after (Edit & resend) must land
    // after the cut. Their events then change nothing.
    this.state.expectEcho(turnId, first);
    const restored = [...r.restored];
    let conflicts = r.conflicts;
    let kept: string[] = [];
    if (conflicts.length) {
      const forced = await this.forceConflicts(turnId, conflicts, label);
      if (forced) {
        restored.push(...forced.restored);
        conflicts = forced.conflicts;
      } else {
        kept = conflicts.map((c) => c.path);
      }
    }
    let conversationRewound = r.conversationRewound;
    if (restore === 'both') {
      conversationRewound = (await client.rewind(sessionId, turnId, 'conversation').catch(checkpointError)).conversationRewound;
      this.state.expectEcho(turnId, 'conversation');
    }
    if (this.state.meta.sessionId === sessionId) {
      const shown: RestoreScope = restore === 'files' || !conversationRewound ? 'files' : restore;
      if (restore !== 'conversation' || conversationRewound) this.publish(this.state.rewind(turnId, shown, restored, prompt));
      if (kept.length) this.publish(this.state.addNotice('warning', `Left as they are (changed since this session wrote them): ${kept.join(', ')}.`));
      if (!kept.length && !conflicts.length) void vscode.window.setStatusBarMessage(`tandem: undid ${label}`, 4000);
    }
    if (conflicts.length && !kept.length) {
      // What even force cannot put back: content that was never captured (over 5 MiB, unreadable).
      void vscode.window.showErrorMessage(`tandem could not put back ${conflicts.map((c) => `${c.path} (${c.reason})`).join('; ')}`);
    }
    return { restored, conflicts, conversationRewound };
  }

  /**
   * Lists a rewind's conflicts (path and reason) and offers Force, which sends the files rewind again with
   * `force: true`. Resolves its answer, or undefined when the user keeps the files as they are.
   */
  private async forceConflicts(turnId: string, conflicts: RewindResult['conflicts'], label: string): Promise<RewindResult | undefined> {
    const { message, detail } = conflictText(conflicts, label);
    const a = await vscode.window.showWarningMessage(message, { modal: true, detail }, 'Force');
    if (a !== 'Force') return undefined;
    const { client, sessionId } = this.requireSession();
    const forced = await client.rewind(sessionId, turnId, 'files', true).catch(checkpointError);
    this.state.expectEcho(turnId, 'files');
    return forced;
  }

  /**
   * A refusal because a turn runs (turnInProgress): shows the server's message and offers to stop the turn.
   * Resolves true once the turn was stopped (the caller then tries again), false when the user left it running.
   * Any other error is thrown on.
   */
  private async offerStop(err: unknown, what: string): Promise<boolean> {
    if (errorKind(err) !== 'turnInProgress') throw err;
    const a = await vscode.window.showWarningMessage(`tandem: ${msg(err)}`, `Stop the Turn and ${what.charAt(0).toUpperCase()}${what.slice(1)}`);
    if (!a) return false;
    await this.stop();
    return true;
  }

  /**
   * "Edit & resend": the prompt box gets the turn's prompt (the newest prompt without a turn named); sending it
   * rewinds files and conversation to before that turn, then prompts with the edited text (editAndResend).
   */
  async startEdit(turnId?: string): Promise<void> {
    const item = turnId ? undefined : this.state.lastPrompt();
    const t = item?.turnId ? { turnId: item.turnId, prompt: item.draft ?? item.text } : await this.turnOrLast(turnId);
    this.publish(this.state.setMeta({ editing: { turnId: t.turnId, text: t.prompt ?? '', id: ++this.editSeq } }));
    this.revealChat(true);
    this.bridge.send({ type: 'focus' });
  }

  /** The prompt box left the edit (Cancel in the chat): the next send is an ordinary prompt. */
  cancelEdit(): void {
    if (this.state.meta.editing) this.publish(this.state.setMeta({ editing: undefined }));
  }

  /**
   * Sends an edited prompt in place of `turnId`'s: `session/rewind {restore: "both"}`, then `prompt` with the new
   * text. Nothing is sent when the rewind fails or a running turn was left running; conflicts the user chose not
   * to force do not stop it (the conversation was rewound already).
   */
  async editAndResend(turnId: string, text: string, images: { mimeType: string; data: string }[] = []): Promise<void> {
    const r = await this.rewindTo(turnId, 'both');
    if (!r) return;
    if (!r.conversationRewound) throw new Error('tandem did not rewind the conversation, so the edited prompt was not sent.');
    this.cancelEdit();
    await this.prompt(text, undefined, images);
  }

  /**
   * "Fork from here": a new session whose history is this one's up to (not including) `turnId` (`null`: the
   * whole history); the chat switches to it (session/load). Without a turn (the palette), a Quick Pick offers the
   * whole conversation or any turn to fork before.
   */
  async forkSession(turnId?: string | null): Promise<void> {
    const { client, sessionId } = this.requireSession();
    let target = turnId ?? undefined;
    let label = target ? this.labelOf(target) : undefined;
    if (turnId === undefined) {
      const { checkpoints } = await client.checkpoints(sessionId).catch(checkpointError);
      const whole = { label: '$(copy) The whole conversation', description: 'every turn', turnId: undefined as string | undefined, prompt: '' };
      const pick = await vscode.window.showQuickPick(
        [whole, ...checkpointPickItems(checkpoints).map((c) => ({ ...c, label: `$(history) Before “${c.label}”` }))],
        { title: 'Fork this session: the new one keeps the conversation up to…', matchOnDescription: true },
      );
      if (!pick) return;
      target = pick.turnId;
      label = target ? turnLabel(pick.prompt) : undefined;
    }
    let forked: { sessionId: string };
    try {
      forked = await client.fork(sessionId, target).catch(checkpointError);
    } catch (err) {
      if (!(await this.offerStop(err, 'fork'))) return;
      forked = await client.fork(sessionId, target).catch(checkpointError);
    }
    await this.loadSession(forked.sessionId);
    this.publish(
      this.state.addNotice('info', `Forked ${label ? `before ${label}` : 'the whole conversation'} into this new session; the session it came from is unchanged (tandem: Sessions lists both). Files were not touched.`),
    );
  }

  /** "Checkpoints": the session's turns (session/checkpoints), newest first; then what to do with the picked one. */
  async pickCheckpoint(): Promise<void> {
    const { client, sessionId } = this.requireSession();
    const { checkpoints } = await client.checkpoints(sessionId).catch(checkpointError);
    if (!checkpoints.length) {
      void vscode.window.showInformationMessage('tandem: this session has no turn yet.');
      return;
    }
    const turn = await vscode.window.showQuickPick(checkpointPickItems(checkpoints), { title: 'tandem: the turns of this session (newest first)', matchOnDescription: true, matchOnDetail: true });
    if (!turn) return;
    const actions: { label: string; action: TurnAction }[] = [
      { label: '$(diff-multiple) Show Changes', action: 'showChanges' },
      { label: '$(discard) Undo This Turn (and every later one)…', action: 'undo' },
      { label: '$(edit) Edit and Resend Its Prompt', action: 'edit' },
      { label: '$(repo-forked) Fork a Session Before It', action: 'fork' },
    ];
    const pick = await vscode.window.showQuickPick(actions, { title: `tandem: ${turnLabel(turn.prompt)}` });
    if (pick) await this.turnAction(pick.action, turn.turnId);
  }

  /** The approval a command acts on: explicit id, the diff editor's URI, or the only/oldest pending one. */
  resolveApproval(arg?: unknown): ToolItem | undefined {
    const pending = this.state.pendingApprovals();
    if (typeof arg === 'string') return pending.find((p) => p.approval!.requestId === arg);
    const fromUri = requestIdOf(arg instanceof vscode.Uri ? arg : vscode.window.activeTextEditor?.document.uri);
    if (fromUri) return pending.find((p) => p.approval!.requestId === fromUri);
    return pending[0];
  }

  async approve(requestId: string, decision: Decision, message?: string): Promise<void> {
    const { client, sessionId } = this.requireSession();
    const tool = this.state.toolByRequest(requestId);
    if (!tool?.approval || tool.approval.resolved) throw new Error('That approval is no longer pending (it was answered or the turn ended).');
    if (!hasDecision(tool.approval.options, decision)) {
      throw new Error(`"${DECISION_LABELS[decision]}" is not offered for ${tool.name}.`);
    }
    // The user's edits on the proposed side of the diff ride along as editedContent (allow decisions only), never
    // for a cut proposal: the server refuses it there (invalidParams), the user saw only part of the text.
    const single = tool.approval.diff?.length === 1 ? tool.approval.diff[0] : undefined;
    const editable = decision !== 'deny' && !!single && !isTooLargeToEdit(tool.approval.reason);
    const edited = editable ? editedContent(single.newText, this.diffs.edited(requestId)) : undefined;
    try {
      await client.approve(sessionId, requestId, decision, message, edited);
    } catch (err) {
      if (errorKind(err) === 'staleApproval') throw new Error('The server no longer waits for this approval (it was answered or the turn ended).');
      throw err;
    }
  }

  async deny(requestId: string, reason?: string): Promise<void> {
    await this.approve(requestId, 'deny', reason || undefined);
  }

  async answer(requestId: string, answer: string): Promise<void> {
    const { client, sessionId } = this.requireSession();
    this.questions.get(requestId)?.cancel();
    this.questions.delete(requestId);
    await client.answer(sessionId, requestId, answer);
    this.publish(this.state.markAnswered(requestId, answer));
    this.refreshUi({ items: [], meta: true });
  }

  /** Without a session the pick is remembered for the first prompt's session/new; the list needs the server. */
  async pickModel(): Promise<void> {
    const client = await this.server();
    // models/list is the current catalog (initialize's may be older); a server without it keeps initialize's.
    const fresh = await client.listModels().catch(() => undefined);
    if (fresh?.models?.length && this.init) {
      this.init = { ...this.init, models: fresh.models };
      this.publish(this.state.setMeta({ models: fresh.models.map((m) => m.id), modelInfos: fresh.models }));
    }
    const models = this.init?.models ?? [];
    const pick = await vscode.window.showQuickPick(
      models.map((m) => ({
        label: m.id,
        description: [m.id === this.state.meta.model ? 'current' : '', m.provider, m.name].filter(Boolean).join(' · '),
        detail: modelAbilities(m),
      })),
      { title: 'Switch the tandem model', placeHolder: `Current: ${this.state.meta.model ?? 'none'}` },
    );
    if (!pick) return;
    const sessionId = this.state.meta.sessionId;
    if (!sessionId) {
      this.draft.model = pick.label;
      this.showDraft();
      return;
    }
    const r = await client.switchModel(sessionId, pick.label);
    this.publish(this.state.setMeta({ model: r.model }));
    if (r.warning) void vscode.window.showWarningMessage(`tandem: ${r.warning}`);
  }

  /** Without a session the pick is remembered for the first prompt's session/new (no server needed). */
  async pickMode(): Promise<void> {
    const pick = await vscode.window.showQuickPick(
      MODES.map((m) => ({ label: m, description: m === this.state.meta.mode ? 'current' : '', detail: MODE_DESCRIPTIONS[m] })),
      { title: 'Set the tandem permission mode' },
    );
    if (!pick) return;
    const mode = pick.label as Mode;
    const notice = `Permission mode: ${mode} (${MODE_DESCRIPTIONS[mode]}).`;
    if (!this.state.meta.sessionId) {
      this.draft.mode = mode;
      this.showDraft();
      this.publish(this.state.addNotice('mode', `${notice} The first prompt's session starts in it.`));
      return;
    }
    const { client, sessionId } = this.requireSession();
    await client.setMode(sessionId, mode);
    this.publish(this.state.setMeta({ mode }));
    // The header chip changes quietly; the chat keeps a line saying from where on the agent may do more (or less).
    this.publish(this.state.addNotice('mode', notice));
  }

  /**
   * "Configure Model…": a provider kind, the model, the base URL where one applies, and the API key. The key goes
   * to SecretStorage; the config file names only its variable. The file is `tandem.configFile` when that is one
   * this command wrote, else a new one in the extension's storage, and the setting then points at it (a config
   * the user wrote is never overwritten). The server restarts with the new config and the key in its environment.
   */
  async configureModel(): Promise<void> {
    const pick = await vscode.window.showQuickPick(
      PRESETS.map((p) => ({ label: p.label, detail: p.detail, preset: p })),
      { title: 'Configure a tandem model (1/4): provider' },
    );
    if (!pick) return;
    const preset: ProviderPreset = pick.preset;
    const model = await vscode.window.showInputBox({ title: 'Configure a tandem model (2/4): model name', value: preset.defaultModel, prompt: 'The model id the provider knows (sent as the request\'s model).', ignoreFocusOut: true });
    if (!model?.trim()) return;
    let baseUrl: string | undefined;
    if (preset.kind === 'openaiCompatible') {
      baseUrl = await vscode.window.showInputBox({
        title: 'Configure a tandem model (3/4): base URL',
        value: preset.baseUrl,
        prompt: 'The server\'s OpenAI-compatible base URL, up to /v1 (OpenRouter: https://openrouter.ai/api/v1; Ollama: http://127.0.0.1:11434/v1).',
        ignoreFocusOut: true,
        validateInput: (v) => (/^https?:\/\/\S+$/.test(v.trim()) ? undefined : 'An http:// or https:// URL'),
      });
      if (!baseUrl?.trim()) return;
      baseUrl = baseUrl.trim();
    }
    const key = await vscode.window.showInputBox({
      title: 'Configure a tandem model (4/4): API key',
      prompt: preset.needsKey
        ? 'Kept in VS Code\'s secret storage and given to the server in its environment; never written to a file.'
        : 'Leave empty for a local server that takes no key. A key is kept in VS Code\'s secret storage, never in a file.',
      password: true,
      ignoreFocusOut: true,
    });
    if (key === undefined) return;
    if (preset.needsKey && !key.trim()) throw new Error(`${preset.label} needs an API key: run "tandem: Configure Model…" again and paste it.`);
    if (key.trim()) await this.context.secrets.store(secretKey(preset.kind), key.trim());
    else await this.context.secrets.delete(secretKey(preset.kind));

    const cfg = vscode.workspace.getConfiguration('tandem');
    const current = cfg.get<string>('configFile') || '';
    const ours = current && path.isAbsolute(current) && fs.existsSync(current) && fs.readFileSync(current, 'utf8').startsWith('# Written by the tandem VS Code extension');
    const file = ours ? current : path.join(this.context.globalStorageUri.fsPath, 'tandem.toml');
    await fs.promises.mkdir(path.dirname(file), { recursive: true });
    await fs.promises.writeFile(file, buildConfig({ preset, model: model.trim(), baseUrl, withKey: !!key.trim() }), { mode: 0o600 });
    this.output.appendLine(`[tandem-vscode] Configure Model wrote ${file} (${preset.label}, ${model.trim()}); the key is in secret storage`);
    if (file !== current) {
      // The settings change restarts a running server (extension.ts); a server not started yet reads it later.
      await cfg.update('configFile', file, vscode.ConfigurationTarget.Global);
      if (current) void vscode.window.showInformationMessage(`tandem now uses ${file}; your config ${current} was left as it was (set tandem.configFile back to use it).`);
    } else if (this.started) {
      await this.restart();
    }
    void vscode.window.showInformationMessage(`tandem: ${preset.label} model ${model.trim()} configured in ${file}.`);
  }

  showLog(): void {
    this.output.show(true);
  }

  /** Where other clients attach, when the running server listens (initialize's `capabilities.attach`). */
  private attachInfo(): AttachInfo | undefined {
    const a = this.init?.capabilities.attach;
    return a && typeof a.url === 'string' && typeof a.tokenFile === 'string' ? a : undefined;
  }

  /**
   * "Share Session…": what a second client (another window, a browser page, a phone through ssh -L) needs to attach
   * to this window's server: the attach snippet (URL with the token, the token, the session id), the session id
   * alone, or where the token file is. The token is read from its file at each use, since the server writes a new
   * one at every start. A server that does not listen gets a message naming the setting that turns it on.
   */
  async shareSession(): Promise<void> {
    await this.server();
    const attach = this.attachInfo();
    if (!attach) {
      const listen = vscode.workspace.getConfiguration('tandem').get<string>('attach.listen')?.trim();
      const text = listen
        ? `tandem: "tandem.attach.listen" is ${listen}, but the running server does not listen for other clients: restart it ("tandem: Restart the Server").`
        : 'tandem: this server does not listen for other clients. Set "tandem.attach.listen" (for example ws://127.0.0.1:0) and restart the server to share sessions.';
      const action = await vscode.window.showInformationMessage(text, ...(listen ? ['Restart the Server', 'Open Setting'] : ['Open Setting']));
      if (action === 'Open Setting') await vscode.commands.executeCommand('workbench.action.openSettings', 'tandem.attach.listen');
      if (action === 'Restart the Server') await this.restart();
      return;
    }
    const sessionId = this.state.meta.sessionId;
    const pick = await vscode.window.showQuickPick(sharePickItems(attach, sessionId), {
      title: 'Share the tandem session: the token lets anyone who has it drive every session of this server',
      placeHolder: SHARE_WARNING,
      matchOnDescription: true,
    });
    if (!pick) return;
    switch (pick.action) {
      case 'copySnippet': {
        let text: string;
        try {
          text = await fs.promises.readFile(attach.tokenFile, 'utf8');
        } catch (err) {
          throw new Error(`Could not read the attach token from ${attach.tokenFile} (${msg(err)}): restart the server ("tandem: Restart the Server"), which writes it again.`);
        }
        await vscode.env.clipboard.writeText(shareSnippet(attach, parseToken(text, attach.tokenFile), sessionId));
        void vscode.window.showInformationMessage(`tandem: the attach snippet for ${attach.url} is on the clipboard. ${SHARE_WARNING}`);
        return;
      }
      case 'copySessionId':
        await vscode.env.clipboard.writeText(sessionId ?? '');
        void vscode.window.showInformationMessage(`tandem: the session id ${sessionId} is on the clipboard.`);
        return;
      case 'showTokenFile': {
        const action = await vscode.window.showInformationMessage(`tandem: the attach token is in ${attach.tokenFile} (mode 0600; a new one at every server start).`, 'Copy Path');
        if (action === 'Copy Path') await vscode.env.clipboard.writeText(attach.tokenFile);
        return;
      }
    }
  }

  showError(text: string): void {
    void vscode.window.showErrorMessage(`tandem: ${text}`);
  }

  async dispose(): Promise<void> {
    this.dropPending();
    this.turnChanges.dispose();
    this.status.dispose();
    this.mcpStatus.dispose();
    this.diffs.dispose();
    this.plans.dispose();
    await this.supervisor.dispose();
  }
}

/** The active editor's selection as prompt context (undefined without a non-empty selection). */
export function currentSelectionContext(): SelectionContext | undefined {
  const ed = vscode.window.activeTextEditor;
  if (!ed || ed.selection.isEmpty) return undefined;
  const doc = ed.document;
  const folder = vscode.workspace.getWorkspaceFolder(doc.uri);
  return {
    path: folder ? path.relative(folder.uri.fsPath, doc.uri.fsPath) : doc.uri.fsPath,
    languageId: doc.languageId,
    startLine: ed.selection.start.line + 1,
    endLine: ed.selection.end.line + 1 - (ed.selection.end.character === 0 && ed.selection.end.line > ed.selection.start.line ? 1 : 0),
    text: doc.getText(ed.selection),
  };
}

/**
 * Errors of the checkpoint methods: the server's message as it is (it names the next step), except from a server
 * that has no such method (an older tandem), which is told in words.
 */
export function checkpointError(err: unknown): never {
  if (errorKind(err) === 'methodNotFound' || (err as { code?: unknown })?.code === -32601) {
    throw new Error('This tandem server has no checkpoints (turn diff, undo, fork): update tandem.');
  }
  throw err;
}

/** A failure the user was already shown (with its actions), so a command that hit it adds no second message. */
export class ReportedError extends Error {}

export function msg(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
