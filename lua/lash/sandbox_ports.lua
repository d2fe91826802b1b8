--- Published ports: a server running in a sandbox reached from the host.
-- `sb:publish(port[, opts])` listens on a loopback port of the host and
-- joins each connection to one made to `port` inside the sandbox
-- (`sb:connect(port)`, the backend's), for as long as the returned handle
-- is open. Bytes are relayed both ways in C on the event loop (memory
-- fixed per connection); nothing is interpreted, so HTTP, WebSockets and
-- any TCP protocol pass.
--
--   local p = sb:publish(8000)            -- or { host_port = 8080 }
--   print(p.address)                       -- "127.0.0.1:41234"
--   ... curl http://127.0.0.1:41234/ ...
--   p:close()                              -- also <close> and at exit
--
-- A connection the sandbox refuses (nothing listens on the port yet) is
-- closed at once; the handle keeps listening, and `p.last_error` says why.
-- @module lash.sandbox_ports
local runtime = require "lash.runtime"

local M = {}

local Published = {}
Published.__index = Published

--- Stop listening and end every connection (idempotent).
function Published:close()
  if self.closed then return end
  self.closed = true
  if self.task then self.task:cancel() end
  self.fw:close()
end
Published.__close = Published.close

--- {connections =, open =, bytes =} so far.
function Published:stats()
  return self.fw:stats()
end

local function check_port(v, what)
  if math.type(v) ~= "integer" or v < 1 or v > 65535 then
    error(what .. " must be a TCP port (an integer 1-65535), got " .. tostring(v), 3)
  end
end

--- Publish `port` of sandbox `sb` on the host.
-- @tparam userdata sb an open sandbox
-- @tparam integer port the port a server listens on inside the sandbox
-- @tparam[opt] table opts `host` (an IPv4 address of the host to listen
--   on, default "127.0.0.1"), `host_port` (default 0: any free one)
-- @treturn table `{port, host, host_port, address, close, stats,
--   last_error}`
function M.publish(sb, port, opts)
  check_port(port, "port")
  opts = opts or {}
  if type(opts) ~= "table" then error("publish options must be a table, got " .. type(opts), 2) end
  for k in pairs(opts) do
    if k ~= "host" and k ~= "host_port" then
      error("publish: unknown option '" .. tostring(k) .. "' (known: host, host_port)", 2)
    end
  end
  if opts.host_port ~= nil and opts.host_port ~= 0 then check_port(opts.host_port, "host_port") end
  local host = opts.host or "127.0.0.1"
  local fw = runtime.ports.listen { host = host, port = opts.host_port or 0 }
  local self = setmetatable({ fw = fw, port = port, host = host, host_port = fw:port() }, Published)
  self.address = host .. ":" .. self.host_port
  self.task = runtime.spawn(function()
    while true do
      local c = fw:accept()
      if not c then return end
      local ok, up = pcall(sb.connect, sb, port)
      if ok then
        fw:relay(c, up)
      else
        c:close()
        if runtime.is_error(up, "cancelled") then error(up, 0) end
        self.last_error = type(up) == "table" and up.message or tostring(up)
        runtime.log("warning", "published port " .. self.address .. " -> " .. port .. ": " .. self.last_error)
      end
    end
  end)
  return self
end

return M
