-- subagents_bench.lua: N agents of K tool steps each, run (a) as N
-- concurrent top-level runs and (b) as N concurrent sub-agents of one
-- parent (one turn of N calls to child:as_tool), in one process and one
-- thread. The model and the tool are in-process functions, so what is
-- measured is the harness. Each child waits at its first tool call until
-- all N have arrived: then the Lua heap (after a full collection) holds N
-- live runs, which gives the memory per run.
--
-- A third mode, "call", is the parent calling a plain tool N times that
-- waits the same way: what any tool call of the parent costs, which is part
-- of what a child costs.
--
-- arg = { N, K }. Prints "mode wall_s heap_per_run_kib" lines.
local lash = require "lash"

local n, k = tonumber(arg[1]) or 1000, tonumber(arg[2]) or 10

local gate, arrived, sampled
local work = lash.tool { name = "work", description = "Do a step.",
  parameters = { type = "object", properties = { i = { type = "integer" } }, required = { "i" } },
  handler = function(_, args)
    if args.i == 1 then
      arrived = arrived + 1
      if arrived == n then
        collectgarbage()
        collectgarbage()
        sampled = collectgarbage("count")
        gate:set()
      else
        gate:wait()
      end
    end
    return "step " .. args.i .. " done"
  end }

local child = lash.agent { name = "child", tools = { work }, limits = { max_steps = k + 1 },
  model = function(_, info)
    if info.step <= k then return { tool_calls = { { name = "work", args = { i = info.step } } } } end
    return "done"
  end }

local child_tool = child:as_tool()
local plain = lash.tool { name = "child",
  parameters = { type = "object", properties = { input = { type = "string" } } },
  handler = function(ctx) return work.handler(ctx, { i = 1 }) end }
local function parent_with(t) return lash.agent { name = "parent", tools = { t },
  limits = { max_calls_per_turn = n, max_concurrent_tools = n, max_steps = 3 },
  model = function(_, info)
    if info.step == 1 then
      local calls = {}
      for i = 1, n do calls[i] = { name = "child", args = { input = "go" }, id = "c" .. i } end
      return { tool_calls = calls }
    end
    return "all done"
  end } end
local parent, plain_parent = parent_with(child_tool), parent_with(plain)

local function measure(mode)
  gate, arrived, sampled = lash.future(), 0, nil
  collectgarbage()
  collectgarbage()
  local base = collectgarbage("count")
  local t0 = lash.now()
  if mode == "top" then
    local tasks = {}
    for i = 1, n do tasks[i] = child:start("go") end
    for i = 1, n do assert(tasks[i]:join().output == "done") end
  elseif mode == "sub" then
    local res = parent:start("go"):join()
    assert(res.output == "all done" and res.usage.tool_calls == n + n * k, "sub-agents did not all finish")
  else
    assert(plain_parent:start("go"):join().output == "all done")
  end
  local wall = lash.now() - t0
  return wall, (sampled - base) / n
end

-- warm up both paths once (small), then measure
do
  local saved = n
  n = 10
  measure("top")
  measure("sub")
  n = saved
end
collectgarbage()
for _, mode in ipairs { "top", "sub", "call" } do
  local wall, kib = measure(mode)
  print(string.format("%s %.6f %.3f", mode, wall, kib))
end
