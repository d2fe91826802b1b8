--- How `lash mcp call` and `lash mcp tools` answer a server's elicitation
-- (elicitation/create): on a terminal the user is asked, field by field;
-- with --accept-defaults the schema's defaults are sent; otherwise it is
-- declined, saying why and how to answer instead. A server that asks can
-- so be debugged from the CLI.
-- @module lash.cli.elicit
local mcp = require "lash.mcp"
local schema = require "lash.schema"

local M = {}

-- Required fields first (in the schema's order), then the others by name.
local function fields(rs)
  local props = type(rs) == "table" and type(rs.properties) == "table" and rs.properties or {}
  local out, seen = {}, {}
  for _, k in ipairs(type(rs) == "table" and type(rs.required) == "table" and rs.required or {}) do
    if props[k] and not seen[k] then out[#out + 1] = { name = k, required = true } seen[k] = true end
  end
  local rest = {}
  for k in pairs(props) do if not seen[k] then rest[#rest + 1] = k end end
  table.sort(rest)
  for _, k in ipairs(rest) do out[#out + 1] = { name = k, required = false } end
  for _, f in ipairs(out) do f.p = props[f.name] end
  return out
end

local function choices(p)
  local list = {}
  local src = p.enum or (p.items and (p.items.enum or p.items.anyOf or p.items.oneOf)) or p.oneOf or p.anyOf
  for _, c in ipairs(type(src) == "table" and src or {}) do
    if type(c) == "table" then list[#list + 1] = tostring(c.const) else list[#list + 1] = tostring(c) end
  end
  return #list > 0 and list or nil
end

local function show(v)
  if type(v) == "table" then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = tostring(x) end
    return table.concat(parts, ",")
  end
  return tostring(v)
end

-- The typed value of one answer line, or nil, why.
local function parse(p, line)
  local t = p.type
  if t == "integer" then
    local n = math.tointeger(tonumber(line))
    if not n then return nil, "a whole number" end
    return n
  elseif t == "number" then
    local n = tonumber(line)
    if not n then return nil, "a number" end
    return n
  elseif t == "boolean" then
    local l = line:lower()
    if l == "y" or l == "yes" or l == "true" then return true end
    if l == "n" or l == "no" or l == "false" then return false end
    return nil, "y or n"
  elseif t == "array" then
    local out = {}
    for item in line:gmatch("[^,]+") do out[#out + 1] = item:match("^%s*(.-)%s*$") end
    return out
  end
  return line
end

--- Ask on the terminal. `io` is { read = function() -> line|nil, write = function(s) }.
local function ask(params, io_)
  local rs = params.requestedSchema
  io_.write("\nThe server asks: " .. tostring(params.message or "") .. "\n")
  io_.write("Answer? [y]es, [n]o (decline), [c]ancel: ")
  local a = io_.read()
  if not a then return { action = "cancel" } end
  a = a:lower()
  if a == "n" or a == "no" then return { action = "decline" } end
  if a ~= "y" and a ~= "yes" and a ~= "" then return { action = "cancel" } end
  local content = {}
  for _, f in ipairs(fields(rs)) do
    local p = type(f.p) == "table" and f.p or {}
    local c = choices(p)
    local label = (p.title or f.name) .. " (" .. tostring(p.type or "string")
      .. (f.required and ", required" or "") .. (c and (": " .. table.concat(c, ", ")) or "") .. ")"
      .. (p.default ~= nil and (" [" .. show(p.default) .. "]") or "") .. ": "
    for _ = 1, 3 do
      io_.write("  " .. label)
      local line = io_.read()
      if not line then return { action = "cancel" } end
      if line == "" then
        if p.default ~= nil then content[f.name] = p.default break end
        if not f.required then break end
        io_.write("  (required)\n")
      else
        local v, why = parse(p, line)
        if v ~= nil then content[f.name] = v break end
        io_.write("  (give " .. why .. ")\n")
      end
    end
    if f.required and content[f.name] == nil then return { action = "cancel" } end
  end
  if type(rs) == "table" then
    local ok, errs = schema.validate(content, rs)
    if not ok then
      io_.write("the answer does not match what the server asked for: " .. schema.format_errors(errs)
        .. "; cancelled\n")
      return { action = "cancel" }
    end
  end
  return { action = "accept", content = content }
end

--- The on_elicit callback for a CLI client.
-- @tparam table o `accept_defaults` (bool), `tty` (bool: stdin and stderr
--   are a terminal), `read`, `write` (the terminal's line reader and
--   writer), `warn(s)` (stderr)
-- @treturn function on_elicit(params) -> result
function M.handler(o)
  return function(params)
    if params.mode == "url" then
      o.warn("lash mcp: the server asked the user to open " .. tostring(params.url) .. " (" ..
        tostring(params.message) .. "); declined: lash mcp answers form elicitations only\n")
      return { action = "decline" }
    end
    local rs = params.requestedSchema
    if o.accept_defaults then
      local content = mcp.elicit_defaults(rs)
      local missing = {}
      for _, f in ipairs(fields(rs)) do
        if f.required and content[f.name] == nil then missing[#missing + 1] = f.name end
      end
      if #missing > 0 then
        o.warn("lash mcp: the server asked for input (" .. tostring(params.message) .. "); declined: --accept-defaults "
          .. "has no default for the required " .. table.concat(missing, ", ") .. "; answer on a terminal instead\n")
        return { action = "decline" }
      end
      return { action = "accept", content = content }
    end
    if o.tty then return ask(params, o) end
    o.warn("lash mcp: the server asked for input (" .. tostring(params.message) .. "); declined: no terminal to ask "
      .. "on. Run on a terminal to answer, or give --accept-defaults to accept with the schema's defaults\n")
    return { action = "decline" }
  end
end

return M
