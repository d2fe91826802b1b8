-- tests/docs/check_links.lua FILE...: every relative link of each Markdown
-- FILE resolves: the file (or directory) exists, and a `#fragment` names a
-- heading of the target as GitHub makes its anchor. Prints one line per
-- broken link, `FILE:LINE: target (why)`, and exits 1 if there was any.

-- GitHub's anchor of a heading: lower case, punctuation dropped (bytes of
-- other scripts kept), spaces to hyphens; a repeated anchor gets -1, -2...
local function anchor_of(heading)
  local s = heading:lower():gsub("[^%w%s%-_\128-\255]", ""):gsub("%s", "-")
  return s
end

local anchors_cache = {}

local function anchors(path)
  if anchors_cache[path] then return anchors_cache[path] end
  local set, seen, fenced = {}, {}, false
  for line in io.lines(path) do
    if line:match("^```") then fenced = not fenced end
    local text = not fenced and line:match("^#+%s+(.-)%s*$")
    if text then
      local a = anchor_of(text)
      local n = seen[a]
      set[n and (a .. "-" .. n) or a] = true
      seen[a] = (n or 0) + 1
    end
  end
  anchors_cache[path] = set
  return set
end

local function dir_of(path) return path:match("^(.*)/[^/]*$") or "." end

local function exists(path)
  local f = io.open(path)
  if f then f:close() return true end
  return false
end

local function check(file, report)
  local base, fenced, lineno = dir_of(file), false, 0
  for line in io.lines(file) do
    lineno = lineno + 1
    if line:match("^%s*```") then fenced = not fenced end
    if not fenced then
      for target in line:gmatch("%]%(([^)%s]+)%)") do
        if not target:match("^%a[%w+.-]*:") then -- not http:, mailto:, ...
          local path, frag = target:match("^([^#]*)#?(.*)$")
          local full = path == "" and file or (base .. "/" .. path)
          if not exists(full) then
            report(file, lineno, target, "no such file")
          elseif frag ~= "" and full:match("%.md$") and not anchors(full)[frag] then
            report(file, lineno, target, "no heading with that anchor in " .. full)
          end
        end
      end
    end
  end
end

local broken = 0
for _, file in ipairs(arg) do
  check(file, function(f, n, target, why)
    broken = broken + 1
    print(("%s:%d: %s (%s)"):format(f, n, target, why))
  end)
end
os.exit(broken == 0 and 0 or 1)
