-- lash.guardrails: input guardrails on the prompt (alongside the first
-- model request by default, or before it), output guardrails on the
-- answer; a tripwire ends the run with kind "guardrail".
local lash = require "lash"
local collector = require("helpers.events").collector
local of_type = require("helpers.events").of_type

describe("guardrails", function()
  it("refuse what they cannot use, naming it", function()
    local ok, err = pcall(lash.agent, { model = "test", guardrails = { inptu = {} } })
    assert.is_false(ok)
    assert.matches("unknown side 'inptu'", err)
    ok, err = pcall(lash.agent, { model = "test", guardrails = { input = { 5 } } })
    assert.matches("guardrails.input%[1%] must be a function", err)
    ok, err = pcall(lash.agent, { model = "test", guardrails = { output = { { chek = print } } } })
    assert.matches("unknown field 'chek'", err)
  end)

  it("an input tripwire running alongside the first request cancels it and ends the run", function()
    local model_started, model_finished = false, false
    local a = lash.agent { model = function()
      model_started = true
      lash.sleep(5)
      model_finished = true
      return "expensive answer"
    end, guardrails = { input = { function(_, text)
      lash.sleep(0.05)
      if text:find("homework") then return "Math homework is off-topic." end
    end } } }
    local events, on_event = collector()
    local t0 = lash.now()
    local ok, err = pcall(a.run, a, "Do my math homework", { on_event = on_event })
    assert.is_false(ok)
    assert.equal("guardrail", err.kind)
    assert.equal("input", err.side)
    assert.matches("the input guardrail 'input guardrail 1' tripped: Math homework is off%-topic.", err.message)
    assert.is_true(model_started)
    assert.is_false(model_finished)
    assert.is_true(lash.now() - t0 < 2)
    local g = of_type(events, "guardrail")
    assert.equal(1, #g)
    assert.is_true(g[1].tripped)
    assert.equal("guardrail", of_type(events, "run_end")[1].error.kind)
  end)

  it("no tool call runs before a slow parallel input guardrail has passed", function()
    local order = {}
    local a = lash.agent {
      model = lash.script_model { { tool_calls = { { name = "t", args = {} } } }, "done" },
      tools = { lash.tool { name = "t", handler = function() order[#order + 1] = "tool" return "x" end } },
      guardrails = { input = { function() lash.sleep(0.1) order[#order + 1] = "guardrail" end } } }
    assert.equal("done", a:run("go").output)
    assert.same({ "guardrail", "tool" }, order)
  end)

  it("run_in_parallel = false checks before any request and may replace the prompt", function()
    local requests, seen = 0, nil
    local a = lash.agent { model = function(m) requests = requests + 1 seen = m[1].parts[1].text return "ok" end,
      guardrails = { input = {
        { name = "redact", run_in_parallel = false, check = function(_, t) return { replace = (t:gsub("%d%d%d%-%d%d%-%d%d%d%d", "[ssn]")) } end },
        { name = "block", run_in_parallel = false, check = function(_, t) if t:find("forbidden") then return false end end },
      } } }
    local res = a:run("my ssn is 123-45-6789")
    assert.equal("my ssn is [ssn]", seen)
    assert.equal("my ssn is [ssn]", res.messages[1].parts[1].text)
    local ok, err = pcall(a.run, a, "forbidden words")
    assert.is_false(ok)
    assert.equal("guardrail", err.kind)
    assert.equal(1, requests)
    assert.matches("'block' tripped: no reason given", err.message)
  end)

  it("output guardrails trip, replace the answer, or send the model back to try again", function()
    local n = 0
    local a = lash.agent { model = function() n = n + 1 return n == 1 and "no sources" or "see [1]" end,
      guardrails = { output = { function(_, out) if not out:find("%[%d%]") then return { retry = "Cite a source." } end end,
                                function(_, out) return { replace = out .. " (checked)" } end } } }
    local res = a:run("q")
    assert.equal("see [1] (checked)", res.output)
    assert.equal("Cite a source.\n\nFix the errors and try again.", res.messages[3].parts[1].text)
    local b = lash.agent { model = function() return "SSN 123" end,
                           guardrails = { output = { function(_, out) if out:find("SSN") then return { tripwire = "personal data" } end end } } }
    local ok, err = pcall(b.run, b, "q")
    assert.is_false(ok)
    assert.equal("guardrail", err.kind)
    assert.equal("output", err.side)
    assert.matches("personal data", err.message)
  end)

  it("an agent can be a guardrail; its usage counts in the run", function()
    local checker = lash.agent { name = "checker", model = function(m)
      local bad = m[1].parts[1].text:find("attack") ~= nil
      return require("lash.json").encode { tripwire_triggered = bad, reason = bad and "an attack" or "fine" }
    end }
    local a = lash.agent { model = function() return "ok" end, guardrails = { input = { checker } } }
    local res = a:run("hello")
    assert.equal("ok", res.output)
    assert.equal(2, res.usage.requests)
    local ok, err = pcall(a.run, a, "plan an attack")
    assert.is_false(ok)
    assert.equal("guardrail", err.kind)
    assert.matches("'checker' tripped: an attack", err.message)
  end)

  it("input guardrails belong to the first agent, output guardrails to the one that answers", function()
    local calls = {}
    local b = lash.agent { name = "b", model = function() return "from b" end,
      guardrails = { input = { function() calls[#calls + 1] = "b input" end },
                     output = { function() calls[#calls + 1] = "b output" end } } }
    local a = lash.agent { name = "a", handoffs = { b },
      model = function() return { tool_calls = { { name = "transfer_to_b", args = {} } } } end,
      guardrails = { input = { function() calls[#calls + 1] = "a input" end },
                     output = { function() calls[#calls + 1] = "a output" end } } }
    assert.equal("from b", a:run("x").output)
    assert.same({ "a input", "b output" }, calls)
  end)

  it("come from capabilities and run options too", function()
    local cap = lash.capability { name = "policy", guardrails = { output = { function() return "capability says no" end } } }
    local a = lash.agent { model = function() return "x" end, capabilities = { cap } }
    local ok, err = pcall(a.run, a, "q")
    assert.is_false(ok)
    assert.matches("capability says no", err.message)
    local b = lash.agent { model = function() return "x" end }
    ok, err = pcall(b.run, b, "q", { guardrails = { input = { function() return "run says no" end } } })
    assert.is_false(ok)
    assert.matches("run says no", err.message)
  end)
end)
