#!/usr/bin/env bash
# examples/ffi/lash_ffi.lua, the LuaJIT FFI binding the LÖVE and Neovim
# examples share, under Debian's luajit: an error raised in a tool callback
# comes out of the S:step that delivered it (never unwound through lash's C
# frames) and leaves the state usable; a tool answered steps later; a hot
# loop of steps with a callback in each (code the JIT compiles); closing
# twice; results readable after close; a missing library named in the error.
# TAP; nothing is timed.
. "$(dirname "$0")/../lib.sh"
B=$(cd "${LASH_BUILD:-build}" && pwd)
command -v luajit >/dev/null 2>&1 || skip_all "luajit is not installed (make deps installs it)"
[ -f "$B/liblash.so" ] || skip_all "$B/liblash.so is not built"
if [ -n "${LASH_SANITIZED:-}" ]; then
  # the luajit interpreter cannot load an ASan library; make test runs this
  skip_all "a sanitized liblash cannot load into luajit (make test runs this)"
fi
LASH_LIB=$B/liblash.so luajit - <<'LUA'
package.path = "examples/ffi/?.lua;" .. package.path
local lash = require "lash_ffi"
local n, failed = 0, false
local function ok(cond, what, extra)
  n = n + 1
  if not cond then failed = true end
  print((cond and "ok " or "not ok ") .. n .. " - " .. what)
  if not cond and extra then print("# " .. tostring(extra):gsub("\n", "\n# ")) end
end
local LIB = os.getenv("LASH_LIB")

-- a missing library: the error names it
local okl, err = pcall(lash.open, { lib = "/nonexistent/liblash.so" })
ok(not okl and tostring(err):find("/nonexistent/liblash.so", 1, true), "a missing library is an error naming it", err)

local S = lash.open { lib = LIB }
ok(lash.version(LIB):match("^%d+%.%d+%.%d+"), "lash_version through the FFI: " .. lash.version(LIB))
ok(S:fd() >= 0, "lash_fd gives a file descriptor")

-- a callback that raises: S:step raises it, with the callback's message
S:load_spec_string([[return lash.agent { model = lash.script_model {
  function() return { tool_calls = { { name = "boom" } } } end,
  function() return "unreachable" end } }]], "boom.lua")
S:register_tool("boom", "Raises.", nil, function() error("the host tool broke") end)
local run = S:run_start("go")
local raised
for _ = 1, 1000 do
  local fine, e = pcall(S.step, S, 0)
  if not fine then raised = e break end
  if run:done() then break end
end
ok(raised and tostring(raised):find("the host tool broke", 1, true), "a callback's error comes out of S:step", raised)
ok(run:cancel() ~= nil, "the run can be cancelled after it")
for _ = 1, 100 do if run:done() then break end S:step(0) end
ok(run:status_name() == "cancelled", "and ends cancelled (" .. run:status_name() .. ")")
run:free()

-- answered steps later, and a hot loop: one callback per step, 300 times
S:load_spec_string([[return lash.agent { model = lash.script_model((function()
  local t = {}
  for i = 1, 300 do t[i] = function() lash.sleep(0.0002); return { tool_calls = { { name = "ping", args = { i = i } } } } end end
  t[301] = function(messages) return "last: " .. messages[#messages].parts[1].content end
  return t end)()) }]], "ping.lua")
local pending, answered = {}, 0
S:register_tool("ping", "Answered on the next step.", '{"type":"object","properties":{"i":{"type":"integer"}}}',
  function(call, args) pending[#pending + 1] = { call = call, i = tonumber(args:match('"i":(%d+)')) } end)
local events = 0
S:on_event(function() events = events + 1 end)
run = S:run_start("go", '{"limits":{"max_steps":1000}}')
local steps = 0
while not run:done() and steps < 200000 do
  for _, p in ipairs(pending) do
    if p.call:pending() then p.call:return_("pong " .. p.i); answered = answered + 1 end
  end
  pending = {}
  S:step(0)
  steps = steps + 1
end
local out, result = run:result()
ok(run:status_name() == "done" and out == "last: pong 300", "300 tool calls answered a step later each, from a hot loop", out)
ok(answered == 300 and steps > 300, "over " .. steps .. " steps")
ok(events > 600, "events came through the handler (" .. events .. ")")

-- close, twice; the run's result stays readable
S:close()
S:close()
local out2 = run:result()
ok(out2 == "last: pong 300", "the result is readable after close", out2)
ok(result and result:find('"status":"done"', 1, true), "result_json says done")
run:free()
print("1.." .. n)
os.exit(failed and 1 or 0)
LUA
