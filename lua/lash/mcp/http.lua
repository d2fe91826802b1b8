--- The MCP Streamable HTTP client transport, over lash.http (libcurl on
-- the loop): every message is a POST to the endpoint; the answer is JSON
-- or an SSE stream whose events are messages (the server may send its own
-- requests and notifications there before the response). The session id
-- the server gives at initialize (`Mcp-Session-Id`) and the negotiated
-- `MCP-Protocol-Version` go on every later request; a 404 with a session
-- means it expired. A GET stream carries server-initiated messages when
-- the server offers one (it is optional; 405 means none); a dropped stream
-- is resumed with `Last-Event-ID` after the server's `retry` delay.
-- Closing sends DELETE.
-- @module lash.mcp.http
local json = require "lash.json"
local rpc = require "lash.mcp.rpc"

local M = {}

local STOP = {}   -- raised from on_chunk to end a stream we are done with

local runtime = require "lash.runtime"

local Client = {}
Client.__index = Client

--- @tparam table o `url`, `headers` (static headers, e.g. Authorization),
--   `name`, `timeout` (per request, seconds)
--   `auth` (a lash.mcp.oauth state: its token goes on every request, and
--   a 401 or 403 insufficient_scope runs its flow and sends the request
--   again)
function M.client(o)
  return setmetatable({ url = o.url, headers = o.headers or {}, name = o.name or require("lash.url_redact").redact(o.url), auth = o.auth,
                        timeout = o.timeout, queue = rpc.queue(), closed = false, tasks = {} }, Client)
end

function Client:set_protocol_version(v)
  self.protocol_version = v
  self:start_get_stream()
end

local function headers_for(self, extra)
  local h = {}
  for k, v in pairs(self.headers) do h[k] = v end
  if self.auth then h["Authorization"] = self.auth:header() end
  if self.session_id then h["Mcp-Session-Id"] = self.session_id end
  if self.protocol_version then h["MCP-Protocol-Version"] = self.protocol_version end
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

local function http_error(self, status, body, what)
  local text = type(body) == "string" and body:sub(1, 300) or ""
  local hint = ""
  if status == 401 or status == 403 then hint = " (check the server's token or headers)" end
  if status == 404 and self.session_id then hint = " (the session expired; reconnect)" end
  return runtime.error("mcp", "MCP server '" .. self.name .. "' answered " .. what .. " with HTTP "
    .. tostring(status) .. hint .. (text ~= "" and (": " .. text) or ""), { code = "http", status = status })
end

-- Feed SSE events' data to the queue; remember ids and retry for
-- resumption, and whether the answer to state.want arrived.
local function sse_sink(self, state)
  local parser = runtime.http.sse_parser {}
  return function(chunk)
    for _, ev in ipairs(parser:feed(chunk)) do
      if ev.id and ev.id ~= "" then state.last_id = ev.id end
      if ev.retry then state.retry = tonumber(ev.retry) end
      if (ev.event == nil or ev.event == "" or ev.event == "message") and ev.data and ev.data:match("%S") then
        local msg, err = json.try_decode(ev.data)
        if type(msg) == "table" and state.want ~= nil and msg.id == state.want and msg.method == nil then
          state.answered = true
        end
        if msg ~= nil then self.queue.push(msg)
        else runtime.log("warn", "mcp " .. self.name .. ": an SSE event that is not JSON: " .. tostring(err)) end
      end
    end
  end
end

-- One POST; responses and server messages go to the queue. A refusal the
-- OAuth state can answer sends it again (`tries`: authorizations so far).
local function post(self, msg, tries)
  local L = runtime
  local mode, buf, state = nil, {}, { want = msg.method and msg.id or nil }
  local sink = sse_sink(self, state)
  local status, headers = L.http.request {
    url = self.url, method = "POST", body = json.encode(msg), timeout = self.timeout,
    headers = headers_for(self, { ["Content-Type"] = "application/json",
                                  ["Accept"] = "application/json, text/event-stream" }),
    on_chunk = function(chunk)
      if mode == nil then
        local first = chunk:match("^%s*(.)")
        if first == nil then buf[#buf + 1] = chunk return end
        chunk = table.concat(buf) .. chunk
        buf = {}
        mode = (first == "{" or first == "[") and "json" or "sse"
      end
      if mode == "sse" then sink(chunk) else buf[#buf + 1] = chunk end
    end,
  }
  if msg.method == "initialize" and headers["mcp-session-id"] then
    self.session_id = headers["mcp-session-id"]
  end
  if status == 202 or status == 204 then return end
  if (status == 401 or status == 403) and self.auth and not self.closed then
    tries = tries or 0
    if tries < require("lash.mcp.oauth").MAX_AUTHORIZATIONS and self.auth:challenge(status, headers["www-authenticate"]) then
      return post(self, msg, tries + 1)
    end
  end
  if status < 200 or status >= 300 then
    error(http_error(self, status, table.concat(buf), msg.method or "a response"), 0)
  end
  if mode == "sse" and state.want ~= nil and not state.answered then
    -- the stream ended before the answer: resume it with GET after the
    -- server's retry delay, from the last event id
    local attempts = 0
    while not state.answered and not self.closed do
      attempts = attempts + 1
      if attempts > 5 or not state.last_id then
        error(runtime.error("mcp", "MCP server '" .. self.name .. "' closed the stream of " .. msg.method
          .. " before answering" .. (state.last_id and " (5 resumptions failed)" or " (and gave no event id to resume from)")), 0)
      end
      L.sleep((state.retry or 1000) / 1000)
      local sink2 = sse_sink(self, state)
      -- a resumed GET stream may stay open after the answer: stop reading then
      local ok, st = pcall(L.http.request, {
        url = self.url, method = "GET", timeout = self.timeout,
        on_chunk = function(c)
          sink2(c)
          if state.answered then error(STOP, 0) end
        end,
        headers = headers_for(self, { Accept = "text/event-stream", ["Last-Event-ID"] = state.last_id }),
      })
      if not ok and st ~= STOP then error(st, 0) end
      if st == 405 then
        error(runtime.error("mcp", "MCP server '" .. self.name .. "' closed the stream of " .. msg.method
          .. " before answering and offers no GET stream to resume it"), 0)
      end
    end
    return
  end
  local ctype = headers["content-type"] or ""
  if mode == "json" or ctype:find("application/json", 1, true) then
    local text = table.concat(buf)
    if text:match("%S") then
      local v, err = json.try_decode(text)
      if v == nil then
        error(runtime.error("mcp", "MCP server '" .. self.name .. "' sent JSON that does not parse: " .. tostring(err)), 0)
      end
      self.queue.push(v)
    end
  end
end

function Client:send(msg)
  if self.closed then error(runtime.error("mcp", "the HTTP transport is closed", { code = "closed" }), 0) end
  if msg.method and msg.id ~= nil then
    -- a request: its POST stays open until its answer, so run it beside
    -- the caller (which waits on the response's future)
    local t
    t = runtime.spawn(function()
      local ok, err = pcall(post, self, msg)
      self.tasks[t] = nil
      if not ok and not runtime.is_error(err, "cancelled") and self.peer then
        -- fail the request so its caller wakes with the cause
        if not runtime.is_error(err) then err = runtime.error("mcp", tostring(err)) end
        if err.kind ~= "mcp" and err.kind ~= "auth" then
          err = runtime.error("mcp", "MCP server '" .. self.name .. "' is unreachable: " .. tostring(err.message),
                             { code = err.kind, retryable = err.retryable })
        end
        self.peer:fail_request(msg.id, err)
      end
    end)
    self.tasks[t] = true
    return
  end
  post(self, msg)
end

--- The peer using this transport (so a failed POST can fail its request).
function Client:attach_peer(peer)
  self.peer = peer
end

function Client:receive()
  return self.queue.pop()
end

-- The optional GET stream for server-initiated messages.
function Client:start_get_stream()
  if self.get_task or self.closed then return end
  local L = runtime
  self.get_task = L.spawn(function()
    local state, attempts = {}, 0
    while not self.closed do
      local extra = { Accept = "text/event-stream" }
      if state.last_id then extra["Last-Event-ID"] = state.last_id end
      local ok, status = pcall(L.http.request, {
        url = self.url, method = "GET", headers = headers_for(self, extra), on_chunk = sse_sink(self, state),
      })
      if self.closed then return end
      if ok and (status == 405 or status == 404 or status >= 400) then return end
      if not ok and L.is_error(status, "cancelled") then return end
      attempts = attempts + 1
      if attempts > 5 then return end
      L.sleep((state.retry or 1000) / 1000)
    end
  end)
end

function Client:close()
  if self.closed then return end
  self.closed = true
  local L = runtime
  if self.get_task then self.get_task:cancel() end
  for t in pairs(self.tasks) do t:cancel() end
  self.tasks = {}
  if self.session_id then
    pcall(L.http.request, { url = self.url, method = "DELETE", headers = headers_for(self), timeout = 5 })
  end
  self.queue.close()
end

return M
