// Delivery of chat state to the webview with a ready handshake: nothing is posted until the webview says
// `ready` (messages posted earlier would be dropped by VS Code), then it gets one full snapshot followed by
// incremental updates. Because the snapshot comes from ChatState, an event that arrived before the view
// existed, or while it was hidden or reloading, is never lost. vscode-free so it is unit-tested.
import type { Change, ChatState } from './chatState';

export type Post = (message: unknown) => unknown;

export class ViewBridge {
  private post?: Post;
  private ready = false;

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
    this.post({ type: 'snapshot', snapshot: this.state.snapshot() });
  }

  /** Sends what changed; before `ready` it sends nothing because the coming snapshot will include it. */
  publish(change: Change): void {
    if (!this.ready || !this.post) return;
    const indices = [...new Set(change.items)].sort((a, b) => a - b);
    if (indices.length) {
      this.post({ type: 'items', updates: indices.map((index) => ({ index, item: this.state.items[index] })) });
    }
    if (change.meta) this.post({ type: 'meta', meta: this.state.meta });
  }

  /** After a reset (new or loaded session) the whole list changed. */
  resync(): void {
    if (this.ready && this.post) this.post({ type: 'snapshot', snapshot: this.state.snapshot() });
  }

  send(message: unknown): void {
    if (this.ready && this.post) this.post(message);
  }
}
