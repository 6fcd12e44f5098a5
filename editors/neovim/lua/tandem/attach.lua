-- tandem.attach: other clients on this Neovim's server — the token read at start, :Tandem share (what a second client needs, offered for yanking) and the health line.
--
-- With setup({ attach = { listen = 'ws://127.0.0.1:0' } }) the server is started with
-- `--listen stdio --listen ws://…` (tandem.config.server_cmd): it serves this Neovim on stdio
-- and accepts other clients over WebSocket (protocol.md, "WebSocket (`--listen`)"). Its
-- `initialize` result then has `capabilities.attach = { url, tokenFile }`; the token file is read
-- right after (on_initialize), while it surely is this server's: another tandem started with
-- --listen on the same data directory writes its own token over it. The token is a secret: it
-- lets whoever has it prompt, approve edits and commands in every session of this server.
local config = require('tandem.config')
local server = require('tandem.server')

local M = {}

local S = server.state
local notify = server.notify

---@class tandem.ShareInfo What a second client needs to attach.
---@field url string the WebSocket address (`ws://127.0.0.1:PORT`)
---@field token string the token, sent as `Authorization: Bearer TOKEN`
---@field url_with_token string `URL/?token=TOKEN`, for clients that cannot set headers (browsers)
---@field token_file string where the server wrote the token (mode 0600)
---@field session_id? string the open session, for `session/attach`; nil before the first prompt
---@field token_changed? boolean the token file now holds another token than at start (another server wrote it)

--- Read a token file: its first line, trimmed; nil and the reason when it cannot be read or is empty.
---@param path string
---@return string? token, string? err
function M.read_token(path)
  local ok, lines = pcall(vim.fn.readfile, path, '', 1)
  if not ok or type(lines) ~= 'table' then
    return nil, ('cannot read the attach token file %s: %s'):format(path, tostring(lines))
  end
  local token = vim.trim(lines[1] or '')
  if token == '' then
    return nil, ('the attach token file %s is empty or missing'):format(path)
  end
  return token, nil
end

--- After `initialize`: keep the server's attach address and read its token now (see the top).
---@param res tandem.InitializeResult
function M.on_initialize(res)
  S.attach = nil
  local caps = type(res) == 'table' and res.capabilities or nil
  local a = type(caps) == 'table' and caps.attach or nil
  if type(a) ~= 'table' or type(a.url) ~= 'string' then
    return
  end
  local token, err = M.read_token(a.tokenFile or '')
  S.attach = { url = a.url, token_file = a.tokenFile, token = token, error = err }
end

--- `URL/?token=TOKEN` (one slash between, whatever the URL ends with).
---@param url string
---@param token string
---@return string
function M.url_with_token(url, token)
  return url:gsub('/+$', '') .. '/?token=' .. token
end

--- How to turn attaching on, for the notifications.
local HOW_TO = "setup({ attach = { listen = 'ws://127.0.0.1:0' } }) (0 picks a free port; keep it on loopback), "
  .. 'then :Tandem restart'

--- What a second client needs, from the running server; nil and a message with the next step when
--- the server does not listen (or is not running, or its token cannot be read).
---@return tandem.ShareInfo? info, string? err
function M.info()
  if not server.server_ready() then
    if config.attach_listen() then
      return nil, 'the server is not running yet; :Tandem share starts it'
    end
    return nil, 'the server does not listen for other clients (attach.listen is not set). To let another editor, '
      .. 'a browser page or a phone attach to your sessions: ' .. HOW_TO .. ', then :Tandem share.'
  end
  local a = S.attach
  if not a then
    if config.attach_listen() then
      return nil, ('attach.listen is %s, but the running server was started without it (or this tandem does not '
        .. 'report capabilities.attach); :Tandem restart starts it listening, then :Tandem share.')
        :format(config.attach_listen())
    end
    return nil, 'the server does not listen for other clients (attach.listen is not set). To let another editor, '
      .. 'a browser page or a phone attach to your sessions: ' .. HOW_TO .. ', then :Tandem share.'
  end
  if not a.token then
    return nil, (a.error or 'the attach token could not be read') .. '; :Tandem restart writes a new one.'
  end
  local now = M.read_token(a.token_file)
  return {
    url = a.url,
    token = a.token,
    url_with_token = M.url_with_token(a.url, a.token),
    token_file = a.token_file,
    session_id = S.session and S.session.sessionId or nil,
    token_changed = now ~= a.token,
  }, nil
end

--- The register a yank goes to: `+` (the system clipboard) when Neovim has one, else `"`.
---@return string
function M.register()
  return vim.fn.has('clipboard') == 1 and '+' or '"'
end

--- Put `value` in the clipboard register (the unnamed one without a clipboard); returns the register used.
---@param value string
---@return string
function M.yank(value)
  local reg = M.register()
  if reg == '+' and pcall(vim.fn.setreg, '+', value) then
    return '+'
  end
  vim.fn.setreg('"', value)
  return '"'
end

--- A secret shortened for the screen (the whole value is what gets yanked).
local function masked(token)
  return token:sub(1, 6) .. '…'
end

--- The choices of :Tandem share: { label, value, shown } each.
---@param info tandem.ShareInfo
---@return { label: string, value: string, shown: string }[]
function M.items(info)
  local items = {
    { label = 'URL', value = info.url, shown = info.url },
    { label = 'URL with token (browsers)', value = info.url_with_token,
      shown = M.url_with_token(info.url, masked(info.token)) },
    { label = 'token (Authorization: Bearer)', value = info.token, shown = masked(info.token) },
  }
  if info.session_id then
    table.insert(items, { label = 'session id (session/attach)', value = info.session_id, shown = info.session_id })
  end
  return items
end

local WARNING = 'The token lets anyone who has it drive every session of this server: prompt, and approve edits '
  .. 'and shell commands. Share it only with yourself or people you trust; it changes at every server start.'

--- The question of :Tandem share (what a client does with each item, the warning).
---@param info tandem.ShareInfo
---@return string
function M.prompt(info)
  local lines = {
    ('Another client attaches to %s with the token (header `Authorization: Bearer TOKEN`, or the URL with '
      .. '?token=), then sends initialize and session/attach {sessionId}.'):format(info.url),
    info.session_id and ('Open session: %s.'):format(info.session_id)
      or 'No session is open yet: your first prompt starts one (:Tandem share again then shows its id).',
    WARNING,
  }
  if info.token_changed then
    table.insert(lines, ('The token file %s now holds another token (another tandem started with --listen on the '
      .. 'same data directory?); the token offered is the one this server wrote.'):format(info.token_file))
  end
  table.insert(lines, ('Copy which into register %s?'):format(M.register()))
  return table.concat(lines, '\n')
end

--- Offer the items of `info` (vim.ui.select); the chosen one is yanked. cb(item?, register?) after.
---@param info tandem.ShareInfo
---@param cb? fun(item: table?, reg: string?)
function M.offer(info, cb)
  cb = cb or function() end
  vim.ui.select(M.items(info), {
    prompt = M.prompt(info),
    kind = 'tandem.share',
    format_item = function(item)
      return ('%s: %s'):format(item.label, item.shown)
    end,
  }, function(item)
    if not item then
      return cb(nil, nil)
    end
    local reg = M.yank(item.value)
    notify(('copied the %s into register %s.%s'):format(item.label, reg,
      item.value:find(info.token, 1, true) and (' ' .. WARNING) or ''),
      item.value:find(info.token, 1, true) and vim.log.levels.WARN or vim.log.levels.INFO)
    cb(item, reg)
  end)
end

--- :Tandem share: what a second client needs (URL, URL with ?token=, token, session id), offered
--- for yanking; without attach.listen, how to turn it on. Starts the server when it is configured
--- to listen and not running yet. cb(info?, err?) once shown (or refused).
---@param cb? fun(info: tandem.ShareInfo?, err: string?)
function M.share(cb)
  cb = cb or function() end
  if not server.server_ready() and config.attach_listen() then
    return server.ensure_server(function()
      M.share(cb)
    end)
  end
  local info, err = M.info()
  if not info then
    notify(err, vim.log.levels.WARN)
    return cb(nil, err)
  end
  M.offer(info)
  cb(info, nil)
end

--- The health line: whether attaching is configured and, with the server running, its URL.
---@param health table vim.health (or a stand-in with ok/info/warn/error)
function M.check_health(health)
  local listen = config.attach_listen()
  local origins = (config.options.attach or {}).allow_origins or {}
  local running = server.server_ready()
  local a = S.attach
  if running and a then
    local origin_note = #origins > 0 and (', browser origins ' .. table.concat(origins, ', ')) or ''
    if a.token then
      health.ok(('attach: the server listens on %s%s (:Tandem share shows the token and session)'):format(a.url,
        origin_note))
    else
      health.warn(('attach: the server listens on %s but its token could not be read: %s'):format(a.url,
        tostring(a.error)), { ':Tandem restart writes a new token' })
    end
  elseif running and listen then
    health.warn(('attach: attach.listen is %s, but the running server does not listen'):format(listen),
      { ':Tandem restart starts it with --listen' })
  elseif listen then
    health.ok(('attach: configured (--listen stdio --listen %s%s); the server listens once it starts'):format(listen,
      #origins > 0 and (' --allow-origin ' .. table.concat(origins, ' --allow-origin ')) or ''))
  elseif #origins > 0 then
    health.warn('attach: allow_origins is set but attach.listen is not, so nobody can attach',
      { "setup({ attach = { listen = 'ws://127.0.0.1:0' } }) to listen" })
  else
    health.info("attach: off (setup({ attach = { listen = 'ws://127.0.0.1:0' } }) lets other clients attach; "
      .. ':Tandem share)')
  end
end

return M
