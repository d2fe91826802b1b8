--- lash: an embeddable, Lua-scriptable agent harness.
-- `local lash = require "lash"` gives the whole public API. The C core
-- (event loop, tasks, HTTP, output shaping, sandboxes) comes from
-- `lash.core`; the agent machinery is Lua, loaded on first use.
-- @module lash

local runtime = require "lash.runtime"

-- The runtime's functions, flat (lash.spawn, lash.sleep, lash.now, ...), and
-- the C submodules as tables (lash.output, lash.http, lash.sandbox, ...):
-- a copy, so that the facade's lazily filled names stay out of lash.runtime.
local lash = {}
for name, value in pairs(runtime) do
  lash[name] = value
end

-- Names served by Lua modules, loaded on first use so that `require
-- "lash"` stays cheap: name = { module, field } (field nil: the module).
local lazy = {
  agent = { "lash.agent", "new" },
  tool = { "lash.tool", "new" },
  retry = { "lash.tool", "retry" },
  toolset = { "lash.toolset", "new" },
  capability = { "lash.capability", "new" },
  prefix_tools = { "lash.capability", "prefix_tools" },
  filter_tools = { "lash.capability", "filter_tools" },
  rename_tool = { "lash.capability", "rename_tool" },
  wrap_tools = { "lash.capability", "wrap_tools" },
  handoff = { "lash.handoff", "new" },
  subagents = { "lash.subagent", "capability" },
  code_mode = { "lash.codemode", "new" },
  render = { "lash.template", "render" },
  render_fields = { "lash.capability", "render_fields" },
  script_model = { "lash.models.func", "script" },
  models = { "lash.models" },
  json = { "lash.json" },
  schema = { "lash.schema" },
  sandbox_capability = { "lash.capabilities.sandbox", "new" },
  register_capability = { "lash.spec", "register_capability" },
  load_spec = { "lash.spec", "load" },
  load_spec_string = { "lash.spec", "load_string" },
  mcp = { "lash.mcp" },
  acp = { "lash.acp" },
  sessions = { "lash.sessions" },
  trace = { "lash.trace" },
}

return setmetatable(lash, {
  __index = function(t, name)
    local where = lazy[name]
    if not where then
      return nil
    end
    local mod = require(where[1])
    local value = mod
    if where[2] then
      value = mod[where[2]]
    end
    rawset(t, name, value)
    return value
  end,
})
