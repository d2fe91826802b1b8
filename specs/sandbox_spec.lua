-- lash.sandbox from Lua: the generic layer (options, reserved tags, object
-- lifecycle, attach and release) against a fake backend that records its
-- calls, then the backend contract on the local backend: every operation,
-- every error kind, lifetimes, tags, attach/release with processes racing.
local lash = require "lash"
local sandbox = lash.sandbox

-- Helper commands run without the sanitizer's LD_PRELOAD (make check sets
-- it for busted): some tools deadlock under it (pgrep in textdomain).
local function popen(cmd, mode)
  return io.popen("env -u LD_PRELOAD " .. cmd, mode)
end

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  assert(os.execute("env -u LD_PRELOAD sh -c \"mkdir -p '" .. p .. "' && chmod 711 '" .. p .. "'\""))
  return p
end

local function rmrf(p)
  os.execute("env -u LD_PRELOAD rm -rf '" .. p .. "'")
end

local function catch(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return err
end

local function keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- ---------------------------------------------------------------------------
-- A fake backend written in Lua: records every call, keeps tags in memory.
-- ---------------------------------------------------------------------------

local function fake_backend(name, opts)
  opts = opts or {}
  local calls, store, n = {}, {}, 0
  local function rec(op, ...) calls[#calls + 1] = { op = op, args = { ... } } end
  local function get(id)
    local s = store[id]
    if not s then error(lash.error("unavailable", id .. " is gone", { terminal = true })) end
    return s
  end
  local b = {
    create_options = { "image" },
    config_options = { "endpoint" },
    default_workdir = "/workspace",
    create = function(cfg, spec)
      rec("create", cfg, spec)
      n = n + 1
      local id = "fake-" .. n
      local tags = {}
      for k, v in pairs(spec.tags) do tags[k] = v end
      store[id] = { tags = tags, files = {} }
      return id
    end,
    exec = function(cfg, id, argv, o)
      rec("exec", cfg, id, argv, o)
      get(id)
      if opts.bad_exec then return "nope" end
      return { stdout = table.concat(argv, " "), stderr = "", exit_code = 0,
               applied_timeout = o.timeout }
    end,
    stat = function(_, id, path) rec("stat", id, path); return { kind = "file", size = 1 } end,
    read_file = function(_, id, path, max) rec("read_file", id, path, max); return get(id).files[path] end,
    write_file = function(_, id, path, data) rec("write_file", id, path, data); get(id).files[path] = data end,
    list_dir = function(_, id, path)
      rec("list_dir", id, path)
      return { { name = "b", kind = "file" }, { name = "B", kind = "dir" }, { name = "a", kind = "file" } }
    end,
    read_tags = function(_, id)
      rec("read_tags", id)
      local t = {}
      for k, v in pairs(get(id).tags) do t[k] = v end
      return t
    end,
    write_tags = function(_, id, tags)
      rec("write_tags", id, tags)
      local s = get(id)
      s.tags = {}
      for k, v in pairs(tags) do s.tags[k] = v end
      if opts.rival then s.tags.lash_holder = opts.rival end   -- a faster claimant
    end,
    poll = function(_, id) rec("poll", id); return { running = store[id] ~= nil, status = store[id] and "running" or "gone" } end,
    destroy = function(_, id, timeout) rec("destroy", id, timeout); store[id] = nil end,
    persist = opts.persist and function(_, id) rec("persist", id); get(id) end or nil,
  }
  sandbox.register_backend(name, b)
  return calls, store
end

local function ops(calls)
  local out = {}
  for i, c in ipairs(calls) do out[i] = c.op end
  return out
end

describe("lash.sandbox, generic layer", function()
  it("lists the registered backends", function()
    local names = sandbox.backends()
    assert.is_true(#names >= 1)
    local found = false
    for _, n in ipairs(names) do found = found or n == "local" end
    assert.is_true(found)
  end)

  it("names the reserved tags", function()
    assert.same({ owner = "lash_owner", holder = "lash_holder", expires_at = "lash_expires_at",
                  network = "lash_network", workdir = "lash_workdir" }, sandbox.tags)
  end)

  it("stamps the network policy as compact sorted-key JSON", function()
    assert.equal('{"allow_egress_to":[],"allow_egress_to_cidrs":[],"block_network":true}',
                 sandbox.encode_network())
    assert.equal('{"allow_egress_to":[],"allow_egress_to_cidrs":[],"block_network":true}',
                 sandbox.encode_network("off"))
    assert.equal('{"allow_egress_to":[],"allow_egress_to_cidrs":[],"block_network":false}',
                 sandbox.encode_network("on"))
    assert.equal('{"allow_egress_to":["a.com","b\\"c"],"allow_egress_to_cidrs":["10.0.0.0/8"],"block_network":true}',
                 sandbox.encode_network { allow_egress_to = { "a.com", 'b"c' }, allow_egress_to_cidrs = { "10.0.0.0/8" } })
  end)

  it("decodes a network stamp, and refuses anything else", function()
    local p = sandbox.decode_network(sandbox.encode_network { allow_egress_to_cidrs = { "1.2.3.0/24" } })
    assert.same({ block_network = true, allow_egress_to = {}, allow_egress_to_cidrs = { "1.2.3.0/24" } }, p)
    for _, bad in ipairs { "", "not json", '{"block_network": true}', "[1, 2]",
                           '{"allow_egress_to":[1],"allow_egress_to_cidrs":[],"block_network":true}' } do
      assert.is_nil(sandbox.decode_network(bad), bad)
    end
    assert.is_nil(sandbox.decode_network(nil))
  end)

  it("refuses bad specs before the backend sees them", function()
    local calls = fake_backend("fake_bad")
    local function refuses(spec, pattern)
      spec.backend = spec.backend or "fake_bad"
      -- called from a Lua line, as the CLI and the capability call it
      local err = catch(function() local s = sandbox.create(spec); return s end)
      assert.matches(pattern, tostring(err))
      -- the user's mistake, not the line that called create
      assert.is_nil(tostring(err):match("^[^:]*%.lua:%d+:"), tostring(err))
    end
    refuses({ backend = "nope" }, "unknown sandbox backend 'nope' %(known: .*local")
    refuses({ rootfs = "/" }, "the fake_bad backend does not take the option rootfs %(.*takes: image; and to reach it: endpoint%)")
    refuses({ rootfs = "/", flavour = 1 }, "the options flavour, rootfs")
    refuses({ workdir = "rel/dir" }, "workdir must be an absolute path")
    refuses({ tags = { lash_owner = "x" } }, "tag 'lash_owner' uses the reserved prefix 'lash_'")
    refuses({ tags = { n = 5 } }, "tags%['n'%] must be a string")
    refuses({ env = { A = 1 } }, "env%['A'%] must be a string")
    refuses({ env = { ["A=B"] = "1" } }, "contains '='")
    refuses({ timeout = 0 }, "must be a positive finite number")
    refuses({ timeout = 1 / 0 }, "must be a positive finite number")
    refuses({ network = "sometimes" }, 'network must be "off", "on" or a policy table')
    refuses({ network = { block_network = false, allow_egress_to = { "x" } } }, "allow%-list only means something")
    refuses({ network = { colour = 1 } }, "network policy: unknown option 'colour' %(known: block_network")
    refuses({ owner = "" }, "owner must not be empty")
    refuses({ owner = "o", idle_timeout = 60, image = "x" }, "cannot have an idle_timeout")
    assert.same({}, calls)
  end)

  it("passes a normalized spec with the reserved tags stamped", function()
    local calls = fake_backend("fake_spec")
    local before = os.time()
    local s = sandbox.create { backend = "fake_spec", owner = "dag/run", timeout = 120.2,
                               tags = { team = "a" }, env = { K = "v" }, image = "py", endpoint = "http://x" }
    local after = os.time()
    assert.equal("fake-1", s.id)
    assert.equal("fake_spec", s.backend)
    assert.equal("owned", s.mode)
    local cfg, spec = calls[1].args[1], calls[1].args[2]
    assert.same({ backend = "fake_spec", endpoint = "http://x" }, cfg)
    assert.equal(121, spec.timeout)
    -- os.time() is the coarse clock: it may lag the precise one by a tick
    assert.is_true(spec.expires_at >= before + 121 and spec.expires_at <= after + 122)
    assert.equal("/workspace", spec.workdir)
    assert.equal("py", spec.image)
    assert.same({ K = "v" }, spec.env)
    assert.same({ block_network = true, allow_egress_to = {}, allow_egress_to_cidrs = {} }, spec.network)
    assert.same({ "lash_expires_at", "lash_network", "lash_owner", "lash_workdir", "team" }, keys(spec.tags))
    assert.equal("dag/run", spec.tags.lash_owner)
    assert.equal(tostring(spec.expires_at), spec.tags.lash_expires_at)
    assert.equal("/workspace", spec.tags.lash_workdir)
    assert.equal(sandbox.encode_network("off"), spec.tags.lash_network)
    s:close()
  end)

  it("normalizes exec options and checks what the backend returns", function()
    local calls = fake_backend("fake_exec")
    local s <close> = sandbox.create { backend = "fake_exec" }
    local r = s:exec("echo hi", { timeout = 2.5, env = { A = "b" } })
    assert.equal("sh -c echo hi", r.stdout)
    assert.is_false(r.timed_out)
    assert.is_false(r.stdout_truncated)
    local o = calls[2].args[4]
    assert.same({ timeout = 3, max_output_bytes = 1048576, env = { A = "b" } }, o)
    assert.matches("unknown option 'timeuot'", tostring(catch(s.exec, s, { "x" }, { timeuot = 1 })))
    assert.matches("argv is empty", tostring(catch(s.exec, s, {})))
    assert.matches("must be a positive finite number", tostring(catch(s.exec, s, { "x" }, { timeout = -1 })))
    assert.matches("argv element must be a string", tostring(catch(s.exec, s, { "x", 3 })))
    fake_backend("fake_exec_bad", { bad_exec = true })
    local b <close> = sandbox.create { backend = "fake_exec_bad" }
    assert.matches("returned string instead of a result table", tostring(catch(b.exec, b, { "x" })))
  end)

  it("sorts directory listings by bytes", function()
    fake_backend("fake_ls")
    local s <close> = sandbox.create { backend = "fake_ls" }
    local names = {}
    for i, e in ipairs(s:list_dir()) do names[i] = e.name end
    assert.same({ "B", "a", "b" }, names)
  end)

  it("owned: close destroys once, with the 30 s bound; a closed handle raises", function()
    local calls = fake_backend("fake_owned")
    local s = sandbox.create { backend = "fake_owned" }
    assert.is_true(s:close())
    assert.is_true(s:close())
    assert.same({ "create", "destroy" }, ops(calls))
    assert.equal(30, calls[2].args[2])
    assert.is_true(s.closed)
    assert.matches("closed", tostring(catch(s.exec, s, { "x" })))
  end)

  it("attached: never destroyed; creation-only settings are refused by name", function()
    local calls = fake_backend("fake_att")
    local made = sandbox.create { backend = "fake_att" }
    local s = sandbox.open(made.id, { backend = "fake_att", endpoint = "e" })
    assert.equal("attached", s.mode)
    s:close()
    assert.same({ "create" }, ops(calls))
    local err = catch(function()
      local o = sandbox.open(made.id, { backend = "fake_att", workdir = "/w", image = "x", env = {} }); return o end)
    assert.matches("^lash.sandbox.open: env, image, workdir only apply when a sandbox is created", tostring(err))
    err = catch(sandbox.session, { backend = "fake_att", id = made.id, timeout = 5 })
    assert.matches("timeout only applies when a sandbox is created", tostring(err))
    made:close()
  end)

  it("session: a to-be-closed session it created is destroyed at scope end", function()
    local calls = fake_backend("fake_sess")
    do
      local s <close> = sandbox.session { backend = "fake_sess" }
      assert.equal("session", s.mode)
      s:exec("true")
    end
    assert.same({ "create", "exec", "destroy" }, ops(calls))
  end)

  it("session: one wrapping an id leaves the sandbox alone", function()
    local calls = fake_backend("fake_sess2")
    local made = sandbox.create { backend = "fake_sess2" }
    made:detach()
    do
      local s <close> = sandbox.session { backend = "fake_sess2", id = made.id }
      s:exec("true")
    end
    made:close()
    assert.same({ "create", "exec" }, ops(calls))
  end)

  it("detach: the object stops owning the sandbox", function()
    local calls = fake_backend("fake_detach")
    local s = sandbox.create { backend = "fake_detach" }
    assert.equal("fake-1", s:detach())
    s:close()
    assert.same({ "create" }, ops(calls))
  end)

  it("create tells the backend the sandbox is ephemeral; detach asks it to persist it", function()
    local calls = fake_backend("fake_persist", { persist = true })
    local s = sandbox.create { backend = "fake_persist" }
    assert.is_true(calls[1].args[2].ephemeral)
    assert.equal("fake-1", s:detach())
    s:close()
    assert.same({ "create", "persist" }, ops(calls))
    -- an attached object does not own it: nothing to persist
    local a = sandbox.open("fake-1", { backend = "fake_persist" })
    a:detach()
    assert.same({ "create", "persist" }, ops(calls))
  end)

  it("detach fails, and keeps owning the sandbox, when persist fails", function()
    local calls = fake_backend("fake_persist_gone", { persist = true })
    local s = sandbox.create { backend = "fake_persist_gone" }
    calls[1] = nil
    sandbox.open("fake-1", { backend = "fake_persist_gone" }):destroy()
    local err = catch(s.detach, s)
    assert.matches("gone", tostring(err))
    assert.equal("owned", s.mode)
  end)

  it("write_tags keeps the reserved tags and refuses to set them", function()
    local _, store = fake_backend("fake_tags")
    local s <close> = sandbox.create { backend = "fake_tags", owner = "o", tags = { a = "1" } }
    s:write_tags { b = "2" }
    assert.same({ "b", "lash_expires_at", "lash_network", "lash_owner", "lash_workdir" }, keys(store[s.id].tags))
    assert.matches("reserved prefix", tostring(catch(s.write_tags, s, { lash_owner = "me" })))
  end)

  describe("attach without compare-and-set: read, write, read back", function()
    it("claims, re-enters as the same holder, refuses others, releases", function()
      local calls, store = fake_backend("fake_rwr")
      local s <close> = sandbox.create { backend = "fake_rwr", owner = "dag/run", tags = { team = "t" } }
      local info = s:attach("dag/run", "dag/run/task")
      assert.is_false(info.atomic)
      assert.equal("dag/run/task", store[s.id].tags.lash_holder)
      assert.equal("t", store[s.id].tags.team)
      assert.is_true(info.remaining_lifetime > 290 and info.remaining_lifetime <= 300)
      assert.equal("/workspace", info.workdir)
      assert.is_true(info.network.block_network)
      local n = #calls
      s:attach("dag/run", "dag/run/task")           -- same holder: no write
      assert.same({ "read_tags" }, ops { table.unpack(calls, n + 1) })
      local err = catch(s.attach, s, "dag/run", "dag/run/other")
      assert.equal("refused", err.kind)
      assert.equal("held", err.code)
      assert.is_true(err.terminal)
      assert.is_false(err.retryable)
      assert.matches("already held by 'dag/run/task'", err.message)
      assert.is_false(s:release("dag/run/other"))    -- never clears another's mark
      assert.equal("dag/run/task", store[s.id].tags.lash_holder)
      assert.is_true(s:release("dag/run/task"))
      assert.is_nil(store[s.id].tags.lash_holder)
      assert.equal("dag/run", store[s.id].tags.lash_owner)
      assert.is_false(s:release("dag/run/task"))     -- idempotent
    end)

    it("refuses a wrong or missing owner, naming both", function()
      local _, store = fake_backend("fake_owner")
      local s <close> = sandbox.create { backend = "fake_owner", owner = "other_dag/run" }
      local err = catch(s.attach, s, "dag/run", "h")
      assert.equal("wrong_owner", err.code)
      assert.matches("not owned by 'dag/run'.*'other_dag/run'", err.message)
      assert.is_nil(store[s.id].tags.lash_holder)
      local bare <close> = sandbox.create { backend = "fake_owner" }
      err = catch(bare.attach, bare, "dag/run", "h")
      assert.equal("no_owner", err.code)
      assert.matches("carries no owner", err.message)
    end)

    it("backs off when a rival's write lands between write and read-back", function()
      fake_backend("fake_race", { rival = "someone/faster" })
      local s <close> = sandbox.create { backend = "fake_race", owner = "o" }
      local err = catch(s.attach, s, "o", "dag/task")
      assert.equal("claimed", err.code)
      assert.matches("claimed by 'someone/faster' while 'dag/task' was attaching", err.message)
    end)

    it("a missing sandbox is terminal for both", function()
      local _, store = fake_backend("fake_gone")
      local s <close> = sandbox.create { backend = "fake_gone", owner = "o" }
      store[s.id] = nil
      assert.equal("unavailable", catch(s.attach, s, "o", "h").kind)
      assert.equal("unavailable", catch(s.release, s, "h").kind)
    end)

    it("works from inside tasks", function()
      fake_backend("fake_task")
      local s <close> = sandbox.create { backend = "fake_task", owner = "o" }
      local t = lash.spawn(function() return s:attach("o", "h").holder end)
      assert.equal("h", t:join())
    end)
  end)

  it("refuses attach on a backend that cannot hold tags", function()
    local b = { create = function() return "x" end, exec = function() end, stat = function() end,
                read_file = function() end, write_file = function() end, list_dir = function() end,
                poll = function() end, destroy = function() end }
    sandbox.register_backend("fake_notags", b)
    local s = sandbox.open("x", { backend = "fake_notags" })
    local err = catch(s.attach, s, "o", "h")
    assert.matches("cannot hold tags", tostring(err))
    assert.matches("read_tags and write_tags go together", tostring(catch(sandbox.register_backend, "bad",
      setmetatable({ read_tags = function() end }, { __index = b }))))
    assert.matches("needs a function 'exec'", tostring(catch(sandbox.register_backend, "bad", { create = b.create })))
  end)
end)

-- ---------------------------------------------------------------------------
-- The local backend
-- ---------------------------------------------------------------------------

local jail_ok, jail_why = sandbox.probe { backend = "local" }
local it_jail = jail_ok and it or function(name)
  pending(name .. " (skipped: " .. tostring(jail_why) .. ")")
end

local MYPID = (function()
  local f = io.open("/proc/self/stat")
  local pid = f:read("l"):match("^(%d+)")
  f:close()
  return pid
end)()

local function children_of_self()
  -- processes whose parent is this one (zombies included), but the ps/sh
  -- this check itself starts
  local p = popen("ps -o pid=,stat=,comm= --ppid " .. MYPID)
  local out = p:read("a")
  p:close()
  local list = {}
  for line in out:gmatch("[^\n]+") do
    if not line:match(" ps$") and not line:match(" sh$") then list[#list + 1] = line end
  end
  return list
end

-- Marks this run's sleeps: other lash checkouts may run this spec on the
-- same machine at the same time, and pgrep sees their processes too.
local RUN = MYPID .. tostring(os.time() % 1000)

-- How many processes of this run match PATTERN once the kernel has torn the
-- killed jail down: SIGKILL is delivered at once, but the processes leave the
-- process table asynchronously (slowly on a loaded machine), so wait for it,
-- bounded by a hang guard.
local function survivors(pattern)
  local n
  for _ = 1, 200 do
    local p = popen("pgrep -f '" .. pattern .. "' | wc -l")
    n = tonumber(p:read("a"):match("%d+"))
    p:close()
    if n == 0 then return 0 end
    lash.sleep(0.05)
  end
  return n
end

local function fd_count()
  -- collect first: a handle dropped by an earlier test closes its fd only
  -- when collected, and that is not ours to count
  collectgarbage("collect")
  collectgarbage("collect")
  local p = popen("ls /proc/" .. MYPID .. "/fd | wc -l")
  local n = tonumber(p:read("a"))
  p:close()
  return n
end

describe("lash.sandbox, local backend", function()
  local root
  setup(function() root = tmpdir() end)
  teardown(function() rmrf(root) end)

  local function new(spec)
    spec = spec or {}
    spec.state_root = root
    return sandbox.create(spec)
  end

  it("fails clearly without bubblewrap unless isolation = none is asked for", function()
    local err = catch(sandbox.create, { state_root = root, bwrap = "/nonexistent/bwrap" })
    assert.equal("unavailable", err.kind)
    assert.equal("no_isolation", err.code)
    assert.matches('isolation = "none"', err.message)
  end)

  it_jail("creates ids of the documented shape, under the state root", function()
    local s <close> = new()
    assert.matches("^lb%-[a-z2-7]+$", s.id)
    assert.equal(23, #s.id)
    local f = io.open(root .. "/" .. s.id .. "/meta.json")
    assert.is_truthy(f)
    f:close()
  end)

  it_jail("runs commands: exit codes, output, env, cwd, stdin", function()
    local s <close> = new { env = { GREETING = "hello" } }
    local r = s:exec { "sh", "-c", 'echo "$GREETING $EXTRA"; pwd; echo oops >&2; exit 3' }
    assert.equal("hello there\n/workspace\n", (r.stdout:gsub("hello \n", "hello there\n")))
    r = s:exec({ "sh", "-c", 'echo "$GREETING $EXTRA"; pwd' }, { env = { EXTRA = "there" }, cwd = "sub/.." })
    assert.equal("hello there\n/workspace\n", r.stdout)
    assert.equal(0, r.exit_code)
    r = s:exec({ "sh", "-c", "echo err >&2; exit 3" })
    assert.equal("err\n", r.stderr)
    assert.equal(3, r.exit_code)
    assert.is_false(r.timed_out)
    assert.equal(60, r.applied_timeout)
    r = s:exec({ "sh", "-c", "wc -c; echo $HOME; env | sort | cut -d= -f1 | tr '\\n' ' '" },
               { stdin = string.rep("x", 300000) })
    assert.equal("300000\n/workspace\nGREETING HOME PATH PWD ", r.stdout)
  end)

  it_jail("keeps the tail of output within max_output_bytes, marking the cut", function()
    local s <close> = new()
    local r = s:exec({ "sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' a; echo END; echo e >&2" },
                     { max_output_bytes = 100 })
    assert.equal(100, #r.stdout)
    assert.equal("END\n", r.stdout:sub(-4))
    assert.is_true(r.stdout_truncated)
    assert.is_false(r.stderr_truncated)
    assert.equal("e\n", r.stderr)
  end)

  it_jail("kills a timed-out command with everything it started", function()
    local s <close> = new()
    local r = s:exec({ "sh", "-c", "trap '' TERM; (sleep 97." .. RUN .. " &); (setsid sleep 98." .. RUN .. " &); echo started; sleep 99." .. RUN },
                     { timeout = 1 })
    assert.is_true(r.timed_out)
    assert.equal(1, r.applied_timeout)
    assert.equal("started\n", r.stdout)
    assert.equal(0, survivors("sleep 9[789][.]" .. RUN))
  end)

  it_jail("leaves no process behind when the command ends (daemons die with it)", function()
    local s <close> = new()
    local r = s:exec { "sh", "-c", "(setsid sleep 96." .. RUN .. " > /dev/null 2>&1 &); nohup sleep 95." .. RUN .. " > /dev/null 2>&1 & echo ok" }
    assert.equal("ok\n", r.stdout)
    assert.equal(0, survivors("sleep 9[56][.]" .. RUN))
  end)

  it_jail("a cancelled task kills the jail", function()
    local s <close> = new()
    local t = lash.spawn(function() return s:exec { "sh", "-c", "sleep 94." .. RUN } end)
    lash.spawn(function() lash.sleep(0.3); t:cancel() end)
    local ok, err = pcall(t.join, t)
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "cancelled"))
    assert.equal(0, survivors("sleep 94[.]" .. RUN))
  end)

  it_jail("runs several commands at once, each in its own jail", function()
    -- A rendezvous, not a stopwatch: each command waits until all four have
    -- started, which only happens when they run at the same time.
    local s <close> = new()
    s:exec { "sh", "-c", "rm -rf rdv && mkdir rdv" }
    local tasks = {}
    for i = 1, 4 do
      tasks[i] = lash.spawn(function()
        return s:exec({ "sh", "-c", "touch rdv/" .. i .. "; n=0; while [ $(ls rdv | wc -l) -lt 4 ] && [ $n -lt 600 ];"
                        .. " do sleep 0.05; n=$((n+1)); done; [ $(ls rdv | wc -l) -eq 4 ] && echo " .. i },
                      { timeout = 60 })
      end)
    end
    for i = 1, 4 do assert.equal(i .. "\n", tasks[i]:join().stdout) end
  end)

  it_jail("reports a command that cannot start as a recoverable error", function()
    local s <close> = new()
    local err = catch(s.exec, s, { "no-such-command-xyz" })
    assert.equal("sandbox", err.kind)
    assert.equal("start_failed", err.code)
    assert.is_true(err.retryable)
    assert.is_false(err.terminal)
    assert.matches("no%-such%-command%-xyz", err.message)
    err = catch(s.exec, s, { "true" }, { cwd = "/nope" })
    assert.equal("start_failed", err.code)
  end)

  it_jail("files: write (parents created), read, stat, list, persistence across commands", function()
    local s <close> = new()
    assert.is_true(s:write_file("/workspace/pkg/a.py", "print(1)\n"))
    s:write_file("rel.txt", "relative")
    assert.equal("print(1)\n", s:read_file("pkg/a.py"))
    assert.equal("relative", s:exec({ "cat", "/workspace/rel.txt" }).stdout)
    s:exec { "sh", "-c", "mkdir -p d && echo x > d/f && ln -s d/f link && printf 12345 > five" }
    local st = s:stat("five")
    assert.equal("file", st.kind)
    assert.equal(5, st.size)
    assert.equal(tonumber("644", 8), st.mode)
    assert.equal("dir", s:stat("d").kind)
    local entries = {}
    for _, e in ipairs(s:list_dir(".")) do entries[#entries + 1] = e.name .. ":" .. e.kind end
    assert.same({ "d:dir", "five:file", "link:symlink", "pkg:dir", "rel.txt:file" }, entries)
    assert.equal("x\n", s:read_file("link"))
    -- /tmp is the sandbox's own and persists too
    s:write_file("/tmp/t/x", "tmpdata")
    assert.equal("tmpdata", s:exec({ "cat", "/tmp/t/x" }).stdout)
    -- the read-only root, as the jail sees it
    assert.matches("^root:", s:read_file("/etc/passwd"))
    local names = {}
    for _, e in ipairs(s:list_dir("/")) do names[e.name] = e.kind end
    assert.equal("dir", names.workspace)
    assert.equal("dir", names.tmp)
  end)

  it_jail("file errors are recoverable and say what happened", function()
    local s <close> = new()
    s:exec { "sh", "-c", "mkdir d; printf 0123456789 > ten; mkfifo fifo" }
    local function code(fn, ...)
      local err = catch(fn, s, ...)
      assert.equal("sandbox", err.kind, tostring(err))
      assert.is_true(err.retryable)
      return err.code, err
    end
    assert.equal("not_found", code(s.read_file, "/nope"))
    assert.matches("'/nope': No such file or directory", select(2, code(s.read_file, "/nope")).message)
    assert.equal("is_dir", code(s.read_file, "d"))
    assert.equal("not_regular", code(s.read_file, "fifo"))
    assert.equal("not_dir", code(s.list_dir, "ten"))
    assert.equal("read_only", code(s.write_file, "/etc/evil", "x"))
    assert.equal("read_only", code(s.write_file, "/usr/new/dir/f", "x"))
    assert.equal("is_dir", code(s.write_file, "d", "x"))
    local c, err = code(s.read_file, "ten", { max_bytes = 4 })
    assert.equal("too_large", c)
    assert.equal(10, err.size)
    assert.equal(4, err.max_bytes)
    assert.matches("'ten' is 10B, over the 4B read limit", err.message)
    assert.equal("0123456789", s:read_file("ten", 10))
  end)

  it_jail("never returns more than max_bytes of a file that grows while read", function()
    local s <close> = new()
    local writer = lash.spawn(function()
      return s:exec({ "sh", "-c", "i=0; while [ $i -lt 3000 ]; do printf 0123456789 >> grow; i=$((i+1)); done" },
                    { timeout = 20 })
    end)
    local refused, ok = 0, 0
    for _ = 1, 40 do
      local st_ok, st = pcall(s.stat, s, "grow")
      if st_ok then
        local r_ok, data = pcall(s.read_file, s, "grow", { max_bytes = st.size })
        if r_ok then
          assert.is_true(#data <= st.size)
          ok = ok + 1
        else
          assert.equal("too_large", data.code)
          refused = refused + 1
        end
      end
      lash.sleep(0.001)
    end
    writer:join()
    assert.is_true(ok + refused > 0)
  end)

  it_jail("paths resolve inside the sandbox's view, never onto the host", function()
    local s <close> = new()
    s:exec { "sh", "-c", table.concat({
      "ln -s /etc/shadow shadow", "ln -s ../../../../../../etc/shadow dotdot",
      "ln -s /root rootdir", "ln -s /proc/1/root p1", "ln -s /workspace/real abs",
      "echo in-view > real", "ln -s loop1 loop2", "ln -s loop2 loop1",
      "ln -s /etc/newfile outside" }, "; ") }
    local function denied(fn, ...)
      local err = catch(fn, s, ...)
      assert.equal("sandbox", err.kind, tostring(err))
      return err.code
    end
    assert.equal("denied", denied(s.read_file, "shadow"))
    assert.equal("denied", denied(s.read_file, "dotdot"))
    assert.equal("denied", denied(s.read_file, "/workspace/../../../etc/shadow"))
    assert.equal("denied", denied(s.read_file, "../../etc/gshadow"))
    assert.equal("denied", denied(s.list_dir, "rootdir"))
    assert.equal("denied", denied(s.read_file, "p1/etc/hostname"))
    assert.equal("denied", denied(s.read_file, "/proc/self/environ"))
    assert.equal("denied", denied(s.write_file, "/dev/x", "x"))
    assert.equal("loop", denied(s.read_file, "loop1"))
    assert.equal("read_only", denied(s.write_file, "outside", "x"))
    assert.equal("read_only", denied(s.write_file, "../escape.txt", "x"))
    assert.equal("in-view\n", s:read_file("abs"))      -- absolute targets restart at the sandbox's /
    -- the state root (other sandboxes) is not in the view
    local other <close> = new()
    other:write_file("secret.txt", "other's")
    local denied_or_missing = catch(s.read_file, s, root .. "/" .. other.id .. "/workspace/secret.txt")
    assert.is_truthy(denied_or_missing.code == "denied" or denied_or_missing.code == "not_found")
  end)

  it_jail("tags: read, write (reserved kept), compare-and-set through attach", function()
    local s <close> = new { owner = "o", tags = { a = "1" } }
    local t = s:read_tags()
    assert.equal("o", t.lash_owner)
    assert.equal("1", t.a)
    assert.equal("/workspace", t.lash_workdir)
    s:write_tags { b = "2" }
    t = s:read_tags()
    assert.is_nil(t.a)
    assert.equal("2", t.b)
    assert.equal("o", t.lash_owner)
    local info = s:attach("o", "h1")
    assert.is_true(info.atomic)
    assert.is_true(info.remaining_lifetime > 250)
    assert.equal("/workspace", info.workdir)
    assert.same({ block_network = true, allow_egress_to = {}, allow_egress_to_cidrs = {} }, info.network)
    assert.equal("held", catch(s.attach, s, "o", "h2").code)
    assert.equal("wrong_owner", catch(s.attach, s, "x", "h1").code)
    s:attach("o", "h1")
    assert.is_false(s:release("h2"))
    assert.is_true(s:release("h1"))
    assert.is_nil(s:read_tags().lash_holder)
    assert.equal("h2", s:attach("o", "h2").holder)
  end)

  it_jail("refuses what it cannot enforce, before creating anything", function()
    local function count()
      local p = popen("ls '" .. root .. "' | wc -l")
      local n = tonumber(p:read("a"))
      p:close()
      return n
    end
    local n0 = count()
    assert.equal("unsupported", catch(new, { network = { allow_egress_to = { "pypi.org" } } }).code)
    assert.matches("cannot be under /proc", tostring(catch(new, { workdir = "/proc/x" })))
    assert.matches("cannot be /", tostring(catch(new, { workdir = "/" })))
    assert.matches("cannot create it under the read%-only /usr", tostring(catch(new, { workdir = "/usr/lash-nope/x" })))
    assert.matches("not a directory", tostring(catch(new, { rootfs = "/nonexistent-rootfs" })))
    assert.matches("limits.processes must be a positive integer", tostring(catch(new, { limits = { processes = 0 } })))
    assert.matches("unknown field 'swap'", tostring(catch(new, { limits = { swap = 1 } })))
    assert.matches("limits.memory must be at least 16 MiB", tostring(catch(new, { limits = { memory = 1 } })))
    assert.matches("limits.disk must be at least 16 MiB", tostring(catch(new, { limits = { disk = 4096 } })))
    assert.equal("unsupported", catch(new, { isolation = "none" }).code)   -- network off cannot be enforced
    assert.equal(n0, count())
  end)

  it_jail("a workdir under a masked tree works (the mask becomes the jail's own)", function()
    local s <close> = new { workdir = "/home/agent/project" }
    local r = s:exec { "sh", "-c", "pwd; ls /home; ls /home/agent" }
    assert.equal("/home/agent/project\nagent\nproject\n", r.stdout)
    s:write_file("x", "1")
    assert.equal("1", s:read_file("/home/agent/project/x"))
    local names = {}
    for _, e in ipairs(s:list_dir("/home")) do names[#names + 1] = e.name end
    assert.same({ "agent" }, names)
  end)

  it_jail("network: off by default (loopback of the host unreachable), on when asked", function()
    local srv = popen("/usr/bin/python3 -c 'import socket,sys; s=socket.socket(); s.bind((\"127.0.0.1\",0)); s.listen(5); print(s.getsockname()[1], flush=True); s.settimeout(8); \ntry:\n  c,_=s.accept(); c.send(b\"hello\"); c.close()\nexcept Exception: pass'", "r")
    local port = srv:read("l")
    local probe = "exec 3<>/dev/tcp/127.0.0.1/" .. port .. " && head -c 5 <&3"
    local off <close> = new()
    local r = off:exec { "bash", "-c", probe }
    assert.are_not.equal(0, r.exit_code)
    local on <close> = new { network = "on" }
    r = on:exec { "bash", "-c", probe }
    assert.equal("hello", r.stdout)
    srv:close()
    assert.equal(sandbox.encode_network("on"), on:read_tags().lash_network)
  end)

  it_jail("expiry: every operation refuses an expired sandbox; gc removes it", function()
    local s = new { timeout = 1 }
    local id = s.id
    assert.equal("running", s:poll().status)
    lash.sleep(1.1)
    for _, call in ipairs {
      function() return s:exec("true") end, function() return s:read_file("x") end,
      function() return s:write_file("x", "y") end, function() return s:list_dir(".") end,
      function() return s:stat(".") end, function() return s:read_tags() end,
      function() return s:write_tags {} end, function() return s:attach("o", "h") end,
    } do
      local err = catch(call)
      assert.equal("unavailable", err.kind)
      assert.equal("expired", err.code)
      assert.is_true(err.terminal)
    end
    local p = s:poll()
    assert.is_false(p.running)
    assert.equal("expired", p.status)
    local removed = sandbox.gc { state_root = root }
    assert.same({ id }, removed)
    assert.equal("gone", s:poll().status)
    assert.equal("gone", catch(s.exec, s, "true").code)
    assert.is_true(s:close())       -- destroying what is gone is fine
  end)

  it_jail("a command's deadline never outlives the sandbox", function()
    local s <close> = new { timeout = 2 }
    local r = s:exec({ "sleep", "30" }, { timeout = 60 })
    assert.is_true(r.timed_out)
    assert.is_true(r.applied_timeout <= 2)
  end)

  it_jail("destroy is idempotent and kills commands still running, from any handle", function()
    local s = new()
    local other = sandbox.open(s.id, { state_root = root })
    local t = lash.spawn(function() return other:exec { "sh", "-c", "sleep 93" } end)
    lash.sleep(0.3)
    assert.is_true(s:destroy())
    local r = t:join()   -- killed: had it run on, it would exit 0 after 93 s
    assert.is_false(r.timed_out)
    assert.equal(137, r.exit_code)
    assert.is_true(s:destroy())
    assert.equal("gone", catch(other.read_tags, other).code)
    local f = io.open(root .. "/" .. s.id)
    assert.is_nil(f)
    s:close()
  end)

  it_jail("lists sandboxes with their status and tags", function()
    local s <close> = new { owner = "lister" }
    local found
    for _, e in ipairs(sandbox.list { state_root = root }) do
      if e.id == s.id then found = e end
    end
    assert.is_truthy(found)
    assert.equal("running", found.status)
    assert.equal("lister", found.tags.lash_owner)
  end)

  it_jail("rlimits apply: a file over file_size fails", function()
    local s <close> = new { limits = { file_size = 1024 * 1024 } }
    local r = s:exec { "sh", "-c", "head -c 2000000 /dev/zero > big; echo $?; stat -c %s big" }
    local status, size = r.stdout:match("(%d+)\n(%d+)")
    assert.are_not.equal("0", status)
    assert.equal("1048576", size)
  end)

  it_jail("leaks no fd and leaves no zombie", function()
    local s <close> = new()
    s:exec("true")
    local before = fd_count()
    local jail = children_of_self()
    -- the sandbox's one jail: bwrap, a child of ours, for all its commands
    assert.equal(1, #jail)
    assert.truthy(jail[1]:match(" bwrap$"))
    for _ = 1, 20 do
      s:exec { "sh", "-c", "echo x; echo y >&2" }
      s:write_file("f", "x")
      s:read_file("f")
      s:list_dir(".")
      pcall(s.read_file, s, "nope")
      pcall(s.exec, s, { "no-such-cmd" })
    end
    s:exec({ "sleep", "5" }, { timeout = 1 })
    -- a killed command's last descriptor and its reaping can trail the
    -- result on a loaded machine: wait (bounded) for them, then compare
    for _ = 1, 100 do
      if fd_count() == before and #children_of_self() == 1 then break end
      lash.sleep(0.05)
    end
    assert.equal(before, fd_count())
    assert.same(jail, children_of_self())
    -- destroy takes the jail down and reaps it
    s:destroy()
    assert.same({}, children_of_self())
    -- its supervisor's socket, pidfd and directory, and what its commands
    -- kept open of it (its directory, lock file and meta.json)
    assert.equal(before - 6, fd_count())
  end)

  it_jail("builds the jail once: every command runs under the same supervisor", function()
    local s <close> = new()
    local function init()   -- the jail's pid 1 and its start time
      return s:exec({ "sh", "-c", "cut -d' ' -f1,22 /proc/1/stat" }).stdout
    end
    local function own_pid() return tonumber(s:exec({ "sh", "-c", "echo $$" }).stdout) end
    local first = init()
    assert.equal(first, init())
    -- one pid namespace for all: pids go on counting (a fresh jail would
    -- give every command the same low pid)
    local p1 = own_pid()
    assert.is_true(own_pid() > p1)
    -- ... and a command's leftovers are gone before the next one runs
    s:exec { "sh", "-c", "(setsid sleep 77 > /dev/null 2>&1 &); echo ok" }
    assert.equal("0\n", s:exec({ "sh", "-c", "ps -eo comm= | grep -c '^sleep$'; true" }).stdout)
    assert.equal(first, init())
  end)

  it_jail("starts a new jail transparently when the old one died", function()
    local s <close> = new()
    local first = s:exec({ "sh", "-c", "cut -d' ' -f22 /proc/1/stat" }).stdout
    -- the jail is bwrap, our child: kill it from outside
    local jail = children_of_self()
    assert.equal(1, #jail)
    os.execute("kill -9 " .. jail[1]:match("^%s*(%d+)"))
    for _ = 1, 100 do
      if #children_of_self() == 1 and children_of_self()[1]:match(" Z") then break end
      lash.sleep(0.02)
    end
    local r = s:exec { "sh", "-c", "echo again; cut -d' ' -f22 /proc/1/stat" }
    assert.equal("again\n", r.stdout:match("^again\n"))
    assert.are_not.equal(first, r.stdout:match("\n(.*)$"))
    assert.equal(1, #children_of_self())
  end)

  it("an owned sandbox's records are unsynced until detach persists them", function()
    local function meta(id)
      local f = assert(io.open(root .. "/" .. id .. "/meta.json"))
      local m = lash.json.decode(f:read("a"))
      f:close()
      return m
    end
    local s = new { isolation = "none", network = "on" }
    assert.is_true(meta(s.id).ephemeral)
    local id = s:detach()
    assert.is_nil(meta(id).ephemeral)
    -- what an attached process writes later stays durable
    local a <close> = sandbox.open(id, { state_root = root })
    a:write_tags { step = "2" }
    assert.is_nil(meta(id).ephemeral)
    a:destroy()
    -- a sandbox gone before detach: a clear error, and the object still owns nothing it cannot find
    local g = new { isolation = "none", network = "on" }
    sandbox.open(g.id, { state_root = root }):destroy()
    local err = catch(g.detach, g)
    assert.equal("unavailable", err.kind)
    assert.matches("cannot keep sandbox", err.message)
    g:close()
  end)

  it_jail("names the directory the jail's uid cannot search, and the fix", function()
    local p = popen("id -u")
    local as_root = p:read("a"):match("^0") ~= nil
    p:close()
    if not as_root then return pending("needs root: only root's sandboxes run as a uid of their own") end
    local closed = root .. "/closed"
    assert(os.execute("mkdir -m 700 " .. closed))
    local err = catch(sandbox.create, { state_root = closed .. "/state" })
    assert.equal("sandbox", err.kind)
    assert.matches("chmod o%+x " .. closed:gsub("%p", "%%%0"), err.message)
    assert.matches("e%.g%. /var/lib/lash/sandboxes", err.message)
  end)

  it("gc reclaims a sandbox whose metadata a power cut left empty, after an hour", function()
    local fresh = new { isolation = "none", network = "on" }
    local old = new { isolation = "none", network = "on" }
    for _, s in ipairs { fresh, old } do
      local f = assert(io.open(root .. "/" .. s.id .. "/meta.json", "w"))
      f:close()
    end
    assert.equal(0, os.execute("touch -d '2 hours ago' " .. root .. "/" .. old.id) and 0 or 1)
    local removed = sandbox.gc { state_root = root }
    assert.same({ old.id }, removed)
    assert.is_truthy(io.open(root .. "/" .. fresh.id .. "/lock"))
    assert.is_nil(io.open(root .. "/" .. old.id .. "/lock"))
    assert.equal("corrupt", catch(fresh.exec, fresh, "true").code)
    fresh:close()
    old:close()
  end)

  it("isolation = none: a plain process group in the workspace, killed on timeout", function()
    local s <close> = new { isolation = "none", network = "on" }
    local r = s:exec { "sh", "-c", "pwd; echo hi > f" }
    assert.equal(root .. "/" .. s.id .. "/workspace\n", r.stdout)
    assert.equal("hi\n", s:read_file("f"))
    assert.equal(root .. "/" .. s.id .. "/workspace", s:read_tags().lash_workdir)
    assert.equal("denied", catch(s.read_file, s, "/etc/passwd").code)
    r = s:exec({ "sh", "-c", "sleep 92." .. RUN .. " & sleep 91." .. RUN }, { timeout = 1 })
    assert.is_true(r.timed_out)
    assert.equal(0, survivors("sleep 9[12][.]" .. RUN))
    assert.equal("start_failed", catch(s.exec, s, { "no-such-command-xyz" }).code)
  end)

  it_jail("hands the jail argv and env of any size (in the request, or a memfd past 32 KiB)", function()
    local s <close> = new()
    -- the request holds at most 32 KiB of cwd, argv and env together
    for _, n in ipairs { 1, 30000, 40000, 100000 } do
      for _, case in ipairs { { n, 1 }, { 1, n } } do
        local r = s:exec({ "sh", "-c", 'printf "%s %s" "${#X}" "${#1}"', "sh", string.rep("a", case[1]) },
                         { env = { X = string.rep("x", case[2]) } })
        assert.equal(case[2] .. " " .. case[1], r.stdout)
      end
    end
  end)

  it("keeps what its commands read of a bounded number of sandboxes", function()
    local before = fd_count()
    local list = {}
    for i = 1, 60 do
      list[i] = new { isolation = "none", network = "on", limits = { disk = false } }
      list[i]:exec { "true" }
    end
    -- each kept sandbox holds at most 5 fds (directory, lock, meta.json,
    -- two cgroup.procs); without a bound these 60 would hold 300
    local grown = fd_count() - before
    assert.is_true(grown <= 32 * 5, "the process holds " .. grown .. " more fds")
    for _, s in ipairs(list) do s:close() end
    assert.equal(before, fd_count())
  end)

  it("isolation = none: a command is found as in a jail, from the workspace and its PATH", function()
    local s <close> = new { isolation = "none", network = "on" }
    s:write_file("bin/hi", "#!/bin/sh\necho hi from $0\n")
    s:exec { "chmod", "+x", "bin/hi" }
    assert.equal("hi from ./bin/hi\n", s:exec({ "./bin/hi" }).stdout)
    assert.equal("hi from bin/hi\n", s:exec({ "hi" }, { env = { PATH = "/nonexistent:bin" } }).stdout)
    local err = catch(s.exec, s, { "no-such-command-xyz" })
    assert.equal("start_failed", err.code)
    assert.matches("'no-such-command-xyz' was not found", err.message, 1, true)
    s:write_file("plain", "echo x\n")
    err = catch(s.exec, s, { "./plain" })
    assert.equal("start_failed", err.code)
    assert.matches("Permission denied", err.message, 1, true)
  end)

  -- A handle's commands keep what they read of the sandbox (its metadata,
  -- its cgroup record, its disk check) and check it again at each use:
  -- whatever another process changes in between is seen as a fresh open
  -- would see it.
  local function sees_changes(spec)
    local LASH = os.getenv("LASH_BIN") or ((os.getenv("LASH_BUILD") or "build") .. "/bin/lash")
    local s = new(spec)
    local box = root .. "/" .. s.id
    local function meta() local f = assert(io.open(box .. "/meta.json")); local m = f:read("a"); f:close(); return m end
    local function greeting() return s:exec({ "sh", "-c", 'printf %s "$GREETING"' }).stdout end
    assert.equal("a", greeting())
    assert.equal("a", greeting())
    -- meta.json replaced (as lash writes it: a new file renamed over it)
    local f = assert(io.open(box .. "/meta.json.new", "w"))
    f:write((meta():gsub('"GREETING":"a"', '"GREETING":"b"')))
    f:close()
    assert(os.rename(box .. "/meta.json.new", box .. "/meta.json"))
    assert.equal("b", greeting())
    -- edited in place: the same file, the same size
    lash.sleep(0.02)
    local m = meta():gsub('"GREETING":"b"', '"GREETING":"c"')
    f = assert(io.open(box .. "/meta.json", "r+"))
    f:write(m)
    f:close()
    assert.equal("c", greeting())
    -- its disk quota's mounts undone by hand: the next command mounts them
    -- again (only where a quota could be made: root, loop devices; not
    -- under a running jail, which keeps the old mounts)
    if spec.isolation == "none" and os.execute("env -u LD_PRELOAD mountpoint -q '" .. box .. "/workspace'") then
      assert(os.execute("env -u LD_PRELOAD sh -c \"umount -l '" .. box .. "/workspace' '" .. box
                        .. "/tmp' && umount -l '" .. box .. "/disk'\""))
      assert.is_falsy(os.execute("env -u LD_PRELOAD mountpoint -q '" .. box .. "/workspace'"))
      greeting()
      assert.is_truthy(os.execute("env -u LD_PRELOAD mountpoint -q '" .. box .. "/workspace'"))
    end
    -- its cgroup removed by hand (no command runs in it): the next command
    -- makes it again and runs in it (after two commands with nothing
    -- changed: the group's files are kept open by then)
    local cgf = io.open(box .. "/cgroup")
    if spec.isolation == "none" and cgf then
      greeting()
      greeting()
      local version, d1, d2 = cgf:read("l", "l", "l")
      cgf:close()
      local dirs = version == "2" and { d1 } or { d1, d2 }
      local removed = true
      for _, d in ipairs(dirs) do
        removed = removed and os.execute("env -u LD_PRELOAD rmdir '" .. d .. "' 2>/dev/null")
      end
      if removed then
        assert.equal("c", greeting())
        local r = s:exec { "cat", "/proc/self/cgroup" }
        assert.matches(s.id, r.stdout, 1, true)
      end
    elseif cgf then
      cgf:close()
    end
    -- expired by a rewrite of its metadata
    f = assert(io.open(box .. "/meta.json.new", "w"))
    f:write((meta():gsub('"expires_at":%d+', '"expires_at":1000')))
    f:close()
    assert(os.rename(box .. "/meta.json.new", box .. "/meta.json"))
    local err = catch(s.exec, s, "true")
    assert.equal("expired", err.code)
    assert.equal("expired", catch(s.read_file, s, "x").code)
    -- destroyed by another process between two commands: the same error
    -- as a handle that never ran one
    f = assert(io.open(box .. "/meta.json.new", "w"))
    f:write((meta():gsub('"expires_at":%d+', '"expires_at":' .. (os.time() + 600))))
    f:close()
    assert(os.rename(box .. "/meta.json.new", box .. "/meta.json"))
    assert.equal("c", greeting())
    assert(os.execute("env -u LD_PRELOAD LASH_SANDBOX_ROOT='" .. root .. "' " .. LASH .. " sandbox destroy " .. s.id))
    err = catch(s.exec, s, "true")
    assert.equal("unavailable", err.kind)
    assert.equal("gone", err.code)
    assert.is_true(err.terminal)
    assert.matches("Sandbox '" .. s.id .. "' is gone", err.message, 1, true)
    assert.equal("gone", catch(s.read_file, s, "x").code)
    assert.is_true(s:close())
  end

  it("isolation = none: a command sees what another process changed in its sandbox", function()
    sees_changes { isolation = "none", network = "on", env = { GREETING = "a" } }
  end)

  it_jail("a jailed command sees what another process changed in its sandbox", function()
    sees_changes { env = { GREETING = "a" } }
  end)

  it_jail("another process runs the sandbox's commands in a jail of its own; destroy ends both", function()
    local s = new()
    assert.equal("mine\n", s:exec({ "echo", "mine" }).stdout)
    local script = os.tmpname()
    local f = io.open(script, "w")
    f:write(string.format([[
      package.path = %q
      package.cpath = %q
      local lash = require "lash"
      local s = lash.sandbox.open(arg[1], { state_root = arg[2] })
      io.write(s:exec({ "sh", "-c", "echo theirs; exec sleep 7654" }).exit_code)
    ]], package.path, package.cpath))
    f:close()
    local other = io.popen("lua5.4 '" .. script .. "' " .. s.id .. " '" .. root .. "'", "r")
    local function jailed_sleeps()
      local p = popen("pgrep -f '^sleep 7654$' | wc -l")
      local n = tonumber(p:read("a"):match("%d+"))
      p:close()
      return n
    end
    for _ = 1, 200 do
      if jailed_sleeps() == 1 then break end
      lash.sleep(0.05)
    end
    assert.equal(1, jailed_sleeps())
    -- ours still works alongside, in our own jail
    assert.equal("mine again\n", s:exec({ "echo", "mine again" }).stdout)
    -- destroy (here) kills the other process's jail too: its command ends
    s:destroy()
    assert.equal("137", other:read("a"))
    other:close()
    os.remove(script)
    assert.equal(0, jailed_sleeps())
  end)

  it_jail("two processes racing to attach: exactly one wins", function()
    local s <close> = new { owner = "race" }
    local script = os.tmpname()
    local f = io.open(script, "w")
    f:write(string.format([[
      package.path = %q
      package.cpath = %q
      local lash = require "lash"
      local s = lash.sandbox.open(arg[1], { state_root = arg[2] })
      local ok, err = pcall(s.attach, s, "race", arg[3])
      io.write(ok and "won" or ("lost " .. tostring(err.code)))
    ]], package.path, package.cpath))
    f:close()
    -- hold the sandbox's lock so that every contender reads the tags with no
    -- holder, then let them all go at once: the claim itself decides
    local lockf = root .. "/" .. s.id .. "/lock"
    local holder = popen("flock -x '" .. lockf .. "' sleep 1", "r")
    lash.sleep(0.1)
    local procs = {}
    for i = 1, 6 do
      procs[i] = io.popen("lua5.4 '" .. script .. "' " .. s.id .. " '" .. root .. "' h" .. i, "r")
    end
    holder:close()
    local won, lost = 0, {}
    for i = 1, 6 do
      local out = procs[i]:read("a")
      procs[i]:close()
      if out == "won" then won = won + 1 else lost[#lost + 1] = out end
    end
    os.remove(script)
    assert.equal(1, won)
    assert.equal(5, #lost)
    for _, l in ipairs(lost) do assert.is_truthy(l == "lost claimed" or l == "lost held", l) end
    assert.matches("^h%d$", s:read_tags().lash_holder)
  end)
end)
