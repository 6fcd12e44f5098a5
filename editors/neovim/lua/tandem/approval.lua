-- tandem.approval: the approval float (title, reason, diff or command, keys y/a/c/n/e/d), the edit-then-accept buffer, and ask_user/plan questions.
--
-- Approvals queue up and are shown one at a time, oldest first, because the server authorizes a
-- turn's calls in order. Hiding the float never answers it: only a key does (default deny is the
-- server's job when no client answers, not ours).
local config = require('tandem.config')
local diff = require('tandem.diff')
local window = require('tandem.window')

local M = {}

local ns = vim.api.nvim_create_namespace('tandem.approval')

local queue = {} -- approvalRequested events not yet resolved, oldest first
local answered = {} -- requestId -> true once we sent a decision (awaiting approvalResolved)
local view = nil -- { ev, win, buf } of the float on screen
local side = {} -- requestId -> { tab?, edit_buf? } extra views opened for a request

local function tandem()
  return require('tandem')
end

--- The approval keys for display: a key set to false shows as its <Plug> mapping instead.
local function keys()
  local shown = {}
  for action, plug in pairs(M.ACTIONS or {}) do
    local lhs = config.options.keymaps.approval[action]
    shown[action] = lhs or ('<Plug>(' .. plug .. ')')
  end
  return shown
end

local function head()
  for _, ev in ipairs(queue) do
    if not answered[ev.requestId] then
      return ev
    end
  end
end

local function has_option(ev, decision)
  for _, o in ipairs(ev.options or {}) do
    if o.decision == decision then
      return o
    end
  end
  -- Servers that send no options still accept the core decisions.
  return (ev.options == nil and (decision == 'once' or decision == 'deny' or decision == 'alwaysTool')) and {} or nil
end

local function close_float()
  if view and view.win and vim.api.nvim_win_is_valid(view.win) then
    vim.api.nvim_win_close(view.win, true)
  end
  view = nil
end

local function close_side(request_id)
  local s = side[request_id]
  side[request_id] = nil
  if not s then
    return
  end
  if s.tab and vim.api.nvim_tabpage_is_valid(s.tab) and #vim.api.nvim_list_tabpages() > 1 then
    local num = vim.api.nvim_tabpage_get_number(s.tab)
    pcall(vim.cmd, 'tabclose! ' .. num)
  end
  if s.edit_buf and vim.api.nvim_buf_is_valid(s.edit_buf) then
    pcall(vim.api.nvim_buf_delete, s.edit_buf, { force = true })
  end
end

--- The words the server puts in the `reason` of an approval whose proposal it had to cut to fit
--- one message (protocol.md, `approvalRequested`). Such a change can only be approved or denied as
--- proposed: the server refuses `editedContent` for it, since an edit of a text the user never saw
--- whole would write the cut.
M.CUT_MARKER = 'too large to show in full'

--- Whether an approval's `reason` says its proposal was cut (so it cannot be edited before approval).
---@param reason string? the `reason` of an approvalRequested event
---@return boolean
function M.is_cut(reason)
  return type(reason) == 'string' and reason:find(M.CUT_MARKER, 1, true) ~= nil
end

--- Lines of the float for one approval, with highlight marks (0-based rows).
function M.lines(ev)
  local lines, marks = {}, {}
  local function add(text, hl)
    for _, l in ipairs(vim.split(text, '\n', { plain = true })) do
      table.insert(lines, l)
      if hl then
        table.insert(marks, { #lines - 1, hl })
      end
    end
  end
  local mcp = type(ev.mcp) == 'table' and ev.mcp or nil
  if mcp then
    -- An MCP server runs the tool outside tandem's sandbox: name the server and its own tool name.
    add(('MCP server `%s` wants to run `%s`'):format(tostring(mcp.server), tostring(mcp.tool)), 'Title')
    add(('%s · %s'):format(ev.kind or 'tool', ev.name or '?'), 'Comment')
  else
    add(('%s · %s'):format(ev.kind or 'tool', ev.name or '?'), 'Title')
  end
  if ev.reason and ev.reason ~= '' then
    add('Reason: ' .. ev.reason)
  end
  if mcp then
    add('')
    add('Arguments:')
    add(require('tandem.mcp').pretty_json(ev.arguments == nil and vim.empty_dict() or ev.arguments), 'String')
  end
  if ev.command then
    add('')
    add('$ ' .. ev.command, 'Statement')
    add('cwd: ' .. (ev.cwd or '?'), 'Comment')
  end
  if ev.diff and #ev.diff > 0 then
    for _, entry in ipairs(ev.diff) do
      add('')
      local dl, dm = diff.render(entry)
      local offset = #lines
      vim.list_extend(lines, dl)
      for _, m in ipairs(dm) do
        table.insert(marks, { offset + m[1], m[2] })
      end
    end
  elseif not ev.command and not mcp and ev.arguments then
    add('')
    local ok, json = pcall(vim.json.encode, ev.arguments)
    add(ok and json or vim.inspect(ev.arguments), 'Comment')
  end
  add('')
  local k = keys()
  local help = { ('[%s] allow once'):format(k.once), ('[%s] always allow %s'):format(k.always_tool, ev.name or 'tool') }
  local cmd_opt = has_option(ev, 'alwaysCommand')
  if cmd_opt and cmd_opt.commandPrefix then
    table.insert(help, ('[%s] always allow `%s`'):format(k.always_command, cmd_opt.commandPrefix))
  end
  table.insert(help, ('[%s] deny'):format(k.deny))
  if ev.diff and #ev.diff > 0 then
    if not M.is_cut(ev.reason) then
      table.insert(help, ('[%s] edit'):format(k.edit))
    end
    table.insert(help, ('[%s] split diff'):format(k.diff))
  end
  table.insert(help, ('[%s] hide'):format(k.hide))
  add(table.concat(help, '  '), 'SpecialKey')
  return lines, marks
end

--- Send a decision for ev and take its views down.
local function decide(ev, decision, message, edited)
  if answered[ev.requestId] then
    return
  end
  answered[ev.requestId] = true
  if view and view.ev.requestId == ev.requestId then
    close_float()
  end
  -- Deferred: decide() may run inside the edit buffer's own BufWriteCmd or the diff tab's keymap.
  vim.schedule(function()
    close_side(ev.requestId)
  end)
  tandem().approve(ev.requestId, decision, message, edited, function(err)
    if err then
      -- Stale or failed: nothing is waiting for it any more, so drop it and move on.
      M.resolved({ requestId = ev.requestId })
    end
  end)
end

local function deny_with_reason(ev)
  vim.ui.input({ prompt = 'Deny — reason for the model (optional, Esc keeps it pending): ' }, function(input)
    if input == nil then
      return -- cancelled: the approval stays pending
    end
    decide(ev, 'deny', input ~= '' and input or nil)
  end)
end

local function always_command(ev)
  local opt = has_option(ev, 'alwaysCommand')
  if not opt then
    tandem().notify('"always allow this command" is offered only for shell commands; use '
      .. keys().always_tool .. ' to always allow the tool, or ' .. keys().once .. ' for once.', vim.log.levels.WARN)
    return
  end
  decide(ev, 'alwaysCommand')
end

local function diff_entry(ev)
  return ev.diff and ev.diff[1] or nil
end

--- Open the proposed content in a buffer; :w approves it with editedContent (decision once).
--- Refused (with a notification, the approval staying pending) for a proposal the server cut.
---@return integer? buf the edit buffer, nil when refused
function M.edit(ev)
  if M.is_cut(ev.reason) then
    tandem().notify(('this change is too large to show in full, so it cannot be edited before it is applied: '
      .. 'it can only be approved or denied as proposed ([%s] allow once, [%s] deny). After approving, edit the '
      .. 'file itself.'):format(keys().once, keys().deny), vim.log.levels.WARN)
    return
  end
  local entry = diff_entry(ev)
  if not entry then
    tandem().notify('only file edits can be edited before approval; this is ' .. (ev.name or 'a tool') .. '.', vim.log.levels.WARN)
    return
  end
  close_float()
  local b = vim.api.nvim_create_buf(false, false)
  vim.api.nvim_buf_set_name(b, 'tandem://edit/' .. ev.requestId .. '/' .. (entry.path or 'file'))
  vim.bo[b].buftype = 'acwrite'
  vim.bo[b].bufhidden = 'wipe'
  vim.bo[b].swapfile = false
  vim.api.nvim_buf_set_lines(b, 0, -1, false, diff.split(entry.newText))
  vim.bo[b].modified = false
  local ft = vim.filetype.match({ filename = entry.path or '', buf = b })
  if ft then
    vim.bo[b].filetype = ft
  end
  side[ev.requestId] = side[ev.requestId] or {}
  side[ev.requestId].edit_buf = b
  vim.api.nvim_create_autocmd('BufWriteCmd', {
    buffer = b,
    callback = function()
      local content = table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n')
      -- Keep the file's final newline when the buffer has one (Neovim's 'eol' semantics).
      if vim.bo[b].eol or vim.bo[b].fixeol then
        content = content .. '\n'
      end
      vim.bo[b].modified = false
      tandem().notify('approving your edited version of ' .. (entry.path or 'the file'))
      decide(ev, 'once', nil, content)
    end,
  })
  vim.api.nvim_create_autocmd('BufWipeout', {
    buffer = b,
    once = true,
    callback = function()
      if side[ev.requestId] then
        side[ev.requestId].edit_buf = nil
      end
      -- Left without writing: bring the approval back so it is not forgotten.
      if not answered[ev.requestId] then
        vim.schedule(M.show)
      end
    end,
  })
  local win = vim.api.nvim_open_win(b, true, { split = 'above', win = -1 })
  window.safe(win, {
    winbar = ('tandem: edit the proposal for %s · :w approves your version · :q! back to the approval')
      :format((entry.path or 'the file'):gsub('%%', '%%%%')),
  })
  tandem().notify(('edit the proposed %s, then :w to approve your version (:q! goes back to the approval).'):format(entry.path or 'content'))
  return b
end

--- Refresh what the float knows about its own scrolling: the furthest line that has been on
--- screen, and the footer that counts the lines still hidden above and below.
function M.update_view()
  if not (view and vim.api.nvim_win_is_valid(view.win)) then
    return
  end
  local above, below = window.hidden(view.win)
  local last = vim.api.nvim_buf_line_count(view.buf)
  view.seen = math.max(view.seen or 0, last - below)
  view.hidden_above, view.hidden_below = above, below
  local footer = ''
  if below > 0 then
    footer = (' ↓ %d more line%s below: j, <C-d> or G to read them (%s approves only after that) ')
      :format(below, below == 1 and '' or 's', keys().once or 'y')
  elseif above > 0 then
    footer = (' ↑ %d line%s above ' ):format(above, above == 1 and '' or 's')
  end
  view.footer = footer
  if config.options.approval.border ~= 'none' then
    pcall(vim.api.nvim_win_set_config, view.win, { footer = footer, footer_pos = 'center' })
  end
end

--- Lines of the float never yet on screen (0 once the user has scrolled to its end).
---@return integer
function M.unseen()
  if not (view and vim.api.nvim_win_is_valid(view.win)) then
    return 0
  end
  M.update_view()
  return vim.api.nvim_buf_line_count(view.buf) - view.seen
end

--- The approval gate of the float: an approving key does nothing but scroll while some line of
--- the proposal has never been on screen, so nothing can be approved unseen.
---@return boolean ok true when every line has been shown
local function all_seen()
  local n = M.unseen()
  if n <= 0 then
    return true
  end
  vim.api.nvim_win_call(view.win, function()
    vim.cmd('normal! \4')
  end)
  M.update_view()
  tandem().notify(('%d line%s of this proposal %s not been on screen yet, so nothing was approved: the float scrolled '
    .. 'down; read to the end (G jumps there), then press the key again.'):format(n, n == 1 and '' or 's', n == 1 and 'has' or 'have'),
    vim.log.levels.WARN)
  return false
end

--- The approval keys' actions, by keymaps.approval name, and their <Plug> mappings.
M.ACTIONS = {
  once = 'TandemApprovalOnce',
  always_tool = 'TandemApprovalAlwaysTool',
  always_command = 'TandemApprovalAlwaysCommand',
  deny = 'TandemApprovalDeny',
  edit = 'TandemApprovalEdit',
  diff = 'TandemApprovalDiff',
  hide = 'TandemApprovalHide',
}

local handlers = {} -- buffer -> { action name -> function } for the approval shown in that buffer

--- Register what `action` does in buffer b and map its key (keymaps.approval) to its <Plug>.
local function bind(b, action, fn)
  if not handlers[b] then
    handlers[b] = {}
    vim.api.nvim_create_autocmd('BufWipeout', {
      buffer = b,
      once = true,
      callback = function()
        handlers[b] = nil
      end,
    })
  end
  handlers[b][action] = fn
  local lhs = config.options.keymaps.approval[action]
  if lhs then
    vim.keymap.set('n', lhs, '<Plug>(' .. M.ACTIONS[action] .. ')', { buffer = b, nowait = true, silent = true, remap = true })
  end
end

--- Run an approval action for the approval shown in the current buffer (<Plug>(TandemApproval…)).
---@param action string a key of M.ACTIONS
function M.run(action)
  local h = handlers[vim.api.nvim_get_current_buf()]
  if not (h and h[action]) then
    tandem().notify(('no approval is shown in this window, so <Plug>(%s) did nothing: it works in the approval float, '
      .. 'the e buffer and the d split; :Tandem approvals shows the pending approval.'):format(M.ACTIONS[action] or action),
      vim.log.levels.WARN)
    return
  end
  h[action]()
end

--- Map the decision keys in buffer b. gated: approving keys first require every line seen (the float).
local function map_decision_keys(b, ev, after_hide, gated, edited)
  local function map(action, fn)
    bind(b, action, fn)
  end
  local function approving(decision)
    return function()
      if gated and not all_seen() then
        return
      end
      if decision == 'alwaysCommand' then
        return always_command(ev)
      end
      decide(ev, decision, nil, edited and edited() or nil)
    end
  end
  map('once', approving('once'))
  map('always_tool', approving('alwaysTool'))
  map('always_command', approving('alwaysCommand'))
  map('deny', function()
    deny_with_reason(ev)
  end)
  map('edit', function()
    M.edit(ev)
  end)
  map('hide', after_hide)
end

--- The proposal as the split's proposal buffer holds it now, with the file's final newline kept
--- as proposed; nil while it still equals the proposal (nothing to send as editedContent).
---@param entry table the diff entry
---@param new_buf integer the proposal buffer of the split
---@return string?
function M.split_content(entry, new_buf)
  local content = table.concat(vim.api.nvim_buf_get_lines(new_buf, 0, -1, false), '\n')
  local proposed = entry.newText or ''
  if proposed:sub(-1) == '\n' then
    content = content .. '\n'
  end
  if content == '' and proposed == '' then
    return nil
  end
  if content == proposed then
    return nil
  end
  return content
end

--- Open the side-by-side :diffthis view in a new tab; the same keys decide from there. The right
--- window is the proposal and can be changed hunk by hunk: `do` in it (or `dp` in the original on
--- the left) takes the original's text for the hunk under the cursor, rejecting that hunk; `u`
--- accepts it again. What an approving key approves is exactly what the proposal buffer holds,
--- sent as editedContent when it differs from the proposal.
function M.split_diff(ev)
  local entry = diff_entry(ev)
  if not entry then
    tandem().notify('there is no diff for ' .. (ev.name or 'this tool') .. '; only file edits have one.', vim.log.levels.WARN)
    return
  end
  close_float()
  local cut = M.is_cut(ev.reason)
  local tab, old_buf, new_buf, old_win, new_win = diff.open_split(entry, { editable = not cut })
  side[ev.requestId] = side[ev.requestId] or {}
  side[ev.requestId].tab = tab
  local function back()
    if vim.api.nvim_buf_is_valid(new_buf) and M.split_content(entry, new_buf) then
      tandem().notify('your hunk choices in the split were dropped: the float approves the proposal as proposed.', vim.log.levels.WARN)
    end
    close_side(ev.requestId)
    M.show()
  end
  local function edited()
    if cut or not vim.api.nvim_buf_is_valid(new_buf) then
      return nil
    end
    return M.split_content(entry, new_buf)
  end
  map_decision_keys(old_buf, ev, back, false, edited)
  map_decision_keys(new_buf, ev, back, false, edited)
  local function refuse(why)
    return function()
      tandem().notify(why, vim.log.levels.WARN)
    end
  end
  local opts = { nowait = true, silent = true }
  if cut then
    local why = 'this change is too large to show in full, so its hunks cannot be rejected one by one: approve or deny it as proposed.'
    for _, b in ipairs({ old_buf, new_buf }) do
      vim.keymap.set('n', 'do', refuse(why), vim.tbl_extend('force', opts, { buffer = b }))
      vim.keymap.set('n', 'dp', refuse(why), vim.tbl_extend('force', opts, { buffer = b }))
    end
  else
    -- The original never changes: the key that would write into it says which key rejects instead.
    vim.keymap.set('n', 'do', refuse('the original (left) does not change: dp here, or do in the proposal (right), '
      .. 'rejects the hunk under the cursor.'), vim.tbl_extend('force', opts, { buffer = old_buf }))
    vim.keymap.set('n', 'dp', refuse('the proposal (right) takes hunks, it does not give them: do here rejects the '
      .. 'hunk under the cursor (takes the original), u accepts it again.'), vim.tbl_extend('force', opts, { buffer = new_buf }))
  end
  -- Short enough for a half-width window (about 75 columns): the keys come first.
  local k = keys()
  vim.wo[old_win].winbar = 'original · dp: reject hunk · ]c [c: next/previous hunk'
  if cut then
    vim.wo[new_win].winbar = ('proposal (too large to change) · %s: approve · %s: deny · %s: back'):format(k.once, k.deny, k.hide)
  else
    vim.wo[new_win].winbar = ('proposal · do: reject hunk · u: undo · %s: approve this · %s: deny · %s: back')
      :format(k.once, k.deny, k.hide)
  end
  return tab, old_buf, new_buf
end

--- Show the float for the oldest unanswered approval.
function M.show()
  local ev = head()
  if not ev then
    if not view then
      tandem().notify('no approval is pending.')
    end
    return
  end
  if view and view.ev.requestId == ev.requestId and vim.api.nvim_win_is_valid(view.win) then
    vim.api.nvim_set_current_win(view.win)
    return
  end
  close_float()
  local lines, marks = M.lines(ev)
  local b = vim.api.nvim_create_buf(false, true)
  vim.bo[b].bufhidden = 'wipe'
  vim.api.nvim_buf_set_lines(b, 0, -1, false, lines)
  vim.bo[b].modifiable = false
  for _, m in ipairs(marks) do
    vim.api.nvim_buf_set_extmark(b, ns, m[1], 0, { line_hl_group = m[2] })
  end
  local c = config.options.approval
  local width = 20
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l) + 1)
  end
  width = math.min(width, math.floor(vim.o.columns * c.max_width))
  local max_height = math.max(1, math.floor((vim.o.lines - 2) * c.max_height))
  local win = vim.api.nvim_open_win(b, true, {
    relative = 'editor',
    width = width,
    height = math.max(1, math.min(#lines, max_height)),
    row = 1,
    col = math.floor((vim.o.columns - width) / 2),
    border = c.border,
    title = ' ' .. (ev.title or 'approval') .. ' ',
    title_pos = 'center',
    style = 'minimal',
    zindex = 60,
  })
  -- The float is opened from wherever the cursor is (often the chat): nothing of that window's
  -- folds or conceal may apply here.
  window.safe(win, { wrap = true, linebreak = false, cursorline = false })
  -- Wrapped lines take more than one row each: size the float by the rows its text needs.
  local rows = vim.api.nvim_win_text_height(win, {}).all
  local height = math.max(1, math.min(rows, max_height))
  vim.api.nvim_win_set_config(win, {
    relative = 'editor',
    row = math.max(0, math.floor((vim.o.lines - height) / 2) - 1),
    col = math.floor((vim.o.columns - width) / 2),
    height = height,
  })
  view = { ev = ev, win = win, buf = b, seen = 0 }
  M.update_view()
  vim.api.nvim_create_autocmd({ 'WinScrolled', 'CursorMoved' }, {
    buffer = b,
    callback = function()
      M.update_view()
    end,
  })
  map_decision_keys(b, ev, function()
    close_float()
    tandem().notify('approval hidden, still pending: :Tandem approvals shows it again.')
  end, true)
  bind(b, 'diff', function()
    M.split_diff(ev)
  end)
  vim.keymap.set('n', '<Esc>', function()
    close_float()
  end, { buffer = b, nowait = true, silent = true })
  -- Closing the float another way (:q, <C-w>c) only hides it.
  vim.api.nvim_create_autocmd('WinClosed', {
    pattern = tostring(win),
    once = true,
    callback = function()
      if view and view.win == win then
        view = nil
      end
    end,
  })
end

function M.request(ev)
  for _, e in ipairs(queue) do
    if e.requestId == ev.requestId then
      return
    end
  end
  table.insert(queue, ev)
  if not view then
    M.show()
  end
end

function M.resolved(ev)
  local id = ev.requestId
  for i, e in ipairs(queue) do
    if e.requestId == id then
      table.remove(queue, i)
      break
    end
  end
  answered[id] = nil
  close_side(id)
  if view and view.ev.requestId == id then
    close_float()
  end
  if head() and not view then
    M.show()
  end
end

function M.turn_ended()
  M.clear()
end

--- Drop everything (turn ended, server restarted): nothing here can be answered any more.
function M.clear()
  for _, ev in ipairs(queue) do
    close_side(ev.requestId)
  end
  queue, answered = {}, {}
  close_float()
end

--- State for tests and statuslines.
function M.pending()
  return queue
end
function M.view()
  return view
end

--- questionAsked: ask_user (choices or free text) and propose_plan.
function M.question(ev)
  local function reply(answer)
    if answer == nil then
      tandem().notify('the question is still waiting for an answer; :Tandem stop ends the turn.', vim.log.levels.WARN)
      return
    end
    tandem().answer(ev.requestId, answer)
  end
  local function free_text(prompt)
    vim.ui.input({ prompt = prompt }, reply)
  end
  if ev.plan then
    local items = { 'Approve the plan', 'Reject the plan', 'Reply with changes…' }
    vim.ui.select(items, { prompt = 'tandem plan: ' .. (ev.question or 'proceed?') }, function(choice)
      if choice == items[1] then
        reply('approved: go ahead')
      elseif choice == items[2] then
        reply('rejected')
      elseif choice == items[3] then
        free_text('changes to the plan: ')
      else
        reply(nil)
      end
    end)
  elseif ev.choices and #ev.choices > 0 then
    local items = vim.list_extend(vim.deepcopy(ev.choices), { 'Other…' })
    vim.ui.select(items, { prompt = 'tandem asks: ' .. (ev.question or '') }, function(choice)
      if choice == 'Other…' then
        free_text((ev.question or 'answer') .. ' ')
      else
        reply(choice)
      end
    end)
  else
    free_text('tandem asks: ' .. (ev.question or '') .. ' ')
  end
end

return M
