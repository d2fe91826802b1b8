--- lash.cli.agents: the whole-agent rewrites the command line asks for.
-- `lash run --attach H --owner O` and `--backend B` rebuild an agent's
-- sandbox capabilities with other options (the spec loader's attach, owner
-- and backend options come here too), the configured default backend goes
-- on an agent that did not choose one, and `lash chat` keeps one sandbox
-- per conversation. The capability owns what one capability becomes
-- (`cap:with`, `cap:shared_in`); this module walks an agent's capabilities
-- (through wrappers such as PrefixTools) and copies the agent.
-- @module lash.cli.agents
local runtime = require "lash.runtime"
local sandbox = require "lash.capabilities.sandbox"

local M = {}

-- A copy of agent with other capabilities (the agent's own table is kept).
local function with_capabilities(agent, caps)
  local copy = {}
  for k, v in pairs(agent) do copy[k] = v end
  copy.capabilities = caps
  return setmetatable(copy, getmetatable(agent))
end

local function rewrite(c, fn)
  if sandbox.is_capability(c) then return fn(c) end
  if type(c) == "table" and c.inner ~= nil then
    local inner = rewrite(c.inner, fn)
    if inner == c.inner then return c end
    local copy = {}
    for k, v in pairs(c) do copy[k] = v end
    copy.inner, copy.sets, copy.sets_of = inner, nil, nil
    return setmetatable(copy, getmetatable(c))
  end
  return c
end

-- A copy of agent with `changes` applied to its sandbox capabilities
-- (rebuilt, so every construction check runs again); `single`: exactly
-- one must be found; `drop(cap)`: the names of options to remove first.
local function rewrite_agent(agent, changes, what, single, drop)
  local found = 0
  local caps = {}
  local ok, err = pcall(function()
    for i, c in ipairs(agent.capabilities or {}) do
      caps[i] = rewrite(c, function(cap)
        found = found + 1
        return cap:with(changes, drop and drop(cap))
      end)
    end
  end)
  if not ok then return nil, tostring(err) end
  if found == 0 then
    return nil, what .. " needs an agent with a sandbox capability (Sandbox, LocalSandbox or ModalSandbox); "
      .. "this one has none"
  end
  if single and found > 1 then
    return nil, what .. " is ambiguous: the agent has " .. found .. " sandbox capabilities; give each its own "
      .. "attach_to in the spec instead"
  end
  return with_capabilities(agent, caps)
end

--- A copy of `agent` whose sandbox capability attaches to `handle` as
-- `owner` (nil: from the orchestrator's environment), on `backend` (nil:
-- the spec's). The agent must have exactly one sandbox capability
-- (possibly wrapped, e.g. prefixed); it is rebuilt with attach_to and
-- owner. Creation-only options the spec sets (sandbox_timeout, workdir,
-- ...) are dropped with a warning on the log, so one spec serves both
-- standalone and attached runs: the step that created the sandbox chose
-- them. (A capability that names attach_to itself is still refused them at
-- construction, as in the reference.)
-- @treturn[1] agent
-- @treturn[2] nil
-- @treturn[2] string why not
function M.attach_agent(agent, handle, owner, backend)
  local changes = { attach_to = handle, sandbox_id = false }
  if owner then changes.owner = owner end
  if backend then changes.backend = backend end
  return rewrite_agent(agent, changes, "--attach", true, function(cap)
    local names = cap:creation_only()
    if #names > 0 then
      runtime.log("warning", "--attach: the spec's " .. table.concat(names, ", ")
        .. (#names == 1 and " applies" or " apply") .. " only when creating a sandbox; ignored, since the "
        .. "sandbox this run attaches to was created with its own")
    end
    return names
  end)
end

--- A copy of `agent` whose sandbox capabilities create their sandbox from
-- snapshot `snap` (a durable session continued: lash.durable). Only owned
-- sandboxes can start from one; an agent with none, or with one that
-- attaches to or shares a sandbox, is refused with the reason.
-- @treturn[1] agent
-- @treturn[2] nil
-- @treturn[2] string why not
function M.from_snapshot_agent(agent, snap)
  return rewrite_agent(agent, { from_snapshot = snap }, "resuming a durable session", true, function(cap)
    if cap.mode ~= "owned" then
      error("resuming a durable session starts a new sandbox from the session's last workspace, and this "
        .. "agent's sandbox capability uses an existing sandbox (" .. tostring(cap.mode) .. "); a workspace "
        .. "cannot yet be restored in place", 0)
    end
  end)
end

--- One sandbox per conversation (`lash chat`): the owned sandbox
-- capabilities of `agent` are made to share a sandbox across the turns of a
-- conversation (each rebuilt in shared mode over a `lash.sandbox.session`
-- created with the options it would create its own sandbox with), so what a
-- turn wrote is there in the next. `conv:agent()` gives the agent for the
-- next turn: a sandbox that has ended since (it expired while the user was
-- away, or was destroyed) is replaced by a fresh one, and the second result
-- counts them. `conv:close()` destroys the conversation's sandboxes. Other
-- modes (attached, shared) are kept as they are.
-- @treturn table conversation
function M.conversation(agent)
  local conv = { sessions = {} }
  local function alive(sb)
    local ok, st = pcall(sb.poll, sb)
    return ok and st.running
  end
  function conv:agent()
    local n, renewed, caps = 0, 0, {}
    local ok, err = pcall(function()
      for i, c in ipairs(agent.capabilities or {}) do
        caps[i] = rewrite(c, function(cap)
          if cap.mode ~= "owned" then return cap end
          n = n + 1
          local sb = self.sessions[n]
          if sb and not alive(sb) then
            pcall(sb.close, sb)
            sb, renewed = nil, renewed + 1
          end
          if not sb then
            sb = runtime.sandbox.session(cap:creation_options())
            self.sessions[n] = sb
          end
          return cap:shared_in(sb)
        end)
      end
    end)
    if not ok then return nil, tostring(type(err) == "table" and err.message or err) end
    if n == 0 then return agent, 0 end
    return with_capabilities(agent, caps), renewed
  end
  function conv:close()
    for i, sb in pairs(self.sessions) do
      pcall(sb.close, sb)
      self.sessions[i] = nil
    end
  end
  return conv
end

--- A copy of `agent` whose sandbox capabilities use `backend` (lash run
-- --backend): options the new backend does not have are refused.
function M.with_backend(agent, backend)
  return rewrite_agent(agent, { backend = backend }, "--backend", false)
end


--- Put a default backend (from the environment or the config) on an
-- agent's sandbox capability; an agent without one is returned as is.
-- @return agent, or nil, message
function M.default_backend(agent, backend)
  local a, err = M.with_backend(agent, backend)
  if a then return a end
  if tostring(err):find("this one has none", 1, true) then return agent end
  return nil, "the default sandbox backend '" .. backend .. "': " .. tostring(err)
end

return M
