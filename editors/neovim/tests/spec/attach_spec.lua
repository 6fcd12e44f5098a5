-- tests/spec/attach_spec.lua: setup({ attach }) against the real server — the --listen argv, :Tandem share (URL, URL with ?token=, token, session id, the yank), a second client attaching with what it showed (a WebSocket client written here on vim.uv), the health line, and the argv without attach.
local h = require('helpers')
local bit = require('bit')

--- The running server's real argv, from /proc (the ndjson client knows its pid).
local function server_argv()
  local pid = require('tandem').state.client.pid
  local raw = assert(h.read(('/proc/%d/cmdline'):format(pid)), 'no /proc entry for the server')
  return vim.split(raw:gsub('%z$', ''), '\0', { plain = true })
end

--- Whether `list` holds `seq` as consecutive items.
local function has_run(list, seq)
  for i = 1, #list - #seq + 1 do
    if vim.deep_equal(vim.list_slice(list, i, i + #seq - 1), seq) then
      return true
    end
  end
  return false
end

--- Start the server (as the first command needing it would) and wait for initialize.
local function start_server()
  local ready = false
  require('tandem').ensure_server(function()
    ready = true
  end)
  h.wait(function()
    return ready
  end, 'the server to answer initialize')
end

--- A minimal WebSocket client (RFC 6455, text frames, client frames masked) on vim.uv, so the
--- spec attaches as a second client would, with nothing installed.
local WS = {}
WS.__index = WS

--- Connect to ws://127.0.0.1:PORT/PATH with extra header lines; waits for the handshake answer.
function WS.connect(url, path, headers)
  local port = tonumber(url:match('^ws://127%.0%.0%.1:(%d+)$'))
  assert(port, 'a loopback ws:// URL with a port: ' .. tostring(url))
  local c = setmetatable({ buf = '', msgs = {}, closed = false }, WS)
  c.tcp = vim.uv.new_tcp()
  c.tcp:connect('127.0.0.1', port, function(err)
    if err then
      c.err = err
      return
    end
    c.tcp:read_start(function(rerr, data)
      if rerr or not data then
        c.closed = true
        return
      end
      c.buf = c.buf .. data
    end)
    local req = { 'GET ' .. path .. ' HTTP/1.1', ('Host: 127.0.0.1:%d'):format(port), 'Upgrade: websocket',
      'Connection: Upgrade', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13' }
    vim.list_extend(req, headers or {})
    c.tcp:write(table.concat(req, '\r\n') .. '\r\n\r\n')
  end)
  h.wait(function()
    return c.err or c.closed or c.buf:find('\r\n\r\n', 1, true)
  end, 'the WebSocket handshake answer')
  assert(not c.err, tostring(c.err))
  local head_end = c.buf:find('\r\n\r\n', 1, true)
  c.status = tonumber(c.buf:match('^HTTP/1%.1 (%d+)'))
  c.head = head_end and c.buf:sub(1, head_end) or c.buf
  c.buf = head_end and c.buf:sub(head_end + 4) or ''
  return c
end

function WS:send(msg)
  local text = vim.json.encode(vim.tbl_extend('force', { jsonrpc = '2.0' }, msg))
  local len = #text
  local header
  if len < 126 then
    header = string.char(0x81, 0x80 + len)
  else
    assert(len < 65536)
    header = string.char(0x81, 0x80 + 126, bit.rshift(len, 8), bit.band(len, 0xff))
  end
  local mask = { 0x5a, 0x13, 0xc4, 0x7e }
  local out = {}
  for i = 1, len do
    out[i] = string.char(bit.bxor(text:byte(i), mask[(i - 1) % 4 + 1]))
  end
  self.tcp:write(header .. string.char(unpack(mask)) .. table.concat(out))
end

--- Move the whole text frames received so far into self.msgs (decoded).
function WS:parse()
  while #self.buf >= 2 do
    local b1, b2 = self.buf:byte(1, 2)
    local len, off = bit.band(b2, 0x7f), 3
    if len == 126 then
      if #self.buf < 4 then
        return
      end
      len, off = self.buf:byte(3) * 256 + self.buf:byte(4), 5
    elseif len == 127 then
      if #self.buf < 10 then
        return
      end
      len = 0
      for i = 3, 10 do
        len = len * 256 + self.buf:byte(i)
      end
      off = 11
    end
    if #self.buf < off - 1 + len then
      return
    end
    local payload = self.buf:sub(off, off + len - 1)
    self.buf = self.buf:sub(off + len)
    if bit.band(b1, 0x0f) == 1 then
      table.insert(self.msgs, vim.json.decode(payload, { luanil = { object = true, array = true } }))
    end
  end
end

--- Wait for a received message matching pred.
function WS:wait(pred, what)
  return h.wait(function()
    self:parse()
    for _, m in ipairs(self.msgs) do
      if pred(m) then
        return m
      end
    end
  end, what)
end

function WS:close()
  if not self.tcp:is_closing() then
    self.tcp:close()
  end
end

describe('attach (other clients over WebSocket)', function()
  local clients = {}
  after_each(function()
    for _, c in ipairs(clients) do
      c:close()
    end
    clients = {}
    h.teardown()
  end)

  it(':Tandem share shows the URL, ?token= and the token of the token file; a second client attaches with them', function()
    local ctx = h.fresh({
      responses = { { { text = 'the first answer' } }, { { text = 'an answer the other client asked for' } } },
      setup = { attach = { listen = 'ws://127.0.0.1:0', allow_origins = { 'http://localhost:5173' } } },
    })
    local offered = {}
    ctx.select = function(items, o)
      if o.kind == 'tandem.share' then
        table.insert(offered, { items = items, shown = vim.tbl_map(o.format_item, items), prompt = o.prompt })
        for _, item in ipairs(items) do
          if item.label:find('URL with token', 1, true) then
            return item
          end
        end
      end
    end
    -- :Tandem share starts the server when attach.listen is set and it is not running yet.
    vim.cmd('Tandem share')
    h.wait(function()
      return #offered == 1
    end, ':Tandem share to offer the items')
    local argv = server_argv()
    assert.truthy(has_run(argv, { '--listen', 'stdio', '--listen', 'ws://127.0.0.1:0' }), table.concat(argv, ' '))
    assert.truthy(has_run(argv, { '--allow-origin', 'http://localhost:5173' }), table.concat(argv, ' '))

    local token_file = ctx.dir .. '/data/attach-token'
    local token = h.read(token_file)
    assert.truthy(token and #token == 64, tostring(token))
    local by = {}
    for _, item in ipairs(offered[1].items) do
      by[item.label] = item.value
    end
    local url = by['URL']
    assert.truthy(url:match('^ws://127%.0%.0%.1:%d+$'), url)
    assert.is_not.equals('ws://127.0.0.1:0', url, 'the real port, not 0')
    assert.equals(token, by['token (Authorization: Bearer)'])
    assert.equals(url .. '/?token=' .. token, by['URL with token (browsers)'])
    assert.is_nil(by['session id (session/attach)'], 'no session before the first prompt')
    local p = offered[1].prompt
    assert.truthy(p:find('lets anyone who has it drive every session', 1, true), p)
    assert.truthy(p:find('No session is open yet', 1, true), p)
    -- The screen shows the token shortened; the register gets the whole value.
    for _, line in ipairs(offered[1].shown) do
      assert.is_nil(line:find(token, 1, true), line)
    end
    local reg = require('tandem.attach').register()
    assert.equals(url .. '/?token=' .. token, vim.fn.getreg(reg))
    local note = h.wait_note('copied the URL with token (browsers) into register ' .. reg)
    assert.equals(vim.log.levels.WARN, note.level)
    assert.truthy(note.msg:find('drive every session', 1, true), note.msg)

    -- The token shown admits a client; another token does not.
    local wrong = WS.connect(url, '/?token=' .. string.rep('0', 64))
    table.insert(clients, wrong)
    assert.equals(401, wrong.status, wrong.head)

    -- After the first prompt the session id is offered too, and a second client attaches with
    -- URL + token + session id and gets the session's events.
    vim.cmd('Tandem prompt hello')
    h.wait_turn_end('completed')
    vim.cmd('Tandem share')
    h.wait(function()
      return #offered == 2
    end, 'the second :Tandem share')
    local sid = require('tandem').state.session.sessionId
    local offered_sid
    for _, item in ipairs(offered[2].items) do
      if item.label == 'session id (session/attach)' then
        offered_sid = item.value
      end
    end
    assert.equals(sid, offered_sid)
    assert.truthy(offered[2].prompt:find('Open session: ' .. sid, 1, true), offered[2].prompt)

    local other = WS.connect(url, '/', { 'Authorization: Bearer ' .. token })
    table.insert(clients, other)
    assert.equals(101, other.status, other.head)
    other:send({ id = 1, method = 'initialize', params = { protocolVersion = 1, clientInfo = { name = 'attach-spec' } } })
    local init = other:wait(function(m)
      return m.id == 1
    end, 'initialize on the WebSocket')
    assert.equals(url, init.result.capabilities.attach.url)
    other:send({ id = 2, method = 'session/attach', params = { sessionId = sid, fromSeq = 0 } })
    assert.same({}, other:wait(function(m)
      return m.id == 2
    end, 'the session/attach answer').result)
    other:wait(function(m)
      return m.method == 'session/event' and m.params.sessionId == sid and m.params.type == 'turnEnded'
    end, "the replay of Neovim's turn on the second client")
    -- Either client may prompt: one from the second client runs in the session Neovim shows.
    other:send({ id = 3, method = 'prompt', params = { sessionId = sid, content = 'from the other client' } })
    local turn_id = other:wait(function(m)
      return m.id == 3
    end, 'the prompt answer').result.turnId
    assert.truthy(turn_id)
    other:wait(function(m)
      return m.method == 'session/event' and m.params.type == 'turnEnded' and m.params.turnId == turn_id
    end, "the second client's turn to end")
    -- Neovim receives that turn and shows its prompt (turnStarted carries it) and its answer.
    h.wait_chat('from the other client')
    h.wait_chat('an answer the other client asked for')
  end)

  it('without attach.listen the argv has no --listen and :Tandem share says how to turn it on', function()
    local ctx = h.fresh({ responses = {}, setup = { attach = { allow_origins = { 'http://localhost:5173' } } } })
    local cmd = require('tandem.config').server_cmd()
    assert.is_false(vim.tbl_contains(cmd, '--listen'), table.concat(cmd, ' '))
    assert.is_false(vim.tbl_contains(cmd, '--allow-origin'), 'origins alone add nothing')
    start_server()
    local argv = server_argv()
    assert.is_false(vim.tbl_contains(argv, '--listen'), table.concat(argv, ' '))
    assert.is_nil(require('tandem').state.info.capabilities.attach)
    assert.is_nil(h.read(ctx.dir .. '/data/attach-token'), 'no token file is written')
    local asked = false
    ctx.select = function()
      asked = true
    end
    vim.cmd('Tandem share')
    local n = h.wait_note('does not listen for other clients')
    assert.equals(vim.log.levels.WARN, n.level)
    assert.truthy(n.msg:find("attach = { listen = 'ws://127.0.0.1:0' }", 1, true), n.msg)
    assert.truthy(n.msg:find(':Tandem restart', 1, true), n.msg)
    assert.is_false(asked)
  end)

  it('health names the URL; :checkhealth and a token file written over keep the token clients need', function()
    local ctx = h.fresh({ responses = {}, setup = { attach = { listen = 'ws://127.0.0.1:0' } } })
    local attach = require('tandem.attach')
    local out = {}
    local health = {}
    for _, level in ipairs({ 'ok', 'info', 'warn', 'error' }) do
      health[level] = function(msg)
        table.insert(out, level .. ': ' .. msg)
      end
    end
    attach.check_health(health)
    assert.equals('ok: attach: configured (--listen stdio --listen ws://127.0.0.1:0); the server listens once it starts',
      out[1])
    start_server()
    local info = assert(attach.info())
    attach.check_health(health)
    assert.equals(('ok: attach: the server listens on %s (:Tandem share shows the token and session)'):format(info.url),
      out[2])
    -- :checkhealth runs its own handshake server on the same data directory: without --listen,
    -- so it does not write a new token over this server's.
    local token_file = ctx.dir .. '/data/attach-token'
    local token = h.read(token_file)
    vim.cmd('silent checkhealth tandem')
    local text = h.buf_text(0)
    assert.truthy(text:find('OK attach: the server listens on ' .. info.url, 1, true), text)
    assert.truthy(text:find('OK protocol handshake: tandem', 1, true), text)
    assert.equals(token, h.read(token_file))
    -- Another tandem with --listen on this data directory writes its token over the file: share
    -- still gives the token this server wrote (read at start), and says so.
    h.write(token_file, string.rep('f', 64))
    local again = assert(attach.info())
    assert.equals(token, again.token)
    assert.is_true(again.token_changed)
    assert.truthy(attach.prompt(again):find('now holds another token', 1, true))
    -- A restart writes a new token, and share gives that one.
    require('tandem').restart()
    h.wait(function()
      return require('tandem').server_ready() and h.read(token_file) ~= string.rep('f', 64)
    end, 'the restarted server')
    local after = assert(attach.info())
    assert.equals(h.read(token_file), after.token)
    assert.is_not.equals(token, after.token)
    -- Without attach.listen, health says it is off.
    require('tandem').setup({ cmd = { h.bin, 'serve' }, config_file = ctx.config, data_dir = ctx.dir .. '/data' })
    require('tandem').restart()
    start_server()
    attach.check_health(health)
    assert.truthy(out[#out]:find('^info: attach: off'), out[#out])
  end)
end)
