-- tandem.rpc: JSON-RPC 2.0 client for `tandem serve`, over vim.system (NDJSON) or vim.lsp.rpc (Content-Length).
--
-- Both transports expose the same small interface so the rest of the plugin does not care:
--   client:request(method, params, cb(err, result)), client:notify(method, params),
--   client:stop(), client:is_running(), client.stderr_tail().
-- Every callback into the plugin runs on the main loop (vim.schedule), never in a luv callback,
-- so handlers may touch buffers and windows; nothing here ever waits, so the UI never blocks.
local M = {}

local STDERR_KEEP = 40 -- lines of server stderr kept for error messages

local function decode(line)
  -- luanil: JSON null becomes Lua nil, so `oldText: null` (a new file) reads as absent.
  return pcall(vim.json.decode, line, { luanil = { object = true, array = true } })
end

local function push_tail(tail, text)
  for line in (text or ''):gmatch('[^\n]+') do
    table.insert(tail, line)
    if #tail > STDERR_KEEP then
      table.remove(tail, 1)
    end
  end
end

---@class tandem.RpcOpts
---@field framing? 'ndjson'|'content-length'
---@field env? table<string,string>
---@field cwd? string
---@field on_notification fun(method: string, params: table)
---@field on_exit fun(code: integer, signal: integer)

--- NDJSON transport: one JSON object per line on stdin/stdout of a vim.system child.
local function start_ndjson(cmd, opts)
  local self = { framing = 'ndjson' }
  local next_id = 0
  local pending = {} ---@type table<integer, fun(err: table?, result: any)>
  local buffer = ''
  local tail = {}
  local exited = false

  local function dispatch(msg)
    if type(msg) ~= 'table' then
      return
    end
    if msg.method and msg.id == nil then
      opts.on_notification(msg.method, msg.params or {})
    elseif msg.method and msg.id ~= nil then
      -- The v1 protocol has no server-to-client requests; answer so the server never waits.
      self.send({
        jsonrpc = '2.0',
        id = msg.id,
        error = { code = -32601, message = 'tandem.nvim does not handle ' .. msg.method },
      })
    elseif msg.id ~= nil then
      local cb = pending[msg.id]
      pending[msg.id] = nil
      if cb then
        cb(msg.error, msg.result)
      end
    end
  end

  local function on_stdout(err, data)
    if err or not data then
      return
    end
    buffer = buffer .. data
    local lines = {}
    while true do
      local nl = buffer:find('\n', 1, true)
      if not nl then
        break
      end
      local line = buffer:sub(1, nl - 1)
      buffer = buffer:sub(nl + 1)
      if line:match('%S') then
        table.insert(lines, line)
      end
    end
    if #lines > 0 then
      -- One scheduled batch per chunk keeps the server's order (vim.schedule is FIFO).
      vim.schedule(function()
        for _, line in ipairs(lines) do
          local ok, msg = decode(line)
          if ok then
            dispatch(msg)
          else
            push_tail(tail, 'unparsable line from server: ' .. line:sub(1, 200))
          end
        end
      end)
    end
  end

  local ok, proc = pcall(vim.system, cmd, {
    stdin = true,
    stdout = on_stdout,
    stderr = function(_, data)
      push_tail(tail, data)
    end,
    env = opts.env,
    cwd = opts.cwd,
    text = true,
  }, function(obj)
    exited = true
    vim.schedule(function()
      -- Fail every request still waiting, so no caller hangs on a dead server.
      local waiting = pending
      pending = {}
      for _, cb in pairs(waiting) do
        cb({ code = -32000, message = 'tandem server exited', data = { kind = 'serverExited' } }, nil)
      end
      opts.on_exit(obj.code, obj.signal)
    end)
  end)
  if not ok then
    return nil, tostring(proc)
  end
  self.pid = proc.pid

  function self.send(msg)
    if exited then
      return false
    end
    local ok_write = pcall(proc.write, proc, vim.json.encode(msg) .. '\n')
    return ok_write
  end

  function self:request(method, params, cb)
    next_id = next_id + 1
    local id = next_id
    pending[id] = cb or function() end
    local msg = { jsonrpc = '2.0', id = id, method = method }
    if params ~= nil then
      msg.params = params
    end
    if not self.send(msg) then
      pending[id] = nil
      vim.schedule(function()
        if cb then
          cb({ code = -32000, message = 'tandem server is not running', data = { kind = 'serverExited' } })
        end
      end)
    end
    return id
  end

  function self:notify(method, params)
    return self.send({ jsonrpc = '2.0', method = method, params = params })
  end

  function self:is_running()
    return not exited
  end

  function self:stop()
    if exited then
      return
    end
    -- Close stdin first: the server treats EOF as shutdown; kill as the fallback.
    pcall(proc.write, proc, nil)
    vim.defer_fn(function()
      if not exited then
        pcall(proc.kill, proc, 15)
      end
    end, 1000)
  end

  function self.stderr_tail()
    return tail
  end

  return self
end

--- Content-Length transport: Neovim's own LSP JSON-RPC client, which frames with headers.
local function start_lsp(cmd, opts)
  local tail = {}
  local exited = false
  local ok, client = pcall(vim.lsp.rpc.start, cmd, {
    notification = function(method, params)
      opts.on_notification(method, params or {})
    end,
    server_request = function(method)
      return nil, vim.lsp.rpc.rpc_response_error(-32601, 'tandem.nvim does not handle ' .. method)
    end,
    on_error = function(code, err)
      push_tail(tail, ('rpc error %s: %s'):format(tostring(code), vim.inspect(err)))
    end,
    on_exit = function(code, signal)
      exited = true
      vim.schedule(function()
        opts.on_exit(code, signal)
      end)
    end,
  }, { env = opts.env, cwd = opts.cwd })
  if not ok or not client then
    return nil, tostring(client)
  end
  local self = { framing = 'content-length' }
  function self:request(method, params, cb)
    local sent, id = client.request(method, params, function(err, result)
      if cb then
        cb(err, result)
      end
    end)
    if not sent and cb then
      vim.schedule(function()
        cb({ code = -32000, message = 'tandem server is not running', data = { kind = 'serverExited' } })
      end)
    end
    return id
  end
  function self:notify(method, params)
    return client.notify(method, params)
  end
  function self:is_running()
    return not exited and not client.is_closing()
  end
  function self:stop()
    if not exited then
      client.terminate()
    end
  end
  function self.stderr_tail()
    return tail
  end
  return self
end

--- Start the server. Returns a client, or nil and a message saying why it could not start.
---@param cmd string[]
---@param opts tandem.RpcOpts
function M.start(cmd, opts)
  if opts.framing == 'content-length' then
    return start_lsp(cmd, opts)
  end
  return start_ndjson(cmd, opts)
end

--- Format an error object from the server for a person: message plus the kind.
function M.format_error(err)
  if type(err) ~= 'table' then
    return tostring(err)
  end
  local kind = type(err.data) == 'table' and err.data.kind or nil
  if kind then
    return ('%s (%s)'):format(err.message or 'error', kind)
  end
  return err.message or vim.inspect(err)
end

--- The `data.kind` of an error object, if any.
function M.error_kind(err)
  return type(err) == 'table' and type(err.data) == 'table' and err.data.kind or nil
end

return M
