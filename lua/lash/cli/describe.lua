--- lash.cli.describe: what a loaded agent runs with, for `lash run SPEC
-- --describe` (a readable summary on a terminal, JSON with --json or in a
-- pipe) and `lash chat`'s /tools: its model, instructions, tools (by
-- source, before any run), capabilities with the options that matter
-- (sandbox_timeout as the spec set it, not the default), limits, and any
-- two sources that define the same tool name.
-- @module lash.cli.describe
local json = require "lash.json"
local agent_tools = require "lash.agent_tools"

local M = {}

local function one_line(s, width)
  return require("lash.cli.printer").one_line(s, width)
end

-- The first line of a tool's description (run_command's is XML-wrapped,
-- as the reference renders it).
local function first_line(d)
  return (tostring(d or ""):gsub("^<summary>", "")):match("^[^\n]*")
end

--- The tools as lines of text: name and the first line of its
-- description; a source that lists its tools only once connected says so.
-- @tparam[opt] table o as for lash.agent_tools.sources
-- @treturn string
function M.tools_text(agent, o)
  local lines = {}
  for _, s in ipairs(agent_tools.sources(agent, o)) do
    if not s.tools then
      lines[#lines + 1] = string.format("  (%s: its tools are listed once it is connected, in a run)", s.pending)
    end
    for _, t in ipairs(s.tools or {}) do
      lines[#lines + 1] = string.format("  %-20s %s", t.name, one_line(first_line(t.description), 70))
    end
  end
  if #lines == 0 then return "no tools" end
  return table.concat(lines, "\n")
end

-- A JSON-able copy of an option value (functions and objects named).
local function plain(v, depth)
  local t = type(v)
  if t == "string" or t == "number" or t == "boolean" then return v end
  if t == "table" and getmetatable(v) == nil and (depth or 0) < 4 then
    local out = {}
    for k, x in pairs(v) do out[k] = plain(x, (depth or 0) + 1) end
    return out
  end
  return "(" .. t .. ")"
end

local SANDBOX_SHOWN = { "backend", "sandbox_timeout", "default_command_timeout", "max_command_timeout", "workdir",
                        "network", "image", "rootfs", "attach_to", "sandbox_id" }

local function capability_entry(c, label)
  local sandbox = require "lash.capabilities.sandbox"
  local e = { type = label }
  if sandbox.is_capability(c) then
    e.mode, e.backend = c.mode, c.backend
    e.set = {}
    for k, v in pairs(c.given or {}) do e.set[k] = plain(v) end
    e.effective = {}
    for _, k in ipairs(SANDBOX_SHOWN) do
      if c.opts[k] ~= nil then e.effective[k] = plain(c.opts[k]) end
    end
    -- what one command may take: the ceiling as enforced
    e.effective.max_command_timeout = c.ceiling
  end
  return e
end

--- The summary: agent:describe() with the model the run would use, the
-- instructions, the tools by source, the capabilities and the conflicts.
-- @tparam table o `model` (the model the run uses, when not the spec's),
--   `labels` (the spec's names of its capabilities), `format` (of the spec)
-- @treturn table
function M.summary(agent, o)
  o = o or {}
  local d = agent:describe()
  if o.model then d.model = require("lash.agent").model_label(o.model) end
  d.instructions = json.array()
  for i, piece in ipairs(agent.instructions or {}) do
    d.instructions[i] = type(piece) == "string" and piece or "(a function, rendered per run)"
  end
  local sources = agent_tools.sources(agent, { labels = o.labels })
  d.tools, d.pending = json.array(), json.array()
  for _, s in ipairs(sources) do
    if not s.tools then d.pending[#d.pending + 1] = s.pending end
    for _, t in ipairs(s.tools or {}) do
      d.tools[#d.tools + 1] = { name = t.name, source = s.label, description = first_line(t.description) }
    end
  end
  d.capabilities = json.array()
  for i, c in ipairs(agent.capabilities or {}) do
    d.capabilities[i] = capability_entry(c, (o.labels and o.labels[i]) or tostring(c.name or "capability"))
  end
  local conflicts = agent_tools.conflicts(sources)
  d.conflicts = json.array()
  if #conflicts > 0 then d.conflicts[1] = agent_tools.conflict_message(conflicts, o.format or "lua") end
  return d
end

local function kv(t, keys)
  local parts = {}
  for _, k in ipairs(keys) do
    if t[k] ~= nil then
      local v = t[k]
      parts[#parts + 1] = k .. " " .. (type(v) == "table" and (json.try_encode_canonical(v) or "?") or tostring(v))
    end
  end
  return table.concat(parts, ", ")
end

--- The summary as text for a terminal.
-- @tparam table d from `summary`
-- @treturn string
function M.text(d)
  local out = {}
  local function add(s) out[#out + 1] = s end
  add("agent         " .. tostring(d.name))
  add("model         " .. tostring(d.model))
  if #d.instructions == 0 then
    add("instructions  (none)")
  else
    add("instructions")
    for _, piece in ipairs(d.instructions) do
      local n = 0
      for line in (piece .. "\n"):gmatch("([^\n]*)\n") do
        n = n + 1
        if n <= 4 then add("  " .. one_line(line, 96)) end
      end
      if n > 4 then add("  (" .. (n - 4) .. " more lines)") end
    end
  end
  if #d.capabilities > 0 then
    add("capabilities")
    for i, c in ipairs(d.capabilities) do
      local line = "  " .. i .. ". " .. c.type
      if c.effective then
        line = line .. ": " .. c.mode .. ", " .. kv(c.effective, SANDBOX_SHOWN)
        local set = {}
        for k in pairs(c.set) do set[#set + 1] = k end
        table.sort(set)
        if #set > 0 then line = line .. " (set by the spec: " .. table.concat(set, ", ") .. ")" end
      end
      add(line)
    end
  end
  add("tools")
  if #d.tools == 0 and #d.pending == 0 then add("  (none)") end
  for _, t in ipairs(d.tools) do add(string.format("  %-20s %s", t.name, one_line(t.description, 70))) end
  for _, p in ipairs(d.pending) do add("  (" .. p .. ": its tools are listed once it is connected, in a run)") end
  add("limits        " .. kv(d.limits, { "max_steps", "max_tool_calls", "max_calls_per_turn", "max_concurrent_tools",
                                          "max_input_tokens", "max_output_tokens", "max_total_tokens" }))
  add("retries       " .. tostring(d.retries) .. (d.tool_timeout and (", tool_timeout " .. d.tool_timeout) or ""))
  for _, c in ipairs(d.conflicts) do add("conflict      " .. c) end
  return table.concat(out, "\n")
end

return M
