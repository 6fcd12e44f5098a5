-- tandem.pages: assembles a paged `session/load` (newest page first, then each older page its `cursor` names) into one history.
--
-- Pure bookkeeping, no I/O: init.lua's load_session sends the requests and feeds each result to
-- add(), which says which cursor to ask for next, when to stop, and when to give up (a cursor the
-- server already sent, or too many pages), so a misbehaving server can never make the load loop.
local M = {}

--- Pages fetched before a load gives up (each page is up to a 16 MiB frame).
M.MAX_PAGES = 1000

---@class tandem.LoadPage A `session/load` result (SessionLoadResult); only the members paging reads.
---@field messages? table[] this page's messages, oldest first
---@field cursor? string present when older messages were left out: the position to ask before

---@class tandem.Pages The pages of one load so far.
---@field pages tandem.LoadPage[] in the order they were fetched: the newest page first
---@field seen table<string, true> every cursor already followed
---@field max_pages integer

--- Start collecting the pages of one load.
---@param max_pages? integer how many pages to fetch at most (default M.MAX_PAGES)
---@return tandem.Pages
function M.new(max_pages)
  return { pages = {}, seen = {}, max_pages = max_pages or M.MAX_PAGES }
end

--- The page's `cursor`, or nil when it has none (no older messages remain).
---@param page tandem.LoadPage
---@return string?
function M.cursor_of(page)
  local c = page.cursor
  if type(c) == 'string' and c ~= '' then
    return c
  end
  return nil
end

--- Record the next page (the one just before the previous page's cursor).
--- Returns the cursor to request next; nil when the history is complete; or nil and a message
--- when the load must stop early (the page is kept either way, so what came can still be shown).
---@param acc tandem.Pages
---@param page tandem.LoadPage
---@return string? next_cursor
---@return string? err
function M.add(acc, page)
  table.insert(acc.pages, page)
  local cursor = M.cursor_of(page)
  if cursor == nil then
    return nil, nil
  end
  if acc.seen[cursor] then
    return nil, ('session/load sent the cursor %q a second time (after %d pages), so loading older history '
      .. 'stopped there to avoid a loop; the messages before it are not shown'):format(cursor, #acc.pages)
  end
  if #acc.pages >= acc.max_pages then
    return nil, ('the history has more than %d pages, so loading stopped at cursor %q; older messages are not shown')
      :format(acc.max_pages, cursor)
  end
  acc.seen[cursor] = true
  return cursor, nil
end

--- The messages of every page, oldest first (pages are fetched newest first, each page in order).
---@param pages tandem.LoadPage[] in fetch order: the newest page first
---@return table[]
function M.assemble(pages)
  local out = {}
  for i = #pages, 1, -1 do
    for _, m in ipairs(pages[i].messages or {}) do
      out[#out + 1] = m
    end
  end
  return out
end

return M
