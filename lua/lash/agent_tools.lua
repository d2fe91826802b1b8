--- The tools an agent offers, known before a run: each source (the agent's
-- own tools, each toolset, each capability's toolsets) with the tools it
-- lists for a context like a run's, or none yet (an MCP server lists its
-- tools once connected). Spec loading uses it to refuse two sources that
-- define the same tool name before anything runs, naming both sources and
-- the fix in the spec's own language; `lash run --describe` and `lash
-- chat`'s /tools list the tools with it.
-- @module lash.agent_tools
local capability = require "lash.capability"

local M = {}

-- What a capability or toolset is called in messages.
local function kind_of(c)
  local mt = getmetatable(c)
  return tostring(c.name or (mt and mt.__name) or "capability")
end

local function listed(ts, ctx)
  local ok, inst = pcall(ts.for_run, ts, ctx)
  if not ok or inst == nil then inst = ts end
  local lok, tools = pcall(inst.get_tools, inst, ctx)
  if not lok or type(tools) ~= "table" then return nil, tostring(inst.name or ts.name or "toolset") end
  return tools
end

--- The sources of an agent's tools.
-- @param agent a lash.agent
-- @tparam[opt] table o `ctx` (a context like a run's; one is made),
--   `labels` (a label per capability index, e.g. the spec's type names)
-- @treturn {table,...} `{label=, tools=list|nil, pending=name}` in the
--   order a run offers them
function M.sources(agent, o)
  o = o or {}
  local ctx = o.ctx or { deps = agent.deps, run = { agent = agent.name }, values = agent.values or {},
                         messages = {}, usage = {}, agent = agent }
  local out = {}
  local function add(label, ts)
    local tools, pending = listed(ts, ctx)
    out[#out + 1] = { label = label, tools = tools, pending = pending }
  end
  for i, ts in ipairs(agent.own_toolsets or {}) do
    add(i == 1 and "the agent's tools" or ("toolsets[" .. (i - 1) .. "] (" .. tostring(ts.name) .. ")"), ts)
  end
  for i, c in ipairs(agent.capabilities or {}) do
    local label = "capabilities[" .. i .. "] (" .. ((o.labels and o.labels[i]) or kind_of(c)) .. ")"
    if capability.is_capability(c) then
      -- whatever cannot be listed now (it fails, or a spec's function ran
      -- out of its budget) is listed by the run, which checks again
      local ok, sets = pcall(function() return c:for_run(ctx):get_toolsets() end)
      if ok and type(sets) == "table" then
        for _, ts in ipairs(sets) do add(label, ts) end
      else
        out[#out + 1] = { label = label, pending = label }
      end
    else
      add(label, c)
    end
  end
  return out
end

--- Tool names two sources both define.
-- @treturn {table,...} `{first=label, second=label, names={...}}`, one per
--   pair of sources, in order
function M.conflicts(sources)
  local owner, pairs_of, order = {}, {}, {}
  for _, s in ipairs(sources) do
    for _, t in ipairs(s.tools or {}) do
      local first = owner[t.name]
      if first and first ~= s.label then
        local key = first .. "\0" .. s.label
        if not pairs_of[key] then
          pairs_of[key] = { first = first, second = s.label, names = {} }
          order[#order + 1] = pairs_of[key]
        end
        local names = pairs_of[key].names
        names[#names + 1] = t.name
      elseif not first then
        owner[t.name] = s.label
      end
    end
  end
  return order
end

--- The message for conflicts, with the fix in the spec's language.
-- @tparam table conflicts from `conflicts`
-- @tparam string format "lua", "yaml" or "json"
function M.conflict_message(conflicts, format)
  local lines = {}
  for _, c in ipairs(conflicts) do
    local quoted = {}
    for i, n in ipairs(c.names) do quoted[i] = "'" .. n .. "'" end
    lines[#lines + 1] = c.second .. " defines " .. (#quoted == 1 and "a tool" or "tools") .. " that "
      .. c.first .. " already defines: " .. table.concat(quoted, ", ")
  end
  local fix
  if format == "yaml" then
    fix = "Give one of them a prefix: `- PrefixTools: {prefix: box, capability: {LocalSandbox: {}}}` (an MCP "
      .. "server takes `tool_prefix: box`), or drop one"
  elseif format == "json" then
    fix = "Give one of them a prefix: {\"PrefixTools\": {\"prefix\": \"box\", \"capability\": {\"LocalSandbox\": "
      .. "{}}}} (an MCP server takes \"tool_prefix\": \"box\"), or drop one"
  else
    fix = "Give one of them a prefix (lash.prefix_tools { prefix = \"box\", capability = ... }), rename the "
      .. "tool, or drop one"
  end
  return "tool names conflict: " .. table.concat(lines, "; ") .. ". " .. fix .. "."
end

return M
