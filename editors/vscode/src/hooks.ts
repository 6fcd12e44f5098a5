// Hooks (issue 27): the compact line a `hookRan` event leaves in the turn, the rows of "Show Hooks", and the text
// of the trust prompt for a workspace's hook files, which run their commands outside tandem's sandbox. Pure and
// vscode-free: the controller and the webview use it, the unit tests check it.
import type { HookInfo, HooksListResult } from './protocol';

/** How a hook run ended: ran and exited 0, stopped what it guards (exit 2), or failed (another exit, or none). */
export type HookOutcome = 'ok' | 'blocked' | 'failed';

export interface HookRun {
  event: string;
  command: string;
  exitCode: number | null;
  durationMs: number;
  blocked?: boolean;
}

/** The outcome of a run, for the line's style. */
export function hookOutcome(h: HookRun): HookOutcome {
  if (h.blocked) return 'blocked';
  return h.exitCode === 0 ? 'ok' : 'failed';
}

/** A duration as the line shows it: `3 ms`, `1.2 s`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '? ms';
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

/**
 * The parts of a hook's line: `hook PreToolUse \`cmd\` — exit 0, 3 ms`. A blocking run says `blocked`, one
 * without an exit code says it did not finish (it could not start, timed out or was killed: the warning notice
 * that comes with it says which).
 */
export function hookLine(h: HookRun): { event: string; command: string; result: string; outcome: HookOutcome } {
  const outcome = hookOutcome(h);
  const exit = h.exitCode === null ? 'no exit code (did not run to the end)' : `exit ${h.exitCode}`;
  const result = `${outcome === 'blocked' ? `blocked, ${exit}` : exit}, ${formatDuration(h.durationMs)}`;
  return { event: h.event, command: h.command, result, outcome };
}

/** A hook in one line: `PreToolUse (Bash): .tandem/hooks/check.sh` (no matcher: every tool/event). */
export function hookSummary(h: HookInfo): string {
  return `${h.event}${h.matcher ? ` (${h.matcher})` : ''}: ${h.command}`;
}

/** The project hooks: those of the workspace's files, the ones that wait for trust. */
export function projectHooks(r: HooksListResult): HookInfo[] {
  return r.hooks.filter((h) => h.source === 'project');
}

/** Whether the workspace has hook files whose content the user has not trusted (the prompt is shown then). */
export function needsTrust(r: HooksListResult | undefined): boolean {
  return !!r && r.trusted === false && (r.projectFiles?.length ?? 0) > 0;
}

/**
 * The trust prompt: the message and its detail (files, then each project hook: event, matcher, command), which a
 * modal shows with Trust / Not now.
 */
export function trustText(r: HooksListResult): { message: string; detail: string } {
  const hooks = projectHooks(r);
  const files = r.projectFiles.join(', ');
  const message = `This workspace defines hooks (${files}). Their commands run on your machine outside tandem's sandbox, with your permissions, whenever their event happens. Trust them?`;
  const list = hooks.length ? hooks.map((h) => `• ${hookSummary(h)}`).join('\n') : '(the files define no command tandem could read)';
  const detail =
    `${list}\n\nUntil you trust them they do not run. Trust is remembered for this folder until the files change. ` +
    "It covers these files' text, not a script a hook runs: one kept elsewhere than .tandem/ can be changed later (by the model too) without asking again.";
  return { message, detail };
}

/** A stable key of what the user was asked about (folder, files and hooks), so "Not now" is not asked again for it. */
export function trustKey(cwd: string, r: HooksListResult): string {
  return JSON.stringify([cwd, r.projectFiles, projectHooks(r).map((h) => [h.event, h.matcher ?? null, h.command])]);
}

/** The rows of "Show Hooks": one per hook, with where it comes from and whether it runs. */
export function hookPickItems(r: HooksListResult): { label: string; description: string; detail: string; hook: HookInfo }[] {
  return r.hooks.map((h) => {
    const project = h.source === 'project';
    const runs = !project || r.trusted ? 'runs' : 'waits for trust (does not run)';
    return {
      label: `${h.event}${h.matcher ? ` · ${h.matcher}` : ''}`,
      description: `${project ? `project (${r.projectFiles.join(', ')})` : h.source} · ${runs}${h.timeout ? ` · timeout ${h.timeout} s` : ''}`,
      detail: h.command,
      hook: h,
    };
  });
}
