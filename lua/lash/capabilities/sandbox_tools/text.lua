--- A text file as the edit tools see it: bytes decoded to UTF-8 text with
-- the encoding remembered (UTF-8 with or without a byte-order mark,
-- UTF-16 LE/BE with one, or any other bytes read as Latin-1 so that every
-- byte survives a round trip), and lines split from their endings so a
-- CRLF file keeps its CRLFs. edit_file and apply_patch both read and
-- write files through this module: one owner for encodings and endings.
-- @module lash.capabilities.sandbox_tools.text
local runtime = require "lash.runtime"

local is_utf8 = runtime.output.is_utf8

local M = {}

local BOM8 = "\239\187\191"

-- UTF-16 code units (a string of 2-byte units) to UTF-8; nil on a lone
-- surrogate.
local function utf16_decode(data, little)
  local out, i, n = {}, 1, #data
  if n % 2 == 1 then return nil end
  local function unit(at)
    local a, b = data:byte(at, at + 1)
    if little then return a + b * 256 end
    return a * 256 + b
  end
  while i <= n do
    local u = unit(i)
    i = i + 2
    if u >= 0xD800 and u <= 0xDBFF then
      if i > n then return nil end
      local lo = unit(i)
      if lo < 0xDC00 or lo > 0xDFFF then return nil end
      i = i + 2
      u = 0x10000 + (u - 0xD800) * 0x400 + (lo - 0xDC00)
    elseif u >= 0xDC00 and u <= 0xDFFF then
      return nil
    end
    out[#out + 1] = utf8.char(u)
  end
  return table.concat(out)
end

local function utf16_encode(text, little)
  local out = {}
  local function put(u)
    local hi, lo = u // 256, u % 256
    out[#out + 1] = little and string.char(lo, hi) or string.char(hi, lo)
  end
  for _, c in utf8.codes(text) do
    if c >= 0x10000 then
      c = c - 0x10000
      put(0xD800 + c // 0x400)
      put(0xDC00 + c % 0x400)
    else
      put(c)
    end
  end
  return table.concat(out)
end

local function latin1_decode(data)
  return (data:gsub("[\128-\255]", function(ch) return utf8.char(ch:byte()) end))
end

-- Latin-1 back to bytes; nil when the text holds a character past U+00FF
-- (the model wrote something this encoding cannot hold).
local function latin1_encode(text)
  local out = {}
  for _, c in utf8.codes(text) do
    if c > 255 then return nil end
    out[#out + 1] = string.char(c)
  end
  return table.concat(out)
end

--- Decode a file's bytes.
-- @tparam string data
-- @treturn[1] string the text (UTF-8)
-- @treturn[1] table the encoding, for `encode`
-- @treturn[2] nil
-- @treturn[2] string why it is not text (a binary file)
function M.decode(data)
  local b1, b2 = data:byte(1, 2)
  if b1 == 0xFF and b2 == 0xFE then
    local t = utf16_decode(data:sub(3), true)
    if t then return t, { name = "UTF-16LE", bom = "\255\254", little = true } end
  elseif b1 == 0xFE and b2 == 0xFF then
    local t = utf16_decode(data:sub(3), false)
    if t then return t, { name = "UTF-16BE", bom = "\254\255", little = false } end
  end
  if data:find("\0", 1, true) then
    return nil, "it is a binary file (it contains NUL bytes)"
  end
  if data:sub(1, 3) == BOM8 and is_utf8(data) then
    return data:sub(4), { name = "UTF-8", bom = BOM8 }
  end
  if is_utf8(data) then return data, { name = "UTF-8", bom = "" } end
  return latin1_decode(data), { name = "Latin-1", bom = "" }
end

--- Encode text back the way `decode` found it.
-- @treturn[1] string bytes
-- @treturn[2] nil
-- @treturn[2] string why (a character the encoding cannot hold)
function M.encode(text, enc)
  if enc.name == "UTF-8" then return enc.bom .. text end
  if enc.name == "Latin-1" then
    local b = latin1_encode(text)
    if not b then
      return nil, "the file is not UTF-8 (it was read as Latin-1), and the new text has characters Latin-1 "
        .. "cannot hold; use only characters up to U+00FF, or rewrite the file with write_file"
    end
    return b
  end
  return enc.bom .. utf16_encode(text, enc.little)
end

--- Split text into lines without their endings. Returns the lines, the
-- ending of each (`"\n"`, `"\r\n"` or `""` for a last line with none), and
-- the file's preferred ending (its first one; `"\n"` when it has none).
function M.split(text)
  local lines, ends = {}, {}
  local pos, preferred = 1, nil
  while true do
    local nl = text:find("\n", pos, true)
    if not nl then break end
    local line = text:sub(pos, nl - 1)
    local e = "\n"
    if line:byte(-1) == 13 then
      line, e = line:sub(1, -2), "\r\n"
    end
    preferred = preferred or e
    lines[#lines + 1], ends[#ends + 1] = line, e
    pos = nl + 1
  end
  if pos <= #text then
    lines[#lines + 1], ends[#ends + 1] = text:sub(pos), ""
  end
  return lines, ends, preferred or "\n"
end

--- Join lines and their endings back into text.
function M.join(lines, ends)
  local out = {}
  for i, l in ipairs(lines) do
    out[#out + 1] = l
    out[#out + 1] = ends[i] or ""
  end
  return table.concat(out)
end

--- Line number (1-based) of byte offset `at` in text.
function M.line_of(text, at)
  local n = 1
  for _ in text:sub(1, at - 1):gmatch("\n") do n = n + 1 end
  return n
end

return M
