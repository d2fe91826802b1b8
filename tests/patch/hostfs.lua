-- tests/patch/hostfs.lua: lash's apply_patch planner (lash.capabilities.
-- sandbox_tools.patch) over a host directory, for the tests that compare it
-- with other implementations on the same files: read through io.open,
-- commit by writing and removing, exactly as the tool commits through a
-- sandbox.
local patch = require "lash.capabilities.sandbox_tools.patch"

local M = {}

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
M.q = q

function M.write_tree(dir, files)
  os.execute("rm -rf " .. q(dir) .. " && mkdir -p " .. q(dir))
  for path, data in pairs(files) do
    os.execute("mkdir -p " .. q((dir .. "/" .. path):match("^(.*)/[^/]*$")))
    local f = assert(io.open(dir .. "/" .. path, "wb"))
    f:write(data)
    f:close()
  end
end

-- Every file under dir: {relpath = bytes}.
function M.read_tree(dir)
  local out = {}
  local p = io.popen("cd " .. q(dir) .. " && find . -type f -print0")
  local list = p:read("a")
  p:close()
  for rel in list:gmatch("%./([^%z]+)%z") do
    local f = assert(io.open(dir .. "/" .. rel, "rb"))
    out[rel] = f:read("a")
    f:close()
  end
  return out
end

local function reader(dir)
  return function(path)
    local full = path:sub(1, 1) == "/" and path or (dir .. "/" .. path)
    local f = io.open(full, "rb")
    if not f then return nil, "not_found" end
    local data = f:read("a")
    f:close()
    if data == nil then return nil, "is_dir" end
    return data
  end
end

--- Apply patch text in dir with lash's planner. Returns true and the
-- summary, or false and the error message.
function M.apply(dir, text)
  local parsed, perr = patch.parse(text)
  if not parsed then return false, perr.message end
  local plan, err = patch.plan(parsed, { read = reader(dir) })
  if not plan then return false, (err.path and (err.path .. ": ") or "") .. err.message end
  for _, c in ipairs(plan.changes) do
    local full = dir .. "/" .. c.path
    if c.exists then
      os.execute("mkdir -p " .. q(full:match("^(.*)/[^/]*$")))
      local f = assert(io.open(full, "wb"))
      f:write(c.data)
      f:close()
    else
      assert(os.remove(full))
    end
  end
  return true, plan.summary
end

return M
