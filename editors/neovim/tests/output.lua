-- tests/output.lua: busted output handler — one line per test, failure details, and a final `N passed, N failed` line.
return function(options)
  local busted = require('busted')
  local handler = require('busted.outputHandlers.base')()

  local function out(s)
    io.stdout:write(s .. '\n')
    io.stdout:flush()
  end

  handler.testEnd = function(element, _, status)
    local mark = ({ success = 'ok  ', pending = 'skip' })[status] or 'FAIL'
    out('  ' .. mark .. '  ' .. handler.getFullName(element))
    return nil, true
  end

  handler.suiteEnd = function()
    local problems = {}
    vim.list_extend(problems, handler.failures)
    vim.list_extend(problems, handler.errors)
    if #problems > 0 then
      out('\nFailures:')
      for _, f in ipairs(problems) do
        out('- ' .. (f.name or '?') .. (f.trace and f.trace.short_src and (' (' .. f.trace.short_src .. ':' .. tostring(f.trace.currentline) .. ')') or ''))
        out('  ' .. tostring(f.message):gsub('\n', '\n  '))
      end
    end
    local failed = handler.failuresCount + handler.errorsCount
    local line = ('%d passed, %d failed'):format(handler.successesCount, failed)
    if handler.pendingsCount > 0 then
      line = line .. (', %d skipped'):format(handler.pendingsCount)
    end
    out('\n' .. line)
    return nil, true
  end

  busted.subscribe({ 'test', 'end' }, handler.testEnd, { predicate = handler.cancelOnPending })
  busted.subscribe({ 'suite', 'end' }, handler.suiteEnd)
  return handler
end
