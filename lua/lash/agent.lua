--- The agent and its run loop.
--
-- `lash.agent{...}` checks a definition; `agent:start(prompt, opts)` starts
-- a run as a task on the event loop and returns it; `agent:run(prompt,
-- opts)` waits for that task (driving the loop itself when called outside
-- a task). Many runs progress at once in one thread.
--
-- Each step renders the instructions, collects the tools of every toolset
-- in a stable order, calls the model, runs the tool calls it asked for
-- (concurrently when there are several), appends the results and repeats
-- until the model answers without tool calls.
--
-- **History** (`result.messages`, `opts.history`) is a list of messages,
-- plain JSON-serialisable tables, provider-neutral:
--
--   { role = "user", parts = {
--       { type = "text", text = "..." },                       -- a prompt
--       { type = "image", media_type =, data = base64, name = },
--       { type = "document", media_type =, data = base64 | text =, name = },
--       { type = "tool_result", id = "call id", name = "tool",
--         content = "text the model sees",
--         status = "ok" | "retry" | "denied" } } }              -- tool results
--   { role = "assistant", parts = {
--       { type = "text", text = "..." },
--       { type = "tool_call", id = "call id", name = "tool",
--         args = { ... },                 -- decoded arguments, or
--         args_json = "..." } },          -- the raw text when it was not a JSON object
--       { type = "thinking", text =, signature = },      -- reasoning, kept verbatim
--       { type = "redacted_thinking", data = },
--       { type = "reasoning", item = {...}, text = } },  -- a Responses API reasoning item
--     finish = "stop" | "tool_calls" | "length" | ...,
--     model = "provider:model", usage = { input_tokens=, output_tokens=, ... } }
--
-- Instructions are not part of the history: they are rendered per step.
-- A retry result's content already ends with "\n\nFix the errors and try again.".
--
-- **Events** (`opts.on_event(ev)`), each a plain table with `type`, in order:
--   run_start    {run_id, agent, model, prompt}
--   model_request{run_id, step, model, messages (count), tools (count)}
--   text_delta   {run_id, step, text}                  when streaming
--   thinking_delta {run_id, step, text}                reasoning text, when streaming
--   text, thinking {run_id, step, text}                a turn's whole text / reasoning when
--                                                      it was not streamed
--   tool_call    {run_id, step, id, name, args}        args: table, or the raw string
--   approval_request {run_id, step, id, name, args}    a call waits for a decision
--   tool_result  {run_id, step, id, name, status, content, elapsed}
--   tool_progress {run_id, id, name, server, progress, total, message}  an MCP tool reports progress
--   port_published {run_id, port, address, sandbox_id}  a sandbox port reachable on the host
--                                                      (the sandbox capability's `publish`)
--   tool_output_delta {run_id, id, name, stream, text, dropped}  a command's output as it arrives
--                                                      (run_command; lash.capabilities.sandbox_stream)
--   retry        {run_id, step, kind = "tool", id, name, attempt, message}
--                {run_id, step, kind = "model", attempt, delay, status, reason, message,
--                 discarded_text, discarded_thinking}  what the failed attempt had streamed
--                {run_id, step, kind = "output", attempt, message}  the answer missed the schema
--   usage        {run_id, step, usage = this request, total = the run so far,
--                 response_model, response_id,   what the provider said it ran, when it says
--                 finish}
--   handoff      {run_id, step, id, from, to}      the run goes on with another agent
-- A sub-agent's events (lash.subagent) reach the root run's on_event with
-- `path = {"root agent", "child#call_id", ...}` and the child's run_id;
-- the top-level run's events have no path.
--   run_end      {run_id, stop_reason, output, usage, pending, agent, error = {kind, message}}
-- `on_event` runs inside the run's task (or a tool call's child task); it
-- may wait, but every wait there holds up the run.
--
-- **Stop reasons**: "complete" (an answer), "max_tokens" (the answer hit the
-- output limit), "content_filter"/"refusal", "approval_required" (calls
-- wait for approval: `result.pending`). With `output = <JSON Schema>` (agent
-- or run) the answer is decoded and validated: `result.output` is the value,
-- `result.text` the raw answer; a mismatch is sent back as a retry prompt
-- (up to `retries` times, then an `output` error). Failures raise typed errors
-- (`limit`, `tool`, `retries`, `model`, `provider`, `auth`, `config`,
-- `template`, `cancelled`, ...) carrying `messages` and `usage`.
-- @module lash.agent
local json = require "lash.json"
local tool = require "lash.tool"
local toolset = require "lash.toolset"
local capability = require "lash.capability"
local models = require "lash.models"
local mparts = require "lash.models.parts"
local structured = require "lash.models.structured"
local schema = require "lash.schema"
local hooks = require "lash.hooks"
local subagent = require "lash.subagent"
local handoff = require "lash.handoff"
local guardrails = require "lash.guardrails"

local M = {}

local Agent = {}
Agent.__index = Agent
Agent.__name = "lash.agent"
M.Agent = Agent

local runtime = require "lash.runtime"
local options = require "lash.options"
local defaults = require "lash.defaults"

local function new_error(kind, message, fields)
  return runtime.error(kind, message, fields)
end

-- max_calls_per_turn and max_concurrent_tools bound what one model turn
-- can start (lash.defaults.agent says how far).
local DEFAULT_LIMITS = { max_steps = defaults.agent.max_steps, max_calls_per_turn = defaults.agent.max_calls_per_turn,
                         max_concurrent_tools = defaults.agent.max_concurrent_tools,
                         max_depth = defaults.agent.max_depth }
local LIMIT_KEYS = { max_steps = true, max_tool_calls = true, max_input_tokens = true,
                     max_output_tokens = true, max_total_tokens = true, max_calls_per_turn = true,
                     max_concurrent_tools = true, max_depth = true }

local AGENT_FIELDS = {
  name = "string", description = "string", model = true, instructions = true, tools = "table",
  toolsets = "table", capabilities = "table", retries = "number", limits = "table",
  model_settings = "table", deps = true, values = "table", tool_timeout = "number",
  stream = "boolean", approve = "function", model_options = "table",
  output = "table",  -- a JSON Schema: the run's answer is a value of it (structured output)
  hooks = "table",   -- lifecycle hooks (lash.hooks)
  handoffs = "table",  -- agents (or lash.handoff{...}) the model may transfer the run to
  handoff_description = "string",  -- when another agent's model should hand off to this one
  guardrails = "table",  -- {input = {...}, output = {...}}: checks that can stop the run (lash.guardrails)
}

local RUN_OPTS = {
  history = "table", deps = true, on_event = "function", approve = "function", approvals = "table",
  model = true, limits = "table", values = "table", model_settings = "table", stream = "boolean",
  holder = "string",  -- who this run is, for claiming an attached sandbox (lash.identity)
  output = "table",   -- a JSON Schema for the answer (overrides the agent's)
  on_message = "function",  -- called with each message as it enters the history (saved sessions)
  toolsets = "table", -- more toolsets for this run only, after the agent's own
  host = true,        -- the embedding host's handle for this run: ctx.host in tools and hooks
  hooks = "table",    -- lifecycle hooks for this run (lash.hooks), after the agent's and capabilities'
  parent = "table",   -- run as a sub-agent of the run of this ctx (a tool's ctx): lash.subagent
  capabilities = "table",  -- more capabilities for this run only, after the agent's own
  sandbox_for = "function",  -- a sub-agent's sandbox capability, pointed at its parent's (lash.subagent)
  guardrails = "table",  -- more guardrails for this run, after the agent's and capabilities'
  -- which calls need approval in this run: fn(ctx, call, tool_says) -> boolean, where tool_says is
  -- the tool's own requires_approval (lash acp's modes: ask before changes, or run freely)
  needs_approval = "function",
  ledger = "table",   -- the ledger of tool side effects (lash.durable): started/finished calls, replayed results
}

-- A value as a message shows it: strings quoted (so "5" is not read as 5).
local function show(v)
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "number" or type(v) == "boolean" then return tostring(v) end
  return "a " .. type(v)
end

local function check_limits(who, limits, level)
  -- options.check counts its level from its own caller: this function
  options.check(who, limits, LIMIT_KEYS, { what = "limit", level = level + 1 })
  for k, v in pairs(limits) do
    if v ~= false and (type(v) ~= "number" or v < 0 or v ~= math.floor(v)) then
      error(who .. ": limit '" .. k .. "' must be an integer >= 0 (or false for none), got " .. show(v), level + 1)
    end
  end
end

-- tools, toolsets and capabilities are lists: one item given on its own
-- (tools = shout) would otherwise be read as an empty list, silently.
local SINGULAR = { tools = "tool", toolsets = "toolset", capabilities = "capability" }
local function check_list(who, def, field, level)
  local v = def[field]
  if v == nil or (next(v) == nil) or (#v > 0 and getmetatable(v) == nil) then return end
  local what = tool.is_tool(v) and ("the tool '" .. tostring(v.name) .. "'")
    or (getmetatable(v) ~= nil and "one " .. SINGULAR[field] .. " rather than a list")
    or "a table with no list items (keys: " .. table.concat((function()
      local ks = {}
      for k in pairs(v) do ks[#ks + 1] = tostring(k) end
      table.sort(ks)
      return ks
    end)(), ", ") .. ")"
  error(who .. ": field '" .. field .. "' must be a list, got " .. what .. ": write " .. field .. " = { ... } "
    .. "around it", level + 1)
end

local function check_model(who, m, level)
  local t = type(m)
  if m == nil or t == "string" or t == "function" or t == "table" then return end
  error(who .. ": field 'model' must be a model name such as \"anthropic:claude-sonnet-4-6\" or \"test\" (or a "
    .. "function(messages, info)), got " .. show(m), level + 1)
end

--- Define an agent.
-- @tparam table def `model` (see lash.models.resolve; may be overridden per
--   run), `instructions` (string template, function(ctx), or a list),
--   `tools` (lash.tool objects or tool tables), `toolsets`, `capabilities`,
--   `retries` (default 1: how many consecutive retries a tool gets),
--   `limits` ({max_steps = 50, max_tool_calls, max_input_tokens,
--   max_output_tokens, max_total_tokens}), `model_settings` (max_tokens,
--   temperature, ...), `model_options` (api_key, base_url, max_retries,
--   timeout, ...), `deps` (default deps), `values` (strings templates may
--   read as `values.x`), `tool_timeout` (seconds, for tools without their
--   own), `stream`, `approve` (default approval callback), `name`,
--   `hooks` (lifecycle hooks, see lash.hooks).
-- @treturn Agent
function M.new(def)
  if getmetatable(def) == Agent then return def end
  if type(def) ~= "table" then error("lash.agent: expected a table, got " .. type(def), 2) end
  tool.check_fields("lash.agent", def, AGENT_FIELDS, 2)
  check_model("lash.agent", def.model, 2)
  for _, f in ipairs { "tools", "toolsets", "capabilities" } do check_list("lash.agent", def, f, 2) end
  capability.check_instructions("lash.agent", def.instructions, 2)
  local tt = def.tool_timeout
  if tt ~= nil and not (tt > 0 and tt < math.huge) then
    error("lash.agent: field 'tool_timeout' must be a positive number of seconds, got " .. show(tt), 2)
  end
  if def.retries ~= nil and (def.retries < 0 or def.retries ~= math.floor(def.retries)) then
    error("lash.agent: field 'retries' must be an integer >= 0, got " .. show(def.retries), 2)
  end
  if def.limits then check_limits("lash.agent", def.limits, 2) end
  hooks.check("lash.agent", def.hooks, 2)
  handoff.check("lash.agent", def.handoffs, 2)
  guardrails.check("lash.agent", def.guardrails, 2)
  if def.output ~= nil then
    local ok, err = schema.check(def.output, "lash.agent: output")
    if not ok then error(err, 2) end
  end
  local self = setmetatable({}, Agent)
  for k, v in pairs(def) do self[k] = v end
  self.name = def.name or "agent"
  self.retries = def.retries or defaults.agent.retries
  self.instructions = capability.instruction_list(def.instructions)
  local sets = {}
  if def.tools and #def.tools > 0 then
    local ok, ts = pcall(toolset.new, { name = "the agent's tools", tools = def.tools })
    if not ok then error("lash.agent: " .. tostring(ts):gsub("^lash%.toolset '[^']*': ", ""), 2) end
    sets[1] = ts
  end
  for i, ts in ipairs(def.toolsets or {}) do
    if not toolset.is_toolset(ts) then
      error("lash.agent: toolsets[" .. i .. "] is not a toolset (make one with lash.toolset{...})", 2)
    end
    sets[#sets + 1] = ts
  end
  self.own_toolsets = sets
  local caps = {}
  for i, c in ipairs(def.capabilities or {}) do
    if capability.is_capability(c) or toolset.is_toolset(c) then
      caps[i] = c
    elseif type(c) == "table" then
      local ok, cap = pcall(capability.new, c)
      if not ok then error("lash.agent: capabilities[" .. i .. "]: " .. tostring(cap), 2) end
      caps[i] = cap
    else
      error("lash.agent: capabilities[" .. i .. "] must be a capability, got " .. type(c), 2)
    end
  end
  self.capabilities = caps
  subagent.check_cycles(self, 2)
  return self
end

--- Is `v` an agent?
function M.is_agent(v)
  return getmetatable(v) == Agent
end

---------------------------------------------------------------------------
-- Runs

local run_counter = 0

-- Every new message of the history enters here, so a recorder (saved
-- sessions) sees each one the moment it exists.
local function append(run, msg)
  local msgs = run.messages
  msgs[#msgs + 1] = msg
  if run.on_message then run.on_message(msg, #msgs) end
end

local function emit(run, ev)
  local cb = run.on_event
  if cb then
    ev.run_id = run.id
    -- a sub-agent's events say where they come from (lash.subagent)
    if run.path then ev.path = run.path end
    cb(ev)
  end
end

local function merged(a, b)
  local out = {}
  for k, v in pairs(a or {}) do out[k] = v end
  for k, v in pairs(b or {}) do out[k] = v end
  return out
end

local function add_usage(total, u)
  if u.reasoning_tokens then total.reasoning_tokens = (total.reasoning_tokens or 0) + u.reasoning_tokens end
  total.input_tokens = total.input_tokens + (u.input_tokens or 0)
  total.output_tokens = total.output_tokens + (u.output_tokens or 0)
  total.cache_read_tokens = total.cache_read_tokens + (u.cache_read_tokens or 0)
  total.cache_write_tokens = total.cache_write_tokens + (u.cache_write_tokens or 0)
end

local function copy_usage(u)
  return { requests = u.requests, input_tokens = u.input_tokens, output_tokens = u.output_tokens,
           cache_read_tokens = u.cache_read_tokens, cache_write_tokens = u.cache_write_tokens,
           tool_calls = u.tool_calls, reasoning_tokens = u.reasoning_tokens }
end

local function limit_error(name, max, value, what)
  return new_error("limit", string.format("%s limit of %d %s: %s", name, max,
                                          name == "max_steps" and "reached" or "exceeded", what),
                   { limit = name, max = max, value = value })
end

-- A proxy for templates: tools.x -> the exposed name of tool x (by any of
-- the names it had on its way through composition).
local function names_proxy(tools)
  local map = {}
  for _, t in ipairs(tools) do
    for _, a in ipairs(t.aliases or {}) do
      if map[a] == nil then map[a] = t.name end
    end
  end
  for _, t in ipairs(tools) do map[t.name] = t.name end
  return map
end

--- A printable name for a model spec (before it is resolved).
function M.model_label(spec)
  local t = type(spec)
  if t == "string" then return spec end
  if t == "function" then return "function" end
  if t == "table" then
    if type(spec[1]) == "string" then return spec[1] end
    if type(spec.name) == "string" then return spec.name end
  end
  return tostring(spec)
end

local function new_run(agent, prompt, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("agent:run: options must be a table, got " .. type(opts), 3) end
  tool.check_fields("agent:run", opts, RUN_OPTS, 3)
  if prompt ~= nil and type(prompt) ~= "string" and type(prompt) ~= "table" then
    error("agent:run: the prompt must be a string, a list of parts (or nil to resume), got " .. type(prompt), 3)
  end
  if opts.output ~= nil then
    local ok, err = schema.check(opts.output, "agent:run: output")
    if not ok then error(err, 3) end
  end
  hooks.check("agent:run", opts.hooks, 3)
  guardrails.check("agent:run", opts.guardrails, 3)
  local parent
  if opts.parent ~= nil then
    parent = subagent.run_of(opts.parent)
    if not parent then
      error("agent:run: parent must be the ctx of a tool call of a running agent (a tool handler's ctx)", 3)
    end
  end
  for i, c in ipairs(opts.capabilities or {}) do
    if not capability.is_capability(c) then
      error("agent:run: capabilities[" .. i .. "] is not a capability (make one with lash.capability{...})", 3)
    end
  end
  for i, ts in ipairs(opts.toolsets or {}) do
    if not toolset.is_toolset(ts) then
      error("agent:run: toolsets[" .. i .. "] is not a toolset (make one with lash.toolset{...})", 3)
    end
  end
  -- files are read and checked now, so a bad one fails before any request
  local prompt_parts = prompt ~= nil and mparts.prompt_parts(prompt) or nil
  if type(prompt) == "table" then prompt = mparts.summary(prompt_parts) end
  local limits = merged(DEFAULT_LIMITS, agent.limits)
  if opts.limits then
    check_limits("agent:run", opts.limits, 3)
    limits = merged(limits, opts.limits)
  end
  local depth = parent and subagent.check_depth(parent) or 0
  run_counter = run_counter + 1
  local id = string.format("run_%d", run_counter)
  local messages = json.array()   -- encoded [] even when empty
  if opts.history then
    for i, m in ipairs(opts.history) do messages[i] = json.copy(m) end
  end
  local model_spec = opts.model or agent.model
  local usage = { requests = 0, input_tokens = 0, output_tokens = 0, cache_read_tokens = 0,
                  cache_write_tokens = 0, tool_calls = 0 }
  local pctx = parent and parent.ctx
  local info = { id = id, agent = agent.name, prompt = prompt, step = 0,
                 model = M.model_label(model_spec), holder = opts.holder or (parent and parent.info.holder),
                 date = os.date("%Y-%m-%d") }
  local deps = opts.deps
  if deps == nil then deps = agent.deps end
  if deps == nil and pctx then deps = pctx.deps end
  local ctx = { deps = deps, run = info,
                values = merged(agent.values, opts.values), messages = messages, usage = usage,
                agent = agent, host = opts.host ~= nil and opts.host or (pctx and pctx.host),
                sandbox_for = opts.sandbox_for }
  local stream = opts.stream
  if stream == nil then stream = agent.stream end
  if stream == nil then stream = opts.on_event ~= nil end
  local run = {
    agent = agent, id = id, prompt = prompt, opts = opts, ctx = ctx, info = info,
    messages = messages, usage = usage, limits = limits, model_spec = model_spec,
    on_event = opts.on_event or (parent and parent.on_event), on_message = opts.on_message,
    approve = opts.approve or agent.approve or (parent and parent.approve),
    needs_approval = opts.needs_approval or (parent and parent.needs_approval),
    approvals = opts.approvals or {}, stream = stream, retries = {}, opened = {},
    settings = merged(agent.model_settings, opts.model_settings),
    prompt_parts = prompt_parts, output_schema = opts.output or agent.output, output_retries = 0,
    ledger = opts.ledger,
  }
  -- for toolsets that report progress or ask the user (MCP servers)
  ctx.emit = function(ev) emit(run, ev) end
  ctx.approve = run.approve
  -- for toolsets that start something inside the run's sandbox (an MCP
  -- server with sandbox = true)
  ctx.sandbox = function() return M.run_sandbox(run) end
  if parent then
    run.parent, run.depth = parent, depth
    run.path = subagent.path(parent, agent.name, opts.parent.tool_call_id)
    run.inherited_hooks = subagent.inherited_hooks(parent)
  end
  subagent.register(run)
  return run
end

-- The transfer_to_<name> tools of the run's current agent. The first
-- handoff a turn asks for is taken when the turn's calls are done.
local function handoff_toolset(run)
  local ts = { name = "handoffs", cache = nil, key = nil }
  local function take(h, cctx, args)
    if run.handoff_to then return handoff.MULTIPLE end
    run.handoff_to = { h = h, args = args, id = cctx.tool_call_id }
    return handoff.transfer_message(h.agent)
  end
  function ts.get_tools(self, ctx)
    local list = handoff.tools(run.agent, ctx, take)
    local key = {}
    for i, t in ipairs(list) do key[i] = t.name end
    key = table.concat(key, "\0")
    if self.key == key then return self.cache end
    self.cache, self.key = list, key
    return list
  end
  return ts
end

-- Instances of every toolset and capability for this run, in order.
local function instantiate(run)
  local agent, ctx = run.agent, run.ctx
  local sets, caps = {}, {}
  for _, ts in ipairs(agent.own_toolsets) do
    sets[#sets + 1] = { ts = ts:for_run(ctx) }
  end
  for _, ts in ipairs(run.opts.toolsets or {}) do
    sets[#sets + 1] = { ts = ts:for_run(ctx) }
  end
  local all = agent.capabilities
  if run.opts.capabilities then
    all = {}
    for i, c in ipairs(agent.capabilities) do all[i] = c end
    for _, c in ipairs(run.opts.capabilities) do all[#all + 1] = c end
  end
  for _, c in ipairs(all) do
    if capability.is_capability(c) then
      local inst = c:for_run(ctx)
      local entry = { cap = inst, sets = {} }
      caps[#caps + 1] = entry
      for _, ts in ipairs(inst:get_toolsets()) do
        local s = { ts = ts:for_run(ctx), cap = entry }
        sets[#sets + 1] = s
        entry.sets[#entry.sets + 1] = s
      end
    else
      sets[#sets + 1] = { ts = c:for_run(ctx) }
    end
  end
  if agent.handoffs and #agent.handoffs > 0 then sets[#sets + 1] = { ts = handoff_toolset(run) } end
  run.sets, run.caps = sets, caps
  -- the hooks nearest the host run last (lash.hooks)
  local sources = { n = 1, agent.hooks }
  local guards = { n = 1, agent.guardrails }
  for _, e in ipairs(caps) do
    sources.n = sources.n + 1
    sources[sources.n] = hooks.of_capability(e.cap)
    guards.n = guards.n + 1
    guards[guards.n] = type(e.cap.get_guardrails) == "function" and e.cap:get_guardrails() or nil
  end
  guards.n = guards.n + 1
  guards[guards.n] = run.opts.guardrails
  run.guards = guards
  sources.n = sources.n + 1
  sources[sources.n] = run.opts.hooks
  for _, h in ipairs(run.inherited_hooks or {}) do
    sources.n = sources.n + 1
    sources[sources.n] = h
  end
  run.hooks = hooks.compile(sources)
end

local function open_set(run, s)
  if s.opened then return end
  s.opened = true
  if s.ts.open then s.ts:open(run.ctx) end
  run.opened[#run.opened + 1] = s.ts
end

local function open_all(run)
  for _, s in ipairs(run.sets) do open_set(run, s) end
end

--- The run's sandbox: that of the first capability offering one (the
-- sandbox capability's `sandbox()`), opened now if the run has not opened
-- it yet, so that a toolset listed before it can use it (and is closed
-- before it). nil when the run has no such capability or has not
-- instantiated its capabilities.
function M.run_sandbox(run)
  for _, e in ipairs(run.caps or {}) do
    if type(e.cap.sandbox) == "function" then
      for _, s in ipairs(e.sets) do open_set(run, s) end
      return e.cap:sandbox()
    end
  end
  return nil
end

-- Close every opened toolset in reverse order; returns the first error.
local function close_all(run, err)
  local first
  for i = #run.opened, 1, -1 do
    local ts = run.opened[i]
    run.opened[i] = nil
    if ts.close then
      local ok, e = pcall(ts.close, ts, run.ctx, err)
      if not ok and first == nil then first = e end
    end
  end
  return first
end

local CLASH_HINT = "Rename the tool, or give one of them a prefix (lash.prefix_tools in Lua, PrefixTools in a "
  .. "YAML or JSON spec, tool_prefix on an MCP server)."

-- Collect tools; rebuild the tables only when some toolset's list changed.
local function collect_tools(run)
  local lists, same = {}, run.tool_lists ~= nil
  for i, s in ipairs(run.sets) do
    local list = s.ts:get_tools(run.ctx)
    lists[i] = list
    if same and run.tool_lists[i] ~= list then same = false end
  end
  if same and #lists == #run.tool_lists then return end
  local by_name, owner, all, defs = {}, {}, {}, {}
  for i, s in ipairs(run.sets) do
    s.tools = lists[i]
    for _, t in ipairs(lists[i]) do
      if by_name[t.name] then
        -- two toolsets of one name (two Sandbox capabilities) are told apart by place
        local this, other = s.ts.name, owner[t.name]
        if this == other[1] then
          this, other = this .. " (toolset " .. i .. ")", other[1] .. " (toolset " .. other[2] .. ")"
        else
          other = other[1]
        end
        error(new_error("config", string.format(
          "%s defines a tool whose name conflicts with existing tool from %s: '%s'. %s",
          this, other, t.name, CLASH_HINT), { tool = t.name }), 0)
      end
      by_name[t.name], owner[t.name] = t, { s.ts.name, i }
      all[#all + 1] = t
      defs[#defs + 1] = t:definition()
    end
  end
  for _, c in ipairs(run.caps) do
    local ctools = {}
    for _, s in ipairs(c.sets) do
      for _, t in ipairs(s.tools) do ctools[#ctools + 1] = t end
    end
    c.names = names_proxy(ctools)
  end
  run.tool_lists, run.by_name, run.tools, run.defs = lists, by_name, all, defs
  run.names = names_proxy(all)
  local names = {}
  for i, t in ipairs(all) do names[i] = "'" .. t.name .. "'" end
  run.available = table.concat(names, ", ")
end

local function render_list(run, list, names, label, out)
  local vars
  for i, piece in ipairs(list) do
    local text
    if type(piece) == "function" then
      text = piece(run.ctx)
      if text ~= nil and type(text) ~= "string" then
        error(new_error("config", label .. ": instructions[" .. i .. "] returned a " .. type(text)
          .. " (a function must return a string or nil)"), 0)
      end
    elseif piece:find("{{", 1, true) then
      vars = vars or capability.template_vars(run.ctx, names)
      -- the template engine loads only for instructions that have one
      text = require("lash.template").render(piece, vars, #list > 1 and (label .. "[" .. i .. "]") or label)
    else
      text = piece
    end
    if text and text ~= "" then out[#out + 1] = text end
  end
end

local function render_instructions(run)
  local out = {}
  render_list(run, run.agent.instructions, run.names, "instructions", out)
  for _, c in ipairs(run.caps) do
    render_list(run, c.cap:get_instructions(), c.names, c.cap.name .. " instructions", out)
  end
  if #out == 0 then return nil end
  return table.concat(out, "\n\n")
end

local function unknown_tool_message(run, name)
  if #run.tools == 0 then return "Unknown tool name: '" .. tostring(name) .. "'. No tools available." end
  return "Unknown tool name: '" .. tostring(name) .. "'. Available tools: " .. run.available
end

-- Normalise an approval decision: returns allow(boolean), args|nil, message|nil.
local function decide(d, call)
  if d == true then return true end
  if d == false or d == nil then return false end
  if type(d) == "string" then return false, nil, d end
  if type(d) == "table" then
    if d.allow == nil then
      error(new_error("approval", "approval for call '" .. call.id .. "' must say allow = true or false"), 0)
    end
    return d.allow and true or false, d.args, d.message
  end
  error(new_error("approval", "approval for call '" .. call.id .. "' must be a boolean, a deny message or "
    .. "{allow=, args=, message=}, got " .. type(d)), 0)
end

local DENIED = "The tool call was denied."

local function call_ctx(run, item)
  return setmetatable({ tool_name = item.part.name, tool_call_id = item.part.id,
                        retry = run.retries[item.part.name] or 0 }, { __index = run.ctx })
end

-- Run one prepared call; returns {status=, content=}.
local function exec_item(run, item)
  if item.status then return item end
  local t, args, part = item.tool, item.args, item.part
  if item.needs_approval then
    local decision = run.approvals[part.id]
    if decision == nil then
      decision = run.approve(run.ctx, { id = part.id, name = part.name, args = args, interrupted = item.interrupted })
    end
    local allow, new_args, message = decide(decision, part)
    if not allow then
      return { status = "denied", content = message or DENIED }
    end
    if new_args ~= nil then
      local a, err = tool.prepare_args(t, new_args)
      if not a then
        error(new_error("approval", "the edited arguments approved for call '" .. part.id .. "' ("
          .. part.name .. ") are invalid: " .. err), 0)
      end
      args = a
    end
  end
  run.usage.tool_calls = run.usage.tool_calls + 1
  local up = run.parent
  while up do
    up.usage.tool_calls = up.usage.tool_calls + 1
    up = up.parent
  end
  local cctx = call_ctx(run, item)
  if run.ledger then run.ledger:start(part, args, cctx) end
  local status, content = tool.call(t, cctx, args, run.agent.tool_timeout)
  local res
  if status == "retry" then
    res = { status = "retry", content = content .. tool.RETRY_SUFFIX, message = content }
  else
    res = { status = "ok", content = content }
  end
  if run.hooks then
    res = hooks.after_tool_call(run.hooks, cctx, { id = part.id, name = part.name, args = args }, res)
  end
  if run.ledger then run.ledger:finish(part, res, cctx) end
  return res
end

local function finish_item(run, item, res, started)
  local L = runtime
  emit(run, { type = "tool_result", step = run.info.step, id = item.part.id, name = item.part.name,
              status = res.status, content = res.content, elapsed = L.now() - started })
  return res
end

local function exec_and_report(run, item)
  local started = runtime.now()
  return finish_item(run, item, exec_item(run, item), started)
end

-- Run the items concurrently, at most `max_concurrent_tools` at a time
-- (workers taking the next item in order); cancel the rest when one fails.
local function exec_concurrently(run, items)
  local L = runtime
  local n = #items
  local results, tasks = {}, {}
  local remaining, failure = n, nil
  local all = L.future()
  local nextitem = 0
  local width = run.limits.max_concurrent_tools
  if not width or width < 1 then width = n end
  local function worker()
    while failure == nil and nextitem < n do
      nextitem = nextitem + 1
      local i = nextitem
      local ok, r = pcall(exec_and_report, run, items[i])
      if ok then
        results[i] = r
      elseif failure == nil then
        failure = r
        all:set()
      end
      remaining = remaining - 1
      if remaining == 0 then all:set() end
    end
  end
  for w = 1, math.min(width, n) do tasks[w] = L.spawn(worker) end
  local ok, err = pcall(all.wait, all)
  if not ok or failure then
    for _, t in ipairs(tasks) do t:cancel() end
    for _, t in ipairs(tasks) do t:wait() end
    if not ok then error(err, 0) end
    error(failure, 0)
  end
  return results
end

-- Decode, validate and classify the calls of one model turn.
-- Decode, validate and classify one call (the before_tool_call hooks run
-- here); returns the item and whether it waits for an approval.
local function prepare_one(run, p)
  emit(run, { type = "tool_call", step = run.info.step, id = p.id, name = p.name, args = p.args_json or p.args })
  local item, asks = { part = p }, false
  local t = run.by_name[p.name]
  -- a call the ledger saw finish (before a crash) is answered with its
  -- recorded result, never run again; one it saw start is marked
  local rec = run.ledger and run.ledger:recorded(p)
  if rec and rec.state == "finished" then
    item.status, item.content, item.replayed = rec.status, rec.content, true
    return item, false
  end
  item.interrupted = rec ~= nil or nil
  if not t then
    item.status, item.message = "retry", unknown_tool_message(run, p.name)
  else
    local args, err = tool.prepare_args(t, p.args_json or p.args)
    if not args then
      item.status, item.message = "retry", err
    else
      item.tool, item.args = t, args
      local allow, message = true, nil
      if run.hooks then
        allow, item.args, message = hooks.before_tool_call(run.hooks, call_ctx(run, item),
          { id = p.id, name = p.name, args = args }, function(a) return tool.prepare_args(t, a) end)
        args = item.args
      end
      if not allow then
        item.status, item.content = "denied", message
      else
        item.needs_approval = t:needs_approval(call_ctx(run, item), args)
        local policy = run.needs_approval
        if policy then
          item.needs_approval = policy(call_ctx(run, item), { id = p.id, name = p.name, args = args },
                                       item.needs_approval) and true or false
        end
        -- it may have had its effects already: not run again unasked
        if item.interrupted and t.idempotent == false then item.needs_approval = true end
        asks = item.needs_approval and run.approvals[p.id] == nil
      end
    end
  end
  if item.status == "retry" then item.content = item.message .. tool.RETRY_SUFFIX end
  return item, asks
end

local function prepare_calls(run, calls)
  local items, pending, asks = {}, {}, {}
  local step = run.info.step
  for i, p in ipairs(calls) do
    local item, ask = prepare_one(run, p)
    if ask then asks[#asks + 1] = { id = p.id, name = p.name, args = item.args, interrupted = item.interrupted } end
    items[i] = item
  end
  for _, a in ipairs(asks) do
    emit(run, { type = "approval_request", step = step, id = a.id, name = a.name, args = a.args,
                interrupted = a.interrupted })
    if not run.approve then pending[#pending + 1] = a end
  end
  return items, pending
end

local function check_tool_call_limit(run, items)
  local max = run.limits.max_tool_calls
  if not max then return end
  local n = 0
  for _, it in ipairs(items) do if not it.status then n = n + 1 end end
  if run.usage.tool_calls + n > max then
    error(limit_error("max_tool_calls", max, run.usage.tool_calls + n,
      string.format("the model asked for %d more tool call%s after %d", n, n == 1 and "" or "s",
                    run.usage.tool_calls)), 0)
  end
end

-- Update the consecutive retry counts; raise when a tool is past its budget.
local function account_retries(run, items, results)
  local failed, order = {}, {}
  for i, it in ipairs(items) do
    local r = results[i]
    if r.status == "retry" and not failed[it.part.name] then
      failed[it.part.name] = { id = it.part.id, message = r.message }
      order[#order + 1] = it.part.name
    end
  end
  local new = {}
  for _, name in ipairs(order) do
    local f = failed[name]
    local t = run.by_name[name]
    local max = (t and t.retries) or run.agent.retries
    local cur = run.retries[name] or 0
    if cur >= max then
      error(new_error("retries", string.format("Tool '%s' exceeded max retries count of %d", name, max),
                      { tool = name, max = max, last_message = f.message }), 0)
    end
    new[name] = cur + 1
    emit(run, { type = "retry", kind = "tool", step = run.info.step, id = f.id, name = name,
                attempt = cur + 1, message = f.message })
  end
  run.retries = new
end

-- Run the calls of the last assistant turn; returns pending calls when
-- approval is needed and nobody can give it now.
local function run_calls(run, calls)
  -- past the per-turn cap, calls are answered, not run
  local cap = run.limits.max_calls_per_turn
  local capped = {}
  if cap and cap > 0 and #calls > cap then
    local keep = {}
    for i, p in ipairs(calls) do
      if i <= cap then keep[i] = p else capped[#capped + 1] = p end
    end
    calls = keep
  end
  local items, pending = prepare_calls(run, calls)
  if #pending > 0 then return pending end
  check_tool_call_limit(run, items)
  local results
  local torun = 0
  for _, it in ipairs(items) do if not it.status then torun = torun + 1 end end
  -- a durable run snapshots after each call: one at a time, so each
  -- snapshot holds exactly the calls finished before it
  if torun <= 1 or (run.ledger and run.ledger.sequential) then
    results = {}
    for i, it in ipairs(items) do results[i] = exec_and_report(run, it) end
  else
    results = exec_concurrently(run, items)
  end
  for i, it in ipairs(items) do
    if results[i].status == "retry" and not results[i].message then results[i].message = it.message end
  end
  local parts = {}
  for i, it in ipairs(items) do
    parts[i] = { type = "tool_result", id = it.part.id, name = it.part.name,
                 content = results[i].content, status = results[i].status }
    -- a sub-agent's transcript, kept with the call's result (saved sessions)
    local rec = run.subagent_records and run.subagent_records[it.part.id]
    if rec then
      parts[i].subagent = rec
      run.subagent_records[it.part.id] = nil
    end
  end
  for _, p in ipairs(capped) do
    parts[#parts + 1] = { type = "tool_result", id = p.id, name = p.name, status = "retry",
      content = string.format("Not run: this turn asked for %d tool calls and at most %d run per turn "
        .. "(limits.max_calls_per_turn). Call the ones still needed in your next turn.", #calls + #capped, cap) }
  end
  append(run, { role = "user", parts = parts })
  account_retries(run, items, results)
  return nil
end

local function tool_calls_of(msg)
  local calls = {}
  for _, p in ipairs(msg.parts or {}) do
    if p.type == "tool_call" then calls[#calls + 1] = p end
  end
  return calls
end

-- `of`: the run whose limits these are, when it is not the one checking
-- (a sub-agent's tokens count against every run above it).
local function check_tokens(run, of)
  local u, l = run.usage, run.limits
  local function over(name, value, what)
    local max = l[name]
    if max and value > max then
      local e = limit_error(name, max, value, string.format("%d %s used", value, what))
      if of then
        e.limit_of = run.id
        e.message = e.message .. " (by agent '" .. run.agent.name .. "' and its sub-agents)"
      end
      error(e, 0)
    end
  end
  over("max_input_tokens", u.input_tokens, "input tokens")
  over("max_output_tokens", u.output_tokens, "output tokens")
  over("max_total_tokens", u.input_tokens + u.output_tokens, "tokens")
end

local FINISH_STOP = { length = "max_tokens", content_filter = "content_filter", refusal = "refusal" }

local function request_model(run, model, instructions)
  local step = run.info.step
  local on_text, on_thinking
  -- what this attempt streamed, so a retry can say what it discarded
  local pending_text, pending_thinking, streamed = {}, {}, false
  if run.stream and run.on_event then
    on_text = function(delta)
      streamed = true
      pending_text[#pending_text + 1] = delta
      emit(run, { type = "text_delta", step = step, text = delta })
    end
    on_thinking = function(delta)
      pending_thinking[#pending_thinking + 1] = delta
      emit(run, { type = "thinking_delta", step = step, text = delta })
    end
  end
  local attempts = 0
  local messages, tools, settings = run.messages, run.defs, run.settings
  if run.view then
    -- after a handoff with an input_filter: the filtered part before it
    local v = run.view
    messages = {}
    for i, m in ipairs(v.prefix) do messages[i] = m end
    for i = v.from, #run.messages do messages[#messages + 1] = run.messages[i] end
  end
  if run.hooks then
    local r = hooks.before_model_request(run.hooks, run.ctx, { step = step, instructions = instructions,
      messages = messages, tools = tools, settings = settings })
    instructions, messages, tools, settings = r.instructions, r.messages, r.tools, r.settings
  end
  local output, instr = structured.request(run.output_schema, model, instructions)
  local req = {
    instructions = instr, messages = messages, tools = tools, settings = settings,
    on_text = on_text, on_thinking = on_thinking, stream = run.stream, output = output,
    info = { run_id = run.id, step = step, agent = run.agent.name },
    on_attempt = function() attempts = attempts + 1 end,
    on_retry = function(r)
      local ev = { type = "retry", kind = "model", step = step, attempt = r.attempt, delay = r.delay,
                   status = r.status, reason = r.reason, message = r.message }
      if #pending_text > 0 then ev.discarded_text = table.concat(pending_text) end
      if #pending_thinking > 0 then ev.discarded_thinking = table.concat(pending_thinking) end
      pending_text, pending_thinking = {}, {}
      emit(run, ev)
    end,
  }
  local ok, resp = pcall(model.request, model, req)
  -- every request sent counts, failed attempts included; a model without
  -- HTTP (function, test) made one
  local sent = math.max(attempts, (ok or attempts > 0) and 1 or 0)
  run.usage.requests = run.usage.requests + sent
  local up = run.parent
  while up do
    up.usage.requests = up.usage.requests + sent
    up = up.parent
  end
  if not ok then
    if type(resp) == "table" then error(resp, 0) end
    error(new_error("model", "model " .. tostring(model.name) .. " failed: " .. tostring(resp)), 0)
  end
  if type(resp) ~= "table" or type(resp.parts) ~= "table" then
    error(new_error("model", "model " .. tostring(model.name) .. " returned no response parts"), 0)
  end
  if not streamed then
    -- not streamed: the text of every turn is still shown, tool-calling turns included
    for _, p in ipairs(resp.parts) do
      if (p.type == "thinking" or p.type == "reasoning") and p.text and p.text ~= "" and #pending_thinking == 0 then
        emit(run, { type = "thinking", step = step, text = p.text })
      elseif p.type == "text" and p.text ~= "" then
        emit(run, { type = "text", step = step, text = p.text })
      end
    end
  end
  return resp
end

local function output_of(resp)
  local texts = {}
  for _, p in ipairs(resp.parts) do
    if p.type == "text" then texts[#texts + 1] = p.text end
  end
  return table.concat(texts)
end

-- Go on with the agent the model handed off to (lash.handoff): its model,
-- settings, output schema, toolsets, capabilities and hooks, in the run's
-- sandbox; the history stays (the handoff's input_filter changes what the
-- new agent sees of the part before it).
local function switch_agent(run)
  local t = run.handoff_to
  run.handoff_to = nil
  local h, new, old = t.h, t.h.agent, run.agent
  if h.on_handoff then h.on_handoff(run.ctx, t.args) end
  if h.input_filter then
    local before = {}
    for i, m in ipairs(run.messages) do before[i] = m end
    local seen = h.input_filter(before, { from = old.name, to = new.name })
    if type(seen) ~= "table" then
      error(new_error("config", "the input_filter of the handoff to '" .. tostring(new.name)
        .. "' returned a " .. type(seen) .. " (it must return a list of messages)"), 0)
    end
    run.view = { prefix = seen, from = #run.messages + 1 }
  else
    run.view = nil
  end
  local sb = M.run_sandbox(run)
  run.agent, run.ctx.agent, run.info.agent = new, new, new.name
  local spec = run.opts.model or new.model
  if spec ~= nil and spec ~= run.model_spec then
    run.model_spec = spec
    run.model = models.resolve(spec, new.model_options)
    run.info.model = run.model.name
  end
  run.settings = merged(new.model_settings, run.opts.model_settings)
  run.output_schema = run.opts.output or new.output
  run.retries = {}
  if sb then run.ctx.sandbox_for = subagent.pointer(sb) end
  instantiate(run)
  open_all(run)
  run.tool_lists = nil
  emit(run, { type = "handoff", step = run.info.step, id = t.id, from = old.name, to = new.name })
end

-- The input guardrails of the run's (first) agent on its prompt: those
-- not run in parallel now; the others alongside the first model request,
-- whose response waits for them (run.input_wait). A tripwire cancels the
-- request in flight; execute() reports the tripwire, not the cancel.
local function start_input_guardrails(run)
  local list = guardrails.collect(run.guards, "input")
  if not list then return end
  local me = runtime.current()
  local text, wait, stop = guardrails.start_input(list, run.ctx, run.prompt or "", function(ev) emit(run, ev) end,
    function(err)
      run.tripped = err
      if run.guard_phase == "request" and me then me:cancel() end
    end)
  run.input_wait, run.input_stop = wait, stop
  if text ~= run.prompt then
    for _, p in ipairs(run.prompt_parts) do
      if p.type ~= "text" then
        error(new_error("guardrail", "an input guardrail replaced the prompt, which has parts that are not text; "
          .. "a guardrail can replace a text prompt only"), 0)
      end
    end
    if type(text) ~= "string" then
      error(new_error("guardrail", "an input guardrail replaced the prompt with a " .. type(text)
        .. " (it must be a string)"), 0)
    end
    run.prompt, run.prompt_parts = text, { { type = "text", text = text } }
  end
end

-- The output guardrails of the agent that answered; returns the output
-- and, when one asks for it, a retry instruction.
local function output_guardrails(run, value)
  local list = guardrails.collect(run.guards, "output")
  if not list then return value end
  return guardrails.run_output(list, run.ctx, value, function(ev) emit(run, ev) end)
end

-- The run body: everything between opening and closing the toolsets.
local function body(run)
  local agent = run.agent
  local model = models.resolve(run.model_spec, agent.model_options)
  run.model = model
  run.info.model = model.name
  instantiate(run)
  open_all(run)
  collect_tools(run)
  local msgs = run.messages
  if run.prompt ~= nil then
    local last = msgs[#msgs]
    if last and last.role == "assistant" and #tool_calls_of(last) > 0 then
      error(new_error("config", "the history ends with tool calls that have no results; resume it with "
        .. "agent:run(nil, {history = ..., approvals = {...}}) before sending a new prompt"), 0)
    end
    start_input_guardrails(run)
    append(run, { role = "user", parts = run.prompt_parts })
  else
    local last = msgs[#msgs]
    if not (last and last.role == "assistant" and #tool_calls_of(last) > 0) then
      error(new_error("config", "nothing to run: pass a prompt, or a history that ends with tool calls "
        .. "awaiting approval (with approvals = {[id] = true|false|...})"), 0)
    end
    local pending = run_calls(run, tool_calls_of(last))
    if pending then return { stop_reason = "approval_required", pending = pending, output = nil } end
    -- decisions answer the paused turn only; later calls ask again
    run.approvals = {}
    if run.handoff_to then switch_agent(run) end
  end
  while true do
    local max_steps = run.limits.max_steps
    if max_steps and run.info.step >= max_steps then
      error(limit_error("max_steps", max_steps, run.info.step,
        string.format("%d model request%s made without a final answer", run.info.step,
                      run.info.step == 1 and "" or "s")), 0)
    end
    run.info.step = run.info.step + 1
    local step = run.info.step
    collect_tools(run)
    local instructions = render_instructions(run)
    model = run.model
    emit(run, { type = "model_request", step = step, model = model.name, messages = #msgs, tools = #run.defs })
    if run.input_wait then run.guard_phase = "request" end
    local resp = request_model(run, model, instructions)
    if run.input_wait then
      -- nothing of the response is acted on before the input guardrails pass
      local wait = run.input_wait
      run.input_wait, run.guard_phase = nil, nil
      wait()
    end
    local u = resp.usage or models.usage()
    add_usage(run.usage, u)
    local up = run.parent
    while up do
      add_usage(up.usage, u)
      up = up.parent
    end
    emit(run, { type = "usage", step = step, usage = { input_tokens = u.input_tokens or 0,
                output_tokens = u.output_tokens or 0, cache_read_tokens = u.cache_read_tokens or 0,
                cache_write_tokens = u.cache_write_tokens or 0, reasoning_tokens = u.reasoning_tokens },
                total = copy_usage(run.usage), response_model = resp.model, response_id = resp.id,
                finish = resp.finish })
    if run.hooks then
      resp = hooks.after_model_response(run.hooks, run.ctx, { step = step, parts = resp.parts, finish = resp.finish,
        usage = u, model = model.name, id = resp.id })
    end
    append(run, { role = "assistant", parts = resp.parts, finish = resp.finish, model = model.name,
                  usage = u })
    check_tokens(run)
    up = run.parent
    while up do
      check_tokens(up, true)
      up = up.parent
    end
    local calls = tool_calls_of(msgs[#msgs])
    if #calls == 0 then
      local text = output_of(resp)
      local stop = FINISH_STOP[resp.finish] or "complete"
      local value, problem, by_guardrail = text, nil, false
      if run.output_schema and stop == "complete" then value, problem = structured.decode(run.output_schema, text) end
      if problem == nil and stop == "complete" then
        local retry
        value, retry = output_guardrails(run, value)
        if retry then problem, by_guardrail = retry, true end
      end
      if problem == nil then
        return { output = value, text = (run.output_schema and stop == "complete") and text or nil, stop_reason = stop }
      end
      run.output_retries = run.output_retries + 1
      if run.output_retries > run.agent.retries then
        error(new_error("output", string.format("the answer did not %s after %d retr%s: %s",
          by_guardrail and "pass the output guardrails" or "match the output schema",
          run.agent.retries, run.agent.retries == 1 and "y" or "ies", problem), { text = text }), 0)
      end
      emit(run, { type = "retry", kind = "output", step = step, attempt = run.output_retries, message = problem })
      append(run, { role = "user", parts = { { type = "text", text = problem .. tool.RETRY_SUFFIX } } })
      goto continue
    end
    -- the adapter read the cut from the stream's structure (a block never
    -- closed, the last block of a max_tokens turn): never run such a call
    for _, c in ipairs(calls) do
      if c.truncated then
        error(new_error("model", "the model hit its output token limit in the middle of a call to '"
          .. tostring(c.name) .. "'; raise model_settings.max_tokens"), 0)
      end
    end
    do
      local pending = run_calls(run, calls)
      if pending then return { stop_reason = "approval_required", pending = pending } end
    end
    if run.handoff_to then switch_agent(run) end
    ::continue::
  end
end

local function on_error(e)
  if type(e) == "table" then return e end
  return { message = tostring(e), traceback = debug.traceback(tostring(e), 2) }
end

local function as_typed(e)
  local L = runtime
  if L.is_error(e) then return e end
  if type(e) == "table" and e.message then
    return L.error("error", e.message, { traceback = e.traceback })
  end
  return L.error("error", tostring(e))
end

local function execute(run)
  local L = runtime
  emit(run, { type = "run_start", agent = run.agent.name, model = run.info.model, prompt = run.prompt })
  local ok, res = xpcall(body, on_error, run)
  if not ok then res = as_typed(res) end
  if run.input_stop then run.input_stop() end
  -- a tripwire cancelled the model request: the run ends with the tripwire
  if not ok and run.tripped then res = run.tripped end
  local cerr = close_all(run, (not ok) and res or nil)
  if ok and cerr then ok, res = false, as_typed(cerr) end
  if run.hooks and hooks.has(run.hooks, "on_run_end") then
    local outcome = ok and { stop_reason = res.stop_reason, output = res.output, usage = run.usage }
      or { stop_reason = L.is_error(res, "cancelled") and "cancelled" or "error", usage = run.usage,
           error = { kind = res.kind, message = res.message } }
    local hok, herr = xpcall(hooks.on_run_end, on_error, run.hooks, run.ctx, outcome)
    if not hok and ok then ok, res = false, as_typed(herr) end
  end
  if not ok then
    if rawget(res, "messages") == nil then res.messages = run.messages end
    if rawget(res, "usage") == nil then res.usage = run.usage end
    emit(run, { type = "run_end", stop_reason = L.is_error(res, "cancelled") and "cancelled" or "error",
                usage = copy_usage(run.usage),
                error = { kind = res.kind, message = res.message } })
    error(res, 0)
  end
  res.messages = run.messages
  res.usage = run.usage
  res.run_id = run.id
  -- the agent that answered (another than the run's first after a handoff)
  res.agent = run.agent.name
  emit(run, { type = "run_end", stop_reason = res.stop_reason, output = res.output,
              usage = copy_usage(run.usage), pending = res.pending, agent = res.agent })
  return res
end

--- Call one of a running agent's tools from code (code mode's
-- `tools.x{...}`, a tool that chains others): as a call the model made,
-- with its events, hooks, approval (denied when the run has nobody to
-- ask), retries' wording and the run's tool call limit.
-- @tparam table ctx a tool call's ctx (or the run's)
-- @tparam string name the tool's name as the model sees it
-- @tparam table args its arguments
-- @tparam string id the call's id in the events
-- @treturn string status "ok", "retry" or "denied"
-- @treturn string the content (a retry's without the "Fix the errors" suffix)
function M.call_tool(ctx, name, args, id)
  local run = subagent.run_of(ctx)
  if not run or not run.by_name then
    error("lash.agent.call_tool: ctx is not the context of a running agent's tool call", 2)
  end
  local item, ask = prepare_one(run, { id = id, name = name, args = args })
  if ask then
    emit(run, { type = "approval_request", step = run.info.step, id = id, name = name, args = item.args })
    if not run.approve then
      item.status, item.content = "denied", "The call to '" .. name .. "' needs approval, which nobody can give "
        .. "from inside code; call the tool directly."
    end
  end
  check_tool_call_limit(run, { item })
  local res = exec_and_report(run, item)
  if res.status == "retry" then return "retry", res.message or item.message or res.content end
  return res.status, res.content
end

--- What this agent runs with: its settings after the defaults, and every
-- default (lash.defaults) they came from. `lash run --describe` prints it.
-- @treturn table `{name=, model=, retries=, tool_timeout=, limits=,
--   capabilities=, defaults=}` (plain data, JSON-serialisable)
function Agent:describe()
  local caps = json.array()
  for i, c in ipairs(self.capabilities) do caps[i] = c.name or getmetatable(c) and getmetatable(c).__name or "?" end
  return {
    name = self.name, model = M.model_label(self.model), retries = self.retries,
    tool_timeout = self.tool_timeout, limits = merged(DEFAULT_LIMITS, self.limits),
    capabilities = caps, defaults = defaults.copy(),
  }
end

--- This agent as a tool another agent's model can call: each call runs
-- it as a sub-agent (its own run, history, model and limits; events,
-- usage, cancellation and the sandbox tied to the calling run). See
-- lash.subagent for the options (`name`, `description`, `parameters`,
-- `input`, `output`, `share_sandbox`, `on_failure`, `max_calls`, ...).
-- @treturn lash.tool
function Agent:as_tool(opts)
  return subagent.as_tool(self, opts, 2)
end

--- Start a run as a task.
-- @tparam[opt] string prompt nil to resume a history that ends with calls
--   awaiting approval
-- @tparam[opt] table opts `history`, `deps`, `on_event(ev)`,
--   `on_message(msg, index)` (each new history message, as it enters),
--   `approve(ctx, call) -> decision`, `approvals` ({[call id] = decision}),
--   `model` (override), `limits`, `values`, `model_settings`, `stream`,
--   `holder` (this run's identity when it claims an attached sandbox),
--   `toolsets` (a list of lash.toolset objects offered to this run only,
--   after the agent's own toolsets and before its capabilities' tools:
--   e.g. an embedding host's tools), `host` (any value: the embedding
--   host's handle for this run, seen as `ctx.host` by tool handlers,
--   instruction functions and toolsets; lash only passes it on), `hooks`
--   (lifecycle hooks for this run, after the agent's and its
--   capabilities': lash.hooks).
--   A decision is true (allow), false (deny), a string (deny with that
--   message to the model), or `{allow=, args=, message=}` (args: allow
--   with edited arguments). `approve` may wait (e.g. on a lash.future a
--   host resolves later).
-- @treturn task whose join() returns the result
function Agent:start(prompt, opts)
  local run = new_run(self, prompt, opts)
  return runtime.spawn(execute, run)
end

--- Run in the calling task, without a task of its own (a sub-agent's run
-- inside the tool call that starts it: cancelling that call's task ends
-- it). Raises as `run` does.
-- @treturn table the result, as `run`'s
function Agent:run_inline(prompt, opts)
  if not runtime.current() then error("agent:run_inline: call it inside a task (agent:run waits from anywhere)", 2) end
  return execute(new_run(self, prompt, opts))
end

--- Run and wait for the result.
-- @treturn table `{output=, messages=, usage=, stop_reason=, pending=, run_id=}`
-- @raise a typed error when the run fails (see the module doc)
function Agent:run(prompt, opts)
  local run = new_run(self, prompt, opts)
  return runtime.spawn(execute, run):join()
end

return M
