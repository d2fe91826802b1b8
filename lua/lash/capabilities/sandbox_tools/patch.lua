--- apply_patch: parse a patch (Codex's `*** Begin Patch` format, or a
-- unified diff as `diff -u` and `git diff` write it) and work out every
-- file it changes, in memory, before anything is written: a patch either
-- applies whole or changes nothing.
--
-- Codex's format follows the grammar and matching rules of Codex's own
-- apply_patch (openai/codex, codex-rs/apply-patch: parser.rs,
-- seek_sequence.rs, text_file.rs): markers may be padded with whitespace,
-- the first hunk of an update may omit its `@@`, context is found exactly,
-- then ignoring trailing whitespace, then ignoring surrounding whitespace,
-- then with typographic punctuation read as ASCII; an update keeps each
-- untouched line's ending, gives new lines the file's first ending, and
-- ends the file with a newline. Unified diffs are applied as `git apply`
-- does (context must match, hunks in order, a hunk may have moved from
-- the line its header names), with `\ No newline at end of file` honoured.
-- @module lash.capabilities.sandbox_tools.patch
local text = require "lash.capabilities.sandbox_tools.text"

local M = {}

---------------------------------------------------------------------------
-- Whitespace and punctuation, as Codex compares lines

-- Unicode White_Space beyond ASCII, as UTF-8 (what Rust's trim strips).
local UNICODE_SPACES = {
  "\194\133", "\194\160", "\225\154\128", "\226\128\128", "\226\128\129", "\226\128\130", "\226\128\131",
  "\226\128\132", "\226\128\133", "\226\128\134", "\226\128\135", "\226\128\136", "\226\128\137",
  "\226\128\138", "\226\128\168", "\226\128\169", "\226\128\175", "\226\129\159", "\227\128\128",
}

local function rtrim(s)
  while true do
    local t = s:match("^(.-)[ \t\n\v\f\r]+$") or s
    local cut = false
    if t:byte(-1) and t:byte(-1) >= 128 then
      for _, sp in ipairs(UNICODE_SPACES) do
        if #t >= #sp and t:sub(-#sp) == sp then t, cut = t:sub(1, -#sp - 1), true break end
      end
    end
    s = t
    if not cut then return s end
  end
end

local function ltrim(s)
  while true do
    local t = s:match("^[ \t\n\v\f\r]+(.*)$") or s
    local cut = false
    if t:byte(1) and t:byte(1) >= 128 then
      for _, sp in ipairs(UNICODE_SPACES) do
        if t:sub(1, #sp) == sp then t, cut = t:sub(#sp + 1), true break end
      end
    end
    s = t
    if not cut then return s end
  end
end

local function trim(s) return ltrim(rtrim(s)) end
M.trim = trim

-- Typographic punctuation and odd spaces read as their ASCII forms.
local PUNCT = {}
for _, c in ipairs { 0x2010, 0x2011, 0x2012, 0x2013, 0x2014, 0x2015, 0x2212 } do PUNCT[utf8.char(c)] = "-" end
for _, c in ipairs { 0x2018, 0x2019, 0x201A, 0x201B } do PUNCT[utf8.char(c)] = "'" end
for _, c in ipairs { 0x201C, 0x201D, 0x201E, 0x201F } do PUNCT[utf8.char(c)] = '"' end
for _, c in ipairs { 0x00A0, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A,
                     0x202F, 0x205F, 0x3000 } do PUNCT[utf8.char(c)] = " " end

local function normalise(s)
  s = trim(s)
  if not s:find("[\194-\244]") then return s end
  return (s:gsub("[\194-\244][\128-\191]*", PUNCT))
end

-- Where `pattern` (a list of lines) first occurs in `lines` at or after
-- `start`, with ever looser comparisons; with `eof`, only at the very end.
local function seek(lines, pattern, start, eof)
  local np, nl = #pattern, #lines
  if np == 0 then return start end
  if np > nl then return nil end
  local from = eof and (nl - np + 1) or start
  local passes = {
    function(a, b) return a == b end,
    function(a, b) return rtrim(a) == rtrim(b) end,
    function(a, b) return trim(a) == trim(b) end,
    function(a, b) return normalise(a) == normalise(b) end,
  }
  for _, same in ipairs(passes) do
    for i = from, nl - np + 1 do
      local ok = true
      for j = 1, np do
        if not same(lines[i + j - 1], pattern[j]) then ok = false break end
      end
      if ok then return i end
    end
  end
  return nil
end
M.seek = seek

---------------------------------------------------------------------------
-- Parsing: Codex's format

local function fail(line, msg)
  return nil, { line = line, message = msg }
end

-- Rust's str::lines: split on \n, drop one \r before each \n.
local function rust_lines(s)
  local out = {}
  for l in (s .. "\n"):gmatch("(.-)\n") do
    if l:byte(-1) == 13 then l = l:sub(1, -2) end
    out[#out + 1] = l
  end
  if s == "" or s:sub(-1) == "\n" then out[#out] = nil end
  return out
end

local BEGIN, END = "*** Begin Patch", "*** End Patch"
local ADD, DELETE, UPDATE, MOVE = "*** Add File: ", "*** Delete File: ", "*** Update File: ", "*** Move to: "
local EOF_MARK = "*** End of File"

local function strip_prefix(s, p)
  if s:sub(1, #p) == p then return s:sub(#p + 1) end
end

local function boundaries(lines)
  local first, last = lines[1] and trim(lines[1]), lines[#lines] and trim(lines[#lines])
  if first == BEGIN and last == END and #lines >= 2 then return 2, #lines - 1 end
  if first ~= BEGIN then return nil, "The first line of the patch must be '*** Begin Patch'" end
  return nil, "The last line of the patch must be '*** End Patch'"
end

-- One chunk of an update, from lines[i]; returns the chunk and the next
-- line index.
local function parse_chunk(lines, i, last, first_chunk)
  local context
  local l = lines[i]
  if l == "@@" then
    i = i + 1
  elseif l:sub(1, 3) == "@@ " then
    context = { l:sub(4) }
    i = i + 1
    -- more `@@ text` lines narrow it down further, as Codex's instructions
    -- describe (Codex's own parser refuses this; lash takes it)
    while i <= last and lines[i]:sub(1, 3) == "@@ " do
      context[#context + 1] = lines[i]:sub(4)
      i = i + 1
    end
  elseif not first_chunk then
    return fail(i, "Expected update hunk to start with a @@ context marker, got: '" .. l .. "'")
  end
  if i > last then return fail(i, "Update hunk does not contain any lines") end
  local chunk = { context = context, old = {}, new = {}, kinds = {}, eof = false, line = i }
  local n = 0
  while i <= last do
    l = lines[i]
    if l == EOF_MARK then
      if n == 0 then return fail(i, "Update hunk does not contain any lines") end
      chunk.eof = true
      i = i + 1
      break
    end
    local c = l:sub(1, 1)
    if c == "" then
      chunk.old[#chunk.old + 1], chunk.new[#chunk.new + 1] = "", ""
      chunk.kinds[#chunk.kinds + 1] = " "
    elseif c == " " then
      chunk.old[#chunk.old + 1], chunk.new[#chunk.new + 1] = l:sub(2), l:sub(2)
      chunk.kinds[#chunk.kinds + 1] = " "
    elseif c == "+" then
      chunk.new[#chunk.new + 1] = l:sub(2)
      chunk.kinds[#chunk.kinds + 1] = "+"
    elseif c == "-" then
      chunk.old[#chunk.old + 1] = l:sub(2)
      chunk.kinds[#chunk.kinds + 1] = "-"
    else
      if n == 0 then
        return fail(i, "Unexpected line found in update hunk: '" .. l .. "'. Every line should start with ' ' "
          .. "(context line), '+' (added line), or '-' (removed line)")
      end
      break
    end
    n = n + 1
    i = i + 1
  end
  return chunk, i
end

local function parse_codex(patch)
  local lines = rust_lines(trim(patch))
  local first, last = boundaries(lines)
  if not first then
    local a, b = lines[1], lines[#lines]
    if #lines >= 4 and (a == "<<EOF" or a == "<<'EOF'" or a == '<<"EOF"') and b:sub(-3) == "EOF" then
      table.remove(lines, 1)
      lines[#lines] = nil
      local f2, l2 = boundaries(lines)
      if f2 then first, last = f2, l2 end
    end
    if not first then return nil, { message = last } end
  end
  local ops, i = {}, first
  while i <= last do
    local head = trim(lines[i])
    local at = i
    local path = strip_prefix(head, ADD)
    if path then
      local body = {}
      i = i + 1
      while i <= last and lines[i]:sub(1, 1) == "+" do
        body[#body + 1] = lines[i]:sub(2) .. "\n"
        i = i + 1
      end
      ops[#ops + 1] = { op = "add", path = path, contents = table.concat(body), line = at }
    else
      path = strip_prefix(head, DELETE)
      if path then
        ops[#ops + 1] = { op = "delete", path = path, line = at }
        i = i + 1
      else
        path = strip_prefix(head, UPDATE)
        if not path then
          return fail(at, "'" .. head .. "' is not a valid hunk header. Valid hunk headers: '*** Add File: {path}', "
            .. "'*** Delete File: {path}', '*** Update File: {path}'")
        end
        i = i + 1
        local move = i <= last and strip_prefix(lines[i], MOVE) or nil
        if move then i = i + 1 end
        local chunks = {}
        while i <= last do
          if trim(lines[i]) == "" then
            i = i + 1
          elseif lines[i]:sub(1, 1) == "*" then
            break
          else
            local chunk, nxt = parse_chunk(lines, i, last, #chunks == 0)
            if not chunk then return nil, nxt end
            chunks[#chunks + 1] = chunk
            i = nxt
          end
        end
        if #chunks == 0 then return fail(at, "Update file hunk for path '" .. path .. "' is empty") end
        ops[#ops + 1] = { op = "update", path = path, move_to = move, chunks = chunks, line = at }
      end
    end
  end
  return { format = "codex", ops = ops }
end

---------------------------------------------------------------------------
-- Parsing: unified diffs

-- A path of a ---/+++ or diff --git line: C-quoted names unquoted, a
-- trailing timestamp dropped; nil for /dev/null.
local ESC = { a = "\a", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t", v = "\v", ["\\"] = "\\", ['"'] = '"' }
local function diff_path(s)
  if s:sub(1, 1) == '"' then
    local out, i = {}, 2
    while i <= #s do
      local c = s:sub(i, i)
      if c == '"' then break end
      if c == "\\" then
        local d = s:match("^[0-7][0-7][0-7]", i + 1)
        if d then
          out[#out + 1] = string.char(tonumber(d, 8))
          i = i + 4
        else
          out[#out + 1] = ESC[s:sub(i + 1, i + 1)] or s:sub(i + 1, i + 1)
          i = i + 2
        end
      else
        out[#out + 1] = c
        i = i + 1
      end
    end
    s = table.concat(out)
  else
    s = s:gsub("\t.*$", "")
    s = s:gsub("%s+%d%d%d%d%-%d%d%-%d%d [%d:.]+ ?[+-]?%d*$", "")
  end
  if s == "/dev/null" then return nil end
  return s
end

local function strip_ab(p, which)
  if p and p:sub(1, 2) == which .. "/" then return p:sub(3) end
  return p
end

local function unified_file(files)
  local f = { hunks = {} }
  files[#files + 1] = f
  return f
end

local function parse_hunk(lines, i, f)
  local l = lines[i]
  local os, oc, ns, nc = l:match("^@@ %-(%d+),?(%d*) %+(%d+),?(%d*) @@")
  if not os then return fail(i, "bad hunk header '" .. l .. "' (expected '@@ -start,count +start,count @@')") end
  oc, nc = oc == "" and 1 or tonumber(oc), nc == "" and 1 or tonumber(nc)
  local h = { line = i, old_start = tonumber(os), new_start = tonumber(ns), old_count = oc, new_count = nc,
              body = {} }
  local orem, nrem = oc, nc
  i = i + 1
  while i <= #lines and (orem > 0 or nrem > 0) do
    l = lines[i]
    local c = l:sub(1, 1)
    local file_header = l:sub(1, 4) == "--- " and (lines[i + 1] or ""):sub(1, 4) == "+++ "
    if l:sub(1, 3) == "@@ " or l:sub(1, 5) == "diff " or file_header then
      break
    elseif c == " " or l == "" then
      h.body[#h.body + 1] = { " ", l:sub(2) }
      orem, nrem = orem - 1, nrem - 1
    elseif c == "-" then
      h.body[#h.body + 1] = { "-", l:sub(2) }
      orem = orem - 1
    elseif c == "+" then
      h.body[#h.body + 1] = { "+", l:sub(2) }
      nrem = nrem - 1
    elseif c == "\\" then
      if #h.body > 0 then h.body[#h.body].noeol = true end
    else
      break
    end
    i = i + 1
  end
  if lines[i] and lines[i]:sub(1, 1) == "\\" then
    if #h.body > 0 then h.body[#h.body].noeol = true end
    i = i + 1
  end
  if orem < 0 or nrem < 0 then
    return fail(h.line, "the hunk has more lines than its header '" .. lines[h.line] .. "' says")
  end
  local nxt = lines[i]
  if nxt and (nxt:sub(1, 1) == "+" or nxt:sub(1, 1) == "-" or nxt:sub(1, 1) == " ")
      and not (nxt:sub(1, 4) == "--- " and (lines[i + 1] or ""):sub(1, 4) == "+++ ") then
    return fail(i, "the hunk starting at line " .. h.line .. " has more lines than its header '" .. lines[h.line]
      .. "' says; fix the counts or split it")
  end
  f.hunks[#f.hunks + 1] = h
  return i
end

local function parse_unified(patch)
  local lines = rust_lines(patch)
  local files, f = {}, nil
  local i = 1
  while i <= #lines do
    local l = lines[i]
    if l:sub(1, 11) == "diff --git " then
      f = unified_file(files)
      f.line = i
      local a, b = l:match('^diff %-%-git ("?a/.-"?) ("?b/.*"?)$')
      if a then f.git_old, f.git_new = strip_ab(diff_path(a), "a"), strip_ab(diff_path(b), "b") end
      i = i + 1
    elseif l:sub(1, 4) == "--- " and (lines[i + 1] or ""):sub(1, 4) == "+++ " then
      if not f or f.has_header or #f.hunks > 0 then
        f = unified_file(files)
        f.line = i
      end
      f.has_header = true
      local old, new = diff_path(l:sub(5)), diff_path(lines[i + 1]:sub(5))
      if (old == nil or old:sub(1, 2) == "a/") and (new == nil or new:sub(1, 2) == "b/") then
        old, new = strip_ab(old, "a"), strip_ab(new, "b")
      elseif f.git_old or f.git_new then
        old, new = strip_ab(old, "a"), strip_ab(new, "b")
      end
      f.old, f.new = old, new
      f.old_null, f.new_null = old == nil, new == nil
      i = i + 2
    elseif l:sub(1, 3) == "@@ " then
      if not f or not (f.has_header or f.rename_to) then
        return fail(i, "a hunk before any '--- a/file' / '+++ b/file' header")
      end
      local nxt, err = parse_hunk(lines, i, f)
      if not nxt then return nil, err end
      i = nxt
    elseif f and l:sub(1, 12) == "rename from " then
      f.rename_from = diff_path(l:sub(13))
      i = i + 1
    elseif f and l:sub(1, 10) == "rename to " then
      f.rename_to = diff_path(l:sub(11))
      i = i + 1
    elseif f and l:sub(1, 14) == "new file mode " then
      f.new_file = true
      i = i + 1
    elseif f and l:sub(1, 18) == "deleted file mode " then
      f.deleted_file = true
      i = i + 1
    elseif l:sub(1, 17) == "GIT binary patch" or (l:sub(1, 13) == "Binary files " and l:find(" differ$")) then
      return fail(i, "binary patches are not supported; write the file some other way")
    else
      i = i + 1   -- index lines, mode lines, a preamble: not ours
    end
  end
  local ops = {}
  for _, fl in ipairs(files) do
    local old = fl.old or (not fl.old_null and (fl.rename_from or fl.git_old)) or nil
    local new = fl.new or (not fl.new_null and (fl.rename_to or fl.git_new)) or nil
    if fl.rename_from then old = fl.rename_from end
    if fl.rename_to then new = fl.rename_to end
    if (fl.old_null or fl.new_file) and new then
      ops[#ops + 1] = { op = "uadd", path = new, hunks = fl.hunks, line = fl.line }
    elseif (fl.new_null or fl.deleted_file) and old then
      ops[#ops + 1] = { op = "udelete", path = old, hunks = fl.hunks, line = fl.line }
    elseif old and new and #fl.hunks > 0 and fl.hunks[1].old_start == 0 and fl.hunks[1].old_count == 0
        and #fl.hunks == 1 and not fl.git_old then
      -- diff -N shows a new file as a change from an empty one
      ops[#ops + 1] = { op = "uadd", path = new, hunks = fl.hunks, line = fl.line, maybe_empty = true }
    elseif old and new then
      if #fl.hunks > 0 or old ~= new then
        ops[#ops + 1] = { op = "uupdate", path = old, move_to = old ~= new and new or nil, hunks = fl.hunks,
                          line = fl.line }
      end
    elseif #fl.hunks > 0 then
      return fail(fl.line, "a file section without a path ('--- a/file' and '+++ b/file')")
    end
  end
  return { format = "unified", ops = ops }
end

--- Parse patch text, in either format.
-- @treturn[1] table `{format = "codex"|"unified", ops = {...}}`
-- @treturn[2] nil
-- @treturn[2] table `{message =, line =}` (line: of the patch, or nil)
function M.parse(patch)
  if type(patch) ~= "string" or trim(patch) == "" then
    return nil, { message = "the patch is empty" }
  end
  local t = trim(patch)
  local head = t:match("^[^\n]*")
  if trim(head) == BEGIN or head:match("^<<['\"]?EOF['\"]?$") then return parse_codex(patch) end
  if t:find("^%-%-%- ") or t:find("\n%-%-%- ") or t:find("^diff ") or t:find("\ndiff ") then
    return parse_unified(patch)
  end
  return parse_codex(patch)
end

---------------------------------------------------------------------------
-- Applying, in memory

-- The files as the patch has left them so far: reads see earlier
-- operations of the same patch, as applying them one by one would.
local Overlay = {}
Overlay.__index = Overlay

local function norm_key(p)
  local abs = p:sub(1, 1) == "/"
  local parts = {}
  for c in p:gmatch("[^/]+") do
    if c == ".." then
      if #parts > 0 and parts[#parts] ~= ".." then parts[#parts] = nil
      elseif not abs then parts[#parts + 1] = ".." end
    elseif c ~= "." then
      parts[#parts + 1] = c
    end
  end
  return (abs and "/" or "") .. table.concat(parts, "/")
end
M.norm_key = norm_key

function Overlay:get(path)
  local k = norm_key(path)
  local e = self.files[k]
  if not e then
    local data, why = self.fs.read(path)
    e = { path = path, orig_exists = data ~= nil, orig = data, why = why }
    e.exists, e.data = e.orig_exists, data
    self.files[k] = e
    self.order[#self.order + 1] = k
  end
  return e
end

local function encode_lines(lines, ends, enc)
  return text.encode(text.join(lines, ends), enc)
end

-- Codex: the replacements for an update's chunks, or an error naming the
-- chunk that could not be anchored.
local function codex_replacements(lines, chunks)
  local reps, at = {}, 1
  for _, ch in ipairs(chunks) do
    for k, c in ipairs(ch.context or {}) do
      local idx = seek(lines, { c }, at, false)
      if not idx then
        return nil, ch.line - #ch.context + k - 1, "could not find the context line '@@ " .. c .. "'"
          .. (at > 1 and (" after line " .. (at - 1)) or "")
      end
      at = idx + 1
    end
    if #ch.old == 0 then
      reps[#reps + 1] = { #lines + 1, 0, ch.new }
    else
      local pattern, new, kinds = ch.old, ch.new, ch.kinds
      local found = seek(lines, pattern, at, ch.eof)
      if not found and pattern[#pattern] == "" then
        pattern = { table.unpack(pattern, 1, #pattern - 1) }
        if new[#new] == "" then new = { table.unpack(new, 1, #new - 1) } end
        kinds = { table.unpack(kinds, 1, #kinds - 1) }
        found = seek(lines, pattern, at, ch.eof)
      end
      if not found then
        local shown = {}
        for k = 1, math.min(#ch.old, 6) do shown[k] = "  " .. ch.old[k] end
        if #ch.old > 6 then shown[#shown + 1] = "  ..." end
        return nil, ch.line, "could not find these lines" .. (ch.eof and " at the end of the file" or "")
          .. (at > 1 and (" after line " .. (at - 1)) or "") .. ":\n" .. table.concat(shown, "\n")
      end
      reps[#reps + 1] = { found, #pattern, new, kinds }
      at = found + #pattern
    end
  end
  table.sort(reps, function(a, b) return a[1] < b[1] end)
  return reps
end

local function codex_update(lines, ends, preferred, chunks)
  local reps, line, why = codex_replacements(lines, chunks)
  if not reps then return nil, line, why end
  local out_l, out_e, src = {}, {}, 1
  for _, r in ipairs(reps) do
    if r[1] < src then return nil, nil, "two hunks change the same lines" end
    for k = src, r[1] - 1 do out_l[#out_l + 1], out_e[#out_e + 1] = lines[k], ends[k] end
    if r[4] then
      -- context lines stay as the file has them (a loose match changes
      -- nothing it only matched); added lines take the file's ending
      local k, n = r[1], 1
      for _, kind in ipairs(r[4]) do
        if kind == " " then
          out_l[#out_l + 1], out_e[#out_e + 1] = lines[k], ends[k]
          k, n = k + 1, n + 1
        elseif kind == "-" then
          k = k + 1
        else
          out_l[#out_l + 1], out_e[#out_e + 1] = r[3][n], preferred
          n = n + 1
        end
      end
    else
      for _, nl in ipairs(r[3]) do out_l[#out_l + 1], out_e[#out_e + 1] = nl, preferred end
    end
    src = r[1] + r[2]
  end
  for k = src, #lines do out_l[#out_l + 1], out_e[#out_e + 1] = lines[k], ends[k] end
  for k = 1, #out_e do if out_e[k] == "" then out_e[k] = preferred end end
  return out_l, out_e
end

-- Unified: apply hunks in order, each found nearest to the line its header
-- names (at or after the previous hunk), exactly, then ignoring trailing
-- whitespace.
local function unified_update(lines, ends, preferred, hunks)
  local out_l, out_e, src = {}, {}, 1
  local offset = 0
  for _, h in ipairs(hunks) do
    local old = {}
    for _, b in ipairs(h.body) do
      if b[1] ~= "+" then old[#old + 1] = b[2] end
    end
    local want = h.old_count == 0 and (h.old_start + 1) or h.old_start
    want = math.max(src, want + offset)
    -- git apply's anchors: a hunk starting at line 0 or 1 must match at
    -- the top, one without trailing context at the bottom
    local trailing = 0
    for k = #h.body, 1, -1 do
      if h.body[k][1] ~= " " then break end
      trailing = trailing + 1
    end
    local at_top, at_end = h.old_start <= 1, trailing == 0
    local found
    for _, same in ipairs { function(a, b) return a == b end, function(a, b) return rtrim(a) == rtrim(b) end } do
      local best
      for i = src, #lines - #old + 1 do
        local ok = (not at_top or i == 1) and (not at_end or i + #old - 1 == #lines)
        for j = 1, ok and #old or 0 do
          if not same(lines[i + j - 1], old[j]) then ok = false break end
        end
        if ok and (not best or math.abs(i - want) < math.abs(best - want)) then best = i end
        if best and i > want then break end
      end
      if best then found = best break end
    end
    if not found then
      local shown = {}
      for k = 1, math.min(#old, 6) do shown[k] = "  " .. old[k] end
      if #old > 6 then shown[#shown + 1] = "  ..." end
      return nil, h.line, "hunk '@@ -" .. h.old_start .. "," .. h.old_count .. " ...' does not apply: could not "
        .. "find these lines near line " .. h.old_start .. ":\n" .. table.concat(shown, "\n")
    end
    offset = found - (h.old_count == 0 and (h.old_start + 1) or h.old_start)
    for k = src, found - 1 do out_l[#out_l + 1], out_e[#out_e + 1] = lines[k], ends[k] end
    local k = found
    for _, b in ipairs(h.body) do
      if b[1] == " " then
        out_l[#out_l + 1], out_e[#out_e + 1] = lines[k], ends[k]
        k = k + 1
      elseif b[1] == "-" then
        k = k + 1
      else
        out_l[#out_l + 1], out_e[#out_e + 1] = b[2], preferred
      end
      if b.noeol and b[1] ~= "-" and k > #lines then out_e[#out_e] = "" end
    end
    src = k
  end
  for k = src, #lines do out_l[#out_l + 1], out_e[#out_e + 1] = lines[k], ends[k] end
  -- only the last line may lack an ending (lines added after it give it one)
  for k = 1, #out_e - 1 do if out_e[k] == "" then out_e[k] = preferred end end
  return out_l, out_e
end

local function new_file_text(hunks)
  local lines, ends = {}, {}
  for _, h in ipairs(hunks) do
    for _, b in ipairs(h.body) do
      if b[1] ~= "-" then
        lines[#lines + 1], ends[#ends + 1] = b[2], b.noeol and "" or "\n"
      end
    end
  end
  return text.join(lines, ends)
end

local UTF8 = { name = "UTF-8", bom = "" }

--- Work out what `parsed` does to the files `fs` reads.
-- @tparam table parsed from `parse`
-- @tparam table fs `read(path) -> bytes | nil, why` (why: "not_found",
--   "is_dir", or a message)
-- @treturn[1] table `{changes = {{path =, exists =, data =, orig_exists =,
--   orig =}, ...}, summary = {{"A"|"M"|"D", path}, ...}}`
-- @treturn[2] nil
-- @treturn[2] table `{message =, line =, path =}`
function M.plan(parsed, fs)
  local ov = setmetatable({ fs = fs, files = {}, order = {} }, Overlay)
  local summary = {}
  local function err(op, msg, line)
    return nil, { path = op.path, message = msg, line = line or op.line }
  end
  local function readable(e, verb)
    if e.exists then return true end
    local why = e.why
    if why == "is_dir" then return false, "it is a directory, not a file; " .. verb .. " files only" end
    if e.orig_exists or why == "not_found" or why == nil then return false, "no such file" end
    return false, why
  end
  for _, op in ipairs(parsed.ops) do
    if op.op == "add" or op.op == "uadd" then
      local e = ov:get(op.path)
      if op.op == "uadd" and e.exists and not (op.maybe_empty and e.data == "") then
        return err(op, "it already exists; the diff creates it from /dev/null. Patch it with a diff against its "
          .. "current contents instead")
      end
      if e.why == "is_dir" then return err(op, "it is a directory") end
      if e.why and e.why ~= "not_found" then return err(op, "cannot replace it: " .. e.why) end
      e.exists, e.data = true, op.op == "add" and op.contents or new_file_text(op.hunks)
      summary[#summary + 1] = { "A", op.path }
    elseif op.op == "delete" or op.op == "udelete" then
      local e = ov:get(op.path)
      local ok, why = readable(e, "delete")
      if not ok then return err(op, "cannot delete it: " .. why) end
      if op.hunks and #op.hunks > 0 then
        -- as git apply: a diff deleting a file must show all of it
        local t = text.decode(e.data)
        local have = t and text.split(t) or {}
        local want = {}
        for _, h in ipairs(op.hunks) do
          for _, b in ipairs(h.body) do if b[1] ~= "+" then want[#want + 1] = b[2] end end
        end
        local same = #have == #want
        for k = 1, same and #want or 0 do if have[k] ~= want[k] then same = false break end end
        if not same then
          return err(op, "cannot delete it: the diff removes lines that are not what the file holds; read the "
            .. "file and diff against its contents, or use apply_patch's '*** Delete File:'", op.hunks[1].line)
        end
      end
      e.exists, e.data = false, nil
      summary[#summary + 1] = { "D", op.path }
    else
      local e = ov:get(op.path)
      local ok, why = readable(e, "update")
      if not ok then return err(op, "cannot update it: " .. why) end
      local t, enc = text.decode(e.data)
      if not t then return err(op, "cannot update it: " .. enc) end
      local lines, ends, preferred = text.split(t)
      local nl, ne, fail_why
      if op.op == "update" then
        nl, ne, fail_why = codex_update(lines, ends, preferred, op.chunks)
      else
        nl, ne, fail_why = unified_update(lines, ends, preferred, op.hunks)
      end
      if not nl then return err(op, fail_why, ne) end
      local bytes, bad = encode_lines(nl, ne, enc or UTF8)
      if not bytes then return err(op, bad) end
      if op.move_to then
        local d = ov:get(op.move_to)
        if d.why == "is_dir" then return err(op, "cannot move it to '" .. op.move_to .. "': that is a directory") end
        e.exists, e.data = false, nil
        d.exists, d.data = true, bytes
        summary[#summary + 1] = { "M", op.move_to }
      else
        e.data = bytes
        summary[#summary + 1] = { "M", op.path }
      end
    end
  end
  if #parsed.ops == 0 then return nil, { message = "No files were modified: the patch has no file operations." } end
  local changes = {}
  for _, k in ipairs(ov.order) do
    local e = ov.files[k]
    if e.exists ~= e.orig_exists or e.data ~= e.orig then changes[#changes + 1] = e end
  end
  return { changes = changes, summary = summary }
end

return M
