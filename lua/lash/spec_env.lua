--- What a spec loaded without trust may touch: the one reviewed table of
-- the lash API it sees, the sandbox and model options it may set, and the
-- standard library it gets.
--
-- An untrusted spec is a *description* of an agent. It gets the
-- constructors that describe one and the safe standard library, and
-- nothing that acts on the host while it loads: no HTTP, no sandbox
-- creation, opening or listing, no loop control or tasks, no trusted
-- loading, no registration into process-wide tables. What it sees of
-- `lash` is a fresh, read-only table per spec (`M.view()`), so it cannot
-- replace a function for anyone else. Options that change what the host
-- exposes (a sandbox's isolation, its state root, root filesystem, rlimits,
-- network, a backend's endpoint or credentials, a model endpoint that
-- would receive the host's API key) come only from the trusted side; in an
-- untrusted spec, Lua, YAML or JSON alike, they are refused when the spec
-- is loaded, naming the option and the flag that sets it. The functions it
-- hands the constructors run later under a budget per call (M.CALL_BUDGET).
--
-- Review rule: a name goes into API below only if calling it, at load
-- time or later from a function the spec defined, cannot reach anything
-- outside the objects the spec itself builds and the sandbox the run gets.
-- @module lash.spec_env
local M = {}

local runtime = require "lash.runtime"

---------------------------------------------------------------------------
-- Sandbox and model options: lash.trust owns them (the sandbox capability
-- checks its marks there, below this module); the same names here.

local trust = require "lash.trust"
for _, name in ipairs { "SANDBOX_OPTIONS", "TRUSTED_SIDE", "check_sandbox_options", "check_agent", "mark",
                        "is_marked", "BACKEND_CALL", "check_use" } do
  M[name] = trust[name]
end

---------------------------------------------------------------------------
-- The view of lash

local function refused(name, why)
  return function()
    error("lash." .. name .. " is not available to a spec loaded without --trust (" .. why .. "). A spec "
      .. "describes an agent; pass --trust (trust = true) to load it with the full API.", 2)
  end
end

local ACTS = "it acts on the host while the spec loads"

local function read_only(t, name)
  return setmetatable({}, {
    __index = t,
    __newindex = function(_, k)
      error("lash." .. name .. " is read-only in a spec (tried to set '" .. tostring(k) .. "')", 2)
    end,
    __metatable = false,
  })
end

local function pick(mod, names)
  local out = {}
  for _, n in ipairs(names) do out[n] = mod[n] end
  return out
end

---------------------------------------------------------------------------
-- Run-time budgets

--- The budget of each call of a function an untrusted spec defines (a tool
-- handler, an instruction function, a hook, a model function), at run time:
-- Lua instructions, net bytes allocated, and seconds of run time (waiting,
-- e.g. for a sandbox command, is not counted). Spent, the call raises a
-- typed error of kind "budget".
M.CALL_BUDGET = { instructions = 100000000, memory = 64 * 1024 * 1024, seconds = 10 }

-- The budgeted wrappers made here (weak): never wrapped twice.
local wrappers = setmetatable({}, { __mode = "k" })

--- Wrap f so that every call runs under M.CALL_BUDGET (and the spec's safe
-- string methods); after each call the spec's objects are sealed again
-- (M.seal), so a function the call assigned to one of them is budgeted
-- before lash can call it.
-- @tparam function f
-- @tparam string label names f in the error
-- @tparam[opt] table spec the spec's state (M.env's third result)
-- @treturn function
function M.budgeted(f, label, spec)
  if wrappers[f] then return f end
  local call = runtime.core.budget.call
  local limits = {
    instructions = M.CALL_BUDGET.instructions, memory = M.CALL_BUDGET.memory,
    seconds = M.CALL_BUDGET.seconds, label = label, string_index = spec and spec.sstring,
  }
  local function after(ok, ...)
    if spec and spec.root ~= nil then M.seal(spec) end
    if not ok then error((...), 0) end
    return ...
  end
  local w = function(...)
    return after(pcall(call, f, limits, ...))
  end
  wrappers[w] = true
  return w
end

local function is_spec_function(spec, f)
  if wrappers[f] then return false end
  local info = debug.getinfo(f, "S")
  return info.what ~= "C" and spec.sources[info.source] == true
end

local function field_name(path, k)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") then return path .. "." .. k end
  return path .. "[" .. (type(k) == "string" and string.format("%q", k) or tostring(k)) .. "]"
end

-- Wrap every function of the spec's own source in t's fields (and in the
-- metatables the spec set), all the way down; rawset, so no metamethod of
-- the spec runs.
local function seal_table(spec, t, path, seen)
  if seen[t] then return end
  seen[t] = true
  local k, v = next(t)
  while k ~= nil do
    local nk, nv = next(t, k)   -- before t[k] changes (same key: safe)
    if type(v) == "function" then
      if is_spec_function(spec, v) then
        rawset(t, k, M.budgeted(v, (spec.name and spec.name .. ": " or "") .. "the function the spec put at "
          .. field_name(path, k) .. " after it was built", spec))
      end
    elseif type(v) == "table" then
      seal_table(spec, v, field_name(path, k), seen)
    end
    k, v = nk, nv
  end
  local mt = getmetatable(t)
  if type(mt) == "table" and spec.own[mt] then seal_table(spec, mt, path .. "'s metatable", seen) end
end

--- Budget every function of the spec's own code reachable from its result.
-- Called when the spec has loaded (root: what it returned, then the agent
-- built from it) and again after each budgeted call, so a function the
-- spec assigns to a built object's field after construction (`a.instructions
-- = function() ... end`, a tool's handler, a hook) runs under
-- M.CALL_BUDGET like the ones it handed the constructors.
-- @tparam table spec the spec's state (M.env's third result)
-- @param[opt] root the new root (kept for the later calls)
function M.seal(spec, root)
  if root ~= nil then spec.root = root end
  if type(spec.root) == "table" then seal_table(spec, spec.root, "agent", {}) end
  return spec.root
end

-- The functions in what a spec hands a constructor, budgeted: function
-- arguments, and functions in plain tables (not lash's objects, which were
-- made by constructors already) a few levels down. Tables are copied only
-- when something in them changed.
local function guard_value(v, label, spec, depth, seen)
  if type(v) == "function" then return M.budgeted(v, label, spec) end
  if type(v) ~= "table" or depth > 4 or seen[v] or getmetatable(v) ~= nil then return v end
  seen[v] = true
  local copy
  for k, x in pairs(v) do
    local name = type(k) == "string" and (label .. "." .. k) or label
    local g = guard_value(x, name, spec, depth + 1, seen)
    if g ~= x then
      if not copy then
        copy = {}
        for k2, x2 in pairs(v) do copy[k2] = x2 end
      end
      copy[k] = g
    end
  end
  return copy or v
end

local function guarded(who, ctor, spec)
  return function(...)
    local args = table.pack(...)
    local label = who
    if type(args[1]) == "table" and type(rawget(args[1], "name")) == "string" then
      label = who .. " '" .. args[1].name .. "'"
    end
    for i = 1, args.n do args[i] = guard_value(args[i], label, spec, 1, {}) end
    return ctor(table.unpack(args, 1, args.n))
  end
end

-- Constructors that check what the spec asks for before building it.
local function agent_ctor(def)
  M.check_agent(def, "lash.agent")
  return require("lash.agent").new(def)
end

local function sandbox_ctor(opts)
  local cap = require("lash.capabilities.sandbox").new(opts)
  M.check_sandbox_options(opts, "lash.sandbox_capability")
  return M.mark(cap)
end

-- The constructors whose functions run later, at run time.
local RUNS_LATER = {
  agent = true, tool = true, toolset = true, capability = true, prefix_tools = true, filter_tools = true,
  rename_tool = true, wrap_tools = true, sandbox_capability = true, script_model = true, handoff = true,
  subagents = true,
}

--- The API, name by name: what the view holds (a function of the real
-- module giving the value), or a refusal with its reason. Every name of
-- `lash` not listed here is absent from the view.
M.API = {
  -- describing an agent
  agent = function() return agent_ctor end,
  tool = function(l) return l.tool end,
  retry = function(l) return l.retry end,
  toolset = function(l) return l.toolset end,
  capability = function(l) return l.capability end,
  prefix_tools = function(l) return l.prefix_tools end,
  filter_tools = function(l) return l.filter_tools end,
  rename_tool = function(l) return l.rename_tool end,
  wrap_tools = function(l) return l.wrap_tools end,
  handoff = function(l) return l.handoff end,
  subagents = function(l) return l.subagents end,
  -- run_lua runs the model's code in this same environment, under budgets
  code_mode = function(l) return l.code_mode end,
  sandbox_capability = function() return sandbox_ctor end,
  -- an MCP server only inside the run's sandbox: one more command in the
  -- jail (a host command, an id or create options are the host's to give)
  mcp = function(l)
    return read_only({
      stdio = function(given)
        -- a plain copy, checked: the spec keeps its table and could
        -- change it after this check
        local def = {}
        if type(given) == "table" then for k, v in pairs(given) do def[k] = v end end
        if def.sandbox ~= true and def.sandbox ~= "run" then
          error("lash.mcp.stdio in a spec loaded without --trust runs the server inside the run's sandbox "
            .. "only: set sandbox = true (and give the agent a sandbox capability), or load the spec with "
            .. "--trust", 2)
        end
        return l.mcp.stdio(def)
      end,
      http = function()
        error("lash.mcp.http is not available to a spec loaded without --trust (it connects from the host); "
          .. "load the spec with --trust, or add the server from Lua host code", 2)
      end,
    }, "mcp")
  end,
  -- ACP: the editor's tools and the plan tool; an external agent is a host
  -- command, the trusted side's to start
  acp = function(l)
    local t = pick(l.acp, { "editor_tools", "plan_toolset" })
    t.agent = function()
      error("lash.acp.agent is not available to a spec loaded without --trust (it starts a program); load the "
        .. "spec with --trust, or define the agent from Lua host code", 2)
    end
    return read_only(t, "acp")
  end,
  script_model = function(l) return l.script_model end,
  render = function(l) return l.render end,
  render_fields = function(l) return l.render_fields end,
  -- pure helpers
  error = function(l) return l.error end,
  is_error = function(l) return l.is_error end,
  now = function(l) return l.now end,
  log = function(l) return l.log end,
  version = function(l) return l.version end,
  json = function(l)
    -- encoding from the spec's functions only: the encoder's buffer is
    -- outside the Lua heap's budget, and shared subtables can make its
    -- output exponential in what the spec built
    local t = pick(l.json, { "null", "array_mt", "array", "is_array", "decode", "try_decode" })
    for _, name in ipairs { "encode", "encode_canonical", "try_encode" } do
      local f = l.json[name]
      t[name] = function(...)
        if l.core.budget.loading() then
          error("lash.json." .. name .. " is not available while a spec loaded without --trust is loading; "
            .. "call it from the functions the spec defines, which run later", 2)
        end
        return f(...)
      end
    end
    return read_only(t, "json")
  end,
  schema = function(l) return read_only(pick(l.schema, { "validate", "format_errors", "check" }), "schema") end,
  output = function(l)
    return read_only(pick(l.output, { "truncate", "format_size", "utf8_repair", "is_utf8" }), "output")
  end,
  -- refused, with the reason
  http = refused("http", "it makes network requests"),
  sandbox = refused("sandbox", "it creates, opens and lists sandboxes; describe one with "
    .. "lash.sandbox_capability{...} instead"),
  spawn = refused("spawn", "a task would outlive the spec's loading"),
  -- waiting is for the run (a model function, a tool); while the spec
  -- loads it would block in C, where no budget can stop it
  sleep = function(l)
    local sleep = l.sleep
    return function(seconds)
      if l.core.budget.loading() then
        error("lash.sleep is not available while a spec loaded without --trust is loading (" .. ACTS
          .. "); call it from the functions the spec defines, which run later", 2)
      end
      return sleep(seconds)
    end
  end,
  future = refused("future", ACTS), run = refused("run", ACTS),
  step = refused("step", ACTS),
  load_spec = refused("load_spec", "it loads other specs, possibly trusted"),
  load_spec_string = refused("load_spec_string", "it loads other specs, possibly trusted"),
  register_capability = refused("register_capability", "it changes a process-wide registry; the host "
    .. "registers capability types"),
  core = refused("core", "it is the whole C core"),
  sys = refused("sys", "it describes the host process"),
  models = refused("models", "it is the process-wide provider registry; give the model as a string"),
}

--- A fresh, read-only view of lash for one spec.
-- @tparam[opt] table spec the spec's state (M.env's third result): its safe
--   string table (strings' methods while its functions run) and its sources
-- @treturn table
function M.view(spec)
  -- the view is of the facade itself: every name a trusted spec sees
  local l = require "lash"
  local t = {}
  for name, make in pairs(M.API) do
    local ok, v = pcall(make, l)
    if ok then
      if RUNS_LATER[name] then v = guarded("lash." .. name, v, spec) end
      t[name] = v
    end
  end
  return setmetatable({}, {
    __index = function(_, k)
      local v = t[k]
      if v == nil and type(k) == "string" and l[k] ~= nil then
        error("lash." .. k .. " is not available to a spec loaded without --trust (it is not on the list of "
          .. "what an untrusted spec may touch, lua/lash/spec_env.lua). Pass --trust to use it.", 2)
      end
      return v
    end,
    __newindex = function(_, k)
      error("lash is read-only in a spec (tried to set lash." .. tostring(k) .. ")", 2)
    end,
    __metatable = false,
  })
end

---------------------------------------------------------------------------
-- The safe standard library

-- Lua's pattern matcher backtracks inside one C call, where neither the
-- instruction hook nor the clock can stop it; each call is charged its
-- worst case, starts x (n + 1)^q for q unbounded repetitions, and refused
-- past this.
M.PATTERN_STEPS = 1e9
M.TABLE_MOVE_MAX = 1e7

-- plain functions, not methods: the strings' __index is the safe table
-- below while a spec loads, and it calls these
local ssub, smatch, sformat = string.sub, string.match, string.format

-- The index of the `]` closing the set that starts at p[i] == "[".
local function set_end(p, i, n)
  local j = i + 1
  if ssub(p, j, j) == "^" then j = j + 1 end
  if ssub(p, j, j) == "]" then j = j + 1 end
  while j <= n and ssub(p, j, j) ~= "]" do
    if ssub(p, j, j) == "%" then j = j + 1 end
    j = j + 1
  end
  return j
end

-- How many items of pattern p can repeat without bound (*, +, -, %b and
-- back-references), and whether it is anchored.
local function repetitions(p)
  local q, i, n = 0, 1, #p
  local anchored = ssub(p, 1, 1) == "^"
  if anchored then i = 2 end
  while i <= n do
    local c = ssub(p, i, i)
    local last
    if c == "%" then
      local d = ssub(p, i + 1, i + 1)
      if d == "b" then
        q, i = q + 1, i + 4
      elseif d == "f" then
        i = set_end(p, i + 2, n) + 1
      elseif smatch(d, "%d") then
        q, i = q + 1, i + 2
      else
        last = i + 1
      end
    elseif c == "(" or c == ")" then
      i = i + 1
    elseif c == "[" then
      last = set_end(p, i, n)
    else
      last = i
    end
    if last then
      local nx = ssub(p, last + 1, last + 1)
      if nx == "*" or nx == "+" or nx == "-" then
        q, i = q + 1, last + 2
      elseif nx == "?" then
        i = last + 2
      else
        i = last + 1
      end
    end
  end
  return q, anchored
end

local function guard(fname, s, p, init, plain, unanchored)
  if plain or type(s) ~= "string" and type(s) ~= "number" or type(p) ~= "string" and type(p) ~= "number" then
    return
  end
  s, p = tostring(s), tostring(p)
  local q, anchored = repetitions(p)
  if q == 0 then return end
  local n = #s
  local starts = (anchored and not unanchored) and 1 or (n + 1)
  local cost = starts * (n + 1) ^ q
  if cost > M.PATTERN_STEPS then
    error(sformat("string.%s: the pattern %q has %d repetitions; on a %d-byte string it could take up "
      .. "to %.3g steps inside one call, more than a spec loaded without --trust may spend (%.3g). Use a "
      .. "plain find, a simpler pattern or a shorter string, or pass --trust.", fname, p, q, n, cost,
      M.PATTERN_STEPS), 3)
  end
end

local function safe_string()
  local s = {}
  for k, v in pairs(string) do s[k] = v end
  s.dump = function() error("string.dump is not available to a spec loaded without --trust", 2) end
  s.find = function(str, p, init, plain)
    guard("find", str, p, init, plain)
    return string.find(str, p, init, plain)
  end
  s.match = function(str, p, init)
    guard("match", str, p, init)
    return string.match(str, p, init)
  end
  s.gmatch = function(str, p, init)
    guard("gmatch", str, p, init, false, true)
    return string.gmatch(str, p, init)
  end
  s.gsub = function(str, p, repl, n)
    guard("gsub", str, p)
    return string.gsub(str, p, repl, n)
  end
  return s
end

local function safe_table()
  local t = {}
  for k, v in pairs(table) do t[k] = v end
  t.move = function(a1, f, e, tpos, a2)
    if type(f) == "number" and type(e) == "number" and e - f >= M.TABLE_MOVE_MAX then
      error("table.move of " .. string.format("%.0f", e - f + 1) .. " elements is more than a spec loaded "
        .. "without --trust may move in one call (" .. string.format("%.0f", M.TABLE_MOVE_MAX) .. ")", 2)
    end
    return table.move(a1, f, e, tpos, a2)
  end
  return t
end

local function refuse_std(what)
  return function()
    error(what .. " is not available to a spec loaded without --trust (a spec gets the lash API and the safe "
      .. "standard library). Pass --trust (or trust = true) to load it with the full standard library.", 2)
  end
end

local function refusing_table(name)
  return setmetatable({}, {
    __index = function(_, k) return refuse_std(name .. "." .. tostring(k)) end,
    __newindex = function() error(name .. " is not available to a spec loaded without --trust", 2) end,
    __metatable = false,
  })
end

local function ro_std(t, name)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return setmetatable({}, {
    __index = c,
    __newindex = function(_, k)
      error("the " .. name .. " table is read-only in a spec (tried to set '" .. tostring(k) .. "')", 2)
    end,
    __metatable = false,
  })
end

--- A fresh environment for one untrusted spec: the view of lash and the
-- safe standard library.
-- @tparam[opt] string chunkname the chunk name the spec is loaded under
--   (its functions are told from lash's by it, see M.seal)
-- @treturn table env
-- @treturn table the safe string table (to serve as strings' __index
--   while the spec loads)
-- @treturn table the spec's state, for M.seal once it has loaded
function M.env(chunkname)
  local sstring = safe_string()
  -- metatables the spec set itself; lash's own stay out of its reach
  local own = setmetatable({}, { __mode = "k" })
  local spec = { sstring = sstring, own = own, sources = {}, loads = 0 }
  if chunkname then
    spec.sources[chunkname] = true
    spec.name = chunkname:gsub("^[@=]", "")
  end
  local api = M.view(spec)
  local env
  env = {
    _VERSION = _VERSION, assert = assert, error = error, ipairs = ipairs, next = next, pairs = pairs,
    pcall = pcall, select = select, tonumber = tonumber, tostring = tostring, type = type, xpcall = xpcall,
    rawequal = rawequal, rawget = rawget, rawset = rawset, rawlen = rawlen,
    setmetatable = function(t, mt)
      local cur = getmetatable(t)
      if cur ~= nil and not own[cur] then
        error("setmetatable: this table belongs to lash (its metatable is not the spec's to change)", 2)
      end
      local r = setmetatable(t, mt)
      if mt ~= nil then own[mt] = true end
      return r
    end,
    getmetatable = function(v)
      if type(v) ~= "table" then return nil end
      local mt = getmetatable(v)
      if mt == nil or own[mt] then return mt end
      return nil
    end,
    print = function(...)
      local t = table.pack(...)
      for i = 1, t.n do t[i] = tostring(t[i]) end
      local line = table.concat(t, "\t", 1, t.n)
      -- an untrusted spec's words cannot drive the user's terminal
      if runtime.sys.isatty(2) then line = runtime.output.visible(line) end
      io.stderr:write(line, "\n")
    end,
    string = ro_std(sstring, "string"), table = ro_std(safe_table(), "table"),
    math = ro_std(math, "math"), utf8 = ro_std(utf8, "utf8"),
    coroutine = ro_std(coroutine, "coroutine"),
    os = setmetatable({ clock = os.clock, date = os.date, time = os.time, difftime = os.difftime }, {
      __index = function(_, k) return refuse_std("os." .. tostring(k)) end,
      __newindex = function() error("the os table is read-only in a spec", 2) end,
      __metatable = false,
    }),
    io = refusing_table("io"), debug = refusing_table("debug"), package = refusing_table("package"),
    loadfile = refuse_std("loadfile"), dofile = refuse_std("dofile"),
    collectgarbage = refuse_std("collectgarbage"),
    lash = api,
  }
  env.require = function(name)
    if name == "lash" then return api end
    error("require '" .. tostring(name) .. "' is not available to a spec loaded without --trust; the lash API "
      .. "is the global `lash` (and require \"lash\"). Pass --trust to load other modules.", 2)
  end
  -- text only, and into the spec's own environment unless given another
  env.load = function(chunk, name, mode, e)
    if mode ~= nil and mode ~= "t" then
      error("load: only text chunks (mode \"t\") can be loaded by a spec loaded without --trust", 2)
    end
    if type(chunk) ~= "string" then
      error("load: a spec loaded without --trust loads text (a string), not a reader function", 2)
    end
    -- under a name of the spec's own, so M.seal knows its functions
    spec.loads = spec.loads + 1
    local source = "=" .. (spec.name or "spec") .. " load#" .. spec.loads .. " " .. tostring(name or "")
    spec.sources[source] = true
    return load(chunk, source, "t", e == nil and env or e)
  end
  env._G = env
  return env, sstring, spec
end

return M
