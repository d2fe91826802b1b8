--- Toolsets: named sets of tools with a per-run lifecycle, and the
-- composition helpers that work on any toolset (prefix, filter, rename,
-- wrap). capability.lua lifts the helpers to capabilities.
--
-- The toolset protocol (duck-typed; `lash.toolset{...}` builds one):
--
--   ts.name                  label used in messages
--   ts:for_run(ctx) -> ts'   the instance for one run (default: ts itself)
--   ts:open(ctx)             before the first model call (may wait)
--   ts:close(ctx, err)       after the run, err = nil on success (may wait)
--   ts:get_tools(ctx) -> {Tool...}  the tools, in a stable order
--
-- Tool objects derived by composition keep `aliases`, every name the tool
-- had on the way in, so instruction templates can write
-- `{{ tools.run_command }}` and get the name actually exposed.
-- @module lash.toolset
local tool = require "lash.tool"

local M = {}

local Toolset = {}
Toolset.__index = Toolset
Toolset.__name = "lash.toolset"
M.Toolset = Toolset

local FIELDS = { name = "string", tools = true, open = "function", close = "function",
                 for_run = "function", description = "string" }

local function to_tools(list, where)
  local out = {}
  for i, t in ipairs(list) do
    if tool.is_tool(t) then
      out[i] = t
    elseif type(t) == "table" then
      out[i] = tool.new(t)
    else
      error(where .. ": tools[" .. i .. "] must be a lash.tool or a tool table, got " .. type(t), 3)
    end
  end
  return out
end

--- Make a toolset.
-- @tparam table def `name`, `tools` (a list of lash.tool / tool tables,
--   or `function(ctx)` returning one), `open(ctx)`, `close(ctx, err)`,
--   `for_run(ctx)` (returns the toolset to use for one run).
-- @treturn Toolset
function M.new(def)
  if type(def) ~= "table" then error("lash.toolset: expected a table, got " .. type(def), 2) end
  tool.check_fields("lash.toolset", def, FIELDS, 2)
  local name = def.name or "toolset"
  local tools = def.tools or {}
  if type(tools) == "table" then
    tools = to_tools(tools, "lash.toolset '" .. name .. "'")
  elseif type(tools) ~= "function" then
    error("lash.toolset '" .. name .. "': field 'tools' must be a list or a function(ctx), got " .. type(tools), 2)
  end
  return setmetatable({ name = name, tools = tools, description = def.description,
                        open_fn = def.open, close_fn = def.close, for_run_fn = def.for_run }, Toolset)
end

--- Is `v` a toolset (anything that speaks the protocol)?
function M.is_toolset(v)
  return type(v) == "table" and type(v.get_tools) == "function"
end

function Toolset:for_run(ctx)
  if not self.for_run_fn then return self end
  local inst = self.for_run_fn(ctx)
  if inst == nil then return self end
  if not M.is_toolset(inst) then
    if type(inst) == "table" then return M.new(inst) end
    error("toolset '" .. self.name .. "': for_run must return a toolset, got " .. type(inst), 0)
  end
  return inst
end

function Toolset:open(ctx)
  if self.open_fn then self.open_fn(ctx) end
end

function Toolset:close(ctx, err)
  if self.close_fn then self.close_fn(ctx, err) end
end

function Toolset:get_tools(ctx)
  local tools = self.tools
  if type(tools) == "function" then
    local list = tools(ctx)
    if type(list) ~= "table" then
      error("toolset '" .. self.name .. "': tools(ctx) must return a list, got " .. type(list), 0)
    end
    return to_tools(list, "toolset '" .. self.name .. "'")
  end
  return tools
end

---------------------------------------------------------------------------
-- Wrappers. A wrapper holds an inner toolset and a transform of its tool
-- list; for_run/open/close go through to the inner toolset.

local Wrapper = {}
Wrapper.__index = Wrapper
Wrapper.__name = "lash.toolset.wrapper"

local function wrapper(inner, name, transform)
  return setmetatable({ name = name, inner = inner, transform = transform,
                        cache = setmetatable({}, { __mode = "k" }) }, Wrapper)
end

function Wrapper:for_run(ctx)
  local inst = self.inner:for_run(ctx)
  if inst == self.inner then return self end
  return wrapper(inst, self.name, self.transform)
end

function Wrapper:open(ctx)
  if self.inner.open then self.inner:open(ctx) end
end

function Wrapper:close(ctx, err)
  if self.inner.close then self.inner:close(ctx, err) end
end

function Wrapper:get_tools(ctx)
  return self.transform(self.inner:get_tools(ctx), ctx, self.cache)
end

-- Derive t with a new name, remembering the old one as an alias.
local function renamed(t, new_name, handler)
  local aliases = {}
  for i, a in ipairs(t.aliases or {}) do aliases[i] = a end
  aliases[#aliases + 1] = t.name
  return t:derive { name = new_name, aliases = aliases, handler = handler or t.handler }
end

local function cached(cache, t, make)
  local d = cache[t]
  if not d then
    d = make(t)
    cache[t] = d
  end
  return d
end

local function check_inner(ts, who)
  if not M.is_toolset(ts) then
    error(who .. ": expected a toolset, got " .. type(ts), 3)
  end
end

--- Rename every tool to `prefix_name`; on a call the handler sees
-- `ctx.tool_name` without the prefix.
-- @param ts a toolset
-- @tparam string prefix
function M.prefix(ts, prefix)
  check_inner(ts, "lash.prefix_tools")
  if type(prefix) ~= "string" or not tool.valid_name(prefix) then
    error("lash.prefix_tools: 'prefix' must be a non-empty string of letters, digits, '_' or '-', got "
      .. tostring(prefix), 2)
  end
  return wrapper(ts, ts.name .. " (prefix '" .. prefix .. "')", function(tools, _, cache)
    local out = {}
    for i, t in ipairs(tools) do
      out[i] = cached(cache, t, function(inner)
        local orig = inner.name
        local new_name = prefix .. "_" .. orig
        if not tool.valid_name(new_name) then
          error("lash.prefix_tools: '" .. new_name .. "' is longer than 64 characters; use a shorter prefix", 0)
        end
        return renamed(inner, new_name, function(ctx, args)
          ctx.tool_name = orig
          return inner.handler(ctx, args)
        end)
      end)
    end
    return out
  end)
end

--- Parse a filter rule: `keep` or `drop`, a list of names or a
-- predicate. Returns pred(tool, ctx), want (true = keep matches).
function M.filter_rule(opts, level)
  local keep, drop = opts.keep, opts.drop
  if (keep == nil) == (drop == nil) then
    error("lash.filter_tools: give exactly one of 'keep' or 'drop' (a list of names or a function(tool, ctx))",
          (level or 1) + 1)
  end
  local rule = keep or drop
  local pred
  if type(rule) == "function" then
    pred = rule
  elseif type(rule) == "table" then
    local set = {}
    for _, n in ipairs(rule) do set[n] = true end
    pred = function(t) return set[t.name] == true end
  else
    error("lash.filter_tools: '" .. (keep and "keep" or "drop") .. "' must be a list of names or a function, got "
      .. type(rule), (level or 1) + 1)
  end
  return pred, keep ~= nil
end

--- Keep or drop tools.
-- @param ts a toolset
-- @tparam table opts `keep` or `drop`: a list of names, or a
--   `function(tool, ctx) -> boolean`
function M.filter(ts, opts)
  check_inner(ts, "lash.filter_tools")
  local pred, want = M.filter_rule(opts, 2)
  return wrapper(ts, ts.name, function(tools, ctx)
    local out = {}
    for _, t in ipairs(tools) do
      if (pred(t, ctx) and true or false) == want then out[#out + 1] = t end
    end
    return out
  end)
end

--- Rename single tools.
-- @param ts a toolset
-- @tparam table map `{old = "new", ...}`
function M.rename(ts, map)
  check_inner(ts, "lash.rename_tool")
  for old, new in pairs(map) do
    if not tool.valid_name(new) then
      error("lash.rename_tool: new name for '" .. tostring(old) .. "' must be 1-64 characters of letters, digits, '_' or '-', got "
        .. tostring(new), 2)
    end
  end
  return wrapper(ts, ts.name, function(tools, _, cache)
    local out = {}
    for i, t in ipairs(tools) do
      local new = map[t.name]
      out[i] = new and cached(cache, t, function(inner) return renamed(inner, new) end) or t
    end
    return out
  end)
end

--- Wrap every call: `fn(ctx, tool, args, call)` runs instead of the
-- handler; `call(args)` runs the wrapped handler and returns its values.
-- Inspect or change `args`, post-process the result, raise `lash.retry`
-- to send the model a message, or return without calling to deny.
-- @param ts a toolset
-- @tparam function fn
function M.wrap(ts, fn)
  check_inner(ts, "lash.wrap_tools")
  if type(fn) ~= "function" then
    error("lash.wrap_tools: 'wrap' must be a function(ctx, tool, args, call), got " .. type(fn), 2)
  end
  return wrapper(ts, ts.name, function(tools, _, cache)
    local out = {}
    for i, t in ipairs(tools) do
      out[i] = cached(cache, t, function(inner)
        return inner:derive { handler = function(ctx, args)
          return fn(ctx, inner, args, function(a) return inner.handler(ctx, a == nil and args or a) end)
        end }
      end)
    end
    return out
  end)
end

return M
