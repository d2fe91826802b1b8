--- `lash mcp serve`'s engine: an MCP server exposing the sandbox
-- capability's four tools (run_command, read_file, write_file,
-- list_directory) with exactly the texts the capability gives a model, and
-- its default instructions as the server's `instructions`.
--
-- One session = one capability run: an owned sandbox is created at the
-- session's first tool call and destroyed when the session ends; with
-- `sandbox_id`/`attach_to` the session works in an existing sandbox and
-- leaves it be.
-- @module lash.mcp.server
local json = require "lash.json"
local tool = require "lash.tool"
local template = require "lash.template"
local capability = require "lash.capability"
local rpc = require "lash.mcp.rpc"
local client = require "lash.mcp.client"
local sandbox_cap = require "lash.capabilities.sandbox"

local M = {}

local runtime = require "lash.runtime"

local Session = {}
Session.__index = Session

--- A session over `transport`.
-- @tparam table opts `capability` (options for lash.sandbox_capability),
--   `name` (serverInfo name, "lash")
function M.session(transport, opts)
  local self = setmetatable({ transport = transport, opts = opts or {}, open = false }, Session)
  self.cap = sandbox_cap.new(self.opts.capability or {})
  self.ctx = { deps = {}, values = {}, run = { id = "mcp", step = 0, date = os.date("%Y-%m-%d") } }
  self.peer = rpc.new(transport, {
    name = "client",
    on_request = function(method, params) return self:handle(method, params or {}) end,
    on_notification = function(method, params)
      if method == "notifications/cancelled" and type(params) == "table" and params.requestId ~= nil then
        self.peer:cancel_incoming(params.requestId)
      end
    end,
    on_close = function() self:close() end,
  })
  return self
end

-- The capability's instructions, rendered as an agent run would.
local function instructions(self)
  local names = {}
  for _, t in ipairs(self.tools) do names[t.name] = t.name end
  local out = {}
  for i, piece in ipairs(self.inst:get_instructions()) do
    local text = piece
    if type(piece) == "function" then text = piece(self.ctx)
    elseif piece:find("{{", 1, true) then
      text = template.render(piece, capability.template_vars(self.ctx, names), "instructions[" .. i .. "]")
    end
    if text and text ~= "" then out[#out + 1] = text end
  end
  return #out > 0 and table.concat(out, "\n\n") or nil
end

-- The tools before the sandbox exists: the same definitions (so a client
-- that only lists them creates nothing), their handlers need it open.
function Session:prepare()
  if self.inst then return end
  self.inst = self.cap:for_run(self.ctx)
  self.toolset = self.inst:get_toolsets()[1]
  self:index(self.toolset:get_tools(self.ctx))
end

function Session:index(tools)
  self.tools = tools
  self.by_name = {}
  for _, t in ipairs(tools) do self.by_name[t.name] = t end
end

-- Create (or attach to) the session's sandbox: at the first call, or at
-- initialize when attaching (the attach note is part of the definitions).
function Session:start_sandbox()
  self:prepare()
  if self.open then return end
  self.toolset:open(self.ctx)
  self.open = true
  self:index(self.toolset:get_tools(self.ctx))
end

local function text_result(text, is_error)
  return { content = json.array { { type = "text", text = text } }, isError = is_error or false }
end

-- Is the session's own sandbox still there? (An attached one is the
-- pipeline's to keep; its loss is reported as the capability says.)
function Session:own_sandbox_ended()
  if not self.open or self.cap.claims then return false end
  local sb = self.inst and self.inst:sandbox()
  if not sb then return false end
  local ok, st = pcall(sb.poll, sb)
  if not (ok and type(st) == "table" and st.running) then return true end
  -- past (or within a second of) its end: the backend may not have reaped it yet
  return type(st.expires_at) == "number" and st.expires_at <= os.time() + 1
end

-- The capability's texts name its Lua option; a served session's lifetime
-- is `lash mcp serve --timeout`, and a new sandbox is made at the next call.
local function for_serve(text)
  return (text:gsub("It may have reached its sandbox_timeout of (%d+)s, or been destroyed%. Start a new run, or raise "
      .. "sandbox_timeout for longer work%.",
    "It may have reached its lifetime of %1s (lash mcp serve --timeout), or been destroyed. Call again: the "
      .. "session makes a fresh sandbox (files from before are gone); start lash mcp serve with a larger --timeout "
      .. "for longer work."))
end

-- A client that asked for progress (`_meta.progressToken`) gets a running
-- command's output as it arrives: one notifications/progress per chunk,
-- `progress` the bytes so far, `message` the text (the result is unchanged).
local function progress_to(self, cctx, params)
  local meta = params._meta
  local token = type(meta) == "table" and meta.progressToken or nil
  if not (type(token) == "string" or math.type(token) == "integer") then return end
  local sent = 0
  cctx.tool_call_id = "progress-" .. tostring(token)
  cctx.emit = function(ev)
    if ev.type ~= "tool_output_delta" then return end
    local text = ev.text
    if ev.dropped then text = string.format("[… %d bytes left out …]\n", ev.dropped) .. text end
    sent = sent + #ev.text + (ev.dropped or 0)
    self.peer:notify("notifications/progress", { progressToken = token, progress = sent, message = text })
  end
end

function Session:call(params)
  -- the session outlives its sandbox: one that reached its lifetime is made
  -- again for this call, and the answer says so
  local notice
  if self.by_name[params.name] and self:own_sandbox_ended() then
    pcall(self.toolset.close, self.toolset, self.ctx)
    self.open, self.inst = false, nil
    notice = string.format("[Note: this session's sandbox reached its lifetime of %ds (lash mcp serve --timeout) "
      .. "and a fresh one was made for this call: files and processes from before are gone.]\n",
      self.cap.opts.sandbox_timeout)
  end
  local res = self:call_tool(params)
  if res.isError and res.content[1] then res.content[1].text = for_serve(res.content[1].text) end
  if notice and res.content[1] then res.content[1].text = notice .. res.content[1].text end
  return res
end

function Session:call_tool(params)
  if self.by_name[params.name] and not self.open then
    local ok, err = pcall(self.start_sandbox, self)
    if not ok then
      if runtime.is_error(err, "cancelled") then error(err, 0) end
      return text_result("Could not start the sandbox: " .. tostring(type(err) == "table" and err.message or err), true)
    end
  end
  local t = self.by_name[params.name]
  if not t then
    local names = {}
    for _, x in ipairs(self.tools) do names[#names + 1] = x.name end
    return text_result("Unknown tool name: '" .. tostring(params.name) .. "'. Available tools: '"
      .. table.concat(names, "', '") .. "'", true)
  end
  local args, err = tool.prepare_args(t, params.arguments)
  if not args then return text_result(err, true) end
  local cctx = setmetatable({ tool_name = t.name, retry = 0 }, { __index = self.ctx })
  progress_to(self, cctx, params)
  local ok, status, content = pcall(tool.call, t, cctx, args)
  if not ok then
    if runtime.is_error(status, "cancelled") then error(status, 0) end
    return text_result(type(status) == "table" and tostring(status.message) or tostring(status), true)
  end
  if status == "retry" then return text_result(content, true) end
  return text_result(content, false)
end

function Session:handle(method, params)
  if method == "initialize" then
    local want = params.protocolVersion
    local v = client.supported(want) and want or client.LATEST
    if self.cap.claims then self:start_sandbox() else self:prepare() end
    self.initialized = true
    return {
      protocolVersion = v,
      capabilities = { tools = { listChanged = false } },
      serverInfo = { name = self.opts.name or "lash", title = "lash sandbox", version = runtime.version },
      instructions = instructions(self),
    }
  elseif method == "ping" then
    return {}
  elseif method == "tools/list" then
    if not self.initialized then error(rpc.error(rpc.INVALID_REQUEST, "initialize first"), 0) end
    local list = json.array()
    for i, t in ipairs(self.tools) do
      local d = t:definition()
      list[i] = { name = d.name, description = d.description, inputSchema = d.parameters }
    end
    return { tools = list }
  elseif method == "tools/call" then
    if not self.initialized then error(rpc.error(rpc.INVALID_REQUEST, "initialize first"), 0) end
    if type(params.name) ~= "string" then error(rpc.error(rpc.INVALID_PARAMS, "tools/call needs a tool name"), 0) end
    return self:call(params)
  elseif method == "logging/setLevel" then
    return {}
  elseif method == "resources/list" then
    return { resources = json.array() }
  elseif method == "prompts/list" then
    return { prompts = json.array() }
  end
  error(rpc.error(rpc.METHOD_NOT_FOUND, "Method not found: " .. tostring(method)), 0)
end

--- Serve until the client goes away; then the sandbox is released.
function Session:serve()
  self.peer:start()
  local ok, err = pcall(self.peer.reader.join, self.peer.reader)
  self:close()
  if not ok then error(err, 0) end
end

function Session:close()
  if self.closed then return end
  self.closed = true
  if self.toolset and self.open then pcall(self.toolset.close, self.toolset, self.ctx) end
  self.peer:close()
end

return M
