-- Runs the `lash` command line from specs: the built binary when there is
-- one ($LASH_BUILD/bin/lash), else the same Lua CLI through lua5.4 with
-- this checkout's modules. Returns stdout, stderr, exit code.
local M = {}

local build = os.getenv("LASH_BUILD") or "build"

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
M.quote = quote


local function binary()
  local bin = build .. "/bin/lash"
  local f = io.open(bin, "r")
  if f then
    f:close()
    if os.execute(bin .. " --version >/dev/null 2>&1") == true then return bin end
  end
  return "lua5.4 specs/helpers/lash_main.lua"
end
M.binary = binary

--- Run `lash ARGS...`; env is a string of VAR=value assignments (or nil),
-- stdin a string fed to standard input (default: /dev/null).
function M.run(args, env, stdin)
  local words = {}
  for i, a in ipairs(args) do words[i] = quote(a) end
  local errf = os.tmpname()
  local inf
  local input = "</dev/null"
  if stdin then
    inf = os.tmpname()
    local f = assert(io.open(inf, "w"))
    f:write(stdin)
    f:close()
    input = "<" .. quote(inf)
  end
  local cmd = (env and (env .. " ") or "") .. binary() .. " " .. table.concat(words, " ")
    .. " " .. input .. " 2>" .. quote(errf) .. "; echo \"::exit=$?\""
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("a")
  p:close()
  local code = tonumber(out:match("::exit=(%d+)%s*$"))
  out = out:gsub("::exit=%d+%s*$", "")
  local f = io.open(errf, "r")
  local err = f and f:read("a") or ""
  if f then f:close() end
  os.remove(errf)
  if inf then os.remove(inf) end
  return out, err, code
end

--- Write a temporary spec file; returns its path.
function M.spec(text)
  local base = os.tmpname()  -- creates the file: the spec is base .. ".lua"
  os.remove(base)
  local path = base .. ".lua"
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

return M
