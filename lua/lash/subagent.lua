--- Agents that use agents: `agent:as_tool{...}` (a sub-agent the model
-- calls like any tool) and what ties a child run to its parent.
--
-- A child is a run of its own (its own history, instructions, model and
-- limits) started from the tool call's task with `opts.parent = ctx`.
-- What it shares with its parent run:
--
--   events   every event of the child reaches the root's on_event with
--            `path = {"root agent", "child#call_id", ...}` (lash.agent sets
--            it; events of the top-level run have none);
--   usage    each response's usage is added to every run above it, and
--            checked against their token limits (a parent's
--            max_total_tokens bounds its children); tool calls too;
--   depth    `limits.max_depth` (default 3) of every run above bounds how
--            many levels may open below it;
--   cancel   cancelling the parent (or the call's timeout) cancels the
--            child, which closes its toolsets and ends its commands;
--   hooks    the run-level hooks of the runs above (lash.hooks);
--   deps, host, holder and the approval callback;
--   sandbox  by `share_sandbox`: true (default) the child works in the
--            parent's sandbox (its own sandbox capability, or the parent's
--            when it has none, is pointed at the parent's sandbox, which
--            the child never destroys); false: its own, as configured;
--            "fork": a new sandbox started from a snapshot of the parent's
--            (local and Modal), destroyed when the child ends.
--
-- A child that fails comes back to the parent's model as a retry prompt
-- naming the failure (`on_failure = "retry"`, the default), or fails the
-- parent (`"raise"`), or returns a fixed message as its result (a string).
-- Cancellation and a limit of a run above the child always propagate.
-- The child's transcript is kept on the parent's tool_result part
-- (`part.subagent = {agent, run_id, stop_reason, usage, messages}`), so a
-- saved session holds it.
--
-- A lash.agent runs in the tool call's own task (agent:run_inline), so a
-- child costs what a top-level run costs. The target of as_tool may also
-- be anything else with `name` and `start(prompt, opts)` returning a task
-- whose join gives `{output=, usage=, messages=, stop_reason=, run_id=}`
-- (an adapter for an agent lash does not run itself); cancelling the call
-- cancels that task.
-- @module lash.subagent
local runtime = require "lash.runtime"
local json = require "lash.json"
local tool = require "lash.tool"
local schema = require "lash.schema"

local M = {}

-- The run behind each run context (weak): what opts.parent = ctx names.
local runs = setmetatable({}, { __mode = "k" })

--- Remember `run` as the run of `run.ctx` (lash.agent, for every run).
function M.register(run)
  runs[run.ctx] = run
end

--- The run a context belongs to (a run's ctx or a tool call's), or nil.
function M.run_of(ctx)
  if type(ctx) ~= "table" then return nil end
  local r = runs[ctx]
  if r then return r end
  local mt = getmetatable(ctx)
  if type(mt) == "table" and type(mt.__index) == "table" then return runs[mt.__index] end
  return nil
end

---------------------------------------------------------------------------
-- The child's place in the tree

--- The path of a child of `parent` named `name`, started by call `call_id`.
function M.path(parent, name, call_id)
  local base = parent.path or { parent.agent.name }
  local p = {}
  for i, x in ipairs(base) do p[i] = x end
  p[#p + 1] = call_id and (name .. "#" .. call_id) or name
  return p
end

--- Check the depth a new child of `parent` would have against the
-- `max_depth` of every run above it; returns the depth or raises `limit`.
function M.check_depth(parent)
  local depth = (parent.depth or 0) + 1
  local r = parent
  while r do
    local max = r.limits and r.limits.max_depth
    if max and depth - (r.depth or 0) > max then
      error(runtime.error("limit", string.format("max_depth limit of %d reached: agent '%s' may not start another "
        .. "level of sub-agents below it (this one would be %d below it)", max, r.agent.name, depth - (r.depth or 0)),
        { limit = "max_depth", max = max, value = depth - (r.depth or 0), limit_of = r.id }), 0)
    end
    r = r.parent
  end
  return depth
end

--- The run-level hooks of `parent` and the runs above it, nearest first
-- (nil when there are none).
function M.inherited_hooks(parent)
  local own, above = parent.opts and parent.opts.hooks, parent.inherited_hooks
  if not own then return above end
  local out = { own }
  for _, h in ipairs(above or {}) do out[#out + 1] = h end
  return out
end

---------------------------------------------------------------------------
-- Cycles: an agent that can reach itself through its sub-agent tools

-- The sub-agent targets among an agent's static tools.
local function targets_of(agent)
  local out = {}
  local function scan_set(ts)
    local list = rawget(ts, "tools")
    if type(list) ~= "table" then return end
    for _, t in ipairs(list) do
      local meta = type(t) == "table" and type(t.metadata) == "table" and t.metadata
      if meta and meta.lash_subagent then out[#out + 1] = meta.lash_subagent.target end
      for _, conf in ipairs(meta and meta.lash_subagents or {}) do out[#out + 1] = conf.target end
    end
  end
  for _, ts in ipairs(agent.own_toolsets or {}) do scan_set(ts) end
  for _, c in ipairs(agent.capabilities or {}) do
    if type(c.get_toolsets) == "function" and getmetatable(c) and rawget(c, "toolsets") then
      for _, ts in ipairs(c.toolsets) do scan_set(ts) end
    elseif type(c.get_tools) == "function" then
      scan_set(c)
    end
  end
  return out
end

--- Raise when `agent` can reach itself through sub-agent tools (a cycle
-- would recurse until max_depth); the message names the cycle.
function M.check_cycles(agent, level)
  local on_path, done = {}, {}
  local trail = {}
  local function visit(a)
    if done[a] then return end
    if on_path[a] then
      local names, from = {}, nil
      for i, x in ipairs(trail) do if x == a then from = i end end
      for i = from, #trail do names[#names + 1] = trail[i].name or "?" end
      names[#names + 1] = a.name or "?"
      error("lash.agent: a cycle of sub-agents: " .. table.concat(names, " -> ") .. " (an agent may not reach "
        .. "itself through as_tool; hand off instead, or build a fresh agent for the inner call)", level + 1)
    end
    on_path[a] = true
    trail[#trail + 1] = a
    for _, t in ipairs(targets_of(a)) do
      if type(t) == "table" then visit(t) end
    end
    trail[#trail] = nil
    on_path[a] = nil
    done[a] = true
  end
  visit(agent)
end

---------------------------------------------------------------------------
-- The sandbox between parent and child

local SHARE = { [true] = true, [false] = true, fork = true }

-- The parent run's open sandbox and the sandbox capability it came from.
local function parent_sandbox(parent)
  if parent.ctx.sandbox == nil then return nil end
  local sb = parent.ctx.sandbox()
  if sb == nil then return nil end
  for _, e in ipairs(parent.caps or {}) do
    if type(e.cap.sandbox) == "function" and e.cap.cap then return sb, e.cap.cap end
  end
  return sb, nil
end

-- A sandbox capability pointed at `sb` (the child never destroys it).
local function pointed_at(cap, sb)
  if cap.mode == "owned" then return cap:shared_in(sb) end
  return cap:with { sandbox_id = false, attach_to = false, owner = false, session = sb }
end

--- A `sandbox_for` for a run that should work in `sb` (a handoff's new
-- agent): its capabilities that would create a sandbox use `sb` instead.
function M.pointer(sb)
  return function(cap)
    if cap.mode == "owned" then return pointed_at(cap, sb) end
    return cap
  end
end

-- Prepare the child's sandbox: returns the run options to add and a
-- cleanup function.
local function child_sandbox(parent, mode, child)
  local sb, pcap = parent_sandbox(parent)
  if sb == nil or mode == false then return nil, nil end
  local use, close_after = sb, nil
  if mode == "fork" then
    local snap = sb:snapshot()
    local o = pcap and pcap:creation_options() or { backend = sb.backend }
    o.image = nil
    o.from_snapshot = snap
    local ok, made = pcall(runtime.sandbox.session, o)
    -- the snapshot only carried the files over: the new sandbox holds its own
    -- copy (local), so it is dropped now, whether or not the sandbox was made
    -- (a backend that cannot drop one, modal, keeps it)
    local dropped, derr = pcall(runtime.sandbox.drop_snapshot, snap,
      { backend = o.backend or sb.backend, state_root = o.state_root })
    if not dropped and not (runtime.is_error(derr) and derr.code == "unsupported") then
      runtime.log("warning", "could not remove a sub-agent's fork snapshot " .. snap .. ": " .. tostring(derr))
    end
    if not ok then error(made, 0) end
    use = made
    close_after = use
  end
  local has_own = false
  for _, c in ipairs(child.capabilities or {}) do
    if type(c) == "table" and c.mode ~= nil and type(c.shared_in) == "function" then has_own = true end
  end
  local extra = {}
  -- a capability of the child's own that would create a sandbox runs in
  -- this one instead; one that names another sandbox keeps it
  extra.sandbox_for = M.pointer(use)
  if not has_own and pcap then extra.capabilities = { pointed_at(pcap, use) } end
  local cleanup = close_after and function()
    local ok, err = pcall(close_after.close, close_after)
    if not ok then runtime.log("warning", "could not destroy a sub-agent's forked sandbox: " .. tostring(err)) end
  end
  return extra, cleanup
end

---------------------------------------------------------------------------
-- as_tool

local FIELDS = {
  name = "string", description = "string", parameters = "table", input = "function", output = "function",
  share_sandbox = true, on_failure = "string", stream = "boolean", timeout = "number", retries = "number",
  requires_approval = true, max_calls = "number",
}

local DEFAULT_PARAMS = {
  type = "object",
  properties = { input = { type = "string", description = "The task, complete in itself: the agent sees nothing "
    .. "of this conversation but this text." } },
  required = { "input" },
}

--- A tool name from an agent's name: lower case, anything but letters,
-- digits and '_' as '_', at most 64 characters.
function M.tool_name(name)
  local s = tostring(name or "agent"):lower():gsub("[^%w_]", "_")
  if s == "" then s = "agent" end
  return s:sub(1, 64)
end

local function failure_text(name, e)
  local kind = type(e) == "table" and e.kind or "error"
  local msg = type(e) == "table" and (e.message or tostring(e)) or tostring(e)
  return string.format("Sub-agent '%s' failed (%s): %s", name, tostring(kind), msg)
end

-- Is this error a limit of `parent` or a run above it (which the whole
-- tree has spent, so it propagates)?
local function from_above(e, parent)
  if not runtime.is_error(e, "limit") or e.limit_of == nil then return false end
  local r = parent
  while r do
    if r.id == e.limit_of then return true end
    r = r.parent
  end
  return false
end

--- Make a tool that runs `target` as a sub-agent.
-- @param target a lash.agent (or anything with `name` and `start`)
-- @tparam[opt] table opts `name` (default: the agent's name as a tool
--   name), `description` (default: the agent's), `parameters` (a JSON
--   Schema object; default `{input: string}`), `input(args)` (the child's
--   prompt from the arguments; default `args.input`, else the arguments as
--   JSON), `output(result)` (the tool's value from the child's result;
--   default `result.output`, a structured answer as JSON),
--   `share_sandbox` (true, false or "fork"), `on_failure` ("retry",
--   "raise" or a message), `stream` (stream the child's text deltas;
--   default false: its text comes whole), `max_calls` (per parent run),
--   and lash.tool's `timeout`, `retries`, `requires_approval`.
-- @treturn lash.tool
function M.as_tool(target, opts, level)
  level = (level or 1) + 1
  opts = opts or {}
  if type(opts) ~= "table" then error("agent:as_tool: expected a table of options, got " .. type(opts), level) end
  tool.check_fields("agent:as_tool", opts, FIELDS, level)
  if type(target) ~= "table" or type(target.start) ~= "function" then
    error("agent:as_tool: the target must be an agent (or have name and start(prompt, opts))", level)
  end
  local share = opts.share_sandbox
  if share == nil then share = true end
  if not SHARE[share] then
    error("agent:as_tool: share_sandbox must be true, false or \"fork\", got " .. tostring(share), level)
  end
  local on_failure = opts.on_failure or "retry"
  if opts.max_calls ~= nil and (opts.max_calls < 1 or opts.max_calls ~= math.floor(opts.max_calls)) then
    error("agent:as_tool: max_calls must be an integer >= 1, got " .. tostring(opts.max_calls), level)
  end
  if opts.parameters ~= nil then
    local ok, err = schema.check_object_schema(opts.parameters, "parameters")
    if not ok then error("agent:as_tool: " .. err, level) end
  end
  local name = opts.name or M.tool_name(target.name)
  -- what the handler reads at call time (functions a spec gave are
  -- budgeted in place here by lash.spec_env's seal)
  local conf = { target = target, input = opts.input, output = opts.output, share = share,
                 on_failure = on_failure, stream = opts.stream or false, max_calls = opts.max_calls,
                 label = target.name or name, default_params = opts.parameters == nil }
  local handler = function(ctx, args)
    local parent = M.run_of(ctx)
    if conf.max_calls and parent then
      local counts = parent.subagent_calls or {}
      parent.subagent_calls = counts
      counts[name] = (counts[name] or 0) + 1
      if counts[name] > conf.max_calls then
        return string.format("Not run: '%s' may be called at most %d time%s in this run, and it was. Go on "
          .. "without it.", name, conf.max_calls, conf.max_calls == 1 and "" or "s")
      end
    end
    local prompt
    if conf.input then
      prompt = conf.input(args)
    elseif conf.default_params then
      prompt = args.input
    else
      prompt = json.encode_canonical(args)
    end
    local child_opts = { parent = ctx, stream = conf.stream }
    local cleanup
    if parent then
      local extra
      extra, cleanup = child_sandbox(parent, conf.share, target)
      if extra then child_opts.sandbox_for, child_opts.capabilities = extra.sandbox_for, extra.capabilities end
    end
    local done, res
    if type(target.run_inline) == "function" then
      -- a lash agent runs in this call's own task: no task of its own, and
      -- cancelling the call ends it
      done, res = pcall(target.run_inline, target, prompt, child_opts)
      if cleanup then cleanup() end
      if not done and type(res) ~= "table" then error(res, 0) end
      if not done and res.messages == nil and not runtime.is_error(res, "cancelled") then
        error(res, 0)  -- refused before it ran (max_depth, bad options)
      end
    else
      local ok, task = pcall(target.start, target, prompt, child_opts)
      if not ok then
        if cleanup then cleanup() end
        error(task, 0)
      end
      local wok
      wok, done, res = pcall(task.wait, task)
      if not wok then
        -- this call was cancelled (the parent, a timeout): so is the child
        task:cancel()
        pcall(task.wait, task)
        if cleanup then cleanup() end
        error(done, 0)
      end
      if cleanup then cleanup() end
    end
    if type(res) == "table" and parent and ctx.tool_call_id then
      local rec = parent.subagent_records or {}
      parent.subagent_records = rec
      rec[ctx.tool_call_id] = { agent = conf.label, run_id = done and res.run_id or nil,
        stop_reason = done and res.stop_reason or "error", usage = rawget(res, "usage"),
        messages = rawget(res, "messages"),
        error = (not done) and { kind = res.kind, message = res.message } or nil }
    end
    if not done then
      if runtime.is_error(res, "cancelled") or from_above(res, parent) then error(res, 0) end
      if on_failure == "raise" then error(res, 0) end
      if on_failure == "retry" then return nil, failure_text(conf.label, res) end
      return on_failure
    end
    if res.stop_reason == "approval_required" then
      local names = {}
      for _, p in ipairs(res.pending or {}) do names[#names + 1] = p.name end
      local msg = "Sub-agent '" .. conf.label .. "' stopped: its calls to " .. table.concat(names, ", ")
        .. " need approval, and nobody could give it"
      if on_failure == "raise" then error(runtime.error("approval", msg), 0) end
      if on_failure == "retry" then return nil, msg end
      return on_failure
    end
    if conf.output then return conf.output(res) end
    return res.output
  end
  local desc = opts.description or target.description
    or ("Hand a task to the " .. tostring(target.name or name) .. " agent and get its answer.")
  return tool.new { name = name, description = desc, parameters = opts.parameters or DEFAULT_PARAMS,
                    handler = handler, timeout = opts.timeout, retries = opts.retries,
                    requires_approval = opts.requires_approval, metadata = { lash_subagent = conf } }
end

---------------------------------------------------------------------------
-- SubAgents: one delegate_task tool over named agents

local ENTRY_FIELDS = { agent = true, name = "string", description = "string", max_calls = "number",
                       timeout_seconds = "number", on_failure = "string", share_sandbox = true }

--- A capability (pydantic-ai-harness's SubAgents) with one tool,
-- `delegate_task(agent_name, task)`, that runs the named agent as a
-- sub-agent; the agents are listed in the instructions.
-- @tparam table opts `agents`: a list of agents, or of `{agent =, name =,
--   description =, max_calls =, timeout_seconds =, on_failure =,
--   share_sandbox =}`; `name` (the capability's, default "SubAgents")
-- @treturn lash.capability
function M.capability(opts, level)
  level = (level or 1) + 1
  local capability = require "lash.capability"
  if type(opts) ~= "table" or type(opts.agents) ~= "table" or #opts.agents == 0 then
    error("SubAgents: give agents = {agent, ...} (at least one)", level)
  end
  for k in pairs(opts) do
    if k ~= "agents" and k ~= "name" then
      error("SubAgents: unknown option '" .. tostring(k) .. "' (known options: agents, name)", level)
    end
  end
  local by_name, names, lines, confs = {}, {}, {}, {}
  for i, e in ipairs(opts.agents) do
    local entry = e
    if type(e) == "table" and type(e.start) == "function" then entry = { agent = e } end
    if type(entry) ~= "table" then error("SubAgents: agents[" .. i .. "] must be an agent, got " .. type(e), level) end
    tool.check_fields("SubAgents: agents[" .. i .. "]", entry, ENTRY_FIELDS, level)
    local a = entry.agent
    if type(a) ~= "table" or type(a.start) ~= "function" then
      error("SubAgents: agents[" .. i .. "].agent must be an agent", level)
    end
    local name = entry.name or a.name
    if type(name) ~= "string" or name == "" then
      error("SubAgents: agents[" .. i .. "] needs a name (the agent's `name`, or `name` here)", level)
    end
    if by_name[name] then error("SubAgents: two agents are named '" .. name .. "'", level) end
    by_name[name] = M.as_tool(a, { name = M.tool_name(name), timeout = entry.timeout_seconds,
      max_calls = entry.max_calls, on_failure = entry.on_failure, share_sandbox = entry.share_sandbox }, level)
    names[#names + 1] = name
    confs[#confs + 1] = by_name[name].metadata.lash_subagent
    local desc = entry.description or a.description
    lines[#lines + 1] = "- " .. name .. (desc and (": " .. desc) or "")
  end
  local delegate = tool.new {
    name = "delegate_task",
    description = "Run a sub-agent on a self-contained task and return its answer. The sub-agent sees nothing of "
      .. "this conversation but the task.",
    parameters = { type = "object", required = { "agent_name", "task" }, properties = {
      agent_name = { type = "string", enum = names, description = "Which sub-agent." },
      task = { type = "string", description = "The task, complete in itself." } } },
    handler = function(ctx, args)
      local t = by_name[args.agent_name]
      if not t then
        return nil, "Unknown agent '" .. tostring(args.agent_name) .. "'. Available: " .. table.concat(names, ", ")
      end
      local status, content = tool.call(t, ctx, { input = args.task })
      if status == "retry" then return nil, content end
      return content
    end,
    metadata = { lash_subagents = confs },
  }
  return capability.new { name = opts.name or "SubAgents", tools = { delegate },
    instructions = "You can hand self-contained tasks to these sub-agents with delegate_task:\n"
      .. table.concat(lines, "\n") }
end

return M
