// A small in-memory stand-in for the `vscode` module, enough to run the extension's controller, diff review
// and commands under plain node: it records executed commands, messages and opened diffs, and lets a test
// script the answers of input boxes and quick picks. Installed by vscodeHook.ts.
import * as path from 'node:path';

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly path: string,
    readonly query = '',
  ) {}
  get fsPath(): string {
    return this.path;
  }
  static file(p: string): Uri {
    return new Uri('file', p);
  }
  static from(c: { scheme: string; path: string; query?: string }): Uri {
    return new Uri(c.scheme, c.path, c.query ?? '');
  }
  static joinPath(base: Uri, ...parts: string[]): Uri {
    return new Uri(base.scheme, path.posix.join(base.path, ...parts));
  }
  toString(): string {
    return `${this.scheme}:${this.path}${this.query ? `?${this.query}` : ''}`;
  }
}

export class Disposable {
  constructor(private readonly fn: () => void = () => {}) {}
  dispose(): void {
    this.fn();
  }
}

export class EventEmitter<T> {
  private listeners: ((e: T) => void)[] = [];
  event = (l: (e: T) => void) => {
    this.listeners.push(l);
    return new Disposable(() => (this.listeners = this.listeners.filter((x) => x !== l)));
  };
  fire(e: T): void {
    for (const l of this.listeners) l(e);
  }
  dispose(): void {
    this.listeners = [];
  }
}

export class ThemeColor {
  constructor(readonly id: string) {}
}
export class CancellationTokenSource {
  token = { isCancellationRequested: false };
  cancel(): void {
    this.token.isCancellationRequested = true;
  }
}
export class TabInputTextDiff {
  constructor(
    readonly original: Uri,
    readonly modified: Uri,
  ) {}
}
export class TabInputText {
  constructor(readonly uri: Uri) {}
}
export const FileSystemError = {
  FileNotFound: (u?: unknown) => new Error(`FileNotFound ${String(u)}`),
  NoPermissions: (m?: unknown) => new Error(`NoPermissions ${String(m)}`),
};
export const FileType = { File: 1, Directory: 2 };
export const FileChangeType = { Changed: 1, Created: 2, Deleted: 3 };
export const FilePermission = { Readonly: 1 };
export const StatusBarAlignment = { Left: 1, Right: 2 };
export const ViewColumn = { Active: -1, Beside: -2, One: 1, Two: 2 };

/** A text document as the fake editor holds it; `setText` simulates the user typing in it. */
export class FakeDocument {
  isDirty = false;
  constructor(
    readonly uri: Uri,
    private text: string,
  ) {}
  getText(): string {
    return this.text;
  }
  setText(t: string): void {
    this.text = t;
    this.isDirty = true;
  }
  async save(): Promise<boolean> {
    const fsp = fake.fileSystems.get(this.uri.scheme);
    fsp?.writeFile(this.uri, Buffer.from(this.text), { create: true, overwrite: true });
    this.isDirty = false;
    return true;
  }
}

interface Tab {
  input: unknown;
}

/** The test-visible state of the fake host. */
export const fake = {
  settings: new Map<string, unknown>(),
  commands: new Map<string, (...a: unknown[]) => unknown>(),
  executed: [] as { id: string; args: unknown[] }[],
  contexts: new Map<string, unknown>(),
  messages: [] as { level: 'info' | 'warning' | 'error'; text: string; actions: string[]; modal?: boolean; detail?: string }[],
  /** Commands this host does not have (executeCommand rejects as VS Code does), e.g. `vscode.changes` of an old VS Code. */
  missingCommands: new Set<string>(),
  inputBoxAnswers: [] as (string | undefined)[],
  quickPickAnswers: [] as ((items: any[]) => any)[],
  /** Every Quick Pick shown: its items and options (title, …). */
  quickPicks: [] as { items: any[]; options: any }[],
  fileSystems: new Map<string, any>(),
  contentProviders: new Map<string, any>(),
  textDocuments: [] as FakeDocument[],
  tabs: [] as Tab[],
  webviewProviders: new Map<string, any>(),
  statusBar: { text: '', tooltip: '', command: '' as unknown, backgroundColor: undefined as unknown, name: '', show() {}, hide() {}, dispose() {} },
  /** Status bar items other than the main one (`tandem.status`), by id, with whether they are shown. */
  statusBars: new Map<string, { text: string; tooltip: string; command: unknown; backgroundColor: unknown; name: string; visible: boolean; show(): void; hide(): void; dispose(): void }>(),
  /** Answers a message's action buttons (a notification clicked); undefined: dismissed. */
  onMessage: undefined as
    | ((m: { level: 'info' | 'warning' | 'error'; text: string; actions: string[]; modal?: boolean; detail?: string }) => string | undefined | Promise<string | undefined>)
    | undefined,
  output: [] as string[],
  /** What the extension put on the clipboard (vscode.env.clipboard), last write wins. */
  clipboard: '',
  workspaceFolder: undefined as string | undefined,
  configListeners: [] as ((e: { affectsConfiguration(section: string): boolean }) => void)[],
  /** Changes settings as the Settings editor does: stores them, then fires onDidChangeConfiguration. */
  changeSettings(values: Record<string, unknown>): void {
    for (const [k, v] of Object.entries(values)) this.settings.set(k, v);
    const keys = Object.keys(values);
    const e = { affectsConfiguration: (section: string) => keys.some((k) => k === section || k.startsWith(`${section}.`)) };
    for (const l of [...this.configListeners]) l(e);
  },
  reset(): void {
    this.settings.clear();
    this.commands.clear();
    this.executed.length = 0;
    this.contexts.clear();
    this.messages.length = 0;
    this.inputBoxAnswers.length = 0;
    this.quickPickAnswers.length = 0;
    this.quickPicks.length = 0;
    this.fileSystems.clear();
    this.contentProviders.clear();
    this.textDocuments.length = 0;
    this.tabs.length = 0;
    this.webviewProviders.clear();
    this.output.length = 0;
    this.clipboard = '';
    this.configListeners.length = 0;
    this.statusBars.clear();
    this.missingCommands.clear();
    this.onMessage = undefined;
  },
};

function readDoc(uri: Uri): string {
  const fsp = fake.fileSystems.get(uri.scheme);
  if (fsp) return Buffer.from(fsp.readFile(uri)).toString('utf8');
  const cp = fake.contentProviders.get(uri.scheme);
  if (cp) return cp.provideTextDocumentContent(uri);
  return require('node:fs').readFileSync(uri.fsPath, 'utf8');
}

export const workspace = {
  get workspaceFolders() {
    return fake.workspaceFolder ? [{ uri: Uri.file(fake.workspaceFolder), name: 'ws', index: 0 }] : undefined;
  },
  get textDocuments() {
    return fake.textDocuments;
  },
  getConfiguration(section: string) {
    return { get: <T>(key: string, def?: T) => (fake.settings.has(`${section}.${key}`) ? (fake.settings.get(`${section}.${key}`) as T) : def) };
  },
  registerFileSystemProvider(scheme: string, p: unknown) {
    fake.fileSystems.set(scheme, p);
    return new Disposable(() => fake.fileSystems.delete(scheme));
  },
  registerTextDocumentContentProvider(scheme: string, p: unknown) {
    fake.contentProviders.set(scheme, p);
    return new Disposable(() => fake.contentProviders.delete(scheme));
  },
  onDidChangeConfiguration(l: (e: { affectsConfiguration(section: string): boolean }) => void) {
    fake.configListeners.push(l);
    return new Disposable(() => fake.configListeners.splice(fake.configListeners.indexOf(l), 1));
  },
  getWorkspaceFolder: () => workspace.workspaceFolders?.[0],
  /** Every file under the workspace folder (the include glob is ignored; node_modules and .git are skipped). */
  async findFiles(_include: string, _exclude?: string, max = 5000) {
    const fs = require('node:fs') as typeof import('node:fs');
    const path = require('node:path') as typeof import('node:path');
    const out: Uri[] = [];
    const walk = (dir: string) => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        if (out.length >= max || e.name === 'node_modules' || e.name === '.git') continue;
        const p = path.join(dir, e.name);
        if (e.isDirectory()) walk(p);
        else if (e.isFile()) out.push(Uri.file(p));
      }
    };
    if (fake.workspaceFolder) walk(fake.workspaceFolder);
    return out;
  },
  async openTextDocument(uri: Uri) {
    let d = fake.textDocuments.find((x) => x.uri.toString() === uri.toString());
    if (!d) fake.textDocuments.push((d = new FakeDocument(uri, readDoc(uri))));
    return d;
  },
};

// Like VS Code, an options object ({modal, detail}) may come before the actions, which are labels or MessageItems
// ({title}); `actions` records their labels, and an answer naming a MessageItem's title resolves that item.
const message = (level: 'info' | 'warning' | 'error') => async (text: string, ...rest: unknown[]) => {
  const isItem = (x: unknown) => typeof x === 'object' && x !== null && 'title' in x;
  const options = rest.length && typeof rest[0] === 'object' && rest[0] !== null && !isItem(rest[0]) ? (rest.shift() as { modal?: boolean; detail?: string }) : {};
  const actions = rest.map((a) => (isItem(a) ? (a as { title: string }).title : (a as string)));
  const m = { level, text, actions, ...(options.modal ? { modal: true } : {}), ...(options.detail !== undefined ? { detail: options.detail } : {}) };
  fake.messages.push(m);
  const answer = await fake.onMessage?.(m);
  const item = rest.find((a) => isItem(a) && (a as { title: string }).title === answer);
  return item ?? answer;
};

export const window = {
  activeTextEditor: undefined as unknown,
  createStatusBarItem: (id?: string) => {
    if (!id || id === 'tandem.status') return fake.statusBar;
    const item = { text: '', tooltip: '', command: '' as unknown, backgroundColor: undefined as unknown, name: '', visible: false, show() { item.visible = true; }, hide() { item.visible = false; }, dispose() { item.visible = false; } };
    fake.statusBars.set(id, item);
    return item;
  },
  createOutputChannel: () => ({ appendLine: (l: string) => fake.output.push(l), show() {}, dispose() {} }),
  showInformationMessage: message('info'),
  showWarningMessage: message('warning'),
  showErrorMessage: message('error'),
  setStatusBarMessage: () => new Disposable(),
  async showInputBox() {
    return fake.inputBoxAnswers.shift();
  },
  async showQuickPick(items: any[], options?: any) {
    const resolved = await items;
    fake.quickPicks.push({ items: resolved, options });
    const f = fake.quickPickAnswers.shift();
    return f ? f(resolved) : undefined;
  },
  createQuickPick() {
    const hide = new EventEmitter<void>();
    return { items: [] as any[], selectedItems: [] as any[], onDidAccept: () => new Disposable(), onDidHide: hide.event, show() {}, hide: () => hide.fire(), dispose() {} };
  },
  registerWebviewViewProvider(id: string, p: unknown) {
    fake.webviewProviders.set(id, p);
    return new Disposable();
  },
  async showTextDocument() {
    return undefined;
  },
  tabGroups: {
    get all() {
      return [{ tabs: fake.tabs }];
    },
    async close(tabs: Tab[]) {
      for (const t of tabs) fake.tabs.splice(fake.tabs.indexOf(t), 1);
      return true;
    },
  },
};

export const env = {
  clipboard: {
    async readText() {
      return fake.clipboard;
    },
    async writeText(text: string) {
      fake.clipboard = text;
    },
  },
};

export const commands = {
  registerCommand(id: string, fn: (...a: unknown[]) => unknown) {
    fake.commands.set(id, fn);
    return new Disposable(() => fake.commands.delete(id));
  },
  async executeCommand(id: string, ...args: unknown[]) {
    if (fake.missingCommands.has(id)) throw new Error(`command '${id}' not found`);
    fake.executed.push({ id, args });
    if (id === 'setContext') {
      fake.contexts.set(args[0] as string, args[1]);
      return;
    }
    if (id === 'vscode.diff') {
      // Like VS Code: both sides become open documents and one diff tab shows them.
      const [left, right] = args as [Uri, Uri];
      await workspace.openTextDocument(left);
      await workspace.openTextDocument(right);
      fake.tabs.push({ input: new TabInputTextDiff(left, right) });
      return;
    }
    const fn = fake.commands.get(id);
    return fn ? fn(...args) : undefined;
  },
};
