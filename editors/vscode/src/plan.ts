// The model's plan (`update_plan`, protocol.md "Event `plan`"): what the chat keeps of it and how its checklist
// reads. Pure and vscode-free: ChatState keeps the plan in its meta, the webview renders planView() of it, and the
// unit tests check both without a browser.
import { PLAN_STATUSES, type PlanEntry, type PlanStatus } from './protocol';

/**
 * The plan as the chat keeps it, from a `plan` event's `entries` or `session/load`'s `plan`: undefined when there
 * is none (absent, or an empty list, which the protocol uses to clear it). Entries are copied; one that is not
 * `{content: string, status}` is left out, and a status this client does not know reads as `pending`, so a newer
 * server's word never hides a step.
 */
export function normalizePlan(raw: unknown): PlanEntry[] | undefined {
  if (!Array.isArray(raw)) return undefined;
  const entries: PlanEntry[] = [];
  for (const e of raw) {
    const { content, status } = (e ?? {}) as { content?: unknown; status?: unknown };
    if (typeof content !== 'string') continue;
    entries.push({ content, status: PLAN_STATUSES.includes(status as PlanStatus) ? (status as PlanStatus) : 'pending' });
  }
  return entries.length ? entries : undefined;
}

/** How one step shows: a marker (checked, arrow, empty box) and a label for screen readers and tooltips. */
export interface PlanRow {
  content: string;
  status: PlanStatus;
  marker: string;
  label: string;
}

export interface PlanViewModel {
  /** Steps completed, and all steps. */
  done: number;
  total: number;
  /** "2/5": completed of all, for the panel's heading. */
  count: string;
  /** The step in progress (the first, if the model marked several), for the collapsed heading. */
  current?: string;
  rows: PlanRow[];
}

export const PLAN_MARKERS: Record<PlanStatus, string> = { completed: '✓', in_progress: '▸', pending: '○' };
const PLAN_LABELS: Record<PlanStatus, string> = { completed: 'completed', in_progress: 'in progress', pending: 'pending' };

/** The checklist of a plan, or undefined when there is no plan (the panel is hidden then). */
export function planView(plan: readonly PlanEntry[] | undefined): PlanViewModel | undefined {
  if (!plan?.length) return undefined;
  const done = plan.filter((e) => e.status === 'completed').length;
  return {
    done,
    total: plan.length,
    count: `${done}/${plan.length}`,
    current: plan.find((e) => e.status === 'in_progress')?.content,
    rows: plan.map((e) => ({ content: e.content, status: e.status, marker: PLAN_MARKERS[e.status], label: PLAN_LABELS[e.status] })),
  };
}
