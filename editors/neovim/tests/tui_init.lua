-- tests/tui_init.lua: init file for the real TUI Neovim that tui_spec drives in tmux (paths come from the environment).
local root = vim.env.TANDEM_NVIM_ROOT
vim.opt.rtp:prepend(root)
vim.o.swapfile = false
vim.o.shortmess = vim.o.shortmess .. 'I'
vim.cmd('runtime plugin/tandem.lua')
require('tandem').setup({
  cmd = { vim.env.TANDEM_BIN, 'serve' },
  config_file = vim.env.TANDEM_TUI_CONFIG,
  data_dir = vim.env.TANDEM_TUI_DATA,
})
