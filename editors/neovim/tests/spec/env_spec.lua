-- tests/spec/env_spec.lua: setup({ env = ... }) — a table or a function called when the server starts, the documented recipe that reads an API key from a password manager command, and a failing function reported with its cause.
local h = require('helpers')

--- The recipe of doc/tandem.txt (tandem-api-key): run a password manager command, keep its first line.
local function secret(cmd)
  local r = vim.system(cmd, { text = true }):wait()
  if r.code ~= 0 then
    error(('`%s` failed (exit %d): %s'):format(table.concat(cmd, ' '), r.code, vim.trim(r.stderr or '')))
  end
  return vim.split(r.stdout, '\n')[1]
end

--- The test config, with its provider needing the key in TANDEM_NVIM_TEST_KEY.
local function keyed_config(ctx)
  local cfg = h.read(ctx.config):gsub('base_url = ', 'api_key_env = "TANDEM_NVIM_TEST_KEY"\nbase_url = ')
  h.write(ctx.config, cfg)
end

describe('setup({ env })', function()
  after_each(h.teardown)

  it('a function reads the API key from a password manager command when the server starts', function()
    local ctx = h.fresh({ responses = { { { text = 'the key worked' } } } })
    keyed_config(ctx)
    -- A stand-in password manager: a script that prints the secret.
    local pm = ctx.dir .. '/fake-pass'
    h.write(pm, '#!/bin/sh\necho "sk-test-from-the-password-manager"\n')
    vim.fn.setfperm(pm, 'rwx------')
    local calls = 0
    require('tandem').setup({
      cmd = { h.bin, 'serve' }, config_file = ctx.config, data_dir = ctx.dir .. '/data',
      env = function()
        calls = calls + 1
        return { TANDEM_NVIM_TEST_KEY = secret({ pm, 'show', 'api/openai' }) }
      end,
    })
    assert.equals(0, calls, 'setup() does not run the password manager')
    assert.is_nil(vim.env.TANDEM_NVIM_TEST_KEY, 'the key is not in Neovim\'s own environment')
    vim.cmd('Tandem prompt hello')
    h.wait_turn_end('completed')
    assert.truthy(h.chat_has('the key worked'), h.chat())
    assert.equals(1, calls)
  end)

  it('without the key the same config fails the turn, naming the variable', function()
    local ctx = h.fresh({ responses = {} })
    keyed_config(ctx)
    vim.cmd('Tandem prompt hello')
    local ended = h.wait_turn_end('error')
    assert.truthy(ended.error.message:find('TANDEM_NVIM_TEST_KEY', 1, true), ended.error.message)
  end)

  it('a failing env function stops the start with its cause and the next step', function()
    local ctx = h.fresh({ responses = {} })
    require('tandem').setup({
      cmd = { h.bin, 'serve' }, config_file = ctx.config, data_dir = ctx.dir .. '/data',
      env = function()
        return { TANDEM_NVIM_TEST_KEY = secret({ 'false' }) }
      end,
    })
    vim.cmd('Tandem prompt hello')
    local n = h.wait_note('setup({ env = function }) failed')
    assert.equals(vim.log.levels.ERROR, n.level)
    assert.truthy(n.msg:find('`false` failed', 1, true), n.msg)
    assert.truthy(n.msg:find(':Tandem restart', 1, true), n.msg)
    assert.is_nil(require('tandem').state.client)
  end)
end)
