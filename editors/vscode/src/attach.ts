// Sharing the window's server with other clients (protocol.md "WebSocket (`--listen`)" and "Method
// `session/attach`"): the settings `tandem.attach.listen` and `tandem.attach.allowOrigins` become `serve`
// arguments, and "tandem: Share Session…" hands out what a second client needs to attach (the address with the
// token, the token, the session id). Pure and vscode-free: the controller reads the settings and the token file,
// the unit tests check what comes out.

/** What the server reports in `initialize`'s `capabilities.attach` when it listens. */
export interface AttachInfo {
  /** The address other clients connect to, e.g. `ws://127.0.0.1:41457` (a port 0 setting is resolved here). */
  url: string;
  /** The file (mode 0600) holding the token they send; a new token is written at every server start. */
  tokenFile: string;
}

/** The listener the settings ask for; undefined when `tandem.attach.listen` is empty (sharing off, the default). */
export interface AttachSettings {
  /** The `--listen` address, e.g. `ws://127.0.0.1:0` (0: any free port) or `ws://127.0.0.1:7777`. */
  listen: string;
  /** Browser origins allowed to attach, each passed as `--allow-origin`. */
  allowOrigins: string[];
}

/**
 * The attach settings as the raw values VS Code returns them: a listen address with its blanks trimmed, and the
 * origins that are non-empty strings. Settings edited by hand in settings.json can hold anything, so every value
 * is checked rather than cast. Origins without a listen address are dropped, not passed: the server refuses
 * `--allow-origin` without `--listen ws://…` and would not start at all over a setting that does nothing.
 */
export function attachSettings(listen: unknown, allowOrigins: unknown): AttachSettings | undefined {
  const address = typeof listen === 'string' ? listen.trim() : '';
  if (!address) return undefined;
  const origins = Array.isArray(allowOrigins) ? allowOrigins.filter((o): o is string => typeof o === 'string').map((o) => o.trim()).filter(Boolean) : [];
  return { listen: address, allowOrigins: origins };
}

/**
 * The `serve` arguments that make the server listen: `--listen stdio` first, since a `--listen ws://…` alone would
 * serve WebSocket only and stop reading stdin, where this extension talks to it. The address is passed as the user
 * wrote it; a wrong one is refused by the server at start with its own message, which names the accepted forms.
 */
export function attachServeArgs(attach: AttachSettings | undefined): string[] {
  if (!attach) return [];
  return ['--listen', 'stdio', '--listen', attach.listen, ...attach.allowOrigins.flatMap((o) => ['--allow-origin', o])];
}

/** The attach address with the token as the `token` query parameter, the form browsers use (they cannot set headers). */
export function attachUrlWithToken(url: string, token: string): string {
  return `${url.replace(/\/+$/, '')}/?token=${encodeURIComponent(token)}`;
}

/**
 * What "Copy the attach snippet" puts on the clipboard: one JSON object a second client can read, with the address
 * (token included, for a browser), the token alone (for `Authorization: Bearer`) and the session to attach to.
 * `sessionId` is null while this window has no session yet (the first prompt creates it): the other client can
 * still connect and list or create sessions.
 */
export function shareSnippet(attach: AttachInfo, token: string, sessionId: string | undefined): string {
  return JSON.stringify({ url: attachUrlWithToken(attach.url, token), token, sessionId: sessionId ?? null });
}

/**
 * The token as read from the token file: its content without the line end. Empty means the file was read where
 * tandem hides it (a shell command the agent runs sees an empty file there) or the server has not written it yet.
 */
export function parseToken(fileText: string, tokenFile: string): string {
  const token = fileText.trim();
  if (!token) throw new Error(`The attach token file ${tokenFile} is empty: restart the server ("tandem: Restart the Server"), which writes a new token.`);
  return token;
}

/** The status bar's tooltip line while the server listens: where other clients attach, and how to share. */
export function attachTooltip(attach: AttachInfo | undefined): string {
  return attach ? `\nShareable: other clients can attach at ${attach.url} with the token in ${attach.tokenFile} ("tandem: Share Session…").` : '';
}

/** The Share Session picker's rows; `action` tells the controller what the pick does. */
export interface SharePickItem {
  label: string;
  description?: string;
  detail?: string;
  action: 'copySnippet' | 'copySessionId' | 'showTokenFile';
}

/** The rows of "tandem: Share Session…". The session id row is left out while there is no session to name. */
export function sharePickItems(attach: AttachInfo, sessionId: string | undefined): SharePickItem[] {
  const items: SharePickItem[] = [
    {
      label: '$(copy) Copy the attach snippet (URL with token, session id)',
      description: attach.url,
      detail: sessionId
        ? `JSON {"url", "token", "sessionId"}: the other client connects to the URL and sends session/attach for ${sessionId}.`
        : 'JSON {"url", "token", "sessionId": null}: no session yet (the first prompt creates one); the other client can connect and list or create sessions.',
      action: 'copySnippet',
    },
  ];
  if (sessionId) items.push({ label: '$(copy) Copy the session id', description: sessionId, action: 'copySessionId' });
  items.push({ label: '$(file) Show the token file path', description: attach.tokenFile, detail: 'Mode 0600; the server writes a new token at every start.', action: 'showTokenFile' });
  return items;
}

/** The warning the picker carries: the token is a key to every session of the server, not a view-only link. */
export const SHARE_WARNING =
  'The token lets anyone who has it drive every session of this server (prompt, approve edits and commands): share it only with your own clients. It changes when the server restarts.';
