-- tests/spec/context_spec.lua: context tools — @-mentions and :Tandem add attach files the model's request shows, @ completion in the prompt input, the context gauge, the model picker's windows and abilities, and the network switch.
local h = require('helpers')

describe('context tools', function()
  after_each(h.teardown)

  it(':Tandem add attaches a file to the next prompt, and the model request holds its text', function()
    local ctx = h.fresh({ responses = { { { text = 'summarized' } }, { { text = 'second' } } } })
    h.write(ctx.ws .. '/notes.md', '# Notes\nthe secret word is pelican\n')
    vim.cmd('Tandem add notes.md')
    h.wait_note('notes.md is attached to your next prompt')
    vim.cmd('Tandem prompt summarize the notes')
    h.wait_turn_end('completed')
    local user = h.message_text(h.requests()[1], 'user')
    assert.truthy(user:find('summarize the notes', 1, true), user)
    assert.truthy(user:find('Attached file `notes.md`:\n```markdown\n# Notes\nthe secret word is pelican\n```', 1, true), user)
    assert.truthy(h.chat_has('  + attached notes.md'), h.chat())
    -- Attached once: the next prompt goes without it.
    vim.cmd('Tandem prompt again')
    h.wait(function()
      return #h.events('turnEnded') == 2
    end, 'the second turn')
    local second = h.message_text(h.requests()[2], 'user')
    assert.equals(1, select(2, second:gsub('pelican', '')), 'the file is in history once, not attached again')
  end)

  it('@path in a prompt attaches that workspace file', function()
    local ctx = h.fresh({ responses = { { { text = 'explained' } } } })
    h.write(ctx.ws .. '/src/util.lua', 'return { answer = 42 }\n')
    vim.cmd('Tandem prompt explain @src/util.lua, please')
    h.wait_turn_end('completed')
    local user = h.message_text(h.requests()[1], 'user')
    assert.truthy(user:find('Attached file `src/util.lua`:\n```lua\nreturn { answer = 42 }\n```', 1, true), user)
  end)

  it('an attachment over the size cap stops the prompt with the cause and the next step', function()
    local ctx = h.fresh({ responses = { { { text = 'never' } } } })
    h.write(ctx.ws .. '/big.txt', string.rep('x', require('tandem.context').MAX_FILE_BYTES + 1))
    vim.cmd('Tandem prompt look at @big.txt')
    local n = h.wait_note('prompt not sent')
    assert.truthy(n.msg:find('over the 256 KiB', 1, true), n.msg)
    assert.truthy(n.msg:find("Tandem prompt", 1, true), n.msg)
    assert.equals(0, #h.requests())
  end)

  it('the prompt input completes @ to workspace files', function()
    local ctx = h.fresh({ responses = {} })
    h.write(ctx.ws .. '/src/alpha.lua', 'a\n')
    h.write(ctx.ws .. '/src/beta.lua', 'b\n')
    h.write(ctx.ws .. '/README.md', 'r\n')
    local opts
    vim.ui.input = function(o, cb)
      opts = o
      cb(nil)
    end
    require('tandem').prompt()
    assert.equals('customlist,TandemCompletePrompt', opts.completion)
    -- The function input() calls on <Tab>: the whole line is the lead.
    local got = vim.fn.TandemCompletePrompt('', 'fix @src/a', 10)
    assert.same({ 'fix @src/alpha.lua' }, got)
    local all = vim.fn.TandemCompletePrompt('', 'see @', 5)
    assert.same({ 'see @README.md', 'see @src/alpha.lua', 'see @src/beta.lua' }, all)
    assert.same({ 'fix @src/beta.lua' }, vim.fn.TandemCompletePrompt('', 'fix @beta', 9), 'a name inside the path matches too')
    assert.same({}, vim.fn.TandemCompletePrompt('', 'no mention', 10))
  end)

  it('the context gauge shows tokens used over the model window in the chat bar and status', function()
    h.fresh({ responses = { { { text = 'one two three' } } } })
    vim.cmd('Tandem prompt count')
    h.wait_turn_end('completed')
    local t = require('tandem')
    local g = t.gauge()
    local usage = h.events('usage')[1]
    assert.equals(usage.inputTokens + usage.outputTokens, g.used)
    assert.equals(128000, g.window)
    local text = t.gauge_text()
    assert.equals(('ctx %d/128k (0%%)'):format(g.used), text)
    local win = require('tandem.ui').window()
    local bar = vim.api.nvim_eval_statusline(vim.wo[win].winbar, { winid = win, use_winbar = true }).str
    assert.truthy(bar:find(text, 1, true), bar)
    assert.truthy(bar:find('mock · ask · net off', 1, true), bar)
    assert.truthy(h.chat_has('· ' .. text), h.chat())
    assert.truthy(t.status():find(text, 1, true), t.status())
  end)

  it('the model picker shows each model\'s window and abilities from models/list', function()
    local ctx = h.fresh({ responses = {} })
    h.write(ctx.config, h.read(ctx.config) .. [[
[models.seer]
provider = "local"
name = "mock-vision"
context_window = 200000
max_output_tokens = 16384
vision = true
reasoning = true
]])
    local offered
    ctx.select = function(items, o)
      offered = vim.tbl_map(o.format_item, items)
    end
    vim.cmd('Tandem model')
    h.wait(function()
      return offered
    end, 'the model picker')
    local seer
    for _, line in ipairs(offered) do
      if line:find('seer', 1, true) then
        seer = line
      end
    end
    assert.equals('  seer  (mock-vision, local, 200k window, 16k out, vision, reasoning)', seer)
    assert.truthy(offered[1]:find('● mock  (mock-model, local, 128k window)', 1, true), vim.inspect(offered))
  end)

  it(':Tandem network turns the network on before the first prompt and off again, with the server\'s notice', function()
    h.fresh({ responses = { { { text = 'ok' } } } })
    local t = require('tandem')
    vim.cmd('Tandem network on')
    h.wait_chat('network on (for the session your next prompt starts)')
    vim.cmd('Tandem prompt hi')
    h.wait_turn_end('completed')
    h.wait_note('network on: shell commands of this session may use the network')
    h.wait_chat('Network access allowed by the user')
    assert.is_true(t.state.session.network)
    assert.truthy(t.winbar():find('net on', 1, true), t.winbar())
    vim.cmd('Tandem network')
    h.wait_note('network off')
    h.wait_chat('Network access turned off')
    assert.is_false(t.state.session.network)
  end)

  it('an attached image goes as an image part to a vision model, and a model without vision is named first', function()
    local ctx = h.fresh({ responses = { { { text = 'I see it.' } }, { { text = 'I cannot see it.' } } } })
    h.write(ctx.config, h.read(ctx.config) .. '[models.seer]\nprovider = "local"\nname = "mock-vision"\nvision = true\n')
    local png = '\137PNG\r\n\26\n' .. string.rep('\0\1\2', 10)
    h.write(ctx.ws .. '/shot.png', png)
    local b64 = vim.base64.encode(png)
    vim.cmd('Tandem model seer')
    h.wait_note('model: seer')
    vim.cmd('Tandem prompt what is in @shot.png')
    h.wait_turn_end('completed')
    local raw = vim.json.encode(h.requests()[1].messages)
    assert.truthy(raw:find('data:image/png;base64,' .. b64, 1, true), raw:sub(1, 600))
    assert.truthy(h.chat_has('+ attached shot.png'), h.chat())
    -- The same image for a model without vision: a warning first, and the model gets no image data.
    vim.cmd('Tandem new')
    vim.cmd('Tandem model mock')
    h.wait_note('model: mock')
    vim.cmd('Tandem add shot.png')
    vim.cmd('Tandem prompt and now?')
    local n = h.wait_note('mock cannot see images, so it gets a placeholder')
    assert.equals(vim.log.levels.WARN, n.level)
    h.wait(function()
      return #h.requests() == 2
    end, 'the second request')
    local raw2 = vim.json.encode(h.requests()[2].messages)
    assert.is_nil(raw2:find(b64, 1, true), 'no image data for a model without vision')
  end)
end)
