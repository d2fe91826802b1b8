-- bench/sandbox_bench.lua: lash's side of bench_sandbox.sh, run by
-- `lash eval`. arg = {mode, state_root, ...}:
--   exec  ROOT N        -> "median p90 id" (ms per `true` in one sandbox)
--   bigout ROOT BYTES MAX -> "wall_s peak_kib base_kib stdout_len truncated"
local lash = require "lash"
local mode, root = arg[1], arg[2]

local status_kib = dofile("bench/proc_status.lua")

if mode == "exec" then
  local n = tonumber(arg[3])
  local s = lash.sandbox.create { state_root = root, timeout = 3600 }
  for _ = 1, 10 do s:exec { "true" } end   -- warm the page cache and the probe
  local t = {}
  for i = 1, n do
    local t0 = lash.now()
    local r = s:exec { "true" }
    t[i] = (lash.now() - t0) * 1000
    assert(r.exit_code == 0)
  end
  table.sort(t)
  io.write(string.format("%.3f %.3f %s\n", t[n // 2 + 1], t[(n * 9) // 10], s:detach()))
elseif mode == "bigout" then
  local bytes, max = tonumber(arg[3]), tonumber(arg[4])
  local s <close> = lash.sandbox.create { state_root = root, timeout = 3600 }
  s:exec { "true" }
  collectgarbage("collect")
  local base = status_kib("VmRSS")
  local t0 = lash.now()
  local r = s:exec({ "sh", "-c", "head -c " .. bytes .. " /dev/zero" },
                   { timeout = 600, max_output_bytes = max })
  local wall = lash.now() - t0
  io.write(string.format("%.3f %d %d %d %s\n", wall, status_kib("VmHWM"), base,
                         #r.stdout, tostring(r.stdout_truncated)))
end
