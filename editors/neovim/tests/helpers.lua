-- tests/helpers.lua: shared spec plumbing — a mock LLM per test, a fresh plugin against the real tandem binary, and condition waits.
local h = {}

h.root = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h')
h.bin = vim.env.TANDEM_BIN
assert(h.bin and vim.fn.executable(h.bin) == 1, 'TANDEM_BIN must point at a built tandem binary (scripts/test sets it)')
-- The workspace's one mock LLM (crates/mock-llm), built beside the tandem binary.
h.mock_bin = vim.env.TANDEM_MOCK_LLM_BIN or (vim.fn.fnamemodify(h.bin, ':h') .. '/tandem-mock-llm')
assert(vim.fn.executable(h.mock_bin) == 1,
  'TANDEM_MOCK_LLM_BIN must point at a built tandem-mock-llm binary (scripts/test builds it), tried ' .. h.mock_bin)

h.TIMEOUT = tonumber(vim.env.TANDEM_TEST_TIMEOUT or '') or 15000

local ctx = nil -- the current test's resources

--- Wait until pred() is truthy; fail the test with `what` on timeout. Returns pred's value.
function h.wait(pred, what, timeout)
  local value
  local ok = vim.wait(timeout or h.TIMEOUT, function()
    value = pred()
    return value
  end, 10)
  if not ok then
    error(('timed out after %d ms waiting for %s\n--- chat ---\n%s\n--- notifications ---\n%s'):format(
      timeout or h.TIMEOUT, what, h.chat(), table.concat(h.notes_text(), '\n')), 2)
  end
  return value
end

function h.chat()
  local ok, ui = pcall(require, 'tandem.ui')
  return ok and ui.text() or ''
end

function h.chat_has(text)
  return h.chat():find(text, 1, true) ~= nil
end

function h.wait_chat(text, timeout)
  return h.wait(function()
    return h.chat_has(text)
  end, ('chat to contain %q'):format(text), timeout)
end

function h.notes_text()
  return vim.tbl_map(function(n)
    return n.msg
  end, ctx and ctx.notes or {})
end

function h.wait_note(text, timeout)
  return h.wait(function()
    for _, n in ipairs(ctx.notes) do
      if n.msg:find(text, 1, true) then
        return n
      end
    end
  end, ('a notification containing %q'):format(text), timeout)
end

function h.events(type_)
  return vim.tbl_filter(function(e)
    return type_ == nil or e.type == type_
  end, ctx.events)
end

function h.wait_event(type_, pred, timeout)
  return h.wait(function()
    for _, e in ipairs(ctx.events) do
      if e.type == type_ and (pred == nil or pred(e)) then
        return e
      end
    end
  end, 'event ' .. type_, timeout)
end

function h.wait_turn_end(reason, timeout)
  return h.wait_event('turnEnded', function(e)
    return reason == nil or e.reason == reason
  end, timeout)
end

--- The approval float on screen (waits for it).
function h.wait_float(timeout)
  return h.wait(function()
    local v = require('tandem.approval').view()
    return v and vim.api.nvim_win_is_valid(v.win) and v or nil
  end, 'the approval float', timeout)
end

function h.buf_text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
end

--- Type keys as the user would (mappings apply) and process them now.
function h.press(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), 'mx', false)
end

function h.read(path)
  local f = io.open(path, 'r')
  if not f then
    return nil
  end
  local s = f:read('*a')
  f:close()
  return s
end

function h.write(path, text)
  vim.fn.mkdir(vim.fn.fnamemodify(path, ':h'), 'p')
  local f = assert(io.open(path, 'w'))
  f:write(text)
  f:close()
end

--- Request bodies the mock received, decoded, oldest first.
--- Only complete lines count: the mock may be appending one while we read (a long line spans
--- pages, and a reader can see the first before the rest is copied).
function h.requests()
  local out = {}
  local text = ctx and ctx.mock and h.read(ctx.mock.log) or ''
  text = text:match('^(.*\n)') or ''
  for line in text:gmatch('[^\n]+') do
    table.insert(out, vim.json.decode(line))
  end
  return out
end

function h.wait_requests(n)
  return h.wait(function()
    local r = h.requests()
    return #r >= n and r or nil
  end, n .. ' request(s) at the mock')
end

--- All text of one request's messages with `role`, joined (content may be a string or parts).
function h.message_text(req, role)
  local parts = {}
  for _, m in ipairs(req.messages or {}) do
    if role == nil or m.role == role then
      if type(m.content) == 'string' then
        table.insert(parts, m.content)
      elseif type(m.content) == 'table' then
        for _, p in ipairs(m.content) do
          if type(p) == 'table' and p.text then
            table.insert(parts, p.text)
          end
        end
      end
    end
  end
  return table.concat(parts, '\n')
end

--- Start the mock LLM (the tandem-mock-llm binary) with a list of scripted responses; returns { port, log, proc }.
--- Each response is a list of steps (see the JSON form in crates/mock-llm/src/json_script.rs).
function h.start_mock(responses, dir)
  local script = dir .. '/responses.json'
  h.write(script, vim.json.encode(responses))
  local log = dir .. '/requests.jsonl'
  h.write(log, '')
  local mock = { log = log }
  local buffer = ''
  mock.proc = vim.system({ h.mock_bin, '--script', script, '--log', log }, {
    stdout = function(_, data)
      if data then
        buffer = buffer .. data
        local port = buffer:match('^(%d+)\n')
        if port then
          mock.port = tonumber(port)
        end
      end
    end,
    stderr = function(_, data)
      -- Kept for the timeout message: a script the mock refuses is named there.
      if data then
        mock.stderr = (mock.stderr or '') .. data
      end
    end,
  })
  h.wait(function()
    return mock.port or (mock.stderr and mock.stderr:find('tandem-mock-llm: ', 1, true) and error(mock.stderr))
  end, 'the mock LLM to print its port', 10000)
  return mock
end

function h.write_config(dir, port)
  local path = dir .. '/tandem.toml'
  h.write(path, ([[
default_model = "mock"
[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:%d/v1"
[models.mock]
provider = "local"
name = "mock-model"
context_window = 128000
[models.mock-2]
provider = "local"
name = "mock-model-2"
context_window = 128000
]]):format(port))
  return path
end

local function unload()
  for name in pairs(package.loaded) do
    if name == 'tandem' or name:match('^tandem%.') then
      package.loaded[name] = nil
    end
  end
end

--- Close every extra window, tab and buffer left by a test.
local function reset_editor()
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(win).relative ~= '' then
      pcall(vim.api.nvim_win_close, win, true)
    end
  end
  pcall(vim.cmd, 'silent! tabonly!')
  pcall(vim.cmd, 'silent! only!')
  pcall(vim.cmd, 'enew!')
  local cur = vim.api.nvim_get_current_buf()
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if b ~= cur then
      pcall(vim.api.nvim_buf_delete, b, { force = true })
    end
  end
end

function h.teardown()
  if not ctx then
    return
  end
  local t = package.loaded['tandem']
  if t and t.state.client then
    local client = t.state.client
    t.shutdown()
    vim.wait(3000, function()
      return not client:is_running()
    end, 10)
  end
  if ctx.mock and ctx.mock.proc then
    pcall(ctx.mock.proc.kill, ctx.mock.proc, 9)
  end
  vim.notify = ctx.saved.notify
  vim.ui.input = ctx.saved.input
  vim.ui.select = ctx.saved.select
  pcall(vim.api.nvim_del_augroup_by_name, 'tandem.test')
  reset_editor()
  unload()
  vim.cmd.cd(h.root)
  ctx = nil
end

--- A fresh plugin for one test.
--- opts.responses: scripted mock responses (a mock and its config are created when given)
--- opts.setup: extra setup() options (false = do not call setup at all)
function h.fresh(opts)
  opts = opts or {}
  h.teardown()
  unload()
  local dir = vim.fn.tempname()
  vim.fn.mkdir(dir .. '/ws', 'p')
  vim.fn.mkdir(dir .. '/data', 'p')
  ctx = {
    dir = dir,
    ws = dir .. '/ws',
    notes = {},
    events = {},
    inputs = {}, -- answers for vim.ui.input, in order
    saved = { notify = vim.notify, input = vim.ui.input, select = vim.ui.select },
  }
  vim.notify = function(msg, level)
    table.insert(ctx.notes, { msg = tostring(msg), level = level })
  end
  vim.ui.input = function(o, cb)
    ctx.last_input_prompt = o and o.prompt
    cb(table.remove(ctx.inputs, 1))
  end
  vim.ui.select = function(items, o, cb)
    local pick = ctx.select and ctx.select(items, o) or nil
    cb(pick)
  end
  vim.api.nvim_create_autocmd('User', {
    group = vim.api.nvim_create_augroup('tandem.test', { clear = true }),
    pattern = 'TandemEvent',
    callback = function(a)
      table.insert(ctx.events, a.data)
    end,
  })
  if opts.responses then
    ctx.mock = h.start_mock(opts.responses, dir)
    ctx.config = h.write_config(dir, ctx.mock.port)
  end
  vim.cmd.cd(ctx.ws)
  local tandem = require('tandem')
  if opts.setup ~= false then
    tandem.setup(vim.tbl_deep_extend('force', {
      cmd = { h.bin, 'serve' },
      config_file = ctx.config,
      data_dir = dir .. '/data',
    }, opts.setup or {}))
  end
  return ctx, tandem
end

function h.ctx()
  return ctx
end

--- Where screen captures go: test-artifacts/nvim-<version>/ in the plugin's tree (gitignored; CI
--- keeps the files it leaves in the tree, and README.md lists them).
function h.artifacts_dir()
  local v = vim.version()
  local dir = ('%s/test-artifacts/nvim-%d.%d.%d'):format(h.root, v.major, v.minor, v.patch)
  vim.fn.mkdir(dir, 'p')
  return dir
end

--- Keep a screen capture (or any text) as a test artifact; returns its path.
function h.artifact(name, text)
  local path = h.artifacts_dir() .. '/' .. name
  h.write(path, text)
  return path
end

return h
