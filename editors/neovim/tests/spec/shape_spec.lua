-- tests/spec/shape_spec.lua: the plugin's shape — a <Plug> mapping for every action, keymaps as sugar over them, :Tandem as a table of { impl, complete }, and the documented API and types.
local h = require('helpers')

describe('the plugin shape', function()
  after_each(h.teardown)

  it('every action has a <Plug>(Tandem…) mapping, defined before any setup() or require', function()
    h.fresh({ setup = false })
    local actions = require('tandem.commands').actions
    assert.truthy(vim.tbl_count(actions) >= 16)
    for name, action in pairs(actions) do
      local map = vim.fn.maparg('<Plug>(' .. action.plug .. ')', 'n', false, true)
      assert.truthy(map.callback, name .. ' has <Plug>(' .. action.plug .. ')')
    end
    assert.truthy(vim.fn.maparg('<Plug>(TandemPromptSelection)', 'x') ~= '', 'the Visual-mode prompt')
    for name, plug in pairs(require('tandem.approval').ACTIONS) do
      assert.truthy(vim.fn.maparg('<Plug>(' .. plug .. ')', 'n', false, true).callback, 'approval ' .. name .. ' has ' .. plug)
    end
  end)

  it('the approval keys are <Plug>(TandemApproval…) mappings: a user key mapped to one approves', function()
    local ctx = h.fresh({ responses = {
      { { tool_call = { id = 'call_plug', name = 'write_file', arguments = { path = 'plug.txt', content = 'plug\n' } } } },
      { { text = 'done' } },
    }, setup = { keymaps = { approval = { once = false } } } })
    vim.keymap.set('n', '<leader>ya', '<Plug>(TandemApprovalOnce)')
    h.press('<Plug>(TandemApprovalOnce)')
    h.wait_note('no approval is shown in this window')
    vim.cmd('Tandem prompt write plug')
    local v = h.wait_float()
    assert.equals('', vim.fn.maparg('y', 'n'), 'keymaps.approval.once = false leaves y unmapped')
    assert.equals('<Plug>(TandemApprovalDeny)', vim.fn.maparg('n', 'n'))
    assert.equals(v.win, vim.api.nvim_get_current_win())
    h.press('<leader>ya')
    h.wait_turn_end('completed')
    assert.equals('plug\n', h.read(ctx.ws .. '/plug.txt'))
    vim.keymap.del('n', '<leader>ya')
  end)

  it('a <Plug> mapping runs its action, and keymaps.global maps a key to it', function()
    h.fresh({ responses = {}, setup = { keymaps = { global = { status = '<leader>tS', network = '<leader>tn' } } } })
    assert.equals('<Plug>(TandemStatus)', vim.fn.maparg('<leader>tS', 'n'))
    h.press('<Plug>(TandemStatus)')
    h.wait_note('not started')
    h.press('<leader>tn')
    h.wait_chat('network on (for the session your next prompt starts)')
  end)

  it('an unknown keymaps.global action is reported instead of ignored', function()
    h.fresh({ responses = {}, setup = { keymaps = { global = { promtp = '<leader>tp' } } } })
    local n = h.wait_note('keymaps.global.promtp is not an action')
    assert.equals(vim.log.levels.WARN, n.level)
  end)

  it(':Tandem completes subcommands from the table and each subcommand\'s own arguments', function()
    local ctx = h.fresh({ responses = {} })
    h.write(ctx.ws .. '/attach-me.txt', 'x\n')
    local subs = require('tandem.commands').subcommands
    for name, sub in pairs(subs) do
      assert.equals('function', type(sub.impl), name)
      assert.equals('string', type(sub.desc), name)
    end
    assert.same({ 'mode', 'model' }, vim.fn.getcompletion('Tandem mo', 'cmdline'))
    assert.same({ 'on', 'off', 'toggle' }, vim.fn.getcompletion('Tandem network ', 'cmdline'))
    assert.same({ 'autoEdit' }, vim.fn.getcompletion('Tandem mode au', 'cmdline'))
    assert.same({ 'attach-me.txt' }, vim.fn.getcompletion('Tandem add att', 'cmdline'))
    vim.cmd('Tandem frobnicate')
    local n = h.wait_note('unknown subcommand "frobnicate"')
    assert.truthy(n.msg:find('resume', 1, true), n.msg)
  end)

  it('the config and protocol types are LuaCATS: a ---@meta protocol file and a tandem.Config class', function()
    local meta = h.read(h.root .. '/lua/tandem/_meta/protocol.lua')
    assert.truthy(meta:find('^%-%- ') and meta:find('\n%-%-%-@meta\n'), 'a one-line comment, then ---@meta')
    for _, class in ipairs({ 'tandem.ModelInfo', 'tandem.InitializeResult', 'tandem.SessionSummary', 'tandem.DiffEntry',
      'tandem.ApprovalRequested', 'tandem.ToolCallUpdate', 'tandem.Usage', 'tandem.TurnEnded', 'tandem.McpTool',
      'tandem.McpServer', 'tandem.McpStatusResult', 'tandem.McpTrustParams', 'tandem.McpStatusEvent',
      'tandem.SlashCommand', 'tandem.CommandsListResult', 'tandem.CommandResult', 'tandem.PromptResult', 'tandem.Hook',
      'tandem.HooksListResult', 'tandem.HooksTrustParams', 'tandem.HookRan' }) do
      assert.truthy(meta:find('---@class ' .. class, 1, true), class)
    end
    local cfg = h.read(h.root .. '/lua/tandem/config.lua')
    for _, class in ipairs({ 'tandem.Config', 'tandem.ChatConfig', 'tandem.KeymapsConfig' }) do
      assert.truthy(cfg:find('---@class ' .. class, 1, true), class)
    end
    -- Every default has a field annotation.
    for key in pairs(require('tandem.config').defaults) do
      assert.truthy(cfg:find('---@field ' .. key .. '?', 1, true), 'tandem.Config documents ' .. key)
    end
  end)
end)
