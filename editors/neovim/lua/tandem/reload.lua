-- tandem.reload: after the agent writes files, reloads the buffers open on them, and warns instead of clobbering a buffer with unsaved changes.
--
-- The server reports every file it wrote in the `diff` of the call's completed toolCallUpdate.
-- A shell command can write any file: when it ends, Neovim's :checktime checks every buffer of
-- the workspace, answered by a FileChangedShell handler (after_command()).
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

--- After a shell command (which may write any file): Neovim's own check (:checktime) of every
--- loaded file buffer inside the workspace, with a FileChangedShell handler that answers for the
--- user: a changed file reloads its unmodified buffer; a buffer with unsaved changes is kept and
--- reported. Neovim compares each file with what the buffer last read or wrote, so nothing races
--- the command and unchanged files are left alone.
---@param cwd string the session's workspace root
---@param report fun(text: string, level: integer)
---@return { buf: integer, path: string, action: 'reloaded'|'kept'|'deleted' }[]
function M.after_command(cwd, report)
  local root = vim.uv.fs_realpath(cwd) or cwd
  local results = {}
  local group = vim.api.nvim_create_augroup('tandem.reload.check', { clear = true })
  vim.api.nvim_create_autocmd('FileChangedShell', {
    group = group,
    callback = function(args)
      local b = args.buf
      local path = vim.api.nvim_buf_get_name(b)
      if vim.v.fcs_reason == 'deleted' then
        vim.v.fcs_choice = ''
        table.insert(results, { buf = b, path = path, action = 'deleted' })
      elseif vim.bo[b].modified or vim.v.fcs_reason == 'conflict' then
        vim.v.fcs_choice = ''
        table.insert(results, { buf = b, path = path, action = 'kept' })
      else
        vim.v.fcs_choice = 'reload'
        table.insert(results, { buf = b, path = path, action = 'reloaded' })
      end
    end,
  })
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_get_name(b)
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].buftype == '' and name ~= '' then
      local abs = vim.uv.fs_realpath(name) or vim.fs.normalize(name)
      if abs:sub(1, #root + 1) == root .. '/' then
        pcall(vim.cmd, 'silent checktime ' .. b)
      end
    end
  end
  vim.api.nvim_del_augroup_by_id(group)
  for _, r in ipairs(results) do
    local shown = vim.fn.fnamemodify(r.path, ':~:.')
    if r.action == 'kept' then
      report(('a command of the agent changed %s, but buffer %d has unsaved changes there, so it was not reloaded and '
        .. 'your text is kept. Next step: :w keeps your version (overwriting the change), :e! takes the file as it is '
        .. 'now (dropping yours), or :w !diff %% - compares them first.'):format(shown, r.buf), vim.log.levels.WARN)
    elseif r.action == 'deleted' then
      report(('a command of the agent deleted %s; buffer %d still holds its text (:w writes it back, :bwipeout drops it).')
        :format(shown, r.buf), vim.log.levels.WARN)
    end
  end
  return results
end

return M
