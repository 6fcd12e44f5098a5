-- tandem.health: `:checkhealth tandem` — binary found, its version, config readable, and a real protocol handshake.
local M = {}

local function run(cmd, stdin, timeout, env)
  local ok, proc = pcall(vim.system, cmd, { stdin = stdin, text = true, env = env })
  if not ok then
    return nil, tostring(proc)
  end
  local res = proc:wait(timeout)
  return res
end

function M.check()
  local health = vim.health
  local config = require('tandem.config')
  local tandem = require('tandem')
  health.start('tandem')

  if vim.fn.has('nvim-0.11') == 1 then
    health.ok('Neovim ' .. tostring(vim.version()))
  else
    health.error('Neovim 0.11 or newer is required (the plugin is tested on 0.11.4 only); upgrade Neovim')
  end

  -- Without the --listen flags: a throwaway server listening would write a new token over the
  -- running server's (DATA_DIR/attach-token), so clients holding the right one would be refused.
  local cmd = config.server_cmd({ attach = false })
  local bin = cmd[1]
  local path = vim.fn.exepath(bin)
  if path == '' then
    health.error(('server binary `%s` not found'):format(bin), {
      'Build it: `cargo build` in the tandem repository (target/debug/tandem)',
      "Then: require('tandem').setup({ cmd = { '/path/to/tandem', 'serve' } })",
    })
    return
  end
  health.ok('server binary: ' .. path)

  local res = run({ path, '--version' }, nil, 5000)
  if res and res.code == 0 then
    health.ok('version: ' .. vim.trim(res.stdout or ''))
  else
    health.warn(('`%s --version` failed: %s'):format(path, res and vim.trim(res.stderr or '') or 'did not run'))
  end

  local cf = config.options.config_file
  if cf then
    local file = vim.fn.expand(cf)
    if vim.fn.filereadable(file) == 1 then
      health.ok('config file readable: ' .. file)
    else
      health.error('config file cannot be read: ' .. file, { 'Fix setup({ config_file = ... }) or remove it to use the offline demo model' })
    end
  else
    health.info('no config_file set: the server uses TANDEM_CONFIG or its built-in offline `scripted` model')
  end
  require('tandem.attach').check_health(health)

  -- Handshake: initialize then shutdown on a fresh server, NDJSON, bounded by a timeout.
  local init = vim.json.encode({
    jsonrpc = '2.0', id = 1, method = 'initialize',
    params = { protocolVersion = tandem.PROTOCOL_VERSION, clientInfo = { name = 'tandem.nvim-health' } },
  })
  -- A session id no store holds: a server with checkpoints answers unknownSession, an older one
  -- methodNotFound.
  local checkpoints = vim.json.encode({ jsonrpc = '2.0', id = 3, method = 'session/checkpoints',
    params = { sessionId = 's_checkhealth' } })
  -- The same for slash commands and hooks (issue 27).
  local commands_list = vim.json.encode({ jsonrpc = '2.0', id = 4, method = 'commands/list',
    params = { sessionId = 's_checkhealth' } })
  local hooks_list = vim.json.encode({ jsonrpc = '2.0', id = 5, method = 'hooks/list',
    params = { sessionId = 's_checkhealth' } })
  local shutdown = vim.json.encode({ jsonrpc = '2.0', id = 2, method = 'shutdown' })
  local argv = vim.deepcopy(cmd)
  argv[1] = path
  -- The server gets the same extra environment as when the plugin starts it.
  local env, env_err = config.server_env()
  if env_err then
    health.error(env_err)
    return
  end
  local hs, err = run(argv, table.concat({ init, checkpoints, commands_list, hooks_list, shutdown, '' }, '\n'), 10000, env)
  if not hs then
    health.error('could not run the server for a handshake: ' .. tostring(err))
    return
  end
  local first = (hs.stdout or ''):match('[^\n]+')
  local ok, msg = pcall(vim.json.decode, first or '', { luanil = { object = true, array = true } })
  if not ok or type(msg) ~= 'table' or not msg.result then
    local stderr = vim.trim(hs.stderr or '')
    if hs.code ~= 0 and cf and stderr:lower():find('config', 1, true) then
      -- It refused its config before answering: that is the cause, not the binary or the protocol.
      health.error(('the server refused the config file %s (exit %s): %s'):format(vim.fn.expand(cf), tostring(hs.code),
        stderr:sub(1, 600)), { 'Fix the config file where the message above says, then :Tandem restart' })
      return
    end
    health.error('protocol handshake failed (exit ' .. tostring(hs.code) .. ')', {
      'server stdout: ' .. (first or '(nothing)'),
      'server stderr: ' .. vim.trim(hs.stderr or ''):sub(1, 400),
    })
    return
  end
  local r = msg.result
  if r.protocolVersion == tandem.PROTOCOL_VERSION then
    health.ok(('protocol handshake: %s %s, protocol %d'):format(r.serverInfo and r.serverInfo.name or '?',
      r.serverInfo and r.serverInfo.version or '?', r.protocolVersion))
  else
    health.error(('server speaks protocol %s, the plugin speaks %d'):format(tostring(r.protocolVersion), tandem.PROTOCOL_VERSION))
  end
  local ids = vim.tbl_map(function(m)
    return m.id
  end, r.models or {})
  health.info(('models: %s (default %s)'):format(table.concat(ids, ', '), tostring(r.defaultModel)))
  local caps = r.capabilities or {}
  if caps.sessionStore then
    health.ok('session store available: :Tandem sessions can resume sessions')
  else
    health.info('no session store in this server build: :Tandem sessions is unavailable')
  end
  M.check_checkpoints(health, hs.stdout or '')
  M.check_slash_and_hooks(health, hs.stdout or '')
  M.check_mcp(health)
end

--- The answer of handshake request `id`, if the server gave one before it shut down.
local function answer(stdout, id)
  for line in stdout:gmatch('[^\n]+') do
    local ok, msg = pcall(vim.json.decode, line, { luanil = { object = true, array = true } })
    if ok and type(msg) == 'table' and msg.id == id then
      return msg
    end
  end
end

--- Slash commands and hooks: whether the server knows commands/list (id 4) and hooks/list (id 5),
--- and the open session's hooks as the plugin last heard them (project hooks trusted or not).
function M.check_slash_and_hooks(health, stdout)
  for _, q in ipairs({
    { id = 4, what = 'slash commands', ok = 'slash commands: `:Tandem prompt /` completes them (commands/list)' },
    { id = 5, what = 'hooks', ok = 'hooks: the server runs them and lists them (hooks/list, :Tandem hooks)' },
  }) do
    local msg = answer(stdout, q.id)
    if not msg then
      health.info(('%s: the server did not answer before it shut down, so it is unknown whether it has them'):format(q.what))
    elseif msg.error and msg.error.code == -32601 then
      health.warn(('this server has no %s (%s is not a method it knows)'):format(q.what,
        q.id == 4 and 'commands/list' or 'hooks/list'), { 'Update tandem' })
    else
      health.ok(q.ok)
    end
  end
  local res = require('tandem.hooks').current()
  if not res then
    health.info('hooks of a session: none open (a session lists its hooks when it starts; :Tandem hooks)')
    return
  end
  local project = #require('tandem.hooks').project_hooks(res)
  local line = ('hooks of this session: %d (%d from the workspace)'):format(#res.hooks, project)
  if #res.projectFiles > 0 and res.trusted == false then
    health.warn(line .. ('; the project hook files %s are not trusted, so their hooks do not run'):format(
      table.concat(res.projectFiles, ', ')), { ':Tandem hooks lists their commands; :Tandem hooks trust runs them '
      .. '(outside the sandbox)' })
  elseif #res.projectFiles > 0 then
    health.ok(line .. ('; project hook files %s trusted'):format(table.concat(res.projectFiles, ', ')))
  else
    health.ok(line)
  end
end

--- Checkpoints (:Tandem diff, undo, edit, fork): whether the server answered session/checkpoints
--- (id 3 of the handshake) as a method it knows.
function M.check_checkpoints(health, stdout)
  for line in stdout:gmatch('[^\n]+') do
    local ok, msg = pcall(vim.json.decode, line, { luanil = { object = true, array = true } })
    if ok and type(msg) == 'table' and msg.id == 3 then
      if msg.error and msg.error.code == -32601 then
        health.warn('this server has no checkpoints (session/checkpoints is not a method it knows): :Tandem diff, '
          .. 'undo, edit and fork will fail', { 'Update tandem' })
      else
        health.ok('checkpoints: :Tandem diff, undo, edit and fork are available')
      end
      return
    end
  end
  health.info('checkpoints: the server did not answer session/checkpoints before it shut down, so it is unknown '
    .. 'whether :Tandem diff, undo, edit and fork work')
end

--- MCP servers: the open session's, as the plugin knows them; else those the config file and the
--- workspace's .mcp.json declare (they start with the session the first prompt starts).
function M.check_mcp(health)
  local mcp = require('tandem.mcp')
  local servers = mcp.servers()
  if #servers > 0 then
    for _, s in ipairs(servers) do
      local line = ('MCP server `%s` [%s]: %s'):format(s.name, s.source or '?', s.status or '?')
      if s.status == 'ready' then
        health.ok(('%s, %d tool%s'):format(line, #(s.tools or {}), #(s.tools or {}) == 1 and '' or 's'))
      elseif s.status == 'untrusted' then
        health.warn(line, { ':Tandem mcp trust ' .. s.name .. ' starts it (check its definition in .mcp.json first)' })
      elseif s.status == 'failed' or s.status == 'exited' then
        health.error(line .. ': ' .. (s.error or ''), { ':Tandem mcp shows the error; fix the definition, then :Tandem new' })
      else
        health.info(line)
      end
    end
    return
  end
  local config = require('tandem.config')
  local names = {}
  local cf = config.options.config_file and vim.fn.expand(config.options.config_file)
  if cf and vim.fn.filereadable(cf) == 1 then
    for _, l in ipairs(vim.fn.readfile(cf)) do
      local name = l:match('^%s*%[mcp_servers%.([^%]]+)%]')
      if name then
        table.insert(names, name)
      end
    end
  end
  local workspace = {}
  local ok_cwd, cwd = pcall(config.cwd)
  local file = ok_cwd and cwd and (cwd .. '/.mcp.json')
  if file and vim.fn.filereadable(file) == 1 then
    local ok, decoded = pcall(vim.json.decode, table.concat(vim.fn.readfile(file), '\n'))
    if ok and type(decoded) == 'table' and type(decoded.mcpServers) == 'table' then
      workspace = vim.tbl_keys(decoded.mcpServers)
      table.sort(workspace)
    else
      health.warn(file .. ' is not a JSON object with `mcpServers`: tandem will not use it')
    end
  end
  if #names == 0 and #workspace == 0 then
    health.info('MCP servers: none declared (the config\'s [mcp_servers.NAME] tables and the workspace\'s .mcp.json add them)')
    return
  end
  if #names > 0 then
    health.info('MCP servers of the config file: ' .. table.concat(names, ', ') .. ' (they start with each session; '
      .. ':Tandem mcp shows their status)')
  end
  if #workspace > 0 then
    health.info('MCP servers of ' .. file .. ': ' .. table.concat(workspace, ', ') .. ' (each starts once you trust it: '
      .. ':Tandem mcp trust NAME)')
  end
end

return M
