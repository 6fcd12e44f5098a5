// Unit tests of the MCP parts that need no server: the server list folded from mcp/status and mcpStatus events,
// the "MCP 2/3" summary and its warning, the MCP Servers Quick Pick rows, and the text of an MCP approval.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { ChatState, mcpOfName } from '../../src/chatState';
import { applyMcpStatus, formatArguments, mcpApprovalText, mcpPickItems, mcpServerDetails, mcpSummary, type McpServerInfo } from '../../src/mcp';
import type { SessionEvent } from '../../src/protocol';

const ready = (name: string, tools: string[]): McpServerInfo => ({ name, source: 'config', status: 'ready', tools });

test('the summary counts ready servers of all, and warns for failed, exited and untrusted ones only', () => {
  assert.equal(mcpSummary(undefined), undefined, 'no servers: nothing to show');
  assert.equal(mcpSummary([]), undefined);
  const ok = mcpSummary([ready('a', ['mcp__a__x']), ready('b', [])]);
  assert.deepEqual([ok?.label, ok?.warning], ['MCP 2/2', false]);
  assert.equal(ok?.tooltip, 'a: ready, 1 tool\nb: ready, 0 tools');
  const starting = mcpSummary([ready('a', []), { name: 'b', status: 'starting', tools: [] }]);
  assert.deepEqual([starting?.label, starting?.warning], ['MCP 1/2', false], 'starting is not a problem yet');
  for (const status of ['failed', 'exited', 'untrusted'] as const) {
    const s = mcpSummary([ready('a', []), ready('b', []), { name: 'c', status, tools: [], error: 'why' }]);
    assert.deepEqual([s?.label, s?.warning], ['MCP 2/3', true], status);
    assert.match(s!.tooltip, new RegExp(`c: ${status}`));
  }
});

test('mcpStatus events update a server in place, keep its source, append a new one, and drop tools when not ready', () => {
  let list: McpServerInfo[] = [{ name: 'w', source: 'workspace', status: 'untrusted', tools: [], error: 'trust it' }, ready('t', ['mcp__t__echo'])];
  list = applyMcpStatus(list, { server: 'w', status: 'starting' });
  assert.deepEqual(list[0], { name: 'w', source: 'workspace', status: 'starting', tools: [] }, 'the old error goes, the source stays');
  list = applyMcpStatus(list, { server: 'w', status: 'ready', tools: ['mcp__w__echo', 'mcp__w__env'] });
  assert.deepEqual(list[0].tools, ['mcp__w__echo', 'mcp__w__env']);
  list = applyMcpStatus(list, { server: 't', status: 'exited', tools: ['stale'], error: 'exited with status 1' });
  assert.deepEqual(list[1], { name: 't', source: 'config', status: 'exited', tools: [], error: 'exited with status 1' });
  list = applyMcpStatus(list, { server: 'n', status: 'starting' });
  assert.deepEqual(list.map((s) => s.name), ['w', 't', 'n']);
});

test('the ChatState folds mcpStatus into meta (a meta change, no chat item) and a new session forgets the old servers', () => {
  const s = new ChatState();
  s.reset({ sessionId: 's1', model: 'm', mode: 'ask' });
  s.setMeta({ mcp: [{ name: 'w', source: 'workspace', status: 'untrusted', tools: [] }] });
  const ch = s.apply({ sessionId: 's1', seq: 1, type: 'mcpStatus', server: 'w', status: 'ready', tools: ['mcp__w__echo'] } as SessionEvent);
  assert.deepEqual(ch, { items: [], meta: true });
  assert.deepEqual(s.meta.mcp, [{ name: 'w', source: 'workspace', status: 'ready', tools: ['mcp__w__echo'] }]);
  assert.equal(s.items.length, 0);
  s.reset({ sessionId: 's2', model: 'm', mode: 'ask' });
  assert.equal(s.meta.mcp, undefined);
});

test('MCP tool calls and approvals keep their server and tool on the card; history reads them from the name', () => {
  const s = new ChatState();
  s.reset({ sessionId: 's1', model: 'm', mode: 'ask' });
  let seq = 0;
  const feed = (e: Record<string, unknown>) => s.apply({ sessionId: 's1', seq: ++seq, turnId: 't', ...e } as SessionEvent);
  feed({ type: 'turnStarted', model: 'm' });
  const mcp = { server: 't', tool: 'echo' };
  feed({ type: 'toolCall', toolCallId: 'c1', name: 'mcp__t__echo', kind: 'other', title: 't: echo', arguments: { text: 'hi' }, mcp });
  assert.deepEqual(s.toolByCallId('c1')?.mcp, mcp);
  feed({ type: 'approvalRequested', requestId: 'r1', toolCallId: 'c1', name: 'mcp__t__echo', kind: 'other', title: 't: echo', reason: 'r', arguments: { text: 'hi' }, mcp, options: [] });
  assert.deepEqual(s.toolByRequest('r1')?.approval?.mcp, mcp);
  // An approval with no toolCall before it makes the card itself.
  feed({ type: 'approvalRequested', requestId: 'r2', toolCallId: 'c2', name: 'mcp__t__env', kind: 'other', title: 't: env', reason: 'r', arguments: {}, mcp: { server: 't', tool: 'env' }, options: [] });
  assert.deepEqual(s.toolByCallId('c2')?.mcp, { server: 't', tool: 'env' });
  feed({ type: 'toolCall', toolCallId: 'c3', name: 'read_file', kind: 'read', title: 'Read a', arguments: { path: 'a' } });
  assert.equal(s.toolByCallId('c3')?.mcp, undefined, 'a built-in tool has no server');

  const h = new ChatState();
  h.loadHistory([{ role: 'assistant', text: '', toolCalls: [{ toolCallId: 'c9', name: 'mcp__files__read_text_file', arguments: { path: 'a' }, result: 'x' }] }]);
  assert.deepEqual(h.toolByCallId('c9')?.mcp, { server: 'files', tool: 'read_text_file' });
  assert.equal(h.toolByCallId('c9')?.title, 'files: read_text_file');
  assert.equal(mcpOfName('read_file'), undefined);
});

test('an MCP approval names the server and the tool and shows the arguments as 2-space JSON', () => {
  const text = mcpApprovalText({ server: 'files', tool: 'read_text_file' }, { path: 'notes.md', opts: { head: 3, tags: ['a'] } });
  assert.equal(text.heading, 'MCP server `files` wants to run `read_text_file`');
  assert.equal(text.arguments, '{\n  "path": "notes.md",\n  "opts": {\n    "head": 3,\n    "tags": [\n      "a"\n    ]\n  }\n}');
  assert.equal(formatArguments('{not json'), '{not json', 'raw text the model sent is shown as it came');
  assert.equal(formatArguments(undefined), '{}');
});

test('the MCP Servers pick shows status, source, tool count and the whole error, and offers Trust and start for untrusted servers', () => {
  const longError = `cannot start \`nope\`: No such file or directory (os error 2); ${'x'.repeat(400)} check \`command\``;
  const items = mcpPickItems([
    ready('t', ['mcp__t__echo', 'mcp__t__env']),
    { name: 'w', source: 'workspace', status: 'untrusted', tools: [], error: '`w` comes from the workspace\'s .mcp.json; trust it' },
    { name: 'bad', source: 'session', status: 'failed', tools: [], error: longError },
  ]);
  assert.deepEqual(items.map((i) => [i.server, i.action]), [['t', 'show'], ['w', 'show'], ['w', 'trust'], ['bad', 'show']]);
  assert.match(items[0].label, /\bt$/);
  assert.equal(items[0].description, "ready · from tandem's config · 2 tools");
  assert.equal(items[0].detail, 'echo, env', 'a ready server lists its tools by their own names');
  assert.equal(items[1].description, "untrusted · from the workspace's .mcp.json · 0 tools");
  assert.match(items[2].label, /Trust and start w$/);
  assert.equal(items[3].detail, longError, 'the error is not cut');
  assert.equal(items[3].description, 'failed · from this session · 0 tools');
  const details = mcpServerDetails({ name: 'bad', source: 'session', status: 'failed', tools: [], error: longError });
  assert.ok(details.endsWith(longError), 'the follow-up message holds the whole error');
  assert.match(mcpServerDetails(ready('t', ['mcp__t__echo'])), /"t" \(from tandem's config\): ready, 1 tool\. Tools: echo\./);
});
