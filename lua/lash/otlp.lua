--- OTLP trace export bodies: an `ExportTraceServiceRequest`
-- (opentelemetry-proto, collector/trace/v1) as protobuf bytes
-- (`http/protobuf`) or as OTLP/JSON (`http/json`), from plain Lua spans.
--
-- A span here is `{ trace_id = 16 bytes, span_id = 8 bytes, parent_span_id
-- = 8 bytes | nil, name =, kind = 1..5, start_ns =, end_ns = (integers, Unix
-- nanoseconds), attributes = { {key, value}, ... }, status = { code = 0..2,
-- message = } }`; a value is a string, boolean, integer, float or a list of
-- them. Field numbers follow the pinned .proto files (tests/otlp/upstream);
-- fields are written in number order and zero values left out, as proto3
-- serializers do. OTLP/JSON differs from protobuf's JSON mapping as the
-- OTLP spec says: trace and span ids are hex, enums are integers.
-- @module lash.otlp
local json = require "lash.json"

local M = {}

M.KIND = { internal = 1, server = 2, client = 3, producer = 4, consumer = 5 }
M.STATUS = { unset = 0, ok = 1, error = 2 }

---------------------------------------------------------------------------
-- protobuf

local char, concat, spack = string.char, table.concat, string.pack

local function varint(n)
  local out = {}
  repeat
    local b = n & 0x7f
    n = n >> 7  -- logical: a negative int64 takes ten bytes, as on the wire
    out[#out + 1] = char(n ~= 0 and (b | 0x80) or b)
  until n == 0
  return concat(out)
end

local function tag(field, wire) return varint(field << 3 | wire) end
local function len_field(field, s) return tag(field, 2) .. varint(#s) .. s end
local function str_field(field, s)
  if s == nil or s == "" then return "" end
  return len_field(field, s)
end
local function uint_field(field, n)
  if n == nil or n == 0 then return "" end
  return tag(field, 0) .. varint(n)
end
local function fixed64_field(field, n)
  if n == nil or n == 0 then return "" end
  return tag(field, 1) .. spack("<i8", n)
end

local pb_any

-- common.v1.ArrayValue { repeated AnyValue values = 1 }
local function pb_array(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = len_field(1, pb_any(v)) end
  return concat(out)
end

-- common.v1.AnyValue { oneof: string 1, bool 2, int64 3, double 4, ArrayValue 5 }
function pb_any(v)
  local t = type(v)
  if t == "string" then return len_field(1, v)
  elseif t == "boolean" then return tag(2, 0) .. varint(v and 1 or 0)
  elseif math.type(v) == "integer" then return tag(3, 0) .. varint(v)
  elseif t == "number" then return tag(4, 1) .. spack("<d", v)
  elseif t == "table" then return len_field(5, pb_array(v))
  end
  return len_field(1, tostring(v))
end

-- common.v1.KeyValue { string key = 1; AnyValue value = 2 }
local function pb_attributes(field, attrs)
  local out = {}
  for i, kv in ipairs(attrs or {}) do
    out[i] = len_field(field, str_field(1, kv[1]) .. len_field(2, pb_any(kv[2])))
  end
  return concat(out)
end

-- trace.v1.Span
local function pb_span(s)
  local status = ""
  if s.status and (s.status.code ~= 0 or (s.status.message or "") ~= "") then
    -- Status { string message = 2; StatusCode code = 3 }
    status = len_field(15, str_field(2, s.status.message) .. uint_field(3, s.status.code))
  end
  return str_field(1, s.trace_id) .. str_field(2, s.span_id) .. str_field(4, s.parent_span_id)
    .. str_field(5, s.name) .. uint_field(6, s.kind) .. fixed64_field(7, s.start_ns)
    .. fixed64_field(8, s.end_ns) .. pb_attributes(9, s.attributes) .. status
end

--- The request as protobuf bytes (Content-Type: application/x-protobuf).
-- @tparam table resource attributes list `{ {key, value}, ... }`
-- @tparam table scope `{ name =, version = }`
-- @tparam table spans list of spans
function M.protobuf(resource, scope, spans)
  local sp = {}
  for i, s in ipairs(spans) do sp[i] = len_field(2, pb_span(s)) end
  -- ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2 }
  local scope_spans = len_field(1, str_field(1, scope.name) .. str_field(2, scope.version)) .. concat(sp)
  -- ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2 }
  local rs = len_field(1, pb_attributes(1, resource)) .. len_field(2, scope_spans)
  -- ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1 }
  return len_field(1, rs)
end

---------------------------------------------------------------------------
-- OTLP/JSON

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local json_any

local function json_any_list(list)
  local out = json.array()
  for i, v in ipairs(list) do out[i] = json_any(v) end
  return out
end

function json_any(v)
  local t = type(v)
  if t == "string" then return { stringValue = v }
  elseif t == "boolean" then return { boolValue = v }
  elseif math.type(v) == "integer" then return { intValue = tostring(v) }  -- int64: a string
  elseif t == "number" then return { doubleValue = v }
  elseif t == "table" then return { arrayValue = { values = json_any_list(v) } }
  end
  return { stringValue = tostring(v) }
end

local function json_attributes(attrs)
  local out = json.array()
  for i, kv in ipairs(attrs or {}) do out[i] = { key = kv[1], value = json_any(kv[2]) } end
  return out
end

local function json_span(s)
  local o = { traceId = hex(s.trace_id), spanId = hex(s.span_id), name = s.name, kind = s.kind,
              startTimeUnixNano = tostring(s.start_ns), endTimeUnixNano = tostring(s.end_ns),
              attributes = json_attributes(s.attributes) }
  if s.parent_span_id then o.parentSpanId = hex(s.parent_span_id) end
  if s.status and (s.status.code ~= 0 or (s.status.message or "") ~= "") then
    o.status = { code = s.status.code, message = s.status.message }
  end
  return o
end

--- The request as OTLP/JSON text (Content-Type: application/json).
function M.json(resource, scope, spans)
  local sp = json.array()
  for i, s in ipairs(spans) do sp[i] = json_span(s) end
  return json.encode_canonical { resourceSpans = json.array {
    { resource = { attributes = json_attributes(resource) },
      scopeSpans = json.array { { scope = { name = scope.name, version = scope.version }, spans = sp } } } } }
end

--- Encode for a protocol ("http/protobuf" or "http/json").
-- @return body, content type
function M.encode(protocol, resource, scope, spans)
  if protocol == "http/json" then return M.json(resource, scope, spans), "application/json" end
  return M.protobuf(resource, scope, spans), "application/x-protobuf"
end

return M
