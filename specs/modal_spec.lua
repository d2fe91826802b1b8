-- The sandbox backend contract on the "modal" backend, against the fake Modal
-- (tests/modal_fake/server.py) on loopback: V2 (the default) and V1, over
-- TLS; a smaller run over h2c; every injected fault ending in its documented
-- outcome; and no sandbox left running at the end.
local lash = require "lash"
local sandbox = lash.sandbox
local fake = dofile("tests/modal_fake/fake.lua")

local unavailable = fake.unavailable()

local function catch(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return err
end

local function is_v1_id(id)
  return #id == 25 and id:sub(1, 3) == "sb-" and id:sub(4):match("^[%w]+$") ~= nil
end

local function count(list, pred)
  local n = 0
  for _, x in ipairs(list) do if pred(x) then n = n + 1 end end
  return n
end

-- A fake Modal for the enclosing describe block (fx.srv), stopped on
-- teardown, which fails if the block left a sandbox running.
local function serve(fopts)
  local fx = {}
  setup(function() fx.srv = assert(fake.start(fopts)) end)
  teardown(function()
    local left = fx.srv:running()
    fx.srv:stop()
    assert.same({}, left, "sandboxes left running")
  end)
  return fx
end

local function contract(mode)
  describe("modal backend, " .. mode.name, function()
    local srv, opts

    setup(function()
      srv = assert(fake.start{ tls = mode.tls })
      opts = function(more)
        local o = srv:opts{ sandbox_v2 = mode.v2 }
        for k, v in pairs(more or {}) do o[k] = v end
        return o
      end
    end)

    teardown(function()
      local left = srv:running()
      srv:stop()
      assert.same({}, left, "sandboxes left running")
    end)

    it("creates a sandbox of the configured kind, with the stamped tags", function()
      local sb <close> = sandbox.create(opts{ workdir = "/work", tags = { team = "a" },
                                              timeout = 120 })
      assert.equal(not mode.v2, is_v1_id(sb.id))
      local tags = sb:read_tags()
      assert.equal("a", tags.team)
      assert.equal("/work", tags.lash_workdir)
      assert.truthy(tonumber(tags.lash_expires_at))
      assert.truthy(tags.lash_network)
      local p = sb:poll()
      assert.is_true(p.running)
      assert.equal("running", p.status)
    end)

    it("runs commands: output, exit codes, env, cwd, stdin", function()
      local sb <close> = sandbox.create(opts{ workdir = "/work", env = { SBV = "from-sandbox" } })
      local r = sb:exec({ "sh", "-c", "echo out $SBV $X; echo err >&2; exit 3" },
                        { env = { X = "from-exec" } })
      assert.equal("out from-sandbox from-exec\n", r.stdout)
      assert.equal("err\n", r.stderr)
      assert.equal(3, r.exit_code)
      assert.is_false(r.timed_out)
      assert.is_false(r.stdout_truncated)
      assert.equal(60, r.applied_timeout)
      assert.equal("/work\n", sb:exec("pwd").stdout)
      sb:exec("mkdir -p sub/deeper")
      assert.equal("/work/sub/deeper\n", sb:exec("pwd", { cwd = "sub/deeper" }).stdout)
      assert.equal("/tmp\n", sb:exec("pwd", { cwd = "/tmp" }).stdout)
      assert.equal("piped", sb:exec("cat", { stdin = "piped" }).stdout)
      assert.equal("", sb:exec("cat").stdout)   -- stdin is closed, cat ends
      local big = string.rep("0123456789abcdef", 1 << 14)   -- 256 KiB
      assert.equal(#big, tonumber(sb:exec("wc -c", { stdin = big }).stdout:match("%d+")))
      assert.equal(137, sb:exec("kill -9 $$").exit_code)
    end)

    it("keeps the tail of large output within max_output_bytes", function()
      local sb <close> = sandbox.create(opts{})
      local r = sb:exec("head -c 3000000 /dev/zero | tr '\\0' a; printf END",
                        { max_output_bytes = 1000 })
      assert.is_true(r.stdout_truncated)
      assert.equal(1000, #r.stdout)
      assert.equal("END", r.stdout:sub(-3))
      local bin = sb:exec("printf '\\000\\001\\377'")
      assert.equal("\0\1\255", bin.stdout)
    end)

    it("streams a command's output into on_output as it arrives", function()
      local sb <close> = sandbox.create(opts{})
      local q = lash.core.outq.new()
      local got = {}
      -- the command ends only if "ready" reached the reader while it ran
      local reader = lash.spawn(function()
        while true do
          local stream, text = q:next()
          if not stream then return end
          got[#got + 1] = stream .. ":" .. text
          if text:find("ready", 1, true) then sb:write_file("/tmp/go", "") end
        end
      end)
      local r = sb:exec("rm -f /tmp/go; echo ready; echo warn >&2; i=0; while [ ! -e /tmp/go ] && [ $i -lt 100 ]; do "
        .. "sleep 0.1; i=$((i+1)); done; [ -e /tmp/go ] && echo released", { on_output = q })
      q:close()
      reader:join()
      assert.equal("ready\nreleased\n", r.stdout)
      local out, err = {}, {}
      for _, g in ipairs(got) do
        local stream, text = g:match("^(%a+):(.*)$")
        if stream == "stdout" then out[#out + 1] = text else err[#err + 1] = text end
      end
      assert.equal("ready\nreleased\n", table.concat(out))
      assert.equal("warn\n", table.concat(err))
      assert.has_error(function() sb:exec("true", { on_output = function() end }) end)
    end)

    it("tunnels the ports it was created with, encrypted (publish, sandbox:tunnels)", function()
      -- a port nothing on this machine is likely to hold: the fake's jail
      -- shares the host's network
      local port = 20000 + math.random(0, 20000)
      -- network on: the fake's jail then shares its network, as the tunnel needs
      local sb <close> = sandbox.create(opts{ publish = { port, port + 1 }, network = "on" })
      local create = mode.v2 and "SandboxCreateV2" or "SandboxCreate"
      local c = srv:calls(create)
      local sent = c[#c].request.definition.open_ports.ports
      assert.same({ { port = port }, { port = port + 1 } }, sent)   -- unencrypted: false
      local t = sb:tunnels()
      assert.equal(2, #t)
      assert.equal(port, t[1].port)
      assert.equal(port + 1, t[2].port)
      assert.equal("127.0.0.1", t[1].host)
      assert.equal("https://127.0.0.1:" .. t[1].tls_port, t[1].url)
      assert.is_nil(t[1].tcp_port)
      -- a server in the sandbox answers through the tunnel, over TLS: curl
      -- (in the background, retrying until it listens) fetches once
      local got = srv.state .. "/tunnel.out"
      os.execute("(curl -s --retry 40 --retry-delay 0 --retry-all-errors --retry-max-time 15 --max-time 10 --cacert "
        .. srv.state .. "/ca.pem -o " .. got .. ".part " .. t[1].url .. "/ && mv " .. got .. ".part "
        .. got .. ") >/dev/null 2>&1 &")
      local r = sb:exec({ "python3", "-c", [[
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"hello through the tunnel")
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H)
s.handle_request()
]], tostring(port) }, { timeout = 15 })
      assert.equal(0, r.exit_code)
      local body
      for _ = 1, 100 do
        local f = io.open(got, "rb")
        if f then body = f:read("a") f:close() break end
        os.execute("sleep 0.1")
      end
      assert.equal("hello through the tunnel", body)
      local bad = catch(sandbox.create, opts{ publish = { 0 } })
      assert.matches("publish", tostring(bad))
      assert.matches("twice", tostring(catch(sandbox.create, opts{ publish = { 80, 80 } })))
    end)

    it("times a command out and reports it", function()
      local sb <close> = sandbox.create(opts{})
      local r = sb:exec("echo started; sleep 30", { timeout = 1 })
      assert.is_true(r.timed_out)
      assert.equal(1, r.applied_timeout)
      assert.equal(137, r.exit_code)
      assert.equal("started\n", r.stdout)
    end)

    it("refuses a command that cannot start, recoverably", function()
      local sb <close> = sandbox.create(opts{})
      local e = catch(sb.exec, sb, { "no-such-program-xyz" })
      assert.is_true(lash.is_error(e, "sandbox"))
      assert.equal("start_failed", e.code)
      assert.is_false(e.terminal)
      assert.equal("ok\n", sb:exec("echo ok").stdout)   -- still usable
    end)

    it("reads, writes, stats and lists files", function()
      local sb <close> = sandbox.create(opts{ workdir = "/work" })
      local bytes = "line1\n\0binary\255\n"
      sb:write_file("a/b/c.txt", bytes)             -- parents created, relative
      assert.equal(bytes, sb:read_file("/work/a/b/c.txt"))
      assert.equal(bytes, sb:exec("cat a/b/c.txt").stdout)
      local st = sb:stat("a/b/c.txt")
      assert.equal("file", st.kind)
      assert.equal(#bytes, st.size)
      assert.equal("dir", sb:stat("a").kind)
      sb:exec("ln -s b a/link")
      local entries = sb:list_dir("a")
      table.sort(entries, function(x, y) return x.name < y.name end)
      assert.same({ { name = "b", kind = "dir" }, { name = "link", kind = "symlink" } }, entries)
      sb:write_file("/tmp/empty", "")
      assert.equal("", sb:read_file("/tmp/empty"))
    end)

    it("gives file errors with codes", function()
      local sb <close> = sandbox.create(opts{ workdir = "/work" })
      local e = catch(sb.read_file, sb, "missing.txt")
      assert.is_true(lash.is_error(e, "sandbox"))
      assert.equal("not_found", e.code)
      sb:write_file("big.txt", string.rep("x", 100))
      e = catch(sb.read_file, sb, "big.txt", { max_bytes = 10 })
      assert.equal("too_large", e.code)
      assert.equal(100, e.size)
      assert.equal(10, e.max_bytes)
      assert.equal("/work/big.txt", e.path)
      e = catch(sb.read_file, sb, "/work")
      assert.equal("is_dir", e.code)
      e = catch(sb.list_dir, sb, "big.txt")
      assert.equal("not_dir", e.code)
      e = catch(sb.stat, sb, "/nope/x")
      assert.equal("not_found", e.code)
    end)

    it("replaces tags", function()
      local sb <close> = sandbox.create(opts{ tags = { a = "1" } })
      local stamped = sb:read_tags().lash_expires_at
      sb:write_tags{ b = "2" }
      local back = sb:read_tags()
      assert.is_nil(back.a)
      assert.equal("2", back.b)
      assert.equal(stamped, back.lash_expires_at)   -- the generic layer keeps its stamps
    end)

    it("attaches by id without destroying, and destroys idempotently", function()
      local sb = sandbox.create(opts{ workdir = "/work" })
      local id = sb.id
      sb:write_file("note", "kept")
      do
        local again <close> = sandbox.open(id, opts())
        assert.equal("kept", again:read_file("note"))   -- relative: workdir from tags
        assert.equal("kept", again:exec("cat note").stdout)
      end
      assert.is_true(sb:poll().running)
      sb:destroy{ timeout = 10 }
      sb:destroy{ timeout = 10 }
      local p = sandbox.open(id, opts()):poll()
      assert.is_false(p.running)
      assert.equal("terminated", p.status)
      assert.equal(137, p.exit_code)
      local other = sandbox.open(id, opts())
      local e = catch(other.exec, other, "true")
      assert.is_true(lash.is_error(e, "unavailable"))
      assert.is_true(e.terminal)
      sb:close()
    end)

    it("reports an unknown sandbox as unavailable", function()
      local ghost = sandbox.open(mode.v2 and "sb-0AAAAAAAAAAAAAAAAAAAAAAAAA"
                                           or "sb-AAAAAAAAAAAAAAAAAAAAAA", opts())
      local e = catch(ghost.read_tags, ghost)
      assert.is_true(lash.is_error(e, "unavailable"))
      assert.equal("not_found", e.code)
      assert.equal("gone", ghost:poll().status)
    end)

    it("expires a sandbox at the end of its lifetime", function()
      local sb <close> = sandbox.create(opts{ timeout = 2 })
      lash.sleep(3)
      local p = sb:poll()
      assert.is_false(p.running)
      assert.equal("expired", p.status)
      assert.equal(124, p.exit_code)
      local e = catch(sb.exec, sb, "true")
      assert.is_true(lash.is_error(e, "unavailable"))
    end)

    it("runs commands of several tasks at once", function()
      -- A rendezvous, not a stopwatch: each command waits until all eight
      -- have started, which only happens when they run at the same time.
      local sb <close> = sandbox.create(opts{ workdir = "/work" })
      sb:exec("mkdir rdv")
      local tasks = {}
      for i = 1, 8 do
        tasks[i] = lash.spawn(function()
          return sb:exec(string.format("touch rdv/%d; n=0; while [ $(ls rdv | wc -l) -lt 8 ] && [ $n -lt 600 ]; do"
                                       .. " sleep 0.05; n=$((n+1)); done; [ $(ls rdv | wc -l) -eq 8 ] && echo %d", i, i),
                         { timeout = 60 }).stdout
        end)
      end
      for i = 1, 8 do assert.equal(i .. "\n", tasks[i]:join()) end
    end)

    it("stops waiting for a command when its task is cancelled", function()
      local sb <close> = sandbox.create(opts{})
      local t = lash.spawn(function() return sb:exec("sleep 20") end)
      lash.sleep(0.5)
      t:cancel()
      local ok, e = pcall(t.join, t)   -- had the wait gone on, this would succeed after 20 s
      assert.is_false(ok)
      assert.is_true(lash.is_error(e, "cancelled"))
      assert.equal("still here\n", sb:exec("echo still here").stdout)
    end)

    it("probes the service", function()
      local ok, why = sandbox.probe(opts())
      assert.is_true(ok, why)
    end)
  end)
end

local function faults(mode)
  describe("modal backend faults, " .. mode.name, function()
    local srv, opts

    setup(function()
      srv = assert(fake.start{ tls = true })
      opts = function(more)
        local o = srv:opts{ sandbox_v2 = mode.v2 }
        for k, v in pairs(more or {}) do o[k] = v end
        return o
      end
    end)

    teardown(function()
      srv:faults{}
      local left = srv:running()
      srv:stop()
      assert.same({}, left, "sandboxes left running")
    end)

    after_each(function() srv:faults{} end)

    local create_rpc = mode.v2 and "SandboxCreateV2" or "SandboxCreate"

    it("retries UNAVAILABLE with one idempotency key and succeeds", function()
      srv:faults{ { id = "u", method = create_rpc, kind = "status", code = "UNAVAILABLE", count = 2 } }
      local before = #srv:calls(create_rpc)
      local sb <close> = sandbox.create(opts{})
      local calls = srv:calls(create_rpc)
      assert.equal(before + 3, #calls)
      local a, b, c = calls[#calls - 2], calls[#calls - 1], calls[#calls]
      assert.equal("UNAVAILABLE", a.code)
      assert.equal("UNAVAILABLE", b.code)
      assert.equal("OK", c.code)
      assert.equal(a.metadata["x-idempotency-key"], c.metadata["x-idempotency-key"])
      assert.same({ "0", "1", "2" }, { a.metadata["x-retry-attempt"],
                                      b.metadata["x-retry-attempt"],
                                      c.metadata["x-retry-attempt"] })
      assert.equal(1, count(srv:calls(create_rpc), function(x)
        return x.metadata["x-idempotency-key"] == c.metadata["x-idempotency-key"] and x.code == "OK"
      end))
    end)

    it("gives up after the retries: unreachable, nothing created", function()
      srv:faults{ { id = "u", method = "AppGetOrCreate", kind = "status", code = "UNAVAILABLE", count = 50 } }
      local n = #srv:calls(create_rpc)
      local e = catch(sandbox.create, opts{ app_name = "never-made" })
      assert.is_true(lash.is_error(e, "unavailable"))
      assert.equal("unreachable", e.code)
      assert.equal(n, #srv:calls(create_rpc))
    end)

    it("honours a server-directed retry delay", function()
      local sb <close> = sandbox.create(opts{})
      local m = mode.v2 and "SandboxTagsGetV2" or "SandboxTagsGet"
      srv:faults{ { id = "t", method = m, kind = "retry_after", code = "RESOURCE_EXHAUSTED", secs = 0.4 } }
      local t0 = lash.now()
      sb:read_tags()
      assert.truthy(lash.now() - t0 >= 0.4)
      local calls = srv:calls(m)
      assert.equal("OK", calls[#calls].code)
      assert.equal("1", calls[#calls].metadata["x-throttle-retry-attempt"])
    end)

    it("resumes a cut output stream exactly", function()
      local sb <close> = sandbox.create(opts{})
      srv:faults{ { id = "c", method = "TaskExecStdioRead", kind = "cut_stream", after_bytes = 5,
                    count = 3, match = { file_descriptor = 0 } } }
      local r = sb:exec("seq 1 2000")
      local want = {}
      for i = 1, 2000 do want[i] = tostring(i) end
      assert.equal(table.concat(want, "\n") .. "\n", r.stdout)
      assert.equal(0, r.exit_code)
      local cut = count(srv:calls("TaskExecStdioRead"), function(x) return x.code == "UNAVAILABLE" end)
      assert.equal(3, cut)
    end)

    it("refreshes an expired router token", function()
      local sb <close> = sandbox.create(opts{})
      srv:faults{ { id = "r", method = "TaskExecWait", kind = "expire_router_tokens" } }
      assert.equal("ok\n", sb:exec("echo ok").stdout)
      assert.equal("ok\n", sb:exec("echo ok").stdout)
    end)

    it("fails a command whose sandbox is terminated under it: unavailable", function()
      local sb <close> = sandbox.create(opts{})
      srv:faults{ { id = "k", method = "TaskExecStart", kind = "terminate_after", secs = 0.5 } }
      local e = catch(sb.exec, sb, "sleep 20")
      assert.is_true(lash.is_error(e, "unavailable"))
      assert.is_true(e.terminal)
    end)

    it("classifies an ambiguous failure by polling: still running is recoverable", function()
      local sb <close> = sandbox.create(opts{})
      srv:faults{ { id = "a", method = "TaskExecStdioRead", kind = "status", code = "UNAVAILABLE", count = 100 } }
      local e = catch(sb.exec, sb, "echo hi")
      assert.is_true(lash.is_error(e, "sandbox"))
      assert.equal("transient", e.code)
      assert.is_false(e.terminal)
      local w = mode.v2 and "SandboxWaitV2" or "SandboxWait"
      local polls = srv:calls(w)
      assert.equal(0.0, polls[#polls].request.timeout or 0.0)
      srv:faults{}
      assert.equal("hi\n", sb:exec("echo hi").stdout)
    end)

    it("bounds destroy when terminate hangs", function()
      local sb = sandbox.create(opts{ timeout = 30 })
      srv:faults{ { id = "h", method = "SandboxTerminate*", kind = "hang_terminate" } }
      local t0 = lash.now()
      sb:destroy{ timeout = 2 }
      local took = lash.now() - t0
      -- the lower bound is the behaviour (it waited for terminate); the upper
      -- one only guards against a hang
      assert.truthy(took >= 1.5 and took < 60, "destroy took " .. took)
      sb:close()
      assert.truthy(srv:sandboxes()[sb.id].hung)
    end)

    it("recovers when the server stops accepting the auth token", function()
      local sb <close> = sandbox.create(opts{})
      local m = mode.v2 and "SandboxTagsGetV2" or "SandboxTagsGet"
      srv:faults{ { id = "x", method = m, kind = "expire_tokens" } }
      local n = #srv:calls("AuthTokenGet")
      assert.truthy(sb:read_tags())
      if mode.v2 then
        local calls = srv:calls(m)
        assert.equal("UNAUTHENTICATED", calls[#calls - 1].code)
        assert.equal("OK", calls[#calls].code)
        assert.equal(n + 1, #srv:calls("AuthTokenGet"))
      end
    end)

    it("follows an image build whose log stream ends early", function()
      srv:faults{ { id = "i", method = "ImageJoinStreaming", kind = "cut_stream" } }
      local before = #srv:calls("ImageJoinStreaming")
      local sb <close> = sandbox.create(opts{ image = "alpine:" .. mode.name:gsub("%W", "") })
      local joins = srv:calls("ImageJoinStreaming")
      assert.equal(before + 2, #joins)
      assert.equal(joins[#joins - 1].request.image_id, joins[#joins].request.image_id)
      assert.truthy(#(joins[#joins].request.last_entry_id or "") > 0)
    end)

    it("reports an image that cannot be built", function()
      local e = catch(sandbox.create, opts{ image = "lash-fake/does-not-exist:1" })
      assert.is_true(lash.is_error(e, "sandbox"))
      assert.equal("image_failed", e.code)
    end)

    it("sends the network policy Modal enforces", function()
      local create = mode.v2 and "SandboxCreateV2" or "SandboxCreate"
      local function policy()
        local c = srv:calls(create)
        return c[#c].request.definition.network_access
      end
      local a <close> = sandbox.create(opts{ network = { block_network = true } })
      assert.equal("BLOCKED", policy().network_access_type)
      local e = a:exec("cat /proc/net/dev | wc -l")   -- the fake jails it: only lo
      assert.equal(0, e.exit_code)
      local b <close> = sandbox.create(opts{ network = { allow_egress_to = { "pypi.org" } } })
      assert.same({ "pypi.org" }, policy().allowed_domains)
      assert.equal("ALLOWLIST", policy().network_access_type)
    end)

    it("maps refused credentials to a terminal auth error", function()
      local bad = srv:profile("bad", "ak-fake-id", "as-wrong")
      local e = catch(sandbox.create, srv:opts{ config_path = bad, sandbox_v2 = mode.v2 })
      assert.is_true(lash.is_error(e, "auth"))
      assert.is_true(e.terminal)
      assert.equal("Modal rejected the credentials. Set MODAL_TOKEN_ID / MODAL_TOKEN_SECRET "
                   .. "or run `modal token new`.", e.message)
      assert.is_nil(tostring(e):find("as-wrong", 1, true))
      local ok, why = sandbox.probe(srv:opts{ config_path = bad })
      assert.is_false(ok)
      assert.truthy(why:find("rejected the credentials", 1, true))
    end)

    it("says how to set credentials when there are none", function()
      local none = srv:profile("none", nil, nil)
      local e = catch(sandbox.create, srv:opts{ config_path = none })
      assert.is_true(lash.is_error(e, "auth"))
      assert.truthy(e.message:find("MODAL_TOKEN_ID", 1, true))
    end)
  end)
end

if unavailable then
  describe("modal backend", function()
    pending("skipped: " .. unavailable)
  end)
else
  contract{ name = "V2 over TLS", v2 = true, tls = true }
  contract{ name = "V1 over TLS", v2 = false, tls = true }
  faults{ name = "V2", v2 = true }
  faults{ name = "V1", v2 = false }

  describe("modal backend, V2 over h2c (prior knowledge)", function()
    local fx = serve{ tls = false }
    it("works end to end", function()
      local srv = fx.srv
      local sb <close> = sandbox.create(srv:opts{ workdir = "/w" })
      assert.equal("hi\n", sb:exec("echo hi").stdout)
      sb:write_file("f", "x")
      assert.equal("x", sb:read_file("f"))
      assert.equal("1", sb:read_tags().lash_workdir and "1")
    end)
  end)

  describe("modal backend, auth token lifetime", function()
    local fx = serve{ tls = true }
    it("refreshes the token before it expires, never sending an expired one", function()
      local srv = fx.srv
      srv:faults{ { id = "ttl", kind = "token_ttl", secs = 8 } }
      local sb <close> = sandbox.create(srv:opts{})
      assert.equal(1, #srv:calls("AuthTokenGet"))
      lash.sleep(4)
      sb:read_tags()
      assert.equal(2, #srv:calls("AuthTokenGet"))
      assert.equal(0, count(srv:calls(), function(c) return c.code == "UNAUTHENTICATED" end))
    end)
  end)

  describe("modal backend, V1 scheduling", function()
    local fx = serve{ tls = true }
    it("polls for the task id until the sandbox is scheduled", function()
      local srv = fx.srv
      local sb <close> = sandbox.create(srv:opts{ sandbox_v2 = false })
      srv:faults{ { id = "s", method = "SandboxGetTaskId", kind = "schedule_polls", count = 3 } }
      assert.equal("ok\n", sb:exec("echo ok").stdout)
      assert.equal(4, #srv:calls("SandboxGetTaskId"))
      assert.equal(1, #srv:calls("TaskGetCommandRouterAccess"))
    end)
  end)

  describe("modal backend under the sandbox capability", function()
    local fx = serve{ tls = true }

    it("writes, runs, reads and lists like the local backend, then destroys the sandbox", function()
      local srv = fx.srv
      local cap = lash.sandbox_capability(srv:opts{ workdir = "/workspace", sandbox_timeout = 120,
                                                   app_name = "lash-cap-test" })
      local got = {}
      local agent = lash.agent {
        model = lash.script_model {
          { tool_calls = { { name = "write_file", args = { path = "pkg/hello.sh", content = "echo hi; echo oops >&2; "
            .. "exit 3\n" } } } },
          { tool_calls = { { name = "run_command", args = { command = "sh pkg/hello.sh" } } } },
          { tool_calls = { { name = "read_file", args = { path = "/workspace/pkg/hello.sh" } },
                           { name = "list_directory", args = {} },
                           { name = "run_command", args = { command = "sleep 5", timeout_seconds = 1 } },
                           { name = "read_file", args = { path = "/nope" } } } },
          function(messages)
            for _, m in ipairs(messages) do
              for _, p in ipairs(m.parts) do
                if p.type == "tool_result" then got[#got + 1] = p.content end
              end
            end
            return "done"
          end,
        },
        capabilities = { cap },
      }
      agent:run("x")
      assert.equal("Wrote 31 bytes to 'pkg/hello.sh'.", got[1])
      assert.equal("[stdout]\nhi\n[stderr]\noops\n[exit code: 3]", got[2])
      assert.equal("echo hi; echo oops >&2; exit 3", got[3])
      assert.equal("pkg/", got[4])
      assert.equal("(no output)\n[timed out after 1s]", got[5])
      assert.equal("Could not read '/nope': No such file or directory\n\nFix the errors and try again.", got[6])
      local apps = srv:calls("AppGetOrCreate")
      assert.equal("lash-cap-test", apps[#apps].request.app_name)
      assert.same({}, srv:running())
    end)

    it("looks an app up without creating it when asked", function()
      local srv = fx.srv
      local e = catch(sandbox.create, srv:opts{ app_name = "absent-app", create_app_if_missing = false })
      assert.is_true(lash.is_error(e, "sandbox"))
      assert.equal("app_not_found", e.code)
    end)
  end)

  describe("modal backend, V1 ids on a V2 client", function()
    local fx = serve{ tls = true }
    it("picks the RPC family from the id's shape", function()
      local srv = fx.srv
      local v1 <close> = sandbox.create(srv:opts{ sandbox_v2 = false })
      assert.is_true(is_v1_id(v1.id))
      local from_v2 <close> = sandbox.open(v1.id, srv:opts{ sandbox_v2 = true })
      assert.equal("ok\n", from_v2:exec("echo ok").stdout)
      assert.equal(0, #srv:calls("SandboxTagsGetV2"))
      from_v2:read_tags()
      assert.equal(0, #srv:calls("SandboxTagsGetV2"))
      assert.truthy(#srv:calls("SandboxTagsGet") > 0)
    end)
  end)
end
