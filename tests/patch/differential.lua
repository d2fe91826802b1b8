-- tests/patch/differential.lua CODEX_BINARY: every case of tests/patch/
-- cases.lua applied by lash's apply_patch and by Codex's own (the codex
-- binary of the pinned @openai/codex, run as apply_patch), each in a fresh
-- copy of the same files; prints TAP. Both must accept or both refuse;
-- accepted, the trees must be byte for byte the same; refused, lash must
-- have changed nothing (Codex may leave a partial result: lash is
-- all-or-nothing on purpose).
package.path = "lua/?.lua;tests/patch/?.lua;" .. package.path
package.cpath = (os.getenv("LASH_BUILD") or "build") .. "/?.so;" .. package.cpath
local hostfs = require "hostfs"
local cases = require "cases"

local codex = assert(arg[1], "usage: differential.lua CODEX_BINARY")
local tmp = os.tmpname()
os.remove(tmp)
local q = hostfs.q
-- Codex's binary is apply_patch when called by that name (it then reads
-- the patch from stdin)
os.execute("mkdir -p " .. q(tmp .. "/bin") .. " && ln -s " .. q(codex) .. " " .. q(tmp .. "/bin/apply_patch"))

local function same(a, b)
  for k, v in pairs(a) do if b[k] ~= v then return false, k end end
  for k in pairs(b) do if a[k] == nil then return false, k end end
  return true
end

local function show(s) return s and string.format("%q", s) or "(absent)" end

print("1.." .. #cases)
local failed = 0
for i, c in ipairs(cases) do
  local ld, cd = tmp .. "/lash", tmp .. "/codex"
  hostfs.write_tree(ld, c.files)
  hostfs.write_tree(cd, c.files)
  local pf = tmp .. "/patch.txt"
  local f = assert(io.open(pf, "wb"))
  f:write(c.patch)
  f:close()
  local lok, lmsg = hostfs.apply(ld, c.patch)
  local ok_codex = os.execute("cd " .. q(cd) .. " && " .. q(tmp .. "/bin/apply_patch") .. " < " .. q(pf)
    .. " >" .. q(tmp .. "/out") .. " 2>&1")
  local cok = ok_codex == true
  local lt, ct = hostfs.read_tree(ld), hostfs.read_tree(cd)
  local problem
  if lok ~= c.ok then
    problem = "lash " .. (lok and "applied" or ("refused (" .. tostring(lmsg) .. ")")) .. ", the case says it "
      .. (c.ok and "applies" or "is refused")
  elseif c.codex_refuses then
    if cok then problem = "Codex now applies it: drop codex_refuses" end
  elseif lok ~= cok then
    local h = io.open(tmp .. "/out"):read("a")
    problem = string.format("lash %s (%s), codex %s (%s)", lok and "applied" or "refused", tostring(lok and "" or lmsg),
      cok and "applied" or "refused", h:gsub("\n", " "))
  elseif lok then
    local eq, where = same(lt, ct)
    if not eq then problem = "trees differ at " .. where .. ": lash " .. show(lt[where]) .. ", codex " .. show(ct[where]) end
  else
    local eq, where = same(lt, c.files)
    if not eq then problem = "lash refused but changed " .. where end
  end
  if problem then
    failed = failed + 1
    print("not ok " .. i .. " - " .. c.name .. ": " .. problem)
  else
    print("ok " .. i .. " - " .. c.name .. (c.codex_refuses and " (Codex refuses it; lash takes it)"
      or (lok and "" or " (both refuse)")))
  end
end
os.execute("rm -rf " .. q(tmp))
os.exit(failed == 0 and 0 or 1)
