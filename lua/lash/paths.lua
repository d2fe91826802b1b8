--- lash.paths: where lash keeps a user's files, by the XDG base directory
-- rules: a variable naming the file itself wins, then lash's own directory
-- (`$XDG_CONFIG_HOME/lash`, `$XDG_STATE_HOME/lash`, else under $HOME). The
-- directory comes from the one resolver lash has (C, `lash.sys.user_dir`),
-- which the local sandboxes' state root uses too; the config file
-- (lash.config), the sessions database (lash.sessions), the chat history and
-- MCP tokens are found here.
-- @module lash.paths
local runtime = require "lash.runtime"

local M = {}

local function nonempty(s)
  if s == nil or s == "" then return nil end
  return s
end

--- lash's own directory for a kind of files.
-- @tparam string kind "config" or "state"
-- @tparam[opt] function getenv (os.getenv, or a table's lookup in tests)
-- @treturn string the directory (not made), or nil
-- @treturn string the variable that chose it ("XDG_STATE_HOME", "HOME", ...),
--   or the reason there is none
function M.user_dir(kind, getenv)
  return runtime.sys.user_dir(kind, getenv or os.getenv)
end

--- The path of one of lash's per-user files, and why there.
-- @tparam function getenv (os.getenv, or a table's lookup in tests)
-- @tparam string override the variable naming the file, e.g. "LASH_CONFIG"
-- @tparam string kind "config" or "state"
-- @tparam string name the file under lash's directory, e.g. "config.lua"
-- @treturn string the path, or nil when there is no directory for it
-- @treturn string `override`, the XDG variable, or "default" (under $HOME);
--   or the reason there is none
function M.user_file(getenv, override, kind, name)
  getenv = getenv or os.getenv
  local p = nonempty(getenv(override))
  if p then return p, override end
  local dir, from = M.user_dir(kind, getenv)
  if not dir then return nil, from end
  return dir .. "/" .. name, from == "HOME" and "default" or from
end

return M
