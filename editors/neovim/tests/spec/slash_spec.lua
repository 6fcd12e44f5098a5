-- tests/spec/slash_spec.lua: slash commands against the real server — completion of `/name` from commands/list (:Tandem prompt, the prompt input, an omnifunc), a custom command as a turn, built-ins that answer at once (/status, /mode, /model, /undo, /fork) and a failing one.
local h = require('helpers')

local BUILTINS = { 'compact', 'diff', 'fork', 'init', 'mode', 'model', 'status', 'undo' }

--- A fresh plugin whose server reads user commands from the test's own config folder.
local function fresh(responses, setup)
  local ctx, t = h.fresh({ responses = responses, setup = vim.tbl_deep_extend('force', {
    env = function()
      return { XDG_CONFIG_HOME = h.ctx().dir .. '/xdg' }
    end,
  }, setup or {}) })
  h.write(ctx.ws .. '/.tandem/commands/review.md',
    '---\ndescription: Review a file\nargument-hint: FILE\n---\nReview $ARGUMENTS carefully and list the bugs.\n')
  h.write(ctx.dir .. '/xdg/tandem/commands/standup.md', '---\ndescription: Write my standup\n---\nWrite my standup.\n')
  return ctx, t
end

local function slashed(names)
  return vim.tbl_map(function(n)
    return '/' .. n
  end, names)
end

--- The 0-based row of the chat holding exactly `text` (the last one when several do).
local function row_of(text)
  local found
  for i, l in ipairs(vim.api.nvim_buf_get_lines(require('tandem.ui').buffer(), 0, -1, false)) do
    if l == text then
      found = i - 1
    end
  end
  return found
end

local function chat_line(row)
  return vim.api.nvim_buf_get_lines(require('tandem.ui').buffer(), row, row + 1, false)[1]
end

describe('slash commands', function()
  after_each(h.teardown)

  it('complete from commands/list in :Tandem prompt, the prompt input and an omnifunc; nothing without a session', function()
    local ctx, t = fresh({ { { text = 'Hello.' } } })
    h.write(ctx.ws .. '/attach-me.txt', 'x\n')
    -- No session: nothing to ask, so nothing completes (and no session is created for it).
    assert.same({}, vim.fn.getcompletion('Tandem prompt /', 'cmdline'))
    assert.same({}, vim.fn.TandemCompletePrompt('/', '/', 1))
    assert.is_nil(t.state.session)
    vim.cmd('Tandem prompt hello')
    h.wait_turn_end('completed')
    -- Builtins, the project's command and the user's, sorted by name.
    local all = vim.list_extend(vim.deepcopy(BUILTINS), { 'review', 'standup' })
    table.sort(all)
    assert.same(slashed(all), vim.fn.getcompletion('Tandem prompt /', 'cmdline'))
    assert.same({ '/review' }, vim.fn.getcompletion('Tandem prompt /rev', 'cmdline'))
    assert.same({}, vim.fn.getcompletion('Tandem prompt fix /rev', 'cmdline'), 'only as the first word')
    -- The list is asked again each time: a new command file completes at once.
    h.write(ctx.ws .. '/.tandem/commands/zeta.md', 'Do zeta things.\n')
    assert.same({ '/zeta' }, vim.fn.getcompletion('Tandem prompt /ze', 'cmdline'))
    -- /model and /mode complete their argument.
    assert.same({ 'mock-2' }, vim.fn.getcompletion('Tandem prompt /model mock-', 'cmdline'))
    assert.same({ 'autoEdit' }, vim.fn.getcompletion('Tandem prompt /mode au', 'cmdline'))
    -- The prompt input: the plugin asks with vim.ui.input and its `completion`; whole lines complete.
    local completion
    vim.ui.input = function(o, cb)
      completion = o.completion
      cb(nil)
    end
    t.prompt()
    assert.truthy(completion, 'the prompt input has a completion')
    assert.same({ '/standup', '/status' }, vim.fn.getcompletion('/st', completion))
    assert.same({ '/model mock', '/model mock-2' }, vim.fn.getcompletion('/model m', completion))
    assert.same({ 'explain @attach-me.txt' }, vim.fn.getcompletion('explain @att', completion), '@ still completes files')
    -- Complete-items for a buffer input: hint and description shown in the menu and info.
    local items = require('tandem.slash').items('re')
    assert.equals(1, #items, vim.inspect(items))
    assert.equals('/review', items[1].word)
    assert.equals('/review FILE', items[1].abbr)
    assert.equals('Review a file', items[1].menu)
    assert.equals('project', items[1].kind)
    assert.truthy(items[1].info:find('Review a file', 1, true), items[1].info)
    -- The omnifunc in a real buffer: <C-x><C-o> after `/rev`.
    vim.cmd('enew')
    vim.bo.omnifunc = "v:lua.require'tandem.slash'.omnifunc"
    h.press('i/rev<C-x><C-o><Esc>')
    assert.equals('/review', vim.api.nvim_get_current_line())
    h.press('ofix /rev<C-x><C-o><Esc>')
    assert.equals('fix /rev', vim.api.nvim_get_current_line(), 'not after the start of the line')
  end)

  it('a custom command is a turn: the model gets the expanded text, the chat shows it as typed', function()
    fresh({ { { text = 'Two bugs found.' } } })
    vim.cmd('Tandem prompt /review src/parser.rs')
    h.wait_turn_end('completed')
    h.wait_chat('Two bugs found.')
    local req = h.wait_requests(1)[1]
    local user = h.message_text(req, 'user')
    assert.truthy(user:find('Review src/parser.rs carefully and list the bugs.', 1, true), user)
    assert.truthy(row_of('/review src/parser.rs'), h.chat())
    assert.is_nil(h.chat():find('── /review', 1, true), 'a turn, not an output block')
    local turns = require('tandem.ui').turns()
    assert.equals('review', turns[#turns].command)
    assert.equals(h.events('turnStarted')[1].turnId, turns[#turns].id)
  end)

  it('a built-in answers at once: /status output under the prompt, /mode and /model the bar, a failure its error', function()
    local _, t = fresh({})
    vim.cmd('Tandem chat')
    vim.cmd('Tandem prompt /status')
    h.wait_chat('── /status ──')
    local prompt = row_of('/status')
    assert.truthy(prompt, h.chat())
    assert.equals('── /status ──', chat_line(prompt + 1), 'the output is right under the prompt line')
    assert.truthy(chat_line(prompt + 2) ~= nil and chat_line(prompt + 2) ~= '', h.chat())
    assert.truthy(h.chat():find('mock', 1, true), 'the status names the model:\n' .. h.chat())
    -- No turn ran, and the turn keys say why there is nothing to act on.
    assert.same({}, h.events('turnStarted'))
    assert.is_false(t.state.running)
    local win = require('tandem.ui').window()
    vim.api.nvim_set_current_win(win)
    vim.api.nvim_win_set_cursor(win, { prompt + 1, 0 })
    h.press('d')
    h.wait_note('ran /status, which the server answered at once')
    -- /compact with nothing to summarize yet answers at once too.
    vim.cmd('Tandem prompt /compact')
    h.wait_chat('── /compact ──')
    assert.truthy(h.chat_has('Nothing to compact yet'), h.chat())
    assert.same({}, h.events('turnStarted'))
    -- /mode NAME and /model NAME switch the session; the bar follows.
    vim.cmd('Tandem prompt /mode plan')
    h.wait_chat('── /mode ──')
    assert.equals('plan', t.state.session.mode)
    vim.cmd('Tandem prompt /model mock-2')
    h.wait_chat('── /model ──')
    h.wait(function()
      return t.state.session.model == 'mock-2'
    end, 'the model to be mock-2')
    assert.truthy(t.winbar():find('mock-2 · plan', 1, true), t.winbar())
    -- A built-in that fails: the server's error, with the next step.
    vim.cmd('Tandem prompt /model nosuch')
    local n = h.wait_note('/model failed:')
    assert.equals(vim.log.levels.ERROR, n.level)
    assert.truthy(n.msg:find('unknownModel', 1, true), n.msg)
    h.wait_chat('! /model failed:')
    h.artifact('slash-builtins.txt', h.chat())
    assert.equals('mock-2', t.state.session.model)
    assert.same({}, h.requests(), 'no built-in asked the model')
  end)

  it('/undo rewinds the last turn: the chat drops it and keeps the /undo block with its output', function()
    local ctx, t = fresh({
      { { tool_call = { id = 'call_w', name = 'write_file', arguments = { path = 'notes.txt', content = 'a note\n' } } } },
      { { text = 'Wrote the note.' } },
    }, { mode = 'fullAuto' })
    vim.cmd('Tandem chat')
    vim.cmd('Tandem prompt write a note')
    h.wait_turn_end('completed')
    h.wait_chat('Wrote the note.')
    assert.equals('a note\n', h.read(ctx.ws .. '/notes.txt'))
    vim.cmd('Tandem prompt /undo')
    h.wait_event('rewound')
    h.wait(function()
      return not h.chat_has('Wrote the note.') and h.chat_has('── /undo ──')
    end, 'the undone turn to leave the chat and the /undo block to stay')
    assert.is_nil(h.read(ctx.ws .. '/notes.txt'), 'the file the turn wrote is gone')
    assert.is_nil(row_of('write a note'), 'the undone prompt left the chat (the output quotes it):\n' .. h.chat())
    assert.is_nil(h.chat():find('rewound by another client', 1, true), 'this client did it:\n' .. h.chat())
    local prompt = row_of('/undo')
    assert.truthy(prompt, h.chat())
    assert.equals('── /undo ──', chat_line(prompt + 1), h.chat())
    assert.truthy(chat_line(prompt + 2) ~= nil and chat_line(prompt + 2) ~= '', h.chat())
    assert.equals(1, select(2, h.chat():gsub('── /undo ──', '')), 'shown once:\n' .. h.chat())
    h.artifact('slash-undo.txt', h.chat())
    assert.is_false(t.state.running)
  end)

  it('/fork names the new session, says how to open it and opens it when asked', function()
    local ctx, t = fresh({ { { text = 'First answer.' } } })
    local asked
    ctx.select = function(items, o)
      if items[1] == 'open' then
        asked = o.prompt
        return 'open'
      end
    end
    vim.cmd('Tandem prompt hello')
    h.wait_turn_end('completed')
    local from = t.state.session.sessionId
    vim.cmd('Tandem prompt /fork')
    h.wait_chat('── /fork ──')
    local id = h.wait(function()
      return h.chat():match('⑂ new session (s_%w+): :Tandem resume s_%w+ opens it')
    end, 'the line naming the new session')
    assert.truthy(h.chat_has(':Tandem resume ' .. id .. ' opens it'), h.chat())
    assert.truthy(asked and asked:find(id, 1, true), tostring(asked))
    h.wait(function()
      return t.state.session and t.state.session.sessionId == id and h.chat_has('forked from ' .. from)
    end, 'the fork to be open')
    assert.truthy(h.chat_has('First answer.'), 'the fork has the history:\n' .. h.chat())
    assert.truthy(id ~= from)
    -- :Tandem resume {id} goes back to the source.
    vim.cmd('Tandem resume ' .. from)
    h.wait(function()
      return t.state.session.sessionId == from
    end, 'the source session to be open again')
  end)
end)
