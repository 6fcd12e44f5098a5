// Line hunks between a file's original text and the proposal being reviewed, and the revert of one of them: the
// per-hunk "reject" of the review (issue 23 item 10). vscode-free so it is unit-tested. The diff is a plain LCS
// over lines after trimming the common head and tail; past MAX_CELLS it refuses (the user still has VS Code's
// own Revert Block arrow in the diff editor's gutter) rather than freezing the extension host.

export interface Hunk {
  /** First line of the hunk in the original, 0-based, and how many original lines it replaces. */
  origStart: number;
  origCount: number;
  /** First line of the hunk in the proposal, 0-based, and how many proposal lines it holds. */
  newStart: number;
  newCount: number;
}

/** Above this many LCS cells (middle lines of original × proposal) per-hunk actions are refused. */
export const MAX_CELLS = 4_000_000;

export class TooLargeToSplit extends Error {
  constructor(cells: number) {
    super(
      `this change is too large to split into hunks here (${cells} line pairs to compare); use the Revert Block arrow in the diff editor's gutter, or edit the proposal`,
    );
  }
}

/** Splits text into lines, each with its line break, so joining them gives the text back exactly. */
export function splitLines(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

export function hunks(original: string, proposal: string): Hunk[] {
  const a = splitLines(original);
  const b = splitLines(proposal);
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const n = a.length - head - tail;
  const m = b.length - head - tail;
  if (n * m > MAX_CELLS) throw new TooLargeToSplit(n * m);
  // lcs[i][j]: LCS length of a[head+i..] and b[head+j..] (middle part only), one flat array.
  const w = m + 1;
  const lcs = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * w + j] = a[head + i] === b[head + j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
    }
  }
  const out: Hunk[] = [];
  let i = 0;
  let j = 0;
  let open: Hunk | undefined;
  const close = () => {
    if (open) out.push(open);
    open = undefined;
  };
  while (i < n || j < m) {
    if (i < n && j < m && a[head + i] === b[head + j]) {
      close();
      i++;
      j++;
    } else {
      open ??= { origStart: head + i, origCount: 0, newStart: head + j, newCount: 0 };
      if (j < m && (i >= n || lcs[i * w + j + 1] >= lcs[(i + 1) * w + j])) {
        open.newCount++;
        j++;
      } else {
        open.origCount++;
        i++;
      }
    }
  }
  close();
  return out;
}

/**
 * The hunk a cursor on proposal line `line` (0-based) is in. A hunk that only removed lines has no line of its
 * own in the proposal: the line just after the removal (or the last line, at the end) counts as in it.
 */
export function hunkAt(list: Hunk[], line: number): Hunk | undefined {
  return (
    list.find((h) => h.newCount > 0 && line >= h.newStart && line < h.newStart + h.newCount) ??
    list.find((h) => h.newCount === 0 && (line === h.newStart || line === h.newStart - 1))
  );
}

/** The proposal with one hunk put back to the original's lines; everything else stays as it is. */
export function revertHunk(original: string, proposal: string, h: Hunk): string {
  const a = splitLines(original);
  const b = splitLines(proposal);
  const restored = a.slice(h.origStart, h.origStart + h.origCount);
  return [...b.slice(0, h.newStart), ...restored, ...b.slice(h.newStart + h.newCount)].join('');
}
