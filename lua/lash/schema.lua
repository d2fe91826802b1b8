--- JSON Schema, the subset tools need: checking a schema when a tool is
-- defined, validating the model's arguments against it (every problem
-- listed, never just the first), and preparing it for the wire.
--
-- Supported keywords: type (a name or a list), properties, required,
-- additionalProperties (false or a schema), items, enum, const, anyOf,
-- oneOf, allOf, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
-- minLength, maxLength (in UTF-8 characters), minItems, maxItems.
-- Annotations (description, title, default, examples, format, pattern,
-- $schema ...) are accepted and not enforced.
-- @module lash.schema
local json = require "lash.json"

local M = {}

local TYPES = { object = true, array = true, string = true, number = true,
                integer = true, boolean = true, null = true }

local null = json.null

local function count_keys(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

-- A Lua table is an array when it is marked, empty, or a proper sequence.
local function is_array(v)
  if type(v) ~= "table" then return false end
  if json.is_array(v) then return true end
  local n = #v
  if n == 0 then return next(v) == nil end
  return count_keys(v) == n
end

local function is_object(v)
  if type(v) ~= "table" or json.is_array(v) then return false end
  if next(v) == nil then return true end
  return v[1] == nil
end

--- The JSON type name of a decoded value ("integer" for whole numbers).
function M.type_of(v)
  local t = type(v)
  if t == "string" or t == "boolean" then return t end
  if t == "number" then
    if math.type(v) == "integer" or (v == math.floor(v) and v == v and v ~= math.huge and v ~= -math.huge) then
      return "integer"
    end
    return "number"
  end
  if v == null then return "null" end
  if t == "table" then
    if is_array(v) and not (next(v) == nil and not json.is_array(v)) then return "array" end
    if is_object(v) then return "object" end
    return "array"
  end
  return t
end

local function type_matches(v, name)
  if name == "object" then return is_object(v)
  elseif name == "array" then return is_array(v)
  elseif name == "string" then return type(v) == "string"
  elseif name == "boolean" then return type(v) == "boolean"
  elseif name == "null" then return v == null
  elseif name == "number" then return type(v) == "number" and v == v
  elseif name == "integer" then
    return type(v) == "number" and (math.type(v) == "integer" or v == math.floor(v))
  end
  return false
end

local function show(v)
  if type(v) == "string" then return "'" .. v .. "'" end
  if v == null then return "null" end
  if type(v) == "table" then
    local s = json.try_encode(v)
    return s or "a table"
  end
  return tostring(v)
end

local function join_path(path, key)
  if type(key) == "number" then return path .. "[" .. key .. "]" end
  if path == "" then return key end
  return path .. "." .. key
end

local function type_list(s)
  if type(s.type) == "table" then return s.type end
  return { s.type }
end

local validate

local function check_object(v, s, path, errs)
  local props = s.properties or {}
  if type(s.required) == "table" then
    for _, k in ipairs(s.required) do
      if v[k] == nil then
        errs[#errs + 1] = { path = path, message = "missing required property '" .. k .. "'" }
      end
    end
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local extra = s.additionalProperties
  for _, k in ipairs(keys) do
    local sub = props[k]
    local p = join_path(path, tostring(k))
    if sub ~= nil then
      validate(v[k], sub, p, errs)
    elseif extra == false then
      errs[#errs + 1] = { path = path, message = "unexpected property '" .. tostring(k) .. "'" }
    elseif type(extra) == "table" then
      validate(v[k], extra, p, errs)
    end
  end
end

-- A count `n` against `lo`/`hi` (either may be nil); `fmt` takes "least"
-- or "most", the bound, a plural "s" or "", and `n`.
local function check_count(n, lo, hi, fmt, path, errs)
  local function bad(word, bound)
    errs[#errs + 1] = { path = path, message = string.format(fmt, word, bound, bound == 1 and "" or "s", n) }
  end
  if lo and n < lo then bad("least", lo) end
  if hi and n > hi then bad("most", hi) end
end

local function check_array(v, s, path, errs)
  local n = #v
  check_count(n, s.minItems, s.maxItems, "must have at %s %d item%s, got %d", path, errs)
  if type(s.items) == "table" then
    for i = 1, n do validate(v[i], s.items, join_path(path, i - 1), errs) end
  end
end

local function check_number(v, s, path, errs)
  local function bad(msg) errs[#errs + 1] = { path = path, message = msg .. ", got " .. show(v) } end
  if s.minimum and v < s.minimum then bad("must be >= " .. show(s.minimum)) end
  if s.maximum and v > s.maximum then bad("must be <= " .. show(s.maximum)) end
  if type(s.exclusiveMinimum) == "number" and v <= s.exclusiveMinimum then
    bad("must be > " .. show(s.exclusiveMinimum))
  end
  if type(s.exclusiveMaximum) == "number" and v >= s.exclusiveMaximum then
    bad("must be < " .. show(s.exclusiveMaximum))
  end
end

local function check_string(v, s, path, errs)
  check_count(utf8.len(v) or #v, s.minLength, s.maxLength, "must be at %s %d character%s long, got %d", path, errs)
end

local function deep_equal(a, b)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then
    if type(a) == "number" and type(b) == "number" then return a == b end
    return false
  end
  for k, x in pairs(a) do if not deep_equal(x, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

local function check_composite(v, s, path, errs)
  if s.anyOf or s.oneOf then
    local list, matched = s.anyOf or s.oneOf, 0
    for _, sub in ipairs(list) do
      local e = {}
      validate(v, sub, path, e)
      if #e == 0 then matched = matched + 1 end
    end
    if matched == 0 then
      local names = {}
      for _, sub in ipairs(list) do
        names[#names + 1] = type(sub.type) == "string" and sub.type or "a schema"
      end
      errs[#errs + 1] = { path = path, message = "must match one of: " .. table.concat(names, ", ")
                          .. "; got " .. M.type_of(v) }
    elseif s.oneOf and matched > 1 then
      errs[#errs + 1] = { path = path, message = "must match exactly one schema of oneOf, matched " .. matched }
    end
  end
  if s.allOf then
    for _, sub in ipairs(s.allOf) do validate(v, sub, path, errs) end
  end
end

function validate(v, s, path, errs)
  if s == true or s == nil then return end
  if s == false then
    errs[#errs + 1] = { path = path, message = "no value is allowed here" }
    return
  end
  if s.type then
    local ok = false
    for _, name in ipairs(type_list(s)) do
      if type_matches(v, name) then ok = true break end
    end
    if not ok then
      local want = table.concat(type_list(s), " or ")
      errs[#errs + 1] = { path = path, message = "expected " .. want .. ", got " .. M.type_of(v) }
      return
    end
  end
  if s.enum then
    local found = false
    for _, x in ipairs(s.enum) do if deep_equal(x, v) then found = true break end end
    if not found then
      local opts = {}
      for i, x in ipairs(s.enum) do opts[i] = show(x) end
      errs[#errs + 1] = { path = path, message = "must be one of " .. table.concat(opts, ", ")
                          .. ", got " .. show(v) }
    end
  end
  if s.const ~= nil and not deep_equal(s.const, v) then
    errs[#errs + 1] = { path = path, message = "must be " .. show(s.const) .. ", got " .. show(v) }
  end
  if type(v) == "number" then check_number(v, s, path, errs)
  elseif type(v) == "string" then check_string(v, s, path, errs)
  elseif type(v) == "table" then
    if (s.properties or s.required or s.additionalProperties ~= nil) and is_object(v) then
      check_object(v, s, path, errs)
    end
    if is_array(v) and (s.items or s.minItems or s.maxItems) then check_array(v, s, path, errs) end
  end
  check_composite(v, s, path, errs)
end

--- Validate a decoded value against a schema.
-- @param value the decoded arguments
-- @tparam table schema
-- @treturn boolean ok
-- @treturn table list of `{path=, message=}` problems (empty when ok);
--   paths are like `items[0].name` (0-based, as the model sees JSON), "" for the root.
function M.validate(value, schema)
  local errs = {}
  validate(value, schema, "", errs)
  return #errs == 0, errs
end

--- Render a list of problems as the text sent back to the model.
-- @tparam table errs from `validate`
-- @treturn string
function M.format_errors(errs)
  local lines = { string.format("%d validation error%s:", #errs, #errs == 1 and "" or "s") }
  for _, e in ipairs(errs) do
    if e.path == "" then
      lines[#lines + 1] = "- " .. e.message
    else
      lines[#lines + 1] = "- " .. e.path .. ": " .. e.message
    end
  end
  return table.concat(lines, "\n")
end

---------------------------------------------------------------------------
-- Checking schemas themselves (at tool definition time).

local KNOWN = {
  type = true, properties = true, required = true, additionalProperties = true,
  items = true, enum = true, const = true, anyOf = true, oneOf = true, allOf = true,
  minimum = true, maximum = true, exclusiveMinimum = true, exclusiveMaximum = true,
  minLength = true, maxLength = true, minItems = true, maxItems = true,
  description = true, title = true, default = true, examples = true, format = true,
  pattern = true, ["$schema"] = true, ["$id"] = true, ["$defs"] = true, ["$ref"] = true,
  definitions = true, uniqueItems = true, nullable = true, deprecated = true,
  readOnly = true, writeOnly = true, propertyNames = true, patternProperties = true,
  minProperties = true, maxProperties = true, multipleOf = true, ["not"] = true,
}

local function check(s, where)
  if type(s) == "boolean" then return true end
  if type(s) ~= "table" then
    return nil, where .. " must be a schema table, got " .. type(s)
  end
  for k in pairs(s) do
    if type(k) ~= "string" then
      return nil, where .. " has a non-string key " .. tostring(k) .. " (a schema is a table of keywords)"
    end
    if not KNOWN[k] then
      return nil, where .. " has an unknown keyword '" .. k .. "'"
    end
  end
  if s.type ~= nil then
    for _, name in ipairs(type_list(s)) do
      if not TYPES[name] then
        return nil, where .. ".type: unknown type " .. show(name)
          .. " (one of object, array, string, number, integer, boolean, null)"
      end
    end
  end
  if s.properties ~= nil then
    if not is_object(s.properties) then return nil, where .. ".properties must be a table of schemas" end
    local names = {}
    for k in pairs(s.properties) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do
      local ok, err = check(s.properties[k], where .. ".properties." .. k)
      if not ok then return nil, err end
    end
  end
  if s.required ~= nil then
    if not is_array(s.required) then return nil, where .. ".required must be a list of property names" end
    for _, k in ipairs(s.required) do
      if type(k) ~= "string" then return nil, where .. ".required must hold strings, got " .. type(k) end
    end
  end
  if s.enum ~= nil and (not is_array(s.enum) or #s.enum == 0) then
    return nil, where .. ".enum must be a non-empty list"
  end
  for _, kw in ipairs { "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                        "minLength", "maxLength", "minItems", "maxItems" } do
    if s[kw] ~= nil and type(s[kw]) ~= "number" then
      return nil, where .. "." .. kw .. " must be a number, got " .. type(s[kw])
    end
  end
  if type(s.additionalProperties) == "table" then
    local ok, err = check(s.additionalProperties, where .. ".additionalProperties")
    if not ok then return nil, err end
  end
  if s.items ~= nil then
    local ok, err = check(s.items, where .. ".items")
    if not ok then return nil, err end
  end
  for _, kw in ipairs { "anyOf", "oneOf", "allOf" } do
    if s[kw] ~= nil then
      if not is_array(s[kw]) or #s[kw] == 0 then return nil, where .. "." .. kw .. " must be a non-empty list" end
      for i, sub in ipairs(s[kw]) do
        local ok, err = check(sub, where .. "." .. kw .. "[" .. i .. "]")
        if not ok then return nil, err end
      end
    end
  end
  return true
end

--- Check that `s` is a usable schema.
-- @tparam table s
-- @tparam[opt="parameters"] string where name used in messages
-- @treturn[1] true
-- @treturn[2] nil
-- @treturn[2] string message naming the field
function M.check(s, where)
  return check(s, where or "parameters")
end

--- Check that `s` is an object schema (what tool parameters must be).
function M.check_object_schema(s, where)
  where = where or "parameters"
  if type(s) ~= "table" then
    return nil, where .. " must be a JSON Schema table with type = \"object\", got " .. type(s)
  end
  if s.type ~= "object" then
    return nil, where .. ".type must be \"object\" (tool arguments are a JSON object), got "
      .. show(s.type)
  end
  return check(s, where)
end

local ARRAY_KEYWORDS = { required = true, enum = true, anyOf = true, oneOf = true,
                         allOf = true, examples = true }

--- A copy of `s` ready to encode for a provider: list-valued keywords are
-- marked as arrays, an empty `required` is dropped, `properties` stays an
-- object even when empty.
function M.prepare(s)
  if type(s) ~= "table" then return s end
  local out = {}
  for k, v in pairs(s) do
    if k == "required" and type(v) == "table" and #v == 0 then
      -- dropped: some providers reject `"required": {}` and `[]` says nothing
    elseif ARRAY_KEYWORDS[k] and type(v) == "table" then
      local a = json.array()
      for i, x in ipairs(v) do a[i] = M.prepare(x) end
      out[k] = a
    elseif k == "type" and type(v) == "table" then
      out[k] = json.array({ table.unpack(v) })
    elseif k == "properties" and type(v) == "table" then
      local p = {}
      for name, sub in pairs(v) do p[name] = M.prepare(sub) end
      out[k] = p
    elseif type(v) == "table" then
      out[k] = M.prepare(v)
    else
      out[k] = v
    end
  end
  return out
end

return M
