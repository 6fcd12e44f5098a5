-- tests/spec/defects_spec.lua: the smaller defects of issue 23 item 9 — a bad config blamed on the binary, a steer notice splitting streamed words, shell output shown twice, no feedback for a steer behind an approval, provider errors printed twice.
local h = require('helpers')

--- How many times `needle` occurs in the chat.
local function count_in_chat(needle)
  local n, from = 0, 1
  local chat = h.chat()
  while true do
    local s, e = chat:find(needle, from, true)
    if not s then
      return n
    end
    n, from = n + 1, e + 1
  end
end

describe('issue 23 item 9', function()
  after_each(h.teardown)

  it('a config file that is not valid TOML is named as the cause, and the binary is not blamed', function()
    local ctx = h.fresh({ responses = {} })
    local bad = ctx.dir .. '/bad.toml'
    h.write(bad, 'default_model = "x"\n[models.x\nprovider = 1\n')
    require('tandem').setup({ cmd = { h.bin, 'serve' }, config_file = bad, data_dir = ctx.dir .. '/data' })
    vim.cmd('Tandem prompt hello')
    local first = h.wait(function()
      return h.ctx().notes[1]
    end, 'a notification')
    assert.equals(vim.log.levels.ERROR, first.level)
    assert.truthy(first.msg:find('not valid TOML', 1, true), 'the first notification names the config error: ' .. first.msg)
    assert.truthy(first.msg:find(bad, 1, true), first.msg)
    assert.truthy(first.msg:find(':Tandem restart', 1, true), first.msg)
    -- Wait for anything else to arrive, then check that nothing blamed the binary.
    h.wait(function()
      return require('tandem').state.client == nil
    end, 'the server to be gone')
    vim.wait(200, function()
      return false
    end)
    for _, n in ipairs(h.ctx().notes) do
      assert.is_nil(n.msg:find('tandem binary', 1, true), 'no notification blames the binary: ' .. n.msg)
      assert.is_nil(n.msg:find('refused initialize', 1, true), n.msg)
    end
    assert.equals(1, #h.ctx().notes, table.concat(h.notes_text(), '\n---\n'))
  end)

  it(':checkhealth tandem names a config file the server refuses, not the handshake', function()
    local ctx = h.fresh({ responses = {} })
    local bad = ctx.dir .. '/bad.toml'
    h.write(bad, 'default_model = "x"\n[models.x\n')
    require('tandem').setup({ cmd = { h.bin, 'serve' }, config_file = bad, data_dir = ctx.dir .. '/data' })
    vim.cmd('silent checkhealth tandem')
    local text = h.buf_text(0)
    assert.truthy(text:find('ERROR the server refused the config file ' .. bad, 1, true), text)
    assert.truthy(text:find('not valid TOML', 1, true), text)
    assert.is_nil(text:find('protocol handshake failed', 1, true), text)
  end)

  it('a steer sent while text streams does not split the streamed words', function()
    h.fresh({ responses = {
      { { text = 'Hello wor' }, { delay_ms = 1500 }, { text = 'ld, streamed whole.' } },
      { { text = 'Steered answer.' } },
    } })
    vim.cmd('Tandem prompt stream')
    h.wait_chat('Hello wor')
    vim.cmd('Tandem steer be brief')
    h.wait_note('steer queued')
    h.wait_turn_end('completed')
    assert.truthy(h.chat_has('Hello world, streamed whole.'), h.chat())
    assert.truthy(h.chat_has('steer queued: be brief'), h.chat())
    assert.truthy(h.chat_has('steering applied: be brief'), h.chat())
  end)

  it('shell output streamed into the chat is not shown a second time in the result', function()
    h.fresh({
      responses = {
        { { tool_call = { id = 'call_sh', name = 'shell', arguments = { command = "printf 'abc%sdef\\n' 123" } } } },
        { { text = 'Ran it.' } },
      },
      setup = { mode = 'fullAuto' },
    })
    vim.cmd('Tandem prompt run printf')
    h.wait_turn_end('completed')
    local result = h.wait_event('toolCallUpdate', function(e)
      return e.status == 'completed'
    end).result
    assert.truthy(result:find('abc123def', 1, true), 'the model got the output: ' .. result)
    assert.equals(1, count_in_chat('abc123def'), h.chat())
    assert.truthy(h.chat_has('│ abc123def'), h.chat())
  end)

  it('a steer sent while an approval is pending says it waits for that approval', function()
    h.fresh({ responses = {
      { { tool_call = { id = 'call_w', name = 'write_file', arguments = { path = 'w.txt', content = 'w\n' } } } },
      { { text = 'done' } },
    } })
    vim.cmd('Tandem prompt write w')
    h.wait_float()
    vim.cmd('Tandem steer and then stop')
    local n = h.wait_note('steer queued')
    assert.truthy(n.msg:find('after you answer the pending approval', 1, true), n.msg)
    assert.truthy(h.chat_has('waits for the pending approval'), h.chat())
    require('tandem.approval').show()
    h.press('y')
    h.wait_turn_end('completed')
  end)

  it('a provider error is printed once', function()
    local ctx = h.fresh({ responses = {} })
    local cfg = h.read(ctx.config):gsub('base_url = ', 'api_key_env = "TANDEM_NVIM_TEST_MISSING_KEY"\nbase_url = ')
    h.write(ctx.config, cfg)
    vim.cmd('Tandem prompt hello')
    local ended = h.wait_turn_end('error')
    assert.truthy(ended.error.message:find('TANDEM_NVIM_TEST_MISSING_KEY', 1, true), ended.error.message)
    assert.equals(1, count_in_chat('TANDEM_NVIM_TEST_MISSING_KEY'), h.chat())
    assert.truthy(h.chat_has('turn ended: error'), h.chat())
  end)
end)
