--- The terminal lines of sub-agents' events (events with a `path`, see
-- lash.subagent) for the `lash run` printer: each line indented by the
-- child's depth and led by its name (`helper#call_1`), since several
-- children may print at once. A child's streamed text is gathered and
-- shown as one line when its turn is over. What a child's events carry
-- (names, ids, text) goes through the printer's sanitizer (`p:safe`,
-- `one_line`).
-- @module lash.cli.nested
local M = {}

local function key_of(ev)
  return table.concat(ev.path, "\0")
end

local function prefix(p, ev)
  local depth = #ev.path - 1
  return string.rep("  ", depth) .. p:paint("magenta", p:safe(ev.path[#ev.path])) .. " "
end

-- Print what a child streamed so far, as one line.
local function flush(p, ev, h)
  local buf = p.nested_text and p.nested_text[key_of(ev)]
  if buf and #buf > 0 then
    p.nested_text[key_of(ev)] = nil
    p:line(prefix(p, ev) .. h.one_line(table.concat(buf), p.width))
  end
end

--- Print one event of a sub-agent. `h` has the printer module's helpers
-- (one_line, args_text, usage_line).
function M.event(p, ev, h)
  local ty = ev.type
  if ty == "text_delta" then
    p.nested_text = p.nested_text or {}
    local k = key_of(ev)
    local buf = p.nested_text[k] or {}
    buf[#buf + 1] = ev.text
    p.nested_text[k] = buf
    return
  end
  if ty == "thinking_delta" or ty == "thinking" or ty == "model_request" or ty == "usage"
      or ty == "tool_output_delta" then return end
  flush(p, ev, h)
  local pre = prefix(p, ev)
  if ty == "run_start" then
    p:line(pre .. p:paint("dim", "↳ " .. p:safe(ev.agent) .. " · " .. p:safe(ev.model)))
  elseif ty == "text" then
    p:line(pre .. h.one_line(ev.text, p.width))
  elseif ty == "tool_call" then
    p:line(pre .. p:paint("cyan", "▸ " .. p:safe(ev.name)) .. " "
      .. p:paint("dim", h.one_line(h.args_text(ev.args), p.width)))
  elseif ty == "tool_result" then
    local mark = ev.status == "ok" and p:paint("green", "✓ ")
      or (ev.status == "denied" and p:paint("yellow", "✗ ") or p:paint("yellow", "↻ "))
    p:line(pre .. mark .. p:paint("dim", h.one_line(ev.content or "", p.width)))
  elseif ty == "approval_request" then
    p:line(pre .. p:paint("yellow", "? " .. p:safe(ev.name) .. " needs approval"))
  elseif ty == "retry" then
    p:line(pre .. p:paint("yellow", "↻ " .. p:safe(ev.kind) .. " retry " .. tostring(ev.attempt) .. ": ")
      .. p:paint("dim", h.one_line(ev.message or "", p.width)))
  elseif ty == "handoff" then
    p:line(pre .. p:paint("yellow", "⇄ handed off to " .. p:safe(ev.to)))
  elseif ty == "run_end" then
    if ev.error then
      p:line(pre .. p:paint("red", "✗ " .. (ev.stop_reason == "cancelled" and "cancelled" or "failed")) .. " "
        .. p:paint("dim", h.one_line(ev.error.message or "", p.width)))
    else
      p:line(pre .. p:paint("dim", "■ " .. p:safe(ev.stop_reason)
        .. (ev.usage and (" · " .. h.usage_line(ev.usage)) or "")))
    end
  end
end

return M
