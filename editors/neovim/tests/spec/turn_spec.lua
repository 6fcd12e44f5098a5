-- tests/spec/turn_spec.lua: a full turn against the real server and the mock LLM — streaming, reasoning folds, usage, selection context.
local h = require('helpers')

describe('a turn', function()
  after_each(h.teardown)

  it('streams assistant text into the chat as it arrives, then shows usage and the end', function()
    h.fresh({ responses = { { { text = 'Hello ' }, { delay_ms = 1500 }, { text = 'world from the mock' } } } })
    vim.cmd('Tandem prompt say hello')
    -- The first words are on screen while the mock is still holding the rest back.
    h.wait_chat('Hello')
    assert.is_false(h.chat_has('world from the mock'), 'the second chunk must not be there yet')
    assert.is_true(require('tandem').state.running)
    h.wait_turn_end('completed')
    local chat = h.chat()
    assert.truthy(chat:find('Hello world from the mock', 1, true), chat)
    assert.truthy(chat:find('━━ You ━━\nsay hello', 1, true), chat)
    assert.truthy(chat:find('usage · mock · in 101', 1, true), chat)
    assert.truthy(chat:find('turn ended: completed', 1, true), chat)
    assert.is_false(require('tandem').state.running)
    local req = h.requests()[1]
    assert.equals('mock-model', req.model)
    assert.truthy(h.message_text(req, 'user'):find('say hello', 1, true))
  end)

  it('folds reasoning closed in the chat window', function()
    h.fresh({ responses = { { { reasoning = 'thinking step one\nthinking step two' }, { text = 'the answer' } } } })
    vim.cmd('Tandem prompt think')
    h.wait_turn_end('completed')
    local ui = require('tandem.ui')
    local win = ui.window()
    assert.truthy(win, 'the chat opens on prompt')
    local lines = vim.api.nvim_buf_get_lines(ui.buffer(), 0, -1, false)
    local header
    for i, l in ipairs(lines) do
      if l == '▸ reasoning' then
        header = i
      end
    end
    assert.truthy(header, h.chat())
    assert.equals('thinking step one', lines[header + 1])
    vim.api.nvim_win_call(win, function()
      assert.equals(header, vim.fn.foldclosed(header + 1), 'reasoning lines are inside a closed fold')
      assert.equals(-1, vim.fn.foldclosed(header + 3), 'the answer is not folded')
    end)
    assert.truthy(h.chat():find('the answer', 1, true))
  end)

  it('sends the visual selection as context with :Tandem prompt', function()
    h.fresh({ responses = { { { text = 'explained' } } } })
    local file = h.ctx().ws .. '/sample.lua'
    h.write(file, 'local a = 1\nlocal b = 2\nlocal c = 3\n')
    vim.cmd.edit(file)
    vim.cmd("normal! ggjVj\27")
    vim.cmd("'<,'>Tandem prompt explain these lines")
    h.wait_turn_end('completed')
    local user = h.message_text(h.requests()[1], 'user')
    assert.truthy(user:find('explain these lines', 1, true), user)
    assert.truthy(user:find('Selected from `sample.lua` lines 2-3', 1, true), user)
    assert.truthy(user:find('local b = 2\nlocal c = 3', 1, true), user)
    assert.is_nil(user:find('local a = 1', 1, true), 'only the selected lines are sent')
  end)

  it('tells the user a turn is running when prompting twice', function()
    h.fresh({ responses = { { { text = 'slow ' }, { delay_ms = 5000 }, { text = 'done' } } } })
    vim.cmd('Tandem prompt first')
    h.wait_chat('slow')
    vim.cmd('Tandem prompt second')
    h.wait_note('a turn is already running')
    vim.cmd('Tandem stop')
    h.wait_turn_end('interrupted')
  end)
end)
