--- lash.defaults: every default of the Lua side in one table, so that what
-- `agent:describe()` and `lash run --describe` show is what the code uses.
-- Each module reads its defaults here instead of writing a number:
--   agent:   lash.agent (retries, limits)
--   model:   lash.models.provider (retries, backoff, request timeout)
--   sandbox: lash.capabilities.sandbox (lifetime, command timeout, output
--            and read caps); the C sandbox core owns the defaults it
--            applies itself (see lash.sandbox.defaults where it exists)
--   cli:     lash.cli (the shutdown bound)
-- Read-only by convention: copy before changing.
-- @module lash.defaults
local core = require "lash.core"

-- The sandbox core's own defaults, where this build of the C core exposes
-- them (lash.sandbox.defaults); else the values it applies.
local sb = type(core.sandbox) == "table" and type(core.sandbox.defaults) == "table" and core.sandbox.defaults or {}

local M = {
  agent = {
    retries = 1,               -- consecutive retries a tool gets
    max_steps = 50,            -- model requests per run
    -- what one model turn can start: a model asking for 10,000 calls gets
    -- 64 run, at most 8 at a time, and a result for each of the others
    -- telling it the cap
    max_calls_per_turn = 64,
    max_concurrent_tools = 8,
    max_depth = 3,             -- levels of sub-agents below a run (lash.subagent)
  },
  model = {
    max_retries = 2,           -- retried HTTP attempts per model request
    retry_delay = 0.5,         -- first backoff, seconds (doubling)
    max_backoff = 8,           -- the backoff's ceiling, seconds
    max_retry_delay = 60,      -- the most a retry-after is waited, seconds
    timeout = 600,             -- one model request, seconds
  },
  sandbox = {
    backend = "local", app_name = "lash", create_app_if_missing = true,
    sandbox_timeout = sb.lifetime or 300,              -- the sandbox's lifetime, seconds
    default_command_timeout = sb.exec_timeout or 60,   -- a command without its own timeout
    max_output_bytes = 51200,  -- of a command's output shown to the model (tails kept)
    max_output_lines = 2000,
    max_read_bytes = sb.max_read_bytes or 5242880,     -- read_file
    -- the reuse modes cannot see the sandbox's lifetime: commands are
    -- capped at this unless max_command_timeout says otherwise
    reuse_command_ceiling = 300,
  },
  cli = {
    shutdown_timeout = 10,     -- seconds the cleanup may take after a signal
  },
  acp = {                      -- lash acp (lash.acp.server)
    mode = "ask",              -- ask before calls that may change something
    permission_timeout = 300,  -- seconds a permission request waits for the editor; then denied
    max_prompt_bytes = 8 * 1024 * 1024,  -- of one session/prompt's text and data
  },
}

--- A deep copy of the table (for showing or changing).
-- @treturn table
function M.copy()
  local function copy(t)
    local out = {}
    for k, v in pairs(t) do out[k] = type(v) == "table" and copy(v) or v end
    return out
  end
  local out = copy(M)
  out.copy = nil
  return out
end

return M
