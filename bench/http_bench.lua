--- bench/http_bench.lua: N sequential lash.http.request GETs of URL, either
-- outside any task (the request drives the loop in place) or inside one
-- task (it yields to the loop). Prints the seconds they took.
-- Run by bench_http.sh as: lash eval "_G.arg = {URL, N, MODE}; dofile(...)"
local lash = require "lash"

local url, n, mode = arg[1], tonumber(arg[2]), arg[3] or "inplace"
local request = lash.http.request

local function run()
  local t0 = lash.now()
  for i = 1, n do
    local status, _, body = request{ url = url }
    if status ~= 200 or #body ~= 13 then
      error(("request %d: status %s, %d bytes"):format(i, status, #body))
    end
  end
  return lash.now() - t0
end

local seconds
if mode == "task" then
  seconds = lash.spawn(run):join()
else
  seconds = run()
end
print(("%.6f"):format(seconds))
