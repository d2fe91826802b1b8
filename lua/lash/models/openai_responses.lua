--- The `openai-responses` provider: OpenAI's Responses API (POST
-- {base}/responses), what OpenAI's own Agents SDK uses by default.
--
-- Maps lash's history to `input` items: user messages (input_text,
-- input_image and input_file data URLs), assistant text, `function_call`
-- items (arguments as JSON strings) and `function_call_output` items, and
-- the `reasoning` items a reasoning model returned, passed back verbatim
-- and in order so the model keeps its chain of thought across tool calls.
-- The rendered instructions go in `instructions`, tools as flat
-- `{type = "function", name, parameters}` entries.
--
-- Streams (SSE, semantic events: response.created, output_item.added and
-- .done, output_text.delta, function_call_arguments.delta,
-- reasoning_summary_text.delta, response.completed / .incomplete /
-- .failed, error) when the run streams; otherwise one response object.
-- A response is complete only with a terminal event; a failed response or
-- an error event whose type the API documents as transient (server_error,
-- rate limits) is retried like an HTTP 5xx/429.
-- Usage: input_tokens (cached included) -> input_tokens,
-- input_tokens_details.cached_tokens -> cache_read_tokens,
-- output_tokens_details.reasoning_tokens -> reasoning_tokens.
-- Truncation: status "incomplete" (max_output_tokens) -> finish "length";
-- a function_call item not completed is marked truncated.
--
-- Options: as `openai` (api_key, default $OPENAI_API_KEY, required for the
-- official API; base_url, default $OPENAI_BASE_URL or
-- https://api.openai.com/v1; timeout, max_retries, retry_delay,
-- max_retry_delay, headers, stream). model_settings: see SETTINGS
-- (`max_tokens` is sent as max_output_tokens, `reasoning_effort` and
-- `reasoning_summary` as `reasoning = {effort, summary}`); anything else
-- goes in extra_body.
-- @module lash.models.openai_responses
local runtime = require "lash.runtime"
local json = require "lash.json"
local models = require "lash.models.provider"
local mparts = require "lash.models.parts"
local openai = require "lash.models.openai"

local M = {}

local Model = {}
Model.__index = Model

local OPTIONS = { api_key = true, base_url = true, timeout = true, max_retries = true, retry_delay = true,
                  max_retry_delay = true, headers = true, stream = true }

--- The model_settings this provider takes.
M.SETTINGS = { max_tokens = true, max_output_tokens = true, temperature = true, top_p = true,
               parallel_tool_calls = true, tool_choice = true, reasoning_effort = true, reasoning_summary = true,
               user = true, store = true, service_tier = true, truncation = true, metadata = true, include = true }
local PASS = { "max_output_tokens", "temperature", "top_p", "parallel_tool_calls", "tool_choice", "user", "store",
               "service_tier", "truncation", "metadata", "include" }

--- Make a Responses API model.
-- @tparam string name the model id ("gpt-5", "o4-mini", ...)
-- @tparam[opt] table opts
function M.new(name, opts)
  opts = opts or {}
  models.check_options("openai-responses", opts, OPTIONS, name, "gpt-5")
  local url, key = openai.endpoint(opts, "openai-responses", name, "/responses")
  return setmetatable({
    name = "openai-responses:" .. name, model_id = name, key = key, url = url, opts = opts,
  }, Model)
end

local function user_item(parts)
  local content = json.array()
  for _, p in ipairs(parts) do
    if p.type == "text" then
      content[#content + 1] = { type = "input_text", text = p.text }
    elseif p.type == "image" then
      content[#content + 1] = { type = "input_image", image_url = mparts.data_url(p), detail = "auto" }
    elseif p.type == "document" and p.text then
      content[#content + 1] = { type = "input_text", text = p.text }
    elseif p.type == "document" then
      content[#content + 1] = { type = "input_file", filename = p.name, file_data = mparts.data_url(p) }
    end
  end
  if #content == 0 then return nil end
  return { role = "user", content = content }
end

-- The input items of one history message.
local function input_items(m)
  local out = {}
  if m.role == "assistant" then
    for _, p in ipairs(m.parts) do
      if p.type == "text" then
        if p.text ~= "" then out[#out + 1] = { role = "assistant", content = p.text } end
      elseif p.type == "reasoning" and type(p.item) == "table" then
        out[#out + 1] = p.item
      elseif p.type == "tool_call" then
        out[#out + 1] = { type = "function_call", id = p.item_id, call_id = models.id_string(p.id), name = p.name,
                          arguments = p.args_json or json.encode_canonical(p.args or {}) }
      end
    end
  else
    local rest = models.split_results(m.parts, function(p)
      out[#out + 1] = { type = "function_call_output", call_id = models.id_string(p.id), output = p.content }
    end)
    local item = user_item(rest)
    if item then out[#out + 1] = item end
  end
  return out
end

--- Convert a history to Responses API `input` items (exported for tests).
-- Each message's items are made once (models.wire_messages): a step
-- converts and encodes only the messages it added.
function M.input(history)
  return models.wire_messages(history, input_items)
end

--- json_schema text format takes an object at the root.
function Model:native_output(schema)
  return type(schema) == "table" and (schema.type == "object" or schema.properties ~= nil)
end

--- Build the request body (exported for tests).
function Model:body(req, stream)
  local settings = req.settings or {}
  models.check_settings("openai-responses", settings, M.SETTINGS)
  local body = { model = self.model_id, input = M.input(req.messages) }
  if req.instructions and req.instructions ~= "" then body.instructions = req.instructions end
  if settings.max_tokens then body.max_output_tokens = settings.max_tokens end
  for _, k in ipairs(PASS) do
    if settings[k] ~= nil then body[k] = settings[k] end
  end
  if settings.reasoning_effort or settings.reasoning_summary then
    body.reasoning = { effort = settings.reasoning_effort, summary = settings.reasoning_summary }
  end
  if req.output then
    body.text = { format = { type = "json_schema", name = req.output.name or "output", schema = req.output.schema,
                             strict = openai.strict_compatible(req.output.schema) } }
  end
  if req.tools and #req.tools > 0 then
    local tools = {}
    for i, d in ipairs(req.tools) do
      tools[i] = { type = "function", name = d.name, parameters = d.parameters, strict = false,
                   description = d.description ~= "" and d.description or nil }
    end
    body.tools = tools
  end
  if stream then body.stream = true end
  return models.apply_extra_body(body, settings)
end

local function map_usage(u)
  return models.openai_usage(u, "input", "output")
end
M.map_usage = map_usage

local function bad_response(self, what)
  return models.unexpected("openai-responses", self.url, what)
end

local function failure(self, e, where)
  e = type(e) == "table" and e or {}
  local status = models.stream_error_status(e)
  return runtime.error("provider", "openai-responses: " .. where .. ": " .. tostring(e.code or e.type)
    .. ": " .. tostring(e.message), { provider = "openai-responses", status = status, error_type = e.code or e.type,
                                       retryable = status and models.retryable_status(status) or false })
end

local function summary_text(item)
  local out = {}
  for _, s in ipairs(type(item.summary) == "table" and item.summary or {}) do
    if type(s) == "table" and type(s.text) == "string" then out[#out + 1] = s.text end
  end
  for _, s in ipairs(type(item.content) == "table" and item.content or {}) do
    if type(s) == "table" and s.type == "reasoning_text" and type(s.text) == "string" then out[#out + 1] = s.text end
  end
  return table.concat(out, "\n\n")
end

-- Output items -> lash parts, in order.
local function parts_of(output, incomplete)
  local parts = {}
  for _, item in ipairs(output or {}) do
    if item.type == "message" then
      local texts = {}
      for _, c in ipairs(type(item.content) == "table" and item.content or {}) do
        if c.type == "output_text" and type(c.text) == "string" then texts[#texts + 1] = c.text
        elseif c.type == "refusal" and type(c.refusal) == "string" then texts[#texts + 1] = c.refusal end
      end
      if #texts > 0 then parts[#parts + 1] = { type = "text", text = table.concat(texts) } end
    elseif item.type == "reasoning" then
      parts[#parts + 1] = { type = "reasoning", item = item, text = summary_text(item) }
    elseif item.type == "function_call" then
      local p = { type = "tool_call", id = models.id_string(item.call_id) or models.id_string(item.id),
                  item_id = models.id_string(item.id), name = item.name }
      local raw = item.arguments
      if raw == nil or raw == "" or raw == json.null then p.args = {} else models.set_call_args(p, raw) end
      if item.status == "incomplete" or item.status == "in_progress" then p.truncated = true end
      parts[#parts + 1] = p
    end
  end
  if incomplete and parts[#parts] and parts[#parts].type == "tool_call" then parts[#parts].truncated = true end
  return parts
end

local function result_of(self, r)
  if type(r) ~= "table" then error(bad_response(self, "no response object"), 0) end
  if r.status == "failed" then error(failure(self, r.error, "the response failed"), 0) end
  local finish
  local reason = type(r.incomplete_details) == "table" and r.incomplete_details.reason or nil
  if r.status == "incomplete" then
    finish = (reason == "content_filter") and "content_filter" or "length"
  end
  local parts = parts_of(r.output, r.status == "incomplete")
  if not finish then
    finish = "stop"
    for _, p in ipairs(parts) do if p.type == "tool_call" then finish = "tool_calls" end end
  end
  return { parts = parts, finish = finish, provider_finish = reason or r.status, usage = map_usage(r.usage),
           model = r.model, id = r.id }
end

--- Parse a non-streamed response body (exported for tests).
function Model:parse(body)
  local v, err = json.try_decode(body)
  if type(v) ~= "table" then error(bad_response(self, err or "not a JSON object"), 0) end
  if type(v.error) == "table" and v.status ~= "failed" then error(failure(self, v.error, "error in the response"), 0) end
  if type(v.output) ~= "table" then error(bad_response(self, "no 'output' array"), 0) end
  return result_of(self, v)
end

local TERMINAL = { ["response.completed"] = true, ["response.incomplete"] = true, ["response.failed"] = true }

local function new_stream(self, on_text, on_thinking)
  local st = {}
  function st.reset()
    st.items, st.final, st.done = {}, nil, false
  end
  st.reset()
  function st.on_event(ev)
    if ev.data == nil or ev.data == "" or ev.data == "[DONE]" then return end
    local v, err = json.try_decode(ev.data)
    if type(v) ~= "table" then error(bad_response(self, "stream event is not JSON: " .. tostring(err)), 0) end
    local t = v.type or ev.event
    if t == "response.output_text.delta" then
      if on_text and type(v.delta) == "string" and v.delta ~= "" then on_text(v.delta) end
    elseif t == "response.reasoning_summary_text.delta" or t == "response.reasoning_text.delta" then
      if on_thinking and type(v.delta) == "string" and v.delta ~= "" then on_thinking(v.delta) end
    elseif t == "response.output_item.added" or t == "response.output_item.done" then
      if type(v.item) == "table" and type(v.output_index) == "number" then
        st.items[v.output_index + 1] = v.item
      end
    elseif TERMINAL[t] then
      st.final = v.response
      st.done = true
      if t == "response.failed" then
        error(failure(self, type(v.response) == "table" and v.response.error or nil, "the response failed"), 0)
      end
    elseif t == "error" then
      error(failure(self, v.error or v, "error event in the response stream"), 0)
    end
  end
  function st.is_done()
    return st.done
  end
  function st.result()
    local r = st.final
    if type(r) ~= "table" then error(bad_response(self, "no terminal event"), 0) end
    -- the terminal event carries the whole output; fall back on the items
    -- seen on the way when a server leaves it empty
    if type(r.output) ~= "table" or #r.output == 0 then r.output = st.items end
    return result_of(self, r)
  end
  return st
end

--- @see lash.models
function Model:request(req)
  return models.send(self, req, "openai-responses", openai.headers(self.key), new_stream)
end

return M
