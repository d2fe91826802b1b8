--- MCP servers as lash toolsets.
--
--   lash.mcp.stdio{command=, args=, env=, cwd=, sandbox=, name=, timeout=, ...}
--   lash.mcp.http{url=, headers=, bearer_token=, name=, timeout=, ...}
--
-- Each returns a toolset: every run connects (a fresh server process for
-- stdio, a fresh session for HTTP) when it opens its tools, lists the
-- server's tools once, and closes the connection when it ends. The tool
-- definitions stay fixed for the run (so the prompt cache keeps hitting)
-- unless the server sends `notifications/tools/list_changed`; then they
-- are listed again before the next model request.
--
-- Results become what the model sees: text as it is, images and audio as a
-- note of their type and size, embedded resources by their text (or a
-- note), resource links as a line naming them; `structuredContent` as
-- canonical JSON when there is no text; `isError` as a retry prompt.
-- Progress notifications become `tool_progress` events, elicitation goes to
-- the run's `approve` callback, the server's log messages go to `lash.log`.
-- @module lash.mcp
local json = require "lash.json"
local tool = require "lash.tool"
local schema = require "lash.schema"
local client = require "lash.mcp.client"

local M = {}

local runtime = require "lash.runtime"

M.connect_client = client.connect

local COMMON = { name = "string", timeout = "number", init_timeout = "number", sampling = true,
                 elicitation = "boolean", log_level = "string", tool_prefix = "string",
                 include_instructions = "boolean" }
local STDIO_FIELDS = { command = "string", args = "table", env = "table", cwd = "string", sandbox = true }
local HTTP_FIELDS = { url = "string", headers = "table", bearer_token = "string", oauth = true }

local function check(who, def, extra)
  if type(def) ~= "table" then error(who .. ": expected a table, got " .. type(def), 3) end
  local fields = {}
  for k, v in pairs(COMMON) do fields[k] = v end
  for k, v in pairs(extra) do fields[k] = v end
  tool.check_fields(who, def, fields, 3)
  if def.timeout ~= nil and not (def.timeout > 0) then
    error(who .. ": 'timeout' must be a positive number of seconds, got " .. tostring(def.timeout), 3)
  end
  if def.sampling ~= nil and def.sampling ~= false and type(def.sampling) ~= "function" then
    error(who .. ": 'sampling' must be false (the default) or a function(params) returning a "
      .. "CreateMessageResult", 3)
  end
end

--- Open a transport for a server definition (`command` or `url`).
-- @param[opt] sb a lash.sandbox object to run a stdio server inside
function M.transport(def, sb)
  if def.command then
    return require("lash.mcp.stdio").spawn { command = def.command, args = def.args, env = def.env,
                                              cwd = def.cwd, name = def.name, sandbox = sb }
  end
  local headers = {}
  for k, v in pairs(def.headers or {}) do headers[k] = v end
  if def.bearer_token then headers["Authorization"] = "Bearer " .. def.bearer_token end
  local auth
  local has_auth = false
  for k in pairs(headers) do if k:lower() == "authorization" then has_auth = true end end
  if def.oauth ~= false and not has_auth then
    local o = type(def.oauth) == "table" and def.oauth or {}
    local copy = { url = def.url, name = def.name or def.url }
    for k, v in pairs(o) do copy[k] = v end
    auth = require("lash.mcp.oauth").new(copy)
  end
  return require("lash.mcp.http").client { url = def.url, headers = headers, name = def.name,
                                            timeout = def.timeout, auth = auth }
end

---------------------------------------------------------------------------
-- Results

local function b64_size(data)
  if type(data) ~= "string" then return 0 end
  local pad = data:match("(=*)$")
  return math.max(0, math.floor(#data * 3 / 4) - #pad)
end

local function describe_size(n)
  return runtime.output.format_size(n)
end

--- The text the model sees for one content block.
function M.content_text(c)
  if type(c) ~= "table" then return tostring(c) end
  local t = c.type
  if t == "text" then return tostring(c.text or "") end
  if t == "image" or t == "audio" then
    return string.format("[%s: %s, %s]", t, tostring(c.mimeType or "unknown type"), describe_size(b64_size(c.data)))
  end
  if t == "resource" then
    local r = type(c.resource) == "table" and c.resource or {}
    local head = "[resource " .. tostring(r.uri or "?") .. (r.mimeType and (" (" .. r.mimeType .. ")") or "") .. "]"
    if type(r.text) == "string" then return head .. "\n" .. r.text end
    return head .. " " .. describe_size(b64_size(r.blob)) .. " of binary data"
  end
  if t == "resource_link" then
    local parts = { "[resource link: " .. tostring(c.name or c.uri) .. " <" .. tostring(c.uri) .. ">" }
    if c.mimeType then parts[#parts + 1] = " (" .. c.mimeType .. ")" end
    parts[#parts + 1] = "]"
    if type(c.description) == "string" and c.description ~= "" then parts[#parts + 1] = " " .. c.description end
    return table.concat(parts)
  end
  return json.try_encode(c) or "[content]"
end

--- The text the model sees for a CallToolResult.
function M.result_text(res)
  local texts = {}
  for _, c in ipairs(type(res.content) == "table" and res.content or {}) do
    texts[#texts + 1] = M.content_text(c)
  end
  local has_text = #texts > 0
  if type(res.structuredContent) == "table" and not has_text then
    return json.encode_canonical(res.structuredContent)
  end
  return table.concat(texts, "\n")
end

---------------------------------------------------------------------------
-- Tools

-- A schema lash's validator accepts: the server's when it checks, else a
-- permissive object schema (the server still validates what it gets).
local function tool_parameters(t, server)
  local s = t.inputSchema
  if type(s) ~= "table" then return { type = "object" } end
  if s.type == nil then
    local c = {}
    for k, v in pairs(s) do c[k] = v end
    c.type = "object"
    s = c
  end
  local ok, err = schema.check_object_schema(s, "inputSchema")
  if ok then return s end
  runtime.log("info", "mcp " .. server .. ": tool '" .. tostring(t.name) .. "' has a schema lash cannot check ("
    .. err .. "); its arguments go to the server unchecked")
  local loose = { type = "object" }
  if type(s.properties) == "table" then
    loose.properties = {}
    for k, v in pairs(s.properties) do
      if type(v) == "table" and schema.check(v, "p") then loose.properties[k] = v else loose.properties[k] = {} end
    end
    if json.is_array(s.required) or (type(s.required) == "table" and s.required[1]) then loose.required = s.required end
  end
  return loose
end

local function lash_name(name)
  local n = tostring(name):gsub("[^%w_%-]", "_")
  if #n > 64 then n = n:sub(1, 64) end
  if n == "" then n = "tool" end
  return n
end

local Instance = {}
Instance.__index = Instance

local function make_tool(inst, t)
  local L = runtime
  local orig = t.name
  local desc = t.description
  if type(desc) ~= "string" or desc == "" then desc = type(t.title) == "string" and t.title or orig end
  return tool.new {
    name = lash_name(orig), description = desc, parameters = tool_parameters(t, inst.name),
    handler = function(ctx, args)
      local emit = rawget(ctx, "emit") or ctx.emit
      local res = inst.client:call_tool(orig, args, {
        timeout = inst.def.timeout,
        on_progress = emit and function(p)
          emit { type = "tool_progress", id = ctx.tool_call_id, name = ctx.tool_name, server = inst.name,
                 progress = p.progress, total = p.total, message = p.message }
        end or nil,
      })
      local text = M.result_text(res)
      if res.isError == true then
        tool.retry(text ~= "" and text or ("Tool '" .. orig .. "' failed"))
      end
      return text
    end,
  }
end

local function refresh(inst)
  local list = inst.client:list_tools()
  local tools, seen = {}, {}
  for _, t in ipairs(list) do
    if type(t) == "table" and type(t.name) == "string" then
      local ok, lt = pcall(make_tool, inst, t)
      if not ok then
        runtime.log("warn", "mcp " .. inst.name .. ": skipping tool '" .. t.name .. "': " .. tostring(lt))
      elseif seen[lt.name] then
        runtime.log("warn", "mcp " .. inst.name .. ": skipping tool '" .. t.name .. "': its name is taken")
      else
        seen[lt.name] = true
        tools[#tools + 1] = lt
      end
    end
  end
  inst.tools = tools
end

-- Defaults from a requested schema, for the fields the answer leaves out.
local function elicit_defaults(rs)
  local out = {}
  for k, p in pairs(type(rs) == "table" and type(rs.properties) == "table" and rs.properties or {}) do
    if type(p) == "table" and p.default ~= nil and p.default ~= json.null then out[k] = p.default end
  end
  return out
end
M.elicit_defaults = elicit_defaults

--- Answer an elicitation through an approve callback: true accepts with
-- the defaults, {allow = true, args = {...}} accepts with those values
-- (defaults fill what is missing), false or a message declines.
function M.elicit_with(approve, ctx, server, params)
  local L = runtime
  if params.mode == "url" then
    return { action = "decline" }
  end
  local rs = params.requestedSchema
  local content = elicit_defaults(rs)
  if not approve then return { action = "decline" } end
  local call = { id = "elicitation", name = "elicitation", kind = "elicitation", server = server,
                 message = params.message, schema = rs, args = content }
  local d = approve(ctx, call)
  if d == true then
    -- accepted as proposed
  elseif type(d) == "table" and d.allow then
    for k, v in pairs(d.args or {}) do content[k] = v end
  elseif type(d) == "table" and d.action == "cancel" then
    return { action = "cancel" }
  else
    return { action = "decline" }
  end
  if type(rs) == "table" then
    local ok, errs = schema.validate(content, rs)
    if not ok then
      L.log("warn", "mcp " .. server .. ": the elicitation answer does not match the requested schema: "
        .. schema.format_errors(errs))
      return { action = "cancel" }
    end
  end
  return { action = "accept", content = content }
end

-- The sandbox a stdio server with `sandbox =` runs in, for this run:
-- the run's own (true or "run"), a given sandbox object, an existing one
-- by id (a string; left as it was), or a fresh one from create options (a
-- table; destroyed when the run ends). nil: on the host.
local function server_sandbox(self, ctx)
  local s, L = self.def.sandbox, runtime
  if s == nil or s == false then return nil end
  if s == true or s == "run" then
    local sb = ctx and type(ctx.sandbox) == "function" and ctx.sandbox() or nil
    if not sb then
      error(L.error("config", "MCP server '" .. self.name .. "' has sandbox = true (run it inside the run's "
        .. "sandbox), but this run has no sandbox: add a sandbox capability to the agent (lash.sandbox_capability{} "
        .. "in Lua, Sandbox in a spec), or give sandbox = a lash.sandbox object, an id or create options",
        { code = "no_sandbox" }), 0)
    end
    return sb
  end
  if type(s) == "string" then
    self.own_sb = L.sandbox.open(s)
  elseif type(s) == "table" then
    self.own_sb = L.sandbox.create(s)
  else
    return s
  end
  return self.own_sb
end

function Instance:open(ctx)
  local def = self.def
  local L = runtime
  local okt, transport = pcall(function() return M.transport(def, server_sandbox(self, ctx)) end)
  if not okt then
    self:close()   -- a sandbox made for the server goes with it
    error(transport, 0)
  end
  local ok, c = pcall(client.connect, transport, {
    name = self.name, timeout = def.timeout, init_timeout = def.init_timeout,
    on_elicit = def.elicitation ~= false and function(params)
      return M.elicit_with(ctx.approve, ctx, self.name, params)
    end or nil,
    on_sampling = type(def.sampling) == "function" and def.sampling or nil,
  })
  if not ok then
    pcall(transport.close, transport)
    self:close()
    if L.is_error(c) then
      c.message = "cannot connect to MCP server '" .. self.name .. "': " .. c.message
      error(c, 0)
    end
    error(L.error("mcp", "cannot connect to MCP server '" .. self.name .. "': " .. tostring(c)), 0)
  end
  self.client = c
  if def.log_level then pcall(c.set_log_level, c, def.log_level) end
  refresh(self)
end

function Instance:get_tools()
  if not self.client then
    error("MCP toolset '" .. self.name .. "' is not open (it opens when a run starts)", 0)
  end
  if self.client.tools_changed then refresh(self) end
  return self.tools
end

function Instance:close()
  if self.client then
    self.client:close()
    self.client = nil
  end
  if self.own_sb then
    local sb = self.own_sb
    self.own_sb = nil
    sb:close()
  end
end

local Toolset = {}
Toolset.__index = Toolset
Toolset.__name = "lash.mcp.toolset"

function Toolset:for_run()
  return setmetatable({ name = self.name, def = self.def }, Instance)
end

-- The template a run's instance comes from is not usable by itself.
function Toolset:open() error("MCP toolset '" .. self.name .. "': open its for_run() instance", 0) end
function Toolset:close() end
function Toolset:get_tools()
  error("MCP toolset '" .. self.name .. "' has no tools until a run opens it", 0)
end

local function new_toolset(def, label)
  return setmetatable({ name = def.name or label, def = def }, Toolset)
end

--- A stdio MCP server as a toolset.
-- @tparam table def `command`, `args`, `env` (added to a short inherited
--   list: PATH, HOME, ...), `cwd`, `sandbox` (run the server jailed: true
--   for the run's sandbox, a lash.sandbox object, a sandbox id, or create
--   options for a sandbox of its own), `name`, `timeout` (per call, seconds),
--   `init_timeout` (30), `elicitation` (true: ask the run's approve
--   callback), `sampling` (false, or a function), `log_level`
function M.stdio(def)
  check("lash.mcp.stdio", def, STDIO_FIELDS)
  if type(def.command) ~= "string" or def.command == "" then
    error("lash.mcp.stdio: 'command' must name the server's program, e.g. command = \"npx\"", 2)
  end
  for i, a in ipairs(def.args or {}) do
    if type(a) ~= "string" then error("lash.mcp.stdio: args[" .. i .. "] must be a string, got " .. type(a), 2) end
  end
  local sb = def.sandbox
  if not (sb == nil or type(sb) == "boolean" or sb == "run" or type(sb) == "string" and sb ~= ""
          or type(sb) == "table" or type(sb) == "userdata" and tostring(sb):match("^lash%.sandbox:")) then
    error("lash.mcp.stdio: 'sandbox' must be true (the run's sandbox), a lash.sandbox object, a sandbox id or "
      .. "create options for lash.sandbox.create, got " .. (sb == "" and "an empty string" or type(sb)), 2)
  end
  return new_toolset(def, def.command)
end

--- A Streamable HTTP MCP server as a toolset.
-- @tparam table def `url`, `headers`, `bearer_token`, `oauth` (on unless
--   a token or an Authorization header is given, or oauth = false; a
--   table of lash.mcp.oauth options: client_id, client_secret, scope,
--   grant, token_file, ...), and the common options of `stdio`
function M.http(def)
  check("lash.mcp.http", def, HTTP_FIELDS)
  if def.oauth ~= nil and type(def.oauth) ~= "boolean" and type(def.oauth) ~= "table" then
    error("lash.mcp.http: 'oauth' must be false (off), true or a table of OAuth options, got " .. type(def.oauth), 2)
  end
  if type(def.oauth) == "table" then
    -- checked now, not when a run connects
    local ok, err = pcall(require("lash.mcp.oauth").new, (function()
      local c = { url = def.url }
      for k, v in pairs(def.oauth) do c[k] = v end
      return c
    end)())
    if not ok then error(err, 2) end
  end
  if type(def.url) ~= "string" or not def.url:match("^https?://") then
    error("lash.mcp.http: 'url' must be an http:// or https:// URL, got " .. tostring(def.url), 2)
  end
  return new_toolset(def, def.url)
end

M.is_toolset = function(v) return getmetatable(v) == Toolset end

return M
