--- lash.runtime: the C core's functions as one flat table, for the Lua
-- modules below the facade. `lash.runtime.spawn`, `.sleep`, `.now`,
-- `.error`, `.is_error`, `.log`, ... are `lash.core.task`'s; `.http`,
-- `.sandbox`, `.output`, `.sys`, ... are `lash.core`'s C submodules;
-- `.core` and `.version` as in the facade. The facade (`require "lash"`)
-- is this table plus the Lua-served names; a module under it requires this
-- one instead, so that every require points down.
-- @module lash.runtime
local core = require "lash.core"

local M = {
  version = core.version,
  core = core,
}

for name, fn in pairs(core.task) do
  M[name] = fn
end

-- core.json is the codec under lash.json (the Lua module), not a name here
for name, mod in pairs(core) do
  if type(mod) == "table" and name ~= "task" and name ~= "json" then
    M[name] = mod
  end
end

return M
