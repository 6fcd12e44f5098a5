-- tandem.reload: after the agent writes files, reloads the buffers open on them, and warns instead of clobbering a buffer with unsaved changes.
--
-- The server reports every file it wrote in the `diff` of the call's completed toolCallUpdate.
-- A buffer on such a file is stale from then on: an unmodified one is reloaded with :checktime
-- (with 'autoread' set just for it, so Neovim reloads without asking); a modified one keeps the
-- user's text, and a warning says the file on disk changed and how to choose between the two.
local M = {}

--- The absolute, normalized form of a path the server reported (relative paths are relative to
--- the session's workspace root).
---@param path string
---@param cwd string the session's workspace root
---@return string
local function absolute(path, cwd)
  if not path:match('^/') then
    path = cwd .. '/' .. path
  end
  local normalized = vim.fs.normalize(path)
  return vim.uv.fs_realpath(normalized) or normalized
end

--- The loaded file buffers whose file is `abs` (compared after resolving symlinks).
---@param abs string
---@return integer[]
local function buffers_on(abs)
  local out = {}
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].buftype == '' then
      local name = vim.api.nvim_buf_get_name(b)
      if name ~= '' then
        local resolved = vim.uv.fs_realpath(name) or vim.fs.normalize(name)
        if resolved == abs then
          table.insert(out, b)
        end
      end
    end
  end
  return out
end

--- Reload an unmodified buffer from disk now, without a prompt.
---@param b integer
local function reload(b)
  vim.api.nvim_buf_call(b, function()
    vim.cmd('setlocal autoread')
    pcall(vim.cmd, 'silent checktime ' .. b)
    vim.cmd('setlocal autoread<')
  end)
end

--- Handle files the agent wrote. Returns what happened to each buffer, for tests and the chat.
---@param paths string[] paths as the server reported them
---@param cwd string the session's workspace root
---@param report fun(text: string, level: integer) where warnings go (the chat and a notification)
---@return { buf: integer, path: string, action: 'reloaded'|'kept' }[]
function M.written(paths, cwd, report)
  local results = {}
  for _, path in ipairs(paths) do
    local abs = absolute(path, cwd)
    for _, b in ipairs(buffers_on(abs)) do
      if vim.bo[b].modified then
        report(('the agent wrote %s, but buffer %d has unsaved changes there, so it was not reloaded and your text is kept. '
          .. 'Next step: :w keeps your version (overwriting the agent\'s change), :e! takes the agent\'s version '
          .. '(dropping yours), or :w !diff %% - compares them first.'):format(vim.fn.fnamemodify(abs, ':~:.'), b),
          vim.log.levels.WARN)
        table.insert(results, { buf = b, path = abs, action = 'kept' })
      else
        reload(b)
        table.insert(results, { buf = b, path = abs, action = 'reloaded' })
      end
    end
  end
  return results
end

return M
