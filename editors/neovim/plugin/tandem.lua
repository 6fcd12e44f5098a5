-- plugin/tandem.lua: defines :Tandem; everything else loads on first use (require('tandem') happens inside the command).
if vim.g.loaded_tandem then
  return
end
vim.g.loaded_tandem = true

-- 0.11 is the oldest Neovim the tests run on (README.md says why there is no 0.10 run).
if vim.fn.has('nvim-0.11') ~= 1 then
  vim.api.nvim_echo({ { 'tandem.nvim needs Neovim 0.11 or newer (it is tested on 0.11.4); upgrade Neovim', 'ErrorMsg' } }, true, {})
  return
end

vim.api.nvim_create_user_command('Tandem', function(opts)
  require('tandem.commands').command(opts)
end, {
  nargs = '*',
  range = true, -- :'<,'>Tandem prompt sends the selection as context
  desc = 'tandem coding agent (:help tandem-commands)',
  complete = function(arglead, cmdline)
    return require('tandem.commands').complete(arglead, cmdline)
  end,
})

-- <Plug>(Tandem…) for every action, so users map their own keys without a setup() call. The
-- names mirror require('tandem.commands').actions (a test checks they agree); the module loads
-- only when a mapping is used.
for _, action in ipairs({ 'prompt', 'chat', 'stop', 'steer', 'model', 'mode', 'network', 'add', 'sessions', 'resume',
  'approvals', 'retry', 'new', 'restart', 'status', 'close', 'mcp', 'diff', 'undo', 'edit', 'fork',
  'plan', 'hooks', 'share' }) do
  local plug = '<Plug>(Tandem' .. action:sub(1, 1):upper() .. action:sub(2) .. ')'
  vim.keymap.set('n', plug, function()
    require('tandem.commands').actions[action].fn()
  end, { desc = 'tandem: ' .. action })
end
vim.keymap.set('x', '<Plug>(TandemPromptSelection)', ':Tandem prompt<CR>',
  { silent = true, desc = 'tandem: prompt with the selection as context' })

-- Completion of the prompt input (vim.ui.input's `completion`): <Tab> after @ offers workspace files,
-- `/` at the start the session's slash commands.
vim.cmd([[
function! TandemCompletePrompt(lead, line, pos) abort
  return luaeval('require("tandem.context").complete_prompt(_A, require("tandem.config").cwd())', a:line)
endfunction
]])

-- <Plug>(TandemHooksTrust): trust the workspace's project hooks (:Tandem hooks trust).
vim.keymap.set('n', '<Plug>(TandemHooksTrust)', function()
  require('tandem.hooks').trust()
end, { desc = "tandem: trust the workspace's project hooks" })

-- <Plug>(TandemMcpTrust) and <Plug>(TandemMcpRefresh): the keys of the :Tandem mcp list (t and r by
-- default; keymaps.mcp maps them): trust the server on the cursor's line, ask the server again.
vim.keymap.set('n', '<Plug>(TandemMcpTrust)', function()
  require('tandem.mcp').trust_at_cursor()
end, { desc = 'tandem: trust the MCP server under the cursor' })
vim.keymap.set('n', '<Plug>(TandemMcpRefresh)', function()
  require('tandem.mcp').refresh()
end, { desc = 'tandem: refresh the MCP server list' })

-- <Plug>(TandemApproval…): the approval keys (y a c n e d q by default) act on the approval shown
-- in the current window; keymaps.approval maps its keys to these.
for action, plug in pairs({ once = 'Once', always_tool = 'AlwaysTool', always_command = 'AlwaysCommand', deny = 'Deny',
  edit = 'Edit', diff = 'Diff', hide = 'Hide' }) do
  vim.keymap.set('n', '<Plug>(TandemApproval' .. plug .. ')', function()
    require('tandem.approval').run(action)
  end, { desc = 'tandem: approval ' .. action })
end

-- <Plug>(TandemTurn…): the chat's turn keys (d u e f by default; keymaps.turn maps them) act on the
-- turn whose prompt holds the cursor: its diff, undo it, edit and resend it, fork before it.
for action, plug in pairs({ diff = 'Diff', undo = 'Undo', edit = 'Edit', fork = 'Fork' }) do
  vim.keymap.set('n', '<Plug>(TandemTurn' .. plug .. ')', function()
    require('tandem.turns').at_cursor(action)
  end, { desc = 'tandem: ' .. action .. ' the turn under the cursor' })
end
