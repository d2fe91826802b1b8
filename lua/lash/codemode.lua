--- Lua code mode: an opt-in `run_lua` tool whose argument is a Lua chunk
-- the model writes. It runs in the environment of a spec loaded without
-- trust (lash.spec_env: the safe standard library, no io, os.execute,
-- debug, load, require or lash internals; strings' pattern functions
-- guarded) under the budgets lash enforces in C (Lua instructions, memory
-- in the allocator, run time not counting waits), with the run's other
-- tools as functions: `tools.read_file{path = "x"}` returns the tool's
-- result text (or raises the tool's retry message, which pcall catches).
-- So the model can chain tool calls, loop and filter in one turn.
--
-- What the chunk returns and what it prints come back as the tool's
-- result: only a value (a string as it is, a table as JSON), only printed
-- text as `{"output": ...}`, both as `{"output": ..., "result": ...}`,
-- neither as `{}`. A chunk that fails (an error, a spent budget, a syntax
-- error) gets a retry prompt naming why, with what it printed and the
-- tools it called; the run goes on. Each inner call is a call of the run:
-- its events (ids `<run_lua call id>.<n>`), hooks, approval (denied when
-- nobody can be asked), usage and limits.
--
-- `lash.code_mode{...}` options: `instructions` (Lua instructions per
-- chunk, default 10^7), `memory` (bytes, default 64 MiB), `seconds` (run
-- time, default 10), `max_tool_calls` (per chunk, default 100),
-- `max_output_bytes` (printed text kept, default 64 KiB), `tools` (the
-- names callable from code; default every tool of the run but run_lua
-- and handoffs), `max_code_bytes` (default 64 KiB).
-- @module lash.codemode
local runtime = require "lash.runtime"
local json = require "lash.json"
local tool = require "lash.tool"
local capability = require "lash.capability"
local spec_env = require "lash.spec_env"
local agent = require "lash.agent"

local M = {}

M.NAME = "run_lua"

M.DEFAULTS = { instructions = 10000000, memory = 64 * 1024 * 1024, seconds = 10, max_tool_calls = 100,
               max_output_bytes = 64 * 1024, max_code_bytes = 64 * 1024 }

local FIELDS = { instructions = "number", memory = "number", seconds = "number", max_tool_calls = "number",
                 max_output_bytes = "number", max_code_bytes = "number", tools = "table", name = "string",
                 untrusted = "boolean" }

local function refuse(what, why)
  return function()
    error(what .. " is not available in run_lua (" .. why .. ")", 2)
  end
end

local function refusing(name, why)
  return setmetatable({}, {
    __index = function(_, k) return refuse(name .. "." .. tostring(k), why) end,
    __newindex = function() error(name .. " is not available in run_lua", 2) end,
    __metatable = false,
  })
end

-- The chunk's environment: the untrusted-spec environment without lash,
-- load and require, with print captured and `tools` and `json` added.
local function environment(out, tools_table)
  local env, sstring = spec_env.env("=run_lua")
  env.lash = nil
  env.require = refuse("require", "code mode reaches the run's tools through `tools`, nothing else")
  env.load = refuse("load", "the chunk is all the code there is")
  env.loadfile, env.dofile = refuse("loadfile", "no files"), refuse("dofile", "no files")
  env.debug = refusing("debug", "it could reach past every boundary")
  env.io = refusing("io", "no files or streams; use the run's tools")
  env.package = refusing("package", "no modules")
  env.print = function(...)
    local n = select("#", ...)
    local parts = {}
    for i = 1, n do parts[i] = tostring((select(i, ...))) end
    out:add(table.concat(parts, "\t") .. "\n")
  end
  env.tools = tools_table
  env.json = setmetatable({}, { __index = { encode = json.encode_canonical, decode = json.decode,
                                             null = json.null }, __newindex = function()
    error("json is read-only in run_lua", 2) end, __metatable = false })
  env._G = env
  return env, sstring
end

-- Printed text, kept up to a cap.
local function output_buffer(max)
  local b = { parts = {}, size = 0, dropped = 0 }
  function b.add(self, s)
    if self.size >= max then self.dropped = self.dropped + #s return end
    if self.size + #s > max then
      self.dropped = self.dropped + (self.size + #s - max)
      s = s:sub(1, max - self.size)
    end
    self.parts[#self.parts + 1] = s
    self.size = self.size + #s
  end
  function b.text(self)
    local t = table.concat(self.parts)
    if self.dropped > 0 then t = t .. string.format("\n[... %d more bytes printed, not kept]", self.dropped) end
    return t
  end
  return b
end

-- The names a chunk may call: the run's tools but run_lua itself and
-- handoffs (or the configured list).
local function callable(ctx, conf, self_name)
  local run = require("lash.subagent").run_of(ctx)
  local out = {}
  for _, t in ipairs(run and run.tools or {}) do
    local meta = t.metadata
    local is_handoff = type(meta) == "table" and meta.lash_handoff ~= nil
    if t.name ~= self_name and not is_handoff and (not conf.tools or conf.allowed[t.name]) then
      out[#out + 1] = t.name
    end
  end
  return out
end

local function result_text(printed, n, ...)
  local value = (...)
  if n > 1 then value = table.pack(...) value.n = nil end
  local has_value = value ~= nil
  if printed == "" then
    if not has_value then return "{}" end
    return tool.content(value)
  end
  if not has_value then return json.encode_canonical { output = printed } end
  return json.encode_canonical { output = printed, result = value }
end

local function failure(kind_msg, printed, calls)
  local lines = { kind_msg }
  if printed ~= "" then lines[#lines + 1] = "It printed:\n" .. printed end
  if #calls > 0 then
    lines[#lines + 1] = "Tool calls it made before that (" .. #calls .. "): " .. table.concat(calls, ", ")
      .. ". They ran; do not repeat the ones that changed something."
  end
  return table.concat(lines, "\n\n")
end

--- The run_lua tool.
function M.tool(opts)
  opts = opts or {}
  tool.check_fields("lash.code_mode", opts, FIELDS, 3)
  local conf = {}
  for k, v in pairs(M.DEFAULTS) do conf[k] = opts[k] or v end
  for _, k in ipairs { "instructions", "memory", "seconds", "max_tool_calls", "max_output_bytes", "max_code_bytes" } do
    local v = conf[k]
    if v <= 0 or v ~= v or v == math.huge then error("lash.code_mode: " .. k .. " must be a positive number", 3) end
  end
  -- built by a spec loaded without trust: no budget above a call's there
  if opts.untrusted or runtime.core.budget.loading() then
    for _, k in ipairs { "instructions", "memory", "seconds" } do
      if opts[k] and opts[k] > spec_env.CALL_BUDGET[k] then
        error(string.format("lash.code_mode: %s = %s is more than a spec loaded without --trust may give its code "
          .. "(%s); load the spec with --trust to raise it", k, tostring(opts[k]),
          tostring(spec_env.CALL_BUDGET[k])), 3)
      end
    end
  end
  if opts.tools then
    conf.tools, conf.allowed = opts.tools, {}
    for i, n in ipairs(opts.tools) do
      if type(n) ~= "string" then error("lash.code_mode: tools[" .. i .. "] must be a tool name", 3) end
      conf.allowed[n] = true
    end
  end
  local name = opts.name or M.NAME
  local handler = function(ctx, args)
    local code = args.code
    if #code > conf.max_code_bytes then
      return nil, string.format("The chunk is %d bytes; at most %d are run. Write a shorter one.", #code,
        conf.max_code_bytes)
    end
    local out = output_buffer(conf.max_output_bytes)
    local calls, n = {}, 0
    local names = callable(ctx, conf, name)
    local allowed = {}
    for _, t in ipairs(names) do allowed[t] = true end
    local tools_table = setmetatable({}, {
      __index = function(_, tname)
        if not allowed[tname] then
          error("tools." .. tostring(tname) .. ": no such tool in run_lua (callable: " .. table.concat(names, ", ")
            .. ")", 2)
        end
        return function(targs)
          if targs ~= nil and type(targs) ~= "table" then
            error("tools." .. tname .. " takes one table of arguments, got a " .. type(targs), 2)
          end
          n = n + 1
          if n > conf.max_tool_calls then
            error("tools." .. tname .. ": this chunk made its " .. conf.max_tool_calls .. " tool calls (the most one "
              .. "chunk may make)", 2)
          end
          calls[#calls + 1] = tname
          -- the arguments go through JSON, as a model's would: nothing of
          -- the chunk's (functions, metatables) reaches the tool
          local ok, text = pcall(json.encode_canonical, targs or {})
          if not ok then error("tools." .. tname .. ": the arguments cannot be sent as JSON: " .. tostring(text), 2) end
          local status, content = agent.call_tool(ctx, tname, json.decode(text),
                                                  tostring(ctx.tool_call_id) .. "." .. n)
          if status ~= "ok" then error("tools." .. tname .. " " .. (status == "denied" and "was denied" or "failed")
            .. ": " .. tostring(content), 2) end
          return content
        end
      end,
      __newindex = function() error("tools is read-only", 2) end,
      __metatable = false,
    })
    local env, sstring = environment(out, tools_table)
    local chunk, serr = load(code, "=run_lua", "t", env)
    if not chunk then
      return nil, failure("The chunk does not compile: " .. tostring(serr), "", {})
    end
    local limits = { instructions = conf.instructions, memory = conf.memory, seconds = conf.seconds,
                     label = "the run_lua chunk", string_index = sstring }
    local res = table.pack(pcall(runtime.core.budget.call, chunk, limits))
    local printed = out:text()
    if not res[1] then
      local e = res[2]
      if runtime.is_error(e, "cancelled") then error(e, 0) end
      local msg
      if runtime.is_error(e, "budget") then
        msg = "The chunk was stopped: " .. tostring(e.message):gsub("; a spec loaded without %-%-trust runs under it "
          .. "%(%-%-trust lifts it%)", "") .. "."
      else
        msg = "The chunk failed: " .. tostring(type(e) == "table" and (e.message or tostring(e)) or e)
      end
      return nil, failure(msg, printed, calls)
    end
    local ok, text = pcall(result_text, printed, res.n - 1, table.unpack(res, 2, res.n))
    if not ok then return nil, failure("The chunk's result cannot be sent back: " .. tostring(text), printed, calls) end
    return text
  end
  return tool.new {
    name = name,
    description = "Run a Lua 5.4 chunk that calls this run's tools as functions (tools.<name>{args}, returning the "
      .. "result text; json.decode reads JSON) to chain, loop over and filter tool calls in one step. `return` a "
      .. "value and/or print(): both come back. No files, modules or io beyond the tools; budgets stop runaway code.",
    parameters = { type = "object", required = { "code" }, properties = {
      code = { type = "string", description = "The Lua chunk." } } },
    handler = handler,
    metadata = { lash_code_mode = conf },
  }
end

--- A capability offering run_lua, with instructions listing the tools
-- code can call.
function M.new(opts)
  local t = M.tool(opts)
  local conf = t.metadata.lash_code_mode
  return capability.new { name = "CodeMode", tools = { t }, instructions = function(ctx)
    local names = callable(ctx, conf, t.name)
    if #names == 0 then return nil end
    local list = {}
    for i, nm in ipairs(names) do
      list[i] = nm:match("^[%a_][%w_]*$") and ("tools." .. nm) or ("tools[" .. string.format("%q", nm) .. "]")
    end
    return "With " .. t.name .. " you can write one Lua chunk that calls several tools, loops and filters, instead "
      .. "of one tool call per turn. Callable from it: " .. table.concat(list, ", ") .. "."
  end }
end

return M
