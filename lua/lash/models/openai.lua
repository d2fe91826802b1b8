--- The `openai` provider: Chat Completions (POST {base}/chat/completions),
-- which OpenAI and the OpenAI-compatible local servers (llama.cpp,
-- Ollama, vLLM) speak.
--
-- Maps lash's history to `messages`: the instructions as a `system`
-- message, user text, assistant text with `tool_calls` (arguments as JSON
-- strings), and one `tool` message per result, right after the assistant
-- turn that asked for it. Several tool calls per turn are supported both
-- ways. Streams with `stream_options.include_usage` when the run streams.
-- Usage: prompt_tokens (cached included) -> input_tokens,
-- prompt_tokens_details.cached_tokens -> cache_read_tokens,
-- completion_tokens_details.reasoning_tokens -> reasoning_tokens (when
-- the model reasoned). Reasoning models take `reasoning_effort`; the
-- `reasoning_content` deltas some compatible servers stream (DeepSeek,
-- llama.cpp) are reported as thinking. Tool-call ids are sent back as
-- strings whatever the server sent (llama.cpp sends numbers). Structured
-- output: `response_format` json_schema (strict when the schema allows).
-- Images: `image_url` data URLs; PDFs: `file` parts.
--
-- Options: api_key (default $OPENAI_API_KEY; required for the official
-- API, optional when base_url points elsewhere, since local servers take
-- none), base_url (default $OPENAI_BASE_URL or https://api.openai.com/v1),
-- timeout (600 s), max_retries (2), retry_delay, max_retry_delay, headers,
-- stream. model_settings.max_tokens is sent as `max_completion_tokens` to
-- api.openai.com and as `max_tokens` elsewhere. model_settings: see
-- SETTINGS; anything else goes in extra_body.
-- @module lash.models.openai
local runtime = require "lash.runtime"
local json = require "lash.json"
local models = require "lash.models.provider"
local mparts = require "lash.models.parts"

local M = {}

local Model = {}
Model.__index = Model

M.DEFAULT_BASE_URL = "https://api.openai.com/v1"

local OPTIONS = { api_key = true, base_url = true, timeout = true, max_retries = true, retry_delay = true,
                  max_retry_delay = true, headers = true, stream = true }

--- Make an OpenAI-compatible model.
-- @tparam string name the model id ("gpt-4.1", "llama3.2", ...)
-- @tparam[opt] table opts
function M.new(name, opts)
  opts = opts or {}
  models.check_options("openai", opts, OPTIONS, name, "gpt-4.1")
  local url, key, official = M.endpoint(opts, "openai", name, "/chat/completions")
  return setmetatable({
    name = "openai:" .. name, model_id = name, key = key, official = official, url = url, opts = opts,
  }, Model)
end

--- Where an OpenAI API request goes and with which key (the Chat
-- Completions and Responses adapters alike): base_url, else
-- $OPENAI_BASE_URL, else the official API, which needs a key; another
-- endpoint takes one if there is one.
-- @tparam table opts the model's options
-- @tparam string provider for messages ("openai", "openai-responses")
-- @tparam string name the model id
-- @tparam string path the endpoint under the base URL
-- @treturn string url
-- @treturn string|nil key
-- @treturn boolean official
function M.endpoint(opts, provider, name, path)
  local base = opts.base_url or os.getenv("OPENAI_BASE_URL")
  if base == nil or base == "" then base = M.DEFAULT_BASE_URL end
  local official = base:find("^https://api%.openai%.com") ~= nil
  local key = opts.api_key or os.getenv("OPENAI_API_KEY")
  if key == "" then key = nil end
  if official then key = models.api_key(opts, "OPENAI_API_KEY", provider, name) end
  return models.join_url(base, path), key, official
end

--- The headers of an OpenAI API request.
-- @tparam string|nil key the API key (sent as a bearer token)
function M.headers(key)
  local headers = { ["content-type"] = "application/json" }
  if key then headers["authorization"] = "Bearer " .. key end
  return headers
end

--- The model_settings this provider takes.
M.SETTINGS = { max_tokens = true, temperature = true, top_p = true, stop = true, seed = true,
               parallel_tool_calls = true, tool_choice = true, max_completion_tokens = true,
               reasoning_effort = true, user = true, frequency_penalty = true, presence_penalty = true,
               logit_bias = true, service_tier = true, verbosity = true, logprobs = true, top_logprobs = true }
local PASS = { "temperature", "top_p", "stop", "seed", "parallel_tool_calls", "tool_choice", "max_completion_tokens",
               "reasoning_effort", "user", "frequency_penalty", "presence_penalty", "logit_bias", "service_tier",
               "verbosity", "logprobs", "top_logprobs" }

local function user_content(parts)
  local texts, rich = {}, false
  for _, p in ipairs(parts) do
    if p.type == "image" or (p.type == "document" and not p.text) then rich = true end
  end
  if not rich then
    for _, p in ipairs(parts) do
      if p.type == "text" then texts[#texts + 1] = p.text
      elseif p.type == "document" then texts[#texts + 1] = p.text end
    end
    return #texts > 0 and table.concat(texts, "\n\n") or nil
  end
  local out = json.array()
  for _, p in ipairs(parts) do
    if p.type == "text" then
      out[#out + 1] = { type = "text", text = p.text }
    elseif p.type == "image" then
      out[#out + 1] = { type = "image_url", image_url = { url = mparts.data_url(p) } }
    elseif p.type == "document" and p.text then
      out[#out + 1] = { type = "text", text = p.text }
    elseif p.type == "document" then
      out[#out + 1] = { type = "file", file = { filename = p.name, file_data = mparts.data_url(p) } }
    end
  end
  return out
end

-- The Chat Completions messages of one history message.
local function wire_message(m)
  local out = {}
  if m.role == "assistant" then
    local texts, calls = {}, {}
    for _, p in ipairs(m.parts) do
      if p.type == "text" then
        texts[#texts + 1] = p.text
      elseif p.type == "tool_call" then
        calls[#calls + 1] = { id = models.id_string(p.id), type = "function",
                              ["function"] = { name = p.name, arguments = p.args_json or json.encode_canonical(p.args or {}) } }
      end
    end
    local msg = { role = "assistant", content = #texts > 0 and table.concat(texts) or json.null }
    if #calls > 0 then msg.tool_calls = calls end
    out[1] = msg
  else
    local rest = models.split_results(m.parts, function(p)
      out[#out + 1] = { role = "tool", tool_call_id = models.id_string(p.id), content = p.content }
    end)
    local content = user_content(rest)
    if content then out[#out + 1] = { role = "user", content = content } end
  end
  return out
end

--- Convert a history to Chat Completions `messages` (exported for tests).
-- Each message's wire form is made once (models.wire_messages).
local function system_message(instructions)
  return { { role = "system", content = instructions } }
end

function M.messages(history, instructions)
  if instructions and instructions ~= "" then
    return models.wire_messages(history, wire_message, instructions, system_message)
  end
  return models.wire_messages(history, wire_message)
end

local function wire_tools(defs)
  local tools = {}
  for i, d in ipairs(defs) do
    tools[i] = { type = "function", ["function"] = { name = d.name, parameters = d.parameters,
                                                     description = d.description ~= "" and d.description or nil } }
  end
  return tools
end

--- Build the request body (exported for tests).
function Model:body(req, stream)
  local settings = req.settings or {}
  models.check_settings("openai", settings, M.SETTINGS)
  local body = { model = self.model_id, messages = M.messages(req.messages, req.instructions) }
  if settings.max_tokens then
    body[self.official and "max_completion_tokens" or "max_tokens"] = settings.max_tokens
  end
  for _, k in ipairs(PASS) do
    if settings[k] ~= nil then body[k] = settings[k] end
  end
  if req.output then
    body.response_format = { type = "json_schema", json_schema = { name = req.output.name or "output",
      schema = req.output.schema, strict = M.strict_compatible(req.output.schema) or nil } }
  end
  if req.tools and #req.tools > 0 then
    body.tools = models.wire(req.tools, wire_tools)
  end
  if stream then
    body.stream = true
    body.stream_options = { include_usage = true }
  end
  return models.apply_extra_body(body, settings)
end

--- Can `schema` be sent with strict = true? OpenAI's strict mode takes
-- only objects that list every property as required and forbid others.
function M.strict_compatible(s)
  if type(s) ~= "table" then return true end
  if s.type == "object" or s.properties then
    if s.additionalProperties ~= false then return false end
    local req = {}
    for _, r in ipairs(s.required or {}) do req[r] = true end
    for k, sub in pairs(s.properties or {}) do
      if not req[k] or not M.strict_compatible(sub) then return false end
    end
  end
  if s.items and not M.strict_compatible(s.items) then return false end
  for _, key in ipairs { "anyOf", "allOf" } do
    for _, sub in ipairs(s[key] or {}) do
      if not M.strict_compatible(sub) then return false end
    end
  end
  return true
end

--- response_format json_schema takes an object at the root.
function Model:native_output(schema)
  return type(schema) == "table" and (schema.type == "object" or schema.properties ~= nil)
end

local FINISH = { stop = "stop", tool_calls = "tool_calls", function_call = "tool_calls", length = "length",
                 content_filter = "content_filter" }

local function map_usage(u)
  return models.openai_usage(u, "prompt", "completion")
end
M.map_usage = map_usage

local function bad_response(self, what)
  return models.unexpected("openai", self.url, what)
end

local function call_part(id, name, arguments, index)
  local p = { type = "tool_call", id = models.id_string(id) or ("call_" .. index), name = name }
  if arguments == nil or arguments == "" or arguments == json.null then
    p.args = {}
  else
    models.set_call_args(p, arguments)
  end
  return p
end

--- Parse a non-streamed response body (exported for tests).
function Model:parse(body)
  local v, err = json.try_decode(body)
  if type(v) ~= "table" then error(bad_response(self, err or "not a JSON object"), 0) end
  if type(v.error) == "table" then
    error(runtime.error("provider", "openai: error in the response from " .. self.url .. ": "
      .. models.describe_body(body), { provider = "openai" }), 0)
  end
  local choice = type(v.choices) == "table" and v.choices[1]
  if type(choice) ~= "table" or type(choice.message) ~= "table" then
    error(bad_response(self, "no choices[0].message"), 0)
  end
  local msg, parts = choice.message, {}
  if type(msg.reasoning_content) == "string" and msg.reasoning_content ~= "" then
    parts[#parts + 1] = { type = "thinking", text = msg.reasoning_content, provider = "openai" }
  end
  if type(msg.content) == "string" and msg.content ~= "" then
    parts[#parts + 1] = { type = "text", text = msg.content }
  end
  if type(msg.tool_calls) == "table" then
    for i, c in ipairs(msg.tool_calls) do
      local f = c["function"] or {}
      parts[#parts + 1] = call_part(c.id, f.name, f.arguments, i - 1)
    end
  end
  -- finish_reason "length" cuts whatever came last: a tool call there is incomplete
  if choice.finish_reason == "length" and parts[#parts] and parts[#parts].type == "tool_call" then
    parts[#parts].truncated = true
  end
  return { parts = parts, finish = FINISH[choice.finish_reason] or "stop", provider_finish = choice.finish_reason,
           usage = map_usage(v.usage), model = v.model, id = v.id }
end

local function new_stream(self, on_text, on_thinking)
  local st = {}
  function st.reset()
    st.text, st.calls, st.order, st.usage, st.finish, st.done, st.id, st.model = {}, {}, {}, nil, nil, false, nil, nil
    st.reasoning = {}
  end
  st.reset()
  function st.on_event(ev)
    local d = ev.data
    if d == "[DONE]" then
      st.done = true
      return
    end
    if d == "" then return end
    local v, err = json.try_decode(d)
    if type(v) ~= "table" then error(bad_response(self, "stream chunk is not JSON: " .. tostring(err)), 0) end
    if type(v.error) == "table" then
      local status = models.stream_error_status(v.error)
      error(runtime.error("provider", "openai: error in the response stream: " .. models.describe_body(d),
                                  { provider = "openai", status = status, error_type = v.error.type or v.error.code,
                                    retryable = status and models.retryable_status(status) or false }), 0)
    end
    st.id, st.model = st.id or v.id, st.model or v.model
    if type(v.usage) == "table" then st.usage = v.usage end
    local choice = type(v.choices) == "table" and v.choices[1]
    if type(choice) ~= "table" then return end
    local delta = type(choice.delta) == "table" and choice.delta or {}
    if type(delta.reasoning_content) == "string" and delta.reasoning_content ~= "" then
      st.reasoning[#st.reasoning + 1] = delta.reasoning_content
      if on_thinking then on_thinking(delta.reasoning_content) end
    end
    if type(delta.content) == "string" and delta.content ~= "" then
      st.text[#st.text + 1] = delta.content
      if on_text then on_text(delta.content) end
    end
    if type(delta.tool_calls) == "table" then
      for _, tc in ipairs(delta.tool_calls) do
        local idx = type(tc.index) == "number" and tc.index or #st.order
        local c = st.calls[idx]
        if not c then
          c = { args = {} }
          st.calls[idx] = c
          st.order[#st.order + 1] = idx
        end
        c.id = models.id_string(tc.id) or c.id
        local f = type(tc["function"]) == "table" and tc["function"] or {}
        if type(f.name) == "string" then c.name = (c.name or "") .. f.name end
        if type(f.arguments) == "string" then c.args[#c.args + 1] = f.arguments end
      end
    end
    if type(choice.finish_reason) == "string" then st.finish = choice.finish_reason end
  end
  function st.is_done()
    -- some compatible servers end without [DONE]; a finish_reason means
    -- the content is complete
    return st.done or st.finish ~= nil
  end
  function st.result()
    local parts = {}
    if #st.reasoning > 0 then
      parts[#parts + 1] = { type = "thinking", text = table.concat(st.reasoning), provider = "openai" }
    end
    if #st.text > 0 then parts[#parts + 1] = { type = "text", text = table.concat(st.text) } end
    table.sort(st.order)
    for _, idx in ipairs(st.order) do
      local c = st.calls[idx]
      parts[#parts + 1] = call_part(c.id, c.name, table.concat(c.args), idx)
    end
    if st.finish == "length" and parts[#parts] and parts[#parts].type == "tool_call" then
      parts[#parts].truncated = true
    end
    return { parts = parts, finish = FINISH[st.finish] or "stop", provider_finish = st.finish,
             usage = map_usage(st.usage), model = st.model, id = st.id }
  end
  return st
end

--- @see lash.models
function Model:request(req)
  return models.send(self, req, "openai", M.headers(self.key), new_stream)
end

return M
