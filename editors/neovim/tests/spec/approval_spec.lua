-- tests/spec/approval_spec.lua: the approval float answered with each key (y a c n e d) against the real server; files on disk afterwards.
local h = require('helpers')

local function write_call(id, path, content)
  return { tool_call = { id = id, name = 'write_file', arguments = { path = path, content = content } } }
end

local function shell_call(id, command)
  return { tool_call = { id = id, name = 'shell', arguments = { command = command } } }
end

local function float_text()
  local v = h.wait_float()
  return h.buf_text(v.buf), v
end

describe('the approval float', function()
  after_each(h.teardown)

  it('shows the title, reason and diff, and y allows once', function()
    local ctx = h.fresh({ responses = {
      { { text = 'Writing it.' }, write_call('call_y', 'hello.txt', 'hello from y\nsecond line\n') },
      { { text = 'All written.' } },
    } })
    vim.cmd('Tandem prompt write hello')
    local text, v = float_text()
    assert.equals(' Write hello.txt ', vim.api.nvim_win_get_config(v.win).title[1][1])
    assert.truthy(text:find('Reason: ', 1, true), text)
    assert.truthy(text:find('hello.txt (new file, 2 lines)', 1, true), text)
    assert.truthy(text:find('+ hello from y', 1, true), text)
    assert.truthy(text:find('[y] allow once', 1, true), text)
    -- The diff lines carry extmark highlights (DiffAdd for added lines).
    local marks = vim.api.nvim_buf_get_extmarks(v.buf, -1, 0, -1, { details = true })
    local has_add = false
    for _, m in ipairs(marks) do
      if m[4].line_hl_group == 'DiffAdd' then
        has_add = true
      end
    end
    assert.is_true(has_add, 'added lines are highlighted with DiffAdd')
    h.press('y')
    h.wait_turn_end('completed')
    assert.equals('hello from y\nsecond line\n', h.read(ctx.ws .. '/hello.txt'))
    assert.equals('once', h.events('approvalResolved')[1].decision)
    assert.is_nil(require('tandem.approval').view(), 'the float is gone after answering')
    assert.truthy(h.chat():find('✔ write_file  Write hello.txt  [completed]', 1, true), h.chat())
    assert.truthy(h.chat_has('All written.'))
  end)

  it('a always allows the tool: the next write_file is not asked again', function()
    local ctx = h.fresh({ responses = {
      { write_call('call_a1', 'one.txt', 'one\n') },
      { write_call('call_a2', 'two.txt', 'two\n') },
      { { text = 'Both done.' } },
    } })
    vim.cmd('Tandem prompt write two files')
    float_text()
    h.press('a')
    h.wait_turn_end('completed')
    assert.equals('one\n', h.read(ctx.ws .. '/one.txt'))
    assert.equals('two\n', h.read(ctx.ws .. '/two.txt'))
    assert.equals(1, #h.events('approvalRequested'), 'only the first write was asked')
    assert.equals('alwaysTool', h.events('approvalResolved')[1].decision)
  end)

  it('c always allows the command prefix; shell approvals show command and cwd; output streams', function()
    local ctx = h.fresh({ responses = {
      { shell_call('call_c1', 'echo tandem-shell-ok') },
      { shell_call('call_c2', 'echo tandem-shell-ok again') },
      { { text = 'Ran both.' } },
    } })
    vim.cmd('Tandem prompt run echo')
    local text = float_text()
    assert.truthy(text:find('$ echo tandem-shell-ok', 1, true), text)
    assert.truthy(text:find('cwd: ' .. ctx.ws, 1, true), text)
    assert.truthy(text:find('[c] always allow `echo tandem-shell-ok`', 1, true), text)
    h.press('c')
    h.wait_turn_end('completed')
    assert.equals(1, #h.events('approvalRequested'), 'the second command matched the prefix rule')
    assert.equals('alwaysCommand', h.events('approvalResolved')[1].decision)
    assert.truthy(h.chat_has('  │ tandem-shell-ok'), h.chat())
    assert.truthy(h.chat_has('  │ tandem-shell-ok again'), h.chat())
  end)

  it('c on a non-shell tool warns and keeps the approval pending', function()
    h.fresh({ responses = { { write_call('call_c3', 'x.txt', 'x\n') }, { { text = 'ok' } } } })
    vim.cmd('Tandem prompt write x')
    float_text()
    h.press('c')
    h.wait_note('offered only for shell commands')
    assert.truthy(require('tandem.approval').view(), 'still on screen')
    h.press('y')
    h.wait_turn_end('completed')
  end)

  it('n denies with the reason typed at the prompt; nothing is written', function()
    local ctx = h.fresh({ responses = {
      { write_call('call_n', 'nope.txt', 'should not exist\n') },
      { { text = 'Understood.' } },
    } })
    vim.cmd('Tandem prompt write nope')
    float_text()
    table.insert(ctx.inputs, 'not today')
    h.press('n')
    h.wait_turn_end('completed')
    assert.is_nil(h.read(ctx.ws .. '/nope.txt'))
    assert.equals('deny', h.events('approvalResolved')[1].decision)
    local tool_text = h.message_text(h.requests()[2], 'tool')
    assert.truthy(tool_text:find('denied by user: not today', 1, true), tool_text)
    assert.truthy(h.chat():find('⊘ write_file', 1, true), h.chat())
  end)

  it('n then Esc at the reason prompt keeps the approval pending', function()
    local ctx = h.fresh({ responses = { { write_call('call_n2', 'k.txt', 'k\n') }, { { text = 'ok' } } } })
    vim.cmd('Tandem prompt write k')
    float_text()
    -- No queued input: the stub answers nil, which is what <Esc> gives.
    h.press('n')
    assert.equals(0, #h.events('approvalResolved'))
    assert.equals(1, #require('tandem.approval').pending())
    h.press('y')
    h.wait_turn_end('completed')
    assert.equals('k\n', h.read(ctx.ws .. '/k.txt'))
  end)

  it('e opens the proposed content; :w approves the edited version', function()
    local ctx = h.fresh({ responses = {
      { write_call('call_e', 'edit.txt', 'proposed line\n') },
      { { text = 'Thanks for the edit.' } },
    } })
    vim.cmd('Tandem prompt write edit')
    float_text()
    h.press('e')
    local b = vim.api.nvim_get_current_buf()
    assert.truthy(vim.api.nvim_buf_get_name(b):find('tandem://edit/', 1, true))
    assert.same({ 'proposed line' }, vim.api.nvim_buf_get_lines(b, 0, -1, false))
    vim.api.nvim_buf_set_lines(b, 0, -1, false, { 'edited by me', 'and a second line' })
    vim.cmd('write')
    h.wait_turn_end('completed')
    assert.equals('edited by me\nand a second line\n', h.read(ctx.ws .. '/edit.txt'))
    assert.equals('once', h.events('approvalResolved')[1].decision)
    h.wait(function()
      return not vim.api.nvim_buf_is_valid(b)
    end, 'the edit buffer to be closed')
  end)

  it('d opens a side-by-side :diffthis split and y decides from there', function()
    local ctx = h.fresh({ responses = {
      { write_call('call_d', 'existing.txt', 'new content\n') },
      { { text = 'Replaced.' } },
    } })
    h.write(ctx.ws .. '/existing.txt', 'old content\n')
    vim.cmd('Tandem prompt replace')
    local text = float_text()
    assert.truthy(text:find('- old content', 1, true), text)
    assert.truthy(text:find('+ new content', 1, true), text)
    local tabs = #vim.api.nvim_list_tabpages()
    h.press('d')
    assert.equals(tabs + 1, #vim.api.nvim_list_tabpages())
    local wins = vim.api.nvim_tabpage_list_wins(0)
    assert.equals(2, #wins)
    local seen = {}
    for _, w in ipairs(wins) do
      assert.is_true(vim.wo[w].diff, 'both windows are in diff mode')
      seen[h.buf_text(vim.api.nvim_win_get_buf(w))] = true
    end
    assert.is_true(seen['old content'] and seen['new content'], vim.inspect(seen))
    h.press('y')
    h.wait_turn_end('completed')
    assert.equals('new content\n', h.read(ctx.ws .. '/existing.txt'))
    h.wait(function()
      return #vim.api.nvim_list_tabpages() == tabs
    end, 'the diff tab to close')
  end)

  it('q hides the float without answering and :Tandem approvals brings it back', function()
    local ctx = h.fresh({ responses = { { write_call('call_q', 'q.txt', 'q\n') }, { { text = 'ok' } } } })
    vim.cmd('Tandem prompt write q')
    float_text()
    h.press('q')
    assert.is_nil(require('tandem.approval').view())
    assert.equals(0, #h.events('approvalResolved'))
    vim.cmd('Tandem approvals')
    float_text()
    h.press('y')
    h.wait_turn_end('completed')
    assert.equals('q\n', h.read(ctx.ws .. '/q.txt'))
  end)
end)
