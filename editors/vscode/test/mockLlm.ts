// A scripted OpenAI-compatible chat-completions server for tests: node http on 127.0.0.1:0 answering
// POST /v1/chat/completions with SSE chunks from a queue of responses. It records request bodies, can hold
// a stream open (delays, or until the test releases it) to let a test stop mid-stream, and notices when the
// client closes the socket.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Step =
  | { text: string }
  | { reasoning: string }
  | { toolCall: { id: string; name: string; arguments: unknown }; split?: number }
  | { delayMs: number }
  | { until: Promise<unknown> }
  | { finish: 'stop' | 'tool_calls' | 'length' };

export interface ScriptedResponse {
  steps: Step[];
  usage?: { prompt_tokens: number; completion_tokens: number };
  /** Reply with this HTTP status and body instead of a stream (provider error tests). */
  status?: number;
}

export interface RecordedRequest {
  body: any;
  /** The request's headers (lower-case names), e.g. the authorization the server sent. */
  headers: http.IncomingHttpHeaders;
  /** True once the client closed the connection before we finished the stream. */
  aborted: boolean;
}

export const say = (text: string): Step => ({ text });
export const call = (id: string, name: string, args: unknown, split = 2): Step => ({ toolCall: { id, name, arguments: args }, split });

export class MockLlm {
  readonly requests: RecordedRequest[] = [];
  private readonly queue: ScriptedResponse[] = [];
  private server?: http.Server;
  private readonly waiters: (() => void)[] = [];
  port = 0;

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  /** A tandem config TOML that points model `mock` at this server. */
  config(): string {
    return [
      'default_model = "mock"',
      '[providers.local]',
      'kind = "openai"',
      `base_url = "${this.baseUrl}"`,
      '[models.mock]',
      'provider = "local"',
      'name = "mock-model"',
      'context_window = 128000',
      '',
    ].join('\n');
  }

  enqueue(...responses: ScriptedResponse[]): void {
    this.queue.push(...responses);
  }

  /** Resolves once `n` requests have arrived (a condition to await instead of sleeping). */
  waitForRequests(n: number, timeoutMs = 10_000): Promise<void> {
    return waitFor(() => this.requests.length >= n, timeoutMs, `${n} LLM requests (got ${this.requests.length})`);
  }

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  async close(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections?.();
    await new Promise<void>((r) => this.server!.close(() => r()));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: { message: `mock: no route ${req.method} ${req.url}` } }));
      return;
    }
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const rec: RecordedRequest = { body: JSON.parse(raw), headers: req.headers, aborted: false };
    this.requests.push(rec);
    let closed = false;
    let onClosed!: () => void;
    const closedPromise = new Promise<void>((r) => (onClosed = r));
    // 'close' on the response before we ended it means the client hung up (e.g. the turn was stopped).
    res.on('close', () => {
      if (!res.writableEnded) {
        closed = true;
        rec.aborted = true;
      }
      onClosed();
    });
    const script = this.queue.shift() ?? { steps: [say('(mock: no scripted response left)')] };
    if (script.status) {
      res.writeHead(script.status, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: { message: 'mock provider error' } }));
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
    const id = `chatcmpl-${this.requests.length}`;
    const send = (delta: object, finish: string | null = null, extra: object = {}) => {
      if (closed) return;
      res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: 'mock-model', choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`);
    };
    let toolIndex = 0;
    let finished = false;
    let sawTool = false;
    for (const step of script.steps) {
      if (closed) break;
      if ('text' in step) send({ role: 'assistant', content: step.text });
      else if ('reasoning' in step) send({ reasoning_content: step.reasoning });
      else if ('toolCall' in step) {
        sawTool = true;
        const args = JSON.stringify(step.toolCall.arguments);
        // Split the arguments across chunks the way real providers do.
        const parts = Math.max(1, step.split ?? 1);
        const size = Math.ceil(args.length / parts);
        for (let p = 0; p < parts; p++) {
          const piece = args.slice(p * size, (p + 1) * size);
          const fn = p === 0 ? { name: step.toolCall.name, arguments: piece } : { arguments: piece };
          send({ tool_calls: [{ index: toolIndex, ...(p === 0 ? { id: step.toolCall.id, type: 'function' } : {}), function: fn }] });
        }
        toolIndex++;
      } else if ('delayMs' in step) await Promise.race([new Promise((r) => setTimeout(r, step.delayMs)), closedPromise]);
      else if ('until' in step) await Promise.race([step.until, closedPromise]);
      else if ('finish' in step) {
        send({}, step.finish);
        finished = true;
      }
    }
    if (closed) return;
    if (!finished) send({}, sawTool ? 'tool_calls' : 'stop');
    const usage = script.usage ?? { prompt_tokens: 10, completion_tokens: 5 };
    if (!closed) res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: 'mock-model', choices: [], usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } })}\n\n`);
    if (!closed) res.end('data: [DONE]\n\n');
  }
}

/** Polls a predicate until it holds; rejects after the timeout with what was awaited. */
export function waitFor(pred: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + timeoutMs;
    const tick = () => {
      let ok = false;
      try {
        ok = pred();
      } catch {
        ok = false;
      }
      if (ok) return resolve();
      if (Date.now() > deadline) return reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      setTimeout(tick, 10);
    };
    tick();
  });
}

/** A promise plus its resolver, for `{ until }` steps the test releases. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}
