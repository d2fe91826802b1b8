--- The `function` model: a Lua function `(messages, info) -> response`
-- plays the model, for scripted conversations in tests and demos.
--
-- `messages` is the run's history (provider-neutral, see lash.agent; do
-- not change it). `info` holds `tools` (the definitions offered this step,
-- `{name=, description=, parameters=}`), `instructions` (the rendered
-- text), `step` (1 for the first request of the run), `settings`,
-- `run_id`, `agent`. The function may wait (lash.sleep, HTTP, ...).
--
-- It returns one of:
--   "text"                                   a final answer
--   { text = "...", tool_calls = { {name=, args=, id=?}, ... } }
--   { parts = { {type="text", text=}, {type="tool_call", name=, args=, id=?} } }
-- plus optional `usage` (same fields as the result's) and `finish`.
-- `args` may be a table or a JSON string (a string that does not decode
-- reaches the tool as malformed arguments, as a real model's would).
-- Without `usage`, tokens are estimated from word counts.
-- @module lash.models.func
local runtime = require "lash.runtime"
local models = require "lash.models.provider"

local M = {}

local Model = {}
Model.__index = Model

--- Wrap a function as a model.
-- @tparam function fn `(messages, info) -> response`
-- @tparam[opt] table opts `name` (shown in events; default "function")
function M.new(fn, opts)
  if type(fn) ~= "function" then
    error("function model: expected a function(messages, info), got " .. type(fn), 2)
  end
  opts = opts or {}
  return setmetatable({ fn = fn, name = opts.name and ("function:" .. opts.name) or "function" }, Model)
end

--- A function model that plays a fixed script: the n-th request of a run
-- gets `responses[n]` (each in any form `new` accepts, or a function
-- `(messages, info)` returning one). Past the end it raises, naming the
-- step, so a test notices an unexpected extra request.
-- @tparam table responses
-- @treturn function usable as `model =`
function M.script(responses)
  return function(messages, info)
    local r = responses[info.step]
    if r == nil then
      error("scripted model: no response for step " .. info.step .. " (the script has "
        .. #responses .. ")", 0)
    end
    if type(r) == "function" then return r(messages, info) end
    return r
  end
end

local function bad(msg)
  error(runtime.error("model", "function model: " .. msg), 0)
end

local function tool_call_part(c, i, step)
  if type(c) ~= "table" or type(c.name) ~= "string" then
    bad("tool_calls[" .. i .. "] must be a table with a name")
  end
  local part = { type = "tool_call", id = models.id_string(c.id) or string.format("call_%d_%d", step, i), name = c.name }
  local args = c.args
  if type(args) == "string" then
    models.set_call_args(part, args)
  elseif args == nil then
    part.args = {}
  elseif type(args) == "table" then
    part.args = args
  else
    bad("tool_calls[" .. i .. "].args must be a table or a JSON string, got " .. type(args))
  end
  return part
end

local function normalise(r, step)
  if type(r) == "string" then return { parts = { { type = "text", text = r } }, finish = "stop" } end
  if type(r) ~= "table" then bad("the function must return a string or a table, got " .. type(r)) end
  local parts = {}
  if r.parts then
    for i, p in ipairs(r.parts) do
      if p.type == "text" then
        if type(p.text) ~= "string" then bad("parts[" .. i .. "].text must be a string") end
        parts[#parts + 1] = { type = "text", text = p.text }
      elseif p.type == "tool_call" then
        parts[#parts + 1] = tool_call_part(p, i, step)
      else
        bad("parts[" .. i .. "].type must be \"text\" or \"tool_call\", got " .. tostring(p.type))
      end
    end
  else
    if r.text ~= nil then
      if type(r.text) ~= "string" then bad("text must be a string") end
      parts[#parts + 1] = { type = "text", text = r.text }
    end
    for i, c in ipairs(r.tool_calls or {}) do parts[#parts + 1] = tool_call_part(c, i, step) end
  end
  local has_calls = false
  for _, p in ipairs(parts) do if p.type == "tool_call" then has_calls = true end end
  -- finish = "length" cuts the last part, as a provider's output limit does
  if r.finish == "length" and parts[#parts] and parts[#parts].type == "tool_call" then parts[#parts].truncated = true end
  return { parts = parts, finish = r.finish or (has_calls and "tool_calls" or "stop"), usage = r.usage }
end

--- @see lash.models
function Model:request(req)
  local info = { tools = req.tools or {}, instructions = req.instructions, step = req.info and req.info.step or 1,
                 settings = req.settings or {}, run_id = req.info and req.info.run_id,
                 agent = req.info and req.info.agent, model_name = self.name }
  local resp = normalise(self.fn(req.messages, info), info.step)
  if req.on_text then
    for _, p in ipairs(resp.parts) do
      if p.type == "text" and p.text ~= "" then req.on_text(p.text) end
    end
  end
  if not resp.usage then
    local n_out = 0
    for _, p in ipairs(resp.parts) do n_out = n_out + models.estimate_tokens(p.text or p.name or "") end
    resp.usage = { input_tokens = models.estimate_input_tokens(req.messages, req.instructions), output_tokens = n_out }
  end
  local u = resp.usage
  u.input_tokens = u.input_tokens or 0
  u.output_tokens = u.output_tokens or 0
  u.cache_read_tokens = u.cache_read_tokens or 0
  u.cache_write_tokens = u.cache_write_tokens or 0
  resp.provider_finish = resp.finish
  resp.model = self.name
  return resp
end

return M
