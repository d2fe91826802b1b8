--- lash.models.provider: the HTTP plumbing the provider adapters share
-- (lash.models.openai, .openai_responses, .anthropic, .test, .func): option
-- and settings checks, API keys, retries with backoff and jitter (see
-- lash.models for the policy), provider error bodies turned into typed
-- errors, wire-message conversion and token estimates. Below lash.models
-- (the registry that resolves "provider:model" to these adapters), so an
-- adapter never requires the module that requires it.
-- @module lash.models.provider
local json = require "lash.json"
local runtime = require "lash.runtime"
local defaults = require "lash.defaults"

local M = {}

local function model_error(kind, message, fields)
  return runtime.error(kind, message, fields)
end

--- Check a provider's model options and name; raise a `config` error that
-- names the known options, or shows how to write the model, when wrong.
-- @tparam string provider e.g. "openai"
-- @tparam table opts the options given
-- @tparam table known set of option names the provider takes
-- @tparam string name the model id after `provider:`
-- @tparam string example a model id to show, e.g. "gpt-4.1"
function M.check_options(provider, opts, known, name, example)
  for k in pairs(opts) do
    if not known[k] then
      local names = {}
      for n in pairs(known) do names[#names + 1] = n end
      table.sort(names)
      error(model_error("config", provider .. ": unknown model option '" .. tostring(k) .. "' (known: "
        .. table.concat(names, ", ") .. ")"), 0)
    end
  end
  if name == nil or name == "" then
    error(model_error("config", provider .. ": no model name; write " .. provider .. ":<model>, e.g. "
      .. provider .. ":" .. example), 0)
  end
end

--- Read an API key from opts or the environment; raise a clear `config`
-- error when missing.
function M.api_key(opts, env_name, provider, model_name)
  local key = opts.api_key or os.getenv(env_name)
  if key == nil or key == "" then
    error(model_error("config", env_name .. " is not set: export it (or pass api_key = ... in the model options) to use "
      .. provider .. ":" .. model_name), 0)
  end
  return key
end

--- Join a base URL and a path without doubling or dropping the slash.
function M.join_url(base, path)
  return (base:gsub("/+$", "")) .. path
end

local RETRY_STATUS = { [408] = true, [409] = true, [429] = true }

--- Is an HTTP status worth retrying?
function M.retryable_status(status)
  return RETRY_STATUS[status] or (status >= 500 and status <= 599)
end

local MONTHS = { Jan = 1, Feb = 2, Mar = 3, Apr = 4, May = 5, Jun = 6, Jul = 7, Aug = 8,
                 Sep = 9, Oct = 10, Nov = 11, Dec = 12 }

--- Seconds to wait according to `retry-after-ms` / `retry-after`, or nil.
function M.retry_after(headers)
  if not headers then return nil end
  local ms = tonumber(headers["retry-after-ms"])
  if ms and ms >= 0 then return ms / 1000 end
  local ra = headers["retry-after"]
  if not ra then return nil end
  local s = tonumber(ra)
  if s and s >= 0 then return s end
  -- HTTP-date: "Wed, 21 Oct 2015 07:28:00 GMT"
  local d, mon, y, h, mi, sec = ra:match("%a+, (%d+) (%a+) (%d+) (%d+):(%d+):(%d+) GMT")
  if d and MONTHS[mon] then
    local t = os.time { year = tonumber(y), month = MONTHS[mon], day = tonumber(d),
                        hour = tonumber(h), min = tonumber(mi), sec = tonumber(sec), isdst = false }
    local now_utc = os.time(os.date("!*t"))
    return math.max(0, t - now_utc)
  end
  return nil
end

--- The backoff for attempt n (1-based) with jitter.
function M.backoff(n, base)
  base = base or defaults.model.retry_delay
  local d = math.min(defaults.model.max_backoff, base * 2 ^ (n - 1))
  return d * (0.75 + 0.25 * math.random())
end

-- Provider error bodies: {"error": {"type": ..., "message": ...}} (both
-- providers), Anthropic adds a top-level "type": "error".
local function describe_body(body)
  if type(body) ~= "string" or body == "" then return nil end
  local v = json.try_decode(body)
  if type(v) == "table" and type(v.error) == "table" then
    local e = v.error
    local t = e.type or e.code
    local msg = e.message
    if type(msg) == "string" then
      return (type(t) == "string" and (t .. ": ") or "") .. msg, t
    end
  elseif type(v) == "table" and type(v.error) == "string" then
    return v.error
  end
  local snippet = body:sub(1, 300):gsub("%s+", " ")
  return snippet
end
M.describe_body = describe_body

--- A typed error for a failed HTTP exchange with a provider.
function M.status_error(provider, status, body, url)
  local desc, etype = describe_body(body)
  local kind = (status == 401 or status == 403) and "auth" or "provider"
  local msg = string.format("%s: HTTP %d%s (POST %s)", provider, status, desc and (" " .. desc) or "", url)
  if kind == "auth" then
    msg = msg .. "; check the API key"
  end
  return model_error(kind, msg, { status = status, provider = provider, error_type = etype,
                                  body = body, retryable = M.retryable_status(status) })
end

local TRANSPORT_RETRY = { connect = true, timeout = true, http = true, stream = true }

--- POST a JSON body to a provider with retries.
-- @tparam table p `provider`, `url`, `headers`, `body` (string), `timeout`,
--   `stream` (boolean), `on_event(ev)` (each SSE event, when streaming),
--   `stream_done()` (-> true when the terminal event arrived),
--   `reset()` (called before each attempt), `max_retries`, `retry_delay`,
--   `max_retry_delay`, `on_retry(info)`
-- @treturn[1] string body (not streaming)
-- @treturn[2] nil (streaming; events went to on_event)
-- @raise `provider`/`auth` errors for HTTP failures, transport errors as
--   the HTTP layer raised them
function M.post(p)
  local L = runtime
  local http = L.http
  if not http or not http.request then
    error(model_error("unavailable", p.provider .. ": lash.http is not available in this build"), 0)
  end
  local max_retries = p.max_retries or defaults.model.max_retries
  local attempt = 0
  while true do
    attempt = attempt + 1
    if p.reset then p.reset() end
    if p.on_attempt then p.on_attempt(attempt) end
    local ok, status, headers, body
    local raw, rawn = {}, 0
    local req = { method = "POST", url = p.url, headers = p.headers, body = p.body, timeout = p.timeout }
    if p.stream then
      local parser = http.sse_parser()
      -- on_chunk runs in the task (it may wait); an error raised here
      -- aborts the transfer and comes out of http.request
      req.on_chunk = function(chunk)
        if rawn < 65536 then raw[#raw + 1] = chunk; rawn = rawn + #chunk end
        for _, ev in ipairs(parser:feed(chunk)) do p.on_event(ev) end
      end
    end
    ok, status, headers, body = pcall(http.request, req)
    local err
    if not ok then
      err = status
      if L.is_error(err, "cancelled") then error(err, 0) end
      if not L.is_error(err) then
        err = model_error("provider", p.provider .. ": bad response stream from " .. p.url .. ": " .. tostring(err),
                          { url = p.url })
      end
    elseif status < 200 or status > 299 then
      err = M.status_error(p.provider, status, body or table.concat(raw), p.url)
    elseif p.stream and not p.stream_done() then
      err = model_error("stream", p.provider .. ": the response stream ended before its last event "
        .. "(connection dropped?) (" .. p.url .. ")", { url = p.url, retryable = true })
    else
      return body
    end
    local retry = false
    if L.is_error(err) then
      if err.status then
        retry = M.retryable_status(err.status)
      else
        retry = TRANSPORT_RETRY[err.kind] or false
      end
    end
    if not retry or attempt > max_retries then
      if type(err) == "table" and attempt > 1 then err.attempts = attempt end
      error(err, 0)
    end
    local after = M.retry_after(headers)
    local delay
    if after then
      delay = math.min(after, p.max_retry_delay or defaults.model.max_retry_delay)
    else
      delay = M.backoff(attempt, p.retry_delay)
    end
    if p.on_retry then
      p.on_retry { attempt = attempt, delay = delay, status = err.status, reason = err.kind,
                   message = err.message, retry_after = after }
    end
    if delay > 0 then L.sleep(delay) end
  end
end

--- The request path the HTTP adapters share: decide whether to stream,
-- merge the caller's extra headers, encode the body, POST with retries and
-- turn the reply into a response.
-- @param model the adapter's model object (`opts`, `url`, `body(req, stream)`,
--   `parse(body)`)
-- @tparam table req the request (see the module comment)
-- @tparam string provider the provider name used in errors
-- @tparam table headers the provider's own headers (extended in place)
-- @param new_stream `function(model, on_text) -> st` with `on_event`,
--   `is_done`, `reset` and `result`
function M.send(model, req, provider, headers, new_stream)
  local opts = model.opts
  local stream = opts.stream
  if stream == nil then stream = req.stream end
  if stream == nil then stream = req.on_text ~= nil end
  for k, v in pairs(opts.headers or {}) do headers[k] = v end
  local body = json.encode_canonical(model:body(req, stream))
  local st = stream and new_stream(model, req.on_text, req.on_thinking) or nil
  local on_event = st and function(ev)
    if type(ev.data) == "string" then ev.data = M.valid_utf8(ev.data) end
    return st.on_event(ev)
  end
  local resp_body = M.post {
    provider = provider, url = model.url, headers = headers, body = body,
    timeout = opts.timeout or defaults.model.timeout, stream = stream,
    on_event = on_event, stream_done = st and st.is_done, reset = st and st.reset,
    max_retries = opts.max_retries, retry_delay = opts.retry_delay,
    max_retry_delay = opts.max_retry_delay, on_retry = req.on_retry, on_attempt = req.on_attempt,
  }
  if st then return st.result() end
  -- a reply with invalid UTF-8 would go back in the next request as
  -- invalid JSON (a 400): repair it once, here
  return model:parse(M.valid_utf8(resp_body))
end

--- Replace every invalid UTF-8 sequence in `s` with U+FFFD.
function M.valid_utf8(s)
  if utf8.len(s) then return s end
  local out, pos = {}, 1
  while pos <= #s do
    local n, bad = utf8.len(s, pos)
    if n then
      out[#out + 1] = s:sub(pos)
      break
    end
    out[#out + 1] = s:sub(pos, bad - 1)
    out[#out + 1] = "\u{FFFD}"
    pos = bad + 1
  end
  return table.concat(out)
end

--- A tool-call id as the string the APIs require: OpenAI-compatible
-- servers send numbers (`"id": 17`); nil for a missing or empty id.
function M.id_string(id)
  if type(id) == "number" then
    local i = math.tointeger(id)
    return i and string.format("%d", i) or tostring(id)
  end
  if type(id) == "string" and id ~= "" then return id end
  return nil
end

--- Refuse `model_settings` keys a provider does not know (a typo must not
-- be dropped silently); `extra_body` is always allowed.
-- @tparam string provider e.g. "anthropic"
-- @tparam table settings
-- @tparam table known set of setting names
function M.check_settings(provider, settings, known)
  for k in pairs(settings) do
    if not known[k] and k ~= "extra_body" then
      local names = { "extra_body" }
      for n in pairs(known) do names[#names + 1] = n end
      table.sort(names)
      error(model_error("config", provider .. ": unknown model setting '" .. tostring(k) .. "' (known: "
        .. table.concat(names, ", ") .. "; put provider options lash does not model in extra_body = {...})"), 0)
    end
  end
  local extra = settings.extra_body
  if extra ~= nil and (type(extra) ~= "table" or json.is_array(extra) or extra[1] ~= nil) then
    error(model_error("config", provider .. ": model_settings.extra_body must be a table of request fields, got "
      .. type(extra)), 0)
  end
end

--- Merge `settings.extra_body` into a request body (its keys win).
function M.apply_extra_body(body, settings)
  for k, v in pairs(settings.extra_body or {}) do body[k] = v end
  return body
end

--- The status a mid-stream error object stands for, so the retry rules of
-- HTTP apply to it: the providers document these types as transient.
local STREAM_ERROR_STATUS = { overloaded_error = 529, api_error = 500, rate_limit_error = 429,
                              server_error = 500, rate_limit_exceeded = 429, service_unavailable = 503,
                              overloaded = 503, internal_error = 500, timeout = 504 }
function M.stream_error_status(e)
  if type(e) ~= "table" then return nil end
  if type(e.code) == "number" and e.code >= 400 then return math.tointeger(e.code) end
  return STREAM_ERROR_STATUS[e.type] or STREAM_ERROR_STATUS[e.code]
end

-- Wire forms, made once. A history only grows during a run (messages are
-- appended, never changed), so an adapter's wire form of each message is
-- made once, frozen (json.freeze: encode_canonical then encodes it once
-- too) and reused by every later request; the request bodies stay
-- byte-identical, they just stop costing O(history) per step.
local weak_k = { __mode = "k" }
local prefixes = setmetatable({}, weak_k)   -- convert -> history -> state
local memos = setmetatable({}, weak_k)      -- convert -> key -> value

-- The weak-keyed table under `key` in `store`, made on first use.
local function weak_slot(store, key)
  local t = store[key]
  if not t then
    t = setmetatable({}, weak_k)
    store[key] = t
  end
  return t
end

--- The wire messages of a history: `convert(message)` (a list of wire
-- tables for one history message) for each message in order, flattened,
-- after `head` (wire tables put first, e.g. a system message; `head_key`,
-- a string, stands for them: a different key starts the list again).
-- Each wire table is frozen, and the list is grow-only (json.grow_only):
-- encoding it again encodes only what was appended. `convert` must depend
-- on the message alone. When called again with the same history table,
-- only the messages appended since are converted. The returned list is
-- shared: read it, do not change it.
-- @tparam table history
-- @tparam function convert `function(message) -> {wire...}`
-- @tparam[opt] string head_key
-- @tparam[opt] function head `function(head_key) -> {wire...}`
-- @treturn table
function M.wire_messages(history, convert, head_key, head)
  local by_hist = weak_slot(prefixes, convert)
  local st = by_hist[history]
  local nh = #history
  if not (st and st.n <= nh and (st.n == 0 or history[st.n] == st.last) and st.head_key == head_key) then
    st = { n = 0, out = json.grow_only({}), head_key = head_key }
    if head then
      for _, w in ipairs(head(head_key)) do st.out[#st.out + 1] = json.freeze(w) end
    end
    by_hist[history] = st
  end
  local out, n = st.out, #st.out
  for i = st.n + 1, nh do
    local w = convert(history[i])
    for j = 1, #w do
      n = n + 1
      out[n] = json.freeze(w[j])
    end
  end
  st.n, st.last = nh, history[nh]
  return out
end

--- Split a user message's parts for an adapter that sends tool results as
-- items of their own: `on_result(part)` for each tool result, in order;
-- returns the other parts, in order.
-- @tparam table parts
-- @tparam function on_result
-- @treturn table
function M.split_results(parts, on_result)
  local rest = {}
  for _, p in ipairs(parts) do
    if p.type == "tool_result" then on_result(p) else rest[#rest + 1] = p end
  end
  return rest
end

--- `convert(key)`, made once per key table (by identity) and frozen: for
-- wire forms of things that stay the same table while unchanged, such as
-- the agent's tool definitions.
-- @tparam table key
-- @tparam function convert `function(key) -> table`
function M.wire(key, convert)
  local memo = weak_slot(memos, convert)
  local v = memo[key]
  if v == nil then
    v = json.freeze(convert(key))
    memo[key] = v
  end
  return v
end

--- Set a tool-call part's arguments from the JSON text a model streamed:
-- `args` when it decodes to an object, else `args_json` with the raw text
-- (the tool then reports malformed arguments to the model).
function M.set_call_args(part, raw)
  local v = json.try_decode(raw)
  if type(v) == "table" and not json.is_array(v) and v[1] == nil then part.args = v else part.args_json = raw end
  return part
end

--- Empty usage counters.
function M.usage()
  return { input_tokens = 0, output_tokens = 0, cache_read_tokens = 0, cache_write_tokens = 0 }
end

local function num(x) return type(x) == "number" and x or 0 end

--- lash's usage from an OpenAI usage object. Chat Completions and the
-- Responses API say the same things under other names: `input` and
-- `output` are the stems ("prompt"/"completion", or "input"/"output") of
-- `<stem>_tokens` and `<stem>_tokens_details`.
-- @tparam table|nil u the usage object
-- @tparam string input
-- @tparam string output
-- @treturn table
function M.openai_usage(u, input, output)
  if type(u) ~= "table" then return M.usage() end
  local ind, outd = u[input .. "_tokens_details"], u[output .. "_tokens_details"]
  ind, outd = type(ind) == "table" and ind or {}, type(outd) == "table" and outd or {}
  local reasoning = num(outd.reasoning_tokens)
  return { input_tokens = num(u[input .. "_tokens"]), output_tokens = num(u[output .. "_tokens"]),
           cache_read_tokens = num(ind.cached_tokens), cache_write_tokens = 0,
           reasoning_tokens = reasoning > 0 and reasoning or nil }
end

--- The error for a response a provider's adapter cannot read.
-- @tparam string provider e.g. "openai"
-- @tparam string url where the response came from
-- @tparam string what what is wrong with it
-- @return a typed error of kind "provider"
function M.unexpected(provider, url, what)
  return runtime.error("provider", provider .. ": unexpected response from " .. url .. ": " .. what,
                       { provider = provider })
end

--- A rough, deterministic token estimate for offline models (words).
function M.estimate_tokens(s)
  local n = 0
  for _ in tostring(s):gmatch("%S+") do n = n + 1 end
  return n
end

--- The same estimate for a request's input: the instructions and the text
-- of every message part.
function M.estimate_input_tokens(messages, instructions)
  local n = M.estimate_tokens(instructions or "")
  for _, m in ipairs(messages) do
    for _, p in ipairs(m.parts or {}) do n = n + M.estimate_tokens(p.text or p.content or "") end
  end
  return n
end

return M
