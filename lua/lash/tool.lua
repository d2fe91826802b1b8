--- Tools written in Lua: definition and checking (`lash.tool`), the retry
-- signal (`lash.retry`), argument decoding and validation, and calling a
-- handler with its timeout.
--
-- A handler is `function(ctx, args)`. What it returns becomes the tool
-- result the model sees: a string as is, nil as "", a number or boolean
-- through tostring, a table as JSON. Returning `nil, message` (the Lua
-- failure idiom) or raising `lash.retry(message)` sends `message` back to
-- the model as a retry prompt. Any other error fails the run.
--
-- A tool's `timeout` (seconds) cancels a handler that runs longer: its
-- current wait raises `cancelled`, and the model gets the retry prompt
-- `Tool 'x' timed out after Ns.` (counted against the tool's retries).
-- A handler that computes without ever waiting cannot be interrupted.
-- @module lash.tool
local options = require "lash.options"
local json = require "lash.json"
local schema = require "lash.schema"

local M = {}

--- The suffix every retry prompt gets.
M.RETRY_SUFFIX = "\n\nFix the errors and try again."

local Tool = {}
Tool.__index = Tool
Tool.__name = "lash.tool"
M.Tool = Tool

local FIELDS = {
  name = "string", description = "string", parameters = "table",
  handler = "function", retries = "number", requires_approval = true,
  timeout = "number", metadata = "table",
  idempotent = "boolean",  -- false: a call cut short by a crash is asked about before it runs again (lash.durable)
}

local EMPTY_PARAMS = { type = "object", properties = {} }

local runtime = require "lash.runtime"

local function fail(name, msg)
  local who = name and ("lash.tool '" .. tostring(name) .. "'") or "lash.tool"
  error(who .. ": " .. msg, 4)
end

--- Raise `who: ...` for a field of `t` that `fields` does not know (the
-- message lists the known ones) or whose type is not the one it names
-- (`true` takes any type).
-- @int level the error level, as for `error`, of the function checking
function M.check_fields(who, t, fields, level)
  for k, v in pairs(t) do
    local want = fields[k]
    if want == nil then
      error(options.message(who, "field", options.unknown(t, fields), fields, "fields"), level + 1)
    elseif want ~= true and type(v) ~= want then
      error(who .. ": field '" .. k .. "' must be a " .. want .. ", got " .. type(v), level + 1)
    end
  end
end

--- Is `name` acceptable to every provider? (1-64 of `[A-Za-z0-9_-]`)
function M.valid_name(name)
  return type(name) == "string" and #name >= 1 and #name <= 64 and name:find("^[%w_%-]+$") ~= nil
end

local function check_def(def)
  if type(def) ~= "table" then fail(nil, "expected a table, got " .. type(def)) end
  local name = def.name
  M.check_fields(name and ("lash.tool '" .. tostring(name) .. "'") or "lash.tool", def, FIELDS, 3)
  if not M.valid_name(name) then
    fail(name, "field 'name' must be 1-64 characters of letters, digits, '_' or '-', got "
      .. (type(name) == "string" and ("'" .. name .. "'") or type(name)))
  end
  if def.handler == nil then fail(name, "field 'handler' is required (a function(ctx, args))") end
  if def.parameters ~= nil then
    local ok, err = schema.check_object_schema(def.parameters, "parameters")
    if not ok then fail(name, "field " .. err) end
  end
  if def.retries ~= nil and (def.retries ~= math.floor(def.retries) or def.retries < 0) then
    fail(name, "field 'retries' must be an integer >= 0, got " .. tostring(def.retries))
  end
  local ra = def.requires_approval
  if ra ~= nil and type(ra) ~= "boolean" and type(ra) ~= "function" then
    fail(name, "field 'requires_approval' must be a boolean or a function(ctx, args), got " .. type(ra))
  end
  if def.timeout ~= nil and not (def.timeout > 0 and def.timeout < math.huge) then
    fail(name, "field 'timeout' must be a positive number of seconds, got " .. tostring(def.timeout))
  end
end

--- Define a tool.
-- @tparam table def `name` (1-64 of `[A-Za-z0-9_-]`), `description`,
--   `parameters` (a JSON Schema table with `type = "object"`; default: no
--   arguments), `handler` (`function(ctx, args)`), `retries` (default: the
--   agent's), `requires_approval` (boolean or `function(ctx, args)`),
--   `timeout` (seconds), `metadata` (free-form, not sent to the model),
--   `idempotent` (default true; false: after a crash, a call that started
--   and never finished is put to the user before it runs again).
-- @treturn Tool
-- @raise when a field is unknown or wrong, naming it
function M.new(def)
  if getmetatable(def) == Tool then return def end
  check_def(def)
  local t = {}
  for k, v in pairs(def) do t[k] = v end
  t.parameters = t.parameters or EMPTY_PARAMS
  t.description = t.description or ""
  return setmetatable(t, Tool)
end

--- Is `v` a tool made by `lash.tool`?
function M.is_tool(v)
  return getmetatable(v) == Tool
end

--- A copy of this tool with some fields replaced (used by composition:
-- renaming, prefixing, wrapping). `original` points at the first tool.
-- @tparam table changes
-- @treturn Tool
function Tool:derive(changes)
  local t = {}
  for k, v in pairs(self) do t[k] = v end
  t.definition_cache = nil
  t.original = self.original or self
  for k, v in pairs(changes) do t[k] = v end
  return setmetatable(t, Tool)
end

--- The definition sent to providers: `{name=, description=, parameters=}`
-- with the schema prepared for JSON encoding.
function Tool:definition()
  local d = self.definition_cache
  if not d then
    d = { name = self.name, description = self.description,
          parameters = schema.prepare(self.parameters) }
    self.definition_cache = d
  end
  return d
end

--- Does this call need approval? (`requires_approval` may be a function)
function Tool:needs_approval(ctx, args)
  local ra = self.requires_approval
  if type(ra) == "function" then return ra(ctx, args) and true or false end
  return ra == true
end

--- Raise a retry: the handler's way of telling the model to try again.
-- The model sees `message .. "\n\nFix the errors and try again."`.
-- @tparam string message
function M.retry(message)
  if type(message) ~= "string" then
    error("lash.retry expects a message string, got " .. type(message), 2)
  end
  error(runtime.error("retry", message), 2)
end

--- Decode and validate the model's arguments.
-- @tparam Tool t
-- @param raw a decoded table, a JSON string, or nil (no arguments)
-- @treturn[1] table args
-- @treturn[2] nil
-- @treturn[2] string the retry message listing every problem
function M.prepare_args(t, raw)
  local args = raw
  if raw == nil or raw == "" then
    args = {}
  elseif type(raw) == "string" then
    local v, err = json.try_decode(raw)
    if v == nil then
      return nil, "The arguments are not valid JSON (" .. err .. "). Send the arguments as one JSON object."
    end
    args = v
  end
  if type(args) ~= "table" or json.is_array(args) or args[1] ~= nil then
    return nil, "The arguments must be a JSON object, got " .. schema.type_of(args) .. "."
  end
  local ok, errs = schema.validate(args, t.parameters)
  if not ok then return nil, schema.format_errors(errs) end
  return args
end

--- Turn a handler's return value into the text the model sees.
function M.content(v)
  local tv = type(v)
  if tv == "string" then return v end
  if v == nil then return "" end
  if tv == "number" or tv == "boolean" then return tostring(v) end
  if tv == "table" then
    local mt = getmetatable(v)
    if mt and mt.__tostring and mt ~= json.array_mt then return tostring(v) end
    local ok, s = pcall(json.encode_canonical, v)
    if ok then return s end
    error("tool returned a table that cannot be encoded as JSON: " .. tostring(s), 0)
  end
  return tostring(v)
end

-- xpcall message handler: strings get a traceback; typed errors keep their
-- identity and get a traceback field.
local function on_error(e)
  if type(e) == "table" then
    if rawget(e, "traceback") == nil and not runtime.is_error(e, "cancelled")
       and not runtime.is_error(e, "retry") then
      pcall(function() e.traceback = debug.traceback(nil, 2) end)
    end
    return e
  end
  return { message = tostring(e), traceback = debug.traceback(tostring(e), 2) }
end

local function fatal(t, e)
  local L = runtime
  if L.is_error(e) then
    if rawget(e, "tool") == nil then e.tool = t.name end
    return e
  end
  local msg = "Tool '" .. t.name .. "' failed: " .. tostring(e.message)
  return L.error("tool", msg, { tool = t.name, traceback = e.traceback })
end

--- Call a tool's handler.
-- @tparam Tool t
-- @tparam table ctx the call context (see lash.agent)
-- @tparam table args validated arguments
-- @tparam[opt] number default_timeout seconds, for a tool without its own
--   `timeout` (the agent's `tool_timeout`)
-- @treturn string status "ok" or "retry"
-- @treturn string the content (ok) or the retry message (without suffix)
-- @raise the handler's fatal error (typed errors keep their kind, others
--   become kind "tool" with a traceback), or `cancelled`
function M.call(t, ctx, args, default_timeout)
  local L = runtime
  local dog, fired
  local timeout = t.timeout or default_timeout
  if timeout then
    local me = L.current()
    if not me then error("lash.tool: a tool with a timeout must be called inside a task", 2) end
    fired = false
    dog = L.spawn(function()
      L.sleep(timeout)
      fired = true
      me:cancel()
    end)
  end
  local ok, r1, r2 = xpcall(t.handler, on_error, ctx, args)
  if dog then
    if fired then
      -- the cancel may still be pending if the handler finished first; absorb it
      pcall(L.sleep, 0)
      local secs = timeout == math.floor(timeout) and string.format("%d", timeout) or tostring(timeout)
      return "retry", "Tool '" .. t.name .. "' timed out after " .. secs .. "s."
    end
    dog:cancel()
  end
  if ok then
    if r1 == nil and type(r2) == "string" then return "retry", r2 end
    local okc, content = pcall(M.content, r1)
    if not okc then
      error(L.error("tool", "Tool '" .. t.name .. "' " .. tostring(content), { tool = t.name }), 0)
    end
    return "ok", content
  end
  if L.is_error(r1, "retry") then return "retry", r1.message end
  if L.is_error(r1, "cancelled") then error(r1, 0) end
  error(fatal(t, r1), 0)
end

return M
