-- The offline models (test, function), model resolution, and the retry
-- helpers the HTTP adapters share.
local lash = require "lash"
local json = require "lash.json"
local models = require "lash.models"
local testmodel = require "lash.models.test"

local collector = require("helpers.events").collector

describe("the test model", function()
  local echo = lash.tool { name = "echo", parameters = { type = "object", properties = {
    text = { type = "string", minLength = 3 }, times = { type = "integer", minimum = 2 },
    mode = { enum = { "loud", "quiet" } }, opt = { type = "string" } }, required = { "text", "times", "mode" } },
    handler = function(_, a) return a.text:rep(a.times) .. "/" .. a.mode end }
  local ping = lash.tool { name = "ping", handler = function() return "pong" end }

  it("generates valid arguments from schemas", function()
    assert.same({ text = "aaa", times = 2, mode = "loud" }, testmodel.generate(echo.parameters))
    local g = testmodel.generate({ type = "object", required = { "l", "n", "b", "o" }, properties = {
      l = { type = "array", items = { type = "integer" }, minItems = 2 },
      n = { anyOf = { { type = "null" }, { type = "number", minimum = 1.5 } } },
      b = { type = "boolean" }, o = { type = "object", properties = { x = { type = "string" } }, required = { "x" } } } })
    assert.same({ l = { 0, 0 }, n = 1.5, b = false, o = { x = "a" } }, g)
  end)

  it("calls every tool once, then summarises the results as JSON", function()
    local res = lash.agent { model = "test", tools = { echo, ping } }:run("go")
    assert.same({ echo = "aaaaaa/loud", ping = "pong" }, json.decode(res.output))
    assert.equal(2, res.usage.requests)
    assert.equal(2, res.usage.tool_calls)
  end)

  it("answers 'success (no tool calls)' without tools, deterministically", function()
    local a = lash.agent { model = "test" }
    local r1, r2 = a:run("hello there"), a:run("hello there")
    assert.equal("success (no tool calls)", r1.output)
    assert.same(r1.usage, r2.usage)
  end)

  it("calls only the tools in call_tools, and custom_output_text", function()
    local a = lash.agent { model = { "test", call_tools = { "ping" }, custom_output_text = "fine" }, tools = { echo, ping } }
    local res = a:run("go")
    assert.equal("fine", res.output)
    assert.equal(1, res.usage.tool_calls)
  end)

  it("calls a tool again after a retry prompt", function()
    local n = 0
    local picky = lash.tool { name = "picky", handler = function()
      n = n + 1
      if n == 1 then lash.retry("again") end
      return "ok " .. n
    end }
    local res = lash.agent { model = "test", tools = { picky } }:run("go")
    assert.equal('{"picky":"ok 2"}', res.output)
    assert.equal(3, res.usage.requests)
  end)

  it("streams its answer as text deltas", function()
    local events, on_event = collector()
    lash.agent { model = "test" }:run("go", { on_event = on_event })
    local text = {}
    for _, e in ipairs(events) do if e.type == "text_delta" then text[#text + 1] = e.text end end
    assert.equal("success (no tool calls)", table.concat(text))
  end)
end)

describe("the function model", function()
  it("sees the history and the offered tools", function()
    local seen
    local model = function(messages, info)
      seen = { n = #messages, tool = info.tools[1].name, step = info.step, instructions = info.instructions }
      return "ok"
    end
    lash.agent { model = model, instructions = "hi", tools = { { name = "t", handler = function() end } } }:run("x")
    assert.same({ n = 1, tool = "t", step = 1, instructions = "hi" }, seen)
  end)

  it("accepts parts, and JSON-string arguments", function()
    local model = lash.script_model {
      { parts = { { type = "text", text = "calling" }, { type = "tool_call", name = "t", args = '{"v": 1}' } } },
      function(m) return m[#m].parts[1].content end,
    }
    local t = lash.tool { name = "t", parameters = { type = "object", properties = { v = { type = "integer" } } },
                          handler = function(_, a) return "v=" .. a.v end }
    assert.equal("v=1", lash.agent { model = model, tools = { t } }:run("x").output)
  end)

  it("reports a bad response shape as a model error", function()
    local a = lash.agent { model = function() return { parts = { { type = "image" } } } end }
    local ok, err = pcall(a.run, a, "x")
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "model"))
    assert.matches("parts%[1%]%.type must be \"text\" or \"tool_call\"", err.message)
  end)

  it("a script past its end says which step", function()
    local a = lash.agent { model = lash.script_model { { tool_calls = { { name = "t" } } } },
                           tools = { { name = "t", handler = function() end } } }
    local ok, err = pcall(a.run, a, "x")
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "model"))
    assert.matches("scripted model: no response for step 2 %(the script has 1%)", err.message)
  end)

  it("may wait", function()
    local a = lash.agent { model = function() lash.sleep(0.01) return "late" end }
    assert.equal("late", a:run("x").output)
  end)
end)

describe("offline token estimates", function()
  it("count the words of instructions, history and answer", function()
    local a = lash.agent { model = function() return "one two" end, instructions = "Be brief." }
    local res = a:run("hello there world")
    assert.equal(5, res.usage.input_tokens)
    assert.equal(2, res.usage.output_tokens)
    local t = lash.agent { model = "test", instructions = "Be brief." }:run("hello there world")
    assert.equal(55, t.usage.input_tokens)
    assert.equal(4, t.usage.output_tokens)  -- "success (no tool calls)"
  end)
end)

describe("models.resolve", function()
  it("knows the providers and explains an unknown one", function()
    local ok, err = pcall(models.resolve, "gemini:pro")
    assert.is_false(ok)
    assert.equal("unknown model provider 'gemini' in 'gemini:pro' (known: anthropic, openai, openai-responses, test, or a Lua function)",
                 err.message)
    assert.equal("test", models.resolve("test").name)
    assert.equal("function", models.resolve(function() end).name)
  end)

  it("explains a missing model", function()
    local ok, err = pcall(models.resolve, nil)
    assert.is_false(ok)
    assert.matches("^no model: set model = ", err.message)
  end)

  it("takes options in a table spec", function()
    local m = models.resolve { "openai:llama3", base_url = "http://127.0.0.1:8080/v1" }
    assert.equal("openai:llama3", m.name)
    assert.equal("http://127.0.0.1:8080/v1/chat/completions", m.url)
  end)
end)

describe("retry helpers", function()
  it("retry only what is worth retrying", function()
    for _, s in ipairs { 408, 409, 429, 500, 502, 503, 529 } do assert.is_true(models.retryable_status(s), s) end
    for _, s in ipairs { 400, 401, 403, 404, 413, 422 } do assert.is_false(models.retryable_status(s), s) end
  end)

  it("read retry-after-ms, retry-after seconds and HTTP dates", function()
    assert.equal(0.25, models.retry_after { ["retry-after-ms"] = "250" })
    assert.equal(3, models.retry_after { ["retry-after"] = "3" })
    assert.is_nil(models.retry_after {})
    local future = os.date("!%a, %d %b %Y %H:%M:%S GMT", os.time() + 30)
    local d = models.retry_after { ["retry-after"] = future }
    assert.is_true(d >= 28 and d <= 31, tostring(d))
  end)

  it("back off exponentially with jitter, capped", function()
    for n = 1, 10 do
      local d = models.backoff(n, 0.5)
      local base = math.min(8, 0.5 * 2 ^ (n - 1))
      assert.is_true(d >= base * 0.75 and d <= base, n .. ": " .. d)
    end
  end)
end)
