--- lash as an ACP client: `lash.acp.agent{command = {...}, ...}` is an
-- external Agent Client Protocol agent (Claude Code through
-- @zed-industries/claude-code-acp, Codex through codex-acp, Gemini CLI,
-- ...) that lash can run, or give a model as a tool (`:as_tool{}`, the
-- sub-agent contract of lash.subagent).
--
-- Each call starts the agent inside a sandbox (by default the calling
-- run's own; else a fresh one, destroyed after), so it works in the jail,
-- with the jail's network policy, uid and files. lash answers the agent's
-- requests from that sandbox: `fs/read_text_file` and `fs/write_text_file`
-- read and write its files, `terminal/*` runs commands in it. Its
-- `session/request_permission` becomes a lash approval (the run's approve
-- callback: true picks an allow option, false or a message a reject one),
-- and its `session/update` notifications become lash events on the
-- calling run (text_delta, thinking_delta, tool_call, tool_result, plan),
-- marked with the agent's `path` as a sub-agent's are.
-- @module lash.acp.client
local json = require "lash.json"
local rpc = require "lash.mcp.rpc"
local tool = require "lash.tool"
local protocol = require "lash.acp.protocol"
local runtime = require "lash.runtime"
local subagent = require "lash.subagent"

local M = {}

local AGENT = { kind = "acp", peer = "ACP agent", connection = "ACP connection", cancel = rpc.ACP.cancel,
                batches = false }

local FIELDS = {
  name = "string", description = "string", command = "table", env = "table", cwd = "string", sandbox = true,
  mode = "string", timeout = "number", init_timeout = "number", approve = "function", permissions = "string",
  terminal = "boolean", fs = "boolean",
}

-- The largest output a terminal keeps when the agent sets no limit.
local TERMINAL_KEEP = 1024 * 1024

local Agent = {}
Agent.__index = Agent
Agent.__name = "lash.acp.agent"

--- Define an external ACP agent.
-- @tparam table def `command` (argv: the program and its arguments, as
--   the sandbox sees them), `name`, `description`, `env` (added to the
--   sandbox's environment), `cwd` (the session's directory; default the
--   sandbox's workdir), `sandbox` (true, the default: the calling run's
--   sandbox, or a fresh one; a lash.sandbox object; a table of
--   lash.sandbox.create options for a fresh one; false: on the host, only
--   from trusted code, and with no fs/terminal offered), `mode` (a session
--   mode id to set, e.g. "bypassPermissions"), `timeout` (seconds a prompt
--   may take), `init_timeout` (seconds to start, default 120), `approve`
--   (fn(call) -> decision; default the run's), `permissions` ("deny", the
--   default, or "allow": the answer when nobody can be asked), `fs` and
--   `terminal` (offer them; default true)
function M.agent(def)
  if type(def) ~= "table" then error("lash.acp.agent: expected a table, got " .. type(def), 2) end
  tool.check_fields("lash.acp.agent", def, FIELDS, 2)
  local cmd = def.command
  if type(cmd) ~= "table" or type(cmd[1]) ~= "string" or cmd[1] == "" then
    error("lash.acp.agent: 'command' must be the agent's argv, e.g. {\"codex-acp\"}, got " .. tostring(cmd), 2)
  end
  for i, a in ipairs(cmd) do
    if type(a) ~= "string" then error("lash.acp.agent: command[" .. i .. "] must be a string", 2) end
  end
  local sb = def.sandbox
  if sb ~= nil and sb ~= true and sb ~= false and type(sb) ~= "table" and type(sb) ~= "userdata" then
    error("lash.acp.agent: 'sandbox' must be true, false, a sandbox or create options, got " .. type(sb), 2)
  end
  if def.permissions ~= nil and def.permissions ~= "allow" and def.permissions ~= "deny" then
    error("lash.acp.agent: 'permissions' must be \"allow\" or \"deny\", got " .. tostring(def.permissions), 2)
  end
  for _, k in ipairs { "timeout", "init_timeout" } do
    if def[k] ~= nil and (def[k] <= 0 or def[k] ~= def[k]) then
      error("lash.acp.agent: '" .. k .. "' must be seconds > 0", 2)
    end
  end
  local self = setmetatable({}, Agent)
  for k, v in pairs(def) do self[k] = v end
  self.name = def.name or (cmd[1]:match("([^/]+)$") or cmd[1])
  self.description = def.description or ("The external agent " .. self.name .. ", over the Agent Client Protocol.")
  return self
end

--- Is `v` an ACP agent?
function M.is_agent(v)
  return getmetatable(v) == Agent
end

---------------------------------------------------------------------------
-- Terminals: commands the agent runs in the sandbox

local function utf8_tail(s, max)
  if #s <= max then return s, false end
  local t = s:sub(-max)
  -- drop a cut character's continuation bytes at the start
  return (t:gsub("^[\128-\191]+", "")), true
end

local function new_terminal(sb, params)
  local argv = { params.command }
  for _, a in ipairs(params.args or {}) do argv[#argv + 1] = a end
  if #argv == 1 and params.command:find("%s") then argv = { "sh", "-c", params.command } end
  local env
  for _, e in ipairs(params.env or {}) do
    if type(e) == "table" and type(e.name) == "string" and type(e.value) == "string" then
      env = env or {}
      env[e.name] = e.value
    end
  end
  local p = sb:spawn(argv, { cwd = params.cwd, env = env })
  local limit = math.tointeger(params.outputByteLimit) or TERMINAL_KEEP
  local t = { p = p, out = "", truncated = false, limit = limit, readers = {}, exited = runtime.future() }
  local open = 2
  for _, stream in ipairs { "stdout", "stderr" } do
    t.readers[#t.readers + 1] = runtime.spawn(function()
      while true do
        local ok, chunk = pcall(p.read, p, stream)
        if not ok or not chunk then break end
        local cut
        t.out, cut = utf8_tail(t.out .. chunk, t.limit)
        t.truncated = t.truncated or cut
      end
      open = open - 1
      if open == 0 then
        local code, sig = p:wait()
        t.status = { exitCode = code, signal = sig and tostring(sig) or json.null }
        if code == nil then t.status.exitCode = json.null end
        t.exited:set(true)
      end
    end)
  end
  return t
end

local function close_terminal(t)
  pcall(t.p.close, t.p)
  for _, r in ipairs(t.readers) do r:cancel() end
end

---------------------------------------------------------------------------
-- One call: a process, a session, a prompt

local Call = {}
Call.__index = Call

function Call:emit(ev)
  ev.agent = self.agent.name
  ev.path = self.path
  if self.on_event then
    local ok, err = pcall(self.on_event, ev)
    if not ok then runtime.log("warn", "acp " .. self.agent.name .. ": on_event: " .. tostring(err)) end
  end
end

local function texts(call, content)
  local out = {}
  for _, c in ipairs(type(content) == "table" and content or {}) do
    if type(c) == "table" then
      if c.type == "content" and type(c.content) == "table" and type(c.content.text) == "string" then
        out[#out + 1] = c.content.text
      elseif c.type == "diff" and type(c.path) == "string" then
        out[#out + 1] = "[diff of " .. c.path .. "]"
      elseif c.type == "terminal" and call.terminals[c.terminalId] then
        out[#out + 1] = call.terminals[c.terminalId].out
      end
    end
  end
  return table.concat(out, "\n")
end

-- What a finished call shows: its content, else its raw output (Codex puts
-- a command's output there).
local function result_text(call, u)
  local t = texts(call, u.content)
  if t ~= "" then return t end
  local raw = u.rawOutput
  if type(raw) == "string" then return raw end
  if type(raw) == "table" then
    for _, k in ipairs { "formatted_output", "aggregated_output", "output", "stdout" } do
      if type(raw[k]) == "string" then return raw[k] end
    end
    local ok, enc = pcall(json.encode, raw)
    if ok then return enc end
  end
  return ""
end

function Call:updated(params)
  local u = type(params) == "table" and params.update
  if type(u) ~= "table" or params.sessionId ~= self.session then return end
  local k = u.sessionUpdate
  local content = type(u.content) == "table" and u.content or {}
  if k == "agent_message_chunk" and type(content.text) == "string" then
    self.text[#self.text + 1] = content.text
    self:emit { type = "text_delta", text = content.text }
  elseif k == "agent_thought_chunk" and type(content.text) == "string" then
    self:emit { type = "thinking_delta", text = content.text }
  elseif k == "tool_call" and self.calls[u.toolCallId] then
    -- an agent may announce a call again once its input is complete
    -- (claude-code-acp does): an update, not a second call
    u.sessionUpdate = "tool_call_update"
    self:updated(params)
  elseif k == "tool_call" and type(u.toolCallId) == "string" then
    self.calls[u.toolCallId] = { title = u.title, kind = u.kind }
    self.tool_calls = self.tool_calls + 1
    self:emit { type = "tool_call", id = u.toolCallId, name = tostring(u.title or u.kind or "tool"),
                kind = u.kind, args = u.rawInput }
    if u.status == "completed" or u.status == "failed" then self:updated { sessionId = self.session,
      update = { sessionUpdate = "tool_call_update", toolCallId = u.toolCallId, status = u.status,
                 content = u.content, rawOutput = u.rawOutput } } end
  elseif k == "tool_call_update" and type(u.toolCallId) == "string" then
    local c = self.calls[u.toolCallId] or {}
    if u.title then c.title = u.title end
    if u.status == "completed" or u.status == "failed" then
      self:emit { type = "tool_result", id = u.toolCallId, name = tostring(c.title or c.kind or "tool"),
                  status = u.status == "completed" and "ok" or "failed", content = result_text(self, u) }
    end
  elseif k == "plan" and type(u.entries) == "table" then
    self:emit { type = "plan", entries = u.entries }
  end
end

-- The agent asks to run something: a lash approval.
function Call:permission(params)
  local options = type(params.options) == "table" and params.options or {}
  local function pick(kinds)
    for _, want in ipairs(kinds) do
      for _, o in ipairs(options) do
        if type(o) == "table" and o.kind == want and o.optionId ~= nil then return o.optionId end
      end
    end
  end
  local tc = type(params.toolCall) == "table" and params.toolCall or {}
  local call = { id = tostring(tc.toolCallId or "permission"), name = tostring(tc.title or tc.kind or "tool call"),
                 args = type(tc.rawInput) == "table" and tc.rawInput or {},
                 agent = self.agent.name, tool_kind = tc.kind }
  self:emit { type = "approval_request", id = call.id, name = call.name, args = call.args }
  local decision
  local approve = self.approve
  if approve then
    decision = approve(self.ctx, call)
  else
    decision = self.agent.permissions == "allow"
  end
  local allow = decision == true or (type(decision) == "table" and decision.allow == true)
  local id = allow and pick { "allow_once", "allow_always" } or pick { "reject_once", "reject_always" }
  if id == nil then return { outcome = { outcome = "cancelled" } } end
  return { outcome = { outcome = "selected", optionId = id } }
end

local function need_sb(self)
  if not self.sb then
    error(rpc.error(rpc.METHOD_NOT_FOUND, "Method not found: lash offers fs and terminals only to an agent "
      .. "it runs in a sandbox"), 0)
  end
  return self.sb
end

local function sandbox_failure(e)
  if type(e) == "table" and e.code == "not_found" then
    return rpc.error(protocol.RESOURCE_NOT_FOUND, "Resource not found: " .. tostring(e.message))
  end
  return rpc.error(rpc.INTERNAL_ERROR, "Internal error: " .. tostring(type(e) == "table" and e.message or e))
end

local CLIENT_METHODS = {}

CLIENT_METHODS["session/request_permission"] = function(self, params) return self:permission(params) end

CLIENT_METHODS["fs/read_text_file"] = function(self, params)
  local sb = need_sb(self)
  local path = protocol.field(params, "path", "string")
  local ok, text = pcall(sb.read_file, sb, path)
  if not ok then error(sandbox_failure(text), 0) end
  local line, limit = math.tointeger(params.line), math.tointeger(params.limit)
  if line or limit then
    local out, n, first = {}, 0, line or 1
    for l in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*\n)") do
      n = n + 1
      if n >= first and (not limit or #out < limit) then out[#out + 1] = l end
    end
    text = table.concat(out)
  end
  return { content = text }
end

CLIENT_METHODS["fs/write_text_file"] = function(self, params)
  local sb = need_sb(self)
  local path = protocol.field(params, "path", "string")
  local content = protocol.field(params, "content", "string")
  local ok, err = pcall(sb.write_file, sb, path, content)
  if not ok then error(sandbox_failure(err), 0) end
  self:emit { type = "file_written", path = path, bytes = #content }
  return {}
end

function Call:terminal(params)
  local id = protocol.field(params, "terminalId", "string")
  local t = self.terminals[id]
  if not t then error(rpc.error(protocol.RESOURCE_NOT_FOUND, "Resource not found: no terminal '" .. id .. "'"), 0) end
  return t, id
end

CLIENT_METHODS["terminal/create"] = function(self, params)
  local sb = need_sb(self)
  protocol.field(params, "command", "string")
  local ok, t = pcall(new_terminal, sb, params)
  if not ok then error(sandbox_failure(t), 0) end
  self.next_terminal = self.next_terminal + 1
  local id = "term-" .. self.next_terminal
  self.terminals[id] = t
  return { terminalId = id }
end

CLIENT_METHODS["terminal/output"] = function(self, params)
  local t = self:terminal(params)
  return { output = t.out, truncated = t.truncated, exitStatus = t.status }
end

CLIENT_METHODS["terminal/wait_for_exit"] = function(self, params)
  local t = self:terminal(params)
  t.exited:wait()
  return t.status
end

CLIENT_METHODS["terminal/kill"] = function(self, params)
  local t = self:terminal(params)
  if not t.status then pcall(t.p.kill, t.p, 9) end
  return {}
end

CLIENT_METHODS["terminal/release"] = function(self, params)
  local t, id = self:terminal(params)
  close_terminal(t)
  self.terminals[id] = nil
  return {}
end

-- The sandbox this call runs the agent in, and whether it is ours to destroy.
local function sandbox_for(agent, opts)
  local want = agent.sandbox
  if want == false then return nil, false end
  if type(want) == "userdata" then return want, false end
  if type(want) == "table" then
    local o = {}
    for k, v in pairs(want) do o[k] = v end
    if o.limits == nil then o.limits = { address_space = false } end
    return runtime.sandbox.create(o), true
  end
  local ctx = opts.parent
  if ctx and type(ctx.sandbox) == "function" then
    local sb = ctx.sandbox()
    if sb then return sb, false end
  end
  -- the agents are Node programs (and Codex's WebAssembly): they reserve far
  -- more address space than they use, so the memory cgroup bounds them
  -- instead of an address-space rlimit
  return runtime.sandbox.create { network = "on", limits = { address_space = false } }, true
end

local function prompt_blocks(prompt)
  if type(prompt) == "string" then return { { type = "text", text = prompt } } end
  local out = {}
  for _, p in ipairs(require("lash.models.parts").prompt_parts(prompt)) do
    if p.type == "text" then out[#out + 1] = { type = "text", text = p.text }
    elseif p.type == "image" then out[#out + 1] = { type = "image", data = p.data, mimeType = p.media_type }
    elseif p.text then out[#out + 1] = { type = "resource", resource = { uri = "lash:" .. tostring(p.name),
                                         text = p.text, mimeType = p.media_type } }
    end
  end
  return out
end

local STOP = { end_turn = "complete", max_tokens = "max_tokens", refusal = "refusal",
               max_turn_requests = "max_steps", cancelled = "cancelled" }

local run_counter = 0

--- Run the agent on `prompt` in the calling task; returns `{output,
-- messages, usage, stop_reason, run_id}` or raises a typed error (kind
-- "acp", "timeout", "cancelled") carrying `messages`.
-- @param prompt a string (or lash prompt parts)
-- @tparam[opt] table opts `parent` (a tool call's ctx: its run's sandbox,
--   approve callback and events), `on_event`, `approve`, `sandbox`
function Agent:run_inline(prompt, opts)
  opts = opts or {}
  run_counter = run_counter + 1
  local ctx = opts.parent
  local parent_run = ctx and subagent.run_of(ctx)
  local path, parent_emit
  if parent_run then
    path = subagent.path(parent_run, self.name, ctx.tool_call_id)
    -- the parent's listener, with this agent's path (its emit would put its own)
    if parent_run.on_event then
      parent_emit = function(ev)
        ev.run_id = parent_run.id
        parent_run.on_event(ev)
      end
    end
  end
  local call = setmetatable({
    agent = self, ctx = ctx or {}, path = path, text = {}, calls = {}, terminals = {}, next_terminal = 0,
    tool_calls = 0, on_event = opts.on_event or parent_emit,
    approve = opts.approve or self.approve or (ctx and ctx.approve),
  }, Call)
  local sb, owned
  if opts.sandbox ~= nil then sb, owned = opts.sandbox, false else sb, owned = sandbox_for(self, opts) end
  call.sb = sb
  local user = { role = "user", parts = { { type = "text", text = type(prompt) == "string" and prompt
                                            or require("lash.models.parts").summary(prompt) } } }
  local function fail(kind, message, fields)
    local e = runtime.error(kind, message, fields)
    e.messages = { user }
    if #call.text > 0 then
      e.messages[2] = { role = "assistant", parts = { { type = "text", text = table.concat(call.text) } } }
    end
    return e
  end
  local transport, peer
  local ok, res = pcall(function()
    local args = {}
    for i = 2, #self.command do args[#args + 1] = self.command[i] end
    transport = require("lash.mcp.stdio").spawn { command = self.command[1], args = args, env = self.env,
                                                  cwd = self.cwd, name = self.name, sandbox = sb, protocol = AGENT }
    peer = rpc.new(transport, {
      name = self.name, protocol = AGENT,
      on_request = function(method, params)
        local fn = CLIENT_METHODS[method]
        if not fn then error(rpc.error(rpc.METHOD_NOT_FOUND, "Method not found: " .. tostring(method)), 0) end
        if type(params) ~= "table" then error(protocol.bad_params(method .. " takes an object"), 0) end
        return fn(call, params)
      end,
      on_notification = function(method, params)
        if method == "session/update" then call:updated(params) end
      end,
    })
    call.peer = peer
    peer:start()
    local offer = sb ~= nil
    local init = peer:request("initialize", {
      protocolVersion = protocol.VERSION,
      clientCapabilities = { fs = { readTextFile = offer and self.fs ~= false,
                                    writeTextFile = offer and self.fs ~= false },
                             terminal = offer and self.terminal ~= false },
      clientInfo = { name = "lash", title = "lash", version = tostring(runtime.version) },
    }, { timeout = self.init_timeout or 120 })
    if type(init) ~= "table" or init.protocolVersion ~= protocol.VERSION then
      error(fail("acp", "ACP agent '" .. self.name .. "' speaks protocol version "
        .. tostring(type(init) == "table" and init.protocolVersion) .. "; lash speaks " .. protocol.VERSION), 0)
    end
    local cwd = self.cwd or "/workspace"
    if not sb then cwd = self.cwd or os.getenv("PWD") or "/" end
    local s = peer:request("session/new", { cwd = cwd, mcpServers = json.array() },
                           { timeout = self.init_timeout or 120 })
    call.session = type(s) == "table" and s.sessionId
    if type(call.session) ~= "string" then
      error(fail("acp", "ACP agent '" .. self.name .. "' answered session/new without a sessionId"), 0)
    end
    if self.mode then peer:request("session/set_mode", { sessionId = call.session, modeId = self.mode }) end
    local pok, r = pcall(peer.request, peer, "session/prompt", { sessionId = call.session,
                                                                   prompt = prompt_blocks(prompt) },
                         { timeout = self.timeout })
    if not pok then
      if runtime.is_error(r, "cancelled") or runtime.is_error(r, "timeout") then
        -- tell the agent (it should stop its tools) before it is stopped
        pcall(peer.notify, peer, "session/cancel", { sessionId = call.session })
      end
      error(r, 0)
    end
    return r
  end)
  for _, t in pairs(call.terminals) do close_terminal(t) end
  if peer then peer:close() elseif transport then transport:close() end
  if owned and sb then pcall(sb.destroy, sb) end
  local output = table.concat(call.text)
  if not ok then
    local e = res
    if type(e) == "table" and rawget(e, "messages") == nil then
      local fe = fail(tostring(e.kind or "acp"), tostring(e.message or e))
      for k, v in pairs(e) do if fe[k] == nil then fe[k] = v end end
      e = fe
    elseif type(e) ~= "table" then
      e = fail("acp", "ACP agent '" .. self.name .. "': " .. tostring(e))
    end
    error(e, 0)
  end
  local stop = type(res) == "table" and res.stopReason
  -- an agent may end a turn as cancelled by itself (Codex does when a
  -- permission is refused): a result, not lash's cancellation
  if stop == "cancelled" and output == "" then output = "(the agent ended its turn: cancelled)" end
  return {
    output = output, stop_reason = STOP[stop] or "complete", run_id = "acp_" .. run_counter,
    messages = { user, { role = "assistant", parts = { { type = "text", text = output } } } },
    usage = { requests = 0, input_tokens = 0, output_tokens = 0, cache_read_tokens = 0, cache_write_tokens = 0,
              tool_calls = call.tool_calls },
  }
end

--- Start the agent on `prompt` as a task of its own; its join gives what
-- run_inline returns.
function Agent:start(prompt, opts)
  return runtime.spawn(function() return self:run_inline(prompt, opts) end)
end

--- Run the agent and wait (driving the loop when called outside a task).
function Agent:run(prompt, opts)
  if runtime.current() then return self:run_inline(prompt, opts) end
  local t = self:start(prompt, opts)
  return t:join()
end

--- The agent as a tool a model can call (lash.subagent's as_tool: same
-- options).
function Agent:as_tool(opts)
  return require("lash.subagent").as_tool(self, opts or {}, 2)
end

return M
