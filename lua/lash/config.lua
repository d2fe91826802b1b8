--- The user's config file: `$LASH_CONFIG`, else
-- `$XDG_CONFIG_HOME/lash/config.lua` (`~/.config/lash/config.lua`).
--
-- The file is Lua *data*: assignments of strings, numbers, booleans and
-- tables, run in an empty environment (no globals, no string methods, no
-- function values kept) under an instruction and memory budget, so a
-- config file can describe settings but can do nothing. Example:
--
--   model = "openai:gpt-4.1"
--   model_settings = { temperature = 0.2, max_tokens = 4096 }
--   providers = {
--     openai = { base_url = "http://127.0.0.1:11434/v1", api_key_env = "OLLAMA_KEY" },
--     anthropic = { api_key_file = "~/.secrets/anthropic" },
--   }
--   sandbox = { backend = "local" }
--   mcp_servers = { fs = { command = { "npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp" } } }
--   traces = { endpoint = "http://127.0.0.1:4318", protocol = "http/protobuf", service_name = "lash" }
--
-- API keys never go in the file itself: `api_key_env` names the variable
-- holding one, `api_key_file` a file whose first line is one.
--
-- Precedence, for every setting: the command line, then the environment,
-- then the spec (for model and model settings: a spec's own choice beats a
-- config default), then this file, then lash's built-in default.
-- @module lash.config
local paths = require "lash.paths"
local runtime = require "lash.runtime"

local M = {}

--- Budgets for running a config file.
M.BUDGET = { instructions = 1000000, memory = 64 * 1024 * 1024, size = 1024 * 1024 }

local PROVIDERS = { openai = { key_env = "OPENAI_API_KEY", url_env = "OPENAI_BASE_URL" },
                    anthropic = { key_env = "ANTHROPIC_API_KEY", url_env = "ANTHROPIC_BASE_URL" } }
M.PROVIDERS = PROVIDERS

local BACKENDS = { ["local"] = true, modal = true }

local function nonempty(s)
  if s == nil or s == "" then return nil end
  return s
end

--- Where the config file is, and why there.
-- @treturn string path
-- @treturn string "LASH_CONFIG" or "XDG_CONFIG_HOME" (the variable that chose
--   it), else "default"
function M.path(getenv)
  return paths.user_file(getenv, "LASH_CONFIG", "config", "config.lua")
end

local function expand_home(p)
  if p:sub(1, 2) == "~/" then
    local home = os.getenv("HOME")
    if home then return home .. p:sub(2) end
  end
  return p
end

-- Run the chunk in its own coroutine with a hook that counts instructions
-- and watches the heap; strings lose their methods meanwhile so that
-- ("x"):rep(1e12) cannot allocate in one C call.
local function run_data(chunk, path, env)
  local budget = M.BUDGET
  local co = coroutine.create(chunk)
  local count, limit_kb = 0, collectgarbage("count") + budget.memory / 1024
  debug.sethook(co, function()
    count = count + 1
    if count > budget.instructions then error("ran past its budget of " .. budget.instructions .. " instructions", 0) end
    if collectgarbage("count") > limit_kb then error("used more than its memory budget", 0) end
  end, "", 1)
  local smt = getmetatable("")
  local index = smt.__index
  smt.__index = {}
  local ok, err = coroutine.resume(co)
  smt.__index = index
  if not ok then
    err = tostring(err)
    if err:find("a nil value (", 1, true) then
      err = err .. " (a config file has no globals or functions: assign data only, e.g. model = \"test\")"
    end
    if err:sub(1, #path + 1) == path .. ":" then return nil, err end
    return nil, path .. ": " .. err
  end
  if coroutine.status(co) ~= "dead" then return nil, path .. ": a config file cannot yield" end
  return env, err
end

local KNOWN = { model = "string", model_settings = "table", providers = "table", sandbox = "table",
                mcp_servers = "table", traces = "table" }
-- OTLP trace export (lash.trace); the environment's OTEL_* beat these
local TRACES_KEYS = { endpoint = "string", protocol = "string", service_name = "string" }
local PROVIDER_KEYS = { base_url = "string", api_key_env = "string", api_key_file = "string" }
local SANDBOX_KEYS = { backend = "string" }
local MCP_KEYS = { command = "table", env = "table", url = "string", cwd = "string" }

local function sorted_names(t)
  local names = {}
  for k in pairs(t) do names[#names + 1] = tostring(k) end
  table.sort(names)
  return table.concat(names, ", ")
end

-- Every value must be data: no functions, threads or userdata anywhere.
local function check_data(v, where, seen)
  local t = type(v)
  if t == "function" or t == "thread" or t == "userdata" then
    error(where .. " is a " .. t .. "; a config file holds data only (strings, numbers, booleans, tables)", 0)
  end
  if t == "table" then
    seen = seen or {}
    if seen[v] then return end
    seen[v] = true
    for k, x in pairs(v) do
      if type(k) ~= "string" and math.type(k) ~= "integer" then
        error(where .. " has a key of type " .. type(k) .. "; use string or integer keys", 0)
      end
      check_data(x, where .. "." .. tostring(k), seen)
    end
  end
end

local function check_fields(t, known, where)
  for k, v in pairs(t) do
    local want = known[k]
    if k == "api_key" then
      error(where .. ".api_key: keys do not go in the config file; set api_key_env = \"VAR\" (the variable "
        .. "holding it) or api_key_file = \"path\" instead", 0)
    end
    if not want then
      error(where .. ": unknown setting '" .. tostring(k) .. "' (known: " .. sorted_names(known) .. ")", 0)
    end
    if type(v) ~= want then
      error(where .. "." .. k .. " must be a " .. want .. ", got a " .. type(v), 0)
    end
  end
end

local function validate(c)
  check_data(c, "config")
  check_fields(c, KNOWN, "config")
  for k in pairs(c.model_settings or {}) do
    if type(k) ~= "string" then error("config.model_settings: keys must be names, e.g. temperature = 0.2", 0) end
  end
  for name, p in pairs(c.providers or {}) do
    if not PROVIDERS[name] then
      error("config.providers: unknown provider '" .. tostring(name) .. "' (known: " .. sorted_names(PROVIDERS) .. ")", 0)
    end
    if type(p) ~= "table" then error("config.providers." .. name .. " must be a table", 0) end
    check_fields(p, PROVIDER_KEYS, "config.providers." .. name)
  end
  if c.sandbox then
    check_fields(c.sandbox, SANDBOX_KEYS, "config.sandbox")
    if c.sandbox.backend and not BACKENDS[c.sandbox.backend] then
      error("config.sandbox.backend: unknown backend '" .. c.sandbox.backend .. "' (known: local, modal)", 0)
    end
  end
  if c.traces then check_fields(c.traces, TRACES_KEYS, "config.traces") end
  for name, s in pairs(c.mcp_servers or {}) do
    local where = "config.mcp_servers." .. tostring(name)
    if type(name) ~= "string" then error("config.mcp_servers: servers are named, e.g. mcp_servers = { fs = {...} }", 0) end
    if type(s) ~= "table" then error(where .. " must be a table", 0) end
    check_fields(s, MCP_KEYS, where)
    if (s.command == nil) == (s.url == nil) then
      error(where .. ": give exactly one of command = { \"program\", \"arg\", ... } or url = \"http://...\"", 0)
    end
    if s.command then
      if #s.command == 0 then error(where .. ".command must list the program and its arguments", 0) end
      for i, a in pairs(s.command) do
        if math.type(i) ~= "integer" or type(a) ~= "string" then
          error(where .. ".command must be a list of strings", 0)
        end
      end
    end
    for k, v in pairs(s.env or {}) do
      if type(k) ~= "string" or type(v) ~= "string" then error(where .. ".env must map names to strings", 0) end
    end
  end
  return c
end

--- Parse config text.
-- @tparam string text the file's contents
-- @tparam string path its name, for messages
-- @return the config table, or nil, message
function M.parse(text, path)
  if #text > M.BUDGET.size then
    return nil, path .. ": the file is larger than " .. M.BUDGET.size .. " bytes; a config file is small"
  end
  local env = {}
  local chunk, err = load(text, "=" .. path, "t", env)
  if not chunk then
    -- a YAML or JSON file (or YAML-looking lines) where Lua data belongs
    local ext = path:match("%.(%a+)$")
    local yamlish = text:match("^%s*[%w_]+:%s") or text:match("\n%s*[%w_]+:%s")
    if ext == "yaml" or ext == "yml" or ext == "json" or yamlish then
      return nil, path .. ": the config file is Lua data, not YAML or JSON: write settings as `model = "
        .. "\"anthropic:claude-sonnet-4-6\"` and `sandbox = { backend = \"local\" }` (Lua's own error: "
        .. tostring(err):gsub("^" .. path:gsub("%p", "%%%0") .. ":", "line ") .. ")"
    end
    return nil, tostring(err)
  end
  local data, ret = run_data(chunk, path, env)
  if not data then return nil, ret end
  if ret ~= nil then
    if type(ret) ~= "table" or next(env) ~= nil then
      return nil, path .. ": either assign settings (model = ...) or return one table, not both"
    end
    data = ret
  end
  local ok, verr = pcall(validate, data)
  if not ok then return nil, path .. ": " .. tostring(verr) end
  return data
end

--- Load the config file. A missing file at the default place is an empty
-- config; a missing `$LASH_CONFIG` file is an error.
-- @return config table, path; or nil, message
function M.load(path)
  local why
  if not path then
    path, why = M.path()
    if not path then return {}, nil, false end -- no directory for it (no HOME): no config
  end
  -- a config file another user owns or can write could point api_key_file
  -- at a file only this user reads and send it away: refused (as ssh and git)
  local text, ferr, code = runtime.sys.read_owned(path, "config file")
  if not text then
    if why ~= nil and why ~= "LASH_CONFIG" and code == 2 then return {}, path, false end -- ENOENT
    return nil, (code and ("cannot read the config file " .. ferr) or ferr)
      .. (why == "LASH_CONFIG" and " (named by LASH_CONFIG)" or "")
  end
  local c, err = M.parse(text or "", path)
  if not c then return nil, err end
  return c, path, true
end

local cached, cached_err

--- The config of this process, loaded once.
-- @return config table, or nil, message
function M.get()
  if cached == nil and cached_err == nil then
    local c, err = M.load()
    if c then cached = c else cached_err = err end
  end
  if cached then return cached end
  return nil, cached_err
end

--- Forget the loaded config (tests).
function M.reset()
  cached, cached_err = nil, nil
end

-- The key in a key file (its first line), or nil and why not: the file
-- must be the user's (or root's) and writable by nobody else.
local function read_key_file(path)
  local text, err, code = runtime.sys.read_owned(expand_home(path), "key file")
  -- one another user controls is refused aloud, not skipped for the next source
  if not text and not code then error(err .. " (config api_key_file)", 0) end
  if not text then return nil, err end
  local line = text:match("^[^\n]*")
  return nonempty(line and line:gsub("%s+$", ""))
end

--- Where a provider's base URL and API key come from.
-- @treturn table `{ base_url=, base_url_source=, key=, key_source= }`;
--   sources are "env VAR", "config", "file PATH" or nil (unset)
function M.provider(name, c)
  c = c or M.get() or {}
  local p = PROVIDERS[name]
  local pc = (c.providers or {})[name] or {}
  local out = {}
  local env_url = nonempty(os.getenv(p.url_env))
  if env_url then out.base_url, out.base_url_source = env_url, "env " .. p.url_env
  elseif pc.base_url then out.base_url, out.base_url_source = pc.base_url, "config" end
  local env_key = nonempty(os.getenv(p.key_env))
  if env_key then out.key, out.key_source = env_key, "env " .. p.key_env
  elseif pc.api_key_env then
    local k = nonempty(os.getenv(pc.api_key_env))
    out.key, out.key_source = k, k and ("env " .. pc.api_key_env) or nil
    out.key_missing = not k and ("$" .. pc.api_key_env .. " (config api_key_env) is not set") or nil
  elseif pc.api_key_file then
    local k, kerr = read_key_file(pc.api_key_file)
    out.key, out.key_source = k, k and ("file " .. pc.api_key_file) or nil
    out.key_missing = not k and (kerr and (kerr .. " (config api_key_file)")
      or (pc.api_key_file .. " (config api_key_file) is empty")) or nil
  end
  return out
end

--- Fill a provider's model options from the config: base_url and api_key
-- when neither the options nor the provider's own variables give them.
-- @tparam string provider e.g. "openai"
-- Only once the CLI has taken the config in (run_defaults, or `active`
-- set by a command), so a host embedding lash is not steered by a file in
-- the user's home.
-- @tparam table opts the model options (not changed)
-- @treturn table options to pass on
function M.model_options(provider, opts)
  if not M.active or not PROVIDERS[provider] then return opts end
  local c = M.get()
  if not c or not c.providers or not c.providers[provider] then return opts end
  local p = M.provider(provider, c)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  if o.base_url == nil and p.base_url_source == "config" then o.base_url = p.base_url end
  if o.api_key == nil and p.key and p.key_source ~= "env " .. PROVIDERS[provider].key_env then o.api_key = p.key end
  return o
end

--- A named MCP server from the config, or nil.
function M.mcp_server(name)
  local c = M.get() or {}
  return (c.mcp_servers or {})[name]
end

--- The run options a config and environment add to `lash run`.
-- @tparam table agent the loaded agent
-- @tparam table cli `model`, `backend` from the command line
-- @treturn table `{ model=, model_settings= }` (fields nil when nothing to add)
function M.run_defaults(agent, cli)
  M.active = true
  local c = M.get() or {}
  local out = {}
  local model = cli.model or nonempty(os.getenv("LASH_MODEL"))
  if not model and agent.model == nil then model = c.model end
  out.model = model
  if c.model_settings then
    local own = agent.model_settings or {}
    local add
    for k, v in pairs(c.model_settings) do
      if own[k] == nil then add = add or {}; add[k] = v end
    end
    out.model_settings = add
  end
  return out
end

--- The sandbox backend to use: --backend, $LASH_SANDBOX_BACKEND, the
-- config's sandbox.backend, or nil (the spec's).
-- @treturn string|nil backend
-- @treturn string|nil source
function M.backend(cli_backend)
  if cli_backend then return cli_backend, "cli" end
  local e = nonempty(os.getenv("LASH_SANDBOX_BACKEND"))
  if e then return e, "env LASH_SANDBOX_BACKEND" end
  local c = M.get() or {}
  if c.sandbox and c.sandbox.backend then return c.sandbox.backend, "config" end
  return nil
end

--- The effective settings, each with where it came from; never a key.
-- @tparam[opt] table cli `model`, `backend` as given on the command line
-- @tparam[opt] table default_urls each provider's own base URL (its
--   module's DEFAULT_BASE_URL), shown where nothing sets one
-- @treturn table list of `{ key=, value=, source= }`, sorted by key
function M.effective(cli, default_urls)
  cli = cli or {}
  default_urls = default_urls or {}
  local c = assert(M.get())
  local rows = {}
  -- a URL's password or key is never shown (lash.url_redact)
  local redact_all = require("lash.url_redact").redact_all
  local function add(key, value, source) rows[#rows + 1] = { key = key, value = redact_all(value), source = source } end
  if cli.model then add("model", cli.model, "cli")
  elseif nonempty(os.getenv("LASH_MODEL")) then add("model", os.getenv("LASH_MODEL"), "env LASH_MODEL")
  elseif c.model then add("model", c.model, "config")
  else add("model", "(the spec's)", "default") end
  for k, v in pairs(c.model_settings or {}) do
    add("model_settings." .. k, type(v) == "table" and require("lash.json").encode_canonical(v) or tostring(v), "config")
  end
  for name in pairs(PROVIDERS) do
    local p = M.provider(name, c)
    add("providers." .. name .. ".base_url", p.base_url or default_urls[name] or "(the provider's)", p.base_url_source or "default")
    if p.key then
      add("providers." .. name .. ".api_key", "set (" .. #p.key .. " characters, not shown)", p.key_source)
    else
      add("providers." .. name .. ".api_key", p.key_missing or ("not set (export " .. PROVIDERS[name].key_env .. ")"),
          "none")
    end
  end
  local b, bsrc = M.backend(cli.backend)
  add("sandbox.backend", b or "(the spec's)", bsrc or "default")
  for name, s in pairs(c.mcp_servers or {}) do
    local v = s.url or table.concat(s.command, " ")
    add("mcp_servers." .. name, v, "config")
  end
  local t_env = nonempty(os.getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) and "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    or nonempty(os.getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) and "OTEL_EXPORTER_OTLP_ENDPOINT"
  if t_env then add("traces.endpoint", (os.getenv(t_env):gsub("//[^/@]*@", "//***@")), "env " .. t_env)
  elseif c.traces and c.traces.endpoint then add("traces.endpoint", c.traces.endpoint, "config")
  else add("traces.endpoint", "not set (traces off)", "default") end
  table.sort(rows, function(a, b2) return a.key < b2.key end)
  return rows
end

return M
