-- tests/spec/tui_spec.lua: drives a real TUI Neovim inside tmux (send-keys, capture-pane) and checks the approval float with its diff is on screen.
local h = require('helpers')

local socket = 'tandem-nvim-test-' .. vim.fn.getpid()

local function tmux(args)
  local cmd = { 'tmux', '-L', socket }
  vim.list_extend(cmd, args)
  return vim.system(cmd, { text = true }):wait(5000)
end

local function screen()
  local r = tmux({ 'capture-pane', '-p', '-t', 'tui' })
  return r.stdout or ''
end

local function wait_screen(texts, what)
  local last = ''
  local ok = vim.wait(h.TIMEOUT, function()
    last = screen()
    for _, t in ipairs(texts) do
      if not last:find(t, 1, true) then
        return false
      end
    end
    return true
  end, 50)
  if not ok then
    error(('timed out waiting for %s on the TUI screen; it shows:\n%s'):format(what, last), 2)
  end
  return last
end

describe('the TUI in tmux', function()
  after_each(function()
    tmux({ 'kill-server' })
    h.teardown()
  end)

  it('shows the approval float with the diff, and y writes the file', function()
    if vim.fn.executable('tmux') ~= 1 then
      error('tmux is not installed (apt-get install tmux)')
    end
    local ctx = h.fresh({ responses = {
      { { text = 'Proposing a file.' }, { tool_call = { id = 'call_tui', name = 'write_file',
        arguments = { path = 'tmux.txt', content = 'hello from tmux\nsecond tmux line\n' } } } },
      { { text = 'TUI turn done.' } },
    } })
    local shell = ('cd %s && env TANDEM_NVIM_ROOT=%s TANDEM_BIN=%s TANDEM_TUI_CONFIG=%s TANDEM_TUI_DATA=%s %s -u %s -i NONE')
      :format(vim.fn.shellescape(ctx.ws), vim.fn.shellescape(h.root), vim.fn.shellescape(h.bin),
        vim.fn.shellescape(ctx.config), vim.fn.shellescape(ctx.dir .. '/data'),
        vim.fn.shellescape(vim.v.progpath), vim.fn.shellescape(h.root .. '/tests/tui_init.lua'))
    local r = tmux({ 'new-session', '-d', '-s', 'tui', '-x', '150', '-y', '40', shell })
    assert.equals(0, r.code, r.stderr)
    -- Ready when the empty buffer's tildes are drawn.
    wait_screen({ '~' }, 'Neovim to start')
    tmux({ 'send-keys', '-t', 'tui', ':Tandem prompt write the tmux file', 'Enter' })
    local shown = wait_screen({ 'Write tmux.txt', 'tmux.txt (new file, 2 lines)', '+ hello from tmux', '+ second tmux line', '[y] allow once', '[n] deny' },
      'the approval float with the diff')
    -- The float is drawn over the chat: its border is on screen too.
    assert.truthy(shown:find('╭', 1, true), shown)
    tmux({ 'send-keys', '-t', 'tui', 'y' })
    wait_screen({ 'TUI turn done.', 'turn ended: completed' }, 'the end of the turn in the chat')
    assert.equals('hello from tmux\nsecond tmux line\n', h.read(ctx.ws .. '/tmux.txt'))
  end)
end)
