-- lash.subagent: agents as tools. Three sub-agents in one turn run
-- concurrently (their commands overlap in real jails), their events come
-- with paths, usage adds up and is bounded by the parent's limits,
-- cancelling the parent ends them and their commands, the sandbox is
-- shared or forked, depth and cycles are bounded, and a child's failure
-- comes back to the parent's model.
local lash = require "lash"
local json = require "lash.json"
local collector = require("helpers.events").collector
local of_type = require("helpers.events").of_type

local function results_of(messages)
  for i = #messages, 1, -1 do
    local m = messages[i]
    if m.role == "user" and m.parts[1] and m.parts[1].type == "tool_result" then return m.parts end
  end
end

-- A parent whose model calls `tool` once per input in one turn, then
-- answers with the results it got, joined by " | ".
local function fan_out(toolname, inputs)
  return lash.script_model {
    function()
      local calls = {}
      for i, x in ipairs(inputs) do calls[i] = { name = toolname, args = { input = x }, id = "c" .. i } end
      return { tool_calls = calls, usage = { input_tokens = 10, output_tokens = 5 } }
    end,
    function(m)
      local out = {}
      for _, p in ipairs(results_of(m)) do out[#out + 1] = p.content end
      return { text = table.concat(out, " | "), usage = { input_tokens = 10, output_tokens = 5 } }
    end,
  }
end

-- A child that answers "<prefix>: <its prompt>" after one tool call.
local function child_agent(name, prefix, extra)
  local def = {
    name = name, description = "Says what it was asked.",
    model = lash.script_model {
      function(m) return { tool_calls = { { name = "note", args = { text = m[1].parts[1].text } } },
                           usage = { input_tokens = 100, output_tokens = 20 } } end,
      function(m) return { text = prefix .. ": " .. m[1].parts[1].text, usage = { input_tokens = 100, output_tokens = 20 } } end,
    },
    tools = { lash.tool { name = "note", parameters = { type = "object", properties = { text = { type = "string" } } },
      handler = function(_, a) lash.sleep(0.01) return "noted " .. a.text end } },
  }
  for k, v in pairs(extra or {}) do def[k] = v end
  return lash.agent(def)
end

describe("agent:as_tool", function()
  it("runs each call as its own run; events carry paths; usage adds up into the parent", function()
    local child = child_agent("helper", "done")
    local events, on_event = collector()
    local parent = lash.agent { name = "boss", model = fan_out("helper", { "a", "b", "c" }),
                                tools = { child:as_tool() } }
    local res = parent:run("split it", { on_event = on_event })
    assert.equal("done: a | done: b | done: c", res.output)
    -- 2 requests of its own, 2 per child; tokens likewise
    assert.equal(2 + 3 * 2, res.usage.requests)
    assert.equal(20 + 3 * 200, res.usage.input_tokens)
    assert.equal(10 + 3 * 40, res.usage.output_tokens)
    assert.equal(3 + 3, res.usage.tool_calls)
    -- every child event has its path; the parent's have none
    local child_starts = {}
    for _, e in ipairs(events) do
      if e.path then
        assert.equal("boss", e.path[1])
        assert.matches("^helper#c%d$", e.path[2])
        if e.type == "run_start" then child_starts[#child_starts + 1] = e.path[2] end
      end
    end
    table.sort(child_starts)
    assert.same({ "helper#c1", "helper#c2", "helper#c3" }, child_starts)
    local ends = of_type(events, "run_end")
    assert.equal(4, #ends)
    assert.is_nil(ends[#ends].path)
    -- the child's transcript stays with the call's result
    local parts = results_of(res.messages)
    assert.equal("helper", parts[1].subagent.agent)
    assert.equal("complete", parts[1].subagent.stop_reason)
    assert.equal(4, #parts[1].subagent.messages)
    assert.equal(200, parts[1].subagent.usage.input_tokens)
  end)

  it("runs the calls of one turn concurrently, at most max_concurrent_tools at a time", function()
    local active, peak = 0, 0
    local slow = lash.agent { name = "slow", model = function()
      active = active + 1
      peak = math.max(peak, active)
      lash.sleep(0.05)
      active = active - 1
      return "ok"
    end }
    local parent = lash.agent { model = fan_out("slow", { "1", "2", "3", "4" }), tools = { slow:as_tool() } }
    parent:run("go")
    assert.equal(4, peak)
    peak = 0
    parent:run("go", { limits = { max_concurrent_tools = 2 } })
    assert.equal(2, peak)
  end)

  it("returns a structured answer as JSON, or what output() makes of the result; input() makes the prompt", function()
    local child = lash.agent { name = "extractor", model = function(m)
      return json.encode { city = m[1].parts[1].text, n = 3 }
    end, output = { type = "object", properties = { city = { type = "string" }, n = { type = "integer" } },
                    required = { "city", "n" } } }
    local parent = lash.agent { model = fan_out("extractor", { "Paris" }), tools = { child:as_tool() } }
    assert.equal('{"city":"Paris","n":3}', parent:run("go").output)
    local t = child:as_tool { name = "city_of", parameters = { type = "object",
      properties = { place = { type = "string" } }, required = { "place" } },
      input = function(args) return args.place:upper() end,
      output = function(r) return r.output.city .. "!" end }
    local p2 = lash.agent { model = lash.script_model {
      { tool_calls = { { name = "city_of", args = { place = "rome" } } } },
      function(m) return results_of(m)[1].content end } , tools = { t } }
    assert.equal("ROME!", p2:run("go").output)
  end)

  it("bounds the children by the parent's token limits, and fails the parent when they spend them", function()
    local child = child_agent("helper", "done")
    local parent = lash.agent { model = fan_out("helper", { "a", "b", "c" }), tools = { child:as_tool() },
                                limits = { max_total_tokens = 400 } }
    local ok, err = pcall(parent.run, parent, "go")
    assert.is_false(ok)
    assert.equal("limit", err.kind)
    assert.equal("max_total_tokens", err.limit)
    assert.matches("by agent 'agent' and its sub-agents", err.message, 1, true)
    -- a child's own limit is the child's failure: the parent's model hears of it
    local tight = child_agent("tight", "x", { limits = { max_total_tokens = 50 } })
    local p2 = lash.agent { model = fan_out("tight", { "a" }), tools = { tight:as_tool() } }
    local res = p2:run("go")
    assert.matches("Sub%-agent 'tight' failed %(limit%): max_total_tokens limit of 50 exceeded", res.output)
  end)

  it("gives a failing child's error to the parent's model, or fails the parent with on_failure = 'raise'", function()
    local broken = lash.agent { name = "broken", model = function() error("no model today") end }
    local p = lash.agent { model = fan_out("broken", { "x" }), tools = { broken:as_tool() } }
    assert.matches("^Sub%-agent 'broken' failed %(model%): ", p:run("go").output)
    local p2 = lash.agent { model = fan_out("broken", { "x" }), tools = { broken:as_tool { on_failure = "raise" } } }
    local ok, err = pcall(p2.run, p2, "go")
    assert.is_false(ok)
    assert.equal("model", err.kind)
    local p3 = lash.agent { model = fan_out("broken", { "x" }),
                            tools = { broken:as_tool { on_failure = "The helper is out; do it yourself." } } }
    assert.equal("The helper is out; do it yourself.", p3:run("go").output)
  end)

  it("cancels the children when the parent is cancelled", function()
    local started, finished = 0, 0
    local sleeper = lash.agent { name = "sleeper", model = function()
      started = started + 1
      lash.sleep(30)
      finished = finished + 1
      return "late"
    end }
    local parent = lash.agent { model = fan_out("sleeper", { "1", "2", "3" }), tools = { sleeper:as_tool() } }
    local events, on_event = collector()
    local task = parent:start("go", { on_event = on_event })
    local t0 = lash.now()
    lash.spawn(function()
      while started < 3 do lash.sleep(0.01) end
      task:cancel()
    end)
    local ok, err = task:wait()
    assert.is_false(ok)
    assert.equal("cancelled", err.kind)
    assert.is_true(lash.now() - t0 < 5)
    assert.equal(3, started)
    assert.equal(0, finished)
    local child_ends = 0
    for _, e in ipairs(of_type(events, "run_end")) do
      if e.path then
        child_ends = child_ends + 1
        assert.equal("cancelled", e.stop_reason)
      end
    end
    assert.equal(3, child_ends)
  end)

  it("bounds the depth with limits.max_depth (default 3)", function()
    -- a chain a -> b -> c -> d -> e of agents each calling the next
    local function level(name, next_agent)
      return lash.agent { name = name, tools = next_agent and { next_agent:as_tool() } or nil,
        model = lash.script_model {
          function() if next_agent then return { tool_calls = { { name = next_agent.name, args = { input = "go" } } } } end
                     return "bottom" end,
          function(m) return name .. "(" .. results_of(m)[1].content .. ")" end } }
    end
    local e = level("e")
    local d = level("d", e)
    local c = level("c", d)
    local b = level("b", c)
    local a = level("a", b)
    local ok, err = pcall(a.run, a, "go")
    assert.is_false(ok)
    assert.equal("limit", err.kind)
    assert.equal("max_depth", err.limit)
    assert.matches("max_depth limit of 3 reached: agent 'a'", err.message)
    assert.equal("a(b(c(d(bottom))))", a:run("go", { limits = { max_depth = 4 } }).output)
    assert.equal("b(c(d(bottom)))", b:run("go").output)
  end)

  it("refuses a cycle when the agent is built", function()
    local a = lash.agent { name = "a", model = "test" }
    local b = lash.agent { name = "b", model = "test", tools = { a:as_tool() } }
    -- make a reach b after the fact, then build something that closes the loop
    a.own_toolsets[1] = lash.toolset { name = "x", tools = { b:as_tool() } }
    local ok, err = pcall(lash.agent, { name = "c", model = "test", tools = { a:as_tool() } })
    assert.is_false(ok)
    assert.matches("a cycle of sub%-agents: a %-> b %-> a", err)
  end)

  it("checks its options", function()
    local a = lash.agent { name = "a", model = "test" }
    local ok, err = pcall(a.as_tool, a, { share_sandbox = "copy" })
    assert.is_false(ok)
    assert.matches("share_sandbox must be true, false or \"fork\"", err)
    ok, err = pcall(a.as_tool, a, { nmae = "x" })
    assert.matches("unknown field 'nmae'", err)
    assert.equal("research_bot", lash.agent { name = "Research Bot", model = "test" }:as_tool().name)
  end)

  it("runs the parent's run-level hooks on the children's tool calls", function()
    local child = child_agent("helper", "done")
    local seen = {}
    local parent = lash.agent { model = fan_out("helper", { "a" }), tools = { child:as_tool() } }
    local res = parent:run("go", { hooks = { before_tool_call = function(ctx, call)
      seen[#seen + 1] = call.name
      if call.name == "note" then return "no notes" end
    end } })
    assert.same({ "helper", "note" }, seen)
    assert.equal("denied", res.messages[3].parts[1].subagent.messages[3].parts[1].status)
  end)

  it("budgets the input and output functions an untrusted spec gives as_tool", function()
    local text = [[
      local child = lash.agent{ name = 'child', model = lash.script_model{ 'hi' } }
      return lash.agent{ model = lash.script_model{ {tool_calls = {{name = 'child', args = {input = 'x'}}}}, 'done' },
        tools = { child:as_tool{ input = function(a) while true do end end } } }]]
    local agent = assert(require("lash.spec").load_string(text, "evil.lua"))
    local ok, err = pcall(agent.run, agent, "go")
    assert.is_false(ok)
    assert.equal("budget", err.kind)
  end)
end)

---------------------------------------------------------------------------
-- The sandbox between them, in real local jails

local jail_ok, jail_why = lash.sandbox.probe { backend = "local" }
local it_local = jail_ok and it or function(name)
  it(name, function() pending(name .. " (skipped: " .. tostring(jail_why) .. ")") end)
end

describe("sub-agents and the sandbox", function()
  local root
  setup(function()
    root = os.tmpname()
    os.remove(root)
    assert(os.execute("mkdir -p '" .. root .. "' && chmod 711 '" .. root .. "'"))
  end)
  teardown(function() os.execute("rm -rf '" .. root .. "'") end)

  -- a child that runs one command (its prompt) and answers with the output
  local function runner(name, share, extra_caps)
    local child = lash.agent { name = name, capabilities = extra_caps, model = lash.script_model {
      function(m) return { tool_calls = { { name = "run_command", args = { command = m[1].parts[1].text } } } } end,
      function(m) return results_of(m)[1].content end } }
    return child:as_tool { share_sandbox = share }
  end

  it_local("three children in the parent's sandbox: their commands overlap, they see its files", function()
    local t = runner("worker", true)
    local cmd = "cat shared.txt; date +%s%N; sleep 0.4; date +%s%N"
    local parent = lash.agent { capabilities = { lash.sandbox_capability { state_root = root } },
      tools = { t }, model = lash.script_model {
        { tool_calls = { { name = "run_command", args = { command = "echo from-parent > shared.txt" } } } },
        { tool_calls = { { name = "worker", args = { input = cmd }, id = "w1" },
                         { name = "worker", args = { input = cmd }, id = "w2" },
                         { name = "worker", args = { input = cmd }, id = "w3" } } },
        function(m)
          local out = {}
          for _, p in ipairs(results_of(m)) do out[#out + 1] = p.content end
          return table.concat(out, "\n====\n")
        end } }
    local res = parent:run("go")
    local starts, ends, n = {}, {}, 0
    for block in (res.output .. "\n====\n"):gmatch("(.-)\n====\n") do
      n = n + 1
      assert.matches("from%-parent", block)
      local a, b = block:match("(%d%d%d%d%d%d%d%d%d%d+)%s+(%d%d%d%d%d%d%d%d%d%d+)")
      starts[#starts + 1], ends[#ends + 1] = tonumber(a), tonumber(b)
    end
    assert.equal(3, n)
    -- every command started before any of them ended: they overlapped
    assert.is_true(math.max(table.unpack(starts)) < math.min(table.unpack(ends)))
    assert.same({}, lash.sandbox.list { state_root = root })
  end)

  it_local("a forked child works on a copy: its writes do not reach the parent; an own one starts empty", function()
    local fork = runner("forker", "fork")
    local own = runner("loner", false, { lash.sandbox_capability { state_root = root } })
    local parent = lash.agent { capabilities = { lash.sandbox_capability { state_root = root } },
      tools = { fork, own }, model = lash.script_model {
        { tool_calls = { { name = "run_command", args = { command = "echo original > f.txt" } } } },
        { tool_calls = { { name = "forker", args = { input = "cat f.txt; echo changed > f.txt; cat f.txt" } },
                         { name = "loner", args = { input = "cat f.txt || echo missing" } } } },
        { tool_calls = { { name = "run_command", args = { command = "cat f.txt" } } } },
        function(m)
          return results_of(m)[1].content
        end } }
    local events, on_event = collector()
    local res = parent:run("go", { on_event = on_event })
    assert.matches("original", res.output)
    assert.not_matches("changed", res.output)
    local child_results = {}
    for _, e in ipairs(of_type(events, "tool_result")) do
      if e.path then child_results[e.path[2]:match("^(%a+)")] = e.content end
    end
    assert.matches("original.*changed", child_results.forker)
    assert.matches("missing", child_results.loner)
    assert.same({}, lash.sandbox.list { state_root = root })
    -- the snapshot that carried the files to the fork is not left behind
    local left = {}
    for name in io.popen("ls -A " .. root .. "/snapshots 2>/dev/null"):lines() do left[#left + 1] = name end
    assert.same({}, left)
  end)

  it_local("cancelling the parent ends the children's commands", function()
    local t = runner("waiter", true)
    local parent = lash.agent { capabilities = { lash.sandbox_capability { state_root = root } },
      tools = { t }, model = fan_out("waiter", { "sleep 30", "sleep 30", "sleep 30" }) }
    local running = 0
    local task = parent:start("go", { on_event = function(e)
      if e.path and e.type == "tool_call" then running = running + 1 end
    end })
    local t0 = lash.now()
    lash.spawn(function()
      while running < 3 do lash.sleep(0.01) end
      lash.sleep(0.2)
      task:cancel()
    end)
    local ok, err = task:wait()
    assert.is_false(ok)
    assert.equal("cancelled", err.kind)
    assert.is_true(lash.now() - t0 < 10)
    assert.same({}, lash.sandbox.list { state_root = root })
  end)
end)

---------------------------------------------------------------------------
-- The same on Modal (the fake Modal server speaking its gRPC API)

local fake = dofile("tests/modal_fake/fake.lua")
local modal_why = fake.unavailable()
local it_modal = (not modal_why) and it or function(name)
  it(name, function() pending(name .. " (skipped: " .. tostring(modal_why) .. ")") end)
end

describe("sub-agents and a Modal sandbox", function()
  local srv
  setup(function() if not modal_why then srv = assert(fake.start {}) end end)
  teardown(function()
    if srv then
      local left = srv:running()
      srv:stop()
      assert.same({}, left, "sandboxes left running")
    end
  end)

  it_modal("a shared child sees the parent's files; a forked one works on a snapshot of them", function()
    local function runner(name, share)
      local child = lash.agent { name = name, model = lash.script_model {
        function(m) return { tool_calls = { { name = "run_command", args = { command = m[1].parts[1].text } } } } end,
        function(m) return results_of(m)[1].content end } }
      return child:as_tool { share_sandbox = share }
    end
    local cap = lash.sandbox_capability(srv:opts { workdir = "/work" })
    local parent = lash.agent { capabilities = { cap }, tools = { runner("sharer", true), runner("forker", "fork") },
      model = lash.script_model {
        { tool_calls = { { name = "write_file", args = { path = "/work/f.txt", content = "original\n" } } } },
        { tool_calls = { { name = "sharer", args = { input = "cat /work/f.txt" } },
                         { name = "forker", args = { input = "cat /work/f.txt; echo changed > /work/f.txt" } } } },
        { tool_calls = { { name = "read_file", args = { path = "/work/f.txt" } } } },
        function(m) return results_of(m)[1].content end } }
    local events, on_event = collector()
    local res = parent:run("go", { on_event = on_event })
    assert.matches("original", res.output)
    assert.not_matches("changed", res.output)
    local seen = {}
    for _, e in ipairs(of_type(events, "tool_result")) do
      if e.path then seen[e.path[2]:match("^(%a+)")] = e.content end
    end
    assert.matches("original", seen.sharer)
    assert.matches("original", seen.forker)
    assert.is_true(#srv:calls("TaskSnapshotFilesystem") + #srv:calls("SandboxSnapshotFs") >= 1)
  end)
end)
