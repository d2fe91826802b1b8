--- Traces: OpenTelemetry spans for runs, model requests and tool calls,
-- following the GenAI semantic conventions, exported over OTLP/HTTP
-- (protobuf or JSON) on lash's loop.
--
-- Per run, from its events and history messages:
--   `invoke_agent {agent}` (INTERNAL), the run, parent of
--   `chat {model}` (CLIENT), one per model request, and
--   `execute_tool {tool}` (INTERNAL), one per tool call.
-- A sub-agent's run (events with a `path`, lash.subagent) gets its own
-- `invoke_agent` span under the `execute_tool` span of the call that
-- started it, and its spans under that.
-- Attributes: `gen_ai.operation.name`, `gen_ai.provider.name`,
-- `gen_ai.request.model`, `gen_ai.response.model`,
-- `gen_ai.response.finish_reasons`, `gen_ai.usage.input_tokens`,
-- `gen_ai.usage.output_tokens`, `gen_ai.agent.name`,
-- `gen_ai.conversation.id` (the saved session), `gen_ai.tool.name`,
-- `gen_ai.tool.call.id`, `gen_ai.tool.type`, `error.type`, and a few
-- `lash.*` ones. A `TRACEPARENT` in the environment (W3C trace context)
-- makes the run a child of the caller's span.
--
-- Spans are batched (a batch goes when `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`
-- spans wait, or `OTEL_BSP_SCHEDULE_DELAY` ms after the first) and sent by
-- their own task, so a run never waits on the collector; when it cannot be
-- reached or refuses, the batch is dropped with one warning on stderr.
-- Past `OTEL_BSP_MAX_QUEUE_SIZE` waiting spans, new ones are dropped
-- (counted in the warning). `exporter:shutdown()` sends what is left,
-- waiting at most the export timeout.
--
-- Settings (environment over config file `traces = {...}`):
-- `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL), else
-- `OTEL_EXPORTER_OTLP_ENDPOINT` (+ `/v1/traces`), else `traces.endpoint`;
-- `OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL` / `traces.protocol`:
-- `http/protobuf` (default) or `http/json`; `OTEL_EXPORTER_OTLP[_TRACES]_HEADERS`
-- (`k=v,k2=v2`, never printed); `OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT` (ms,
-- default 10000); `OTEL_SERVICE_NAME` / `traces.service_name` (default
-- "lash"); `OTEL_RESOURCE_ATTRIBUTES`; `OTEL_SDK_DISABLED=true` or
-- `OTEL_TRACES_EXPORTER=none` turn it off.
-- @module lash.trace
local otlp = require "lash.otlp"

local M = {}

local runtime = require "lash.runtime"

-- a warning quotes a collector's answer: on a terminal, the one sanitizer
local function shown(s)
  return runtime.sys.isatty(2) and runtime.output.visible(s) or s
end

local function nonempty(s)
  if s == nil or s == "" then return nil end
  return s
end

local function now_ns()
  local s, ns = runtime.sys.time()
  return s * 1000000000 + ns
end

local function percent_decode(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- "k=v,k2=v2" (W3C baggage-like, as OTEL_* lists are)
local function parse_pairs(s)
  local out = {}
  for item in (s or ""):gmatch("[^,]+") do
    local k, v = item:match("^%s*([^=]-)%s*=%s*(.-)%s*$")
    if k and k ~= "" then out[#out + 1] = { percent_decode(k), percent_decode(v) } end
  end
  return out
end

local function ms_setting(getenv, names, default)
  for _, n in ipairs(names) do
    local v = nonempty(getenv(n))
    if v then
      local x = math.tointeger(tonumber(v))
      if not x or x < 0 then return nil, n .. " must be a whole number of milliseconds, got '" .. v .. "'" end
      return x
    end
  end
  return default
end

--- The export settings from the environment and the config, or nil when
-- traces are off.
-- @tparam[opt] table traces_config the config file's `traces` table
-- @return settings `{ url=, protocol=, headers=, timeout=, service_name=, resource=,
--   batch=, delay=, queue= }`, or nil (off), or nil, message (bad settings)
function M.settings(traces_config, getenv)
  getenv = getenv or os.getenv
  local c = traces_config or {}
  if (getenv("OTEL_SDK_DISABLED") or ""):lower() == "true" then return nil end
  if (getenv("OTEL_TRACES_EXPORTER") or ""):lower() == "none" then return nil end
  local url = nonempty(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
  if not url then
    local base = nonempty(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) or c.endpoint
    if not base then return nil end
    url = base:gsub("/+$", "") .. "/v1/traces"
  end
  if not url:match("^https?://") then
    return nil, "the OTLP endpoint must be an http:// or https:// URL, got '"
      .. require("lash.url_redact").redact(url) .. "'"
  end
  local protocol = nonempty(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")) or nonempty(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
    or c.protocol or "http/protobuf"
  if protocol ~= "http/protobuf" and protocol ~= "http/json" then
    return nil, "OTLP protocol '" .. protocol .. "' is not supported: lash exports http/protobuf or http/json"
  end
  local headers = {}
  for _, kv in ipairs(parse_pairs(getenv("OTEL_EXPORTER_OTLP_HEADERS"))) do headers[kv[1]] = kv[2] end
  for _, kv in ipairs(parse_pairs(getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS"))) do headers[kv[1]] = kv[2] end
  local timeout, terr = ms_setting(getenv, { "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT" }, 10000)
  if not timeout then return nil, terr end
  local batch, berr = ms_setting(getenv, { "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" }, 512)
  if not batch then return nil, berr end
  local delay, derr = ms_setting(getenv, { "OTEL_BSP_SCHEDULE_DELAY" }, 5000)
  if not delay then return nil, derr end
  local queue, qerr = ms_setting(getenv, { "OTEL_BSP_MAX_QUEUE_SIZE" }, 2048)
  if not queue then return nil, qerr end
  local service = nonempty(getenv("OTEL_SERVICE_NAME")) or c.service_name or "lash"
  local resource = { { "service.name", service }, { "telemetry.sdk.name", "lash" },
                     { "telemetry.sdk.language", "lua" }, { "telemetry.sdk.version", runtime.version } }
  for _, kv in ipairs(parse_pairs(getenv("OTEL_RESOURCE_ATTRIBUTES"))) do
    if kv[1] ~= "service.name" or not nonempty(getenv("OTEL_SERVICE_NAME")) then
      if kv[1] == "service.name" then resource[1][2] = kv[2] else resource[#resource + 1] = kv end
    end
  end
  return { url = url, protocol = protocol, headers = headers, timeout = timeout, service_name = service,
           resource = resource, batch = math.max(batch, 1), delay = delay, queue = math.max(queue, 1) }
end

---------------------------------------------------------------------------
-- Exporter: a batch span processor on the loop

local Exporter = {}
Exporter.__index = Exporter

--- Make an exporter.
-- @tparam table settings from `trace.settings`
-- @tparam[opt] function warn `warn(message)` (default: stderr)
function M.exporter(settings, warn)
  return setmetatable({ settings = settings, queue = {}, dropped = 0, exported = 0, failed = 0,
                        warn = warn or function(msg) io.stderr:write("lash: warning: traces: ", shown(msg), "\n") end,
                        warned = {}, inflight = nil, timer = nil }, Exporter)
end

function Exporter:_warn_once(key, msg)
  if self.warned[key] then return end
  self.warned[key] = true
  self.warn(msg)
end

-- Send one batch (in the exporting task). Never raises.
function Exporter:_send(batch)
  local s = self.settings
  local scope = { name = "lash", version = runtime.version }
  local body, ctype = otlp.encode(s.protocol, s.resource, scope, batch)
  local headers = { ["Content-Type"] = ctype }
  for k, v in pairs(s.headers) do headers[k] = v end
  local ok, status, _, rbody = pcall(runtime.http.request, { method = "POST", url = s.url, headers = headers,
                                                          body = body, timeout = s.timeout / 1000,
                                                          connect_timeout = math.max(s.timeout / 1000, 0.001) })
  if ok and status >= 200 and status < 300 then
    self.exported = self.exported + #batch
    return
  end
  self.failed = self.failed + #batch
  local why
  if not ok then
    local e = status
    if type(e) == "table" and e.kind == "cancelled" then error(e, 0) end
    why = "cannot reach the collector at " .. require("lash.url_redact").redact(s.url) .. ": " .. tostring(type(e) == "table" and e.message or e)
  else
    local desc = rbody and #rbody > 0 and #rbody < 300 and rbody:match("^[%g ]+$") and (": " .. rbody) or ""
    why = "the collector at " .. require("lash.url_redact").redact(s.url) .. " answered HTTP " .. tostring(status) .. desc
  end
  self:_warn_once(why, why .. "; " .. #batch .. " span(s) dropped (later failures are not repeated)")
end

-- The exporting task: sends batches until the queue is empty.
function Exporter:_drain()
  while #self.queue > 0 do
    local batch = {}
    local n = math.min(#self.queue, self.settings.batch)
    for i = 1, n do batch[i] = self.queue[i] end
    table.move(self.queue, n + 1, #self.queue + n, 1)
    self:_send(batch)
  end
  self.inflight = nil
end

function Exporter:_kick()
  if self.timer then
    self.timer:cancel()
    self.timer = nil
  end
  if self.inflight then return end
  self.inflight = runtime.spawn(function() self:_drain() end)
end

--- Queue a finished span; the run goes on at once.
function Exporter:add(span)
  if #self.queue >= self.settings.queue then
    self.dropped = self.dropped + 1
    self:_warn_once("queue", "more than " .. self.settings.queue .. " spans waiting to be exported; "
      .. "dropping new ones (OTEL_BSP_MAX_QUEUE_SIZE)")
    return
  end
  self.queue[#self.queue + 1] = span
  if #self.queue >= self.settings.batch then
    self:_kick()
  elseif not self.timer and not self.inflight then
    local delay = self.settings.delay / 1000
    self.timer = runtime.spawn(function()
      runtime.sleep(delay)
      self.timer = nil
      self:_kick()
    end)
  end
end

--- Send what is queued now and wait for it (at most the export timeout,
-- per batch); call it once the runs are done.
function Exporter:shutdown()
  if self.timer then
    self.timer:cancel()
    self.timer = nil
  end
  if #self.queue > 0 then self:_kick() end
  local t = self.inflight
  if t then pcall(t.wait, t) end
  if self.dropped > 0 then
    self.warn(self.dropped .. " span(s) dropped: the export queue was full")
  end
end

--- The exporter the environment and config ask for, or nil: what the CLI
-- commands use (bad settings are a warning, never a failure).
-- @tparam[opt] table traces_config the config file's `traces` table
-- @tparam[opt] function warn `warn(line)` (default: a line on stderr)
-- @usage local exp = trace.from_config(cfg.traces)
-- if exp then local rt = exp:run_tracer{agent = "a", model = "test"}
--   -- pass rt.on_event / rt.on_message to the run (alongside your own), then
--   exp:shutdown() end
function M.from_config(traces_config, warn)
  warn = warn or function(line) io.stderr:write(shown(line), "\n") end
  local settings, err = M.settings(traces_config)
  if not settings then
    if err then warn("lash: warning: traces are off: " .. err) end
    return nil
  end
  return M.exporter(settings, function(msg) warn("lash: warning: traces: " .. msg) end)
end

---------------------------------------------------------------------------
-- Spans of one run

local function random_id(n)
  local id
  repeat id = runtime.sys.random(n) until id ~= string.rep("\0", n)
  return id
end

local function from_hex(h)
  return (h:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end))
end

-- W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>
local function parse_traceparent(s)
  if type(s) ~= "string" then return nil end
  local v, tid, pid = s:lower():match("^(%x%x)%-(%x+)%-(%x+)%-%x%x$")
  if not v or v == "ff" or #tid ~= 32 or #pid ~= 16 then return nil end
  if tid == string.rep("0", 32) or pid == string.rep("0", 16) then return nil end
  return from_hex(tid), from_hex(pid)
end

local function provider_of(model)
  model = tostring(model or "")
  local p = model:match("^([%w%-_]+):")
  if p == "openai-responses" then return "openai" end
  return p or model
end

local function model_of(model)
  model = tostring(model or "")
  return model:match("^[%w%-_]+:(.+)$") or model
end

local Tracer = {}
Tracer.__index = Tracer

--- Spans for one run, fed by its events and messages.
-- @tparam table meta `agent`, `model`, `conversation` (session id), `spec`
-- @treturn table with `on_event(ev)` and `on_message(msg)`
function Exporter:run_tracer(meta)
  local trace_id, parent = parse_traceparent(os.getenv("TRACEPARENT"))
  local t = setmetatable({ exporter = self, meta = meta or {}, trace_id = trace_id or random_id(16),
                           parent = parent, tools = {}, chat = nil, root = nil, children = {} }, Tracer)
  return {
    on_event = function(ev) t:event(ev) end,
    on_message = function(msg) t:message(msg) end,
    tracer = t,
  }
end

function Tracer:_span(name, kind, parent, attrs)
  return { trace_id = self.trace_id, span_id = random_id(8), parent_span_id = parent, name = name,
           kind = kind, start_ns = now_ns(), attributes = attrs or {}, status = { code = 0 } }
end

function Tracer:_end(span, code, message)
  span.end_ns = now_ns()
  if code then span.status = { code = code, message = message } end
  self.exporter:add(span)
end

local function add(span, key, value)
  if value ~= nil then span.attributes[#span.attributes + 1] = { key, value } end
end

-- Attribute keys are unique in a span: a later value replaces an earlier one.
local function set(span, key, value)
  for _, kv in ipairs(span.attributes) do
    if kv[1] == key then kv[2] = value return end
  end
  add(span, key, value)
end

local function cut(s, n)
  s = tostring(s or "")
  if #s > n then return s:sub(1, n) end
  return s
end

local function add_usage(span, u)
  if type(u) ~= "table" then return end
  add(span, "gen_ai.usage.input_tokens", math.tointeger(u.input_tokens))
  add(span, "gen_ai.usage.output_tokens", math.tointeger(u.output_tokens))
  if (u.cache_read_tokens or 0) > 0 then add(span, "gen_ai.usage.cache_read.input_tokens", math.tointeger(u.cache_read_tokens)) end
  if (u.cache_write_tokens or 0) > 0 then add(span, "gen_ai.usage.cache_creation.input_tokens", math.tointeger(u.cache_write_tokens)) end
end

-- The tracer of a sub-agent's run (its events carry `path`): its spans
-- hang under the execute_tool span of the parent's call that started it.
-- One map of every child tracer, by path, shared down the tree.
function Tracer:_child(ev)
  local path = ev.path
  local key = table.concat(path, "\0")
  local c = self.children[key]
  if c or ev.type ~= "run_start" then return c, key end
  local up = self
  if #path > 2 then up = self.children[table.concat(path, "\0", 1, #path - 1)] end
  if not up then return nil, key end
  local call_id = path[#path]:match("#(.*)$")
  local span = call_id and up.tools[call_id] or up.root
  c = setmetatable({ exporter = self.exporter, meta = { model = ev.model }, trace_id = self.trace_id,
                     parent = span and span.span_id, tools = {}, children = self.children, nested = true }, Tracer)
  self.children[key] = c
  return c, key
end

function Tracer:event(ev)
  if ev.path then
    local c, key = self:_child(ev)
    if c then
      c:_event(ev)
      if ev.type == "run_end" then self.children[key] = nil end
    end
    return
  end
  self:_event(ev)
end

function Tracer:_event(ev)
  local ty = ev.type
  if ty == "run_start" then
    local model = ev.model or self.meta.model
    self.model = model
    local s = self:_span("invoke_agent " .. tostring(ev.agent or "agent"), otlp.KIND.internal, self.parent)
    add(s, "gen_ai.operation.name", "invoke_agent")
    add(s, "gen_ai.agent.name", ev.agent)
    add(s, "gen_ai.provider.name", provider_of(model))
    add(s, "gen_ai.request.model", model_of(model))
    add(s, "gen_ai.conversation.id", self.meta.conversation)
    add(s, "lash.spec", self.meta.spec)
    self.root = s
  elseif ty == "model_request" and self.root then
    if self.chat then self:_end(self.chat) end
    local s = self:_span("chat " .. model_of(ev.model), otlp.KIND.client, self.root.span_id)
    add(s, "gen_ai.operation.name", "chat")
    add(s, "gen_ai.provider.name", provider_of(ev.model))
    add(s, "gen_ai.request.model", model_of(ev.model))
    add(s, "lash.step", math.tointeger(ev.step))
    self.chat = s
  elseif ty == "usage" and self.chat then
    self.chat_usage = ev.usage
    self.chat_response = ev
    -- a sub-agent's messages do not reach the tracer: its response ends here
    if self.nested then self:message({ role = "assistant", finish = ev.finish, model = ev.response_model }) end
  elseif ty == "retry" and ev.kind == "model" and self.chat then
    set(self.chat, "lash.retries", math.tointeger(ev.attempt))
  elseif ty == "tool_call" and self.root then
    local s = self:_span("execute_tool " .. tostring(ev.name), otlp.KIND.internal, self.root.span_id)
    add(s, "gen_ai.operation.name", "execute_tool")
    add(s, "gen_ai.tool.name", ev.name)
    add(s, "gen_ai.tool.call.id", ev.id)
    add(s, "gen_ai.tool.type", "function")
    if ev.id then self.tools[ev.id] = s end
  elseif ty == "tool_result" then
    local s = ev.id and self.tools[ev.id]
    if s then
      self.tools[ev.id] = nil
      add(s, "lash.tool.status", ev.status)
      if ev.status == "retry" then
        add(s, "error.type", "tool_retry")
        self:_end(s, otlp.STATUS.error, cut(ev.content, 512))
      else
        self:_end(s)
      end
    end
  elseif ty == "run_end" and self.root then
    self:_finish(ev)
  end
end

function Tracer:message(msg)
  if msg.role ~= "assistant" or not self.chat then return end
  local s = self.chat
  self.chat = nil
  local r = self.chat_response or {}
  self.chat_response = nil
  add(s, "gen_ai.response.model", type(r.response_model) == "string" and r.response_model or model_of(msg.model))
  if type(r.response_id) == "string" then add(s, "gen_ai.response.id", r.response_id) end
  add(s, "gen_ai.response.finish_reasons", { tostring(msg.finish or "stop") })
  add_usage(s, msg.usage or self.chat_usage)
  self.chat_usage = nil
  self:_end(s)
end

function Tracer:_finish(ev)
  local err = ev.error
  local code = err and otlp.STATUS.error or nil
  local etype = err and tostring(err.kind or "error") or nil
  if self.chat then
    add(self.chat, "error.type", etype or "incomplete")
    self:_end(self.chat, err and code or otlp.STATUS.error, err and cut(err.message, 512) or "no response")
    self.chat = nil
  end
  local ids = {}
  for id in pairs(self.tools) do ids[#ids + 1] = id end
  table.sort(ids)
  for _, id in ipairs(ids) do
    local s = self.tools[id]
    set(s, "lash.tool.status", ev.stop_reason == "approval_required" and "pending_approval" or "not_finished")
    if err then add(s, "error.type", etype) end
    self:_end(s, err and code or nil, err and cut(err.message, 512) or nil)
  end
  self.tools = {}
  local root = self.root
  self.root = nil
  add_usage(root, ev.usage)
  add(root, "lash.stop_reason", ev.stop_reason)
  if err then add(root, "error.type", etype) end
  self:_end(root, code, err and cut(err.message, 512) or nil)
end

return M
