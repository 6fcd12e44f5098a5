-- tests/run.lua: runs Debian's lua-busted inside Neovim (`nvim --headless -l tests/run.lua SPEC...`), so specs get the real editor API.
--
-- Debian installs busted and its dependencies for Lua 5.1, which is LuaJIT's ABI, so Neovim can
-- load both the Lua files and the small C modules (lfs, term, system) directly.
local lua_dirs = { '/usr/share/lua/5.1', '/usr/local/share/lua/5.1' }
local c_dirs = { '/usr/lib/x86_64-linux-gnu/lua/5.1', '/usr/lib/aarch64-linux-gnu/lua/5.1', '/usr/local/lib/lua/5.1', '/usr/lib/lua/5.1' }
for _, d in ipairs(lua_dirs) do
  package.path = d .. '/?.lua;' .. d .. '/?/init.lua;' .. package.path
end
for _, d in ipairs(c_dirs) do
  package.cpath = d .. '/?.so;' .. package.cpath
end

local root = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h')
vim.opt.rtp:prepend(root)
-- tests/ holds helpers.lua; the runner itself must not be named busted.lua or it would shadow busted.
package.path = root .. "/tests/?.lua;" .. package.path
vim.cmd('runtime plugin/tandem.lua')

local ok, runner = pcall(require, 'busted.runner')
if not ok then
  io.stderr:write('busted is not installed (apt-get install lua-busted): ' .. tostring(runner) .. '\n')
  os.exit(2)
end
-- Our output handler prints each test and the closing `N passed, N failed` line.
table.insert(arg, 1, "--output=" .. root .. "/tests/output.lua")
runner({ standalone = false })
-- busted exits non-zero itself on failures; reaching here means every test passed.
os.exit(0)
