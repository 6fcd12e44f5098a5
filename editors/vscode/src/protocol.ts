// Types of tandem's native JSON-RPC protocol v1 (protocol.md at the repository root, and DESIGN.md §3), client side.
// Kept free of any `vscode` import so the client, the state reducer and the tests can use them under plain node.

import type { AttachInfo } from './attach';
import type { McpServerInfo, McpServerStatus, McpToolRef } from './mcp';

export const PROTOCOL_VERSION = 1;

export type Mode = 'ask' | 'autoEdit' | 'plan' | 'fullAuto';
export const MODES: readonly Mode[] = ['ask', 'autoEdit', 'plan', 'fullAuto'];

export type Decision = 'once' | 'alwaysTool' | 'alwaysCommand' | 'deny';

export type ToolKind = 'read' | 'search' | 'edit' | 'delete' | 'move' | 'execute' | 'think' | 'fetch' | 'other';

export type ToolStatus = 'pending' | 'awaitingApproval' | 'running' | 'completed' | 'failed' | 'denied' | 'interrupted';

export type TurnEndReason = 'completed' | 'interrupted' | 'error' | 'contextExceeded' | 'maxIterations';

/** Where a step of the model's plan stands (`update_plan`; snake_case, as in ACP's plan). */
export type PlanStatus = 'pending' | 'in_progress' | 'completed';
export const PLAN_STATUSES: readonly PlanStatus[] = ['pending', 'in_progress', 'completed'];

/** One step of the model's plan (the `plan` event's `entries`, `session/load`'s `plan`). */
export interface PlanEntry {
  content: string;
  status: PlanStatus;
}

export interface ModelInfo {
  id: string;
  provider?: string;
  name?: string;
  contextWindow?: number;
  maxOutputTokens?: number;
  vision?: boolean;
  pdf?: boolean;
  reasoning?: boolean;
  parallelToolCalls?: boolean;
}

export interface InitializeResult {
  protocolVersion: number;
  serverInfo: { name: string; version: string };
  capabilities: {
    sessionStore?: boolean;
    framing?: string;
    imagePrompts?: boolean;
    /** Present only when the server listens for other clients (`--listen ws://…`): where they attach. */
    attach?: AttachInfo;
    [k: string]: unknown;
  };
  models: ModelInfo[];
  defaultModel: string;
}

export interface NewSessionResult {
  sessionId: string;
  model: string;
  mode: Mode;
}

export interface SessionSummary {
  sessionId: string;
  cwd: string;
  title?: string;
  model: string;
  updatedAt: string | number;
}

export interface LoadSessionResult {
  sessionId: string;
  cwd: string;
  model: string;
  mode: Mode;
  state: string;
  messages: unknown[];
  /** Present when older messages were left out of `messages`: send it back to `session/load` for the page before. */
  cursor?: string;
  pending: unknown[];
  networkAccess?: boolean;
  usage?: { model: string; inputTokens: number; outputTokens: number; cachedTokens?: number }[];
  /** The model's current plan (`update_plan`); absent when it has none. */
  plan?: PlanEntry[];
}

export type PromptPart = { type: 'text'; text: string } | { type: 'image'; mimeType: string; data: string };

export interface FileDiff {
  path: string;
  oldText: string | null;
  newText: string;
  unified: string;
}

export interface ApprovalOption {
  decision: Decision;
  label: string;
  commandPrefix?: string;
}

interface EventBase {
  sessionId: string;
  seq: number;
  turnId?: string;
}

export type SessionEvent = EventBase &
  (
    | { type: 'turnStarted'; model: string; /** The prompt as typed; absent for a retry, a resumed turn, /compact. */ prompt?: string }
    | { type: 'assistantDelta'; text: string }
    | { type: 'reasoningDelta'; text: string }
    | { type: 'assistantMessage'; text: string; reasoning?: string }
    | {
        type: 'toolCall';
        toolCallId: string;
        name: string;
        kind: ToolKind;
        title: string;
        arguments: unknown;
        locations?: { path: string; line?: number }[];
        /** A tool of an MCP server: its server and its own name. */
        mcp?: McpToolRef;
      }
    | {
        type: 'approvalRequested';
        requestId: string;
        toolCallId: string;
        name: string;
        kind: ToolKind;
        title: string;
        reason: string;
        arguments: unknown;
        diff?: FileDiff[];
        command?: string;
        cwd?: string;
        mcp?: McpToolRef;
        options: ApprovalOption[];
      }
    | { type: 'approvalResolved'; requestId: string; decision: Decision }
    | { type: 'questionAsked'; requestId: string; toolCallId: string; question: string; choices?: string[]; plan?: string }
    | {
        type: 'toolCallUpdate';
        toolCallId: string;
        status: ToolStatus;
        output?: string;
        result?: string;
        diff?: FileDiff[];
      }
    | { type: 'steeringApplied'; text: string }
    | { type: 'compacting'; summary?: string }
    | { type: 'compacted'; summary?: string }
    | { type: 'modelSwitched'; from: string; to: string; warning?: string }
    | { type: 'notice'; kind: string; text: string }
    | { type: 'usage'; model: string; inputTokens: number; outputTokens: number; cachedTokens?: number }
    | { type: 'turnEnded'; reason: TurnEndReason; error?: { message: string; retriable: boolean } }
    | { type: 'mcpStatus'; server: string; status: McpServerStatus; tools?: string[]; error?: string }
    | { type: 'rewound'; restore: RestoreScope; files: string[] }
    /** The model's plan changed: the whole list, in order; empty means no plan (protocol.md, "Event `plan`"). */
    | { type: 'plan'; entries: PlanEntry[] }
    /**
     * A hook ran (`hooks/list` lists them). `exitCode` is null when it could not run, timed out or was killed;
     * `blocked`: it stopped what it guards (exit 2). A failed hook also sends a `notice{kind:"warning"}`.
     */
    | { type: 'hookRan'; event: string; command: string; exitCode: number | null; durationMs: number; blocked?: boolean }
  );

// ---- slash commands and hooks (issue 27) ----------------------------------------------------------------------

/** Where a slash command comes from: tandem itself, a file of the workspace, or one of the user's config folder. */
export type CommandSource = 'builtin' | 'project' | 'user';

/** One entry of `commands/list` (sorted by name; `name` has no leading slash). */
export interface SlashCommand {
  name: string;
  description?: string;
  /** What the command takes after its name, e.g. `NAME` or `FILE`. */
  argumentHint?: string;
  source: CommandSource;
}

export interface CommandsListResult {
  commands: SlashCommand[];
}

/** The command a `prompt` ran (its text started with `/name`). */
export interface PromptCommand {
  name: string;
  /** Markdown to show in the chat: set by the built-ins that need no model (they answer without a turn). */
  output?: string;
  /** `/fork`: the new session. */
  sessionId?: string;
}

/**
 * The answer of `prompt`: `turnId` when a turn runs (a plain prompt, a custom command, `/init`, `/compact`),
 * `command` when the text ran a command; a built-in that needs no model answers with `command` and no turn.
 */
export interface PromptResult {
  turnId?: string;
  command?: PromptCommand;
}

/** One hook of `hooks/list`. `matcher` is absent when the entry matches everything. */
export interface HookInfo {
  event: string;
  matcher?: string;
  command: string;
  /** Seconds. */
  timeout?: number;
  /** `project`: from a workspace file (`projectFiles`), which runs only once trusted; else the user's config. */
  source: string;
}

export interface HooksListResult {
  hooks: HookInfo[];
  /** The workspace's hook files, relative to it. */
  projectFiles: string[];
  /** False while the workspace has project hook files whose current content the user has not trusted. */
  trusted: boolean;
}

// ---- checkpoints, turn diff, rewind, fork (protocol.md "Checkpoints" and the methods after it) ----------------

/** How a turn changed a path, from before the turn to its end. */
export type FileChange = 'added' | 'modified' | 'deleted';

/** What `session/rewind` puts back. */
export type RestoreScope = 'files' | 'conversation' | 'both';

/** One path of `turn/diff`. Both texts are null for a folder, for content that is not text (`binary`) or not captured. */
export interface TurnFileDiff {
  path: string;
  change: FileChange;
  oldText: string | null;
  newText: string | null;
  unified: string;
  binary?: boolean;
  /** Why the content before the turn was not captured; a rewind cannot put this path back. */
  notCaptured?: string;
}

export interface TurnDiffResult {
  files: TurnFileDiff[];
}

/** One turn of the conversation as a rewind point (`session/checkpoints`, oldest first). */
export interface Checkpoint {
  turnId: string;
  /** The text of the turn's prompt. */
  prompt: string;
  /** Milliseconds since the Unix epoch. */
  createdAt: number;
  files: { path: string; change: FileChange }[];
  /** True once a `files` rewind put this turn's changes back. */
  filesRestored?: boolean;
}

export interface CheckpointsResult {
  checkpoints: Checkpoint[];
}

export interface RewindConflict {
  path: string;
  reason: string;
}

export interface RewindResult {
  restored: string[];
  conflicts: RewindConflict[];
  conversationRewound: boolean;
}

/** The answer of `mcp/status`. */
export interface McpStatusResult {
  servers: McpServerInfo[];
}

export type EventOf<T extends SessionEvent['type']> = Extract<SessionEvent, { type: T }>;

/** The `data.kind` of a JSON-RPC error from the server, if any. */
export function errorKind(err: unknown): string | undefined {
  const data = (err as { data?: { kind?: unknown } } | undefined)?.data;
  return typeof data?.kind === 'string' ? data.kind : undefined;
}

export const MODE_DESCRIPTIONS: Record<Mode, string> = {
  ask: 'Ask before every edit and command',
  autoEdit: 'Edit files without asking; ask before commands',
  plan: 'Read only; the agent proposes a plan for you to accept',
  fullAuto: 'Edit and run commands without asking',
};

export const DECISION_LABELS: Record<Decision, string> = {
  once: 'Allow once',
  alwaysTool: 'Always allow this tool',
  alwaysCommand: 'Always allow this command',
  deny: 'Deny',
};
