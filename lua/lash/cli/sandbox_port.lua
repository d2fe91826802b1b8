--- `lash sandbox port ID PORT`: publish a port of a sandbox on the host
-- until interrupted. It prints the host address (`127.0.0.1:41234`) on a
-- line of its own, then relays every connection made to it to PORT inside
-- the sandbox (lash.sandbox_ports), where a server the sandbox runs
-- listens (a background command, a run's start_command).
-- @module lash.cli.sandbox_port
local runtime = require "lash.runtime"

local M = {}

M.usage = "port ID PORT [--host-port N] [--bind ADDR]   relay a host port to PORT in the sandbox until "
  .. "interrupted; prints the host address"

local function port_number(cli, h, s, what)
  local n = tonumber(s)
  if not n or math.type(n) ~= "integer" or n < 0 or n > 65535 then
    h.usage(cli, what .. " must be a TCP port number, got '" .. tostring(s) .. "'")
  end
  return n
end

--- Run `lash sandbox port`. `parse`, `open` and `usage` are the sandbox
-- command's own helpers.
function M.run(args, cli, h)
  local opts, pos = h.parse(cli, args, h.with_common { ["host-port"] = "value", bind = "value" })
  if #pos ~= 2 then h.usage(cli, "port needs ID and PORT (the port a server listens on inside the sandbox)") end
  local port = port_number(cli, h, pos[2], "PORT")
  if port == 0 then h.usage(cli, "PORT must be 1-65535") end
  local host_port = opts["host-port"] and port_number(cli, h, opts["host-port"], "--host-port") or 0
  local sb = h.open({ pos[1] }, opts, cli, "port")
  if opts.backend == "modal" then
    -- Modal tunnels the ports named at create; this prints where one is
    local ok, tunnels = pcall(sb.tunnels, sb)
    sb:close()
    if not ok then error(tunnels, 0) end
    for _, t in ipairs(tunnels) do
      if t.port == port then
        cli.out(t.url, "\n")
        return cli.EXIT.ok
      end
    end
    cli.err("lash sandbox port: port ", port, " of ", pos[1], " has no tunnel: Modal tunnels only the ports "
      .. "a sandbox is created with (lash sandbox create --backend modal --publish ", port, ")\n")
    return cli.EXIT.sandbox
  end
  local ok, pub = pcall(sb.publish, sb, port, { host = opts.bind, host_port = host_port })
  if not ok then
    sb:close()
    error(pub, 0)
  end
  cli.out(pub.address, "\n")
  io.stdout:flush()
  cli.err("lash sandbox port: ", pub.address, " -> port ", port, " in ", pos[1], " (Ctrl-C stops)\n")
  -- until a signal cancels this task; then the relays end with the handle
  local waited, err = pcall(function() pub.task:join() end)
  pub:close()
  sb:close()
  if not waited and not runtime.is_error(err, "cancelled") then error(err, 0) end
  return cli.EXIT.ok
end

return M
