-- bench/search_bench.lua STATE_ROOT FILES: lash's glob and grep tools on a
-- tree of FILES files in a local sandbox, against `grep -rn` and `rg -n`
-- run in the same sandbox over the same tree. Prints one line per measure:
-- `name median_ms`, the median of 5 runs each, interleaved.
local lash = require "lash"
local search = require "lash.capabilities.sandbox_tools.search"
local root, files = arg[1], tonumber(arg[2])
local sb <close> = lash.sandbox.session { backend = "local", state_root = root, timeout = 1800 }
local per_dir = 100
local dirs = files // per_dir
-- the tree: DIRS directories of 100 small C files; one line in 1000 files
-- holds the needle; a .gitignore ignores one directory of them
local r = sb:exec({ "sh", "-c", [[
set -e
mkdir -p tree && cd tree && git_dirs=$1 && per=$2
printf 'd0/\n*.o\n' > .gitignore
i=0
while [ $i -lt "$git_dirs" ]; do
  mkdir d$i
  j=0
  while [ $j -lt "$per" ]; do
    if [ $(( (i * per + j) % 1000 )) -eq 0 ]; then n="int needle_$j = 1;"; else n="int value_$j = 2;"; fi
    printf '#include <stdio.h>\n/* file %d of dir %d */\n%s\nint main(void) { return 0; }\n' $j $i "$n" > d$i/f$j.c
    j=$((j + 1))
  done
  i=$((i + 1))
done
]], "sh", tostring(dirs), tostring(per_dir) }, { timeout = 1800 })
assert(r.exit_code == 0, r.stderr)
local ctx = {
  exec = function(argv, o) return sb:exec(argv, o) end,
  timeout = 600, max_lines = 2000, max_bytes = 51200, max_results = 100,
}
local has_rg = sb:exec({ "sh", "-c", "command -v rg" }).exit_code == 0
local function ms(f)
  local t0 = lash.now()
  f()
  return (lash.now() - t0) * 1000
end
local measures = {
  { "glob", function() assert(search.glob(ctx, { pattern = "**/*.c", path = "tree" })) end },
  { "grep", function()
      local out = assert(search.grep(ctx, { pattern = "needle_\\d+", path = "tree", max_results = 1000 }))
      assert(out:find("needle_0", 1, true), out)
    end },
  { "grep_rn", function()
      local x = sb:exec({ "sh", "-c", "grep -rn -E 'needle_[0-9]+' tree | sort > /dev/null" }, { timeout = 600 })
      assert(x.exit_code == 0, x.stderr)
    end },
  { "find_name", function()
      local x = sb:exec({ "sh", "-c", "find tree -name '*.c' | sort > /dev/null" }, { timeout = 600 })
      assert(x.exit_code == 0, x.stderr)
    end },
}
if has_rg then
  measures[#measures + 1] = { "rg", function()
      local x = sb:exec({ "sh", "-c", "rg -n --sort path 'needle_\\d+' tree > /dev/null" }, { timeout = 600 })
      assert(x.exit_code == 0, x.stderr)
    end }
end
local times = {}
for _ = 1, 5 do
  for _, m in ipairs(measures) do
    times[m[1]] = times[m[1]] or {}
    table.insert(times[m[1]], ms(m[2]))
  end
end

for _, m in ipairs(measures) do
  local t = times[m[1]]
  table.sort(t)
  print(m[1], string.format("%.0f", t[3]))
end
