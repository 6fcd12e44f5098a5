-- tests/spec/hooks_render_spec.lua: how the chat draws a hookRan event and a slash command's output, from fabricated events (the real-server flows are in hooks_spec.lua and slash_spec.lua).
local h = require('helpers')

local function lines()
  return vim.api.nvim_buf_get_lines(require('tandem.ui').buffer(), 0, -1, false)
end

--- The 0-based row holding exactly `text`.
local function row_of(text)
  for i, l in ipairs(lines()) do
    if l == text then
      return i - 1
    end
  end
end

--- The line highlight of a 0-based row of the chat (nil without one).
local function line_hl(row)
  local ui = require('tandem.ui')
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(ui.buffer(), ui.ns, { row, 0 }, { row, -1 }, { details = true })) do
    if m[4].line_hl_group then
      return m[4].line_hl_group
    end
  end
end

describe('hook and command rendering', function()
  after_each(h.teardown)

  it('a hookRan is one line: exit code and time, a warning colour when it blocked, an error colour without exit code', function()
    h.fresh({ setup = false })
    local ui = require('tandem.ui')
    ui.render({ type = 'hookRan', sessionId = 's', seq = 1, event = 'PreToolUse', command = '.tandem/hooks/check.sh',
      exitCode = 0, durationMs = 3, blocked = false })
    ui.render({ type = 'hookRan', sessionId = 's', seq = 2, event = 'PreToolUse', command = 'exit 2', exitCode = 2,
      durationMs = 4, blocked = true })
    -- exitCode null decodes to nil (the rpc layer decodes with luanil).
    ui.render({ type = 'hookRan', sessionId = 's', seq = 3, event = 'Stop', command = 'sleep 99', durationMs = 1002,
      blocked = false })
    ui.render({ type = 'notice', sessionId = 's', seq = 4, kind = 'warning', text = 'hook `sleep 99` timed out after 1 s' })
    local ok = row_of('· hook PreToolUse `.tandem/hooks/check.sh` — exit 0, 3 ms')
    local blocked = row_of('· hook PreToolUse `exit 2` — exit 2, 4 ms, blocked')
    local killed = row_of('· hook Stop `sleep 99` — no exit code (it could not run, timed out or was killed), 1002 ms')
    assert.truthy(ok and blocked and killed, h.chat())
    assert.equals('Comment', line_hl(ok))
    assert.equals('DiagnosticWarn', line_hl(blocked))
    assert.equals('DiagnosticError', line_hl(killed))
    local warning = row_of('! warning: hook `sleep 99` timed out after 1 s')
    assert.truthy(warning, h.chat())
    assert.equals('WarningMsg', line_hl(warning))
    assert.same({ ok, blocked, killed, warning }, { 0, 1, 2, 3 }, 'in the order they came')
  end)

  it('a hookRan during streamed text waits for the text to end instead of splitting it', function()
    h.fresh({ setup = false })
    local ui = require('tandem.ui')
    ui.render({ type = 'assistantDelta', sessionId = 's', seq = 1, text = 'half a sen' })
    ui.render({ type = 'hookRan', sessionId = 's', seq = 2, event = 'Notification', command = 'notify-send hi',
      exitCode = 0, durationMs = 1, blocked = false })
    ui.render({ type = 'assistantDelta', sessionId = 's', seq = 3, text = 'tence.' })
    ui.render({ type = 'assistantMessage', sessionId = 's', seq = 4, text = 'half a sentence.' })
    assert.truthy(row_of('half a sentence.'), h.chat())
    assert.truthy(row_of('· hook Notification `notify-send hi` — exit 0, 1 ms'), h.chat())
    assert.truthy(row_of('half a sentence.') < row_of('· hook Notification `notify-send hi` — exit 0, 1 ms'))
  end)

  it("a command's output goes under its prompt as Markdown, headed by the command; the prompt is no turn", function()
    h.fresh({ setup = false })
    local ui = require('tandem.ui')
    local turn = ui.user_prompt('/status')
    ui.command_result(turn, { name = 'status', output = '**Model:** mock\n\n- mode: ask\n- hooks: none\n' })
    local l = lines()
    local prompt = row_of('/status')
    assert.truthy(prompt, h.chat())
    assert.same({ '/status', '── /status ──', '**Model:** mock', '', '- mode: ask', '- hooks: none' },
      vim.list_slice(l, prompt + 1, prompt + 6), h.chat())
    assert.equals(#l, prompt + 6, 'no trailing blank line')
    assert.equals('Special', line_hl(prompt + 1))
    assert.is_nil(line_hl(prompt + 2), 'the output keeps Markdown highlighting, no line colour over it')
    assert.equals('status', turn.command)
    assert.is_nil(turn.id)
    assert.truthy(turn.failed, 'no turn for the turn keys')
    -- A command with no output still says it ran.
    ui.command_result(ui.user_prompt('/mode plan'), { name = 'mode' })
    assert.truthy(row_of('── /mode ── (done, no output)'), h.chat())
  end)
end)
