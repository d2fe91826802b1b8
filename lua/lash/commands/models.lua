--- `lash models [PROVIDER...]`: the model providers lash knows and, for
-- those with a server to ask, the models it offers: `GET {base}/models` on
-- OpenAI-compatible servers (OpenAI, Ollama, llama.cpp, vLLM) and
-- `GET {base}/v1/models` (paged with after_id) on Anthropic. Base URLs and
-- keys come from the environment or the config file, as for `lash run`.
-- @module lash.commands.models
local runtime = require "lash.runtime"
local M = {
  summary = "list the model providers and the models their servers offer",
  usage = [[usage: lash models [PROVIDER...] [--json] [--timeout S]

Lists the providers lash knows (anthropic, openai, test, function). For
anthropic and openai it asks the server for its models when it can: with
a key (ANTHROPIC_API_KEY / OPENAI_API_KEY or the config file's
api_key_env / api_key_file), or, for openai, when the base URL is not
api.openai.com (local servers need no key). Exit 1 when a server was asked
and failed.

options:
  --json        one JSON object: {providers: [{name, base_url, models, error}]},
                each model {id, name, model}: model is what --model takes

Each model is listed as --model takes it: provider:id (anthropic:claude-...).
  --timeout S   seconds to wait for each server (default 30)]],
}

local KNOWN = { "anthropic", "openai", "test", "function" }
local MAX_PAGES = 50

local function get_json(url, headers, timeout, provider)
  local json = require "lash.json"
  local ok, status, _, body = pcall(runtime.http.request, { method = "GET", url = url, headers = headers,
                                                          timeout = timeout })
  if not ok then
    local e = status
    local redact_all = require("lash.url_redact").redact_all
    return nil, provider .. ": cannot reach " .. redact_all(url) .. ": "
      .. redact_all(tostring(type(e) == "table" and e.message or e))
  end
  if status < 200 or status > 299 then
    local desc = require("lash.models").describe_body(body)
    local hint = (status == 401 or status == 403) and "; check the API key" or ""
    return nil, string.format("%s: HTTP %d%s (GET %s)%s", provider, status, desc and (" " .. desc) or "", url, hint)
  end
  local v = json.try_decode(body or "")
  if type(v) ~= "table" or type(v.data) ~= "table" then
    return nil, provider .. ": GET " .. url .. " did not answer a model list ({\"data\": [...]})"
  end
  return v
end

local function collect(list, data, name_field)
  for _, m in ipairs(data) do
    if type(m) == "table" and type(m.id) == "string" then
      list[#list + 1] = { id = m.id, name = type(m[name_field]) == "string" and m[name_field] or nil }
    end
  end
end

local function list_anthropic(p, timeout)
  local models = require "lash.models"
  local headers = { ["x-api-key"] = p.key, ["anthropic-version"] = require("lash.models.anthropic").API_VERSION }
  local out, after = {}, nil
  for _ = 1, MAX_PAGES do
    local url = models.join_url(p.base_url, "/v1/models?limit=1000" .. (after and ("&after_id=" .. after) or ""))
    local v, err = get_json(url, headers, timeout, "anthropic")
    if not v then return nil, err end
    collect(out, v.data, "display_name")
    if v.has_more ~= true or type(v.last_id) ~= "string" or v.last_id == after then break end
    after = v.last_id
  end
  return out
end

local function list_openai(p, timeout)
  local models = require "lash.models"
  local headers = {}
  if p.key then headers.authorization = "Bearer " .. p.key end
  local v, err = get_json(models.join_url(p.base_url, "/models"), headers, timeout, "openai")
  if not v then return nil, err end
  local out = {}
  collect(out, v.data, "owned_by")
  table.sort(out, function(a, b) return a.id < b.id end)
  return out
end

-- What to ask for each provider, or why not.
local function plan(name)
  local config = require "lash.config"
  if name == "test" then
    return { name = name, note = "offline scripted model built into lash (no server)",
             models = { { id = "test" } } }
  elseif name == "function" then
    return { name = name, note = "a Lua function in the spec: model = function(messages, info) ... end" }
  end
  local p = config.provider(name)
  local entry = { name = name }
  if name == "anthropic" then
    p.base_url = p.base_url or require("lash.models.anthropic").DEFAULT_BASE_URL
    entry.base_url = require("lash.url_redact").redact(p.base_url)
    if not p.key then
      entry.note = "not asked: " .. (p.key_missing or "set ANTHROPIC_API_KEY")
      return entry
    end
    entry.fetch = list_anthropic
  else
    p.base_url = p.base_url or require("lash.models.openai").DEFAULT_BASE_URL
    entry.base_url = require("lash.url_redact").redact(p.base_url)
    local official = p.base_url:find("^https://api%.openai%.com") ~= nil
    if official and not p.key then
      entry.note = "not asked: " .. (p.key_missing or "set OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)")
      return entry
    end
    entry.fetch = list_openai
  end
  entry.p = p
  return entry
end

-- What --model takes for a model of a provider ("anthropic:claude-x"; the
-- offline test model is plain "test").
local function model_string(provider, id)
  if provider == "test" then return id end
  return provider .. ":" .. id
end

local function print_text(entries, cli)
  for _, e in ipairs(entries) do
    cli.out(e.name, e.base_url and ("  " .. e.base_url) or "", "\n")
    if e.note then cli.out("  ", e.note, "\n") end
    if e.error then cli.out("  error: ", e.error, "\n") end
    if e.models then
      if #e.models == 0 and e.fetch then cli.out("  (the server lists no models)\n") end
      for _, m in ipairs(e.models) do
        cli.out("  ", model_string(e.name, m.id), m.name and ("  " .. m.name) or "", "\n")
      end
    end
  end
end

function M.main(args, cli)
  local o = { names = {} }
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--json" then o.json = true
    elseif a == "--timeout" then
      i = i + 1
      o.timeout = tonumber(args[i] or "")
      if not o.timeout or o.timeout <= 0 then cli.usage_error("--timeout needs a positive number of seconds") end
    elseif a:sub(1, 2) == "--" then cli.usage_error("unknown option '" .. a .. "'")
    else
      local known = false
      for _, k in ipairs(KNOWN) do known = known or k == a end
      if not known then cli.usage_error("unknown provider '" .. a .. "' (known: " .. table.concat(KNOWN, ", ") .. ")") end
      o.names[#o.names + 1] = a
    end
    i = i + 1
  end
  local config = require "lash.config"
  local _, cerr = config.get()
  if cerr then
    cli.err("lash models: ", cerr, "\n")
    return 1
  end
  local names = #o.names > 0 and o.names or KNOWN
  local entries, tasks = {}, {}
  for _, n in ipairs(names) do
    local e = plan(n)
    entries[#entries + 1] = e
    if e.fetch then
      tasks[#tasks + 1] = { e = e, t = runtime.spawn(function() return e.fetch(e.p, o.timeout or 30) end) }
    end
  end
  local failed = false
  for _, x in ipairs(tasks) do
    local ok, list, err = pcall(x.t.join, x.t)
    if not ok then list, err = nil, tostring(list) end
    if list then x.e.models = list else x.e.error = err; failed = true end
  end
  if o.json then
    local json = require "lash.json"
    local out = {}
    for _, e in ipairs(entries) do
      local models = json.array()
      for i, m in ipairs(e.models or {}) do
        models[i] = { id = m.id, name = m.name, model = model_string(e.name, m.id) }
      end
      out[#out + 1] = { name = e.name, base_url = e.base_url, note = e.note, error = e.error, models = models }
    end
    cli.out(json.encode_canonical { providers = out }, "\n")
  else
    print_text(entries, cli)
  end
  if failed then
    for _, e in ipairs(entries) do
      if e.error then cli.err("lash models: ", e.error, "\n") end
    end
    return 1
  end
  return 0
end

return M
