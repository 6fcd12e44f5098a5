-- tests/spec/lifecycle_spec.lua: server lifecycle — missing binary, crash and restart, Content-Length framing, no setup(), health, chat layouts.
local h = require('helpers')

describe('server lifecycle', function()
  after_each(h.teardown)

  it('a missing binary gives a notification with the next step', function()
    h.fresh({ setup = { cmd = { '/nonexistent/tandem-missing', 'serve' } } })
    vim.cmd('Tandem prompt hi')
    local n = h.wait_note('was not found')
    assert.equals(vim.log.levels.ERROR, n.level)
    assert.truthy(n.msg:find('cargo build', 1, true), n.msg)
    assert.truthy(n.msg:find(':Tandem restart', 1, true), n.msg)
    assert.is_nil(require('tandem').state.client)
  end)

  it('a server that dies is reported, and :Tandem restart brings a working one back', function()
    h.fresh({ responses = { { { text = 'before the crash' } }, { { text = 'after the restart' } } } })
    vim.cmd('Tandem prompt one')
    h.wait_turn_end('completed')
    local t = require('tandem')
    local pid = t.state.client.pid
    assert.truthy(pid)
    vim.uv.kill(pid, 'sigkill')
    local n = h.wait_note('exited unexpectedly')
    assert.truthy(n.msg:find(':Tandem restart', 1, true), n.msg)
    assert.is_nil(t.state.client)
    vim.cmd('Tandem restart')
    h.wait_note('server restarted')
    assert.are_not.equal(pid, t.state.client.pid)
    vim.cmd('Tandem prompt two')
    h.wait_chat('after the restart')
  end)

  it('works over Content-Length framing through vim.lsp.rpc', function()
    local ctx = h.fresh({
      responses = {
        { { text = 'framed ' }, { tool_call = { id = 'call_cl', name = 'write_file', arguments = { path = 'cl.txt', content = 'cl\n' } } } },
        { { text = 'framed done' } },
      },
      setup = { framing = 'content-length' },
    })
    vim.cmd('Tandem prompt framed')
    h.wait_float()
    h.press('y')
    h.wait_turn_end('completed')
    assert.equals('content-length', require('tandem').state.client.framing)
    assert.equals('contentLength', require('tandem').state.info.capabilities.framing)
    assert.equals('cl\n', h.read(ctx.ws .. '/cl.txt'))
    assert.truthy(h.chat_has('framed done'))
  end)

  it('works with no setup() call: the built-in scripted demo from `tandem` on PATH', function()
    local saved_path = vim.env.PATH
    vim.env.PATH = vim.fn.fnamemodify(h.bin, ':h') .. ':' .. saved_path
    local ok, err = pcall(function()
      local ctx = h.fresh({ setup = false })
      vim.env.TANDEM_HOME = ctx.dir .. '/data'
      vim.cmd('Tandem prompt hi')
      local v = h.wait_float()
      assert.truthy(h.buf_text(v.buf):find('tandem-demo.md', 1, true))
      h.press('y')
      h.wait_turn_end('completed')
      assert.truthy(h.read(ctx.ws .. '/tandem-demo.md'):find('You asked: hi', 1, true))
      assert.equals('scripted', require('tandem').state.session.model)
    end)
    vim.env.PATH = saved_path
    vim.env.TANDEM_HOME = nil
    assert(ok, err)
  end)

  it(':checkhealth tandem reports binary, version, config and a protocol handshake', function()
    h.fresh({ responses = {} })
    vim.cmd('silent checkhealth tandem')
    local text = h.buf_text(0)
    assert.truthy(text:find('OK server binary: ' .. h.bin, 1, true), text)
    assert.truthy(text:find('OK version: tandem', 1, true), text)
    assert.truthy(text:find('OK config file readable', 1, true), text)
    assert.truthy(text:find('OK protocol handshake: tandem', 1, true), text)
    assert.truthy(text:find('models: mock, mock-2', 1, true), text)
    assert.truthy(text:find('OK checkpoints: :Tandem diff, undo, edit and fork are available', 1, true), text)
    -- The handshake asks commands/list and hooks/list too (issue 27).
    assert.truthy(text:find('OK slash commands: `:Tandem prompt /` completes them', 1, true), text)
    assert.truthy(text:find('OK hooks: the server runs them and lists them', 1, true), text)
  end)

  it(':checkhealth tandem reports a missing binary as an error', function()
    h.fresh({ setup = { cmd = { '/nonexistent/tandem-missing', 'serve' } } })
    vim.cmd('silent checkhealth tandem')
    local text = h.buf_text(0)
    assert.truthy(text:find('ERROR server binary `/nonexistent/tandem-missing` not found', 1, true), text)
  end)

  it('opens the chat as a float when configured', function()
    h.fresh({ responses = { { { text = 'in a float' } } }, setup = { chat = { layout = 'float' } } })
    vim.cmd('Tandem chat')
    local win = require('tandem.ui').window()
    assert.truthy(win)
    assert.equals('editor', vim.api.nvim_win_get_config(win).relative)
    vim.cmd('Tandem prompt float')
    h.wait_chat('in a float')
  end)

  it('opens the chat as a vertical split by default and q closes it', function()
    h.fresh({ responses = {} })
    vim.cmd('Tandem chat')
    local ui = require('tandem.ui')
    local win = ui.window()
    assert.truthy(win)
    assert.equals('', vim.api.nvim_win_get_config(win).relative)
    assert.equals(2, #vim.api.nvim_tabpage_list_wins(0))
    assert.equals(win, vim.api.nvim_get_current_win())
    h.press('q')
    assert.is_nil(ui.window())
  end)

  it('doc/tandem.txt builds help tags for every command', function()
    local dir = vim.fn.tempname()
    vim.fn.mkdir(dir, 'p')
    vim.fn.writefile(vim.fn.readfile(h.root .. '/doc/tandem.txt'), dir .. '/tandem.txt')
    vim.cmd('helptags ' .. vim.fn.fnameescape(dir))
    local tags = table.concat(vim.fn.readfile(dir .. '/tags'), '\n')
    for _, sub in ipairs(require('tandem.commands').names()) do
      assert.truthy(tags:find(':Tandem-' .. sub .. '\t', 1, true), 'no help tag for :Tandem ' .. sub)
    end
  end)
end)
