--- The terminal printer for run events (`lash run`): text as it streams,
-- each tool call and a short result, retries, an elapsed-time spinner
-- while waiting on the model or a slow tool (TTY only), and a final usage
-- line. Colour only on a TTY and never when NO_COLOR is set. With `json`,
-- every event is printed as one JSON line instead.
-- @module lash.cli.printer
local json = require "lash.json"

local M = {}

local Printer = {}
Printer.__index = Printer

local runtime = require "lash.runtime"

--- Is file descriptor `fd` (default 1) a terminal?
function M.is_tty(fd)
  return runtime.sys.isatty(fd or 1)
end

--- Should output be coloured? Only on a TTY, never with NO_COLOR set.
function M.use_color(tty)
  local nc = os.getenv("NO_COLOR")
  return tty and (nc == nil or nc == "")
end

local CODES = { dim = "2", bold = "1", red = "31", green = "32", yellow = "33", cyan = "36", magenta = "35" }

local SPIN = { "⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏" }

--- Make a printer.
-- @tparam table opts `write(s)` (default: io.stdout), `tty` (draw the
--   spinner; default: stdout is a TTY), `color` (default: tty and no
--   NO_COLOR), `json` (JSON lines), `width` (result preview, default 100)
function M.new(opts)
  opts = opts or {}
  local write = opts.write or function(s) io.stdout:write(s) io.stdout:flush() end
  local tty = opts.tty
  if tty == nil then tty = M.is_tty(1) end
  local color = opts.color
  if color == nil then color = M.use_color(tty) end
  return setmetatable({ write = write, tty = tty, color = color, json = opts.json, width = opts.width or 100,
                        at_line_start = true, spin_label = nil, spin_line = false, started = nil,
                        header_note = opts.header_note }, Printer)
end

function Printer:paint(style, s)
  if not self.color then return s end
  return "\27[" .. CODES[style] .. "m" .. s .. "\27[0m"
end

-- Erase the spinner line before printing anything else.
function Printer:clear_spin()
  if self.spin_line then
    self.write("\r\27[2K")
    self.spin_line = false
  end
end

function Printer:line(s)
  self:end_live()
  self:clear_spin()
  if not self.at_line_start then self.write("\n") end
  self.write(s .. "\n")
  self.at_line_start = true
end

function Printer:text(s)
  self:end_live()
  self:clear_spin()
  self.write(s)
  self.at_line_start = s:sub(-1) == "\n"
end

-- The spinner: a task redrawing "⠋ label 1.2s" every 100 ms while waiting.
function Printer:spin(label)
  self.spin_label = label
  self.spin_since = runtime.now()
  if not self.tty or self.spinner then return end
  local L = runtime
  self.spinner = L.spawn(function()
    local i = 0
    while true do
      L.sleep(0.1)
      if self.live and self.live.dirty then self:draw_live() end
      if self.spin_label and self.at_line_start then
        i = i % #SPIN + 1
        local secs = L.now() - self.spin_since
        self.write("\r\27[2K" .. self:paint("cyan", SPIN[i]) .. " "
          .. self:paint("dim", string.format("%s %.1fs", self.spin_label, secs)))
        self.spin_line = true
      end
    end
  end)
end

function Printer:unspin()
  self.spin_label = nil
  self:clear_spin()
end

--- Stop the spinner task (call when the run is over).
function Printer:close()
  self:unspin()
  if self.spinner then
    self.spinner:cancel()
    -- when lash is exiting (a second signal) even this wait fails; the
    -- line is cleared either way
    pcall(self.spinner.wait, self.spinner)
    self.spinner = nil
  end
  if not self.json and not self.at_line_start then self.write("\n") self.at_line_start = true end
end

--- Text from outside lash (a model, a tool, a server, a spec) made safe
-- for a terminal: control characters other than newline and tab become
-- caret notation (ESC is "^["), C1 controls (U+0080..U+009F, which some
-- terminals read as CSI) and ill-formed UTF-8 (a lone 0x9B is 8-bit CSI)
-- become U+FFFD, so no escape sequence it carries can move the cursor,
-- retitle the window or write the clipboard. The one sanitizer: every
-- path that shows outside text on a terminal calls this (or `shown`); it
-- is lash_term_visible in C (src/1-base/output.c), which the runtime's
-- stderr log uses too.
function M.visible(s)
  return runtime.output.visible(tostring(s or ""))
end
local visible = M.visible

local tty_of = {}
--- s as it may be shown on file descriptor fd (1, the default: stdout; 2:
-- stderr): made visible when that is a terminal, as it came otherwise
-- (piped, or `--json`).
function M.shown(s, fd)
  fd = fd or 1
  if tty_of[fd] == nil then tty_of[fd] = M.is_tty(fd) end
  s = tostring(s == nil and "" or s)
  return tty_of[fd] and visible(s) or s
end

-- outside text in this printer's stream
function Printer:safe(s)
  s = tostring(s == nil and "" or s)
  return self.tty and visible(s) or s
end

local function one_line(s, width)
  s = visible(s)
  local first, rest = s:match("^([^\n]*)\n?(.*)$")
  local extra = 0
  if rest and rest ~= "" then
    local _, n = rest:gsub("\n", "")
    extra = n + (rest:sub(-1) == "\n" and 0 or 1)
  end
  if #first > width then
    local cut = width
    -- do not cut a UTF-8 sequence in half
    while cut > 0 and first:byte(cut + 1) and first:byte(cut + 1) >= 0x80 and first:byte(cut + 1) < 0xC0 do
      cut = cut - 1
    end
    first = first:sub(1, cut) .. "…"
  end
  if extra > 0 then first = first .. string.format(" (+%d line%s)", extra, extra == 1 and "" or "s") end
  return first
end
M.one_line = one_line

local function args_text(args)
  if type(args) == "string" then return args end
  -- sorted keys: the same call prints the same way every time
  local ok, s = pcall(json.encode_canonical, args or {})
  return ok and s or "?"
end

local function thousands(n)
  local s = string.format("%d", n)
  local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (out:gsub("^,", ""))
end

--- The final usage line, e.g. "2 requests · 1,234 tokens in (1,000 cached) · 56 out · 1 tool call · 1.2s".
function M.usage_line(u, elapsed)
  local parts = { string.format("%d request%s", u.requests, u.requests == 1 and "" or "s") }
  local cached = ""
  if (u.cache_read_tokens or 0) > 0 or (u.cache_write_tokens or 0) > 0 then
    cached = string.format(" (%s cached, %s written)", thousands(u.cache_read_tokens or 0),
                           thousands(u.cache_write_tokens or 0))
  end
  parts[#parts + 1] = thousands(u.input_tokens) .. " tokens in" .. cached
  parts[#parts + 1] = thousands(u.output_tokens) .. " out"
    .. ((u.reasoning_tokens or 0) > 0 and (" (" .. thousands(u.reasoning_tokens) .. " reasoning)") or "")
  parts[#parts + 1] = string.format("%d tool call%s", u.tool_calls, u.tool_calls == 1 and "" or "s")
  if elapsed then parts[#parts + 1] = string.format("%.1fs", elapsed) end
  return table.concat(parts, " · ")
end

-- ---- the live tail of a running command (tool_output_delta, TTY only) ----
-- The last LIVE_LINES lines of what a command prints, redrawn in place
-- under its tool line (at most every LIVE_EVERY seconds; the spinner's tick
-- draws what came in between) and erased when anything else is printed:
-- the result line says how it ended.
local LIVE_LINES, LIVE_EVERY = 5, 0.05

local function live_width(self)
  local cols = tonumber(os.getenv("COLUMNS") or "") or 80
  return math.max(20, math.min(self.width, cols - 6))
end

-- A line cut to `width` characters (not bytes: UTF-8 counts once).
local function fit(line, width)
  local n, cut = 0, nil
  for pos in line:gmatch("()[^\128-\191]") do
    n = n + 1
    if n > width then cut = pos break end
  end
  return cut and (line:sub(1, cut - 1) .. "…") or line
end

function Printer:draw_live()
  local live = self.live
  local shown = {}
  for _, l in ipairs(live.lines) do shown[#shown + 1] = l end
  if live.partial ~= "" then shown[#shown + 1] = live.partial end
  while #shown > LIVE_LINES do table.remove(shown, 1) end
  self:clear_spin()
  local out = {}
  -- back to the region's first line, cleared to the end of the screen
  if live.drawn > 0 then out[1] = "\27[" .. live.drawn .. "F\27[J" end
  local width = live_width(self)
  for _, l in ipairs(shown) do
    out[#out + 1] = self:paint("dim", "  │ " .. fit(visible(l:gsub("\t", "  ")), width)) .. "\n"
  end
  self.write(table.concat(out))
  live.drawn, live.dirty, live.at = #shown, false, runtime.now()
  self.at_line_start = true
end

--- Erase the live tail (before anything else is printed).
function Printer:end_live()
  local live = self.live
  if not live then return end
  self.live = nil
  if live.drawn > 0 then
    self:clear_spin()
    self.write("\27[" .. live.drawn .. "F\27[J")
    self.at_line_start = true
  end
end

local handlers = {}

function handlers.run_start(self, ev)
  self.started = runtime.now()
  self:line(self:paint("dim", "● " .. self:safe(ev.agent) .. " · " .. self:safe(ev.model)
    .. (self.header_note and (" · " .. self.header_note) or "")))
end

function handlers.model_request(self)
  self.streamed = false
  self:spin("thinking")
end

-- Reasoning is shown dimmed, apart from the answer: a "thinking" line that
-- the answer's text starts after.
local function end_thinking(self)
  if self.thinking then
    self.thinking = false
    if not self.at_line_start then self.write("\n") self.at_line_start = true end
  end
end

function handlers.text_delta(self, ev)
  self.spin_label = nil
  self.streamed = true
  end_thinking(self)
  -- on a terminal the model's text cannot carry escape sequences; piped,
  -- it is passed on as it came
  self:text(self.tty and visible(ev.text) or ev.text)
end
handlers.text = handlers.text_delta

function handlers.thinking_delta(self, ev)
  self.spin_label = nil
  if not self.thinking then
    self:line(self:paint("dim", "∴ thinking"))
    self.thinking = true
  end
  self:clear_spin()
  self.write(self:paint("dim", self.tty and visible(ev.text) or ev.text))
  self.at_line_start = ev.text:sub(-1) == "\n"
end
handlers.thinking = function(self, ev)
  handlers.thinking_delta(self, ev)
  end_thinking(self)
end

function handlers.tool_call(self, ev)
  self:unspin()
  end_thinking(self)
  self:line(self:paint("cyan", "▸ " .. self:safe(ev.name)) .. " "
    .. self:paint("dim", one_line(args_text(ev.args), self.width)))
  self:spin("running " .. self:safe(ev.name))
end

function handlers.tool_output_delta(self, ev)
  -- piped, the output would only be mixed into the answer's text: the
  -- result line and --json carry it
  if not self.tty then return end
  local live = self.live
  if not live then
    if not self.at_line_start then self.write("\n") self.at_line_start = true end
    live = { lines = {}, partial = "", drawn = 0, at = 0 }
    self.live = live
  end
  local text = ev.text or ""
  if ev.dropped then text = string.format("[… %d bytes left out …]\n", ev.dropped) .. text end
  text = live.partial .. text:gsub("\r\n", "\n")
  for line in text:gmatch("([^\n]*)\n") do
    -- a progress bar redraws its line with \r: show what it shows last
    live.lines[#live.lines + 1] = line:match("([^\r]*)\r*$")
    if #live.lines > LIVE_LINES then table.remove(live.lines, 1) end
  end
  live.partial = (text:match("[^\n]*$") or ""):match("([^\r]*)\r*$")
  live.dirty = true
  if runtime.now() - live.at >= LIVE_EVERY then self:draw_live() end
end

function handlers.port_published(self, ev)
  self:unspin()
  self:line(self:paint("cyan", "⇢ port " .. tostring(ev.port)) .. " of the sandbox at "
    .. self:paint("bold", tostring(ev.address)))
end

function handlers.approval_request(self, ev)
  self:unspin()
  self:line(self:paint("yellow", "? " .. self:safe(ev.name) .. " needs approval"))
end

function handlers.tool_result(self, ev)
  self:unspin()
  local mark = ev.status == "ok" and self:paint("green", "  ✓ ")
    or (ev.status == "denied" and self:paint("yellow", "  ✗ ") or self:paint("yellow", "  ↻ "))
  local content = ev.content or ""
  if ev.status == "retry" then
    content = content:gsub("\n\nFix the errors and try again%.$", ""):gsub(":\n%- ", ": "):gsub("\n%- ", "; ")
  end
  self:line(mark .. self:paint("dim", one_line(content, self.width)))
end

function handlers.retry(self, ev)
  self:unspin()
  end_thinking(self)
  if ev.kind == "model" then
    if ev.discarded_text or ev.discarded_thinking then
      -- the text above came from the failed attempt: say it does not count
      self:line(self:paint("yellow", "↶ discarded: the text above was cut off and is sent again"))
    end
    self:line(self:paint("yellow", string.format("↻ model request failed (%s), retry %d in %.1fs: ",
      ev.status and ("HTTP " .. self:safe(ev.status)) or self:safe(ev.reason), ev.attempt, ev.delay or 0))
      .. self:paint("dim", one_line(ev.message, self.width)))
  elseif ev.kind == "output" then
    self:line(self:paint("yellow", string.format("↻ the answer does not match the output schema, retry %d: ",
      ev.attempt)) .. self:paint("dim", one_line(ev.message, self.width)))
  end
end

function handlers.handoff(self, ev)
  self:unspin()
  end_thinking(self)
  self:line(self:paint("yellow", "⇄ " .. self:safe(ev.from) .. " handed off to " .. self:safe(ev.to)))
end

function handlers.run_end(self, ev)
  self:unspin()
  end_thinking(self)
  if ev.output ~= nil and type(ev.output) ~= "string" then
    -- structured output: the decoded value, printed as JSON unless its text was shown
    if not self.streamed then self:line(self:safe(json.encode_canonical(ev.output))) end
  elseif ev.output and ev.output ~= "" and not self.streamed then
    -- not streamed: the answer arrives whole
    self:text(self.tty and visible(ev.output) or ev.output)
  end
  local elapsed = self.started and (runtime.now() - self.started) or nil
  if ev.stop_reason == "approval_required" then
    self:line(self:paint("yellow", "■ stopped: tool calls need approval"))
    for _, p in ipairs(ev.pending or {}) do
      self:line(self:paint("yellow", "  " .. self:safe(p.id) .. " " .. self:safe(p.name) .. " ")
        .. one_line(args_text(p.args), self.width))
    end
  elseif ev.stop_reason == "max_tokens" then
    self:line(self:paint("yellow", "■ the answer hit the output token limit"))
  elseif ev.error then
    self:line(self:paint("red", "✗ " .. (ev.stop_reason == "cancelled" and "cancelled" or "failed")))
  end
  if ev.usage then self:line(self:paint("dim", "── " .. M.usage_line(ev.usage, elapsed))) end
end

local NESTED = { one_line = one_line, args_text = args_text, usage_line = M.usage_line }

--- Print one event.
function Printer:event(ev)
  if self.json then
    local s = json.try_encode_canonical(ev)
      or json.encode_canonical { type = ev.type, error = "event could not be encoded" }
    self.write(s .. "\n")
    return
  end
  if ev.path then
    -- a sub-agent's event: indented, led by its name (lash.cli.nested)
    self:unspin()
    require("lash.cli.nested").event(self, ev, NESTED)
    return
  end
  local h = handlers[ev.type]
  if h then h(self, ev) end
end

--- An `on_event` function for this printer.
function Printer:handler()
  return function(ev) self:event(ev) end
end

return M
