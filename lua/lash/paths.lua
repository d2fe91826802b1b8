--- lash.paths: where lash keeps a user's files, by the XDG base directory
-- rules: a variable naming the file itself wins, then `$XDG_*_HOME/lash/`,
-- then the XDG default under $HOME. The config file (lash.config) and the
-- sessions database (lash.sessions) are found here.
-- @module lash.paths
local M = {}

local function nonempty(s)
  if s == nil or s == "" then return nil end
  return s
end

--- The path of one of lash's per-user files, and why there.
-- @tparam function getenv (os.getenv, or a table's lookup in tests)
-- @tparam string override the variable naming the file, e.g. "LASH_CONFIG"
-- @tparam string xdg the base directory variable, e.g. "XDG_CONFIG_HOME"
-- @tparam string home_default that directory's default under $HOME, e.g. ".config"
-- @tparam string name the file under lash/, e.g. "config.lua"
-- @treturn string the path
-- @treturn string `override` or `xdg` (the variable it came from), or "default"
function M.user_file(getenv, override, xdg, home_default, name)
  getenv = getenv or os.getenv
  local p = nonempty(getenv(override))
  if p then return p, override end
  local base = nonempty(getenv(xdg))
  if base then return base .. "/lash/" .. name, xdg end
  return (nonempty(getenv("HOME")) or ".") .. "/" .. home_default .. "/lash/" .. name, "default"
end

return M
