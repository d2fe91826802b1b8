--- Handoffs: an agent's `handoffs = {other_agent, lash.handoff{...}}` give
-- its model `transfer_to_<name>` tools; calling one makes the run go on
-- with that agent (its instructions, tools, model, output schema) and the
-- same history, as the OpenAI Agents SDK's handoffs do.
--
-- A turn that calls several handoffs takes the first (in the model's
-- order); the others get "Multiple handoffs detected, ignoring this one."
-- The other tool calls of that turn run as usual. The accepted call's
-- result is `{"assistant": "<agent name>"}`. `limits.max_steps` counts
-- every agent's requests. The new agent's sandbox capability works in the
-- run's sandbox (as a sub-agent sharing it does), and its hooks and
-- capabilities replace the previous agent's from its first request.
--
-- `lash.handoff{agent =, tool_name =, tool_description =, on_handoff =,
-- parameters =, input_filter =, enabled =}`:
--   tool_name        default `transfer_to_<agent name>` (lower case,
--                    anything but letters, digits and '_' as '_')
--   tool_description default "Handoff to the <name> agent to handle the
--                    request. <its handoff_description>"
--   on_handoff(ctx, args)  called when the handoff is taken (args: the
--                    decoded arguments when `parameters` is given)
--   parameters       a JSON Schema object for arguments the model passes
--   input_filter(messages, info) -> messages  what the new agent sees of
--                    the history before the handoff (e.g. without tool
--                    calls); its own later turns are not filtered. The
--                    history the run keeps (and saves) is not changed.
--   enabled          false, or a function(ctx, agent) -> boolean, hides it
-- @module lash.handoff
local json = require "lash.json"
local tool = require "lash.tool"
local schema = require "lash.schema"

local M = {}

local Handoff = {}
Handoff.__index = Handoff
Handoff.__name = "lash.handoff"

M.MULTIPLE = "Multiple handoffs detected, ignoring this one."

local FIELDS = { agent = true, tool_name = "string", tool_description = "string", on_handoff = "function",
                 parameters = "table", input_filter = "function", enabled = true }

-- A lash.agent (its toolsets and capabilities are what the run switches to).
local function is_agent_like(v)
  return type(v) == "table" and type(v.start) == "function" and type(v.own_toolsets) == "table"
end

--- The default tool name for an agent named `name`.
function M.default_tool_name(name)
  local s = ("transfer_to_" .. tostring(name)):lower():gsub("[^%w_]", "_")
  return s:sub(1, 64)
end

--- Make a handoff.
function M.new(def, level)
  level = (level or 1) + 1
  if type(def) ~= "table" then error("lash.handoff: expected a table, got " .. type(def), level) end
  tool.check_fields("lash.handoff", def, FIELDS, level)
  if not is_agent_like(def.agent) then error("lash.handoff: 'agent' must be an agent (lash.agent{...})", level) end
  if def.tool_name ~= nil and not tool.valid_name(def.tool_name) then
    error("lash.handoff: tool_name must be 1-64 characters of letters, digits, '_' or '-', got '"
      .. def.tool_name .. "'", level)
  end
  if def.parameters ~= nil then
    local ok, err = schema.check_object_schema(def.parameters, "parameters")
    if not ok then error("lash.handoff: " .. err, level) end
  end
  if def.enabled ~= nil and type(def.enabled) ~= "boolean" and type(def.enabled) ~= "function" then
    error("lash.handoff: enabled must be a boolean or a function(ctx, agent), got " .. type(def.enabled), level)
  end
  local h = {}
  for k, v in pairs(def) do h[k] = v end
  return setmetatable(h, Handoff)
end

function M.is_handoff(v)
  return getmetatable(v) == Handoff
end

--- Check an agent's `handoffs` list.
function M.check(who, list, level)
  if list == nil then return end
  if type(list) ~= "table" then error(who .. ": 'handoffs' must be a list of agents or handoffs", level + 1) end
  for i, h in ipairs(list) do
    if not M.is_handoff(h) and not is_agent_like(h) then
      error(who .. ": handoffs[" .. i .. "] must be an agent or a lash.handoff{...}, got " .. type(h), level + 1)
    end
  end
end

local function of(entry)
  if M.is_handoff(entry) then return entry end
  return setmetatable({ agent = entry }, Handoff)
end

--- The handoffs `agent` offers now, as tools for `run`. `take(h, ctx,
-- args)` records the handoff the model asked for and returns the call's
-- result text.
-- @treturn table list of lash.tool
function M.tools(agent, ctx, take)
  local out, seen = {}, {}
  for i, entry in ipairs(agent.handoffs or {}) do
    if not M.is_handoff(entry) and not is_agent_like(entry) then
      error(require("lash.runtime").error("config", "agent '" .. tostring(agent.name) .. "': handoffs[" .. i
        .. "] is not an agent or a lash.handoff"), 0)
    end
    local h = of(entry)
    local enabled = h.enabled
    if type(enabled) == "function" then enabled = enabled(ctx, h.agent) end
    if enabled ~= false then
      local name = rawget(h, "tool_name") or M.default_tool_name(h.agent.name)
      if not seen[name] then
        seen[name] = true
        local desc = rawget(h, "tool_description") or ("Handoff to the " .. tostring(h.agent.name)
          .. " agent to handle the request. " .. (h.agent.handoff_description or ""))
        out[#out + 1] = tool.new { name = name, description = desc, parameters = h.parameters,
          handler = function(cctx, args) return take(h, cctx, args) end, metadata = { lash_handoff = h } }
      end
    end
  end
  return out
end

--- The transfer message the accepted call returns.
function M.transfer_message(agent)
  return json.encode_canonical { assistant = tostring(agent.name) }
end

return M
