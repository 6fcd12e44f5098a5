-- tandem.server: the server process — start, initialize, exit and restart — and the state every other module shares.
--
-- One server per Neovim. It starts on first use (ensure_server(), asynchronously, so nothing
-- blocks the UI) and is stopped by closing its stdin. Events it sends go to tandem.session.
local config = require('tandem.config')
local rpc = require('tandem.rpc')

local M = {}

M.version = '0.1.0'
M.PROTOCOL_VERSION = 1

---@class tandem.State
local S = {
  client = nil, -- rpc client of the running server
  gen = 0, -- bumped on every (re)start so callbacks of an old server are ignored
  starting = false,
  waiters = {}, -- actions waiting for the server to be initialized
  session_waiters = {}, -- actions waiting for the session the first prompt creates
  creating_session = false,
  next_session = {}, -- { model?, mode? } chosen before the first prompt, for the session it creates
  info = nil, -- initialize result: serverInfo, capabilities, models, defaultModel
  session = nil, -- { sessionId, model, mode, cwd }
  running = false, -- a turn is running
  turn_id = nil,
  usage = nil, -- last usage event
  plan = nil, -- tandem.PlanEntry[]? the model's current plan (update_plan); nil when it has none
  last_exit = nil, -- { code, signal } of the last unexpected exit
  load_gen = 0, -- bumped by every load_session (and anything that supersedes one) so a stale load stops
  loading = nil, -- { sessionId, events } while older pages of a session/load are fetched
  mcp = nil, -- { sessionId, servers, gen } the open session's MCP servers (tandem.mcp)
  hooks = nil, -- { sessionId, result: tandem.HooksListResult } the open session's last hooks/list (tandem.hooks)
  command_undo = nil, -- { turn, text, command } a /undo that answered, until its `rewound` event (tandem.turns)
  attach = nil, -- { url, token_file, token?, error? } where other clients attach, when the server listens (tandem.attach)
}
M.state = S

local function notify(msg, level)
  vim.notify('tandem: ' .. msg, level or vim.log.levels.INFO, { title = 'tandem' })
end
M.notify = notify

local function ui()
  return require('tandem.ui')
end
local function approval()
  return require('tandem.approval')
end

local function fail_waiters()
  S.waiters = {}
  S.session_waiters = {}
  S.creating_session = false
end

--- The server is running and initialized.
local function server_ready()
  return S.client ~= nil and S.client:is_running() and S.info ~= nil
end
M.server_ready = server_ready

--- The server is running and a session is open.
local function ready()
  return server_ready() and S.session ~= nil
end
M.ready = ready

M.fail_waiters = fail_waiters

local function missing_binary_message(bin)
  return ('the server binary `%s` was not found. Build it with `cargo build` in the tandem repository '
    .. "(it lands in target/debug/tandem), then point the plugin at it: require('tandem').setup({ cmd = "
    .. "{ '/path/to/tandem', 'serve' } }) and run :Tandem restart. :checkhealth tandem checks the setup."):format(bin)
end

local function on_exit(gen, code, signal)
  if gen ~= S.gen then
    return -- an old server we replaced on purpose
  end
  local client = S.client
  local during_start = S.info == nil -- it exited before initialize answered
  S.client = nil
  S.running = false
  S.starting = false
  S.loading = nil
  fail_waiters()
  approval().clear()
  if S.stopping then
    S.stopping = false
    return
  end
  S.last_exit = { code = code, signal = signal }
  local tail = client and client.stderr_tail() or {}
  local last = {}
  for i = math.max(1, #tail - 4), #tail do
    table.insert(last, tail[i])
  end
  local detail = #last > 0 and ('\nLast server output:\n' .. table.concat(last, '\n')) or ''
  if during_start then
    -- A server that stops before answering initialize almost always refused its arguments or its
    -- config (it says which on stderr): name that, not the binary.
    local output = table.concat(tail, '\n')
    local next_step
    if config.options.config_file and output:lower():find('config', 1, true) then
      next_step = ('Fix the config file %s (the message above names the problem), then :Tandem restart.')
        :format(vim.fn.expand(config.options.config_file))
    elseif config.attach_listen() and (output:find('--listen', 1, true) or output:find('cannot listen', 1, true)
        or output:find('--allow-origin', 1, true) or output:find('attach token', 1, true)) then
      -- A bad address, a port in use, a tandem without --listen: the attach setting is the cause.
      next_step = ("Fix setup({ attach = { listen = '%s' } }) (the message above names the problem; "
        .. "'ws://127.0.0.1:0' picks a free port), or remove it, then :Tandem restart."):format(config.attach_listen())
    else
      next_step = 'Fix what the message above names (:checkhealth tandem runs the same start-up), then :Tandem restart.'
    end
    notify(('the server stopped while starting (exit code %s): %s\n%s'):format(tostring(code),
      output ~= '' and output or '(it printed nothing on stderr)', next_step), vim.log.levels.ERROR)
    ui().line('! the server stopped while starting; see the notification, fix the cause, then :Tandem restart', 'ErrorMsg')
    return
  end
  notify(
    ('the server exited unexpectedly (code %s, signal %s). Run :Tandem restart to start it again; '
      .. 'the chat buffer is kept.%s'):format(tostring(code), tostring(signal), detail),
    vim.log.levels.ERROR
  )
  ui().line('! server exited (code ' .. tostring(code) .. '); :Tandem restart to start it again', 'ErrorMsg')
end

--- Start the server; run the actions waiting for it once it is initialized. No session is created
--- here: the first prompt creates one (ensure_session).
function M.start()
  if S.starting or server_ready() then
    return
  end
  local cmd = config.server_cmd()
  if vim.fn.executable(cmd[1]) ~= 1 then
    fail_waiters()
    notify(missing_binary_message(cmd[1]), vim.log.levels.ERROR)
    return
  end
  if config.options.config_file and vim.fn.filereadable(vim.fn.expand(config.options.config_file)) ~= 1 then
    fail_waiters()
    notify(
      ('the config file %s cannot be read. Fix the path in setup({ config_file = ... }) or remove it to use the offline demo model, then :Tandem restart.')
        :format(config.options.config_file),
      vim.log.levels.ERROR
    )
    return
  end
  local env, env_err = config.server_env()
  if env_err then
    fail_waiters()
    notify(env_err, vim.log.levels.ERROR)
    return
  end
  S.gen = S.gen + 1
  local gen = S.gen
  S.starting = true
  S.session = nil
  S.loading = nil
  S.info = nil
  S.attach = nil
  local client, err = rpc.start(cmd, {
    framing = config.options.framing,
    env = env,
    cwd = config.cwd(),
    on_notification = function(method, params)
      if gen == S.gen and method == 'session/event' then
        require('tandem.session').on_event(params)
      end
    end,
    on_exit = function(code, signal)
      on_exit(gen, code, signal)
    end,
  })
  if not client then
    S.starting = false
    fail_waiters()
    notify(('could not start `%s`: %s. %s'):format(table.concat(cmd, ' '), err, 'Check the path and permissions, then :Tandem restart.'), vim.log.levels.ERROR)
    return
  end
  S.client = client
  client:request('initialize', {
    protocolVersion = M.PROTOCOL_VERSION,
    clientInfo = { name = 'tandem.nvim', version = M.version },
    capabilities = { approvals = true },
  }, function(ierr, res)
    if gen ~= S.gen then
      return
    end
    if ierr then
      if rpc.error_kind(ierr) == 'serverExited' then
        return -- it exited while starting: on_exit reports why, with its own words from stderr
      end
      S.starting = false
      fail_waiters()
      notify(('the server refused initialize: %s. Is `%s` a tandem binary? :checkhealth tandem shows details.'):format(
        rpc.format_error(ierr), cmd[1]), vim.log.levels.ERROR)
      return
    end
    if res.protocolVersion ~= M.PROTOCOL_VERSION then
      notify(('the server speaks protocol %s, this plugin speaks %d; update the plugin or the server.'):format(
        tostring(res.protocolVersion), M.PROTOCOL_VERSION), vim.log.levels.WARN)
    end
    S.info = res
    require('tandem.attach').on_initialize(res)
    S.starting = false
    local waiting = S.waiters
    S.waiters = {}
    for _, fn in ipairs(waiting) do
      fn()
    end
  end)
end

--- Run fn once the server is running and initialized, starting it if needed.
function M.ensure_server(fn)
  if server_ready() then
    fn()
    return
  end
  table.insert(S.waiters, fn)
  M.start()
end

--- Stop the server (closing stdin, which it treats as shutdown) without reporting a crash.
function M.shutdown()
  if S.client and S.client:is_running() then
    S.stopping = true
    S.client:stop()
  end
end

function M.restart()
  local old = S.client
  -- Bump the generation first: the old server's late events and its exit are then ignored,
  -- so stopping it on purpose is not reported as a crash.
  S.gen = S.gen + 1
  if old and old:is_running() then
    old:stop()
  end
  S.client = nil
  S.session = nil
  S.loading = nil
  S.running = false
  S.starting = false
  S.waiters = {}
  S.session_waiters = {}
  S.creating_session = false
  S.plan = nil -- the next prompt starts a new session, which has no plan
  S.hooks = nil
  S.command_undo = nil
  S.attach = nil
  require('tandem.slash').reset()
  ui().set_plan(nil)
  approval().clear()
  ui().line('· restarting the server', 'Comment')
  M.ensure_server(function()
    notify('server restarted; your next prompt starts a new session (:Tandem resume continues the last one)')
  end)
end

return M
