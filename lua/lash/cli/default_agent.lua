--- lash.cli.default_agent: the agent `lash run PROMPT` and `lash chat` use
-- when no spec is given (a coder with the sandbox capability and the
-- configured model, as `llm`, Codex and Claude Code work without a file),
-- and the rule that tells a spec from a prompt in the first argument.
--
-- The rule: the first argument is a spec when it ends in .lua, .yaml, .yml
-- or .json and holds no whitespace. Otherwise it is the prompt, unless it
-- looks like a file (one word that exists, has a `/` or ends like a file
-- name): that is
-- refused, saying what a spec is and how to send a prompt, so a mistyped
-- spec name never becomes a prompt by accident.
-- @module lash.cli.default_agent
local M = {}

M.NAME = "lash"

local SPEC_EXT = { lua = true, yaml = true, yml = true, json = true }

local INSTRUCTIONS = "You are lash's built-in coding agent. Do the task in the sandbox: look before you change "
  .. "things, write files with the file tools, run commands to check your work, and fix what fails. Answer "
  .. "briefly: what you did, what you found, and what the user should know."

--- Is `arg` a spec file by the first-argument rule?
function M.is_spec(arg)
  if arg:find("%s") then return false end
  local ext = arg:match("%.(%w+)$")
  return ext ~= nil and SPEC_EXT[ext:lower()] == true
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

--- Split a command's positionals into a spec and the rest.
-- @tparam {string,...} positional
-- @tparam string cmd "run" or "chat", for messages
-- @treturn[1] string|nil the spec path (nil: the built-in agent)
-- @treturn[1] {string,...} the positionals after it
-- @treturn[2] nil
-- @treturn[2] nil
-- @treturn[2] string the usage error
function M.split(positional, cmd)
  local first = positional[1]
  if first == nil then return nil, {} end
  local rest = table.move(positional, 2, #positional, 1, {})
  if M.is_spec(first) then return first, rest end
  -- one word that names a file, has a `/`, or ends like a file name
  -- (agent.ymal): a mistyped spec, not a prompt
  local filelike = not first:find("%s") and (first:find("/", 1, true) or exists(first)
    or first:match("%.%a%a?%a?%a?$"))
  if filelike or #rest > 0 then
    local how
    if cmd == "chat" then how = "`lash chat` alone talks with the built-in agent"
    elseif #rest > 0 then
      how = "to ask the built-in agent, quote the whole prompt: lash run \"" .. table.concat(positional, " ") .. "\""
    else
      how = "to ask the built-in agent about it, write a prompt: lash run \"what is in " .. first .. "?\""
    end
    return nil, nil, "the first argument is a spec file (.lua, .yaml, .yml or .json), and '" .. first
      .. "' is not one; " .. how
  end
  return nil, positional
end

--- The session scope of the built-in agent: sessions of it continue per
-- directory (`lash run -c` in a project goes on with that project's last
-- conversation), as Claude Code scopes --continue.
function M.session_spec(cwd)
  return "builtin:" .. (cwd or os.getenv("PWD") or ".")
end

--- What to do when no model is set anywhere.
-- @tparam[opt] string spec the spec's path (nil: the built-in agent)
function M.no_model(spec)
  return (spec and (spec .. " sets no model") or "the built-in agent uses the configured model, and none is set")
    .. ": pass --model M (e.g. --model anthropic:claude-sonnet-4-6, or --model test to try it offline), set "
    .. "LASH_MODEL, or write model = \"...\" in the config file (lash config path shows where)"
end

--- The built-in agent: the sandbox coder, with no model of its own (the
-- run takes --model, LASH_MODEL or the config's).
function M.agent()
  local lash = require "lash"
  return lash.agent {
    name = M.NAME,
    instructions = INSTRUCTIONS,
    capabilities = { lash.sandbox_capability {} },
  }
end

return M
