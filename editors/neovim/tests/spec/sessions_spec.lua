-- tests/spec/sessions_spec.lua: no empty sessions (the server starts on first use, the first prompt creates the session), the session list by title and date newest first, and :Tandem resume.
local h = require('helpers')

--- Record every method the plugin sends to the server from now on (the rpc module is wrapped, so
--- the next server started is observed from its first request).
local function record_methods()
  local rpc = require('tandem.rpc')
  local sent = {}
  local start = rpc.start
  rpc.start = function(cmd, opts)
    local client, err = start(cmd, opts)
    if client then
      local request = client.request
      client.request = function(self, method, params, cb)
        table.insert(sent, method)
        return request(self, method, params, cb)
      end
    end
    return client, err
  end
  return sent
end

local function count(list, value)
  return #vim.tbl_filter(function(v)
    return v == value
  end, list)
end

describe('sessions', function()
  after_each(h.teardown)

  it(':Tandem sessions, chat, model, mode and status start the server but never create a session', function()
    local ctx = h.fresh({ responses = { { { text = 'first answer' } } } })
    local sent = record_methods()
    local t = require('tandem')
    vim.cmd('Tandem sessions')
    h.wait_note('no stored sessions')
    vim.cmd('Tandem chat')
    vim.cmd('Tandem model mock-2')
    h.wait_note('model: mock-2 (for the session your next prompt starts)')
    vim.cmd('Tandem mode autoEdit')
    h.wait_chat('mode: autoEdit (for the session your next prompt starts)')
    ctx.select = function(items)
      return items[1]
    end
    vim.cmd('Tandem model')
    h.wait_note('model: mock (for the session your next prompt starts)')
    assert.equals(1, count(sent, 'models/list'), 'the picker asks the server for the fresh catalog')
    vim.cmd('Tandem status')
    h.wait_note('no session yet')
    assert.is_nil(t.state.session)
    assert.equals(0, count(sent, 'session/new'), vim.inspect(sent))
    assert.equals(1, count(sent, 'initialize'), 'one server for all of them')
    -- The first prompt creates the session, with the model and mode chosen before it.
    vim.cmd('Tandem prompt hello there')
    h.wait_turn_end('completed')
    assert.equals(1, count(sent, 'session/new'), vim.inspect(sent))
    assert.equals('mock', t.state.session.model, 'the picker chose the first model, mock, last')
    assert.equals('autoEdit', t.state.session.mode)
    assert.equals('mock-model', h.requests()[1].model)
  end)

  it('lists sessions by title and date, newest first, and resumes the one picked', function()
    local ctx = h.fresh({ responses = { { { text = 'a' } }, { { text = 'b' } }, { { text = 'c' } } } })
    local t = require('tandem')
    local ids = {}
    for i, topic in ipairs({ 'alpha topic', 'beta topic', 'gamma topic' }) do
      if i > 1 then
        vim.cmd('Tandem new')
      end
      vim.cmd('Tandem prompt ' .. topic)
      h.wait(function()
        return #h.events('turnEnded') == i
      end, 'turn ' .. i)
      ids[i] = t.state.session.sessionId
    end
    local offered
    ctx.select = function(items, o)
      offered = { prompt = o.prompt, lines = vim.tbl_map(o.format_item, items), items = items }
      return items[3]
    end
    vim.cmd('Tandem sessions')
    h.wait(function()
      return t.state.session.sessionId == ids[1]
    end, 'the oldest session (third in the list) to be resumed')
    assert.equals(3, #offered.items, vim.inspect(offered.lines))
    assert.same({ ids[3], ids[2], ids[1] }, vim.tbl_map(function(s)
      return s.sessionId
    end, offered.items), 'newest first')
    assert.truthy(offered.lines[1]:find('gamma topic', 1, true), offered.lines[1])
    assert.truthy(offered.lines[1]:find('today %d%d:%d%d'), 'the date is shown: ' .. offered.lines[1])
    assert.truthy(offered.lines[1]:find('● ', 1, true), 'the open session is marked: ' .. offered.lines[1])
    assert.truthy(offered.lines[3]:find('alpha topic', 1, true), offered.lines[3])
    h.wait_chat('resumed session ' .. ids[1])
    assert.truthy(h.chat_has('alpha topic'), h.chat())
  end)

  it(':Tandem resume after a restart resumes the last session without creating one', function()
    local ctx = h.fresh({ responses = { { { text = 'one' } }, { { text = 'two: the last one' } } } })
    local t = require('tandem')
    vim.cmd('Tandem prompt the older session')
    h.wait_turn_end('completed')
    vim.cmd('Tandem new')
    vim.cmd('Tandem prompt the newest session')
    h.wait(function()
      return #h.events('turnEnded') == 2
    end, 'the second turn')
    local last = t.state.session.sessionId
    local sent = record_methods()
    vim.cmd('Tandem restart')
    h.wait_note('server restarted')
    require('tandem.ui').clear()
    vim.cmd('Tandem resume')
    h.wait(function()
      return t.state.session and t.state.session.sessionId == last
    end, 'the last session to be resumed')
    h.wait_chat('resumed session ' .. last)
    assert.truthy(h.chat_has('the newest session'), h.chat())
    assert.truthy(h.chat_has('two: the last one'), h.chat())
    assert.is_nil(h.chat():find('the older session', 1, true), 'only the last session is shown')
    h.wait_note('resuming "the newest session"')
    -- The context gauge continues from the resumed session's last answer.
    assert.truthy(t.gauge_text():find('/128k', 1, true), 'gauge after resume: ' .. t.gauge_text())
    assert.equals(0, count(sent, 'session/new'), vim.inspect(sent))
    local _ = ctx
  end)

  it(':Tandem resume with no stored session says how to start one', function()
    h.fresh({ responses = {} })
    vim.cmd('Tandem resume')
    local n = h.wait_note('no other stored session')
    assert.truthy(n.msg:find(':Tandem prompt', 1, true), n.msg)
    assert.is_nil(require('tandem').state.session)
  end)
end)
