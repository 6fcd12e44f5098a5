// MCP servers of a session as the extension shows them (protocol.md "MCP servers", `mcp/status`, `mcpStatus`):
// the list folded from the status answer and events, the status bar / header summary, the Quick Pick rows, and
// the text of an MCP tool's approval. Pure and vscode-free: the controller, the webview and the unit tests use it.

export type McpServerStatus = 'starting' | 'ready' | 'failed' | 'exited' | 'untrusted';
export type McpSource = 'config' | 'session' | 'workspace';

export interface McpServerInfo {
  name: string;
  /** Unknown for a server first seen in an `mcpStatus` event (events carry no source). */
  source?: McpSource;
  status: McpServerStatus;
  /** Model-facing tool names (`mcp__<server>__<tool>`), while ready. */
  tools: string[];
  error?: string;
}

/** The `mcp` field of `toolCall` and `approvalRequested`. */
export interface McpToolRef {
  server: string;
  tool: string;
}

/** Statuses that need the user's attention: the server's tools are not available. */
const TROUBLE: ReadonlySet<McpServerStatus> = new Set(['failed', 'exited', 'untrusted']);

/** The list after one `mcpStatus` event: the named server updated in place (its source kept), or appended. */
export function applyMcpStatus(
  servers: readonly McpServerInfo[],
  e: { server: string; status: McpServerStatus; tools?: string[]; error?: string },
): McpServerInfo[] {
  const next: McpServerInfo = { name: e.server, status: e.status, tools: e.status === 'ready' ? (e.tools ?? []) : [], ...(e.error ? { error: e.error } : {}) };
  const i = servers.findIndex((s) => s.name === e.server);
  if (i < 0) return [...servers, next];
  const out = servers.slice();
  out[i] = { ...next, ...(servers[i].source ? { source: servers[i].source } : {}) };
  return out;
}

export interface McpSummary {
  /** E.g. `MCP 2/3`: servers ready of all servers. */
  label: string;
  /** Some server failed, exited or waits for trust. */
  warning: boolean;
  /** One line per server, for a tooltip. */
  tooltip: string;
}

/** The summary shown in the status bar and the chat header; undefined when the session has no MCP server. */
export function mcpSummary(servers: readonly McpServerInfo[] | undefined): McpSummary | undefined {
  if (!servers?.length) return undefined;
  const ready = servers.filter((s) => s.status === 'ready').length;
  const warning = servers.some((s) => TROUBLE.has(s.status));
  const tooltip = servers.map((s) => `${s.name}: ${statusLine(s)}`).join('\n');
  return { label: `MCP ${ready}/${servers.length}`, warning, tooltip };
}

/** `ready, 4 tools` / `failed` / `untrusted` … (without the error text). */
export function statusLine(s: McpServerInfo): string {
  return s.status === 'ready' ? `ready, ${s.tools.length} tool${s.tools.length === 1 ? '' : 's'}` : s.status;
}

const SOURCE_LABEL: Record<McpSource, string> = {
  config: "tandem's config",
  session: 'this session',
  workspace: "the workspace's .mcp.json",
};

const STATUS_ICON: Record<McpServerStatus, string> = {
  starting: '$(loading~spin)',
  ready: '$(pass)',
  failed: '$(error)',
  exited: '$(debug-disconnect)',
  untrusted: '$(shield)',
};

export interface McpPickItem {
  label: string;
  description: string;
  detail: string;
  server: string;
  /** `trust`: the row trusts and starts the server; `show`: it shows the server's details in full. */
  action: 'show' | 'trust';
}

/**
 * The rows of "tandem: MCP Servers": one per server with status, source and tool count, its error (or its tools)
 * as the detail; each untrusted server gets a "Trust and start" row right after its own.
 */
export function mcpPickItems(servers: readonly McpServerInfo[]): McpPickItem[] {
  const items: McpPickItem[] = [];
  for (const s of servers) {
    items.push({
      label: `${STATUS_ICON[s.status]} ${s.name}`,
      description: [s.status, s.source ? `from ${SOURCE_LABEL[s.source]}` : '', `${s.tools.length} tool${s.tools.length === 1 ? '' : 's'}`].filter(Boolean).join(' · '),
      detail: s.error ?? (s.tools.length ? s.tools.map((t) => toolOf(s.name, t)).join(', ') : ''),
      server: s.name,
      action: 'show',
    });
    if (s.status === 'untrusted') {
      items.push({
        label: `$(play) Trust and start ${s.name}`,
        description: 'runs its command from .mcp.json; remembered for this folder',
        detail: '',
        server: s.name,
        action: 'trust',
      });
    }
  }
  return items;
}

/** Everything about one server as one text (the follow-up message of a picked row: errors in full). Notifications
 *  show text as it is, so names are quoted, not in backticks. */
export function mcpServerDetails(s: McpServerInfo): string {
  const parts = [`MCP server "${s.name}"${s.source ? ` (from ${SOURCE_LABEL[s.source]})` : ''}: ${statusLine(s)}.`];
  if (s.tools.length) parts.push(`Tools: ${s.tools.map((t) => toolOf(s.name, t)).join(', ')}.`);
  if (s.error) parts.push(s.error);
  return parts.join(' ');
}

/** A model-facing tool name without its `mcp__<server>__` prefix (the name itself when it has none). */
export function toolOf(server: string, name: string): string {
  const prefix = `mcp__${server}__`;
  return name.startsWith(prefix) ? name.slice(prefix.length) : name;
}

/** The notice shown once when a server of the workspace's .mcp.json waits for trust. */
export function untrustedNotice(name: string): string {
  return `tandem: the workspace's .mcp.json defines the MCP server "${name}", which runs a program on this machine. It starts only once you trust it.`;
}

/** What an MCP tool's approval shows: who wants to run what, and the arguments as pretty JSON. */
export function mcpApprovalText(mcp: McpToolRef, args: unknown): { heading: string; arguments: string } {
  return { heading: `MCP server \`${mcp.server}\` wants to run \`${mcp.tool}\``, arguments: formatArguments(args) };
}

/** Arguments as JSON indented by 2 spaces; a string (arguments that were not valid JSON) as it came. */
export function formatArguments(args: unknown): string {
  if (typeof args === 'string') return args;
  return JSON.stringify(args ?? {}, null, 2);
}
