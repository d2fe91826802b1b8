-- lash.hooks: the named lifecycle hooks of a run, from the agent, a
-- capability and the run options, in that order; each can look, deny, edit
-- or replace; they may wait; an untrusted spec's run under its budget.
local lash = require "lash"
local spec = require "lash.spec"
local collector = require("helpers.events").collector
local of_type = require("helpers.events").of_type

local echo = lash.tool { name = "echo", description = "Echo a word.",
  parameters = { type = "object", properties = { word = { type = "string" } }, required = { "word" } },
  handler = function(_, args) return "echo:" .. args.word end }

local other = lash.tool { name = "other", description = "Another tool.",
  handler = function() return "other ran" end }

-- A model that calls echo{word=WORD} (and `other` when asked), then answers
-- with the last tool result it saw.
local function caller(word, also_other)
  return lash.script_model {
    function()
      local calls = { { name = "echo", args = { word = word }, id = "c1" } }
      if also_other then calls[2] = { name = "other", args = {}, id = "c2" } end
      return { tool_calls = calls }
    end,
    function(m)
      local out = {}
      for _, p in ipairs(m[#m].parts) do out[#out + 1] = p.name .. "=" .. p.status .. ":" .. p.content end
      return table.concat(out, " | ")
    end,
  }
end

describe("lifecycle hooks", function()
  it("refuse unknown names and bad entries, naming them", function()
    local ok, err = pcall(lash.agent, { model = "test", hooks = { before_tool_cal = function() end } })
    assert.is_false(ok)
    assert.matches("unknown hook 'before_tool_cal' %(known hooks: after_model_response", err)
    ok, err = pcall(lash.agent, { model = "test", hooks = { on_run_end = 5 } })
    assert.matches("hooks.on_run_end must be a function", err)
    ok, err = pcall(lash.agent, { model = "test", hooks = { on_run_end = { handler = print, tools = "x" } } })
    assert.matches("'tools' only applies to before_tool_call and after_tool_call", err)
    ok, err = pcall(lash.capability, { name = "c", hooks = { before_model_request = { "x" } } })
    assert.matches("hooks.before_model_request%[1%] must be a function", err)
    ok, err = pcall(function() lash.agent { model = "test" }:run("x", { hooks = { nope = print } }) end)
    assert.matches("agent:run: unknown hook 'nope'", err)
  end)

  it("before_tool_call denies with a message, edits arguments, and sees the earlier hook's edit", function()
    local seen = {}
    local a = lash.agent { model = caller("hello", true), tools = { echo, other },
      hooks = { before_tool_call = {
        { tools = "echo", handler = function(_, call) return { args = { word = call.args.word .. "-edited" } } end },
        function(ctx, call) seen[#seen + 1] = ctx.tool_name .. ":" .. (call.args.word or "") end,
      } } }
    local res = a:run("go", { hooks = { before_tool_call = function(_, call)
      if call.name == "other" then return "other is not allowed here" end
    end } })
    assert.same({ "echo:hello-edited", "other:" }, seen)
    assert.equal("echo=ok:echo:hello-edited | other=denied:other is not allowed here", res.output)
    assert.equal(1, res.usage.tool_calls)  -- the denied call did not run
  end)

  it("before_tool_call's edited arguments are checked against the tool's schema", function()
    local a = lash.agent { model = caller("x"), tools = { echo },
      hooks = { before_tool_call = function() return { args = { word = 5 } } end } }
    local ok, err = pcall(a.run, a, "go")
    assert.is_false(ok)
    assert.equal("hook", err.kind)
    assert.matches("edited the arguments of call 'c1' %(echo%) into ones the tool refuses", err.message)
  end)

  it("after_tool_call replaces the result the model and the events see", function()
    local events, on_event = collector()
    local a = lash.agent { model = caller("secret"), tools = { echo } }
    local res = a:run("go", { on_event = on_event, hooks = { after_tool_call = function(_, call, result)
      assert.equal("echo", call.name)
      assert.equal("secret", call.args.word)
      return (result.content:gsub("secret", "[redacted]"))
    end } })
    assert.equal("echo=ok:echo:[redacted]", res.output)
    assert.equal("echo:[redacted]", of_type(events, "tool_result")[1].content)
  end)

  it("before_model_request changes one request without changing the history; it may wait", function()
    local got
    local a = lash.agent { model = function(m, info)
      got = { n = #m, instructions = info.instructions }
      return "ok"
    end, instructions = "Be brief." }
    local res = a:run("hi", { history = { { role = "user", parts = { { type = "text", text = "old" } } },
                                          { role = "assistant", parts = { { type = "text", text = "older" } } } },
      hooks = { before_model_request = function(_, req)
        lash.sleep(0.001)
        assert.equal("Be brief.", req.instructions)
        return { instructions = req.instructions .. " Really.", messages = { req.messages[#req.messages] } }
      end } })
    assert.same({ n = 1, instructions = "Be brief. Really." }, got)
    assert.equal(4, #res.messages)
  end)

  it("before_model_request and after_model_response can stop the run (kind hook)", function()
    local a = lash.agent { model = function() return "fine" end }
    local ok, err = pcall(a.run, a, "x", { hooks = { before_model_request = function() return "no requests today" end } })
    assert.is_false(ok)
    assert.equal("hook", err.kind)
    assert.matches("no requests today", err.message)
    ok, err = pcall(a.run, a, "x", { hooks = { after_model_response = function() return false end } })
    assert.equal("hook", err.kind)
  end)

  it("after_model_response replaces what enters the history (a tool call dropped)", function()
    local a = lash.agent { model = caller("x", true), tools = { echo, other }, hooks = {
      after_model_response = function(_, resp)
        local keep = {}
        for _, p in ipairs(resp.parts) do if p.name ~= "other" then keep[#keep + 1] = p end end
        return { parts = keep }
      end } }
    local res = a:run("go")
    assert.equal("echo=ok:echo:x", res.output)
  end)

  it("come from a capability, run between the agent's and the run's, and on_run_end sees the outcome", function()
    local order, outcome = {}, nil
    local cap = lash.capability { name = "audit", hooks = {
      before_tool_call = function() order[#order + 1] = "capability" end,
      on_run_end = function(_, o) outcome = o end } }
    local a = lash.agent { model = caller("x"), tools = { echo }, capabilities = { cap },
      hooks = { before_tool_call = function() order[#order + 1] = "agent" end } }
    a:run("go", { hooks = { before_tool_call = function() order[#order + 1] = "run" end } })
    assert.same({ "agent", "capability", "run" }, order)
    assert.equal("complete", outcome.stop_reason)
    assert.equal("echo=ok:echo:x", outcome.output)
    -- a failed run's outcome carries the error; a hook error fails a run that succeeded
    local b = lash.agent { model = function() error("boom") end, hooks = { on_run_end = function(_, o) outcome = o end } }
    pcall(b.run, b, "x")
    assert.equal("error", outcome.stop_reason)
    assert.equal("model", outcome.error.kind)
    local c = lash.agent { model = function() return "ok" end, hooks = { on_run_end = function() error("audit failed") end } }
    local ok, err = pcall(c.run, c, "x")
    assert.is_false(ok)
    assert.matches("audit failed", tostring(err.message))
  end)

  it("of an untrusted spec run under its budget and cannot escape it", function()
    local text = [[return lash.agent{ model = lash.script_model{ {tool_calls = {{name = 'echo', args = {word = 'a'}, id = 'c1'}}}, 'done' },
      tools = { lash.tool{ name = 'echo', parameters = {type = 'object'}, handler = function() return 'x' end } },
      hooks = { before_tool_call = function() while true do end end } }]]
    local agent = assert(spec.load_string(text, "evil.lua"))
    local ok, err = pcall(agent.run, agent, "go")
    assert.is_false(ok)
    assert.equal("budget", err.kind)
    assert.matches("Lua instructions", err.message)
  end)
end)
