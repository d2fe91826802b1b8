-- Request bodies are pinned byte for byte (provider prompt caches match on
-- exact prefixes). The fixtures in tests/fixtures/request_bodies/ were
-- captured from the agent before its bodies were encoded once per message;
-- any change to encoding, key order, escaping or caching shows up here.
-- LASH_PIN_BODIES=write rewrites them (only do that for an intended change).
local lash = require "lash"

local DIR = "tests/fixtures/request_bodies/"

local add = lash.tool { name = "add", description = "Add two numbers.",
  parameters = { type = "object", properties = { a = { type = "number" }, b = { type = "number" } },
                 required = { "a", "b" }, additionalProperties = false },
  handler = function(_, a) return tostring(a.a + a.b) end }
local list = lash.tool { name = "list", description = "",
  parameters = { type = "object", properties = {
      items = { type = "array", items = { type = "string" } },
      opts = { type = "object", properties = {} } },
    required = { "items" } },
  handler = function(_, a) return "got " .. #a.items .. " items\n\t\"quoted\" \\ / \u{2028} é 😀\1\127" end }

-- the calls each step makes: name, arguments as JSON text
local STEPS = {
  { { "add", '{"a":1,"b":2.5}' }, { "list", '{"items":[],"opts":{}}' } },
  { { "add", '{"a":"x"}' } },                                  -- invalid: a retry prompt
  { { "list", '{"items":["x/y","\\u00e9\\ud83d\\ude00"],"opts":{"n":1e3,"f":1e-7,"g":123456789.123456789,"z":-0,"big":12345678901234567890}}' } },
}

local function openai_reply(step, stream)
  local calls = STEPS[step]
  if not calls then
    if not stream then
      return lash.json.encode { id = "c", model = "m", choices = { { index = 0, finish_reason = "stop",
        message = { role = "assistant", content = "done" } } }, usage = { prompt_tokens = 1, completion_tokens = 1 } }
    end
    return "data: " .. lash.json.encode { choices = { { index = 0, delta = { role = "assistant", content = "done" } } } }
      .. "\n\ndata: " .. lash.json.encode { choices = { { index = 0, delta = {}, finish_reason = "stop" } } }
      .. "\n\ndata: " .. lash.json.encode { choices = lash.json.array(), usage = { prompt_tokens = 1, completion_tokens = 1 } }
      .. "\n\ndata: [DONE]\n\n"
  end
  local tc = {}
  for i, c in ipairs(calls) do
    tc[i] = { index = i - 1, id = "call_" .. step .. "_" .. i, type = "function",
              ["function"] = { name = c[1], arguments = c[2] } }
  end
  if not stream then
    return lash.json.encode { id = "c", model = "m", choices = { { index = 0, finish_reason = "tool_calls",
      message = { role = "assistant", content = step == 1 and "Let me see." or lash.json.null, tool_calls = tc } } },
      usage = { prompt_tokens = 1, completion_tokens = 1 } }
  end
  local out = {}
  if step == 1 then
    out[#out + 1] = "data: " .. lash.json.encode { choices = { { index = 0, delta = { role = "assistant", content = "Let me see." } } } }
  end
  for _, c in ipairs(tc) do
    out[#out + 1] = "data: " .. lash.json.encode { choices = { { index = 0, delta = { tool_calls = { c } } } } }
  end
  out[#out + 1] = "data: " .. lash.json.encode { choices = { { index = 0, delta = {}, finish_reason = "tool_calls" } } }
  out[#out + 1] = "data: " .. lash.json.encode { choices = lash.json.array(), usage = { prompt_tokens = 1, completion_tokens = 1 } }
  out[#out + 1] = "data: [DONE]"
  return table.concat(out, "\n\n") .. "\n\n"
end

local function anthropic_reply(step, stream)
  local calls = STEPS[step]
  local blocks = {}
  if step == 1 or not calls then blocks[1] = { type = "text", text = calls and "Let me see." or "done" } end
  for i, c in ipairs(calls or {}) do
    blocks[#blocks + 1] = { type = "tool_use", id = "toolu_" .. step .. "_" .. i, name = c[1], raw = c[2] }
  end
  local stop = calls and "tool_use" or "end_turn"
  if not stream then
    for _, b in ipairs(blocks) do
      if b.raw then b.input = lash.json.decode(b.raw); b.raw = nil end
    end
    return lash.json.encode { id = "msg", type = "message", role = "assistant", model = "m", content = blocks,
      stop_reason = stop, usage = { input_tokens = 1, output_tokens = 1 } }
  end
  local ev = {}
  local function send(name, data) ev[#ev + 1] = "event: " .. name .. "\ndata: " .. lash.json.encode(data) .. "\n\n" end
  send("message_start", { type = "message_start", message = { id = "msg", type = "message", role = "assistant",
    model = "m", content = lash.json.array(), usage = { input_tokens = 1, output_tokens = 1 } } })
  for i, b in ipairs(blocks) do
    if b.type == "text" then
      send("content_block_start", { type = "content_block_start", index = i - 1, content_block = { type = "text", text = "" } })
      send("content_block_delta", { type = "content_block_delta", index = i - 1, delta = { type = "text_delta", text = b.text } })
    else
      send("content_block_start", { type = "content_block_start", index = i - 1,
        content_block = { type = "tool_use", id = b.id, name = b.name, input = {} } })
      send("content_block_delta", { type = "content_block_delta", index = i - 1,
        delta = { type = "input_json_delta", partial_json = b.raw } })
    end
    send("content_block_stop", { type = "content_block_stop", index = i - 1 })
  end
  send("message_delta", { type = "message_delta", delta = { stop_reason = stop }, usage = { output_tokens = 1 } })
  send("message_stop", { type = "message_stop" })
  return table.concat(ev)
end

-- Run the agent with lash.http.request replaced by the scripted provider;
-- returns the request bodies, in order.
local function capture(provider, stream)
  local bodies = {}
  local real = lash.http.request
  lash.http.request = function(req)
    bodies[#bodies + 1] = req.body
    local reply = (provider == "openai" and openai_reply or anthropic_reply)(#bodies, stream)
    if req.on_chunk then
      -- split mid-event so the parser's boundaries are exercised too
      local cut = #reply // 2
      req.on_chunk(reply:sub(1, cut)); req.on_chunk(reply:sub(cut + 1))
      return 200, { ["content-type"] = "text/event-stream" }, nil
    end
    return 200, { ["content-type"] = "application/json" }, reply
  end
  local model = provider == "openai"
    and { "openai:gpt-test", base_url = "http://127.0.0.1:9/v1", api_key = "k", stream = stream }
    or { "anthropic:claude-test", base_url = "http://127.0.0.1:9", api_key = "k", stream = stream }
  local agent = lash.agent { model = model, tools = { add, list },
    instructions = { "You are terse.", "Today is {{ deps.today }}." }, model_settings = { temperature = 0.25, max_tokens = 100 } }
  local ok, res = pcall(agent.run, agent, "Add things, then list: \"a\"/b", {
    deps = { today = "Monday" },
    history = {
      { role = "user", parts = { { type = "text", text = "Earlier question" } } },
      { role = "assistant", parts = { { type = "text", text = "Earlier answer" } } },
    } })
  lash.http.request = real
  assert(ok, res)
  assert.equal("done", res.output)
  return bodies
end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

describe("request bodies", function()
  for _, provider in ipairs { "openai", "anthropic" } do
    for _, stream in ipairs { false, true } do
      local name = provider .. (stream and "_stream" or "") .. ".jsonl"
      it("are byte-identical to the pinned ones: " .. name, function()
        local got = table.concat(capture(provider, stream), "\n") .. "\n"
        if os.getenv("LASH_PIN_BODIES") == "write" then
          local f = assert(io.open(DIR .. name, "wb"))
          f:write(got)
          f:close()
        end
        local want = read(DIR .. name)
        assert.is_not_nil(want, "missing fixture " .. DIR .. name)
        assert.equal(4, select(2, want:gsub("\n", "")))   -- four requests: three tool steps, one answer
        assert.equal(want, got)
      end)
    end
  end

  it("stay identical when the same history is sent again by another agent", function()
    -- a second run in the same process must not reuse anything of the first
    assert.equal(table.concat(capture("openai", false), "\n"), table.concat(capture("openai", false), "\n"))
  end)
end)
