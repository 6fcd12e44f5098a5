-- tests/spec/turns_spec.lua: checkpoints of turns against the real server — :Tandem undo (files, conversation, both; conflicts and force), :Tandem edit (rewind and resend), :Tandem diff (a tab of old/new text), :Tandem fork, the chat's turn keys, the rewound event, and the server's errors.
local h = require('helpers')

local function write_call(id, path, content)
  return { tool_call = { id = id, name = 'write_file', arguments = { path = path, content = content } } }
end

--- Bytes that a text round trip would change: CRLF, a tab, no final newline, non-ASCII.
local ORIGINAL = 'line one\r\n\tindented ü\r\nno newline at the end'

--- Wait for the count of ended turns to reach n.
local function wait_turns(n)
  h.wait(function()
    return #h.events('turnEnded') >= n
  end, n .. ' ended turn(s)')
end

--- Pick the restore choice `restore` in the undo menu, and `force_answer` ('force'/'keep') in the conflict menu.
local function answer_menus(ctx, restore, force_answer)
  ctx.menus = {}
  ctx.select = function(items, o)
    table.insert(ctx.menus, { prompt = o.prompt, lines = vim.tbl_map(o.format_item or tostring, items) })
    if type(items[1]) == 'table' and items[1].restore then
      for _, item in ipairs(items) do
        if item.restore == restore then
          return item
        end
      end
    elseif items[1] == 'force' then
      return force_answer
    end
  end
end

--- The chat's 1-based row of the first line equal to `text`.
local function chat_row(text)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(require('tandem.ui').buffer(), 0, -1, false)) do
    if l == text then
      return i
    end
  end
end

--- Put the cursor in the chat window on the line `text` (the prompt of a turn).
local function cursor_on(text)
  local ui = require('tandem.ui')
  local win = assert(ui.window(), 'the chat window is open')
  vim.api.nvim_set_current_win(win)
  local row = assert(chat_row(text), 'the chat shows ' .. text .. ':\n' .. h.chat())
  vim.api.nvim_win_set_cursor(win, { row, 0 })
end

--- The windows of the current tab in diff mode, with their buffers' text.
local function diff_windows()
  local out = {}
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.wo[win].diff then
      out[#out + 1] = { win = win, text = h.buf_text(vim.api.nvim_win_get_buf(win)),
        name = vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win)) }
    end
  end
  return out
end

--- A session with one turn ("keep this turn") that changes nothing, then one that writes a.txt
--- over ORIGINAL, approved with y. Returns ctx and the turn ids.
local function two_turns(extra_responses)
  local responses = {
    { { text = 'First answer, kept.' } },
    { { text = 'Writing a.txt.' }, write_call('call_w', 'a.txt', 'the agent wrote this\n') },
    { { text = 'Second answer, to be undone.' } },
  }
  vim.list_extend(responses, extra_responses or {})
  local ctx = h.fresh({ responses = responses })
  h.write(ctx.ws .. '/a.txt', ORIGINAL)
  vim.cmd('Tandem prompt keep this turn')
  wait_turns(1)
  vim.cmd('Tandem prompt change a.txt please')
  h.wait_float()
  h.press('y')
  wait_turns(2)
  assert.equals('the agent wrote this\n', h.read(ctx.ws .. '/a.txt'))
  h.wait_chat('Second answer, to be undone.')
  local ended = h.events('turnEnded')
  return ctx, ended[1].turnId, ended[2].turnId
end

describe('turn checkpoints', function()
  after_each(h.teardown)

  it(':Tandem undo with files and conversation restores the file byte for byte and drops the turn from the chat', function()
    local ctx, first, second = two_turns({ { { text = 'Answer after the undo.' } } })
    answer_menus(ctx, 'both')
    vim.cmd('Tandem undo')
    h.wait(function()
      return h.read(ctx.ws .. '/a.txt') == ORIGINAL
    end, 'a.txt to hold its bytes from before the turn')
    h.wait_chat('undid turn 2 "change a.txt please" (both)')
    assert.truthy(ctx.menus[1].prompt:find('turn 2 "change a.txt please"', 1, true), ctx.menus[1].prompt)
    assert.equals(3, #ctx.menus[1].lines, 'files, conversation or both')
    local chat = h.chat()
    assert.is_nil(chat:find('━━ You ━━\nchange a.txt please', 1, true), 'the undone prompt is gone:\n' .. chat)
    assert.is_nil(chat:find('Second answer, to be undone.', 1, true), 'its answer is gone:\n' .. chat)
    assert.is_nil(chat:find('Writing a.txt.', 1, true), chat)
    assert.truthy(chat:find('━━ You ━━\nkeep this turn', 1, true), 'the earlier turn stays:\n' .. chat)
    assert.truthy(chat:find('First answer, kept.', 1, true), chat)
    assert.truthy(chat:find('restored a.txt', 1, true), chat)
    local ui = require('tandem.ui')
    assert.same({ first }, vim.tbl_map(function(t)
      return t.id
    end, ui.turns()))
    assert.is_nil(ui.turn_by_id(second))
    -- Files first (a conflict could still be forced while the turn exists), then the conversation;
    -- their rewound events (after the answers) find nothing more to drop: the earlier turn stays.
    h.wait_event('rewound', function(e)
      return e.turnId == second and e.restore == 'conversation'
    end)
    assert.same({ 'files', 'conversation' }, vim.tbl_map(function(e)
      return e.restore
    end, h.events('rewound')))
    assert.same({ 'a.txt' }, h.events('rewound')[1].files)
    assert.truthy(h.chat_has('First answer, kept.'))
    -- The conversation goes on from before the undone turn.
    vim.cmd('Tandem prompt after the undo')
    wait_turns(3)
    local last = h.requests()[#h.requests()]
    local sent = h.message_text(last)
    assert.truthy(sent:find('keep this turn', 1, true), sent)
    assert.truthy(sent:find('after the undo', 1, true), sent)
    assert.is_nil(sent:find('change a.txt please', 1, true), 'the model never sees the undone prompt again:\n' .. sent)
  end)

  it('u on a turn\'s prompt in the chat undoes files only: the file is restored, the chat keeps the turn', function()
    local ctx = two_turns()
    answer_menus(ctx, 'files')
    -- A buffer open on the file shows the restored text.
    vim.cmd.split(ctx.ws .. '/a.txt')
    local file_buf = vim.api.nvim_get_current_buf()
    assert.equals('the agent wrote this', h.buf_text(file_buf))
    cursor_on('change a.txt please')
    h.press('u')
    h.wait(function()
      return h.read(ctx.ws .. '/a.txt') == ORIGINAL
    end, 'a.txt restored')
    h.wait_chat('undid turn 2 "change a.txt please" (files)')
    h.wait(function()
      return h.buf_text(file_buf):gsub('\r', '') == 'line one\n\tindented ü\nno newline at the end'
    end, 'the buffer on a.txt to show the restored text')
    assert.truthy(h.chat_has('━━ You ━━\nchange a.txt please'), 'files only: the turn stays in the chat\n' .. h.chat())
    assert.truthy(h.chat_has('Second answer, to be undone.'))
    assert.equals(2, #require('tandem.ui').turns())
  end)

  it('a conflict is listed with its path and reason, and force puts the file back before the conversation goes', function()
    local ctx = two_turns()
    h.write(ctx.ws .. '/a.txt', 'changed by the user after the turn\n')
    answer_menus(ctx, 'both', 'force')
    vim.cmd('Tandem undo 2')
    h.wait_chat('forced undo of turn 2 "change a.txt please" (both): the conversation now ends before it; restored a.txt')
    assert.equals(ORIGINAL, h.read(ctx.ws .. '/a.txt'), 'force put a.txt back')
    assert.equals(2, #ctx.menus, 'the restore menu, then the force menu')
    assert.truthy(ctx.menus[2].prompt:find('1 path changed since turn 2 "change a.txt please" (a.txt): put it back anyway?',
      1, true), ctx.menus[2].prompt)
    local n = h.wait_note('1 path was not restored, changed since the turn:\na.txt — ')
    assert.truthy(n.msg:find('changed since this session', 1, true), 'the server\'s reason: ' .. n.msg)
    assert.is_nil(h.chat():find('Second answer, to be undone.', 1, true), h.chat())
    assert.is_nil(h.chat():find('! not restored', 1, true), 'nothing is left unrestored:\n' .. h.chat())
  end)

  it('keep leaves a conflicting file as the user changed it', function()
    local ctx = two_turns()
    h.write(ctx.ws .. '/a.txt', 'changed by the user after the turn\n')
    answer_menus(ctx, 'both', 'keep')
    vim.cmd('Tandem undo')
    h.wait_chat('! not restored: a.txt — changed since')
    assert.equals(2, #ctx.menus, 'the force menu was offered')
    assert.truthy(h.chat_has('undid turn 2 "change a.txt please" (both): the conversation now ends before it; '
      .. '1 path left as it is (below)'), h.chat())
    assert.equals('changed by the user after the turn\n', h.read(ctx.ws .. '/a.txt'))
    assert.is_nil(h.chat():find('Second answer, to be undone.', 1, true), 'the conversation was rewound still')
  end)

  it(':Tandem edit resends the edited prompt: the model gets the new text and not the old one', function()
    local ctx = h.fresh({ responses = {
      { { text = 'Answer to the old prompt.' } },
      { { text = 'Answer to the new prompt.' } },
    } })
    vim.cmd('Tandem prompt the OLD wording of my question')
    wait_turns(1)
    local offered
    vim.ui.input = function(o, cb)
      offered = o
      cb('the NEW wording of my question')
    end
    vim.cmd('Tandem edit')
    wait_turns(2)
    assert.equals('the OLD wording of my question', offered.default, 'the input starts with the last prompt')
    local reqs = h.wait_requests(2)
    local sent = h.message_text(reqs[2])
    assert.truthy(sent:find('the NEW wording of my question', 1, true), sent)
    assert.is_nil(sent:find('OLD wording', 1, true), 'the old prompt is not in the next request:\n' .. sent)
    assert.is_nil(sent:find('Answer to the old prompt.', 1, true), sent)
    h.wait_chat('Answer to the new prompt.')
    local chat = h.chat()
    assert.is_nil(chat:find('━━ You ━━\nthe OLD wording', 1, true), chat)
    assert.is_nil(chat:find('Answer to the old prompt.', 1, true), chat)
    assert.truthy(chat:find('━━ You ━━\nthe NEW wording of my question', 1, true), chat)
    assert.equals(1, #require('tandem.ui').turns())
    local _ = ctx
  end)

  it('e on a turn\'s prompt edits that turn and drops it and the later ones', function()
    h.fresh({ responses = {
      { { text = 'one' } }, { { text = 'two' } }, { { text = 'three' } }, { { text = 'redone' } },
    } })
    for i, p in ipairs({ 'prompt number one', 'prompt number two', 'prompt number three' }) do
      vim.cmd('Tandem prompt ' .. p)
      wait_turns(i)
    end
    h.ctx().inputs = { 'prompt number two, edited' }
    cursor_on('prompt number two')
    h.press('e')
    wait_turns(4)
    local sent = h.message_text(h.requests()[4])
    assert.truthy(sent:find('prompt number one', 1, true), sent)
    assert.truthy(sent:find('prompt number two, edited', 1, true), sent)
    assert.is_nil(sent:find('prompt number three', 1, true), sent)
    h.wait_chat('redone')
    assert.is_nil(h.chat():find('prompt number three', 1, true), h.chat())
    assert.equals(2, #require('tandem.ui').turns())
  end)

  it(':Tandem diff opens one tab with the old and new text of each file, and lists a binary file with a note', function()
    local ctx = h.fresh({ responses = {
      { write_call('call_d1', 'a.txt', 'alpha\nBETA\ngamma\n'), write_call('call_d2', 'new.txt', 'brand new\n') },
      { { text = 'Two files.' } },
    }, setup = { mode = 'autoEdit' } })
    h.write(ctx.ws .. '/a.txt', 'alpha\nbeta\ngamma\n')
    vim.cmd('Tandem prompt change two files')
    wait_turns(1)
    local tabs = #vim.api.nvim_list_tabpages()
    vim.cmd('Tandem diff')
    h.wait(function()
      return #vim.api.nvim_list_tabpages() == tabs + 1 and #diff_windows() == 2
    end, 'a diff tab')
    local wins = diff_windows()
    table.sort(wins, function(a, b)
      return vim.api.nvim_win_get_position(a.win)[2] < vim.api.nvim_win_get_position(b.win)[2]
    end)
    assert.equals('alpha\nbeta\ngamma', wins[1].text, 'the left side is the text before the turn')
    assert.equals('alpha\nBETA\ngamma', wins[2].text, 'the right side is the text after it')
    assert.truthy(wins[1].name:find('/old/a.txt', 1, true), wins[1].name)
    assert.equals('before: a.txt', vim.wo[wins[1].win].winbar)
    assert.equals('after: a.txt', vim.wo[wins[2].win].winbar)
    assert.equals('', vim.go.winbar, 'the bars are the windows\' own: a new window gets none')
    local view = require('tandem.turns').last_view
    local list = h.buf_text(view.list_buf)
    assert.truthy(list:find('turn 1 "change two files"', 1, true), list)
    assert.truthy(list:find('▶ M a.txt  +1 −1', 1, true), list)
    assert.truthy(list:find('A new.txt  +1 −0', 1, true), list)
    -- ]f shows the next file: an added file has an empty old side.
    h.press(']f')
    wins = diff_windows()
    local texts = vim.tbl_map(function(w)
      return w.text
    end, wins)
    table.sort(texts)
    assert.same({ '', 'brand new' }, texts)
    h.press('q')
    assert.equals(tabs, #vim.api.nvim_list_tabpages(), 'q closes the tab')
  end)

  it(':Tandem diff lists a binary file and a file too large to capture with a note, and shows the text files', function()
    local ctx = h.fresh({ responses = {
      { { tool_call = { id = 'call_sh', name = 'shell', arguments = {
        command = "printf 'changed\\n' > t.txt && printf '\\001\\002\\000\\377' > bin.dat && printf 'more' >> big.txt" } } } },
      { { text = 'Shell done.' } },
    }, setup = { mode = 'fullAuto' } })
    h.write(ctx.ws .. '/t.txt', 'original\n')
    h.write(ctx.ws .. '/big.txt', string.rep('x', 6 * 1024 * 1024))
    vim.cmd('Tandem prompt run the shell')
    wait_turns(1)
    vim.cmd('Tandem diff')
    local view = h.wait(function()
      return require('tandem.turns').last_view
    end, 'the diff tab')
    local list = h.buf_text(view.list_buf)
    assert.truthy(list:find('A bin.dat  (binary: no text to compare)', 1, true), list)
    assert.truthy(list:find('M big.txt  (not captured: ', 1, true), list)
    assert.truthy(list:find('M t.txt  +1 −1', 1, true), list)
    assert.truthy(list:find('▶ M t.txt', 1, true), 'the first file with text is shown:\n' .. list)
    local texts = vim.tbl_map(function(w)
      return w.text
    end, diff_windows())
    table.sort(texts)
    assert.same({ 'changed', 'original' }, texts)
  end)

  it('d on a turn\'s prompt shows that turn\'s diff; :Tandem diff N and its completion name turns', function()
    local ctx = h.fresh({ responses = {
      { write_call('call_k1', 'k.txt', 'first version\n') },
      { { text = 'wrote k' } },
      { write_call('call_k2', 'k.txt', 'second version\n') },
      { { text = 'rewrote k' } },
    }, setup = { mode = 'autoEdit' } })
    vim.cmd('Tandem prompt create k')
    wait_turns(1)
    vim.cmd('Tandem prompt rewrite k')
    wait_turns(2)
    local ids = vim.tbl_map(function(e)
      return e.turnId
    end, h.events('turnEnded'))
    h.wait(function()
      return #vim.fn.getcompletion('Tandem diff ', 'cmdline') == 4
    end, 'completion of the turns')
    assert.same({ '1', '2', ids[1], ids[2] }, vim.fn.getcompletion('Tandem diff ', 'cmdline'))
    assert.same({ ids[2] }, vim.fn.getcompletion('Tandem undo ' .. ids[2]:sub(1, -3), 'cmdline'))
    cursor_on('create k')
    h.press('d')
    h.wait(function()
      return #diff_windows() == 2
    end, 'the diff tab of turn 1')
    local texts = vim.tbl_map(function(w)
      return w.text
    end, diff_windows())
    table.sort(texts)
    assert.same({ '', 'first version' }, texts)
    vim.cmd('tabclose')
    vim.cmd('Tandem diff 2')
    h.wait(function()
      local t = vim.tbl_map(function(w)
        return w.text
      end, diff_windows())
      table.sort(t)
      return vim.deep_equal(t, { 'first version', 'second version' })
    end, 'the diff tab of turn 2')
    vim.cmd('tabclose')
    vim.cmd('Tandem diff 3')
    h.wait_note('there is no turn 3: the session has 2 turns')
    local _ = ctx
  end)

  it(':Tandem fork switches to a new session with the history before the turn', function()
    h.fresh({ responses = {
      { { text = 'answer one' } }, { { text = 'answer two' } }, { { text = 'answer in the fork' } },
    } })
    local t = require('tandem')
    vim.cmd('Tandem prompt fork prompt one')
    wait_turns(1)
    vim.cmd('Tandem prompt fork prompt two')
    wait_turns(2)
    local source = t.state.session.sessionId
    vim.cmd('Tandem fork 2')
    h.wait(function()
      return t.state.session and t.state.session.sessionId ~= source
    end, 'the plugin to switch to the fork')
    local fork = t.state.session.sessionId
    assert.truthy(fork:match('^s_'), fork)
    h.wait_chat('forked from ' .. source)
    assert.truthy(h.chat_has('fork prompt one'), h.chat())
    assert.is_nil(h.chat():find('━━ You ━━\nfork prompt two', 1, true), 'the fork ends before turn 2:\n' .. h.chat())
    assert.is_nil(h.chat():find('answer two', 1, true), h.chat())
    -- The fork's next request carries the history before turn 2 only.
    vim.cmd('Tandem prompt in the fork')
    wait_turns(3)
    local sent = h.message_text(h.requests()[3])
    assert.truthy(sent:find('fork prompt one', 1, true), sent)
    assert.is_nil(sent:find('fork prompt two', 1, true), sent)
    assert.equals(fork, t.state.session.sessionId)
  end)

  it('f on a turn\'s prompt forks before it; :Tandem fork without a turn keeps the whole history', function()
    h.fresh({ responses = { { { text = 'only answer' } } } })
    local t = require('tandem')
    vim.cmd('Tandem prompt the only prompt')
    wait_turns(1)
    local source = t.state.session.sessionId
    vim.cmd('Tandem fork')
    h.wait(function()
      return t.state.session.sessionId ~= source
    end, 'the whole-history fork')
    h.wait_chat('forked from ' .. source .. ' with the whole history')
    assert.truthy(h.chat_has('the only prompt'), h.chat())
    local whole = t.state.session.sessionId
    cursor_on('the only prompt')
    h.press('f')
    h.wait(function()
      return t.state.session.sessionId ~= whole
    end, 'the fork before turn 1')
    h.wait_chat('forked from ' .. whole .. ' before turn 1')
    assert.is_nil(h.chat():find('━━ You ━━\nthe only prompt', 1, true), h.chat())
    assert.is_nil(h.chat():find('only answer', 1, true), h.chat())
  end)

  it('a rewound event from another client drops the turns from the chat', function()
    h.fresh({ responses = { { { text = 'one' } }, { { text = 'two' } } } })
    local t = require('tandem')
    vim.cmd('Tandem prompt kept by the other client')
    wait_turns(1)
    vim.cmd('Tandem prompt rewound by the other client')
    wait_turns(2)
    local second = h.events('turnEnded')[2].turnId
    require('tandem.session').on_event({ sessionId = t.state.session.sessionId, seq = 999, turnId = second,
      type = 'rewound', restore = 'conversation', files = {} })
    h.wait_chat('rewound by another client (conversation)')
    assert.is_nil(h.chat():find('rewound by the other client\n', 1, true), h.chat())
    assert.truthy(h.chat_has('kept by the other client'))
    assert.equals(1, #require('tandem.ui').turns())
  end)

  it('a rewound conversation shows as a notice when the session is resumed', function()
    local ctx, _, second = two_turns()
    answer_menus(ctx, 'both')
    local t = require('tandem')
    vim.cmd('Tandem undo')
    h.wait_event('rewound', function(e)
      return e.turnId == second and e.restore == 'conversation'
    end)
    local id = t.state.session.sessionId
    t.load_session(id)
    h.wait_chat('resumed session ' .. id)
    local chat = h.chat()
    assert.truthy(chat:find('\n⟲ Rewound to before “change a.txt please”', 1, true), 'the rewound notice:\n' .. chat)
    assert.is_nil(chat:find('Second answer, to be undone.', 1, true), chat)
    assert.truthy(chat:find('First answer, kept.', 1, true), chat)
  end)

  it('errors show the server\'s message: undo while a turn runs is turnInProgress', function()
    local ctx = h.fresh({ responses = {
      { { text = 'first' } },
      { { text = 'still running' }, { delay_ms = 60000 } },
    } })
    vim.cmd('Tandem prompt first turn')
    wait_turns(1)
    vim.cmd('Tandem prompt a long turn')
    h.wait_chat('still running')
    answer_menus(ctx, 'both')
    vim.cmd('Tandem undo 1')
    local n = h.wait_note('(turnInProgress)')
    assert.equals(vim.log.levels.ERROR, n.level)
    assert.truthy(n.msg:find(':Tandem stop', 1, true), n.msg)
    assert.truthy(h.chat_has('! undo of turn 1 "first turn" failed: '), h.chat())
    assert.truthy(h.chat_has('first turn'), 'nothing was dropped')
    vim.cmd('Tandem stop')
    h.wait_turn_end('interrupted')
  end)

  it('off a turn\'s prompt the turn keys keep their own meaning', function()
    h.fresh({ responses = { { { text = 'alpha beta gamma' } } } })
    vim.cmd('Tandem prompt some prompt')
    wait_turns(1)
    local ui = require('tandem.ui')
    local win = ui.window()
    vim.api.nvim_set_current_win(win)
    local row = chat_row('alpha beta gamma')
    vim.api.nvim_win_set_cursor(win, { row, 0 })
    h.press('e')
    assert.same({ row, 4 }, vim.api.nvim_win_get_cursor(win), 'e moved to the end of the word')
    h.press('fg')
    assert.same({ row, 11 }, vim.api.nvim_win_get_cursor(win), 'f found the character')
    assert.equals(1, #vim.api.nvim_list_tabpages())
    h.press('<Plug>(TandemTurnDiff)')
    h.wait_note('put the cursor on a turn\'s prompt')
  end)

  it(':Tandem undo with no session says how to get one', function()
    h.fresh({ responses = {} })
    vim.cmd('Tandem undo')
    h.wait_note('nothing to undo a turn: no session is open')
  end)
end)

describe('turns.find', function()
  after_each(h.teardown)

  it('names a turn by nothing (the last), its number from the oldest, its id or a unique prefix', function()
    h.fresh({ setup = false })
    local find = require('tandem.turns').find
    local list = { { turnId = 't_aaa1', prompt = 'a' }, { turnId = 't_aab2', prompt = 'b' }, { turnId = 't_b3', prompt = 'c' } }
    assert.equals('t_b3', find(list, '').turnId)
    assert.equals('t_aaa1', find(list, '1').turnId)
    assert.equals('t_aab2', find(list, ' 2 ').turnId)
    assert.equals('t_b3', find(list, 't_b3').turnId)
    assert.equals('t_aab2', find(list, 't_aab').turnId)
    local cp, why = find(list, 't_aa')
    assert.is_nil(cp)
    assert.truthy(why:find('more than one turn', 1, true), why)
    cp, why = find(list, '4')
    assert.is_nil(cp)
    assert.truthy(why:find('no turn 4: the session has 3 turns', 1, true), why)
    cp, why = find({}, '')
    assert.is_nil(cp)
    assert.truthy(why:find('no turn yet', 1, true), why)
  end)
end)
