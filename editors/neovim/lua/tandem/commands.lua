-- tandem.commands: the :Tandem subcommands (a table of { impl, complete }), the <Plug> mappings behind every action, and the keymaps setup() sugar.
--
-- Every action has a <Plug>(Tandem…) mapping (plugin/tandem.lua defines them without a setup
-- call); setup({ keymaps = { global = { action = lhs } } }) only maps lhs to that <Plug>.
local server = require('tandem.server')
local session = require('tandem.session')

local M = {}

local notify = server.notify

local function ui()
  return require('tandem.ui')
end
local function approval()
  return require('tandem.approval')
end
local function turns()
  return require('tandem.turns')
end

--- Completion of a [turn] argument: indices and turn ids from session/checkpoints.
local function complete_turn(lead, words)
  if #words > 3 then
    return {}
  end
  return turns().complete(lead)
end

--- Candidates of `list` that start with `lead`.
---@param list string[]
---@param lead string
---@return string[]
local function starting_with(list, lead)
  return vim.tbl_filter(function(s)
    return s:find(lead, 1, true) == 1
  end, list)
end

---@class tandem.Subcommand
---@field impl fun(rest: string, opts: table) runs `:Tandem {name} {rest}`; opts are the user command's
---@field complete? fun(lead: string, words: string[]): string[] completes the argument (words: the command line's words)
---@field desc string one line for the help and the error of an unknown subcommand

--- Every :Tandem subcommand by name.
---@type table<string, tandem.Subcommand>
M.subcommands = {
  chat = {
    desc = 'open the chat',
    impl = function()
      ui().open({ focus = true })
    end,
  },
  prompt = {
    desc = 'send a prompt ([range]: the selected lines as context; @path attaches a file)',
    impl = function(rest, opts)
      local context
      if opts.range and opts.range > 0 then
        context = session.context_from_range(0, opts.line1, opts.line2)
      end
      session.prompt(rest, context)
    end,
    -- `/name` as the first word completes the session's slash commands (commands/list).
    complete = function(lead, words)
      if #words == 3 and lead:sub(1, 1) == '/' then
        return require('tandem.slash').complete_line(lead)
      end
      if #words == 4 and (words[3] == '/model' or words[3] == '/mode') then
        return vim.tbl_map(function(line)
          return line:match('^/%S+%s+(.*)$')
        end, require('tandem.slash').complete_line(words[3] .. ' ' .. lead))
      end
      return {}
    end,
  },
  add = {
    desc = 'attach a file to the next prompt',
    impl = function(rest)
      session.add_file(rest)
    end,
    complete = function(lead)
      return vim.fn.getcompletion(lead, 'file')
    end,
  },
  stop = {
    desc = 'stop the running turn',
    impl = function()
      session.stop()
    end,
  },
  steer = {
    desc = 'add an instruction to the running turn',
    impl = function(rest)
      session.steer(rest)
    end,
  },
  model = {
    desc = 'pick or switch the model',
    impl = function(rest)
      if rest ~= '' then
        session.switch_model(rest)
      else
        session.pick_model()
      end
    end,
    complete = function(lead)
      local info = server.state.info
      return starting_with(vim.tbl_map(function(m)
        return m.id
      end, (info and info.models) or {}), lead)
    end,
  },
  mode = {
    desc = 'pick or set the permission mode',
    impl = function(rest)
      if rest ~= '' then
        session.set_mode(rest)
      else
        session.pick_mode()
      end
    end,
    complete = function(lead)
      return starting_with(vim.tbl_map(function(m)
        return m.id
      end, session.MODES), lead)
    end,
  },
  network = {
    desc = 'allow or forbid the network to shell commands',
    impl = function(rest)
      local arg = rest:lower()
      if arg == 'on' or arg == 'true' then
        session.set_network(true)
      elseif arg == 'off' or arg == 'false' then
        session.set_network(false)
      elseif arg == '' or arg == 'toggle' then
        session.set_network(nil)
      else
        notify(('unknown network setting %q: use :Tandem network on, off or toggle.'):format(rest), vim.log.levels.ERROR)
      end
    end,
    complete = function(lead)
      return starting_with({ 'on', 'off', 'toggle' }, lead)
    end,
  },
  sessions = {
    desc = 'list stored sessions and resume one',
    impl = function()
      session.sessions()
    end,
  },
  resume = {
    desc = 'resume the last session, or the session {id} (for example the one /fork made)',
    impl = function(rest)
      local id = vim.trim(rest)
      if id ~= '' then
        session.load_session(id)
      else
        session.resume_last()
      end
    end,
  },
  approvals = {
    desc = 'show the pending approval again',
    impl = function()
      approval().show()
    end,
  },
  retry = {
    desc = 'retry after a provider error',
    impl = function()
      session.retry()
    end,
  },
  new = {
    desc = 'leave the session; the next prompt starts a new one',
    impl = function()
      session.new_session()
    end,
  },
  restart = {
    desc = 'restart the server',
    impl = function()
      server.restart()
    end,
  },
  mcp = {
    desc = "list the session's MCP servers; `mcp trust {server}` trusts one of the workspace's .mcp.json",
    impl = function(rest)
      local words = vim.split(vim.trim(rest), '%s+', { trimempty = true })
      if #words == 0 then
        session.mcp()
      elseif words[1] == 'trust' and #words <= 2 then
        session.mcp_trust(words[2])
      elseif words[1] == 'refresh' and #words == 1 then
        require('tandem.mcp').refresh()
      else
        notify(('unknown :Tandem mcp arguments %q: use :Tandem mcp, :Tandem mcp trust {server} or :Tandem mcp refresh.')
          :format(rest), vim.log.levels.ERROR)
      end
    end,
    complete = function(lead, words)
      return require('tandem.mcp').complete(lead, words)
    end,
  },
  hooks = {
    desc = "list the session's hooks; `hooks trust` trusts the workspace's project hooks (they run outside the sandbox)",
    impl = function(rest)
      local words = vim.split(vim.trim(rest), '%s+', { trimempty = true })
      if #words == 0 then
        require('tandem.hooks').show()
      elseif words[1] == 'trust' and #words == 1 then
        require('tandem.hooks').trust()
      else
        notify(('unknown :Tandem hooks arguments %q: use :Tandem hooks or :Tandem hooks trust.'):format(rest),
          vim.log.levels.ERROR)
      end
    end,
    complete = function(lead, words)
      return require('tandem.hooks').complete(lead, words)
    end,
  },
  share = {
    desc = 'what another client needs to attach to this server (URL, token, session id), offered for yanking; '
      .. 'needs attach.listen',
    impl = function()
      require('tandem.attach').share()
    end,
  },
  diff = {
    desc = 'a tab with what a turn changed (default: the last turn; [turn]: its id or its number from the oldest)',
    impl = function(rest)
      turns().diff(rest)
    end,
    complete = complete_turn,
  },
  undo = {
    desc = 'put the session back to before a turn: files, conversation or both (default: the last turn)',
    impl = function(rest)
      turns().undo(rest)
    end,
    complete = complete_turn,
  },
  edit = {
    desc = 'edit a prompt (default: the last one) and resend it in place of that turn',
    impl = function(rest)
      turns().edit(rest)
    end,
    complete = complete_turn,
  },
  fork = {
    desc = 'a new session with the history before [turn] (without it: the whole history), opened here',
    impl = function(rest)
      turns().fork(rest)
    end,
    complete = complete_turn,
  },
  plan = {
    desc = "show the model's current plan ([x] completed, [~] in progress, [ ] pending)",
    impl = function()
      session.show_plan()
    end,
  },
  status = {
    desc = 'show model, mode, network, gauge and state',
    impl = function()
      local status = session.status()
      notify(status ~= '' and status or 'not started (it starts on the first :Tandem command that needs it)')
    end,
  },
}

--- The subcommand names, sorted.
---@return string[]
function M.names()
  local names = vim.tbl_keys(M.subcommands)
  table.sort(names)
  return names
end

--- Entry point of :Tandem (see plugin/tandem.lua).
---@param opts table the user command's opts (fargs, range, line1, line2)
function M.command(opts)
  local name = opts.fargs[1] or 'chat'
  local rest = table.concat(vim.list_slice(opts.fargs, 2), ' ')
  local sub = M.subcommands[name]
  if not sub then
    notify(('unknown subcommand %q; try one of: %s (:help tandem-commands)'):format(name, table.concat(M.names(), ', ')),
      vim.log.levels.ERROR)
    return
  end
  sub.impl(rest, opts)
end

--- Completion of :Tandem: subcommand names, then the subcommand's own completion.
---@param arglead string
---@param cmdline string
---@return string[]
function M.complete(arglead, cmdline)
  local words = vim.split(cmdline, '%s+', { trimempty = false })
  if #words <= 2 then
    return starting_with(M.names(), arglead)
  end
  local sub = M.subcommands[words[2]]
  if sub and sub.complete then
    return sub.complete(arglead, words)
  end
  return {}
end

--- Every action a key can run: its <Plug>(Tandem…) name and what it does. The keymaps.global
--- names of setup() are the keys of this table.
---@type table<string, { plug: string, desc: string, fn: fun() }>
M.actions = {
  prompt = { plug = 'TandemPrompt', desc = 'send a prompt', fn = function() session.prompt() end },
  chat = { plug = 'TandemChat', desc = 'toggle the chat', fn = function() ui().toggle() end },
  stop = { plug = 'TandemStop', desc = 'stop the running turn', fn = function() session.stop() end },
  steer = { plug = 'TandemSteer', desc = 'steer the running turn', fn = function() session.steer() end },
  model = { plug = 'TandemModel', desc = 'pick the model', fn = function() session.pick_model() end },
  mode = { plug = 'TandemMode', desc = 'pick the mode', fn = function() session.pick_mode() end },
  network = { plug = 'TandemNetwork', desc = 'toggle the network', fn = function() session.set_network(nil) end },
  add = { plug = 'TandemAdd', desc = "attach the current buffer's file", fn = function() session.add_file(nil) end },
  sessions = { plug = 'TandemSessions', desc = 'list and resume sessions', fn = function() session.sessions() end },
  resume = { plug = 'TandemResume', desc = 'resume the last session', fn = function() session.resume_last() end },
  approvals = { plug = 'TandemApprovals', desc = 'show the pending approval', fn = function() approval().show() end },
  retry = { plug = 'TandemRetry', desc = 'retry after a provider error', fn = function() session.retry() end },
  new = { plug = 'TandemNew', desc = 'start a new session', fn = function() session.new_session() end },
  restart = { plug = 'TandemRestart', desc = 'restart the server', fn = function() server.restart() end },
  status = { plug = 'TandemStatus', desc = 'show the status', fn = function() M.subcommands.status.impl('', {}) end },
  close = { plug = 'TandemClose', desc = 'close the chat', fn = function() ui().close() end },
  mcp = { plug = 'TandemMcp', desc = "list the session's MCP servers", fn = function() session.mcp() end },
  diff = { plug = 'TandemDiff', desc = 'the last turn\'s diff', fn = function() turns().diff('') end },
  undo = { plug = 'TandemUndo', desc = 'undo the last turn', fn = function() turns().undo('') end },
  edit = { plug = 'TandemEdit', desc = 'edit and resend the last prompt', fn = function() turns().edit('') end },
  fork = { plug = 'TandemFork', desc = 'fork the session', fn = function() turns().fork('') end },
  plan = { plug = 'TandemPlan', desc = "show the model's plan", fn = function() session.show_plan() end },
  hooks = { plug = 'TandemHooks', desc = "list the session's hooks", fn = function() require('tandem.hooks').show() end },
  share = { plug = 'TandemShare', desc = 'show what another client needs to attach', fn = function()
    require('tandem.attach').share()
  end },
}

--- keymaps.global = { action = lhs } of setup(): each lhs maps to the action's <Plug>.
function M.apply_global_keymaps()
  local config = require('tandem.config')
  for action, lhs in pairs(config.options.keymaps.global or {}) do
    if lhs and M.actions[action] then
      vim.keymap.set('n', lhs, '<Plug>(' .. M.actions[action].plug .. ')', { remap = true, desc = 'tandem: ' .. action })
    elseif lhs then
      notify(('keymaps.global.%s is not an action; the actions are: %s'):format(action,
        table.concat(vim.tbl_keys(M.actions), ', ')), vim.log.levels.WARN)
    end
  end
  local prompt_lhs = (config.options.keymaps.global or {}).prompt
  if prompt_lhs then
    -- In Visual mode the prompt key sends the selection as context.
    vim.keymap.set('x', prompt_lhs, '<Plug>(TandemPromptSelection)', { remap = true, desc = 'tandem: prompt with selection' })
  end
end

return M
