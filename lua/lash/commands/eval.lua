--- `lash eval 'lua code'`: run Lua code with `lash` in scope and print
-- what it returns. Waiting calls (lash.sleep, HTTP, ...) work as in any
-- script; tasks spawned by the code are run to completion before exit.
-- @module lash.commands.eval

local M = {
  summary = "run Lua code with the lash API in scope",
  usage = "usage: lash eval 'lua code' [args...]\n\n"
    .. "The code runs with `lash` in scope (and `...` = the extra args); its\n"
    .. "return values are printed. Tasks it spawns run to completion first.",
}

function M.main(args, cli)
  local code = args[1]
  if not code then
    cli.usage_error("missing the code to run")
  end
  local lash = require "lash"
  local env = setmetatable({ lash = lash }, { __index = _G })
  local chunk, err = load(code, "=(eval)", "t", env)
  if not chunk then
    cli.usage_error(err)
  end
  local results = table.pack(chunk(table.unpack(args, 2)))
  lash.run()
  for i = 1, results.n do
    local v = results[i]
    -- Plain tables print as JSON; one that cannot be encoded (a function
    -- inside, a cycle) prints as Lua would.
    if type(v) == "table" and getmetatable(v) == nil then
      local ok, s = pcall(require("lash.json").encode, v)
      if ok then v = s end
    end
    cli.out(tostring(v), i < results.n and "\t" or "\n")
  end
  return 0
end

return M
