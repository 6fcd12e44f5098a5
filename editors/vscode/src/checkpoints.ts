// Pure helpers of the per-turn actions (protocol.md "Checkpoints", `turn/diff`, `session/checkpoints`,
// `session/rewind`, `session/fork`): which files of a turn diff can be shown as diffs and which are listed with a
// note, the choices of Undo, the Quick Pick rows of the session's turns and the text that lists a rewind's
// conflicts. vscode-free, so the unit tests check them under plain node.
import { shortPrompt } from './chatState';
import type { Checkpoint, RestoreScope, RewindConflict, TurnFileDiff } from './protocol';

/** The actions the chat offers on each turn (and the palette on the last one). */
export type TurnAction = 'showChanges' | 'undo' | 'edit' | 'fork';

/** A path of a turn diff that is listed instead of diffed, and why. */
export interface TurnChangeNote {
  path: string;
  note: string;
}

/**
 * Splits a `turn/diff` answer: text files become diffs (a missing side, added or deleted, stays null), while
 * binary content, content that was not captured and folders are listed with a note, since there is no text to compare.
 */
export function planTurnChanges(files: TurnFileDiff[]): { diffs: TurnFileDiff[]; notes: TurnChangeNote[] } {
  const diffs: TurnFileDiff[] = [];
  const notes: TurnChangeNote[] = [];
  for (const f of files) {
    if (f.notCaptured) notes.push({ path: f.path, note: `${f.change}; not captured: ${f.notCaptured}` });
    else if (f.binary) notes.push({ path: f.path, note: `${f.change}; binary, not shown as a diff` });
    else if (f.oldText === null && f.newText === null) notes.push({ path: f.path, note: `folder ${f.change}` });
    else diffs.push(f);
  }
  return { diffs, notes };
}

export interface RestorePick {
  label: string;
  description?: string;
  detail: string;
  restore: RestoreScope;
}

/** The choices of Undo, the usual one first. */
export const RESTORE_PICKS: readonly RestorePick[] = [
  {
    label: 'Files and conversation',
    description: 'both',
    detail: 'Put back the files this turn and every later one changed, and drop those turns from the conversation.',
    restore: 'both',
  },
  {
    label: 'Files only',
    description: 'files',
    detail: 'Put back the files this turn and every later one changed; the conversation keeps the turns.',
    restore: 'files',
  },
  {
    label: 'Conversation only',
    description: 'conversation',
    detail: 'Drop this turn and every later one from the conversation; the files stay as they are.',
    restore: 'conversation',
  },
];

/** A turn as commands name it: its prompt in quotes, or "that turn" (a retry's turn has no prompt of its own). */
export function turnLabel(prompt: string | undefined): string {
  return prompt !== undefined && prompt.trim() ? `“${shortPrompt(prompt)}”` : 'that turn';
}

export interface CheckpointPick {
  label: string;
  description: string;
  detail?: string;
  turnId: string;
  prompt: string;
}

/** The session's turns for a Quick Pick, newest first, each with its time and the files it changed. */
export function checkpointPickItems(checkpoints: Checkpoint[], now = Date.now()): CheckpointPick[] {
  return [...checkpoints].reverse().map((c) => {
    const files = c.files.length ? `${c.files.length} file${c.files.length === 1 ? '' : 's'} changed` : 'no files changed';
    const description = [ago(c.createdAt, now), files, c.filesRestored ? 'files put back' : ''].filter(Boolean).join(' · ');
    const detail = c.files.length ? c.files.map((f) => `${sign(f.change)}${f.path}`).join('  ') : undefined;
    return { label: shortPrompt(c.prompt) || '(no prompt)', description, ...(detail ? { detail } : {}), turnId: c.turnId, prompt: c.prompt };
  });
}

function sign(change: string): string {
  return change === 'added' ? '+' : change === 'deleted' ? '−' : '~';
}

function ago(ms: number, now: number): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(ms).toLocaleString();
}

/** The message and detail that list a rewind's conflicts, for the dialog that offers Force. */
export function conflictText(conflicts: RewindConflict[], label: string): { message: string; detail: string } {
  const n = conflicts.length;
  return {
    message: `tandem left ${n} file${n === 1 ? '' : 's'} as ${n === 1 ? 'it is' : 'they are'} while undoing ${label}: changed since this session's turns wrote ${n === 1 ? 'it' : 'them'}. Put ${n === 1 ? 'it' : 'them'} back anyway?`,
    detail: conflicts.map((c) => `${c.path}: ${c.reason}`).join('\n'),
  };
}
