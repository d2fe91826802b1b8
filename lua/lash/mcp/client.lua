--- An MCP client session: the initialize handshake (protocol 2025-11-25,
-- negotiating down to 2025-06-18 and 2025-03-26), tools/list with
-- pagination, tools/call with progress and timeouts, ping, and the
-- server's own requests and notifications (elicitation, sampling, roots,
-- logging, list changes).
-- @module lash.mcp.client
local json = require "lash.json"
local rpc = require "lash.mcp.rpc"

local M = {}

local runtime = require "lash.runtime"

M.LATEST = "2025-11-25"
M.SUPPORTED = { "2025-11-25", "2025-06-18", "2025-03-26" }

local function supported(v)
  for _, s in ipairs(M.SUPPORTED) do
    if s == v then return true end
  end
  return false
end
M.supported = supported

-- MCP (syslog) levels to lash.log's.
local LOG_LEVEL = { debug = "debug", info = "info", notice = "info", warning = "warn", error = "error",
                    critical = "error", alert = "error", emergency = "error" }

local Client = {}
Client.__index = Client
M.Client = Client

local function on_request(self, method, params, msg)
  if method == "ping" then return {} end
  if method == "elicitation/create" then
    if not self.opts.on_elicit then
      error(rpc.error(rpc.METHOD_NOT_FOUND, "this client does not support elicitation"), 0)
    end
    return self.opts.on_elicit(params or {}, msg)
  end
  if method == "sampling/createMessage" then
    if not self.opts.on_sampling then
      error(rpc.error(rpc.METHOD_NOT_FOUND, "sampling is off for this client (lash turns it on only with "
        .. "sampling = ...)"), 0)
    end
    return self.opts.on_sampling(params or {}, msg)
  end
  if method == "roots/list" then
    local roots = json.array()
    for i, r in ipairs(self.opts.roots or {}) do roots[i] = r end
    return { roots = roots }
  end
  error(rpc.error(rpc.METHOD_NOT_FOUND, "Method not found: " .. tostring(method)), 0)
end

local function on_notification(self, method, params)
  params = type(params) == "table" and params or {}
  if method == "notifications/progress" then
    local cb = self.progress[params.progressToken]
    if cb then cb(params) end
  elseif method == "notifications/message" then
    local level = LOG_LEVEL[params.level] or "info"
    local data = params.data
    if type(data) ~= "string" then data = json.try_encode(data) or tostring(data) end
    local from = params.logger and (self.name .. "/" .. tostring(params.logger)) or self.name
    if self.opts.on_log then self.opts.on_log(params)
    else runtime.log(level, "mcp " .. from .. ": " .. data) end
  elseif method == "notifications/tools/list_changed" then
    self.tools_changed = true
    if self.opts.on_tools_changed then self.opts.on_tools_changed() end
  elseif method == "notifications/cancelled" then
    if params.requestId ~= nil then self.peer:cancel_incoming(params.requestId) end
  end
end

--- Connect over `transport` and run the initialize handshake.
-- @tparam table transport see lash.mcp.rpc
-- @tparam table opts `name`, `timeout` (seconds for each request, default
--   none for calls, 30 for initialize), `on_elicit(params)`,
--   `on_sampling(params)`, `roots`, `on_log(params)`, `on_tools_changed()`,
--   `protocol_version` (to ask for an older revision), `client_info`
-- @treturn Client
function M.connect(transport, opts)
  opts = opts or {}
  local self = setmetatable({ opts = opts, name = opts.name or "mcp", progress = {}, next_token = 0,
                              tools_changed = false, transport = transport }, Client)
  self.peer = rpc.new(transport, {
    name = self.name,
    on_request = function(method, params, msg) return on_request(self, method, params, msg) end,
    on_notification = function(method, params) return on_notification(self, method, params) end,
  })
  if transport.attach_peer then transport:attach_peer(self.peer) end
  self.peer:start()
  local ok, err = pcall(function()
    local caps = {}
    if opts.on_elicit then caps.elicitation = { form = {} } end
    if opts.on_sampling then caps.sampling = {} end
    if opts.roots then caps.roots = { listChanged = false } end
    local want = opts.protocol_version or M.LATEST
    local res = self.peer:request("initialize", {
      protocolVersion = want, capabilities = caps,
      clientInfo = opts.client_info or { name = "lash", version = runtime.version },
    }, { timeout = opts.init_timeout or 30 })
    if type(res) ~= "table" or type(res.protocolVersion) ~= "string" then
      error(runtime.error("mcp", "MCP server '" .. self.name .. "' answered initialize without a protocolVersion"), 0)
    end
    if not supported(res.protocolVersion) then
      error(runtime.error("mcp", "MCP server '" .. self.name .. "' speaks protocol " .. res.protocolVersion
        .. "; lash speaks " .. table.concat(M.SUPPORTED, ", ") .. ". Upgrade the server (or lash)."), 0)
    end
    self.protocol_version = res.protocolVersion
    self.server_info = res.serverInfo or {}
    self.capabilities = type(res.capabilities) == "table" and res.capabilities or {}
    self.instructions = type(res.instructions) == "string" and res.instructions or nil
    if transport.set_protocol_version then transport:set_protocol_version(res.protocolVersion) end
    self.peer:notify("notifications/initialized")
  end)
  if not ok then
    self.peer:close()
    error(err, 0)
  end
  return self
end

--- Every tool of the server (following `nextCursor` pages).
-- @treturn table list of MCP tool definitions
function Client:list_tools()
  local out, cursor, pages = {}, nil, 0
  repeat
    local res = self.peer:request("tools/list", cursor and { cursor = cursor } or nil,
                                  { timeout = self.opts.timeout or 60 })
    pages = pages + 1
    for _, t in ipairs(type(res) == "table" and res.tools or {}) do out[#out + 1] = t end
    cursor = type(res) == "table" and type(res.nextCursor) == "string" and res.nextCursor or nil
    if pages > 1000 then
      error(runtime.error("mcp", "MCP server '" .. self.name .. "' paginated tools/list past 1000 pages"), 0)
    end
  until not cursor
  self.tools_changed = false
  return out
end

--- Call a tool.
-- @tparam string name
-- @tparam table args
-- @tparam[opt] table opts `timeout` (seconds), `on_progress(params)`
-- @treturn table the CallToolResult
function Client:call_tool(name, args, opts)
  opts = opts or {}
  local params = { name = name, arguments = args or {} }
  local token
  if opts.on_progress then
    self.next_token = self.next_token + 1
    token = "lash-" .. self.next_token
    params._meta = { progressToken = token }
    self.progress[token] = opts.on_progress
  end
  local ok, res = pcall(self.peer.request, self.peer, "tools/call", params,
                        { timeout = opts.timeout or self.opts.timeout })
  if token then self.progress[token] = nil end
  if not ok then error(res, 0) end
  if type(res) ~= "table" then
    error(runtime.error("mcp", "MCP server '" .. self.name .. "' answered tools/call with a "
      .. type(res) .. ", not a result object"), 0)
  end
  return res
end

function Client:ping()
  return self.peer:request("ping", nil, { timeout = self.opts.timeout or 30 })
end

--- Send `logging/setLevel` (when the server has the logging capability).
function Client:set_log_level(level)
  if self.capabilities.logging then
    self.peer:request("logging/setLevel", { level = level }, { timeout = 30 })
  end
end

function Client:close()
  self.peer:close()
end

return M
