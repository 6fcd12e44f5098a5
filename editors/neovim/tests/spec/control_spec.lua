-- tests/spec/control_spec.lua: controlling a running session — stop mid-stream, steer, model switch, mode, sessions.
local h = require('helpers')

local function write_call(id, path, content)
  return { tool_call = { id = id, name = 'write_file', arguments = { path = path, content = content } } }
end

describe('session control', function()
  after_each(h.teardown)

  it(':Tandem stop interrupts a turn mid-stream and the next prompt works', function()
    h.fresh({ responses = {
      { { text = 'partial answer ' }, { delay_ms = 60000 }, { text = 'NEVER-SHOWN' } },
      { { text = 'second turn ok' } },
    } })
    vim.cmd('Tandem prompt long one')
    h.wait_chat('partial answer')
    local t0 = vim.uv.hrtime()
    vim.cmd('Tandem stop')
    h.wait_turn_end('interrupted', 5000)
    assert.is_true((vim.uv.hrtime() - t0) / 1e6 < 5000, 'stop does not wait for the stream')
    assert.is_false(require('tandem').state.running)
    assert.truthy(h.chat_has('turn ended: interrupted'), h.chat())
    assert.truthy(h.chat_has('partial answer'), 'text already seen is kept')
    vim.cmd('Tandem prompt again')
    h.wait_chat('second turn ok')
    h.wait_turn_end('completed')
    assert.is_nil(h.chat():find('NEVER-SHOWN', 1, true))
    assert.equals(2, #h.requests())
  end)

  it(':Tandem stop while an approval is pending withdraws the float', function()
    local ctx = h.fresh({ responses = { { write_call('call_s', 's.txt', 's\n') } } })
    vim.cmd('Tandem prompt write s')
    h.wait_float()
    vim.cmd('Tandem stop')
    h.wait_turn_end('interrupted')
    h.wait(function()
      return require('tandem.approval').view() == nil
    end, 'the float to close')
    assert.equals(0, #require('tandem.approval').pending())
    assert.is_nil(h.read(ctx.ws .. '/s.txt'))
  end)

  it(':Tandem steer reaches the model in the next request of the same turn', function()
    h.fresh({ responses = {
      { { text = 'Writing.' }, write_call('call_st', 'st.txt', 'st\n') },
      { { text = 'steered reply' } },
    } })
    vim.cmd('Tandem prompt write st')
    -- The approval holds the turn open, so the steer is certain to arrive mid-turn.
    h.wait_float()
    vim.cmd('Tandem steer also mention bananas')
    h.wait_chat('steer queued: also mention bananas')
    require('tandem.approval').show()
    h.press('y')
    h.wait_turn_end('completed')
    h.wait_event('steeringApplied')
    assert.truthy(h.chat_has('steering applied: also mention bananas'), h.chat())
    local reqs = h.requests()
    assert.equals(2, #reqs, 'one turn, two model calls, no new turn')
    assert.is_nil(h.message_text(reqs[1], 'user'):find('bananas', 1, true))
    assert.truthy(h.message_text(reqs[2], 'user'):find('also mention bananas', 1, true), vim.inspect(reqs[2].messages))
    assert.equals(1, #h.events('turnStarted'))
  end)

  it(':Tandem steer with no turn running says so and sends nothing', function()
    h.fresh({ responses = {} })
    vim.cmd('Tandem steer hello')
    h.wait_note('no turn is running to steer')
    assert.equals(0, #h.requests())
  end)

  it(':Tandem model picks from initialize models and switches the model sent to the provider', function()
    local ctx = h.fresh({ responses = { { { text = 'first' } }, { { text = 'second' } } } })
    vim.cmd('Tandem prompt one')
    h.wait_turn_end('completed')
    local offered
    ctx.select = function(items, o)
      offered = vim.tbl_map(function(m)
        return o.format_item(m)
      end, items)
      for _, m in ipairs(items) do
        if m.id == 'mock-2' then
          return m
        end
      end
    end
    vim.cmd('Tandem model')
    h.wait(function()
      return require('tandem').state.session.model == 'mock-2'
    end, 'the session model to become mock-2')
    assert.equals(2, #offered)
    assert.truthy(offered[1]:find('● mock', 1, true), vim.inspect(offered))
    h.wait_chat('model mock → mock-2')
    ctx.events = {}
    vim.cmd('Tandem prompt two')
    h.wait_turn_end('completed')
    local reqs = h.requests()
    assert.equals('mock-model', reqs[1].model)
    assert.equals('mock-model-2', reqs[2].model)
  end)

  it(':Tandem model with an unknown id reports the server error', function()
    h.fresh({ responses = {} })
    vim.cmd('Tandem model no-such-model')
    h.wait_note('could not switch to no-such-model')
    h.wait_note('unknownModel')
  end)

  it(':Tandem mode fullAuto lets edits run without an approval', function()
    local ctx = h.fresh({ responses = { { write_call('call_m', 'auto.txt', 'auto\n') }, { { text = 'done' } } } })
    ctx.select = function(items)
      for _, m in ipairs(items) do
        if m.id == 'fullAuto' then
          return m
        end
      end
    end
    vim.cmd('Tandem mode')
    h.wait_chat('mode: fullAuto')
    vim.cmd('Tandem prompt write auto')
    h.wait_turn_end('completed')
    assert.equals('fullAuto', require('tandem').state.session.mode, 'the session starts in the mode picked before it')
    assert.equals('auto\n', h.read(ctx.ws .. '/auto.txt'))
    assert.equals(0, #h.events('approvalRequested'))
  end)

  it(':Tandem sessions lists and resumes with a store, or says the store is missing', function()
    local ctx = h.fresh({ responses = { { { text = 'remember me' } } } })
    vim.cmd('Tandem prompt first session')
    h.wait_turn_end('completed')
    local t = require('tandem')
    local first = t.state.session.sessionId
    if not t.state.info.capabilities.sessionStore then
      vim.cmd('Tandem sessions')
      local n = h.wait_note('no session store')
      assert.truthy(n.msg:find('sessionStore is false', 1, true))
      return
    end
    -- With a store: start another session, then resume the first one from the list.
    vim.cmd('Tandem new')
    assert.is_nil(t.state.session, 'the next prompt starts the new session')
    vim.cmd('Tandem prompt second session')
    h.wait(function()
      return #h.events('turnEnded') == 2
    end, 'the second session\'s turn')
    ctx.select = function(items)
      for _, s in ipairs(items) do
        if s.sessionId == first then
          return s
        end
      end
    end
    vim.cmd('Tandem sessions')
    h.wait(function()
      return t.state.session.sessionId == first
    end, 'the first session to be resumed')
    h.wait_chat('resumed session ' .. first)
    assert.truthy(h.chat_has('first session'), h.chat())
  end)

  it('ask_user questions with choices use vim.ui.select and the answer reaches the model', function()
    local ctx = h.fresh({ responses = {
      { { tool_call = { id = 'call_ask', name = 'ask_user', arguments = { question = 'Which color?', choices = { 'red', 'blue' } } } } },
      { { text = 'Blue it is.' } },
    } })
    local asked
    ctx.select = function(items, o)
      asked = { items = items, prompt = o.prompt }
      return 'blue'
    end
    vim.cmd('Tandem prompt pick a color')
    h.wait_turn_end('completed')
    assert.same({ 'red', 'blue', 'Other…' }, asked.items)
    assert.truthy(asked.prompt:find('Which color?', 1, true))
    local tool_text = h.message_text(h.requests()[2], 'tool')
    assert.truthy(tool_text:find('The user answered: blue', 1, true), tool_text)
  end)

  it('ask_user questions without choices use vim.ui.input', function()
    local ctx = h.fresh({ responses = {
      { { tool_call = { id = 'call_ask2', name = 'ask_user', arguments = { question = 'Your name?' } } } },
      { { text = 'Hello.' } },
    } })
    table.insert(ctx.inputs, 'Ada')
    vim.cmd('Tandem prompt ask me')
    h.wait_turn_end('completed')
    assert.truthy(ctx.last_input_prompt:find('Your name?', 1, true))
    local tool_text = h.message_text(h.requests()[2], 'tool')
    assert.truthy(tool_text:find('The user answered: Ada', 1, true), tool_text)
  end)
end)
