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
  it('an edit applied in autoEdit: its diff folded in the chat, opened with zo, the open buffer reloaded, the gauge in the bar', function()
    local ctx = h.fresh({ responses = {
      { { text = 'Changing it.' }, { tool_call = { id = 'call_tui_auto', name = 'write_file',
        arguments = { path = 'reload.txt', content = 'first line\nCHANGED BY THE AGENT\nthird line\n' } } } },
      { { text = 'Applied without asking.' } },
    } })
    h.write(ctx.ws .. '/reload.txt', 'first line\nsecond line\nthird line\n')
    start_tui(ctx, 160, 40)
    keys(':e reload.txt', 'Enter')
    wait_screen({ 'second line' }, 'the file in a buffer')
    keys(':Tandem mode autoEdit', 'Enter')
    keys(':Tandem prompt change reload.txt', 'Enter')
    local folded = wait_screen({ 'Applied without asking.', '▸ applied diff · reload.txt · +1 −1', 'lines folded, zo opens',
      'CHANGED BY THE AGENT', 'ctx ', '/128k', 'autoEdit' }, 'the folded diff, the reloaded buffer and the gauge')
    h.artifact('applied-diff-folded.txt', folded)
    -- The diff lines are folded in the chat: "- second line" is nowhere on screen yet.
    assert.is_nil(folded:find('- second line', 1, true), folded)
    keys(':Tandem chat', 'Enter')
    keys('/applied diff', 'Enter')
    keys('zo')
    local opened = wait_screen({ '```diff', '- second line', '+ CHANGED BY THE AGENT' }, 'the diff opened with zo')
    h.artifact('applied-diff-open.txt', opened)
    assert.equals('first line\nCHANGED BY THE AGENT\nthird line\n', h.read(ctx.ws .. '/reload.txt'))
  end)

  it('@ completes a workspace file in the prompt input and the file reaches the model', function()
    local ctx = h.fresh({ responses = { { { text = 'The alias module returns a table.' } } } })
    h.write(ctx.ws .. '/src/alias.lua', 'return { name = "alias-module-body" }\n')
    start_tui(ctx, 150, 40)
    keys(':Tandem chat', 'Enter')
    keys('i')
    wait_screen({ 'tandem>' }, 'the prompt input')
    keys('explain @src/ali', 'Tab')
    local completed = wait_screen({ 'tandem> explain @src/alias.lua' }, 'the @ completion')
    h.artifact('prompt-at-completion.txt', completed)
    keys('Enter')
    local done = wait_screen({ '+ attached src/alias.lua', 'The alias module returns a table.' }, 'the answer')
    h.artifact('chat-with-attachment.txt', done)
    local user = h.message_text(h.requests()[1], 'user')
    assert.truthy(user:find('alias-module-body', 1, true), user)
  end)

  it('the d split rejects one hunk with do and y writes the rest', function()
    local old = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n'
    local new = 'ONE\ntwo\nthree\nfour\nfive\nsix\nSEVEN\n'
    local ctx = h.fresh({ responses = {
      { { tool_call = { id = 'call_tui_hunk', name = 'write_file', arguments = { path = 'hunks.txt', content = new } } } },
      { { text = 'Hunks done.' } },
    } })
    h.write(ctx.ws .. '/hunks.txt', old)
    start_tui(ctx, 150, 40)
    keys(':Tandem prompt change hunks.txt', 'Enter')
    wait_screen({ 'Write hunks.txt', '[d] split diff' }, 'the float')
    keys('d')
    wait_screen({ 'proposal · do: reject hunk · u: undo · y: approve this · n: deny · q: back', 'original · dp: reject hunk' }, 'the split with its key bar')
    keys('gg', 'do')
    local split = wait_screen({ 'SEVEN' }, 'the split after do')
    h.artifact('hunk-split-after-do.txt', split)
    keys('y')
    wait_screen({ 'Hunks done.' }, 'the end of the turn')
    assert.equals('one\ntwo\nthree\nfour\nfive\nsix\nSEVEN\n', h.read(ctx.ws .. '/hunks.txt'))
  end)

  it(':Tandem sessions lists titles and dates, newest first, and resumes the one picked', function()
    local ctx = h.fresh({ responses = { { { text = 'answer one' } }, { { text = 'answer two' } } } })
    start_tui(ctx, 150, 40)
    keys(':Tandem prompt the older topic', 'Enter')
    wait_screen({ 'answer one' }, 'the first turn')
    keys(':Tandem new', 'Enter')
    keys(':Tandem prompt the newer topic', 'Enter')
    wait_screen({ 'answer two' }, 'the second turn')
    keys(':Tandem sessions', 'Enter')
    local list = wait_screen({ 'resume tandem session (newest first)', '1: ● the newer topic', '2:   the older topic', 'today ' },
      'the session list')
    h.artifact('sessions-list.txt', list)
    keys('2', 'Enter')
    wait_screen({ 'resumed session' }, 'the resumed session')
  end)
end)
