-- tests/spec/review_spec.lua: every line of a proposed change is visible before it can be approved — in the float, the `e` buffer and the `d` split, also after a long reasoning block in the chat.
local h = require('helpers')
local window = require('tandem.window')

-- An existing 30-line file and a proposal that changes it in three places (three hunks).
local OLD, NEW = {}, {}
for i = 1, 30 do
  OLD[i] = 'line ' .. i
  NEW[i] = 'line ' .. i
end
NEW[3] = 'line three'
NEW[20] = 'line twenty'
NEW[21] = 'line twenty-one'
table.insert(NEW, 28, 'a new line after 27')
local OLD_TEXT = table.concat(OLD, '\n') .. '\n'
local NEW_TEXT = table.concat(NEW, '\n') .. '\n'
-- Every changed line, as the float shows it.
local DIFF_LINES = {
  '- line 3', '+ line three', '- line 20', '- line 21', '+ line twenty', '+ line twenty-one', '+ a new line after 27',
}

local function reasoning(n)
  local lines = {}
  for i = 1, n do
    lines[i] = ('reasoning step %d of %d'):format(i, n)
  end
  return table.concat(lines, '\n')
end

local function responses()
  return {
    {
      { reasoning = reasoning(14) },
      { text = 'I will change three places.' },
      { tool_call = { id = 'call_multi', name = 'write_file', arguments = { path = 'multi.txt', content = NEW_TEXT } } },
    },
    { { text = 'Changed.' } },
  }
end

--- Open the chat, focus it, and send the prompt with the chat's `i` key (the path of the bug).
local function prompt_from_chat(ctx, text)
  vim.cmd('Tandem chat')
  local chat_win = require('tandem.ui').window()
  assert.equals(chat_win, vim.api.nvim_get_current_win())
  table.insert(ctx.inputs, text)
  h.press('i')
  return chat_win
end

--- Every line of the buffer in `win` is on screen and outside any closed fold.
local function assert_all_visible(win, what)
  assert.is_false(vim.wo[win].foldenable, what .. ': foldenable is off')
  assert.is_false(window.has_closed_fold(win), what .. ': no closed fold')
  local above, below = window.hidden(win)
  assert.equals(0, above, what .. ': no line hidden above')
  assert.equals(0, below, what .. ': no line hidden below')
end

describe('reviewing a change', function()
  local saved
  before_each(function()
    saved = { lines = vim.o.lines, columns = vim.o.columns, foldmethod = vim.go.foldmethod, foldlevel = vim.go.foldlevel }
    vim.o.lines, vim.o.columns = 60, 160
    -- A user whose own config folds by indent everywhere: the review windows must not fold either
    -- (the diff's "- " / "+ " lines and the context lines differ in indent).
    vim.go.foldmethod, vim.go.foldlevel = 'indent', 0
  end)
  after_each(function()
    h.teardown()
    vim.o.lines, vim.o.columns = saved.lines, saved.columns
    vim.go.foldmethod, vim.go.foldlevel = saved.foldmethod, saved.foldlevel
  end)

  it('a multi-hunk edit after a 14-line reasoning block, prompted from the chat, is fully visible in the float', function()
    local ctx = h.fresh({ responses = responses() })
    h.write(ctx.ws .. '/multi.txt', OLD_TEXT)
    local chat_win = prompt_from_chat(ctx, 'change multi.txt')
    local v = h.wait_float()
    -- The chat really has its reasoning fold closed (the condition that used to leak).
    h.wait_chat('reasoning step 14 of 14')
    assert.is_true(window.has_closed_fold(chat_win), 'the chat folds its reasoning')
    local text = h.buf_text(v.buf)
    for _, l in ipairs(DIFF_LINES) do
      assert.truthy(text:find(l, 1, true), ('%q is in the float:\n%s'):format(l, text))
    end
    assert_all_visible(v.win, 'the float')
    -- Drawn: every buffer line of the float is inside its screen rows.
    assert.equals(vim.api.nvim_win_text_height(v.win, {}).all, vim.api.nvim_win_get_height(v.win))
    h.press('y')
    h.wait_turn_end('completed')
    assert.equals(NEW_TEXT, h.read(ctx.ws .. '/multi.txt'))
  end)

  it('the e buffer and the d split opened from that float show every line too', function()
    local ctx = h.fresh({ responses = responses() })
    h.write(ctx.ws .. '/multi.txt', OLD_TEXT)
    prompt_from_chat(ctx, 'change multi.txt')
    h.wait_float()
    h.press('e')
    local edit_win = vim.api.nvim_get_current_win()
    assert.truthy(vim.api.nvim_buf_get_name(0):find('tandem://edit/', 1, true))
    assert.is_false(vim.wo[edit_win].foldenable)
    assert.is_false(window.has_closed_fold(edit_win), 'no closed fold in the edit buffer')
    assert.are_not.equal("v:lua.require'tandem.ui'.foldexpr(v:lnum)", vim.wo[edit_win].foldexpr)
    vim.cmd('bwipeout!')
    local v = h.wait_float()
    h.press('d')
    local wins = vim.api.nvim_tabpage_list_wins(0)
    assert.equals(2, #wins)
    for _, w in ipairs(wins) do
      assert.is_true(vim.wo[w].diff)
      assert.is_false(vim.wo[w].foldenable, 'the diff windows do not fold unchanged text away')
      assert.is_false(window.has_closed_fold(w))
    end
    h.press('y')
    h.wait_turn_end('completed')
    assert.equals(NEW_TEXT, h.read(ctx.ws .. '/multi.txt'))
    assert.truthy(v)
  end)

  it("the chat's foldexpr folds nothing in another buffer", function()
    h.fresh({ responses = { { { reasoning = reasoning(5) }, { text = 'the answer' } } } })
    vim.cmd('Tandem prompt think')
    h.wait_turn_end('completed')
    -- A window that carries the chat's fold options onto another buffer (what inheriting did).
    local other = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_lines(other, 0, -1, false, vim.split(string.rep('some text\n', 20), '\n'))
    local win = vim.api.nvim_open_win(other, true, { split = 'below', win = -1 })
    vim.wo[win].foldmethod = 'expr'
    vim.wo[win].foldexpr = "v:lua.require'tandem.ui'.foldexpr(v:lnum)"
    vim.wo[win].foldenable = true
    vim.wo[win].foldlevel = 0
    vim.cmd('normal! zx')
    assert.is_false(window.has_closed_fold(win), 'no fold in a buffer that is not the chat')
  end)

  it('a proposal taller than the float: the footer counts hidden lines and y approves only after they were shown', function()
    vim.o.lines = 24
    local ctx = h.fresh({ responses = responses() })
    h.write(ctx.ws .. '/multi.txt', OLD_TEXT)
    vim.cmd('Tandem prompt change multi.txt')
    local v = h.wait_float()
    local _, below = window.hidden(v.win)
    assert.is_true(below > 0, 'the float cannot show it all at this size')
    local footer = vim.api.nvim_win_get_config(v.win).footer
    local footer_text = type(footer) == 'table' and footer[1][1] or tostring(footer)
    assert.truthy(footer_text:find(('%d more line'):format(below), 1, true), footer_text)
    assert.is_false(window.has_closed_fold(v.win))
    h.press('y')
    h.wait_note('not been on screen yet')
    assert.equals(0, #h.events('approvalResolved'), 'nothing approved unseen')
    assert.equals(OLD_TEXT, h.read(ctx.ws .. '/multi.txt'))
    h.press('G')
    h.press('y')
    h.wait_turn_end('completed')
    assert.equals(NEW_TEXT, h.read(ctx.ws .. '/multi.txt'))
  end)
end)
