-- bench/scale_runs.lua: bench_scale.sh's runs, by `lash eval`. N concurrent
-- runs of one agent in one process and one thread, the model a Lua
-- function (`model = function`) calling an in-process tool K times, then
-- answering. Every run waits at its first tool call until all N have
-- arrived: then the process holds N idle runs, and the Lua heap (after a
-- full collection) and the process's resident set give the memory per idle
-- run. The time from the release to the last run's end gives steps/s.
-- arg = { N, K }. Prints "wall_s steps heap_kib_per_run rss_kib_per_run
-- rss_before_kib rss_peak_kib".
local lash = require "lash"

local n, k = tonumber(arg[1]) or 10000, tonumber(arg[2]) or 10

local status_kib = dofile("bench/proc_status.lua")

local gate, arrived, heap_idle, rss_idle, t_release
local work = lash.tool { name = "work", description = "Do a step.",
  parameters = { type = "object", properties = { i = { type = "integer" } }, required = { "i" } },
  handler = function(_, args)
    if args.i == 1 then
      arrived = arrived + 1
      if arrived == n then
        collectgarbage()
        collectgarbage()
        heap_idle = collectgarbage("count")
        rss_idle = status_kib("VmRSS")
        t_release = lash.now()
        gate:set()
      else
        gate:wait()
      end
    end
    return "step " .. args.i .. " done"
  end }

local agent = lash.agent { name = "scale", tools = { work }, limits = { max_steps = k + 1 },
  model = function(_, info)
    if info.step <= k then return { tool_calls = { { name = "work", args = { i = info.step } } } } end
    return "done"
  end }

local function measure(count)
  n = count
  gate, arrived = lash.future(), 0
  collectgarbage()
  collectgarbage()
  local heap0, rss0 = collectgarbage("count"), status_kib("VmRSS")
  local tasks = {}
  for i = 1, n do tasks[i] = agent:start("go") end
  for i = 1, n do assert(tasks[i]:join().output == "done") end
  local wall = lash.now() - t_release
  return wall, (heap_idle - heap0) / n, (rss_idle - rss0) / n, rss0
end

local want = n
measure(10)   -- warm up
local wall, heap, rss, rss0 = measure(want)
-- every run takes K tool steps and a last model step after the release
print(string.format("%.6f %d %.2f %.2f %d %d", wall, n * k, heap, rss, rss0, status_kib("VmHWM")))
