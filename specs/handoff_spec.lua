-- Handoffs, against the OpenAI Agents SDK's documented behaviour
-- (docs/handoffs.md there): `transfer_to_<snake name>` tools described
-- as "Handoff to the X agent to handle the request. <handoff_description>",
-- the new agent takes over the conversation with the whole history, the
-- accepted call's output is {"assistant": "<name>"}, a second handoff in
-- the same turn is answered "Multiple handoffs detected, ignoring this
-- one.", on_handoff gets the model's input, input_filter changes what the
-- next agent sees.
local lash = require "lash"
local json = require "lash.json"
local collector = require("helpers.events").collector
local of_type = require("helpers.events").of_type

local function last_results(m)
  for i = #m, 1, -1 do
    if m[i].role == "user" and m[i].parts[1] and m[i].parts[1].type == "tool_result" then return m[i].parts end
  end
end

-- A model playing its responses in order, whatever the run's step (after
-- a handoff the run's step goes on counting).
local function seq(responses)
  local n = 0
  return function(m, info)
    n = n + 1
    local r = assert(responses[n], "no response " .. n)
    if type(r) == "function" then return r(m, info) end
    return r
  end
end

local function names(tools)
  local out = {}
  for i, t in ipairs(tools) do out[i] = t.name end
  table.sort(out)
  return out
end

describe("handoffs", function()
  it("give the model transfer_to_ tools and let the other agent take over with the same history", function()
    local billing_saw
    local billing = lash.agent { name = "Billing agent", handoff_description = "Invoices and payments.",
      instructions = "You do billing.",
      tools = { lash.tool { name = "invoice", handler = function() return "INV-1" end } },
      model = seq {
        function(m, info)
          billing_saw = { n = #m, instructions = info.instructions, tools = names(info.tools),
                          first = m[1].parts[1].text }
          return { tool_calls = { { name = "invoice", args = {} } } }
        end,
        function(m) return "billing says " .. last_results(m)[1].content end } }
    local refund = lash.agent { name = "Refund Agent", model = "test" }
    local offered
    local triage = lash.agent { name = "Triage agent", instructions = "Route the request.",
      handoffs = { billing, lash.handoff { agent = refund } },
      model = lash.script_model {
        function(_, info)
          offered = info.tools
          return { tool_calls = { { name = "transfer_to_billing_agent", args = {}, id = "h1" } } }
        end } }
    local events, on_event = collector()
    local res = triage:run("Where is my invoice?", { on_event = on_event })
    assert.same({ "transfer_to_billing_agent", "transfer_to_refund_agent" }, names(offered))
    for _, t in ipairs(offered) do
      if t.name == "transfer_to_billing_agent" then
        assert.equal("Handoff to the Billing agent agent to handle the request. Invoices and payments.", t.description)
      else
        assert.equal("Handoff to the Refund Agent agent to handle the request. ", t.description)
      end
    end
    assert.equal("billing says INV-1", res.output)
    assert.equal("Billing agent", res.agent)
    -- the whole history, the new agent's instructions and tools (and its handoffs: none)
    assert.equal(3, billing_saw.n)
    assert.equal("Where is my invoice?", billing_saw.first)
    assert.equal("You do billing.", billing_saw.instructions)
    assert.same({ "invoice" }, billing_saw.tools)
    assert.equal(json.encode_canonical { assistant = "Billing agent" }, res.messages[3].parts[1].content)
    local h = of_type(events, "handoff")
    assert.equal(1, #h)
    assert.same({ "Triage agent", "Billing agent", "h1" }, { h[1].from, h[1].to, h[1].id })
    assert.equal("Billing agent", of_type(events, "run_end")[1].agent)
  end)

  it("take the first handoff of a turn and run its other calls", function()
    local a = lash.agent { name = "A", model = function() return "A here" end }
    local b = lash.agent { name = "B", model = function() return "B here" end }
    local ran = false
    local front = lash.agent { name = "front", handoffs = { a, b },
      tools = { lash.tool { name = "side", handler = function() ran = true return "side done" end } },
      model = lash.script_model { { tool_calls = {
        { name = "transfer_to_b", args = {}, id = "1" }, { name = "side", args = {}, id = "2" },
        { name = "transfer_to_a", args = {}, id = "3" } } } } }
    local res = front:run("go")
    assert.equal("B here", res.output)
    assert.is_true(ran)
    local parts = res.messages[3].parts
    assert.equal('{"assistant":"B"}', parts[1].content)
    assert.equal("side done", parts[2].content)
    assert.equal("Multiple handoffs detected, ignoring this one.", parts[3].content)
  end)

  it("call on_handoff with the model's input, apply input_filter to what the next agent sees, and go back and forth", function()
    local got, seen_by_b = nil, nil
    local front
    local b = lash.agent { name = "B", handoffs = {}, model = seq {
      function(m)
        seen_by_b = #m
        return { tool_calls = { { name = "transfer_to_front", args = {} } } }
      end } }
    front = lash.agent { name = "front", handoffs = {
      lash.handoff { agent = b, parameters = { type = "object", properties = { reason = { type = "string" } },
                                               required = { "reason" } },
                     on_handoff = function(_, args) got = args.reason end,
                     input_filter = function(messages) return { messages[1] } end } },
      model = seq {
        { tool_calls = { { name = "transfer_to_b", args = { reason = "needs B" } } } },
        function(m) return "front again after " .. #m .. " messages" end } }
    table.insert(b.handoffs, front)
    local res = front:run("hello")
    assert.equal("needs B", got)
    -- B saw the prompt only (the filter), then nothing else yet
    assert.equal(1, seen_by_b)
    assert.equal("front again after 5 messages", res.output)
    assert.equal(6, #res.messages)
    assert.equal("front", res.agent)
  end)

  it("count every agent's requests against max_steps, and work in the run's sandbox", function()
    local loop_a, loop_b = {}, {}
    loop_a = lash.agent { name = "a", handoffs = { }, model = function() return { tool_calls = { { name = "transfer_to_b", args = {} } } } end }
    loop_b = lash.agent { name = "b", handoffs = { loop_a }, model = function() return { tool_calls = { { name = "transfer_to_a", args = {} } } } end }
    table.insert(loop_a.handoffs, loop_b)
    local ok, err = pcall(loop_a.run, loop_a, "go", { limits = { max_steps = 5 } })
    assert.is_false(ok)
    assert.equal("max_steps", err.limit)
  end)

  it("refuse what is not an agent, and check lash.handoff's fields", function()
    local ok, err = pcall(lash.agent, { model = "test", handoffs = { "billing" } })
    assert.is_false(ok)
    assert.matches("handoffs%[1%] must be an agent or a lash.handoff", err)
    ok, err = pcall(lash.handoff, { agent = lash.agent { model = "test" }, tool_nmae = "x" })
    assert.matches("unknown field 'tool_nmae'", err)
    ok, err = pcall(lash.handoff, { agent = "x" })
    assert.matches("'agent' must be an agent", err)
  end)

  it("hide a handoff that is not enabled", function()
    local b = lash.agent { name = "B", model = "test" }
    local offered
    local front = lash.agent { handoffs = { lash.handoff { agent = b, enabled = function() return false end } },
      model = function(_, info) offered = #info.tools return "no" end }
    front:run("x")
    assert.equal(0, offered)
  end)
end)
