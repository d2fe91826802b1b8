--- lash.trust: what a spec loaded without trust may set, and the marks on
-- what such a spec built. The sandbox and model options it may give, where
-- each refused one comes from instead, and the checks of them: when the
-- spec is loaded (spec.lua, lash.spec_env's constructors) and again where a
-- marked sandbox capability calls its backend (lash.capabilities.sandbox).
-- Below both, so the capability checks its marks without requiring the
-- spec loader. lash.spec_env re-exports these names.
-- @module lash.trust
local M = {}

--- Sandbox capability options an untrusted spec may set (everything else is
-- refused). Values: true, or a function(value) returning nil when allowed
-- and the reason when not.
M.SANDBOX_OPTIONS = {
  backend = true, sandbox_id = true, attach_to = true, owner = true, sandbox_timeout = true,
  workdir = true, env = true, default_command_timeout = true, max_command_timeout = true,
  max_output_bytes = true, max_output_lines = true, max_read_bytes = true, instructions = true,
  log = true,
  -- extra tools work inside the sandbox only (lash.capabilities.sandbox_tools)
  tools = true, max_background = true,
  -- Modal: what the sandbox runs and how big it is, not where or as whom
  image = true, app_name = true, create_app_if_missing = true, cpu = true, memory = true,
  network = function(v)
    if v == nil or v == "off" then return nil end
    return "it opens the sandbox's network"
  end,
}

--- Where each refused option comes from instead.
M.TRUSTED_SIDE = {
  isolation = "`lash sandbox create --isolation none` (then `lash run --attach ID --owner O`)",
  rootfs = "`lash sandbox create --rootfs DIR` (then `lash run --attach`)",
  limits = "`lash sandbox create --limit name=N` (then `lash run --attach`)",
  state_root = "`--state-root`, $LASH_SANDBOX_ROOT or lash_Options.state_root",
  network = "`lash sandbox create --network on` (then `lash run --attach`)",
  session = "the embedding host (Lua: lash.sandbox_capability{session = ...} in trusted code)",
  server_url = "$MODAL_SERVER_URL", environment = "$MODAL_ENVIRONMENT", profile = "$MODAL_PROFILE",
  config_path = "~/.modal.toml (or $MODAL_PROFILE)", ca_file = "the embedding host",
  sandbox_v2 = "the embedding host",
}

local function trusted_fix(name)
  return (M.TRUSTED_SIDE[name] or "the embedding host") .. ", or load the spec with --trust (trust = true)"
end

--- Refuse the sandbox options an untrusted spec may not set.
-- @tparam table opts the capability's options
-- @tparam string who e.g. "LocalSandbox" or "lash.sandbox_capability"
-- @raise naming the option, why, and where to set it instead
function M.check_sandbox_options(opts, who)
  if type(opts) ~= "table" then return end
  local names = {}
  for k in pairs(opts) do names[#names + 1] = tostring(k) end
  table.sort(names)
  for _, k in ipairs(names) do
    local rule = M.SANDBOX_OPTIONS[k]
    local why
    if rule == nil then
      why = "it changes what the sandbox can reach on this machine"
    elseif type(rule) == "function" then
      why = rule(opts[k])
    end
    if why then
      error(who .. ": option '" .. k .. "' is refused in a spec loaded without --trust (" .. why
        .. "); set it from the trusted side: " .. trusted_fix(k), 0)
    end
  end
end

-- A model given with an endpoint of its own would send the host's API key
-- (from the environment) there, unless the spec brings its own key.
local function check_model_options(o, where)
  if type(o) ~= "table" then return end
  if o.base_url ~= nil and o.api_key == nil then
    error(where .. ": base_url is refused in a spec loaded without --trust unless the spec also gives "
      .. "api_key (otherwise the host's key from the environment would go to that endpoint); set "
      .. "ANTHROPIC_BASE_URL/OPENAI_BASE_URL, or load the spec with --trust", 0)
  end
end

--- Refuse what an untrusted agent definition may not say.
-- @tparam table def lash.agent's definition
-- @tparam string where for messages
function M.check_agent(def, where)
  if type(def) ~= "table" then return end
  if type(def.model) == "table" and type(def.model[1]) == "string" then
    check_model_options(def.model, where .. ": model")
  end
  check_model_options(def.model_options, where .. ": model_options")
end

-- Sandbox capabilities an untrusted spec built (weak: they go with it).
-- The spec can change the fields of objects it holds, so the options are
-- checked again where they are used: the backend call itself.
local marked = setmetatable({}, { __mode = "k" })

--- Mark a sandbox capability as built by an untrusted spec.
function M.mark(cap)
  marked[cap] = true
  return cap
end

--- Was it built by an untrusted spec?
function M.is_marked(cap)
  return marked[cap] == true
end

-- Backend options (of lash.sandbox.create/open) a marked capability may pass.
M.BACKEND_CALL = {
  backend = true, timeout = true, workdir = true, env = true, image = true, app_name = true, app = true,
  create_app_if_missing = true, cpu = true, memory = true,
  network = M.SANDBOX_OPTIONS.network,
}

--- Refuse a backend call of a marked capability that passes more than an
-- untrusted spec may set.
-- @tparam table cap the sandbox capability
-- @tparam table t the options for lash.sandbox.create or open
function M.check_use(cap, t)
  if not marked[cap] then return end
  for k, v in pairs(t) do
    local rule = M.BACKEND_CALL[k]
    local why = rule == nil and "it changes what the sandbox can reach on this machine"
      or type(rule) == "function" and rule(v) or nil
    if why then
      error("lash.sandbox_capability: option '" .. tostring(k) .. "' of a sandbox an untrusted spec described "
        .. "is refused (" .. why .. "); set it from the trusted side: " .. trusted_fix(k), 0)
    end
  end
end

return M
