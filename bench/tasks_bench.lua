-- 1,000 tasks sleeping and waking concurrently: cost of one wake-up
-- (timer fire + resume + yield), with sleep(0) so no real waiting counts.
local lash = require "lash"
local ntasks, rounds = tonumber(arg[1]) or 1000, tonumber(arg[2]) or 100

local function run()
  local tasks = {}
  for i = 1, ntasks do
    tasks[i] = lash.spawn(function()
      for _ = 1, rounds do lash.sleep(0) end
    end)
  end
  for i = 1, ntasks do tasks[i]:join() end
end

run() -- warm up
collectgarbage()
local t0 = os.clock()
local w0 = lash.now()
run()
local wall = lash.now() - w0
local cpu = os.clock() - t0
local wakeups = ntasks * rounds
print(string.format("| tasks: wake-up overhead (%d tasks x %d sleeps) | %.0f | ns/wake-up | wall %.3f s, cpu %.3f s |",
  ntasks, rounds, wall / wakeups * 1e9, wall, cpu))
-- spawn + join cost
local n = 100000
w0 = lash.now()
for _ = 1, n / 1000 do
  local ts = {}
  for i = 1, 1000 do ts[i] = lash.spawn(function() return i end) end
  for i = 1, 1000 do ts[i]:join() end
end
print(string.format("| tasks: spawn + run + join | %.0f | ns/task | %d tasks |", (lash.now() - w0) / n * 1e9, n))
