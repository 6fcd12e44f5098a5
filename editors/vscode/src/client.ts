// The JSON-RPC client for `tandem serve`: spawns the binary, speaks vscode-jsonrpc (Content-Length framing)
// on its stdio, exposes typed methods and the `session/event` stream. No `vscode` import: the integration
// tests drive this exact module against the real binary under plain node.
import { spawn, type ChildProcess } from 'node:child_process';
import { Writable } from 'node:stream';
import { createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection } from 'vscode-jsonrpc/node';
import { attachServeArgs, type AttachSettings } from './attach';
import {
  PROTOCOL_VERSION,
  type CheckpointsResult,
  type CommandsListResult,
  type Decision,
  type HooksListResult,
  type InitializeResult,
  type LoadSessionResult,
  type McpStatusResult,
  type ModelInfo,
  type Mode,
  type NewSessionResult,
  type PromptPart,
  type PromptResult,
  type RestoreScope,
  type RewindResult,
  type SessionEvent,
  type SessionSummary,
  type TurnDiffResult,
} from './protocol';

export interface LaunchOptions {
  /** Binary path or a name looked up on PATH. */
  serverPath: string;
  /** Passed as `--config FILE` when set. */
  configFile?: string;
  /** Also listen for other clients (`--listen stdio --listen ADDRESS`, `--allow-origin`); unset: stdio only. */
  attach?: AttachSettings;
  /** Working directory of the server process. */
  cwd: string;
  env?: NodeJS.ProcessEnv;
  clientName?: string;
  clientVersion?: string;
  /** Receives every stderr line of the server (its tracing log). */
  log?: (line: string) => void;
}

export type StartFailureKind = 'notFound' | 'notExecutable' | 'exitedDuringStartup' | 'protocol';

/** Why the server could not be started, with a message that names the next step for the user. */
export class ServerStartError extends Error {
  constructor(
    readonly kind: StartFailureKind,
    message: string,
    readonly stderr = '',
  ) {
    super(message);
    this.name = 'ServerStartError';
  }
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** True when we asked it to stop (dispose); false for a crash. */
  expected: boolean;
  stderrTail: string;
}

const STDERR_TAIL = 4000;

export class TandemClient {
  private proc?: ChildProcess;
  private conn?: MessageConnection;
  private stopping = false;
  private exited = false;
  private stderrTail = '';
  private readonly eventListeners = new Set<(e: SessionEvent) => void>();
  private readonly exitListeners = new Set<(e: ExitInfo) => void>();
  private exitPromise?: Promise<ExitInfo>;
  initializeResult?: InitializeResult;

  constructor(readonly options: LaunchOptions) {}

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  get running(): boolean {
    return !!this.proc && !this.exited;
  }

  onEvent(listener: (e: SessionEvent) => void): () => void {
    this.eventListeners.add(listener);
    return () => this.eventListeners.delete(listener);
  }

  onExit(listener: (e: ExitInfo) => void): () => void {
    this.exitListeners.add(listener);
    return () => this.exitListeners.delete(listener);
  }

  /** Spawns the server and completes `initialize`. Rejects with a ServerStartError on any failure. */
  async start(): Promise<InitializeResult> {
    const o = this.options;
    const args = serveArgs(o);
    const proc = spawn(o.serverPath, args, { cwd: o.cwd, env: o.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc = proc;

    let lineBuf = '';
    proc.stderr!.setEncoding('utf8');
    proc.stderr!.on('data', (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL);
      lineBuf += chunk;
      let nl: number;
      while ((nl = lineBuf.indexOf('\n')) >= 0) {
        o.log?.(lineBuf.slice(0, nl));
        lineBuf = lineBuf.slice(nl + 1);
      }
    });

    // 'error' fires instead of 'spawn' when the binary is missing or not executable.
    const spawned = new Promise<void>((resolve, reject) => {
      proc.once('spawn', resolve);
      proc.once('error', (err: NodeJS.ErrnoException) => {
        this.exited = true;
        if (err.code === 'ENOENT') {
          reject(
            new ServerStartError(
              'notFound',
              `The tandem binary was not found at "${o.serverPath}". Install tandem (cargo install --path . in the tandem repo) ` +
                `or set the "tandem.serverPath" setting to the full path of the binary.`,
            ),
          );
        } else if (err.code === 'EACCES') {
          reject(
            new ServerStartError(
              'notExecutable',
              `"${o.serverPath}" is not executable (${err.message}). Check "tandem.serverPath" points at the tandem binary and chmod +x it.`,
            ),
          );
        } else {
          reject(new ServerStartError('protocol', `Could not start "${o.serverPath}": ${err.message}. Check "tandem.serverPath".`));
        }
      });
    });

    this.exitPromise = new Promise<ExitInfo>((resolve) => {
      // A spawn failure emits 'error' and no 'exit': settle here too so dispose() never hangs.
      proc.once('error', () => resolve({ code: null, signal: null, expected: true, stderrTail: '' }));
      proc.once('exit', (code, signal) => {
        this.exited = true;
        // Let the last stderr bytes arrive before reporting: they usually hold the reason.
        setImmediate(() => {
          const info: ExitInfo = { code, signal, expected: this.stopping, stderrTail: this.stderrTail.trim() };
          this.conn?.dispose();
          for (const l of this.exitListeners) l(info);
          resolve(info);
        });
      });
    });

    try {
      await spawned;
    } catch (err) {
      this.stopping = true;
      throw err;
    }
    // A failed write after the child died must not crash the extension host.
    proc.stdin!.on('error', () => {});
    const conn = createMessageConnection(new StreamMessageReader(proc.stdout!), new StreamMessageWriter(stdinSink(proc, o.log)));
    this.conn = conn;
    conn.onNotification('session/event', (params: SessionEvent) => {
      for (const l of this.eventListeners) l(params);
    });
    conn.onError(() => {
      /* reported through exit or the failing request */
    });
    conn.listen();

    const init = conn.sendRequest<InitializeResult>('initialize', {
      protocolVersion: PROTOCOL_VERSION,
      clientInfo: { name: o.clientName ?? 'tandem-vscode', version: o.clientVersion },
      capabilities: { approvals: true },
    });
    const early = this.exitPromise.then((info) => {
      const detail = info.stderrTail || `exit code ${info.code ?? info.signal}`;
      // With sharing on, a bad address or a tandem older than --listen is the likelier cause than the config.
      const hint = o.attach
        ? `Check "tandem.attach.listen" (${o.attach.listen}) is ws://HOST:PORT, "tandem.attach.allowOrigins" holds origins like http://localhost:5173, and "tandem.serverPath" points at a tandem build that supports --listen${o.configFile ? ` (and the config file "${o.configFile}")` : ''}, then run "tandem: Restart the Server".`
        : o.configFile
          ? `Fix the config file "${o.configFile}" (setting "tandem.configFile"), then run "tandem: Restart the Server".`
          : `Check "tandem.serverPath" points at a tandem build that supports "serve", then run "tandem: Restart the Server".`;
      throw new ServerStartError('exitedDuringStartup', `tandem exited during startup: ${detail}\n${hint}`, info.stderrTail);
    });
    // Once initialize has won the race, a later exit must not surface as an unhandled rejection.
    early.catch(() => {});
    try {
      const result = await Promise.race([init, early]);
      if (result.protocolVersion !== PROTOCOL_VERSION) {
        throw new ServerStartError(
          'protocol',
          `tandem speaks protocol version ${result.protocolVersion}, this extension speaks ${PROTOCOL_VERSION}. Update the extension or the tandem binary so they match.`,
        );
      }
      this.initializeResult = result;
      return result;
    } catch (err) {
      if (!(err instanceof ServerStartError)) {
        // The connection usually notices the closed stdout before the exit event: give the exit (and its
        // stderr, which holds the reason) a moment to arrive so the user sees why, not "connection disposed".
        const exitedErr = await Promise.race([early.then(() => undefined, (e: unknown) => e), new Promise((r) => setTimeout(r, 2000).unref())]);
        await this.dispose();
        if (exitedErr instanceof ServerStartError) throw exitedErr;
        throw new ServerStartError('protocol', `tandem did not answer initialize: ${(err as Error).message}. See "tandem: Show Server Log".`, this.stderrTail);
      }
      await this.dispose();
      throw err;
    }
  }

  private request<R>(method: string, params?: object): Promise<R> {
    if (!this.conn || this.exited) {
      return Promise.reject(new Error('The tandem server is not running. Run "tandem: Restart the Server".'));
    }
    return params === undefined ? this.conn.sendRequest<R>(method) : this.conn.sendRequest<R>(method, params);
  }

  newSession(cwd: string, model?: string, mode?: Mode): Promise<NewSessionResult> {
    return this.request('session/new', { cwd, model, mode });
  }
  listSessions(cwd?: string): Promise<{ sessions: SessionSummary[] }> {
    return this.request('session/list', cwd ? { cwd } : {});
  }
  /** One page of the session: the newest without `cursor`, else the messages just before that cursor. */
  loadSession(sessionId: string, cursor?: string): Promise<LoadSessionResult> {
    return this.request('session/load', cursor === undefined ? { sessionId } : { sessionId, cursor });
  }
  /** A text starting with `/name` runs that command: see PromptResult for the answers with and without a turn. */
  prompt(sessionId: string, content: string | PromptPart[]): Promise<PromptResult> {
    return this.request('prompt', { sessionId, content });
  }
  /** The slash commands of the session (built-in, project, user), sorted by name; read again at every call. */
  commandsList(sessionId: string): Promise<CommandsListResult> {
    return this.request('commands/list', { sessionId });
  }
  /** The hooks of the session, the workspace's hook files and whether their current content is trusted. */
  hooksList(sessionId: string): Promise<HooksListResult> {
    return this.request('hooks/list', { sessionId });
  }
  /** Trusts the workspace's hooks as this session read them (remembered for the folder until the files change). */
  hooksTrust(sessionId: string): Promise<object> {
    return this.request('hooks/trust', { sessionId });
  }
  stop(sessionId: string): Promise<{ stopped: boolean }> {
    return this.request('stop', { sessionId });
  }
  steer(sessionId: string, text: string): Promise<{ queued: boolean }> {
    return this.request('steer', { sessionId, text });
  }
  approve(sessionId: string, requestId: string, decision: Decision, message?: string, editedContent?: string): Promise<object> {
    return this.request('approve', { sessionId, requestId, decision, message, editedContent });
  }
  answer(sessionId: string, requestId: string, answer: string): Promise<object> {
    return this.request('answer', { sessionId, requestId, answer });
  }
  switchModel(sessionId: string, model: string): Promise<{ model: string; warning?: string }> {
    return this.request('switchModel', { sessionId, model });
  }
  setMode(sessionId: string, mode: Mode): Promise<object> {
    return this.request('setMode', { sessionId, mode });
  }
  setNetworkAccess(sessionId: string, allow: boolean): Promise<{ allow: boolean }> {
    return this.request('setNetworkAccess', { sessionId, allow });
  }
  listModels(): Promise<{ models: ModelInfo[]; defaultModel: string }> {
    return this.request('models/list', {});
  }
  retry(sessionId: string): Promise<{ turnId: string }> {
    return this.request('retry', { sessionId });
  }
  mcpStatus(sessionId: string): Promise<McpStatusResult> {
    return this.request('mcp/status', { sessionId });
  }
  /** Trusts and starts a server of the workspace's .mcp.json; its mcpStatus events follow. */
  mcpTrust(sessionId: string, server: string): Promise<object> {
    return this.request('mcp/trust', { sessionId, server });
  }

  /** Everything one turn changed in the workspace (to now, for the running turn). */
  turnDiff(sessionId: string, turnId: string): Promise<TurnDiffResult> {
    return this.request('turn/diff', { sessionId, turnId });
  }
  /** The session's turns as rewind points, oldest first. */
  checkpoints(sessionId: string): Promise<CheckpointsResult> {
    return this.request('session/checkpoints', { sessionId });
  }
  /** Puts the session back to just before `turnId`; `force` also puts back paths changed since by anyone else. */
  rewind(sessionId: string, turnId: string, restore: RestoreScope, force?: boolean): Promise<RewindResult> {
    return this.request('session/rewind', force === undefined ? { sessionId, turnId, restore } : { sessionId, turnId, restore, force });
  }
  /** A new stored session whose history is this one's up to (not including) `turnId`, or all of it. */
  fork(sessionId: string, turnId?: string): Promise<{ sessionId: string }> {
    return this.request('session/fork', turnId === undefined ? { sessionId } : { sessionId, turnId });
  }
  /** Deletes a session from the store (history, checkpoints); the workspace files are not touched. */
  deleteSession(sessionId: string): Promise<object> {
    return this.request('session/delete', { sessionId });
  }

  /** Kills the process without a shutdown request (tests use it to simulate a crash). */
  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    this.proc?.kill(signal);
  }

  /** Asks the server to shut down, then escalates to SIGTERM/SIGKILL if it lingers. */
  async dispose(graceMs = 1500): Promise<void> {
    if (!this.proc || this.stopping) {
      await this.exitPromise;
      return;
    }
    this.stopping = true;
    if (!this.exited) {
      const shutdown = this.conn?.sendRequest('shutdown').catch(() => undefined);
      const timer = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());
      await Promise.race([shutdown, timer(graceMs)]);
      const exited = this.exitPromise!.then(() => true);
      if (!(await Promise.race([exited, timer(graceMs).then(() => false)]))) {
        this.proc.kill('SIGTERM');
        if (!(await Promise.race([exited, timer(graceMs).then(() => false)]))) this.proc.kill('SIGKILL');
      }
    }
    await this.exitPromise;
  }
}

/** The arguments of the server process: `serve`, the config file and, when sharing is on, the listener. */
export function serveArgs(o: Pick<LaunchOptions, 'configFile' | 'attach'>): string[] {
  const args = ['serve'];
  if (o.configFile) args.push('--config', o.configFile);
  args.push(...attachServeArgs(o.attach));
  return args;
}

/**
 * The writable that vscode-jsonrpc writes into: it forwards to the child's stdin but never reports a write
 * error back to the library.
 *
 * Why: vscode-jsonrpc 8.2 rethrows a failed request write inside an `async` Promise executor, which no caller
 * can catch, so a server that exits before reading its stdin (a bad config, a crash) turned every pending
 * write into an unhandled `EPIPE` rejection. The failure is not lost: the exit handler disposes the
 * connection, which rejects every request still waiting for an answer, and the exit is reported with the
 * server's stderr, which says why. Backpressure is kept: the callback runs when stdin took the chunk.
 */
function stdinSink(proc: ChildProcess, log?: (line: string) => void): Writable {
  const stdin = proc.stdin!;
  let reported = false;
  return new Writable({
    write(chunk: Buffer, _encoding, callback) {
      if (stdin.destroyed || !stdin.writable) {
        callback();
        return;
      }
      stdin.write(chunk, (err) => {
        if (err && !reported) {
          reported = true;
          log?.(`[tandem-vscode] writing to the server failed (${err.message}); waiting for its exit to report why`);
        }
        callback();
      });
    },
  });
}
