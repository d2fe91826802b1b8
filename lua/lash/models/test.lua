--- The `test` model: deterministic and offline, after pydantic-ai's
-- TestModel. On a new prompt it calls every tool once (or those in
-- `call_tools`) with arguments generated from each tool's schema; it calls
-- again, with the same arguments, any tool that got a retry prompt (as
-- pydantic-ai's TestModel does: a call that failed because another call of
-- the same turn had not run yet, such as the sandbox's read_file 'a' next to
-- write_file 'a', works the second time); then it answers with a JSON
-- object mapping each tool name to its last result, or
-- `success (no tool calls)` when it called none (or `custom_output_text`).
-- With an output schema (structured output) it answers a value generated
-- from that schema instead, the way it generates arguments.
--
-- Generated arguments fill the required properties only, with the first
-- enum value, the minimum, `minLength` times "a", `minItems` items, and so
-- on, so they validate against the schema.
-- @module lash.models.test
local json = require "lash.json"
local models = require "lash.models.provider"

local M = {}

local Model = {}
Model.__index = Model

--- Make a test model.
-- @tparam[opt] string name ignored (any `test:xyz` works)
-- @tparam[opt] table opts `call_tools` ("all" or a list of names),
--   `custom_output_text`
function M.new(name, opts)
  opts = opts or {}
  local ct = opts.call_tools
  if ct ~= nil and ct ~= "all" and type(ct) ~= "table" then
    error("test model: call_tools must be \"all\" or a list of tool names", 2)
  end
  return setmetatable({ name = "test" .. ((name and name ~= "") and (":" .. name) or ""),
                        call_tools = ct or "all", custom_output_text = opts.custom_output_text }, Model)
end

local gen

local function first_type(s)
  local t = s.type
  if type(t) == "table" then
    for _, x in ipairs(t) do if x ~= "null" then return x end end
    return t[1]
  end
  return t
end

function gen(s, seed)
  if type(s) ~= "table" then return "a" end
  if s.const ~= nil then return s.const end
  if s.enum then return s.enum[1] end
  local alts = s.anyOf or s.oneOf
  if alts then
    for _, a in ipairs(alts) do
      if a.type ~= "null" then return gen(a, seed) end
    end
    return json.null
  end
  local t = first_type(s)
  if t == "string" then
    local n = math.max(s.minLength or 1, 1)
    if s.maxLength then n = math.min(n, s.maxLength) end
    local c = string.char(97 + (seed % 26))
    return c:rep(n)
  elseif t == "integer" or t == "number" then
    local v = 0
    if s.minimum then v = s.minimum
    elseif s.exclusiveMinimum then v = s.exclusiveMinimum + 1 end
    if s.maximum and v > s.maximum then v = s.maximum end
    if t == "integer" then v = math.tointeger(math.ceil(v)) or v end
    return v
  elseif t == "boolean" then
    return false
  elseif t == "null" then
    return json.null
  elseif t == "array" then
    local out = json.array()
    for i = 1, (s.minItems or 0) do out[i] = gen(s.items or { type = "string" }, seed) end
    return out
  else -- object, or untyped with properties
    local out = {}
    local props = s.properties or {}
    for _, k in ipairs(s.required or {}) do
      out[k] = gen(props[k] or {}, seed)
    end
    return out
  end
end

--- Arguments generated from a schema (exported for tests).
function M.generate(schema, seed)
  return gen(schema, seed or 0)
end

local function count_assistant(messages)
  local n = 0
  for _, m in ipairs(messages) do if m.role == "assistant" then n = n + 1 end end
  return n
end

local function respond(self, req)
  local msgs = req.messages
  local last = msgs[#msgs]
  local step = count_assistant(msgs) + 1
  local calls = {}
  local by_name = {}
  for _, d in ipairs(req.tools or {}) do by_name[d.name] = d end
  local function call(name, seed)
    local d = by_name[name]
    if d then
      calls[#calls + 1] = { type = "tool_call", id = "test_" .. name .. "_" .. step, name = name,
                            args = gen(d.parameters or {}, seed) }
    end
  end
  local tail = last and last.parts and last.parts[#last.parts]
  local fresh_prompt = last and last.role == "user" and tail and tail.type == "text"
  if fresh_prompt then
    if self.call_tools == "all" then
      for _, d in ipairs(req.tools or {}) do call(d.name, 0) end
    else
      for _, n in ipairs(self.call_tools) do call(n, 0) end
    end
  elseif last and last.role == "user" then
    for _, p in ipairs(last.parts) do
      if p.type == "tool_result" and p.status == "retry" then call(p.name, 0) end
    end
  end
  if #calls > 0 then return { parts = calls, finish = "tool_calls" } end
  -- final answer
  local text = self.custom_output_text
  if not text and req.output then text = json.encode_canonical(gen(req.output.schema, 0)) end
  if not text then
    local results, any = {}, false
    for i = #msgs, 1, -1 do
      local m = msgs[i]
      if m.role == "user" then
        for _, p in ipairs(m.parts) do
          if p.type == "tool_result" and results[p.name] == nil then
            results[p.name] = p.content
            any = true
          elseif p.type == "text" then
            goto done
          end
        end
      end
    end
    ::done::
    text = any and json.encode_canonical(results) or "success (no tool calls)"
  end
  return { parts = { { type = "text", text = text } }, finish = "stop" }
end

--- @see lash.models
--- The test model answers any output schema natively (with a generated value).
function Model:native_output()
  return true
end

function Model:request(req)
  local resp = respond(self, req)
  local out_text = {}
  for _, p in ipairs(resp.parts) do
    if p.type == "text" then out_text[#out_text + 1] = p.text
    else out_text[#out_text + 1] = p.name .. " " .. json.encode(p.args) end
  end
  if req.on_text then
    for _, p in ipairs(resp.parts) do
      if p.type == "text" then
        for piece in p.text:gmatch("%S+%s*") do req.on_text(piece) end
      end
    end
  end
  -- 50 stands for the request's fixed framing (tool definitions, roles)
  resp.usage = { input_tokens = 50 + models.estimate_input_tokens(req.messages, req.instructions),
                 output_tokens = models.estimate_tokens(table.concat(out_text, " ")),
                 cache_read_tokens = 0, cache_write_tokens = 0 }
  resp.provider_finish = resp.finish
  resp.model = self.name
  return resp
end

return M
