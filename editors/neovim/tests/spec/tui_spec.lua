-- tests/spec/tui_spec.lua: drives a real TUI Neovim inside tmux (send-keys, capture-pane), checks what is on screen and keeps each capture in test-artifacts/.
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

local function keys(...)
  tmux(vim.list_extend({ 'send-keys', '-t', 'tui' }, { ... }))
end

--- Start the TUI Neovim in tmux (width x height) on the test's workspace, with tests/tui_init.lua.
local function start_tui(ctx, width, height)
  if vim.fn.executable('tmux') ~= 1 then
    error('tmux is not installed (apt-get install tmux)')
  end
  -- The Neovim under test: scripts/test names it (v:progpath is the running one).
  local nvim = vim.env.TANDEM_TEST_NVIM or vim.v.progpath
  local shell = ('cd %s && env TANDEM_NVIM_ROOT=%s TANDEM_BIN=%s TANDEM_TUI_CONFIG=%s TANDEM_TUI_DATA=%s %s -u %s -i NONE')
    :format(vim.fn.shellescape(ctx.ws), vim.fn.shellescape(h.root), vim.fn.shellescape(h.bin),
      vim.fn.shellescape(ctx.config), vim.fn.shellescape(ctx.dir .. '/data'),
      vim.fn.shellescape(nvim), vim.fn.shellescape(h.root .. '/tests/tui_init.lua'))
  local r = tmux({ 'new-session', '-d', '-s', 'tui', '-x', tostring(width), '-y', tostring(height), shell })
  assert.equals(0, r.code, r.stderr)
  -- Ready when the empty buffer's tildes are drawn.
  wait_screen({ '~' }, 'Neovim to start')
end

describe('the TUI in tmux', function()
  after_each(function()
    tmux({ 'kill-server' })
    h.teardown()
  end)

  it('shows the approval float with the diff, and y writes the file', function()
    local ctx = h.fresh({ responses = {
      { { text = 'Proposing a file.' }, { tool_call = { id = 'call_tui', name = 'write_file',
        arguments = { path = 'tmux.txt', content = 'hello from tmux\nsecond tmux line\n' } } } },
      { { text = 'TUI turn done.' } },
    } })
    start_tui(ctx, 150, 40)
    keys(':Tandem prompt write the tmux file', 'Enter')
    local shown = wait_screen({ 'Write tmux.txt', 'tmux.txt (new file, 2 lines)', '+ hello from tmux', '+ second tmux line', '[y] allow once', '[n] deny' },
      'the approval float with the diff')
    h.artifact('approval-float-new-file.txt', shown)
    -- The float is drawn over the chat: its border is on screen too.
    assert.truthy(shown:find('╭', 1, true), shown)
    keys('y')
    local done = wait_screen({ 'TUI turn done.', 'turn ended: completed' }, 'the end of the turn in the chat')
    h.artifact('chat-after-approval.txt', done)
    assert.equals('hello from tmux\nsecond tmux line\n', h.read(ctx.ws .. '/tmux.txt'))
  end)

  it('a multi-hunk edit after a 14-line reasoning block, prompted with i in the chat, is on screen whole', function()
    local old, new = {}, {}
    for i = 1, 30 do
      old[i] = 'line ' .. i
      new[i] = 'line ' .. i
    end
    new[3], new[20], new[21] = 'line three', 'line twenty', 'line twenty-one'
    table.insert(new, 28, 'a new line after 27')
    local steps = {}
    for i = 1, 14 do
      steps[i] = ('reasoning step %d of 14'):format(i)
    end
    local ctx = h.fresh({ responses = {
      { { reasoning = table.concat(steps, '\n') }, { text = 'I will change three places.' },
        { tool_call = { id = 'call_tui_multi', name = 'write_file',
          arguments = { path = 'multi.txt', content = table.concat(new, '\n') .. '\n' } } } },
      { { text = 'Three places changed.' } },
    } })
    h.write(ctx.ws .. '/multi.txt', table.concat(old, '\n') .. '\n')
    start_tui(ctx, 150, 50)
    keys(':Tandem chat', 'Enter')
    keys('i')
    wait_screen({ 'tandem>' }, 'the prompt input')
    keys('change multi.txt', 'Enter')
    local diff_lines = { '- line 3', '+ line three', '- line 20', '- line 21', '+ line twenty', '+ line twenty-one',
      '+ a new line after 27' }
    local wanted = vim.list_extend({ 'Write multi.txt', '[y] allow once' }, diff_lines)
    local shown = wait_screen(wanted, 'every diff line of the float')
    h.artifact('approval-float-after-reasoning.txt', shown)
    -- The chat behind it keeps its reasoning folded, and the float shows no fold line at all.
    assert.truthy(shown:find('▸ reasoning (', 1, true), shown)
    assert.is_nil(shown:find('+--', 1, true), 'no closed fold (default fold text) on screen:\n' .. shown)
    assert.is_nil(shown:find('more line', 1, true), 'nothing hidden below the float:\n' .. shown)
    keys('y')
    local done = wait_screen({ 'Three places changed.' }, 'the end of the turn')
    h.artifact('chat-after-multi-hunk.txt', done)
    assert.equals(table.concat(new, '\n') .. '\n', h.read(ctx.ws .. '/multi.txt'))
  end)
end)
