// Slash-command completion in the chat's prompt box (issue 27): when the text starts with `/`, a list of the
// session's commands (`commands/list`) filtered by what follows the slash; arrow keys move in it, Tab or Enter
// put `/name ` into the box, Escape closes it. Pure and DOM-free: the webview feeds it the box's text and keys and
// renders what it says (src/webview/main.ts), and the unit tests drive the same object without a browser.
import type { SlashCommand } from './protocol';

/**
 * The part of a command name typed so far: the text between a leading `/` and the caret while the caret is
 * still in that first word. Undefined when the text does not start with `/` or the caret is past the name (an
 * argument is being typed): there is nothing to complete then.
 */
export function slashQuery(text: string, caret: number): string | undefined {
  if (!text.startsWith('/') || caret < 1) return undefined;
  const typed = text.slice(1, caret);
  return /\s/.test(typed) ? undefined : typed;
}

/**
 * The commands matching a query, best first: names starting with it, then names containing it (`sub:name`
 * namespaced ones), then, for a query of 3 characters or more, commands with a word of their description starting
 * with it (`/conv` finds `compact`); by name within each group. Case-insensitive.
 */
export function filterCommands(commands: readonly SlashCommand[], query: string): SlashCommand[] {
  const q = query.toLowerCase();
  const rank = (c: SlashCommand): number => {
    const name = c.name.toLowerCase();
    if (name.startsWith(q)) return 0;
    if (name.includes(q)) return 1;
    if (q.length >= 3 && (c.description ?? '').toLowerCase().split(/[^\p{L}\p{N}]+/u).some((w) => w.startsWith(q))) return 2;
    return -1;
  };
  return commands
    .map((c) => ({ c, r: rank(c) }))
    .filter((x) => x.r >= 0)
    .sort((a, b) => a.r - b.r || (a.c.name < b.c.name ? -1 : a.c.name > b.c.name ? 1 : 0))
    .map((x) => x.c);
}

/** What the box holds after completing `name`: `/name ` and whatever followed the typed name (an argument). */
export function completeText(text: string, name: string): { text: string; caret: number } {
  const rest = text.replace(/^\/\S*/, '').replace(/^\s+/, '');
  return { text: `/${name} ${rest}`, caret: name.length + 2 };
}

/** Labels of a command's source in the list. */
export const SOURCE_LABELS: Record<string, string> = { builtin: 'built-in', project: 'project', user: 'user' };

/** The answer to a key pressed in the box while the list may be open. */
export type SlashKey =
  /** Not the list's key: the box does what it always does (Enter sends, Escape stops a turn, Tab moves on). */
  | { handled: false }
  /** The list took the key (the box must not act on it); `text`/`caret`: a completion to put into the box. */
  | { handled: true; text?: string; caret?: number };

/**
 * The completion list's state. `input()` after every change of the box, `key()` for each key pressed in it,
 * `setCommands()` when the list arrives; `open`, `items` and `active` are what to show.
 */
export class SlashCompletion {
  /** The session's commands as last listed. */
  commands: SlashCommand[] = [];
  /** Whether a list arrived since the completion started (before that the list says it is loading). */
  loaded = false;
  /** Why the list could not be fetched, shown in its place. */
  error?: string;
  /** A note under the list (e.g. that only the built-ins are known before the session starts). */
  note?: string;
  open = false;
  query = '';
  /** The commands shown: `commands` filtered by `query`, best first. */
  items: SlashCommand[] = [];
  /** Index into `items` of the highlighted entry. */
  active = 0;
  /** Escape closed the list: it stays closed until a fresh `/` is typed at the start. */
  private dismissed = false;

  /**
   * The box changed (typing, paste, a completion put in). Returns true when the text just started to begin with
   * `/` (a fresh slash at the start): the caller fetches the command list again then.
   */
  input(text: string, caret: number, previous: string): boolean {
    const fresh = text.startsWith('/') && !previous.startsWith('/');
    if (fresh) this.dismissed = false;
    const query = slashQuery(text, caret);
    if (query === undefined || this.dismissed) {
      this.close();
      return fresh;
    }
    this.open = true;
    this.query = query;
    this.refilter();
    return fresh;
  }

  /** The command list arrived (or could not be fetched: `error`); an open list is filtered again. */
  setCommands(commands: SlashCommand[], error?: string, note?: string): void {
    this.commands = commands;
    this.loaded = true;
    this.error = error;
    this.note = note;
    if (this.open) this.refilter();
  }

  /** A key pressed in the box (`text`: the box's text). See SlashKey. */
  key(key: string, mods: { shift?: boolean; ctrl?: boolean; alt?: boolean; meta?: boolean; composing?: boolean }, text: string): SlashKey {
    if (!this.open || mods.composing || mods.ctrl || mods.alt || mods.meta) return { handled: false };
    const n = this.items.length;
    switch (key) {
      case 'ArrowDown':
        if (!n) return { handled: false };
        this.active = (this.active + 1) % n;
        return { handled: true };
      case 'ArrowUp':
        if (!n) return { handled: false };
        this.active = (this.active - 1 + n) % n;
        return { handled: true };
      case 'Escape':
        this.dismissed = true;
        this.close();
        return { handled: true };
      case 'Tab':
        // With nothing to complete Tab moves the focus on, as it does without the list (no keyboard trap).
        if (!n || mods.shift) return { handled: false };
        return { handled: true, ...this.complete(this.active, text) };
      case 'Enter': {
        if (mods.shift) return { handled: false };
        const item = this.items[this.active];
        // Nothing matches: the text goes as typed (the server sends a `/word` it does not know to the model).
        // A command typed in full that takes no argument is sent at once rather than completed first.
        if (!item || (item.name === this.query && !item.argumentHint)) {
          this.close();
          return { handled: false };
        }
        return { handled: true, ...this.complete(this.active, text) };
      }
      default:
        return { handled: false };
    }
  }

  /** Completes the entry at `index` (a click, Tab, Enter): the box's new text and caret; the list closes. */
  complete(index: number, text: string): { text: string; caret: number } {
    const item = this.items[index];
    if (!item) return { text, caret: text.length };
    this.close();
    return completeText(text, item.name);
  }

  /** Forgets the list (another session): the next `/` shows it loading until it arrives. */
  reset(): void {
    this.commands = [];
    this.loaded = false;
    this.error = undefined;
    this.note = undefined;
    this.close();
  }

  close(): void {
    this.open = false;
    this.items = [];
    this.active = 0;
  }

  /** Filters again, keeping the highlighted command when it still matches. */
  private refilter(): void {
    const was = this.items[this.active]?.name;
    this.items = filterCommands(this.commands, this.query);
    const keep = was === undefined ? -1 : this.items.findIndex((c) => c.name === was);
    this.active = keep >= 0 ? keep : 0;
  }
}

/**
 * The built-in commands as protocol.md lists them, offered while the chat is a draft: `commands/list` needs a
 * session, and the first prompt creates it. Project and user commands are listed once it exists.
 */
export const BUILTIN_COMMANDS: readonly SlashCommand[] = [
  { name: 'compact', description: 'Summarize the conversation so far to free context', source: 'builtin' },
  { name: 'diff', description: 'Show what the last turn changed in the workspace', source: 'builtin' },
  { name: 'fork', description: 'Copy this conversation into a new session', source: 'builtin' },
  { name: 'init', description: 'Have the model write an AGENTS.md describing this project', source: 'builtin' },
  { name: 'mode', description: 'Switch the approval mode', argumentHint: 'NAME', source: 'builtin' },
  { name: 'model', description: 'Switch the model of this session', argumentHint: 'NAME', source: 'builtin' },
  { name: 'status', description: "Show the session's model, mode, usage, servers and hooks", source: 'builtin' },
  { name: 'undo', description: 'Undo the last turn: its file changes and its messages', source: 'builtin' },
];

/** The name of the command a prompt runs, if its text starts with `/name` of one of `commands`. */
export function commandOf(text: string, commands: readonly SlashCommand[]): string | undefined {
  const m = /^\/(\S+)/.exec(text.trimStart());
  return m && commands.some((c) => c.name === m[1]) ? m[1] : undefined;
}
