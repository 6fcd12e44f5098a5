// A scripted stand-in for TandemClient, for unit tests of the controller without the tandem binary: it records
// every request (method and params, in order), answers each from a handler the test sets (or a default), and
// lets the test send session events as the server would. The controller gets it through its makeClient option.
// The request methods (prompt, rewind, fork, …) are TandemClient's own, so the params recorded are exactly what
// src/client.ts puts on the wire; only the transport under them (`request`) and the process are replaced.
import { TandemClient, type ExitInfo, type LaunchOptions } from '../src/client';
import type { InitializeResult, SessionEvent } from '../src/protocol';

/** An error as vscode-jsonrpc rejects a request with: code, message and the server's data.kind. */
export class RpcError extends Error {
  constructor(
    message: string,
    readonly data: { kind: string },
    readonly code = -32000,
  ) {
    super(message);
  }
}

type Handler = (params: any) => unknown;

class ScriptedClient {
  readonly requests: { method: string; params: any }[] = [];
  /** Answers by method; a handler may return a promise, throw (an error answer) or emit events first. */
  readonly handlers = new Map<string, Handler>();
  initializeResult?: InitializeResult;
  private readonly eventListeners = new Set<(e: SessionEvent) => void>();
  private readonly exitListeners = new Set<(e: ExitInfo) => void>();
  private alive = false;
  private seq = 0;
  private sessions = 0;

  constructor(readonly options?: LaunchOptions) {}

  get pid(): number {
    return 4242;
  }
  get running(): boolean {
    return this.alive;
  }

  async start(): Promise<InitializeResult> {
    this.alive = true;
    this.initializeResult = {
      protocolVersion: 1,
      serverInfo: { name: 'tandem', version: 'fake' },
      capabilities: { sessionStore: true },
      models: [{ id: 'mock' }],
      defaultModel: 'mock',
    };
    return this.initializeResult;
  }

  onEvent(l: (e: SessionEvent) => void): () => void {
    this.eventListeners.add(l);
    return () => this.eventListeners.delete(l);
  }
  onExit(l: (e: ExitInfo) => void): () => void {
    this.exitListeners.add(l);
    return () => this.exitListeners.delete(l);
  }

  /** Sends an event of the session as the server would (seq numbered here). */
  emit(e: Record<string, unknown>): void {
    const event = { seq: ++this.seq, ...e } as SessionEvent;
    for (const l of this.eventListeners) l(event);
  }

  /** The requests of one method, in order. */
  sent(method: string): any[] {
    return this.requests.filter((r) => r.method === method).map((r) => r.params);
  }

  async dispose(): Promise<void> {
    this.alive = false;
  }

  /** What TandemClient's methods call to send a request: recorded and answered here. */
  async request(method: string, params: any): Promise<any> {
    this.requests.push({ method, params });
    const h = this.handlers.get(method);
    if (h) return h(params);
    switch (method) {
      case 'session/new':
        return { sessionId: `s_${++this.sessions}`, model: 'mock', mode: params.mode ?? 'ask' };
      case 'session/list':
        return { sessions: [] };
      case 'mcp/status':
        return { servers: [] };
      case 'hooks/list':
        return { hooks: [], projectFiles: [], trusted: true };
      case 'commands/list':
        return { commands: [] };
      case 'session/load':
        return { sessionId: params.sessionId, cwd: '/', model: 'mock', mode: 'ask', state: 'idle', messages: [], pending: [] };
      case 'stop':
        return { stopped: true };
      case 'setNetworkAccess':
        return { allow: params.allow };
      default:
        throw new RpcError(`the fake client has no answer for ${method}`, { kind: 'internal' });
    }
  }
}

// TandemClient's request methods, borrowed: each builds its params and calls this.request().
for (const name of Object.getOwnPropertyNames(TandemClient.prototype)) {
  if (name === 'constructor' || name in ScriptedClient.prototype) continue;
  Object.defineProperty(ScriptedClient.prototype, name, Object.getOwnPropertyDescriptor(TandemClient.prototype, name)!);
}

/** The scripted client with TandemClient's request methods (prompt, rewind, fork, …). */
export type FakeClient = ScriptedClient & Omit<TandemClient, keyof ScriptedClient>;
export const FakeClient = ScriptedClient as unknown as new (options?: LaunchOptions) => FakeClient;
