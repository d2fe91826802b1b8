--- JSON for lash: a thin Lua face over lash's C codec (src/2-runtime/json.c).
--
-- `[]` and `{}` stay apart: arrays decoded from text carry `json.array_mt`
-- (empty or not), and `json.encode` writes any table with that metatable
-- as an array even when empty. A table without it is an array when it is a
-- proper sequence (every key in 1..#t, #t > 0), else an object; so an
-- empty unmarked table is `{}`, which is what tool schemas
-- (`properties = {}`) need. `null` is `json.null` (a NULL light userdata,
-- the spelling lua-cjson used). `/` is never escaped; integers are written
-- exactly, floats with 14 significant digits.
-- @module lash.json
local core = require("lash.core").json

local M = {}

--- The JSON null value. Decoded `null`s are this.
M.null = core.null

--- Metatable that marks a table as a JSON array (only matters when empty).
M.array_mt = core.array_mt

local setmetatable, getmetatable, type, pcall, tostring = setmetatable, getmetatable, type, pcall, tostring
local array_mt = M.array_mt

--- Mark `t` (default: a new table) as a JSON array and return it.
-- @tparam[opt] table t
-- @treturn table t
function M.array(t)
  return setmetatable(t or {}, array_mt)
end

--- True when `t` is marked as an array.
function M.is_array(t)
  return getmetatable(t) == array_mt
end

--- Encode a Lua value as JSON text (object keys in no particular order).
-- Raises on values JSON cannot hold (functions, NaN, keys that are not
-- strings or numbers, nesting deeper than 200).
-- @param v
-- @treturn string
M.encode = core.encode

--- Encode with object keys sorted bytewise: the same value gives the same
-- bytes in every process (Lua's hash order is seeded per state). Provider
-- prompt caches match on exact prefixes, so request bodies use this.
-- Tables passed to `freeze` are encoded once and their text reused.
-- @param v
-- @treturn string
M.encode_canonical = core.encode_canonical

--- Promise that `t` and everything in it will not change again, so
-- `encode_canonical` encodes it once and reuses the text (the agent
-- freezes each history message's wire form when it enters the history).
-- @tparam table t
-- @treturn table t
M.freeze = core.freeze

--- Promise that the list `t` only grows at its end and that its elements
-- never change (frozen tables, strings, numbers), but for the last one,
-- which may be replaced: `encode_canonical` then copies the text of the
-- elements before the last as it last encoded them and encodes only the
-- others (a history's wire messages gain one or two a step; Anthropic's
-- last message changes as results merge into it). Always encoded as an
-- array, even when empty.
-- @tparam table t
-- @treturn table t
M.grow_only = core.grow_only

--- Like `encode` but returns nil, message instead of raising.
function M.try_encode(v)
  local ok, s = pcall(M.encode, v)
  if ok then return s end
  return nil, tostring(s)
end

--- Like `encode_canonical` but returns nil, message instead of raising.
-- Everything lash prints as JSON (events, `--json`, `sandbox list --json`)
-- goes through this, so its output is byte-for-byte stable.
function M.try_encode_canonical(v)
  local ok, s = pcall(M.encode_canonical, v)
  if ok then return s end
  return nil, tostring(s)
end

--- Decode JSON text. Raises "invalid JSON at character N: ..." on
-- malformed text. Arrays come back marked with `array_mt`; `null` is
-- `json.null`; whole numbers within 2^53 are integers.
-- @tparam string s
M.decode = core.decode

--- Like `decode` but returns nil, message instead of raising.
function M.try_decode(s)
  local ok, v = pcall(M.decode, s)
  if ok then return v end
  return nil, tostring(v)
end

local function copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = copy(x) end
  return setmetatable(out, getmetatable(v) == array_mt and array_mt or nil)
end

--- Deep copy of a JSON-shaped value, keeping array marks.
M.copy = copy

return M
