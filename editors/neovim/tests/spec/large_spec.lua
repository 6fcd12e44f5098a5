-- tests/spec/large_spec.lua: what is too large for one message: a paged session/load and an approval the server had to cut.
local h = require('helpers')

describe('tandem.pages', function()
  local pages = require('tandem.pages')

  it('assembles pages fetched newest first into one history, oldest first', function()
    local acc = pages.new()
    local next_cursor = pages.add(acc, { cursor = '2', messages = { { text = 'c' }, { text = 'd' } } })
    assert.equals('2', next_cursor)
    assert.is_nil(pages.add(acc, { messages = { { text = 'a' }, { text = 'b' } } }))
    local texts = vim.tbl_map(function(m)
      return m.text
    end, pages.assemble(acc.pages))
    assert.same({ 'a', 'b', 'c', 'd' }, texts)
  end)

  it('stops, with the reason, when the server repeats a cursor or sends too many pages', function()
    local acc = pages.new()
    assert.equals('7', pages.add(acc, { cursor = '7', messages = {} }))
    local again, err = pages.add(acc, { cursor = '7', messages = {} })
    assert.is_nil(again)
    assert.truthy(err:find('a second time', 1, true), err)

    local few = pages.new(2)
    assert.equals('9', pages.add(few, { cursor = '9', messages = {} }))
    local stop, why = pages.add(few, { cursor = '8', messages = {} })
    assert.is_nil(stop)
    assert.truthy(why:find('more than 2 pages', 1, true), why)
  end)
end)

describe('a change too large for one message', function()
  after_each(h.teardown)

  it('cannot be edited before approval, and y applies it whole', function()
    -- 7 MB of content: the approval (arguments, newText and the unified diff) is over 6 MiB,
    -- so the server cuts its longest strings and says so in the reason.
    local line = string.rep('x', 99) .. '\n'
    local content = string.rep(line, 70000)
    local ctx = h.fresh({ responses = {
      { { tool_call = { id = 'call_big', name = 'write_file', arguments = { path = 'big.txt', content = content } } } },
      { { text = 'Wrote it.' } },
    } })
    -- The call's 7 MB stay in the history; the next request must fit the model's window.
    h.write(ctx.config, (h.read(ctx.config):gsub('context_window = 128000', 'context_window = 100000000')))
    vim.cmd('Tandem prompt write a big file')
    local v = h.wait_float(20000)
    local text = h.buf_text(v.buf)
    assert.truthy(text:find('too large to show in full', 1, true), text:sub(1, 2000))
    assert.is_nil(text:find('[e] edit', 1, true), 'the float offers no edit for a cut change')
    local wins = #vim.api.nvim_list_wins()
    h.press('e')
    local note = h.wait_note('cannot be edited before it is applied')
    assert.equals(vim.log.levels.WARN, note.level)
    assert.equals(wins, #vim.api.nvim_list_wins(), 'no edit buffer was opened')
    assert.truthy(require('tandem.approval').view(), 'the approval is still pending')
    -- The float cannot show it all: y approves only once the end has been on screen.
    h.press('G')
    h.press('y')
    h.wait_turn_end('completed', 20000)
    assert.equals(content, h.read(ctx.ws .. '/big.txt'), 'approving wrote the whole change, not the cut one')
  end)
end)

describe('resuming a session', function()
  after_each(h.teardown)

  it('loads every page of a history larger than one 16 MiB message, oldest first', function()
    -- Five answers of 3.8 MB each (under the 4 MiB answer cap): about 19 MB of history, which
    -- the server sends in at least two pages.
    local responses, marks = {}, {}
    for i = 1, 5 do
      marks[i] = ('answer-mark-%d '):format(i)
      responses[i] = { { text = marks[i] .. string.rep('y', 3800000) } }
    end
    local ctx = h.fresh({ responses = responses })
    h.write(ctx.config, (h.read(ctx.config):gsub('context_window = 128000', 'context_window = 100000000')))
    local t = require('tandem')
    for i = 1, 5 do
      vim.cmd('Tandem prompt turn ' .. i)
      h.wait(function()
        return #h.events('turnEnded') == i
      end, 'turn ' .. i .. ' to end', 20000)
    end
    local first = t.state.session.sessionId
    assert.is_true(t.state.info.capabilities.sessionStore, 'the server keeps a session store')
    vim.cmd('Tandem new')
    assert.is_nil(t.state.session, 'the next prompt starts the new session')
    -- A new session keeps the old chat text below a separator; clear it so what follows can
    -- only come from the resumed history.
    require('tandem.ui').clear()
    assert.is_false(h.chat_has(marks[1]), 'the chat is empty before the resume')
    t.load_session(first)
    h.wait_chat('resumed session ' .. first, 30000)
    local chat = h.chat()
    local at = {}
    for i = 1, 5 do
      at[i] = chat:find(marks[i], 1, true)
      assert.truthy(at[i], 'answer ' .. i .. ' is in the resumed chat')
    end
    for i = 2, 5 do
      assert.is_true(at[i - 1] < at[i], 'answers are shown oldest first')
    end
    assert.is_nil(t.state.loading, 'the load finished')
  end)
end)
