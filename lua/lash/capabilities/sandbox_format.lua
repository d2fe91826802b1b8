--- The text the sandbox capability shows the model, as pure functions:
-- `run_command` output, the `read_file` window and its notes, the
-- `list_directory` listing, the retry messages, the default instructions
-- and the attach note. No sandbox, no run: everything here is string in,
-- string out, so every format is tested string for string
-- (specs/sandbox_format_spec.lua). The rules are those of
-- shared/reference/harness-reference.md (sections 3-5) and, for the note,
-- attach-semantics.md section 5.4.
-- @module lash.capabilities.sandbox_format
local output = require("lash.core").output

local M = {}

--- A string as Python's repr shows it, the way the reference quotes paths
-- and ids in its messages: single quotes, or double quotes when the text
-- holds a `'` and no `"`; `\\`, the quote in use and control characters
-- escaped (`\n`, `\r`, `\t`, `\xNN`); everything else as it is.
-- @tparam string s
-- @treturn string
function M.quote(s)
  s = tostring(s)
  local q = (s:find("'", 1, true) and not s:find('"', 1, true)) and '"' or "'"
  local escaped = s:gsub("[%c\\'\"]", function(c)
    if c == "\\" then return "\\\\" end
    if c == q then return "\\" .. c end
    if c == "'" or c == '"' then return c end
    if c == "\n" then return "\\n" end
    if c == "\r" then return "\\r" end
    if c == "\t" then return "\\t" end
    return string.format("\\x%02x", c:byte())
  end)
  return q .. escaped .. q
end

--- A number as Python's repr shows it (the reference's messages format
-- floats that way): integers plainly, whole floats with ".0", others with
-- the shortest digits that read back the same, and nan/inf/-inf.
-- @tparam number n
-- @treturn string
function M.number(n)
  if n ~= n then return "nan" end
  if n == math.huge then return "inf" end
  if n == -math.huge then return "-inf" end
  if math.type(n) == "integer" then return string.format("%d", n) end
  if n == math.floor(n) and math.abs(n) < 1e16 then return string.format("%.1f", n) end
  for digits = 1, 17 do
    local s = string.format("%." .. digits .. "g", n)
    if tonumber(s) == n then return s end
  end
  return string.format("%.17g", n)
end

--- Format a byte count as the markers do ("1023B", "50.0KB", "5.0MB").
M.size = output.format_size

--- Round half to even (Python's round): 2.5 -> 2, 3.5 -> 4.
-- @tparam number x
-- @treturn integer
function M.round_half_even(x)
  local f = math.floor(x)
  local d = x - f
  local r
  if d > 0.5 then
    r = f + 1
  elseif d < 0.5 then
    r = f
  else
    r = (f % 2 == 0) and f or f + 1
  end
  return math.tointeger(r) or r
end

---------------------------------------------------------------------------
-- Deadlines

--- The per-command deadline in whole seconds:
-- `min(max(1, ceil(requested)), ceiling)`; rounding happens before
-- clamping, so the model can never make a command unbounded.
-- @tparam number requested seconds (positive, finite)
-- @tparam integer ceiling seconds
-- @treturn integer
function M.deadline(requested, ceiling)
  local d = math.max(1, math.ceil(requested))
  if d > ceiling then d = ceiling end
  return math.tointeger(d) or d
end

--- The retry message for a `timeout_seconds` that is not a positive
-- finite number, or nil when it is fine.
function M.check_timeout(t)
  if t == nil then return nil end
  if not (t > 0) or t == math.huge then
    -- the reference takes timeout_seconds as a float: 0 reads "0.0"
    return "timeout_seconds must be greater than 0, got " .. M.number(t + 0.0) .. "."
  end
  return nil
end

---------------------------------------------------------------------------
-- run_command

local function stream_part(label, text, truncated, o)
  if text == "" then return nil end
  text = output.utf8_repair(text)
  local body = output.truncate(text, { max_lines = o.max_lines, max_bytes = o.max_bytes,
                                       direction = "tail", already_truncated = truncated and true or false })
  return "[" .. label .. "]\n" .. body
end

--- What the model sees of a command: `[stdout]\n<body>` and
-- `[stderr]\n<body>` joined by a newline (stdout first, empty streams left
-- out, `(no output)` when both are empty), each stream decoded with
-- replacement and truncated separately keeping its tail (a cut made by the
-- backend's ring is marked even when the rest fits); then
-- `\n[timed out after 5s]`, or `\n[exit code: N]` for a non-zero exit.
-- @tparam table r the exec result (stdout, stderr, stdout_truncated,
--   stderr_truncated, exit_code, timed_out, applied_timeout)
-- @tparam table o `max_lines`, `max_bytes`, `deadline` (the seconds asked
--   for, shown when the backend reports no applied_timeout)
-- @treturn string
function M.command_output(r, o)
  local parts = {}
  parts[#parts + 1] = stream_part("stdout", r.stdout or "", r.stdout_truncated, o)
  parts[#parts + 1] = stream_part("stderr", r.stderr or "", r.stderr_truncated, o)
  local text = #parts > 0 and table.concat(parts, "\n") or "(no output)"
  if r.timed_out then
    local applied = r.applied_timeout or o.deadline
    text = text .. "\n[timed out after " .. M.number(applied) .. "s]"
  elseif r.exit_code ~= 0 then
    text = text .. "\n[exit code: " .. M.number(r.exit_code) .. "]"
  end
  return text
end

---------------------------------------------------------------------------
-- read_file

local function plural(n, word)
  return string.format("%d %s%s", n, word, n == 1 and "" or "s")
end

--- The retry message for a file over the read limit.
-- @tparam integer size
-- @tparam integer max
function M.too_large(size, max)
  return "File is " .. M.size(size) .. ", over the " .. M.size(max) .. " read limit. Read just the part you "
    .. "need with a shell command instead (e.g. head, tail, sed -n, or grep)."
end

M.NOT_UTF8 = "file is not valid UTF-8 text (it may be a binary file)."

-- Line starts of data: starts[i] is where line i begins; one trailing
-- newline does not start a line (an empty file is one empty line).
local function line_starts(data)
  local starts = { 1 }
  local pos = 1
  while true do
    local nl = data:find("\n", pos, true)
    if not nl then break end
    pos = nl + 1
    starts[#starts + 1] = pos
  end
  if #starts > 1 and starts[#starts] == #data + 1 then starts[#starts] = nil end
  return starts
end

local function line_at(data, starts, i)
  local nxt, e = starts[i + 1], nil
  if nxt then
    e = nxt - 2
  elseif data:byte(-1) == 10 then
    e = #data - 1
  else
    e = #data
  end
  return data:sub(starts[i], e)
end

--- The `read_file` result for a file's bytes: lines, 1-based, from
-- `offset` (default 1) for at most `limit` lines, within `max_lines` and
-- `max_bytes` keeping the head, with the reference's notes.
-- @tparam string data the file's bytes
-- @tparam table o `offset`, `limit` (nil or integers), `max_lines`,
--   `max_bytes`
-- @treturn[1] string the text for the model
-- @treturn[2] nil
-- @treturn[2] string a retry message
function M.file_window(data, o)
  local offset, limit = o.offset, o.limit
  if offset ~= nil and offset < 1 then
    return nil, "offset must be >= 1 (lines are 1-indexed), got " .. M.number(offset)
  end
  if limit ~= nil and limit < 1 then return nil, "limit must be >= 1, got " .. M.number(limit) end
  if not output.is_utf8(data) then return nil, M.NOT_UTF8 end
  local starts = line_starts(data)
  local total = #starts
  local start = offset and (offset - 1) or 0
  if start >= total then
    return nil, string.format("offset %s is beyond end of file (%d lines total)", M.number(offset), total)
  end
  local stop = total
  if limit then stop = math.min(start + limit, total) end
  local max_lines, max_bytes = o.max_lines, o.max_bytes
  -- the head-direction line/byte cut over lines [start, stop)
  local first = line_at(data, starts, start + 1)
  if #first > max_bytes then
    local cont = ""
    if start + 2 <= total then cont = " Use offset=" .. (start + 2) .. " to continue." end
    return "[Line " .. (start + 1) .. " is " .. M.size(#first) .. ", exceeds the " .. M.size(max_bytes)
      .. " limit and was omitted." .. cont .. "]"
  end
  local kept, used, by = {}, 0, nil
  for i = start + 1, stop do
    if #kept >= max_lines then by = "lines" break end
    local line = (i == start + 1) and first or line_at(data, starts, i)
    local cost = #line + (#kept > 0 and 1 or 0)
    if used + cost > max_bytes then by = "bytes" break end
    kept[#kept + 1] = line
    used = used + cost
  end
  local body = table.concat(kept, "\n")
  if by then
    local s, e = start + 1, start + #kept
    return string.format("%s\n\n[Showing lines %d-%d of %d%s. Use offset=%d to continue.]", body, s, e, total,
      by == "bytes" and (" (" .. M.size(max_bytes) .. " limit)") or "", e + 1)
  end
  if stop < total then
    return string.format("%s\n\n[%d more lines in file. Use offset=%d to continue.]", body, total - stop, stop + 1)
  end
  return body
end

---------------------------------------------------------------------------
-- list_directory

--- The `list_directory` result: names sorted by byte order before `/` is
-- appended to directories, one per line, head-truncated with the marker
-- after the list; `(empty)` when there is nothing.
-- @tparam table entries `{ {name=, kind=}, ... }` (kind "dir" for
--   directories), any order
-- @tparam table o `max_lines`, `max_bytes`
-- @treturn string
function M.listing(entries, o)
  if #entries == 0 then return "(empty)" end
  local sorted = {}
  for i, e in ipairs(entries) do sorted[i] = e end
  table.sort(sorted, function(a, b) return a.name < b.name end)
  local names = {}
  for i, e in ipairs(sorted) do names[i] = e.kind == "dir" and (e.name .. "/") or e.name end
  return (output.truncate(table.concat(names, "\n"),
    { max_lines = o.max_lines, max_bytes = o.max_bytes, direction = "head" }))
end

---------------------------------------------------------------------------
-- write_file

--- The `write_file` result.
-- "1 byte" where the reference says "1 bytes" (a deliberate difference,
-- listed in docs).
function M.wrote(n, path)
  return "Wrote " .. n .. (n == 1 and " byte" or " bytes") .. " to " .. M.quote(path) .. "."
end

M.NOT_ENCODABLE = "content contains characters that cannot be encoded as UTF-8 (unpaired surrogates)."

---------------------------------------------------------------------------
-- Tool descriptions, as pydantic-ai renders the reference's docstrings:
-- run_command's has a Returns: section, so it comes as XML (summary and
-- returns, no type tag); the others are plain text.

M.RUN_COMMAND = "<summary>Run a shell command in the sandbox and return its output.\n\n"
  .. "The command runs through `sh -c`, so pipes, redirection, `&&`, and globs\n"
  .. "work. A non-zero exit is reported, not raised, so you can react to it.</summary>\n"
  .. "<returns>\n<description>Labelled stdout/stderr output, with an exit code on non-zero exit."
  .. "</description>\n</returns>"
M.READ_FILE = "Read a text file from the sandbox and return its contents.\n\n"
  .. "Large files are truncated to a safety cap; the result ends with the next\n"
  .. "`offset` to use to page through the rest."
M.WRITE_FILE = "Write text to a file in the sandbox, creating parent directories."
M.LIST_DIRECTORY = "List the entries in a sandbox directory (directories shown with a trailing `/`)."

M.PATH = "Path to the file inside the sandbox. Relative paths are resolved\n"
  .. "against the working directory used by `run_command`."
M.LIST_PATH = "Directory to list. Relative paths (including the default `.`) are\n"
  .. "resolved against the working directory used by `run_command`."

---------------------------------------------------------------------------
-- Instructions

local WORDS = {
  ["local"] = { "local sandbox", "container on this machine" },
  modal = { "Modal sandbox", "cloud container" },
}

--- The default instructions, as a template whose `{{ tools.x }}` render
-- to the names actually exposed (a prefix included).
-- @tparam table o `backend`, `reused` (attached or shared: the sandbox
--   persists across runs), `default_timeout`, `max_timeout` (seconds, as
--   enforced)
-- @treturn string
function M.instructions(o)
  local w = WORDS[o.backend] or { "sandbox (" .. o.backend .. " backend)", "environment" }
  local function tool(name) return "`{{ tools." .. name .. " or \"" .. name .. "\" }}`" end
  return "You have a " .. w[1] .. ": an isolated" .. (o.reused and " " or ", ephemeral ") .. w[2] .. ". "
    .. "Use " .. tool("run_command") .. " to run shell commands in it, and " .. tool("read_file") .. " / "
    .. tool("write_file") .. " / " .. tool("list_directory") .. " to manage files. "
    .. "Commands run through `sh`, so pipes and redirection work. "
    .. "A command times out after " .. o.default_timeout .. "s unless you pass `timeout_seconds` (up to "
    .. o.max_timeout .. "s). "
    .. (o.reused and "This sandbox persists across runs, so files from earlier runs can still be present."
                 or "The sandbox is reset between runs, so persist anything important outside it.")
end

---------------------------------------------------------------------------
-- The attach note (issue 7): fixed when the run attaches, appended to the
-- run_command description, so tool definitions stay byte-identical across
-- the steps of a run and the provider's prompt cache keeps hitting.

--- What a network policy lets the sandbox reach, or nil for none known.
-- @tparam table p `{block_network=, allow_egress_to=, allow_egress_to_cidrs=}`
-- @treturn string
function M.network_text(p)
  if not p then
    return "Its network access is whatever the task that set it up allowed; test before relying on it."
  end
  if not p.block_network then return "This sandbox has outbound network access." end
  local hosts, cidrs = p.allow_egress_to or {}, p.allow_egress_to_cidrs or {}
  local h, c = #hosts > 0 and table.concat(hosts, ", "), #cidrs > 0 and table.concat(cidrs, ", ")
  local by_name = h and "these hosts, over HTTPS on port 443 only: " .. h
  local by_address = c and "these address ranges, on any port: " .. c
  if h and c then
    return "This sandbox reaches only " .. by_name .. "; and " .. by_address .. ". Anything else will fail. "
      .. "The hosts accept HTTPS only, so plain HTTP to them fails; the address ranges accept any port. "
      .. "Hostnames resolve, but only listed hosts and addresses answer."
  elseif h then
    return "This sandbox reaches only " .. by_name .. ". Anything else, and plain HTTP to any host, will fail."
  elseif c then
    return "This sandbox reaches only " .. by_address .. ". Anything else will fail; hostnames still resolve, "
      .. "but only those addresses answer."
  end
  return "This sandbox has NO network access, including DNS, so installing packages or downloading "
    .. "anything will fail. Work with what the image already has."
end

--- How much lifetime remained when the run began.
-- @tparam number|nil remaining seconds, nil when unknown
function M.clock_text(remaining)
  if remaining == nil then return "How long it has left is not known." end
  if remaining < 60 then
    return "Under a minute of its lifetime remained when this run began, so finish up."
  end
  local m = M.round_half_even(remaining / 60)
  return string.format("About %d minute%s of its lifetime remained when this run began.", m, m == 1 and "" or "s")
end

M.NOTE_FIRST = "This sandbox was set up by an earlier task, and your files stay in it after this run for a "
  .. "later task to collect."
M.NOTE_BEFORE_ATTACH = "This sandbox was set up by an earlier task."

--- The note: three sentences joined by single spaces.
-- @tparam table a `network` (decoded policy or nil), `remaining` (seconds
--   or nil)
function M.attach_note(a)
  return M.NOTE_FIRST .. " " .. M.network_text(a.network) .. " " .. M.clock_text(a.remaining)
end

return M
