-- tandem lsp driven by Neovim's own LSP client (headless Neovim 0.11), from tests/it/lsp.rs:
-- a code action on a.txt runs `tandem.prompt`, the approval comes through vim.ui.select (stubbed
-- to pick the first action, "Allow once"), and the edit lands in the buffer via applyEdit.
-- Prints one PASS/FAIL line per check and exits non-zero on a failure.
-- Env: TANDEM_BIN, TANDEM_CONFIG_FILE, TANDEM_DATA, TANDEM_WS.
local bin, cfg = os.getenv('TANDEM_BIN'), os.getenv('TANDEM_CONFIG_FILE')
local data, ws = os.getenv('TANDEM_DATA'), os.getenv('TANDEM_WS')
local failed = false
local function check(name, ok, why)
  if ok then
    io.stdout:write('PASS ' .. name .. '\n')
  else
    failed = true
    io.stdout:write('FAIL ' .. name .. ': ' .. vim.inspect(why) .. '\n')
  end
end

local asked = {}
vim.ui.select = function(items, opts, on_choice)
  table.insert(asked, { items = items, prompt = opts.prompt })
  on_choice(items[1])
end
local result
vim.lsp.handlers['workspace/executeCommand'] = function(err, res)
  result = res or err
end

vim.lsp.config('tandem', {
  cmd = { bin, 'lsp', '--config', cfg, '--data-dir', data },
  cmd_env = { RUST_LOG = 'off' },
  root_dir = ws,
})
vim.lsp.enable('tandem')
vim.cmd.edit(ws .. '/a.txt')
local started = vim.wait(20000, function()
  local c = vim.lsp.get_clients({ bufnr = 0, name = 'tandem' })[1]
  return c ~= nil and c.initialized
end)
check('Neovim started and initialized tandem lsp', started, 'no initialized client')

if started then
  vim.lsp.buf.code_action({
    apply = true,
    filter = function(a) return a.title == 'tandem: fix' end,
    range = { start = { 1, 0 }, ['end'] = { 1, 5 } },
  })
  local answered = vim.wait(20000, function() return result ~= nil end)
  check('the code action ran tandem.prompt', answered and type(result) == 'table' and result.turnId ~= nil, result)
  local edited = vim.wait(20000, function()
    return vim.api.nvim_buf_get_lines(0, 0, 1, false)[1] == 'ALPHA'
  end)
  check('the approved edit changed the buffer through applyEdit', edited, vim.api.nvim_buf_get_lines(0, 0, -1, false))
  local first = asked[1]
  local titles = first and vim.tbl_map(function(i) return i.title end, first.items) or {}
  check('the approval reached vim.ui.select with its actions', #asked == 1 and titles[1] == 'Allow once' and titles[3] == 'Deny', titles)
  check('the approval names the tool and the path', first ~= nil and first.prompt:find('edit_file') ~= nil and first.prompt:find('a.txt') ~= nil, first and first.prompt)
  local disk = io.open(ws .. '/a.txt'):read('*a')
  check('the disk is untouched until the buffer is saved', disk == 'alpha\n', disk)
end

for _, c in ipairs(vim.lsp.get_clients({ name = 'tandem' })) do
  c:stop()
end
vim.wait(3000, function() return #vim.lsp.get_clients({ name = 'tandem' }) == 0 end)
os.exit(failed and 1 or 0)
