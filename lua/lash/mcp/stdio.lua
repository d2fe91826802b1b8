--- The MCP stdio transport: a server as a child process (lash.proc) that
-- reads JSON-RPC messages from its stdin and writes them to its stdout,
-- one per line. Its stderr goes to `lash.log` (info), and its last lines
-- explain an early exit.
--
-- Both ends: `M.spawn{command=, args=, env=, cwd=}` for a client talking
-- to a server, and `M.stdio_self()` for `lash mcp serve` talking over its
-- own stdin/stdout.
-- @module lash.mcp.stdio
local json = require "lash.json"

local M = {}

local runtime = require "lash.runtime"

-- What a server gets of lash's environment unless `env` says more: what
-- a program needs to run, not the user's secrets (the official SDKs pass
-- the same kind of short list).
local INHERITED = { "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ" }

local MAX_LINE = 64 * 1024 * 1024
local STDERR_KEEP = 20

-- Split complete lines off a buffer; returns the lines and the remainder.
local function lines_of(buf, chunk)
  buf = buf .. chunk
  local out, pos = {}, 1
  while true do
    local nl = buf:find("\n", pos, true)
    if not nl then break end
    out[#out + 1] = buf:sub(pos, nl - 1)
    pos = nl + 1
  end
  return out, buf:sub(pos)
end

local Proc = {}
Proc.__index = Proc

--- Start a server process.
-- @tparam table o `command` (string), `args` (list), `env` (table, added
--   to the short inherited list), `cwd`, `name` (for logs), `sandbox` (a
--   lash.sandbox object: the server runs inside it, through
--   sandbox:spawn, with the sandbox's environment plus `env` and none of
--   lash's, `cwd` relative to its workdir), `protocol` (lash.mcp.rpc's
--   MCP, the default, or ACP: the words of errors and logs)
function M.spawn(o)
  local argv = { o.command }
  for _, a in ipairs(o.args or {}) do argv[#argv + 1] = a end
  local p
  if o.sandbox then
    p = o.sandbox:spawn(argv, { cwd = o.cwd, env = o.env })
  else
    local env = {}
    for _, k in ipairs(INHERITED) do env[k] = os.getenv(k) end
    for k, v in pairs(o.env or {}) do env[k] = v end
    p = runtime.proc.spawn { argv = argv, env = env, cwd = o.cwd, stderr = "pipe" }
  end
  local proto = o.protocol or { kind = "mcp", peer = "MCP server" }
  local self = setmetatable({ p = p, name = o.name or o.command, buf = "", lines = {}, stderr = {},
                              closed = false, kind = proto.kind, peer = proto.peer,
                              jailed = o.sandbox ~= nil }, Proc)
  self.err_task = runtime.spawn(function()
    local ebuf = ""
    while true do
      local ok, chunk = pcall(p.read, p, "stderr")
      if not ok or not chunk then break end
      local ls
      ls, ebuf = lines_of(ebuf, chunk)
      if #ebuf > 65536 then ebuf = ebuf:sub(-65536) end
      for _, l in ipairs(ls) do
        runtime.log("info", self.kind .. " " .. self.name .. ": " .. l)
        local s = self.stderr
        s[#s + 1] = l
        if #s > STDERR_KEEP then table.remove(s, 1) end
      end
    end
  end)
  return self
end

function Proc:send(msg)
  if self.closed then error(runtime.error(self.kind, "the stdio transport is closed", { code = "closed" }), 0) end
  local ok, err = self.p:write(json.encode(msg) .. "\n")
  if not ok then
    error(runtime.error(self.kind, "cannot write to " .. self.peer .. " '" .. self.name .. "': " .. tostring(err)
      .. (self:describe_exit() and (" (" .. self:describe_exit() .. ")") or ""), { code = "closed" }), 0)
  end
end

function Proc:receive()
  while true do
    if #self.lines > 0 then
      local line = table.remove(self.lines, 1)
      if line:match("%S") then
        local msg, err = json.try_decode(line)
        if msg ~= nil then return msg end
        if self.not_json then return setmetatable({ message = tostring(err) }, self.not_json) end
        -- a server that prints to stdout breaks the protocol; say so, go on
        runtime.log("warn", self.kind .. " " .. self.name .. ": ignoring a line on stdout that is not JSON ("
          .. tostring(err) .. "): " .. line:sub(1, 200))
      end
    else
      local chunk, rerr = self.p:read()
      if chunk == nil then
        if rerr then runtime.log("warn", self.kind .. " " .. self.name .. ": " .. tostring(rerr)) end
        return nil
      end
      local ls
      ls, self.buf = lines_of(self.buf, chunk)
      for _, l in ipairs(ls) do self.lines[#self.lines + 1] = l end
      if #self.buf > MAX_LINE then
        error(runtime.error(self.kind, self.peer .. " '" .. self.name .. "' sent a line over "
          .. MAX_LINE .. " bytes"), 0)
      end
    end
  end
end

--- Why the process went away: exit status and its last stderr lines.
function Proc:describe_exit()
  local p = self.p
  -- stdout closes a moment before the exit is reaped: give it that moment
  local L = runtime
  local deadline = L.now() + 1
  while p:running() and L.now() < deadline do
    if not pcall(L.sleep, 0.01) then break end
  end
  if p:running() then
    if #self.stderr > 0 then return "its last stderr: " .. table.concat(self.stderr, " | ") end
    return nil
  end
  local code, sig = p:wait()
  local s = code and ("it exited with status " .. code) or ("it was killed by signal " .. tostring(sig))
  if #self.stderr > 0 then s = s .. "; its last stderr: " .. table.concat(self.stderr, " | ") end
  -- a jailed server's program under a tree the jail masks: say so
  local missing = self.jailed and table.concat(self.stderr, "\n"):match("execvp (%S+): No such file")
  local note = missing and require("lash.sandbox_masked").note(missing)
  if note then s = s .. ". " .. note end
  return s
end

--- Close stdin, give the server a moment to exit, then SIGTERM, then
-- SIGKILL (with its process group); always reaps it.
function Proc:close()
  if self.closed then return end
  self.closed = true
  local L = runtime
  local p = self.p
  pcall(p.close_stdin, p)
  local function wait_for(seconds)
    local deadline = L.now() + seconds
    while p:running() and L.now() < deadline do
      if not pcall(L.sleep, 0.02) then break end
    end
    return not p:running()
  end
  if not wait_for(2) then
    p:kill(15)
    wait_for(2)
  end
  p:close()
  if self.err_task then self.err_task:cancel() end
end

---------------------------------------------------------------------------
-- Our own stdin/stdout, for `lash mcp serve`. Reads use lash.proc's
-- machinery on fd 0 through a `cat`-free path: the C host gives no async
-- stdin, so a tiny child relays it (one process, no shell).

local Self = {}
Self.__index = Self

--- A transport over this process's stdin and stdout.
-- @param[opt] protocol as for `spawn` (who is on the other end: "MCP
--   host", "ACP client")
function M.stdio_self(protocol)
  -- `cat` relays our stdin to a pipe the loop can wait on; we write
  -- stdout directly (blocking writes are fine: the host reads them).
  local p = runtime.proc.spawn { argv = { "cat" }, stderr = "inherit", stdin = "inherit" }
  local proto = protocol or { kind = "mcp", peer = "MCP host" }
  -- a peer that sends what is not JSON is told so (JSON-RPC's Parse error)
  -- where the protocol asks for it
  return setmetatable({ p = p, buf = "", lines = {}, closed = false, name = "stdin", kind = proto.kind,
                        peer = proto.peer, not_json = proto.not_json }, Self)
end

function Self:send(msg)
  io.stdout:write(json.encode(msg), "\n")
  io.stdout:flush()
end

Self.receive = Proc.receive

function Self:close()
  if self.closed then return end
  self.closed = true
  self.p:close()
end

return M
