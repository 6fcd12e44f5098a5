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
