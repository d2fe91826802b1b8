--- JSON for the agent core: a thin layer over lua-cjson that keeps `[]`
-- and `{}` apart and gives `null` one spelling.
--
-- lua-cjson (2.1.0, Debian's) encodes every empty table as `{}` and decodes
-- `[]` into an unmarked empty table, so a round trip turns `[]` into `{}`.
-- That corrupts tool arguments (`{"items": []}`) sent back to a provider.
-- Here, arrays decoded from text carry `json.array_mt` when they are empty,
-- and `json.encode` writes any table with that metatable as an array.
-- Tables without it keep cjson's rule: empty is an object, which is what
-- tool schemas (`properties = {}`) need.
-- @module lash.json
local cjson = require "cjson"

local M = {}

local codec = cjson.new()
codec.encode_sparse_array(false)
codec.encode_number_precision(14)
codec.decode_max_depth(200)
codec.encode_max_depth(200)

--- The JSON null value (cjson's lightuserdata). Decoded `null`s are this.
M.null = codec.null

--- Metatable that marks a table as a JSON array (only matters when empty).
M.array_mt = { __name = "lash.json.array" }

--- Mark `t` (default: a new table) as a JSON array and return it.
-- @tparam[opt] table t
-- @treturn table t
function M.array(t)
  return setmetatable(t or {}, M.array_mt)
end

--- True when `t` is marked as an array.
function M.is_array(t)
  return getmetatable(t) == M.array_mt
end

-- A sentinel string cjson will encode verbatim; replaced by `[]` afterwards.
-- The random part makes a collision with real content practically impossible.
local SENTINEL
do
  local t = {}
  for i = 1, 12 do t[i] = string.char(math.random(97, 122)) end
  SENTINEL = "\1lash-empty-array-" .. table.concat(t) .. "\1"
end
local SENTINEL_JSON = codec.encode(SENTINEL)

-- Does v contain an empty table marked as an array?
local function has_empty_array(v, depth)
  if depth > 200 then return false end
  if getmetatable(v) == M.array_mt and next(v) == nil then return true end
  for _, x in pairs(v) do
    if type(x) == "table" and has_empty_array(x, depth + 1) then return true end
  end
  return false
end

-- Copy v with every empty marked array replaced by the sentinel.
local function substitute(v)
  if getmetatable(v) == M.array_mt and next(v) == nil then return SENTINEL end
  local out = {}
  for k, x in pairs(v) do
    out[k] = type(x) == "table" and substitute(x) or x
  end
  return out
end

--- Encode a Lua value as JSON text.
-- Raises on values JSON cannot hold (functions, sparse arrays, NaN).
-- @param v
-- @treturn string
function M.encode(v)
  if type(v) == "table" and has_empty_array(v, 0) then
    local s = codec.encode(substitute(v))
    s = s:gsub(SENTINEL_JSON:gsub("%p", "%%%0"), "[]")
    return (s:gsub("\\/", "/"))
  end
  if v == nil then return "null" end
  return (codec.encode(v):gsub("\\/", "/"))
end

-- cjson escapes "/" as "\/"; both encoders undo that (a "\/" in cjson's
-- output is always that escape: a literal backslash is written "\\").
--
-- Canonical encoding: object keys sorted, so equal values give equal
-- bytes in every process (Lua's hash order is seeded per state). Provider
-- prompt caches match on exact prefixes, so request bodies use this.
local concat, sort, fmt, mtype = table.concat, table.sort, string.format, math.type
local encode_scalar = codec.encode

local function canon(v, out, n, depth)
  local tv = type(v)
  if tv == "string" then
    n = n + 1; out[n] = encode_scalar(v)
  elseif tv == "number" then
    n = n + 1
    if mtype(v) == "integer" then out[n] = fmt("%d", v) else out[n] = encode_scalar(v) end
  elseif tv == "boolean" then
    n = n + 1; out[n] = v and "true" or "false"
  elseif v == nil or v == M.null then
    n = n + 1; out[n] = "null"
  elseif tv == "table" then
    if depth > 200 then error("cannot encode: nested too deeply (a cycle?)", 0) end
    local len = #v
    local marked = getmetatable(v) == M.array_mt
    if marked or len > 0 then
      -- a proper sequence encodes as an array
      local count = 0
      for _ in pairs(v) do count = count + 1 end
      if count == len then
        n = n + 1; out[n] = "["
        for i = 1, len do
          if i > 1 then n = n + 1; out[n] = "," end
          n = canon(v[i], out, n, depth + 1)
        end
        n = n + 1; out[n] = "]"
        return n
      end
    end
    local keys, nk = {}, 0
    for k in pairs(v) do
      local tk = type(k)
      if tk ~= "string" then
        if tk == "number" then k = fmt(mtype(k) == "integer" and "%d" or "%.14g", k)
        else error("cannot encode a table key of type " .. tk, 0) end
      end
      nk = nk + 1; keys[nk] = k
    end
    sort(keys)
    n = n + 1; out[n] = "{"
    for i = 1, nk do
      local k = keys[i]
      local x = v[k]
      if x == nil then x = v[tonumber(k)] end
      if i > 1 then n = n + 1; out[n] = "," end
      n = n + 1; out[n] = encode_scalar(k)
      n = n + 1; out[n] = ":"
      n = canon(x, out, n, depth + 1)
    end
    n = n + 1; out[n] = "}"
  else
    error("cannot encode a " .. tv .. " as JSON", 0)
  end
  return n
end

--- Encode with object keys sorted: the same value gives the same bytes in
-- every process. Slower than `encode`; used for request bodies.
function M.encode_canonical(v)
  local out = {}
  local n = canon(v, out, 0, 0)
  return (concat(out, "", 1, n):gsub("\\/", "/"))
end

--- Like `encode` but returns nil, message instead of raising.
function M.try_encode(v)
  local ok, s = pcall(M.encode, v)
  if ok then return s end
  return nil, tostring(s)
end

---------------------------------------------------------------------------
-- Decoding. cjson is used unless the text may hold an empty array; then a
-- small Lua decoder that marks arrays runs instead. `%[%s*%]` can also match
-- inside a string, which only costs the slower path, never correctness.

local byte, sub, find = string.byte, string.sub, string.find

local function decode_error(s, pos, what)
  error(string.format("invalid JSON at character %d: %s", pos, what), 0)
end

local parse_value
local integers

local function skip_ws(s, pos)
  return (find(s, "[^ \t\r\n]", pos)) or #s + 1
end

local escapes = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f",
                  n = "\n", r = "\r", t = "\t" }

local function utf8_char(cp)
  return utf8.char(cp)
end

local function parse_string(s, pos)
  -- pos is at the opening quote
  local buf, i = {}, pos + 1
  while true do
    local j = find(s, '["\\%c]', i)
    if not j then decode_error(s, pos, "unterminated string") end
    local c = sub(s, j, j)
    if c == '"' then
      buf[#buf + 1] = sub(s, i, j - 1)
      return table.concat(buf), j + 1
    elseif c == "\\" then
      buf[#buf + 1] = sub(s, i, j - 1)
      local e = sub(s, j + 1, j + 1)
      if e == "u" then
        local hex = sub(s, j + 2, j + 5)
        if not hex:match("^%x%x%x%x$") then decode_error(s, j, "bad \\u escape") end
        local cp = tonumber(hex, 16)
        local nxt = j + 6
        if cp >= 0xD800 and cp <= 0xDBFF and sub(s, nxt, nxt + 1) == "\\u" then
          local lo = tonumber(sub(s, nxt + 2, nxt + 5), 16)
          if lo and lo >= 0xDC00 and lo <= 0xDFFF then
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
            nxt = nxt + 6
          end
        end
        buf[#buf + 1] = utf8_char(cp)
        i = nxt
      else
        local r = escapes[e]
        if not r then decode_error(s, j, "bad escape") end
        buf[#buf + 1] = r
        i = j + 2
      end
    else
      decode_error(s, j, "control character in string")
    end
  end
end

local function parse_number(s, pos)
  local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
  if not num or num == "" or num == "-" then decode_error(s, pos, "unexpected character") end
  local v = math.tointeger(tonumber(num)) or tonumber(num)
  if v == nil then decode_error(s, pos, "bad number") end
  return v, pos + #num
end

local function parse_array(s, pos, depth)
  local arr, n = M.array(), 0
  pos = skip_ws(s, pos + 1)
  if byte(s, pos) == 93 then return arr, pos + 1 end -- ]
  while true do
    local v
    v, pos = parse_value(s, pos, depth)
    n = n + 1
    arr[n] = v
    pos = skip_ws(s, pos)
    local c = byte(s, pos)
    if c == 93 then return arr, pos + 1 end
    if c ~= 44 then decode_error(s, pos, "expected ',' or ']'") end
    pos = skip_ws(s, pos + 1)
  end
end

local function parse_object(s, pos, depth)
  local obj = {}
  pos = skip_ws(s, pos + 1)
  if byte(s, pos) == 125 then return obj, pos + 1 end -- }
  while true do
    if byte(s, pos) ~= 34 then decode_error(s, pos, "expected a string key") end
    local k
    k, pos = parse_string(s, pos)
    pos = skip_ws(s, pos)
    if byte(s, pos) ~= 58 then decode_error(s, pos, "expected ':'") end
    local v
    v, pos = parse_value(s, skip_ws(s, pos + 1), depth)
    obj[k] = v
    pos = skip_ws(s, pos)
    local c = byte(s, pos)
    if c == 125 then return obj, pos + 1 end
    if c ~= 44 then decode_error(s, pos, "expected ',' or '}'") end
    pos = skip_ws(s, pos + 1)
  end
end

function parse_value(s, pos, depth)
  if depth > 200 then decode_error(s, pos, "too deeply nested") end
  pos = skip_ws(s, pos)
  local c = byte(s, pos)
  if c == 123 then return parse_object(s, pos, depth + 1)
  elseif c == 91 then return parse_array(s, pos, depth + 1)
  elseif c == 34 then return parse_string(s, pos)
  elseif sub(s, pos, pos + 3) == "true" then return true, pos + 4
  elseif sub(s, pos, pos + 4) == "false" then return false, pos + 5
  elseif sub(s, pos, pos + 3) == "null" then return M.null, pos + 4
  elseif c == nil then decode_error(s, pos, "unexpected end of text")
  end
  return parse_number(s, pos)
end

local function lua_decode(s)
  local v, pos = parse_value(s, 1, 0)
  pos = skip_ws(s, pos)
  if pos <= #s then decode_error(s, pos, "trailing characters") end
  return v
end

-- cjson decodes every number as a float; whole numbers become integers,
-- so `1` reaches Lua as 1, not 1.0 (which prints as "1.0").
local function as_integer(x)
  if x == math.floor(x) and x > -2^53 and x < 2^53 then return math.tointeger(x) end
  return x
end

function integers(t, depth)
  if depth > 200 then return t end
  for k, x in pairs(t) do
    if type(x) == "number" then
      t[k] = as_integer(x)
    elseif type(x) == "table" then
      integers(x, depth + 1)
    end
  end
  return t
end

--- Decode JSON text. Raises "invalid JSON ..." on malformed text.
-- Empty arrays come back marked with `array_mt`; `null` is `json.null`.
-- @tparam string s
function M.decode(s)
  if type(s) ~= "string" then
    error("json.decode expects a string, got " .. type(s), 2)
  end
  if find(s, "%[%s*%]") then return lua_decode(s) end
  local ok, v = pcall(codec.decode, s)
  if ok then
    if type(v) == "table" then return integers(v, 0) end
    return type(v) == "number" and as_integer(v) or v
  end
  -- cjson refuses a lone surrogate escape (a provider can send one); the Lua
  -- decoder keeps it as its WTF-8 bytes, so the text is invalid UTF-8 and a
  -- tool can say what is wrong with it instead of a parse error
  if tostring(v):find("unicode escape", 1, true) then return lua_decode(s) end
  error("invalid JSON: " .. tostring(v):gsub("^Expected", "expected"), 0)
end

--- Like `decode` but returns nil, message instead of raising.
function M.try_decode(s)
  local ok, v = pcall(M.decode, s)
  if ok then return v end
  return nil, tostring(v)
end

--- Deep copy of a JSON-shaped value, keeping array marks.
function M.copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = M.copy(x) end
  return setmetatable(out, getmetatable(v) == M.array_mt and M.array_mt or nil)
end

return M
