-- tandem.ui: the chat buffer — streamed assistant text, folded reasoning, tool calls with live status and shell output, notices, usage.
--
-- The buffer is written only by this module. Positions that must survive later inserts (a tool
-- call's header and last line, reasoning ranges) are extmarks, because shell output for an
-- earlier tool call can arrive after later blocks were written. The model's plan (update_plan) is
-- a block of its own at the top of the buffer, rewritten in place on every `plan` event.
local config = require('tandem.config')
local diff = require('tandem.diff')

local M = {}

local ns = vim.api.nvim_create_namespace('tandem.chat')
M.ns = ns
-- The plan block's highlights: a namespace of their own, so rewriting the block clears them
-- without touching the chat's marks (a turn's first mark may sit on row 0, inside the block).
local plan_ns = vim.api.nvim_create_namespace('tandem.plan')
M.plan_ns = plan_ns
-- Rows of the plan block at the top of the buffer (0: no plan shown). The chat starts below it.
local plan_rows = 0

local buf = nil -- the chat buffer
local stream = nil -- { kind = 'assistant'|'reasoning', start_mark, end_mark, text }
local tools = {} -- toolCallId -> { header, tail, name, title, kind, mcp?, status, out_open }
-- The turns shown, oldest first (see tandem.ChatTurn): where each starts, so a rewind can drop it
-- and the turn keys (d u e f) know which turn the cursor is on.
local turns = {}
-- Foldable sections, each { start_mark, end_mark, kind = 'reasoning'|'diff' }: a reasoning block, or
-- the diff of an applied edit. Each fold covers its own rows only (its header row and body).
local folds = {}
local fold_cache = { tick = -1, levels = {} }
-- Row of the empty line a text stream leaves after a final newline; the next block reuses it so
-- streamed text is not followed by a stray blank line.
local blank_row = nil

local STATUS_ICON = {
  pending = '○',
  running = '◐',
  completed = '✔',
  failed = '✘',
  denied = '⊘',
  interrupted = '■',
}
local STATUS_HL = {
  pending = 'Comment',
  running = 'DiagnosticInfo',
  completed = 'DiagnosticOk',
  failed = 'DiagnosticError',
  denied = 'DiagnosticWarn',
  interrupted = 'DiagnosticWarn',
}

local function valid()
  return buf ~= nil and vim.api.nvim_buf_is_valid(buf)
end

--- The chat buffer, created on first use (hidden until opened).
function M.buffer()
  if valid() then
    return buf
  end
  buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, 'tandem://chat')
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  vim.bo[buf].modifiable = false
  M.set_filetype(buf)
  stream, tools, folds, turns, plan_rows = nil, {}, {}, {}, 0
  M.apply_buffer_keymaps(buf)
  -- A chat buffer made again (the old one was wiped) shows the plan still in force.
  local plan = require('tandem.server').state.plan
  if plan and #plan > 0 then
    M.set_plan(plan)
  end
  return buf
end

--- The chat is Markdown (the model writes Markdown): filetype=markdown, highlighted by the
--- treesitter parsers Neovim ships (markdown, markdown_inline, and in code blocks lua, c, vim,
--- vimdoc, query; other languages stay plain), with regex syntax as the fallback. No third-party
--- plugin is needed, but markdown plugins the user has apply too. chat.markdown = false keeps the
--- plain `tandem_chat` filetype.
function M.set_filetype(b)
  if config.options.chat.markdown == false then
    vim.bo[b].filetype = 'tandem_chat'
    return
  end
  -- Set from inside the buffer: a ftplugin's :setlocal of window options (markdown folding, if the
  -- user enabled it) then lands on a scratch window, never on the window the user is in.
  vim.api.nvim_buf_call(b, function()
    vim.bo[b].filetype = 'markdown'
  end)
  M.treesitter = pcall(vim.treesitter.start, b, 'markdown')
end

local function with_modifiable(fn)
  local b = M.buffer()
  vim.bo[b].modifiable = true
  local ok, err = pcall(fn, b)
  vim.bo[b].modifiable = false
  if not ok then
    error(err)
  end
end

local function line_count()
  return vim.api.nvim_buf_line_count(M.buffer())
end

--- Nothing below the plan block but the one empty line a fresh chat has.
local function is_empty()
  local b = M.buffer()
  return vim.api.nvim_buf_line_count(b) == plan_rows + 1
    and vim.api.nvim_buf_get_lines(b, plan_rows, plan_rows + 1, false)[1] == ''
end

local function mark_row(id)
  local pos = vim.api.nvim_buf_get_extmark_by_id(M.buffer(), ns, id, {})
  return pos[1]
end

local function set_mark(row, id, opts)
  opts = opts or {}
  opts.id = id
  return vim.api.nvim_buf_set_extmark(M.buffer(), ns, row, 0, opts)
end

--- Replace the text of one row in place. Replacing the whole line (nvim_buf_set_lines) would move
--- the extmarks on it to the next row, so a tool call whose block is that one row would lose its
--- tail mark and later lines would land one row too low; replacing the text keeps them on the row.
local function replace_line(b, row, text)
  local old = vim.api.nvim_buf_get_lines(b, row, row + 1, false)[1] or ''
  vim.api.nvim_buf_set_text(b, row, 0, row, #old, { text })
end

--- Keep chat windows scrolled to the end. The window the user is in follows only while its
--- cursor was on the last line before this write, so scrolling up to read is not undone.
local function follow(prev_count)
  local b = M.buffer()
  local last = line_count()
  local cur = vim.api.nvim_get_current_win()
  for _, win in ipairs(vim.fn.win_findbuf(b)) do
    if win ~= cur or vim.api.nvim_win_get_cursor(win)[1] >= (prev_count or last) then
      pcall(vim.api.nvim_win_set_cursor, win, { last, 0 })
    end
  end
end

-- Notes written while a text stream was open ({ lines, hl }), shown right after that stream's
-- block: written at once they would end the stream and split its words across lines.
local deferred = {}
local append

--- Write the deferred notes (the stream they waited for has ended).
local function flush_deferred()
  local notes = deferred
  deferred = {}
  for _, n in ipairs(notes) do
    append(n[1], n[2])
  end
end

--- Append lines at the end; returns the 0-based row of the first one. Ends any text stream.
function append(lines, hl)
  stream = nil
  if #deferred > 0 then
    flush_deferred()
  end
  local first
  local prev = line_count()
  local reuse = blank_row ~= nil and blank_row == prev - 1
  blank_row = nil
  with_modifiable(function(b)
    if reuse and vim.api.nvim_buf_get_lines(b, prev - 1, prev, false)[1] == '' then
      vim.api.nvim_buf_set_lines(b, prev - 1, prev, false, lines)
      first = prev - 1
    elseif is_empty() then
      vim.api.nvim_buf_set_lines(b, plan_rows, plan_rows + 1, false, lines)
      first = plan_rows
    else
      first = vim.api.nvim_buf_line_count(b)
      vim.api.nvim_buf_set_lines(b, -1, -1, false, lines)
    end
    if hl then
      for i = 0, #lines - 1 do
        vim.api.nvim_buf_set_extmark(b, ns, first + i, 0, { line_hl_group = hl })
      end
    end
  end)
  follow(prev)
  return first
end

local function split_lines(text)
  return vim.split(text or '', '\n', { plain = true })
end

--- Public: one informational line (used by init for session/restart notes).
function M.line(text, hl)
  append(split_lines(text), hl)
end

--- Public: a note about something the user did (a steer queued) that must not cut into the text
--- streaming now: written after the streamed block ends, or at once when nothing streams.
function M.note(text, hl)
  if stream then
    table.insert(deferred, { split_lines(text), hl })
  else
    append(split_lines(text), hl)
  end
end

--- Stream text into the block of `kind`, starting a new block when the kind changes.
local function stream_text(kind, text)
  if text == nil or text == '' then
    return
  end
  local b = M.buffer()
  if not stream or stream.kind ~= kind then
    if kind == 'reasoning' then
      local row = append({ '▸ reasoning', '' }, 'Comment')
      local start_mark = set_mark(row)
      local end_mark = set_mark(row + 1)
      table.insert(folds, { start_mark = start_mark, end_mark = end_mark, kind = 'reasoning' })
      -- One extmark spans the whole block and is stretched as text streams in.
      local hl_mark = vim.api.nvim_buf_set_extmark(b, ns, row + 1, 0, { hl_group = 'Comment', hl_eol = true, end_row = row + 1 })
      stream = { kind = kind, start_mark = start_mark, end_mark = end_mark, hl_mark = hl_mark, hl_row = row + 1, text = '' }
    else
      local row = append({ '' })
      stream = { kind = kind, start_mark = set_mark(row), text = '' }
    end
  end
  stream.text = stream.text .. text
  local last = vim.api.nvim_buf_line_count(b) - 1
  -- Only assistant text: a reasoning block's last row carries its fold's end mark.
  blank_row = (kind == 'assistant' and text:sub(-1) == '\n') and (last + select(2, text:gsub('\n', ''))) or nil
  with_modifiable(function()
    local cur = vim.api.nvim_buf_get_lines(b, last, last + 1, false)[1] or ''
    local parts = split_lines(text)
    parts[1] = cur .. parts[1]
    vim.api.nvim_buf_set_lines(b, last, last + 1, false, parts)
    local new_last = vim.api.nvim_buf_line_count(b) - 1
    if kind == 'reasoning' then
      local last_line = vim.api.nvim_buf_get_lines(b, new_last, new_last + 1, false)[1] or ''
      vim.api.nvim_buf_set_extmark(b, ns, stream.hl_row, 0, {
        id = stream.hl_mark, hl_group = 'Comment', hl_eol = true, end_row = new_last, end_col = #last_line,
      })
      set_mark(new_last, stream.end_mark)
    end
  end)
  follow(last + 1)
end

--- Insert lines right after the block of a tool call (it may no longer be the last block).
local function tool_append(tc, lines, hl)
  local b = M.buffer()
  local tail = mark_row(tc.tail)
  with_modifiable(function()
    vim.api.nvim_buf_set_lines(b, tail + 1, tail + 1, false, lines)
    for i = 1, #lines do
      if hl then
        vim.api.nvim_buf_set_extmark(b, ns, tail + i, 0, { line_hl_group = hl })
      end
    end
    set_mark(tail + #lines, tc.tail)
  end)
  follow(line_count() - #lines)
end

--- Streamed shell output: chunks need not end at a newline, so continue the open line.
local function tool_output(tc, chunk)
  local b = M.buffer()
  local parts = split_lines(chunk)
  local ends_open = parts[#parts] ~= ''
  if not ends_open then
    table.remove(parts)
  end
  if #parts == 0 then
    tc.out_open = false
    return
  end
  if tc.out_open then
    local tail = mark_row(tc.tail)
    with_modifiable(function()
      local cur = vim.api.nvim_buf_get_lines(b, tail, tail + 1, false)[1] or ''
      replace_line(b, tail, cur .. parts[1])
    end)
    table.remove(parts, 1)
  end
  if #parts > 0 then
    local out = vim.tbl_map(function(p)
      return '  │ ' .. p
    end, parts)
    tool_append(tc, out, 'String')
  end
  tc.out_open = ends_open
end

local function tool_header(tc)
  if tc.mcp then
    -- An MCP tool: its own name and its server (the title repeats them as `server: tool`).
    return ('%s %s  MCP server `%s`  [%s]'):format(STATUS_ICON[tc.status] or '•', tostring(tc.mcp.tool),
      tostring(tc.mcp.server), tc.status)
  end
  return ('%s %s  %s  [%s]'):format(STATUS_ICON[tc.status] or '•', tc.name, tc.title or '', tc.status)
end

local function set_tool_status(tc, status)
  tc.status = status
  local b = M.buffer()
  local row = mark_row(tc.header)
  with_modifiable(function()
    replace_line(b, row, tool_header(tc))
    set_mark(row, tc.header, { line_hl_group = STATUS_HL[status] or 'Normal' })
  end)
end

local function result_preview(text)
  local lines = split_lines((text:gsub('\n$', '')))
  local out = {}
  for i = 1, math.min(#lines, 6) do
    table.insert(out, '  → ' .. lines[i])
  end
  if #lines > 6 then
    table.insert(out, ('  → … %d more lines'):format(#lines - 6))
  end
  return out
end

local last_error_notice = nil -- text of this turn's error notice; turnEnded repeats it in error.message

local RENDER = {}

function RENDER.turnStarted(ev)
  last_error_notice = nil
  local foreign = false
  if ev.turnId and not M.turn_by_id(ev.turnId) then
    local last = turns[#turns]
    if last and last.id == nil and not last.failed then
      last.id = ev.turnId -- the prompt's answer has not named it yet
    else
      foreign = true -- a turn this chat did not prompt (another attached client's)
    end
  end
  if foreign and type(ev.prompt) == 'string' and ev.prompt ~= '' then
    -- Show the other client's prompt under "━━ You ━━" as if typed here, then the answer.
    M.user_prompt(ev.prompt, nil, nil, ev.turnId)
    append({ '', '━━ tandem · ' .. (ev.model or '?') .. ' ━━' }, 'Title')
    return
  end
  local row = append({ '', '━━ tandem · ' .. (ev.model or '?') .. ' ━━' }, 'Title')
  if foreign then
    -- Without its prompt (a retry, a resumed turn) it starts at its own header.
    M.add_turn({ id = ev.turnId, first = row, header = row + 1, last = row + 1 })
  end
end

local delta_seen = false -- assistant text of the current message was streamed

function RENDER.assistantDelta(ev)
  delta_seen = true
  stream_text('assistant', ev.text)
end

function RENDER.reasoningDelta(ev)
  stream_text('reasoning', ev.text)
end

function RENDER.assistantMessage(ev)
  -- Deltas already showed the text; a server that does not stream sends it only here.
  if not delta_seen and ev.text and ev.text ~= '' then
    append(split_lines(ev.text))
  end
  delta_seen = false
  stream = nil
  flush_deferred()
end

function RENDER.toolCall(ev)
  local tc = {
    name = ev.name,
    title = ev.title,
    kind = ev.kind,
    mcp = type(ev.mcp) == 'table' and ev.mcp or nil,
    status = 'pending',
    out_open = false,
  }
  local row = append({ tool_header(tc) })
  tc.header = set_mark(row, nil, { line_hl_group = STATUS_HL.pending })
  tc.tail = set_mark(row)
  tools[ev.toolCallId] = tc
end

local function ensure_tool(ev)
  local tc = tools[ev.toolCallId]
  if not tc then
    -- An update for a call we never saw (for example after resuming): give it a block.
    RENDER.toolCall({ toolCallId = ev.toolCallId, name = ev.name or 'tool', title = ev.title or ev.toolCallId })
    tc = tools[ev.toolCallId]
  end
  return tc
end

function RENDER.approvalRequested(ev)
  local tc = ensure_tool(ev)
  tc.request_id = ev.requestId
  local lines = { '  ? waiting for your approval (:Tandem approvals shows it again)' }
  if ev.command then
    table.insert(lines, '  $ ' .. ev.command .. (ev.cwd and ('   (in ' .. ev.cwd .. ')') or ''))
  end
  local first = mark_row(tc.tail) + 1
  tool_append(tc, lines, nil)
  -- The waiting line is replaced by the decision once the approval resolves.
  tc.wait_mark = set_mark(first, nil, { line_hl_group = 'WarningMsg' })
end

local DECISION_TEXT = {
  once = '✔ allowed once',
  alwaysTool = '✔ allowed (always for this tool)',
  alwaysCommand = '✔ allowed (always for this command)',
  deny = '⊘ denied',
}

function RENDER.approvalResolved(ev)
  local tc
  for _, t in pairs(tools) do
    if t.request_id == ev.requestId then
      tc = t
    end
  end
  local text = '  ' .. (DECISION_TEXT[ev.decision] or ev.decision)
  local hl = ev.decision == 'deny' and 'DiagnosticWarn' or 'DiagnosticOk'
  if tc and tc.wait_mark then
    local row = mark_row(tc.wait_mark)
    with_modifiable(function(b)
      replace_line(b, row, text)
      set_mark(row, tc.wait_mark, { line_hl_group = hl })
    end)
    tc.wait_mark = nil
  elseif tc then
    tool_append(tc, { text }, hl)
  else
    append({ text }, 'Comment')
  end
end

function RENDER.questionAsked(ev)
  local lines = { '? ' .. (ev.question or 'question') }
  if ev.plan then
    vim.list_extend(lines, vim.tbl_map(function(l)
      return '  ' .. l
    end, split_lines(ev.plan)))
  end
  if ev.choices then
    table.insert(lines, '  choices: ' .. table.concat(ev.choices, ' | '))
  end
  append(lines, 'Question')
end

--- Counts of added and removed lines of one diff entry.
local function diff_counts(entry)
  local added, removed = 0, 0
  for _, hunk in ipairs(diff.hunks(entry.oldText, entry.newText)) do
    removed = removed + hunk[2]
    added = added + hunk[4]
  end
  return added, removed
end

--- The diff of an applied edit, under the tool call's block: a header row that says what changed,
--- then every line of the change in a ```diff block. The whole section is one fold, closed by
--- default (chat.fold_diffs); the fold's line names the file and counts the lines it holds.
local function tool_diff(tc, entries)
  for _, entry in ipairs(entries or {}) do
    local added, removed = diff_counts(entry)
    local lines = { ('  ▸ applied diff · %s · +%d −%d'):format(entry.path or '?', added, removed), '```diff' }
    local body, marks = diff.render(entry)
    local offset = #lines
    vim.list_extend(lines, body)
    table.insert(lines, '```')
    local first = mark_row(tc.tail) + 1
    -- Neovim computes the folds of inserted lines while inserting them, so the fold must be known
    -- before the lines exist: its rows stand in for the extmarks until they can be set.
    local fold = { kind = 'diff', rows = { first, first + #lines - 1 } }
    table.insert(folds, fold)
    tool_append(tc, lines, nil)
    local b = M.buffer()
    vim.api.nvim_buf_set_extmark(b, ns, first, 0, { line_hl_group = 'Special' })
    for _, m in ipairs(marks) do
      vim.api.nvim_buf_set_extmark(b, ns, first + offset + m[1], 0, { line_hl_group = m[2] })
    end
    fold.start_mark, fold.end_mark, fold.rows = set_mark(first), set_mark(first + #lines - 1), nil
  end
end

function RENDER.toolCallUpdate(ev)
  local tc = ensure_tool(ev)
  if ev.status and ev.status ~= tc.status then
    set_tool_status(tc, ev.status)
  end
  if ev.output and ev.output ~= '' then
    tc.had_output = true
    tool_output(tc, ev.output)
  end
  if ev.result and ev.result ~= '' and ev.status ~= 'running' then
    tc.out_open = false
    if tc.had_output then
      -- The output already streamed above ("│ …"); the result repeats it after its first line
      -- (`exit code N`), so show only that line.
      tool_append(tc, { '  → ' .. split_lines(ev.result)[1] .. ' (output above)' }, 'Comment')
    else
      tool_append(tc, result_preview(ev.result), 'Comment')
    end
  end
  if ev.diff and ev.status == 'completed' then
    tool_diff(tc, ev.diff)
  end
end

function RENDER.steeringApplied(ev)
  append({ '↪ steering applied: ' .. (ev.text or '') }, 'Special')
end

function RENDER.compacting()
  append({ '· compacting the conversation…' }, 'Comment')
end

function RENDER.compacted(ev)
  append({ '· compacted' .. (ev.summary and (': ' .. ev.summary:sub(1, 200)) or '') }, 'Comment')
end

function RENDER.modelSwitched(ev)
  append({ ('⇄ model %s → %s%s'):format(ev.from or '?', ev.to or '?', ev.warning and ('  (' .. ev.warning .. ')') or '') }, 'Special')
end

function RENDER.notice(ev)
  if ev.kind == 'rewound' then
    -- History shows this where rewound turns were (a live rewind drops them instead).
    append(vim.tbl_map(function(l)
      return '⟲ ' .. l
    end, split_lines(ev.text or 'rewound')), 'Comment')
    return
  end
  if ev.kind == 'error' then
    last_error_notice = ev.text
  end
  local hl = ev.kind == 'error' and 'ErrorMsg' or 'WarningMsg'
  append(vim.tbl_map(function(l)
    return '! ' .. l
  end, split_lines(('%s: %s'):format(ev.kind or 'notice', ev.text or ''))), hl)
end

--- A hook of the session ran (`hookRan`): one line, "· hook PreToolUse `cmd` — exit 0, 3 ms". A hook
--- that blocked what it guards is a warning; one with no exit code (it could not start, timed out
--- or was killed) an error, its reason in the `warning` notice that follows.
---@param ev tandem.HookRan
function RENDER.hookRan(ev)
  local text, hl = M.hook_line(ev)
  M.note(text, hl)
end

--- The chat line of a `hookRan` event and its highlight group.
---@param ev tandem.HookRan
---@return string text, string hl
function M.hook_line(ev)
  local outcome
  if type(ev.exitCode) == 'number' then
    outcome = 'exit ' .. ev.exitCode
  else
    outcome = 'no exit code (it could not run, timed out or was killed)'
  end
  local text = ('· hook %s `%s` — %s, %d ms%s'):format(tostring(ev.event or '?'), tostring(ev.command or '?'), outcome,
    tonumber(ev.durationMs) or 0, ev.blocked and ', blocked' or '')
  local hl = 'Comment'
  if type(ev.exitCode) ~= 'number' then
    hl = 'DiagnosticError'
  elseif ev.blocked then
    hl = 'DiagnosticWarn'
  end
  return text, hl
end

function RENDER.usage(ev)
  local cached = ev.cachedTokens and (' · cached ' .. ev.cachedTokens) or ''
  local gauge = require('tandem').gauge_text()
  append({ ('  usage · %s · in %d · out %d%s%s'):format(ev.model or '?', ev.inputTokens or 0, ev.outputTokens or 0, cached,
    gauge ~= '' and (' · ' .. gauge) or '') }, 'NonText')
end

function RENDER.turnEnded(ev)
  local lines = { '── turn ended: ' .. (ev.reason or '?') .. ' ──' }
  if ev.error then
    if ev.error.message ~= nil and ev.error.message == last_error_notice then
      -- The error notice just above says it already; only the next step is new.
      if ev.error.retriable then
        table.insert(lines, '! :Tandem retry tries the same request again')
      end
    else
      table.insert(lines, '! ' .. (ev.error.message or 'error') .. (ev.error.retriable and '  (:Tandem retry)' or ''))
    end
  end
  last_error_notice = nil
  append(lines, ev.reason == 'completed' and 'Comment' or 'WarningMsg')
end

-- ── The plan ─────────────────────────────────────────────────────────────────────────────

M.PLAN_MARKER = { completed = '[x]', in_progress = '[~]', pending = '[ ]' }
local PLAN_HL = { completed = 'Comment', in_progress = 'DiagnosticInfo' }

--- How many entries of a plan are completed.
---@param entries tandem.PlanEntry[]
---@return integer
function M.plan_done(entries)
  local done = 0
  for _, e in ipairs(entries or {}) do
    if e.status == 'completed' then
      done = done + 1
    end
  end
  return done
end

--- The lines of a plan, one marker per entry (an entry's further lines are indented under it).
---@param entries tandem.PlanEntry[]
---@param indent? string before each marker
---@return string[] lines, (string|false)[] hls the highlight of each line
function M.plan_lines(entries, indent)
  indent = indent or ''
  local lines, hls = {}, {}
  for _, e in ipairs(entries or {}) do
    local marker = M.PLAN_MARKER[e.status] or '[?]'
    for i, l in ipairs(split_lines(tostring(e.content or ''))) do
      lines[#lines + 1] = i == 1 and (indent .. marker .. ' ' .. l) or (indent .. (' '):rep(#marker + 1) .. l)
      hls[#hls + 1] = PLAN_HL[e.status] or false
    end
  end
  return lines, hls
end

--- Show the plan at the top of the chat: "▾ Plan (done/all)", an entry per line, then a blank line;
--- an empty or nil plan removes the block. The block is replaced in place, never appended.
---@param entries? tandem.PlanEntry[]
function M.set_plan(entries)
  local none = entries == nil or #entries == 0
  if none and (not valid() or plan_rows == 0) then
    return -- nothing shown (and no chat buffer made just to show nothing)
  end
  local b = M.buffer()
  local lines, hls = {}, {}
  if entries and #entries > 0 then
    local body, body_hls = M.plan_lines(entries, '  ')
    lines = { ('▾ Plan (%d/%d)'):format(M.plan_done(entries), #entries) }
    hls = { 'Title' }
    vim.list_extend(lines, body)
    vim.list_extend(hls, body_hls)
    lines[#lines + 1] = ''
    hls[#hls + 1] = false
  end
  local prev = line_count()
  local old = plan_rows
  with_modifiable(function()
    vim.api.nvim_buf_clear_namespace(b, plan_ns, 0, -1)
    vim.api.nvim_buf_set_lines(b, 0, old, false, lines)
    for i, hl in ipairs(hls) do
      if hl then
        vim.api.nvim_buf_set_extmark(b, plan_ns, i - 1, 0, { line_hl_group = hl })
      end
    end
  end)
  plan_rows = #lines
  -- Rows kept as numbers move with the chat below the block.
  local delta = plan_rows - old
  if blank_row then
    blank_row = blank_row + delta
  end
  if stream and stream.hl_row then
    stream.hl_row = stream.hl_row + delta
  end
  follow(prev)
end

--- Rows of the plan block at the top of the chat (0 when no plan is shown).
---@return integer
function M.plan_rows()
  return plan_rows
end

function RENDER.plan(ev)
  M.set_plan(ev.entries)
end

--- Render one session/event.
function M.render(ev)
  local fn = RENDER[ev.type]
  if fn then
    fn(ev)
  end
end

--- Write a prompt's block; returns its first row, its header row and its last row (0-based).
local function prompt_block(text, context, attached)
  local lines = { '', '━━ You ━━' }
  vim.list_extend(lines, split_lines(text))
  if context then
    local first = split_lines(context)[1]
    table.insert(lines, '  + ' .. first)
  end
  for _, path in ipairs(attached or {}) do
    table.insert(lines, '  + attached ' .. path)
  end
  local first = append(lines, nil)
  local b = M.buffer()
  local row = line_count() - #lines + 1
  vim.api.nvim_buf_set_extmark(b, ns, row, 0, { line_hl_group = 'Title' })
  return first, row, line_count() - 1
end

--- Show a prompt under "━━ You ━━"; returns the turn it starts (its id is set once the server
--- names it: set_turn_id, or the turn's turnStarted).
---@param text string
---@param context? string
---@param attached? string[]
---@param turn_id? string known for history
---@return tandem.ChatTurn
function M.user_prompt(text, context, attached, turn_id)
  local first, header, last = prompt_block(text, context, attached)
  return M.add_turn({ id = turn_id, first = first, header = header, last = last, text = text, context = context })
end

--- The output of a slash command that ran at once (a `prompt` answer with `command` and no
--- `turnId`), under its prompt: a "── /name ──" line, then the Markdown output as it came (the chat
--- is Markdown, so it is highlighted as such). The prompt's block is marked as a command, not a turn.
---@param turn? tandem.ChatTurn the prompt's block
---@param cmd tandem.CommandResult
function M.command_result(turn, cmd)
  if turn then
    turn.id = nil
    turn.failed = true -- no turn to diff, undo, edit or fork
    turn.command = cmd.name
  end
  local output = type(cmd.output) == 'string' and cmd.output:gsub('%s+$', '') or ''
  local lines = { ('── /%s ──'):format(tostring(cmd.name or '?')) }
  if output ~= '' then
    vim.list_extend(lines, split_lines(output))
  else
    lines[1] = lines[1] .. ' (done, no output)'
  end
  local first = append(lines)
  vim.api.nvim_buf_set_extmark(M.buffer(), ns, first, 0, { line_hl_group = 'Special' })
end

---@class tandem.ChatTurn A turn shown in the chat.
---@field id? string its turnId (nil until the server names it)
---@field text? string the prompt as typed here (nil for a turn from history or another client)
---@field context? string the selection sent with it
---@field failed? boolean the prompt was refused, so no turn exists
---@field command? string the slash command the prompt ran (with no id: a built-in that ran at once)
---@field first_mark integer extmark on the turn's first row (the blank line above its header)
---@field header_mark integer extmark on its header row ("━━ You ━━")
---@field last_mark integer extmark on the last row of its prompt block

--- Record a turn from its rows (0-based): first (where dropping it starts), header and last (the
--- prompt block, where the turn keys act).
---@param t { id?: string, first: integer, header: integer, last: integer, text?: string, context?: string }
---@return tandem.ChatTurn
function M.add_turn(t)
  local turn = { id = t.id, text = t.text, context = t.context }
  turn.first_mark = set_mark(t.first, nil, { right_gravity = false })
  turn.header_mark = set_mark(t.header)
  turn.last_mark = set_mark(t.last)
  table.insert(turns, turn)
  return turn
end

--- The server named the turn of a prompt (the `prompt` answer), or refused it (id nil).
---@param turn tandem.ChatTurn
---@param id? string
function M.set_turn_id(turn, id)
  turn.id = id
  turn.failed = id == nil or nil
end

---@param id string
---@return tandem.ChatTurn?
function M.turn_by_id(id)
  for _, t in ipairs(turns) do
    if t.id == id then
      return t
    end
  end
end

--- The turns shown, oldest first.
---@return tandem.ChatTurn[]
function M.turns()
  return turns
end

--- The turn whose prompt block (its header and the prompt's lines) holds the 1-based row.
---@param lnum integer
---@return tandem.ChatTurn?
function M.turn_at(lnum)
  if not valid() then
    return nil
  end
  local row = lnum - 1
  for _, t in ipairs(turns) do
    local h, l = mark_row(t.header_mark), mark_row(t.last_mark)
    if h and l and row >= h and row <= l then
      return t
    end
  end
end

--- Drop the turn `id` and every turn after it from the chat (a rewind of the conversation): the
--- rows from that turn's first line to the end go. Returns how many turns were dropped (0 when
--- the turn is not shown, for example because it was dropped already).
---@param id string
---@return integer
function M.drop_turns(id)
  local index
  for i, t in ipairs(turns) do
    if t.id == id then
      index = i
      break
    end
  end
  if not index or not valid() then
    return 0
  end
  -- A turn that began on row 0 keeps its first mark there when a plan block is put above it (the
  -- mark stays left of text inserted at it): the chat below the plan starts at plan_rows.
  local row = math.max(mark_row(turns[index].first_mark), plan_rows)
  local dropped = #turns - index + 1
  for i = #turns, index, -1 do
    table.remove(turns, i)
  end
  stream, blank_row, delta_seen = nil, nil, false
  with_modifiable(function(b)
    -- The marks of the dropped rows go with them (a deleted row's mark would slide onto what follows).
    vim.api.nvim_buf_clear_namespace(b, ns, row, -1)
    if row == plan_rows then
      vim.api.nvim_buf_set_lines(b, row, -1, false, { '' })
    else
      vim.api.nvim_buf_set_lines(b, row, -1, false, {})
    end
  end)
  -- Tool calls and folds of the dropped turns have no rows left.
  local function alive(id_)
    return id_ ~= nil and #vim.api.nvim_buf_get_extmark_by_id(buf, ns, id_, {}) > 0
  end
  for key, tc in pairs(tools) do
    if not alive(tc.header) then
      tools[key] = nil
    end
  end
  folds = vim.tbl_filter(function(f)
    return f.rows == nil and alive(f.start_mark) and alive(f.end_mark)
  end, folds)
  follow()
  return dropped
end

--- The server and tool of a model-facing MCP tool name (`mcp__files__read_text_file`), for history
--- entries that carry no `mcp` field; nil for other tools. A server name holding `__` splits at its first.
---@param name string?
---@return { server: string, tool: string }?
function M.mcp_of_name(name)
  local server, tool = (type(name) == 'string' and name or ''):match('^mcp__(.-)__(.+)$')
  if server and server ~= '' then
    return { server = server, tool = tool }
  end
end

--- Show a resumed session's history (messages from session/load).
--- Each message has `role` and `text`; assistant messages carry `reasoning` and `toolCalls`
--- ({toolCallId, name, arguments, status, result, diff}); notices carry `kind`.
function M.load_history(res)
  M.clear()
  M.line(('· resumed session %s · model %s · mode %s'):format(res.sessionId, res.model or '?', res.mode or '?'), 'Comment')
  for _, m in ipairs(res.messages or {}) do
    local text = m.text or ''
    if m.role == 'user' then
      -- A turn starts at its first message; its steering messages share its turnId.
      if m.turnId and M.turn_by_id(m.turnId) then
        prompt_block(text) -- a steering message: shown as before, not a turn of its own
      else
        local turn = M.user_prompt(text, nil, nil, m.turnId)
        turn.failed = m.turnId == nil or nil -- no id to learn later
      end
    elseif m.role == 'assistant' then
      if m.reasoning and m.reasoning ~= '' then
        stream_text('reasoning', m.reasoning)
      end
      if text ~= '' then
        append(split_lines(text))
      end
      for _, call in ipairs(m.toolCalls or {}) do
        RENDER.toolCall({ toolCallId = call.toolCallId, name = call.name, title = call.title or call.name,
          mcp = call.mcp or M.mcp_of_name(call.name) })
        local tc = tools[call.toolCallId or '']
        if tc and call.status then
          set_tool_status(tc, call.status)
          if call.result then
            tool_append(tc, result_preview(call.result), 'Comment')
          end
          if call.diff and call.status == 'completed' then
            tool_diff(tc, call.diff)
          end
        end
      end
    elseif m.role == 'notice' then
      RENDER.notice({ kind = m.kind, text = text })
    end
  end
  M.set_plan(res.plan)
end

function M.clear()
  with_modifiable(function(b)
    vim.api.nvim_buf_clear_namespace(b, ns, 0, -1)
    vim.api.nvim_buf_clear_namespace(b, plan_ns, 0, -1)
    vim.api.nvim_buf_set_lines(b, 0, -1, false, { '' })
  end)
  stream, tools, folds, blank_row, deferred, turns, plan_rows = nil, {}, {}, nil, {}, {}, 0
end

-- Folding: reasoning blocks are closed folds (foldlevel 0), computed from their extmarks.
local function fold_levels()
  local b = M.buffer()
  local tick = vim.api.nvim_buf_get_changedtick(b)
  if fold_cache.tick == tick and fold_cache.buf == b then
    return fold_cache.levels
  end
  local levels = {}
  local want = {
    reasoning = config.options.chat.fold_reasoning ~= false,
    diff = config.options.chat.fold_diffs ~= false,
  }
  for _, r in ipairs(folds) do
    local s, e
    if r.rows then
      s, e = r.rows[1], r.rows[2]
    else
      s, e = mark_row(r.start_mark), mark_row(r.end_mark)
    end
    if want[r.kind] and s and e and e > s then
      levels[s + 1] = '>1'
      for l = s + 2, e + 1 do
        levels[l] = '1'
      end
    end
  end
  fold_cache = { tick = tick, buf = b, levels = levels }
  return levels
end

--- The chat's 'foldexpr'. It reads only the chat buffer: evaluated for any other buffer (a window
--- opened from the chat, or another buffer shown in the chat window) it folds nothing.
function M.foldexpr(lnum)
  if not valid() or vim.api.nvim_get_current_buf() ~= buf then
    return '0'
  end
  return fold_levels()[lnum or vim.v.lnum] or '0'
end

--- The closed fold's line: its header row as written, plus how many lines it holds, so a fold
--- always says what it hides and how to open it.
function M.foldtext()
  local n = vim.v.foldend - vim.v.foldstart
  local first = vim.api.nvim_buf_get_lines(0, vim.v.foldstart - 1, vim.v.foldstart, false)[1] or ''
  if first:find('^%s*▸ reasoning') then
    return ('▸ reasoning (%d lines, zo opens)'):format(n)
  end
  return ('%s (%d line%s folded, zo opens)'):format(first, n, n == 1 and '' or 's')
end

--- Window options of a chat window. They are set with :setlocal semantics (scope = 'local'), so
--- they stay with the chat buffer: a window opened from the chat on another buffer (the approval
--- float, the edit buffer, the diff split) starts from the global values, never the chat's folds.
local function setup_window(win)
  local function set(name, value)
    vim.api.nvim_set_option_value(name, value, { win = win, scope = 'local' })
  end
  set('wrap', true)
  set('linebreak', true)
  set('number', false)
  set('relativenumber', false)
  set('signcolumn', 'no')
  -- Model, mode, network and the context gauge, always in view above the chat.
  set('winbar', "%{v:lua.require'tandem'.winbar()}")
  if config.options.chat.fold_reasoning ~= false or config.options.chat.fold_diffs ~= false then
    set('foldmethod', 'expr')
    set('foldexpr', "v:lua.require'tandem.ui'.foldexpr(v:lnum)")
    set('foldtext', "v:lua.require'tandem.ui'.foldtext()")
    set('foldlevel', 0)
    set('foldenable', true)
  end
end

--- Redraw the chat windows' bars (model, mode, network, gauge). Setting the option again marks
--- just those bars for redraw; :redrawstatus! redraws every window and, with a float and a diff
--- tab open, trips an assertion in Neovim 0.11.4's grid code.
function M.refresh_bar()
  if not valid() then
    return
  end
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    local bar = vim.api.nvim_get_option_value('winbar', { win = win, scope = 'local' })
    if bar ~= '' then
      vim.api.nvim_set_option_value('winbar', bar, { win = win, scope = 'local' })
    end
  end
end

--- The window showing the chat in the current tab, if any.
function M.window()
  if not valid() then
    return nil
  end
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.api.nvim_win_get_buf(win) == buf then
      return win
    end
  end
end

--- Open the chat (split, vsplit or float per config); focus = false keeps the cursor where it is.
function M.open(opts)
  opts = opts or {}
  local b = M.buffer()
  local win = M.window()
  if win then
    if opts.focus then
      vim.api.nvim_set_current_win(win)
    end
    return win
  end
  local c = config.options.chat
  local prev = vim.api.nvim_get_current_win()
  if c.layout == 'float' then
    local w = c.float.width < 1 and math.floor(vim.o.columns * c.float.width) or c.float.width
    local h = c.float.height < 1 and math.floor(vim.o.lines * c.float.height) or c.float.height
    win = vim.api.nvim_open_win(b, opts.focus ~= false, {
      relative = 'editor',
      width = w,
      height = h,
      row = math.floor((vim.o.lines - h) / 2),
      col = math.floor((vim.o.columns - w) / 2),
      border = c.float.border,
      title = ' tandem ',
      title_pos = 'center',
    })
  else
    local vertical = c.layout ~= 'split'
    win = vim.api.nvim_open_win(b, opts.focus ~= false, {
      split = vertical and 'right' or 'below',
      win = -1,
      width = vertical and c.size or nil,
      height = (not vertical) and math.min(c.size, math.floor(vim.o.lines / 2)) or nil,
    })
  end
  setup_window(win)
  pcall(vim.api.nvim_win_set_cursor, win, { line_count(), 0 })
  if opts.focus == false and vim.api.nvim_win_is_valid(prev) then
    vim.api.nvim_set_current_win(prev)
  end
  return win
end

function M.close()
  local win = M.window()
  if win and #vim.api.nvim_list_wins() > 1 then
    vim.api.nvim_win_close(win, false)
  end
end

function M.toggle()
  if M.window() then
    M.close()
  else
    M.open({ focus = true })
  end
end

--- Plain text of the chat buffer (tests and :Tandem status use it).
function M.text()
  if not valid() then
    return ''
  end
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
end

--- The chat's buffer-local keys (keymaps.chat = { action = lhs }): each maps to the action's
--- <Plug>(Tandem…) mapping (plugin/tandem.lua), so a key does exactly what the <Plug> does.
function M.apply_buffer_keymaps(b)
  local keys = config.options.keymaps.chat or {}
  local plugs = {
    prompt = 'TandemPrompt', steer = 'TandemSteer', stop = 'TandemStop', model = 'TandemModel',
    mode = 'TandemMode', approvals = 'TandemApprovals', close = 'TandemClose',
  }
  for action, plug in pairs(plugs) do
    local lhs = keys[action]
    if lhs then
      vim.keymap.set('n', lhs, '<Plug>(' .. plug .. ')', { buffer = b, nowait = true, remap = true, desc = 'tandem: ' .. action })
    end
  end
  -- The turn keys act on the turn whose prompt block holds the cursor; anywhere else the key
  -- keeps its own meaning (`e` and `f` move the cursor), since a key mapping that starts its
  -- result with its own key runs the built-in key (:help recursive_mapping).
  for action, plug in pairs(M.TURN_PLUGS) do
    local lhs = (config.options.keymaps.turn or {})[action]
    if lhs then
      vim.keymap.set('n', lhs, function()
        if M.turn_at(vim.fn.line('.')) then
          return '<Plug>(' .. plug .. ')'
        end
        return lhs
      end, { buffer = b, expr = true, remap = true, desc = 'tandem: ' .. action .. ' the turn under the cursor' })
    end
  end
end

--- The <Plug> mapping of each turn key (keymaps.turn): it acts on the turn under the cursor.
M.TURN_PLUGS = { diff = 'TandemTurnDiff', undo = 'TandemTurnUndo', edit = 'TandemTurnEdit', fork = 'TandemTurnFork' }

return M
