// Integration tests: the extension's client module (TandemClient, Supervisor, ChatState) against the real
// tandem binary, with the mock OpenAI-compatible LLM on loopback. Each test drives a full turn over stdio.
import { after, afterEach, before, describe, test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { MockLlm, call, gate, say, waitFor } from '../mockLlm';
import { startHarness, tempDir, TANDEM_BIN, type Harness } from './harness';
import { ServerStartError, TandemClient } from '../../src/client';
import { Supervisor } from '../../src/supervisor';
import { errorKind } from '../../src/protocol';

describe('tandem serve through the extension client', () => {
  let llm: MockLlm;
  let h: Harness;

  before(async () => {
    llm = await new MockLlm().start();
  });
  // Each test closes its own server; what it queued and no turn took fails it here (see expectDrained).
  afterEach(async () => {
    await llm.expectDrained();
  });
  after(async () => {
    await llm.close();
  });

  test('initialize over Content-Length framing lists the configured model', async () => {
    h = await startHarness(llm.config());
    try {
      const init = h.client.initializeResult!;
      assert.equal(init.protocolVersion, 1);
      assert.equal(init.capabilities.framing, 'contentLength', 'vscode-jsonrpc speaks Content-Length framing');
      assert.deepEqual(init.models.map((m) => m.id), ['mock']);
      assert.equal(init.defaultModel, 'mock');
    } finally {
      await h.close();
    }
  });

  test('a full turn: streamed text, write approval with diff, edited content lands on disk', async () => {
    h = await startHarness(llm.config());
    try {
      await llm.enqueue(
        { steps: [say('I will **write** '), say('the file.'), call('call_w1', 'write_file', { path: 'notes.md', content: 'proposed\n' })] },
        { steps: [say('Done.')] },
      );
      const before = llm.requests.length;
      const { turnId } = await h.client.prompt(h.sessionId, 'write notes');
      assert.match(turnId ?? '', /\S/);
      const req = await h.event('approvalRequested');
      // Streamed text arrived as deltas, and the reducer shows it as one finished assistant message.
      const deltas = h.events.filter((e) => e.type === 'assistantDelta').map((e) => (e as { text: string }).text);
      assert.deepEqual(deltas, ['I will **write** ', 'the file.']);
      const assistant = h.state.items.find((i) => i.type === 'assistant');
      assert.ok(assistant && assistant.type === 'assistant' && assistant.text === 'I will **write** the file.' && !assistant.streaming);
      assert.equal(req.diff?.length, 1);
      assert.equal(req.diff![0].oldText, null, 'a new file has oldText null');
      assert.equal(req.diff![0].newText, 'proposed\n');
      assert.deepEqual(req.options.map((o) => o.decision).sort(), ['alwaysTool', 'deny', 'once']);
      assert.equal(h.state.meta.turn, 'awaitingApproval');
      assert.equal(h.state.pendingApprovals().length, 1);

      await h.client.approve(h.sessionId, req.requestId, 'once', undefined, 'edited by the user\n');
      const ended = await h.event('turnEnded');
      assert.equal(ended.reason, 'completed');
      assert.equal(fs.readFileSync(path.join(h.workspace, 'notes.md'), 'utf8'), 'edited by the user\n');
      const tool = h.state.items.find((i) => i.type === 'tool');
      assert.ok(tool && tool.type === 'tool');
      assert.equal(tool.status, 'completed');
      assert.equal(tool.approval?.resolved, 'once');
      assert.equal(h.state.meta.turn, 'idle');
      assert.ok(h.state.meta.usage && h.state.meta.usage.totalInput > 0, 'usage is folded into the state');
      // The second LLM request carries the tool result for call_w1.
      assert.equal(llm.requests.length, before + 2);
      const msgs = llm.requests[before + 1].body.messages as { role: string; tool_call_id?: string }[];
      assert.ok(msgs.some((m) => m.role === 'tool' && m.tool_call_id === 'call_w1'));
      // seq is contiguous from 1: nothing was dropped between the server and the client.
      assert.deepEqual(h.events.map((e) => e.seq), h.events.map((_, i) => i + 1));
    } finally {
      await h.close();
    }
  });

  test('stop mid-stream keeps the partial text and ends the turn interrupted', async () => {
    h = await startHarness(llm.config());
    try {
      const hold = gate();
      await llm.enqueue({ steps: [say('partial answer'), { until: hold.promise }, say(' never sent')] });
      const n = llm.requests.length;
      await h.client.prompt(h.sessionId, 'talk slowly');
      await h.event('assistantDelta', (e) => e.text === 'partial answer');
      assert.equal(h.state.meta.turn, 'running');
      const r = await h.client.stop(h.sessionId);
      assert.equal(r.stopped, true);
      // The stop response comes after turnEnded, so the state is already idle here.
      assert.equal(h.events.at(-1)?.type, 'turnEnded');
      assert.equal((h.events.at(-1) as { reason: string }).reason, 'interrupted');
      assert.equal(h.state.meta.turn, 'idle');
      assert.ok(h.events.some((e) => e.type === 'notice' && e.kind === 'interrupted'));
      await waitFor(() => llm.requests[n]?.aborted === true, 5000, 'the provider stream to be closed');
      hold.open();
      const a = h.state.items.find((i) => i.type === 'assistant');
      assert.ok(a && a.type === 'assistant' && a.text.startsWith('partial answer') && !a.text.includes('never'));
      // A new prompt right after stop is admitted.
      await llm.enqueue({ steps: [say('again')] });
      await h.client.prompt(h.sessionId, 'again');
      assert.equal((await h.event('turnEnded', undefined, h.events.length)).reason, 'completed');
    } finally {
      await h.close();
    }
  });

  test('a shell approval shows command and cwd; deny with a reason reaches the model', async () => {
    h = await startHarness(llm.config());
    try {
      await llm.enqueue({ steps: [call('call_s1', 'shell', { command: 'echo hi > out.txt' })] }, { steps: [say('Understood.')] });
      const n = llm.requests.length;
      await h.client.prompt(h.sessionId, 'run it');
      const req = await h.event('approvalRequested');
      assert.equal(req.command, 'echo hi > out.txt');
      assert.equal(req.cwd, h.workspace);
      assert.ok(req.options.some((o) => o.decision === 'alwaysCommand' && o.commandPrefix), 'shell offers alwaysCommand with a prefix');
      await h.client.approve(h.sessionId, req.requestId, 'deny', 'not on my machine');
      assert.equal((await h.event('turnEnded')).reason, 'completed');
      assert.ok(!fs.existsSync(path.join(h.workspace, 'out.txt')), 'the denied command did not run');
      const upd = h.events.find((e) => e.type === 'toolCallUpdate' && e.toolCallId === 'call_s1' && e.status === 'denied');
      assert.ok(upd, 'toolCallUpdate denied');
      const toolMsg = (llm.requests[n + 1].body.messages as { role: string; content: string }[]).find((m) => m.role === 'tool');
      assert.match(String(toolMsg?.content), /not on my machine/);
      // Answering the same approval again is stale.
      await assert.rejects(h.client.approve(h.sessionId, req.requestId, 'once'), (e) => errorKind(e) === 'staleApproval');
    } finally {
      await h.close();
    }
  });

  test('an approved shell command streams its output into the tool card', async () => {
    h = await startHarness(llm.config());
    try {
      await llm.enqueue({ steps: [call('call_s2', 'shell', { command: 'printf "line1\\nline2\\n"' })] }, { steps: [say('ok')] });
      await h.client.prompt(h.sessionId, 'print');
      const req = await h.event('approvalRequested');
      await h.client.approve(h.sessionId, req.requestId, 'once');
      await h.event('turnEnded');
      const tool = h.state.items.find((i) => i.type === 'tool');
      assert.ok(tool && tool.type === 'tool');
      assert.equal(tool.status, 'completed');
      assert.match(tool.output, /line1\nline2/);
    } finally {
      await h.close();
    }
  });

  test('steer while a turn runs is applied at the next safe point; errors carry data.kind', async () => {
    h = await startHarness(llm.config());
    try {
      await assert.rejects(h.client.steer(h.sessionId, 'nothing runs'), (e) => errorKind(e) === 'noTurnRunning');
      const hold = gate();
      fs.writeFileSync(path.join(h.workspace, 'a.txt'), 'A');
      await llm.enqueue({ steps: [{ until: hold.promise }, call('call_r1', 'read_file', { path: 'a.txt' })] }, { steps: [say('steered')] });
      const n = llm.requests.length;
      await h.client.prompt(h.sessionId, 'read a');
      await h.event('turnStarted');
      assert.deepEqual(await h.client.steer(h.sessionId, 'also be brief'), { queued: true });
      await assert.rejects(h.client.prompt(h.sessionId, 'second'), (e) => errorKind(e) === 'turnInProgress');
      hold.open();
      await h.event('steeringApplied', (e) => e.text === 'also be brief');
      await h.event('turnEnded');
      const msgs = llm.requests[n + 1].body.messages as { role: string; content: unknown }[];
      assert.ok(msgs.some((m) => m.role === 'user' && JSON.stringify(m.content).includes('also be brief')));
      await assert.rejects(h.client.switchModel(h.sessionId, 'nope'), (e) => errorKind(e) === 'unknownModel');
      assert.equal((await h.client.switchModel(h.sessionId, 'mock')).model, 'mock');
      await h.client.setMode(h.sessionId, 'plan');
      await assert.rejects(h.client.setMode(h.sessionId, 'bogus' as never), (e) => errorKind(e) === 'invalidMode' || errorKind(e) === 'invalidParams');
    } finally {
      await h.close();
    }
  });

  test('ask_user reaches the client as questionAsked and the answer goes back to the model', async () => {
    h = await startHarness(llm.config());
    try {
      await llm.enqueue({ steps: [call('call_q1', 'ask_user', { question: 'Tabs or spaces?', choices: ['tabs', 'spaces'] })] }, { steps: [say('spaces it is')] });
      const n = llm.requests.length;
      await h.client.prompt(h.sessionId, 'ask me');
      const q = await h.event('questionAsked');
      assert.deepEqual(q.choices, ['tabs', 'spaces']);
      assert.equal(h.state.meta.turn, 'awaitingAnswer');
      await h.client.answer(h.sessionId, q.requestId, 'spaces');
      h.state.markAnswered(q.requestId, 'spaces');
      await h.event('turnEnded');
      const toolMsg = (llm.requests[n + 1].body.messages as { role: string; content: string }[]).find((m) => m.role === 'tool');
      assert.match(String(toolMsg?.content), /spaces/);
    } finally {
      await h.close();
    }
  });

  test('without a config the scripted demo plays a full turn with a diff approval', async () => {
    h = await startHarness(undefined);
    try {
      assert.deepEqual(h.client.initializeResult!.models.map((m) => m.id), ['scripted']);
      await h.client.prompt(h.sessionId, 'hi');
      const req = await h.event('approvalRequested');
      assert.equal(req.diff?.[0].path, 'tandem-demo.md');
      await h.client.approve(h.sessionId, req.requestId, 'once');
      assert.equal((await h.event('turnEnded')).reason, 'completed');
      assert.match(fs.readFileSync(path.join(h.workspace, 'tandem-demo.md'), 'utf8'), /You asked: hi/);
    } finally {
      await h.close();
    }
  });

  test('start failures explain the cause and the next step', async () => {
    const missing = new TandemClient({ serverPath: '/nonexistent/tandem', cwd: tempDir('tandem-ws-') });
    await assert.rejects(missing.start(), (e: unknown) => e instanceof ServerStartError && e.kind === 'notFound' && /tandem\.serverPath/.test(e.message));

    const badDir = tempDir('tandem-cfg-');
    const bad = path.join(badDir, 'bad.toml');
    fs.writeFileSync(bad, 'default_model = [\n');
    const invalid = new TandemClient({ serverPath: TANDEM_BIN, configFile: bad, cwd: badDir });
    await assert.rejects(
      invalid.start(),
      (e: unknown) => e instanceof ServerStartError && e.kind === 'exitedDuringStartup' && /TOML/.test(e.message) && /tandem\.configFile/.test(e.message),
    );
  });

  test('a server that stops reading its stdin fails the request without an unhandled EPIPE rejection', async () => {
    // A stand-in server: answers initialize, closes its stdin, says so on stderr, and exits a moment later.
    // Writing the next request then fails with EPIPE for certain, which vscode-jsonrpc alone turns into an
    // unhandled rejection (the CI failure this test pins down).
    const dir = tempDir('tandem-epipe-');
    const script = path.join(dir, 'closes-stdin');
    fs.writeFileSync(
      script,
      `#!${process.execPath}
const fs = require('fs');
// Plain fd reads, not process.stdin: node keeps fd 0 open when the stdin stream is destroyed.
let buf = Buffer.alloc(0);
const chunk = Buffer.alloc(65536);
for (;;) {
  const n = fs.readSync(0, chunk, 0, chunk.length, null);
  if (n === 0) process.exit(4);
  buf = Buffer.concat([buf, chunk.subarray(0, n)]);
  const headerEnd = buf.indexOf('\\r\\n\\r\\n');
  if (headerEnd < 0) continue;
  const length = Number(/Content-Length: (\\d+)/i.exec(buf.subarray(0, headerEnd).toString())[1]);
  if (buf.length >= headerEnd + 4 + length) {
    const request = JSON.parse(buf.subarray(headerEnd + 4, headerEnd + 4 + length).toString());
    const body = JSON.stringify({ jsonrpc: '2.0', id: request.id, result: { protocolVersion: 1, models: [], capabilities: {} } });
    fs.writeSync(1, 'Content-Length: ' + Buffer.byteLength(body) + '\\r\\n\\r\\n' + body);
    break;
  }
}
fs.closeSync(0);
fs.writeSync(2, 'stdin closed\\n');
setTimeout(() => process.exit(3), 300);
`,
      { mode: 0o755 },
    );
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const logLines: string[] = [];
    const client = new TandemClient({ serverPath: script, cwd: dir, log: (line) => logLines.push(line) });
    try {
      await client.start();
      await waitFor(() => logLines.includes('stdin closed'), 5000, 'the stand-in server to close its stdin');
      const exited = new Promise((resolve) => client.onExit(resolve));
      await assert.rejects(client.listSessions(), /disposed|not running/i);
      await exited;
      // Unhandled rejections are reported after the microtask queue drains: give them one macrotask.
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(unhandled, [], 'no write error escapes as an unhandled rejection');
      assert.ok(
        logLines.some((l) => /writing to the server failed \(.*EPIPE/.test(l)),
        `the failed write is logged: ${logLines.join(' | ')}`,
      );
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await client.dispose();
    }
  });

  test('the supervisor restarts a crashed server and stops it on dispose', async () => {
    const crashes: { willRestart: boolean }[] = [];
    const starts: { pid?: number; restart: boolean }[] = [];
    const sup = new Supervisor(
      () => ({ serverPath: TANDEM_BIN, cwd: tempDir('tandem-ws-'), configFile: undefined }),
      {
        started: (c, _init, restart) => void starts.push({ pid: c.pid, restart }),
        crashed: (_i, willRestart) => void crashes.push({ willRestart }),
        failed: (e) => assert.fail(`unexpected start failure: ${e.message}`),
      },
      { backoffMs: 10 },
    );
    try {
      const first = await sup.start();
      assert.ok(first?.running);
      first!.kill('SIGKILL');
      await waitFor(() => starts.length === 2, 10_000, 'a restart');
      assert.deepEqual(crashes, [{ willRestart: true }]);
      assert.equal(starts[1].restart, true);
      assert.notEqual(starts[1].pid, starts[0].pid);
      const second = sup.current!;
      const s = await second.newSession(tempDir('tandem-ws-'));
      assert.match(s.sessionId, /\S/);
      await sup.dispose();
      assert.equal(second.running, false, 'dispose stops the server');
      assert.equal(crashes.length, 1, 'a requested stop is not a crash');
    } finally {
      await sup.dispose();
    }
  });
});
