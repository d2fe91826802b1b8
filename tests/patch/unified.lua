-- tests/patch/unified.lua: lash's apply_patch on unified diffs, against
-- tools nobody here wrote; prints TAP.
--   1. pairs of trees: the diff from `diff -ruN` and from `git diff
--      --no-index`, applied by lash to the first tree, must give the second
--      exactly (endings, missing final newlines, adds, deletes, renames);
--   2. hand-written diffs: lash must accept exactly what `git apply`
--      accepts, with the same result, and change nothing when it refuses.
package.path = "lua/?.lua;tests/patch/?.lua;" .. package.path
package.cpath = (os.getenv("LASH_BUILD") or "build") .. "/?.so;" .. package.cpath
local hostfs = require "hostfs"
local q = hostfs.q

local tmp = os.tmpname()
os.remove(tmp)

local function lines(n, f)
  local t = {}
  for i = 1, n do t[i] = f(i) end
  return table.concat(t)
end

local pairs_ = {
  { "one line changed", { ["a.txt"] = "1\n2\n3\n" }, { ["a.txt"] = "1\nTWO\n3\n" } },
  { "far apart hunks", { ["b.txt"] = lines(60, function(i) return "line " .. i .. "\n" end) },
    { ["b.txt"] = lines(60, function(i) return (i == 5 or i == 50) and "changed\n" or ("line " .. i .. "\n") end) } },
  { "a file added and one deleted", { ["old.txt"] = "bye\n" }, { ["new/dir/n.txt"] = "hello\nthere\n" } },
  { "no newline at the end, before", { ["c.txt"] = "x\ny" }, { ["c.txt"] = "x\ny\nz\n" } },
  { "no newline at the end, after", { ["c.txt"] = "x\ny\n" }, { ["c.txt"] = "x\nY" } },
  { "no newline on either side", { ["c.txt"] = "a\nb\nc" }, { ["c.txt"] = "A\nb\nc" } },
  { "CRLF lines", { ["w.txt"] = "a\r\nb\r\nc\r\n" }, { ["w.txt"] = "a\r\nB\r\nc\r\nd\r\n" } },
  { "lines removed at the start and end", { ["d.txt"] = "h1\nh2\nm\nt1\nt2\n" }, { ["d.txt"] = "m\n" } },
  { "repeated lines", { ["r.txt"] = "x\nx\nx\ny\nx\nx\n" }, { ["r.txt"] = "x\nx\nX\ny\nx\nx\n" } },
  { "unicode", { ["u.txt"] = "ünï\ncödé\n" }, { ["u.txt"] = "ünï\nCÖDÉ ✓\n" } },
  { "an emptied file", { ["e.txt"] = "gone\n", ["k.txt"] = "k\n" }, { ["e.txt"] = "", ["k.txt"] = "k\n" } },
  { "several files", { ["s/1.c"] = "int a;\n", ["s/2.c"] = "int b;\n" }, { ["s/1.c"] = "int A;\n", ["s/2.c"] = "int B;\n" } },
}

-- diffs that git apply accepts or refuses
local written = {
  { "a moved hunk (the header's line is off)", { ["m.txt"] = "new top\n1\n2\n3\n" },
    "--- a/m.txt\n+++ b/m.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n" },
  { "context that is not there", { ["m.txt"] = "1\n2\n3\n" },
    "--- a/m.txt\n+++ b/m.txt\n@@ -1,3 +1,3 @@\n 1\n-X\n+two\n 3\n" },
  { "a second file fails: nothing changes", { ["a.txt"] = "a\n", ["b.txt"] = "b\n" },
    "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-nope\n+B\n" },
  { "creating a file that exists", { ["x.txt"] = "x\n" },
    "--- /dev/null\n+++ b/x.txt\n@@ -0,0 +1 @@\n+new\n" },
  { "git rename with a change", { ["from.txt"] = "1\n2\n" },
    "diff --git a/from.txt b/to/dest.txt\nsimilarity index 50%\nrename from from.txt\nrename to to/dest.txt\n"
    .. "--- a/from.txt\n+++ b/to/dest.txt\n@@ -1,2 +1,2 @@\n 1\n-2\n+two\n" },
  { "a pure git rename", { ["p.txt"] = "same\n" },
    "diff --git a/p.txt b/q.txt\nsimilarity index 100%\nrename from p.txt\nrename to q.txt\n" },
  { "a deleted file whose content differs", { ["d.txt"] = "real\n" },
    "--- a/d.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-other\n" },
  { "a hunk with more lines than its header", { ["h.txt"] = "1\n2\n3\n" },
    "--- a/h.txt\n+++ b/h.txt\n@@ -1,1 +1,1 @@\n-1\n+one\n 2\n 3\n" },
  { "a plain diff without a/ b/", { ["plain.txt"] = "p\nq\n" },
    "--- plain.txt\t2024-01-01 00:00:00\n+++ plain.txt\t2024-01-02 00:00:00\n@@ -1,2 +1,2 @@\n p\n-q\n+Q\n" },
  { "an insertion with a zero-length old side", { ["z.txt"] = "1\n2\n" },
    "--- a/z.txt\n+++ b/z.txt\n@@ -1,0 +2 @@\n+between\n" },
  { "two hunks on one file", { ["t.txt"] = lines(20, function(i) return i .. "\n" end) },
    "--- a/t.txt\n+++ b/t.txt\n@@ -2,3 +2,3 @@\n 2\n-3\n+three\n 4\n@@ -17,3 +17,3 @@\n 17\n-18\n+eighteen\n 19\n" },
}

local plan = #pairs_ * 2 + #written
print("1.." .. plan)
local n, failed = 0, 0
local function report(ok, name, why)
  n = n + 1
  if ok then print("ok " .. n .. " - " .. name) else
    failed = failed + 1
    print("not ok " .. n .. " - " .. name .. ": " .. why)
  end
end

local function same(a, b)
  for k, v in pairs(a) do if b[k] ~= v then return false, k end end
  for k in pairs(b) do if a[k] == nil then return false, k end end
  return true
end

local function run(cmd)
  local p = io.popen(cmd)
  local out = p:read("a")
  p:close()
  return out
end

for _, c in ipairs(pairs_) do
  local name, before, after = c[1], c[2], c[3]
  hostfs.write_tree(tmp .. "/a", before)
  hostfs.write_tree(tmp .. "/b", after)
  -- git's diff of a commit of the first tree against the second (renames found)
  local git = "rm -rf r && cp -r a r && cd r && git init -q && git add -A && git -c user.name=t -c user.email=t@t "
    .. "commit -qm a && rm -rf ./* && cp -r ../b/. . && git add -A && git diff --cached -M --no-color"
  for _, tool in ipairs { "diff -ruN a b", git } do
    local d = run("cd " .. q(tmp) .. " && " .. tool)
    hostfs.write_tree(tmp .. "/w", before)
    local ok, msg = hostfs.apply(tmp .. "/w", d)
    -- diff -ruN names files a/x and b/x: the same prefixes as git's
    local got = hostfs.read_tree(tmp .. "/w")
    local want = {}
    for k, v in pairs(after) do want[k] = v end
    if tool:sub(1, 4) == "diff" then
      -- diff -N shows a deleted file as emptied, not removed
      for k in pairs(before) do if after[k] == nil then want[k] = "" end end
    end
    local eq, where = same(got, want)
    report(ok and eq, name .. (tool == git and " (git diff)" or " (diff -ruN)"),
      ok and ("differs at " .. tostring(where) .. ": " .. string.format("%q", tostring(got[where]))) or tostring(msg))
  end
end

for _, c in ipairs(written) do
  local name, files, diff = c[1], c[2], c[3]
  hostfs.write_tree(tmp .. "/g", files)
  hostfs.write_tree(tmp .. "/l", files)
  local pf = tmp .. "/p.diff"
  local f = assert(io.open(pf, "wb"))
  f:write(diff)
  f:close()
  local gok = os.execute("cd " .. q(tmp .. "/g") .. " && git apply --unsafe-paths " .. q(pf) .. " >/dev/null 2>&1") == true
  local lok, lmsg = hostfs.apply(tmp .. "/l", diff)
  local gt, lt = hostfs.read_tree(tmp .. "/g"), hostfs.read_tree(tmp .. "/l")
  local why
  if gok ~= lok then
    why = "git apply " .. (gok and "applies" or "refuses") .. ", lash " .. (lok and "applies" or ("refuses: " .. lmsg))
  elseif lok then
    local eq, where = same(lt, gt)
    if not eq then why = "trees differ at " .. where end
  else
    local eq, where = same(lt, files)
    if not eq then why = "lash refused but changed " .. where end
  end
  report(why == nil, name .. (lok and "" or " (both refuse)"), why)
end
os.execute("rm -rf " .. q(tmp))
os.exit(failed == 0 and 0 or 1)
