--- `{{ expr }}` templates for instructions and capability fields.
--
-- An expression is a Lua expression evaluated in a restricted environment:
-- the variables the caller passes (for a run: `deps`, `run`, `values`,
-- `tools`) plus a few pure helpers (string, math, table, tostring,
-- tonumber, type, ipairs, pairs, select, next, date, json). Nothing else is
-- reachable: no io, os, require, load or debug. A name that is not defined,
-- or a dotted path that ends in nil, fails the render with the template's
-- name, the line and the name, e.g.
-- `template 'instructions' line 3: undefined name 'deps.sandbox'`.
--
-- Templates are compiled once per source text and rendered against a fresh
-- environment each time, so rendering never changes the template's owner.
-- Write a literal `{{` as `{{ "{{" }}`.
-- @module lash.template
local runtime = require "lash.runtime"
local json = require "lash.json"

local M = {}

local function template_error(message, fields)
  return runtime.error("template", message, fields)
end

local SAFE = {
  string = string, math = math, table = table, utf8 = utf8,
  tostring = tostring, tonumber = tonumber, type = type, ipairs = ipairs,
  pairs = pairs, select = select, next = next,
  date = os.date,
  json = { encode = json.encode },
}

-- Compiled templates: source -> list of pieces (strings, or
-- {fn=, expr=, line=}), or {err=, line=} for a template that does not parse.
local compiled_by_src = {}
local ncompiled = 0

local function compile(src)
  local hit = compiled_by_src[src]
  if hit then return hit end
  local pieces, pos, line = {}, 1, 1
  while true do
    local open = src:find("{{", pos, true)
    if not open then
      pieces[#pieces + 1] = src:sub(pos)
      break
    end
    local text = src:sub(pos, open - 1)
    pieces[#pieces + 1] = text
    local _, nl = text:gsub("\n", "")
    line = line + nl
    local close = src:find("}}", open + 2, true)
    if not close then
      pieces = { err = "'{{' is never closed", line = line }
      break
    end
    local expr = src:sub(open + 2, close - 1):match("^%s*(.-)%s*$")
    if expr == "" then
      pieces = { err = "empty '{{ }}'", line = line }
      break
    end
    local fn, perr = load("local _ENV = ...; return (" .. expr .. ")", "=template", "t", {})
    if not fn then
      pieces = { err = "cannot parse '" .. expr .. "': " .. tostring(perr):gsub("^template:%d+: ", ""),
                 line = line }
      break
    end
    pieces[#pieces + 1] = { fn = fn, expr = expr, line = line }
    local _, inner_nl = src:sub(open, close):gsub("\n", "")
    line = line + inner_nl
    pos = close + 2
  end
  -- bound the cache: templates come from specs, but a function instruction
  -- could produce unbounded distinct strings
  if ncompiled > 1000 then compiled_by_src, ncompiled = {}, 0 end
  compiled_by_src[src] = pieces
  ncompiled = ncompiled + 1
  return pieces
end

-- Marker raised by the environment's __index for undefined names.
local Undefined = {}

local function make_env(vars)
  return setmetatable({}, {
    __index = function(_, k)
      local v = vars[k]
      if v ~= nil then return v end
      v = SAFE[k]
      if v ~= nil then return v end
      error(setmetatable({ name = k }, Undefined), 0)
    end,
    __newindex = function(_, k)
      error("templates cannot assign to '" .. tostring(k) .. "'", 0)
    end,
  })
end

local function format_value(v)
  local t = type(v)
  if t == "string" then return v end
  if t == "number" then
    if math.type(v) == "float" and v == math.floor(v) and v > -2^53 and v < 2^53 then
      return string.format("%d", v)
    end
    return tostring(v)
  end
  if t == "table" then
    local mt = getmetatable(v)
    if mt and mt.__tostring then return tostring(v) end
    local s = json.try_encode(v)
    if s then return s end
  end
  return tostring(v)
end

--- Does `s` contain a placeholder?
function M.has_placeholders(s)
  return type(s) == "string" and s:find("{{", 1, true) ~= nil
end

--- Render a template.
-- @tparam string src the template text
-- @tparam table vars the variables visible to expressions
-- @tparam[opt="template"] string name used in error messages
-- @treturn string
-- @raise a `template` error (fields: template, line, name) on an undefined
--   name, a nil value, a parse error or an expression that raises
function M.render(src, vars, name)
  name = name or "template"
  if type(src) ~= "string" then
    error("template.render: expected a string for " .. name .. ", got " .. type(src), 2)
  end
  if not src:find("{{", 1, true) then return src end
  local pieces = compile(src)
  if pieces.err then
    error(template_error(string.format("template '%s' line %d: %s", name, pieces.line, pieces.err),
                         { template = name, line = pieces.line }), 0)
  end
  local env = make_env(vars or {})
  local out = {}
  for i, p in ipairs(pieces) do
    if type(p) == "string" then
      out[i] = p
    else
      local ok, v = pcall(p.fn, env)
      if not ok then
        if getmetatable(v) == Undefined then
          error(template_error(string.format("template '%s' line %d: undefined name '%s'",
                                             name, p.line, v.name),
                               { template = name, line = p.line, name = v.name }), 0)
        end
        error(template_error(string.format("template '%s' line %d: {{ %s }} failed: %s",
                                           name, p.line, p.expr, tostring(v)),
                             { template = name, line = p.line }), 0)
      end
      if v == nil then
        local what = p.expr:match("^[%a_][%w_]*[%.%w_]*$") and ("undefined name '" .. p.expr .. "'")
          or ("{{ " .. p.expr .. " }} is nil")
        error(template_error(string.format("template '%s' line %d: %s", name, p.line, what),
                             { template = name, line = p.line, name = p.expr }), 0)
      end
      out[i] = format_value(v)
    end
  end
  return table.concat(out)
end

--- Render every string field of `t` that holds a placeholder, recursing
-- into plain nested tables. Returns a copy; `t` is never changed. Tables
-- with a metatable (objects) are kept as they are.
-- @tparam table t
-- @tparam table vars
-- @tparam[opt] string name prefix for error messages (fields append `.key`)
-- @treturn table
function M.render_fields(t, vars, name)
  name = name or "fields"
  local out = {}
  for k, v in pairs(t) do
    local field = name .. "." .. tostring(k)
    if type(v) == "string" and v:find("{{", 1, true) then
      out[k] = M.render(v, vars, field)
    elseif type(v) == "table" and getmetatable(v) == nil then
      out[k] = M.render_fields(v, vars, field)
    else
      out[k] = v
    end
  end
  return setmetatable(out, getmetatable(t))
end

return M
