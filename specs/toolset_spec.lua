-- Toolsets, capabilities and composition (prefix, filter, rename, wrap),
-- exercised through real runs with a scripted model.
local lash = require "lash"

-- A model that records what it was offered and plays a script.
local function recorder(script)
  local seen = { tools = {}, instructions = {} }
  local model = function(messages, info)
    local names = {}
    for i, d in ipairs(info.tools) do names[i] = d.name end
    seen.tools[info.step] = names
    seen.instructions[info.step] = info.instructions
    seen.messages = messages
    local r = script[info.step]
    if type(r) == "function" then return r(messages, info) end
    return r or "done"
  end
  return model, seen
end

local function last_results(messages)
  for i = #messages, 1, -1 do
    local m = messages[i]
    if m.role == "user" and m.parts[1].type == "tool_result" then return m.parts end
  end
end

local function echo_tool(name, extra)
  local def = { name = name, description = "echo " .. name,
                parameters = { type = "object", properties = { x = { type = "string" } } },
                handler = function(ctx, args) return ctx.tool_name .. ":" .. tostring(args.x) end }
  for k, v in pairs(extra or {}) do def[k] = v end
  return lash.tool(def)
end

describe("lash.toolset", function()
  it("refuses unknown fields and non-tools", function()
    assert.has_error(function() lash.toolset { name = "x", tols = {} } end,
      "lash.toolset: unknown field 'tols' (known fields: close, description, for_run, name, open, tools)")
    local ok, err = pcall(lash.toolset, { name = "x", tools = { 5 } })
    assert.is_false(ok)
    assert.matches("lash.toolset 'x': tools[1] must be a lash.tool or a tool table, got number", err, 1, true)
  end)

  it("accepts plain tool tables and dynamic tool lists", function()
    local model, seen = recorder { "hi" }
    local ts = lash.toolset { name = "dyn", tools = function(ctx)
      return { { name = "for_" .. ctx.deps.who, handler = function() return "x" end } }
    end }
    lash.agent { model = model, toolsets = { ts } }:run("go", { deps = { who = "ada" } })
    assert.same({ "for_ada" }, seen.tools[1])
  end)
end)

describe("lash.capability", function()
  it("blames the caller's line for bad instructions", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() lash.capability { name = "c", instructions = { "a", 5 } } end)
    assert.is_false(ok)
    assert.equal("specs/toolset_spec.lua:" .. line .. ": lash.capability 'c': instructions[2] must be a string "
      .. "or a function(ctx), got number", err)
  end)
end)

describe("tool name clashes", function()
  it("fail before the first model call with both toolsets named", function()
    local called = false
    local files = lash.capability { name = "Files", tools = { echo_tool("read_file") } }
    local agent = lash.agent { model = function() called = true return "x" end,
                               tools = { echo_tool("read_file") }, capabilities = { files } }
    local ok, err = pcall(agent.run, agent, "go")
    assert.is_false(ok)
    assert.is_true(lash.is_error(err, "config"))
    assert.equal("Files defines a tool whose name conflicts with existing tool from the agent's tools: "
      .. "'read_file'. Rename the tool, or give one of them a prefix (lash.prefix_tools in Lua, PrefixTools in "
      .. "a YAML or JSON spec, tool_prefix on an MCP server).", err.message)
    assert.is_false(called)
  end)

  it("tell two toolsets of the same name apart", function()
    local agent = lash.agent { model = "test", capabilities = {
      lash.capability { name = "Files", tools = { echo_tool("read_file") } },
      lash.capability { name = "Files", tools = { echo_tool("read_file") } } } }
    local ok, err = pcall(agent.run, agent, "go")
    assert.is_false(ok)
    assert.matches("^Files %(toolset 2%) defines a tool whose name conflicts with existing tool from Files "
      .. "%(toolset 1%): 'read_file'", err.message)
  end)

  it("are resolved by lash.prefix_tools", function()
    local model, seen = recorder { "ok" }
    local files = lash.capability { name = "Files", tools = { echo_tool("read_file") } }
    lash.agent { model = model, tools = { echo_tool("read_file") },
                 capabilities = { lash.prefix_tools { capability = files, prefix = "box" } } }:run("go")
    assert.same({ "read_file", "box_read_file" }, seen.tools[1])
  end)
end)

describe("lash.prefix_tools", function()
  it("renames tools, strips the prefix on calls, and renders instructions with the exposed names", function()
    local model, seen = recorder {
      { tool_calls = { { name = "box_run", args = { x = "ls" } } } },
      "done",
    }
    local cap = lash.capability { name = "Shell", tools = { echo_tool("run") },
      instructions = "Use `{{ tools.run }}` to run commands." }
    local res = lash.agent { model = model,
      capabilities = { lash.prefix_tools { capability = cap, prefix = "box" } } }:run("go")
    assert.same({ "box_run" }, seen.tools[1])
    assert.equal("Use `box_run` to run commands.", seen.instructions[1])
    assert.equal("run:ls", last_results(res.messages)[1].content)
    -- the capability itself is unchanged
    assert.equal("Use `{{ tools.run }}` to run commands.", cap:get_instructions()[1])
  end)

  it("works on a toolset and composes", function()
    local model, seen = recorder { "ok" }
    local ts = lash.toolset { name = "t", tools = { echo_tool("a") } }
    lash.agent { model = model, toolsets = {
      lash.prefix_tools { toolset = lash.prefix_tools { toolset = ts, prefix = "in" }, prefix = "out" } } }:run("go")
    assert.same({ "out_in_a" }, seen.tools[1])
  end)

  it("checks its options", function()
    assert.has_error(function() lash.prefix_tools { prefix = "x" } end,
      "lash.prefix_tools: give 'capability' (or 'toolset') to wrap")
    assert.has_error(function() lash.prefix_tools { capability = lash.capability {}, prefix = "" } end,
      "lash.prefix_tools: 'prefix' must be a non-empty string, got ")
    assert.has_error(function() lash.prefix_tools { capability = lash.capability {}, prefx = "a" } end,
      "lash.prefix_tools: unknown option 'prefx' (known: capability, prefix, toolset)")
  end)
end)

describe("lash.filter_tools", function()
  local cap = lash.capability { name = "Many", tools = { echo_tool("a"), echo_tool("b"), echo_tool("c") } }

  it("keeps tools by name", function()
    local model, seen = recorder { "ok" }
    lash.agent { model = model, capabilities = { lash.filter_tools { capability = cap, keep = { "a", "c" } } } }:run("go")
    assert.same({ "a", "c" }, seen.tools[1])
  end)

  it("drops tools by predicate", function()
    local model, seen = recorder { "ok" }
    lash.agent { model = model, capabilities = {
      lash.filter_tools { capability = cap, drop = function(t) return t.name == "b" end } } }:run("go")
    assert.same({ "a", "c" }, seen.tools[1])
  end)

  it("needs exactly one of keep and drop", function()
    local msg = "give exactly one of 'keep' or 'drop'"
    local ok, err = pcall(lash.filter_tools, { capability = cap })
    assert.is_false(ok)
    assert.matches(msg, err, 1, true)
    ok, err = pcall(lash.filter_tools, { capability = cap, keep = {}, drop = {} })
    assert.is_false(ok)
    assert.matches(msg, err, 1, true)
  end)
end)

describe("lash.rename_tool", function()
  it("exposes one tool under a new name; instructions follow", function()
    local model, seen = recorder {
      { tool_calls = { { name = "sh", args = { x = "1" } } } },
      "ok",
    }
    local cap = lash.capability { name = "Shell", tools = { echo_tool("run_command"), echo_tool("other") },
                                  instructions = "Run with {{ tools.run_command }}." }
    local res = lash.agent { model = model, capabilities = {
      lash.rename_tool { capability = cap, from = "run_command", to = "sh" } } }:run("go")
    assert.same({ "sh", "other" }, seen.tools[1])
    assert.equal("Run with sh.", seen.instructions[1])
    assert.equal("sh:1", last_results(res.messages)[1].content)
  end)

  it("an instruction naming a filtered-out tool fails clearly", function()
    local cap = lash.capability { name = "Shell", tools = { echo_tool("run_command") },
                                  instructions = "Run with {{ tools.run_command }}." }
    local agent = lash.agent { model = function() return "x" end, capabilities = {
      lash.filter_tools { capability = cap, drop = { "run_command" } } } }
    local ok, err = pcall(agent.run, agent, "go")
    assert.is_false(ok)
    assert.equal("template 'Shell instructions' line 1: undefined name 'tools.run_command'", err.message)
  end)
end)

describe("lash.wrap_tools", function()
  it("can change arguments, post-process results and deny", function()
    local model = lash.script_model {
      { tool_calls = { { name = "a", args = { x = "in" } }, { name = "b", args = { x = "secret" } } } },
      "done",
    }
    local seen_tools = {}
    local cap = lash.capability { name = "W", tools = { echo_tool("a"), echo_tool("b") } }
    local wrapped = lash.wrap_tools { capability = cap, wrap = function(ctx, t, args, call)
      seen_tools[#seen_tools + 1] = t.name
      if args.x == "secret" then return "denied by policy" end
      return "[" .. call { x = args.x .. "!" } .. "]"
    end }
    local res = lash.agent { model = model, capabilities = { wrapped } }:run("go")
    local r = last_results(res.messages)
    assert.equal("[a:in!]", r[1].content)
    assert.equal("denied by policy", r[2].content)
    table.sort(seen_tools)
    assert.same({ "a", "b" }, seen_tools)
  end)

  it("can raise a retry for the model", function()
    local model = lash.script_model {
      { tool_calls = { { name = "a", args = { x = "bad" } } } },
      "done",
    }
    local cap = lash.toolset { name = "W", tools = { echo_tool("a") } }
    local res = lash.agent { model = model, toolsets = { lash.wrap_tools { toolset = cap,
      wrap = function() lash.retry("x must be good") end } } }:run("go")
    local r = last_results(res.messages)[1]
    assert.equal("retry", r.status)
    assert.equal("x must be good\n\nFix the errors and try again.", r.content)
  end)
end)

describe("toolset lifecycle", function()
  local function tracked(name, log, fail_open)
    return lash.toolset { name = name, tools = { echo_tool("t_" .. name) },
      open = function() log[#log + 1] = "open " .. name; if fail_open then error("cannot open " .. name, 0) end end,
      close = function(_, err) log[#log + 1] = "close " .. name .. (err and (" (" .. err.kind .. ")") or "") end }
  end

  it("opens in order before the first model call and closes in reverse", function()
    local log = {}
    local model = function() log[#log + 1] = "model" return "done" end
    lash.agent { model = model, toolsets = { tracked("a", log), tracked("b", log), tracked("c", log) } }:run("go")
    assert.same({ "open a", "open b", "open c", "model", "close c", "close b", "close a" }, log)
  end)

  it("a failure part-way closes what was opened and never calls the model", function()
    local log = {}
    local model = function() log[#log + 1] = "model" return "done" end
    local agent = lash.agent { model = model, toolsets = { tracked("a", log), tracked("b", log, true), tracked("c", log) } }
    local ok, err = pcall(agent.run, agent, "go")
    assert.is_false(ok)
    assert.matches("cannot open b", err.message, 1, true)
    assert.same({ "open a", "open b", "close a (error)" }, log)
  end)

  it("capabilities can make a fresh instance per run", function()
    local made = 0
    local cap = lash.capability { name = "Counter", for_run = function(ctx)
      made = made + 1
      local n = 0
      return lash.capability { name = "Counter", instructions = "instance " .. made,
        tools = { { name = "bump", handler = function() n = n + 1; lash.sleep(0.001); return n end } } }
    end }
    local model = lash.script_model {
      { tool_calls = { { name = "bump" } } },
      { tool_calls = { { name = "bump" } } },
      function(messages) return last_results(messages)[1].content end,
    }
    local agent = lash.agent { model = model, capabilities = { cap } }
    local t1, t2 = agent:start("go"), agent:start("go")
    assert.equal("2", t1:join().output)
    assert.equal("2", t2:join().output)
    assert.equal(2, made)
  end)

  it("capability fields can be templated per run with lash.render_fields", function()
    local seen
    local cap = lash.capability { name = "Box", for_run = function(ctx)
      seen = lash.render_fields(ctx, { attach_to = "{{ deps.sandbox }}" }, "Box")
    end }
    lash.agent { model = function() return "x" end, capabilities = { cap } }:run("go", { deps = { sandbox = "sb-42" } })
    assert.same({ attach_to = "sb-42" }, seen)
  end)
end)
