-- The openai adapter against a loopback server speaking the Chat
-- Completions wire format (tests/servers/fake_openai.py, fixtures in
-- tests/fixtures/openai/).
local lash = require "lash"
local fake = require "helpers.fake_server"
local openai = require "lash.models.openai"

local weather = lash.tool { name = "get_weather", description = "Get the current weather in a given location",
  parameters = { type = "object", properties = { location = { type = "string" },
    unit = { type = "string", enum = { "celsius", "fahrenheit" } } }, required = { "location" } },
  handler = function(_, a) return "15 degrees in " .. a.location end }
local clock = lash.tool { name = "get_time",
  parameters = { type = "object", properties = { timezone = { type = "string" } }, required = { "timezone" } },
  handler = function() return "12:30" end }

local helpers_events = require "helpers.events"
local collector, of_type = helpers_events.collector, helpers_events.of_type

describe("openai model options", function()
  -- with a key or base URL in the environment there is nothing to check: say so rather than pass
  local it_without_key = (os.getenv("OPENAI_API_KEY") or os.getenv("OPENAI_BASE_URL")) and pending or it
  it_without_key("needs a key for the official API", function()
    local ok, err = pcall(openai.new, "gpt-4.1", {})
    assert.is_false(ok)
    assert.equal("OPENAI_API_KEY is not set: export it (or pass api_key = ... in the model options) to use "
      .. "openai:gpt-4.1", err.message)
  end)

  it("needs no key for a local server", function()
    local m = openai.new("llama3.2", { base_url = "http://127.0.0.1:11434/v1" })
    assert.equal("http://127.0.0.1:11434/v1/chat/completions", m.url)
    assert.is_nil(m.key)
  end)

  it("needs a model name", function()
    local ok, err = pcall(openai.new, "", { base_url = "http://x" })
    assert.is_false(ok)
    assert.equal("config", err.kind)
    assert.equal("openai: no model name; write openai:<model>, e.g. openai:gpt-4.1", err.message)
  end)

  it("names an error object in a 200 response, even one without a message", function()
    local m = openai.new("x", { base_url = "http://127.0.0.1:9/v1" })
    local ok, err = pcall(m.parse, m, '{"error": {"type": "server_error", "message": "overloaded"}}')
    assert.is_false(ok)
    assert.equal("openai: error in the response from http://127.0.0.1:9/v1/chat/completions: server_error: overloaded",
      err.message)
    ok, err = pcall(m.parse, m, '{"error": {"code": 500}}')
    assert.is_false(ok)
    assert.equal('openai: error in the response from http://127.0.0.1:9/v1/chat/completions: {"error": {"code": 500}}',
      err.message)
  end)

  it("refuses unknown options", function()
    local ok, err = pcall(openai.new, "x", { base_url = "http://x", api_kye = "k" })
    assert.is_false(ok)
    assert.equal("openai: unknown model option 'api_kye' (known: api_key, base_url, headers, max_retries, "
      .. "max_retry_delay, retry_delay, stream, timeout)", err.message)
  end)
end)

local describe_or_skip = fake.available() and describe or pending

describe_or_skip("openai model", function()
  local srv

  setup(function() srv = fake.start("openai") end)
  teardown(function() if srv then srv:stop() end end)

  local function agent(extra, opts)
    local model_opts = { "openai:gpt-4.1", api_key = "sk-test", base_url = srv.base .. "/v1", retry_delay = 0.001 }
    for k, v in pairs(opts or {}) do model_opts[k] = v end
    local def = { model = model_opts, tools = { weather, clock }, instructions = "Be brief." }
    for k, v in pairs(extra or {}) do def[k] = v end
    return lash.agent(def)
  end

  it("sends a Chat Completions request and reads a plain answer", function()
    srv:script("text")
    local res = agent({ model_settings = { max_tokens = 64 } }):run("Hello")
    assert.equal("Hello there, how may I assist you today?", res.output)
    assert.same({ requests = 1, input_tokens = 19, output_tokens = 10, cache_read_tokens = 0,
                  cache_write_tokens = 0, tool_calls = 0 }, res.usage)
    local req = srv:requests()[1]
    assert.equal("/v1/chat/completions", req.path)
    assert.equal("Bearer sk-test", req.headers["authorization"])
    local b = req.body
    assert.equal("gpt-4.1", b.model)
    assert.equal(64, b.max_tokens, "not api.openai.com: max_tokens")
    assert.same({ { role = "system", content = "Be brief." }, { role = "user", content = "Hello" } }, b.messages)
    assert.same({ type = "function", ["function"] = { name = "get_weather",
      description = "Get the current weather in a given location",
      parameters = { type = "object", required = { "location" }, properties = {
        location = { type = "string" }, unit = { type = "string", enum = { "celsius", "fahrenheit" } } } } } },
      b.tools[1])
    assert.is_nil(b.tools[2]["function"].description)
  end)

  it("streams with include_usage", function()
    srv:script("text_stream")
    local events, on_event = collector()
    local res = agent():run("Hello", { on_event = on_event })
    local deltas = {}
    for _, e in ipairs(of_type(events, "text_delta")) do deltas[#deltas + 1] = e.text end
    assert.same({ "Hello", " there,", " how may I assist you today?" }, deltas)
    assert.equal(19, res.usage.input_tokens)
    local b = srv:requests()[1].body
    assert.is_true(b.stream)
    assert.same({ include_usage = true }, b.stream_options)
  end)

  it("runs several tool_calls of one turn and answers each with a tool message", function()
    srv:script("tools_two")
    local res = agent():run("Weather and time in Boston?", { stream = false })
    assert.equal("It is 15 degrees and sunny in Boston, and 12:30 there.", res.output)
    local msgs = srv:requests()[2].body.messages
    assert.equal(5, #msgs)
    assert.equal("assistant", msgs[3].role)
    assert.equal(2, #msgs[3].tool_calls)
    assert.equal("call_abc123", msgs[3].tool_calls[1].id)
    assert.equal("function", msgs[3].tool_calls[1].type)
    assert.same({ location = "Boston, MA", unit = "celsius" },
                lash.json.decode(msgs[3].tool_calls[1]["function"].arguments))
    assert.same({ role = "tool", tool_call_id = "call_abc123", content = "15 degrees in Boston, MA" }, msgs[4])
    assert.same({ role = "tool", tool_call_id = "call_def456", content = "12:30" }, msgs[5])
  end)

  it("assembles streamed tool calls from indexed fragments", function()
    srv:script("tools_stream")
    local events, on_event = collector()
    local res = agent():run("Weather?", { on_event = on_event })
    local calls = of_type(events, "tool_call")
    assert.equal(2, #calls)
    assert.equal("call_DdmO9pD3xa9XTPNJ32zg2hcA", calls[1].id)
    assert.same({ location = "Boston, MA" }, calls[1].args)
    assert.same({ timezone = "America/New_York" }, calls[2].args)
    assert.equal("It is 15 degrees and 12:30.", res.output)
    assert.equal(82 + 140, res.usage.input_tokens)
  end)

  it("streams fixtures recorded as whole responses too", function()
    srv:script("tools_two")
    local res = agent():run("Weather?", { stream = true })
    assert.equal("It is 15 degrees and sunny in Boston, and 12:30 there.", res.output)
    assert.equal(2, res.usage.tool_calls)
  end)

  it("reports a length stop", function()
    srv:script("max_tokens")
    local res = agent():run("story")
    assert.equal("max_tokens", res.stop_reason)
    assert.equal("Once upon a time there", res.output)
  end)

  it("does not retry a 400", function()
    srv:script("error_400")
    local a = agent()
    local ok, err = pcall(a.run, a, "hi")
    assert.is_false(ok)
    assert.equal(400, err.status)
    assert.equal("openai: HTTP 400 invalid_request_error: Invalid 'messages': empty array. Expected an array with "
      .. "minimum length 1. (POST " .. srv.base .. "/v1/chat/completions)", err.message)
    assert.equal(1, #srv:requests())
  end)

  it("does not retry a 401", function()
    srv:script("auth_401")
    local a = agent()
    local ok, err = pcall(a.run, a, "hi")
    assert.is_true(lash.is_error(err, "auth"))
    assert.equal(1, #srv:requests())
  end)

  it("retries 429 honouring retry-after-ms and retry-after", function()
    srv:script("rate_limit")
    local events, on_event = collector()
    local res = agent():run("hi", { on_event = on_event, stream = false })
    assert.equal("Hello there, how may I assist you today?", res.output)
    local r = of_type(events, "retry")
    assert.equal(2, #r)
    assert.equal(0.05, r[1].delay)
    assert.equal(1, r[2].delay)
    assert.equal(3, #srv:requests())
  end)

  it("retries 500 and 503 (with a non-JSON body)", function()
    srv:script("server_500")
    local events, on_event = collector()
    local res = agent():run("hi", { on_event = on_event, stream = false })
    assert.equal("Hello there, how may I assist you today?", res.output)
    local r = of_type(events, "retry")
    assert.same({ 500, 503 }, { r[1].status, r[2].status })
    assert.matches("upstream connect error", r[2].message, 1, true)
  end)

  it("retries a stream cut mid-chunk", function()
    srv:script("stream_cut")
    local events, on_event = collector()
    local res = agent():run("hi", { on_event = on_event })
    assert.equal("Hello there", res.output)
    assert.equal("stream", of_type(events, "retry")[1].reason)
  end)

  it("sends malformed tool arguments back as a retry prompt and replays them verbatim", function()
    srv:script("bad_tool_json")
    local res = agent():run("Weather?", { stream = false })
    assert.equal("15 degrees.", res.output)
    assert.equal("retry", res.messages[3].parts[1].status)
    local msgs = srv:requests()[2].body.messages
    assert.equal('{"location": "Bos', msgs[3].tool_calls[1]["function"].arguments)
    assert.matches("^The arguments are not valid JSON", msgs[4].content)
  end)

  it("maps cached prompt tokens", function()
    srv:script("cache_usage")
    local res = agent():run("hi")
    assert.equal(2006, res.usage.input_tokens)
    assert.equal(1920, res.usage.cache_read_tokens)
  end)

  it("continues a history across runs with the right message shapes", function()
    srv:script("tools_two")
    local a = agent()
    local r1 = a:run("Weather?", { stream = false })
    srv:script("text")
    a:run("And tomorrow?", { history = r1.messages, stream = false })
    local msgs = srv:requests()[1].body.messages
    assert.same({ "system", "user", "assistant", "tool", "tool", "assistant", "user" },
      (function() local t = {} for i, m in ipairs(msgs) do t[i] = m.role end return t end)())
    assert.equal("And tomorrow?", msgs[7].content)
  end)
end)

describe("openai request bodies across steps", function()
  local json = require "lash.json"
  local function msg(role, text) return { role = role, parts = { { type = "text", text = text } } } end

  it("stay the bytes of a body built afresh as the history grows and the instructions change", function()
    local m = openai.new("llama3.2", { base_url = "http://127.0.0.1:1/v1" })
    local history = { msg("user", "hi") }
    local tools = { { name = "t", description = "d", parameters = { type = "object", properties = {} } } }
    local function fresh(instr)
      local copy = {}
      for i, x in ipairs(history) do copy[i] = json.copy(x) end
      return json.encode_canonical(m:body({ messages = copy, instructions = instr, tools = tools }, true))
    end
    for step = 1, 6 do
      local instr = step < 4 and "be brief" or (step < 6 and "" or "be brief")
      local body = json.encode_canonical(m:body({ messages = history, instructions = instr, tools = tools }, true))
      assert.equal(fresh(instr), body)
      if step == 1 then assert.matches('^{"messages":%[{"content":"be brief","role":"system"},', body) end
      history[#history + 1] = msg(step % 2 == 1 and "assistant" or "user", "step " .. step)
    end
  end)

  it("stay the same for the Responses API as its input grows", function()
    local responses = require "lash.models.openai_responses"
    local m = responses.new("gpt-x", { base_url = "http://127.0.0.1:1/v1" })
    local history = { msg("user", "hi") }
    for step = 1, 5 do
      local copy = {}
      for i, x in ipairs(history) do copy[i] = json.copy(x) end
      local fresh = json.encode_canonical(m:body({ messages = copy, instructions = "x" }, false))
      assert.equal(fresh, json.encode_canonical(m:body({ messages = history, instructions = "x" }, false)))
      if step % 2 == 1 then
        history[#history + 1] = { role = "assistant", parts = { { type = "tool_call", id = "c" .. step, name = "t",
                                                                  args = { n = step } } } }
      else
        history[#history + 1] = { role = "user", parts = { { type = "tool_result", id = "c" .. (step - 1), name = "t",
                                                             content = "r" .. step } } }
      end
    end
  end)
end)
