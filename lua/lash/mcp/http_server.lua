--- `lash mcp serve --http PORT`: the MCP Streamable HTTP server side, on
-- 127.0.0.1, over lash.net. One endpoint (`/mcp`, and `/`): POST carries
-- one JSON-RPC message (or a batch); requests are answered with
-- `application/json`, notifications and responses with 202. `initialize`
-- starts a session (`Mcp-Session-Id`, a random id) with its own sandbox;
-- DELETE ends it (the sandbox is destroyed). GET is 405 (lash's tools send
-- no server-initiated messages).
--
-- Against DNS rebinding, a request whose `Origin` is not a loopback origin
-- is refused (403), and so is one whose `Host` is not a loopback name; with
-- a token, every request needs `Authorization: Bearer TOKEN` (401
-- otherwise).
-- @module lash.mcp.http_server
local json = require "lash.json"
local rpc = require "lash.mcp.rpc"

local M = {}

local runtime = require "lash.runtime"

M.MAX_SESSIONS = 64
M.IDLE_TIMEOUT = 1800   -- seconds: a session nobody used for this long ends
local MAX_HEADER = 64 * 1024
local MAX_BODY = 16 * 1024 * 1024

local REASON = { [200] = "OK", [202] = "Accepted", [204] = "No Content", [400] = "Bad Request",
                 [401] = "Unauthorized", [403] = "Forbidden", [404] = "Not Found",
                 [405] = "Method Not Allowed", [406] = "Not Acceptable", [413] = "Payload Too Large",
                 [415] = "Unsupported Media Type", [500] = "Internal Server Error",
                 [503] = "Service Unavailable" }

local function random_id()
  local f = io.open("/dev/urandom", "rb")
  local bytes = f and f:read(16) or tostring(os.time()) .. tostring(math.random())
  if f then f:close() end
  return (bytes:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function respond(conn, status, headers, body)
  body = body or ""
  local lines = { "HTTP/1.1 " .. status .. " " .. (REASON[status] or "Status") }
  headers = headers or {}
  headers["Content-Length"] = tostring(#body)
  local names = {}
  for k in pairs(headers) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do lines[#lines + 1] = k .. ": " .. headers[k] end
  return conn:write(table.concat(lines, "\r\n") .. "\r\n\r\n" .. body)
end

local function json_error(conn, status, code, message, extra)
  local h = { ["Content-Type"] = "application/json" }
  for k, v in pairs(extra or {}) do h[k] = v end
  return respond(conn, status, h, json.encode { jsonrpc = "2.0", id = json.null,
                                                error = { code = code, message = message } })
end

-- Read one request: method, path, headers (lower-case names), body.
-- Returns nil at a clean end of the connection.
local function read_request(conn, state)
  local buf = state.buf
  while not buf:find("\r\n\r\n", 1, true) do
    if #buf > MAX_HEADER then return nil, "headers too large" end
    local chunk = conn:read()
    if not chunk then return nil end
    buf = buf .. chunk
  end
  local head_end = buf:find("\r\n\r\n", 1, true)
  local head = buf:sub(1, head_end - 1)
  buf = buf:sub(head_end + 4)
  local method, path = head:match("^(%u+) (%S+) HTTP/1%.[01]")
  if not method then return nil, "bad request line" end
  local headers = {}
  for line in head:gmatch("\r\n([^\r\n]*)") do
    local k, v = line:match("^([^:]+):%s*(.-)%s*$")
    if k then headers[k:lower()] = v end
  end
  local len = tonumber(headers["content-length"] or "0")
  if headers["transfer-encoding"] then return nil, "chunked request bodies are not supported" end
  if not len or len < 0 or len > MAX_BODY then return nil, "bad Content-Length" end
  while #buf < len do
    local chunk = conn:read()
    if not chunk then return nil end
    buf = buf .. chunk
  end
  state.buf = buf:sub(len + 1)
  return { method = method, path = path:match("^[^?]*"), headers = headers, body = buf:sub(1, len) }
end

local LOOPBACK_HOSTS = { ["127.0.0.1"] = true, localhost = true, ["[::1]"] = true }

local function origin_ok(origin)
  if origin == nil or origin == "null" then return origin == nil end
  local host = origin:match("^https?://([^/:]+)") or origin:match("^https?://(%[[^%]]+%])")
  return host ~= nil and LOOPBACK_HOSTS[host] == true
end

local function host_ok(host)
  if host == nil then return true end
  local name = host:match("^(%[[^%]]+%])") or host:match("^([^:]+)")
  return name ~= nil and LOOPBACK_HOSTS[name] == true
end

-- A transport for one session: the peer's answers go to the HTTP request
-- waiting for them.
-- A progress notification goes to the event stream of the request that
-- asked for it (by its progressToken), when that request is streamed.
local function session_transport()
  local t = { waiting = {}, streams = {} }
  function t.send(_, msg)
    local f = msg.id ~= nil and t.waiting[msg.id]
    if f then
      t.waiting[msg.id] = nil
      f:set(msg)
    elseif msg.id == nil and msg.method == "notifications/progress" and type(msg.params) == "table" then
      local write = t.streams[msg.params.progressToken]
      if write then write(msg) end
    end
  end
  function t.close() end
  return t
end

local Server = {}
Server.__index = Server

--- @tparam table o `port`, `host` (127.0.0.1), `token`, `capability`
--   (sandbox capability options), `log(level, message)`
function M.new(o)
  local self = setmetatable({ o = o, sessions = {}, conns = {} }, Server)
  self.listener = runtime.net.listen { host = o.host or "127.0.0.1", port = o.port or 0 }
  return self
end

function Server:port()
  return self.listener:port()
end

local function new_session(self)
  local server = require "lash.mcp.server"
  local t = session_transport()
  local s = server.session(t, { capability = self.o.capability })
  s.http_transport = t
  s.id = random_id()
  s.last_used = runtime.now()
  return s
end

-- Run one message through a session; the answer, or nil for none.
local function exchange(s, msg)
  local L = runtime
  if type(msg) == "table" and msg.method ~= nil and msg.id ~= nil and msg.id ~= json.null then
    local f = L.future()
    s.http_transport.waiting[msg.id] = f
    s.peer:dispatch(msg)
    return f:wait()
  end
  s.peer:dispatch(msg)
  return nil
end

-- The progressToken of a single request whose client takes an event stream
-- (Accept: text/event-stream) and asked for progress; nil otherwise.
local function stream_token(msg, accept)
  if type(msg) ~= "table" or msg[1] ~= nil or msg.id == nil or type(msg.method) ~= "string" then return nil end
  if not (accept or ""):find("text/event-stream", 1, true) then return nil end
  local meta = type(msg.params) == "table" and msg.params._meta
  local token = type(meta) == "table" and meta.progressToken or nil
  if type(token) == "string" or math.type(token) == "integer" then return token end
  return nil
end

local function sse_event(msg)
  return "event: message\ndata: " .. json.encode(msg) .. "\n\n"
end

-- Answer one request as an event stream (MCP's Streamable HTTP): its
-- progress notifications as they come, then its response; the stream ends
-- with the connection. A client gone mid-stream loses only the events.
local function exchange_streamed(conn, s, msg, token)
  local head = "HTTP/1.1 200 OK\r\nCache-Control: no-cache\r\nConnection: close\r\n"
    .. "Content-Type: text/event-stream\r\nMcp-Session-Id: " .. s.id .. "\r\n\r\n"
  local open = pcall(conn.write, conn, head)
  local t = s.http_transport
  t.streams[token] = function(note)
    if open then open = pcall(conn.write, conn, sse_event(note)) end
  end
  local ok, answer = pcall(exchange, s, msg)
  t.streams[token] = nil
  if not ok then error(answer, 0) end
  if open and answer then pcall(conn.write, conn, sse_event(answer)) end
  return "close"
end

function Server:handle(conn, req)
  local h = req.headers
  if not origin_ok(h.origin) or not host_ok(h.host) then
    return json_error(conn, 403, -32000, "Forbidden: the Origin or Host is not a loopback address "
      .. "(lash mcp serve --http only serves local clients)")
  end
  if self.o.token and h.authorization ~= "Bearer " .. self.o.token then
    return json_error(conn, 401, -32001, "Unauthorized: send Authorization: Bearer <token>",
                      { ["WWW-Authenticate"] = 'Bearer realm="lash"' })
  end
  if req.path ~= "/mcp" and req.path ~= "/" then
    return respond(conn, 404, { ["Content-Type"] = "text/plain" }, "not found: the endpoint is /mcp\n")
  end
  local sid = h["mcp-session-id"]
  if req.method == "GET" then
    return respond(conn, 405, { Allow = "POST, DELETE" }, "")
  elseif req.method == "DELETE" then
    local s = sid and self.sessions[sid]
    if not s then return json_error(conn, 404, -32001, "Session not found") end
    self.sessions[sid] = nil
    s:close()
    return respond(conn, 200, {}, "")
  elseif req.method ~= "POST" then
    return respond(conn, 405, { Allow = "POST, DELETE" }, "")
  end
  local msg = json.try_decode(req.body)
  if msg == nil then return json_error(conn, 400, rpc.PARSE_ERROR, "Parse error: the body is not JSON") end
  local first = type(msg) == "table" and (msg[1] or msg) or nil
  local s
  if type(first) == "table" and first.method == "initialize" then
    local count = 0
    for _ in pairs(self.sessions) do count = count + 1 end
    if count >= M.MAX_SESSIONS then
      return json_error(conn, 503, -32000, "Too many sessions (" .. M.MAX_SESSIONS .. "): end one with DELETE")
    end
    s = new_session(self)
    self.sessions[s.id] = s
  else
    if not sid then
      return json_error(conn, 400, rpc.INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required")
    end
    s = self.sessions[sid]
    if not s then return json_error(conn, 404, -32001, "Session not found") end
  end
  s.last_used = runtime.now()
  local token = stream_token(msg, h.accept)
  if token ~= nil then return exchange_streamed(conn, s, msg, token) end
  local answers = {}
  local list = (type(msg) == "table" and msg[1] ~= nil) and msg or { msg }
  for _, m in ipairs(list) do
    local a = exchange(s, m)
    if a then answers[#answers + 1] = a end
  end
  if #answers == 0 then return respond(conn, 202, { ["Mcp-Session-Id"] = s.id }, "") end
  local body = (type(msg) == "table" and msg[1] ~= nil) and json.encode(json.array(answers)) or json.encode(answers[1])
  return respond(conn, 200, { ["Content-Type"] = "application/json", ["Mcp-Session-Id"] = s.id }, body)
end

function Server:serve_conn(conn)
  local state = { buf = "" }
  while true do
    local req, err = read_request(conn, state)
    if not req then
      if err then pcall(respond, conn, 400, { Connection = "close" }, err .. "\n") end
      break
    end
    local ok, e = pcall(self.handle, self, conn, req)
    if ok and e == "close" then break end   -- an event stream ends with its connection
    if not ok then
      if runtime.is_error(e, "cancelled") then break end
      pcall(json_error, conn, 500, rpc.INTERNAL_ERROR, "Internal error: " .. tostring(type(e) == "table" and e.message or e))
    end
    if (req.headers.connection or ""):lower() == "close" then break end
  end
  conn:close()
end

--- Accept connections until the listener is closed (or the task cancelled).
function Server:serve()
  local L = runtime
  -- sessions whose client vanished without DELETE end after a while
  self.sweeper = L.spawn(function()
    while true do
      L.sleep(60)
      for id, s in pairs(self.sessions) do
        if L.now() - (s.last_used or 0) > M.IDLE_TIMEOUT then
          self.sessions[id] = nil
          pcall(s.close, s)
        end
      end
    end
  end)
  local ok, err = pcall(function()
    while true do
      local conn = self.listener:accept()
      if not conn then break end
      local t
      t = L.spawn(function()
        self:serve_conn(conn)
        self.conns[t] = nil
      end)
      self.conns[t] = conn
    end
  end)
  self:close()
  if not ok and not L.is_error(err, "cancelled") then error(err, 0) end
end

function Server:close()
  if self.closed then return end
  self.closed = true
  if self.sweeper then self.sweeper:cancel() end
  for t, c in pairs(self.conns) do
    t:cancel()
    c:close()
  end
  for _, s in pairs(self.sessions) do pcall(s.close, s) end
  self.sessions = {}
  self.listener:close()
end

return M
