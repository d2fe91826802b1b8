--- glob and grep over a sandbox: one `find` inside the sandbox lists the
-- tree (skipping .git), .gitignore rules are applied here in Lua (so every
-- backend ignores the same files), and grep runs GNU grep inside the
-- sandbox over the surviving files, in sorted order, its output cut in the
-- sandbox so nothing unbounded crosses over. Needs a POSIX shell, GNU find
-- and GNU grep in the sandbox (every Debian-based image has them).
-- @module lash.capabilities.sandbox_tools.search
local globber = require "lash.capabilities.sandbox_tools.globber"
local runtime = require "lash.runtime"
local fmt_quote = require("lash.capabilities.sandbox_format").quote

local M = {}

M.LIST_MAX_BYTES = 64 * 1024 * 1024    -- names of one listing
M.LINE_MAX_BYTES = 2000                -- one grep output line, cut in the sandbox

-- The listing: the root's absolute path, then the .gitignore files of its
-- ancestors up to the nearest one holding .git, then every entry under it
-- (type letter and path), each record ending in NUL.
local LIST_SCRIPT = [[
r=$1
case $r in -*) r=./$r ;; esac
if [ ! -e "$r" ] && [ ! -L "$r" ]; then echo "no such file or directory" >&2; exit 3; fi
if [ -d "$r" ]; then
  a=$(cd -- "$r" && pwd) || exit 4
  printf 'R%s\0' "$a"
  d=$a
  while [ ! -e "$d/.git" ] && [ "$d" != / ]; do
    d=$(dirname -- "$d")
    [ -f "$d/.gitignore" ] && printf 'A%s\0' "$d"
  done
  [ -e "$d/.git" ] && printf 'G\0'
fi
printf 'P%s\0' "$r"
find "$r" -name .git -prune -o -printf '%y%P\0' 2>/dev/null
st=$?
[ $st -eq 0 ] || find "$r" -maxdepth 0 -printf '' 2>&1 >/dev/null | head -n 1 >&2
exit $st
]]

-- The contents of the files named in "$@": each as its size, NUL, bytes.
local CAT_SCRIPT = [[
for f; do
  n=$(wc -c < "$f" 2>/dev/null) || n=0
  printf '%s\0' "$n"
  [ "$n" -gt 0 ] && head -c "$n" -- "$f"
done
exit 0
]]

-- grep over the NUL-separated file list on stdin: PCRE when this grep has
-- it (else extended regular expressions, said on stderr), the pattern
-- checked once first so a bad one is one clear error.
local GREP_SCRIPT = [[
dir=$1; pat=$2; max=$3; cut=$4; shift 4
case $dir in -*) dir=./$dir ;; esac
cd -- "$dir" || exit 3
LC_ALL=C.UTF-8; export LC_ALL
mode=-P
grep -P -e '' -- /dev/null >/dev/null 2>&1
[ $? -eq 2 ] && mode=-E
echo "mode $mode" >&2
err=$(grep $mode "$@" -e "$pat" -- /dev/null 2>&1 >/dev/null)
if [ $? -eq 2 ]; then printf 'badpattern %s\n' "$err" >&2; exit 2; fi
xargs -0 -r grep $mode -H -n -I -Z --color=never "$@" -e "$pat" -- | head -n "$max" | cut -b "1-$cut"
exit 0
]]

local function sh(script, ...)
  return { "sh", "-c", script, "sh", ... }
end


--- List the tree under `root` (a path as the model gave it), dropping what
-- .gitignore files ignore. Returns the kept entries, sorted by path:
-- `{path =, rel =, kind = "f"|"d"|"l"|...}`.
-- @tparam table ctx `exec(argv, opts) -> result` (raises sandbox errors),
--   `timeout` (seconds)
-- @treturn[1] table entries
-- @treturn[2] nil
-- @treturn[2] string why
function M.list(ctx, root)
  local r = ctx.exec(sh(LIST_SCRIPT, root), { timeout = ctx.timeout, max_output_bytes = M.LIST_MAX_BYTES })
  if r.timed_out then
    return nil, "listing " .. fmt_quote(root) .. " timed out after " .. tostring(r.applied_timeout or ctx.timeout)
      .. "s; search a smaller directory"
  end
  if r.exit_code == 3 then return nil, "no such file or directory" end
  if r.stdout_truncated then
    return nil, "the tree under " .. fmt_quote(root) .. " has too many files to list (over "
      .. (M.LIST_MAX_BYTES // 1048576) .. " MiB of names); search a smaller directory"
  end
  local out = r.stdout
  local abs, ancestors, git, printed, prefix = nil, {}, false, nil, nil
  local rels, kinds = {}, {}
  local root_kind
  local n = 0
  local pos = 1
  while true do
    local z = out:find("\0", pos, true)
    if not z then break end
    local rec = out:sub(pos, z - 1)
    pos = z + 1
    local tag = rec:sub(1, 1)
    if printed then
      if rec ~= "" then
        if #rec == 1 then
          root_kind = tag
        else
          local rel = rec:sub(2)
          n = n + 1
          rels[n] = rel
          kinds[rel] = tag
        end
      end
    elseif tag == "R" then abs = rec:sub(2)
    elseif tag == "A" then ancestors[#ancestors + 1] = rec:sub(2)
    elseif tag == "G" then git = true
    elseif tag == "P" then
      printed = rec:sub(2)
      prefix = printed:sub(-1) == "/" and printed or (printed .. "/")
    end
  end
  if not printed then
    local why = (r.stderr or ""):match("[^\n]+") or ("exit code " .. tostring(r.exit_code))
    return nil, "could not list it: " .. why
  end
  if n == 0 and not root_kind and r.exit_code ~= 0 then
    local why = (r.stderr or ""):match("[^\n]+") or ("exit code " .. tostring(r.exit_code))
    if why:find("printf", 1, true) then
      why = why .. " (glob and grep need GNU find in the sandbox)"
    end
    return nil, "could not list it: " .. why
  end
  -- paths as the model writes them: "src/a.py", not "./src/a.py"
  local shown = prefix:gsub("^%./", "")
  if root_kind and root_kind ~= "d" then
    -- a single file: itself, whatever ignores it
    return { rels = { "" }, kinds = { [""] = root_kind }, dir = ".", prefix = "", file = printed }
  end
  table.sort(rels)
  -- the rule sets: ancestors (only inside a git work tree) and the tree's
  local want, sets = {}, {}
  if git and abs then
    for _, d in ipairs(ancestors) do want[#want + 1] = { file = d .. "/.gitignore", ancestor = d } end
  end
  for i = 1, n do
    local rel = rels[i]
    if kinds[rel] == "f" and rel:find(".gitignore", -10, true)
        and (rel == ".gitignore" or rel:sub(-11) == "/.gitignore") then
      want[#want + 1] = { file = prefix .. rel, dir = rel:match("^(.*)/[^/]+$") or "" }
    end
  end
  if #want > 0 then
    local files = {}
    for i, w in ipairs(want) do files[i] = w.file end
    local c = ctx.exec(sh(CAT_SCRIPT, table.unpack(files)), { timeout = ctx.timeout, max_output_bytes = 16 * 1048576 })
    local at = 1
    for _, w in ipairs(want) do
      local z = c.stdout:find("\0", at, true)
      if not z then break end
      local size = tonumber(c.stdout:sub(at, z - 1)) or 0
      w.rules = globber.gitignore_rules(c.stdout:sub(z + 1, z + size))
      at = z + size + 1
    end
    for _, w in ipairs(want) do
      if w.rules and #w.rules > 0 then
        if w.ancestor then
          -- the path of the root relative to that ancestor
          w.under = w.ancestor == "/" and abs:sub(2) or abs:sub(#w.ancestor + 2)
        end
        sets[#sets + 1] = w
      end
    end
  end
  local result = { rels = rels, kinds = kinds, dir = printed, prefix = shown }
  if #sets == 0 then return result end
  local kept = {}
  -- deepest first: the tree's own files by depth, then the ancestors
  local tree, anc = {}, {}
  for _, w in ipairs(sets) do
    if w.ancestor then anc[#anc + 1] = w else
      w.slash = w.dir == "" and "" or (w.dir .. "/")
      tree[#tree + 1] = w
    end
  end
  table.sort(tree, function(a, b) return #a.dir > #b.dir end)
  table.sort(anc, function(a, b) return #a.ancestor > #b.ancestor end)
  local verdict = globber.gitignore_verdict
  local ignored_dirs = {}
  for i = 1, n do
    local rel = rels[i]
    local parent = rel:match("^(.*)/[^/]*$") or ""
    local ig
    local is_dir = kinds[rel] == "d"
    if ignored_dirs[parent] then
      ig = true
    else
      for _, w in ipairs(tree) do
        local d = w.slash
        if d == "" or rel:sub(1, #d) == d then
          local v = verdict(w.rules, d == "" and rel or rel:sub(#d + 1), is_dir)
          if v ~= nil then ig = v break end
        end
      end
      if ig == nil then
        for _, w in ipairs(anc) do
          local v = verdict(w.rules, w.under == "" and rel or (w.under .. "/" .. rel), is_dir)
          if v ~= nil then ig = v break end
        end
      end
    end
    if ig then
      if is_dir then ignored_dirs[rel] = true end
    else
      kept[#kept + 1] = rel
    end
  end
  result.rels = kept
  return result
end

---------------------------------------------------------------------------
-- glob

--- The glob tool's result.
-- @tparam table ctx as `list`'s, plus `max_lines`, `max_bytes`
-- @tparam table args pattern, path (nil: ".")
function M.glob(ctx, args)
  local root = args.path or "."
  local list, why = M.list(ctx, root)
  if not list then return nil, "Could not search " .. fmt_quote(root) .. ": " .. why end
  local match = globber.compile(args.pattern)
  local hits = {}
  local kinds, prefix = list.kinds, list.prefix
  for _, rel in ipairs(list.rels) do
    if kinds[rel] ~= "d" and rel ~= "" and match(rel) then hits[#hits + 1] = prefix .. rel end
  end
  if #hits == 0 then
    return "No files match " .. fmt_quote(args.pattern) .. " under " .. fmt_quote(root) .. "."
  end
  local body = table.concat(hits, "\n")
  local limit = args.max_results or ctx.max_results
  if #hits > limit then
    body = table.concat(hits, "\n", 1, limit) .. "\n\n[Showing " .. limit .. " of " .. #hits
      .. " files. Narrow the pattern or the path to see the rest.]"
    return (runtime.output.truncate(body, { max_lines = ctx.max_lines + 2, max_bytes = ctx.max_bytes,
                                            direction = "head" }))
  end
  return (runtime.output.truncate(body, { max_lines = ctx.max_lines, max_bytes = ctx.max_bytes,
                                          direction = "head" }))
end

---------------------------------------------------------------------------
-- grep

--- The grep tool's result.
-- @tparam table ctx as `glob`'s
-- @tparam table args pattern, path, glob, ignore_case, context, max_results
function M.grep(ctx, args)
  local root = args.path or "."
  local list, why = M.list(ctx, root)
  if not list then return nil, "Could not search " .. fmt_quote(root) .. ": " .. why end
  local only = args.glob and globber.compile(args.glob)
  local only_base = args.glob and globber.is_basename_pattern(args.glob)
  local files = {}
  local kinds = list.kinds
  for _, rel in ipairs(list.rels) do
    if kinds[rel] == "f" then
      local keep = true
      if only then
        if only_base then keep = only(rel:match("[^/]+$") or rel) else keep = only(rel) end
      end
      if keep then files[#files + 1] = list.file or rel end
    end
  end
  if #files == 0 then
    return "No files to search under " .. fmt_quote(root)
      .. (args.glob and (" matching " .. fmt_quote(args.glob)) or "") .. "."
  end
  local max = args.max_results or ctx.max_results
  local context = args.context or 0
  local lines_cap = max * (2 * context + 2) + 1
  local opts = {}
  if args.ignore_case then opts[#opts + 1] = "-i" end
  if context > 0 then opts[#opts + 1] = "-C" opts[#opts + 1] = tostring(context) end
  local argv = sh(GREP_SCRIPT, list.file and "." or list.dir, args.pattern, tostring(lines_cap),
    tostring(M.LINE_MAX_BYTES), table.unpack(opts))
  local r = ctx.exec(argv,
    { timeout = ctx.timeout, stdin = table.concat(files, "\0") .. "\0",
      max_output_bytes = lines_cap * (M.LINE_MAX_BYTES + 256) })
  local err = r.stderr or ""
  local bad = err:match("badpattern ([^\n]*)")
  if bad then
    return nil, "Invalid regular expression " .. fmt_quote(args.pattern) .. ": " .. bad:gsub("^grep: ", "")
  end
  local note = {}
  if err:find("mode %-E") then
    note[#note + 1] = "[this sandbox's grep has no PCRE: the pattern was read as a POSIX extended regular expression]"
  end
  if err:find("exceeded PCRE", 1, true) then
    note[#note + 1] = "[the pattern was too costly on some lines (the regex engine's backtracking limit); those "
      .. "lines were skipped: simplify the pattern]"
  end
  if r.timed_out then
    note[#note + 1] = "[grep timed out after " .. tostring(r.applied_timeout or ctx.timeout) .. "s; the results "
      .. "above are partial: narrow the path or simplify the pattern]"
  end
  -- records: path NUL (line ':' | line '-') text, or "--"
  local out, matches, shown = {}, 0, 0
  local more = false
  for line in r.stdout:gmatch("([^\n]*)\n?") do
    if line ~= "" then
      if line == "--" then
        if #out > 0 then out[#out + 1] = "--" end
      else
        local path, num, sep, txt = line:match("^([^%z]*)%z(%d+)([:%-])(.*)$")
        if path then
          if sep == ":" then
            matches = matches + 1
            if matches > max then more = true break end
          end
          out[#out + 1] = list.prefix .. path .. sep .. num .. sep .. runtime.output.utf8_repair(txt)
          shown = shown + 1
        end
      end
    end
  end
  while out[#out] == "--" do out[#out] = nil end
  if matches == 0 and not r.timed_out then
    local msg = "No matches for " .. fmt_quote(args.pattern) .. " in " .. #files .. " file"
      .. (#files == 1 and "" or "s")
      .. " under " .. fmt_quote(root) .. "."
    if #note > 0 then msg = msg .. "\n" .. table.concat(note, "\n") end
    return msg
  end
  local body = table.concat(out, "\n")
  local cut = runtime.output.truncate(body, { max_lines = ctx.max_lines, max_bytes = ctx.max_bytes,
                                              direction = "head" })
  if more then
    note[#note + 1] = "[Showing the first " .. max .. " matches; there are more. Narrow the pattern, the path or the "
      .. "glob, or raise max_results.]"
  end
  if #note > 0 then cut = cut .. "\n\n" .. table.concat(note, "\n") end
  return cut
end

return M
