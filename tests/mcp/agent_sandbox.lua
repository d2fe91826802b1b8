-- tests/mcp/agent_sandbox.lua: MCP stdio servers run inside a sandbox
-- (`sandbox = ...`), against the reference servers. Proves the server runs
-- jailed: it sees the run's workspace, not a host file the jail hides, and
-- has the jail's uid, hostname and network namespace. Prints TAP.
-- Usage: lash eval "$(cat tests/mcp/agent_sandbox.lua)" NODE MODULES_DIR HOST_SECRET
-- (HOST_SECRET: a file under /tmp on the host, which the jail's private
-- /tmp does not show)
local node, modules, secret = ...
local n, failed = 0, 0
local function check(desc, cond, detail)
  n = n + 1
  if cond then print("ok " .. n .. " - " .. desc)
  else
    failed = failed + 1
    print("not ok " .. n .. " - " .. desc)
    if detail then print("#   " .. tostring(detail):gsub("\n", "\n#   ")) end
  end
end
local FS = modules .. "/@modelcontextprotocol/server-filesystem/dist/index.js"
local EV = modules .. "/@modelcontextprotocol/server-everything/dist/index.js"

-- the server's program must be reachable inside the jail (the jail shows
-- the host's root read-only, but masks /root, /home and /tmp)
do
  local sb = lash.sandbox.create { timeout = 60 }
  local ok, r = pcall(sb.exec, sb, { node, "--version" })
  sb:destroy()
  if not (ok and r.exit_code == 0) then
    print("1..0 # SKIP " .. node .. " cannot run inside the jail (a masked path?): "
      .. tostring(ok and r.stderr or r))
    os.exit(0)
  end
end
local hf = io.open(secret)
check("the host secret exists on the host", hf ~= nil)
if hf then hf:close() end

local fs = lash.mcp.stdio { command = node, args = { FS, "/" }, name = "fs", sandbox = true, timeout = 30 }
local agent = lash.agent {
  model = lash.script_model {
    { tool_calls = {
        { name = "write_file", args = { path = "note.txt", content = "written by the model's sandbox tool\n" } },
        { name = "run_command", args = { command = "id -u; hostname" } },
    } },
    { tool_calls = {
        { name = "fs_read_text_file", args = { path = "/workspace/note.txt" }, id = "note" },
        { name = "fs_read_text_file", args = { path = secret }, id = "secret" },
        { name = "fs_read_text_file", args = { path = "/proc/self/status" }, id = "status" },
        { name = "fs_read_text_file", args = { path = "/proc/net/dev" }, id = "net" },
        { name = "fs_read_text_file", args = { path = "/proc/sys/kernel/hostname" }, id = "host" },
    } },
    { text = "done" },
  },
  toolsets = { lash.prefix_tools { capability = fs, prefix = "fs" } },
  capabilities = { lash.sandbox_capability { sandbox_timeout = 120 } },
  tool_timeout = 60,
}
local by_id, by_name, sandbox_id = {}, {}, nil
local r = agent:run("go", {
  on_event = function(e)
    if e.type == "tool_result" then
      by_id[e.id] = e.content
      by_name[e.name] = e.content
    end
  end,
})
local function c(k) return by_id[k] or by_name[k] or "(no result)" end
if os.getenv("SHOW") then for k, v in pairs(by_id) do print("# " .. k .. ": " .. v:sub(1, 300):gsub("\n", " / ")) end end
check("the run completes", r.output == "done", r.output)
check("the server reads what the model wrote in the run's sandbox", c("note"):find("written by the model", 1, true),
      c("note"))
check("the server cannot see the host's file (the jail's /tmp is its own)",
      not c("secret"):find("host secret", 1, true) and (c("secret"):find("ENOENT", 1, true) or c("secret"):find("no such", 1, true)
      or c("secret"):find("not", 1, true)), c("secret"))
local ids = c("run_command")
local jail_uid = ids:match("(%d+)")
local server_uid = c("status"):match("Uid:%s*(%d+)")
check("the server has the jail's uid", server_uid ~= nil and server_uid == jail_uid,
      "server " .. tostring(server_uid) .. ", jail " .. tostring(jail_uid) .. ": " .. c("status"):sub(1, 200))
check("the server is in the jail's pid namespace (its pid is small, its parent the jail's init)",
      tonumber(c("status"):match("\nPid:%s*(%d+)") or "9999") < 10, c("status"):match("\nPid:[^\n]*"))
check("the server is in the jail's network namespace (loopback only)",
      c("net"):find("lo:", 1, true) and not c("net"):find("eth", 1, true) and select(2, c("net"):gsub(":", "")) <= 3,
      c("net"))
check("the server has the jail's hostname", c("host"):match("^sandbox"), c("host"))

-- a given sandbox object; the server's process ends with the sandbox
local sb = lash.sandbox.create { timeout = 120 }
sb:write_file("given.txt", "in the given sandbox\n")
local ev = lash.mcp.stdio { command = node, args = { FS, "/workspace" }, name = "fs2", sandbox = sb }
local a2 = lash.agent {
  model = lash.script_model {
    { tool_calls = { { name = "read_text_file", args = { path = "/workspace/given.txt" } } } },
    function(msgs) return { text = msgs[#msgs].parts[1].content } end,
  },
  toolsets = { ev },
}
local r2 = a2:run("go")
check("sandbox = a lash.sandbox object runs the server there", r2.output:find("in the given sandbox", 1, true), r2.output)
check("the given sandbox stays (the caller owns it)", sb:poll().running == true)

-- sandbox:spawn directly: the process dies with the sandbox
local p = sb:spawn({ node, "-e", "setInterval(() => {}, 1000); process.stdout.write('up\\n')" })
local first = p:read()
check("sandbox:spawn streams the process's stdout", first == "up\n", first)
sb:destroy()
local code, sig = p:wait()
check("destroying the sandbox ends a spawned process", p:running() == false and (code ~= 0 or sig ~= nil),
      tostring(code) .. " " .. tostring(sig))
p:close()

-- create options: a sandbox of the server's own, for the run
local own = lash.mcp.stdio { command = node, args = { EV }, name = "everything", sandbox = { timeout = 120 } }
local a3 = lash.agent {
  model = lash.script_model {
    { tool_calls = { { name = "echo", args = { message = "jailed" } } } },
    function(msgs) return { text = msgs[#msgs].parts[1].content } end,
  },
  toolsets = { own },
}
local r3 = a3:run("go")
check("sandbox = create options: server-everything in a sandbox of its own", r3.output == "Echo: jailed", r3.output)

-- sandbox = true without a sandbox capability is a clear error
local a4 = lash.agent { model = lash.script_model { { text = "x" } },
                        toolsets = { lash.mcp.stdio { command = node, args = { EV }, sandbox = true } } }
local ok4, e4 = pcall(a4.run, a4, "go")
check("sandbox = true needs a sandbox capability, and says so", not ok4 and tostring(e4):find("no sandbox", 1, true), e4)

-- a program missing inside the jail is a sandbox error naming it
local a5 = lash.agent { model = lash.script_model { { text = "x" } },
                        toolsets = { lash.mcp.stdio { command = "/no/such/server", sandbox = { timeout = 60 } } } }
local ok5, e5 = pcall(a5.run, a5, "go")
check("a server program missing in the jail is a clear error", not ok5 and tostring(e5):find("/no/such/server", 1, true), e5)

-- a backend without spawn (Modal today) refuses clearly
lash.sandbox.register_backend("nospawn", {
  create = function() return "x1" end, exec = function() end, stat = function() end, read_file = function() end,
  write_file = function() end, list_dir = function() end, poll = function() return { running = true, status = "running" } end,
  destroy = function() end,
})
local nb = lash.sandbox.create { backend = "nospawn" }
local ok6, e6 = pcall(nb.spawn, nb, { "cat" })
check("a backend without spawn says it is not supported yet", not ok6 and tostring(e6.message or e6):find("not supported", 1, true), e6)
nb:close()
print("1.." .. n)
os.exit(failed == 0 and 0 or 1)
