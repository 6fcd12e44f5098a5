-- tandem.context: files attached to a prompt — `@path` mentions (completed from the workspace's files in the prompt input) and :Tandem add.
--
-- An attached file travels as text in the prompt itself (a fenced block naming the path), so the
-- model sees exactly what the user attached, and history shows it. Attachments are read when the
-- prompt is sent, never earlier, so the model gets the file as it is then.
local M = {}

--- The most bytes one attached file may have: past it the prompt is not sent and the error says
--- how to send part of the file instead.
M.MAX_FILE_BYTES = 256 * 1024
--- The most bytes one attached image or PDF may have (sent base64, a third larger, in one message).
M.MAX_BINARY_BYTES = 5 * 1024 * 1024
--- Files sent as prompt parts instead of text: images (for models with vision) and PDF documents.
M.BINARY_TYPES = {
  png = { type = 'image', mimeType = 'image/png' },
  jpg = { type = 'image', mimeType = 'image/jpeg' },
  jpeg = { type = 'image', mimeType = 'image/jpeg' },
  gif = { type = 'image', mimeType = 'image/gif' },
  webp = { type = 'image', mimeType = 'image/webp' },
  pdf = { type = 'document', mimeType = 'application/pdf' },
}
--- Workspace files offered by `@` completion at most (a huge tree is cut, never walked whole).
M.MAX_LISTED = 20000

local SKIP_DIRS = { ['.git'] = true, node_modules = true, target = true, ['.venv'] = true, ['.tandem'] = true }

--- Files attached with :Tandem add, waiting for the next prompt (workspace-relative or absolute paths).
---@type string[]
M.pending = {}

--- Workspace files, relative to `root`: `git ls-files` in a git work tree (so ignored files stay
--- out), otherwise a walk that skips .git, node_modules, target and .venv.
---@param root string
---@return string[]
function M.workspace_files(root)
  local git = vim.system({ 'git', '-C', root, 'ls-files', '--cached', '--others', '--exclude-standard' }, { text = true }):wait(3000)
  if git.code == 0 and git.stdout and git.stdout ~= '' then
    local files = vim.split(git.stdout, '\n', { trimempty = true })
    if #files > M.MAX_LISTED then
      files = vim.list_slice(files, 1, M.MAX_LISTED)
    end
    return files
  end
  local files = {}
  for name, kind in vim.fs.dir(root, {
    depth = 12,
    skip = function(dir)
      return not SKIP_DIRS[vim.fs.basename(dir)]
    end,
  }) do
    if kind == 'file' then
      files[#files + 1] = name
      if #files >= M.MAX_LISTED then
        break
      end
    end
  end
  table.sort(files)
  return files
end

--- Completion for the prompt input (`input()` customlist: the whole line is the lead): when the
--- word under the cursor starts with `@`, the lines that complete it to each matching workspace
--- file (paths starting with what was typed first, then paths containing it).
---@param line string the prompt typed so far
---@param root string the workspace root
---@return string[]
function M.complete_line(line, root)
  local before, lead = line:match('^(.-)@([^%s@]*)$')
  if not before then
    return {}
  end
  local starts, contains = {}, {}
  for _, f in ipairs(M.workspace_files(root)) do
    if lead == '' or f:sub(1, #lead) == lead then
      starts[#starts + 1] = f
    elseif f:find(lead, 1, true) then
      contains[#contains + 1] = f
    end
  end
  local out = {}
  for _, f in ipairs(vim.list_extend(starts, contains)) do
    out[#out + 1] = before .. '@' .. f
  end
  return out
end

--- Completion of the prompt input: `/name` at the start completes slash commands (and /model,
--- /mode their argument; tandem.slash), `@` workspace files (complete_line).
---@param line string the prompt typed so far
---@param root string the workspace root
---@return string[]
function M.complete_prompt(line, root)
  if line:match('^/%S*$') or line:match('^/mode%s+%S*$') or line:match('^/model%s+%S*$') then
    return require('tandem.slash').complete_line(line)
  end
  return M.complete_line(line, root)
end

--- The `@path` words of a prompt that name a readable file (relative to root, or absolute).
---@param text string
---@param root string
---@return string[] paths as written
function M.mentions(text, root)
  local out, seen = {}, {}
  for word in text:gmatch('@([^%s]+)') do
    word = word:gsub('[%.,;:!?%)]+$', '') -- "look at @a.lua." ends a sentence, not the name
    local abs = word:match('^/') and word or (root .. '/' .. word)
    if not seen[word] and vim.fn.filereadable(abs) == 1 then
      seen[word] = true
      out[#out + 1] = word
    end
  end
  return out
end

--- One attachment: a fenced block of text naming the path, or for an image or a PDF a prompt part
--- ({type = 'image'|'document', mimeType, data}). Returns nil and an error that names the cause and
--- the next step when the file cannot be attached.
---@param path string as the user wrote it
---@param root string
---@return string|table|nil block, string? err
function M.render(path, root)
  local abs = path:match('^/') and path or (root .. '/' .. path)
  local stat = vim.uv.fs_stat(abs)
  if not stat or stat.type ~= 'file' then
    return nil, ('%s is not a readable file (looked at %s); check the path, relative to %s.'):format(path, abs, root)
  end
  local kind = M.BINARY_TYPES[(abs:match('%.(%w+)$') or ''):lower()]
  if kind then
    if stat.size > M.MAX_BINARY_BYTES then
      return nil, ('%s is %d KiB, over the %d KiB an attached image or PDF may have; attach a smaller or cropped file.')
        :format(path, math.ceil(stat.size / 1024), M.MAX_BINARY_BYTES / 1024)
    end
    local f = io.open(abs, 'rb')
    if not f then
      return nil, ('%s cannot be opened for reading; check its permissions.'):format(path)
    end
    local bytes = f:read('*a')
    f:close()
    local part = { type = kind.type, mimeType = kind.mimeType, data = vim.base64.encode(bytes) }
    if kind.type == 'document' then
      part.name = vim.fs.basename(abs)
    end
    return part
  end
  if stat.size > M.MAX_FILE_BYTES then
    return nil, ('%s is %d KiB, over the %d KiB a file attached to a prompt may have; attach the part that matters '
      .. "instead (select it and :'<,'>Tandem prompt), or let the agent read it with its read_file tool.")
      :format(path, math.ceil(stat.size / 1024), M.MAX_FILE_BYTES / 1024)
  end
  local f = io.open(abs, 'rb')
  if not f then
    return nil, ('%s cannot be opened for reading; check its permissions.'):format(path)
  end
  local content = f:read('*a')
  f:close()
  if content:find('\0', 1, true) then
    return nil, ('%s is a binary file, which cannot be attached as text; describe it or attach a text file.'):format(path)
  end
  local ft = vim.filetype.match({ filename = abs }) or ''
  -- A fence longer than any backtick run in the file, so the file cannot close it early.
  local longest = 2
  for run in content:gmatch('`+') do
    longest = math.max(longest, #run)
  end
  local fence = string.rep('`', longest + 1)
  if content ~= '' and content:sub(-1) ~= '\n' then
    content = content .. '\n'
  end
  return ('Attached file `%s`:\n%s%s\n%s%s'):format(path, fence, ft, content, fence)
end

--- The attachments of a prompt: its @mentions and the files added with :Tandem add (consumed).
--- Returns the attachments (text blocks, and prompt parts for images and PDFs) and the paths, or
--- nil and the first error.
---@param text string
---@param root string
---@return (string|table)[]? blocks, string[]|string paths_or_err
function M.collect(text, root)
  local paths, seen = {}, {}
  for _, p in ipairs(M.pending) do
    if not seen[p] then
      seen[p] = true
      paths[#paths + 1] = p
    end
  end
  for _, p in ipairs(M.mentions(text, root)) do
    if not seen[p] then
      seen[p] = true
      paths[#paths + 1] = p
    end
  end
  local blocks = {}
  for _, p in ipairs(paths) do
    local block, err = M.render(p, root)
    if not block then
      return nil, err
    end
    blocks[#blocks + 1] = block
  end
  M.pending = {}
  return blocks, paths
end

--- :Tandem add {file}: attach a file to the next prompt. Returns the path kept, or nil and an error.
---@param path string
---@param root string
---@return string? path, string? err
function M.add(path, root)
  local abs = vim.fn.fnamemodify(vim.fn.expand(path), ':p')
  local rel = abs
  if abs:sub(1, #root + 1) == root .. '/' then
    rel = abs:sub(#root + 2)
  end
  local _, err = M.render(rel, root)
  if err then
    return nil, err
  end
  for _, p in ipairs(M.pending) do
    if p == rel then
      return rel
    end
  end
  M.pending[#M.pending + 1] = rel
  return rel
end

return M
