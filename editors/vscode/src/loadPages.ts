// Follows the paging of `session/load` (protocol.md, "Method `session/load`", Paging) to the whole history.
// Pure and vscode-free: the fetch is passed in, so the unit tests drive it with scripted pages.
import type { LoadSessionResult } from './protocol';

/** Pages fetched at most by default: far beyond any real session, but it ends a server that never stops paging. */
export const DEFAULT_MAX_PAGES = 1000;

/**
 * Fetches the newest page (`fetchPage()` with no cursor), then `fetchPage(cursor)` for each older page while the
 * last one came with a `cursor`, and returns one result whose `messages` are every page's, oldest first.
 *
 * The other members (`pending`, `state`, `model`, `mode`, `usage`, …) come from the LAST page fetched: the server
 * makes them current with each page, so the last is the newest view of what waits for the user (an approval
 * answered, or a turn ended, while the older pages were fetched is not shown as still open). The result has no
 * `cursor`: nothing was left out.
 *
 * The messages are those of the first page and the pages before it; a message the session gained while the older
 * pages were fetched is not in them (cursors stay valid because history only grows at its end), it arrives as
 * events like any other.
 *
 * Throws when a page repeats a cursor already followed (the server would send the same page forever) and when
 * more than `maxPages` pages would be needed; the message names the cursor or the limit.
 */
export async function loadAllPages(
  fetchPage: (cursor?: string) => Promise<LoadSessionResult>,
  maxPages = DEFAULT_MAX_PAGES,
): Promise<LoadSessionResult> {
  // Newest page first; each later page is older, so it goes in front.
  const pages: unknown[][] = [];
  const seen = new Set<string>();
  let page = await fetchPage();
  pages.push(page.messages ?? []);
  while (page.cursor !== undefined) {
    const cursor = page.cursor;
    if (seen.has(cursor)) {
      throw new Error(`session/load returned the cursor "${cursor}" a second time; stopped loading older messages to avoid a loop`);
    }
    if (pages.length >= maxPages) {
      throw new Error(`session/load still had older messages (cursor "${cursor}") after ${maxPages} pages; stopped loading them`);
    }
    seen.add(cursor);
    page = await fetchPage(cursor);
    pages.push(page.messages ?? []);
  }
  const messages = pages.reverse().flat();
  const { cursor: _last, ...current } = page;
  return { ...current, messages };
}
