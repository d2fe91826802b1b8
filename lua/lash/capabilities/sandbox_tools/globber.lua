--- Glob patterns and .gitignore rules, matched in Lua against the paths a
-- sandbox lists: `*` and `?` within one path segment, `[abc]`/`[!a-z]`
-- classes, `**` for any number of segments, `{a,b}` alternatives and `\`
-- escapes. Pure: no sandbox, no I/O.
-- @module lash.capabilities.sandbox_tools.globber
local M = {}

-- `{a,b}` alternatives expanded into a list of patterns (nested allowed).
local function expand_braces(p, out)
  out = out or {}
  local depth, open = 0, nil
  local i = 1
  while i <= #p do
    local c = p:sub(i, i)
    if c == "\\" then
      i = i + 1
    elseif c == "{" then
      if depth == 0 then open = i end
      depth = depth + 1
    elseif c == "}" and depth > 0 then
      depth = depth - 1
      if depth == 0 then
        local inner, parts, d, s = p:sub(open + 1, i - 1), {}, 0, 1
        local j = 1
        while j <= #inner do
          local ch = inner:sub(j, j)
          if ch == "\\" then j = j + 1
          elseif ch == "{" then d = d + 1
          elseif ch == "}" then d = d - 1
          elseif ch == "," and d == 0 then
            parts[#parts + 1] = inner:sub(s, j - 1)
            s = j + 1
          end
          j = j + 1
        end
        parts[#parts + 1] = inner:sub(s)
        if #parts > 1 then
          local pre, post = p:sub(1, open - 1), p:sub(i + 1)
          for _, part in ipairs(parts) do expand_braces(pre .. part .. post, out) end
          return out
        end
      end
    end
    i = i + 1
  end
  out[#out + 1] = p
  return out
end

-- One path segment's glob as an anchored Lua pattern; nil for `**`.
local function segment_pattern(seg)
  if seg == "**" then return nil end
  local out, i = { "^" }, 1
  while i <= #seg do
    local c = seg:sub(i, i)
    if c == "\\" and i < #seg then
      i = i + 1
      out[#out + 1] = "%" .. seg:sub(i, i)
    elseif c == "*" then
      out[#out + 1] = ".*"
      while seg:sub(i + 1, i + 1) == "*" do i = i + 1 end
    elseif c == "?" then
      out[#out + 1] = "."
    elseif c == "[" then
      local j = i + 1
      local neg = false
      if seg:sub(j, j) == "!" or seg:sub(j, j) == "^" then neg, j = true, j + 1 end
      local k = j
      if seg:sub(k, k) == "]" then k = k + 1 end
      while k <= #seg and seg:sub(k, k) ~= "]" do k = k + 1 end
      if k > #seg then
        out[#out + 1] = "%["
      else
        local body = seg:sub(j, k - 1)
        local cls = body:gsub("[%%%]%^%[]", "%%%0")
        -- ranges a-z stay as they are; an escaped '-' is kept literal
        out[#out + 1] = "[" .. (neg and "^" or "") .. cls .. "]"
        i = k
      end
    else
      out[#out + 1] = c:match("%w") and c or ("%" .. c)
    end
    i = i + 1
  end
  out[#out + 1] = "$"
  return table.concat(out)
end

-- A compiled pattern: its segments (Lua patterns, false for `**`).
local function compile_one(p)
  local segs = {}
  for seg in p:gmatch("[^/]+") do
    local lp = segment_pattern(seg)
    if lp == nil then
      if segs[#segs] ~= false then segs[#segs + 1] = false end
    else
      segs[#segs + 1] = lp
    end
  end
  return segs
end

local function match_segs(segs, si, parts, pi)
  while si <= #segs do
    local s = segs[si]
    if s == false then
      if si == #segs then return true end   -- trailing ** takes the rest
      for k = pi, #parts do
        if match_segs(segs, si + 1, parts, k) then return true end
      end
      return false
    end
    local part = parts[pi]
    if not part or not part:find(s) then return false end
    si, pi = si + 1, pi + 1
  end
  return pi > #parts
end

local function split(path)
  local parts = {}
  for seg in path:gmatch("[^/]+") do parts[#parts + 1] = seg end
  return parts
end
M.split = split

--- Compile a glob into a matcher of relative paths ("a/b/c.txt").
-- @tparam string pattern
-- @treturn function(path, parts?) -> boolean
function M.compile(pattern)
  local alts, suffixes = {}, {}
  for _, p in ipairs(expand_braces(pattern)) do
    -- "**/*.ext": any path ending so (a suffix without '/' cannot cross one)
    local ext = p:match("^%*%*/%*([^%*%?%[%]{}\\/]+)$")
    if ext then suffixes[#suffixes + 1] = ext else alts[#alts + 1] = compile_one(p) end
  end
  return function(path, parts)
    for _, ext in ipairs(suffixes) do
      if #path >= #ext and path:sub(-#ext) == ext then return true end
    end
    if #alts == 0 then return false end
    parts = parts or split(path)
    for _, segs in ipairs(alts) do
      if match_segs(segs, 1, parts, 1) then return true end
    end
    return false
  end
end

--- Whether a glob has no slash (then it is matched against base names).
function M.is_basename_pattern(p)
  return not p:find("/", 1, true)
end

---------------------------------------------------------------------------
-- .gitignore

--- Parse one .gitignore's text into rules.
-- @tparam string text
-- @treturn table rules: `{neg =, dir_only =, anchored =, segs =}`
function M.gitignore_rules(text)
  local rules = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    line = line:gsub("\r$", "")
    -- trailing spaces go unless escaped
    line = line:gsub("([^\\])%s+$", "%1")
    if line ~= "" and line:sub(1, 1) ~= "#" then
      local r = {}
      if line:sub(1, 1) == "!" then
        r.neg, line = true, line:sub(2)
      elseif line:sub(1, 2) == "\\!" or line:sub(1, 2) == "\\#" then
        line = line:sub(2)
      end
      if line:sub(-1) == "/" then r.dir_only, line = true, line:sub(1, -2) end
      if line:find("/", 1, true) then
        r.anchored = true
        line = line:gsub("^/", "")
      end
      if line ~= "" then
        r.segs = compile_one(line)
        if not r.anchored then
          r.literal = not line:find("[%*%?%[\\]") and line or nil
          r.suffix = line:match("^%*(%.[%w_%-%.]+)$")
        end
        rules[#rules + 1] = r
      end
    end
  end
  return rules
end

--- The verdict of one set of rules (from one .gitignore) for a path
-- relative to that file's directory: true ignored, false re-included (a
-- `!` rule), nil no rule matched. The last matching rule wins.
function M.gitignore_verdict(rules, rel, is_dir)
  local base = rel:match("[^/]*$")
  local parts
  for i = #rules, 1, -1 do
    local r = rules[i]
    if not r.dir_only or is_dir then
      local hit
      if r.anchored then
        parts = parts or split(rel)
        hit = match_segs(r.segs, 1, parts, 1)
      elseif r.literal then
        hit = base == r.literal
      elseif r.suffix then
        hit = #base >= #r.suffix and base:sub(-#r.suffix) == r.suffix
      else
        hit = match_segs(r.segs, 1, { base }, 1)
      end
      if hit then return not r.neg end
    end
  end
  return nil
end

return M
