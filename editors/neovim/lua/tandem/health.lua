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

  local cmd = config.server_cmd()
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

  -- Handshake: initialize then shutdown on a fresh server, NDJSON, bounded by a timeout.
  local init = vim.json.encode({
    jsonrpc = '2.0', id = 1, method = 'initialize',
    params = { protocolVersion = tandem.PROTOCOL_VERSION, clientInfo = { name = 'tandem.nvim-health' } },
  })
  local shutdown = vim.json.encode({ jsonrpc = '2.0', id = 2, method = 'shutdown' })
  local argv = vim.deepcopy(cmd)
  argv[1] = path
  -- The server gets the same extra environment as when the plugin starts it.
  local env, env_err = config.server_env()
  if env_err then
    health.error(env_err)
    return
  end
  local hs, err = run(argv, init .. '\n' .. shutdown .. '\n', 10000, env)
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
end

return M
