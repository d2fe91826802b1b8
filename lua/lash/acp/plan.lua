--- The `update_plan` tool: the model keeps a short plan of its work, and
-- each update reaches the run's events as `plan {entries = {{content,
-- status, priority}}}` (an ACP client shows it as the agent's plan).
-- `lash acp` offers it in every session (unless --no-plan); a spec may
-- add it anywhere with `lash.acp.plan_toolset()`.
-- @module lash.acp.plan
local json = require "lash.json"
local toolset = require "lash.toolset"

local M = {}

local DESCRIPTION = "Keep a short plan of the task: call it with every step (a few words each) and "
  .. "its status whenever the plan or a step's status changes. At most one step is in_progress. "
  .. "Skip it for simple one-step tasks."

local PARAMETERS = {
  type = "object",
  properties = {
    plan = {
      type = "array", minItems = 1, maxItems = 50,
      items = {
        type = "object",
        properties = {
          step = { type = "string", minLength = 1, maxLength = 500 },
          status = { type = "string", enum = { "pending", "in_progress", "completed" } },
          priority = { type = "string", enum = { "high", "medium", "low" } },
        },
        required = { "step", "status" },
        additionalProperties = false,
      },
    },
  },
  required = { "plan" },
  additionalProperties = false,
}

local function handler(ctx, args)
  local entries = json.array()
  local doing = 0
  for i, s in ipairs(args.plan) do
    if s.status == "in_progress" then doing = doing + 1 end
    entries[i] = { content = s.step, status = s.status, priority = s.priority or "medium" }
  end
  if doing > 1 then
    require("lash.tool").retry("at most one step may be in_progress; " .. doing .. " are")
  end
  if ctx.emit then ctx.emit { type = "plan", entries = entries } end
  return "Plan updated."
end

--- A toolset with the update_plan tool.
function M.toolset()
  return toolset.new { name = "plan", tools = {
    { name = "update_plan", description = DESCRIPTION, parameters = PARAMETERS, handler = handler },
  } }
end

return M
