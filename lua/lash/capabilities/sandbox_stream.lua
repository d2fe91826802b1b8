--- A command's output as it arrives: `tool_output_delta` events for the
-- run's `on_event` while `run_command` waits, made from the chunks the
-- sandbox's exec pushes into a `lash.core.outq`. The command's result (and
-- so what the model sees) is the exec's, unchanged; the events only show
-- it sooner.
--
--   tool_output_delta {run_id, id, name, stream = "stdout"|"stderr", text,
--                      dropped}
--
-- `text` is UTF-8 (a character split between two chunks waits for the
-- rest; bytes that are not UTF-8 become U+FFFD); `dropped` (when present)
-- is how many bytes of that stream were left out right before `text`
-- because the reader fell behind (the queue keeps at most `QUEUE_BYTES`).
-- @module lash.capabilities.sandbox_stream
local runtime = require "lash.runtime"

local M = {}

M.QUEUE_BYTES = 1024 * 1024   -- output waiting for the event reader, at most
M.CHUNK_BYTES = 16 * 1024     -- one event's text, at most

-- The length of s's longest prefix that does not end inside a UTF-8
-- character (an incomplete one at the end waits for the next chunk).
local function complete_prefix(s)
  local n = #s
  for back = 1, math.min(3, n) do
    local b = s:byte(n - back + 1)
    if b < 0x80 then return n end           -- ASCII: nothing pending
    if b >= 0xC0 then                       -- a lead byte: is its sequence whole?
      local need = b >= 0xF0 and 4 or (b >= 0xE0 and 3 or 2)
      return need > back and n - back or n
    end
  end
  return n
end
M.complete_prefix = complete_prefix

--- Make the reader of one command's output.
-- @tparam function emit the run's event sink (ctx.emit)
-- @tparam table base fields every event carries (`id`, `name`)
-- @treturn table `{queue =, finish = function()}`: pass `queue` as the
--   exec's `on_output`; call `finish()` once the exec returned or failed
--   (it drains what is left, then the reader ends)
function M.reader(emit, base)
  local q = runtime.outq.new(M.QUEUE_BYTES)
  local pending = { stdout = "", stderr = "" }
  local failed = false
  local function send(stream, text, dropped)
    if text == "" and (dropped or 0) == 0 then return end
    local ev = { type = "tool_output_delta", id = base.id, name = base.name, stream = stream,
                 text = runtime.output.utf8_repair(text) }
    if dropped and dropped > 0 then ev.dropped = dropped end
    if failed then return end
    -- an on_event that fails loses the stream, never the command
    local ok, err = pcall(emit, ev)
    if not ok then
      failed = true
      if runtime.is_error(err, "cancelled") then return end
      runtime.log("warning", "tool_output_delta: on_event failed: " .. tostring(err))
    end
  end
  local task = runtime.spawn(function()
    while true do
      local stream, text, skipped = q:next(M.CHUNK_BYTES)
      if not stream then break end
      local s = pending[stream] .. text
      local cut = complete_prefix(s)
      pending[stream] = s:sub(cut + 1)
      send(stream, s:sub(1, cut), skipped)
    end
    for _, stream in ipairs { "stdout", "stderr" } do send(stream, pending[stream]) end
  end)
  local function finish()
    q:close()
    local ok = task:wait()
    if not ok then task:cancel() end
  end
  return { queue = q, finish = finish, task = task }
end

--- Run `sb:exec(cmd, opts)` with its output streamed as events when the
-- call has somewhere to send them (ctx.emit and a call id), pcall style.
-- @return true, result | false, error
function M.exec(ctx, sb, cmd, opts)
  local emit = ctx and ctx.emit
  -- the sandbox core says whether an exec takes on_output (lash.sandbox.streams_output)
  if type(emit) ~= "function" or ctx.tool_call_id == nil or not runtime.sandbox.streams_output then
    return pcall(sb.exec, sb, cmd, opts)
  end
  local r = M.reader(emit, { id = ctx.tool_call_id, name = ctx.tool_name })
  opts.on_output = r.queue
  local ok, res = pcall(sb.exec, sb, cmd, opts)
  if not ok and runtime.is_error(res, "cancelled") then
    -- the call is being cancelled: the reader goes with it
    r.task:cancel()
    return ok, res
  end
  r.finish()
  return ok, res
end

return M
