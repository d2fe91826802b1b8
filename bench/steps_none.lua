-- steps_none.lua: the "lash unsandboxed" agent of bench_steps.sh. One tool,
-- run_command, runs `sh -c command` in a local sandbox with isolation
-- "none" (a plain process group in the workspace, no jail), made when the
-- run opens its tools and destroyed when it ends.
local lash = require "lash"

local shell = lash.capability { name = "Shell", for_run = function()
  local sb
  return lash.capability { name = "Shell",
    open = function()
      -- LASH_BENCH_NO_DISK: without the default disk quota (bench_steps.sh's
      -- "nodisk" row: what the quota's filesystem costs a run)
      local limits = os.getenv("LASH_BENCH_NO_DISK") and { disk = false } or nil
      sb = lash.sandbox.create { backend = "local", isolation = "none", network = "on", timeout = 600,
                                 limits = limits }
    end,
    close = function() if sb then sb:close() end end,
    tools = { lash.tool { name = "run_command", description = "Run a shell command.",
      parameters = { type = "object", properties = { command = { type = "string" } }, required = { "command" } },
      handler = function(_, args)
        local r = sb:exec({ "sh", "-c", args.command })
        return r.stdout .. r.stderr
      end } } }
end }

return lash.agent { model = "openai:bench", instructions = "Run the commands you are asked to.",
                    capabilities = { shell } }
