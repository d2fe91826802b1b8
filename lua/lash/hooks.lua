--- Named lifecycle hooks: functions lash calls at fixed points of a run,
-- which may look, change, allow or refuse what happens there.
--
-- A hook is `function(ctx, payload)`; it runs inside the run's task (or
-- the tool call's), so it may wait. Where they come from, in the order
-- they run:
--
--   1. the agent's `hooks = {...}`,
--   2. each capability's `hooks` (in the order of `capabilities`),
--   3. the run's `opts.hooks` (agent:run/start; an embedding host's
--      lash_register_hook lands here),
--   4. the run options' hooks of every run above a sub-agent's run,
--      nearest first (a parent's run-level policy covers its children).
--
-- So the hooks nearest the host have the last word: a later
-- `before_tool_call` sees the arguments an earlier one edited and may
-- still refuse them.
--
-- A `hooks` table maps a name to a function, to an entry
-- `{ handler = fn, tools = "name" | {"name", ...} }` (tool hooks only:
-- called for those tools), or to a list of either. The names:
--
--   before_model_request(ctx, req)  req = {step, instructions, messages,
--       tools, settings}. Return nil to send it as it is, or a table with
--       any of instructions/messages/tools/settings to send those instead
--       (this request only; the history is not changed). Return false or a
--       message to stop the run (error kind "hook").
--   after_model_response(ctx, resp) resp = {step, parts, finish, usage,
--       model}. Return nil to keep it, `{parts = {...}}` (and `finish`) to
--       replace what enters the history, or false / a message to stop the
--       run (kind "hook").
--   before_tool_call(ctx, call)     call = {id, name, args}; ctx is the
--       call's (ctx.tool_name, ctx.tool_call_id). Return nil or true to
--       allow, false or a message to deny (the model gets the message as the
--       call's result, status "denied"), or `{allow =, message =, args =}`:
--       `args` replaces the arguments (checked against the tool's schema).
--       Runs before approval, which then sees the edited arguments.
--   after_tool_call(ctx, call, result)  result = {status, content}. Return
--       nil to keep the result, a string to replace its content, or
--       `{content =, status =}`.
--   on_run_end(ctx, outcome)        outcome = {stop_reason, output, usage,
--       error = {kind, message} | nil}. Its return value is ignored; an error
--       it raises fails a run that had succeeded.
--   before_compaction(ctx, info)    before the history is compacted (the
--       context module's call point). Return nil to go ahead, false or a
--       message to skip this compaction, or a table of changes it reads.
--
-- Errors a hook raises end the run (typed errors keep their kind). Hooks
-- of a spec loaded without trust run under its per-call budget
-- (lash.spec_env).
-- @module lash.hooks
local runtime = require "lash.runtime"
local options = require "lash.options"

local M = {}

--- Every hook name, in the order a run reaches them.
M.NAMES = { "before_model_request", "after_model_response", "before_tool_call", "after_tool_call",
            "on_run_end", "before_compaction" }

local KNOWN = {}
for _, n in ipairs(M.NAMES) do KNOWN[n] = true end

local TOOL_HOOK = { before_tool_call = true, after_tool_call = true }

local function hook_error(message, fields)
  return runtime.error("hook", message, fields)
end

local function bad(who, msg, level)
  error(who .. ": " .. msg, level + 1)
end

-- One entry: a function, or {handler = fn, tools = ...}.
local function check_entry(who, name, e, where, level)
  if type(e) == "function" then return end
  if type(e) ~= "table" then
    bad(who, "hooks." .. where .. " must be a function(ctx, ...) or {handler = fn, tools = ...}, got " .. type(e),
        level + 1)
  end
  for k in pairs(e) do
    if k ~= "handler" and k ~= "tools" then
      bad(who, "hooks." .. where .. ": unknown field '" .. tostring(k) .. "' (known fields: handler, tools)", level + 1)
    end
  end
  if type(e.handler) ~= "function" then
    bad(who, "hooks." .. where .. ".handler must be a function(ctx, ...), got " .. type(e.handler), level + 1)
  end
  if e.tools ~= nil then
    if not TOOL_HOOK[name] then
      bad(who, "hooks." .. where .. ": 'tools' only applies to before_tool_call and after_tool_call", level + 1)
    end
    local t = e.tools
    if type(t) == "table" then
      for i, n in ipairs(t) do
        if type(n) ~= "string" then
          bad(who, "hooks." .. where .. ".tools[" .. i .. "] must be a tool name, got " .. type(n), level + 1)
        end
      end
    elseif type(t) ~= "string" then
      bad(who, "hooks." .. where .. ".tools must be a tool name or a list of them, got " .. type(t), level + 1)
    end
  end
end

--- Check a `hooks` table; raise `who: ...` naming what is wrong.
-- @int level as for error(), of the function checking
function M.check(who, hooks, level)
  level = level or 1
  if hooks == nil then return end
  if type(hooks) ~= "table" then
    bad(who, "'hooks' must be a table of name = function, got " .. type(hooks), level + 1)
  end
  local k = options.unknown(hooks, KNOWN)
  if k ~= nil then
    error(options.message(who, "hook", k, KNOWN, "hooks"), level + 1)
  end
  for name, v in pairs(hooks) do
    if type(v) == "table" and v.handler == nil and (v[1] ~= nil or next(v) == nil) then
      for i, e in ipairs(v) do check_entry(who, name, e, name .. "[" .. i .. "]", level + 1) end
    else
      check_entry(who, name, v, name, level + 1)
    end
  end
end

local function tool_set(t)
  if t == nil then return nil end
  if type(t) == "string" then return { [t] = true } end
  local s = {}
  for _, n in ipairs(t) do s[n] = true end
  return s
end

-- Append the entries of one hooks table to the compiled lists.
local function add_source(out, hooks)
  for _, name in ipairs(M.NAMES) do
    local v = hooks[name]
    if v ~= nil then
      local list = out[name] or {}
      out[name] = list
      local items = (type(v) == "table" and v.handler == nil) and v or { v }
      for _, e in ipairs(items) do
        if type(e) == "function" then
          list[#list + 1] = { fn = e }
        else
          list[#list + 1] = { fn = e.handler, tools = tool_set(e.tools) }
        end
      end
    end
  end
end

--- Compile the hooks of several sources (hooks tables, in calling order;
-- nils skipped) into one table name -> list, or nil when there is none.
function M.compile(sources)
  local out, any = {}, false
  for i = 1, sources.n or #sources do
    local h = sources[i]
    if h ~= nil then
      add_source(out, h)
      any = true
    end
  end
  if not any or next(out) == nil then return nil end
  return out
end

--- The hooks a capability instance offers (`get_hooks()`, which
-- lash.capability objects have), or nil.
function M.of_capability(cap)
  if type(cap.get_hooks) == "function" then return cap:get_hooks() end
  return nil
end

-- A message from a hook's refusal: its string, or a default.
local function refusal(v, default)
  if type(v) == "string" then return v end
  if type(v) == "table" and type(v.message) == "string" then return v.message end
  return default
end

local function each(compiled, name)
  return compiled and compiled[name]
end

--- before_model_request: returns the request to send (req itself, or a
-- copy with the fields hooks replaced).
function M.before_model_request(compiled, ctx, req)
  local list = each(compiled, "before_model_request")
  if not list then return req end
  for _, e in ipairs(list) do
    local r = e.fn(ctx, req)
    if r == false or type(r) == "string" then
      error(hook_error("a before_model_request hook stopped the run: "
        .. refusal(r, "no reason given"), { hook = "before_model_request" }), 0)
    elseif type(r) == "table" then
      local copy = {}
      for k, v in pairs(req) do copy[k] = v end
      for _, k in ipairs { "instructions", "messages", "tools", "settings" } do
        if r[k] ~= nil then copy[k] = r[k] end
      end
      if copy.instructions == false then copy.instructions = nil end
      req = copy
    elseif r ~= nil and r ~= true then
      error(hook_error("a before_model_request hook returned a " .. type(r)
        .. " (return nil, a table of changes, or false / a message to stop the run)"), 0)
    end
  end
  return req
end

--- after_model_response: returns the response (resp itself or changed).
function M.after_model_response(compiled, ctx, resp)
  local list = each(compiled, "after_model_response")
  if not list then return resp end
  for _, e in ipairs(list) do
    local r = e.fn(ctx, resp)
    if r == false or type(r) == "string" then
      error(hook_error("an after_model_response hook stopped the run: " .. refusal(r, "no reason given"),
                       { hook = "after_model_response" }), 0)
    elseif type(r) == "table" then
      if r.parts ~= nil and type(r.parts) ~= "table" then
        error(hook_error("an after_model_response hook returned parts that are not a list"), 0)
      end
      local copy = {}
      for k, v in pairs(resp) do copy[k] = v end
      if r.parts then copy.parts = r.parts end
      if r.finish then copy.finish = r.finish end
      resp = copy
    elseif r ~= nil and r ~= true then
      error(hook_error("an after_model_response hook returned a " .. type(r)
        .. " (return nil, {parts = ...}, or false / a message to stop the run)"), 0)
    end
  end
  return resp
end

M.DENIED = "The tool call was denied by a hook."

--- before_tool_call: returns allow (boolean), args (the possibly edited
-- arguments), message (when denied). `prepare(args)` checks edited
-- arguments: returns them or nil, problem.
function M.before_tool_call(compiled, ctx, call, prepare)
  local list = each(compiled, "before_tool_call")
  if not list then return true, call.args end
  local args = call.args
  for _, e in ipairs(list) do
    if not e.tools or e.tools[call.name] then
      local r = e.fn(ctx, { id = call.id, name = call.name, args = args })
      if r == false or type(r) == "string" then
        return false, args, refusal(r, M.DENIED)
      elseif type(r) == "table" then
        if r.allow == false then return false, args, refusal(r, M.DENIED) end
        if r.args ~= nil then
          local a, problem = prepare(r.args)
          if not a then
            error(hook_error("a before_tool_call hook edited the arguments of call '" .. tostring(call.id) .. "' ("
              .. call.name .. ") into ones the tool refuses: " .. tostring(problem), { tool = call.name }), 0)
          end
          args = a
        end
      elseif r ~= nil and r ~= true then
        error(hook_error("a before_tool_call hook returned a " .. type(r) .. " (return nil/true to allow, false or "
          .. "a message to deny, or {allow =, message =, args =})", { tool = call.name }), 0)
      end
    end
  end
  return true, args
end

--- after_tool_call: returns the result table ({status, content}), maybe
-- replaced.
function M.after_tool_call(compiled, ctx, call, result)
  local list = each(compiled, "after_tool_call")
  if not list then return result end
  for _, e in ipairs(list) do
    if not e.tools or e.tools[call.name] then
      local r = e.fn(ctx, { id = call.id, name = call.name, args = call.args },
                     { status = result.status, content = result.content })
      if type(r) == "string" then
        result = { status = result.status, content = r, message = result.message }
      elseif type(r) == "table" then
        local content, status = r.content, r.status or result.status
        if content ~= nil and type(content) ~= "string" then
          error(hook_error("an after_tool_call hook returned content that is not a string (a " .. type(content)
            .. ")", { tool = call.name }), 0)
        end
        if status ~= "ok" and status ~= "retry" and status ~= "denied" then
          error(hook_error("an after_tool_call hook returned status '" .. tostring(status)
            .. "' (ok, retry or denied)", { tool = call.name }), 0)
        end
        result = { status = status, content = content or result.content, message = content or result.message }
      elseif r ~= nil then
        error(hook_error("an after_tool_call hook returned a " .. type(r) .. " (return nil, a string, or "
          .. "{content =, status =})", { tool = call.name }), 0)
      end
    end
  end
  return result
end

--- on_run_end: calls every hook with the outcome.
function M.on_run_end(compiled, ctx, outcome)
  local list = each(compiled, "on_run_end")
  if not list then return end
  for _, e in ipairs(list) do e.fn(ctx, outcome) end
end

--- before_compaction: returns proceed (boolean), changes (table or nil),
-- message (why it was skipped).
function M.before_compaction(compiled, ctx, info)
  local list = each(compiled, "before_compaction")
  if not list then return true end
  local changes
  for _, e in ipairs(list) do
    local r = e.fn(ctx, info)
    if r == false or type(r) == "string" then
      return false, changes, refusal(r, "a before_compaction hook skipped it")
    elseif type(r) == "table" then
      changes = changes or {}
      for k, v in pairs(r) do changes[k] = v end
    elseif r ~= nil and r ~= true then
      error(hook_error("a before_compaction hook returned a " .. type(r)
        .. " (return nil, a table of changes, or false / a message to skip)"), 0)
    end
  end
  return true, changes
end

--- Does the compiled set have hooks of this name?
function M.has(compiled, name)
  return compiled ~= nil and compiled[name] ~= nil
end

return M
