// Keeps one `tandem serve` process alive: starts it, restarts it after a crash (bounded, with backoff) and
// stops it on dispose. Free of `vscode` so the restart policy is unit-tested against real child processes.
import { TandemClient, ServerStartError, type ExitInfo, type LaunchOptions } from './client';
import type { InitializeResult } from './protocol';

export interface SupervisorHooks {
  /** A (re)started server finished initialize. `restart` is false for the first start. */
  started(client: TandemClient, init: InitializeResult, restart: boolean): void | Promise<void>;
  /** The server died unexpectedly; `willRestart` says whether another attempt follows. */
  crashed(info: ExitInfo, willRestart: boolean, attempt: number): void;
  /** A start failed (missing binary, bad config, …); no automatic retry follows. */
  failed(err: ServerStartError): void;
}

export interface SupervisorOptions {
  /** Crashes allowed inside `windowMs` before giving up (a crash loop would otherwise spin forever). */
  maxRestarts?: number;
  windowMs?: number;
  backoffMs?: number;
  makeClient?: (o: LaunchOptions) => TandemClient;
}

export class Supervisor {
  private client?: TandemClient;
  private crashes: number[] = [];
  private disposed = false;
  private restartTimer?: NodeJS.Timeout;
  private starting?: Promise<TandemClient | undefined>;

  constructor(
    private readonly launch: () => LaunchOptions,
    private readonly hooks: SupervisorHooks,
    private readonly opts: SupervisorOptions = {},
  ) {}

  get current(): TandemClient | undefined {
    return this.client?.running ? this.client : undefined;
  }

  /**
   * The start in progress, if any. A caller that needs the server waits for this instead of calling start():
   * during a crash restart's backoff no start is in progress yet, and a second start would leave the timer's
   * process unowned.
   */
  get pending(): Promise<TandemClient | undefined> | undefined {
    return this.starting;
  }

  /** Starts (or restarts on demand) the server; resolves undefined when the start failed (hooks.failed ran). */
  start(restart = false): Promise<TandemClient | undefined> {
    if (this.starting) return this.starting;
    this.starting = this.doStart(restart).finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async doStart(restart: boolean): Promise<TandemClient | undefined> {
    const client = (this.opts.makeClient ?? ((o) => new TandemClient(o)))(this.launch());
    this.client = client;
    let init: InitializeResult;
    try {
      init = await client.start();
    } catch (err) {
      this.hooks.failed(err instanceof ServerStartError ? err : new ServerStartError('protocol', String(err)));
      return undefined;
    }
    client.onExit((info) => this.onExit(client, info));
    await this.hooks.started(client, init, restart);
    return client;
  }

  private onExit(client: TandemClient, info: ExitInfo): void {
    if (info.expected || this.disposed || client !== this.client) return;
    const now = Date.now();
    const window = this.opts.windowMs ?? 60_000;
    this.crashes = this.crashes.filter((t) => now - t < window);
    this.crashes.push(now);
    const attempt = this.crashes.length;
    const willRestart = attempt <= (this.opts.maxRestarts ?? 3);
    this.hooks.crashed(info, willRestart, attempt);
    if (willRestart) {
      this.restartTimer = setTimeout(() => void this.start(true), (this.opts.backoffMs ?? 300) * attempt);
    }
  }

  /** Manual restart (the command): stops the current process first; resets the crash budget. */
  async restart(): Promise<TandemClient | undefined> {
    clearTimeout(this.restartTimer);
    this.crashes = [];
    const old = this.client;
    this.client = undefined;
    await old?.dispose();
    return this.start(true);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    clearTimeout(this.restartTimer);
    await this.starting?.catch(() => undefined);
    await this.client?.dispose();
  }
}
