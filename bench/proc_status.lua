-- bench/proc_status.lua: a field of /proc/self/status in KiB (VmRSS,
-- VmHWM), for the benchmarks run by `lash eval`:
--   local status_kib = dofile("bench/proc_status.lua")
return function(field)
  local f = assert(io.open("/proc/self/status"))
  local s = f:read("a")
  f:close()
  return tonumber(s:match(field .. ":%s*(%d+)"))
end
