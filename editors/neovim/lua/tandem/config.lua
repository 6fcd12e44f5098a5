-- tandem.config: default options and the merge of the user's setup() table over them.
local M = {}

---@class tandem.ChatConfig
---@field layout? 'split'|'vsplit'|'float' where the chat opens
---@field size? integer columns (vsplit) or lines (split)
---@field float? { width: number, height: number, border: string } fractions (<1) or cells
---@field fold_reasoning? boolean reasoning blocks start as closed folds
---@field markdown? boolean filetype=markdown with treesitter (false: plain tandem_chat)
---@field fold_diffs? boolean applied diffs start as closed folds
---@field auto_open? boolean open the chat (without moving the cursor) when a prompt is sent

---@class tandem.ApprovalConfig
---@field border? string
---@field max_width? number fraction of the editor
---@field max_height? number fraction of the editor

---@class tandem.KeymapsConfig
---@field global? table<string, string|false> action = lhs (actions: require('tandem.commands').actions)
---@field chat? { prompt?: string|false, steer?: string|false, stop?: string|false, model?: string|false, mode?: string|false, approvals?: string|false, close?: string|false }
---@field approval? { once?: string, always_tool?: string, always_command?: string, deny?: string, edit?: string, diff?: string, hide?: string }
---@field mcp? { trust?: string|false, refresh?: string|false, close?: string|false } keys of the :Tandem mcp list
---@field turn? { diff?: string|false, undo?: string|false, edit?: string|false, fork?: string|false } chat keys on a turn's prompt

---@class tandem.AttachConfig Let other clients attach to this Neovim's server over WebSocket (:Tandem share).
---@field listen? string a `ws://HOST:PORT` address (PORT 0 picks a free one); nil: stdio only, nobody can attach
---@field allow_origins? string[] browser origins allowed to connect (each one an --allow-origin), e.g. 'http://localhost:5173'

---@class tandem.Config The setup() table; every field is optional.
---@field cmd? string[]|string the server command (a string is a binary path: { path, 'serve' })
---@field config_file? string appended as --config FILE
---@field data_dir? string appended as --data-dir DIR
---@field env? table<string, string>|fun(): table<string, string> extra environment; a function is called at each server start
---@field framing? 'ndjson'|'content-length'
---@field cwd? string|fun(): string the workspace root of new sessions
---@field mode? 'ask'|'autoEdit'|'plan'|'fullAuto' mode of new sessions
---@field model? string model id of new sessions
---@field chat? tandem.ChatConfig
---@field approval? tandem.ApprovalConfig
---@field keymaps? tandem.KeymapsConfig
---@field request_timeout? integer ms
---@field attach? tandem.AttachConfig

---@type tandem.Config
M.defaults = {
  -- The server command; `config_file` and `data_dir` are appended as flags when set.
  cmd = { 'tandem', 'serve' },
  config_file = nil,
  data_dir = nil,
  -- Extra environment for the server, added to Neovim's: a table such as { RUST_LOG = 'debug' },
  -- or a function returning one, called each time the server starts (so a password manager is
  -- asked for an API key only when tandem starts; see :help tandem-api-key).
  env = nil,
  -- 'ndjson' runs the server through vim.system (newline-delimited JSON);
  -- 'content-length' runs it through vim.lsp.rpc.start (LSP framing). Both speak the same protocol.
  framing = 'ndjson',
  -- Working directory of new sessions; a function lets it follow the current tab.
  cwd = function()
    return vim.fn.getcwd()
  end,
  -- Mode for new sessions: ask, autoEdit, plan or fullAuto (nil = the server's default, ask).
  mode = nil,
  -- Model for new sessions (nil = the server's defaultModel).
  model = nil,
  chat = {
    -- 'split' (horizontal), 'vsplit' or 'float'.
    layout = 'vsplit',
    -- Columns for vsplit, lines for split; a fraction (<1) of the editor for float.
    size = 80,
    float = { width = 0.8, height = 0.8, border = 'rounded' },
    -- Fold reasoning blocks closed.
    fold_reasoning = true,
    -- Render the chat as Markdown (filetype=markdown, treesitter highlighting of code blocks
    -- where Neovim ships the parser); false keeps the plain `tandem_chat` filetype.
    markdown = true,
    -- Fold the diff of each applied edit closed (zo opens it); false shows it open.
    fold_diffs = true,
    -- Open the chat (without moving the cursor) when a prompt is sent.
    auto_open = true,
  },
  approval = {
    border = 'rounded',
    -- Maximum width/height as a fraction of the editor.
    max_width = 0.8,
    max_height = 0.8,
  },
  keymaps = {
    -- Global normal-mode mappings; none by default so the plugin never takes a key you use.
    -- Example: global = { prompt = '<leader>tp', chat = '<leader>tc', stop = '<leader>ts' }
    global = {},
    -- Buffer-local keys in the chat buffer (false disables one).
    chat = {
      prompt = 'i',
      steer = 's',
      stop = '<C-c>',
      model = 'm',
      mode = 'M',
      approvals = 'A',
      close = 'q',
    },
    -- Keys in the approval float and the split diff.
    approval = {
      once = 'y',
      always_tool = 'a',
      always_command = 'c',
      deny = 'n',
      edit = 'e',
      diff = 'd',
      hide = 'q',
    },
    -- Keys in the :Tandem mcp list (false disables one).
    mcp = {
      trust = 't',
      refresh = 'r',
      close = 'q',
    },
    -- Keys in the chat on a turn's prompt ("━━ You ━━" and the lines under it): its diff, undo
    -- it, edit and resend it, fork before it. Elsewhere in the chat the keys keep their meaning.
    turn = {
      diff = 'd',
      undo = 'u',
      edit = 'e',
      fork = 'f',
    },
  },
  -- How long (ms) to wait for the server to answer before reporting it as unresponsive.
  request_timeout = 10000,
  -- Other clients (another editor, a browser page, a phone through `ssh -L`) attaching to this
  -- server's sessions over WebSocket; :Tandem share shows what they need. Off by default.
  attach = {
    -- nil: the server serves only this Neovim (stdio). A 'ws://HOST:PORT' address, such as
    -- 'ws://127.0.0.1:0' (a free port), starts it with --listen stdio --listen ADDRESS. Keep it on
    -- loopback: the token is the only lock, and the traffic is not encrypted (tunnel it with ssh -L).
    listen = nil,
    -- Browser origins allowed to connect (one --allow-origin each), e.g. { 'http://localhost:5173' };
    -- only used with `listen`. Clients that send no Origin header (editors, scripts) need none.
    allow_origins = {},
  },
}

---@type tandem.Config
M.options = vim.deepcopy(M.defaults)

--- Merge the user's table over the defaults.
---@param opts? tandem.Config
---@return tandem.Config
function M.setup(opts)
  opts = opts or {}
  vim.validate({ opts = { opts, 'table' } })
  if opts.cmd ~= nil and type(opts.cmd) == 'string' then
    -- Accept a plain binary path for convenience: 'tandem' means { 'tandem', 'serve' }.
    opts = vim.tbl_extend('force', opts, { cmd = { opts.cmd, 'serve' } })
  end
  if opts.attach ~= nil then
    vim.validate('attach', opts.attach, 'table')
    vim.validate('attach.listen', opts.attach.listen, 'string', true)
    if type(opts.attach.allow_origins) == 'string' then
      -- One origin as a plain string is a list of one.
      opts = vim.tbl_extend('force', opts, { attach = vim.tbl_extend('force', opts.attach,
        { allow_origins = { opts.attach.allow_origins } }) })
    end
    vim.validate('attach.allow_origins', opts.attach.allow_origins, 'table', true)
  end
  M.options = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  -- tbl_deep_extend merges list tables index by index; the command and the origins must be
  -- replaced whole.
  if opts.cmd then
    M.options.cmd = vim.deepcopy(opts.cmd)
  end
  if opts.attach and opts.attach.allow_origins then
    M.options.attach.allow_origins = vim.deepcopy(opts.attach.allow_origins)
  end
  return M.options
end

--- The server's extra environment: setup's `env` table, or what its function returns now.
--- Returns nil and an error naming the cause and the next step when the function fails.
---@return table<string, string>? env, string? err
function M.server_env()
  local env = M.options.env
  if type(env) ~= 'function' then
    return env, nil
  end
  local ok, value = pcall(env)
  if not ok then
    return nil, ('setup({ env = function }) failed, so the server was not started: %s. Fix the function (for example '
      .. 'the password manager command it runs), then :Tandem restart.'):format(tostring(value))
  end
  if value ~= nil and type(value) ~= 'table' then
    return nil, ('setup({ env = function }) returned a %s, not a table of variables, so the server was not started; '
      .. 'return { NAME = "value" }, then :Tandem restart.'):format(type(value))
  end
  for name, v in pairs(value or {}) do
    if type(v) ~= 'string' then
      return nil, ('setup({ env = function }) gave %s a %s value (%s), so the server was not started; each value must be '
        .. 'a string (did the password manager command fail?), then :Tandem restart.'):format(tostring(name), type(v), tostring(v))
    end
  end
  return value, nil
end

--- The `attach.listen` address when set (nil when empty or unset).
---@return string?
function M.attach_listen()
  local listen = (M.options.attach or {}).listen
  if type(listen) == 'string' and vim.trim(listen) ~= '' then
    return vim.trim(listen)
  end
end

--- The full argv for the server: cmd plus --config/--data-dir when configured, and with
--- `attach.listen` set, `--listen stdio --listen ADDRESS` and one `--allow-origin` per origin.
--- opts.attach = false leaves the listen flags out (the health check's throwaway server must not
--- write a new token over the running server's).
---@param opts? { attach?: boolean }
---@return string[]
function M.server_cmd(opts)
  local o = M.options
  local cmd = vim.deepcopy(o.cmd)
  if o.config_file then
    table.insert(cmd, '--config')
    table.insert(cmd, vim.fn.expand(o.config_file))
  end
  if o.data_dir then
    table.insert(cmd, '--data-dir')
    table.insert(cmd, vim.fn.expand(o.data_dir))
  end
  local listen = M.attach_listen()
  if listen and not (opts and opts.attach == false) then
    vim.list_extend(cmd, { '--listen', 'stdio', '--listen', listen })
    for _, origin in ipairs(o.attach.allow_origins or {}) do
      vim.list_extend(cmd, { '--allow-origin', origin })
    end
  end
  return cmd
end

function M.cwd()
  local c = M.options.cwd
  if type(c) == 'function' then
    c = c()
  end
  local p = vim.fn.fnamemodify(c or vim.fn.getcwd(), ':p')
  -- The server wants an absolute directory; drop the trailing slash except for '/'.
  if #p > 1 then
    p = p:gsub('/$', '')
  end
  return p
end

return M
