-- The anthropic adapter against a loopback server speaking the Messages
-- API wire format (tests/servers/fake_anthropic.py, fixtures in
-- tests/fixtures/anthropic/).
local lash = require "lash"
local fake = require "helpers.fake_server"

local MODEL = "anthropic:claude-sonnet-4-6"

local weather = lash.tool { name = "get_weather", description = "Get the current weather in a given location",
  parameters = { type = "object", properties = {
    location = { type = "string", description = "The city and state, e.g. San Francisco, CA" },
    unit = { type = "string", enum = { "celsius", "fahrenheit" } } }, required = { "location" } },
  handler = function(_, a) return "15 degrees in " .. a.location end }
local clock = lash.tool { name = "get_time", description = "Get the time in a timezone",
  parameters = { type = "object", properties = { timezone = { type = "string" } }, required = { "timezone" } },
  handler = function() return "09:30" end }

local helpers_events = require "helpers.events"
local collector, of_type = helpers_events.collector, helpers_events.of_type

local describe_or_skip = fake.available() and describe or pending

describe_or_skip("anthropic model", function()
  local srv

  setup(function() srv = fake.start("anthropic") end)
  teardown(function() if srv then srv:stop() end end)

  local function agent(extra, opts)
    local model_opts = { MODEL, api_key = "test-key", base_url = srv.base, retry_delay = 0.001 }
    for k, v in pairs(opts or {}) do model_opts[k] = v end
    local def = { model = model_opts, tools = { weather, clock }, instructions = "Be brief." }
    for k, v in pairs(extra or {}) do def[k] = v end
    return lash.agent(def)
  end

  -- with a key in the environment there is nothing to check: say so rather than pass
  local it_without_key = os.getenv("ANTHROPIC_API_KEY") and pending or it
  it_without_key("needs a key before any request", function()
    srv:script("text")
    local a = lash.agent { model = { MODEL, base_url = srv.base } }
    local ok, err = pcall(a.run, a, "hi")
    assert.is_false(ok)
    assert.equal("ANTHROPIC_API_KEY is not set: export it (or pass api_key = ... in the model options) to use "
      .. "anthropic:claude-sonnet-4-6", err.message)
    assert.same({}, srv:requests())
  end)

  it("sends the Messages API request and reads a plain answer", function()
    srv:script("text")
    local res = agent():run("Hello")
    assert.equal("Hi! My name is Claude.", res.output)
    assert.equal("complete", res.stop_reason)
    assert.same({ requests = 1, input_tokens = 2095, output_tokens = 503, cache_read_tokens = 0,
                  cache_write_tokens = 0, tool_calls = 0 }, res.usage)
    local req = srv:requests()[1]
    assert.equal("/v1/messages", req.path)
    assert.equal("test-key", req.headers["x-api-key"])
    assert.equal("2023-06-01", req.headers["anthropic-version"])
    assert.equal("application/json", req.headers["content-type"])
    local b = req.body
    assert.equal("claude-sonnet-4-6", b.model)
    assert.equal(8192, b.max_tokens)
    assert.is_nil(b.stream)
    assert.same({ { type = "text", text = "Be brief.", cache_control = { type = "ephemeral" } } }, b.system)
    assert.same({ { role = "user", content = { { type = "text", text = "Hello", cache_control = { type = "ephemeral" } } } } },
                b.messages)
    -- tools in a stable order, cache_control on the last one only
    assert.equal("get_weather", b.tools[1].name)
    assert.equal("get_time", b.tools[2].name)
    assert.is_nil(b.tools[1].cache_control)
    assert.same({ type = "ephemeral" }, b.tools[2].cache_control)
    assert.same({ "location" }, b.tools[1].input_schema.required)
    assert.equal("object", b.tools[1].input_schema.type)
  end)

  it("honours model_settings and cache = false", function()
    srv:script("text")
    agent({ model_settings = { max_tokens = 100, temperature = 0 } }, { cache = false }):run("Hello")
    local b = srv:requests()[1].body
    assert.equal(100, b.max_tokens)
    assert.equal(0, b.temperature)
    assert.is_nil(b.system[1].cache_control)
    assert.is_nil(b.tools[2].cache_control)
    assert.is_nil(b.messages[1].content[1].cache_control)
  end)

  it("streams text deltas", function()
    srv:script("text_stream")
    local events, on_event = collector()
    local res = agent():run("Hello", { on_event = on_event })
    local deltas = {}
    for _, e in ipairs(of_type(events, "text_delta")) do deltas[#deltas + 1] = e.text end
    assert.same({ "Hello", "! How can I", " help you today?" }, deltas)
    assert.equal("Hello! How can I help you today?", res.output)
    assert.is_true(srv:requests()[1].body.stream)
    assert.equal(25, res.usage.input_tokens)
    assert.equal(15, res.usage.output_tokens)
  end)

  it("runs several tool_use blocks of one turn and sends tool_result blocks back", function()
    srv:script("tools_two")
    local res = agent():run("Weather and time in SF?", { stream = false })
    assert.equal("It is 15 degrees and sunny in San Francisco, and 09:30 there.", res.output)
    assert.equal(2, res.usage.tool_calls)
    local second = srv:requests()[2].body.messages
    assert.equal(3, #second)
    assert.equal("assistant", second[2].role)
    assert.same({ type = "tool_use", id = "toolu_01A09q90qw90lq917835lq9", name = "get_weather",
                  input = { location = "San Francisco, CA", unit = "celsius" } }, second[2].content[2])
    assert.equal("user", second[3].role)
    assert.same({ type = "tool_result", tool_use_id = "toolu_01A09q90qw90lq917835lq9",
                  content = "15 degrees in San Francisco, CA" }, second[3].content[1])
    assert.same({ type = "tool_result", tool_use_id = "toolu_01B19r01rx01mr028946mr0", content = "09:30",
                  cache_control = { type = "ephemeral" } }, second[3].content[2])
  end)

  it("assembles streamed tool input from input_json_delta", function()
    srv:script("tools_stream")
    local events, on_event = collector()
    local res = agent():run("Weather?", { on_event = on_event })
    local calls = of_type(events, "tool_call")
    assert.equal(2, #calls)
    assert.same({ location = "San Francisco, CA", unit = "celsius" }, calls[1].args)
    assert.same({ timezone = "America/Los_Angeles" }, calls[2].args)
    assert.equal("It is 15 degrees and 09:30.", res.output)
    assert.same({ type = "text", text = "Okay, let me check." }, res.messages[2].parts[1])
  end)

  it("reports a max_tokens stop", function()
    srv:script("max_tokens")
    local res = agent():run("Tell me a story")
    assert.equal("max_tokens", res.stop_reason)
    assert.equal("Here is a very long story that", res.output)
    assert.equal("length", res.messages[2].finish)
  end)

  it("does not retry a 400 and reports the provider's message", function()
    srv:script("error_400")
    local a = agent()
    local ok, err = pcall(a.run, a, "hi")
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "provider"))
    assert.equal(400, err.status)
    assert.equal("invalid_request_error", err.error_type)
    assert.equal("anthropic: HTTP 400 invalid_request_error: messages: at least one message is required (POST "
      .. srv.base .. "/v1/messages)", err.message)
    assert.equal(1, #srv:requests())
  end)

  it("does not retry a 401 and says to check the key", function()
    srv:script("auth_401")
    local a = agent()
    local ok, err = pcall(a.run, a, "hi")
    assert.is_true(lash.is_error(err, "auth"))
    assert.matches("check the API key", err.message, 1, true)
    assert.equal(1, #srv:requests())
  end)

  it("retries a 429, honouring retry-after", function()
    srv:script("rate_limit")
    local events, on_event = collector()
    local res = agent():run("hi", { on_event = on_event, stream = false })
    assert.equal("Hi! My name is Claude.", res.output)
    local retries = of_type(events, "retry")
    assert.equal(1, #retries)
    assert.equal("model", retries[1].kind)
    assert.equal(429, retries[1].status)
    assert.equal(1, retries[1].delay)
    assert.equal(2, #srv:requests())
  end)

  it("retries 500 and 529 with backoff, then succeeds", function()
    srv:script("server_500")
    local events, on_event = collector()
    local res = agent():run("hi", { on_event = on_event, stream = false })
    assert.equal("Hi! My name is Claude.", res.output)
    local retries = of_type(events, "retry")
    assert.same({ 500, 529 }, { retries[1].status, retries[2].status })
    assert.equal(3, #srv:requests())
  end)

  it("gives up after max_retries", function()
    srv:script("server_500")
    local a = agent(nil, { max_retries = 1 })
    local ok, err = pcall(a.run, a, "hi")
    assert.is_false(ok)
    assert.equal(529, err.status)
    assert.equal(2, err.attempts)
    assert.equal(2, #srv:requests())
  end)

  it("retries a stream cut in the middle of an event", function()
    srv:script("stream_cut")
    local events, on_event = collector()
    local res = agent():run("hi", { on_event = on_event })
    assert.equal("Hello there", res.output)
    local retries = of_type(events, "retry")
    assert.equal(1, #retries)
    assert.equal("stream", retries[1].reason)
    assert.equal(2, #srv:requests())
  end)

  it("retries an overloaded error event inside the stream", function()
    srv:script("stream_error_event")
    local events, on_event = collector()
    local res = agent():run("hi", { on_event = on_event })
    assert.equal("Recovered.", res.output)
    assert.equal(529, of_type(events, "retry")[1].status)
  end)

  it("sends malformed tool input back as a retry prompt", function()
    srv:script("bad_tool_json")
    local res = agent():run("Weather?", { stream = true })
    assert.equal("15 degrees.", res.output)
    local r = res.messages[3].parts[1]
    assert.equal("retry", r.status)
    assert.matches("^The arguments are not valid JSON", r.content)
    assert.equal('{"location": "San Francisco', res.messages[2].parts[1].args_json)
    -- replayed to the API as an object, with an is_error result
    local second = srv:requests()[2].body.messages
    assert.same({}, second[2].content[1].input)
    assert.is_true(second[3].content[1].is_error)
  end)

  it("maps prompt-cache usage", function()
    srv:script("cache_usage")
    local res = agent():run("hi")
    assert.same({ requests = 1, input_tokens = 4250, output_tokens = 5, cache_read_tokens = 2400,
                  cache_write_tokens = 1800, tool_calls = 0 }, res.usage)
  end)

  it("retries a refused connection, then fails with a connect error", function()
    local a = lash.agent { model = { MODEL, api_key = "k", base_url = "http://127.0.0.1:1", retry_delay = 0.001 } }
    local events, on_event = collector()
    local ok, err = pcall(a.run, a, "hi", { on_event = on_event })
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "connect"))
    assert.equal(2, #of_type(events, "retry"))
  end)
end)

describe("anthropic request bodies across steps", function()
  local json = require "lash.json"
  local anthropic = require "lash.models.anthropic"
  local function text(role, t) return { role = role, parts = { { type = "text", text = t } } } end

  for _, cache in ipairs { true, false } do
    it("stay the bytes of a body built afresh as the history grows and merges (cache " .. tostring(cache) .. ")",
      function()
        local m = anthropic.new("claude-x", { api_key = "k", base_url = "http://127.0.0.1:1", cache = cache })
        local history = { text("user", "hi") }
        local function body(h) return json.encode_canonical(m:body({ messages = h, instructions = "be brief" }, true)) end
        local function fresh()
          local copy = {}
          for i, x in ipairs(history) do copy[i] = json.copy(x) end
          return body(copy)
        end
        local steps = {
          { role = "assistant", parts = { { type = "tool_call", id = "c1", name = "t", args = { n = 1 } } } },
          { role = "user", parts = { { type = "tool_result", id = "c1", name = "t", content = "r1" } } },
          text("user", "and more"),          -- merges into the tool result's user message
          text("user", "still more"),        -- and again
          text("assistant", "ok"),
          { role = "assistant", parts = { { type = "tool_call", id = "c2", name = "t", args = { n = 2 } } } },
          { role = "user", parts = { { type = "tool_result", id = "c2", name = "t", content = "r2" } } },
        }
        assert.equal(fresh(), body(history))
        for _, msg in ipairs(steps) do
          history[#history + 1] = msg
          assert.equal(fresh(), body(history))
          assert.equal(fresh(), body(history))   -- again, nothing added
        end
        local decoded = json.decode(body(history))
        assert.equal(5, #decoded.messages)       -- user, assistant, user (3 merged), assistant (2 merged), user
        local last = decoded.messages[#decoded.messages].content
        assert.equal(cache and "ephemeral" or nil, last[#last].cache_control and last[#last].cache_control.type)
        -- only the newest message carries the breakpoint
        local first = decoded.messages[1].content
        assert.is_nil(first[#first].cache_control)
      end)
  end
end)
