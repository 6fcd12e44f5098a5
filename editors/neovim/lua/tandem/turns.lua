-- tandem.turns: checkpoints of the session's turns — :Tandem diff (a tab of turn/diff), undo (session/rewind), edit (rewind and resend), fork (session/fork), and the rewound event.
--
-- A turn is named by its turnId, by its 1-based index among session/checkpoints (oldest first),
-- or not at all (the last turn). The chat's turn keys pass the turnId of the turn under the cursor.
local config = require('tandem.config')
local rpc = require('tandem.rpc')
local server = require('tandem.server')

local M = {}

local S = server.state
local notify = server.notify

local function ui()
  return require('tandem.ui')
end

-- The last session/checkpoints answer, for completion (which cannot wait for the server).
---@type { sessionId: string, list: tandem.Checkpoint[] }?
local cache = nil

-- Rewinds this client sent, by turnId (how many): their `rewound` events need no note of their own.
local own_rewinds = {}

--- The error of a checkpoint request for people: the server's message and kind, with the next step.
---@param what string what failed ("undo", "diff", …)
---@param err table
---@return string
local function failure(what, err)
  local kind = rpc.error_kind(err)
  local hint = ''
  if kind == 'turnInProgress' then
    hint = '; stop the running turn first (:Tandem stop), or wait for it to end'
  elseif kind == 'unknownTurn' then
    hint = '; the turn is no longer in the conversation (:Tandem diff <Tab> lists its turns)'
  elseif kind == nil and err.code == -32601 then
    hint = '; this tandem server has no checkpoints: update it'
  end
  return ('%s failed: %s%s'):format(what, rpc.format_error(err), hint)
end

local function fail(what, err)
  local text = failure(what, err)
  notify(text, vim.log.levels.ERROR)
  ui().line('! ' .. text, 'ErrorMsg')
end

--- Run fn() when a session is open, else say how to get one.
local function with_session(what, fn)
  if not server.ready() then
    notify(('nothing to %s: no session is open (prompt first, or :Tandem resume).'):format(what), vim.log.levels.WARN)
    return
  end
  fn()
end

--- Fetch the session's checkpoints (oldest first): cb(list), or an error notification.
---@param cb fun(list: tandem.Checkpoint[])
function M.checkpoints(cb)
  local id = S.session.sessionId
  S.client:request('session/checkpoints', { sessionId = id }, function(err, res)
    if err then
      fail('listing the turns (session/checkpoints)', err)
      return
    end
    cache = { sessionId = id, list = res.checkpoints or {} }
    cb(cache.list)
  end)
end

--- Refresh the completion cache in the background (after a turn ends, a rewind, a resume).
function M.refresh()
  if server.ready() then
    local id = S.session.sessionId
    S.client:request('session/checkpoints', { sessionId = id }, function(err, res)
      if not err and res then
        cache = { sessionId = id, list = res.checkpoints or {} }
      end
    end)
  end
end

--- Completion of [turn]: the turns' indices and ids, from the last checkpoints answer.
---@param lead string
---@return string[]
function M.complete(lead)
  if not (cache and S.session and cache.sessionId == S.session.sessionId) then
    M.refresh()
    return {}
  end
  local out = {}
  for i, cp in ipairs(cache.list) do
    out[#out + 1] = tostring(i)
  end
  for _, cp in ipairs(cache.list) do
    out[#out + 1] = cp.turnId
  end
  return vim.tbl_filter(function(s)
    return s:find(lead, 1, true) == 1
  end, out)
end

--- The checkpoint `arg` names: '' the last, a number its 1-based index, else a turnId (or a unique
--- prefix of one). Returns the checkpoint and its index, or nil and why not.
---@param list tandem.Checkpoint[]
---@param arg string
---@return tandem.Checkpoint?, integer|string
function M.find(list, arg)
  arg = vim.trim(arg or '')
  if #list == 0 then
    return nil, 'the session has no turn yet'
  end
  if arg == '' then
    return list[#list], #list
  end
  local n = tonumber(arg)
  if n and arg:match('^%d+$') then
    if n >= 1 and n <= #list then
      return list[n], n
    end
    return nil, ('there is no turn %d: the session has %d turn%s (1 is the oldest)'):format(n, #list, #list == 1 and '' or 's')
  end
  local found, index
  for i, cp in ipairs(list) do
    if cp.turnId == arg then
      return cp, i
    end
    if cp.turnId:find(arg, 1, true) == 1 then
      if found then
        return nil, ('%q names more than one turn; give more of its id'):format(arg)
      end
      found, index = cp, i
    end
  end
  if found then
    return found, index
  end
  return nil, ('%q is not a turn of this conversation (a turn id, or a number counted from the oldest turn)'):format(arg)
end

--- Resolve `arg` against a fresh checkpoint list: cb(checkpoint, index).
local function resolve(what, arg, cb)
  with_session(what, function()
    M.checkpoints(function(list)
      local cp, index = M.find(list, arg)
      if not cp then
        notify(('cannot %s: %s.'):format(what, index), vim.log.levels.WARN)
        return
      end
      cb(cp, index)
    end)
  end)
end

--- A turn for people: `turn 3 "fix the parser"`.
local function label(cp, index)
  local first = vim.split(cp.prompt or '', '\n', { plain = true })[1] or ''
  if #first > 60 then
    first = first:sub(1, 57) .. '…'
  end
  return ('turn %d "%s"'):format(index, first)
end
M.label = label

-- ── :Tandem diff ─────────────────────────────────────────────────────────────────────────

local CHANGE_LETTER = { added = 'A', modified = 'M', deleted = 'D' }

--- Whether a turn/diff entry has text on both sides to compare (a side that did not exist is empty).
local function has_text(f)
  if f.binary or f.notCaptured then
    return false
  end
  return f.oldText ~= nil or f.newText ~= nil
end

--- The line of a file in the diff tab's list.
local function file_line(f)
  local line = ('%s %s'):format(CHANGE_LETTER[f.change] or '?', f.path)
  if f.notCaptured then
    return line .. '  (not captured: ' .. f.notCaptured .. ')'
  elseif f.binary then
    return line .. '  (binary: no text to compare)'
  elseif f.oldText == nil and f.newText == nil then
    return line .. '  (folder)'
  end
  local diff = require('tandem.diff')
  local added, removed = 0, 0
  for _, hunk in ipairs(diff.hunks(f.oldText, f.newText)) do
    removed = removed + hunk[2]
    added = added + hunk[4]
  end
  return ('%s  +%d −%d'):format(line, added, removed)
end

local function scratch(name, lines, ft)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = 'wipe'
  pcall(vim.api.nvim_buf_set_name, buf, name)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  if ft and ft ~= '' then
    vim.bo[buf].filetype = ft
  end
  return buf
end

--- Open one tab with a turn's changes: the list of files on top, and below it the old (left) and
--- new (right) text of the file picked, as a :diffthis pair of scratch buffers. <CR> on a file of
--- the list shows it; ]f and [f show the next and previous file; q closes the tab.
---@param title string
---@param files tandem.TurnFileDiff[]
---@return table view { tab, list_buf, list_win, old_win, new_win, show = fun(i), files, current }
function M.open_diff(title, files)
  local stamp = tostring(vim.uv.hrtime())
  vim.cmd('tabnew')
  local view = { tab = vim.api.nvim_get_current_tabpage(), files = files }
  local placeholder = vim.api.nvim_get_current_buf()
  local lines = { title, '<CR> show the file · ]f [f next/previous · q close the tab', '' }
  for _, f in ipairs(files) do
    lines[#lines + 1] = '  ' .. file_line(f)
  end
  view.list_buf = scratch(('tandem://turn-diff/%s'):format(stamp), lines, 'tandem_turn_diff')
  view.first_file_row = 4 -- the 1-based row of files[1]
  vim.api.nvim_win_set_buf(0, view.list_buf)
  if vim.api.nvim_buf_is_valid(placeholder) and placeholder ~= view.list_buf then
    pcall(vim.api.nvim_buf_delete, placeholder, { force = true })
  end
  view.list_win = vim.api.nvim_get_current_win()
  vim.api.nvim_buf_set_extmark(view.list_buf, ui().ns, 0, 0, { line_hl_group = 'Title' })
  vim.api.nvim_buf_set_extmark(view.list_buf, ui().ns, 1, 0, { line_hl_group = 'Comment' })
  require('tandem.window').safe(view.list_win, { wrap = false })
  -- The pair below the list.
  vim.cmd('belowright split')
  view.old_win = vim.api.nvim_get_current_win()
  vim.cmd('vertical rightbelow split')
  view.new_win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_height(view.list_win, math.min(#files, 10) + 3)
  vim.wo[view.list_win].winfixheight = true

  local function keys(buf)
    local o = { buffer = buf, nowait = true }
    vim.keymap.set('n', 'q', function()
      if vim.api.nvim_tabpage_is_valid(view.tab) and #vim.api.nvim_list_tabpages() > 1 then
        vim.cmd('tabclose ' .. vim.api.nvim_tabpage_get_number(view.tab))
      end
    end, vim.tbl_extend('force', o, { desc = 'tandem: close the turn diff' }))
    vim.keymap.set('n', ']f', function()
      view.step(1)
    end, vim.tbl_extend('force', o, { desc = 'tandem: next file of the turn diff' }))
    vim.keymap.set('n', '[f', function()
      view.step(-1)
    end, vim.tbl_extend('force', o, { desc = 'tandem: previous file of the turn diff' }))
  end
  keys(view.list_buf)
  vim.keymap.set('n', '<CR>', function()
    local i = vim.fn.line('.') - view.first_file_row + 1
    if files[i] then
      view.show(i)
    end
  end, { buffer = view.list_buf, nowait = true, desc = 'tandem: show this file of the turn diff' })

  --- Show files[i] in the pair: its texts in diff mode, or a note when it has no text to compare.
  function view.show(i)
    if not (vim.api.nvim_win_is_valid(view.old_win) and vim.api.nvim_win_is_valid(view.new_win)) then
      notify('this turn diff\'s windows were closed: :Tandem diff opens it again.', vim.log.levels.WARN)
      return
    end
    local f = files[i]
    view.current = i
    local ft = vim.filetype.match({ filename = f.path }) or ''
    local old_lines, new_lines
    if has_text(f) then
      local split = require('tandem.diff').split
      old_lines, new_lines = split(f.oldText), split(f.newText)
    else
      local note = file_line(f)
      old_lines, new_lines = { note }, { note }
      ft = ''
    end
    local old_buf = scratch(('tandem://turn-diff/%s/%d/old/%s'):format(stamp, i, f.path), old_lines, ft)
    local new_buf = scratch(('tandem://turn-diff/%s/%d/new/%s'):format(stamp, i, f.path), new_lines, ft)
    keys(old_buf)
    keys(new_buf)
    for _, pair in ipairs({ { view.old_win, old_buf }, { view.new_win, new_buf } }) do
      local win, b = pair[1], pair[2]
      vim.api.nvim_win_set_buf(win, b)
      vim.api.nvim_win_call(win, function()
        vim.cmd(has_text(f) and 'diffthis' or 'diffoff')
      end)
      -- :diffthis folds unchanged text: show every line, keeping the synchronized scrolling.
      require('tandem.window').safe(win, { scrollbind = has_text(f), cursorbind = has_text(f), wrap = false })
      -- The bar is this window's only (a plain vim.wo would set the global value too).
      vim.api.nvim_set_option_value('winbar', ((win == view.old_win) and 'before: ' or 'after: ') .. f.path:gsub('%%', '%%%%'),
        { win = win, scope = 'local' })
    end
    -- Mark the file shown in the list.
    vim.bo[view.list_buf].modifiable = true
    for j = 1, #files do
      local row = view.first_file_row + j - 2 -- 0-based
      local line = vim.api.nvim_buf_get_lines(view.list_buf, row, row + 1, false)[1] or ''
      local mark = line:match('^▶ ') and #'▶ ' or 2
      vim.api.nvim_buf_set_text(view.list_buf, row, 0, row, mark, { j == i and '▶ ' or '  ' })
    end
    vim.bo[view.list_buf].modifiable = false
    pcall(vim.api.nvim_win_set_cursor, view.list_win, { view.first_file_row + i - 1, 0 })
  end

  function view.step(delta)
    local i = (view.current or 0) + delta
    if i >= 1 and i <= #files then
      view.show(i)
    end
  end

  local first = 1
  for i, f in ipairs(files) do
    if has_text(f) then
      first = i
      break
    end
  end
  view.show(first)
  vim.api.nvim_set_current_win(view.new_win)
  M.last_view = view
  return view
end

--- :Tandem diff [turn]: a tab with everything the turn changed (see open_diff).
---@param arg? string
function M.diff(arg)
  resolve('show a turn diff', arg, function(cp, index)
    S.client:request('turn/diff', { sessionId = S.session.sessionId, turnId = cp.turnId }, function(err, res)
      if err then
        fail('turn diff', err)
        return
      end
      local files = res.files or {}
      if #files == 0 then
        notify(('%s changed no file.'):format(label(cp, index)))
        return
      end
      M.open_diff(('Turn diff · %s · %d file%s'):format(label(cp, index), #files, #files == 1 and '' or 's'), files)
    end)
  end)
end

-- ── :Tandem undo and :Tandem edit ────────────────────────────────────────────────────────

M.RESTORE_CHOICES = {
  { restore = 'both', text = 'files and conversation: put the files back and drop the turn and later ones' },
  { restore = 'files', text = 'files only: put the files back; the conversation keeps the turns' },
  { restore = 'conversation', text = 'conversation only: drop the turn and later ones; the files stay as they are' },
}

--- After a rewind: buffers on the restored files show them again (never over unsaved changes).
local function reload_restored(paths)
  if #paths > 0 and S.session then
    require('tandem.reload').written(paths, S.session.cwd, function(text, level)
      ui().line('! ' .. text, 'WarningMsg')
      notify(text, level)
    end)
  end
end

--- One line for the chat about a rewind.
local function summary(what, restored, conversation, conflicts)
  local parts = {}
  if conversation then
    parts[#parts + 1] = 'the conversation now ends before it'
  end
  if #restored > 0 then
    parts[#parts + 1] = 'restored ' .. table.concat(restored, ', ')
  end
  if (conflicts or 0) > 0 then
    parts[#parts + 1] = ('%d path%s left as %s (below)'):format(conflicts, conflicts == 1 and '' or 's',
      conflicts == 1 and 'it is' or 'they are')
  end
  if #parts == 0 then
    parts[#parts + 1] = 'nothing to put back'
  end
  return ('⟲ %s: %s'):format(what, table.concat(parts, '; '))
end

--- One session/rewind request: cb(res) after the chat dropped the rewound turns (when the
--- conversation went back) and the restored files' buffers were reloaded; an error is shown.
---@param cp tandem.Checkpoint
---@param index integer
---@param restore tandem.RestoreScope
---@param force boolean
---@param cb fun(res: tandem.RewindResult)
local function rewind_request(cp, index, restore, force, cb)
  local sid = S.session.sessionId
  own_rewinds[cp.turnId] = (own_rewinds[cp.turnId] or 0) + 1
  S.client:request('session/rewind', { sessionId = sid, turnId = cp.turnId, restore = restore, force = force },
    function(err, res)
      if err then
        own_rewinds[cp.turnId] = nil
        fail(('undo of %s'):format(label(cp, index)), err)
        return
      end
      if not (S.session and S.session.sessionId == sid) then
        return -- the user left the session meanwhile
      end
      if res.conversationRewound then
        ui().drop_turns(cp.turnId)
      end
      reload_restored(res.restored or {})
      cb(res)
    end)
end

--- Put the session back to just before a turn (session/rewind), then done().
---
--- Files go back first, on their own: a conflict (a path changed since the turn) is listed and
--- force is offered while the turn is still in the chat, so the user decides about their files
--- before the conversation goes (the server would also take a forced files rewind afterwards).
--- So `both` is a `files` rewind (and its forced repeat), then a `conversation` one. The chat gets one line at the end (after the rewound turns were dropped,
--- which takes every line below them): what was restored and each path left alone, with why.
---@param cp tandem.Checkpoint
---@param index integer
---@param restore tandem.RestoreScope
---@param done? fun() runs after the last step (not after an error)
function M.rewind(cp, index, restore, done)
  local restored, conflicts, forced = {}, {}, false

  local function finish(conversation)
    local what = ('%s %s (%s)'):format(forced and 'forced undo of' or 'undid', label(cp, index), restore)
    local text = summary(what, restored, conversation, #conflicts)
    local lines = { text }
    for _, c in ipairs(conflicts) do
      lines[#lines + 1] = ('! not restored: %s — %s'):format(c.path, c.reason)
    end
    ui().line(lines[1], 'Special')
    if #lines > 1 then
      ui().line(table.concat(vim.list_slice(lines, 2), '\n'), 'WarningMsg')
    end
    notify((text:gsub('^⟲ ', '')), #conflicts > 0 and vim.log.levels.WARN or nil)
    M.refresh()
    if done then
      done()
    end
  end

  local function conversation_step()
    if restore == 'files' then
      return finish(false)
    end
    rewind_request(cp, index, 'conversation', false, function(res)
      finish(res.conversationRewound)
    end)
  end

  if restore == 'conversation' then
    return conversation_step()
  end
  rewind_request(cp, index, 'files', false, function(res)
    vim.list_extend(restored, res.restored or {})
    conflicts = res.conflicts or {}
    if #conflicts == 0 then
      return conversation_step()
    end
    local listed = vim.tbl_map(function(c)
      return ('%s — %s'):format(c.path, c.reason)
    end, conflicts)
    notify(('%d path%s not restored, changed since the turn:\n%s'):format(#conflicts,
      #conflicts == 1 and ' was' or 's were', table.concat(listed, '\n')), vim.log.levels.WARN)
    vim.ui.select({ 'force', 'keep' }, {
      prompt = ('%d path%s changed since %s (%s): put %s back anyway?'):format(#conflicts, #conflicts == 1 and '' or 's',
        label(cp, index), table.concat(vim.tbl_map(function(c)
          return c.path
        end, conflicts), ', '), #conflicts == 1 and 'it' or 'them'),
      format_item = function(item)
        return item == 'force' and 'Force: put them back anyway (overwrites those changes)'
          or 'Keep: leave them as they are now'
      end,
    }, function(choice)
      if choice ~= 'force' then
        return conversation_step()
      end
      rewind_request(cp, index, 'files', true, function(forced_res)
        forced = true
        vim.list_extend(restored, forced_res.restored or {})
        conflicts = forced_res.conflicts or {}
        conversation_step()
      end)
    end)
  end)
end

--- :Tandem undo [turn]: ask what to put back, then rewind to just before the turn.
---@param arg? string
function M.undo(arg)
  resolve('undo a turn', arg, function(cp, index)
    local files = #(cp.files or {})
    vim.ui.select(M.RESTORE_CHOICES, {
      prompt = ('Undo %s (%d file%s changed): put back what?'):format(label(cp, index), files, files == 1 and '' or 's'),
      format_item = function(item)
        return item.text
      end,
    }, function(choice)
      if choice then
        M.rewind(cp, index, choice.restore)
      end
    end)
  end)
end

--- :Tandem edit [turn]: the turn's prompt (default: the last one) in the prompt input; on submit
--- the turn is rewound (files and conversation) and the new text is sent as a prompt.
---@param arg? string
function M.edit(arg)
  resolve('edit a prompt', arg, function(cp, index)
    -- The text as typed here when this chat sent it (the server's has attached files appended).
    local shown = ui().turn_by_id(cp.turnId)
    local text = shown and shown.text or cp.prompt or ''
    local context = shown and shown.context or nil
    vim.ui.input({
      prompt = ('edit %s, then resend> '):format(label(cp, index)),
      default = text,
      completion = 'customlist,TandemCompletePrompt',
    }, function(input)
      if input == nil or vim.trim(input) == '' then
        return
      end
      M.rewind(cp, index, 'both', function()
        require('tandem.session').prompt(input, context)
      end)
    end)
  end)
end

-- ── :Tandem fork ─────────────────────────────────────────────────────────────────────────

--- :Tandem fork [turn]: a new session with the history before the turn (without [turn]: the whole
--- history), then the chat switches to it.
---@param arg? string
---@param turn_id? string fork before this turn (the chat's `f` key), skipping the lookup
function M.fork(arg, turn_id)
  with_session('fork', function()
    local function send(cp, index)
      local from = S.session.sessionId
      S.client:request('session/fork', { sessionId = from, turnId = cp and cp.turnId or nil }, function(err, res)
        if err then
          fail('fork', err)
          return
        end
        local where = cp and ('before ' .. label(cp, index)) or 'with the whole history'
        require('tandem.session').load_session(res.sessionId, {
          done = function()
            ui().line(('⑂ forked from %s %s: this is the new session %s'):format(from, where, res.sessionId), 'Special')
            notify(('forked %s into session %s'):format(where, res.sessionId))
          end,
        })
      end)
    end
    if (arg == nil or vim.trim(arg) == '') and not turn_id then
      return send(nil)
    end
    M.checkpoints(function(list)
      local cp, index = M.find(list, turn_id or arg)
      if not cp then
        notify(('cannot fork: %s.'):format(index), vim.log.levels.WARN)
        return
      end
      send(cp, index)
    end)
  end)
end

-- ── the chat's turn keys and the rewound event ───────────────────────────────────────────

--- Run a turn action (diff, undo, edit, fork) on the turn whose prompt holds the cursor.
---@param action 'diff'|'undo'|'edit'|'fork'
function M.at_cursor(action)
  local turn = ui().turn_at(vim.fn.line('.'))
  if vim.api.nvim_get_current_buf() ~= ui().buffer() or not turn then
    notify(('put the cursor on a turn\'s prompt in the chat ("━━ You ━━" and its lines) to %s it; '
      .. ':Tandem %s [turn] works anywhere.'):format(action, action), vim.log.levels.WARN)
    return
  end
  if not turn.id then
    if turn.command then
      notify(('that prompt ran /%s, which the server answered at once: it is not a turn, so there is nothing to %s.')
        :format(turn.command, action), vim.log.levels.WARN)
      return
    end
    notify('that prompt has no turn (it was not sent, or the server has not named it yet).', vim.log.levels.WARN)
    return
  end
  if action == 'fork' then
    return M.fork(nil, turn.id)
  end
  M[action](turn.id)
end

--- The `rewound` event (ours, or another client's): drop the rewound turns from the chat, reload
--- the restored files' buffers, and say so when another client did it.
---@param ev table
function M.on_rewound(ev)
  local conversation = ev.restore == 'conversation' or ev.restore == 'both'
  local ours = (own_rewinds[ev.turnId] or 0) > 0
  if ours then
    own_rewinds[ev.turnId] = own_rewinds[ev.turnId] > 1 and own_rewinds[ev.turnId] - 1 or nil
  end
  -- A /undo typed as a prompt: its answer came first (tandem.slash), and its output says what it did.
  local undo = not ours and S.command_undo or nil
  if undo then
    S.command_undo = nil
  end
  local dropped = conversation and ev.turnId and ui().drop_turns(ev.turnId) or 0
  if undo then
    reload_restored(ev.files or {})
    if not vim.tbl_contains(ui().turns(), undo.turn) then
      -- Its block came after the undone turn, so it went with it: show it again below what remains.
      local turn = ui().user_prompt(undo.text)
      ui().command_result(turn, undo.command)
    end
  elseif not ours then
    reload_restored(ev.files or {})
    ui().line(summary(('rewound by another client (%s)'):format(ev.restore or '?'), ev.files or {}, conversation
      and dropped > 0), 'Special')
  end
  M.refresh()
end

--- Forget the completion cache (a new session, a restart).
function M.reset()
  cache = nil
  own_rewinds = {}
end

return M
