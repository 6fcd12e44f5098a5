// Delivery of chat state to the webview with a ready handshake: nothing is posted until the webview says
// `ready` (messages posted earlier would be dropped by VS Code), then it gets one full snapshot followed by
// incremental updates. Because the snapshot comes from ChatState, an event that arrived before the view
// existed, or while it was hidden or reloading, is never lost. vscode-free so it is unit-tested.
// A streaming assistant message only grows, so while it streams the bridge posts what was appended since the
// last post (`append`) instead of the whole message: re-sending and re-parsing a 2,000-line answer on every
// chunk made streaming cost quadratic CPU in the extension host and the webview (issue 23 item 9).
import type { Change, ChatItem, ChatMeta, ChatState, Snapshot } from './chatState';
import type { SlashCommand } from './protocol';

/**
 * What the extension posts to the chat webview (the other direction is chatView.ts's WebviewMessage). The plan's
 * checklist rides in `meta` (ChatMeta.plan), so a reloaded view gets it with the snapshot.
 */
export type HostMessage =
  | { type: 'snapshot'; snapshot: Snapshot }
  | { type: 'items'; updates: { index: number; item: ChatItem }[] }
  | { type: 'append'; index: number; text: string; reasoning: string }
  | { type: 'meta'; meta: ChatMeta }
  | { type: 'focus' }
  | { type: 'mention'; mention: string | null }
  /**
   * The slash commands for the prompt box's completion (answering `listCommands`): `error` when they could not be
   * listed, `note` to show under the list.
   */
  | { type: 'commands'; commands: SlashCommand[]; error?: string; note?: string };

export type Post = (message: HostMessage) => unknown;

export class ViewBridge {
  private post?: Post;
  private ready = false;
  /** Text and reasoning lengths of each streaming assistant item the webview holds, by item index. */
  private readonly sent = new Map<number, { text: number; reasoning: number }>();

  constructor(private readonly state: ChatState) {}

  get isReady(): boolean {
    return this.ready;
  }

  /** A (new) webview exists; it is not ready until its script sends `ready`. */
  attach(post: Post): void {
    this.post = post;
    this.ready = false;
  }

  detach(): void {
    this.post = undefined;
    this.ready = false;
  }

  onReady(): void {
    if (!this.post) return;
    this.ready = true;
    this.postSnapshot();
  }

  /** Sends what changed; before `ready` it sends nothing because the coming snapshot will include it. */
  publish(change: Change): void {
    if (!this.ready || !this.post) return;
    // Items were removed (a rewind): every index after them moved, so the whole list goes again.
    if (change.reset) {
      this.postSnapshot();
      return;
    }
    const indices = [...new Set(change.items)].sort((a, b) => a - b);
    const whole: number[] = [];
    for (const index of indices) {
      const item = this.state.items[index];
      const had = this.sent.get(index);
      if (item?.type === 'assistant' && item.streaming && had && item.text.length >= had.text && item.reasoning.length >= had.reasoning) {
        const text = item.text.slice(had.text);
        const reasoning = item.reasoning.slice(had.reasoning);
        if (text || reasoning) this.post({ type: 'append', index, text, reasoning });
        this.sent.set(index, { text: item.text.length, reasoning: item.reasoning.length });
      } else {
        whole.push(index);
        this.track(index);
      }
    }
    if (whole.length) {
      this.post({ type: 'items', updates: whole.map((index) => ({ index, item: this.state.items[index] })) });
    }
    if (change.meta) this.post({ type: 'meta', meta: this.state.meta });
  }

  /** After a reset (new or loaded session) the whole list changed. */
  resync(): void {
    if (this.ready && this.post) this.postSnapshot();
  }

  private postSnapshot(): void {
    this.sent.clear();
    this.state.items.forEach((_, i) => this.track(i));
    this.post!({ type: 'snapshot', snapshot: this.state.snapshot() });
  }

  /** Remembers what the webview holds of a streaming assistant item (appends continue from there). */
  private track(index: number): void {
    const item = this.state.items[index];
    if (item?.type === 'assistant' && item.streaming) this.sent.set(index, { text: item.text.length, reasoning: item.reasoning.length });
    else this.sent.delete(index);
  }

  send(message: HostMessage): void {
    if (this.ready && this.post) this.post(message);
  }
}
