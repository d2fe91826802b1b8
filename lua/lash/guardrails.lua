--- Guardrails: checks on a run's input (its prompt) and its output (the
-- final answer) that can stop the run with a tripwire, after the OpenAI
-- Agents SDK's input and output guardrails.
--
--   guardrails = { input = { g, ... }, output = { g, ... } }
--
-- on an agent, a capability (`lash.capability{guardrails = ...}`) or a
-- run's options. A guardrail `g` is
--
--   function(ctx, value) -> verdict    value: the prompt's text (input) or
--                                      the answer (output: a string, or the
--                                      decoded value of a structured one)
--   a lash.agent                       run on the text as a sub-agent; its
--                                      answer is {tripwire_triggered = bool,
--                                      reason = string}
--   { check = function | agent, name =, run_in_parallel = bool }
--
-- A verdict is nil or true (pass), false or a reason string (the tripwire),
-- or a table: `{tripwire = true | reason, info =}`, `{replace = value}`
-- (the value goes on in its place: an output guardrail, or an input one
-- that is not run in parallel), `{retry = instruction}` (output only: the
-- model is asked again, counted against the agent's retries).
--
-- Input guardrails run when a run starts with a prompt (not when it resumes
-- one stopped for approval), for the run's first agent only; by default
-- (`run_in_parallel`, as the SDK) they run while the first model request
-- is on its way, and a tripwire cancels that request. No tool call and no
-- answer is acted on before every input guardrail has passed. Output
-- guardrails run on the final answer of the agent that gave it (after a
-- handoff, the last one). A tripwire ends the run with an error of kind
-- `guardrail` (`lash run` exits with 10) naming the guardrail and its
-- reason; each verdict is also a `guardrail` event {side, name, tripped,
-- reason}.
-- @module lash.guardrails
local runtime = require "lash.runtime"

local M = {}

local SIDES = { input = true, output = true }

local function is_agent(v)
  return type(v) == "table" and type(v.start) == "function" and type(v.own_toolsets) == "table"
end

local function check_one(who, g, where, level)
  if type(g) == "function" or is_agent(g) then return end
  if type(g) ~= "table" then
    error(who .. ": guardrails." .. where .. " must be a function(ctx, value), an agent or {check = ...}, got "
      .. type(g), level + 1)
  end
  for k in pairs(g) do
    if k ~= "check" and k ~= "name" and k ~= "run_in_parallel" then
      error(who .. ": guardrails." .. where .. ": unknown field '" .. tostring(k)
        .. "' (known fields: check, name, run_in_parallel)", level + 1)
    end
  end
  if type(g.check) ~= "function" and not is_agent(g.check) then
    error(who .. ": guardrails." .. where .. ".check must be a function(ctx, value) or an agent", level + 1)
  end
end

--- Check a `guardrails` table; raise `who: ...` naming what is wrong.
function M.check(who, gs, level)
  level = level or 1
  if gs == nil then return end
  if type(gs) ~= "table" then
    error(who .. ": 'guardrails' must be {input = {...}, output = {...}}, got " .. type(gs), level + 1)
  end
  for side, list in pairs(gs) do
    if not SIDES[side] then
      error(who .. ": guardrails: unknown side '" .. tostring(side) .. "' (known: input, output)", level + 1)
    end
    if type(list) ~= "table" or is_agent(list) or list.check ~= nil then list = { list } end
    for i, g in ipairs(list) do check_one(who, g, side .. "[" .. i .. "]", level + 1) end
  end
end

local function entries(gs, side, out)
  local list = gs and gs[side]
  if list == nil then return end
  if type(list) ~= "table" or is_agent(list) or list.check ~= nil then list = { list } end
  for _, g in ipairs(list) do
    local e
    if type(g) == "table" and not is_agent(g) then
      e = { check = g.check, name = g.name, parallel = g.run_in_parallel ~= false }
    else
      e = { check = g, parallel = true }
    end
    if not e.name then
      e.name = is_agent(e.check) and tostring(e.check.name) or (side .. " guardrail " .. (#out + 1))
    end
    out[#out + 1] = e
  end
end

--- The guardrails of one side from several sources (guardrails tables,
-- nils skipped), in order, or nil when there are none.
function M.collect(sources, side)
  local out = {}
  for i = 1, sources.n or #sources do entries(sources[i], side, out) end
  if #out == 0 then return nil end
  return out
end

local VERDICT_SCHEMA = {
  type = "object", required = { "tripwire_triggered" },
  properties = { tripwire_triggered = { type = "boolean" }, reason = { type = "string" } },
}

-- Run one guardrail; returns a verdict table {tripped=, reason=, info=,
-- replace=, retry=} (nil fields when it passed).
local function judge(e, ctx, value, side)
  local c = e.check
  local v
  if is_agent(c) then
    local text = type(value) == "string" and value or require("lash.json").encode_canonical(value)
    local res = c:start(text, { parent = ctx, output = c.output or VERDICT_SCHEMA }):join()
    local out = res.output
    if type(out) ~= "table" then
      error(runtime.error("guardrail", "guardrail agent '" .. e.name .. "' did not answer with {tripwire_triggered, "
        .. "reason}"), 0)
    end
    local trip = out.tripwire_triggered
    if trip == nil then trip = out.tripwire end
    v = trip and { tripwire = out.reason or true, info = out } or nil
  else
    v = c(ctx, value)
  end
  if v == nil or v == true then return {} end
  if v == false then return { tripped = true } end
  if type(v) == "string" then return { tripped = true, reason = v } end
  if type(v) == "table" then
    if v.tripwire ~= nil and v.tripwire ~= false then
      return { tripped = true, reason = type(v.tripwire) == "string" and v.tripwire or v.reason, info = v.info }
    end
    if v.replace ~= nil then return { replace = v.replace } end
    if v.retry ~= nil then
      if side ~= "output" then
        error(runtime.error("guardrail", "input guardrail '" .. e.name .. "' asked for a retry; only an output "
          .. "guardrail can (an input guardrail passes, replaces the input, or trips)"), 0)
      end
      return { retry = tostring(v.retry) }
    end
    return {}
  end
  error(runtime.error("guardrail", "guardrail '" .. e.name .. "' returned a " .. type(v) .. " (return nil or true "
    .. "to pass, false or a reason to trip, or {tripwire =, replace =, retry =})"), 0)
end

local function trip_error(side, e, verdict)
  local reason = verdict.reason or "no reason given"
  return runtime.error("guardrail", string.format("the %s guardrail '%s' tripped: %s", side, e.name, reason),
    { guardrail = e.name, side = side, reason = verdict.reason, info = verdict.info })
end

--- Start the input guardrails of a run on `text`. Those not in parallel
-- run now, in order (a replace changes the text the next ones see and the
-- prompt; returns the new text). The parallel ones start as tasks; a
-- tripwire among them calls `on_trip(err)` at once. Returns the text, a
-- waiter (waits for them all and raises the first tripwire) and a stopper
-- (cancels those still running), both nil when none runs in parallel.
function M.start_input(list, ctx, text, emit, on_trip)
  local parallel = {}
  for _, e in ipairs(list) do
    if e.parallel then
      parallel[#parallel + 1] = e
    else
      local v = judge(e, ctx, text, "input")
      emit { type = "guardrail", side = "input", name = e.name, tripped = v.tripped or false, reason = v.reason }
      if v.tripped then error(trip_error("input", e, v), 0) end
      if v.replace ~= nil then text = v.replace end
    end
  end
  if #parallel == 0 then return text, nil, nil end
  local L = runtime
  local state = { failure = nil, left = #parallel, done = L.future() }
  local tasks = {}
  for i, e in ipairs(parallel) do
    tasks[i] = L.spawn(function()
      local ok, v = pcall(judge, e, ctx, text, "input")
      if not ok then
        if state.failure == nil and not L.is_error(v, "cancelled") then
          state.failure = v
          on_trip(v)
        end
      else
        if v.replace ~= nil and state.failure == nil then
          state.failure = runtime.error("guardrail", "input guardrail '" .. e.name .. "' replaced the input, which "
            .. "a guardrail run in parallel with the model request cannot do; give it run_in_parallel = false")
          on_trip(state.failure)
        end
        emit { type = "guardrail", side = "input", name = e.name, tripped = v.tripped or false, reason = v.reason }
        if v.tripped and state.failure == nil then
          state.failure = trip_error("input", e, v)
          on_trip(state.failure)
        end
      end
      state.left = state.left - 1
      if state.left == 0 or state.failure then state.done:set() end
    end)
  end
  local function stop()
    for _, t in ipairs(tasks) do t:cancel() end
    for _, t in ipairs(tasks) do pcall(t.wait, t) end
  end
  local function wait()
    local ok, err = pcall(state.done.wait, state.done)
    if not ok or state.failure then
      stop()
      if not ok then error(err, 0) end
      error(state.failure, 0)
    end
  end
  return text, wait, stop
end

--- Run the output guardrails on `value`, in order. Returns the value
-- (replaced, maybe) and a retry instruction when one asks for it.
function M.run_output(list, ctx, value, emit)
  for _, e in ipairs(list) do
    local v = judge(e, ctx, value, "output")
    emit { type = "guardrail", side = "output", name = e.name, tripped = v.tripped or false, reason = v.reason }
    if v.tripped then error(trip_error("output", e, v), 0) end
    if v.retry then return value, v.retry end
    if v.replace ~= nil then value = v.replace end
  end
  return value
end

--- A guardrail that trips when the text (or a structured value's JSON)
-- contains any of `keywords`, ignoring case (pydantic-ai-harness's
-- blocked_keywords detector).
function M.blocked_keywords(keywords)
  if type(keywords) ~= "table" or #keywords == 0 then
    error("blocked_keywords: give a list of words", 2)
  end
  local lower = {}
  for i, k in ipairs(keywords) do
    if type(k) ~= "string" or k == "" then error("blocked_keywords[" .. i .. "] must be a non-empty string", 2) end
    lower[i] = k:lower()
  end
  return function(_, value)
    local text = type(value) == "string" and value or require("lash.json").encode_canonical(value)
    text = text:lower()
    for i, k in ipairs(lower) do
      if text:find(k, 1, true) then return "it contains the blocked keyword '" .. keywords[i] .. "'" end
    end
  end
end

return M
