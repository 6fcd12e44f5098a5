// A client of the workspace's one mock LLM (crates/mock-llm): it spawns the `tandem-mock-llm` binary
// ($TANDEM_MOCK_LLM_BIN, or beside $TANDEM_BIN, or <repo>/target/debug/tandem-mock-llm), which serves
// POST /v1/chat/completions on 127.0.0.1 with SSE chunks from a queue of responses, and drives it through
// its control endpoints: responses are queued with POST /_mock/enqueue and `{ until: promise }` steps pause
// on a named gate this client opens when the promise resolves. `requests` mirrors what the mock recorded
// (body, headers, aborted) from the lines `--stream-requests` prints: the mock writes a request's line
// before it answers it, so a test that saw the answer's effects finds the request here (a long-poll of
// GET /_mock/requests could lag, since between two polls nothing listens).
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import * as readline from 'node:readline';

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
  /** True once the client closed the connection before the mock finished the stream. */
  aborted: boolean;
}

export const say = (text: string): Step => ({ text });
export const call = (id: string, name: string, args: unknown, split = 2): Step => ({ toolCall: { id, name, arguments: args }, split });

const REPO_ROOT = path.resolve(__dirname, '..', '..', '..', '..');

/** The mock binary: $TANDEM_MOCK_LLM_BIN, else beside $TANDEM_BIN, else the workspace's debug build. */
export function mockLlmBin(): string {
  if (process.env.TANDEM_MOCK_LLM_BIN) return process.env.TANDEM_MOCK_LLM_BIN;
  const dir = process.env.TANDEM_BIN ? path.dirname(process.env.TANDEM_BIN) : path.join(REPO_ROOT, 'target', 'debug');
  return path.join(dir, 'tandem-mock-llm');
}

export class MockLlm {
  /** What the mock recorded, oldest first; updated in place as the mock reports changes. */
  readonly requests: RecordedRequest[] = [];
  port = 0;
  private proc?: ChildProcess;
  private gates = 0;
  private closed = false;
  private failure?: Error;

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

  /** Queues responses; resolves once the mock has them, so await it before the prompt that takes them. */
  async enqueue(...responses: ScriptedResponse[]): Promise<void> {
    const answer = await this.call('POST', '/_mock/enqueue', JSON.stringify(responses.map((r) => this.toJson(r))));
    if (answer.status !== 200) throw new Error(`the mock refused the responses: ${answer.body}`);
  }

  /**
   * Drops the responses still queued and rejects, naming how many, when there were any. A suite that
   * shares this mock calls it after each test: a test whose last wait ended before its turn took its
   * responses (an `idle` seen before the turn even started) then fails itself, instead of handing its
   * answers to the next test, which would fail in its place.
   */
  async expectDrained(): Promise<void> {
    const answer = await this.call('DELETE', '/_mock/queue');
    if (answer.status !== 200) throw new Error(`the mock did not drain its queue: ${answer.status} ${answer.body}`);
    const { dropped } = JSON.parse(answer.body) as { dropped: number };
    if (dropped > 0) throw new Error(`${dropped} scripted response(s) were left in the mock's queue: the test ended before a turn took them (await the turn's answer, not only idle)`);
  }

  /** Resolves once `n` requests have arrived (a condition to await instead of sleeping). */
  waitForRequests(n: number, timeoutMs = 10_000): Promise<void> {
    return waitFor(() => {
      if (this.failure) throw this.failure;
      return this.requests.length >= n;
    }, timeoutMs, `${n} LLM requests (got ${this.requests.length})`);
  }

  async start(): Promise<this> {
    const bin = mockLlmBin();
    if (!fs.existsSync(bin)) throw new Error(`tandem-mock-llm not found at ${bin}: run "cargo build --workspace --bins" in ${REPO_ROOT} or set TANDEM_MOCK_LLM_BIN`);
    const proc = spawn(bin, ['--stream-requests'], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    // The mock's stderr names requests it refused the way the vendor would: worth seeing beside a failure.
    proc.stderr!.on('data', (chunk: Buffer) => process.stderr.write(`tandem-mock-llm: ${chunk}`));
    const lines = readline.createInterface({ input: proc.stdout! });
    this.port = await new Promise<number>((resolve, reject) => {
      proc.once('error', reject);
      proc.once('exit', (code) => reject(new Error(`tandem-mock-llm exited (${code}) before printing its port`)));
      lines.once('line', (line) => resolve(Number(line.trim())));
    });
    // Every later line is one request's record: {index, request: {body, headers, aborted, ...}}.
    lines.on('line', (line) => {
      const { index, request } = JSON.parse(line) as { index: number; request: { body: any; headers: http.IncomingHttpHeaders; aborted: boolean } };
      this.requests[index] = { body: request.body, headers: request.headers, aborted: request.aborted };
    });
    proc.once('exit', (code, signal) => {
      if (!this.closed) this.failure = new Error(`tandem-mock-llm exited (${code ?? signal}) during the test`);
    });
    return this;
  }

  async close(): Promise<void> {
    if (!this.proc || this.closed) return;
    this.closed = true;
    const proc = this.proc;
    const exited = new Promise<void>((r) => (proc.exitCode !== null ? r() : proc.once('exit', () => r())));
    proc.kill('SIGTERM');
    await exited;
  }

  /** The JSON form of a response (crates/mock-llm/src/json_script.rs); a promise step becomes a gate. */
  private toJson(response: ScriptedResponse): object {
    const steps = response.steps.map((step) => {
      if ('toolCall' in step) return { tool_call: step.toolCall };
      if ('delayMs' in step) return { delay_ms: step.delayMs };
      if ('until' in step) {
        const name = `until-${++this.gates}`;
        void step.until.then(() => this.openGate(name));
        return { wait: name };
      }
      return step;
    });
    if (response.status) return { status: response.status };
    // The usage this mock always reported unless told otherwise.
    return { steps, usage: response.usage ?? { prompt_tokens: 10, completion_tokens: 5 } };
  }

  private async openGate(name: string): Promise<void> {
    if (this.closed) return;
    await this.call('POST', `/_mock/gates/${name}/open`).catch((e) => {
      if (!this.closed) this.failure = e instanceof Error ? e : new Error(String(e));
    });
  }

  private call(method: string, urlPath: string, body = ''): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: this.port, method, path: urlPath, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }, agent: false }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
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
