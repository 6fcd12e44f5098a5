-- tests/spec/applied_spec.lua: edits applied without asking (autoEdit, fullAuto, always allow) show their diff in the chat as a closed fold, and open buffers on written files are reloaded or, with unsaved changes, kept with a warning.
local h = require('helpers')

local function write_call(id, path, content)
  return { tool_call = { id = id, name = 'write_file', arguments = { path = path, content = content } } }
end

--- 1-based row of the first chat line that starts with `prefix`.
local function chat_row(prefix)
  local lines = vim.api.nvim_buf_get_lines(require('tandem.ui').buffer(), 0, -1, false)
  for i, l in ipairs(lines) do
    if l:sub(1, #prefix) == prefix then
      return i
    end
  end
end

--- foldclosed() of a chat row, evaluated in the chat window.
local function closed_at(row)
  local win = assert(require('tandem.ui').window(), 'the chat window is open')
  -- nvim_win_call returns one value only, so the pair travels as a table.
  local r = vim.api.nvim_win_call(win, function()
    return { vim.fn.foldclosed(row), vim.fn.foldclosedend(row) }
  end)
  return r[1], r[2]
end

describe('an edit applied without asking', function()
  after_each(h.teardown)

  it('in autoEdit shows its whole diff in a closed fold that hides nothing else', function()
    local ctx = h.fresh({
      responses = {
        { { text = 'Changing two lines.' }, write_call('call_auto', 'auto.txt', 'one\nTWO\nthree\nFOUR\n') },
        { { text = 'Both lines changed.' } },
      },
      setup = { mode = 'autoEdit' },
    })
    h.write(ctx.ws .. '/auto.txt', 'one\ntwo\nthree\nfour\n')
    vim.cmd('Tandem prompt change auto.txt')
    h.wait_turn_end('completed')
    assert.equals(0, #h.events('approvalRequested'), 'autoEdit asks nothing')
    assert.equals('one\nTWO\nthree\nFOUR\n', h.read(ctx.ws .. '/auto.txt'))
    local chat = h.chat()
    assert.truthy(chat:find('▸ applied diff · auto.txt · +2 −2', 1, true), chat)
    for _, line in ipairs({ '- two', '+ TWO', '- four', '+ FOUR' }) do
      assert.truthy(chat:find('\n' .. line .. '\n', 1, true), 'the chat holds ' .. line .. ':\n' .. chat)
    end
    local header = chat_row('  ▸ applied diff')
    local fence_end
    local lines = vim.api.nvim_buf_get_lines(require('tandem.ui').buffer(), 0, -1, false)
    for i = header + 1, #lines do
      if lines[i] == '```' then
        fence_end = i
        break
      end
    end
    assert.truthy(fence_end, chat)
    -- One closed fold from the header to the closing fence, and nothing outside it folded.
    local s, e = closed_at(header + 2)
    assert.equals(header, s, 'the diff is folded from its header')
    assert.equals(fence_end, e, 'the fold ends at the diff block')
    assert.equals(-1, (closed_at(header - 1)), 'the line above the diff is not folded')
    local after = chat_row('Both lines changed.')
    assert.equals(-1, (closed_at(after)), 'the answer after the diff is not folded')
    local win = require('tandem.ui').window()
    local text = vim.api.nvim_win_call(win, function()
      return vim.fn.foldtextresult(header)
    end)
    assert.truthy(text:find('applied diff · auto.txt', 1, true), text)
    assert.truthy(text:find('lines folded, zo opens', 1, true), text)
  end)

  it('in fullAuto and after always allow shows the diff of every applied edit, new files included', function()
    local ctx = h.fresh({ responses = {
      { write_call('call_a1', 'first.txt', 'first\n') },
      { write_call('call_a2', 'second.txt', 'second\n') },
      { { text = 'Two files.' } },
    } })
    vim.cmd('Tandem prompt write two files')
    h.wait_float()
    h.press('a') -- always allow write_file: the second write runs without asking
    h.wait_turn_end('completed')
    assert.equals(1, #h.events('approvalRequested'))
    assert.equals('second\n', h.read(ctx.ws .. '/second.txt'))
    h.wait_chat('▸ applied diff · second.txt · +1 −0')
    assert.truthy(h.chat_has('▸ applied diff · first.txt · +1 −0'), h.chat())
    assert.truthy(h.chat_has('\n+ second\n'), h.chat())
  end)
end)

describe('buffers on files the agent wrote', function()
  after_each(h.teardown)

  it('are reloaded when unmodified, and kept with a warning when they have unsaved changes', function()
    local ctx = h.fresh({
      responses = {
        { write_call('call_r1', 'clean.txt', 'agent version of clean\n'), write_call('call_r2', 'dirty.txt', 'agent version of dirty\n') },
        { { text = 'Wrote both.' } },
      },
      setup = { mode = 'autoEdit' },
    })
    h.write(ctx.ws .. '/clean.txt', 'clean before\n')
    h.write(ctx.ws .. '/dirty.txt', 'dirty before\n')
    vim.cmd.edit(ctx.ws .. '/clean.txt')
    local clean = vim.api.nvim_get_current_buf()
    vim.cmd.split(ctx.ws .. '/dirty.txt')
    local dirty = vim.api.nvim_get_current_buf()
    vim.api.nvim_buf_set_lines(dirty, 0, -1, false, { 'my unsaved work' })
    assert.is_true(vim.bo[dirty].modified)
    vim.cmd('Tandem prompt write both')
    h.wait_turn_end('completed')
    assert.equals('agent version of dirty\n', h.read(ctx.ws .. '/dirty.txt'))
    h.wait(function()
      return h.buf_text(clean) == 'agent version of clean'
    end, 'the unmodified buffer to show the agent\'s text')
    assert.is_false(vim.bo[clean].modified)
    assert.equals('my unsaved work', h.buf_text(dirty), 'unsaved changes are never clobbered')
    assert.is_true(vim.bo[dirty].modified)
    local n = h.wait_note('has unsaved changes')
    assert.equals(vim.log.levels.WARN, n.level)
    assert.truthy(n.msg:find('dirty.txt', 1, true), n.msg)
    assert.truthy(n.msg:find(':e!', 1, true), n.msg)
    assert.truthy(h.chat_has('dirty.txt, but buffer'), h.chat())
    assert.is_nil(n.msg:find('clean.txt', 1, true), 'only the modified buffer is warned about')
  end)

  it('a shell command that rewrites open files reloads the clean buffer and warns about the modified one (noautoread)', function()
    -- With 'autoread' off (not Neovim's default) :checktime would ask; the plugin answers instead.
    local saved_autoread = vim.go.autoread
    vim.go.autoread = false
    finally(function()
      vim.go.autoread = saved_autoread
    end)
    local ctx = h.fresh({
      responses = {
        { { tool_call = { id = 'call_sh_w', name = 'shell',
          arguments = { command = "printf 'shell wrote clean\\n' > clean.txt && printf 'shell wrote dirty\\n' > dirty.txt" } } } },
        { { text = 'Shell done.' } },
      },
      setup = { mode = 'fullAuto' },
    })
    h.write(ctx.ws .. '/clean.txt', 'clean before\n')
    h.write(ctx.ws .. '/dirty.txt', 'dirty before\n')
    h.write(ctx.ws .. '/untouched.txt', 'untouched\n')
    vim.cmd.edit(ctx.ws .. '/clean.txt')
    local clean = vim.api.nvim_get_current_buf()
    vim.cmd.split(ctx.ws .. '/dirty.txt')
    local dirty = vim.api.nvim_get_current_buf()
    vim.api.nvim_buf_set_lines(dirty, 0, -1, false, { 'my unsaved work' })
    vim.cmd.split(ctx.ws .. '/untouched.txt')
    vim.cmd('Tandem prompt run the shell')
    h.wait_turn_end('completed')
    assert.equals('shell wrote dirty\n', h.read(ctx.ws .. '/dirty.txt'))
    h.wait(function()
      return h.buf_text(clean) == 'shell wrote clean'
    end, 'the clean buffer to show what the command wrote')
    assert.equals('my unsaved work', h.buf_text(dirty))
    local n = h.wait_note('has unsaved changes')
    assert.truthy(n.msg:find('dirty.txt', 1, true), n.msg)
    for _, note in ipairs(h.ctx().notes) do
      assert.is_nil(note.msg:find('untouched.txt', 1, true), 'an unchanged file is left alone: ' .. note.msg)
    end
  end)
end)
