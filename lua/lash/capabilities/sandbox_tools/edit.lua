--- edit_file: replace an exact string in a file. The text work (finding
-- the occurrences, the CRLF retry, the retry prompts, the report) is pure
-- and lives here; the tool reads and writes through the sandbox.
-- @module lash.capabilities.sandbox_tools.edit
local text = require "lash.capabilities.sandbox_tools.text"

local M = {}

local MAX_LISTED = 10      -- line numbers named in a "not unique" prompt
local SNIPPET_AROUND = 3   -- context lines shown around a single edit

local function plural(n, word)
  return string.format("%d %s%s", n, word, n == 1 and "" or "s")
end

-- Start offsets of the non-overlapping occurrences of s in t.
local function occurrences(t, s)
  local at, pos = {}, 1
  while true do
    local i = t:find(s, pos, true)
    if not i then return at end
    at[#at + 1] = i
    pos = i + #s
  end
end

-- Line numbers of offsets (ascending), in one pass over t.
local function lines_at(t, offsets)
  local out, line, pos = {}, 1, 1
  for k, off in ipairs(offsets) do
    for _ in t:sub(pos, off - 1):gmatch("\n") do line = line + 1 end
    pos = off
    out[k] = line
  end
  return out
end

local function count_lines(s)
  local n = 1
  for _ in s:gmatch("\n") do n = n + 1 end
  return n
end

local function list_lines(ls)
  local shown = {}
  for i = 1, math.min(#ls, MAX_LISTED) do shown[i] = tostring(ls[i]) end
  local s = table.concat(shown, ", ")
  if #ls > MAX_LISTED then s = s .. ", ..." end
  return s
end

-- Where old_string nearly occurs: the first lines of windows of the file
-- whose lines equal old_string's lines once leading and trailing
-- whitespace is ignored.
local function near_misses(t, old)
  local want = {}
  for l in (old .. "\n"):gmatch("(.-)\r?\n") do want[#want + 1] = l:match("^%s*(.-)%s*$") end
  while #want > 0 and want[#want] == "" do want[#want] = nil end
  if #want == 0 then return {} end
  local lines = text.split(t)
  local found = {}
  for i = 1, #lines - #want + 1 do
    local ok = true
    for j = 1, #want do
      if lines[i + j - 1]:match("^%s*(.-)%s*$") ~= want[j] then ok = false break end
    end
    if ok then found[#found + 1] = i end
  end
  return found
end

--- Replace `old` with `new` in the decoded text `t`.
-- @treturn[1] string the new text
-- @treturn[1] table `{count =, lines = {first line of each occurrence},
--   new_lines = lines in each replacement}`
-- @treturn[2] nil
-- @treturn[2] string the retry prompt
function M.replace(t, old, new, replace_all)
  if old == new then
    return nil, "old_string and new_string are the same; there is nothing to change."
  end
  local at = occurrences(t, old)
  if #at == 0 and not old:find("\r", 1, true) and old:find("\n", 1, true) and t:find("\r\n", 1, true) then
    -- a CRLF file edited with LF strings: match and write in the file's endings
    local crlf_old = old:gsub("\n", "\r\n")
    local crlf_at = occurrences(t, crlf_old)
    if #crlf_at > 0 then
      old, new, at = crlf_old, (new:gsub("\r?\n", "\r\n")), crlf_at
    end
  end
  if #at == 0 then
    local near = near_misses(t, old)
    local msg = "old_string was not found in the file."
    if #near > 0 then
      msg = msg .. " Lines that match it when leading and trailing whitespace is ignored start at line "
        .. list_lines(near) .. ": copy old_string from the file exactly, including indentation."
    else
      msg = msg .. " Read the file again (read_file) and copy old_string from it exactly, including "
        .. "whitespace and line breaks."
    end
    return nil, msg
  end
  local lines = lines_at(t, at)
  if #at > 1 and not replace_all then
    return nil, "old_string occurs " .. #at .. " times (at lines " .. list_lines(lines) .. "). Include more "
      .. "surrounding lines in old_string so it matches exactly once, or set replace_all to true to change "
      .. "every occurrence."
  end
  local out, pos = {}, 1
  for _, i in ipairs(at) do
    out[#out + 1] = t:sub(pos, i - 1)
    out[#out + 1] = new
    pos = i + #old
  end
  out[#out + 1] = t:sub(pos)
  -- where each replacement lands in the new text
  local new_first, shift = {}, 0
  local old_n, new_n = count_lines(old) - 1, count_lines(new) - 1
  for k, l in ipairs(lines) do
    new_first[k] = l + shift
    shift = shift + new_n - old_n
  end
  return table.concat(out), { count = #at, lines = lines, new_lines = new_first, span = new_n + 1 }
end

--- The report of an edit: how many replacements where, and for a single
-- one the edited lines with their numbers (cat -n style) and a few lines
-- around them.
-- @tparam string path as the model gave it
-- @tparam string t the new text
-- @tparam table info from `replace`
function M.report(path, t, info, quote)
  local head
  if info.count == 1 then
    local a, b = info.new_lines[1], info.new_lines[1] + info.span - 1
    head = "Edited " .. quote(path) .. ": 1 replacement, now " .. (a == b and ("line " .. a)
      or ("lines " .. a .. "-" .. b)) .. "."
    local ls = text.split(t)
    local from, to = math.max(1, a - SNIPPET_AROUND), math.min(#ls, b + SNIPPET_AROUND)
    if to - from > 40 then return head end
    local body = {}
    for i = from, to do body[#body + 1] = string.format("%6d\t%s", i, ls[i]) end
    if #body == 0 then return head end
    return head .. "\n" .. table.concat(body, "\n")
  end
  return "Edited " .. quote(path) .. ": " .. plural(info.count, "replacement") .. ", at lines "
    .. list_lines(info.new_lines) .. " now."
end

return M
