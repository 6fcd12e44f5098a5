-- tandem.slash: slash commands — completion of `/name` (from `commands/list`) in :Tandem prompt, the prompt input and buffer inputs, and the result of a prompt that ran a command.
--
-- The server owns the commands (protocol: `commands/list`, the extended `prompt` result): built-ins
-- (/compact, /diff, /fork, /init, /mode, /model, /status, /undo) and Markdown files of the project
-- (.tandem/commands, .claude/commands) and of the user (~/.config/tandem/commands). It reads them
-- again at each call, so completion asks each time (bounded by a short wait; the last answer is
-- the fallback), and a new command file shows up at the next <Tab>. Without a session there is
-- nothing to ask, so nothing completes.
local rpc = require('tandem.rpc')
local server = require('tandem.server')

local M = {}

local S = server.state
local notify = server.notify

local function ui()
  return require('tandem.ui')
end

--- How long completion waits for `commands/list` (ms) before it uses the last answer.
M.WAIT_MS = 500

-- The last commands/list answer: { sessionId, commands }.
---@type { sessionId: string, commands: tandem.SlashCommand[] }?
local cache = nil

--- The cached list when it is the open session's.
---@return tandem.SlashCommand[]?
local function cached()
  if cache and S.session and cache.sessionId == S.session.sessionId then
    return cache.commands
  end
end

--- Ask the server for the session's commands in the background; cb(commands) on an answer
--- (cb(nil, err) on an error). Does nothing without an open session.
---@param cb? fun(commands: tandem.SlashCommand[]?, err: table?)
function M.fetch(cb)
  if not server.ready() then
    if cb then
      cb(nil, { message = 'no session is open' })
    end
    return
  end
  local sid = S.session.sessionId
  S.client:request('commands/list', { sessionId = sid }, function(err, res)
    if not err and res and type(res.commands) == 'table' then
      cache = { sessionId = sid, commands = res.commands }
    end
    if cb then
      cb(not err and res and res.commands or nil, err)
    end
  end)
end

--- The open session's commands, asked now: waits up to WAIT_MS for the answer (events keep being
--- handled meanwhile), else the last answer. {} without a session. With `nowait`, the last answer
--- at once and a new one asked in the background: insert-mode completion locks the text, so
--- events handled during a wait could not be drawn in the chat.
---@param nowait? boolean
---@return tandem.SlashCommand[]
function M.commands(nowait)
  if not server.ready() then
    return {}
  end
  local done = false
  M.fetch(function()
    done = true
  end)
  if not nowait then
    vim.wait(M.WAIT_MS, function()
      return done
    end, 5)
  end
  return cached() or {}
end

--- The command named `name` (no slash) in the last answer.
---@param name string
---@return tandem.SlashCommand?
function M.find(name)
  for _, c in ipairs(cached() or {}) do
    if c.name == name then
      return c
    end
  end
end

--- Completions of a prompt's text typed so far (`line`, the whole input): `/name` at the start
--- completes to `/name` for each command that starts with it; `/model ` and `/mode ` complete
--- the model ids and modes. Each result is the whole line.
---@param line string
---@return string[]
function M.complete_line(line)
  local lead = line:match('^/([^%s]*)$')
  if lead then
    local out = {}
    for _, c in ipairs(M.commands()) do
      if c.name:find(lead, 1, true) == 1 then
        out[#out + 1] = '/' .. c.name
      end
    end
    return out
  end
  local cmd, arg = line:match('^/(mode)%s+(%S*)$')
  if not cmd then
    cmd, arg = line:match('^/(model)%s+(%S*)$')
  end
  if cmd and server.ready() then
    local choices
    if cmd == 'model' then
      choices = vim.tbl_map(function(m)
        return m.id
      end, (S.info and S.info.models) or {})
    else
      choices = vim.tbl_map(function(m)
        return m.id
      end, require('tandem.session').MODES)
    end
    local out = {}
    for _, id in ipairs(choices) do
      if id:find(arg, 1, true) == 1 then
        out[#out + 1] = '/' .. cmd .. ' ' .. id
      end
    end
    return out
  end
  return {}
end

--- The complete-items of `/lead` for a buffer input's 'omnifunc' or 'completefunc': the word, its
--- argument hint in the menu, its source as the kind, its description in the info window. From
--- the last `commands/list` answer (asked when the session opened and after each turn; this call
--- asks again in the background for the next time).
---@param lead string what follows the slash
---@return table[]
function M.items(lead)
  local out = {}
  for _, c in ipairs(M.commands(true)) do
    if c.name:find(lead, 1, true) == 1 then
      out[#out + 1] = {
        word = '/' .. c.name,
        abbr = '/' .. c.name .. (c.argumentHint and (' ' .. c.argumentHint) or ''),
        kind = c.source,
        menu = c.description,
        info = ('/%s%s\n\n%s\n\n(%s command)'):format(c.name, c.argumentHint and (' ' .. c.argumentHint) or '',
          c.description or '', c.source or '?'),
        user_data = { tandem = c },
      }
    end
  end
  return out
end

--- 'omnifunc' / 'completefunc' for a buffer where a prompt is typed (an input plugin's buffer, or
--- your own): `/name` at the start of the line completes to the session's commands, with the
--- argument hint and description in the menu and info. Elsewhere on the line it completes nothing.
--- `vim.bo.omnifunc = "v:lua.require'tandem.slash'.omnifunc"`.
---@param findstart integer
---@param base string
---@return integer|table[]
function M.omnifunc(findstart, base)
  if findstart == 1 then
    local before = vim.api.nvim_get_current_line():sub(1, vim.fn.col('.') - 1)
    if before:match('^/[^%s]*$') then
      return 0
    end
    return -3 -- cancel silently: nothing to complete here
  end
  return M.items((base or ''):gsub('^/', ''))
end

-- ── The result of a prompt that ran a command ─────────────────────────────────────────────

--- The argument typed after `/name`.
---@param text string
---@return string
local function argument(text)
  return vim.trim((text or ''):match('^/%S+(.*)$') or '')
end

--- A `prompt` answer that carries `command` and no `turnId`: a built-in that ran at once. Shows its
--- output under the prompt, and does what the command changed on the plugin's side: /mode and
--- /model the bar, /fork offers to open the new session, /undo waits for its `rewound` event.
---@param turn tandem.ChatTurn the prompt's block in the chat
---@param text string the prompt as typed
---@param cmd tandem.CommandResult
function M.on_result(turn, text, cmd)
  ui().command_result(turn, cmd)
  local arg = argument(text)
  if cmd.name == 'mode' and arg ~= '' and S.session then
    S.session.mode = arg
    ui().refresh_bar()
  elseif cmd.name == 'model' and arg ~= '' and S.session then
    S.session.model = arg -- the modelSwitched event says the same
    ui().refresh_bar()
  elseif cmd.name == 'undo' then
    -- The `rewound` event follows this answer: the chat drops the undone turn then, and shows
    -- this block again below what remains (tandem.turns.on_rewound).
    S.command_undo = { turn = turn, text = text, command = cmd }
  elseif cmd.name == 'fork' and cmd.sessionId then
    M.offer_fork(cmd.sessionId)
  end
end

--- /fork made a new session: say how to open it, and offer to open it now.
---@param id string
function M.offer_fork(id)
  local from = S.session and S.session.sessionId
  ui().line(('⑂ new session %s: :Tandem resume %s opens it (this chat stays on %s until then)'):format(id, id,
    tostring(from)), 'Special')
  vim.ui.select({ 'open', 'stay' }, {
    prompt = ('/fork made session %s: open it now?'):format(id),
    format_item = function(item)
      return item == 'open' and ('Open %s now (:Tandem resume %s)'):format(id, id)
        or ('Stay in %s'):format(tostring(from))
    end,
  }, function(choice)
    if choice ~= 'open' then
      return
    end
    require('tandem.session').load_session(id, {
      done = function()
        ui().line(('⑂ forked from %s: this is the new session %s'):format(tostring(from), id), 'Special')
      end,
    })
  end)
end

--- The error of a prompt that named a built-in (`turnInProgress`, `unknownModel`, `invalidMode`, …),
--- for people: the server's words and the next step.
---@param text string the prompt as typed
---@param err table
---@return string
function M.failure(text, err)
  local name = (text or ''):match('^/(%S+)')
  local kind = rpc.error_kind(err)
  local hint = ''
  if kind == 'unknownModel' then
    hint = ' (/model without a name lists the models)'
  elseif kind == 'invalidMode' then
    hint = ' (/mode without a name lists the modes)'
  end
  return ('/%s failed: %s%s'):format(tostring(name), rpc.format_error(err), hint)
end

--- Forget the cached list (a new session, a restart).
function M.reset()
  cache = nil
end

--- Warm the cache for the session just opened (completion then has a fallback from the start).
function M.prefetch()
  M.fetch(function(_, err)
    if err and rpc.error_kind(err) ~= 'methodNotFound' and err.code ~= -32601 and server.ready() then
      notify('could not list the slash commands (commands/list): ' .. rpc.format_error(err), vim.log.levels.WARN)
    end
  end)
end

return M
