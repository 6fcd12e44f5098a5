// Unit tests of package.json's activation: the extension activates only on its own view and commands, never
// on startup, because activation in every window is what started a server (and stored an empty session)
// per window. Also keeps the context key of the Sessions command in step with what the controller sets.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';

// out/test/unit -> editors/vscode
const manifest = JSON.parse(fs.readFileSync(path.resolve(__dirname, '..', '..', '..', 'package.json'), 'utf8'));

test('activation events are the chat view and the contributed commands, nothing at startup', () => {
  const events: string[] = manifest.activationEvents;
  const commands: string[] = manifest.contributes.commands.map((c: { command: string }) => c.command);
  const views: string[] = Object.values(manifest.contributes.views as Record<string, { id: string }[]>).flat().map((v) => v.id);
  assert.deepEqual(
    [...events].sort(),
    [...views.map((v) => `onView:${v}`), ...commands.map((c) => `onCommand:${c}`)].sort(),
    'one event per view and per command, and no other (no "*", onStartupFinished or workspaceContains)',
  );
});

test('the Sessions command is offered until the server says it keeps no store', () => {
  const entry = manifest.contributes.menus.commandPalette.find((m: { command: string }) => m.command === 'tandem.sessions');
  // The controller sets tandem.noSessionStore after initialize; before any server runs the key is unset.
  assert.equal(entry.when, '!tandem.noSessionStore');
  const controller = fs.readFileSync(path.resolve(__dirname, '..', '..', '..', 'src', 'controller.ts'), 'utf8');
  assert.match(controller, /'setContext', 'tandem\.noSessionStore'/);
});

test('every contributed command is registered in commands.ts, and nothing else is', () => {
  const commands: string[] = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
  const source = fs.readFileSync(path.resolve(__dirname, '..', '..', '..', 'src', 'commands.ts'), 'utf8');
  const registered = [...source.matchAll(/register\('([^']+)'/g)].map((m) => m[1]).sort();
  assert.deepEqual(registered, commands);
});

test('every contributed command has a title in the tandem category', () => {
  for (const c of manifest.contributes.commands as { command: string; title?: string; category?: string }[]) {
    assert.ok(c.title?.trim(), `${c.command} has a title`);
    assert.equal(c.category, 'tandem', `${c.command} is in the tandem category`);
  }
  assert.ok(manifest.contributes.commands.some((c: { command: string }) => c.command === 'tandem.mcpServers'), 'MCP Servers is contributed');
});

test('the manifest has an icon file and a changelog next to it', () => {
  const root = path.resolve(__dirname, '..', '..', '..');
  assert.ok(fs.existsSync(path.join(root, manifest.icon)), `icon ${manifest.icon}`);
  assert.ok(fs.existsSync(path.join(root, 'CHANGELOG.md')));
});
