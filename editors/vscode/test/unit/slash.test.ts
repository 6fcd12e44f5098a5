// Unit tests of the slash-command completion's logic (src/slash.ts), which the prompt box's list runs on: when it
// opens and what it filters by, the order of matches, the keys (arrows wrap, Tab and Enter complete `/name `,
// Enter sends a command typed in full, Escape closes until a fresh `/`), and that it leaves other keys to the box.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { BUILTIN_COMMANDS, commandOf, completeText, filterCommands, slashQuery, SlashCompletion } from '../../src/slash';
import type { SlashCommand } from '../../src/protocol';

const COMMANDS: SlashCommand[] = [
  { name: 'compact', description: 'Summarize the conversation so far to free context', source: 'builtin' },
  { name: 'mode', description: 'Switch the approval mode', argumentHint: 'NAME', source: 'builtin' },
  { name: 'model', description: 'Switch the model of this session', argumentHint: 'NAME', source: 'builtin' },
  { name: 'review', description: 'Review a file', argumentHint: 'FILE', source: 'project' },
  { name: 'standup', description: 'Write my standup', source: 'user' },
  { name: 'status', description: "Show the session's model, mode and usage", source: 'builtin' },
  { name: 'team:deploy', description: 'Deploy the review app', source: 'project' },
];

const names = (cs: SlashCommand[]) => cs.map((c) => c.name);

/** A completion fed like the webview does: `type()` sets the box's text (caret at the end) and reports `input`. */
function box(commands = COMMANDS) {
  const s = new SlashCompletion();
  let text = '';
  const fetched: string[] = [];
  const type = (next: string, caret = next.length) => {
    if (s.input(next, caret, text)) fetched.push(next);
    text = next;
  };
  const key = (k: string, mods = {}) => {
    const r = s.key(k, mods, text);
    if (r.handled && r.text !== undefined) type(r.text, r.caret);
    return r;
  };
  s.setCommands(commands);
  return { s, type, key, fetched, text: () => text };
}

test('the query is what follows the slash up to the caret, while the caret is in the first word', () => {
  assert.equal(slashQuery('/', 1), '');
  assert.equal(slashQuery('/rev', 4), 'rev');
  assert.equal(slashQuery('/review', 3), 're', 'up to the caret');
  assert.equal(slashQuery('/review src/a.ts', 16), undefined, 'an argument is being typed');
  assert.equal(slashQuery('/review ', 8), undefined);
  assert.equal(slashQuery('review', 6), undefined, 'no slash at the start');
  assert.equal(slashQuery(' /review', 8), undefined, 'the slash must be the first character');
  assert.equal(slashQuery('/x', 0), undefined, 'the caret before the slash');
});

test('matches: names starting with the query first, then names containing it, then descriptions; by name in each group', () => {
  assert.deepEqual(names(filterCommands(COMMANDS, '')), names(COMMANDS), 'everything for a bare slash, as listed');
  assert.deepEqual(names(filterCommands(COMMANDS, 'mo')), ['mode', 'model']);
  assert.deepEqual(names(filterCommands(COMMANDS, 'MO')), ['mode', 'model'], 'case-insensitive');
  assert.deepEqual(names(filterCommands(COMMANDS, 'de')), ['mode', 'model', 'team:deploy'], 'inside a name');
  assert.deepEqual(names(filterCommands(COMMANDS, 'sw')), [], 'a short query does not search descriptions (“Switch …”)');
  assert.deepEqual(names(filterCommands(COMMANDS, 'swi')), ['mode', 'model']);
  assert.deepEqual(names(filterCommands(COMMANDS, 'conv')), ['compact'], 'a word of the description');
  assert.deepEqual(names(filterCommands(COMMANDS, 'model')), ['model', 'status'], 'names first, then descriptions');
  assert.deepEqual(names(filterCommands(COMMANDS, 'view')), ['review'], 'a description matches at the start of a word only');
  assert.deepEqual(names(filterCommands(COMMANDS, 'review')), ['review', 'team:deploy']);
  const ab: SlashCommand[] = [
    { name: 'a:review', source: 'project' },
    { name: 'b', description: 'Review everything', source: 'user' },
    { name: 'review', source: 'project' },
  ];
  assert.deepEqual(names(filterCommands(ab, 'rev')), ['review', 'a:review', 'b'], 'ranked before sorted by name');
  assert.deepEqual(names(filterCommands(COMMANDS, 'zzz')), []);
});

test('completing puts `/name ` into the box and keeps an argument typed after the name', () => {
  assert.deepEqual(completeText('/rev', 'review'), { text: '/review ', caret: 8 });
  assert.deepEqual(completeText('/rev src/a.ts', 'review'), { text: '/review src/a.ts', caret: 8 });
  assert.deepEqual(completeText('/', 'status'), { text: '/status ', caret: 8 });
});

test('a fresh slash at the start opens the list and asks for it again; typing filters; a space or deleting the slash closes it', () => {
  const { s, type, fetched } = box();
  type('hello');
  assert.equal(s.open, false);
  type('');
  type('/');
  assert.deepEqual(fetched, ['/'], 'the first slash fetches the list');
  assert.equal(s.open, true);
  assert.equal(s.items.length, COMMANDS.length);
  type('/st');
  assert.deepEqual(names(s.items), ['standup', 'status']);
  assert.equal(s.query, 'st');
  assert.deepEqual(fetched, ['/'], 'typing on is not a fresh slash');
  type('/status ');
  assert.equal(s.open, false, 'the name is complete: the argument is free text');
  type('/status');
  assert.equal(s.open, true, 'back in the name');
  type('');
  assert.equal(s.open, false);
  type('/');
  assert.deepEqual(fetched, ['/', '/'], 'a slash typed again at the start fetches again (a new command file shows up)');
  type('x/');
  type('/x/');
  assert.deepEqual(fetched, ['/', '/', '/x/'], 'a pasted text starting with a slash is fresh too');
});

test('arrow keys move through the matches and wrap; Tab completes the highlighted one', () => {
  const { s, type, key, text } = box();
  type('/mo');
  assert.deepEqual([names(s.items), s.active], [['mode', 'model'], 0]);
  assert.deepEqual(key('ArrowDown'), { handled: true });
  assert.equal(s.active, 1);
  key('ArrowDown');
  assert.equal(s.active, 0, 'wraps to the top');
  key('ArrowUp');
  assert.equal(s.active, 1, 'wraps to the bottom');
  const r = key('Tab');
  assert.deepEqual(r, { handled: true, text: '/model ', caret: 7 });
  assert.equal(text(), '/model ');
  assert.equal(s.open, false, 'completed: the list is closed');
});

test('the highlighted command stays highlighted while the list narrows, and when a fresh list arrives', () => {
  const { s, type, key } = box();
  type('/');
  key('ArrowDown');
  key('ArrowDown');
  assert.equal(s.items[s.active].name, 'model');
  type('/m');
  assert.equal(s.items[s.active].name, 'model');
  s.setCommands([{ name: 'model', source: 'builtin' }, { name: 'mock', source: 'user' }, { name: 'mode', source: 'builtin' }]);
  assert.equal(s.items[s.active].name, 'model');
  type('/mock');
  assert.equal(s.items[s.active].name, 'mock', 'gone from the matches: the first one');
});

test('Enter completes a partly typed name, sends a command typed in full that takes no argument, and completes one that takes an argument', () => {
  const { s, type, key, text } = box();
  type('/sta');
  assert.deepEqual(key('Enter'), { handled: true, text: '/standup ', caret: 9 });
  assert.equal(text(), '/standup ');

  type('');
  type('/status');
  assert.deepEqual(key('Enter'), { handled: false }, 'the box sends /status');
  assert.equal(s.open, false);

  type('');
  type('/review');
  assert.deepEqual(key('Enter'), { handled: true, text: '/review ', caret: 8 }, 'FILE goes after it');

  type('');
  type('/zzz');
  assert.deepEqual(key('Enter'), { handled: false }, 'no match: the text goes as typed');
  assert.deepEqual(key('Enter', { shift: true }), { handled: false });
});

test('Escape closes the list until a fresh slash; keys with modifiers, while composing or with the list closed are the box’s', () => {
  const { s, type, key, fetched } = box();
  type('/re');
  assert.deepEqual(key('Escape'), { handled: true }, 'the box must not stop a turn for this Escape');
  assert.equal(s.open, false);
  type('/rev');
  assert.equal(s.open, false, 'typing on does not reopen it');
  assert.deepEqual(key('Escape'), { handled: false }, 'a second Escape is the box’s again');
  assert.deepEqual(key('ArrowDown'), { handled: false });
  type('');
  type('/');
  assert.equal(s.open, true, 'a fresh slash reopens it');
  assert.equal(fetched.length, 2);
  for (const mods of [{ ctrl: true }, { alt: true }, { meta: true }, { composing: true }]) {
    assert.deepEqual(key('Enter', mods), { handled: false }, JSON.stringify(mods));
    assert.equal(s.open, true);
  }
  assert.deepEqual(key('a'), { handled: false });
  assert.deepEqual(key('Tab', { shift: true }), { handled: false }, 'Shift+Tab moves the focus back');
});

test('with nothing to show, arrows and Tab are the box’s (no keyboard trap); before the list arrives it is loading', () => {
  const s = new SlashCompletion();
  s.input('/', 1, '');
  assert.equal(s.open, true);
  assert.equal(s.loaded, false);
  assert.deepEqual(s.key('Tab', {}, '/'), { handled: false });
  assert.deepEqual(s.key('ArrowDown', {}, '/'), { handled: false });
  s.setCommands([], 'method not found');
  assert.equal(s.loaded, true);
  assert.equal(s.error, 'method not found');
  s.setCommands(COMMANDS);
  assert.equal(s.items.length, COMMANDS.length, 'an open list is filtered when the commands arrive');
  s.reset();
  assert.deepEqual([s.loaded, s.open, s.commands.length], [false, false, 0], 'another session: forgotten');
});

test('complete() by index (a click) completes that row', () => {
  const { s, type } = box();
  type('/s');
  assert.deepEqual(names(s.items), ['standup', 'status']);
  assert.deepEqual(s.complete(1, '/s'), { text: '/status ', caret: 8 });
  assert.equal(s.open, false);
});

test('commandOf tells a prompt that runs a listed command from text that only starts with a slash', () => {
  assert.equal(commandOf('/review src/a.ts', COMMANDS), 'review');
  assert.equal(commandOf('/status', COMMANDS), 'status');
  assert.equal(commandOf('/team:deploy now', COMMANDS), 'team:deploy');
  assert.equal(commandOf('/etc/hosts is broken', COMMANDS), undefined);
  assert.equal(commandOf('/reviewer', COMMANDS), undefined, 'the whole word');
  assert.equal(commandOf('please /review', COMMANDS), undefined);
  assert.deepEqual(names([...BUILTIN_COMMANDS]), ['compact', 'diff', 'fork', 'init', 'mode', 'model', 'status', 'undo'], "protocol.md's built-ins, sorted");
});
