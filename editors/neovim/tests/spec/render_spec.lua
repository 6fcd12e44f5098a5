-- tests/spec/render_spec.lua: the chat is rendered Markdown: filetype=markdown, treesitter highlighting (code blocks in the languages Neovim ships parsers for), and reasoning folded without hiding anything else.
local h = require('helpers')

--- Treesitter captures (as "lang:capture") at a 1-based row and 0-based column of the chat.
local function captures_at(row, col)
  local buf = require('tandem.ui').buffer()
  vim.treesitter.get_parser(buf):parse(true)
  return vim.tbl_map(function(c)
    return c.lang .. ':' .. c.capture
  end, vim.treesitter.get_captures_at_pos(buf, row - 1, col))
end

local function row_of(text)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(require('tandem.ui').buffer(), 0, -1, false)) do
    if l == text then
      return i
    end
  end
end

describe('the chat as Markdown', function()
  after_each(h.teardown)

  it('is filetype markdown with treesitter highlighting, lua code blocks included', function()
    h.fresh({ responses = { {
      { reasoning = 'plan the answer\nsecond thought\nthird thought' },
      { text = 'Here is **bold** and code:\n\n```lua\nlocal answer = 42\n```\n' },
      { text = '\nAfter the block.' },
    } } })
    vim.cmd('Tandem prompt show code')
    h.wait_turn_end('completed')
    local ui = require('tandem.ui')
    local buf = ui.buffer()
    assert.equals('markdown', vim.bo[buf].filetype)
    assert.truthy(vim.treesitter.highlighter.active[buf], 'treesitter highlights the chat')
    local code = row_of('local answer = 42')
    assert.truthy(code, h.chat())
    local caps = captures_at(code, 6) -- on `answer`
    assert.truthy(vim.tbl_contains(caps, 'lua:variable'), 'the lua parser highlights the code block: ' .. vim.inspect(caps))
    local bold_row = row_of('Here is **bold** and code:')
    local bold = captures_at(bold_row, 11)
    assert.truthy(vim.tbl_contains(bold, 'markdown_inline:markup.strong'), vim.inspect(bold))
    -- Reasoning is a closed fold; the answer, the code block and the text after it are not folded.
    local win = ui.window()
    local header = row_of('▸ reasoning')
    local folded = vim.api.nvim_win_call(win, function()
      local out = {}
      for _, r in ipairs({ header, header + 1, header + 3, bold_row, code, row_of('After the block.') }) do
        out[#out + 1] = vim.fn.foldclosed(r)
      end
      return out
    end)
    assert.same({ header, header, header, -1, -1, -1 }, folded)
  end)

  it('chat.markdown = false keeps the plain tandem_chat filetype', function()
    h.fresh({ responses = { { { text = 'plain' } } }, setup = { chat = { markdown = false } } })
    vim.cmd('Tandem prompt plain')
    h.wait_turn_end('completed')
    local buf = require('tandem.ui').buffer()
    assert.equals('tandem_chat', vim.bo[buf].filetype)
    assert.falsy(vim.treesitter.highlighter.active[buf])
  end)
end)
