--- Model resolution: `provider:model` strings to model objects, through the
-- provider adapters; the plumbing they share (API keys, retries with backoff
-- and jitter, provider error bodies turned into typed errors) is
-- lash.models.provider, whose functions are also here by the same names.
--
-- A model is any table with `name` and `request(self, req) -> response`:
--
--   req = { instructions = string|nil, messages = history (see lash.agent),
--           tools = { {name=, description=, parameters=}... },
--           settings = { max_tokens=, temperature=, ... },
--           stream = boolean | nil            -- stream the response (default: on_text given)
--           on_text = function(delta) | nil   -- streamed text goes here
--           on_retry = function(info) | nil   -- {attempt=, delay=, status=, reason=}
--           info = { run_id=, step=, agent= } }
--   response = { parts = { {type="text", text=},
--                          {type="tool_call", id=, name=, args=table|nil,
--                           args_json=string|nil (only when args did not decode)} },
--                finish = "stop"|"tool_calls"|"length"|"content_filter"|"refusal"|...,
--                provider_finish = the provider's own stop reason,
--                usage = { input_tokens=, output_tokens=, cache_read_tokens=,
--                          cache_write_tokens= },
--                model = the provider's model id, id = the response id }
--
-- Thinking: `req.on_thinking(delta)` gets streamed reasoning text; response
-- parts may hold `{type="thinking", text=, signature=}`,
-- `{type="redacted_thinking", data=}` (Anthropic) and `{type="reasoning",
-- item=, text=}` (Responses API), kept verbatim and sent back in order. A
-- tool_call part cut by the output limit carries `truncated = true`.
-- `req.output = {schema=, name=}` asks for structured output (adapters
-- with `native_output(schema) -> true` enforce it on the wire).
-- `req.on_attempt(n)` is called before each HTTP attempt.
--
-- Retries: 408, 409, 429, 5xx (529 included) and dropped connections
-- (transport errors of kind connect, timeout or http, and streams that end
-- before their last event) are retried up to `max_retries` times (default
-- 2), waiting `retry-after-ms` / `retry-after` when the server says (capped
-- at `max_retry_delay`, default 60 s), else an exponential backoff from
-- `retry_delay` (default 0.5 s, doubling, at most 8 s) with jitter. Other
-- 4xx fail at once.
-- @module lash.models
local runtime = require "lash.runtime"
local provider = require "lash.models.provider"

local M = {}

-- the shared plumbing, by the names it always had here
for name, value in pairs(provider) do
  M[name] = value
end

local function model_error(kind, message, fields)
  return runtime.error(kind, message, fields)
end

M.PROVIDERS = { anthropic = "lash.models.anthropic", openai = "lash.models.openai",
                ["openai-responses"] = "lash.models.openai_responses", test = "lash.models.test" }

--- Is `v` a model object?
function M.is_model(v)
  return type(v) == "table" and type(v.request) == "function"
end

--- Turn a model spec into a model object.
-- @param spec `"provider:model"`, `"test"`, a Lua function (the `function`
--   provider), a model object, or `{ "provider:model", option = ... }`
-- @tparam[opt] table opts options passed to the provider (api_key,
--   base_url, max_tokens, max_retries, timeout, ...)
-- @raise a `config` error for an unknown provider or a missing API key
function M.resolve(spec, opts)
  opts = opts or {}
  if M.is_model(spec) then return spec end
  if type(spec) == "function" then
    return require("lash.models.func").new(spec, opts)
  end
  if type(spec) == "table" and type(spec[1]) == "string" then
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    for k, v in pairs(spec) do if k ~= 1 then o[k] = v end end
    return M.resolve(spec[1], o)
  end
  if type(spec) ~= "string" or spec == "" then
    error(model_error("config", "no model: set model = \"provider:model\" (e.g. \"anthropic:claude-sonnet-4-6\","
      .. " \"openai:gpt-4.1\", \"test\") or a function(messages, info)"), 0)
  end
  local provider, name = spec:match("^([%w_%-]+):(.*)$")
  if not provider then provider, name = spec, "" end
  if provider == "function" then
    error(model_error("config", "the 'function' provider takes a Lua function: model = function(messages, info) ... end"), 0)
  end
  local modname = M.PROVIDERS[provider]
  if not modname then
    local known = {}
    for k in pairs(M.PROVIDERS) do known[#known + 1] = k end
    table.sort(known)
    error(model_error("config", "unknown model provider '" .. provider .. "' in '" .. spec
      .. "' (known: " .. table.concat(known, ", ") .. ", or a Lua function)"), 0)
  end
  -- base URLs and key sources from the user's config file fill what the
  -- options and the provider's variables leave unset
  return require(modname).new(name, require("lash.config").model_options(provider, opts))
end

return M
