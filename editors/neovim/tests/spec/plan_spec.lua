-- tests/spec/plan_spec.lua: the model's plan (update_plan) against the real server — one block at the top of the chat replaced in place by each `plan` event, the plan of session/load on resume, an empty plan and a new session clear it, require('tandem').plan(), plan_status(), the winbar and :Tandem plan.
local h = require('helpers')

local function plan_call(id, steps)
  local entries = {}
  for _, s in ipairs(steps) do
    entries[#entries + 1] = { content = s[1], status = s[2] }
  end
  return { tool_call = { id = id, name = 'update_plan', arguments = { entries = entries } } }
end

local FIRST = { { 'Read the code', 'in_progress' }, { 'Fix the parser', 'pending' }, { 'Run the suite', 'pending' } }
local SECOND = { { 'Read the code', 'completed' }, { 'Fix the parser', 'in_progress' }, { 'Run the suite', 'pending' } }

--- The plan block the chat should show for SECOND, from its first row.
local SECOND_BLOCK = {
  '▾ Plan (1/3)',
  '  [x] Read the code',
  '  [~] Fix the parser',
  '  [ ] Run the suite',
  '',
}

local function chat_lines()
  return vim.api.nvim_buf_get_lines(require('tandem.ui').buffer(), 0, -1, false)
end

--- How many times `text` occurs in the chat.
local function occurrences(text)
  local n, from = 0, 1
  local chat = h.chat()
  while true do
    local i = chat:find(text, from, true)
    if not i then
      return n
    end
    n, from = n + 1, i + #text
  end
end

local function wait_turns(n)
  h.wait(function()
    return #h.events('turnEnded') >= n
  end, n .. ' ended turn(s)')
end

--- The plan entries as { content, status } pairs.
local function pairs_of(entries)
  return vim.tbl_map(function(e)
    return { e.content, e.status }
  end, entries)
end

describe('plan', function()
  after_each(h.teardown)

  it('two update_plan calls show one plan block at the top, replaced in place; :Tandem plan and the statusline API', function()
    h.fresh({ responses = {
      { { text = 'Planning.' }, plan_call('call_p1', FIRST) },
      { plan_call('call_p2', SECOND) },
      { { text = 'Half way there.' } },
    } })
    local t = require('tandem')
    assert.same({}, t.plan(), 'no plan before any session')
    assert.equals('', t.plan_status())
    vim.cmd('Tandem prompt make a plan')
    wait_turns(1)
    assert.equals(2, #h.events('plan'), 'the model updated its plan twice')
    h.wait_chat('Half way there.')
    -- One block, the latest entries, at the top; the conversation below it is intact.
    local lines = chat_lines()
    assert.same(SECOND_BLOCK, vim.list_slice(lines, 1, #SECOND_BLOCK), h.chat())
    assert.equals(1, occurrences('▾ Plan ('), h.chat())
    assert.equals(0, occurrences('Plan (0/3)'), h.chat())
    assert.equals(1, occurrences('[x] Read the code'), h.chat())
    assert.equals(0, occurrences('[~] Read the code'), 'the first plan is replaced, not kept:\n' .. h.chat())
    assert.equals(1, occurrences('make a plan'), h.chat())
    assert.equals(1, occurrences('Planning.'), h.chat())
    assert.equals(5, require('tandem.ui').plan_rows())
    -- The block's rows carry their highlights (in the plan's own namespace).
    local marks = vim.api.nvim_buf_get_extmarks(require('tandem.ui').buffer(), require('tandem.ui').plan_ns, 0, -1,
      { details = true })
    local hl = {}
    for _, m in ipairs(marks) do
      hl[m[2]] = m[4].line_hl_group
    end
    assert.same({ [0] = 'Title', [1] = 'Comment', [2] = 'DiagnosticInfo' }, hl)
    -- The API for statuslines.
    assert.same(SECOND, pairs_of(t.plan()))
    t.plan()[1].status = 'changed' -- a copy: the caller cannot change the plan
    assert.equals('completed', t.plan()[1].status)
    assert.equals('plan 1/3', t.plan_status())
    assert.truthy(t.winbar():find('plan 1/3', 1, true), t.winbar())
    assert.truthy(t.status():find('plan 1/3', 1, true), t.status())
    -- :Tandem plan shows it.
    vim.cmd('Tandem plan')
    local n = h.wait_note('plan (1/3)')
    assert.truthy(n.msg:find('[x] Read the code\n[~] Fix the parser\n[ ] Run the suite', 1, true), n.msg)
    -- A restart leaves the session (the next prompt starts a new one): the plan goes with it.
    vim.cmd('Tandem restart')
    h.wait_note('server restarted')
    assert.same({}, t.plan())
    assert.equals(0, occurrences('Plan ('), h.chat())
    assert.equals(0, require('tandem.ui').plan_rows())
  end)

  it('a resume shows the stored plan; an empty plan and a new session clear it', function()
    local ctx = h.fresh({ responses = {
      { plan_call('call_p1', FIRST) },
      { plan_call('call_p2', SECOND) },
      { { text = 'Planned twice.' } },
      { plan_call('call_p3', {}) },
      { { text = 'Plan dropped.' } },
      { { text = 'A fresh start.' } },
    } })
    local t = require('tandem')
    vim.cmd('Tandem chat')
    vim.cmd('Tandem prompt plan it')
    wait_turns(1)
    local sid = t.state.session.sessionId
    h.wait(function()
      return t.plan_status() == 'plan 1/3'
    end, 'the second plan')
    -- A new session has no plan: the block goes at once.
    vim.cmd('Tandem new')
    assert.same({}, t.plan())
    assert.equals(0, occurrences('Plan ('), h.chat())
    assert.equals(0, require('tandem.ui').plan_rows())
    assert.is_nil(t.winbar():find('plan', 1, true), t.winbar())
    -- Resume: the plan comes from session/load, above the history.
    local done = false
    t.load_session(sid, { done = function() done = true end })
    h.wait(function()
      return done
    end, 'the resume')
    h.wait_chat('Planned twice.')
    local lines = chat_lines()
    assert.same(SECOND_BLOCK, vim.list_slice(lines, 1, #SECOND_BLOCK), h.chat())
    assert.equals(1, occurrences('▾ Plan ('), h.chat())
    assert.truthy(lines[#SECOND_BLOCK + 1]:find('resumed session ' .. sid, 1, true), h.chat())
    assert.same(SECOND, pairs_of(t.plan()))
    -- The model empties its plan: the block goes, the chat stays.
    vim.cmd('Tandem prompt drop the plan')
    h.wait_chat('Plan dropped.')
    wait_turns(2)
    h.wait(function()
      return #t.plan() == 0
    end, 'the empty plan')
    assert.equals(0, occurrences('Plan ('), h.chat())
    assert.equals(0, occurrences('[x] Read the code'), h.chat())
    assert.equals(0, require('tandem.ui').plan_rows())
    assert.truthy(chat_lines()[1]:find('resumed session ' .. sid, 1, true), h.chat())
    assert.truthy(h.chat_has('Planned twice.'), h.chat())
    assert.equals('', t.plan_status())
    vim.cmd('Tandem plan')
    h.wait_note('no plan: the model has not set one')
    -- A resume of a session with no plan shows none.
    vim.cmd('Tandem new')
    done = false
    t.load_session(sid, { done = function() done = true end })
    h.wait(function()
      return done
    end, 'the second resume')
    assert.equals(0, occurrences('Plan ('), h.chat())
    assert.same({}, t.plan())
    local _ = ctx
  end)

  it('a rewind that brings an earlier plan back keeps the block above a turn that began on the first row', function()
    h.fresh({ responses = {
      { plan_call('call_p0', FIRST) },
      { { text = 'Zeroth turn.' } },
      { plan_call('call_p1', SECOND) },
      { { text = 'First turn.' } },
    } })
    local t = require('tandem')
    local ui = require('tandem.ui')
    vim.cmd('Tandem chat')
    vim.cmd('Tandem prompt zero')
    wait_turns(1)
    -- An emptied chat: the next prompt's block begins on row 0, and the plan is then put above it.
    ui.clear()
    vim.cmd('Tandem prompt one')
    wait_turns(2)
    h.wait_chat('First turn.')
    assert.equals('▾ Plan (1/3)', chat_lines()[1], h.chat())
    -- Undo the conversation of turn one: the server brings back turn zero's plan and the chat drops
    -- turn one, but not the plan block above it.
    h.ctx().select = function(items)
      for _, item in ipairs(items) do
        if type(item) == 'table' and item.restore == 'conversation' then
          return item
        end
      end
    end
    vim.cmd('Tandem undo')
    h.wait_event('rewound')
    h.wait(function()
      return not h.chat_has('First turn.') and t.plan_status() == 'plan 0/3'
    end, 'turn one to leave the chat and the first plan to come back')
    assert.same(FIRST, pairs_of(t.plan()))
    assert.equals('▾ Plan (0/3)', chat_lines()[1], h.chat())
    assert.equals(1, occurrences('▾ Plan ('), h.chat())
    assert.equals(5, ui.plan_rows())
    -- The plan, then the chat emptied by the rewind: its note takes the empty line under the block.
    local lines = chat_lines()
    assert.equals(6, #lines, h.chat())
    assert.same({ '▾ Plan (0/3)', '  [~] Read the code', '  [ ] Fix the parser', '  [ ] Run the suite', '' },
      vim.list_slice(lines, 1, 5))
    assert.truthy(lines[6]:find('^⟲ undid turn'), lines[6])
  end)
end)
