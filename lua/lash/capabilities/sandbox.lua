--- `lash.sandbox_capability{...}`: four tools that let the model work in
-- a sandbox (`run_command`, `read_file`, `write_file`, `list_directory`),
-- default instructions, and the sandbox's lifecycle around each run. Works
-- on any `lash.sandbox` backend (local bubblewrap jails, Modal, a Lua
-- backend registered with lash.sandbox.register_backend) through the
-- generic binding only. The texts the model sees are built in
-- lash.capabilities.sandbox_format.
--
-- **Modes**, fixed at construction:
--   owned     (default) a sandbox created when the run opens its toolsets,
--             before the first model call, and destroyed when the run
--             ends, whatever way it ends.
--   attached  `sandbox_id = "..."`: an existing sandbox, never destroyed.
--             With `attach_to = "<handle or {{ template }}>"` and `owner`
--             instead, the run also proves it may use the sandbox: the
--             owner must match the one the provisioning step stamped, and
--             the run claims it as holder until it ends (see
--             lash.identity; docs in docs/pipelines.md).
--   shared    `session = lash.sandbox.session{...}`: the caller's sandbox
--             object, shared by several runs, never destroyed (the caller
--             closes it).
--
-- **Errors.** A recoverable sandbox error (a missing file, a command that
-- cannot start) becomes a retry prompt for the model. A terminal one (the
-- sandbox is gone, credentials refused, an attach refused) ends the run
-- with a typed error whose message says what happened and what to do.
-- @module lash.capabilities.sandbox
local fmt = require "lash.capabilities.sandbox_format"
local identity = require "lash.identity"
local json = require "lash.json"
local tool = require "lash.tool"
local capability = require "lash.capability"
local template = require "lash.template"
local runtime = require "lash.runtime"
local options = require "lash.options"
local defaults = require "lash.defaults"
local trust = require "lash.trust"
local sandbox_tools = require "lash.capabilities.sandbox_tools"
local sandbox_stream = require "lash.capabilities.sandbox_stream"

local M = {}

M.NAME = "Sandbox"

-- Overridable by tests: the clocks (wall: seconds since the epoch, as the
-- lash_expires_at stamp; mono: lash.now), the pause between release
-- attempts, and the environment identity reads.
M.clock = {
  wall = function() return os.time() end,
  mono = function() return runtime.now() end,
}
M.RELEASE_ATTEMPTS = 3
M.release_delay = 1.0
M.getenv = os.getenv

--- Where warnings and notes go unless a capability has its own `log`: the
-- host's log (lash.log: stderr by default, where info shows only with
-- LASH_LOG=info or debug; an embedding host's log callback otherwise).
function M.log(level, message)
  runtime.log(level, message)
end


-- lash.defaults.sandbox, by option name
local DEFAULTS = {}
for _, k in ipairs { "backend", "app_name", "create_app_if_missing", "sandbox_timeout", "default_command_timeout",
                     "max_output_bytes", "max_output_lines", "max_read_bytes" } do
  DEFAULTS[k] = defaults.sandbox[k]
end

-- The reuse modes cannot see the sandbox's lifetime: commands are capped
-- at this unless max_command_timeout says otherwise (or the backend
-- reports an expiry).
local REUSE_CEILING = defaults.sandbox.reuse_command_ceiling

-- Capability options that are not backend options.
local OWN = {
  backend = true, sandbox_id = true, session = true, attach_to = true, owner = true,
  sandbox_timeout = true, workdir = true, env = true, network = true, from_snapshot = true,
  default_command_timeout = true, max_command_timeout = true, max_output_bytes = true,
  max_output_lines = true, max_read_bytes = true, instructions = true, log = true, tools = true,
  max_background = true, publish = true,
}

-- Options that exist only on some backends, with the backend option names
-- that take them.
local BACKEND_NAMED = {
  image = { "image" }, rootfs = { "rootfs" }, app_name = { "app_name", "app" },
  create_app_if_missing = { "create_app_if_missing" },
}

-- Creation-only options, in the order messages list them (backend
-- create options follow, sorted).
local CREATION = { "image", "rootfs", "app_name", "create_app_if_missing", "sandbox_timeout", "workdir", "env",
                   "network", "from_snapshot" }

local function show(v)
  local t = type(v)
  if t == "string" then return fmt.quote(v) end
  if t == "number" then return fmt.number(v) end
  if t == "nil" then return "nil" end
  if t == "boolean" then return tostring(v) end
  return "a " .. t
end

local function fail(msg)
  error("lash.sandbox_capability: " .. msg, 0)
end

local function list_set(list)
  local s = {}
  for _, k in ipairs(list or {}) do s[k] = true end
  return s
end

local function is_sandbox_object(v)
  local mt = getmetatable(v)
  return type(v) == "userdata" and type(mt) == "table" and mt.__name == "lash.sandbox"
end

---------------------------------------------------------------------------
-- Construction checks

local function positive_integer(opts, name)
  local v = opts[name]
  if v == nil then return end
  -- an exact integer, as the reference's `int` check: 300.0 is refused
  if math.type(v) ~= "integer" or v <= 0 then
    fail(name .. " must be a positive integer, got " .. show(v) .. ".")
  end
end

local function check_types(o)
  for _, name in ipairs { "sandbox_timeout", "max_output_bytes", "max_output_lines", "max_read_bytes",
                          "max_background" } do
    positive_integer(o, name)
  end
  local pub = o.publish
  if pub ~= nil then
    if type(pub) ~= "table" then fail("publish must be a list of ports, such as {8000}, got " .. show(pub) .. ".") end
    for k, v in pairs(pub) do
      if math.type(k) ~= "integer" or k < 1 or k > #pub or math.type(v) ~= "integer" or v < 1 or v > 65535 then
        fail("publish must be a list of TCP ports (integers 1-65535), such as {8000}; got " .. show(v) .. ".")
      end
    end
  end
  local d = o.default_command_timeout
  if d ~= nil and (type(d) ~= "number" or not (d > 0) or d == math.huge) then
    fail("default_command_timeout must be a positive finite number, got " .. show(d) .. ".")
  end
  local m = o.max_command_timeout
  if m ~= nil then
    if math.type(m) ~= "integer" or m <= 0 then
      fail("max_command_timeout must be a positive integer or nil, got " .. show(m) .. ".")
    end
  end
  if o.instructions ~= nil and type(o.instructions) ~= "string" then
    fail("instructions must be a string or nil, got " .. show(o.instructions)
      .. ". Give the text to use instead of the default, or '' for none.")
  end
  if o.sandbox_id ~= nil and (type(o.sandbox_id) ~= "string" or o.sandbox_id == "") then
    fail("sandbox_id must be a sandbox id (a non-empty string), got " .. show(o.sandbox_id) .. ".")
  end
  if o.session ~= nil and not is_sandbox_object(o.session) then
    fail("session must be a lash.sandbox object (from lash.sandbox.session{...}), got " .. show(o.session) .. ".")
  end
  if o.workdir ~= nil and (type(o.workdir) ~= "string" or o.workdir:sub(1, 1) ~= "/") then
    fail("workdir must be an absolute path, got " .. show(o.workdir) .. ".")
  end
  if o.env ~= nil then
    if type(o.env) ~= "table" then fail("env must be a table of strings, got " .. show(o.env) .. ".") end
    for k, v in pairs(o.env) do
      if type(k) ~= "string" or k == "" or k:find("=", 1, true) then
        fail("env has a bad variable name " .. show(k) .. "; names are non-empty strings without '='.")
      end
      if type(v) ~= "string" then
        fail("env[" .. fmt.quote(k) .. "] must be a string, got " .. show(v) .. " (convert it with tostring).")
      end
    end
  end
  if o.network ~= nil then
    local ok, err = pcall(runtime.sandbox.encode_network, o.network)
    if not ok then fail("network: " .. tostring(err)) end
  end
  for _, name in ipairs { "image", "rootfs", "app_name" } do
    if o[name] ~= nil and (type(o[name]) ~= "string" or o[name] == "") then
      fail(name .. " must be a non-empty string, got " .. show(o[name]) .. ".")
    end
  end
  if o.create_app_if_missing ~= nil and type(o.create_app_if_missing) ~= "boolean" then
    fail("create_app_if_missing must be true or false, got " .. show(o.create_app_if_missing) .. ".")
  end
  if o.log ~= nil and type(o.log) ~= "function" then
    fail("log must be a function(level, message), got " .. show(o.log) .. ".")
  end
  local _, tools_err = sandbox_tools.check(o.tools)
  if tools_err then fail(tools_err) end
  local a = o.attach_to
  if a ~= nil then
    if type(a) == "function" then
      -- rendered per run
    elseif type(a) ~= "string" then
      fail("attach_to must be a sandbox handle, a template such as '{{ deps.sandbox }}', or a function(ctx) "
        .. "returning one, got " .. show(a) .. ".")
    elseif a == "" or a == "nil" or a == "None" then
      fail("attach_to must be a sandbox handle, not " .. show(a) .. ". Pass the handle the provisioning step "
        .. "printed (lash sandbox create), or a template that renders to it.")
    end
  end
  if o.owner ~= nil and (type(o.owner) ~= "string" or o.owner == "") then
    fail("owner must be a non-empty string, got " .. show(o.owner) .. ".")
  end
end

-- The backend's option sets, and the key each given backend-named option
-- maps to; refuses options nobody takes.
local function check_backend_options(o, given, info)
  local create, config = list_set(info.create_options), list_set(info.config_options)
  local pass, unknown, foreign = {}, {}, {}
  for k in pairs(given) do
    if type(k) ~= "string" then fail("option names must be strings, got " .. show(k) .. ".") end
    if BACKEND_NAMED[k] then
      local target
      for _, name in ipairs(BACKEND_NAMED[k]) do
        if create[name] or config[name] then target = name break end
      end
      if target then pass[k] = target else foreign[#foreign + 1] = k end
    elseif not OWN[k] then
      if create[k] or config[k] then pass[k] = k else unknown[#unknown + 1] = k end
    end
  end
  table.sort(unknown)
  table.sort(foreign)
  if #unknown > 0 then
    local known = {}
    for _, set in ipairs { OWN, BACKEND_NAMED, create, config } do
      for k in pairs(set) do known[k] = true end
    end
    fail(string.format("unknown option%s %s (the %s backend's sandbox capability takes: %s).",
      #unknown > 1 and "s" or "", table.concat(unknown, ", "), info.name, options.names(known)))
  end
  if #foreign > 0 then
    local offer = {}
    for _, k in ipairs(info.create_options or {}) do offer[#offer + 1] = k end
    for _, k in ipairs(info.config_options or {}) do offer[#offer + 1] = k end
    fail(string.format("the %s backend has no option %s; remove %s, or choose a backend that has %s (its own "
      .. "options: %s).", info.name, table.concat(foreign, ", "), #foreign > 1 and "them" or "it",
      #foreign > 1 and "them" or "it", #offer > 0 and table.concat(offer, ", ") or "none"))
  end
  return pass, create, config
end

local CEILING_HINT = " To raise the per-command timeout ceiling on a reused sandbox, set `max_command_timeout`."

-- "env, image only apply when...": the names of creation-only options
-- given to an attach, in the reference's words (one name or several).
local function creation_only(names)
  return table.concat(names, ", ") .. " only apply when creating a sandbox"
end

-- The creation-only options in `given`, in the order messages name them
-- (`create`: the backend's own create options, as a set).
local function creation_given(given, create)
  local creation = {}
  for _, k in ipairs(CREATION) do
    if given[k] ~= nil then creation[#creation + 1] = k end
  end
  local extra = {}
  for k in pairs(given) do
    if create[k] and not BACKEND_NAMED[k] then extra[#extra + 1] = k end
  end
  table.sort(extra)
  for _, k in ipairs(extra) do creation[#creation + 1] = k end
  return creation
end

local function check_modes(given, create)
  local creation = creation_given(given, create)
  local hint = given.sandbox_timeout ~= nil and CEILING_HINT or ""
  if given.session ~= nil then
    local names = {}
    for i, k in ipairs(creation) do names[i] = k end
    if given.sandbox_id ~= nil then names[#names + 1] = "sandbox_id" end
    if given.attach_to ~= nil then names[#names + 1] = "attach_to" end
    if #names > 0 then
      fail(table.concat(names, ", ") .. " cannot be combined with `session`, which already owns the sandbox "
        .. "and its configuration." .. hint)
    end
  end
  if given.attach_to ~= nil then
    if given.sandbox_id ~= nil then
      fail("sandbox_id cannot be combined with `attach_to`: both name the sandbox to use. Keep attach_to (it "
        .. "checks the owner and claims the sandbox), or sandbox_id (a plain attach).")
    end
    if #creation > 0 then
      fail(creation_only(creation) .. ", but `attach_to` attaches to one "
        .. "an earlier step created (that step chose them). Remove them, or drop `attach_to` to create a "
        .. "sandbox." .. hint)
    end
  elseif given.sandbox_id ~= nil and #creation > 0 then
    fail(creation_only(creation) .. ", but `sandbox_id` attaches to an "
      .. "existing one. Remove them, or drop `sandbox_id` to create a sandbox." .. hint)
  end
  if given.owner ~= nil and given.attach_to == nil then
    fail("owner only applies together with attach_to: it is the owner the provisioning step stamped on the "
      .. "sandbox this run attaches to. To stamp an owner, create the sandbox with it (`lash sandbox create "
      .. "--owner O`, or lash.sandbox.create{owner = ...}).")
  end
end

---------------------------------------------------------------------------
-- The capability

local Cap = {}
Cap.__index = Cap
Cap.__name = "lash.sandbox_capability"
M.Capability = Cap

local Run = {}
Run.__index = Run
Run.__name = "lash.sandbox_capability.run"

local RunToolset = {}
RunToolset.__index = RunToolset
RunToolset.__name = "lash.sandbox_capability.toolset"

--- Make the capability.
-- @tparam table opts `backend` ("local"), `sandbox_id`, `session`,
--   `attach_to` and `owner`, `sandbox_timeout` (300), `workdir`, `env`,
--   `network`, `default_command_timeout` (60), `max_command_timeout`,
--   `max_output_bytes` (51200), `max_output_lines` (2000), `max_read_bytes`
--   (5242880), `instructions`, `log` (function(level, message)), `tools`
--   (extra tools beyond the four: "edit_file", "apply_patch", "glob",
--   "grep"; lash.capabilities.sandbox_tools), and the
--   backend's own options (`image`, `app_name`, `create_app_if_missing` for
--   Modal; `rootfs` and e.g. `state_root` for local).
-- @raise a message naming the option, its value and the fix
function M.new(opts)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then fail("expected a table of options, got " .. show(opts) .. ".") end
  if getmetatable(opts) == Cap then return opts end
  local given = {}
  for k, v in pairs(opts) do given[k] = v end
  local o = {}
  for k, v in pairs(given) do o[k] = v end
  if o.backend ~= nil and (type(o.backend) ~= "string" or o.backend == "") then
    fail("backend must be the name of a sandbox backend (e.g. 'local', 'modal'), got " .. show(o.backend) .. ".")
  end
  if o.backend == nil and is_sandbox_object(o.session) then o.backend = o.session.backend end
  local backend = o.backend or DEFAULTS.backend
  local ok, info = pcall(runtime.sandbox.describe, backend)
  if not ok then fail(tostring(info):gsub("^unknown", "backend: unknown", 1) .. ".") end
  local pass, create = check_backend_options(o, given, info)
  check_types(o)
  if o.tools ~= nil then o.tools = sandbox_tools.check(o.tools) end
  if is_sandbox_object(o.session) and given.backend ~= nil and o.session.backend ~= backend then
    fail("backend " .. fmt.quote(backend) .. " does not match the session's backend "
      .. fmt.quote(o.session.backend) .. "; leave backend out with a session.")
  end
  check_modes(given, create)
  for k, v in pairs(DEFAULTS) do
    if o[k] == nil then o[k] = v end
  end
  local mode = (o.session and "shared") or ((o.sandbox_id or o.attach_to) and "attached") or "owned"
  if mode == "owned" and o.max_command_timeout and o.max_command_timeout > o.sandbox_timeout then
    fail(string.format("max_command_timeout (%d) cannot exceed sandbox_timeout (%d) for an owned sandbox: the "
      .. "sandbox is reaped before such a command could finish. Raise sandbox_timeout instead.",
      o.max_command_timeout, o.sandbox_timeout))
  end
  if o.attach_to ~= nil and not info.can_tag then
    fail("attach_to needs a backend that can hold tags (the owner and holder marks), and the " .. backend
      .. " backend cannot. Use a backend that can, such as local or modal, or drop attach_to and owner.")
  end
  local self = setmetatable({
    name = M.NAME, backend = backend, mode = mode, claims = o.attach_to ~= nil, opts = o, given = given,
    pass = pass, info = info, create = create,
  }, Cap)
  -- built while an untrusted spec loads: its backend calls are checked
  if runtime.core.budget.active() then
    trust.mark(self)
    if o.publish ~= nil and #o.publish > 0 then
      fail("publish opens ports on this machine, and a spec loaded without --trust cannot; "
        .. "load it with --trust, or publish from the trusted side (lash sandbox port ID PORT).")
    end
  end
  -- the ceiling as configured: reuse modes cannot see the sandbox's
  -- lifetime, so sandbox_timeout (which they cannot set) reads 300
  self.ceiling = o.max_command_timeout or (mode == "owned" and o.sandbox_timeout or REUSE_CEILING)
  self.instructions = M.instructions_of(self)
  self.toolset = setmetatable({ name = M.NAME, cap = self }, RunToolset)
  return self
end

--- Is `v` a sandbox capability?
function M.is_capability(v)
  return getmetatable(v) == Cap
end

--- The instruction list of a capability: `{}` for `instructions = ''`,
-- the given text, or the default template.
function M.instructions_of(cap)
  local o = cap.opts
  if o.instructions == "" then return {} end
  if o.instructions then return { o.instructions } end
  return { fmt.instructions {
    backend = cap.backend, reused = cap.mode ~= "owned",
    default_timeout = fmt.deadline(o.default_command_timeout, cap.ceiling), max_timeout = cap.ceiling,
  } .. sandbox_tools.instructions(o.tools or {}) }
end

--- A copy with some options changed (checked again, as at construction).
-- @tparam table changes options to set (`false` removes an option)
-- @tparam[opt] table drop names of options to remove
function Cap:with(changes, drop)
  local o = {}
  for k, v in pairs(self.given) do o[k] = v end
  for k, v in pairs(changes) do
    if v == false and k ~= "create_app_if_missing" then o[k] = nil else o[k] = v end
  end
  for _, k in ipairs(drop or {}) do o[k] = nil end
  local copy = M.new(o)
  if trust.is_marked(self) then trust.mark(copy) end
  return copy
end

function Cap:for_run(ctx)
  -- a sub-agent's run may work in its parent's sandbox (lash.subagent)
  local cap = ctx and ctx.sandbox_for and ctx.sandbox_for(self) or self
  return Run.new(cap, ctx)
end

function Cap:get_toolsets()
  return { self.toolset }
end

function Cap:get_instructions()
  return self.instructions
end

---------------------------------------------------------------------------
-- A run: the sandbox of one agent run

function Run.new(cap, ctx)
  local self = setmetatable({ name = cap.name, cap = cap, opts = cap.opts, state = "new" }, Run)
  self.toolset = setmetatable({ name = cap.name, run = self }, RunToolset)
  if cap.claims then self.handle = M.render_handle(cap, ctx) end
  return self
end

function Run:for_run()
  return self
end

function Run:get_toolsets()
  return { self.toolset }
end

--- The run's sandbox object once the run is open (nil before and after):
-- what a toolset with `sandbox = true` (an MCP server) starts its process in.
function Run:sandbox()
  return self.sb
end

function Run:get_instructions()
  return self.cap.instructions
end

function Run:log(level, message)
  local f = self.opts.log or M.log
  pcall(f, level, message)
end

--- Render `attach_to` for a run (on a copy: the capability keeps its
-- template). A handle that renders to nothing fails the run, naming the
-- likely cause; it never falls back to creating a sandbox.
function M.render_handle(cap, ctx)
  local a, why = cap.opts.attach_to, nil
  local value
  if type(a) == "function" then
    local ok, v = pcall(a, ctx)
    if ok then value = v else why = tostring(type(v) == "table" and v.message or v) end
  elseif template.has_placeholders(a) then
    local ok, v = pcall(capability.render_fields, ctx, { attach_to = a }, "Sandbox")
    if ok then value = v.attach_to else why = tostring(type(v) == "table" and v.message or v) end
  else
    value = a
  end
  if type(value) == "string" and value ~= "" and value ~= "nil" and value ~= "None" then return value end
  local shown = why and ("nothing (" .. why .. ")") or (type(value) == "string" and fmt.quote(value))
    or (value == nil and "nothing") or ("a " .. type(value))
  error(runtime.error("config", "attach_to rendered to " .. shown .. ", which is not a sandbox handle. The step that "
    .. "provisions the sandbox produced nothing, or this step ran before it; check the upstream step and the "
    .. "handle it passes on. No sandbox was created in its place.", { terminal = true, code = "no_handle" }), 0)
end

-- The backend options to reach (config) or create (everything) a sandbox.
local function backend_options(cap, creating)
  local o, info = cap.opts, cap.info
  local config = list_set(info.config_options)
  local t = { backend = cap.backend }
  for k, target in pairs(cap.pass) do
    if creating or config[target] then t[target] = o[k] end
  end
  if creating then
    t.timeout = o.sandbox_timeout
    t.workdir, t.env, t.network = o.workdir, o.env, o.network
    t.from_snapshot = o.from_snapshot   -- a prepared workspace to start from
    -- a backend that tunnels ports made with the sandbox (Modal) takes them at create
    if o.publish and #o.publish > 0 and list_set(info.create_options).publish then t.publish = o.publish end
  end
  -- what an untrusted spec built is checked again at the call, however its
  -- fields were changed since
  trust.check_use(cap, t)
  return t
end

local function message_of(e)
  if type(e) == "table" and e.message then return tostring(e.message) end
  return tostring(e)
end

local AUTH_FIX = {
  modal = "Set MODAL_TOKEN_ID / MODAL_TOKEN_SECRET or run `modal token new`, then start a new run.",
}

--- The typed error that ends the run for a terminal sandbox error `e`.
function Run:terminal(e, id)
  local cap, o = self.cap, self.opts
  id = id or (self.sb and self.sb.id) or self.handle or o.sandbox_id
  local where = "The " .. cap.backend .. " sandbox" .. (id and (" " .. fmt.quote(id)) or "")
  local cause = message_of(e)
  local msg
  if e.kind == "auth" then
    msg = "The " .. cap.backend .. " backend rejected the credentials: " .. cause .. ". "
      .. (AUTH_FIX[cap.backend] or "Check the credentials it uses, then start a new run.")
  elseif e.kind == "unavailable" then
    if cap.mode == "owned" then
      msg = where .. " is no longer available: " .. cause .. ". It may have reached its sandbox_timeout of "
        .. o.sandbox_timeout .. "s, or been destroyed. Start a new run, or raise sandbox_timeout for longer work."
    elseif cap.claims then
      msg = where .. " that this run attached to is no longer available: " .. cause .. ". The step that created "
        .. "it decides its lifetime, so nothing is provisioned in its place; run the pipeline again from the step "
        .. "that creates the sandbox, with a lifetime that covers every step."
    elseif cap.mode == "shared" then
      msg = where .. " shared through `session` is no longer available: " .. cause .. ". Open a new session "
        .. "(lash.sandbox.session{...}) and run again."
    else
      msg = "The attached " .. cap.backend .. " sandbox " .. fmt.quote(id) .. " is no longer available (destroyed, "
        .. "or expired at its configured lifetime): " .. cause .. ". Attach to a live sandbox, or create a new one."
    end
  else
    msg = cause
  end
  return runtime.error(e.kind, msg, { code = e.code, terminal = true, retryable = false, backend = cap.backend,
                                   sandbox_id = id, cause = cause })
end

-- Strip the quoted path a backend may put in front of its message.
local function strip_path(m)
  return (m:gsub("^'[^']*': ", "", 1))
end

--- Map a failed sandbox call: re-raise cancellation and terminal errors
-- (the latter reworded), return nil and a retry message for recoverable
-- ones. Anything else (a bug) fails the run as it is.
function Run:failure(e, prefix)
  local lash = runtime
  if lash.is_error(e, "cancelled") then error(e, 0) end
  if type(e) == "table" and e.terminal then error(self:terminal(e), 0) end
  if lash.is_error(e, "sandbox") then
    local m = message_of(e)
    if prefix then return nil, prefix .. strip_path(m) end
    return nil, m
  end
  error(e, 0)
end

function Run:sandbox()
  if self.state ~= "open" or not self.sb then
    error(runtime.error("config", "The sandbox capability is not open for a run (state: " .. self.state .. "). Its "
      .. "tools work inside agent runs, which open it before the first model call.", { terminal = true }), 0)
  end
  return self.sb
end

-- Seconds of lifetime left from an expiry stamp (whole wall-clock
-- seconds), or nil.
local function remaining_from(expires_at)
  local e = tonumber(expires_at)
  if not e or e ~= e or e == math.huge then return nil end
  return math.max(0, e - M.clock.wall())
end

function Run:set_expiry(remaining)
  if remaining then self.expires_mono = M.clock.mono() + remaining end
end

--- The deadline of one command, in whole seconds.
-- @tparam[opt] number requested `timeout_seconds` (checked)
function Run:deadline(requested)
  local cap, o = self.cap, self.opts
  -- the ceiling the instructions state (300 s when reused, unless set),
  -- then the lifetime left when known, as the reference harness does: a
  -- stated limit is never exceeded
  local d = fmt.deadline(requested or o.default_command_timeout, cap.ceiling)
  if self.expires_mono then
    local cut = math.max(1, math.floor(self.expires_mono - M.clock.mono()))
    if d > cut then d = math.tointeger(cut) or cut end
  end
  return d
end

---------------------------------------------------------------------------
-- Opening and closing around the run

local function attach_failed(self, e, handle)
  local lash = runtime
  if lash.is_error(e, "cancelled") then error(e, 0) end
  local cap = self.cap
  if type(e) == "table" and (e.kind == "refused" or e.kind == "config") then error(e, 0) end
  local kind = (type(e) == "table" and e.terminal and e.kind) or "unavailable"
  error(lash.error(kind, "Could not attach to sandbox " .. fmt.quote(handle) .. " on backend "
    .. fmt.quote(cap.backend) .. ": " .. message_of(e), { code = type(e) == "table" and e.code or "attach_failed",
    terminal = true, retryable = false, backend = cap.backend, sandbox_id = handle }), 0)
end

function Run:open_owned()
  local lash, cap = runtime, self.cap
  local ok, sb = pcall(lash.sandbox.create, backend_options(cap, true))
  if not ok then
    if lash.is_error(sb, "cancelled") then error(sb, 0) end
    local kind = type(sb) == "table" and sb.kind or "sandbox"
    error(lash.error(kind, "Could not start a " .. cap.backend .. " sandbox: " .. message_of(sb)
      .. (kind == "auth" and (" " .. (AUTH_FIX[cap.backend] or "")) or ""),
      { code = type(sb) == "table" and sb.code or nil, terminal = true, retryable = false,
        backend = cap.backend }), 0)
  end
  self.sb = sb
end

function Run:open_reused(sb, id)
  local ok, st = pcall(sb.poll, sb)
  if not ok then attach_failed(self, st, id) end
  if not st.running then
    attach_failed(self, "it does not exist or has ended (" .. tostring(st.status) .. ")", id)
  end
  self:set_expiry(remaining_from(st.expires_at))
end

function Run:open_claim()
  local lash, cap, ctx = runtime, self.cap, self.ctx
  local handle = self.handle
  local who, why = identity.resolve { owner = self.opts.owner, holder = ctx and ctx.run and ctx.run.holder,
                                       getenv = M.getenv }
  if not who then
    error(lash.error("config", why, { terminal = true, code = "no_owner" }), 0)
  end
  local ok, sb = pcall(lash.sandbox.open, handle, backend_options(cap, false))
  if not ok then attach_failed(self, sb, handle) end
  local ok2, info = pcall(sb.attach, sb, who.owner, who.holder)
  if not ok2 then
    local code = type(info) == "table" and info.code
    if code ~= "wrong_owner" and code ~= "no_owner" and code ~= "held" then
      -- our mark may be written already (a read-back that failed, a
      -- cancel): clear it rather than leave a claim nobody releases;
      -- release clears only this holder's mark, never a rival's
      pcall(sb.release, sb, who.holder)
    end
    sb:close()
    attach_failed(self, info, handle)
  end
  self.sb, self.holder = sb, who.holder
  local remaining = remaining_from(info.tags and info.tags[lash.sandbox.tags.expires_at])
  self:set_expiry(remaining)
  if info.network_stamp and not info.network then
    self:log("warning", "Sandbox " .. handle .. " carries a network stamp this backend cannot read: "
      .. fmt.quote(info.network_stamp) .. "; the model is told its network access is not known")
  end
  self.note = fmt.attach_note { network = info.network, remaining = remaining }
  self:log("info", string.format("Attached to sandbox %s on backend %s as %s%s; %s", handle, cap.backend,
    who.holder, info.atomic and " (atomic claim)" or " (checked claim: read, write, read back)",
    remaining and string.format("%.0fs of its lifetime remain", remaining)
      or "an unknown number of seconds of its lifetime remain"))
end

function Run:open(ctx)
  if self.state ~= "new" then
    error(runtime.error("config", "this sandbox run was already opened; each agent run opens its own"), 0)
  end
  self.ctx = ctx or self.ctx
  local cap, o = self.cap, self.opts
  if cap.mode == "owned" then
    self:open_owned()
  elseif cap.mode == "shared" then
    if o.session.closed then
      error(runtime.error("config", "The shared sandbox session is closed. Keep it open (local s <close> = "
        .. "lash.sandbox.session{...}) while runs use it.", { terminal = true, code = "closed" }), 0)
    end
    self.sb = o.session
    self:open_reused(self.sb, self.sb.id)
  elseif cap.claims then
    self:open_claim()
  else
    local lash = runtime
    local ok, sb = pcall(lash.sandbox.open, o.sandbox_id, backend_options(cap, false))
    if not ok then attach_failed(self, sb, o.sandbox_id) end
    local ok2, err = pcall(self.open_reused, self, sb, o.sandbox_id)
    if not ok2 then
      sb:close()
      error(err, 0)
    end
    self.sb = sb
  end
  self.state = "open"
  self:publish_ports()
end

-- The capability's `publish` ports, on the host for as long as the run
-- lasts (lash.sandbox_ports); each is told as a port_published event.
function Run:publish_ports()
  local ports = self.opts.publish
  if not ports or #ports == 0 then return end
  self.published = {}
  local emit = self.ctx and self.ctx.emit
  if self.sb.tunnels and list_set(self.cap.info.create_options).publish then
    -- Modal: tunnels made with the sandbox (an attached one has those it was created with)
    local ok, tunnels = pcall(self.sb.tunnels, self.sb)
    if not ok then
      self:log("warning", "cannot find the tunnels of sandbox " .. self.sb.id .. ": " .. message_of(tunnels))
      return
    end
    local url = {}
    for _, t in ipairs(tunnels) do url[t.port] = t.url end
    for _, port in ipairs(ports) do
      if not url[port] then
        self:log("warning", "port " .. port .. " of sandbox " .. self.sb.id .. " has no tunnel: Modal tunnels only "
          .. "the ports a sandbox is created with")
      elseif emit then
        emit { type = "port_published", port = port, address = url[port], sandbox_id = self.sb.id }
      end
    end
    return
  end
  for _, port in ipairs(ports) do
    local ok, p = pcall(self.sb.publish, self.sb, port)
    if not ok then
      self:log("warning", "cannot publish port " .. port .. " of sandbox " .. self.sb.id .. ": " .. message_of(p))
    else
      self.published[#self.published + 1] = p
      if emit then emit { type = "port_published", port = port, address = p.address, sandbox_id = self.sb.id } end
    end
  end
end

function Run:release(sb, holder)
  local lash, cap = runtime, self.cap
  for attempt = 1, M.RELEASE_ATTEMPTS do
    local ok, e = pcall(sb.release, sb, holder)
    if ok then return true end
    if type(e) == "table" and e.terminal and e.kind == "unavailable" then
      self:log("info", "Sandbox " .. sb.id .. " on backend " .. cap.backend .. " has ended; nothing to release")
      return true
    end
    if attempt == M.RELEASE_ATTEMPTS then
      self:log("warning", string.format("Failed to release sandbox %s on backend %s after %d attempts; it stays "
        .. "marked as held by %s, and only that holder, or the step that created the sandbox, can use it: %s",
        sb.id, cap.backend, attempt, holder, message_of(e)))
      return false
    end
    pcall(lash.sleep, M.release_delay)
  end
end

function Run:close()
  if self.state ~= "open" then
    self.state = "closed"
    return
  end
  self.state = "closed"
  for _, p in ipairs(self.published or {}) do p:close() end
  self.published = nil
  -- background commands end with the run, whatever the mode
  sandbox_tools.close(self)
  local sb, holder, cap = self.sb, self.holder, self.cap
  self.sb, self.holder = nil, nil
  if cap.mode == "shared" then return end
  if cap.claims and holder then self:release(sb, holder) end
  local ok, err = sb:close()
  if not ok then
    self:log("warning", string.format("Failed to destroy sandbox %s on backend %s; it may need manual cleanup "
      .. "(its sandbox_timeout of %ds ends it anyway): %s", sb.id, cap.backend, self.opts.sandbox_timeout,
      message_of(err)))
  end
end

---------------------------------------------------------------------------
-- The toolset. The capability's own toolset (cap.toolset) is a template:
-- for_run makes a run. A run's toolset opens and closes that run.

function RunToolset:for_run(ctx)
  if self.run then return self end
  return self.cap:for_run(ctx).toolset
end

function RunToolset:open(ctx)
  if not self.run then
    error(runtime.error("config", "open the sandbox capability's toolset through for_run(ctx): each run gets its own"),
      0)
  end
  self.run:open(ctx)
end

function RunToolset:close()
  if self.run then self.run:close() end
end

function RunToolset:get_tools()
  local run = self.run or self.dormant
  if not run then
    run = setmetatable({ name = self.cap.name, cap = self.cap, opts = self.cap.opts, state = "template" }, Run)
    self.dormant = run
  end
  return run:tools()
end

---------------------------------------------------------------------------
-- The four tools

local null = json.null

local function opt(v)
  if v == null then return nil end
  return v
end

local function check_path(path)
  if path:find("\0", 1, true) then return nil, "path must not contain NUL bytes." end
  if path == "" then return "." end
  return path
end

-- A parameter the model may leave out or send as null.
local function optional(jtype, description)
  return { anyOf = { { type = jtype }, { type = "null" } }, default = null, description = description }
end

local PARAMS = {
  run_command = {
    type = "object",
    properties = {
      command = { type = "string", description = "The shell command to run." },
      timeout_seconds = optional("number", "Maximum seconds to wait (default: the configured timeout)."),
    },
    required = { "command" },
    additionalProperties = false,
  },
  read_file = {
    type = "object",
    properties = {
      path = { type = "string", description = fmt.PATH },
      offset = optional("integer", "Line number to start reading from (1-indexed)"),
      limit = optional("integer", "Maximum number of lines to read"),
    },
    required = { "path" },
    additionalProperties = false,
  },
  write_file = {
    type = "object",
    properties = {
      path = { type = "string", description = fmt.PATH },
      content = { type = "string", description = "The text to write." },
    },
    required = { "path", "content" },
    additionalProperties = false,
  },
  list_directory = {
    type = "object",
    properties = {
      path = { type = "string", default = ".", description = fmt.LIST_PATH },
    },
    additionalProperties = false,
  },
}
M.PARAMETERS = PARAMS

function Run:run_command(args, ctx)
  local t = opt(args.timeout_seconds)
  local bad = fmt.check_timeout(t)
  if bad then return nil, bad end
  local cmd = args.command
  if cmd:find("\0", 1, true) then return nil, "command must not contain NUL bytes." end
  local sb = self:sandbox()
  local deadline = self:deadline(t)
  -- streamed as tool_output_delta events while it runs (lash.capabilities.sandbox_stream)
  local ok, r = sandbox_stream.exec(ctx, sb, cmd, { timeout = deadline, max_output_bytes = self.opts.max_output_bytes })
  if not ok then return self:failure(r) end
  return fmt.command_output(r, { max_lines = self.opts.max_output_lines, max_bytes = self.opts.max_output_bytes,
                                 deadline = deadline })
end

function Run:read_file(args)
  local path, perr = check_path(args.path)
  if not path then return nil, perr end
  local offset, limit = opt(args.offset), opt(args.limit)
  local sb = self:sandbox()
  local o = self.opts
  local max = o.max_read_bytes
  local prefix = "Could not read " .. fmt.quote(args.path) .. ": "
  local ok, st = pcall(sb.stat, sb, path)
  if not ok then return self:failure(st, prefix) end
  if st.kind == "dir" then
    return nil, prefix .. "it is a directory. List it with list_directory instead."
  end
  if st.size and st.size > max then return nil, fmt.too_large(st.size, max) end
  local ok2, data = pcall(sb.read_file, sb, path, max)
  if not ok2 then
    if type(data) == "table" and data.code == "too_large" and not data.terminal then
      return nil, fmt.too_large(data.size or (max + 1), max)
    end
    return self:failure(data, prefix)
  end
  if #data > max then return nil, fmt.too_large(#data, max) end
  return fmt.file_window(data, { offset = offset, limit = limit, max_lines = o.max_output_lines,
                                 max_bytes = o.max_output_bytes })
end

function Run:write_file(args)
  local path, perr = check_path(args.path)
  if not path then return nil, perr end
  local content = args.content
  if not runtime.output.is_utf8(content) then return nil, fmt.NOT_ENCODABLE end
  local sb = self:sandbox()
  local ok, e = pcall(sb.write_file, sb, path, content)
  if not ok then return self:failure(e, "Could not write " .. fmt.quote(args.path) .. ": ") end
  return fmt.wrote(#content, args.path)
end

function Run:list_directory(args)
  local given = opt(args.path) or "."
  local path, perr = check_path(given)
  if not path then return nil, perr end
  local sb = self:sandbox()
  local ok, entries = pcall(sb.list_dir, sb, path)
  if not ok then return self:failure(entries, "Could not list " .. fmt.quote(given) .. ": ") end
  return fmt.listing(entries, { max_lines = self.opts.max_output_lines, max_bytes = self.opts.max_output_bytes })
end


--- The four tools of this run (built once the run is open, so that the
-- attach note is fixed for the whole run).
function Run:tools()
  if self.tool_list and self.tool_list_state == self.state then return self.tool_list end
  local run_desc = fmt.RUN_COMMAND
  if self.cap.claims then run_desc = run_desc .. " " .. (self.note or fmt.NOTE_BEFORE_ATTACH) end
  local function handler(method)
    return function(ctx, args) return method(self, args, ctx) end
  end
  local list = {
    tool.new { name = "run_command", description = run_desc, parameters = PARAMS.run_command,
               handler = handler(Run.run_command),
               metadata = { code_arg_name = "command", code_arg_language = "shell" } },
    tool.new { name = "read_file", description = fmt.READ_FILE, parameters = PARAMS.read_file,
               handler = handler(Run.read_file) },
    tool.new { name = "write_file", description = fmt.WRITE_FILE, parameters = PARAMS.write_file,
               handler = handler(Run.write_file) },
    tool.new { name = "list_directory", description = fmt.LIST_DIRECTORY, parameters = PARAMS.list_directory,
               handler = handler(Run.list_directory) },
  }
  for _, t in ipairs(sandbox_tools.build(self, self.opts.tools or {})) do list[#list + 1] = t end
  self.tool_list, self.tool_list_state = list, self.state
  return list
end

---------------------------------------------------------------------------
-- One sandbox for several runs (lash chat: lash.cli.agents.conversation)

--- The options of the sandbox this capability would create for itself (a
-- `lash.sandbox.session` made with them is what `shared_in` takes).
-- @treturn table options for lash.sandbox.create / session
--- The creation-only options this capability was given (sandbox_timeout,
-- workdir, image, ...), in the order messages name them.
-- @treturn {string,...}
function Cap:creation_only()
  return creation_given(self.given, self.create)
end

function Cap:creation_options()
  return backend_options(self, true)
end

--- A copy of this (owned) capability that runs in `session`, a
-- `lash.sandbox.session` shared by several runs: the creation options
-- belong to the session now; the per-command ceiling stays what the owned
-- sandbox gave.
-- @tparam userdata session
-- @treturn table capability
function Cap:shared_in(session)
  local o, config = {}, list_set(self.info.config_options)
  for k, v in pairs(self.given) do o[k] = v end
  for _, k in ipairs(CREATION) do o[k] = nil end
  for k, target in pairs(self.pass) do
    if not config[target] then o[k] = nil end
  end
  o.backend, o.session = nil, session
  o.max_command_timeout = self.opts.max_command_timeout or self.opts.sandbox_timeout
  local copy = M.new(o)
  if trust.is_marked(self) then trust.mark(copy) end
  return copy
end

return M
