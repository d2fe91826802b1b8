--- The MCP servers of the user's config (`mcp_servers` in config.lua) as
-- toolsets every `lash run` and `lash chat` offers, as Claude Code's and
-- Codex's configured servers join every session. lash.config checks the
-- entries; this module only turns them into lash.mcp toolsets, named by
-- their config key, in a stable (sorted) order.
-- @module lash.cli.config_servers
local config = require "lash.config"
local runtime = require "lash.runtime"

local M = {}

-- A configured server that cannot start (not installed, no network for
-- npx) is said once on stderr and left out, the run going on without its
-- tools, as Claude Code and Codex go on without a failed server: one broken
-- entry must not stop every run. A spec's own servers stay strict.
local function optional(ts, name)
  local wrapper = { name = ts.name }
  function wrapper:for_run(ctx)
    local inner = ts:for_run(ctx)
    local inst = { name = inner.name, failed = false }
    function inst:open(c)
      local ok, err = pcall(inner.open, inner, c)
      if ok then return end
      if runtime.is_error(err, "cancelled") then error(err, 0) end
      self.failed = true
      io.stderr:write("lash: warning: the config's MCP server '", name, "' (", config.path() or "config.lua",
        ", mcp_servers.", name, ") did not start, so this run goes on without its tools: ",
        tostring(type(err) == "table" and err.message or err), "\n")
    end
    function inst:get_tools(c)
      if self.failed then return {} end
      return inner:get_tools(c)
    end
    function inst:close(c, e)
      if not self.failed then return inner:close(c, e) end
    end
    return inst
  end
  function wrapper:get_tools() return {} end
  return wrapper
end

--- The config's servers as toolsets (an empty list without any).
-- @treturn table a list of lash.mcp toolsets
function M.toolsets()
  local servers = (config.get() or {}).mcp_servers or {}
  local names = {}
  for name in pairs(servers) do names[#names + 1] = name end
  if #names == 0 then return {} end
  table.sort(names)
  local mcp = require "lash.mcp"
  local out = {}
  for i, name in ipairs(names) do
    local s = servers[name]
    if s.url then
      out[i] = optional(mcp.http { name = name, url = s.url }, name)
    else
      out[i] = optional(mcp.stdio { name = name, command = s.command[1],
                                    args = table.move(s.command, 2, #s.command, 1, {}), env = s.env, cwd = s.cwd },
                        name)
    end
  end
  return out
end

return M
