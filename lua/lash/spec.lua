--- Agent specs: files or strings that define an agent, in Lua, YAML or
-- JSON (`lash.load_spec`, `lash run SPEC`, `spec.load_string`), and the
-- named capability types they can use (`lash.register_capability`).
--
-- **Lua** (`.lua`): a chunk that returns `lash.agent{...}` or a plain table
-- in the same shape. Without trust it is loaded as text (mode "t") into the
-- environment lash.spec_env makes: a fresh read-only view of the lash API
-- holding only what describes an agent, and the safe standard library (no
-- io, os.execute/exit/getenv/remove, dofile, debug, collectgarbage, require
-- of anything but "lash"; `load` takes text only). Each refused name says
-- why. Loading runs under lash.core.budget: instructions (counted in every
-- coroutine created while loading), wall-clock seconds, and memory enforced
-- in the allocator (M.BUDGET). The functions the spec defines run later,
-- each call under lash.spec_env.CALL_BUDGET (instructions, memory, run time
-- not counting waits), and raise a typed error of kind "budget" past it.
-- `trust = true`
-- (`lash run --trust`) loads with the full standard library and API and no
-- budget.
--
-- **YAML** (`.yaml`, `.yml`, through lash.core.yaml) and **JSON** (`.json`),
-- decoded under the same budgets and refused the same sandbox and model
-- options unless trusted: the reference's agent spec shape, e.g.
--
--   model: anthropic:claude-sonnet-4-6
--   instructions: Keep answers short.
--   capabilities:
--     - Sandbox
--     - LocalSandbox: {sandbox_timeout: 600}
--     - PrefixTools: {prefix: box, capability: {ModalSandbox: python:3.12-slim}}
--
-- Keys: model, name, description, instructions (a string or a list),
-- model_settings, retries, tool_timeout, limits, values, stream, output_schema
-- (a JSON Schema for a structured answer), metadata
-- (kept for tools that read specs; lash ignores it), handoffs (agents in
-- this same shape, or names of agents of this spec, that the run may be
-- handed to; `tool_name`/`tool_description` in an entry shape its tool),
-- handoff_description and capabilities.
-- A capability entry is `Name`, `{Name: arg}` (one value: the type's
-- positional argument) or `{Name: {options}}`. Built-in types: Sandbox
-- (positional: backend), LocalSandbox (Sandbox with backend local;
-- positional: rootfs), ModalSandbox (backend modal; positional: image),
-- PrefixTools ({prefix, capability}), SubAgents ({agents: [...]}: each
-- an agent in this shape with a name, and max_calls, timeout_seconds,
-- on_failure, share_sandbox; one delegate_task tool runs them), CodeMode
-- (the run_lua tool; options lash.codemode's) and InputGuardrail /
-- OutputGuardrail ({blocked_keywords: [...], agent: {...}, parallel}). `session` cannot come from a file:
-- it is a live object. Plain-table Lua specs may use the same entries.
-- @module lash.spec
local json = require "lash.json"
local options = require "lash.options"
local core = require "lash.core"
local agent = require "lash.agent"
local capability = require "lash.capability"
local toolset = require "lash.toolset"
-- loaded when a spec needs them, not at start (a run's cold start)
local function sandbox_cap() return require "lash.capabilities.sandbox" end
local function cli_agents() return require "lash.cli.agents" end
local function trust() return require "lash.trust" end

local M = {}

--- The default budget for loading a Lua spec without trust.
M.BUDGET = { instructions = 10000000, memory = 64 * 1024 * 1024, seconds = 10 }


---------------------------------------------------------------------------
-- Capability types

local registry = {}
local builtin = {}

local function names()
  local out = {}
  for k in pairs(builtin) do out[#out + 1] = k end
  for k in pairs(registry) do out[#out + 1] = k end
  table.sort(out)
  return out
end

--- The names of every capability type a spec can use, sorted.
function M.capability_types()
  return names()
end

--- Make a capability type usable by name in specs.
-- @tparam string name e.g. "Notes" (a spec writes `- Notes` or
--   `- Notes: {options}`)
-- @tparam function constructor `function(arg, info)` returning a
--   capability (or a table for lash.capability); `arg` is nil for a bare
--   name, else the entry's value; `info.from_file` is true for YAML/JSON.
--   Refuse unknown options by raising.
function M.register_capability(name, constructor)
  if type(name) ~= "string" or not name:match("^[%a_][%w_]*$") then
    error("lash.register_capability: name must be an identifier such as 'Notes', got " .. tostring(name), 2)
  end
  if type(constructor) ~= "function" then
    error("lash.register_capability: constructor must be a function(arg, info), got " .. type(constructor), 2)
  end
  if builtin[name] or registry[name] then
    error("lash.register_capability: a capability type named '" .. name .. "' is already registered", 2)
  end
  registry[name] = constructor
end

--- Forget a registered type (for tests and hosts that re-register).
function M.unregister_capability(name)
  registry[name] = nil
end

local function strip_who(msg)
  msg = tostring(msg)
  return (msg:gsub("^lash%.sandbox_capability: ", ""):gsub("^lash%.prefix_tools: ", ""))
end

local function sandbox_type(preset, positional)
  return function(arg, info)
    local opts
    if arg == nil then
      opts = {}
    elseif type(arg) == "table" then
      opts = {}
      for k, v in pairs(arg) do opts[k] = v end
    elseif type(arg) == "string" then
      opts = { [positional] = arg }
    else
      error("expected options (a mapping) or a " .. positional .. " string, got " .. type(arg), 0)
    end
    if info.from_file and opts.session ~= nil then
      error(info.name .. " cannot be built from a spec file with `session`: it takes a live, open "
        .. "lash.sandbox session object. Set `sandbox_id` to attach to an existing sandbox, or build the "
        .. "capability in Lua (lash.sandbox_capability{session = ...}) to share a session.", 0)
    end
    if preset then
      if opts.backend ~= nil and opts.backend ~= preset then
        error(info.name .. " is the Sandbox capability with backend '" .. preset .. "'; use Sandbox with "
          .. "backend: " .. tostring(opts.backend) .. " to choose another backend", 0)
      end
      opts.backend = preset
    end
    -- built first, so unknown or mistyped options get the capability's own
    -- message; building creates nothing
    local cap = sandbox_cap().new(opts)
    if info.untrusted then
      trust().check_sandbox_options(opts, info.name)
      trust().mark(cap)
    end
    return cap
  end
end

builtin.Sandbox = sandbox_type(nil, "backend")
builtin.LocalSandbox = sandbox_type("local", "rootfs")
builtin.ModalSandbox = sandbox_type("modal", "image")
-- The editor's files and terminals under `lash acp` (lash.acp.editor_tools).
builtin.EditorTools = function(arg)
  if arg ~= nil and type(arg) ~= "table" then error("expected options (a mapping), got " .. type(arg), 0) end
  return require("lash.acp.editor_tools").new(arg or {})
end

-- MCP servers, by pydantic-ai's names. A stdio server on the host is a
-- host command: only a trusted spec (--trust, or a spec built in Lua by
-- the host) may start one. Inside the run's sandbox (`sandbox: true`) it
-- is one more command in the jail, which any spec may ask for.
local function mcp_type(kind)
  return function(arg, info)
    if type(arg) ~= "table" then
      error("expected options (a mapping), got " .. (arg == nil and "nothing" or type(arg)), 0)
    end
    if kind == "stdio" and info.untrusted and arg.sandbox ~= true and arg.sandbox ~= "run" then
      error(info.name .. " starts a host command (" .. tostring(arg.command) .. "), which a spec may not do "
        .. "unless it is trusted: run it inside the run's sandbox with `sandbox: true` (the agent then needs a "
        .. "Sandbox capability), load the spec with --trust, or add the server from Lua host code "
        .. "(lash.mcp.stdio{...})", 0)
    end
    if kind == "http" and info.untrusted and arg.oauth ~= nil and arg.oauth ~= false and arg.oauth ~= true then
      error(info.name .. ": `oauth` options (a token file, client credentials) come from the trusted side: load "
        .. "the spec with --trust, or sign in once with `lash mcp login URL` (the spec then uses the kept tokens)", 0)
    end
    local def, prefix = {}, nil
    for k, v in pairs(arg) do
      if k == "tool_prefix" then prefix = v else def[k] = v end
    end
    -- an untrusted spec's server may use kept tokens, never start a login
    if kind == "http" and info.untrusted and def.oauth ~= false then def.oauth = { untrusted_spec = true } end
    local mcp = require "lash.mcp"
    local ts = kind == "stdio" and mcp.stdio(def) or mcp.http(def)
    if prefix ~= nil then ts = capability.prefix_tools { capability = ts, prefix = prefix } end
    return ts
  end
end
builtin.MCPServerStdio = mcp_type("stdio")
builtin.MCPServerStreamableHTTP = mcp_type("http")

local build_entry

-- An agent inside a spec (a sub-agent, a handoff's target): a mapping in
-- the spec's own shape, built with the spec's trust.
local function inner_agent(t, where, info)
  return M.from_table(t, where, not info.untrusted, info.named)
end

-- SubAgents (pydantic-ai-harness's name): {agents: [{name:, description:,
-- model:, instructions:, capabilities:, ..., max_calls:, timeout_seconds:,
-- on_failure:, share_sandbox:}, ...]}
local DELEGATE_KEYS = { max_calls = true, timeout_seconds = true, on_failure = true, share_sandbox = true }
builtin.SubAgents = function(arg, info)
  if type(arg) ~= "table" or type(arg.agents) ~= "table" then
    error("expected {agents: [{name: ..., model: ..., instructions: ...}, ...]}, got "
      .. (arg == nil and "nothing" or type(arg)), 0)
  end
  for k in pairs(arg) do
    if k ~= "agents" then error("unknown option '" .. tostring(k) .. "' (SubAgents takes agents)", 0) end
  end
  local entries = {}
  for i, e in ipairs(arg.agents) do
    local where = info.where .. ".agents[" .. i .. "]"
    if type(e) ~= "table" then error(where .. ": a sub-agent is a mapping (name, model, instructions, ...)", 0) end
    local def, entry = {}, {}
    for k, v in pairs(e) do
      if DELEGATE_KEYS[k] then entry[k] = v else def[k] = v end
    end
    if type(def.name) ~= "string" then error(where .. ": give the sub-agent a name (how the model calls it)", 0) end
    entry.agent = inner_agent(def, where, info)
    entries[i] = entry
  end
  return require("lash.subagent").capability({ agents = entries })
end

-- CodeMode (pydantic-ai-harness's name): the run_lua tool, with its
-- budgets (a spec without trust cannot raise them past a call's).
builtin.CodeMode = function(arg, info)
  if arg ~= nil and type(arg) ~= "table" then error("expected options (a mapping), got " .. type(arg), 0) end
  local o = {}
  for k, v in pairs(arg or {}) do o[k] = v end
  if info.untrusted then o.untrusted = true end
  local ok, cap = pcall(require("lash.codemode").new, o)
  if not ok then error(tostring(cap):gsub("^lash%.code_mode: ", ""), 0) end
  return cap
end

-- InputGuardrail / OutputGuardrail (pydantic-ai-harness's names):
-- {blocked_keywords: [...]} and/or {agent: {an agent in this shape that
-- answers tripwire_triggered and reason}}, `parallel` (input; default true).
local function guardrail_type(side)
  return function(arg, info)
    if type(arg) ~= "table" then
      error("expected {blocked_keywords: [...]} or {agent: {...}}, got " .. (arg == nil and "nothing" or type(arg)), 0)
    end
    local list = {}
    for k, v in pairs(arg) do
      if k ~= "blocked_keywords" and k ~= "agent" and k ~= "parallel" and k ~= "name" then
        error("unknown option '" .. tostring(k) .. "' (" .. info.name
          .. " takes blocked_keywords, agent, parallel and name)", 0)
      end
      if k == "parallel" and (type(v) ~= "boolean" or side == "output") then
        error("parallel is true or false, for an InputGuardrail only", 0)
      end
    end
    local g = require "lash.guardrails"
    local parallel = arg.parallel ~= false
    if arg.blocked_keywords ~= nil then
      local ok, f = pcall(g.blocked_keywords, arg.blocked_keywords)
      if not ok then error(tostring(f):gsub("^[^:]*:%d+: ", ""), 0) end
      list[#list + 1] = { check = f, name = arg.name or "blocked_keywords", run_in_parallel = parallel }
    end
    if arg.agent ~= nil then
      if type(arg.agent) ~= "table" then error("agent must be an agent (a mapping in the spec's shape)", 0) end
      local a = inner_agent(arg.agent, info.where .. ".agent", info)
      list[#list + 1] = { check = a, name = arg.name or a.name, run_in_parallel = parallel }
    end
    if #list == 0 then error("give blocked_keywords, agent or both", 0) end
    return capability.new { name = info.name, guardrails = { [side] = list } }
  end
end
builtin.InputGuardrail = guardrail_type("input")
builtin.OutputGuardrail = guardrail_type("output")

builtin.PrefixTools = function(arg, info)
  if type(arg) ~= "table" then
    error("expected {prefix: ..., capability: ...}, got " .. (arg == nil and "nothing" or type(arg)), 0)
  end
  for k in pairs(arg) do
    if k ~= "prefix" and k ~= "capability" then
      error("unknown option '" .. tostring(k) .. "' (PrefixTools takes prefix and capability)", 0)
    end
  end
  if arg.capability == nil then error("give the capability to prefix: {prefix: x, capability: Sandbox}", 0) end
  local inner = build_entry(arg.capability, info.where .. ".capability", info.from_file, info.untrusted, info.named)
  return capability.prefix_tools { prefix = arg.prefix, capability = inner }
end

local function is_capability_value(v)
  return capability.is_capability(v) or toolset.is_toolset(v)
end

-- A spec entry's name and argument, or nil when it is not in entry form.
local function entry_form(e)
  if type(e) == "string" then return e, nil end
  if type(e) ~= "table" or getmetatable(e) ~= nil and getmetatable(e) ~= json.array_mt then return nil end
  local k, v = next(e)
  if type(k) == "string" and next(e, k) == nil and (builtin[k] or registry[k] or k:match("^%u")) then
    return k, v
  end
  return nil
end

--- Build the capability of one spec entry.
-- @param e `"Name"`, `{Name = arg}`
-- @tparam string where for messages, e.g. "capabilities[2]"
-- @tparam boolean from_file YAML/JSON (no `session`)
-- @tparam boolean untrusted the spec was loaded without trust: the
--   constructor gets `info.untrusted` and the sandbox types refuse the
--   options lash.spec_env does not allow
function build_entry(e, where, from_file, untrusted, named)
  local name, arg = entry_form(e)
  if not name then
    if type(e) == "table" then
      local n = 0
      for _ in pairs(e) do n = n + 1 end
      if n ~= 1 then
        error(where .. ": a capability entry is a name, or a mapping with exactly one key (the name), got "
          .. n .. " keys", 0)
      end
    end
    error(where .. ": a capability entry is a name such as Sandbox, or {Name: options}, got " .. type(e), 0)
  end
  local ctor = builtin[name] or registry[name]
  if not ctor then
    error(where .. ": Capability '" .. name .. "' is not a known capability type. Valid choices: ["
      .. table.concat(names(), ", ") .. "]. Register a custom one from Lua with "
      .. "lash.register_capability(name, constructor).", 0)
  end
  local ok, cap = pcall(ctor, arg, { name = name, where = where, from_file = from_file, untrusted = untrusted,
                                    named = named })
  if not ok then
    local msg = type(cap) == "table" and cap.message or cap
    if tostring(msg):find(where, 1, true) == 1 then error(msg, 0) end
    error(where .. ": Failed to instantiate capability '" .. name .. "': " .. strip_who(msg), 0)
  end
  if type(cap) == "table" and not is_capability_value(cap) then
    local ok2, c = pcall(capability.new, cap)
    if not ok2 then error(where .. ": capability '" .. name .. "': " .. tostring(c), 0) end
    cap = c
  end
  if not is_capability_value(cap) then
    error(where .. ": the constructor of capability '" .. name .. "' returned a " .. type(cap)
      .. ", not a capability", 0)
  end
  return cap
end

--- Resolve the capability entries of a spec table in place: names and
-- `{Name: arg}` become capabilities; capabilities and lash.capability
-- definitions are left as they are.
function M.resolve_capabilities(list, from_file, untrusted, named)
  if list == nil then return nil end
  if type(list) ~= "table" then error("capabilities must be a list, got " .. type(list), 0) end
  local out = {}
  for i, e in ipairs(list) do
    local where = "capabilities[" .. i .. "]"
    if is_capability_value(e) then
      out[i] = e
    elseif from_file or entry_form(e) then
      out[i] = build_entry(e, where, from_file, untrusted, named)
    else
      out[i] = e
    end
  end
  return out
end

---------------------------------------------------------------------------
-- YAML and JSON

local FILE_KEYS = {
  model = true, name = true, description = true, instructions = true, model_settings = true, retries = true,
  tool_timeout = true, limits = true, values = true, stream = true, metadata = true, capabilities = true,
  output_schema = true,  -- the agent's `output` (structured output)
  handoffs = true,       -- agents (mappings, or names of agents of this spec) to hand the run to
  handoff_description = true,
}
local NOT_YET = {
  deps_schema = "lash checks no deps schema; remove it (the run's deps are passed as they are)",
  end_strategy = "lash always runs every tool call of a turn; remove it",
}

-- Keys a Lua spec has that a file of data cannot: say where such tools go.
local LUA_TOOLS = "a YAML or JSON spec is data and carries no Lua code. Its tools come from capabilities: a "
  .. "sandbox (Sandbox, LocalSandbox, ModalSandbox) or an MCP server (MCPServerStdio: {command: ...}, any "
  .. "program). For a tool written in Lua, write the spec in Lua: return lash.agent { model = ..., tools = { "
  .. "lash.tool { name = ..., description = ..., parameters = {...}, handler = function(ctx, args) ... end } } }"
local NO_DATA_FORM = { tools = LUA_TOOLS, toolsets = LUA_TOOLS }

-- Drop nulls (json.null, which the YAML loader also uses) from maps, recursively.
local function denull(v, null_values)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do
    if not null_values[x] then out[k] = denull(x, null_values) end
  end
  return setmetatable(out, getmetatable(v) == json.array_mt and json.array_mt or nil)
end

--- Build an agent from a decoded YAML/JSON spec table.
-- @tparam table t
-- @tparam[opt="spec"] string where for messages
-- @treturn agent
-- @raise a message naming the key and the fix
-- Handoff entries of a spec: a name (an agent of this spec: the top one or
-- any named inline agent) or a mapping (an inline agent, with tool_name /
-- tool_description for the handoff itself); names are resolved once the
-- whole spec is built.
local function spec_handoffs(list, where, trusted, named)
  if type(list) ~= "table" then
    error(where .. ": handoffs must be a list of agents (mappings) or agent names, got " .. type(list), 0)
  end
  local out, refs = {}, {}
  for i, e in ipairs(list) do
    local w = where .. ".handoffs[" .. i .. "]"
    if type(e) == "string" then
      refs[#refs + 1] = { index = i, name = e, where = w }
      out[i] = false
    elseif type(e) == "table" then
      local def, hopts = {}, {}
      for k, v in pairs(e) do
        if k == "tool_name" or k == "tool_description" then hopts[k] = v else def[k] = v end
      end
      local a = M.from_table(def, w, trusted, named)
      if next(hopts) then
        hopts.agent = a
        local ok, h = pcall(require("lash.handoff").new, hopts)
        if not ok then error(w .. ": " .. tostring(h):gsub("^lash%.handoff: ", ""), 0) end
        a = h
      end
      out[i] = a
    else
      error(w .. ": a handoff is an agent (a mapping) or the name of an agent of this spec, got " .. type(e), 0)
    end
  end
  return out, refs
end

function M.from_table(t, where, trusted, named)
  where = where or "spec"
  local top = named == nil
  named = named or { agents = {}, refs = {} }
  if type(t) ~= "table" or t[1] ~= nil then
    error(where .. ": the spec must be a mapping of keys (model, instructions, capabilities, ...), got "
      .. (type(t) == "table" and "a list" or type(t)), 0)
  end
  local def = {}
  for k, v in pairs(t) do
    if NOT_YET[k] then error(where .. ": '" .. k .. "' is not supported: " .. NOT_YET[k], 0) end
    if NO_DATA_FORM[k] then error(where .. ": '" .. k .. "' has no form here: " .. NO_DATA_FORM[k], 0) end
    if not FILE_KEYS[k] then error(options.message(where, "key", k, FILE_KEYS, "keys"), 0) end
    if k == "output_schema" then def.output = v
    elseif k ~= "metadata" then def[k] = v end
  end
  if def.model ~= nil and type(def.model) ~= "string" then
    error(where .. ": model must be a string such as anthropic:claude-sonnet-4-6, got " .. type(def.model), 0)
  end
  if def.instructions ~= nil and type(def.instructions) ~= "string" then
    if type(def.instructions) ~= "table" then
      error(where .. ": instructions must be a string or a list of strings, got " .. type(def.instructions), 0)
    end
    for i, s in ipairs(def.instructions) do
      if type(s) ~= "string" then
        error(where .. ": instructions[" .. i .. "] must be a string, got " .. type(s), 0)
      end
    end
  end
  if not trusted then trust().check_agent(def, where) end
  local ok, caps = pcall(M.resolve_capabilities, def.capabilities, true, not trusted, named)
  if not ok then error(where .. ": " .. tostring(caps), 0) end
  def.capabilities = caps
  local handoffs, refs
  if def.handoffs ~= nil then
    handoffs, refs = spec_handoffs(def.handoffs, where, trusted, named)
    def.handoffs = {}
  end
  local ok2, a = pcall(agent.new, def)
  if not ok2 then error(where .. ": " .. tostring(a):gsub("^lash%.agent: ", ""), 0) end
  if handoffs then
    for i = 1, #handoffs do a.handoffs[i] = handoffs[i] end
    for _, r in ipairs(refs) do
      named.refs[#named.refs + 1] = { agent = a, index = r.index, name = r.name, where = r.where }
    end
  end
  if t.name ~= nil then
    if named.agents[t.name] then
      error(where .. ": two agents of this spec are named '" .. tostring(t.name) .. "'", 0)
    end
    named.agents[t.name] = a
  end
  if top then
    for _, r in ipairs(named.refs) do
      local target = named.agents[r.name]
      if not target then
        local known = {}
        for n in pairs(named.agents) do known[#known + 1] = n end
        table.sort(known)
        error(r.where .. ": no agent named '" .. r.name .. "' in this spec (agents with a name: "
          .. (#known > 0 and table.concat(known, ", ") or "none") .. ")", 0)
      end
      r.agent.handoffs[r.index] = target
    end
  end
  return a
end

local function decode_yaml(text, path)
  local t, err = core.yaml.decode(text, { null = json.null, max_nodes = 100000, max_depth = 64 })
  if t == nil and err then error(path .. ": not valid YAML: " .. tostring(err), 0) end
  return denull(t, { [json.null] = true })
end

local function decode_json(text, path)
  local t, err = json.try_decode(text)
  if t == nil then error(path .. ": not valid JSON: " .. tostring(err), 0) end
  return denull(t, { [json.null] = true })
end

---------------------------------------------------------------------------
-- Lua specs

-- Edit distance, for "did you mean": small strings only.
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a:byte(i) == b:byte(j) and 0 or 1))
    end
    prev = cur
  end
  return prev[#b]
end

-- "attempt to call a nil value (field 'script_modle')": a misspelt lash
-- function reads as a bare Lua error; name the one that was meant.
local function api_hint(msg)
  local name = msg:match("attempt to call a nil value %(field '([%w_]+)'%)")
  if not name or msg:find("; did you mean lash.", 1, true) then return msg end
  local best, bd
  for k in pairs(require("lash.spec_env").API) do
    local d = distance(name, k)
    if d <= 2 and (not bd or d < bd) then best, bd = k, d end
  end
  if not best then return msg end
  return msg .. ": lash has no " .. name .. "; did you mean lash." .. best .. "?"
end

local function describe_error(e)
  if type(e) == "table" then
    if e.message then return api_hint(tostring(e.message)) end
    return tostring(e)
  end
  return api_hint(tostring(e))
end

local function format_size(n)
  return core.output.format_size(n)
end

-- The message for a spent budget, naming it and --trust.
local function budget_message(path, exceeded, budget, detail)
  if exceeded == "instructions" then
    return path .. ": the spec ran past its budget of " .. budget.instructions .. " Lua instructions while "
      .. "loading (an endless loop?). A spec should only build the agent; pass --trust to load it without "
      .. "limits."
  elseif exceeded == "memory" then
    return path .. ": the spec used more than " .. format_size(budget.memory) .. " of memory while loading "
      .. "(a runaway allocation?)" .. (detail and (": " .. detail) or "") .. ". A spec should only build "
      .. "the agent; pass --trust to load it without limits."
  elseif exceeded == "time" then
    return path .. ": the spec took longer than its budget of " .. budget.seconds .. " s to load. A spec "
      .. "should only build the agent; pass --trust to load it without limits."
  end
end

--- Run fn(...) under a loading budget; return its result or raise the
-- message (naming the budget spent and --trust).
-- @local
function M.run_budgeted(fn, path, budget, string_index)
  local smt = getmetatable("")
  local saved = smt.__index
  if string_index then smt.__index = string_index end
  local ok, res, exceeded = core.budget.run(fn, budget)
  smt.__index = saved
  if ok then return res end
  local msg = describe_error(res)
  if exceeded then error(budget_message(path, exceeded, budget, msg ~= "not enough memory" and msg or nil), 0) end
  if msg:find("not enough memory", 1, true) then
    error(path .. ": the spec ran out of memory while loading (a runaway allocation?)", 0)
  end
  error(msg:find(path, 1, true) == 1 and msg or (path .. ": " .. msg), 0)
end

local function budget_of(opts)
  local b = opts.budget or {}
  return { instructions = b.instructions or M.BUDGET.instructions, memory = b.memory or M.BUDGET.memory,
           seconds = b.seconds or M.BUDGET.seconds }
end

local function to_agent(spec, path, trusted)
  if agent.is_agent(spec) then return spec end
  if type(spec) ~= "table" then
    error(path .. ": the spec must return lash.agent{...} or a table in the same shape, got " .. type(spec), 0)
  end
  local def = {}
  for k, v in pairs(spec) do def[k] = v end
  if not trusted then trust().check_agent(def, path) end
  local ok, caps = pcall(M.resolve_capabilities, def.capabilities, false, not trusted)
  if not ok then error(path .. ": " .. tostring(caps), 0) end
  def.capabilities = caps
  local ok2, a = pcall(agent.new, def)
  if not ok2 then error(path .. ": " .. tostring(a), 0) end
  return a
end

-- `chunkname` as for load: "@path" for a file, "=name" for a string.
local function load_lua(text, path, chunkname, opts)
  if opts.trust then
    -- trusted code gets the facade itself, as `require "lash"` gives it
    local env = setmetatable({ lash = require "lash" }, { __index = _G })
    local chunk, err = load(text, chunkname, "t", env)
    if not chunk then error(err, 0) end
    local ok, spec = pcall(chunk)
    if not ok then
      local msg = describe_error(spec)
      error(msg:find(path, 1, true) == 1 and msg or (path .. ": " .. msg), 0)
    end
    return spec
  end
  local spec_env = require "lash.spec_env"
  local env, sstring, state = spec_env.env(chunkname)
  local chunk, err = load(text, chunkname, "t", env)
  if not chunk then error(err, 0) end
  -- what the spec put into its objects after building them is budgeted
  -- here, at the boundary (and after every later call of its functions)
  return spec_env.seal(state, M.run_budgeted(chunk, path, budget_of(opts), sstring)), state
end

---------------------------------------------------------------------------
-- Loading

local FORMATS = { lua = true, yaml = true, json = true }

local function check_opts(who, opts)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(who .. ": options must be a table, got " .. type(opts), 3) end
  if opts.format ~= nil and not FORMATS[opts.format] then
    error(who .. ": format must be \"lua\", \"yaml\" or \"json\", got " .. tostring(opts.format), 3)
  end
  return opts
end

local function format_of(path, given)
  if given then return given end
  local ext = path:match("%.([%w]+)$")
  ext = ext and ext:lower()
  if ext == "yaml" or ext == "yml" then return "yaml" end
  if ext == "json" then return "json" end
  if ext == "lua" then return "lua" end
  return nil
end

-- Build the agent of a spec's text; then the attach/owner/backend options.
-- `label` starts every message (the path, or the string's name).
-- The spec's own name for each capability entry (YAML/JSON), for messages.
local function entry_labels(t)
  local caps = type(t) == "table" and t.capabilities
  if type(caps) ~= "table" then return nil end
  local out = {}
  for i, e in ipairs(caps) do
    if type(e) == "string" then out[i] = e
    elseif type(e) == "table" then out[i] = next(e) and tostring(next(e)) or nil end
  end
  return out
end

-- Two sources of the same tool name are found now, not once a run has
-- started: the message names both and the fix in the spec's language.
local function check_tools(agent, label, format, labels)
  local at = require "lash.agent_tools"
  local conflicts = at.conflicts(at.sources(agent, { labels = labels }))
  if #conflicts > 0 then return nil, label .. ": " .. at.conflict_message(conflicts, format) end
  return agent
end

local function build(text, label, chunkname, format, opts)
  local labels
  local ok, agent = pcall(function()
    if format == "lua" then
      local spec, state = load_lua(text, label, chunkname, opts)
      local agent = to_agent(spec, label, opts.trust)
      if state then require("lash.spec_env").seal(state, agent) end
      return agent
    end
    local decode = format == "yaml" and decode_yaml or decode_json
    local t
    if opts.trust then
      t = decode(text, label)
    else
      t = M.run_budgeted(function() return decode(text, label) end, label, budget_of(opts))
    end
    labels = entry_labels(t)
    return M.from_table(t, label, opts.trust)
  end)
  if not ok then return nil, describe_error(agent) end
  -- the spec's own names of its capabilities, for messages (--describe)
  if labels then agent.capability_labels = labels end
  if opts.check_tools ~= false then
    local cerr
    agent, cerr = check_tools(agent, label, format, labels)
    if not agent then return nil, cerr end
  end
  if opts.attach ~= nil then
    local a, err = cli_agents().attach_agent(agent, opts.attach, opts.owner, opts.backend)
    if not a then return nil, label .. ": " .. strip_who(err) end
    agent = a
  elseif opts.owner ~= nil then
    return nil, "owner only applies together with attach (--owner needs --attach)"
  elseif opts.backend ~= nil then
    local a, err = cli_agents().with_backend(agent, opts.backend)
    if not a then return nil, label .. ": " .. strip_who(err) end
    agent = a
  end
  return agent
end

--- Load an agent spec.
-- @tparam string path a .lua, .yaml/.yml or .json file
-- @tparam[opt] table opts `trust` (Lua: full standard library, no
--   budget), `budget` ({instructions=, memory=} for Lua specs), `format`
--   ("lua", "yaml" or "json": overrides the extension), `attach` and
--   `owner` (make the spec's sandbox capability attach to that handle as
--   that owner, as `lash run --attach H --owner O` does), `backend` (the
--   sandbox backend to use instead of the spec's, `lash run --backend`),
--   `check_tools` (false: keep an agent whose sources define the same tool
--   name, which is otherwise refused here, for `lash run --describe`)
-- @treturn[1] agent
-- @treturn[2] nil
-- @treturn[2] string what went wrong, starting with the path
function M.load(path, opts)
  if type(path) ~= "string" then error("lash.load_spec: path must be a string, got " .. type(path), 2) end
  opts = check_opts("lash.load_spec", opts)
  local format = format_of(path, opts.format)
  if not format then
    return nil, path .. ": unknown spec format; name the file .lua, .yaml, .yml or .json"
  end
  local f, ferr = io.open(path, "rb")
  if not f then return nil, "cannot open " .. tostring(ferr) end
  local text, rerr = f:read("a")
  f:close()
  -- a directory opens, and fails only here
  if not text then return nil, "cannot read " .. path .. ": " .. tostring(rerr) end
  return build(text, path, "@" .. path, format, opts)
end

--- Load an agent spec from a string, exactly as `load` loads a file: a
-- Lua spec runs in the same safe environment under the same budgets
-- (unless `opts.trust`), so text from elsewhere (a user, a request) is
-- as safe to load as a file.
-- @tparam string text the spec
-- @tparam[opt="spec"] string name starts every message, and chooses the
--   format by its extension (.lua, .yaml/.yml, .json); without one of
--   those, text starting with `{` is JSON and anything else Lua
-- @tparam[opt] table opts as for `load` (`format` overrides the guess)
-- @treturn[1] agent
-- @treturn[2] nil
-- @treturn[2] string what went wrong, starting with the name
function M.load_string(text, name, opts)
  if type(text) ~= "string" then
    error("lash.spec.load_string: text must be a string, got " .. type(text), 2)
  end
  if name ~= nil and type(name) ~= "string" then
    error("lash.spec.load_string: name must be a string (or nil), got " .. type(name), 2)
  end
  name = name or "spec"
  opts = check_opts("lash.spec.load_string", opts)
  local format = format_of(name, opts.format)
  if not format then format = text:match("^%s*{") and "json" or "lua" end
  return build(text, name, "=" .. name, format, opts)
end

return M
