--- lash_nvim: run a lash agent inside Neovim, through LuaJIT's FFI.
--
-- :Lash {prompt} runs the agent (agent.lua next to this plugin, or the spec
-- given to setup) on the current buffer. The agent gets two tools over that
-- buffer, read_buffer and set_lines; its events and its streamed answer go to
-- an output buffer (lash://output) in a split. lash is stepped from Neovim's
-- own loop: a vim.loop poll on lash_fd wakes when lash has work (I/O, a due
-- timer, a ready task), and the step itself runs on the main loop
-- (vim.schedule), where callbacks may use the API. Nothing blocks the editor.
--
--   require("lash_nvim").setup { lib = "/usr/local/lib/liblash.so.0", spec = "my_agent.lua" }
local M = {}

local lashffi = require "lash_ffi"

local here = debug.getinfo(1, "S").source:match("^@(.*)/lua/lash_nvim/init%.lua$") or "."
local config = {
  lib = nil,                       -- default: $LASH_LIB, the build tree's, liblash.so.0
  spec = here .. "/agent.lua",
}
local S, poll, run                 -- the state, the fd watcher, the run in flight
local target, out_buf              -- the buffer the agent edits, the output buffer
local scheduled = false
M.last = nil                       -- the last run's outcome: status, output, events

local function default_lib()
  local env = os.getenv("LASH_LIB")
  if env then return env end
  local built = here .. "/../../build/liblash.so"
  if vim.loop.fs_stat(built) then return vim.loop.fs_realpath(built) end
  return "liblash.so.0"
end

--- Options: lib (liblash path), spec (the agent spec file).
function M.setup(opts)
  config = vim.tbl_extend("force", config, opts or {})
end

-- ---- the output buffer ---------------------------------------------------

local function output_buffer()
  if out_buf and vim.api.nvim_buf_is_valid(out_buf) then return out_buf end
  out_buf = vim.api.nvim_create_buf(true, true)
  vim.api.nvim_buf_set_name(out_buf, "lash://output")
  vim.bo[out_buf].filetype = "markdown"
  local win = vim.api.nvim_get_current_win()
  vim.cmd("botright split")
  vim.api.nvim_win_set_buf(0, out_buf)
  vim.api.nvim_set_current_win(win)
  return out_buf
end

-- Append text to the output buffer, continuing its last line.
local function append(text)
  local buf = output_buffer()
  local last = vim.api.nvim_buf_line_count(buf)
  local tail = vim.api.nvim_buf_get_lines(buf, last - 1, last, false)[1] or ""
  local lines = vim.split(tail .. text, "\n", { plain = true })
  vim.api.nvim_buf_set_lines(buf, last - 1, last, false, lines)
end

-- A note on a line of its own, after any text streamed so far.
local function note(line)
  local buf = output_buffer()
  local last = vim.api.nvim_buf_line_count(buf)
  local tail = vim.api.nvim_buf_get_lines(buf, last - 1, last, false)[1] or ""
  append((tail ~= "" and "\n" or "") .. "[" .. line .. "]\n")
end

-- ---- the tools over the target buffer -------------------------------------

local function read_buffer(call)
  if not vim.api.nvim_buf_is_valid(target) then return call:fail("the buffer was closed") end
  local out = {}
  for i, line in ipairs(vim.api.nvim_buf_get_lines(target, 0, -1, false)) do
    out[i] = i .. "\t" .. line
  end
  call:return_(table.concat(out, "\n"))
end

local SET_LINES_SCHEMA = vim.json.encode {
  type = "object",
  properties = {
    first = { type = "integer", minimum = 1, description = "first line to replace (1-based)" },
    last = { type = "integer", minimum = 0, description = "last line to replace (first - 1 inserts)" },
    lines = { type = "array", items = { type = "string" } },
  },
  required = { "first", "last", "lines" },
}

local function set_lines(call, args_json)
  if not vim.api.nvim_buf_is_valid(target) then return call:fail("the buffer was closed") end
  local a = vim.json.decode(args_json)
  local count = vim.api.nvim_buf_line_count(target)
  if a.first > count + 1 or a.last < a.first - 1 or a.last > count then
    return call:retry(string.format("lines %d..%d are outside the buffer (1..%d)", a.first, a.last, count))
  end
  local ok, err = pcall(vim.api.nvim_buf_set_lines, target, a.first - 1, a.last, true, a.lines)
  if not ok then return call:retry(tostring(err)) end
  call:return_(string.format("replaced lines %d..%d with %d line(s)", a.first, a.last, #a.lines))
end

-- ---- events ----------------------------------------------------------------

local function on_event(_, json)
  local ev = vim.json.decode(json)
  local last = M.last
  last.events[ev.type] = (last.events[ev.type] or 0) + 1
  if ev.type == "text_delta" then
    append(ev.text)
  elseif ev.type == "tool_call" then
    note("tool " .. ev.name .. " " .. vim.json.encode(ev.args or {}))
  elseif ev.type == "tool_result" then
    note(ev.name .. ": " .. tostring(ev.content):gsub("\n.*", " ..."))
  elseif ev.type == "run_end" then
    note("run_end: " .. tostring(ev.stop_reason))
  end
end

-- ---- stepping from Neovim's loop ---------------------------------------

local function stop_watching()
  if poll then poll:stop(); poll:close(); poll = nil end
end

local function finish()
  stop_watching()
  local output, result = run:result()
  M.last.status = run:status_name()
  M.last.output = output
  M.last.result = result and vim.json.decode(result) or nil
  run:free()
  run = nil
  if M.last.status ~= "done" then
    local err = M.last.result and M.last.result.error
    note("run " .. M.last.status .. (err and (": " .. tostring(err.message)) or ""))
  end
end

local arm
-- Step once (lash_step with budget 0: every ready task runs, nothing
-- blocks), then wait for lash_fd again: it is readable while work remains.
local function step()
  scheduled = false
  if not S or not run then return end
  local ok, err = pcall(S.step, S, 0)
  if not ok then
    M.last.error = tostring(err)
    note("lash: " .. M.last.error)
    run:cancel()
  end
  if run:done() then return finish() end
  arm()
end

-- The poll callback runs in a loop callback, where the API may not be
-- called: it stops watching and schedules the step on the main loop.
arm = function()
  if not poll then poll = vim.loop.new_poll(S:fd()) end
  poll:start("r", function()
    poll:stop()
    if not scheduled then
      scheduled = true
      vim.schedule(step)
    end
  end)
end

local function open()
  if S then return S end
  S = lashffi.open { lib = config.lib or default_lib() }
  S:load_spec_file(config.spec)
  S:register_tool("read_buffer", "Read the user's buffer: one line per line, 'N<TAB>text'.", nil, read_buffer)
  S:register_tool("set_lines", "Replace lines first..last of the user's buffer with lines.", SET_LINES_SCHEMA,
    set_lines)
  S:on_event(on_event)
  vim.api.nvim_create_autocmd("VimLeavePre", { callback = function() M.close() end })
  return S
end

--- Run the agent on the current buffer. One run at a time.
function M.run(prompt)
  if run then
    vim.notify("lash: a run is in flight (:LashCancel stops it)", vim.log.levels.WARN)
    return
  end
  local ok, err = pcall(open)
  if not ok then
    err = tostring(err)
    if err:find("cannot open shared object", 1, true) then
      err = err .. " (build lash with make, or name the library: require('lash_nvim').setup{lib = ...} or $LASH_LIB)"
    end
    vim.notify("lash: " .. err, vim.log.levels.ERROR)
    M.last = { status = "failed", error = err, events = {} }
    if S then S:close(); S = nil end
    return
  end
  if out_buf and vim.api.nvim_get_current_buf() == out_buf then
    vim.notify("lash: run :Lash from the buffer to edit, not from lash://output", vim.log.levels.WARN)
    return
  end
  target = vim.api.nvim_get_current_buf()
  local name = vim.api.nvim_buf_get_name(target)
  S:set_value("buffer", name ~= "" and vim.fn.fnamemodify(name, ":t") or "[No Name]")
  M.last = { status = "running", events = {} }
  append((vim.api.nvim_buf_line_count(output_buffer()) > 1 and "\n" or "") .. "> " .. prompt .. "\n")
  run = S:run_start(prompt)
  -- the run begins on the next step
  scheduled = true
  vim.schedule(step)
end

function M.cancel()
  if run then run:cancel(); vim.schedule(step) end
end

--- Wait (processing events) until the run in flight has ended, at most
-- timeout_ms. Returns M.last.
function M.wait(timeout_ms)
  vim.wait(timeout_ms or 60000, function() return run == nil end, 10)
  return M.last
end

--- Close lash: cancels a run in flight (bounded cleanup) and frees it all.
function M.close()
  stop_watching()
  if run then run:free(); run = nil end
  if S then S:close(); S = nil end
end

return M
