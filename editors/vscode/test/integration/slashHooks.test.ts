// Integration tests of slash commands and hooks (issue 27) against the real tandem binary, through the
// extension's client module: commands/list (built-ins, a project command from .tandem/commands/review.md, a user
// command, a file added later), a custom command's turn (the model gets the expanded text, session/load keeps the
// text as typed), `/status` answered without a turn, and hooks/list + hooks/trust with the hooks running after
// the trust (hookRan events folded into the chat, a blocking hook's exit 2).
import { after, afterEach, before, describe, test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { MockLlm, call, say } from '../mockLlm';
import { startHarness, tempDir, type Harness } from './harness';
import { errorKind, type SessionEvent } from '../../src/protocol';
import { hookLine } from '../../src/hooks';

const REVIEW_MD = '---\ndescription: Review a file\nargument-hint: FILE\n---\nReview $ARGUMENTS carefully and list the bugs.\n';

function write(root: string, rel: string, text: string, mode?: number): void {
  fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
  fs.writeFileSync(path.join(root, rel), text, mode === undefined ? undefined : { mode });
}

/** Claude Code's hook file format: {hooks: {EVENT: [{matcher?, hooks: [{type: "command", command}]}]}}. */
function hooksJson(event: string, matcher: string | undefined, command: string): string {
  return JSON.stringify({ hooks: { [event]: [{ ...(matcher ? { matcher } : {}), hooks: [{ type: 'command', command }] }] } }, null, 2);
}

describe('slash commands and hooks through the extension client', () => {
  let llm: MockLlm;
  let h: Harness | undefined;

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

  test('commands/list: the built-ins, a project command from .tandem/commands/review.md and a user command, sorted; a file added later shows at the next call', async () => {
    const xdg = tempDir('tandem-xdg-cmds-');
    write(xdg, 'tandem/commands/standup.md', '---\ndescription: Write my standup\n---\nWrite my standup.\n');
    h = await startHarness(llm.config(), { prepare: (ws) => write(ws, '.tandem/commands/review.md', REVIEW_MD), env: { XDG_CONFIG_HOME: xdg } });
    try {
      const { commands } = await h.client.commandsList(h.sessionId);
      const names = commands.map((c) => c.name);
      assert.deepEqual(names, [...names].sort(), 'sorted by name');
      for (const b of ['compact', 'diff', 'fork', 'init', 'mode', 'model', 'status', 'undo']) {
        const c = commands.find((x) => x.name === b);
        assert.equal(c?.source, 'builtin', `${b} is a built-in`);
        assert.match(c?.description ?? '', /\S/, `${b} has a description`);
      }
      assert.equal(commands.find((c) => c.name === 'model')?.argumentHint, 'NAME');
      assert.equal(commands.find((c) => c.name === 'mode')?.argumentHint, 'NAME');
      assert.equal(commands.find((c) => c.name === 'status')?.argumentHint, undefined);
      assert.deepEqual(commands.find((c) => c.name === 'review'), { name: 'review', description: 'Review a file', argumentHint: 'FILE', source: 'project' });
      assert.deepEqual(commands.find((c) => c.name === 'standup'), { name: 'standup', description: 'Write my standup', source: 'user' });
      assert.ok(names.every((n) => !n.startsWith('/')), 'names without the slash');

      write(h.workspace, '.claude/commands/later.md', 'Do it later.\n');
      const again = await h.client.commandsList(h.sessionId);
      assert.equal(again.commands.find((c) => c.name === 'later')?.source, 'project', 'read again at each call: no restart needed');
    } finally {
      await h.close();
    }
  });

  test('a custom command runs a turn: the model gets the expanded text, session/load keeps the text as typed', async () => {
    h = await startHarness(llm.config(), { prepare: (ws) => write(ws, '.tandem/commands/review.md', REVIEW_MD) });
    try {
      await llm.enqueue({ steps: [say('No bugs found.')] });
      const n = llm.requests.length;
      const r = await h.client.prompt(h.sessionId, '/review src/main.rs');
      assert.match(r.turnId ?? '', /\S/, 'a turn runs');
      assert.deepEqual(r.command, { name: 'review' });
      const ended = await h.event('turnEnded');
      assert.equal(ended.reason, 'completed');
      const users = (llm.requests[n].body.messages as { role: string; content: unknown }[]).filter((m) => m.role === 'user').map((m) => JSON.stringify(m.content));
      assert.match(users.at(-1) ?? '', /Review src\/main\.rs carefully and list the bugs\./, 'the body with $ARGUMENTS replaced');
      const loaded = await h.client.loadSession(h.sessionId);
      const typed = (loaded.messages as { role: string; text?: string }[]).filter((m) => m.role === 'user').map((m) => m.text);
      assert.deepEqual(typed, ['/review src/main.rs'], 'the history shows what the user typed');
    } finally {
      await h.close();
    }
  });

  test('/status answers at once without a turn: Markdown output naming the model, no request to the model', async () => {
    h = await startHarness(llm.config());
    try {
      const n = llm.requests.length;
      const before = h.events.length;
      const r = await h.client.prompt(h.sessionId, '/status');
      assert.equal(r.turnId, undefined, 'no turn');
      assert.equal(r.command?.name, 'status');
      assert.match(r.command?.output ?? '', /mock/, 'the output names the session model');
      assert.equal(llm.requests.length, n, 'the model was not asked');
      assert.equal(h.events.slice(before).filter((e) => e.type === 'turnStarted').length, 0);
      // A word that is no command goes to the model as typed.
      await llm.enqueue({ steps: [say('That is a path.')] });
      const plain = await h.client.prompt(h.sessionId, '/etc/hosts is odd');
      assert.match(plain.turnId ?? '', /\S/);
      assert.equal(plain.command, undefined);
      await h.event('turnEnded');
    } finally {
      await h.close();
    }
  });

  test('hooks/list shows untrusted project hooks that do not run; hooks/trust makes them run (hookRan in the chat), a blocking hook stops the tool', async () => {
    // The hook reads the event's JSON on stdin: it blocks a read of secret.txt (exit 2) and lets the rest through.
    const guard = `if grep -q secret.txt; then echo "secret.txt is off limits" >&2; exit 2; fi`;
    h = await startHarness(llm.config(), {
      prepare: (ws) => {
        write(ws, '.tandem/hooks.json', hooksJson('PreToolUse', 'Read', guard));
        write(ws, 'a.txt', 'alpha\n');
        write(ws, 'secret.txt', 'hunter2\n');
      },
    });
    try {
      const listed = await h.client.hooksList(h.sessionId);
      assert.equal(listed.trusted, false);
      assert.deepEqual(listed.projectFiles, ['.tandem/hooks.json']);
      assert.deepEqual(
        listed.hooks.map((x) => [x.event, x.matcher, x.command, x.source]),
        [['PreToolUse', 'Read', guard, 'project']],
      );
      assert.ok((listed.hooks[0].timeout ?? 0) > 0, 'a timeout in seconds');

      // Untrusted: a read runs without the hook.
      await llm.enqueue({ steps: [call('call_r0', 'read_file', { path: 'secret.txt' })] }, { steps: [say('read before trust')] });
      let from = h.events.length;
      await h.client.prompt(h.sessionId, 'read it');
      await h.event('turnEnded', undefined, from);
      assert.deepEqual(h.events.slice(from).filter((e) => e.type === 'hookRan'), [], 'an untrusted hook does not run');

      assert.deepEqual(await h.client.hooksTrust(h.sessionId), {});
      assert.equal((await h.client.hooksList(h.sessionId)).trusted, true);

      await llm.enqueue(
        { steps: [call('call_r1', 'read_file', { path: 'a.txt' })] },
        { steps: [call('call_r2', 'read_file', { path: 'secret.txt' })] },
        { steps: [say('done reading')] },
      );
      from = h.events.length;
      await h.client.prompt(h.sessionId, 'read both');
      await h.event('turnEnded', undefined, from);
      const runs = h.events.slice(from).filter((e): e is Extract<SessionEvent, { type: 'hookRan' }> => e.type === 'hookRan');
      assert.deepEqual(
        runs.map((e) => [e.event, e.command, e.exitCode, !!e.blocked]),
        [
          ['PreToolUse', guard, 0, false],
          ['PreToolUse', guard, 2, true],
        ],
      );
      assert.ok(runs.every((e) => typeof e.durationMs === 'number' && e.durationMs >= 0 && e.turnId));
      const blocked = h.state.toolByCallId('call_r2');
      assert.ok(blocked && blocked.status !== 'completed', `the blocked read did not complete (${blocked?.status})`);
      assert.doesNotMatch(blocked.result ?? '', /hunter2/, 'the secret was not read');
      const lines = h.state.items.filter((i) => i.type === 'hook');
      assert.equal(lines.length, 2, 'the chat shows both runs');
    } finally {
      await h.close();
    }
  });

  test("a failing hook of the user's (no trust needed): its line is marked failed and the server's warning notice is in the chat", async () => {
    const xdg = tempDir('tandem-xdg-hooks-');
    write(xdg, 'tandem/hooks.json', hooksJson('PostToolUse', 'Read', 'echo "log server down" >&2; exit 1'));
    h = await startHarness(llm.config(), { prepare: (ws) => write(ws, 'a.txt', 'alpha\n'), env: { XDG_CONFIG_HOME: xdg } });
    try {
      const listed = await h.client.hooksList(h.sessionId);
      assert.deepEqual([listed.trusted, listed.projectFiles, listed.hooks.map((x) => x.source)], [true, [], ['user']]);
      await llm.enqueue({ steps: [call('call_f1', 'read_file', { path: 'a.txt' })] }, { steps: [say('read anyway')] });
      await h.client.prompt(h.sessionId, 'read a');
      await h.event('turnEnded');
      const line = h.state.items.find((i) => i.type === 'hook');
      assert.ok(line?.type === 'hook');
      assert.deepEqual([line.event, line.exitCode, hookLine(line).outcome], ['PostToolUse', 1, 'failed']);
      const warning = h.state.items.find((i) => i.type === 'notice' && i.kind === 'warning');
      assert.ok(warning?.type === 'notice', `a warning notice: ${JSON.stringify(h.state.items.map((i) => i.type))}`);
      assert.match(warning.text, /log server down|exit/, 'it says why');
      assert.equal(h.state.toolByCallId('call_f1')?.status, 'completed', 'a PostToolUse failure does not undo the call');
    } finally {
      await h.close();
    }
  });

  test('hooks/trust in a workspace without project hooks is invalidParams', async () => {
    h = await startHarness(llm.config());
    try {
      const listed = await h.client.hooksList(h.sessionId);
      assert.deepEqual([listed.projectFiles, listed.trusted], [[], true]);
      await assert.rejects(h.client.hooksTrust(h.sessionId), (e) => errorKind(e) === 'invalidParams');
    } finally {
      await h.close();
    }
  });
});
