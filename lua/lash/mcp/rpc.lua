--- JSON-RPC 2.0 peers for MCP and ACP: requests with ids matched to
-- responses, notifications, and the other side's requests answered by
-- handlers. The MCP client, `lash mcp serve`, `lash acp` and lash's ACP
-- client sit on one of these; `opts.protocol` names the protocol's words
-- (the error kind, who the peer is, how a request is cancelled).
--
-- A transport is duck-typed:
--
--   t:send(msg)          write one message (a table); may wait
--   t:receive() -> msg   the next incoming message, nil when the peer is
--                        gone; may wait
--   t:close()            idempotent
--   t:describe_exit()    optional: why the peer went away (for messages)
--
-- `peer:start()` runs a reader task that dispatches incoming messages: a
-- response settles the future of its request; a request runs its handler in
-- a task of its own (so a handler may wait, e.g. for a user's approval,
-- without stopping the reader); a notification runs its handler inline.
-- @module lash.mcp.rpc
local json = require "lash.json"

local M = {}

local runtime = require "lash.runtime"

-- JSON-RPC error codes.
M.PARSE_ERROR = -32700
M.INVALID_REQUEST = -32600
M.METHOD_NOT_FOUND = -32601
M.INVALID_PARAMS = -32602
M.INTERNAL_ERROR = -32603

--- The metatable of what a transport's receive returns for a message
-- that is not JSON (`{message = why}`), when it reports them: the peer
-- answers it with a Parse error.
M.NOT_JSON = {}

--- An error a request handler raises to answer with a JSON-RPC error.
function M.error(code, message, data)
  return setmetatable({ rpc_code = code, message = message, data = data }, {
    __tostring = function(e) return e.message end,
  })
end

--- A FIFO whose `pop` waits until something is pushed (or it is closed).
function M.queue()
  local q = { items = {}, head = 1, tail = 0, closed = false, waiter = nil }
  function q.push(v)
    q.tail = q.tail + 1
    q.items[q.tail] = v
    local w = q.waiter
    if w then
      q.waiter = nil
      w:set(true)
    end
  end
  function q.close()
    q.closed = true
    local w = q.waiter
    if w then
      q.waiter = nil
      w:set(true)
    end
  end
  function q.pop()
    while q.head > q.tail do
      if q.closed then return nil end
      local f = runtime.future()
      q.waiter = f
      local ok, err = pcall(f.wait, f)
      if q.waiter == f then q.waiter = nil end
      if not ok then error(err, 0) end
    end
    local v = q.items[q.head]
    q.items[q.head] = nil
    q.head = q.head + 1
    return v
  end
  return q
end

local Peer = {}
Peer.__index = Peer

--- The protocols a peer speaks: the kind of the errors it raises, what
-- its messages call the other side and the connection, and the
-- notification that cancels a request (`notifications/cancelled` in MCP,
-- `$/cancel_request` in ACP).
M.MCP = { kind = "mcp", peer = "MCP server", connection = "MCP connection",
          cancel = function(id, reason) return "notifications/cancelled", { requestId = id, reason = reason } end }
M.ACP = { kind = "acp", peer = "ACP peer", connection = "ACP connection", batches = false,
          cancel = function(id) return "$/cancel_request", { requestId = id } end }

--- A peer over `transport`.
-- @tparam table opts `name` (for messages), `on_request(method, params,
--   msg)` (returns the result or raises `rpc.error(...)`),
--   `on_notification(method, params)`, `on_close(reason)`, `protocol`
--   (`rpc.MCP`, the default, or `rpc.ACP`; its `peer` may be overridden,
--   e.g. "ACP client")
function M.new(transport, opts)
  return setmetatable({
    transport = transport, name = opts.name or "mcp", on_request = opts.on_request,
    on_notification = opts.on_notification, on_close = opts.on_close, proto = opts.protocol or M.MCP,
    pending = {}, next_id = 0, closed = false, handlers = {},
  }, Peer)
end

local function peer_gone(self)
  local why = self.transport.describe_exit and self.transport:describe_exit()
  return runtime.error(self.proto.kind, self.proto.peer .. " '" .. self.name .. "' closed the connection"
    .. (why and (": " .. why) or ""), { code = "closed" })
end

-- The prefix of this peer's log lines ("mcp NAME", "acp NAME").
local function who(self)
  return self.proto.kind .. " " .. self.name
end

local function settle(self, msg)
  local p = self.pending[msg.id]
  if not p then
    runtime.log("debug", who(self) .. ": a response to unknown request id " .. tostring(msg.id))
    return
  end
  self.pending[msg.id] = nil
  if msg.error ~= nil then
    local e = type(msg.error) == "table" and msg.error or {}
    local text = type(e.message) == "string" and e.message or json.try_encode(msg.error) or "error"
    p.future:fail(runtime.error(self.proto.kind, self.proto.peer .. " '" .. self.name .. "' answered " .. p.method
      .. " with error " .. tostring(e.code) .. ": " .. text, { code = e.code, data = e.data }))
  else
    p.future:set(msg.result)
  end
end

local function reply_error(self, id, code, message, data)
  local err = { code = code, message = message }
  if data ~= nil then err.data = data end
  pcall(self.transport.send, self.transport, { jsonrpc = "2.0", id = id, error = err })
end

local function handle_request(self, msg)
  local L = runtime
  local task
  task = L.spawn(function()
    local ok, res = pcall(function()
      if not self.on_request then
        error(M.error(M.METHOD_NOT_FOUND, "Method not found: " .. tostring(msg.method)), 0)
      end
      return self.on_request(msg.method, msg.params, msg)
    end)
    self.handlers[task] = nil
    if self.closed then return end
    if ok then
      if res == nil then res = {} end
      pcall(self.transport.send, self.transport, { jsonrpc = "2.0", id = msg.id, result = res })
    elseif type(res) == "table" and res.rpc_code then
      reply_error(self, msg.id, res.rpc_code, res.message, res.data)
    elseif L.is_error(res, "cancelled") then
      -- cancelled by the other side: JSON-RPC wants no answer then
      return
    else
      L.log("warn", who(self) .. ": handling " .. tostring(msg.method) .. " failed: " .. tostring(res))
      reply_error(self, msg.id, M.INTERNAL_ERROR, "Internal error: " .. tostring(type(res) == "table"
        and res.message or res))
    end
  end)
  self.handlers[task] = msg.id
end

--- Handle one decoded message (or a batch, a JSON array of them).
function Peer:dispatch(msg)
  if getmetatable(msg) == M.NOT_JSON then
    reply_error(self, json.null, M.PARSE_ERROR, "Parse error: " .. tostring(msg.message))
    return
  end
  if type(msg) ~= "table" then
    reply_error(self, json.null, M.INVALID_REQUEST, "Invalid Request: a message must be a JSON object")
    return
  end
  if msg[1] ~= nil or json.is_array(msg) then
    if self.proto.batches == false then
      reply_error(self, json.null, M.INVALID_REQUEST, "Invalid Request: " .. self.proto.kind:upper()
        .. " takes no JSON-RPC batches: send each message on its own line")
      return
    end
    for _, m in ipairs(msg) do self:dispatch(m) end
    return
  end
  if msg.method ~= nil then
    if type(msg.method) ~= "string" then
      if msg.id ~= nil then reply_error(self, msg.id, M.INVALID_REQUEST, "Invalid Request: method must be a string") end
      return
    end
    if msg.id ~= nil and msg.id ~= json.null then
      handle_request(self, msg)
    elseif self.on_notification then
      local ok, err = pcall(self.on_notification, msg.method, msg.params)
      if not ok then
        runtime.log("warn", who(self) .. ": notification " .. msg.method .. ": " .. tostring(err))
      end
    end
  elseif msg.id ~= nil then
    settle(self, msg)
  else
    runtime.log("debug", who(self) .. ": ignoring a message that is neither request, notification "
      .. "nor response")
  end
end

--- Fail our pending request `id` with `err` (a transport that could not
-- deliver it).
function Peer:fail_request(id, err)
  local p = self.pending[id]
  if p then
    self.pending[id] = nil
    p.future:fail(err)
  end
end

--- Cancel the handler task of the other side's request `id`.
function Peer:cancel_incoming(id)
  for t, rid in pairs(self.handlers) do
    if rid == id then
      self.handlers[t] = nil
      t:cancel()
    end
  end
end

local function fail_all(self, err)
  local pending = self.pending
  self.pending = {}
  for _, p in pairs(pending) do p.future:fail(err) end
end

--- Start the reader task (for transports that deliver messages through
-- `receive`).
function Peer:start()
  local L = runtime
  self.reader = L.spawn(function()
    local ok, err = pcall(function()
      while true do
        local msg = self.transport:receive()
        if msg == nil then break end
        self:dispatch(msg)
      end
    end)
    if not ok and L.is_error(err, "cancelled") then return end
    if not self.closed then
      local e = peer_gone(self)
      if not ok then e.message = e.message .. " (" .. tostring(type(err) == "table" and err.message or err) .. ")" end
      self.gone = e
      fail_all(self, e)
      if self.on_close then pcall(self.on_close, e) end
    end
  end)
end

--- Send a notification.
function Peer:notify(method, params)
  if self.closed then return end
  local msg = { jsonrpc = "2.0", method = method }
  if params ~= nil then msg.params = params end
  self.transport:send(msg)
end

--- Send a request and wait for its result.
-- @tparam string method
-- @param params a table or nil
-- @tparam[opt] table opts `timeout` (seconds): past it the request is
--   cancelled (`notifications/cancelled`) and a `timeout` error raised.
-- @return the result table
-- @raise `mcp` (an error answer, the peer gone), `timeout`, `cancelled`
function Peer:request(method, params, opts)
  local L = runtime
  opts = opts or {}
  if self.gone then error(self.gone, 0) end
  if self.closed then
    error(L.error(self.proto.kind, "the " .. self.proto.connection .. " to '" .. self.name .. "' is closed",
                  { code = "closed" }), 0)
  end
  self.next_id = self.next_id + 1
  local id = self.next_id
  local f = L.future()
  self.pending[id] = { future = f, method = method }
  local msg = { jsonrpc = "2.0", id = id, method = method }
  if params ~= nil then msg.params = params end
  local dog
  if opts.timeout then
    dog = L.spawn(function()
      L.sleep(opts.timeout)
      if self.pending[id] then
        self.pending[id] = nil
        pcall(self.notify, self, self.proto.cancel(id, "timed out after " .. opts.timeout .. "s"))
        f:fail(L.error("timeout", self.proto.peer .. " '" .. self.name .. "' did not answer " .. method .. " within "
          .. opts.timeout .. "s", { retryable = true }))
      end
    end)
  end
  local ok, res = pcall(function()
    self.transport:send(msg)
    return f:wait()
  end)
  if dog then dog:cancel() end
  if ok then return res end
  if L.is_error(res, "cancelled") and self.pending[id] then
    -- our caller was cancelled (a run, a tool timeout): tell the server
    self.pending[id] = nil
    pcall(self.notify, self, self.proto.cancel(id, "cancelled by the client"))
  end
  self.pending[id] = nil
  error(res, 0)
end

--- Close: pending requests fail, the reader and handlers stop, the
-- transport closes.
function Peer:close()
  if self.closed then return end
  self.closed = true
  fail_all(self, runtime.error(self.proto.kind, "the " .. self.proto.connection .. " to '" .. self.name
    .. "' was closed", { code = "closed" }))
  for t in pairs(self.handlers) do t:cancel() end
  self.handlers = {}
  if self.reader and self.reader ~= runtime.current() then self.reader:cancel() end
  self.transport:close()
end

return M
