-- lash.trace: export settings from OTEL_* and the config; the span tree a
-- run's events make (failures, calls left waiting for approval); lash.otlp's
-- protobuf bytes for the values the wire has edge cases for.
local trace = require "lash.trace"
local otlp = require "lash.otlp"

local function env(t) return function(k) return t[k] end end

describe("lash.trace settings", function()
  it("are off without an endpoint, and on with one (+ /v1/traces)", function()
    assert.is_nil(trace.settings(nil, env {}))
    local s = assert(trace.settings(nil, env { OTEL_EXPORTER_OTLP_ENDPOINT = "http://c:4318/" }))
    assert.equal("http://c:4318/v1/traces", s.url)
    assert.equal("http/protobuf", s.protocol)
    assert.equal(10000, s.timeout)
    assert.equal(512, s.batch)
  end)

  it("take the traces endpoint as it is, and the environment over the config", function()
    local s = trace.settings({ endpoint = "http://cfg:1", protocol = "http/json" },
      env { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = "http://t:2/custom", OTEL_EXPORTER_OTLP_PROTOCOL = "http/protobuf" })
    assert.equal("http://t:2/custom", s.url)
    assert.equal("http/protobuf", s.protocol)
    s = trace.settings({ endpoint = "http://cfg:1", protocol = "http/json", service_name = "svc" }, env {})
    assert.same({ "http://cfg:1/v1/traces", "http/json", "svc" }, { s.url, s.protocol, s.service_name })
  end)

  it("are off when the SDK or the exporter is disabled", function()
    local on = { OTEL_EXPORTER_OTLP_ENDPOINT = "http://c:1" }
    assert.is_nil(trace.settings(nil, env(setmetatable({ OTEL_SDK_DISABLED = "true" }, { __index = on }))))
    assert.is_nil(trace.settings(nil, env(setmetatable({ OTEL_TRACES_EXPORTER = "none" }, { __index = on }))))
  end)

  it("refuse what lash cannot do, saying why", function()
    local _, err = trace.settings(nil, env { OTEL_EXPORTER_OTLP_ENDPOINT = "http://c:1", OTEL_EXPORTER_OTLP_PROTOCOL = "grpc" })
    assert.matches("'grpc' is not supported", err, 1, true)
    _, err = trace.settings(nil, env { OTEL_EXPORTER_OTLP_ENDPOINT = "c:1" })
    assert.matches("must be an http:// or https:// URL", err, 1, true)
    _, err = trace.settings(nil, env { OTEL_EXPORTER_OTLP_ENDPOINT = "http://c:1", OTEL_EXPORTER_OTLP_TIMEOUT = "soon" })
    assert.matches("OTEL_EXPORTER_OTLP_TIMEOUT must be a whole number", err, 1, true)
  end)

  it("decode headers and resource attributes (percent-encoded, traces over general)", function()
    local s = trace.settings(nil, env {
      OTEL_EXPORTER_OTLP_ENDPOINT = "http://c:1",
      OTEL_EXPORTER_OTLP_HEADERS = "a=1, b = two%20words",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS = "a=3",
      OTEL_RESOURCE_ATTRIBUTES = "deployment.environment=ci,service.name=from-attrs",
    })
    assert.same({ a = "3", b = "two words" }, s.headers)
    assert.equal("from-attrs", s.resource[1][2])
    assert.same({ "deployment.environment", "ci" }, s.resource[5])
  end)
end)

describe("lash.trace spans", function()
  local function tracer()
    local got = {}
    local exp = trace.exporter({ batch = 1000, delay = 1000000, queue = 1000, resource = {}, protocol = "http/json" })
    exp.add = function(_, span) got[#got + 1] = span end
    return exp:run_tracer { agent = "a", model = "openai:gpt-4.1", conversation = "abc" }, got
  end
  local function attrs(span)
    local t = {}
    for _, kv in ipairs(span.attributes) do t[kv[1]] = kv[2] end
    return t
  end

  it("make the run the parent of its requests and calls", function()
    local rt, got = tracer()
    rt.on_event { type = "run_start", agent = "a", model = "openai:gpt-4.1" }
    rt.on_event { type = "model_request", step = 1, model = "openai:gpt-4.1" }
    rt.on_event { type = "retry", kind = "model", step = 1, attempt = 1 }
    rt.on_event { type = "retry", kind = "model", step = 1, attempt = 2 }
    rt.on_event { type = "usage", step = 1, usage = { input_tokens = 5, output_tokens = 2 }, response_model = "gpt-4.1-x" }
    rt.on_message { role = "assistant", finish = "tool_calls", usage = { input_tokens = 5, output_tokens = 2 } }
    rt.on_event { type = "tool_call", id = "c1", name = "t" }
    rt.on_event { type = "tool_result", id = "c1", name = "t", status = "retry", content = "bad args" }
    rt.on_event { type = "run_end", stop_reason = "complete", usage = { input_tokens = 5, output_tokens = 2 } }
    assert.same({ "chat gpt-4.1", "execute_tool t", "invoke_agent a" }, { got[1].name, got[2].name, got[3].name })
    local root = got[3]
    assert.is_nil(root.parent_span_id)
    assert.equal(root.span_id, got[1].parent_span_id)
    assert.equal(root.span_id, got[2].parent_span_id)
    assert.equal(16, #root.trace_id)
    local chat = attrs(got[1])
    assert.same({ "openai", "gpt-4.1", "gpt-4.1-x", 5, 2 }, { chat["gen_ai.provider.name"], chat["gen_ai.request.model"],
      chat["gen_ai.response.model"], chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"] })
    assert.same({ "tool_calls" }, chat["gen_ai.response.finish_reasons"])
    assert.equal(2, chat["lash.retries"])
    local keys = {}
    for _, kv in ipairs(got[1].attributes) do
      assert.is_nil(keys[kv[1]], "duplicate attribute " .. kv[1])
      keys[kv[1]] = true
    end
    assert.equal(otlp.STATUS.error, got[2].status.code)
    assert.equal("tool_retry", attrs(got[2])["error.type"])
    assert.equal("abc", attrs(root)["gen_ai.conversation.id"])
  end)

  it("nest a sub-agent's spans under the parent's tool span of the call that started it", function()
    local rt, got = tracer()
    local lash = require "lash"
    local grandchild = lash.agent { name = "leaf", model = function() return "leaf done" end }
    local child = lash.agent { name = "mid", tools = { grandchild:as_tool() }, model = lash.script_model {
      { tool_calls = { { name = "leaf", args = { input = "x" }, id = "g1" } } }, "mid done" } }
    local parent = lash.agent { name = "top", tools = { child:as_tool() }, model = lash.script_model {
      { tool_calls = { { name = "mid", args = { input = "y" }, id = "c1" } } }, "top done" } }
    parent:run("go", { on_event = rt.on_event, on_message = rt.on_message })
    local by = {}
    for _, sp in ipairs(got) do by[sp.name] = by[sp.name] or sp end
    assert.equal(by["execute_tool mid"].span_id, by["invoke_agent mid"].parent_span_id)
    assert.equal(by["invoke_agent top"].span_id, by["execute_tool mid"].parent_span_id)
    assert.equal(by["invoke_agent mid"].span_id, by["execute_tool leaf"].parent_span_id)
    assert.equal(by["execute_tool leaf"].span_id, by["invoke_agent leaf"].parent_span_id)
    local chats = 0
    for _, sp in ipairs(got) do
      assert.equal(got[1].trace_id, sp.trace_id)
      if sp.name:match("^chat") then chats = chats + 1 end
    end
    -- 2 requests of top, 2 of mid, 1 of leaf
    assert.equal(5, chats)
    assert.equal(10, #got)
  end)

  it("end what a failed run left open with its error, and mark calls left for approval", function()
    local rt, got = tracer()
    rt.on_event { type = "run_start", agent = "a", model = "test" }
    rt.on_event { type = "model_request", step = 1, model = "test" }
    rt.on_event { type = "run_end", stop_reason = "error", error = { kind = "provider", message = "HTTP 500" } }
    assert.equal(2, #got)
    assert.same({ otlp.STATUS.error, "provider" }, { got[1].status.code, attrs(got[1])["error.type"] })
    assert.same({ otlp.STATUS.error, "provider", "HTTP 500" }, { got[2].status.code, attrs(got[2])["error.type"], got[2].status.message })
    rt, got = tracer()
    rt.on_event { type = "run_start", agent = "a", model = "test" }
    rt.on_event { type = "tool_call", id = "c9", name = "rm" }
    rt.on_event { type = "run_end", stop_reason = "approval_required" }
    assert.equal("pending_approval", attrs(got[1])["lash.tool.status"])
    assert.equal(otlp.STATUS.unset, got[2].status.code)
  end)
end)

describe("lash.otlp protobuf", function()
  it("writes negative integers as ten-byte varints and leaves zero fields out", function()
    local span = { trace_id = string.rep("\1", 16), span_id = string.rep("\2", 8), name = "n", kind = 0,
                   start_ns = 0, end_ns = 1, attributes = { { "k", -1 } }, status = { code = 0 } }
    local body = otlp.protobuf({}, { name = "lash" }, { span })
    assert.truthy(body:find("\255\255\255\255\255\255\255\255\255\1", 1, true))
    assert.is_nil(body:find("\48\0", 1, true))  -- no kind = 0 (field 6, varint)
    assert.truthy(body:find("\65\1\0\0\0\0\0\0\0", 1, true))  -- end_time_unix_nano = 1 (field 8, fixed64)
  end)
end)
