// Integration tests of the whole extension (activate → controller → commands → diff review → webview
// protocol) inside the fake `vscode` host, against the real tandem binary and the mock LLM. They check what a
// user would see: the diff editor opens, edits on its proposed side are what lands on disk, commands and the
// webview's buttons drive approvals, stop and steering, and crashes are reported and recovered from.
import '../vscodeHook';
import { after, afterEach, before, describe, test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fake, Uri, type FakeDocument } from '../fakeVscode';
import { MockLlm, call, gate, say, waitFor } from '../mockLlm';
import { tempDir, TANDEM_BIN, requireBinary } from './harness';
import * as ext from '../../src/extension';

const EXT_DIR = path.resolve(__dirname, '..', '..', '..');

interface FakeView {
  posted: any[];
  send(m: unknown): void;
}

/** Activates the extension the way VS Code does and attaches a fake chat webview to it. */
async function activate(settings: Record<string, unknown>): Promise<{ view: FakeView; ws: string }> {
  fake.reset();
  const ws = tempDir('tandem-ext-ws-');
  fake.workspaceFolder = ws;
  for (const [k, v] of Object.entries(settings)) fake.settings.set(k, v);
  const context = { subscriptions: [] as { dispose(): void }[], extensionUri: Uri.file(EXT_DIR), extension: { packageJSON: { version: '0.0.0-test' } } };
  ext.activate(context as never);
  const posted: any[] = [];
  let handler: (m: unknown) => void = () => {};
  const provider = fake.webviewProviders.get('tandem.chat');
  provider.resolveWebviewView({
    visible: true,
    webview: {
      options: {},
      html: '',
      cspSource: 'vscode-resource:',
      asWebviewUri: (u: Uri) => u,
      postMessage: async (m: unknown) => posted.push(m),
      onDidReceiveMessage: (h: (m: unknown) => void) => (handler = h),
    },
    onDidDispose: () => undefined,
  });
  return { view: { posted, send: (m) => handler(m) }, ws };
}

/** The chat items as the webview would have them, rebuilt from the posted snapshot and updates. */
function viewItems(view: FakeView): any[] {
  let items: any[] = [];
  for (const m of view.posted) {
    if (m.type === 'snapshot') items = m.snapshot.items.slice();
    if (m.type === 'items') for (const u of m.updates) items[u.index] = u.item;
  }
  return items;
}

function viewMeta(view: FakeView): any {
  let meta: any;
  for (const m of view.posted) {
    if (m.type === 'snapshot') meta = m.snapshot.meta;
    if (m.type === 'meta') meta = m.meta;
  }
  return meta;
}

const idle = (view: FakeView) => viewMeta(view)?.server === 'ready' && viewMeta(view)?.turn === 'idle' && !!viewMeta(view)?.sessionId;

describe('the extension in a fake VS Code host', () => {
  let llm: MockLlm;
  let cfgFile: string;

  before(async () => {
    requireBinary();
    // The server's session store goes to a scratch dir, never the user's.
    process.env.TANDEM_HOME = tempDir('tandem-ext-home-');
    llm = await new MockLlm().start();
    cfgFile = path.join(tempDir('tandem-ext-cfg-'), 'tandem.toml');
    fs.writeFileSync(cfgFile, llm.config());
  });
  afterEach(async () => {
    await ext.deactivate();
  });
  after(async () => {
    await llm.close();
  });

  test('prompt from the webview, diff opens, the edited proposal is accepted from the editor title', async () => {
    const { view, ws } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    await waitFor(() => /mock · idle/.test(fake.statusBar.text), 10_000, 'the server to be ready');
    // The handshake: nothing is posted before the webview says ready, then a snapshot comes first.
    assert.equal(view.posted.length, 0);
    view.send({ type: 'ready' });
    assert.equal(view.posted[0]?.type, 'snapshot');
    assert.ok(idle(view), 'the snapshot carries the session that started before the view was ready');

    llm.enqueue({ steps: [say('Writing.'), call('call_e1', 'write_file', { path: 'hello.txt', content: 'proposed\n' })] }, { steps: [say('Saved.')] });
    view.send({ type: 'prompt', text: 'make hello' });
    await waitFor(() => fake.executed.some((e) => e.id === 'vscode.diff'), 10_000, 'the diff editor');
    const diff = fake.executed.find((e) => e.id === 'vscode.diff')!;
    const [left, right] = diff.args as [Uri, Uri];
    assert.equal(left.scheme, 'tandem-empty', 'a new file is compared with an empty document');
    assert.equal(right.scheme, 'tandem-proposed');
    const doc = fake.textDocuments.find((d) => d.uri.toString() === right.toString()) as FakeDocument;
    assert.equal(doc.getText(), 'proposed\n', 'the right side serves the proposed content');
    assert.equal(fake.contexts.get('tandem.hasPendingApproval'), true);
    assert.match(fake.statusBar.text, /approval needed/);
    const card = viewItems(view).find((i) => i.type === 'tool');
    assert.equal(card.status, 'awaitingApproval');
    assert.deepEqual(card.approval.options.map((o: any) => o.decision).sort(), ['alwaysTool', 'deny', 'once']);

    doc.setText('my own version\n');
    await fake.commands.get('tandem.approve')!(right);
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'tool' && i.status === 'completed'), 10_000, 'the turn to finish');
    assert.equal(fs.readFileSync(path.join(ws, 'hello.txt'), 'utf8'), 'my own version\n');
    assert.equal(fake.tabs.length, 0, 'the diff editor closes once the approval is resolved');
    assert.equal(fake.contexts.get('tandem.hasPendingApproval'), false);
    const texts = viewItems(view).filter((i) => i.type === 'assistant').map((i) => i.text);
    assert.deepEqual(texts, ['Writing.', 'Saved.']);
    assert.ok(viewMeta(view).usage.totalOutput > 0, 'token usage reaches the view');
    assert.deepEqual(fake.messages.filter((m) => m.level === 'error'), []);
  });

  test('deny with a reason from the command; the shell card shows command and cwd', async () => {
    const { view, ws } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    llm.enqueue({ steps: [call('call_d1', 'shell', { command: 'touch denied.txt' })] }, { steps: [say('OK, not running it.')] });
    const n = llm.requests.length;
    fake.inputBoxAnswers.push('please do not');
    view.send({ type: 'prompt', text: 'touch it' });
    await waitFor(() => fake.contexts.get('tandem.pendingApprovalIsShell') === true, 10_000, 'the shell approval');
    const card = viewItems(view).find((i) => i.type === 'tool');
    assert.equal(card.approval.command, 'touch denied.txt');
    assert.equal(card.approval.cwd, ws);
    await fake.commands.get('tandem.deny')!();
    await waitFor(() => idle(view), 10_000, 'the turn to end');
    assert.equal(viewItems(view).find((i) => i.type === 'tool').status, 'denied');
    assert.ok(!fs.existsSync(path.join(ws, 'denied.txt')));
    const toolMsg = (llm.requests[n + 1].body.messages as any[]).find((m) => m.role === 'tool');
    assert.match(String(toolMsg.content), /please do not/);
  });

  test('stop from the webview mid-stream; the prompt box steers while a turn runs', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    const hold = gate();
    llm.enqueue({ steps: [say('thinking out loud'), { until: hold.promise }] });
    view.send({ type: 'prompt', text: 'go slowly' });
    await waitFor(() => viewItems(view).some((i) => i.type === 'assistant' && i.text === 'thinking out loud'), 10_000, 'streamed text');
    assert.equal(viewMeta(view).turn, 'running');
    assert.equal(fake.contexts.get('tandem.turnRunning'), true);
    view.send({ type: 'steer', text: 'focus on tests' });
    await waitFor(() => viewItems(view).some((i) => i.type === 'user' && i.steer && i.text === 'focus on tests'), 5000, 'the steer to be queued');
    view.send({ type: 'stop' });
    await waitFor(() => viewMeta(view).turn === 'idle', 10_000, 'the stop');
    hold.open();
    assert.equal(viewMeta(view).lastEnd.reason, 'interrupted');
    assert.ok(viewItems(view).some((i) => i.type === 'notice' && i.kind === 'interrupted'));
    assert.equal(fake.contexts.get('tandem.turnRunning'), false);
  });

  test('switch model and mode through quick picks; sessions list and resume when the server has a store', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    let offered: string[] = [];
    fake.quickPickAnswers.push((items) => ((offered = items.map((i: any) => i.label)), items[0]));
    await fake.commands.get('tandem.switchModel')!();
    assert.deepEqual(offered, ['mock'], 'the models come from initialize');
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.label === 'autoEdit'));
    await fake.commands.get('tandem.setMode')!();
    assert.equal(viewMeta(view).mode, 'autoEdit');

    const store = viewMeta(view).sessionStore;
    assert.equal(fake.contexts.get('tandem.sessionStore'), store, 'the context key follows capabilities.sessionStore');
    if (!store) {
      await fake.commands.get('tandem.sessions')!();
      assert.match(fake.messages.at(-1)!.text, /no session store/);
      return;
    }
    llm.enqueue({ steps: [say('remember me')] });
    view.send({ type: 'prompt', text: 'first session prompt' });
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'remember me'), 10_000, 'the first turn');
    const first = viewMeta(view).sessionId;
    await fake.commands.get('tandem.newSession')!();
    assert.notEqual(viewMeta(view).sessionId, first);
    assert.deepEqual(viewItems(view), [], 'a new session starts empty');
    fake.quickPickAnswers.push((items) => items.find((i: any) => i.sessionId === first));
    await fake.commands.get('tandem.sessions')!();
    assert.equal(viewMeta(view).sessionId, first);
    const texts = viewItems(view).map((i) => i.text);
    assert.ok(texts.includes('first session prompt') && texts.includes('remember me'), `history restored: ${JSON.stringify(texts)}`);
  });

  test('a plan opens as a Markdown preview and is accepted from the chat card; a question is answered in an input box', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    llm.enqueue(
      { steps: [call('call_p1', 'propose_plan', { plan: '# Plan\n\n1. read\n2. fix' })] },
      { steps: [call('call_q1', 'ask_user', { question: 'Which file?' })] },
      { steps: [say('All answered.')] },
    );
    const n = llm.requests.length;
    fake.inputBoxAnswers.push('src/main.rs');
    view.send({ type: 'prompt', text: 'plan it' });
    await waitFor(() => fake.executed.some((e) => e.id === 'markdown.showPreview'), 10_000, 'the plan preview');
    const uri = fake.executed.find((e) => e.id === 'markdown.showPreview')!.args[0] as Uri;
    assert.equal(fake.contentProviders.get(uri.scheme).provideTextDocumentContent(uri), '# Plan\n\n1. read\n2. fix');
    assert.ok(fake.messages.some((m) => /proposes a plan/.test(m.text) && m.actions.join() === 'Accept,Reject,Comment…'));
    const card = viewItems(view).find((i) => i.type === 'question');
    assert.equal(card.plan, '# Plan\n\n1. read\n2. fix');
    assert.equal(fake.contexts.get('tandem.hasPendingQuestion'), true);
    view.send({ type: 'answer', requestId: card.requestId, answer: 'accept' });
    // The ask_user question that follows is answered through the (scripted) input box.
    await waitFor(() => idle(view), 10_000, 'the turn to end');
    const questions = viewItems(view).filter((i) => i.type === 'question');
    assert.deepEqual(questions.map((q) => q.answer), ['accept', 'src/main.rs']);
    const tools = (llm.requests.at(-1)!.body.messages as any[]).filter((m) => m.role === 'tool').map((m) => String(m.content));
    assert.equal(llm.requests.length, n + 3);
    assert.match(tools[0], /accept/);
    assert.match(tools[1], /src\/main\.rs/);
  });

  test('tandem.prompt sends the editor selection as context; the status bar opens the chat', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    assert.equal(fake.statusBar.command, 'tandem.openChat');
    const ws = fake.workspaceFolder!;
    const vscodeFake = require('../fakeVscode');
    vscodeFake.window.activeTextEditor = {
      selection: { isEmpty: false, start: { line: 1, character: 0 }, end: { line: 2, character: 5 } },
      document: { uri: Uri.file(path.join(ws, 'lib.rs')), languageId: 'rust', getText: () => 'fn a() {}\nfn b' },
    };
    try {
      llm.enqueue({ steps: [say('Looks fine.')] });
      fake.inputBoxAnswers.push('review this');
      await fake.commands.get('tandem.prompt')!();
      await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant'), 10_000, 'the answer');
      const users = (llm.requests.at(-1)!.body.messages as any[]).filter((m) => m.role === 'user');
      const last = JSON.stringify(users.at(-1).content);
      assert.match(last, /review this/);
      assert.match(last, /Selected in lib\.rs \(lines 2-3\)/);
      assert.match(last, /fn a\(\) \{\}/);
    } finally {
      vscodeFake.window.activeTextEditor = undefined;
    }
  });

  test('a provider error ends the turn with the error shown, and tandem.retry runs it again', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    await fake.commands.get('tandem.retry')!();
    assert.match(fake.messages.at(-1)!.text, /Nothing to retry/);
    llm.enqueue({ steps: [], status: 400 }, { steps: [say('recovered')] });
    view.send({ type: 'prompt', text: 'fail first' });
    await waitFor(() => idle(view) && viewMeta(view).lastEnd?.reason === 'error', 15_000, 'the failed turn');
    assert.ok(viewItems(view).some((i) => i.type === 'notice' && i.kind === 'error'), 'the error is shown in the chat');
    await fake.commands.get('tandem.retry')!();
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'assistant' && i.text === 'recovered'), 15_000, 'the retried turn');
    assert.equal(viewMeta(view).lastEnd.reason, 'completed');
  });

  test('a crashed server is restarted with a visible message, and deactivate stops it', async () => {
    const { view } = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': cfgFile });
    view.send({ type: 'ready' });
    await waitFor(() => idle(view), 10_000, 'ready');
    const pidOf = (line: string | undefined) => Number(/pid (\d+)/.exec(line ?? '')?.[1]);
    const firstPid = pidOf(fake.output.find((l) => l.includes(' pid ')));
    const firstSession = viewMeta(view).sessionId;
    process.kill(firstPid, 'SIGKILL');
    await waitFor(() => fake.messages.some((m) => m.level === 'warning' && /crashed/.test(m.text)), 10_000, 'the crash message');
    await waitFor(() => idle(view) && viewItems(view).some((i) => i.type === 'notice' && /restarted/.test(i.text)), 10_000, 'the restart');
    // With a store the session is resumed; without one a new session replaces it.
    if (viewMeta(view).sessionStore) assert.equal(viewMeta(view).sessionId, firstSession);
    else assert.notEqual(viewMeta(view).sessionId, firstSession);
    const secondPid = pidOf(fake.output.filter((l) => l.includes(' pid ')).at(-1));
    assert.notEqual(secondPid, firstPid);
    await ext.deactivate();
    await waitFor(() => !alive(secondPid), 5000, 'the server to exit');
  });

  test('a missing binary and a bad config give the cause and the next step', async () => {
    const { view } = await activate({ 'tandem.serverPath': '/no/such/tandem' });
    view.send({ type: 'ready' });
    await waitFor(() => fake.messages.some((m) => m.level === 'error'), 10_000, 'the error');
    const err = fake.messages.find((m) => m.level === 'error')!;
    assert.match(err.text, /not found.*tandem\.serverPath/s);
    assert.deepEqual(err.actions, ['Open Settings', 'Retry']);
    assert.equal(viewMeta(view).server, 'failed');
    assert.match(fake.statusBar.text, /server down/);
    await ext.deactivate();

    const bad = path.join(tempDir('tandem-ext-bad-'), 'bad.toml');
    fs.writeFileSync(bad, '[models.x]\nprovider = 3\n');
    const second = await activate({ 'tandem.serverPath': TANDEM_BIN, 'tandem.configFile': bad });
    second.view.send({ type: 'ready' });
    await waitFor(() => fake.messages.some((m) => m.level === 'error'), 10_000, 'the config error');
    const cfgErr = fake.messages.find((m) => m.level === 'error')!;
    assert.match(cfgErr.text, /bad\.toml/);
    assert.match(cfgErr.text, /tandem\.configFile/);
    assert.ok(cfgErr.actions.includes('Show Log'));
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
