-- tandem.window: window-local options for every window that shows a proposed change (approval float, edit buffer, diff split), so none can hide a line.
--
-- A new window copies the window-local options of the window it was opened from. Opened from
-- the chat, it used to get the chat's reasoning folds (foldmethod=expr with the chat's
-- foldexpr), which closed folds over diff lines in the approval float and let `y` approve lines
-- nobody saw. So each review window sets every option that can hide text explicitly, both its
-- local and its global value (`:set`), and windows opened from it inherit the same safety.
local M = {}

--- Options that can hide or disguise lines, with the value that shows every line as it is.
M.SAFE = {
  foldenable = false,
  foldmethod = 'manual',
  foldexpr = '0',
  foldtext = 'foldtext()',
  foldcolumn = '0',
  foldlevel = 99,
  foldminlines = 1,
  conceallevel = 0,
  concealcursor = '',
  winbar = '', -- the chat's header must not stand in for a review window's own title
  scrollbind = false,
  cursorbind = false,
}

--- Make `win` fold-free and conceal-free (see M.SAFE), then apply `extra` options.
---@param win integer
---@param extra? table<string, any> further window options, for example { wrap = true }
function M.safe(win, extra)
  for name, value in pairs(M.SAFE) do
    vim.wo[win][name] = value
  end
  for name, value in pairs(extra or {}) do
    vim.wo[win][name] = value
  end
  -- Any fold that already exists (manual folds copied with the window) is dropped too.
  vim.api.nvim_win_call(win, function()
    pcall(vim.cmd, 'silent! normal! zE')
  end)
end

--- Lines of the window's buffer that are not on screen: { above, below } (0 when all are shown).
---@param win integer
---@return integer above, integer below
function M.hidden(win)
  -- nvim_win_call returns one value only, so the pair travels as a table.
  local r = vim.api.nvim_win_call(win, function()
    local top, bot, last = vim.fn.line('w0'), vim.fn.line('w$'), vim.fn.line('$')
    return { top - 1, last - bot }
  end)
  return r[1], r[2]
end

--- Whether any line of the window's buffer is inside a closed fold (tests and the approval gate use it).
---@param win integer
---@return boolean
function M.has_closed_fold(win)
  return vim.api.nvim_win_call(win, function()
    for l = 1, vim.fn.line('$') do
      if vim.fn.foldclosed(l) ~= -1 then
        return true
      end
    end
    return false
  end)
end

return M
