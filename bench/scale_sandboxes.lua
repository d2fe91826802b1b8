-- bench/scale_sandboxes.lua: bench_scale.sh's sandboxes, by `lash eval`.
-- N local sandboxes (each its own bubblewrap jail, uid and cgroup; no disk
-- quota: N loop devices would be the machine's, not lash's, limit), made
-- concurrently, then each in a task of its own running `true` in a loop for
-- SECONDS, all at once in one process and one thread. Prints "create_s
-- commands wall_s lash_rss_kib jails_rss_kib jail_procs": the time to make
-- all N (and run a first command in each, which builds the jail), the
-- commands done in the loop, its wall time, the lash process's resident set
-- and that of everything it started (bwrap and each jail's supervisor),
-- sampled while the loops run.
-- arg = { N, SECONDS, STATE_ROOT }.
local lash = require "lash"

local n, secs, root = tonumber(arg[1]) or 100, tonumber(arg[2]) or 5, arg[3]

local status_kib = dofile("bench/proc_status.lua")

-- resident KiB of every process descended from this one, and their count
local function descendants_kib()
  local p = assert(io.popen("ps -e -o pid=,ppid=,rss="))
  local kids, rss = {}, {}
  for line in p:lines() do
    local pid, ppid, r = line:match("(%d+)%s+(%d+)%s+(%d+)")
    if pid then
      kids[ppid] = kids[ppid] or {}
      table.insert(kids[ppid], pid)
      rss[pid] = tonumber(r)
    end
  end
  p:close()
  local total, count = 0, 0
  local function walk(pid)
    for _, c in ipairs(kids[pid] or {}) do
      total, count = total + rss[c], count + 1
      walk(c)
    end
  end
  local self = assert(io.open("/proc/self/stat")):read("l"):match("^(%d+)")
  walk(self)
  return total, count
end

local boxes = {}
local t0 = lash.now()
local made = {}
for i = 1, n do
  made[i] = lash.spawn(function()
    local s = lash.sandbox.create { state_root = root, timeout = 900, limits = { disk = false } }
    assert(s:exec({ "true" }).exit_code == 0)
    return s
  end)
end
for i = 1, n do boxes[i] = made[i]:join() end
local create_s = lash.now() - t0

local done, stop = 0, false
local sampled_rss, sampled_kids, sampled_procs
local loops = {}
local t1 = lash.now()
for i = 1, n do
  loops[i] = lash.spawn(function()
    local s = boxes[i]
    while not stop do
      assert(s:exec({ "true" }).exit_code == 0)
      done = done + 1
    end
  end)
end
lash.sleep(secs / 2)
sampled_rss = status_kib("VmRSS")
sampled_kids, sampled_procs = descendants_kib()
lash.sleep(secs / 2)
stop = true
for i = 1, n do loops[i]:join() end
local wall = lash.now() - t1
for i = 1, n do boxes[i]:destroy() end
print(string.format("%.3f %d %.3f %d %d %d", create_s, done, wall, sampled_rss, sampled_kids, sampled_procs))
