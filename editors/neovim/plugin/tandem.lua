-- plugin/tandem.lua: defines :Tandem; everything else loads on first use (require('tandem') happens inside the command).
if vim.g.loaded_tandem then
  return
end
vim.g.loaded_tandem = true

if vim.fn.has('nvim-0.10') ~= 1 then
  vim.api.nvim_echo({ { 'tandem.nvim needs Neovim 0.10 or newer', 'ErrorMsg' } }, true, {})
  return
end

vim.api.nvim_create_user_command('Tandem', function(opts)
  require('tandem').command(opts)
end, {
  nargs = '*',
  range = true, -- :'<,'>Tandem prompt sends the selection as context
  desc = 'tandem coding agent: chat, prompt, stop, steer, model, mode, sessions, approvals, retry, new, restart, status',
  complete = function(arglead, cmdline)
    return require('tandem').complete(arglead, cmdline)
  end,
})

-- Completion of the prompt input (vim.ui.input's `completion`): <Tab> after @ offers workspace files.
vim.cmd([[
function! TandemCompletePrompt(lead, line, pos) abort
  return luaeval('require("tandem.context").complete_line(_A, require("tandem.config").cwd())', a:line)
endfunction
]])
