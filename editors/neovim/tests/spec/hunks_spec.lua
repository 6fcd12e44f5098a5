-- tests/spec/hunks_spec.lua: per-hunk accept and reject in the d diff split: do in the proposal or dp in the original rejects a hunk, u accepts it again, and what is approved is exactly the proposal buffer (editedContent).
local h = require('helpers')

local OLD = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n'
local NEW = 'ONE\ntwo\nthree\nfour\nFIVE\nsix\nseven\neight\nnine\nTEN\n'

--- Prompt a write of NEW over OLD in hunks.txt and open its d split; returns ctx and the split's windows.
local function open_split(extra_responses)
  local responses = { { { tool_call = { id = 'call_h', name = 'write_file', arguments = { path = 'hunks.txt', content = NEW } } } } }
  vim.list_extend(responses, extra_responses or { { { text = 'Written.' } } })
  local ctx = h.fresh({ responses = responses })
  h.write(ctx.ws .. '/hunks.txt', OLD)
  vim.cmd('Tandem prompt change hunks.txt')
  h.wait_float()
  h.press('d')
  local wins = vim.api.nvim_tabpage_list_wins(0)
  assert.equals(2, #wins)
  return ctx, wins[1], wins[2]
end

local function completed_update()
  return h.wait_event('toolCallUpdate', function(e)
    return e.status == 'completed'
  end)
end

describe('per-hunk review in the d split', function()
  after_each(h.teardown)

  it('do in the proposal and dp in the original reject one hunk each; y writes exactly the proposal buffer', function()
    local ctx, old_win, new_win = open_split()
    assert.is_true(vim.bo[vim.api.nvim_win_get_buf(new_win)].modifiable, 'the proposal can change')
    assert.is_false(vim.bo[vim.api.nvim_win_get_buf(old_win)].modifiable, 'the original cannot')
    -- Reject the first hunk (ONE) from the proposal side with do.
    vim.api.nvim_set_current_win(new_win)
    vim.api.nvim_win_set_cursor(new_win, { 1, 0 })
    h.press('do')
    -- Reject the last hunk (TEN) from the original side with dp.
    vim.api.nvim_set_current_win(old_win)
    vim.api.nvim_win_set_cursor(old_win, { 10, 0 })
    h.press('dp')
    local new_buf = vim.api.nvim_win_get_buf(new_win)
    local want = 'one\ntwo\nthree\nfour\nFIVE\nsix\nseven\neight\nnine\nten'
    assert.equals(want, h.buf_text(new_buf))
    h.press('y')
    h.wait_turn_end('completed')
    assert.equals(want .. '\n', h.read(ctx.ws .. '/hunks.txt'), 'the file holds the accepted hunk only')
    local upd = completed_update()
    assert.equals(want .. '\n', upd.diff[1].newText, 'the server wrote the edited version')
    assert.truthy(upd.result:find('user edited', 1, true), upd.result)
  end)

  it('u accepts a rejected hunk again; y with every hunk accepted sends no editedContent', function()
    local ctx, _, new_win = open_split()
    vim.api.nvim_set_current_win(new_win)
    vim.api.nvim_win_set_cursor(new_win, { 5, 0 })
    h.press('do')
    assert.truthy(h.buf_text(vim.api.nvim_win_get_buf(new_win)):find('\nfive\n', 1, true))
    h.press('u')
    assert.equals(NEW:sub(1, -2), h.buf_text(vim.api.nvim_win_get_buf(new_win)))
    h.press('y')
    h.wait_turn_end('completed')
    assert.equals(NEW, h.read(ctx.ws .. '/hunks.txt'))
    local upd = completed_update()
    assert.is_nil(upd.result:find('user edited', 1, true), 'nothing was edited: ' .. upd.result)
  end)

  it('the wrong-side key explains itself and changes nothing; the winbar names the keys', function()
    local _, old_win, new_win = open_split()
    vim.api.nvim_set_current_win(old_win)
    vim.api.nvim_win_set_cursor(old_win, { 1, 0 })
    h.press('do')
    h.wait_note('the original (left) does not change')
    assert.equals(OLD:sub(1, -2), h.buf_text(vim.api.nvim_win_get_buf(old_win)))
    assert.truthy(vim.wo[new_win].winbar:find('proposal · do: reject hunk · u: undo · y: approve this', 1, true), vim.wo[new_win].winbar)
    h.press('n')
  end)

  it('q back to the float drops the hunk choices and says so', function()
    local ctx, _, new_win = open_split()
    vim.api.nvim_set_current_win(new_win)
    vim.api.nvim_win_set_cursor(new_win, { 1, 0 })
    h.press('do')
    h.press('q')
    h.wait_note('your hunk choices in the split were dropped')
    h.wait_float()
    h.press('Gy') -- the float approves once its last line was on screen
    h.wait_turn_end('completed')
    assert.equals(NEW, h.read(ctx.ws .. '/hunks.txt'))
  end)
end)
