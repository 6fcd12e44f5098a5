-- tandem.mcp: the session's MCP servers — their list (:Tandem mcp), trust (:Tandem mcp trust), notifications of status changes, the statusline text, and a JSON pretty printer for MCP approvals.
--
-- What the plugin knows comes from `mcpStatus` events and `mcp/status` answers (protocol.md,
-- "MCP servers"). It is kept per session in server.state.mcp and starts empty for each session; the
-- list buffer, when open, is redrawn on every change.
local config = require('tandem.config')
local rpc = require('tandem.rpc')
local server = require('tandem.server')

local M = {}

local S = server.state
local notify = server.notify

local ns = vim.api.nvim_create_namespace('tandem.mcp')

M.BUF_NAME = 'tandem://mcp'

-- cwd .. NUL .. server -> true once the user was told how to trust that workspace server.
local told_untrusted = {}

local list_buf = nil -- the list buffer
local rows = {} -- 1-based row of the list buffer -> server name

--- The MCP state of the open session (nil without one); a new session starts with an empty list.
---@return { sessionId: string, servers: tandem.McpServer[], gen: integer }?
local function current()
  local sid = S.session and S.session.sessionId
  if not sid then
    return nil
  end
  if not S.mcp or S.mcp.sessionId ~= sid then
    S.mcp = { sessionId = sid, servers = {}, gen = 0 }
  end
  return S.mcp
end
M.current = current

local function find(m, name)
  for _, s in ipairs(m.servers) do
    if s.name == name then
      return s
    end
  end
end

--- The servers of the open session, in definition order (a copy).
---@return tandem.McpServer[]
function M.servers()
  local m = current()
  return m and vim.deepcopy(m.servers) or {}
end

--- A tool's own name: `mcp__t__echo` of server `t` is `echo` (the model-facing name otherwise).
---@param server_name string
---@param tool string
---@return string
function M.short_tool(server_name, tool)
  local prefix = 'mcp__' .. server_name:gsub('[^%w_-]', '_') .. '__'
  if tool:sub(1, #prefix) == prefix and #tool > #prefix then
    return tool:sub(#prefix + 1)
  end
  return tool
end

--- Tell the user what a status change asks of them: how to trust an untrusted workspace server
--- (once per server and workspace), and that a server failed or exited (each time it does).
local function tell(s, old)
  if s.status == 'untrusted' then
    local key = ((S.session and S.session.cwd) or '') .. '\0' .. s.name
    if not told_untrusted[key] then
      told_untrusted[key] = true
      local trust_key = (config.options.keymaps.mcp or {}).trust
      notify(('MCP server `%s` comes from the workspace\'s .mcp.json and does not start until you trust it: '
        .. ':Tandem mcp trust %s%s. Check its definition first: it runs outside tandem\'s sandbox.')
        :format(s.name, s.name, trust_key and (' (or ' .. trust_key .. ' on its line in :Tandem mcp)') or ''))
    end
  elseif (s.status == 'failed' or s.status == 'exited') and old ~= s.status then
    notify(('MCP server `%s` %s: %s (:Tandem mcp lists the servers)'):format(s.name, s.status,
      s.error or 'no reason given'), vim.log.levels.WARN)
  end
end

--- Take one server's new status into the list.
---@param m table the session's MCP state
---@param fields table {name, status, source?, tools?, error?}
---@param from_event boolean
local function apply(m, fields, from_event)
  local s = find(m, fields.name)
  local old = s and s.status
  if not s then
    s = { name = fields.name, tools = {} }
    table.insert(m.servers, s)
  end
  s.status = fields.status or s.status
  s.source = fields.source or s.source
  s.tools = type(fields.tools) == 'table' and fields.tools or {}
  s.error = type(fields.error) == 'string' and fields.error or nil
  if from_event then
    m.gen = m.gen + 1
    s.gen = m.gen
  end
  tell(s, old)
end

--- An `mcpStatus` event of the open session (tandem.session.on_event passes it here).
---@param ev tandem.McpStatusEvent
function M.on_event(ev)
  local m = current()
  if not m or type(ev.server) ~= 'string' then
    return
  end
  local known = find(m, ev.server)
  apply(m, { name = ev.server, status = ev.status, tools = ev.tools, error = ev.error }, true)
  if not known or not known.source then
    -- Events do not carry the source (config, session or workspace): mcp/status does.
    M.refresh()
  else
    M.render()
  end
end

--- Ask the server for the whole list (mcp/status) and merge it: a server whose status changed by
--- an event after the request was sent keeps that newer status.
---@param cb? fun(err?: table)
function M.refresh(cb)
  local m = current()
  if not (m and server.ready()) then
    M.render()
    if cb then
      cb()
    end
    return
  end
  if m.fetching then
    -- One request at a time; the callers waiting get the answer of the one in flight.
    if cb then
      table.insert(m.fetching, cb)
    end
    M.render()
    return
  end
  m.fetching = cb and { cb } or {}
  local sent_gen = m.gen
  S.client:request('mcp/status', { sessionId = m.sessionId }, function(err, res)
    local waiting = m.fetching or {}
    m.fetching = nil
    if S.mcp ~= m then
      return -- the session changed meanwhile
    end
    if err then
      notify('could not list the MCP servers (mcp/status): ' .. rpc.format_error(err), vim.log.levels.ERROR)
    else
      local order, n = {}, 0
      for _, fields in ipairs((res and res.servers) or {}) do
        local s = find(m, fields.name)
        if s and (s.gen or 0) > sent_gen then
          s.source = fields.source or s.source -- the event is newer than this answer
        else
          apply(m, fields, false)
        end
        n = n + 1
        order[fields.name] = n
      end
      -- Definition order, as the server lists it; servers it did not list keep their place after.
      table.sort(m.servers, function(a, b)
        return (order[a.name] or math.huge) < (order[b.name] or math.huge)
      end)
    end
    M.render()
    for _, f in ipairs(waiting) do
      f(err)
    end
  end)
end

--- Trust a server of the workspace's .mcp.json (mcp/trust); it then starts (events follow).
---@param name string
---@param cb? fun(err?: table)
function M.trust(name, cb)
  if not name or name == '' then
    local names = M.untrusted()
    notify(('name the server to trust: :Tandem mcp trust {server}%s'):format(#names > 0
      and (' (untrusted: ' .. table.concat(names, ', ') .. ')') or ''), vim.log.levels.WARN)
    return
  end
  local m = current()
  if not (m and server.ready()) then
    notify('no session is open, so there is no MCP server to trust: the servers start with the session your first '
      .. 'prompt starts (:Tandem prompt).', vim.log.levels.WARN)
    return
  end
  S.client:request('mcp/trust', { sessionId = m.sessionId, server = name }, function(err)
    if err then
      notify(('could not trust MCP server `%s`: %s'):format(name, rpc.format_error(err)), vim.log.levels.ERROR)
    else
      notify(('trusted MCP server `%s` for this workspace: it starts now (:Tandem mcp shows its status).'):format(name))
    end
    if cb then
      cb(err)
    end
  end)
end

--- Names of the open session's servers that wait for trust.
---@return string[]
function M.untrusted()
  local names = {}
  for _, s in ipairs(M.servers()) do
    if s.status == 'untrusted' then
      table.insert(names, s.name)
    end
  end
  return names
end

--- For statuslines: "MCP 2/3" (servers ready / servers of the session), "" without any.
---@return string
function M.status_text()
  local m = S.session and S.mcp and S.mcp.sessionId == S.session.sessionId and S.mcp or nil
  if not m or #m.servers == 0 then
    return ''
  end
  local ready = 0
  for _, s in ipairs(m.servers) do
    if s.status == 'ready' then
      ready = ready + 1
    end
  end
  return ('MCP %d/%d'):format(ready, #m.servers)
end

local STATUS_HL = {
  starting = 'DiagnosticInfo',
  ready = 'DiagnosticOk',
  failed = 'DiagnosticError',
  exited = 'DiagnosticError',
  untrusted = 'DiagnosticWarn',
}

--- Lines of the list, highlight marks ({row0, hl}) and the server of each row (1-based).
---@return string[] lines, table marks, table<integer, string> rows
function M.lines()
  local lines, marks, by_row = {}, {}, {}
  local function add(text, hl, name)
    table.insert(lines, text)
    if hl then
      table.insert(marks, { #lines - 1, hl })
    end
    by_row[#lines] = name
  end
  local keys = config.options.keymaps.mcp or {}
  local m = current()
  if not m then
    add('MCP servers', 'Title')
    add('')
    add('No session is open yet: MCP servers start with the session your first prompt starts (:Tandem prompt).')
  else
    local status = M.status_text()
    add(('MCP servers · session %s%s'):format(m.sessionId, status ~= '' and (' · ' .. status .. ' ready') or ''), 'Title')
    add('')
    if #m.servers == 0 then
      add('This session has no MCP servers (the config\'s [mcp_servers.NAME] tables and the workspace\'s .mcp.json add them).')
    end
    for _, s in ipairs(m.servers) do
      local head = ('%s  [%s]  %s'):format(s.name, s.source or '?', s.status or '?')
      if s.status == 'ready' then
        local names = vim.tbl_map(function(t)
          return M.short_tool(s.name, t)
        end, s.tools or {})
        head = head .. ('  · %d tool%s%s'):format(#names, #names == 1 and '' or 's',
          #names > 0 and (': ' .. table.concat(names, ', ')) or '')
      elseif s.status == 'untrusted' and keys.trust then
        head = head .. ('  (%s trusts it)'):format(keys.trust)
      end
      add(head, STATUS_HL[s.status] or 'Normal', s.name)
      if s.error and s.error ~= '' then
        for _, l in ipairs(vim.split(s.error, '\n', { plain = true })) do
          add('    ' .. l, s.status == 'untrusted' and 'Comment' or 'ErrorMsg', s.name)
        end
      end
    end
  end
  add('')
  local help = {}
  for _, k in ipairs({ { 'trust', 'trust the workspace server under the cursor' }, { 'refresh', 'refresh' },
    { 'close', 'close' } }) do
    if keys[k[1]] then
      table.insert(help, ('%s: %s'):format(keys[k[1]], k[2]))
    end
  end
  if #help > 0 then
    add(table.concat(help, ' · '), 'SpecialKey')
  end
  return lines, marks, by_row
end

--- The list buffer, if it exists.
---@return integer?
function M.buffer()
  if list_buf and vim.api.nvim_buf_is_valid(list_buf) then
    return list_buf
  end
end

--- Redraw the list buffer (when it exists) from what the plugin knows.
function M.render()
  local b = M.buffer()
  if not b then
    return
  end
  local lines, marks, by_row = M.lines()
  vim.bo[b].modifiable = true
  vim.api.nvim_buf_set_lines(b, 0, -1, false, lines)
  vim.bo[b].modifiable = false
  vim.bo[b].modified = false
  vim.api.nvim_buf_clear_namespace(b, ns, 0, -1)
  for _, mk in ipairs(marks) do
    vim.api.nvim_buf_set_extmark(b, ns, mk[1], 0, { line_hl_group = mk[2] })
  end
  rows = by_row
end

--- The server named on the cursor's line of the list, if any.
---@return string?
function M.server_at_cursor()
  if vim.api.nvim_get_current_buf() ~= M.buffer() then
    return nil
  end
  return rows[vim.api.nvim_win_get_cursor(0)[1]]
end

--- The trust key of the list: trust the server on the cursor's line (only a workspace server waits for it).
function M.trust_at_cursor()
  local name = M.server_at_cursor()
  if not name then
    notify('no MCP server on this line: put the cursor on an untrusted server\'s line of :Tandem mcp.', vim.log.levels.WARN)
    return
  end
  local s = find(current() or { servers = {} }, name)
  if s and s.status ~= 'untrusted' then
    notify(('MCP server `%s` is %s, not waiting for trust: only an untrusted server of the workspace\'s .mcp.json '
      .. 'needs it.'):format(name, s.status or '?'), vim.log.levels.WARN)
    return
  end
  M.trust(name)
end

local function create_buffer()
  local b = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(b, M.BUF_NAME)
  vim.bo[b].buftype = 'nofile'
  vim.bo[b].bufhidden = 'wipe'
  vim.bo[b].swapfile = false
  vim.bo[b].filetype = 'tandem_mcp'
  local keys = config.options.keymaps.mcp or {}
  local plugs = { trust = 'TandemMcpTrust', refresh = 'TandemMcpRefresh' }
  for action, plug in pairs(plugs) do
    if keys[action] then
      vim.keymap.set('n', keys[action], '<Plug>(' .. plug .. ')', { buffer = b, nowait = true, silent = true, remap = true,
        desc = 'tandem: MCP ' .. action })
    end
  end
  if keys.close then
    vim.keymap.set('n', keys.close, function()
      if #vim.api.nvim_list_wins() > 1 then
        vim.api.nvim_win_close(0, false)
      else
        vim.cmd('enew')
      end
    end, { buffer = b, nowait = true, silent = true, desc = 'tandem: close the MCP list' })
  end
  vim.api.nvim_create_autocmd('BufWipeout', {
    buffer = b,
    once = true,
    callback = function()
      if list_buf == b then
        list_buf, rows = nil, {}
      end
    end,
  })
  list_buf = b
  return b
end

--- :Tandem mcp — open (or focus) the list of the session's MCP servers, then refresh it from the server.
function M.open()
  local b = M.buffer() or create_buffer()
  M.render()
  local win
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.api.nvim_win_get_buf(w) == b then
      win = w
    end
  end
  if win then
    vim.api.nvim_set_current_win(win)
  else
    local height = math.max(5, math.min(vim.api.nvim_buf_line_count(b) + 1, math.floor(vim.o.lines / 2)))
    win = vim.api.nvim_open_win(b, true, { split = 'below', win = -1, height = height })
    vim.wo[win].wrap = true
    vim.wo[win].number = false
    vim.wo[win].relativenumber = false
    vim.wo[win].winfixheight = true
  end
  pcall(vim.api.nvim_win_set_cursor, win, { math.min(3, vim.api.nvim_buf_line_count(b)), 0 })
  M.refresh()
  return b, win
end

--- Completion of `:Tandem mcp …`: the word `trust`, then the untrusted servers' names.
---@param lead string
---@param words string[] the command line's words (`Tandem`, `mcp`, …)
---@return string[]
function M.complete(lead, words)
  local function starting(list)
    return vim.tbl_filter(function(s)
      return s:find(lead, 1, true) == 1
    end, list)
  end
  if #words <= 3 then
    return starting({ 'refresh', 'trust' })
  end
  if #words == 4 and words[3] == 'trust' then
    local names = M.untrusted()
    table.sort(names)
    return starting(names)
  end
  return {}
end

--- JSON for people: objects and arrays over several lines with a 2-space indent, keys sorted (a
--- decoded object keeps no order), empty ones as {} and []. vim.json.encode of Neovim 0.11 has no
--- indent option, hence this.
---@param value any a value from vim.json.decode
---@param indent? string the current indent (internal)
---@return string
function M.pretty_json(value, indent)
  indent = indent or ''
  local inner = indent .. '  '
  if value == vim.NIL or value == nil then
    return 'null'
  end
  local t = type(value)
  if t == 'table' then
    local is_dict = getmetatable(value) == getmetatable(vim.empty_dict())
    if next(value) == nil then
      return is_dict and '{}' or '[]'
    end
    if not is_dict and vim.islist(value) then
      local parts = {}
      for _, v in ipairs(value) do
        table.insert(parts, inner .. M.pretty_json(v, inner))
      end
      return '[\n' .. table.concat(parts, ',\n') .. '\n' .. indent .. ']'
    end
    local keys = vim.tbl_keys(value)
    table.sort(keys, function(a, b)
      return tostring(a) < tostring(b)
    end)
    local parts = {}
    for _, k in ipairs(keys) do
      table.insert(parts, inner .. vim.json.encode(tostring(k)) .. ': ' .. M.pretty_json(value[k], inner))
    end
    return '{\n' .. table.concat(parts, ',\n') .. '\n' .. indent .. '}'
  end
  local ok, s = pcall(vim.json.encode, value)
  return ok and s or vim.inspect(value)
end

return M
