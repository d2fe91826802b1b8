-- Models at full fidelity: reasoning, exact tool calls, checked settings,
-- structured output, images and documents, retries and the Responses API,
-- against the loopback servers replaying the providers' wire formats
-- (tests/servers/fake_*.py; fixtures in tests/fixtures/, each naming the
-- documentation it was written from).
local lash = require "lash"
local json = require "lash.json"
local fake = require "helpers.fake_server"
local helpers_events = require "helpers.events"
local collector, of_type = helpers_events.collector, helpers_events.of_type

local weather = lash.tool { name = "get_weather", description = "Get the weather",
  parameters = { type = "object", properties = { location = { type = "string" } }, required = { "location" } },
  handler = function(_, a) return "15 degrees in " .. a.location end }
local clock = lash.tool { name = "get_time",
  parameters = { type = "object", properties = { timezone = { type = "string" } }, required = { "timezone" } },
  handler = function() return "12:30" end }
local resets = 0
local reset_all = lash.tool { name = "reset_all", description = "Reset everything (no parameters)",
  parameters = { type = "object", properties = {} },
  handler = function() resets = resets + 1 return "reset" end }

local CITY = { type = "object", properties = { city = { type = "string" }, celsius = { type = "integer" } },
               required = { "city", "celsius" }, additionalProperties = false }

local PNG = "\137PNG\r\n\26\n\0\0\0\rIHDR\0\0\0\1\0\0\0\1\8\6\0\0\0\31\21\196\137"

-- reference base64 from the system's coreutils, not lash's own encoder
local function lash_b64(s)
  local p = os.tmpname()
  local f = assert(io.open(p, "wb")) f:write(s) f:close()
  local h = io.popen("base64 -w0 " .. p)
  local out = h:read("a")
  h:close()
  os.remove(p)
  return out
end

local function texts(events, t)
  local out = {}
  for _, e in ipairs(of_type(events, t)) do out[#out + 1] = e.text end
  return table.concat(out)
end

local describe_or_skip = fake.available() and describe or pending

describe_or_skip("anthropic at full fidelity", function()
  local srv
  setup(function() srv = fake.start("anthropic") end)
  teardown(function() if srv then srv:stop() end end)

  local function agent(extra, model_extra)
    local m = { "anthropic:claude-sonnet-4-6", api_key = "k", base_url = srv.base, retry_delay = 0.001 }
    for k, v in pairs(model_extra or {}) do m[k] = v end
    local def = { model = m, tools = { weather, reset_all } }
    for k, v in pairs(extra or {}) do def[k] = v end
    return lash.agent(def)
  end

  for _, stream in ipairs { true, false } do
    local mode = stream and "streamed" or "not streamed"
    it("sends thinking with a budget and keeps thinking blocks verbatim and in order (" .. mode .. ")", function()
      srv:script("thinking_tools")
      local events, on_event = collector()
      local res = agent { model_settings = { thinking = { budget_tokens = 2048 } } }
        :run("Weather in Paris?", { on_event = on_event, stream = stream })
      assert.equal("It is 15 degrees in Paris.", res.output)
      local reqs = srv:requests()
      assert.same({ type = "enabled", budget_tokens = 2048 }, reqs[1].body.thinking)
      -- the turn goes back exactly as it came: thinking (with its signature),
      -- redacted_thinking, then the tool_use
      local turn = reqs[2].body.messages[2]
      assert.equal("assistant", turn.role)
      assert.same({ type = "thinking",
                    thinking = "The user wants the weather in Paris. I should call get_weather with Paris.",
                    signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds9Yb7Hp7u+2HRsQ==" },
                  turn.content[1])
      assert.same({ type = "redacted_thinking",
                    data = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj" },
                  turn.content[2])
      assert.equal("tool_use", turn.content[3].type)
      assert.equal("toolu_01Wth3rPar1s", turn.content[3].id)
      -- the history holds them too, and the events carry the thinking text
      assert.equal("thinking", res.messages[2].parts[1].type)
      assert.equal("redacted_thinking", res.messages[2].parts[2].type)
      local t = texts(events, stream and "thinking_delta" or "thinking")
      assert.equal("The user wants the weather in Paris. I should call get_weather with Paris."
        .. "15 degrees: answer briefly.", t)
    end)
  end

  it("names a thinking_delta without its text instead of crashing", function()
    local function e(name, data) data.type = name return { event = name, data = data } end
    srv:script { { status = 200, sse = {
      e("message_start", { message = { id = "m", type = "message", role = "assistant", model = "x", content = {},
                                       usage = { input_tokens = 1, output_tokens = 1 } } }),
      e("content_block_start", { index = 0, content_block = { type = "thinking", thinking = "" } }),
      e("content_block_delta", { index = 0, delta = { type = "thinking_delta" } }) } } }
    local a = agent()
    local ok, err = pcall(a.run, a, "hi", { stream = true })
    assert.is_false(ok)
    assert.equal("provider", err.kind)
    assert.matches("content_block_delta thinking_delta without its text", err.message, 1, true)
  end)

  it("sends adaptive thinking with its effort", function()
    srv:script("text")
    agent({ model_settings = { thinking = { type = "adaptive", effort = "high" } } }):run("hi")
    local b = srv:requests()[1].body
    assert.same({ type = "adaptive" }, b.thinking)
    assert.same({ effort = "high" }, b.output_config)
    srv:script("text")
    agent({ model_settings = { thinking = "adaptive" } }):run("hi")
    assert.same({ type = "adaptive" }, srv:requests()[1].body.thinking)
  end)

  it("refuses a thinking budget below the API's minimum, before any request", function()
    srv:script("text")
    local a = agent { model_settings = { thinking = { budget_tokens = 10 } } }
    local ok, err = pcall(a.run, a, "hi")
    assert.is_false(ok)
    assert.equal("config", err.kind)
    assert.matches("budget_tokens must be an integer >= 1024", err.message, 1, true)
    assert.same({}, srv:requests())
    a = agent { model_settings = { thinking = { budget_tokens = 4096 }, max_tokens = 2048 } }
    ok, err = pcall(a.run, a, "hi")
    assert.is_false(ok)
    assert.matches("budget_tokens (4096) must be below max_tokens (2048)", err.message, 1, true)
    assert.same({}, srv:requests())
  end)

  for _, fixture in ipairs { "tool_cut_stream", "tool_cut_json" } do
    it("does not run a call cut by the output limit before any argument (" .. fixture .. ")", function()
      srv:script(fixture)
      resets = 0
      local a = agent()
      local ok, err = pcall(a.run, a, "reset", { stream = fixture == "tool_cut_stream" })
      assert.is_false(ok)
      assert.equal("model", err.kind)
      assert.equal("the model hit its output token limit in the middle of a call to 'reset_all'; "
        .. "raise model_settings.max_tokens", err.message)
      assert.equal(0, resets)
    end)
  end

  it("refuses unknown model_settings with the known list, and merges extra_body", function()
    srv:script("text")
    local a = agent { model_settings = { temprature = 0 } }
    local ok, err = pcall(a.run, a, "hi")
    assert.is_false(ok)
    assert.equal("config", err.kind)
    assert.equal("anthropic: unknown model setting 'temprature' (known: effort, extra_body, max_tokens, metadata, "
      .. "service_tier, stop_sequences, temperature, thinking, tool_choice, top_k, top_p; put provider options "
      .. "lash does not model in extra_body = {...})", err.message)
    assert.same({}, srv:requests())
    agent({ model_settings = { extra_body = { container = "c_1", max_tokens = 77 } } }):run("hi")
    local b = srv:requests()[1].body
    assert.equal("c_1", b.container)
    assert.equal(77, b.max_tokens)
  end)

  it("asks for structured output natively, validates it and retries with the problems", function()
    srv:script("structured")
    local events, on_event = collector()
    local res = agent({ output = CITY }):run("Weather in Paris as JSON", { on_event = on_event, stream = false })
    assert.same({ city = "Paris", celsius = 15 }, res.output)
    assert.equal('{"city": "Paris", "celsius": 15}', res.text)
    local reqs = srv:requests()
    assert.equal(2, #reqs)
    assert.same({ type = "json_schema", schema = CITY }, reqs[1].body.output_config.format)
    local retry = of_type(events, "retry")[1]
    assert.equal("output", retry.kind)
    assert.matches("celsius", retry.message, 1, true)
    local last = reqs[2].body.messages[3].content[1]
    assert.matches("^The answer does not match the output schema", last.text)
    assert.matches("Fix the errors and try again.", last.text, 1, true)
  end)

  it("sends image and document blocks from prompt parts", function()
    srv:script("text")
    local dir = os.tmpname()
    local f = assert(io.open(dir, "wb")) f:write(PNG) f:close()
    agent():run { "What is in these?", { type = "image", path = dir },
                  { type = "document", data = "%PDF-1.4 tiny", name = "a.pdf" },
                  { type = "document", text = "notes here", name = "notes.txt" } }
    os.remove(dir)
    local content = srv:requests()[1].body.messages[1].content
    assert.same({ type = "text", text = "What is in these?" }, content[1])
    assert.same({ type = "image", source = { type = "base64", media_type = "image/png", data = lash_b64(PNG) } },
                content[2])
    assert.same({ type = "document", title = "a.pdf",
                  source = { type = "base64", media_type = "application/pdf", data = lash_b64("%PDF-1.4 tiny") } },
                content[3])
    assert.equal("text", content[4].source.type)
    assert.equal("notes here", content[4].source.data)
  end)
end)


describe("prompt parts", function()
  local a = lash.agent { model = "test" }
  it("refuse an image over the size limit, naming the file and the limit", function()
    local p = os.tmpname()
    local f = assert(io.open(p, "wb")) f:write(PNG .. string.rep("\0", 6 * 1024 * 1024)) f:close()
    local ok, err = pcall(a.run, a, { "look", { type = "image", path = p } })
    os.remove(p)
    assert.is_false(ok)
    assert.equal("config", err.kind)
    assert.matches("is 6.0 MiB; images are limited to 5.0 MiB", err.message, 1, true)
  end)
  it("refuse a file type no provider takes", function()
    local ok, err = pcall(a.run, a, { "look", { type = "file", data = "\0\1\2\255", name = "blob.bin" } })
    assert.is_false(ok)
    assert.matches("blob.bin: unsupported file type", err.message, 1, true)
  end)
  it("encode base64 like coreutils", function()
    local parts = require "lash.models.parts"
    for _, s in ipairs { "", "a", "ab", "abc", "abcd", PNG, string.rep("\255\0\128", 1000) } do
      assert.equal(lash_b64(s), parts.base64(s))
    end
  end)
end)

describe("structured output with a model that has no native mode", function()
  it("instructs, validates, retries, then fails with an output error", function()
    local seen
    local a = lash.agent { output = CITY, retries = 1, instructions = "Be brief.",
      model = function(_, info) seen = info.instructions return "{\"city\": 3}" end }
    local ok, err = pcall(a.run, a, "go")
    assert.is_false(ok)
    assert.equal("output", err.kind)
    assert.matches("^Be brief.\n\nAnswer with only a JSON value", seen)
    assert.matches("did not match the output schema after 1 retry", err.message, 1, true)
  end)
  it("decodes a valid answer into result.output (run option)", function()
    local a = lash.agent { model = function() return "```json\n{\"city\": \"Oslo\", \"celsius\": -3}\n```" end }
    local res = a:run("go", { output = CITY })
    assert.same({ city = "Oslo", celsius = -3 }, res.output)
  end)
end)

describe("text of turns that call tools, not streamed", function()
  it("is reported as a text event and printed", function()
    local out = {}
    local printer = require("lash.cli.printer").new { write = function(s) out[#out + 1] = s end, tty = false }
    local a = lash.agent { tools = { clock }, model = require("lash.models.func").script {
      { text = "Let me check the clock.", tool_calls = { { name = "get_time", args = { timezone = "UTC" } } } },
      "Done." } }
    local events, on_event = collector()
    a:run("time?", { stream = false, on_event = function(ev) on_event(ev) printer:event(ev) end })
    printer:close()
    assert.equal("Let me check the clock.Done.", texts(events, "text"))
    assert.matches("Let me check the clock.", table.concat(out), 1, true)
  end)
end)

describe_or_skip("openai at full fidelity", function()
  local srv
  setup(function() srv = fake.start("openai") end)
  teardown(function() if srv then srv:stop() end end)

  local function agent(extra, provider)
    local def = { model = { (provider or "openai") .. ":gpt-4.1", api_key = "sk", base_url = srv.base .. "/v1",
                            retry_delay = 0.001 }, tools = { weather, clock, reset_all } }
    for k, v in pairs(extra or {}) do def[k] = v end
    return lash.agent(def)
  end

  for _, stream in ipairs { false, true } do
    it("sends numeric tool-call ids back as strings with type function (" .. (stream and "stream" or "JSON") .. ")",
      function()
        srv:script("numeric_ids")
        local events, on_event = collector()
        local res = agent():run("Weather?", { stream = stream, on_event = on_event })
        assert.equal("It is 15 degrees.", res.output)
        assert.equal("17", of_type(events, "tool_call")[1].id)
        local msgs = srv:requests()[2].body.messages
        assert.same({ id = "17", type = "function", ["function"] = { name = "get_weather",
                      arguments = '{"location":"Boston, MA"}' } }, msgs[2].tool_calls[1])
        assert.equal("17", msgs[3].tool_call_id)
        assert.equal("tool", msgs[3].role)
      end)
  end

  it("passes reasoning_effort and reports reasoning tokens", function()
    srv:script("reasoning")
    local res = agent({ model_settings = { reasoning_effort = "high" } }):run("think")
    assert.equal("high", srv:requests()[1].body.reasoning_effort)
    assert.equal(384, res.usage.reasoning_tokens)
    assert.equal(450, res.usage.output_tokens)
    assert.equal("1 request · 30 tokens in · 450 out (384 reasoning) · 0 tool calls",
                 require("lash.cli.printer").usage_line(res.usage))
  end)

  it("refuses unknown model_settings, and merges extra_body", function()
    local a = agent { model_settings = { max_token = 5 } }
    local ok, err = pcall(a.run, a, "hi")
    assert.is_false(ok)
    assert.matches("^openai: unknown model setting 'max_token' %(known: extra_body, frequency_penalty,", err.message)
    srv:script("text")
    agent({ model_settings = { extra_body = { top_k = 20, chat_template_kwargs = { enable_thinking = false } } } })
      :run("hi")
    local b = srv:requests()[1].body
    assert.equal(20, b.top_k)
    assert.same({ enable_thinking = false }, b.chat_template_kwargs)
  end)

  it("asks for strict json_schema output and decodes it", function()
    srv:script("structured")
    local res = agent({ output = CITY }):run("Paris as JSON")
    assert.same({ city = "Paris", celsius = 15 }, res.output)
    assert.same({ type = "json_schema", json_schema = { name = "output", schema = CITY, strict = true } },
                srv:requests()[1].body.response_format)
  end)

  it("sends images as image_url data URLs", function()
    srv:script("text")
    agent():run { "What is this?", { type = "image", data = PNG } }
    local content = srv:requests()[1].body.messages[1].content
    assert.same({ type = "text", text = "What is this?" }, content[1])
    assert.same({ type = "image_url", image_url = { url = "data:image/png;base64," .. lash_b64(PNG) } }, content[2])
  end)

  it("retries an error object mid-stream, counts both requests and marks the discarded text", function()
    srv:script("stream_error_chunk")
    local events, on_event = collector()
    local res = agent():run("hi", { on_event = on_event })
    assert.equal("Full answer.", res.output)
    assert.equal(2, #srv:requests())
    assert.equal(2, res.usage.requests)
    local r = of_type(events, "retry")[1]
    assert.equal(500, r.status)
    assert.equal("Partial ans", r.discarded_text)
    -- and the terminal says so
    local out = {}
    local printer = require("lash.cli.printer").new { write = function(s) out[#out + 1] = s end, tty = false }
    for _, e in ipairs(events) do printer:event(e) end
    assert.matches("Partial ans\n↶ discarded: the text above was cut off and is sent again\n", table.concat(out), 1, true)
  end)

  it("counts failed attempts in usage.requests", function()
    srv:script("server_500")
    local a = agent({}, nil)
    local events, on_event = collector()
    a:run("hi", { stream = false, on_event = on_event })
    local u = of_type(events, "run_end")[1].usage
    assert.equal(3, u.requests)
  end)

  it("does not run a call cut by finish_reason length before any argument", function()
    srv:script("tool_cut_stream")
    resets = 0
    local a = agent()
    local ok, err = pcall(a.run, a, "reset", { stream = true })
    assert.is_false(ok)
    assert.matches("hit its output token limit in the middle of a call to 'reset_all'", err.message, 1, true)
    assert.equal(0, resets)
  end)

  it("repairs invalid UTF-8 in a non-streamed answer before sending it back", function()
    srv:script("bad_utf8")
    local res = agent():run("time?", { stream = false })
    assert.equal("Done.", res.output)
    local second = srv:requests()[2].body
    assert.equal("table", type(second))
    assert.equal("Caf\u{FFFD} ok", second.messages[2].content)
  end)

  describe("openai-responses", function()
    it("sends a Responses API request and reads the answer (JSON and stream)", function()
      for _, stream in ipairs { false, true } do
        srv:script("responses_text")
        local events, on_event = collector()
        local res = agent({ instructions = "Be brief.", model_settings = { max_tokens = 64 } }, "openai-responses")
          :run("Hello", { stream = stream, on_event = on_event })
        assert.equal("Hi! How can I help?", res.output)
        local req = srv:requests()[1]
        assert.equal("/v1/responses", req.path)
        assert.equal("Bearer sk", req.headers.authorization)
        assert.equal("Be brief.", req.body.instructions)
        assert.equal(64, req.body.max_output_tokens)
        assert.same({ { role = "user", content = { { type = "input_text", text = "Hello" } } } }, req.body.input)
        assert.same({ type = "function", name = "get_weather", strict = false, description = "Get the weather",
                      parameters = weather:definition().parameters }, req.body.tools[1])
        assert.equal(36, res.usage.input_tokens)
        if stream then assert.equal("Hi! How can I help?", texts(events, "text_delta")) end
      end
    end)

    it("passes the reasoning item back verbatim before the call and its output", function()
      for _, stream in ipairs { false, true } do
        srv:script("responses_tools")
        local events, on_event = collector()
        local res = agent({ model_settings = { reasoning_effort = "low", reasoning_summary = "auto" } },
          "openai-responses"):run("Weather in Paris?", { stream = stream, on_event = on_event })
        assert.equal("It is 15 degrees in Paris.", res.output)
        local reqs = srv:requests()
        assert.same({ effort = "low", summary = "auto" }, reqs[1].body.reasoning)
        local input = reqs[2].body.input
        assert.equal(4, #input)
        assert.same({ type = "reasoning", id = "rs_6820f383d7c08191846711c5df8233bc",
                      summary = { { type = "summary_text", text = "Need the weather: call get_weather." } },
                      encrypted_content = "gAAAAABoISQ24OyVRYbkYfukVsBKMBmTTy2DpuM0ezcnwoRq8Ilr8Vr4Ofc7j9Y2mE0o" },
                    input[2])
        assert.same({ type = "function_call", id = "fc_6820f3855a48", call_id = "call_7rEtGB0Zp1",
                      name = "get_weather", arguments = '{"location":"Paris"}' }, input[3])
        assert.same({ type = "function_call_output", call_id = "call_7rEtGB0Zp1", output = "15 degrees in Paris" },
                    input[4])
        assert.equal(128, res.usage.reasoning_tokens)
        assert.equal("Need the weather: call get_weather.",
                     texts(events, stream and "thinking_delta" or "thinking"))
      end
    end)

    it("retries a failed response with server_error", function()
      srv:script("responses_failed")
      local events, on_event = collector()
      local res = agent({}, "openai-responses"):run("hi", { on_event = on_event })
      assert.equal("Whole answer.", res.output)
      assert.equal(2, res.usage.requests)
      assert.equal("Half", of_type(events, "retry")[1].discarded_text)
    end)

    it("fails at once on an error event the API does not call transient", function()
      srv:script { { status = 200, sse = {
        { event = "error", data = { type = "error", code = "invalid_prompt", message = "Invalid prompt.", param = json.null,
                                    sequence_number = 1 } } } } }
      local a = agent({}, "openai-responses")
      local ok, err = pcall(a.run, a, "hi", { stream = true })
      assert.is_false(ok)
      assert.equal("openai-responses: error event in the response stream: invalid_prompt: Invalid prompt.", err.message)
      assert.equal(1, #srv:requests())
    end)

    it("does not run a call the output limit cut (status incomplete)", function()
      srv:script("responses_cut")
      resets = 0
      local a = agent({}, "openai-responses")
      local ok, err = pcall(a.run, a, "reset", { stream = false })
      assert.is_false(ok)
      assert.matches("hit its output token limit in the middle of a call to 'reset_all'", err.message, 1, true)
      assert.equal(0, resets)
    end)

    it("asks for json_schema output in text.format", function()
      srv:script { { status = 200, json = { id = "r", object = "response", status = "completed", model = "gpt-5",
        output = { { type = "message", id = "m", role = "assistant", status = "completed",
                     content = { { type = "output_text", text = '{"city":"Rome","celsius":20}' } } } },
        usage = { input_tokens = 5, output_tokens = 5 } } } }
      local res = agent({ output = CITY }, "openai-responses"):run("Rome")
      assert.same({ city = "Rome", celsius = 20 }, res.output)
      assert.same({ type = "json_schema", name = "output", schema = CITY, strict = true },
                  srv:requests()[1].body.text.format)
    end)
  end)
end)

describe_or_skip("lash run --file and --output-schema", function()
  local cli = require "helpers.lash_cli"
  local srv
  setup(function() srv = fake.start("anthropic") end)
  teardown(function() if srv then srv:stop() end end)

  local function tmp(content)
    local p = os.tmpname()
    local f = assert(io.open(p, "wb")) f:write(content) f:close()
    return p
  end

  it("sends each --file as a block and decodes the answer with --output-schema", function()
    srv:script("structured")
    local img, doc = tmp(PNG), tmp("plain notes")
    local schema = tmp(json.encode(CITY))
    local env = "ANTHROPIC_API_KEY=k ANTHROPIC_BASE_URL=" .. srv.base
    local out, err, code = cli.run({ "run", "examples/test_model.lua", "Weather?", "--model",
      "anthropic:claude-sonnet-4-6", "--file", img, "--file", doc, "--output-schema", schema, "--json",
      "--no-stream" }, env)
    os.remove(img) os.remove(doc) os.remove(schema)
    assert.equal(0, code, err)
    local content = srv:requests()[1].body.messages[1].content
    assert.equal("text", content[1].type)
    assert.equal("image", content[2].type)
    assert.equal("document", content[3].type)
    assert.equal("plain notes", content[3].source.data)
    local last, exit_line
    for l in out:gmatch("[^\n]+") do
      local ev = json.decode(l)
      if ev.type == "run_end" then last = ev elseif ev.type == "exit" then exit_line = ev end
    end
    assert.equal("run_end", last.type)
    assert.equal(0, exit_line.exit_code)   -- --json ends with the exit line
    assert.same({ city = "Paris", celsius = 15 }, last.output)
    assert.equal(2, last.usage.requests)
  end)

  it("refuses a missing --file or a bad --output-schema as usage errors", function()
    local _, err, code = cli.run { "run", "examples/test_model.lua", "hi", "--file", "/nonexistent/x.png" }
    assert.equal(2, code)
    assert.matches("--file: cannot read /nonexistent/x.png", err, 1, true)
    local bad = tmp("[1, 2")
    _, err, code = cli.run { "run", "examples/test_model.lua", "hi", "--output-schema", bad }
    os.remove(bad)
    assert.equal(2, code)
    assert.matches("is not a JSON Schema object", err, 1, true)
  end)
end)

describe("output schemas", function()
  it("are checked when the agent is defined and when a run starts", function()
    local ok, err = pcall(lash.agent, { model = "test", output = { type = "objet" } })
    assert.is_false(ok)
    assert.matches("lash.agent: output.type: unknown type 'objet'", err, 1, true)
    local a = lash.agent { model = "test" }
    ok, err = pcall(a.run, a, "x", { output = { type = "object", propertis = {} } })
    assert.is_false(ok)
    assert.matches("agent:run: output has an unknown keyword 'propertis'", err, 1, true)
  end)
end)

describe("a function model's finish = \"length\"", function()
  it("cuts its last tool call like a provider's output limit", function()
    resets = 0
    local a = lash.agent { tools = { reset_all }, model = function()
      return { tool_calls = { { name = "reset_all", args = {} } }, finish = "length" } end }
    local ok, err = pcall(a.run, a, "go")
    assert.is_false(ok)
    assert.matches("middle of a call to 'reset_all'", err.message, 1, true)
    assert.equal(0, resets)
  end)
end)

describe("the terminal printer", function()
  local function printed(events, color)
    local out = {}
    local p = require("lash.cli.printer").new { write = function(s) out[#out + 1] = s end, tty = false, color = color }
    for _, e in ipairs(events) do p:event(e) end
    p:close()
    return table.concat(out)
  end

  it("shows reasoning dimmed under a thinking line, apart from the answer", function()
    local evs = { { type = "model_request" }, { type = "thinking_delta", text = "Let me " },
                  { type = "thinking_delta", text = "think." }, { type = "text_delta", text = "Answer." } }
    assert.equal("∴ thinking\nLet me think.\nAnswer.\n", printed(evs, false))
    assert.equal("\27[2m∴ thinking\27[0m\n\27[2mLet me \27[0m\27[2mthink.\27[0m\nAnswer.\n", printed(evs, true))
  end)

  it("prints a structured answer that was not shown as JSON", function()
    local s = printed { { type = "run_end", stop_reason = "complete", output = { b = 1, a = { true } } } }
    assert.equal('{"a":[true],"b":1}\n', s)
  end)
end)
