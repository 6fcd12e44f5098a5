-- tandem.session: the session and every action on it — prompt, steer, stop, model, mode, network, attachments, the session list and resume, approvals' answers, the gauge.
--
-- A session is created only when the first prompt needs one (ensure_session()), so listing or
-- resuming sessions, opening the chat or picking a model never leaves an empty session behind.
-- A model, mode or network choice made before that prompt is kept for the session it creates.
local config = require('tandem.config')
local pages = require('tandem.pages')
local rpc = require('tandem.rpc')
local server = require('tandem.server')

local M = {}

local S = server.state
local notify = server.notify
local server_ready, ready = server.server_ready, server.ready
local fail_waiters = server.fail_waiters

local function ui()
  return require('tandem.ui')
end
local function approval()
  return require('tandem.approval')
end

--- Handle one session/event from the server: state, the chat, approvals, reloads, User TandemEvent.
local function on_event(ev)
  if S.loading and ev.sessionId == S.loading.sessionId then
    -- Its history is still being paged in: keep the event for after the history is drawn.
    table.insert(S.loading.events, ev)
    return
  end
  if S.session == nil or ev.sessionId ~= S.session.sessionId then
    return -- a session we are not showing (for example one we just left)
  end
  local t = ev.type
  if t == 'turnStarted' then
    S.running = true
    S.turn_id = ev.turnId
  elseif t == 'turnEnded' then
    S.running = false
    S.turn_id = nil
    approval().turn_ended()
    require('tandem.turns').refresh() -- :Tandem diff <Tab> offers the new turn
    require('tandem.slash').fetch() -- the fallback of completion stays current (a turn may add a command file)
  elseif t == 'modelSwitched' then
    S.session.model = ev.to
  elseif t == 'usage' then
    S.usage = ev
  elseif t == 'plan' then
    -- The whole plan each time; an empty list means none.
    S.plan = (type(ev.entries) == 'table' and #ev.entries > 0) and ev.entries or nil
  end
  if t == 'usage' or t == 'turnStarted' or t == 'turnEnded' or t == 'modelSwitched' or t == 'plan' then
    ui().refresh_bar() -- the chat's winbar shows the gauge and the running state
  end
  ui().render(ev)
  if t == 'toolCall' then
    S.tool_kinds = S.tool_kinds or {}
    S.tool_kinds[ev.toolCallId] = ev.kind
  end
  if t == 'toolCallUpdate' and ev.status ~= 'running' and (S.tool_kinds or {})[ev.toolCallId] == 'execute' then
    -- A command may have written any file: check the workspace's open buffers against their files.
    S.tool_kinds[ev.toolCallId] = nil
    require('tandem.reload').after_command(S.session.cwd, function(text, level)
      ui().line('! ' .. text, 'WarningMsg')
      notify(text, level)
    end)
  end
  if t == 'toolCallUpdate' and ev.status == 'completed' and ev.diff then
    -- Buffers open on the files just written are stale: reload them, never over unsaved changes.
    local paths = vim.tbl_map(function(entry)
      return entry.path
    end, ev.diff)
    require('tandem.reload').written(paths, S.session.cwd, function(text, level)
      ui().line('! ' .. text, 'WarningMsg')
      notify(text, level)
    end)
  end
  if t == 'approvalRequested' then
    approval().request(ev)
  elseif t == 'approvalResolved' then
    approval().resolved(ev)
  elseif t == 'questionAsked' then
    approval().question(ev)
  elseif t == 'mcpStatus' then
    require('tandem.mcp').on_event(ev)
    ui().refresh_bar() -- the winbar counts the ready MCP servers
  elseif t == 'rewound' then
    require('tandem.turns').on_rewound(ev)
  end
  vim.api.nvim_exec_autocmds('User', { pattern = 'TandemEvent', modeline = false, data = ev })
end

M.on_event = on_event

local function start_session(gen, cb)
  local params = { cwd = config.cwd() }
  params.model = S.next_session.model or config.options.model
  params.mode = S.next_session.mode or config.options.mode
  S.client:request('session/new', params, function(err, res)
    if gen ~= S.gen then
      return
    end
    if err then
      fail_waiters()
      notify(
        ('could not start a session in %s: %s. Check the directory exists, or change setup({ cwd = ... }), then :Tandem restart.')
          :format(params.cwd, rpc.format_error(err)),
        vim.log.levels.ERROR
      )
      return
    end
    S.session = { sessionId = res.sessionId, model = res.model, mode = res.mode, cwd = params.cwd, network = false }
    M.clear_plan() -- a new session has no plan yet
    -- Before the hooks' trust question and what the answer writes.
    ui().line(('· session %s · model %s · mode %s · %s'):format(
      S.session.sessionId, S.session.model, S.session.mode, S.session.cwd), 'Comment')
    -- The whole list once: the sources, and the statuses the server may tell before this answer
    -- (an untrusted server's comes at once), which on_event dropped for want of a session. An open
    -- MCP list shows this session from now on, and its servers' events keep it current.
    require('tandem.mcp').refresh()
    require('tandem.slash').prefetch()
    local network = S.next_session.network
    S.next_session = {}
    if network then
      -- Sent before the prompt that waits for this session: the server applies a session's
      -- messages in order, so the first command already has the network.
      M.set_network(true)
    end
    -- Untrusted project hooks are asked about before the first prompt goes, so the answer
    -- already applies to it (hooks of that prompt run, or not, as the user chose).
    require('tandem.hooks').check(function()
      if gen == S.gen then
        cb()
      end
    end)
  end)
end

--- Run fn once a session is open, starting the server and creating the session if needed. Only
--- actions that need a session (a prompt) call this, so no session is ever left empty.
function M.ensure_session(fn)
  server.ensure_server(function()
    if S.session then
      fn()
      return
    end
    table.insert(S.session_waiters, fn)
    if S.creating_session then
      return
    end
    S.creating_session = true
    start_session(S.gen, function()
      S.creating_session = false
      local waiting = S.session_waiters
      S.session_waiters = {}
      for _, f in ipairs(waiting) do
        f()
      end
    end)
  end)
end

--- The model and mode in force: the session's, or before the first prompt the ones it will get.
---@return string? model, string? mode
local function current_choice()
  if S.session then
    return S.session.model, S.session.mode
  end
  local model = S.next_session.model or config.options.model or (S.info and S.info.defaultModel)
  return model, S.next_session.mode or config.options.mode or 'ask'
end
M.current_choice = current_choice

--- Build the prompt content: the text, plus the selected lines as a fenced block.
function M.context_from_range(bufnr, line1, line2)
  local lines = vim.api.nvim_buf_get_lines(bufnr, line1 - 1, line2, false)
  local name = vim.api.nvim_buf_get_name(bufnr)
  local rel = name ~= '' and vim.fn.fnamemodify(name, ':.') or '[No Name]'
  local ft = vim.bo[bufnr].filetype or ''
  return ('Selected from `%s` lines %d-%d:\n```%s\n%s\n```'):format(rel, line1, line2, ft, table.concat(lines, '\n'))
end

local function send_prompt(text, context)
  local content = text
  if context then
    content = (text ~= '' and (text .. '\n\n') or '') .. context
  end
  -- Files named with @path and those added with :Tandem add travel in the prompt text itself.
  local blocks, attached = require('tandem.context').collect(text, config.cwd())
  if not blocks then
    notify('prompt not sent: ' .. attached, vim.log.levels.ERROR)
    ui().line('! prompt not sent: ' .. attached, 'ErrorMsg')
    return
  end
  local parts = {}
  for _, block in ipairs(blocks) do
    if type(block) == 'table' then
      parts[#parts + 1] = block -- an image or a PDF: a prompt part of its own
    else
      content = content .. '\n\n' .. block
    end
  end
  if #parts > 0 then
    content = vim.list_extend({ { type = 'text', text = content } }, parts)
  end
  M.ensure_session(function()
    local turn = ui().user_prompt(text, context, attached)
    if #parts > 0 then
      -- The server replaces what the model cannot take by a placeholder: say so before it happens.
      local info = M.model_info(S.session.model) or {}
      for _, part in ipairs(parts) do
        local able = (part.type == 'image' and info.vision) or (part.type == 'document' and info.pdf)
        if not able then
          notify(('%s cannot %s, so it gets a placeholder instead of the attached %s; :Tandem model picks one that '
            .. 'can (the picker lists each model\'s abilities).'):format(S.session.model,
            part.type == 'image' and 'see images' or 'read PDFs', part.type == 'image' and 'image' or 'PDF'),
            vim.log.levels.WARN)
        end
      end
    end
    if config.options.chat.auto_open ~= false then
      ui().open({ focus = false })
    end
    local slash = text:match('^/%S') ~= nil
    S.command_undo = nil -- a /undo whose `rewound` never came (it had nothing to undo) is over
    S.client:request('prompt', { sessionId = S.session.sessionId, content = content }, function(err, res)
      if err then
        local kind = rpc.error_kind(err)
        if kind == 'turnInProgress' then
          notify('a turn is already running: add to it with :Tandem steer, or end it with :Tandem stop.', vim.log.levels.WARN)
          ui().line('! prompt not sent: ' .. rpc.format_error(err), 'ErrorMsg')
        elseif slash then
          -- A built-in that failed (unknownModel, invalidMode, …): the server's words and the next step.
          local msg = require('tandem.slash').failure(text, err)
          notify(msg, vim.log.levels.ERROR)
          ui().line('! ' .. msg, 'ErrorMsg')
        else
          notify('prompt failed: ' .. rpc.format_error(err), vim.log.levels.ERROR)
          ui().line('! prompt not sent: ' .. rpc.format_error(err), 'ErrorMsg')
        end
        ui().set_turn_id(turn, nil)
        return
      end
      res = res or {}
      if type(res.command) == 'table' and res.turnId == nil then
        -- A built-in that needs no model ran at once (/status, /diff, /undo, /fork, /model, /mode).
        require('tandem.slash').on_result(turn, text, res.command)
        return
      end
      ui().set_turn_id(turn, res.turnId)
      if type(res.command) == 'table' then
        turn.command = res.command.name -- a custom command, /init or /compact: a turn as usual
      end
      S.turn_id = res.turnId
      S.running = true
    end)
  end)
end

--- Send a prompt. Without text, ask for it. context is extra text (a selection) appended to it.
function M.prompt(text, context)
  if text and text ~= '' then
    return send_prompt(text, context)
  end
  vim.ui.input({
    prompt = context and 'tandem (with selection)> ' or 'tandem> ',
    -- <Tab> after @ completes workspace files (plugin/tandem.lua defines the function).
    completion = 'customlist,TandemCompletePrompt',
  }, function(input)
    if input == nil then
      return
    end
    if input == '' and not context then
      return
    end
    send_prompt(input, context)
  end)
end

function M.stop()
  if not ready() then
    notify('no server is running, so there is nothing to stop.')
    return
  end
  S.client:request('stop', { sessionId = S.session.sessionId }, function(err, res)
    if err then
      notify('stop failed: ' .. rpc.format_error(err), vim.log.levels.ERROR)
    elseif not res.stopped then
      notify('no turn was running.')
    end
  end)
end

function M.steer(text)
  if not ready() or not S.running then
    notify('no turn is running to steer; start one with :Tandem prompt.', vim.log.levels.WARN)
    return
  end
  local function send(t)
    S.client:request('steer', { sessionId = S.session.sessionId, text = t }, function(err)
      if err then
        if rpc.error_kind(err) == 'noTurnRunning' then
          notify('the turn ended before the steer arrived; send it as a new prompt with :Tandem prompt.', vim.log.levels.WARN)
        else
          notify('steer failed: ' .. rpc.format_error(err), vim.log.levels.ERROR)
        end
        return
      end
      local waiting = require('tandem.approval').pending()
      if #waiting > 0 then
        -- The turn is held by an approval, so the steer cannot reach the model before it is answered.
        notify(('steer queued: it reaches the model after you answer the pending approval (%s; :Tandem approvals shows it).')
          :format(waiting[1].title or waiting[1].name or 'approval'), vim.log.levels.WARN)
        ui().note('↪ steer queued: ' .. t .. '  (waits for the pending approval)', 'Special')
      else
        notify('steer queued: it reaches the model at the next step of this turn.')
        ui().note('↪ steer queued: ' .. t, 'Special')
      end
    end)
  end
  if text and text ~= '' then
    return send(text)
  end
  vim.ui.input({ prompt = 'steer> ' }, function(input)
    if input and input ~= '' then
      send(input)
    end
  end)
end

--- The model catalog entry with this id, if the server offers it.
---@param id string
---@return table?
local function model_info(id)
  for _, m in ipairs((S.info and S.info.models) or {}) do
    if m.id == id then
      return m
    end
  end
end
M.model_info = model_info

--- Switch the session's model; before the first prompt, choose the model its session starts with.
function M.switch_model(id, cb)
  server.ensure_server(function()
    if not S.session then
      if not model_info(id) then
        local ids = vim.tbl_map(function(m)
          return m.id
        end, (S.info and S.info.models) or {})
        notify(('could not switch to %s: the server offers no such model (unknownModel); it offers %s. '
          .. 'Add [models.%s] to your tandem config to use it.'):format(id, table.concat(ids, ', '), id), vim.log.levels.ERROR)
        return
      end
      S.next_session.model = id
      notify('model: ' .. id .. ' (for the session your next prompt starts)')
      if cb then
        cb({ model = id })
      end
      return
    end
    S.client:request('switchModel', { sessionId = S.session.sessionId, model = id }, function(err, res)
      if err then
        notify(('could not switch to %s: %s'):format(id, rpc.format_error(err)), vim.log.levels.ERROR)
        return
      end
      S.session.model = res.model
      if res.warning then
        notify(res.warning, vim.log.levels.WARN)
      end
      notify('model: ' .. res.model)
      if cb then
        cb(res)
      end
    end)
  end)
end

--- One line of the model picker: the id, its provider model, its context window and abilities.
---@param m table a ModelInfo from initialize or models/list
---@param current string? the model in force
---@return string
function M.format_model(m, current)
  local cur = m.id == current and '● ' or '  '
  local extra = {}
  if m.name then
    table.insert(extra, m.name)
  end
  if m.provider then
    table.insert(extra, m.provider)
  end
  if m.contextWindow then
    table.insert(extra, M.format_tokens(m.contextWindow) .. ' window')
  end
  if m.maxOutputTokens then
    table.insert(extra, M.format_tokens(m.maxOutputTokens) .. ' out')
  end
  for _, ability in ipairs({ 'vision', 'pdf', 'reasoning' }) do
    if m[ability] then
      table.insert(extra, ability)
    end
  end
  return cur .. m.id .. (#extra > 0 and ('  (' .. table.concat(extra, ', ') .. ')') or '')
end

--- A token count for people: 950, 12.3k, 128k, 1.05M.
---@param n number
---@return string
function M.format_tokens(n)
  if n >= 1e6 then
    return (('%.2f'):format(n / 1e6):gsub('%.?0+$', '')) .. 'M'
  elseif n >= 1e4 then
    return ('%d'):format(math.floor(n / 1000 + 0.5)) .. 'k'
  elseif n >= 1e3 then
    return (('%.1f'):format(n / 1000):gsub('%.0$', '')) .. 'k'
  end
  return tostring(math.floor(n))
end

function M.pick_model()
  server.ensure_server(function()
    -- models/list is the fresh catalog (initialize's copy is kept when it fails).
    S.client:request('models/list', {}, function(err, res)
      if not err and res and res.models then
        S.info.models = res.models
        S.info.defaultModel = res.defaultModel or S.info.defaultModel
      end
      local models = (S.info and S.info.models) or {}
      if #models == 0 then
        notify('the server offers no models; add [models.*] to your tandem config.', vim.log.levels.WARN)
        return
      end
      local current = current_choice()
      vim.ui.select(models, {
        prompt = 'tandem model (now ' .. tostring(current) .. ')',
        format_item = function(m)
          return M.format_model(m, current)
        end,
      }, function(choice)
        if choice then
          M.switch_model(choice.id)
        end
      end)
    end)
  end)
end

M.MODES = {
  { id = 'ask', desc = 'ask before every edit and command' },
  { id = 'autoEdit', desc = 'edit files without asking, ask for commands' },
  { id = 'plan', desc = 'read and plan only; propose a plan for approval' },
  { id = 'fullAuto', desc = 'run everything without asking' },
}

--- Set the session's mode; before the first prompt, choose the mode its session starts with.
function M.set_mode(mode, cb)
  server.ensure_server(function()
    if not S.session then
      local known = vim.tbl_contains(vim.tbl_map(function(m)
        return m.id
      end, M.MODES), mode)
      if not known then
        notify(('could not set mode %s: no such mode (invalidMode); the modes are ask, autoEdit, plan and fullAuto.')
          :format(mode), vim.log.levels.ERROR)
        return
      end
      S.next_session.mode = mode
      ui().line('· mode: ' .. mode .. ' (for the session your next prompt starts)', 'Comment')
      if cb then
        cb()
      end
      return
    end
    S.client:request('setMode', { sessionId = S.session.sessionId, mode = mode }, function(err)
      if err then
        notify(('could not set mode %s: %s'):format(mode, rpc.format_error(err)), vim.log.levels.ERROR)
        return
      end
      S.session.mode = mode
      ui().line('· mode: ' .. mode, 'Comment')
      if cb then
        cb()
      end
    end)
  end)
end

function M.pick_mode()
  server.ensure_server(function()
    local _, current = current_choice()
    vim.ui.select(M.MODES, {
      prompt = 'tandem mode (now ' .. tostring(current) .. ')',
      format_item = function(m)
        return (m.id == current and '● ' or '  ') .. m.id .. ' — ' .. m.desc
      end,
    }, function(choice)
      if choice then
        M.set_mode(choice.id)
      end
    end)
  end)
end

--- A session's date for people: today's show the time, older ones the date and time.
---@param ms number? milliseconds since the epoch
---@return string
function M.format_date(ms)
  if type(ms) ~= 'number' then
    return '?'
  end
  local t = math.floor(ms / 1000)
  if os.date('%Y-%m-%d', t) == os.date('%Y-%m-%d') then
    return 'today ' .. os.date('%H:%M', t)
  end
  return os.date('%Y-%m-%d %H:%M', t)
end

--- One line of the session list: its title (the first prompt, or the title the server gives), date and model.
---@param s table a SessionSummary from session/list
---@return string
function M.format_session(s)
  local title = (s.title and s.title ~= '') and s.title or '(no prompt yet)'
  local current = S.session and S.session.sessionId == s.sessionId and '● ' or '  '
  return ('%s%s  ·  %s  ·  %s'):format(current, title, M.format_date(s.updatedAt), s.model or '?')
end

--- The stored sessions of this workspace, newest first; cb(list) or nothing after an error notice.
---@param cb fun(list: table[])
local function list_sessions(cb)
  server.ensure_server(function()
    local caps = (S.info and S.info.capabilities) or {}
    if not caps.sessionStore then
      notify('this tandem server has no session store (capabilities.sessionStore is false), so past sessions '
        .. 'cannot be listed or resumed. A tandem build with the SQLite store enables :Tandem sessions.', vim.log.levels.WARN)
      return
    end
    local cwd = config.cwd()
    -- The store keeps the canonical workspace path (symlinks resolved), so ask with that.
    cwd = vim.uv.fs_realpath(cwd) or cwd
    S.client:request('session/list', { cwd = cwd }, function(err, res)
      if err then
        notify('could not list sessions: ' .. rpc.format_error(err) .. '. :Tandem restart, then try again.', vim.log.levels.ERROR)
        return
      end
      local list = vim.deepcopy(res.sessions or {})
      -- The server sends them newest first; sort anyway (a stable order for equal times keeps its order).
      for i, item in ipairs(list) do
        item._order = i
      end
      table.sort(list, function(a, b)
        if (a.updatedAt or 0) ~= (b.updatedAt or 0) then
          return (a.updatedAt or 0) > (b.updatedAt or 0)
        end
        return a._order < b._order
      end)
      cb(list, cwd)
    end)
  end)
end

--- List the stored sessions of this workspace (title, date, model; newest first) and resume the
--- one picked. It starts the server if needed but never creates a session.
function M.sessions()
  list_sessions(function(list, cwd)
    if #list == 0 then
      notify('no stored sessions for ' .. cwd .. ' yet: your first :Tandem prompt starts one.')
      return
    end
    vim.ui.select(list, {
      prompt = 'resume tandem session (newest first)',
      format_item = M.format_session,
    }, function(choice)
      if choice then
        M.load_session(choice.sessionId)
      end
    end)
  end)
end

--- Resume the most recently used stored session of this workspace (other than the one open).
function M.resume_last()
  list_sessions(function(list, cwd)
    for _, item in ipairs(list) do
      if not (S.session and S.session.sessionId == item.sessionId) then
        notify(('resuming %q (%s)'):format(item.title or item.sessionId, M.format_date(item.updatedAt)))
        M.load_session(item.sessionId)
        return
      end
    end
    notify(('no other stored session for %s to resume: :Tandem prompt starts one.'):format(cwd), vim.log.levels.WARN)
  end)
end

--- Resume a session: fetch the newest page of its history, then each older page its `cursor`
--- names, and draw the whole history once, oldest first. Each page's head (model, mode, state,
--- pending) is current, so the last page fetched sets them. Events of the session that arrive
--- while older pages load are held back and replayed after the history is drawn. If a later
--- page fails (or the server repeats a cursor, or there are more than pages.MAX_PAGES pages),
--- the pages that came are shown and an error says what is missing.
---@param id string the sessionId to resume
---@param opts? { max_pages?: integer, done?: fun() } done runs once the history is shown
function M.load_session(id, opts)
  opts = opts or {}
  if not server_ready() then
    return server.ensure_server(function()
      M.load_session(id, opts)
    end)
  end
  S.load_gen = S.load_gen + 1
  S.loading = nil -- a load still in flight is superseded
  local gen, load_gen = S.gen, S.load_gen
  local acc = pages.new(opts.max_pages)
  local last ---@type table? the newest-in-time result: the last page fetched

  local function current()
    return gen == S.gen and load_gen == S.load_gen
  end

  ---@param problem string? why older history is missing, if it is
  local function finish(problem)
    local held = S.loading and S.loading.events or {}
    S.loading = nil
    S.session = { sessionId = last.sessionId, model = last.model, mode = last.mode, cwd = last.cwd,
      network = last.networkAccess == true }
    S.running = last.state == 'running'
    S.plan = (type(last.plan) == 'table' and #last.plan > 0) and last.plan or nil
    approval().clear()
    local messages = pages.assemble(acc.pages)
    -- The gauge continues from the last answer's usage, which history keeps with the message.
    S.usage = nil
    for i = #messages, 1, -1 do
      if messages[i].role == 'assistant' and type(messages[i].usage) == 'table' then
        S.usage = messages[i].usage
        break
      end
    end
    ui().load_history(vim.tbl_extend('force', last, { messages = messages, plan = S.plan }))
    ui().refresh_bar()
    -- A session the server already runs sends no new mcpStatus events: ask for its servers.
    require('tandem.mcp').refresh(function()
      ui().refresh_bar()
    end)
    if problem then
      ui().line('! ' .. problem, 'ErrorMsg')
      notify(problem, vim.log.levels.ERROR)
    end
    for _, p in ipairs(last.pending or {}) do
      if p.type == 'questionAsked' then
        approval().question(p)
      else
        approval().request(p)
      end
    end
    for _, ev in ipairs(held) do
      on_event(ev)
    end
    require('tandem.turns').refresh()
    require('tandem.slash').prefetch()
    require('tandem.hooks').check()
    if opts.done then
      opts.done()
    end
  end

  ---@param cursor string? nil for the newest page
  local function fetch(cursor)
    S.client:request('session/load', { sessionId = id, cursor = cursor }, function(err, res)
      if not current() then
        return -- superseded by another load, a new session or a restart
      end
      if err then
        if last == nil then
          notify('could not resume the session: ' .. rpc.format_error(err), vim.log.levels.ERROR)
          return
        end
        return finish(('could not load the history before cursor %q: %s; older messages are not shown')
          :format(cursor, rpc.format_error(err)))
      end
      last = res
      S.loading = S.loading or { sessionId = res.sessionId, events = {} }
      local next_cursor, problem = pages.add(acc, res)
      if next_cursor then
        return fetch(next_cursor)
      end
      finish(problem)
    end)
  end
  fetch(nil)
end

--- Allow or forbid the network to the session's shell commands (setNetworkAccess). Before the
--- first prompt the choice is kept for the session that prompt creates. allow = nil toggles.
---@param allow boolean?
function M.set_network(allow)
  server.ensure_server(function()
    if allow == nil then
      local current
      if S.session then
        current = S.session.network
      else
        current = S.next_session.network
      end
      allow = not current
    end
    if not S.session then
      S.next_session.network = allow
      ui().line(('· network %s (for the session your next prompt starts)'):format(allow and 'on' or 'off'), 'Comment')
      return
    end
    S.client:request('setNetworkAccess', { sessionId = S.session.sessionId, allow = allow }, function(err, res)
      if err then
        notify(('could not turn the network %s: %s'):format(allow and 'on' or 'off', rpc.format_error(err)), vim.log.levels.ERROR)
        return
      end
      if S.session then
        S.session.network = res.allow
      end
      notify(res.allow and 'network on: shell commands of this session may use the network'
        or 'network off: shell commands of this session run without network')
      ui().refresh_bar()
    end)
  end)
end

--- The context gauge: tokens of the last request (its input plus its answer, which the next
--- request carries) over the model's context window. nil before the first usage.
---@return { used: integer, window: integer?, model: string }?
function M.gauge()
  local u = S.usage
  if not u then
    return nil
  end
  local model = S.session and S.session.model or u.model
  local info = model_info(model) or model_info(u.model)
  return { used = (u.inputTokens or 0) + (u.outputTokens or 0), window = info and info.contextWindow, model = model }
end

--- The gauge for people: "ctx 12.3k/128k (10%)", or "" before the first usage.
---@return string
function M.gauge_text()
  local g = M.gauge()
  if not g then
    return ''
  end
  if not g.window or g.window <= 0 then
    return ('ctx %s'):format(M.format_tokens(g.used))
  end
  return ('ctx %s/%s (%d%%)'):format(M.format_tokens(g.used), M.format_tokens(g.window),
    math.floor(g.used * 100 / g.window + 0.5))
end

--- The chat window's bar: model, mode, network and the context gauge.
---@return string
function M.winbar()
  local model, mode = current_choice()
  local network
  if S.session then
    network = S.session.network
  else
    network = S.next_session.network
  end
  local parts = { 'tandem', tostring(model or '…'), tostring(mode or '…'), network and 'net on' or 'net off' }
  local gauge = M.gauge_text()
  if gauge ~= '' then
    parts[#parts + 1] = gauge
  end
  local mcp = M.mcp_status()
  if mcp ~= '' then
    parts[#parts + 1] = mcp
  end
  local plan = M.plan_status()
  if plan ~= '' then
    parts[#parts + 1] = plan
  end
  if S.running then
    parts[#parts + 1] = 'running'
  end
  return table.concat(parts, ' · ')
end

--- :Tandem add {file}: attach a file (default: the current buffer's) to the next prompt.
---@param path string?
function M.add_file(path)
  if not path or path == '' then
    path = vim.api.nvim_buf_get_name(0)
    if path == '' or vim.bo.buftype ~= '' then
      notify('this buffer is not a file; name one: :Tandem add {file} (Tab completes).', vim.log.levels.WARN)
      return
    end
  end
  local kept, err = require('tandem.context').add(path, config.cwd())
  if not kept then
    notify('not attached: ' .. err, vim.log.levels.ERROR)
    return
  end
  ui().line('+ ' .. kept .. ' (attached to your next prompt)', 'Special')
  notify(kept .. ' is attached to your next prompt.')
end

function M.retry()
  if not ready() then
    notify('nothing to retry: no session is open. Retry works after a turn ended in a provider error.', vim.log.levels.WARN)
    return
  end
  S.client:request('retry', { sessionId = S.session.sessionId }, function(err)
    if err then
      notify('nothing to retry: ' .. rpc.format_error(err) .. '. Retry works after a turn ended in a provider error.', vim.log.levels.WARN)
    end
  end)
end

--- Leave the current session: the next prompt starts a new one (none is created before it).
function M.new_session()
  S.load_gen = S.load_gen + 1 -- a resume still loading would otherwise switch away afterwards
  S.loading = nil
  approval().clear()
  S.session = nil
  S.running = false
  S.turn_id = nil
  S.usage = nil
  M.clear_plan()
  require('tandem.turns').reset()
  require('tandem.slash').reset()
  require('tandem.hooks').reset()
  require('tandem.mcp').render()
  ui().line('· new session: it starts with your next prompt', 'Comment')
end

--- Answer an approval; decision is once, alwaysTool, alwaysCommand or deny.
function M.approve(request_id, decision, message, edited_content, cb)
  if not ready() then
    notify('the server is not running, so the approval cannot be sent; :Tandem restart.', vim.log.levels.ERROR)
    return
  end
  S.client:request('approve', {
    sessionId = S.session.sessionId,
    requestId = request_id,
    decision = decision,
    message = message,
    editedContent = edited_content,
  }, function(err)
    if err then
      if rpc.error_kind(err) == 'staleApproval' then
        notify('that approval is no longer pending (the turn was stopped or it was already answered).', vim.log.levels.WARN)
      else
        notify('approve failed: ' .. rpc.format_error(err), vim.log.levels.ERROR)
      end
    end
    if cb then
      cb(err)
    end
  end)
end

function M.answer(request_id, answer)
  if not ready() then
    notify('the server is not running, so the answer cannot be sent; :Tandem restart.', vim.log.levels.ERROR)
    return
  end
  S.client:request('answer', { sessionId = S.session.sessionId, requestId = request_id, answer = answer }, function(err)
    if err then
      notify('answer failed: ' .. rpc.format_error(err), vim.log.levels.ERROR)
    end
  end)
end

--- Forget the plan and take its block out of the chat (a new session, a restart).
function M.clear_plan()
  S.plan = nil
  ui().set_plan(nil)
  ui().refresh_bar()
end

--- The model's current plan (update_plan) for statuslines and scripts: a copy of its entries,
--- `{ content, status }` with status `pending`, `in_progress` or `completed`; {} when it has none.
---@return tandem.PlanEntry[]
function M.plan()
  return vim.deepcopy(S.plan or {})
end

--- For statuslines: "plan 2/5" (completed entries / all of them), or "" when there is no plan.
---@return string
function M.plan_status()
  local entries = S.plan or {}
  if #entries == 0 then
    return ''
  end
  return ('plan %d/%d'):format(ui().plan_done(entries), #entries)
end

--- :Tandem plan: the current plan in a notification, one marker per entry ([x] completed,
--- [~] in progress, [ ] pending).
function M.show_plan()
  local entries = S.plan or {}
  if #entries == 0 then
    notify(S.session and 'no plan: the model has not set one in this session (it keeps one with update_plan).'
      or 'no plan: no session is open.')
    return
  end
  local lines = ui().plan_lines(entries)
  notify(('plan (%d/%d):\n%s'):format(ui().plan_done(entries), #entries, table.concat(lines, '\n')))
end

--- A short status string for statuslines.
function M.status()
  if not S.session then
    if server_ready() then
      local model, mode = current_choice()
      return ('tandem: %s · %s · no session yet'):format(tostring(model), tostring(mode))
    end
    return S.client and 'tandem: starting' or ''
  end
  local gauge = M.gauge_text()
  local mcp = M.mcp_status()
  local plan = M.plan_status()
  return ('tandem: %s · %s · net %s%s%s%s%s'):format(S.session.model, S.session.mode, S.session.network and 'on' or 'off',
    gauge ~= '' and (' · ' .. gauge) or '', mcp ~= '' and (' · ' .. mcp) or '', plan ~= '' and (' · ' .. plan) or '',
    S.running and ' · running' or '')
end

--- For statuslines: "MCP 2/3" (the session's MCP servers that are ready / all of them), or ""
--- when no session is open or it has no MCP server.
---@return string
function M.mcp_status()
  return require('tandem.mcp').status_text()
end

--- Open the list of the session's MCP servers (:Tandem mcp).
function M.mcp()
  require('tandem.mcp').open()
end

--- Trust a server of the workspace's .mcp.json (:Tandem mcp trust {server}); cb(err) after the answer.
---@param name string
---@param cb? fun(err?: table)
function M.mcp_trust(name, cb)
  require('tandem.mcp').trust(name, cb)
end

return M
