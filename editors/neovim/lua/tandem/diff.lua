-- tandem.diff: hunks of a proposed edit (vim.text.diff / vim.diff), rendered as lines with extmark highlights, or a :diffthis split.
local M = {}

M.ns = vim.api.nvim_create_namespace('tandem.diff')

local CONTEXT = 2 -- unchanged lines shown around each hunk

-- vim.text.diff is the 0.11 name; vim.diff, its older name, is kept as a fallback.
local diff_fn = (vim.text and vim.text.diff) or vim.diff

local function split(text)
  if text == nil or text == '' then
    return {}
  end
  local lines = vim.split(text, '\n', { plain = true })
  if lines[#lines] == '' then
    table.remove(lines) -- the trailing newline ends the last line, it is not an extra line
  end
  return lines
end
M.split = split

--- Hunks as { {start_old, count_old, start_new, count_new}, ... } (1-based, like `diff -u`).
function M.hunks(old_text, new_text)
  local a = old_text or ''
  local b = new_text or ''
  if a ~= '' and a:sub(-1) ~= '\n' then
    a = a .. '\n'
  end
  if b ~= '' and b:sub(-1) ~= '\n' then
    b = b .. '\n'
  end
  return diff_fn(a, b, { result_type = 'indices', algorithm = 'histogram' }) or {}
end

--- Render one diff entry ({path, oldText?, newText}) as display lines plus highlight ranges.
--- Returns lines (string[]) and marks ({row0, hl_group}[], rows relative to the first line).
function M.render(entry)
  local lines, marks = {}, {}
  local old_lines, new_lines = split(entry.oldText), split(entry.newText)
  local header
  if entry.oldText == nil then
    header = ('%s (new file, %d lines)'):format(entry.path or '?', #new_lines)
  else
    header = entry.path or '?'
  end
  table.insert(lines, header)
  table.insert(marks, { #lines - 1, 'Title' })
  local hunks = M.hunks(entry.oldText, entry.newText)
  if #hunks == 0 then
    table.insert(lines, '  (no changes)')
    table.insert(marks, { #lines - 1, 'Comment' })
    return lines, marks
  end
  for _, h in ipairs(hunks) do
    local sa, ca, sb, cb = h[1], h[2], h[3], h[4]
    -- With count 0, start is the line *before* the change; normalise to the first affected line.
    local first_old = ca == 0 and sa + 1 or sa
    local first_new = cb == 0 and sb + 1 or sb
    table.insert(lines, ('@@ -%d,%d +%d,%d @@'):format(sa, ca, sb, cb))
    table.insert(marks, { #lines - 1, 'DiffText' })
    for i = math.max(1, first_old - CONTEXT), first_old - 1 do
      table.insert(lines, '  ' .. old_lines[i])
    end
    for i = first_old, first_old + ca - 1 do
      table.insert(lines, '- ' .. (old_lines[i] or ''))
      table.insert(marks, { #lines - 1, 'DiffDelete' })
    end
    for i = first_new, first_new + cb - 1 do
      table.insert(lines, '+ ' .. (new_lines[i] or ''))
      table.insert(marks, { #lines - 1, 'DiffAdd' })
    end
    local after = first_old + ca
    for i = after, math.min(#old_lines, after + CONTEXT - 1) do
      table.insert(lines, '  ' .. old_lines[i])
    end
  end
  return lines, marks
end

--- Apply render() marks to a buffer, with `offset` the 0-based row where the lines start.
function M.highlight(buf, marks, offset)
  for _, m in ipairs(marks) do
    vim.api.nvim_buf_set_extmark(buf, M.ns, offset + m[1], 0, { line_hl_group = m[2], priority = 100 })
  end
end

local function scratch(name, lines, ft)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = 'wipe'
  pcall(vim.api.nvim_buf_set_name, buf, name)
  -- Loaded with undo off, so `u` in the split can only undo the user's own hunk choices, never
  -- empty the buffer.
  local undolevels = vim.bo[buf].undolevels
  vim.bo[buf].undolevels = -1
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].undolevels = undolevels
  vim.bo[buf].modifiable = false
  if ft and ft ~= '' then
    vim.bo[buf].filetype = ft
  end
  return buf
end

--- Open a new tab with the old and new text side by side in diff mode.
--- Returns the tab handle and the two buffers (old, new) so the caller can map keys in them.
--- With opts.editable the proposal (new, right) buffer can be changed hunk by hunk (`do` there,
--- `dp` from the original); the original never can.
---@param entry table a diff entry {path, oldText?, newText}
---@param opts? { editable?: boolean }
function M.open_split(entry, opts)
  opts = opts or {}
  local ft = vim.filetype.match({ filename = entry.path or '' }) or ''
  local stamp = tostring(vim.uv.hrtime())
  vim.cmd('tabnew')
  local tab = vim.api.nvim_get_current_tabpage()
  local scratch_win_buf = vim.api.nvim_get_current_buf()
  local old_buf = scratch(('tandem://%s/old/%s'):format(stamp, entry.path or 'file'), split(entry.oldText), ft)
  local new_buf = scratch(('tandem://%s/new/%s'):format(stamp, entry.path or 'file'), split(entry.newText), ft)
  vim.api.nvim_win_set_buf(0, old_buf)
  if vim.api.nvim_buf_is_valid(scratch_win_buf) and scratch_win_buf ~= old_buf then
    pcall(vim.api.nvim_buf_delete, scratch_win_buf, { force = true })
  end
  vim.cmd('diffthis')
  local old_win = vim.api.nvim_get_current_win()
  vim.cmd('vertical rightbelow split')
  vim.api.nvim_win_set_buf(0, new_buf)
  if opts.editable then
    vim.bo[new_buf].modifiable = true
    vim.bo[new_buf].modified = false
  end
  vim.cmd('diffthis')
  local new_win = vim.api.nvim_get_current_win()
  -- :diffthis folds unchanged text (foldmethod=diff) and the tab's first window came from the
  -- float or the chat: show every line instead, keeping only the diff's synchronized scrolling.
  for _, win in ipairs({ old_win, new_win }) do
    require('tandem.window').safe(win, { scrollbind = true, cursorbind = true, wrap = false })
  end
  return tab, old_buf, new_buf, old_win, new_win
end

return M
