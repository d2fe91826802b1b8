--- The Lua side of the C embedding API (lash.h, src/7-embed/embed.c).
--
-- One instance per lash_State, made on first use by `M.new(core)`, where
-- `core` holds the C functions of src/7-embed/embed.c (bound to that state). C
-- drives the instance: it loads the agent spec, keeps the host's tools and
-- template values, and starts runs whose events, tool calls and approvals
-- go back to C. Nothing here is meant for Lua users.
--
-- Host tools are a toolset (`host tools`) given to every run started from
-- C (agent:run's `toolsets` option), and the C run is that run's `host`
-- (ctx.host in the tool handler). Their handler hands the
-- arguments (as JSON) to the host's C callback and waits, in C
-- (core.call_tool), until the host answers with lash_call_return/retry/
-- fail, which may be frames later. Approvals wait the same way on
-- lash_run_approve (core.approval).
--
-- Errors meant as LASH_EARG (bad input from the host) are raised as
-- `lash.error("arg", message)`; anything else is LASH_ERUN.
-- @module lash.embed
local runtime = require "lash.runtime"
local json = require "lash.json"
local options = require "lash.options"
local tool = require "lash.tool"
local spec = require "lash.spec"
local hooks = require "lash.hooks"

local M = {}

-- lash.h's LASH_TOOL_REQUIRES_APPROVAL: the tool's calls wait for an
-- approval (lash.tool's requires_approval), answered by lash_run_approve.
local TOOL_REQUIRES_APPROVAL = 1

local function arg_error(msg)
  error(runtime.error("arg", msg), 0)
end

local function spec_error(msg)
  error(runtime.error("spec", msg), 0)
end

-- The keys lash_run_start accepts in its options JSON, and their JSON type.
local RUN_OPTIONS = {
  values = "object", limits = "object", model = true, model_settings = "object",
  stream = "boolean", deps = true, history = "array", approvals = "object", approval = "string",
  parts = "array",    -- image/document parts after the prompt text ({"type": "image", "path": ...})
  output = "object",  -- a JSON Schema for a structured answer (the result's "output" is the value)
}

local function json_type(v)
  local t = type(v)
  if t == "table" then
    if json.is_array(v) or v[1] ~= nil then return "array" end
    return "object"
  end
  if t == "string" or t == "boolean" then return t end
  if t == "number" then return "number" end
  return "null"
end

local function decode_options(text)
  if text == nil or text == "" then return {} end
  local o, err = json.try_decode(text)
  if o == nil then arg_error("lash_run_start: the options are not valid JSON (" .. tostring(err) .. ")") end
  if json_type(o) ~= "object" then
    arg_error("lash_run_start: the options must be a JSON object, got " .. json_type(o))
  end
  local unknown = options.unknown(o, RUN_OPTIONS)
  if unknown ~= nil then arg_error(options.message("lash_run_start", "option", unknown, RUN_OPTIONS)) end
  for k, v in pairs(o) do
    local want = RUN_OPTIONS[k]
    -- an empty JSON object decodes like an empty array; both are fine
    local got = json_type(v)
    if want ~= true and got ~= want and not (type(v) == "table" and next(v) == nil) then
      arg_error("lash_run_start: option '" .. k .. "' must be a JSON " .. want .. ", got " .. got)
    end
  end
  if o.values then
    for k, v in pairs(o.values) do
      if type(v) ~= "string" then
        arg_error("lash_run_start: values." .. tostring(k) .. " must be a string, got " .. json_type(v))
      end
    end
  end
  if o.approval ~= nil and o.approval ~= "wait" and o.approval ~= "stop" then
    arg_error("lash_run_start: option 'approval' must be \"wait\" (answer with lash_run_approve) or "
      .. "\"stop\" (end the run with stop_reason approval_required), got \"" .. o.approval .. "\"")
  end
  return o
end

local function encode_event(ev)
  local s = json.try_encode_canonical(ev)
  if s then return s end
  return json.encode_canonical { type = ev.type, run_id = ev.run_id,
                       error = "this event could not be encoded as JSON" }
end

local repair = runtime.output.utf8_repair

--- Make the embedding instance of one lash_State.
-- @tparam table core the C functions of src/7-embed/embed.c for that state
-- @treturn table the instance C calls into
function M.new(core)
  local G = {}
  local agent            -- the loaded agent
  local values = {}      -- lash_set_value
  local tools, order = {}, {}
  local host_ts = { name = "host tools", list = {} }
  function host_ts.get_tools(self) return self.list end
  function host_ts.for_run(self) return self end

  local function rebuild()
    local list = {}
    for _, name in ipairs(order) do list[#list + 1] = tools[name] end
    host_ts.list = list
  end

  --- lash_load_spec_file: as `lash run` loads it (without --trust).
  function G.load_file(path)
    local a, err = spec.load(path)
    if a == nil then spec_error(tostring(err)) end
    agent = a
  end

  --- lash_load_spec_string (trusted: the host's own text) and
  -- lash_load_spec_string_safe (`safe` 1: text from elsewhere, loaded as
  -- a file is). The format is lash.spec's choice: by the name's extension,
  -- else JSON when the text starts with "{", else Lua.
  function G.load_string(text, name, safe)
    local label = name or "spec"
    local a, err = spec.load_string(text, label, { trust = (safe or 0) == 0 })
    if a == nil then spec_error(tostring(err)) end
    agent = a
  end

  --- lash_set_value (value nil removes the key)
  function G.set_value(key, value)
    values[key] = value
  end

  --- lash_register_tool(_ex): `tud` is the C side's record of the
  -- callback; `flags` the LASH_TOOL_* bits (checked in C).
  function G.register_tool(tud, name, description, schema_json, flags)
    if not tool.valid_name(name) then
      arg_error("lash_register_tool: the name must be 1-64 characters of letters, digits, '_' or '-', got '"
        .. name .. "'")
    end
    if tools[name] then
      arg_error("lash_register_tool: a tool named '" .. name .. "' is registered already "
        .. "(lash_unregister_tool it first)")
    end
    local requires_approval = (flags or 0) & TOOL_REQUIRES_APPROVAL ~= 0
    local params
    if schema_json ~= nil and schema_json ~= "" then
      local err
      params, err = json.try_decode(schema_json)
      if params == nil then
        arg_error("lash_register_tool '" .. name .. "': the JSON Schema is not valid JSON (" .. tostring(err) .. ")")
      end
    end
    local handler = function(ctx, args)
      local crun = ctx.host
      if crun == nil then
        error(runtime.error("tool", "host tool '" .. name .. "' can only be called by runs started with lash_run_start",
                         { tool = name }), 0)
      end
      local kind, text = core.call_tool(tud, crun, ctx.tool_call_id, name, json.encode_canonical(args))
      text = repair(text)
      if kind == "return" then return text end
      if kind == "retry" then error(runtime.error("retry", text), 0) end
      error(runtime.error("tool", "Tool '" .. name .. "' failed: " .. text, { tool = name }), 0)
    end
    local ok, t = pcall(tool.new, { name = name, description = description, parameters = params,
                                     handler = handler, requires_approval = requires_approval })
    if not ok then
      local msg = tostring(t):gsub("^[^:]*:%d+: ", ""):gsub("^lash%.tool '[^']*': ", "")
      arg_error("lash_register_tool '" .. name .. "': " .. msg)
    end
    tools[name] = t
    order[#order + 1] = name
    rebuild()
  end

  --- lash_unregister_tool
  function G.unregister_tool(name)
    if not tools[name] then arg_error("lash_unregister_tool: no tool named '" .. name .. "' is registered") end
    tools[name] = nil
    for i, n in ipairs(order) do
      if n == name then table.remove(order, i) break end
    end
    rebuild()
  end

  -- lash_register_hook: one C callback per hook name, given to every run
  -- started from C as run-level hooks (after the agent's and capabilities').
  local host_hooks, hook_tuds, hook_calls = {}, {}, 0
  local KNOWN_HOOKS = {}
  for _, n in ipairs(hooks.NAMES) do KNOWN_HOOKS[n] = true end

  -- The payload a C hook gets for `name`, and the call id it goes under.
  local function hook_payload(name, crun, a, b)
    if name == "after_tool_call" then return { call = a, result = b }, a.id end
    if name == "before_tool_call" then return a, a.id end
    hook_calls = hook_calls + 1
    return a, core.run_id(crun) .. ":" .. name .. ":" .. hook_calls
  end

  --- lash_register_hook (fn set): returns the record it replaces.
  function G.register_hook(tud, name)
    if not KNOWN_HOOKS[name] then
      arg_error("lash_register_hook: unknown hook '" .. name .. "' (known hooks: " .. table.concat(hooks.NAMES, ", ")
        .. ")")
    end
    local old = hook_tuds[name]
    hook_tuds[name] = tud
    host_hooks[name] = function(ctx, a, b)
      local crun = ctx.host
      -- a run not started by C, or a hook removed since the run began
      if crun == nil or hook_tuds[name] ~= tud then return nil end
      local payload, id = hook_payload(name, crun, a, b)
      local text = json.try_encode_canonical(payload)
      if not text then
        error(runtime.error("hook", "the " .. name .. " payload could not be encoded as JSON for the host"), 0)
      end
      local kind, answer = core.call_tool(tud, crun, id, name, text)
      answer = repair(answer)
      if kind == "fail" then
        error(runtime.error("hook", "the host's " .. name .. " hook failed: " .. answer), 0)
      elseif kind == "retry" then
        return answer
      end
      if answer == "" or answer == "null" then return nil end
      local v, err = json.try_decode(answer)
      if v == nil and err then
        error(runtime.error("hook", "the host's " .. name .. " hook answered with text that is not JSON (" .. err
          .. "): " .. answer:sub(1, 200)), 0)
      end
      return v
    end
    return old
  end

  --- lash_register_hook (fn NULL): returns the record it removes.
  function G.unregister_hook(name)
    if not KNOWN_HOOKS[name] then
      arg_error("lash_register_hook: unknown hook '" .. name .. "' (known hooks: " .. table.concat(hooks.NAMES, ", ")
        .. ")")
    end
    local old = hook_tuds[name]
    hook_tuds[name], host_hooks[name] = nil, nil
    return old
  end

  --- A host call its run stopped waiting for (C calls this once per such
  -- call): the tool_cancelled event, so the host can drop the work.
  function G.tool_cancelled(crun, id, name)
    if core.wants_events() then
      core.emit(crun, encode_event { type = "tool_cancelled", run_id = core.run_id(crun), id = id, name = name })
    end
  end

  -- Wait for the agent task and hand its outcome to C.
  local function watch(crun, task)
    local ok, res
    while true do
      local wok, a, b = pcall(task.wait, task)
      if wok then ok, res = a, b break end
      -- this watcher itself was cancelled (the state is closing): the
      -- cancel is delivered once, so waiting again sees the run unwind
      if not runtime.is_error(a, "cancelled") then ok, res = false, a break end
    end
    local out, status = {}, "done"
    if ok then
      out.stop_reason, out.output, out.pending = res.stop_reason, res.output, res.pending
      out.usage, out.messages, out.run_id = res.usage, res.messages, res.run_id
    else
      status = runtime.is_error(res, "cancelled") and "cancelled" or "failed"
      if type(res) == "table" then
        out.error = { kind = res.kind or "error", message = res.message or tostring(res) }
        out.usage, out.messages = rawget(res, "usage"), rawget(res, "messages")
      else
        out.error = { kind = "error", message = tostring(res) }
      end
    end
    out.status = status
    local text = json.try_encode_canonical(out)
    if not text then
      out.messages = nil
      text = json.try_encode_canonical(out) or json.encode_canonical { status = status, error = { kind = "json",
        message = "the run's result could not be encoded as JSON" } }
    end
    -- a structured answer's text is the JSON the model wrote; the value is in the result
    local answer = ok and res.output or nil
    if answer ~= nil and type(answer) ~= "string" then answer = res.text end
    core.finish(crun, status, answer, text)
  end

  --- lash_run_start: returns the agent task (C keeps it to cancel the run).
  function G.start(crun, prompt, options_json)
    if not agent then
      arg_error("lash_run_start: no agent: load a spec first (lash_load_spec_file or lash_load_spec_string)")
    end
    local o = decode_options(options_json)
    local opts = { limits = o.limits, model = o.model, model_settings = o.model_settings,
                   deps = o.deps, history = o.history, approvals = o.approvals, output = o.output,
                   toolsets = { host_ts }, host = crun, hooks = next(host_hooks) and host_hooks or nil }
    if o.parts and prompt ~= nil then prompt = { prompt, table.unpack(o.parts) } end
    local vals = {}
    for k, v in pairs(values) do vals[k] = v end
    for k, v in pairs(o.values or {}) do vals[k] = v end
    opts.values = vals
    opts.stream = o.stream
    if opts.stream == nil then opts.stream = core.wants_events() end
    opts.on_event = function(ev)
      if ev.type == "run_start" then
        core.started(crun, ev.run_id)
      elseif ev.type == "approval_request" then
        core.expect_approval(crun, ev.id)
      end
      if core.wants_events() then core.emit(crun, encode_event(ev)) end
    end
    if o.approval ~= "stop" then
      opts.approve = function(_, call)
        local allow, message = core.approval(crun, call.id)
        if allow then return true end
        return message or false
      end
    end
    local ok, task = pcall(agent.start, agent, prompt, opts)
    if not ok then arg_error(tostring(task)) end
    runtime.spawn(watch, crun, task)
    return task
  end

  return G
end

return M
