-- tests/spec/hooks_spec.lua: hooks against the real server — the trust question for a workspace's project hooks (before the first prompt, and on resume), :Tandem hooks and :Tandem hooks trust, hookRan lines for a hook that ran, blocked, failed or timed out, the health lines.
local h = require('helpers')

--- A fresh plugin whose server reads the user's hooks and commands from the test's own config folder.
local function fresh(responses, setup)
  return h.fresh({ responses = responses, setup = vim.tbl_deep_extend('force', {
    env = function()
      return { XDG_CONFIG_HOME = h.ctx().dir .. '/xdg' }
    end,
  }, setup or {}) })
end

--- A hooks file in Claude Code's format: { Event = { { command, matcher?, timeout? }, … } }.
local function hooks_json(spec)
  local out = { hooks = {} }
  for event, list in pairs(spec) do
    out.hooks[event] = {}
    for _, hk in ipairs(list) do
      table.insert(out.hooks[event], { matcher = hk.matcher,
        hooks = { { type = 'command', command = hk.command, timeout = hk.timeout } } })
    end
  end
  return vim.json.encode(out)
end

--- Answer the trust question with `answer` ('trust' or 'skip'); returns the list of questions asked.
local function answer_trust(ctx, answer)
  local asked = {}
  ctx.select = function(items, o)
    if items[1] == 'trust' then
      table.insert(asked, { prompt = o.prompt, items = vim.tbl_map(o.format_item, items), chat = h.chat() })
      return answer
    end
  end
  return asked
end

--- A stand-in for vim.health that records each report as "level: message".
local function fake_health()
  local out = {}
  local rec = {}
  for _, level in ipairs({ 'ok', 'info', 'warn', 'error' }) do
    rec[level] = function(msg)
      table.insert(out, level .. ': ' .. msg)
    end
  end
  return rec, out
end

local function wait_turns(n)
  h.wait(function()
    return #h.events('turnEnded') >= n
  end, n .. ' ended turn(s)')
end

--- The 0-based row of the chat holding `text`, and its line highlight.
local function find_line(text)
  local ui = require('tandem.ui')
  for i, l in ipairs(vim.api.nvim_buf_get_lines(ui.buffer(), 0, -1, false)) do
    if l:find(text, 1, true) then
      local hl
      for _, m in ipairs(vim.api.nvim_buf_get_extmarks(ui.buffer(), ui.ns, { i - 1, 0 }, { i - 1, -1 },
        { details = true })) do
        hl = hl or m[4].line_hl_group
      end
      return i - 1, hl, l
    end
  end
end

describe('hooks', function()
  after_each(h.teardown)

  it('untrusted project hooks: asked before the first prompt with their commands; Trust runs them, a line per run', function()
    local ctx = fresh({ { { text = 'Hi.' } } })
    local log = ctx.dir .. '/ran.txt'
    local cmd = 'echo submitted >> ' .. log
    h.write(ctx.ws .. '/.tandem/hooks.json', hooks_json({ UserPromptSubmit = { { command = cmd } } }))
    local asked = answer_trust(ctx, 'trust')
    vim.cmd('Tandem prompt hello')
    wait_turns(1)
    assert.equals(1, #asked)
    local q = asked[1].prompt
    h.artifact('hooks-trust-question.txt', q .. '\n\n' .. table.concat(asked[1].items, '\n'))
    assert.truthy(q:find('.tandem/hooks.json', 1, true), q)
    assert.truthy(q:find('UserPromptSubmit: ' .. cmd, 1, true), q)
    assert.truthy(q:find('outside its sandbox', 1, true), q)
    assert.truthy(asked[1].items[1]:find('^Trust'), vim.inspect(asked[1].items))
    -- Asked before the first prompt was sent (its block is written just before it goes), so the
    -- answer applies to it: the first prompt already ran the hook.
    assert.is_nil(asked[1].chat:find('━━ You ━━', 1, true), asked[1].chat)
    local ran = h.wait_event('hookRan')
    assert.equals('UserPromptSubmit', ran.event)
    assert.equals(cmd, ran.command)
    assert.equals(0, ran.exitCode)
    assert.equals('submitted\n', h.read(log))
    h.wait_chat(('· hook UserPromptSubmit `%s` — exit 0, %d ms'):format(cmd, ran.durationMs))
    local _, hl = find_line('· hook UserPromptSubmit')
    assert.equals('Comment', hl)
    h.wait_note('trusted the project hooks (.tandem/hooks.json)')
    -- :Tandem hooks lists them and says they are trusted.
    vim.cmd('Tandem hooks')
    local n = h.wait_note('hooks of session ')
    assert.truthy(n.msg:find('[project] UserPromptSubmit: ' .. cmd, 1, true), n.msg)
    assert.truthy(n.msg:find('project hook files .tandem/hooks.json: trusted', 1, true), n.msg)
    local health, out = fake_health()
    require('tandem.health').check_slash_and_hooks(health, '')
    assert.truthy(vim.tbl_contains(out,
      'ok: hooks of this session: 1 (1 from the workspace); project hook files .tandem/hooks.json trusted'), vim.inspect(out))
  end)

  it('"Not now" leaves them off, is asked once, and :Tandem hooks trust turns them on', function()
    local ctx = fresh({ { { text = 'One.' } }, { { text = 'Two.' } }, { { text = 'Three.' } } })
    local log = ctx.dir .. '/ran.txt'
    local cmd = 'echo submitted >> ' .. log
    h.write(ctx.ws .. '/.tandem/hooks.json', hooks_json({ UserPromptSubmit = { { command = cmd } } }))
    local asked = answer_trust(ctx, 'skip')
    vim.cmd('Tandem prompt one')
    wait_turns(1)
    assert.equals(1, #asked)
    local n = h.wait_note('project hooks not trusted (.tandem/hooks.json)')
    assert.equals(vim.log.levels.WARN, n.level)
    assert.same({}, h.events('hookRan'))
    assert.is_nil(h.read(log))
    vim.cmd('Tandem hooks')
    n = h.wait_note('hooks of session ')
    assert.equals(vim.log.levels.WARN, n.level)
    assert.truthy(n.msg:find('NOT trusted', 1, true), n.msg)
    local health, out = fake_health()
    require('tandem.health').check_slash_and_hooks(health, '')
    assert.truthy(vim.tbl_contains(out, 'warn: hooks of this session: 1 (1 from the workspace); the project hook files '
      .. '.tandem/hooks.json are not trusted, so their hooks do not run'), vim.inspect(out))
    -- A new session in the same workspace is not asked again.
    vim.cmd('Tandem new')
    vim.cmd('Tandem prompt two')
    wait_turns(2)
    assert.equals(1, #asked)
    assert.same({}, h.events('hookRan'))
    vim.cmd('Tandem hooks trust')
    h.wait_note('trusted the project hooks (.tandem/hooks.json)')
    vim.cmd('Tandem prompt three')
    wait_turns(3)
    local ran = h.wait_event('hookRan')
    assert.equals(cmd, ran.command)
    assert.equals('submitted\n', h.read(log))
    assert.truthy(vim.tbl_contains(vim.fn.getcompletion('Tandem hooks ', 'cmdline'), 'trust'))
  end)

  it('a resumed session asks too, listing the hooks as the files are now', function()
    local ctx, t = fresh({ { { text = 'One.' } }, { { text = 'Two.' } } })
    local first = 'echo first >> ' .. ctx.dir .. '/ran.txt'
    local second = 'echo second >> ' .. ctx.dir .. '/ran.txt'
    h.write(ctx.ws .. '/.tandem/hooks.json', hooks_json({ UserPromptSubmit = { { command = first } } }))
    local asked = answer_trust(ctx, 'skip')
    vim.cmd('Tandem prompt one')
    wait_turns(1)
    local sid = t.state.session.sessionId
    assert.equals(1, #asked)
    h.write(ctx.ws .. '/.claude/settings.json', hooks_json({ UserPromptSubmit = { { command = second } } }))
    vim.cmd('Tandem restart')
    h.wait_note('server restarted')
    asked = answer_trust(ctx, 'trust')
    local done = false
    t.load_session(sid, { done = function() done = true end })
    h.wait(function()
      return done and #asked == 1
    end, 'the resume and its trust question')
    local q = asked[1].prompt
    assert.truthy(q:find('UserPromptSubmit: ' .. first, 1, true), q)
    assert.truthy(q:find('UserPromptSubmit: ' .. second, 1, true), q)
    assert.truthy(q:find('.claude/settings.json', 1, true), q)
    h.wait_note('trusted the project hooks')
    vim.cmd('Tandem prompt two')
    wait_turns(2)
    h.wait(function()
      return #h.events('hookRan') == 2
    end, 'both hooks to run')
    -- Matching hooks run in parallel (as Claude Code runs them), so their lines come in either order.
    local lines = vim.split(vim.trim(h.read(ctx.dir .. '/ran.txt')), '\n')
    table.sort(lines)
    assert.same({ 'first', 'second' }, lines)
  end)

  it('a hook that blocks, one that fails and one that times out: a line each, coloured by outcome, and warning notices', function()
    local ctx = fresh({
      { { tool_call = { id = 'call_sh', name = 'shell', arguments = { command = 'echo ran > shell-ran.txt' } } } },
      { { text = 'The hook said no.' } },
    }, { mode = 'fullAuto' })
    h.write(ctx.ws .. '/.tandem/hooks.json', hooks_json({
      UserPromptSubmit = { { command = 'echo failing >&2; exit 1' }, { command = 'sleep 5', timeout = 1 } },
      PreToolUse = { { matcher = 'Bash', command = 'echo no shell here >&2; exit 2' } },
    }))
    answer_trust(ctx, 'trust')
    vim.cmd('Tandem prompt run something')
    wait_turns(1)
    h.wait_chat('The hook said no.')
    assert.is_nil(h.read(ctx.ws .. '/shell-ran.txt'), 'the blocked command did not run')
    local blocked = h.wait_event('hookRan', function(e)
      return e.blocked
    end)
    assert.equals('PreToolUse', blocked.event)
    assert.equals(2, blocked.exitCode)
    local _, hl, line = find_line('· hook PreToolUse `echo no shell here >&2; exit 2` — exit 2, ')
    assert.truthy(line and line:find(', blocked$'), tostring(line) .. '\n' .. h.chat())
    assert.equals('DiagnosticWarn', hl)
    _, hl = find_line('· hook UserPromptSubmit `echo failing >&2; exit 1` — exit 1, ')
    assert.equals('Comment', hl, h.chat())
    local timed_out = h.wait_event('hookRan', function(e)
      return e.command == 'sleep 5'
    end)
    assert.is_nil(timed_out.exitCode)
    _, hl = find_line('· hook UserPromptSubmit `sleep 5` — no exit code')
    assert.equals('DiagnosticError', hl, h.chat())
    h.artifact('hooks-outcomes.txt', h.chat())
    -- The failure and the timeout are warning notices too, drawn as such.
    h.wait(function()
      return #h.events('notice') >= 2
    end, 'two warning notices')
    for _, ev in ipairs(h.events('notice')) do
      assert.equals('warning', ev.kind)
      local row
      row, hl = find_line('! warning: ' .. vim.split(ev.text, '\n')[1])
      assert.truthy(row, ev.text .. '\n' .. h.chat())
      assert.equals('WarningMsg', hl)
    end
  end)

  it('without project hooks nothing is asked; :Tandem hooks says none, trust is refused; no session: it says so', function()
    local ctx = fresh({ { { text = 'Hi.' } } })
    local asked = answer_trust(ctx, 'trust')
    vim.cmd('Tandem hooks')
    h.wait_note('no session is open: hooks are read with the session')
    vim.cmd('Tandem prompt hello')
    wait_turns(1)
    vim.cmd('Tandem hooks')
    local n = h.wait_note('hooks of session ')
    assert.truthy(n.msg:find('\n  none', 1, true), n.msg)
    vim.cmd('Tandem hooks trust')
    n = h.wait_note('this workspace has no project hooks to trust')
    assert.equals(vim.log.levels.WARN, n.level)
    assert.same({}, asked)
    assert.same({}, h.events('hookRan'))
  end)
end)
