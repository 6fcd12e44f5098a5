-- tests/spec/mcp_spec.lua: MCP servers against the real server and a real MCP server (tests/mcp/stdio_server.py on the Python SDK): the :Tandem mcp list, failures, MCP approvals, .mcp.json trust.
local h = require('helpers')

local repo = vim.fn.fnamemodify(h.root .. '/../..', ':p'):gsub('/$', '')
local venv = vim.env.TANDEM_MCP_VENV or (vim.env.HOME .. '/.cache/tandem/mcp-venv')
local python = venv .. '/bin/python'
local stdio_server = repo .. '/tests/mcp/stdio_server.py'
assert(vim.fn.executable(python) == 1,
  ('the MCP test servers are not installed (%s is missing): run tests/mcp/setup in the repository root'):format(python))

--- Add MCP server tables to the test's tandem config (the server reads it when it starts).
local function add_servers(ctx, toml)
  h.write(ctx.config, h.read(ctx.config) .. '\n' .. toml)
end

local SERVER_T = ('[mcp_servers.t]\ncommand = %q\nargs = [%q]\n'):format(python, stdio_server)
local SERVER_BAD = '[mcp_servers.bad]\ncommand = "/bin/sh"\nargs = ["-c", "echo boom >&2; exit 3"]\n'

local function list_text()
  local b = require('tandem.mcp').buffer()
  return b and h.buf_text(b) or ''
end

local function wait_list(text)
  return h.wait(function()
    return list_text():find(text, 1, true) ~= nil
  end, ('the MCP list to contain %q; it holds:\n%s'):format(text, list_text()))
end

--- The row (1-based) of the list holding `text`.
local function list_row(text)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(require('tandem.mcp').buffer(), 0, -1, false)) do
    if l:find(text, 1, true) then
      return i
    end
  end
end

--- A stand-in for vim.health that records each report as "level: message".
local function fake_health()
  local out = {}
  local rec = {}
  for _, level in ipairs({ 'ok', 'info', 'warn', 'error' }) do
    rec[level] = function(msg)
      table.insert(out, level .. ': ' .. msg)
    end
  end
  return rec, out
end

local function notes_with(text)
  return vim.tbl_filter(function(msg)
    return msg:find(text, 1, true) ~= nil
  end, h.notes_text())
end

describe('MCP servers', function()
  after_each(h.teardown)

  it(':Tandem mcp lists the ready server with its tools and the failed one with its error, kept current by events', function()
    local ctx, tandem = h.fresh({ responses = { { { text = 'hello back' } } } })
    add_servers(ctx, SERVER_T .. SERVER_BAD)
    assert.equals('', tandem.mcp_status(), 'no session, no MCP text')
    -- Opened before any session: it says so, and fills in once the first prompt starts one.
    vim.cmd('Tandem mcp')
    local b = require('tandem.mcp').buffer()
    assert.equals(b, vim.api.nvim_get_current_buf())
    assert.truthy(list_text():find('No session is open yet', 1, true), list_text())
    vim.cmd('wincmd p')
    vim.cmd('Tandem prompt hello')
    h.wait_turn_end('completed')
    wait_list('t  [config]  ready  · 5 tools: ')
    wait_list('bad  [config]  failed')
    local text = list_text()
    h.artifact('mcp-list.txt', text)
    for _, tool in ipairs({ 'echo', 'env', 'slow', 'barrier', 'crash' }) do
      assert.truthy(text:find(tool, 1, true), tool .. ' in ' .. text)
    end
    -- The full error, under the failed server's line.
    local bad_row = list_row('bad  [config]  failed')
    local error_lines = table.concat(vim.api.nvim_buf_get_lines(b, bad_row, -1, false), '\n')
    assert.truthy(error_lines:find('boom', 1, true), error_lines)
    assert.truthy(error_lines:find('exit status: 3', 1, true), error_lines)
    -- The failure was notified as a warning naming the server.
    local n = h.wait_note('MCP server `bad` failed')
    assert.equals(vim.log.levels.WARN, n.level)
    assert.truthy(n.msg:find('boom', 1, true), n.msg)
    assert.equals(1, #notes_with('MCP server `bad` failed'), 'one notification per change')
    assert.equals('MCP 1/2', tandem.mcp_status())
    assert.truthy(tandem.status():find('MCP 1/2', 1, true), tandem.status())
    -- The trust key on a server that needs none says so and sends nothing.
    vim.api.nvim_set_current_win(vim.fn.bufwinid(b))
    vim.api.nvim_win_set_cursor(0, { bad_row, 0 })
    h.press('t')
    h.wait_note('MCP server `bad` is failed, not waiting for trust')
    -- The list came from events while it was open; mcp/status agrees on a refresh.
    h.press('r')
    wait_list('t  [config]  ready')
    assert.same({ 'refresh', 'trust' }, vim.fn.getcompletion('Tandem mcp ', 'cmdline'))
    assert.same({}, vim.fn.getcompletion('Tandem mcp trust ', 'cmdline'), 'no untrusted server to complete')
    -- :checkhealth reports each server of the open session.
    local health, out = fake_health()
    require('tandem.health').check_mcp(health)
    table.sort(out)
    assert.equals(2, #out, vim.inspect(out))
    assert.truthy(out[1]:find('^error: MCP server `bad` %[config%]: failed: .*boom'), out[1])
    assert.equals('ok: MCP server `t` [config]: ready, 5 tools', out[2])
  end)

  it('an MCP approval shows the server, the tool and the arguments as indented JSON; y runs it', function()
    local ctx = h.fresh({ responses = {
      { { tool_call = { id = 'call_mcp', name = 'mcp__t__echo', arguments = { text = 'echo from mcp' } } } },
      { { text = 'The server echoed it.' } },
      { { text = 'A second session.' } },
    } })
    add_servers(ctx, SERVER_T)
    vim.cmd('Tandem prompt echo something')
    local v = h.wait_float()
    local text = h.buf_text(v.buf)
    h.artifact('mcp-approval-float.txt', text)
    assert.truthy(text:find('MCP server `t` wants to run `echo`', 1, true), text)
    assert.truthy(text:find('Arguments:\n{\n  "text": "echo from mcp"\n}', 1, true), text)
    assert.truthy(text:find('[a] always allow mcp__t__echo', 1, true), text)
    assert.truthy(text:find('[n] deny', 1, true), text)
    h.wait_chat('○ echo  MCP server `t`  [pending]')
    h.press('y')
    h.wait_turn_end('completed')
    assert.equals('once', h.events('approvalResolved')[1].decision)
    -- The tool ran on the MCP server: the next model request holds its result.
    local reqs = h.wait_requests(2)
    local tool_text = h.message_text(reqs[2], 'tool')
    assert.truthy(tool_text:find('echo from mcp', 1, true), tool_text)
    h.wait_chat('✔ echo  MCP server `t`  [completed]')
    assert.truthy(h.chat_has('The server echoed it.'), h.chat())
    -- Another session, then back: the history names the server too (its entries carry only the
    -- model-facing name), and the servers of a session the server already runs (no new events)
    -- come from mcp/status.
    local tandem = require('tandem')
    local first = tandem.state.session.sessionId
    vim.cmd('Tandem new')
    vim.cmd('Tandem prompt another')
    h.wait_chat('A second session.')
    assert.is_not.equals(first, tandem.state.session.sessionId)
    tandem.load_session(first)
    h.wait_chat('· resumed session ' .. first)
    h.wait_chat('✔ echo  MCP server `t`  [completed]')
    h.wait(function()
      return tandem.mcp_status() == 'MCP 1/1'
    end, 'the resumed session\'s MCP servers (mcp/status after session/load)')
    vim.cmd('Tandem mcp')
    wait_list('MCP servers · session ' .. first)
    wait_list('t  [config]  ready')
  end)

  it('a server that exits mid-call is a warning naming it, and the list shows exited with the reason', function()
    local ctx, tandem = h.fresh({ responses = {
      { { tool_call = { id = 'call_crash', name = 'mcp__t__crash', arguments = vim.empty_dict() } } },
      { { text = 'It crashed.' } },
    } })
    add_servers(ctx, SERVER_T)
    vim.cmd('Tandem prompt crash it')
    local v = h.wait_float()
    local text = h.buf_text(v.buf)
    assert.truthy(text:find('MCP server `t` wants to run `crash`', 1, true), text)
    assert.truthy(text:find('Arguments:\n{}', 1, true), text)
    h.press('y')
    h.wait_turn_end('completed')
    local n = h.wait_note('MCP server `t` exited')
    assert.equals(vim.log.levels.WARN, n.level)
    h.wait_chat('✘ crash  MCP server `t`  [failed]')
    assert.equals('MCP 0/1', tandem.mcp_status())
    vim.cmd('Tandem mcp')
    wait_list('t  [config]  exited')
    local rows_after = vim.api.nvim_buf_get_lines(require('tandem.mcp').buffer(), list_row('t  [config]  exited'), -1, false)
    assert.truthy(rows_after[1]:match('^    %S'), 'the reason is under the server: ' .. vim.inspect(rows_after))
  end)

  it('a workspace .mcp.json server shows untrusted, is notified once, and :Tandem mcp trust (or t) starts it', function()
    local ctx, tandem = h.fresh({ responses = { { { text = 'first' } } } })
    h.write(ctx.ws .. '/.mcp.json', vim.json.encode({ mcpServers = {
      w = { command = python, args = { stdio_server } },
      w2 = { command = python, args = { stdio_server }, env = { TANDEM_TEST_W2 = '1' } },
    } }))
    vim.cmd('Tandem prompt hello')
    h.wait_turn_end('completed')
    local n = h.wait_note('MCP server `w` comes from the workspace\'s .mcp.json')
    assert.truthy(n.msg:find(':Tandem mcp trust w', 1, true), n.msg)
    h.wait_note('MCP server `w2` comes from')
    vim.cmd('Tandem mcp')
    wait_list('w  [workspace]  untrusted  (t trusts it)')
    wait_list('w2  [workspace]  untrusted')
    h.artifact('mcp-list-untrusted.txt', list_text())
    assert.equals('MCP 0/2', tandem.mcp_status())
    assert.same({ 'w', 'w2' }, vim.fn.getcompletion('Tandem mcp trust ', 'cmdline'))
    vim.cmd('Tandem mcp trust w')
    h.wait_note('trusted MCP server `w`')
    wait_list('w  [workspace]  ready  · 5 tools: ')
    assert.same({ 'w2' }, vim.fn.getcompletion('Tandem mcp trust ', 'cmdline'))
    -- The key on w2's line trusts w2.
    local b = require('tandem.mcp').buffer()
    vim.api.nvim_set_current_win(vim.fn.bufwinid(b))
    vim.api.nvim_win_set_cursor(0, { list_row('w2  [workspace]  untrusted'), 0 })
    h.press('t')
    wait_list('w2  [workspace]  ready')
    assert.equals('MCP 2/2', tandem.mcp_status())
    -- Each untrusted server was announced once, however many times its status was read.
    assert.equals(1, #notes_with('MCP server `w` comes from'))
    assert.equals(1, #notes_with('MCP server `w2` comes from'))
    -- An unknown server is the server's invalidParams, reported.
    vim.cmd('Tandem mcp trust nosuch')
    h.wait_note('could not trust MCP server `nosuch`')
    -- Without a session, :checkhealth names what .mcp.json declares; trust needs a session.
    vim.cmd('Tandem new')
    assert.equals('', tandem.mcp_status())
    local health, out = fake_health()
    require('tandem.health').check_mcp(health)
    assert.equals(1, #out, vim.inspect(out))
    assert.truthy(out[1]:find('^info: MCP servers of .*%.mcp%.json: w, w2'), out[1])
    vim.cmd('Tandem mcp trust w')
    h.wait_note('no session is open, so there is no MCP server to trust')
  end)

  it('a status told before the session/new answer (an untrusted server\'s comes at once) is not lost', function()
    local ctx, tandem = h.fresh({ responses = { { { text = 'first' } } } })
    h.write(ctx.ws .. '/.mcp.json', vim.json.encode({ mcpServers = { w = { command = python, args = { stdio_server } } } }))
    -- Hold the session/new answer until the server's mcpStatus for the new session has been
    -- handled (and dropped: no session was known yet), as when the server sends it first.
    local rpc = require('tandem.rpc')
    local start = rpc.start
    local seen, released = {}, false
    rpc.start = function(cmd, opts)
      local on_notification = opts.on_notification
      opts.on_notification = function(method, params)
        on_notification(method, params)
        if method == 'session/event' and params.type == 'mcpStatus' then
          table.insert(seen, params)
        end
      end
      local client, err = start(cmd, opts)
      if client then
        local request = client.request
        client.request = function(self, method, params, cb)
          if method == 'session/new' then
            local answer, tries = cb, 0
            cb = function(e, res)
              local function release()
                tries = tries + 1
                if #seen > 0 or tries > 1000 then
                  released = #seen > 0
                  answer(e, res)
                else
                  vim.defer_fn(release, 10)
                end
              end
              release()
            end
          end
          return request(self, method, params, cb)
        end
      end
      return client, err
    end
    vim.cmd('Tandem prompt hello')
    h.wait_turn_end('completed')
    assert.is_true(released, 'the mcpStatus came while the session/new answer was held')
    assert.equals('untrusted', seen[1].status)
    h.wait_note('MCP server `w` comes from the workspace\'s .mcp.json')
    assert.equals('MCP 0/1', tandem.mcp_status())
  end)

  it('pretty_json indents objects and arrays by two spaces, sorts keys, keeps empties and scalars', function()
    h.fresh({ setup = false })
    local pretty = require('tandem.mcp').pretty_json
    local value = vim.json.decode('{"b":[1,"two",{"c":null}],"a":{"x":true,"y":{}},"e":[],"s":"q\\"/\\n"}')
    assert.equals(table.concat({
      '{',
      '  "a": {',
      '    "x": true,',
      '    "y": {}',
      '  },',
      '  "b": [',
      '    1,',
      '    "two",',
      '    {',
      '      "c": null',
      '    }',
      '  ],',
      '  "e": [],',
      '  "s": "q\\"/\\n"',
      '}',
    }, '\n'), pretty(value))
    assert.equals('"plain"', pretty('plain'))
    assert.equals('{}', pretty(vim.empty_dict()))
  end)
end)
