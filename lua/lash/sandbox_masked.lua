--- What a local sandbox hides of the host's tree, said where a program
-- "is not found" in a jail although it is there on the host: every jail has
-- a /tmp of its own, and /var/tmp, /home, /root, /run and /var/run are
-- masked (src/5-backend/local/prim/sandbox_view.c owns the list; this is
-- its wording for people). One place, so a jailed MCP server's start error
-- and `lash sandbox exec` say the same.
-- @module lash.sandbox_masked
local M = {}

--- The masked trees, as the jail's view masks them.
M.DIRS = { "/tmp", "/var/tmp", "/home", "/root", "/run", "/var/run" }

local function under(path, dir)
  return path == dir or path:sub(1, #dir + 1) == dir .. "/"
end

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

--- A sentence for a program the jail could not find, or nil when masking
-- is not the cause (not under a masked tree, or not on the host either).
-- @tparam string program the command's first word, as given
-- @treturn string|nil
function M.note(program)
  if type(program) ~= "string" or program:sub(1, 1) ~= "/" then return nil end
  for _, dir in ipairs(M.DIRS) do
    if under(program, dir) and exists(program) then
      return "'" .. program .. "' is on the host, but a sandbox does not see " .. dir .. ": every sandbox has its "
        .. "own /tmp, and /var/tmp, /home, /root and /run are masked. Put the program where the sandbox sees "
        .. "the host (e.g. /opt or /usr/local), or copy it in (lash sandbox cp) and run that copy."
    end
  end
  return nil
end

return M
