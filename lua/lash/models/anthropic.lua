--- The `anthropic` provider: the Messages API (POST /v1/messages).
--
-- Maps lash's provider-neutral history to `messages` with text, tool_use
-- and tool_result blocks (consecutive messages of one role merged, as the
-- API requires alternation), the rendered instructions to `system`, tool
-- definitions to `tools` (`input_schema`). Prompt caching: a
-- `cache_control` breakpoint on the last tool and on the system block (the
-- stable prefix of a run), and one on the newest message so each step
-- reads the previous step's prefix from the cache; `cache = false` turns
-- them off.
--
-- Streams (SSE: message_start, content_block_start/delta/stop with
-- text_delta and input_json_delta, message_delta, message_stop, ping,
-- error) when the run streams; otherwise one JSON response.
-- Extended thinking: `model_settings.thinking = {budget_tokens = N}` (sent
-- as type "enabled") or `"adaptive"` / `{type = "adaptive"}` (with
-- `effort = "low"|"medium"|"high"|"max"` in output_config); thinking and
-- redacted_thinking blocks are kept verbatim (signature and data
-- included) and sent back in their place, before the tool_use they led
-- to. Structured output: `output_config.format` (json_schema). Images and
-- documents: image and document blocks (base64, or text for text files).
-- Usage: input_tokens counts all input, cache reads and writes included;
-- cache_read_tokens and cache_write_tokens break them out.
--
-- Options: api_key (default $ANTHROPIC_API_KEY), base_url (default
-- $ANTHROPIC_BASE_URL or https://api.anthropic.com), max_tokens (default
-- 8192, overridden by model_settings.max_tokens), timeout (600 s),
-- max_retries (2), retry_delay, max_retry_delay, cache (true), headers.
-- model_settings: see SETTINGS; anything else goes in extra_body.
-- @module lash.models.anthropic
local runtime = require "lash.runtime"
local json = require "lash.json"
local models = require "lash.models.provider"

local M = {}

local Model = {}
Model.__index = Model

M.API_VERSION = "2023-06-01"
M.DEFAULT_BASE_URL = "https://api.anthropic.com"
M.DEFAULT_MAX_TOKENS = 8192

local OPTIONS = { api_key = true, base_url = true, max_tokens = true, timeout = true, max_retries = true,
                  retry_delay = true, max_retry_delay = true, cache = true, headers = true, stream = true }

--- Make an Anthropic model. Raises a `config` error when no key is set.
-- @tparam string name the model id, e.g. "claude-sonnet-4-6"
-- @tparam[opt] table opts
function M.new(name, opts)
  opts = opts or {}
  models.check_options("anthropic", opts, OPTIONS, name, "claude-sonnet-4-6")
  local key = models.api_key(opts, "ANTHROPIC_API_KEY", "anthropic", name)
  local base = opts.base_url or os.getenv("ANTHROPIC_BASE_URL")
  if base == nil or base == "" then base = M.DEFAULT_BASE_URL end
  return setmetatable({
    name = "anthropic:" .. name, model_id = name, key = key,
    url = models.join_url(base, "/v1/messages"), opts = opts,
  }, Model)
end

--- The model_settings this provider takes.
M.SETTINGS = { max_tokens = true, temperature = true, top_p = true, top_k = true, stop_sequences = true,
               metadata = true, tool_choice = true, thinking = true, effort = true, service_tier = true }

local EPHEMERAL = { type = "ephemeral" }

local function user_blocks(msg, out)
  for _, p in ipairs(msg.parts) do
    if p.type == "text" then
      if p.text ~= "" then out[#out + 1] = { type = "text", text = p.text } end
    elseif p.type == "tool_result" then
      out[#out + 1] = { type = "tool_result", tool_use_id = models.id_string(p.id), content = p.content ~= "" and p.content or nil,
                        is_error = p.status ~= "ok" or nil }
    elseif p.type == "image" then
      out[#out + 1] = { type = "image", source = { type = "base64", media_type = p.media_type, data = p.data } }
    elseif p.type == "document" then
      if p.text then
        out[#out + 1] = { type = "document", title = p.name,
                          source = { type = "text", media_type = "text/plain", data = p.text } }
      else
        out[#out + 1] = { type = "document", title = p.name,
                          source = { type = "base64", media_type = p.media_type, data = p.data } }
      end
    end
  end
end

local function assistant_blocks(msg, out)
  for _, p in ipairs(msg.parts) do
    if p.type == "text" then
      if p.text ~= "" then out[#out + 1] = { type = "text", text = p.text } end
    elseif p.type == "thinking" and p.signature then
      -- verbatim: the API checks the signature against the text (reasoning
      -- from other providers has none and is not sent)
      out[#out + 1] = { type = "thinking", thinking = p.text, signature = p.signature }
    elseif p.type == "redacted_thinking" then
      out[#out + 1] = { type = "redacted_thinking", data = p.data }
    elseif p.type == "tool_call" then
      -- malformed arguments are replayed as an empty object: the API
      -- requires an object, and the retry prompt that follows says why
      out[#out + 1] = { type = "tool_use", id = models.id_string(p.id), name = p.name, input = p.args or {} }
    end
  end
end

-- The wire message of one history message (none when it has no blocks);
-- its blocks are frozen too, so merging neighbours stays cheap.
local function wire_message(m)
  local role = m.role == "assistant" and "assistant" or "user"
  local blocks = json.array()
  if role == "user" then user_blocks(m, blocks) else assistant_blocks(m, blocks) end
  if #blocks == 0 then return {} end
  for i = 1, #blocks do json.freeze(blocks[i]) end
  return { { role = role, content = blocks } }
end

-- The last message with the cache breakpoint on its last block.
local function with_breakpoint(last)
  local blocks = table.move(last.content, 1, #last.content, 1, json.array())
  local copy = {}
  for k, v in pairs(blocks[#blocks]) do copy[k] = v end
  copy.cache_control = EPHEMERAL
  blocks[#blocks] = copy
  return { role = last.role, content = blocks }
end

-- history -> {wire =, n =, out =, last =}: the merged list so far (grow-
-- only but for its last message, json.grow_only), how many wire messages
-- it holds, and its last message as merged, without the breakpoint.
local merged_lists = setmetatable({}, { __mode = "k" })

--- Convert a history to Anthropic `messages` (exported for tests):
-- consecutive messages of one role merge, and with `cache` the last block
-- carries cache_control. Each message's wire form is made once
-- (models.wire_messages) and the merged list is kept and appended to: a
-- step merges and encodes only what it added. The returned list is
-- shared: read it, do not change it.
function M.messages(history, cache)
  local wire = models.wire_messages(history, wire_message)
  local st = merged_lists[history]
  if not (st and st.wire == wire and st.n <= #wire) then
    st = { wire = wire, n = 0, out = json.grow_only({}) }
    merged_lists[history] = st
  end
  local out = st.out
  if st.last then out[#out] = st.last end    -- the breakpoint moves on
  for i = st.n + 1, #wire do
    local w, last = wire[i], st.last
    if last and last.role == w.role then
      local m = { role = last.role, content = table.move(last.content, 1, #last.content, 1, json.array()) }
      table.move(w.content, 1, #w.content, #m.content + 1, m.content)
      out[#out], st.last = m, m
    else
      out[#out + 1], st.last = w, w
    end
  end
  st.n = #wire
  if cache and st.last then out[#out] = with_breakpoint(st.last) end
  return out
end

local function wire_tools(defs, cache)
  local tools = {}
  for i, d in ipairs(defs) do
    tools[i] = { name = d.name, description = d.description ~= "" and d.description or nil,
                 input_schema = d.parameters }
  end
  if cache then
    local lastt = {}
    for k, v in pairs(tools[#tools]) do lastt[k] = v end
    lastt.cache_control = EPHEMERAL
    tools[#tools] = lastt
  end
  return tools
end
local function wire_tools_cached(defs) return wire_tools(defs, true) end
local function wire_tools_plain(defs) return wire_tools(defs, false) end

local function bad_setting(msg)
  error(runtime.error("config", "anthropic: " .. msg), 0)
end

-- thinking = {budget_tokens = N} | "adaptive" | {type = "adaptive"|"enabled"|"disabled", ...}
local function thinking_config(t)
  if t == nil or t == false then return nil end
  if t == "adaptive" then return { type = "adaptive" } end
  if type(t) ~= "table" then
    bad_setting("model_settings.thinking must be {budget_tokens = N} or \"adaptive\", got " .. tostring(t))
  end
  local ty = t.type or (t.budget_tokens and "enabled")
  if ty == "enabled" then
    local b = t.budget_tokens
    if math.type(b) ~= "integer" or b < 1024 then
      bad_setting("model_settings.thinking.budget_tokens must be an integer >= 1024 (the API's minimum), got "
        .. tostring(b))
    end
    return { type = "enabled", budget_tokens = b }
  elseif ty == "adaptive" or ty == "disabled" then
    local out = {}
    for k, v in pairs(t) do out[k] = v end
    out.type = ty
    return out
  end
  bad_setting("model_settings.thinking needs budget_tokens = N, or type = \"adaptive\"")
end

--- Anthropic enforces any JSON Schema given as output_config.format.
function Model:native_output()
  return true
end

--- Build the request body (exported for tests).
function Model:body(req, stream)
  local settings = req.settings or {}
  models.check_settings("anthropic", settings, M.SETTINGS)
  local cache = self.opts.cache ~= false
  local body = {
    model = self.model_id,
    max_tokens = settings.max_tokens or self.opts.max_tokens or M.DEFAULT_MAX_TOKENS,
    messages = M.messages(req.messages, cache),
  }
  for _, k in ipairs { "temperature", "top_p", "top_k", "stop_sequences", "metadata", "tool_choice",
                       "service_tier" } do
    if settings[k] ~= nil then body[k] = settings[k] end
  end
  body.thinking = thinking_config(settings.thinking)
  if body.thinking and body.thinking.budget_tokens and body.thinking.budget_tokens >= body.max_tokens then
    bad_setting(string.format("model_settings.thinking.budget_tokens (%d) must be below max_tokens (%d): the "
      .. "budget is part of the output limit; raise model_settings.max_tokens", body.thinking.budget_tokens,
      body.max_tokens))
  end
  local oc = {}
  if settings.effort ~= nil then oc.effort = settings.effort end
  if type(settings.thinking) == "table" and settings.thinking.effort ~= nil then
    oc.effort = settings.thinking.effort
    body.thinking.effort = nil
  end
  if req.output then
    oc.format = { type = "json_schema", schema = req.output.schema }
  end
  if next(oc) then body.output_config = oc end
  if req.instructions and req.instructions ~= "" then
    body.system = { { type = "text", text = req.instructions, cache_control = cache and EPHEMERAL or nil } }
  end
  if req.tools and #req.tools > 0 then
    body.tools = models.wire(req.tools, cache and wire_tools_cached or wire_tools_plain)
  end
  if stream then body.stream = true end
  return models.apply_extra_body(body, settings)
end

local FINISH = { end_turn = "stop", stop_sequence = "stop", tool_use = "tool_calls", max_tokens = "length",
                 refusal = "refusal", pause_turn = "stop", model_context_window_exceeded = "length" }

local function map_usage(u)
  u = u or {}
  local created = u.cache_creation_input_tokens
  local read = u.cache_read_input_tokens
  created = type(created) == "number" and created or 0
  read = type(read) == "number" and read or 0
  local input = type(u.input_tokens) == "number" and u.input_tokens or 0
  return { input_tokens = input + created + read, output_tokens = type(u.output_tokens) == "number" and u.output_tokens or 0,
           cache_read_tokens = read, cache_write_tokens = created }
end
M.map_usage = map_usage

local function bad_response(self, what)
  return models.unexpected("anthropic", self.url, what)
end

--- Parse a non-streamed response body (exported for tests).
function Model:parse(body)
  local v, err = json.try_decode(body)
  if type(v) ~= "table" then error(bad_response(self, err or "not a JSON object"), 0) end
  if type(v.content) ~= "table" then error(bad_response(self, "no 'content' array"), 0) end
  local parts = {}
  for _, b in ipairs(v.content) do
    if b.type == "text" then
      parts[#parts + 1] = { type = "text", text = b.text }
    elseif b.type == "thinking" then
      parts[#parts + 1] = { type = "thinking", text = b.thinking, signature = b.signature }
    elseif b.type == "redacted_thinking" then
      parts[#parts + 1] = { type = "redacted_thinking", data = b.data }
    elseif b.type == "tool_use" then
      local args = b.input
      if type(args) ~= "table" then args = {} end
      parts[#parts + 1] = { type = "tool_call", id = models.id_string(b.id), name = b.name, args = args }
    end
  end
  -- max_tokens cuts the last block: a tool_use there is incomplete
  local last = parts[#parts]
  if v.stop_reason == "max_tokens" and last and last.type == "tool_call" then last.truncated = true end
  return { parts = parts, finish = FINISH[v.stop_reason] or "stop", provider_finish = v.stop_reason,
           usage = map_usage(v.usage), model = v.model, id = v.id }
end

-- Streaming state: blocks by index, usage, stop reason.
local function new_stream(self, on_text, on_thinking)
  local st = { blocks = {}, order = {}, usage = {}, done = false }
  function st.reset()
    st.blocks, st.order, st.usage, st.done, st.stop_reason, st.id, st.model = {}, {}, {}, false, nil, nil, nil
  end
  function st.on_event(ev)
    local name = ev.event
    if name == "ping" then return end
    local data, derr = json.try_decode(ev.data)
    if type(data) ~= "table" then
      error(bad_response(self, "event '" .. tostring(name) .. "' is not JSON: " .. tostring(derr)), 0)
    end
    local t = data.type or name
    if t == "message_start" then
      local m = data.message or {}
      st.id, st.model = m.id, m.model
      for k, x in pairs(m.usage or {}) do st.usage[k] = x end
    elseif t == "content_block_start" then
      local cb = data.content_block or {}
      local b = { type = cb.type, text = cb.text or cb.thinking or "", id = cb.id, name = cb.name, json = {},
                  signature = cb.signature, data = cb.data }
      if cb.type == "tool_use" and type(cb.input) == "table" and next(cb.input) then
        b.input = cb.input
      end
      st.blocks[data.index] = b
      st.order[#st.order + 1] = data.index
      if cb.type == "text" and b.text ~= "" and on_text then on_text(b.text) end
    elseif t == "content_block_delta" then
      local b = st.blocks[data.index]
      local d = data.delta or {}
      if not b then error(bad_response(self, "delta for unknown content block " .. tostring(data.index)), 0) end
      local piece = d.text or d.thinking or d.signature or d.partial_json
      if d.type ~= nil and type(piece) ~= "string" then
        error(bad_response(self, "content_block_delta " .. tostring(d.type) .. " without its text"), 0)
      end
      if d.type == "text_delta" then
        b.text = b.text .. d.text
        if on_text and d.text ~= "" then on_text(d.text) end
      elseif d.type == "thinking_delta" then
        b.text = b.text .. d.thinking
        if on_thinking and d.thinking ~= "" then on_thinking(d.thinking) end
      elseif d.type == "signature_delta" then
        b.signature = (b.signature or "") .. d.signature
      elseif d.type == "input_json_delta" then
        b.json[#b.json + 1] = d.partial_json
      end
    elseif t == "content_block_stop" then
      local b = st.blocks[data.index]
      if b then b.stopped = true end
    elseif t == "message_delta" then
      if data.delta and data.delta.stop_reason then st.stop_reason = data.delta.stop_reason end
      for k, x in pairs(data.usage or {}) do
        if x ~= json.null then st.usage[k] = x end
      end
    elseif t == "message_stop" then
      st.done = true
    elseif t == "error" then
      local e = data.error or {}
      local status = models.stream_error_status(e)
      error(runtime.error("provider", "anthropic: error event in the response stream: "
        .. tostring(e.type) .. ": " .. tostring(e.message),
        { provider = "anthropic", status = status, error_type = e.type }), 0)
    end
  end
  function st.is_done()
    return st.done
  end
  function st.result()
    local parts = {}
    for _, idx in ipairs(st.order) do
      local b = st.blocks[idx]
      if b.type == "text" then
        parts[#parts + 1] = { type = "text", text = b.text }
      elseif b.type == "thinking" then
        parts[#parts + 1] = { type = "thinking", text = b.text, signature = b.signature }
      elseif b.type == "redacted_thinking" then
        parts[#parts + 1] = { type = "redacted_thinking", data = b.data }
      elseif b.type == "tool_use" then
        local p = { type = "tool_call", id = models.id_string(b.id), name = b.name }
        local raw = table.concat(b.json)
        if raw == "" then
          p.args = b.input or {}
        else
          models.set_call_args(p, raw)
        end
        -- the stream's structure says whether the call is whole: a block
        -- never stopped, or the last block when max_tokens ended the turn
        if not b.stopped or (st.stop_reason == "max_tokens" and idx == st.order[#st.order]) then
          p.truncated = true
        end
        parts[#parts + 1] = p
      end
    end
    return { parts = parts, finish = FINISH[st.stop_reason] or "stop", provider_finish = st.stop_reason,
             usage = map_usage(st.usage), model = st.model, id = st.id }
  end
  return st
end

--- @see lash.models
function Model:request(req)
  return models.send(self, req, "anthropic",
    { ["x-api-key"] = self.key, ["anthropic-version"] = M.API_VERSION, ["content-type"] = "application/json" },
    new_stream)
end

return M
