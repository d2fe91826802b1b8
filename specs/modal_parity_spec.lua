-- Parity with Modal's official JS SDK, against the fake Modal: what each
-- operation costs in RPCs (counted from the fake's call log), the client
-- type lash announces, every create option reaching Modal, snapshots,
-- list/gc through SandboxList, and TLS failures named as configuration.
--
-- The SDK's counts are read from its source: modal-labs/modal-client at
-- commit 69519aef4cf6a3378314e3e7b91e87429490ed2a (2026-08-21), js/ at
-- package.json version 0.9.0 (the same commit whose protos are pinned in
-- tests/modal_fake/upstream):
--   read   js/src/sandbox_fs.ts SandboxFilesystem.readBytes: this.exec (1
--          TaskExecStart), process.wait() (1 TaskExecWait), stdout.readBytes()
--          (1 TaskExecStdioRead; stderr is read only when the exit code is
--          not 0)                                                          = 3
--   write  js/src/sandbox_fs.ts writeBytes -> #execFsToolWrite: this.exec (1),
--          process._stdinWriteStream (1 TaskExecStdinWriteStream), wait (1)  = 3
--   stat   js/src/sandbox_fs.ts stat: exec, wait, stdout.readText          = 3
--   ls     js/src/sandbox_fs.ts listFiles: exec, wait, stdout.readText     = 3
--   exec   js/src/sandbox.ts Sandbox.exec -> #execInternal: execStart (1);
--          the caller reads stdout and stderr (2 TaskExecStdioRead) and
--          waits (1); no stdin write unless the caller closes stdin        = 4
--   attach js/src/sandbox.ts SandboxService.fromId builds the handle with no
--          RPC; the first exec runs #getTaskId (1 SandboxGetTaskId[V2]) and
--          TaskCommandRouterClientImpl.tryInit in
--          js/src/task_command_router_client.ts (1 SandboxGetCommandRouterAccess
--          or TaskGetCommandRouterAccess), after js/src/auth_token_manager.ts's
--          one AuthTokenGet per client                          = 3 control-plane
local lash = require "lash"
local sandbox = lash.sandbox
local fake = dofile("tests/modal_fake/fake.lua")
local json = require "lash.json"

local unavailable = fake.unavailable()

local SDK = { read = 3, write = 3, stat = 3, ls = 3, exec = 4, attach_control = 3 }

local function catch(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return err
end

local function serve(fopts)
  local fx = {}
  setup(function() fx.srv = assert(fake.start(fopts)) end)
  teardown(function()
    if fx.on_stop then fx.on_stop() end
    local left = fx.srv:running()
    fx.srv:stop()
    assert.same({}, left, "sandboxes left running")
  end)
  return fx
end

-- The methods the fake saw while fn ran.
local function methods_during(srv, fn)
  local before = #srv:calls()
  fn()
  local all, out = srv:calls(), {}
  for i = before + 1, #all do out[#out + 1] = all[i].method end
  return out
end

local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

if unavailable then
  describe("modal parity", function()
    pending("needs the fake Modal: " .. unavailable)
  end)
  return
end

for _, v2 in ipairs { true, false } do
  describe("RPCs per operation, " .. (v2 and "V2" or "V1") .. " (no more than the JS SDK's)", function()
    local fx = serve {}
    local sb

    setup(function()
      sb = sandbox.create(fx.srv:opts { sandbox_v2 = v2, workdir = "/work" })
      sb:exec({ "true" })   -- task id and router access known from here on
    end)
    fx.on_stop = function() if sb then sb:close() end end

    local function count(name, fn)
      local ms = methods_during(fx.srv, fn)
      assert.is_true(#ms <= SDK[name], string.format("%s: lash made %d RPCs (%s), the SDK %d", name,
        #ms, table.concat(ms, ", "), SDK[name]))
      return ms
    end

    it("write: WriteFile makes the parents, so no mkdir first", function()
      local ms = count("write", function() sb:write_file("/work/deep/er/f.txt", "hello\n") end)
      assert.same({ "TaskExecStart", "TaskExecStdinWrite", "TaskExecWait" }, ms)
    end)

    it("read: no stat first; stderr is not read when the tool succeeds", function()
      local ms = count("read", function() assert.equal("hello\n", sb:read_file("/work/deep/er/f.txt")) end)
      table.sort(ms)
      assert.same({ "TaskExecStart", "TaskExecStdioRead", "TaskExecWait" }, ms)
    end)

    it("read of a file over the limit still names its size (a stat on that path only)", function()
      sb:write_file("/work/big.txt", string.rep("x", 5000))
      local err = catch(sb.read_file, sb, "/work/big.txt", { max_bytes = 100 })
      assert.equal("too_large", err.code)
      assert.equal(5000, err.size)
    end)

    it("a failed file operation reads the tool's stderr and keeps its error", function()
      local err = catch(sb.read_file, sb, "/work/nope.txt")
      assert.equal("not_found", err.code)
      err = catch(sb.write_file, sb, "/work/deep/er/f.txt/x", "y")
      assert.equal("not_dir", err.code)
    end)

    it("stat and ls", function()
      count("stat", function() assert.equal("file", sb:stat("/work/deep/er/f.txt").kind) end)
      count("ls", function() assert.equal(1, #sb:list_dir("/work/deep/er")) end)
    end)

    it("exec: start, two reads, wait; no stdin write without stdin", function()
      local ms = count("exec", function() assert.equal(0, sb:exec({ "true" }).exit_code) end)
      for _, m in ipairs(ms) do assert.not_equal("TaskExecStdinWrite", m) end
    end)

    it("a command that reads stdin still gets end-of-file when given none", function()
      local r = sb:exec({ "sh", "-c", "cat; echo done" }, { timeout = 20 })
      assert.equal("done\n", r.stdout)
      assert.is_false(r.timed_out)
      assert.equal("piped", sb:exec({ "cat" }, { stdin = "piped" }).stdout)
    end)

    it("announces the JS SDK's current client type (8), not the retired 7", function()
      local c = fx.srv:calls("TaskExecWait")
      local ctl = fx.srv:calls(v2 and "SandboxCreateV2" or "SandboxCreate")[1]
      assert.equal("8", ctl.metadata["x-modal-client-type"])
      assert.equal("1.0.0", ctl.metadata["x-modal-client-version"])
      assert.matches("^lash/", ctl.metadata["x-modal-libmodal-version"])
      assert.is_true(#c > 0)
    end)

    it("the CLI attaches by id with the SDK's control-plane calls", function()
      local id = sb.id
      local ms = methods_during(fx.srv, function()
        local cmd = "MODAL_CONFIG_PATH=" .. sh_quote(fx.srv.config_path)
          .. " MODAL_SANDBOX_V2=" .. (v2 and "1" or "0")
          .. " " .. (os.getenv("LASH_BUILD") or "build") .. "/bin/lash sandbox exec " .. sh_quote(id) .. " --backend modal -- true"
        assert.is_true(os.execute(cmd))
      end)
      local control = {}
      for _, m in ipairs(ms) do if not m:match("^TaskExec") then control[#control + 1] = m end end
      assert.is_true(#control <= SDK.attach_control, table.concat(control, ", "))
      -- lash fetches the auth token only for V2 calls, so a V1 attach needs one call fewer
      assert.same(v2 and { "AuthTokenGet", "SandboxGetTaskIdV2", "SandboxGetCommandRouterAccess" }
                     or { "SandboxGetTaskId", "TaskGetCommandRouterAccess" }, control)
    end)
  end)
end

describe("create options reach Modal", function()
  local fx = serve {}

  it("image, app, cpu, memory and idle_timeout are in the request", function()
    local sb <close> = sandbox.create(fx.srv:opts { image = "python:3.11-slim", app_name = "parity",
      cpu = 1.5, memory = 768, idle_timeout = 90, timeout = 600 })
    local c = fx.srv:calls("SandboxCreateV2")
    local d = c[#c].request.definition
    assert.equal(90, d.idle_timeout_secs)
    assert.equal(600, d.timeout_secs)
    assert.same({ milli_cpu = 1500, memory_mb = 768 }, d.resources)
    local img = fx.srv:calls("ImageGetOrCreate")
    assert.same({ "FROM python:3.11-slim" }, img[#img].request.image.dockerfile_commands)
    local app = fx.srv:calls("AppGetOrCreate")
    assert.equal("parity", app[#app].request.app_name)
  end)

  it("a GPU is passed as Modal's GPUConfig, on a V1 sandbox (V2 has no GPUs)", function()
    local sb <close> = sandbox.create(fx.srv:opts { gpu = "h100:2" })
    assert.equal(25, #sb.id)   -- a V1 id
    local c = fx.srv:calls("SandboxCreate")
    assert.same({ gpu_type = "H100", count = 2 }, c[#c].request.definition.resources.gpu_config)
  end)

  it("refuses bad values before any call, naming the option", function()
    local n = #fx.srv:calls()
    assert.matches("option 'gpu' must be a GPU type", tostring(catch(sandbox.create, fx.srv:opts { gpu = "a10g:0" })))
    assert.matches("idle_timeout must be between 1 and", tostring(catch(sandbox.create, fx.srv:opts { idle_timeout = 0 })))
    assert.matches("cannot have an idle_timeout",
      tostring(catch(sandbox.create, fx.srv:opts { idle_timeout = 60, owner = "o" })))
    assert.equal(n, #fx.srv:calls())
  end)

  it("the local backend refuses idle_timeout rather than ignore it", function()
    assert.matches("the local backend cannot enforce idle_timeout",
      tostring(catch(sandbox.create, { idle_timeout = 60 })))
  end)

  it("stamps lash_made_by so list finds only lash's sandboxes", function()
    local sb <close> = sandbox.create(fx.srv:opts {})
    assert.equal("lash", sb:read_tags().lash_made_by)
  end)
end)

for _, v2 in ipairs { true, false } do
  describe("snapshots on Modal, " .. (v2 and "V2" or "V1"), function()
    local fx = serve {}

    it("snapshot gives an image id that new sandboxes start from", function()
      local src <close> = sandbox.create(fx.srv:opts { sandbox_v2 = v2, workdir = "/work" })
      src:write_file("/work/prepared/data.csv", "a,b\n1,2\n")
      local snap = src:snapshot()
      assert.matches("^im%-", snap)
      src:write_file("/work/prepared/data.csv", "changed later\n")
      assert.equal(1, #fx.srv:calls(v2 and "TaskSnapshotFilesystem" or "SandboxSnapshotFs"))
      local a <close> = sandbox.create(fx.srv:opts { sandbox_v2 = v2, workdir = "/work", from_snapshot = snap })
      local b <close> = sandbox.create(fx.srv:opts { sandbox_v2 = v2, workdir = "/work", from_snapshot = snap })
      assert.equal("a,b\n1,2\n", a:read_file("/work/prepared/data.csv"))
      b:write_file("/work/prepared/data.csv", "b's own\n")
      assert.equal("a,b\n1,2\n", a:read_file("/work/prepared/data.csv"))
      local c = fx.srv:calls(v2 and "SandboxCreateV2" or "SandboxCreate")
      assert.equal(snap, c[#c].request.definition.image_id)
    end)

    it("refuses a snapshot id that is not an image id, and image with it", function()
      assert.matches("must be the image id", tostring(catch(sandbox.create, fx.srv:opts { from_snapshot = "ls-x" })))
      assert.matches("not both", tostring(catch(sandbox.create, fx.srv:opts { from_snapshot = "im-1", image = "x" })))
    end)
  end)
end

describe("snapshots on the local backend", function()
  local root
  setup(function()
    root = os.tmpname()
    os.remove(root)
    assert(os.execute("mkdir -p " .. root))
  end)
  teardown(function() os.execute("rm -rf " .. sh_quote(root)) end)

  it("copy the workspace: every fork starts from it and diverges on its own", function()
    local src <close> = sandbox.create { state_root = root }
    src:write_file("prep/data.txt", "prepared\n")
    src:exec({ "sh", "-c", "mkdir -p bin && printf 'echo tool\\n' > bin/t && chmod +x bin/t && ln -s bin/t t" })
    local snap = src:snapshot()
    assert.matches("^ls%-[a-z2-7]+$", snap)
    src:write_file("prep/data.txt", "changed\n")
    local a <close> = sandbox.create { state_root = root, from_snapshot = snap }
    local b <close> = sandbox.create { state_root = root, from_snapshot = snap }
    assert.equal("prepared\n", a:read_file("prep/data.txt"))
    assert.equal("tool\n", a:exec({ "sh", "-c", "./t" }).stdout)        -- modes and symlinks kept
    assert.equal(0, a:exec({ "sh", "-c", "echo mine > prep/data.txt" }).exit_code)  -- a's to write
    assert.equal("prepared\n", b:read_file("prep/data.txt"))
    assert.equal("changed\n", src:read_file("prep/data.txt"))
    -- snapshots are not sandboxes
    assert.equal(3, #sandbox.list { state_root = root })
  end)

  it("refuses an unknown snapshot, a gone sandbox, and a backend that has none", function()
    assert.matches("no local snapshot 'ls%-nope'",
      tostring(catch(sandbox.create, { state_root = root, from_snapshot = "ls-nope" })))
    local sb = sandbox.create { state_root = root }
    local id = sb.id
    sb:destroy()
    local err = catch(function() return sandbox.open(id, { state_root = root }):snapshot() end)
    assert.equal("unavailable", err.kind)
    local short <close> = sandbox.create { state_root = root, timeout = 1 }
    lash.sleep(1.5)
    err = catch(short.snapshot, short)
    assert.equal("expired", err.code)
  end)
end)

describe("ModalSandbox in a YAML spec", function()
  local fx = serve {}

  it("publish: the run's Modal sandbox is created with a tunnel per port, told as port_published", function()
    local spec = lash.load_spec_string(string.format([[
model: test
capabilities:
  - ModalSandbox: {config_path: %s, publish: [8000, 8001]}
]], fx.srv.config_path), "publish.yaml", { trust = true })
    local published = {}
    local agent = lash.agent {
      capabilities = spec.capabilities,
      model = lash.script_model {
        { tool_calls = { { name = "run_command", args = { command = "true" } } } },
        "done",
      },
    }
    agent:run("x", { on_event = function(ev)
      if ev.type == "port_published" then published[#published + 1] = ev end
    end })
    local c = fx.srv:calls("SandboxCreateV2")
    assert.same({ { port = 8000 }, { port = 8001 } }, c[#c].request.definition.open_ports.ports)
    assert.equal(2, #published)
    assert.equal(8000, published[1].port)
    assert.matches("^https://127%.0%.0%.1:%d+$", published[1].address)
    assert.equal(8001, published[2].port)
  end)

  it("passes cpu, memory, idle_timeout and from_snapshot on to Modal", function()
    local src <close> = sandbox.create(fx.srv:opts { workdir = "/workspace" })
    src:write_file("/workspace/seed.txt", "seeded\n")
    local snap = src:snapshot()
    local spec = lash.load_spec_string(string.format([[
model: test
capabilities:
  - ModalSandbox: {config_path: %s, app_name: yaml-app, cpu: 2, memory: 512, idle_timeout: 45,
                   sandbox_timeout: 600, workdir: /workspace, from_snapshot: %s}
]], fx.srv.config_path, snap), "parity.yaml", { trust = true })   -- config_path is trusted-side
    local got
    local agent = lash.agent {
      capabilities = spec.capabilities,
      model = lash.script_model {
        { tool_calls = { { name = "read_file", args = { path = "seed.txt" } } } },
        function(messages)
          for _, p in ipairs(messages[#messages].parts) do
            if p.type == "tool_result" then got = p.content end
          end
          return "done"
        end,
      },
    }
    agent:run("x")
    assert.equal("seeded", got)
    local c = fx.srv:calls("SandboxCreateV2")
    local d = c[#c].request.definition
    assert.equal(45, d.idle_timeout_secs)
    assert.equal(600, d.timeout_secs)
    assert.equal(snap, d.image_id)
    assert.same({ milli_cpu = 2000, memory_mb = 512 }, d.resources)
    local apps = fx.srv:calls("AppGetOrCreate")
    assert.equal("yaml-app", apps[#apps].request.app_name)
  end)
end)

describe("list and gc with --backend modal", function()
  local fx = serve {}

  it("list shows the running sandboxes lash made (V1 and V2), not others", function()
    local a <close> = sandbox.create(fx.srv:opts { tags = { team = "x" } })
    local b <close> = sandbox.create(fx.srv:opts { sandbox_v2 = false })
    local list = sandbox.list(fx.srv:opts {})
    local ids = {}
    for _, e in ipairs(list) do ids[e.id] = e end
    assert.is_not_nil(ids[a.id])
    assert.is_not_nil(ids[b.id])
    assert.equal("running", ids[a.id].status)
    assert.equal("x", ids[a.id].tags.team)
    assert.is_number(ids[a.id].expires_at)
    local req = fx.srv:calls("SandboxListV2")[1].request
    assert.same({ { tag_name = "lash_made_by", tag_value = "lash" } }, req.tags)
    -- V1 only: SandboxList does not see V2 sandboxes
    local v1 = sandbox.list(fx.srv:opts { sandbox_v2 = false })
    for _, e in ipairs(v1) do assert.not_equal(a.id, e.id) end
  end)

  it("gc terminates only what is past its lash lifetime", function()
    local keep <close> = sandbox.create(fx.srv:opts {})
    assert.same({}, sandbox.gc(fx.srv:opts {}))
    local stale = sandbox.create(fx.srv:opts {})
    fx.srv:faults { { method = "SandboxListV2", kind = "stale_expiry", count = 1 } }
    local removed = sandbox.gc(fx.srv:opts {})
    fx.srv:faults {}
    table.sort(removed)
    local want = { keep.id, stale.id }
    table.sort(want)
    assert.same(want, removed)
    assert.is_false(stale:poll().running)
    stale:close()
  end)
end)

describe("TLS", function()
  local fx = serve { tls = true }

  it("an unverifiable certificate is a terminal configuration error, not unavailable", function()
    local o = fx.srv:opts {}
    o.ca_file = nil
    local err = catch(sandbox.create, o)
    assert.equal("config", err.kind)
    assert.equal("tls_verify", err.code)
    assert.is_true(err.terminal)
    assert.matches("configuration problem, not an outage: point ca_file at", err.message, 1, true)
    assert.equal(0, #fx.srv:calls())   -- refused at the handshake
  end)
end)

describe("a lone surrogate in write_file's content", function()
  it("decodes to invalid UTF-8 instead of failing the JSON", function()
    local v = json.decode('{"content":"a\\ud800b"}')
    assert.is_false(lash.output.is_utf8(v.content))
  end)

  it("gets the reference's message, not a JSON error", function()
    local root = os.tmpname()
    os.remove(root)
    assert(os.execute("mkdir -p " .. root))
    local got
    local agent = lash.agent {
      capabilities = { lash.sandbox_capability { state_root = root } },
      model = lash.script_model {
        { tool_calls = { { name = "write_file", args = '{"path": "a.txt", "content": "x\\ud800y"}' } } },
        function(messages)
          for _, p in ipairs(messages[#messages].parts) do
            if p.type == "tool_result" or p.type == "retry" then got = p.content end
          end
          return "done"
        end,
      },
    }
    agent:run("x")
    os.execute("rm -rf " .. sh_quote(root))
    assert.matches("^content contains characters that cannot be encoded as UTF%-8 %(unpaired surrogates%)%.", got)
  end)
end)
