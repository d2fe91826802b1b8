--- `lash acp`'s engine: lash as an Agent Client Protocol agent, one
-- connection (an editor) with any number of sessions.
--
-- A session is one conversation with the spec's agent: its own sandbox
-- (kept across its turns, destroyed when it closes), its history (saved in
-- lash's sessions database under the ACP session id, so `session/load`
-- and `lash chat --resume` continue it), the MCP servers the client passed
-- (run as toolsets of every turn), a mode and a model. A turn
-- (`session/prompt`) is a run whose events stream as `session/update`
-- notifications; a tool call that needs approval becomes
-- `session/request_permission`; `session/cancel` cancels the run (its
-- sandbox commands are killed) and the prompt answers `cancelled`.
--
-- Modes: `ask` asks before every call that may change something (any tool
-- whose kind is not read, search or think); `auto` runs them freely (a
-- tool that requires approval itself still asks). "Always allow" answers
-- stop the asking for that tool for the rest of the session.
--
-- Every bad request gets a JSON-RPC error naming the field and the fix;
-- nothing a client sends can end the server but closing its stdin.
-- @module lash.acp.server
local json = require "lash.json"
local rpc = require "lash.mcp.rpc"
local protocol = require "lash.acp.protocol"
local runtime = require "lash.runtime"
local defaults = require "lash.defaults"

local M = {}

local CLIENT = { kind = "acp", peer = "ACP client", connection = "ACP connection", cancel = rpc.ACP.cancel,
                 batches = false, not_json = rpc.NOT_JSON }
M.CLIENT = CLIENT

M.MODES = {
  { id = "ask", name = "Ask", description = "Ask before running commands, changing files or calling tools "
    .. "that may change something" },
  { id = "auto", name = "Auto", description = "Run tools without asking (commands run in lash's sandbox); "
    .. "tools that require approval still ask" },
}
local MODE_IDS = { ask = true, auto = true }

local Server = {}
Server.__index = Server

local Session = {}
Session.__index = Session

--- A server over `transport`.
-- @tparam table opts `agent` (a lash.agent), `spec` (its path, saved with
--   each session), `store` (a lash.sessions store, or nil: sessions are
--   not saved and cannot be loaded), `mode` ("ask" or "auto"), `models`
--   (more model names a client may choose), `permission_timeout`,
--   `max_prompt_bytes`, `plan` (offer the update_plan tool, default true),
--   `context_window` (tokens: each model response then sends usage_update)
function M.new(transport, opts)
  local d = defaults.acp
  local self = setmetatable({
    agent = opts.agent, spec = opts.spec, store = opts.store, mode = opts.mode or d.mode,
    permission_timeout = opts.permission_timeout or d.permission_timeout,
    max_prompt_bytes = opts.max_prompt_bytes or d.max_prompt_bytes, plan = opts.plan ~= false,
    context_window = opts.context_window,
    sessions = {}, initialized = false, client_caps = {},
  }, Server)
  if not MODE_IDS[self.mode] then error("lash acp: mode must be ask or auto, got " .. tostring(self.mode), 2) end
  self.models = M.model_choices(opts.agent, opts.models)
  self.peer = rpc.new(transport, {
    name = "client", protocol = CLIENT,
    on_request = function(method, params) return self:handle(method, params) end,
    on_notification = function(method, params) self:notified(method, params) end,
  })
  return self
end

--- The models a session may switch between: the agent's own first, then
-- `extra` (model names), each once. Returns a list of {id, spec}.
function M.model_choices(agent, extra)
  local label = require("lash.agent").model_label
  local out, seen = {}, {}
  local function add(spec)
    if spec == nil then return end
    local id = label(spec)
    if id and not seen[id] then
      seen[id] = true
      out[#out + 1] = { id = id, spec = spec }
    end
  end
  add(agent.model)
  for _, m in ipairs(extra or {}) do add(m) end
  return out
end

--- Serve until the client closes the connection; then every session ends
-- (turns cancelled, sandboxes destroyed, MCP servers stopped).
function Server:serve()
  self.peer:start()
  local ok, err = pcall(self.peer.reader.join, self.peer.reader)
  self:close()
  if not ok then error(err, 0) end
end

function Server:close()
  if self.closed then return end
  self.closed = true
  for _, s in pairs(self.sessions) do s:close() end
  self.peer:close()
end

---------------------------------------------------------------------------
-- Dispatch

local METHODS = {}

function Server:handle(method, params)
  local fn = METHODS[method]
  if not fn then
    error(rpc.error(rpc.METHOD_NOT_FOUND, "Method not found: " .. tostring(method)
      .. " (lash acp speaks ACP v" .. protocol.VERSION .. ")"), 0)
  end
  if params == nil then params = {} end
  if type(params) ~= "table" or (next(params) ~= nil and params[1] ~= nil) then
    error(protocol.bad_params(method .. " takes an object"), 0)
  end
  if method ~= "initialize" and not self.initialized then
    error(rpc.error(rpc.INVALID_REQUEST, "Invalid Request: call initialize before " .. method), 0)
  end
  return fn(self, params)
end

function Server:notified(method, params)
  if type(params) ~= "table" then return end
  if method == "session/cancel" then
    local s = self.sessions[params.sessionId]
    if s then s:cancel() end
  elseif method == "$/cancel_request" and params.requestId ~= nil then
    self.peer:cancel_incoming(params.requestId)
  end
end

function Server:session_of(params)
  local id = protocol.field(params, "sessionId", "string")
  local s = self.sessions[id]
  if not s then
    error(rpc.error(protocol.RESOURCE_NOT_FOUND, "Resource not found: no session '" .. id
      .. "' on this connection (session/new or session/load opens one)"), 0)
  end
  return s
end

function Server:update(session_id, update)
  local ok, err = pcall(self.peer.notify, self.peer, "session/update", { sessionId = session_id, update = update })
  if not ok then runtime.log("debug", "acp: session/update not sent: " .. tostring(err)) end
end

METHODS["initialize"] = function(self, params)
  protocol.field(params, "protocolVersion", "integer")
  local caps = type(params.clientCapabilities) == "table" and params.clientCapabilities or {}
  local fs = type(caps.fs) == "table" and caps.fs or {}
  self.client_caps = { read = fs.readTextFile == true, write = fs.writeTextFile == true,
                       terminal = caps.terminal == true }
  self.initialized = true
  return {
    protocolVersion = protocol.VERSION,
    agentCapabilities = {
      loadSession = self.store ~= nil,
      promptCapabilities = { image = true, audio = false, embeddedContext = true },
      mcpCapabilities = { http = true, sse = false },
      sessionCapabilities = { close = {} },
    },
    authMethods = json.array(),
    agentInfo = { name = "lash", title = "lash", version = tostring(runtime.version) },
  }
end

METHODS["authenticate"] = function()
  -- lash offers no auth methods: provider keys come from the environment
  return {}
end

---------------------------------------------------------------------------
-- Sessions

-- The MCP servers of session/new|load as toolsets (prefixed by name).
local function mcp_toolsets(list)
  local mcp = require "lash.mcp"
  local toolset = require "lash.toolset"
  local tool = require "lash.tool"
  local out = {}
  for i, s in ipairs(list or {}) do
    local where = "mcpServers[" .. i .. "]."
    if type(s) ~= "table" then error(protocol.bad_params("mcpServers[" .. i .. "] must be an object"), 0) end
    local name = protocol.field(s, "name", "string", false, where)
    local prefix = name:gsub("[^%w_-]", "_")
    if not tool.valid_name(prefix) then prefix = "mcp" .. i end
    local ts
    if s.type == "http" then
      local headers = {}
      for j, h in ipairs(protocol.field(s, "headers", "array", true, where) or {}) do
        if type(h) ~= "table" or type(h.name) ~= "string" or type(h.value) ~= "string" then
          error(protocol.bad_params(where .. "headers[" .. j .. "] must be {name, value} strings"), 0)
        end
        headers[h.name] = h.value
      end
      ts = mcp.http { name = name, url = protocol.field(s, "url", "string", false, where), headers = headers }
    elseif s.type == "sse" then
      error(protocol.bad_params(where .. "type: lash connects to MCP servers over stdio and Streamable HTTP, "
        .. "not SSE (mcpCapabilities.sse is false); give the server's HTTP endpoint"), 0)
    elseif s.type == nil or s.type == "stdio" then
      local env = {}
      for j, e in ipairs(protocol.field(s, "env", "array", true, where) or {}) do
        if type(e) ~= "table" or type(e.name) ~= "string" or type(e.value) ~= "string" then
          error(protocol.bad_params(where .. "env[" .. j .. "] must be {name, value} strings"), 0)
        end
        env[e.name] = e.value
      end
      local args = protocol.field(s, "args", "array", true, where) or {}
      for j, a in ipairs(args) do
        if type(a) ~= "string" then error(protocol.bad_params(where .. "args[" .. j .. "] must be a string"), 0) end
      end
      ts = mcp.stdio { name = name, command = protocol.field(s, "command", "string", false, where), args = args,
                       env = env }
    else
      error(protocol.bad_params(where .. "type must be stdio, http or sse, got " .. tostring(s.type)), 0)
    end
    out[#out + 1] = toolset.prefix(ts, prefix)
  end
  return out
end

function Server:config_options(s) -- luacheck: no self
  local modes, models = {}, {}
  for i, m in ipairs(M.MODES) do modes[i] = { value = m.id, name = m.name, description = m.description } end
  for i, m in ipairs(self.models) do models[i] = { value = m.id, name = m.id } end
  return {
    { id = "mode", name = "Mode", category = "mode", type = "select", currentValue = s.mode, options = modes },
    { id = "model", name = "Model", category = "model", type = "select", currentValue = s.model.id, options = models },
  }
end

function Server:mode_state(s) -- luacheck: no self
  local modes = {}
  for i, m in ipairs(M.MODES) do modes[i] = { id = m.id, name = m.name, description = m.description } end
  return { currentModeId = s.mode, availableModes = modes }
end

-- Open a session: fresh (rec = nil: a new saved session) or loaded.
function Server:open_session(params, rec, history)
  local cwd = protocol.field(params, "cwd", "string")
  if cwd:sub(1, 1) ~= "/" then error(protocol.bad_params("cwd must be an absolute path, got '" .. cwd .. "'"), 0) end
  local toolsets = mcp_toolsets(protocol.field(params, "mcpServers", "array", true))
  if self.plan then table.insert(toolsets, 1, require("lash.acp.plan").toolset()) end
  if not rec and self.store then
    local ok, r = pcall(self.store.start, self.store, { kind = "acp", spec = self.spec, agent = self.agent.name,
                                                       model = self.models[1] and self.models[1].id })
    if ok then rec = r else runtime.log("warn", "acp: this session is not saved: " .. tostring(r.message or r)) end
  end
  local id = rec and rec.id
    or ("acp-" .. runtime.sys.random(6):gsub(".", function(c) return string.format("%02x", c:byte()) end))
  local s = setmetatable({
    server = self, id = id, cwd = cwd, toolsets = toolsets, rec = rec, history = history or {},
    mode = self.mode, model = self.models[1], always = {}, waiters = {},
    conv = require("lash.cli.agents").conversation(self.agent),
  }, Session)
  self.sessions[id] = s
  return s
end

METHODS["session/new"] = function(self, params)
  local s = self:open_session(params)
  return { sessionId = s.id, modes = self:mode_state(s), configOptions = self:config_options(s) }
end

-- Replay a saved history as session/update notifications.
function Server:replay(s)
  local results = {}
  for _, m in ipairs(s.history) do
    for _, p in ipairs(m.parts or {}) do
      if p.type == "tool_result" then results[p.id] = p end
    end
  end
  for _, m in ipairs(s.history) do
    if m.role == "user" then
      for _, b in ipairs(protocol.user_blocks(m)) do
        self:update(s.id, { sessionUpdate = "user_message_chunk", content = b })
      end
    elseif m.role == "assistant" then
      for _, p in ipairs(m.parts or {}) do
        if p.type == "text" and p.text ~= "" then
          self:update(s.id, { sessionUpdate = "agent_message_chunk", content = { type = "text", text = p.text } })
        elseif (p.type == "thinking" or p.type == "reasoning") and type(p.text) == "string" and p.text ~= "" then
          self:update(s.id, { sessionUpdate = "agent_thought_chunk", content = { type = "text", text = p.text } })
        elseif p.type == "tool_call" then
          local r = results[p.id]
          local args = p.args or p.args_json
          self:update(s.id, {
            sessionUpdate = "tool_call", toolCallId = p.id, title = protocol.tool_title(p.name, args),
            kind = protocol.tool_kind(p.name), status = (r and r.status == "ok") and "completed" or "failed",
            rawInput = args, content = r and protocol.text_content(tostring(r.content)) or nil,
          })
        end
      end
    end
  end
end

METHODS["session/load"] = function(self, params)
  local id = protocol.field(params, "sessionId", "string")
  if not self.store then
    error(rpc.error(rpc.INVALID_REQUEST, "Invalid Request: this lash acp saves no sessions (--no-save or "
      .. "LASH_NO_SAVE), so it cannot load one"), 0)
  end
  if self.sessions[id] then
    error(rpc.error(rpc.INVALID_REQUEST, "Invalid Request: session '" .. id .. "' is already open on this "
      .. "connection"), 0)
  end
  local rec, err = self.store:resume(id)
  if not rec then
    error(rpc.error(protocol.RESOURCE_NOT_FOUND, "Resource not found: no saved session '" .. id .. "' ("
      .. tostring(err) .. ")"), 0)
  end
  local history = json.copy(rec.history)
  local sessions = require "lash.sessions"
  local dangling = sessions.dangling_calls(history)
  if #dangling > 0 then history[#history + 1] = sessions.interrupted_results(dangling) end
  local s = self:open_session(params, rec, history)
  -- resume may have found the id by a prefix: the client's id is the one it uses
  if s.id ~= id then
    self.sessions[s.id] = nil
    s.id = id
    self.sessions[id] = s
  end
  self:replay(s)
  return { modes = self:mode_state(s), configOptions = self:config_options(s) }
end

METHODS["session/close"] = function(self, params)
  local s = self:session_of(params)
  s:close()
  self.sessions[s.id] = nil
  return {}
end

function Server:set_mode(s, mode)
  if not MODE_IDS[mode] then
    error(protocol.bad_params("no mode '" .. tostring(mode) .. "' (lash's modes: ask, auto)"), 0)
  end
  s.mode = mode
  self:update(s.id, { sessionUpdate = "current_mode_update", currentModeId = mode })
end

METHODS["session/set_mode"] = function(self, params)
  local s = self:session_of(params)
  self:set_mode(s, protocol.field(params, "modeId", "string"))
  self:update(s.id, { sessionUpdate = "config_option_update", configOptions = self:config_options(s) })
  return {}
end

METHODS["session/set_config_option"] = function(self, params)
  local s = self:session_of(params)
  local id = protocol.field(params, "configId", "string")
  local value = params.value
  if id == "mode" then
    self:set_mode(s, value)
  elseif id == "model" then
    local found
    for _, m in ipairs(self.models) do if m.id == value then found = m end end
    if not found then
      local names = {}
      for i, m in ipairs(self.models) do names[i] = m.id end
      error(protocol.bad_params("no model '" .. tostring(value) .. "' (this lash acp offers: "
        .. table.concat(names, ", ") .. "; more with --model)"), 0)
    end
    s.model = found
  else
    error(protocol.bad_params("no config option '" .. id .. "' (lash's: mode, model)"), 0)
  end
  return { configOptions = self:config_options(s) }
end

METHODS["session/prompt"] = function(self, params)
  local s = self:session_of(params)
  local prompt, size = protocol.prompt_parts(params.prompt)
  if size > self.max_prompt_bytes then
    error(protocol.bad_params(string.format("the prompt is %d bytes; this lash acp takes at most %d "
      .. "(--max-prompt-bytes)", size, self.max_prompt_bytes)), 0)
  end
  return s:turn(prompt)
end

---------------------------------------------------------------------------
-- The editor's files and terminals (lash.acp.editor_tools): a turn's host
-- handle, so the tools reach this session's client

local Bridge = {}
Bridge.__index = Bridge

local function uses_editor_tools(agent)
  for _, c in ipairs(agent.capabilities or {}) do
    if type(c) == "table" and rawget(c, "acp_editor") then return true end
  end
  return false
end

--- The bridge for a session's turn, or nil when its agent has no EditorTools.
function Server:bridge_for(s)
  if not uses_editor_tools(self.agent) then return nil end
  return setmetatable({ editor_files = true, session = s, server = self }, Bridge)
end

function Bridge:path(p)
  if p:sub(1, 1) == "/" then return p end
  return (self.session.cwd:gsub("/$", "")) .. "/" .. p:gsub("^%./", "")
end

function Bridge:need(cap, what)
  if not self.server.client_caps[cap] then
    error(runtime.error("retry", "the editor does not offer " .. what .. " (its ACP client capabilities lack it); "
      .. "serve a spec with lash's sandbox instead"), 0)
  end
end

-- A client's JSON-RPC error as a tool failure the model reads.
function Bridge:ask(method, params, opts)
  local ok, res = pcall(self.server.peer.request, self.server.peer, method, params, opts)
  if ok then return res end
  if runtime.is_error(res, "cancelled") or runtime.is_error(res, "timeout") then error(res, 0) end
  error(runtime.error("retry", method .. ": " .. tostring(type(res) == "table" and res.message or res)), 0)
end

function Bridge:read_text_file(path, line, limit)
  self:need("read", "reading files")
  local r = self:ask("fs/read_text_file", { sessionId = self.session.id, path = self:path(path), line = line,
                                            limit = limit })
  if type(r) ~= "table" or type(r.content) ~= "string" then
    error(runtime.error("retry", "fs/read_text_file: the editor answered without content"), 0)
  end
  return r.content
end

function Bridge:write_text_file(path, content)
  self:need("write", "writing files")
  self:ask("fs/write_text_file", { sessionId = self.session.id, path = self:path(path), content = content })
end

-- Run `command` in an editor terminal shown in tool call `call_id`; returns
-- {output, truncated, exit_code, signal, timed_out}.
function Bridge:run(call_id, command, timeout)
  self:need("terminal", "terminals")
  local s = self.session
  local t = self:ask("terminal/create", { sessionId = s.id, command = "/bin/sh", args = { "-c", command },
                                          cwd = s.cwd, outputByteLimit = 1024 * 1024 })
  local tid = type(t) == "table" and t.terminalId
  if type(tid) ~= "string" then error(runtime.error("retry", "terminal/create: the editor gave no terminalId"), 0) end
  local ids = { sessionId = s.id, terminalId = tid }
  if call_id then
    s.terminal_of[call_id] = tid
    s:update { sessionUpdate = "tool_call_update", toolCallId = call_id,
               content = { { type = "terminal", terminalId = tid } } }
  end
  local ok, res = pcall(function()
    local timed_out = false
    local wok, st = pcall(self.ask, self, "terminal/wait_for_exit", ids, { timeout = timeout })
    if not wok then
      if not runtime.is_error(st, "timeout") then error(st, 0) end
      timed_out = true
      self:ask("terminal/kill", ids)
    end
    local out = self:ask("terminal/output", ids)
    out = type(out) == "table" and out or {}
    st = type(st) == "table" and st or (type(out.exitStatus) == "table" and out.exitStatus or {})
    return { output = type(out.output) == "string" and out.output or "", truncated = out.truncated == true,
             exit_code = math.tointeger(st.exitCode), signal = type(st.signal) == "string" and st.signal or nil,
             timed_out = timed_out }
  end)
  if not ok then
    -- cancelled or failed: the command must not outlive its call
    pcall(self.server.peer.request, self.server.peer, "terminal/kill", ids, { timeout = 5 })
  end
  pcall(self.server.peer.request, self.server.peer, "terminal/release", ids, { timeout = 5 })
  if not ok then error(res, 0) end
  return res
end

---------------------------------------------------------------------------
-- A turn

function Session:update(u)
  self.server:update(self.id, u)
end

-- Where the paths of the agent's file tools live, for locations and diffs.
function Session:root()
  if self.bridge and self.bridge.editor_files then return self.cwd end
  return "/workspace"
end

-- The text a file has before a call writes it, when it can be read.
function Session:old_text(path)
  if self.bridge and self.bridge.editor_files then
    local ok, res = pcall(self.bridge.read_text_file, self.bridge, path)
    return ok and res or nil
  end
  local sb = self.conv.sessions and self.conv.sessions[1]
  if not sb then return nil end
  local ok, res = pcall(sb.read_file, sb, path, { max_bytes = 1 << 20 })
  if ok and type(res) == "string" and utf8.len(res) then return res end
  return nil
end

-- A diff for an edit call, or nil.
function Session:diff_of(name, args)
  if protocol.tool_kind(name) ~= "edit" or type(args) ~= "table" or type(args.path) ~= "string" then return nil end
  local loc = protocol.tool_locations(args, self:root())[1]
  if type(args.old_string) == "string" and type(args.new_string) == "string" then
    return { { type = "diff", path = loc.path, oldText = args.old_string, newText = args.new_string } }
  end
  if type(args.content) == "string" then
    return { { type = "diff", path = loc.path, oldText = self:old_text(args.path), newText = args.content } }
  end
  return nil
end

-- A running command's output shown under its tool call: ACP's content of a
-- tool_call_update replaces the call's, so each update carries the tail so
-- far, at most this many bytes.
local LIVE_TAIL = 8192

function Session:live_output(ev)
  local call = self.calls[ev.id]
  if not call or self.terminal_of[ev.id] or type(ev.text) ~= "string" then return end
  local gap = ev.dropped and string.format("[… %d bytes left out …]\n", ev.dropped) or ""
  local tail = (call.live or "") .. gap .. ev.text
  if #tail > LIVE_TAIL then tail = tail:sub(-LIVE_TAIL):gsub("^[\128-\191]+", "") end  -- whole characters
  call.live = tail
  self:update { sessionUpdate = "tool_call_update", toolCallId = ev.id, status = "in_progress",
                content = protocol.text_content(tail) }
end

function Session:on_event(ev)
  local t = ev.type
  if ev.path then return end -- a sub-agent's: its parent's tool call stands for it
  if t == "text_delta" or t == "text" then
    if ev.text ~= "" then
      self:update { sessionUpdate = "agent_message_chunk", content = { type = "text", text = ev.text } }
    end
  elseif t == "thinking_delta" or t == "thinking" then
    if ev.text ~= "" then
      self:update { sessionUpdate = "agent_thought_chunk", content = { type = "text", text = ev.text } }
    end
  elseif t == "tool_call" then
    local args = ev.args
    local diff = self:diff_of(ev.name, args)
    self.calls[ev.id] = { name = ev.name, args = args, diff = diff }
    self:update {
      sessionUpdate = "tool_call", toolCallId = ev.id, title = protocol.tool_title(ev.name, args),
      kind = protocol.tool_kind(ev.name), status = "pending", rawInput = args,
      locations = protocol.tool_locations(args, self:root()), content = diff,
    }
  elseif t == "tool_output_delta" then
    self:live_output(ev)
  elseif t == "tool_result" then
    local status = ev.status == "ok" and "completed" or "failed"
    local u = { sessionUpdate = "tool_call_update", toolCallId = ev.id, status = status,
                rawOutput = { status = ev.status } }
    local call = self.calls[ev.id]
    if self.terminal_of[ev.id] then
      u.content = { { type = "terminal", terminalId = self.terminal_of[ev.id] } }
    elseif call and call.diff and ev.status == "ok" then
      u.content = call.diff -- the change, as it was shown before it ran
    else
      u.content = protocol.text_content(tostring(ev.content or ""))
    end
    self:update(u)
  elseif t == "usage" and self.server.context_window and type(ev.usage) == "table" then
    -- what the last request put in the context: its input (cached or not) and its answer
    local u, used = ev.usage, 0
    for _, k in ipairs { "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens" } do
      used = used + (math.tointeger(u[k]) or 0)
    end
    self:update { sessionUpdate = "usage_update", used = used, size = self.server.context_window }
  elseif t == "plan" then
    self:update { sessionUpdate = "plan", entries = protocol.plan_entries(ev.entries) }
  end
end

-- Which calls need approval: the mode's rule, the tool's own, and the
-- session's "always allow" answers.
function Session:needs_approval(call, tool_says)
  local need = tool_says
  if self.always[call.name] then
    need = false
  elseif self.mode == "ask" and not protocol.READ_ONLY[protocol.tool_kind(call.name)] then
    need = true
  end
  if not need then self:update { sessionUpdate = "tool_call_update", toolCallId = call.id, status = "in_progress" } end
  return need
end

local OPTIONS = {
  { optionId = "allow_once", name = "Allow", kind = "allow_once" },
  { optionId = "allow_always", name = "Always allow", kind = "allow_always" },
  { optionId = "reject_once", name = "Reject", kind = "reject_once" },
}

-- One question at a time per session, in the order the calls asked (a
-- turn's calls run concurrently; an editor shows one dialog).
function Session:one_at_a_time(fn)
  while self.asking do
    local f = runtime.future()
    self.waiters[#self.waiters + 1] = f
    local ok, err = pcall(f.wait, f)
    if not ok then
      for i, w in ipairs(self.waiters) do if w == f then table.remove(self.waiters, i) break end end
      error(err, 0)
    end
  end
  self.asking = true
  local ok, res = pcall(fn)
  self.asking = false
  local nextf = table.remove(self.waiters, 1)
  if nextf then nextf:set(true) end
  if not ok then error(res, 0) end
  return res
end

-- A call that needs approval: ask the client.
function Session:approve(call)
  if call.kind == "elicitation" then
    -- ACP's elicitation is not in what lash offers yet: MCP servers asking
    -- the user get a decline
    return false
  end
  return self:one_at_a_time(function() return self:ask(call) end)
end

function Session:ask(call)
  local server = self.server
  -- an earlier answer this turn may have been "always allow" for this tool
  if self.always[call.name] then
    self:update { sessionUpdate = "tool_call_update", toolCallId = call.id, status = "in_progress" }
    return true
  end
  local options = {}
  for i, o in ipairs(OPTIONS) do
    options[i] = { optionId = o.optionId, kind = o.kind,
                   name = o.kind == "allow_always" and ("Always allow " .. call.name) or o.name }
  end
  local tc = { toolCallId = call.id, title = protocol.tool_title(call.name, call.args),
               kind = protocol.tool_kind(call.name), status = "pending", rawInput = call.args,
               locations = protocol.tool_locations(call.args, self:root()),
               content = self:diff_of(call.name, call.args) }
  local ok, res = pcall(server.peer.request, server.peer, "session/request_permission",
                        { sessionId = self.id, toolCall = tc, options = options },
                        { timeout = server.permission_timeout })
  if not ok then
    if runtime.is_error(res, "cancelled") then error(res, 0) end
    if runtime.is_error(res, "timeout") then
      runtime.log("warn", "acp: no answer to the permission request for " .. call.name .. " within "
        .. server.permission_timeout .. " s; the call is denied")
      return string.format("No answer to the permission request within %g s: the call was not run.",
                           server.permission_timeout)
    end
    return "The permission request failed (" .. tostring(type(res) == "table" and res.message or res)
      .. "): the call was not run."
  end
  local outcome = type(res) == "table" and type(res.outcome) == "table" and res.outcome or {}
  if outcome.outcome == "cancelled" then
    error(runtime.error("cancelled", "the client cancelled the permission request (the turn is cancelled)"), 0)
  end
  local chosen = outcome.outcome == "selected" and outcome.optionId
  if chosen == "allow_once" or chosen == "allow_always" then
    if chosen == "allow_always" then self.always[call.name] = true end
    self:update { sessionUpdate = "tool_call_update", toolCallId = call.id, status = "in_progress" }
    return true
  end
  if chosen == "reject_once" then return "The user rejected this tool call." end
  runtime.log("warn", "acp: the permission answer names no option lash offered (" .. tostring(json.try_encode(res))
    .. "); the call is denied")
  return "The permission answer was not one of the options offered: the call was not run."
end

function Session:record(msg)
  if self.rec then
    local ok, err = self.rec:record(msg)
    if not ok and not self.record_warned then
      self.record_warned = true
      runtime.log("warn", "acp: cannot save to session " .. self.id .. ": " .. tostring(err and err.message or err))
    end
  end
end

-- Run one turn; returns the PromptResponse.
function Session:turn(prompt)
  if self.task then
    error(rpc.error(rpc.INVALID_REQUEST, "Invalid Request: a prompt is already running in session " .. self.id
      .. " (send session/cancel, or wait for its answer)"), 0)
  end
  local agent, renewed = self.conv:agent()
  if not agent then error(runtime.error("sandbox", renewed), 0) end
  self.calls, self.terminal_of = {}, {}
  local bridge = self.server.bridge_for and self.server:bridge_for(self) or nil
  self.bridge = bridge
  local label = self.model.id
  if self.rec then
    local ok, err = pcall(self.rec.begin, self.rec, { prompt = require("lash.models.parts").summary(prompt),
                                                      model = label })
    if not ok then
      runtime.log("warn", "acp: this session is no longer saved: " .. tostring(err and err.message or err))
      self.rec = nil
    end
  end
  local opts = {
    history = self.history, model = self.model.spec, stream = true, toolsets = self.toolsets, host = bridge,
    on_event = function(ev) self:on_event(ev) end,
    on_message = function(msg) self:record(msg) end,
    approve = function(_, call) return self:approve(call) end,
    needs_approval = function(_, call, tool_says) return self:needs_approval(call, tool_says) end,
  }
  local task = agent:start(prompt, opts)
  self.task = task
  local ok, res = pcall(task.join, task)
  if not ok and runtime.is_error(res, "cancelled") and not task:done() then
    -- our handler was cancelled ($/cancel_request, the connection closing): so is the run
    task:cancel()
    pcall(task.join, task)
  end
  self.task = nil
  if ok then
    self.history = res.messages
    if self.rec then
      self.rec:close_run { status = res.stop_reason, stop_reason = res.stop_reason, usage = res.usage }
    end
    return { stopReason = protocol.stop_reason(res) }
  end
  local e = res
  local cancelled = runtime.is_error(e, "cancelled")
  local got = type(e) == "table" and rawget(e, "messages")
  if type(got) == "table" then
    local sessions = require "lash.sessions"
    local dangling = sessions.dangling_calls(got)
    if #dangling > 0 then
      local closing = sessions.interrupted_results(dangling)
      got[#got + 1] = closing
      self:record(closing)
      for _, c in ipairs(dangling) do
        self:update { sessionUpdate = "tool_call_update", toolCallId = c.id, status = "failed" }
      end
    end
    self.history = got
  end
  if self.rec then
    self.rec:close_run { status = cancelled and "cancelled" or "error",
                         error_kind = type(e) == "table" and tostring(e.kind) or "error",
                         error_message = type(e) == "table" and tostring(e.message) or tostring(e) }
  end
  if cancelled then return { stopReason = "cancelled" } end
  if runtime.is_error(e, "limit") and type(e) == "table" and e.limit == "max_steps" then
    return { stopReason = "max_turn_requests" }
  end
  local kind = type(e) == "table" and tostring(e.kind) or "error"
  local message = type(e) == "table" and tostring(e.message) or tostring(e)
  error(rpc.error(rpc.INTERNAL_ERROR, kind .. ": " .. message, { kind = kind }), 0)
end

function Session:cancel()
  if self.task then self.task:cancel() end
end

function Session:close()
  if self.closed then return end
  self.closed = true
  if self.task then
    self.task:cancel()
    pcall(self.task.join, self.task)
  end
  self.conv:close()
end

return M
