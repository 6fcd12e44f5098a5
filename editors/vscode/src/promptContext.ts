// Builds prompt text with the editor selection attached as context, and other small pure helpers the
// commands share (vscode-free, unit-tested).
import type { ApprovalOption, Decision } from './protocol';

export interface SelectionContext {
  /** Workspace-relative path (or absolute when outside every folder). */
  path: string;
  languageId: string;
  startLine: number; // 1-based
  endLine: number; // 1-based, inclusive
  text: string;
}

/** The prompt sent to the server: the user's text, then the selection in a fenced block naming file and lines. */
export function promptWithSelection(text: string, sel?: SelectionContext): string {
  if (!sel || !sel.text.trim()) return text;
  // A fence longer than any backtick run inside the selection keeps the block intact.
  const longest = Math.max(2, ...(sel.text.match(/`+/g) ?? []).map((r) => r.length));
  const fence = '`'.repeat(longest + 1);
  const lines = sel.startLine === sel.endLine ? `line ${sel.startLine}` : `lines ${sel.startLine}-${sel.endLine}`;
  return `${text}\n\nSelected in ${sel.path} (${lines}):\n${fence}${sel.languageId}\n${sel.text}\n${fence}`;
}

/** Options the user may pick for an approval, in server order, deny last. */
export function allowOptions(options: ApprovalOption[]): ApprovalOption[] {
  return options.filter((o) => o.decision !== 'deny');
}

export function hasDecision(options: ApprovalOption[], d: Decision): boolean {
  return options.some((o) => o.decision === d);
}

/** The edited content to send with an approval: only when the user really changed the proposed text. */
export function editedContent(proposed: string, current: string | undefined): string | undefined {
  if (current === undefined) return undefined;
  return current === proposed ? undefined : current;
}

/**
 * The sentence the server puts in the `reason` of an approval whose proposal had its longest strings cut to fit
 * one message (protocol.md, `approvalRequested`): such a proposal must be approved or denied as proposed, since
 * the server refuses `editedContent` for it.
 */
export const TOO_LARGE_MARKER = 'too large to show in full';

/** Whether an approval's proposal is cut, so it must not be offered for editing (see TOO_LARGE_MARKER). */
export function isTooLargeToEdit(reason: string | undefined): boolean {
  return typeof reason === 'string' && reason.toLowerCase().includes(TOO_LARGE_MARKER);
}

export function formatExit(code: number | null, signal: string | null): string {
  return signal ? `signal ${signal}` : `exit code ${code}`;
}

/** Added and removed lines of a unified diff (its ---/+++ headers excluded), for an applied edit's summary. */
export function diffStat(unified: string): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const line of unified.split('\n')) {
    if (line.startsWith('+++') || line.startsWith('---')) continue;
    if (line.startsWith('+')) added++;
    else if (line.startsWith('-')) removed++;
  }
  return { added, removed };
}

/** Sessions of `session/list` for a picker: newest first, by title (the first prompt) and date. */
export function sessionPickItems<T extends { sessionId: string; title?: string; model: string; updatedAt: string | number }>(
  sessions: T[],
  current?: string,
): { label: string; description: string; sessionId: string; updatedAt: number }[] {
  return sessions
    .map((s) => ({ s, at: typeof s.updatedAt === 'number' ? s.updatedAt : Date.parse(s.updatedAt) }))
    .sort((a, b) => b.at - a.at)
    .map(({ s, at }) => ({
      label: s.title?.trim() || '(no prompt yet)',
      description: [new Date(at).toLocaleString(), s.model, s.sessionId === current ? 'open now' : ''].filter(Boolean).join(' · '),
      sessionId: s.sessionId,
      updatedAt: at,
    }));
}

/** `@file` mentions in a prompt (an `@` at the start or after whitespace), in order, without duplicates. */
export function mentions(text: string): string[] {
  const out: string[] = [];
  // Sentence punctuation after a mention ("see @a.md, then") is not part of the path.
  for (const m of text.matchAll(/(?:^|\s)@([^\s@]+)/g)) {
    const name = m[1].replace(/[.,;:!?)\]}'"]+$/, '');
    if (name && !out.includes(name)) out.push(name);
  }
  return out;
}

/** A file's text as prompt context: a fenced block naming it, the fence longer than any backtick run inside. */
export function fileContext(relPath: string, text: string): string {
  const longest = Math.max(2, ...(text.match(/`+/g) ?? []).map((r) => r.length));
  const fence = '`'.repeat(longest + 1);
  return `File ${relPath} (mentioned as @${relPath}):\n${fence}\n${text}${text.endsWith('\n') ? '' : '\n'}${fence}`;
}

/** Tokens in the model's context after the last answer, over its window: the chat's context gauge. */
export function contextGauge(usage: { inputTokens: number; outputTokens: number } | undefined, window: number | undefined): { used: number; window: number; percent: number } | undefined {
  if (!usage || !window) return undefined;
  const used = usage.inputTokens + usage.outputTokens;
  return { used, window, percent: Math.min(100, Math.round((used / window) * 100)) };
}

/** One line per model for the picker: its window and what it can take besides text. */
export function modelAbilities(m: { contextWindow?: number; maxOutputTokens?: number; vision?: boolean; pdf?: boolean; reasoning?: boolean; parallelToolCalls?: boolean }): string {
  const parts = [
    m.contextWindow ? `${m.contextWindow.toLocaleString('en-US')} tokens of context` : 'context window unknown',
    m.maxOutputTokens ? `${m.maxOutputTokens.toLocaleString('en-US')} out` : '',
    m.vision ? 'images' : 'no images',
    m.pdf ? 'PDF' : '',
    m.reasoning ? 'reasoning' : '',
    m.parallelToolCalls ? 'parallel tools' : '',
  ];
  return parts.filter(Boolean).join(' · ');
}
