-- tandem.hooks: the session's hooks — the trust question for a workspace's project hooks, :Tandem hooks (the list) and :Tandem hooks trust.
--
-- Hooks are commands the server runs at events of a session (PreToolUse, …; protocol:
-- `hooks/list`, `hooks/trust`, the `hookRan` event, drawn by tandem.ui). Those of the workspace's
-- own files (project hooks) run only once the user trusted them, since they run outside tandem's
-- sandbox: after a session is created or loaded the plugin asks `hooks/list`, and when the
-- project hooks are not trusted it asks the user once (per workspace and set of hooks in this
-- Neovim), listing their commands. The last answer is kept in server.state.hooks.
local rpc = require('tandem.rpc')
local server = require('tandem.server')

local M = {}

local S = server.state
local notify = server.notify

local function ui()
  return require('tandem.ui')
end

-- Workspace and hook set (cwd, files, commands) -> true once the user was asked about them.
local asked = {}

--- Whether an error means the server has no such method (an older tandem).
local function unknown_method(err)
  return rpc.error_kind(err) == 'methodNotFound' or (type(err) == 'table' and err.code == -32601)
end

--- The last `hooks/list` answer when it is the open session's.
---@return tandem.HooksListResult?
function M.current()
  if S.hooks and S.session and S.hooks.sessionId == S.session.sessionId then
    return S.hooks.result
  end
end

--- Ask the server for the session's hooks; cb(result) or cb(nil, err).
---@param cb fun(res: tandem.HooksListResult?, err: table?)
function M.fetch(cb)
  if not server.ready() then
    return cb(nil, { message = 'no session is open' })
  end
  local sid = S.session.sessionId
  S.client:request('hooks/list', { sessionId = sid }, function(err, res)
    if not err and type(res) == 'table' then
      res.hooks = type(res.hooks) == 'table' and res.hooks or {}
      res.projectFiles = type(res.projectFiles) == 'table' and res.projectFiles or {}
      S.hooks = { sessionId = sid, result = res }
    end
    cb(not err and res or nil, err)
  end)
end

--- The project hooks of a `hooks/list` answer (those the trust is about).
---@param res tandem.HooksListResult
---@return tandem.Hook[]
function M.project_hooks(res)
  return vim.tbl_filter(function(hk)
    return hk.source == 'project'
  end, res.hooks or {})
end

--- One hook for people: "PreToolUse [Bash]: .tandem/hooks/check.sh".
---@param hk tandem.Hook
---@return string
function M.describe(hk)
  return ('%s%s: %s'):format(tostring(hk.event or '?'), hk.matcher and (' [' .. hk.matcher .. ']') or '',
    tostring(hk.command or '?'))
end

--- Whether the answer has project hooks that wait for trust.
---@param res tandem.HooksListResult
local function untrusted(res)
  return res.trusted == false and #(res.projectFiles or {}) > 0
end

--- Ask the user whether to trust the project hooks of `res` (vim.ui.select: trust or not now);
--- cb() once answered (after the trust, when given).
---@param res tandem.HooksListResult
---@param cb? fun()
function M.ask(res, cb)
  cb = cb or function() end
  local listed = vim.tbl_map(function(hk)
    return '  ' .. M.describe(hk)
  end, M.project_hooks(res))
  if #listed == 0 then
    listed = { '  (no hook entry could be read from them; check the files)' }
  end
  local files = table.concat(res.projectFiles, ', ')
  local prompt = ('This workspace has project hooks (%s). Trusted, tandem runs these commands at the events named, '
    .. 'on this machine and outside its sandbox:\n%s\nTrust them? (remembered for this folder until the files '
    .. 'change; :Tandem hooks lists them)'):format(files, table.concat(listed, '\n'))
  vim.ui.select({ 'trust', 'skip' }, {
    prompt = prompt,
    kind = 'tandem.hooks_trust',
    format_item = function(item)
      return item == 'trust' and 'Trust: run these hooks (outside the sandbox)'
        or 'Not now: they do not run (:Tandem hooks trust trusts them later)'
    end,
  }, function(choice)
    if choice == 'trust' then
      return M.trust(function()
        cb()
      end)
    end
    notify(('project hooks not trusted (%s): they do not run in this session. :Tandem hooks trust trusts them.')
      :format(files), vim.log.levels.WARN)
    cb()
  end)
end

--- After a session was created or loaded: ask `hooks/list`, and when the workspace's project
--- hooks wait for trust, ask the user (once per workspace and hook set). cb() afterwards, also
--- when the server has no hooks (an older tandem) or the list fails (a warning says so).
---@param cb? fun()
function M.check(cb)
  cb = cb or function() end
  if not server.ready() then
    return cb()
  end
  local sid = S.session.sessionId
  local cwd = S.session.cwd or ''
  M.fetch(function(res, err)
    if not (S.session and S.session.sessionId == sid) then
      return cb()
    end
    if err then
      if not unknown_method(err) then
        notify('could not list the hooks (hooks/list): ' .. rpc.format_error(err), vim.log.levels.WARN)
      end
      return cb()
    end
    if not untrusted(res) then
      return cb()
    end
    local key = { cwd }
    vim.list_extend(key, res.projectFiles)
    for _, hk in ipairs(M.project_hooks(res)) do
      key[#key + 1] = M.describe(hk)
    end
    key = table.concat(key, '\0')
    if asked[key] then
      return cb()
    end
    asked[key] = true
    M.ask(res, cb)
  end)
end

--- Trust the workspace's project hooks as the session read them (`hooks/trust`); cb(err) after.
---@param cb? fun(err?: table)
function M.trust(cb)
  if not server.ready() then
    notify('no session is open, so there are no hooks to trust: they are read with the session your first prompt '
      .. 'starts (:Tandem prompt), or a resumed one (:Tandem resume).', vim.log.levels.WARN)
    if cb then
      cb({ message = 'no session' })
    end
    return
  end
  local sid = S.session.sessionId
  S.client:request('hooks/trust', { sessionId = sid }, function(err)
    if err then
      if rpc.error_kind(err) == 'invalidParams' then
        notify('this workspace has no project hooks to trust: ' .. rpc.format_error(err), vim.log.levels.WARN)
      else
        notify('could not trust the project hooks (hooks/trust): ' .. rpc.format_error(err), vim.log.levels.ERROR)
      end
    else
      local res = S.hooks and S.hooks.sessionId == sid and S.hooks.result or nil
      local files = res and table.concat(res.projectFiles, ', ') or 'the workspace\'s hook files'
      if res then
        res.trusted = true
      end
      notify(('trusted the project hooks (%s) for this folder: they run from now on, until the files change.')
        :format(files))
      ui().line('· project hooks trusted: ' .. files, 'Comment')
    end
    if cb then
      cb(err)
    end
  end)
end

--- The lines of :Tandem hooks for an answer.
---@param res tandem.HooksListResult
---@return string[]
function M.lines(res)
  local sid = S.session and S.session.sessionId or '?'
  local lines = { ('hooks of session %s:'):format(sid) }
  if #res.hooks == 0 then
    lines[#lines + 1] = '  none'
  end
  for _, hk in ipairs(res.hooks) do
    lines[#lines + 1] = ('  [%s] %s%s'):format(tostring(hk.source or '?'), M.describe(hk),
      hk.timeout and ('  (timeout %s s)'):format(tostring(hk.timeout)) or '')
  end
  if #res.projectFiles > 0 then
    local files = table.concat(res.projectFiles, ', ')
    if res.trusted == false then
      lines[#lines + 1] = ('project hook files %s: NOT trusted, so their hooks do not run (:Tandem hooks trust)')
        :format(files)
    else
      lines[#lines + 1] = ('project hook files %s: trusted'):format(files)
    end
  end
  return lines
end

--- :Tandem hooks: the session's hooks in a notification (event, matcher, command, source,
--- timeout) and whether the project hooks are trusted.
function M.show()
  if not server.ready() then
    notify('no session is open: hooks are read with the session your first prompt starts (:Tandem prompt) or a '
      .. 'resumed one (:Tandem resume).', vim.log.levels.WARN)
    return
  end
  M.fetch(function(res, err)
    if err then
      notify('could not list the hooks (hooks/list): ' .. rpc.format_error(err), vim.log.levels.ERROR)
      return
    end
    local untrusted_now = untrusted(res)
    notify(table.concat(M.lines(res), '\n'), untrusted_now and vim.log.levels.WARN or vim.log.levels.INFO)
  end)
end

--- Completion of `:Tandem hooks …`.
---@param lead string
---@param words string[] the command line's words (`Tandem`, `hooks`, …)
---@return string[]
function M.complete(lead, words)
  if #words > 3 then
    return {}
  end
  return vim.tbl_filter(function(s)
    return s:find(lead, 1, true) == 1
  end, { 'trust' })
end

--- Forget the session's hooks (a new session, a restart); the questions asked stay asked.
function M.reset()
  S.hooks = nil
end

return M
