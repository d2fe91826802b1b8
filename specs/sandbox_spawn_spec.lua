-- sandbox:spawn on the local backend: a long-lived process in the jail
-- with its streams on the loop (what an MCP server run inside a sandbox
-- sits on). It must be the same jail as exec's, end with the handle or the
-- sandbox, and leave no descriptor or child behind.
local lash = require "lash"
local sandbox = lash.sandbox

local function popen(cmd)
  return io.popen("env -u LD_PRELOAD " .. cmd)
end

local MYPID = (function()
  local f = io.open("/proc/self/stat")
  local pid = f:read("l"):match("^(%d+)")
  f:close()
  return pid
end)()

local function fd_count()
  collectgarbage("collect")
  collectgarbage("collect")
  local p = popen("ls /proc/" .. MYPID .. "/fd | wc -l")
  local n = tonumber(p:read("a"))
  p:close()
  return n
end

local function children()
  local p = popen("ps -o pid=,comm= --ppid " .. MYPID)
  local out = p:read("a")
  p:close()
  local list = {}
  for line in out:gmatch("[^\n]+") do
    if not line:match(" ps$") and not line:match(" sh$") and not line:match(" env$") then list[#list + 1] = line end
  end
  return list
end

local function read_all(p, stream)
  local out = {}
  while true do
    local c = p:read(stream)
    if not c then break end
    out[#out + 1] = c
  end
  return table.concat(out)
end

local jail_ok, jail_why = sandbox.probe { backend = "local" }
local it_jail = jail_ok and it or function(name) pending(name .. " (skipped: " .. tostring(jail_why) .. ")") end

describe("sandbox:spawn, local backend", function()
  local root
  setup(function()
    root = os.tmpname()
    os.remove(root)
    os.execute("mkdir -p " .. root .. " && chmod 711 " .. root)
  end)
  teardown(function() os.execute("rm -rf " .. root) end)
  local function new(spec)
    spec = spec or {}
    spec.state_root = root
    return sandbox.create(spec)
  end

  it_jail("streams stdin to stdout in the same jail as exec", function()
    local s <close> = new { env = { GREETING = "hi" } }
    s:write_file("in.txt", "from the workspace\n")
    local p = s:spawn({ "sh", "-c", "cat in.txt; echo $GREETING $HOME; id -u; hostname; "
      .. "while read l; do echo got:$l; done; echo bye >&2; exit 3" }, { env = { EXTRA = "x" } })
    assert.is_true(p:write("one\n"))
    assert.is_true(p:write(string.rep("y", 200000) .. "\n"))   -- past the pipe buffer
    p:close_stdin()
    local out = read_all(p)
    local err = read_all(p, "stderr")
    assert.equal(3, p:wait())
    p:close()
    local r = s:exec { "sh", "-c", "id -u; hostname" }
    local uid, host = r.stdout:match("^(%d+)\n(%S+)")
    assert.equal("from the workspace\nhi /workspace\n" .. uid .. "\n" .. host .. "\ngot:one\ngot:"
      .. string.rep("y", 200000) .. "\n", out)
    assert.equal("sandbox", host)
    assert.equal("bye\n", err)
  end)

  it_jail("is a start error, not an exit code, for a missing program", function()
    local s <close> = new {}
    local p = s:spawn { "/no/such/program" }
    -- bwrap reports it on stderr and exits 1: the handle says how
    local err = read_all(p, "stderr")
    assert.equal(1, p:wait())
    assert.matches("/no/such/program", err, 1, true)
    p:close()
  end)

  it_jail("ends when the handle closes or the sandbox is destroyed, leaving nothing behind", function()
    local before = fd_count()
    local s = new {}
    local p = s:spawn { "sh", "-c", "sleep 1717 & sleep 1717" }
    p:close()
    assert.is_false(p:running())
    local q = s:spawn { "sleep", "1717" }
    s:destroy()
    local code, sig = q:wait()
    assert.is_true(code == 137 or sig == 9 or (code or 0) ~= 0)
    q:close()
    for _ = 1, 100 do
      if fd_count() == before and next(children()) == nil then break end
      lash.sleep(0.05)
    end
    assert.equal(before, fd_count())
    assert.same({}, children())
    local ps = popen("pgrep -f 'slee[p] 1717'")
    local left = ps:read("a")
    ps:close()
    assert.equal("", left)
  end)

  it_jail("checks its arguments", function()
    local s <close> = new {}
    assert.has_error(function() s:spawn {} end)
    assert.has_error(function() s:spawn({ "cat" }, { timeout = 5 }) end,
      "spawn: unknown option 'timeout' (known: cwd, env)")
    s:destroy()
    assert.has_error(function() s:spawn { "cat" } end)
  end)
end)

describe("sandbox:spawn elsewhere", function()
  it("is refused clearly by a backend without it", function()
    sandbox.register_backend("spawnless", {
      create = function() return "s1" end, exec = function() end, stat = function() end,
      read_file = function() end, write_file = function() end, list_dir = function() end,
      poll = function() return { running = true, status = "running" } end, destroy = function() end,
    })
    local s = sandbox.create { backend = "spawnless" }
    local ok, err = pcall(s.spawn, s, { "cat" })
    assert.is_false(ok)
    assert.equal("sandbox", err.kind)
    assert.equal("unsupported", err.code)
    assert.matches("the spawnless backend cannot run a long-lived process", err.message, 1, true)
    s:close()
  end)
end)
