-- lash.agent: the run loop, events, concurrency, cancellation, limits,
-- retries, approvals, history, templates.
local lash = require "lash"
local json = require "lash.json"

local function types_of(events)
  local out = {}
  for i, e in ipairs(events) do out[i] = e.type end
  return out
end

local collector = require("helpers.events").collector

local function results_of(messages)
  for i = #messages, 1, -1 do
    local m = messages[i]
    if m.role == "user" and m.parts[1] and m.parts[1].type == "tool_result" then return m.parts end
  end
end

local add = lash.tool { name = "add", description = "Add two integers.",
  parameters = { type = "object", properties = { a = { type = "integer" }, b = { type = "integer" } },
                 required = { "a", "b" }, additionalProperties = false },
  handler = function(_, args) return args.a + args.b end }

describe("lash.agent definitions", function()
  it("refuses unknown fields and bad values", function()
    local ok, err = pcall(lash.agent, { modle = "test" })
    assert.is_false(ok)
    assert.matches("lash.agent: unknown field 'modle' %(known fields: .*model,", err)
    ok, err = pcall(lash.agent, { model = "test", retries = -1 })
    assert.is_false(ok)
    assert.matches("field 'retries' must be an integer >= 0", err)
    ok, err = pcall(lash.agent, { model = "test", limits = { max_stepz = 1 } })
    assert.matches("unknown limit 'max_stepz'", err)
    ok, err = pcall(lash.agent, { model = "test", instructions = { "a", 5 } })
    assert.matches("instructions%[2%] must be a string or a function", err)
  end)

  it("refuses unknown run options", function()
    local agent = lash.agent { model = "test" }
    local ok, err = pcall(agent.run, agent, "hi", { histroy = {} })
    assert.is_false(ok)
    assert.matches("agent:run: unknown field 'histroy' %(known fields: .*history,", err)
  end)
end)

describe("a failed run's history", function()
  it("is a list, encoded [] even when the run failed before any message", function()
    local ok, err = pcall(function() return lash.agent { model = "nope:x" }:run("hi") end)
    assert.is_false(ok)
    assert.equal("[]", json.encode(rawget(err, "messages")))
  end)
end)

describe("run options toolsets and host", function()
  local function names(tools)
    local out = {}
    for i, t in ipairs(tools) do out[i] = t.name end
    return out
  end

  it("offers a run's extra toolsets to that run only, after the agent's own tools", function()
    local seen = {}
    local echo = lash.tool { name = "whoami", description = "Say which host runs this.",
      handler = function(ctx) return "host " .. tostring(ctx.host and ctx.host.name) end }
    local host_tools = lash.toolset { name = "host tools", tools = { echo } }
    local model = require("lash.models.func").new(function(messages, info)
      seen[#seen + 1] = names(info.tools)
      if info.step == 1 and #info.tools == 2 then return { tool_calls = { { name = "whoami", args = {} } } } end
      local r = results_of(messages)
      return r and r[1].content or "no tools"
    end)
    local agent = lash.agent { model = model, tools = { add } }
    local res = agent:run("who?", { toolsets = { host_tools }, host = { name = "h1" } })
    assert.equal("host h1", res.output)
    assert.same({ "add", "whoami" }, seen[1])
    -- the agent itself is unchanged: the next run without the option has no host tools
    seen = {}
    assert.equal("no tools", agent:run("again").output)
    assert.same({ "add" }, seen[1])
  end)

  it("refuses a toolsets entry that is not a toolset", function()
    local agent = lash.agent { model = "test" }
    local ok, err = pcall(agent.run, agent, "hi", { toolsets = { { name = "x" } } })
    assert.is_false(ok)
    assert.matches("agent:run: toolsets[1] is not a toolset", err, 1, true)
  end)
end)

describe("agent:describe", function()
  it("shows the settings a run uses and the one table of defaults they come from", function()
    local defaults = require "lash.defaults"
    local d = lash.agent { model = "test", limits = { max_steps = 7 } }:describe()
    assert.equal("test", d.model)
    assert.equal(7, d.limits.max_steps)
    assert.equal(defaults.agent.max_calls_per_turn, d.limits.max_calls_per_turn)
    assert.equal(defaults.agent.retries, d.retries)
    assert.same(defaults.copy(), d.defaults)
    assert.truthy(json.encode(d))
    -- a copy: changing what describe returned changes nothing
    d.defaults.agent.max_steps = 1
    assert.equal(50, defaults.agent.max_steps)
  end)

  it("is what the sandbox capability uses", function()
    local defaults = require "lash.defaults"
    local cap = lash.sandbox_capability {}
    assert.equal(defaults.sandbox.max_output_bytes, cap.opts.max_output_bytes)
    assert.equal(defaults.sandbox.sandbox_timeout, cap.opts.sandbox_timeout)
    assert.equal(defaults.sandbox.default_command_timeout, cap.opts.default_command_timeout)
  end)
end)

describe("a run", function()
  it("calls tools and returns output, messages, usage and stop_reason", function()
    local model = lash.script_model {
      { text = "Let me add.", tool_calls = { { name = "add", args = { a = 2, b = 3 }, id = "c1" } },
        usage = { input_tokens = 100, output_tokens = 10, cache_read_tokens = 40, cache_write_tokens = 5 } },
      function(messages)
        return { text = "The sum is " .. results_of(messages)[1].content .. ".",
                 usage = { input_tokens = 120, output_tokens = 7 } }
      end,
    }
    local res = lash.agent { model = model, tools = { add } }:run("What is 2+3?")
    assert.equal("The sum is 5.", res.output)
    assert.equal("complete", res.stop_reason)
    assert.same({ requests = 2, input_tokens = 220, output_tokens = 17, cache_read_tokens = 40,
                  cache_write_tokens = 5, tool_calls = 1 }, res.usage)
    assert.equal(4, #res.messages)
    assert.same({ role = "user", parts = { { type = "text", text = "What is 2+3?" } } }, res.messages[1])
    assert.same({ type = "tool_call", id = "c1", name = "add", args = { a = 2, b = 3 } }, res.messages[2].parts[2])
    assert.same({ role = "user", parts = { { type = "tool_result", id = "c1", name = "add", content = "5",
                                             status = "ok" } } }, res.messages[3])
    assert.equal("assistant", res.messages[4].role)
  end)

  it("emits events in order, each JSON-serialisable", function()
    local events, on_event = collector()
    local model = lash.script_model {
      { tool_calls = { { name = "add", args = { a = 1, b = 1 } } } },
      "two",
    }
    lash.agent { model = model, tools = { add } }:run("1+1?", { on_event = on_event })
    assert.same({ "run_start", "model_request", "usage", "tool_call", "tool_result", "model_request",
                  "text_delta", "usage", "run_end" }, types_of(events))
    for _, e in ipairs(events) do
      assert.is_string(json.encode(e))
      assert.equal(events[1].run_id, e.run_id)
    end
    assert.equal("two", events[7].text)
    assert.equal("complete", events[9].stop_reason)
    assert.equal("two", events[9].output)
    assert.equal(2, events[9].usage.requests)
  end)

  it("continues a history in a later run", function()
    local model = function(messages)
      local texts = {}
      for _, m in ipairs(messages) do
        if m.role == "user" and m.parts[1].type == "text" then texts[#texts + 1] = m.parts[1].text end
      end
      return table.concat(texts, "+")
    end
    local agent = lash.agent { model = model }
    local r1 = agent:run("one")
    local history = json.decode(json.encode(r1.messages))   -- survives serialisation
    local r2 = agent:run("two", { history = history })
    assert.equal("one+two", r2.output)
    assert.equal(4, #r2.messages)
    assert.equal(2, #history, "the caller's history is not changed")
  end)

  it("runs the tool calls of one turn concurrently", function()
    local log = {}
    local slow = lash.tool { name = "slow", parameters = { type = "object", properties = { id = { type = "string" },
      delay = { type = "number" } } }, handler = function(_, a)
        log[#log + 1] = "start " .. a.id
        lash.sleep(a.delay)
        log[#log + 1] = "end " .. a.id
        return a.id
      end }
    local model = lash.script_model {
      { tool_calls = { { name = "slow", args = { id = "A", delay = 0.05 } },
                       { name = "slow", args = { id = "B", delay = 0.001 } } } },
      "done",
    }
    local res = lash.agent { model = model, tools = { slow } }:run("go")
    assert.same({ "start A", "start B", "end B", "end A" }, log)
    local r = results_of(res.messages)
    assert.equal("A", r[1].content, "results keep the order of the calls")
    assert.equal("B", r[2].content)
  end)

  it("runs many runs at once in one thread", function()
    local agent = lash.agent { tools = { add }, model = lash.script_model {
      function(_, info) lash.sleep(0.001) return { tool_calls = { { name = "add", args = { a = 1, b = 2 } } } } end,
      function(messages) return "r=" .. results_of(messages)[1].content end,
    } }
    local tasks = {}
    for i = 1, 100 do tasks[i] = agent:start("go " .. i) end
    for i = 1, 100 do assert.equal("r=3", tasks[i]:join().output) end
  end)

  it("resolves the model per run and lets a run override it", function()
    local agent = lash.agent { model = "nope:x" }
    local ok, err = pcall(agent.run, agent, "hi")
    assert.is_false(ok)
    assert.matches("unknown model provider 'nope'", err.message, 1, true)
    assert.equal("success (no tool calls)", agent:run("hi", { model = "test" }).output)
  end)

  -- with a key in the environment there is nothing to check: say so rather than pass
  local it_without_key = os.getenv("ANTHROPIC_API_KEY") and pending or it
  it_without_key("fails before any request when the API key is missing", function()
    local agent = lash.agent { model = { "anthropic:claude-sonnet-4-6", base_url = "http://127.0.0.1:9" } }
    local ok, err = pcall(agent.run, agent, "hi")
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "config"))
    assert.matches("ANTHROPIC_API_KEY is not set", err.message, 1, true)
    assert.equal(0, err.usage.requests)
  end)
end)

describe("tool retries", function()
  it("sends validation problems and unknown tools back to the model", function()
    local model = lash.script_model {
      { tool_calls = { { name = "add", args = '{"a": "x"}' }, { name = "mul", args = {} } } },
      function(messages)
        local r = results_of(messages)
        return r[1].content .. "\n---\n" .. r[2].content
      end,
    }
    local events, on_event = collector()
    local res = lash.agent { model = model, tools = { add } }:run("go", { on_event = on_event })
    assert.equal("2 validation errors:\n- missing required property 'b'\n- a: expected integer, got string"
      .. "\n\nFix the errors and try again.\n---\nUnknown tool name: 'mul'. Available tools: 'add'"
      .. "\n\nFix the errors and try again.", res.output)
    local retries = {}
    for _, e in ipairs(events) do if e.type == "retry" then retries[#retries + 1] = e.name end end
    assert.same({ "add", "mul" }, retries)
  end)

  it("says when no tools are available", function()
    local model = lash.script_model { { tool_calls = { { name = "x" } } },
      function(m) return results_of(m)[1].content end }
    assert.equal("Unknown tool name: 'x'. No tools available.\n\nFix the errors and try again.",
                 lash.agent { model = model }:run("go").output)
  end)

  it("fails the run past the budget with the exact message", function()
    local calls = 0
    local flaky = lash.tool { name = "flaky", handler = function() calls = calls + 1; lash.retry("nope") end }
    local model = function() return { tool_calls = { { name = "flaky" } } } end
    local agent = lash.agent { model = model, tools = { flaky }, retries = 2 }
    local ok, err = pcall(agent.run, agent, "go")
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "retries"))
    assert.equal("Tool 'flaky' exceeded max retries count of 2", err.message)
    assert.equal(3, calls)
  end)

  it("counts retries per tool and consecutively", function()
    local n = 0
    local sometimes = lash.tool { name = "s", retries = 1, handler = function()
      n = n + 1
      if n % 2 == 1 then lash.retry("odd") end
      return "even"
    end }
    local model = lash.script_model {
      { tool_calls = { { name = "s" } } }, { tool_calls = { { name = "s" } } },
      { tool_calls = { { name = "s" } } }, { tool_calls = { { name = "s" } } },
      "done",
    }
    -- fail, ok, fail, ok: never two in a row, so a budget of 1 is enough
    assert.equal("done", lash.agent { model = model, tools = { sometimes } }:run("go").output)
  end)

  it("a tool's own retries override the agent's", function()
    local t = lash.tool { name = "t", retries = 0, handler = function() lash.retry("again") end }
    local agent = lash.agent { model = function() return { tool_calls = { { name = "t" } } } end,
                               tools = { t }, retries = 5 }
    local ok, err = pcall(agent.run, agent, "go")
    assert.equal("Tool 't' exceeded max retries count of 0", err.message)
  end)

  it("turns a tool timeout into a retry prompt", function()
    local slow = lash.tool { name = "slow", timeout = 0.02, handler = function() lash.sleep(5) end }
    local model = lash.script_model { { tool_calls = { { name = "slow" } } },
      function(m) return results_of(m)[1].content end }
    assert.equal("Tool 'slow' timed out after 0.02s.\n\nFix the errors and try again.",
                 lash.agent { model = model, tools = { slow } }:run("go").output)
  end)

  it("the agent's tool_timeout covers tools without their own", function()
    local slow = lash.tool { name = "slow", handler = function() lash.sleep(5) end }
    local quick = lash.tool { name = "quick", timeout = 10, handler = function() lash.sleep(0.05) return "made it" end }
    local model = lash.script_model { { tool_calls = { { name = "slow" }, { name = "quick" } } },
      function(m) return results_of(m)[1].content .. " | " .. results_of(m)[2].content end }
    local out = lash.agent { model = model, tools = { slow, quick }, tool_timeout = 0.02 }:run("go").output
    assert.equal("Tool 'slow' timed out after 0.02s.\n\nFix the errors and try again. | made it", out)
  end)

  it("refuses a tool_timeout that is not a positive number of seconds", function()
    for _, bad in ipairs({ 0, -1, math.huge, 0 / 0 }) do
      assert.has_error(function() lash.agent { model = "test", tool_timeout = bad } end)
    end
  end)
end)

describe("tool errors", function()
  it("fail the run with the traceback after closing every toolset", function()
    local log = {}
    local boom = lash.tool { name = "boom", handler = function() error("kaput") end }
    local ts = lash.toolset { name = "ts", tools = { boom },
      close = function(_, err) log[#log + 1] = "closed with " .. (err and err.kind or "nil") end }
    local agent = lash.agent { model = function() return { tool_calls = { { name = "boom" } } } end, toolsets = { ts } }
    local events, on_event = collector()
    local ok, err = pcall(agent.run, agent, "go", { on_event = on_event })
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "tool"))
    assert.matches("Tool 'boom' failed: .*kaput", err.message)
    assert.matches("stack traceback", err.traceback)
    assert.same({ "closed with tool" }, log)
    assert.equal("run_end", events[#events].type)
    assert.equal("error", events[#events].stop_reason)
    assert.equal("tool", events[#events].error.kind)
    assert.is_table(err.messages)
  end)

  it("cancel the other calls of the turn", function()
    local other_cancelled = false
    local boom = lash.tool { name = "boom", handler = function() lash.sleep(0.01) error("kaput") end }
    local wait = lash.tool { name = "wait", handler = function()
      local ok, e = pcall(lash.sleep, 10)
      other_cancelled = not ok and lash.is_error(e, "cancelled")
      error(e, 0)
    end }
    local agent = lash.agent { tools = { boom, wait },
      model = function() return { tool_calls = { { name = "wait" }, { name = "boom" } } } end }
    local ok, err = pcall(agent.run, agent, "go")
    assert.is_false(ok)
    assert.matches("kaput", err.message)
    assert.is_true(other_cancelled)
  end)
end)

describe("cancelling a run", function()
  it("closes every toolset in reverse order before the task ends", function()
    local log = {}
    local function ts(name)
      return lash.toolset { name = name, tools = { { name = "t_" .. name, handler = function() lash.sleep(10) end } },
        open = function() log[#log + 1] = "open " .. name end,
        close = function(_, err)
          lash.sleep(0.001)   -- closing may wait even though the run was cancelled
          log[#log + 1] = "close " .. name .. " " .. tostring(err and err.kind)
        end }
    end
    local agent = lash.agent { toolsets = { ts("a"), ts("b") },
      model = function() return { tool_calls = { { name = "t_a" } } } end }
    local events, on_event = collector()
    local task = agent:start("go", { on_event = on_event })
    lash.sleep(0.02)
    task:cancel()
    local ok, err = task:wait()
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "cancelled"))
    assert.equal("cancelled", task:status())
    assert.same({ "open a", "open b", "close b cancelled", "close a cancelled" }, log)
    assert.equal("cancelled", events[#events].stop_reason)
  end)

  it("cancels every concurrent tool call of the turn", function()
    local cancelled, closed = 0, false
    local waiter = lash.tool { name = "w", handler = function()
      local ok, e = pcall(lash.sleep, 10)
      if not ok and lash.is_error(e, "cancelled") then cancelled = cancelled + 1 end
      error(e, 0)
    end }
    local ts = lash.toolset { name = "ts", tools = { waiter }, close = function() closed = true end }
    local agent = lash.agent { toolsets = { ts },
      model = function() return { tool_calls = { { name = "w" }, { name = "w" }, { name = "w" } } } end }
    local task = agent:start("go")
    lash.sleep(0.02)
    task:cancel()
    local ok, err = task:wait()
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "cancelled"))
    assert.equal(3, cancelled)
    assert.is_true(closed)
  end)

  it("while waiting on the model", function()
    local closed = false
    local ts = lash.toolset { name = "x", close = function() closed = true end }
    local agent = lash.agent { toolsets = { ts }, model = function() lash.sleep(10) return "late" end }
    local task = agent:start("go")
    lash.sleep(0.01)
    task:cancel()
    assert.is_false((task:wait()))
    assert.is_true(closed)
  end)
end)

describe("limits", function()
  local loop_model = function() return { tool_calls = { { name = "add", args = { a = 1, b = 1 } } } } end

  it("max_steps names the limit and the value", function()
    local agent = lash.agent { model = loop_model, tools = { add }, limits = { max_steps = 3 } }
    local ok, err = pcall(agent.run, agent, "go")
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "limit"))
    assert.equal("max_steps limit of 3 reached: 3 model requests made without a final answer", err.message)
    assert.equal("max_steps", err.limit)
    assert.equal(3, err.value)
  end)

  it("max_steps defaults to 50", function()
    local agent = lash.agent { model = loop_model, tools = { add } }
    local ok, err = pcall(agent.run, agent, "go")
    assert.equal(50, err.value)
  end)

  it("max_tool_calls", function()
    local agent = lash.agent { model = loop_model, tools = { add }, limits = { max_tool_calls = 2 } }
    local ok, err = pcall(agent.run, agent, "go")
    assert.equal("max_tool_calls limit of 2 exceeded: the model asked for 1 more tool call after 2", err.message)
    assert.equal(3, err.value)
  end)

  it("token budgets, overridable per run", function()
    local model = function() return { text = "x", usage = { input_tokens = 600, output_tokens = 50 } } end
    local agent = lash.agent { model = model, limits = { max_input_tokens = 500 } }
    local ok, err = pcall(agent.run, agent, "go")
    assert.equal("max_input_tokens limit of 500 exceeded: 600 input tokens used", err.message)
    assert.equal("max_input_tokens", err.limit)
    ok, err = pcall(agent.run, agent, "go", { limits = { max_input_tokens = false, max_output_tokens = 10 } })
    assert.equal("max_output_tokens limit of 10 exceeded: 50 output tokens used", err.message)
    assert.equal("x", agent:run("go", { limits = { max_input_tokens = 1000 } }).output)
  end)
end)

describe("approvals", function()
  local deleted
  local delete = lash.tool { name = "delete", requires_approval = true,
    parameters = { type = "object", properties = { path = { type = "string" } }, required = { "path" } },
    handler = function(_, a) deleted[#deleted + 1] = a.path; return "deleted " .. a.path end }
  local read = lash.tool { name = "read", handler = function() return "contents" end,
    requires_approval = function(_, args) return args.path == "/etc/shadow" end,
    parameters = { type = "object", properties = { path = { type = "string" } } } }
  -- answers from the history, so a resumed run picks up where it paused
  local script = function()
    return function(m)
      if m[#m].parts[1].type == "text" then
        return { tool_calls = { { name = "delete", args = { path = "/tmp/a" }, id = "d1" },
                                { name = "read", args = { path = "/tmp/b" }, id = "r1" } } }
      end
      local r = results_of(m)
      return r[1].status .. ": " .. r[1].content .. " | " .. r[2].content
    end
  end
  before_each(function() deleted = {} end)

  it("without a callback the run ends with the pending calls, then resumes", function()
    local agent = lash.agent { model = script(), tools = { delete, read } }
    local events, on_event = collector()
    local res = agent:run("clean up", { on_event = on_event })
    assert.equal("approval_required", res.stop_reason)
    assert.same({ { id = "d1", name = "delete", args = { path = "/tmp/a" } } }, res.pending)
    assert.same({}, deleted, "no call of the turn ran")
    assert.same({ "run_start", "model_request", "usage", "tool_call", "tool_call", "approval_request", "run_end" },
                types_of(events))
    local history = json.decode(json.encode(res.messages))
    local res2 = agent:run(nil, { history = history, approvals = { d1 = true } })
    assert.equal("ok: deleted /tmp/a | contents", res2.output)
    assert.same({ "/tmp/a" }, deleted)
  end)

  it("a deny with a message reaches the model", function()
    local agent = lash.agent { model = script(), tools = { delete, read } }
    local res = agent:run("clean up")
    local res2 = agent:run(nil, { history = res.messages, approvals = { d1 = "Not that file." } })
    assert.equal("denied: Not that file. | contents", res2.output)
    assert.same({}, deleted)
    res2 = agent:run(nil, { history = res.messages, approvals = { d1 = false } })
    assert.equal("denied: The tool call was denied. | contents", res2.output)
  end)

  it("a callback can allow with edited arguments", function()
    local asked = {}
    local agent = lash.agent { model = script(), tools = { delete, read } }
    local res = agent:run("clean up", { approve = function(ctx, call)
      asked[#asked + 1] = call.name .. " " .. call.args.path
      return { allow = true, args = { path = "/tmp/safe" } }
    end })
    assert.equal("ok: deleted /tmp/safe | contents", res.output)
    assert.same({ "delete /tmp/a" }, asked)
  end)

  it("requires_approval may be a function of the arguments", function()
    local agent = lash.agent { tools = { read }, model = lash.script_model {
      { tool_calls = { { name = "read", args = { path = "/etc/shadow" }, id = "x" } } }, "done" } }
    local res = agent:run("go")
    assert.equal("approval_required", res.stop_reason)
    assert.equal("x", res.pending[1].id)
  end)

  it("a callback may wait for a host to answer later (a future)", function()
    local pending = {}
    local agent = lash.agent { model = script(), tools = { delete, read } }
    local task = agent:start("clean up", { approve = function(_, call)
      local f = lash.future()
      pending[call.id] = f
      return f:wait()
    end })
    -- the host answers on a later turn of the loop
    while not pending.d1 do lash.sleep(0.001) end
    pending.d1:set(false)
    assert.equal("denied: The tool call was denied. | contents", task:join().output)
  end)

  it("refuses a new prompt while calls wait for approval", function()
    local agent = lash.agent { model = script(), tools = { delete, read } }
    local res = agent:run("clean up")
    local ok, err = pcall(agent.run, agent, "something else", { history = res.messages })
    assert.is_false(ok)
    assert.matches("the history ends with tool calls that have no results", err.message, 1, true)
  end)

  it("edited arguments are validated", function()
    local agent = lash.agent { model = script(), tools = { delete, read } }
    local ok, err = pcall(agent.run, agent, "x", { approve = function() return { allow = true, args = { path = 5 } } end })
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "approval"))
  end)
end)

describe("instructions", function()
  it("are rendered per run against deps, run info and values, without changing the agent", function()
    local seen
    local agent = lash.agent {
      model = function(_, info) seen = info.instructions return "ok" end,
      instructions = { "You help {{ deps.user }} in {{ values.project }}.",
                       function(ctx) return "Run " .. ctx.run.id .. " step " .. ctx.run.step end },
      values = { project = "lash" },
    }
    agent:run("hi", { deps = { user = "Ada" } })
    assert.matches("^You help Ada in lash%.\n\nRun run_%d+ step 1$", seen)
    agent:run("hi", { deps = { user = "Bob" }, values = { project = "other" } })
    assert.matches("^You help Bob in other%.", seen)
    assert.equal("You help {{ deps.user }} in {{ values.project }}.", agent.instructions[1])
  end)

  it("fail the run on an undefined name, naming the template, line and name", function()
    local called = false
    local agent = lash.agent { model = function() called = true return "x" end,
      instructions = "Line one.\nHello {{ deps.usr }}!" }
    local ok, err = pcall(agent.run, agent, "hi", { deps = { user = "Ada" } })
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "template"))
    assert.equal("template 'instructions' line 2: undefined name 'deps.usr'", err.message)
    assert.is_false(called)
  end)
end)

describe("the test model", function()
  it("calls every tool with generated arguments and summarises the results", function()
    local res = lash.agent { model = "test", tools = { add } }:run("go")
    assert.equal('{"add":"0"}', res.output)
    assert.equal(2, res.usage.requests)
  end)
end)
