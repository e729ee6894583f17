-- A real editor as the client of `flemma lsp`: Neovim (0.7 or later, headless) opens a .chat
-- file, attaches the server, asks for hover, definition and code actions, runs the approve
-- action's command as a user picking it would (the server records the person's approval and
-- asks the editor to apply its edit), saves, and writes what it saw as JSON.
--
-- Environment: FLEMMA_BIN (the flemma binary), FLEMMA_OUT (the JSON report).
local bin = vim.env.FLEMMA_BIN
local out = vim.env.FLEMMA_OUT
local report = { steps = {} }

local function finish()
  local f = assert(io.open(out, 'w'))
  f:write(vim.fn.json_encode(report))
  f:close()
end

local ok, err = pcall(function()
  local buf = vim.api.nvim_get_current_buf()
  local uri = vim.uri_from_bufnr(buf)
  local id = vim.lsp.start_client({
    name = 'flemma',
    cmd = { bin, 'lsp' },
    root_dir = vim.fn.expand('%:p:h'),
  })
  assert(id, 'the client did not start')
  vim.lsp.buf_attach_client(buf, id)
  local client = vim.lsp.get_client_by_id(id)
  assert(vim.wait(10000, function() return client.initialized end), 'no initialize')
  table.insert(report.steps, 'initialized')

  local function request(method, params)
    local response, e = client.request_sync(method, params, 10000, buf)
    assert(response, method .. ': ' .. tostring(e))
    assert(not response.err, method .. ': ' .. vim.inspect(response.err))
    return response.result
  end
  local function at(line)
    return { textDocument = { uri = uri }, position = { line = line, character = 2 } }
  end
  local function line_of(pattern)
    for i, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
      if line:find(pattern, 1, true) then return i - 1 end
    end
    error('no line with ' .. pattern)
  end

  local use = line_of('**Tool Use:**')
  local result = line_of('**Tool Result:**')
  report.hover = request('textDocument/hover', at(use)).contents.value
  report.definition = request('textDocument/definition', at(use))[1].range.start.line
  report.result_line = result

  local actions = request('textDocument/codeAction', {
    textDocument = { uri = uri },
    range = { start = { line = result, character = 0 }, ['end'] = { line = result, character = 0 } },
    context = { diagnostics = {} },
  })
  report.actions = {}
  for _, action in ipairs(actions) do table.insert(report.actions, action.title) end
  -- Approve, as a user picking the first action: its command, whose edit the server sends.
  assert(actions[1].command, 'the approve action runs no command')
  request('workspace/executeCommand', actions[1].command)
  assert(vim.wait(10000, function()
    return vim.fn.search('(approved)', 'nw') > 0
  end), 'the approve edit never came')
  vim.cmd('write')
  table.insert(report.steps, 'approved and saved')

  -- The server saw the edit (incremental sync): its hover now shows the new status.
  report.hover_after = request('textDocument/hover', at(result)).contents.value
  local symbols = request('textDocument/documentSymbol', { textDocument = { uri = uri } })
  report.symbols = {}
  for _, s in ipairs(symbols) do table.insert(report.symbols, s.name) end

  client.stop()
  vim.wait(5000, function() return client.is_stopped() end, 50)
  table.insert(report.steps, 'stopped')
end)
if not ok then report.error = tostring(err) end
finish()
vim.cmd('qa!')
