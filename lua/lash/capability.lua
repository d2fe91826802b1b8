--- Capabilities: a bundle of instructions and toolsets that can make a
-- fresh instance per run, and the composition helpers (`lash.prefix_tools`,
-- `lash.filter_tools`, `lash.rename_tool`, `lash.wrap_tools`) that take a
-- capability or a toolset and return the same kind.
--
-- The capability protocol (duck-typed; `lash.capability{...}` builds one):
--
--   cap.name                          label used in messages
--   cap:for_run(ctx) -> cap'          the instance for one run (default: cap)
--   cap:get_toolsets() -> {ts...}     its toolsets, in order
--   cap:get_instructions() -> list    strings ({{ }} templates) and
--                                     functions of ctx, possibly empty
--   cap:get_hooks() -> table|nil      (optional) lifecycle hooks, lash.hooks
--   cap:get_guardrails() -> table|nil (optional) lash.guardrails
--
-- Instruction templates of a capability see `tools`, which maps every name
-- a tool had inside the capability to the name finally exposed: under
-- `lash.prefix_tools{prefix="box", capability=c}`, `{{ tools.run_command }}`
-- renders as `box_run_command`, so default instructions stay true.
-- @module lash.capability
local tool = require "lash.tool"
local toolset = require "lash.toolset"
local options = require "lash.options"
local hooks = require "lash.hooks"
local guardrails = require "lash.guardrails"

local M = {}

local Capability = {}
Capability.__index = Capability
Capability.__name = "lash.capability"
M.Capability = Capability

local FIELDS = { name = "string", description = "string", instructions = true, tools = true,
                 toolsets = "table", open = "function", close = "function", for_run = "function",
                 hooks = "table", guardrails = "table" }

--- Raise `who: ...` unless `v` is nil, a string, a function(ctx) or a
-- list of them (the `instructions` field of agents and capabilities).
-- @int level the error level, as for `error`, of the function checking
function M.check_instructions(who, v, level)
  local t = type(v)
  if v == nil or t == "string" or t == "function" then return end
  if t == "table" then
    for i, x in ipairs(v) do
      if type(x) ~= "string" and type(x) ~= "function" then
        error(who .. ": instructions[" .. i .. "] must be a string or a function(ctx), got " .. type(x), level + 1)
      end
    end
    return
  end
  error(who .. ": 'instructions' must be a string, a function(ctx) or a list of them, got " .. t, level + 1)
end

--- Normalise instructions to a list of strings and functions.
function M.instruction_list(v)
  if v == nil then return {} end
  if type(v) == "table" then return v end
  return { v }
end

--- Make a capability.
-- @tparam table def `name`, `description`, `instructions` (string, function
--   of ctx, or a list), `tools` (list of tools; they form a toolset named
--   after the capability, with `open`/`close` as its hooks), `toolsets`
--   (more toolsets), `for_run(ctx)` (returns the capability, or a table in
--   the same shape, to use for one run), `hooks` (lifecycle hooks for the
--   runs it is part of, see lash.hooks), `guardrails` (lash.guardrails).
-- @treturn Capability
function M.new(def)
  if type(def) ~= "table" then error("lash.capability: expected a table, got " .. type(def), 2) end
  tool.check_fields("lash.capability", def, FIELDS, 2)
  local name = def.name or "capability"
  local who = "lash.capability '" .. name .. "'"
  M.check_instructions(who, def.instructions, 2)
  hooks.check(who, def.hooks, 2)
  guardrails.check(who, def.guardrails, 2)
  local sets = {}
  if def.tools ~= nil or def.open or def.close then
    sets[1] = toolset.new { name = name, tools = def.tools, open = def.open, close = def.close }
  end
  for i, ts in ipairs(def.toolsets or {}) do
    if not toolset.is_toolset(ts) then
      error(who .. ": toolsets[" .. i .. "] is not a toolset (make one with lash.toolset{...})", 2)
    end
    sets[#sets + 1] = ts
  end
  return setmetatable({ name = name, description = def.description,
                        instructions = M.instruction_list(def.instructions),
                        toolsets = sets, for_run_fn = def.for_run, hooks = def.hooks,
                        guardrails = def.guardrails }, Capability)
end

--- Is `v` a capability (anything that speaks the protocol)?
function M.is_capability(v)
  return type(v) == "table" and type(v.get_toolsets) == "function"
end

function Capability:for_run(ctx)
  if not self.for_run_fn then return self end
  local inst = self.for_run_fn(ctx)
  if inst == nil then return self end
  if M.is_capability(inst) then return inst end
  if type(inst) == "table" then return M.new(inst) end
  error("capability '" .. self.name .. "': for_run must return a capability, got " .. type(inst), 0)
end

function Capability:get_toolsets()
  return self.toolsets
end

function Capability:get_instructions()
  return self.instructions
end

--- Its lifecycle hooks (lash.hooks), or nil.
function Capability:get_hooks()
  return self.hooks
end

--- Its guardrails (lash.guardrails), or nil.
function Capability:get_guardrails()
  return self.guardrails
end

--- Render every templated string field of `t` for this run (for
-- capability authors: e.g. `attach_to = "{{ deps.sandbox }}"`).
-- @tparam table ctx the run context
-- @tparam table t the fields
-- @tparam[opt] string name used in error messages
-- @treturn table a rendered copy
function M.render_fields(ctx, t, name)
  return require("lash.template").render_fields(t, M.template_vars(ctx), name)
end

--- The variables templates see for a run context.
function M.template_vars(ctx, tools)
  return { deps = ctx.deps, run = ctx.run, values = ctx.values or {}, tools = tools or ctx.tool_names }
end

---------------------------------------------------------------------------
-- Composition over capabilities: the wrapped capability keeps its
-- instructions and for_run, and has each of its toolsets wrapped.

local Wrapped = {}
Wrapped.__index = Wrapped
Wrapped.__name = "lash.capability.wrapped"

local function wrapped(inner, wrap_ts)
  return setmetatable({ name = inner.name, inner = inner, wrap_ts = wrap_ts }, Wrapped)
end

function Wrapped:for_run(ctx)
  local inst = self.inner:for_run(ctx)
  if inst == self.inner then return self end
  return wrapped(inst, self.wrap_ts)
end

function Wrapped:get_toolsets()
  if self.sets and self.sets_of == self.inner then return self.sets end
  local out = {}
  for i, ts in ipairs(self.inner:get_toolsets()) do out[i] = self.wrap_ts(ts) end
  self.sets, self.sets_of = out, self.inner
  return out
end

function Wrapped:get_instructions()
  return self.inner:get_instructions()
end

function Wrapped:get_hooks()
  local f = self.inner.get_hooks
  if type(f) == "function" then return f(self.inner) end
  return nil
end

function Wrapped:get_guardrails()
  local f = self.inner.get_guardrails
  if type(f) == "function" then return f(self.inner) end
  return nil
end

-- Apply a toolset transform to a toolset or a capability.
local function lift(who, target, wrap_ts)
  if M.is_capability(target) then
    return wrapped(target, wrap_ts)
  elseif toolset.is_toolset(target) then
    return wrap_ts(target)
  end
  error(who .. ": 'capability' (or 'toolset') must be a capability or a toolset, got " .. type(target), 3)
end

local function target_of(who, opts)
  if type(opts) ~= "table" then error(who .. ": expected a table of options, got " .. type(opts), 3) end
  local t = opts.capability or opts.toolset
  if t == nil then error(who .. ": give 'capability' (or 'toolset') to wrap", 3) end
  return t
end

local function check_keys(who, opts, allowed)
  options.check(who, opts, allowed, { level = 3 })
end

--- `lash.prefix_tools{capability=, prefix=}`: expose every tool as
-- `prefix_name` (the handler sees the original name in `ctx.tool_name`).
function M.prefix_tools(opts)
  local who = "lash.prefix_tools"
  check_keys(who, opts, { capability = true, toolset = true, prefix = true })
  local target = target_of(who, opts)
  local prefix = opts.prefix
  if type(prefix) ~= "string" or prefix == "" then
    error(who .. ": 'prefix' must be a non-empty string, got " .. tostring(prefix), 2)
  end
  return lift(who, target, function(ts) return toolset.prefix(ts, prefix) end)
end

--- `lash.filter_tools{capability=, keep=|drop=}`: keep or drop tools by a
-- list of names or a `function(tool, ctx)` predicate.
function M.filter_tools(opts)
  local who = "lash.filter_tools"
  check_keys(who, opts, { capability = true, toolset = true, keep = true, drop = true })
  local target = target_of(who, opts)
  local f = { keep = opts.keep, drop = opts.drop }
  toolset.filter_rule(f, 2)
  return lift(who, target, function(ts) return toolset.filter(ts, f) end)
end

--- `lash.rename_tool{capability=, from=, to=}` (or `names = {old = new}`):
-- expose single tools under new names.
function M.rename_tool(opts)
  local who = "lash.rename_tool"
  check_keys(who, opts, { capability = true, toolset = true, from = true, to = true, names = true })
  local target = target_of(who, opts)
  local map = {}
  if opts.names then
    for k, v in pairs(opts.names) do map[k] = v end
  end
  if opts.from ~= nil or opts.to ~= nil then
    if type(opts.from) ~= "string" or type(opts.to) ~= "string" then
      error(who .. ": 'from' and 'to' must both be tool names", 2)
    end
    map[opts.from] = opts.to
  end
  if next(map) == nil then error(who .. ": give 'from' and 'to' (or 'names = {old = new}')", 2) end
  return lift(who, target, function(ts) return toolset.rename(ts, map) end)
end

--- `lash.wrap_tools{capability=, wrap=function(ctx, tool, args, call)}`:
-- run a function around every call (see toolset.wrap).
function M.wrap_tools(opts)
  local who = "lash.wrap_tools"
  check_keys(who, opts, { capability = true, toolset = true, wrap = true })
  local target = target_of(who, opts)
  local fn = opts.wrap
  if type(fn) ~= "function" then
    error(who .. ": 'wrap' must be a function(ctx, tool, args, call), got " .. type(fn), 2)
  end
  return lift(who, target, function(ts) return toolset.wrap(ts, fn) end)
end

return M
