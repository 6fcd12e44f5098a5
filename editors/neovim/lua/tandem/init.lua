-- tandem: the plugin's entry point — setup(), and one table with the whole Lua API of tandem.server, tandem.session and tandem.commands.
--
-- The work is done in three modules: tandem.server (the process and the shared state),
-- tandem.session (the session and every action on it) and tandem.commands (:Tandem, <Plug>
-- mappings, keymaps). require('tandem').prompt() and the rest stay the public API; each name is
-- the same function as in its module.
local config = require('tandem.config')
local server = require('tandem.server')
local session = require('tandem.session')
local commands = require('tandem.commands')

local M = {}

-- The public API: every function and value of the three modules, under its own name.
for _, module in ipairs({ server, session, commands }) do
  for name, value in pairs(module) do
    if M[name] == nil then
      M[name] = value
    end
  end
end

--- Configure the plugin (optional: it works without a call when `tandem` is on $PATH).
---@param opts? tandem.Config
---@return table
function M.setup(opts)
  config.setup(opts)
  commands.apply_global_keymaps()
  return M
end

vim.api.nvim_create_autocmd('VimLeavePre', {
  group = vim.api.nvim_create_augroup('tandem.lifecycle', { clear = true }),
  callback = function()
    server.shutdown()
  end,
})

return M
